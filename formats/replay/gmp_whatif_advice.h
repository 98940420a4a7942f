/* gmp_whatif_advice: what a what-if replay (gmp_whatif.h) concludes, shared by `gpumemprof
 * whatif` and the report's out-of-memory verdict: PYTORCH_CUDA_ALLOC_CONF's syntax parsed into a
 * model config, the standard set of settings tried, the recommendation (the setting with the
 * lowest peak reserved that fits, and the smallest common card whose usable memory holds it), and
 * the verdict on a recorded out-of-memory error (an allocator setting avoids it: fragmentation;
 * none does: capacity). The card table is data (gmp_whatif_cards); docs/whatif.md gives its
 * sources and the rule that turns a card's total into usable bytes. */
#ifndef GMP_WHATIF_ADVICE_H
#define GMP_WHATIF_ADVICE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_cca_model.h"
#include "gmp_whatif.h"

/* CONF (key:value pairs separated by commas: max_split_size_mb, expandable_segments,
 * garbage_collection_threshold, roundup_power2_divisions) into cfg, zeroed first. -1 with one
 * line in err for an unknown key or a value PyTorch's CUDAAllocatorConfig would refuse. */
int gmp_whatif_parse_conf(const char *conf, gmp_cca_config *cfg, char *err, size_t errlen);

/* The settings tried when none is asked for: expandable_segments:True, max_split_size_mb:128 and
 * :512, garbage_collection_threshold:0.8, roundup_power2_divisions:4. */
#define GMP_WHATIF_NSTANDARD 5
extern const char *const gmp_whatif_standard[GMP_WHATIF_NSTANDARD];

/* A class of cards by memory size. total_bytes: the device memory the driver reports on the
 * class's smallest card (nvidia-smi's memory.total, cudaMemGetInfo's total: less than the
 * nominal size, which counts memory the driver and ECC keep); usable_bytes: total_bytes less
 * GMP_WHATIF_CONTEXT_BYTES for what PyTorch's reserve never holds (the CUDA context, libraries'
 * workspaces). */
typedef struct gmp_whatif_card {
    const char *cls;   /* "80 GB" */
    const char *cards; /* "A100 80GB, H100 80GB" */
    uint64_t total_bytes, usable_bytes;
} gmp_whatif_card;

#define GMP_WHATIF_CONTEXT_BYTES ((uint64_t)1 << 30)

/* The table, smallest first. */
const gmp_whatif_card *gmp_whatif_cards(size_t *n);
/* The smallest card whose usable bytes hold bytes; NULL when none does. */
const gmp_whatif_card *gmp_whatif_smallest_card(uint64_t bytes);

typedef enum gmp_whatif_verdict {
    GMP_WHATIF_NO_VERDICT = 0, /* the capacity is unknown, or nothing was modelled */
    GMP_WHATIF_FRAGMENTATION,  /* the recorded settings fail and another setting fits */
    GMP_WHATIF_CAPACITY,       /* no modelled setting fits the capacity */
    GMP_WHATIF_NOT_REPRODUCED, /* the recorded settings fit in the model: it does not fail
                                  where PyTorch did */
} gmp_whatif_verdict;

/* "fragmentation", "capacity", "not_reproduced", NULL for none. */
const char *gmp_whatif_verdict_name(gmp_whatif_verdict v);

typedef struct gmp_whatif_advice {
    /* the modelled setting with the lowest peak reserved that fits the capacity (ties: the
     * first); else, when open (the replay without a capacity) is given, the modelled setting
     * with the lowest peak reserved there; SIZE_MAX none */
    size_t best;
    int fits_capacity;           /* best fits the device's capacity (0: best is from open) */
    uint64_t peak_reserved;      /* best's */
    const gmp_whatif_card *card; /* gmp_whatif_smallest_card(peak_reserved), NULL none */
    gmp_whatif_verdict verdict;  /* for a device that ran out of memory */
} gmp_whatif_advice;

/* d: the replay under the device's capacity; open: the same configs replayed with no capacity
 * (NULL when not run). ncfg rows each; row 0 is the recording's own settings. */
void gmp_whatif_advise(const gmp_whatif_device *d, const gmp_whatif_device *open, size_t ncfg,
                       gmp_whatif_advice *out);

/* Capacity of the replay "without a limit" (the `open` replay): 400 GiB, more than twice the
 * largest card of the table, so that what fits no card still shows; finite, because a model may
 * size what it keeps by the capacity (expandable segments reserve address space for it). */
#define GMP_WHATIF_UNLIMITED ((uint64_t)400 << 30)

#endif
