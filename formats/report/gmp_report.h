/* gmp_report: the report model: what a report says about one or several traces, computed in the
 * one replay pass (docs/architecture.md, Decisions: "One replay, many outputs"). The report builder
 * (gmp_report_build.h) turns it into a document (gmp_doc.h) that one renderer per format writes
 * (gmp_render.h).
 *
 * A gmp_report_trace registers gmp_replay_ops on a replay (gmp_report_doc_add). During the pass it
 * keeps: per thread the open NVTX ranges (per-range statistics: time inside, bytes allocated and
 * freed inside, what the range left behind, the device's peak while inside and the part of it
 * allocated inside, mean fragmentation while inside), per device a bounded timeline (at most
 * GMP_REPORT_BUCKETS buckets with min/max per bucket, the bucket width doubling as the trace
 * grows), NVTX range lanes under it (the same buckets), an allocation-size histogram, fragmentation
 * and driver-reported use that no allocation explains, the largest allocations. At the replay's
 * `end` it copies everything the builder needs out of the replay and the reader (strings resolved,
 * stacks copied): afterwards it does not refer to them, so the replay may be freed before the
 * report is written. Memory grows with the live set, threads, open ranges, distinct range paths,
 * sites and stacks, never with the length of the trace.
 *
 * The builder gets the whole model (gmp_report_doc: one trace or several, e.g. the ranks of one
 * job) and a view (--top, --device, --by, --sort, colour); grouping and sorting for the views is
 * done here (gmp_report_group, gmp_report_sorted_ranges).
 */
#ifndef GMP_REPORT_H
#define GMP_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmp_analysis.h"
#include "gmp_error.h"
#include "gmp_frames.h"
#include "gmp_intern.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_trace.h"

#define GMP_REPORT_BUCKETS 512    /* timeline buckets per device (between half and all used) */
#define GMP_REPORT_HIST 64        /* allocation-size histogram: bucket i holds [2^i, 2^(i+1)) */
#define GMP_REPORT_MAX_DEVICES 64 /* devices with a timeline (ids -1 .. 62) */
#define GMP_REPORT_MAX_LANES 32   /* range lanes (thread, depth) under the timeline */
#define GMP_REPORT_LANE_DEPTH 4   /* deepest range level drawn in the lanes */
/* allocated-bytes changes kept per device and trace when reporting several (32 MiB each at most) */
#define GMP_REPORT_MAX_STEPS (4u << 20)
#define GMP_REPORT_NO_STACK UINT32_MAX
#define GMP_REPORT_ALL UINT32_MAX /* a merged key in a grouped row */

/* ---- what a report holds ---- */

/* One stack frame, resolved as far as the trace (and a symbolizer) allows. A native address gives
 * several frames when functions were inlined there (inlined = 1 on all but the last). */
typedef struct gmp_report_frame {
    uint32_t kind;           /* GMP_FRAME_NATIVE or GMP_FRAME_PYTHON */
    uint64_t address;        /* NATIVE: return address */
    uint32_t module;         /* NATIVE: string index of the module's path, 0 none */
    uint64_t offset;         /* NATIVE: address - module base */
    uint32_t function, file; /* string indices, 0 unknown (PYTHON always; NATIVE when symbolized) */
    uint32_t line;
    int inlined;      /* NATIVE: inlined into the next frame */
    int symbolized;   /* NATIVE: a symbolizer looked at it */
    uint32_t unknown; /* NATIVE: why it has no function ("file missing"), 0 when it has one */
    uint32_t display; /* string index of the one-line name shown in tables (0: computed) */
    uint8_t cls;      /* gmp_frame_class (gmp_frames.h): user, framework or internal code */
    uint8_t outside;  /* NATIVE: a stack of addresses inside no loaded module only (shown "?"):
                         such addresses are left out of every other stack */
} gmp_report_frame;

