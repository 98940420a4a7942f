/* NVTX collector tests. Each scenario runs in its own process (NVTX initializes once per process),
 * with NVTX_INJECTION64_PATH naming the test injection library (nvtx_shim). The program makes
 * NVTX calls through the real NVTX v3 headers, finishes the trace through the shim, decodes it
 * (zstd + gmp_decode) and checks the exact records.
 *
 * Usage: test_nvtx basic|threads|domains|mem|robust|two_loaders|declined|flood [N [USER]] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "gmp_nvtx.h"
#include "nvtx_libs.h"
#include "nvtx_trace.h"

static char g_trace[64];
static void *g_shim;

static uint32_t my_tid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static void setup(int with_trace)
{
    CHECK(getenv("NVTX_INJECTION64_PATH") != NULL);
    if (!with_trace) {
        unsetenv("GMP_NVTX_TEST_TRACE");
        return;
    }
    strcpy(g_trace, "/tmp/gmp_test_nvtx_XXXXXX");
    int fd = mkstemp(g_trace);
    CHECK(fd >= 0);
    close(fd);
    setenv("GMP_NVTX_TEST_TRACE", g_trace, 1);
}

/* A function of the shim (loaded by NVTX at its first call). */
static void *shim_sym(const char *name)
{
    if (!g_shim)
        g_shim = dlopen(getenv("NVTX_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
    CHECK(g_shim != NULL);
    void *f = dlsym(g_shim, name);
    CHECK(f != NULL);
    return f;
}

static uint32_t current_range(void)
{
    uint32_t (*f)(void) = (uint32_t(*)(void))shim_sym("gmp_nvtx_shim_current_range");
    return f();
}

static int shim_count(const char *name)
{
    int (*f)(void) = (int (*)(void))shim_sym(name);
    return f();
}

static void finish_and_load(ntrace *t)
{
    void (*fin)(void) = (void (*)(void))shim_sym("gmp_nvtx_shim_finish");
    fin();
    ntrace_load(g_trace, t);
    unlink(g_trace);
    CHECK(t->has_end);
    CHECK_EQ(t->lost, 0);
}

/* Events of one thread in file order (which is the order the thread produced them). */
typedef struct evlist {
    const gmp_rec **e;
    size_t n;
} evlist;

static evlist thread_events(ntrace *t, uint32_t tid)
{
    evlist l = {malloc(t->n * sizeof(gmp_rec *)), 0};
    CHECK(l.e != NULL);
    for (size_t i = 0; i < t->n; i++) {
        const gmp_rec *r = &t->recs[i];
        if (r->tid == tid && gmp_rec_is_event(r->type) && r->type != GMP_REC_LOST &&
            r->type != GMP_REC_END)
            l.e[l.n++] = r;
    }
    return l;
}

/* "PUSH a/b", "POP a/b", "START x", "END", "MARK m", "ALLOC", "FREE" */
static const char *describe(ntrace *t, const gmp_rec *r)
{
    static char buf[1 << 17];
    const char *kind = "?";
    switch (r->type) {
    case GMP_REC_RANGE_PUSH: kind = "PUSH"; break;
    case GMP_REC_RANGE_POP: kind = "POP"; break;
    case GMP_REC_RANGE_START: kind = "START"; break;
    case GMP_REC_RANGE_END: kind = "END"; break;
    case GMP_REC_MARK: kind = "MARK"; break;
    case GMP_REC_ALLOC: kind = "ALLOC"; break;
    case GMP_REC_FREE: kind = "FREE"; break;
    default: break;
    }
    if (r->type == GMP_REC_RANGE_END || r->type == GMP_REC_ALLOC || r->type == GMP_REC_FREE)
        snprintf(buf, sizeof buf, "%s", kind);
    else
        snprintf(buf, sizeof buf, "%s %s", kind, ntrace_path(t, r->u.rev.range));
    return buf;
}

static void expect_events(ntrace *t, const evlist *l, size_t from, const char *const *want,
                          size_t n)
{
    CHECK(from + n <= l->n);
    for (size_t i = 0; i < n; i++) {
        const char *got = describe(t, l->e[from + i]);
        if (strcmp(got, want[i]) != 0) {
            fprintf(stderr, "event %zu: got \"%.200s\", expected \"%s\"\n", from + i, got, want[i]);
            exit(1);
        }
    }
}

static const gmp_rec_thread *find_thread(ntrace *t, uint32_t tid)
{
    const gmp_rec_thread *found = NULL;
    for (size_t i = 0; i < t->n; i++) {
        if (t->recs[i].type == GMP_REC_THREAD && t->recs[i].u.thread.tid == tid)
            found = &t->recs[i].u.thread; /* the last one wins */
    }
    return found;
}

static nvtxEventAttributes_t attr_ascii(const char *s)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = s;
    return a;
}

/* ---- basic: one thread, every kind of name, start/end, marks, thread names ---- */

static void scenario_basic(void)
{
    setup(1);
    uint32_t tid = my_tid();
    CHECK_EQ(nvtxRangePushA("train"), 0);
    uint32_t cur_train = current_range();
    CHECK(cur_train != 0);
    CHECK_EQ(nvtxRangePushA("step"), 1);
    CHECK_EQ(nvtxRangePushW(L"forward\u00e9\u4e2d"), 2);
    uint32_t cur_fwd = current_range();
    nvtxMarkA("m1");
    CHECK_EQ(nvtxRangePop(), 2);
    CHECK_EQ(nvtxRangePop(), 1);
    CHECK_EQ(current_range(), cur_train);
    CHECK_EQ(nvtxRangePop(), 0);
    CHECK_EQ(current_range(), 0);
    CHECK_EQ(nvtxRangePop(), -1); /* nothing open */

    nvtxEventAttributes_t a = attr_ascii("ex_ascii");
    CHECK_EQ(nvtxRangePushEx(&a), 0);
    nvtxRangePop();
    a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    a.message.unicode = L"ex_wide";
    nvtxRangePushEx(&a);
    nvtxRangePop();
    nvtxStringHandle_t h = nvtxDomainRegisterStringA(NULL, "reg_name");
    CHECK(h != NULL);
    CHECK(nvtxDomainRegisterStringA(NULL, "reg_name") == h);
    nvtxStringHandle_t hw = nvtxDomainRegisterStringW(NULL, L"reg_wide");
    CHECK(hw != NULL && hw != h);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = h;
    nvtxRangePushEx(&a);
    nvtxRangePop();
    a.message.registered = hw;
    nvtxRangePushEx(&a);
    nvtxRangePop();

    /* the same buffer with new contents: the per-thread cache must compare contents */
    char buf[32];
    strcpy(buf, "first");
    nvtxRangePushA(buf);
    nvtxRangePop();
    strcpy(buf, "secnd");
    nvtxRangePushA(buf);
    nvtxRangePop();
    strcpy(buf, "first");
    nvtxRangePushA(buf);
    nvtxRangePop();
    strcpy(buf, "fir");
    nvtxRangePushA(buf);
    nvtxRangePop();
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("loop");
        nvtxRangePop();
    }

    nvtxRangeId_t id1 = nvtxRangeStartA("startA");
    nvtxRangeId_t id2 = nvtxRangeStartW(L"startW");
    a = attr_ascii("startEx");
    nvtxRangeId_t id3 = nvtxRangeStartEx(&a);
    CHECK(id1 && id2 && id3 && id1 != id2 && id2 != id3 && id1 != id3);
    nvtxRangeEnd(id2);
    nvtxRangeEnd(id1);
    nvtxRangeEnd(id3);
    nvtxMarkW(L"mw");
    a = attr_ascii("mex");
    nvtxMarkEx(&a);

    nvtxNameOsThreadA(tid, "main-thread");
    nvtxNameOsThreadW(tid + 100000, L"other\u00e9");
    nvtxNameCategoryA(1, "cat");
    nvtxNameCategoryW(2, L"cat2");

    size_t big_n = GMP_MAX_STRING_BYTES + 5000;
    char *big = malloc(big_n + 1);
    CHECK(big != NULL);
    memset(big, 'x', big_n);
    big[big_n] = '\0';
    nvtxRangePushA(big);
    nvtxRangePop();
    free(big);

    ntrace t;
    finish_and_load(&t);
    evlist l = thread_events(&t, tid);
    static const char *const want[] = {
        "PUSH train",
        "PUSH train/step",
        "PUSH train/step/forward\xc3\xa9\xe4\xb8\xad",
        "MARK m1",
        "POP train/step/forward\xc3\xa9\xe4\xb8\xad",
        "POP train/step",
        "POP train",
        "PUSH ex_ascii",
        "POP ex_ascii",
        "PUSH ex_wide",
        "POP ex_wide",
        "PUSH reg_name",
        "POP reg_name",
        "PUSH reg_wide",
        "POP reg_wide",
        "PUSH first",
        "POP first",
        "PUSH secnd",
        "POP secnd",
        "PUSH first",
        "POP first",
        "PUSH fir",
        "POP fir",
        "PUSH loop",
        "POP loop",
        "PUSH loop",
        "POP loop",
        "PUSH loop",
        "POP loop",
        "START startA",
        "START startW",
        "START startEx",
        "END",
        "END",
        "END",
        "MARK mw",
        "MARK mex",
    };
    size_t nw = sizeof want / sizeof want[0];
    expect_events(&t, &l, 0, want, nw);
    CHECK_EQ(l.n, nw + 2);
    CHECK_EQ(l.e[0]->u.rev.range, cur_train);
    CHECK_EQ(l.e[2]->u.rev.range, cur_fwd);
    CHECK_EQ(l.e[15]->u.rev.range, l.e[19]->u.rev.range); /* "first" twice: one node */
    CHECK_EQ(l.e[23]->u.rev.range, l.e[27]->u.rev.range);
    CHECK_EQ(l.e[29]->u.rev.handle, id1);
    CHECK_EQ(l.e[30]->u.rev.handle, id2);
    CHECK_EQ(l.e[31]->u.rev.handle, id3);
    CHECK_EQ(l.e[32]->u.rev.handle, id2);
    CHECK_EQ(l.e[33]->u.rev.handle, id1);
    CHECK_EQ(l.e[34]->u.rev.handle, id3);
    /* every node of the default domain has domain 0 */
    CHECK_EQ(ntrace_range(&t, cur_fwd)->domain, 0);
    /* the long name: cut to the longest string a trace may hold */
    const gmp_rec *bp = l.e[nw];
    CHECK_EQ(bp->type, GMP_REC_RANGE_PUSH);
    CHECK_EQ(strlen(ntrace_path(&t, bp->u.rev.range)), GMP_MAX_STRING_BYTES);
    CHECK_EQ(l.e[nw + 1]->type, GMP_REC_RANGE_POP);
    const gmp_rec_thread *th = find_thread(&t, tid);
    CHECK(th != NULL);
    CHECK_EQ(th->name.len, 11);
    CHECK(memcmp(th->name.ptr, "main-thread", 11) == 0);
    th = find_thread(&t, tid + 100000);
    CHECK(th != NULL);
    CHECK_EQ(th->name.len, 7);
    CHECK(memcmp(th->name.ptr, "other\xc3\xa9", 7) == 0);
    CHECK_EQ(shim_count("gmp_nvtx_shim_inject_calls"), 1);
    free(l.e);
    ntrace_free(&t);
}

