/* gmp_tui_draw: the viewer's panes, drawn from its state (gmp_tui_state.h):
 *   row 0      title: trace, device, keys for help
 *   row 1      the cursor: its time, allocated and reserved there, the device's peak
 *   timeline   allocated (bars) and reserved (a mark above them) per column of the window, the
 *              cursor's column highlighted, the peak marked on the axis below
 *   middle     left: live at the cursor as a tree; right: the allocation in focus
 *   events     the events around the cursor
 *   last row   status, search prompt or key hints
 * Every string from the trace is drawn by display width (UTF-8 aware; bad bytes as '?'). */
#include <curses.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "gmp_tui_state.h"
#include "gmp_tui_term.h"
#include "gmp_units.h"
#include "gmp_whatif.h"

/* events searched forward for the free of the allocation in focus (40 MiB of the index) */
#define FREE_SEARCH (1u << 20)

static const char *const g_by_name[GMP_TUI_BY_COUNT] = {"range", "user frame", "stack", "kind",
                                                        "category"};

gmp_tui_model *gmp_tui_cur_model(const gmp_tui_state *s)
{
    return s->cur < s->ntr ? s->tr[s->cur].m : NULL;
}

const gmp_tui_dev *gmp_tui_cur_dev(const gmp_tui_state *s)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    return m ? gmp_tui_model_dev(m, s->dev) : NULL;
}

const char *gmp_tui_fmt_time(const gmp_tui_state *s, uint64_t t, char *buf, size_t n)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    /* the report's zero and the report's format (gmp_units.h): one time reads the same in both */
    return gmp_fmt_reltime(t, m ? gmp_tui_model_zero(m) : 0, buf, n);
}

uint64_t gmp_tui_cursor_time(const gmp_tui_state *s)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!m)
        return 0;
    if (s->cursor == GMP_TUI_NOEV)
        return gmp_tui_model_t0(m);
    gmp_tui_ev ev;
    if (gmp_tui_model_read(m, s->cursor, &ev, 1) != 1)
        return gmp_tui_model_t1(m);
    return ev.time_ns;
}

/* Draws s at (y, x) in at most w columns; returns the columns used. */
static int put(int y, int x, const char *str, int w)
{
    if (w <= 0 || !str)
        return 0;
    move(y, x);
    int used = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    const char *p = str, *end = str + strlen(str);
    while (p < end && used < w) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, p, (size_t)(end - p), &st);
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            memset(&st, 0, sizeof st);
            wc = L'?';
            k = 1;
        }
        int cw = wcwidth(wc);
        if (cw < 0) {
            wc = L'?';
            cw = 1;
        }
        if (used + cw > w)
            break;
        wchar_t one[2] = {wc, 0};
        addnwstr(one, 1);
        used += cw;
        p += k;
    }
    return used;
}

static void fill_line(int y, int x, int w, int pair)
{
    if (pair && gmp_tui_term_has_color())
        attron(COLOR_PAIR(pair));
    else if (pair == GMP_TUI_C_TITLE)
        attron(A_REVERSE);
    mvhline(y, x, ' ', w);
    (void)pair;
}

static void pair_off(int pair)
{
    if (pair && gmp_tui_term_has_color())
        attroff(COLOR_PAIR(pair));
    else if (pair == GMP_TUI_C_TITLE)
        attroff(A_REVERSE);
}

static void title_bar(int y, int x, int w, const char *text)
{
    fill_line(y, x, w, GMP_TUI_C_TITLE);
    attron(A_BOLD);
    put(y, x, text, w);
    attroff(A_BOLD);
    pair_off(GMP_TUI_C_TITLE);
}

static const char *dev_name(const gmp_tui_state *s, const gmp_tui_dev *d, char *buf, size_t n)
{
    if (!d)
        return "no device memory";
    if (d->id < 0) {
        snprintf(buf, n, "host");
        return buf;
    }
    const gmp_rec_device *def = d->d ? d->d->def : NULL;
    if (def && def->name.len)
        snprintf(buf, n, "device %d: %.*s", (int)d->id, (int)def->name.len, def->name.ptr);
    else
        snprintf(buf, n, "device %d", (int)d->id);
    (void)s;
    return buf;
}

const gmp_whatif_series *gmp_tui_whatif_series(const gmp_tui_state *s, const gmp_tui_dev *d)
{
    if (!s->ntr || !d || !s->tr[s->cur].whatif)
        return NULL;
    return gmp_whatif_reserve_replayed(s->tr[s->cur].whatif, d->id);
}

/* ---- timeline ---- */

