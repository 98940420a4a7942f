/* gmp_import_nsys: Nsight Systems SQLite export -> gpumemprof trace (see gmp_import_nsys.h). */
#include "gmp_import_nsys.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_demangle.h"
#include "gmp_trace.h"
#include "gmp_writer.h"

#ifndef GMP_VERSION_STRING
#define GMP_VERSION_STRING "unknown"
#endif

#define MAX_DEPTH 1024       /* push/pop ranges open at once on one thread */
#define MAX_DOMAINS 4096     /* NVTX domains remembered by id */
#define MAX_PIDS 1024        /* processes whose threads are named */
#define SYNC_EVERY 4096      /* events between SYNC records */
#define MAX_VALUE (16 << 20) /* longest string or blob SQLite may hand us */

/* nsys serializes a thread as (vm << 48 | pid << 24 | tid) */
#define GID_PID(g) ((uint32_t)(((uint64_t)(g) >> 24) & 0xffffffu))
#define GID_TID(g) ((uint32_t)((uint64_t)(g)&0xffffffu))

int gmp_import_nsys_probe(const void *head, size_t n)
{
    return n >= GMP_SQLITE_MAGIC_LEN && memcmp(head, GMP_SQLITE_MAGIC, GMP_SQLITE_MAGIC_LEN) == 0;
}

/* ---- state ---- */

typedef struct frame {
    uint32_t range; /* path after the push */
    uint64_t seq;   /* identifies the push in the heap */
} frame;

typedef struct thr {
    uint32_t tid;
    gmp_wthread *wt;
    frame *stack;
    size_t depth, cap;
} thr;

enum { PEND_POP = 1, PEND_END = 2 };

typedef struct pend {
    uint64_t t;
    uint32_t tid;
    int kind;
    uint64_t key; /* POP: the push's seq; END: the range handle */
} pend;

typedef struct domain {
    int64_t id;
    uint32_t name; /* string id */
} domain;

typedef struct imp {
    sqlite3 *db;
    gmp_writer *w;
    char *msg;
    size_t msglen;
    gmp_import_nsys_stats st;
    thr *th;
    size_t nth, capth;
    pend *heap;
    size_t nheap, capheap;
    domain dom[MAX_DOMAINS];
    size_t ndom;
    uint64_t seq, events, last_t, synthetic_handle;
    unsigned mem_kind[64]; /* nsys memKind id -> gmp kind; UINT_MAX: unknown id */
    int op_alloc, op_free; /* memoryOperationType ids */
    int64_t ev_pushpop[2], ev_startend[2], ev_domain;
    uint32_t static_root, api_module_load, api_unrecorded;
} imp;

static gmp_err fail(imp *I, gmp_err e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static gmp_err fail(imp *I, gmp_err e, const char *fmt, ...)
{
    if (I->msg && I->msglen && !I->msg[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(I->msg, I->msglen, fmt, ap);
        va_end(ap);
    }
    return e;
}

static gmp_err sql_fail(imp *I, const char *what)
{
    return fail(I, GMP_ERR_FORMAT, "%s: %s", what, sqlite3_errmsg(I->db));
}

/* ---- schema ---- */

static int table_exists(imp *I, const char *name)
{
    sqlite3_stmt *s = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(I->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1", -1,
                           &s, NULL) == SQLITE_OK &&
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        found = 1;
    sqlite3_finalize(s);
    return found;
}

/* Non-zero when table (one of our constant names) has column col. */
static int has_column(imp *I, const char *table, const char *col)
{
    char sql[160];
    snprintf(sql, sizeof sql, "PRAGMA table_info(\"%s\")", table);
    sqlite3_stmt *s = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(I->db, sql, -1, &s, NULL) != SQLITE_OK)
        return 0;
    while (!found && sqlite3_step(s) == SQLITE_ROW) {
        const unsigned char *n = sqlite3_column_text(s, 1);
        if (n && strcmp((const char *)n, col) == 0)
            found = 1;
    }
    sqlite3_finalize(s);
    return found;
}

static uint32_t wstr(imp *I, const char *s, size_t n)
{
    if (n > GMP_MAX_STRING_BYTES)
        n = GMP_MAX_STRING_BYTES;
    return gmp_writer_string(I->w, s, n);
}

static uint32_t wcstr(imp *I, const char *s)
{
    return wstr(I, s, strlen(s));
}

/* Text of a column (NULL for NULL or a non-text value, *n its length). */
static const char *col_text(sqlite3_stmt *s, int i, size_t *n)
{
    if (sqlite3_column_type(s, i) != SQLITE_TEXT) {
        *n = 0;
        return NULL;
    }
    const char *p = (const char *)sqlite3_column_text(s, i);
    *n = p ? (size_t)sqlite3_column_bytes(s, i) : 0;
    return p;
}

static const char *const kind_names[] = {"PAGEABLE", "PINNED",        "DEVICE",         "ARRAY",
                                         "MANAGED",  "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN"};
static const unsigned kind_map[] = {GMP_MEM_UNKNOWN, GMP_MEM_PINNED_HOST, GMP_MEM_DEVICE,
                                    GMP_MEM_ARRAY,   GMP_MEM_MANAGED,     GMP_MEM_STATIC,
                                    GMP_MEM_MANAGED, GMP_MEM_UNKNOWN};
#define NKINDS (sizeof kind_names / sizeof kind_names[0])
#define KIND_STATIC_FLAG 0x100u /* in mem_kind[]: static memory named after its variable */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0 && (a == b || s[a - b - 1] == '_');
}

