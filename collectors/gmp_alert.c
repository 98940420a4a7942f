#include "gmp_driver.h"
#include "gmp_alert.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "gmp_clock.h"
#include "gmp_units.h"

#define MAX_DEV 64

int gmp_alert_on;

typedef struct live {
    uint64_t key; /* address, or VMM handle (tagged) */
    uint64_t size;
    uint32_t range;
    int32_t device; /* -2: empty slot, -3: deleted */
} live;

static const gmp_sink *S;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static live *tab;
static size_t cap, used; /* used counts live and deleted slots */
static uint64_t threshold_bytes;
static unsigned threshold_pct;
static uint64_t allocated[MAX_DEV];
static uint64_t limit[MAX_DEV]; /* 0: not known yet */
static int fired[MAX_DEV];

#define EMPTY (-2)
#define DELETED (-3)
#define VMM_TAG (1ull << 63)

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int grow(void)
{
    size_t nc = cap ? cap * 2 : 4096;
    live *nt = malloc(nc * sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < nc; i++)
        nt[i].device = EMPTY;
    for (size_t i = 0; i < cap; i++) {
        if (tab[i].device < 0)
            continue;
        size_t j = mix(tab[i].key) & (nc - 1);
        while (nt[j].device != EMPTY)
            j = (j + 1) & (nc - 1);
        nt[j] = tab[i];
    }
    free(tab);
    tab = nt;
    cap = nc;
    used = 0;
    for (size_t i = 0; i < cap; i++)
        used += tab[i].device >= 0;
    return 0;
}

static uint64_t key_of(const gmp_rec_mem *m)
{
    return m->kind == GMP_MEM_VMM_PHYSICAL ? (m->handle | VMM_TAG) : m->address;
}

static uint64_t device_limit(int dev)
{
    if (threshold_bytes)
        return threshold_bytes;
    CUresult (*total_mem)(size_t *, CUdevice);
    *(void **)&total_mem = gmp_driver_sym("cuDeviceTotalMem_v2");
    size_t total = 0;
    if (!total_mem || total_mem(&total, (CUdevice)dev) != CUDA_SUCCESS || !total)
        return UINT64_MAX; /* unknown total: a percentage cannot be applied */
    return (uint64_t)((unsigned __int128)total * threshold_pct / 100);
}

typedef struct rtot {
    uint32_t range;
    uint64_t bytes;
} rtot;

/* Called with lock held, when device dev crosses its threshold. */
static void fire(gmp_wthread *t, int dev)
{
    fired[dev] = 1;
    rtot top[3] = {{0, 0}, {0, 0}, {0, 0}};
    /* per-range totals: a small open table of ranges on this device */
    size_t rc = 256, rn = 0;
    rtot *rt = calloc(rc, sizeof *rt);
    for (size_t i = 0; rt && i < cap; i++) {
        if (tab[i].device != dev)
            continue;
        size_t j = 0;
        while (j < rn && rt[j].range != tab[i].range)
            j++;
        if (j == rn) {
            if (rn == rc) {
                rtot *nr = realloc(rt, 2 * rc * sizeof *rt);
                if (!nr)
                    continue;
                rt = nr;
                rc *= 2;
            }
            rt[rn++] = (rtot){tab[i].range, 0};
        }
        rt[j].bytes += tab[i].size;
    }
    for (size_t j = 0; j < rn; j++) {
        for (int k = 0; k < 3; k++) {
            if (rt[j].bytes > top[k].bytes) {
                memmove(&top[k + 1], &top[k], (size_t)(2 - k) * sizeof top[0]);
                top[k] = rt[j];
                break;
            }
        }
    }
    free(rt);
    gmp_rec a = {.type = GMP_REC_ALERT};
    a.u.alert.device = dev;
    a.u.alert.threshold = limit[dev];
    a.u.alert.live_bytes = allocated[dev];
    a.u.alert.range = top[0].range;
    gmp_wthread_event(t, &a);

    char line[1024], b1[32], b2[32];
    int n = snprintf(line, sizeof line,
                     "gpumemprof: alert: device %d has %s allocated, over the threshold of %s", dev,
                     gmp_fmt_bytes(allocated[dev], b1, sizeof b1),
                     gmp_fmt_bytes(limit[dev], b2, sizeof b2));
    for (int k = 0; k < 3 && top[k].bytes && n > 0 && (size_t)n < sizeof line; k++) {
        char path[256];
        gmp_writer_range_path(S->w, top[k].range, path, sizeof path);
        n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %s",
                      k ? "," : "; top ranges:", gmp_fmt_bytes(top[k].bytes, b1, sizeof b1),
                      path[0] ? path : "(no range)");
    }
    if (n > 0 && (size_t)n < sizeof line - 1) {
        line[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, line, (size_t)n);
        (void)w;
    }
}

int gmp_alert_init(const gmp_sink *sink, uint64_t bytes, unsigned percent)
{
    if (!bytes && (!percent || percent > 100))
        return -1;
    S = sink;
    threshold_bytes = bytes;
    threshold_pct = percent;
    if (grow() < 0)
        return -1;
    gmp_alert_on = 1;
    return 0;
}

void gmp_alert_alloc(gmp_wthread *t, const gmp_rec_mem *m)
{
    if (!gmp_mem_kind_is_device(m->kind) || m->device < 0 || m->device >= MAX_DEV ||
        (m->flags & GMP_MEMF_FAILED))
        return;
    pthread_mutex_lock(&lock);
    if ((used + 1) * 2 > cap && grow() < 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    uint64_t k = key_of(m);
    size_t j = mix(k) & (cap - 1);
    while (tab[j].device >= 0 && tab[j].key != k)
        j = (j + 1) & (cap - 1);
    if (tab[j].device >= 0) { /* a live address allocated again: its free was not seen */
        if (allocated[tab[j].device] >= tab[j].size)
            allocated[tab[j].device] -= tab[j].size;
    } else {
        used += tab[j].device == EMPTY;
    }
    tab[j] = (live){k, m->size, m->range, m->device};
    allocated[m->device] += m->size;
    int dev = m->device;
    if (!fired[dev]) {
        if (!limit[dev])
            limit[dev] = device_limit(dev);
        if (allocated[dev] >= limit[dev])
            fire(t, dev);
    }
    pthread_mutex_unlock(&lock);
}

void gmp_alert_free(const gmp_rec_mem *m)
{
    if (!gmp_mem_kind_is_device(m->kind) || (m->flags & GMP_MEMF_FAILED))
        return;
    pthread_mutex_lock(&lock);
    uint64_t k = key_of(m);
    size_t j = mix(k) & (cap - 1);
    while (tab[j].device != EMPTY) {
        if (tab[j].device >= 0 && tab[j].key == k) {
            if (allocated[tab[j].device] >= tab[j].size)
                allocated[tab[j].device] -= tab[j].size;
            tab[j].device = DELETED;
            break;
        }
        j = (j + 1) & (cap - 1);
    }
    pthread_mutex_unlock(&lock);
}
