/* gmp_report_ranks: per-rank summaries and the cross-rank view (see gmp_report_ranks.h). Three
 * parts: a trace's summary from its report model; the summary as JSON, written and read back (a
 * small JSON reader of our own: the input is untrusted, so depth, sizes and numbers are checked);
 * the cross-rank document, built from the summaries alone. */
#include "gmp_report_ranks.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"

#define GROWTH_FACTOR 2.0       /* growth diverges: more than this times the median ... */
#define GROWTH_MIN (1ull << 20) /* ... and at least this much more than it */
#define HEAVY_FACTOR 1.5        /* heavy: a peak more than this times the median peak */
#define JSON_MAX_DEPTH 16
#define JSON_MAX_STR (1u << 20)
/* values in one document: bounds the memory a hostile file can make us take (about 80 bytes per
 * value; a summary with 256 ranges has about 2,000) */
#define JSON_MAX_VALUES (4u << 20)

/* ---- owned strings ---- */

static gmp_str own(const char *p, size_t n)
{
    if (n > UINT32_MAX - 1)
        n = UINT32_MAX - 1;
    char *c = malloc(n + 1);
    if (!c)
        return (gmp_str){NULL, 0};
    if (n)
        memcpy(c, p, n);
    c[n] = 0;
    return (gmp_str){c, (uint32_t)n};
}

static void own_free(gmp_str *s)
{
    free((char *)s->ptr);
    s->ptr = NULL;
    s->len = 0;
}

static gmp_str own_t(const gmp_report_trace *t, uint32_t i)
{
    gmp_str s = gmp_report_str(t, i);
    return own(s.ptr, s.len);
}

void gmp_rank_summary_clear(gmp_rank_summary *s)
{
    if (!s)
        return;
    own_free(&s->path);
    own_free(&s->host);
    own_free(&s->top);
    own_free(&s->growth_range);
    for (size_t i = 0; i < s->ndevices; i++)
        own_free(&s->devices[i].name);
    for (size_t i = 0; i < s->nranges; i++)
        own_free(&s->ranges[i].path);
    free(s->devices);
    free(s->ranges);
    memset(s, 0, sizeof *s);
}

/* ---- a trace's summary ---- */

static int range_cmp(const void *a, const void *b)
{
    const gmp_rank_range *x = a, *y = b;
    if (x->peak_bytes != y->peak_bytes)
        return x->peak_bytes > y->peak_bytes ? -1 : 1;
    size_t n = x->path.len < y->path.len ? x->path.len : y->path.len;
    int c = memcmp(x->path.ptr, y->path.ptr, n);
    if (c)
        return c;
    if (x->path.len != y->path.len)
        return x->path.len < y->path.len ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

static uint64_t rel(uint64_t ns, uint64_t t0)
{
    return ns > t0 ? ns - t0 : 0;
}

gmp_err gmp_rank_summary_from_trace(const gmp_report_trace *t, uint64_t index,
                                    gmp_rank_summary *out)
{
    memset(out, 0, sizeof *out);
    gmp_rank_summary *s = out;
    s->index = index;
    s->rank = t->rank >= 0 ? t->rank : (int64_t)index;
    s->rank_source = t->rank >= 0 ? GMP_RANK_FROM_TRACE : GMP_RANK_FROM_ORDER;
    /* the header's rank identity, with its rank; -1 when the trace does not say (no header, no
     * rank, or a header that predates them: local_rank -1, world_size 0) */
    int ident = t->has_header && t->rank >= 0;
    s->local_rank = ident && t->local_rank >= 0 ? t->local_rank : -1;
    s->world_size = ident && t->world_size > 0 ? t->world_size : -1;
    s->path = own_t(t, t->path);
    s->host = own_t(t, t->hostname);
    s->pid = t->pid;
    s->start_wall_ns = t->start_wall_ns;
    s->events = t->sum.events;
    s->lost = t->sum.lost_events;
    s->duration_ns = t->sum.last_ns > t->sum.first_ns ? t->sum.last_ns - t->sum.first_ns : 0;
    s->complete = t->sum.complete;
    s->end = t->end;
    s->peak_device = -2;
    size_t nd = 0;
    for (size_t k = 0; k < t->ndevices; k++)
        nd += t->devices[k].listed != 0;
    s->devices = calloc(nd ? nd : 1, sizeof *s->devices);
    if (!s->devices || !s->path.ptr || !s->host.ptr)
        goto nomem;
    for (size_t k = 0; k < t->ndevices; k++) {
        const gmp_report_device *o = &t->devices[k];
        if (!o->listed)
            continue;
        gmp_rank_device *d = &s->devices[s->ndevices++];
        d->id = o->id;
        d->name = own_t(t, o->name);
        if (!d->name.ptr)
            goto nomem;
        d->total_bytes = o->total_bytes;
        d->peak_allocated_bytes = o->d.peak_allocated;
        d->peak_allocated_ns = o->d.peak_allocated ? rel(o->d.peak_time_ns, t->t0_ns) : 0;
        d->peak_reserved_bytes = o->d.peak_reserved;
        d->peak_reserved_ns = o->d.peak_reserved ? rel(o->d.peak_reserved_time_ns, t->t0_ns) : 0;
        d->allocs = o->d.allocs;
        d->ooms = o->d.ooms;
        d->leaked_bytes = t->end == GMP_REPORT_END_EXIT ? o->leaked_bytes : 0;
        d->leaked_count = t->end == GMP_REPORT_END_EXIT ? o->leaked_count : 0;
        d->unexplained_max_bytes = o->d.max_unexplained;
        s->leaked_bytes += d->leaked_bytes;
        s->ooms += d->ooms;
        if (d->peak_allocated_bytes > s->peak_allocated_bytes) {
            s->peak_allocated_bytes = d->peak_allocated_bytes;
            s->peak_ns = d->peak_allocated_ns;
            s->peak_device = d->id;
            s->peak_reserved_bytes = d->peak_reserved_bytes;
        }
    }
    /* what held most of the peak, as the report's "Across the N processes" names it */
    s->top_is_frame = !t->has_ranges;
    if (s->peak_allocated_bytes) {
        gmp_report_view v;
        memset(&v, 0, sizeof v);
        v.device = INT64_MIN;
        size_t n = 0;
        gmp_report_row *a =
            gmp_report_group(t, &v, GMP_REPORT_PEAK,
                             s->top_is_frame ? GMP_REPORT_BY_FRAME : GMP_REPORT_BY_RANGE, &n);
        for (size_t i = 0; a && i < n; i++)
            if (a[i].device == s->peak_device) { /* largest first within a device */
                s->top = own_t(t, a[i].range);
                s->top_bytes = a[i].bytes;
                break;
            }
        free(a);
    }
    if (!s->top.ptr && !(s->top = own("", 0)).ptr)
        goto nomem;
    /* the first OOM */
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *o = &t->ooms[i].o;
        uint64_t at = rel(o->time_ns, t->t0_ns);
        if (i == 0 || at < s->first_oom_ns) {
            s->first_oom_ns = at;
            s->first_oom_device = o->device;
            s->first_oom_requested = o->requested;
        }
    }
    if (!t->nooms)
        s->first_oom_device = -2;
    /* growth: the repeated range that grew most */
    const gmp_analysis_result *an = t->analysis;
    for (size_t i = 0; an && i < an->ngrowth; i++) {
        const gmp_analysis_growth *g = &an->growth[i];
        if (g->total_bytes > s->growth_bytes) {
            s->growth_bytes = g->total_bytes;
            s->growth_repetitions = g->repetitions;
            own_free(&s->growth_range);
            s->growth_range = own_t(t, g->range);
            if (!s->growth_range.ptr)
                goto nomem;
        }
    }
    if (!s->growth_range.ptr && !(s->growth_range = own("", 0)).ptr)
        goto nomem;
    /* the ranges, largest peaks first, at most GMP_RANK_MAX_RANGES */
    s->ranges = calloc(t->nranges ? t->nranges : 1, sizeof *s->ranges);
    if (!s->ranges)
        goto nomem;
    for (size_t i = 0; i < t->nranges; i++) {
        const gmp_report_range *r = &t->ranges[i];
        gmp_rank_range *o = &s->ranges[s->nranges];
        o->path = gmp_report_str(t, r->path); /* borrowed until the cut below */
        o->device = r->device;
        o->entered = r->entered;
        o->peak_bytes = r->peak_bytes;
        o->peak_inside_bytes = r->peak_inside_bytes;
        o->left_bytes = r->left_bytes;
        s->nranges++;
    }
    qsort(s->ranges, s->nranges, sizeof *s->ranges, range_cmp);
    if (s->nranges > GMP_RANK_MAX_RANGES) {
        s->ranges_left_out = s->nranges - GMP_RANK_MAX_RANGES;
        s->nranges = GMP_RANK_MAX_RANGES;
    }
    for (size_t i = 0; i < s->nranges; i++) {
        gmp_str b = s->ranges[i].path;
        s->ranges[i].path = own(b.ptr, b.len);
        if (!s->ranges[i].path.ptr) {
            for (size_t j = i; j < s->nranges; j++)
                s->ranges[j].path = (gmp_str){NULL, 0};
            goto nomem;
        }
    }
    return GMP_OK;
nomem:
    gmp_rank_summary_clear(s);
    return GMP_ERR_NOMEM;
}

