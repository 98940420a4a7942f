/* gmp_doc: the report document. A report (and every other text the CLI writes about a recording:
 * `diff`, the summary `run` prints) is built once as a tree of typed blocks, and each output format
 * is one small renderer that walks the tree (gmp_render.h): text (with and without colour),
 * Markdown, HTML and JSON. Builders decide what is said (which rows, --top, --device); renderers
 * decide only how it looks, and know nothing about what a block is about. An analysis that adds
 * blocks therefore appears in every format at once.
 *
 * Blocks:
 *   SECTION  a heading (title) over child blocks; its depth in the tree is its heading level (an
 *            untitled section below the root only groups blocks, e.g. for a JSON object: it
 *            shows no heading and adds no level)
 *   KV       a key/value list: each item a label and a line of values
 *   TABLE    typed columns (title, JSON key, value type, flags) and rows of cells
 *   SERIES   a time series: per point a time and one value per column, range lanes under it and
 *            marks (the peak, OOMs)
 *   STACK    a call stack shown whole
 *   VERDICT  a finding with a severity: a line, and child blocks that explain it
 *   NOTICE   a line of text with a severity (a note, a warning, "and 3 more")
 * Values (gmp_doc_val) are typed: the builder gives numbers, renderers format them (one way for
 * every format: gmp_doc_fmt) or write them as JSON numbers. Text from a trace (range names, API
 * names, paths) is untrusted bytes (GMP_DOC_STR): every renderer escapes it; our own wording
 * (GMP_DOC_LIT) is trusted.
 *
 * JSON (gmp_render_json.c) follows keys: a value, column or block without a key is not in the JSON
 * (wording, or what the JSON says elsewhere in numbers); a value or column with GMP_DOC_DATA is
 * only in the JSON. A SECTION with a key is an object member; without one its children belong to
 * the enclosing object. Blocks with GMP_DOC_ITEM are elements of the array named by their key in
 * the enclosing object (siblings with one key make one array, in order). A TABLE is an array of
 * objects, a KV list contributes its keyed values as members, a SERIES is {bucket_ns, columns,
 * points}, a VERDICT or NOTICE is an object {severity, text, keyed values..., children...}.
 *
 * Memory: every block, value and string lives in the document's arena, freed with the document.
 * Builders do not check each call: a failed allocation sets a sticky error (gmp_doc_error) and
 * later calls do nothing; the builder checks once at the end. */
#ifndef GMP_DOC_H
#define GMP_DOC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_trace.h"

typedef enum gmp_doc_type {
    GMP_DOC_NONE = 0, /* nothing (an empty cell; JSON null) */
    GMP_DOC_LIT,      /* our own text: s */
    GMP_DOC_STR,      /* untrusted text from a trace: s; `none` shown when s is empty (JSON null) */
    GMP_DOC_BYTES,    /* u bytes: "1.50 GiB" */
    GMP_DOC_SBYTES,   /* i bytes, signed change: "+1.50 GiB", "-512 B" */
    GMP_DOC_COUNT,    /* u: "1234" */
    GMP_DOC_INT,      /* i: "-3" */
    GMP_DOC_TIME,     /* u: trace-clock ns, shown relative to t0: "+0.009000 s"; JSON: u */
    GMP_DOC_DUR,      /* u: a duration in ns: "1.234 ms" */
    GMP_DOC_PCT,      /* d: a percentage: "82.8%" */
    GMP_DOC_REAL,     /* d: "2.50" */
    GMP_DOC_BOOL,     /* u: "yes"/"no"; JSON true/false */
    GMP_DOC_DEVICE,   /* i: "host" for -1, else the id; JSON: the id */
    GMP_DOC_HEX,      /* u: "0x7f00"; JSON: the same string */
    GMP_DOC_STACK,    /* stack: innermost frame first */
} gmp_doc_type;

/* Flags of values, columns, items and blocks. */
enum {
    GMP_DOC_STRONG = 1 << 0, /* emphasis (the figure a line is about) */
    GMP_DOC_WARN = 1 << 1,   /* worth a look (yellow) */
    GMP_DOC_BAD = 1 << 2,    /* a problem (red) */
    GMP_DOC_DATA = 1 << 3,   /* only in the JSON */
    GMP_DOC_VIEW = 1 << 4,   /* never in the JSON (even with a key) */
    GMP_DOC_ITEM = 1 << 5,   /* block: an element of the array named by its key */
    GMP_DOC_BAR = 1 << 6,    /* column: HTML draws each cell as a bar, scaled to the column's max */
    GMP_DOC_RAW = 1 << 7,    /* BYTES: also the exact number of bytes ("1.50 GiB (1610612736)") */
    GMP_DOC_CODE = 1 << 8,   /* STR/LIT: code-like (a command line): monospace where possible */
    GMP_DOC_SIGN = 1 << 9,   /* INT, PCT: a change, always signed: "+3", "-1", "+0", "+23.8%" */
    GMP_DOC_TAIL = 1 << 10,  /* STR column: the text renderer shows the end of a long cell, its
                                start elided ("…/layers.11/attn/q_proj"); the others show it all */
};

