/* cli_whatif: the what-if passes over an open recording (cli_whatif.h). */
#include "cli_whatif.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_pickle_stream.h"
#include "gmp_report_whatif.h"

/* A snapshot's streamed segments and trace entries are released at once: only the root's small
 * dicts (allocator_settings) are needed here. */
static int drop_item(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err,
                     size_t errlen)
{
    (void)kind;
    (void)index;
    (void)err;
    (void)errlen;
    if (item && item->v.o &&
        (item->type == GMP_PK_LIST || item->type == GMP_PK_DICT || item->type == GMP_PK_TUPLE))
        gmp_pkstream_husk(*(gmp_pkstream **)ctx, item->v.o);
    return 0;
}

/* The PYTORCH_CUDA_ALLOC_CONF a snapshot recorded (allocator_settings, written by
 * torch.cuda.memory._snapshot since PyTorch 2.x) into buf; -1 when the file has none. */
static int snapshot_conf(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    gmp_pkstream *ps = NULL;
    /* the callback's context: where the reader is (gmp_pkstream_husk needs it) */
    gmp_pkstream_cb cb = {"segments", "device_traces", drop_item, &ps};
    ps = gmp_pkstream_new(NULL, &cb);
    char err[256];
    if (ps && gmp_pkstream_run_fd(ps, fd, err, sizeof err) == GMP_OK) {
        const gmp_pkv *v =
            gmp_pkv_dict_get(gmp_pkv_dict_get(gmp_pkstream_root(ps), "allocator_settings"),
                             "PYTORCH_CUDA_ALLOC_CONF");
        size_t len = 0;
        const char *c = gmp_pkv_str(v, &len);
        if (c && len < n) {
            memcpy(buf, c, len);
            buf[len] = 0;
            rc = 0;
        }
    }
    gmp_pkstream_free(ps);
    close(fd);
    return rc;
}

int gmp_cli_whatif_setup(gmp_cli_whatif *x, const char *path, gmp_cli_input_kind kind,
                         const char *const *confs, size_t nconf, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    snprintf(x->own_name, sizeof x->own_name, "defaults (PyTorch's)");
    x->names[0] = x->own_name;
    x->nconfigs = 1;
    snprintf(x->path, sizeof x->path, "%s", path);
    x->kind = kind;
    if (nconf == 0) {
        confs = gmp_whatif_standard;
        nconf = GMP_WHATIF_NSTANDARD;
    }
    for (size_t i = 0; i < nconf; i++) {
        if (x->nconfigs >= GMP_CLI_WHATIF_MAX_CONFS) {
            snprintf(err, errlen, "at most %d settings", GMP_CLI_WHATIF_MAX_CONFS - 1);
            return -1;
        }
        char e[256];
        if (gmp_whatif_parse_conf(confs[i], &x->cfgs[x->nconfigs], e, sizeof e) != 0) {
            snprintf(err, errlen, "--alloc-conf %s: %s", confs[i], e);
            return -1;
        }
        x->names[x->nconfigs++] = confs[i];
    }
    return 0;
}

/* The recording's own settings into x's first config: the PYTORCH_CUDA_ALLOC_CONF an imported
 * snapshot's header keeps (alloc_conf=, from its allocator_settings), else that of the snapshot
 * `run --torch-history` wrote beside a trace (cli_input.h: TRACE.torch.pickle, else
 * TRACE.oom.torch.pickle). One the model cannot take (a key it does not know, a per-size roundup
 * list) is a row that says not modelled. */
static void own_settings(gmp_cli_whatif *x, const gmp_rec_header *h)
{
    static const char key[] = " alloc_conf=";
    char conf[512];
    int have = -1;
    const char *o = h ? h->options.ptr : NULL;
    size_t on = h ? h->options.len : 0;
    for (size_t i = 0; o && i + sizeof key - 1 <= on; i++) {
        if (memcmp(o + i, key, sizeof key - 1) != 0)
            continue;
        size_t from = i + sizeof key - 1, to = from;
        while (to < on && o[to] != ' ')
            to++;
        if (to - from < sizeof conf) {
            memcpy(conf, o + from, to - from);
            conf[to - from] = 0;
            have = 0;
        }
        break;
    }
    if (have != 0 && x->kind == GMP_CLI_INPUT_TRACE) {
        static const char *const sides[] = {".torch.pickle", ".oom.torch.pickle"};
        for (size_t i = 0; i < 2 && have != 0; i++) {
            char side[4200];
            if ((size_t)snprintf(side, sizeof side, "%s%s", x->path, sides[i]) < sizeof side &&
                access(side, R_OK) == 0)
                have = snapshot_conf(side, conf, sizeof conf);
        }
    }
    /* the value is the recording's (untrusted): one with another character than PyTorch's
     * syntax uses is not shown nor replayed (text outputs print the name as it is) */
    for (size_t i = 0; have == 0 && conf[i]; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.,-[]>",
                    conf[i]))
            have = -1;
    if (have != 0)
        return;
    char e[256];
    if (conf[0]) {
        snprintf(x->own_name, sizeof x->own_name, "recorded (%s)", conf);
        x->own_refused = gmp_whatif_parse_conf(conf, &x->cfgs[0], e, sizeof e) != 0;
    } else {
        snprintf(x->own_name, sizeof x->own_name, "recorded (defaults)");
    }
}

