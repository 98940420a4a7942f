/* gpumemprof diagnose: one file to attach to a bug report. A POSIX ustar archive, compressed with
 * zstd (`tar --zstd -xf B.tar.zst`, `zstd -dc B.tar.zst | tar x`), holding under one top directory:
 * MANIFEST.txt (what is inside and why, sizes, what a bound left out), version.txt,
 * command-line.txt, environment.txt (secrets redacted), info.txt and info.json (what `gpumemprof
 * info` prints, from the same code, in this process), and per recording: the file itself when it is
 * within the bounds, and its report.txt and report.json (`gpumemprof report` run in this process).
 *
 * Secrets: an environment variable whose name contains TOKEN, KEY, SECRET, PASSWORD, PASSWD,
 * CREDENTIAL or AUTH (any case) has its value replaced by "<redacted>"; the same on the command
 * line for NAME=VALUE and --NAME=VALUE / --NAME VALUE; in every text member (the reports, whose
 * recorded command lines are the program's, and the manifest included) the values of
 * --NAME=VALUE, -NAME=VALUE and --NAME VALUE for such names, and the user information of a URL
 * (scheme://user:password@host), are replaced by "<redacted>". The recordings are copied as they
 * are. The manifest says exactly this. See docs/diagnose.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "gmp_strbuf.h"
#include "gmp_units.h"

#ifndef GMP_VERSION_STRING
#define GMP_VERSION_STRING "unknown"
#endif

extern char **environ;

#define MiB (1024ull * 1024ull)
#define DEFAULT_MAX_FILE (64 * MiB)
#define DEFAULT_MAX_TOTAL (256 * MiB)
#define MAX_AUTO 4      /* recordings picked from the current directory when none is given */
#define MAX_INPUTS 1000 /* FILEs on the command line */
#define REDACTED "<redacted>"

/* ---- a growing buffer ---- */

/* Reads a whole file of at most max bytes. 0 on success; -1 with errno (EFBIG: over max). */
static int buf_read_file(gmp_strbuf *b, const char *path, uint64_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b->n + n > max) {
            fclose(f);
            errno = EFBIG;
            return -1;
        }
        gmp_strbuf_add(b, chunk, n);
    }
    int err = ferror(f);
    fclose(f);
    if (err || b->oom) {
        errno = err ? EIO : ENOMEM;
        return -1;
    }
    return 0;
}

/* ---- redaction ---- */

static int is_secret_name(const char *name, size_t n)
{
    static const char *const words[] = {"TOKEN",  "KEY",        "SECRET", "PASSWORD",
                                        "PASSWD", "CREDENTIAL", "AUTH",   NULL};
    for (size_t w = 0; words[w]; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= n; i++)
            if (strncasecmp(name + i, words[w], wl) == 0)
                return 1;
    }
    return 0;
}

/* Where the user information of a URL ends at the latest: the host's end, or the end of a word or
 * of a JSON string (a quote not escaped). */
static int ends_userinfo(const char *s, size_t k)
{
    char c = s[k];
    return c == 0 || c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' ||
           c == '\r' || (c == '"' && (k == 0 || s[k - 1] != '\\'));
}

/* Appends s[0..n) to out with the user information of every URL (what lies between "://" and the
 * last '@' before the host ends) replaced by REDACTED. Returns how many were replaced (one
 * already REDACTED is kept, and not counted again). */
static size_t redact_urls(gmp_strbuf *out, const char *s, size_t n)
{
    size_t count = 0, i = 0;
    while (i < n) {
        const char *sep = NULL;
        for (size_t k = i; k + 3 <= n; k++)
            if (s[k] == ':' && s[k + 1] == '/' && s[k + 2] == '/') {
                sep = s + k;
                break;
            }
        if (!sep) {
            gmp_strbuf_add(out, s + i, n - i);
            break;
        }
        size_t start = (size_t)(sep - s) + 3, at = 0, k = start;
        for (; k < n && !ends_userinfo(s, k); k++)
            if (s[k] == '@')
                at = k;
        gmp_strbuf_add(out, s + i, start - i);
        size_t rl = strlen(REDACTED);
        if (at > start && !(at - start == rl && memcmp(s + start, REDACTED, rl) == 0)) {
            gmp_strbuf_puts(out, REDACTED);
            count++;
            i = at;
        } else {
            i = start;
        }
    }
    return count;
}

/* The redaction counts, for the manifest. */
typedef struct redactions {
    size_t env_names, cmdline_values, urls;
    size_t text_values; /* option values redacted inside text members (the reports) */
} redactions;

/* Where a word of a text member ends: white space, a shell quote (command-line.txt) and, in a
 * JSON member, a double quote (a string's end). In a text member a double quote is part of the
 * word: a value holding one is redacted whole. */
static int word_sep(char c, int json)
{
    return c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' ||
           (json && c == '"');
}

/* s[k] follows an odd number of backslashes (at or after s[from]). */
static int escaped(const char *s, size_t from, size_t k)
{
    size_t b = 0;
    while (k > from && s[k - 1] == '\\') {
        b++;
        k--;
    }
    return b & 1;
}

/* An option token -NAME or --NAME (with or without =VALUE) whose NAME (letters, digits, '_' and
 * '-' only) contains a secret's word: returns the length of "-NAME" (up to the '='), else 0. */
