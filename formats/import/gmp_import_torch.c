/* gmp_import_torch: PyTorch memory snapshot -> gpumemprof trace. See gmp_import_torch.h for the
 * mapping and docs/import.md for the user's view.
 *
 * Three steps: (1) stream the pickle (gmp_pickle_stream: plain data only; the segments and the
 * trace entries arrive one by one and are forgotten) and turn every trace entry into a small op,
 * packed in a per-device buffer (field lengths, then the fields' bytes: about 14 bytes an entry),
 * and every frames list into a node of a trie of frames (cached on the list, so a list shared
 * through the pickle's memo is read once); (2) reconstruct what existed before the window from the
 * final `segments`; (3) write the pre-window state at the start, then the ops in time order (a
 * merge of the devices: ties go to the lower device, then entry order), with one thread and
 * explicit times (gmp_writer, threaded = 0; for a long trace the frames are compressed on helper
 * threads, compress_async, the same bytes). Strings and stack nodes are defined in the writer when
 * an op first needs them, in the order the frames are walked (outermost first), so the trace is the
 * same as when the whole tree was read. Strings and frames are deduplicated by content while
 * reading, so the trie's nodes are the writer's stack nodes one for one and are defined without
 * the writer's lookup (gmp_writer_stack_python_new). A temporary trace (GMP_IMPORT_TORCH_TEMPORARY)
 * is written stored, not compressed (see write_trace). */
#include "gmp_import_torch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_hash.h"
#include "gmp_import_strings.h"
#include "gmp_kmap.h"
#include "gmp_pickle.h"
#include "gmp_pickle_stream.h"
#include "gmp_rlimit.h"
#include "gmp_trace.h"
#include "gmp_tq.h"
#include "gmp_writer.h"

#ifndef GMP_VERSION_STRING
#define GMP_VERSION_STRING "?"
#endif

#define MAX_SIZE ((uint64_t)1 << 60)      /* larger sizes are refused as corrupt */
#define MAX_FRAMES 256                    /* innermost frames kept per stack */
#define TID 1                             /* the one thread of an imported trace */
#define FILLER_ADDR 0xf000000000000000ull /* + device: pre-window bytes with no address */
#define FILLER_POOL 0xd000000000000000ull /* + device: pre-window segments with no address */
#define SYNC_EVERY 8192
#define ONE_PASS_BUDGET_MIN                                                                        \
    ((uint64_t)16 << 20)              /* the one pass holds at most this, or a sixteenth of the    \
                                         file when more */
#define STORE_MAX_EVENTS (256u << 10) /* a temporary trace of more events is compressed */
#define IMPORT_STREAMED (1u << 30) /* write_trace's flags: into a pipe (gmp_import_torch_start) */
#define TRACE_BASE 1000000ull      /* trace time of the state before the window (1 ms) */
#define CUDA_ERROR_MEMORY_ALLOCATION 2 /* cudaErrorMemoryAllocation */

/* ---- state ---- */

enum op_type { OP_SEG_ALLOC, OP_SEG_FREE, OP_MAP, OP_UNMAP, OP_ALLOC, OP_FREE, OP_OOM };

typedef struct op {
    uint64_t t, addr, size, stream, extra; /* extra: OOM: device_free */
    uint32_t node;                         /* frames: a node of the trie (0: none) */
    uint32_t ctx; /* the entry's user_metadata and compile_context: I->ctxs index + 1 (0: none) */
    int32_t dev;
    uint8_t type;
} op;

/* First event of an address in the window: FIRST_ALLOC, or FIRST_FREE with the freed size. */
#define FIRST_ALLOC 1u
#define FIRST_FREE 2u
#define FIRST_VAL(type, size) (((uint64_t)(size) << 2) | (type))

typedef struct pre_block {
    uint64_t addr, size;
    uint32_t node;
} pre_block;

/* Ops of one device, in chunks: a type byte (its high 4 bits: the length of the seventh field),
 * three bytes with the length in bytes (0 to 8) of each other field (4 bits each), then the fields
 * (little-endian, those bytes only): the time since the previous op, the address's change
 * (zigzag), size, stream, frames node, device_free (0 but for an OOM) and the context (op.ctx). A
 * field is written and read as 8 bytes at once (the next ones overwrite the rest), so an op needs
 * 4 + 7 * 8 bytes of room at most. */
#define CHUNK_BYTES ((size_t)2 << 20) /* a chunk's mapping: one huge page where the kernel can */
#define CHUNK (CHUNK_BYTES - 2 * sizeof(size_t))
#define OP_MAX_BYTES 64 /* >= 4 + 7 * 8 */
typedef struct chunk {
    struct chunk *next;
    size_t len;
    unsigned char data[CHUNK];
} chunk;

/* Chunks are mappings of their own, not heap: one written into the trace is unmapped at once, so
 * the ops' memory leaves the process as the writing goes (from the heap it would stay, and a
 * report reading the trace as it is written, gmp_import_torch_start, would hold both the ops and
 * its own tables at their largest: the peak would be the sum of the two, not the larger). 2
 * MiB-aligned with MADV_HUGEPAGE, as the CLI's heap (cli/cli_heap.c), so that the kernel may map
 * each at once. */
static chunk *chunk_new(void)
{
    size_t len = 2 * CHUNK_BYTES;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)m + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1);
    unsigned char *c = (unsigned char *)a;
    if (c > m)
        munmap(m, (size_t)(c - m));
    if (c + CHUNK_BYTES < m + len)
        munmap(c + CHUNK_BYTES, (size_t)(m + len - (c + CHUNK_BYTES)));
#ifdef MADV_HUGEPAGE
    (void)madvise(c, CHUNK_BYTES, MADV_HUGEPAGE);
#endif
    return (chunk *)c;
}

static void chunk_free(chunk *c)
{
    if (c)
        munmap(c, CHUNK_BYTES);
}

typedef struct device {
    int present;
    kmap seg_first, blk_first;     /* address -> FIRST_VAL of the window's first event */
    uint64_t seg_in, seg_out;      /* window: segment_alloc / segment_free bytes */
    uint64_t map_in, map_out;      /* window: segment_map / segment_unmap bytes */
    uint64_t blk_in, blk_out;      /* window: alloc / free_completed bytes */
    uint64_t final_seg, final_exp; /* at the dump: non-expandable and expandable segment bytes */
    uint64_t final_alloc;          /* at the dump: requested bytes of active blocks */
    uint64_t pre_seg_sum, pre_blk_sum; /* reconstructed by address */
    uint64_t exp_mapped;               /* while writing: mapped bytes of expandable segments */
    int has_exp;
    /* the trace entries */
    uint32_t seq;    /* entries seen */
    uint64_t prev_t; /* time of the previous op (for entries without time_us) */
    uint64_t enc_t, enc_addr;
    uint64_t nops, first_t;
    chunk *head, *tail;
    /* while writing */
    chunk *rd;
    size_t rd_pos;
    uint64_t rd_left, rd_t, rd_addr;
    op next;
} device;

/* A block or segment alive at the dump (a candidate for "existed before the window"). */
typedef struct final_item {
    uint64_t addr, size;
    uint32_t node;
    int32_t dev;
} final_item;

/* An entry's context: its user_metadata (torch.cuda.memory._set_memory_metadata: a range path,
 * "/"-separated, such as "train/model/model.layers.3") and its compile_context (the innermost
 * "Torch-Compiled Region: ..." of torch.compile's regions; "N/A" outside one), strings of I->strs
 * (index + 1; 0: none). PyTorch writes both on every entry (torch/csrc/cuda/memory_snapshot.cpp,
 * _memory_snapshot_pickled, pytorch 127b7ad:433-434). */
typedef struct ctx_ent {
    uint32_t umeta, cctx;
} ctx_ent;

/* A record_function annotation (the snapshot's external_annotations: memory_snapshot.cpp:446-455;
 * recorded at START and END of every USER_SCOPE RecordFunction, _initRecordAnnotations,
 * memory_snapshot.cpp:124-139): torch.profiler.record_function and PyTorch's own
 * "Optimizer.step#AdamW.step", "enumerate(DataLoader)#...". */
typedef struct ann {
    uint64_t t;    /* ns, PyTorch's clock (time_us * 1000) */
    uint32_t name; /* I->strs index + 1 */
    uint32_t seq;  /* its place in the list (ties) */
    int32_t dev;
    uint8_t start; /* 1 START, 0 END */
} ann;

/* A final segment of a pool other than the main one (segment_pool_id != (0, 0)). */
typedef struct pseg {
    int32_t dev;
    uint32_t api; /* the writer's id + 1 of its blocks' API, once defined */
    uint64_t addr, size;
    int64_t a, b; /* the pool id */
} pseg;

/* While writing: one device's open ranges (its own thread, TID + device, so that each device's
 * START/END pairs nest by themselves). A context frame (ctx != 0) is only ever on top. */
typedef struct wframe {
    uint32_t path; /* the writer's range path */
    uint32_t name; /* annotation: I->strs index + 1; context frame: 0 */
    uint32_t ctx;  /* context frame: the context (I->ctxs index + 1) */
} wframe;

typedef struct dstate {
    gmp_wthread *th;
    wframe *st;
    uint32_t n, cap;
} dstate;

/* The frame table (what frames lists are made of), filled while reading. */
typedef struct frame {
    uint32_t file, fn, line;         /* strings: index + 1 (0: "") */
    uint32_t last_parent, last_node; /* the trie's last step through this frame (a cache) */
} frame;

typedef struct imp {
    gmp_import_torch_stats st;
    /* allocator_settings.PYTORCH_CUDA_ALLOC_CONF, for the header's options (alloc_conf=): only
     * when it is made of the characters PyTorch's syntax uses (key:value pairs, commas) */
    char alloc_conf[256];
    int has_conf;
    char *msg;
    size_t msglen;
    gmp_err err;
    device *dev; /* GMP_TORCH_MAX_DEVICES */
    int32_t *devs_with_ops;
    size_t ndevs_with_ops, cap_devs_with_ops;
    final_item *fsegs, *fblks;
    size_t nfsegs, nfblks, cap_fsegs, cap_fblks;
    pre_block *pre_segs, *pre_blks;
    size_t npre_segs, npre_blks, cap_pre_segs, cap_pre_blks;
    int32_t *pre_seg_dev, *pre_blk_dev;
    gmp_import_strtab strs; /* the strings of the frames */
    frame *frames;
    size_t nframes, cap_frames;
    uint32_t *fslot; /* frames by content (file, fn, line): index + 1 (0: empty); fcap slots */
    size_t fcap;
    uint32_t *node_parent, *node_frame, *node_wid; /* node 0: no frame */
    uint32_t *node_child;                          /* the child last stepped to (a cache: 0 none) */
    size_t nnodes, cap_nodes;
    kmap trie;   /* parent << 32 | frame -> node */
    kmap ctxmap; /* umeta << 32 | cctx -> index + 1 into ctxs (while reading) */
    ctx_ent *ctxs;
    size_t nctxs, cap_ctxs;
    ann *anns;
    size_t nanns, cap_anns;
    dstate *ds;  /* GMP_TORCH_MAX_DEVICES, while writing */
    pseg *psegs; /* sorted by device and address once read */
    size_t npsegs, cap_psegs;
    uint32_t dom_ann, dom_meta, dom_cc;
    /* first events on their way to the devices' maps (see first_event) */
    struct fe_pending {
        uint64_t addr, val;
        uint32_t dk; /* device << 1 | segment */
    } * fe_log;
    size_t fe_n;
    uint64_t *fe_recent;    /* FE_RECENT addresses + 1 (0: none) ... */
    uint32_t *fe_recent_dk; /* ... of these devices and kinds: put in a map or in fe_log */
    gmp_pkstream *ps;
    /* writing */
    gmp_writer *w;
    gmp_wthread *th;
    uint32_t api_malloc, api_free;
    gmp_rec rpool, rmem; /* records reused event after event (the fields not set stay 0) */
    uint64_t written, last_t, lost_said;
    char notice[768]; /* the longest notice (overflow, 32 devices) fits */
    const char *ctx;  /* for messages: what is being read (a static string) */
} imp;

