/* cli_progress: the progress bar of the commands that replay traces (report, convert): on stderr,
 * only when it is a terminal, only after the first second, at most ten times a second. Register
 * gmp_cli_progress_ops on each trace's replay with the gmp_cli_progress as context. */
#ifndef GMP_CLI_PROGRESS_H
#define GMP_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_reader.h"
#include "gmp_replay.h"

typedef struct gmp_cli_progress {
    const char *cmd;    /* "report", "convert": the bar's label */
    int enabled, shown; /* enabled: set by gmp_cli_progress_start */
    double t0, last_draw;
    uint64_t total_bytes, done_bytes; /* all traces; the traces before the current one */
    size_t index, count;              /* current trace, number of traces */
    gmp_reader *r;                    /* the current trace's reader */
    uint64_t calls;
} gmp_cli_progress;

/* Zeroes p and starts timing; the bar shows when wanted (not --no-progress) and stderr is a
 * terminal. */
void gmp_cli_progress_start(gmp_cli_progress *p, const char *cmd, int wanted, size_t count);

extern const gmp_replay_ops gmp_cli_progress_ops;

/* Erases the bar if it is shown. */
void gmp_cli_progress_clear(gmp_cli_progress *p);

#endif
