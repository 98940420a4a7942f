/* gmp_rlimit: whether this process runs under a limit on its data or address space.
 *
 * RLIMIT_DATA and RLIMIT_AS count memory that is reserved, touched or not: a thread's stack, a
 * second malloc arena, a heap kept for reuse. Code that would spend such memory for speed (the
 * CLI's huge-page heap, the streaming of a snapshot's import, the pickle reader's threads) asks
 * here first, and under a limit takes the way that needs the least memory at once. */
#ifndef GMP_RLIMIT_H
#define GMP_RLIMIT_H

#include <sys/resource.h>

static inline int gmp_memory_limited(void)
{
    struct rlimit rl;
    return (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) ||
           (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY);
}

#endif