static void timeline(gmp_tui_state *s, int y, int h, int W)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    const gmp_tui_dev *d = gmp_tui_cur_dev(s);
    int lm = 11; /* y labels */
    int cols = W - lm;
    s->tl_cols = cols > 0 ? cols : 0;
    if (!m || !d || cols < 4 || h < 1)
        return;
    uint64_t a = s->win0, b = s->win1 > s->win0 ? s->win1 : s->win0 + 1;
    uint64_t span = b - a;
    uint64_t *am = calloc((size_t)cols, sizeof *am), *rm = calloc((size_t)cols, sizeof *rm);
    uint64_t *wm = calloc((size_t)cols, sizeof *wm); /* --whatif: the replayed reserve */
    const gmp_whatif_series *ws = gmp_tui_whatif_series(s, d);
    if (!am || !rm || !wm) {
        free(am);
        free(rm);
        free(wm);
        return;
    }
    uint64_t ymax = 1;
    for (int c = 0; c < cols; c++) {
        uint64_t c0 = a + (uint64_t)((double)span * c / cols);
        uint64_t c1 = a + (uint64_t)((double)span * (c + 1) / cols);
        gmp_tui_model_span(m, d, c0, c1 > c0 ? c1 - 1 : c0, &am[c], &rm[c]);
        if (am[c] > ymax)
            ymax = am[c];
        if (rm[c] > ymax)
            ymax = rm[c];
        wm[c] = gmp_whatif_series_max(ws, c0, c1 > c0 ? c1 - 1 : c0);
        if (wm[c] > ymax)
            ymax = wm[c];
    }
    uint64_t ct = gmp_tui_cursor_time(s);
    int ccol = ct < a ? -1 : ct >= b ? cols : (int)((double)(ct - a) * cols / (double)span);
    if (ct == b - 1 || (ct >= b && ct == gmp_tui_model_t1(m)))
        ccol = cols - 1;
    static const char *const blocks[9] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                          "\u2585", "\u2586", "\u2587", "\u2588"};
    int utf8 = gmp_tui_term_utf8();
    char lab[32];
    put(y, 0, gmp_fmt_bytes(ymax, lab, sizeof lab), lm - 1);
    put(y + h - 1, 0, "0", lm - 1);
    if (ws && h >= 3) { /* the legend of the replayed reserve */
        if (gmp_tui_term_has_color())
            attron(COLOR_PAIR(GMP_TUI_C_WHATIF) | A_BOLD);
        put(y + 1, 0, utf8 ? "\u2501 what-if" : "= what-if", lm - 1);
        if (gmp_tui_term_has_color())
            attroff(COLOR_PAIR(GMP_TUI_C_WHATIF) | A_BOLD);
    }
    for (int c = 0; c < cols; c++) {
        uint64_t al = (uint64_t)((double)am[c] / (double)ymax * h * 8 + 0.5);
        uint64_t rl = (uint64_t)((double)rm[c] / (double)ymax * h * 8 + 0.5);
        uint64_t wl = (uint64_t)((double)wm[c] / (double)ymax * h * 8 + 0.5);
        if (am[c] && !al)
            al = 1;
        for (int r = 0; r < h; r++) {
            uint64_t base = (uint64_t)(h - 1 - r) * 8; /* eighths below this cell */
            int cur = c == ccol;
            if (cur)
                attron(A_REVERSE);
            if (wm[c] && wl > base && wl <= base + 8 && al < base + 8) {
                /* the replayed reserve, in the cell of its level, over all but a full bar */
                if (gmp_tui_term_has_color())
                    attron(COLOR_PAIR(GMP_TUI_C_WHATIF) | A_BOLD);
                put(y + r, lm + c, utf8 ? "\u2501" : "=", 1);
                if (gmp_tui_term_has_color())
                    attroff(COLOR_PAIR(GMP_TUI_C_WHATIF) | A_BOLD);
            } else if (al > base) {
                uint64_t k = al - base > 8 ? 8 : al - base;
                if (gmp_tui_term_has_color())
                    attron(COLOR_PAIR(GMP_TUI_C_ALLOC));
                put(y + r, lm + c, utf8 ? blocks[k] : (k >= 4 ? "#" : "."), 1);
                if (gmp_tui_term_has_color())
                    attroff(COLOR_PAIR(GMP_TUI_C_ALLOC));
            } else if (rl > base && rl <= base + 8) {
                if (gmp_tui_term_has_color())
                    attron(COLOR_PAIR(GMP_TUI_C_RES));
                put(y + r, lm + c, utf8 ? "\u2594" : "-", 1);
                if (gmp_tui_term_has_color())
                    attroff(COLOR_PAIR(GMP_TUI_C_RES));
            } else {
                put(y + r, lm + c, cur ? "|" : " ", 1);
            }
            if (cur)
                attroff(A_REVERSE);
        }
    }
    /* axis: window start and end, the peak's column */
    char t0s[40], t1s[40];
    gmp_tui_fmt_time(s, a, t0s, sizeof t0s);
    gmp_tui_fmt_time(s, b, t1s, sizeof t1s);
    mvhline(y + h, 0, ' ', W);
    int pcol = -1; /* the peak's column, when it is in the window */
    if (d->d && d->d->peak_allocated && d->has_peak && d->d->peak_time_ns >= a &&
        d->d->peak_time_ns < b)
        pcol = (int)((double)(d->d->peak_time_ns - a) * cols / (double)span);
    if (pcol < 0 || pcol > (int)strlen(t0s))
        put(y + h, lm, t0s, cols);
    int l1 = (int)strlen(t1s);
    if (cols > (int)strlen(t0s) + l1 + 2 && (pcol < 0 || pcol < cols - l1 - 1))
        put(y + h, W - l1, t1s, l1);

    if (d->d && d->d->peak_allocated && d->has_peak) {
        uint64_t pt = d->d->peak_time_ns;
        if (pt >= a && pt < b) {
            int pc = (int)((double)(pt - a) * cols / (double)span);
            if (gmp_tui_term_has_color())
                attron(COLOR_PAIR(GMP_TUI_C_PEAK) | A_BOLD);
            int t0w = (int)strlen(t0s), room = cols - pc - (cols > t0w + l1 + 2 ? l1 + 1 : 0);
            put(y + h, lm + pc, utf8 ? "\u25b2" : "^", 1);
            if (pc > t0w && room > 5)
                put(y + h, lm + pc + 1, "peak", 4);
            if (gmp_tui_term_has_color())
                attroff(COLOR_PAIR(GMP_TUI_C_PEAK) | A_BOLD);
        }
    }
    free(am);
    free(rm);
    free(wm);
}

