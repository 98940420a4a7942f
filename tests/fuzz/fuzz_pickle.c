/* libFuzzer target for the pickle reader (formats/import/gmp_pickle.h) and the PyTorch snapshot
 * import built on it (formats/import/gmp_import_torch.h): every byte of a pickle is untrusted.
 *
 * Each input is parsed with small limits (so that the fuzzer reaches the limit paths) and with the
 * default ones; the resulting value graph is walked through every accessor (bounded: shared values
 * may be visited many times), then the same bytes are imported as a snapshot into a trace written
 * to /dev/null. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gmp_import_torch.h"
#include "gmp_pickle.h"

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

static void parse(const uint8_t *data, size_t size, const gmp_pickle_limits *lim)
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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gmp_pickle_limits small = {8, 64, 1u << 16};
    parse(data, size, &small);
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    lim.max_memory = 256u << 20; /* under the fuzzer's RSS limit */
    parse(data, size, &lim);
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        gmp_import_torch_stats st;
        char msg[512];
        (void)gmp_import_torch_mem(data, size, "fuzz", fd, &st, msg, sizeof msg); /* closes fd */
    }
    return 0;
}
