/* gmp_import_strings: the snapshot importer's table of strings (the file and function names of
 * frames lists), deduplicated by content, and the tables of slots it and the frame table find
 * their entries by (private to formats/import/gmp_import_torch.c). */
#ifndef GMP_IMPORT_STRINGS_H
#define GMP_IMPORT_STRINGS_H

#include <stddef.h>
#include <stdint.h>

/* Strings, filled while reading; freed field by field by the importer. */
typedef struct gmp_import_strtab {
    char **s;
    uint32_t *len, *wid; /* wid: the writer's id + 1, once defined */
    uint64_t *hash;      /* of the bytes (gmp_hash_bytes) */
    size_t n, cap;
    uint32_t *slot; /* by content: index + 1 (0: empty); hcap slots */
    size_t hcap;
} gmp_import_strtab;

/* Doubles a table of slots (index + 1) whose entries' hashes are hash_of(ctx, index); -1 when out
 * of memory. */
int gmp_import_slots_grow(uint32_t **slot, size_t *cap, size_t n,
                          uint64_t (*hash_of)(void *, size_t), void *ctx);

/* The index + 1 of the string bytes[0..n) in t, added when new (see gmp_import_strings.c); 0: out
 * of memory. */
uint32_t gmp_import_str_intern(gmp_import_strtab *t, const char *bytes, uint32_t n);

#endif
