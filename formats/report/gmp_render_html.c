/* gmp_render_html: the report document (gmp_doc.h) as one self-contained HTML page: inline CSS and
 * inline SVG, no script, no external reference (it works offline and can be attached to a ticket).
 * It walks the blocks and knows nothing of what they are about:
 *   SECTION  the root's title is the page's <h1>; a section at depth 1 is a <section> with an <h2>,
 *            depth 2 <h3>, depth 3 <h4>, deeper <h5>; each heading has an id (its anchor, else
 *            "s" and its number), and under the <h1> a table of contents (<nav class=toc>) links
 *            the headings of depth 1 and 2
 *   KV       a two-column table (label, value)
 *   TABLE    a table; numeric columns right-aligned; a GMP_DOC_BAR column has a second cell per
 *            row with a bar scaled to the column's largest value; "(top N of M)" on the heading
 *            or under the table when rows were left out
 *   SERIES   an SVG plot under its caption: byte axis, time axis, each column drawn by its role
 *            (a band between a LOW and a HIGH column, a line, dots), marks as vertical lines
 *            (dashed: GMP_DOC_BAD), the lanes of spans under it, a legend from the column titles;
 *            colours follow a fixed palette in column order (a band and its upper edge: one);
 *            a plot with neither marks nor lanes is drawn smaller
 *   STACKB   the frames, one a line
 *   VERDICT  a box coloured by severity: its line, then its children
 *   NOTICE   a paragraph coloured by severity
 * A value with a reference (gmp_dv_ref) is a link to its section's id: the only links of the page,
 * all inside it (href="#..."). Values with GMP_DOC_DATA (and items, columns and blocks with it) are
 * left out. Every string goes
 * through gmp_html_fputs; numbers are written by gmp_doc_fmt. The output depends only on the
 * document (the goldens compare bytes). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_render.h"

#define W 960.0 /* plot width */
#define H 200.0 /* plot height (HS: of a plot with neither marks nor lanes) */
#define HS 80.0
#define ML 70.0    /* left margin (axis labels), wider when a lane's label needs it */
#define LANE 16.0  /* height of a lane of spans */
#define BARW 160.0 /* width of a table's bar at the column's largest value */
#define FRAMES 8   /* frames shown of a stack in a table cell */

static const char *const css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}"
    "h1{font-size:22px}h2{font-size:19px;border-bottom:2px solid #ccc;margin-top:32px}"
    "h3{font-size:16px;margin-top:24px}h4{font-size:14px;margin:16px 0 4px}"
    "h5{font-size:13px;margin:12px 0 4px}"
    "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 8px;"
    "vertical-align:top}th{background:#f4f4f4;text-align:left}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}.st{font-family:monospace;font-size:12px}"
    ".warn{color:#a40}.bad{color:#c00;font-weight:bold}.ok{color:#282}svg{display:block;margin:6px "
    "0}"
    "svg text{font:11px system-ui,sans-serif}.note{color:#666;font-size:12px}"
    "td.bar{border-left:none;padding-left:0;min-width:160px;vertical-align:middle}"
    "td.bar span{display:inline-block;height:10px;background:#6a9fd4}"
    ".verdict{border-left:3px solid #bbb;padding:0 0 0 10px;margin:10px 0;color:#222;"
    "font-weight:normal}.verdict.bad{border-color:#c00}.verdict.warn{border-color:#a40}"
    ".verdict.ok{border-color:#282}.verdict>p:first-child{margin-top:0}"
    "nav.toc{font-size:13px;color:#444}nav.toc ul{margin:4px 0;padding-left:18px}";

/* Plot colours, in the order columns take them: a line's colour, a band's, an area's. */
static const char *const palette[][3] = {
    {"#1f5fa8", "#9cc3ea", "#dbe8f6"}, {"#e08a1e", "#f3c48a", "#fbe8d0"},
    {"#777", "#bbb", "#e6e6e6"},       {"#2a9d8f", "#9fd8d0", "#dcf2ef"},
    {"#8e44ad", "#cfa6e0", "#efe2f5"}, {"#5b8c2a", "#b6d69a", "#e6f2db"},
};
#define NPAL (sizeof palette / sizeof palette[0])

