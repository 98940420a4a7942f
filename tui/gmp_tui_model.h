/* gmp_tui_model: the index `gpumemprof view` browses, built in one replay pass over a trace.
 *
 * The pass (gmp_replay) keeps what the replay keeps (live set, sites, devices); this module adds:
 *  - the event log: every ALLOC and FREE the replay applied, pool size changes, and the events a
 *    user jumps to (OOM, failed allocation, bad free, alert, notice, lost events), each with its
 *    device's allocated and reserved bytes after it, 48 bytes each, written to an
 *    unlinked temporary file (memory does not grow with the trace; the file does);
 *  - checkpoints of the live set (the replay's, through gmp_replay_live_foreach), also in a
 *    temporary file, one every max(65536, 2 x live) logged events, so that the live set after any
 *    event is one checkpoint read plus at most that many events applied;
 *  - per device, a timeline of GMP_TUI_BUCKETS buckets (allocated min/max/last, reserved max/last),
 *    the bucket width doubling as the trace grows;
 *  - in memory, the time of every GMP_TUI_CHUNK-th logged event (finding an event by its time), and
 *    the indices of the first 65,536 rare events (OOMs, failures, alerts...: jumps to them).
 * Memory grows with the live set, the sites and the devices, and by 8 bytes per 4096 events.
 *
 * The model keeps its reader and replay open after the pass: the sites, stacks, range paths and
 * strings are looked up through them. */
#ifndef GMP_TUI_MODEL_H
#define GMP_TUI_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_reader.h"
#include "gmp_replay.h"

#define GMP_TUI_BUCKETS 65536
#define GMP_TUI_CHUNK 4096

/* What a logged event is. */
enum {
    GMP_TUI_EV_ALLOC = 1,
    GMP_TUI_EV_FREE,
    GMP_TUI_EV_OOM,     /* size: requested; key: the OOM's index (gmp_replay_oom_at, which has
                           its API, range and stack) */
    GMP_TUI_EV_FAILED,  /* a failed allocation: size requested; site: API string id; key: range
                           id << 32 | stack id; flags: the memory kind (GMP_TUI_EVF_KIND), and
                           GMP_TUI_EVF_REPORTED */
    GMP_TUI_EV_BADFREE, /* free of an address not live (unknown or double): key address */
    GMP_TUI_EV_ALERT,   /* size: live bytes; key: threshold */
    GMP_TUI_EV_NOTICE,  /* key: the notice's index (gmp_replay_notice_at) */
    GMP_TUI_EV_LOST,    /* size: events lost */
    GMP_TUI_EV_POOL,    /* a pool's reserved size changed: size is the pool's value */
};

#define GMP_TUI_EVF_COUNTED 1 /* the event changed the device's allocated bytes */
#define GMP_TUI_EVF_DOUBLE 2  /* BADFREE: a double free */
#define GMP_TUI_EVF_KIND 0x7f /* FAILED: the memory kind (GMP_MEM_KIND_COUNT is below it) */
/* FAILED: an OOM logged after it reports the same request, so that the two are one failure (a
 * live trace writes a failed cudaMalloc as the failed ALLOC, then the OOM, collectors/gmp_cupti.c;
 * a PyTorch snapshot's `oom` entry is imported the same way): the OOM on the same device and
 * thread, with the same size, API and stack, and no other OOM on that device between them. */
#define GMP_TUI_EVF_REPORTED 0x80

typedef struct gmp_tui_ev {
    uint64_t time_ns;
    uint64_t key;       /* ALLOC/FREE: the address, or the handle when the address is 0 */
    uint64_t size;      /* ALLOC/FREE: the allocation's size */
    uint64_t allocated; /* the device's allocated bytes after the event */
    uint64_t reserved;  /* the device's reserved bytes after the event */
    uint32_t site;      /* ALLOC/FREE: replay site index */
    int16_t device;
    uint8_t op;
    uint8_t flags;
} gmp_tui_ev;

/* One live allocation (checkpoints and the live set at the cursor). */
typedef struct gmp_tui_live {
    uint64_t key, size, time_ns;
    uint32_t site;
    int32_t device;
    uint8_t space; /* which of the replay's address spaces the key is in (by memory kind) */
} gmp_tui_live;

typedef struct gmp_tui_bucket {
    uint64_t amin, amax, alast; /* allocated */
    uint64_t rmax, rlast;       /* reserved */
    int has;
} gmp_tui_bucket;

typedef struct gmp_tui_dev {
    int32_t id;
    const gmp_replay_device *d; /* the replay's numbers (final after the pass) */
    gmp_tui_bucket *buckets;    /* GMP_TUI_BUCKETS */
    uint64_t peak_index;        /* the logged event that reached the peak of allocated */
    int has_peak;
    /* failed requests: failed allocations and OOMs, a failed allocation and the OOM that reports
     * it (GMP_TUI_EVF_REPORTED) counted once */
    uint64_t failures;
} gmp_tui_dev;

typedef struct gmp_tui_model gmp_tui_model;

/* Builds the model of the trace r (taken: closed by gmp_tui_model_free, also on failure). On
 * failure msg holds one line. */
