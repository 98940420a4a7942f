/* gmp_reader_ra: the reader's side of its read-ahead (see the top of gmp_reader.c): the decoder
 * forked from the reader and joined back, and the records the reader takes from the windows it
 * hands over. gmp_reader.c reaches it through r->ra_ops, set by gmp_reader_readahead. */
#include "gmp_reader.h"
#include "gmp_reader_impl.h"

static int deftab_clone(deftab *dst, const deftab *src)
{
    *dst = *src;
    dst->dense = NULL;
    dst->hash = NULL;
    dst->items = NULL;
    if ((src->dense_cap && !(dst->dense = malloc(src->dense_cap * sizeof *dst->dense))) ||
        (src->hcap && !(dst->hash = malloc(src->hcap * sizeof *dst->hash))) ||
        (src->cap && !(dst->items = malloc(src->cap * sizeof *dst->items)))) {
        deftab_free(dst);
        return -1;
    }
    if (src->dense_cap)
        memcpy(dst->dense, src->dense, src->dense_cap * sizeof *dst->dense);
    if (src->hcap)
        memcpy(dst->hash, src->hash, src->hcap * sizeof *dst->hash);
    if (src->n)
        memcpy(dst->items, src->items, src->n * sizeof *dst->items);
    return 0;
}

#define NDEFTABS 6
static void deftabs_of(gmp_reader *r, deftab *t[NDEFTABS])
{
    t[0] = &r->strings;
    t[1] = &r->stacks;
    t[2] = &r->ranges;
    t[3] = &r->modules;
    t[4] = &r->devices;
    t[5] = &r->threads;
}

/* A decoder for the read-ahead thread: a copy of r that takes over the input, the zstd context,
 * the frame and the reorder window, with copies of the definition tables (their items, in r's
 * arena, are shared: they never change) and an arena of its own. NULL when out of memory. */
static gmp_reader *decoder_fork(gmp_reader *r)
{
    gmp_reader *d = malloc(sizeof *d);
    if (!d)
        return NULL;
    *d = *r;
    memset(&d->ar, 0, sizeof d->ar);
    deftab *dt[NDEFTABS], *rt[NDEFTABS];
    deftabs_of(d, dt);
    deftabs_of(r, rt);
    for (int i = 0; i < NDEFTABS; i++) {
        if (deftab_clone(dt[i], rt[i]) < 0) {
            while (i-- > 0)
                deftab_free(dt[i]);
            free(d);
            return NULL;
        }
    }
    d->ra = NULL;
    d->ra_batch = 0;
    d->rwin = NULL;
    d->pkg_ra = NULL;
    d->notice_out = NULL;
    r->fd = -1;
    r->q = NULL;
    r->ibuf = NULL;
    r->fbuf = NULL;
    r->dctx = NULL;
    r->slots = NULL;
    r->remap = NULL;
    r->remap_cap = 0;
    r->keys = NULL;
    r->tmp = NULL;
    r->slots_n = r->slots_cap = r->keys_n = r->keys_cap = r->sorted_n = 0;
    r->rel_pos = r->rel_n = 0;
    return d;
}

/* The decoder's state back into r, which keeps its own definitions and header; d's arena joins
 * r's; d is freed. */
static void decoder_join(gmp_reader *r, gmp_reader *d)
{
    arena ar = r->ar;
    if (d->ar.head) {
        arena_blk *t = d->ar.head;
        while (t->next)
            t = t->next;
        t->next = ar.head;
        ar.head = d->ar.head;
    }
    deftab keep[NDEFTABS], *rt[NDEFTABS], *dt[NDEFTABS];
    deftabs_of(r, rt);
    deftabs_of(d, dt);
    for (int i = 0; i < NDEFTABS; i++) {
        keep[i] = *rt[i];
        deftab_free(dt[i]);
    }
    gmp_rec_header h = r->header;
    size_t batch = r->ra_batch;
    *r = *d;
    free(d);
    r->ar = ar;
    r->header = h;
    for (int i = 0; i < NDEFTABS; i++)
        *rt[i] = keep[i];
    r->ra = NULL;
    r->ra_batch = batch;
    r->pkg_ra = NULL;
    r->rwin = NULL;
}

/* Frees the NOTICE messages of a window's events from index `from` on (events not returned). */
static void window_free_from(gmp_ra_window *w, size_t from)
{
    const wslot *slots = w->slots;
    for (size_t i = from; i < w->n; i++)
        if (slots[w->order[i]].type == GMP_REC_NOTICE)
            free((char *)slots[w->order[i]].u.notice.message.ptr);
    w->n = 0;
}

