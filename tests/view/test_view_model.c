/* test_view_model: the viewer's index (tui/gmp_tui_model.c) against the replay's own numbers.
 *
 * Writes a trace of 300,000 events (cudaMalloc/cudaFree on two devices with a rolling live set
 * of 5,000, pinned host memory, a pool whose reserved size changes, a SYNC every 4,096 events),
 * so that the index has several live-set checkpoints, then checks at 400 events spread over the
 * log (and at every checkpoint boundary's neighbours):
 *  - the live set after the event (one checkpoint plus the events after it), summed over the
 *    event's device's device-kind allocations, is the device's allocated bytes that the replay
 *    reported right after that event (recorded in the log);
 *  - the live set holds no allocation twice;
 *  - at each device's peak event the sum is the replay's peak;
 *  - gmp_tui_model_count_until finds every event by its time;
 *  - reserved_at the event of a device is the reserved the replay reported after it;
 *  - a failed allocation and the OOM written after it for the same request (as the agent writes a
 *    failed cudaMalloc, and the PyTorch importer a snapshot's `oom` entry) are one failure: the
 *    device's failures count it once, jumps to OOMs and failures stop at the OOM only, also when
 *    the failed allocation is 29,000 events back (written out of the index's buffer); a failed
 *    allocation and an OOM of another size are two failures.
 * Exit 0 when every check holds, 1 with a message otherwise. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_reader.h"
#include "gmp_tui_model.h"
#include "gmp_writer.h"

#define LIVE 5000
#define NEVENTS 300000

static int failures;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            if (++failures > 20)                                                                   \
                exit(1);                                                                           \
        }                                                                                          \
    } while (0)

/* Where the failures go (event numbers of the loop below): device 1's failed allocation, its OOM
 * 29,000 events later; on device 0 a failed allocation with its OOM, and one whose OOM asks for
 * another size. */
#define FAIL_FAR 1000
#define FAIL_FAR_OOM 30000
#define FAIL_NEAR 50000
#define FAIL_OTHER 100000

static void failure(gmp_wthread *th, int32_t dev, uint32_t api, uint64_t size, uint64_t t)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_ALLOC;
    r.time_ns = t;
    r.u.mem.device = dev;
    r.u.mem.kind = GMP_MEM_DEVICE;
    r.u.mem.flags = GMP_MEMF_FAILED;
    r.u.mem.api = api;
    r.u.mem.size = size;
    r.u.mem.result = 2; /* cudaErrorMemoryAllocation */
    if (gmp_wthread_event(th, &r) != 0)
        exit(1);
}

static void oom(gmp_wthread *th, int32_t dev, uint32_t api, uint64_t size, uint64_t t)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_OOM;
    r.time_ns = t;
    r.u.oom.device = dev;
    r.u.oom.api = api;
    r.u.oom.requested = size;
    r.u.oom.result = 2;
    if (gmp_wthread_event(th, &r) != 0)
        exit(1);
}

/* The failures' stops of device dev (OOMs and failed allocations) in order, as ops. */
static size_t failure_stops(const gmp_tui_model *m, int32_t dev, unsigned mask, uint8_t *ops,
                            size_t max)
{
    size_t n = 0;
    gmp_tui_ev ev;
    for (uint64_t i = gmp_tui_model_find(m, UINT64_MAX, 1, mask, dev); i != UINT64_MAX && n < max;
         i = gmp_tui_model_find(m, i, 1, mask, dev))
        if (gmp_tui_model_read(m, i, &ev, 1) == 1)
            ops[n++] = ev.op;
    return n;
}

static void check_failures(const gmp_tui_model *m)
{
    unsigned both = 1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED;
    uint8_t ops[8];
    for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++) {
        const gmp_tui_dev *d = gmp_tui_model_dev(m, k);
        /* device 0: one pair and two of their own; device 1: one pair */
        uint64_t want = d->id == 0 ? 3 : 1;
        CHECK(d->failures == want, "device %d: %" PRIu64 " failures, not %" PRIu64, d->id,
              d->failures, want);
        CHECK(d->d->failed_allocs == (d->id == 0 ? 2u : 1u) && d->d->ooms == d->d->failed_allocs,
              "device %d: the replay's counts", d->id);
        size_t n = failure_stops(m, d->id, both, ops, 8);
        if (d->id == 0)
            CHECK(n == 3 && ops[0] == GMP_TUI_EV_OOM && ops[1] == GMP_TUI_EV_FAILED &&
                      ops[2] == GMP_TUI_EV_OOM,
                  "device 0: %zu stops for o", n);
        else
            CHECK(n == 1 && ops[0] == GMP_TUI_EV_OOM, "device 1: %zu stops for o", n);
        /* failed allocations alone: every one, the reported ones marked */
        n = failure_stops(m, d->id, 1u << GMP_TUI_EV_FAILED, ops, 8);
        CHECK(n == (d->id == 0 ? 2u : 1u), "device %d: %zu failed allocations", d->id, n);
    }
    uint64_t i = gmp_tui_model_find(m, UINT64_MAX, 1, 1u << GMP_TUI_EV_FAILED, 1);
    gmp_tui_ev ev;
    CHECK(i != UINT64_MAX && gmp_tui_model_read(m, i, &ev, 1) == 1 &&
              (ev.flags & GMP_TUI_EVF_REPORTED) && (ev.flags & GMP_TUI_EVF_KIND) == GMP_MEM_DEVICE,
          "device 1's failed allocation is not marked reported (in the file)");
}