typedef struct gmp_report_stack {
    size_t nframes;
    gmp_report_frame *frames; /* innermost first */
    size_t user;              /* the innermost frame of user code (gmp_frames.h); nframes: none */
    uint32_t user_name;       /* string index: the first frame shown when internal frames are
                                 folded (its one-line name), 0 none */
} gmp_report_stack;

/* A site as the replay counts it (device, kind, API, range path, stack), strings resolved. Rows
 * grouped by gmp_report_group have the same shape with merged keys set to GMP_REPORT_ALL. */
typedef struct gmp_report_row {
    int32_t device;
    uint32_t kind;  /* gmp_mem_kind, or GMP_REPORT_ALL */
    uint32_t api;   /* string index (0 unknown), or GMP_REPORT_ALL */
    uint32_t range; /* string index of the path (0 none), or GMP_REPORT_ALL */
    uint32_t stack; /* stack index, GMP_REPORT_NO_STACK none, or GMP_REPORT_ALL */
    uint64_t allocs, alloc_bytes, frees;
    uint64_t live_bytes, live_count; /* at the end (leaks) */
    uint64_t peak_bytes, peak_count; /* live at the device's peak */
    uint64_t max_alloc_bytes;
    uint32_t category; /* gmp_category (gmp_frames.h) of its stack and range */
    /* grouped rows: the value shown (bytes/count of the table) */
    uint64_t bytes, count;
} gmp_report_row;

/* Per-range statistics of one range path (inclusive: nested ranges are inside their parents). */
typedef struct gmp_report_range {
    uint32_t path;    /* string index ("train/step/forward") */
    uint32_t depth;   /* components in the path (1 = outermost) */
    int32_t device;   /* the device its peak is about (-2 unknown) */
    int thread_bound; /* 1 push/pop (one thread's allocations), 0 start/end (any thread) */
    uint64_t entered, closed, open_at_end;
    uint64_t total_ns, max_ns; /* time inside, closed instances and those open at the end */
    uint64_t allocs, alloc_bytes, frees, free_bytes; /* device memory, inside */
    int64_t net_bytes;                               /* alloc_bytes - free_bytes */
    uint64_t left_bytes; /* allocated inside and still live at the exit (summed over instances) */
    uint64_t peak_bytes; /* the device's allocated bytes, max while inside */
    uint64_t peak_time_ns;
    uint64_t peak_inside_bytes; /* of peak_bytes, what this range had allocated (and not freed) */
    double frag_mean_bytes;     /* mean of reserved - allocated while inside (time-weighted) */
} gmp_report_range;

/* One timeline bucket of a device: values after the events inside [t0_ns, t1_ns). Buckets with no
 * event repeat the previous state (has = 0). */
typedef struct gmp_report_point {
    uint64_t t0_ns, t1_ns;
    uint64_t alloc_min, alloc_max, alloc_last;
    uint64_t res_min, res_max, res_last;
    uint64_t frag_max;                /* max of reserved - allocated */
    uint64_t used_max;                /* driver-reported use (SAMPLE), 0 none in the bucket */
    uint64_t cat_last[GMP_CAT_COUNT]; /* allocated per category at the bucket's end (frames only,
                                         gmp_frames_category) */
    uint64_t cat_max[GMP_CAT_COUNT]; /* the same at the first moment of alloc_max: they sum to it */
    int has, has_used;
} gmp_report_point;

/* A range drawn under the timeline: on a lane (thread, depth), the range that covered most of
 * each bucket; consecutive buckets of the same range are one span. */
typedef struct gmp_report_span {
    uint64_t t0_ns, t1_ns;
    uint32_t path; /* string index; the name drawn is its last component */
} gmp_report_span;

typedef struct gmp_report_lane {
    uint32_t tid, depth;
    size_t nspans;
    gmp_report_span *spans;
} gmp_report_lane;

