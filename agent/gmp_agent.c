/* gpumemprof agent: the injection library (libgpumemprof_agent.so) the CUDA driver loads through
 * CUDA_INJECTION64_PATH and NVTX through NVTX_INJECTION64_PATH. It is the only code of gpumemprof
 * that runs inside the user's process, so it never harms its host (docs/architecture.md,
 * Decisions): it never exits, aborts or prints to stdout; every failure becomes one stderr line and
 * a disabled feature; its memory is bounded (the writer's buffers); I/O happens on the writer's
 * thread.
 *
 * Life cycle: the first of InitializeInjection (cuInit) and InitializeInjectionNvtx2 (first NVTX
 * call) starts the agent: options, trace file, writer, collectors; the other, arriving meanwhile
 * on another thread, waits for that start (agent_start, docs/collectors.md). atexit (registered
 * while starting, so it runs before CUDA's own exit handlers) stops the collectors, flushes CUPTI
 * with the forced flag and finishes the trace. A forked child stops recording into its parent's
 * file. */
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gmp_agent_api.h"
#include "gmp_agent_opts.h"
#include "gmp_agent_out.h"
#include "gmp_alert.h"
#include "gmp_clock.h"
#include "gmp_cupti.h"
#include "gmp_driver.h"
#include "gmp_live.h"
#include "gmp_nvtx.h"
#include "gmp_pystack.h"
#include "gmp_sampler.h"
#include "gmp_sink.h"
#include "gmp_stack.h"
#include "gmp_writer.h"

#define EXPORT __attribute__((visibility("default")))

/* The entry points the CUDA driver and NVTX look up with dlsym: they must keep default visibility,
 * or the driver skips the library without a word. */
EXPORT int InitializeInjection(void);
EXPORT int InitializeInjectionNvtx2(void *getExportTable);
EXPORT int InitializeInjectionNvtxExtension(void *moduleInfo);
/* Ranges for the `run --layers` PyTorch hooks (found with ctypes in this library): the same
 * per-thread stack as NVTX ranges (see gmp_nvtx_layer_push). */
EXPORT int gmp_range_push(const char *name);
EXPORT int gmp_range_pop(void);
/* A notice from the `run --layers` sitecustomize into this process's trace (see py_check). */
EXPORT int gmp_python_notice(const char *msg);
/* The C ABI of gmp_agent_api.h (defined at the end of this file). */
EXPORT int gmp_api_version(void);
EXPORT int gmp_start(char *msg, size_t msglen);
EXPORT int gmp_status(unsigned *flags, char *msg, size_t msglen);
EXPORT uint64_t gmp_scope_open(const char *name);
EXPORT int gmp_scope_close(uint64_t scope, gmp_api_scope *info, void *devs, int maxdevs);
EXPORT int gmp_current_bytes(int32_t *devices, uint64_t *bytes, int max);
EXPORT int gmp_stack_text(uint32_t stack, char *buf, size_t buflen);

enum { ST_OFF, ST_STARTING, ST_ON, ST_DISABLED, ST_DONE };

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER; /* STARTING ended (see agent_start) */
static atomic_int state = ST_OFF;
static _Thread_local int tl_starting; /* this thread is inside agent_start's work */
static gmp_agent_opts opts;
static gmp_writer *W;
static gmp_sink sink;
static pthread_key_t tkey;
static int cuda_started, nvtx_started;
static char trace_path[1024];
static char stack_why[256]; /* why native stacks are degraded or off: a NOTICE once recording */
static int py_seen;         /* a Python interpreter was running when the agent started */
static atomic_int py_said;  /* py_check said its line */
/* the C ABI (gmp_agent_api.h) */
static atomic_int api_inproc; /* gmp_start started or armed the agent in this process */
static atomic_int api_late;   /* CUPTI subscribed by gmp_start after CUDA was initialized */
static atomic_int cupti_ok;   /* CUPTI subscribed: the live accounting counts */
static int trace_named;       /* trace_path is a file of the user's (not an unnamed temporary) */
static char off_why[600];     /* why the agent does not record (GMP_STATE_DISABLED) */
static char armed_env[2][32]; /* the variables gmp_start set (they stay set: arm) */

static _Thread_local struct {
    gmp_wthread *t;
    int busy;
} tl;

static void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void agent_log(const char *fmt, ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "gpumemprof: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    for (size_t i = 0; i < len; i++) /* one line, whatever a path or a value holds */
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = '?';
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len); /* one write: lines of processes do not mix */
    (void)w;
}

/* Warnings about degraded features: silenced by GPUMEMPROF_QUIET (errors are not). */
static void agent_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void agent_warn(const char *fmt, ...)
{
    if (opts.quiet)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    agent_log("%s", buf);
}

