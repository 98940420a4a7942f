/* gmp_tui_term: the terminal for `gpumemprof view` (ncursesw): setup, colours, and a restore that
 * always happens: at a normal end, at exit(), and on a signal that ends the process (Ctrl-C,
 * SIGTERM, SIGHUP, and the crash signals SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), whose handler
 * restores the terminal (endwin) and raises the signal again with its default action, so the
 * process still ends as the signal says (a core dump, status 128 + N). */
#ifndef GMP_TUI_TERM_H
#define GMP_TUI_TERM_H

/* Colour pairs the panes use (0: the terminal's default). */
enum {
    GMP_TUI_C_ALLOC = 1, /* allocated bytes in the timeline */
    GMP_TUI_C_RES,       /* reserved bytes */
    GMP_TUI_C_TITLE,     /* title bars */
    GMP_TUI_C_WARN,      /* OOMs, failures, verdicts */
    GMP_TUI_C_DIM,       /* internal frames, hints */
    GMP_TUI_C_PEAK,      /* the peak marker */
    GMP_TUI_C_HOT,       /* a tree row holding 40% or more of what is live (heat colours) */
    GMP_TUI_C_WARM,      /* 10% or more */
    GMP_TUI_C_MILD,      /* 1% or more (less: the terminal's default) */
    GMP_TUI_C_WHATIF,    /* --whatif: the reserve a setting's model replays */
};

/* Starts the full-screen UI on the controlling terminal (stdin/stdout). color: 1 use colours when
 * the terminal has them, 0 never. Returns 0, or -1 with a message in msg (not a terminal, unknown
 * TERM). */
int gmp_tui_term_start(int color, char *msg, unsigned long msglen);
/* Restores the terminal; safe to call twice and when start failed. */
void gmp_tui_term_stop(void);
/* Whether colours / UTF-8 block characters are in use. */
int gmp_tui_term_has_color(void);
int gmp_tui_term_utf8(void);

#endif
