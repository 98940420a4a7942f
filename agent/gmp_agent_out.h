/* gmp_agent_out: the trace file of this process: expands the output pattern and creates the file
 * safely (O_EXCL|O_NOFOLLOW, mode 0600; an existing file is never overwritten unless forced, a
 * symbolic link never followed). */
#ifndef GMP_AGENT_OUT_H
#define GMP_AGENT_OUT_H

#include <stddef.h>

/* The rank named by RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK; -1 when none is set
 * or the value is not a number. */
long gmp_agent_rank(void);

/* Expands pattern for counter value n: %p pid, %h host name, %r rank (0 when none), %n n, %% a
 * percent sign. Returns 0, or -1 when the result does not fit or the pattern has an unknown %. */
int gmp_agent_expand(const char *pattern, unsigned n, char *out, size_t outlen);

/* Creates the trace file. With %n in the pattern, the first free n from 0 is used. With suffix
 * (GPUMEMPROF_OUTPUT_SUFFIX, set by run for a name without %p %n %r), a name another process of
 * the command already took becomes NAME.2.zst, NAME.3.zst ... (".N" before a final ".zst"), so
 * that every process is recorded; a symbolic link at the name is still refused. Returns the
 * descriptor, or -1 with a message in err; path receives the path created (or tried). */
int gmp_agent_create(const char *pattern, int force, int suffix, char *path, size_t pathlen,
                     char *err, size_t errlen);

/* Adds this process to the list `gpumemprof run` keeps of the command's CUDA processes (the file
 * named by GPUMEMPROF_RUN_LOG, which run created; nothing when it is unset or not a regular file
 * of this user): one line "trace|lost TAB pid TAB path-or-reason TAB command". */
void gmp_agent_run_log(int recorded, const char *what);

#endif
