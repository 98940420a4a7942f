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
