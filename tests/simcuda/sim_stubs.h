/* simcuda entry-point support shared by the generated API stubs (gen_api_stubs.py) and the
 * hand-written entry-point code (sim_entry.c, sim_rt_entry.c, sim_cupti.c). Kept free of the
 * CUDA headers: the generated files include cuda.h / cuda_runtime_api.h with
 * __CUDA_API_VERSION_INTERNAL, which cupti.h (and so sim_internal.h) cannot be mixed with. */
#ifndef SIMCUDA_SIM_STUBS_H
#define SIMCUDA_SIM_STUBS_H

#include <stddef.h>

#define SIMCUDA_HIDDEN __attribute__((visibility("hidden")))
#define SIMCUDA_EXPORT __attribute__((visibility("default")))

typedef void (*simcuda_fn)(void);

/* A driver entry point that the simulator does not model: driver-domain enter/exit callbacks with
 * `params` (may be NULL) and CUDA_ERROR_NOT_SUPPORTED (libcuda.so.1, sim_procaddr.c). */
SIMCUDA_HIDDEN int simcuda_drv_stub(unsigned cbid, const char *name, void *params);
/* The same for the runtime: cudaErrorNotSupported, also the thread's last error
 * (libcudart.so, sim_rt_entry.c). */
SIMCUDA_HIDDEN int simcuda_rt_stub(unsigned cbid, const char *name, void *params);
/* CUPTI: CUPTI_ERROR_NOT_SUPPORTED, also what cuptiGetLastError returns next (sim_cupti.c). */
SIMCUDA_HIDDEN int simcuda_cupti_stub(void);

/* _ptds/_ptsz entry points forward to the plain function between these two: the next API callback
 * issued on the thread reports `cbid`/`name` (the variant's own) instead of the plain function's,
 * and the model's per-thread default-stream setting is on (simcuda_set_per_thread_default, where
 * the model has it). begin returns what end restores. Exported by libcuda.so.1 (sim_entry.c). */
SIMCUDA_EXPORT int simcuda_ptds_begin(unsigned cbid, const char *name);
SIMCUDA_EXPORT void simcuda_ptds_end(int restore);

/* cuGetProcAddress's table, generated from cudaTypedefs.h (sim_gen_procaddr.c) */
typedef struct simcuda_procaddr_entry {
    const char *name; /* base name, e.g. "cuMemAlloc" */
    int version;      /* CUDA version that introduced this ABI, e.g. 3020 */
    int per_thread;   /* 1 for the _ptds/_ptsz variant */
    simcuda_fn fn;
} simcuda_procaddr_entry;
SIMCUDA_HIDDEN extern const simcuda_procaddr_entry simcuda_procaddr_table[];
SIMCUDA_HIDDEN extern const size_t simcuda_procaddr_count;

#endif
