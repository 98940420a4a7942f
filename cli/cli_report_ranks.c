/* cli_report_ranks: see cli_report_ranks.h. */
#include "cli_report_ranks.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_input.h"
#include "cli_report_sym.h"
#include "gmp_render.h"
#include "gmp_replay.h"
#include "gmp_report_ranks.h"
#include "gmp_report_ranks_oom.h"

#define MAX_JOBS 8
#define MAX_SUMMARY_FILE (256u << 20) /* a summary file read whole: far above 1 MiB per rank */

/* One trace's outcome, in the inputs' order. */
typedef struct slot {
    gmp_rank_summary sum;
    int failed;    /* its message is the error */
    char msg[600]; /* an error, or a warning (incomplete trace), "" none */
} slot;

typedef struct pool {
    char **paths;
    size_t n, next;
    slot *slots;
    const gmp_cli_ranks_opts *o;
    pthread_mutex_t mu;
    int stop; /* a trace failed: the others are not started */
} pool;

/* Replays trace i into a one-trace report model, keeps its summary, frees the rest. */
static void one(pool *P, size_t i)
{
    slot *sl = &P->slots[i];
    const char *path = P->paths[i];
    gmp_cli_input in;
    memset(&in, 0, sizeof in);
    char m[512];
    gmp_reader *r = NULL;
    gmp_replay *rp = NULL;
    gmp_report_doc *doc = NULL;
    gmp_err e = gmp_cli_input_open_flags(&in, path, 0, m, sizeof m);
    if (e != GMP_OK) {
        snprintf(sl->msg, sizeof sl->msg, "%s", m);
        sl->failed = 1;
        return;
    }
    e = gmp_cli_input_reader(&in, &r, NULL, m, sizeof m);
    if (e == GMP_OK)
        e = gmp_replay_new(&rp, r, NULL);
    else
        snprintf(sl->msg, sizeof sl->msg, "%s", m);
    if (e == GMP_OK)
        e = gmp_report_doc_new(&doc, &P->o->ropts);
    /* no label: one trace to the model (it keeps no per-change steps, which only a comparison of
     * processes on one time axis needs) */
    if (e == GMP_OK)
        e = gmp_report_doc_add(doc, rp, path, "");
    if (e == GMP_OK)
        e = gmp_replay_run(rp);
    if (e != GMP_OK && !sl->msg[0]) {
        const char *rm = rp ? gmp_replay_error(rp) : "";
        snprintf(sl->msg, sizeof sl->msg, "%s", rm && *rm ? rm : gmp_err_str(e));
    }
    if (e == GMP_OK) {
        const gmp_replay_summary *rs = gmp_replay_get_summary(rp);
        if (!rs->complete)
            snprintf(sl->msg, sizeof sl->msg, "%s", rs->completeness);
        e = gmp_rank_summary_from_trace(doc->traces[0], i, &sl->sum);
        if (e != GMP_OK)
            snprintf(sl->msg, sizeof sl->msg, "%s", gmp_err_str(e));
    }
    gmp_report_doc_free(doc);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    if (e == GMP_OK && gmp_cli_input_finish(&in, m, sizeof m) != GMP_OK) {
        snprintf(sl->msg, sizeof sl->msg, "%s", m);
        e = GMP_ERR_FORMAT;
        gmp_rank_summary_clear(&sl->sum);
    }
    gmp_cli_input_close(&in);
    sl->failed = e != GMP_OK;
}

static void *worker(void *arg)
{
    pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        size_t i = P->next < P->n && !P->stop ? P->next++ : SIZE_MAX;
        pthread_mutex_unlock(&P->mu);
        if (i == SIZE_MAX)
            return NULL;
        one(P, i);
        if (P->slots[i].failed) {
            pthread_mutex_lock(&P->mu);
            P->stop = 1;
            pthread_mutex_unlock(&P->mu);
        }
    }
}

