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
#include "gmp_whatif.h"

#define MAX_CONFS 32

/* --capacity was given (the output says where each capacity comes from) */
static int capacity_given;

/* The standard set tried when no --alloc-conf is given. */
static const char *const standard_set[] = {
    "expandable_segments:True",         "max_split_size_mb:128",      "max_split_size_mb:512",
    "garbage_collection_threshold:0.8", "roundup_power2_divisions:4",
};

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n", cmd->summary);
    printf("Replays the tensor allocations and frees of a PyTorch recording (a memory snapshot,\n"
           "or a trace merged with its --torch-history) through a model of PyTorch's CUDA\n"
           "caching allocator, once per setting, and prints per device: peak reserved, peak\n"
           "allocated (PyTorch's rounded blocks), segments cudaMalloc'ed, the fragmentation\n"
           "(reserved - allocated) at the reserved peak, whether it fits the device's memory\n"
           "(or --capacity) and the first allocation that would fail; then the setting with the\n"
           "lowest peak reserved that fits.\n\n"
           "The first setting is the recording's own: a snapshot's PYTORCH_CUDA_ALLOC_CONF\n"
           "(allocator_settings), else PyTorch's defaults, said so. CONF uses "
           "PYTORCH_CUDA_ALLOC_CONF's syntax, key:value\n"
           "pairs separated by commas: max_split_size_mb, expandable_segments,\n"
           "garbage_collection_threshold, roundup_power2_divisions (one value for all sizes).\n"
           "Without --alloc-conf: expandable_segments:True, max_split_size_mb:128 and :512,\n"
           "garbage_collection_threshold:0.8, roundup_power2_divisions:4.\n\n"
           "Not modelled yet (a setting that needs them gets a row saying so, not figures):\n"
           "expandable segments; nor are frees that wait for other streams (whatif frees at\n"
           "once), CUDA graph pools, empty_cache, or the memory held before the\n"
           "recorded window other than the blocks the import reconstructs (replayed as\n"
           "allocations at the start).\n\n");
    printf("%s\n", GMP_CLI_INPUT_HELP);
    gmp_cli_print_options(stdout, opts);
    printf("      --alloc-conf CONF    a PYTORCH_CUDA_ALLOC_CONF setting to try (repeatable)\n");
    printf("\nExit status: 0 when the table was written, 1 when the recording cannot be read or\n"
           "the output cannot be written, 2 for bad arguments. See docs/whatif.md.\n");
}

static int parse_bool(const char *v, uint32_t *out)
{
    if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* CONF into cfg (zeroed first); on error one line in err. */
static int parse_conf(const char *conf, gmp_cca_config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    char buf[512];
    if (strlen(conf) >= sizeof buf) {
        snprintf(err, errlen, "too long");
        return -1;
    }
    strcpy(buf, conf);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(kv, ':');
        if (!colon || colon == kv || !colon[1]) {
            snprintf(err, errlen, "'%s': expected key:value", kv);
            return -1;
        }
        *colon = 0;
        const char *k = kv, *v = colon + 1;
        char *end = NULL;
        if (!strcmp(k, "max_split_size_mb")) {
            unsigned long long mb = strtoull(v, &end, 10);
            /* CUDAAllocatorConfig: max_split_size_mb must exceed kLargeBuffer (20 MiB) */
            if (*end || v[0] == '-' || mb <= 20 || mb > (1ull << 40)) {
                snprintf(err, errlen, "max_split_size_mb:%s: expected a number of MiB above 20", v);
                return -1;
            }
            cfg->max_split_size = (uint64_t)mb << 20;
        } else if (!strcmp(k, "expandable_segments")) {
            if (parse_bool(v, &cfg->expandable_segments) != 0) {
                snprintf(err, errlen, "expandable_segments:%s: expected True or False", v);
                return -1;
            }
        } else if (!strcmp(k, "garbage_collection_threshold")) {
            double t = strtod(v, &end);
            if (*end || !(t > 0.0 && t < 1.0)) {
                snprintf(err, errlen,
                         "garbage_collection_threshold:%s: expected a number between 0 and 1", v);
                return -1;
            }
            cfg->garbage_collection_threshold = t;
        } else if (!strcmp(k, "roundup_power2_divisions")) {
            unsigned long long n = strtoull(v, &end, 10);
            /* CUDAAllocatorConfig: a power of two */
            if (*end || v[0] == '-' || n == 0 || n > 64 || (n & (n - 1))) {
                snprintf(err, errlen, "roundup_power2_divisions:%s: expected a power of 2 (1-64)",
                         v);
                return -1;
            }
            cfg->roundup_power2_divisions = (uint32_t)n;
        } else {
            snprintf(err, errlen,
                     "'%s': unknown key (max_split_size_mb, expandable_segments, "
                     "garbage_collection_threshold, roundup_power2_divisions)",
                     k);
            return -1;
        }
    }
    return 0;
}

