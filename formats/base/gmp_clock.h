/* gmp_clock: the trace clock (CLOCK_MONOTONIC, ns) and the wall clock. */
#ifndef GMP_CLOCK_H
#define GMP_CLOCK_H

#include <stdint.h>
#include <time.h>

#define GMP_CLOCK_NAME "CLOCK_MONOTONIC"

static inline uint64_t gmp_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gmp_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
