/* cli_input: opens any recording for the commands (see cli_input.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, O_TMPFILE */
#endif
#include "cli_input.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_import_nsys.h"
#include "gmp_import_torch.h"
#include "gmp_merge_torch.h"
#include "gmp_rlimit.h"
#include "gmp_tq.h"

/* ---- kinds and their importers ---- */

static int probe_trace(const unsigned char *head, size_t n)
{
    return gmp_reader_probe(head, n);
}

static int probe_nsys(const unsigned char *head, size_t n)
{
    return gmp_import_nsys_probe(head, n);
}

static gmp_err run_nsys(const char *in, int out_fd, unsigned flags, char *msg, size_t msglen)
{
    (void)flags;
    gmp_import_nsys_stats st;
    gmp_err e = gmp_import_nsys(in, out_fd, &st, msg, msglen);
    if (e == GMP_OK)
        snprintf(msg, msglen,
                 "%" PRIu64 " memory records (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
                 " with their API call), %" PRIu64 " NVTX range%s, %" PRIu64 " thread%s, %" PRIu64
                 " device%s%s",
                 st.memory_records, st.allocs, st.frees, st.with_api,
                 st.range_pushes + st.range_starts,
                 st.range_pushes + st.range_starts == 1 ? "" : "s", st.threads,
                 st.threads == 1 ? "" : "s", st.devices, st.devices == 1 ? "" : "s",
                 st.skipped ? "; some rows skipped (unknown operation or negative values)" : "");
    return e;
}

typedef struct kind_def {
    gmp_cli_input_kind kind;
    const char *id, *name, *what;
    int (*probe)(const unsigned char *head, size_t n);
    /* NULL: a trace; flags: IMPORT_TEMPORARY or 0 */
    gmp_err (*import)(const char *in, int out_fd, unsigned flags, char *msg, size_t msglen);
} kind_def;

/* The kinds, probed in this order (their first bytes exclude each other). A new input is one line
 * here and its importer in formats/import. */
static const kind_def kinds[] = {
    {GMP_CLI_INPUT_TRACE, "trace", "gpumemprof trace", NULL, probe_trace, NULL},
    {GMP_CLI_INPUT_NSYS, "nsys", "Nsight Systems SQLite export",
     "Nsight Systems SQLite export (nsys export --type sqlite)", probe_nsys, run_nsys},
    {GMP_CLI_INPUT_TORCH, "pytorch", "PyTorch memory snapshot",
     "PyTorch memory snapshot (torch.cuda.memory._dump_snapshot)", gmp_import_torch_probe,
     gmp_import_torch_run},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const kind_def *kind_def_of(gmp_cli_input_kind k)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].kind == k)
            return &kinds[i];
    return NULL;
}

gmp_cli_input_kind gmp_cli_input_probe(const void *head, size_t n)
{
    for (size_t i = 0; head && i < NKINDS; i++)
        if (kinds[i].probe(head, n))
            return kinds[i].kind;
    return GMP_CLI_INPUT_UNKNOWN;
}

const char *gmp_cli_input_kind_name(gmp_cli_input_kind kind)
{
    const kind_def *d = kind_def_of(kind);
    return d ? d->name : "unknown";
}

const char *gmp_cli_input_kind_id(gmp_cli_input_kind kind)
{
    const kind_def *d = kind_def_of(kind);
    return d ? d->id : "unknown";
}

const char *gmp_cli_input_kind_what(gmp_cli_input_kind kind)
{
    const kind_def *d = kind_def_of(kind);
    return d ? d->what : NULL;
}

