/* Allocations inside nested NVTX ranges: default-domain push/pop (ASCII and wide), a domain with
 * a registered string, a start/end range (not part of the stack), and a second thread with its own
 * stack. Prints the addresses; test_nvtx.py holds the range path each must carry.
 * `nvtx_ranges flood N`: N pushes named as torch.autograd.profiler.emit_nvtx() names them
 * ("aten::mm, seq = I, op_id = J, sizes = [...]": getNvtxStr, torch/csrc/profiler/util.cpp), an
 * allocation inside the last one, then 20,000 distinct names of its own ("user I"), an allocation
 * inside the last one. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

static int flood(long n)
{
    char name[160];
    void *op = NULL, *user = NULL;
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name,
                 "aten::mm, seq = %ld, op_id = %ld, sizes = [[%ld, 64], [64, 64]]", i, i + 1,
                 1 + i % 256);
        nvtxRangePushA(name);
        if (i == n - 1)
            op = alloc("op", 1 << 20);
        nvtxRangePop();
    }
    for (long i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "user %ld", i);
        nvtxRangePushA(name);
        if (i == 19999)
            user = alloc("user", 2 << 20);
        nvtxRangePop();
    }
    CHECK(cudaFree(op), cudaSuccess);
    CHECK(cudaFree(user), cudaSuccess);
    printf("nvtx_ranges: flood ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "flood"))
        return flood(atol(argv[2]));
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