/* Enumerations: by name from the file's ENUM_* tables when present, else nsys's numbering. */
static void load_enums(imp *I)
{
    for (size_t i = 0; i < 64; i++)
        I->mem_kind[i] = i < NKINDS ? kind_map[i] : GMP_MEM_UNKNOWN;
    I->mem_kind[5] |= KIND_STATIC_FLAG;
    I->mem_kind[6] |= KIND_STATIC_FLAG;
    I->op_alloc = 0;
    I->op_free = 1;
    I->ev_pushpop[0] = 59;
    I->ev_pushpop[1] = 70;
    I->ev_startend[0] = 60;
    I->ev_startend[1] = 71;
    I->ev_domain = 75;
    sqlite3_stmt *s = NULL;
    if (table_exists(I, "ENUM_CUDA_MEM_KIND") &&
        sqlite3_prepare_v2(I->db, "SELECT id, name FROM ENUM_CUDA_MEM_KIND", -1, &s, NULL) ==
            SQLITE_OK) {
        unsigned m[64];
        for (size_t i = 0; i < 64; i++)
            m[i] = GMP_MEM_UNKNOWN;
        int any = 0;
        while (sqlite3_step(s) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(s, 0);
            const char *n = (const char *)sqlite3_column_text(s, 1);
            if (id < 0 || id >= 64 || !n)
                continue;
            for (size_t j = 0; j < NKINDS; j++) {
                if (ends_with(n, kind_names[j])) {
                    m[id] = kind_map[j] | ((j == 5 || j == 6) ? KIND_STATIC_FLAG : 0);
                    any = 1;
                    break;
                }
            }
        }
        if (any)
            memcpy(I->mem_kind, m, sizeof m);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (table_exists(I, "ENUM_CUDA_DEV_MEM_EVENT_OPER") &&
        sqlite3_prepare_v2(I->db, "SELECT id, name FROM ENUM_CUDA_DEV_MEM_EVENT_OPER", -1, &s,
                           NULL) == SQLITE_OK) {
        while (sqlite3_step(s) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(s, 0);
            const char *n = (const char *)sqlite3_column_text(s, 1);
            if (!n || id < 0 || id > 1000)
                continue;
            if (ends_with(n, "DEALLOCATION"))
                I->op_free = (int)id;
            else if (ends_with(n, "ALLOCATION"))
                I->op_alloc = (int)id;
        }
    }
    sqlite3_finalize(s);
    s = NULL;
    if (table_exists(I, "ENUM_NSYS_EVENT_TYPE") &&
        sqlite3_prepare_v2(I->db, "SELECT id, name FROM ENUM_NSYS_EVENT_TYPE", -1, &s, NULL) ==
            SQLITE_OK) {
        while (sqlite3_step(s) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(s, 0);
            const char *n = (const char *)sqlite3_column_text(s, 1);
            if (!n)
                continue;
            if (strcmp(n, "NvtxPushPopRange") == 0)
                I->ev_pushpop[0] = id;
            else if (strcmp(n, "NvtxtPushPopRange") == 0)
                I->ev_pushpop[1] = id;
            else if (strcmp(n, "NvtxStartEndRange") == 0)
                I->ev_startend[0] = id;
            else if (strcmp(n, "NvtxtStartEndRange") == 0)
                I->ev_startend[1] = id;
            else if (strcmp(n, "NvtxDomainCreate") == 0)
                I->ev_domain = id;
        }
    }
    sqlite3_finalize(s);
}

/* ---- threads, ranges and the pending pops ---- */

static thr *thread_get(imp *I, uint32_t tid)
{
    size_t lo = 0, hi = I->nth;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (I->th[mid].tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < I->nth && I->th[lo].tid == tid)
        return &I->th[lo];
    if (I->nth == I->capth) {
        size_t nc = I->capth ? I->capth * 2 : 16;
        thr *p = realloc(I->th, nc * sizeof *p);
        if (!p)
            return NULL;
        I->th = p;
        I->capth = nc;
    }
    gmp_wthread *wt = gmp_writer_thread(I->w, tid);
    if (!wt)
        return NULL;
    memmove(&I->th[lo + 1], &I->th[lo], (I->nth - lo) * sizeof *I->th);
    I->nth++;
    memset(&I->th[lo], 0, sizeof I->th[lo]);
    I->th[lo].tid = tid;
    I->th[lo].wt = wt;
    return &I->th[lo];
}

static int pend_less(const pend *a, const pend *b)
{
    return a->t < b->t;
}

static int heap_push(imp *I, pend p)
{
    if (I->nheap == I->capheap) {
        size_t nc = I->capheap ? I->capheap * 2 : 64;
        pend *q = realloc(I->heap, nc * sizeof *q);
        if (!q)
            return -1;
        I->heap = q;
        I->capheap = nc;
    }
    size_t i = I->nheap++;
    I->heap[i] = p;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pend_less(&I->heap[i], &I->heap[up]))
            break;
        pend tmp = I->heap[i];
        I->heap[i] = I->heap[up];
        I->heap[up] = tmp;
        i = up;
    }
    return 0;
}

