/* pickle_tree: the tests' whole-tree pickle reader, the oracle the streaming reader of the product
 * (formats/import/gmp_pickle_stream.h) is checked against. See pickle_tree.h and docs/pickle.md.
 *
 * The parse follows CPython's Unpickler (Lib/pickle.py) for the opcodes it accepts: a value stack
 * split by MARKs, and a memo indexed by integers. Values live in an arena freed at once; containers
 * grow inside it (a list that doubles leaves its old array behind: at most twice the final size,
 * counted in the memory bound). After STOP one depth-first pass over what the root reaches refuses
 * cycles and too deep nesting, and gives each dict its final form (string keys unique, a sorted
 * index for lookups). */
#include "pickle_tree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gmp_pickle_value {
    uint8_t type;
    uint8_t big;   /* INT: the value is >= 2^63 and held in v.u */
    uint8_t color; /* depth-first pass: 0 not seen, 1 on the path, 2 done */
    uint32_t n;    /* STR/BYTES: length; LIST/TUPLE: items; DICT: pairs */
    uint32_t cap;  /* LIST: item capacity; DICT: pair capacity */
    uint32_t height;
    union {
        int64_t i;
        uint64_t u;
        double f;
        char *s;
        gmp_pickle_value **items; /* DICT: key0, value0, key1, value1, ... */
    } v;
    uint32_t *index; /* DICT with more than SMALL_DICT pairs: pair numbers sorted by string key */
};

#define SMALL_DICT 8
#define MAX_ITEMS (UINT32_MAX / 2)

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} chunk;

/* What gmp_pickle_load returns: a copy of the root value, then the arena. */
typedef struct doc {
    gmp_pickle_value root; /* first member: a root pointer is the doc pointer */
    chunk *chunks;
} doc;

typedef struct parser {
    const unsigned char *base, *p, *end;
    size_t op_off; /* offset of the opcode being parsed */
    gmp_pickle_limits lim;
    size_t mem;
    chunk *chunks;
    gmp_pickle_value **stack;
    size_t sn, scap;
    size_t *marks;
    size_t mn, mcap;
    gmp_pickle_value **memo;
    size_t memo_len, memo_cap, memo_count;
    char *err;
    size_t errlen;
    gmp_err code;
} parser;

__attribute__((format(printf, 3, 4))) static gmp_err fail(parser *P, gmp_err code, const char *fmt,
                                                          ...)
{
    if (P->code != GMP_OK)
        return P->code;
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
    return code;
}

/* ---- memory ---- */

static int charge(parser *P, size_t add)
{
    if (add > P->lim.max_memory || P->mem > P->lim.max_memory - add) {
        fail(P, GMP_ERR_LIMIT, "more than %zu bytes of memory needed (limit)", P->lim.max_memory);
        return -1;
    }
    P->mem += add;
    return 0;
}

static void *arena_alloc(parser *P, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    chunk *c = P->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > (64u << 10) ? size : (64u << 10);
        if (cap > SIZE_MAX - sizeof(chunk) || charge(P, cap + sizeof(chunk)) < 0)
            return NULL;
        chunk *nc = malloc(sizeof(chunk) + cap);
        if (!nc) {
            fail(P, GMP_ERR_NOMEM, "out of memory");
            return NULL;
        }
        nc->cap = cap;
        nc->used = 0;
        if (c && size > (64u << 10)) {
            /* a big block gets a chunk of its own behind the current one, which stays in use */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            P->chunks = nc;
        }
        c = nc;
    }
    void *r = c->data + c->used;
    c->used += size;
    return r;
}

static void chunks_free(chunk *c)
{
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* Grows a malloc'ed parser array (stack, marks, memo) to hold at least need elements. */
static int grow(parser *P, void **arr, size_t *cap, size_t need, size_t esz)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / esz) {
            fail(P, GMP_ERR_LIMIT, "too many values");
            return -1;
        }
        nc *= 2;
    }
    if (charge(P, (nc - *cap) * esz) < 0)
        return -1;
    void *na = realloc(*arr, nc * esz);
    if (!na) {
        fail(P, GMP_ERR_NOMEM, "out of memory");
        return -1;
    }
    *arr = na;
    *cap = nc;
    return 0;
}

