/* gmp_tui_tree: the live set at the cursor as an expandable tree (see gmp_tui_tree.h). */
#include "gmp_tui_tree.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gmp_frames.h"
#include "gmp_frames.h"
#include "gmp_hash.h"
#include "gmp_symbolize.h"
#include "gmp_units.h"

#define MAX_FRAMES 64
#define MAX_ALLOC_LEAVES 50 /* allocations listed under an expanded site */
#define NO_NODE UINT32_MAX

typedef struct node {
    char *label;
    uint64_t bytes, count;
    uint64_t hkey;
    uint32_t parent, first, next;
    int depth;
    int is_alloc;
    int is_site; /* a site: its allocations are listed when it is expanded */
    size_t best; /* index into live */
} node;

typedef struct hset { /* expanded / collapsed toggles: hkey -> state */
    uint64_t *keys;
    unsigned char *val; /* 0 empty, 1 expanded, 2 collapsed */
    size_t cap, n;
} hset;

struct gmp_tui_tree {
    const gmp_tui_model *m;
    gmp_symbolizer *sym; /* native frames' names (DWARF, ELF symbols), made at the first one */
    int sym_failed;
    gmp_tui_site *sites;
    size_t nsites;
    gmp_tui_site request; /* the failed request in focus (gmp_tui_tree_request) */
    node *nodes;
    size_t nnodes, capnodes;
    uint32_t *idx; /* hkey -> node (open addressing, NO_NODE empty) */
    size_t capidx;
    gmp_tui_row *rows;
    size_t nrows, caprows;
    hset toggles;
    uint64_t total, count;
    int by;
    uint32_t reveal_site;
    int has_reveal;
};

/* ---- toggles ---- */

static size_t mix(uint64_t k, size_t mask)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static unsigned hset_get(const hset *h, uint64_t k)
{
    if (!h->cap)
        return 0;
    for (size_t i = mix(k, h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        if (!h->val[i])
            return 0;
        if (h->keys[i] == k)
            return h->val[i];
    }
}

static void hset_put(hset *h, uint64_t k, unsigned v)
{
    if (2 * (h->n + 1) > h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        uint64_t *nk = calloc(nc, sizeof *nk);
        unsigned char *nv = calloc(nc, 1);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return;
        }
        for (size_t i = 0; i < h->cap; i++) {
            if (!h->val[i])
                continue;
            size_t j = mix(h->keys[i], nc - 1);
            while (nv[j])
                j = (j + 1) & (nc - 1);
            nk[j] = h->keys[i];
            nv[j] = h->val[i];
        }
        free(h->keys);
        free(h->val);
        h->keys = nk;
        h->val = nv;
        h->cap = nc;
    }
    size_t i = mix(k, h->cap - 1);
    while (h->val[i] && h->keys[i] != k)
        i = (i + 1) & (h->cap - 1);
    if (!h->val[i])
        h->n++;
    h->keys[i] = k;
    h->val[i] = (unsigned char)v;
}

/* ---- sites ---- */

static char *xstrdup(const char *s)
{
    size_t n = strlen(s);
    char *c = malloc(n + 1);
    if (c)
        memcpy(c, s, n + 1);
    return c;
}

static char *strndup_clean(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        return NULL;
    for (size_t i = 0; i < n; i++) /* control bytes of untrusted strings never reach the screen */
        c[i] = (unsigned char)p[i] < 0x20 || p[i] == 0x7f ? '?' : p[i];
    c[n] = 0;
    return c;
}

static const char *base_name(const char *p, size_t n, size_t *len)
{
    size_t s = n;
    while (s > 0 && p[s - 1] != '/')
        s--;
    *len = n - s;
    return p + s;
}

/* The labels of s from a replay site (or, for a failed request, the fields of one: rs has no
 * peak or live bytes then). */
