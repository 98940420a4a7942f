/* test_merge_torch: unit test of gmp_merge_torch (formats/import) on a small handcrafted trace and
 * a handcrafted imported snapshot, written here with gmp_writer in the layout gmp_import_torch
 * writes (pools whose handle is a segment's address, async-pool blocks with Python frames, a
 * header that maps its clock to the wall clock).
 *
 *   test_merge_torch DIR
 *
 * Checks the merged trace event by event: the trace's cudaMalloc calls that are segments become
 * POOL create/reserved (their free a POOL destroy) at the trace's times, an allocation that is no
 * segment stays as it was (with its native stack), the blocks come in with their Python frames at
 * times moved through the two headers' clocks, a block from before the history window is put no
 * earlier than its segment, the snapshot's own pools and OOM are dropped and said in notices; and
 * the refusals: a snapshot without times, one whose segments the trace does not have, one of
 * another time, a file that is no trace. Then the blocks' ranges (ranges_case): the snapshot's
 * user_metadata path first, then its record_function annotation (its range events come along),
 * else the range open on the trace at the block's time, on the thread whose ranges changed last
 * (the block is written on that thread); a user_metadata path (`model/enc`, as --layers' hooks set
 * it) is the trace's open range whose path ends with it (`train/model/enc`: the program's outer
 * range kept), on any thread, the one pushed last of two, else the path alone. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_merge_torch.h"
#include "gmp_reader.h"
#include "gmp_writer.h"

#define MiB (1024ull * 1024)
#define MS 1000000ull
#define T_WALL 1000000000000ull /* the trace: wall clock at trace time T_BASE */
#define T_BASE (5 * MS)
#define S_BASE (1 * MS) /* the snapshot's trace time of its pre-window state */
#define SEG_A 0x7000000ull
#define SEG_B 0x8000000ull
#define NOT_SEG 0x9000000ull

static int failures;

#define NBLOCKS 9 /* the blocks of ranges_case */

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

typedef struct wr {
    gmp_writer *w;
    gmp_wthread *th;
} wr;

static void start(wr *x, const char *path, uint64_t wall, uint64_t base, uint32_t tid)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer.ptr = "test_merge_torch";
    h.producer.len = 16;
    h.rank = -1;
    h.start_wall_ns = wall;
    h.start_trace_ns = base;
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    if (gmp_writer_open(&x->w, fd, &o, &h) != GMP_OK) {
        printf("cannot write %s\n", path);
        exit(2);
    }
    x->th = gmp_writer_thread(x->w, tid);
}

static void mem(wr *x, unsigned type, uint64_t t, unsigned kind, uint64_t addr, uint64_t size,
                const char *api, uint32_t stack)
{
    gmp_rec r = {.type = type, .time_ns = t};
    r.u.mem.device = 0;
    r.u.mem.kind = kind;
    r.u.mem.api = gmp_writer_string(x->w, api, strlen(api));
    r.u.mem.address = addr;
    r.u.mem.size = size;
    r.u.mem.stack = stack;
    gmp_wthread_event(x->th, &r);
}

static void pool(wr *x, uint64_t t, unsigned op, uint64_t handle, uint64_t value)
{
    gmp_rec r = {.type = GMP_REC_POOL, .time_ns = t};
    r.u.pool.op = op;
    r.u.pool.pool = handle;
    r.u.pool.value = value;
    gmp_wthread_event(x->th, &r);
}

static uint32_t pyframe(wr *x, uint32_t parent, const char *file, const char *fn, uint32_t line)
{
    return gmp_writer_stack_python(x->w, parent, gmp_writer_string(x->w, file, strlen(file)),
                                   gmp_writer_string(x->w, fn, strlen(fn)), line);
}

