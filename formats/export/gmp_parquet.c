/* gmp_parquet: the Parquet writer of `convert --parquet` (gmp_parquet.h), from the Apache Parquet
 * specification, github.com/apache/parquet-format:
 *   - file layout: "PAR1", the column chunks of each row group, the FileMetaData, its length as
 *     4 bytes little endian, "PAR1" (README.md, "File Format");
 *   - the metadata structures and their field ids: src/main/thrift/parquet.thrift (cited below as
 *     Struct.field = id), serialized with Thrift's compact protocol (github.com/apache/thrift,
 *     doc/specs/thrift-compact-protocol.md), whose encoder is the few functions of "thrift" below;
 *   - PLAIN, RLE_DICTIONARY and the RLE/bit-packing hybrid (definition levels, dictionary
 *     indices): Encodings.md;
 *   - data page v1: the definition levels (4-byte length, then the hybrid; no repetition levels in
 *     a flat schema) then the values, the whole compressed together (zstd: Compression.md, ZSTD =
 *     6, a plain zstd frame).
 * Only what `convert --parquet` needs is written: no nesting, no page index, no Bloom filter. */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gmp_escape.h"
#include "gmp_intern.h"
#include "gmp_output.h"
#include "gmp_parquet.h"

/* parquet.thrift enums */
enum { PT_BOOLEAN = 0, PT_INT32 = 1, PT_INT64 = 2, PT_BYTE_ARRAY = 6 }; /* Type */
enum { ENC_PLAIN = 0, ENC_RLE = 3, ENC_RLE_DICTIONARY = 8 };            /* Encoding */
enum { CODEC_ZSTD = 6 };                                                /* CompressionCodec */
enum { PAGE_DATA = 0, PAGE_DICTIONARY = 2 };                            /* PageType */
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1 };                            /* FieldRepetitionType */
enum { CONVERTED_UTF8 = 0 };                                            /* ConvertedType */

/* ---- thrift compact protocol: field header = (id delta << 4) | type when the delta is 1..15,
 * else the type then the id as a zigzag varint; integers zigzag varints; binary a varint length
 * then the bytes; a bool field's value is its type (1 true, 2 false); a list header (size << 4) |
 * element type, or 0xf0 | type then the size as a varint; a struct ends with a 0 byte ---- */

enum { CT_I16 = 4, CT_I32 = 5, CT_I64 = 6, CT_BINARY = 8, CT_LIST = 9, CT_STRUCT = 12 };

typedef struct thrift {
    gmp_obuf *b;
    int16_t last[16]; /* the last field id written, per open struct */
    int depth;
} thrift;

static void th_byte(thrift *t, uint8_t v)
{
    char c = (char)v;
    gmp_obuf_add(t->b, &c, 1);
}