static void thread_gone(void *p)
{
    /* Later TLS destructors of this thread may still free GPU memory: they get a new handle. */
    if (tl.t == p)
        tl.t = NULL;
    gmp_wthread_release(p);
}

static gmp_wthread *sink_enter(void)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != ST_ON || tl.busy)
        return NULL;
    tl.busy = 1;
    if (!tl.t) {
        uint32_t tid = (uint32_t)syscall(SYS_gettid);
        tl.t = gmp_writer_thread(W, tid);
        if (!tl.t) {
            tl.busy = 0;
            return NULL;
        }
        pthread_setspecific(tkey, tl.t);
        char name[17] = "";
        if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && name[0]) {
            gmp_rec r = {.type = GMP_REC_THREAD};
            r.u.thread.tid = tid;
            name[16] = 0;
            r.u.thread.name = (gmp_str){name, (uint32_t)strlen(name)};
            gmp_writer_define(W, &r);
        }
    }
    return tl.t;
}

static void sink_leave(void)
{
    tl.busy = 0;
}

static void notice(unsigned severity, const char *msg)
{
    gmp_wthread *t = sink_enter();
    if (!t)
        return;
    gmp_rec n = {.type = GMP_REC_NOTICE};
    n.u.notice.severity = severity;
    n.u.notice.message = (gmp_str){msg, (uint32_t)strnlen(msg, 4096)};
    gmp_wthread_event(t, &n);
    sink_leave();
}

/* ---- run --layers / --torch-history in a Python process ----
 * `run` asks for them with GPUMEMPROF_LAYERS / GPUMEMPROF_TORCH_HISTORY and puts its
 * sitecustomize first on PYTHONPATH; that file marks the process it runs in with
 * GPUMEMPROF_PY="<pid> site", then "<pid> torch" once torch is imported
 * (agent/python/sitecustomize.py, _mark). A Python process recorded here without its own pid in
 * the mark never ran it (python -I, -E or -S, or an embedded interpreter that ignores the
 * environment): one line says that the options could not attach, at the start. At the end, a
 * process that ran it but never imported torch is told so once. Both also go into the trace. */
static int py_asked(void)
{
    const char *l = getenv("GPUMEMPROF_LAYERS"), *h = getenv("GPUMEMPROF_TORCH_HISTORY");
    return (l && !strcmp(l, "1")) || (h && !strcmp(h, "1"));
}

static int py_running(void)
{
    int (*isinit)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    return isinit && isinit();
}

static void py_check(int at_stop)
{
    if (!py_asked() || atomic_load(&py_said))
        return;
    if (!at_stop && py_running())
        py_seen = 1;
    if (!py_seen)
        return;
    const char *m = getenv("GPUMEMPROF_PY");
    char *end = NULL;
    long pid = m ? strtol(m, &end, 10) : 0;
    const char *what = NULL;
    if (!m || pid != (long)getpid())
        what = "--layers/--torch-history could not attach to this Python process: it did not run "
               "gpumemprof's sitecustomize (python -I, -E or -S, or an embedded interpreter that "
               "ignores PYTHONPATH); no layers and no PyTorch history";
    else if (at_stop && end && !strstr(end, "torch"))
        what = "--layers/--torch-history: torch was never imported in this process: no layers "
               "and no PyTorch history";
    if (!what || atomic_exchange(&py_said, 1))
        return;
    agent_warn("%s", what);
    notice(GMP_NOTICE_WARNING, what);
}

static void agent_stop(void)
{
    int s = atomic_load(&state);
    if (s != ST_ON)
        return;
    pthread_mutex_lock(&start_lock);
    if (atomic_load(&state) != ST_ON) {
        pthread_mutex_unlock(&start_lock);
        return;
    }
    gmp_sampler_stop();
    gmp_cupti_stop(); /* forced activity flush while we still record */
    gmp_pystack_stats ps;
    gmp_pystack_get_stats(&ps);
    /* Python frames of threads without the GIL: one notice, with the reason when the reader is
       off (version, build, layout check or its self-check), whether or not such calls came */
    const char *pyoff = gmp_pystack_direct_off();
    if ((opts.stacks & GMP_STACKS_PYTHON) && gmp_pystack_minor() && (pyoff || ps.no_gil)) {
        char m[512];
        if (pyoff)
            snprintf(m, sizeof m,
                     "Python frames of threads without the GIL are off (%s): %llu calls from such "
                     "threads have native frames only (PyTorch operators and ctypes.CDLL "
                     "functions release the GIL; see docs/python.md)",
                     pyoff, (unsigned long long)ps.no_gil);
        else
            snprintf(m, sizeof m,
                     "%llu calls from Python threads without the GIL during the interpreter's "
                     "shutdown have native frames only",
                     (unsigned long long)ps.no_gil);
        notice(ps.no_gil ? GMP_NOTICE_WARNING : GMP_NOTICE_INFO, m);
    }
    gmp_pystack_stop();
    gmp_stack_stop();
    gmp_nvtx_shutdown();
    py_check(1);
    atomic_store(&state, ST_DONE);
    gmp_writer_stats st;
    gmp_err rc = gmp_writer_finish(W, &st);
    if (rc == GMP_ERR_IO)
        agent_log("trace %s is incomplete: writing failed (%s); %llu events were not written",
                  trace_path, strerror(st.io_errno ? st.io_errno : EIO),
                  (unsigned long long)st.lost);
    else if (st.lost && !opts.quiet)
        agent_log("%llu events lost (see the trace's LOST records)", (unsigned long long)st.lost);
    pthread_mutex_unlock(&start_lock);
}