/* The trace: segments A and B and an allocation that is no segment. */
static void write_trace(const char *path)
{
    wr x;
    start(&x, path, T_WALL, T_BASE, 100);
    uint32_t nat = gmp_writer_stack_native(x.w, 0, 0x401234);
    mem(&x, GMP_REC_ALLOC, 10 * MS, GMP_MEM_DEVICE, SEG_A, 2 * MiB, "cudaMalloc", nat);
    mem(&x, GMP_REC_ALLOC, 11 * MS, GMP_MEM_DEVICE, NOT_SEG, 1 * MiB, "cudaMalloc", nat);
    mem(&x, GMP_REC_ALLOC, 12 * MS, GMP_MEM_DEVICE, SEG_B, 4 * MiB, "cudaMalloc", nat);
    mem(&x, GMP_REC_FREE, 20 * MS, GMP_MEM_DEVICE, SEG_A, 2 * MiB, "cudaFree", 0);
    mem(&x, GMP_REC_FREE, 30 * MS, GMP_MEM_DEVICE, NOT_SEG, 1 * MiB, "cudaFree", 0);
    gmp_writer_sync(x.w, 30 * MS);
    gmp_writer_close(x.w, NULL);
}

/* The snapshot as gmp_import_torch writes it; wall: its header's wall clock at S_BASE (0: none);
 * shift: added to its segments' addresses. Its time s is on the trace's clock at
 * s - S_BASE + wall - T_WALL + T_BASE. */
static void write_snap(const char *path, uint64_t wall, uint64_t shift)
{
    wr x;
    start(&x, path, wall, S_BASE, 1);
    uint32_t mod = pyframe(&x, 0, "train.py", "<module>", 9);
    uint32_t fa = pyframe(&x, mod, "train.py", "forward", 5);
    uint32_t fb = pyframe(&x, mod, "train.py", "backward", 7);
    /* before the window: segment B and a block of it */
    pool(&x, S_BASE, GMP_POOL_CREATE, SEG_B + shift, 0);
    pool(&x, S_BASE, GMP_POOL_RESERVED, SEG_B + shift, 4 * MiB);
    mem(&x, GMP_REC_ALLOC, S_BASE, GMP_MEM_ASYNC_POOL, SEG_B + shift, 1 * MiB,
        "CUDACachingAllocator.malloc", fb);
    /* the window */
    pool(&x, 2 * MS, GMP_POOL_CREATE, SEG_A + shift, 0);
    pool(&x, 2 * MS, GMP_POOL_RESERVED, SEG_A + shift, 2 * MiB);
    mem(&x, GMP_REC_ALLOC, 2 * MS, GMP_MEM_ASYNC_POOL, SEG_A + shift, 512 * 1024,
        "CUDACachingAllocator.malloc", fa);
    mem(&x, GMP_REC_FREE, 3 * MS, GMP_MEM_ASYNC_POOL, SEG_A + shift, 512 * 1024,
        "CUDACachingAllocator.free", fa);
    mem(&x, GMP_REC_ALLOC, 4 * MS, GMP_MEM_ASYNC_POOL, SEG_B + shift + MiB, 2 * MiB,
        "CUDACachingAllocator.malloc", fb);
    pool(&x, 5 * MS, GMP_POOL_RESERVED, 0x5000000 + shift, 1 * MiB); /* no such allocation */
    pool(&x, 6 * MS, GMP_POOL_DESTROY, SEG_A + shift, 0);
    gmp_rec o = {.type = GMP_REC_OOM, .time_ns = 7 * MS};
    o.u.oom.requested = 64 * MiB;
    gmp_wthread_event(x.th, &o);
    gmp_writer_sync(x.w, 7 * MS);
    gmp_writer_close(x.w, NULL);
}