static int labels_fill(gmp_tui_tree *t, gmp_tui_site *s, const gmp_replay_site *rs)
{
    gmp_replay *rp = gmp_tui_model_replay(t->m);
    gmp_reader *r = gmp_tui_model_reader(t->m);
    s->device = rs->device;
    s->kind = rs->kind;
    s->api = rs->api;
    s->stack = rs->stack;
    s->range = rs->range;
    gmp_str api = gmp_reader_string(r, rs->api);
    s->api_str = api.len ? strndup_clean(api.ptr, api.len) : xstrdup("?");
    /* range path components */
    uint32_t ids[64];
    size_t nr = 0;
    for (uint32_t id = rs->range; id && nr < 64;) {
        const gmp_rec_range *rr = gmp_reader_range(r, id);
        if (!rr)
            break;
        ids[nr++] = rr->name;
        id = rr->parent;
    }
    s->ranges = calloc(nr ? nr : 1, sizeof *s->ranges);
    char path[1024];
    size_t pl = 0;
    path[0] = 0;
    for (size_t i = 0; s->ranges && i < nr; i++) {
        gmp_str nm = gmp_reader_string(r, ids[nr - 1 - i]);
        s->ranges[i] = nm.len ? strndup_clean(nm.ptr, nm.len) : xstrdup("?");
        if (!s->ranges[i])
            break;
        s->nranges++;
        int w = snprintf(path + pl, sizeof path - pl, "%s%s", i ? "/" : "", s->ranges[i]);
        if (w > 0 && (size_t)w < sizeof path - pl)
            pl += (size_t)w;
    }
    s->range_str = xstrdup(path);
    /* frames */
    gmp_replay_frame fr[MAX_FRAMES];
    size_t nf = rs->stack ? gmp_replay_stack_frames(rp, rs->stack, fr, MAX_FRAMES) : 0;
    if (nf > MAX_FRAMES)
        nf = MAX_FRAMES;
    /* a native address gives one frame per function inlined there, as in the report */
    enum { MAXF = 2 * MAX_FRAMES };
    s->frames = calloc(MAXF, sizeof *s->frames);
    s->internal = calloc(MAXF, 1);
    gmp_frame_info info[MAXF]; /* what the shared rules (gmp_frames.h) classify */
    uint8_t cls[MAXF];
    memset(info, 0, sizeof info);
    int raw = 0; /* an address inside no loaded module was left out */
    for (size_t i = 0; s->frames && s->internal && i < nf && s->nframes < MAXF; i++) {
        char buf[512];
        const gmp_sym_frame *sf = NULL;
        size_t nsf = 0;
        if (fr[i].kind != GMP_FRAME_PYTHON && !fr[i].module) {
            /* an address inside no loaded module (data words a frame-pointer walk read as
             * return addresses, JIT code) is left out, as the report leaves it out
             * (formats/report/gmp_report.c), so that a stack shows the frames it shows there */
            raw = 1;
            continue;
        }
        if (fr[i].kind == GMP_FRAME_PYTHON) {
            /* the one frame format of every output (gmp_frames.h) */
            gmp_frame_text(&(gmp_frame_info){fr[i].function, fr[i].file, {0}}, 1, fr[i].line, 0,
                           buf, sizeof buf);
            info[s->nframes].function = fr[i].function;
            info[s->nframes].file = fr[i].file;
        } else {
            size_t bl;
            const char *b = base_name(fr[i].module->path.ptr ? fr[i].module->path.ptr : "",
                                      fr[i].module->path.len, &bl);
            snprintf(buf, sizeof buf, "%.*s+0x%" PRIx64, (int)bl, b, fr[i].offset);
            if (!t->sym && !t->sym_failed)
                t->sym_failed = gmp_symbolizer_new(&t->sym, NULL) != GMP_OK;
            if (t->sym) {
                gmp_symbolizer_add_reader_modules(t->sym, r);
                nsf = gmp_symbolize(t->sym, fr[i].address, &sf);
                if (!nsf || sf[0].status != GMP_SYM_OK)
                    nsf = 0;
            }
            info[s->nframes].module = fr[i].module->path;
        }
        for (size_t k = 0; k < (nsf ? nsf : 1) && s->nframes < MAXF; k++) {
            gmp_frame_info *fi = &info[s->nframes];
            if (nsf) {
                const gmp_sym_frame *y = &sf[k];
                gmp_str fn = {y->function ? y->function : "",
                              y->function ? (uint32_t)strlen(y->function) : 0};
                gmp_str fl = {y->file ? y->file : "", y->file ? (uint32_t)strlen(y->file) : 0};
                if (fn.len)
                    gmp_frame_text(&(gmp_frame_info){fn, fl, fr[i].module->path}, 0, y->line,
                                   fr[i].offset, buf, sizeof buf);
                fi->function = fn;
                fi->file = fl;
                fi->module = fr[i].module->path;
            }
            s->frames[s->nframes] = strndup_clean(buf, strlen(buf));
            if (!s->frames[s->nframes])
                break;
            cls[s->nframes] = (uint8_t)gmp_frame_classify(fi, NULL);
            s->nframes++;
        }
    }
    if (raw && !s->nframes && s->frames && s->internal) {
        /* nothing but such addresses: one "?" frame, as in the report (gmp_frame_text of a frame
         * with no function, file nor module; internal, shown since nothing else is) */
        char buf[8];
        gmp_frame_text(&info[0], 0, 0, 0, buf, sizeof buf);
        s->frames[0] = strndup_clean(buf, strlen(buf));
        cls[0] = (uint8_t)gmp_frame_classify(&info[0], NULL);
        s->nframes = s->frames[0] ? 1 : 0;
    }
    /* folded as every output folds them: internal frames always, framework frames when the
     * stack has a frame of the user's code */
    if (s->internal && s->nframes)
        gmp_frames_fold(cls, s->nframes, s->internal);
    gmp_str rg = {s->range_str ? s->range_str : "",
                  s->range_str ? (uint32_t)strlen(s->range_str) : 0};
    gmp_category cat = gmp_frames_category(info, s->nframes, rg);
    /* the report's lifetime rule (formats/report/gmp_report.c): made by the backward pass and
     * still live at the end as at the peak, it was kept past the backward: a gradient */
    if (cat == GMP_CAT_TEMPORARY && rs->peak_bytes && rs->live_bytes >= rs->peak_bytes)
        cat = GMP_CAT_GRADIENT;
    s->category = (uint32_t)cat;
    s->ready = 1;
    return s->api_str && s->range_str && s->ranges && s->frames && s->internal ? 0 : -1;
}

