#include "cli_progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void gmp_cli_progress_start(gmp_cli_progress *p, const char *cmd, int wanted, size_t count)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->enabled = wanted && isatty(2);
    p->t0 = now_s();
    p->count = count;
}

static void draw(gmp_cli_progress *p)
{
    const gmp_reader_stats *st = gmp_reader_get_stats(p->r);
    uint64_t done = p->done_bytes + st->bytes_read;
    double frac = p->total_bytes ? (double)done / (double)p->total_bytes : 0.0;
    if (frac > 1.0)
        frac = 1.0;
    char bar[31];
    int fill = (int)(frac * 30.0);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[30] = '\0';
    fprintf(stderr, "\rgpumemprof %s: [%s] %3d%%  trace %zu/%zu  %" PRIu64 " events ", p->cmd, bar,
            (int)(frac * 100.0), p->index + 1, p->count, st->events);
    p->shown = 1;
}

static gmp_err tick(gmp_cli_progress *p)
{
    if ((++p->calls & 0x3fff) != 0)
        return GMP_OK;
    double t = now_s();
    if (t - p->t0 >= 1.0 && t - p->last_draw >= 0.1) { /* after a second, ten times a second */
        p->last_draw = t;
        draw(p);
    }
    return GMP_OK;
}

static gmp_err on_mem(void *c, gmp_replay *rp, const gmp_replay_mem *ev)
{
    (void)rp;
    (void)ev;
    return tick(c);
}

static gmp_err on_range(void *c, gmp_replay *rp, const gmp_replay_range *ev)
{
    (void)rp;
    (void)ev;
    return tick(c);
}

static gmp_err on_event(void *c, gmp_replay *rp, const gmp_rec *rec)
{
    (void)rp;
    (void)rec;
    return tick(c);
}

const gmp_replay_ops gmp_cli_progress_ops = {
    .alloc = on_mem,
    .free = on_mem,
    .range = on_range,
    .event = on_event,
};

void gmp_cli_progress_clear(gmp_cli_progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%80s\r", "");
    p->shown = 0;
}