__attribute__((format(printf, 3, 4))) static gmp_err failf(imp *I, gmp_err e, const char *fmt, ...)
{
    if (I->err != GMP_OK)
        return I->err;
    I->err = e;
    if (I->msg && I->msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(I->msg, I->msglen, fmt, ap);
        va_end(ap);
    }
    return e;
}

static gmp_err nomem(imp *I)
{
    return failf(I, GMP_ERR_NOMEM, "out of memory");
}

static device *dev_get(imp *I, int64_t d)
{
    if (d < 0 || d >= GMP_TORCH_MAX_DEVICES) {
        failf(I, GMP_ERR_FORMAT,
              "not a valid PyTorch memory snapshot: device %" PRId64 " (expected 0 to %d)", d,
              GMP_TORCH_MAX_DEVICES - 1);
        return NULL;
    }
    device *v = &I->dev[d];
    if (!v->present) {
        v->present = 1;
        I->st.devices++;
    }
    return v;
}

/* ---- reading fields ---- */

static int field_u64_slow(imp *I, const gmp_pkv *v, const char *key, int required, uint64_t *out)
{
    if (!v || v->type == GMP_PK_NONE) {
        if (required) {
            failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: %s without '%s'", I->ctx,
                  key);
            return -1;
        }
        return 0;
    }
    if (gmp_pkv_get_u64(v, out) < 0) {
        int64_t s;
        if (gmp_pkv_get_i64(v, &s) == 0 && strcmp(key, "stream") == 0) {
            *out = (uint64_t)s; /* a stream is a pointer: any bits */
            return 1;
        }
        failf(I, GMP_ERR_FORMAT,
              "not a valid PyTorch memory snapshot: %s: '%s' is a %s, expected a non-negative "
              "int",
              I->ctx, key, gmp_pkv_type_name(v));
        return -1;
    }
    return 1;
}

/* 1 with the value in *out; 0 when absent and not required; -1 (with the message) otherwise. */
static inline int field_u64(imp *I, const gmp_pkv *v, const char *key, int required, uint64_t *out)
{
    if (v && v->type == GMP_PK_INT && (v->big || v->v.i >= 0)) {
        *out = v->v.u;
        return 1;
    }
    return field_u64_slow(I, v, key, required, out);
}

static int get_u64(imp *I, const gmp_pkv *d, const char *key, int required, uint64_t *out)
{
    return field_u64(I, gmp_pkv_dict_get(d, key), key, required, out);
}

static int size_ok(imp *I, uint64_t s)
{
    if (s > MAX_SIZE) {
        failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: %s: size %" PRIu64, I->ctx,
              s);
        return 0;
    }
    return 1;
}

static int add_checked(imp *I, uint64_t *sum, uint64_t v)
{
    if (*sum > UINT64_MAX - v) {
        failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: sizes add up past 2^64");
        return -1;
    }
    *sum += v;
    return 0;
}

static int grow_array(imp *I, void **arr, size_t *cap, size_t need, size_t esz)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need)
        nc *= 2;
    void *n = realloc(*arr, nc * esz);
    if (!n)
        return nomem(I), -1;
    *arr = n;
    *cap = nc;
    return 0;
}

static int push_pre(imp *I, int seg, int32_t d, uint64_t addr, uint64_t size, uint32_t node)
{
    pre_block **arr = seg ? &I->pre_segs : &I->pre_blks;
    int32_t **devs = seg ? &I->pre_seg_dev : &I->pre_blk_dev;
    size_t *n = seg ? &I->npre_segs : &I->npre_blks;
    size_t *cap = seg ? &I->cap_pre_segs : &I->cap_pre_blks;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        pre_block *na = realloc(*arr, nc * sizeof *na);
        if (!na)
            return nomem(I), -1;
        *arr = na;
        int32_t *nd = realloc(*devs, nc * sizeof *nd);
        if (!nd)
            return nomem(I), -1;
        *devs = nd;
        *cap = nc;
    }
    (*arr)[*n] = (pre_block){addr, size, node};
    (*devs)[*n] = d;
    (*n)++;
    return 0;
}

/* The first event of each address in the window goes to a map per device and kind (blocks,
 * segments) that is much larger than the caches at scale (a snapshot of 2 M entries touches 190 k
 * addresses): looked up entry by entry, nearly every lookup waited for memory. So the events are
 * logged and put in the maps FE_LOG at a time, in order (the maps end up the same), loading the
 * slots a few events ahead; and an event of an address seen recently (the cache fe_recent: an
 * address is mostly freed and reused soon after) is not its first, so it is not logged at all. */
#define FE_LOG 1024
#define FE_RECENT 4096
#define FE_AHEAD 16

static kmap *fe_map(imp *I, uint32_t dk)
{
    device *dv = &I->dev[dk >> 1];
    return dk & 1 ? &dv->seg_first : &dv->blk_first;
}

static int fe_flush(imp *I)
{
    struct fe_pending *l = I->fe_log;
    size_t n = I->fe_n;
    I->fe_n = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + FE_AHEAD < n)
            kmap_prefetch(fe_map(I, l[i + FE_AHEAD].dk), l[i + FE_AHEAD].addr);
        int fresh;
        if (!kmap_put(fe_map(I, l[i].dk), l[i].addr, l[i].val, &fresh))
            return nomem(I), -1;
    }
    return 0;
}

/* Records the first event of addr in the window (of device d; seg: a segment's). */
static int first_event(imp *I, int32_t d, int seg, uint64_t addr, unsigned type, uint64_t size)
{
    uint32_t dk = (uint32_t)d << 1 | (uint32_t)seg;
    size_t j =
        (size_t)((addr >> 9) ^ (addr >> 21) ^ ((uint64_t)dk * 0x9e3779b1u)) & (FE_RECENT - 1);
    if (I->fe_recent) {
        if (I->fe_recent[j] == addr + 1 && I->fe_recent_dk[j] == dk && addr != UINT64_MAX)
            return 0;
    } else {
        I->fe_log = malloc(FE_LOG * sizeof *I->fe_log);
        I->fe_recent = calloc(FE_RECENT, sizeof *I->fe_recent);
        I->fe_recent_dk = calloc(FE_RECENT, sizeof *I->fe_recent_dk);
        if (!I->fe_log || !I->fe_recent || !I->fe_recent_dk)
            return nomem(I), -1;
    }
    if (I->fe_n == FE_LOG && fe_flush(I) < 0)
        return -1;
    I->fe_log[I->fe_n++] = (struct fe_pending){addr, FIRST_VAL(type, size), dk};
    if (addr != UINT64_MAX) {
        I->fe_recent[j] = addr + 1;
        I->fe_recent_dk[j] = dk;
    }
    return 0;
}

/* ---- frames: strings, frames and a trie of them, cached on the pickle's objects ---- */

/* The index + 1 of the string bytes[0..n) in I->strs (gmp_import_strings.c); 0: out of memory. */
static uint32_t str_intern(imp *I, const char *bytes, uint32_t n)
{
    uint32_t x = gmp_import_str_intern(&I->strs, bytes, n);
    if (!x)
        nomem(I);
    return x;
}

/* The string of a STR or BYTES value as an index + 1 in the table (0: not a string: ""). The
 * index is cached on the object (tag bits 0-31), so a string shared through the memo is looked up
 * once. */
static uint32_t str_of(imp *I, const gmp_pkv *v)
{
    if (!v || (v->type != GMP_PK_STR && v->type != GMP_PK_BYTES))
        return 0;
    gmp_pkobj *o = v->v.o;
    if (o->tag & 0xffffffffu)
        return (uint32_t)(o->tag & 0xffffffffu);
    uint32_t x = str_intern(I, o->d.s, o->n);
    o->tag |= (uint64_t)x;
    return x;
}

static uint64_t frame_hash(uint32_t file, uint32_t fn, uint32_t line)
{
    uint64_t h = ((uint64_t)file << 32 | fn) * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)line * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t frame_hash_at(void *ctx, size_t i)
{
    imp *I = ctx;
    const frame *f = &I->frames[i];
    return frame_hash(f->file, f->fn, f->line);
}

/* A frame dict as a frame index + 1 (cached on the dict); 0 for a value that is not a dict. */
static uint32_t frame_of(imp *I, const gmp_pkv *f)
{
    if (!f || f->type != GMP_PK_DICT)
        return 0;
    gmp_pkobj *o = f->v.o;
    if (o->tag)
        return (uint32_t)o->tag;
    uint64_t line = 0;
    if (gmp_pkv_get_u64(gmp_pkv_dict_get(f, "line"), &line) < 0 || line > UINT32_MAX)
        line = 0;
    uint32_t file = str_of(I, gmp_pkv_dict_get(f, "filename"));
    uint32_t fn = str_of(I, gmp_pkv_dict_get(f, "name"));
    /* a name that is not a string is "", as the writer defines it: one frame with the empty string
     */
    if (I->err == GMP_OK && (!file || !fn)) {
        uint32_t empty = str_intern(I, "", 0);
        file = file ? file : empty;
        fn = fn ? fn : empty;
    }
    if (I->err != GMP_OK)
        return 0;
    /* frames by content: dicts with the same file, function and line are one frame */
    if ((I->nframes + 1) * 2 > I->fcap &&
        gmp_import_slots_grow(&I->fslot, &I->fcap, I->nframes, frame_hash_at, I) < 0)
        return nomem(I), 0;
    size_t j = frame_hash(file, fn, (uint32_t)line) & (I->fcap - 1);
    for (uint32_t x; (x = I->fslot[j]) != 0; j = (j + 1) & (I->fcap - 1)) {
        const frame *g = &I->frames[x - 1];
        if (g->file == file && g->fn == fn && g->line == (uint32_t)line) {
            o->tag = x;
            return x;
        }
    }
    frame fr = {file, fn, (uint32_t)line, 0, 0};
    if (grow_array(I, (void **)&I->frames, &I->cap_frames, I->nframes + 1, sizeof *I->frames) < 0 ||
        I->nframes >= UINT32_MAX - 1)
        return nomem(I), 0;
    I->frames[I->nframes++] = fr;
    I->fslot[j] = (uint32_t)I->nframes;
    o->tag = I->nframes;
    return (uint32_t)I->nframes;
}

/* The trie node of a frames list (innermost first, as PyTorch writes it; at most MAX_FRAMES
 * innermost kept), cached on the list; 0 for none. */
static uint32_t node_of(imp *I, const gmp_pkv *frames)
{
    if (!frames || frames->type != GMP_PK_LIST)
        return 0;
    gmp_pkobj *o = frames->v.o;
    if (o->tag)
        return (uint32_t)(o->tag - 1);
    size_t n = gmp_pkv_len(frames);
    const gmp_pkv *items = n ? gmp_pkv_item(frames, 0) : NULL; /* n items (none kept: NULL) */
    if (!items)
        n = 0;
    if (n > MAX_FRAMES)
        n = MAX_FRAMES;
    uint32_t parent = 0;
    for (size_t i = n; i-- > 0;) {
        uint32_t f = frame_of(I, &items[i]);
        if (!f)
            continue;
        /* frames lists share their outer part: the step from a node is mostly the one before */
        uint32_t from = parent, c = I->nnodes ? I->node_child[parent] : 0;
        if (c && I->node_frame[c] == f) {
            parent = c;
            continue;
        }
        frame *fc = &I->frames[f - 1];
        if (fc->last_node && fc->last_parent == parent) { /* or the one before through f */
            parent = fc->last_node;
            I->node_child[from] = parent;
            continue;
        }
        int fresh;
        kslot *slot =
            kmap_put(&I->trie, ((uint64_t)parent << 32) | f, I->nnodes ? I->nnodes : 1, &fresh);
        if (!slot)
            return nomem(I), 0;
        if (fresh) {
            if (grow_array(I, (void **)&I->node_parent, &I->cap_nodes, I->nnodes + 1,
                           sizeof(uint32_t)) < 0)
                return 0;
            size_t cap = I->cap_nodes;
            uint32_t *nf = realloc(I->node_frame, cap * sizeof *nf);
            if (nf)
                I->node_frame = nf;
            uint32_t *nw = realloc(I->node_wid, cap * sizeof *nw);
            if (nw)
                I->node_wid = nw;
            uint32_t *nc = realloc(I->node_child, cap * sizeof *nc);
            if (nc)
                I->node_child = nc;
            if (!nf || !nw || !nc || I->nnodes >= UINT32_MAX - 1)
                return nomem(I), 0;
            if (I->nnodes == 0) { /* node 0: the root, no frame */
                I->node_parent[0] = I->node_frame[0] = I->node_wid[0] = I->node_child[0] = 0;
                I->nnodes = 1;
                if (grow_array(I, (void **)&I->node_parent, &I->cap_nodes, 2, sizeof(uint32_t)) < 0)
                    return 0;
            }
            I->node_parent[I->nnodes] = parent;
            I->node_frame[I->nnodes] = f;
            I->node_wid[I->nnodes] = 0;
            I->node_child[I->nnodes] = 0;
            slot->val = I->nnodes++;
        }
        parent = (uint32_t)slot->val;
        fc = &I->frames[f - 1]; /* the table may have moved */
        fc->last_parent = from;
        fc->last_node = parent;
        I->node_child[from] = parent;
    }
    o->tag = (uint64_t)parent + 1;
    gmp_pkstream_husk(I->ps, o); /* only the node is needed from now on */
    return parent;
}