gmp_err gmp_tui_model_build(gmp_tui_model **out, gmp_reader *r, char *msg, size_t msglen);
void gmp_tui_model_free(gmp_tui_model *m);

gmp_reader *gmp_tui_model_reader(const gmp_tui_model *m);
gmp_replay *gmp_tui_model_replay(const gmp_tui_model *m);

uint64_t gmp_tui_model_events(const gmp_tui_model *m); /* logged events */
uint64_t gmp_tui_model_t0(const gmp_tui_model *m);     /* time of the first event */
uint64_t gmp_tui_model_t1(const gmp_tui_model *m);     /* time of the last event */
/* Zero of the times shown: the report's (formats/report/gmp_report.c, t0_ns): the trace's first
 * record of any kind (an NVTX range may come before the first allocation), or the trace's start
 * when its header gives an earlier one. */
uint64_t gmp_tui_model_zero(const gmp_tui_model *m);

/* Devices with memory to show (real devices, and the host when it has device-kind memory), by
 * id. */
size_t gmp_tui_model_ndevs(const gmp_tui_model *m);
const gmp_tui_dev *gmp_tui_model_dev(const gmp_tui_model *m, size_t i);

/* Reads logged events [first, first + n) into out; returns how many were read. */
size_t gmp_tui_model_read(const gmp_tui_model *m, uint64_t first, gmp_tui_ev *out, size_t n);
/* The number of logged events at or before t (the index of the first event after t). */
uint64_t gmp_tui_model_count_until(const gmp_tui_model *m, uint64_t t);

/* The live set after logged event `index` (all devices, every kind): a malloc'd array in *out
 * (free it) and its length. index UINT64_MAX: before the first event. */
gmp_err gmp_tui_model_live(const gmp_tui_model *m, uint64_t index, gmp_tui_live **out, size_t *n);

/* The next / previous logged event after / before `index` whose op is in the mask (1 << op), on
 * device dev (INT32_MIN: any); UINT64_MAX when none. With OOMs in the mask, a failed allocation
 * that an OOM reports (GMP_TUI_EVF_REPORTED) is skipped: the failure stops at its OOM once. */
uint64_t gmp_tui_model_find(const gmp_tui_model *m, uint64_t index, int forward, unsigned opmask,
                            int32_t dev);
/* The next logged ALLOC at or after `index` (backward: at or before) whose site is marked in
 * sites[] (nsites entries); UINT64_MAX when none. */
uint64_t gmp_tui_model_find_site(const gmp_tui_model *m, uint64_t index, int forward,
                                 const unsigned char *sites, size_t nsites);
/* When the allocation (key, device) live after event `index` is freed: the time, or 0 when not
 * within `limit` events (*searched: 1 when the whole rest of the log was searched). */
uint64_t gmp_tui_model_free_time(const gmp_tui_model *m, uint64_t index, uint64_t key,
                                 int32_t device, uint64_t limit, int *searched);

/* Allocated / reserved of a device over [t0, t1]: max of allocated, max of reserved, from the
 * buckets. */
void gmp_tui_model_span(const gmp_tui_model *m, const gmp_tui_dev *d, uint64_t t0, uint64_t t1,
                        uint64_t *amax, uint64_t *rmax);

/* The reserved bytes of device d after logged event index (exact: the device's last event at or
 * before it within the index's bucket, else the timeline's value before that bucket). */
uint64_t gmp_tui_model_reserved_at(const gmp_tui_model *m, const gmp_tui_dev *d, uint64_t index);

/* The report's verdicts (formats/replay/gmp_analysis: the same analysis `gpumemprof report` runs),
 * computed in a second pass over the file in a thread of their own (gmp_tui_model_verdicts_start),
 * so that the first screen does not wait for them; each placed at a logged event, in time order:
 *  - a leak (growth verdict): two stops, at the first and at the last allocation of its growing
 *    sites still live at the end of the trace (the first leaked allocation, and where the growth
 *    had got to); site: the site that grew most;
 *  - an out-of-memory error explained: at its OOM event, with the verdict (capacity,
 *    fragmentation, memory outside the allocator).
 * Temporaries and allocator overhead are not moments and get no stop. At most GMP_TUI_VERDICTS. */
#define GMP_TUI_VERDICTS 256
typedef struct gmp_tui_verdict {
    uint64_t index; /* the logged event it is at */
    uint64_t time_ns;
    int32_t device;
    uint32_t site; /* replay site index to focus; UINT32_MAX none */
    char text[200];
} gmp_tui_verdict;

enum {
    GMP_TUI_VERDICTS_NONE = 0, /* not started */
    GMP_TUI_VERDICTS_RUNNING,
    GMP_TUI_VERDICTS_READY,
    GMP_TUI_VERDICTS_FAILED, /* the file could not be read again, or out of memory */
};
/* Starts the verdicts' pass over path (the file m was built from); once. gmp_tui_model_free stops
 * it. */
void gmp_tui_model_verdicts_start(gmp_tui_model *m, const char *path);
int gmp_tui_model_verdicts_state(const gmp_tui_model *m);
/* 0 until READY. */
size_t gmp_tui_model_nverdicts(const gmp_tui_model *m);
const gmp_tui_verdict *gmp_tui_model_verdict(const gmp_tui_model *m, size_t i);

#endif
