/* gmp_cca_model: PyTorch's CUDA caching allocator as a model (see gmp_cca_model.h for what is and
 * is not modelled). Every rule names the function of c10/cuda/CUDACachingAllocator.cpp (PyTorch at
 * commit 001074d25084fdb87a799823e395a50f5ec044d3) it is taken from.
 *
 * Blocks live in one array, recycled through a free list, so memory is bounded by the blocks that
 * exist (allocated or cached), never by the number of calls. Each pool's cached blocks are kept in
 * the order of PyTorch's BlockPool::blocks std::set with BlockComparatorSize (by stream, then size,
 * then address) as a list of chunks of at most CHUNK block indices (pool below): a lookup is a
 * bisection over the chunks, then within one (the set's lower_bound); an insert or erase moves at
 * most one chunk's entries. One flat sorted array moved the tail of the whole array at each insert
 * and erase: a long recording whose pools cache thousands of blocks spent most of its replay
 * there. The unmapped ranges of expandable segments, far fewer (one or two per segment), are kept
 * in one sorted array of block indices, ordered as BlockPool::unmapped (BlockComparatorAddress:
 * stream, then address); an insert or erase there moves the tail of the array. */
#include "gmp_cca_model.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct blk {
    uint64_t addr, size, stream;
    uint32_t prev, next; /* neighbours in the same segment (Block::prev/next), NONE at an end */
    uint8_t small;       /* in the small pool (Block::pool->is_small) */
    uint8_t allocated;   /* handed out (Block::allocated) */
    uint8_t used;        /* the slot holds a block (else it is on the free list via next) */
    uint8_t pending;     /* freed, waiting for other streams (Block::event_count > 0) */
    uint8_t mapped;      /* Block::mapped: backed by pages (always 1 outside expandable segments) */
    uint8_t exp;         /* part of an expandable segment (Block::expandable_segment_ != null) */
    uint64_t gc_base;    /* Block::gc_count_base: the pool's get_free_block count at insert */
} blk;

/* A pool's cached blocks, ordered by (stream, size, addr): chunks v[0..nc), chunk k holding cn[k]
 * (1 to CHUNK) block indices in order, every block of a chunk before every block of the next;
 * last[k] is the key of chunk k's last block (a search reads these, all in one array, to pick
 * its chunk). A position is flat (0..n-1 in that order): pool_at reads it. */
#define CHUNK 256
#define SPARES 2 /* the most blocks a change inserts after one pool_room (unmap_block's two) */
typedef struct pkey {
    uint64_t stream, size, addr;
} pkey;

typedef struct pool {
    uint32_t **v;            /* nc chunks of CHUNK entries */
    uint32_t *cn;            /* their counts */
    pkey *last;              /* their last blocks' keys */
    size_t nc, capc;         /* chunks, and room for them in v, cn and last */
    size_t n;                /* blocks cached */
    uint32_t *spare[SPARES]; /* pool_room's: a chunk for each insert that may split one */
    size_t nspare;           /* spare[0..nspare) are held */
    uint32_t
        *u; /* BlockPool::unmapped: unmapped ranges of expandable segments, by (stream, addr) */
    size_t nu, capu;
    uint64_t gfb_calls; /* BlockPool::get_free_blocks_call_count (counted only with gc on) */
} pool;

struct gmp_cca {
    gmp_cca_config cfg;
    uint64_t max_split; /* cfg.max_split_size, or UINT64_MAX (PyTorch's SIZE_MAX default) */
    int gc;             /* set_fraction && garbage_collection_threshold > 0 */
    blk *b;
    size_t nb, capb;
    uint32_t free_slot; /* head of the recycled slots, NONE if none */
    pool small, large;  /* small_blocks, large_blocks */
    uint64_t next_addr; /* model address of the next segment; segments are never overlapped */
    uint32_t *pend;     /* blocks freed with gmp_cca_free_deferred, in the order of their frees */
    size_t npend, cappend;
    uint32_t *scratch; /* release_blocks' to_unmap; never smaller than a pool's n (pool_room) */
    size_t capscratch;
    gmp_cca_segment_fn on_segment; /* the caller's hook for segment events, or NULL */
    void *on_segment_ctx;
    gmp_cca_stats st;
};

/* BlockComparatorSize: stream, then size, then ptr. */
static int key_less(const pkey *x, const pkey *y)
{
    if (x->stream != y->stream)
        return x->stream < y->stream;
    if (x->size != y->size)
        return x->size < y->size;
    return x->addr < y->addr;
}

static int blk_less(const blk *x, const pkey *y)
{
    pkey k = {x->stream, x->size, x->addr};
    return key_less(&k, y);
}

/* The chunk that holds position at (< p->n), and at's place in it. */
static size_t pool_locate(const pool *p, size_t at, size_t *off)
{
    size_t ci = 0;
    while (at >= p->cn[ci])
        at -= p->cn[ci++];
    *off = at;
    return ci;
}

/* The block index at position at (< p->n). */
static uint32_t pool_at(const pool *p, size_t at)
{
    size_t off, ci = pool_locate(p, at, &off);
    return p->v[ci][off];
}

/* The first position whose block is not less than (stream, size, addr): std::set::lower_bound.
 * The first chunk whose last block is not less, then the first such block in it. */
static size_t lower_bound(const gmp_cca *m, const pool *p, uint64_t stream, uint64_t size,
                          uint64_t addr)
{
    pkey key = {stream, size, addr};
    size_t lo = 0, hi = p->nc;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_less(&p->last[mid], &key))
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t before = 0;
    for (size_t i = 0; i < lo; i++)
        before += p->cn[i];
    if (lo == p->nc)
        return before;
    const uint32_t *v = p->v[lo];
    size_t a = 0, b = p->cn[lo];
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (blk_less(&m->b[v[mid]], &key))
            a = mid + 1;
        else
            b = mid;
    }
    return before + a;
}