void gmp_cli_input_unknown_msg(const void *head, size_t n, char *msg, size_t msglen)
{
    char begins[80] = "it is empty";
    if (n) {
        const unsigned char *h = head;
        size_t shown = n < 12 ? n : 12, k = 0;
        k += (size_t)snprintf(begins, sizeof begins, "it begins with \"");
        for (size_t i = 0; i < shown && k < sizeof begins - 8; i++) {
            unsigned c = h[i];
            if (c == '"' || c == '\\')
                k += (size_t)snprintf(begins + k, sizeof begins - k, "\\%c", c);
            else if (c >= 0x20 && c < 0x7f)
                begins[k++] = (char)c;
            else if (c == '\n' || c == '\r' || c == '\t')
                k += (size_t)snprintf(begins + k, sizeof begins - k, "\\%c",
                                      c == '\n'   ? 'n'
                                      : c == '\r' ? 'r'
                                                  : 't');
            else
                k += (size_t)snprintf(begins + k, sizeof begins - k, "\\x%02x", c);
        }
        snprintf(begins + k, sizeof begins - k, "\"%s", n > shown ? "..." : "");
    }
    snprintf(msg, msglen,
             "not a gpumemprof trace, a PyTorch memory snapshot (pickle) or an Nsight Systems "
             "SQLite export (%s)",
             begins);
}

/* An import into a temporary trace that this process reads back at once and throws away: the
 * importer may write it stored, not compressed (GMP_IMPORT_TORCH_TEMPORARY). */
#define IMPORT_TEMPORARY GMP_IMPORT_TORCH_TEMPORARY

static gmp_err import_kind(gmp_cli_input_kind kind, const char *in_path, int out_fd, unsigned flags,
                           char *msg, size_t msglen)
{
    const kind_def *d = kind_def_of(kind);
    if (!d || !d->import) {
        if (out_fd >= 0)
            close(out_fd);
        snprintf(msg, msglen, "%s: nothing to import", d ? d->name : "unknown input");
        return GMP_ERR_ARG;
    }
    if (msg && msglen)
        msg[0] = 0;
    return d->import(in_path, out_fd, flags, msg, msglen);
}

gmp_err gmp_cli_input_import(gmp_cli_input_kind kind, const char *in_path, int out_fd, char *msg,
                             size_t msglen)
{
    return import_kind(kind, in_path, out_fd, 0, msg, msglen);
}

/* ---- the temporary trace ---- */

/* A read-write file with no name: a memfd, else O_TMPFILE in $TMPDIR, else a file made and
 * unlinked at once. -1 and errno on failure. */
static int anonymous_file(void)
{
#ifdef MFD_CLOEXEC
    int fd = memfd_create("gpumemprof-import", MFD_CLOEXEC);
    if (fd >= 0)
        return fd;
#endif
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
#ifdef O_TMPFILE
    int tfd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tfd >= 0)
        return tfd;
#endif
    size_t l = strlen(dir) + 32;
    char *tmp = malloc(l);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, l, "%s/gpumemprof-import.XXXXXX", dir);
    int sfd = mkstemp(tmp);
    if (sfd >= 0)
        unlink(tmp);
    free(tmp);
    return sfd;
}

/* ---- PyTorch's memory history beside a trace (run --torch-history) ---- */

/* The snapshot `run --torch-history` wrote beside the trace at path into out: PATH.torch.pickle,
 * else PATH.oom.torch.pickle (a process that ended before its exit dump). 0 when there is none,
 * or when GPUMEMPROF_TORCH_MERGE is 0. */
static int torch_sibling(const char *path, char *out, size_t n)
{
    const char *env = getenv("GPUMEMPROF_TORCH_MERGE");
    if (env && strcmp(env, "0") == 0)
        return 0;
    static const char *const sfx[] = {".torch.pickle", ".oom.torch.pickle"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        struct stat sb;
        if ((size_t)snprintf(out, n, "%s%s", path, sfx[i]) < n && stat(out, &sb) == 0 &&
            S_ISREG(sb.st_mode))
            return 1;
    }
    return 0;
}

/* A trace with a snapshot beside it: read as the two merged (gmp_merge_torch) into a temporary
 * trace; when they cannot be merged, one warning line and the trace alone. */