/* ---- termination signals ----
 * A program killed by SIGTERM or SIGINT with their default action would not run atexit, and its
 * trace would lack the last flush window and the END record. When (and only when) the program
 * leaves these signals at their default action, the agent catches them: the handler wakes a
 * finisher thread (sem_post is async-signal-safe), waits for it at most 3 s, then restores the
 * default action and raises the signal again, so the program still dies of it (same exit status
 * for its parent). A program that installs its own handler later simply replaces ours. */
static const int term_sigs[] = {SIGTERM, SIGINT, SIGHUP};
#define NTERM (sizeof term_sigs / sizeof term_sigs[0])
static int term_installed[NTERM];
static sem_t term_sem;
static atomic_int term_done;
static pthread_t term_thread;

static void on_term(int sig)
{
    int saved = errno;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sem_post(&term_sem);
    for (int i = 0; i < 300 && !atomic_load(&term_done); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = saved;
    raise(sig);
}

static void *term_main(void *arg)
{
    (void)arg;
    while (sem_wait(&term_sem) != 0 && errno == EINTR)
        ;
    agent_stop();
    atomic_store(&term_done, 1);
    return NULL;
}

static void term_install(void)
{
    if (sem_init(&term_sem, 0, 0) != 0)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&term_thread, NULL, term_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return;
    pthread_detach(term_thread);
    for (size_t i = 0; i < NTERM; i++) {
        struct sigaction cur;
        if (sigaction(term_sigs[i], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
            cur.sa_handler != SIG_DFL)
            continue; /* the program handles (or ignores) it: leave it alone */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(term_sigs[i], &sa, NULL) == 0)
            term_installed[i] = 1;
    }
}

static void term_uninstall_in_child(void)
{
    /* the finisher thread does not exist in a forked child: give the signals back */
    for (size_t i = 0; i < NTERM; i++) {
        struct sigaction cur;
        if (!term_installed[i] || sigaction(term_sigs[i], NULL, &cur) != 0 ||
            cur.sa_handler != on_term)
            continue;
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(term_sigs[i], &dfl, NULL);
    }
}

static void at_fork_child(void)
{
    term_uninstall_in_child();
    gmp_live_after_fork();
    /* The child must never write into its parent's file; it cannot use CUDA anyway. */
    if (atomic_load(&state) == ST_ON || atomic_load(&state) == ST_STARTING) {
        gmp_writer_forget_after_fork(W);
        atomic_store(&state, ST_DISABLED);
    }
    tl.t = NULL;
    tl.busy = 0;
    pthread_mutex_init(&start_lock, NULL);
    pthread_cond_init(&start_cond, NULL);
}

/* Starts the trace (once per process). Returns 1 when recording.
 *
 * The start runs without start_lock held, so that it never holds a lock while it loads libraries
 * or creates threads; its end is announced on start_cond. InitializeInjection (from inside the
 * first CUDA call, under the driver's own initialization lock) and InitializeInjectionNvtx2 (from
 * inside an NVTX call, while that library's other threads spin in nvtxInitOnce, nvtxInit.h:451)
 * can arrive together on two threads: the second waits for the first's start to end and then sees
 * the result, instead of returning "not started" (CUPTI never subscribed; NVTX a no-op for good for
 * that library, as NVTX sets no-op slots when its init fails). The start itself calls neither CUDA
 * nor NVTX, so the waiting thread cannot hold something the start needs: no deadlock. Only the
 * starting thread itself, re-entering (a library it loads making a CUDA or NVTX call), returns at
 * once. A wait longer than 30 s (a start blocked by something outside the agent) gives up with one
 * line on stderr, never hangs the program. */
static int agent_start_work(void);

static int agent_start(void)
{
    int s = atomic_load(&state);
    if (s == ST_ON)
        return 1;
    if (s != ST_OFF && s != ST_STARTING)
        return 0;
    if (tl_starting)
        return 0; /* re-entered from this thread's own start */
    pthread_mutex_lock(&start_lock);
    if (atomic_load(&state) == ST_STARTING) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 30;
        while (atomic_load(&state) == ST_STARTING)
            if (pthread_cond_timedwait(&start_cond, &start_lock, &dl) == ETIMEDOUT)
                break;
        if (atomic_load(&state) == ST_STARTING) {
            pthread_mutex_unlock(&start_lock);
            agent_log("the agent's start took longer than 30 s on another thread; this thread "
                      "goes on without it");
            return 0;
        }
    }
    if (atomic_load(&state) != ST_OFF) {
        int on = atomic_load(&state) == ST_ON;
        pthread_mutex_unlock(&start_lock);
        return on;
    }
    atomic_store(&state, ST_STARTING);
    pthread_mutex_unlock(&start_lock);
    tl_starting = 1;
    int ok = agent_start_work();
    tl_starting = 0;
    pthread_mutex_lock(&start_lock);
    if (atomic_load(&state) == ST_STARTING) /* a fork in between made it DISABLED in the child */
        atomic_store(&state, ok ? ST_ON : ST_DISABLED);
    ok = atomic_load(&state) == ST_ON;
    pthread_cond_broadcast(&start_cond);
    pthread_mutex_unlock(&start_lock);
    if (!ok)
        return 0;
    if (stack_why[0])
        notice(GMP_NOTICE_WARNING, stack_why);
    term_install();
    if (!opts.quiet)
        agent_log("recording to %s", trace_path);
    py_check(0);
    return 1;
}

