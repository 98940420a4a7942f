/* gmp_output: the interface every output format of `gpumemprof convert` implements (speedscope,
 * Chrome trace, reports, PyTorch snapshot, ...), and small helpers they share.
 *
 * One output writes one file. The converter replays each trace once (formats/replay/gmp_replay.h)
 * and every output registers its callbacks on that one pass:
 *
 *     start(&ctx, out, path, opts)           once, before any trace: may write a prologue
 *     add_trace(ctx, rp, trace)              per trace, before gmp_replay_run(rp): registers the
 *                                            output's gmp_replay_ops on rp (gmp_replay_add); the
 *                                            ops' `end` callback completes the trace's part
 *     finish(ctx, res)                       once, after the last trace: writes the rest, frees
 *     discard(ctx)                           instead of finish after a failure: frees only
 *
 * Several traces (the ranks of one job) go into one output, one after the other; each has its own
 * replay. Outputs stream: what they keep in memory grows with the live set, the threads, the
 * distinct ranges and stacks, never with the length of a trace. Every string from a trace is
 * untrusted bytes: write it with gmp_jw_str (JSON) or gmp_escape.h.
 *
 * Adding a format: implement a `const gmp_output` in formats/export/gmp_out_NAME.c, declare it in
 * formats/export/gmp_export.h (the report's outputs: formats/report/gmp_out_report.h), and add one
 * line to the table in cli/cmd_convert.c. This header declares the interface only: a lower layer
 * does not name what the layers above it define. */
#ifndef GMP_OUTPUT_H
#define GMP_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmp_map.h"
#include "gmp_error.h"
#include "gmp_replay.h"
#include "gmp_trace.h"

/* Each format defines its own context. */
typedef struct gmp_output_ctx gmp_output_ctx;

typedef struct gmp_obuf gmp_obuf;

/* Names a native frame (the CLI's offline symbolizer: formats/ does not depend on it). Writes the
 * display name into name ("function (file.c:42)", inlined functions joined "a > b"), the source
 * file into file (may stay empty) and *line; returns 1, or 0 to leave the frame unnamed. r is the
 * reader of the trace being converted (its modules). */
typedef int (*gmp_output_symbolize_fn)(void *ctx, const gmp_reader *r, uint64_t address,
                                       gmp_obuf *name, gmp_obuf *file, uint32_t *line);

/* Settings of one conversion; formats use what applies to them. */
typedef struct gmp_output_opts {
    const char *exporter;              /* "gpumemprof 0.1.0" */
    const char *title;                 /* a name for the whole document (the traces' file names) */
    size_t ntraces;                    /* traces that will be added */
    int chrome_torch_compat;           /* Chrome: also PyTorch-profiler-style "[memory]" events */
    uint64_t max_spans;                /* Chrome: allocation spans written at most (0: no limit) */
    gmp_output_symbolize_fn symbolize; /* native frames; NULL: "module+0xoffset" */
    void *symbolize_ctx;
    int all_frames; /* stacks keep every frame; else internal frames (gmp_frames.h) are folded */
    /* HTML view: per trace (by index; NULL: none), the recorded reserve and the one a setting's
     * model replays (gmp_whatif.h, `convert --whatif CONF`), drawn as two lines; the setting */
    const struct gmp_whatif_reserve *const *whatif;
    const char *whatif_name;
} gmp_output_opts;

/* One trace of the conversion, as outputs should show it. */
typedef struct gmp_output_trace {
    const char *path;             /* the trace file as the user named it */
    size_t index;                 /* 0-based position among the traces */
    const gmp_rec_header *header; /* valid until the trace's replay is freed */
    uint32_t pid;                 /* process id to show: the header's, unique among the traces */
    const char *label;            /* "" for a single trace, else "rank 1, pid 4242" (or so) */
    uint64_t t0_ns;               /* trace-clock time shown as offset_ns ... */
    int64_t offset_ns; /* ... so that shown = (t - t0_ns) + offset_ns (gmp_output_time) */
} gmp_output_trace;

/* Times shown in outputs: nanoseconds from the start of the earliest trace of the conversion
 * (wall clocks align the traces of several processes). */
static inline int64_t gmp_output_time(const gmp_output_trace *t, uint64_t ns)
{
    return (int64_t)(ns - t->t0_ns) + t->offset_ns;
}

/* What an output tells the user after finishing. */
typedef struct gmp_output_result {
    char note[512];  /* one line for stderr ("spans dropped ..."), or "" */
    char error[256]; /* when finish failed: why */
} gmp_output_result;

