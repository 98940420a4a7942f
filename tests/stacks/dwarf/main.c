/* main.c: the program of check_llvm_symbolizer.py (built by gcc and clang, DWARF 4 and 5):
 * header functions first in the unit, inlined from headers, recursion inlined into itself. */
#include "first.h"
#include "hdr.h"
int dw_other(int);

__attribute__((noinline)) int dw_caller(int v)
{
    int r = hdr_fn(v);
    return r + 3;
}

static int walk(int n)
{
    if (n <= 0)
        return dw_sink(n);
    return walk(n - 1) + dw_sink(n);
}

int main(int argc, char **argv)
{
    (void)argv;
    int t = first_in_header(argc);
    t += dw_caller(t);
    t += hdr_maybe(t);
    t += walk(argc + 2);
    return dw_other(t) & 1;
}
