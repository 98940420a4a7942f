/* gmp_run_defaults: the defaults and bounds of the recording options, written once for the two
 * sides that apply them: `gpumemprof run` (cli/cmd_run.c checks its options against them before
 * the program starts and passes them as GPUMEMPROF_* variables) and the agent
 * (agent/gmp_agent_opts.c reads the same variables in the profiled process, which may have been
 * started without `run`, and falls back on the same defaults). The help of `run`, its messages and
 * docs/run.md state these values in words: change them together. */
#ifndef GMP_RUN_DEFAULTS_H
#define GMP_RUN_DEFAULTS_H

/* GPUMEMPROF_OUTPUT, --output: the trace file's pattern (%p pid, %h host, %r rank, %n counter). */
#define GMP_RUN_OUTPUT "gpumemprof.%p.zst"
/* GPUMEMPROF_OUTPUT_RANK: the default pattern instead of GMP_RUN_OUTPUT for a process whose
 * environment names a rank (torchrun, srun, mpirun: agent/gmp_agent_out.h). */
#define GMP_RUN_OUTPUT_RANK "gpumemprof.%h.rank%r.zst"

/* GPUMEMPROF_STACK_DEPTH, --stack-depth: the deepest stack recorded, in frames. */
#define GMP_RUN_STACK_DEPTH 64
#define GMP_RUN_STACK_DEPTH_MIN 1
#define GMP_RUN_STACK_DEPTH_MAX 256

/* GPUMEMPROF_SAMPLE_INTERVAL_MS, --sample-interval: the device memory sample period; 0 disables
 * the sampling. */
#define GMP_RUN_SAMPLE_MS 50
#define GMP_RUN_SAMPLE_MS_MAX 3600000 /* one hour */

/* GPUMEMPROF_BUFFER_SIZE, --buffer-size: the memory for trace buffers, in bytes. */
#define GMP_RUN_BUFFER_BYTES (64ull << 20)
#define GMP_RUN_BUFFER_BYTES_MIN (1ull << 20)
#define GMP_RUN_BUFFER_BYTES_MAX (4ull << 30)

/* GPUMEMPROF_FLUSH_INTERVAL_MS, --flush-interval: buffered events are written at least this
 * often. */
#define GMP_RUN_FLUSH_MS 200
#define GMP_RUN_FLUSH_MS_MIN 1
#define GMP_RUN_FLUSH_MS_MAX 60000

/* GPUMEMPROF_ACTIVITY_BUFFER (the agent only): CUPTI activity buffers held at once, in bytes. */
#define GMP_RUN_ACTIVITY_BYTES (32ull << 20)
#define GMP_RUN_ACTIVITY_BYTES_MIN (1ull << 20)
#define GMP_RUN_ACTIVITY_BYTES_MAX (1ull << 30)

#endif
