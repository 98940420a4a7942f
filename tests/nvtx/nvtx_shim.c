/* Test injection library for the NVTX collector: what the agent will do, reduced to the NVTX part.
 * Exports InitializeInjectionNvtx2 and InitializeInjectionNvtxExtension (the names the NVTX loader
 * looks up in the library named by NVTX_INJECTION64_PATH). The first call opens a writer on the
 * file named by GMP_NVTX_TEST_TRACE and hands the collector a sink whose enter() returns this
 * thread's gmp_wthread (guarded by a re-entrancy flag). The trace is finished by
 * gmp_nvtx_shim_finish (the test programs call it through dlsym) or at exit. */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gmp_clock.h"
#include "gmp_nvtx.h"
#include "gmp_writer.h"

#define SHIM_API __attribute__((visibility("default")))

static gmp_writer *g_w;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static atomic_int g_finished;
static atomic_int g_inject_calls, g_ext_calls;
static __thread gmp_wthread *t_wt;
static __thread int t_busy;

static gmp_wthread *shim_enter(void)
{
    if (t_busy || atomic_load(&g_finished) || !g_w)
        return NULL;
    t_busy = 1;
    if (!t_wt) {
        t_wt = gmp_writer_thread(g_w, (uint32_t)syscall(SYS_gettid));
        if (!t_wt) {
            t_busy = 0;
            return NULL;
        }
        pthread_setspecific(g_key, t_wt);
    }
    return t_wt;
}

static void shim_leave(void)
{
    t_busy = 0;
}

static void shim_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpumemprof: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void thread_end(void *p)
{
    gmp_wthread_release(p);
}

static void shim_start(void)
{
    const char *path = getenv("GMP_NVTX_TEST_TRACE");
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.wait_us = 200000; /* tests expect nothing lost */
    gmp_rec_header h = {0};
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer = (gmp_str){"nvtx_shim", 9};
    h.pid = (uint32_t)getpid();
    h.ppid = (uint32_t)getppid();
    h.hostname = (gmp_str){"test", 4};
    h.cmdline = (gmp_str){"test", 4};
    h.rank = -1;
    h.start_wall_ns = gmp_wall_ns();
    h.start_trace_ns = gmp_clock_ns();
    h.clock = (gmp_str){GMP_CLOCK_NAME, sizeof GMP_CLOCK_NAME - 1};
    h.options = (gmp_str){"", 0};
    if (gmp_writer_open(&g_w, fd, &o, &h) != GMP_OK) {
        g_w = NULL;
        return;
    }
    pthread_key_create(&g_key, thread_end);
    gmp_sink s = {.w = g_w, .enter = shim_enter, .leave = shim_leave, .log = shim_log};
    gmp_nvtx_init(&s);
}

SHIM_API int InitializeInjectionNvtx2(void *getExportTable);
SHIM_API int InitializeInjectionNvtxExtension(void *moduleInfo);
SHIM_API void gmp_nvtx_shim_finish(void);
SHIM_API int gmp_nvtx_shim_inject_calls(void);
SHIM_API int gmp_nvtx_shim_ext_calls(void);
SHIM_API uint32_t gmp_nvtx_shim_current_range(void);

int InitializeInjectionNvtx2(void *getExportTable)
{
    pthread_once(&g_once, shim_start);
    atomic_fetch_add(&g_inject_calls, 1);
    return gmp_nvtx_inject(getExportTable);
}

int InitializeInjectionNvtxExtension(void *moduleInfo)
{
    pthread_once(&g_once, shim_start);
    atomic_fetch_add(&g_ext_calls, 1);
    return gmp_nvtx_inject_ext(moduleInfo);
}

void gmp_nvtx_shim_finish(void)
{
    if (atomic_load(&g_finished) || !g_w)
        return;
    gmp_nvtx_shutdown(); /* as the agent: while recording, so that its notice is written */
    if (atomic_exchange(&g_finished, 1))
        return;
    gmp_writer_finish(g_w, NULL); /* memory kept: other threads may still hold a gmp_wthread */
}

int gmp_nvtx_shim_inject_calls(void)
{
    return atomic_load(&g_inject_calls);
}

int gmp_nvtx_shim_ext_calls(void)
{
    return atomic_load(&g_ext_calls);
}

uint32_t gmp_nvtx_shim_current_range(void)
{
    return gmp_nvtx_current_range(g_w);
}

__attribute__((destructor)) static void shim_fini(void)
{
    gmp_nvtx_shim_finish();
}