typedef struct gmp_report_device {
    int32_t id;    /* -1 host */
    uint32_t name; /* string index, 0 when no DEVICE record */
    int has_def;
    uint64_t total_bytes;
    int listed;          /* real device, or the host when it has device-kind memory */
    gmp_replay_device d; /* the replay's numbers (def pointer cleared) */
    /* still allocated at the end, static __device__ memory excepted: a module's variables live as
     * long as the module, which CUDA unloads after the trace ends, so they are not leaks */
    uint64_t leaked_bytes, leaked_count;
    uint64_t frag_max, frag_max_time_ns;
    double frag_mean;        /* time-weighted reserved - allocated over the trace */
    double unexplained_mean; /* mean over samples */
    uint64_t unexplained_last;
    uint64_t hist_count[GMP_REPORT_HIST], hist_bytes[GMP_REPORT_HIST];
    size_t npoints;
    gmp_report_point *points; /* GMP_REPORT_BUCKETS at most */
    uint8_t uuid[16];         /* the DEVICE record's */
    int has_uuid;             /* not all zero */
    /* one of several traces: the allocated bytes after each change, nsteps (time, bytes) pairs in
     * time order; none and steps_cut when there were more than GMP_REPORT_MAX_STEPS */
    uint64_t *steps;
    size_t nsteps;
    int steps_cut;
} gmp_report_device;

typedef struct gmp_report_alloc {
    int32_t device;
    uint32_t kind, api, range, stack; /* string/stack indices */
    uint32_t tid;
    uint64_t address, size, time_ns;
    uint64_t free_ns; /* 0: live at the end */
} gmp_report_alloc;

typedef struct gmp_report_oom {
    gmp_replay_oom o; /* api/range/stack replaced by string and stack indices */
} gmp_report_oom;

typedef struct gmp_report_notice {
    uint32_t severity;
    uint64_t time_ns;
    uint32_t message; /* string index */
} gmp_report_notice;

/* How a recording ends. A snapshot or a killed process's trace ends before the program does:
 * what is live at its end was in use then, not leaked. */
typedef enum gmp_report_end {
    GMP_REPORT_END_EXIT = 0, /* the program's end (an END record) */
    GMP_REPORT_END_SNAPSHOT, /* a PyTorch snapshot, dumped while the program ran */
    GMP_REPORT_END_CUT,      /* no END record: the program was killed, or the file cut */
} gmp_report_end;

/* Everything about one trace. Strings are indices into strs (0 is ""). */
typedef struct gmp_report_trace {
    uint32_t path, label; /* label: "" for a single trace, else "rank 1, pid 4242" */
    int has_header;
    uint32_t producer, hostname, cmdline; /* cmdline: arguments separated by NUL bytes */
    uint32_t pid, ppid;
    int64_t rank;
    int64_t local_rank, world_size; /* -1 and 0 when unknown (the trace header's) */
    uint64_t start_wall_ns, start_trace_ns;
    uint64_t t0_ns; /* base of relative times */
    gmp_replay_summary sum;
    int has_end;
    uint64_t end_ns;    /* the END record's time (the exit), 0 when none */
    gmp_report_end end; /* how the recording ends (leaks only when it is the program's end) */
    int torch_figures;  /* allocated is PyTorch's requested bytes: an imported snapshot, or a trace
                          merged with PyTorch's memory history (header options) */
    int has_ranges;     /* some allocation was made inside a range (else breakdowns by frame) */
    size_t ndevices;
    gmp_report_device *devices;
    size_t nsites;
    gmp_report_row *sites;
    size_t nranges;
    gmp_report_range *ranges;
    size_t nlanes;
    gmp_report_lane *lanes;
    size_t nlargest;
    gmp_report_alloc *largest; /* largest first */
    size_t nooms;
    gmp_report_oom *ooms;
    size_t nnotices;
    gmp_report_notice *notices;
    size_t nstacks;
    gmp_report_stack *stacks;
    gmp_intern strs;    /* the trace's strings, each once: read them with gmp_report_str */
    uint64_t bucket_ns; /* timeline bucket width */
    gmp_analysis_result *analysis; /* growth, temporaries, overhead (gmp_analysis.h); NULL none */
    struct gmp_report_live *live;  /* during the pass only */
    /* the what-if replay of a trace with an OOM (gmp_report_whatif.h), set by the CLI after the
     * pass and owned by the trace; NULL when not run */
    struct gmp_report_whatif *whatif;
} gmp_report_trace;