static void esc(FILE *f, const char *s, size_t n)
{
    if (s && n)
        gmp_html_fputs(f, s, n);
}

static void escz(FILE *f, const char *s)
{
    if (s)
        esc(f, s, strlen(s));
}

static const char *flag_class(unsigned flags)
{
    return flags & GMP_DOC_BAD ? "bad" : flags & GMP_DOC_WARN ? "warn" : NULL;
}

static const char *sev_class(gmp_doc_severity s)
{
    switch (s) {
    case GMP_DOC_PROBLEM: return "bad";
    case GMP_DOC_WARNING: return "warn";
    case GMP_DOC_OK: return "ok";
    default: return "info";
    }
}

/* Frames innermost first, one a line, at most max of them ("…" when there are more). */
static void put_frames(FILE *f, const gmp_doc_stack *s, size_t max)
{
    if (s->min_items > max)
        max = s->min_items;
    size_t i = 0, shown = 0, folded, inside;
    char fb[48];
    while (i < s->n && shown < max) {
        const gmp_doc_frame *fr = gmp_render_stack_next(s, &i, &folded, &inside);
        if (shown++)
            fputs("<br>", f);
        if (fr) {
            esc(f, fr->display.ptr, fr->display.len);
            if (inside) {
                fprintf(f, " <i>[+%zu inside", inside);
                size_t j = i - 1;
                for (const gmp_doc_frame *via; (via = gmp_render_via(s, &j));) {
                    fputs(", via</i> ", f);
                    esc(f, via->display.ptr, via->display.len);
                    fputs("<i>", f);
                }
                fputs("]</i>", f);
            }
        } else
            fprintf(f, "<i>%s</i>", gmp_render_folded_text(folded, fb, sizeof fb));
    }
    if (i < s->n)
        fputs("<br>…", f);
}

/* A value as text (plain: no markup, for the page's <title>). */
static void put_val(FILE *f, const gmp_doc_val *v, int plain)
{
    if (v->flags & GMP_DOC_DATA)
        return;
    const char *cls = plain ? NULL : flag_class(v->flags);
    int strong = !plain && (v->flags & GMP_DOC_STRONG), code = !plain && (v->flags & GMP_DOC_CODE);
    if (cls)
        fprintf(f, "<span class=%s>", cls);
    if (strong)
        fputs("<b>", f);
    if (code)
        fputs("<code>", f);
    int link = !plain && v->type == GMP_DOC_LIT && v->ref && *v->ref;
    if (link) {
        fputs("<a href=\"#", f);
        escz(f, v->ref);
        fputs("\">", f);
    }
    switch (v->type) {
    case GMP_DOC_LIT:
    case GMP_DOC_STR:
        if (v->s.len)
            esc(f, v->s.ptr, v->s.len);
        else if (v->type == GMP_DOC_STR && v->none && *v->none) {
            fputs(plain ? "" : "<i>", f);
            escz(f, v->none);
            fputs(plain ? "" : "</i>", f);
        }
        break;
    case GMP_DOC_STACK:
        if (!v->stack || !v->stack->n)
            break;
        if (plain) {
            size_t i = 0, folded, inside;
            const gmp_doc_frame *fr = NULL;
            while (i < v->stack->n && !(fr = gmp_render_stack_next(v->stack, &i, &folded, &inside)))
                ;
            if (!fr)
                fr = &v->stack->frames[0];
            esc(f, fr->display.ptr, fr->display.len);
        } else {
            fputs("<span class=st>", f);
            put_frames(f, v->stack, FRAMES);
            fputs("</span>", f);
        }
        break;
    default: {
        char buf[96];
        escz(f, gmp_doc_fmt(v, buf, sizeof buf));
    }
    }
    if (link)
        fputs("</a>", f);
    if (code)
        fputs("</code>", f);
    if (strong)
        fputs("</b>", f);
    if (cls)
        fputs("</span>", f);
}

