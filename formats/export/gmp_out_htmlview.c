/* HTML view output (`convert --html-view FILE`): one self-contained offline page (no network: its
 * script and style are embedded, gmp_htmlview_asset.h made from htmlview/view.js and view.css at
 * build time) with memory_viz's main views, per device: the active memory timeline (each live
 * allocation a band stacked in allocation order, hover for its size, times, kind, API, range and
 * stack, zoom into any time window) and the breakdown of the device's peak by range and by stack,
 * linked both ways.
 *
 * Bounded page and browser work whatever the input: the timeline is precomputed as levels of
 * detail. Level l has 1024 << l columns over the device's time range; each column is the live set
 * at the moment of the column's highest allocated memory (so no peak is lost), drawn as segments
 * from the bottom: allocations of at least one pixel's worth of memory (the device's peak / 400)
 * as their own band, in allocation order, and the smaller ones merged into one segment per site
 * (stack), the sites that are still too small together in one "other" segment. A column is at most
 * about 400 + (sites) segments, and a column equal to the one before it is written as 0. Each
 * level is cut in tiles of 1024 columns, each its own <script type="application/json"> that the
 * page parses only when a tile is shown; levels are added while the page stays within its budget
 * (16 MiB of level data, all devices together) and while a level has fewer columns than the
 * device has events. The page draws only the visible columns of the level whose columns are about
 * one per pixel.
 *
 * Fragment (gmp_out_htmlview_fragment, for the HTML report's timeline: `report --format html`,
 * `convert --report F.html`, unless --static): the same view as one <div id="gmp-view"> to place
 * inside another page (the HTML report): its style with every rule scoped to the div, its data and
 * its script, no <html> wrapper; view.js draws into the div.
 *
 * Memory: during the replay, 40 bytes per allocation of device memory (its times, size, site and
 * the order of its events), freed when the trace ends; the page's text is kept until the end. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_analysis.h"
#include "gmp_export.h"
#include "gmp_frames.h"
#include "gmp_htmlview_asset.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_units.h"
#include "gmp_whatif.h"

#define COLS0 1024          /* columns of level 0, and of a tile */
#define MAX_LEVELS 12       /* level 11: 2 M columns */
#define CHART_PX 400        /* a pixel of the chart's height: peak / CHART_PX bytes */
#define BUDGET (16u << 20)  /* bytes of level data in a page, all devices together */
#define MAX_STACK 128       /* frames shown per stack */
#define BREAKDOWN_SITES 200 /* stacks listed in a device's breakdown */
#define MAX_OOM_MARKS 64    /* OOMs drawn per device */
#define MAX_FINDINGS 16     /* findings listed per trace */
/* memory no allocation explains is a finding from this much and this share of the device's peak
 * reserved memory (as in the report: formats/report/gmp_report_findings.c) */
#define UNEXPLAINED_MIN ((uint64_t)64 << 20)
#define UNEXPLAINED_SHARE 0.10

typedef struct hv_alloc {
    uint64_t t0, t1, size;
    uint32_t seq0, seq1; /* order of the alloc and free events among the device's events */
    uint32_t site;       /* the replay's site index */
    uint32_t pad;
} hv_alloc;

typedef struct hv_dev {
    int32_t id;
    hv_alloc *a;
    size_t n, cap;
    uint32_t *freed; /* alloc indexes in the order they were freed */
    size_t nfreed, capfreed;
    gmp_omap live; /* key (address, or VMM handle) -> index + 1 */
    uint32_t seq;
} hv_dev;

typedef struct hv_trace {
    gmp_output_trace info;
    gmp_replay *rp;
    gmp_reader *r;
    hv_dev *dev;
    size_t ndev;
    gmp_omap devmap; /* device id + 1 -> index + 1 */
    int failed;
    gmp_analysis *an; /* a whole page: the findings' analysis (OOM verdicts, leaks); else NULL */
} hv_trace;

struct gmp_output_ctx {
    FILE *out;
    gmp_output_opts o;
    gmp_obuf devices; /* the devices' JSON objects, comma separated */
    gmp_obuf sites;   /* the sites' JSON members "id":{...}, comma separated */
    gmp_obuf tiles;   /* the tiles' <script> elements */
    uint32_t nsites;  /* global site ids handed out */
    size_t ndevices;
    gmp_obuf findings;    /* the findings' JSON objects, comma separated (a whole page only) */
    long start;           /* the device (index in "devices") the page opens on: the first OOM's */
    uint64_t level_bytes; /* level data written so far (the budget) */
    int oom;
    int fragment; /* a <div id="gmp-view"> for another page, not a whole page */
    hv_trace *t;
    gmp_obuf tmp, tmp2;
};

/* ---- collecting allocations ---- */

static hv_dev *dev_get(hv_trace *t, int32_t id)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&t->devmap, (uint64_t)(int64_t)id + 2, &fresh);
    if (!v)
        return NULL;
    if (!fresh)
        return &t->dev[*v - 1];
    hv_dev *nd = realloc(t->dev, (t->ndev + 1) * sizeof *nd);
    if (!nd)
        return NULL;
    t->dev = nd;
    memset(&nd[t->ndev], 0, sizeof *nd);
    nd[t->ndev].id = id;
    *v = ++t->ndev;
    return &nd[t->ndev - 1];
}

static uint64_t alloc_key(const gmp_replay_alloc *a)
{
    return a->address ? a->address : (a->handle | (1ull << 63));
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    hv_trace *t = c->t;
    if (!ev->counted || !ev->alloc || t->failed)
        return GMP_OK;
    const gmp_replay_alloc *a = ev->alloc;
    hv_dev *d = dev_get(t, a->device);
    if (!d)
        goto nomem;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        hv_alloc *na = realloc(d->a, nc * sizeof *na);
        if (!na)
            goto nomem;
        d->a = na;
        d->cap = nc;
    }
    if (d->n >= UINT32_MAX - 1)
        return GMP_OK; /* 4 G allocations on one device: the rest are left out */
    hv_alloc *x = &d->a[d->n];
    x->t0 = a->time_ns;
    x->t1 = UINT64_MAX;
    x->size = a->size;
    x->seq0 = d->seq++;
    x->seq1 = UINT32_MAX;
    x->site = (uint32_t)a->site;
    x->pad = 0;
    int fresh;
    uint64_t *v = gmp_omap_put(&d->live, alloc_key(a), &fresh);
    if (!v)
        goto nomem;
    *v = ++d->n;
    return GMP_OK;