static size_t secret_option(const char *t, size_t n)
{
    if (n < 2 || t[0] != '-')
        return 0;
    size_t k = t[1] == '-' ? 2 : 1, start = k;
    for (; k < n && t[k] != '='; k++) {
        char c = t[k];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return k > start && is_secret_name(t + start, k - start) ? k : 0;
}

/* Appends s[0..n) to out with the values of secret options replaced by REDACTED: --NAME=VALUE
 * and -NAME=VALUE, and the word after --NAME on the same line when it is no option (--NAME VALUE),
 * NAME containing a secret's word (is_secret_name). This is how a recorded command line reads in
 * a report (text: arguments joined by spaces; JSON: one string, json set). Returns how many values
 * were replaced (one already REDACTED is kept and not counted). */
static size_t redact_options(gmp_strbuf *out, const char *s, size_t n, int json)
{
    size_t count = 0, i = 0, rl = strlen(REDACTED);
    int value_next = 0; /* the previous word was a secret option without '=' */
    while (i < n) {
        if (word_sep(s[i], json)) {
            if (s[i] == '\n' || s[i] == '"' || s[i] == '\'')
                value_next = 0; /* the value is on the same line, in the same string */
            gmp_strbuf_add(out, s + i, 1);
            i++;
            continue;
        }
        size_t e = i;
        /* a quote escaped inside a JSON string (\", an odd number of backslashes before it) is
         * part of the word, not its end */
        while (e < n && (!word_sep(s[e], json) || (s[e] == '"' && escaped(s, i, e))))
            e++;
        const char *t = s + i;
        size_t tl = e - i, name = secret_option(t, tl);
        if (name && name < tl) { /* --NAME=VALUE */
            gmp_strbuf_add(out, t, name + 1);
            gmp_strbuf_puts(out, REDACTED);
            count += !(tl - name - 1 == rl && memcmp(t + name + 1, REDACTED, rl) == 0);
            value_next = 0;
        } else if (value_next && t[0] != '-') { /* the VALUE of --NAME VALUE */
            gmp_strbuf_puts(out, REDACTED);
            count += !(tl == rl && memcmp(t, REDACTED, rl) == 0);
            value_next = 0;
        } else {
            gmp_strbuf_add(out, t, tl);
            value_next = name != 0 && t[1] == '-';
        }
        i = e;
    }
    return count;
}

/* ---- the members of the bundle ---- */

typedef struct member {
    char name[128];  /* path under the top directory */
    char what[512];  /* one line for the manifest */
    gmp_strbuf text; /* generated content (file == NULL) */
    char *file;      /* or a file copied as it is */
    uint64_t size;   /* bytes */
    uint64_t mtime;  /* seconds since the epoch */
    int included;    /* within the bounds */
    char left[256];  /* why not, when not */
} member;

typedef struct input {
    char *path;      /* as given */
    char shown[512]; /* as the manifest and messages show it (URLs' credentials redacted) */
    char error[512]; /* why it could not be read; "" when it could */
    uint64_t size;
    int report_failed;
    const char *kind; /* what cli_input recognised it as; NULL when it could not open it */
} input;

typedef struct bundle {
    member *m;
    size_t n, cap;
    uint64_t max_file, max_total, included_bytes;
    redactions red;
    char top[64]; /* the top directory in the archive */
    time_t now;
} bundle;

static member *add_member(bundle *B, const char *name, const char *what)
{
    if (B->n == B->cap) {
        size_t cap = B->cap ? B->cap * 2 : 16;
        member *m = realloc(B->m, cap * sizeof *m);
        if (!m)
            return NULL;
        B->m = m;
        B->cap = cap;
    }
    member *m = &B->m[B->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->what, sizeof m->what, "%s", what);
    m->mtime = (uint64_t)B->now;
    return m;
}

/* A generated text member: every text goes through the URL filter. */
static member *add_text(bundle *B, const char *name, const char *what, const gmp_strbuf *content)
{
    member *m = add_member(B, name, what);
    if (!m)
        return NULL;
    if (content->n) {
        /* the values of secret options (a recorded command line in a report), then URLs'
         * credentials, in every text */
        gmp_strbuf opt = {0};
        size_t nl = strlen(name);
        int json = nl > 5 && strcmp(name + nl - 5, ".json") == 0;
        B->red.text_values += redact_options(&opt, content->p, content->n, json);
        if (opt.n)
            B->red.urls += redact_urls(&m->text, opt.p, opt.n);
        free(opt.p);
    }
    m->size = m->text.n;
    return m;
}

/* Decides what goes in: the generated members first (in order), then the recordings. */
static void apply_bounds(bundle *B)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < B->n; i++) {
            member *m = &B->m[i];
            if ((m->file != NULL) != (pass == 1) || m->left[0])
                continue;
            char a[32], b[32];
            if (m->size > B->max_file)
                snprintf(m->left, sizeof m->left, "over the per-file bound of %s (--max-file)",
                         gmp_fmt_bytes(B->max_file, a, sizeof a));
            else if (B->included_bytes + m->size > B->max_total)
                snprintf(m->left, sizeof m->left,
                         "over the total bound of %s (--max-total; %s already in)",
                         gmp_fmt_bytes(B->max_total, a, sizeof a),
                         gmp_fmt_bytes(B->included_bytes, b, sizeof b));
            else {
                m->included = 1;
                B->included_bytes += m->size;
            }
        }
}