int gmp_cli_whatif_conf(const char *conf, gmp_cca_config *cfg, char *err, size_t errlen)
{
    return parse_conf(conf, cfg, err, errlen);
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

static void out_json(FILE *f, const gmp_whatif *w, const gmp_whatif_recorded *rec,
                     const char *const *names)
{
    fprintf(f, "{\n  \"schema\": \"gpumemprof-whatif/1\",\n  \"devices\": [");
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
        fprintf(f, "\n    ]}");
    }
    fprintf(f, "%s]\n}\n", nd ? "\n  " : "");
}

static void out_text(FILE *f, const gmp_whatif *w, const gmp_whatif_recorded *rec,
                     const char *const *names, int md)
{
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
        size_t best = SIZE_MAX;
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
                snprintf(ff, sizeof ff, "%.2f MiB at +%.6f s (stack %" PRIu32 ")",
                         r->fail_size / 1048576.0, r->fail_time_ns / 1e9, r->fail_stack);
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
            if (r->fits && (best == SIZE_MAX || r->peak_reserved < d->rows[best].peak_reserved))
                best = c;
        }
        fprintf(f, "\n%s", md ? "" : "  ");
        if (best == SIZE_MAX)
            fprintf(f, "recommendation: none; no modelled setting fits (capacity, not "
                       "fragmentation)\n\n");
        else {
            fprintf(f, "recommendation: %s (peak reserved ", names[best]);
            gib(f, d->rows[best].peak_reserved);
            fprintf(f, ")\n\n");
        }
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

    const char *names[MAX_CONFS];
    gmp_cca_config cfgs[MAX_CONFS];
    memset(cfgs, 0, sizeof cfgs);
    names[0] = "defaults (PyTorch's)";
    size_t ncfg = 1;
    /* the recording's own settings (a snapshot's PYTORCH_CUDA_ALLOC_CONF, which the import
     * reads) go to cfgs[0] once the input is open; one the model cannot take (a key it does not
     * know, a per-size roundup list) is a row that says not modelled */
    static char own_name[600];
    int own_refused = 0;
    if (nconf == 0)
        for (size_t i = 0; i < sizeof standard_set / sizeof *standard_set; i++)
            confs[nconf++] = standard_set[i];
    for (size_t i = 0; i < nconf; i++) {
        char err[256];
        if (parse_conf(confs[i], &cfgs[ncfg], err, sizeof err) != 0)
            return gmp_cli_usage_error(cmd, "--alloc-conf %s: %s", confs[i], err);
        names[ncfg++] = confs[i];
    }

    gmp_cli_input in;
    gmp_reader *r = NULL;
    char msg[1024];
    gmp_reader_opts ro;
    memset(&ro, 0, sizeof ro);
    gmp_err e = gmp_cli_input_open(&in, argv[1], msg, sizeof msg);
    if (e == GMP_OK) {
        e = gmp_cli_input_reader(&in, &r, &ro, msg, sizeof msg);
        if (e != GMP_OK)
            gmp_cli_input_close(&in);
    }
    if (e != GMP_OK) {
        fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, argv[1], msg);
        return 1;
    }
    if (in.kind == GMP_CLI_INPUT_TORCH && in.torch_conf_known) {
        char err[256];
        if (in.torch_alloc_conf[0]) {
            snprintf(own_name, sizeof own_name, "recorded (%s)", in.torch_alloc_conf);
            own_refused = parse_conf(in.torch_alloc_conf, &cfgs[0], err, sizeof err) != 0;
        } else {
            snprintf(own_name, sizeof own_name, "recorded (defaults)");
        }
        names[0] = own_name;
    }
    gmp_whatif w;
    gmp_whatif_recorded *rec = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *rec);
    if (!rec) {
        e = GMP_ERR_NOMEM;
        snprintf(msg, sizeof msg, "out of memory");
    } else {
        e = gmp_whatif_scan(r, rec, msg, sizeof msg);
    }
    gmp_reader_close(r);
    r = NULL;
    if (e == GMP_OK)
        e = gmp_cli_input_reader(&in, &r, &ro, msg, sizeof msg);
    if (e == GMP_OK)
        e = gmp_whatif_run(r, cfgs, ncfg, capacity, rec, &w, msg, sizeof msg);
    gmp_reader_close(r);
    gmp_cli_input_close(&in);
    if (e != GMP_OK) {
        fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, argv[1], msg);
        free(rec);
        return 1;
    }
    for (size_t i = 0; own_refused && i < w.ndevices; i++)
        if (w.devices[i].rows)
            w.devices[i].rows[0].modelled = 0;
    FILE *f = stdout;
    if (out_path && strcmp(out_path, "-") != 0 && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "gpumemprof %s: %s: cannot write\n", cmd->name, out_path);
        gmp_whatif_free(&w);
        free(rec);
        return 1;
    }
    if (!json && w.ndevices == 0)
        fprintf(f, "no PyTorch caching-allocator tensors in %s\n", argv[1]);
    if (json)
        out_json(f, &w, rec, names);
    else
        out_text(f, &w, rec, names, md);
    gmp_whatif_free(&w);
    free(rec);
    int bad = fflush(f) != 0 || ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "gpumemprof %s: cannot write the output\n", cmd->name);
        return 1;
    }
    return 0;
}