typedef enum gmp_doc_severity {
    GMP_DOC_INFO = 0, /* a note */
    GMP_DOC_OK,       /* nothing wrong was found */
    GMP_DOC_WARNING,  /* worth a look */
    GMP_DOC_PROBLEM,  /* something is wrong (a leak, an OOM) */
} gmp_doc_severity;

/* One frame of a stack, as the trace and a symbolizer know it. Strings are raw bytes. */
typedef struct gmp_doc_frame {
    int python;             /* 1: a Python frame; 0: native */
    gmp_str function, file; /* empty: unknown */
    uint32_t line;
    gmp_str module;   /* native: the module's path (empty: none) */
    uint64_t offset;  /* native: address - module base */
    uint64_t address; /* native: the return address */
    int inlined;      /* native: inlined into the next frame */
    gmp_str unknown;  /* native: why the function is unknown (empty: known) */
    gmp_str display;  /* the one-line name: "f (file.py:12)", "libx.so+0x12", "0x401000" */
    int internal;     /* folded: markups show a run of such frames as "+N internal frames"; the
                         JSON keeps every frame and marks these ("internal": true). 2: folded
                         but shown, to tell the stack apart from another (gmp_frames_apart) */
} gmp_doc_frame;

typedef struct gmp_doc_stack {
    size_t n;
    const gmp_doc_frame *frames; /* innermost first */
    size_t min_items; /* markups show at least this many items of it (0: their own number), so
                         that two different stacks of a table never look the same */
    int show_all;     /* markups fold nothing; the JSON still marks the internal frames (the
                         report tells alike stacks apart by a frame instead: gmp_frames_apart) */
} gmp_doc_stack;

typedef struct gmp_doc_val {
    gmp_doc_type type;
    unsigned flags;
    const char *key;  /* JSON member name (a string constant), NULL: not in the JSON */
    uint64_t u;       /* BYTES COUNT TIME DUR BOOL HEX */
    int64_t i;        /* SBYTES INT DEVICE; TIME: the base t0 it is shown relative to */
    double d;         /* PCT REAL */
    gmp_str s;        /* LIT STR */
    const char *none; /* STR: shown when s is empty ("(no range)") */
    const gmp_doc_stack *stack;
    const char *ref; /* LIT: a reference to the section whose anchor this is (HTML: a link to it;
                        other formats: the text alone); NULL: none */
} gmp_doc_val;

/* A line: values written one after another (text runs and figures). */
typedef struct gmp_doc_line {
    size_t n, cap;
    gmp_doc_val *v;
} gmp_doc_line;

typedef struct gmp_doc_item {
    const char *label; /* our wording: "peak allocated" */
    unsigned flags;    /* GMP_DOC_DATA: the whole item only in the JSON */
    gmp_doc_line value;
} gmp_doc_item;

typedef struct gmp_doc_col {
    const char *title; /* heading in markups */
    const char *key;   /* JSON member name; NULL: not in the JSON */
    gmp_doc_type type; /* every cell of the column has this type, or NONE */
    unsigned flags;    /* DATA, VIEW, BAR, RAW */
} gmp_doc_col;

/* A SERIES column: how its values are drawn. */
enum {
    GMP_DOC_S_LINE = 0, /* a line */
    GMP_DOC_S_LOW,      /* the lower edge of a band; the next column is its upper edge */
    GMP_DOC_S_HIGH,     /* the upper edge of the band opened by the previous column */
    GMP_DOC_S_DOTS,     /* dots where the value is not 0 (0: no value) */
    GMP_DOC_S_HIDDEN,   /* not drawn (only in the JSON) */
};

typedef struct gmp_doc_scol {
    const char *title; /* legend */
    const char *key;   /* JSON column name */
    unsigned role;     /* GMP_DOC_S_* */
    unsigned flags;    /* GMP_DOC_STRONG: the column a text sparkline shows */
} gmp_doc_scol;