/* ---- JSON out ---- */

/* Members of one object, ", " between them. */
typedef struct jout {
    FILE *f;
    int n;
} jout;

static void jkey(jout *w, const char *key)
{
    fprintf(w->f, "%s\"%s\": ", w->n++ ? ", " : "", key);
}

static void ws(jout *w, const char *key, gmp_str s)
{
    jkey(w, key);
    gmp_json_fputs(w->f, s.ptr ? s.ptr : "", s.ptr ? s.len : 0);
}

static void wu(jout *w, const char *key, uint64_t v)
{
    jkey(w, key);
    fprintf(w->f, "%" PRIu64, v);
}

static void wi(jout *w, const char *key, int64_t v)
{
    jkey(w, key);
    fprintf(w->f, "%" PRId64, v);
}

static void wb(jout *w, const char *key, int v)
{
    jkey(w, key);
    fputs(v ? "true" : "false", w->f);
}

static void wl(jout *w, const char *key, const char *lit)
{
    jkey(w, key);
    fprintf(w->f, "\"%s\"", lit);
}

static const char *end_name(gmp_report_end e)
{
    return e == GMP_REPORT_END_SNAPSHOT ? "snapshot" : e == GMP_REPORT_END_CUT ? "cut" : "exit";
}

gmp_err gmp_rank_summary_write_json(FILE *f, const gmp_rank_summary *arr, size_t n)
{
    fprintf(f, "{\"schema\": \"%s\", \"summaries\": [", GMP_RANK_SUMMARY_SCHEMA);
    for (size_t i = 0; i < n; i++) {
        const gmp_rank_summary *s = &arr[i];
        jout w = {f, 0};
        fputs(i ? ",\n{" : "\n{", f);
        wu(&w, "index", s->index);
        wi(&w, "rank", s->rank);
        wl(&w, "rank_source", s->rank_source == GMP_RANK_FROM_TRACE ? "trace" : "order");
        wi(&w, "local_rank", s->local_rank);
        wi(&w, "world_size", s->world_size);
        ws(&w, "path", s->path);
        ws(&w, "host", s->host);
        wu(&w, "pid", s->pid);
        wu(&w, "start_wall_ns", s->start_wall_ns);
        wu(&w, "events", s->events);
        wu(&w, "lost", s->lost);
        wu(&w, "duration_ns", s->duration_ns);
        wb(&w, "complete", s->complete);
        wl(&w, "end", end_name(s->end));
        wi(&w, "peak_device", s->peak_device);
        wu(&w, "peak_allocated_bytes", s->peak_allocated_bytes);
        wu(&w, "peak_ns", s->peak_ns);
        wu(&w, "peak_reserved_bytes", s->peak_reserved_bytes);
        ws(&w, "top", s->top);
        wb(&w, "top_is_frame", s->top_is_frame);
        wu(&w, "top_bytes", s->top_bytes);
        wu(&w, "leaked_bytes", s->leaked_bytes);
        wu(&w, "ooms", s->ooms);
        wu(&w, "first_oom_ns", s->first_oom_ns);
        wu(&w, "first_oom_requested", s->first_oom_requested);
        wi(&w, "first_oom_device", s->first_oom_device);
        wi(&w, "growth_bytes", s->growth_bytes);
        wu(&w, "growth_repetitions", s->growth_repetitions);
        ws(&w, "growth_range", s->growth_range);
        wu(&w, "ranges_left_out", s->ranges_left_out);
        fputs(",\n \"devices\": [", f);
        for (size_t k = 0; k < s->ndevices; k++) {
            const gmp_rank_device *d = &s->devices[k];
            jout v = {f, 0};
            fputs(k ? ", {" : "{", f);
            wi(&v, "id", d->id);
            ws(&v, "name", d->name);
            wu(&v, "total_bytes", d->total_bytes);
            wu(&v, "peak_allocated_bytes", d->peak_allocated_bytes);
            wu(&v, "peak_allocated_ns", d->peak_allocated_ns);
            wu(&v, "peak_reserved_bytes", d->peak_reserved_bytes);
            wu(&v, "peak_reserved_ns", d->peak_reserved_ns);
            wu(&v, "allocs", d->allocs);
            wu(&v, "ooms", d->ooms);
            wu(&v, "leaked_bytes", d->leaked_bytes);
            wu(&v, "leaked_count", d->leaked_count);
            wu(&v, "unexplained_max_bytes", d->unexplained_max_bytes);
            fputs("}", f);
        }
        fputs("],\n \"ranges\": [", f);
        for (size_t k = 0; k < s->nranges; k++) {
            const gmp_rank_range *r = &s->ranges[k];
            jout v = {f, 0};
            fputs(k ? ",\n  {" : "\n  {", f);
            ws(&v, "path", r->path);
            wi(&v, "device", r->device);
            wu(&v, "entered", r->entered);
            wu(&v, "peak_bytes", r->peak_bytes);
            wu(&v, "peak_inside_bytes", r->peak_inside_bytes);
            wu(&v, "left_bytes", r->left_bytes);
            fputs("}", f);
        }
        fputs("]}", f);
    }
    fputs("\n]}\n", f);
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}

