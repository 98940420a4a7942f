/* gmp_nvtx: NVTX v3 injection (see gmp_nvtx.h for the model).
 *
 * Layout of this file:
 *   - global state (the sink, a generation number bumped by every gmp_nvtx_init);
 *   - the handle registry: domains and registered strings are handles we own, small tagged
 *     integers that index an append-only table holding their text (so that they can be interned
 *     again when a new writer arrives);
 *   - per-thread state (TLS): the range stack and a small cache from (parent path, domain, name)
 *     to path node so that repeating the same push costs no string hash and no lock;
 *   - range names bounded per trace (PyTorch's emit_nvtx names folded, a cap on distinct names);
 *   - the NVTX CORE / CORE2 implementations and the export-table filling;
 *   - the memory extension (regions table, ALLOC/FREE records) and its slot filling.
 * Thread safety: the hot path (push, pop, mark, start/end) touches only TLS and the writer's
 * per-thread buffer; the registry and the regions table take a mutex. */
#include "gmp_nvtx.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define NVTX_NO_IMPL /* types only: the implementation is ours */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "gmp_hash.h"

/* ------------------------------------------------------------------------------------------- */
/* Global state                                                                                 */

static gmp_sink g_sink;
static _Atomic(gmp_writer *) g_w;
static atomic_int g_active;
static atomic_uint g_gen; /* bumped by each gmp_nvtx_init; 0 = never initialized */
static atomic_ullong g_next_range_id = 1;
static atomic_ullong g_next_heap = 1;
static atomic_int g_warned_regions;

static inline int active(void)
{
    return atomic_load_explicit(&g_active, memory_order_acquire);
}

static inline uint32_t cur_gen(void)
{
    return atomic_load_explicit(&g_gen, memory_order_relaxed);
}

static inline gmp_writer *cur_writer(void)
{
    return atomic_load_explicit(&g_w, memory_order_relaxed);
}

/* Bounded length of a C string, cut at a UTF-8 character boundary when longer than a trace string
 * may be. */
static size_t bounded_len(const char *s)
{
    size_t n = strnlen(s, GMP_MAX_STRING_BYTES);
    if (n == GMP_MAX_STRING_BYTES && s[n] != '\0') {
        for (int k = 0; k < 3 && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80; k++)
            n--;
    }
    return n;
}