static void generate(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        exit(1);
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"test_view_model", 15};
    h.rank = -1;
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    gmp_writer *w;
    if (gmp_writer_open(&w, fd, &o, &h) != GMP_OK)
        exit(1);
    gmp_wthread *th = gmp_writer_thread(w, 42);
    uint32_t api_m = gmp_writer_string(w, "cudaMalloc", 10);
    static uint64_t addr[LIVE];
    static int32_t dev[LIVE];
    static uint32_t kind[LIVE];
    uint64_t head = 0, nlive = 0, next = 0x700000000000ull, t = 1000, rng = 12345;
    gmp_rec r;
    for (uint64_t n = 0; n < NEVENTS; n++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        t += 50 + rng % 200;
        memset(&r, 0, sizeof r);
        r.time_ns = t;
        if (n % 997 == 5) {
            r.type = GMP_REC_POOL;
            r.u.pool.device = (int32_t)(rng % 2);
            r.u.pool.op = GMP_POOL_RESERVED;
            r.u.pool.pool = 0x5000 + (uint64_t)r.u.pool.device;
            r.u.pool.value = (rng % 32) << 20;
        } else if (nlive < LIVE && (nlive < LIVE / 2 || rng % 2)) {
            uint64_t i = (head + nlive) % LIVE;
            r.type = GMP_REC_ALLOC;
            r.u.mem.device = (int32_t)((rng >> 8) % 2);
            r.u.mem.kind = (rng >> 12) % 16 == 0 ? GMP_MEM_PINNED_HOST : GMP_MEM_DEVICE;
            r.u.mem.api = api_m;
            r.u.mem.address = next;
            r.u.mem.size = 512 + (rng >> 20) % (1 << 20);
            addr[i] = next;
            dev[i] = r.u.mem.device;
            kind[i] = r.u.mem.kind;
            next += 2 << 20;
            nlive++;
        } else {
            r.type = GMP_REC_FREE;
            r.u.mem.device = dev[head];
            r.u.mem.kind = kind[head];
            r.u.mem.address = addr[head];
            head = (head + 1) % LIVE;
            nlive--;
        }
        if (n == FAIL_FAR || n == FAIL_NEAR || n == FAIL_OTHER)
            failure(th, n == FAIL_FAR ? 1 : 0, api_m, 64ull << 30, t - 1);
        if (n == FAIL_FAR_OOM || n == FAIL_NEAR || n == FAIL_OTHER)
            oom(th, n == FAIL_FAR_OOM ? 1 : 0, api_m, n == FAIL_OTHER ? 65ull << 30 : 64ull << 30,
                t - 1); /* (FAIL_NEAR: the same instant, as a snapshot's) */
        if (gmp_wthread_event(th, &r) != 0)
            exit(1);
        if (n % 4096 == 4095)
            gmp_writer_sync(w, t);
    }
    gmp_wthread_release(th);
    if (gmp_writer_close(w, NULL) != GMP_OK)
        exit(1);
}

static uint64_t device_sum(const gmp_tui_model *m, const gmp_tui_live *l, size_t n, int32_t d)
{
    gmp_replay *rp = gmp_tui_model_replay(m);
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        const gmp_replay_site *st = gmp_replay_site_at(rp, l[i].site);
        if (l[i].device == d && st && gmp_mem_kind_is_device(st->kind))
            s += l[i].size;
    }
    return s;
}

static int cmp_key(const void *a, const void *b)
{
    const gmp_tui_live *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (int)x->space - (int)y->space;
}