static void put_line(FILE *f, const gmp_doc_line *l, int plain)
{
    for (size_t i = 0; i < l->n; i++)
        put_val(f, &l->v[i], plain);
}

/* ---- tables ---- */

/* A cell's magnitude for its bar (0 when it has none). */
static double magnitude(const gmp_doc_val *v)
{
    switch (v->type) {
    case GMP_DOC_BYTES:
    case GMP_DOC_COUNT:
    case GMP_DOC_DUR:
    case GMP_DOC_HEX: return (double)v->u;
    case GMP_DOC_SBYTES:
    case GMP_DOC_INT: return v->i > 0 ? (double)v->i : 0.0;
    case GMP_DOC_PCT:
    case GMP_DOC_REAL: return v->d > 0 ? v->d : 0.0;
    default: return 0.0;
    }
}

/* "(top N of M)" of a table in a note (elem: span in a heading, div under a table). */
static void put_top(FILE *f, const gmp_doc_block *t, const char *elem)
{
    fprintf(f, "%s<%s class=note>(top %zu of %" PRIu64 ")</%s>%s", elem[0] == 's' ? " " : "", elem,
            t->nrows, t->total, elem, elem[0] == 's' ? "" : "\n");
}

static void put_caption(FILE *f, const gmp_doc_block *b)
{
    if (!b->title.n)
        return;
    fputs("<p><b>", f);
    put_line(f, &b->title, 0);
    fputs("</b></p>\n", f);
}

static void put_kv(FILE *f, const gmp_doc_block *b)
{
    size_t shown = 0;
    for (size_t i = 0; i < b->nitems; i++) {
        const gmp_doc_item *it = &b->items[i];
        if (it->flags & GMP_DOC_DATA)
            continue;
        const char *cls = flag_class(it->flags);
        fputs(shown++ ? "<tr><th>" : "<table><tr><th>", f);
        escz(f, it->label);
        fprintf(f, "</th><td%s%s>", cls ? " class=" : "", cls ? cls : "");
        if (it->flags & GMP_DOC_STRONG)
            fputs("<b>", f);
        put_line(f, &it->value, 0);
        fputs(it->flags & GMP_DOC_STRONG ? "</b></td></tr>" : "</td></tr>", f);
    }
    if (shown)
        fputs("</table>\n", f);
}

