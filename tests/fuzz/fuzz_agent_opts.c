/* libFuzzer target for the agent's GPUMEMPROF_* parsing (agent/gmp_agent_opts.h) and its output
 * path pattern expansion (agent/gmp_agent_out.h), built without the rest of the agent.
 *
 * Input: a sequence of "<selector byte><value bytes>\0" entries. The selector picks one of the
 * variables below (or the pattern counter for %n); the value is set as that variable (an
 * environment value cannot hold a NUL, so values end at one). Every run starts from an empty
 * GPUMEMPROF_* environment. A rejected value must come with a one-line message; an accepted one
 * must be within its documented bounds.
 *
 * Values enter the environment through putenv on one buffer per variable, reused from run to run:
 * glibc's setenv keeps every distinct value it was ever given (a caller may still hold the old
 * string), so a setenv per run grows without bound and a run of hours ends out of memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_agent_opts.h"
#include "gmp_agent_out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vars[] = {
    "GPUMEMPROF_OUTPUT",
    "GPUMEMPROF_FORCE",
    "GPUMEMPROF_STACKS",
    "GPUMEMPROF_STACK_UNWIND",
    "GPUMEMPROF_STACK_DEPTH",
    "GPUMEMPROF_SAMPLE_INTERVAL_MS",
    "GPUMEMPROF_BUFFER_SIZE",
    "GPUMEMPROF_FLUSH_INTERVAL_MS",
    "GPUMEMPROF_CUPTI",
    "GPUMEMPROF_NVTX",
    "GPUMEMPROF_ACTIVITY",
    "GPUMEMPROF_QUIET",
    "GPUMEMPROF_ALERT_THRESHOLD",
    "GPUMEMPROF_ACTIVITY_BUFFER",
    "RANK",
};
#define NVARS (sizeof vars / sizeof vars[0])

/* "NAME=value" for each variable; grown as needed, never freed while the environment points in */
static char *env_buf[NVARS];
static size_t env_cap[NVARS];

/* sets vars[i] to the n bytes of val (no NUL among them); 0, or -1 out of memory */
static int set_var(size_t i, const char *val, size_t n)
{
    size_t name = strlen(vars[i]), need = name + 1 + n + 1;
    unsetenv(vars[i]); /* the environment no longer points into env_buf[i] */
    if (need > env_cap[i]) {
        char *b = realloc(env_buf[i], need);
        if (!b)
            return -1;
        env_buf[i] = b;
        env_cap[i] = need;
    }
    memcpy(env_buf[i], vars[i], name);
    env_buf[i][name] = '=';
    memcpy(env_buf[i] + name + 1, val, n);
    env_buf[i][name + 1 + n] = 0;
    return putenv(env_buf[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
    unsigned counter = 0;
    char *val = malloc(size + 1);
    if (!val)
        return 0;
    size_t p = 0;
    while (p < size) {
        unsigned sel = data[p++];
        size_t n = 0;
        while (p < size && data[p])
            val[n++] = (char)data[p++];
        val[n] = 0;
        p++; /* the NUL */
        if (sel % (NVARS + 1) == NVARS)
            counter = (unsigned)strtoul(val, NULL, 10);
        else if (set_var(sel % (NVARS + 1), val, n) < 0) {
            free(val);
            return 0;
        }
    }
    free(val);
    gmp_agent_opts o;
    char err[1200];
    err[0] = 0;
    if (gmp_agent_opts_read(&o, err, sizeof err) < 0) {
        /* one line, said */
        if (!err[0] || strchr(err, '\n'))
            __builtin_trap();
        return 0;
    }
    if (o.stack_depth < 1 || o.stack_depth > 256 || o.sample_ms > 3600000 ||
        o.buffer_bytes < (1u << 20) || o.buffer_bytes > (4ull << 30) || o.flush_ms < 1 ||
        o.flush_ms > 60000 || o.activity_bytes < (1u << 20) || o.activity_bytes > (1u << 30) ||
        o.alert_percent > 100 || !o.output[0] || strlen(o.output) >= sizeof o.output ||
        strlen(o.cupti) >= sizeof o.cupti)
        __builtin_trap();
    char fmt[512];
    gmp_agent_opts_format(&o, fmt, sizeof fmt);
    char path[1024];
    if (gmp_agent_expand(o.output, counter, path, sizeof path) == 0 && strlen(path) >= sizeof path)
        __builtin_trap();
    char tiny[8];
    (void)gmp_agent_expand(o.output, counter, tiny, sizeof tiny);
    volatile long r = gmp_agent_rank();
    (void)r;
    return 0;
}
