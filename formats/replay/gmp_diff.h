/* gmp_diff: compares two traces (`gpumemprof diff A B`).
 *
 * Each trace is summed up into a profile (by the report model, formats/report/gmp_report_diff.h,
 * so that its figures, frames and leaks are the report's): per device the peak of allocated device
 * memory (and reserved, leaked totals), what was live at that peak grouped by NVTX range path, by
 * stack and by the innermost user frame, and what was still live at the end grouped by memory kind
 * and range path, or kind and user frame. Keys are strings (a range path "train/step", a stack's
 * frames as the report names them, one per line), so that the same place matches across two runs
 * whatever ids their traces gave it. The comparison joins the two profiles table by table and
 * orders rows per device by the size of the change, biggest first. Profiles own copies of their
 * strings. */
#ifndef GMP_DIFF_H
#define GMP_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"

/* The tables a profile keeps and a diff compares. */
typedef enum gmp_diff_table {
    GMP_DIFF_BY_RANGE = 0,       /* live at the device's peak, by range path */
    GMP_DIFF_BY_STACK = 1,       /* live at the device's peak, by stack */
    GMP_DIFF_LEAKS = 2,          /* live at the end, by memory kind and range path */
    GMP_DIFF_BY_FRAME = 3,       /* live at the device's peak, by innermost user frame */
    GMP_DIFF_LEAKS_BY_FRAME = 4, /* live at the end, by memory kind and innermost user frame */
    GMP_DIFF_NTABLES = 5
} gmp_diff_table;

typedef struct gmp_diff_entry {
    int32_t device;
    int32_t kind; /* gmp_mem_kind for the LEAKS tables; -1 in the other tables */
    char *key;    /* range path, stack or frame ("" for none) */
    uint64_t bytes, count;
    uint32_t ref; /* what the profile's maker shows for the key (a stack's index in its trace);
                     UINT32_MAX none */
} gmp_diff_entry;

typedef struct gmp_diff_devinfo {
    int32_t id; /* CUDA ordinal, -1 host */
    char *name; /* from the DEVICE record; "" when none */
    uint64_t total_bytes;
    uint64_t peak_allocated, peak_time_ns, peak_reserved;
    uint64_t allocs;             /* successful allocations of device kinds */
    uint64_t leaked_bytes;       /* live at the end, static __device__ variables excepted */
    uint64_t leaked_allocations; /* their count */
} gmp_diff_devinfo;

typedef struct gmp_diff_profile {
    char *path;
    gmp_diff_devinfo *dev; /* ordered by id */
    size_t ndev;
    gmp_diff_entry *tab[GMP_DIFF_NTABLES]; /* ordered by (device, kind, key) */
    size_t n[GMP_DIFF_NTABLES];
    int complete;           /* the reader found the trace complete */
    char completeness[256]; /* its completeness line */
    int end;        /* how the recording ends: 0 the program's exit (what is live then leaked), 1
                       a snapshot, 2 cut short (gmp_report_end's values): live, not leaked */
    int has_ranges; /* some allocation was made inside an NVTX range */
    size_t cap[GMP_DIFF_NTABLES]; /* room in tab[] */
} gmp_diff_profile;

/* An empty profile named name (what the profile calls the trace: the file the user named, even
 * when an imported trace was read); NULL when out of memory. */
gmp_diff_profile *gmp_diff_profile_new(const char *name);
/* Adds an entry to table tab (key copied: n bytes); merged with the entries of the same device,
 * kind and key by gmp_diff_profile_finish (the largest one's ref is kept). */
gmp_err gmp_diff_profile_add(gmp_diff_profile *p, gmp_diff_table tab, int32_t device, int32_t kind,
                             const char *key, size_t n, uint64_t bytes, uint64_t count,
                             uint32_t ref);
/* Sorts and merges the tables: once, after the last gmp_diff_profile_add. */
void gmp_diff_profile_finish(gmp_diff_profile *p);
void gmp_diff_profile_free(gmp_diff_profile *p);

/* One row of a compared table: the same key in A and B (zeros where it is absent). */
typedef struct gmp_diff_row {
    int32_t device;
    int32_t kind;          /* as in gmp_diff_entry */
    const char *key;       /* owned by a profile */
    uint32_t a_ref, b_ref; /* the entries' refs in A and B (UINT32_MAX where absent) */
    uint64_t a_bytes, a_count, b_bytes, b_count;
    int64_t delta_bytes, delta_count; /* B - A (saturated) */
} gmp_diff_row;

/* One device in A, B or both. */
typedef struct gmp_diff_dev {
    int32_t id;
    const gmp_diff_devinfo *a, *b; /* NULL where the trace has no such device */
} gmp_diff_dev;

typedef struct gmp_diff {
    gmp_diff_dev *dev; /* ordered by id */
    size_t ndev;
    gmp_diff_row *rows[GMP_DIFF_NTABLES]; /* per device (ascending), biggest |delta_bytes| first,
                                             then the larger of the two sizes, then the key */
    size_t nrows[GMP_DIFF_NTABLES];
} gmp_diff;

/* Compares a and b (which must outlive the result). */
gmp_err gmp_diff_compute(gmp_diff **out, const gmp_diff_profile *a, const gmp_diff_profile *b);
void gmp_diff_free(gmp_diff *d);

/* B - A, saturated to int64. */
int64_t gmp_diff_delta(uint64_t a, uint64_t b);

#endif