static void put_table(FILE *f, const gmp_doc_block *b)
{
    put_caption(f, b);
    if (!b->nrows || !b->ncols)
        return;
    /* "(top N of M)": on the section's heading, else after the caption, else under the table */
    const gmp_doc_block *sec = b->parent;
    int note = b->total > b->nrows && !(sec && sec->kind == GMP_DOC_SECTION && sec->title.n &&
                                        gmp_render_heading_table(sec) == b);
    if (note && b->title.n)
        put_top(f, b, "div");
    double max[64] = {0}; /* the largest value of each BAR column (the first 64 columns) */
    fputs("<table><tr>", f);
    for (size_t c = 0; c < b->ncols; c++) {
        const gmp_doc_col *col = &b->cols[c];
        if (col->flags & GMP_DOC_DATA)
            continue;
        int bar = (col->flags & GMP_DOC_BAR) && c < 64;
        for (size_t r = 0; bar && r < b->nrows; r++) {
            double m = magnitude(&b->cells[r * b->ncols + c]);
            if (m > max[c])
                max[c] = m;
        }
        fputs(bar ? "<th colspan=2>" : "<th>", f);
        escz(f, col->title);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (size_t r = 0; r < b->nrows; r++) {
        fputs("<tr>", f);
        for (size_t c = 0; c < b->ncols; c++) {
            const gmp_doc_col *col = &b->cols[c];
            const gmp_doc_val *v = &b->cells[r * b->ncols + c];
            if (col->flags & GMP_DOC_DATA)
                continue;
            fputs(gmp_render_numeric(col->type) || gmp_render_numeric(v->type) ? "<td class=n>"
                                                                               : "<td>",
                  f);
            put_val(f, v, 0);
            fputs("</td>", f);
            if ((col->flags & GMP_DOC_BAR) && c < 64) {
                fputs("<td class=bar>", f);
                if (max[c] > 0 && magnitude(v) > 0)
                    fprintf(f, "<span style=\"width:%.1fpx\"></span>",
                            BARW * magnitude(v) / max[c] < 1 ? 1.0 : BARW * magnitude(v) / max[c]);
                fputs("</td>", f);
            }
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (note && !b->title.n)
        put_top(f, b, "div");
}

/* ---- the plot of a series ---- */

typedef struct plot {
    FILE *f;
    const gmp_doc_block *s;
    uint64_t t0, t1, ymax;
    double ml, h; /* left margin, height */
} plot;

static double xpos(const plot *p, uint64_t t)
{
    if (p->t1 <= p->t0 || t <= p->t0)
        return p->ml;
    double x = p->ml + (W - p->ml) * (double)(t - p->t0) / (double)(p->t1 - p->t0);
    return x > W ? W : x;
}

static double ypos(const plot *p, uint64_t v)
{
    return p->h + 4 - p->h * (double)v / (double)p->ymax;
}

/* Point i covers [start, x[i]]. */
static uint64_t pstart(const plot *p, size_t i)
{
    return i ? p->s->x[i - 1] : p->s->x0;
}

static uint64_t yv(const plot *p, size_t i, size_t col)
{
    return p->s->y[i * p->s->nscols + col];
}

static const char *fmt_bytes(uint64_t b, char *buf, size_t n)
{
    gmp_doc_val v = gmp_dv_bytes(b);
    return gmp_doc_fmt(&v, buf, n);
}

static const char *fmt_time(const plot *p, uint64_t t, char *buf, size_t n)
{
    gmp_doc_val v = gmp_dv_time(t, p->s->t0);
    return gmp_doc_fmt(&v, buf, n);
}

/* The steps of column col, left to right ("M x y L x y ..."; first: the first letter). */
static void steps(const plot *p, size_t col, char first)
{
    for (size_t i = 0; i < p->s->npoints; i++) {
        double y = ypos(p, yv(p, i, col));
        fprintf(p->f, "%c%.1f %.1fL%.1f %.1f", i ? 'L' : first, xpos(p, pstart(p, i)), y,
                xpos(p, p->s->x[i]), y);
    }
}

static void axes(const plot *p)
{
    FILE *f = p->f;
    char b[64];
    for (int k = 0; k <= 4; k++) {
        double y = p->h - p->h * k / 4.0 + 4;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>", p->ml,
                y, W, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", p->ml - 4, y + 4);
        escz(f, fmt_bytes((uint64_t)((double)p->ymax * k / 4.0), b, sizeof b));
        fputs("</text>", f);
    }
    char prev[64] = "";
    for (int k = 0; k <= 5; k++) {
        uint64_t tt = p->t0 + (uint64_t)((double)(p->t1 - p->t0) * k / 5.0);
        double x = xpos(p, tt);
        fmt_time(p, tt, b, sizeof b);
        if (!strcmp(b, prev))
            continue; /* a tick's label once (a short series) */
        snprintf(prev, sizeof prev, "%s", b);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"4\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#f2f2f2\"/>"
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"%s\">",
                x, x, p->h + 4, x, p->h + 18,
                k == 5 ? "end"
                : k    ? "middle"
                       : "start");
        escz(f, b);
        fputs("</text>", f);
    }
}

/* A band between columns lo and hi over a light area under hi; hi's edge drawn as a line. */
static void band(const plot *p, size_t lo, size_t hi, size_t pal)
{
    FILE *f = p->f;
    const gmp_doc_block *s = p->s;
    fprintf(f, "<path fill=\"%s\" stroke=\"none\" d=\"M%.1f %.1f", palette[pal][2], p->ml,
            ypos(p, 0));
    steps(p, hi, 'L');
    fprintf(f, "L%.1f %.1fZ\"/>", xpos(p, s->x[s->npoints - 1]), ypos(p, 0));
    fprintf(f, "<path fill=\"%s\" stroke=\"none\" d=\"", palette[pal][1]);
    steps(p, hi, 'M');
    for (size_t i = s->npoints; i-- > 0;) {
        double y = ypos(p, yv(p, i, lo));
        fprintf(f, "L%.1f %.1fL%.1f %.1f", xpos(p, s->x[i]), y, xpos(p, pstart(p, i)), y);
    }
    fputs("Z\"><title>", f);
    escz(f, s->scols[lo].title);
    if (s->scols[hi].title && *s->scols[hi].title) {
        fputs(" – ", f);
        escz(f, s->scols[hi].title);
    }
    fputs("</title></path>", f);
}

static void line(const plot *p, size_t col, size_t pal)
{
    fprintf(p->f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"", palette[pal][0]);
    steps(p, col, 'M');
    fputs("\"><title>", p->f);
    escz(p->f, p->s->scols[col].title);
    fputs("</title></path>", p->f);
}

static void dots(const plot *p, size_t col, size_t pal)
{
    FILE *f = p->f;
    for (size_t i = 0; i < p->s->npoints; i++) {
        uint64_t v = yv(p, i, col), a = pstart(p, i);
        char b[64];
        if (!v)
            continue;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"><title>",
                xpos(p, a + (p->s->x[i] - a) / 2), ypos(p, v), palette[pal][0]);
        escz(f, p->s->scols[col].title);
        fputc(' ', f);
        escz(f, fmt_bytes(v, b, sizeof b));
        fputs("</title></circle>", f);
    }
}

/* Marks: a vertical line each (dashed when BAD); a dot on the STRONG column for the others. */
static void marks(const plot *p)
{
    FILE *f = p->f;
    const gmp_doc_block *s = p->s;
    size_t strong = s->nscols;
    for (size_t c = 0; c < s->nscols && strong == s->nscols; c++)
        if ((s->scols[c].flags & GMP_DOC_STRONG) && s->scols[c].role != GMP_DOC_S_HIDDEN)
            strong = c;
    for (size_t m = 0; m < s->nmarks; m++) {
        const gmp_doc_mark *mk = &s->marks[m];
        double x = xpos(p, mk->t);
        char b[64];
        int bad = (mk->flags & GMP_DOC_BAD) != 0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"4\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#c00\"%s><title>",
                x, x, p->h + 4, bad ? " stroke-dasharray=\"3 2\"" : " stroke-opacity=\"0.4\"");
        escz(f, mk->label);
        fputs(" at ", f);
        escz(f, fmt_time(p, mk->t, b, sizeof b));
        fputs("</title></line>", f);
        if (bad || strong == s->nscols)
            continue;
        size_t i = 0;
        while (i + 1 < s->npoints && s->x[i] < mk->t)
            i++;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#c00\"><title>", x,
                ypos(p, yv(p, i, strong)));
        escz(f, mk->label);
        fputc(' ', f);
        escz(f, fmt_bytes(yv(p, i, strong), b, sizeof b));
        fputs(" at ", f);
        escz(f, fmt_time(p, mk->t, b, sizeof b));
        fputs("</title></circle>", f);
    }
}

