/* gpumemprof dump: prints every record of a trace, one per line (text or JSON lines), then the
 * record counts and whether the trace is complete. See docs/cli-dump.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "gmp_escape.h"
#include "gmp_reader.h"
#include "gmp_trace.h"

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\ngpumemprof %s: %s.\n\n"
           "Prints the header, then every record of FILE on its own line, in time order (events\n"
           "of all threads merged), then the number of records of each type and a line that says\n"
           "whether the trace is complete or what was lost (a cut file, no END record, events the\n"
           "agent could not record).\n\n"
           "Text lines are `TIME_NS TID TYPE field=value ...`; definitions, which have no time,\n"
           "show `- -` instead. Ids are resolved where it helps (API names, range paths); strings\n"
           "are quoted and escaped as in JSON.\n\n" GMP_CLI_INPUT_HELP
           "A snapshot or an export is dumped as the trace it imports into.\n\n",
           cmd->name, cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 when the trace was read (also a cut one: what was lost is reported),\n"
           "1 when it cannot be read (not a trace, corrupt, I/O error), 2 for bad arguments.\n"
           "See docs/cli-dump.md for every record's fields.\n");
}

/* ---- one output line, as text or as JSON ---- */

typedef struct out {
    FILE *f;
    int json;
    const gmp_reader *r;
    char *path;      /* scratch for range paths */
    size_t path_cap; /* its capacity */
} out;

static void key(out *o, const char *k)
{
    if (o->json)
        fprintf(o->f, ",\"%s\":", k);
    else
        fprintf(o->f, " %s=", k);
}

static void f_u64(out *o, const char *k, uint64_t v)
{
    key(o, k);
    fprintf(o->f, "%" PRIu64, v);
}

static void f_s64(out *o, const char *k, int64_t v)
{
    key(o, k);
    fprintf(o->f, "%" PRId64, v);
}

/* Addresses and handles: hex in text, a hex string in JSON (JSON numbers lose 64-bit values). */
static void f_hex(out *o, const char *k, uint64_t v)
{
    key(o, k);
    fprintf(o->f, o->json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, v);
}

/* A string from the trace: always quoted and escaped. */
static void f_bytes(out *o, const char *k, const char *s, size_t n)
{
    key(o, k);
    gmp_json_fputs(o->f, s ? s : "", s ? n : 0);
}

static void f_str(out *o, const char *k, gmp_str s)
{
    f_bytes(o, k, s.ptr, s.len);
}

/* A word of this program's vocabulary (kind names...): bare in text, a string in JSON. */
static void f_word(out *o, const char *k, const char *w)
{
    key(o, k);
    if (o->json)
        gmp_json_fputs(o->f, w, strlen(w));
    else
        fputs(w, o->f);
}

static void f_bool(out *o, const char *k, int v)
{
    key(o, k);
    fputs(v ? "true" : "false", o->f);
}

/* A string id resolved to its value. */
static void f_strid(out *o, const char *k, uint32_t id)
{
    f_str(o, k, gmp_reader_string(o->r, id));
}

/* The path of a range id ("train/step/forward"). */
static void f_path(out *o, uint32_t id)
{
    size_t n = gmp_reader_range_path(o->r, id, o->path, o->path_cap);
    if (n >= o->path_cap) {
        char *p = realloc(o->path, n + 1);
        if (p) {
            o->path = p;
            o->path_cap = n + 1;
            n = gmp_reader_range_path(o->r, id, o->path, o->path_cap);
        } else {
            n = o->path_cap - 1; /* print the prefix that fitted */
        }
    }
    f_bytes(o, "path", o->path, n);
}

/* A range id and its path. */
static void f_range(out *o, uint32_t id)
{
    f_u64(o, "range", id);
    f_path(o, id);
}

