/* gmp_tui_app: the viewer's keys and main loop (gmp_tui.h): builds the index of a trace, moves
 * the cursor and the window, recomputes the live set and its tree when the cursor moves, searches,
 * and with follow reads a growing trace again (rate-limited: at most every 500 ms, and never more
 * often than twice the time the last index took). */
#include <curses.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gmp_reader.h"
#include "gmp_tui.h"
#include "gmp_whatif.h"
#include "gmp_tui_state.h"
#include "gmp_tui_term.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Reads a trace and builds its index; thread-safe (the follow thread calls it too). 0, or -1 with
 * a line in err. */
static int load(const char *path, const char *name, int follow, gmp_tui_model **out,
                long long *size, char *err, size_t errlen)
{
    *out = NULL;
    *size = file_size(path);
    if (*size < 0 && follow) {
        snprintf(err, errlen, "waiting for %.200s to be written...", name);
        return -1;
    }
    gmp_reader *r = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK) {
        snprintf(err, errlen, "%.60s: %.180s", name, gmp_reader_open_error());
        return -1;
    }
    char msg[256];
    if (gmp_tui_model_build(out, r, msg, sizeof msg) != GMP_OK) {
        snprintf(err, errlen, "%.60s: %.180s", name, msg);
        return -1;
    }
    return 0;
}

/* Makes m the index of trace i. */
static void install(gmp_tui_state *s, size_t i, gmp_tui_model *m, long long size, double secs)
{
    gmp_tui_trace *tr = &s->tr[i];
    if (i == s->cur)
        gmp_tui_tree_set_model(s->tree, m);
    gmp_tui_model_free(tr->m);
    tr->m = m;
    tr->err[0] = 0;
    tr->size = size;
    tr->complete = gmp_reader_get_stats(gmp_tui_model_reader(m))->has_end;
    s->last_build_s = secs;
    if (!s->follow || tr->complete) /* the report's verdicts: a pass of their own, in a thread */
        gmp_tui_model_verdicts_start(m, tr->path);
}

/* (Re)builds the index of trace i now. */
static int build(gmp_tui_state *s, size_t i)
{
    gmp_tui_trace *tr = &s->tr[i];
    double t = now_s();
    gmp_tui_model *m;
    long long sz;
    if (load(tr->path, tr->name, s->follow, &m, &sz, tr->err, sizeof tr->err) != 0)
        return -1;
    install(s, i, m, sz, now_s() - t);
    /* --whatif: two more passes over the trace (the recorded reserve, the model's), once */
    if (s->whatif && !s->follow && !tr->whatif && !tr->werr[0]) {
        gmp_whatif_reserve *wr = calloc(1, sizeof *wr);
        if (!wr)
            snprintf(tr->werr, sizeof tr->werr, "out of memory");
        else if (gmp_whatif_reserve_of(tr->path, s->whatif, 0, wr, tr->werr, sizeof tr->werr) !=
                 GMP_OK)
            free(wr);
        else
            tr->whatif = wr;
    }
    return 0;
}

static void free_whatif(gmp_tui_state *s)
{
    for (size_t i = 0; i < s->ntr; i++)
        if (s->tr[i].whatif) {
            gmp_whatif_reserve_free(s->tr[i].whatif);
            free(s->tr[i].whatif);
        }
}

/* --follow: the index of a growing trace is rebuilt in a thread, so that keys keep working while
 * a big trace is read again; the new index replaces the old one when it is complete. */
typedef struct follow_job {
    pthread_t th;
    int active, threaded;
    atomic_int done;
    size_t idx;
    const char *path, *name;
    gmp_tui_model *m;
    long long size;
    double secs;
    int ok;
    char err[256];
} follow_job;

static void *follow_thread(void *arg)
{
    follow_job *j = arg;
    double t = now_s();
    j->ok = load(j->path, j->name, 1, &j->m, &j->size, j->err, sizeof j->err) == 0;
    j->secs = now_s() - t;
    atomic_store(&j->done, 1);
    return NULL;
}

