/* gmp_tui_term: terminal setup and restore for the viewer (see gmp_tui_term.h). */
#include "gmp_tui_term.h"

#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_active;
static int g_color, g_utf8;
static SCREEN *g_screen;

static const int g_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV,
                             SIGBUS, SIGFPE,  SIGILL, SIGABRT};
#define NSIGS (sizeof g_sigs / sizeof g_sigs[0])
static struct sigaction g_old[NSIGS];

static void on_signal(int sig)
{
    if (g_active) {
        g_active = 0;
        endwin(); /* puts the terminal back: the one thing that must happen before we die */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void at_exit(void)
{
    gmp_tui_term_stop();
}

int gmp_tui_term_start(int color, char *msg, unsigned long msglen)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        snprintf(msg, msglen, "not a terminal (view is interactive: run it in a terminal)");
        return -1;
    }
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    g_utf8 = cs && strcmp(cs, "UTF-8") == 0;
    g_screen = newterm(NULL, stdout, stdin);
    if (!g_screen) {
        const char *t = getenv("TERM");
        snprintf(msg, msglen, "cannot use the terminal (TERM=%s)", t ? t : "");
        return -1;
    }
    set_term(g_screen);
    g_active = 1;
    static int registered;
    if (!registered) {
        atexit(at_exit);
        registered = 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIGS; i++)
        sigaction(g_sigs[i], &sa, &g_old[i]);
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    g_color = 0;
    if (color && has_colors() && start_color() == OK) {
        use_default_colors();
        init_pair(GMP_TUI_C_ALLOC, COLOR_GREEN, -1);
        init_pair(GMP_TUI_C_RES, COLOR_YELLOW, -1);
        init_pair(GMP_TUI_C_TITLE, COLOR_BLACK, COLOR_CYAN);
        init_pair(GMP_TUI_C_WARN, COLOR_RED, -1);
        init_pair(GMP_TUI_C_DIM, COLOR_BLUE, -1);
        init_pair(GMP_TUI_C_PEAK, COLOR_MAGENTA, -1);
        init_pair(GMP_TUI_C_HOT, COLOR_RED, -1);
        init_pair(GMP_TUI_C_WARM, COLOR_YELLOW, -1);
        init_pair(GMP_TUI_C_MILD, COLOR_GREEN, -1);
        init_pair(GMP_TUI_C_WHATIF, COLOR_CYAN, -1);
        g_color = 1;
    }
    return 0;
}

void gmp_tui_term_stop(void)
{
    if (!g_active)
        return;
    g_active = 0;
    endwin();
    for (size_t i = 0; i < NSIGS; i++)
        sigaction(g_sigs[i], &g_old[i], NULL);
    if (g_screen) {
        delscreen(g_screen);
        g_screen = NULL;
    }
    fflush(stdout);
}

int gmp_tui_term_has_color(void)
{
    return g_color;
}

int gmp_tui_term_utf8(void)
{
    return g_utf8;
}
