/* test_symbolize: the symbolizer on a list of known addresses of this very program (built -O1 -g):
 * return addresses in main and through an inlined function, with DWARF and with ELF symbols only;
 * an address in no module, a module whose file is missing, one whose build-id changed; the cache;
 * a symbol that looks like a C++ name and is not (kept as it is); symbolizers sharing a
 * gmp_sym_cache from four threads (each module read once, the same frames at another load address,
 * a module without build-id keyed by path). With GMP_TEST_CXX, the same in a
 * C++ library (sym_cxx.cc): names demangled and qualified, through DWARF and the symbol table. */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_symbolize.h"

static int failures;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static __attribute__((noinline)) uint64_t ret_addr(void)
{
    uint64_t a = (uint64_t)(uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return a;
}

static int inl_line, outer_line;

static inline __attribute__((always_inline)) uint64_t inlined_fn(void)
{
    /* clang-format off */
    uint64_t a = ret_addr(); inl_line = __LINE__;
    /* clang-format on */
    return a;
}

static __attribute__((noinline)) uint64_t outer_fn(void)
{
    /* clang-format off */
    uint64_t a = inlined_fn(); outer_line = __LINE__;
    /* clang-format on */
    __asm__ volatile("" ::: "memory");
    return a;
}

/* A C function whose symbol looks like a mangled C++ name but is not one. */
uint64_t not_mangled(void) __asm__("_Zbogus");
__attribute__((noinline)) uint64_t not_mangled(void)
{
    uint64_t a = ret_addr();
    __asm__ volatile("" ::: "memory");
    return a;
}

#ifdef GMP_TEST_CXX
uint64_t gmpt_forward_addr(void); /* sym_cxx.cc */
uint64_t gmpt_inlined_addr(void);
#endif

static char exe[4096];

/* The module record of a loaded object: the program (name NULL), or the first whose path contains
 * name. */
typedef struct want_module {
    const char *name;
    gmp_rec_module *m;
    uint8_t *bid; /* 64 bytes */
} want_module;

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    want_module *w = arg;
    if (w->name && !(info->dlpi_name && strstr(info->dlpi_name, w->name)))
        return 0;
    gmp_rec_module *m = w->m;
    if (w->name)
        m->path = (gmp_str){info->dlpi_name, (uint32_t)strlen(info->dlpi_name)};
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo)
                lo = a;
            if (a + ph->p_memsz > hi)
                hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE && !m->build_id.len) {
            const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
            const ElfW(Nhdr) *nh = (const void *)p;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_descsz <= 64) {
                memcpy(w->bid, p + sizeof *nh + ((nh->n_namesz + 3) & ~3u), nh->n_descsz);
                m->build_id = (gmp_str){(const char *)w->bid, nh->n_descsz};
            }
        }
    }
    m->base = info->dlpi_addr;
    m->lo = lo;
    m->size = hi - lo;
    return 1; /* the program is the first object */
}

static uint8_t bid[64];
static gmp_rec_module self;

static void expect_frame(const gmp_sym_frame *f, const char *fn, int line, int inlined)
{
    CHECK(f->status == GMP_SYM_OK, "status %s", gmp_sym_status_name(f->status));
    CHECK(f->function && !strcmp(f->function, fn), "function %s, want %s",
          f->function ? f->function : "(null)", fn);
    CHECK(f->line == (uint32_t)line, "%s: line %u, want %d", fn, f->line, line);
    CHECK(f->file && strstr(f->file, "test_symbolize.c"), "%s: file %s", fn,
          f->file ? f->file : "(null)");
    CHECK(f->inlined == inlined, "%s: inlined %d", fn, f->inlined);
}

/* Symbolizers that share a cache, one per thread, each with the program mapped at its own
 * address (as the ranks of a job are): each must resolve its own addresses to the same frames. */
typedef struct shared_job {
    gmp_sym_cache *cache;
    uint64_t a_main, a_inl, shift;
    int main_line;
    int ok;
} shared_job;

static void *shared_run(void *arg)
{
    shared_job *j = arg;
    gmp_sym_opts o = {NULL, 0, j->cache};
    gmp_symbolizer *s;
    if (gmp_symbolizer_new(&s, &o) != GMP_OK)
        return NULL;
    gmp_rec_module m = self;
    m.base += j->shift;
    m.lo += j->shift;
    gmp_symbolizer_add_module(s, &m);
    const gmp_sym_frame *f;
    j->ok = 1;
    for (int rep = 0; rep < 50; rep++) {
        size_t n = gmp_symbolize(s, j->a_main + j->shift, &f);
        if (n != 1 || !f[0].function || strcmp(f[0].function, "main") != 0 ||
            f[0].line != (uint32_t)j->main_line)
            j->ok = 0;
        n = gmp_symbolize(s, j->a_inl + j->shift, &f);
        if (n != 2 || !f[0].function || strcmp(f[0].function, "inlined_fn") != 0 ||
            !f[1].function || strcmp(f[1].function, "outer_fn") != 0)
            j->ok = 0;
        if (rep % 10 == 9) { /* a new symbolizer: a trace after another, the cache kept */
            gmp_symbolizer_free(s);
            if (gmp_symbolizer_new(&s, &o) != GMP_OK) {
                j->ok = 0;
                return NULL;
            }
            gmp_symbolizer_add_module(s, &m);
        }
    }
    gmp_symbolizer_free(s);
    return NULL;
}

