/* cli_summary: the short summary `gpumemprof run` prints on stderr when the command ends: per trace
 * and per device the peak allocated (when, and the ranges that held most of it), peak reserved,
 * allocation count and leaked bytes; lost events; notices (why nothing was recorded); the command
 * to run next. */
#ifndef GMP_CLI_SUMMARY_H
#define GMP_CLI_SUMMARY_H

#include <stddef.h>
#include <stdio.h>

/* Prints the summary of the traces (paths) of one run. */
void gmp_cli_print_run_summary(FILE *f, const char *const *traces, size_t n);

#endif