/* Names of native frames: the one place where they come from. The offline symbolizer lives in a
 * library of its own (formats/symbols/gmp_symbolize.h, libdwarf) that the agent must not link, so
 * the CLI plugs it in here (gmp_report_set_symbolizer). Without one, native frames are
 * module+offset. */
typedef struct gmp_report_sym {
    const char *function, *file; /* NULL when unknown */
    uint32_t line;
    const char *module; /* the module's path, NULL when none */
    uint64_t offset;
    int inlined;
    const char *unknown; /* why no function, NULL when known */
    char display[512];   /* the one-line name for tables */
} gmp_report_sym;

typedef struct gmp_report_symbolizer {
    /* Resolves a native address of the trace read by r into at most max frames (innermost first);
     * returns how many (0: unknown). *state is NULL at the first call for a trace and kept
     * between calls; free_state releases it once the trace is done. */
    size_t (*resolve)(void **state, const gmp_reader *r, uint64_t address, gmp_report_sym *out,
                      size_t max);
    void (*free_state)(void *state);
} gmp_report_symbolizer;

/* Process-wide: used by every report made afterwards (NULL: none). */
void gmp_report_set_symbolizer(const gmp_report_symbolizer *s);

typedef struct gmp_report_opts {
    size_t max_largest;         /* largest allocations kept (default 20, at most 1000) */
    gmp_analysis_opts analysis; /* zeros: defaults */
} gmp_report_opts;

/* One report: one or several traces. */
typedef struct gmp_report_doc {
    size_t ntraces;
    gmp_report_trace **traces;
    gmp_report_opts opts;
    char title[256];
    struct gmp_ranks_oom *ranks_oom; /* an OOM across ranks (gmp_report_ranks_oom.h); NULL none */
    void (*ranks_oom_free)(struct gmp_ranks_oom *); /* set with it: frees it */
} gmp_report_doc;

gmp_err gmp_report_doc_new(gmp_report_doc **out, const gmp_report_opts *opts);
void gmp_report_doc_free(gmp_report_doc *doc);
/* Adds a trace: registers the model's callbacks on rp (before gmp_replay_run). path names the
 * trace; label is "" or what tells the traces apart. The trace's part is complete after the
 * replay's end callback. */
gmp_err gmp_report_doc_add(gmp_report_doc *doc, gmp_replay *rp, const char *path,
                           const char *label);

static inline gmp_str gmp_report_str(const gmp_report_trace *t, uint32_t i)
{
    if (i >= gmp_intern_count(&t->strs)) /* GMP_REPORT_ALL too */
        return (gmp_str){"", 0};
    size_t n;
    const char *p = gmp_intern_get(&t->strs, i, &n);
    return (gmp_str){p, (uint32_t)n};
}

/* ---- views: what the report shows ---- */

enum {
    GMP_REPORT_BY_RANGE = 1,
    GMP_REPORT_BY_STACK = 2,
    GMP_REPORT_BY_KIND = 4,
    GMP_REPORT_BY_API = 8,
    GMP_REPORT_BY_FRAME = 16,    /* the first frame a stack shows (the innermost user frame), in the
                                    row's `range` (a string index) */
    GMP_REPORT_BY_CATEGORY = 32, /* --by category: the table by category (gmp_frames.h) */
};