/* ---- threads: 8 threads x nested ranges; a range started on one thread, ended on another ---- */

#define NTHREADS 8
#define NITER 2000

typedef struct worker_arg {
    int k;
    uint32_t tid;
    nvtxRangeId_t cross;
    uint32_t cur_inner; /* current range after the three pushes of the first iteration */
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    a->tid = my_tid();
    char name[32];
    for (int i = 0; i < NITER; i++) {
        snprintf(name, sizeof name, "T%d", a->k);
        CHECK_EQ(nvtxRangePushA(name), 0);
        CHECK_EQ(nvtxRangePushA("outer"), 1);
        CHECK_EQ(nvtxRangePushW(L"inner"), 2);
        if (i == 0)
            a->cur_inner = current_range();
        CHECK_EQ(nvtxRangePop(), 2);
        CHECK_EQ(nvtxRangePop(), 1);
        CHECK_EQ(nvtxRangePop(), 0);
    }
    nvtxRangeEnd(a->cross);
    return NULL;
}

static void scenario_threads(void)
{
    setup(1);
    uint32_t tid = my_tid();
    worker_arg args[NTHREADS];
    pthread_t th[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) {
        args[k].k = k;
        args[k].cross = nvtxRangeStartA("cross");
        CHECK(args[k].cross != 0);
    }
    for (int k = 0; k < NTHREADS; k++)
        CHECK(pthread_create(&th[k], NULL, worker, &args[k]) == 0);
    for (int k = 0; k < NTHREADS; k++)
        pthread_join(th[k], NULL);
    ntrace t;
    finish_and_load(&t);
    evlist m = thread_events(&t, tid);
    CHECK_EQ(m.n, NTHREADS);
    for (int k = 0; k < NTHREADS; k++) {
        CHECK_STR(describe(&t, m.e[k]), "START cross");
        CHECK_EQ(m.e[k]->u.rev.handle, args[k].cross);
    }
    uint64_t total = NTHREADS;
    for (int k = 0; k < NTHREADS; k++) {
        evlist l = thread_events(&t, args[k].tid);
        CHECK_EQ(l.n, NITER * 6 + 1);
        char p1[32], p2[40], p3[48];
        snprintf(p1, sizeof p1, "T%d", k);
        snprintf(p2, sizeof p2, "T%d/outer", k);
        snprintf(p3, sizeof p3, "T%d/outer/inner", k);
        char w[6][64];
        snprintf(w[0], 64, "PUSH %s", p1);
        snprintf(w[1], 64, "PUSH %s", p2);
        snprintf(w[2], 64, "PUSH %s", p3);
        snprintf(w[3], 64, "POP %s", p3);
        snprintf(w[4], 64, "POP %s", p2);
        snprintf(w[5], 64, "POP %s", p1);
        const char *want[6] = {w[0], w[1], w[2], w[3], w[4], w[5]};
        for (int i = 0; i < NITER; i++) {
            /* cheap check on every iteration (same ids), full text on a few */
            if (i < 3 || i == NITER - 1) {
                expect_events(&t, &l, (size_t)i * 6, want, 6);
            } else {
                for (int j = 0; j < 6; j++) {
                    CHECK_EQ(l.e[i * 6 + j]->type, l.e[j]->type);
                    CHECK_EQ(l.e[i * 6 + j]->u.rev.range, l.e[j]->u.rev.range);
                }
            }
        }
        CHECK_EQ(l.e[2]->u.rev.range, args[k].cur_inner);
        const gmp_rec *end = l.e[l.n - 1];
        CHECK_EQ(end->type, GMP_REC_RANGE_END);
        CHECK_EQ(end->u.rev.handle, args[k].cross);
        total += l.n;
        free(l.e);
    }
    CHECK_EQ(t.end.events, total);
    CHECK_EQ(t.end.lost, 0);
    free(m.e);
    ntrace_free(&t);
}