/* Encodes one code point; returns the bytes written (1..4). Invalid ones become U+FFFD. */
static size_t utf8_put(char *o, uint32_t c)
{
    if (c >= 0xD800 && c <= 0xDFFF)
        c = 0xFFFD;
    if (c > 0x10FFFF)
        c = 0xFFFD;
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Converts ws to UTF-8 into out (cap bytes, NUL included). Returns the length; *cut set when
 * the string did not fit. Never splits a character. */
static size_t wide_to_utf8(const wchar_t *ws, char *out, size_t cap, int *cut)
{
    size_t n = 0;
    *cut = 0;
    for (; *ws; ws++) {
        char tmp[4];
        size_t k = utf8_put(tmp, (uint32_t)*ws);
        if (n + k + 1 > cap) {
            *cut = 1;
            break;
        }
        memcpy(out + n, tmp, k);
        n += k;
    }
    out[n] = '\0';
    return n;
}

/* A name as NVTX passes it, made into UTF-8 bytes. */
enum { MSG_NONE = 0, MSG_ASCII = 1, MSG_WIDE = 2, MSG_REG = 3 };
#define MSG_RECORDED 4u /* a thread cache entry keyed by the name recorded (see node_for) */

typedef struct nvtx_msg {
    int kind;
    uintptr_t key;    /* ASCII/WIDE: the caller's pointer; REG: the handle value */
    const char *text; /* NUL-terminated UTF-8 (ASCII: the caller's string) */
    char *heap;       /* WIDE strings longer than buf */
    char buf[192];
} nvtx_msg;

static void msg_none(nvtx_msg *m)
{
    m->kind = MSG_NONE;
    m->key = 0;
    m->text = NULL;
    m->heap = NULL;
}

static void msg_ascii(nvtx_msg *m, const char *s)
{
    msg_none(m);
    if (!s)
        return;
    m->kind = MSG_ASCII;
    m->key = (uintptr_t)s;
    m->text = s;
}

static void msg_wide(nvtx_msg *m, const wchar_t *ws)
{
    msg_none(m);
    if (!ws)
        return;
    int cut;
    wide_to_utf8(ws, m->buf, sizeof m->buf, &cut);
    m->text = m->buf;
    if (cut) {
        m->heap = malloc(GMP_MAX_STRING_BYTES + 1);
        if (m->heap) {
            wide_to_utf8(ws, m->heap, GMP_MAX_STRING_BYTES + 1, &cut);
            m->text = m->heap;
        }
    }
    m->kind = MSG_WIDE;
    m->key = (uintptr_t)ws;
}

static void msg_reg(nvtx_msg *m, const void *handle)
{
    msg_none(m);
    if (!handle)
        return;
    m->kind = MSG_REG;
    m->key = (uintptr_t)handle;
}

static void msg_done(nvtx_msg *m)
{
    free(m->heap);
    m->heap = NULL;
}

static void msg_from_attr(nvtx_msg *m, const nvtxEventAttributes_t *a)
{
    msg_none(m);
    /* A missing, unversioned or too small structure is an event without a name. */
    if (!a || a->version == 0 ||
        a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
        return;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: msg_ascii(m, a->message.ascii); break;
    case NVTX_MESSAGE_TYPE_UNICODE: msg_wide(m, a->message.unicode); break;
    case NVTX_MESSAGE_TYPE_REGISTERED: msg_reg(m, a->message.registered); break;
    default: break;
    }
}

/* ------------------------------------------------------------------------------------------- */
/* Registry of owned handles: domains and registered strings.                                  */

#define REG_TAG_DOMAIN 0x4u
#define REG_TAG_STRING 0x8u
#define REG_CHUNK 1024u
#define REG_MAX_CHUNKS 1024u /* at most 1 Mi distinct domains + registered strings */

typedef struct reg_entry {
    _Atomic uint64_t sid_gen; /* string id | generation << 32; 0 = not interned yet */
    char *text;
    uint32_t len;
    uint32_t tag;
} reg_entry;

static _Atomic(reg_entry *) g_reg[REG_MAX_CHUNKS];
static atomic_uint g_reg_n;
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *g_rmap; /* dedup: (tag, text) -> index + 1; open addressing */
static size_t g_rmap_cap;

static uint64_t hash_text(const char *s, size_t n, uint32_t tag)
{
    uint64_t h = gmp_fnv1a(GMP_FNV1A_OFFSET ^ tag, s, n);
    return h ^ (h >> 29);
}

static reg_entry *reg_at(uint32_t idx)
{
    reg_entry *c = atomic_load_explicit(&g_reg[idx / REG_CHUNK], memory_order_acquire);
    return c ? &c[idx % REG_CHUNK] : NULL;
}

/* Interns the entry's text in the current writer (once per generation); 0 on failure. Only from
 * inside sink->enter(). */
static uint32_t reg_entry_sid(reg_entry *e)
{
    uint32_t gen = cur_gen();
    uint64_t sg = atomic_load_explicit(&e->sid_gen, memory_order_acquire);
    if ((uint32_t)(sg >> 32) == gen && (uint32_t)sg)
        return (uint32_t)sg;
    uint32_t sid = gmp_writer_string(cur_writer(), e->text, e->len);
    if (sid)
        atomic_store_explicit(&e->sid_gen, sid | ((uint64_t)gen << 32), memory_order_release);
    return sid;
}

/* The entry a handle names, or NULL for anything we did not hand out. */
static reg_entry *reg_lookup(uintptr_t h, uint32_t tag)
{
    if ((h & 0xF) != tag || (h >> 4) == 0)
        return NULL;
    uintptr_t idx = (h >> 4) - 1;
    if (idx >= atomic_load_explicit(&g_reg_n, memory_order_acquire))
        return NULL;
    reg_entry *e = reg_at((uint32_t)idx);
    return e && e->tag == tag ? e : NULL;
}

static int rmap_grow(void)
{
    size_t nc = g_rmap_cap ? g_rmap_cap * 2 : 256;
    uint32_t *nm = calloc(nc, sizeof *nm);
    if (!nm)
        return -1;
    for (size_t i = 0; i < g_rmap_cap; i++) {
        if (!g_rmap[i])
            continue;
        reg_entry *e = reg_at(g_rmap[i] - 1);
        size_t j = hash_text(e->text, e->len, e->tag) & (nc - 1);
        while (nm[j])
            j = (j + 1) & (nc - 1);
        nm[j] = g_rmap[i];
    }
    free(g_rmap);
    g_rmap = nm;
    g_rmap_cap = nc;
    return 0;
}

/* Returns the handle for (tag, s): the same text always gets the same handle. 0 when the
 * registry is full or out of memory. */
static uintptr_t reg_register(uint32_t tag, const char *s, size_t n)
{
    uintptr_t h = 0;
    pthread_mutex_lock(&g_reg_lock);
    uint32_t count = atomic_load_explicit(&g_reg_n, memory_order_relaxed);
    if ((count + 1) * 2 > g_rmap_cap && rmap_grow() < 0)
        goto out;
    uint64_t hv = hash_text(s, n, tag);
    size_t j = hv & (g_rmap_cap - 1);
    while (g_rmap[j]) {
        reg_entry *e = reg_at(g_rmap[j] - 1);
        if (e->tag == tag && e->len == n && memcmp(e->text, s, n) == 0) {
            h = ((uintptr_t)g_rmap[j] << 4) | tag;
            goto out;
        }
        j = (j + 1) & (g_rmap_cap - 1);
    }
    if (count >= REG_CHUNK * REG_MAX_CHUNKS)
        goto out;
    reg_entry *chunk = atomic_load_explicit(&g_reg[count / REG_CHUNK], memory_order_relaxed);
    if (!chunk) {
        chunk = calloc(REG_CHUNK, sizeof *chunk);
        if (!chunk)
            goto out;
        atomic_store_explicit(&g_reg[count / REG_CHUNK], chunk, memory_order_release);
    }
    reg_entry *e = &chunk[count % REG_CHUNK];
    e->text = malloc(n ? n : 1);
    if (!e->text)
        goto out;
    memcpy(e->text, s, n);
    e->len = (uint32_t)n;
    e->tag = tag;
    atomic_store_explicit(&e->sid_gen, 0, memory_order_relaxed);
    g_rmap[j] = count + 1;
    atomic_store_explicit(&g_reg_n, count + 1, memory_order_release);
    h = ((uintptr_t)(count + 1) << 4) | tag;
out:
    pthread_mutex_unlock(&g_reg_lock);
    return h;
}

/* Registers text (UTF-8 already) and interns it at once when recording on this thread. */
static uintptr_t reg_create(uint32_t tag, const char *s, size_t n)
{
    uintptr_t h = reg_register(tag, s, n);
    if (h) {
        gmp_wthread *wt = g_sink.enter();
        if (wt) {
            reg_entry_sid(reg_lookup(h, tag));
            g_sink.leave();
        }
    }
    return h;
}

/* Domain string id of a handle: 0 for the default domain (NULL) and for unknown handles. Only
 * from inside sink->enter(). */
static uint32_t domain_sid(nvtxDomainHandle_t d)
{
    if (!d)
        return 0;
    reg_entry *e = reg_lookup((uintptr_t)d, REG_TAG_DOMAIN);
    return e ? reg_entry_sid(e) : 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Per-thread state                                                                             */

#define CACHE_SLOTS 64u /* power of two */
#define CACHE_TEXT 63u  /* longest name kept in the cache */

typedef struct nvtx_level {
    uint32_t path;   /* path id after this push (the parent's when silent) */
    uint32_t domain; /* domain string id (0 default) */
    uint32_t name;   /* name string id */
    uint32_t silent; /* no node / no events for this level */
} nvtx_level;

typedef struct nvtx_centry {
    uintptr_t key;
    uint32_t kind, parent, domain, path, name, len;
    char text[CACHE_TEXT + 1];
} nvtx_centry;

typedef struct nvtx_tls {
    uint32_t gen;   /* g_gen this state belongs to */
    uint32_t depth; /* open pushes, overflow included */
    uint32_t cur;   /* path of the innermost open level */
    nvtx_level lv[GMP_NVTX_MAX_DEPTH];
    nvtx_centry cache[CACHE_SLOTS];
} nvtx_tls;

static __thread nvtx_tls tls;

static nvtx_tls *tls_get(void)
{
    nvtx_tls *t = &tls;
    uint32_t g = cur_gen();
    if (t->gen != g) {
        t->gen = g;
        t->depth = 0;
        t->cur = 0;
        for (unsigned i = 0; i < CACHE_SLOTS; i++) {
            t->cache[i].kind = MSG_NONE;
            t->cache[i].path = 0; /* an empty slot */
        }
    }
    return t;
}

static unsigned cache_slot(uintptr_t key, int kind, uint32_t parent, uint32_t domain)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)parent << 32 | domain) * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)kind;
    return (unsigned)(h >> 58) & (CACHE_SLOTS - 1);
}

/* ------------------------------------------------------------------------------------------- */
/* Range names, bounded per trace                                                               */

/* A program may name every push differently: PyTorch's torch.autograd.profiler.emit_nvtx() pushes
 * "NAME, seq = N, op_id = M, sizes = [...]" per operator call (torch/csrc/profiler/util.cpp,
 * getNvtxStr). Each new name would be a string and a range node in the writer's tables, for the
 * life of the trace, under its lock. So: (1) a name in that form is recorded under NAME (the
 * operator; its numbers and shapes are per call); (2) at most NAME_CAP distinct names per trace:
 * past it, a new name gets its digits folded ("step 12345" -> "step #") within NAME_RESERVE more
 * names, and past that the name OTHER_NAME. Counted, and said in one notice at shutdown. The set
 * of names seen holds 64-bit hashes in a lock-free open-addressed table. */
#define NAME_CAP 16384u
#define NAME_RESERVE 4096u
#define NAME_SLOTS 65536u /* power of two, above 2 * (NAME_CAP + NAME_RESERVE) */
#define FOLD_BYTES 256u   /* a folded name is cut there (at a character boundary) */
#define OTHER_NAME "(other NVTX names)"

static _Atomic uint64_t g_names[NAME_SLOTS];
static atomic_uint g_names_n;
static atomic_ullong g_torch_named, g_folded, g_other;