/* ---- JSON in: a small DOM over the input ---- */

typedef enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jt;

typedef struct jv {
    jt t;
    int b;
    const char *num; /* J_NUM: the number's text in the input */
    size_t numlen;
    gmp_str s;    /* J_STR: decoded (owned by the parser's list) */
    size_t n;     /* ARR, OBJ: members */
    struct jv *v; /* ARR, OBJ: values */
    gmp_str *k;   /* OBJ: keys (decoded) */
} jv;

typedef struct jp {
    const char *p, *e;
    char *err;
    size_t errlen;
    int failed;
    size_t values;
} jp;

static void jfail(jp *J, const char *what)
{
    if (!J->failed)
        snprintf(J->err, J->errlen, "not a summary: %s", what);
    J->failed = 1;
}

static void jws(jp *J)
{
    while (J->p < J->e && (*J->p == ' ' || *J->p == '\t' || *J->p == '\n' || *J->p == '\r'))
        J->p++;
}

static void jfree(jv *v)
{
    if (v->t == J_STR)
        free((char *)v->s.ptr);
    if (v->t == J_ARR || v->t == J_OBJ) {
        for (size_t i = 0; i < v->n; i++) {
            jfree(&v->v[i]);
            if (v->t == J_OBJ)
                free((char *)v->k[i].ptr);
        }
        free(v->v);
        free(v->k);
    }
    memset(v, 0, sizeof *v);
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A string. \u0080..\u00ff stand for the raw byte (gmp_json_fputs writes a byte of invalid UTF-8
 * so, and valid UTF-8 as it is): what was written is read back byte for byte. */
static gmp_str jstring(jp *J)
{
    J->p++; /* '"' */
    size_t cap = 64, n = 0;
    char *b = malloc(cap);
    while (b && J->p < J->e && *J->p != '"') {
        if (n + 8 > cap) {
            if (cap >= JSON_MAX_STR) {
                jfail(J, "a string too long");
                break;
            }
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
        unsigned char c = (unsigned char)*J->p++;
        if (c < 0x20) {
            jfail(J, "a control character in a string");
            break;
        }
        if (c != '\\') {
            b[n++] = (char)c;
            continue;
        }
        if (J->p >= J->e)
            break;
        char x = *J->p++;
        unsigned u;
        switch (x) {
        case '"': b[n++] = '"'; break;
        case '\\': b[n++] = '\\'; break;
        case '/': b[n++] = '/'; break;
        case 'b': b[n++] = '\b'; break;
        case 'f': b[n++] = '\f'; break;
        case 'n': b[n++] = '\n'; break;
        case 'r': b[n++] = '\r'; break;
        case 't': b[n++] = '\t'; break;
        case 'u':
            if (J->e - J->p < 4 || hex4(J->p, &u) != 0) {
                jfail(J, "a bad \\u escape");
                free(b);
                return (gmp_str){NULL, 0};
            }
            J->p += 4;
            if (u < 0x100) {
                b[n++] = (char)u; /* a control character, or a raw byte (above) */
            } else if (u < 0x800) {
                b[n++] = (char)(0xc0 | (u >> 6));
                b[n++] = (char)(0x80 | (u & 0x3f));
            } else if (u < 0xd800 || u > 0xdfff) {
                b[n++] = (char)(0xe0 | (u >> 12));
                b[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
                b[n++] = (char)(0x80 | (u & 0x3f));
            } else { /* a surrogate: not written by us; kept as U+FFFD */
                b[n++] = (char)0xef;
                b[n++] = (char)0xbf;
                b[n++] = (char)0xbd;
            }
            break;
        default:
            jfail(J, "a bad escape");
            free(b);
            return (gmp_str){NULL, 0};
        }
    }
    if (!b) {
        jfail(J, "out of memory");
        return (gmp_str){NULL, 0};
    }
    if (J->failed || J->p >= J->e) {
        jfail(J, "a string without its end");
        free(b);
        return (gmp_str){NULL, 0};
    }
    J->p++;
    b[n] = 0;
    return (gmp_str){b, (uint32_t)n};
}

static int jvalue(jp *J, jv *out, int depth);

static int jcontainer(jp *J, jv *out, int depth, int obj)
{
    out->t = obj ? J_OBJ : J_ARR;
    J->p++;
    size_t cap = 0;
    jws(J);
    if (J->p < J->e && *J->p == (obj ? '}' : ']')) {
        J->p++;
        return 0;
    }
    for (;;) {
        if (out->n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            jv *nv = realloc(out->v, nc * sizeof *nv);
            gmp_str *nk = nv && obj ? realloc(out->k, nc * sizeof *nk) : NULL;
            if (nv)
                out->v = nv;
            if (nk)
                out->k = nk;
            if (!nv || (obj && !nk)) {
                jfail(J, "out of memory");
                return -1;
            }
            cap = nc;
        }
        jws(J);
        if (obj) {
            if (J->p >= J->e || *J->p != '"') {
                jfail(J, "an object key expected");
                return -1;
            }
            gmp_str k = jstring(J);
            if (!k.ptr)
                return -1;
            out->k[out->n] = k;
            jws(J);
            if (J->p >= J->e || *J->p != ':') {
                free((char *)k.ptr);
                jfail(J, "':' expected");
                return -1;
            }
            J->p++;
        }
        memset(&out->v[out->n], 0, sizeof out->v[out->n]);
        if (jvalue(J, &out->v[out->n], depth + 1) != 0) {
            jfree(&out->v[out->n]);
            if (obj)
                free((char *)out->k[out->n].ptr);
            return -1;
        }
        out->n++;
        jws(J);
        if (J->p < J->e && *J->p == ',') {
            J->p++;
            continue;
        }
        if (J->p < J->e && *J->p == (obj ? '}' : ']')) {
            J->p++;
            return 0;
        }
        jfail(J, obj ? "',' or '}' expected" : "',' or ']' expected");
        return -1;
    }
}

static int jvalue(jp *J, jv *out, int depth)
{
    if (depth > JSON_MAX_DEPTH) {
        jfail(J, "nested too deep");
        return -1;
    }
    if (++J->values > JSON_MAX_VALUES) {
        jfail(J, "too many values in one file (give the summaries in several files)");
        return -1;
    }
    jws(J);
    if (J->p >= J->e) {
        jfail(J, "unexpected end");
        return -1;
    }
    char c = *J->p;
    if (c == '{' || c == '[')
        return jcontainer(J, out, depth, c == '{');
    if (c == '"') {
        out->t = J_STR;
        out->s = jstring(J);
        return out->s.ptr ? 0 : -1;
    }
    static const struct {
        const char *w;
        jt t;
        int b;
    } words[] = {{"true", J_BOOL, 1}, {"false", J_BOOL, 0}, {"null", J_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t l = strlen(words[i].w);
        if ((size_t)(J->e - J->p) >= l && !memcmp(J->p, words[i].w, l)) {
            out->t = words[i].t;
            out->b = words[i].b;
            J->p += l;
            return 0;
        }
    }
    const char *s = J->p;
    while (J->p < J->e && (strchr("+-.eE", *J->p) || (*J->p >= '0' && *J->p <= '9')))
        J->p++;
    if (J->p == s || J->p - s > 40) {
        jfail(J, "a value expected");
        return -1;
    }
    out->t = J_NUM;
    out->num = s;
    out->numlen = (size_t)(J->p - s);
    return 0;
}

static const jv *jget(const jv *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < o->n; i++)
        if (o->k[i].len == kl && !memcmp(o->k[i].ptr, key, kl))
            return &o->v[i];
    return NULL;
}

/* Integers only (a summary has no fractions): strict decimal, in range. */
static int jnum_i(const jv *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!v || v->t != J_NUM)
        return -1;
    char b[48];
    memcpy(b, v->num, v->numlen);
    b[v->numlen] = 0;
    char *end;
    int neg = b[0] == '-';
    if (neg) {
        long long x = strtoll(b, &end, 10);
        if (*end || x < lo || x > hi)
            return -1;
        *out = x;
    } else {
        if (b[0] < '0' || b[0] > '9')
            return -1;
        unsigned long long x = strtoull(b, &end, 10);
        if (*end || (hi >= 0 && x > (unsigned long long)hi))
            return -1;
        *out = (int64_t)x;
    }
    return 0;
}

static int jnum_u(const jv *v, uint64_t *out)
{
    if (!v || v->t != J_NUM || v->numlen == 0 || v->num[0] < '0' || v->num[0] > '9')
        return -1;
    char b[48];
    memcpy(b, v->num, v->numlen);
    b[v->numlen] = 0;
    char *end;
    unsigned long long x = strtoull(b, &end, 10);
    if (*end || (x == ULLONG_MAX && strcmp(b, "18446744073709551615") != 0))
        return -1;
    *out = x;
    return 0;
}

typedef struct rd {
    jp *J;
    const jv *o;
    const char *where;
} rd;

static void rmiss(rd *R, const char *key)
{
    char m[128];
    snprintf(m, sizeof m, "%s: \"%s\" missing or not valid", R->where, key);
    jfail(R->J, m);
}

static uint64_t ru(rd *R, const char *key)
{
    uint64_t x = 0;
    if (jnum_u(jget(R->o, key), &x) != 0)
        rmiss(R, key);
    return x;
}

static int64_t ri(rd *R, const char *key, int64_t lo, int64_t hi)
{
    int64_t x = 0;
    if (jnum_i(jget(R->o, key), lo, hi, &x) != 0)
        rmiss(R, key);
    return x;
}

static int rb(rd *R, const char *key)
{
    const jv *v = jget(R->o, key);
    if (!v || v->t != J_BOOL) {
        rmiss(R, key);
        return 0;
    }
    return v->b;
}

static gmp_str rs(rd *R, const char *key)
{
    const jv *v = jget(R->o, key);
    if (!v || v->t != J_STR) {
        rmiss(R, key);
        return own("", 0);
    }
    return own(v->s.ptr, v->s.len);
}

static void read_one(jp *J, const jv *o, gmp_rank_summary *s)
{
    rd R = {J, o, "summary"};
    if (!o || o->t != J_OBJ) {
        jfail(J, "a summary is not an object");
        return;
    }
    s->index = ru(&R, "index");
    s->rank = ri(&R, "rank", INT64_MIN, INT64_MAX);
    gmp_str src = rs(&R, "rank_source");
    if (src.ptr && !strcmp(src.ptr, "trace"))
        s->rank_source = GMP_RANK_FROM_TRACE;
    else if (src.ptr && !strcmp(src.ptr, "order"))
        s->rank_source = GMP_RANK_FROM_ORDER;
    else
        rmiss(&R, "rank_source");
    own_free(&src);
    s->local_rank = ri(&R, "local_rank", INT64_MIN, INT64_MAX);
    s->world_size = ri(&R, "world_size", INT64_MIN, INT64_MAX);
    s->path = rs(&R, "path");
    s->host = rs(&R, "host");
    s->pid = (uint32_t)ri(&R, "pid", 0, UINT32_MAX);
    s->start_wall_ns = ru(&R, "start_wall_ns");
    s->events = ru(&R, "events");
    s->lost = ru(&R, "lost");
    s->duration_ns = ru(&R, "duration_ns");
    s->complete = rb(&R, "complete");
    gmp_str end = rs(&R, "end");
    if (end.ptr && !strcmp(end.ptr, "exit"))
        s->end = GMP_REPORT_END_EXIT;
    else if (end.ptr && !strcmp(end.ptr, "snapshot"))
        s->end = GMP_REPORT_END_SNAPSHOT;
    else if (end.ptr && !strcmp(end.ptr, "cut"))
        s->end = GMP_REPORT_END_CUT;
    else
        rmiss(&R, "end");
    own_free(&end);
    s->peak_device = (int32_t)ri(&R, "peak_device", -2, INT32_MAX);
    s->peak_allocated_bytes = ru(&R, "peak_allocated_bytes");
    s->peak_ns = ru(&R, "peak_ns");
    s->peak_reserved_bytes = ru(&R, "peak_reserved_bytes");
    s->top = rs(&R, "top");
    s->top_is_frame = rb(&R, "top_is_frame");
    s->top_bytes = ru(&R, "top_bytes");
    s->leaked_bytes = ru(&R, "leaked_bytes");
    s->ooms = ru(&R, "ooms");
    s->first_oom_ns = ru(&R, "first_oom_ns");
    s->first_oom_requested = ru(&R, "first_oom_requested");
    s->first_oom_device = (int32_t)ri(&R, "first_oom_device", -2, INT32_MAX);
    s->growth_bytes = ri(&R, "growth_bytes", INT64_MIN, INT64_MAX);
    s->growth_repetitions = ru(&R, "growth_repetitions");
    s->growth_range = rs(&R, "growth_range");
    s->ranges_left_out = ru(&R, "ranges_left_out");
    const jv *devs = jget(o, "devices"), *rgs = jget(o, "ranges");
    if (!devs || devs->t != J_ARR || !rgs || rgs->t != J_ARR || rgs->n > GMP_RANK_MAX_RANGES) {
        jfail(J, "summary: \"devices\" or \"ranges\" missing or not valid");
        return;
    }
    s->devices = calloc(devs->n ? devs->n : 1, sizeof *s->devices);
    s->ranges = calloc(rgs->n ? rgs->n : 1, sizeof *s->ranges);
    if (!s->devices || !s->ranges) {
        jfail(J, "out of memory");
        return;
    }
    for (size_t i = 0; i < devs->n && !J->failed; i++) {
        gmp_rank_device *d = &s->devices[s->ndevices++];
        rd D = {J, &devs->v[i], "device"};
        if (devs->v[i].t != J_OBJ) {
            jfail(J, "a device is not an object");
            break;
        }
        d->id = (int32_t)ri(&D, "id", -1, INT32_MAX);
        d->name = rs(&D, "name");
        d->total_bytes = ru(&D, "total_bytes");
        d->peak_allocated_bytes = ru(&D, "peak_allocated_bytes");
        d->peak_allocated_ns = ru(&D, "peak_allocated_ns");
        d->peak_reserved_bytes = ru(&D, "peak_reserved_bytes");
        d->peak_reserved_ns = ru(&D, "peak_reserved_ns");
        d->allocs = ru(&D, "allocs");
        d->ooms = ru(&D, "ooms");
        d->leaked_bytes = ru(&D, "leaked_bytes");
        d->leaked_count = ru(&D, "leaked_count");
        d->unexplained_max_bytes = ru(&D, "unexplained_max_bytes");
    }
    for (size_t i = 0; i < rgs->n && !J->failed; i++) {
        gmp_rank_range *r = &s->ranges[s->nranges++];
        rd G = {J, &rgs->v[i], "range"};
        if (rgs->v[i].t != J_OBJ) {
            jfail(J, "a range is not an object");
            break;
        }
        r->path = rs(&G, "path");
        r->device = (int32_t)ri(&G, "device", -2, INT32_MAX);
        r->entered = ru(&G, "entered");
        r->peak_bytes = ru(&G, "peak_bytes");
        r->peak_inside_bytes = ru(&G, "peak_inside_bytes");
        r->left_bytes = ru(&G, "left_bytes");
    }
    if (!s->path.ptr || !s->host.ptr || !s->top.ptr || !s->growth_range.ptr)
        jfail(J, "out of memory");
}

gmp_err gmp_rank_summary_read_json(const char *buf, size_t len, gmp_rank_summary **arr, size_t *n,
                                   size_t *cap, char *err, size_t errlen)
{
    jp J = {buf, buf + len, err, errlen, 0, 0};
    jv root;
    memset(&root, 0, sizeof root);
    if (jvalue(&J, &root, 0) == 0) {
        jws(&J);
        if (J.p != J.e)
            jfail(&J, "text after the document");
    }
    const jv *schema = jget(&root, "schema"), *sums = jget(&root, "summaries");
    if (!J.failed &&
        (!schema || schema->t != J_STR || strcmp(schema->s.ptr, GMP_RANK_SUMMARY_SCHEMA)))
        jfail(&J, "no \"schema\": \"" GMP_RANK_SUMMARY_SCHEMA "\"");
    if (!J.failed && (!sums || sums->t != J_ARR))
        jfail(&J, "no \"summaries\" array");
    size_t added = 0;
    for (size_t i = 0; !J.failed && i < sums->n; i++) {
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            gmp_rank_summary *na = realloc(*arr, nc * sizeof *na);
            if (!na) {
                jfail(&J, "out of memory");
                break;
            }
            *arr = na;
            *cap = nc;
        }
        gmp_rank_summary *s = &(*arr)[*n];
        memset(s, 0, sizeof *s);
        (*n)++;
        added++;
        read_one(&J, &sums->v[i], s);
    }
    jfree(&root);
    if (J.failed) { /* nothing of this document is kept */
        for (size_t i = 0; i < added; i++)
            gmp_rank_summary_clear(&(*arr)[*n - added + i]);
        *n -= added;
        return GMP_ERR_FORMAT;
    }
    return GMP_OK;
}

/* ---- the cross-rank view ---- */

#define K(v, key) gmp_dv_k((v), (key))

/* One rank as the view sees it: the figures of the wanted devices. */
typedef struct rview {
    const gmp_rank_summary *s;
    size_t i; /* place among the inputs */
    int64_t rank;
    const char *label; /* as the per-process report labels it: "rank R, pid P", "pid P" */
    const char *who;   /* in the outliers: "pid P on HOST", or the label without a process */
    int32_t device;    /* of the peak, -2 none */
    uint64_t peak, reserved, peak_ns, leaked, ooms;
    int top_ok; /* the summary's top is about this peak */
} rview;

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int rview_cmp(const void *a, const void *b)
{
    const rview *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static double median_u64(uint64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, u64_cmp);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

static double median_i64(int64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, i64_cmp);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

static uint64_t round_u(double d)
{
    return d <= 0 ? 0 : (uint64_t)(d + 0.5);
}

static gmp_doc_val lab(const rview *r)
{
    return gmp_dv_str((gmp_str){r->label, (uint32_t)strlen(r->label)}, "");
}

static gmp_doc_val who(const rview *r)
{
    return gmp_dv_str((gmp_str){r->who, (uint32_t)strlen(r->who)}, "");
}

/* A range path on a device across the ranks. */
typedef struct rkey {
    const gmp_str *path;
    int32_t device;
    size_t rank_i; /* rview index */
    uint64_t peak;
} rkey;

static int rkey_cmp(const void *a, const void *b)
{
    const rkey *x = a, *y = b;
    size_t n = x->path->len < y->path->len ? x->path->len : y->path->len;
    int c = memcmp(x->path->ptr, y->path->ptr, n);
    if (c)
        return c;
    if (x->path->len != y->path->len)
        return x->path->len < y->path->len ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return (x->rank_i > y->rank_i) - (x->rank_i < y->rank_i);
}

typedef struct rspread {
    const gmp_str *path;
    int32_t device;
    size_t nranks;
    uint64_t min, max;
    double median;
    size_t at_max; /* rview index */
} rspread;

static int rspread_cmp(const void *a, const void *b)
{
    const rspread *x = a, *y = b;
    if (x->max != y->max)
        return x->max > y->max ? -1 : 1;
    rkey kx = {x->path, x->device, 0, 0}, ky = {y->path, y->device, 0, 0};
    return rkey_cmp(&kx, &ky);
}

static void ranges_table(gmp_doc *d, const rview *rv, size_t n, const gmp_report_view *v)
{
    static const gmp_doc_col cols[] = {
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"ranks", "ranks", GMP_DOC_COUNT, 0},
        {"min peak", "min_peak_bytes", GMP_DOC_BYTES, 0},
        {"median", "median_peak_bytes", GMP_DOC_BYTES, 0},
        {"max peak", "max_peak_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"max vs median", "max_vs_median_pct", GMP_DOC_PCT, GMP_DOC_SIGN},
        {"at max", "max_rank", GMP_DOC_INT, 0},
        {"trace", "max_path", GMP_DOC_STR, GMP_DOC_DATA},
    };
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        nk += rv[i].s->nranges;
    rkey *k = calloc(nk ? nk : 1, sizeof *k);
    rspread *sp = calloc(nk ? nk : 1, sizeof *sp);
    uint64_t *vals = calloc(nk ? nk : 1, sizeof *vals);
    if (!k || !sp || !vals)
        goto out;
    nk = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < rv[i].s->nranges; j++) {
            const gmp_rank_range *r = &rv[i].s->ranges[j];
            if (gmp_report_wanted(v, r->device))
                k[nk++] = (rkey){&r->path, r->device, i, r->peak_bytes};
        }
    qsort(k, nk, sizeof *k, rkey_cmp);
    size_t ns = 0;
    for (size_t a = 0; a < nk;) {
        size_t b = a;
        rspread *s = &sp[ns++];
        s->path = k[a].path;
        s->device = k[a].device;
        s->min = UINT64_MAX;
        while (b < nk && k[b].device == k[a].device && k[b].path->len == k[a].path->len &&
               !memcmp(k[b].path->ptr, k[a].path->ptr, k[a].path->len)) {
            vals[b - a] = k[b].peak;
            if (k[b].peak < s->min)
                s->min = k[b].peak;
            if (k[b].peak > s->max || b == a) {
                s->max = k[b].peak;
                s->at_max = k[b].rank_i;
            }
            b++;
        }
        s->nranks = b - a;
        s->median = median_u64(vals, b - a);
        a = b;
    }
    qsort(sp, ns, sizeof *sp, rspread_cmp);
    gmp_doc_block *sec =
        gmp_doc_section(d, gmp_doc_root(d), NULL, 0, "Ranges across the ranks (each range's peak)");
    gmp_doc_block *tb = gmp_doc_table(d, sec, "ranges", cols, sizeof cols / sizeof cols[0]);
    size_t shown = 0;
    for (size_t i = 0; i < ns; i++) {
        if (v->top && shown >= v->top)
            break;
        shown++;
        const rspread *s = &sp[i];
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_dv_str(*s->path, "(no name)");
        r[1] = gmp_dv_device(s->device);
        r[2] = gmp_dv_count(s->nranks);
        r[3] = gmp_dv_bytes(s->min);
        r[4] = gmp_dv_bytes(round_u(s->median));
        r[5] = gmp_dv_bytes(s->max);
        double pct = s->median > 0 ? 100.0 * ((double)s->max - s->median) / s->median : 0;
        r[6] = s->median > 0
                   ? gmp_dv_f(gmp_dv_pct(pct),
                              GMP_DOC_SIGN | (pct > 100.0 * (HEAVY_FACTOR - 1) ? GMP_DOC_WARN : 0))
                   : gmp_dv_none();
        r[7] = gmp_dv_int(rv[s->at_max].rank);
        r[8] = gmp_dv_str(rv[s->at_max].s->path, "");
    }
    tb->total = ns > shown ? ns : 0;
    if (!ns)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO, "no NVTX range in any trace");
    else if (ns > shown)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO, "and %v more ranges (--top 0: all)",
                       gmp_dv_count(ns - shown));
