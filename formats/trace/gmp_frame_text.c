/* gmp_frame_text: a frame's one-line name (see gmp_frame_text.h). */
#include "gmp_frame_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

size_t gmp_frame_text(int python, gmp_str fn, gmp_str file, uint32_t line, char *buf, size_t n)
{
    int k;
    const char *fp = fn.ptr ? fn.ptr : "", *pp = file.ptr ? file.ptr : "";
    if (python && !line && (!file.len || (file.len == 2 && memcmp(pp, "??", 2) == 0))) {
        /* a native frame as PyTorch's snapshots name them: no file, no line */
        k = snprintf(buf, n, "%.*s", (int)fn.len, fp);
    } else if (python && !line) {
        k = snprintf(buf, n, "%.*s (%.*s)", (int)fn.len, fp, (int)file.len, pp);
    } else if (python) {
        k = snprintf(buf, n, "%.*s (%.*s:%" PRIu32 ")", (int)fn.len, fp, (int)file.len, pp, line);
    } else {
        const char *b = pp;
        for (uint32_t i = 0; i < file.len; i++)
            if (pp[i] == '/')
                b = pp + i + 1;
        if (file.len && line)
            k = snprintf(buf, n, "%.*s (%.*s:%" PRIu32 ")", (int)fn.len, fp,
                         (int)(file.len - (uint32_t)(b - pp)), b, line);
        else
            k = snprintf(buf, n, "%.*s", (int)fn.len, fp);
    }
    if (k < 0) {
        if (n)
            buf[0] = 0;
        return 0;
    }
    return (size_t)k < n ? (size_t)k : (n ? n - 1 : 0);
}