/* The merged trace's events as lines "TIME_US TID TYPE ..." (the END record left out). */
static size_t read_lines(const char *path, char lines[][160], size_t max)
{
    gmp_reader *r;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK) {
        CHECK(0, "cannot read the merged trace: %s", gmp_reader_open_error());
        return 0;
    }
    const gmp_rec *rec;
    size_t n = 0;
    while (n < max && gmp_reader_next(r, &rec) == GMP_OK) {
        if (!gmp_rec_is_event(rec->type) || rec->type == GMP_REC_END)
            continue;
        char *l = lines[n++];
        int k = snprintf(l, 160, "%llu %u ", (unsigned long long)(rec->time_ns / 1000), rec->tid);
        if (rec->type == GMP_REC_POOL) {
            snprintf(l + k, 160 - (size_t)k, "pool op=%u 0x%llx %llu", rec->u.pool.op,
                     (unsigned long long)rec->u.pool.pool, (unsigned long long)rec->u.pool.value);
        } else if (rec->type == GMP_REC_ALLOC || rec->type == GMP_REC_FREE) {
            const gmp_rec_mem *m = &rec->u.mem;
            gmp_str api = gmp_reader_string(r, m->api);
            char st[64] = "-";
            const gmp_rec_stack *s = gmp_reader_stack(r, m->stack);
            if (s && s->kind == GMP_FRAME_PYTHON) {
                gmp_str fn = gmp_reader_string(r, s->function);
                snprintf(st, sizeof st, "%.*s:%u", (int)fn.len, fn.ptr, s->line);
            } else if (s) {
                snprintf(st, sizeof st, "0x%llx", (unsigned long long)s->address);
            }
            snprintf(l + k, 160 - (size_t)k, "%s %s 0x%llx %llu %.*s %s",
                     rec->type == GMP_REC_ALLOC ? "alloc" : "free", gmp_mem_kind_name(m->kind),
                     (unsigned long long)m->address, (unsigned long long)m->size, (int)api.len,
                     api.ptr, st);
        } else if (rec->type == GMP_REC_NOTICE) {
            snprintf(l + k, 160 - (size_t)k, "notice %u %.60s", rec->u.notice.severity,
                     rec->u.notice.message.ptr);
        } else {
            snprintf(l + k, 160 - (size_t)k, "%s", gmp_rec_type_name(rec->type));
        }
    }
    gmp_reader_stats const *st = gmp_reader_get_stats(r);
    CHECK(st->has_end, "the merged trace has an END record");
    gmp_reader_close(r);
    return n;
}

static void range_ev(wr *x, unsigned type, uint64_t t, uint32_t range)
{
    gmp_rec r = {.type = type, .time_ns = t};
    r.u.rev.range = range;
    gmp_wthread_event(x->th, &r);
}

static uint32_t range_of(wr *x, uint32_t parent, const char *domain, const char *name)
{
    return gmp_writer_range(x->w, parent,
                            domain ? gmp_writer_string(x->w, domain, strlen(domain)) : 0,
                            gmp_writer_string(x->w, name, strlen(name)));
}

static gmp_err merge(const char *trace, const char *snap, const char *out,
                     gmp_merge_torch_stats *st, char *msg, size_t msglen);

