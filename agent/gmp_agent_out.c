#include "gmp_agent_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A launcher's variable as a number from 0 to 10^8; -1 when unset, empty or not such a number. */
static long env_num(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return !errno && !*end && v >= 0 && v < 100000000 ? v : -1;
}

gmp_agent_rankinfo gmp_agent_rank_info(void)
{
    /* Each launcher's variables, as its documentation names them:
     * - torchrun: torch/distributed/run.py, the module docstring's "Environment Variables"
     *   (RANK the global rank, LOCAL_RANK the local rank, WORLD_SIZE the total number of workers);
     * - Open MPI mpirun(1), "Environment Variables" (OMPI_COMM_WORLD_RANK,
     *   OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE);
     * - Slurm srun(1), "OUTPUT ENVIRONMENT VARIABLES" (SLURM_PROCID the MPI rank, SLURM_LOCALID
     *   the node-local task id, SLURM_NTASKS the total number of tasks);
     * - MPICH's Hydra and other PMI launchers: PMI_RANK, PMI_SIZE (no local rank).
     * torchrun first: run under srun or mpirun, its workers also inherit the launcher's
     * variables, which then number the torchrun agents, not the workers. */
    static const char *const v[][3] = {
        {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
        {"PMI_RANK", NULL, "PMI_SIZE"},
    };
    gmp_agent_rankinfo ri = {-1, -1, 0, ""};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        long r = env_num(v[i][0]);
        if (r < 0)
            continue;
        ri.rank = r;
        ri.var = v[i][0];
        ri.local_rank = v[i][1] ? env_num(v[i][1]) : -1;
        long ws = env_num(v[i][2]);
        ri.world_size = ws > r ? ws : 0; /* a size that cannot hold the rank is not one */
        break;
    }
    return ri;
}

long gmp_agent_rank(void)
{
    return gmp_agent_rank_info().rank;
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
            case 'r':
            case 'l': {
                gmp_agent_rankinfo ri = gmp_agent_rank_info();
                long r = *p == 'r' ? ri.rank : ri.local_rank;
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

/* 1 when the run log (GPUMEMPROF_RUN_LOG) says that a process of this run records into path. */
static int run_log_lists(const char *path)
{
    const char *log = getenv("GPUMEMPROF_RUN_LOG");
    if (!log || log[0] != '/')
        return 0;
    int fd = open(log, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return 0;
    }
    /* lines "trace TAB pid TAB path TAB command" (gmp_agent_run_log) */
    char line[2200];
    size_t pl = strlen(path);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *a = strchr(line, '\t'), *b = a ? strchr(a + 1, '\t') : NULL;
        found = !strncmp(line, "trace\t", 6) && b && !strncmp(b + 1, path, pl) && b[1 + pl] == '\t';
    }
    fclose(f);
    return found;
}

/* --force at a rank's name that exists: the descriptor of that file, emptied, when it is stale;
 * -1 with errno EEXIST when it is not (then the caller takes NAME.2.zst ...). A process that
 * creates a rank's file holds an flock on it for its life, so a file another process still
 * writes is locked; a file a finished process of this run wrote is in the run log. Only a file
 * that is neither (a previous run's) is replaced, and only by the process that got its lock, so
 * that processes of one rank starting together never write into one file. Where flock does not
 * work (some network file systems), nothing is replaced. */
static int replace_stale(const char *path)
{
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
        flock(fd, LOCK_EX | LOCK_NB) == 0 && !run_log_lists(path) && ftruncate(fd, 0) == 0) {
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        (void)fchmod(fd, 0600); /* an overwritten file keeps no wider mode */
        return fd;
    }
    if (fd >= 0)
        close(fd);
    errno = EEXIST;
    return -1;
}

int gmp_agent_create(const char *pattern, int force, int suffix, char *path, size_t pathlen,
                     char *err, size_t errlen)
{
    int has_n = 0, has_p = 0, has_rank = 0;
    for (const char *p = pattern; *p; p++) {
        if (*p == '%' && p[1]) {
            has_n |= p[1] == 'n';
            has_p |= p[1] == 'p';
            has_rank |= p[1] == 'r' || p[1] == 'l';
            p++;
        }
    }
    /* a rank's name (a rerun of the job finds it taken, and so does a second CUDA process that
     * inherited the rank's environment) is never refused: with force it replaces a file no
     * process of this run took, otherwise the process takes NAME.2.zst ... as for a fixed name */
    int rank_name = has_rank && !has_p && !has_n;
    if (rank_name)
        suffix = 1;
    for (unsigned n = 0; n < 100000; n++) {
        if (gmp_agent_expand(pattern, n, path, pathlen) < 0) {
            snprintf(err, errlen, "bad output pattern '%.200s' (known: %%p %%h %%r %%l %%n %%%%)",
                     pattern);
            return -1;
        }
        /* with suffix, processes that share the fixed name each create their own file: the
         * first takes the name (run removed an old one under --force), the others NAME.2 ... */
        int fd = open_trace(path, force && !suffix, err, errlen);
        if (fd == -1 && errno == EEXIST && rank_name && force)
            fd = replace_stale(path);
        if (fd == -2)
            return -1;
        if (fd >= 0) {
            /* in use: see replace_stale. Between this process's O_EXCL create and its flock,
             * another of the rank's processes under --force may have locked the new file as
             * stale: it is that one's now, and this one takes NAME.2.zst ... */
            if (!rank_name || flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
                return fd;
            close(fd);
            errno = EEXIST;
        }
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
