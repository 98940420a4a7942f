/* gmp_symbolize: addresses -> functions, files, lines (see gmp_symbolize.h).
 *
 * Per module file (an "image"), read once on first use:
 *  - scopes: DW_TAG_subprogram and DW_TAG_inlined_subroutine DIEs with their address ranges, in
 *    depth-first order (each scope knows where its subtree ends and its parent), plus an index of
 *    the outermost functions' ranges sorted by address;
 *  - the line table rows of every compilation unit, sorted by address (the line programs are read
 *    by gmp_dwarf_lines.c, not by libdwarf);
 *  - the ELF function symbols, sorted by address.
 * An address then costs a few binary searches and a walk down one function's scope subtree. */
#include "gmp_symbolize.h"

#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_demangle.h"
#include "gmp_dwarf_lines.h"
#include "gmp_hash.h"
#include "gmp_map.h"

#define MAX_CHAIN 64      /* inlined frames reported per address */
#define MAX_DIE_DEPTH 256 /* DIE nesting walked */

/* ---------- arena and string pool ---------- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    char data[];
} chunk;

typedef struct arena {
    chunk *head;
} arena;

static void *arena_alloc(arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        chunk *c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_free(arena *a)
{
    while (a->head) {
        chunk *c = a->head;
        a->head = c->next;
        free(c);
    }
}

typedef struct strpool {
    arena a;
    const char **slot;
    size_t cap, n;
} strpool;

static uint64_t hash_str(const char *s, size_t n)
{
    return gmp_fnv1a(GMP_FNV1A_OFFSET, s, n);
}

static const char *pool_str(strpool *p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    if ((p->n + 1) * 2 > p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 1024;
        const char **ns = calloc(nc, sizeof *ns);
        if (!ns)
            return NULL;
        for (size_t i = 0; i < p->cap; i++) {
            if (!p->slot[i])
                continue;
            size_t j = hash_str(p->slot[i], strlen(p->slot[i])) & (nc - 1);
            while (ns[j])
                j = (j + 1) & (nc - 1);
            ns[j] = p->slot[i];
        }
        free(p->slot);
        p->slot = ns;
        p->cap = nc;
    }
    size_t j = hash_str(s, n) & (p->cap - 1);
    while (p->slot[j]) {
        if (!strcmp(p->slot[j], s))
            return p->slot[j];
        j = (j + 1) & (p->cap - 1);
    }
    char *c = arena_alloc(&p->a, n + 1);
    if (!c)
        return NULL;
    memcpy(c, s, n + 1);
    p->slot[j] = c;
    p->n++;
    return c;
}

static void pool_free(strpool *p)
{
    arena_free(&p->a);
    free(p->slot);
    memset(p, 0, sizeof *p);
}

/* ---------- images ---------- */

typedef struct range {
    uint64_t lo, hi;
} range;

typedef struct scope {
    const char *name;
    const char *call_file;
    uint32_t call_line;
    int32_t parent;  /* scope index, -1 for an outermost function */
    uint32_t end;    /* index after the last scope of the subtree */
    uint32_t r0, nr; /* ranges[r0 .. r0+nr) */
} scope;

typedef struct top {
    uint64_t lo, hi;
    uint32_t scope;
} top;

typedef struct lrow {
    uint64_t addr;
    const char *file;
    uint32_t line;
    uint32_t end; /* end of a sequence: no line from here */
    uint32_t seq; /* original order, for a stable sort */
} lrow;

typedef struct sym {
    uint64_t lo, hi;
    const char *name;
} sym;

typedef struct vec {
    void *p;
    size_t n, cap, elem;
} vec;

static void *vec_push(vec *v)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        void *np = realloc(v->p, nc * v->elem);
        if (!np)
            return NULL;
        v->p = np;
        v->cap = nc;
    }
    return (char *)v->p + v->elem * v->n++;
}

typedef struct image {
    char *path;
    uint8_t build_id[64];
    uint32_t build_id_len;
    int loaded;
    gmp_sym_status status; /* MISSING / CHANGED when the file cannot be used */
    strpool strs;
    scope *scopes;
    size_t nscopes;
    range *ranges;
    size_t nranges;
    top *tops;
    size_t ntops;
    lrow *rows;
    size_t nrows;
    sym *syms;
    size_t nsyms;
    int has_dwarf;
    /* in a gmp_sym_cache without a build-id: the file as it was when the module was added */
    int has_stat;
    uint64_t fsize;
    int64_t mtime_s, mtime_ns;
    struct image *next;
} image;

/* Images shared by symbolizers (gmp_symbolize.h). One mutex guards the list and every load: an
 * image is read once, by whichever symbolizer needs it first, and libdwarf and libelf are never
 * entered by two threads at once through the cache. A loaded image is never written again. */
struct gmp_sym_cache {
    pthread_mutex_t mu;
    image *images;
    uint64_t loads;
};

typedef struct smodule {
    uint64_t lo, hi, base;
    const char *path;
    image *img;
} smodule;

typedef struct centry {
    uint64_t addr;
    const gmp_sym_frame *frames;
    uint32_t n;
    int used;
} centry;

struct gmp_symbolizer {
    gmp_sym_opts o;
    char debug_dir[1024];
    smodule *mods;
    size_t nmods, capmods;
    image *images;
    arena a; /* frames */
    strpool strs;
    centry *cache;
    size_t ccap, cn;
    const gmp_reader *last_reader;
    size_t reader_done;
    gmp_omap demangled; /* name in strs (pointer) -> name to show (pointer into strs) */
    gmp_sym_stats st;
};

const char *gmp_sym_status_name(gmp_sym_status st)
{
    switch (st) {
    case GMP_SYM_OK: return "ok";
    case GMP_SYM_NO_MODULE: return "no module";
    case GMP_SYM_MISSING: return "file missing";
    case GMP_SYM_CHANGED: return "build-id mismatch";
    case GMP_SYM_NO_SYMBOL: return "no symbol";
    }
    return "unknown";
}

gmp_err gmp_symbolizer_new(gmp_symbolizer **out, const gmp_sym_opts *o)
{
    *out = NULL;
    gmp_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return GMP_ERR_NOMEM;
    if (o)
        s->o = *o;
    snprintf(s->debug_dir, sizeof s->debug_dir, "%s",
             s->o.debug_dir ? s->o.debug_dir : "/usr/lib/debug");
    s->o.debug_dir = s->debug_dir;
    if (!s->o.cache) /* with a cache: done once by gmp_sym_cache_new (libelf's state is global) */
        elf_version(EV_CURRENT);
    *out = s;
    return GMP_OK;
}

static void image_free(image *im);

