/* LD_PRELOAD shim for test_faults.py slow_writer: storage that cannot keep up. Every write() to a
 * file whose name ends in ".zst" first sleeps REL_SLOW_WRITE_MS milliseconds (default 300), as a
 * congested network file system would. Other writes pass through untouched. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t n);

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fd > 2) {
        char link[64], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k > 4) {
            target[k] = 0;
            if (!strcmp(target + k - 4, ".zst")) {
                const char *s = getenv("REL_SLOW_WRITE_MS");
                long ms = s ? strtol(s, NULL, 10) : 300;
                struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
        }
    }
    return real(fd, buf, n);
}