/* A colour for a span: a hue from its label's hash. */
static unsigned hue(gmp_str s)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < s.len; i++)
        h = (h ^ (unsigned char)s.ptr[i]) * 16777619u;
    return h % 360u;
}

/* The lanes under the plot: each span a rectangle, its label's last '/' component written in it
 * when it fits, the whole label as its tooltip. */
static void lanes(const plot *p)
{
    FILE *f = p->f;
    double y = p->h + 30;
    const char *prev = NULL;
    for (size_t l = 0; l < p->s->nlanes; l++, y += LANE) {
        const gmp_doc_lane *ln = &p->s->lanes[l];
        if (ln->label && (!prev || strcmp(prev, ln->label))) {
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", p->ml - 4, y + 12);
            escz(f, ln->label);
            fputs("</text>", f);
        }
        prev = ln->label;
        for (size_t k = 0; k < ln->n; k++) {
            const gmp_doc_span *sp = &ln->spans[k];
            double x0 = xpos(p, sp->t0), x1 = xpos(p, sp->t1);
            if (x1 - x0 < 0.5)
                x1 = x0 + 0.5;
            gmp_str lb = sp->label;
            fprintf(f,
                    "<g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" "
                    "fill=\"hsl(%u,55%%,72%%)\" stroke=\"#fff\" stroke-width=\"0.5\"/><title>",
                    x0, y, x1 - x0, LANE - 2, hue(lb));
            esc(f, lb.ptr, lb.len);
            fputs("</title>", f);
            const char *last = lb.ptr;
            for (uint32_t i = 0; i < lb.len; i++)
                if (lb.ptr[i] == '/')
                    last = lb.ptr + i + 1;
            size_t len = lb.len - (size_t)(last - lb.ptr), fit = (size_t)((x1 - x0 - 4) / 6.5);
            if (fit >= 3 && len) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" clip-path=\"inset(0)\">", x0 + 2, y + 11);
                size_t k2 = len < fit ? len : fit;
                while (k2 < len && k2 > 0 && ((unsigned char)last[k2] & 0xc0) == 0x80)
                    k2--; /* do not cut inside a UTF-8 sequence */
                esc(f, last, k2);
                fputs("</text>", f);
            }
            fputs("</g>", f);
        }
    }
}