/* A file name as a member name: letters, digits and ._+- kept, the rest '_', at most 80. */
static void member_base(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t k = 0;
    for (; *b && k + 1 < n && k < 80; b++, k++) {
        char c = *b;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '+' || c == '-';
        out[k] = ok ? c : '_';
    }
    out[k] = 0;
    if (k == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
        snprintf(out, n, "recording");
}

/* ---- running other commands in this process ---- */

/* Runs fn with stdout (fd 1) or stderr (fd 2) going into a temporary file, whose content is
 * appended to out. Returns fn's status, or -1 when the redirection could not be made. */
static int capture_fd(int fd, gmp_strbuf *out, int (*fn)(void *), void *arg)
{
    FILE *tmp = tmpfile();
    if (!tmp)
        return -1;
    fflush(fd == 1 ? stdout : stderr);
    int saved = dup(fd);
    if (dup2(fileno(tmp), fd) < 0) {
        if (saved >= 0)
            close(saved);
        fclose(tmp);
        return -1;
    }
    int rc = fn(arg);
    fflush(fd == 1 ? stdout : stderr);
    if (saved >= 0) {
        dup2(saved, fd);
        close(saved);
    } else {
        close(fd);
    }
    rewind(tmp);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, tmp)) > 0)
        gmp_strbuf_add(out, chunk, n);
    fclose(tmp);
    return rc;
}

static int run_info(void *arg)
{
    static const gmp_cli_cmd_info info_cmd = {"info", "[--json]", "info"};
    char a0[] = "info", a1[] = "--json";
    char *argv[] = {a0, *(const int *)arg ? a1 : NULL, NULL};
    return gmp_cmd_info(&info_cmd, argv[1] ? 2 : 1, argv);
}

typedef struct report_call {
    const char *format, *path, *out;
} report_call;

static int run_report(void *arg)
{
    static const gmp_cli_cmd_info report_cmd = {"report", "TRACE...", "report"};
    const report_call *c = arg;
    char *argv[] = {
        "report",       "--format", (char *)c->format, "--color", "never", "--no-progress", "-o",
        (char *)c->out, "--",       (char *)c->path,   NULL};
    return gmp_cmd_report(&report_cmd, (int)(sizeof argv / sizeof argv[0]) - 1, argv);
}

/* report.txt, report.json (and report-messages.txt: what report said on stderr) of one input. */
static void add_reports(bundle *B, input *in, size_t idx, const char *tmpdir)
{
    static const char *const formats[2] = {"text", "json"};
    static const char *const names[2] = {"report.txt", "report.json"};
    gmp_strbuf messages = {0};
    for (int k = 0; k < 2; k++) {
        char out[PATH_MAX], name[128], what[256];
        snprintf(out, sizeof out, "%s/%s", tmpdir, names[k]);
        unlink(out);
        report_call c = {formats[k], in->path, out};
        gmp_strbuf err = {0};
        int rc = capture_fd(2, &err, run_report, &c);
        if (k == 0 && err.n)
            gmp_strbuf_add(&messages, err.p, err.n); /* the same messages for both formats */
        free(err.p);
        snprintf(name, sizeof name, "recording-%zu/%s", idx, names[k]);
        gmp_strbuf content = {0};
        int read_rc = rc == 0 ? buf_read_file(&content, out, B->max_file) : -1;
        int read_errno = errno;
        snprintf(what, sizeof what, "gpumemprof report%s of recording %zu",
                 k ? " --format json" : "", idx);
        if (rc == 0 && read_rc == 0) {
            add_text(B, name, what, &content);
        } else if (rc == 0) {
            /* over the bound (apply_bounds says so, with its size) or unreadable */
            member *m = add_member(B, name, what);
            struct stat sb;
            if (m && stat(out, &sb) == 0)
                m->size = (uint64_t)sb.st_size;
            if (m && read_errno != EFBIG)
                snprintf(m->left, sizeof m->left, "%s", strerror(read_errno));
        } else {
            in->report_failed = 1;
        }
        free(content.p);
        unlink(out);
    }
    if (messages.n) {
        char name[128], what[256];
        snprintf(name, sizeof name, "recording-%zu/report-messages.txt", idx);
        snprintf(what, sizeof what, "what gpumemprof report said on stderr about recording %zu%s",
                 idx, in->report_failed ? " (it failed)" : "");
        add_text(B, name, what, &messages);
    }
    free(messages.p);
}

/* ---- the inputs ---- */

typedef struct found {
    char *name;
    struct timespec mtime;
} found;

static int newest_first(const void *a, const void *b)
{
    const found *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The newest files named gpumemprof.*.zst in the current directory: up to MAX_AUTO paths in
 * picked (strdup'ed); the names of the older ones go into notes. Returns how many were picked. */
static size_t pick_recent(char **picked, gmp_strbuf *notes)
{
    DIR *d = opendir(".");
    if (!d) {
        gmp_strbuf_printf(notes, "the current directory cannot be read: %s\n", strerror(errno));
        return 0;
    }
    found *f = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        if (fnmatch("gpumemprof.*.zst", e->d_name, FNM_PERIOD) != 0 || stat(e->d_name, &sb) != 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            found *g = realloc(f, cap * sizeof *f);
            if (!g)
                break;
            f = g;
        }
        f[n].name = strdup(e->d_name);
        f[n].mtime = sb.st_mtim;
        if (f[n].name)
            n++;
    }
    closedir(d);
    if (n)
        qsort(f, n, sizeof *f, newest_first);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i < MAX_AUTO) {
            picked[k++] = f[i].name;
            continue;
        }
        if (i == MAX_AUTO)
            gmp_strbuf_printf(notes,
                              "older recordings not taken (at most %d are taken):", MAX_AUTO);
        if (i < MAX_AUTO + 20)
            gmp_strbuf_printf(notes, " %s", f[i].name);
        else if (i == MAX_AUTO + 20)
            gmp_strbuf_printf(notes, " and %zu more", n - i);
        free(f[i].name);
    }
    if (n > MAX_AUTO)
        gmp_strbuf_puts(notes, "\n");
    free(f);
    return k;
}