nomem:
    t->failed = 1;
    return gmp_replay_fail(rp, GMP_ERR_NOMEM, "html view: out of memory");
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    hv_trace *t = c->t;
    if (!ev->counted || !ev->alloc || t->failed)
        return GMP_OK;
    uint64_t now = ev->rec ? ev->rec->time_ns : 0;
    for (size_t i = 0; i < ev->nalloc; i++) {
        const gmp_replay_alloc *a = &ev->alloc[i];
        hv_dev *d = dev_get(t, a->device);
        if (!d)
            goto nomem;
        uint64_t *v = gmp_omap_get(&d->live, alloc_key(a));
        if (!v || !*v)
            continue;
        hv_alloc *x = &d->a[*v - 1];
        uint32_t idx = (uint32_t)(*v - 1);
        *v = 0; /* (the key may be allocated again) */
        if (x->seq1 != UINT32_MAX)
            continue;
        x->t1 = now < x->t0 ? x->t0 : now;
        x->seq1 = d->seq++;
        if (d->nfreed == d->capfreed) {
            size_t nc = d->capfreed ? d->capfreed * 2 : 1024;
            uint32_t *nf = realloc(d->freed, nc * sizeof *nf);
            if (!nf)
                goto nomem;
            d->freed = nf;
            d->capfreed = nc;
        }
        d->freed[d->nfreed++] = idx;
    }
    return GMP_OK;
nomem:
    t->failed = 1;
    return gmp_replay_fail(rp, GMP_ERR_NOMEM, "html view: out of memory");
}

/* ---- JSON helpers ---- */

static void js_str(gmp_obuf *b, const char *s, size_t n)
{
    /* JSON inside <script>: "</" must not appear, so '<' is written \u003c */
    gmp_obuf q = {0};
    gmp_obuf_json(&q, s, n);
    for (size_t i = 0; i < q.len; i++) {
        if (q.p[i] == '<')
            gmp_obuf_add(b, "\\u003c", 6);
        else
            gmp_obuf_add(b, q.p + i, 1);
    }
    if (q.oom)
        b->oom = 1;
    gmp_obuf_free(&q);
}

static void js_cstr(gmp_obuf *b, const char *s)
{
    js_str(b, s, s ? strlen(s) : 0);
}

/* ---- sites: device, kind, API, range path, stack (folded as everywhere) ---- */

typedef struct site_ids {
    uint32_t *global; /* replay site index -> global id + 1 (0: not written yet) */
    uint8_t *cat;     /* replay site index -> gmp_category + 1 (0: not known yet) */
    size_t n;
} site_ids;

static void range_path(hv_trace *t, uint32_t id, gmp_obuf *s)
{
    uint32_t nodes[256];
    size_t n = 0;
    for (uint32_t node = id; node && n < 256;) {
        nodes[n++] = node;
        const gmp_rec_range *r = gmp_reader_range(t->r, node);
        node = r ? r->parent : 0;
    }
    for (size_t k = n; k-- > 0;) {
        const gmp_rec_range *r = gmp_reader_range(t->r, nodes[k]);
        gmp_str name = r ? gmp_reader_string(t->r, r->name) : (gmp_str){"", 0};
        if (k != n - 1)
            gmp_obuf_add(s, "/", 1);
        gmp_obuf_add(s, name.ptr, name.len);
    }
}

/* The frames of a stack as shown (innermost first), internal ones folded; *cat: the category of
 * an allocation with these frames and this range path (gmp_frames.h). */
static void stack_json(gmp_output_ctx *c, hv_trace *t, uint32_t stack, gmp_str range, gmp_obuf *b,
                       gmp_category *cat)
{
    gmp_replay_frame fr[MAX_STACK];
    size_t n = stack ? gmp_replay_stack_frames(t->rp, stack, fr, MAX_STACK) : 0;
    if (n > MAX_STACK)
        n = MAX_STACK;
    uint8_t cls[MAX_STACK], hide[MAX_STACK];
    gmp_obuf names[MAX_STACK], files[MAX_STACK];
    gmp_frame_info fis[MAX_STACK];
    memset(names, 0, sizeof names);
    memset(files, 0, sizeof files);
    /* an address inside no loaded module (data words a frame-pointer walk read as return
     * addresses) is left out, as the report leaves it out (formats/report/gmp_report.c); a stack
     * of nothing else is one "?" frame there, and here */
    size_t m = 0, raw = 0;
    for (size_t i = 0; i < n; i++) {
        if (fr[i].kind != GMP_FRAME_PYTHON && !fr[i].module)
            raw++;
        else
            fr[m++] = fr[i];
    }
    n = m;
    for (size_t i = 0; i < n; i++) {
        gmp_obuf *fb = &files[i];
        uint32_t line = 0;
        gmp_output_frame(&c->o, t->r, &fr[i], &names[i], fb, &line);
        gmp_frame_info fi = {{"", 0}, {"", 0}, {"", 0}};
        if (fr[i].kind == GMP_FRAME_PYTHON) {
            fi.function = fr[i].function;
            fi.file = fr[i].file;
        } else {
            size_t k = names[i].p ? names[i].len : 0;
            for (size_t j = 0; j + 1 < k; j++)
                if (names[i].p[j] == ' ' && names[i].p[j + 1] == '(') {
                    k = j;
                    break;
                }
            fi.function = (gmp_str){names[i].p ? names[i].p : "", (uint32_t)k};
            fi.file = (gmp_str){fb->p ? fb->p : "", fb->p ? (uint32_t)fb->len : 0};
            fi.module = fr[i].module->path;
        }
        cls[i] = (uint8_t)gmp_frame_classify(&fi, NULL);
        fis[i] = fi;
    }
    *cat = gmp_frames_category(fis, n, range);
    memset(hide, 0, sizeof hide);
    if (!c->o.all_frames && n)
        gmp_frames_fold(cls, n, hide);
    gmp_obuf_add(b, "[", 1);
    if (raw && !n)
        gmp_obuf_add(b, "\"?\"", 3);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (!hide[i]) {
            if (!first)
                gmp_obuf_add(b, ",", 1);
            first = 0;
            /* one line: a C++ name shortened (gmp_frame_short_name), what follows it kept */
            size_t fl = fis[i].function.len, nl = names[i].p ? names[i].len : 0;
            char sn[512];
            int cxx = fr[i].kind != GMP_FRAME_PYTHON || !fr[i].line ||
                      (fl && memmem(fis[i].function.ptr, fl, "::", 2)); /* as gmp_frame_text */
            if (cxx && fl && fl <= nl && memcmp(names[i].p, fis[i].function.ptr, fl) == 0) {
                size_t k = gmp_frame_short_name(fis[i].function, sn, sizeof sn);
                gmp_obuf one = {0};
                gmp_obuf_add(&one, sn, k);
                gmp_obuf_add(&one, names[i].p + fl, nl - fl);
                js_str(b, one.p ? one.p : "", one.p ? one.len : 0);
                gmp_obuf_free(&one);
            } else {
                js_str(b, names[i].p ? names[i].p : "", nl);
            }
        }
        gmp_obuf_free(&names[i]);
        gmp_obuf_free(&files[i]);
    }
    gmp_obuf_add(b, "]", 1);
}