static void legend_entry(FILE *f, int *n, const char *colour, const char *glyph, const char *what)
{
    fprintf(f, "%s<span style=\"color:%s\">%s</span> ", (*n)++ ? " " : "", colour, glyph);
    escz(f, what);
}

static void legend(const plot *p)
{
    FILE *f = p->f;
    const gmp_doc_block *s = p->s;
    int n = 0;
    fputs("<div class=note>", f);
    for (size_t c = 0, pal = 0; c < s->nscols; c++) {
        const gmp_doc_scol *sc = &s->scols[c];
        if (sc->role == GMP_DOC_S_HIDDEN)
            continue;
        if (sc->role == GMP_DOC_S_LOW && c + 1 < s->nscols &&
            s->scols[c + 1].role == GMP_DOC_S_HIGH) {
            legend_entry(f, &n, palette[pal++ % NPAL][0], "&#9632;", s->scols[++c].title);
            fputs(" (band from ", f);
            escz(f, sc->title);
            fputc(')', f);
            continue;
        }
        if (sc->role == GMP_DOC_S_DOTS) { /* dots that are never drawn need no legend */
            size_t i = 0;
            while (i < s->npoints && !s->y[i * s->nscols + c])
                i++;
            if (i == s->npoints) {
                pal++;
                continue;
            }
        }
        legend_entry(f, &n, palette[pal++ % NPAL][0],
                     sc->role == GMP_DOC_S_DOTS ? "&#9679;" : "&#9632;", sc->title);
    }
    for (size_t m = 0; m < s->nmarks; m++) {
        const gmp_doc_mark *mk = &s->marks[m];
        size_t k = 0; /* each kind of mark once */
        while (k < m &&
               (((s->marks[k].flags ^ mk->flags) & GMP_DOC_BAD) ||
                strcmp(s->marks[k].label ? s->marks[k].label : "", mk->label ? mk->label : "")))
            k++;
        if (k < m)
            continue;
        legend_entry(f, &n, "#c00", mk->flags & GMP_DOC_BAD ? "&#9478;" : "&#9679;", mk->label);
    }
    if (s->bucket_ns) {
        char b[64];
        gmp_doc_val v = gmp_dv_dur(s->bucket_ns);
        fprintf(f, "; %zu buckets of ", s->npoints);
        escz(f, gmp_doc_fmt(&v, b, sizeof b));
    }
    fputs("</div>\n", f);
}