/* 1 when the name with hash h was seen in this trace or is added now (fewer than limit names) */
static int names_admit(uint64_t h, unsigned limit)
{
    h |= 1; /* 0 marks an empty slot */
    for (unsigned i = 0, j = (unsigned)(h >> 20); i < NAME_SLOTS; i++, j++) {
        _Atomic uint64_t *slot = &g_names[j & (NAME_SLOTS - 1)];
        uint64_t v = atomic_load_explicit(slot, memory_order_relaxed);
        while (!v) {
            if (atomic_load_explicit(&g_names_n, memory_order_relaxed) >= limit)
                return 0;
            if (atomic_compare_exchange_weak_explicit(slot, &v, h, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                atomic_fetch_add_explicit(&g_names_n, 1, memory_order_relaxed);
                return 1;
            }
        }
        if (v == h)
            return 1;
    }
    return 0;
}

static void names_reset(void)
{
    for (unsigned i = 0; i < NAME_SLOTS; i++)
        atomic_store_explicit(&g_names[i], 0, memory_order_relaxed);
    atomic_store(&g_names_n, 0);
    atomic_store(&g_torch_named, 0);
    atomic_store(&g_folded, 0);
    atomic_store(&g_other, 0);
}

/* The length of NAME when text (n bytes) is "NAME, seq = N...", "NAME, op_id = N...",
 * "NAME, sizes = [..." or "NAME, input_op_ids = [..." (getNvtxStr's parts, in that order); else n
 */
static size_t torch_name_len(const char *text, size_t n)
{
    static const struct {
        const char *s;
        size_t n;
    } parts[] = {
        {", seq = ", 8}, {", op_id = ", 10}, {", sizes = [", 11}, {", input_op_ids = [", 18}};
    for (size_t i = 0; i + 2 < n; i++) {
        if (text[i] != ',' || text[i + 1] != ' ')
            continue;
        for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
            size_t m = parts[k].n;
            if (i + m < n && !memcmp(text + i, parts[k].s, m) &&
                (parts[k].s[m - 1] == '[' || (text[i + m] >= '0' && text[i + m] <= '9') ||
                 text[i + m] == '-'))
                return i;
        }
        return n; /* the first ", " is not one of them: a name of the program's own */
    }
    return n;
}

/* text (n bytes) with every run of digits as '#', into out (FOLD_BYTES); its length. A copy cut
 * short ends before the character the cut would split. */
static size_t fold_digits(const char *text, size_t n, char *out)
{
    size_t k = 0, i = 0;
    for (; i < n && k < FOLD_BYTES; i++) {
        if (text[i] >= '0' && text[i] <= '9') {
            if (!k || out[k - 1] != '#')
                out[k++] = '#';
        } else {
            out[k++] = text[i];
        }
    }
    if (i < n && k > 0) {
        size_t j = k - 1;
        while (j > 0 && ((unsigned char)out[j] & 0xC0) == 0x80)
            j--;
        unsigned char lead = (unsigned char)out[j];
        size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (j + len > k)
            k = j;
    }
    return k;
}

/* The name recorded for text (*n bytes): text itself, a prefix of it, out (a folded copy) or
 * OTHER_NAME; *n gets its length. */
static const char *bounded_name(const char *text, size_t *n, char *out)
{
    size_t len = torch_name_len(text, *n);
    if (len < *n)
        atomic_fetch_add_explicit(&g_torch_named, 1, memory_order_relaxed);
    if (names_admit(gmp_hash_bytes(0, text, len), NAME_CAP)) {
        *n = len;
        return text;
    }
    size_t k = fold_digits(text, len, out);
    if (names_admit(gmp_hash_bytes(0, out, k), NAME_CAP + NAME_RESERVE)) {
        atomic_fetch_add_explicit(&g_folded, 1, memory_order_relaxed);
        *n = k;
        return out;
    }
    atomic_fetch_add_explicit(&g_other, 1, memory_order_relaxed);
    *n = sizeof OTHER_NAME - 1;
    return OTHER_NAME;
}

/* One notice saying what bounded_name changed, if anything. */
static void names_notice(void)
{
    unsigned long long torch = atomic_load(&g_torch_named), folded = atomic_load(&g_folded),
                       other = atomic_load(&g_other);
    if (!torch && !folded && !other)
        return;
    char msg[640];
    int k = snprintf(msg, sizeof msg, "NVTX range names bounded:");
    if (torch && k > 0 && (size_t)k < sizeof msg)
        k += snprintf(msg + k, sizeof msg - (size_t)k,
                      " %llu names in PyTorch's emit_nvtx form (\"NAME, seq = N, op_id = M, "
                      "sizes = [...]\") recorded as their operator's NAME%s",
                      torch, folded || other ? ";" : "");
    if ((folded || other) && k > 0 && (size_t)k < sizeof msg)
        snprintf(msg + k, sizeof msg - (size_t)k,
                 " past %u distinct names, %llu ranges with a new name recorded with its digits "
                 "as '#' and %llu as \"" OTHER_NAME "\"",
                 NAME_CAP, folded, other);
    gmp_wthread *wt = g_sink.enter();
    if (!wt)
        return;
    gmp_rec r = {.type = GMP_REC_NOTICE};
    r.u.notice.severity = folded || other ? GMP_NOTICE_WARNING : GMP_NOTICE_INFO;
    r.u.notice.message = (gmp_str){msg, (uint32_t)strnlen(msg, sizeof msg)};
    gmp_wthread_event(wt, &r);
    g_sink.leave();
}

/* The path node of a name recorded other than the program wrote it (PyTorch's form cut to its
 * operator, digits folded): through the thread's cache keyed by the recorded name, so that
 * `emit_nvtx()`'s pushes, a new text each, take no lock once their operator is known. */
static uint32_t node_recorded(nvtx_tls *t, uint32_t parent, uint32_t domain, const char *text,
                              size_t n, uint32_t *name_out)
{
    uintptr_t key = (uintptr_t)gmp_hash_bytes(0, text, n);
    nvtx_centry *e = &t->cache[cache_slot(key, (int)MSG_RECORDED, parent, domain)];
    if (e->path && e->kind == MSG_RECORDED && e->key == key && e->parent == parent &&
        e->domain == domain && e->len == n && !memcmp(e->text, text, n)) {
        *name_out = e->name;
        return e->path;
    }
    gmp_writer *w = cur_writer();
    uint32_t name = gmp_writer_string(w, text, n);
    uint32_t path = gmp_writer_range(w, parent, domain, name);
    *name_out = name;
    if (path) {
        e->key = key;
        e->kind = MSG_RECORDED;
        e->parent = parent;
        e->domain = domain;
        e->path = path;
        e->name = name;
        e->len = (uint32_t)n;
        memcpy(e->text, text, n);
        e->text[n] = '\0';
    }
    return path;
}

/* Path node of (parent, domain, name); *name_out gets the name's string id. 0 on failure. Only
 * from inside sink->enter(). */