/* ---- values ---- */

static gmp_pickle_value *new_value(parser *P, gmp_pickle_type t)
{
    gmp_pickle_value *v = arena_alloc(P, sizeof *v);
    if (!v)
        return NULL;
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)t;
    return v;
}

static int push(parser *P, gmp_pickle_value *v)
{
    if (!v)
        return -1;
    if (grow(P, (void **)&P->stack, &P->scap, P->sn + 1, sizeof *P->stack) < 0)
        return -1;
    P->stack[P->sn++] = v;
    return 0;
}

static size_t mark_base(const parser *P)
{
    return P->mn ? P->marks[P->mn - 1] : 0;
}

static gmp_pickle_value *pop(parser *P)
{
    if (P->sn <= mark_base(P)) {
        fail(P, GMP_ERR_FORMAT, "stack underflow");
        return NULL;
    }
    return P->stack[--P->sn];
}

static gmp_pickle_value *top(parser *P)
{
    if (P->sn <= mark_base(P)) {
        fail(P, GMP_ERR_FORMAT, "stack underflow");
        return NULL;
    }
    return P->stack[P->sn - 1];
}

/* Pops the topmost mark; *first receives the index of the first item above it. */
static int pop_mark(parser *P, size_t *first)
{
    if (!P->mn) {
        fail(P, GMP_ERR_FORMAT, "no MARK on the stack");
        return -1;
    }
    *first = P->marks[--P->mn];
    return 0;
}

/* Ensures a LIST or DICT holds room for add more entries (pairs for a dict). */
static int reserve_items(parser *P, gmp_pickle_value *c, size_t add)
{
    size_t per = c->type == GMP_PK_DICT ? 2 : 1;
    if (add > MAX_ITEMS || c->n + add > MAX_ITEMS) {
        fail(P, GMP_ERR_LIMIT, "container with more than %u entries", (unsigned)MAX_ITEMS);
        return -1;
    }
    size_t need = c->n + add;
    if (need <= c->cap)
        return 0;
    size_t nc = c->cap ? c->cap : 4;
    while (nc < need)
        nc *= 2;
    if (nc > MAX_ITEMS)
        nc = MAX_ITEMS;
    gmp_pickle_value **ni = arena_alloc(P, nc * per * sizeof *ni);
    if (!ni)
        return -1;
    if (c->n)
        memcpy(ni, c->v.items, c->n * per * sizeof *ni);
    c->v.items = ni;
    c->cap = (uint32_t)nc;
    return 0;
}

static int is_scalar(const gmp_pickle_value *k)
{
    return k->type == GMP_PK_NONE || k->type == GMP_PK_BOOL || k->type == GMP_PK_INT ||
           k->type == GMP_PK_FLOAT || k->type == GMP_PK_STR || k->type == GMP_PK_BYTES;
}

/* Keys must be hashable: scalars, or tuples of scalars (deeper tuples are not needed here). */
static int check_key(parser *P, const gmp_pickle_value *k)
{
    if (is_scalar(k))
        return 0;
    if (k->type == GMP_PK_TUPLE) {
        for (uint32_t i = 0; i < k->n; i++)
            if (!is_scalar(k->v.items[i]))
                goto bad;
        return 0;
    }
bad:
    fail(P, GMP_ERR_FORMAT, "dict key of type %s not accepted", gmp_pickle_type_name(k));
    return -1;
}

static int dict_set(parser *P, gmp_pickle_value *d, gmp_pickle_value *k, gmp_pickle_value *v)
{
    if (check_key(P, k) < 0 || reserve_items(P, d, 1) < 0)
        return -1;
    d->v.items[2 * (size_t)d->n] = k;
    d->v.items[2 * (size_t)d->n + 1] = v;
    d->n++;
    return 0;
}