static void begin(out *o, const gmp_rec *rec, const char *type)
{
    int ev = gmp_rec_is_event(rec->type);
    if (o->json) {
        fputs("{\"type\":", o->f);
        gmp_json_fputs(o->f, type, strlen(type));
        if (ev) {
            fprintf(o->f, ",\"t\":%" PRIu64 ",\"tid\":%" PRIu32, rec->time_ns, rec->tid);
        }
    } else if (ev) {
        fprintf(o->f, "%" PRIu64 " %" PRIu32 " %s", rec->time_ns, rec->tid, type);
    } else {
        fprintf(o->f, "- - %s", type);
    }
}

static void end_line(out *o)
{
    fputs(o->json ? "}\n" : "\n", o->f);
}

/* ---- names of enum values ---- */

static const char *pool_op_name(uint32_t op)
{
    switch (op) {
    case GMP_POOL_CREATE: return "create";
    case GMP_POOL_DESTROY: return "destroy";
    case GMP_POOL_TRIM: return "trim";
    case GMP_POOL_RESERVED: return "reserved";
    case GMP_POOL_THRESHOLD: return "threshold";
    }
    return NULL;
}

static const char *resource_op_name(uint32_t op)
{
    switch (op) {
    case GMP_RES_CONTEXT_CREATE: return "context-create";
    case GMP_RES_CONTEXT_DESTROY: return "context-destroy";
    case GMP_RES_STREAM_CREATE: return "stream-create";
    case GMP_RES_STREAM_DESTROY: return "stream-destroy";
    case GMP_RES_MODULE_LOAD: return "module-load";
    case GMP_RES_MODULE_UNLOAD: return "module-unload";
    }
    return NULL;
}

/* An enum value by name, or its number when this version has no name for it. */
static void f_enum(out *o, const char *k, const char *name, uint32_t v)
{
    if (name) {
        f_word(o, k, name);
    } else {
        char b[16];
        snprintf(b, sizeof b, "%" PRIu32, v);
        f_word(o, k, b);
    }
}

static void f_flags(out *o, uint32_t flags)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {{GMP_MEMF_ACTIVITY, "activity"},
                 {GMP_MEMF_ASYNC, "async"},
                 {GMP_MEMF_FAILED, "failed"},
                 {GMP_MEMF_IMPLICIT, "implicit"}};
    char b[96];
    size_t n = 0;
    b[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (flags & names[i].bit) {
            n += (size_t)snprintf(b + n, sizeof b - n, "%s%s", n ? "|" : "", names[i].name);
            flags &= ~names[i].bit;
        }
    }
    if (flags)
        n += (size_t)snprintf(b + n, sizeof b - n, "%s0x%" PRIx32, n ? "|" : "", flags);
    f_word(o, "flags", n ? b : "0");
}

