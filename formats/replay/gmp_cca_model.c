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
 * there. */
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
    uint64_t gc_base;    /* Block::gc_count_base: the pool's get_free_block count at insert */
} blk;

/* A pool's cached blocks, ordered by (stream, size, addr): chunks v[0..nc), chunk k holding cn[k]
 * (1 to CHUNK) block indices in order, every block of a chunk before every block of the next;
 * last[k] is the key of chunk k's last block (a search reads these, all in one array, to pick
 * its chunk). A position is flat (0..n-1 in that order): pool_at reads it. */
#define CHUNK 256
typedef struct pkey {
    uint64_t stream, size, addr;
} pkey;

typedef struct pool {
    uint32_t **v;       /* nc chunks of CHUNK entries */
    uint32_t *cn;       /* their counts */
    pkey *last;         /* their last blocks' keys */
    size_t nc, capc;    /* chunks, and room for them in v, cn and last */
    size_t n;           /* blocks cached */
    uint32_t *spare;    /* pool_reserve's: what an insert may need (a split), so it cannot fail */
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

/* Room for one more block (a spare chunk and a place for it), so that the insert that follows a
 * change cannot fail halfway. */
static int pool_reserve(pool *p)
{
    if (p->nc == p->capc) {
        size_t nc = p->capc ? p->capc * 2 : 8;
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
    if (!p->spare && !(p->spare = malloc(CHUNK * sizeof *p->spare)))
        return -1;
    return 0;
}

/* last[ci] after chunk ci's last block changed. */
static void chunk_fix(const gmp_cca *m, pool *p, size_t ci)
{
    const blk *x = &m->b[p->v[ci][p->cn[ci] - 1]];
    p->last[ci] = (pkey){x->stream, x->size, x->addr};
}

/* A chunk enters the list at ci (the spare, empty). */
static void chunk_add(pool *p, size_t ci)
{
    memmove(p->v + ci + 1, p->v + ci, (p->nc - ci) * sizeof *p->v);
    memmove(p->cn + ci + 1, p->cn + ci, (p->nc - ci) * sizeof *p->cn);
    memmove(p->last + ci + 1, p->last + ci, (p->nc - ci) * sizeof *p->last);
    p->v[ci] = p->spare;
    p->spare = NULL;
    p->cn[ci] = 0;
    p->nc++;
}

/* Chunk ci leaves the list (it is empty, or merged into its neighbour): kept as the spare. */
static void chunk_drop(pool *p, size_t ci)
{
    if (p->spare)
        free(p->v[ci]);
    else
        p->spare = p->v[ci];
    memmove(p->v + ci, p->v + ci + 1, (p->nc - ci - 1) * sizeof *p->v);
    memmove(p->cn + ci, p->cn + ci + 1, (p->nc - ci - 1) * sizeof *p->cn);
    memmove(p->last + ci, p->last + ci + 1, (p->nc - ci - 1) * sizeof *p->last);
    p->nc--;
}

/* Insert block i at position at (<= p->n); the caller has called pool_reserve since the last
 * insert. A full chunk is split in two halves first (its upper half into the spare). */
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

/* Insert block i; the caller has called pool_reserve since the last insert. As
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
    free(p->v);
    free(p->cn);
    free(p->last);
    free(p->spare);
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
    if (!cfg || cfg->expandable_segments)
        return NULL; /* not modelled: refuse rather than answer as if they were off */
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
    free(m);
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
    *out = i;
    return GMP_CCA_OK;
}

/* release_block: cudaFree of a whole (unsplit, cached) segment. */
static void release_block_at(gmp_cca *m, pool *p, size_t at)
{
    uint32_t i = pool_at(p, at);
    m->st.reserved -= m->b[i].size;
    m->st.segments_freed++;
    pool_erase_at(m, p, at);
    drop_blk(m, i);
}

/* release_blocks: every cached block that is a whole segment (no prev, no next). */
static void release_blocks(gmp_cca *m, pool *p)
{
    for (size_t ci = 0; ci < p->nc;) {
        uint32_t *v = p->v[ci], w = 0;
        for (uint32_t r = 0; r < p->cn[ci]; r++) {
            uint32_t i = v[r];
            if (m->b[i].prev == NONE && m->b[i].next == NONE) {
                m->st.reserved -= m->b[i].size;
                m->st.segments_freed++;
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
}

static void free_block(gmp_cca *m, uint32_t id);

/* synchronize_and_free_events: every pending free completes (the allocator waits for the events),
 * in the order the frees were made. */
static void synchronize_and_free_events(gmp_cca *m)
{
    size_t k = 0;
    for (; k < m->npend; k++) {
        uint32_t id = m->pend[k];
        if (pool_reserve(pool_of(m, &m->b[id])) != 0)
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

static int whole(const gmp_cca *m, uint32_t i)
{
    return m->b[i].prev == NONE && m->b[i].next == NONE;
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

/* should_split (without expandable segments). */
static int should_split(const gmp_cca *m, const blk *x, uint64_t size)
{
    uint64_t remaining = x->size - size;
    if (x->small)
        return remaining >= GMP_CCA_MIN_BLOCK;
    return size < m->max_split && remaining > GMP_CCA_SMALL_SIZE;
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

    if (pool_reserve(p) != 0)
        return GMP_CCA_ENOMEM;
    uint32_t i = get_free_block(m, p, stream, size);
    if (i == NONE) {
        /* malloc: "Do garbage collection if the flag is set" before a new segment. */
        if (m->gc)
            garbage_collect_cached_blocks(m);
        /* malloc: alloc_block || (release_available_cached_blocks && alloc_block) ||
         * (release_cached_blocks && alloc_block(isRetry)) */
        int rc = alloc_block(m, alloc_size, stream, small, &i);
        if (rc == GMP_CCA_OOM && release_available_cached_blocks(m, p, stream, size))
            rc = alloc_block(m, alloc_size, stream, small, &i);
        if (rc == GMP_CCA_OOM) {
            gmp_cca_empty_cache(m);
            m->st.alloc_retries++;
            if (pool_reserve(p) != 0) /* completed frees may have used the room reserved above */
                return GMP_CCA_ENOMEM;
            rc = alloc_block(m, alloc_size, stream, small, &i);
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
    if (src == NONE || m->b[src].allocated || m->b[src].pending)
        return 0; /* "src->allocated || src->event_count > 0 || !src->stream_uses.empty()" */
    blk *d = &m->b[dst], *s = &m->b[src];
    pool_erase(m, pool_of(m, s), src);
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
    if (pool_reserve(pool_of(m, &m->b[id])) != 0)
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
