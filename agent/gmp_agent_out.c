#include "gmp_agent_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

long gmp_agent_rank(void)
{
    const char *vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        if (!s || !*s)
            continue;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (!errno && !*end && v >= 0 && v < 100000000)
            return v;
    }
    return -1;
}

int gmp_agent_expand(const char *pattern, unsigned n, char *out, size_t outlen)
{
    size_t o = 0;
    char tmp[256];
    for (const char *p = pattern; *p; p++) {
        const char *add = tmp;
        size_t addlen;
        if (*p != '%') {
            tmp[0] = *p;
            addlen = 1;
        } else {
            p++;
            switch (*p) {
            case 'p': addlen = (size_t)snprintf(tmp, sizeof tmp, "%ld", (long)getpid()); break;
            case 'h':
                if (gethostname(tmp, sizeof tmp - 1) != 0)
                    strcpy(tmp, "localhost");
                tmp[sizeof tmp - 1] = 0;
                for (char *c = tmp; *c; c++)
                    if (*c == '/')
                        *c = '_';
                addlen = strlen(tmp);
                break;
            case 'r': {
                long r = gmp_agent_rank();
                addlen = (size_t)snprintf(tmp, sizeof tmp, "%ld", r < 0 ? 0 : r);
                break;
            }
            case 'n': addlen = (size_t)snprintf(tmp, sizeof tmp, "%u", n); break;
            case '%':
                tmp[0] = '%';
                addlen = 1;
                break;
            default: return -1;
            }
        }
        if (o + addlen + 1 > outlen)
            return -1;
        memcpy(out + o, add, addlen);
        o += addlen;
    }
    out[o] = 0;
    return 0;
}

int gmp_agent_create(const char *pattern, int force, char *path, size_t pathlen, char *err,
                     size_t errlen)
{
    int has_n = 0;
    for (const char *p = pattern; *p; p++) {
        if (*p == '%' && p[1]) {
            has_n |= p[1] == 'n';
            p++;
        }
    }
    for (unsigned n = 0; n < 100000; n++) {
        if (gmp_agent_expand(pattern, n, path, pathlen) < 0) {
            snprintf(err, errlen, "bad output pattern '%.200s' (known: %%p %%h %%r %%n %%%%)",
                     pattern);
            return -1;
        }
        /* O_NONBLOCK: with --force, a FIFO planted at the path would otherwise block the
         * program's CUDA initialization until someone reads it; only regular files are used */
        int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
        flags |= force ? O_TRUNC : O_EXCL;
        int fd = open(path, flags, 0600);
        struct stat sb;
        if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
            close(fd);
            snprintf(err, errlen, "%.600s is not a regular file; refusing to write to it", path);
            return -1;
        }
        if (fd >= 0) {
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            if (force)
                (void)fchmod(fd, 0600); /* an overwritten file keeps no wider mode */
            return fd;
        }
        if (errno == ENXIO) { /* a FIFO nobody reads (O_WRONLY|O_NONBLOCK) */
            snprintf(err, errlen, "%.600s is not a regular file; refusing to write to it", path);
            return -1;
        }
        if (errno == EEXIST && has_n)
            continue;
        if (errno == EEXIST)
            snprintf(err, errlen, "%.600s exists (use --force to overwrite)", path);
        else if (errno == ELOOP)
            snprintf(err, errlen, "%.600s is a symbolic link; refusing to follow it", path);
        else
            snprintf(err, errlen, "cannot create %.600s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(err, errlen, "no free file name for pattern %.200s", pattern);
    return -1;
}
