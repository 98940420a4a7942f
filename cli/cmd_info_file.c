/* gpumemprof info FILE...: what a recording is, without replaying it.
 *
 * Each file is opened as every command opens it (cli_input.h: a snapshot or an nsys export is
 * imported into a temporary trace first). Then one pass over the trace's records in file order (no
 * time-order merge, no replay: only counts and the smallest and largest event times) gives the
 * events, the devices and the time span, and the reader's completeness line says whether the
 * trace is whole. The header gives the producer and the process. See docs/info.md. */
#include "cmd_info_file.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_input.h"
#include "gmp_escape.h"
#include "gmp_reader.h"
#include "gmp_trace.h"
#include "gmp_units.h"

#define MAX_NOTICES 8

typedef struct facts {
    uint64_t records, events, allocs, frees, ooms, notices;
    uint64_t t_first, t_last; /* smallest and largest event time; t_first > t_last: no event */
    uint64_t dev_seen;        /* devices 0..63 that events name (a snapshot has no DEVICE record) */
    gmp_str notice[MAX_NOTICES];
    char *notice_copy[MAX_NOTICES];
    int complete;
    char completeness[1024];
} facts;

static void facts_free(facts *f)
{
    for (size_t i = 0; i < MAX_NOTICES; i++)
        free(f->notice_copy[i]);
}

/* The pass over the records. Returns GMP_OK or the reader's error (msg). */
static gmp_err scan(gmp_reader *r, facts *f, char *msg, size_t msglen)
{
    memset(f, 0, sizeof *f);
    f->t_first = UINT64_MAX;
    const gmp_rec *rec;
    gmp_err e;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK) {
        f->records++;
        if (!gmp_rec_is_event(rec->type))
            continue;
        if (rec->type == GMP_REC_END)
            continue; /* counted as the reader counts: events before END */
        f->events++;
        if (rec->time_ns < f->t_first)
            f->t_first = rec->time_ns;
        if (rec->time_ns > f->t_last)
            f->t_last = rec->time_ns;
        int32_t dev = -1;
        switch (rec->type) {
        case GMP_REC_ALLOC:
            f->allocs++;
            dev = rec->u.mem.device;
            break;
        case GMP_REC_FREE:
            f->frees++;
            dev = rec->u.mem.device;
            break;
        case GMP_REC_OOM:
            f->ooms++;
            dev = rec->u.oom.device;
            break;
        case GMP_REC_POOL: dev = rec->u.pool.device; break;
        case GMP_REC_NOTICE:
            if (f->notices < MAX_NOTICES) {
                size_t k = (size_t)f->notices;
                const gmp_str *m = &rec->u.notice.message;
                f->notice_copy[k] = malloc((size_t)m->len + 1);
                if (f->notice_copy[k]) {
                    if (m->len)
                        memcpy(f->notice_copy[k], m->ptr, m->len);
                    f->notice_copy[k][m->len] = 0;
                    f->notice[k] = (gmp_str){f->notice_copy[k], m->len};
                }
            }
            f->notices++;
            break;
        default: break;
        }
        if (dev >= 0 && dev < 64)
            f->dev_seen |= (uint64_t)1 << dev;
    }
    f->complete = gmp_reader_completeness(r, f->completeness, sizeof f->completeness);
    /* an imported PyTorch snapshot whose ring buffer overflowed (formats/import/gmp_import_torch.c
     * says so in a warning notice, and with a LOST record that the line above counts): say what
     * is missing first */
    for (size_t i = 0; i < MAX_NOTICES && i < f->notices; i++) {
        static const char ring[] = "incomplete: PyTorch's ring buffer of trace entries";
        if (f->notice_copy[i] && strncmp(f->notice_copy[i], ring, sizeof ring - 1) == 0) {
            char was[sizeof f->completeness];
            snprintf(was, sizeof was, "%s", f->completeness);
            const char *rest = strncmp(was, "incomplete: ", 12) == 0 ? was + 12 : was;
            snprintf(f->completeness, sizeof f->completeness,
                     "incomplete: PyTorch's ring buffer of trace entries overflowed: the entries "
                     "before the first recorded one are missing (peaks before it unknown); %.700s",
                     rest);
            f->complete = 0;
            break;
        }
    }
    if (e != GMP_END) {
        const char *m = gmp_reader_error(r);
        snprintf(msg, msglen, "%s", m && *m ? m : gmp_err_str(e));
        return e;
    }
    return GMP_OK;
}

