/* gmp_stack: native call stacks and the module map (see gmp_stack.h). */
#include "gmp_stack.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAW_SLACK 48 /* frames beyond depth captured so that dropped CUDA frames do not shorten */
#define RAW_MAX (GMP_STACK_MAX_DEPTH + RAW_SLACK)
#define TC_SLOTS 256 /* per-thread whole-stack cache (direct mapped) */
#define MAX_EXCLUDED 64

typedef int (*backtrace_fn)(void **, int);

typedef struct module {
    uint64_t lo, hi, base;
    uint32_t id;
    int excluded;
    char *path;
    uint8_t build_id[64];
    uint32_t build_id_len;
} module;

typedef struct modtab {
    module *m;
    size_t n, cap;
} modtab;

static const gmp_sink *S;
static gmp_stack_opts O;
static atomic_int active;
static backtrace_fn unwind_fn;
static void *unwind_lib;
static atomic_uint_fast64_t generation;

static pthread_mutex_t modlock = PTHREAD_MUTEX_INITIALIZER;
static modtab mods;                             /* sorted by lo; modlock */
static uint32_t next_module_id;                 /* modlock */
static unsigned long long last_adds, last_subs; /* modlock */
static struct {
    uint64_t lo, hi;
} excluded[MAX_EXCLUDED];
static atomic_uint n_excluded;

static gmp_stack_hook hook_fn;
static void *hook_ctx;

typedef struct tc_entry {
    uint64_t hash;
    uint64_t *pcs;
    uint32_t id, n, cap;
} tc_entry;

static pthread_key_t tc_key;
static int tc_key_ok;

static _Thread_local struct {
    tc_entry *e;
    uint64_t gen;
    uintptr_t stack_lo, stack_hi;
    int bounds;          /* 0 unknown, 1 known, -1 cannot be had */
    const uint64_t *raw; /* the raw frames of the call the hook runs in (gmp_stack_refresh) */
    unsigned nraw;
} tl;

/* ---------- module map ---------- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int excluded_name(const char *path)
{
    static const char *const names[] = {"libcuda.so",    "libcudart.so",           "libcupti.so",
                                        "libunwind.so.", "libgpumemprof_agent.so", NULL};
    const char *b = base_name(path);
    for (int i = 0; names[i]; i++)
        if (!strncmp(b, names[i], strlen(names[i])))
            return 1;
    return 0;
}

static void read_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) * ph, module *m)
{
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_memsz;
    size_t align = ph->p_align == 8 ? 8 : 4;
    while (left >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
        size_t nsz = (nh->n_namesz + align - 1) & ~(align - 1);
        size_t dsz = (nh->n_descsz + align - 1) & ~(align - 1);
        size_t total = sizeof *nh + nsz + dsz;
        if (total > left || nsz > left || dsz > left)
            return;
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
            memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz <= sizeof m->build_id) {
            memcpy(m->build_id, p + sizeof *nh + nsz, nh->n_descsz);
            m->build_id_len = nh->n_descsz;
            return;
        }
        p += total;
        left -= total;
    }
}

typedef struct scan_ctx {
    modtab t;
    int failed, first;
    unsigned long long adds, subs;
    int counters_only;
} scan_ctx;

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    scan_ctx *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
    }
    if (c->counters_only)
        return 1;
    int first = c->first;
    c->first = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;
        if (a < lo)
            lo = a;
        if (e > hi)
            hi = e;
    }
    if (hi <= lo)
        return 0;
    if (c->t.n == c->t.cap) {
        size_t nc = c->t.cap ? c->t.cap * 2 : 64;
        module *nm = realloc(c->t.m, nc * sizeof *nm);
        if (!nm) {
            c->failed = 1;
            return 1;
        }
        c->t.m = nm;
        c->t.cap = nc;
    }
    module *m = &c->t.m[c->t.n];
    memset(m, 0, sizeof *m);
    m->lo = lo;
    m->hi = hi;
    m->base = info->dlpi_addr;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    char exe[4096];
    if (!*name && first) {
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k > 0) {
            exe[k] = 0;
            name = exe;
        }
    }
    m->path = strdup(name);
    if (!m->path) {
        c->failed = 1;
        return 1;
    }
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE && !m->build_id_len)
            read_build_id(info, &info->dlpi_phdr[i], m);
    /* the agent itself (when it is a shared object) and the CUDA libraries */
    uintptr_t self = (uintptr_t)&scan_cb;
    m->excluded = excluded_name(m->path) || (*info->dlpi_name && self >= lo && self < hi);
    c->t.n++;
    return 0;
}