/* A new LIST or TUPLE from stack[first..sn), which are popped. */
static int build_seq(parser *P, gmp_pickle_type t, size_t first)
{
    size_t n = P->sn - first;
    gmp_pickle_value *c = new_value(P, t);
    if (!c)
        return -1;
    if (n) {
        if (n > MAX_ITEMS) {
            fail(P, GMP_ERR_LIMIT, "container with more than %u entries", (unsigned)MAX_ITEMS);
            return -1;
        }
        c->v.items = arena_alloc(P, n * sizeof *c->v.items);
        if (!c->v.items)
            return -1;
        memcpy(c->v.items, P->stack + first, n * sizeof *c->v.items);
        c->n = c->cap = (uint32_t)n;
    }
    P->sn = first;
    return push(P, c);
}

/* ---- input ---- */

static const unsigned char *take(parser *P, size_t n)
{
    if ((size_t)(P->end - P->p) < n) {
        fail(P, GMP_ERR_TRUNCATED, "input ends inside an opcode's argument");
        return NULL;
    }
    const unsigned char *r = P->p;
    P->p += n;
    return r;
}

static uint64_t le(const unsigned char *b, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | b[i];
    return v;
}

/* A length argument of w bytes, checked against what is left of the input. */
static int take_len(parser *P, size_t w, size_t *len)
{
    const unsigned char *b = take(P, w);
    if (!b)
        return -1;
    uint64_t n = le(b, w);
    if (n > (uint64_t)(P->end - P->p)) {
        fail(P, GMP_ERR_TRUNCATED, "length %llu runs past the end of the input",
             (unsigned long long)n);
        return -1;
    }
    if (n >= UINT32_MAX) {
        fail(P, GMP_ERR_LIMIT, "string of %llu bytes (limit 4 GiB)", (unsigned long long)n);
        return -1;
    }
    *len = (size_t)n;
    return 0;
}

static int push_int(parser *P, int64_t i)
{
    gmp_pickle_value *v = new_value(P, GMP_PK_INT);
    if (!v)
        return -1;
    v->v.i = i;
    return push(P, v);
}

/* LONG1/LONG4: n bytes of little-endian two's complement. */
static int push_long(parser *P, const unsigned char *b, size_t n)
{
    gmp_pickle_value *v = new_value(P, GMP_PK_INT);
    if (!v)
        return -1;
    int big = 0;
    if (gmp_pickle_decode_long(b, n, &v->v.i, &v->v.u, &big) < 0) {
        fail(P, GMP_ERR_FORMAT, "integer outside [-2^63, 2^64)");
        return -1;
    }
    v->big = big;
    return push(P, v);
}

static int push_bytes(parser *P, gmp_pickle_type t, size_t len)
{
    gmp_pickle_value *v = new_value(P, t);
    if (!v)
        return -1;
    const unsigned char *b = take(P, len);
    if (!b)
        return -1;
    char *s = arena_alloc(P, len + 1);
    if (!s)
        return -1;
    memcpy(s, b, len);
    s[len] = 0;
    v->v.s = s;
    v->n = (uint32_t)len;
    return push(P, v);
}

static int memo_put(parser *P, uint64_t key)
{
    gmp_pickle_value *v = top(P);
    if (!v)
        return -1;
    if (key >= P->lim.max_memo) {
        fail(P, GMP_ERR_LIMIT, "memo index %llu (limit %zu)", (unsigned long long)key,
             P->lim.max_memo);
        return -1;
    }
    size_t k = (size_t)key;
    if (k >= P->memo_len) {
        size_t old = P->memo_cap;
        if (grow(P, (void **)&P->memo, &P->memo_cap, k + 1, sizeof *P->memo) < 0)
            return -1;
        if (P->memo_cap > old)
            memset(P->memo + old, 0, (P->memo_cap - old) * sizeof *P->memo);
        P->memo_len = k + 1;
    }
    if (!P->memo[k])
        P->memo_count++;
    P->memo[k] = v;
    return 0;
}

static int memo_get(parser *P, uint64_t key)
{
    if (key >= P->memo_len || !P->memo[key]) {
        fail(P, GMP_ERR_FORMAT, "memo key %llu not defined", (unsigned long long)key);
        return -1;
    }
    return push(P, P->memo[key]);
}