/* The work of the start, on the one thread that starts: returns 1 when recording can begin. */
static int agent_start_work(void)
{
    /* tests widen the start race with a pause here (tests/agent/test_start_race.py) */
    const char *delay = getenv("GPUMEMPROF_TEST_START_DELAY_US");
    if (delay && *delay) {
        long us = strtol(delay, NULL, 10);
        if (us > 0 && us <= 1000000) {
            struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
    }
    /* the variables gmp_start set in a parent process, inherited: nobody asked for a trace of this
     * process (it did not import the package); nothing recorded, nothing said */
    const char *armed_by = getenv("GPUMEMPROF_ARMED_BY");
    if (armed_by && strtol(armed_by, NULL, 10) != (long)getpid() && !atomic_load(&api_inproc)) {
        snprintf(off_why, sizeof off_why,
                 "not profiling: the agent was armed in process %.20s (gpumemprof imported there), "
                 "not in this one",
                 armed_by);
        return 0;
    }
    char err[1200];
    if (gmp_agent_opts_read(&opts, err, sizeof err) < 0) {
        snprintf(off_why, sizeof off_why, "not profiling: %.580s", err);
        agent_log("not profiling: %s", err);
        gmp_agent_run_log(0, err);
        return 0;
    }
    int fd;
    if (atomic_load(&api_inproc) && !getenv("GPUMEMPROF_OUTPUT")) {
        /* started from the program (gmp_start) with no output asked for: the trace goes to an
         * unnamed temporary file, gone at exit (the agent needs its writer for stacks) */
        const char *dir = getenv("TMPDIR");
        fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0 && dir && *dir)
            fd = open("/tmp", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        snprintf(trace_path, sizeof trace_path,
                 "an unnamed temporary file (set GPUMEMPROF_OUTPUT to keep the trace)");
        if (fd < 0)
            snprintf(err, sizeof err, "cannot create a temporary file for the trace: %s",
                     strerror(errno));
    } else {
        fd = gmp_agent_create(opts.output, opts.force, opts.suffix, trace_path, sizeof trace_path,
                              err, sizeof err);
        trace_named = fd >= 0;
    }
    if (fd < 0) {
        snprintf(off_why, sizeof off_why, "not profiling: %.580s", err);
        agent_log("not profiling: %s", err);
        gmp_agent_run_log(0, err);
        return 0;
    }
    gmp_agent_run_log(1, trace_path);
    /* header */
    char host[256] = "", cmd[4096], optstr[512];
    gethostname(host, sizeof host - 1);
    size_t cmdlen = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f) {
        cmdlen = fread(cmd, 1, sizeof cmd, f);
        fclose(f);
        if (cmdlen && cmd[cmdlen - 1] == 0)
            cmdlen--; /* separators between arguments only */
    }
    gmp_agent_opts_format(&opts, optstr, sizeof optstr);
    char producer[64];
    snprintf(producer, sizeof producer, "gpumemprof %s", GMP_VERSION_STRING);
    gmp_rec_header h = {0};
    h.producer = (gmp_str){producer, (uint32_t)strlen(producer)};
    h.pid = (uint32_t)getpid();
    h.ppid = (uint32_t)getppid();
    h.hostname = (gmp_str){host, (uint32_t)strlen(host)};
    h.cmdline = (gmp_str){cmd, (uint32_t)cmdlen};
    gmp_agent_rankinfo ri = gmp_agent_rank_info();
    h.rank = ri.rank;
    h.local_rank = ri.local_rank;
    h.world_size = ri.world_size;
    h.rank_var = (gmp_str){ri.var, (uint32_t)strlen(ri.var)};
    h.start_trace_ns = gmp_clock_ns();
    h.start_wall_ns = gmp_wall_ns();
    h.clock = (gmp_str){GMP_CLOCK_NAME, (uint32_t)strlen(GMP_CLOCK_NAME)};
    h.options = (gmp_str){optstr, (uint32_t)strlen(optstr)};
    gmp_writer_opts wo;
    gmp_writer_opts_default(&wo);
    wo.max_buffered_bytes = opts.buffer_bytes;
    wo.flush_interval_ms = opts.flush_ms;
    /* activity records (static memory, pool sizes) arrive up to a flush interval after the fact:
     * keep SYNC behind them so that they are never late (see collectors/gmp_cupti.c) */
    if (opts.activity)
        wo.sync_lag_ns = 3ull * opts.flush_ms * 1000000ull;
    if (gmp_writer_open(&W, fd, &wo, &h) != GMP_OK) {
        snprintf(off_why, sizeof off_why, "not profiling: cannot start the trace writer");
        agent_log("not profiling: cannot start the trace writer");
        gmp_agent_run_log(0, "cannot start the trace writer");
        return 0;
    }
    pthread_key_create(&tkey, thread_gone);
    sink.w = W;
    sink.enter = sink_enter;
    sink.leave = sink_leave;
    sink.log = agent_warn;
    sink.error = agent_log;
    if (opts.stacks) {
        const char *nc = getenv("GPUMEMPROF_STACK_CACHE"); /* benchmarks: 0 = no per-thread cache */
        int kinds = ((opts.stacks & GMP_STACKS_NATIVE) ? GMP_STACK_NATIVE : 0) |
                    ((opts.stacks & GMP_STACKS_PYTHON) ? GMP_STACK_PYTHON : 0);
        gmp_stack_opts so = {kinds, opts.stack_depth, (gmp_unwind)opts.unwind,
                             nc && !strcmp(nc, "0")};
        int src = gmp_stack_start(&sink, &so, stack_why, sizeof stack_why);
        if (src != 0 && stack_why[0] && (kinds & GMP_STACK_NATIVE))
            agent_warn("%s", stack_why);
        else
            stack_why[0] = 0;
        if (src >= 0 && (kinds & GMP_STACK_PYTHON)) {
            char pwhy[200];
            int prc = gmp_pystack_start(pwhy, sizeof pwhy);
            /* auto: silent when the program is not Python; asked for: say why there is none */
            if (prc < 0 || (prc == 0 && !opts.stacks_auto)) {
                agent_warn("Python stacks off: %s", pwhy);
                if (!stack_why[0])
                    snprintf(stack_why, sizeof stack_why, "Python stacks off: %s", pwhy);
            }
        }
    }
    const char *live = getenv("GPUMEMPROF_LIVE"); /* benchmarks: 0 = no live accounting */
    if (live && !strcmp(live, "0"))
        gmp_live_on = 0;
    gmp_nvtx_init(&sink);
    atexit(agent_stop);
    pthread_atfork(NULL, NULL, at_fork_child);
    return 1;
}

