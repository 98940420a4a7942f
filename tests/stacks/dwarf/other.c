/* other.c: a second unit that uses the same headers. */
#include "hdr.h"
int dw_sink(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 2;
}
int dw_other(int v)
{
    return deep_fn(v) + hdr_fn(v + 2);
}
