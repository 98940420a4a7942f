/* Locating the agent relative to the running executable (see cli_paths.h). */
#include "cli_paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GMP_AGENT_RELPATH
#define GMP_AGENT_RELPATH "../lib/gpumemprof/libgpumemprof_agent.so"
#endif

gmp_err gmp_cli_self_dir(char *buf, size_t n)
{
    if (!buf || n == 0)
        return GMP_ERR_ARG;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return GMP_ERR_IO;
    if ((size_t)len >= sizeof exe - 1)
        return GMP_ERR_LIMIT;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return GMP_ERR_IO;
    if (slash == exe)
        slash++; /* executable in "/" */
    *slash = '\0';
    size_t dl = strlen(exe);
    if (dl + 1 > n)
        return GMP_ERR_LIMIT;
    memcpy(buf, exe, dl + 1);
    return GMP_OK;
}

gmp_err gmp_cli_agent_path(char *buf, size_t n)
{
    if (!buf || n == 0)
        return GMP_ERR_ARG;
    buf[0] = '\0';
    const char *env = getenv(GMP_AGENT_ENV);
    if (env && *env) {
        if ((size_t)snprintf(buf, n, "%s", env) >= n)
            return GMP_ERR_LIMIT;
        return access(buf, R_OK) == 0 ? GMP_OK : GMP_ERR_IO;
    }
    char dir[PATH_MAX];
    gmp_err e = gmp_cli_self_dir(dir, sizeof dir);
    if (e != GMP_OK)
        return e;
    /* dir is canonical (the kernel resolved /proc/self/exe): join lexically, each leading "../"
     * of the relative path removing one component of dir */
    const char *rel = GMP_AGENT_RELPATH;
    size_t dl = strlen(dir);
    while (strncmp(rel, "../", 3) == 0) {
        while (dl > 0 && dir[dl - 1] != '/')
            dl--;
        while (dl > 1 && dir[dl - 1] == '/')
            dl--;
        rel += 3;
    }
    if (dl <= 1)
        dl = 0; /* the root: "" + "/" + rel */
    int len = snprintf(buf, n, "%.*s/%s", (int)dl, dir, rel);
    if (len < 0 || (size_t)len >= n)
        return GMP_ERR_LIMIT;
    return access(buf, R_OK) == 0 ? GMP_OK : GMP_ERR_IO;
}
