/* libFuzzer target for the Nsight Systems SQLite importer (formats/import/gmp_import_nsys.h): an
 * export is a file someone sends, so every table, column, type and value in it is untrusted.
 *
 * Two input modes, chosen by the first bytes:
 *  - an input that begins with the SQLite magic is the database file itself (SQLite's own parsing
 *    of a damaged file, then the importer on whatever it can read);
 *  - anything else is a program that builds an export with SQLite and then imports it, which takes
 *    the fuzzer straight to the importer's row processing: a first byte chooses which of the tables
 *    the importer reads exist (and whether optional columns of the memory table do), then each
 *    group of bytes inserts one row into one table, every column value typed by the input (NULL,
 *    a small or a full 64-bit integer, a real, a text, a blob). Enumeration tables receive the
 *    names nsys uses, so that the ids the rows refer to mean something.
 * The database is written to a private temporary file (SQLite resolves the path it opens, so a
 * memfd cannot stand in for it) and the trace to /dev/null. */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_import_nsys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char db_path[256];

static void remove_db(void)
{
    if (db_path[0])
        unlink(db_path);
}

static int write_db(const void *p, size_t n)
{
    if (!db_path[0]) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(db_path, sizeof db_path, "%s/gmp-fuzz-nsys-%ld.sqlite",
                 strlen(dir) < 200 ? dir : "/tmp", (long)getpid());
        atexit(remove_db);
    }
    int fd = open(db_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    close(fd);
    return 0;
}

static void import(void)
{
    int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (out < 0)
        return;
    gmp_import_nsys_stats st;
    char msg[512];
    (void)gmp_import_nsys(db_path, out, &st, msg, sizeof msg); /* closes out */
}

/* ---- structured mode ---- */

typedef struct in {
    const uint8_t *p, *end;
} in;

static unsigned u8(in *s)
{
    return s->p < s->end ? *s->p++ : 0;
}

static int64_t i64(in *s)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | u8(s);
    return (int64_t)v;
}

/* The tables the importer reads, with the columns nsys writes. */
typedef struct table {
    const char *name;
    const char *cols[18];
} table;

static const table tables[] = {
    {"CUDA_GPU_MEMORY_USAGE_EVENTS",
     {"start", "deviceId", "address", "bytes", "memKind", "memoryOperationType", "globalPid",
      "contextId", "pc", "name", "correlationId", "streamId", "localMemoryPoolAddress",
      "localMemoryPoolReleaseThreshold", "localMemoryPoolSize", "localMemoryPoolUtilizedSize",
      NULL}},
    {"CUPTI_ACTIVITY_KIND_RUNTIME",
     {"start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", NULL}},
    {"CUPTI_ACTIVITY_KIND_DRIVER",
     {"start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", NULL}},
    {"NVTX_EVENTS",
     {"start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid",
      "endGlobalTid", "textId", "domainId", NULL}},
    {"StringIds", {"id", "value", NULL}},
    {"ThreadNames", {"nameId", "priority", "globalTid", NULL}},
    {"TARGET_INFO_GPU",
     {"vmId", "id", "name", "totalMemory", "uuid", "computeMajor", "computeMinor", NULL}},
    {"PROCESSES", {"globalPid", "pid", "name", NULL}},
    {"ENUM_CUDA_MEM_KIND", {"id", "name", "label", NULL}},
    {"ENUM_CUDA_DEV_MEM_EVENT_OPER", {"id", "name", "label", NULL}},
    {"ENUM_NSYS_EVENT_TYPE", {"id", "name", "label", NULL}},
    {"TARGET_INFO_SYSTEM_ENV", {"name", "value", NULL}},
    {"TARGET_INFO_SESSION_START_TIME", {"utcEpochNs", NULL}},
};
#define NTABLES (sizeof tables / sizeof tables[0])

static const char *const names[] = {
    "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE",
    "CUDA_MEMOPR_MEMORY_KIND_PINNED",
    "CUDA_MEMOPR_MEMORY_KIND_DEVICE",
    "CUDA_MEMOPR_MEMORY_KIND_ARRAY",
    "CUDA_MEMOPR_MEMORY_KIND_MANAGED",
    "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC",
    "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC",
    "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN",
    "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION",
    "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION",
    "NvtxPushPopRange",
    "NvtxStartEndRange",
    "NvtxDomainCreate",
    "NvtxMark",
    "cudaMalloc_v3020",
    "cuMemAlloc_v2",
    "cudaMallocAsync_v11020",
    "cudaFree_v3020",
    "Hostname",
    "GPU-00112233-4455-6677-8899-aabbccddeeff",
};
#define NNAMES (sizeof names / sizeof names[0])