/* ---- domains: one range path per thread across domains; pops close their own domain's range;
 * push/pop return the level within the range's own domain (nvtx3/nvToolsExt.h, CUDA 13:
 * nvtxDomainRangePushEx "\return The 0 based level of range being started. This value is scoped
 * to the domain." (line 939); nvtxRangePushEx "This level is per domain." (line 978);
 * nvtxDomainRangePop "\return The level of the range being ended." (line 1042)). The values
 * below differ from one depth shared by all domains at every push or pop that follows another
 * domain's open range. ---- */

static void scenario_domains(void)
{
    setup(1);
    uint32_t tid = my_tid();
    nvtxDomainHandle_t d = nvtxDomainCreateA("dom");
    CHECK(d != NULL);
    CHECK(nvtxDomainCreateA("dom") == d);
    nvtxDomainHandle_t dw = nvtxDomainCreateW(L"wdom");
    CHECK(dw != NULL && dw != d);

    CHECK_EQ(nvtxRangePushA("train"), 0);
    nvtxEventAttributes_t a = attr_ascii("step");
    CHECK_EQ(nvtxDomainRangePushEx(d, &a), 0); /* dom's first level (shared depth: 1) */
    CHECK_EQ(nvtxRangePushA("forward"), 1);    /* the default domain's second (shared: 2) */
    uint32_t cur3 = current_range();
    CHECK_EQ(nvtxDomainRangePop(d), 0); /* closes "step" under "forward", dom's level 0 */
    uint32_t cur2 = current_range();
    CHECK(cur2 != cur3 && cur2 != 0);
    CHECK_EQ(nvtxRangePop(), 1);
    CHECK_EQ(nvtxRangePop(), 0);
    CHECK_EQ(nvtxDomainRangePop(d), -1);
    CHECK_EQ(nvtxRangePop(), -1);

    a = attr_ascii("dmark");
    nvtxDomainMarkEx(d, &a);
    a = attr_ascii("wstart");
    nvtxRangeId_t id = nvtxDomainRangeStartEx(dw, &a);
    CHECK(id != 0);
    nvtxDomainRangeEnd(dw, id);

    nvtxStringHandle_t rs = nvtxDomainRegisterStringA(d, "dreg");
    CHECK(rs != NULL);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = rs;
    CHECK_EQ(nvtxDomainRangePushEx(d, &a), 0);
    a = attr_ascii("inner");
    CHECK_EQ(nvtxRangePushEx(&a), 0); /* the default domain has nothing open (shared: 1) */
    a = attr_ascii("dinner");
    CHECK_EQ(nvtxDomainRangePushEx(d, &a), 1); /* dom's second level (shared: 2) */
    CHECK_EQ(nvtxDomainRangePop(d), 1);
    CHECK_EQ(nvtxRangePop(), 0);
    CHECK_EQ(nvtxDomainRangePop(d), 0);

    nvtxDomainNameCategoryA(d, 1, "c");
    nvtxDomainNameCategoryW(d, 2, L"c2");
    nvtxResourceAttributes_t ra;
    memset(&ra, 0, sizeof ra);
    nvtxResourceHandle_t res = nvtxDomainResourceCreate(d, &ra);
    nvtxDomainResourceDestroy(res);
    nvtxDomainDestroy(d);
    a = attr_ascii("after");
    nvtxDomainMarkEx(d, &a); /* a destroyed domain stays harmless */

    nvtxDomainHandle_t bogus = (nvtxDomainHandle_t)(uintptr_t)0x1234;
    a = attr_ascii("bog");
    CHECK_EQ(nvtxDomainRangePushEx(bogus, &a), 0);
    CHECK_EQ(nvtxRangePop(), 0);
    nvtxInitialize(NULL);

    ntrace t;
    finish_and_load(&t);
    evlist l = thread_events(&t, tid);
    static const char *const want[] = {
        "PUSH train",
        "PUSH train/dom:step",
        "PUSH train/dom:step/forward",
        "POP train/dom:step",
        "POP train/forward",
        "POP train",
        "MARK dom:dmark",
        "START wdom:wstart",
        "END",
        "PUSH dom:dreg",
        "PUSH dom:dreg/inner",
        "PUSH dom:dreg/inner/dom:dinner",
        "POP dom:dreg/inner/dom:dinner",
        "POP dom:dreg/inner",
        "POP dom:dreg",
        "MARK dom:after",
        "PUSH bog",
        "POP bog",
    };
    size_t nw = sizeof want / sizeof want[0];
    expect_events(&t, &l, 0, want, nw);
    CHECK_EQ(l.n, nw);
    CHECK_EQ(l.e[2]->u.rev.range, cur3);
    CHECK_EQ(l.e[4]->u.rev.range, cur2);
    CHECK_EQ(l.e[8]->u.rev.handle, id);
    const gmp_rec_range *step = ntrace_range(&t, l.e[1]->u.rev.range);
    CHECK_STR(ntrace_str(&t, step->domain), "dom");
    CHECK_STR(ntrace_str(&t, step->name), "step");
    free(l.e);
    ntrace_free(&t);
}

