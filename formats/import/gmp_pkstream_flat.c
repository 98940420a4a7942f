/* gmp_pkstream_flat: the streaming pickle reader's flat trace entries (gmp_pkstream_impl.h).
 *
 * Nearly all of a large snapshot is trace entries: dicts of a few scalars and memo references
 * (keys, action, frames list), each built, then stored in its device's list by APPENDS and handed
 * over. fast_entry reads such a dict straight from the input into a record of its pairs and
 * pushes a placeholder (NONE with big = 1 and the record's index) instead of an object: no dict,
 * no item array, no per-pair checks later. Nothing else may see a placeholder: the streamed list's
 * APPENDS hands the record over (hand_flat), read as a dict; any other opcode that would read one
 * (flat_neutral says which do not) first turns every placeholder back into the dict it stands for
 * (materialize), so every outcome is the one without placeholders. fast_entry takes only what it
 * can take whole (a dict of MEMOIZE, MARK, string keys and scalar or fetched values, SETITEMS, in
 * the window, not kept by the memo), and leaves anything else to the usual path untouched. */
#include "gmp_pkstream_impl.h"

/* Room for one more record of up to n pairs, counted as memory held; 0, or -1 (then nothing is
 * said: the dict is read the usual way, which reports what is wrong). */
static int flat_room(gmp_pkstream *P, size_t n)
{
    pk_batch *b = P->fill;
    if (b->rn < b->rcap && b->pn + 2 * n <= b->pcap)
        return 0;
    if (b->rn == FLAT_RECS_MAX)
        return -1;
    size_t add = 0, rc = b->rcap, pc = b->pcap;
    if (b->rn == rc)
        rc = rc ? 2 * rc : 256, add += (rc - b->rcap) * sizeof *b->recs;
    while (b->pn + 2 * n > pc)
        pc = pc ? 2 * pc : 4096;
    add += (pc - b->pcap) * sizeof *b->pairs;
    if (add > P->lim.max_memory || P->mem > P->lim.max_memory - add)
        return -1;
    if (rc != b->rcap) {
        flat_rec *r = realloc(b->recs, rc * sizeof *r);
        if (!r)
            return -1;
        b->recs = r;
        P->mem += (rc - b->rcap) * sizeof *r;
        b->rcap = rc;
    }
    if (pc != b->pcap) {
        gmp_pkv *q = realloc(b->pairs, pc * sizeof *q);
        if (!q)
            return -1;
        b->pairs = q;
        P->mem += (pc - b->pcap) * sizeof *q;
        b->pcap = pc;
    }
    if (P->mem > P->peak)
        P->peak = P->mem;
    return 0;
}

/* A placeholder is gone (its record handed over, or made a dict). */
static void flat_done(gmp_pkstream *P)
{
    if (--P->nflat == 0)
        P->flat_top = 0;
}

/* At p, '}' (EMPTY_DICT) with sn values on the stack: when it begins a trace entry that can be
 * read flat (the top MARK is on a device's streamed list, and the dict is as said above), reads
 * it, pushes its placeholder at stack[sn] and returns where the input goes on; else NULL, with
 * nothing changed. Every check comes before the first change. Out of the parse loop (noinline):
 * inlined there, its counters would live on the stack (the loop holds too many values for the
 * registers). */