/* ---- the tree and the focus ---- */

static void tree_pane(gmp_tui_state *s, int y, int h, int x, int w)
{
    char hdr[256], tb[32];
    snprintf(hdr, sizeof hdr, " Live at cursor by %s: %s in %" PRIu64 " (g: group)",
             g_by_name[s->by], gmp_fmt_bytes(gmp_tui_tree_total(s->tree), tb, sizeof tb),
             gmp_tui_tree_count(s->tree));
    title_bar(y, x, w, hdr);
    size_t n = gmp_tui_tree_nrows(s->tree);
    int rows = h - 1;
    if (rows <= 0)
        return;
    if (s->sel >= n)
        s->sel = n ? n - 1 : 0;
    if (s->sel < s->top)
        s->top = s->sel;
    if (s->sel >= s->top + (size_t)rows)
        s->top = s->sel - (size_t)rows + 1;
    int utf8 = gmp_tui_term_utf8();
    for (int r = 0; r < rows; r++) {
        size_t i = s->top + (size_t)r;
        const gmp_tui_row *row = gmp_tui_tree_row(s->tree, i);
        mvhline(y + 1 + r, x, ' ', w);
        if (!row) {
            if (i == 0 && r == 0)
                put(y + 1, x + 1, "(nothing live on this device at the cursor)", w - 1);
            continue;
        }
        if (i == s->sel)
            attron(A_REVERSE);
        mvhline(y + 1 + r, x, ' ', w);
        int ind = row->depth * 2;
        if (ind > w / 3)
            ind = w / 3;
        const char *mk = row->has_children ? (row->expanded ? (utf8 ? "\u25be " : "- ")
                                                            : (utf8 ? "\u25b8 " : "+ "))
                                           : "  ";
        /* heat colours: a row's share of what is live on the device at the cursor */
        uint64_t tot = gmp_tui_tree_total(s->tree);
        double share = tot ? (double)row->bytes / (double)tot : 0.0;
        int heat = row->is_alloc || !gmp_tui_term_has_color() ? 0
                   : share >= 0.40                            ? GMP_TUI_C_HOT
                   : share >= 0.10                            ? GMP_TUI_C_WARM
                   : share >= 0.01                            ? GMP_TUI_C_MILD
                                                              : 0;
        if (heat)
            attron(COLOR_PAIR(heat));
        char sz[32], num[64];
        gmp_fmt_bytes(row->bytes, sz, sizeof sz);
        if (row->is_alloc)
            snprintf(num, sizeof num, "%s", row->best == SIZE_MAX ? "" : "");
        else
            snprintf(num, sizeof num, "%10s %5" PRIu64, sz, row->count);
        int nw = (int)strlen(num);
        int lw = w - nw - 1;
        put(y + 1 + r, x + ind, mk, lw - ind);
        put(y + 1 + r, x + ind + 2, row->label, lw - ind - 2);
        if (nw)
            put(y + 1 + r, x + w - nw, num, nw);
        if (heat)
            attroff(COLOR_PAIR(heat));
        if (i == s->sel)
            attroff(A_REVERSE);
    }
}

/* A site's range and stack (innermost first, internal frames folded unless i) from row r of a
 * pane of h rows at (y, x), w wide; returns the next row. */
