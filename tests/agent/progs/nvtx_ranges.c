/* Allocations inside nested NVTX ranges: default-domain push/pop (ASCII and wide), a domain with
 * a registered string, a start/end range (not part of the stack), and a second thread with its own
 * stack. Prints the addresses; test_nvtx.py holds the range path each must carry. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <string.h>

#include "prog_util.h"

static void *alloc(const char *label, size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    SHOWP(label, p);
    return p;
}

static void *worker(void *arg)
{
    (void)arg;
    nvtxRangePushA("loader");
    void *p = alloc("loader", 4096);
    nvtxRangePop();
    CHECK(cudaFree(p), cudaSuccess);
    return NULL;
}

int main(void)
{
    void *none = alloc("none", 256);

    nvtxRangePushA("train");
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    void *fwd = alloc("forward", 1 << 20);
    nvtxRangePop();
    nvtxRangePushW(L"backward");
    void *bwd = alloc("backward", 2 << 20);
    nvtxRangePop();
    void *step = alloc("step", 3 << 20);

    nvtxDomainHandle_t dom = nvtxDomainCreateA("mylib");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "kernel_cache");
    nvtxEventAttributes_t ea;
    memset(&ea, 0, sizeof ea);
    ea.version = NVTX_VERSION;
    ea.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    ea.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    ea.message.registered = reg;
    nvtxDomainRangePushEx(dom, &ea);
    void *cache = alloc("cache", 4 << 20);
    nvtxDomainRangePop(dom);

    nvtxRangeId_t rid = nvtxRangeStartA("not-a-stack-range");
    void *started = alloc("started", 5 << 20);
    nvtxRangeEnd(rid);

    pthread_t th;
    CHECK(pthread_create(&th, NULL, worker, NULL), 0);
    CHECK(pthread_join(th, NULL), 0);
    nvtxRangePop(); /* step */
    nvtxRangePop(); /* train */
    void *after = alloc("after", 6 << 20);

    void *ps[] = {none, fwd, bwd, step, cache, started, after};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        CHECK(cudaFree(ps[i]), cudaSuccess);
    printf("nvtx_ranges: ok\n");
    return 0;
}