static int mod_cmp(const void *a, const void *b)
{
    const module *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void modtab_free(modtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->m[i].path);
    free(t->m);
    memset(t, 0, sizeof *t);
}

static void emit_module(const module *m)
{
    gmp_rec r = {.type = GMP_REC_MODULE};
    r.u.module.id = m->id;
    r.u.module.path = (gmp_str){m->path, (uint32_t)strnlen(m->path, GMP_MAX_STRING_BYTES - 1)};
    r.u.module.base = m->base;
    r.u.module.lo = m->lo;
    r.u.module.size = m->hi - m->lo;
    r.u.module.build_id = (gmp_str){(const char *)m->build_id, m->build_id_len};
    gmp_writer_define(S->w, &r);
}

/* Reads the module map; records the objects not seen before. modlock held. */
static void rescan_locked(void)
{
    scan_ctx c = {.first = 1};
    dl_iterate_phdr(scan_cb, &c);
    if (c.failed) {
        modtab_free(&c.t);
        return;
    }
    qsort(c.t.m, c.t.n, sizeof *c.t.m, mod_cmp);
    for (size_t i = 0; i < c.t.n; i++) {
        module *m = &c.t.m[i];
        for (size_t j = 0; j < mods.n; j++) {
            const module *o = &mods.m[j];
            if (o->lo == m->lo && o->hi == m->hi && o->base == m->base &&
                !strcmp(o->path, m->path)) {
                m->id = o->id;
                break;
            }
        }
        if (!m->id) {
            m->id = ++next_module_id;
            emit_module(m);
            unsigned ne = atomic_load_explicit(&n_excluded, memory_order_relaxed);
            if (m->excluded && ne < MAX_EXCLUDED) {
                excluded[ne].lo = m->lo;
                excluded[ne].hi = m->hi;
                atomic_store_explicit(&n_excluded, ne + 1, memory_order_release);
            }
        }
    }
    modtab_free(&mods);
    mods = c.t;
    last_adds = c.adds;
    last_subs = c.subs;
}

static int known_locked(uint64_t pc)
{
    size_t lo = 0, hi = mods.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (mods.m[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* lo: first module starting above pc; objects do not overlap */
    return lo > 0 && pc < mods.m[lo - 1].hi;
}

/* Makes sure the module map covers pcs when the process loaded something since the last scan. */
static void check_modules(const uint64_t *pcs, unsigned n)
{
    pthread_mutex_lock(&modlock);
    for (unsigned i = 0; i < n; i++) {
        if (known_locked(pcs[i]))
            continue;
        scan_ctx c = {.counters_only = 1};
        dl_iterate_phdr(scan_cb, &c);
        if (c.adds != last_adds || c.subs != last_subs)
            rescan_locked();
        break;
    }
    pthread_mutex_unlock(&modlock);
}

/* ---------- capture ---------- */

static int stack_bounds(void)
{
    if (tl.bounds)
        return tl.bounds > 0;
    pthread_attr_t a;
    void *addr;
    size_t size;
    tl.bounds = -1;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &addr, &size) == 0 && size) {
            tl.stack_lo = (uintptr_t)addr;
            tl.stack_hi = (uintptr_t)addr + size;
            tl.bounds = 1;
        }
        pthread_attr_destroy(&a);
    }
    return tl.bounds > 0;
}

