/* gmp_agent_out: the trace file of this process: expands the output pattern and creates the file
 * safely (O_EXCL|O_NOFOLLOW, mode 0600; an existing file is never overwritten unless forced, a
 * symbolic link never followed). */
#ifndef GMP_AGENT_OUT_H
#define GMP_AGENT_OUT_H

#include <stddef.h>

/* This process's place in a distributed job, as its launcher set it in the environment. */
typedef struct gmp_agent_rankinfo {
    long rank;       /* -1 when no launcher named one */
    long local_rank; /* -1 when unknown */
    long world_size; /* 0 when unknown */
    const char *var; /* the variable rank came from ("RANK", "SLURM_PROCID"...); "" when none */
} gmp_agent_rankinfo;

/* The rank identity from the first launcher whose rank variable holds a number, in this order:
 * torchrun (RANK, LOCAL_RANK, WORLD_SIZE), Open MPI's mpirun (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE), Slurm's srun (SLURM_PROCID, SLURM_LOCALID,
 * SLURM_NTASKS), a PMI launcher (PMI_RANK, PMI_SIZE). Local rank and world size come from the same
 * launcher as the rank, never mixed with another's (torchrun run by srun: RANK is the rank). */
gmp_agent_rankinfo gmp_agent_rank_info(void);

/* The rank of gmp_agent_rank_info; -1 when none. */
long gmp_agent_rank(void);

/* Expands pattern for counter value n: %p pid, %h host name, %r rank (0 when none), %l local rank
 * (0 when none), %n n, %% a percent sign. Returns 0, or -1 when the result does not fit or the
 * pattern has an unknown %. */
int gmp_agent_expand(const char *pattern, unsigned n, char *out, size_t outlen);

/* Creates the trace file. With %n in the pattern, the first free n from 0 is used. With suffix
 * (GPUMEMPROF_OUTPUT_SUFFIX, set by run for a name without %p %n %r), a name another process of
 * the command already took becomes NAME.2.zst, NAME.3.zst ... (".N" before a final ".zst"), so
 * that every process is recorded; a symbolic link at the name is still refused. A name with %r
 * or %l but no %p or %n (a rank's name: a rerun of the job, or a second process of one rank,
 * finds it taken) is handled so too; with force, it replaces an existing regular file that no
 * live process holds (the creator of a rank's file keeps an flock on it) and no process of this
 * run wrote (GPUMEMPROF_RUN_LOG). Returns the descriptor,
 * or -1 with a message in err; path receives the path created (or tried). */
int gmp_agent_create(const char *pattern, int force, int suffix, char *path, size_t pathlen,
                     char *err, size_t errlen);

/* Adds this process to the list `gpumemprof run` keeps of the command's CUDA processes (the file
 * named by GPUMEMPROF_RUN_LOG, which run created; nothing when it is unset or not a regular file
 * of this user): one line "trace|lost TAB pid TAB path-or-reason TAB command". */
void gmp_agent_run_log(int recorded, const char *what);

#endif