/* ---- contexts and annotations: the ranges ---- */

#define MAX_CTXS (1u << 20)        /* distinct contexts kept; an entry beyond them has none */
#define MAX_ANNOTATIONS (1u << 22) /* annotations kept; the rest are ignored (counted) */

/* The string of a STR value that says something (not empty, not PyTorch's "N/A"): its I->strs
 * index + 1, else 0. */
static uint32_t ctx_str(imp *I, const gmp_pkv *v)
{
    if (!v || v->type != GMP_PK_STR || v->v.o->n == 0 ||
        (v->v.o->n == 3 && memcmp(v->v.o->d.s, "N/A", 3) == 0))
        return 0;
    return str_of(I, v);
}

/* The context of an entry (*out: index + 1 into I->ctxs, 0: none); -1 when out of memory. */
static int ctx_of(imp *I, const gmp_pkv *umeta, const gmp_pkv *cctx, uint32_t *out)
{
    *out = 0;
    uint32_t u = ctx_str(I, umeta), c = ctx_str(I, cctx);
    if (I->err != GMP_OK)
        return -1;
    if (!u && !c)
        return 0;
    if (u)
        I->st.umeta_allocs++;
    if (c)
        I->st.cctx_allocs++;
    uint64_t key = (uint64_t)u << 32 | c;
    const kslot *k = kmap_get(&I->ctxmap, key);
    if (k) {
        *out = (uint32_t)k->val;
        return 0;
    }
    if (I->nctxs >= MAX_CTXS)
        return 0;
    if (grow_array(I, (void **)&I->ctxs, &I->cap_ctxs, I->nctxs + 1, sizeof *I->ctxs) < 0)
        return -1;
    int fresh;
    if (!kmap_put(&I->ctxmap, key, I->nctxs + 1, &fresh))
        return nomem(I), -1;
    I->ctxs[I->nctxs++] = (ctx_ent){u, c};
    *out = (uint32_t)I->nctxs;
    return 0;
}

static int cmp_ann(const void *a, const void *b)
{
    const ann *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The snapshot's external_annotations (a list of dicts {name, stage START|END, device, time_us}),
 * in time order. Untrusted: an item of another shape is ignored (counted), never an error; -1
 * only when out of memory. */
static int read_annotations(imp *I, const gmp_pkv *root)
{
    const gmp_pkv *l = gmp_pkv_dict_get(root, "external_annotations");
    if (!l || (l->type != GMP_PK_LIST && l->type != GMP_PK_TUPLE))
        return 0;
    size_t n = gmp_pkv_len(l);
    if (!I->st.has_time) { /* the entries have no time_us: nothing to put the ranges against */
        I->st.annotations_ignored += n;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const gmp_pkv *a = gmp_pkv_item(l, i);
        const gmp_pkv *name = gmp_pkv_dict_get(a, "name");
        const gmp_pkv *stage = gmp_pkv_dict_get(a, "stage");
        int64_t dev;
        uint64_t us;
        int start = gmp_pkv_str_eq(stage, "START");
        if (!a || a->type != GMP_PK_DICT || !name || name->type != GMP_PK_STR ||
            (!start && !gmp_pkv_str_eq(stage, "END")) ||
            gmp_pkv_get_i64(gmp_pkv_dict_get(a, "device"), &dev) != 0 || dev < 0 ||
            dev >= GMP_TORCH_MAX_DEVICES ||
            gmp_pkv_get_u64(gmp_pkv_dict_get(a, "time_us"), &us) != 0 ||
            us > UINT64_MAX / 1000 - 1 || I->nanns >= MAX_ANNOTATIONS) {
            I->st.annotations_ignored++;
            continue;
        }
        uint32_t nm = str_of(I, name);
        if (I->err != GMP_OK ||
            grow_array(I, (void **)&I->anns, &I->cap_anns, I->nanns + 1, sizeof *I->anns) < 0)
            return -1;
        I->anns[I->nanns] = (ann){us * 1000, nm, (uint32_t)I->nanns, (int32_t)dev, (uint8_t)start};
        I->nanns++;
    }
    I->st.annotations = I->nanns;
    if (I->nanns > 1)
        qsort(I->anns, I->nanns, sizeof *I->anns, cmp_ann);
    return 0;
}

/* ---- ops ---- */

/* The bytes v needs (0 for 0). */
static inline unsigned byte_len(uint64_t v)
{
    return v ? (unsigned)(71 - __builtin_clzll(v)) / 8 : 0;
}

/* Writes v as 8 little-endian bytes at p (room for 8). */
static inline void put_le8(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
#endif
}

/* The n (0 to 8) little-endian bytes at p (8 readable). */
static inline uint64_t get_le(const unsigned char *p, unsigned n)
{
    static const uint64_t mask[9] = {0,
                                     0xffull,
                                     0xffffull,
                                     0xffffffull,
                                     0xffffffffull,
                                     0xffffffffffull,
                                     0xffffffffffffull,
                                     0xffffffffffffffull,
                                     ~0ull};
    uint64_t v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, 8);
#else
    v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
#endif
    return v & mask[n];
}

static int push_op(imp *I, device *dv, int32_t d, const op *o)
{
    if (!dv->tail || CHUNK - dv->tail->len < OP_MAX_BYTES) {
        chunk *c = chunk_new();
        if (!c)
            return nomem(I), -1;
        c->next = NULL;
        c->len = 0;
        if (dv->tail)
            dv->tail->next = c;
        else
            dv->head = c;
        dv->tail = c;
    }
    if (!dv->nops) {
        if (grow_array(I, (void **)&I->devs_with_ops, &I->cap_devs_with_ops, I->ndevs_with_ops + 1,
                       sizeof *I->devs_with_ops) < 0)
            return -1;
        I->devs_with_ops[I->ndevs_with_ops++] = d;
        dv->first_t = o->t;
    }
    unsigned char *h = dv->tail->data + dv->tail->len, *p = h + 4;
    uint64_t da = o->addr - dv->enc_addr;
    uint64_t v[7] = {o->t - dv->enc_t,
                     (da << 1) ^ (uint64_t)((int64_t)da >> 63),
                     o->size,
                     o->stream,
                     o->node,
                     o->extra,
                     o->ctx};
    unsigned n[7];
    for (int i = 0; i < 7; i++) {
        n[i] = byte_len(v[i]);
        put_le8(p, v[i]);
        p += n[i];
    }
    h[0] = (unsigned char)(o->type | n[6] << 4);
    h[1] = (unsigned char)(n[0] | n[1] << 4);
    h[2] = (unsigned char)(n[2] | n[3] << 4);
    h[3] = (unsigned char)(n[4] | n[5] << 4);
    dv->enc_t = o->t;
    dv->enc_addr = o->addr;
    dv->tail->len = (size_t)(p - dv->tail->data);
    dv->nops++;
    return 0;
}

/* ---- step 1: the trace entries ---- */

enum {
    K_OTHER = 1,
    K_ACTION,
    K_ADDR,
    K_SIZE,
    K_STREAM,
    K_TIME,
    K_FRAMES,
    K_DEVFREE,
    K_UMETA,
    K_CCTX,
    K_COUNT
};
static const char *const key_names[] = {
    NULL,      NULL,     "action",      "addr",          "size",           "stream",
    "time_us", "frames", "device_free", "user_metadata", "compile_context"};
enum { A_OTHER = 1, A_ALLOC, A_FREE, A_SEG_ALLOC, A_SEG_FREE, A_MAP, A_UNMAP, A_OOM };
static const char *const action_names[] = {NULL,
                                           NULL,
                                           "alloc",
                                           "free_completed",
                                           "segment_alloc",
                                           "segment_free",
                                           "segment_map",
                                           "segment_unmap",
                                           "oom"};

/* What a string is, cached in its tag: as a trace entry's key (tag bits 32-39), as an action
 * (bits 40-47), as a segment's or block's key (bits 48-55), as a block's state (bits 56-63). The
 * strings that are keys are memoized by the pickler: each is compared with the names once. */
static unsigned classify_slow(gmp_pkobj *o, unsigned shift, const char *const *names, unsigned n)
{
    unsigned c = 1;
    for (unsigned i = 2; i < n; i++)
        if (o->n == strlen(names[i]) && memcmp(o->d.s, names[i], o->n) == 0)
            c = i;
    o->tag |= (uint64_t)c << shift;
    return c;
}

static inline unsigned classify(gmp_pkobj *o, unsigned shift, const char *const *names, unsigned n)
{
    unsigned c = (unsigned)(o->tag >> shift) & 0xff;
    return c ? c : classify_slow(o, shift, names, n);
}

/* The values of a dict's string keys by class into f[0..n) (NULL: absent; a key set twice: the
 * last one, as gmp_pkv_dict_get). d is a DICT. */
static inline void dict_fields(const gmp_pkv *d, unsigned shift, const char *const *names,
                               unsigned n, const gmp_pkv **f)
{
    const gmp_pkobj *o = d->v.o;
    const gmp_pkv *it = o->d.items;
    for (uint32_t i = 0; i < o->n; i++, it += 2)
        if (it->type == GMP_PK_STR)
            f[classify(it->v.o, shift, names, n)] = it + 1;
}