typedef struct gmp_doc_span {
    uint64_t t0, t1; /* trace-clock ns */
    gmp_str label;   /* untrusted */
} gmp_doc_span;

typedef struct gmp_doc_lane {
    const char *label; /* our wording: "tid 12 depth 1" */
    size_t n, cap;
    gmp_doc_span *spans;
} gmp_doc_lane;

typedef struct gmp_doc_mark {
    uint64_t t;        /* trace-clock ns */
    const char *label; /* our wording */
    unsigned flags;    /* GMP_DOC_BAD: drawn as a problem (an OOM) */
} gmp_doc_mark;

typedef enum gmp_doc_kind {
    GMP_DOC_SECTION = 1,
    GMP_DOC_KV,
    GMP_DOC_TABLE,
    GMP_DOC_SERIES,
    GMP_DOC_STACKB,
    GMP_DOC_VERDICT,
    GMP_DOC_NOTICE,
} gmp_doc_kind;

typedef struct gmp_doc_block gmp_doc_block;
struct gmp_doc_block {
    gmp_doc_kind kind;
    unsigned flags;
    const char *key;
    gmp_doc_severity severity; /* VERDICT, NOTICE */
    /* SECTION: the heading; TABLE, SERIES, STACKB: a caption (may be empty); VERDICT, NOTICE: the
     * text */
    gmp_doc_line title;
    gmp_doc_block *parent, *first, *last, *next; /* children: SECTION, VERDICT */
    const char *anchor; /* SECTION: a name other blocks refer to (gmp_dv_ref; HTML: the heading's
                           id), unique in the document; NULL: none */

    /* KV */
    size_t nitems, items_cap;
    gmp_doc_item *items;

    /* TABLE: nrows x ncols cells, row-major. total: rows there were before --top (0: all shown).
     */
    size_t ncols, nrows, rows_cap;
    gmp_doc_col *cols;
    gmp_doc_val *cells;
    uint64_t total;

    /* SERIES: npoints times x[] (each point's end; the first point's start is x0) and npoints x
     * nscols values y[], row-major; values are bytes. t0: what times are shown relative to. */
    uint64_t x0, t0, bucket_ns, ymax;
    const char *xkey; /* JSON name of x (NULL: "time_ns"); set when x is not a time */
    size_t npoints, nscols;
    gmp_doc_scol *scols;
    uint64_t *x, *y;
    size_t nlanes, lanes_cap;
    gmp_doc_lane *lanes;
    size_t nmarks, marks_cap;
    gmp_doc_mark *marks;

    /* STACKB */
    gmp_doc_stack stack;
};

typedef struct gmp_doc gmp_doc;

/* The document; its root is an untitled SECTION (the JSON's top-level object). */
gmp_doc *gmp_doc_new(void);
void gmp_doc_free(gmp_doc *d);
gmp_doc_block *gmp_doc_root(gmp_doc *d);
const gmp_doc_block *gmp_doc_root_c(const gmp_doc *d);
/* GMP_OK, or the first failure (GMP_ERR_NOMEM) of any call since gmp_doc_new. */
gmp_err gmp_doc_error(const gmp_doc *d);
/* Copies bytes into the document's arena (valid as long as the document). */
gmp_str gmp_doc_strdup(gmp_doc *d, const char *s, size_t n);
const char *gmp_doc_cstr(gmp_doc *d, const char *s); /* NUL-terminated copy */
/* Memory of the arena, zeroed. NULL on failure (and the error is set). */
void *gmp_doc_alloc(gmp_doc *d, size_t n);
/* A value a builder keeps for the document's lifetime under (owner, key), so that what several
 * tables show (the same stack) is made once: NULL when none was put. A failed put keeps nothing
 * (the value is made again). */
const void *gmp_doc_memo_get(const gmp_doc *d, const void *owner, uint64_t key);
void gmp_doc_memo_put(gmp_doc *d, const void *owner, uint64_t key, const void *val);

