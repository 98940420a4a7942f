/* bench_trace: the large generated trace that bench_report and bench_view measure: two threads
 * with nested NVTX ranges (step, layer 0..7, forward/backward), cudaMalloc/cudaFree with a rolling
 * live set of 20,000 allocations over 64 stacks, a stream-ordered pool with its reserved size, a
 * driver sample every 4096 events, a SYNC every 65,536 events; written with the writer (no
 * thread). */
#ifndef GMP_BENCH_TRACE_H
#define GMP_BENCH_TRACE_H

#include <stdint.h>

extern const char *g_bench_name; /* the benchmark's name: messages and the trace's producer */

double gmp_bench_now_s(void); /* CLOCK_MONOTONIC, seconds */
_Noreturn void gmp_bench_die(const char *m);
/* Writes the trace of about nevents events to path; returns the events written. */
uint64_t gmp_bench_generate(const char *path, uint64_t nevents);

#endif
