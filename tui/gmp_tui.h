/* gmp_tui: `gpumemprof view`, a full-screen terminal viewer of recordings (docs/view.md).
 *
 * The CLI opens the recordings (traces as they are, snapshots and exports imported into temporary
 * traces) and hands over what readers open; the viewer builds its index of the first (then of
 * each one it switches to), opens at the peak of the first device, and runs until `q`. With
 * follow, traces still being written are read again as they grow. */
#ifndef GMP_TUI_H
#define GMP_TUI_H

#include <stddef.h>

typedef struct gmp_tui_opts {
    size_t ntraces;
    const char *const *names; /* what the screen calls each trace (the path given) */
    const char *const *paths; /* what a reader opens */
    int follow;               /* re-read the traces while they grow (until their END record) */
    int color;                /* 1: colours when the terminal has them; 0: none */
    const char *log_path;     /* the program's output (run --view); NULL none */
    /* follow: called about every 200 ms; returns 1 while the traced program runs, and may add
     * traces (appending to names/paths arrays it owns and raising *ntraces); NULL: none */
    int (*poll)(void *ctx, size_t *ntraces, const char *const **names, const char *const **paths);
    void *poll_ctx;
    /* --whatif: the reserve this setting's model of PyTorch's caching allocator replays
     * (gmp_whatif.h), drawn beside the recorded one; NULL none (not with follow) */
    const struct gmp_cca_config *whatif;
    const char *whatif_name;
} gmp_tui_opts;

/* Runs the viewer; returns the exit status (0 after `q`, 1 when the first trace cannot be read or
 * the terminal cannot be used, with one line in msg). */
int gmp_tui_run(const gmp_tui_opts *opts, char *msg, size_t msglen);

#endif
