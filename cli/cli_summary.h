/* cli_summary: the short summary `gpumemprof run` prints on stderr when the command ends: per trace
 * and per device the peak allocated (when, and the ranges that held most of it), peak reserved,
 * allocation count and leaked bytes; lost events; notices (why nothing was recorded); the command
 * to run next. */
#ifndef GMP_CLI_SUMMARY_H
#define GMP_CLI_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

#include "cli_runout.h"

/* Prints the summary of the traces (paths) of one run, then a line for each CUDA process of procs
 * that was not recorded, then the commands to run next on the traces that recorded something
 * (none when no trace did). started: the command could be started (when it could not, its error
 * was said, and no "no trace was written" line follows). */
void gmp_cli_print_run_summary(FILE *f, const char *const *traces, size_t n,
                               const gmp_cli_run_proc *procs, size_t nprocs, int started);

#endif