/* The report's rule on lifetimes (formats/report/gmp_report.c, site_category): made by the
 * backward pass and still live at the end, as much as at the peak, it was kept past the backward:
 * a gradient (AccumulateGrad keeps the incoming buffer as .grad). */
static gmp_category lifetime_category(gmp_category cat, const gmp_replay_site *st)
{
    if (cat == GMP_CAT_TEMPORARY && st->peak_bytes && st->live_bytes >= st->peak_bytes)
        return GMP_CAT_GRADIENT;
    return cat;
}

/* The global id of a replay site, its JSON written on first use. */
static uint32_t site_id(gmp_output_ctx *c, hv_trace *t, site_ids *ids, uint32_t s)
{
    if (s >= ids->n)
        return UINT32_MAX;
    if (ids->global[s])
        return ids->global[s] - 1;
    const gmp_replay_site *st = gmp_replay_site_at(t->rp, s);
    uint32_t g = c->nsites++;
    ids->global[s] = g + 1;
    gmp_obuf *b = &c->sites;
    if (g)
        gmp_obuf_add(b, ",\n", 2);
    gmp_obuf_printf(b, "\"%" PRIu32 "\":{\"k\":", g);
    js_cstr(b, gmp_mem_kind_name(st->kind));
    gmp_str api = gmp_reader_string(t->r, st->api);
    gmp_obuf_add(b, ",\"a\":", 5);
    js_str(b, api.ptr, api.len);
    gmp_obuf_add(b, ",\"r\":", 5);
    gmp_obuf path = {0};
    range_path(t, st->range, &path);
    js_str(b, path.p ? path.p : "", path.len);
    gmp_obuf_add(b, ",\"s\":", 5);
    gmp_category cat = GMP_CAT_OTHER;
    stack_json(c, t, st->stack, (gmp_str){path.p ? path.p : "", (uint32_t)path.len}, b, &cat);
    cat = lifetime_category(cat, st);
    gmp_obuf_free(&path);
    gmp_obuf_add(b, ",\"c\":", 5);
    js_cstr(b, gmp_category_name(cat));
    gmp_obuf_add(b, "}", 1);
    ids->cat[s] = (uint8_t)(cat + 1);
    return g;
}

/* The category of a replay site (computed once; no JSON written). */
static gmp_category site_category(gmp_output_ctx *c, hv_trace *t, site_ids *ids, uint32_t s)
{
    if (s >= ids->n)
        return GMP_CAT_OTHER;
    if (ids->cat[s])
        return (gmp_category)(ids->cat[s] - 1);
    const gmp_replay_site *st = gmp_replay_site_at(t->rp, s);
    gmp_obuf path = {0}, scratch = {0};
    range_path(t, st->range, &path);
    gmp_category cat = GMP_CAT_OTHER;
    stack_json(c, t, st->stack, (gmp_str){path.p ? path.p : "", (uint32_t)path.len}, &scratch,
               &cat);
    cat = lifetime_category(cat, st);
    gmp_obuf_free(&path);
    gmp_obuf_free(&scratch);
    ids->cat[s] = (uint8_t)(cat + 1);
    return cat;
}

/* ---- levels of detail ---- */

typedef struct sweep {
    const hv_alloc *a;
    size_t n;
    const uint32_t *freed;
    size_t nfreed;
    size_t ia, ifr; /* next alloc, next free */
    uint64_t allocated;
} sweep;

/* The next event (1: an alloc of index *idx, 0: a free of *idx), or -1 at the end. */
static int next_event(const sweep *w, uint32_t *idx, uint64_t *time)
{
    int have_a = w->ia < w->n, have_f = w->ifr < w->nfreed;
    if (!have_a && !have_f)
        return -1;
    if (have_a && (!have_f || w->a[w->ia].seq0 < w->a[w->freed[w->ifr]].seq1)) {
        *idx = (uint32_t)w->ia;
        *time = w->a[w->ia].t0;
        return 1;
    }
    *idx = w->freed[w->ifr];
    *time = w->a[*idx].t1;
    return 0;
}

static void step(sweep *w, int kind)
{
    if (kind == 1)
        w->allocated += w->a[w->ia++].size;
    else
        w->allocated -= w->a[w->freed[w->ifr++]].size;
}

typedef struct lctx {
    gmp_output_ctx *c;
    hv_trace *t;
    hv_dev *d;
    site_ids *ids;
    uint64_t t0, span, thr;
    uint32_t *band; /* alloc index -> band id + 1 */
    gmp_obuf bands;
    uint32_t nbands;
    /* the live set during the second sweep */
    uint32_t *prev, *next; /* big allocations, a list in allocation order */
    uint32_t head, tail;
    uint64_t *sbytes, *scount; /* small allocations per replay site */
    uint32_t *active, *apos;   /* sites with small allocations */
    size_t nactive, nsite;
    int unsorted; /* active changed since it was last sorted */
} lctx;

#define NIL UINT32_MAX

static size_t col_of(const lctx *L, uint64_t time, size_t cols)
{
    if (time <= L->t0)
        return 0;
    double f = (double)(time - L->t0) / (double)L->span;
    size_t k = (size_t)(f * (double)cols);
    return k >= cols ? cols - 1 : k;
}

static void live_add(lctx *L, uint32_t i)
{
    const hv_alloc *x = &L->d->a[i];
    if (x->size >= L->thr) {
        L->prev[i] = L->tail;
        L->next[i] = NIL;
        if (L->tail != NIL)
            L->next[L->tail] = i;
        else
            L->head = i;
        L->tail = i;
        return;
    }
    uint32_t s = x->site < L->nsite ? x->site : 0;
    if (!L->scount[s]++) {
        L->apos[s] = (uint32_t)L->nactive;
        L->active[L->nactive++] = s;
        L->unsorted = 1;
    }
    L->sbytes[s] += x->size;
}