static int site_fill(gmp_tui_tree *t, uint32_t si)
{
    const gmp_replay_site *rs = gmp_replay_site_at(gmp_tui_model_replay(t->m), si);
    return rs ? labels_fill(t, &t->sites[si], rs) : -1;
}

static void site_clear(gmp_tui_site *s)
{
    for (size_t k = 0; k < s->nranges; k++)
        free(s->ranges[k]);
    for (size_t k = 0; k < s->nframes; k++)
        free(s->frames[k]);
    free(s->ranges);
    free(s->range_str);
    free(s->frames);
    free(s->internal);
    free(s->api_str);
    memset(s, 0, sizeof *s);
}

static void sites_free(gmp_tui_tree *t)
{
    for (size_t i = 0; i < t->nsites; i++)
        site_clear(&t->sites[i]);
    free(t->sites);
    t->sites = NULL;
    t->nsites = 0;
    site_clear(&t->request);
}

const gmp_tui_site *gmp_tui_tree_request(gmp_tui_tree *t, int32_t device, uint32_t kind,
                                         uint32_t api, uint32_t range, uint32_t stack)
{
    if (!t->m)
        return NULL;
    gmp_tui_site *s = &t->request;
    if (s->ready && s->device == device && s->kind == kind && s->api == api && s->range == range &&
        s->stack == stack)
        return s;
    site_clear(s);
    gmp_replay_site rs;
    memset(&rs, 0, sizeof rs);
    rs.device = device;
    rs.kind = kind;
    rs.api = api;
    rs.range = range;
    rs.stack = stack;
    return labels_fill(t, s, &rs) == 0 ? s : NULL;
}

