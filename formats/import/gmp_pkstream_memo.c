/* gmp_pkstream_memo: the streaming pickle reader's memo (gmp_pkstream_impl.h).
 *
 * Two passes: the first (scan) decodes only opcode lengths and the memo: for each memo index it
 * counts the fetches (GET) that follow its definition, saturating at 127 ("keep for ever"); it
 * stops quietly at the first fault, which the parse then reports with its offset. The parse's
 * memo keeps only the indices the scan saw fetched, in a dense array of slots addressed through a
 * rank over a bitmap of those indices (slot_of), and drops each value after its last fetch.
 *
 * One pass (gmp_pkstream_one_pass): no scan; the memo keeps what a snapshot fetches again
 * (sparse_put), and a fetch of anything else fails the run. */
#include "gmp_pkstream_impl.h"

/* ---- pass 1: count the fetches of each memo index ---- */

static int cnt_at(gmp_pkstream *P, uint64_t k, uint8_t **out)
{
    if (k >= P->lim.max_memo)
        return -1;
    if (k >= P->cnt_len) {
        if (k >= P->cnt_cap) {
            size_t nc = P->cnt_cap ? P->cnt_cap : 4096;
            while (nc <= k)
                nc *= 2;
            if (charge(P, nc - P->cnt_cap) < 0)
                return -1;
            uint8_t *n = realloc(P->cnt, nc);
            if (!n)
                return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
            P->cnt = n;
            P->cnt_cap = nc;
        }
        memset(P->cnt + P->cnt_len, 0, (size_t)k + 1 - P->cnt_len);
        P->cnt_len = (size_t)k + 1;
    }
    *out = &P->cnt[k];
    return 0;
}

/* Skips an argument of w length bytes then that many bytes; -1 when it runs past the end. */
static int skip_len(gmp_pkstream *P, size_t w)
{
    if (fill(P, w) < 0)
        return -1;
    uint64_t n = le(P->p, w);
    P->p += w;
    if (n > left_in_input(P) || n >= UINT32_MAX)
        return -1;
    while (n) {
        size_t have = (size_t)(P->end - P->p);
        if (!have) {
            if (fill(P, 1) < 0)
                return -1;
            have = (size_t)(P->end - P->p);
        }
        size_t k = have < n ? have : (size_t)n;
        P->p += k;
        n -= k;
    }
    return 0;
}

/* One opcode of the scan, from P->p, refilling the window as needed: -1 to stop (at STOP, or at
 * the first fault, which the parse then reports). Arguments are skipped as the table of opcodes
 * says; the memo's opcodes are counted. */
static int scan_step(gmp_pkstream *P, uint64_t *ndef, int first)
{
    if (fill(P, 1) < 0)
        return -1;
    unsigned op = *P->p++;
    const gmp_pickle_opinfo *in = &gmp_pickle_ops[op];
    if ((first && op != PK_PROTO) || in->verdict != GMP_PKOP_ACCEPTED || op == PK_STOP)
        return -1; /* refused or unknown: the parse says which */
    size_t w = in->width;
    if (in->counted) {
        if (op == PK_LONG4 && (fill(P, 4) < 0 || (P->p[3] & 0x80)))
            return -1;
        return skip_len(P, w);
    }
    if (fill(P, w) < 0)
        return -1;
    uint64_t key = le(P->p, w);
    P->p += w;
    uint8_t *c = NULL;
    switch (op) {
    case PK_FRAME: return key > left_in_input(P) ? -1 : 0;
    case PK_MEMOIZE:
        key = *ndef;
        /* fall through */
    case PK_BINPUT:
    case PK_LONG_BINPUT:
        if (cnt_at(P, key, &c) < 0)
            return -1;
        if (!(*c & 0x80)) {
            *c |= 0x80;
            (*ndef)++;
        }
        return 0;
    case PK_BINGET:
    case PK_LONG_BINGET:
        if (key >= P->cnt_len || !(P->cnt[key] & 0x80))
            return -1; /* not defined: the parse says so */
        if ((P->cnt[key] & KEEP) != KEEP)
            P->cnt[key]++;
        return 0;
    default: return 0;
    }
}

/* Pass 1: the fetches of each memo index counted, up to STOP or the first fault. */
void gmp_pks_scan(gmp_pkstream *P)
{
    uint64_t ndef = 0;
    for (int first = 1; scan_step(P, &ndef, first) == 0; first = 0)
        ;
}

/* The memo of the parse: a dense slot per fetched index. */
int gmp_pks_memo_prepare(gmp_pkstream *P)
{
    P->nwords = (P->cnt_len + 63) / 64;
    size_t nref = 0;
    for (size_t i = 0; i < P->cnt_len; i++)
        nref += (P->cnt[i] & KEEP) != 0;
    size_t bytes = P->nwords * (sizeof(mword) + sizeof(uint64_t)) + nref * sizeof(mslot);
    if (charge(P, bytes) < 0)
        return -1;
    P->mw = calloc(P->nwords ? P->nwords : 1, sizeof *P->mw);
    P->defined = calloc(P->nwords ? P->nwords : 1, sizeof *P->defined);
    P->slots = calloc(nref ? nref : 1, sizeof *P->slots);
    if (!P->mw || !P->defined || !P->slots)
        return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
    P->nslots = nref;
    size_t r = 0;
    for (size_t w = 0; w < P->nwords; w++) {
        P->mw[w].rank = r;
        for (size_t b = 0; b < 64 && w * 64 + b < P->cnt_len; b++) {
            uint8_t c = P->cnt[w * 64 + b] & KEEP;
            if (c) {
                P->mw[w].bits |= (uint64_t)1 << b;
                P->slots[r++].left = c;
            }
        }
    }
    free(P->cnt);
    uncharge(P, P->cnt_cap);
    P->cnt = NULL;
    P->cnt_cap = 0;
    return 0;
}