static void invalidate(gmp_tui_state *s)
{
    s->live_ok = 0;
    s->focus_valid = 0;
}

/* The live set and its tree at the cursor. */
static void refresh_live(gmp_tui_state *s)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    const gmp_tui_dev *d = gmp_tui_cur_dev(s);
    if (!m)
        return;
    if (!s->live_ok || s->live_at != s->cursor) {
        free(s->live);
        s->live = NULL;
        s->nlive = 0;
        if (gmp_tui_model_live(m, s->cursor, &s->live, &s->nlive) != GMP_OK)
            snprintf(s->status, sizeof s->status, "out of memory computing the live set");
        s->live_at = s->cursor;
        s->live_ok = 1;
    }
    if (gmp_tui_tree_build(s->tree, s->live, s->nlive, d ? d->id : INT32_MIN, s->by,
                           s->show_internal) != GMP_OK)
        snprintf(s->status, sizeof s->status, "out of memory building the live tree");
}

static void whole_window(gmp_tui_state *s)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    s->win0 = gmp_tui_model_t0(m);
    s->win1 = gmp_tui_model_t1(m) + 1;
}

static void set_cursor(gmp_tui_state *s, uint64_t idx)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    uint64_t n = gmp_tui_model_events(m);
    if (idx != GMP_TUI_NOEV && idx >= n)
        idx = n ? n - 1 : GMP_TUI_NOEV;
    s->cursor = idx;
    s->at_end = s->follow && (!n || idx == n - 1); /* an empty trace: follow its first events */
    /* keep the cursor inside the window */
    uint64_t t = gmp_tui_cursor_time(s);
    if (t < s->win0 || t >= s->win1) {
        uint64_t w = s->win1 - s->win0;
        uint64_t t0 = gmp_tui_model_t0(m);
        s->win0 = t > w / 2 && t - w / 2 > t0 ? t - w / 2 : t0;
        s->win1 = s->win0 + w;
    }
}

/* How a trace opens (not followed): on the device of its first OOM or failed allocation (the
 * finding a user opens it for), else the first device; grouped by user frame (the call stack
 * from the innermost user frame outwards) when no allocation was made inside a range (a PyTorch
 * snapshot without record_function annotations: the report groups by user frame then too), else
 * by range. */
static void open_view(gmp_tui_state *s)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    uint64_t i = gmp_tui_model_find(m, GMP_TUI_NOEV, 1,
                                    1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED, INT32_MIN);
    gmp_tui_ev ev;
    if (i != GMP_TUI_NOEV && gmp_tui_model_read(m, i, &ev, 1) == 1)
        for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++)
            if (gmp_tui_model_dev(m, k)->id == ev.device)
                s->dev = k;
    gmp_replay *rp = gmp_tui_model_replay(m);
    int ranges = 0;
    for (size_t k = 0, n = gmp_replay_site_count(rp); k < n && !ranges; k++) {
        const gmp_replay_site *st = gmp_replay_site_at(rp, k);
        ranges = st && st->range && st->allocs;
    }
    s->by = ranges ? GMP_TUI_BY_RANGE : GMP_TUI_BY_FRAME;
}

static void goto_peak(gmp_tui_state *s)
{
    const gmp_tui_dev *d = gmp_tui_cur_dev(s);
    if (d && d->has_peak) {
        set_cursor(s, d->peak_index);
        snprintf(s->status, sizeof s->status, "the peak of %s",
                 d->id < 0 ? "the host" : "the device");
    } else {
        snprintf(s->status, sizeof s->status, "no peak: nothing was allocated on this device");
    }
}