/* The ranges of the blocks: see the header. */
static void ranges_case(const char *dir)
{
    char trace[4096], snap[4096], out[4096], msg[512];
    snprintf(trace, sizeof trace, "%s/rtrace.zst", dir);
    snprintf(snap, sizeof snap, "%s/rsnap.zst", dir);
    snprintf(out, sizeof out, "%s/rmerged.zst", dir);
    /* the trace: segment A; thread 100 runs train > forward, thread 200 (autograd) backward */
    wr x;
    start(&x, trace, T_WALL, T_BASE, 100);
    gmp_wthread *t100 = x.th, *t200 = gmp_writer_thread(x.w, 200);
    uint32_t train = range_of(&x, 0, NULL, "train"), fwd = range_of(&x, train, NULL, "forward");
    uint32_t bwd = range_of(&x, train, NULL, "backward");
    /* the hooks' ranges inside the program's: train/model/enc on 100; ckpt/model/enc on 200 */
    uint32_t model = range_of(&x, train, NULL, "model"), enc = range_of(&x, model, NULL, "enc");
    uint32_t ckpt = range_of(&x, 0, NULL, "ckpt"), cmodel = range_of(&x, ckpt, NULL, "model");
    uint32_t cenc = range_of(&x, cmodel, NULL, "enc");
    range_ev(&x, GMP_REC_RANGE_PUSH, 9 * MS, train);
    mem(&x, GMP_REC_ALLOC, 10 * MS, GMP_MEM_DEVICE, SEG_A, 8 * MiB, "cudaMalloc", 0);
    range_ev(&x, GMP_REC_RANGE_PUSH, 10 * MS + 100000, fwd);
    range_ev(&x, GMP_REC_RANGE_POP, 11 * MS + 200000, fwd);
    x.th = t200;
    range_ev(&x, GMP_REC_RANGE_PUSH, 11 * MS + 800000, bwd);
    range_ev(&x, GMP_REC_RANGE_POP, 12 * MS + 800000, bwd);
    x.th = t100;
    range_ev(&x, GMP_REC_RANGE_PUSH, 14 * MS, model); /* block 6 at 14.5 ms */
    range_ev(&x, GMP_REC_RANGE_PUSH, 14 * MS + 100000, enc);
    range_ev(&x, GMP_REC_RANGE_POP, 14 * MS + 900000, enc);
    range_ev(&x, GMP_REC_RANGE_PUSH, 16 * MS, enc); /* block 7 at 16.5 ms: 200's is later */
    x.th = t200;
    range_ev(&x, GMP_REC_RANGE_PUSH, 16 * MS + 100000, ckpt);
    range_ev(&x, GMP_REC_RANGE_PUSH, 16 * MS + 150000, cmodel);
    range_ev(&x, GMP_REC_RANGE_PUSH, 16 * MS + 200000, cenc);
    range_ev(&x, GMP_REC_RANGE_POP, 16 * MS + 800000, ckpt);
    x.th = t100;
    range_ev(&x, GMP_REC_RANGE_POP, 16 * MS + 900000, model); /* block 8 at 18.5 ms: none */
    range_ev(&x, GMP_REC_RANGE_POP, 20 * MS, train);
    gmp_writer_sync(x.w, 20 * MS);
    gmp_wthread_release(t200);
    gmp_writer_close(x.w, NULL);
    /* the snapshot (its 2 ms is the trace's 10 ms): six blocks of segment A */
    uint64_t wall = T_WALL + 10 * MS - T_BASE - (2 * MS - S_BASE);
    start(&x, snap, wall, S_BASE, 1);
    uint32_t meta = range_of(&x, range_of(&x, 0, "pytorch.user_metadata", "train"),
                             "pytorch.user_metadata", "layers.3");
    uint32_t step = range_of(&x, 0, "pytorch.record_function", "Optimizer.step#AdamW.step");
    uint32_t menc = range_of(&x, range_of(&x, 0, "pytorch.user_metadata", "model"),
                             "pytorch.user_metadata", "enc");
    pool(&x, 2 * MS, GMP_POOL_CREATE, SEG_A, 0);
    pool(&x, 2 * MS, GMP_POOL_RESERVED, SEG_A, 8 * MiB);
    static const struct {
        uint64_t t;     /* on the trace's clock */
        uint32_t range; /* 0, or which of the snapshot's: 1 meta, 2 step, 3 menc */
    } blocks[] = {{10500, 0}, {11500, 0}, {12500, 0}, {12600, 1}, {12700, 2},
                  {13000, 0}, {14500, 3}, {16500, 3}, {18500, 3}};
    for (size_t i = 0; i < NBLOCKS; i++) {
        uint64_t t = (blocks[i].t - 8000) * 1000; /* the snapshot's clock */
        if (blocks[i].range == 2)
            range_ev(&x, GMP_REC_RANGE_PUSH, t - 50000, step);
        gmp_rec r = {.type = GMP_REC_ALLOC, .time_ns = t};
        r.u.mem.kind = GMP_MEM_ASYNC_POOL;
        r.u.mem.address = SEG_A + i * (MiB / 2);
        r.u.mem.size = (i + 1) * 4096;
        r.u.mem.api = gmp_writer_string(x.w, "CUDACachingAllocator.malloc", 27);
        r.u.mem.range = blocks[i].range == 1   ? meta
                        : blocks[i].range == 2 ? step
                        : blocks[i].range == 3 ? menc
                                               : 0;
        gmp_wthread_event(x.th, &r);
        if (blocks[i].range == 2)
            range_ev(&x, GMP_REC_RANGE_POP, t + 50000, step);
    }
    gmp_writer_sync(x.w, 6 * MS);
    gmp_writer_close(x.w, NULL);

    gmp_merge_torch_stats st;
    gmp_err e = merge(trace, snap, out, &st, msg, sizeof msg);
    CHECK(e == GMP_OK, "ranges: merge: %s", msg);
    CHECK(st.range_metadata == 4 && st.range_metadata_trace == 2 && st.range_annotation == 1 &&
              st.range_trace == 4 && st.range_none == 0 && st.range_compile == 0,
          "ranges: %llu metadata (%llu in the trace's), %llu annotation, %llu trace, %llu none",
          (unsigned long long)st.range_metadata, (unsigned long long)st.range_metadata_trace,
          (unsigned long long)st.range_annotation, (unsigned long long)st.range_trace,
          (unsigned long long)st.range_none);
    static const struct {
        uint32_t tid;
        const char *path;
    } want[] = {{100, "train/forward"},
                {100, "train"},
                {200, "train/backward"},
                {1, "train/layers.3"},
                {1, "Optimizer.step#AdamW.step"},
                {100, "train"},
                {100, "train/model/enc"},
                {200, "ckpt/model/enc"},
                {1, "model/enc"}};
    gmp_reader *r;
    if (gmp_reader_open(&r, out, NULL) != GMP_OK) {
        CHECK(0, "ranges: cannot read the merged trace");
        return;
    }
    const gmp_rec *rec;
    int seen = 0, pushes = 0, notice = 0;
    while (gmp_reader_next(r, &rec) == GMP_OK) {
        if (rec->type == GMP_REC_RANGE_PUSH && rec->tid == 1)
            pushes++;
        if (rec->type == GMP_REC_NOTICE &&
            strstr(rec->u.notice.message.ptr,
                   "the tensors' ranges: 4 from PyTorch's user_metadata (range paths the program "
                   "set; 2 of them the trace's open range whose path ends with it), 1 from its "
                   "record_function annotations"))
            notice++;
        if (rec->type != GMP_REC_ALLOC || rec->u.mem.kind != GMP_MEM_ASYNC_POOL)
            continue;
        size_t i = (size_t)((rec->u.mem.address - SEG_A) / (MiB / 2));
        char path[256] = "";
        for (uint32_t id = rec->u.mem.range; id;) { /* innermost first: prepend */
            const gmp_rec_range *g = gmp_reader_range(r, id);
            if (!g)
                break;
            gmp_str nm = gmp_reader_string(r, g->name);
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)nm.len, nm.ptr, path[0] ? "/" : "", path);
            memcpy(path, tmp, sizeof path);
            id = g->parent;
        }
        if (i < NBLOCKS) {
            seen++;
            CHECK(rec->tid == want[i].tid && strcmp(path, want[i].path) == 0,
                  "ranges: block %zu: thread %u range %s, want %u %s", i, rec->tid, path,
                  want[i].tid, want[i].path);
        }
    }
    gmp_reader_close(r);
    CHECK(seen == NBLOCKS && pushes == 1 && notice == 1,
          "ranges: %d blocks, %d pushes of the snapshot, %d notices", seen, pushes, notice);
}