/* ---- the parse ---- */

static int step(parser *P, int *stop)
{
    P->op_off = (size_t)(P->p - P->base);
    if (P->p >= P->end)
        return fail(P, GMP_ERR_TRUNCATED, "input ends before STOP"), -1;
    unsigned op = *P->p++;
    const unsigned char *b;
    size_t len, first;
    gmp_pickle_value *v, *k, *c;
    if (P->op_off == 0 && op != PK_PROTO)
        return fail(P, GMP_ERR_FORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)"), -1;
    switch (op) {
    case PK_PROTO: /* PROTO */
        if (!(b = take(P, 1)))
            return -1;
        if (P->op_off != 0)
            return fail(P, GMP_ERR_FORMAT, "PROTO after the first opcode"), -1;
        if (b[0] < 2 || b[0] > 5)
            return fail(P, GMP_ERR_FORMAT, "pickle protocol %u not accepted (2 to 5)", b[0]), -1;
        return 0;
    case PK_FRAME: /* FRAME: a length of the frame; opcodes are read the same inside */
        if (!(b = take(P, 8)))
            return -1;
        if (le(b, 8) > (uint64_t)(P->end - P->p))
            return fail(P, GMP_ERR_TRUNCATED, "frame runs past the end of the input"), -1;
        return 0;
    case PK_STOP: /* STOP */
        if (P->mn)
            return fail(P, GMP_ERR_FORMAT, "STOP with an open MARK"), -1;
        if (P->sn != 1)
            return fail(P, GMP_ERR_FORMAT, "STOP with %zu values on the stack (1 expected)", P->sn),
                   -1;
        *stop = 1;
        return 0;
    case PK_MARK: /* MARK */
        if (grow(P, (void **)&P->marks, &P->mcap, P->mn + 1, sizeof *P->marks) < 0)
            return -1;
        P->marks[P->mn++] = P->sn;
        return 0;
    case PK_POP: /* POP: the top value, or the mark when nothing is above it */
        if (P->sn > mark_base(P)) {
            P->sn--;
            return 0;
        }
        return pop_mark(P, &first);
    case PK_POP_MARK: /* POP_MARK */
        if (pop_mark(P, &first) < 0)
            return -1;
        P->sn = first;
        return 0;
    case PK_DUP: /* DUP */ return (v = top(P)) ? push(P, v) : -1;
    case PK_NONE: return push(P, new_value(P, GMP_PK_NONE));
    case PK_NEWTRUE:  /* NEWTRUE */
    case PK_NEWFALSE: /* NEWFALSE */
        if (!(v = new_value(P, GMP_PK_BOOL)))
            return -1;
        v->v.i = op == PK_NEWTRUE;
        return push(P, v);
    case PK_BININT: /* BININT */
        if (!(b = take(P, 4)))
            return -1;
        return push_int(P, (int64_t)(int32_t)(uint32_t)le(b, 4));
    case PK_BININT1: /* BININT1 */
        if (!(b = take(P, 1)))
            return -1;
        return push_int(P, b[0]);
    case PK_BININT2: /* BININT2 */
        if (!(b = take(P, 2)))
            return -1;
        return push_int(P, (int64_t)le(b, 2));
    case PK_LONG1: /* LONG1 */
        if (take_len(P, 1, &len) < 0 || !(b = take(P, len)))
            return -1;
        return push_long(P, b, len);
    case PK_LONG4: /* LONG4: a signed length */
        if (!(b = take(P, 4)))
            return -1;
        if (b[3] & 0x80)
            return fail(P, GMP_ERR_FORMAT, "LONG4 with a negative length"), -1;
        P->p -= 4;
        if (take_len(P, 4, &len) < 0 || !(b = take(P, len)))
            return -1;
        return push_long(P, b, len);
    case PK_BINFLOAT: { /* BINFLOAT: big-endian IEEE 754 double */
        if (!(b = take(P, 8)))
            return -1;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | b[i];
        if (!(v = new_value(P, GMP_PK_FLOAT)))
            return -1;
        memcpy(&v->v.f, &u, sizeof u);
        return push(P, v);
    }
    case PK_SHORT_BINUNICODE: /* SHORT_BINUNICODE */
    case PK_BINUNICODE:       /* BINUNICODE */
    case PK_BINUNICODE8:      /* BINUNICODE8 */
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_STR, len);
    case PK_SHORT_BINBYTES: /* SHORT_BINBYTES */
    case PK_BINBYTES:       /* BINBYTES */
    case PK_BINBYTES8:      /* BINBYTES8 */
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_BYTES, len);
    case PK_EMPTY_LIST: return push(P, new_value(P, GMP_PK_LIST));
    case PK_EMPTY_DICT: return push(P, new_value(P, GMP_PK_DICT));
    case PK_EMPTY_TUPLE: return push(P, new_value(P, GMP_PK_TUPLE));
    case PK_APPEND: /* APPEND */
        if (!(v = pop(P)) || !(c = top(P)))
            return -1;
        if (c->type != GMP_PK_LIST)
            return fail(P, GMP_ERR_FORMAT, "APPEND to a %s", gmp_pickle_type_name(c)), -1;
        if (reserve_items(P, c, 1) < 0)
            return -1;
        c->v.items[c->n++] = v;
        return 0;
    case PK_APPENDS: /* APPENDS */
        if (pop_mark(P, &first) < 0)
            return -1;
        len = P->sn - first;
        P->sn = first;
        if (!(c = top(P)))
            return -1;
        if (c->type != GMP_PK_LIST)
            return fail(P, GMP_ERR_FORMAT, "APPENDS to a %s", gmp_pickle_type_name(c)), -1;
        if (reserve_items(P, c, len) < 0)
            return -1;
        if (len)
            memcpy(c->v.items + c->n, P->stack + first, len * sizeof *c->v.items);
        c->n += (uint32_t)len;
        return 0;
    case PK_LIST:  /* LIST */
    case PK_TUPLE: /* TUPLE */
        if (pop_mark(P, &first) < 0)
            return -1;
        return build_seq(P, op == PK_LIST ? GMP_PK_LIST : GMP_PK_TUPLE, first);
    case PK_TUPLE1: /* TUPLE1 */
    case PK_TUPLE2: /* TUPLE2 */
    case PK_TUPLE3: /* TUPLE3 */
        len = op - PK_TUPLE1 + 1u;
        if (P->sn < mark_base(P) + len)
            return fail(P, GMP_ERR_FORMAT, "stack underflow"), -1;
        return build_seq(P, GMP_PK_TUPLE, P->sn - len);
    case PK_DICT: /* DICT */
        if (pop_mark(P, &first) < 0)
            return -1;
        if ((P->sn - first) % 2)
            return fail(P, GMP_ERR_FORMAT, "DICT with an odd number of items"), -1;
        if (!(c = new_value(P, GMP_PK_DICT)) || reserve_items(P, c, (P->sn - first) / 2) < 0)
            return -1;
        for (size_t i = first; i < P->sn; i += 2)
            if (dict_set(P, c, P->stack[i], P->stack[i + 1]) < 0)
                return -1;
        P->sn = first;
        return push(P, c);
    case PK_SETITEM: /* SETITEM */
        if (!(v = pop(P)) || !(k = pop(P)) || !(c = top(P)))
            return -1;
        if (c->type != GMP_PK_DICT)
            return fail(P, GMP_ERR_FORMAT, "SETITEM on a %s", gmp_pickle_type_name(c)), -1;
        return dict_set(P, c, k, v);
    case PK_SETITEMS: /* SETITEMS */
        if (pop_mark(P, &first) < 0)
            return -1;
        len = P->sn - first;
        P->sn = first;
        if (!(c = top(P)))
            return -1;
        if (c->type != GMP_PK_DICT)
            return fail(P, GMP_ERR_FORMAT, "SETITEMS on a %s", gmp_pickle_type_name(c)), -1;
        if (len % 2)
            return fail(P, GMP_ERR_FORMAT, "SETITEMS with an odd number of items"), -1;
        if (reserve_items(P, c, len / 2) < 0)
            return -1;
        for (size_t i = 0; i < len; i += 2)
            if (dict_set(P, c, P->stack[first + i], P->stack[first + i + 1]) < 0)
                return -1;
        return 0;
    case PK_MEMOIZE: /* MEMOIZE */ return memo_put(P, P->memo_count);
    case PK_BINPUT: /* BINPUT */ return (b = take(P, 1)) ? memo_put(P, b[0]) : -1;
    case PK_LONG_BINPUT: /* LONG_BINPUT */ return (b = take(P, 4)) ? memo_put(P, le(b, 4)) : -1;
    case PK_BINGET: /* BINGET */ return (b = take(P, 1)) ? memo_get(P, b[0]) : -1;
    case PK_LONG_BINGET: /* LONG_BINGET */ return (b = take(P, 4)) ? memo_get(P, le(b, 4)) : -1;
    default: {
        const char *why, *name = gmp_pickle_refused_name(op, &why);
        if (name)
            return fail(P, GMP_ERR_FORMAT, "opcode %s (0x%02x) %s", name, op, why), -1;
        return fail(P, GMP_ERR_FORMAT, "unknown opcode 0x%02x", op), -1;
    }
    }
}