/* ---- text ---- */

/* Prints s (len bytes) with control bytes (NUL included: between arguments) as spaces or escapes.
 */
static void put_plain(const char *s, size_t len, int nul_as_space)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 && nul_as_space) {
            if (i + 1 < len)
                putchar(' ');
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else {
            putchar(c);
        }
    }
}

static void fmt_secs(uint64_t ns, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64 ".%06" PRIu64 " s", ns / 1000000000u, ns % 1000000000u / 1000u);
}

static void fmt_wall(uint64_t wall_ns, char *buf, size_t n)
{
    time_t t = (time_t)(wall_ns / 1000000000u);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, n, "%" PRIu64 " ns since the epoch", wall_ns);
}

/* When the first event happened on the wall clock, 0 when the trace does not say. */
static uint64_t first_wall(const gmp_rec_header *h, const facts *f)
{
    if (!h || !h->start_wall_ns || f->t_first == UINT64_MAX || f->t_first < h->start_trace_ns)
        return 0;
    return h->start_wall_ns + (f->t_first - h->start_trace_ns);
}

static void text_one(const gmp_cli_input *in, int pickle_proto, gmp_reader *r, const facts *f)
{
    const gmp_rec_header *h = gmp_reader_header(r);
    char b1[32], b2[32], t[64];
    printf("%s\n", in->path);
    printf("  kind          %s", gmp_cli_input_kind_name(in->kind));
    if (in->kind == GMP_CLI_INPUT_TORCH && pickle_proto)
        printf(" (pickle protocol %d)", pickle_proto);
    printf("\n");
    if (in->summary[0])
        printf("  imported      %s\n", in->summary);
    printf("  size          %s", gmp_fmt_bytes(in->file_bytes, b1, sizeof b1));
    if (in->fd >= 0)
        printf(" (imported trace: %s)", gmp_fmt_bytes(in->trace_bytes, b2, sizeof b2));
    printf("\n");
    if (h && h->producer.len) {
        printf("  producer      ");
        put_plain(h->producer.ptr, h->producer.len, 0);
        printf("\n");
    }
    printf("  process       ");
    if (!h || (!h->pid && !h->hostname.len)) {
        printf("not recorded%s\n",
               in->kind == GMP_CLI_INPUT_TORCH ? " (a PyTorch snapshot does not say)" : "");
    } else {
        printf("pid %" PRIu32, h->pid);
        if (h->ppid)
            printf(", parent %" PRIu32, h->ppid);
        if (h->rank >= 0) {
            printf(", rank %" PRId64, h->rank);
            if (h->world_size > 0)
                printf(" of %" PRId64, h->world_size);
            if (h->local_rank >= 0)
                printf(" (local %" PRId64 ")", h->local_rank);
        }
        if (h->hostname.len) {
            printf(", host ");
            put_plain(h->hostname.ptr, h->hostname.len, 0);
        }
        printf("\n");
        if (h->cmdline.len && in->kind != GMP_CLI_INPUT_TORCH) {
            printf("  command       ");
            put_plain(h->cmdline.ptr, h->cmdline.len, 1);
            printf("\n");
        }
    }
    size_t nd = gmp_reader_device_count(r);
    uint64_t undescribed = f->dev_seen;
    for (size_t i = 0; i < nd; i++) {
        const gmp_rec_device *d = gmp_reader_device_at(r, i);
        if (d->id < 64)
            undescribed &= ~((uint64_t)1 << d->id);
    }
    if (!nd && !undescribed)
        printf("  devices       none\n");
    for (size_t i = 0; i < nd; i++) {
        const gmp_rec_device *d = gmp_reader_device_at(r, i);
        printf("  %-14s%" PRIu32 ": ", i ? "" : "devices", d->id);
        if (d->name.len)
            put_plain(d->name.ptr, d->name.len, 0);
        else
            printf("(no name)");
        if (d->total_bytes)
            printf(", %s", gmp_fmt_bytes(d->total_bytes, b1, sizeof b1));
        if (d->cc_major)
            printf(", compute capability %" PRIu32 ".%" PRIu32, d->cc_major, d->cc_minor);
        printf("\n");
    }
    for (unsigned id = 0, k = (unsigned)nd; id < 64; id++)
        if (undescribed >> id & 1)
            printf("  %-14s%u: name and memory not recorded\n", k++ ? "" : "devices", id);
    uint64_t w = first_wall(h, f);
    if (w) {
        fmt_wall(w, t, sizeof t);
        printf("  started       %s (first event)\n", t);
    }
    if (f->t_first <= f->t_last) {
        fmt_secs(f->t_last - f->t_first, t, sizeof t);
        printf("  time span     %s\n", t);
    } else {
        printf("  time span     none (no events)\n");
    }
    printf("  events        %" PRIu64 " (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
           " OOM%s)\n",
           f->events, f->allocs, f->frees, f->ooms, f->ooms == 1 ? "" : "s");
    for (uint64_t i = 0; i < f->notices && i < MAX_NOTICES; i++) {
        printf("  %-14s", i ? "" : "notices");
        if (f->notice[i].ptr)
            put_plain(f->notice[i].ptr, f->notice[i].len, 0);
        printf("\n");
    }
    if (f->notices > MAX_NOTICES)
        printf("                and %" PRIu64 " more\n", f->notices - MAX_NOTICES);
    printf("  completeness  %s\n", f->completeness);
}

