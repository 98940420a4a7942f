/* grow_prog: a CUDA program whose device memory grows slowly, for the `view --follow` and
 * `run --view` tests (tests/view): STEPS steps (default 12) of MS milliseconds (default 250), each
 * in an NVTX range grow/step that allocates 8 MiB with cudaMalloc and keeps it; prints "step N"
 * per step on stdout; frees everything at the end and exits 0.
 *
 *   grow_prog [STEPS] [MS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define MiB (1024ull * 1024ull)

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 12;
    long ms = argc > 2 ? atol(argv[2]) : 250;
    if (steps < 1 || steps > 1000 || ms < 0 || ms > 10000) {
        fprintf(stderr, "usage: grow_prog [STEPS 1-1000] [MS 0-10000]\n");
        return 2;
    }
    void **p = calloc((size_t)steps, sizeof *p);
    if (!p)
        return 1;
    nvtxRangePushA("grow");
    for (int i = 0; i < steps; i++) {
        nvtxRangePushA("step");
        if (cudaMalloc(&p[i], 8 * MiB) != cudaSuccess) {
            fprintf(stderr, "grow_prog: cudaMalloc failed\n");
            return 1;
        }
        nvtxRangePop();
        printf("step %d\n", i);
        fflush(stdout);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    nvtxRangePop();
    for (int i = 0; i < steps; i++)
        cudaFree(p[i]);
    free(p);
    return 0;
}