/* Starts CUPTI (once): from the driver's InitializeInjection, or from gmp_start when CUDA is
 * already initialized. */
static int inject(void)
{
    if (!agent_start())
        return 1;
    pthread_mutex_lock(&start_lock);
    int first = !cuda_started;
    cuda_started = 1;
    pthread_mutex_unlock(&start_lock);
    if (!first)
        return 1;
    gmp_cupti_opts co = {opts.cupti[0] ? opts.cupti : NULL, opts.activity,
                         (size_t)opts.activity_bytes, opts.flush_ms};
    char why[512];
    if ((opts.alert_bytes || opts.alert_percent) &&
        gmp_alert_init(&sink, opts.alert_bytes, opts.alert_percent) < 0)
        agent_log("alerts unavailable (out of memory)");
    if (gmp_cupti_start(&sink, &co, why, sizeof why) < 0) {
        snprintf(off_why, sizeof off_why, "%s", why);
        agent_log("%s; the program runs on without memory profiling", why);
        notice(GMP_NOTICE_ERROR, why);
        return 1;
    }
    atomic_store(&cupti_ok, 1);
    if (opts.sample_ms && gmp_sampler_start(&sink, opts.sample_ms) < 0)
        agent_log("device memory sampling unavailable (cannot start its thread)");
    return 1;
}