out:
    free(k);
    free(sp);
    free(vals);
}

void gmp_rank_summary_label(const gmp_rank_summary *s, size_t i, char *b, size_t cap)
{
    if (!s->pid && !s->host.len)
        snprintf(b, cap, "%s %zu", /* no process recorded: a snapshot, as cli_replay.c */
                 s->end == GMP_REPORT_END_SNAPSHOT ? "snapshot" : "trace", i + 1);
    else if (s->rank_source == GMP_RANK_FROM_TRACE)
        snprintf(b, cap, "rank %" PRId64 ", pid %" PRIu32, s->rank, s->pid);
    else
        snprintf(b, cap, "pid %" PRIu32, s->pid);
}

gmp_doc *gmp_ranks_build(const gmp_rank_summary *s, size_t n, const gmp_report_view *v,
                         const gmp_ranks_build_oom *oom, int brief)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    rview *rv = calloc(n ? n : 1, sizeof *rv);
    uint64_t *pk = calloc(n ? n : 1, sizeof *pk);
    int64_t *gr = calloc(n ? n : 1, sizeof *gr);
    if (!rv || !pk || !gr) {
        free(rv);
        free(pk);
        free(gr);
        gmp_doc_free(d);
        return NULL;
    }
    size_t nranked = 0;
    for (size_t i = 0; i < n; i++) {
        rview *r = &rv[i];
        r->s = &s[i];
        r->i = i;
        /* the place is the one among these summaries, whatever index a summary was made with */
        r->rank = s[i].rank_source == GMP_RANK_FROM_TRACE ? s[i].rank : (int64_t)i;
        nranked += s[i].rank_source == GMP_RANK_FROM_TRACE;
        char b[160];
        gmp_rank_summary_label(&s[i], i, b, sizeof b);
        r->label = gmp_doc_cstr(d, b);
        if (s[i].pid || s[i].host.len)
            snprintf(b, sizeof b, "pid %" PRIu32 " on %.*s", s[i].pid, (int)s[i].host.len,
                     s[i].host.ptr);
        r->who = gmp_doc_cstr(d, b);
        if (!r->label || !r->who)
            r->label = r->who = "";
        r->device = -2;
        for (size_t k = 0; k < s[i].ndevices; k++) {
            const gmp_rank_device *dv = &s[i].devices[k];
            if (!gmp_report_wanted(v, dv->id))
                continue;
            if (dv->peak_allocated_bytes > r->peak || r->device == -2) {
                r->peak = dv->peak_allocated_bytes;
                r->reserved = dv->peak_reserved_bytes;
                r->peak_ns = dv->peak_allocated_ns;
                r->device = dv->id;
            }
            r->leaked += dv->leaked_bytes;
            r->ooms += dv->ooms;
        }
        r->top_ok = r->peak && r->device == s[i].peak_device;
        pk[i] = r->peak;
        gr[i] = s[i].growth_bytes;
    }
    qsort(rv, n, sizeof *rv, rview_cmp);
    double median = median_u64(pk, n);
    double gmed = median_i64(gr, n);
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_doc_linef(d, &root->title, "gpumemprof report");
    gmp_doc_block *kv = gmp_doc_kv(d, root);
    gmp_doc_item_add(d, kv, "schema", GMP_DOC_DATA, "%v",
                     K(gmp_dv_lit(GMP_RANKS_SCHEMA), "schema"));
    if (nranked == n)
        gmp_doc_item_add(d, kv, "ranks", 0, "%v trace%v, each with its rank recorded",
                         K(gmp_dv_count(n), "traces"), gmp_dv_lit(n == 1 ? "" : "s"));
    else
        gmp_doc_item_add(d, kv, "ranks", 0,
                         "%v trace%v, %v with a rank recorded (the others ranked by their place "
                         "on the command line)",
                         K(gmp_dv_count(n), "traces"), gmp_dv_lit(n == 1 ? "" : "s"),
                         gmp_dv_count(nranked));
    gmp_doc_item_add(d, kv, "ranks recorded", GMP_DOC_DATA, "%v",
                     K(gmp_dv_count(nranked), "ranks_recorded"));
    gmp_doc_item_add(
        d, kv, "median peak", 0, "%v, median growth %v",
        K(gmp_dv_bytes(round_u(median)), "median_peak_bytes"),
        K(gmp_dv_sbytes((int64_t)(gmed >= 0 ? gmed + 0.5 : gmed - 0.5)), "median_growth_bytes"));

    /* an OOM across ranks compared: its finding opens the view, as findings open every report */
    if (oom && oom->cmp && oom->finding)
        oom->finding(d, gmp_doc_section(d, root, NULL, 0, "Findings"), oom->cmp);

    /* the outliers */
    gmp_doc_block *os = gmp_doc_section(d, root, "outliers", 0, "Outliers");
    size_t imax = 0;
    for (size_t i = 1; i < n; i++)
        if (rv[i].peak > rv[imax].peak)
            imax = i;
    const rview *h = &rv[imax];
    if (h->peak) {
        gmp_doc_block *b = gmp_doc_verdict(
            d, os, "heaviest", GMP_DOC_INFO, "heaviest: rank %v (%v, %v) peaks at %v on device %v",
            K(gmp_dv_int(h->rank), "rank"), K(who(h), "process"),
            K(gmp_dv_str(h->s->path, ""), "path"), K(gmp_dv_bytes(h->peak), "peak_allocated_bytes"),
            K(gmp_dv_device(h->device), "device"));
        if (median > 0)
            gmp_doc_linef(d, &b->title, ", %vx the median %v",
                          K(gmp_dv_real((double)h->peak / median), "times_median"),
                          gmp_dv_bytes(round_u(median)));
        if (h->top_ok) /* what held the peak is known for the device of the summary's peak */
            gmp_doc_linef(
                d, &b->title, "; most of it %v %v (%v)",
                gmp_dv_lit(h->s->top_is_frame ? "at" : "in"),
                K(gmp_dv_str(h->s->top, h->s->top_is_frame ? "(no stack recorded)" : "(no range)"),
                  "top"),
                K(gmp_dv_bytes(h->s->top_bytes), "top_bytes"));
    }
    size_t nheavy = 0, noom = 0, ngrow = 0;
    for (size_t i = 0; i < n; i++) {
        const rview *r = &rv[i];
        if (!(n >= 2 && median > 0 && (double)r->peak > HEAVY_FACTOR * median))
            continue;
        nheavy++;
        gmp_doc_block *b = gmp_doc_verdict(d, os, "heavy", GMP_DOC_WARNING,
                                           "heavy: rank %v (%v, %v) peaks at %v, %vx the median %v",
                                           K(gmp_dv_int(r->rank), "rank"), K(who(r), "process"),
                                           K(gmp_dv_str(r->s->path, ""), "path"),
                                           K(gmp_dv_bytes(r->peak), "peak_allocated_bytes"),
                                           K(gmp_dv_real((double)r->peak / median), "times_median"),
                                           gmp_dv_bytes(round_u(median)));
        b->flags |= GMP_DOC_ITEM;
    }
    if (!nheavy)
        gmp_doc_table(d, os, "heavy", NULL, 0)->flags |= GMP_DOC_DATA; /* `heavy: []` */
    /* OOMs: earliest first on the wall clock when every such trace has one, else by rank */
    size_t *oi = calloc(n ? n : 1, sizeof *oi);
    for (size_t i = 0; oi && i < n; i++)
        if (rv[i].ooms)
            oi[noom++] = i;
    int walls = 1;
    for (size_t j = 0; oi && j < noom; j++)
        walls &= rv[oi[j]].s->start_wall_ns != 0;
    for (size_t j = 1; oi && walls && j < noom; j++) /* insertion sort: stable */
        for (size_t q = j; q > 0; q--) {
            const gmp_rank_summary *x = rv[oi[q - 1]].s, *y = rv[oi[q]].s;
            if (x->start_wall_ns + x->first_oom_ns <= y->start_wall_ns + y->first_oom_ns)
                break;
            size_t t = oi[q];
            oi[q] = oi[q - 1];
            oi[q - 1] = t;
        }
    for (size_t j = 0; oi && j < noom; j++) {
        const rview *r = &rv[oi[j]];
        gmp_doc_block *b = gmp_doc_verdict(
            d, os, "oom", GMP_DOC_PROBLEM,
            "out of memory: rank %v (%v, %v): %v OOM%v, the first at %v on device %v (%v "
            "requested); its peak %v, the median %v",
            K(gmp_dv_int(r->rank), "rank"), K(who(r), "process"),
            K(gmp_dv_str(r->s->path, ""), "path"), K(gmp_dv_count(r->ooms), "ooms"),
            gmp_dv_lit(r->ooms == 1 ? "" : "s"),
            K(gmp_dv_time(r->s->first_oom_ns, 0), "first_oom_ns"),
            K(gmp_dv_device(r->s->first_oom_device), "device"),
            K(gmp_dv_bytes(r->s->first_oom_requested), "requested_bytes"),
            K(gmp_dv_bytes(r->peak), "peak_allocated_bytes"), gmp_dv_bytes(round_u(median)));
        b->flags |= GMP_DOC_ITEM;
        if (walls && j == 0 && noom > 1)
            gmp_doc_notice(d, b, NULL, GMP_DOC_INFO, "the first rank to run out (wall clock)");
    }
    free(oi);
    if (!noom)
        gmp_doc_table(d, os, "oom", NULL, 0)->flags |= GMP_DOC_DATA;
    for (size_t i = 0; i < n; i++) {
        const rview *r = &rv[i];
        int64_t g = r->s->growth_bytes;
        if (!(n >= 2 && g > 0 && (double)g > GROWTH_FACTOR * (gmed > 0 ? gmed : 0) &&
              (double)g - gmed >= (double)GROWTH_MIN))
            continue;
        ngrow++;
        gmp_doc_block *b = gmp_doc_verdict(
            d, os, "growth", GMP_DOC_WARNING,
            "growth: rank %v (%v, %v) grows by %v over %v repetitions of %v; the median rank by "
            "%v",
            K(gmp_dv_int(r->rank), "rank"), K(who(r), "process"),
            K(gmp_dv_str(r->s->path, ""), "path"), K(gmp_dv_sbytes(g), "growth_bytes"),
            K(gmp_dv_count(r->s->growth_repetitions), "repetitions"),
            K(gmp_dv_str(r->s->growth_range, "(no name)"), "range"),
            K(gmp_dv_sbytes((int64_t)(gmed >= 0 ? gmed + 0.5 : gmed - 0.5)),
              "median_growth_bytes"));
        b->flags |= GMP_DOC_ITEM;
    }
    if (!ngrow)
        gmp_doc_table(d, os, "growth", NULL, 0)->flags |= GMP_DOC_DATA;
    if (!nheavy && !noom && !ngrow)
        gmp_doc_notice(d, os, NULL, GMP_DOC_OK,
                       "no rank stands out: no OOM, no peak above %vx the median, no growth "
                       "above %vx the median",
                       gmp_dv_real(HEAVY_FACTOR), gmp_dv_real(GROWTH_FACTOR));

    if (brief) { /* the short form ends with the outliers */
        gmp_doc_notice(d, root, NULL, GMP_DOC_INFO,
                       "the table of the %v ranks and each range's spread across them: "
                       "gpumemprof report",
                       gmp_dv_count(n));
        goto done;
    }
    /* an OOM across ranks: the failing rank beside the healthy ones (computed by the caller, which
     * reads those traces again), or the one line saying why it is not there */
    if (oom && oom->cmp && oom->section)
        oom->section(d, root, oom->cmp);
    else if (oom && oom->note)
        gmp_doc_notice(d, os, "ranks_oom_note", GMP_DOC_INFO, "%v",
                       gmp_dv_str(gmp_doc_strdup(d, oom->note, strlen(oom->note)), ""));

    /* the table of ranks */
    static const gmp_doc_col cols[] = {
        {"rank", "rank", GMP_DOC_INT, 0},
        {"rank from", "rank_source", GMP_DOC_LIT, GMP_DOC_DATA},
        {"process", "label", GMP_DOC_STR, GMP_DOC_DATA},
        {"host", "host", GMP_DOC_STR, 0},
        {"pid", "pid", GMP_DOC_COUNT, 0},
        {"local rank", "local_rank", GMP_DOC_INT, GMP_DOC_DATA},
        {"world size", "world_size", GMP_DOC_INT, GMP_DOC_DATA},
        {"device", "peak_device", GMP_DOC_DEVICE, 0},
        {"peak allocated", "peak_allocated_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"vs median", "vs_median_pct", GMP_DOC_PCT, GMP_DOC_SIGN},
        {"peak reserved", "peak_reserved_bytes", GMP_DOC_BYTES, 0},
        {"at", "peak_time_ns", GMP_DOC_TIME, 0},
        {"OOMs", "ooms", GMP_DOC_COUNT, 0},
        {"leaked", "leaked_bytes", GMP_DOC_BYTES, 0},
        {"growth", "growth_bytes", GMP_DOC_SBYTES, 0},
        {"most of it", "top", GMP_DOC_STR, GMP_DOC_DATA},
        {"bytes", "top_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"events", "events", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"complete", "complete", GMP_DOC_BOOL, GMP_DOC_DATA},
        {"trace", "path", GMP_DOC_STR, 0},
    };
    gmp_doc_block *rs_ = gmp_doc_section(d, root, NULL, 0, "Ranks");
    /* local rank, world size: each shown in every format when a trace recorded it (JSON:
     * always, -1 when not recorded) */
    gmp_doc_col shown[sizeof cols / sizeof cols[0]];
    memcpy(shown, cols, sizeof cols);
    for (size_t i = 0; i < n; i++) {
        if (s[i].local_rank >= 0)
            shown[5].flags &= ~(unsigned)GMP_DOC_DATA;
        if (s[i].world_size > 0)
            shown[6].flags &= ~(unsigned)GMP_DOC_DATA;
    }
    gmp_doc_block *tb = gmp_doc_table(d, rs_, "ranks", shown, sizeof cols / sizeof cols[0]);
    for (size_t i = 0; i < n; i++) {
        const rview *r = &rv[i];
        const gmp_rank_summary *q = r->s;
        int heavy = n >= 2 && median > 0 && (double)r->peak > HEAVY_FACTOR * median;
        gmp_doc_val *c = gmp_doc_row(d, tb);
        c[0] = gmp_dv_int(r->rank);
        c[1] = gmp_dv_lit(q->rank_source == GMP_RANK_FROM_TRACE ? "trace" : "order");
        c[2] = lab(r);
        c[3] = gmp_dv_str(q->host, "");
        c[4] = q->pid || q->host.len ? gmp_dv_count(q->pid) : gmp_dv_none();
        c[5] = gmp_dv_int(q->local_rank);
        c[6] = gmp_dv_int(q->world_size);
        c[7] = r->device >= -1 ? gmp_dv_device(r->device) : gmp_dv_none();
        c[8] = gmp_dv_bytes(r->peak);
        c[9] = median > 0 ? gmp_dv_f(gmp_dv_pct(100.0 * ((double)r->peak - median) / median),
                                     heavy ? GMP_DOC_BAD | GMP_DOC_SIGN : GMP_DOC_SIGN)
                          : gmp_dv_none();
        c[10] = gmp_dv_bytes(r->reserved);
        c[11] = r->peak ? gmp_dv_time(r->peak_ns, 0) : gmp_dv_none();
        c[12] = r->ooms ? gmp_dv_f(gmp_dv_count(r->ooms), GMP_DOC_BAD) : gmp_dv_count(0);
        c[13] = q->end == GMP_REPORT_END_EXIT ? gmp_dv_bytes(r->leaked) : gmp_dv_none();
        c[14] = gmp_dv_sbytes(q->growth_bytes);
        c[15] = r->top_ok ? gmp_dv_str(q->top, "") : gmp_dv_none();
        c[16] = r->top_ok ? gmp_dv_bytes(q->top_bytes) : gmp_dv_none();
        c[17] = gmp_dv_count(q->events);
        c[18] = gmp_dv_bool(q->complete);
        c[19] = gmp_dv_str(q->path, "");
    }
    /* every device of every rank (JSON only) */
    static const gmp_doc_col dcols[] = {
        {"rank", "rank", GMP_DOC_INT, 0},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"name", "name", GMP_DOC_STR, 0},
        {"total", "total_bytes", GMP_DOC_BYTES, 0},
        {"peak allocated", "peak_allocated_bytes", GMP_DOC_BYTES, 0},
        {"at", "peak_allocated_ns", GMP_DOC_TIME, 0},
        {"peak reserved", "peak_reserved_bytes", GMP_DOC_BYTES, 0},
        {"allocations", "allocs", GMP_DOC_COUNT, 0},
        {"OOMs", "ooms", GMP_DOC_COUNT, 0},
        {"leaked", "leaked_bytes", GMP_DOC_BYTES, 0},
        {"unexplained", "unexplained_max_bytes", GMP_DOC_BYTES, 0},
    };
    gmp_doc_block *dt = gmp_doc_table(d, rs_, "devices", dcols, sizeof dcols / sizeof dcols[0]);
    dt->flags |= GMP_DOC_DATA;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rv[i].s->ndevices; k++) {
            const gmp_rank_device *dv = &rv[i].s->devices[k];
            if (!gmp_report_wanted(v, dv->id))
                continue;
            gmp_doc_val *c = gmp_doc_row(d, dt);
            c[0] = gmp_dv_int(rv[i].rank);
            c[1] = gmp_dv_device(dv->id);
            c[2] = gmp_dv_str(dv->name, "");
            c[3] = gmp_dv_bytes(dv->total_bytes);
            c[4] = gmp_dv_bytes(dv->peak_allocated_bytes);
            c[5] = gmp_dv_time(dv->peak_allocated_ns, 0);
            c[6] = gmp_dv_bytes(dv->peak_reserved_bytes);
            c[7] = gmp_dv_count(dv->allocs);
            c[8] = gmp_dv_count(dv->ooms);
            c[9] = rv[i].s->end == GMP_REPORT_END_EXIT ? gmp_dv_bytes(dv->leaked_bytes)
                                                       : gmp_dv_none();
            c[10] = gmp_dv_bytes(dv->unexplained_max_bytes);
        }
    ranges_table(d, rv, n, v);
done:
    free(rv);
    free(pk);
    free(gr);
    if (gmp_doc_error(d) != GMP_OK) {
        gmp_doc_free(d);
        return NULL;
    }
    return d;
}
