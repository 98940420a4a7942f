/* gmp_readahead: the reader's read-ahead thread (see gmp_readahead.h).
 *
 * Pools of RA_CHUNKS record chunks and RA_WINDOWS windows, and one queue of items that can hold
 * all of them (so that queueing never waits). The decoder waits only for a free chunk or window;
 * the caller waits only for an item. One mutex and two condition variables, taken once per chunk
 * or window (a window is a whole SYNC interval, tens of thousands of events). */
#include "gmp_readahead.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define RA_CHUNKS 4
#define RA_WINDOWS 2 /* windows released ahead of the caller (the decoder fills one more) */
/* A second window may be in flight only while the windows in flight hold at most this much: a
 * trace with far-apart SYNC records (huge windows) then costs one window more than without
 * read-ahead, not two. */
#ifndef GMP_RA_INFLIGHT_BYTES /* tests build a copy with 1, so that the decoder always waits */
#define GMP_RA_INFLIGHT_BYTES ((size_t)64 << 20)
#endif
#define RA_QUEUE (RA_CHUNKS + RA_WINDOWS)

typedef struct ra_chunk {
    gmp_rec *rec;
    size_t n;
    gmp_err status; /* GMP_OK; else the decoder's final status (the chunk is the last item) */
    char **owned;   /* NOTICE messages copied into this chunk */
    size_t nowned, owned_cap;
} ra_chunk;

typedef struct ra_qitem {
    ra_chunk *chunk;
    gmp_ra_window *win;
    gmp_ra_progress prog;
} ra_qitem;

struct gmp_ra {
    gmp_ra_source src;
    size_t batch;
    pthread_t th;
    int running;

    pthread_mutex_t mu;
    pthread_cond_t to_dec, to_caller; /* wakes the decoder / the caller */
    int stop;                         /* the caller wants the thread to end */
    ra_qitem q[RA_QUEUE];
    size_t qhead, qn;
    ra_chunk chunks[RA_CHUNKS];
    ra_chunk *free_chunks[RA_CHUNKS];
    size_t nfree_chunks;
    gmp_ra_window wins[RA_WINDOWS];
    gmp_ra_window *free_wins[RA_WINDOWS];
    size_t nfree_wins;
    size_t inflight_bytes; /* windows queued or held by the caller */

    ra_chunk *fill; /* the decoder's: the chunk being filled */
    ra_chunk *cur;  /* the caller's: the chunk being returned */
    size_t pos;
};

static void chunk_clear(ra_chunk *c)
{
    for (size_t i = 0; i < c->nowned; i++)
        free(c->owned[i]);
    c->nowned = 0;
    c->n = 0;
    c->status = GMP_OK;
}

/* Keeps a copy of a NOTICE's message in the chunk; -1 when out of memory. */
static int own_notice(ra_chunk *c, gmp_rec *rec)
{
    if (c->nowned == c->owned_cap) {
        size_t nc = c->owned_cap ? c->owned_cap * 2 : 4;
        char **no = realloc(c->owned, nc * sizeof *no);
        if (!no)
            return -1;
        c->owned = no;
        c->owned_cap = nc;
    }
    gmp_str *m = &rec->u.notice.message;
    char *s = gmp_str_dup(*m);
    if (!s)
        return -1;
    m->ptr = s;
    c->owned[c->nowned++] = s;
    return 0;
}

static void progress_of(const gmp_ra *ra, gmp_ra_progress *p)
{
    ra->src.progress(ra->src.dec, p);
}

/* Queues an item (never waits: the queue holds every chunk and window). */
static void push(gmp_ra *ra, ra_chunk *c, gmp_ra_window *w, const gmp_ra_progress *prog)
{
    pthread_mutex_lock(&ra->mu);
    if (w)
        ra->inflight_bytes += w->bytes;
    ra_qitem *it = &ra->q[(ra->qhead + ra->qn) % RA_QUEUE];
    it->chunk = c;
    it->win = w;
    it->prog = *prog;
    ra->qn++;
    pthread_cond_signal(&ra->to_caller);
    pthread_mutex_unlock(&ra->mu);
}

/* The decoder's chunk to fill (waits for a free one); NULL when stopping. */
static ra_chunk *fill_chunk(gmp_ra *ra)
{
    if (ra->fill)
        return ra->fill;
    pthread_mutex_lock(&ra->mu);
    while (!ra->nfree_chunks && !ra->stop)
        pthread_cond_wait(&ra->to_dec, &ra->mu);
    ra_chunk *c = ra->stop ? NULL : ra->free_chunks[--ra->nfree_chunks];
    pthread_mutex_unlock(&ra->mu);
    if (c)
        chunk_clear(c);
    return ra->fill = c;
}

/* Queues the chunk being filled, if any records are in it. */
static void flush_fill(gmp_ra *ra)
{
    if (ra->fill && ra->fill->n) {
        gmp_ra_progress p;
        progress_of(ra, &p);
        push(ra, ra->fill, NULL, &p);
        ra->fill = NULL;
    }
}

gmp_ra_window *gmp_ra_window_get(gmp_ra *ra)
{
    pthread_mutex_lock(&ra->mu);
    while (!ra->stop && (!ra->nfree_wins || (ra->nfree_wins < RA_WINDOWS &&
                                             ra->inflight_bytes > GMP_RA_INFLIGHT_BYTES)))
        pthread_cond_wait(&ra->to_dec, &ra->mu);
    gmp_ra_window *w = ra->stop ? NULL : ra->free_wins[--ra->nfree_wins];
    pthread_mutex_unlock(&ra->mu);
    return w;
}