static void live_del(lctx *L, uint32_t i)
{
    const hv_alloc *x = &L->d->a[i];
    if (x->size >= L->thr) {
        uint32_t p = L->prev[i], n = L->next[i];
        if (p != NIL)
            L->next[p] = n;
        else
            L->head = n;
        if (n != NIL)
            L->prev[n] = p;
        else
            L->tail = p;
        return;
    }
    uint32_t s = x->site < L->nsite ? x->site : 0;
    if (!L->scount[s])
        return;
    L->sbytes[s] -= x->size;
    if (!--L->scount[s]) {
        uint32_t pos = L->apos[s], last = L->active[--L->nactive];
        L->active[pos] = last;
        L->apos[last] = pos;
        L->unsorted = 1;
    }
}

static int u32cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The column's segments (the live set now) as JSON numbers "ref,bytes[,count],..." in b. */
static void column_text(lctx *L, gmp_obuf *b)
{
    gmp_output_ctx *c = L->c;
    for (uint32_t i = L->head; i != NIL; i = L->next[i]) {
        if (!L->band[i]) {
            const hv_alloc *x = &L->d->a[i];
            uint32_t g = site_id(c, L->t, L->ids, x->site);
            if (L->nbands)
                gmp_obuf_add(&L->bands, ",", 1);
            gmp_obuf_printf(
                &L->bands, "[%" PRIu64 ",%" PRId64 ",%" PRIu64 ",%" PRIu32 "]", x->t0 - L->t0,
                x->t1 == UINT64_MAX ? (int64_t)-1 : (int64_t)(x->t1 - L->t0), x->size, g);
            L->band[i] = ++L->nbands;
        }
        gmp_obuf_printf(b, "%s%" PRIu32 ",%" PRIu64, b->len ? "," : "", L->band[i] - 1,
                        L->d->a[i].size);
    }
    /* small allocations: per site when that is a pixel or more, the rest as "other"; sites in
     * their order (stable from column to column) */
    if (L->unsorted) { /* (sorted again only when a site came or went) */
        if (L->nactive > 1)
            qsort(L->active, L->nactive, sizeof *L->active, u32cmp);
        for (size_t k = 0; k < L->nactive; k++)
            L->apos[L->active[k]] = (uint32_t)k;
        L->unsorted = 0;
    }
    uint64_t ob = 0, oc = 0;
    for (size_t k = 0; k < L->nactive; k++) {
        uint32_t s = L->active[k];
        if (L->sbytes[s] >= L->thr) {
            uint32_t g = site_id(c, L->t, L->ids, s);
            gmp_obuf_printf(b, "%s-%" PRIu32 ",%" PRIu64 ",%" PRIu64, b->len ? "," : "", g + 2,
                            L->sbytes[s], L->scount[s]);
        } else {
            ob += L->sbytes[s];
            oc += L->scount[s];
        }
    }
    if (oc)
        gmp_obuf_printf(b, "%s-1,%" PRIu64 ",%" PRIu64, b->len ? "," : "", ob, oc);
}

/* Writes level lv of device index di: its tiles into c->tiles. Returns the bytes written. */
static size_t write_level(lctx *L, size_t di, int lv)
{
    gmp_output_ctx *c = L->c;
    hv_dev *d = L->d;
    size_t cols = (size_t)COLS0 << lv;
    /* pass 1: per column, the event count after which allocated is highest (SIZE_MAX: the state
     * at the column's start, which is the state after the events of the columns before) */
    size_t *at = malloc(cols * sizeof *at);
    if (!at) {
        c->oom = 1;
        return 0;
    }
    sweep w = {d->a, d->n, d->freed, d->nfreed, 0, 0, 0};
    size_t done = 0, col = 0;
    uint64_t best = 0; /* allocated at the column's moment so far */
    at[0] = 0;
    for (;;) {
        uint32_t idx;
        uint64_t time;
        int k = next_event(&w, &idx, &time);
        size_t ec = k < 0 ? cols : col_of(L, time, cols);
        while (col < ec) { /* the columns before this event's: they start in the state now */
            col++;
            if (col < cols) {
                at[col] = done;
                best = w.allocated;
            }
        }
        if (k < 0)
            break;
        step(&w, k);
        done++;
        if (w.allocated > best) {
            best = w.allocated;
            at[col] = done;
        }
    }
    /* pass 2: the live set at each column's moment */
    sweep v = {d->a, d->n, d->freed, d->nfreed, 0, 0, 0};
    L->head = L->tail = NIL;
    L->nactive = 0;
    memset(L->scount, 0, L->nsite * sizeof *L->scount);
    memset(L->sbytes, 0, L->nsite * sizeof *L->sbytes);
    size_t written, processed = 0;
    gmp_obuf *colb = &c->tmp, *prevb = &c->tmp2;
    gmp_obuf out = {0};
    for (size_t k = 0; k < cols; k++) {
        while (processed < at[k]) {
            uint32_t idx;
            uint64_t time;
            int e = next_event(&v, &idx, &time);
            if (e < 0)
                break;
            if (e == 1)
                live_add(L, idx);
            else
                live_del(L, idx);
            step(&v, e);
            processed++;
        }
        if (k % COLS0 == 0) {
            if (k)
                gmp_obuf_add(&out, "]</script>\n", 11);
            gmp_obuf_printf(&out, "<script type=\"application/json\" id=\"d%zu-l%d-t%zu\">[", di,
                            lv, k / COLS0);
            prevb->len = 0;
        }
        colb->len = 0;
        if (colb->p)
            colb->p[0] = 0;
        column_text(L, colb);
        if (k % COLS0 != 0 && prevb->len == colb->len &&
            (colb->len == 0 || memcmp(prevb->p, colb->p, colb->len) == 0)) {
            gmp_obuf_add(&out, k % COLS0 ? ",0" : "0", k % COLS0 ? 2 : 1);
        } else {
            if (k % COLS0)
                gmp_obuf_add(&out, ",", 1);
            gmp_obuf_add(&out, "[", 1);
            gmp_obuf_add(&out, colb->p ? colb->p : "", colb->len);
            gmp_obuf_add(&out, "]", 1);
            prevb->len = 0;
            gmp_obuf_add(prevb, colb->p ? colb->p : "", colb->len);
        }
        if (out.oom || colb->oom || prevb->oom) {
            c->oom = 1;
            break;
        }
    }
    gmp_obuf_add(&out, "]</script>\n", 11);
    free(at);
    written = out.len;
    gmp_obuf_add(&c->tiles, out.p ? out.p : "", out.len);
    gmp_obuf_free(&out);
    return written;
}