gmp_err gmp_sym_cache_new(gmp_sym_cache **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return GMP_ERR_NOMEM;
    if (pthread_mutex_init(&(*out)->mu, NULL) != 0) {
        free(*out);
        *out = NULL;
        return GMP_ERR_NOMEM;
    }
    elf_version(EV_CURRENT); /* before any thread that loads through the cache */
    return GMP_OK;
}

void gmp_sym_cache_free(gmp_sym_cache *c)
{
    if (!c)
        return;
    while (c->images) {
        image *im = c->images;
        c->images = im->next;
        image_free(im);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

uint64_t gmp_sym_cache_loads(gmp_sym_cache *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->loads;
    pthread_mutex_unlock(&c->mu);
    return n;
}

static void image_free(image *im)
{
    free(im->path);
    pool_free(&im->strs);
    free(im->scopes);
    free(im->ranges);
    free(im->tops);
    free(im->rows);
    free(im->syms);
    free(im);
}

void gmp_symbolizer_free(gmp_symbolizer *s)
{
    if (!s)
        return;
    while (s->images) {
        image *im = s->images;
        s->images = im->next;
        image_free(im);
    }
    free(s->mods);
    free(s->cache);
    arena_free(&s->a);
    pool_free(&s->strs);
    gmp_omap_free(&s->demangled);
    free(s);
}

/* The name to show for a function named n (interned in s->strs): a mangled C++ name ("_Z...")
 * demangled, anything else as it is (C names, and names the demangler refuses). Each name is
 * demangled once. */
static const char *display_name(gmp_symbolizer *s, const char *n)
{
    if (!n || n[0] != '_' || n[1] != 'Z')
        return n;
    int fresh;
    uint64_t *v = gmp_omap_put(&s->demangled, (uint64_t)(uintptr_t)n, &fresh);
    if (!v)
        return n;
    if (!fresh)
        return (const char *)(uintptr_t)*v;
    char *d = gmp_demangle(n); /* formats/base/gmp_demangle.c: the C++ runtime's demangler */
    const char *r = d ? pool_str(&s->strs, d) : NULL;
    free(d);
    *v = (uint64_t)(uintptr_t)(r ? r : n); /* (pool_str does not touch the map: v is valid) */
    return r ? r : n;
}

static gmp_err push_module(gmp_symbolizer *s, const gmp_rec_module *m, const char *pp, image *im)
{
    if (!pp)
        return GMP_ERR_NOMEM;
    if (s->nmods == s->capmods) {
        size_t nc = s->capmods ? s->capmods * 2 : 64;
        smodule *nm = realloc(s->mods, nc * sizeof *nm);
        if (!nm)
            return GMP_ERR_NOMEM;
        s->mods = nm;
        s->capmods = nc;
    }
    smodule *sm = &s->mods[s->nmods++];
    sm->lo = m->lo;
    sm->hi = m->lo + m->size;
    sm->base = m->base;
    sm->path = pp;
    sm->img = im;
    return GMP_OK;
}

/* A module of a symbolizer with a cache: its image is the cache's image of the same build-id
 * (whatever its path: the same build is the same code), or without a build-id the one of the same
 * path whose file has the same size and modification time now (a file rebuilt in place between
 * two runs is another image). path is the module's path (taken: freed or kept). */
static gmp_err add_cached(gmp_symbolizer *s, const gmp_rec_module *m, char *path, const char *pp,
                          uint32_t bl)
{
    gmp_sym_cache *c = s->o.cache;
    struct stat sb;
    int has_stat = !bl && path[0] == '/' && stat(path, &sb) == 0;
    pthread_mutex_lock(&c->mu);
    image *im = NULL;
    for (image *i = c->images; i && !im; i = i->next) {
        if (bl)
            im = i->build_id_len == bl && !memcmp(i->build_id, m->build_id.ptr, bl) ? i : NULL;
        else if (!i->build_id_len && !strcmp(i->path, path) && i->has_stat == has_stat &&
                 (!has_stat ||
                  (i->fsize == (uint64_t)sb.st_size && i->mtime_s == (int64_t)sb.st_mtim.tv_sec &&
                   i->mtime_ns == (int64_t)sb.st_mtim.tv_nsec)))
            im = i;
    }
    if (!im && (im = calloc(1, sizeof *im)) != NULL) {
        im->path = path;
        path = NULL;
        memcpy(im->build_id, m->build_id.ptr, bl);
        im->build_id_len = bl;
        im->has_stat = has_stat;
        if (has_stat) {
            im->fsize = (uint64_t)sb.st_size;
            im->mtime_s = (int64_t)sb.st_mtim.tv_sec;
            im->mtime_ns = (int64_t)sb.st_mtim.tv_nsec;
        }
        im->next = c->images;
        c->images = im;
    }
    pthread_mutex_unlock(&c->mu);
    free(path);
    if (!im)
        return GMP_ERR_NOMEM;
    return push_module(s, m, pp, im);
}

gmp_err gmp_symbolizer_add_module(gmp_symbolizer *s, const gmp_rec_module *m)
{
    if (!s || !m)
        return GMP_ERR_ARG;
    char *path = gmp_str_dup(m->path);
    if (!path)
        return GMP_ERR_NOMEM;
    const char *pp = pool_str(&s->strs, path);
    image *im = NULL;
    uint32_t bl = m->build_id.len > 64 ? 64 : m->build_id.len;
    if (s->o.cache)
        return add_cached(s, m, path, pp, bl);
    for (image *i = s->images; i; i = i->next)
        if (!strcmp(i->path, path) && i->build_id_len == bl &&
            !memcmp(i->build_id, m->build_id.ptr, bl)) {
            im = i;
            break;
        }
    if (!im) {
        im = calloc(1, sizeof *im);
        if (!im) {
            free(path);
            return GMP_ERR_NOMEM;
        }
        im->path = path;
        memcpy(im->build_id, m->build_id.ptr, bl);
        im->build_id_len = bl;
        im->next = s->images;
        s->images = im;
    } else {
        free(path);
    }
    return push_module(s, m, pp, im);
}

gmp_err gmp_symbolizer_add_reader_modules(gmp_symbolizer *s, const gmp_reader *r)
{
    if (!s || !r)
        return GMP_ERR_ARG;
    if (s->last_reader != r) {
        s->last_reader = r;
        s->reader_done = 0;
    }
    size_t n = gmp_reader_module_count(r);
    for (; s->reader_done < n; s->reader_done++) {
        const gmp_rec_module *m = gmp_reader_module_at(r, s->reader_done);
        if (m) {
            gmp_err e = gmp_symbolizer_add_module(s, m);
            if (e != GMP_OK)
                return e;
        }
    }
    return GMP_OK;
}

void gmp_symbolizer_get_stats(const gmp_symbolizer *s, gmp_sym_stats *out)
{
    *out = s->st;
}

/* ---------- ELF ---------- */

typedef struct elf_file {
    int fd;
    Elf *e;
} elf_file;

/* Module paths come from the trace, which is untrusted input: a path may name a FIFO (opening it
 * would block for ever), a device (/dev/zero, a tape, a terminal) or anything else. Files are
 * opened read-only, without blocking and without becoming a controlling terminal, and used only
 * when they are regular files of at most 16 GiB; symbolic links are followed (shared libraries
 * are usually reached through one). Nothing is ever written. See docs/reliability.md. */
#define MAX_MODULE_FILE (16ull << 30)

static int open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > MAX_MODULE_FILE) {
        close(fd);
        return -1;
    }
    return fd;
}