static int jobs_for(const gmp_cli_ranks_opts *o, size_t n)
{
    long c = o->jobs > 0 ? o->jobs : sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1)
        c = 1;
    if (c > MAX_JOBS && o->jobs <= 0)
        c = MAX_JOBS;
    if ((size_t)c > n)
        c = (long)n;
    return (int)c;
}

/* Reads every trace; returns 0 with n summaries in *out (the caller clears them), else 1 after
 * the first failure's message (in the inputs' order). */
static int read_traces(char **paths, size_t n, const gmp_cli_ranks_opts *o, gmp_rank_summary **out)
{
    pool P;
    memset(&P, 0, sizeof P);
    P.paths = paths;
    P.n = n;
    P.o = o;
    P.slots = calloc(n ? n : 1, sizeof *P.slots);
    gmp_rank_summary *sums = calloc(n ? n : 1, sizeof *sums);
    if (!P.slots || !sums || pthread_mutex_init(&P.mu, NULL) != 0) {
        fprintf(stderr, "gpumemprof %s: %s\n", o->cmd, gmp_err_str(GMP_ERR_NOMEM));
        free(P.slots);
        free(sums);
        return 1;
    }
    gmp_cli_report_symbolizer_install(o->debug_dir);
    int nj = jobs_for(o, n);
    pthread_t th[MAX_JOBS * 8];
    int started = 0;
    if (nj > (int)(sizeof th / sizeof th[0]))
        nj = (int)(sizeof th / sizeof th[0]);
    for (int j = 1; j < nj; j++) { /* this thread is the first worker */
        if (pthread_create(&th[started], NULL, worker, &P) != 0)
            break;
        started++;
    }
    worker(&P);
    for (int j = 0; j < started; j++)
        pthread_join(th[j], NULL);
    pthread_mutex_destroy(&P.mu);
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        slot *sl = &P.slots[i];
        if (!status && sl->failed) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", o->cmd, paths[i], sl->msg);
            status = 1;
        } else if (!status && sl->msg[0]) {
            fprintf(stderr, "gpumemprof %s: warning: %s: %s\n", o->cmd, paths[i], sl->msg);
        } else if (!status && i >= P.next) {
            status = 1; /* not read (cannot happen without a failure before it) */
        }
        sums[i] = sl->sum;
    }
    free(P.slots);
    if (status) {
        for (size_t i = 0; i < n; i++)
            gmp_rank_summary_clear(&sums[i]);
        free(sums);
        return 1;
    }
    *out = sums;
    return 0;
}

static int read_summaries(char **paths, size_t n, const gmp_cli_ranks_opts *o,
                          gmp_rank_summary **out, size_t *nout)
{
    gmp_rank_summary *arr = NULL;
    size_t na = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        FILE *f = strcmp(paths[i], "-") == 0 ? stdin : fopen(paths[i], "rb");
        if (!f) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", o->cmd, paths[i], strerror(errno));
            goto fail;
        }
        size_t bc = 1 << 16, bn = 0;
        char *buf = malloc(bc);
        size_t k;
        while (buf && (k = fread(buf + bn, 1, bc - bn, f)) > 0) {
            bn += k;
            if (bn == bc) {
                char *nb = bc < MAX_SUMMARY_FILE ? realloc(buf, bc *= 2) : NULL;
                if (!nb) {
                    free(buf);
                    buf = NULL;
                }
                buf = nb;
            }
        }
        int rerr = f != stdin ? ferror(f) : 0;
        if (f != stdin)
            fclose(f);
        if (!buf || rerr) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", o->cmd, paths[i],
                    !buf ? "too large or out of memory" : "cannot be read");
            free(buf);
            goto fail;
        }
        char err[256] = "";
        gmp_err e = gmp_rank_summary_read_json(buf, bn, &arr, &na, &cap, err, sizeof err);
        free(buf);
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", o->cmd, paths[i],
                    err[0] ? err : gmp_err_str(e));
            goto fail;
        }
    }
    if (!na) {
        fprintf(stderr, "gpumemprof %s: no summary in the files given\n", o->cmd);
        goto fail;
    }
    *out = arr;
    *nout = na;
    return 0;
