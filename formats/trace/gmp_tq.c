/* gmp_tq: frames of a trace from a writer to a reader of the same process (see gmp_tq.h).
 *
 * A list of frames under one mutex and two condition variables: the writer waits on `room`, the
 * reader on `ready`. Taken once per frame (a frame is thousands of records). */
#include "gmp_tq.h"

#include <pthread.h>
#include <stdlib.h>

#define DEFAULT_MAX ((size_t)1 << 20)

typedef struct tq_frame {
    struct tq_frame *next;
    uint8_t *buf;
    size_t len, cap;
} tq_frame;

struct gmp_tq {
    pthread_mutex_t lock;
    pthread_cond_t ready, room;
    tq_frame *head, *tail;
    size_t bytes, max_bytes;
    int write_closed, read_closed;
    unsigned refs;
};

gmp_tq *gmp_tq_new(size_t max_bytes)
{
    gmp_tq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->max_bytes = max_bytes ? max_bytes : DEFAULT_MAX;
    q->refs = 1;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->ready, NULL);
    pthread_cond_init(&q->room, NULL);
    return q;
}

void gmp_tq_ref(gmp_tq *q)
{
    pthread_mutex_lock(&q->lock);
    q->refs++;
    pthread_mutex_unlock(&q->lock);
}

static void drop_frames_locked(gmp_tq *q)
{
    for (tq_frame *f = q->head, *n; f; f = n) {
        n = f->next;
        free(f->buf);
        free(f);
    }
    q->head = q->tail = NULL;
    q->bytes = 0;
}

void gmp_tq_unref(gmp_tq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    unsigned left = --q->refs;
    pthread_mutex_unlock(&q->lock);
    if (left)
        return;
    drop_frames_locked(q);
    pthread_cond_destroy(&q->ready);
    pthread_cond_destroy(&q->room);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

int gmp_tq_put(gmp_tq *q, uint8_t *buf, size_t len, size_t cap)
{
    tq_frame *f = malloc(sizeof *f);
    pthread_mutex_lock(&q->lock);
    /* (a frame larger than the bound goes alone into an empty queue) */
    while (!q->read_closed && q->head && q->bytes + len > q->max_bytes)
        pthread_cond_wait(&q->room, &q->lock);
    if (q->read_closed || !f) {
        int rc = q->read_closed ? -1 : -2;
        pthread_mutex_unlock(&q->lock);
        free(f);
        free(buf);
        return rc;
    }
    *f = (tq_frame){NULL, buf, len, cap};
    if (q->tail)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
    q->bytes += len;
    pthread_cond_signal(&q->ready);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

void gmp_tq_close_write(gmp_tq *q)
{
    pthread_mutex_lock(&q->lock);
    q->write_closed = 1;
    pthread_cond_broadcast(&q->ready);
    pthread_mutex_unlock(&q->lock);
}

int gmp_tq_get(gmp_tq *q, uint8_t **buf, size_t *len, size_t *cap)
{
    pthread_mutex_lock(&q->lock);
    while (!q->head && !q->write_closed && !q->read_closed)
        pthread_cond_wait(&q->ready, &q->lock);
    tq_frame *f = q->read_closed ? NULL : q->head;
    if (f) {
        q->head = f->next;
        if (!q->head)
            q->tail = NULL;
        q->bytes -= f->len;
        pthread_cond_signal(&q->room);
    }
    pthread_mutex_unlock(&q->lock);
    if (!f)
        return 0;
    *buf = f->buf;
    *len = f->len;
    *cap = f->cap;
    free(f);
    return 1;
}

void gmp_tq_close_read(gmp_tq *q)
{
    pthread_mutex_lock(&q->lock);
    q->read_closed = 1;
    drop_frames_locked(q);
    pthread_cond_broadcast(&q->room);
    pthread_cond_broadcast(&q->ready);
    pthread_mutex_unlock(&q->lock);
}