static uint32_t node_for(nvtx_tls *t, uint32_t parent, uint32_t domain, const nvtx_msg *m,
                         uint32_t *name_out)
{
    gmp_writer *w = cur_writer();
    nvtx_centry *e = &t->cache[cache_slot(m->key, m->kind, parent, domain)];
    if (e->path && e->kind == (uint32_t)m->kind && e->key == m->key && e->parent == parent &&
        e->domain == domain) {
        int hit = 1;
        if (m->kind == MSG_ASCII || m->kind == MSG_WIDE) {
            /* byte-wise up to and including the cached NUL: stops at the caller's NUL */
            for (uint32_t i = 0; i <= e->len; i++) {
                if (m->text[i] != e->text[i]) {
                    hit = 0;
                    break;
                }
            }
        }
        if (hit) {
            *name_out = e->name;
            return e->path;
        }
    }
    uint32_t name = 0;
    size_t len = 0;
    switch (m->kind) {
    case MSG_ASCII:
    case MSG_WIDE: {
        len = bounded_len(m->text);
        char folded[FOLD_BYTES];
        size_t n = len;
        const char *text = bounded_name(m->text, &n, folded);
        if ((text != m->text || n != len) && n <= CACHE_TEXT)
            return node_recorded(t, parent, domain, text, n, name_out);
        name = gmp_writer_string(w, text, n);
        break;
    }
    case MSG_REG: {
        reg_entry *re = reg_lookup(m->key, REG_TAG_STRING);
        name = re ? reg_entry_sid(re) : 0;
        break;
    }
    default: break;
    }
    uint32_t path = gmp_writer_range(w, parent, domain, name);
    *name_out = name;
    if (path && len <= CACHE_TEXT) {
        e->key = m->key;
        e->kind = (uint32_t)m->kind;
        e->parent = parent;
        e->domain = domain;
        e->path = path;
        e->name = name;
        e->len = (uint32_t)len;
        if (len)
            memcpy(e->text, m->text, len);
        e->text[len] = '\0';
    }
    return path;
}

static void emit_range(gmp_wthread *wt, uint32_t type, uint32_t range, uint64_t handle)
{
    gmp_rec ev = {.type = type};
    ev.u.rev.range = range;
    ev.u.rev.handle = handle;
    gmp_wthread_event(wt, &ev);
}

/* ------------------------------------------------------------------------------------------- */
/* Ranges and marks                                                                             */

/* Domain handles are resolved inside enter(); NULL = default domain. */
static int do_push(nvtxDomainHandle_t dom, const nvtx_msg *m)
{
    if (!active())
        return NVTX_NO_PUSH_POP_TRACKING;
    nvtx_tls *t = tls_get();
    if (t->depth >= GMP_NVTX_MAX_DEPTH) {
        if (t->depth < INT_MAX)
            t->depth++;
        return (int)t->depth - 1;
    }
    nvtx_level *l = &t->lv[t->depth];
    uint32_t parent = t->cur;
    l->path = parent;
    l->domain = 0;
    l->name = 0;
    l->silent = 1;
    gmp_wthread *wt = g_sink.enter();
    if (wt) {
        uint32_t domain = domain_sid(dom), name;
        l->domain = domain;
        uint32_t path = node_for(t, parent, domain, m, &name);
        if (path) {
            l->path = path;
            l->name = name;
            l->silent = 0;
            emit_range(wt, GMP_REC_RANGE_PUSH, path, 0);
        }
        g_sink.leave();
    } else if (dom) {
        /* not recording now: still remember the domain so that its pop finds this level */
        reg_entry *e = reg_lookup((uintptr_t)dom, REG_TAG_DOMAIN);
        uint64_t sg = e ? atomic_load_explicit(&e->sid_gen, memory_order_acquire) : 0;
        if ((uint32_t)(sg >> 32) == t->gen)
            l->domain = (uint32_t)sg;
    }
    t->cur = l->path;
    /* the level within the range's own domain (nvToolsExt.h, nvtxDomainRangePushEx: "the 0 based
     * level of range being started"; levels are per domain) */
    int level = 0;
    for (uint32_t j = 0; j < t->depth; j++)
        level += t->lv[j].domain == l->domain;
    t->depth++;
    return level;
}

static int do_pop(nvtxDomainHandle_t dom)
{
    if (!active())
        return NVTX_NO_PUSH_POP_TRACKING;
    nvtx_tls *t = tls_get();
    if (t->depth == 0)
        return -1;
    if (t->depth > GMP_NVTX_MAX_DEPTH) {
        t->depth--;
        return (int)t->depth;
    }
    gmp_wthread *wt = g_sink.enter();
    uint32_t domain = 0;
    if (dom) {
        if (wt) {
            domain = domain_sid(dom);
        } else {
            reg_entry *e = reg_lookup((uintptr_t)dom, REG_TAG_DOMAIN);
            uint64_t sg = e ? atomic_load_explicit(&e->sid_gen, memory_order_acquire) : 0;
            domain = (uint32_t)(sg >> 32) == t->gen ? (uint32_t)sg : 0;
        }
    }
    uint32_t k = t->depth;
    while (k > 0 && t->lv[k - 1].domain != domain)
        k--;
    if (k == 0) { /* nothing open in this domain */
        if (wt)
            g_sink.leave();
        return -1;
    }
    k--;
    if (wt && !t->lv[k].silent)
        emit_range(wt, GMP_REC_RANGE_POP, t->lv[k].path, 0);
    /* levels above the closed one move down and get new paths (cross-domain, non-LIFO pop) */
    uint32_t parent = k ? t->lv[k - 1].path : 0;
    for (uint32_t j = k + 1; j < t->depth; j++) {
        nvtx_level l = t->lv[j];
        uint32_t p = 0;
        if (!l.silent && wt)
            p = gmp_writer_range(cur_writer(), parent, l.domain, l.name);
        if (p) {
            l.path = p;
        } else {
            l.path = parent;
            l.silent = 1;
        }
        t->lv[j - 1] = l;
        parent = l.path;
    }
    t->depth--;
    t->cur = t->depth ? t->lv[t->depth - 1].path : 0;
    if (wt)
        g_sink.leave();
    int level = 0; /* the level of the range ended, within its domain (nvToolsExt.h) */
    for (uint32_t j = 0; j < k; j++)
        level += t->lv[j].domain == domain;
    return level;
}

static nvtxRangeId_t do_start(nvtxDomainHandle_t dom, const nvtx_msg *m)
{
    if (!active())
        return 0;
    uint64_t id = atomic_fetch_add_explicit(&g_next_range_id, 1, memory_order_relaxed);
    nvtx_tls *t = tls_get();
    gmp_wthread *wt = g_sink.enter();
    if (wt) {
        uint32_t name;
        uint32_t node = node_for(t, 0, domain_sid(dom), m, &name);
        if (node)
            emit_range(wt, GMP_REC_RANGE_START, node, id);
        g_sink.leave();
    }
    return id;
}

static void do_end(nvtxRangeId_t id)
{
    if (!active() || !id)
        return;
    gmp_wthread *wt = g_sink.enter();
    if (wt) {
        emit_range(wt, GMP_REC_RANGE_END, 0, id);
        g_sink.leave();
    }
}

static void do_mark(nvtxDomainHandle_t dom, const nvtx_msg *m)
{
    if (!active())
        return;
    nvtx_tls *t = tls_get();
    gmp_wthread *wt = g_sink.enter();
    if (wt) {
        uint32_t name;
        uint32_t node = node_for(t, 0, domain_sid(dom), m, &name);
        if (node)
            emit_range(wt, GMP_REC_MARK, node, 0);
        g_sink.leave();
    }
}

static void name_thread(uint32_t tid, const char *s)
{
    if (!active() || !s)
        return;
    gmp_wthread *wt = g_sink.enter();
    if (wt) {
        gmp_rec def = {.type = GMP_REC_THREAD};
        def.u.thread.tid = tid;
        def.u.thread.name.ptr = s;
        def.u.thread.name.len = (uint32_t)bounded_len(s);
        gmp_writer_define(cur_writer(), &def);
        g_sink.leave();
    }
}

/* ---- CORE ---- */

static void NVTX_API impl_MarkEx(const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    do_mark(NULL, &m);
    msg_done(&m);
}

