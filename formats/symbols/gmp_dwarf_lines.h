/* gmp_dwarf_lines: the symbolizer's own reader of DWARF line tables (private to formats/symbols;
 * gmp_symbolize.c uses it). It reads one unit's line program from the bytes of .debug_line and
 * hands every row to the caller, with its file's full name; why the symbolizer does not use
 * libdwarf's rows is said at the top of gmp_dwarf_lines.c. */
#ifndef GMP_DWARF_LINES_H
#define GMP_DWARF_LINES_H

#include <stddef.h>
#include <stdint.h>

/* An ELF section's bytes (decompressed when it was compressed); n = 0 when absent. */
typedef struct gmp_dwarf_sect {
    const uint8_t *p;
    size_t n;
} gmp_dwarf_sect;

typedef struct gmp_dwarf_lines {
    /* set by the caller */
    gmp_dwarf_sect debug_line, debug_line_str, debug_str;
    const char *(*intern)(void *ctx, const char *name); /* a file's name, kept by the caller */
    /* one row (end: the end of a sequence, whose file is NULL); nonzero stops the reading */
    int (*row)(void *ctx, uint64_t addr, const char *file, uint64_t line, int end);
    void *ctx;
    /* the last unit's file table, file numbers from fbase (0 for DWARF 5, else 1) */
    const char **ftab;
    size_t nftab, capftab;
    int fbase;
} gmp_dwarf_lines;

/* Reads the line program at off of .debug_line: the unit's file table and its rows. Returns 0, or
 * -1 when the table cannot be read: the file table is then empty, and the rows it handed over
 * (if any) are for the caller to drop. */
int gmp_dwarf_lines_read(gmp_dwarf_lines *c, uint64_t off, const char *comp_dir);

/* The full name of file number no of the last table read; NULL when there is none. */
const char *gmp_dwarf_lines_file(const gmp_dwarf_lines *c, uint64_t no);

void gmp_dwarf_lines_free(gmp_dwarf_lines *c);

#endif