static int site_lines(gmp_tui_state *s, const gmp_tui_site *site, int y, int r, int h, int x, int w)
{
    char line[600];
    if (site && r < h) {
        snprintf(line, sizeof line, "range  %s", *site->range_str ? site->range_str : "(none)");
        put(y + r++, x + 1, line, w - 1);
    }
    if (site && r < h) {
        put(y + r++, x + 1, site->nframes ? "stack (innermost first):" : "stack  (none)", w - 1);
        size_t hidden = 0;
        for (size_t i = 0; i < site->nframes && r < h; i++) {
            if (site->internal[i] && !s->show_internal) {
                hidden++;
                continue;
            }
            if (hidden) {
                snprintf(line, sizeof line, " ... %zu folded frame%s (i)", hidden,
                         hidden == 1 ? "" : "s");
                if (gmp_tui_term_has_color())
                    attron(COLOR_PAIR(GMP_TUI_C_DIM));
                put(y + r++, x + 1, line, w - 1);
                if (gmp_tui_term_has_color())
                    attroff(COLOR_PAIR(GMP_TUI_C_DIM));
                hidden = 0;
                if (r >= h)
                    break;
            }
            put(y + r++, x + 2, site->frames[i], w - 2);
        }
        if (hidden && r < h) {
            snprintf(line, sizeof line, " ... %zu folded frame%s (i)", hidden,
                     hidden == 1 ? "" : "s");
            put(y + r++, x + 1, line, w - 1);
        }
    }
    return r;
}

/* At an OOM or a failed allocation: the request that failed, with its stack. Returns 1 when the
 * cursor is on one. A failed allocation that an OOM reports (GMP_TUI_EVF_REPORTED) is that OOM's
 * request: shown as the OOM (its API, range, stack, the driver's free bytes). */
static int request_focus(gmp_tui_state *s, int y, int h, int x, int w)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    gmp_tui_ev ev;
    if (!m || s->cursor == GMP_TUI_NOEV || gmp_tui_model_read(m, s->cursor, &ev, 1) != 1 ||
        (ev.op != GMP_TUI_EV_OOM && ev.op != GMP_TUI_EV_FAILED))
        return 0;
    /* the pair: the failed allocation (its memory kind) and the OOM that reports it */
    unsigned kind = GMP_MEM_DEVICE; /* an OOM alone does not say */
    uint64_t fi = GMP_TUI_NOEV, oi = GMP_TUI_NOEV;
    if (ev.op == GMP_TUI_EV_FAILED && (ev.flags & GMP_TUI_EVF_REPORTED)) {
        fi = s->cursor; /* its OOM: the device's next one (none comes between them) */
        oi = gmp_tui_model_find(m, fi, 1, 1u << GMP_TUI_EV_OOM, ev.device);
    } else if (ev.op == GMP_TUI_EV_OOM) {
        oi = s->cursor;
        fi = gmp_tui_model_find(m, oi, 0, 1u << GMP_TUI_EV_FAILED, ev.device);
    }
    gmp_tui_ev fe, oe;
    if (fi != GMP_TUI_NOEV && oi != GMP_TUI_NOEV && gmp_tui_model_read(m, fi, &fe, 1) == 1 &&
        (fe.flags & GMP_TUI_EVF_REPORTED) && gmp_tui_model_read(m, oi, &oe, 1) == 1 &&
        gmp_tui_model_find(m, fi, 1, 1u << GMP_TUI_EV_OOM, ev.device) == oi) {
        kind = fe.flags & GMP_TUI_EVF_KIND;
        ev = oe;
    }
    const gmp_tui_site *site = NULL;
    const gmp_replay_oom *o = NULL;
    if (ev.op == GMP_TUI_EV_OOM) {
        o = gmp_replay_oom_at(gmp_tui_model_replay(m), (size_t)ev.key);
        if (o)
            site = gmp_tui_tree_request(s->tree, o->device, kind, o->api, o->range, o->stack);
    } else {
        site = gmp_tui_tree_request(s->tree, ev.device, ev.flags & GMP_TUI_EVF_KIND, ev.site,
                                    (uint32_t)(ev.key >> 32), (uint32_t)ev.key);
    }
    char b[64], t[48], line[600];
    int r = 1;
    if (gmp_tui_term_has_color())
        attron(COLOR_PAIR(GMP_TUI_C_WARN) | A_BOLD);
    put(y + r++, x + 1,
        ev.op == GMP_TUI_EV_OOM ? "OUT OF MEMORY: the request that failed"
                                : "FAILED ALLOCATION: the request that failed",
        w - 1);
    if (gmp_tui_term_has_color())
        attroff(COLOR_PAIR(GMP_TUI_C_WARN) | A_BOLD);
    snprintf(line, sizeof line, "size   %s (%" PRIu64 " B)", gmp_fmt_bytes(ev.size, b, sizeof b),
             ev.size);
    put(y + r++, x + 1, line, w - 1);
    if (site && r < h) {
        snprintf(line, sizeof line, "kind   %s, %s", gmp_mem_kind_name(site->kind), site->api_str);
        put(y + r++, x + 1, line, w - 1);
    }
    if (r < h) {
        snprintf(line, sizeof line, "at     %s", gmp_tui_fmt_time(s, ev.time_ns, t, sizeof t));
        put(y + r++, x + 1, line, w - 1);
    }
    if (o && o->free_bytes && r < h) {
        snprintf(line, sizeof line, "free   %s (the driver's word)",
                 gmp_fmt_bytes(o->free_bytes, b, sizeof b));
        put(y + r++, x + 1, line, w - 1);
    }
    site_lines(s, site, y, r, h, x, w);
    return 1;
}