/* Room for `more` entries in the array *v of *cap entries holding n. */
static int vec_reserve(uint32_t **v, size_t *cap, size_t n, size_t more)
{
    if (n + more <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < n + more)
        nc *= 2;
    uint32_t *nv = realloc(*v, nc * sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

/* Room for `more` inserts in p (a spare chunk for each, as each may split a full chunk, and a
 * place for each in the chunk list), so that the inserts that follow a change cannot fail
 * halfway; the scratch array of release_blocks grows with the pools (at least n + more: every
 * insert is preceded by a pool_room), so that it never has to grow there. */
static int pool_room(gmp_cca *m, pool *p, size_t more)
{
    if (more > SPARES)
        return -1;
    if (p->nc + more > p->capc) {
        size_t nc = p->capc ? p->capc * 2 : 8;
        while (nc < p->nc + more)
            nc *= 2;
        uint32_t **nv = realloc(p->v, nc * sizeof *nv);
        if (nv)
            p->v = nv;
        uint32_t *ncn = realloc(p->cn, nc * sizeof *ncn);
        if (ncn)
            p->cn = ncn;
        pkey *nl = realloc(p->last, nc * sizeof *nl);
        if (nl)
            p->last = nl;
        if (!nv || !ncn || !nl)
            return -1;
        p->capc = nc;
    }
    while (p->nspare < more) {
        uint32_t *c = malloc(CHUNK * sizeof *c);
        if (!c)
            return -1;
        p->spare[p->nspare++] = c;
    }
    if (m->cfg.expandable_segments && m->capscratch < p->n + more) {
        size_t nc = m->capscratch ? m->capscratch * 2 : 64;
        while (nc < p->n + more)
            nc *= 2;
        uint32_t *ns = realloc(m->scratch, nc * sizeof *ns);
        if (!ns)
            return -1;
        m->scratch = ns;
        m->capscratch = nc;
    }
    return 0;
}

static int pool_reserve(gmp_cca *m, pool *p)
{
    return pool_room(m, p, 1);
}

/* last[ci] after chunk ci's last block changed. */
static void chunk_fix(const gmp_cca *m, pool *p, size_t ci)
{
    const blk *x = &m->b[p->v[ci][p->cn[ci] - 1]];
    p->last[ci] = (pkey){x->stream, x->size, x->addr};
}

/* A chunk enters the list at ci (a spare, empty); pool_room left one and a place for it. */
static void chunk_add(pool *p, size_t ci)
{
    memmove(p->v + ci + 1, p->v + ci, (p->nc - ci) * sizeof *p->v);
    memmove(p->cn + ci + 1, p->cn + ci, (p->nc - ci) * sizeof *p->cn);
    memmove(p->last + ci + 1, p->last + ci, (p->nc - ci) * sizeof *p->last);
    p->v[ci] = p->spare[--p->nspare];
    p->cn[ci] = 0;
    p->nc++;
}

/* Chunk ci leaves the list (it is empty, or merged into its neighbour): kept as a spare. */
static void chunk_drop(pool *p, size_t ci)
{
    if (p->nspare < SPARES)
        p->spare[p->nspare++] = p->v[ci];
    else
        free(p->v[ci]);
    memmove(p->v + ci, p->v + ci + 1, (p->nc - ci - 1) * sizeof *p->v);
    memmove(p->cn + ci, p->cn + ci + 1, (p->nc - ci - 1) * sizeof *p->cn);
    memmove(p->last + ci, p->last + ci + 1, (p->nc - ci - 1) * sizeof *p->last);
    p->nc--;
}

/* Insert block i at position at (<= p->n); pool_room has left room for this insert. A full chunk
 * is split in two halves first (its upper half into a spare). */
static void pool_insert_at(const gmp_cca *m, pool *p, size_t at, uint32_t i)
{
    size_t ci, off;
    if (p->nc == 0) {
        chunk_add(p, 0);
        ci = off = 0;
    } else if (at == p->n) {
        ci = p->nc - 1;
        off = p->cn[ci];
    } else {
        ci = pool_locate(p, at, &off);
    }
    if (p->cn[ci] == CHUNK) {
        chunk_add(p, ci + 1);
        memcpy(p->v[ci + 1], p->v[ci] + CHUNK / 2, (CHUNK / 2) * sizeof **p->v);
        p->cn[ci + 1] = CHUNK / 2;
        p->cn[ci] = CHUNK / 2;
        chunk_fix(m, p, ci);
        chunk_fix(m, p, ci + 1);
        if (off > CHUNK / 2) {
            ci++;
            off -= CHUNK / 2;
        }
    }
    uint32_t *v = p->v[ci];
    memmove(v + off + 1, v + off, (p->cn[ci] - off) * sizeof *v);
    v[off] = i;
    p->cn[ci]++;
    p->n++;
    if (off + 1 == p->cn[ci])
        chunk_fix(m, p, ci);
}

/* Insert block i; the caller has called pool_room (pool_reserve) for it. As
 * BlockPool::insert_into_blocks, the block's age counts from the pool's current get_free_block
 * count. */
static void pool_insert(gmp_cca *m, pool *p, uint32_t i)
{
    blk *x = &m->b[i];
    x->gc_base = p->gfb_calls;
    pool_insert_at(m, p, lower_bound(m, p, x->stream, x->size, x->addr), i);
}

static void pool_erase_at(const gmp_cca *m, pool *p, size_t at)
{
    size_t off, ci = pool_locate(p, at, &off);
    uint32_t *v = p->v[ci];
    memmove(v + off, v + off + 1, (p->cn[ci] - off - 1) * sizeof *v);
    p->cn[ci]--;
    p->n--;
    /* a chunk under a quarter full merges with a neighbour it fits in, so that the chunks stay
     * few (at most about 4 n / CHUNK + 1) */
    if (p->cn[ci] == 0) {
        chunk_drop(p, ci);
    } else if (p->cn[ci] < CHUNK / 4 && ci + 1 < p->nc && p->cn[ci] + p->cn[ci + 1] <= CHUNK) {
        memcpy(v + p->cn[ci], p->v[ci + 1], p->cn[ci + 1] * sizeof *v);
        p->cn[ci] += p->cn[ci + 1];
        p->last[ci] = p->last[ci + 1];
        chunk_drop(p, ci + 1);
    } else if (p->cn[ci] < CHUNK / 4 && ci > 0 && p->cn[ci] + p->cn[ci - 1] <= CHUNK) {
        memcpy(p->v[ci - 1] + p->cn[ci - 1], v, p->cn[ci] * sizeof *v);
        p->cn[ci - 1] += p->cn[ci];
        p->last[ci - 1] = p->last[ci];
        if (off == p->cn[ci]) /* the erased one was the last */
            chunk_fix(m, p, ci - 1);
        chunk_drop(p, ci);
    } else if (off == p->cn[ci]) {
        chunk_fix(m, p, ci);
    }
}

/* Erase block i, which must be in p (its key is unique: addresses do not repeat). */
static void pool_erase(gmp_cca *m, pool *p, uint32_t i)
{
    const blk *x = &m->b[i];
    size_t at = lower_bound(m, p, x->stream, x->size, x->addr);
    if (at < p->n && pool_at(p, at) == i)
        pool_erase_at(m, p, at);
}

static void pool_free(pool *p)
{
    for (size_t i = 0; i < p->nc; i++)
        free(p->v[i]);
    for (size_t i = 0; i < p->nspare; i++)
        free(p->spare[i]);
    free(p->v);
    free(p->cn);
    free(p->last);
    free(p->u);
}

/* BlockPool::unmapped is ordered by BlockComparatorAddress: stream, then address. The first
 * position whose block is not less than (stream, addr). */
static size_t lower_bound_addr(const gmp_cca *m, const pool *p, uint64_t stream, uint64_t addr)
{
    size_t lo = 0, hi = p->nu;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const blk *x = &m->b[p->u[mid]];
        if (x->stream < stream || (x->stream == stream && x->addr < addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Insert unmapped block i; the caller reserved room in p->u. */
static void unmapped_insert(gmp_cca *m, pool *p, uint32_t i)
{
    size_t at = lower_bound_addr(m, p, m->b[i].stream, m->b[i].addr);
    memmove(p->u + at + 1, p->u + at, (p->nu - at) * sizeof *p->u);
    p->u[at] = i;
    p->nu++;
}

static void unmapped_erase(gmp_cca *m, pool *p, uint32_t i)
{
    size_t at = lower_bound_addr(m, p, m->b[i].stream, m->b[i].addr);
    if (at < p->nu && p->u[at] == i) {
        memmove(p->u + at, p->u + at + 1, (p->nu - at - 1) * sizeof *p->u);
        p->nu--;
    }
}

static pool *pool_of(gmp_cca *m, const blk *x)
{
    return x->small ? &m->small : &m->large;
}

static uint32_t new_blk(gmp_cca *m)
{
    uint32_t i;
    if (m->free_slot != NONE) {
        i = m->free_slot;
        m->free_slot = m->b[i].next;
    } else {
        if (m->nb == m->capb) {
            size_t nc = m->capb ? m->capb * 2 : 256;
            if (nc >= NONE)
                return NONE;
            blk *nbp = realloc(m->b, nc * sizeof *nbp);
            if (!nbp)
                return NONE;
            m->b = nbp;
            m->capb = nc;
        }
        i = (uint32_t)m->nb++;
    }
    memset(&m->b[i], 0, sizeof m->b[i]);
    m->b[i].prev = m->b[i].next = NONE;
    m->b[i].used = 1;
    m->b[i].mapped = 1;
    return i;
}

static void drop_blk(gmp_cca *m, uint32_t i)
{
    m->b[i].used = 0;
    m->b[i].allocated = 0;
    m->b[i].next = m->free_slot;
    m->free_slot = i;
}

static int is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

static unsigned floor_log2(uint64_t x)
{
    unsigned r = 0;
    while (x >>= 1)
        r++;
    return r;
}

/* roundup_power2_next_division: the next of `divisions` equal steps between two powers of two. */
static uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions)
{
    if (is_pow2(size))
        return size;
    uint64_t power2_floor = (uint64_t)1 << floor_log2(size);
    uint64_t power2_division = power2_floor >> floor_log2(divisions);
    if (power2_division == 0)
        return power2_floor << 1;
    uint64_t round_size_floor = size & ~(power2_division - 1);
    return round_size_floor == size ? size : round_size_floor + power2_division;
}

uint64_t gmp_cca_round_size(const gmp_cca *m, uint64_t size)
{
    /* round_size: at least kMinBlockSize, else the power-2 division when configured and the size
     * exceeds kMinBlockSize * divisions, else a multiple of kMinBlockSize. */
    if (size < GMP_CCA_MIN_BLOCK)
        return GMP_CCA_MIN_BLOCK;
    uint64_t div = m->cfg.roundup_power2_divisions;
    if (div > 1 && size > GMP_CCA_MIN_BLOCK * div)
        return roundup_power2_next_division(size, div);
    return GMP_CCA_MIN_BLOCK * ((size + GMP_CCA_MIN_BLOCK - 1) / GMP_CCA_MIN_BLOCK);
}

/* get_allocation_size: the size of a new segment for a rounded request. */
static uint64_t allocation_size(uint64_t size)
{
    if (size <= GMP_CCA_SMALL_SIZE)
        return GMP_CCA_SMALL_BUFFER;
    if (size < GMP_CCA_MIN_LARGE_ALLOC)
        return GMP_CCA_LARGE_BUFFER;
    return GMP_CCA_ROUND_LARGE * ((size + GMP_CCA_ROUND_LARGE - 1) / GMP_CCA_ROUND_LARGE);
}

gmp_cca *gmp_cca_create(const gmp_cca_config *cfg)
{
    if (!cfg || cfg->expandable_segments > 1)
        return NULL; /* a boolean: expandable_segments:True or False */
    /* CUDAAllocatorConfig::parseGarbageCollectionThreshold: 0 (off) or strictly between 0 and 1
     * ("garbage_collect_threshold too small/too big, set it 0.0~1.0"); NaN is refused too. */
    double gct = cfg->garbage_collection_threshold;
    if (!(gct == 0.0 || (gct > 0.0 && gct < 1.0)))
        return NULL;
    if (cfg->max_split_size && cfg->max_split_size <= GMP_CCA_LARGE_BUFFER)
        return NULL; /* CUDAAllocatorConfig: max_split_size_mb must exceed kLargeBuffer's MiB */
    if (cfg->roundup_power2_divisions > 1 && !is_pow2(cfg->roundup_power2_divisions))
        return NULL; /* CUDAAllocatorConfig: divisions must be a power of 2 */
    gmp_cca *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cfg = *cfg;
    m->max_split = cfg->max_split_size ? cfg->max_split_size : UINT64_MAX;
    /* malloc and get_free_block run the collector only when set_fraction (a memory fraction gave
     * allowed_memory_maximum); the model's capacity stands for that maximum. */
    m->gc = cfg->capacity != 0 && gct > 0.0;
    m->free_slot = NONE;
    m->next_addr = (uint64_t)1 << 32; /* a model address: nonzero, 2 MiB aligned */
    return m;
}

void gmp_cca_destroy(gmp_cca *m)
{
    if (!m)
        return;
    free(m->b);
    pool_free(&m->small);
    pool_free(&m->large);
    free(m->pend);
    free(m->scratch);
    free(m);
}

/* A cached block that is a whole cudaMalloc'ed segment (!Block::is_split()), which cudaFree can
 * release (release_block). A block of an expandable segment never is: it is unmapped instead
 * (release_block asserts !expandable_segment_; see release_blocks). */
static int whole(const gmp_cca *m, uint32_t i)
{
    return m->b[i].prev == NONE && m->b[i].next == NONE && !m->b[i].exp;
}

static void hook(gmp_cca *m, int op, uint64_t addr, uint64_t size)
{
    if (m->on_segment)
        m->on_segment(m->on_segment_ctx, op, addr, size);
}

/* get_free_block's expandable_size: a block followed by the unmapped rest of its expandable
 * segment counts as the size it can grow to. */
static uint64_t expandable_size(const gmp_cca *m, uint32_t i)
{
    uint32_t n = m->b[i].next;
    return m->b[i].size + (n != NONE && !m->b[n].mapped ? m->b[n].size : 0);
}

/* get_free_block: the best fit of the pool for (stream, size), refused when max_split_size says
 * an oversize block must not serve this request. The block leaves the pool. */
static uint32_t get_free_block(gmp_cca *m, pool *p, uint64_t stream, uint64_t size)
{
    if (m->gc)
        p->gfb_calls++; /* "Track block reuse interval only when garbage collection is enabled" */
    size_t at = lower_bound(m, p, stream, size, 0);
    uint32_t i = at < p->n ? pool_at(p, at) : NONE;
    if (i == NONE || m->b[i].stream != stream)
        return NONE;
    if (m->b[i].exp) {
        /* With expandable segments on, a block that can grow (it ends where its segment's
         * unmapped rest begins) is passed over for the next larger block of the stream while
         * that one's expandable_size is smaller. */
        uint32_t nx;
        while (m->b[i].exp && at + 1 < p->n && m->b[nx = pool_at(p, at + 1)].stream == stream &&
               expandable_size(m, nx) < expandable_size(m, i)) {
            at++;
            i = nx;
        }
    }
    const blk *x = &m->b[i];
    /* "Do not return an oversized block for a large request" */
    if (size < m->max_split && x->size >= m->max_split)
        return NONE;
    /* "Allow oversized block size to be rounded up but within a limit" */
    if (size >= m->max_split && x->size >= size + GMP_CCA_LARGE_BUFFER)
        return NONE;
    pool_erase_at(m, p, at);
    return i;
}

/* alloc_block (without expandable segments): cudaMalloc of a new segment, refused past the
 * capacity as cudaMalloc (or set_fraction's allowed_memory_maximum) refuses it. */
static int alloc_block(gmp_cca *m, uint64_t alloc_size, uint64_t stream, int small, uint32_t *out)
{
    if (m->cfg.capacity &&
        (alloc_size > m->cfg.capacity || m->st.reserved > m->cfg.capacity - alloc_size))
        return GMP_CCA_OOM;
    if (m->next_addr > UINT64_MAX - alloc_size)
        return GMP_CCA_OOM; /* the model's addresses are spent: they must never repeat */
    uint32_t i = new_blk(m);
    if (i == NONE)
        return GMP_CCA_ENOMEM;
    blk *x = &m->b[i];
    x->addr = m->next_addr;
    x->size = alloc_size;
    x->stream = stream;
    x->small = (uint8_t)small;
    m->next_addr += alloc_size;
    m->st.reserved += alloc_size;
    if (m->st.reserved > m->st.peak_reserved)
        m->st.peak_reserved = m->st.reserved;
    m->st.segments_alloc++;
    hook(m, GMP_CCA_SEGMENT_ALLOC, x->addr, alloc_size);
    *out = i;
    return GMP_CCA_OK;
}

static uint64_t try_merge(gmp_cca *m, uint32_t dst, uint32_t src);

static uint64_t page_of(const blk *x)
{
    /* ExpandableSegment's segment_size_: "2MB for small pool, 20MB for large pool"
     * (find_expandable_block: kSmallBuffer or kLargeBuffer) */
    return x->small ? GMP_CCA_SMALL_BUFFER : GMP_CCA_LARGE_BUFFER;
}

/* The address space of one expandable segment: ExpandableSegment reserves pages for 1 1/8 of the
 * device's memory (totalGlobalMem + totalGlobalMem / 8); the capacity stands for that memory.
 * Without a capacity, 16 TiB. */
static uint64_t expandable_space(const gmp_cca *m, uint64_t pg)
{
    uint64_t c = m->cfg.capacity;
    uint64_t want = !c                        ? (uint64_t)1 << 44
                    : c < ((uint64_t)1 << 60) ? c + c / 8
                                              : (uint64_t)1 << 62;
    return (want + pg - 1) / pg * pg;
}

static int allocatable(const gmp_cca *m, uint32_t i)
{
    /* find_expandable_block's allocatable: free, no outstanding events */
    return i != NONE && !m->b[i].allocated && !m->b[i].pending;
}

/* find_expandable_block: the lowest address of the stream's expandable segments (in the pool)
 * where free and unmapped blocks in a row add up to size: each unmapped range, in address order,
 * starting from the free block before it if there is one. None: a new expandable segment, all of
 * its address space one unmapped block. GMP_CCA_OOM when no segment's address space could hold the
 * request, or the model's addresses are spent (every segment keeps its own range, so that blocks'
 * addresses never repeat); GMP_CCA_ENOMEM when the host is out of memory. */
static int find_expandable_block(gmp_cca *m, pool *p, uint64_t stream, uint64_t size, uint32_t *out)
{
    for (size_t k = lower_bound_addr(m, p, stream, 0); k < p->nu && m->b[p->u[k]].stream == stream;
         k++) {
        uint32_t c = p->u[k];
        if (allocatable(m, m->b[c].prev))
            c = m->b[c].prev;
        uint64_t bytes = 0; /* has_available_address_space */
        for (uint32_t b = c; bytes < size && allocatable(m, b); b = m->b[b].next)
            bytes += m->b[b].size;
        if (bytes >= size) {
            *out = c;
            return GMP_CCA_OK;
        }
    }
    uint64_t pg = p == &m->small ? GMP_CCA_SMALL_BUFFER : GMP_CCA_LARGE_BUFFER;
    uint64_t space = expandable_space(m, pg);
    /* model addresses: a segment starts on a multiple of 20 MiB, so that its pages (2 or 20 MiB)
     * are aligned on absolute addresses */
    uint64_t base =
        (m->next_addr + GMP_CCA_LARGE_BUFFER - 1) / GMP_CCA_LARGE_BUFFER * GMP_CCA_LARGE_BUFFER;
    if (size > space || base < m->next_addr || base > UINT64_MAX - space)
        return GMP_CCA_OOM;
    if (vec_reserve(&p->u, &p->capu, p->nu, 1) != 0)
        return GMP_CCA_ENOMEM;
    uint32_t i = new_blk(m);
    if (i == NONE)
        return GMP_CCA_ENOMEM;
    blk *x = &m->b[i];
    m->next_addr = base;
    x->addr = m->next_addr;
    x->size = space;
    x->stream = stream;
    x->small = (uint8_t)(p == &m->small);
    x->exp = 1;
    x->mapped = 0;
    m->next_addr += x->size;
    unmapped_insert(m, p, i);
    *out = i;
    return GMP_CCA_OK;
}

/* map_block: map the pages that cover the first size bytes of unmapped block i (ExpandableSegment::
 * map rounds up to whole pages; all of them or none: cuMemCreate failing past the capacity stands
 * for the device running out), split off the unmapped rest, merge with the free blocks beside it
 * and cache the result. Counts as a device allocation (num_device_alloc) and adds the pages to
 * reserved. */
static int map_block(gmp_cca *m, pool *p, uint32_t i, uint64_t size)
{
    uint64_t pg = page_of(&m->b[i]);
    uint64_t len = (size + pg - 1) / pg * pg;
    if (len > m->b[i].size)
        len = m->b[i].size;
    if (m->cfg.capacity && (len > m->cfg.capacity || m->st.reserved > m->cfg.capacity - len))
        return GMP_CCA_OOM;
    uint32_t rest = NONE;
    /* room for two inserts, of which this one uses at most one: the room gmp_cca_alloc reserved
     * for its split's insert survives the maps try_allocate_expandable_block makes (an insert may
     * take a spare chunk; the erases that follow need not give it back) */
    if (pool_room(m, p, 2) != 0 || vec_reserve(&p->u, &p->capu, p->nu, 1) != 0)
        return GMP_CCA_ENOMEM;
    if (len < m->b[i].size && (rest = new_blk(m)) == NONE)
        return GMP_CCA_ENOMEM;
    unmapped_erase(m, p, i);
    blk *x = &m->b[i];
    uint64_t at = x->addr;
    x->mapped = 1;
    if (rest != NONE) { /* to_map -> remaining -> to_map->next */
        blk *r = &m->b[rest];
        r->addr = x->addr + len;
        r->size = x->size - len;
        r->stream = x->stream;
        r->small = x->small;
        r->exp = 1;
        r->mapped = 0;
        r->prev = i;
        r->next = x->next;
        if (r->next != NONE)
            m->b[r->next].prev = rest;
        x->next = rest;
        x->size = len;
        unmapped_insert(m, p, rest);
    }
    try_merge(m, i, m->b[i].prev);
    try_merge(m, i, m->b[i].next);
    pool_insert(m, p, i);
    m->st.reserved += len;
    if (m->st.reserved > m->st.peak_reserved)
        m->st.peak_reserved = m->st.reserved;
    m->st.segments_alloc++;
    hook(m, GMP_CCA_SEGMENT_MAP, at, len);
    return GMP_CCA_OK;
}

/* try_allocate_expandable_block: alloc_block with expandable segments on. Maps what the request
 * (the rounded size, not get_allocation_size's) lacks at the lowest address that can take it; the
 * pages mapped before a map that fails stay mapped. The block leaves the pool. */
static int try_allocate_expandable_block(gmp_cca *m, pool *p, uint64_t stream, uint64_t size,
                                         uint32_t *out)
{
    uint32_t c = NONE;
    int rc = find_expandable_block(m, p, stream, size, &c);
    if (rc != GMP_CCA_OK)
        return rc;
    if (!m->b[c].mapped && (rc = map_block(m, p, c, m->b[c].size < size ? m->b[c].size : size)))
        return rc;
    while (m->b[c].size < size) {
        /* free -> unmapped -> *: map some of the unmapped block, which merges with c */
        uint32_t n = m->b[c].next;
        uint64_t rem = size - m->b[c].size;
        if (n == NONE || m->b[n].mapped)
            return GMP_CCA_OOM; /* not reached: find_expandable_block found the room */
        if ((rc = map_block(m, p, n, m->b[n].size < rem ? m->b[n].size : rem)) != GMP_CCA_OK)
            return rc;
        c = n;
    }
    pool_erase(m, p, c);
    *out = c;
    return GMP_CCA_OK;
}

/* release_block: cudaFree of a whole (unsplit, cached) segment. */
static void release_block_at(gmp_cca *m, pool *p, size_t at)
{
    uint32_t i = pool_at(p, at);
    m->st.reserved -= m->b[i].size;
    m->st.segments_freed++;
    hook(m, GMP_CCA_SEGMENT_FREE, m->b[i].addr, m->b[i].size);
    pool_erase_at(m, p, at);
    drop_blk(m, i);
}

/* unmap_block: a free block of an expandable segment gives back the pages that lie wholly inside
 * it (ExpandableSegment::unmap: segmentRight(ptr) to segmentLeft(ptr + size)); the bytes before
 * and after them stay as free mapped blocks; the unmapped range merges with the unmapped ones
 * beside it. The block must be cached in p. If the host is out of memory, the block stays
 * mapped (nothing is released rather than a half-done change). */
static void unmap_block(gmp_cca *m, pool *p, uint32_t i)
{
    uint64_t pg = page_of(&m->b[i]);
    uint64_t a = m->b[i].addr, end = a + m->b[i].size;
    uint64_t ub = (a + pg - 1) / pg * pg, ue = end / pg * pg; /* segments are pg-aligned */
    if (ub >= ue)
        return;
    uint32_t bf = NONE, af = NONE;
    if (pool_room(m, p, 2) != 0 || vec_reserve(&p->u, &p->capu, p->nu, 1) != 0)
        return;
    if (ub > a && (bf = new_blk(m)) == NONE)
        return;
    if (ue < end && (af = new_blk(m)) == NONE) {
        if (bf != NONE)
            drop_blk(m, bf);
        return;
    }
    pool_erase(m, p, i);
    blk *x = &m->b[i];
    if (bf != NONE) { /* prev? -> before_free -> block */
        blk *y = &m->b[bf];
        y->addr = a;
        y->size = ub - a;
        y->stream = x->stream;
        y->small = x->small;
        y->exp = 1;
        y->prev = x->prev;
        if (y->prev != NONE)
            m->b[y->prev].next = bf;
        y->next = i;
        x->prev = bf;
        pool_insert(m, p, bf);
    }
    if (af != NONE) { /* block -> after_free -> next? */
        blk *y = &m->b[af];
        y->addr = ue;
        y->size = end - ue;
        y->stream = x->stream;
        y->small = x->small;
        y->exp = 1;
        y->next = x->next;
        if (y->next != NONE)
            m->b[y->next].prev = af;
        y->prev = i;
        x->next = af;
        pool_insert(m, p, af);
    }
    x->addr = ub;
    x->size = ue - ub;
    x->mapped = 0;
    try_merge(m, i, m->b[i].prev);
    try_merge(m, i, m->b[i].next);
    unmapped_insert(m, p, i);
    m->st.reserved -= ue - ub;
    m->st.segments_freed++; /* num_device_free counts unmaps too */
    hook(m, GMP_CCA_SEGMENT_UNMAP, ub, ue - ub);
}

/* release_blocks: every cached block that is a whole segment is cudaFree'd (release_block); the
 * free blocks of expandable segments are gathered, in the pool's order, then unmapped
 * (unmap_block); an expandable segment left wholly unmapped is released
 * (release_expandable_segment). */
static void release_blocks(gmp_cca *m, pool *p)
{
    size_t nx = 0;
    for (size_t ci = 0; ci < p->nc;) { /* chunk by chunk, each compacted in place */
        uint32_t *v = p->v[ci], w = 0;
        for (uint32_t r = 0; r < p->cn[ci]; r++) {
            uint32_t i = v[r];
            if (m->b[i].exp) {
                m->scratch[nx++] = i; /* capscratch >= p->n (pool_room) */
                v[w++] = i;
            } else if (whole(m, i)) {
                m->st.reserved -= m->b[i].size;
                m->st.segments_freed++;
                hook(m, GMP_CCA_SEGMENT_FREE, m->b[i].addr, m->b[i].size);
                drop_blk(m, i);
            } else {
                v[w++] = i;
            }
        }
        p->n -= p->cn[ci] - w;
        p->cn[ci] = w;
        if (w == 0) {
            chunk_drop(p, ci);
        } else {
            chunk_fix(m, p, ci);
            ci++;
        }
    }
    for (size_t k = 0; k < nx; k++) {
        uint32_t i = m->scratch[k];
        unmap_block(m, p, i);
        if (!m->b[i].mapped && m->b[i].prev == NONE && m->b[i].next == NONE) {
            unmapped_erase(m, p, i);
            drop_blk(m, i);
        }
    }
}

static void free_block(gmp_cca *m, uint32_t id);

/* synchronize_and_free_events: every pending free completes (the allocator waits for the events),
 * in the order the frees were made. */
static void synchronize_and_free_events(gmp_cca *m)
{
    size_t k = 0;
    for (; k < m->npend; k++) {
        uint32_t id = m->pend[k];
        if (pool_reserve(m, pool_of(m, &m->b[id])) != 0)
            break; /* host memory short: the rest stay pending (still counted as reserved) */
        m->b[id].pending = 0;
        free_block(m, id);
    }
    if (k && k < m->npend) /* (m->pend is NULL while nothing was ever deferred) */
        memmove(m->pend, m->pend + k, (m->npend - k) * sizeof *m->pend);
    m->npend -= k;
}

void gmp_cca_process_events(gmp_cca *m)
{
    synchronize_and_free_events(m);
}

size_t gmp_cca_pending_frees(const gmp_cca *m)
{
    return m->npend;
}

/* release_cached_blocks: first synchronize_and_free_events, then the large pool, then the small
 * one. */
void gmp_cca_empty_cache(gmp_cca *m)
{
    synchronize_and_free_events(m);
    release_blocks(m, &m->large);
    release_blocks(m, &m->small);
}

/* garbage_collect_cached_blocks: when reserved (total_allocated_memory) is above threshold x
 * capacity (allowed_memory_maximum), cudaFree the unsplit cached blocks of the large pool whose
 * age (Block::gc_count(): get_free_block calls of the pool since the block was cached) is at
 * least the average age of the unsplit ones, in the pool's order, pass after pass with the
 * average recomputed, until what was freed reaches reserved - threshold or a pass frees nothing.
 * A pass does not stop at the target ("we don't want this GC to be triggered frequently"). */
static void garbage_collect_cached_blocks(gmp_cca *m)
{
    pool *p = &m->large;
    uint64_t gc_threshold =
        (uint64_t)(m->cfg.garbage_collection_threshold * (double)m->cfg.capacity);
    if (m->st.reserved <= gc_threshold)
        return;
    uint64_t target = m->st.reserved - gc_threshold, reclaimed = 0, total_age = 0;
    uint64_t freeable = 0;
    for (size_t r = 0; r < p->n; r++)
        if (whole(m, pool_at(p, r))) {
            total_age += p->gfb_calls - m->b[pool_at(p, r)].gc_base;
            freeable++;
        }
    int freed = 1;
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;
        freed = 0;
        size_t r = 0;
        while (r < p->n) {
            uint32_t i = pool_at(p, r);
            uint64_t age = p->gfb_calls - m->b[i].gc_base;
            if (whole(m, i) && (double)age >= age_threshold) {
                freed = 1;
                reclaimed += m->b[i].size;
                total_age -= age;
                freeable--;
                release_block_at(m, p, r); /* the next block moves to r */
            } else {
                r++;
            }
        }
    }
}

/* release_available_cached_blocks: with max_split_size set, free the smallest oversize cached
 * block of the stream that covers the request, else oversize ones from the largest down until
 * they add up to it. PyTorch would cudaFree an oversize block even if it were part of a split
 * segment; the model stops at such a block instead (it cannot free part of a segment). */
static int release_available_cached_blocks(gmp_cca *m, pool *p, uint64_t stream, uint64_t size)
{
    if (m->max_split == UINT64_MAX)
        return 0;
    uint64_t key = size < m->max_split ? m->max_split : size;
    size_t at = lower_bound(m, p, stream, key, 0);
    if (at == p->n || m->b[pool_at(p, at)].stream != stream) {
        if (at == 0)
            return 0;
        uint64_t released = 0;
        at--;
        for (;;) {
            const blk *x = &m->b[pool_at(p, at)];
            if (released >= key || x->size < m->max_split || x->stream != stream ||
                !whole(m, pool_at(p, at)))
                break;
            released += x->size;
            release_block_at(m, p, at);
            if (at == 0)
                break;
            at--;
        }
        return released >= key;
    }
    if (!whole(m, pool_at(p, at)))
        return 0;
    release_block_at(m, p, at);
    return 1;
}

/* should_split: with expandable segments on, every pool splits as the small one does. */
static int should_split(const gmp_cca *m, const blk *x, uint64_t size)
{
    uint64_t remaining = x->size - size;
    if (x->small || m->cfg.expandable_segments)
        return remaining >= GMP_CCA_MIN_BLOCK;
    return size < m->max_split && remaining > GMP_CCA_SMALL_SIZE;
}

/* alloc_block: a new cudaMalloc'ed segment of alloc_size, or with expandable segments on, pages
 * mapped for the rounded request (try_allocate_expandable_block). The block is not in the pool. */
static int new_block(gmp_cca *m, pool *p, uint64_t alloc_size, uint64_t size, uint64_t stream,
                     int small, uint32_t *out)
{
    if (m->cfg.expandable_segments)
        return try_allocate_expandable_block(m, p, stream, size, out);
    return alloc_block(m, alloc_size, stream, small, out);
}

int gmp_cca_alloc(gmp_cca *m, uint64_t orig_size, uint64_t stream, uint32_t *id)
{
    /* NativeCachingAllocator::allocate: a size of 0 never reaches malloc (the tensor gets a null
     * pointer), and 1 EiB or more is refused as out of memory before it. */
    if (orig_size == 0)
        return GMP_CCA_EINVAL;
    if (orig_size >= ((uint64_t)1 << 60))
        return GMP_CCA_OOM;
    /* malloc: round, pick the pool by the rounded size (get_pool), size a new segment. */
    uint64_t size = gmp_cca_round_size(m, orig_size);
    int small = size <= GMP_CCA_SMALL_SIZE;
    pool *p = small ? &m->small : &m->large;
    uint64_t alloc_size = allocation_size(size);

    if (pool_reserve(m, p) != 0)
        return GMP_CCA_ENOMEM;
    uint32_t i = get_free_block(m, p, stream, size);
    if (i == NONE) {
        /* malloc: "Do garbage collection if the flag is set" before a new segment. */
        if (m->gc)
            garbage_collect_cached_blocks(m);
        /* malloc: alloc_block || (release_available_cached_blocks && alloc_block) ||
         * (release_cached_blocks && alloc_block(isRetry)) */
        int rc = new_block(m, p, alloc_size, size, stream, small, &i);
        if (rc == GMP_CCA_OOM && release_available_cached_blocks(m, p, stream, size))
            rc = new_block(m, p, alloc_size, size, stream, small, &i);
        if (rc == GMP_CCA_OOM) {
            gmp_cca_empty_cache(m);
            m->st.alloc_retries++;
            if (pool_reserve(m, p) != 0) /* completed frees may have used the room reserved above */
                return GMP_CCA_ENOMEM;
            rc = new_block(m, p, alloc_size, size, stream, small, &i);
        }
        if (rc == GMP_CCA_OOM)
            m->st.ooms++;
        if (rc != GMP_CCA_OK)
            return rc;
    }

    /* alloc_found_block: the request takes the low end of the block; the rest stays cached. */
    if (should_split(m, &m->b[i], size)) {
        uint32_t n = new_blk(m);
        if (n == NONE) {
            pool_insert(m, p, i); /* the block stays whole and cached */
            return GMP_CCA_ENOMEM;
        }
        blk *rem = &m->b[i], *nb = &m->b[n];
        nb->addr = rem->addr;
        nb->size = size;
        nb->stream = rem->stream;
        nb->small = rem->small;
        nb->exp = rem->exp;
        nb->prev = rem->prev;
        if (nb->prev != NONE)
            m->b[nb->prev].next = n;
        nb->next = i;
        rem->prev = n;
        rem->addr += size;
        rem->size -= size;
        pool_insert(m, p, i);
        i = n;
    }
    m->b[i].allocated = 1;
    m->st.allocated += m->b[i].size;
    if (m->st.allocated > m->st.peak_allocated)
        m->st.peak_allocated = m->st.allocated;
    *id = i;
    return GMP_CCA_OK;
}

/* try_merge_blocks: absorb a free neighbour of the same segment; returns its size or 0. */
static uint64_t try_merge(gmp_cca *m, uint32_t dst, uint32_t src)
{
    /* "src->allocated || src->event_count > 0 || !src->stream_uses.empty() ||
     * dst->mapped != src->mapped" */
    if (src == NONE || m->b[src].allocated || m->b[src].pending ||
        m->b[src].mapped != m->b[dst].mapped)
        return 0;
    blk *d = &m->b[dst], *s = &m->b[src];
    if (s->mapped)
        pool_erase(m, pool_of(m, s), src);
    else
        unmapped_erase(m, pool_of(m, s), src);
    if (d->prev == src) { /* [src dst] */
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev != NONE)
            m->b[d->prev].next = dst;
    } else { /* [dst src] */
        d->next = s->next;
        if (d->next != NONE)
            m->b[d->next].prev = dst;
    }
    uint64_t sub = s->size;
    d->size += sub;
    drop_blk(m, src);
    return sub;
}

int gmp_cca_free(gmp_cca *m, uint32_t id)
{
    if (id >= m->nb || !m->b[id].used || !m->b[id].allocated)
        return GMP_CCA_EINVAL;
    if (pool_reserve(m, pool_of(m, &m->b[id])) != 0)
        return GMP_CCA_ENOMEM;
    /* free: allocated_bytes drops by the block's size; then free_block merges the neighbours and
     * caches the result (no stream uses are modelled, so no events to wait for). */
    m->b[id].allocated = 0;
    m->st.allocated -= m->b[id].size;
    free_block(m, id);
    return GMP_CCA_OK;
}

/* free_block: merge with the free neighbours and cache; the caller reserved room in the pool. */
static void free_block(gmp_cca *m, uint32_t id)
{
    try_merge(m, id, m->b[id].prev);
    try_merge(m, id, m->b[id].next);
    pool_insert(m, pool_of(m, &m->b[id]), id);
}

int gmp_cca_free_deferred(gmp_cca *m, uint32_t id)
{
    if (id >= m->nb || !m->b[id].used || !m->b[id].allocated)
        return GMP_CCA_EINVAL;
    if (m->npend == m->cappend) {
        size_t nc = m->cappend ? m->cappend * 2 : 16;
        uint32_t *nv = realloc(m->pend, nc * sizeof *nv);
        if (!nv)
            return GMP_CCA_ENOMEM;
        m->pend = nv;
        m->cappend = nc;
    }
    /* free: allocated_bytes drops now; with stream uses, insert_events holds the block back from
     * free_block until its events complete. */
    m->b[id].allocated = 0;
    m->b[id].pending = 1;
    m->st.allocated -= m->b[id].size;
    m->pend[m->npend++] = id;
    return GMP_CCA_OK;
}

int gmp_cca_block(const gmp_cca *m, uint32_t id, uint64_t *addr, uint64_t *size)
{
    if (id >= m->nb || !m->b[id].used || !m->b[id].allocated)
        return 0;
    if (addr)
        *addr = m->b[id].addr;
    if (size)
        *size = m->b[id].size;
    return 1;
}

const gmp_cca_stats *gmp_cca_get_stats(const gmp_cca *m)
{
    return &m->st;
}

size_t gmp_cca_free_blocks(const gmp_cca *m, uint64_t *largest)
{
    uint64_t big = 0;
    const pool *ps[2] = {&m->small, &m->large};
    for (int k = 0; k < 2; k++)
        for (size_t ci = 0; ci < ps[k]->nc; ci++)
            for (uint32_t r = 0; r < ps[k]->cn[ci]; r++)
                if (m->b[ps[k]->v[ci][r]].size > big)
                    big = m->b[ps[k]->v[ci][r]].size;
    if (largest)
        *largest = big;
    return m->small.n + m->large.n;
}

size_t gmp_cca_segments(const gmp_cca *m)
{
    /* snapshot(): one segment per cudaMalloc'ed segment, and for expandable segments one per
     * contiguous mapped range (a head block is mapped and its prev is not) */
    size_t n = 0;
    for (size_t i = 0; i < m->nb; i++) {
        const blk *x = &m->b[i];
        if (x->used && x->mapped && (x->prev == NONE || !m->b[x->prev].mapped))
            n++;
    }
    return n;
}

void gmp_cca_on_segment(gmp_cca *m, gmp_cca_segment_fn fn, void *ctx)
{
    m->on_segment = fn;
    m->on_segment_ctx = ctx;
}
