/* nvtx_trace: decodes a whole trace file for the NVTX tests with zstd + gmp_decode only
 * (independent of gmp_reader), and resolves strings and range paths. Failures print a message
 * and exit(1). */
#ifndef NVTX_TRACE_H
#define NVTX_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmp_trace.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a,    \
                    a_, #b, b_);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0) {                                                                 \
            fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, a_,  \
                    b_);                                                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct ntrace {
    gmp_rec *recs; /* every record in file order; r->tid set from the enclosing BUFFER */
    size_t n;
    uint8_t *raw;
    gmp_str *strs; /* by string id */
    size_t nstrs;
    gmp_rec_range *ranges; /* by range id */
    size_t nranges;
    int has_end;
    gmp_rec_end end;
    uint64_t lost; /* sum of LOST counts */
} ntrace;

void ntrace_load(const char *path, ntrace *t);
void ntrace_free(ntrace *t);
/* The string with this id as a NUL-terminated copy (valid until ntrace_free); "" for 0. */
const char *ntrace_str(ntrace *t, uint32_t id);
/* Range path names joined with "/"; each node of a non-default domain is written "domain:name". */
const char *ntrace_path(ntrace *t, uint32_t id);
const gmp_rec_range *ntrace_range(ntrace *t, uint32_t id);

#endif