static void NVTX_API impl_MarkA(const char *s)
{
    nvtx_msg m;
    msg_ascii(&m, s);
    do_mark(NULL, &m);
}

static void NVTX_API impl_MarkW(const wchar_t *s)
{
    nvtx_msg m;
    msg_wide(&m, s);
    do_mark(NULL, &m);
    msg_done(&m);
}

static nvtxRangeId_t NVTX_API impl_RangeStartEx(const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    nvtxRangeId_t id = do_start(NULL, &m);
    msg_done(&m);
    return id;
}

static nvtxRangeId_t NVTX_API impl_RangeStartA(const char *s)
{
    nvtx_msg m;
    msg_ascii(&m, s);
    return do_start(NULL, &m);
}

static nvtxRangeId_t NVTX_API impl_RangeStartW(const wchar_t *s)
{
    nvtx_msg m;
    msg_wide(&m, s);
    nvtxRangeId_t id = do_start(NULL, &m);
    msg_done(&m);
    return id;
}

static void NVTX_API impl_RangeEnd(nvtxRangeId_t id)
{
    do_end(id);
}

static int NVTX_API impl_RangePushEx(const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    int r = do_push(NULL, &m);
    msg_done(&m);
    return r;
}

static int NVTX_API impl_RangePushA(const char *s)
{
    nvtx_msg m;
    msg_ascii(&m, s);
    return do_push(NULL, &m);
}

static int NVTX_API impl_RangePushW(const wchar_t *s)
{
    nvtx_msg m;
    msg_wide(&m, s);
    int r = do_push(NULL, &m);
    msg_done(&m);
    return r;
}

static int NVTX_API impl_RangePop(void)
{
    return do_pop(NULL);
}

/* Categories have no record in the trace (format v1): accepted and ignored. */
static void NVTX_API impl_NameCategoryA(uint32_t category, const char *name)
{
    (void)category;
    (void)name;
}

static void NVTX_API impl_NameCategoryW(uint32_t category, const wchar_t *name)
{
    (void)category;
    (void)name;
}

static void NVTX_API impl_NameOsThreadA(uint32_t tid, const char *name)
{
    name_thread(tid, name);
}

static void NVTX_API impl_NameOsThreadW(uint32_t tid, const wchar_t *name)
{
    nvtx_msg m;
    msg_wide(&m, name);
    if (m.text)
        name_thread(tid, m.text);
    msg_done(&m);
}

/* ---- CORE2 (domains) ---- */

static void NVTX_API impl_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    do_mark(d, &m);
    msg_done(&m);
}

static nvtxRangeId_t NVTX_API impl_DomainRangeStartEx(nvtxDomainHandle_t d,
                                                      const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    nvtxRangeId_t id = do_start(d, &m);
    msg_done(&m);
    return id;
}

static void NVTX_API impl_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    do_end(id);
}

static int NVTX_API impl_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    nvtx_msg m;
    msg_from_attr(&m, a);
    int r = do_push(d, &m);
    msg_done(&m);
    return r;
}

static int NVTX_API impl_DomainRangePop(nvtxDomainHandle_t d)
{
    return do_pop(d);
}

/* Resources (naming of OS/CUDA objects inside a domain) are not recorded; a non-NULL dummy
 * handle keeps callers that test for NULL happy. */
static int g_dummy_object;

static nvtxResourceHandle_t NVTX_API impl_DomainResourceCreate(nvtxDomainHandle_t d,
                                                               nvtxResourceAttributes_t *a)
{
    (void)d;
    (void)a;
    return (nvtxResourceHandle_t)(void *)&g_dummy_object;
}

static void NVTX_API impl_DomainResourceDestroy(nvtxResourceHandle_t r)
{
    (void)r;
}

static void NVTX_API impl_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char *n)
{
    (void)d;
    (void)c;
    (void)n;
}

static void NVTX_API impl_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n)
{
    (void)d;
    (void)c;
    (void)n;
}

static nvtxStringHandle_t NVTX_API impl_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s)
{
    (void)d; /* strings are global in the trace; the domain does not change the text */
    if (!active() || !s)
        return NULL;
    return (nvtxStringHandle_t)reg_create(REG_TAG_STRING, s, bounded_len(s));
}

static nvtxStringHandle_t NVTX_API impl_DomainRegisterStringW(nvtxDomainHandle_t d,
                                                              const wchar_t *s)
{
    (void)d;
    if (!active() || !s)
        return NULL;
    nvtx_msg m;
    msg_wide(&m, s);
    uintptr_t h = reg_create(REG_TAG_STRING, m.text, bounded_len(m.text));
    msg_done(&m);
    return (nvtxStringHandle_t)h;
}

static nvtxDomainHandle_t NVTX_API impl_DomainCreateA(const char *name)
{
    if (!active() || !name)
        return NULL; /* NULL is the default domain */
    return (nvtxDomainHandle_t)reg_create(REG_TAG_DOMAIN, name, bounded_len(name));
}

static _Atomic(nvtxDomainHandle_t) g_layer_domain;

static nvtxDomainHandle_t layer_domain(void)
{
    nvtxDomainHandle_t d = atomic_load_explicit(&g_layer_domain, memory_order_acquire);
    if (!d) {
        /* two threads may both create it: the same name gives the same domain string id. The
         * literal's length is known; bounded_len() inlined on it made GCC -O3 warn
         * (-Warray-bounds on a branch that cannot run). */
        static const char name[] = "gpumemprof.layers";
        d = active() ? (nvtxDomainHandle_t)reg_create(REG_TAG_DOMAIN, name, sizeof name - 1) : NULL;
        if (d)
            atomic_store_explicit(&g_layer_domain, d, memory_order_release);
    }
    return d;
}

int gmp_nvtx_layer_push(const char *name)
{
    if (!active() || !name)
        return NVTX_NO_PUSH_POP_TRACKING;
    nvtxDomainHandle_t d = layer_domain();
    if (!d)
        return NVTX_NO_PUSH_POP_TRACKING;
    nvtx_msg m;
    msg_ascii(&m, name);
    return do_push(d, &m);
}

int gmp_nvtx_layer_pop(void)
{
    if (!active())
        return NVTX_NO_PUSH_POP_TRACKING;
    nvtxDomainHandle_t d = atomic_load_explicit(&g_layer_domain, memory_order_acquire);
    return d ? do_pop(d) : -1;
}

static nvtxDomainHandle_t NVTX_API impl_DomainCreateW(const wchar_t *name)
{
    if (!active() || !name)
        return NULL;
    nvtx_msg m;
    msg_wide(&m, name);
    uintptr_t h = reg_create(REG_TAG_DOMAIN, m.text, bounded_len(m.text));
    msg_done(&m);
    return (nvtxDomainHandle_t)h;
}

/* Domain handles stay valid for the life of the process (creating the same name again returns
 * the same handle), so destroying one is a no-op and a late use of it is harmless. */
static void NVTX_API impl_DomainDestroy(nvtxDomainHandle_t d)
{
    (void)d;
}

static void NVTX_API impl_Initialize(const void *reserved)
{
    (void)reserved;
}

/* ---- export table ---- */

#define FN(f) ((NvtxFunctionPointer)(f))