static void th_varint(thrift *t, uint64_t v)
{
    gmp_obuf_varint(t->b, v);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void th_field(thrift *t, int16_t id, uint8_t type)
{
    int d = id - t->last[t->depth];
    if (d > 0 && d <= 15) {
        th_byte(t, (uint8_t)(d << 4 | type));
    } else {
        th_byte(t, type);
        th_varint(t, zigzag(id));
    }
    t->last[t->depth] = id;
}

static void th_i32(thrift *t, int16_t id, int32_t v)
{
    th_field(t, id, CT_I32);
    th_varint(t, zigzag(v));
}

static void th_i64(thrift *t, int16_t id, int64_t v)
{
    th_field(t, id, CT_I64);
    th_varint(t, zigzag(v));
}

static void th_bin(thrift *t, int16_t id, const void *p, size_t n)
{
    th_field(t, id, CT_BINARY);
    th_varint(t, n);
    gmp_obuf_add(t->b, p, n);
}

static void th_push(thrift *t)
{
    if (t->depth + 1 < (int)(sizeof t->last / sizeof t->last[0]))
        t->depth++;
    t->last[t->depth] = 0;
}

/* a struct field: its fields follow, then th_end */
static void th_struct(thrift *t, int16_t id)
{
    th_field(t, id, CT_STRUCT);
    th_push(t);
}

static void th_end(thrift *t)
{
    th_byte(t, 0);
    if (t->depth > 0)
        t->depth--;
}

static void th_list(thrift *t, int16_t id, uint8_t elem, size_t n)
{
    th_field(t, id, CT_LIST);
    if (n < 15) {
        th_byte(t, (uint8_t)(n << 4 | elem));
    } else {
        th_byte(t, (uint8_t)(0xf0 | elem));
        th_varint(t, n);
    }
}

/* ---- the writer ---- */

#define DICT_MAX_ENTRIES 65536    /* a chunk's dictionary above this: PLAIN instead */
#define DICT_MAX_BYTES (1u << 20) /* ... or above this many PLAIN bytes */
#define STAT_MAX_BYTES 256        /* string min/max longer than this: not written */
#define PAGE_BYTES (1u << 20)     /* a data page ends after about this many value bytes */

typedef struct pq_col {
    gmp_pq_column c;
    gmp_obuf plain; /* PLAIN values of the row group (BOOL: one byte per value, packed later) */
    uint8_t *defl;  /* definition levels per row (optional columns) */
    uint32_t *idx;  /* dictionary indices per value (while dict_on) */
    size_t nrows, nvals, capdefl, capidx;
    gmp_intern dict;   /* dictionary entries (PLAIN bytes without a string's length) */
    size_t dict_plain; /* bytes of the dictionary page's PLAIN values */
    int dict_on;
    /* statistics of the row group */
    uint64_t nulls;
    int has_mm;
    int64_t imin, imax;
    gmp_obuf smin, smax;
    int str_stats; /* min/max kept (no string over STAT_MAX_BYTES) */
} pq_col;

struct gmp_pq_writer {
    FILE *f;
    gmp_pq_opts o;
    pq_col *cols;
    size_t ncols, cur;
    uint64_t pos;     /* bytes written to f */
    uint64_t rows;    /* rows in the file */
    uint64_t rg_rows; /* rows of the row group being filled */
    size_t rg_bytes;  /* its buffered bytes */
    gmp_obuf rgs;     /* the RowGroup structs written so far (list elements) */
    size_t nrg;
    gmp_obuf page, comp, hdr, tmp; /* scratch */
    uint32_t *lv;                  /* scratch: a page's levels or indices */
    size_t caplv;
    gmp_err err;
    char msg[160];
};

static void fail(gmp_pq_writer *w, gmp_err e, const char *m)
{
    if (w->err != GMP_OK)
        return;
    w->err = e;
    snprintf(w->msg, sizeof w->msg, "%s", m);
}

static void col_reset(pq_col *c)
{
    c->plain.len = 0;
    c->nrows = c->nvals = 0;
    gmp_intern_free(&c->dict);
    c->dict_plain = 0;
    c->dict_on = c->c.dict && c->c.type != GMP_PQ_BOOL;
    c->nulls = 0;
    c->has_mm = 0;
    c->smin.len = c->smax.len = 0;
    c->str_stats = 1;
}

gmp_pq_writer *gmp_pq_open(FILE *f, const gmp_pq_column *cols, size_t ncols,
                           const gmp_pq_opts *opts)
{
    if (!f || !cols || !ncols)
        return NULL;
    gmp_pq_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->f = f;
    if (opts)
        w->o = *opts;
    if (!w->o.row_group_bytes)
        w->o.row_group_bytes = 32u << 20;
    if (!w->o.page_values)
        w->o.page_values = 65536;
    if (!w->o.zstd_level)
        w->o.zstd_level = 3;
    w->cols = calloc(ncols, sizeof *w->cols);
    if (!w->cols) {
        free(w);
        return NULL;
    }
    w->ncols = ncols;
    for (size_t i = 0; i < ncols; i++) {
        w->cols[i].c = cols[i];
        col_reset(&w->cols[i]);
    }
    if (fwrite("PAR1", 1, 4, f) != 4)
        fail(w, GMP_ERR_IO, "cannot write the file");
    w->pos = 4;
    return w;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

/* The column that takes the next value, checked against what it holds; NULL (and the writer
 * failed) otherwise. */
static pq_col *next_col(gmp_pq_writer *w, gmp_pq_type type, int null)
{
    if (w->err != GMP_OK)
        return NULL;
    if (w->cur >= w->ncols) {
        fail(w, GMP_ERR_ARG, "more values than columns in a row");
        return NULL;
    }
    pq_col *c = &w->cols[w->cur++];
    if (null ? !c->c.optional : c->c.type != type) {
        fail(w, GMP_ERR_ARG, "a value does not fit its column");
        return NULL;
    }
    if (c->c.optional) {
        if (grow((void **)&c->defl, &c->capdefl, c->nrows + 1, 1)) {
            fail(w, GMP_ERR_NOMEM, "out of memory");
            return NULL;
        }
        c->defl[c->nrows] = (uint8_t)!null;
    }
    c->nrows++;
    w->rg_bytes += c->c.optional;
    if (null)
        c->nulls++;
    else
        c->nvals++;
    return c;
}

/* Adds v[0..n) (PLAIN bytes: the value, or a string's bytes) to the column's dictionary. */
static void dict_add(gmp_pq_writer *w, pq_col *c, const void *v, size_t n)
{
    if (!c->dict_on)
        return;
    uint32_t before = gmp_intern_count(&c->dict);
    uint32_t id = gmp_intern_add(&c->dict, v, n);
    if (id == UINT32_MAX) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    if (id == before)
        c->dict_plain += n + (c->c.type == GMP_PQ_STRING ? 4 : 0);
    if (gmp_intern_count(&c->dict) > DICT_MAX_ENTRIES || c->dict_plain > DICT_MAX_BYTES) {
        c->dict_on = 0; /* this chunk is written PLAIN (its values are all in c->plain) */
        w->rg_bytes -= (c->nvals - 1) * 4;
        gmp_intern_free(&c->dict);
        c->dict_plain = 0;
        return;
    }
    if (grow((void **)&c->idx, &c->capidx, c->nvals, sizeof *c->idx)) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    c->idx[c->nvals - 1] = id;
    w->rg_bytes += 4;
}

/* gmp_obuf_add without its call when there is room (the buffer keeps a NUL after its bytes) */
static inline void ob_add(gmp_obuf *b, const void *p, size_t n)
{
    if (b->p && b->cap - b->len > n) {
        memcpy(b->p + b->len, p, n);
        b->len += n;
        b->p[b->len] = '\0';
    } else {
        gmp_obuf_add(b, p, n);
    }
}

static inline void put_le(gmp_obuf *b, uint64_t v, size_t n)
{
    char t[8];
    for (size_t i = 0; i < n; i++)
        t[i] = (char)(v >> (8 * i));
    ob_add(b, t, n);
}

static void int_value(gmp_pq_writer *w, gmp_pq_type type, int64_t v)
{
    pq_col *c = next_col(w, type, 0);
    if (!c)
        return;
    size_t n = type == GMP_PQ_INT32 ? 4 : type == GMP_PQ_INT64 ? 8 : 1;
    size_t at = c->plain.len;
    put_le(&c->plain, (uint64_t)v, n);
    if (c->plain.oom) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    w->rg_bytes += n;
    if (!c->has_mm || v < c->imin)
        c->imin = v;
    if (!c->has_mm || v > c->imax)
        c->imax = v;
    c->has_mm = 1;
    dict_add(w, c, c->plain.p + at, n);
}

void gmp_pq_i64(gmp_pq_writer *w, int64_t v)
{
    int_value(w, GMP_PQ_INT64, v);
}

void gmp_pq_i32(gmp_pq_writer *w, int32_t v)
{
    int_value(w, GMP_PQ_INT32, v);
}

void gmp_pq_bool(gmp_pq_writer *w, int v)
{
    int_value(w, GMP_PQ_BOOL, v ? 1 : 0);
}

void gmp_pq_null(gmp_pq_writer *w)
{
    next_col(w, GMP_PQ_INT64, 1);
}

/* unsigned byte-wise order (the STRING logical type's) */
static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int r = memcmp(a, b, an < bn ? an : bn);
    return r ? r : (an > bn) - (an < bn);
}

void gmp_pq_str(gmp_pq_writer *w, const char *s, size_t n)
{
    pq_col *c = next_col(w, GMP_PQ_STRING, 0);
    if (!c)
        return;
    if (!s)
        n = 0;
    /* valid UTF-8 of at most GMP_PQ_MAX_STRING bytes: an invalid byte as its Latin-1 character */
    gmp_obuf *u = &w->tmp;
    u->len = 0;
    if (n <= GMP_PQ_MAX_STRING && gmp_utf8_valid(s, n)) { /* the common case: as it is */
        ob_add(u, s ? s : "", n);
        n = 0;
    }
    for (size_t i = 0; i < n;) {
        size_t k = gmp_utf8_seq_len((const unsigned char *)s + i, n - i);
        char two[2];
        const char *p = s + i;
        if (k) {
            i += k;
        } else {
            unsigned char b = (unsigned char)s[i++];
            two[0] = (char)(0xc0 | (b >> 6));
            two[1] = (char)(0x80 | (b & 0x3f));
            p = two;
            k = 2;
        }
        if (u->len + k > GMP_PQ_MAX_STRING)
            break;
        gmp_obuf_add(u, p, k);
    }
    size_t at = c->plain.len;
    put_le(&c->plain, u->len, 4);
    ob_add(&c->plain, u->p ? u->p : "", u->len);
    if (c->plain.oom || u->oom) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    w->rg_bytes += 4 + u->len;
    const char *v = c->plain.p + at + 4;
    if (c->str_stats) {
        if (u->len > STAT_MAX_BYTES) {
            c->str_stats = 0;
        } else {
            if (!c->has_mm || bytes_cmp(v, u->len, c->smin.p, c->smin.len) < 0) {
                c->smin.len = 0;
                gmp_obuf_add(&c->smin, v, u->len);
            }
            if (!c->has_mm || bytes_cmp(v, u->len, c->smax.p, c->smax.len) > 0) {
                c->smax.len = 0;
                gmp_obuf_add(&c->smax, v, u->len);
            }
            if (c->smin.oom || c->smax.oom)
                fail(w, GMP_ERR_NOMEM, "out of memory");
        }
    }
    c->has_mm = 1;
    dict_add(w, c, v, u->len);
}

/* ---- encodings ---- */

/* The RLE/bit-packing hybrid (Encodings.md) of v[0..n) at bit width bw (1..32), without a length:
 * a run of 8 or more equal values is an RLE run (header run << 1, the value in ceil(bw / 8)
 * bytes); other values go in bit-packed runs of groups of 8 (header groups << 1 | 1, values packed
 * from the least significant bit), the last group padded with zeros. */
static void hybrid(gmp_obuf *b, const uint32_t *v, size_t n, int bw)
{
    thrift t = {b, {0}, 0};
    size_t i = 0;
    while (i < n) {
        size_t r = 1;
        while (i + r < n && v[i + r] == v[i])
            r++;
        if (r >= 8) {
            th_varint(&t, (uint64_t)r << 1);
            put_le(b, v[i], (size_t)(bw + 7) / 8);
            i += r;
            continue;
        }
        size_t j = i; /* groups of 8 until a long run starts at a group's boundary */
        while (j < n) {
            j += 8;
            if (j >= n)
                break;
            size_t rr = 1;
            while (j + rr < n && rr < 8 && v[j + rr] == v[j])
                rr++;
            if (rr >= 8)
                break;
        }
        size_t end = j < n ? j : n, groups = (j - i) / 8;
        th_varint(&t, (uint64_t)groups << 1 | 1);
        uint64_t acc = 0;
        int nb = 0;
        for (size_t k = i; k < i + groups * 8; k++) {
            acc |= (uint64_t)(k < end ? v[k] : 0) << nb;
            nb += bw;
            while (nb >= 8) {
                char c = (char)(acc & 0xff);
                gmp_obuf_add(b, &c, 1);
                acc >>= 8;
                nb -= 8;
            }
        }
        i = end;
    }
}

static int bit_width(uint64_t max)
{
    int bw = 1;
    while (bw < 32 && (max >> bw))
        bw++;
    return bw;
}

/* Compresses w->page into w->comp and writes a page header + the compressed bytes. ph writes the
 * type-specific header. Returns the bytes written (header included), adds to *unc the
 * uncompressed size (header included). */
static uint64_t write_page(gmp_pq_writer *w, int type, uint32_t num_values, int encoding,
                           uint64_t *unc)
{
    gmp_obuf *pg = &w->page, *cp = &w->comp;
    size_t bound = ZSTD_compressBound(pg->len);
    if (pg->oom || pg->len > INT32_MAX) {
        fail(w, pg->oom ? GMP_ERR_NOMEM : GMP_ERR_LIMIT, "a page is too large");
        return 0;
    }
    if (cp->cap < bound) {
        char *np = realloc(cp->p, bound);
        if (!np) {
            fail(w, GMP_ERR_NOMEM, "out of memory");
            return 0;
        }
        cp->p = np;
        cp->cap = bound;
    }
    size_t cn = ZSTD_compress(cp->p, bound, pg->p ? pg->p : "", pg->len, w->o.zstd_level);
    if (ZSTD_isError(cn)) {
        fail(w, GMP_ERR_NOMEM, "zstd could not compress a page");
        return 0;
    }
    w->hdr.len = 0;
    thrift t = {&w->hdr, {0}, 0};
    /* PageHeader: type = 1, uncompressed_page_size = 2, compressed_page_size = 3 */
    th_i32(&t, 1, type);
    th_i32(&t, 2, (int32_t)pg->len);
    th_i32(&t, 3, (int32_t)cn);
    if (type == PAGE_DATA) {
        /* PageHeader.data_page_header = 5: DataPageHeader num_values = 1, encoding = 2,
         * definition_level_encoding = 3, repetition_level_encoding = 4 */
        th_struct(&t, 5);
        th_i32(&t, 1, (int32_t)num_values);
        th_i32(&t, 2, encoding);
        th_i32(&t, 3, ENC_RLE);
        th_i32(&t, 4, ENC_RLE);
        th_end(&t);
    } else {
        /* PageHeader.dictionary_page_header = 7: DictionaryPageHeader num_values = 1,
         * encoding = 2 (PLAIN) */
        th_struct(&t, 7);
        th_i32(&t, 1, (int32_t)num_values);
        th_i32(&t, 2, ENC_PLAIN);
        th_end(&t);
    }
    th_end(&t);
    if (w->hdr.oom) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (fwrite(w->hdr.p, 1, w->hdr.len, w->f) != w->hdr.len ||
        (cn && fwrite(cp->p, 1, cn, w->f) != cn)) {
        fail(w, GMP_ERR_IO, "cannot write the file");
        return 0;
    }
    w->pos += w->hdr.len + cn;
    *unc += w->hdr.len + pg->len;
    return w->hdr.len + cn;
}

static int need_lv(gmp_pq_writer *w, size_t n)
{
    if (grow((void **)&w->lv, &w->caplv, n ? n : 1, sizeof *w->lv)) {
        fail(w, GMP_ERR_NOMEM, "out of memory");
        return -1;
    }
    return 0;
}

static int physical(gmp_pq_type t)
{
    return t == GMP_PQ_BOOL    ? PT_BOOLEAN
           : t == GMP_PQ_INT32 ? PT_INT32
           : t == GMP_PQ_INT64 ? PT_INT64
                               : PT_BYTE_ARRAY;
}

/* Writes one column chunk of the row group and appends its ColumnChunk to the RowGroup being
 * built in t. */
static void write_chunk(gmp_pq_writer *w, pq_col *c, thrift *t, uint64_t *rg_unc, uint64_t *rg_comp)
{
    uint64_t unc = 0, comp = 0, dict_off = 0, data_off;
    int dict = c->dict_on && gmp_intern_count(&c->dict) > 0;
    if (dict) { /* the dictionary page: its entries PLAIN */
        dict_off = w->pos;
        w->page.len = 0;
        uint32_t nd = gmp_intern_count(&c->dict);
        for (uint32_t i = 0; i < nd; i++) {
            size_t l;
            const char *p = gmp_intern_get(&c->dict, i, &l);
            if (c->c.type == GMP_PQ_STRING)
                put_le(&w->page, l, 4);
            gmp_obuf_add(&w->page, p, l);
        }
        comp += write_page(w, PAGE_DICTIONARY, nd, ENC_PLAIN, &unc);
    }
    data_off = w->pos;
    int bw = dict ? bit_width(gmp_intern_count(&c->dict) - 1) : 0;
    size_t vi = 0, off = 0; /* the next value's index, its offset in plain */
    for (size_t r0 = 0; r0 < c->nrows && w->err == GMP_OK;) {
        /* a page: at most page_values rows and about PAGE_BYTES of values */
        size_t nr = 0, nv = 0, start = off;
        while (r0 + nr < c->nrows && nr < w->o.page_values && off - start < PAGE_BYTES) {
            if (!c->c.optional || c->defl[r0 + nr]) {
                if (c->c.type == GMP_PQ_STRING) {
                    const unsigned char *q = (const unsigned char *)c->plain.p + off;
                    off += 4 + ((size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 |
                                (size_t)q[3] << 24);
                } else {
                    off += c->c.type == GMP_PQ_INT32 ? 4 : c->c.type == GMP_PQ_INT64 ? 8 : 1;
                }
                nv++;
            }
            nr++;
        }
        w->page.len = 0;
        if (c->c.optional) { /* definition levels: 4-byte length, then the hybrid at width 1 */
            if (need_lv(w, nr))
                return;
            for (size_t k = 0; k < nr; k++)
                w->lv[k] = c->defl[r0 + k];
            put_le(&w->page, 0, 4);
            size_t at = w->page.len;
            hybrid(&w->page, w->lv, nr, 1);
            if (!w->page.oom) {
                uint32_t l = (uint32_t)(w->page.len - at);
                for (int k = 0; k < 4; k++)
                    w->page.p[at - 4 + k] = (char)(l >> (8 * k));
            }
        }
        if (dict) { /* the bit width in one byte, then the indices' hybrid */
            char b = (char)bw;
            gmp_obuf_add(&w->page, &b, 1);
            hybrid(&w->page, c->idx + vi, nv, bw);
        } else if (c->c.type == GMP_PQ_BOOL) { /* bit-packed, least significant bit first */
            for (size_t k = 0; k < nv; k += 8) {
                char b = 0;
                for (size_t j = 0; j < 8 && k + j < nv; j++)
                    b |= (char)((c->plain.p[start + k + j] & 1) << j);
                gmp_obuf_add(&w->page, &b, 1);
            }
        } else if (off > start) {
            gmp_obuf_add(&w->page, c->plain.p + start, off - start);
        }
        vi += nv;
        comp += write_page(w, PAGE_DATA, (uint32_t)nr, dict ? ENC_RLE_DICTIONARY : ENC_PLAIN, &unc);
        r0 += nr;
    }
    *rg_unc += unc;
    *rg_comp += comp;
    /* ColumnChunk: file_offset = 2 (0: no metadata outside the footer), meta_data = 3 */
    th_push(t);
    th_i64(t, 2, 0);
    th_struct(t, 3);
    /* ColumnMetaData: type = 1, encodings = 2, path_in_schema = 3, codec = 4, num_values = 5,
     * total_uncompressed_size = 6, total_compressed_size = 7, data_page_offset = 9,
     * dictionary_page_offset = 11, statistics = 12 */
    th_i32(t, 1, physical(c->c.type));
    int encs[3], ne = 0;
    encs[ne++] = dict ? ENC_RLE_DICTIONARY : ENC_PLAIN;
    if (dict)
        encs[ne++] = ENC_PLAIN; /* the dictionary page */
    if (c->c.optional)
        encs[ne++] = ENC_RLE; /* definition levels */
    th_list(t, 2, CT_I32, (size_t)ne);
    for (int k = 0; k < ne; k++)
        th_varint(t, zigzag(encs[k]));
    th_list(t, 3, CT_BINARY, 1);
    th_varint(t, strlen(c->c.name));
    gmp_obuf_add(t->b, c->c.name, strlen(c->c.name));
    th_i32(t, 4, CODEC_ZSTD);
    th_i64(t, 5, (int64_t)c->nrows);
    th_i64(t, 6, (int64_t)unc);
    th_i64(t, 7, (int64_t)comp);
    th_i64(t, 9, (int64_t)data_off);
    if (dict)
        th_i64(t, 11, (int64_t)dict_off);
    /* Statistics: max = 1, min = 2 (the deprecated signed ones, integers only), null_count = 3,
     * max_value = 5, min_value = 6: PLAIN bytes, a string's without its length */
    th_struct(t, 12);
    if (c->has_mm && c->c.type != GMP_PQ_STRING) {
        char mx[8], mn[8];
        size_t n = c->c.type == GMP_PQ_INT64 ? 8 : c->c.type == GMP_PQ_INT32 ? 4 : 1;
        for (size_t k = 0; k < n; k++) {
            mx[k] = (char)((uint64_t)c->imax >> (8 * k));
            mn[k] = (char)((uint64_t)c->imin >> (8 * k));
        }
        if (c->c.type != GMP_PQ_BOOL) {
            th_bin(t, 1, mx, n);
            th_bin(t, 2, mn, n);
        }
        th_i64(t, 3, (int64_t)c->nulls);
        th_bin(t, 5, mx, n);
        th_bin(t, 6, mn, n);
    } else {
        th_i64(t, 3, (int64_t)c->nulls);
        if (c->has_mm && c->str_stats) {
            th_bin(t, 5, c->smax.p ? c->smax.p : "", c->smax.len);
            th_bin(t, 6, c->smin.p ? c->smin.p : "", c->smin.len);
        }
    }
    th_end(t); /* Statistics */
    th_end(t); /* ColumnMetaData */
    th_end(t); /* ColumnChunk */
}

/* Writes the buffered rows as one row group. */
static void flush_rg(gmp_pq_writer *w)
{
    if (w->err != GMP_OK || !w->rg_rows)
        return;
    uint64_t start = w->pos, unc = 0, comp = 0;
    thrift t = {&w->rgs, {0}, 0};
    /* RowGroup: columns = 1, total_byte_size = 2, num_rows = 3, file_offset = 5,
     * total_compressed_size = 6, ordinal = 7 */
    th_push(&t);
    th_list(&t, 1, CT_STRUCT, w->ncols);
    for (size_t i = 0; i < w->ncols && w->err == GMP_OK; i++)
        write_chunk(w, &w->cols[i], &t, &unc, &comp);
    th_i64(&t, 2, (int64_t)unc);
    th_i64(&t, 3, (int64_t)w->rg_rows);
    th_i64(&t, 5, (int64_t)start);
    th_i64(&t, 6, (int64_t)comp);
    if (w->nrg < 32768) {
        th_field(&t, 7, CT_I16);
        th_varint(&t, zigzag((int64_t)w->nrg));
    }
    th_end(&t);
    if (w->rgs.oom)
        fail(w, GMP_ERR_NOMEM, "out of memory");
    w->nrg++;
    w->rg_rows = 0;
    w->rg_bytes = 0;
    for (size_t i = 0; i < w->ncols; i++)
        col_reset(&w->cols[i]);
}

gmp_err gmp_pq_row(gmp_pq_writer *w)
{
    if (w->err == GMP_OK && w->cur != w->ncols)
        fail(w, GMP_ERR_ARG, "a row without a value for every column");
    w->cur = 0;
    if (w->err != GMP_OK)
        return w->err;
    w->rows++;
    w->rg_rows++;
    if (w->rg_bytes >= w->o.row_group_bytes)
        flush_rg(w);
    return w->err;
}

uint64_t gmp_pq_rows(const gmp_pq_writer *w)
{
    return w->rows;
}

const char *gmp_pq_error(const gmp_pq_writer *w)
{
    return w->msg;
}

static void writer_free(gmp_pq_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->ncols; i++) {
        pq_col *c = &w->cols[i];
        gmp_obuf_free(&c->plain);
        gmp_obuf_free(&c->smin);
        gmp_obuf_free(&c->smax);
        gmp_intern_free(&c->dict);
        free(c->defl);
        free(c->idx);
    }
    free(w->cols);
    gmp_obuf_free(&w->rgs);
    gmp_obuf_free(&w->page);
    gmp_obuf_free(&w->comp);
    gmp_obuf_free(&w->hdr);
    gmp_obuf_free(&w->tmp);
    free(w->lv);
    free(w);
}

gmp_err gmp_pq_close(gmp_pq_writer *w, char *msg, size_t msglen)
{
    if (!w)
        return GMP_ERR_ARG;
    if (w->err == GMP_OK && w->cur != 0)
        fail(w, GMP_ERR_ARG, "a row left unfinished");
    flush_rg(w);
    gmp_obuf meta = {0};
    thrift t = {&meta, {0}, 0};
    /* FileMetaData: version = 1, schema = 2, num_rows = 3, row_groups = 4,
     * key_value_metadata = 5, created_by = 6, column_orders = 7 */
    th_i32(&t, 1, 1);
    th_list(&t, 2, CT_STRUCT, w->ncols + 1);
    /* SchemaElement: type = 1, repetition_type = 3, name = 4, num_children = 5,
     * converted_type = 6, logicalType = 10 (LogicalType.STRING = 1, an empty StringType) */
    th_push(&t);
    th_bin(&t, 4, "schema", 6);
    th_i32(&t, 5, (int32_t)w->ncols);
    th_end(&t);
    for (size_t i = 0; i < w->ncols; i++) {
        const gmp_pq_column *c = &w->cols[i].c;
        th_push(&t);
        th_i32(&t, 1, physical(c->type));
        th_i32(&t, 3, c->optional ? REP_OPTIONAL : REP_REQUIRED);
        th_bin(&t, 4, c->name, strlen(c->name));
        if (c->type == GMP_PQ_STRING) {
            th_i32(&t, 6, CONVERTED_UTF8);
            th_struct(&t, 10);
            th_struct(&t, 1);
            th_end(&t);
            th_end(&t);
        }
        th_end(&t);
    }
    th_i64(&t, 3, (int64_t)w->rows);
    th_list(&t, 4, CT_STRUCT, w->nrg);
    gmp_obuf_add(&meta, w->rgs.p ? w->rgs.p : "", w->rgs.len);
    size_t nkv = 0;
    while (w->o.kv && w->o.kv[2 * nkv] && w->o.kv[2 * nkv + 1])
        nkv++;
    if (nkv) { /* KeyValue: key = 1, value = 2 */
        th_list(&t, 5, CT_STRUCT, nkv);
        for (size_t i = 0; i < nkv; i++) {
            th_push(&t);
            th_bin(&t, 1, w->o.kv[2 * i], strlen(w->o.kv[2 * i]));
            th_bin(&t, 2, w->o.kv[2 * i + 1], strlen(w->o.kv[2 * i + 1]));
            th_end(&t);
        }
    }
    const char *by = w->o.created_by ? w->o.created_by : "gpumemprof";
    th_bin(&t, 6, by, strlen(by));
    /* ColumnOrder (a union): TYPE_ORDER = 1, an empty TypeDefinedOrder, for every column */
    th_list(&t, 7, CT_STRUCT, w->ncols);
    for (size_t i = 0; i < w->ncols; i++) {
        th_push(&t);
        th_struct(&t, 1);
        th_end(&t);
        th_end(&t);
    }
    th_byte(&t, 0); /* end of FileMetaData */
    if (meta.oom)
        fail(w, GMP_ERR_NOMEM, "out of memory");
    if (w->err == GMP_OK) {
        char tail[8];
        for (int k = 0; k < 4; k++)
            tail[k] = (char)((uint32_t)meta.len >> (8 * k));
        memcpy(tail + 4, "PAR1", 4);
        if (meta.len > UINT32_MAX || fwrite(meta.p, 1, meta.len, w->f) != meta.len ||
            fwrite(tail, 1, 8, w->f) != 8)
            fail(w, GMP_ERR_IO, "cannot write the file");
    }
    gmp_obuf_free(&meta);
    gmp_err e = w->err;
    if (msg && msglen)
        snprintf(msg, msglen, "%s", w->msg);
    writer_free(w);
    return e;
}

void gmp_pq_abort(gmp_pq_writer *w)
{
    writer_free(w);
}
