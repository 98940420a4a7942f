/* simcuda failure-mode switches read by the simulated driver and runtime (libcuda.so.1); README
 * "Failure modes". The CUPTI switches are read in sim_cupti.c. */
#include "sim_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* SIMCUDA_LATE_INJECTION: the injection is loaded inside the first CUDA call */
SIMCUDA_API int simcuda_late_injection(void)
{
    static atomic_int cached = -1;
    int v = atomic_load(&cached);
    if (v < 0) {
        const char *e = getenv("SIMCUDA_LATE_INJECTION");
        v = (e && *e && strcmp(e, "0") != 0) ? 1 : 0;
        atomic_store(&cached, v);
    }
    return v;
}