const gmp_tui_site *gmp_tui_tree_site(gmp_tui_tree *t, uint32_t site)
{
    if (!t->m)
        return NULL;
    size_t n = gmp_replay_site_count(gmp_tui_model_replay(t->m));
    if (site >= n)
        return NULL;
    if (n > t->nsites) {
        gmp_tui_site *ns = realloc(t->sites, n * sizeof *ns);
        if (!ns)
            return NULL;
        memset(ns + t->nsites, 0, (n - t->nsites) * sizeof *ns);
        t->sites = ns;
        t->nsites = n;
    }
    if (!t->sites[site].ready)
        site_fill(t, site);
    return &t->sites[site];
}

int gmp_tui_tree_site_matches(gmp_tui_tree *t, uint32_t site, const char *needle)
{
    const gmp_tui_site *s = gmp_tui_tree_site(t, site);
    if (!s || !*needle)
        return 0;
    if (s->range_str && strcasestr(s->range_str, needle))
        return 1;
    for (size_t i = 0; i < s->nframes; i++)
        if (strcasestr(s->frames[i], needle))
            return 1;
    return s->api_str && strcasestr(s->api_str, needle) != NULL;
}

/* ---- the tree ---- */

gmp_tui_tree *gmp_tui_tree_new(void)
{
    return calloc(1, sizeof(gmp_tui_tree));
}

static void nodes_clear(gmp_tui_tree *t)
{
    for (size_t i = 0; i < t->nnodes; i++)
        free(t->nodes[i].label);
    t->nnodes = 0;
    t->nrows = 0;
}

void gmp_tui_tree_free(gmp_tui_tree *t)
{
    if (!t)
        return;
    nodes_clear(t);
    sites_free(t);
    gmp_symbolizer_free(t->sym);
    free(t->nodes);
    free(t->idx);
    free(t->rows);
    free(t->toggles.keys);
    free(t->toggles.val);
    free(t);
}

void gmp_tui_tree_set_model(gmp_tui_tree *t, const gmp_tui_model *m)
{
    nodes_clear(t);
    sites_free(t);
    gmp_symbolizer_free(t->sym);
    t->sym = NULL;
    t->sym_failed = 0;
    t->m = m;
}

static uint64_t hash_label(uint64_t h, const char *s)
{
    h = gmp_fnv1a(h ^ 0x9e3779b97f4a7c15ULL, s, strlen(s));
    return h * 0xff51afd7ed558ccdULL + 1;
}

static int default_expanded(const gmp_tui_tree *t, int depth)
{
    static const int deep[GMP_TUI_BY_COUNT] = {3, 1, 1, 1, 1};
    return depth < deep[t->by];
}

static int is_expanded(const gmp_tui_tree *t, const node *n)
{
    unsigned v = hset_get(&t->toggles, n->hkey);
    return v ? v == 1 : default_expanded(t, n->depth);
}

/* The child of parent labelled label (created when missing); NO_NODE when out of memory. */
static uint32_t child(gmp_tui_tree *t, uint32_t parent, const char *label, int is_alloc)
{
    uint64_t ph = parent == NO_NODE ? 0 : t->nodes[parent].hkey;
    uint64_t h = hash_label(ph, label);
    if (2 * (t->nnodes + 1) > t->capidx) {
        size_t nc = t->capidx ? t->capidx * 2 : 256;
        uint32_t *ni = malloc(nc * sizeof *ni);
        if (!ni)
            return NO_NODE;
        memset(ni, 0xff, nc * sizeof *ni);
        for (size_t i = 0; i < t->nnodes; i++) {
            size_t j = mix(t->nodes[i].hkey, nc - 1);
            while (ni[j] != NO_NODE)
                j = (j + 1) & (nc - 1);
            ni[j] = (uint32_t)i;
        }
        free(t->idx);
        t->idx = ni;
        t->capidx = nc;
    }
    size_t j = mix(h, t->capidx - 1);
    for (; t->idx[j] != NO_NODE; j = (j + 1) & (t->capidx - 1))
        if (t->nodes[t->idx[j]].hkey == h)
            return t->idx[j];
    if (t->nnodes == t->capnodes) {
        size_t nc = t->capnodes ? t->capnodes * 2 : 256;
        node *nn = realloc(t->nodes, nc * sizeof *nn);
        if (!nn)
            return NO_NODE;
        t->nodes = nn;
        t->capnodes = nc;
    }
    node *n = &t->nodes[t->nnodes];
    memset(n, 0, sizeof *n);
    n->label = xstrdup(label);
    if (!n->label)
        return NO_NODE;
    n->hkey = h;
    n->parent = parent;
    n->first = NO_NODE;
    n->depth = parent == NO_NODE ? 0 : t->nodes[parent].depth + 1;
    n->is_alloc = is_alloc;
    n->best = SIZE_MAX;
    uint32_t id = (uint32_t)t->nnodes++;
    t->idx[j] = id;
    if (parent != NO_NODE) {
        n->next = t->nodes[parent].first;
        t->nodes[parent].first = id;
    } else {
        n->next = NO_NODE;
    }
    return id;
}