/* ---- JSON ---- */

static void j_str(const char *s, size_t n)
{
    gmp_json_fputs(stdout, s ? s : "", s ? n : 0);
}

static void j_cstr(const char *s)
{
    j_str(s, s ? strlen(s) : 0);
}

static void json_one(const gmp_cli_input *in, int pickle_proto, gmp_reader *r, const facts *f)
{
    const gmp_rec_header *h = gmp_reader_header(r);
    printf("{\"path\":");
    j_cstr(in->path);
    printf(",\"kind\":\"%s\",\"kind_name\":", gmp_cli_input_kind_id(in->kind));
    j_cstr(gmp_cli_input_kind_name(in->kind));
    if (in->kind == GMP_CLI_INPUT_TORCH)
        printf(",\"pickle_protocol\":%d", pickle_proto);
    printf(",\"file_bytes\":%" PRIu64 ",\"trace_bytes\":%" PRIu64 ",\"imported\":", in->file_bytes,
           in->trace_bytes);
    if (in->summary[0])
        j_cstr(in->summary);
    else
        printf("null");
    printf(",\"producer\":");
    j_str(h ? h->producer.ptr : "", h ? h->producer.len : 0);
    printf(",\"process\":");
    if (!h || (!h->pid && !h->hostname.len)) {
        printf("null");
    } else {
        printf("{\"pid\":%" PRIu32 ",\"ppid\":%" PRIu32 ",\"rank\":", h->pid, h->ppid);
        if (h->rank >= 0)
            printf("%" PRId64, h->rank);
        else
            printf("null");
        printf(",\"local_rank\":");
        if (h->rank >= 0 && h->local_rank >= 0)
            printf("%" PRId64, h->local_rank);
        else
            printf("null");
        printf(",\"world_size\":");
        if (h->rank >= 0 && h->world_size > 0)
            printf("%" PRId64, h->world_size);
        else
            printf("null");
        printf(",\"rank_from\":");
        if (h->rank >= 0 && h->rank_var.len)
            j_str(h->rank_var.ptr, h->rank_var.len);
        else
            printf("null");
        printf(",\"host\":");
        j_str(h->hostname.ptr, h->hostname.len);
        printf(",\"command\":[");
        if (in->kind != GMP_CLI_INPUT_TORCH) {
            const char *p = h->cmdline.ptr, *end = p ? p + h->cmdline.len : p;
            for (int first = 1; p && p < end; first = 0) {
                const char *z = memchr(p, 0, (size_t)(end - p));
                size_t l = z ? (size_t)(z - p) : (size_t)(end - p);
                printf("%s", first ? "" : ",");
                j_str(p, l);
                p += l + 1;
            }
        }
        printf("]}");
    }
    printf(",\"devices\":[");
    size_t nd = gmp_reader_device_count(r);
    for (size_t i = 0; i < nd; i++) {
        const gmp_rec_device *d = gmp_reader_device_at(r, i);
        printf("%s{\"id\":%" PRIu32 ",\"name\":", i ? "," : "", d->id);
        j_str(d->name.ptr, d->name.len);
        printf(",\"total_bytes\":%" PRIu64 "}", d->total_bytes);
    }
    uint64_t undescribed = f->dev_seen;
    for (size_t i = 0; i < nd; i++)
        if (gmp_reader_device_at(r, i)->id < 64)
            undescribed &= ~((uint64_t)1 << gmp_reader_device_at(r, i)->id);
    for (unsigned id = 0, k = (unsigned)nd; id < 64; id++)
        if (undescribed >> id & 1)
            printf("%s{\"id\":%u,\"name\":null,\"total_bytes\":null}", k++ ? "," : "", id);
    printf("],\"first_event_wall_ns\":");
    uint64_t w = first_wall(h, f);
    if (w)
        printf("%" PRIu64, w);
    else
        printf("null");
    if (f->t_first <= f->t_last)
        printf(",\"first_event_ns\":%" PRIu64 ",\"last_event_ns\":%" PRIu64 ",\"span_ns\":%" PRIu64,
               f->t_first, f->t_last, f->t_last - f->t_first);
    else
        printf(",\"first_event_ns\":null,\"last_event_ns\":null,\"span_ns\":0");
    printf(",\"records\":%" PRIu64 ",\"events\":%" PRIu64 ",\"allocs\":%" PRIu64
           ",\"frees\":%" PRIu64 ",\"ooms\":%" PRIu64 ",\"notices\":[",
           f->records, f->events, f->allocs, f->frees, f->ooms);
    for (uint64_t i = 0; i < f->notices && i < MAX_NOTICES; i++) {
        printf("%s", i ? "," : "");
        j_str(f->notice[i].ptr, f->notice[i].len);
    }
    printf("],\"notices_total\":%" PRIu64 ",\"complete\":%s,\"completeness\":", f->notices,
           f->complete ? "true" : "false");
    j_cstr(f->completeness);
    printf("}");
}

