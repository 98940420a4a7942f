/* gmp_handles: a small hash table from 64-bit keys (VMM handles, mapped addresses, pool handles)
 * to what the CUPTI collector must remember about them between calls: a VMM handle's references
 * and live mappings (its physical memory is freed when both reach zero, cuda.h's cuMemRelease and
 * cuMemUnmap), which handle a mapping maps, where a memory pool lives. Not thread-safe: the caller
 * holds its own lock. Open addressing with linear probing and backward-shift deletion; grows by
 * doubling (load at most 1/2). Inside the profiled process: bounded by the program's own handles.
 */
#ifndef GMP_HANDLES_H
#define GMP_HANDLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmp_handle_ent {
    uint64_t key;
    uint64_t size;   /* bytes of the handle or the mapping */
    uint64_t handle; /* mapping: the VMM handle it maps */
    int32_t device;  /* device ordinal; -1: host or not a device */
    uint32_t refs;   /* VMM handle: references (create, retain, import +1; release -1) */
    uint32_t maps;   /* VMM handle: live mappings */
    uint32_t flags;  /* GMP_HANDLE_* */
    uint8_t used;
} gmp_handle_ent;

#define GMP_HANDLE_IMPORTED 0x1u   /* memory of another process or object: not ours to count */
#define GMP_HANDLE_NOT_DEVICE 0x2u /* pool or handle on the host, managed or of another kind */
#define GMP_HANDLE_MANAGED 0x4u    /* managed pool */

typedef struct gmp_handles {
    gmp_handle_ent *ent;
    size_t cap, n;
} gmp_handles;

/* The entry of key, or NULL. Valid until the next put or del. */
gmp_handle_ent *gmp_handles_get(const gmp_handles *t, uint64_t key);
/* The entry of key, inserted zeroed (device -1) when absent; NULL when out of memory. */
gmp_handle_ent *gmp_handles_put(gmp_handles *t, uint64_t key);
/* Removes key (nothing when absent). */
void gmp_handles_del(gmp_handles *t, uint64_t key);
void gmp_handles_free(gmp_handles *t);

#endif