static int elf_open(elf_file *f, const char *path)
{
    f->e = NULL;
    f->fd = open_regular(path);
    if (f->fd < 0)
        return -1;
    f->e = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
    if (!f->e || elf_kind(f->e) != ELF_K_ELF) {
        if (f->e)
            elf_end(f->e);
        close(f->fd);
        f->fd = -1;
        f->e = NULL;
        return -1;
    }
    return 0;
}

static void elf_close(elf_file *f)
{
    if (f->e)
        elf_end(f->e);
    if (f->fd >= 0)
        close(f->fd);
    f->e = NULL;
    f->fd = -1;
}

static Elf_Scn *find_section(Elf *e, const char *name)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) != 0)
        return NULL;
    for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *n = elf_strptr(e, shstrndx, sh.sh_name);
        if (n && !strcmp(n, name))
            return scn;
    }
    return NULL;
}

/* The GNU build-id of an ELF file; 0 when none. */
static uint32_t elf_build_id(Elf *e, uint8_t *out, uint32_t max)
{
    for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d)
            continue;
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp((const char *)d->d_buf + name_off, "GNU", 4) && nh.n_descsz <= max) {
                memcpy(out, (const char *)d->d_buf + desc_off, nh.n_descsz);
                return nh.n_descsz;
            }
        }
    }
    return 0;
}

static int elf_has_dwarf(Elf *e)
{
    Elf_Scn *s = find_section(e, ".debug_info");
    if (!s)
        return 0;
    GElf_Shdr sh;
    return gelf_getshdr(s, &sh) && sh.sh_type != SHT_NOBITS && sh.sh_size > 0;
}

static int sym_cmp(const void *a, const void *b)
{
    const sym *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Function symbols of .symtab (else .dynsym). Returns 1 when some were read. */
static int load_symbols(image *im, Elf *e)
{
    Elf_Scn *tab = NULL;
    for (int pass = 0; pass < 2 && !tab; pass++) {
        for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
            GElf_Shdr sh;
            if (gelf_getshdr(scn, &sh) && sh.sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) &&
                sh.sh_size) {
                tab = scn;
                break;
            }
        }
    }
    if (!tab)
        return 0;
    GElf_Shdr sh;
    Elf_Data *d = elf_getdata(tab, NULL);
    if (!gelf_getshdr(tab, &sh) || !d || !sh.sh_entsize)
        return 0;
    size_t n = sh.sh_size / sh.sh_entsize;
    vec v = {.elem = sizeof(sym)};
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        if (!gelf_getsym(d, (int)i, &s))
            continue;
        int t = GELF_ST_TYPE(s.st_info);
        if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || !s.st_value ||
            !s.st_size)
            continue;
        const char *name = elf_strptr(e, sh.sh_link, s.st_name);
        if (!name || !*name)
            continue;
        sym *y = vec_push(&v);
        if (!y)
            break;
        y->lo = s.st_value;
        y->hi = s.st_value + s.st_size;
        y->name = pool_str(&im->strs, name);
    }
    if (!v.n) {
        free(v.p);
        return 0;
    }
    qsort(v.p, v.n, sizeof(sym), sym_cmp);
    free(im->syms);
    im->syms = v.p;
    im->nsyms = v.n;
    return 1;
}

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t table[256]; /* made per call (2,048 steps): no shared state between threads */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static int file_crc(const char *path, uint32_t *out)
{
    int fd = open_regular(path);
    if (fd < 0)
        return -1;
    uint8_t buf[1 << 16];
    uint32_t crc = 0;
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) > 0)
        crc = crc32_update(crc, buf, (size_t)k);
    close(fd);
    if (k < 0)
        return -1;
    *out = crc;
    return 0;
}

/* Opens a separate debug file that belongs to the image: same build-id when both have one, else
 * the debuglink CRC when one is given. */
static int open_debug(elf_file *f, const char *path, const image *im, const uint8_t *bid,
                      uint32_t bidlen, int check_crc, uint32_t crc)
{
    if (elf_open(f, path) < 0)
        return -1;
    uint8_t b[64];
    uint32_t bl = elf_build_id(f->e, b, sizeof b);
    int ok;
    if (bl && bidlen)
        ok = bl == bidlen && !memcmp(b, bid, bl);
    else if (check_crc) {
        uint32_t c;
        ok = file_crc(path, &c) == 0 && c == crc;
    } else
        ok = 0;
    if (!ok || !elf_has_dwarf(f->e)) {
        elf_close(f);
        return -1;
    }
    (void)im;
    return 0;
}

static int find_debug_file(gmp_symbolizer *s, const image *im, Elf *e, const uint8_t *bid,
                           uint32_t bidlen, elf_file *out)
{
    char p[4096];
    if (bidlen >= 2 && s->debug_dir[0]) {
        int k = snprintf(p, sizeof p, "%s/.build-id/%02x/", s->debug_dir, bid[0]);
        for (uint32_t i = 1; i < bidlen && k > 0 && (size_t)k + 3 < sizeof p; i++)
            k += snprintf(p + k, sizeof p - (size_t)k, "%02x", bid[i]);
        if (k > 0 && (size_t)k + 7 < sizeof p) {
            memcpy(p + k, ".debug", 7);
            if (open_debug(out, p, im, bid, bidlen, 0, 0) == 0)
                return 0;
        }
    }
    Elf_Scn *dl = find_section(e, ".gnu_debuglink");
    Elf_Data *d = dl ? elf_getdata(dl, NULL) : NULL;
    if (!d || !d->d_buf || d->d_size < 8)
        return -1;
    const char *name = d->d_buf;
    size_t nl = strnlen(name, d->d_size);
    if (nl == 0 || nl >= d->d_size || strchr(name, '/'))
        return -1;
    size_t crc_off = (nl + 4) & ~(size_t)3;
    if (crc_off + 4 > d->d_size)
        return -1;
    uint32_t crc;
    memcpy(&crc, (const char *)d->d_buf + crc_off, 4);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", im->path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    const char *fmts[] = {"%s/%s", "%s/.debug/%s", NULL};
    for (int i = 0; fmts[i]; i++) {
        int k = snprintf(p, sizeof p, fmts[i], dir, name);
        if (k > 0 && (size_t)k < sizeof p && strcmp(p, im->path) != 0 &&
            open_debug(out, p, im, bid, bidlen, 1, crc) == 0)
            return 0;
    }
    if (s->debug_dir[0]) {
        int k = snprintf(p, sizeof p, "%s%s/%s", s->debug_dir, dir, name);
        if (k > 0 && (size_t)k < sizeof p && open_debug(out, p, im, bid, bidlen, 1, crc) == 0)
            return 0;
    }
    return -1;
}

