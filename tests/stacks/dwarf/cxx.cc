// cxx.cc: a C++ program for check_llvm_symbolizer.py: a static function (gcc gives it no linkage
// name in DWARF), a template inlined, a lambda, a namespace, a member function.
#include "hdr.h"
int dw_sink(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 2;
}
namespace dw
{
template <typename T> static inline __attribute__((always_inline)) T twice(T v)
{
    return static_cast<T>(dw_sink(static_cast<int>(v))) * 2;
}
__attribute__((noinline)) static long helper(long n)
{
    auto f = [n](int k) { return twice<long>(n + k); };
    return f(1) + f(2);
}
struct Box {
    __attribute__((noinline)) long run(int k) const { return helper(k) + twice<int>(k); }
};
} // namespace dw
int main(int argc, char **)
{
    dw::Box b;
    return static_cast<int>(b.run(argc) + hdr_maybe(argc)) & 1;
}
