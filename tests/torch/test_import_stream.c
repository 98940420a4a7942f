/* gmp_import_torch_start / gmp_import_torch_finish (the import `report` reads as it is written,
 * cli_input's GMP_CLI_INPUT_STREAM): on every real snapshot of tests/data/torch-snapshots the
 * bytes that come through the pipe are those gmp_import_torch_flags writes with
 * GMP_IMPORT_TORCH_TEMPORARY (stored), and the stats are the same; gmp_reader reads the pipe as
 * it is written; a reader that closes the pipe early gets an error from finish, neither a hang
 * nor a SIGPIPE; a snapshot that cannot be read fails in start with gmp_import_torch_flags'
 * message and leaves no thread. Also run under TSan (scripts/test-all). */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmp_import_torch.h"
#include "gmp_reader.h"

static uint8_t *read_fd(int fd, size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    uint8_t *p = malloc(cap);
    assert_non_null(p);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            p = realloc(p, cap);
            assert_non_null(p);
        }
        ssize_t k = read(fd, p + len, cap - len);
        assert_true(k >= 0);
        if (k == 0)
            break;
        len += (size_t)k;
    }
    *n = len;
    return p;
}

static uint8_t *import_whole(const char *snap, size_t *n, gmp_import_torch_stats *st)
{
    char path[] = "/tmp/gmp_impstream_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int wfd = dup(fd);
    char msg[512];
    gmp_err e = gmp_import_torch_flags(snap, wfd, GMP_IMPORT_TORCH_TEMPORARY, st, msg, sizeof msg);
    if (e != GMP_OK)
        fail_msg("%s: %s", snap, msg);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    uint8_t *p = read_fd(fd, n);
    close(fd);
    return p;
}

static gmp_import_torch_job *start(const char *snap, int *rfd)
{
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    gmp_import_torch_job *job = NULL;
    char msg[512];
    gmp_err e =
        gmp_import_torch_start(snap, pp[1], GMP_IMPORT_TORCH_TEMPORARY, &job, msg, sizeof msg);
    if (e != GMP_OK)
        fail_msg("%s: %s", snap, msg);
    assert_non_null(job);
    *rfd = pp[0];
    return job;
}

static int each_snapshot(char *out, size_t n, DIR *d)
{
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l >= 8 && strcmp(de->d_name + l - 7, ".pickle") == 0) {
            snprintf(out, n, "%s/%s", GMP_TORCH_DATA, de->d_name);
            return 1;
        }
    }
    return 0;
}

static void test_same_bytes_and_stats(void **state)
{
    (void)state;
    DIR *d = opendir(GMP_TORCH_DATA);
    assert_non_null(d);
    char snap[4096];
    int seen = 0;
    while (each_snapshot(snap, sizeof snap, d)) {
        size_t na, nb;
        gmp_import_torch_stats sa, sb;
        memset(&sa, 0, sizeof sa);
        memset(&sb, 0, sizeof sb);
        uint8_t *a = import_whole(snap, &na, &sa);
        int rfd;
        gmp_import_torch_job *job = start(snap, &rfd);
        assert_true(gmp_import_torch_job_events(job) > 0);
        uint8_t *b = read_fd(rfd, &nb);
        close(rfd);
        char msg[512];
        gmp_err e = gmp_import_torch_finish(job, &sb, msg, sizeof msg);
        if (e != GMP_OK)
            fail_msg("%s: %s", snap, msg);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
        assert_memory_equal(&sa, &sb, sizeof sa);
        free(a);
        free(b);
        seen++;
    }
    closedir(d);
    assert_true(seen >= 4);
}

/* gmp_reader on the pipe (through /proc/self/fd, as cli_input opens it) while it is written. */
static void test_reader_on_pipe(void **state)
{
    (void)state;
    char snap[4096];
    snprintf(snap, sizeof snap, "%s/transformer-train-step-adamw.pickle", GMP_TORCH_DATA);
    int rfd;
    gmp_import_torch_job *job = start(snap, &rfd);
    uint64_t expect = gmp_import_torch_job_events(job);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", rfd);
    gmp_reader *r = NULL;
    assert_int_equal(gmp_reader_open(&r, path, NULL), GMP_OK);
    close(rfd);
    const gmp_rec *rec;
    gmp_err e;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK)
        ;
    assert_int_equal(e, GMP_END);
    const gmp_reader_stats *rs = gmp_reader_get_stats(r);
    assert_true(rs->has_end);
    assert_false(rs->truncated);
    /* the job's estimate counts the memory events (the trace adds notices and the like) */
    assert_true(rs->events >= expect);
    gmp_reader_close(r);
    char msg[512];
    assert_int_equal(gmp_import_torch_finish(job, NULL, msg, sizeof msg), GMP_OK);
}

/* The reader goes away before the end: finish returns the writing's error (EPIPE), and the
 * process is not killed by SIGPIPE (the writer's threads block it). */
static void test_reader_closes_early(void **state)
{
    (void)state;
    char snap[4096];
    snprintf(snap, sizeof snap, "%s/transformer-train-step-adamw.pickle", GMP_TORCH_DATA);
    int rfd;
    gmp_import_torch_job *job = start(snap, &rfd);
    uint8_t buf[4096];
    assert_true(read(rfd, buf, sizeof buf) > 0); /* the writing has begun */
    close(rfd);
    char msg[512];
    gmp_err e = gmp_import_torch_finish(job, NULL, msg, sizeof msg);
    assert_int_not_equal(e, GMP_OK);
    assert_non_null(strstr(msg, "could not be written"));
}

/* A snapshot that cannot be read fails in start, as gmp_import_torch_flags fails, and closes the
 * pipe's writing end (a reader would see its end at once). */
static void test_bad_snapshot_fails_in_start(void **state)
{
    (void)state;
    char snap[4096], cut[] = "/tmp/gmp_impstream_cut_XXXXXX";
    snprintf(snap, sizeof snap, "%s/transformer-train-step-adamw.pickle", GMP_TORCH_DATA);
    FILE *f = fopen(snap, "rb");
    assert_non_null(f);
    uint8_t *data = malloc(1 << 16);
    assert_non_null(data);
    size_t n = fread(data, 1, 1 << 16, f);
    fclose(f);
    int cfd = mkstemp(cut);
    assert_true(cfd >= 0);
    assert_int_equal(write(cfd, data, n / 2), (ssize_t)(n / 2));
    close(cfd);
    free(data);
    char want[512], got[512];
    gmp_err ew = gmp_import_torch_flags(cut, open("/dev/null", O_WRONLY),
                                        GMP_IMPORT_TORCH_TEMPORARY, NULL, want, sizeof want);
    assert_int_not_equal(ew, GMP_OK);
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    gmp_import_torch_job *job = (gmp_import_torch_job *)1;
    gmp_err eg =
        gmp_import_torch_start(cut, pp[1], GMP_IMPORT_TORCH_TEMPORARY, &job, got, sizeof got);
    unlink(cut);
    assert_int_equal(eg, ew);
    assert_string_equal(got, want);
    assert_null(job);
    uint8_t b;
    assert_int_equal(read(pp[0], &b, 1), 0); /* the writing end was closed */
    close(pp[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_and_stats),
        cmocka_unit_test(test_reader_on_pipe),
        cmocka_unit_test(test_reader_closes_early),
        cmocka_unit_test(test_bad_snapshot_fails_in_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
