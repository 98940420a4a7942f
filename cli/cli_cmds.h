/* cli_cmds: the commands of the gpumemprof program. Each command lives in its own file
 * (cli/cmd_NAME.c) and is listed once in the table of cli/gpumemprof.c. A command receives its
 * own table entry (for messages and help) and its arguments with argv[0] = the command name; it
 * returns the process exit status: 0 success, 1 failure (one message on stderr), 2 bad usage. */
#ifndef GMP_CLI_CMDS_H
#define GMP_CLI_CMDS_H

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

#endif
