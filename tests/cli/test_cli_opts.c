/* Unit tests of cli/cli_opts: value parsers (sizes, durations, integers) and the option parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_opts.h"

static void test_sizes(void **state)
{
    (void)state;
    uint64_t v;
    struct {
        const char *s;
        uint64_t want;
    } ok[] = {{"0", 0},
              {"4096", 4096},
              {"4096B", 4096},
              {"64K", 64ull << 10},
              {"64k", 64ull << 10},
              {"64KiB", 64ull << 10},
              {"64KB", 64ull << 10},
              {"64M", 64ull << 20},
              {"1G", 1ull << 30},
              {"1g", 1ull << 30},
              {"2T", 2ull << 40},
              {"1.5G", 3ull << 29},
              {".5M", 1ull << 19},
              {"16383T", 16383ull << 40}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        v = 12345;
        assert_int_equal(gmp_cli_parse_size(ok[i].s, &v), 0);
        assert_int_equal(v, ok[i].want);
    }
    const char *bad[] = {"",
                         "M",
                         "-1",
                         "1X",
                         "1MM",
                         "1.5",
                         "1 M",
                         "0x10",
                         "1e3",
                         "1GiBB",
                         "99999999999999999999",
                         "16777216T",
                         "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gmp_cli_parse_size(bad[i], &v), -1);
}

static void test_durations(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(gmp_cli_parse_duration("200ms", 0, &v), 0);
    assert_int_equal(v, 200000000ull);
    assert_int_equal(gmp_cli_parse_duration("5s", 0, &v), 0);
    assert_int_equal(v, 5000000000ull);
    assert_int_equal(gmp_cli_parse_duration("5", 0, &v), 0); /* bare: seconds by default */
    assert_int_equal(v, 5000000000ull);
    assert_int_equal(gmp_cli_parse_duration("5", 1000000, &v), 0); /* bare: option's unit (ms) */
    assert_int_equal(v, 5000000ull);
    assert_int_equal(gmp_cli_parse_duration("10us", 0, &v), 0);
    assert_int_equal(v, 10000ull);
    assert_int_equal(gmp_cli_parse_duration("500ns", 0, &v), 0);
    assert_int_equal(v, 500ull);
    assert_int_equal(gmp_cli_parse_duration("2m", 0, &v), 0);
    assert_int_equal(v, 120000000000ull);
    assert_int_equal(gmp_cli_parse_duration("1h", 0, &v), 0);
    assert_int_equal(v, 3600000000000ull);
    assert_int_equal(gmp_cli_parse_duration("0.5s", 0, &v), 0);
    assert_int_equal(v, 500000000ull);
    assert_int_equal(gmp_cli_parse_duration("1.25ms", 0, &v), 0);
    assert_int_equal(v, 1250000ull);
    assert_int_equal(gmp_cli_parse_duration("", 0, &v), -1);
    assert_int_equal(gmp_cli_parse_duration("ms", 0, &v), -1);
    assert_int_equal(gmp_cli_parse_duration("5 s", 0, &v), -1);
    assert_int_equal(gmp_cli_parse_duration("5sec", 0, &v), -1);
    assert_int_equal(gmp_cli_parse_duration("-1s", 0, &v), -1);
    assert_int_equal(gmp_cli_parse_duration("99999999999h", 0, &v), -1);
}