/* ---- the text members ---- */

static void make_version(gmp_strbuf *b)
{
    struct utsname u;
    gmp_strbuf_printf(b, "gpumemprof %s\n", GMP_VERSION_STRING);
    gmp_strbuf_printf(b, "libzstd %s\n", ZSTD_versionString());
    if (uname(&u) == 0)
        gmp_strbuf_printf(b, "system %s %s %s %s\n", u.sysname, u.release, u.version, u.machine);
}

static int starts_option(const char *s)
{
    return s[0] == '-' && s[1] != 0;
}

/* One argument with its secrets redacted: NAME=VALUE and --NAME=VALUE when NAME is a secret's,
 * the whole argument when redact_all (it follows --NAME). */
static void redact_arg(gmp_strbuf *out, const char *a, int redact_all, redactions *red)
{
    const char *eq = strchr(a, '=');
    if (redact_all) {
        gmp_strbuf_puts(out, REDACTED);
        red->cmdline_values++;
    } else if (eq && is_secret_name(a, (size_t)(eq - a))) {
        gmp_strbuf_add(out, a, (size_t)(eq - a) + 1);
        gmp_strbuf_puts(out, REDACTED);
        red->cmdline_values++;
    } else {
        gmp_strbuf_puts(out, a);
    }
}

/* The arguments with their secrets redacted (NAME=VALUE, --NAME=VALUE, --NAME VALUE, URLs'
 * user information), one malloc'ed string each; NULL when out of memory. */