static void f_uuid(out *o, const uint8_t u[16])
{
    char b[48];
    snprintf(b, sizeof b,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    f_word(o, "uuid", b);
}

/* The command line: NUL-separated arguments, shown as a JSON array in both forms. */
static void f_cmdline(out *o, gmp_str s)
{
    key(o, "cmdline");
    fputc('[', o->f);
    size_t start = 0, first = 1;
    for (size_t i = 0; i <= s.len; i++) {
        if (i == s.len || s.ptr[i] == '\0') {
            if (i == s.len && i == start && !first)
                break; /* a trailing NUL ends the last argument */
            if (i == s.len && s.len == 0)
                break;
            if (!first)
                fputc(',', o->f);
            gmp_json_fputs(o->f, s.ptr + start, i - start);
            first = 0;
            start = i + 1;
        }
    }
    fputc(']', o->f);
}

static void f_hexbytes(out *o, const char *k, gmp_str s)
{
    key(o, k);
    if (o->json)
        fputc('"', o->f);
    for (uint32_t i = 0; i < s.len; i++)
        fprintf(o->f, "%02x", (unsigned char)s.ptr[i]);
    if (o->json)
        fputc('"', o->f);
}

static void print_header(out *o, const gmp_rec_header *h)
{
    gmp_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.type = GMP_REC_HEADER;
    begin(o, &rec, "header");
    f_u64(o, "format_version", h->format_version);
    f_u64(o, "min_reader_version", h->min_reader_version);
    f_str(o, "producer", h->producer);
    f_u64(o, "pid", h->pid);
    f_u64(o, "ppid", h->ppid);
    f_str(o, "hostname", h->hostname);
    f_cmdline(o, h->cmdline);
    f_s64(o, "rank", h->rank);
    f_u64(o, "start_wall_ns", h->start_wall_ns);
    f_u64(o, "start_trace_ns", h->start_trace_ns);
    f_str(o, "clock", h->clock);
    f_str(o, "options", h->options);
    f_s64(o, "local_rank", h->local_rank);
    f_s64(o, "world_size", h->world_size);
    f_str(o, "rank_var", h->rank_var);
    end_line(o);
}

static void print_mem(out *o, const gmp_rec_mem *m)
{
    f_s64(o, "device", m->device);
    f_word(o, "kind", gmp_mem_kind_name(m->kind));
    f_flags(o, m->flags);
    f_strid(o, "api", m->api);
    f_hex(o, "address", m->address);
    f_u64(o, "size", m->size);
    f_u64(o, "stream", m->stream);
    f_u64(o, "stack", m->stack);
    f_range(o, m->range);
    f_u64(o, "correlation", m->correlation);
    f_s64(o, "result", m->result);
    f_hex(o, "handle", m->handle);
}

static void print_record(out *o, const gmp_rec *rec)
{
    const char *name = gmp_rec_type_name(rec->type);
    begin(o, rec, name ? name : "unknown");
    switch (rec->type) {
    case GMP_REC_STRING:
        f_u64(o, "id", rec->u.string.id);
        f_str(o, "value", rec->u.string.value);
        break;
    case GMP_REC_DEVICE: {
        const gmp_rec_device *d = &rec->u.device;
        f_u64(o, "ordinal", d->id);
        f_str(o, "name", d->name);
        f_uuid(o, d->uuid);
        f_u64(o, "total_bytes", d->total_bytes);
        char cc[32];
        snprintf(cc, sizeof cc, "%" PRIu32 ".%" PRIu32, d->cc_major, d->cc_minor);
        f_word(o, "cc", cc);
        break;
    }
    case GMP_REC_THREAD:
        f_u64(o, "tid", rec->u.thread.tid);
        f_str(o, "name", rec->u.thread.name);
        break;
    case GMP_REC_MODULE: {
        const gmp_rec_module *m = &rec->u.module;
        f_u64(o, "id", m->id);
        f_str(o, "path", m->path);
        f_hex(o, "base", m->base);
        f_hex(o, "lo", m->lo);
        f_u64(o, "size", m->size);
        f_hexbytes(o, "build_id", m->build_id);
        break;
    }
    case GMP_REC_STACK: {
        const gmp_rec_stack *s = &rec->u.stack;
        f_u64(o, "id", s->id);
        f_u64(o, "parent", s->parent);
        if (s->kind == GMP_FRAME_NATIVE) {
            f_word(o, "frame", "native");
            f_hex(o, "address", s->address);
        } else if (s->kind == GMP_FRAME_PYTHON) {
            f_word(o, "frame", "python");
            f_strid(o, "file", s->file);
            f_strid(o, "function", s->function);
            f_u64(o, "line", s->line);
        } else {
            f_enum(o, "frame", NULL, s->kind);
        }
        break;
    }
    case GMP_REC_RANGE: {
        const gmp_rec_range *g = &rec->u.range;
        f_u64(o, "id", g->id);
        f_u64(o, "parent", g->parent);
        f_strid(o, "domain", g->domain);
        f_strid(o, "name", g->name);
        f_path(o, g->id);
        break;
    }
    case GMP_REC_BUFFER:
        f_u64(o, "tid", rec->u.buffer.tid);
        f_u64(o, "base_ns", rec->u.buffer.base_ns);
        break;
    case GMP_REC_SYNC: f_u64(o, "time_ns", rec->u.sync.time_ns); break;
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_MARK: f_range(o, rec->u.rev.range); break;
    case GMP_REC_RANGE_START:
        f_u64(o, "handle", rec->u.rev.handle);
        f_range(o, rec->u.rev.range);
        break;
    case GMP_REC_RANGE_END: f_u64(o, "handle", rec->u.rev.handle); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE: print_mem(o, &rec->u.mem); break;
    case GMP_REC_OOM: {
        const gmp_rec_oom *m = &rec->u.oom;
        f_s64(o, "device", m->device);
        f_strid(o, "api", m->api);
        f_u64(o, "requested", m->requested);
        f_u64(o, "stack", m->stack);
        f_range(o, m->range);
        f_s64(o, "result", m->result);
        f_u64(o, "free_bytes", m->free_bytes);
        break;
    }
    case GMP_REC_POOL: {
        const gmp_rec_pool *p = &rec->u.pool;
        f_s64(o, "device", p->device);
        f_enum(o, "op", pool_op_name(p->op), p->op);
        f_hex(o, "pool", p->pool);
        f_u64(o, "value", p->value);
        break;
    }
    case GMP_REC_SAMPLE: {
        const gmp_rec_sample *s = &rec->u.sample;
        f_s64(o, "device", s->device);
        f_u64(o, "free", s->free_bytes);
        f_u64(o, "total", s->total_bytes);
        if (s->process_used == UINT64_MAX)
            f_word(o, "process_used", "unknown");
        else
            f_u64(o, "process_used", s->process_used);
        break;
    }
    case GMP_REC_RESOURCE: {
        const gmp_rec_resource *s = &rec->u.resource;
        f_s64(o, "device", s->device);
        f_enum(o, "op", resource_op_name(s->op), s->op);
        f_hex(o, "handle", s->handle);
        break;
    }
    case GMP_REC_ALERT: {
        const gmp_rec_alert *a = &rec->u.alert;
        f_s64(o, "device", a->device);
        f_u64(o, "threshold", a->threshold);
        f_u64(o, "live_bytes", a->live_bytes);
        f_range(o, a->range);
        break;
    }
    case GMP_REC_NOTICE: {
        static const char *const sev[] = {NULL, "info", "warning", "error"};
        uint32_t v = rec->u.notice.severity;
        f_enum(o, "severity", v < 4 ? sev[v] : NULL, v);
        f_str(o, "message", rec->u.notice.message);
        break;
    }
    case GMP_REC_LOST:
        f_u64(o, "count", rec->u.lost.count);
        f_bytes(o, "reason", gmp_lost_reason_name(rec->u.lost.reason),
                strlen(gmp_lost_reason_name(rec->u.lost.reason)));
        break;
    case GMP_REC_END: {
        const gmp_rec_end *e = &rec->u.end;
        f_u64(o, "events", e->events);
        f_u64(o, "allocs", e->allocs);
        f_u64(o, "frees", e->frees);
        f_u64(o, "lost", e->lost);
        break;
    }
    default: {
        char t[8];
        snprintf(t, sizeof t, "0x%02" PRIx32, rec->type & 0xff);
        f_word(o, "code", t);
        break;
    }
    }
    end_line(o);
}

/* Counts per record type, then the reader's completeness line. */
static int print_summary(out *o, const gmp_reader *r)
{
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    char line[512];
    int complete = gmp_reader_completeness(r, line, sizeof line);
    uint64_t total = 0;
    if (o->json)
        fputs("{\"type\":\"summary\",\"records\":{", o->f);
    else
        fputs("# records:", o->f);
    int first = 1;
    for (unsigned t = 0; t < 256; t++) {
        const char *name = gmp_rec_type_name(t);
        if (!name || !st->records[t])
            continue;
        total += st->records[t];
        if (o->json)
            fprintf(o->f, "%s\"%s\":%" PRIu64, first ? "" : ",", name, st->records[t]);
        else
            fprintf(o->f, " %s=%" PRIu64, name, st->records[t]);
        first = 0;
    }
    total += st->unknown_records;
    if (o->json) {
        fputc('}', o->f);
        f_u64(o, "total", total);
        f_u64(o, "unknown", st->unknown_records);
        f_u64(o, "frames", st->frames);
        f_u64(o, "bytes_read", st->bytes_read);
        f_u64(o, "bytes_discarded", st->bytes_discarded);
        f_u64(o, "late_events", st->late_events);
        f_u64(o, "lost_events", st->lost_events);
        f_bool(o, "truncated", st->truncated);
        f_bool(o, "has_end", st->has_end);
        f_bool(o, "complete", complete);
        f_bytes(o, "message", line, strlen(line));
        fputs("}\n", o->f);
    } else {
        if (st->unknown_records)
            fprintf(o->f, " unknown=%" PRIu64, st->unknown_records);
        fprintf(o->f, " (total %" PRIu64 "; %" PRIu64 " frames, %" PRIu64 " bytes", total,
                st->frames, st->bytes_read);
        if (st->late_events)
            fprintf(o->f, ", %" PRIu64 " late events", st->late_events);
        fprintf(o->f, ")\n# %s\n", line);
    }
    return complete;
}

int gmp_cmd_dump(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    int json = 0, raw = 0, npos = 0;
    const gmp_cli_opt opts[] = {
        {"json", 'j', GMP_CLI_FLAG, &json, NULL, "print JSON lines (one object per record)", 0},
        {"raw", 0, GMP_CLI_FLAG, &raw, NULL,
         "file order, framing records (buffer, sync) and unknown types included", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing FILE");
    if (npos > 1)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument (one FILE only)", argv[2]);
    const char *path = argv[1];

    gmp_reader_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.file_order = raw;
    gmp_cli_input in;
    char omsg[1024];
    /* an import compressed as `gpumemprof import` writes it: the bytes counted are that trace's */
    gmp_err e = gmp_cli_input_open_flags(&in, path, GMP_CLI_INPUT_COMPRESSED, omsg, sizeof omsg);
    gmp_reader *r = NULL;
    if (e == GMP_OK)
        e = gmp_cli_input_reader(&in, &r, &ro, omsg, sizeof omsg);
    if (e != GMP_OK) {
        fprintf(stderr, "gpumemprof dump: %s: %s\n", path, omsg);
        gmp_cli_input_close(&in);
        return 1;
    }

    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    out o = {stdout, json, r, NULL, 0};
    o.path_cap = 256;
    o.path = malloc(o.path_cap);
    if (!o.path) {
        gmp_reader_close(r);
        gmp_cli_input_close(&in);
        fprintf(stderr, "gpumemprof dump: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        return 1;
    }

    const gmp_rec_header *h = gmp_reader_header(r);
    if (h)
        print_header(&o, h);
    const gmp_rec *rec;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK) {
        if (rec->type == GMP_REC_HEADER && h)
            continue; /* printed above */
        print_record(&o, rec);
    }
    int status = 0;
    if (e != GMP_END) {
        fflush(stdout);
        const char *m = gmp_reader_error(r);
        fprintf(stderr, "gpumemprof dump: %s: %s\n", path, m && *m ? m : gmp_err_str(e));
        status = 1;
    } else if (!print_summary(&o, r)) {
        char line[512];
        gmp_reader_completeness(r, line, sizeof line);
        fflush(stdout);
        fprintf(stderr, "gpumemprof dump: warning: %s: %s\n", path, line);
    }
    free(o.path);
    gmp_reader_close(r);
    gmp_cli_input_close(&in);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gpumemprof dump: cannot write the output\n");
        status = 1;
    }
    return status;
}
