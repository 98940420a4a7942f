/* first.h: a function of a header that comes first in its unit's code, so that gcc numbers this
 * header file 1 of the DWARF 5 line table (the unit's own file is 0 and 2): a sequence that starts
 * here names it only through the file register's initial value (1). */
int dw_sink(int x);
__attribute__((noinline)) static int first_in_header(int x)
{
    int r = dw_sink(x);
    return r + 1;
}