/* ---- values ---- */
gmp_doc_val gmp_dv_lit(const char *s); /* s must outlive the document: a constant or copied */
gmp_doc_val gmp_dv_str(gmp_str s, const char *none);
gmp_doc_val gmp_dv_bytes(uint64_t b);
gmp_doc_val gmp_dv_sbytes(int64_t b);
gmp_doc_val gmp_dv_count(uint64_t n);
gmp_doc_val gmp_dv_int(int64_t n);
gmp_doc_val gmp_dv_time(uint64_t ns, uint64_t t0);
gmp_doc_val gmp_dv_dur(uint64_t ns);
gmp_doc_val gmp_dv_pct(double p);
gmp_doc_val gmp_dv_real(double r);
gmp_doc_val gmp_dv_bool(int b);
gmp_doc_val gmp_dv_device(int64_t id);
gmp_doc_val gmp_dv_hex(uint64_t x);
gmp_doc_val gmp_dv_stack(const gmp_doc_stack *s); /* NULL or no frames: NONE */
gmp_doc_val gmp_dv_none(void);
/* LIT text s that refers to the section anchored `anchor` (gmp_doc_anchor); both must outlive the
 * document. */
gmp_doc_val gmp_dv_ref(const char *s, const char *anchor);
/* The same value with a JSON key and flags added. */
gmp_doc_val gmp_dv_k(gmp_doc_val v, const char *key);
gmp_doc_val gmp_dv_f(gmp_doc_val v, unsigned flags);

/* Appends to a line: literal text between `%v` conversions, each of which takes one gmp_doc_val
 * from the arguments (`%%` is a '%'). The literal text is copied. */
void gmp_doc_linef(gmp_doc *d, gmp_doc_line *l, const char *fmt, ...);
void gmp_doc_vlinef(gmp_doc *d, gmp_doc_line *l, const char *fmt, va_list ap);
void gmp_doc_line_add(gmp_doc *d, gmp_doc_line *l, gmp_doc_val v);

/* ---- blocks (appended as the last child of parent) ---- */
/* A section; title as gmp_doc_linef. key NULL: merged into the parent's JSON object. */
gmp_doc_block *gmp_doc_section(gmp_doc *d, gmp_doc_block *parent, const char *key, unsigned flags,
                               const char *fmt, ...);
gmp_doc_block *gmp_doc_kv(gmp_doc *d, gmp_doc_block *parent);
/* Names section s (copied) so that gmp_dv_ref can point at it. */
void gmp_doc_anchor(gmp_doc *d, gmp_doc_block *s, const char *anchor);
/* An item: label, then the value as gmp_doc_linef. */
void gmp_doc_item_add(gmp_doc *d, gmp_doc_block *kv, const char *label, unsigned flags,
                      const char *fmt, ...);
/* A table with ncols columns (copied). */
gmp_doc_block *gmp_doc_table(gmp_doc *d, gmp_doc_block *parent, const char *key,
                             const gmp_doc_col *cols, size_t ncols);
/* A new row of NONE cells; returns its ncols cells to fill. */
gmp_doc_val *gmp_doc_row(gmp_doc *d, gmp_doc_block *table);
gmp_doc_block *gmp_doc_series(gmp_doc *d, gmp_doc_block *parent, const char *key,
                              const gmp_doc_scol *cols, size_t ncols, size_t npoints);
gmp_doc_lane *gmp_doc_lane_add(gmp_doc *d, gmp_doc_block *series, const char *label);
void gmp_doc_span_add(gmp_doc *d, gmp_doc_lane *lane, uint64_t t0, uint64_t t1, gmp_str label);
void gmp_doc_mark_add(gmp_doc *d, gmp_doc_block *series, uint64_t t, const char *label,
                      unsigned flags);
gmp_doc_block *gmp_doc_stack_block(gmp_doc *d, gmp_doc_block *parent, const char *key,
                                   const gmp_doc_stack *s);
gmp_doc_block *gmp_doc_verdict(gmp_doc *d, gmp_doc_block *parent, const char *key,
                               gmp_doc_severity sev, const char *fmt, ...);
gmp_doc_block *gmp_doc_notice(gmp_doc *d, gmp_doc_block *parent, const char *key,
                              gmp_doc_severity sev, const char *fmt, ...);

/* ---- for renderers ---- */

/* A value other than STR, LIT and STACK as text (the one way every format writes it). Returns buf.
 * NONE gives "". */
const char *gmp_doc_fmt(const gmp_doc_val *v, char *buf, size_t n);
/* "info", "ok", "warning", "problem" */
const char *gmp_doc_severity_name(gmp_doc_severity s);
/* Depth of a block: the root is 0, its children 1, ...; untitled sections other than the root
 * are not counted (a block under one has the depth it would have without it). */
int gmp_doc_depth(const gmp_doc_block *b);
/* The largest value a SERIES draws (of columns not HIDDEN); 0 when none. */
uint64_t gmp_doc_series_max(const gmp_doc_block *s);

#endif
