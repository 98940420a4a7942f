/* libFuzzer target for the pickle readers (formats/import/gmp_pickle.h: the whole tree;
 * formats/import/gmp_pickle_stream.h: streaming) and the PyTorch snapshot import built on the
 * streaming one (formats/import/gmp_import_torch.h): every byte of a pickle is untrusted.
 *
 * Each input is parsed with small limits (so that the fuzzer reaches the limit paths) and with the
 * default ones; the resulting value graph is walked through every accessor (bounded: shared values
 * may be visited many times); the streaming reader must agree with it on what it accepts (but
 * for its own rules and limits). The streaming reader runs with small and default limits too (and
 * without flat entries, and in one pass, which must give the same outcome), its consumer walking
 * each item handed over, releasing the items of some containers (husk) and, on a byte of the input,
 * stopping the parse; then the same bytes are imported as a snapshot into a trace written to
 * /dev/null. */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gmp_import_torch.h"
#include "pickle_tree.h"
#include "gmp_pickle_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const gmp_pickle_value *v, size_t budget)
{
    size_t used = 1;
    if (!v || budget == 0)
        return used;
    int64_t i64;
    uint64_t u64;
    double f;
    int b;
    size_t len = 0;
    volatile size_t sink = 0;
    sink += gmp_pickle_get_i64(v, &i64) == 0;
    sink += gmp_pickle_get_u64(v, &u64) == 0;
    sink += gmp_pickle_get_f64(v, &f) == 0;
    sink += gmp_pickle_get_bool(v, &b) == 0;
    sink += strlen(gmp_pickle_type_name(v));
    const char *s = gmp_pickle_get_str(v, &len);
    if (s)
        sink += (unsigned char)s[len]; /* the NUL after the bytes */
    sink += gmp_pickle_str_eq(v, "segments");
    size_t n = gmp_pickle_len(v);
    switch (gmp_pickle_type_of(v)) {
    case GMP_PK_LIST:
    case GMP_PK_TUPLE:
        for (size_t i = 0; i <= n && used < budget; i++) /* i == n: out of range */
            used += walk(gmp_pickle_item(v, i), budget - used);
        break;
    case GMP_PK_DICT:
        for (size_t i = 0; i <= n && used < budget; i++) {
            const gmp_pickle_value *val = NULL;
            const gmp_pickle_value *k = gmp_pickle_dict_at(v, i, &val);
            if (!k)
                break;
            used += walk(k, budget - used);
            if (used < budget)
                used += walk(val, budget - used);
            const char *ks = gmp_pickle_get_str(k, &len);
            if (ks && gmp_pickle_type_of(k) == GMP_PK_STR && len == strlen(ks) &&
                gmp_pickle_dict_get(v, ks) == NULL)
                __builtin_trap(); /* a string key must be found again (unless it holds a NUL) */
        }
        sink += gmp_pickle_dict_get(v, "device_traces") != NULL;
        break;
    default: break;
    }
    (void)sink;
    return used;
}

static gmp_err parse(const uint8_t *data, size_t size, const gmp_pickle_limits *lim)
{
    gmp_pickle_value *root = NULL;
    char err[256];
    gmp_err e = gmp_pickle_load_ex(data, size, lim, &root, err, sizeof err);
    if (e == GMP_OK) {
        walk(root, 20000);
        gmp_pickle_free(root);
    } else {
        volatile size_t n = strlen(err);
        (void)n;
    }
    return e;
}

/* The streaming reader in two passes without a consumer: GMP_OK or its error, its message in
 * err. */
static gmp_err stream_plain(const uint8_t *data, size_t size, const gmp_pickle_limits *lim,
                            char *err, size_t errlen)
{
    gmp_pkstream_cb cb = {"segments", "device_traces", NULL, NULL};
    gmp_pkstream *ps = gmp_pkstream_new(lim, &cb);
    if (!ps)
        return GMP_ERR_NOMEM;
    gmp_err e = gmp_pkstream_run_mem(ps, data, size, err, errlen);
    gmp_pkstream_free(ps);
    return e;
}

/* tagged: containers with a tag are not entered (a consumer reads only the tag of what it
 * husked) */
static size_t walk_pkv_ex(const gmp_pkv *v, size_t budget, int tagged)
{
    size_t used = 1;
    if (!v || budget == 0)
        return used;
    if (tagged && v->type >= GMP_PK_LIST && v->v.o->tag)
        return used;
    uint64_t u;
    int64_t i;
    int b;
    size_t len = 0;
    volatile size_t sink = 0;
    sink += gmp_pkv_get_u64(v, &u) == 0;
    sink += gmp_pkv_get_i64(v, &i) == 0;
    sink += gmp_pkv_get_bool(v, &b) == 0;
    sink += strlen(gmp_pkv_type_name(v));
    const char *s = gmp_pkv_str(v, &len);
    if (s)
        sink += (unsigned char)s[len];
    sink += gmp_pkv_str_eq(v, "alloc");
    size_t n = gmp_pkv_len(v);
    if (v->type == GMP_PK_LIST || v->type == GMP_PK_TUPLE) {
        for (size_t k = 0; k <= n && used < budget; k++)
            used += walk_pkv_ex(gmp_pkv_item(v, k), budget - used, tagged);
    } else if (v->type == GMP_PK_DICT) {
        for (size_t k = 0; k < 2 * n && used < budget; k++)
            used += walk_pkv_ex(&v->v.o->d.items[k], budget - used, tagged);
        sink += gmp_pkv_dict_get(v, "frames") != NULL;
    }
    (void)sink;
    return used;
}