typedef struct peak_site {
    uint32_t site;
    uint64_t bytes, count;
} peak_site;

static int peak_cmp(const void *a, const void *b)
{
    const peak_site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

/* One device of a trace: levels, bands, breakdown; appended to c->devices. */
/* Returns the device's index in the page's "devices". */
/* One reserve over time as [time (as peak_at), bytes] steps: a point where the value changes. */
static void write_series(gmp_obuf *b, const gmp_whatif_series *s, uint64_t t0)
{
    gmp_obuf_printf(b, "{\"peak\":%" PRIu64 ",\"pts\":[", s->peak);
    for (size_t i = 0, k = 0; i < s->n; i++) {
        if (i && s->max[i] == s->max[i - 1])
            continue;
        uint64_t t = s->t0_ns + i * s->width_ns;
        gmp_obuf_printf(b, "%s[%" PRIu64 ",%" PRIu64 "]", k++ ? "," : "", t > t0 ? t - t0 : 0,
                        s->max[i]);
    }
    uint64_t end = s->t0_ns + s->n * s->width_ns; /* the last step's end */
    gmp_obuf_printf(b, "],\"end\":%" PRIu64 "}", end > t0 ? end - t0 : 0);
}

/* "whatif": the device's recorded reserve and the one the setting's model replays
 * (gmp_output_opts.whatif), when the conversion has them. */
static void write_whatif(gmp_output_ctx *c, const hv_trace *t, const hv_dev *d, uint64_t t0,
                         gmp_obuf *b)
{
    if (!c->o.whatif || t->info.index >= c->o.ntraces || !c->o.whatif[t->info.index])
        return;
    const gmp_whatif_reserve *rs = c->o.whatif[t->info.index];
    const gmp_whatif_series *rep = gmp_whatif_reserve_replayed(rs, d->id);
    const gmp_whatif_series *recd = gmp_whatif_reserve_recorded(rs, d->id);
    gmp_obuf_add(b, ",\"whatif\":{\"name\":", strlen(",\"whatif\":{\"name\":"));
    js_cstr(b, c->o.whatif_name ? c->o.whatif_name : "");
    gmp_obuf_add(b, ",\"replayed\":", strlen(",\"replayed\":"));
    if (rep)
        write_series(b, rep, t0);
    else
        gmp_obuf_add(b, "null", strlen("null"));
    gmp_obuf_add(b, ",\"recorded\":", strlen(",\"recorded\":"));
    if (recd)
        write_series(b, recd, t0);
    else
        gmp_obuf_add(b, "null", strlen("null"));
    gmp_obuf_add(b, "}", strlen("}"));
}

static size_t write_device(gmp_output_ctx *c, hv_trace *t, hv_dev *d, site_ids *ids)
{
    const gmp_replay_summary *sum = gmp_replay_get_summary(t->rp);
    const gmp_replay_device *rd = gmp_replay_device_find(t->rp, d->id);
    uint64_t peak = rd ? rd->peak_allocated : 0;
    size_t di = c->ndevices++;
    lctx L;
    memset(&L, 0, sizeof L);
    L.c = c;
    L.t = t;
    L.d = d;
    L.ids = ids;
    L.head = L.tail = NIL;
    L.t0 = sum->first_ns;
    uint64_t t1 = sum->last_ns > sum->first_ns ? sum->last_ns : sum->first_ns + 1;
    L.span = t1 - L.t0;
    L.thr = peak / CHART_PX ? peak / CHART_PX : 1;
    L.nsite = gmp_replay_site_count(t->rp) + 1;
    /* unfreed allocations end at the end */
    for (size_t i = 0; i < d->n; i++)
        if (d->a[i].seq1 == UINT32_MAX)
            d->a[i].t1 = UINT64_MAX;
    L.band = calloc(d->n ? d->n : 1, sizeof *L.band);
    L.prev = malloc((d->n ? d->n : 1) * sizeof *L.prev);
    L.next = malloc((d->n ? d->n : 1) * sizeof *L.next);
    L.sbytes = calloc(L.nsite, sizeof *L.sbytes);
    L.scount = calloc(L.nsite, sizeof *L.scount);
    L.active = malloc(L.nsite * sizeof *L.active);
    L.apos = malloc(L.nsite * sizeof *L.apos);
    gmp_obuf levels = {0};
    int nlev = 0;
    if (L.band && L.prev && L.next && L.sbytes && L.scount && L.active && L.apos) {
        size_t events = d->n + d->nfreed, last = 0;
        for (int lv = 0; lv < MAX_LEVELS && !c->oom; lv++) {
            size_t cols = (size_t)COLS0 << lv;
            /* a level is about twice the one before: added when that still fits the budget */
            if (lv > 0 && (cols / 2 > events * 2 || c->level_bytes + 2 * last > BUDGET))
                break;
            size_t n = write_level(&L, di, lv);
            last = n;
            c->level_bytes += n;
            gmp_obuf_printf(&levels, "%s%zu", nlev ? "," : "", cols);
            nlev++;
        }
    } else {
        c->oom = 1;
    }
    /* the breakdown of the peak: sites by bytes live at the peak, ranges */
    size_t ns = gmp_replay_site_count(t->rp);
    peak_site *ps = malloc((ns ? ns : 1) * sizeof *ps);
    size_t np = 0;
    if (ps) {
        for (size_t i = 0; i < ns; i++) {
            const gmp_replay_site *s = gmp_replay_site_at(t->rp, i);
            if (s->device == d->id && gmp_mem_kind_is_device(s->kind) && s->peak_bytes)
                ps[np++] = (peak_site){(uint32_t)i, s->peak_bytes, s->peak_count};
        }
        qsort(ps, np, sizeof *ps, peak_cmp);
    } else {
        c->oom = 1;
    }
    gmp_obuf *b = &c->devices;
    if (di)
        gmp_obuf_add(b, ",\n", 2);
    char label[64];
    gmp_output_device_label(d->id, label, sizeof label);
    gmp_obuf name = {0};
    if (t->info.label && *t->info.label) {
        gmp_obuf_add(&name, t->info.label, strlen(t->info.label));
        gmp_obuf_add(&name, ": ", 2);
    }
    gmp_obuf_add(&name, label, strlen(label));
    if (rd && rd->def && rd->def->name.len) {
        gmp_obuf_add(&name, " (", 2);
        gmp_obuf_add(&name, rd->def->name.ptr, rd->def->name.len);
        gmp_obuf_add(&name, ")", 1);
    }
    gmp_obuf_add(b, "{\"name\":", 8);
    js_str(b, name.p ? name.p : "", name.len);
    gmp_obuf_free(&name);
    gmp_obuf_printf(b,
                    ",\"index\":%zu,\"t0\":%" PRId64 ",\"span\":%" PRIu64 ",\"peak\":%" PRIu64
                    ",\"peak_at\":%" PRIu64 ",\"px\":%d,\"allocs\":%zu,\"ooms\":[",
                    di, gmp_output_time(&t->info, L.t0), L.span, peak,
                    rd && rd->peak_time_ns > L.t0 ? rd->peak_time_ns - L.t0 : 0, CHART_PX, d->n);
    /* the OOMs on this device, [time (as peak_at), bytes requested], drawn on the timeline */
    for (size_t i = 0, k = 0; i < gmp_replay_oom_count(t->rp) && k < MAX_OOM_MARKS; i++) {
        const gmp_replay_oom *o = gmp_replay_oom_at(t->rp, i);
        if (o->device != d->id)
            continue;
        gmp_obuf_printf(b, "%s[%" PRIu64 ",%" PRIu64 "]", k++ ? "," : "",
                        o->time_ns > L.t0 ? o->time_ns - L.t0 : 0, o->requested);
    }
    gmp_obuf_add(b, "]", 1);
    write_whatif(c, t, d, L.t0, b);
    gmp_obuf_add(b, ",\"levels\":[", strlen(",\"levels\":["));
    gmp_obuf_add(b, levels.p ? levels.p : "", levels.len);
    gmp_obuf_free(&levels);
    gmp_obuf_add(b, "],\"bands\":[", 11);
    gmp_obuf_add(b, L.bands.p ? L.bands.p : "", L.bands.len);
    gmp_obuf_free(&L.bands);
    gmp_obuf_add(b, "],\"sites\":[", 11);
    uint64_t rest = 0, restc = 0;
    for (size_t i = 0; i < np; i++) {
        if (i >= BREAKDOWN_SITES) {
            rest += ps[i].bytes;
            restc += ps[i].count;
            continue;
        }
        uint32_t g = site_id(c, t, ids, ps[i].site);
        gmp_obuf_printf(b, "%s[%" PRIu32 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "", g, ps[i].bytes,
                        ps[i].count);
    }
    gmp_obuf_printf(b, "],\"rest\":[%" PRIu64 ",%" PRIu64 ",%zu],\"cats\":[", rest, restc,
                    np > BREAKDOWN_SITES ? np - BREAKDOWN_SITES : 0);
    /* by category (gmp_frames.h), every site at the peak */
    uint64_t cb[GMP_CAT_COUNT] = {0}, cc[GMP_CAT_COUNT] = {0};
    for (size_t i = 0; i < np; i++) {
        gmp_category k = site_category(c, t, ids, ps[i].site);
        if ((unsigned)k < GMP_CAT_COUNT) {
            cb[k] += ps[i].bytes;
            cc[k] += ps[i].count;
        }
    }
    for (int k = 0, first = 1; k < GMP_CAT_COUNT; k++) {
        if (!cb[k])
            continue;
        gmp_obuf_add(b, first ? "[" : ",[", first ? 1 : 2);
        first = 0;
        js_cstr(b, gmp_category_name((gmp_category)k));
        gmp_obuf_printf(b, ",%" PRIu64 ",%" PRIu64 "]", cb[k], cc[k]);
    }
    gmp_obuf_add(b, "],\"ranges\":[", 12);
    /* by range: sites grouped by their range node (the JS joins them by path text) */
    for (size_t i = 0, first = 1; i < np && i < BREAKDOWN_SITES * 8; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(t->rp, ps[i].site);
        gmp_obuf path = {0};
        range_path(t, s->range, &path);
        gmp_obuf_add(b, first ? "[" : ",[", first ? 1 : 2);
        first = 0;
        js_str(b, path.p ? path.p : "", path.len);
        gmp_obuf_printf(b, ",%" PRIu64 ",%" PRIu64 ",%" PRIu32 "]", ps[i].bytes, ps[i].count,
                        i < BREAKDOWN_SITES ? site_id(c, t, ids, ps[i].site) : UINT32_MAX);
        gmp_obuf_free(&path);
    }
    gmp_obuf_add(b, "]}", 2);
    free(ps);
    free(L.band);
    free(L.prev);
    free(L.next);
    free(L.sbytes);
    free(L.scount);
    free(L.active);
    free(L.apos);
    if (b->oom || c->sites.oom || c->tiles.oom)
        c->oom = 1;
    return di;
}

static void trace_free(hv_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ndev; i++) {
        free(t->dev[i].a);
        free(t->dev[i].freed);
        gmp_omap_free(&t->dev[i].live);
    }
    free(t->dev);
    gmp_omap_free(&t->devmap);
    gmp_analysis_free(t->an);
    free(t);
}

