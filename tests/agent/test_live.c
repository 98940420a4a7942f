/* Unit test of collectors/gmp_live (the live accounting behind gpumemprof.profile()): random
 * allocations and frees on 3 devices from 40 stacks, scopes opened and closed at random (up to 6
 * open at once, not nested in order), against a plain reference that keeps every live allocation
 * and, for each scope, the bytes of every (stack, device) at the moment the device's peak was
 * first reached. Checked at every close: start, peak, end, allocated, freed, calls, baseline frees
 * and the top sites at the peak (bytes per stack: the journal's reconstruction, also after the
 * ring wrapped many times), then the "other" site when the site table is full, a free that fails
 * (live again), and the scope bound. Exit 0 when all agree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_live.h"

#define NDEV 3
#define NSTACK 40
#define NKEYS 600
#define MAXS 6

static int fails;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            if (fails++ < 20) {                                                                    \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);                                        \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* reference */
static int live_on[NKEYS];
static uint64_t live_size[NKEYS];
static int live_dev[NKEYS], live_stack[NKEYS];
static uint64_t cur[NDEV], tot_a[NDEV], tot_f[NDEV], n_a[NDEV], n_f[NDEV], n_b[NDEV];

typedef struct rscope {
    uint64_t h;
    uint64_t start[NDEV], peak[NDEV], a0[NDEV], f0[NDEV], na0[NDEV], nf0[NDEV], nb0[NDEV];
    uint64_t at_peak[NDEV][NSTACK + 1]; /* bytes per stack at the peak */
} rscope;
static rscope sc[MAXS];
static int nsc;

static void snap(rscope *s, int d)
{
    memset(s->at_peak[d], 0, sizeof s->at_peak[d]);
    for (int k = 0; k < NKEYS; k++)
        if (live_on[k] && live_dev[k] == d)
            s->at_peak[d][live_stack[k]] += live_size[k];
}

static gmp_rec mem(int type, uint64_t addr, uint64_t size, int dev, uint32_t stack, uint32_t flags)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = (uint32_t)type;
    r.u.mem.kind = GMP_MEM_DEVICE;
    r.u.mem.address = addr;
    r.u.mem.size = size;
    r.u.mem.device = dev;
    r.u.mem.stack = stack;
    r.u.mem.flags = flags;
    return r;
}

static void do_alloc(int k, int d, int st, uint64_t size)
{
    gmp_rec r = mem(GMP_REC_ALLOC, 0x10000ull * (uint64_t)(k + 1), size, d, (uint32_t)st, 0);
    gmp_live_rec(&r);
    live_on[k] = 1;
    live_size[k] = size;
    live_dev[k] = d;
    live_stack[k] = st;
    cur[d] += size;
    tot_a[d] += size;
    n_a[d]++;
    for (int i = 0; i < nsc; i++)
        if (cur[d] > sc[i].peak[d]) {
            sc[i].peak[d] = cur[d];
            snap(&sc[i], d);
        }
}

static void do_free(int k, int d_if_unknown)
{
    gmp_rec r = mem(GMP_REC_FREE, 0x10000ull * (uint64_t)(k + 1), 0, d_if_unknown, 0, 0);
    gmp_live_rec(&r);
    if (!live_on[k]) {
        n_b[d_if_unknown]++;
        return;
    }
    live_on[k] = 0;
    cur[live_dev[k]] -= live_size[k];
    tot_f[live_dev[k]] += live_size[k];
    n_f[live_dev[k]]++;
}

static void open_scope(void)
{
    rscope *s = &sc[nsc];
    s->h = gmp_live_open();
    CHECK(s->h != 0, "open failed");
    for (int d = 0; d < NDEV; d++) {
        s->start[d] = s->peak[d] = cur[d];
        s->a0[d] = tot_a[d];
        s->f0[d] = tot_f[d];
        s->na0[d] = n_a[d];
        s->nf0[d] = n_f[d];
        s->nb0[d] = n_b[d];
        snap(s, d);
    }
    nsc++;
}

