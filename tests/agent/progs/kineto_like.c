/* A second CUPTI client in the profiled program, as torch.profiler's Kineto is: after some CUDA
 * work it subscribes (cuptiSubscribe: CUPTI allows one subscriber, cupti_callbacks.h:698-703, so
 * this fails while the agent holds it), registers its own activity buffer callbacks (one pair per
 * CUPTI library, the last registered: cupti_activity.h:7648-7669) and enables an activity kind of
 * its own, then allocates more (device memory, a stream-ordered pool allocation), frees it and
 * flushes. Prints the subscription's result, the records its buffers got (MEMORY2 included: the
 * agent enabled that kind) and "kineto_like: ok". Links CUPTI as Kineto does. */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <stdlib.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

static size_t n_memory2, n_buffers;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, 1 << 16);
    *size = *buffer ? 1 << 16 : 0;
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    n_buffers++;
    while (buffer && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
            n_memory2++;
    free(buffer); /* whoever requested it: what a client does with the buffers it is handed */
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
    (void)ud, (void)d, (void)id, (void)data;
}

int main(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK(cudaMalloc(&a, 1 * MIB), cudaSuccess);
    CHECK(cudaFree(a), cudaSuccess);

    CUpti_SubscriberHandle sub;
    CUptiResult r = cuptiSubscribe(&sub, on_callback, NULL);
    printf("subscribe %d\n", (int)r);
    CHECK(cuptiActivityRegisterCallbacks(requested, completed), CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s), cudaSuccess);
    CHECK(cudaMalloc(&b, 2 * MIB), cudaSuccess);
    SHOWP("after", b);
    CHECK(cudaMallocAsync(&c, 4 * MIB, s), cudaSuccess);
    CHECK(cudaFreeAsync(c, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaFree(b), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    printf("kineto buffers %zu, MEMORY2 records %zu\n", n_buffers, n_memory2);
    printf("kineto_like: ok\n");
    return 0;
}