/* Called by the CUDA driver during cuInit, once, on the calling thread. */
EXPORT int InitializeInjection(void)
{
    return inject();
}

/* Called by every NVTX instance (one per ELF image that includes NVTX) on its first call. */
EXPORT int InitializeInjectionNvtx2(void *getExportTable)
{
    if (!agent_start())
        return 0;
    if (!opts.nvtx)
        return 0;
    nvtx_started = 1;
    return gmp_nvtx_inject(getExportTable);
}

/* NVTX extensions (the memory extension) reach the tool through this entry. */
EXPORT int InitializeInjectionNvtxExtension(void *moduleInfo)
{
    if (!agent_start() || !opts.nvtx)
        return 0;
    return gmp_nvtx_inject_ext(moduleInfo);
}

/* Never starts the agent: a process that has not initialized CUDA (a spawn worker calling
 * torchvision transforms, a CPU helper) gets no trace and no line from module hooks; a start under
 * way on another thread is waited for. -2 (NVTX_NO_PUSH_POP_TRACKING): nothing was pushed, and the
 * caller must not pop. */
EXPORT int gmp_range_push(const char *name)
{
    if (atomic_load(&state) == ST_OFF || !agent_start() || !opts.nvtx)
        return -2;
    return gmp_nvtx_layer_push(name);
}

EXPORT int gmp_range_pop(void)
{
    if (atomic_load(&state) != ST_ON || !opts.nvtx)
        return -1;
    return gmp_nvtx_layer_pop();
}

EXPORT int gmp_python_notice(const char *msg)
{
    if (!msg || atomic_load(&state) != ST_ON)
        return -1;
    notice(GMP_NOTICE_INFO, msg);
    return 0;
}

/* ---- the C ABI (gmp_agent_api.h) ---- */

/* This library's own path (what the driver must load to reach this agent). */
static int self_path(char *buf, size_t n)
{
    Dl_info di;
    if (!dladdr((void *)&gmp_api_version, &di) || !di.dli_fname || !di.dli_fname[0])
        return -1;
    if (!realpath(di.dli_fname, buf))
        snprintf(buf, n, "%s", di.dli_fname);
    return 0;
}

/* 1 when path (a CUDA_INJECTION64_PATH value) is this very library. */
static int is_self(const char *path)
{
    char me[4096], other[4096];
    if (!path || !*path || self_path(me, sizeof me) < 0 || !realpath(path, other))
        return 0;
    return strcmp(me, other) == 0;
}

/* CUDA initialized in this process: a driver is loaded and answers something other than
 * CUDA_ERROR_NOT_INITIALIZED (cuda.h: every call before cuInit returns it; cuDeviceGetCount
 * needs no context). */
static int cuda_initialized(void)
{
    int (*count)(int *);
    *(void **)&count = gmp_driver_sym("cuDeviceGetCount");
    if (!count)
        return 0;
    int n = 0;
    return count(&n) != 3 /* CUDA_ERROR_NOT_INITIALIZED */;
}

/* The driver reads CUDA_INJECTION64_PATH in cuInit (and NVTX NVTX_INJECTION64_PATH at its first
 * call): pointing them at this library makes the program's own initialization start the agent,
 * whichever driver it loads. They stay set: each NVTX instance (a library's own copy of NVTX)
 * reads NVTX_INJECTION64_PATH at its own first call, which may come long after cuInit, and
 * unsetenv while the program's threads run races with their getenv (glibc before 2.40). The
 * program's child processes inherit them with GPUMEMPROF_ARMED_BY, which keeps their agent silent
 * unless they import the package themselves (agent_start_work). */
static void arm(void)
{
    char me[4096];
    if (self_path(me, sizeof me) < 0)
        return;
    static const char *const vars[2] = {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"};
    int any = 0;
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        if ((!v || !*v) && setenv(vars[i], me, 1) == 0) {
            snprintf(armed_env[i], sizeof armed_env[i], "%s", vars[i]);
            any = 1;
        }
    }
    if (any) {
        /* a child process started before CUDA is initialized here inherits the variables: this
         * mark tells its agent that it was not asked for there (agent_start_work) */
        char pid[32];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        setenv("GPUMEMPROF_ARMED_BY", pid, 1);
    }
}

EXPORT int gmp_api_version(void)
{
    return GMP_API_VERSION;
}

/* cuda_started is written under start_lock (InitializeInjection); read it the same way */
static int cuda_on(void)
{
    pthread_mutex_lock(&start_lock);
    int v = cuda_started;
    pthread_mutex_unlock(&start_lock);
    return v;
}