/* ---------- DWARF ---------- */

typedef gmp_dwarf_sect sect;

typedef struct dwctx {
    image *im;
    Dwarf_Debug dbg;
    vec scopes, ranges, rows;
    /* the compilation unit's file table: read by our own line-table reader (lines:
     * gmp_dwarf_lines.c), else libdwarf's (files, file_base) */
    gmp_dwarf_lines lines;
    int own_lines; /* 1: this unit's rows and files come from gmp_dwarf_lines_read */
    char **files;
    Dwarf_Signed nfiles;
    int file_base; /* 0 for DWARF 5 line tables (0-based file numbers), else 1 */
    Dwarf_Half version;
    Dwarf_Addr cu_base;
    /* names of abstract origins, by DIE offset */
    uint64_t *nkeys;
    const char **nvals;
    size_t ncap, nn;
} dwctx;

static void dw_err(dwctx *c, Dwarf_Error err)
{
    if (err)
        dwarf_dealloc_error(c->dbg, err);
}

static const char *file_name(dwctx *c, Dwarf_Unsigned no)
{
    if (c->own_lines)
        return gmp_dwarf_lines_file(&c->lines, no);
    if (!c->files)
        return NULL;
    if (no < (Dwarf_Unsigned)c->file_base)
        return NULL;
    Dwarf_Unsigned i = no - (Dwarf_Unsigned)c->file_base;
    if (i >= (Dwarf_Unsigned)c->nfiles)
        return NULL;
    return pool_str(&c->im->strs, c->files[i]);
}

static const char **name_slot(dwctx *c, uint64_t off)
{
    if ((c->nn + 1) * 2 > c->ncap) {
        size_t nc = c->ncap ? c->ncap * 2 : 4096;
        uint64_t *nk = calloc(nc, sizeof *nk);
        const char **nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (size_t i = 0; i < c->ncap; i++) {
            if (!c->nkeys[i])
                continue;
            size_t j = (c->nkeys[i] * 0x9e3779b97f4a7c15ull >> 20) & (nc - 1);
            while (nk[j])
                j = (j + 1) & (nc - 1);
            nk[j] = c->nkeys[i];
            nv[j] = c->nvals[i];
        }
        free(c->nkeys);
        free(c->nvals);
        c->nkeys = nk;
        c->nvals = nv;
        c->ncap = nc;
    }
    uint64_t key = off + 1;
    size_t j = (key * 0x9e3779b97f4a7c15ull >> 20) & (c->ncap - 1);
    while (c->nkeys[j] && c->nkeys[j] != key)
        j = (j + 1) & (c->ncap - 1);
    if (!c->nkeys[j]) {
        c->nkeys[j] = key;
        c->nvals[j] = NULL;
        c->nn++;
    }
    return &c->nvals[j];
}

/* DW_AT_linkage_name (or the older DW_AT_MIPS_linkage_name) of die: the mangled, qualified name
 * of a C++ function, which DW_AT_name ("forward") is not; NULL when absent (C functions). */
static const char *linkage_name(dwctx *c, Dwarf_Die die)
{
    static const Dwarf_Half ats[] = {DW_AT_linkage_name, DW_AT_MIPS_linkage_name};
    for (int i = 0; i < 2; i++) {
        Dwarf_Attribute a = NULL;
        Dwarf_Error err = NULL;
        if (dwarf_attr(die, ats[i], &a, &err) != DW_DLV_OK) {
            dw_err(c, err);
            continue;
        }
        char *str = NULL; /* points into the string section: not to be freed */
        err = NULL;
        int ok = dwarf_formstring(a, &str, &err) == DW_DLV_OK && str && *str;
        dw_err(c, ok ? NULL : err);
        const char *r = ok ? pool_str(&c->im->strs, str) : NULL;
        dwarf_dealloc_attribute(a);
        if (r)
            return r;
    }
    return NULL;
}

static int is_mangled(const char *n)
{
    return n && n[0] == '_' && n[1] == 'Z';
}

/* The name of a subprogram or inlined scope: its linkage name, else the linkage name of the
 * declaration or abstract instance it refers to (DW_AT_specification, DW_AT_abstract_origin),
 * else a plain DW_AT_name, its own first. */
static const char *die_name(dwctx *c, Dwarf_Die die, int depth)
{
    const char *own = linkage_name(c, die);
    if (own)
        return own;
    Dwarf_Error err = NULL;
    char *n = NULL;
    if (dwarf_diename(die, &n, &err) == DW_DLV_OK && n) {
        own = pool_str(&c->im->strs, n);
        dwarf_dealloc(c->dbg, n, DW_DLA_STRING);
    } else {
        dw_err(c, err);
    }
    if (depth > 8)
        return own;
    static const Dwarf_Half refs[] = {DW_AT_abstract_origin, DW_AT_specification};
    for (int i = 0; i < 2; i++) {
        Dwarf_Attribute a = NULL;
        err = NULL;
        if (dwarf_attr(die, refs[i], &a, &err) != DW_DLV_OK) {
            dw_err(c, err);
            continue;
        }
        Dwarf_Off off = 0;
        int ok = dwarf_global_formref(a, &off, &err) == DW_DLV_OK;
        dw_err(c, ok ? NULL : err);
        dwarf_dealloc_attribute(a);
        if (!ok)
            continue;
        const char **slot = name_slot(c, off);
        if (slot && *slot) {
            if (!own || is_mangled(*slot))
                return *slot;
            continue;
        }
        Dwarf_Die o = NULL;
        err = NULL;
        if (dwarf_offdie_b(c->dbg, off, 1, &o, &err) != DW_DLV_OK) {
            dw_err(c, err);
            continue;
        }
        const char *r = die_name(c, o, depth + 1);
        dwarf_dealloc_die(o);
        slot = name_slot(c, off); /* the table may have grown */
        if (slot)
            *slot = r;
        if (r && (!own || is_mangled(r)))
            return r;
    }
    return own;
}

