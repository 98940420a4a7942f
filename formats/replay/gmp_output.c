/* Helpers shared by the output formats (see gmp_output.h). */
#include "gmp_output.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_frames.h"
#include "gmp_map.h"

#define JW_CAP (256u << 10)

/* ---- JSON writer ---- */

gmp_err gmp_jw_init(gmp_jw *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->buf = malloc(JW_CAP);
    if (!w->buf)
        return GMP_ERR_NOMEM;
    w->cap = JW_CAP;
    return GMP_OK;
}

void gmp_jw_free(gmp_jw *w)
{
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

gmp_err gmp_jw_flush(gmp_jw *w)
{
    if (w->len) {
        if (!w->err && fwrite(w->buf, 1, w->len, w->f) != w->len)
            w->err = 1;
        w->written += w->len;
        w->len = 0;
    }
    return w->err ? GMP_ERR_IO : GMP_OK;
}

void gmp_jw_spill(gmp_jw *w, size_t need)
{
    (void)need;
    gmp_jw_flush(w);
}

void gmp_jw_cstr_raw(gmp_jw *w, const char *s)
{
    gmp_jw_raw(w, s, strlen(s));
}

/* Decimal digits two at a time from a table, in 32-bit arithmetic, eight digits per 64-bit
 * division: the Chrome trace writes several numbers per event, and a digit per 64-bit division
 * was a fifth of its time. */
static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

/* v's digits, ending just before end; returns where they start. */
static inline char *dec_u32(char *end, uint32_t v)
{
    while (v >= 100) {
        uint32_t q = v / 100;
        end -= 2;
        memcpy(end, digits2 + 2 * (v - q * 100), 2);
        v = q;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, digits2 + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

/* Exactly eight digits of v (< 10^8), leading zeros included. */
static inline char *dec_u32_8(char *end, uint32_t v)
{
    for (int k = 0; k < 4; k++) {
        uint32_t q = v / 100;
        end -= 2;
        memcpy(end, digits2 + 2 * (v - q * 100), 2);
        v = q;
    }
    return end;
}

/* Number of decimal digits of v: from its bit length (log10(2) ~ 1233 / 4096), then one compare. */
static inline unsigned dec_len(uint64_t v)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    unsigned t = (unsigned)(64 - __builtin_clzll(v | 1)) * 1233 >> 12; /* digits - 1 or digits */
    return t + (t < 20 && (v | 1) >= pow10[t]);                        /* (0 has one digit) */
}

void gmp_jw_u64(gmp_jw *w, uint64_t v)
{
    /* straight into the buffer, right to left, once the length is known (no copy) */
    if (w->cap - w->len < 20)
        gmp_jw_spill(w, 20);
    char b[24], *end, *p;
    int direct = w->cap - w->len >= 20;
    end = direct ? w->buf + w->len + dec_len(v) : b + sizeof b;
    if (v <= UINT32_MAX) {
        p = dec_u32(end, (uint32_t)v);
    } else {
        uint64_t hi = v / 100000000u; /* < 1.85e11 */
        p = dec_u32_8(end, (uint32_t)(v - hi * 100000000u));
        if (hi <= UINT32_MAX) {
            p = dec_u32(p, (uint32_t)hi);
        } else {
            uint64_t top = hi / 100000000u; /* < 1845 */
            p = dec_u32_8(p, (uint32_t)(hi - top * 100000000u));
            p = dec_u32(p, (uint32_t)top);
        }
    }
    if (direct)
        w->len = (size_t)(end - w->buf);
    else
        gmp_jw_raw(w, p, (size_t)(end - p));
}

void gmp_jw_i64(gmp_jw *w, int64_t v)
{
    if (v < 0) {
        gmp_jw_char(w, '-');
        gmp_jw_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        gmp_jw_u64(w, (uint64_t)v);
    }
}

void gmp_jw_us(gmp_jw *w, int64_t ns)
{
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        gmp_jw_char(w, '-');
    gmp_jw_u64(w, u / 1000);
    unsigned f = (unsigned)(u % 1000);
    char b[4] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
    gmp_jw_raw(w, b, 4);
}

void gmp_jw_hex(gmp_jw *w, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char b[24];
    size_t i = sizeof b;
    b[--i] = '"';
    do {
        b[--i] = hex[v & 0xf];
        v >>= 4;
    } while (v);
    b[--i] = 'x';
    b[--i] = '0';
    b[--i] = '"';
    gmp_jw_raw(w, b + i, sizeof b - i);
}

void gmp_jw_str(gmp_jw *w, const char *s, size_t n)
{
    if (!s)
        n = 0;
    size_t i = 0;
    while (i < n) { /* plain printable ASCII needs no escaping */
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            break;
        i++;
    }
    if (i == n) {
        gmp_jw_char(w, '"');
        gmp_jw_raw(w, s, n);
        gmp_jw_char(w, '"');
        return;
    }
    size_t worst = 6 * n + 3; /* \u00XX per byte, quotes, NUL */
    if (worst <= w->cap / 2) {
        if (w->cap - w->len < worst)
            gmp_jw_spill(w, worst);
        w->buf[w->len++] = '"';
        w->len += gmp_json_escape(w->buf + w->len, w->cap - w->len, s, n);
        w->buf[w->len++] = '"';
        return;
    }
    gmp_jw_flush(w);
    if (!w->err && gmp_json_fputs(w->f, s, n) != 0)
        w->err = 1;
}

/* ---- growable buffer ---- */

static int obuf_reserve(gmp_obuf *b, size_t n)
{
    if (b->oom)
        return 0;
    if (b->cap - b->len > n)
        return 1;
    size_t nc = b->cap ? b->cap : 256;
    while (nc - b->len <= n)
        nc *= 2;
    char *p = realloc(b->p, nc);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = nc;
    return 1;
}

void gmp_obuf_varint(gmp_obuf *b, uint64_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = (char)(v ? byte | 0x80 : byte);
    } while (v);
    gmp_obuf_add(b, tmp, n);
}

void gmp_obuf_add(gmp_obuf *b, const char *s, size_t n)
{
    if (!obuf_reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void gmp_obuf_printf(gmp_obuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        gmp_obuf_add(b, tmp, (size_t)n);
        return;
    }
    if (!obuf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void gmp_obuf_json(gmp_obuf *b, const char *s, size_t n)
{
    if (!s)
        n = 0;
    size_t worst = 6 * n + 3;
    if (!obuf_reserve(b, worst))
        return;
    b->p[b->len++] = '"';
    b->len += gmp_json_escape(b->p + b->len, b->cap - b->len, s, n);
    b->p[b->len++] = '"';
    b->p[b->len] = '\0';
}

void gmp_obuf_free(gmp_obuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *gmp_output_device_label(int32_t device, char *buf, size_t n)
{
    if (device < 0)
        snprintf(buf, n, "host");
    else
        snprintf(buf, n, "Device %" PRId32, device); /* as the report heads its devices */
    return buf;
}

void gmp_output_frame_text(gmp_obuf *b, const gmp_replay_frame *f)
{
    if (f->kind == GMP_FRAME_PYTHON) {
        /* as the report writes it (gmp_report_frame_text): a frame with no line and no file (or
         * "??": a native frame as PyTorch's snapshots name them) is its function alone, one with
         * no line "function (file)" */
        gmp_obuf_add(b, f->function.ptr, f->function.len);
        if (!f->line && (!f->file.len || (f->file.len == 2 && memcmp(f->file.ptr, "??", 2) == 0)))
            return;
        gmp_obuf_add(b, " (", 2);
        gmp_obuf_add(b, f->file.ptr, f->file.len);
        if (f->line)
            gmp_obuf_printf(b, ":%" PRIu32 ")", f->line);
        else
            gmp_obuf_add(b, ")", 1);
        return;
    }
    if (f->module) {
        const char *p = f->module->path.ptr;
        size_t n = f->module->path.len, s = n;
        while (s > 0 && p[s - 1] != '/')
            s--;
        gmp_obuf_add(b, p + s, n - s);
        gmp_obuf_printf(b, "+0x%" PRIx64, f->offset);
        return;
    }
    gmp_obuf_printf(b, "0x%" PRIx64, f->address);
}

void gmp_output_frame(const gmp_output_opts *o, const gmp_reader *r, const gmp_replay_frame *f,
                      gmp_obuf *name, gmp_obuf *file, uint32_t *line)
{
    *line = 0;
    if (f->kind == GMP_FRAME_PYTHON) {
        gmp_output_frame_text(name, f);
        gmp_obuf_add(file, f->file.ptr, f->file.len);
        *line = f->line;
        return;
    }
    size_t n0 = name->len, f0 = file->len;
    if (o && o->symbolize && o->symbolize(o->symbolize_ctx, r, f->address, name, file, line))
        return;
    name->len = n0;
    file->len = f0;
    *line = 0;
    gmp_output_frame_text(name, f);
    if (f->module)
        gmp_obuf_add(file, f->module->path.ptr, f->module->path.len);
}

int gmp_output_stack_class(const gmp_output_opts *o, gmp_replay *rp, gmp_omap *cache, uint32_t node)
{
    uint64_t *v = gmp_omap_get(cache, node);
    if (v)
        return (int)(*v - 1);
    gmp_replay_frame fr;
    int cls = GMP_FRAME_USER;
    if (gmp_replay_stack_frames(rp, node, &fr, 1) != 0) {
        gmp_frame_info fi = {{"", 0}, {"", 0}, {"", 0}};
        gmp_obuf name = {0}, file = {0};
        if (fr.kind == GMP_FRAME_PYTHON) {
            fi.function = fr.function;
            fi.file = fr.file;
        } else if (fr.module) { /* else inside no loaded module: nothing known (gmp_frames.h) */
            uint32_t line = 0;
            gmp_output_frame(o, gmp_replay_reader(rp), &fr, &name, &file, &line);
            size_t n = name.p ? name.len : 0;
            for (size_t i = 0; i + 1 < n; i++)
                if (name.p[i] == ' ' && name.p[i + 1] == '(') { /* "function (file:line)" */
                    n = i;
                    break;
                }
            fi.function = (gmp_str){name.p ? name.p : "", (uint32_t)n};
            fi.file = (gmp_str){file.p ? file.p : "", file.p ? (uint32_t)file.len : 0};
            if (fr.module)
                fi.module = fr.module->path;
        }
        cls = (int)gmp_frame_classify(&fi, NULL);
        gmp_obuf_free(&name);
        gmp_obuf_free(&file);
    }
    int fresh;
    v = gmp_omap_put(cache, node, &fresh);
    if (v)
        *v = (uint64_t)cls + 1;
    return cls;
}
