/* cli_replay: the one path of the commands that replay recordings (report, convert, diff; diagnose
 * runs report in its own process).
 *
 * gmp_cli_replay_all opens every input by content (cli_input.h: a snapshot or an export is
 * imported) with a reader over its trace, and reads its header; then the command opens its
 * outputs; then each trace is replayed once with the command's outputs attached to its replay;
 * then the inputs are closed and the command finishes its outputs. Everything that can fail early
 * fails before any replay: the inputs first, then the outputs. Each failure prints one line on
 * stderr, "gpumemprof CMD: PATH: message", and stops at once (the exit status is 1); a trace that
 * is cut short replays to its end with a warning line. */
#ifndef GMP_CLI_REPLAY_H
#define GMP_CLI_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "cli_input.h"
#include "gmp_reader.h"
#include "gmp_replay.h"

/* One trace on the path: what the outputs are told about it. */
typedef struct gmp_cli_trace {
    const char *path; /* as given */
    size_t index;     /* among the inputs, from 0 */
    gmp_cli_input *in;
    gmp_reader *reader; /* open from its input's opening to the end of its replay */
    const gmp_rec_header *header;
    uint32_t pid;       /* the trace's pid, made unique among the traces (+1000000 per clash) */
    int64_t offset_ns;  /* its start after the earliest trace's, on the wall clock when every
                           trace has one (else 0) */
    uint64_t bytes;     /* of the trace read (the progress bar's measure) */
    char label[128];    /* "" for one trace; else "rank R, pid P" or "pid P" (the trace's pid) */
    gmp_replay *replay; /* while it is replayed */
} gmp_cli_trace;

typedef struct gmp_cli_replay_spec {
    const char *cmd;     /* "report": in messages, and the progress bar's label */
    unsigned open_flags; /* gmp_cli_input_open_flags' */
    /* Each input opened just before its replay and closed after it (only one imported recording
     * exists at a time); no header is read before; pid, offset_ns and label are the trace's own
     * and empty. */
    int one_at_a_time;
    int progress;        /* a progress bar on stderr when it is a terminal */
    int warn_incomplete; /* "CMD: warning: PATH: completeness" after a trace found incomplete */
    void *ctx;           /* the callbacks' first argument */
    /* Every input is open (not with one_at_a_time): opens the outputs. Nonzero stops (it said why
     * on stderr). NULL: nothing to open. */
    int (*open_outputs)(void *ctx, gmp_cli_trace *traces, size_t n);
    /* Before a trace's replay runs: attaches the outputs to t->replay. NULL: none. */
    gmp_err (*attach)(void *ctx, gmp_cli_trace *t);
    /* After a trace's replay ran to its end (before the incomplete warning). An error stops, with
     * msg (else the error's own words) as the message. NULL: nothing. */
    gmp_err (*replayed)(void *ctx, gmp_cli_trace *t, char *msg, size_t msglen);
    /* Last, the inputs closed: status is 0 when every trace was replayed, else 1 (after a
     * message; also when open_outputs stopped). Finishes (or discards) the outputs and returns
     * the command's exit status. NULL: status is returned. */
    int (*finish)(void *ctx, int status);
} gmp_cli_replay_spec;

/* The whole path for paths[0..n) (n >= 1). Returns the exit status (finish's when given). */
int gmp_cli_replay_all(char **paths, size_t n, const gmp_cli_replay_spec *spec);

#endif