static void bind_value(sqlite3_stmt *st, int col, in *s)
{
    unsigned t = u8(s);
    switch (t % 8) {
    case 0: sqlite3_bind_null(st, col); break;
    case 1: sqlite3_bind_int64(st, col, (int64_t)(t >> 3)); break; /* 0..31: ids, enums */
    case 2: sqlite3_bind_int64(st, col, (int64_t)u8(s) - 128); break;
    case 3: sqlite3_bind_int64(st, col, i64(s)); break;
    case 4: {
        int64_t v = i64(s);
        double d;
        memcpy(&d, &v, sizeof d);
        sqlite3_bind_double(st, col, d);
        break;
    }
    case 5: sqlite3_bind_text(st, col, names[(t >> 3) % NNAMES], -1, SQLITE_STATIC); break;
    default: {
        size_t n = u8(s);
        if (n > (size_t)(s->end - s->p))
            n = (size_t)(s->end - s->p);
        if (t % 8 == 6)
            sqlite3_bind_text(st, col, (const char *)s->p, (int)n, SQLITE_TRANSIENT);
        else
            sqlite3_bind_blob(st, col, s->p, (int)n, SQLITE_TRANSIENT);
        s->p += n;
        break;
    }
    }
}

static int build(in *s, sqlite3 *db)
{
    unsigned present = u8(s) | u8(s) << 8; /* which tables exist */
    unsigned dropcols = u8(s);             /* optional memory columns left out */
    present |= 1;                          /* the memory table exists (mostly) ... */
    if ((dropcols & 0xc0) == 0xc0)         /* ... but not always */
        present &= ~1u;
    char sql[1024];
    sqlite3_exec(db, "PRAGMA page_size = 512; PRAGMA journal_mode = OFF", NULL, NULL, NULL);
    for (size_t t = 0; t < NTABLES; t++) {
        if (!(present & (1u << t)))
            continue;
        int k = snprintf(sql, sizeof sql, "CREATE TABLE %s (", tables[t].name);
        int first = 1;
        for (size_t c = 0; tables[t].cols[c]; c++) {
            /* the memory table's columns after the six required ones may be left out */
            if (t == 0 && c >= 6 && c - 6 < 8 && (dropcols & (1u << (c - 6))))
                continue;
            if (t == 0 && c < 6 && (dropcols & 0xc0) == 0x80 && c == (dropcols & 7u) % 6)
                continue; /* a required column missing */
            k += snprintf(sql + k, sizeof sql - (size_t)k, "%s%s", first ? "" : ", ",
                          tables[t].cols[c]);
            first = 0;
        }
        snprintf(sql + k, sizeof sql - (size_t)k, ")");
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            return -1;
    }
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    for (int rows = 0; s->p < s->end && rows < 4096; rows++) {
        size_t t = u8(s) % NTABLES;
        if (!(present & (1u << t)))
            continue;
        /* INSERT with the columns the table has, by name */
        sqlite3_stmt *cols = NULL;
        snprintf(sql, sizeof sql, "SELECT * FROM %s LIMIT 0", tables[t].name);
        if (sqlite3_prepare_v2(db, sql, -1, &cols, NULL) != SQLITE_OK)
            return -1;
        int n = sqlite3_column_count(cols);
        sqlite3_finalize(cols);
        int k = snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (", tables[t].name);
        for (int i = 0; i < n; i++)
            k += snprintf(sql + k, sizeof sql - (size_t)k, "%s?", i ? "," : "");
        snprintf(sql + k, sizeof sql - (size_t)k, ")");
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
            return -1;
        for (int i = 0; i < n; i++)
            bind_value(st, i + 1, s);
        sqlite3_step(st);
        sqlite3_finalize(st);
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= GMP_SQLITE_MAGIC_LEN && memcmp(data, GMP_SQLITE_MAGIC, GMP_SQLITE_MAGIC_LEN) == 0) {
        if (size <= (16u << 20) && write_db(data, size) == 0)
            import();
        return 0;
    }
    sqlite3 *db = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
        sqlite3_close(db);
        return 0;
    }
    in s = {data, data + size};
    if (build(&s, db) == 0) {
        sqlite3_int64 n = 0;
        unsigned char *img = sqlite3_serialize(db, "main", &n, 0);
        if (img && write_db(img, (size_t)n) == 0)
            import();
        sqlite3_free(img);
    }
    sqlite3_close(db);
    return 0;
}
