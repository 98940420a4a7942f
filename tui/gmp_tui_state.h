/* gmp_tui_state: what the viewer shows right now (trace, device, cursor, window, tree, search),
 * shared by its panes (gmp_tui_draw.c) and its keys (gmp_tui_app.c). */
#ifndef GMP_TUI_STATE_H
#define GMP_TUI_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_tui.h"
#include "gmp_tui_model.h"
#include "gmp_tui_tree.h"

#define GMP_TUI_NOEV UINT64_MAX

typedef struct gmp_tui_trace {
    const char *name, *path;
    gmp_tui_model *m; /* NULL until built */
    char err[256];    /* why it cannot be shown */
    long long size;   /* file size when built (follow) */
    int complete;     /* it has its END record (follow stops) */
    /* --whatif: the recorded and replayed reserves (NULL: none, or not computed: werr says why) */
    struct gmp_whatif_reserve *whatif;
    char werr[256];
} gmp_tui_trace;

typedef struct gmp_tui_state {
    gmp_tui_trace *tr;
    size_t ntr, cur;
    size_t dev; /* index into the model's devices */
    uint64_t cursor;
    uint64_t win0, win1; /* the timeline's window (trace clock) */
    int by, show_internal;
    gmp_tui_tree *tree;
    gmp_tui_live *live;
    size_t nlive;
    uint64_t live_at; /* the cursor live was computed for; GMP_TUI_NOEV - 1: none */
    int live_ok;
    size_t sel, top; /* tree selection and first row shown */
    char search[128];
    unsigned char *match; /* per site: matches the search */
    size_t nmatch;
    char status[256];
    int help, show_log, follow, at_end;
    int running; /* run --view: the program still runs */
    const char *log_path;
    /* the allocation in focus: when it is freed (cached) */
    uint64_t focus_key, focus_at, focus_free;
    int32_t focus_dev;
    int focus_searched, focus_valid;
    size_t verdict_shown; /* the model's verdict the last v/V showed; SIZE_MAX none */
    int tl_cols;          /* columns of the last timeline drawn (cursor moves by column) */
    double last_build_s;
    const struct gmp_cca_config *whatif; /* --whatif (gmp_tui_opts) */
    const char *whatif_name;
} gmp_tui_state;

gmp_tui_model *gmp_tui_cur_model(const gmp_tui_state *s);
const gmp_tui_dev *gmp_tui_cur_dev(const gmp_tui_state *s);
/* "+1.234567 s" relative to the trace's first event. */
const char *gmp_tui_fmt_time(const gmp_tui_state *s, uint64_t t, char *buf, size_t n);
/* The time of the cursor's event (the first event's time when none). */
uint64_t gmp_tui_cursor_time(const gmp_tui_state *s);
/* --whatif: the replayed reserve of the current trace's device d, NULL when none. */
const struct gmp_whatif_series *gmp_tui_whatif_series(const gmp_tui_state *s, const gmp_tui_dev *d);
/* Draws every pane. */
void gmp_tui_draw(gmp_tui_state *s);

#endif