typedef enum gmp_report_sort {
    GMP_REPORT_SORT_PATH = 0,
    GMP_REPORT_SORT_TIME,
    GMP_REPORT_SORT_COUNT,
    GMP_REPORT_SORT_ALLOC,
    GMP_REPORT_SORT_FREED,
    GMP_REPORT_SORT_NET,
    GMP_REPORT_SORT_LEFT,
    GMP_REPORT_SORT_PEAK,
    GMP_REPORT_SORT_FRAG,
} gmp_report_sort;

typedef struct gmp_report_view {
    size_t top;     /* rows per device in each table; 0 = all */
    int64_t device; /* INT64_MIN: all */
    unsigned by; /* GMP_REPORT_BY_* shown for the live set at the peak (default range|stack|kind) */
    gmp_report_sort sort;
    int color;      /* text: ANSI colours */
    int all_frames; /* stacks show every frame (--all-frames); else internal frames are folded */
} gmp_report_view;

/* Parses a comma-separated list of "range", "stack", "kind", "api", "category" for --by; 0 when
 * unknown. */
unsigned gmp_report_parse_by(const char *s);
int gmp_report_parse_sort(const char *s, gmp_report_sort *out);
const char *gmp_report_sort_name(gmp_report_sort s);

int gmp_report_wanted(const gmp_report_view *v, int32_t device);

/* What a table shows: the sites of t grouped by the keys in by (GMP_REPORT_BY_*), each row's
 * bytes/count taken from `what`, rows of a device sorted largest first (ties by key), devices in
 * order. Rows outside the view's device or with a zero count are left out. Caller frees. */
typedef enum gmp_report_what {
    GMP_REPORT_PEAK,  /* live at the device's peak (device kinds) */
    GMP_REPORT_LEAKS, /* live at the end (kinds that hold memory; static variables are no leak) */
    GMP_REPORT_SITES, /* allocation counts (kinds that hold memory), most allocations first,
                         every device together (not device by device) */
} gmp_report_what;
gmp_report_row *gmp_report_group(const gmp_report_trace *t, const gmp_report_view *v,
                                 gmp_report_what what, unsigned by, size_t *n);

/* The ranges of the view (device), sorted by v->sort; caller frees. */
gmp_report_range *gmp_report_sorted_ranges(const gmp_report_trace *t, const gmp_report_view *v,
                                           size_t *n);

/* Kinds that hold memory of their own (leaks are reported for them). */
int gmp_report_kind_holds_memory(uint32_t kind);

/* ---- helpers for the builders ---- */

/* The display text of a frame (raw bytes: escape them): "function (file:line)" for Python frames
 * and symbolized native frames, "libfoo.so+0x1a2b" (module file name) or "0x401000" otherwise.
 * Writes at most n bytes with the NUL; returns the length written. */
size_t gmp_report_frame_text(const gmp_report_trace *t, const gmp_report_frame *f, char *buf,
                             size_t n);

/* The report in one format: built once as a document (gmp_report_build.h) and written by that
 * format's renderer (gmp_render.h). GMP_ERR_IO when the stream reports an error. */
gmp_err gmp_report_write_text(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v);
gmp_err gmp_report_write_md(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v);
gmp_err gmp_report_write_html(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v);
/* The HTML report with timeline_html (markup: the interactive view, made by cli/cmd_report.c)
 * placed before its first timeline (gmp_render_opts.timeline_html); NULL: gmp_report_write_html. */
gmp_err gmp_report_write_html_timeline(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v,
                                       const char *timeline_html);
gmp_err gmp_report_write_json(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v);

typedef gmp_err (*gmp_report_writer)(const gmp_report_doc *, FILE *, const gmp_report_view *);
/* "text", "markdown" (or "md"), "html", "json"; NULL when unknown. */
gmp_report_writer gmp_report_writer_by_name(const char *name);
/* The format a file name asks for: .txt, .md, .html/.htm, .json; NULL when none. */
const char *gmp_report_format_for_path(const char *path);

#endif