static const NvtxFunctionPointer core_fns[NVTX_CBID_CORE_SIZE] = {
    [NVTX_CBID_CORE_MarkEx] = FN(impl_MarkEx),
    [NVTX_CBID_CORE_MarkA] = FN(impl_MarkA),
    [NVTX_CBID_CORE_MarkW] = FN(impl_MarkW),
    [NVTX_CBID_CORE_RangeStartEx] = FN(impl_RangeStartEx),
    [NVTX_CBID_CORE_RangeStartA] = FN(impl_RangeStartA),
    [NVTX_CBID_CORE_RangeStartW] = FN(impl_RangeStartW),
    [NVTX_CBID_CORE_RangeEnd] = FN(impl_RangeEnd),
    [NVTX_CBID_CORE_RangePushEx] = FN(impl_RangePushEx),
    [NVTX_CBID_CORE_RangePushA] = FN(impl_RangePushA),
    [NVTX_CBID_CORE_RangePushW] = FN(impl_RangePushW),
    [NVTX_CBID_CORE_RangePop] = FN(impl_RangePop),
    [NVTX_CBID_CORE_NameCategoryA] = FN(impl_NameCategoryA),
    [NVTX_CBID_CORE_NameCategoryW] = FN(impl_NameCategoryW),
    [NVTX_CBID_CORE_NameOsThreadA] = FN(impl_NameOsThreadA),
    [NVTX_CBID_CORE_NameOsThreadW] = FN(impl_NameOsThreadW),
};

static const NvtxFunctionPointer core2_fns[NVTX_CBID_CORE2_SIZE] = {
    [NVTX_CBID_CORE2_DomainMarkEx] = FN(impl_DomainMarkEx),
    [NVTX_CBID_CORE2_DomainRangeStartEx] = FN(impl_DomainRangeStartEx),
    [NVTX_CBID_CORE2_DomainRangeEnd] = FN(impl_DomainRangeEnd),
    [NVTX_CBID_CORE2_DomainRangePushEx] = FN(impl_DomainRangePushEx),
    [NVTX_CBID_CORE2_DomainRangePop] = FN(impl_DomainRangePop),
    [NVTX_CBID_CORE2_DomainResourceCreate] = FN(impl_DomainResourceCreate),
    [NVTX_CBID_CORE2_DomainResourceDestroy] = FN(impl_DomainResourceDestroy),
    [NVTX_CBID_CORE2_DomainNameCategoryA] = FN(impl_DomainNameCategoryA),
    [NVTX_CBID_CORE2_DomainNameCategoryW] = FN(impl_DomainNameCategoryW),
    [NVTX_CBID_CORE2_DomainRegisterStringA] = FN(impl_DomainRegisterStringA),
    [NVTX_CBID_CORE2_DomainRegisterStringW] = FN(impl_DomainRegisterStringW),
    [NVTX_CBID_CORE2_DomainCreateA] = FN(impl_DomainCreateA),
    [NVTX_CBID_CORE2_DomainCreateW] = FN(impl_DomainCreateW),
    [NVTX_CBID_CORE2_DomainDestroy] = FN(impl_DomainDestroy),
    [NVTX_CBID_CORE2_Initialize] = FN(impl_Initialize),
};

/* Fills the slots of one module that we implement. The CUDA, CUDART, OPENCL and SYNC modules
 * (naming driver objects, user synchronization) carry nothing the trace records: their slots are
 * left alone and the NVTX loader turns them into no-ops. */
static int fill_module(const NvtxExportTableCallbacks *cb, NvtxCallbackModule mod,
                       const NvtxFunctionPointer *fns, unsigned nfns)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(mod, &table, &size) || !table)
        return 0;
    /* slot 0 is the INVALID id; size counts it; table[size] is a terminating NULL */
    for (unsigned i = 1; i < size && i < nfns; i++) {
        if (table[i] && fns[i])
            *table[i] = fns[i];
    }
    return 1;
}

int gmp_nvtx_inject(void *getExportTable)
{
    if (!active() || !getExportTable)
        return 0;
    NvtxGetExportTableFunc_t get = (NvtxGetExportTableFunc_t)getExportTable;
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
        return 0;
    if (!fill_module(cb, NVTX_CB_MODULE_CORE, core_fns, NVTX_CBID_CORE_SIZE))
        return 0;
    fill_module(cb, NVTX_CB_MODULE_CORE2, core2_fns, NVTX_CBID_CORE2_SIZE);
    const NvtxExportTableVersionInfo *vi = get(NVTX_ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof *vi && vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
}

/* ------------------------------------------------------------------------------------------- */
/* Memory extension                                                                             */

enum { API_REGISTER, API_UNREGISTER, API_RESIZE, API_HEAP_UNREGISTER, API_HEAP_RESET, API_N };
static const char *const api_names[API_N] = {
    "nvtxMemRegionsRegister", "nvtxMemRegionsUnregister", "nvtxMemRegionsResize",
    "nvtxMemHeapUnregister",  "nvtxMemHeapReset",
};
static _Atomic uint64_t g_api[API_N]; /* string id | generation << 32 */

static uint32_t api_sid(int a)
{
    uint32_t gen = cur_gen();
    uint64_t sg = atomic_load_explicit(&g_api[a], memory_order_relaxed);
    if ((uint32_t)(sg >> 32) == gen && (uint32_t)sg)
        return (uint32_t)sg;
    uint32_t sid = gmp_writer_string(cur_writer(), api_names[a], strlen(api_names[a]));
    if (sid)
        atomic_store_explicit(&g_api[a], sid | ((uint64_t)gen << 32), memory_order_relaxed);
    return sid;
}

static void emit_mem(gmp_wthread *wt, uint32_t type, int api, uint64_t addr, uint64_t size,
                     uint64_t heap, uint32_t flags)
{
    gmp_rec ev = {.type = type};
    ev.u.mem.device = -1;
    ev.u.mem.kind = GMP_MEM_NVTX_REGION;
    ev.u.mem.flags = flags;
    ev.u.mem.api = api_sid(api);
    ev.u.mem.address = addr;
    ev.u.mem.size = size;
    ev.u.mem.range = tls_get()->cur;
    ev.u.mem.handle = heap;
    gmp_wthread_event(wt, &ev);
}

/* Live regions by address: linear probing, backward-shift deletion, g_mem_lock. */
#define MAX_REGIONS (1u << 22)

typedef struct region {
    uint64_t addr; /* 0 = empty slot */
    uint64_t size;
    uint64_t heap;
} region;

static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static region *g_rt;
static size_t g_rt_cap, g_rt_n;

static size_t rt_home(uint64_t addr)
{
    return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 20) & (g_rt_cap - 1);
}

static region *rt_find(uint64_t addr)
{
    if (!g_rt_cap)
        return NULL;
    for (size_t j = rt_home(addr);; j = (j + 1) & (g_rt_cap - 1)) {
        if (g_rt[j].addr == addr)
            return &g_rt[j];
        if (!g_rt[j].addr)
            return NULL;
    }
}