/* Moves the cursor by k columns of the timeline (negative: left). */
static void move_cols(gmp_tui_state *s, int k)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m || s->tl_cols <= 0)
        return;
    uint64_t span = s->win1 - s->win0, t = gmp_tui_cursor_time(s);
    int cols = s->tl_cols;
    long col = t < s->win0 ? 0 : (long)((double)(t - s->win0) * cols / (double)span);
    long nc = col + k;
    uint64_t idx;
    if (k > 0) {
        uint64_t end = s->win0 + (uint64_t)((double)span * (double)(nc + 1) / cols);
        idx = gmp_tui_model_count_until(m, end ? end - 1 : 0);
        idx = idx ? idx - 1 : 0;
        if (s->cursor != GMP_TUI_NOEV && idx <= s->cursor)
            idx = s->cursor + 1;
    } else {
        uint64_t start = nc < 0 ? s->win0 - (s->win0 > (uint64_t)(-nc) * (span / cols)
                                                 ? (uint64_t)(-nc) * (span / cols)
                                                 : s->win0)
                                : s->win0 + (uint64_t)((double)span * (double)nc / cols);
        idx = gmp_tui_model_count_until(m, start ? start - 1 : 0);
        idx = idx ? idx - 1 : 0;
        if (s->cursor != GMP_TUI_NOEV && idx >= s->cursor)
            idx = s->cursor ? s->cursor - 1 : 0;
    }
    set_cursor(s, idx);
}

static void zoom(gmp_tui_state *s, int in)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    uint64_t t = gmp_tui_cursor_time(s), w = s->win1 - s->win0;
    uint64_t t0 = gmp_tui_model_t0(m), t1 = gmp_tui_model_t1(m) + 1;
    if (in)
        w = w / 2 > 100 ? w / 2 : 100;
    else
        w = w * 2;
    if (w >= t1 - t0) {
        whole_window(s);
        return;
    }
    s->win0 = t > w / 2 && t - w / 2 > t0 ? t - w / 2 : t0;
    s->win1 = s->win0 + w;
    if (s->win1 > t1) {
        s->win1 = t1;
        s->win0 = t1 - w;
    }
}

static int32_t cur_dev_id(const gmp_tui_state *s)
{
    const gmp_tui_dev *d = gmp_tui_cur_dev(s);
    return d ? d->id : INT32_MIN;
}

static void jump(gmp_tui_state *s, int forward, unsigned mask, const char *what)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    uint64_t i = gmp_tui_model_find(m, s->cursor, forward, mask, INT32_MIN);
    if (i == GMP_TUI_NOEV) {
        snprintf(s->status, sizeof s->status, "no %s %s the cursor", what,
                 forward ? "after" : "before");
        return;
    }
    gmp_tui_ev ev;
    if (gmp_tui_model_read(m, i, &ev, 1) == 1) {
        /* show the device it happened on */
        for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++)
            if (gmp_tui_model_dev(m, k)->id == ev.device)
                s->dev = k;
    }
    set_cursor(s, i);
    snprintf(s->status, sizeof s->status, "%s", what);
}

/* Selects, in the live tree, the allocation (key, time) or else the first row of the site. */
static void select_alloc(gmp_tui_state *s, uint64_t key, uint64_t t)
{
    for (size_t r = 0; r < gmp_tui_tree_nrows(s->tree); r++) {
        const gmp_tui_row *row = gmp_tui_tree_row(s->tree, r);
        if (row->is_alloc && row->best < s->nlive && s->live[row->best].key == key &&
            s->live[row->best].time_ns == t) {
            s->sel = r;
            return;
        }
    }
}

/* v / V: the next / previous of the report's verdicts (gmp_tui_model_verdict) and the trace's own
 * anomalies (OOM, failed allocation, bad free, alert, notice, lost events), in time order. */