static void check_at(const gmp_tui_model *m, uint64_t i)
{
    gmp_tui_ev ev;
    if (gmp_tui_model_read(m, i, &ev, 1) != 1) {
        CHECK(0, "cannot read event %" PRIu64, i);
        return;
    }
    gmp_tui_live *l;
    size_t n;
    CHECK(gmp_tui_model_live(m, i, &l, &n) == GMP_OK, "live at %" PRIu64, i);
    if (ev.op == GMP_TUI_EV_ALLOC || ev.op == GMP_TUI_EV_FREE || ev.op == GMP_TUI_EV_POOL) {
        uint64_t s = device_sum(m, l, n, ev.device);
        CHECK(s == ev.allocated,
              "event %" PRIu64 ": live set of device %d sums to %" PRIu64
              ", the replay had %" PRIu64,
              i, ev.device, s, ev.allocated);
        for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++) {
            const gmp_tui_dev *d = gmp_tui_model_dev(m, k);
            if (d->id == ev.device)
                CHECK(gmp_tui_model_reserved_at(m, d, i) == ev.reserved,
                      "event %" PRIu64 ": reserved_at %" PRIu64 ", the replay had %" PRIu64, i,
                      gmp_tui_model_reserved_at(m, d, i), ev.reserved);
        }
    }
    qsort(l, n, sizeof *l, cmp_key);
    for (size_t k = 1; k < n; k++)
        CHECK(l[k].key != l[k - 1].key || l[k].space != l[k - 1].space,
              "event %" PRIu64 ": 0x%" PRIx64 " twice in the live set", i, l[k].key);
    uint64_t c = gmp_tui_model_count_until(m, ev.time_ns);
    CHECK(c > i, "count_until(time of event %" PRIu64 ") = %" PRIu64, i, c);
    free(l);
}

/* `test_view_model verdicts TRACE`: the model's verdicts, one a line: index time device site text
 * (for test_view.py's verdict case, which checks them against the screen and the report). */
static int print_verdicts(const char *trace)
{
    gmp_reader *r;
    if (gmp_reader_open(&r, trace, NULL) != GMP_OK)
        return 1;
    gmp_tui_model *m;
    char msg[256];
    if (gmp_tui_model_build(&m, r, msg, sizeof msg) != GMP_OK) {
        fprintf(stderr, "test_view_model: %s\n", msg);
        return 1;
    }
    gmp_tui_model_verdicts_start(m, trace);
    while (gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_RUNNING)
        usleep(10000);
    if (gmp_tui_model_verdicts_state(m) != GMP_TUI_VERDICTS_READY) {
        fprintf(stderr, "test_view_model: the verdicts' pass failed\n");
        gmp_tui_model_free(m);
        return 1;
    }
    for (size_t i = 0; i < gmp_tui_model_nverdicts(m); i++) {
        const gmp_tui_verdict *v = gmp_tui_model_verdict(m, i);
        printf("%" PRIu64 "\t%" PRIu64 "\t%d\t%" PRIu32 "\t%s\n", v->index, v->time_ns,
               (int)v->device, v->site, v->text);
    }
    gmp_tui_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "verdicts") == 0)
        return print_verdicts(argv[2]);
    char path[] = "/tmp/test_view_model_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
    generate(path);
    gmp_reader *r;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        return 1;
    gmp_tui_model *m;
    char msg[256];
    gmp_err e = gmp_tui_model_build(&m, r, msg, sizeof msg);
    unlink(path);
    if (e != GMP_OK) {
        fprintf(stderr, "FAIL: %s\n", msg);
        return 1;
    }
    uint64_t n = gmp_tui_model_events(m);
    CHECK(n > NEVENTS * 9 / 10, "only %" PRIu64 " events logged", n);
    CHECK(gmp_tui_model_ndevs(m) == 2, "%zu devices, not 2", gmp_tui_model_ndevs(m));
    for (uint64_t k = 0; k < 400; k++)
        check_at(m, k * (n - 1) / 399);
    for (uint64_t c = 65536; c < n; c += 65536) /* around possible checkpoint boundaries */
        for (uint64_t d = c - 2; d < c + 2 && d < n; d++)
            check_at(m, d);
    check_failures(m);
    for (size_t k = 0; k < gmp_tui_model_ndevs(m); k++) {
        const gmp_tui_dev *d = gmp_tui_model_dev(m, k);
        gmp_tui_live *l;
        size_t nl;
        CHECK(d->has_peak, "device %d has no peak", d->id);
        CHECK(gmp_tui_model_live(m, d->peak_index, &l, &nl) == GMP_OK, "live at the peak");
        uint64_t s = device_sum(m, l, nl, d->id);
        CHECK(s == d->d->peak_allocated, "device %d: %" PRIu64 " live at its peak, peak %" PRIu64,
              d->id, s, d->d->peak_allocated);
        free(l);
    }
    gmp_tui_model_free(m);
    if (failures)
        return 1;
    printf("ok: %" PRIu64 " events, 400 points and the checkpoint boundaries\n", n);
    return 0;
}
