/* gmp_units: quantities written for people (see gmp_units.h). */
#include "gmp_units.h"

#include <inttypes.h>
#include <stdio.h>

const char *gmp_fmt_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (b < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", b);
        return buf;
    }
    double v = (double)b;
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.2f %s", v, units[u]);
    return buf;
}

const char *gmp_fmt_reltime(uint64_t ns, uint64_t t0, char *buf, size_t n)
{
    uint64_t x = ns >= t0 ? ns - t0 : t0 - ns;
    snprintf(buf, n, "%c%" PRIu64 ".%06" PRIu64 " s", ns >= t0 ? '+' : '-', x / 1000000000u,
             x % 1000000000u / 1000u);
    return buf;
}

const char *gmp_fmt_duration(uint64_t ns, char *buf, size_t n)
{
    if (ns < 1000)
        snprintf(buf, n, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, n, "%.3f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, n, "%.3f ms", (double)ns / 1e6);
    else
        snprintf(buf, n, "%.3f s", (double)ns / 1e9);
    return buf;
}