/* ---- mem: heaps and regions of the memory extension ---- */

static const gmp_rec *find_mem(evlist *l, uint32_t type, uint64_t addr, size_t from)
{
    for (size_t i = from; i < l->n; i++) {
        if (l->e[i]->type == type && l->e[i]->u.mem.address == addr)
            return l->e[i];
    }
    return NULL;
}

static void check_mem(ntrace *t, const gmp_rec *r, uint32_t type, uint64_t addr, uint64_t size,
                      uint64_t heap, uint32_t flags, const char *api, const char *range)
{
    CHECK(r != NULL);
    CHECK_EQ(r->type, type);
    CHECK_EQ(r->u.mem.device, -1);
    CHECK_EQ(r->u.mem.kind, GMP_MEM_NVTX_REGION);
    CHECK_EQ(r->u.mem.flags, flags);
    CHECK_STR(ntrace_str(t, r->u.mem.api), api);
    CHECK_EQ(r->u.mem.address, addr);
    CHECK_EQ(r->u.mem.size, size);
    CHECK_EQ(r->u.mem.handle, heap);
    CHECK_STR(ntrace_path(t, r->u.mem.range), range);
    CHECK_EQ(r->u.mem.stream, 0);
    CHECK_EQ(r->u.mem.result, 0);
}

