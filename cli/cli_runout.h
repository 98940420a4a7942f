/* cli_runout: what `gpumemprof run` does around its outputs besides the pattern itself: the
 * directory of --output checked before the command starts, and the run log, a file the agent of
 * every CUDA process of the command adds one line to (its trace, or why it has none), so that the
 * summary names every such process, recorded or not (agent/gmp_agent_out.h). */
#ifndef GMP_CLI_RUNOUT_H
#define GMP_CLI_RUNOUT_H

#include <stddef.h>

/* One CUDA process of the command, as its agent reported it. */
typedef struct gmp_cli_run_proc {
    int recorded; /* 1: what is its trace's path; 0: what is why nothing was recorded */
    long pid;
    char *what;
    char *cmd; /* its command line, arguments separated by spaces */
} gmp_cli_run_proc;

/* Checks that the directory the (absolute) output pattern names exists and can be written: the
 * part before the first component with %p, %n or %r when there is one, %h read as this host.
 * Returns 0, or -1 with a one-line message in msg. */
int gmp_cli_run_check_dir(const char *pattern, char *msg, size_t msglen);

/* For a pattern without %p, %n or %r (one name for every process): the name, %h and %%
 * expanded, in out; returns 1. Returns 0 for other patterns (or a name that does not fit). */
int gmp_cli_run_fixed_name(const char *pattern, char *out, size_t outlen);

/* Creates an empty run log (mode 0600, in $TMPDIR or /tmp); path receives its name. Returns 0 or
 * -1. */
int gmp_cli_runlog_create(char *path, size_t pathlen);

/* The processes of a run log, in the order they started recording (or failed to). Returns their
 * count (0 also when the log cannot be read); *out is freed with gmp_cli_runlog_free. */
size_t gmp_cli_runlog_read(const char *path, gmp_cli_run_proc **out);
void gmp_cli_runlog_free(gmp_cli_run_proc *p, size_t n);

#endif