static void check_shared(uint64_t a_main, uint64_t a_inl, int main_line)
{
    gmp_sym_cache *c;
    CHECK(gmp_sym_cache_new(&c) == GMP_OK, "cache");
    shared_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (shared_job){c, a_main, a_inl, (uint64_t)i << 32, main_line, 0};
        CHECK(pthread_create(&th[i], NULL, shared_run, &jobs[i]) == 0, "thread");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok, "shared cache, thread %d: wrong frames", i);
    }
    CHECK(gmp_sym_cache_loads(c) == 1, "shared cache: %llu loads of one module",
          (unsigned long long)gmp_sym_cache_loads(c));
    /* the same file without a build-id: keyed by path, size and time, read once more (not the
     * image of the build-id) and then shared */
    gmp_sym_opts o = {NULL, 0, c};
    gmp_symbolizer *s1, *s2;
    CHECK(gmp_symbolizer_new(&s1, &o) == GMP_OK && gmp_symbolizer_new(&s2, &o) == GMP_OK, "new");
    gmp_rec_module nob = self;
    nob.build_id = (gmp_str){"", 0};
    gmp_symbolizer_add_module(s1, &nob);
    gmp_symbolizer_add_module(s2, &nob);
    const gmp_sym_frame *f;
    gmp_symbolize(s1, a_main, &f);
    CHECK(f[0].function && !strcmp(f[0].function, "main"), "no build-id: %s",
          f[0].function ? f[0].function : "(null)");
    gmp_symbolize(s2, a_main, &f);
    CHECK(f[0].function && !strcmp(f[0].function, "main"), "no build-id, again");
    CHECK(gmp_sym_cache_loads(c) == 2, "no build-id: %llu loads",
          (unsigned long long)gmp_sym_cache_loads(c));
    /* another build-id at the same path: another image, whose file no longer matches */
    gmp_rec_module other = self;
    uint8_t ob[64];
    memcpy(ob, bid, sizeof ob);
    ob[0] ^= 0xff;
    other.build_id = (gmp_str){(const char *)ob, self.build_id.len};
    gmp_symbolizer_add_module(s1, &other);
    size_t n = gmp_symbolize(s1, a_inl, &f);
    CHECK(n == 1 && f[0].status == GMP_SYM_CHANGED, "shared cache, changed: %s",
          gmp_sym_status_name(f[0].status));
    gmp_symbolizer_free(s1);
    gmp_symbolizer_free(s2);
    gmp_sym_cache_free(c);
}