static void close_scope(int i)
{
    rscope *s = &sc[i];
    gmp_live_dev out[GMP_LIVE_MAX_DEV];
    uint64_t lost = 1;
    int n = gmp_live_close(s->h, out, GMP_LIVE_MAX_DEV, &lost);
    CHECK(n >= 0 && n <= NDEV, "close returned %d", n);
    CHECK(lost == 0, "lost %llu", (unsigned long long)lost);
    for (int j = 0; j < n; j++) {
        gmp_live_dev *o = &out[j];
        int d = o->device;
        CHECK(d >= 0 && d < NDEV, "device %d", d);
        if (d < 0 || d >= NDEV)
            continue;
        CHECK(o->start_bytes == s->start[d], "dev %d start %llu want %llu", d,
              (unsigned long long)o->start_bytes, (unsigned long long)s->start[d]);
        CHECK(o->peak_bytes == s->peak[d], "dev %d peak %llu want %llu", d,
              (unsigned long long)o->peak_bytes, (unsigned long long)s->peak[d]);
        CHECK(o->end_bytes == cur[d], "dev %d end", d);
        CHECK(o->allocated_bytes == tot_a[d] - s->a0[d], "dev %d allocated", d);
        CHECK(o->freed_bytes == tot_f[d] - s->f0[d], "dev %d freed", d);
        CHECK(o->allocs == n_a[d] - s->na0[d] && o->frees == n_f[d] - s->nf0[d], "dev %d calls", d);
        CHECK(o->baseline_frees == n_b[d] - s->nb0[d], "dev %d baseline frees", d);
        /* top sites: each reported stack has its bytes at the peak, in decreasing order, and
         * every stack left out has no more than the last one reported */
        uint64_t want_total = 0;
        int want_n = 0;
        for (int st = 0; st <= NSTACK; st++)
            if (s->at_peak[d][st]) {
                want_total += s->at_peak[d][st];
                want_n++;
            }
        int expect = want_n < GMP_LIVE_TOP ? want_n : GMP_LIVE_TOP;
        CHECK((int)o->nsites == expect, "dev %d: %u sites, want %d", d, o->nsites, expect);
        int seen[NSTACK + 1] = {0};
        for (uint32_t k = 0; k < o->nsites; k++) {
            uint32_t st = o->sites[k].stack;
            CHECK(st <= NSTACK && o->sites[k].bytes == s->at_peak[d][st],
                  "dev %d site %u (stack %u): %llu bytes, want %llu", d, k, st,
                  (unsigned long long)o->sites[k].bytes,
                  (unsigned long long)(st <= NSTACK ? s->at_peak[d][st] : 0));
            CHECK(k == 0 || o->sites[k - 1].bytes >= o->sites[k].bytes, "order");
            if (st <= NSTACK)
                seen[st] = 1;
        }
        if (o->nsites == GMP_LIVE_TOP)
            for (int st = 0; st <= NSTACK; st++)
                CHECK(seen[st] || s->at_peak[d][st] <= o->sites[GMP_LIVE_TOP - 1].bytes,
                      "dev %d: stack %d left out with more bytes", d, st);
    }
    /* devices seen while open and not reported: none had anything */
    for (int d = 0; d < NDEV; d++) {
        int found = 0;
        for (int j = 0; j < n; j++)
            found |= out[j].device == d;
        CHECK(found || (!s->start[d] && !cur[d] && tot_a[d] == s->a0[d]),
              "dev %d missing from the result", d);
    }
    sc[i] = sc[--nsc];
}

int main(void)
{
    long ops = 0;
    for (int round = 0; round < 400; round++) {
        int steps = (int)(next() % 3000);
        for (int i = 0; i < steps; i++, ops++) {
            uint64_t x = next();
            int k = (int)(x % NKEYS);
            if (live_on[k] || (x >> 20) % 7 == 0)
                do_free(k, (int)((x >> 32) % NDEV));
            else
                do_alloc(k, (int)((x >> 24) % NDEV), (int)((x >> 40) % (NSTACK + 1)),
                         256 * (1 + (x >> 48) % 64));
        }
        if (nsc < MAXS && (next() % 3 || nsc == 0))
            open_scope();
        else
            close_scope((int)(next() % (uint64_t)nsc));
    }
    while (nsc)
        close_scope(nsc - 1);

    /* current bytes */
    int32_t devs[8];
    uint64_t bytes[8];
    int n = gmp_live_current(devs, bytes, 8);
    CHECK(n == NDEV, "current: %d devices", n);
    for (int i = 0; i < n; i++)
        CHECK(bytes[i] == cur[devs[i]], "current of device %d", devs[i]);

    /* a free that fails after being recorded at its entry: the memory is live again */
    open_scope();
    int k = 0;
    while (!live_on[k])
        k++;
    uint64_t was = cur[live_dev[k]];
    gmp_rec f = mem(GMP_REC_FREE, 0x10000ull * (uint64_t)(k + 1), 0, live_dev[k], 0, 0);
    gmp_live_rec(&f);
    f.u.mem.flags = GMP_MEMF_FAILED;
    gmp_live_rec(&f);
    n = gmp_live_current(devs, bytes, 8);
    for (int i = 0; i < n; i++)
        if (devs[i] == live_dev[k])
            CHECK(bytes[i] == was, "a failed free left %llu live, want %llu",
                  (unsigned long long)bytes[i], (unsigned long long)was);
    close_scope(0);

    /* the site table full: further stacks go to the device's "other" site (stack 0) */
    open_scope();
    for (uint32_t st = 1; st <= GMP_LIVE_SITES; st++) {
        gmp_rec r = mem(GMP_REC_ALLOC, 0x100000000ull + st * 0x1000ull, 256, 0, 1000 + st, 0);
        gmp_live_rec(&r);
    }
    gmp_live_dev out[GMP_LIVE_MAX_DEV];
    n = gmp_live_close(sc[0].h, out, GMP_LIVE_MAX_DEV, NULL);
    nsc = 0;
    int other = 0;
    for (int j = 0; j < n; j++)
        if (out[j].device == 0)
            for (uint32_t s = 0; s < out[j].nsites; s++)
                if (out[j].sites[s].stack == 0)
                    other = out[j].sites[s].bytes >= 256ull * (GMP_LIVE_SITES / 4);
    CHECK(other, "no \"other\" site holding the stacks beyond the table");

    /* the bound of open scopes */
    uint64_t h[GMP_LIVE_MAX_SCOPES + 1];
    int opened = 0;
    for (int i = 0; i <= GMP_LIVE_MAX_SCOPES; i++)
        if ((h[i] = gmp_live_open()) != 0)
            opened++;
    CHECK(opened == GMP_LIVE_MAX_SCOPES, "%d scopes opened, want the bound %d", opened,
          GMP_LIVE_MAX_SCOPES);
    for (int i = 0; i <= GMP_LIVE_MAX_SCOPES; i++)
        if (h[i])
            CHECK(gmp_live_close(h[i], NULL, 0, NULL) >= 0, "close %d", i);
    CHECK(gmp_live_close(h[0], NULL, 0, NULL) == -1, "a closed handle closes again");

    if (fails) {
        printf("%d failures over %ld operations\n", fails, ops);
        return 1;
    }
    printf("ok: %ld operations\n", ops);
    return 0;
}
