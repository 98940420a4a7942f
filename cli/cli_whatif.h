/* cli_whatif: one what-if replay of an open recording (formats/replay/gmp_whatif.h), shared by
 * `gpumemprof whatif` and the report's out-of-memory verdict (cmd_report.c): the settings tried
 * (the recording's own first: a snapshot's allocator_settings, or those of the
 * TRACE.torch.pickle beside a trace), a first pass for what the recording says of each device
 * (gmp_whatif_scan: reserved, segments, the capacity its OOM shows), the replay under each
 * device's capacity, and, when some device fits under no setting, the same replay without a
 * capacity (what the run would need: the smallest card). Three passes over the recording at most;
 * memory bounded by the live tensors (gmp_whatif.h). */
#ifndef GMP_CLI_WHATIF_H
#define GMP_CLI_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "cli_input.h"
#include "cli_replay.h"
#include "gmp_report.h"
#include "gmp_whatif.h"
#include "gmp_whatif_advice.h"

#define GMP_CLI_WHATIF_MAX_CONFS 32

typedef struct gmp_cli_whatif {
    size_t nconfigs;
    const char *names[GMP_CLI_WHATIF_MAX_CONFS]; /* [0] points into own_name */
    gmp_cca_config cfgs[GMP_CLI_WHATIF_MAX_CONFS];
    char own_name[600];
    int own_refused;          /* the recording's own settings are not modelled */
    gmp_whatif_recorded *rec; /* GMP_WHATIF_MAX_DEVICES */
    gmp_whatif w;             /* under each device's capacity */
    gmp_whatif open;          /* without a capacity (has_open) */
    int has_open;
    int async;       /* the tensors are cudaMallocAsync allocations */
    char path[4096]; /* the recording given (a trace's snapshot beside it) */
    gmp_cli_input_kind kind;
} gmp_cli_whatif;

/* The settings: the recording's own (read by gmp_cli_whatif_run: an imported snapshot's header
 * keeps them, a trace's TRACE.torch.pickle has them), then confs[0..nconf) (the standard set when
 * nconf is 0). -1 with one line in err for a bad CONF
 * (the CONF named). */
int gmp_cli_whatif_setup(gmp_cli_whatif *x, const char *path, gmp_cli_input_kind kind,
                         const char *const *confs, size_t nconf, char *err, size_t errlen);
/* Runs the passes over in's trace (in's kind replaces setup's). capacity 0: each device's own
 * (gmp_whatif_run). */
gmp_err gmp_cli_whatif_run(gmp_cli_whatif *x, const gmp_cli_input *in, uint64_t capacity, char *msg,
                           size_t msglen);
/* The open replay of device i, NULL when not run. */
const gmp_whatif_device *gmp_cli_whatif_open_device(const gmp_cli_whatif *x, size_t i);
void gmp_cli_whatif_free(gmp_cli_whatif *x);

/* The report's what-if (formats/report/gmp_report_whatif.h): for a trace rt that ran out of
 * memory and is known to hold PyTorch's tensors (rt->torch_figures: a snapshot, a --torch-history
 * merge; not a --torch-alloc async trace, whose cudaMallocAsync calls the report cannot tell from
 * another program's), the passes above over t's recording (read again: a streamed snapshot is
 * imported again, a pipe cannot be and says so), with the recording's own settings and the standard
 * set; the result goes to rt->whatif. Nothing for a trace without an OOM. */
void gmp_cli_whatif_report(gmp_report_trace *rt, const gmp_cli_trace *t);

#endif