static int add_range(dwctx *c, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return 0;
    range *r = vec_push(&c->ranges);
    if (!r)
        return -1;
    r->lo = lo;
    r->hi = hi;
    return 1;
}

/* Appends the DIE's address ranges; returns how many. */
static uint32_t die_ranges(dwctx *c, Dwarf_Die die)
{
    Dwarf_Error err = NULL;
    Dwarf_Addr lo = 0, hi = 0;
    Dwarf_Half form = 0;
    enum Dwarf_Form_Class cls = DW_FORM_CLASS_UNKNOWN;
    uint32_t n = 0;
    if (dwarf_lowpc(die, &lo, &err) == DW_DLV_OK) {
        if (dwarf_highpc_b(die, &hi, &form, &cls, &err) == DW_DLV_OK) {
            if (cls == DW_FORM_CLASS_CONSTANT)
                hi += lo;
            if (add_range(c, lo, hi) > 0)
                n++;
        } else {
            dw_err(c, err);
        }
        return n;
    }
    dw_err(c, err);
    err = NULL;
    Dwarf_Attribute a = NULL;
    if (dwarf_attr(die, DW_AT_ranges, &a, &err) != DW_DLV_OK) {
        dw_err(c, err);
        return 0;
    }
    err = NULL;
    if (dwarf_whatform(a, &form, &err) != DW_DLV_OK) {
        dw_err(c, err);
        dwarf_dealloc_attribute(a);
        return 0;
    }
    if (c->version >= 5) {
        Dwarf_Unsigned val = 0;
        int rc;
        err = NULL;
        if (form == DW_FORM_rnglistx)
            rc = dwarf_formudata(a, &val, &err);
        else {
            Dwarf_Off off = 0;
            rc = dwarf_global_formref(a, &off, &err);
            val = off;
        }
        Dwarf_Rnglists_Head head = NULL;
        Dwarf_Unsigned count = 0, goff = 0;
        if (rc == DW_DLV_OK &&
            dwarf_rnglists_get_rle_head(a, form, val, &head, &count, &goff, &err) == DW_DLV_OK) {
            for (Dwarf_Unsigned i = 0; i < count; i++) {
                unsigned len = 0, code = 0;
                Dwarf_Unsigned r1, r2, c1 = 0, c2 = 0;
                Dwarf_Bool unavail = 0;
                if (dwarf_get_rnglists_entry_fields_a(head, i, &len, &code, &r1, &r2, &unavail, &c1,
                                                      &c2, &err) != DW_DLV_OK) {
                    dw_err(c, err);
                    err = NULL;
                    break;
                }
                if (unavail || code == DW_RLE_end_of_list || code == DW_RLE_base_address ||
                    code == DW_RLE_base_addressx)
                    continue;
                if (add_range(c, c1, c2) > 0)
                    n++;
            }
            dwarf_dealloc_rnglists_head(head);
        } else {
            dw_err(c, err);
        }
    } else {
        Dwarf_Off off = 0, real = 0;
        err = NULL;
        int rc = dwarf_global_formref(a, &off, &err);
        if (rc != DW_DLV_OK) {
            dw_err(c, err);
            err = NULL;
            Dwarf_Unsigned u = 0;
            rc = dwarf_formudata(a, &u, &err);
            off = u;
        }
        Dwarf_Ranges *rs = NULL;
        Dwarf_Signed cnt = 0;
        Dwarf_Unsigned bytes = 0;
        if (rc == DW_DLV_OK &&
            dwarf_get_ranges_b(c->dbg, off, die, &real, &rs, &cnt, &bytes, &err) == DW_DLV_OK) {
            Dwarf_Addr base = c->cu_base;
            for (Dwarf_Signed i = 0; i < cnt; i++) {
                if (rs[i].dwr_type == DW_RANGES_END)
                    break;
                if (rs[i].dwr_type == DW_RANGES_ADDRESS_SELECTION) {
                    base = rs[i].dwr_addr2;
                    continue;
                }
                if (add_range(c, base + rs[i].dwr_addr1, base + rs[i].dwr_addr2) > 0)
                    n++;
            }
            dwarf_ranges_dealloc(c->dbg, rs, cnt);
        } else {
            dw_err(c, err);
        }
    }
    dwarf_dealloc_attribute(a);
    return n;
}

static uint64_t attr_udata(dwctx *c, Dwarf_Die die, Dwarf_Half at)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error err = NULL;
    if (dwarf_attr(die, at, &a, &err) != DW_DLV_OK) {
        dw_err(c, err);
        return 0;
    }
    Dwarf_Unsigned v = 0;
    err = NULL;
    if (dwarf_formudata(a, &v, &err) != DW_DLV_OK) {
        /* libdwarf 20210528's dwarf_formudata refuses DW_FORM_implicit_const (the value kept in
         * the abbreviation), which gcc uses for DW_AT_call_file/line/column shared by several
         * inlined scopes; dwarf_formsdata reads it */
        dw_err(c, err);
        err = NULL;
        Dwarf_Signed sv = 0;
        if (dwarf_formsdata(a, &sv, &err) == DW_DLV_OK && sv >= 0) {
            v = (Dwarf_Unsigned)sv;
        } else {
            dw_err(c, err);
            v = 0;
        }
    }
    dwarf_dealloc_attribute(a);
    return v;
}

static void walk(dwctx *c, Dwarf_Die first, int32_t parent, int depth)
{
    Dwarf_Die die = first; /* walk owns first and its siblings */
    while (die) {
        Dwarf_Half tag = 0;
        Dwarf_Error err = NULL;
        if (dwarf_tag(die, &tag, &err) != DW_DLV_OK) {
            dw_err(c, err);
            tag = 0;
        }
        int32_t child_parent = parent;
        int descend = depth < MAX_DIE_DEPTH;
        size_t si = 0;
        int is_scope = 0;
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            uint32_t r0 = (uint32_t)c->ranges.n;
            uint32_t nr = die_ranges(c, die);
            if (nr) {
                scope *s = vec_push(&c->scopes);
                if (s) {
                    si = c->scopes.n - 1;
                    s->name = die_name(c, die, 0);
                    s->parent = parent;
                    s->r0 = r0;
                    s->nr = nr;
                    s->call_file = NULL;
                    s->call_line = 0;
                    if (tag == DW_TAG_inlined_subroutine) {
                        s->call_file = file_name(c, attr_udata(c, die, DW_AT_call_file));
                        s->call_line = (uint32_t)attr_udata(c, die, DW_AT_call_line);
                    }
                    is_scope = 1;
                    child_parent = (int32_t)si;
                }
            } else {
                descend = 0; /* a declaration or an abstract instance: no code of its own */
            }
        } else if (tag == DW_TAG_variable || tag == DW_TAG_formal_parameter ||
                   tag == DW_TAG_base_type || tag == DW_TAG_typedef || tag == DW_TAG_pointer_type ||
                   tag == DW_TAG_member || tag == DW_TAG_enumeration_type ||
                   tag == DW_TAG_subroutine_type) {
            descend = 0;
        }
        if (descend) {
            Dwarf_Die child = NULL;
            err = NULL;
            int rc = dwarf_child(die, &child, &err);
            if (rc == DW_DLV_OK)
                walk(c, child, child_parent, depth + 1);
            else
                dw_err(c, err);
        }
        if (is_scope)
            ((scope *)c->scopes.p)[si].end = (uint32_t)c->scopes.n;
        Dwarf_Die next = NULL;
        err = NULL;
        int rc = dwarf_siblingof_b(c->dbg, die, 1, &next, &err);
        if (rc != DW_DLV_OK)
            dw_err(c, err);
        dwarf_dealloc_die(die);
        die = rc == DW_DLV_OK ? next : NULL;
    }
}