static pend heap_pop(imp *I)
{
    pend top = I->heap[0];
    I->heap[0] = I->heap[--I->nheap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < I->nheap && pend_less(&I->heap[l], &I->heap[m]))
            m = l;
        if (r < I->nheap && pend_less(&I->heap[r], &I->heap[m]))
            m = r;
        if (m == i)
            break;
        pend tmp = I->heap[i];
        I->heap[i] = I->heap[m];
        I->heap[m] = tmp;
        i = m;
    }
    return top;
}

static gmp_err emit(imp *I, thr *t, gmp_rec *r)
{
    if (r->time_ns == 0)
        r->time_ns = 1; /* 0 means "now" to the writer */
    if (gmp_wthread_event(t->wt, r) != 0)
        return fail(I, GMP_ERR_IO, "cannot write the trace (out of memory or disk full)");
    I->last_t = r->time_ns;
    if (++I->events % SYNC_EVERY == 0)
        gmp_writer_sync(I->w, I->last_t);
    return GMP_OK;
}

static gmp_err emit_range(imp *I, thr *t, uint32_t type, uint64_t time, uint32_t range,
                          uint64_t handle)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.time_ns = time;
    r.u.rev.range = range;
    r.u.rev.handle = handle;
    return emit(I, t, &r);
}

/* Emits the pops and ends due at or before limit (strictly before when strict). */
static gmp_err flush_pending(imp *I, uint64_t limit, int strict)
{
    while (I->nheap && (strict ? I->heap[0].t < limit : I->heap[0].t <= limit)) {
        pend p = heap_pop(I);
        thr *t = thread_get(I, p.tid);
        if (!t)
            return fail(I, GMP_ERR_NOMEM, "out of memory");
        gmp_err e = GMP_OK;
        if (p.kind == PEND_END) {
            e = emit_range(I, t, GMP_REC_RANGE_END, p.t, 0, p.key);
        } else {
            size_t d = t->depth;
            while (d > 0 && t->stack[d - 1].seq != p.key)
                d--;
            if (d == 0)
                continue; /* closed already, under an outer range that ended first */
            /* the push and every range above it (ends recorded out of nesting order) */
            while (e == GMP_OK && t->depth >= d) {
                frame *f = &t->stack[--t->depth];
                e = emit_range(I, t, GMP_REC_RANGE_POP, p.t, f->range, 0);
            }
        }
        if (e != GMP_OK)
            return e;
    }
    return GMP_OK;
}

/* ---- definitions ---- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "GPU-cf06906f-2083-..." or "cf06906f2083..." -> 16 bytes; zeros when malformed. */
static void parse_uuid(const char *s, size_t n, uint8_t out[16])
{
    memset(out, 0, 16);
    if (!s)
        return;
    if (n >= 4 && strncmp(s, "GPU-", 4) == 0) {
        s += 4;
        n -= 4;
    }
    uint8_t u[16];
    size_t k = 0;
    int hi = -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '-')
            continue;
        int v = hexval((unsigned char)s[i]);
        if (v < 0 || k >= 16)
            return;
        if (hi < 0) {
            hi = v;
        } else {
            u[k++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    if (k == 16 && hi < 0)
        memcpy(out, u, 16);
}

static gmp_err define_devices(imp *I)
{
    const char *T = "TARGET_INFO_GPU";
    if (!table_exists(I, T) || !has_column(I, T, "id"))
        return GMP_OK;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT id, %s, %s, %s, %s, %s FROM TARGET_INFO_GPU ORDER BY id",
             has_column(I, T, "name") ? "name" : "NULL",
             has_column(I, T, "totalMemory") ? "totalMemory" : "NULL",
             has_column(I, T, "uuid") ? "uuid" : "NULL",
             has_column(I, T, "computeMajor") ? "computeMajor" : "NULL",
             has_column(I, T, "computeMinor") ? "computeMinor" : "NULL");
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(I->db, sql, -1, &s, NULL) != SQLITE_OK)
        return sql_fail(I, "TARGET_INFO_GPU");
    int64_t prev = -1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (sqlite3_column_type(s, 0) != SQLITE_INTEGER)
            continue;
        int64_t id = sqlite3_column_int64(s, 0);
        if (id < 0 || id > INT32_MAX || id == prev)
            continue; /* one record per device (several VMs: the first) */
        prev = id;
        gmp_rec d;
        memset(&d, 0, sizeof d);
        d.type = GMP_REC_DEVICE;
        d.u.device.id = (uint32_t)id;
        size_t n;
        const char *name = col_text(s, 1, &n);
        if (n > 1024)
            n = 1024;
        d.u.device.name = (gmp_str){name ? name : "", (uint32_t)n};
        int64_t total = sqlite3_column_int64(s, 2);
        d.u.device.total_bytes = total > 0 ? (uint64_t)total : 0;
        const char *uuid = col_text(s, 3, &n);
        parse_uuid(uuid, n, d.u.device.uuid);
        int64_t ma = sqlite3_column_int64(s, 4), mi = sqlite3_column_int64(s, 5);
        d.u.device.cc_major = ma > 0 && ma < 1000 ? (uint32_t)ma : 0;
        d.u.device.cc_minor = mi > 0 && mi < 1000 ? (uint32_t)mi : 0;
        if (gmp_writer_define(I->w, &d) != GMP_OK) {
            sqlite3_finalize(s);
            return fail(I, GMP_ERR_IO, "cannot write the trace");
        }
        I->st.devices++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return sql_fail(I, "TARGET_INFO_GPU");
    return GMP_OK;
}

