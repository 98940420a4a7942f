/* gpumemprof whatif: replays a recording's PyTorch tensor allocations through the model of the
 * caching allocator (formats/replay/gmp_cca_model.h, via gmp_whatif.h) under the recording's own
 * settings and under other PYTORCH_CUDA_ALLOC_CONF settings, and says per device what each would
 * have reserved and whether it fits. docs/whatif.md describes the output. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_whatif.h"
#include "gmp_whatif.h"
#include "gmp_whatif_advice.h"

#define MAX_CONFS GMP_CLI_WHATIF_MAX_CONFS

/* --capacity was given (the output says where each capacity comes from) */
static int capacity_given;

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n", cmd->summary);
    printf("Replays the tensor allocations and frees of a PyTorch recording (a memory snapshot,\n"
           "a trace merged with its --torch-history, or a --torch-alloc async trace, whose\n"
           "cudaMallocAsync calls are its tensors) through a model of PyTorch's CUDA caching\n"
           "allocator, once per setting, and prints per device: peak reserved, peak\n"
           "allocated (PyTorch's rounded blocks), segments cudaMalloc'ed, the fragmentation\n"
           "(reserved - allocated) at the reserved peak, whether it fits the device's memory\n"
           "(or --capacity) and the first allocation that would fail; then the setting with the\n"
           "lowest peak reserved that fits and the smallest common card that holds it (when none\n"
           "fits, the same replay without a limit says what the cheapest setting would need).\n\n"
           "The first setting is the recording's own: a snapshot's PYTORCH_CUDA_ALLOC_CONF\n"
           "(allocator_settings; for a trace, the TRACE.torch.pickle's beside it), else\n"
           "PyTorch's defaults, said so. CONF uses PYTORCH_CUDA_ALLOC_CONF's syntax, key:value\n"
           "pairs separated by commas: max_split_size_mb, expandable_segments,\n"
           "garbage_collection_threshold, roundup_power2_divisions (one value for all sizes).\n"
           "Without --alloc-conf: expandable_segments:True, max_split_size_mb:128 and :512,\n"
           "garbage_collection_threshold:0.8, roundup_power2_divisions:4.\n\n"
           "Not modelled yet: frees that wait for other streams (whatif frees at once), CUDA\n"
           "graph pools, empty_cache, or the memory held before the\n"
           "recorded window other than the blocks the import reconstructs (replayed as\n"
           "allocations at the start).\n\n");
    printf("%s\n", GMP_CLI_INPUT_HELP);
    gmp_cli_print_options(stdout, opts);
    printf("      --alloc-conf CONF    a PYTORCH_CUDA_ALLOC_CONF setting to try (repeatable)\n");
    printf("\nExit status: 0 when the table was written, 1 when the recording cannot be read,\n"
           "holds no PyTorch tensor allocation, or the output cannot be written, 2 for bad\n"
           "arguments. See docs/whatif.md.\n");
}

