/* deep.h: an inline function two headers deep, in another directory (-Iinc). */
int dw_sink(int x);
static inline __attribute__((always_inline)) int deep_fn(int x)
{
    int r = dw_sink(x);
    return r + 7;
}