/* THREAD records for the threads of the processes in pids[0..npids). */
static gmp_err define_threads(imp *I, const uint32_t *pids, size_t npids)
{
    if (!npids || !table_exists(I, "ThreadNames") || !table_exists(I, "StringIds") ||
        !has_column(I, "ThreadNames", "nameId") || !has_column(I, "ThreadNames", "globalTid"))
        return GMP_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(I->db,
                           "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON "
                           "s.id = t.nameId ORDER BY t.rowid",
                           -1, &s, NULL) != SQLITE_OK)
        return sql_fail(I, "ThreadNames");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (sqlite3_column_type(s, 0) != SQLITE_INTEGER)
            continue;
        int64_t g = sqlite3_column_int64(s, 0);
        uint32_t pid = GID_PID(g);
        size_t k = 0;
        while (k < npids && pids[k] != pid)
            k++;
        if (k == npids)
            continue;
        size_t n;
        const char *name = col_text(s, 1, &n);
        if (!name)
            continue;
        if (n > 1024)
            n = 1024;
        gmp_rec d;
        memset(&d, 0, sizeof d);
        d.type = GMP_REC_THREAD;
        d.u.thread.tid = GID_TID(g);
        d.u.thread.name = (gmp_str){name, (uint32_t)n};
        if (gmp_writer_define(I->w, &d) != GMP_OK) {
            sqlite3_finalize(s);
            return fail(I, GMP_ERR_IO, "cannot write the trace");
        }
        I->st.threads++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return sql_fail(I, "ThreadNames");
    return GMP_OK;
}

static gmp_err load_domains(imp *I)
{
    if (!table_exists(I, "NVTX_EVENTS") || !has_column(I, "NVTX_EVENTS", "domainId") ||
        !has_column(I, "NVTX_EVENTS", "text"))
        return GMP_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(I->db,
                           "SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = ?1 AND "
                           "domainId IS NOT NULL AND text IS NOT NULL",
                           -1, &s, NULL) != SQLITE_OK)
        return sql_fail(I, "NVTX_EVENTS");
    sqlite3_bind_int64(s, 1, I->ev_domain);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && I->ndom < MAX_DOMAINS) {
        size_t n;
        const char *t = col_text(s, 1, &n);
        if (!t || !n)
            continue;
        uint32_t id = wstr(I, t, n);
        if (!id)
            return fail(I, GMP_ERR_NOMEM, "out of memory");
        I->dom[I->ndom].id = sqlite3_column_int64(s, 0);
        I->dom[I->ndom].name = id;
        I->ndom++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return sql_fail(I, "NVTX_EVENTS");
    return GMP_OK;
}

static uint32_t domain_name(const imp *I, sqlite3_stmt *s, int col)
{
    if (sqlite3_column_type(s, col) != SQLITE_INTEGER)
        return 0;
    int64_t id = sqlite3_column_int64(s, col);
    for (size_t i = 0; i < I->ndom; i++)
        if (I->dom[i].id == id)
            return I->dom[i].name;
    return 0;
}

/* ---- the event query ---- */

/* Columns of the event query */
enum {
    C_T,
    C_SRC, /* 0 NVTX, 1 memory */
    C_END,
    C_GTID, /* thread (NVTX; memory: the API call's thread) */
    C_GPID, /* memory: process */
    C_DEV,
    C_ADDR,
    C_BYTES,
    C_KIND,
    C_OP, /* memory: operation type; NVTX: event type */
    C_NAME,
    C_CORR,
    C_POOL,
    C_POOLSIZE,
    C_STREAM,
    C_API,
    C_ENDTID,
    C_DOMAIN,
    C_RANGEID,
};