static void jump_verdict(gmp_tui_state *s, int forward)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return;
    unsigned mask = 1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED | 1u << GMP_TUI_EV_BADFREE |
                    1u << GMP_TUI_EV_ALERT | 1u << GMP_TUI_EV_NOTICE | 1u << GMP_TUI_EV_LOST;
    uint64_t a = gmp_tui_model_find(m, s->cursor, forward, mask, INT32_MIN);
    /* the verdict after / before the one shown last (several may share an event) */
    size_t nv = gmp_tui_model_nverdicts(m), k = SIZE_MAX;
    int on_last = s->verdict_shown < nv && s->cursor != GMP_TUI_NOEV &&
                  gmp_tui_model_verdict(m, s->verdict_shown)->index == s->cursor;
    if (forward) {
        for (size_t i = 0; i < nv && k == SIZE_MAX; i++) {
            uint64_t x = gmp_tui_model_verdict(m, i)->index;
            if (s->cursor == GMP_TUI_NOEV || x > s->cursor ||
                (x == s->cursor && on_last && i > s->verdict_shown))
                k = i;
        }
    } else {
        for (size_t i = nv; i-- > 0 && k == SIZE_MAX;) {
            uint64_t x = gmp_tui_model_verdict(m, i)->index;
            if (s->cursor != GMP_TUI_NOEV &&
                (x < s->cursor || (x == s->cursor && on_last && i < s->verdict_shown)))
                k = i;
        }
    }
    const gmp_tui_verdict *v = k < nv ? gmp_tui_model_verdict(m, k) : NULL;
    /* an anomaly at the verdict's own event (its OOM) is the verdict */
    if (v && (a == GMP_TUI_NOEV || (forward ? v->index <= a : v->index >= a))) {
        for (size_t d = 0; d < gmp_tui_model_ndevs(m); d++)
            if (gmp_tui_model_dev(m, d)->id == v->device)
                s->dev = d;
        if (v->site != UINT32_MAX)
            gmp_tui_tree_reveal_site(s->tree, v->site);
        set_cursor(s, v->index);
        refresh_live(s);
        gmp_tui_ev ev;
        if (v->site != UINT32_MAX && gmp_tui_model_read(m, v->index, &ev, 1) == 1)
            select_alloc(s, ev.key, ev.time_ns);
        s->verdict_shown = k;
        snprintf(s->status, sizeof s->status, "%s", v->text);
        return;
    }
    int vs = gmp_tui_model_verdicts_state(m);
    jump(s, forward, mask,
         vs == GMP_TUI_VERDICTS_READY
             ? "anomaly (OOM, failure, bad free, alert, notice or lost events)"
         : vs == GMP_TUI_VERDICTS_FAILED
             ? "anomaly (the report's verdicts could not be computed)"
             : "anomaly (the report's verdicts are still being computed: try again)");
    s->verdict_shown = SIZE_MAX;
}

static void search(gmp_tui_state *s, int forward)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m || !s->search[0])
        return;
    size_t ns = gmp_replay_site_count(gmp_tui_model_replay(m));
    unsigned char *mt = calloc(ns ? ns : 1, 1);
    if (!mt)
        return;
    size_t hits = 0;
    for (size_t i = 0; i < ns; i++)
        hits += (mt[i] = (unsigned char)gmp_tui_tree_site_matches(s->tree, (uint32_t)i, s->search));
    if (!hits) {
        snprintf(s->status, sizeof s->status, "'%s': no range, function or API matches", s->search);
        free(mt);
        return;
    }
    uint64_t i = gmp_tui_model_find_site(m, s->cursor, forward, mt, ns);
    int wrapped = 0;
    if (i == GMP_TUI_NOEV) {
        i = gmp_tui_model_find_site(m, forward ? GMP_TUI_NOEV : gmp_tui_model_events(m), forward,
                                    mt, ns);
        wrapped = 1;
    }
    if (i == GMP_TUI_NOEV) {
        snprintf(s->status, sizeof s->status, "'%s': matches %zu sites, never allocated", s->search,
                 hits);
        free(mt);
        return;
    }
    gmp_tui_ev ev;
    if (gmp_tui_model_read(m, i, &ev, 1) == 1) {
        for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++)
            if (gmp_tui_model_dev(m, k)->id == ev.device)
                s->dev = k;
        gmp_tui_tree_reveal_site(s->tree, ev.site);
        set_cursor(s, i);
        refresh_live(s);
        /* select the allocation just made */
        for (size_t r = 0; r < gmp_tui_tree_nrows(s->tree); r++) {
            const gmp_tui_row *row = gmp_tui_tree_row(s->tree, r);
            if (row->is_alloc && row->best < s->nlive && s->live[row->best].key == ev.key &&
                s->live[row->best].time_ns == ev.time_ns) {
                s->sel = r;
                break;
            }
        }
    }
    snprintf(s->status, sizeof s->status, "'%s': allocation at event %" PRIu64 "%s (n/N: next)",
             s->search, i + 1, wrapped ? ", wrapped" : "");
    free(mt);
}

