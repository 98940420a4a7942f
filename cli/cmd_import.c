/* gpumemprof import: converts another tool's memory recording into a gpumemprof trace.
 *
 * The input's format is recognised by its first bytes: each importer in the table below has a
 * probe over the head of the file and a function that writes the trace. Adding a format is one
 * line in that table (and the importer in formats/). The trace is written to a temporary file next
 * to the output and renamed when complete, so a failed import never leaves a partial trace. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_opts.h"
#include "gmp_import_nsys.h"
#include "gmp_import_torch.h"

/* One importer: the head of the input (at most HEAD_BYTES, fewer for a short file) decides. run
 * writes the trace to out_fd (owning it) and, on failure, one line into msg; on success it may
 * print one summary line into msg (shown unless --quiet). */
typedef struct importer {
    const char *name; /* shown in messages and --help */
    const char *what; /* the input format, for --help */
    int (*probe)(const unsigned char *head, size_t n);
    gmp_err (*run)(const char *in, int out_fd, char *msg, size_t msglen);
} importer;

#define HEAD_BYTES 64

static int probe_nsys(const unsigned char *head, size_t n)
{
    return gmp_import_nsys_probe(head, n);
}

static gmp_err run_nsys(const char *in, int out_fd, char *msg, size_t msglen)
{
    gmp_import_nsys_stats st;
    gmp_err e = gmp_import_nsys(in, out_fd, &st, msg, msglen);
    if (e == GMP_OK)
        snprintf(msg, msglen,
                 "%" PRIu64 " memory records (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
                 " with their API call), %" PRIu64 " NVTX ranges, %" PRIu64 " threads, %" PRIu64
                 " devices%s",
                 st.memory_records, st.allocs, st.frees, st.with_api,
                 st.range_pushes + st.range_starts, st.threads, st.devices,
                 st.skipped ? "; some rows skipped (unknown operation or negative values)" : "");
    return e;
}

/* The importers, tried in this order. */
static const importer importers[] = {
    {"nsys", "Nsight Systems SQLite export (nsys export --type sqlite)", probe_nsys, run_nsys},
    {"pytorch", "PyTorch memory snapshot (torch.cuda.memory._dump_snapshot)",
     gmp_import_torch_probe, gmp_import_torch_run},
};

#define NIMPORTERS (sizeof importers / sizeof importers[0])

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\nFormats (recognised by their first bytes):\n", cmd->summary);
    for (size_t i = 0; i < NIMPORTERS; i++)
        printf("  %-8s %s\n", importers[i].name, importers[i].what);
    printf("\n");
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 when the trace was written, 1 when the input cannot be imported\n"
           "(nothing is left at OUTPUT then), 2 for bad arguments.\n");
}

int gmp_cmd_import(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *out = NULL;
    int force = 0, quiet = 0, npos = 0;
    const gmp_cli_opt opts[] = {
        {"output", 'o', GMP_CLI_STRING, &out, "TRACE", "the trace to write (required)", 0},
        {"force", 'f', GMP_CLI_FLAG, &force, NULL, "overwrite TRACE when it exists", 0},
        {"quiet", 'q', GMP_CLI_FLAG, &quiet, NULL, "no summary line on stderr", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse(cmd, opts, argc, argv, &npos);
    if (rc == GMP_CLI_PARSE_HELP) {
        print_help(cmd, opts);
        return 0;
    }
    if (rc != GMP_CLI_PARSE_OK)
        return 2;
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing INPUT");
    if (npos > 1)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument (one INPUT only)", argv[2]);
    if (!out || !*out)
        return gmp_cli_usage_error(cmd, "missing -o TRACE");
    const char *in = argv[1];

    int fd = open(in, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gpumemprof import: %s: %s\n", in, strerror(errno));
        return 1;
    }
    unsigned char head[HEAD_BYTES];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n < 0) {
        fprintf(stderr, "gpumemprof import: %s: %s\n", in, strerror(errno));
        return 1;
    }
    const importer *imp = NULL;
    for (size_t i = 0; i < NIMPORTERS && !imp; i++)
        if (importers[i].probe(head, (size_t)n))
            imp = &importers[i];
    if (!imp) {
        fprintf(stderr, "gpumemprof import: %s: not a format gpumemprof can import (", in);
        for (size_t i = 0; i < NIMPORTERS; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", importers[i].what);
        fprintf(stderr, ")\n");
        return 1;
    }
    struct stat sb;
    if (!force && stat(out, &sb) == 0) {
        fprintf(stderr, "gpumemprof import: %s exists (use --force to overwrite it)\n", out);
        return 1;
    }
    size_t tl = strlen(out) + 16;
    char *tmp = malloc(tl);
    if (!tmp) {
        fprintf(stderr, "gpumemprof import: out of memory\n");
        return 1;
    }
    snprintf(tmp, tl, "%s.tmpXXXXXX", out);
    int ofd = mkstemp(tmp);
    if (ofd < 0) {
        fprintf(stderr, "gpumemprof import: %s: %s\n", out, strerror(errno));
        free(tmp);
        return 1;
    }
    (void)fchmod(ofd, 0644);
    char msg[512] = "";
    gmp_err e = imp->run(in, ofd, msg, sizeof msg);
    if (e != GMP_OK) {
        unlink(tmp);
        free(tmp);
        fprintf(stderr, "gpumemprof import: %s: %s\n", in, msg[0] ? msg : gmp_err_str(e));
        return 1;
    }
    if (rename(tmp, out) != 0) {
        fprintf(stderr, "gpumemprof import: %s: %s\n", out, strerror(errno));
        unlink(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    if (!quiet)
        fprintf(stderr, "gpumemprof import: %s (%s) -> %s: %s\n", in, imp->name, out, msg);
    return 0;
}
