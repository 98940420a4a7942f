/* gmp_nvtx: the NVTX v3 collector. Implements NVTX injection (the tool side of
 * nvtx3/nvtxDetail/nvtxInit.h): it fills the function tables of every NVTX instance in the process
 * with its own implementations and records ranges, marks, thread names and the memory extension
 * (nvToolsExtMem.h) into the trace through a gmp_sink.
 *
 * NVTX v3 is header-only: every ELF image that includes the headers has its own loader and calls
 * InitializeInjectionNvtx2 (and, for extensions such as the memory one,
 * InitializeInjectionNvtxExtension) once per image. gmp_nvtx_inject and gmp_nvtx_inject_ext accept
 * any number of calls and fill each caller's tables; all images share the same per-thread state, so
 * a range pushed in one library and popped in another is one range.
 *
 * Range model: each thread has ONE range stack shared by all domains; every level keeps its
 * domain, and its path node is gmp_writer_range(parent path, domain string id, name string id)
 * (domain 0 = the default domain). So `train/step/forward` is one path even when `step` comes from
 * another domain, and an allocation's layer is the whole nesting its thread was in. nvtxRangePop
 * and nvtxDomainRangePop(d) close the innermost open level of their own domain (NVTX keeps one
 * stack per domain); when that level is not the innermost one, the levels above it are re-parented
 * (their paths change from then on), and the RANGE_POP event names the path that was closed. The
 * stack holds GMP_NVTX_MAX_DEPTH levels; deeper pushes are counted (pops stay balanced) but get no
 * node and no events. Pops with nothing open in their domain are ignored.
 *
 * Memory extension: regions are ALLOC/FREE records of kind GMP_MEM_NVTX_REGION with device -1 (the
 * extension does not say which device a heap lives on; the replay can find the enclosing
 * allocation by address), the heap handle in `handle` and the thread's current range path.
 *
 * Never prints to stdout, never aborts; NULL or malformed arguments are ignored. */
#ifndef GMP_NVTX_H
#define GMP_NVTX_H

#include <stdint.h>

#include "gmp_sink.h"

#define GMP_NVTX_MAX_DEPTH 256 /* range levels per thread that get a path node */

/* Remembers the sink (copied) and starts recording. The first call registers pthread_atfork
 * handlers that hold this module's two mutexes across fork(); they run before any handler
 * registered earlier, so an agent whose own prepare handler locks the writer must register it
 * before calling this (a thread may hold a region lock while it waits for the writer). Call before
 * any injection call; may be called again with a new sink (for example a new writer): threads then
 * start from empty stacks. Returns 0, or -1 when sink or sink->w, enter or leave is NULL (log may
 * be NULL). */
int gmp_nvtx_init(const gmp_sink *sink);

/* The body of InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable): fills the
 * function tables of the calling NVTX instance. Returns 1 on success, 0 to decline (not
 * initialized, shut down, or an export table this code does not understand). */
int gmp_nvtx_inject(void *getExportTable);

/* The body of InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *moduleInfo), which the
 * injection library must also export for the memory extension (nvToolsExtMem.h) to reach it.
 * Fills the memory module's slots; returns 1 on success, 0 for modules it does not implement
 * (the extension's functions then stay no-ops). */
int gmp_nvtx_inject_ext(void *moduleInfo);

/* The calling thread's current range path id (0 when no range is open), for attributing
 * allocations. A thread-local read; 0 when w is not the writer being recorded to. */
uint32_t gmp_nvtx_current_range(gmp_writer *w);

/* Ranges opened by the agent's own entry points (gmp_range_push/gmp_range_pop, used by the
 * `run --layers` PyTorch hooks): the same per-thread stack as NVTX ranges, in a domain of their
 * own ("gpumemprof.layers", not shown in paths), so that an NVTX pop of the program never closes
 * a layer and a layer pop never closes the program's range. Same return values as nvtxRangePush
 * and nvtxRangePop. */
int gmp_nvtx_layer_push(const char *name);
int gmp_nvtx_layer_pop(void);

/* Stops recording: every NVTX call becomes a no-op (handles already returned stay harmless). */
void gmp_nvtx_shutdown(void);

#endif
