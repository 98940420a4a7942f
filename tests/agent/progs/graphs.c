/* CUDA graphs (docs/collectors.md, point 4). A stream captures a 32 MiB cudaMallocAsync (a memory
 * node: nothing allocated at capture time); a second stream joins the capture through an event and
 * captures an 8 MiB cudaMallocAsync and its cudaFreeAsync; the capture ends, the graph is
 * instantiated and launched, and after it completes the 32 MiB (allocated by the graph, not freed
 * in it) live until a cudaFreeAsync outside the graph. Before and after, a plain cudaMallocAsync of
 * 1 MiB on the same stream is a real allocation. At the end cudaDeviceGraphMemTrim gives the graph
 * memory back (cuda.h: graph memory stays associated with graphs after its free, until a trim).
 * Graph entry points are looked up with dlsym: on a runtime (the simulated one) without them the
 * program prints "SKIP graphs <why>" and does the plain allocations only. Prints "A label 0x..". */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <time.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)
#define SYM(var, name) (*(void **)&(var) = dlsym(RTLD_DEFAULT, name))

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void)
{
    cudaStream_t s, s2;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    void *before = NULL, *after = NULL;
    CHECK(cudaMallocAsync(&before, MIB, s), cudaSuccess);
    SHOWP("before", before);
    CHECK(cudaFreeAsync(before, s), cudaSuccess);

    cudaError_t (*begin)(cudaStream_t, enum cudaStreamCaptureMode);
    cudaError_t (*end)(cudaStream_t, cudaGraph_t *);
    cudaError_t (*inst)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
    cudaError_t (*launch)(cudaGraphExec_t, cudaStream_t);
    cudaError_t (*ev_create)(cudaEvent_t *);
    cudaError_t (*ev_record)(cudaEvent_t, cudaStream_t);
    cudaError_t (*wait)(cudaStream_t, cudaEvent_t, unsigned);
    if (!SYM(begin, "cudaStreamBeginCapture") || !SYM(end, "cudaStreamEndCapture") ||
        !SYM(inst, "cudaGraphInstantiateWithFlags") || !SYM(launch, "cudaGraphLaunch") ||
        !SYM(ev_create, "cudaEventCreate") || !SYM(ev_record, "cudaEventRecord") ||
        !SYM(wait, "cudaStreamWaitEvent")) {
        printf("SKIP graphs no stream capture, graph or event entry points\n");
    } else {
        cudaEvent_t e1, e2;
        CHECK(ev_create(&e1), cudaSuccess);
        CHECK(ev_create(&e2), cudaSuccess);
        cudaError_t r = begin(s, cudaStreamCaptureModeGlobal);
        if (r != cudaSuccess) {
            printf("SKIP graphs cudaStreamBeginCapture %d\n", (int)r);
        } else {
            void *g32 = NULL, *g8 = NULL;
            CHECK(cudaMallocAsync(&g32, 32 * MIB, s), cudaSuccess);
            SHOWP("captured32", g32);
            CHECK(ev_record(e1, s), cudaSuccess);
            CHECK(wait(s2, e1, 0), cudaSuccess); /* s2 joins the capture */
            CHECK(cudaMallocAsync(&g8, 8 * MIB, s2), cudaSuccess);
            SHOWP("captured8", g8);
            CHECK(cudaFreeAsync(g8, s2), cudaSuccess);
            CHECK(ev_record(e2, s2), cudaSuccess);
            CHECK(wait(s, e2, 0), cudaSuccess); /* and leaves it */
            cudaGraph_t g;
            CHECK(end(s, &g), cudaSuccess);
            cudaGraphExec_t ge;
            CHECK(inst(&ge, g, 0), cudaSuccess);
            CHECK(launch(ge, s), cudaSuccess);
            CHECK(cudaStreamSynchronize(s), cudaSuccess);
            printf("LAUNCHED\n");
            fflush(stdout);
            sleep_ms(300); /* a few flush intervals: the agent reads the graph memory */
            CHECK(cudaFreeAsync(g32, s), cudaSuccess); /* graph memory freed outside the graph */
            CHECK(cudaStreamSynchronize(s), cudaSuccess);
            CHECK(cudaGraphExecDestroy(ge), cudaSuccess);
            CHECK(cudaGraphDestroy(g), cudaSuccess);
            cudaError_t (*trim)(int);
            if (SYM(trim, "cudaDeviceGraphMemTrim"))
                CHECK(trim(0), cudaSuccess); /* the memory goes back: graph memory 0 */
            sleep_ms(300);
        }
    }
    CHECK(cudaMallocAsync(&after, MIB, s), cudaSuccess);
    SHOWP("after", after);
    CHECK(cudaFreeAsync(after, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    printf("graphs: ok\n");
    return 0;
}
