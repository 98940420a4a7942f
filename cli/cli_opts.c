/* Option parsing shared by the gpumemprof commands (see cli_opts.h). */
#include "cli_opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void gmp_cli_print_usage(FILE *f, const gmp_cli_cmd_info *cmd)
{
    fprintf(f, "usage: gpumemprof %s%s%s\n", cmd->name, cmd->usage && *cmd->usage ? " " : "",
            cmd->usage ? cmd->usage : "");
}

int gmp_cli_usage_error(const gmp_cli_cmd_info *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "gpumemprof %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    gmp_cli_print_usage(stderr, cmd);
    fprintf(stderr, "Run 'gpumemprof %s --help' for details.\n", cmd->name);
    return GMP_CLI_PARSE_USAGE;
}

void gmp_cli_print_options(FILE *f, const gmp_cli_opt *opts)
{
    char left[96];
    fprintf(f, "Options:\n");
    for (const gmp_cli_opt *o = opts; o && o->name; o++) {
        int n;
        if (o->short_name)
            n = snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->name);
        else
            n = snprintf(left, sizeof left, "    --%s", o->name);
        if (o->metavar && n > 0 && (size_t)n < sizeof left)
            snprintf(left + n, sizeof left - (size_t)n, " %s", o->metavar);
        fprintf(f, "  %-24s %s\n", left, o->help ? o->help : "");
    }
    fprintf(f, "  %-24s %s\n", "-h, --help", "show this help and exit");
}

/* Parses an unsigned decimal number with an optional fraction: "12", "1.5", ".5" (not ""). The
 * value is whole + num/den. Returns the end of the number, or NULL. */
static const char *parse_decimal(const char *s, uint64_t *whole, uint64_t *num, uint64_t *den)
{
    const char *p = s;
    uint64_t w = 0, nm = 0, dn = 1;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (w > (UINT64_MAX - d) / 10)
            return NULL;
        w = w * 10 + d;
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (dn <= UINT64_MAX / 10 / 10) { /* keep at most ~18 fractional digits */
                nm = nm * 10 + (unsigned)(*p - '0');
                dn *= 10;
            }
            p++;
            digits++;
        }
    }
    if (!digits)
        return NULL;
    *whole = w;
    *num = nm;
    *den = dn;
    return p;
}

/* whole*unit + num*unit/den with overflow checks. */
static int scale(uint64_t whole, uint64_t num, uint64_t den, uint64_t unit, uint64_t *out)
{
    if (unit && whole > UINT64_MAX / unit)
        return -1;
    uint64_t v = whole * unit;
    /* num < den <= 1e18 and unit <= 2^40 or 3.6e12: compute num*unit/den in 128 bits */
    unsigned __int128 frac = (unsigned __int128)num * unit / den;
    if (frac > UINT64_MAX - v)
        return -1;
    *out = v + (uint64_t)frac;
    return 0;
}

int gmp_cli_parse_uint(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

int gmp_cli_parse_int(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

int gmp_cli_parse_size(const char *s, uint64_t *out)
{
    uint64_t w, num, den;
    if (!s)
        return -1;
    const char *p = parse_decimal(s, &w, &num, &den);
    if (!p)
        return -1;
    static const struct {
        char c;
        unsigned shift;
    } units[] = {{'k', 10}, {'m', 20}, {'g', 30}, {'t', 40}};
    uint64_t unit = 1;
    if (*p) {
        size_t i;
        for (i = 0; i < sizeof units / sizeof units[0]; i++)
            if (tolower((unsigned char)*p) == units[i].c)
                break;
        if (i < sizeof units / sizeof units[0]) {
            unit = (uint64_t)1 << units[i].shift;
            p++;
            if (tolower((unsigned char)*p) == 'i')
                p++;
            if (tolower((unsigned char)*p) == 'b')
                p++;
        } else if (tolower((unsigned char)*p) == 'b') {
            p++;
        }
        if (*p)
            return -1;
    }
    if (unit == 1 && num)
        return -1; /* fractional bytes */
    return scale(w, num, den, unit, out);
}

int gmp_cli_parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *out)
{
    uint64_t w, num, den;
    if (!s)
        return -1;
    const char *p = parse_decimal(s, &w, &num, &den);
    if (!p)
        return -1;
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"ms", 1000000},
                 {"s", 1000000000},
                 {"m", 60ull * 1000000000},
                 {"min", 60ull * 1000000000},
                 {"h", 3600ull * 1000000000}};
    uint64_t unit = default_unit_ns ? default_unit_ns : 1000000000;
    if (*p) {
        size_t i;
        for (i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcasecmp(p, units[i].name) == 0)
                break;
        if (i == sizeof units / sizeof units[0])
            return -1;
        unit = units[i].ns;
    }
    return scale(w, num, den, unit, out);
}