static void rt_delete_at(size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & (g_rt_cap - 1);
        if (!g_rt[j].addr)
            break;
        size_t h = rt_home(g_rt[j].addr);
        /* move j into the hole i when its home is not cyclically in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            g_rt[i] = g_rt[j];
            i = j;
        }
    }
    g_rt[i].addr = 0;
    g_rt_n--;
}

static int rt_grow(void)
{
    size_t nc = g_rt_cap ? g_rt_cap * 2 : 1024;
    region *nt = calloc(nc, sizeof *nt);
    if (!nt)
        return -1;
    region *old = g_rt;
    size_t oc = g_rt_cap;
    g_rt = nt;
    g_rt_cap = nc;
    for (size_t i = 0; i < oc; i++) {
        if (!old[i].addr)
            continue;
        size_t j = rt_home(old[i].addr);
        while (g_rt[j].addr)
            j = (j + 1) & (nc - 1);
        g_rt[j] = old[i];
    }
    free(old);
    return 0;
}

/* Inserts or replaces; returns 0, -1 when the table is full (the region is then not tracked). */
static int rt_put(uint64_t addr, uint64_t size, uint64_t heap)
{
    region *r = rt_find(addr);
    if (r) {
        r->size = size;
        r->heap = heap;
        return 0;
    }
    if (g_rt_n >= MAX_REGIONS || ((g_rt_n + 1) * 2 > g_rt_cap && rt_grow() < 0)) {
        if (!atomic_exchange(&g_warned_regions, 1) && g_sink.log)
            g_sink.log("nvtx: more than %u live NVTX memory regions; sizes of later frees unknown",
                       MAX_REGIONS);
        return -1;
    }
    size_t j = rt_home(addr);
    while (g_rt[j].addr)
        j = (j + 1) & (g_rt_cap - 1);
    g_rt[j].addr = addr;
    g_rt[j].size = size;
    g_rt[j].heap = heap;
    g_rt_n++;
    return 0;
}

/* Frees every region of heap (implicitly): FREE records when recording. */
static void free_heap_regions(uint64_t heap, int api)
{
    gmp_wthread *wt = g_sink.enter();
    pthread_mutex_lock(&g_mem_lock);
    for (size_t i = 0; i < g_rt_cap;) {
        if (g_rt[i].addr && g_rt[i].heap == heap) {
            if (wt)
                emit_mem(wt, GMP_REC_FREE, api, g_rt[i].addr, g_rt[i].size, heap,
                         GMP_MEMF_IMPLICIT);
            rt_delete_at(i);
            continue; /* another entry may have moved into slot i */
        }
        i++;
    }
    pthread_mutex_unlock(&g_mem_lock);
    if (wt)
        g_sink.leave();
}

/* The memory-extension structures carry extCompatID and structSize first. */
static int batch_ok(const void *p, size_t need)
{
    const uint16_t *h = p;
    return p && (h[0] >> 8) == (NVTX_EXT_COMPATID_MEM >> 8) && h[1] >= need;
}

static nvtxMemHeapHandle_t NVTX_API impl_MemHeapRegister(nvtxDomainHandle_t d,
                                                         nvtxMemHeapDesc_t const *desc)
{
    (void)d;
    if (!active())
        return NULL;
    /* A heap of virtual memory is named by its address (nvToolsExtMem.h); other heaps, or one
     * described without an address, get a unique handle of ours. */
    if (batch_ok(desc, sizeof *desc) && desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS &&
        desc->typeSpecificDesc && desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t)) {
        const nvtxMemVirtualRangeDesc_t *vr = desc->typeSpecificDesc;
        if (vr->ptr)
            return (nvtxMemHeapHandle_t)(uintptr_t)vr->ptr;
    }
    uint64_t n = atomic_fetch_add_explicit(&g_next_heap, 1, memory_order_relaxed);
    return (nvtxMemHeapHandle_t)(uintptr_t)((n << 4) | 0x2);
}

static void NVTX_API impl_MemHeapUnregister(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap)
{
    (void)d;
    if (!active() || !heap) /* the process-wide heap cannot be unregistered */
        return;
    free_heap_regions((uint64_t)(uintptr_t)heap, API_HEAP_UNREGISTER);
}

static void NVTX_API impl_MemHeapReset(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap)
{
    (void)d;
    if (!active())
        return;
    free_heap_regions((uint64_t)(uintptr_t)heap, API_HEAP_RESET);
}

static void NVTX_API impl_MemRegionsRegister(nvtxDomainHandle_t d,
                                             nvtxMemRegionsRegisterBatch_t const *b)
{
    (void)d;
    if (!active() || !batch_ok(b, sizeof *b) || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        !b->regionDescElements || b->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    uint64_t heap = (uint64_t)(uintptr_t)b->heap;
    gmp_wthread *wt = g_sink.enter();
    pthread_mutex_lock(&g_mem_lock);
    for (size_t i = 0; i < b->regionCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            (const void *)((const char *)b->regionDescElements + i * b->regionDescElementSize);
        /* a virtual-address region is named by its address */
        if (b->regionHandleElementsOut)
            b->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)(uintptr_t)r->ptr;
        uint64_t addr = (uint64_t)(uintptr_t)r->ptr;
        if (!addr)
            continue;
        rt_put(addr, r->size, heap);
        if (wt)
            emit_mem(wt, GMP_REC_ALLOC, API_REGISTER, addr, r->size, heap, 0);
    }
    pthread_mutex_unlock(&g_mem_lock);
    if (wt)
        g_sink.leave();
}

