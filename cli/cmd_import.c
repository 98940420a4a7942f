/* gpumemprof import: converts another tool's memory recording into a gpumemprof trace.
 *
 * The input's format is recognised by its first bytes, by the same probes and importers every
 * command uses to read a recording directly (cli/cli_input.h: adding a format is one line in its
 * table, and the importer in formats/). Commands read snapshots and exports as they are; import
 * keeps a converted copy. The trace is written to a temporary file next to the output and renamed
 * when complete, so a failed import never leaves a partial trace. An output that exists and is not
 * a regular file (a device such as /dev/null, a FIFO, a symbolic link) is written where it is,
 * never replaced. */
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
#include "cli_input.h"

/* The kinds that can be imported, in the order --help lists them. */
static const gmp_cli_input_kind importable[] = {GMP_CLI_INPUT_NSYS, GMP_CLI_INPUT_TORCH};
#define NIMPORTABLE (sizeof importable / sizeof importable[0])

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\nFormats (recognised by their first bytes):\n", cmd->summary);
    for (size_t i = 0; i < NIMPORTABLE; i++)
        printf("  %-8s %s\n", gmp_cli_input_kind_id(importable[i]),
               gmp_cli_input_kind_what(importable[i]));
    printf("\nreport, convert, diff, dump and info read these formats directly; import keeps a\n"
           "converted copy (faster to read again, and the trace's own format).\n\n");
    gmp_cli_print_options(stdout, opts);
    printf("\nTRACE is written under a temporary name and renamed when complete; an existing\n"
           "TRACE that is not a regular file (a FIFO, a device, a symbolic link) is written\n"
           "where it is instead, never replaced.\n");
    printf("\nExit status: 0 when the trace was written, 1 when the input cannot be imported\n"
           "(nothing is left at TRACE then, except through a symbolic link: its target may\n"
           "hold part of a trace), 2 for bad arguments.\n");
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
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
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
    unsigned char head[GMP_CLI_INPUT_HEAD];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n < 0) {
        fprintf(stderr, "gpumemprof import: %s: %s\n", in, strerror(errno));
        return 1;
    }
    gmp_cli_input_kind kind = gmp_cli_input_probe(head, (size_t)n);
    if (kind == GMP_CLI_INPUT_UNKNOWN) {
        char msg[256];
        gmp_cli_input_unknown_msg(head, (size_t)n, msg, sizeof msg);
        fprintf(stderr, "gpumemprof import: %s: %s\n", in, msg);
        return 1;
    }
    if (kind == GMP_CLI_INPUT_TRACE) {
        fprintf(stderr,
                "gpumemprof import: %s: already a gpumemprof trace (nothing to import: copy it)\n",
                in);
        return 1;
    }
    struct stat sb;
    if (!force && stat(out, &sb) == 0) {
        fprintf(stderr, "gpumemprof import: %s exists (use --force to overwrite it)\n", out);
        return 1;
    }
    struct stat lb;
    if (lstat(out, &lb) == 0 && !S_ISREG(lb.st_mode)) {
        /* Written where it is: renaming over it would replace a device, a FIFO or a link (and
         * its target keeps the name). A regular file behind a link is truncated first. */
        struct stat tb;
        int reg = stat(out, &tb) == 0 && S_ISREG(tb.st_mode);
        int dfd = open(out, O_WRONLY | O_CLOEXEC | (reg ? O_TRUNC : 0));
        if (dfd < 0) {
            fprintf(stderr, "gpumemprof import: %s: %s\n", out, strerror(errno));
            return 1;
        }
        char dmsg[512] = "";
        gmp_err de = gmp_cli_input_import(kind, in, dfd, dmsg, sizeof dmsg);
        if (de != GMP_OK) {
            fprintf(stderr, "gpumemprof import: %s: %s%s\n", in, dmsg[0] ? dmsg : gmp_err_str(de),
                    reg ? " (the output may hold part of a trace)" : "");
            return 1;
        }
        if (!quiet)
            fprintf(stderr, "gpumemprof import: %s (%s) -> %s: %s\n", in,
                    gmp_cli_input_kind_id(kind), out, dmsg);
        return 0;
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
    gmp_err e = gmp_cli_input_import(kind, in, ofd, msg, sizeof msg);
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
        fprintf(stderr, "gpumemprof import: %s (%s) -> %s: %s\n", in, gmp_cli_input_kind_id(kind),
                out, msg);
    return 0;
}