static void gib(FILE *f, uint64_t b)
{
    fprintf(f, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
}

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* The recommendation's card, for the text and Markdown. */
static void card_text(FILE *f, const gmp_whatif_card *card)
{
    if (card) {
        fprintf(f, "smallest card: %s class (%s; ", card->cls, card->cards);
        gib(f, card->usable_bytes);
        fprintf(f, " usable)");
    } else {
        size_t n;
        const gmp_whatif_card *t = gmp_whatif_cards(&n);
        fprintf(f, "no card of the table holds it (%s class: ", t[n - 1].cls);
        gib(f, t[n - 1].usable_bytes);
        fprintf(f, " usable)");
    }
}

static void recommendation_text(FILE *f, const gmp_whatif_device *d, const gmp_whatif_advice *a,
                                const char *const *names)
{
    if (a->best == SIZE_MAX) {
        fprintf(f, "recommendation: none; no modelled setting fits");
        if (d->rows[0].capacity) {
            fprintf(f, " ");
            gib(f, d->rows[0].capacity);
        }
        fprintf(f, " (capacity, not fragmentation)\n\n");
        return;
    }
    if (a->fits_capacity) {
        fprintf(f, "recommendation: %s (peak reserved ", names[a->best]);
        gib(f, a->peak_reserved);
        fprintf(f, "); ");
    } else {
        fprintf(f, "recommendation: none fits ");
        gib(f, d->rows[0].capacity);
        fprintf(f, " (capacity, not fragmentation); without that limit %s reserves at least ",
                names[a->best]);
        gib(f, a->peak_reserved);
        fprintf(f, ": ");
    }
    card_text(f, a->card);
    fprintf(f, "\n\n");
}

static void out_json(FILE *f, const gmp_cli_whatif *x)
{
    const gmp_whatif *w = &x->w;
    const gmp_whatif_recorded *rec = x->rec;
    const char *const *names = x->names;
    fprintf(f,
            "{\n  \"schema\": \"gpumemprof-whatif/1\",\n  \"tensors\": \"%s\",\n  \"devices\": [",
            x->async ? "cudaMallocAsync" : "caching-allocator");
    int nd = 0;
    for (size_t i = 0; i < w->ndevices; i++) {
        const gmp_whatif_device *d = &w->devices[i];
        if (!d->rows)
            continue;
        fprintf(f,
                "%s\n    {\"id\": %" PRId32 ", \"capacity_bytes\": %" PRIu64
                ", \"recorded\": {\"peak_reserved_bytes\": %" PRIu64 ", \"segments\": %" PRIu64
                "}, \"configs\": [",
                nd++ ? "," : "", d->id, d->rows[0].capacity, rec[i].peak_reserved, rec[i].segments);
        for (size_t c = 0; c < w->nconfigs; c++) {
            const gmp_whatif_row *r = &d->rows[c];
            fprintf(f, "%s\n      {\"alloc_conf\": ", c ? "," : "");
            jstr(f, names[c]);
            if (!r->modelled) {
                fprintf(f, ", \"modelled\": false, \"peak_reserved_bytes\": null, "
                           "\"peak_allocated_bytes\": null, \"segments\": null, \"fits\": null, "
                           "\"first_failure\": null}");
                continue;
            }
            fprintf(f,
                    ", \"modelled\": true, \"peak_reserved_bytes\": %" PRIu64
                    ", \"peak_allocated_bytes\": %" PRIu64 ", \"segments\": %" PRIu64
                    ", \"fragmentation_at_peak_bytes\": %" PRIu64 ", \"fits\": %s, "
                    "\"first_failure\": ",
                    r->peak_reserved, r->peak_allocated, r->segments, r->frag_at_peak,
                    !r->capacity && !r->failed ? "null"
                    : r->fits                  ? "true"
                                               : "false");
            if (r->failed)
                fprintf(f,
                        "{\"time_ns\": %" PRIu64 ", \"size_bytes\": %" PRIu64
                        ", \"stack\": %" PRIu32 "}}",
                        r->fail_time_ns, r->fail_size, r->fail_stack);
            else
                fprintf(f, "null}");
        }
        gmp_whatif_advice a;
        gmp_whatif_advise(d, gmp_cli_whatif_open_device(x, i), w->nconfigs, &a);
        fprintf(f, "\n    ], \"recommendation\": ");
        if (a.best == SIZE_MAX) {
            fprintf(f, "null}");
            continue;
        }
        fprintf(f, "{\"alloc_conf\": ");
        jstr(f, names[a.best]);
        fprintf(
            f, ", \"peak_reserved_bytes\": %" PRIu64 ", \"fits_capacity\": %s, \"smallest_card\": ",
            a.peak_reserved, a.fits_capacity ? "true" : "false");
        if (a.card) {
            fprintf(f, "{\"class\": ");
            jstr(f, a.card->cls);
            fprintf(f, ", \"cards\": ");
            jstr(f, a.card->cards);
            fprintf(f, ", \"total_bytes\": %" PRIu64 ", \"usable_bytes\": %" PRIu64 "}}}",
                    a.card->total_bytes, a.card->usable_bytes);
        } else {
            fprintf(f, "null}}");
        }
    }
    fprintf(f, "%s]\n}\n", nd ? "\n  " : "");
}

static void out_text(FILE *f, const gmp_cli_whatif *x, int md)
{
    const gmp_whatif *w = &x->w;
    const gmp_whatif_recorded *rec = x->rec;
    const char *const *names = x->names;
    for (size_t i = 0; i < w->ndevices; i++) {
        const gmp_whatif_device *d = &w->devices[i];
        if (!d->rows)
            continue;
        fprintf(f, "%sdevice %" PRId32 ": %" PRIu64 " tensor allocations, capacity ",
                md ? "## " : "", d->id, d->allocs);
        if (d->rows[0].capacity)
            gib(f, d->rows[0].capacity);
        else
            fprintf(f, "unknown");
        fprintf(f, "%s\n",
                d->rows[0].capacity && !d->total_bytes && !rec[i].oom_capacity ? " (--capacity)"
                : d->rows[0].capacity && !d->total_bytes
                    ? " (reserved + free memory at the recorded OOM)"
                    : "");
        fprintf(f, "%srecorded: peak reserved ", md ? "\n" : "  ");
        gib(f, rec[i].peak_reserved);
        fprintf(f, ", %" PRIu64 " segments cudaMalloc'ed (before the window included)\n\n",
                rec[i].segments);
        if (md)
            fprintf(f, "| setting | peak reserved | peak allocated | segments | fragmentation at "
                       "peak | fits | first failure |\n|---|---|---|---|---|---|---|\n");
        else
            fprintf(f, "  %-36s %13s %14s %9s %13s %5s  %s\n", "setting", "peak reserved",
                    "peak allocated", "segments", "frag at peak", "fits", "first failure");
        for (size_t c = 0; c < w->nconfigs; c++) {
            const gmp_whatif_row *r = &d->rows[c];
            char rs[32], as[32], fs[32], ff[96];
            if (!r->modelled) {
                if (md)
                    fprintf(f, "| %s | not modelled yet | | | | | |\n", names[c]);
                else
                    fprintf(f, "  %-36s not modelled yet\n", names[c]);
                continue;
            }
            snprintf(rs, sizeof rs, "%.2f GiB", r->peak_reserved / 1073741824.0);
            snprintf(as, sizeof as, "%.2f GiB", r->peak_allocated / 1073741824.0);
            snprintf(fs, sizeof fs, "%.2f GiB", r->frag_at_peak / 1073741824.0);
            if (r->failed)
                snprintf(
                    ff, sizeof ff, "%.2f MiB at +%.6f s (stack %" PRIu32 ")",
                    r->fail_size / 1048576.0,
                    (r->fail_time_ns >= x->rec[0].t0_ns ? r->fail_time_ns - x->rec[0].t0_ns : 0) /
                        1e9,
                    r->fail_stack);
            else
                snprintf(ff, sizeof ff, "-");
            if (md)
                fprintf(f, "| %s | %s | %s | %" PRIu64 " | %s | %s | %s |\n", names[c], rs, as,
                        r->segments, fs,
                        !r->capacity && !r->failed ? "?"
                        : r->fits                  ? "yes"
                                                   : "no",
                        ff);
            else
                fprintf(f, "  %-36s %13s %14s %9" PRIu64 " %13s %5s  %s\n", names[c], rs, as,
                        r->segments, fs,
                        !r->capacity && !r->failed ? "?"
                        : r->fits                  ? "yes"
                                                   : "no",
                        ff);
        }
        fprintf(f, "\n%s", md ? "" : "  ");
        gmp_whatif_advice a;
        gmp_whatif_advise(d, gmp_cli_whatif_open_device(x, i), w->nconfigs, &a);
        recommendation_text(f, d, &a, names);
    }
}

int gmp_cmd_whatif(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *confs[MAX_CONFS];
    size_t nconf = 0;
    /* --alloc-conf repeats: taken out of argv before the common parser sees the rest */
    int k = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--")) { /* the rest is positional: kept as it is */
            while (i < argc)
                argv[k++] = argv[i++];
            break;
        }
        if (!strcmp(a, "--alloc-conf")) {
            if (i + 1 >= argc)
                return gmp_cli_usage_error(cmd, "--alloc-conf: expected a value");
            v = argv[++i];
        } else if (!strncmp(a, "--alloc-conf=", 13)) {
            v = a + 13;
        }
        if (v) {
            if (nconf + 1 >= MAX_CONFS)
                return gmp_cli_usage_error(cmd, "--alloc-conf: at most %d", MAX_CONFS - 1);
            confs[nconf++] = v;
            continue;
        }
        argv[k++] = argv[i];
    }
    argc = k;
    const char *format = "text", *out_path = NULL, *capacity_s = NULL;
    int npos = 0;
    const gmp_cli_opt opts[] = {
        {"capacity", 0, GMP_CLI_STRING, &capacity_s, "SIZE",
         "memory available (default: the device's total, else reserved + free at its OOM)", 0},
        {"format", 'f', GMP_CLI_STRING, &format, "FMT", "text, markdown or json (default text)", 0},
        {"output", 'o', GMP_CLI_STRING, &out_path, "FILE", "write to FILE instead of stdout", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    int json = !strcmp(format, "json"), md = !strcmp(format, "markdown");
    if (!json && !md && strcmp(format, "text") != 0)
        return gmp_cli_usage_error(cmd, "--format: '%s' is not text, markdown or json", format);
    uint64_t capacity = 0;
    if (capacity_s && (gmp_cli_parse_size(capacity_s, &capacity) != 0 || capacity == 0))
        return gmp_cli_usage_error(cmd, "--capacity %s: expected a size above 0 (64G, 80000M)",
                                   capacity_s);
    if (npos != 1)
        return gmp_cli_usage_error(cmd, "expected one recording");
    capacity_given = capacity != 0;

    static gmp_cli_whatif x; /* large: not on the stack */
    char msg[1024];
    if (gmp_cli_whatif_setup(&x, argv[1], GMP_CLI_INPUT_UNKNOWN, confs, nconf, msg, sizeof msg) !=
        0)
        return gmp_cli_usage_error(cmd, "%s", msg);

    gmp_cli_input in;
    gmp_err e = gmp_cli_input_open(&in, argv[1], msg, sizeof msg);
    if (e == GMP_OK) {
        e = gmp_cli_whatif_run(&x, &in, capacity, msg, sizeof msg);
        gmp_cli_input_close(&in);
    }
    if (e == GMP_OK && x.w.ndevices == 0) {
        /* nothing to replay: say why rather than print an empty table */
        snprintf(msg, sizeof msg,
                 "no PyTorch tensor allocations to replay; whatif needs a PyTorch snapshot, a "
                 "trace recorded with `run --torch-history` (read with the TRACE.torch.pickle "
                 "beside it) or with `run --torch-alloc async` (a tensor per cudaMallocAsync); "
                 "a CUDA trace's cudaMalloc calls are the allocator's segments, not its tensors");
        e = GMP_ERR_FORMAT;
    }
    if (e != GMP_OK) {
        fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, argv[1], msg);
        gmp_cli_whatif_free(&x);
        return 1;
    }
    FILE *f = stdout;
    if (out_path && strcmp(out_path, "-") != 0 && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "gpumemprof %s: %s: cannot write\n", cmd->name, out_path);
        gmp_cli_whatif_free(&x);
        return 1;
    }
    if (x.async && !json)
        fprintf(f, "the tensors are the trace's stream-ordered allocations (cudaMallocAsync: "
                   "PyTorch's cudaMallocAsync backend), replayed through the native caching "
                   "allocator\n\n");
    if (json)
        out_json(f, &x);
    else
        out_text(f, &x, md);
    gmp_cli_whatif_free(&x);
    int bad = fflush(f) != 0 || ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "gpumemprof %s: cannot write the output\n", cmd->name);
        return 1;
    }
    return 0;
}