__attribute__((noinline)) const unsigned char *
gmp_pks_fast_entry(gmp_pkstream *P, const unsigned char *p, const unsigned char *end, size_t sn)
{
    size_t m = P->marks[P->mn - 1];
    if (m == 0 || m > sn || sn == P->scap)
        return NULL;
    const gmp_pkv *lv = &P->stack[m - 1];
    if (lv->type != GMP_PK_LIST || px(lv->v.o)->role != R_DEV || px(lv->v.o)->sealed ||
        (lv->v.o->flags & F_KEEP))
        return NULL;
    const unsigned char *q = p + 1;
    if (end - q < 2 || q[0] != PK_MEMOIZE || q[1] != PK_MARK)
        return NULL;
    q += 2;
    /* the dict's MEMOIZE: only when the memo does not keep it (it is fetched again: a dict) */
    uint64_t key = P->ndefined;
    if (key >= P->lim.max_memo)
        return NULL;
    if (key < (uint64_t)P->nwords * 64) {
        const mword *w = &P->mw[key >> 6];
        uint64_t bit = (uint64_t)1 << (key & 63);
        if ((w->bits & bit) && P->slots[w->rank + rank_pop(w->bits & (bit - 1))].left)
            return NULL;
    } else if (P->sparse) {
        return NULL; /* the memo grows there: sparse_put */
    }
    if (flat_room(P, FLAT_PAIRS_MAX) < 0)
        return NULL;
    gmp_pkv *kv = P->fill->pairs + P->fill->pn; /* written in place, kept only when committed */
    mslot *counted[4];      /* fetches whose count goes down: distinct slots, a few at most */
    mslot *plain[4];        /* containers fetched that their slots do not know sealed yet */
    gmp_pkobj *unsealed[4]; /* and those containers (a slot's last fetch empties it) */
    unsigned nplain = 0;
    unsigned counted_at[4], nc = 0;
    unsigned n = 0;
    uint32_t h = 0;
    for (;;) {
        if (q == end)
            return NULL;
        if (*q == PK_SETITEMS) {
            if (n & 1)
                return NULL;
            q++;
            break;
        }
        if (n == 2 * FLAT_PAIRS_MAX)
            return NULL;
        gmp_pkv *d = &kv[n];
        uint64_t k, u = 0;
        unsigned t = GMP_PK_INT, big = 0;
        size_t len = op_get(q, end, &k);
        if (len) {
            q += len;
            goto get;
        }
        if (!(len = op_scalar(q, end, &t, &big, &u)))
            return NULL;
        q += len;
        if (!(n & 1))
            return NULL; /* a key that is not a string */
        pkv_put(d, t, big, u);
        if (h < 1)
            h = 1;
        n++;
        continue;
    get:
        if (k >= (uint64_t)P->nwords * 64)
            return NULL;
        {
            const mword *w = &P->mw[k >> 6];
            uint64_t bit = (uint64_t)1 << (k & 63);
            if (!(w->bits & bit))
                return NULL;
            mslot *s = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
            if (!s->left || s->type == GMP_PK_NONE)
                return NULL;
            if (!(n & 1) && s->type != GMP_PK_STR)
                return NULL;
            if (s->left != KEEP) {
                if (nc == 4)
                    return NULL;
                for (unsigned i = 0; i < nc; i++)
                    if (counted[i] == s)
                        return NULL;
                counted[nc] = s;
                counted_at[nc++] = n;
            }
            uint32_t hh = 1;
            if (s->type >= GMP_PK_LIST) {
                if (s->plain) {
                    hh = s->height + 1;
                } else {
                    if (px(s->v.o)->role)
                        return NULL;
                    hh = px(s->v.o)->height + 1;
                    if (nplain == 4)
                        return NULL;
                    plain[nplain] = s;
                    unsealed[nplain++] = s->v.o;
                }
            }
            if (hh > h)
                h = hh;
            pkv_put(d, s->type, s->big, s->v.u);
            n++;
        }
    }
    if (h > P->lim.max_depth)
        return NULL;
    /* commit: the fetches, the stores, the MEMOIZE, the record, the placeholder */
    /* A value the memo keeps to the end (KEEP) is borrowed: no reference is taken, so the
     * parse writes nothing into it (a consumer on another thread reads it meanwhile). */
    uint64_t owned = 0;
    for (unsigned i = 0, c = 0; i < n; i++) {
        if (c < nc && i == counted_at[c]) {
            owned |= (uint64_t)1 << i;
            if (counted[c]->left == 1) {
                counted[c]->left = 0;
                counted[c]->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
            } else {
                counted[c]->left--;
                if (kv[i].type >= GMP_PK_STR)
                    px(kv[i].v.o)->refs++;
            }
            c++;
        }
    }
    /* stored: sealed (those their slots know as such are; the object is not read: a consumer on
     * another thread writes its tag), and then neither their height nor their role changes
     * again (a slot emptied by its last fetch is left as it is) */
    for (unsigned i = 0; i < nplain; i++) {
        if (!px(unsealed[i])->sealed)
            px(unsealed[i])->sealed = 1;
        if (plain[i]->type >= GMP_PK_LIST) {
            plain[i]->height = px(plain[i]->v.o)->height;
            plain[i]->plain = 1;
        }
    }
    if (key < (uint64_t)P->nwords * 64) {
        uint64_t bit = (uint64_t)1 << (key & 63);
        if (!(P->defined[key >> 6] & bit)) {
            P->defined[key >> 6] |= bit;
            P->ndefined++;
        }
    } else {
        P->ndefined++; /* never fetched: only its count matters */
    }
    flat_rec *r = &P->fill->recs[P->fill->rn];
    r->off = (uint32_t)P->fill->pn;
    r->n = n / 2;
    r->height = h;
    r->owned = owned;
    P->fill->pn += n;
    pkv_put(&P->stack[sn], GMP_PK_NONE, 1, P->fill->rn++);
    P->nflat++;
    P->nflat_total++;
    P->flat_top = sn + 1;
    return q;
}