/* ---- after STOP: cycles, depth, dicts ---- */

typedef struct keyref {
    const char *s;
    uint32_t len;
    uint32_t pos;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, m);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Sorted references to the string keys of d; *nk receives their count. */
static keyref *sorted_keys(parser *P, const gmp_pickle_value *d, size_t *nk)
{
    keyref *r = malloc((d->n ? d->n : 1) * sizeof *r);
    if (!r) {
        fail(P, GMP_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        const gmp_pickle_value *key = d->v.items[2 * (size_t)i];
        if (key->type == GMP_PK_STR)
            r[k++] = (keyref){key->v.s, key->n, i};
    }
    qsort(r, k, sizeof *r, keyref_cmp);
    *nk = k;
    return r;
}

/* A string key set more than once keeps its first place and takes its last value (Python's
 * dict); then dicts above SMALL_DICT pairs get their index. */
static int finish_dict(parser *P, gmp_pickle_value *d)
{
    if (d->n < 2)
        return 0;
    size_t nk;
    keyref *r = sorted_keys(P, d, &nk);
    if (!r)
        return -1;
    int dups = 0;
    for (size_t i = 0; i + 1 < nk;) {
        size_t j = i;
        while (j + 1 < nk && r[j + 1].len == r[i].len && memcmp(r[j + 1].s, r[i].s, r[i].len) == 0)
            j++;
        if (j > i) {
            d->v.items[2 * (size_t)r[i].pos + 1] = d->v.items[2 * (size_t)r[j].pos + 1];
            for (size_t x = i + 1; x <= j; x++)
                d->v.items[2 * (size_t)r[x].pos] = NULL;
            dups = 1;
        }
        i = j + 1;
    }
    if (dups) {
        uint32_t m = 0;
        for (uint32_t i = 0; i < d->n; i++) {
            if (!d->v.items[2 * (size_t)i])
                continue;
            d->v.items[2 * (size_t)m] = d->v.items[2 * (size_t)i];
            d->v.items[2 * (size_t)m + 1] = d->v.items[2 * (size_t)i + 1];
            m++;
        }
        d->n = m;
        free(r);
        if (!(r = sorted_keys(P, d, &nk)))
            return -1;
    }
    if (d->n > SMALL_DICT && nk) {
        d->index = arena_alloc(P, (nk + 1) * sizeof *d->index);
        if (!d->index) {
            free(r);
            return -1;
        }
        d->index[0] = (uint32_t)nk;
        for (size_t i = 0; i < nk; i++)
            d->index[i + 1] = r[i].pos;
    }
    free(r);
    return 0;
}

static size_t child_count(const gmp_pickle_value *v)
{
    switch (v->type) {
    case GMP_PK_LIST:
    case GMP_PK_TUPLE: return v->n;
    case GMP_PK_DICT: return 2 * (size_t)v->n;
    default: return 0;
    }
}

typedef struct dfs_frame {
    gmp_pickle_value *v;
    size_t next;
} dfs_frame;

/* Iterative depth-first pass from root; refuses cycles and nesting deeper than max_depth. */
static int finish(parser *P, gmp_pickle_value *root)
{
    size_t cap = P->lim.max_depth + 2;
    dfs_frame *st = malloc(cap * sizeof *st);
    if (!st)
        return fail(P, GMP_ERR_NOMEM, "out of memory"), -1;
    size_t n = 0;
    int rc = 0;
    if (root->color == 0) {
        root->color = 1;
        st[n++] = (dfs_frame){root, 0};
    }
    while (n && rc == 0) {
        dfs_frame *f = &st[n - 1];
        gmp_pickle_value *v = f->v;
        if (f->next < child_count(v)) {
            gmp_pickle_value *c = v->v.items[f->next++];
            if (c->color == 1) {
                rc = fail(P, GMP_ERR_FORMAT, "a %s contains itself", gmp_pickle_type_name(c));
            } else if (c->color == 0) {
                if (!child_count(c)) {
                    c->color = 2;
                    continue;
                }
                if (n >= P->lim.max_depth + 1) {
                    rc = fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu",
                              P->lim.max_depth);
                    break;
                }
                c->color = 1;
                st[n++] = (dfs_frame){c, 0};
            }
            continue;
        }
        uint32_t h = 0;
        for (size_t i = 0; i < child_count(v); i++)
            if (v->v.items[i]->height + 1 > h)
                h = v->v.items[i]->height + 1;
        v->height = h;
        if (h > P->lim.max_depth) {
            rc = fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu", P->lim.max_depth);
            break;
        }
        if (v->type == GMP_PK_DICT && finish_dict(P, v) < 0)
            rc = -1;
        v->color = 2;
        n--;
    }
    free(st);
    return rc ? -1 : 0;
}

