/* cli_report_ranks: `report` over the ranks of a job (formats/report/gmp_report_ranks.h): each
 * trace replayed by a small pool of threads, reduced to its per-rank summary and freed before the
 * next (memory grows with the number of traces by a summary each), then the cross-rank view, or
 * the summaries themselves as JSON (--summary-only); or the view reduced from such JSON files
 * (--reduce). The output does not depend on the number of threads: summaries are kept in the
 * inputs' order, and messages are printed in that order once every trace is read. */
#ifndef GMP_CLI_REPORT_RANKS_H
#define GMP_CLI_REPORT_RANKS_H

#include <stddef.h>
#include <stdio.h>

#include "gmp_report.h"

typedef struct gmp_cli_ranks_opts {
    const char *cmd;      /* "report": in messages */
    const char *out_path; /* NULL or "-": stdout */
    const char *format;   /* text, markdown, html, json */
    int color;            /* -1: when the output is a terminal (text) */
    gmp_report_view view;
    gmp_report_opts ropts;
    const char *debug_dir;
    int summary_only; /* write the summaries (JSON) instead of the view */
    int reduce;       /* the paths are summary files, not traces */
    int jobs;         /* threads; 0: one per CPU, at most 8 */
    FILE *out;        /* write here (not closed) instead of out_path */
    int brief;        /* the short form: the header, the findings and the outliers only */
} gmp_cli_ranks_opts;

/* Returns the exit status (0, or 1 after a message on stderr). */
int gmp_cli_report_ranks(char **paths, size_t n, const gmp_cli_ranks_opts *o);

#endif
