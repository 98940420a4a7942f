/* Helpers shared by the agent test programs: checked calls, and the lines a program prints on
 * stdout so that its test script can compare the trace with what the program saw (addresses,
 * handles). Programs print only to stdout through these; a failed check prints to stderr and
 * exits with status 1. */
#ifndef GMP_AGENT_TEST_PROG_UTIL_H
#define GMP_AGENT_TEST_PROG_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(expr, want)                                                                          \
    do {                                                                                           \
        long long got_ = (long long)(expr);                                                        \
        if (got_ != (long long)(want)) {                                                           \
            fprintf(stderr, "%s:%d: %s returned %lld, expected %lld\n", __FILE__, __LINE__, #expr, \
                    got_, (long long)(want));                                                      \
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

/* "A <label> 0x<value>": a value (address, handle) the test looks for in the trace. */
static inline void show(const char *label, uint64_t value)
{
    printf("A %s 0x%llx\n", label, (unsigned long long)value);
}

#define SHOWP(label, ptr) show(label, (uint64_t)(uintptr_t)(ptr))

#endif
