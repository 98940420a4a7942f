#include "gmp_driver.h"
#include "gmp_sampler.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

/* NVML, declared here from its documented C API (nvml.h is not part of the toolkit here). */
typedef void *nvml_device;
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_process;

static struct {
    void *lib;
    int (*Init)(void);
    int (*Shutdown)(void);
    int (*ByPci)(const char *, nvml_device *);
    int (*MemoryInfo)(nvml_device, nvml_memory *);
    int (*Processes)(nvml_device, unsigned int *, nvml_process *);
} N;

static struct {
    CUresult (*DeviceGetCount)(int *);
    CUresult (*PrimaryCtxGetState)(CUdevice, unsigned int *, int *);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*PrimaryCtxRelease)(CUdevice);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
} D;

static const gmp_sink *S;
static unsigned interval;
static pthread_t thread;
static int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static int stop_req;
static int said_no_source;

static void load(void)
{
    *(void **)&D.DeviceGetCount = gmp_driver_sym("cuDeviceGetCount");
    *(void **)&D.PrimaryCtxGetState = gmp_driver_sym("cuDevicePrimaryCtxGetState");
    *(void **)&D.PrimaryCtxRetain = gmp_driver_sym("cuDevicePrimaryCtxRetain");
    *(void **)&D.PrimaryCtxRelease = gmp_driver_sym("cuDevicePrimaryCtxRelease_v2");
    if (!D.PrimaryCtxRelease)
        *(void **)&D.PrimaryCtxRelease = gmp_driver_sym("cuDevicePrimaryCtxRelease");
    *(void **)&D.CtxPushCurrent = gmp_driver_sym("cuCtxPushCurrent_v2");
    *(void **)&D.CtxPopCurrent = gmp_driver_sym("cuCtxPopCurrent_v2");
    *(void **)&D.MemGetInfo = gmp_driver_sym("cuMemGetInfo_v2");
    *(void **)&D.DeviceGetPCIBusId = gmp_driver_sym("cuDeviceGetPCIBusId");
    N.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (N.lib) {
        *(void **)&N.Init = dlsym(N.lib, "nvmlInit_v2");
        *(void **)&N.Shutdown = dlsym(N.lib, "nvmlShutdown");
        *(void **)&N.ByPci = dlsym(N.lib, "nvmlDeviceGetHandleByPciBusId_v2");
        *(void **)&N.MemoryInfo = dlsym(N.lib, "nvmlDeviceGetMemoryInfo");
        *(void **)&N.Processes = dlsym(N.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
        if (!N.Init || !N.ByPci || !N.MemoryInfo || N.Init() != 0) {
            dlclose(N.lib);
            memset(&N, 0, sizeof N);
        }
    }
}

static int sample_nvml(int dev, gmp_rec_sample *s)
{
    if (!N.lib || !D.DeviceGetPCIBusId)
        return -1;
    char bus[64];
    nvml_device h;
    nvml_memory m;
    if (D.DeviceGetPCIBusId(bus, sizeof bus, (CUdevice)dev) != CUDA_SUCCESS ||
        N.ByPci(bus, &h) != 0 || N.MemoryInfo(h, &m) != 0)
        return -1;
    s->free_bytes = m.free;
    s->total_bytes = m.total;
    s->process_used = UINT64_MAX;
    if (N.Processes) {
        nvml_process procs[64];
        unsigned n = 64;
        if (N.Processes(h, &n, procs) == 0) {
            unsigned pid = (unsigned)getpid();
            for (unsigned i = 0; i < n && i < 64; i++)
                if (procs[i].pid == pid)
                    s->process_used = procs[i].usedGpuMemory;
        }
    }
    return 0;
}

static int sample_driver(int dev, gmp_rec_sample *s)
{
    if (!D.PrimaryCtxGetState || !D.PrimaryCtxRetain || !D.PrimaryCtxRelease || !D.CtxPushCurrent ||
        !D.CtxPopCurrent || !D.MemGetInfo)
        return -1;
    unsigned flags = 0;
    int active = 0;
    if (D.PrimaryCtxGetState((CUdevice)dev, &flags, &active) != CUDA_SUCCESS || !active)
        return 1; /* not in use by the program yet: nothing to read without creating a context */
    CUcontext ctx = NULL;
    if (D.PrimaryCtxRetain(&ctx, (CUdevice)dev) != CUDA_SUCCESS)
        return -1;
    int rc = -1;
    if (D.CtxPushCurrent(ctx) == CUDA_SUCCESS) {
        size_t fr = 0, tot = 0;
        if (D.MemGetInfo(&fr, &tot) == CUDA_SUCCESS) {
            s->free_bytes = fr;
            s->total_bytes = tot;
            s->process_used = UINT64_MAX;
            rc = 0;
        }
        CUcontext old;
        D.CtxPopCurrent(&old);
    }
    D.PrimaryCtxRelease((CUdevice)dev);
    return rc;
}

static void sample_all(void)
{
    int count = 0;
    if (!D.DeviceGetCount || D.DeviceGetCount(&count) != CUDA_SUCCESS)
        return;
    int any_source = 0, any_inactive = 0;
    for (int dev = 0; dev < count && dev < 64; dev++) {
        gmp_rec r = {.type = GMP_REC_SAMPLE};
        r.u.sample.device = dev;
        int rc = sample_nvml(dev, &r.u.sample);
        if (rc != 0)
            rc = sample_driver(dev, &r.u.sample);
        if (rc == 1) {
            any_inactive = 1;
            continue;
        }
        if (rc != 0)
            continue;
        any_source = 1;
        gmp_wthread *t = S->enter();
        if (t) {
            gmp_wthread_event(t, &r);
            S->leave();
        }
    }
    if (!any_source && !any_inactive && count > 0 && !said_no_source) {
        said_no_source = 1;
        const char *msg =
            "device memory samples unavailable: neither NVML nor cuMemGetInfo answered";
        S->log("%s", msg);
        gmp_wthread *t = S->enter();
        if (t) {
            gmp_rec n = {.type = GMP_REC_NOTICE};
            n.u.notice.severity = GMP_NOTICE_WARNING;
            n.u.notice.message = (gmp_str){msg, (uint32_t)strlen(msg)};
            gmp_wthread_event(t, &n);
            S->leave();
        }
    }
}

static void *sampler_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stop_req) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += interval / 1000;
        dl.tv_nsec += (long)(interval % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_nsec -= 1000000000L;
            dl.tv_sec++;
        }
        while (!stop_req && pthread_cond_timedwait(&cond, &lock, &dl) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&lock);
        sample_all();
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int gmp_sampler_start(const gmp_sink *sink, unsigned interval_ms)
{
    if (running || !interval_ms)
        return 0;
    S = sink;
    interval = interval_ms;
    load();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cond, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, sampler_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    running = 1;
    return 0;
}

void gmp_sampler_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&lock);
    stop_req = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    running = 0;
    sample_all(); /* the state at exit */
}