static char *build_query(imp *I)
{
    const char *M = "CUDA_GPU_MEMORY_USAGE_EVENTS";
    int has_corr = has_column(I, M, "correlationId");
    int has_gpid = has_column(I, M, "globalPid");
    int has_str = table_exists(I, "StringIds");
    const char *api_tables[] = {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"};
    char corr_src[512] = "";
    for (size_t i = 0; i < 2 && has_corr; i++) {
        const char *T = api_tables[i];
        if (!table_exists(I, T) || !has_column(I, T, "correlationId") ||
            !has_column(I, T, "globalTid") || !has_column(I, T, "nameId"))
            continue;
        size_t l = strlen(corr_src);
        snprintf(corr_src + l, sizeof corr_src - l,
                 "%sSELECT correlationId, globalTid, nameId FROM %s", l ? " UNION ALL " : "", T);
    }
    size_t cap = 8192;
    char *q = malloc(cap);
    if (!q)
        return NULL;
    int n = 0;
    if (corr_src[0])
        n += snprintf(q + n, cap - (size_t)n,
                      "WITH corrmap AS (SELECT r.correlationId AS corr, "
                      "(r.globalTid >> 24) & 16777215 AS pid, min(r.globalTid) AS gtid, "
                      "min(%s) AS api FROM (%s) r %s WHERE r.correlationId IN "
                      "(SELECT correlationId FROM %s WHERE correlationId != 0) "
                      "GROUP BY corr, pid) ",
                      has_str ? "s.value" : "NULL", corr_src,
                      has_str ? "LEFT JOIN StringIds s ON s.id = r.nameId" : "", M);
    char mp[64];
    snprintf(mp, sizeof mp, "%s", has_gpid ? "((m.globalPid >> 24) & 16777215)" : "NULL");
    n += snprintf(
        q + n, cap - (size_t)n,
        "SELECT * FROM (SELECT m.start AS t, 1 AS src, NULL AS e, %s AS gtid, %s AS gpid, "
        "m.deviceId, m.address, m.bytes, m.memKind, m.memoryOperationType, %s, %s, %s, "
        "%s, %s, %s, NULL, NULL, NULL FROM %s m %s",
        corr_src[0] ? "c.gtid" : "NULL", has_gpid ? "m.globalPid" : "NULL",
        has_column(I, M, "name") ? "m.name" : "NULL", has_corr ? "m.correlationId" : "NULL",
        has_column(I, M, "localMemoryPoolAddress") ? "m.localMemoryPoolAddress" : "NULL",
        has_column(I, M, "localMemoryPoolSize") ? "m.localMemoryPoolSize" : "NULL",
        has_column(I, M, "streamId") ? "m.streamId" : "NULL", corr_src[0] ? "c.api" : "NULL", M,
        corr_src[0] ? "LEFT JOIN corrmap c ON c.corr = m.correlationId AND "
                      "m.correlationId != 0 AND (c.pid = "
                    : "");
    if (corr_src[0])
        n += snprintf(q + n, cap - (size_t)n, "%s OR %s IS NULL)", mp, mp);
    const char *N = "NVTX_EVENTS";
    if (table_exists(I, N) && has_column(I, N, "start") && has_column(I, N, "end") &&
        has_column(I, N, "eventType") && has_column(I, N, "globalTid")) {
        int tx = has_column(I, N, "textId") && has_str;
        n += snprintf(
            q + n, cap - (size_t)n,
            " UNION ALL SELECT n.start, 0, n.end, n.globalTid, NULL, NULL, NULL, NULL, NULL, "
            "n.eventType, %s, NULL, NULL, NULL, NULL, NULL, %s, %s, %s FROM NVTX_EVENTS n %s "
            "WHERE n.eventType IN (%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ")",
            has_column(I, N, "text") ? (tx ? "COALESCE(n.text, s.value)" : "n.text")
                                     : (tx ? "s.value" : "NULL"),
            has_column(I, N, "endGlobalTid") ? "n.endGlobalTid" : "NULL",
            has_column(I, N, "domainId") ? "n.domainId" : "NULL",
            has_column(I, N, "rangeId") ? "n.rangeId" : "NULL",
            tx ? "LEFT JOIN StringIds s ON s.id = n.textId" : "", I->ev_pushpop[0],
            I->ev_pushpop[1], I->ev_startend[0], I->ev_startend[1]);
    }
    n += snprintf(q + n, cap - (size_t)n, ") ORDER BY t, src, e DESC");
    if (n < 0 || (size_t)n >= cap) {
        free(q);
        return NULL;
    }
    return q;
}

static int is_int(sqlite3_stmt *s, int c)
{
    return sqlite3_column_type(s, c) == SQLITE_INTEGER;
}

static uint64_t opt_u64(sqlite3_stmt *s, int c)
{
    return is_int(s, c) ? (uint64_t)sqlite3_column_int64(s, c) : 0;
}

/* The API of a row: its call's name; with none, static memory (kinds DEVICE_STATIC and
 * MANAGED_STATIC, flagged in mem_kind[]) was made by a module load, other rows by no call on
 * record. */
static uint32_t api_string(imp *I, sqlite3_stmt *s, unsigned km)
{
    size_t n;
    const char *a = col_text(s, C_API, &n);
    if (!a || !n)
        return km & KIND_STATIC_FLAG ? I->api_module_load : I->api_unrecorded;
    /* "cudaMalloc_v3020" -> "cudaMalloc": CUPTI's callback names carry the version */
    size_t k = n;
    while (k > 0 && a[k - 1] >= '0' && a[k - 1] <= '9')
        k--;
    if (k < n && k >= 3 && a[k - 1] == 'v' && a[k - 2] == '_')
        n = k - 2;
    return wstr(I, a, n);
}

