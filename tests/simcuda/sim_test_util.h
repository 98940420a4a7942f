/* Helpers shared by the simcuda test programs (C and CUDA C++). */
#ifndef SIMCUDA_SIM_TEST_UTIL_H
#define SIMCUDA_SIM_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(expr, want)                                                                          \
    do {                                                                                           \
        int got_ = (int)(expr);                                                                    \
        if (got_ != (int)(want)) {                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #expr,     \
                    got_, (int)(want));                                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
