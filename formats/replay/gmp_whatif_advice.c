/* gmp_whatif_advice: settings parsed, the standard set, the card table, the recommendation and the
 * out-of-memory verdict of a what-if replay (gmp_whatif_advice.h). */
#include "gmp_whatif_advice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gmp_whatif_standard[GMP_WHATIF_NSTANDARD] = {
    "expandable_segments:True",         "max_split_size_mb:128",      "max_split_size_mb:512",
    "garbage_collection_threshold:0.8", "roundup_power2_divisions:4",
};

#define MIB(n) ((uint64_t)(n) << 20)
#define CARD(cls, cards, total)                                                                    \
    {                                                                                              \
        cls, cards, total, (total)-GMP_WHATIF_CONTEXT_BYTES                                        \
    }

/* The device memory the driver reports, per class, on the smallest card of the class seen
 * (docs/whatif.md, "Cards", gives where each figure was read): nvidia-smi's memory.total, which is
 * what cudaMemGetInfo reports as total, except where a figure from cudaMemGetInfo itself is known
 * (A100 40GB: the totalMemory of an Nsight Systems export; A100 80GB: PyTorch's out-of-memory
 * message, "has a total capacity of 79.15 GiB", rounded down to the MiB). */
static const gmp_whatif_card cards[] = {
    CARD("16 GB", "T4, V100 16GB", MIB(15079)),
    CARD("24 GB", "L4, A10, RTX 3090/4090", MIB(23034)),
    CARD("40 GB", "A100 40GB", (uint64_t)42411098112ull),
    CARD("48 GB", "L40S, A40, RTX A6000", MIB(46068)),
    CARD("80 GB", "A100 80GB, H100 80GB", MIB(81049)),
    CARD("94 GB", "H100 NVL", MIB(95830)),
    CARD("141 GB", "H200", MIB(143771)),
    CARD("192 GB", "B200", MIB(183359)),
};

const gmp_whatif_card *gmp_whatif_cards(size_t *n)
{
    *n = sizeof cards / sizeof *cards;
    return cards;
}

const gmp_whatif_card *gmp_whatif_smallest_card(uint64_t bytes)
{
    for (size_t i = 0; i < sizeof cards / sizeof *cards; i++)
        if (bytes <= cards[i].usable_bytes)
            return &cards[i];
    return NULL;
}

const char *gmp_whatif_verdict_name(gmp_whatif_verdict v)
{
    switch (v) {
    case GMP_WHATIF_FRAGMENTATION: return "fragmentation";
    case GMP_WHATIF_CAPACITY: return "capacity";
    case GMP_WHATIF_NOT_REPRODUCED: return "not_reproduced";
    default: return NULL;
    }
}

/* PyTorch's CUDAAllocatorConfig refuses anything but "True" and "False" ("Expected a single
 * True/False argument for expandable_segments"): so does this, so that what is replayed is what
 * PyTorch would start with */
static int parse_bool(const char *v, uint32_t *out)
{
    if (!strcmp(v, "True"))
        *out = 1;
    else if (!strcmp(v, "False"))
        *out = 0;
    else
        return -1;
    return 0;
}

int gmp_whatif_parse_conf(const char *conf, gmp_cca_config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    char buf[512];
    if (strlen(conf) >= sizeof buf) {
        snprintf(err, errlen, "too long");
        return -1;
    }
    strcpy(buf, conf);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(kv, ':');
        if (!colon || colon == kv || !colon[1]) {
            snprintf(err, errlen, "'%s': expected key:value", kv);
            return -1;
        }
        *colon = 0;
        const char *k = kv, *v = colon + 1;
        char *end = NULL;
        if (!strcmp(k, "max_split_size_mb")) {
            unsigned long long mb = strtoull(v, &end, 10);
            /* CUDAAllocatorConfig: max_split_size_mb must exceed kLargeBuffer (20 MiB) */
            if (*end || v[0] == '-' || mb <= 20 || mb > (1ull << 40)) {
                snprintf(err, errlen, "max_split_size_mb:%s: expected a number of MiB above 20", v);
                return -1;
            }
            cfg->max_split_size = (uint64_t)mb << 20;
        } else if (!strcmp(k, "expandable_segments")) {
            if (parse_bool(v, &cfg->expandable_segments) != 0) {
                snprintf(err, errlen, "expandable_segments:%s: expected True or False", v);
                return -1;
            }
        } else if (!strcmp(k, "garbage_collection_threshold")) {
            double t = strtod(v, &end);
            if (*end || !(t > 0.0 && t < 1.0)) {
                snprintf(err, errlen,
                         "garbage_collection_threshold:%s: expected a number between 0 and 1", v);
                return -1;
            }
            cfg->garbage_collection_threshold = t;
        } else if (!strcmp(k, "roundup_power2_divisions")) {
            unsigned long long n = strtoull(v, &end, 10);
            /* CUDAAllocatorConfig: a power of two */
            if (*end || v[0] == '-' || n == 0 || n > 64 || (n & (n - 1))) {
                snprintf(err, errlen, "roundup_power2_divisions:%s: expected a power of 2 (1-64)",
                         v);
                return -1;
            }
            cfg->roundup_power2_divisions = (uint32_t)n;
        } else {
            snprintf(err, errlen,
                     "'%s': unknown key (max_split_size_mb, expandable_segments, "
                     "garbage_collection_threshold, roundup_power2_divisions)",
                     k);
            return -1;
        }
    }
    return 0;
}

void gmp_whatif_advise(const gmp_whatif_device *d, const gmp_whatif_device *open, size_t ncfg,
                       gmp_whatif_advice *out)
{
    memset(out, 0, sizeof *out);
    out->best = SIZE_MAX;
    if (!d || !d->rows)
        return;
    for (size_t c = 0; c < ncfg; c++) {
        const gmp_whatif_row *r = &d->rows[c];
        if (r->modelled && r->fits &&
            (out->best == SIZE_MAX || r->peak_reserved < d->rows[out->best].peak_reserved))
            out->best = c;
    }
    if (out->best != SIZE_MAX) {
        out->fits_capacity = 1;
        out->peak_reserved = d->rows[out->best].peak_reserved;
    } else if (open && open->rows) {
        /* nothing fits the capacity: the cheapest setting when memory is not the limit, and the
         * card it would take */
        for (size_t c = 0; c < ncfg; c++) {
            const gmp_whatif_row *r = &open->rows[c];
            if (r->modelled && !r->failed &&
                (out->best == SIZE_MAX || r->peak_reserved < open->rows[out->best].peak_reserved))
                out->best = c;
        }
        if (out->best != SIZE_MAX)
            out->peak_reserved = open->rows[out->best].peak_reserved;
    }
    if (out->best != SIZE_MAX)
        out->card = gmp_whatif_smallest_card(out->peak_reserved);
    /* the verdict needs a capacity: without one, "fits" says nothing */
    const gmp_whatif_row *own = &d->rows[0];
    int any = 0;
    for (size_t c = 0; c < ncfg; c++)
        any |= d->rows[c].modelled;
    if (!any || !own->capacity)
        out->verdict = GMP_WHATIF_NO_VERDICT;
    else if (own->modelled && own->fits)
        out->verdict = GMP_WHATIF_NOT_REPRODUCED;
    else if (out->fits_capacity)
        out->verdict = GMP_WHATIF_FRAGMENTATION;
    else
        out->verdict = GMP_WHATIF_CAPACITY;
}