/* Reads a line at the bottom row; 1 when entered, 0 when cancelled. */
static int prompt(const char *label, char *buf, size_t n)
{
    int H, W;
    getmaxyx(stdscr, H, W);
    size_t len = 0;
    buf[0] = 0;
    timeout(-1);
    curs_set(1);
    for (;;) {
        mvhline(H - 1, 0, ' ', W);
        mvprintw(H - 1, 0, "%s%s", label, buf);
        refresh();
        int c = getch();
        if (c == '\n' || c == '\r' || c == KEY_ENTER)
            break;
        if (c == 27) {
            curs_set(0);
            return 0;
        }
        if ((c == KEY_BACKSPACE || c == 127 || c == 8) && len > 0)
            buf[--len] = 0;
        else if (c >= 32 && c < 256 && c != 127 && len + 1 < n) {
            buf[len++] = (char)c;
            buf[len] = 0;
        }
    }
    curs_set(0);
    return 1;
}

static void switch_trace(gmp_tui_state *s, size_t k)
{
    if (k >= s->ntr)
        return;
    s->cur = k;
    s->dev = 0;
    s->sel = s->top = 0;
    if (!s->tr[k].m) {
        gmp_tui_draw(s);
        build(s, k);
    }
    gmp_tui_tree_set_model(s->tree, s->tr[k].m);
    invalidate(s);
    whole_window(s);
    if (s->follow) {
        set_cursor(s, GMP_TUI_NOEV - 1);
    } else {
        open_view(s);
        goto_peak(s);
    }
}

/* A finished follow job's index in place, the cursor kept (or at the end when it was there). */
static void follow_install(gmp_tui_state *s, follow_job *j)
{
    if (j->threaded)
        pthread_join(j->th, NULL);
    j->active = j->threaded = 0;
    gmp_tui_trace *tr = &s->tr[j->idx];
    if (!j->ok) {
        if (!tr->m)
            snprintf(tr->err, sizeof tr->err, "%s", j->err);
        return;
    }
    if (j->idx != s->cur) {
        install(s, j->idx, j->m, j->size, j->secs);
        return;
    }
    gmp_tui_model *old = tr->m;
    uint64_t old_cursor = s->cursor;
    int full = old && s->win0 == gmp_tui_model_t0(old) && s->win1 == gmp_tui_model_t1(old) + 1;
    int at_end = s->at_end || !old;
    install(s, j->idx, j->m, j->size, j->secs);
    invalidate(s);
    if (full || !old)
        whole_window(s);
    set_cursor(s, at_end ? GMP_TUI_NOEV - 1 : old_cursor);
    if (s->dev >= gmp_tui_model_ndevs(tr->m))
        s->dev = 0;
}

static void follow_tick(gmp_tui_state *s, follow_job *j, double *next)
{
    if (j->active) {
        if (atomic_load(&j->done))
            follow_install(s, j);
        return;
    }
    double t = now_s();
    if (t < *next || !s->ntr)
        return;
    gmp_tui_trace *tr = &s->tr[s->cur];
    long long sz = file_size(tr->path);
    *next = t + (s->last_build_s * 2 > 0.5 ? s->last_build_s * 2 : 0.5);
    if (tr->m && (tr->complete || sz == tr->size))
        return;
    j->idx = s->cur;
    j->path = tr->path;
    j->name = tr->name;
    j->m = NULL;
    atomic_store(&j->done, 0);
    if (pthread_create(&j->th, NULL, follow_thread, j) == 0) {
        j->active = j->threaded = 1;
    } else { /* no thread: read it here */
        follow_thread(j);
        j->active = 1;
        follow_install(s, j);
    }
}

