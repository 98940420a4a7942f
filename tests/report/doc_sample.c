/* doc_sample: a report document with every block kind, every value type and flag, and hostile
 * strings from a "trace" (escape characters, newlines, Markdown and HTML punctuation, invalid
 * UTF-8), rendered by one renderer on stdout. The renderers' tests (check_render.py) compare it
 * with golden files and check each format's own rules on it.
 *
 *   doc_sample text|color|markdown|html|json */
#include <stdio.h>
#include <string.h>

#include "gmp_doc.h"
#include "gmp_render.h"

#define S(lit) ((gmp_str){(lit), (uint32_t)(sizeof(lit) - 1)})
#define MiB (1024ull * 1024)
#define T0 1000000000ull

static const gmp_doc_frame frames[] = {
    {.python = 1,
     .function = S("forward"),
     .file = S("model.py"),
     .line = 42,
     .display = S("forward (model.py:42)")},
    {.function = S("at::empty<float>"),
     .file = S("/src/aten/empty.cpp"),
     .line = 7,
     .module = S("/usr/lib/libtorch.so"),
     .offset = 0x1a2b,
     .address = 0x7f001a2b,
     .inlined = 1,
     .display = S("at::empty<float> (empty.cpp:7)")},
    {.module = S("/usr/lib/libtorch.so"),
     .offset = 0x99,
     .address = 0x7f000099,
     .unknown = S("no DWARF"),
     .display = S("libtorch.so+0x99")},
    {.address = 0x401000, .display = S("0x401000")},
    {.python = 1,
     .function = S("<module>"),
     .file = S("train|<b>.py"),
     .line = 1,
     .display = S("<module> (train|<b>.py:1)")},
    {.python = 1,
     .function = S("main"),
     .file = S("train.py"),
     .line = 99,
     .display = S("main (train.py:99)")},
};
static const gmp_doc_stack stack6 = {6, frames, 0, 0};
/* internal frames (gmp_frames.h) folded: a run the stack begins with ("[+2 inside]" after the
 * first frame shown), a run between two user frames ("+1 internal frame") */
static const gmp_doc_frame folded_frames[] = {
    {.python = 1,
     .function = S("torch::unwind::unwind()"),
     .display = S("torch::unwind::unwind()"),
     .internal = 1},
    {.python = 1,
     .function = S("c10::cuda::CUDACachingAllocator::malloc"),
     .display = S("c10::cuda::CUDACachingAllocator::malloc"),
     .internal = 1},
    {.python = 1,
     .function = S("step"),
     .file = S("optim.py"),
     .line = 82,
     .display = S("step (optim.py:82)")},
    {.python = 1,
     .function = S("_PyEval_EvalFrameDefault"),
     .display = S("_PyEval_EvalFrameDefault"),
     .internal = 1},
    {.python = 1,
     .function = S("train"),
     .file = S("train.py"),
     .line = 7,
     .display = S("train (train.py:7)")},
};
static const gmp_doc_stack stack_folded = {5, folded_frames, 0, 0};
static const gmp_doc_stack stack1 = {1, frames, 0, 0};

