/* bench_pyframes: the cost of reading the calling thread's Python frames without the GIL
 * (collectors/gmp_pyframes), in the process, with no CUDA call and no trace around it. Built and
 * loaded by tests/bench/bench_pystacks.py (`cc -shared` with collectors/gmp_pyframes.c) and called
 * through ctypes.CDLL, which releases the GIL as PyTorch's operators do. Figures, not a test. */
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

#include "gmp_pyframes.h"

int bench_pyframes_init(int minor);
double bench_pyframes(int iters, int mode, int *frames);

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* 1 when the interpreter's layouts check out. */
int bench_pyframes_init(int minor)
{
    return gmp_pyframes_init(minor, sym, NULL, 0);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* this thread's CPU time: other load left out */
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* CPU nanoseconds per stack over iters walks of this thread's frames. mode 0: the walk (frame
 * chain, code objects; what a cached stack costs besides the hashes); 1: and each frame's line
 * from its line table (a line not cached yet); 2: and each frame's file and function text (a
 * code object not cached yet). *frames: frames per stack. */
double bench_pyframes(int iters, int mode, int *frames)
{
    const void *(*this_state)(void) = (const void *(*)(void))sym("PyGILState_GetThisThreadState");
    if (!this_state || iters <= 0)
        return -1;
    gmp_pyframe fr[256];
    volatile uintptr_t sink = 0;
    unsigned n = 0;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        n = gmp_pyframes_walk(this_state(), fr, 256);
        for (unsigned k = 0; mode >= 1 && k < n; k++) {
            sink += (uintptr_t)gmp_pyframes_line(fr[k].code, fr[k].addr);
            if (mode >= 2) {
                char buf[256];
                size_t len = 0;
                sink += (uintptr_t)gmp_pyframes_code_file(fr[k].code, buf, sizeof buf, &len);
                sink += (uintptr_t)gmp_pyframes_code_name(fr[k].code, buf, sizeof buf, &len) + len;
            }
        }
    }
    double t = now_ns() - t0;
    *frames = (int)n;
    return t / iters;
}