/* ---- command ---- */

/* The pickle protocol of a snapshot: its second byte (0 when it cannot be read again). */
static int pickle_protocol(const char *path)
{
    unsigned char b[2] = {0, 0};
    FILE *fp = fopen(path, "rbe");
    if (!fp)
        return 0;
    size_t n = fread(b, 1, 2, fp);
    fclose(fp);
    return n == 2 && b[0] == 0x80 ? b[1] : 0;
}

int gmp_cli_info_files(const gmp_cli_cmd_info *cmd, int json, char **paths, size_t n)
{
    int status = 0, shown = 0;
    if (json)
        printf("{\n  \"schema\": \"gpumemprof-info-recordings/1\",\n  \"recordings\": [");
    for (size_t i = 0; i < n; i++) {
        gmp_cli_input in;
        gmp_reader *r = NULL;
        char msg[1024];
        gmp_reader_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.file_order = 1; /* counts and extremes need no time order */
        /* compressed as `gpumemprof import` writes it: the size shown is that trace's */
        gmp_err e =
            gmp_cli_input_open_flags(&in, paths[i], GMP_CLI_INPUT_COMPRESSED, msg, sizeof msg);
        if (e == GMP_OK)
            e = gmp_cli_input_reader(&in, &r, &ro, msg, sizeof msg);
        facts f;
        memset(&f, 0, sizeof f);
        if (e == GMP_OK)
            e = scan(r, &f, msg, sizeof msg);
        if (e != GMP_OK) {
            fflush(stdout);
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, paths[i], msg);
            if (json) {
                printf("%s\n    {\"path\":", shown++ ? "," : "");
                j_cstr(paths[i]);
                printf(",\"error\":");
                j_cstr(msg);
                printf("}");
            }
            status = 1;
        } else {
            int proto = in.kind == GMP_CLI_INPUT_TORCH ? pickle_protocol(paths[i]) : 0;
            if (json) {
                printf("%s\n    ", shown++ ? "," : "");
                json_one(&in, proto, r, &f);
            } else {
                if (shown++)
                    printf("\n");
                text_one(&in, proto, r, &f);
            }
        }
        facts_free(&f);
        gmp_reader_close(r);
        gmp_cli_input_close(&in);
    }
    if (json)
        printf("%s]\n}\n", shown ? "\n  " : "");
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gpumemprof %s: cannot write the output\n", cmd->name);
        return 1;
    }
    return status;
}