static char **redact_args(int argc, char **argv, redactions *red)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    for (int i = 0; out && i < argc; i++) {
        int after_secret_option = i > 0 && starts_option(argv[i - 1]) &&
                                  !strchr(argv[i - 1], '=') &&
                                  is_secret_name(argv[i - 1], strlen(argv[i - 1]));
        gmp_strbuf raw = {0}, arg = {0};
        redact_arg(&raw, argv[i], after_secret_option && !starts_option(argv[i]), red);
        if (raw.n)
            red->urls += redact_urls(&arg, raw.p, raw.n);
        free(raw.p);
        out[i] = arg.p ? arg.p : strdup("");
        if (!out[i] || arg.oom) {
            for (int k = 0; k <= i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* The command (its arguments already redacted, quoted for a POSIX shell where needed) and the
 * working directory. */
static void make_cmdline(gmp_strbuf *b, int argc, char **redacted)
{
    char cwd[PATH_MAX];
    gmp_strbuf_puts(b, "gpumemprof");
    for (int i = 0; i < argc; i++) {
        const char *a = redacted[i];
        gmp_strbuf_puts(b, " ");
        if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "@%+=:,./_-") == strlen(a)) {
            gmp_strbuf_puts(b, a);
            continue;
        }
        gmp_strbuf_puts(b, "'");
        for (; *a; a++)
            if (*a == '\'')
                gmp_strbuf_puts(b, "'\\''");
            else
                gmp_strbuf_add(b, a, 1);
        gmp_strbuf_puts(b, "'");
    }
    gmp_strbuf_puts(b, "\n");
    gmp_strbuf_printf(b, "working directory: %s\n", getcwd(cwd, sizeof cwd) ? cwd : "(unknown)");
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The environment, sorted, one NAME=VALUE a line (newlines in values as \n). */
static void make_environment(gmp_strbuf *b, char **env, redactions *red)
{
    size_t n = 0;
    while (env && env[n])
        n++;
    char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) {
        b->oom = 1;
        return;
    }
    memcpy(sorted, env, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_string);
    for (size_t i = 0; i < n; i++) {
        const char *e = sorted[i], *eq = strchr(e, '=');
        size_t nl = eq ? (size_t)(eq - e) : strlen(e);
        gmp_strbuf_add(b, e, nl);
        gmp_strbuf_puts(b, "=");
        if (is_secret_name(e, nl)) {
            gmp_strbuf_puts(b, REDACTED);
            red->env_names++;
        } else if (eq) {
            for (const char *v = eq + 1; *v; v++)
                if (*v == '\n')
                    gmp_strbuf_puts(b, "\\n");
                else
                    gmp_strbuf_add(b, v, 1);
        }
        gmp_strbuf_puts(b, "\n");
    }
    free(sorted);
}

static void make_manifest(gmp_strbuf *b, const bundle *B, const input *in, size_t nin,
                          int auto_picked, const gmp_strbuf *notes)
{
    char stamp[64], a[32], c[32];
    struct tm tm;
    gmtime_r(&B->now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
    gmp_strbuf_printf(
        b,
        "gpumemprof diagnose bundle: gpumemprof %s, made %s.\n"
        "Attach it to a bug report. Redacted (replaced by <redacted>), see docs/diagnose.md:\n"
        "- in environment.txt, the value of every variable whose name contains TOKEN, KEY,\n"
        "  SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH (any case);\n"
        "- in command-line.txt and in every text member (the reports' recorded command lines\n"
        "  included), the value of NAME=VALUE (command-line.txt), --NAME=VALUE, -NAME=VALUE\n"
        "  and --NAME VALUE when NAME contains one of these words;\n"
        "- in every text member, the user:password of URLs (what lies between :// and @).\n"
        "Not redacted: secrets in other forms (a password as a plain argument, -p VALUE, a\n"
        "token inside a file name); and the recordings, copied as they are, which hold the\n"
        "profiled program's command line as it was and the host name.\n\n",
        GMP_VERSION_STRING, stamp);
    gmp_strbuf_printf(b, "Members (bytes, name under %s/, what):\n", B->top);
    gmp_strbuf_printf(b, "%12s  %-32s  %s\n", "-", "MANIFEST.txt", "this list");
    for (size_t i = 0; i < B->n; i++)
        if (B->m[i].included)
            gmp_strbuf_printf(b, "%12" PRIu64 "  %-32s  %s\n", B->m[i].size, B->m[i].name,
                              B->m[i].what);
    gmp_strbuf_puts(b, "\n");

    gmp_strbuf_printf(b, "Recordings (%s):\n",
                      auto_picked
                          ? "none given: the newest gpumemprof.*.zst in the working directory"
                          : "as given on the command line");
    if (nin == 0)
        gmp_strbuf_puts(b, "  none\n");
    for (size_t i = 0; i < nin; i++) {
        gmp_strbuf_printf(b, "  %zu. %s", i + 1, in[i].shown);
        if (in[i].error[0])
            gmp_strbuf_printf(b, ": cannot be read: %s\n", in[i].error);
        else
            gmp_strbuf_printf(b, ": %" PRIu64 " bytes%s%s%s%s\n", in[i].size,
                              in[i].kind ? " (" : "", in[i].kind ? in[i].kind : "",
                              in[i].kind ? ")" : "",
                              in[i].report_failed ? "; gpumemprof report failed on it (see its "
                                                    "report-messages.txt)"
                                                  : "");
    }
    if (notes->n)
        gmp_strbuf_add(b, notes->p, notes->n);
    gmp_strbuf_puts(b, "\n");

    int any = 0;
    for (size_t i = 0; i < B->n; i++) {
        const member *m = &B->m[i];
        if (m->included)
            continue;
        if (!any++)
            gmp_strbuf_puts(b, "Left out:\n");
        gmp_strbuf_printf(b, "%12" PRIu64 "  %-32s  %s%s%s\n", m->size, m->name, m->what,
                          m->what[0] ? ": " : "", m->left);
    }
    if (any)
        gmp_strbuf_puts(b, "\n");
    gmp_strbuf_printf(b,
                      "Bounds: %s per file, %s in all (--max-file, --max-total); %" PRIu64
                      " bytes included besides this list.\n",
                      gmp_fmt_bytes(B->max_file, a, sizeof a),
                      gmp_fmt_bytes(B->max_total, c, sizeof c), B->included_bytes);
    gmp_strbuf_printf(
        b,
        "Redacted: %zu environment variable(s) by name, %zu command-line value(s), %zu "
        "option value(s) in the reports and other texts, %zu URL credential(s).\n",
        B->red.env_names, B->red.cmdline_values, B->red.text_values, B->red.urls);
}

/* ---- the archive: ustar, compressed with zstd as one stream ---- */

typedef struct tarz {
    FILE *f;
    ZSTD_CCtx *cc;
    char *obuf;
    size_t ocap;
    int err;
} tarz;

static void tz_write(tarz *t, const void *p, size_t n, ZSTD_EndDirective end)
{
    ZSTD_inBuffer in = {p, n, 0};
    while (!t->err) {
        ZSTD_outBuffer out = {t->obuf, t->ocap, 0};
        size_t r = ZSTD_compressStream2(t->cc, &out, &in, end);
        if (ZSTD_isError(r) || (out.pos && fwrite(t->obuf, 1, out.pos, t->f) != out.pos)) {
            t->err = 1;
            break;
        }
        if (end == ZSTD_e_end ? r == 0 : in.pos == in.size)
            break;
    }
}

static void tar_pad(tarz *t, uint64_t size)
{
    static const char zeros[512];
    if (size % 512)
        tz_write(t, zeros, 512 - size % 512, ZSTD_e_continue);
}

/* One ustar header; names longer than 100 bytes are split into prefix and name at a '/'. */
static int tar_header(tarz *t, const char *path, uint64_t size, uint64_t mtime, char type)
{
    unsigned char h[512];
    memset(h, 0, sizeof h);
    size_t len = strlen(path), split = 0;
    if (len > 100) {
        for (size_t i = 0; i < len; i++)
            if (path[i] == '/' && i <= 155 && len - i - 1 <= 100 && len - i - 1 > 0)
                split = i;
        if (!split)
            return -1;
        memcpy(h + 345, path, split);
        memcpy(h, path + split + 1, len - split - 1);
    } else {
        memcpy(h, path, len);
    }
    if (size > 077777777777ull)
        return -1;
    snprintf((char *)h + 100, 8, "%07o", type == '5' ? 0755 : 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011" PRIo64, size);
    snprintf((char *)h + 136, 12, "%011" PRIo64, (uint64_t)(mtime & 077777777777ull));
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memcpy(h + 265, "root", 4);
    memcpy(h + 297, "root", 4);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof h; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    tz_write(t, h, sizeof h, ZSTD_e_continue);
    return 0;
}

static void tar_text(tarz *t, const char *path, const char *p, size_t n, uint64_t mtime)
{
    if (tar_header(t, path, n, mtime, '0') != 0) {
        t->err = 1;
        return;
    }
    tz_write(t, p, n, ZSTD_e_continue);
    tar_pad(t, n);
}

/* A file copied as it is: exactly size bytes (zeros when it shrank since it was measured). */
static void tar_file(tarz *t, const char *path, const char *src, uint64_t size, uint64_t mtime,
                     char *err, size_t errn)
{
    if (tar_header(t, path, size, mtime, '0') != 0) {
        t->err = 1;
        return;
    }
    FILE *f = fopen(src, "rb");
    if (!f)
        snprintf(err, errn, "%s", strerror(errno));
    static char chunk[1 << 20];
    uint64_t left = size;
    while (left && !t->err) {
        size_t want = left < sizeof chunk ? (size_t)left : sizeof chunk;
        size_t got = f ? fread(chunk, 1, want, f) : 0;
        if (got < want) {
            memset(chunk + got, 0, want - got);
            if (f && !err[0])
                snprintf(err, errn, "it shrank while being copied: zeros added");
        }
        tz_write(t, chunk, want, ZSTD_e_continue);
        left -= want;
    }
    if (f)
        fclose(f);
    tar_pad(t, size);
}

static int write_bundle(const bundle *B, const gmp_strbuf *manifest, FILE *f)
{
    tarz t = {f, ZSTD_createCCtx(), NULL, ZSTD_CStreamOutSize(), 0};
    t.obuf = malloc(t.ocap);
    if (!t.cc || !t.obuf) {
        ZSTD_freeCCtx(t.cc);
        free(t.obuf);
        return -1;
    }
    ZSTD_CCtx_setParameter(t.cc, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(t.cc, ZSTD_c_checksumFlag, 1);
    char path[256];
    uint64_t now = (uint64_t)B->now;
    snprintf(path, sizeof path, "%s/", B->top);
    tar_header(&t, path, 0, now, '5');
    snprintf(path, sizeof path, "%s/MANIFEST.txt", B->top);
    tar_text(&t, path, manifest->p, manifest->n, now);
    char made_dir[128] = "";
    for (size_t i = 0; i < B->n && !t.err; i++) {
        const member *m = &B->m[i];
        if (!m->included)
            continue;
        const char *slash = strchr(m->name, '/');
        if (slash && (strlen(made_dir) != (size_t)(slash - m->name) ||
                      strncmp(made_dir, m->name, (size_t)(slash - m->name)) != 0)) {
            snprintf(made_dir, sizeof made_dir, "%.*s", (int)(slash - m->name), m->name);
            snprintf(path, sizeof path, "%s/%s/", B->top, made_dir);
            tar_header(&t, path, 0, now, '5');
        }
        snprintf(path, sizeof path, "%s/%s", B->top, m->name);
        if (m->file) {
            char err[256] = "";
            tar_file(&t, path, m->file, m->size, m->mtime, err, sizeof err);
            if (err[0])
                fprintf(stderr, "gpumemprof diagnose: warning: %s: %s\n", m->name, err);
        } else {
            tar_text(&t, path, m->text.p, m->text.n, m->mtime);
        }
    }
    static const char end[1024];
    tz_write(&t, end, sizeof end, ZSTD_e_continue);
    tz_write(&t, NULL, 0, ZSTD_e_end);
    ZSTD_freeCCtx(t.cc);
    free(t.obuf);
    return t.err ? -1 : 0;
}

/* ---- command ---- */

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Writes one zstd-compressed tar file to attach to a bug report (open it with\n"
           "`tar --zstd -xf FILE` or `zstd -dc FILE | tar x`): MANIFEST.txt (what is inside\n"
           "and why, what a bound left out), gpumemprof's version, this command line, the\n"
           "environment, what `gpumemprof info` finds, and per recording the file itself and\n"
           "its report as text and JSON. With no FILE: the newest %d gpumemprof.*.zst files\n"
           "in the current directory. Environment variables whose name contains TOKEN, KEY,\n"
           "SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH, such values on the command line and\n"
           "in the reports (--NAME=VALUE, --NAME VALUE), and user:password in URLs are replaced\n"
           "by <redacted>; recordings are copied as they are.\n"
           "Default output: gpumemprof-diagnose-YYYYmmdd-HHMMSS.tar.zst (UTC; SOURCE_DATE_EPOCH\n"
           "sets the time), never overwritten; -o FILE replaces FILE.\n\n",
           cmd->summary, MAX_AUTO);
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 when the bundle was written (also when a FILE cannot be read or is\n"
           "not a recording: the manifest says why and a warning is printed), 1 when it cannot\n"
           "be written or the default output exists, 2 for bad arguments. See docs/diagnose.md.\n");
}

static void free_strings(char **s)
{
    for (size_t i = 0; s && s[i]; i++)
        free(s[i]);
    free(s);
}

static void free_all(bundle *B, input *in, size_t nin, char **env, char *tmpdir)
{
    for (size_t i = 0; i < B->n; i++) {
        free(B->m[i].text.p);
        free(B->m[i].file);
    }
    free(B->m);
    for (size_t i = 0; i < nin; i++)
        free(in[i].path);
    free(in);
    free_strings(env);
    if (tmpdir && tmpdir[0])
        rmdir(tmpdir);
}

static char **copy_environment(void)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env)
        return NULL;
    for (size_t i = 0, k = 0; i < n; i++)
        if ((env[k] = strdup(environ[i])) != NULL)
            k++;
    return env;
}

/* Writes the bundle into a temporary file beside out, then moves it to out: replacing it when
 * replace, else only when out does not exist. */
static int write_output(const bundle *B, const gmp_strbuf *manifest, const char *out, int replace)
{
    char tmp[PATH_MAX];
    const char *slash = strrchr(out, '/');
    int dl = slash ? (int)(slash - out + 1) : 0;
    if (snprintf(tmp, sizeof tmp, "%.*s.%s.XXXXXX", dl, out, slash ? slash + 1 : out) >=
        (int)sizeof tmp) {
        fprintf(stderr, "gpumemprof diagnose: %s: name too long\n", out);
        return 1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "gpumemprof diagnose: %s: %s\n", out, strerror(errno));
        return 1;
    }
    fchmod(fd, 0644);
    FILE *f = fdopen(fd, "wb");
    int bad = !f || write_bundle(B, manifest, f) != 0;
    if (f)
        bad |= fclose(f) != 0;
    else
        close(fd);
    if (bad) {
        unlink(tmp);
        fprintf(stderr, "gpumemprof diagnose: %s: cannot be written\n", out);
        return 1;
    }
    int e = replace ? rename(tmp, out) : link(tmp, out);
    int saved = errno;
    if (e != 0 || !replace)
        unlink(tmp);
    if (e != 0) {
        fprintf(stderr, "gpumemprof diagnose: %s: %s%s\n", out, strerror(saved),
                saved == EEXIST ? " (not overwritten; -o FILE replaces it)" : "");
        return 1;
    }
    return 0;
}

