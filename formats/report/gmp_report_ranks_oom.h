/* gmp_report_ranks_oom: an out-of-memory error seen across the ranks of one job (docs/report.md,
 * "An OOM across ranks"). When a report covers several traces and one of them recorded an OOM,
 * the rank that failed first is put beside the healthy ranks at the same moment of the training
 * loop: the same iteration (the count of the repeated range or MARK the analysis found,
 * gmp_analysis `iter`), else the same wall-clock time (through each trace's anchor, start_wall_ns
 * paired with start_trace_ns). For each rank: the device's allocated and reserved bytes, what the
 * pool held free (reserved - allocated: fragmentation's room) and the memory outside the allocator
 * (driver samples), and the live bytes per range path; then what differs on the failing rank: the
 * ranges that hold more than the median of the healthy ranks, fragmentation, or memory outside the
 * allocator.
 *
 * The per-range figures at a given iteration are not in the report model (it keeps whole-trace
 * statistics), so this reads the traces concerned once more, one at a time (the failing one up
 * to its OOM, and at most GMP_RANKS_OOM_MAX_COMPARED healthy ones): its memory is that of one
 * replay plus a table of range paths per compared rank. Only gpumemprof trace files are read
 * again; a rank given as a PyTorch snapshot or an Nsight Systems export is left out of the
 * comparison. */
#ifndef GMP_REPORT_RANKS_OOM_H
#define GMP_REPORT_RANKS_OOM_H

#include "gmp_doc.h"
#include "gmp_report.h"

#define GMP_RANKS_OOM_MAX_COMPARED 64 /* healthy ranks compared (evenly spaced when more) */
#define GMP_RANKS_OOM_MAX_RANGES 8    /* ranges listed (those that differ most) */

typedef struct gmp_ranks_oom gmp_ranks_oom;

/* Computes the comparison for doc (after every trace was replayed) and keeps it in doc->ranks_oom
 * (NULL when there is nothing to compare: one trace, no OOM, no healthy rank). Errors other than
 * running out of memory leave it NULL; a trace that cannot be read again is left out. */
gmp_err gmp_report_ranks_oom_compute(gmp_report_doc *doc);

void gmp_report_ranks_oom_free(gmp_ranks_oom *r);

/* The section "An OOM across ranks" (JSON: "ranks_oom") under parent; nothing when doc has no
 * comparison. */
void gmp_report_ranks_oom_build(gmp_doc *d, gmp_doc_block *parent, const gmp_report_doc *doc);
/* The same section for a comparison made by either function (NULL: nothing). */
void gmp_ranks_oom_section(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *r);
/* Its one-line finding (the cross-rank view's Findings block): the failing rank, the iteration,
 * what differs, a reference to the section. JSON: an element of "findings" with kind
 * "ranks_oom", differs_by and json_path. */
void gmp_ranks_oom_finding(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *r);

/* What gmp_ranks_oom_from_summaries found. */
typedef enum gmp_ranks_oom_status {
    GMP_RANKS_OOM_NONE = 0,         /* no rank ran out of memory, or every rank did */
    GMP_RANKS_OOM_DONE,             /* compared */
    GMP_RANKS_OOM_NO_FAILING_TRACE, /* the failing rank's trace cannot be read here */
    GMP_RANKS_OOM_NO_HEALTHY_TRACE, /* no healthy rank's trace could be read and aligned */
} gmp_ranks_oom_status;

/* The same comparison for the cross-rank view, from the n per-rank summaries (in the inputs'
 * order) and the traces their paths name, read again one at a time: the failing rank (the
 * earliest OOM on the wall clock), the first healthy rank when the failing one has no iteration,
 * and at most GMP_RANKS_OOM_MAX_COMPARED healthy ranks evenly spaced over the inputs' order.
 * Memory: the failing trace's model (and the first healthy one's when it gives the iteration)
 * and one replay at a time, plus the compared ranks' range tables; nothing per trace beyond the
 * summaries. *out: NULL unless *status is GMP_RANKS_OOM_DONE. Errors: only
 * GMP_ERR_NOMEM (a trace that cannot be read is a status). */
struct gmp_rank_summary;
gmp_err gmp_ranks_oom_from_summaries(const struct gmp_rank_summary *s, size_t n,
                                     const gmp_report_opts *ropts, gmp_ranks_oom **out,
                                     gmp_ranks_oom_status *status);

#endif
