/* gmp_pkstream_hand: the streaming pickle reader's hand-over of items (gmp_pkstream_impl.h).
 *
 * A streamed list's items are checked and counted as APPENDS stores them (hand, hand_flat), then
 * put in a batch, which the consumer reads (batch_read) once the APPENDS is done (submit); its
 * values are released after (batch_release), on the calling thread, with the husks the consumer
 * asked for meanwhile. So the consumer sees the same items in the same order as if each were
 * handed over when stored: everything a batch refers to holds a reference until it is released.
 * A consumer that stops stops the parse; its message wins over any error of the parse after the
 * item it stopped at (the parse would not have got there). */
#include "gmp_pkstream_impl.h"

/* Room for one more item in b (its pairs and records grow in flat_room). */
int gmp_pks_batch_room(gmp_pkstream *P, pk_batch *b)
{
    if (b->n < b->cap)
        return 0;
    size_t nc = b->cap ? 2 * b->cap : 256;
    if (charge(P, (nc - b->cap) * sizeof *b->it) < 0)
        return -1;
    pk_item *it = realloc(b->it, nc * sizeof *it);
    if (!it)
        return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
    b->it = it;
    b->cap = nc;
    return 0;
}

/* The consumer reads the batch's items in order, up to one it stops at. */
static void batch_read(gmp_pkstream *P, pk_batch *b)
{
    P->cur = b;
    for (size_t i = 0; i < b->n && P->cb.item && !b->failed; i++) {
        const pk_item *x = &b->it[i];
        if (!x->flat) {
            b->msg[0] = 0;
            b->failed = P->cb.item(P->cb.ctx, x->kind, x->index, &x->v, b->msg, sizeof b->msg) != 0;
            continue;
        }
        /* each record as a dict that lives for the call: sealed, with a role (husk leaves it) */
        gmp_pkobj o;
        memset(&o, 0, sizeof o);
        o.type = GMP_PK_DICT;
        px(&o)->sealed = 1;
        px(&o)->role = R_FLAT;
        gmp_pkv item = {.type = GMP_PK_DICT, .v.o = &o};
        for (uint32_t k = 0; k < x->n; k++) {
            const flat_rec *r = &b->recs[x->off + k];
            if (k + 4 < x->n) { /* written on the parse's thread: fetched ahead */
                const char *ahead = (const char *)(b->pairs + r[4].off);
                __builtin_prefetch(ahead);
                __builtin_prefetch(ahead + 64);
                __builtin_prefetch(ahead + 128);
                __builtin_prefetch(ahead + 192);
            }
            o.n = px(&o)->cap = r->n;
            px(&o)->height = r->height;
            o.d.items = b->pairs + r->off;
            o.tag = 0;
            b->msg[0] = 0;
            if (P->cb.item(P->cb.ctx, x->kind, x->index, &item, b->msg, sizeof b->msg) != 0) {
                b->failed = 1;
                break;
            }
        }
    }
    P->cur = NULL;
}

/* After it was read: the husks asked for, then the values' references. */
static void batch_release(gmp_pkstream *P, pk_batch *b)
{
    for (size_t i = 0; i < b->hn; i++)
        gmp_pks_husk_now(P, b->husks[i]);
    for (size_t i = 0; i < b->n; i++) {
        const pk_item *x = &b->it[i];
        if (!x->flat)
            unref(P, &x->v);
        else
            for (uint32_t k = 0; k < x->n; k++) {
                const flat_rec *r = &b->recs[x->off + k];
                for (uint64_t m = r->owned; m; m &= m - 1)
                    unref(P, &b->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
            }
    }
    b->n = b->pn = b->rn = b->hn = 0;
}

/* A batch that was read and released: a consumer that stopped stops the parse, whatever it
 * failed on later (0, or -1). */
static int batch_outcome(gmp_pkstream *P, pk_batch *b)
{
    if (!b->failed)
        return 0;
    b->failed = 0;
    P->code = GMP_ERR_FORMAT;
    P->consumer_stop = 1;
    if (P->err && P->errlen)
        snprintf(P->err, P->errlen, "%s", b->msg);
    return -1;
}

/* Hands the batch being filled to the consumer, then releases it. -1 when the consumer stopped. */
int gmp_pks_submit(gmp_pkstream *P)
{
    pk_batch *b = P->fill;
    if (!b->n)
        return 0;
    batch_read(P, b);
    batch_release(P, b);
    return batch_outcome(P, b);
}

/* At the end of a run, or when it fails: every item stored so far is read (the consumer's stop
 * winning over the run's failure). */

void gmp_pks_flush(gmp_pkstream *P)
{
    gmp_pks_submit(P);
    batch_release(P, P->fill); /* what a stop left unread */
}

void gmp_pks_husk_now(gmp_pkstream *P, gmp_pkobj *o)
{
    if (!o || o->type < GMP_PK_LIST || !o->d.items || px(o)->role)
        return;
    size_t k = o->type == GMP_PK_DICT ? 2 * (size_t)o->n : o->n;
    for (size_t i = 0; i < k; i++)
        unref(P, &o->d.items[i]);
    gmp_pks_arr_free(P, o->d.items, o->type == GMP_PK_DICT ? 2 * (size_t)px(o)->cap : px(o)->cap);
    o->d.items = NULL;
    o->n = px(o)->cap = 0;
    o->flags |= GMP_PKOBJ_HUSKED;
}

/* While a batch is read, husks wait for its release (a later item of the batch may refer to the
 * same container: it finds it whole, with its tag). A husk that cannot be recorded (out of memory)
 * is dropped: it only saves memory. */
void gmp_pkstream_husk(gmp_pkstream *P, gmp_pkobj *o)
{
    /* a flat record's dict lives for the callback only (batch_read's stack) and holds nothing of
     * its own to release: husk_now leaves it, so it is not kept for after the call either */
    if (!P || !o || (o->type >= GMP_PK_LIST && px(o)->role))
        return;
    pk_batch *b = P->cur;
    if (!b) {
        gmp_pks_husk_now(P, o);
        return;
    }
    if (b->hn == b->hcap) {
        size_t nc = b->hcap ? 2 * b->hcap : 64;
        gmp_pkobj **h = realloc(b->husks, nc * sizeof *h);
        if (!h)
            return;
        b->husks = h;
        b->hcap = nc;
    }
    b->husks[b->hn++] = o;
}