static void merge_torch(gmp_cli_input *in, const char *path)
{
    char snap[4096], msg[512] = "", spath[32];
    if (!torch_sibling(path, snap, sizeof snap))
        return;
    int sfd = anonymous_file(), mfd = -1;
    gmp_err e = GMP_ERR_IO;
    int wfd = sfd >= 0 ? dup(sfd) : -1;
    if (wfd < 0) {
        snprintf(msg, sizeof msg, "cannot make a temporary trace: %s", strerror(errno));
        goto fail;
    }
    e = gmp_import_torch_flags(snap, wfd, IMPORT_TEMPORARY, NULL, msg, sizeof msg);
    if (e != GMP_OK)
        goto fail;
    snprintf(spath, sizeof spath, "/proc/self/fd/%d", sfd);
    mfd = anonymous_file();
    wfd = mfd >= 0 ? dup(mfd) : -1;
    if (wfd < 0) {
        e = GMP_ERR_IO;
        snprintf(msg, sizeof msg, "cannot make a temporary trace: %s", strerror(errno));
        goto fail;
    }
    gmp_merge_torch_stats st;
    e = gmp_merge_torch(path, spath, snap, wfd, &st, msg, sizeof msg);
    if (e != GMP_OK)
        goto fail;
    close(sfd);
    struct stat tb;
    in->trace_bytes = fstat(mfd, &tb) == 0 ? (uint64_t)tb.st_size : 0;
    in->fd = mfd;
    snprintf(in->trace_path, sizeof in->trace_path, "/proc/self/fd/%d", mfd);
    snprintf(in->summary, sizeof in->summary,
             "merged with PyTorch's memory history %.300s: %" PRIu64 " blocks in %" PRIu64
             " of its %" PRIu64 " segments, which are allocations of the trace",
             snap, st.blocks, st.matched_segments, st.snap_segments);
    return;
fail:
    if (sfd >= 0)
        close(sfd);
    if (mfd >= 0)
        close(mfd);
    fprintf(stderr, "gpumemprof: warning: %s: not merged with %s (the trace alone is read): %s\n",
            path, snap, msg[0] ? msg : gmp_err_str(e));
}

/* ---- inputs opened once, read by several commands in this process (diagnose) ---- */

#define MAX_SHARED 8
static const gmp_cli_input *shared[MAX_SHARED];

void gmp_cli_input_share(const gmp_cli_input *in)
{
    if (in && in->job) /* a queue has one reader */
        return;
    for (size_t i = 0; in && i < MAX_SHARED; i++)
        if (!shared[i]) {
            shared[i] = in;
            return;
        }
}

void gmp_cli_input_unshare(const gmp_cli_input *in)
{
    for (size_t i = 0; i < MAX_SHARED; i++)
        if (shared[i] == in)
            shared[i] = NULL;
}

/* A copy of a shared input opened from path, or -1 when there is none (or dup fails). */
static int open_shared(gmp_cli_input *in, const char *path)
{
    for (size_t i = 0; i < MAX_SHARED; i++) {
        const gmp_cli_input *s = shared[i];
        if (!s || strcmp(s->path, path) != 0)
            continue;
        int fd = -1;
        if (s->fd >= 0 && (fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0)) < 0)
            return -1;
        *in = *s;
        in->path = path;
        in->fd = fd;
        if (fd >= 0)
            snprintf(in->trace_path, sizeof in->trace_path, "/proc/self/fd/%d", fd);
        return 0;
    }
    return -1;
}

#define STREAM_MIN_BYTES ((uint64_t)8 << 20) /* GMP_CLI_INPUT_STREAM: smaller files are not */

/* The bytes of frames the queue of a streamed import holds at most: the writer waits beyond, so
 * the trace in flight never takes more memory than this (a frame of 8192 events fits several
 * times). */
#define STREAM_QUEUE_BYTES ((size_t)1 << 20)

/* GMP_CLI_INPUT_STREAM for a snapshot: read here, written into a queue by the importer's thread
 * (gmp_tq.h: the frames' record bytes as they are staged, with no zstd framing, checksums or
 * copies through a pipe, and no helper thread for the checksums and writes). */