/* Frame-pointer walk: only reads words inside the thread's stack, aligned, strictly outwards. */
static __attribute__((noinline)) int fp_walk(void **buf, int max)
{
    if (!stack_bounds())
        return 0;
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    int n = 0;
    while (n < max) {
        if (fp < tl.stack_lo || fp > tl.stack_hi - 2 * sizeof(uintptr_t) ||
            (fp & (sizeof(uintptr_t) - 1)))
            break;
        const uintptr_t *f = (const uintptr_t *)fp;
        uintptr_t next = f[0], ra = f[1];
        if (ra < 4096)
            break;
        buf[n++] = (void *)ra;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

/* Captures raw frames and drops those up to the caller of the public entry point (ra: the return
 * address into that caller). Returns the number of frames in out, innermost first. */
static __attribute__((noinline)) unsigned capture_raw(uint64_t *out, unsigned max, uintptr_t ra)
{
    void *buf[RAW_MAX + 8];
    int cap = (int)max + 8;
    int n = 0;
    backtrace_fn fn = unwind_fn;
    if (O.unwind == GMP_UNWIND_FP || !fn)
        n = fp_walk(buf, cap);
    else
        n = fn(buf, cap);
    __asm__ volatile("" ::: "memory"); /* no tail call: this frame must exist */
    if (n < 0)
        n = 0;
    int start = 0;
    for (int i = 0; i < n && i < 12; i++) {
        if ((uintptr_t)buf[i] == ra) {
            start = i;
            break;
        }
    }
    unsigned k = 0;
    for (int i = start; i < n && k < max; i++)
        out[k++] = (uint64_t)(uintptr_t)buf[i];
    return k;
}

static int is_excluded(uint64_t pc, unsigned ne)
{
    for (unsigned j = 0; j < ne; j++)
        if (pc >= excluded[j].lo && pc < excluded[j].hi)
            return 1;
    return 0;
}

static unsigned filter(const uint64_t *raw, unsigned nraw, uint64_t *out, unsigned max)
{
    unsigned ne = atomic_load_explicit(&n_excluded, memory_order_acquire);
    unsigned n = 0;
    for (unsigned i = 0; i < nraw && n < max; i++)
        if (!is_excluded(raw[i], ne))
            out[n++] = raw[i];
    return n;
}

/* ---------- interning ---------- */

static uint64_t hash_pcs(const uint64_t *pcs, unsigned n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= pcs[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static void tc_free(void *p)
{
    tc_entry *e = p;
    if (!e)
        return;
    for (unsigned i = 0; i < TC_SLOTS; i++)
        free(e[i].pcs);
    free(e);
}

static tc_entry *tc_get(void)
{
    uint64_t g = atomic_load_explicit(&generation, memory_order_acquire);
    if (tl.e && tl.gen == g)
        return tl.e;
    if (!tl.e) {
        if (!tc_key_ok)
            return NULL;
        tl.e = calloc(TC_SLOTS, sizeof *tl.e);
        if (!tl.e)
            return NULL;
        pthread_setspecific(tc_key, tl.e);
    } else {
        for (unsigned i = 0; i < TC_SLOTS; i++)
            tl.e[i].id = 0; /* another trace: ids of the previous one mean nothing */
    }
    tl.gen = g;
    return tl.e;
}

static uint32_t intern_nodes(gmp_writer *w, uint32_t parent, const uint64_t *pcs, unsigned n)
{
    uint32_t id = parent;
    for (unsigned i = n; i-- > 0;) {
        id = gmp_writer_stack_native(w, id, pcs[i]);
        if (!id)
            return 0;
    }
    return id;
}

uint32_t gmp_stack_intern_native(gmp_writer *w, uint32_t parent, const uint64_t *pcs, unsigned n)
{
    if (!w || !n)
        return parent;
    if (parent || O.no_cache)
        return intern_nodes(w, parent, pcs, n);
    tc_entry *tc = tc_get();
    uint64_t h = hash_pcs(pcs, n);
    tc_entry *e = tc ? &tc[h & (TC_SLOTS - 1)] : NULL;
    if (e && e->id && e->hash == h && e->n == n && !memcmp(e->pcs, pcs, n * sizeof *pcs))
        return e->id;
    uint32_t id = intern_nodes(w, 0, pcs, n);
    if (id && e) {
        if (e->cap < n) {
            uint64_t *np = realloc(e->pcs, n * sizeof *np);
            if (!np) {
                e->id = 0;
                return id;
            }
            e->pcs = np;
            e->cap = n;
        }
        memcpy(e->pcs, pcs, n * sizeof *pcs);
        e->n = n;
        e->hash = h;
        e->id = id;
    }
    return id;
}

uint32_t gmp_stack_current(void)
{
    if (!atomic_load_explicit(&active, memory_order_acquire))
        return 0;
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    uint64_t raw[RAW_MAX], pcs[GMP_STACK_MAX_DEPTH];
    unsigned n = 0, nraw = 0;
    if (O.kinds & GMP_STACK_NATIVE) {
        nraw = capture_raw(raw, O.depth + RAW_SLACK, ra);
        n = filter(raw, nraw, pcs, O.depth);
    }
    gmp_writer *w = S->w;
    if ((O.kinds & GMP_STACK_PYTHON) && hook_fn) {
        tl.raw = raw;
        tl.nraw = nraw;
        uint32_t id = hook_fn(hook_ctx, w, O.kinds, pcs, n, O.depth);
        tl.raw = NULL;
        tl.nraw = 0;
        if (id)
            return id;
    }
    if (!n)
        return 0;
    if (!O.no_cache) {
        tc_entry *tc = tc_get();
        uint64_t h = hash_pcs(pcs, n);
        tc_entry *e = tc ? &tc[h & (TC_SLOTS - 1)] : NULL;
        if (e && e->id && e->hash == h && e->n == n && !memcmp(e->pcs, pcs, n * sizeof *pcs))
            return e->id;
    }
    /* a stack not seen on this thread: make sure its objects are in the module map first (a
     * library loaded since may also be a CUDA library whose frames must go) */
    unsigned before = atomic_load_explicit(&n_excluded, memory_order_acquire);
    check_modules(raw, nraw);
    if (atomic_load_explicit(&n_excluded, memory_order_acquire) != before)
        n = filter(raw, nraw, pcs, O.depth);
    return gmp_stack_intern_native(w, 0, pcs, n);
}

/* ---------- life cycle ---------- */

int gmp_stack_start(const gmp_sink *sink, const gmp_stack_opts *o, char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = 0;
    if (!sink || !sink->w || !o || !o->kinds)
        return -1;
    S = sink;
    O = *o;
    if (O.depth < 1)
        O.depth = 1;
    if (O.depth > GMP_STACK_MAX_DEPTH)
        O.depth = GMP_STACK_MAX_DEPTH;
    int rc = 0;
    if (!tc_key_ok && pthread_key_create(&tc_key, tc_free) == 0)
        tc_key_ok = 1;
    unwind_fn = NULL;
    if (O.unwind == GMP_UNWIND_LIBUNWIND) {
        if (!unwind_lib)
            unwind_lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
        void *f = unwind_lib ? dlsym(unwind_lib, "unw_backtrace") : NULL;
        if (f) {
            /* per-thread caches: no global lock on every unwind */
            int (*set_policy)(void *, int) =
                (int (*)(void *, int))dlsym(unwind_lib, "_ULx86_64_set_caching_policy");
            void **as = dlsym(unwind_lib, "_ULx86_64_local_addr_space");
            if (set_policy && as)
                set_policy(*as, 2 /* UNW_CACHE_PER_THREAD */);
            unwind_fn = (backtrace_fn)f;
        } else {
            O.unwind = GMP_UNWIND_FP;
            if (why)
                snprintf(why, whylen,
                         "libunwind.so.8 not found: native stacks use frame pointers (frames of "
                         "code built without them may be missing)");
            rc = 1;
        }
    } else if (O.unwind == GMP_UNWIND_GLIBC) {
        unwind_fn = backtrace;
        void *warm[4];
        backtrace(warm, 4); /* loads libgcc_s now, not inside the first allocation */
    }
    atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    pthread_mutex_lock(&modlock);
    atomic_store(&n_excluded, 0);
    modtab_free(&mods);
    next_module_id = 0;
    rescan_locked();
    pthread_mutex_unlock(&modlock);
    atomic_store_explicit(&active, 1, memory_order_release);
    return rc;
}

void gmp_stack_stop(void)
{
    atomic_store_explicit(&active, 0, memory_order_release);
}

void gmp_stack_set_hook(gmp_stack_hook fn, void *ctx)
{
    hook_ctx = ctx;
    hook_fn = fn;
}

unsigned gmp_stack_refresh(uint64_t *pcs, unsigned max)
{
    if (!tl.raw)
        return 0;
    if (max > GMP_STACK_MAX_DEPTH)
        max = GMP_STACK_MAX_DEPTH;
    check_modules(tl.raw, tl.nraw);
    return filter(tl.raw, tl.nraw, pcs, max);
}