static void add_up(gmp_tui_tree *t, uint32_t id, uint64_t bytes, uint64_t count, size_t best,
                   const gmp_tui_live *live)
{
    for (; id != NO_NODE; id = t->nodes[id].parent) {
        node *n = &t->nodes[id];
        n->bytes += bytes;
        n->count += count;
        if (best != SIZE_MAX && (n->best == SIZE_MAX || live[best].size > live[n->best].size))
            n->best = best;
    }
}

static const char *top_frame(const gmp_tui_site *s, int show_internal)
{
    for (size_t i = 0; i < s->nframes; i++)
        if (show_internal || !s->internal[i])
            return s->frames[i];
    return s->nframes ? s->frames[0] : "(no stack recorded)";
}

typedef struct site_acc {
    uint64_t bytes, count;
    size_t best;
} site_acc;

static int by_size_desc(const void *a, const void *b, void *ctx)
{
    const gmp_tui_live *l = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (l[x].size != l[y].size)
        return l[x].size < l[y].size ? 1 : -1;
    return l[x].time_ns < l[y].time_ns ? -1 : l[x].time_ns > l[y].time_ns;
}

static gmp_tui_tree *g_sort_tree; /* children sort (qsort has no context in C11) */

static int node_cmp(const void *a, const void *b)
{
    const node *x = &g_sort_tree->nodes[*(const uint32_t *)a];
    const node *y = &g_sort_tree->nodes[*(const uint32_t *)b];
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->label, y->label);
}

static int push_row(gmp_tui_tree *t, const node *n)
{
    if (t->nrows == t->caprows) {
        size_t nc = t->caprows ? t->caprows * 2 : 256;
        gmp_tui_row *nr = realloc(t->rows, nc * sizeof *nr);
        if (!nr)
            return -1;
        t->rows = nr;
        t->caprows = nc;
    }
    uint32_t kids = n->first;
    gmp_tui_row *r = &t->rows[t->nrows++];
    r->label = n->label;
    r->bytes = n->bytes;
    r->count = n->count;
    r->depth = n->depth;
    r->has_children = kids != NO_NODE || n->is_site;
    r->expanded = is_expanded(t, n);
    r->is_alloc = n->is_alloc;
    r->hkey = n->hkey;
    r->best = n->best;
    return 0;
}

static int flatten(gmp_tui_tree *t, uint32_t first)
{
    size_t k = 0;
    for (uint32_t c = first; c != NO_NODE; c = t->nodes[c].next)
        k++;
    if (!k)
        return 0;
    uint32_t *ids = malloc(k * sizeof *ids);
    if (!ids)
        return -1;
    k = 0;
    for (uint32_t c = first; c != NO_NODE; c = t->nodes[c].next)
        ids[k++] = c;
    g_sort_tree = t;
    qsort(ids, k, sizeof *ids, node_cmp);
    int rc = 0;
    for (size_t i = 0; i < k && rc == 0; i++) {
        node *n = &t->nodes[ids[i]];
        rc = push_row(t, n);
        if (rc == 0 && n->first != NO_NODE && is_expanded(t, n))
            rc = flatten(t, n->first);
    }
    free(ids);
    return rc;
}

