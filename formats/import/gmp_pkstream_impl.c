/* gmp_pkstream_impl: what the streaming pickle reader's inlined helpers (gmp_pkstream_impl.h)
 * call out of line. Memory: every allocation is charged against gmp_pickle_limits.max_memory
 * (charge); objects and small arrays come from free lists carved from slabs; an object is freed
 * when its last reference goes (obj_free); containers and the stack grow by doubling. Errors are
 * recorded once, with the offset of the opcode being read (fail). The input: a window [p, end)
 * over the input in memory, or over a file read with pread into a buffer of INBUF bytes that
 * grows (doubling, charged) for an opcode longer than it (fill_slow). And the checks of a store
 * into a container (attach_all). And the accessors of values (gmp_pkv_*, gmp_pickle_stream.h). */
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
    px(o)->refs = 1;
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
        gmp_pks_arr_free(P, o->d.items,
                         o->type == GMP_PK_DICT ? 2 * (size_t)px(o)->cap : px(o)->cap);
    }
    if (px(o)->pred_key) {
        gmp_pkv kv = {.type = GMP_PK_STR, .v.o = px(o)->pred_key};
        unref(P, &kv);
    }
    gmp_pks_fl_put(P, &P->objs, o, sizeof *o);
}

/* ---- input ---- */

/* ---- input ---- */

/* Puts what is left of the window (have bytes at p) at the start of P->buf, grown first (doubling)
 * to hold at least need bytes. */
static int buf_keep(gmp_pkstream *P, size_t need, size_t have)
{
    if (need > P->bufcap) {
        size_t nc = P->bufcap;
        while (nc < need)
            nc *= 2;
        if (charge(P, nc - P->bufcap) < 0)
            return -1;
        unsigned char *nb = malloc(nc);
        if (!nb) {
            uncharge(P, nc - P->bufcap);
            return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
        }
        memcpy(nb, P->p, have);
        free(P->buf);
        P->buf = nb;
        P->bufcap = nc;
    } else if (have && P->p != P->buf) {
        memmove(P->buf, P->p, have);
    }
    return 0;
}

/* Makes at least k bytes available at p; -1 (truncated, or an I/O error) when the input has
 * fewer. */
int gmp_pks_fill_slow(gmp_pkstream *P, size_t k)
{
    if (P->fd < 0)
        return -1;
    uint64_t off = P->base + (uint64_t)(P->p - P->start);
    if (k > P->size - off)
        return -1;
    size_t have = (size_t)(P->end - P->p);
    if (buf_keep(P, k, have) < 0)
        return -1;
    P->start = P->p = P->buf;
    P->end = P->buf + have;
    P->base = off;
    while ((size_t)(P->end - P->p) < k) {
        size_t room = P->bufcap - (size_t)(P->end - P->buf);
        ssize_t r = pread(P->fd, (void *)P->end, room, (off_t)(off + (uint64_t)(P->end - P->p)));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gmp_pks_fail(P, GMP_ERR_IO, "cannot read the input: %s", strerror(errno));
        if (r == 0)
            return -1;
        P->end += r;
    }
    return 0;
}

void gmp_pks_input_reset(gmp_pkstream *P)
{
    if (P->fd >= 0) {
        P->start = P->p = P->end = P->buf;
    } else {
        P->start = P->p = P->data;
        P->end = P->data + P->size;
    }
    P->base = 0;
}

/* ---- containers and the stack ---- */

int gmp_pks_push_slow(gmp_pkstream *P, gmp_pkv v)
{
    {
        size_t nc = P->scap ? P->scap * 2 : 64;
        if (charge(P, (nc - P->scap) * sizeof *P->stack) < 0) {
            unref(P, &v);
            return -1;
        }
        gmp_pkv *n = realloc(P->stack, nc * sizeof *n);
        if (!n) {
            unref(P, &v);
            return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
        }
        P->stack = n;
        P->scap = nc;
    }
    P->stack[P->sn++] = v;
    return 0;
}

/* Checks that child (a value about to be stored in parent, under key or at index) may be: it is
 * sealed, the nesting bound holds, and a streamed list goes where it was predicted. */
__attribute__((noinline)) int gmp_pks_attach_all(gmp_pkstream *P, gmp_pkobj *parent,
                                                 const gmp_pkv *child, const gmp_pkv *key,
                                                 size_t index)
{
    uint32_t h = 1;
    if (is_obj(child)) {
        gmp_pkobj *c = child->v.o;
        if (c == parent)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "a %s contains itself", tname(child));
        if (c->type >= GMP_PK_LIST && !px(c)->sealed)
            px(c)->sealed = 1;
        h = px(c)->height + 1;
        if (px(c)->role && px(c)->role != R_ROOT) {
            int ok = !(c->flags & F_ATTACHED) && px(c)->pred_parent == parent;
            if (ok && px(c)->pred_key)
                ok = key && is_obj(key) && key->v.o->type == GMP_PK_STR &&
                     key->v.o->n == px(c)->pred_key->n &&
                     memcmp(key->v.o->d.s, px(c)->pred_key->d.s, px(c)->pred_key->n) == 0;
            else if (ok)
                ok = !key && index == px(c)->role_index;
            if (!ok)
                return gmp_pks_fail(
                    P, GMP_ERR_FORMAT,
                    "a list whose items were read as they came is stored elsewhere than "
                    "its place in the stack said (a pickle shaped unlike a snapshot)");
            c->flags |= F_ATTACHED;
            P->roles_pending--;
        } else if (px(c)->role == R_ROOT) {
            return gmp_pks_fail(P, GMP_ERR_FORMAT,
                                "the first value of the pickle is stored in another");
        }
    }
    if (h > px(parent)->height) {
        px(parent)->height = h;
        if (h > P->lim.max_depth)
            return gmp_pks_fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu",
                                P->lim.max_depth);
    }
    if (px(parent)->role == R_ROOT && parent->type == GMP_PK_DICT && key && is_obj(key)) {
        unsigned f = P->cb.list_key && str_eq_obj(key->v.o, P->cb.list_key)     ? F_SEGS_SET
                     : P->cb.lists_key && str_eq_obj(key->v.o, P->cb.lists_key) ? F_TRACES_SET
                                                                                : 0;
        if (f && (parent->flags & f))
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "the key '%s' is set twice", key->v.o->d.s);
        parent->flags |= (uint8_t)f;
    }
    return 0;
}