static void load_lines(dwctx *c, Dwarf_Die cu)
{
    Dwarf_Error err = NULL;
    Dwarf_Unsigned lversion = 0;
    Dwarf_Small tcount = 0;
    Dwarf_Line_Context lctx = NULL;
    if (dwarf_srclines_b(cu, &lversion, &tcount, &lctx, &err) != DW_DLV_OK) {
        dw_err(c, err);
        return;
    }
    Dwarf_Line *lines = NULL;
    Dwarf_Signed nl = 0;
    err = NULL;
    if (dwarf_srclines_from_linecontext(lctx, &lines, &nl, &err) == DW_DLV_OK) {
        for (Dwarf_Signed i = 0; i < nl; i++) {
            Dwarf_Addr addr = 0;
            Dwarf_Unsigned line = 0, fno = 0;
            Dwarf_Bool end = 0;
            err = NULL;
            if (dwarf_lineaddr(lines[i], &addr, &err) != DW_DLV_OK) {
                dw_err(c, err);
                continue;
            }
            if (dwarf_lineno(lines[i], &line, &err) != DW_DLV_OK) {
                dw_err(c, err);
                err = NULL;
            }
            if (dwarf_line_srcfileno(lines[i], &fno, &err) != DW_DLV_OK) {
                dw_err(c, err);
                err = NULL;
            }
            if (dwarf_lineendsequence(lines[i], &end, &err) != DW_DLV_OK) {
                dw_err(c, err);
                err = NULL;
            }
            lrow *r = vec_push(&c->rows);
            if (!r)
                break;
            r->addr = addr;
            r->line = (uint32_t)line;
            r->end = end ? 1 : 0;
            r->seq = (uint32_t)c->rows.n;
            r->file = end ? NULL : file_name(c, fno);
        }
    } else {
        dw_err(c, err);
    }
    dwarf_srclines_dealloc_b(lctx);
}

/* gmp_dwarf_lines' row and file name: into c->rows and the image's strings. */
static int add_row(void *ctx, uint64_t addr, const char *file, uint64_t line, int end)
{
    dwctx *c = ctx;
    lrow *r = vec_push(&c->rows);
    if (!r)
        return -1;
    r->addr = addr;
    r->line = line > UINT32_MAX ? 0 : (uint32_t)line;
    r->end = end ? 1 : 0;
    r->seq = (uint32_t)c->rows.n;
    r->file = file;
    return 0;
}

static const char *intern_name(void *ctx, const char *name)
{
    dwctx *c = ctx;
    return pool_str(&c->im->strs, name);
}

static int row_cmp(const void *a, const void *b)
{
    const lrow *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->end != y->end)
        return x->end ? -1 : 1; /* an end at A before a sequence that starts at A */
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int top_cmp(const void *a, const void *b)
{
    const top *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The bytes of a DWARF section of e (decompressed in place when SHF_COMPRESSED). */
static sect get_sect(Elf *e, const char *name)
{
    sect r = {NULL, 0};
    Elf_Scn *scn = find_section(e, name);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
        return r;
    if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
        return r;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (d && d->d_buf && d->d_size) {
        r.p = d->d_buf;
        r.n = d->d_size;
    }
    return r;
}

/* DW_AT_stmt_list of a unit: 1 and *off when it has one. */
static int stmt_list(dwctx *c, Dwarf_Die cu, uint64_t *off)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error err = NULL;
    if (dwarf_attr(cu, DW_AT_stmt_list, &a, &err) != DW_DLV_OK) {
        dw_err(c, err);
        return 0;
    }
    Dwarf_Off o = 0;
    err = NULL;
    int ok = dwarf_global_formref(a, &o, &err) == DW_DLV_OK;
    if (!ok) {
        dw_err(c, err);
        err = NULL;
        Dwarf_Unsigned u = 0;
        ok = dwarf_formudata(a, &u, &err) == DW_DLV_OK;
        dw_err(c, ok ? NULL : err);
        o = u;
    }
    dwarf_dealloc_attribute(a);
    *off = o;
    return ok;
}

/* DW_AT_comp_dir of a unit, interned; NULL when none. */
static const char *comp_dir(dwctx *c, Dwarf_Die cu)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error err = NULL;
    if (dwarf_attr(cu, DW_AT_comp_dir, &a, &err) != DW_DLV_OK) {
        dw_err(c, err);
        return NULL;
    }
    char *str = NULL;
    err = NULL;
    int ok = dwarf_formstring(a, &str, &err) == DW_DLV_OK && str;
    dw_err(c, ok ? NULL : err);
    const char *r = ok ? pool_str(&c->im->strs, str) : NULL;
    dwarf_dealloc_attribute(a);
    return r;
}