static void focus_pane(gmp_tui_state *s, int y, int h, int x, int w)
{
    title_bar(y, x, w, " Allocation in focus");
    for (int r = 1; r < h; r++)
        mvhline(y + r, x, ' ', w);
    if (request_focus(s, y, h, x, w))
        return;
    const gmp_tui_row *row = gmp_tui_tree_row(s->tree, s->sel);
    gmp_tui_model *m = gmp_tui_cur_model(s);
    if (!row || row->best == SIZE_MAX || row->best >= s->nlive || !m) {
        put(y + 1, x + 1, "(none)", w - 1);
        return;
    }
    const gmp_tui_live *l = &s->live[row->best];
    const gmp_tui_site *site = gmp_tui_tree_site(s->tree, l->site);
    /* when it is freed: searched forward from the cursor, at most FREE_SEARCH events, cached */
    if (!s->focus_valid || s->focus_key != l->key || s->focus_dev != l->device ||
        s->focus_at != s->cursor) {
        s->focus_free = gmp_tui_model_free_time(m, s->cursor, l->key, l->device, FREE_SEARCH,
                                                &s->focus_searched);
        s->focus_key = l->key;
        s->focus_dev = l->device;
        s->focus_at = s->cursor;
        s->focus_valid = 1;
    }
    char b[64], t[48], line[600];
    int r = 1;
    snprintf(line, sizeof line, "size   %s (%" PRIu64 " B)", gmp_fmt_bytes(l->size, b, sizeof b),
             l->size);
    put(y + r++, x + 1, line, w - 1);
    if (site) {
        snprintf(line, sizeof line, "kind   %s, %s", gmp_mem_kind_name(site->kind), site->api_str);
        put(y + r++, x + 1, line, w - 1);
    }
    snprintf(line, sizeof line, "addr   0x%" PRIx64, l->key);
    put(y + r++, x + 1, line, w - 1);
    snprintf(line, sizeof line, "alloc  %s", gmp_tui_fmt_time(s, l->time_ns, t, sizeof t));
    put(y + r++, x + 1, line, w - 1);
    if (s->focus_free) {
        uint64_t life = s->focus_free - l->time_ns;
        snprintf(line, sizeof line, "free   %s", gmp_tui_fmt_time(s, s->focus_free, t, sizeof t));
        put(y + r++, x + 1, line, w - 1);
        char lb[32]; /* a duration as the report writes one (gmp_units.h) */
        snprintf(line, sizeof line, "life   %s", gmp_fmt_duration(life, lb, sizeof lb));
    } else {
        snprintf(line, sizeof line, "free   %s",
                 !s->focus_searched                     ? "later (not searched)"
                 : !s->follow || s->tr[s->cur].complete ? "never (live at the end)"
                                                        : "not yet (live so far)");
        if (!s->focus_searched) {
            gmp_tui_ev lim;
            uint64_t li = s->cursor == GMP_TUI_NOEV ? FREE_SEARCH - 1 : s->cursor + FREE_SEARCH;
            if (gmp_tui_model_read(m, li, &lim, 1) == 1)
                snprintf(line, sizeof line, "free   after %s",
                         gmp_tui_fmt_time(s, lim.time_ns, t, sizeof t));
        }
    }
    if (r < h)
        put(y + r++, x + 1, line, w - 1);
    site_lines(s, site, y, r, h, x, w);
}

/* ---- events ---- */

