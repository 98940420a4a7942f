/* gmp_sink: what the agent gives its collectors (CUPTI, NVTX, sampler) to record with.
 * Collectors never call into agent/ directly (layers: agent -> collectors -> formats); the agent
 * fills one gmp_sink at start and hands it to each collector's init function. */
#ifndef GMP_SINK_H
#define GMP_SINK_H

#include <stdint.h>

#include "gmp_writer.h"

typedef struct gmp_sink {
    gmp_writer *w; /* the trace being written; never NULL while a collector is active */
    /* The calling thread's producer handle, created on first use; NULL when recording is off
     * (disabled, after shutdown, in a forked child) or when the agent is already busy on this
     * thread (re-entrancy: the collector must then record nothing and return at once). Every
     * non-NULL return must be paired with one call to leave(). */
    gmp_wthread *(*enter)(void);
    void (*leave)(void);
    /* One line on stderr prefixed "gpumemprof: " (never stdout); silenced by GPUMEMPROF_QUIET. */
    void (*log)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    /* The same for an error: memory that is not recorded; printed even when quiet. */
    void (*error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
} gmp_sink;

#endif