static gmp_err open_streamed(gmp_cli_input *in, const char *path, char *msg, size_t msglen)
{
    /* Under a limit on data or address space (which counts every thread's stack, and the
     * importer's tables while the reader's grow), the trace is written whole, then read: the
     * least memory at once (the test cli_inputs_bad reads a snapshot under an RLIMIT_DATA smaller
     * than the file). The caller then takes the usual way. */
    if (gmp_memory_limited())
        return GMP_ERR_UNSUPPORTED;
    gmp_tq *q = gmp_tq_new(STREAM_QUEUE_BYTES);
    if (!q) {
        snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_NOMEM));
        return GMP_ERR_NOMEM;
    }
    gmp_import_torch_job *job = NULL;
    gmp_err e = gmp_import_torch_start_queue(path, q, IMPORT_TEMPORARY, &job, msg, msglen);
    if (e != GMP_OK) {
        gmp_tq_unref(q);
        if (!msg[0])
            snprintf(msg, msglen, "%s", gmp_err_str(e));
        return e;
    }
    /* what progress shows: stored traces take ~18.5 bytes an event (docs/performance.md) */
    in->trace_bytes = gmp_import_torch_job_events(job) * 19u;
    in->job = job;
    in->queue = q;
    return GMP_OK;
}

gmp_err gmp_cli_input_open(gmp_cli_input *in, const char *path, char *msg, size_t msglen)
{
    return gmp_cli_input_open_flags(in, path, 0, msg, msglen);
}