int gmp_tui_run(const gmp_tui_opts *o, char *msg, size_t msglen)
{
    gmp_tui_state st, *s = &st;
    memset(s, 0, sizeof *s);
    s->verdict_shown = SIZE_MAX;
    s->ntr = o->ntraces;
    s->tr = calloc(s->ntr ? s->ntr : 1, sizeof *s->tr);
    s->tree = gmp_tui_tree_new();
    if (!s->tr || !s->tree) {
        snprintf(msg, msglen, "out of memory");
        free(s->tr);
        gmp_tui_tree_free(s->tree);
        return 1;
    }
    for (size_t i = 0; i < s->ntr; i++) {
        s->tr[i].name = o->names[i];
        s->tr[i].path = o->paths[i];
        s->tr[i].size = -1;
    }
    s->follow = o->follow;
    s->whatif = o->whatif;
    s->whatif_name = o->whatif_name;
    s->log_path = o->log_path;
    s->running = o->poll != NULL;
    s->cursor = GMP_TUI_NOEV;
    /* the first trace's index before the screen changes: its errors go to stderr as one line */
    if (s->ntr && build(s, 0) != 0 && !s->follow) {
        snprintf(msg, msglen, "%s", s->tr[0].err);
        free_whatif(s);
        free(s->tr);
        gmp_tui_tree_free(s->tree);
        return 1;
    }
    if (gmp_tui_term_start(o->color, msg, msglen) != 0) {
        for (size_t i = 0; i < s->ntr; i++)
            gmp_tui_model_free(s->tr[i].m);
        free_whatif(s);
        free(s->tr);
        gmp_tui_tree_free(s->tree);
        return 1;
    }
    gmp_tui_tree_set_model(s->tree, s->ntr ? s->tr[0].m : NULL);
    whole_window(s);
    if (s->follow) {
        set_cursor(s, GMP_TUI_NOEV - 1);
    } else {
        open_view(s);
        goto_peak(s);
    }
    s->status[0] = 0;
    double next_follow = now_s() + 0.2;
    follow_job job;
    memset(&job, 0, sizeof job);
    int quit = 0;
    while (!quit) {
        refresh_live(s);
        /* while the report's verdicts are computed, redraw now and then: the findings line
         * shows them when they are ready. The state is read before the screen is drawn: read
         * after, a thread that finished in between would leave a screen drawn without its
         * verdicts and a getch() that waits for a key */
        gmp_tui_model *vm = gmp_tui_cur_model(s);
        int vrun = vm && gmp_tui_model_verdicts_state(vm) == GMP_TUI_VERDICTS_RUNNING;
        gmp_tui_draw(s);
        timeout(s->follow || vrun ? 200 : -1);
        int c = getch();
        if (c == ERR) {
            if (s->follow)
                follow_tick(s, &job, &next_follow);
            if (s->follow && o->poll) {
                size_t n = s->ntr, had = s->ntr;
                const char *const *names = NULL, *const *paths = NULL;
                s->running = o->poll(o->poll_ctx, &n, &names, &paths);
                if (n > s->ntr && names && paths) {
                    gmp_tui_trace *nt = realloc(s->tr, n * sizeof *nt);
                    if (nt) {
                        s->tr = nt;
                        for (size_t i = s->ntr; i < n; i++) {
                            memset(&nt[i], 0, sizeof nt[i]);
                            nt[i].name = names[i];
                            nt[i].path = paths[i];
                            nt[i].size = -1;
                        }
                        s->ntr = n;
                        if (!had)
                            switch_trace(s, 0);
                    }
                }
            }
            continue;
        }
        if (s->help) {
            s->help = 0;
            continue;
        }
        if (s->show_log && c != KEY_RESIZE) {
            s->show_log = 0;
            continue;
        }
        s->status[0] = 0;
        gmp_tui_model *m = gmp_tui_cur_model(s);
        size_t nrows = gmp_tui_tree_nrows(s->tree);
        switch (c) {
        case 'q': quit = 1; break;
        case '?': s->help = 1; break;
        case 'L': s->show_log = 1; break;
        case KEY_RESIZE: break;
        case KEY_LEFT:
        case 'h': move_cols(s, -1); break;
        case KEY_RIGHT:
        case 'l': move_cols(s, 1); break;
        case '<':
        case KEY_SLEFT: move_cols(s, -10); break;
        case '>':
        case KEY_SRIGHT: move_cols(s, 10); break;
        case ',':
        case '.':
            if (m) {
                uint64_t i = gmp_tui_model_find(m, s->cursor, c == '.',
                                                1u << GMP_TUI_EV_ALLOC | 1u << GMP_TUI_EV_FREE,
                                                cur_dev_id(s));
                if (i != GMP_TUI_NOEV)
                    set_cursor(s, i);
            }
            break;
        case KEY_HOME: set_cursor(s, 0); break;
        case KEY_END: set_cursor(s, GMP_TUI_NOEV - 1); break;
        case '+':
        case '=': zoom(s, 1); break;
        case '-': zoom(s, 0); break;
        case '0': whole_window(s); break;
        case 'p': goto_peak(s); break;
        case 'o':
        case 'O':
            jump(s, c == 'o', 1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED,
                 "out-of-memory error or failed allocation");
            break;
        case 'v':
        case 'V': jump_verdict(s, c == 'v'); break;
        case '/':
            if (prompt("search (range, function, API): ", s->search, sizeof s->search))
                search(s, 1);
            break;
        case 'n': search(s, 1); break;
        case 'N': search(s, 0); break;
        case KEY_UP:
        case 'k':
            if (s->sel > 0)
                s->sel--;
            break;
        case KEY_DOWN:
        case 'j':
            if (s->sel + 1 < nrows)
                s->sel++;
            break;
        case KEY_PPAGE: s->sel = s->sel > 10 ? s->sel - 10 : 0; break;
        case KEY_NPAGE: s->sel = nrows && s->sel + 10 >= nrows ? nrows - 1 : s->sel + 10; break;
        case '\n':
        case '\r':
        case KEY_ENTER:
        case ' ': gmp_tui_tree_toggle(s->tree, gmp_tui_tree_row(s->tree, s->sel)); break;
        case 'g':
            s->by = (s->by + 1) % GMP_TUI_BY_COUNT;
            s->sel = s->top = 0;
            break;
        case 'i':
            s->show_internal = !s->show_internal;
            snprintf(s->status, sizeof s->status, "internal frames %s",
                     s->show_internal ? "shown" : "folded");
            break;
        case 'd':
        case 'D':
            if (m && gmp_tui_model_ndevs(m) > 1) {
                size_t nd = gmp_tui_model_ndevs(m);
                s->dev = c == 'd' ? (s->dev + 1) % nd : (s->dev + nd - 1) % nd;
                s->sel = s->top = 0;
                if (!s->follow)
                    goto_peak(s);
            } else {
                snprintf(s->status, sizeof s->status, "one device only");
            }
            break;
        case 'r':
        case 'R':
            if (s->ntr > 1)
                switch_trace(s, c == 'r' ? (s->cur + 1) % s->ntr : (s->cur + s->ntr - 1) % s->ntr);
            else
                snprintf(s->status, sizeof s->status, "one trace only");
            break;
        default: break;
        }
    }
    gmp_tui_term_stop();
    if (job.active && job.threaded) { /* a follow job still reading: wait, drop its index */
        pthread_join(job.th, NULL);
        gmp_tui_model_free(job.m);
    }
    for (size_t i = 0; i < s->ntr; i++)
        gmp_tui_model_free(s->tr[i].m);
    free_whatif(s);
    free(s->tr);
    free(s->live);
    free(s->match);
    gmp_tui_tree_free(s->tree);
    return 0;
}
