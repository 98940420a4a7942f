/* gmp_sampler: a thread that records each device's memory as the driver sees it (SAMPLE records):
 * free and total from NVML (loaded with dlopen, never linked) with this process's own use, or,
 * without NVML, from cuMemGetInfo on the device's primary context when the program has already
 * made it active (the sampler never creates a context, so it does not change what the program
 * sees). Says once, on stderr and in a NOTICE, when neither source exists. */
#ifndef GMP_SAMPLER_H
#define GMP_SAMPLER_H

#include "gmp_sink.h"

/* Starts sampling every interval_ms (> 0). Returns 0, -1 when the thread cannot start. */
int gmp_sampler_start(const gmp_sink *sink, unsigned interval_ms);

/* Takes one more sample, stops the thread and waits for it. Idempotent. */
void gmp_sampler_stop(void);

#endif