/* hand, for the record of a placeholder (in the batch already): it joins the run of records
 * handed over just before it, or starts one. */
int gmp_pks_hand_flat(gmp_pkstream *P, gmp_pkobj *list, uint64_t idx)
{
    pk_batch *b = P->fill;
    flat_rec *r = &b->recs[idx];
    int rc = 0;
    uint32_t h = r->height + 1;
    if (h > px(list)->height) {
        px(list)->height = h;
        if (h > P->lim.max_depth)
            rc = gmp_pks_fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu",
                              P->lim.max_depth);
    }
    if (rc == 0 && list->n >= MAX_ITEMS)
        rc = gmp_pks_fail(P, GMP_ERR_LIMIT, "container with more than %u entries",
                          (unsigned)MAX_ITEMS);
    uint8_t kind = px(list)->role == R_DEV ? GMP_PKS_LISTS : GMP_PKS_LIST;
    pk_item *x = b->n ? &b->it[b->n - 1] : NULL;
    int joins =
        x && x->flat && x->off + x->n == idx && x->kind == kind && x->index == px(list)->role_index;
    if (rc == 0 && !joins && b->n == b->cap)
        rc = gmp_pks_batch_room(P, b);
    if (rc < 0) {
        for (uint64_t m = r->owned; m; m &= m - 1)
            unref(P, &b->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
        flat_done(P);
        return -1;
    }
    list->n++;
    if (joins) {
        x->n++;
    } else {
        x = &b->it[b->n++];
        memset(x, 0, sizeof *x);
        x->flat = 1;
        x->off = (uint32_t)idx;
        x->n = 1;
        x->kind = kind;
        x->index = px(list)->role_index;
    }
    flat_done(P); /* the references move to the item */
    return 0;
}

/* Turns every placeholder on the stack into the dict it stands for. */
int gmp_pks_materialize(gmp_pkstream *P)
{
    for (size_t i = 0; i < P->sn && P->nflat; i++) {
        if (!is_flat(&P->stack[i]))
            continue;
        flat_rec *r = &P->fill->recs[P->stack[i].v.u];
        gmp_pkobj *o = gmp_pks_obj_new(P, GMP_PK_DICT);
        if (!o)
            return -1;
        if (r->n && gmp_pks_reserve(P, o, r->n) < 0) {
            gmp_pks_fl_put(P, &P->objs, o, sizeof *o);
            return -1;
        }
        if (r->n)
            memcpy(o->d.items, P->fill->pairs + r->off, 2 * (size_t)r->n * sizeof(gmp_pkv));
        for (uint32_t j = 0; j < 2 * r->n; j++) /* a dict holds a reference to each value */
            if (!(r->owned >> j & 1))
                ref(&o->d.items[j]);
        o->n = r->n;
        px(o)->height = r->height;
        pkv_put_obj(&P->stack[i], GMP_PK_DICT, o);
        flat_done(P);
    }
    return 0;
}

