/* cmd_info_file: `gpumemprof info FILE...`: what each recording is (docs/info.md). */
#ifndef GMP_CMD_INFO_FILE_H
#define GMP_CMD_INFO_FILE_H

#include <stddef.h>

#include "cli_opts.h"

/* Describes each of paths[0..n) on stdout (text, or one JSON document when json): its kind, the
 * process, devices, time span, event counts and completeness. Returns the exit status: 0 when
 * every file was read (an incomplete one included), 1 when one could not be (its line on stderr;
 * the others are still described). */
int gmp_cli_info_files(const gmp_cli_cmd_info *cmd, int json, char **paths, size_t n);

#endif