static gmp_err merge(const char *trace, const char *snap, const char *out,
                     gmp_merge_torch_stats *st, char *msg, size_t msglen)
{
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(out);
        exit(2);
    }
    return gmp_merge_torch(trace, snap, "snap.pickle", fd, st, msg, msglen);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_merge_torch DIR\n");
        return 2;
    }
    char trace[4096], snap[4096], out[4096], msg[512];
    snprintf(trace, sizeof trace, "%s/trace.zst", argv[1]);
    snprintf(snap, sizeof snap, "%s/snap.zst", argv[1]);
    snprintf(out, sizeof out, "%s/merged.zst", argv[1]);
    write_trace(trace);
    /* the snapshot's 2 ms is the trace's 10.5 ms */
    uint64_t wall = T_WALL + 10 * MS + MS / 2 - T_BASE - (2 * MS - S_BASE);
    write_snap(snap, wall, 0);

    gmp_merge_torch_stats st;
    gmp_err e = merge(trace, snap, out, &st, msg, sizeof msg);
    CHECK(e == GMP_OK, "merge: %s", msg);
    CHECK(st.matched_segments == 2 && st.unmatched_segments == 1 && st.pools == 2,
          "segments: %llu matched, %llu unmatched, %llu pools",
          (unsigned long long)st.matched_segments, (unsigned long long)st.unmatched_segments,
          (unsigned long long)st.pools);
    CHECK(st.blocks == 3 && st.block_frees == 1 && st.pre_blocks == 1 && st.ooms_dropped == 1,
          "blocks %llu, frees %llu, pre %llu, ooms %llu", (unsigned long long)st.blocks,
          (unsigned long long)st.block_frees, (unsigned long long)st.pre_blocks,
          (unsigned long long)st.ooms_dropped);
    static char got[64][160];
    size_t n = read_lines(out, got, 64);
    static const char *const want[] = {
        /* the notice at the first event's time: the pre-window block's, by the clocks */
        "9500 1 notice 1 merged with PyTorch's memory history snap.pickle: 2 of the t",
        "10000 100 pool op=1 0x7000000 0",
        "10000 100 pool op=4 0x7000000 2097152",
        "10500 1 alloc async-pool 0x7000000 524288 CUDACachingAllocator.malloc forward:5",
        "11000 100 alloc device 0x9000000 1048576 cudaMalloc 0x401234",
        "11500 1 free async-pool 0x7000000 524288 CUDACachingAllocator.free forward:5",
        "12000 100 pool op=1 0x8000000 0",
        "12000 100 pool op=4 0x8000000 4194304",
        /* the pre-window block (at 9.5 ms by the clocks) no earlier than its segment */
        "12000 1 alloc async-pool 0x8000000 1048576 CUDACachingAllocator.malloc backward:7",
        "12500 1 alloc async-pool 0x8100000 2097152 CUDACachingAllocator.malloc backward:7",
        "20000 100 pool op=2 0x7000000 0",
        "30000 100 free device 0x9000000 1048576 cudaFree -",
        "30000 1 notice 2 PyTorch memory history: 1 of its segments are not allocation",
        "30000 1 notice 1 PyTorch memory history: 1 blocks existed before its history ",
        "30000 1 notice 1 PyTorch memory history: the tensors' ranges: 0 from PyTorch'",
        "30000 1 notice 1 PyTorch memory history: 1 out-of-memory entries not merged (",
    };
    size_t nw = sizeof want / sizeof want[0];
    CHECK(n == nw, "%zu events, want %zu", n, nw);
    for (size_t i = 0; i < n && i < nw; i++)
        CHECK(strcmp(got[i], want[i]) == 0, "event %zu:\n  got  %s\n  want %s", i, got[i], want[i]);

    /* refusals: one line each, never a crash */
    struct {
        const char *what;
        uint64_t wall, shift;
        const char *says;
    } bad[] = {
        {"no times", 0, 0, "has no times"},
        {"other addresses", wall, 1ull << 32, "none of the snapshot's 3 segments"},
        {"another time", wall + 3600000 * MS, 0, "not within the trace's"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_snap(snap, bad[i].wall, bad[i].shift);
        e = merge(trace, snap, out, NULL, msg, sizeof msg);
        CHECK(e == GMP_ERR_FORMAT && strstr(msg, bad[i].says) && !strchr(msg, '\n'), "%s: %d %s",
              bad[i].what, (int)e, msg);
    }
    FILE *f = fopen(snap, "wb");
    if (f) {
        fputs("not a trace", f);
        fclose(f);
    }
    e = merge(trace, snap, out, NULL, msg, sizeof msg);
    CHECK(e != GMP_OK && strstr(msg, "the snapshot"), "not a trace: %d %s", (int)e, msg);
    e = merge(snap, trace, out, NULL, msg, sizeof msg); /* the two the wrong way round */
    CHECK(e != GMP_OK && msg[0], "swapped: %d %s", (int)e, msg);
    ranges_case(argv[1]);
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