static void event_text(gmp_tui_state *s, const gmp_tui_ev *ev, char *line, size_t n)
{
    char t[48], b[32];
    gmp_tui_fmt_time(s, ev->time_ns, t, sizeof t);
    gmp_fmt_bytes(ev->size, b, sizeof b);
    const char *where = "";
    const gmp_tui_site *site = NULL;
    if (ev->op == GMP_TUI_EV_ALLOC || ev->op == GMP_TUI_EV_FREE) {
        site = gmp_tui_tree_site(s->tree, ev->site);
    } else if (ev->op == GMP_TUI_EV_OOM) {
        gmp_tui_model *m = gmp_tui_cur_model(s);
        const gmp_replay_oom *o =
            m ? gmp_replay_oom_at(gmp_tui_model_replay(m), (size_t)ev->key) : NULL;
        if (o)
            site = gmp_tui_tree_request(s->tree, o->device, GMP_MEM_DEVICE, o->api, o->range,
                                        o->stack);
    } else if (ev->op == GMP_TUI_EV_FAILED) {
        site = gmp_tui_tree_request(s->tree, ev->device, ev->flags & GMP_TUI_EVF_KIND, ev->site,
                                    (uint32_t)(ev->key >> 32), (uint32_t)ev->key);
    }
    /* where it happened: its range, else the first frame its stack shows (the user's), else its
     * API */
    if (site) {
        where = site->api_str ? site->api_str : "";
        if (site->range_str && *site->range_str) {
            where = site->range_str;
        } else {
            for (size_t i = 0; i < site->nframes; i++)
                if (!site->internal[i] || s->show_internal) {
                    where = site->frames[i];
                    break;
                }
        }
    }
    switch (ev->op) {
    case GMP_TUI_EV_ALLOC:
        snprintf(line, n, "%s d%d alloc  %10s  %s", t, ev->device, b, where);
        break;
    case GMP_TUI_EV_FREE:
        snprintf(line, n, "%s d%d free   %10s  %s", t, ev->device, b, where);
        break;
    case GMP_TUI_EV_OOM:
        snprintf(line, n, "%s d%d OUT OF MEMORY asking %s  %s", t, ev->device, b, where);
        break;
    case GMP_TUI_EV_FAILED:
        snprintf(line, n, "%s d%d failed allocation of %s  %s", t, ev->device, b, where);
        break;
    case GMP_TUI_EV_BADFREE:
        snprintf(line, n, "%s d%d %s of 0x%" PRIx64, t, ev->device,
                 ev->flags & GMP_TUI_EVF_DOUBLE ? "double free" : "free of unknown address",
                 ev->key);
        break;
    case GMP_TUI_EV_ALERT: {
        char th[32];
        snprintf(line, n, "%s d%d alert: %s live over %s", t, ev->device, b,
                 gmp_fmt_bytes(ev->key, th, sizeof th));
        break;
    }
    case GMP_TUI_EV_NOTICE: {
        gmp_tui_model *m = gmp_tui_cur_model(s);
        uint32_t sev = 0;
        uint64_t nt = 0;
        const char *msg =
            m ? gmp_replay_notice_at(gmp_tui_model_replay(m), (size_t)ev->key, &sev, &nt) : NULL;
        snprintf(line, n, "%s notice: %s", t, msg ? msg : "(not kept)");
        break;
    }
    case GMP_TUI_EV_LOST: snprintf(line, n, "%s %" PRIu64 " events lost", t, ev->size); break;
    case GMP_TUI_EV_POOL: {
        char r[32];
        snprintf(line, n, "%s d%d pool 0x%" PRIx64 " holds %s (reserved %s)", t, ev->device,
                 ev->key, b, gmp_fmt_bytes(ev->reserved, r, sizeof r));
        break;
    }
    default: snprintf(line, n, "%s ?", t);
    }
}

static void events_pane(gmp_tui_state *s, int y, int h, int W)
{
    gmp_tui_model *m = gmp_tui_cur_model(s);
    char hdr[128];
    uint64_t nev = m ? gmp_tui_model_events(m) : 0;
    snprintf(hdr, sizeof hdr, " Events around the cursor (event %" PRIu64 " of %" PRIu64 ")",
             s->cursor == GMP_TUI_NOEV ? 0 : s->cursor + 1, nev);
    title_bar(y, 0, W, hdr);
    int rows = h - 1;
    if (!m || rows <= 0)
        return;
    uint64_t c = s->cursor == GMP_TUI_NOEV ? 0 : s->cursor;
    uint64_t first = c > (uint64_t)(rows / 2) ? c - (uint64_t)(rows / 2) : 0;
    if (nev > (uint64_t)rows && first + (uint64_t)rows > nev)
        first = nev - (uint64_t)rows;
    gmp_tui_ev evs[64];
    size_t k = gmp_tui_model_read(m, first, evs, rows < 64 ? (size_t)rows : 64);
    for (int r = 0; r < rows; r++) {
        mvhline(y + 1 + r, 0, ' ', W);
        if ((size_t)r >= k)
            continue;
        char line[700];
        event_text(s, &evs[r], line, sizeof line);
        int here = s->cursor != GMP_TUI_NOEV && first + (uint64_t)r == s->cursor;
        int warn = evs[r].op >= GMP_TUI_EV_OOM && evs[r].op != GMP_TUI_EV_POOL;
        if (here)
            attron(A_BOLD);
        if (warn && gmp_tui_term_has_color())
            attron(COLOR_PAIR(GMP_TUI_C_WARN));
        put(y + 1 + r, 0, here ? ">" : " ", 1);
        put(y + 1 + r, 1, line, W - 1);
        if (warn && gmp_tui_term_has_color())
            attroff(COLOR_PAIR(GMP_TUI_C_WARN));
        if (here)
            attroff(A_BOLD);
    }
}

/* ---- help and log ---- */

static const char *const g_help[] = {
    "gpumemprof view: keys",
    "",
    "  Left/Right h/l   move the cursor one column     < >  ten columns",
    "  , .              previous / next event of this device",
    "  Home End         first / last event (End follows a growing trace)",
    "  + -  0           zoom in / out around the cursor, whole trace",
    "  p                the device's peak",
    "  o O              next / previous out-of-memory error or failed allocation",
    "  v V              next / previous verdict: the report's (leak start/end,",
    "                   OOM explained) and OOM, failure, bad free, alert, notice",
    "  /  n N           search a range, function or API; next / previous match",
    "  Up/Down j/k      select in the live tree     Enter/Space  expand or fold",
    "  PgUp PgDn        scroll the live tree",
    "  g                group the live set by range, user frame, stack, kind or category",
    "  i                show or fold internal and framework frames",
    "  d D              next / previous device       r R  next / previous trace",
    "  L                the program's output (run --view)",
    "  ?                this help                    q  quit",
    "",
    "Press any key to go back.",
};

