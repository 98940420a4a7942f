/* hdr.h: inline functions of a header, one inlined into another (deep.h). */
#include "deep.h"
static inline __attribute__((always_inline)) int hdr_fn(int x)
{
    int a = dw_sink(x) + 1;
    return deep_fn(a) * 3;
}
static inline int hdr_maybe(int x)
{
    return hdr_fn(x) + hdr_fn(x + 1);
}