gmp_err gmp_tui_tree_build(gmp_tui_tree *t, const gmp_tui_live *live, size_t n, int32_t dev, int by,
                           int show_internal)
{
    nodes_clear(t);
    if (t->capidx)
        memset(t->idx, 0xff, t->capidx * sizeof *t->idx);
    t->by = by < 0 || by >= GMP_TUI_BY_COUNT ? GMP_TUI_BY_RANGE : by;
    t->total = t->count = 0;
    if (!t->m)
        return GMP_OK;
    size_t ns = gmp_replay_site_count(gmp_tui_model_replay(t->m));
    site_acc *acc = calloc(ns ? ns : 1, sizeof *acc);
    if (!acc)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < ns; i++)
        acc[i].best = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const gmp_tui_live *l = &live[i];
        if (l->device != dev || l->site >= ns)
            continue;
        const gmp_replay_site *rs = gmp_replay_site_at(gmp_tui_model_replay(t->m), l->site);
        if (!rs || !gmp_mem_kind_is_device(rs->kind))
            continue;
        site_acc *a = &acc[l->site];
        a->bytes += l->size;
        a->count++;
        if (a->best == SIZE_MAX || l->size > live[a->best].size)
            a->best = i;
        t->total += l->size;
        t->count++;
    }
    gmp_err err = GMP_OK;
    char lab[600];
    for (size_t si = 0; si < ns && err == GMP_OK; si++) {
        if (!acc[si].count)
            continue;
        const gmp_tui_site *s = gmp_tui_tree_site(t, (uint32_t)si);
        if (!s || !s->ready || !s->api_str || !s->range_str || !s->frames || !s->internal) {
            err = GMP_ERR_NOMEM;
            break;
        }
        uint32_t cur = NO_NODE;
        if (t->by == GMP_TUI_BY_RANGE) {
            if (!s->nranges)
                cur = child(t, cur, "(no range)", 0);
            for (size_t k = 0; k < s->nranges && (k == 0 || cur != NO_NODE); k++)
                cur = child(t, cur, s->ranges[k], 0);
            snprintf(lab, sizeof lab, "%s %s: %s", gmp_mem_kind_name(s->kind), s->api_str,
                     top_frame(s, show_internal));
        } else if (t->by == GMP_TUI_BY_STACK) {
            int any = 0;
            for (size_t k = s->nframes; k-- > 0;) {
                if (!show_internal && s->internal[k])
                    continue;
                cur = child(t, any ? cur : NO_NODE, s->frames[k], 0);
                any = 1;
                if (cur == NO_NODE)
                    break;
            }
            if (!any)
                cur = child(t, NO_NODE,
                            s->nframes ? "(internal frames only)" : "(no stack recorded)", 0);
            snprintf(lab, sizeof lab, "%s %s [%s]", gmp_mem_kind_name(s->kind), s->api_str,
                     *s->range_str ? s->range_str : "no range");
        } else if (t->by == GMP_TUI_BY_FRAME) {
            /* innermost shown frame first (the report's user frame), then its callers */
            int any = 0;
            for (size_t k = 0; k < s->nframes; k++) {
                if (!show_internal && s->internal[k])
                    continue;
                cur = child(t, any ? cur : NO_NODE, s->frames[k], 0);
                any = 1;
                if (cur == NO_NODE)
                    break;
            }
            if (!any)
                cur = child(t, NO_NODE,
                            s->nframes ? "(internal frames only)" : "(no stack recorded)", 0);
            snprintf(lab, sizeof lab, "%s %s [%s]", gmp_mem_kind_name(s->kind), s->api_str,
                     *s->range_str ? s->range_str : "no range");
        } else if (t->by == GMP_TUI_BY_CATEGORY) {
            cur = child(t, NO_NODE, gmp_category_name((gmp_category)s->category), 0);
            if (cur != NO_NODE)
                cur = child(t, cur, *s->range_str ? s->range_str : "(no range)", 0);
            snprintf(lab, sizeof lab, "%s %s: %s", gmp_mem_kind_name(s->kind), s->api_str,
                     top_frame(s, show_internal));
        } else {
            cur = child(t, NO_NODE, gmp_mem_kind_name(s->kind), 0);
            if (cur != NO_NODE)
                cur = child(t, cur, *s->range_str ? s->range_str : "(no range)", 0);
            snprintf(lab, sizeof lab, "%s: %s", s->api_str, top_frame(s, show_internal));
        }
        if (cur != NO_NODE)
            cur = child(t, cur, lab, 0);
        if (cur == NO_NODE) {
            err = GMP_ERR_NOMEM;
            break;
        }
        t->nodes[cur].is_site = 1;
        add_up(t, cur, acc[si].bytes, acc[si].count, acc[si].best, live);
        if (t->has_reveal && t->reveal_site == si) {
            for (uint32_t p = cur; p != NO_NODE; p = t->nodes[p].parent)
                hset_put(&t->toggles, t->nodes[p].hkey, 1);
            t->has_reveal = 0;
        }
        if (!is_expanded(t, &t->nodes[cur]))
            continue;
        /* the site's largest allocations */
        size_t k = 0, *ix = malloc(acc[si].count * sizeof *ix);
        if (!ix) {
            err = GMP_ERR_NOMEM;
            break;
        }
        for (size_t i = 0; i < n; i++)
            if (live[i].site == si && live[i].device == dev)
                ix[k++] = i;
        qsort_r(ix, k, sizeof *ix, by_size_desc, (void *)live);
        for (size_t i = 0; i < k && i < MAX_ALLOC_LEAVES; i++) {
            char b[32];
            snprintf(lab, sizeof lab, "%s at 0x%" PRIx64,
                     gmp_fmt_bytes(live[ix[i]].size, b, sizeof b), live[ix[i]].key);
            uint32_t leaf = child(t, cur, lab, 1);
            if (leaf == NO_NODE) {
                err = GMP_ERR_NOMEM;
                break;
            }
            t->nodes[leaf].bytes = live[ix[i]].size;
            t->nodes[leaf].count = 1;
            t->nodes[leaf].best = ix[i];
        }
        if (k > MAX_ALLOC_LEAVES) {
            snprintf(lab, sizeof lab, "... %zu more", k - MAX_ALLOC_LEAVES);
            uint32_t leaf = child(t, cur, lab, 1);
            if (leaf != NO_NODE)
                t->nodes[leaf].best = SIZE_MAX;
        }
        free(ix);
    }
    free(acc);
    if (err != GMP_OK)
        return err;
    /* roots: nodes without a parent */
    uint32_t first = NO_NODE;
    for (size_t i = t->nnodes; i-- > 0;)
        if (t->nodes[i].parent == NO_NODE) {
            t->nodes[i].next = first;
            first = (uint32_t)i;
        }
    return flatten(t, first) == 0 ? GMP_OK : GMP_ERR_NOMEM;
}

size_t gmp_tui_tree_nrows(const gmp_tui_tree *t)
{
    return t->nrows;
}

const gmp_tui_row *gmp_tui_tree_row(const gmp_tui_tree *t, size_t i)
{
    return i < t->nrows ? &t->rows[i] : NULL;
}

uint64_t gmp_tui_tree_total(const gmp_tui_tree *t)
{
    return t->total;
}

uint64_t gmp_tui_tree_count(const gmp_tui_tree *t)
{
    return t->count;
}

void gmp_tui_tree_toggle(gmp_tui_tree *t, const gmp_tui_row *row)
{
    if (!row || !row->has_children)
        return;
    hset_put(&t->toggles, row->hkey, row->expanded ? 2 : 1);
}

void gmp_tui_tree_reveal_site(gmp_tui_tree *t, uint32_t site)
{
    t->reveal_site = site;
    t->has_reveal = 1;
}