static size_t walk_pkv(const gmp_pkv *v, size_t budget)
{
    return walk_pkv_ex(v, budget, 0);
}

typedef struct sctx {
    gmp_pkstream *ps;
    size_t items, stop_at;
    int tagged; /* tag what is husked, and walk no tagged container */
} sctx;

static int on_item(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err,
                   size_t errlen)
{
    sctx *c = ctx;
    (void)kind;
    (void)index;
    walk_pkv_ex(item, 2000, c->tagged);
    /* release the items of a container inside it, as the importer does with frames lists */
    if (item->type == GMP_PK_DICT && item->v.o->n) {
        const gmp_pkv *val = &item->v.o->d.items[1];
        if (val->type >= GMP_PK_LIST) {
            if (c->tagged)
                val->v.o->tag = 1;
            gmp_pkstream_husk(c->ps, val->v.o);
        }
    }
    if (++c->items == c->stop_at) {
        snprintf(err, errlen, "stopped");
        return 1;
    }
    return 0;
}

/* One streaming read (one = 0: two passes; 1: two passes without flat entries,
 * gmp_pkstream_no_flat; 2: in one pass, gmp_pkstream_one_pass keeping "frames" lists; 3: two
 * passes, the consumer tagging what it husks and walking no tagged container): GMP_OK or its
 * error, and the items handed over. */
static gmp_err stream(const uint8_t *data, size_t size, const gmp_pickle_limits *lim, int one,
                      size_t *items)
{
    sctx c = {NULL, 0, size ? 1 + data[size - 1] % 64 : 0, one == 3};
    gmp_pkstream_cb cb = {"segments", "device_traces", on_item, &c};
    c.ps = gmp_pkstream_new(lim, &cb);
    *items = 0;
    if (!c.ps)
        return GMP_ERR_NOMEM;
    if (one == 1)
        gmp_pkstream_no_flat(c.ps);
    else if (one == 2)
        gmp_pkstream_one_pass(c.ps, "frames", 64u << 20);
    char err[256];
    gmp_err e = gmp_pkstream_run_mem(c.ps, data, size, err, sizeof err);
    if (e == GMP_OK)
        walk_pkv(gmp_pkstream_root(c.ps), 20000);
    else {
        volatile size_t n = strlen(err);
        (void)n;
    }
    *items = c.items;
    gmp_pkstream_free(c.ps);
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gmp_pickle_limits small = {8, 64, 1u << 16};
    parse(data, size, &small);
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    lim.max_memory = 256u << 20; /* under the fuzzer's RSS limit */
    gmp_err tree = parse(data, size, &lim);
    /* the two readers agree on what they accept: the product's reader accepts only what the
     * tree accepts (unless the tree ran out of room), and refuses what it accepts only by its
     * own rules or limits */
    char serr[256];
    gmp_err plain = stream_plain(data, size, &lim, serr, sizeof serr);
    if (plain == GMP_OK && tree != GMP_OK && tree != GMP_ERR_LIMIT && tree != GMP_ERR_NOMEM)
        __builtin_trap();
    if (tree == GMP_OK && plain != GMP_OK && !gmp_pickle_stream_rule(plain, serr))
        __builtin_trap();
    size_t n1, n2;
    stream(data, size, &small, 0, &n1);
    stream(data, size, &small, 1, &n1);
    gmp_err two = stream(data, size, &lim, 0, &n2);
    /* the trace entries read flat or as dicts: the same outcome and items */
    if (stream(data, size, &lim, 1, &n1) != two || n1 != n2)
        __builtin_trap();
    /* what one pass reads, two passes read the same (the importer relies on it: it repeats a
     * failed one-pass read in two passes, never the other way round) */
    if (stream(data, size, &lim, 2, &n1) == GMP_OK && (two != GMP_OK || n1 != n2))
        __builtin_trap();
    /* a consumer that reads only the tag of what it husked: the same outcome and items */
    if (stream(data, size, &lim, 3, &n1) != two || n1 != n2)
        __builtin_trap();
    stream(data, size, &small, 2, &n1);
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        gmp_import_torch_stats st;
        char msg[512];
        (void)gmp_import_torch_mem(data, size, "fuzz", fd, &st, msg, sizeof msg); /* closes fd */
    }
    return 0;
}
