/* gmp_diff: compares two traces (`gpumemprof diff A B`).
 *
 * Each trace is replayed once (gmp_replay) into a profile: per device the peak of allocated device
 * memory (and reserved, leaked totals), what was live at that peak grouped by NVTX range path and
 * by stack, and what was still live at the end (leaks) grouped by memory kind and range path. Keys
 * are strings (a range path "train/step", a stack "libtrain.so+0x1234 <- main.py:forward:42"), so
 * that the same place matches across two runs whatever ids their traces gave it. The comparison
 * joins the two profiles table by table and orders rows per device by the size of the change,
 * biggest first. Profiles own copies of their strings; they outlive the traces they come from. */
#ifndef GMP_DIFF_H
#define GMP_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_reader.h"

/* The tables a profile keeps and a diff compares. */
typedef enum gmp_diff_table {
    GMP_DIFF_BY_RANGE = 0, /* live at the device's peak, by range path */
    GMP_DIFF_BY_STACK = 1, /* live at the device's peak, by stack */
    GMP_DIFF_LEAKS = 2,    /* live at the end, by memory kind and range path */
    GMP_DIFF_NTABLES = 3
} gmp_diff_table;

typedef struct gmp_diff_entry {
    int32_t device;
    int32_t kind; /* gmp_mem_kind for GMP_DIFF_LEAKS; -1 in the other tables */
    char *key;    /* range path ("" for none) or stack ("" for none) */
    uint64_t bytes, count;
} gmp_diff_entry;

typedef struct gmp_diff_devinfo {
    int32_t id; /* CUDA ordinal, -1 host */
    char *name; /* from the DEVICE record; "" when none */
    uint64_t total_bytes;
    uint64_t peak_allocated, peak_time_ns, peak_reserved;
    uint64_t allocs;             /* successful allocations of device kinds */
    uint64_t leaked_bytes;       /* device kinds live at the end */
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
} gmp_diff_profile;

/* Replays a trace already open (read from its first record; closed here in every case) once and
 * keeps its profile. name is what the profile calls it (its path field): the file the user named,
 * or what stands for it when the trace was read from somewhere else (an imported recording). On
 * failure returns the error and writes one line into msg. */
gmp_err gmp_diff_profile_load_reader(gmp_diff_profile **out, gmp_reader *r, const char *name,
                                     char *msg, size_t msglen);
void gmp_diff_profile_free(gmp_diff_profile *p);

/* One row of a compared table: the same key in A and B (zeros where it is absent). */
typedef struct gmp_diff_row {
    int32_t device;
    int32_t kind;    /* as in gmp_diff_entry */
    const char *key; /* owned by a profile */
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
