/* libFuzzer target for the command-line option parser (cli/cli_opts.h): every argument a user or a
 * script passes is untrusted.
 *
 * The input is split at NUL bytes into argv[1..] (at most 64 arguments) and parsed against a table
 * with every kind of option (flag, string, int, uint, size, duration with and without a default
 * unit, short names). Afterwards the positionals must be argv's non-option words, in order, and
 * every argument is also given to each value parser directly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAXARGS + 2], *orig[MAXARGS + 2];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (size_t p = 0; p <= size && argc <= MAXARGS;) {
        argv[argc++] = buf + p;
        p += strlen(buf + p) + 1;
    }
    argv[argc] = NULL;
    memcpy(orig, argv, sizeof argv);

    int flag = 0, quiet = 0;
    const char *str = NULL;
    int64_t i64 = 0;
    uint64_t u64 = 0, size_v = 0, dur_ms = 0, dur_s = 0;
    const gmp_cli_opt opts[] = {
        {"json", 'j', GMP_CLI_FLAG, &flag, NULL, "a flag", 0},
        {"quiet", 'q', GMP_CLI_FLAG, &quiet, NULL, "another flag", 0},
        {"output", 'o', GMP_CLI_STRING, &str, "PATH", "a string", 0},
        {"count", 'n', GMP_CLI_INT, &i64, "N", "an integer", 0},
        {"max", 0, GMP_CLI_UINT, &u64, "N", "an unsigned integer", 0},
        {"buffer-size", 'b', GMP_CLI_SIZE, &size_v, "SIZE", "a size", 0},
        {"flush-interval", 0, GMP_CLI_DURATION, &dur_ms, "MS", "milliseconds", 1000000},
        {"timeout", 't', GMP_CLI_DURATION, &dur_s, "TIME", "seconds", 0},
        {NULL, 0, 0, NULL, NULL, NULL, 0},
    };
    const gmp_cli_cmd_info cmd = {"fuzz", "[OPTIONS] ARGS...", "fuzz target"};
    int npos = -1;
    int rc = gmp_cli_parse(&cmd, opts, argc, argv, &npos);
    if (rc != GMP_CLI_PARSE_OK && rc != GMP_CLI_PARSE_HELP && rc != GMP_CLI_PARSE_USAGE)
        __builtin_trap();
    if (rc == GMP_CLI_PARSE_OK) {
        if (npos < 0 || npos > argc - 1)
            __builtin_trap();
        /* positionals keep their order and are arguments that were given */
        int j = 1;
        for (int i = 0; i < npos; i++) {
            while (j < argc && orig[j] != argv[1 + i])
                j++;
            if (j == argc)
                __builtin_trap();
            j++;
        }
        if (str && (str < buf || str > buf + size))
            __builtin_trap();
    }
    for (int i = 1; i < argc; i++) {
        int64_t a;
        uint64_t b;
        (void)gmp_cli_parse_int(orig[i], &a);
        (void)gmp_cli_parse_uint(orig[i], &b);
        if (gmp_cli_parse_size(orig[i], &b) == 0 && strchr(orig[i], '-'))
            __builtin_trap(); /* sizes are never negative */
        (void)gmp_cli_parse_duration(orig[i], 0, &b);
        (void)gmp_cli_parse_duration(orig[i], 1000, &b);
    }
    free(buf);
    return 0;
}