gmp_err gmp_pickle_load_ex(const void *data, size_t n, const gmp_pickle_limits *lim,
                           gmp_pickle_value **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (err && errlen)
        err[0] = 0;
    parser P;
    memset(&P, 0, sizeof P);
    P.err = err;
    P.errlen = errlen;
    if (!out || (!data && n))
        return fail(&P, GMP_ERR_ARG, "bad argument");
    if (lim)
        P.lim = *lim;
    else
        gmp_pickle_limits_default(&P.lim);
    P.base = P.p = data ? data : (const void *)"";
    P.end = P.base + n;
    int stop = 0;
    while (!stop)
        if (step(&P, &stop) < 0)
            break;
    gmp_pickle_value *root = stop ? P.stack[0] : NULL;
    free(P.stack);
    free(P.marks);
    free(P.memo);
    P.stack = NULL;
    P.memo = NULL;
    if (root && finish(&P, root) == 0) {
        doc *d = malloc(sizeof *d);
        if (d) {
            d->root = *root;
            d->chunks = P.chunks;
            *out = &d->root;
            return GMP_OK;
        }
        fail(&P, GMP_ERR_NOMEM, "out of memory");
    }
    chunks_free(P.chunks);
    return P.code != GMP_OK ? P.code : GMP_ERR_FORMAT;
}

