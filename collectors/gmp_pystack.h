/* gmp_pystack: Python call stacks at allocation time, when the profiled process runs CPython.
 *
 * The agent does not link against libpython: at start it looks up CPython's public C API with
 * dlsym (RTLD_DEFAULT, then the libpython object of the module map opened with RTLD_NOLOAD) and
 * reads the interpreter's version (Py_GetVersion). CPython 3.8 and later are handled; see
 * docs/python.md for what each version uses.
 *
 * Safety: on the allocating thread, while CPython is initialized and not finalizing. A thread
 * that holds the GIL is walked through the public C API (the pending exception, if any, is
 * saved and restored around the walk; errors the walk raises are cleared; no finalizer runs inside
 * a CUDA call: 3.11's cyclic GC is held off while frame objects are made, later versions only
 * schedule collections for the evaluation loop). A thread
 * Python knows that released the GIL (ctypes.CDLL functions, PyTorch's operators, any
 * `Py_BEGIN_ALLOW_THREADS`) has its own frames read by gmp_pyframes (3.9 to 3.14) without the
 * GIL and without calling the interpreter: its thread state is PyGILState's thread-specific
 * value, and its frames cannot change until the thread is back from the CUDA call. A thread
 * Python does not know (a C thread) or a process without an interpreter gets native frames only.
 * Depth is bounded by the stack depth option. The first stacks of threads holding the GIL are
 * also read the direct way and compared: any difference turns the direct reader off for the
 * process (threads without the GIL then get native frames only; gmp_pystack_direct_off says
 * why, the agent writes it once in the trace).
 *
 * Cost: a per-thread cache maps code objects to their (file, function) string ids (with the GIL:
 * strong references, so an address is never reused while cached; without it: no reference, the
 * hit is checked against the object's name, file and line-table pointers), and a per-thread
 * cache maps whole stacks to their STACK ids: a repeated stack costs the frame walk and two
 * hashes, no lock.
 *
 * Splicing (GMP_STACK_NATIVE | GMP_STACK_PYTHON): native frames innermost first; each native
 * frame inside the interpreter's evaluation loop (_PyEval_EvalFrameDefault) is replaced by the
 * Python frames it runs, in reading order. Up to 3.10 each Python frame has its own evaluation
 * frame (exact). From 3.11 one evaluation frame runs every Python-to-Python call until the next
 * call from C: each inner evaluation frame gets one Python frame and the outermost gets the rest
 * (the order is always right; the boundary between two C-level entries is a heuristic). Python
 * frames with no evaluation frame in the native stack go outside (after) the native frames. */
#ifndef GMP_PYSTACK_H
#define GMP_PYSTACK_H

#include <stddef.h>
#include <stdint.h>

/* Looks for CPython in the process and, when found, installs the gmp_stack hook. Call after
 * gmp_stack_start. Returns 1 when Python stacks are on (why names the version), 0 when the
 * process does not run CPython (why says so), -1 when it does but cannot be profiled (why says
 * why: version, missing function). */
int gmp_pystack_start(char *why, size_t whylen);

/* Removes the hook. */
void gmp_pystack_stop(void);

/* CPython version found (3.x minor), 0 when none. */
int gmp_pystack_minor(void);

/* Why Python frames of threads without the GIL are off, in a few words: the reason found at start
 * (version, build, layout check) or the self-check's (a stack read both ways differed); NULL when
 * the reader is on or the process runs no CPython. */
const char *gmp_pystack_direct_off(void);

typedef struct gmp_pystack_stats {
    uint64_t python;   /* stacks with Python frames */
    uint64_t no_gil;   /* calls from a thread Python knows that did not hold the GIL and got no
                          Python frames (frames without the GIL off: version or layout) */
    uint64_t misses;   /* stacks interned node by node */
    uint64_t direct;   /* stacks with Python frames read without the GIL (gmp_pyframes) */
    uint64_t mismatch; /* 1 when the reader without the GIL disagreed with the C API on one of
                          the first stacks walked both ways, and was turned off */
} gmp_pystack_stats;
void gmp_pystack_get_stats(gmp_pystack_stats *out);

#endif
