/* gmp_cupti_flush: the CUPTI collector's flush thread (gmp_cupti_impl.h): a thread that wakes
 * every flush interval, or when woken, and runs the collector's work (gmp_cupti.c flush_tick). */
#include "gmp_cupti_impl.h"

#include <signal.h>
#include <time.h>

/* The flush thread.
 * Every flush interval: describes devices seen by callbacks (see gmp_cupti_describe_device),
 * re-measures the CUPTI clock's offset to ours, and asks CUPTI for the activity buffers whose
 * records are complete (cuptiActivityFlushAll(0): cupti_activity.h says the default flush "can be
 * done at a regular interval in a separate thread" and returns buffers that "need not be full"; the
 * forced flag is for the end, "in the at-exit handler", and is used only by gmp_cupti_stop). */

static pthread_t flusher;
static atomic_int flusher_running;
static int flusher_stop, flusher_kick;
static unsigned flusher_ms;
static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_cond;

static void (*flusher_tick)(int kicked, unsigned interval_ms);

void gmp_cupti_flusher_wake(void)
{
    if (!atomic_load(&flusher_running))
        return; /* the flush thread takes it at its next interval, or the stop does */
    pthread_mutex_lock(&flusher_lock);
    flusher_kick = 1;
    pthread_cond_signal(&flusher_cond);
    pthread_mutex_unlock(&flusher_lock);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&flusher_lock);
    while (!flusher_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += flusher_ms / 1000;
        dl.tv_nsec += (long)(flusher_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_nsec -= 1000000000L;
            dl.tv_sec++;
        }
        while (!flusher_stop && !flusher_kick &&
               pthread_cond_timedwait(&flusher_cond, &flusher_lock, &dl) == 0)
            ;
        if (flusher_stop)
            break;
        int kicked = flusher_kick;
        flusher_kick = 0;
        pthread_mutex_unlock(&flusher_lock);
        flusher_tick(kicked, flusher_ms);
        pthread_mutex_lock(&flusher_lock);
    }
    pthread_mutex_unlock(&flusher_lock);
    return NULL;
}

void gmp_cupti_flusher_start(unsigned ms, void (*tick)(int kicked, unsigned interval_ms))
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&flusher_cond, &ca);
    pthread_condattr_destroy(&ca);
    flusher_ms = ms;
    flusher_tick = tick;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&flusher, NULL, flusher_main, NULL) == 0)
        atomic_store(&flusher_running, 1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void gmp_cupti_flusher_join(void)
{
    if (!flusher_running)
        return;
    pthread_mutex_lock(&flusher_lock);
    flusher_stop = 1;
    pthread_cond_signal(&flusher_cond);
    pthread_mutex_unlock(&flusher_lock);
    pthread_join(flusher, NULL);
    atomic_store(&flusher_running, 0);
}
