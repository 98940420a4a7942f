/* The inputs -> replay -> outputs path of the commands that replay recordings (see cli_replay.h).
 */
#include "cli_replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_progress.h"

/* the header options of an imported PyTorch snapshot (formats/import/gmp_import_torch.c) */
#define SNAPSHOT_OPTS "import=pytorch-snapshot"

/* Opens trace t's reader over its (open) input, and reads its header. */
static int open_reader(const gmp_cli_replay_spec *spec, gmp_cli_trace *t)
{
    char m[1024];
    if (gmp_cli_input_reader(t->in, &t->reader, NULL, m, sizeof m) != GMP_OK) {
        t->reader = NULL;
        fprintf(stderr, "gpumemprof %s: %s: %s\n", spec->cmd, t->path, m);
        return 1;
    }
    t->header = gmp_reader_header(t->reader);
    t->pid = t->header->pid;
    t->bytes = t->in->trace_bytes;
    return 0;
}

/* What the headers say across the traces: pids made unique, labels, wall-clock offsets. */
static void place(gmp_cli_trace *tr, size_t n)
{
    uint64_t wall0 = UINT64_MAX;
    int walls = 1;
    for (size_t i = 0; i < n; i++) {
        const gmp_rec_header *h = tr[i].header;
        if (!h->start_wall_ns || !h->start_trace_ns)
            walls = 0;
        else if (h->start_wall_ns < wall0)
            wall0 = h->start_wall_ns;
    }
    for (size_t i = 0; i < n; i++) {
        const gmp_rec_header *h = tr[i].header;
        uint32_t pid = h->pid;
        for (int again = 1; again;) {
            again = 0;
            for (size_t j = 0; j < i; j++)
                if (tr[j].pid == pid) {
                    pid += 1000000;
                    again = 1;
                }
        }
        tr[i].pid = pid;
        tr[i].offset_ns = walls ? (int64_t)(h->start_wall_ns - wall0) : 0;
        if (n == 1)
            tr[i].label[0] = '\0';
        else if (!h->pid && !h->hostname.len) /* no process recorded: a PyTorch snapshot */
            snprintf(tr[i].label, sizeof tr[i].label, "%s %zu",
                     h->options.len >= sizeof SNAPSHOT_OPTS - 1 &&
                             !memcmp(h->options.ptr, SNAPSHOT_OPTS, sizeof SNAPSHOT_OPTS - 1)
                         ? "snapshot"
                         : "trace",
                     i + 1);
        else if (h->rank >= 0)
            snprintf(tr[i].label, sizeof tr[i].label, "rank %" PRId64 ", pid %" PRIu32, h->rank,
                     h->pid);
        else
            snprintf(tr[i].label, sizeof tr[i].label, "pid %" PRIu32, h->pid);
    }
}

/* Replays trace t with the outputs attached. 0 when it ran to its end and the command took it. */
static int replay_one(const gmp_cli_replay_spec *spec, gmp_cli_trace *t, gmp_cli_progress *pg)
{
    gmp_err e = gmp_replay_new(&t->replay, t->reader, NULL);
    if (e == GMP_OK && spec->attach)
        e = spec->attach(spec->ctx, t);
    if (e == GMP_OK && pg->enabled) {
        pg->index = t->index;
        pg->r = t->reader;
        e = gmp_replay_add(t->replay, &gmp_cli_progress_ops, pg);
    }
    if (e == GMP_OK)
        e = gmp_replay_run(t->replay);
    gmp_cli_progress_clear(pg);
    if (e != GMP_OK) {
        const char *m = t->replay ? gmp_replay_error(t->replay) : "";
        fprintf(stderr, "gpumemprof %s: %s: %s\n", spec->cmd, t->path,
                m && *m ? m : gmp_err_str(e));
        return 1;
    }
    if (spec->replayed) {
        char m[512] = "";
        e = spec->replayed(spec->ctx, t, m, sizeof m);
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", spec->cmd, t->path,
                    m[0] ? m : gmp_err_str(e));
            return 1;
        }
    }
    const gmp_replay_summary *s = gmp_replay_get_summary(t->replay);
    if (spec->warn_incomplete && !s->complete)
        fprintf(stderr, "gpumemprof %s: warning: %s: %s\n", spec->cmd, t->path, s->completeness);
    return 0;
}

int gmp_cli_replay_all(char **paths, size_t n, const gmp_cli_replay_spec *spec)
{
    int status = 0;
    gmp_cli_input *ins = NULL;
    gmp_cli_trace *tr = calloc(n ? n : 1, sizeof *tr);
    if (!tr) {
        fprintf(stderr, "gpumemprof %s: %s\n", spec->cmd, gmp_err_str(GMP_ERR_NOMEM));
        status = 1;
    } else if (!spec->one_at_a_time) {
        /* every input, then every reader: all that can fail fails before any replay */
        status = gmp_cli_inputs_open_flags(spec->cmd, paths, n, spec->open_flags, &ins);
    } else {
        ins = calloc(n ? n : 1, sizeof *ins);
        if (!ins) {
            fprintf(stderr, "gpumemprof %s: %s\n", spec->cmd, gmp_err_str(GMP_ERR_NOMEM));
            status = 1;
        }
    }
    size_t nopen = status ? 0 : n; /* inputs that need closing */
    for (size_t i = 0; i < n && !status; i++) {
        tr[i].path = paths[i];
        tr[i].index = i;
        tr[i].in = &ins[i];
        if (!spec->one_at_a_time)
            status = open_reader(spec, &tr[i]);
    }
    if (!status && !spec->one_at_a_time)
        place(tr, n);
    if (!status && spec->open_outputs)
        status = spec->open_outputs(spec->ctx, tr, n) != 0;

    gmp_cli_progress pg;
    gmp_cli_progress_start(&pg, spec->cmd, spec->progress && !status, n);
    for (size_t i = 0; i < n && !status; i++)
        pg.total_bytes += tr[i].bytes;
    for (size_t i = 0; i < n && !status; i++) {
        gmp_cli_trace *t = &tr[i];
        if (spec->one_at_a_time) {
            char m[1024];
            if (gmp_cli_input_open_flags(t->in, t->path, spec->open_flags, m, sizeof m) != GMP_OK) {
                fprintf(stderr, "gpumemprof %s: %s: %s\n", spec->cmd, t->path, m);
                status = 1;
                break;
            }
            status = open_reader(spec, t);
        }
        if (!status)
            status = replay_one(spec, t, &pg);
        pg.done_bytes += t->bytes;
        gmp_replay_free(t->replay);
        t->replay = NULL;
        gmp_reader_close(t->reader);
        t->reader = NULL;
        if (!status) { /* a streamed import: the writing's outcome (it has written the end) */
            char m[512];
            if (gmp_cli_input_finish(t->in, m, sizeof m) != GMP_OK) {
                fprintf(stderr, "gpumemprof %s: %s: %s\n", spec->cmd, t->path, m);
                status = 1;
            }
        }
        if (spec->one_at_a_time)
            gmp_cli_input_close(t->in);
    }
    for (size_t i = 0; tr && i < n; i++)
        gmp_reader_close(tr[i].reader);
    if (ins && spec->one_at_a_time)
        free(ins);
    else if (ins)
        gmp_cli_inputs_close(ins, nopen);
    free(tr);
    return spec->finish ? spec->finish(spec->ctx, status) : status;
}