static void put_series(FILE *f, const gmp_doc_block *s)
{
    if (!s->npoints || !s->nscols)
        return;
    plot p = {f,
              s,
              s->x0,
              s->x[s->npoints - 1],
              gmp_doc_series_max(s),
              ML,
              s->nlanes || s->nmarks ? H : HS};
    for (size_t l = 0; l < s->nlanes; l++) { /* about 6.2 px a character at 11 px */
        double w = s->lanes[l].label ? 6.2 * (double)strlen(s->lanes[l].label) + 8 : 0;
        if (w > p.ml)
            p.ml = w > W / 3 ? W / 3 : w;
    }
    if (!p.ymax)
        p.ymax = 1;
    double hh = p.h + 24 + (s->nlanes ? 8 + LANE * (double)s->nlanes : 0);
    put_caption(f, s);
    fprintf(f, "<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">",
            W + 10, hh, W + 10, hh);
    if (s->title.n) {
        fputs("<title>", f);
        put_line(f, &s->title, 1);
        fputs("</title>", f);
    }
    axes(&p);
    for (size_t c = 0, pal = 0; c < s->nscols; c++) {
        unsigned role = s->scols[c].role;
        if (role == GMP_DOC_S_HIDDEN)
            continue;
        if (role == GMP_DOC_S_DOTS)
            dots(&p, c, pal++ % NPAL);
        else if (role == GMP_DOC_S_LOW && c + 1 < s->nscols &&
                 s->scols[c + 1].role == GMP_DOC_S_HIGH) {
            band(&p, c, c + 1, pal % NPAL);
            line(&p, ++c, pal++ % NPAL);
        } else
            line(&p, c, pal++ % NPAL); /* a LOW or HIGH without its pair is a line */
    }
    marks(&p);
    lanes(&p);
    fputs("</svg>\n", f);
    legend(&p);
}

/* ---- blocks ---- */

/* Where the caller's timeline markup goes: before the block `at` (NULL: nowhere). sections:
 * headings written so far (their ids). */
typedef struct hctx {
    const gmp_doc_block *at;
    const char *html;
    size_t sections;
} hctx;

/* A heading's id: its anchor, else "s" and its number among the headings shown (document order),
 * so that the table of contents links every heading it lists. */
static void put_id(FILE *f, const gmp_doc_block *b, size_t n)
{
    fputs(" id=\"", f);
    if (b->anchor && *b->anchor)
        escz(f, b->anchor);
    else
        fprintf(f, "s%zu", n);
    fputc('"', f);
}

static void put_block(FILE *f, const gmp_doc_block *b, hctx *x);

static void put_children(FILE *f, const gmp_doc_block *b, hctx *x)
{
    for (const gmp_doc_block *c = b->first; c; c = c->next)
        put_block(f, c, x);
}

static void put_section(FILE *f, const gmp_doc_block *b, hctx *x)
{
    int depth = gmp_doc_depth(b), h = depth + 1 > 5 ? 5 : depth + 1;
    if (depth == 1)
        fputs("<section>\n", f);
    if (b->title.n) {
        const char *cls = flag_class(b->flags);
        fprintf(f, "<h%d", h);
        put_id(f, b, ++x->sections);
        fprintf(f, "%s%s>", cls ? " class=" : "", cls ? cls : "");
        put_line(f, &b->title, 0);
        const gmp_doc_block *t = gmp_render_heading_table(b);
        if (t)
            put_top(f, t, "span");
        fprintf(f, "</h%d>\n", h);
    }
    put_children(f, b, x);
    if (depth == 1)
        fputs("</section>\n", f);
}

static void put_block(FILE *f, const gmp_doc_block *b, hctx *x)
{
    if (b->flags & GMP_DOC_DATA)
        return;
    if (b == x->at)
        fputs(x->html, f);
    const char *cls = sev_class(b->severity);
    switch (b->kind) {
    case GMP_DOC_SECTION: put_section(f, b, x); break;
    case GMP_DOC_KV: put_kv(f, b); break;
    case GMP_DOC_TABLE: put_table(f, b); break;
    case GMP_DOC_SERIES: put_series(f, b); break;
    case GMP_DOC_STACKB:
        put_caption(f, b);
        fputs("<div class=st>", f);
        put_frames(f, &b->stack, b->stack.n);
        fputs("</div>\n", f);
        break;
    case GMP_DOC_VERDICT:
        fprintf(f, "<div class=\"verdict %s\">\n<p class=%s>", cls, cls);
        put_line(f, &b->title, 0);
        fputs("</p>\n", f);
        put_children(f, b, x);
        fputs("</div>\n", f);
        break;
    case GMP_DOC_NOTICE:
        if (b->severity == GMP_DOC_INFO)
            fputs("<p>", f);
        else
            fprintf(f, "<p class=%s>", cls);
        put_line(f, &b->title, 0);
        fputs("</p>\n", f);
        break;
    }
}

