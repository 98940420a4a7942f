/* gmp_cupti: the CUPTI collector. Loads libcupti with dlopen, subscribes to the memory APIs of the
 * runtime and driver domains and to resource callbacks, and (when the CUPTI found at run time has
 * the major version the agent was built against) to MEMORY2 and MEMORY_POOL activity records.
 * Every allocation and free the user's code makes is recorded once, from the callback of the
 * outermost API call (a runtime call and the driver calls inside it count once). */
#ifndef GMP_CUPTI_H
#define GMP_CUPTI_H

#include <stddef.h>

#include "gmp_sink.h"

typedef struct gmp_cupti_opts {
    const char *path;      /* explicit libcupti path (--cupti / GPUMEMPROF_CUPTI), or NULL */
    int activity;          /* enable activity records (when the version allows) */
    size_t activity_bytes; /* bound on outstanding activity buffers (default 32 MiB) */
    unsigned flush_ms;     /* ask CUPTI for completed activity buffers this often (0: only at
                              exit); the agent passes its trace flush interval */
} gmp_cupti_opts;

/* Loads CUPTI and subscribes. Returns 0 when recording, -1 when CUPTI cannot be used; why then
 * holds one line saying why (not found, no driver, another subscriber and its name, ...).
 * Warnings about degraded features go to sink->log and to NOTICE records. */
int gmp_cupti_start(const gmp_sink *sink, const gmp_cupti_opts *o, char *why, size_t whylen);

/* Delivers every pending activity record now (cuptiActivityFlushAll with the forced flag). */
void gmp_cupti_flush(void);

/* Flushes, then stops recording: later callbacks record nothing. Idempotent. */
void gmp_cupti_stop(void);

#endif