static void drop_window(gmp_ra_window *w)
{
    window_free_from(w, 0);
}

/* The decoder's functions as the read-ahead calls them (gmp_ra_source). */
static gmp_err ra_src_next(void *dec, const gmp_rec **rec)
{
    return gmp_reader_next(dec, rec);
}

static void ra_src_progress(void *dec, gmp_ra_progress *p)
{
    const gmp_reader_stats *st = gmp_reader_get_stats(dec);
    p->bytes_read = st->bytes_read;
    p->frames = st->frames;
    p->events = st->events;
}

/* (the read-ahead's functions are kept out of gmp_reader_next, which stays small without it) */
__attribute__((noinline)) static void ra_begin(gmp_reader *r)
{
    if (r->header_pending || r->err)
        return;
    if (r->notice_out) {
        free(r->notice_out);
        r->notice_out = NULL;
    }
    size_t batch = r->ra_batch;
    r->ra_batch = 0; /* from here on, or on in the calling thread if this fails */
    gmp_reader *d = decoder_fork(r);
    if (!d)
        return;
    gmp_ra *ra = gmp_ra_new(&(gmp_ra_source){d, ra_src_next, ra_src_progress}, batch);
    if (!ra) {
        decoder_join(r, d);
        return;
    }
    d->pkg_ra = ra;
    if (gmp_ra_run(ra) < 0) {
        decoder_join(r, gmp_ra_finish(ra, NULL));
        return;
    }
    r->ra = ra;
}

/* Ends the read-ahead: the thread stops, its decoder's state comes back. */
static void ra_end(gmp_reader *r)
{
    free(r->notice_out); /* a NOTICE returned last (from a window): this is the next call */
    r->notice_out = NULL;
    if (r->rwin) {
        window_free_from(r->rwin, r->rwin_pos);
        gmp_ra_window_done(r->ra, r->rwin);
        r->rwin = NULL;
    }
    decoder_join(r, gmp_ra_finish(r->ra, drop_window));
}

__attribute__((noinline)) static gmp_err ra_next(gmp_reader *r, const gmp_rec **rec)
{
    if (r->notice_out) {
        free(r->notice_out);
        r->notice_out = NULL;
    }
    for (;;) {
        gmp_ra_window *w = r->rwin;
        if (w) {
            size_t i = r->rwin_pos;
            if (i < w->n) {
                const wslot *slots = w->slots;
                if (i + SLOT_AHEAD < w->n) { /* as in next_inner */
                    const char *ps = (const char *)&slots[w->order[i + SLOT_AHEAD]];
                    __builtin_prefetch(ps);
                    __builtin_prefetch(ps + sizeof(wslot) - 1);
                }
                r->rwin_pos = i + 1;
                emit(r, &slots[w->order[i]]);
                *rec = &r->out;
                return GMP_OK;
            }
            gmp_ra_window_done(r->ra, w);
            r->rwin = NULL;
        }
        gmp_ra_item it;
        gmp_ra_next(r->ra, &it);
        r->stats.bytes_read = it.prog.bytes_read;
        r->stats.frames = it.prog.frames;
        r->stats.events = it.prog.events;
        if (it.status != GMP_OK) {
            ra_end(r); /* the decoder's err, message and stats are r's now */
            if (it.status < 0 && !r->err)
                nomem(r); /* the thread could not copy a record */
            return it.status;
        }
        if (it.win) {
            r->rwin = it.win;
            r->rwin_pos = 0;
            continue;
        }
        const gmp_rec *x = it.rec;
        if (r->cls[x->type] != CLS_DEF) {
            *rec = x;
            return GMP_OK;
        }
        /* a definition (validated by the decoder): visible to the lookups from now on, as
         * without read-ahead */
        r->dec = *x;
        gmp_err e = gmp_reader_define_decoded(r);
        if (e) {
            ra_end(r);
            return nomem(r);
        }
        r->out = r->dec;
        *rec = &r->out;
        return GMP_OK;
    }
}

static const gmp_reader_ra_ops ops = {ra_begin, ra_next, ra_end};

gmp_err gmp_reader_readahead(gmp_reader *r, size_t batch)
{
    if (!r || batch > GMP_READER_READAHEAD_MAX)
        return GMP_ERR_ARG;
    if (!r->ra && (batch || !r->ra_batch)) /* 0 keeps a size asked for before */
        r->ra_batch = batch ? batch : GMP_READER_READAHEAD_DEFAULT;
    r->ra_ops = &ops;
    return GMP_OK;
}
