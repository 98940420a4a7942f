/* cli_runout: run's output directory check and its run log (see cli_runout.h). */
#include "cli_runout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void host_name(char *host, size_t n)
{
    host[0] = 0;
    if (gethostname(host, n - 1) != 0)
        snprintf(host, n, "localhost");
    host[n - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
}

int gmp_cli_run_fixed_name(const char *pattern, char *out, size_t outlen)
{
    char host[256];
    host_name(host, sizeof host);
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        const char *add = p;
        size_t al = 1;
        if (*p == '%' && p[1]) {
            p++;
            if (*p == 'h') {
                add = host;
                al = strlen(host);
            } else if (*p == '%') {
                add = "%";
            } else {
                return 0;
            }
        }
        if (o + al + 1 > outlen)
            return 0;
        memcpy(out + o, add, al);
        o += al;
    }
    out[o] = 0;
    return 1;
}

int gmp_cli_run_check_dir(const char *pattern, char *msg, size_t msglen)
{
    char host[256];
    host_name(host, sizeof host);
    /* the pattern's directory with %h and %% expanded, cut before the first component whose name
     * each process sets (%p %n %r): that part must exist for any process to write */
    char dir[4096];
    size_t o = 0, last_slash = 0, cut = 0;
    int varying = 0;
    for (const char *p = pattern; *p && o + 1 < sizeof dir; p++) {
        if (*p == '/') {
            if (varying)
                break;
            last_slash = o;
            cut = 1;
            dir[o++] = '/';
            continue;
        }
        if (*p == '%' && p[1]) {
            p++;
            if (*p == 'h') {
                size_t hl = strlen(host);
                if (o + hl + 1 >= sizeof dir)
                    break;
                memcpy(dir + o, host, hl);
                o += hl;
                continue;
            }
            if (*p != '%')
                varying = 1;
        }
        dir[o++] = *p;
    }
    if (!cut)
        return 0; /* a relative pattern is made absolute before this: never here */
    o = last_slash ? last_slash : 1; /* "/x.zst": the root */
    dir[o] = 0;
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(msg, msglen, "--output: directory %.1000s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(msg, msglen, "--output: %.1000s is not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(msg, msglen, "--output: directory %.1000s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int gmp_cli_runlog_create(char *path, size_t pathlen)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    int n = snprintf(path, pathlen, "%s/gpumemprof-run.XXXXXX", tmp);
    if (n < 0 || (size_t)n >= pathlen)
        return -1;
    int fd = mkstemp(path); /* mode 0600, O_EXCL */
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

size_t gmp_cli_runlog_read(const char *path, gmp_cli_run_proc **out)
{
    *out = NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    gmp_cli_run_proc *v = NULL;
    size_t n = 0, cap = 0;
    char line[4096];
    /* at most 100,000 processes: the log is the agents' own, but bounded all the same */
    while (n < 100000 && fgets(line, sizeof line, f)) {
        size_t l = strcspn(line, "\n");
        line[l] = 0;
        char *f1 = strchr(line, '\t'), *f2 = f1 ? strchr(f1 + 1, '\t') : NULL;
        char *f3 = f2 ? strchr(f2 + 1, '\t') : NULL;
        if (!f3)
            continue;
        *f1 = *f2 = *f3 = 0;
        int rec = strcmp(line, "trace") == 0;
        if (!rec && strcmp(line, "lost") != 0)
            continue;
        char *end;
        long pid = strtol(f1 + 1, &end, 10);
        if (*end || pid <= 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            gmp_cli_run_proc *q = realloc(v, nc * sizeof *v);
            if (!q)
                break;
            v = q;
            cap = nc;
        }
        gmp_cli_run_proc *p = &v[n];
        p->recorded = rec;
        p->pid = pid;
        p->what = dup_n(f2 + 1, strlen(f2 + 1));
        p->cmd = dup_n(f3 + 1, strlen(f3 + 1));
        if (!p->what || !p->cmd) {
            free(p->what);
            free(p->cmd);
            break;
        }
        n++;
    }
    fclose(f);
    *out = v;
    return n;
}

void gmp_cli_runlog_free(gmp_cli_run_proc *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].what);
        free(p[i].cmd);
    }
    free(p);
}
