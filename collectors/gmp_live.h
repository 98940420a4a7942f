/* gmp_live: live accounting inside the profiled process, for the agent's C ABI (gmp_scope_open,
 * gmp_scope_close, gmp_current_bytes in agent/gmp_agent_api.h) and the Python package over it.
 *
 * Fed with every ALLOC and FREE record the CUPTI collector writes (gmp_live_rec, called from
 * emit), it keeps the live bytes of each device (a table address -> size, device, site) and, for
 * each open scope, the peak of each device's live bytes since the scope opened and the top sites
 * at that peak. Counts what the replay counts as allocated (gmp_mem_kind_is_device: device,
 * async-pool, VMM physical, arrays, static, graph memory) on devices 0..GMP_LIVE_MAX_DEV-1.
 *
 * Sites: a site is an allocation stack (its STACK id, 0 when stacks are off) on a device. A
 * fixed table of GMP_LIVE_SITES sites holds each site's live bytes; a site beyond it is counted in
 * its device's "other" site (stack 0). The top sites at a scope's peak are exact without copying
 * the table at every new peak: while a scope is open, every change of a site's bytes is appended
 * to a journal (a ring of GMP_LIVE_RING entries); a scope remembers the journal position of its
 * peak, and the sites at the peak are the table now minus the changes after that position. Before
 * the ring overwrites a change that an open scope still needs, that scope's top sites at its peak
 * are computed then and kept (at most once per GMP_LIVE_RING changes per scope and device).
 *
 * Thread safety: one spin lock guards everything; the critical sections are short (a table
 * update) except that computation (bounded by GMP_LIVE_SITES + GMP_LIVE_RING). */
#ifndef GMP_LIVE_H
#define GMP_LIVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "gmp_trace.h"

#define GMP_LIVE_MAX_DEV 64
#define GMP_LIVE_SITES 4096
#define GMP_LIVE_RING 4096
#define GMP_LIVE_TOP 16
#define GMP_LIVE_MAX_SCOPES 256

/* Non-zero (the default) when gmp_live_rec counts; the agent sets it to 0 for GPUMEMPROF_LIVE=0
 * (benchmarks: the cost of the accounting, side by side). */
extern int gmp_live_on;

/* An ALLOC or FREE record just written (any other record is ignored). */
void gmp_live_rec(const gmp_rec *r);

typedef struct gmp_live_site {
    uint64_t bytes, allocs;
    uint32_t stack;
} gmp_live_site;

typedef struct gmp_live_dev {
    int32_t device;
    uint32_t nsites;
    uint64_t start_bytes, peak_bytes, end_bytes;
    uint64_t allocated_bytes, freed_bytes, allocs, frees, baseline_frees;
    gmp_live_site sites[GMP_LIVE_TOP];
} gmp_live_dev;

/* Opens a scope: its handle (>= 1), 0 when GMP_LIVE_MAX_SCOPES are open or out of memory. */
uint64_t gmp_live_open(void);

/* Closes scope h: fills devs[0..max) with the devices it saw (live memory or calls), in device
 * order; returns how many there were (may exceed max), -1 for a handle that is not open. *lost
 * gets the allocations the live table could not hold (out of memory) since the process started. */
int gmp_live_close(uint64_t h, gmp_live_dev *devs, int max, uint64_t *lost);

/* Live bytes per device now (devices seen only); returns the number of devices (at most max). */
int gmp_live_current(int32_t *devices, uint64_t *bytes, int max);

/* In a child after fork: the lock may have been held by a thread that does not exist there. */
void gmp_live_after_fork(void);

#endif