static void scenario_mem(void)
{
    setup(1);
    uint32_t tid = my_tid();
    static char pool[4096];
    static char other[64];
    uint64_t P = (uint64_t)(uintptr_t)pool, O = (uint64_t)(uintptr_t)other;
    nvtxDomainHandle_t d = nvtxDomainCreateA("alloc");

    nvtxMemVirtualRangeDesc_t hd = {sizeof pool, pool};
    nvtxMemHeapDesc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = sizeof desc;
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof hd;
    desc.typeSpecificDesc = &hd;
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(d, &desc);
    CHECK((uintptr_t)heap == (uintptr_t)pool); /* a virtual-memory heap is named by its address */

    nvtxRangePushA("model");
    nvtxRangePushA("layer1");
    nvtxMemVirtualRangeDesc_t regs[3] = {{100, pool}, {200, pool + 256}, {300, pool + 1024}};
    nvtxMemRegionHandle_t out[3] = {0};
    nvtxMemRegionsRegisterBatch_t rb;
    memset(&rb, 0, sizeof rb);
    rb.extCompatID = NVTX_EXT_COMPATID_MEM;
    rb.structSize = sizeof rb;
    rb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    rb.heap = heap;
    rb.regionCount = 3;
    rb.regionDescElementSize = sizeof regs[0];
    rb.regionDescElements = regs;
    rb.regionHandleElementsOut = out;
    nvtxMemRegionsRegister(d, &rb);
    CHECK((uintptr_t)out[1] == (uintptr_t)(pool + 256));
    nvtxRangePop();

    /* a region of the process-wide heap */
    nvtxMemVirtualRangeDesc_t pr = {64, other};
    rb.heap = NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE;
    rb.regionCount = 1;
    rb.regionDescElements = &pr;
    rb.regionHandleElementsOut = NULL;
    nvtxMemRegionsRegister(d, &rb);

    /* unregister one region by handle */
    nvtxMemRegionRef_t ref;
    ref.handle = out[1];
    nvtxMemRegionsUnregisterBatch_t ub;
    memset(&ub, 0, sizeof ub);
    ub.extCompatID = NVTX_EXT_COMPATID_MEM;
    ub.structSize = sizeof ub;
    ub.refType = NVTX_MEM_REGION_REF_TYPE_HANDLE;
    ub.refCount = 1;
    ub.refElementSize = sizeof ref;
    ub.refElements = &ref;
    nvtxMemRegionsUnregister(d, &ub);

    /* resize the first */
    nvtxMemVirtualRangeDesc_t rs = {150, pool};
    nvtxMemRegionsResizeBatch_t zb;
    memset(&zb, 0, sizeof zb);
    zb.extCompatID = NVTX_EXT_COMPATID_MEM;
    zb.structSize = sizeof zb;
    zb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    zb.regionDescCount = 1;
    zb.regionDescElementSize = sizeof rs;
    zb.regionDescElements = &rs;
    nvtxMemRegionsResize(d, &zb);

    /* names and permissions: accepted, not recorded */
    nvtxMemRegionNameDesc_t nd;
    memset(&nd, 0, sizeof nd);
    nd.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    nd.nameType = NVTX_MESSAGE_TYPE_ASCII;
    nd.region.pointer = pool;
    nd.name.ascii = "weights";
    nvtxMemRegionsNameBatch_t nb;
    memset(&nb, 0, sizeof nb);
    nb.extCompatID = NVTX_EXT_COMPATID_MEM;
    nb.structSize = sizeof nb;
    nb.regionCount = 1;
    nb.regionElementSize = sizeof nd;
    nb.regionElements = &nd;
    nvtxMemRegionsName(d, &nb);
    nvtxMemPermissionsHandle_t perm = nvtxMemPermissionsCreate(d, 0);
    CHECK(perm != NULL);
    nvtxMemPermissionsBind(d, perm, NVTX_MEM_PERMISSIONS_BIND_SCOPE_CPU_THREAD, 0);
    nvtxMemPermissionsUnbind(d, NVTX_MEM_PERMISSIONS_BIND_SCOPE_CPU_THREAD);
    nvtxMemPermissionsReset(d, perm);
    nvtxMemPermissionsDestroy(d, perm);

    nvtxRangePop();
    nvtxMemHeapUnregister(d, heap);                              /* frees pool+0 and pool+1024 */
    nvtxMemHeapReset(d, NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE);      /* frees other */
    nvtxMemHeapUnregister(d, NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE); /* not allowed: ignored */

    /* a heap without an address gets a handle of ours */
    desc.typeSpecificDesc = NULL;
    desc.typeSpecificDescSize = 0;
    nvtxMemHeapHandle_t h2 = nvtxMemHeapRegister(d, &desc);
    nvtxMemHeapHandle_t h3 = nvtxMemHeapRegister(d, &desc);
    CHECK(h2 != NULL && h3 != NULL && h2 != h3);
    nvtxMemHeapUnregister(d, h2);

    ntrace t;
    finish_and_load(&t);
    evlist l = thread_events(&t, tid);
    size_t nalloc = 0, nfree = 0;
    for (size_t i = 0; i < l.n; i++) {
        nalloc += l.e[i]->type == GMP_REC_ALLOC;
        nfree += l.e[i]->type == GMP_REC_FREE;
    }
    CHECK_EQ(nalloc, 5);
    CHECK_EQ(nfree, 5);
    CHECK_EQ(t.end.allocs, 5);
    CHECK_EQ(t.end.frees, 5);
    const char *reg = "nvtxMemRegionsRegister";
    check_mem(&t, find_mem(&l, GMP_REC_ALLOC, P, 0), GMP_REC_ALLOC, P, 100, P, 0, reg,
              "model/layer1");
    check_mem(&t, find_mem(&l, GMP_REC_ALLOC, P + 256, 0), GMP_REC_ALLOC, P + 256, 200, P, 0, reg,
              "model/layer1");
    check_mem(&t, find_mem(&l, GMP_REC_ALLOC, P + 1024, 0), GMP_REC_ALLOC, P + 1024, 300, P, 0, reg,
              "model/layer1");
    check_mem(&t, find_mem(&l, GMP_REC_ALLOC, O, 0), GMP_REC_ALLOC, O, 64, 0, 0, reg, "model");
    check_mem(&t, find_mem(&l, GMP_REC_FREE, P + 256, 0), GMP_REC_FREE, P + 256, 200, P, 0,
              "nvtxMemRegionsUnregister", "model");
    const gmp_rec *f0 = find_mem(&l, GMP_REC_FREE, P, 0);
    check_mem(&t, f0, GMP_REC_FREE, P, 100, P, 0, "nvtxMemRegionsResize", "model");
    const gmp_rec *a0 = NULL;
    for (size_t i = 0; i < l.n; i++) {
        if (l.e[i] == f0 && i + 1 < l.n)
            a0 = l.e[i + 1];
    }
    check_mem(&t, a0, GMP_REC_ALLOC, P, 150, P, 0, "nvtxMemRegionsResize", "model");
    size_t after = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.e[i] == a0)
            after = i + 1;
    }
    check_mem(&t, find_mem(&l, GMP_REC_FREE, P, after), GMP_REC_FREE, P, 150, P, GMP_MEMF_IMPLICIT,
              "nvtxMemHeapUnregister", "");
    check_mem(&t, find_mem(&l, GMP_REC_FREE, P + 1024, 0), GMP_REC_FREE, P + 1024, 300, P,
              GMP_MEMF_IMPLICIT, "nvtxMemHeapUnregister", "");
    check_mem(&t, find_mem(&l, GMP_REC_FREE, O, 0), GMP_REC_FREE, O, 64, 0, GMP_MEMF_IMPLICIT,
              "nvtxMemHeapReset", "");
    CHECK_EQ(shim_count("gmp_nvtx_shim_ext_calls"), 1);
    free(l.e);
    ntrace_free(&t);
}