static void device(gmp_doc *d, gmp_doc_block *trace, int id, uint64_t peak)
{
    gmp_doc_block *s = gmp_doc_section(d, trace, "devices", GMP_DOC_ITEM, "Device %v: %v",
                                       gmp_dv_device(id), gmp_dv_str(S("Sim\x1b[31mGPU"), ""));
    gmp_doc_block *kv = gmp_doc_kv(d, s);
    gmp_doc_item_add(d, kv, "id", GMP_DOC_DATA, "%v", gmp_dv_k(gmp_dv_device(id), "id"));
    gmp_doc_item_add(d, kv, "peak allocated", 0, "%v at %v",
                     gmp_dv_k(gmp_dv_f(gmp_dv_bytes(peak), GMP_DOC_STRONG | GMP_DOC_RAW),
                              "peak_allocated_bytes"),
                     gmp_dv_k(gmp_dv_time(T0 + 9000000, T0), "peak_time_ns"));
    gmp_doc_item_add(
        d, kv, "leaked at exit", 0, "%v in %v allocation%v",
        gmp_dv_k(gmp_dv_f(gmp_dv_bytes(id ? 0 : 64 * MiB), id ? 0 : GMP_DOC_BAD), "leaked_bytes"),
        gmp_dv_k(gmp_dv_count(id ? 0 : 1), "leaked_allocations"), gmp_dv_lit(id ? "s" : ""));
    gmp_doc_item_add(d, kv, "samples", GMP_DOC_DATA, "%v", gmp_dv_k(gmp_dv_count(3), "samples"));

    static const gmp_doc_scol sc[] = {
        {"allocated (min)", "allocated_min", GMP_DOC_S_LOW, 0},
        {"allocated", "allocated_max", GMP_DOC_S_HIGH, GMP_DOC_STRONG},
        {"reserved", "reserved", GMP_DOC_S_LINE, 0},
        {"driver-reported use", "driver_used", GMP_DOC_S_DOTS, 0},
        {"events", "events", GMP_DOC_S_HIDDEN, 0},
    };
    enum { NP = 24 };
    gmp_doc_block *ser = gmp_doc_series(d, s, "timeline", sc, 5, NP);
    ser->x0 = T0;
    ser->t0 = T0;
    ser->bucket_ns = 1000000;
    for (size_t p = 0; p < ser->npoints; p++) {
        uint64_t v = peak / NP * (p < NP / 2 ? p : NP - p);
        ser->x[p] = T0 + (p + 1) * 1000000;
        uint64_t *y = &ser->y[p * 5];
        y[0] = v / 2;
        y[1] = v;
        y[2] = v + 8 * MiB;
        y[3] = p % 5 == 0 ? v + 100 * MiB : 0;
        y[4] = p;
    }
    gmp_doc_lane *l = gmp_doc_lane_add(d, ser, "tid 7, depth 1");
    gmp_doc_span_add(d, l, T0, T0 + 12000000, S("train/<step>"));
    gmp_doc_span_add(d, l, T0 + 12000000, T0 + 24000000, S("eval\n\xff"));
    gmp_doc_mark_add(d, ser, T0 + 12000000, "peak", 0);
    gmp_doc_mark_add(d, ser, T0 + 20000000, "out of memory", GMP_DOC_BAD);

    gmp_doc_block *live = gmp_doc_section(d, s, NULL, 0, "Live at the peak, by range");
    static const gmp_doc_col lc[] = {
        {"bytes", "bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"share", NULL, GMP_DOC_PCT, 0},
        {"count", "count", GMP_DOC_COUNT, 0},
        {"range", "range", GMP_DOC_STR, 0},
    };
    gmp_doc_block *t = gmp_doc_table(d, live, "live_at_peak_by_range", lc, 4);
    static const struct {
        gmp_str name;
        uint64_t bytes, count;
    } rows[] = {{S("train/step/forward"), 96 * MiB, 3},
                {S("a|b*c_d`e[f]#g~h&i<j>k\"l"), 24 * MiB, 1},
                {S(""), 8 * MiB, 2}};
    for (size_t i = 0; i < 3; i++) {
        gmp_doc_val *r = gmp_doc_row(d, t);
        r[0] = gmp_dv_bytes(rows[i].bytes);
        r[1] = gmp_dv_pct(100.0 * (double)rows[i].bytes / (double)(128 * MiB));
        r[2] = gmp_dv_count(rows[i].count);
        r[3] = gmp_dv_str(rows[i].name, "(no range)");
    }
    t->total = 5;
}

static gmp_doc *build(void)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_doc_block *rk = gmp_doc_kv(d, root);
    gmp_doc_item_add(d, rk, "schema", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_lit("gpumemprof-sample/1"), "schema"));
    gmp_doc_block *tr = gmp_doc_section(d, root, NULL, 0, "gpumemprof report: %v",
                                        gmp_dv_str(S("run\x1b]0;x\x07.zst"), ""));
    gmp_doc_block *kv = gmp_doc_kv(d, tr);
    gmp_doc_item_add(
        d, kv, "process", 0, "%v on %v: %v", gmp_dv_k(gmp_dv_count(4242), "pid"),
        gmp_dv_k(gmp_dv_str(S("host\xff\xfe"), ""), "hostname"),
        gmp_dv_k(gmp_dv_f(gmp_dv_str(S("python train.py --lr=1e-3"), ""), GMP_DOC_CODE),
                 "cmdline"));
    gmp_doc_item_add(
        d, kv, "events", 0, "%v over %v, %v lost", gmp_dv_k(gmp_dv_count(1234567), "events"),
        gmp_dv_k(gmp_dv_dur(18500000), "span_ns"), gmp_dv_k(gmp_dv_count(0), "lost_events"));
    gmp_doc_item_add(d, kv, "complete", 0, "%v",
                     gmp_dv_k(gmp_dv_f(gmp_dv_bool(0), GMP_DOC_WARN), "complete"));
    gmp_doc_item_add(d, kv, "ratio", 0, "%v, change %v, delta %v, at %v, first %v",
                     gmp_dv_k(gmp_dv_real(2.5), "ratio"), gmp_dv_k(gmp_dv_sbytes(-512), "change"),
                     gmp_dv_k(gmp_dv_int(-3), "delta"), gmp_dv_k(gmp_dv_hex(0x7f00), "address"),
                     gmp_dv_k(gmp_dv_time(T0 - 1500, T0), "first_time_ns"));
    device(d, tr, 0, 128 * MiB);
    device(d, tr, 1, 32 * MiB);

    gmp_doc_block *big = gmp_doc_section(d, tr, NULL, 0, "Largest allocations");
    gmp_doc_anchor(d, big, "largest"); /* a finding below refers to it (gmp_dv_ref) */
    static const gmp_doc_col bc[] = {
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"at", "time_ns", GMP_DOC_TIME, 0},
        {"freed at", "free_time_ns", GMP_DOC_TIME, 0},
        {"address", "address", GMP_DOC_HEX, GMP_DOC_DATA},
        {"note", NULL, GMP_DOC_LIT, GMP_DOC_VIEW},
        {"stack", "stack", GMP_DOC_STACK, 0},
    };
    gmp_doc_block *t = gmp_doc_table(d, big, "largest_allocations", bc, 7);
    gmp_doc_val *r = gmp_doc_row(d, t);
    r[0] = gmp_dv_bytes(96 * MiB);
    r[1] = gmp_dv_device(0);
    r[2] = gmp_dv_time(T0 + 2000000, T0);
    r[3] = gmp_dv_none();
    r[4] = gmp_dv_hex(0x7f2000000000);
    r[5] = gmp_dv_lit("never freed");
    r[6] = gmp_dv_stack(&stack6);
    r = gmp_doc_row(d, t);
    r[0] = gmp_dv_bytes(1000);
    r[1] = gmp_dv_device(-1);
    r[2] = gmp_dv_time(T0 + 3000000, T0);
    r[3] = gmp_dv_time(T0 + 4000000, T0);
    r[4] = gmp_dv_hex(0x1000);
    r[5] = gmp_dv_lit("");
    r[6] = gmp_dv_stack(&stack1);
    r = gmp_doc_row(d, t);
    r[0] = gmp_dv_bytes(512);
    r[1] = gmp_dv_device(0);
    r[2] = gmp_dv_time(T0 + 5000000, T0);
    r[3] = gmp_dv_time(T0 + 6000000, T0);
    r[4] = gmp_dv_hex(0x2000);
    r[5] = gmp_dv_lit("folded");
    r[6] = gmp_dv_stack(&stack_folded);

    gmp_doc_block *an = gmp_doc_section(d, tr, "analysis", 0, "Findings");
    gmp_doc_block *v = gmp_doc_verdict(
        d, an, "leaks", GMP_DOC_PROBLEM, "probable leak: %v on device %v: +%v per repetition",
        gmp_dv_k(gmp_dv_str(S("train/<step>"), "(no range)"), "range"),
        gmp_dv_k(gmp_dv_device(0), "device"), gmp_dv_k(gmp_dv_bytes(MiB), "rate_bytes"));
    v->flags |= GMP_DOC_ITEM;
    static const gmp_doc_col gc[] = {
        {"growth", "growth_bytes", GMP_DOC_SBYTES, 0},
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
    };
    gmp_doc_block *gt = gmp_doc_table(d, v, "sites", gc, 2);
    r = gmp_doc_row(d, gt);
    r[0] = gmp_dv_sbytes(10 * (int64_t)MiB);
    r[1] = gmp_dv_str(S("train/<step>"), "(no range)");
    /* a path longer than a TAIL column shows in text: its end, after "…" */
    r = gmp_doc_row(d, gt);
    r[0] = gmp_dv_sbytes(-2 * (int64_t)MiB);
    r[1] = gmp_dv_str(S("model/encoder/layers.11/self_attn/q_proj/\xc3\xa9t\xc3\xa9/tail_end"),
                      "(no range)");
    gmp_doc_verdict(d, an, "leaks", GMP_DOC_WARNING, "growth to watch: %v (see %v)",
                    gmp_dv_k(gmp_dv_pct(12.5), "share"),
                    gmp_dv_ref("Largest allocations", "largest"))
        ->flags |= GMP_DOC_ITEM;
    gmp_doc_notice(d, an, "notes", GMP_DOC_OK, "no range grows over its repetitions (%v checked)",
                   gmp_dv_k(gmp_dv_count(2), "ranges_checked"));
    gmp_doc_notice(d, an, NULL, GMP_DOC_INFO, "... and %v more", gmp_dv_count(3));
    gmp_doc_block *sb = gmp_doc_section(d, an, NULL, 0, "Allocation in focus");
    gmp_doc_stack_block(d, sb, "focus_stack", &stack6);
    gmp_doc_stack_block(d, sb, "folded_stack", &stack_folded);
    gmp_doc_block *em = gmp_doc_section(d, tr, "empty", 0, "Empty section");
    gmp_doc_table(d, em, "nothing", bc, 7);
    return d;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: doc_sample text|color|markdown|html|json\n");
        return 2;
    }
    gmp_render_opts o = {0};
    gmp_render_fn fn;
    if (strcmp(argv[1], "color") == 0) {
        o.color = 1;
        fn = gmp_render_text;
    } else if (strcmp(argv[1], "text") == 0) {
        fn = gmp_render_text;
    } else if (strcmp(argv[1], "markdown") == 0) {
        fn = gmp_render_md;
    } else if (strcmp(argv[1], "html") == 0) {
        fn = gmp_render_html;
    } else if (strcmp(argv[1], "json") == 0) {
        fn = gmp_render_json;
    } else {
        fprintf(stderr, "doc_sample: unknown format %s\n", argv[1]);
        return 2;
    }
    gmp_doc *d = build();
    if (!d || gmp_doc_error(d) != GMP_OK) {
        fprintf(stderr, "doc_sample: out of memory\n");
        return 1;
    }
    gmp_err e = fn(d, stdout, &o);
    gmp_doc_free(d);
    return e == GMP_OK ? 0 : 1;
}