static void help_overlay(const char *const *lines, size_t n, int H, int W)
{
    for (int r = 0; r < H - 1; r++)
        mvhline(r, 0, ' ', W);
    for (size_t i = 0; i < n && (int)i < H - 1; i++)
        put((int)i, 1, lines[i], W - 2);
}

static void log_pane(gmp_tui_state *s, int H, int W)
{
    for (int r = 0; r < H - 1; r++)
        mvhline(r, 0, ' ', W);
    title_bar(0, 0, W, " The program's output (L or q: back)");
    if (!s->log_path) {
        put(1, 1, "(no program output: the viewer was not started by run --view)", W - 2);
        return;
    }
    FILE *f = fopen(s->log_path, "rb");
    if (!f) {
        put(1, 1, "(no output yet)", W - 2);
        return;
    }
    /* the last H - 2 lines of at most the last 64 KiB */
    char buf[65536];
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    long off = sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0;
    fseek(f, off, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    int want = H - 2, have = 0;
    size_t p = n;
    while (p > 0 && have <= want) {
        p--;
        if (buf[p] == '\n' && p + 1 < n)
            have++;
        if (have > want) {
            p++;
            break;
        }
    }
    char *line = buf + p;
    for (int r = 1; r < H - 1 && line && *line; r++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        for (char *c = line; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        put(r, 0, line, W);
        line = nl ? nl + 1 : NULL;
    }
}

/* The findings of the trace in one line, as the report's findings open it: the first OOM (or
 * failed allocation) with its device and, once the analyses are done, the report's verdict on it;
 * the report's probable leaks. 0 when there is nothing to say. */
static int findings_line(const gmp_tui_state *s, gmp_tui_model *m, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(out + len, n - len, __VA_ARGS__);                                        \
        if (k_ > 0)                                                                                \
            len = len + (size_t)k_ < n ? len + (size_t)k_ : n - 1;                                 \
    } while (0)
    ADD("findings: ");
    const size_t base = len;
    uint64_t nfail = 0; /* a failed allocation and the OOM that reports it: one failure */
    for (size_t i = 0; i < gmp_tui_model_ndevs(m); i++)
        nfail += gmp_tui_model_dev(m, i)->failures;
    uint64_t oi = gmp_tui_model_find(m, GMP_TUI_NOEV, 1,
                                     1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED, INT32_MIN);
    gmp_tui_ev ev;
    int vready = gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_READY;
    size_t nv = gmp_tui_model_nverdicts(m);
    if (oi != GMP_TUI_NOEV && gmp_tui_model_read(m, oi, &ev, 1) == 1) {
        const char *why = NULL;
        for (size_t i = 0; vready && i < nv && !why; i++) {
            const gmp_tui_verdict *v = gmp_tui_model_verdict(m, i);
            if (v->index == oi && strncmp(v->text, "out of memory", 13) == 0)
                why = v->text;
        }
        char b[32], t[48];
        if (why)
            ADD("%s at %s", why, gmp_tui_fmt_time(s, ev.time_ns, t, sizeof t));
        else
            ADD("%s on %s%d, %s requested at %s",
                ev.op == GMP_TUI_EV_OOM ? "out of memory" : "allocation failed",
                ev.device < 0 ? "host " : "device ", ev.device, gmp_fmt_bytes(ev.size, b, sizeof b),
                gmp_tui_fmt_time(s, ev.time_ns, t, sizeof t));
        if (nfail > 1)
            ADD(" (%" PRIu64 " failures in all: o)", nfail);
        else
            ADD(" (o)");
    }
    size_t leaks = 0;
    for (size_t i = 0; vready && i < nv; i++) {
        const gmp_tui_verdict *v = gmp_tui_model_verdict(m, i);
        if (strncmp(v->text, "probable leak", 13) != 0 || !strstr(v->text, "first leaked"))
            continue;
        if (!leaks++) {
            const char *semi = strstr(v->text, "; ");
            ADD("%s%.*s (v)", len > base ? "; " : "", (int)(semi ? semi - v->text : 200), v->text);
        }
    }
    if (leaks > 1)
        ADD(" and %zu more", leaks - 1);
    if (gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_RUNNING)
        ADD("%s(the report's analyses are running...)", len > base ? "; " : "");
#undef ADD
    return len > base;
}

void gmp_tui_draw(gmp_tui_state *s)
{
    int H, W;
    getmaxyx(stdscr, H, W);
    erase();
    if (H < 10 || W < 40) {
        put(0, 0, "gpumemprof view: the terminal is too small (at least 40x10)", W);
        refresh();
        return;
    }
    if (s->help) {
        help_overlay(g_help, sizeof g_help / sizeof g_help[0], H, W);
        refresh();
        return;
    }
    if (s->show_log) {
        log_pane(s, H, W);
        refresh();
        return;
    }
    gmp_tui_model *m = gmp_tui_cur_model(s);
    const gmp_tui_dev *d = gmp_tui_cur_dev(s);
    char title[1024], dn[160];
    if (!s->ntr) {
        title_bar(0, 0, W, " gpumemprof view  ?: help  q: quit");
        put(2, 1,
            s->running || !s->log_path
                ? "waiting for the program's first CUDA process to write its trace..."
                : "the program ended and no CUDA process wrote a trace (q: quit, L: its output)",
            W - 2);
        if (s->log_path)
            put(3, 1, "L: the program's output", W - 2);
        refresh();
        return;
    }
    const gmp_tui_trace *tr = &s->tr[s->cur];
    snprintf(title, sizeof title, " gpumemprof view  %s  trace %zu/%zu%s%s  [%s]  ?: help",
             strrchr(tr->name, '/') ? strrchr(tr->name, '/') + 1 : tr->name, s->cur + 1, s->ntr,
             s->follow && !tr->complete ? " (following)" : "",
             s->log_path ? (s->running ? " [program running]" : " [program ended]") : "",
             dev_name(s, d, dn, sizeof dn));
    title_bar(0, 0, W, title);
    if (!m) {
        put(2, 1, tr->err[0] ? tr->err : "reading...", W - 2);
    } else {
        char line[512], t[48], a[32], r[32], p[32], pt[48];
        uint64_t alloc = gmp_tui_tree_total(s->tree);
        uint64_t ct = gmp_tui_cursor_time(s);
        uint64_t res = d ? gmp_tui_model_reserved_at(m, d, s->cursor) : 0;
        /* fits 80 columns with the report's time format and three-digit sizes */
        snprintf(line, sizeof line, "cursor %s alloc %s  res %s peak %s @%s",
                 gmp_tui_fmt_time(s, ct, t, sizeof t), gmp_fmt_bytes(alloc, a, sizeof a),
                 gmp_fmt_bytes(res, r, sizeof r),
                 gmp_fmt_bytes(d && d->d ? d->d->peak_allocated : 0, p, sizeof p),
                 d && d->d ? gmp_tui_fmt_time(s, d->d->peak_time_ns, pt, sizeof pt) : "-");
        /* --whatif, when the row has room: the setting and its model's peak reserved */
        const gmp_whatif_series *ws = gmp_tui_whatif_series(s, d);
        size_t ll = strlen(line);
        if (s->whatif && ll + 40 < (size_t)W && ll < sizeof line) {
            char wp[32];
            if (ws)
                snprintf(line + ll, sizeof line - ll, "  what-if %s: peak res %s", s->whatif_name,
                         gmp_fmt_bytes(ws->peak, wp, sizeof wp));
            else
                snprintf(line + ll, sizeof line - ll, "  what-if %s: %s", s->whatif_name,
                         tr->werr[0] ? tr->werr : "no tensor of PyTorch's allocator here");
        }
        put(1, 0, line, W);
        int th = (H - 4) / 4;
        if (th < 5)
            th = 5;
        int eh = H / 5 > 5 ? H / 5 : 5;
        int y = 2;
        /* the findings first (as the report opens with them): OOMs, probable leaks */
        char fl[768];
        if (findings_line(s, m, fl, sizeof fl)) {
            if (gmp_tui_term_has_color())
                attron(COLOR_PAIR(GMP_TUI_C_WARN) | A_BOLD);
            put(y, 0, fl, W);
            if (gmp_tui_term_has_color())
                attroff(COLOR_PAIR(GMP_TUI_C_WARN) | A_BOLD);
            y++;
            th--;
        }
        timeline(s, y, th, W);
        y += th + 1;
        int mh = H - 1 - eh - y;
        int tw = W >= 60 ? W * 58 / 100 : W;
        tree_pane(s, y, mh, 0, tw);
        if (tw < W) {
            for (int r2 = 0; r2 < mh; r2++)
                mvaddch(y + r2, tw, ' ');
            focus_pane(s, y, mh, tw + 1, W - tw - 1);
        }
        events_pane(s, y + mh, eh, W);
    }
    mvhline(H - 1, 0, ' ', W);
    size_t sl = strlen(s->status);
    if (sl > (size_t)W && W > 20 && H > 10) {
        /* a long status (a verdict's line): two rows, the second over the events pane's last */
        size_t cut = (size_t)W;
        while (cut > (size_t)W / 2 && s->status[cut] != ' ')
            cut--;
        if (s->status[cut] != ' ')
            cut = (size_t)W;
        char first[512];
        snprintf(first, sizeof first, "%.*s", (int)cut, s->status);
        mvhline(H - 2, 0, ' ', W);
        put(H - 2, 0, first, W);
        put(H - 1, 0, s->status + cut + (s->status[cut] == ' '), W);
    } else if (s->status[0])
        put(H - 1, 0, s->status, W);
    else {
        if (gmp_tui_term_has_color())
            attron(COLOR_PAIR(GMP_TUI_C_DIM));
        put(H - 1, 0,
            "q quit  ? help  </> move  +/- zoom  p peak  o OOM  v verdict  / search  "
            "g group  d device",
            W);
        if (gmp_tui_term_has_color())
            attroff(COLOR_PAIR(GMP_TUI_C_DIM));
    }
    refresh();
}