/* ---- robust: bad arguments, unbalanced pops, very deep nesting ---- */

static void scenario_robust(void)
{
    setup(1);
    uint32_t tid = my_tid();
    CHECK_EQ(nvtxRangePop(), -1);
    CHECK_EQ(nvtxRangePushA(NULL), 0);
    CHECK_EQ(nvtxRangePop(), 0);
    nvtxRangePushW(NULL);
    nvtxRangePop();
    nvtxRangePushEx(NULL);
    nvtxRangePop();
    nvtxEventAttributes_t a = attr_ascii("small");
    a.size = 8; /* too small to hold a message */
    nvtxRangePushEx(&a);
    nvtxRangePop();
    a = attr_ascii("nover");
    a.version = 0;
    nvtxRangePushEx(&a);
    nvtxRangePop();
    a = attr_ascii("badtype");
    a.messageType = 99;
    nvtxRangePushEx(&a);
    nvtxRangePop();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = NULL;
    nvtxRangePushEx(&a);
    nvtxRangePop();
    a.message.registered = (nvtxStringHandle_t)(uintptr_t)0x5678;
    nvtxRangePushEx(&a);
    nvtxRangePop();
    nvtxMarkA(NULL);
    nvtxMarkW(NULL);
    nvtxMarkEx(NULL);
    nvtxRangeId_t id = nvtxRangeStartA(NULL);
    CHECK(id != 0);
    nvtxRangeEnd(0);
    nvtxRangeEnd(id);
    CHECK(nvtxDomainRegisterStringA(NULL, NULL) == NULL);
    CHECK(nvtxDomainRegisterStringW(NULL, NULL) == NULL);
    CHECK(nvtxDomainCreateA(NULL) == NULL);
    CHECK(nvtxDomainCreateW(NULL) == NULL);
    nvtxDomainDestroy(NULL);
    nvtxDomainDestroy((nvtxDomainHandle_t)(uintptr_t)0x999);
    nvtxNameOsThreadA(1, NULL);
    nvtxNameOsThreadW(1, NULL);
    nvtxNameCategoryA(1, NULL);
    nvtxDomainMarkEx((nvtxDomainHandle_t)(uintptr_t)0x77, NULL);
    CHECK_EQ(nvtxDomainRangePop((nvtxDomainHandle_t)(uintptr_t)0x77), -1);

    /* memory extension with bad arguments: nothing recorded, nothing crashes */
    nvtxMemRegionsRegister(NULL, NULL);
    nvtxMemRegionsResize(NULL, NULL);
    nvtxMemRegionsUnregister(NULL, NULL);
    nvtxMemRegionsName(NULL, NULL);
    nvtxMemPermissionsAssign(NULL, NULL);
    CHECK(nvtxMemHeapRegister(NULL, NULL) != NULL);
    nvtxMemHeapUnregister(NULL, NULL);
    nvtxMemHeapUnregister(NULL, (nvtxMemHeapHandle_t)(uintptr_t)0x42);
    nvtxMemHeapReset(NULL, (nvtxMemHeapHandle_t)(uintptr_t)0x42);
    static char pool[64];
    nvtxMemVirtualRangeDesc_t r = {64, pool};
    nvtxMemRegionsRegisterBatch_t rb;
    memset(&rb, 0, sizeof rb);
    rb.extCompatID = 0x0999; /* another major revision */
    rb.structSize = sizeof rb;
    rb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    rb.regionCount = 1;
    rb.regionDescElementSize = sizeof r;
    rb.regionDescElements = &r;
    nvtxMemRegionsRegister(NULL, &rb);
    rb.extCompatID = NVTX_EXT_COMPATID_MEM;
    rb.structSize = 4;
    nvtxMemRegionsRegister(NULL, &rb);
    rb.structSize = sizeof rb;
    rb.regionDescElementSize = 1;
    nvtxMemRegionsRegister(NULL, &rb);
    rb.regionDescElementSize = sizeof r;
    rb.regionType = 77;
    nvtxMemRegionsRegister(NULL, &rb);

    /* deeper than the bound: counted, balanced, no events past it */
    for (int i = 0; i < 300; i++)
        CHECK_EQ(nvtxRangePushA("deep"), i);
    uint32_t deepest = current_range();
    for (int i = 299; i >= 0; i--)
        CHECK_EQ(nvtxRangePop(), i);
    CHECK_EQ(current_range(), 0);
    CHECK_EQ(nvtxRangePop(), -1);

    ntrace t;
    finish_and_load(&t);
    evlist l = thread_events(&t, tid);
    static const char *const want[] = {
        "PUSH ", "POP ",  "PUSH ", "POP ",   "PUSH ", "POP ",  "PUSH ", "POP ",
        "PUSH ", "POP ",  "PUSH ", "POP ",   "PUSH ", "POP ",  "PUSH ", "POP ",
        "MARK ", "MARK ", "MARK ", "START ", "END",   "MARK ",
    };
    size_t nw = sizeof want / sizeof want[0];
    expect_events(&t, &l, 0, want, nw);
    CHECK_EQ(l.n, nw + 2 * GMP_NVTX_MAX_DEPTH);
    for (size_t i = 0; i < GMP_NVTX_MAX_DEPTH; i++) {
        CHECK_EQ(l.e[nw + i]->type, GMP_REC_RANGE_PUSH);
        CHECK_EQ(l.e[nw + GMP_NVTX_MAX_DEPTH + i]->type, GMP_REC_RANGE_POP);
        CHECK_EQ(l.e[nw + GMP_NVTX_MAX_DEPTH + i]->u.rev.range,
                 l.e[nw + GMP_NVTX_MAX_DEPTH - 1 - i]->u.rev.range);
    }
    CHECK_EQ(l.e[nw + GMP_NVTX_MAX_DEPTH - 1]->u.rev.range, deepest);
    size_t depth = 0;
    for (const gmp_rec_range *g = ntrace_range(&t, deepest); g; g = ntrace_range(&t, g->parent))
        depth++;
    CHECK_EQ(depth, GMP_NVTX_MAX_DEPTH);
    CHECK_EQ(t.end.allocs, 0);
    CHECK_EQ(t.end.frees, 0);
    free(l.e);
    ntrace_free(&t);
}