typedef struct gmp_output {
    const char *name; /* "speedscope" */
    /* out is open for writing (the caller closes it after finish/discard); path names it */
    gmp_err (*start)(gmp_output_ctx **ctx, FILE *out, const char *path,
                     const gmp_output_opts *opts);
    gmp_err (*add_trace)(gmp_output_ctx *ctx, gmp_replay *rp, const gmp_output_trace *trace);
    /* writes what remains (flushes out) and frees ctx, also when it fails */
    gmp_err (*finish)(gmp_output_ctx *ctx, gmp_output_result *res);
    /* frees ctx after a failed replay or another output's failure; ctx may be NULL */
    void (*discard)(gmp_output_ctx *ctx);
} gmp_output;

/* ---- helpers for outputs ---- */

/* A buffered JSON writer onto a FILE with fast number formatting. Errors are sticky (err). */
typedef struct gmp_jw {
    FILE *f;
    char *buf;
    size_t len, cap;
    uint64_t written; /* bytes handed to the FILE */
    int err;          /* a write failed */
} gmp_jw;

gmp_err gmp_jw_init(gmp_jw *w, FILE *f);
void gmp_jw_free(gmp_jw *w); /* does not flush */
/* Hands the buffer to the FILE (fwrite only; no fflush). GMP_ERR_IO when any write failed. */
gmp_err gmp_jw_flush(gmp_jw *w);
void gmp_jw_spill(gmp_jw *w, size_t need); /* internal: makes room for need bytes */

static inline void gmp_jw_raw(gmp_jw *w, const char *s, size_t n)
{
    if (w->cap - w->len < n)
        gmp_jw_spill(w, n);
    if (w->cap - w->len >= n) {
        memcpy(w->buf + w->len, s, n);
        w->len += n;
    } else if (fwrite(s, 1, n, w->f) != n) { /* larger than the buffer */
        w->err = 1;
    } else {
        w->written += n;
    }
}
/* s must be a string literal */
#define gmp_jw_lit(w, s) gmp_jw_raw((w), "" s, sizeof("" s) - 1)
static inline void gmp_jw_char(gmp_jw *w, char c)
{
    if (w->len == w->cap)
        gmp_jw_spill(w, 1);
    w->buf[w->len++] = c;
}
void gmp_jw_cstr_raw(gmp_jw *w, const char *s); /* a C string as is (trusted text) */
void gmp_jw_u64(gmp_jw *w, uint64_t v);
void gmp_jw_i64(gmp_jw *w, int64_t v);
/* ns as microseconds with three decimals (ns precision kept): 12345 -> 12.345, -5 -> -0.005 */
void gmp_jw_us(gmp_jw *w, int64_t ns);
/* "0x7f00..." (quoted) */
void gmp_jw_hex(gmp_jw *w, uint64_t v);
/* s[0..n) as a quoted JSON string, escaped (gmp_escape.h); NULL is "" */
void gmp_jw_str(gmp_jw *w, const char *s, size_t n);
static inline void gmp_jw_cstr(gmp_jw *w, const char *s)
{
    size_t n = 0;
    while (s && s[n])
        n++;
    gmp_jw_str(w, s, n);
}

/* A growable byte buffer (for text kept between callbacks: cached fragments, per-trace notes). */
struct gmp_obuf {
    char *p;
    size_t len, cap;
    int oom; /* an append failed */
};
void gmp_obuf_add(gmp_obuf *b, const char *s, size_t n);
/* v as an unsigned LEB128 varint (7 bits a byte, low first, high bit = more follows): protobuf's
 * varint (pprof) and Thrift's compact-protocol integers (Parquet) alike */
void gmp_obuf_varint(gmp_obuf *b, uint64_t v);
void gmp_obuf_printf(gmp_obuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) quoted and JSON-escaped */
void gmp_obuf_json(gmp_obuf *b, const char *s, size_t n);
void gmp_obuf_free(gmp_obuf *b);

/* The display text of one stack frame (raw bytes, to be escaped by the caller), as the report
 * writes it: Python frames "function (file:line)" ("function (file)" without a line, "function"
 * alone without a line or file, as snapshots name native frames), native frames "libfoo.so+0x1a2b"
 * when a module covers the address (its file name), else "0x7f001234". */
void gmp_output_frame_text(gmp_obuf *b, const gmp_replay_frame *f);
/* The same with the conversion's symbolizer for native frames: name as above or symbolized; file
 * and *line when known (Python frames: their file and line; native: the source, else the module's
 * path, line 0). */
void gmp_output_frame(const gmp_output_opts *o, const gmp_reader *r, const gmp_replay_frame *f,
                      gmp_obuf *name, gmp_obuf *file, uint32_t *line);

/* The class (gmp_frame_class, gmp_frames.h) of a stack node's innermost frame, named as
 * gmp_output_frame names it, so that every output folds the frames the report folds; cached in
 * *cache (node -> class + 1). */
struct gmp_omap;
int gmp_output_stack_class(const gmp_output_opts *o, gmp_replay *rp, struct gmp_omap *cache,
                           uint32_t node);

/* "Device 3" (as the report heads a device) or "host" (device -1). */
const char *gmp_output_device_label(int32_t device, char *buf, size_t n);

#endif