static void test_ints(void **state)
{
    (void)state;
    int64_t i;
    uint64_t u;
    assert_int_equal(gmp_cli_parse_int("-42", &i), 0);
    assert_int_equal(i, -42);
    assert_int_equal(gmp_cli_parse_int("0x10", &i), 0);
    assert_int_equal(i, 16);
    assert_int_equal(gmp_cli_parse_int("", &i), -1);
    assert_int_equal(gmp_cli_parse_int("12a", &i), -1);
    assert_int_equal(gmp_cli_parse_int("99999999999999999999", &i), -1);
    assert_int_equal(gmp_cli_parse_uint("18446744073709551615", &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(gmp_cli_parse_uint("-1", &u), -1);
    assert_int_equal(gmp_cli_parse_uint(" 1", &u), -1);
    assert_int_equal(gmp_cli_parse_uint("18446744073709551616", &u), -1);
}

typedef struct vals {
    int flag;
    const char *out;
    uint64_t size, dur;
    int64_t n;
} vals;

static int parse(vals *v, int argc, char **argv, int *npos)
{
    static const gmp_cli_cmd_info cmd = {"test", "[--flag] [--out FILE] ARGS", "a test command"};
    memset(v, 0, sizeof *v);
    const gmp_cli_opt opts[] = {
        {"flag", 'f', GMP_CLI_FLAG, &v->flag, NULL, "a flag", 0},
        {"out", 'o', GMP_CLI_STRING, &v->out, "FILE", "output", 0},
        {"size", 0, GMP_CLI_SIZE, &v->size, "SIZE", "a size", 0},
        {"interval", 0, GMP_CLI_DURATION, &v->dur, "TIME", "a duration (bare: ms)", 1000000},
        {"n", 'n', GMP_CLI_INT, &v->n, "N", "a number", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    return gmp_cli_parse(&cmd, opts, argc, argv, npos);
}

static void test_parse(void **state)
{
    (void)state;
    vals v;
    int np = -1;
    char *a1[] = {"test", "x",  "--flag", "--out=o.txt",     "y", "--size", "64M", "--interval=200",
                  "-n",   "-3", "--",     "--not-an-option", "-", NULL};
    assert_int_equal(parse(&v, 13, a1, &np), GMP_CLI_PARSE_OK);
    assert_int_equal(np, 4);
    assert_string_equal(a1[1], "x");
    assert_string_equal(a1[2], "y");
    assert_string_equal(a1[3], "--not-an-option");
    assert_string_equal(a1[4], "-");
    assert_int_equal(v.flag, 1);
    assert_string_equal(v.out, "o.txt");
    assert_int_equal(v.size, 64ull << 20);
    assert_int_equal(v.dur, 200000000ull);
    assert_int_equal(v.n, -3);

    char *a2[] = {"test", "-o", "f", "-f", "--out", "g", NULL};
    assert_int_equal(parse(&v, 6, a2, &np), GMP_CLI_PARSE_OK);
    assert_int_equal(np, 0);
    assert_string_equal(v.out, "g");
    assert_int_equal(v.flag, 1);

    /* "--out=" gives an empty value; the value of "--out" may start with a dash */
    char *a3[] = {"test", "--out=", "--size", "1k", "--out", "-x", NULL};
    assert_int_equal(parse(&v, 6, a3, &np), GMP_CLI_PARSE_OK);
    assert_string_equal(v.out, "-x");

    char *h1[] = {"test", "x", "--help", "--bogus", NULL};
    assert_int_equal(parse(&v, 4, h1, &np), GMP_CLI_PARSE_HELP);
    char *h2[] = {"test", "-h", NULL};
    assert_int_equal(parse(&v, 2, h2, &np), GMP_CLI_PARSE_HELP);
}

static void test_parse_errors(void **state)
{
    (void)state;
    vals v;
    int np;
    /* the messages go to stderr; ctest shows them with --output-on-failure */
    char *e1[] = {"test", "--bogus", NULL};
    assert_int_equal(parse(&v, 2, e1, &np), GMP_CLI_PARSE_USAGE);
    char *e2[] = {"test", "--out", NULL};
    assert_int_equal(parse(&v, 2, e2, &np), GMP_CLI_PARSE_USAGE);
    char *e3[] = {"test", "--size", "lots", NULL};
    assert_int_equal(parse(&v, 3, e3, &np), GMP_CLI_PARSE_USAGE);
    char *e4[] = {"test", "--flag=1", NULL};
    assert_int_equal(parse(&v, 2, e4, &np), GMP_CLI_PARSE_USAGE);
    char *e5[] = {"test", "-fo", "x", NULL};
    assert_int_equal(parse(&v, 3, e5, &np), GMP_CLI_PARSE_USAGE);
    char *e6[] = {"test", "--fla", NULL}; /* no prefix matching */
    assert_int_equal(parse(&v, 2, e6, &np), GMP_CLI_PARSE_USAGE);
    char *e7[] = {"test", "--interval", "5 parsecs", NULL};
    assert_int_equal(parse(&v, 3, e7, &np), GMP_CLI_PARSE_USAGE);
}

static int help_calls;
static void count_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    assert_string_equal(cmd->name, "test");
    assert_string_equal(opts[0].name, "flag");
    help_calls++;
}

/* gmp_cli_parse_or_help: go on (GMP_CLI_GO), or the exit status: 0 after the help (called once),
 * 2 after a usage error (the help not called). */
static void test_parse_or_help(void **state)
{
    (void)state;
    static const gmp_cli_cmd_info cmd = {"test", "[--flag] ARGS", "a test command"};
    int flag = 0, np = -1;
    const gmp_cli_opt opts[] = {
        {"flag", 'f', GMP_CLI_FLAG, &flag, NULL, "a flag", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    help_calls = 0;
    char *ok[] = {"test", "x", "-f", NULL};
    assert_int_equal(gmp_cli_parse_or_help(&cmd, opts, count_help, 3, ok, &np), GMP_CLI_GO);
    assert_int_equal(np, 1);
    assert_int_equal(flag, 1);
    assert_int_equal(help_calls, 0);
    char *help[] = {"test", "--help", NULL};
    assert_int_equal(gmp_cli_parse_or_help(&cmd, opts, count_help, 2, help, &np), 0);
    assert_int_equal(help_calls, 1);
    char *bad[] = {"test", "--bogus", NULL};
    assert_int_equal(gmp_cli_parse_or_help(&cmd, opts, count_help, 2, bad, &np), 2);
    assert_int_equal(help_calls, 1);
}

static void test_usage_message(void **state)
{
    (void)state;
    /* gmp_cli_usage_error writes "gpumemprof CMD: message" then the usage line */
    static const gmp_cli_cmd_info cmd = {"dump", "TRACE [--json]", "x"};
    char path[] = "/tmp/gmp_test_cli_opts_XXXXXX";
    FILE *saved = stderr;
    FILE *f = fdopen(mkstemp(path), "w+");
    assert_non_null(f);
    stderr = f;
    int rc = gmp_cli_usage_error(&cmd, "%s: unknown option", "--foo");
    stderr = saved;
    assert_int_equal(rc, GMP_CLI_PARSE_USAGE);
    rewind(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "gpumemprof dump: --foo: unknown option\n");
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "usage: gpumemprof dump TRACE [--json]\n");
    fclose(f);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),         cmocka_unit_test(test_durations),
        cmocka_unit_test(test_ints),          cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_errors),  cmocka_unit_test(test_usage_message),
        cmocka_unit_test(test_parse_or_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