static int dev_cmp(const void *a, const void *b)
{
    const hv_dev *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* ---- findings (a whole page): what the report's "Findings" say first ---- */

typedef struct hv_finding {
    int problem; /* 1 an OOM or a probable leak, 0 a warning */
    uint64_t bytes;
    long device; /* index in "devices", -1 none */
    int has_t;
    uint64_t t; /* as peak_at: from the device's first event */
    char text[512];
} hv_finding;

static int finding_cmp(const void *a, const void *b)
{
    const hv_finding *x = a, *y = b;
    if (x->problem != y->problem)
        return x->problem ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return 0;
}

static const char *fmt_b(uint64_t b, char *buf, size_t n)
{
    return gmp_fmt_bytes(b, buf, n);
}

/* "+2.733952 s" as the report writes a time (from the trace's start). */
static const char *fmt_t(hv_trace *t, uint64_t ns, char *buf, size_t n)
{
    int64_t v = gmp_output_time(&t->info, ns);
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(buf, n, "%c%" PRIu64 ".%06" PRIu64 " s", v < 0 ? '-' : '+', a / 1000000000u,
             a % 1000000000u / 1000u);
    return buf;
}

/* The index in "devices" of device id (-1: not in the page). */
static long dev_index(const int32_t *ids, const size_t *dis, size_t nd, int32_t id)
{
    for (size_t k = 0; k < nd; k++)
        if (ids[k] == id)
            return (long)dis[k];
    return -1;
}

static void findings(gmp_output_ctx *c, hv_trace *t, const int32_t *ids, const size_t *dis,
                     size_t nd)
{
    const gmp_replay_summary *sum = gmp_replay_get_summary(t->rp);
    hv_finding f[MAX_FINDINGS];
    size_t n = 0;
    char b1[64], b2[64], b3[64];
    gmp_analysis_result *R = t->an ? gmp_analysis_finish(t->an, NULL) : NULL;
    if (t->an && !R)
        c->oom = 1;
    for (size_t i = 0; R && i < R->nooms && n < MAX_FINDINGS; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        hv_finding *x = &f[n++];
        *x = (hv_finding){
            1, o->requested, -1, 1, o->time_ns > sum->first_ns ? o->time_ns - sum->first_ns : 0,
            ""};
        x->device = dev_index(ids, dis, nd, o->device);
        snprintf(x->text, sizeof x->text,
                 "out of memory on device %" PRId32 " at %s: %s requested; %s", o->device,
                 fmt_t(t, o->time_ns, b1, sizeof b1), fmt_b(o->requested, b2, sizeof b2),
                 gmp_analysis_oom_verdict_text(o->verdict));
    }
    for (size_t i = 0; R && i < R->nleaks && n < MAX_FINDINGS; i++) {
        const gmp_analysis_leak *L = &R->leaks[i];
        hv_finding *x = &f[n++];
        *x = (hv_finding){1, L->growth_bytes, -1, 0, 0, ""};
        x->device = dev_index(ids, dis, nd, L->device);
        gmp_obuf path = {0};
        if (L->range)
            range_path(t, L->range, &path);
        uint64_t last = R->iter.iterations;
        snprintf(x->text, sizeof x->text,
                 "probable leak %s %.*s on device %" PRId32 ": +%s over iterations %" PRIu64
                 "-%" PRIu64 " (+%s per iteration)",
                 L->range ? "in" : "at", L->range ? (int)path.len : 6,
                 L->range ? (path.p ? path.p : "") : "a site", L->device,
                 fmt_b(L->growth_bytes, b1, sizeof b1), last - L->iterations, last,
                 fmt_b(L->rate_bytes > 0 ? (uint64_t)(L->rate_bytes + 0.5) : 0, b2, sizeof b2));
        gmp_obuf_free(&path);
    }
    for (size_t i = 0; i < nd && n < MAX_FINDINGS; i++) {
        const gmp_replay_device *rd = gmp_replay_device_find(t->rp, ids[i]);
        if (!rd || ids[i] < 0)
            continue;
        uint64_t un = rd->max_unexplained;
        if (un < UNEXPLAINED_MIN || (double)un < UNEXPLAINED_SHARE * (double)rd->peak_reserved)
            continue;
        hv_finding *x = &f[n++];
        *x = (hv_finding){0,
                          un,
                          (long)dis[i],
                          1,
                          rd->max_unexplained_time_ns > sum->first_ns
                              ? rd->max_unexplained_time_ns - sum->first_ns
                              : 0,
                          ""};
        snprintf(x->text, sizeof x->text,
                 "%s of device %" PRId32 "'s memory not explained by allocations, at %s (the "
                 "driver counts it used, the allocator does not hold it: the CUDA context, "
                 "libraries' workspaces, other processes)",
                 fmt_b(un, b1, sizeof b1), ids[i],
                 fmt_t(t, rd->max_unexplained_time_ns, b3, sizeof b3));
    }
    qsort(f, n, sizeof *f, finding_cmp);
    for (size_t i = 0; i < n; i++) {
        gmp_obuf *o = &c->findings;
        if (o->len)
            gmp_obuf_add(o, ",\n", 2);
        gmp_obuf_printf(o, "{\"severity\":\"%s\",\"device\":%ld,\"t\":",
                        f[i].problem ? "problem" : "warning", f[i].device);
        if (f[i].has_t)
            gmp_obuf_printf(o, "%" PRIu64, f[i].t);
        else
            gmp_obuf_add(o, "null", 4);
        gmp_obuf_add(o, ",\"text\":", 8);
        if (t->info.label && *t->info.label) { /* several traces: which one's */
            gmp_obuf lt = {0};
            gmp_obuf_printf(&lt, "%s: %s", t->info.label, f[i].text);
            js_str(o, lt.p ? lt.p : "", lt.p ? lt.len : 0);
            if (lt.oom)
                c->oom = 1;
            gmp_obuf_free(&lt);
        } else {
            js_cstr(o, f[i].text);
        }
        gmp_obuf_add(o, "}", 1);
    }
    if (c->findings.oom)
        c->oom = 1;
    gmp_analysis_result_free(R);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    hv_trace *t = c->t;
    site_ids ids = {calloc(gmp_replay_site_count(rp) + 1, sizeof(uint32_t)),
                    calloc(gmp_replay_site_count(rp) + 1, 1), gmp_replay_site_count(rp)};
    int32_t *devid = calloc(t->ndev ? t->ndev : 1, sizeof *devid);
    size_t *devdi = calloc(t->ndev ? t->ndev : 1, sizeof *devdi);
    size_t nd = 0;
    if (!ids.global || !ids.cat || !devid || !devdi)
        c->oom = 1;
    if (t->ndev > 1)
        qsort(t->dev, t->ndev, sizeof *t->dev, dev_cmp);
    for (size_t i = 0; i < t->ndev && !c->oom; i++)
        if (t->dev[i].n) {
            devid[nd] = t->dev[i].id;
            devdi[nd++] = write_device(c, t, &t->dev[i], &ids);
        }
    /* the page opens on the device of the first OOM (the first of the first trace that has one) */
    for (size_t i = 0; c->start < 0 && i < gmp_replay_oom_count(rp); i++)
        for (size_t k = 0; k < nd; k++)
            if (devid[k] == gmp_replay_oom_at(rp, i)->device && c->start < 0)
                c->start = (long)devdi[k];
    if (!c->oom && !c->fragment)
        findings(c, t, devid, devdi, nd);
    free(devid);
    free(devdi);
    free(ids.global);
    free(ids.cat);
    c->t = NULL;
    trace_free(t);
    if (c->oom)
        return gmp_replay_fail(rp, GMP_ERR_NOMEM, "html view: out of memory");
    return GMP_OK;
}

static const gmp_replay_ops htmlview_ops = {
    .alloc = on_alloc,
    .free = on_free,
    .end = on_end,
};

/* ---- the output ---- */

static void ctx_free(gmp_output_ctx *c)
{
    if (!c)
        return;
    trace_free(c->t);
    gmp_obuf_free(&c->devices);
    gmp_obuf_free(&c->findings);
    gmp_obuf_free(&c->sites);
    gmp_obuf_free(&c->tiles);
    gmp_obuf_free(&c->tmp);
    gmp_obuf_free(&c->tmp2);
    free(c);
}

static gmp_err hv_start(gmp_output_ctx **out, FILE *f, const char *path, const gmp_output_opts *o)
{
    (void)path;
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    c->out = f;
    c->o = *o;
    c->start = -1;
    *out = c;
    return GMP_OK;
}

static gmp_err hv_start_fragment(gmp_output_ctx **out, FILE *f, const char *path,
                                 const gmp_output_opts *o)
{
    gmp_err e = hv_start(out, f, path, o);
    if (e == GMP_OK)
        (*out)->fragment = 1;
    return e;
}

/* The view's style with each rule scoped to #gmp-view ("body" is the div itself), for a fragment:
 * view.css is ours, one rule per line "selectors { declarations }", comments on lines of their
 * own. */
static void scoped_css(gmp_obuf *b, const char *css, size_t n)
{
    const char *end = css + n;
    while (css < end) {
        const char *nl = memchr(css, '\n', (size_t)(end - css));
        const char *le = nl ? nl : end;
        const char *br = memchr(css, '{', (size_t)(le - css));
        if (br && !(le - css >= 2 && css[0] == '/' && css[1] == '*')) {
            const char *p = css;
            while (p < br) {
                const char *comma = memchr(p, ',', (size_t)(br - p));
                const char *se = comma ? comma : br;
                const char *a = p, *z = se;
                while (a < z && (*a == ' ' || *a == '\t'))
                    a++;
                while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
                    z--;
                if (z - a == 4 && memcmp(a, "body", 4) == 0) {
                    gmp_obuf_add(b, "#gmp-view", 9);
                } else {
                    gmp_obuf_add(b, "#gmp-view ", 10);
                    gmp_obuf_add(b, a, (size_t)(z - a));
                }
                gmp_obuf_add(b, comma ? ", " : " ", comma ? 2 : 1);
                p = comma ? comma + 1 : br;
            }
            gmp_obuf_add(b, br, (size_t)(le - br));
            gmp_obuf_add(b, "\n", 1);
        }
        css = nl ? nl + 1 : end;
    }
}

static gmp_err hv_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    trace_free(c->t);
    hv_trace *t = calloc(1, sizeof *t);
    if (!t)
        return GMP_ERR_NOMEM;
    t->info = *tr;
    t->rp = rp;
    t->r = gmp_replay_reader(rp);
    c->t = t;
    /* a whole page says the findings first: its own analysis (the report's fragment does not: the
     * report says them) */
    gmp_err e = GMP_OK;
    if (!c->fragment && (e = gmp_analysis_new(&t->an, NULL)) == GMP_OK)
        e = gmp_analysis_attach(t->an, rp);
    if (e != GMP_OK)
        return e;
    return gmp_replay_add(rp, &htmlview_ops, c);
}