static gmp_err on_memory(imp *I, sqlite3_stmt *s, uint64_t row)
{
    int cols[] = {C_T, C_DEV, C_ADDR, C_BYTES, C_KIND, C_OP};
    const char *names[] = {"start", "deviceId", "address",
                           "bytes", "memKind",  "memoryOperationType"};
    for (size_t i = 0; i < 6; i++)
        if (!is_int(s, cols[i]))
            return fail(I, GMP_ERR_FORMAT,
                        "CUDA_GPU_MEMORY_USAGE_EVENTS row %" PRIu64 ": %s is not an integer", row,
                        names[i]);
    int64_t t = sqlite3_column_int64(s, C_T), dev = sqlite3_column_int64(s, C_DEV);
    int64_t bytes = sqlite3_column_int64(s, C_BYTES), kid = sqlite3_column_int64(s, C_KIND);
    int64_t op = sqlite3_column_int64(s, C_OP);
    I->st.memory_records++;
    if (t < 0 || bytes < 0 || dev < -1 || dev > INT32_MAX ||
        (op != I->op_alloc && op != I->op_free)) {
        I->st.skipped++;
        return GMP_OK;
    }
    unsigned km = kid >= 0 && kid < 64 ? I->mem_kind[kid] : GMP_MEM_UNKNOWN;
    unsigned kind = km & 0xffu;
    /* deviceId is the device of the context that made the call (CUPTI's CUpti_ActivityMemory4,
     * which nsys exports here: "the ID of the device where the memory operation is taking
     * place"); pinned memory (CUDA_MEMOPR_MEMORY_KIND_PINNED, CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
     * cudaMallocHost, cudaHostAlloc) is page-locked host memory, which gpumemprof's own traces
     * book on the host (device -1, docs/trace-format.md), not on that device */
    if (kind == GMP_MEM_PINNED_HOST)
        dev = -1;
    uint64_t pool = opt_u64(s, C_POOL);
    if (kind == GMP_MEM_DEVICE && pool)
        kind = GMP_MEM_ASYNC_POOL;
    thr *th;
    uint32_t range = 0;
    if (is_int(s, C_GTID)) {
        th = thread_get(I, GID_TID(sqlite3_column_int64(s, C_GTID)));
        if (th && th->depth)
            range = th->stack[th->depth - 1].range;
        I->st.with_api++;
    } else {
        /* no API call on record (static memory, module loads): the process's main thread */
        th = thread_get(I, is_int(s, C_GPID) ? GID_PID(sqlite3_column_int64(s, C_GPID)) : 0);
    }
    if (!th)
        return fail(I, GMP_ERR_NOMEM, "out of memory");
    if (km & KIND_STATIC_FLAG) {
        /* the variable's symbol, a C++ one demangled as native frames are
         * ("_ZN6cublas8internal15deviceConstantsE" is "cublas::internal::deviceConstants") */
        size_t n;
        const char *name = col_text(s, C_NAME, &n);
        char *d = name && n && strlen(name) == n ? gmp_demangle(name) : NULL;
        if (d) {
            name = d;
            n = strlen(d);
        }
        uint32_t sid = name && n ? wstr(I, name, n) : 0;
        free(d);
        range = name && n ? gmp_writer_range(I->w, I->static_root, 0, sid) : I->static_root;
    }
    uint64_t time = (uint64_t)t;
    if (kind == GMP_MEM_ASYNC_POOL && is_int(s, C_POOLSIZE) && op == I->op_alloc) {
        gmp_rec p;
        memset(&p, 0, sizeof p);
        p.type = GMP_REC_POOL;
        p.time_ns = time;
        p.u.pool.device = (int32_t)dev;
        p.u.pool.op = GMP_POOL_RESERVED;
        p.u.pool.pool = pool;
        p.u.pool.value = opt_u64(s, C_POOLSIZE);
        gmp_err e = emit(I, th, &p);
        if (e != GMP_OK)
            return e;
    }
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = op == I->op_alloc ? GMP_REC_ALLOC : GMP_REC_FREE;
    r.time_ns = time;
    r.u.mem.device = (int32_t)dev;
    r.u.mem.kind = kind;
    r.u.mem.flags = GMP_MEMF_ACTIVITY;
    r.u.mem.api = api_string(I, s, km);
    r.u.mem.address = (uint64_t)sqlite3_column_int64(s, C_ADDR);
    r.u.mem.size = (uint64_t)bytes;
    r.u.mem.stream = opt_u64(s, C_STREAM);
    r.u.mem.range = range;
    r.u.mem.correlation = opt_u64(s, C_CORR);
    r.u.mem.handle = kind == GMP_MEM_ASYNC_POOL ? pool : 0;
    if (r.type == GMP_REC_ALLOC)
        I->st.allocs++;
    else
        I->st.frees++;
    return emit(I, th, &r);
}