int main(void)
{
    /* clang-format off */
    uint64_t a_main = ret_addr(); int main_line = __LINE__;
    /* clang-format on */
    uint64_t a_inl = outer_fn();
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return 1;
    exe[k] = 0;
    self.id = 1;
    self.path = (gmp_str){exe, (uint32_t)k};
    want_module ws = {NULL, &self, bid};
    dl_iterate_phdr(find_module, &ws);
    CHECK(self.build_id.len > 0, "no build-id in this program");

    gmp_symbolizer *s;
    CHECK(gmp_symbolizer_new(&s, NULL) == GMP_OK, "new");
    gmp_symbolizer_add_module(s, &self);
    const gmp_sym_frame *f;
    size_t n = gmp_symbolize(s, a_main, &f);
    CHECK(n == 1, "main: %zu frames", n);
    expect_frame(&f[0], "main", main_line, 0);
    CHECK(f[0].offset == a_main - self.base, "offset");

    n = gmp_symbolize(s, a_inl, &f);
    CHECK(n == 2, "inlined: %zu frames", n);
    if (n == 2) {
        expect_frame(&f[0], "inlined_fn", inl_line, 1);
        expect_frame(&f[1], "outer_fn", outer_line, 0);
    }
    char buf[256];
    gmp_symbolize_frame(s, a_inl, 0, buf, sizeof buf);
    char want[256];
    snprintf(want, sizeof want, "outer_fn (test_symbolize.c:%d) > inlined_fn (test_symbolize.c:%d)",
             outer_line, inl_line);
    CHECK(!strcmp(buf, want), "frame name '%s', want '%s'", buf, want);

    /* cache: the same address again is not resolved again */
    gmp_sym_stats st0, st1;
    gmp_symbolizer_get_stats(s, &st0);
    for (int i = 0; i < 1000; i++)
        gmp_symbolize(s, a_main, &f);
    gmp_symbolizer_get_stats(s, &st1);
    CHECK(st1.cache_hits - st0.cache_hits == 1000, "cache hits %llu",
          (unsigned long long)(st1.cache_hits - st0.cache_hits));
    CHECK(st1.modules_loaded == 1 && st1.dwarf_modules == 1, "modules loaded %llu",
          (unsigned long long)st1.modules_loaded);

    check_shared(a_main, a_inl, main_line);

    /* no module */
    n = gmp_symbolize(s, 0x10, &f);
    CHECK(n == 1 && f[0].status == GMP_SYM_NO_MODULE && !f[0].function && !f[0].module,
          "no module");
    CHECK(!strcmp(gmp_symbolize_frame(s, 0x10, 1, buf, sizeof buf), "0x10"), "'%s'", buf);

    /* missing file, changed build-id: module+offset, never a name */
    gmp_rec_module gone = {2,      {"/nonexistent/libgone.so", 23}, 0x100000, 0x100000, 0x10000,
                           {"", 0}};
    gmp_symbolizer_add_module(s, &gone);
    n = gmp_symbolize(s, 0x101234, &f);
    CHECK(n == 1 && f[0].status == GMP_SYM_MISSING && !f[0].function, "missing");
    CHECK(!strcmp(gmp_symbolize_frame(s, 0x101234, 1, buf, sizeof buf), "libgone.so+0x1234"),
          "'%s'", buf);
    gmp_rec_module changed = self;
    changed.id = 3;
    changed.base = changed.lo = 0x200000;
    uint8_t other[64];
    memcpy(other, bid, sizeof other);
    other[0] ^= 0xff;
    changed.build_id = (gmp_str){(const char *)other, self.build_id.len};
    gmp_symbolizer_add_module(s, &changed);
    n = gmp_symbolize(s, 0x200000 + (a_main - self.base), &f);
    CHECK(n == 1 && f[0].status == GMP_SYM_CHANGED && !f[0].function, "changed: %s",
          gmp_sym_status_name(f[0].status));
    gmp_symbolizer_free(s);

    /* ELF symbols only */
    gmp_sym_opts o = {NULL, 1, NULL};
    CHECK(gmp_symbolizer_new(&s, &o) == GMP_OK, "new");
    gmp_symbolizer_add_module(s, &self);
    n = gmp_symbolize(s, a_main, &f);
    CHECK(n == 1 && f[0].status == GMP_SYM_OK && f[0].function && !strcmp(f[0].function, "main") &&
              f[0].line == 0,
          "symtab: %s", f[0].function ? f[0].function : "(null)");
    /* a symbol that starts like a C++ name but does not demangle is shown as it is */
    uint64_t a_bogus = not_mangled();
    n = gmp_symbolize(s, a_bogus, &f);
    CHECK(n == 1 && f[0].function && !strcmp(f[0].function, "_Zbogus"), "not mangled: %s",
          f[0].function ? f[0].function : "(null)");
    gmp_symbolizer_free(s);

#ifdef GMP_TEST_CXX
    /* C++: qualified, demangled names (DWARF's linkage names; the symbol table's names) */
    static gmp_rec_module cxx;
    static uint8_t cxx_bid[64];
    want_module wc = {"libsym_cxx.so", &cxx, cxx_bid};
    uint64_t a_fwd = gmpt_forward_addr(), a_step = gmpt_inlined_addr();
    dl_iterate_phdr(find_module, &wc);
    cxx.id = 4;
    CHECK(cxx.path.len > 0 && cxx.build_id.len > 0, "libsym_cxx.so not found");
    static const char *const fwd = "gmpt::Model::forward(int)";
    static const char *const outer = "gmpt::Model::outer(int)";
    static const char *const step = "unsigned long gmpt::Model::step<int>(int)";
    for (int elf_only = 0; elf_only <= 1; elf_only++) {
        gmp_sym_opts oc = {NULL, elf_only, NULL};
        CHECK(gmp_symbolizer_new(&s, &oc) == GMP_OK, "new");
        gmp_symbolizer_add_module(s, &cxx);
        n = gmp_symbolize(s, a_fwd, &f);
        CHECK(n == 1 && f[0].status == GMP_SYM_OK && f[0].function && !strcmp(f[0].function, fwd),
              "C++ (elf only %d): %s, want %s", elf_only, f[0].function ? f[0].function : "(null)",
              fwd);
        CHECK(elf_only || (f[0].file && strstr(f[0].file, "sym_cxx.cc")), "C++ file %s",
              f[0].file ? f[0].file : "(null)");
        n = gmp_symbolize(s, a_step, &f);
        if (elf_only) { /* the symbol table knows the function the template was inlined into */
            CHECK(n == 1 && f[0].function && !strcmp(f[0].function, outer), "C++ symtab: %s",
                  f[0].function ? f[0].function : "(null)");
        } else {
            CHECK(n == 2, "C++ inlined: %zu frames", n);
            if (n == 2) {
                CHECK(f[0].inlined && f[0].function && !strcmp(f[0].function, step),
                      "C++ inlined: %s, want %s", f[0].function ? f[0].function : "(null)", step);
                CHECK(!f[1].inlined && f[1].function && !strcmp(f[1].function, outer),
                      "C++ outer: %s, want %s", f[1].function ? f[1].function : "(null)", outer);
            }
        }
        gmp_symbolizer_free(s);
    }
#endif

    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