static gmp_err hv_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    gmp_obuf page = {0};
    const char *title = c->o.title && *c->o.title ? c->o.title : "gpumemprof";
    gmp_obuf esc = {0};
    if (c->fragment) {
        gmp_obuf_add(&page, "<div id=\"gmp-view\">\n<style>\n", 28);
        scoped_css(&page, (const char *)gmp_htmlview_css, gmp_htmlview_css_len);
        gmp_obuf_add(&page, "</style>\n", 9);
        goto data;
    }
    gmp_obuf_add(&page, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n", 61);
    gmp_obuf_add(&page, "<title>", 7);
    for (const char *p = title; *p; p++) {
        if (*p == '<')
            gmp_obuf_add(&esc, "&lt;", 4);
        else if (*p == '&')
            gmp_obuf_add(&esc, "&amp;", 5);
        else
            gmp_obuf_add(&esc, p, 1);
    }
    gmp_obuf_add(&page, esc.p ? esc.p : "", esc.len);
    gmp_obuf_free(&esc);
    gmp_obuf_add(&page, " - gpumemprof memory view</title>\n<style>\n", 42);
    gmp_obuf_add(&page, (const char *)gmp_htmlview_css, gmp_htmlview_css_len);
    gmp_obuf_add(&page, "</style></head><body>\n", 22);
data:
    gmp_obuf_free(&esc);
    gmp_obuf_add(&page, "<script type=\"application/json\" id=\"gmp-meta\">{\"title\":", 55);
    js_cstr(&page, title);
    gmp_obuf_add(&page, ",\"exporter\":", 12);
    js_cstr(&page, c->o.exporter ? c->o.exporter : "gpumemprof");
    gmp_obuf_add(&page, ",\"devices\":[", 12);
    gmp_obuf_add(&page, c->devices.p ? c->devices.p : "", c->devices.len);
    gmp_obuf_printf(&page, "],\n\"start\":%ld,\"findings\":[", c->start < 0 ? 0 : c->start);
    gmp_obuf_add(&page, c->findings.p ? c->findings.p : "", c->findings.len);
    gmp_obuf_add(&page, "],\n\"sites\":{", 12);
    gmp_obuf_add(&page, c->sites.p ? c->sites.p : "", c->sites.len);
    gmp_obuf_add(&page, "}}</script>\n", 12);
    gmp_obuf_add(&page, c->tiles.p ? c->tiles.p : "", c->tiles.len);
    gmp_obuf_add(&page, "<script>\n", 9);
    gmp_obuf_add(&page, (const char *)gmp_htmlview_js, gmp_htmlview_js_len);
    if (c->fragment)
        gmp_obuf_add(&page, "</script>\n</div>\n", 17);
    else
        gmp_obuf_add(&page, "</script></body></html>\n", 24);
    gmp_err e = GMP_OK;
    if (c->oom || page.oom) {
        snprintf(res->error, sizeof res->error, "html view: out of memory");
        e = GMP_ERR_NOMEM;
    } else if (fwrite(page.p, 1, page.len, c->out) != page.len || fflush(c->out) != 0) {
        snprintf(res->error, sizeof res->error, "html view: cannot write the file");
        e = GMP_ERR_IO;
    }
    gmp_obuf_free(&page);
    ctx_free(c);
    return e;
}

static void hv_discard(gmp_output_ctx *c)
{
    ctx_free(c);
}

const gmp_output gmp_out_htmlview = {
    .name = "html-view",
    .start = hv_start,
    .add_trace = hv_add_trace,
    .finish = hv_finish,
    .discard = hv_discard,
};

const gmp_output gmp_out_htmlview_fragment = {
    .name = "html-view fragment",
    .start = hv_start_fragment,
    .add_trace = hv_add_trace,
    .finish = hv_finish,
    .discard = hv_discard,
};
