#include "gmp_agent_opts.h"
#include "gmp_agent_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_run_defaults.h"

/* A value as shown in a message: at most 64 bytes, control characters as '?', so that the message
 * stays one line whatever the environment holds. */
static const char *shown(const char *s, char buf[68])
{
    size_t i = 0;
    for (; s[i] && i < 64; i++)
        buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i] && i == 64)
        buf[i++] = '~'; /* cut */
    buf[i] = 0;
    return buf;
}

/* Parses an unsigned decimal with an optional unit suffix (K, M, G: powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    uint64_t mul = 1;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K': mul = 1ull << 10; break;
        case 'm':
        case 'M': mul = 1ull << 20; break;
        case 'g':
        case 'G': mul = 1ull << 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -1;
    }
    if (v > UINT64_MAX / mul)
        return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static int env_num(const char *name, uint64_t lo, uint64_t hi, uint64_t *out, char *err,
                   size_t errlen)
{
    const char *s = getenv(name);
    if (!s)
        return 0;
    uint64_t v;
    if (parse_size(s, &v) < 0 || v < lo || v > hi) {
        char b[68];
        snprintf(err, errlen, "%s=%s: expected a number from %llu to %llu", name, shown(s, b),
                 (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int env_bool(const char *name, int *out, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s)
        return 0;
    if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off") || !*s)
        *out = 0;
    else {
        char b[68];
        snprintf(err, errlen, "%s=%s: expected 0 or 1", name, shown(s, b));
        return -1;
    }
    return 0;
}

static int env_str(const char *name, char *dst, size_t n, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s)
        return 0;
    size_t len = strlen(s);
    if (len >= n) {
        snprintf(err, errlen, "%s is longer than %zu bytes", name, n - 1);
        return -1;
    }
    memcpy(dst, s, len + 1);
    return 0;
}

int gmp_agent_opts_read(gmp_agent_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    strcpy(o->output, GMP_RUN_OUTPUT);
    o->stack_depth = GMP_RUN_STACK_DEPTH;
    o->sample_ms = GMP_RUN_SAMPLE_MS;
    o->buffer_bytes = GMP_RUN_BUFFER_BYTES;
    o->flush_ms = GMP_RUN_FLUSH_MS;
    o->nvtx = 1;
    o->activity = 1;
    o->activity_bytes = GMP_RUN_ACTIVITY_BYTES;
    uint64_t v;
    if (env_str("GPUMEMPROF_OUTPUT", o->output, sizeof o->output, err, errlen) < 0)
        return -1;
    if (!o->output[0]) {
        snprintf(err, errlen, "GPUMEMPROF_OUTPUT is empty");
        return -1;
    }
    /* the default name of a rank (GPUMEMPROF_OUTPUT unset, or run's default, which sets
     * GPUMEMPROF_OUTPUT_RANK beside it) carries the host and the rank rather than the pid */
    const char *rp = getenv("GPUMEMPROF_OUTPUT_RANK");
    if ((rp || !getenv("GPUMEMPROF_OUTPUT")) && gmp_agent_rank() >= 0) {
        if (env_str("GPUMEMPROF_OUTPUT_RANK", o->output, sizeof o->output, err, errlen) < 0)
            return -1;
        if (!rp)
            strcpy(o->output, GMP_RUN_OUTPUT_RANK);
        if (!o->output[0]) {
            snprintf(err, errlen, "GPUMEMPROF_OUTPUT_RANK is empty");
            return -1;
        }
    }
    if (env_bool("GPUMEMPROF_FORCE", &o->force, err, errlen) < 0)
        return -1;
    if (env_bool("GPUMEMPROF_OUTPUT_SUFFIX", &o->suffix, err, errlen) < 0)
        return -1;
    const char *st = getenv("GPUMEMPROF_STACKS");
    o->stacks = GMP_STACKS_ALL;
    o->stacks_auto = 1;
    if (st && *st && strcmp(st, "auto")) {
        o->stacks_auto = 0;
        if (!strcmp(st, "none"))
            o->stacks = GMP_STACKS_NONE;
        else if (!strcmp(st, "native"))
            o->stacks = GMP_STACKS_NATIVE;
        else if (!strcmp(st, "python"))
            o->stacks = GMP_STACKS_PYTHON;
        else if (!strcmp(st, "all"))
            o->stacks = GMP_STACKS_ALL;
        else {
            char b[68];
            snprintf(err, errlen,
                     "GPUMEMPROF_STACKS=%s: expected none, native, python, all or auto",
                     shown(st, b));
            return -1;
        }
    }
    const char *uw = getenv("GPUMEMPROF_STACK_UNWIND");
    if (uw && *uw) {
        if (!strcmp(uw, "libunwind"))
            o->unwind = 0;
        else if (!strcmp(uw, "glibc"))
            o->unwind = 1;
        else if (!strcmp(uw, "fp"))
            o->unwind = 2;
        else {
            char b[68];
            snprintf(err, errlen, "GPUMEMPROF_STACK_UNWIND=%s: expected libunwind, glibc or fp",
                     shown(uw, b));
            return -1;
        }
    }
    v = o->stack_depth;
    if (env_num("GPUMEMPROF_STACK_DEPTH", GMP_RUN_STACK_DEPTH_MIN, GMP_RUN_STACK_DEPTH_MAX, &v, err,
                errlen) < 0)
        return -1;
    o->stack_depth = (unsigned)v;
    v = o->sample_ms;
    if (env_num("GPUMEMPROF_SAMPLE_INTERVAL_MS", 0, GMP_RUN_SAMPLE_MS_MAX, &v, err, errlen) < 0)
        return -1;
    o->sample_ms = (unsigned)v;
    v = o->buffer_bytes;
    if (env_num("GPUMEMPROF_BUFFER_SIZE", GMP_RUN_BUFFER_BYTES_MIN, GMP_RUN_BUFFER_BYTES_MAX, &v,
                err, errlen) < 0)
        return -1;
    o->buffer_bytes = v;
    v = o->flush_ms;
    if (env_num("GPUMEMPROF_FLUSH_INTERVAL_MS", GMP_RUN_FLUSH_MS_MIN, GMP_RUN_FLUSH_MS_MAX, &v, err,
                errlen) < 0)
        return -1;
    o->flush_ms = (unsigned)v;
    if (env_str("GPUMEMPROF_CUPTI", o->cupti, sizeof o->cupti, err, errlen) < 0)
        return -1;
    if (env_bool("GPUMEMPROF_NVTX", &o->nvtx, err, errlen) < 0)
        return -1;
    if (env_bool("GPUMEMPROF_ACTIVITY", &o->activity, err, errlen) < 0)
        return -1;
    if (env_bool("GPUMEMPROF_QUIET", &o->quiet, err, errlen) < 0)
        return -1;
    v = o->activity_bytes;
    if (env_num("GPUMEMPROF_ACTIVITY_BUFFER", GMP_RUN_ACTIVITY_BYTES_MIN,
                GMP_RUN_ACTIVITY_BYTES_MAX, &v, err, errlen) < 0)
        return -1;
    o->activity_bytes = v;
    const char *al = getenv("GPUMEMPROF_ALERT_THRESHOLD");
    char alb[68];
    if (al && *al) {
        size_t len = strlen(al);
        if (al[len - 1] == '%') {
            char num[16];
            uint64_t pct;
            if (len - 1 == 0 || len - 1 >= sizeof num) {
                snprintf(err, errlen, "GPUMEMPROF_ALERT_THRESHOLD=%s: expected BYTES or 1-100%%",
                         shown(al, alb));
                return -1;
            }
            memcpy(num, al, len - 1);
            num[len - 1] = 0;
            if (parse_size(num, &pct) < 0 || pct < 1 || pct > 100) {
                snprintf(err, errlen, "GPUMEMPROF_ALERT_THRESHOLD=%s: expected BYTES or 1-100%%",
                         shown(al, alb));
                return -1;
            }
            o->alert_percent = (unsigned)pct;
        } else if (parse_size(al, &o->alert_bytes) < 0 || o->alert_bytes == 0) {
            snprintf(err, errlen, "GPUMEMPROF_ALERT_THRESHOLD=%s: expected BYTES or 1-100%%",
                     shown(al, alb));
            return -1;
        }
    }
    return 0;
}

void gmp_agent_opts_format(const gmp_agent_opts *o, char *buf, size_t n)
{
    static const char *const unwinders[] = {"libunwind", "glibc", "fp"};
    static const char *const kinds[] = {"none", "native", "python", "all"};
    char st[80] = "stacks=none";
    if (o->stacks)
        snprintf(st, sizeof st, "stacks=%s stack_depth=%u stack_unwind=%s",
                 o->stacks_auto ? "auto" : kinds[o->stacks & 3], o->stack_depth,
                 unwinders[o->unwind >= 0 && o->unwind <= 2 ? o->unwind : 0]);
    snprintf(buf, n,
             "%s sample_interval_ms=%u buffer_size=%llu flush_interval_ms=%u nvtx=%d "
             "activity=%d activity_buffer=%llu",
             st, o->sample_ms, (unsigned long long)o->buffer_bytes, o->flush_ms, o->nvtx,
             o->activity, (unsigned long long)o->activity_bytes);
}
