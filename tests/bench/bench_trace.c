/* bench_trace: see bench_trace.h. */
#include "bench_trace.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gmp_writer.h"

#define LIVE 20000
#define NSTACKS 64

const char *g_bench_name = "bench";

double gmp_bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

_Noreturn void gmp_bench_die(const char *m)
{
    fprintf(stderr, "%s: %s\n", g_bench_name, m);
    exit(1);
}

static void ev(gmp_wthread *th, gmp_rec *r)
{
    if (gmp_wthread_event(th, r) != 0)
        gmp_bench_die("gmp_wthread_event failed");
}

uint64_t gmp_bench_generate(const char *path, uint64_t nevents)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        gmp_bench_die("cannot create the trace");
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){g_bench_name, (uint32_t)strlen(g_bench_name)};
    h.hostname = (gmp_str){"bench", 5};
    h.rank = -1;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    o.level = 1;
    gmp_writer *w;
    if (gmp_writer_open(&w, fd, &o, &h) != GMP_OK)
        gmp_bench_die("gmp_writer_open failed");
    gmp_wthread *th[2] = {gmp_writer_thread(w, 1000), gmp_writer_thread(w, 1001)};
    uint32_t api_m = gmp_writer_string(w, "cudaMalloc", 10);
    uint32_t api_f = gmp_writer_string(w, "cudaFree", 8);
    uint32_t step = gmp_writer_range(w, 0, 0, gmp_writer_string(w, "step", 4));
    uint32_t layer[8], fb[8][2];
    for (int i = 0; i < 8; i++) {
        char b[16];
        int n = snprintf(b, sizeof b, "layer%d", i);
        layer[i] = gmp_writer_range(w, step, 0, gmp_writer_string(w, b, (size_t)n));
        fb[i][0] = gmp_writer_range(w, layer[i], 0, gmp_writer_string(w, "forward", 7));
        fb[i][1] = gmp_writer_range(w, layer[i], 0, gmp_writer_string(w, "backward", 8));
    }
    uint32_t stacks[NSTACKS];
    for (int i = 0; i < NSTACKS; i++)
        stacks[i] = gmp_writer_stack_native(
            w, gmp_writer_stack_native(w, 0, 0x400000 + (uint64_t)(i % 8) * 0x100),
            0x500000 + (uint64_t)i * 0x40);
    static uint64_t live[LIVE];
    uint64_t nlive = 0, head = 0, next_addr = 0x700000000000ull, t = 1000000000ull, n = 0;
    uint64_t rng = 88172645463325252ull;
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_POOL;
    r.time_ns = t;
    r.u.pool.op = GMP_POOL_CREATE;
    r.u.pool.pool = 0x5000;
    ev(th[0], &r);
    int depth = 0, li = 0, phase = 0;
    while (n < nevents) {
        gmp_wthread *T = th[n % 7 == 0];
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        t += 100 + rng % 400;
        memset(&r, 0, sizeof r);
        r.time_ns = t;
        if (n % 50 == 0) { /* ranges on thread 0: step > layerN > forward|backward */
            r.type = depth < 3 ? GMP_REC_RANGE_PUSH : GMP_REC_RANGE_POP;
            if (depth == 0)
                r.u.rev.range = step;
            else if (depth == 1)
                r.u.rev.range = layer[li];
            else if (depth == 2)
                r.u.rev.range = fb[li][phase];
            ev(th[0], &r);
            if (depth < 3) {
                depth++;
            } else {
                depth = 1; /* pop the forward/backward, then the next layer after two pops */
                memset(&r, 0, sizeof r);
                r.type = GMP_REC_RANGE_POP;
                r.time_ns = t;
                ev(th[0], &r);
                phase ^= 1;
                if (!phase && ++li == 8) {
                    li = 0;
                    memset(&r, 0, sizeof r);
                    r.type = GMP_REC_RANGE_POP;
                    r.time_ns = t;
                    ev(th[0], &r);
                    depth = 0;
                }
                n += 2;
            }
            n++;
            continue;
        }
        if (n % 4096 == 0) {
            r.type = GMP_REC_SAMPLE;
            r.u.sample.total_bytes = 80ull << 30;
            r.u.sample.free_bytes = 60ull << 30;
            r.u.sample.process_used = UINT64_MAX;
            ev(T, &r);
            n++;
            continue;
        }
        if (n % 1024 == 1) {
            r.type = GMP_REC_POOL;
            r.u.pool.op = GMP_POOL_RESERVED;
            r.u.pool.pool = 0x5000;
            r.u.pool.value = (rng % 64) << 20;
            ev(T, &r);
            n++;
            continue;
        }
        if (nlive < LIVE && (nlive < LIVE / 2 || rng % 2)) {
            r.type = GMP_REC_ALLOC;
            r.u.mem.kind = GMP_MEM_DEVICE;
            r.u.mem.api = api_m;
            r.u.mem.address = next_addr;
            r.u.mem.size = 256 + (rng >> 20) % (4 << 20);
            r.u.mem.stack = stacks[rng % NSTACKS];
            r.u.mem.range = depth == 3 ? fb[li][phase] : 0;
            live[(head + nlive) % LIVE] = next_addr;
            next_addr += 8 << 20;
            nlive++;
        } else {
            r.type = GMP_REC_FREE;
            r.u.mem.kind = GMP_MEM_DEVICE;
            r.u.mem.api = api_f;
            r.u.mem.address = live[head];
            head = (head + 1) % LIVE;
            nlive--;
        }
        ev(T, &r);
        n++;
        if (n % 65536 == 0)
            gmp_writer_sync(w, t);
    }
    gmp_wthread_release(th[0]);
    gmp_wthread_release(th[1]);
    if (gmp_writer_close(w, NULL) != GMP_OK)
        gmp_bench_die("gmp_writer_close failed");
    return n;
}