int gmp_pks_reserve(gmp_pkstream *P, gmp_pkobj *c, size_t add)
{
    size_t per = c->type == GMP_PK_DICT ? 2 : 1;
    if (add > MAX_ITEMS || c->n + add > MAX_ITEMS)
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "container with more than %u entries",
                            (unsigned)MAX_ITEMS);
    size_t need = c->n + add;
    if (need <= px(c)->cap)
        return 0;
    size_t nc = px(c)->cap ? px(c)->cap : 4;
    while (nc < need)
        nc *= 2;
    if (nc > MAX_ITEMS)
        nc = MAX_ITEMS;
    gmp_pkv *ni = gmp_pks_arr_alloc(P, nc * per);
    if (!ni)
        return -1;
    if (c->n)
        memcpy(ni, c->d.items, (size_t)c->n * per * sizeof *ni);
    gmp_pks_arr_free(P, c->d.items, (size_t)px(c)->cap * per);
    c->d.items = ni;
    px(c)->cap = (uint32_t)nc;
    return 0;
}

/* ---- accessors ---- */

const char *gmp_pkv_type_name(const gmp_pkv *v)
{
    switch (v ? v->type : GMP_PK_NONE) {
    case GMP_PK_NONE: return "None";
    case GMP_PK_BOOL: return "bool";
    case GMP_PK_INT: return "int";
    case GMP_PK_FLOAT: return "float";
    case GMP_PK_STR: return "str";
    case GMP_PK_BYTES: return "bytes";
    case GMP_PK_LIST: return "list";
    case GMP_PK_TUPLE: return "tuple";
    case GMP_PK_DICT: return "dict";
    }
    return "?";
}

const gmp_pkv *gmp_pkv_dict_get(const gmp_pkv *d, const char *key)
{
    if (!d || d->type != GMP_PK_DICT || !key)
        return NULL;
    size_t kl = strlen(key);
    const gmp_pkobj *o = d->v.o;
    const gmp_pkv *r = NULL;
    for (uint32_t i = 0; i < o->n; i++) {
        const gmp_pkv *k = &o->d.items[2 * (size_t)i];
        if (k->type == GMP_PK_STR && k->v.o->n == kl && memcmp(k->v.o->d.s, key, kl) == 0)
            r = &o->d.items[2 * (size_t)i + 1];
    }
    return r;
}

const gmp_pkv *gmp_pkv_item(const gmp_pkv *v, size_t i)
{
    if (!v || (v->type != GMP_PK_LIST && v->type != GMP_PK_TUPLE) || streams(v->v.o) ||
        i >= v->v.o->n)
        return NULL;
    return &v->v.o->d.items[i];
}

size_t gmp_pkv_len(const gmp_pkv *v)
{
    if (!v || (v->type != GMP_PK_LIST && v->type != GMP_PK_TUPLE && v->type != GMP_PK_DICT))
        return 0;
    return v->v.o->n;
}

int gmp_pkv_get_u64(const gmp_pkv *v, uint64_t *out)
{
    if (!v || (v->type != GMP_PK_INT && v->type != GMP_PK_BOOL))
        return -1;
    if (v->big) {
        *out = v->v.u;
        return 0;
    }
    if (v->v.i < 0)
        return -1;
    *out = (uint64_t)v->v.i;
    return 0;
}

int gmp_pkv_get_i64(const gmp_pkv *v, int64_t *out)
{
    if (!v || (v->type != GMP_PK_INT && v->type != GMP_PK_BOOL) || v->big)
        return -1;
    *out = v->v.i;
    return 0;
}

int gmp_pkv_get_bool(const gmp_pkv *v, int *out)
{
    if (!v || v->type != GMP_PK_BOOL)
        return -1;
    *out = v->v.i != 0;
    return 0;
}

const char *gmp_pkv_str(const gmp_pkv *v, size_t *len)
{
    if (!v || v->type != GMP_PK_STR)
        return NULL;
    if (len)
        *len = v->v.o->n;
    return v->v.o->d.s;
}

int gmp_pkv_str_eq(const gmp_pkv *v, const char *s)
{
    return v && v->type == GMP_PK_STR && str_eq_obj(v->v.o, s);
}