gmp_err gmp_cli_input_open_flags(gmp_cli_input *in, const char *path, unsigned flags, char *msg,
                                 size_t msglen)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->fd = -1;
    if (msg && msglen)
        msg[0] = 0;
    if (open_shared(in, path) == 0)
        return GMP_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(msg, msglen, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return GMP_ERR_IO;
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        snprintf(msg, msglen, "it is a directory");
        return GMP_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) { /* a pipe: probing would consume it; the reader reads it */
        close(fd);
        in->kind = GMP_CLI_INPUT_TRACE;
        return GMP_OK;
    }
    in->file_bytes = (uint64_t)sb.st_size;
    unsigned char head[GMP_CLI_INPUT_HEAD];
    size_t n = 0;
    while (n < sizeof head) {
        ssize_t k = read(fd, head + n, sizeof head - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(msg, msglen, "%s", strerror(errno));
            close(fd);
            return GMP_ERR_IO;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    in->kind = gmp_cli_input_probe(head, n);
    if (in->kind == GMP_CLI_INPUT_UNKNOWN) {
        gmp_cli_input_unknown_msg(head, n, msg, msglen);
        return GMP_ERR_FORMAT;
    }
    if (in->kind == GMP_CLI_INPUT_TRACE) {
        in->trace_bytes = in->file_bytes;
        merge_torch(in, path);
        return GMP_OK;
    }
    /* streamed from STREAM_MIN_BYTES on: below, the thread and the queue cost more CPU than the
     * overlap of writing and reading saves */
    if ((flags & GMP_CLI_INPUT_STREAM) && in->kind == GMP_CLI_INPUT_TORCH &&
        in->file_bytes >= STREAM_MIN_BYTES) {
        gmp_err se = open_streamed(in, path, msg, msglen);
        if (se != GMP_ERR_UNSUPPORTED)
            return se;
    }
    int tfd = anonymous_file();
    if (tfd < 0) {
        snprintf(msg, msglen, "cannot make a temporary trace to import it into: %s",
                 strerror(errno));
        return GMP_ERR_IO;
    }
    int wfd = dup(tfd); /* the importer closes the descriptor it writes */
    if (wfd < 0) {
        snprintf(msg, msglen, "%s", strerror(errno));
        close(tfd);
        return GMP_ERR_IO;
    }
    unsigned iflags = flags & GMP_CLI_INPUT_COMPRESSED ? 0u : IMPORT_TEMPORARY;
    gmp_err e;
    if (in->kind == GMP_CLI_INPUT_TORCH) { /* as gmp_import_torch_run, keeping the settings */
        gmp_import_torch_stats st;
        e = gmp_import_torch_flags(path, wfd, iflags, &st, in->summary, sizeof in->summary);
        if (e == GMP_OK) {
            gmp_import_torch_summary(&st, in->summary, sizeof in->summary);
            in->torch_conf_known = st.has_alloc_conf;
            _Static_assert(sizeof in->torch_alloc_conf == sizeof st.alloc_conf, "same size");
            memcpy(in->torch_alloc_conf, st.alloc_conf, sizeof in->torch_alloc_conf);
        }
    } else {
        e = import_kind(in->kind, path, wfd, iflags, in->summary, sizeof in->summary);
    }
    if (e != GMP_OK) {
        snprintf(msg, msglen, "%s", in->summary[0] ? in->summary : gmp_err_str(e));
        in->summary[0] = 0;
        close(tfd);
        return e;
    }
    struct stat tb;
    in->trace_bytes = fstat(tfd, &tb) == 0 ? (uint64_t)tb.st_size : 0;
    in->fd = tfd;
    snprintf(in->trace_path, sizeof in->trace_path, "/proc/self/fd/%d", tfd);
    return GMP_OK;
}

gmp_err gmp_cli_input_reader(const gmp_cli_input *in, gmp_reader **r, const gmp_reader_opts *opts,
                             char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    gmp_err e = in->queue ? gmp_reader_open_queue(r, in->queue, opts)
                          : gmp_reader_open(r, in->fd >= 0 ? in->trace_path : in->path, opts);
    if (e != GMP_OK) {
        const char *m = gmp_reader_open_error();
        snprintf(msg, msglen, "%s", m && *m ? m : gmp_err_str(e));
    }
    return e;
}

gmp_err gmp_cli_input_finish(gmp_cli_input *in, char *msg, size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    if (!in || !in->job)
        return GMP_OK;
    gmp_import_torch_stats st;
    gmp_err e = gmp_import_torch_finish(in->job, &st, msg, msglen);
    in->job = NULL;
    gmp_tq_unref(in->queue);
    in->queue = NULL;
    if (e == GMP_OK)
        gmp_import_torch_summary(&st, in->summary, sizeof in->summary);
    return e;
}

void gmp_cli_input_close(gmp_cli_input *in)
{
    if (in && in->fd >= 0) {
        close(in->fd);
        in->fd = -1;
    }
    if (in && in->job) { /* its writes now fail (no reader is left): it ends */
        gmp_tq_close_read(in->queue);
        gmp_import_torch_finish(in->job, NULL, NULL, 0);
        in->job = NULL;
    }
    if (in && in->queue) {
        gmp_tq_unref(in->queue);
        in->queue = NULL;
    }
}

int gmp_cli_inputs_open(const char *cmd, char **paths, size_t n, gmp_cli_input **out)
{
    return gmp_cli_inputs_open_flags(cmd, paths, n, 0, out);
}

int gmp_cli_inputs_open_flags(const char *cmd, char **paths, size_t n, unsigned flags,
                              gmp_cli_input **out)
{
    *out = NULL;
    gmp_cli_input *ins = calloc(n ? n : 1, sizeof *ins);
    if (!ins) {
        fprintf(stderr, "gpumemprof %s: %s\n", cmd, gmp_err_str(GMP_ERR_NOMEM));
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        ins[i].fd = -1;
    for (size_t i = 0; i < n; i++) {
        char msg[1024];
        if (gmp_cli_input_open_flags(&ins[i], paths[i], flags, msg, sizeof msg) != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd, paths[i], msg);
            gmp_cli_inputs_close(ins, i);
            return 1;
        }
    }
    *out = ins;
    return 0;
}

void gmp_cli_inputs_close(gmp_cli_input *ins, size_t n)
{
    if (!ins)
        return;
    for (size_t i = 0; i < n; i++)
        gmp_cli_input_close(&ins[i]);
    free(ins);
}