/* ---- two_loaders: two libraries with their own NVTX instances share one range stack ---- */

static void scenario_two_loaders(void)
{
    setup(1);
    uint32_t tid = my_tid();
    static char block[256];
    CHECK_EQ(nvtxRangePushA("main"), 0);
    CHECK_EQ(liba_push("a"), 1);
    CHECK_EQ(libb_push("b"), 2);
    liba_region_register(block, 128);
    libb_region_register(block + 128, 64);
    libb_region_unregister(block); /* registered through the other library */
    CHECK_EQ(libb_pop(), 2);
    CHECK_EQ(liba_pop(), 1);
    liba_region_unregister(block + 128);
    CHECK_EQ(nvtxRangePop(), 0);
    CHECK_EQ(shim_count("gmp_nvtx_shim_inject_calls"), 3); /* this program + two libraries */
    CHECK_EQ(shim_count("gmp_nvtx_shim_ext_calls"), 2);

    ntrace t;
    finish_and_load(&t);
    evlist l = thread_events(&t, tid);
    static const char *const want[] = {
        "PUSH main", "PUSH main/a",  "PUSH main/a/b", "ALLOC", "ALLOC",
        "FREE",      "POP main/a/b", "POP main/a",    "FREE",  "POP main",
    };
    size_t nw = sizeof want / sizeof want[0];
    expect_events(&t, &l, 0, want, nw);
    CHECK_EQ(l.n, nw);
    uint64_t B = (uint64_t)(uintptr_t)block;
    check_mem(&t, l.e[3], GMP_REC_ALLOC, B, 128, 0, 0, "nvtxMemRegionsRegister", "main/a/b");
    check_mem(&t, l.e[4], GMP_REC_ALLOC, B + 128, 64, 0, 0, "nvtxMemRegionsRegister", "main/a/b");
    check_mem(&t, l.e[5], GMP_REC_FREE, B, 128, 0, 0, "nvtxMemRegionsUnregister", "main/a/b");
    check_mem(&t, l.e[8], GMP_REC_FREE, B + 128, 64, 0, 0, "nvtxMemRegionsUnregister", "main");
    free(l.e);
    ntrace_free(&t);
}

/* ---- declined: the injection library is loaded but the collector is not initialized ---- */

static void scenario_declined(void)
{
    setup(0);
    CHECK_EQ(nvtxRangePushA("x"), NVTX_NO_PUSH_POP_TRACKING);
    CHECK_EQ(nvtxRangePop(), NVTX_NO_PUSH_POP_TRACKING);
    CHECK_EQ(liba_push("y"), NVTX_NO_PUSH_POP_TRACKING);
    liba_region_register(g_trace, 8);
    nvtxMarkA("m");
    CHECK(nvtxDomainCreateA("d") == NULL);
}

