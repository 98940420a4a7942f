/* cli_heap: the gpumemprof program's heap in large pages.
 *
 * Reading a recording builds many small tables that live until the command ends, so the heap
 * grows page by page and each fresh 4 KiB page costs a fault. With transparent huge pages for the
 * heap the kernel maps it 2 MiB at a time instead (docs/performance.md has the figures).
 *
 * How: glibc's malloc takes the heap from brk for requests below its mmap threshold. We reserve
 * RESERVE bytes of heap up front (STEPS mallocs, then their frees: address space only, nothing is
 * touched), keep it (the trim threshold above it), and ask for huge pages on its 2 MiB-aligned
 * part with madvise(MADV_HUGEPAGE). With the kernel's THP mode "madvise" (Debian's default) or
 * "always" that region is then faulted a huge page at a time; with "never", or without glibc,
 * nothing changes. Requests up to MMAP_MIN keep coming from the heap (glibc's default threshold
 * starts at 128 KiB and would send the readers' 1 MiB buffers and zstd's contexts to mmap, which
 * unmaps them on free: faulted again on the next use). Memory above the reserve grows as before.
 *
 * What it costs: a page is 2 MiB, resident whole when partly used (so peak RSS is higher by up to a
 * page per region); nothing else is changed: the same allocations, in the same order. Every thread
 * allocates from this one heap (M_ARENA_MAX 1): memory one thread frees is reused by the next that
 * allocates. Not done for `run`, whose process waits on the profiled program, nor under a limit on
 * data or address space (see gmp_cli_heap_setup). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#endif
#include "cli_heap.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "gmp_rlimit.h"

#define STEP ((size_t)16 << 20) /* below MMAP_MIN: taken from brk */
#define STEPS 4                 /* RESERVE = 64 MiB of address space */
#define RESERVE (STEP * STEPS)
#define MMAP_MIN ((size_t)32 << 20) /* glibc's largest mmap threshold (64-bit) */
#define HUGE ((uintptr_t)2 << 20)

void gmp_cli_heap_setup(void)
{
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE) && defined(M_MMAP_THRESHOLD) &&                   \
    defined(M_TRIM_THRESHOLD)
    if (getenv("GPUMEMPROF_PLAIN_HEAP")) /* for measuring the difference (docs/performance.md) */
        return;
    /* Under a limit on address space or data (RLIMIT_AS, RLIMIT_DATA: they count the reserve,
     * touched or not, and so does heap kept by the trim threshold), nothing is changed: the
     * memory a command may use is what the limit says (the test cli_inputs_bad reads a snapshot
     * under an RLIMIT_DATA smaller than the file). */
    if (gmp_memory_limited())
        return;
    if (!mallopt(M_MMAP_THRESHOLD, (int)MMAP_MIN) || !mallopt(M_TRIM_THRESHOLD, (int)RESERVE * 2))
        return;
#ifdef M_ARENA_MAX
    /* One arena for every thread: the tables a helper thread builds (the snapshot importer's, when
     * a large snapshot is imported beside the replay) are freed into the heap the main thread
     * allocates from next, instead of a second arena of their own that would add its peak to the
     * main one's. */
    (void)mallopt(M_ARENA_MAX, 1);
#endif
    void *q[STEPS];
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < STEPS; i++) {
        q[i] = malloc(STEP);
        if (q[i] && (uintptr_t)q[i] < lo)
            lo = (uintptr_t)q[i];
        if (q[i] && (uintptr_t)q[i] + STEP > hi)
            hi = (uintptr_t)q[i] + STEP;
    }
    for (int i = STEPS; i-- > 0;)
        free(q[i]); /* back to the heap's top, which stays (trim threshold) */
    lo = (lo + HUGE - 1) & ~(HUGE - 1);
    hi &= ~(HUGE - 1);
    if (hi > lo && hi - lo <= 2 * RESERVE) /* contiguous, as brk gives it */
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
}
