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

/* path with ".N" before a final ".zst" (or at its end): the name of the N-th process that found
 * the fixed name taken. Returns 0, or -1 when it does not fit. */
static int with_suffix(char *path, size_t pathlen, const char *base, unsigned n)
{
    size_t bl = strlen(base);
    size_t stem = bl > 4 && strcmp(base + bl - 4, ".zst") == 0 ? bl - 4 : bl;
    int w = snprintf(path, pathlen, "%.*s.%u%s", (int)stem, base, n, base + stem);
    return w < 0 || (size_t)w >= pathlen ? -1 : 0;
}

/* Opens path for a new trace (force: truncating an existing regular file). Returns the
 * descriptor; -1 with errno set when open failed; -2 with the message in err when what opened is
 * not a regular file (closed again). */
static int open_trace(const char *path, int force, char *err, size_t errlen)
{
    /* O_NONBLOCK: with --force, a FIFO planted at the path would otherwise block the
     * program's CUDA initialization until someone reads it; only regular files are used */
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    flags |= force ? O_TRUNC : O_EXCL;
    int fd = open(path, flags, 0600);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        snprintf(err, errlen, "%.600s is not a regular file; refusing to write to it", path);
        return -2;
    }
    if (fd >= 0) {
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        if (force)
            (void)fchmod(fd, 0600); /* an overwritten file keeps no wider mode */
    }
    return fd;
}

int gmp_agent_create(const char *pattern, int force, int suffix, char *path, size_t pathlen,
                     char *err, size_t errlen)
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
        /* with suffix, processes that share the fixed name each create their own file: the
         * first takes the name (run removed an old one under --force), the others NAME.2 ... */
        int fd = open_trace(path, force && !suffix, err, errlen);
        if (fd == -2)
            return -1;
        if (fd >= 0)
            return fd;
        if (errno == EEXIST && suffix && !has_n) {
            struct stat ls;
            if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
                snprintf(err, errlen, "%.600s is a symbolic link; refusing to follow it", path);
                return -1;
            }
            char base[4096];
            snprintf(base, sizeof base, "%s", path);
            for (unsigned k = 2; k < 100000; k++) {
                if (with_suffix(path, pathlen, base, k) < 0)
                    break;
                /* never truncating: a taken suffix (another process, a planted link) is
                 * skipped */
                fd = open_trace(path, 0, err, errlen);
                if (fd == -2)
                    return -1;
                if (fd >= 0)
                    return fd;
                if (errno != EEXIST)
                    break;
            }
            if (errno == EEXIST) {
                snprintf(err, errlen, "no free file name beside %.600s", base);
                return -1;
            }
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

void gmp_agent_run_log(int recorded, const char *what)
{
    const char *log = getenv("GPUMEMPROF_RUN_LOG");
    if (!log || log[0] != '/')
        return;
    /* O_APPEND without O_CREAT: only the file run made; one write per line, so that lines of
     * processes starting together do not mix */
    int fd = open(log, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != getuid()) {
        close(fd);
        return;
    }
    char cmd[1024];
    size_t cl = 0;
    int cf = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (cf >= 0) {
        ssize_t r = read(cf, cmd, sizeof cmd - 1);
        cl = r > 0 ? (size_t)r : 0;
        close(cf);
    }
    while (cl && cmd[cl - 1] == 0)
        cl--;
    cmd[cl] = 0;
    /* one line of tab-separated fields: control bytes inside a field (tabs, newlines, the NULs
     * between the command's arguments) become spaces */
    char wh[1001];
    snprintf(wh, sizeof wh, "%s", what ? what : "");
    for (char *c = wh; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    for (size_t i = 0; i < cl; i++)
        if ((unsigned char)cmd[i] < 0x20 || cmd[i] == 0x7f)
            cmd[i] = ' ';
    char line[2200];
    int n = snprintf(line, sizeof line, "%s\t%ld\t%s\t%s\n", recorded ? "trace" : "lost",
                     (long)getpid(), wh, cmd);
    if (n < 0)
        return (void)close(fd);
    size_t o = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    line[o - 1] = '\n';
    ssize_t w = write(fd, line, o);
    (void)w;
    close(fd);
}