/* ---- flood: a name per push (PyTorch's emit_nvtx), then more distinct names than the cap ---- */

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* range nodes and strings defined in the trace (ntrace's arrays are indexed by id, with room) */
static size_t defined_ranges(ntrace *t)
{
    size_t n = 0;
    for (size_t i = 1; i < t->nranges; i++)
        n += t->ranges[i].id == i;
    return n;
}

static size_t defined_strings(ntrace *t)
{
    size_t n = 0;
    for (size_t i = 1; i < t->nstrs; i++)
        n += t->strs[i].ptr != NULL;
    return n;
}

static size_t count_ranges_named(ntrace *t, const char *name)
{
    size_t n = 0;
    for (size_t i = 1; i < t->nranges; i++)
        n += t->ranges[i].name && !strcmp(ntrace_str(t, t->ranges[i].name), name);
    return n;
}

/* N pushes named as torch.autograd.profiler.emit_nvtx() names them (getNvtxStr in
 * torch/csrc/profiler/util.cpp: "NAME, seq = N, op_id = M, sizes = [...]", unique per call) over
 * four operators, then USER distinct names of the program's own ("user i"), more than the 16384
 * distinct names a trace keeps. Prints the figure (trace size, peak RSS growth, range nodes and
 * strings defined), then checks that the trace stays bounded and says so once. */
static void scenario_flood(long n, long user)
{
    setup(1);
    static const char *const ops[] = {"aten::add", "aten::mm", "aten::relu", "aten::empty"};
    nvtxRangePushA("warm-up"); /* NVTX loads the injection library at its first call */
    nvtxRangePop();
    long rss0 = max_rss_kib();
    char name[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s, seq = %ld, op_id = %ld, sizes = [[%ld, 64], [64, 64]]",
                 ops[i % 4], i / 2, i + 1, 1 + i % 512);
        nvtxRangePushA(name);
        nvtxRangePop();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns =
        n ? ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n
          : 0;
    for (long i = 0; i < user; i++) {
        snprintf(name, sizeof name, "user %ld", i);
        nvtxRangePushA(name);
        nvtxRangePop();
    }
    long rss1 = max_rss_kib();
    void (*fin)(void) = (void (*)(void))shim_sym("gmp_nvtx_shim_finish");
    fin();
    struct stat st;
    CHECK(stat(g_trace, &st) == 0);
    ntrace t;
    ntrace_load(g_trace, &t);
    unlink(g_trace);
    printf("nvtx flood: %ld emit_nvtx pushes (%.0f ns per push and pop) + %ld distinct names: "
           "trace %lld bytes, peak RSS +%ld KiB, %zu range nodes, %zu strings\n",
           n, ns, user, (long long)st.st_size, rss1 - rss0, defined_ranges(&t),
           defined_strings(&t));
    CHECK(t.has_end);
    CHECK_EQ(t.lost, 0);
    /* bounded: the four operators, 16384 names in all, then "user #" */
    CHECK(defined_ranges(&t) <= 16384 + 8);
    CHECK(defined_strings(&t) <= 16384 + 64);
    /* and the process: 16,384 names at most (about 4.5 MiB here; without the bound, 100,000
       emit_nvtx pushes alone grew it by about 24 MiB); under AddressSanitizer every allocation
       carries redzones and freed memory sits in quarantine (12.1 MiB seen once), so the bound is
       twice as loose there, still below the unbounded growth of an ASan build */
#if defined(__SANITIZE_ADDRESS__)
    CHECK(rss1 - rss0 < 24 * 1024);
#else
    CHECK(rss1 - rss0 < 12 * 1024);
#endif
    if (n < 4 || user != 20000) { /* a figure for other counts: only the bounds checked */
        ntrace_free(&t);
        return;
    }
    CHECK_EQ(count_ranges_named(&t, "aten::mm"), 1);
    CHECK_EQ(count_ranges_named(&t, "aten::mm, seq = 0, op_id = 2, sizes = [[2, 64], [64, 64]]"),
             0);
    CHECK_EQ(count_ranges_named(&t, "user 0"), 1);
    CHECK_EQ(count_ranges_named(&t, "user #"), 1);
    /* the last push of each kind, as recorded */
    evlist l = thread_events(&t, my_tid());
    CHECK(l.n >= 2 * (size_t)(n + user));
    size_t last = l.n;
    while (last > 0 && l.e[last - 1]->type != GMP_REC_RANGE_PUSH)
        last--;
    CHECK(last > 0);
    CHECK_STR(describe(&t, l.e[last - 1]), "PUSH user #");
    CHECK_STR(describe(&t, l.e[2 + 2 * (size_t)n - 2]), "PUSH aten::empty");
    /* one notice, with the counts: 16384 names = 1 warm-up + 4 operators + 16379 user names */
    size_t notices = 0;
    char want[512];
    snprintf(want, sizeof want,
             "NVTX range names bounded: %ld names in PyTorch's emit_nvtx form (\"NAME, seq = N, "
             "op_id = M, sizes = [...]\") recorded as their operator's NAME; past 16384 distinct "
             "names, %ld ranges with a new name recorded with its digits as '#' and 0 as \"(other "
             "NVTX names)\"",
             n, user - (16384 - 5));
    for (size_t i = 0; i < t.n; i++)
        if (t.recs[i].type == GMP_REC_NOTICE) {
            notices++;
            const gmp_rec_notice *nt = &t.recs[i].u.notice;
            CHECK_EQ(nt->severity, GMP_NOTICE_WARNING);
            if (nt->message.len != strlen(want) || memcmp(nt->message.ptr, want, strlen(want))) {
                fprintf(stderr, "notice \"%.*s\"\nwant   \"%s\"\n", (int)nt->message.len,
                        nt->message.ptr, want);
                exit(1);
            }
        }
    CHECK_EQ(notices, 1);
    free(l.e);
    ntrace_free(&t);
}

int main(int argc, char **argv)
{
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "flood")) {
        scenario_flood(atol(argv[2]), argc == 4 ? atol(argv[3]) : 20000);
        fprintf(stderr, "nvtx flood: ok\n");
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_nvtx SCENARIO\n");
        return 2;
    }
    const char *s = argv[1];
    if (!strcmp(s, "basic"))
        scenario_basic();
    else if (!strcmp(s, "threads"))
        scenario_threads();
    else if (!strcmp(s, "domains"))
        scenario_domains();
    else if (!strcmp(s, "mem"))
        scenario_mem();
    else if (!strcmp(s, "robust"))
        scenario_robust();
    else if (!strcmp(s, "two_loaders"))
        scenario_two_loaders();
    else if (!strcmp(s, "declined"))
        scenario_declined();
    else if (!strcmp(s, "flood"))
        scenario_flood(100000, 20000);
    else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    fprintf(stderr, "nvtx %s: ok\n", s);
    return 0;
}
