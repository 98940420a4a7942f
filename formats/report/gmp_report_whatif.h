/* gmp_report_whatif: the what-if replay (formats/replay/gmp_whatif.h) of a trace that ran out of
 * memory, as the report holds and shows it: per OOM, whether an allocator setting would have
 * avoided it (fragmentation: the setting, its peak reserved against the capacity) or none does
 * (capacity: what the cheapest setting would need without that limit, and the smallest card),
 * with the table of settings under the OOM's "Out of memory, why" entry (docs/report.md). The
 * replay itself is run by the CLI (it reads the recording again: the report's own pass is one
 * replay of every record, the what-if needs one model per setting), only for a trace with an OOM;
 * the result is handed to the trace (gmp_report_trace.whatif), which owns it. */
#ifndef GMP_REPORT_WHATIF_H
#define GMP_REPORT_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_doc.h"
#include "gmp_whatif.h"
#include "gmp_whatif_advice.h"

typedef struct gmp_report_whatif {
    char why_not[256]; /* "" when the replay ran, else why it did not (a pipe, an error) */
    size_t nconfigs;
    char **names;    /* the settings' names; [0] the recording's own */
    gmp_whatif w;    /* under each device's capacity */
    gmp_whatif open; /* without a capacity (has_open) */
    int has_open;
    int async; /* the tensors are cudaMallocAsync allocations */
} gmp_report_whatif;

/* An empty result (why_not "", no device); NULL when memory is short. */
gmp_report_whatif *gmp_report_whatif_new(void);
/* Copies names[0..n). -1 when memory is short. */
int gmp_report_whatif_set_names(gmp_report_whatif *x, const char *const *names, size_t n);
void gmp_report_whatif_free(gmp_report_whatif *x);

/* The what-if line of an OOM on device dev, for the Findings ("what if: ..."), copied into d; a
 * NONE value when x (a trace's what-if, may be NULL) has nothing for that device. */
gmp_doc_val gmp_report_whatif_phrase(gmp_doc *d, const gmp_report_whatif *x, int32_t dev);
/* Under the OOM's block b: the "what if" item of kv (JSON: whatif_verdict, whatif_setting) and,
 * with table, the table of settings (JSON: whatif[]). Nothing when x (may be NULL) has nothing
 * for that device. */
void gmp_report_whatif_build(gmp_doc *d, gmp_doc_block *b, gmp_doc_block *kv,
                             const gmp_report_whatif *x, int32_t dev, int table);

#endif
