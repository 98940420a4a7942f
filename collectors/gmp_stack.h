/* gmp_stack: native call stacks at allocation time, and the process's module map.
 *
 * The agent records stacks as raw return addresses interned as a trie (STACK records) plus the map
 * of loaded objects (MODULE records: path, load bias, mapped range, GNU build-id); symbolization
 * happens offline (formats/symbols/gmp_symbolize), so the profiled process pays only for the
 * unwinding. See docs/stacks.md.
 *
 * Capture: libunwind's unw_backtrace (libunwind.so.8, loaded with dlopen so that the agent has no
 * link-time dependency and exports nothing of it), glibc's backtrace() (libgcc's unwinder), or a
 * frame-pointer walk bounded to the calling thread's stack. The agent's own frames and the frames
 * of the CUDA libraries (libcuda, libcudart, libcupti: identified by module) are dropped; the
 * user's frames are kept, innermost first, at most `depth` of them.
 *
 * Module map: every loaded object is recorded at start (dl_iterate_phdr); when a captured address
 * falls outside every known object, the map is re-read if dl_iterate_phdr's dlpi_adds/dlpi_subs
 * counters moved, and the new objects are recorded before the stack that needs them.
 *
 * Interning: a per-thread cache maps a whole stack (hash of its addresses, then an exact compare)
 * to its id, so a repeated stack costs a hash and no lock; a miss interns node by node through
 * gmp_writer_stack_native. */
#ifndef GMP_STACK_H
#define GMP_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_sink.h"

/* Stack kinds requested (bits; the agent's GPUMEMPROF_STACKS). */
enum { GMP_STACK_NATIVE = 1, GMP_STACK_PYTHON = 2 };

/* How native frames are captured (GPUMEMPROF_STACK_UNWIND). */
typedef enum gmp_unwind {
    GMP_UNWIND_LIBUNWIND = 0, /* unw_backtrace from libunwind.so.8 (default) */
    GMP_UNWIND_GLIBC = 1,     /* backtrace() from glibc (libgcc_s unwinder) */
    GMP_UNWIND_FP = 2,        /* frame-pointer walk */
} gmp_unwind;

#define GMP_STACK_MAX_DEPTH 256

typedef struct gmp_stack_opts {
    int kinds;      /* GMP_STACK_* bits; 0: no stacks */
    unsigned depth; /* frames kept, 1..GMP_STACK_MAX_DEPTH */
    gmp_unwind unwind;
    int no_cache; /* benchmarks: intern node by node on every call */
} gmp_stack_opts;

/* Starts stack recording into sink->w: loads the unwinder and writes the module map. When the
 * requested unwinder cannot be loaded, falls back to the frame-pointer walk and says so in why
 * (returns 1). Returns 0 when all is as asked, -1 when stacks stay off (why says why). */
int gmp_stack_start(const gmp_sink *sink, const gmp_stack_opts *o, char *why, size_t whylen);

/* The calling thread's current stack as a STACK id, 0 when stacks are off or it cannot be had.
 * Call it between sink->enter() and sink->leave() (the agent's re-entrancy guard). */
uint32_t gmp_stack_current(void);

/* Stops recording stacks (gmp_stack_current returns 0 from then on). */
void gmp_stack_stop(void);

/* ---- lower level: for tests, benchmarks and other stack kinds ---- */

/* Interns native frames pcs[0..n) (innermost first) on top of parent (0: a root), through the
 * per-thread cache when parent is 0. Returns the id of the innermost node, 0 on failure. */
uint32_t gmp_stack_intern_native(gmp_writer *w, uint32_t parent, const uint64_t *pcs, unsigned n);

/* Hook for other stack kinds (the Python engineer's): when set and the requested kinds include
 * GMP_STACK_PYTHON, gmp_stack_current() calls it on the allocating thread with the native frames
 * it captured (innermost first, filtered; n is 0 when native stacks were not requested) and
 * records the id it returns; 0 means "no Python frames here": the native frames are then
 * recorded as without a hook. The hook builds the trie itself: native parts with
 * gmp_stack_intern_native or gmp_writer_stack_native, Python frames with gmp_writer_stack_python
 * (kinds mix freely in one trie). It runs under the agent's re-entrancy guard and must not block.
 * Before interning a stack it has not seen, the hook calls gmp_stack_refresh. */
typedef uint32_t (*gmp_stack_hook)(void *ctx, gmp_writer *w, int kinds, const uint64_t *native,
                                   unsigned n, unsigned depth);
void gmp_stack_set_hook(gmp_stack_hook fn, void *ctx);

/* From inside the hook only: makes sure the module map covers the native frames of this call
 * (records the objects loaded since the last scan) and filters them again into pcs (a library
 * loaded since may be a CUDA library whose frames go). Returns the number of frames. */
unsigned gmp_stack_refresh(uint64_t *pcs, unsigned max);

#endif