void gmp_ra_window_put(gmp_ra *ra, gmp_ra_window *w, const gmp_ra_progress *prog)
{
    flush_fill(ra); /* the records decoded before the window was released come first */
    push(ra, NULL, w, prog);
}

static void *decoder_main(void *arg)
{
    gmp_ra *ra = arg;
    for (;;) {
        const gmp_rec *rec;
        gmp_err e = ra->src.next(ra->src.dec, &rec);
        ra_chunk *c = fill_chunk(ra);
        if (!c)
            return NULL; /* stopping */
        if (e == GMP_OK) {
            gmp_rec *x = &c->rec[c->n];
            *x = *rec;
            if (x->type == GMP_REC_NOTICE && own_notice(c, x) < 0)
                e = GMP_ERR_NOMEM;
        }
        if (e != GMP_OK) {
            c->status = e;
            gmp_ra_progress p;
            progress_of(ra, &p);
            push(ra, c, NULL, &p);
            ra->fill = NULL;
            return NULL;
        }
        if (++c->n == ra->batch)
            flush_fill(ra);
    }
}

gmp_ra *gmp_ra_new(const gmp_ra_source *src, size_t batch)
{
    if (!src || !src->dec || !src->next || !src->progress || !batch)
        return NULL;
    gmp_ra *ra = calloc(1, sizeof *ra);
    if (!ra)
        return NULL;
    ra->src = *src;
    ra->batch = batch;
    int ok = pthread_mutex_init(&ra->mu, NULL) == 0;
    ok = ok && pthread_cond_init(&ra->to_dec, NULL) == 0;
    ok = ok && pthread_cond_init(&ra->to_caller, NULL) == 0;
    for (int i = 0; ok && i < RA_CHUNKS; i++) {
        ra->chunks[i].rec = malloc(batch * sizeof *ra->chunks[i].rec);
        ok = ra->chunks[i].rec != NULL;
        ra->free_chunks[ra->nfree_chunks++] = &ra->chunks[i];
    }
    for (int i = 0; i < RA_WINDOWS; i++)
        ra->free_wins[ra->nfree_wins++] = &ra->wins[i];
    if (!ok) {
        for (int i = 0; i < RA_CHUNKS; i++)
            free(ra->chunks[i].rec);
        /* a mutex or condition variable that failed to initialize is not destroyed: glibc's
         * init does not fail, and destroying an uninitialized one is undefined */
        free(ra);
        return NULL;
    }
    return ra;
}

int gmp_ra_run(gmp_ra *ra)
{
    /* the thread takes no signals: they go to the caller's threads as before */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&ra->th, NULL, decoder_main, ra);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ra->running = rc == 0;
    return rc ? -1 : 0;
}

void gmp_ra_next(gmp_ra *ra, gmp_ra_item *it)
{
    memset(it, 0, sizeof *it);
    for (;;) {
        ra_chunk *c = ra->cur;
        if (c && ra->pos < c->n) {
            it->rec = &c->rec[ra->pos++];
            return;
        }
        if (c && c->status != GMP_OK) {
            it->status = c->status; /* the thread has returned */
            return;
        }
        pthread_mutex_lock(&ra->mu);
        if (c) { /* every record of it was returned, the last one before this call */
            ra->free_chunks[ra->nfree_chunks++] = c;
            ra->cur = NULL;
            pthread_cond_signal(&ra->to_dec);
        }
        while (!ra->qn)
            pthread_cond_wait(&ra->to_caller, &ra->mu);
        ra_qitem q = ra->q[ra->qhead];
        ra->qhead = (ra->qhead + 1) % RA_QUEUE;
        ra->qn--;
        pthread_mutex_unlock(&ra->mu);
        it->prog = q.prog;
        if (q.win) {
            it->win = q.win;
            return;
        }
        ra->cur = q.chunk;
        ra->pos = 0;
    }
}

void gmp_ra_window_done(gmp_ra *ra, gmp_ra_window *w)
{
    pthread_mutex_lock(&ra->mu);
    ra->free_wins[ra->nfree_wins++] = w;
    ra->inflight_bytes -= w->bytes;
    w->bytes = 0;
    pthread_cond_signal(&ra->to_dec);
    pthread_mutex_unlock(&ra->mu);
}

void *gmp_ra_finish(gmp_ra *ra, void (*drop)(gmp_ra_window *w))
{
    if (!ra)
        return NULL;
    if (ra->running) {
        pthread_mutex_lock(&ra->mu);
        ra->stop = 1;
        pthread_cond_broadcast(&ra->to_dec);
        pthread_mutex_unlock(&ra->mu);
        pthread_join(ra->th, NULL);
    }
    for (size_t i = 0; i < ra->qn; i++) {
        const ra_qitem *q = &ra->q[(ra->qhead + i) % RA_QUEUE];
        if (q->win && drop)
            drop(q->win);
    }
    for (int i = 0; i < RA_WINDOWS; i++) {
        free(ra->wins[i].slots);
        free(ra->wins[i].order);
    }
    for (int i = 0; i < RA_CHUNKS; i++) {
        chunk_clear(&ra->chunks[i]);
        free(ra->chunks[i].owned);
        free(ra->chunks[i].rec);
    }
    pthread_cond_destroy(&ra->to_dec);
    pthread_cond_destroy(&ra->to_caller);
    pthread_mutex_destroy(&ra->mu);
    void *dec = ra->src.dec;
    free(ra);
    return dec;
}