static gmp_err on_nvtx(imp *I, sqlite3_stmt *s)
{
    if (!is_int(s, C_T) || !is_int(s, C_GTID) || sqlite3_column_int64(s, C_T) < 0) {
        I->st.skipped++;
        return GMP_OK;
    }
    uint64_t t = (uint64_t)sqlite3_column_int64(s, C_T);
    int64_t type = sqlite3_column_int64(s, C_OP);
    int has_end = is_int(s, C_END) && sqlite3_column_int64(s, C_END) >= (int64_t)t;
    uint64_t end = has_end ? (uint64_t)sqlite3_column_int64(s, C_END) : 0;
    thr *th = thread_get(I, GID_TID(sqlite3_column_int64(s, C_GTID)));
    if (!th)
        return fail(I, GMP_ERR_NOMEM, "out of memory");
    size_t n;
    const char *text = col_text(s, C_NAME, &n);
    uint32_t name = text && n ? wstr(I, text, n) : wcstr(I, "(unnamed)");
    uint32_t dom = domain_name(I, s, C_DOMAIN);
    if (type == I->ev_pushpop[0] || type == I->ev_pushpop[1]) {
        if (th->depth >= MAX_DEPTH) {
            I->st.skipped++;
            return GMP_OK;
        }
        if (th->depth == th->cap) {
            size_t nc = th->cap ? th->cap * 2 : 8;
            frame *p = realloc(th->stack, nc * sizeof *p);
            if (!p)
                return fail(I, GMP_ERR_NOMEM, "out of memory");
            th->stack = p;
            th->cap = nc;
        }
        uint32_t parent = th->depth ? th->stack[th->depth - 1].range : 0;
        uint32_t range = gmp_writer_range(I->w, parent, dom, name);
        if (!range)
            return fail(I, GMP_ERR_NOMEM, "out of memory");
        uint64_t seq = ++I->seq;
        th->stack[th->depth++] = (frame){range, seq};
        I->st.range_pushes++;
        if (has_end && heap_push(I, (pend){end, th->tid, PEND_POP, seq}) != 0)
            return fail(I, GMP_ERR_NOMEM, "out of memory");
        return emit_range(I, th, GMP_REC_RANGE_PUSH, t, range, 0);
    }
    /* start/end */
    uint32_t node = gmp_writer_range(I->w, 0, dom, name);
    if (!node)
        return fail(I, GMP_ERR_NOMEM, "out of memory");
    uint64_t handle = is_int(s, C_RANGEID) ? (uint64_t)sqlite3_column_int64(s, C_RANGEID)
                                           : (1ull << 62) + ++I->synthetic_handle;
    uint32_t etid = is_int(s, C_ENDTID) ? GID_TID(sqlite3_column_int64(s, C_ENDTID)) : th->tid;
    I->st.range_starts++;
    if (has_end && heap_push(I, (pend){end, etid, PEND_END, handle}) != 0)
        return fail(I, GMP_ERR_NOMEM, "out of memory");
    return emit_range(I, th, GMP_REC_RANGE_START, t, node, handle);
}

static gmp_err import_events(imp *I)
{
    char *q = build_query(I);
    if (!q)
        return fail(I, GMP_ERR_NOMEM, "out of memory");
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(I->db, q, -1, &s, NULL);
    free(q);
    if (rc != SQLITE_OK)
        return sql_fail(I, "cannot query the events");
    gmp_err e = GMP_OK;
    uint64_t row = 0;
    while (e == GMP_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        row++;
        int nvtx = sqlite3_column_int64(s, C_SRC) == 0;
        if (is_int(s, C_T) && sqlite3_column_int64(s, C_T) >= 0)
            e = flush_pending(I, (uint64_t)sqlite3_column_int64(s, C_T), !nvtx);
        if (e == GMP_OK)
            e = nvtx ? on_nvtx(I, s) : on_memory(I, s, row);
    }
    if (e == GMP_OK && rc != SQLITE_DONE)
        e = sql_fail(I, "cannot read the events");
    sqlite3_finalize(s);
    if (e == GMP_OK)
        e = flush_pending(I, UINT64_MAX, 0);
    return e;
}

/* ---- header ---- */

static char *query_text(imp *I, const char *sql, int64_t arg)
{
    sqlite3_stmt *s = NULL;
    char *out = NULL;
    if (sqlite3_prepare_v2(I->db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_bind_parameter_count(s) >= 1)
            sqlite3_bind_int64(s, 1, arg);
        if (sqlite3_step(s) == SQLITE_ROW) {
            size_t n;
            const char *t = col_text(s, 0, &n);
            if (t) {
                if (n > 4096)
                    n = 4096;
                out = malloc(n + 1);
                if (out) {
                    memcpy(out, t, n);
                    out[n] = 0;
                }
            }
        }
    }
    sqlite3_finalize(s);
    return out;
}