/* Non-zero when predict, for a container pushed at stack[j], decides as it would with the dicts in
 * place of the placeholders. It reads the value under the top MARK, then (for a dict there) the
 * value at j - 1, and only when neither gives a parent, the values at j - 1 and j - 2. A
 * placeholder reads as None where the dict would be an object; at j - 1 after a list under the
 * MARK (the next entry of a batch) that changes nothing. */
int gmp_pks_flat_predicts(const gmp_pkstream *P, size_t j)
{
    const gmp_pkv *st = P->stack;
    size_t m = P->mn ? P->marks[P->mn - 1] : 0;
    int parent = 0;
    if (P->mn && m >= 1 && m <= j) {
        if (is_flat(&st[m - 1]))
            return 0;
        if (is_obj(&st[m - 1])) {
            const gmp_pkobj *c = st[m - 1].v.o;
            if (c->type == GMP_PK_LIST) {
                parent = 1;
            } else if (c->type == GMP_PK_DICT && ((j - m) & 1)) {
                if (is_flat(&st[j - 1]))
                    return 0;
                parent = is_obj(&st[j - 1]);
            }
        }
    }
    return parent || !(j >= 2 && is_flat(&st[j - 2]));
}

/* Non-zero when the opcode op, about to run with placeholders on the stack, cannot read one (it
 * pushes, or reads values above every placeholder, or APPENDS to a streamed list, which hands
 * them over); then they stay. */
int gmp_pks_flat_neutral(const gmp_pkstream *P, unsigned op)
{
    switch (op) {
    case PK_FRAME:
    case PK_MARK:
    case PK_BINGET:
    case PK_LONG_BINGET:
    case PK_NONE:
    case PK_NEWTRUE:
    case PK_NEWFALSE:
    case PK_BININT:
    case PK_BININT1:
    case PK_BININT2:
    case PK_LONG1:
    case PK_LONG4:
    case PK_BINFLOAT:
    case PK_SHORT_BINUNICODE:
    case PK_BINUNICODE:
    case PK_BINUNICODE8:
    case PK_SHORT_BINBYTES:
    case PK_BINBYTES:
    case PK_BINBYTES8: return 1;
    case PK_MEMOIZE:
    case PK_BINPUT:
    case PK_LONG_BINPUT: return P->sn > P->flat_top;
    case PK_EMPTY_LIST:
    case PK_EMPTY_DICT:
    case PK_EMPTY_TUPLE: return gmp_pks_flat_predicts(P, P->sn);
    case PK_SETITEMS: return P->mn && P->marks[P->mn - 1] > P->flat_top;
    case PK_APPENDS: {
        size_t m = P->mn ? P->marks[P->mn - 1] : 0;
        return m >= 1 && m <= P->sn && P->stack[m - 1].type == GMP_PK_LIST &&
               streams(P->stack[m - 1].v.o);
    }
    default: return 0;
    }
}

/* Releases the records that were never handed over (a parse that stopped: their placeholders
 * are left on the stack, as None, for the stack's release). */
void gmp_pks_flat_drop(gmp_pkstream *P)
{
    for (size_t i = 0; i < P->sn && P->nflat; i++) {
        if (!is_flat(&P->stack[i]))
            continue;
        const flat_rec *r = &P->fill->recs[P->stack[i].v.u];
        for (uint64_t m = r->owned; m; m &= m - 1)
            unref(P, &P->fill->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
        pkv_put(&P->stack[i], GMP_PK_NONE, 0, 0);
        P->nflat--;
    }
    P->nflat = P->flat_top = 0;
}