static const char *kind_expect(const gmp_cli_opt *o)
{
    gmp_cli_opt_kind k = o->kind;
    /* a bare number is in the option's unit: say which, as its --help does */
    if (k == GMP_CLI_DURATION && o->default_unit_ns == 1000000)
        return "milliseconds, such as 200, or a duration with its unit: 500us, 5s, 2m";
    if (k == GMP_CLI_DURATION && o->default_unit_ns == 1000)
        return "microseconds, such as 500, or a duration with its unit: 200ms, 5s";
    switch (k) {
    case GMP_CLI_INT: return "an integer";
    case GMP_CLI_UINT: return "a non-negative integer";
    case GMP_CLI_SIZE: return "a size such as 4096, 64K, 64M or 1G";
    case GMP_CLI_DURATION: return "a duration such as 500us, 200ms, 5s or 2m";
    default: return "a value";
    }
}

static int set_value(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *o, const char *shown,
                     const char *v)
{
    int rc = 0;
    switch (o->kind) {
    case GMP_CLI_FLAG: *(int *)o->dest = 1; return 0;
    case GMP_CLI_STRING: *(const char **)o->dest = v; return 0;
    case GMP_CLI_INT: rc = gmp_cli_parse_int(v, (int64_t *)o->dest); break;
    case GMP_CLI_UINT: rc = gmp_cli_parse_uint(v, (uint64_t *)o->dest); break;
    case GMP_CLI_SIZE: rc = gmp_cli_parse_size(v, (uint64_t *)o->dest); break;
    case GMP_CLI_DURATION:
        rc = gmp_cli_parse_duration(v, o->default_unit_ns, (uint64_t *)o->dest);
        break;
    }
    if (rc)
        return gmp_cli_usage_error(cmd, "%s: invalid value '%s' (expected %s)", shown, v,
                                   kind_expect(o));
    return 0;
}

int gmp_cli_parse(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts, int argc, char **argv,
                  int *npos)
{
    int np = 0;
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            argv[1 + np++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return GMP_CLI_PARSE_HELP;
        const gmp_cli_opt *o = NULL;
        const char *val = NULL;
        char shown[80];
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            snprintf(shown, sizeof shown, "--%.*s", (int)(len < 64 ? len : 64), name);
            for (const gmp_cli_opt *c = opts; c && c->name; c++)
                if (strlen(c->name) == len && strncmp(c->name, name, len) == 0)
                    o = c;
            if (!o)
                return gmp_cli_usage_error(cmd, "%s: unknown option", shown);
            if (eq) {
                if (o->kind == GMP_CLI_FLAG)
                    return gmp_cli_usage_error(cmd, "%s: takes no value", shown);
                val = eq + 1;
            }
        } else {
            snprintf(shown, sizeof shown, "-%c", a[1]);
            for (const gmp_cli_opt *c = opts; c && c->name; c++)
                if (c->short_name && c->short_name == a[1])
                    o = c;
            if (!o || a[2] != '\0')
                return gmp_cli_usage_error(cmd, "%s: unknown option", o ? a : shown);
        }
        if (o->kind != GMP_CLI_FLAG && !val) {
            if (i + 1 >= argc)
                return gmp_cli_usage_error(cmd, "%s: needs a value (%s)", shown,
                                           o->metavar ? o->metavar : kind_expect(o));
            val = argv[++i];
        }
        int rc = set_value(cmd, o, shown, val);
        if (rc)
            return rc;
    }
    *npos = np;
    return GMP_CLI_PARSE_OK;
}

int gmp_cli_parse_or_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts,
                          gmp_cli_help_fn help, int argc, char **argv, int *npos)
{
    int rc = gmp_cli_parse(cmd, opts, argc, argv, npos);
    if (rc == GMP_CLI_PARSE_HELP) {
        help(cmd, opts);
        return 0;
    }
    return rc == GMP_CLI_PARSE_OK ? GMP_CLI_GO : 2;
}
