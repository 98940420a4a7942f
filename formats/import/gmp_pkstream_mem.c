/* gmp_pkstream_mem: the streaming pickle reader's memory (gmp_pkstream_impl.h): every allocation
 * is charged against gmp_pickle_limits.max_memory (charge), objects and small arrays come from
 * free lists carved from slabs, and an object is freed when its last reference goes (obj_free).
 * Errors are recorded once, with the offset of the opcode being read (fail). */
#include "gmp_pkstream_impl.h"

__attribute__((format(printf, 3, 4))) int gmp_pks_fail(gmp_pkstream *P, gmp_err code,
                                                       const char *fmt, ...)
{
    if (P->code != GMP_OK)
        return -1;
    P->code = code;
    if (P->err && P->errlen) {
        int k = snprintf(P->err, P->errlen, "pickle: offset %zu: ", P->op_off);
        if (k >= 0 && (size_t)k < P->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(P->err + k, P->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

void *gmp_pks_xalloc(gmp_pkstream *P, size_t n)
{
    if (charge(P, n) < 0)
        return NULL;
    void *r = malloc(n ? n : 1);
    if (!r) {
        uncharge(P, n);
        gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
    }
    return r;
}

void gmp_pks_xfree(gmp_pkstream *P, void *p, size_t n)
{
    if (p) {
        free(p);
        uncharge(P, n);
    }
}

/* The objects and small arrays of the free lists are carved from slabs of SLAB bytes, freed
 * together with the reader: no free() per value (the free lists never give memory back; memory
 * is still counted a value at a time). A slab's first SLAB_HEAD bytes link it to the next one;
 * every value carved is a multiple of 64 bytes from a 64-byte aligned start, so none straddles a
 * cache line it does not need. */
#define SLAB ((size_t)64 << 10)
#define SLAB_HEAD ((size_t)64)
_Static_assert(sizeof(gmp_pkobj) == 64 && (4 * sizeof(gmp_pkv)) % 64 == 0,
               "every slab value is a multiple of 64 bytes");

static void *slab_get(gmp_pkstream *P, size_t size)
{
    if (P->slab_left < size) {
        char *s = aligned_alloc(64, SLAB);
        if (!s)
            return NULL;
        *(void **)s = P->slabs;
        P->slabs = s;
        P->slab_at = s + SLAB_HEAD;
        P->slab_left = SLAB - SLAB_HEAD;
    }
    void *r = P->slab_at;
    P->slab_at += size;
    P->slab_left -= size;
    return r;
}

void *gmp_pks_fl_get(gmp_pkstream *P, freelist *f, size_t size)
{
    void *r = f->head;
    if (charge(P, size) < 0)
        return NULL;
    if (r) {
        f->head = *(void **)r;
        return r;
    }
    r = slab_get(P, (size + 63) & ~(size_t)63);
    if (!r) {
        uncharge(P, size);
        gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
    }
    return r;
}

void gmp_pks_fl_put(gmp_pkstream *P, freelist *f, void *p, size_t size)
{
    *(void **)p = f->head;
    f->head = p;
    uncharge(P, size);
}

void gmp_pks_slabs_free(gmp_pkstream *P)
{
    while (P->slabs) {
        void *n = *(void **)P->slabs;
        free(P->slabs);
        P->slabs = n;
    }
}

static int arr_class(size_t cap)
{
    for (int c = 0; c < 5; c++)
        if (cap == (size_t)4 << c)
            return c;
    return -1;
}

gmp_pkv *gmp_pks_arr_alloc(gmp_pkstream *P, size_t cap)
{
    int c = arr_class(cap);
    if (cap > SIZE_MAX / sizeof(gmp_pkv)) {
        gmp_pks_fail(P, GMP_ERR_LIMIT, "too many values");
        return NULL;
    }
    return c >= 0 ? gmp_pks_fl_get(P, &P->arrs[c], cap * sizeof(gmp_pkv))
                  : gmp_pks_xalloc(P, cap * sizeof(gmp_pkv));
}

void gmp_pks_arr_free(gmp_pkstream *P, gmp_pkv *a, size_t cap)
{
    if (!a)
        return;
    int c = arr_class(cap);
    if (c >= 0)
        gmp_pks_fl_put(P, &P->arrs[c], a, cap * sizeof(gmp_pkv));
    else
        gmp_pks_xfree(P, a, cap * sizeof(gmp_pkv));
}

gmp_pkobj *gmp_pks_obj_new(gmp_pkstream *P, uint8_t type)
{
    gmp_pkobj *o = gmp_pks_fl_get(P, &P->objs, sizeof *o);
    if (!o)
        return NULL;
    memset(o, 0, sizeof *o);
    o->type = type;
    o->refs = 1;
    return o;
}

void gmp_pks_obj_free(gmp_pkstream *P, gmp_pkobj *o)
{
    if (o->type == GMP_PK_STR || o->type == GMP_PK_BYTES) {
        gmp_pks_xfree(P, o->d.s, (size_t)o->n + 1);
    } else {
        size_t k = o->type == GMP_PK_DICT ? 2 * (size_t)o->n : o->n;
        if (!o->d.items) /* a streamed list: its items were passed on */
            k = 0;
        for (size_t i = 0; i < k; i++)
            unref(P, &o->d.items[i]);
        gmp_pks_arr_free(P, o->d.items, o->type == GMP_PK_DICT ? 2 * (size_t)o->cap : o->cap);
    }
    if (o->pred_key) {
        gmp_pkv kv = {.type = GMP_PK_STR, .v.o = o->pred_key};
        unref(P, &kv);
    }
    gmp_pks_fl_put(P, &P->objs, o, sizeof *o);
}
