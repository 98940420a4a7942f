/* cli_cmds: the commands of the gpumemprof program. Each command lives in its own file
 * (cli/cmd_NAME.c) and is listed once in the table of cli/gpumemprof.c. A command receives its
 * own table entry (for messages and help) and its arguments with argv[0] = the command name; it
 * returns the process exit status: 0 success, 1 failure (one message on stderr), 2 bad usage. */
#ifndef GMP_CLI_CMDS_H
#define GMP_CLI_CMDS_H

#include <stddef.h>

#include "cli_opts.h"

int gmp_cmd_dump(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_run(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_report(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_convert(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_import(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_diff(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_info(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_diagnose(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_view(const gmp_cli_cmd_info *cmd, int argc, char **argv);
int gmp_cmd_whatif(const gmp_cli_cmd_info *cmd, int argc, char **argv);

/* A PYTORCH_CUDA_ALLOC_CONF setting as `whatif --alloc-conf` reads it (cli/cmd_whatif.c), for the
 * views' --whatif: 0, or -1 with one line in err. */
struct gmp_cca_config;
int gmp_cli_whatif_conf(const char *conf, struct gmp_cca_config *cfg, char *err, size_t errlen);

/* run --view (cli/cmd_view.c): the viewer beside the running program. _new before the fork (the
 * traces' glob pattern, the run's start time, the log file in the current directory), _child in
 * the child before exec (its output to the log, stdin from /dev/null), _wait in the parent: the
 * viewer follows the traces as they appear; returns 1 when it reaped pid (its wait status in
 * *status), else 0 and the caller waits. _free says where the log is. */
typedef struct gmp_cli_run_view gmp_cli_run_view;
gmp_cli_run_view *gmp_cli_run_view_new(const char *glob_pattern, long long t0_sec);
void gmp_cli_run_view_child(const gmp_cli_run_view *v);
int gmp_cli_run_view_wait(gmp_cli_run_view *v, int pid, int *status);
void gmp_cli_run_view_free(gmp_cli_run_view *v);

#endif
