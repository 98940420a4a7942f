/* gmp_live: see gmp_live.h. */
#include "gmp_live.h"

#include "gmp_handles.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define MAXD GMP_LIVE_MAX_DEV
#define NSITE (GMP_LIVE_SITES + MAXD) /* the table, then one "other" site per device */
#define VMM_TAG (1ull << 63)

int gmp_live_on = 1;

static atomic_flag lk = ATOMIC_FLAG_INIT;

static void lock(void)
{
    for (unsigned spins = 0; atomic_flag_test_and_set_explicit(&lk, memory_order_acquire);) {
        /* the holder may be descheduled (more threads than cores): yield after a short spin */
        if (++spins >= 64) {
            spins = 0;
            sched_yield();
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void unlock(void)
{
    atomic_flag_clear_explicit(&lk, memory_order_release);
}

/* live allocations: key (address, or VMM handle | VMM_TAG; never 0) -> the entry's size and
 * device, and its site index in `handle` (gmp_handles: the collector's own table, open addressing
 * with backward-shift deletion; not thread-safe: used under lk). */
static gmp_handles live;

static uint64_t cur[MAXD], tot_alloc[MAXD], tot_freed[MAXD], n_alloc[MAXD], n_free[MAXD],
    n_base[MAXD];
static uint64_t dev_seen; /* bit d: device d had live memory or a call */
static uint64_t lost;

/* sites: (stack, device) -> index; bytes and allocations live per index */
static uint64_t site_key[GMP_LIVE_SITES]; /* (stack << 8 | device) + 1; 0: empty */
static uint32_t site_slot_of[GMP_LIVE_SITES];
static uint32_t site_list[GMP_LIVE_SITES]; /* indices in use, in insertion order */
static uint32_t nsites;
static uint32_t site_stack[NSITE];
static int32_t site_dev[NSITE];
static uint64_t site_bytes[NSITE], site_n[NSITE];
static uint64_t last_key;
static uint32_t last_site;

/* the journal of site changes while a scope is open */
typedef struct jent {
    uint32_t site;
    int32_t n;
    int64_t delta;
} jent;
static jent ring[GMP_LIVE_RING];
static uint64_t jseq;                  /* changes appended so far */
static uint64_t need_min = UINT64_MAX; /* <= every unresolved peak position of an open scope */

typedef struct sdev {
    uint64_t start_cur, start_alloc, start_freed, start_na, start_nf, start_nb;
    uint64_t peak, peak_seq; /* the peak's bytes, and the journal position just after it */
    int frozen;              /* top holds the sites at the peak (computed before the ring moved) */
    uint32_t ntop;
    gmp_live_site top[GMP_LIVE_TOP];
} sdev;

typedef struct scope {
    uint64_t id;
    uint64_t seen_at_open;
    sdev d[MAXD];
} scope;

static scope *slots[GMP_LIVE_MAX_SCOPES];
static int open_list[GMP_LIVE_MAX_SCOPES];
static int nopen;
static uint64_t generation;

/* The last frees, of any thread: a free whose call then fails (recorded at its entry, then again
 * with GMP_MEMF_FAILED at its exit) is found here and its memory is live again. Not thread-local:
 * a TLS access in the agent (a shared library) is a call on every free. */
#define NRECENT 16
static struct {
    uint64_t key, size;
    int32_t dev;
    uint32_t site;
} recent[NRECENT];
static unsigned recent_at;

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static uint32_t site_of(uint32_t stack, int dev)
{
    uint64_t key = (((uint64_t)stack << 8) | (uint64_t)dev) + 1;
    if (key == last_key)
        return last_site;
    size_t i = mix(key) & (GMP_LIVE_SITES - 1);
    while (site_key[i] && site_key[i] != key)
        i = (i + 1) & (GMP_LIVE_SITES - 1);
    uint32_t s;
    if (site_key[i]) {
        s = site_slot_of[i];
    } else if ((size_t)nsites * 4 >= (size_t)GMP_LIVE_SITES * 3) {
        s = GMP_LIVE_SITES + (uint32_t)dev; /* the table is full: the device's "other" site */
        site_dev[s] = dev;
        return s;
    } else {
        s = nsites;
        site_key[i] = key;
        site_slot_of[i] = s;
        site_list[nsites++] = s;
        site_stack[s] = stack;
        site_dev[s] = dev;
    }
    last_key = key;
    last_site = s;
    return s;
}

/* The top sites of device dev at the position pos of the journal (all changes from pos on still
 * in the ring): the sites now minus the changes after pos, and minus pend (a change already made
 * to the sites, not yet appended to the ring), when not NULL. */
static uint32_t top_at(int dev, uint64_t pos, gmp_live_site *top, const jent *pend)
{
    static int64_t sb[NSITE], sn[NSITE]; /* under the lock */
    uint32_t other = GMP_LIVE_SITES + (uint32_t)dev;
    site_dev[other] = dev;
    for (uint32_t k = 0; k <= nsites; k++) {
        uint32_t s = k < nsites ? site_list[k] : other;
        if (site_dev[s] == dev) {
            sb[s] = (int64_t)site_bytes[s];
            sn[s] = (int64_t)site_n[s];
        }
    }
    for (uint64_t q = pos; q <= jseq; q++) {
        const jent *e = q < jseq ? &ring[q % GMP_LIVE_RING] : pend;
        if (e && site_dev[e->site] == dev) {
            sb[e->site] -= e->delta;
            sn[e->site] -= e->n;
        }
    }
    uint32_t n = 0;
    for (uint32_t k = 0; k <= nsites; k++) {
        uint32_t s = k < nsites ? site_list[k] : other;
        if (site_dev[s] != dev || sb[s] <= 0)
            continue;
        uint64_t v = (uint64_t)sb[s];
        if (n == GMP_LIVE_TOP && v <= top[GMP_LIVE_TOP - 1].bytes)
            continue;
        uint32_t at = n < GMP_LIVE_TOP ? n : GMP_LIVE_TOP - 1; /* full: the smallest goes */
        for (; at > 0 && top[at - 1].bytes < v; at--)
            top[at] = top[at - 1];
        top[at] =
            (gmp_live_site){v, sn[s] > 0 ? (uint64_t)sn[s] : 0, s == other ? 0 : site_stack[s]};
        if (n < GMP_LIVE_TOP)
            n++;
    }
    return n;
}

/* Before the ring overwrites position pos with pend: every open scope that still needs pos gets
 * its top sites at its peak now; need_min is recomputed. */
static void resolve(uint64_t pos, const jent *pend)
{
    uint64_t m = UINT64_MAX;
    for (int k = 0; k < nopen; k++) {
        scope *s = slots[open_list[k]];
        for (int d = 0; d < MAXD; d++) {
            sdev *sd = &s->d[d];
            if (sd->frozen)
                continue;
            if (sd->peak_seq <= pos) {
                sd->ntop = top_at(d, sd->peak_seq, sd->top, pend);
                sd->frozen = 1;
            } else if (sd->peak_seq < m) {
                m = sd->peak_seq;
            }
        }
    }
    need_min = m;
}

/* Appends a change the sites already hold (the caller updated them first). */
static void journal(uint32_t site, int64_t delta, int32_t n)
{
    jent e = {site, n, delta};
    if (jseq >= GMP_LIVE_RING && jseq - GMP_LIVE_RING >= need_min)
        resolve(jseq - GMP_LIVE_RING, &e);
    ring[jseq % GMP_LIVE_RING] = e;
    jseq++;
}

static void scopes_alloc(uint32_t site, uint64_t size, int dev)
{
    journal(site, (int64_t)size, 1);
    for (int k = 0; k < nopen; k++) {
        sdev *sd = &slots[open_list[k]]->d[dev];
        if (cur[dev] > sd->peak) {
            sd->peak = cur[dev];
            sd->peak_seq = jseq;
            sd->frozen = 0;
            if (jseq < need_min)
                need_min = jseq;
        }
    }
}

static void add_live(uint64_t key, uint64_t size, int dev, uint32_t site, int count)
{
    gmp_handle_ent *e = gmp_handles_put(&live, key); /* a new entry has device -1 */
    if (!e) {
        lost++;
        return;
    }
    if (e->device >= 0) { /* a live address allocated again: its free was not seen */
        int od = e->device;
        uint32_t os = (uint32_t)e->handle;
        cur[od] -= e->size <= cur[od] ? e->size : cur[od];
        site_bytes[os] -= e->size <= site_bytes[os] ? e->size : site_bytes[os];
        site_n[os] -= site_n[os] ? 1 : 0;
        if (nopen)
            journal(os, -(int64_t)e->size, -1);
    }
    e->size = size;
    e->device = dev;
    e->handle = site;
    cur[dev] += size;
    site_bytes[site] += size;
    site_n[site]++;
    dev_seen |= 1ull << dev;
    if (count) {
        tot_alloc[dev] += size;
        n_alloc[dev]++;
    }
    if (nopen)
        scopes_alloc(site, size, dev);
}

void gmp_live_rec(const gmp_rec *r)
{
    if ((r->type != GMP_REC_ALLOC && r->type != GMP_REC_FREE) || !gmp_live_on)
        return;
    const gmp_rec_mem *m = &r->u.mem;
    if (!gmp_mem_kind_is_device(m->kind))
        return;
    uint64_t key = m->kind == GMP_MEM_VMM_PHYSICAL ? (m->handle | VMM_TAG) : m->address;
    if (!key)
        return;
    int failed = (m->flags & GMP_MEMF_FAILED) != 0;
    if (r->type == GMP_REC_ALLOC) {
        if (failed || m->device < 0 || m->device >= MAXD)
            return;
        lock();
        add_live(key, m->size, m->device, site_of(m->stack, m->device), 1);
        unlock();
        return;
    }
    lock();
    if (failed) {
        /* the free was recorded at its entry, and failed: the memory is live again */
        for (unsigned i = 0; i < NRECENT; i++)
            if (recent[i].key == key) {
                tot_freed[recent[i].dev] -= recent[i].size;
                n_free[recent[i].dev]--;
                add_live(key, recent[i].size, recent[i].dev, recent[i].site, 0);
                recent[i].key = 0;
                break;
            }
        unlock();
        return;
    }
    gmp_handle_ent *e = gmp_handles_get(&live, key);
    if (!e) {
        if (m->device >= 0 && m->device < MAXD) {
            n_base[m->device]++;
            dev_seen |= 1ull << m->device;
        }
        unlock();
        return;
    }
    int dev = e->device;
    uint64_t size = e->size;
    uint32_t site = (uint32_t)e->handle;
    unsigned at = recent_at++ % NRECENT;
    recent[at].key = key;
    recent[at].size = size;
    recent[at].dev = dev;
    recent[at].site = site;
    cur[dev] -= size <= cur[dev] ? size : cur[dev];
    tot_freed[dev] += size;
    n_free[dev]++;
    site_bytes[site] -= size <= site_bytes[site] ? size : site_bytes[site];
    site_n[site] -= site_n[site] ? 1 : 0;
    gmp_handles_del(&live, key);
    if (nopen)
        journal(site, -(int64_t)size, -1);
    unlock();
}

uint64_t gmp_live_open(void)
{
    scope *s = calloc(1, sizeof *s);
    if (!s)
        return 0;
    lock();
    int slot = -1;
    for (int i = 0; i < GMP_LIVE_MAX_SCOPES && slot < 0; i++)
        if (!slots[i])
            slot = i;
    if (slot < 0) {
        unlock();
        free(s);
        return 0;
    }
    s->id = (++generation << 16) | (uint64_t)(slot + 1);
    s->seen_at_open = dev_seen;
    for (int d = 0; d < MAXD; d++) {
        sdev *sd = &s->d[d];
        sd->start_cur = sd->peak = cur[d];
        sd->start_alloc = tot_alloc[d];
        sd->start_freed = tot_freed[d];
        sd->start_na = n_alloc[d];
        sd->start_nf = n_free[d];
        sd->start_nb = n_base[d];
        sd->peak_seq = jseq;
        /* nothing live at the open: its sites at that peak are none, already known (without
         * this every device, used or not, had its sites recomputed under the lock when the
         * journal wrapped: milliseconds of an application thread's cudaMalloc with many scopes) */
        sd->frozen = !cur[d];
    }
    if (jseq < need_min)
        need_min = jseq;
    slots[slot] = s;
    open_list[nopen++] = slot;
    uint64_t id = s->id;
    unlock();
    return id;
}

int gmp_live_close(uint64_t h, gmp_live_dev *devs, int max, uint64_t *lost_out)
{
    int slot = (int)(h & 0xffff) - 1;
    if (slot < 0 || slot >= GMP_LIVE_MAX_SCOPES)
        return -1;
    lock();
    scope *s = slots[slot];
    if (!s || s->id != h) {
        unlock();
        return -1;
    }
    int n = 0;
    for (int d = 0; d < MAXD; d++) {
        sdev *sd = &s->d[d];
        if (!(dev_seen >> d & 1))
            continue;
        if (!sd->start_cur && !cur[d] && tot_alloc[d] == sd->start_alloc &&
            n_free[d] == sd->start_nf && n_base[d] == sd->start_nb)
            continue; /* nothing on this device while open */
        if (n < max) {
            gmp_live_dev *o = &devs[n];
            memset(o, 0, sizeof *o);
            o->device = d;
            o->start_bytes = sd->start_cur;
            o->peak_bytes = sd->peak;
            o->end_bytes = cur[d];
            o->allocated_bytes = tot_alloc[d] - sd->start_alloc;
            o->freed_bytes = tot_freed[d] - sd->start_freed;
            o->allocs = n_alloc[d] - sd->start_na;
            o->frees = n_free[d] - sd->start_nf;
            o->baseline_frees = n_base[d] - sd->start_nb;
            if (sd->frozen) {
                o->nsites = sd->ntop;
                memcpy(o->sites, sd->top, sd->ntop * sizeof *sd->top);
            } else {
                o->nsites = top_at(d, sd->peak_seq, o->sites, NULL);
            }
        }
        n++;
    }
    for (int k = 0; k < nopen; k++)
        if (open_list[k] == slot) {
            open_list[k] = open_list[--nopen];
            break;
        }
    slots[slot] = NULL;
    if (!nopen)
        need_min = UINT64_MAX;
    if (lost_out)
        *lost_out = lost;
    unlock();
    free(s);
    return n;
}

int gmp_live_current(int32_t *devices, uint64_t *bytes, int max)
{
    int n = 0;
    lock();
    for (int d = 0; d < MAXD && n < max; d++) {
        if (!(dev_seen >> d & 1))
            continue;
        devices[n] = d;
        bytes[n] = cur[d];
        n++;
    }
    unlock();
    return n;
}

void gmp_live_after_fork(void)
{
    atomic_flag_clear(&lk);
}