static int read_entry(imp *I, int64_t d64, const gmp_pkv *e)
{
    I->ctx = "a trace entry";
    if (e->type != GMP_PK_DICT)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a trace entry is a %s, expected a dict",
                     gmp_pkv_type_name(e)),
               -1;
    device *dv = dev_get(I, d64);
    if (!dv)
        return -1;
    int32_t d = (int32_t)d64;
    if (!dv->seq)
        dv->prev_t = 1000000000ull; /* without times: 1 s, then 1 us per entry */
    dv->seq++;
    I->st.entries++;
    const gmp_pkv *f[K_COUNT] = {0};
    dict_fields(e, 32, key_names, K_COUNT, f);
    const gmp_pkv *a = f[K_ACTION];
    if (!a || a->type != GMP_PK_STR)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a trace entry without an 'action'"),
               -1;
    op ob;
    memset(&ob, 0, sizeof ob);
    ob.dev = d;
    switch (classify(a->v.o, 40, action_names, A_OOM + 1)) {
    case A_ALLOC: ob.type = OP_ALLOC; break;
    case A_FREE: ob.type = OP_FREE; break;
    case A_SEG_ALLOC: ob.type = OP_SEG_ALLOC; break;
    case A_SEG_FREE: ob.type = OP_SEG_FREE; break;
    case A_MAP: ob.type = OP_MAP; break;
    case A_UNMAP: ob.type = OP_UNMAP; break;
    case A_OOM: ob.type = OP_OOM; break;
    default:
        I->st.ignored++; /* free_requested, snapshot, and what a newer PyTorch may add */
        return 0;
    }
    /* time: time_us when present, else 1 us after the previous entry; never backwards */
    uint64_t us, t = dv->prev_t + 1000;
    int ht = field_u64(I, f[K_TIME], "time_us", 0, &us);
    if (ht < 0)
        return -1;
    if (ht > 0 && us <= UINT64_MAX / 1000 - 1) {
        t = us * 1000;
        I->st.has_time = 1;
    }
    if (t < dv->prev_t)
        t = dv->prev_t;
    dv->prev_t = t;
    ob.t = t;
    if (field_u64(I, f[K_SIZE], "size", 1, &ob.size) < 0 || !size_ok(I, ob.size))
        return -1;
    if (field_u64(I, f[K_STREAM], "stream", 0, &ob.stream) < 0)
        return -1;
    ob.node = node_of(I, f[K_FRAMES]);
    if (I->err != GMP_OK)
        return -1;
    if ((ob.type == OP_ALLOC || ob.type == OP_OOM) && ctx_of(I, f[K_UMETA], f[K_CCTX], &ob.ctx) < 0)
        return -1;
    if (ob.type == OP_OOM) {
        if (field_u64(I, f[K_DEVFREE], "device_free", 0, &ob.extra) < 0)
            return -1;
        I->st.ooms++;
        return push_op(I, dv, d, &ob);
    }
    if (field_u64(I, f[K_ADDR], "addr", 1, &ob.addr) < 0)
        return -1;
    switch (ob.type) {
    case OP_ALLOC:
        I->st.allocs++;
        if (add_checked(I, &dv->blk_in, ob.size) < 0 ||
            first_event(I, d, 0, ob.addr, FIRST_ALLOC, 0) < 0)
            return -1;
        break;
    case OP_FREE:
        I->st.frees++;
        if (add_checked(I, &dv->blk_out, ob.size) < 0 ||
            first_event(I, d, 0, ob.addr, FIRST_FREE, ob.size) < 0)
            return -1;
        break;
    case OP_SEG_ALLOC:
        I->st.segments++;
        if (add_checked(I, &dv->seg_in, ob.size) < 0 ||
            first_event(I, d, 1, ob.addr, FIRST_ALLOC, 0) < 0)
            return -1;
        break;
    case OP_SEG_FREE:
        I->st.segment_frees++;
        if (add_checked(I, &dv->seg_out, ob.size) < 0 ||
            first_event(I, d, 1, ob.addr, FIRST_FREE, ob.size) < 0)
            return -1;
        break;
    case OP_MAP:
        I->st.segments++;
        dv->has_exp = 1;
        if (add_checked(I, &dv->map_in, ob.size) < 0)
            return -1;
        break;
    case OP_UNMAP:
        I->st.segment_frees++;
        dv->has_exp = 1;
        if (add_checked(I, &dv->map_out, ob.size) < 0)
            return -1;
        break;
    default: break;
    }
    return push_op(I, dv, d, &ob);
}

/* PyTorch records the last trace_alloc_max_entries entries of each device in a ring buffer and,
 * since it can say so, sets allocator_settings.trace_alloc_overflowed when older ones were
 * overwritten. Either may be one value or a list with one per device; a value at the top level
 * of the snapshot is read too. Never fails: a value of another type is ignored. */
static void flag_at(const gmp_pkv *v, size_t d, int *flag, uint64_t *num)
{
    if (v && (v->type == GMP_PK_LIST || v->type == GMP_PK_TUPLE))
        v = gmp_pkv_item(v, d);
    int b;
    uint64_t u;
    if (flag && gmp_pkv_get_bool(v, &b) == 0)
        *flag = b;
    else if (gmp_pkv_get_u64(v, &u) == 0) {
        if (flag)
            *flag = u != 0;
        if (num)
            *num = u;
    }
}

/* The settings the snapshot was taken under (allocator_settings, PyTorch 2.x), kept for the
 * header's options (`whatif` replays them first). A value with another character than PyTorch's
 * syntax needs is left out: the options are space-separated key=value pairs. */
static void read_alloc_conf(imp *I, const gmp_pkv *root)
{
    size_t n = 0;
    const char *c = gmp_pkv_str(
        gmp_pkv_dict_get(gmp_pkv_dict_get(root, "allocator_settings"), "PYTORCH_CUDA_ALLOC_CONF"),
        &n);
    if (!c || n >= sizeof I->alloc_conf)
        return;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.,-[]>",
                    c[i]) ||
            !c[i])
            return;
    memcpy(I->alloc_conf, c, n);
    I->alloc_conf[n] = 0;
    I->has_conf = 1;
}

static void read_overflow(imp *I, const gmp_pkv *root)
{
    const gmp_pkv *where[2] = {gmp_pkv_dict_get(root, "allocator_settings"), root};
    for (int k = 0; k < 2; k++) {
        const gmp_pkv *of = gmp_pkv_dict_get(where[k], "trace_alloc_overflowed");
        const gmp_pkv *mx = gmp_pkv_dict_get(where[k], "trace_alloc_max_entries");
        if (!of && !mx)
            continue;
        size_t n = 1;
        if (of && (of->type == GMP_PK_LIST || of->type == GMP_PK_TUPLE))
            n = gmp_pkv_len(of);
        for (size_t d = 0; d < n && d < 32; d++) {
            int flag = 0;
            flag_at(of, d, &flag, NULL);
            if (flag) {
                I->st.overflowed = 1;
                I->st.overflowed_devices |= n > 1 ? 1u << d : 0;
            }
        }
        uint64_t m = 0;
        flag_at(mx, 0, NULL, &m);
        I->st.trace_max_entries = m;
        return;
    }
}

/* ---- step 2: the state at the dump, and what existed before the window ---- */

static int push_final(imp *I, int seg, int32_t d, uint64_t addr, uint64_t size, uint32_t node)
{
    final_item **arr = seg ? &I->fsegs : &I->fblks;
    size_t *n = seg ? &I->nfsegs : &I->nfblks, *cap = seg ? &I->cap_fsegs : &I->cap_fblks;
    if (grow_array(I, (void **)arr, cap, *n + 1, sizeof **arr) < 0)
        return -1;
    (*arr)[(*n)++] = (final_item){addr, size, node, d};
    return 0;
}

enum {
    S_OTHER = 1,
    S_DEVICE,
    S_ADDRESS,
    S_TOTAL,
    S_EXPANDABLE,
    S_BLOCKS,
    S_SIZE,
    S_STATE,
    S_FRAMES,
    S_REQUESTED,
    S_HISTORY,
    S_POOLID,
    S_COUNT
};
static const char *const seg_key_names[] = {
    NULL,   NULL,    "device", "address",        "total_size", "is_expandable",  "blocks",
    "size", "state", "frames", "requested_size", "history",    "segment_pool_id"};
enum { ST_OTHER = 1, ST_ALLOCATED, ST_PENDING_FREE };
static const char *const state_names[] = {NULL, NULL, "active_allocated", "active_pending_free"};

static int read_block(imp *I, int32_t d, device *dv, const gmp_pkv *b, uint64_t *offset)
{
    I->ctx = "a block";
    if (b->type != GMP_PK_DICT)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a block is a %s, expected a dict",
                     gmp_pkv_type_name(b)),
               -1;
    const gmp_pkv *f[S_COUNT] = {0};
    dict_fields(b, 48, seg_key_names, S_COUNT, f);
    uint64_t size, addr = *offset, req;
    if (field_u64(I, f[S_SIZE], "size", 1, &size) < 0 || !size_ok(I, size))
        return -1;
    int has_addr = field_u64(I, f[S_ADDRESS], "address", 0, &addr);
    if (has_addr < 0)
        return -1;
    *offset = addr + size;
    const gmp_pkv *st = f[S_STATE];
    if (!st || st->type != GMP_PK_STR ||
        classify(st->v.o, 56, state_names, ST_PENDING_FREE + 1) == ST_OTHER)
        return 0;
    /* what the trace counts for a block is the size requested (alloc entries carry it); the
     * legacy format keeps it in history[0].real_size */
    const gmp_pkv *frames = f[S_FRAMES];
    int hr = field_u64(I, f[S_REQUESTED], "requested_size", 0, &req);
    if (hr < 0)
        return -1;
    if (hr == 0) {
        req = size;
        const gmp_pkv *h = gmp_pkv_item(f[S_HISTORY], 0);
        if (h && h->type == GMP_PK_DICT) {
            I->ctx = "a block's history";
            if (get_u64(I, h, "real_size", 0, &req) < 0)
                return -1;
            if (!frames)
                frames = gmp_pkv_dict_get(h, "frames");
        }
    }
    if (!size_ok(I, req) || add_checked(I, &dv->final_alloc, req) < 0)
        return -1;
    uint32_t node = node_of(I, frames);
    if (I->err != GMP_OK)
        return -1;
    return push_final(I, 0, d, addr, req, node);
}

static int read_segment(imp *I, const gmp_pkv *s)
{
    I->ctx = "a segment";
    if (s->type != GMP_PK_DICT)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a segment is a %s, expected a dict",
                     gmp_pkv_type_name(s)),
               -1;
    const gmp_pkv *f[S_COUNT] = {0};
    dict_fields(s, 48, seg_key_names, S_COUNT, f);
    uint64_t d, addr, size;
    if (field_u64(I, f[S_DEVICE], "device", 1, &d) < 0 ||
        field_u64(I, f[S_ADDRESS], "address", 1, &addr) < 0 ||
        field_u64(I, f[S_TOTAL], "total_size", 1, &size) < 0 || !size_ok(I, size))
        return -1;
    device *dv = dev_get(I, d > INT32_MAX ? -1 : (int64_t)d);
    if (!dv)
        return -1;
    int exp = 0;
    (void)gmp_pkv_get_bool(f[S_EXPANDABLE], &exp);
    if (exp) {
        dv->has_exp = 1;
        if (add_checked(I, &dv->final_exp, size) < 0)
            return -1;
    } else {
        if (add_checked(I, &dv->final_seg, size) < 0 ||
            push_final(I, 1, (int32_t)d, addr, size, 0) < 0)
            return -1;
    }
    /* segment_pool_id (memory_snapshot.cpp:348-350: the owner's MempoolId_t, (0, 0) for the
     * main pool; a CUDA graph's private pool or a torch.cuda.MemPool otherwise): a segment of
     * another pool labels the blocks inside it (their API) */
    const gmp_pkv *pid = f[S_POOLID];
    int64_t pa, pb;
    if (pid && (pid->type == GMP_PK_TUPLE || pid->type == GMP_PK_LIST) && gmp_pkv_len(pid) == 2 &&
        gmp_pkv_get_i64(gmp_pkv_item(pid, 0), &pa) == 0 &&
        gmp_pkv_get_i64(gmp_pkv_item(pid, 1), &pb) == 0 && (pa || pb) && size &&
        addr <= UINT64_MAX - size) {
        if (grow_array(I, (void **)&I->psegs, &I->cap_psegs, I->npsegs + 1, sizeof *I->psegs) < 0)
            return -1;
        I->psegs[I->npsegs++] = (pseg){(int32_t)d, 0, addr, size, pa, pb};
    }
    const gmp_pkv *blocks = f[S_BLOCKS];
    if (blocks && blocks->type == GMP_PK_LIST && (blocks->v.o->flags & GMP_PKOBJ_HUSKED))
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a segment's 'blocks' is also a frames "
                     "list"),
               -1;
    if (blocks && blocks->type != GMP_PK_LIST)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a segment's 'blocks' is a %s",
                     gmp_pkv_type_name(blocks)),
               -1;
    uint64_t off = addr;
    for (size_t j = 0; j < gmp_pkv_len(blocks); j++)
        if (read_block(I, (int32_t)d, dv, gmp_pkv_item(blocks, j), &off) < 0)
            return -1;
    return 0;
}

/* Alive at the dump and untouched by the window: existed before it (in the dump's order). */
static int pre_from_final(imp *I)
{
    for (size_t i = 0; i < I->nfsegs; i++) {
        final_item *f = &I->fsegs[i];
        device *dv = &I->dev[f->dev];
        if (i + FE_AHEAD < I->nfsegs)
            kmap_prefetch(&I->dev[f[FE_AHEAD].dev].seg_first, f[FE_AHEAD].addr);
        if (!kmap_get(&dv->seg_first, f->addr) &&
            (push_pre(I, 1, f->dev, f->addr, f->size, 0) < 0 ||
             add_checked(I, &dv->pre_seg_sum, f->size) < 0))
            return -1;
    }
    for (size_t i = 0; i < I->nfblks; i++) {
        final_item *f = &I->fblks[i];
        device *dv = &I->dev[f->dev];
        if (i + FE_AHEAD < I->nfblks)
            kmap_prefetch(&I->dev[f[FE_AHEAD].dev].blk_first, f[FE_AHEAD].addr);
        if (!kmap_get(&dv->blk_first, f->addr) &&
            (push_pre(I, 0, f->dev, f->addr, f->size, f->node) < 0 ||
             add_checked(I, &dv->pre_blk_sum, f->size) < 0))
            return -1;
    }
    return 0;
}