static void load_dwarf(gmp_symbolizer *s, image *im, int fd, Elf *e)
{
    dwctx c = {.im = im};
    c.lines.debug_line = get_sect(e, ".debug_line");
    c.lines.debug_line_str = get_sect(e, ".debug_line_str");
    c.lines.debug_str = get_sect(e, ".debug_str");
    c.lines.row = add_row;
    c.lines.intern = intern_name;
    c.lines.ctx = &c;
    c.scopes.elem = sizeof(scope);
    c.ranges.elem = sizeof(range);
    c.rows.elem = sizeof(lrow);
    Dwarf_Error err = NULL;
    if (dwarf_init_b(fd, DW_DLC_READ, DW_GROUPNUMBER_ANY, NULL, NULL, &c.dbg, &err) != DW_DLV_OK) {
        if (err)
            dwarf_dealloc_error(NULL, err);
        return;
    }
    for (;;) {
        Dwarf_Unsigned hlen = 0, aoff = 0, toff = 0, next = 0;
        Dwarf_Half version = 0, asz = 0, lsz = 0, esz = 0, cutype = 0;
        Dwarf_Off abbrev = 0;
        Dwarf_Sig8 sig;
        err = NULL;
        int rc = dwarf_next_cu_header_d(c.dbg, 1, &hlen, &version, &abbrev, &asz, &lsz, &esz, &sig,
                                        &toff, &next, &cutype, &err);
        (void)aoff;
        if (rc != DW_DLV_OK) {
            dw_err(&c, err);
            break;
        }
        Dwarf_Die cu = NULL;
        err = NULL;
        if (dwarf_siblingof_b(c.dbg, NULL, 1, &cu, &err) != DW_DLV_OK) {
            dw_err(&c, err);
            continue;
        }
        c.version = version;
        c.cu_base = 0;
        err = NULL;
        if (dwarf_lowpc(cu, &c.cu_base, &err) != DW_DLV_OK) {
            dw_err(&c, err);
            c.cu_base = 0;
        }
        c.files = NULL;
        c.nfiles = 0;
        c.lines.nftab = 0;
        uint64_t loff = 0;
        size_t rows0 = c.rows.n;
        c.own_lines = 1;
        if (!stmt_list(&c, cu, &loff) ||
            gmp_dwarf_lines_read(&c.lines, loff, comp_dir(&c, cu)) != 0) {
            c.rows.n = rows0; /* the rows of a table that could not be read */
            c.own_lines = 0;
        }
        if (!c.own_lines) { /* libdwarf's file table and rows for this unit */
            err = NULL;
            if (dwarf_srcfiles(cu, &c.files, &c.nfiles, &err) != DW_DLV_OK) {
                dw_err(&c, err);
                c.files = NULL;
                c.nfiles = 0;
            }
            c.file_base = version >= 5 ? 0 : 1;
            load_lines(&c, cu);
        }
        Dwarf_Die child = NULL;
        err = NULL;
        if (dwarf_child(cu, &child, &err) == DW_DLV_OK)
            walk(&c, child, -1, 1);
        else
            dw_err(&c, err);
        if (c.files) {
            for (Dwarf_Signed i = 0; i < c.nfiles; i++)
                dwarf_dealloc(c.dbg, c.files[i], DW_DLA_STRING);
            dwarf_dealloc(c.dbg, c.files, DW_DLA_LIST);
        }
        dwarf_dealloc_die(cu);
    }
    err = NULL;
    if (dwarf_finish(c.dbg, &err) != DW_DLV_OK && err)
        dwarf_dealloc_error(NULL, err);
    free(c.nkeys);
    free(c.nvals);
    gmp_dwarf_lines_free(&c.lines);
    /* the index of outermost functions */
    scope *sc = c.scopes.p;
    range *rg = c.ranges.p;
    vec tops = {.elem = sizeof(top)};
    for (size_t i = 0; i < c.scopes.n; i++) {
        if (sc[i].parent >= 0)
            continue;
        for (uint32_t k = 0; k < sc[i].nr; k++) {
            top *t = vec_push(&tops);
            if (!t)
                break;
            t->lo = rg[sc[i].r0 + k].lo;
            t->hi = rg[sc[i].r0 + k].hi;
            t->scope = (uint32_t)i;
        }
    }
    if (tops.n)
        qsort(tops.p, tops.n, sizeof(top), top_cmp);
    if (c.rows.n)
        qsort(c.rows.p, c.rows.n, sizeof(lrow), row_cmp);
    im->scopes = c.scopes.p;
    im->nscopes = c.scopes.n;
    im->ranges = c.ranges.p;
    im->nranges = c.ranges.n;
    im->tops = tops.p;
    im->ntops = tops.n;
    im->rows = c.rows.p;
    im->nrows = c.rows.n;
    im->has_dwarf = c.scopes.n || c.rows.n;
    if (im->has_dwarf)
        s->st.dwarf_modules++;
}

static void load_image(gmp_symbolizer *s, image *im)
{
    im->loaded = 1;
    s->st.modules_loaded++;
    elf_file f;
    if (!im->path[0] || im->path[0] != '/' || elf_open(&f, im->path) < 0) {
        im->status = GMP_SYM_MISSING;
        return;
    }
    uint8_t bid[64];
    uint32_t bl = elf_build_id(f.e, bid, sizeof bid);
    if (im->build_id_len && (bl != im->build_id_len || memcmp(bid, im->build_id, bl) != 0)) {
        im->status = GMP_SYM_CHANGED;
        elf_close(&f);
        return;
    }
    int have_syms = load_symbols(im, f.e);
    if (!s->o.no_dwarf) {
        if (elf_has_dwarf(f.e)) {
            load_dwarf(s, im, f.fd, f.e);
        } else {
            elf_file d;
            if (find_debug_file(s, im, f.e, bl ? bid : im->build_id, bl ? bl : im->build_id_len,
                                &d) == 0) {
                if (!have_syms)
                    load_symbols(im, d.e);
                load_dwarf(s, im, d.fd, d.e);
                elf_close(&d);
            }
        }
    }
    elf_close(&f);
}

/* ---------- lookup ---------- */

static int scope_has(const image *im, const scope *sc, uint64_t pc)
{
    for (uint32_t k = 0; k < sc->nr; k++) {
        const range *r = &im->ranges[sc->r0 + k];
        if (pc >= r->lo && pc < r->hi)
            return 1;
    }
    return 0;
}

