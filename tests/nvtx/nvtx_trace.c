/* nvtx_trace: see nvtx_trace.h. */
#include "nvtx_trace.h"

#include <string.h>
#include <zstd.h>

#include "gmp_codec.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long sz = ftell(f);
    CHECK(sz >= 0);
    CHECK(fseek(f, 0, SEEK_SET) == 0);
    uint8_t *p = malloc((size_t)sz + 1);
    CHECK(p != NULL);
    CHECK(fread(p, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return p;
}

void ntrace_load(const char *path, ntrace *t)
{
    memset(t, 0, sizeof *t);
    size_t n;
    uint8_t *src = slurp(path, &n);
    size_t cap = 1 << 20, len = 0;
    uint8_t *raw = malloc(cap);
    CHECK(raw != NULL);
    for (size_t off = 0; off < n;) {
        size_t fs = ZSTD_findFrameCompressedSize(src + off, n - off);
        CHECK(!ZSTD_isError(fs));
        unsigned long long cs = ZSTD_getFrameContentSize(src + off, fs);
        CHECK(cs != ZSTD_CONTENTSIZE_ERROR && cs != ZSTD_CONTENTSIZE_UNKNOWN);
        while (cap - len < cs) {
            cap *= 2;
            raw = realloc(raw, cap);
            CHECK(raw != NULL);
        }
        size_t k = ZSTD_decompress(raw + len, cap - len, src + off, fs);
        CHECK(!ZSTD_isError(k));
        len += k;
        off += fs;
    }
    free(src);
    CHECK(len >= GMP_TRACE_MAGIC_LEN && memcmp(raw, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN) == 0);
    size_t rcap = 1024;
    t->recs = malloc(rcap * sizeof *t->recs);
    CHECK(t->recs != NULL);
    uint64_t prev = 0;
    uint32_t tid = UINT32_MAX;
    for (size_t pos = GMP_TRACE_MAGIC_LEN; pos < len;) {
        if (t->n == rcap) {
            rcap *= 2;
            t->recs = realloc(t->recs, rcap * sizeof *t->recs);
            CHECK(t->recs != NULL);
        }
        gmp_rec *r = &t->recs[t->n];
        size_t used;
        const char *msg = NULL;
        gmp_err e = gmp_decode(raw + pos, len - pos, r, &prev, &used, &msg);
        if (e != GMP_OK)
            fprintf(stderr, "decode error at %zu: %s\n", pos, msg ? msg : "?");
        CHECK(e == GMP_OK);
        if (r->type == GMP_REC_BUFFER)
            tid = r->u.buffer.tid;
        r->tid = tid;
        pos += used;
        t->n++;
        /* definitions before use */
        if (r->type == GMP_REC_STRING) {
            uint32_t id = r->u.string.id;
            if (id >= t->nstrs) {
                size_t nn = (size_t)id * 2 + 16;
                t->strs = realloc(t->strs, nn * sizeof *t->strs);
                CHECK(t->strs != NULL);
                memset(t->strs + t->nstrs, 0, (nn - t->nstrs) * sizeof *t->strs);
                t->nstrs = nn;
            }
            CHECK(t->strs[id].ptr == NULL); /* defined once */
            t->strs[id] = r->u.string.value;
            if (!t->strs[id].ptr)
                t->strs[id].ptr = "";
        } else if (r->type == GMP_REC_RANGE) {
            const gmp_rec_range *g = &r->u.range;
            CHECK(g->parent == 0 || ntrace_range(t, g->parent) != NULL);
            CHECK(g->domain == 0 || (g->domain < t->nstrs && t->strs[g->domain].ptr));
            CHECK(g->name == 0 || (g->name < t->nstrs && t->strs[g->name].ptr));
            if (g->id >= t->nranges) {
                size_t nn = (size_t)g->id * 2 + 16;
                t->ranges = realloc(t->ranges, nn * sizeof *t->ranges);
                CHECK(t->ranges != NULL);
                memset(t->ranges + t->nranges, 0, (nn - t->nranges) * sizeof *t->ranges);
                t->nranges = nn;
            }
            CHECK(t->ranges[g->id].id == 0);
            t->ranges[g->id] = *g;
        } else if (r->type == GMP_REC_RANGE_PUSH || r->type == GMP_REC_RANGE_POP ||
                   r->type == GMP_REC_RANGE_START || r->type == GMP_REC_MARK) {
            CHECK(ntrace_range(t, r->u.rev.range) != NULL);
        } else if (r->type == GMP_REC_ALLOC || r->type == GMP_REC_FREE) {
            CHECK(r->u.mem.range == 0 || ntrace_range(t, r->u.mem.range) != NULL);
            CHECK(r->u.mem.api < t->nstrs && t->strs[r->u.mem.api].ptr);
        } else if (r->type == GMP_REC_LOST) {
            t->lost += r->u.lost.count;
        } else if (r->type == GMP_REC_END) {
            t->has_end = 1;
            t->end = r->u.end;
        }
    }
    t->raw = raw;
}

void ntrace_free(ntrace *t)
{
    free(t->recs);
    free(t->raw);
    free(t->strs);
    free(t->ranges);
    memset(t, 0, sizeof *t);
}

const gmp_rec_range *ntrace_range(ntrace *t, uint32_t id)
{
    if (id == 0 || id >= t->nranges || t->ranges[id].id != id)
        return NULL;
    return &t->ranges[id];
}

#define NBUFS 16
static char *g_bufs[NBUFS];
static unsigned g_next;

static char *scratch(size_t n)
{
    unsigned i = g_next++ % NBUFS;
    free(g_bufs[i]);
    g_bufs[i] = malloc(n);
    CHECK(g_bufs[i] != NULL);
    return g_bufs[i];
}

const char *ntrace_str(ntrace *t, uint32_t id)
{
    if (id == 0)
        return "";
    CHECK(id < t->nstrs && t->strs[id].ptr);
    char *s = scratch(t->strs[id].len + 1);
    memcpy(s, t->strs[id].ptr, t->strs[id].len);
    s[t->strs[id].len] = '\0';
    return s;
}

const char *ntrace_path(ntrace *t, uint32_t id)
{
    const gmp_rec_range *chain[300];
    size_t k = 0, total = 1;
    for (const gmp_rec_range *g = ntrace_range(t, id); g; g = ntrace_range(t, g->parent)) {
        CHECK(k < 300);
        chain[k++] = g;
        total +=
            (g->name ? t->strs[g->name].len : 0) + 1 + (g->domain ? t->strs[g->domain].len + 1 : 0);
    }
    char *s = scratch(total), *o = s;
    while (k--) {
        const gmp_rec_range *g = chain[k];
        if (g->domain) {
            memcpy(o, t->strs[g->domain].ptr, t->strs[g->domain].len);
            o += t->strs[g->domain].len;
            *o++ = ':';
        }
        if (g->name) {
            memcpy(o, t->strs[g->name].ptr, t->strs[g->name].len);
            o += t->strs[g->name].len;
        }
        if (k)
            *o++ = '/';
    }
    *o = '\0';
    return s;
}