gmp_err gmp_cli_whatif_run(gmp_cli_whatif *x, const gmp_cli_input *in, uint64_t capacity, char *msg,
                           size_t msglen)
{
    gmp_reader *r = NULL;
    gmp_reader_opts ro;
    memset(&ro, 0, sizeof ro);
    x->kind = in->kind; /* what it was opened as (by content) */
    x->rec = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *x->rec);
    if (!x->rec) {
        snprintf(msg, msglen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    gmp_err e = gmp_cli_input_reader(in, &r, &ro, msg, msglen);
    if (e == GMP_OK) {
        own_settings(x, gmp_reader_header(r));
        e = gmp_whatif_scan(r, x->rec, msg, msglen);
    }
    gmp_reader_close(r);
    r = NULL;
    if (e == GMP_OK)
        e = gmp_cli_input_reader(in, &r, &ro, msg, msglen);
    if (e == GMP_OK)
        e = gmp_whatif_run(r, x->cfgs, x->nconfigs, capacity, x->rec, &x->w, msg, msglen);
    gmp_reader_close(r);
    r = NULL;
    if (e != GMP_OK)
        return e;
    for (size_t i = 0; i < GMP_WHATIF_MAX_DEVICES; i++)
        x->async |= !x->rec[i].cca_allocs && x->rec[i].async_allocs;
    for (size_t i = 0; x->own_refused && i < x->w.ndevices; i++)
        if (x->w.devices[i].rows)
            x->w.devices[i].rows[0].modelled = 0;
    /* a device that fits under no setting: the same replay without a capacity says what it
     * would take */
    int need = 0;
    for (size_t i = 0; i < x->w.ndevices; i++) {
        gmp_whatif_advice a;
        const gmp_whatif_device *d = &x->w.devices[i];
        if (!d->rows || !d->rows[0].capacity)
            continue;
        gmp_whatif_advise(d, NULL, x->nconfigs, &a);
        need |= a.best == SIZE_MAX;
    }
    if (!need)
        return GMP_OK;
    e = gmp_cli_input_reader(in, &r, &ro, msg, msglen);
    if (e == GMP_OK)
        e = gmp_whatif_run(r, x->cfgs, x->nconfigs, GMP_WHATIF_UNLIMITED, x->rec, &x->open, msg,
                           msglen);
    gmp_reader_close(r);
    if (e != GMP_OK)
        return e;
    x->has_open = 1;
    for (size_t i = 0; x->own_refused && i < x->open.ndevices; i++)
        if (x->open.devices[i].rows)
            x->open.devices[i].rows[0].modelled = 0;
    return GMP_OK;
}

const gmp_whatif_device *gmp_cli_whatif_open_device(const gmp_cli_whatif *x, size_t i)
{
    return x->has_open && i < x->open.ndevices && x->open.devices[i].rows ? &x->open.devices[i]
                                                                          : NULL;
}

void gmp_cli_whatif_free(gmp_cli_whatif *x)
{
    gmp_whatif_free(&x->w);
    if (x->has_open)
        gmp_whatif_free(&x->open);
    free(x->rec);
    x->rec = NULL;
}

void gmp_cli_whatif_report(gmp_report_trace *rt, const gmp_cli_trace *t)
{
    if (!rt->analysis || !rt->analysis->nooms)
        return;
    /* only a recording known to hold PyTorch's tensors (a snapshot, a --torch-history merge):
     * a trace's stream-ordered allocations may be any program's (the report cannot tell
     * PyTorch's cudaMallocAsync backend from a CUDA program's pools); `whatif` replays them when
     * asked */
    if (!rt->torch_figures)
        return;
    const gmp_cli_input *in = t->in;
    struct stat sb;
    int pipe = in->kind == GMP_CLI_INPUT_TRACE && !in->trace_path[0] &&
               (stat(t->path, &sb) != 0 || !S_ISREG(sb.st_mode));
    gmp_report_whatif *x = gmp_report_whatif_new();
    if (!x)
        return;
    rt->whatif = x;
    gmp_cli_input fresh;
    int own = 0;
    char msg[1024];
    if (pipe) {
        snprintf(x->why_not, sizeof x->why_not,
                 "not run: the trace was read from a pipe, which cannot be read again (run "
                 "gpumemprof whatif on a file)");
        return;
    }
    if (in->queue) { /* a streamed import is read once: import the recording again */
        if (gmp_cli_input_open(&fresh, t->path, msg, sizeof msg) != GMP_OK) {
            snprintf(x->why_not, sizeof x->why_not, "not run: %.200s", msg);
            return;
        }
        in = &fresh;
        own = 1;
    }
    gmp_cli_whatif *cw = malloc(sizeof *cw);
    gmp_err e = GMP_ERR_NOMEM;
    snprintf(msg, sizeof msg, "out of memory");
    if (cw && gmp_cli_whatif_setup(cw, t->path, in->kind, NULL, 0, msg, sizeof msg) == 0)
        e = gmp_cli_whatif_run(cw, in, 0, msg, sizeof msg);
    if (e == GMP_OK && gmp_report_whatif_set_names(x, cw->names, cw->nconfigs) != 0) {
        e = GMP_ERR_NOMEM;
        snprintf(msg, sizeof msg, "out of memory");
    }
    if (e != GMP_OK) {
        snprintf(x->why_not, sizeof x->why_not, "not run: %.200s", msg);
    } else {
        /* the results move to the report's trace */
        x->w = cw->w;
        x->open = cw->open;
        x->has_open = cw->has_open;
        x->async = cw->async;
        memset(&cw->w, 0, sizeof cw->w);
        cw->has_open = 0;
    }
    if (cw)
        gmp_cli_whatif_free(cw);
    free(cw);
    if (own)
        gmp_cli_input_close(&fresh);
}