static int api_state(unsigned *flags)
{
    unsigned f = 0;
    int s = atomic_load(&state), r, cuda = cuda_on();
    if (atomic_load(&api_inproc))
        f |= GMP_API_INPROC;
    else if (cuda)
        f |= GMP_API_INJECTED;
    if (atomic_load(&api_late))
        f |= GMP_API_LATE;
    if (s == ST_ON && trace_named)
        f |= GMP_API_TRACE;
    if (s == ST_DISABLED)
        r = GMP_STATE_DISABLED;
    else if (s == ST_DONE)
        r = GMP_STATE_DONE;
    else if (s == ST_ON && atomic_load(&cupti_ok))
        r = GMP_STATE_ON;
    else if (s == ST_ON && cuda)
        r = GMP_STATE_DISABLED; /* CUPTI could not be used */
    else if (armed_env[0][0] || is_self(getenv("CUDA_INJECTION64_PATH")))
        r = GMP_STATE_WAITING;
    else
        r = GMP_STATE_OFF;
    if (flags)
        *flags = f;
    return r;
}

EXPORT int gmp_status(unsigned *flags, char *msg, size_t msglen)
{
    unsigned f;
    int r = api_state(&f);
    if (flags)
        *flags = f;
    if (!msg || !msglen)
        return r;
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    switch (r) {
    case GMP_STATE_ON:
        snprintf(msg, msglen, "recording (%s%s); trace: %s",
                 (f & GMP_API_INPROC) ? "started in this process" : "started by gpumemprof run",
                 (f & GMP_API_LATE) ? ", after CUDA was initialized: memory allocated before "
                                      "is a baseline it does not count"
                                    : "",
                 trace_path);
        break;
    case GMP_STATE_WAITING:
        snprintf(msg, msglen, "armed: starts when the program initializes CUDA");
        break;
    case GMP_STATE_DONE:
        snprintf(msg, msglen, "finished (the process is exiting); trace: %s", trace_path);
        break;
    case GMP_STATE_DISABLED:
        snprintf(msg, msglen, "%s", off_why[0] ? off_why : "disabled in this process (a fork)");
        break;
    default:
        if (inj && *inj && !is_self(inj))
            snprintf(msg, msglen,
                     "not started: CUDA_INJECTION64_PATH names another library (%.900s), which "
                     "the driver loads instead",
                     inj);
        else
            snprintf(msg, msglen, "not started (gmp_start was not called)");
    }
    return r;
}