/* One pass, sparse or not: the words of mw and defined (64 indices each) that index key needs,
 * doubling from 1024. */
static size_t words_for(const gmp_pkstream *P, uint64_t key)
{
    size_t nw = P->nwords ? P->nwords : 1024;
    while ((uint64_t)nw * 64 <= key)
        nw *= 2;
    return nw;
}

/* mw and defined grown to nw words (charged; the new words are the caller's to set). */
static int words_grow(gmp_pkstream *P, size_t nw)
{
    if (charge(P, (nw - P->nwords) * (sizeof(mword) + sizeof(uint64_t))) < 0)
        return -1;
    mword *mw = realloc(P->mw, nw * sizeof *mw);
    if (mw)
        P->mw = mw;
    uint64_t *def = realloc(P->defined, nw * sizeof *def);
    if (def)
        P->defined = def;
    if (!mw || !def)
        return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
    return 0;
}

/* One pass (gmp_pkstream_one_pass): the memo keeps, of what is memoized, only the
 * strings and the containers guessed to be fetched again (F_KEEP: stored under keep_key, the
 * "frames" lists of a snapshot, and their items), kept for ever; the rest is only counted as
 * defined, so a fetch of it fails, and so does the run (the caller reads it again in two passes).
 * Indices must come in order (MEMOIZE, and BINPUT as CPython's pickler writes it: the memo's
 * length): slots are appended, mw's bits mark the kept indices and its ranks count the slots
 * before each word, so slot_of works unchanged. Grows mw and defined for index key. */
int gmp_pks_sparse_grow(gmp_pkstream *P, uint64_t key)
{
    size_t nw = words_for(P, key);
    if (nw == P->nwords)
        return 0;
    if (words_grow(P, nw) < 0)
        return -1;
    memset(P->mw + P->nwords, 0, (nw - P->nwords) * sizeof *P->mw);
    memset(P->defined + P->nwords, 0, (nw - P->nwords) * sizeof *P->defined);
    P->nwords = nw;
    return 0;
}

/* memo_put in one pass: top (the stack's top) memoized at key. */
static int sparse_put(gmp_pkstream *P, uint64_t key)
{
    if (key != P->ndefined)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "memo index %llu out of order (one pass)",
                            (unsigned long long)key);
    if (key >= (uint64_t)P->nwords * 64 && gmp_pks_sparse_grow(P, key) < 0)
        return -1;
    P->defined[key >> 6] |= (uint64_t)1 << (key & 63);
    P->ndefined++;
    gmp_pkv *top = &P->stack[P->sn - 1];
    if (!sparse_keeps(top))
        return 0;
    if (P->mem > P->budget)
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "more than %zu bytes held (one pass)", P->budget);
    if (P->nslots == P->slots_cap) {
        size_t nc = P->slots_cap ? 2 * P->slots_cap : 1024;
        if (charge(P, (nc - P->slots_cap) * sizeof(mslot)) < 0)
            return -1;
        mslot *sl = realloc(P->slots, nc * sizeof *sl);
        if (!sl)
            return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
        P->slots = sl;
        P->slots_cap = nc;
    }
    size_t w = (size_t)(key >> 6);
    for (; P->rank_words <= w; P->rank_words++)
        P->mw[P->rank_words].rank = P->nslots;
    P->mw[w].bits |= (uint64_t)1 << (key & 63);
    ref(top);
    mslot *m = &P->slots[P->nslots++];
    m->type = top->type;
    m->big = top->big;
    m->plain = 0;
    m->left = KEEP;
    m->v.u = top->v.u;
    return 0;
}

int gmp_pks_memo_put(gmp_pkstream *P, uint64_t key)
{
    if (P->sn <= mark_base(P))
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "stack underflow");
    if (key >= P->lim.max_memo)
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "memo index %llu (limit %zu)",
                            (unsigned long long)key, P->lim.max_memo);
    if (P->sparse)
        return sparse_put(P, key);
    if (key < (uint64_t)P->nwords * 64) {
        uint64_t bit = (uint64_t)1 << (key & 63);
        if (!(P->defined[key >> 6] & bit)) {
            P->defined[key >> 6] |= bit;
            P->ndefined++;
        }
    } else {
        P->ndefined++; /* never fetched (the scan stopped before): only its count matters */
    }
    long s = slot_of(P, key);
    if (s < 0 || !P->slots[s].left)
        return 0; /* never fetched again: not kept */
    gmp_pkv *top = &P->stack[P->sn - 1];
    ref(top);
    mslot *m = &P->slots[s];
    slot_unref(P, m);
    m->type = top->type;
    m->big = top->big;
    m->plain = 0;
    m->v.u = top->v.u;
    return 0;
}

int gmp_pks_memo_get(gmp_pkstream *P, uint64_t key)
{
    long s = slot_of(P, key);
    if (key >= (uint64_t)P->nwords * 64 || !(P->defined[key >> 6] & ((uint64_t)1 << (key & 63))) ||
        s < 0 || !P->slots[s].left)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "memo key %llu not defined",
                            (unsigned long long)key);
    mslot *m = &P->slots[s];
    gmp_pkv v = {.type = m->type, .big = m->big, .v.u = m->v.u};
    if (m->left != KEEP && --m->left == 0) {
        m->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
        return push(P, v);
    }
    ref(&v);
    return push(P, v);
}