static void NVTX_API impl_MemRegionsResize(nvtxDomainHandle_t d,
                                           nvtxMemRegionsResizeBatch_t const *b)
{
    (void)d;
    if (!active() || !batch_ok(b, sizeof *b) || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        !b->regionDescElements || b->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return;
    gmp_wthread *wt = g_sink.enter();
    pthread_mutex_lock(&g_mem_lock);
    for (size_t i = 0; i < b->regionDescCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            (const void *)((const char *)b->regionDescElements + i * b->regionDescElementSize);
        uint64_t addr = (uint64_t)(uintptr_t)r->ptr;
        if (!addr)
            continue;
        /* recorded as the old region freed and the new size allocated, at the same address */
        region *old = rt_find(addr);
        uint64_t heap = old ? old->heap : 0;
        if (old && wt)
            emit_mem(wt, GMP_REC_FREE, API_RESIZE, addr, old->size, heap, 0);
        rt_put(addr, r->size, heap);
        if (wt)
            emit_mem(wt, GMP_REC_ALLOC, API_RESIZE, addr, r->size, heap, 0);
    }
    pthread_mutex_unlock(&g_mem_lock);
    if (wt)
        g_sink.leave();
}

static void NVTX_API impl_MemRegionsUnregister(nvtxDomainHandle_t d,
                                               nvtxMemRegionsUnregisterBatch_t const *b)
{
    (void)d;
    if (!active() || !batch_ok(b, sizeof *b) || !b->refElements ||
        b->refElementSize < sizeof(nvtxMemRegionRef_t) ||
        (b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER &&
         b->refType != NVTX_MEM_REGION_REF_TYPE_HANDLE))
        return;
    gmp_wthread *wt = g_sink.enter();
    pthread_mutex_lock(&g_mem_lock);
    for (size_t i = 0; i < b->refCount; i++) {
        const nvtxMemRegionRef_t *ref =
            (const void *)((const char *)b->refElements + i * b->refElementSize);
        /* our region handles are the regions' addresses, so both kinds of reference agree */
        uint64_t addr = (uint64_t)(uintptr_t)ref->pointer;
        if (!addr)
            continue;
        region *r = rt_find(addr);
        uint64_t size = r ? r->size : 0, heap = r ? r->heap : 0;
        if (r)
            rt_delete_at((size_t)(r - g_rt));
        if (wt)
            emit_mem(wt, GMP_REC_FREE, API_UNREGISTER, addr, size, heap, 0);
    }
    pthread_mutex_unlock(&g_mem_lock);
    if (wt)
        g_sink.leave();
}

/* Region names and permissions have no record in format v1: accepted and ignored. */
static void NVTX_API impl_MemRegionsName(nvtxDomainHandle_t d, nvtxMemRegionsNameBatch_t const *b)
{
    (void)d;
    (void)b;
}

static void NVTX_API impl_MemPermissionsAssign(nvtxDomainHandle_t d,
                                               nvtxMemPermissionsAssignBatch_t const *b)
{
    (void)d;
    (void)b;
}

static nvtxMemPermissionsHandle_t NVTX_API impl_MemPermissionsCreate(nvtxDomainHandle_t d,
                                                                     int32_t flags)
{
    (void)d;
    (void)flags;
    return (nvtxMemPermissionsHandle_t)(void *)&g_dummy_object;
}

static void NVTX_API impl_MemPermissionsDestroy(nvtxDomainHandle_t d, nvtxMemPermissionsHandle_t p)
{
    (void)d;
    (void)p;
}

static void NVTX_API impl_MemPermissionsReset(nvtxDomainHandle_t d, nvtxMemPermissionsHandle_t p)
{
    (void)d;
    (void)p;
}

static void NVTX_API impl_MemPermissionsBind(nvtxDomainHandle_t d, nvtxMemPermissionsHandle_t p,
                                             uint32_t scope, uint32_t flags)
{
    (void)d;
    (void)p;
    (void)scope;
    (void)flags;
}

static void NVTX_API impl_MemPermissionsUnbind(nvtxDomainHandle_t d, uint32_t scope)
{
    (void)d;
    (void)scope;
}

/* nvToolsExtMemCudaRt.h (same module, slots 13..16); declared here with the CUDA types as
 * pointers so that this file needs no CUDA runtime header. */
static nvtxMemPermissionsHandle_t NVTX_API
impl_MemCudaGetProcessWidePermissions(nvtxDomainHandle_t d)
{
    (void)d;
    return (nvtxMemPermissionsHandle_t)(void *)&g_dummy_object;
}

static nvtxMemPermissionsHandle_t NVTX_API
impl_MemCudaGetDeviceWidePermissions(nvtxDomainHandle_t d, int device)
{
    (void)d;
    (void)device;
    return (nvtxMemPermissionsHandle_t)(void *)&g_dummy_object;
}

static void NVTX_API impl_MemCudaSetPeerAccess(nvtxDomainHandle_t d, nvtxMemPermissionsHandle_t p,
                                               int peer, uint32_t flags)
{
    (void)d;
    (void)p;
    (void)peer;
    (void)flags;
}

static void NVTX_API impl_MemCudaMarkInitialized(nvtxDomainHandle_t d, void *stream,
                                                 uint8_t per_thread, const void *desc)
{
    (void)d;
    (void)stream;
    (void)per_thread;
    (void)desc;
}

#define MEM_SLOTS 17

static const NvtxFunctionPointer mem_fns[MEM_SLOTS] = {
    [NVTX3EXT_CBID_nvtxMemHeapRegister] = FN(impl_MemHeapRegister),
    [NVTX3EXT_CBID_nvtxMemHeapUnregister] = FN(impl_MemHeapUnregister),
    [NVTX3EXT_CBID_nvtxMemHeapReset] = FN(impl_MemHeapReset),
    [NVTX3EXT_CBID_nvtxMemRegionsRegister] = FN(impl_MemRegionsRegister),
    [NVTX3EXT_CBID_nvtxMemRegionsResize] = FN(impl_MemRegionsResize),
    [NVTX3EXT_CBID_nvtxMemRegionsUnregister] = FN(impl_MemRegionsUnregister),
    [NVTX3EXT_CBID_nvtxMemRegionsName] = FN(impl_MemRegionsName),
    [NVTX3EXT_CBID_nvtxMemPermissionsAssign] = FN(impl_MemPermissionsAssign),
    [NVTX3EXT_CBID_nvtxMemPermissionsCreate] = FN(impl_MemPermissionsCreate),
    [NVTX3EXT_CBID_nvtxMemPermissionsDestroy] = FN(impl_MemPermissionsDestroy),
    [NVTX3EXT_CBID_nvtxMemPermissionsReset] = FN(impl_MemPermissionsReset),
    [NVTX3EXT_CBID_nvtxMemPermissionsBind] = FN(impl_MemPermissionsBind),
    [NVTX3EXT_CBID_nvtxMemPermissionsUnbind] = FN(impl_MemPermissionsUnbind),
    [NVTX3EXT_CBID_nvtxMemCudaGetProcessWidePermissions] =
        FN(impl_MemCudaGetProcessWidePermissions),
    [NVTX3EXT_CBID_nvtxMemCudaGetDeviceWidePermissions] = FN(impl_MemCudaGetDeviceWidePermissions),
    [NVTX3EXT_CBID_nvtxMemCudaSetPeerAccess] = FN(impl_MemCudaSetPeerAccess),
    [NVTX3EXT_CBID_nvtxMemCudaMarkInitialized] = FN(impl_MemCudaMarkInitialized),
};

int gmp_nvtx_inject_ext(void *moduleInfo)
{
    nvtxExtModuleInfo_t *mi = moduleInfo;
    if (!active() || !mi || mi->structSize < sizeof *mi)
        return 0;
    /* the memory module, any compatible revision (same major byte, at least ours) */
    if (mi->moduleId != NVTX_EXT_MODULEID_MEM ||
        (mi->compatId >> 8) != (NVTX_EXT_COMPATID_MEM >> 8) ||
        mi->compatId < NVTX_EXT_COMPATID_MEM || !mi->segments)
        return 0;
    for (size_t s = 0; s < mi->segmentsCount; s++) {
        nvtxExtModuleSegment_t *seg = &mi->segments[s];
        if (seg->segmentId != 1 || !seg->functionSlots)
            continue;
        for (size_t i = 0; i < seg->slotCount && i < MEM_SLOTS; i++) {
            if (mem_fns[i])
                seg->functionSlots[i] = (intptr_t)mem_fns[i];
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------- */
/* Lifecycle                                                                                    */

/* fork(): the registry and region locks are taken around it so that a child never inherits one
 * held by a thread that does not exist there. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&g_reg_lock);
    pthread_mutex_lock(&g_mem_lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&g_mem_lock);
    pthread_mutex_unlock(&g_reg_lock);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void install_atfork(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

int gmp_nvtx_init(const gmp_sink *sink)
{
    if (!sink || !sink->w || !sink->enter || !sink->leave)
        return -1;
    pthread_once(&g_atfork_once, install_atfork);
    atomic_store_explicit(&g_active, 0, memory_order_release);
    g_sink = *sink;
    atomic_store_explicit(&g_w, sink->w, memory_order_relaxed);
    uint32_t g = cur_gen() + 1;
    atomic_store_explicit(&g_gen, g ? g : 1, memory_order_relaxed);
    /* regions recorded for an earlier writer are not live in the new one */
    pthread_mutex_lock(&g_mem_lock);
    free(g_rt);
    g_rt = NULL;
    g_rt_cap = g_rt_n = 0;
    pthread_mutex_unlock(&g_mem_lock);
    names_reset(); /* the names of an earlier writer are not in the new one */
    atomic_store_explicit(&g_active, 1, memory_order_release);
    return 0;
}

uint32_t gmp_nvtx_current_range(gmp_writer *w)
{
    if (!w || w != cur_writer())
        return 0;
    const nvtx_tls *t = &tls;
    return t->gen == cur_gen() ? t->cur : 0;
}

void gmp_nvtx_shutdown(void)
{
    if (active())
        names_notice();
    atomic_store_explicit(&g_active, 0, memory_order_release);
}