/* Scopes containing pc, outermost first; returns how many. */
static size_t find_scopes(const image *im, uint64_t pc, uint32_t *chain, size_t max)
{
    if (!im->ntops)
        return 0;
    size_t lo = 0, hi = im->ntops;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (im->tops[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* lo: first range starting above pc; look at a few before it (overlaps are rare) */
    for (size_t k = lo; k > 0 && lo - k < 8; k--) {
        const top *t = &im->tops[k - 1];
        if (pc < t->lo || pc >= t->hi)
            continue;
        size_t n = 0;
        uint32_t cur = t->scope;
        chain[n++] = cur;
        uint32_t i = cur + 1;
        while (i < im->scopes[cur].end && n < max) {
            const scope *sc = &im->scopes[i];
            if (scope_has(im, sc, pc)) {
                chain[n++] = i;
                cur = i;
                i++;
            } else {
                i = sc->end > i ? sc->end : i + 1;
            }
        }
        return n;
    }
    return 0;
}

static const lrow *find_row(const image *im, uint64_t pc)
{
    size_t lo = 0, hi = im->nrows;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (im->rows[mid].addr <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    const lrow *r = &im->rows[lo - 1];
    return r->end ? NULL : r;
}

static const sym *find_sym(const image *im, uint64_t pc)
{
    size_t lo = 0, hi = im->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (im->syms[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k > 0 && lo - k < 4; k--)
        if (pc >= im->syms[k - 1].lo && pc < im->syms[k - 1].hi)
            return &im->syms[k - 1];
    return NULL;
}

static size_t resolve(gmp_symbolizer *s, uint64_t addr, gmp_sym_frame *out, size_t max)
{
    memset(out, 0, sizeof *out);
    out->address = addr;
    out->status = GMP_SYM_NO_MODULE;
    const smodule *m = NULL;
    for (size_t i = s->nmods; i-- > 0;)
        if (addr >= s->mods[i].lo && addr < s->mods[i].hi) {
            m = &s->mods[i];
            break;
        }
    if (!m)
        return 1;
    out->module = m->path;
    out->offset = addr - m->base;
    image *im = m->img;
    if (s->o.cache) { /* shared: loaded once, under the cache's lock (read-only afterwards) */
        pthread_mutex_lock(&s->o.cache->mu);
        if (!im->loaded) {
            load_image(s, im);
            s->o.cache->loads++;
        }
        pthread_mutex_unlock(&s->o.cache->mu);
    } else if (!im->loaded) {
        load_image(s, im);
    }
    if (im->status) {
        out->status = im->status;
        return 1;
    }
    uint64_t pc = out->offset ? out->offset - 1 : 0; /* the call, not the return address */
    uint32_t chain[MAX_CHAIN];
    size_t nc = find_scopes(im, pc, chain, MAX_CHAIN);
    const lrow *row = find_row(im, pc);
    const sym *sy = find_sym(im, pc);
    if (!nc) {
        const char *fn = sy ? sy->name : NULL;
        if (!fn) {
            out->status = GMP_SYM_NO_SYMBOL;
            return 1;
        }
        out->status = GMP_SYM_OK;
        out->function = display_name(s, pool_str(&s->strs, fn));
        if (row) {
            out->file = pool_str(&s->strs, row->file);
            out->line = row->line;
        }
        return 1;
    }
    /* innermost scope first; each inlined scope's call site is its caller's line */
    size_t n = 0;
    const uint64_t offset = out->offset;
    const char *file = row ? row->file : NULL;
    uint32_t line = row ? row->line : 0;
    for (size_t k = nc; k-- > 0 && n < max;) {
        const scope *sc = &im->scopes[chain[k]];
        gmp_sym_frame *f = &out[n++];
        memset(f, 0, sizeof *f);
        f->address = addr;
        f->module = m->path;
        f->offset = offset;
        f->status = GMP_SYM_OK;
        /* the outermost function by its ELF symbol when one covers pc, as llvm-symbolizer names
         * it: gcc gives functions of internal linkage no DW_AT_linkage_name, so DWARF alone
         * would show a static C++ function without its parameters ("alloc_here" for
         * "alloc_here(unsigned long)"); clones keep their suffix ("f.constprop.0") */
        const char *name = k == 0 && sy ? sy->name : sc->name;
        f->function = display_name(s, pool_str(&s->strs, name ? name : "??"));
        f->file = pool_str(&s->strs, file);
        f->line = line;
        f->inlined = k > 0;
        file = sc->call_file;
        line = sc->call_line;
    }
    return n;
}

static centry *cache_slot(gmp_symbolizer *s, uint64_t addr)
{
    if ((s->cn + 1) * 2 > s->ccap) {
        size_t nc = s->ccap ? s->ccap * 2 : 4096;
        centry *ne = calloc(nc, sizeof *ne);
        if (!ne)
            return NULL;
        for (size_t i = 0; i < s->ccap; i++) {
            if (!s->cache[i].used)
                continue;
            size_t j = (s->cache[i].addr * 0x9e3779b97f4a7c15ull >> 17) & (nc - 1);
            while (ne[j].used)
                j = (j + 1) & (nc - 1);
            ne[j] = s->cache[i];
        }
        free(s->cache);
        s->cache = ne;
        s->ccap = nc;
    }
    size_t j = (addr * 0x9e3779b97f4a7c15ull >> 17) & (s->ccap - 1);
    while (s->cache[j].used && s->cache[j].addr != addr)
        j = (j + 1) & (s->ccap - 1);
    return &s->cache[j];
}

size_t gmp_symbolize(gmp_symbolizer *s, uint64_t address, const gmp_sym_frame **frames)
{
    static const gmp_sym_frame none = {.status = GMP_SYM_NO_MODULE};
    s->st.lookups++;
    centry *e = cache_slot(s, address);
    if (e && e->used) {
        s->st.cache_hits++;
        *frames = e->frames;
        return e->n;
    }
    gmp_sym_frame tmp[MAX_CHAIN];
    size_t n = resolve(s, address, tmp, MAX_CHAIN);
    gmp_sym_frame *keep = arena_alloc(&s->a, n * sizeof *keep);
    if (!keep) {
        *frames = &none;
        return 1;
    }
    memcpy(keep, tmp, n * sizeof *keep);
    e = cache_slot(s, address); /* resolving does not touch the cache, but be safe */
    if (e) {
        e->used = 1;
        e->addr = address;
        e->frames = keep;
        e->n = (uint32_t)n;
        s->cn++;
    }
    *frames = keep;
    return n;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static size_t put_frame(const gmp_sym_frame *f, char *buf, size_t n)
{
    int k;
    if (f->function && f->file && f->line)
        k = snprintf(buf, n, "%s (%s:%" PRIu32 ")", f->function, base_name(f->file), f->line);
    else if (f->function)
        k = snprintf(buf, n, "%s", f->function);
    else if (f->module)
        k = snprintf(buf, n, "%s+0x%" PRIx64, base_name(f->module), f->offset);
    else
        k = snprintf(buf, n, "0x%" PRIx64, f->address);
    if (k < 0)
        return 0;
    return (size_t)k < n ? (size_t)k : (n ? n - 1 : 0);
}

const char *gmp_symbolize_frame(gmp_symbolizer *s, uint64_t address, int innermost_only, char *buf,
                                size_t n)
{
    if (!n)
        return buf;
    buf[0] = 0;
    const gmp_sym_frame *fr;
    size_t nf = gmp_symbolize(s, address, &fr);
    if (innermost_only || nf == 1) {
        put_frame(&fr[0], buf, n);
        return buf;
    }
    size_t used = 0;
    for (size_t i = nf; i-- > 0 && used + 1 < n;) {
        if (i != nf - 1) {
            int k = snprintf(buf + used, n - used, " > ");
            if (k < 0 || (size_t)k >= n - used)
                break;
            used += (size_t)k;
        }
        used += put_frame(&fr[i], buf + used, n - used);
    }
    return buf;
}
