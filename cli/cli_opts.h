/* cli_opts: the option parser every gpumemprof command uses.
 *
 * A command describes its options in a table of gmp_cli_opt (terminated by an entry with a NULL
 * name) and calls gmp_cli_parse. Accepted forms: `--name`, `--name=value`, `--name value`, `-x`,
 * `-x value`, `--` (everything after it is positional), `-` alone (a positional, e.g. stdin).
 * Options and positionals may be mixed; `--help`/`-h` is always recognised. Values are parsed by
 * kind: strings, integers, sizes with units (64M, 1G, 512KiB, 4096) and durations with units
 * (200ms, 5s, 1m). Errors are reported on stderr in one line that names the command and the
 * option ("gpumemprof dump: --foo: unknown option") followed by the command's usage line. */
#ifndef GMP_CLI_OPTS_H
#define GMP_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum gmp_cli_opt_kind {
    GMP_CLI_FLAG,     /* int: set to 1; takes no value */
    GMP_CLI_STRING,   /* const char *: the argument as given */
    GMP_CLI_INT,      /* int64_t: decimal (or 0x hex), optional sign */
    GMP_CLI_UINT,     /* uint64_t: decimal or 0x hex */
    GMP_CLI_SIZE,     /* uint64_t bytes: 4096, 64K, 64M, 1G, 2T, 512KiB, 1.5G */
    GMP_CLI_DURATION, /* uint64_t ns: 500ns, 10us, 200ms, 5s, 2m, 1h; a bare number is in
                         the option's default unit (default_unit_ns; seconds when 0) */
} gmp_cli_opt_kind;

typedef struct gmp_cli_opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 0 when none */
    gmp_cli_opt_kind kind;
    void *dest;               /* int*, const char**, int64_t*, uint64_t* as the kind says */
    const char *metavar;      /* value placeholder in help ("FILE", "SIZE"); NULL for flags */
    const char *help;         /* one line */
    uint64_t default_unit_ns; /* GMP_CLI_DURATION only */
} gmp_cli_opt;

/* What a command's usage looks like, for messages. */
typedef struct gmp_cli_cmd_info {
    const char *name;    /* "dump" */
    const char *usage;   /* "TRACE [--json] [--raw]" (after "gpumemprof dump ") */
    const char *summary; /* one line */
} gmp_cli_cmd_info;

enum {
    GMP_CLI_PARSE_OK = 0,
    GMP_CLI_PARSE_HELP = 1,  /* --help was given: print help, exit 0 */
    GMP_CLI_PARSE_USAGE = 2, /* bad arguments: a message was printed, exit 2 */
};

/* Parses argv[1..argc) (argv[0] is the command name). Positional arguments are moved, in order,
 * to the front of argv starting at index 1; *npos receives their count. Returns one of
 * GMP_CLI_PARSE_*. */
int gmp_cli_parse(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts, int argc, char **argv,
                  int *npos);

/* A command's --help: usage, description and options, on stdout. */
typedef void (*gmp_cli_help_fn)(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts);

/* gmp_cli_parse_or_help's "go on": not an exit status. */
#define GMP_CLI_GO (-1)

/* What every command does first: gmp_cli_parse, then on --help help(cmd, opts) and exit 0, on bad
 * arguments exit 2 (the message is printed). Returns GMP_CLI_GO when the command goes on (*npos
 * positionals at argv[1..]), else the exit status. */
int gmp_cli_parse_or_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts,
                          gmp_cli_help_fn help, int argc, char **argv, int *npos);

/* Prints "gpumemprof CMD: " + message + newline, then the usage line, on stderr. Returns 2. */
int gmp_cli_usage_error(const gmp_cli_cmd_info *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "usage: gpumemprof CMD USAGE" */
void gmp_cli_print_usage(FILE *f, const gmp_cli_cmd_info *cmd);
/* The options block of a command's --help, from its table (--help included). */
void gmp_cli_print_options(FILE *f, const gmp_cli_opt *opts);

/* Value parsers, also for commands that read values elsewhere. Return 0 on success, -1 on a
 * malformed or out-of-range value. */
int gmp_cli_parse_int(const char *s, int64_t *out);
int gmp_cli_parse_uint(const char *s, uint64_t *out);
/* Sizes: K/M/G/T (and KB/MB/.., KiB/MiB/..) are powers of 1024; a trailing B is allowed; case
 * does not matter; a fraction is allowed before a unit (1.5G). */
int gmp_cli_parse_size(const char *s, uint64_t *out);
/* Durations: ns, us, ms, s, m (minutes), h; default_unit_ns applies to a bare number (seconds
 * when 0). Fractions allowed (0.5s). Result in nanoseconds. */
int gmp_cli_parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *out);

#endif
