/* Names of the enums of gmp_trace.h, shared by every output, and its string copy. */
#include "gmp_trace.h"

#include <stdlib.h>
#include <string.h>

char *gmp_str_dup(gmp_str s)
{
    char *c = malloc((size_t)s.len + 1);
    if (!c)
        return NULL;
    if (s.len)
        memcpy(c, s.ptr, s.len);
    c[s.len] = 0;
    return c;
}

const char *gmp_rec_type_name(unsigned type)
{
    switch (type) {
    case GMP_REC_HEADER: return "header";
    case GMP_REC_STRING: return "string";
    case GMP_REC_DEVICE: return "device";
    case GMP_REC_THREAD: return "thread";
    case GMP_REC_MODULE: return "module";
    case GMP_REC_STACK: return "stack";
    case GMP_REC_RANGE: return "range";
    case GMP_REC_BUFFER: return "buffer";
    case GMP_REC_SYNC: return "sync";
    case GMP_REC_RANGE_PUSH: return "range_push";
    case GMP_REC_RANGE_POP: return "range_pop";
    case GMP_REC_RANGE_START: return "range_start";
    case GMP_REC_RANGE_END: return "range_end";
    case GMP_REC_MARK: return "mark";
    case GMP_REC_ALLOC: return "alloc";
    case GMP_REC_FREE: return "free";
    case GMP_REC_OOM: return "oom";
    case GMP_REC_POOL: return "pool";
    case GMP_REC_SAMPLE: return "sample";
    case GMP_REC_RESOURCE: return "resource";
    case GMP_REC_ALERT: return "alert";
    case GMP_REC_NOTICE: return "notice";
    case GMP_REC_LOST: return "lost";
    case GMP_REC_END: return "end";
    }
    return 0;
}

int gmp_rec_is_event(unsigned type)
{
    return (type >= GMP_REC_RANGE_PUSH && type <= GMP_REC_NOTICE) || type == GMP_REC_LOST ||
           type == GMP_REC_END;
}

static const char *const kind_names[GMP_MEM_KIND_COUNT] = {
    "unknown",     "device",          "async-pool", "vmm-physical", "vmm-mapping", "array",
    "pinned-host", "registered-host", "managed",    "static",       "nvtx-region", "va-reserve",
};

const char *gmp_mem_kind_name(unsigned kind)
{
    return kind < GMP_MEM_KIND_COUNT ? kind_names[kind] : "unknown";
}

int gmp_mem_kind_is_device(unsigned kind)
{
    return kind == GMP_MEM_DEVICE || kind == GMP_MEM_ASYNC_POOL || kind == GMP_MEM_VMM_PHYSICAL ||
           kind == GMP_MEM_ARRAY || kind == GMP_MEM_STATIC;
}

const char *gmp_lost_reason_name(unsigned reason)
{
    switch (reason) {
    case GMP_LOST_BUFFER_FULL: return "buffers full";
    case GMP_LOST_IO: return "trace write failed";
    case GMP_LOST_CUPTI_DROPPED: return "dropped by CUPTI";
    case GMP_LOST_REENTRANT: return "re-entrant call";
    case GMP_LOST_OTHER: return "other";
    }
    return "unknown";
}