/* Addresses whose first event in the window is a free existed before it. */
static int pre_from_first_frees(imp *I, int seg)
{
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        kmap *m = seg ? &dv->seg_first : &dv->blk_first;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->s[i].val || (m->s[i].val & 3u) != FIRST_FREE)
                continue;
            uint64_t size = m->s[i].val >> 2;
            if (push_pre(I, seg, d, m->s[i].key, size, 0) < 0 ||
                add_checked(I, seg ? &dv->pre_seg_sum : &dv->pre_blk_sum, size) < 0)
                return -1;
        }
    }
    return 0;
}

/* ---- step 3: writing ---- */

static uint32_t wstr(imp *I, uint32_t s)
{
    if (!s)
        return gmp_writer_string(I->w, "", 0);
    gmp_import_strtab *t = &I->strs;
    if (!t->wid[s - 1])
        t->wid[s - 1] = gmp_writer_string(I->w, t->s[s - 1], t->len[s - 1]) + 1u;
    return t->wid[s - 1] - 1;
}

/* The writer's stack of a trie node: its frames defined outermost first, as they were walked. */
static uint32_t stack_of(imp *I, uint32_t node)
{
    if (!node)
        return 0;
    if (I->node_wid[node])
        return I->node_wid[node] - 1;
    /* the chain of nodes not defined yet, innermost first */
    uint32_t chain[MAX_FRAMES + 1];
    size_t n = 0;
    uint32_t x = node;
    while (x && !I->node_wid[x] && n < MAX_FRAMES + 1) {
        chain[n++] = x;
        x = I->node_parent[x];
    }
    uint32_t parent = x ? I->node_wid[x] - 1 : 0;
    while (n--) {
        const frame *f = &I->frames[I->node_frame[chain[n]] - 1];
        uint32_t file = wstr(I, f->file);
        uint32_t fn = wstr(I, f->fn);
        /* a node of the trie is a stack node the writer has not seen (frames and strings are
         * deduplicated by content): defined without the writer's lookup */
        uint32_t id = gmp_writer_stack_python_new(I->w, parent, file, fn, f->line);
        if (id)
            parent = id;
        I->node_wid[chain[n]] = parent + 1;
    }
    return parent;
}

static void emit_on(imp *I, gmp_wthread *th, gmp_rec *r, uint64_t t)
{
    r->time_ns = t;
    if (gmp_wthread_event(th, r) < 0)
        failf(I, GMP_ERR_IO, "the trace could not be written");
    I->last_t = t;
    if (++I->written % SYNC_EVERY == 0)
        gmp_writer_sync(I->w, t);
}

static void emit(imp *I, gmp_rec *r, uint64_t t)
{
    emit_on(I, I->th, r, t);
}

/* The thread of device d's events: TID + d (device 0's is TID), defined when first needed. Each
 * device has its own, so that its ranges nest by themselves and the allocations inside them are
 * on the thread that opened them (as a live trace's are). */
static gmp_wthread *dev_thread(imp *I, int32_t d)
{
    if (d <= 0 || d >= GMP_TORCH_MAX_DEVICES || !I->ds)
        return I->th;
    dstate *s = &I->ds[d];
    if (!s->th) {
        char name[48];
        int n = snprintf(name, sizeof name, "pytorch snapshot, device %d", (int)d);
        gmp_rec th = {.type = GMP_REC_THREAD};
        th.u.thread.tid = TID + (uint32_t)d;
        th.u.thread.name.ptr = name;
        th.u.thread.name.len = (uint32_t)n;
        if (gmp_writer_define(I->w, &th) != GMP_OK ||
            !(s->th = gmp_writer_thread(I->w, TID + (uint32_t)d))) {
            nomem(I);
            return I->th;
        }
    }
    return s->th;
}

/* The range path open on device d (0: none). */
static uint32_t top_range(const imp *I, int32_t d)
{
    if (!I->ds || d < 0 || d >= GMP_TORCH_MAX_DEVICES || !I->ds[d].n)
        return 0;
    return I->ds[d].st[I->ds[d].n - 1].path;
}

static void emit_pool(imp *I, int32_t d, uint32_t opn, uint64_t pool, uint64_t value, uint64_t t)
{
    gmp_rec *r = &I->rpool;
    r->type = GMP_REC_POOL;
    r->u.pool.device = d;
    r->u.pool.op = opn;
    r->u.pool.pool = pool;
    r->u.pool.value = value;
    emit_on(I, dev_thread(I, d), r, t);
}

static void emit_mem(imp *I, unsigned type, int32_t d, uint32_t api, uint64_t addr, uint64_t size,
                     uint64_t stream, uint32_t stack, uint32_t range, uint64_t t)
{
    gmp_rec *r = &I->rmem;
    r->type = type;
    r->u.mem.device = d;
    r->u.mem.kind = GMP_MEM_ASYNC_POOL;
    r->u.mem.api = api;
    r->u.mem.address = addr;
    r->u.mem.size = size;
    r->u.mem.stream = stream;
    r->u.mem.stack = stack;
    r->u.mem.range = range;
    emit_on(I, dev_thread(I, d), r, t);
}

static void emit_notice(imp *I, uint32_t severity, const char *text, uint64_t t)
{
    gmp_rec r = {.type = GMP_REC_NOTICE};
    r.u.notice.severity = severity;
    r.u.notice.message.ptr = text;
    r.u.notice.message.len = (uint32_t)strlen(text);
    emit(I, &r, t);
}

/* The API of a block allocated at addr on device d: "CUDACachingAllocator.malloc", or with the
 * private pool of the final segment that holds it ("... (private pool 1,0)": a CUDA graph's pool
 * or a torch.cuda.MemPool, told apart from the main pool in every table by API). Segments freed
 * before the dump are not in the final list: their blocks are the main pool's. */
static uint32_t block_api(imp *I, int32_t d, uint64_t addr)
{
    size_t lo = 0, hi = I->npsegs;
    while (lo < hi) { /* the first segment above (d, addr) */
        size_t mid = lo + (hi - lo) / 2;
        const pseg *p = &I->psegs[mid];
        if (p->dev < d || (p->dev == d && p->addr <= addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return I->api_malloc;
    pseg *p = &I->psegs[lo - 1];
    if (p->dev != d || addr - p->addr >= p->size)
        return I->api_malloc;
    if (!p->api) {
        char name[96];
        int n = snprintf(name, sizeof name,
                         "CUDACachingAllocator.malloc (private pool %" PRId64 ",%" PRId64 ")", p->a,
                         p->b);
        uint32_t id = gmp_writer_string(I->w, name, (size_t)n);
        if (!id)
            return I->api_malloc;
        p->api = id + 1;
    }
    return p->api - 1;
}

static int cmp_pseg(const void *x, const void *y)
{
    const pseg *a = x, *b = y;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The state before the window, at time t0: the blocks first, then the segments. Until a device's
 * segments follow, the replay counts its pool blocks as reserved memory (reserved = max(reported,
 * allocated from pools)), so no instant of t0 shows segments without the blocks inside them:
 * reserved - allocated grows to its value at the window's start and never passes it (segments
 * first made every segment's bytes "fragmentation" for an instant, the largest at t0). */
static void write_pre(imp *I, uint64_t t0)
{
    for (size_t i = 0; i < I->npre_blks && I->err == GMP_OK; i++) {
        emit_mem(I, GMP_REC_ALLOC, I->pre_blk_dev[i],
                 block_api(I, I->pre_blk_dev[i], I->pre_blks[i].addr), I->pre_blks[i].addr,
                 I->pre_blks[i].size, 0, stack_of(I, I->pre_blks[i].node), 0, t0);
        I->st.pre_blocks++;
        I->st.pre_allocated += I->pre_blks[i].size;
    }
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES && I->err == GMP_OK; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        uint64_t in = dv->blk_in, out = dv->blk_out;
        uint64_t pre = dv->final_alloc + out >= in ? dv->final_alloc + out - in : 0;
        if (dv->final_alloc + out < in)
            I->st.inconsistencies++;
        if (pre > dv->pre_blk_sum) {
            emit_mem(I, GMP_REC_ALLOC, d, I->api_malloc, FILLER_ADDR + (uint64_t)d,
                     pre - dv->pre_blk_sum, 0, 0, 0, t0);
            I->st.pre_allocated += pre - dv->pre_blk_sum;
            I->st.inconsistencies++;
        } else if (pre < dv->pre_blk_sum) {
            I->st.inconsistencies++;
        }
    }
    for (size_t i = 0; i < I->npre_segs && I->err == GMP_OK; i++) {
        emit_pool(I, I->pre_seg_dev[i], GMP_POOL_CREATE, I->pre_segs[i].addr, 0, t0);
        emit_pool(I, I->pre_seg_dev[i], GMP_POOL_RESERVED, I->pre_segs[i].addr, I->pre_segs[i].size,
                  t0);
        I->st.pre_segments++;
        I->st.pre_reserved += I->pre_segs[i].size;
    }
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES && I->err == GMP_OK; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        /* reserved before the window, by the rule: at the dump minus the window's change */
        uint64_t in = dv->seg_in, out = dv->seg_out;
        uint64_t pre_seg = dv->final_seg + out >= in ? dv->final_seg + out - in : 0;
        if (dv->final_seg + out < in)
            I->st.inconsistencies++;
        if (pre_seg > dv->pre_seg_sum) {
            /* segments the window frees without a trace of them, or an inconsistent dump */
            emit_pool(I, d, GMP_POOL_CREATE, FILLER_POOL + (uint64_t)d, 0, t0);
            emit_pool(I, d, GMP_POOL_RESERVED, FILLER_POOL + (uint64_t)d, pre_seg - dv->pre_seg_sum,
                      t0);
            I->st.pre_reserved += pre_seg - dv->pre_seg_sum;
            I->st.inconsistencies++;
        } else if (pre_seg < dv->pre_seg_sum) {
            I->st.inconsistencies++;
        }
        if (dv->has_exp) {
            uint64_t mapped = dv->final_exp + dv->map_out >= dv->map_in
                                  ? dv->final_exp + dv->map_out - dv->map_in
                                  : 0;
            if (dv->final_exp + dv->map_out < dv->map_in)
                I->st.inconsistencies++;
            dv->exp_mapped = mapped;
            emit_pool(I, d, GMP_POOL_CREATE, GMP_TORCH_EXPANDABLE_POOL(d), 0, t0);
            emit_pool(I, d, GMP_POOL_RESERVED, GMP_TORCH_EXPANDABLE_POOL(d), mapped, t0);
            if (mapped)
                I->st.pre_segments++;
            I->st.pre_reserved += mapped;
        }
    }
}

/* ---- ranges while writing ---- */

#define MAX_RANGE_DEPTH                                                                            \
    256                   /* open annotations of a device followed at most (a deeper START is      \
                             ignored, counted) */
#define MAX_META_DEPTH 64 /* components of a user_metadata path kept (the outermost) */

static int ds_push(imp *I, dstate *s, wframe f)
{
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 8;
        wframe *n = realloc(s->st, nc * sizeof *n);
        if (!n)
            return nomem(I), -1;
        s->st = n;
        s->cap = nc;
    }
    s->st[s->n++] = f;
    return 0;
}

static void emit_range(imp *I, int32_t d, uint32_t type, uint32_t path, uint64_t t)
{
    gmp_rec r = {.type = type};
    r.u.rev.range = path;
    emit_on(I, dev_thread(I, d), &r, t);
}

/* Closes device d's context frame, when one is on top. */
static void ctx_close(imp *I, int32_t d, uint64_t t)
{
    dstate *s = &I->ds[d];
    if (s->n && s->st[s->n - 1].ctx) {
        emit_range(I, d, GMP_REC_RANGE_POP, s->st[s->n - 1].path, t);
        s->n--;
    }
}

/* One annotation at trace time t. START opens its name inside the device's innermost open
 * annotation; END closes the innermost open annotation of its name on its device, and what is open
 * inside it (START/END pairs nest by name, per device). An END whose START is not in the list (the
 * history was started inside the range) is ignored, counted. */
static void ann_apply(imp *I, const ann *a, uint64_t t)
{
    dstate *s = &I->ds[a->dev];
    if (a->start) {
        ctx_close(I, a->dev, t);
        if (s->n >= MAX_RANGE_DEPTH) {
            I->st.annotations_ignored++;
            return;
        }
        uint32_t path =
            gmp_writer_range(I->w, s->n ? s->st[s->n - 1].path : 0, I->dom_ann, wstr(I, a->name));
        if (!path) {
            nomem(I);
            return;
        }
        if (ds_push(I, s, (wframe){path, a->name, 0}) == 0)
            emit_range(I, a->dev, GMP_REC_RANGE_PUSH, path, t);
        return;
    }
    ctx_close(I, a->dev, t); /* explicitly: what is closed implicitly reads as a mismatch */
    uint32_t k = s->n;
    while (k > 0 && s->st[k - 1].name != a->name)
        k--;
    if (!k) {
        I->st.annotations_ignored++;
        return;
    }
    emit_range(I, a->dev, GMP_REC_RANGE_POP, s->st[k - 1].path, t);
    s->n = k - 1;
}

/* The range path of a user_metadata string: its "/"-separated components (empty ones skipped);
 * 0 when it has none. */
static uint32_t meta_path(imp *I, uint32_t str)
{
    const char *p = I->strs.s[str - 1], *end = p + I->strs.len[str - 1];
    uint32_t path = 0;
    for (unsigned depth = 0; p < end && depth < MAX_META_DEPTH;) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q)
            q = end;
        if (q > p) {
            uint32_t name = gmp_writer_string(I->w, p, (size_t)(q - p));
            uint32_t np = name ? gmp_writer_range(I->w, path, I->dom_meta, name) : 0;
            if (!np)
                break;
            path = np;
            depth++;
        }
        p = q + 1;
    }
    return path;
}