/* version.txt, command-line.txt, environment.txt, info.txt and info.json. */
static void add_texts(bundle *B, int argc, char **redacted, char **env)
{
    gmp_strbuf t = {0};
    make_version(&t);
    add_text(B, "version.txt", "gpumemprof's version, libzstd's, the system (uname)", &t);
    t.n = 0;
    make_cmdline(&t, argc, redacted);
    add_text(B, "command-line.txt", "this command (secrets redacted) and its working directory",
             &t);
    t.n = 0;
    make_environment(&t, env, &B->red);
    add_text(B, "environment.txt", "the environment, sorted (secrets redacted)", &t);
    for (int json = 0; json < 2; json++) {
        t.n = 0;
        int irc = capture_fd(1, &t, run_info, &json);
        char what[128];
        snprintf(what, sizeof what, "gpumemprof info%s (exit status %d)", json ? " --json" : "",
                 irc);
        add_text(B, json ? "info.json" : "info.txt", what, &t);
    }
    free(t.p);
}

/* Recording idx (from 1): its reports and the file itself, or why it could not be read. Returns
 * the warnings printed (0 or 1). */
static int add_recording(bundle *B, input *x, size_t idx, const char *tmpdir)
{
    struct stat sb;
    int st = x->path ? stat(x->path, &sb) : -1;
    if (!x->path)
        snprintf(x->error, sizeof x->error, "out of memory");
    else if (st != 0)
        snprintf(x->error, sizeof x->error, "%s", strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        snprintf(x->error, sizeof x->error, "not a regular file");
    if (x->error[0]) {
        fprintf(stderr, "gpumemprof diagnose: warning: %s: %s (listed in the manifest)\n", x->shown,
                x->error);
        return 1;
    }
    x->size = (uint64_t)sb.st_size;
    /* read through cli_input, by content, like report: a snapshot or an export is imported
     * once here, and both reports read that import; one that cannot be opened is still
     * reported on, so that report-messages.txt says why */
    gmp_cli_input ci;
    char cmsg[512];
    int opened = gmp_cli_input_open(&ci, x->path, cmsg, sizeof cmsg) == GMP_OK;
    if (opened) {
        x->kind = gmp_cli_input_kind_name(ci.kind);
        gmp_cli_input_share(&ci);
    }
    add_reports(B, x, idx, tmpdir);
    if (opened) {
        gmp_cli_input_unshare(&ci);
        gmp_cli_input_close(&ci);
    }
    if (x->report_failed) {
        fprintf(stderr,
                "gpumemprof diagnose: warning: %s: gpumemprof report failed on it (its "
                "messages are in the bundle)\n",
                x->shown);
    }
    char base[96], name[128], what[640];
    member_base(x->shown, base, sizeof base);
    snprintf(name, sizeof name, "recording-%zu/%s", idx, base);
    snprintf(what, sizeof what, "recording %zu, %s", idx, x->shown);
    member *m = add_member(B, name, what);
    if (m) {
        m->file = strdup(x->path);
        m->size = x->size;
        m->mtime = (uint64_t)(sb.st_mtime > 0 ? sb.st_mtime : 0);
        if (!m->file)
            snprintf(m->left, sizeof m->left, "out of memory");
    }
    return x->report_failed ? 1 : 0;
}

/* The manifest on stdout (--list), or the bundle written to out (else default_out). Returns the
 * exit status. */
static int deliver(const bundle *B, const gmp_strbuf *manifest, int list, const char *out,
                   const char *default_out, size_t nin, int warnings)
{
    int status = 0;
    if (manifest->oom) {
        fprintf(stderr, "gpumemprof diagnose: out of memory\n");
        status = 1;
    } else if (list) {
        fwrite(manifest->p, 1, manifest->n, stdout);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "gpumemprof diagnose: cannot write the output\n");
            status = 1;
        }
    } else {
        const char *path = out ? out : default_out;
        status = write_output(B, manifest, path, out != NULL);
        if (status == 0)
            fprintf(stderr, "gpumemprof diagnose: wrote %s (%zu recording(s)%s)\n", path, nin,
                    warnings ? ", with warnings: see MANIFEST.txt" : "");
    }
    return status;
}