/* The table of contents: the headings of depth 1 and 2 (a trace, a device, a section of a
 * trace), one line per heading of depth 1 with its sections after it, each a link to its id
 * (put_id: the same numbering as the headings). *n: headings seen so far. */
static void toc_walk(FILE *f, const gmp_doc_block *b, size_t *n, int *open, int *items)
{
    for (const gmp_doc_block *c = b->first; c; c = c->next) {
        if (c->flags & GMP_DOC_DATA)
            continue;
        if (c->kind == GMP_DOC_SECTION && c->title.n) {
            int depth = gmp_doc_depth(c);
            ++*n;
            if (depth <= 2) {
                if (depth == 1 || !*open) {
                    fputs(*open ? "</li>\n<li>" : "<li>", f);
                    *open = 1;
                    *items = 0;
                } else {
                    fputs(*items ? " · " : ": ", f);
                }
                fputs("<a href=\"#", f);
                if (c->anchor && *c->anchor)
                    escz(f, c->anchor);
                else
                    fprintf(f, "s%zu", *n);
                fputs("\">", f);
                put_line(f, &c->title, 1);
                fputs("</a>", f);
                if (depth == 2)
                    (*items)++;
            }
        }
        toc_walk(f, c, n, open, items);
    }
}

static void put_toc(FILE *f, const gmp_doc_block *root)
{
    size_t n = 0;
    int open = 0, items = 0;
    fputs("<nav class=toc>\n<ul>\n", f);
    toc_walk(f, root, &n, &open, &items);
    fputs(open ? "</li>\n</ul>\n</nav>\n" : "</ul>\n</nav>\n", f);
}

/* The first SERIES keyed "timeline" that is shown, in document order; NULL when none. */
static const gmp_doc_block *first_timeline(const gmp_doc_block *b)
{
    if (b->flags & GMP_DOC_DATA)
        return NULL;
    if (b->kind == GMP_DOC_SERIES && b->key && strcmp(b->key, "timeline") == 0)
        return b;
    for (const gmp_doc_block *c = b->first; c; c = c->next) {
        const gmp_doc_block *t = first_timeline(c);
        if (t)
            return t;
    }
    return NULL;
}

/* The first heading in document order (the root's, else the first section's). */
static const gmp_doc_block *first_heading(const gmp_doc_block *b)
{
    if (b->kind == GMP_DOC_SECTION && b->title.n && !(b->flags & GMP_DOC_DATA))
        return b;
    for (const gmp_doc_block *c = b->first; c; c = c->next) {
        const gmp_doc_block *h = first_heading(c);
        if (h)
            return h;
    }
    return NULL;
}

gmp_err gmp_render_html(const gmp_doc *d, FILE *f, const gmp_render_opts *o)
{
    const gmp_doc_block *root = gmp_doc_root_c(d);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    if (o && o->title) {
        escz(f, o->title);
    } else {
        const gmp_doc_block *h = first_heading(root);
        if (h)
            put_line(f, &h->title, 1);
    }
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", css);
    if (root->title.n) {
        fputs("<h1>", f);
        put_line(f, &root->title, 0);
        fputs("</h1>\n", f);
    }
    hctx x = {NULL, NULL, 0};
    if (o && o->timeline_html && *o->timeline_html) {
        x.at = first_timeline(root);
        x.html = o->timeline_html;
    }
    put_toc(f, root);
    put_children(f, root, &x);
    fputs("</body>\n</html>\n", f);
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}