/* Before an allocation (or an OOM) of device d with context c (0: none): the context frame on top
 * is c's. Its path: the user_metadata's path when there is one (the program's own statement of
 * where it is: it replaces the annotations' path), else the device's annotation path; then the
 * compiled region inside it. */
static void ctx_apply(imp *I, int32_t d, uint32_t c, uint64_t t)
{
    dstate *s = &I->ds[d];
    if ((s->n ? s->st[s->n - 1].ctx : 0) == c)
        return;
    ctx_close(I, d, t);
    if (!c || c > I->nctxs)
        return;
    const ctx_ent *e = &I->ctxs[c - 1];
    uint32_t path = s->n ? s->st[s->n - 1].path : 0;
    if (e->umeta)
        path = meta_path(I, e->umeta);
    if (e->cctx)
        path = gmp_writer_range(I->w, path, I->dom_cc, wstr(I, e->cctx));
    if (path && ds_push(I, s, (wframe){path, 0, c}) == 0)
        emit_range(I, d, GMP_REC_RANGE_PUSH, path, t);
}

/* An annotation's time on the trace clock (as next_op moves an entry's); one from before the
 * first entry is put at the window's start. */
static uint64_t ann_time(const ann *a, uint64_t first)
{
    uint64_t base = TRACE_BASE + 1000;
    if (a->t >= first)
        return a->t - first > UINT64_MAX / 2 ? UINT64_MAX / 2 : a->t - first + base;
    return first - a->t < 1000 ? base - (first - a->t) : TRACE_BASE;
}

/* Writes the annotations that come before an op at time t (all of them for UINT64_MAX): those
 * earlier, and a START at the same time (an allocation at a range's START or END time is inside
 * it). */
static void anns_before(imp *I, size_t *ai, uint64_t t, uint64_t first)
{
    while (*ai < I->nanns && I->err == GMP_OK) {
        const ann *a = &I->anns[*ai];
        uint64_t at = ann_time(a, first);
        if (at > t || (at == t && !a->start))
            break;
        ann_apply(I, a, at > I->last_t ? at : I->last_t);
        ++*ai;
    }
}

static void write_op(imp *I, const op *o)
{
    device *dv = &I->dev[o->dev];
    switch (o->type) {
    case OP_SEG_ALLOC:
        emit_pool(I, o->dev, GMP_POOL_CREATE, o->addr, 0, o->t);
        emit_pool(I, o->dev, GMP_POOL_RESERVED, o->addr, o->size, o->t);
        break;
    case OP_SEG_FREE: emit_pool(I, o->dev, GMP_POOL_DESTROY, o->addr, 0, o->t); break;
    case OP_MAP:
    case OP_UNMAP:
        if (o->type == OP_MAP) {
            dv->exp_mapped += o->size;
        } else if (o->size > dv->exp_mapped) {
            dv->exp_mapped = 0;
            I->st.inconsistencies++;
        } else {
            dv->exp_mapped -= o->size;
        }
        emit_pool(I, o->dev, GMP_POOL_RESERVED, GMP_TORCH_EXPANDABLE_POOL(o->dev), dv->exp_mapped,
                  o->t);
        break;
    case OP_ALLOC:
        emit_mem(I, GMP_REC_ALLOC, o->dev, block_api(I, o->dev, o->addr), o->addr, o->size,
                 o->stream, stack_of(I, o->node), top_range(I, o->dev), o->t);
        break;
    case OP_FREE:
        emit_mem(I, GMP_REC_FREE, o->dev, I->api_free, o->addr, o->size, o->stream,
                 stack_of(I, o->node), 0, o->t);
        break;
    case OP_OOM: {
        /* PyTorch's allocator raised OutOfMemoryError: the request failed, written as a live
         * trace writes a failed cudaMalloc (a failed ALLOC, then the OOM), so that it counts
         * among the device's failed allocations */
        gmp_rec *m = &I->rmem;
        m->type = GMP_REC_ALLOC;
        m->u.mem.device = o->dev;
        m->u.mem.kind = GMP_MEM_ASYNC_POOL;
        m->u.mem.api = I->api_malloc;
        m->u.mem.address = 0;
        m->u.mem.size = o->size;
        m->u.mem.stream = o->stream;
        m->u.mem.stack = stack_of(I, o->node);
        m->u.mem.range = top_range(I, o->dev);
        m->u.mem.flags = GMP_MEMF_FAILED;
        m->u.mem.result = CUDA_ERROR_MEMORY_ALLOCATION;
        emit_on(I, dev_thread(I, o->dev), m, o->t);
        m->u.mem.flags = 0;
        m->u.mem.result = 0;
        gmp_rec r = {.type = GMP_REC_OOM};
        r.u.oom.device = o->dev;
        r.u.oom.api = I->api_malloc;
        r.u.oom.requested = o->size;
        r.u.oom.stack = stack_of(I, o->node);
        r.u.oom.range = top_range(I, o->dev);
        r.u.oom.result = CUDA_ERROR_MEMORY_ALLOCATION;
        r.u.oom.free_bytes = o->extra;
        emit_on(I, dev_thread(I, o->dev), &r, o->t);
        break;
    }
    default: break;
    }
}

/* The next op of a device into dv->next (times moved to the trace clock); 0 when none is left. */
static int next_op(device *dv, int32_t d, uint64_t first)
{
    if (!dv->rd_left)
        return 0;
    if (dv->rd_pos >= dv->rd->len) {
        /* a chunk read is freed at once: the ops' memory goes while the trace is written */
        chunk *done = dv->rd;
        dv->rd = dv->head = done->next;
        chunk_free(done);
        dv->rd_pos = 0;
    }
    const unsigned char *h = dv->rd->data + dv->rd_pos, *p = h + 4;
    if (dv->rd_pos + 512 < CHUNK) /* the next ops, within this chunk's array */
        __builtin_prefetch(h + 512);
    op *o = &dv->next;
    unsigned n;
    o->type = h[0] & 15u;
    o->dev = d;
    n = h[1] & 15u;
    dv->rd_t += get_le(p, n);
    p += n;
    o->t = dv->rd_t - first + TRACE_BASE + 1000;
    n = h[1] >> 4;
    uint64_t v = get_le(p, n);
    p += n;
    dv->rd_addr += (v >> 1) ^ (uint64_t) - (int64_t)(v & 1);
    o->addr = dv->rd_addr;
    n = h[2] & 15u;
    o->size = get_le(p, n);
    p += n;
    n = h[2] >> 4;
    o->stream = get_le(p, n);
    p += n;
    n = h[3] & 15u;
    o->node = (uint32_t)get_le(p, n);
    p += n;
    n = h[3] >> 4;
    o->extra = get_le(p, n);
    p += n;
    n = h[0] >> 4;
    o->ctx = (uint32_t)get_le(p, n);
    p += n;
    dv->rd_pos = (size_t)(p - dv->rd->data);
    dv->rd_left--;
    return 1;
}

/* The ops of all devices in time order; ties: the lower device first, then entry order. */
static void write_ops(imp *I, uint64_t first)
{
    size_t n = I->ndevs_with_ops, live = 0, ai = 0;
    int32_t *ds = I->devs_with_ops;
    for (size_t i = 0; i < n; i++) {
        device *dv = &I->dev[ds[i]];
        dv->rd = dv->head;
        dv->rd_pos = 0;
        dv->rd_left = dv->nops;
        dv->rd_t = dv->rd_addr = 0;
        if (next_op(dv, ds[i], first))
            live++;
        else
            dv->next.dev = -1;
    }
    while (live && I->err == GMP_OK) {
        device *best = NULL;
        for (size_t i = 0; i < n; i++) {
            device *dv = &I->dev[ds[i]];
            if (dv->next.dev < 0)
                continue;
            if (!best || dv->next.t < best->next.t ||
                (dv->next.t == best->next.t && dv->next.dev < best->next.dev))
                best = dv;
        }
        if (!best)
            break;
        anns_before(I, &ai, best->next.t, first);
        if (best->next.type == OP_ALLOC || best->next.type == OP_OOM)
            ctx_apply(I, best->next.dev, best->next.ctx, best->next.t);
        write_op(I, &best->next);
        if (!next_op(best, best->next.dev, first)) {
            best->next.dev = -1;
            live--;
        }
    }
    anns_before(I, &ai, UINT64_MAX, first); /* those after the last entry */
}

static gmp_str cstr(const char *s)
{
    gmp_str r = {s, (uint32_t)strlen(s)};
    return r;
}

/* What became ranges, after prefix (the parts that are not zero). */
static void ranges_line(const gmp_import_torch_stats *st, const char *prefix, char *buf, size_t n)
{
    char ign[48] = "", um[96] = "", cc[80] = "";
    if (st->annotations_ignored)
        snprintf(ign, sizeof ign, " (%" PRIu64 " ignored)", st->annotations_ignored);
    if (st->umeta_allocs)
        snprintf(um, sizeof um, ", %" PRIu64 " allocations with a user_metadata range path",
                 st->umeta_allocs);
    if (st->cctx_allocs)
        snprintf(cc, sizeof cc, ", %" PRIu64 " inside compiled regions (compile_context)",
                 st->cctx_allocs);
    snprintf(buf, n, "%s%" PRIu64 " record_function annotations%s%s%s", prefix, st->annotations,
             ign, um, cc);
}