fail:
    for (size_t i = 0; i < na; i++)
        gmp_rank_summary_clear(&arr[i]);
    free(arr);
    return 1;
}

static void oom_finding(gmp_doc *d, gmp_doc_block *parent, const void *cmp)
{
    gmp_ranks_oom_finding(d, parent, cmp);
}

static void oom_section(gmp_doc *d, gmp_doc_block *parent, const void *cmp)
{
    gmp_ranks_oom_section(d, parent, cmp);
}

int gmp_cli_report_ranks(char **paths, size_t n, const gmp_cli_ranks_opts *o)
{
    /* the output first: a path that cannot be written fails before any work */
    FILE *f = o->out ? o->out : stdout;
    if (!o->out && o->out_path && strcmp(o->out_path, "-") != 0 && !(f = fopen(o->out_path, "w"))) {
        fprintf(stderr, "gpumemprof %s: %s: %s\n", o->cmd, o->out_path, strerror(errno));
        return 1;
    }
    gmp_rank_summary *sums = NULL;
    size_t ns = n;
    int status =
        o->reduce ? read_summaries(paths, n, o, &sums, &ns) : read_traces(paths, n, o, &sums);
    if (status)
        ns = 0; /* nothing to free: the readers freed what they made */
    gmp_err e = GMP_OK;
    if (!status && o->summary_only) {
        e = gmp_rank_summary_write_json(f, sums, ns);
    } else if (!status) {
        /* an OOM across ranks: the traces the summaries name, read again where they are readable
         * (the same with --reduce as from the traces: the summaries alone decide what is read) */
        gmp_ranks_oom *cmp = NULL;
        gmp_ranks_oom_status st = GMP_RANKS_OOM_NONE;
        e = gmp_ranks_oom_from_summaries(sums, ns, &o->ropts, &cmp, &st);
        gmp_ranks_build_oom bo = {cmp, oom_finding, oom_section, NULL};
        if (st == GMP_RANKS_OOM_NO_FAILING_TRACE)
            bo.note = "An OOM across ranks: not compared: the failing rank's trace cannot be "
                      "read here as a gpumemprof trace (the comparison reads the traces again)";
        else if (st == GMP_RANKS_OOM_NO_HEALTHY_TRACE)
            bo.note = "An OOM across ranks: not compared: no healthy rank's trace can be read here "
                      "and put at the same iteration or wall-clock time (the comparison reads the "
                      "traces again)";
        gmp_doc *d = e == GMP_OK ? gmp_ranks_build(sums, ns, &o->view, &bo, o->brief) : NULL;
        gmp_report_ranks_oom_free(cmp);
        int color = o->color;
        if (color < 0) {
            const char *term = getenv("TERM");
            color =
                isatty(fileno(f)) && !getenv("NO_COLOR") && !(term && strcmp(term, "dumb") == 0);
        }
        char title[96];
        snprintf(title, sizeof title, "gpumemprof report: %zu ranks", ns);
        gmp_render_opts ro = {.color = color && strcmp(o->format, "text") == 0, .title = title};
        gmp_render_fn render = gmp_render_by_name(o->format);
        e = !d ? GMP_ERR_NOMEM : render ? render(d, f, &ro) : GMP_ERR_ARG;
        gmp_doc_free(d);
    }
    for (size_t i = 0; i < ns; i++)
        gmp_rank_summary_clear(&sums[i]);
    free(sums);
    if (!status && (e != GMP_OK || fflush(f) != 0 || ferror(f))) {
        fprintf(stderr, "gpumemprof %s: cannot write the output\n", o->cmd);
        status = 1;
    }
    if (f && f != stdout && f != o->out) {
        if (fclose(f) != 0 && !status) {
            fprintf(stderr, "gpumemprof %s: %s: cannot be written\n", o->cmd, o->out_path);
            status = 1;
        }
        if (status)
            unlink(o->out_path);
    }
    return status;
}
