/* pq_gen: writes Parquet files with formats/export/gmp_parquet.h whose every value is known, for
 * tests/convert/check_parquet.py (test convert_parquet_writer), which reads them back with DuckDB
 * and hyparquet and compares each value with the same sequence computed in Python:
 *
 *   pq_gen DIR   writes DIR/groups.parquet  (30000 rows in row groups of 256 KiB, pages of 1000
 *                                           values: every type, nulls, dictionaries, invalid UTF-8)
 *                       DIR/overflow.parquet (70000 distinct strings: the dictionary gives up,
 * PLAIN) DIR/empty.parquet    (no row) DIR/long.parquet     (a string over GMP_PQ_MAX_STRING, one
 * over the statistics' limit)
 *
 * The values of row i are spelled out in check_parquet.py's writer_rows(); change both together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_parquet.h"

static int finish(gmp_pq_writer *w, FILE *f, const char *what)
{
    char msg[160];
    gmp_err e = gmp_pq_close(w, msg, sizeof msg);
    if (fclose(f) != 0 || e != GMP_OK) {
        fprintf(stderr, "pq_gen: %s: %s\n", what, msg);
        return 1;
    }
    return 0;
}

static FILE *create(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        perror(path);
    return f;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pq_gen DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;
    char buf[64];

    static const gmp_pq_column groups[] = {
        {"i", GMP_PQ_INT64, 0, 0},    {"sq", GMP_PQ_INT64, 1, 0},    {"small", GMP_PQ_INT32, 0, 1},
        {"key", GMP_PQ_STRING, 0, 1}, {"note", GMP_PQ_STRING, 1, 0}, {"even", GMP_PQ_BOOL, 0, 0},
        {"neg", GMP_PQ_INT64, 1, 1},
    };
    FILE *f = create(dir, "groups.parquet");
    gmp_pq_opts o = {.row_group_bytes = 256 * 1024, .page_values = 1000, .created_by = "pq_gen"};
    gmp_pq_writer *w = f ? gmp_pq_open(f, groups, 7, &o) : NULL;
    if (!w)
        return 1;
    for (int64_t i = 0; i < 30000; i++) {
        gmp_pq_i64(w, i);
        if (i % 3 == 0)
            gmp_pq_null(w);
        else
            gmp_pq_i64(w, i * i);
        gmp_pq_i32(w, (int32_t)(i % 7) - 3);
        snprintf(buf, sizeof buf, "k%d", (int)(i % 50));
        gmp_pq_cstr(w, buf);
        if (i % 5 == 0) {
            gmp_pq_null(w);
        } else if (i % 11 == 0) { /* invalid UTF-8: 0xff is written as U+00FF */
            snprintf(buf, sizeof buf, "\xff%d", (int)i);
            gmp_pq_cstr(w, buf);
        } else {
            snprintf(buf, sizeof buf, "n\xc3\xa9%d", (int)i); /* "né" + i */
            gmp_pq_cstr(w, buf);
        }
        gmp_pq_bool(w, i % 2 == 0);
        /* long runs of nulls and of one value (RLE runs of the hybrid) */
        if ((i / 100) % 2)
            gmp_pq_null(w);
        else
            gmp_pq_i64(w, -(i / 1000));
        if (gmp_pq_row(w) != GMP_OK)
            break;
    }
    rc |= finish(w, f, "groups.parquet");

    static const gmp_pq_column overflow[] = {{"u", GMP_PQ_STRING, 0, 1}};
    f = create(dir, "overflow.parquet");
    w = f ? gmp_pq_open(f, overflow, 1, NULL) : NULL;
    if (!w)
        return 1;
    for (int i = 0; i < 70000; i++) {
        snprintf(buf, sizeof buf, "u%d", i);
        gmp_pq_cstr(w, buf);
        gmp_pq_row(w);
    }
    rc |= finish(w, f, "overflow.parquet");

    f = create(dir, "empty.parquet");
    w = f ? gmp_pq_open(f, groups, 7, NULL) : NULL;
    if (!w)
        return 1;
    rc |= finish(w, f, "empty.parquet");

    static const gmp_pq_column lng[] = {{"s", GMP_PQ_STRING, 0, 0}};
    f = create(dir, "long.parquet");
    w = f ? gmp_pq_open(f, lng, 1, NULL) : NULL;
    if (!w)
        return 1;
    size_t big = GMP_PQ_MAX_STRING + 1000;
    char *s = malloc(big);
    if (!s)
        return 1;
    for (size_t k = 0; k < big; k++)
        s[k] = (char)('a' + k % 26);
    gmp_pq_str(w, s, big);
    gmp_pq_row(w);
    gmp_pq_str(w, s, 300);
    gmp_pq_row(w);
    free(s);
    rc |= finish(w, f, "long.parquet");
    return rc;
}
