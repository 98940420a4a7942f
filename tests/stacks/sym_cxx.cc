// sym_cxx: C++ functions whose return addresses test_symbolize names (built -O1 -g as a shared
// library): a static member function of a class in a namespace, a function template inlined into
// another member function, and a C entry point for each. Their names must come out demangled and
// qualified, through DWARF (DW_AT_linkage_name) and through the ELF symbol table alone.
#include <stdint.h>

namespace
{
__attribute__((noinline)) uint64_t ret_addr()
{
    uint64_t a = (uint64_t)(uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return a;
}
} // namespace

namespace gmpt
{
struct Model {
    static uint64_t forward(int x);
    static uint64_t outer(int x);
    template <typename T> static inline __attribute__((always_inline)) uint64_t step(T x)
    {
        return ret_addr() + (uint64_t)(x & 0);
    }
};

__attribute__((noinline)) uint64_t Model::forward(int x)
{
    uint64_t a = ret_addr();
    __asm__ volatile("" ::: "memory");
    return a + (uint64_t)(x & 0);
}

__attribute__((noinline)) uint64_t Model::outer(int x)
{
    uint64_t a = step<int>(x);
    __asm__ volatile("" ::: "memory");
    return a;
}
} // namespace gmpt

extern "C" uint64_t gmpt_forward_addr(void)
{
    return gmpt::Model::forward(1);
}

extern "C" uint64_t gmpt_inlined_addr(void)
{
    return gmpt::Model::outer(2);
}