static void write_trace(imp *I, const char *source, int fd, gmp_tq *q, unsigned flags)
{
    /* The trace clock starts at TRACE_BASE (the pre-window state), the first entry 1 us later;
     * the header maps it to the wall clock when the snapshot has time_us. (Small trace times
     * also keep the END record, which the writer stamps with its own clock, after the events.) */
    uint64_t t0 = TRACE_BASE, wall0 = 0, first = UINT64_MAX;
    for (size_t i = 0; i < I->ndevs_with_ops; i++)
        if (I->dev[I->devs_with_ops[i]].first_t < first)
            first = I->dev[I->devs_with_ops[i]].first_t;
    if (I->ndevs_with_ops)
        wall0 = first - 1000;
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer = cstr("gpumemprof " GMP_VERSION_STRING " import (PyTorch memory snapshot)");
    h.hostname = cstr("");
    h.cmdline = cstr(source ? source : "");
    h.rank = -1;
    h.local_rank = -1;
    h.start_wall_ns = I->st.has_time ? wall0 : 0;
    h.start_trace_ns = t0;
    h.clock = cstr(I->st.has_time ? "PyTorch time_us" : "PyTorch entry order (1 us apart)");
    char opts[400];
    snprintf(opts, sizeof opts, "import=pytorch-snapshot%s%s%s",
             I->st.legacy ? " format=legacy" : "", I->has_conf ? " alloc_conf=" : "",
             I->has_conf ? I->alloc_conf : "");
    h.options = cstr(opts);
    gmp_writer_opts wo;
    gmp_writer_opts_default(&wo);
    wo.threaded = 0;
    wo.level = 3;
    /* compression (most of the writing) beside the encoding, on two helper threads, for a trace
     * of many frames (one every SYNC_EVERY events): for a few, starting the helpers costs more
     * than it saves */
    uint64_t nev = I->npre_segs + I->npre_blks;
    for (size_t i = 0; i < I->ndevs_with_ops; i++)
        nev += I->dev[I->devs_with_ops[i]].nops;
    wo.compress_async = nev >= 8 * (uint64_t)SYNC_EVERY ? 2 : 0;
    /* A temporary trace (read back at once by this process, then thrown away) is written
     * stored: zstd frames of Raw blocks, which cost nothing to make or to read, where compressing
     * and decompressing a trace read once cost more than the bytes saved. A stored trace is about
     * 6 times larger, and a memfd's bytes are memory, though not in the process's RSS: above
     * STORE_MAX_EVENTS (~4.7 MiB stored) it is compressed as usual, so that the memory a large
     * snapshot's import holds stays a fraction of the file. Into a pipe (IMPORT_STREAMED: read as
     * it is written, gmp_import_torch_start) it is always stored: the pipe holds at most its
     * buffer. */
    if ((flags & GMP_IMPORT_TORCH_TEMPORARY) &&
        (nev <= STORE_MAX_EVENTS || (flags & IMPORT_STREAMED))) {
        wo.store = 1;
        /* the checksums and writes of the frames on one helper, beside the encoding */
        if (wo.compress_async)
            wo.compress_async = 1;
    }
    if (q) { /* unframed, for a reader of this process (gmp_import_torch_start_queue) */
        wo.queue = q;
        wo.compress_async = 0;
    }
    gmp_err e = gmp_writer_open(&I->w, fd, &wo, &h);
    if (e != GMP_OK) {
        if (q)
            gmp_tq_close_write(q); /* its reader gets the end (and finds no trace) */
        failf(I, e, "cannot start the trace: %s", gmp_err_str(e));
        return;
    }
    gmp_rec th = {.type = GMP_REC_THREAD};
    th.u.thread.tid = TID;
    th.u.thread.name = cstr("pytorch snapshot");
    gmp_writer_define(I->w, &th);
    I->th = gmp_writer_thread(I->w, TID);
    I->api_malloc = gmp_writer_string(I->w, "CUDACachingAllocator.malloc", 27);
    I->api_free = gmp_writer_string(I->w, "CUDACachingAllocator.free", 25);
    /* the ranges' domains say where each came from (gmp_merge_torch reads them) */
    I->dom_ann =
        gmp_writer_string(I->w, GMP_TORCH_DOMAIN_ANNOTATION, strlen(GMP_TORCH_DOMAIN_ANNOTATION));
    I->dom_meta =
        gmp_writer_string(I->w, GMP_TORCH_DOMAIN_METADATA, strlen(GMP_TORCH_DOMAIN_METADATA));
    I->dom_cc = gmp_writer_string(I->w, GMP_TORCH_DOMAIN_COMPILE, strlen(GMP_TORCH_DOMAIN_COMPILE));
    I->ds = calloc(GMP_TORCH_MAX_DEVICES, sizeof *I->ds);
    if (!I->th || !I->api_malloc || !I->api_free || !I->dom_ann || !I->dom_meta || !I->dom_cc ||
        !I->ds) {
        nomem(I);
    } else {
        write_pre(I, t0);
        write_ops(I, first);
        if (I->err == GMP_OK) {
            snprintf(I->notice, sizeof I->notice,
                     "imported from a PyTorch memory snapshot%s: %" PRIu64
                     " trace entries; before the recorded window: %" PRIu64 " segments (%" PRIu64
                     " bytes), %" PRIu64 " blocks (%" PRIu64 " bytes)",
                     I->st.legacy ? " (legacy format: segments only)" : "", I->st.entries,
                     I->st.pre_segments, I->st.pre_reserved, I->st.pre_blocks, I->st.pre_allocated);
            emit_notice(I, GMP_NOTICE_INFO, I->notice, I->last_t);
        }
        if (I->err == GMP_OK && (I->st.annotations || I->st.annotations_ignored ||
                                 I->st.umeta_allocs || I->st.cctx_allocs)) {
            ranges_line(&I->st, "ranges from the snapshot, on one thread per device: ", I->notice,
                        sizeof I->notice);
            emit_notice(I, GMP_NOTICE_INFO, I->notice, I->last_t);
        }
        if (I->err == GMP_OK && I->st.overflowed) {
            char devs[160] = "";
            size_t o = 0;
            for (unsigned d = 0; d < 32 && o < sizeof devs; d++)
                if (I->st.overflowed_devices & (1u << d))
                    o += (size_t)snprintf(devs + o, sizeof devs - o, "%s%u",
                                          o ? ", " : " of device ", d);
            char cap[64] = "";
            if (I->st.trace_max_entries)
                snprintf(cap, sizeof cap, " (trace_alloc_max_entries %" PRIu64 ")",
                         I->st.trace_max_entries);
            snprintf(I->notice, sizeof I->notice,
                     "incomplete: PyTorch's ring buffer of trace entries%s%s overflowed "
                     "(trace_alloc_overflowed): the allocations, frees and segment changes before "
                     "the first recorded entry were overwritten and are missing, so peaks before "
                     "the window are unknown and stacks of memory allocated before it are lost; "
                     "memory alive at the window's start is reconstructed from the final segments",
                     devs, cap);
            emit_notice(I, GMP_NOTICE_WARNING, I->notice, I->last_t);
            /* and a LOST record, so that every reader's completeness line (report's first
             * lines, info, dump, diff) says incomplete: PyTorch does not say how many entries
             * were overwritten, only that some were: at least one */
            gmp_writer_lost(I->w, 1, GMP_LOST_OTHER);
            I->lost_said = 1;
        }
        if (I->err == GMP_OK && I->st.inconsistencies) {
            snprintf(I->notice, sizeof I->notice,
                     "the snapshot contradicts itself in %" PRIu64
                     " places (its final segments and its trace do not add up); memory before "
                     "the window follows the final state minus the trace's net change",
                     I->st.inconsistencies);
            emit_notice(I, GMP_NOTICE_WARNING, I->notice, I->last_t);
        }
        gmp_writer_sync(I->w, I->last_t);
        for (int32_t d = 1; d < GMP_TORCH_MAX_DEVICES; d++)
            if (I->ds[d].th)
                gmp_wthread_release(I->ds[d].th);
        gmp_wthread_release(I->th);
    }
    gmp_writer_stats ws;
    e = gmp_writer_close(I->w, &ws);
    I->w = NULL;
    if (e != GMP_OK || ws.lost > I->lost_said) /* beyond the LOST record written on purpose */
        failf(I, e != GMP_OK ? e : GMP_ERR_IO, "the trace could not be written (%s)",
              ws.io_errno ? strerror(ws.io_errno) : "events lost");
}

/* ---- entry points ---- */

int gmp_import_torch_probe(const unsigned char *head, size_t n)
{
    return n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* ---- the memory this process may use ---- */

static uint64_t read_limit_file(const char *path)
{
    uint64_t v = UINT64_MAX;
    FILE *f = fopen(path, "re");
    if (f) {
        unsigned long long x;
        if (fscanf(f, "%llu", &x) == 1 && x > 0)
            v = (uint64_t)x; /* "max" (cgroup v2: no limit) does not scan */
        fclose(f);
    }
    return v;
}

uint64_t gmp_import_torch_usable_memory(void)
{
    uint64_t m = UINT64_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        m = (uint64_t)pages * (uint64_t)psz;
    uint64_t c = read_limit_file("/sys/fs/cgroup/memory.max"); /* cgroup v2 */
    if (c < m)
        m = c;
    c = read_limit_file("/sys/fs/cgroup/memory/memory.limit_in_bytes"); /* cgroup v1 */
    if (c < m)
        m = c;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m)
        m = rl.rlim_cur;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m)
        m = rl.rlim_cur;
    return m;
}

static int on_item(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err,
                   size_t errlen)
{
    imp *I = ctx;
    int rc = kind == GMP_PKS_LIST ? read_segment(I, item) : read_entry(I, (int64_t)index, item);
    if (rc < 0 || I->err != GMP_OK) {
        snprintf(err, errlen, "%s", I->msg ? I->msg : "");
        return 1;
    }
    return 0;
}

/* The first-event maps, their log, the trie's map and the state at the dump. */
static void free_reading(imp *I)
{
    for (int i = 0; I->dev && i < GMP_TORCH_MAX_DEVICES; i++) {
        kmap_free(&I->dev[i].seg_first);
        kmap_free(&I->dev[i].blk_first);
    }
    free(I->fe_log);
    free(I->fe_recent);
    free(I->fe_recent_dk);
    I->fe_log = NULL;
    I->fe_recent = NULL;
    I->fe_recent_dk = NULL;
    kmap_free(&I->trie);
    kmap_free(&I->ctxmap);
    free(I->fsegs);
    free(I->fblks);
    I->fsegs = I->fblks = NULL;
    I->nfsegs = I->nfblks = I->cap_fsegs = I->cap_fblks = 0;
}

static void imp_free(imp *I)
{
    free_reading(I);
    if (I->dev) {
        for (int i = 0; i < GMP_TORCH_MAX_DEVICES; i++) {
            for (chunk *c = I->dev[i].head, *n; c; c = n) {
                n = c->next;
                chunk_free(c);
            }
        }
    }
    free(I->dev);
    for (int i = 0; I->ds && i < GMP_TORCH_MAX_DEVICES; i++)
        free(I->ds[i].st);
    free(I->ds);
    free(I->ctxs);
    free(I->anns);
    free(I->psegs);
    free(I->devs_with_ops);
    free(I->pre_segs);
    free(I->pre_blks);
    free(I->pre_seg_dev);
    free(I->pre_blk_dev);
    for (size_t i = 0; i < I->strs.n; i++)
        free(I->strs.s[i]);
    free(I->strs.s);
    free(I->strs.len);
    free(I->strs.wid);
    free(I->strs.hash);
    free(I->strs.slot);
    free(I->frames);
    free(I->fslot);
    free(I->node_parent);
    free(I->node_frame);
    free(I->node_wid);
    free(I->node_child);
}

/* Reads the snapshot from fd (a regular file) or data[0..n) into *I, up to what the writing needs
 * (the ops, the state before the window); on failure I->err and msg say why. I is zeroed here and
 * freed by the caller (imp_free) either way. */
