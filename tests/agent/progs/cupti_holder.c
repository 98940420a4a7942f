/* A program that holds CUPTI itself (as a profiler in the same process would: Nsight Systems,
 * torch.profiler) before CUDA starts, then uses CUDA. Its output and exit status must be the
 * same whether gpumemprof is injected or not. */
#include <cupti.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

static void CUPTIAPI on_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *p)
{
    (void)d;
    (void)id;
    (void)p;
    ++*(long *)ud;
}

int main(void)
{
    static long calls;
    CUpti_SubscriberHandle sub;
    CUpti_SubscriberParams sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    sp.subscriberName = "Nsight Systems";
    CHECK(cuptiSubscribe_v2(&sub, on_cb, &calls, &sp), CUPTI_SUCCESS);
    CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);
    void *p = NULL;
    CHECK(cudaMalloc(&p, 1 << 20), cudaSuccess);
    CHECK(cudaFree(p), cudaSuccess);
    CHECK(cuptiUnsubscribe(sub), CUPTI_SUCCESS);
    /* enter+exit for each of the two runtime calls: the holder kept every callback */
    printf("cupti_holder: %ld callbacks\n", calls);
    return 7;
}
