/* gmp_agent_opts: the agent's settings, read from GPUMEMPROF_* environment variables (set by
 * `gpumemprof run`, or by hand). Every value is bounded and validated: a bad value disables the
 * agent with one message, it never crashes or misleads the program. */
#ifndef GMP_AGENT_OPTS_H
#define GMP_AGENT_OPTS_H

#include <stddef.h>
#include <stdint.h>

enum { GMP_STACKS_NONE = 0, GMP_STACKS_NATIVE = 1, GMP_STACKS_PYTHON = 2, GMP_STACKS_ALL = 3 };

typedef struct gmp_agent_opts {
    char output[1024];      /* GPUMEMPROF_OUTPUT: path pattern (%p %h %r %n %%) */
    int force;              /* GPUMEMPROF_FORCE: overwrite an existing file */
    int suffix;             /* GPUMEMPROF_OUTPUT_SUFFIX: a fixed name taken: NAME.2.zst ... */
    int stacks;             /* GPUMEMPROF_STACKS: none | native | python | all | auto (default) */
    int stacks_auto;        /* auto: native, plus Python frames when the process runs CPython */
    int unwind;             /* GPUMEMPROF_STACK_UNWIND: libunwind (default) | glibc | fp */
    unsigned stack_depth;   /* GPUMEMPROF_STACK_DEPTH: 1..256 */
    unsigned sample_ms;     /* GPUMEMPROF_SAMPLE_INTERVAL_MS: 0 (off) .. 3600000 */
    uint64_t buffer_bytes;  /* GPUMEMPROF_BUFFER_SIZE: trace buffers, 1 MiB .. 4 GiB */
    unsigned flush_ms;      /* GPUMEMPROF_FLUSH_INTERVAL_MS: 1 .. 60000 */
    char cupti[1024];       /* GPUMEMPROF_CUPTI: explicit libcupti path */
    int nvtx;               /* GPUMEMPROF_NVTX: 0 disables NVTX recording */
    int activity;           /* GPUMEMPROF_ACTIVITY: 0 disables CUPTI activity records */
    int quiet;              /* GPUMEMPROF_QUIET: only errors on stderr */
    uint64_t alert_bytes;   /* GPUMEMPROF_ALERT_THRESHOLD: "40G" (bytes) ... */
    unsigned alert_percent; /* ... or "90%" of each device's memory; both 0: no alert */
    /* GPUMEMPROF_ACTIVITY_BUFFER: CUPTI activity buffers held at once, 1 MiB .. 1 GiB (default
     * 32 MiB); beyond it CUPTI drops records, which are counted (LOST, reason cupti-dropped) */
    uint64_t activity_bytes;
} gmp_agent_opts;

/* Fills o from the environment. Returns 0, or -1 with a one-line message in err. */
int gmp_agent_opts_read(gmp_agent_opts *o, char *err, size_t errlen);

/* Writes the settings as "key=value" words (for the trace header). */
void gmp_agent_opts_format(const gmp_agent_opts *o, char *buf, size_t n);

#endif