int gmp_cmd_diagnose(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    /* what the command line and the environment were, before anything changes them */
    char **args = malloc((size_t)argc * sizeof *args);
    if (!args) {
        fprintf(stderr, "gpumemprof diagnose: out of memory\n");
        return 1;
    }
    memcpy(args, argv, (size_t)argc * sizeof *args);

    const char *out = NULL;
    int list = 0, npos = 0;
    uint64_t max_file = DEFAULT_MAX_FILE, max_total = DEFAULT_MAX_TOTAL;
    const gmp_cli_opt opts[] = {
        {"output", 'o', GMP_CLI_STRING, &out, "FILE", "write the bundle to FILE (replacing it)", 0},
        {"list", 0, GMP_CLI_FLAG, &list, NULL, "print the manifest; write nothing", 0},
        {"max-file", 0, GMP_CLI_SIZE, &max_file, "SIZE",
         "largest file taken into the bundle (default 64M)", 0},
        {"max-total", 0, GMP_CLI_SIZE, &max_total, "SIZE",
         "most bytes taken into the bundle in all (default 256M)", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc == GMP_CLI_GO && npos > MAX_INPUTS)
        rc = gmp_cli_usage_error(cmd, "more than %d FILEs", MAX_INPUTS);
    if (rc != GMP_CLI_GO) {
        free(args);
        return rc;
    }
    if (out && (!*out || strcmp(out, "-") == 0)) {
        free(args);
        return gmp_cli_usage_error(cmd, "-o: a file name is needed (not stdout)");
    }

    bundle B;
    memset(&B, 0, sizeof B);
    B.max_file = max_file;
    B.max_total = max_total;
    B.now = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    int64_t epoch;
    if (sde && *sde && gmp_cli_parse_int(sde, &epoch) == 0 && epoch >= 0)
        B.now = (time_t)epoch;
    struct tm tm;
    char stamp[32], default_out[sizeof B.top + 16];
    gmtime_r(&B.now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(B.top, sizeof B.top, "gpumemprof-diagnose-%s", stamp);
    snprintf(default_out, sizeof default_out, "%s.tar.zst", B.top);
    if (!out && !list && access(default_out, F_OK) == 0) {
        fprintf(stderr, "gpumemprof diagnose: %s: exists (not overwritten; -o FILE replaces it)\n",
                default_out);
        free(args);
        return 1;
    }
    char **env = copy_environment();
    char **redacted = redact_args(argc, args, &B.red);

    /* the inputs */
    char *picked[MAX_AUTO];
    gmp_strbuf notes = {0};
    size_t nin = npos ? (size_t)npos : pick_recent(picked, &notes);
    input *in = calloc(nin ? nin : 1, sizeof *in);
    for (size_t i = 0; i < nin; i++)
        if (in)
            in[i].path = npos ? strdup(argv[1 + i]) : picked[i];
        else if (!npos)
            free(picked[i]);
    char tmpdir[PATH_MAX] = "";
    const char *td = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/gpumemprof-diagnose-XXXXXX", td && *td ? td : "/tmp");
    if (!in || !env || !redacted || !mkdtemp(tmpdir)) {
        fprintf(stderr, "gpumemprof diagnose: %s\n",
                !in || !env || !redacted ? "out of memory" : strerror(errno));
        free_strings(redacted);
        tmpdir[0] = 0;
        free_all(&B, in, in ? nin : 0, env, tmpdir);
        free(notes.p);
        free(args);
        return 1;
    }

    add_texts(&B, argc, redacted, env);

    /* the recordings and their reports */
    int warnings = 0;
    for (size_t i = 0; i < nin; i++) {
        /* shown as on the redacted command line (the same pointer, moved by the parser) */
        input *x = &in[i];
        snprintf(x->shown, sizeof x->shown, "%s", x->path ? x->path : "");
        for (int k = 0; npos && k < argc; k++)
            if (args[k] == argv[1 + i])
                snprintf(x->shown, sizeof x->shown, "%s", redacted[k]);
        warnings += add_recording(&B, x, i + 1, tmpdir);
    }
    apply_bounds(&B);

    gmp_strbuf raw = {0}, manifest = {0};
    make_manifest(&raw, &B, in, nin, !npos, &notes);
    redact_urls(&manifest, raw.p, raw.n); /* the names in it are already redacted: a safety net */
    free(raw.p);
    free(notes.p);
    int status = deliver(&B, &manifest, list, out, default_out, nin, warnings);
    free(manifest.p);
    free_all(&B, in, nin, env, tmpdir);
    free_strings(redacted);
    free(args);
    return status;
}