static int64_t query_int(imp *I, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(I->db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW && is_int(s, 0))
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Processes that have memory events (at most MAX_PIDS). */
static size_t load_pids(imp *I, uint32_t *pids)
{
    if (!has_column(I, "CUDA_GPU_MEMORY_USAGE_EVENTS", "globalPid"))
        return 0;
    sqlite3_stmt *s = NULL;
    size_t n = 0;
    if (sqlite3_prepare_v2(
            I->db,
            "SELECT (globalPid >> 24) & 16777215 AS p FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
            "WHERE typeof(globalPid) = 'integer' GROUP BY p ORDER BY min(rowid)",
            -1, &s, NULL) != SQLITE_OK)
        return 0;
    while (n < MAX_PIDS && sqlite3_step(s) == SQLITE_ROW)
        pids[n++] = (uint32_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

/* ---- entry point ---- */

static gmp_err open_db(imp *I, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(I, GMP_ERR_IO, "%s", strerror(errno));
    unsigned char head[GMP_SQLITE_MAGIC_LEN];
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got < 0)
        return fail(I, GMP_ERR_IO, "%s", strerror(errno));
    if (!gmp_import_nsys_probe(head, (size_t)got))
        return fail(I, GMP_ERR_FORMAT, "not an SQLite database");
    if (sqlite3_open_v2(path, &I->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK)
        return fail(I, GMP_ERR_IO, "cannot open: %s", I->db ? sqlite3_errmsg(I->db) : "no memory");
    /* untrusted file: no triggers, no views, no functions with side effects from its schema */
    sqlite3_db_config(I->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(I->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
#ifdef SQLITE_DBCONFIG_ENABLE_VIEW
    sqlite3_db_config(I->db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, NULL);
#endif
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(I->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
#endif
    sqlite3_limit(I->db, SQLITE_LIMIT_LENGTH, MAX_VALUE);
    sqlite3_limit(I->db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_exec(I->db, "PRAGMA query_only = 1; PRAGMA cell_size_check = 1", NULL, NULL, NULL);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(I->db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return fail(I, GMP_ERR_FORMAT, "not a readable SQLite database: %s", sqlite3_errmsg(I->db));
    const char *M = "CUDA_GPU_MEMORY_USAGE_EVENTS";
    if (!table_exists(I, M))
        return fail(I, GMP_ERR_FORMAT,
                    "not an Nsight Systems export with memory events: table %s is missing (record "
                    "with `nsys profile --cuda-memory-usage=true`, export with `nsys export --type "
                    "sqlite`)",
                    M);
    const char *req[] = {"start", "deviceId", "address", "bytes", "memKind", "memoryOperationType"};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (!has_column(I, M, req[i]))
            return fail(I, GMP_ERR_FORMAT, "unexpected schema: table %s has no column %s", M,
                        req[i]);
    return GMP_OK;
}

gmp_err gmp_import_nsys(const char *in_path, int out_fd, gmp_import_nsys_stats *stats, char *msg,
                        size_t msglen)
{
    imp *I = calloc(1, sizeof *I);
    if (msg && msglen)
        msg[0] = 0;
    if (!I) {
        close(out_fd);
        if (msg && msglen)
            snprintf(msg, msglen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    I->msg = msg;
    I->msglen = msglen;
    gmp_err e = open_db(I, in_path);
    if (e != GMP_OK) {
        close(out_fd);
        goto done;
    }
    load_enums(I);

    uint32_t pids[MAX_PIDS];
    size_t npids = load_pids(I, pids);
    char *host = table_exists(I, "TARGET_INFO_SYSTEM_ENV")
                     ? query_text(I,
                                  "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = "
                                  "'Hostname' LIMIT 1",
                                  0)
                     : NULL;
    char *cmd = npids && table_exists(I, "PROCESSES")
                    ? query_text(I, "SELECT name FROM PROCESSES WHERE pid = ?1 LIMIT 1", pids[0])
                    : NULL;
    int64_t wall = table_exists(I, "TARGET_INFO_SESSION_START_TIME")
                       ? query_int(I, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
                       : 0;
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    const char *producer = "gpumemprof " GMP_VERSION_STRING " import nsys";
    h.producer = (gmp_str){producer, (uint32_t)strlen(producer)};
    h.pid = npids ? pids[0] : 0;
    h.hostname = (gmp_str){host ? host : "", host ? (uint32_t)strlen(host) : 0};
    h.cmdline = (gmp_str){cmd ? cmd : "", cmd ? (uint32_t)strlen(cmd) : 0};
    h.rank = -1;
    h.local_rank = -1;
    h.start_wall_ns = wall > 0 ? (uint64_t)wall : 0;
    h.start_trace_ns = 0;
    h.clock = (gmp_str){"nsys session (ns since capture start)", 37};
    h.options = (gmp_str){"import=nsys", 11};
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    o.level = 3;
    e = gmp_writer_open(&I->w, out_fd, &o, &h);
    free(host);
    free(cmd);
    if (e != GMP_OK) {
        fail(I, e, "cannot start the trace: %s", gmp_err_str(e));
        goto done;
    }
    I->api_module_load = wcstr(I, GMP_API_MODULE_LOAD);
    I->api_unrecorded = wcstr(I, GMP_API_UNRECORDED);
    I->static_root = gmp_writer_range(I->w, 0, 0, wcstr(I, "[static]"));
    if (!I->api_module_load || !I->api_unrecorded || !I->static_root) {
        e = fail(I, GMP_ERR_NOMEM, "out of memory");
        goto done;
    }
    e = define_devices(I);
    if (e == GMP_OK)
        e = define_threads(I, pids, npids);
    if (e == GMP_OK)
        e = load_domains(I);
    if (e == GMP_OK)
        e = import_events(I);
    if (e == GMP_OK)
        gmp_writer_sync(I->w, I->last_t);

done:
    if (I->w) {
        for (size_t i = 0; i < I->nth; i++)
            gmp_wthread_release(I->th[i].wt);
        gmp_writer_stats ws;
        gmp_err ce = gmp_writer_close(I->w, &ws);
        if (e == GMP_OK && ce != GMP_OK)
            e = fail(I, ce, "cannot write the trace: %s",
                     ws.io_errno ? strerror(ws.io_errno) : gmp_err_str(ce));
    }
    for (size_t i = 0; i < I->nth; i++)
        free(I->th[i].stack);
    free(I->th);
    free(I->heap);
    if (I->db)
        sqlite3_close(I->db);
    if (stats)
        *stats = I->st;
    free(I);
    return e;
}