EXPORT int gmp_start(char *msg, size_t msglen)
{
    const char *armed_by = getenv("GPUMEMPROF_ARMED_BY");
    if (armed_by && atomic_load(&state) == ST_OFF) {
        /* inherited from a parent that armed the agent, and asked for here too: this process's
         * own in-process agent, armed by it from now on */
        static const char *const vars[2] = {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"};
        char pid[32];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        setenv("GPUMEMPROF_ARMED_BY", pid, 1);
        atomic_store(&api_inproc, 1);
        for (int i = 0; i < 2; i++)
            if (is_self(getenv(vars[i])))
                snprintf(armed_env[i], sizeof armed_env[i], "%s", vars[i]);
    }
    int s = atomic_load(&state);
    if ((s == ST_OFF || (s == ST_ON && !cuda_on())) && !tl_starting) {
        const char *inj = getenv("CUDA_INJECTION64_PATH");
        int injected = inj && *inj && is_self(inj); /* gpumemprof run, or an earlier gmp_start */
        if (cuda_initialized()) {
            if (!injected)
                atomic_store(&api_inproc, 1);
            if (!cuda_on()) { /* the driver did not load us in its cuInit: start now */
                atomic_store(&api_inproc, 1);
                atomic_store(&api_late, 1);
                inject();
            }
        } else if (!injected) {
            atomic_store(&api_inproc, 1);
            arm();
        }
    }
    return gmp_status(NULL, msg, msglen);
}

static struct {
    uint64_t id;
    uint64_t t0;
    pthread_t thread;
    int pushed;
} scopes[GMP_LIVE_MAX_SCOPES];
static pthread_mutex_t scopes_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT uint64_t gmp_scope_open(const char *name)
{
    uint64_t id = gmp_live_open();
    if (!id)
        return 0;
    int pushed = 0;
    if (atomic_load(&state) == ST_ON && opts.nvtx)
        pushed = gmp_nvtx_layer_push(name && *name ? name : "gpumemprof.profile") >= 0;
    int slot = (int)(id & 0xffff) - 1;
    pthread_mutex_lock(&scopes_lock);
    scopes[slot].id = id;
    scopes[slot].t0 = gmp_clock_ns();
    scopes[slot].thread = pthread_self();
    scopes[slot].pushed = pushed;
    pthread_mutex_unlock(&scopes_lock);
    return id;
}

EXPORT int gmp_scope_close(uint64_t scope, gmp_api_scope *info, void *devs, int maxdevs)
{
    int slot = (int)(scope & 0xffff) - 1;
    if (slot < 0 || slot >= GMP_LIVE_MAX_SCOPES)
        return -1;
    uint64_t t1 = gmp_clock_ns();
    /* this scope's entry, read before gmp_live_close frees its slot for another opener */
    pthread_mutex_lock(&scopes_lock);
    int mine = scopes[slot].id == scope;
    uint64_t t0 = mine ? scopes[slot].t0 : t1;
    int pop = mine && scopes[slot].pushed && pthread_equal(scopes[slot].thread, pthread_self());
    pthread_mutex_unlock(&scopes_lock);
    gmp_live_dev ld[GMP_LIVE_MAX_DEV];
    uint64_t lost = 0;
    int n = gmp_live_close(scope, ld, GMP_LIVE_MAX_DEV, &lost);
    if (n < 0)
        return -1;
    pthread_mutex_lock(&scopes_lock);
    if (scopes[slot].id == scope)
        scopes[slot].id = 0;
    pthread_mutex_unlock(&scopes_lock);
    if (pop && atomic_load(&state) == ST_ON)
        gmp_nvtx_layer_pop();
    if (!info || info->size < offsetof(gmp_api_scope, pad))
        return n;
    unsigned f;
    info->state = api_state(&f);
    info->flags = f;
    info->ndevices = (uint32_t)n;
    info->elapsed_ns = t1 - t0;
    info->lost_events = lost;
    size_t stride = info->dev_size;
    for (int i = 0; devs && i < n && i < maxdevs && i < GMP_LIVE_MAX_DEV; i++) {
        gmp_api_device d;
        memset(&d, 0, sizeof d);
        d.device = ld[i].device;
        d.nsites = ld[i].nsites;
        d.start_bytes = ld[i].start_bytes;
        d.peak_bytes = ld[i].peak_bytes;
        d.end_bytes = ld[i].end_bytes;
        d.allocated_bytes = ld[i].allocated_bytes;
        d.freed_bytes = ld[i].freed_bytes;
        d.allocs = ld[i].allocs;
        d.frees = ld[i].frees;
        d.baseline_frees = ld[i].baseline_frees;
        d.net_bytes = (int64_t)(ld[i].allocated_bytes - ld[i].freed_bytes);
        for (uint32_t k = 0; k < ld[i].nsites && k < GMP_API_MAX_SITES; k++) {
            d.sites[k].bytes = ld[i].sites[k].bytes;
            d.sites[k].allocs = ld[i].sites[k].allocs;
            d.sites[k].stack = ld[i].sites[k].stack;
        }
        memcpy((char *)devs + (size_t)i * stride, &d, stride < sizeof d ? stride : sizeof d);
    }
    return n;
}

EXPORT int gmp_current_bytes(int32_t *devices, uint64_t *bytes, int max)
{
    if (!devices || !bytes || max <= 0)
        return 0;
    return gmp_live_current(devices, bytes, max);
}

EXPORT int gmp_stack_text(uint32_t stack, char *buf, size_t buflen)
{
    if (!buf || !buflen)
        return -1;
    buf[0] = 0;
    int s = atomic_load(&state);
    if ((s != ST_ON && s != ST_DONE) || !W || !stack)
        return -1;
    size_t o = 0;
    int n = 0;
    for (uint32_t id = stack; id && n < GMP_STACK_MAX_DEPTH + 64; n++) {
        gmp_rec_stack node;
        char file[1024], fn[256], line[1400];
        if (gmp_writer_stack_node(W, id, &node, file, sizeof file, fn, sizeof fn) < 0)
            return n ? n : -1;
        int len;
        if (node.kind == GMP_FRAME_PYTHON) {
            len = snprintf(line, sizeof line, "py\t%s\t%u\t%s\n", file, node.line, fn);
        } else {
            Dl_info di;
            int ok = dladdr((void *)(uintptr_t)node.address, &di);
            len = snprintf(line, sizeof line, "native\t0x%llx\t%s\t%s\n",
                           (unsigned long long)node.address, ok && di.dli_fname ? di.dli_fname : "",
                           ok && di.dli_sname ? di.dli_sname : "");
        }
        if (len < 0 || (size_t)len >= sizeof line || o + (size_t)len + 1 > buflen)
            break;
        for (int i = 0; i < len - 1; i++) /* one line per frame, whatever a name holds */
            if (line[i] == '\n')
                line[i] = '?';
        memcpy(buf + o, line, (size_t)len);
        o += (size_t)len;
        buf[o] = 0;
        id = node.parent;
    }
    return n;
}

/* When the library is unloaded without exit() (dlclose by a host), finish the trace too. */
__attribute__((destructor)) static void agent_unload(void)
{
    agent_stop();
}