gmp_err gmp_pickle_load(const void *data, size_t n, gmp_pickle_value **out, char *err,
                        size_t errlen)
{
    return gmp_pickle_load_ex(data, n, NULL, out, err, errlen);
}

void gmp_pickle_free(gmp_pickle_value *root)
{
    if (!root)
        return;
    doc *d = (doc *)(void *)root;
    chunks_free(d->chunks);
    free(d);
}

/* ---- accessors ---- */

gmp_pickle_type gmp_pickle_type_of(const gmp_pickle_value *v)
{
    return v ? (gmp_pickle_type)v->type : GMP_PK_NONE;
}

const char *gmp_pickle_type_name(const gmp_pickle_value *v)
{
    switch (gmp_pickle_type_of(v)) {
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

int gmp_pickle_get_i64(const gmp_pickle_value *v, int64_t *out)
{
    if (!v || (v->type != GMP_PK_INT && v->type != GMP_PK_BOOL) || v->big)
        return -1;
    *out = v->v.i;
    return 0;
}

int gmp_pickle_get_u64(const gmp_pickle_value *v, uint64_t *out)
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

int gmp_pickle_get_f64(const gmp_pickle_value *v, double *out)
{
    if (!v)
        return -1;
    if (v->type == GMP_PK_FLOAT)
        *out = v->v.f;
    else if (v->type == GMP_PK_INT || v->type == GMP_PK_BOOL)
        *out = v->big ? (double)v->v.u : (double)v->v.i;
    else
        return -1;
    return 0;
}

int gmp_pickle_get_bool(const gmp_pickle_value *v, int *out)
{
    if (!v || v->type != GMP_PK_BOOL)
        return -1;
    *out = v->v.i != 0;
    return 0;
}

const char *gmp_pickle_get_str(const gmp_pickle_value *v, size_t *len)
{
    if (!v || (v->type != GMP_PK_STR && v->type != GMP_PK_BYTES))
        return NULL;
    if (len)
        *len = v->n;
    return v->v.s;
}

int gmp_pickle_str_eq(const gmp_pickle_value *v, const char *s)
{
    if (!v || v->type != GMP_PK_STR)
        return 0;
    size_t n = strlen(s);
    return n == v->n && memcmp(v->v.s, s, n) == 0;
}

size_t gmp_pickle_len(const gmp_pickle_value *v)
{
    if (!v)
        return 0;
    switch (v->type) {
    case GMP_PK_LIST:
    case GMP_PK_TUPLE:
    case GMP_PK_DICT: return v->n;
    default: return 0;
    }
}

const gmp_pickle_value *gmp_pickle_item(const gmp_pickle_value *v, size_t i)
{
    if (!v || (v->type != GMP_PK_LIST && v->type != GMP_PK_TUPLE) || i >= v->n)
        return NULL;
    return v->v.items[i];
}

const gmp_pickle_value *gmp_pickle_dict_at(const gmp_pickle_value *v, size_t i,
                                           const gmp_pickle_value **value)
{
    if (!v || v->type != GMP_PK_DICT || i >= v->n)
        return NULL;
    if (value)
        *value = v->v.items[2 * i + 1];
    return v->v.items[2 * i];
}

const gmp_pickle_value *gmp_pickle_dict_get(const gmp_pickle_value *v, const char *key)
{
    if (!v || v->type != GMP_PK_DICT || !key)
        return NULL;
    size_t kl = strlen(key);
    if (v->index) {
        size_t lo = 0, hi = v->index[0];
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const gmp_pickle_value *k = v->v.items[2 * (size_t)v->index[mid + 1]];
            size_t m = k->n < kl ? k->n : kl;
            int c = memcmp(k->v.s, key, m);
            if (!c)
                c = k->n < kl ? -1 : k->n > kl;
            if (!c)
                return v->v.items[2 * (size_t)v->index[mid + 1] + 1];
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        return NULL;
    }
    for (size_t i = 0; i < v->n; i++) {
        const gmp_pickle_value *k = v->v.items[2 * i];
        if (k->type == GMP_PK_STR && k->n == kl && memcmp(k->v.s, key, kl) == 0)
            return v->v.items[2 * i + 1];
    }
    return NULL;
}

int gmp_pickle_stream_rule(gmp_err e, const char *err)
{
    static const char *const rules[] = {
        "changed after it was stored",
        "elsewhere than its place",
        "not part of the result",
        "first value of the pickle is stored",
        "is set twice",
        "not its first value",
    };
    if (e == GMP_ERR_LIMIT || e == GMP_ERR_NOMEM)
        return 1;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strstr(err, rules[i]))
            return 1;
    return 0;
}