static gmp_err import_read(imp *I, int fd, const void *data, size_t n, char *msg, size_t msglen)
{
    memset(I, 0, sizeof *I);
    I->msg = msg;
    I->msglen = msglen;
    if (msg && msglen)
        msg[0] = 0;
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    /* The streaming reader holds what is alive (memoized values fetched later, the entry being
     * read), never the tree: bounded by the memory this process may use, less a margin for the
     * rest (the ops, the writer), so that a hostile file fails with a message instead of being
     * killed. Memo indices are bounded by the input (each needs an opcode). */
    uint64_t usable = gmp_import_torch_usable_memory(), margin = usable / 4;
    if (margin > ((uint64_t)256 << 20))
        margin = (uint64_t)256 << 20;
    uint64_t room = usable > margin ? usable - margin : usable;
    lim.max_memory = room > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)room;
    uint64_t size = n;
    if (fd >= 0) {
        struct stat sb;
        size = fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    }
    if (size > lim.max_memo)
        lim.max_memo = size > SIZE_MAX ? SIZE_MAX : (size_t)size;
    gmp_pkstream *ps = NULL;
    gmp_pkstream_cb cb = {"segments", "device_traces", on_item, I};
    /* The snapshot is read in one pass (gmp_pkstream_one_pass): no first pass counting the memo's
     * fetches, keeping of the memoized values only the strings and the frames lists and their
     * frames (what a snapshot fetches again), within ONE_PASS_BUDGET_MIN or a sixteenth of the
     * file, whichever is more. Any failure of that run (a snapshot that fetches anything else
     * fails it) is taken from a second run in two passes, from scratch, so outcomes and messages
     * are the two-pass reader's. */
    int one = 1;
    gmp_err e;
    char perr[512];
    for (;;) {
        I->dev = calloc(GMP_TORCH_MAX_DEVICES, sizeof *I->dev);
        if (!I->dev || !(ps = I->ps = gmp_pkstream_new(&lim, &cb))) {
            nomem(I);
            goto out;
        }
        if (one) {
            uint64_t budget = size / 16 > ONE_PASS_BUDGET_MIN ? size / 16 : ONE_PASS_BUDGET_MIN;
            gmp_pkstream_one_pass(ps, "frames",
                                  budget < lim.max_memory ? (size_t)budget : lim.max_memory);
        }
        e = fd >= 0 ? gmp_pkstream_run_fd(ps, fd, perr, sizeof perr)
                    : gmp_pkstream_run_mem(ps, data, n, perr, sizeof perr);
        if (e == GMP_OK || !one)
            break;
        gmp_pkstream_free(ps);
        imp_free(I);
        memset(I, 0, sizeof *I);
        I->msg = msg;
        I->msglen = msglen;
        if (msg && msglen)
            msg[0] = 0;
        ps = NULL;
        one = 0;
    }
    if (e != GMP_OK) {
        if (gmp_pkstream_stopped_by_consumer(ps) && I->err != GMP_OK)
            goto out;
        I->err = GMP_OK;
        if (e == GMP_ERR_LIMIT)
            failf(I, e, "cannot read this PyTorch memory snapshot within its limits: %s", perr);
        else if (e == GMP_ERR_NOMEM)
            failf(I, e, "out of memory reading this PyTorch memory snapshot (%s)", perr);
        else if (e == GMP_ERR_IO)
            failf(I, e, "%s", perr);
        else
            failf(I, e, "not a readable PyTorch memory snapshot: %s", perr);
        goto out;
    }
    const gmp_pkv *root = gmp_pkstream_root(ps);
    if (root->type == GMP_PK_LIST) {
        I->st.legacy = 1; /* legacy: a bare list of segments */
    } else if (root->type == GMP_PK_DICT) {
        const gmp_pkv *segs = gmp_pkv_dict_get(root, "segments");
        const gmp_pkv *traces = gmp_pkv_dict_get(root, "device_traces");
        if (!segs) {
            failf(I, GMP_ERR_FORMAT,
                  "not a PyTorch memory snapshot: a dict without 'segments' (the snapshot of "
                  "torch.cuda.memory._snapshot() has 'segments' and 'device_traces')");
            goto out;
        }
        if (traces && traces->type != GMP_PK_LIST) {
            failf(I, GMP_ERR_FORMAT,
                  "not a valid PyTorch memory snapshot: 'device_traces' is a %s, expected a list",
                  gmp_pkv_type_name(traces));
            goto out;
        }
        for (size_t d = 0; traces && d < gmp_pkv_len(traces); d++) {
            const gmp_pkv *t = gmp_pkv_item(traces, d);
            if (t && t->type != GMP_PK_LIST) {
                failf(I, GMP_ERR_FORMAT,
                      "not a valid PyTorch memory snapshot: device_traces[%zu] is a %s, expected "
                      "a list",
                      d, gmp_pkv_type_name(t));
                goto out;
            }
        }
        if (segs->type != GMP_PK_LIST) {
            failf(I, GMP_ERR_FORMAT,
                  "not a valid PyTorch memory snapshot: 'segments' is a %s, expected a list",
                  gmp_pkv_type_name(segs));
            goto out;
        }
        read_overflow(I, root);
        read_alloc_conf(I, root);
        if (read_annotations(I, root) < 0)
            goto out;
    } else {
        failf(I, GMP_ERR_FORMAT,
              "not a PyTorch memory snapshot: the pickle holds a %s, expected a dict with "
              "'segments' and 'device_traces' or a list of segments",
              gmp_pkv_type_name(root));
        goto out;
    }
    gmp_pkstream_free(ps);
    ps = I->ps = NULL;
    if (I->npsegs > 1) /* (qsort of no array: NULL, undefined) */
        qsort(I->psegs, I->npsegs, sizeof *I->psegs, cmp_pseg);
    if (fe_flush(I) < 0 || pre_from_final(I) < 0 || pre_from_first_frees(I, 1) < 0 ||
        pre_from_first_frees(I, 0) < 0)
        goto out;
    /* what only the reading needed goes before the writing (its memory is reused) */
    free_reading(I);
out:
    gmp_pkstream_free(ps);
    I->ps = NULL;
    return I->err;
}

/* Reads the snapshot from fd (a regular file) or data[0..n), then writes the trace. */
static gmp_err import_any(int fd, const void *data, size_t n, const char *source, int out_fd,
                          unsigned flags, gmp_import_torch_stats *stats, char *msg, size_t msglen)
{
    imp I;
    if (import_read(&I, fd, data, n, msg, msglen) == GMP_OK) {
        write_trace(&I, source, out_fd, NULL, flags);
        out_fd = -1;
    }
    if (out_fd >= 0)
        close(out_fd);
    imp_free(&I);
    if (stats)
        *stats = I.st;
    return I.err;
}

gmp_err gmp_import_torch_mem(const void *data, size_t n, const char *source, int out_fd,
                             gmp_import_torch_stats *stats, char *msg, size_t msglen)
{
    return import_any(-1, data, n, source, out_fd, 0, stats, msg, msglen);
}

gmp_err gmp_import_torch(const char *in_path, int out_fd, gmp_import_torch_stats *stats, char *msg,
                         size_t msglen)
{
    return gmp_import_torch_flags(in_path, out_fd, 0, stats, msg, msglen);
}

/* The snapshot at in_path open for reading (a regular file), or -1 with the reason in msg. */
static int open_snapshot(const char *in_path, char *msg, size_t msglen)
{
    int fd = open(in_path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, msglen, "%s",
                 fd < 0 || !S_ISREG(sb.st_mode) ? (fd < 0 ? strerror(errno) : "not a regular file")
                                                : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    return fd;
}

gmp_err gmp_import_torch_flags(const char *in_path, int out_fd, unsigned flags,
                               gmp_import_torch_stats *stats, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    int fd = open_snapshot(in_path, msg, msglen);
    if (fd < 0) {
        close(out_fd);
        return GMP_ERR_IO;
    }
    gmp_err e = import_any(fd, NULL, 0, in_path, out_fd, flags, stats, msg, msglen);
    close(fd);
    return e;
}

void gmp_import_torch_summary(const gmp_import_torch_stats *st, char *msg, size_t msglen)
{
    snprintf(msg, msglen,
             "%s%" PRIu64 " trace entries (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
             " segment maps/allocs, %" PRIu64 " OOMs) on %" PRIu32
             " device%s; before the window: %" PRIu64 " segments, %" PRIu64 " blocks%s%s",
             st->legacy ? "legacy snapshot (segments only): " : "", st->entries, st->allocs,
             st->frees, st->segments, st->ooms, st->devices, st->devices == 1 ? "" : "s",
             st->pre_segments, st->pre_blocks,
             st->inconsistencies ? "; the snapshot contradicts itself (see the trace's notices)"
                                 : "",
             st->overflowed ? "; incomplete: PyTorch's trace ring buffer overflowed, the "
                              "entries before the window are missing"
                            : "");
    size_t n = strlen(msg);
    if ((st->annotations || st->annotations_ignored || st->umeta_allocs || st->cctx_allocs) &&
        n < msglen)
        ranges_line(st, "; ranges: ", msg + n, msglen - n);
}

gmp_err gmp_import_torch_run(const char *in_path, int out_fd, unsigned flags, char *msg,
                             size_t msglen)
{
    gmp_import_torch_stats st;
    gmp_err e = gmp_import_torch_flags(in_path, out_fd, flags, &st, msg, msglen);
    if (e == GMP_OK)
        gmp_import_torch_summary(&st, msg, msglen);
    return e;
}

/* ---- the writing on a thread (gmp_import_torch_start) ---- */

struct gmp_import_torch_job {
    imp I;
    char msg[512]; /* the writing's error line */
    char *source;
    int out_fd; /* -1 when into q */
    gmp_tq *q;  /* a reference, dropped in finish */
    unsigned flags;
    uint64_t events;
    pthread_t thread;
};

static void *job_main(void *arg)
{
    gmp_import_torch_job *J = arg;
    /* A reader that stops before the end (an error of its own) closes the pipe: the writes then
     * fail with EPIPE instead of raising SIGPIPE, which would end the process (the writer's helper
     * threads, started from this one, inherit the mask). */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    J->I.msg = J->msg;
    J->I.msglen = sizeof J->msg;
    write_trace(&J->I, J->source, J->out_fd, J->q, J->flags);
    return NULL;
}

/* gmp_import_torch_start and _start_queue: into out_fd, or into q when out_fd is -1. */
static gmp_err start_job(const char *in_path, int out_fd, gmp_tq *q, unsigned flags,
                         gmp_import_torch_job **job, char *msg, size_t msglen)
{
    *job = NULL;
    if (msg && msglen)
        msg[0] = 0;
    gmp_import_torch_job *J = calloc(1, sizeof *J);
    char *src = J ? strdup(in_path) : NULL;
    if (!J || !src) {
        free(J);
        if (out_fd >= 0)
            close(out_fd);
        snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_NOMEM));
        return GMP_ERR_NOMEM;
    }
    int fd = open_snapshot(in_path, msg, msglen);
    if (fd < 0) {
        if (out_fd >= 0)
            close(out_fd);
        free(src);
        free(J);
        return GMP_ERR_IO;
    }
    gmp_err e = import_read(&J->I, fd, NULL, 0, msg, msglen);
    close(fd);
    if (e != GMP_OK) {
        if (out_fd >= 0)
            close(out_fd);
        imp_free(&J->I);
        free(src);
        free(J);
        return e;
    }
    J->source = src;
    J->out_fd = out_fd;
    J->q = q;
    J->flags = flags | IMPORT_STREAMED;
    J->events = J->I.npre_segs + J->I.npre_blks;
    for (size_t i = 0; i < J->I.ndevs_with_ops; i++)
        J->events += J->I.dev[J->I.devs_with_ops[i]].nops;
    if (q)
        gmp_tq_ref(q);
    if (pthread_create(&J->thread, NULL, job_main, J) != 0) {
        /* no thread: written here, whole, before returning (the pipe must then hold it: the
         * caller's reader has not started) -- refused instead, as out of memory */
        if (out_fd >= 0)
            close(out_fd);
        gmp_tq_unref(q);
        imp_free(&J->I);
        free(src);
        free(J);
        snprintf(msg, msglen, "cannot start a thread to write the imported trace");
        return GMP_ERR_NOMEM;
    }
    *job = J;
    return GMP_OK;
}

gmp_err gmp_import_torch_start(const char *in_path, int out_fd, unsigned flags,
                               gmp_import_torch_job **job, char *msg, size_t msglen)
{
    return start_job(in_path, out_fd, NULL, flags, job, msg, msglen);
}

gmp_err gmp_import_torch_start_queue(const char *in_path, gmp_tq *q, unsigned flags,
                                     gmp_import_torch_job **job, char *msg, size_t msglen)
{
    if (!q) {
        *job = NULL;
        snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_ARG));
        return GMP_ERR_ARG;
    }
    return start_job(in_path, -1, q, flags, job, msg, msglen);
}

uint64_t gmp_import_torch_job_events(const gmp_import_torch_job *job)
{
    return job ? job->events : 0;
}

gmp_err gmp_import_torch_finish(gmp_import_torch_job *job, gmp_import_torch_stats *stats, char *msg,
                                size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    if (!job)
        return GMP_ERR_ARG;
    pthread_join(job->thread, NULL);
    gmp_tq_unref(job->q);
    gmp_err e = job->I.err;
    if (e != GMP_OK)
        snprintf(msg, msglen, "%s", job->msg[0] ? job->msg : gmp_err_str(e));
    if (stats)
        *stats = job->I.st;
    imp_free(&job->I);
    free(job->source);
    free(job);
    return e;
}
