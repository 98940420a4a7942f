/* gmp_pkstream_parse: the streaming pickle reader's opcode interpreter and its API
 * (gmp_pickle_stream.h). See docs/pickle.md; the reader's parts are listed in
 * gmp_pkstream_impl.h.
 *
 * The parse follows CPython's Unpickler for the opcodes gmp_pickle_ops.h accepts: a stack of
 * values split by MARKs; values are reference counted (stack slots, container items, memo slots
 * each hold one). step() decodes every opcode, checks everything and says what is wrong; parse()
 * decodes the opcodes snapshots are made of in place while the window holds all their bytes, and
 * hands everything else to step(). Streamed lists hand over their items and keep only their
 * count. */
#include "gmp_pkstream_impl.h"

static int pop_mark(gmp_pkstream *P, size_t *first)
{
    if (!P->mn)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "no MARK on the stack");
    *first = P->marks[--P->mn];
    return 0;
}

/* The role of a list about to be pushed at stack index j, predicted from what is below it. */
static void predict(gmp_pkstream *P, gmp_pkobj *o)
{
    size_t j = P->sn;
    if (j == 0 && P->mn == 0) {
        if (!P->root) {
            px(o)->role = R_ROOT;
            px(o)->refs++;
            P->root = o;
        }
        return;
    }
    gmp_pkobj *parent = NULL, *key = NULL;
    size_t index = 0;
    size_t m = mark_base(P);
    if (P->mn && m >= 1 && m <= j && is_obj(&P->stack[m - 1])) {
        gmp_pkobj *c = P->stack[m - 1].v.o;
        if (c->type == GMP_PK_LIST) {
            parent = c;
            index = (size_t)c->n + (j - m);
        } else if (c->type == GMP_PK_DICT && ((j - m) & 1) && is_obj(&P->stack[j - 1])) {
            parent = c;
            key = P->stack[j - 1].v.o;
        }
    }
    if (!parent && j >= 1 && j - 1 >= m && is_obj(&P->stack[j - 1])) {
        gmp_pkobj *q = P->stack[j - 1].v.o;
        if (q->type == GMP_PK_LIST) {
            parent = q;
            index = q->n;
        } else if (q->type == GMP_PK_STR && j >= 2 && j - 2 >= m && is_obj(&P->stack[j - 2]) &&
                   P->stack[j - 2].v.o->type == GMP_PK_DICT) {
            parent = P->stack[j - 2].v.o;
            key = q;
        }
    }
    if (!parent)
        return;
    if (P->sparse && ((key && P->keep_key && str_eq_obj(key, P->keep_key)) ||
                      (!key && parent->type == GMP_PK_LIST && (parent->flags & F_KEEP))))
        o->flags |= F_KEEP; /* stored under keep_key, or an item of such a list */
    uint8_t role = R_NONE;
    if (px(parent)->role == R_ROOT && parent->type == GMP_PK_DICT && key) {
        if (P->cb.list_key && str_eq_obj(key, P->cb.list_key))
            role = R_SEGS;
        else if (P->cb.lists_key && str_eq_obj(key, P->cb.lists_key))
            role = R_TRACES;
    } else if (px(parent)->role == R_TRACES && !key && index <= UINT32_MAX) {
        role = R_DEV;
    }
    if (role == R_NONE)
        return;
    px(o)->role = role;
    px(o)->pred_parent = parent;
    px(o)->role_index = (uint32_t)index;
    if (key) {
        px(key)->refs++;
        px(o)->pred_key = key;
    }
    P->roles_pending++;
}

static int modifiable(gmp_pkstream *P, const gmp_pkobj *c)
{
    if (px(c)->sealed)
        return gmp_pks_fail(
            P, GMP_ERR_FORMAT,
            "a %s is changed after it was stored in another container (not accepted: "
            "the streaming reader takes each value as complete once stored)",
            c->type == GMP_PK_DICT ? "dict" : "list");
    return 0;
}

/* Stores a streamed item in its list (checked as any store) and puts it in the batch. */
static int hand(gmp_pkstream *P, gmp_pkobj *list, gmp_pkv *item)
{
    if (attach(P, list, item, NULL, list->n) < 0) {
        unref(P, item);
        return -1;
    }
    if (list->n >= MAX_ITEMS) {
        unref(P, item);
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "container with more than %u entries",
                            (unsigned)MAX_ITEMS);
    }
    if (gmp_pks_batch_room(P, P->fill) < 0) {
        unref(P, item);
        return -1;
    }
    list->n++;
    pk_item *x = &P->fill->it[P->fill->n++];
    memset(x, 0, sizeof *x);
    x->v = *item; /* its reference moves into the batch */
    x->kind = px(list)->role == R_DEV ? GMP_PKS_LISTS : GMP_PKS_LIST;
    x->index = px(list)->role_index;
    return 0;
}

/* Appends stack[first..sn) to the list c (the values move: their references with them). */
static int append_items(gmp_pkstream *P, gmp_pkobj *c, size_t first)
{
    size_t n = P->sn - first;
    if (streams(c)) {
        for (size_t i = first; i < P->sn; i++) {
            /* APPENDS hands over up to 1,000 entries built long before, whose objects are no
             * longer in the cache: their objects, then their dicts' items, are loaded ahead */
            if (i + 12 < P->sn && P->stack[i + 12].type >= GMP_PK_STR)
                __builtin_prefetch(P->stack[i + 12].v.o);
            if (i + 4 < P->sn && P->stack[i + 4].type == GMP_PK_DICT &&
                P->stack[i + 4].v.o->d.items) {
                const gmp_pkobj *o = P->stack[i + 4].v.o;
                const char *d = (const char *)o->d.items;
                size_t bytes = 2 * (size_t)px(o)->cap * sizeof(gmp_pkv);
                for (size_t k = 0; k < bytes && k < 256; k += 64)
                    __builtin_prefetch(d + k);
            }
            gmp_pkv it = P->stack[i];
            pkv_put(&P->stack[i], GMP_PK_NONE, 0, 0);
            if (is_flat(&it) ? gmp_pks_hand_flat(P, c, it.v.u) < 0 : hand(P, c, &it) < 0)
                return -1;
        }
        P->sn = first;
        /* not while placeholders wait on the stack: their pairs are in this batch */
        return P->nflat ? 0 : gmp_pks_submit(P);
    }
    if (gmp_pks_reserve(P, c, n) < 0)
        return -1;
    gmp_pkv *st = P->stack;
    for (size_t i = first; i < P->sn; i++) {
        if (attach(P, c, &st[i], NULL, c->n) < 0) {
            for (size_t j = first; j < i; j++) /* moved already */
                st[j].type = GMP_PK_NONE;
            return -1;
        }
        c->d.items[c->n++] = st[i];
    }
    P->sn = first;
    return 0;
}

static int is_scalar(const gmp_pkv *k)
{
    return k->type <= GMP_PK_BYTES;
}

static inline int check_key(gmp_pkstream *P, const gmp_pkv *k)
{
    if (is_scalar(k))
        return 0;
    if (k->type == GMP_PK_TUPLE) {
        for (uint32_t i = 0; i < k->v.o->n; i++)
            if (!is_scalar(&k->v.o->d.items[i]))
                goto bad;
        return 0;
    }
bad:
    return gmp_pks_fail(P, GMP_ERR_FORMAT, "dict key of type %s not accepted", tname(k));
}

/* Sets pairs stack[first..sn) in the dict c. */
static int set_items(gmp_pkstream *P, gmp_pkobj *c, size_t first)
{
    size_t n = P->sn - first;
    if (n % 2)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "SETITEMS with an odd number of items");
    if (gmp_pks_reserve(P, c, n / 2) < 0)
        return -1;
    gmp_pkv *st = P->stack, *it = n ? c->d.items + 2 * (size_t)c->n : NULL; /* none: no array */
    for (size_t i = first; i < P->sn; i += 2) {
        if (check_key(P, &st[i]) < 0 || attach(P, c, &st[i], NULL, 0) < 0 ||
            attach(P, c, &st[i + 1], &st[i], 0) < 0) {
            for (size_t j = first; j < i; j++) /* moved already */
                st[j].type = GMP_PK_NONE;
            return -1;
        }
        *it++ = st[i];
        *it++ = st[i + 1];
        c->n++;
    }
    P->sn = first;
    return 0;
}

static void drop_from(gmp_pkstream *P, size_t first)
{
    while (P->sn > first)
        unref(P, &P->stack[--P->sn]);
}

/* A new LIST or TUPLE from stack[first..sn). */
static int build_seq(gmp_pkstream *P, uint8_t t, size_t first)
{
    gmp_pkobj *c = gmp_pks_obj_new(P, t);
    if (!c)
        return -1;
    gmp_pkv v = {.type = t, .v.o = c};
    if (t == GMP_PK_LIST)
        predict(P, c); /* before the items are counted: the list's place is at first */
    size_t n = P->sn - first;
    if (t == GMP_PK_LIST && streams(c)) {
        int rc = append_items(P, c, first);
        if (rc < 0) {
            unref(P, &v);
            return -1;
        }
        return push(P, v);
    }
    if (n) {
        if (gmp_pks_reserve(P, c, n) < 0) {
            unref(P, &v);
            return -1;
        }
        for (size_t i = first; i < P->sn; i++) {
            if (attach(P, c, &P->stack[i], NULL, c->n) < 0) {
                unref(P, &v);
                return -1;
            }
            c->d.items[c->n++] = P->stack[i];
            P->stack[i].type = GMP_PK_NONE;
        }
    }
    P->sn = first;
    return push(P, v);
}

static int take(gmp_pkstream *P, size_t n, const unsigned char **b)
{
    if (fill(P, n) < 0) {
        if (P->code == GMP_OK)
            gmp_pks_fail(P, GMP_ERR_TRUNCATED, "input ends inside an opcode's argument");
        return -1;
    }
    *b = P->p;
    P->p += n;
    return 0;
}

static int take_len(gmp_pkstream *P, size_t w, size_t *len)
{
    const unsigned char *b;
    if (take(P, w, &b) < 0)
        return -1;
    uint64_t n = le(b, w);
    if (n > left_in_input(P))
        return gmp_pks_fail(P, GMP_ERR_TRUNCATED, "length %llu runs past the end of the input",
                            (unsigned long long)n);
    if (n >= UINT32_MAX)
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "string of %llu bytes (limit 4 GiB)",
                            (unsigned long long)n);
    *len = (size_t)n;
    return 0;
}

static int push_int(gmp_pkstream *P, int64_t i)
{
    gmp_pkv v = {.type = GMP_PK_INT, .v.i = i};
    return push(P, v);
}

static int push_long(gmp_pkstream *P, const unsigned char *b, size_t n)
{
    gmp_pkv v = {.type = GMP_PK_INT};
    int big = 0;
    if (gmp_pickle_decode_long(b, n, &v.v.i, &v.v.u, &big) < 0)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "integer outside [-2^63, 2^64)");
    v.big = big;
    return push(P, v);
}

static int push_bytes(gmp_pkstream *P, uint8_t t, size_t len)
{
    const unsigned char *b;
    if (take(P, len, &b) < 0)
        return -1;
    gmp_pkobj *o = gmp_pks_obj_new(P, t);
    if (!o)
        return -1;
    o->d.s = gmp_pks_xalloc(P, len + 1);
    if (!o->d.s) {
        gmp_pks_fl_put(P, &P->objs, o, sizeof *o);
        return -1;
    }
    memcpy(o->d.s, b, len);
    o->d.s[len] = 0;
    o->n = (uint32_t)len;
    gmp_pkv v = {.type = t, .v.o = o};
    return push(P, v);
}

/* The container an APPEND/SETITEM (multi 0: its k - 1 operands on top of the stack) or an
 * APPENDS/SETITEMS (multi 1: the operands above the last MARK) stores into, checked to be a
 * modifiable value of type want; *first is the first operand's slot. op names the opcode and its
 * preposition in the message ("APPEND to"). 0, or -1 after failing. */
static int store_target(gmp_pkstream *P, int multi, size_t k, gmp_pickle_type want, const char *op,
                        gmp_pkobj **c, size_t *first)
{
    if (!multi) {
        if (P->sn < mark_base(P) + k)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "stack underflow");
        *first = P->sn - k + 1;
    } else {
        if (pop_mark(P, first) < 0)
            return -1;
        if (*first <= mark_base(P) || *first == 0) {
            drop_from(P, *first);
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "stack underflow");
        }
    }
    const gmp_pkv *v = &P->stack[*first - 1];
    if (v->type != want)
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "%s a %s", op, tname(v));
    *c = v->v.o;
    return modifiable(P, *c);
}

static int step(gmp_pkstream *P)
{
    P->op_off = offset(P);
    if (fill(P, 1) < 0) {
        if (P->code == GMP_OK)
            gmp_pks_fail(P, GMP_ERR_TRUNCATED, "input ends before STOP");
        return -1;
    }
    unsigned op = *P->p++;
    const unsigned char *b;
    size_t len = 0, first = 0;
    gmp_pkv v;
    gmp_pkobj *c;
    if (P->nflat && !gmp_pks_flat_neutral(P, op) && gmp_pks_materialize(P) < 0)
        return -1;
    if (P->op_off == 0 && op != PK_PROTO)
        return gmp_pks_fail(P, GMP_ERR_FORMAT,
                            "not a pickle of protocol 2 or later (no PROTO opcode)");
    switch (op) {
    case PK_PROTO:
        if (take(P, 1, &b) < 0)
            return -1;
        if (P->op_off != 0)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "PROTO after the first opcode");
        if (b[0] < 2 || b[0] > 5)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "pickle protocol %u not accepted (2 to 5)",
                                b[0]);
        return 0;
    case PK_FRAME:
        if (take(P, 8, &b) < 0)
            return -1;
        if (le(b, 8) > left_in_input(P))
            return gmp_pks_fail(P, GMP_ERR_TRUNCATED, "frame runs past the end of the input");
        return 0;
    case PK_STOP:
        if (P->mn)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "STOP with an open MARK");
        if (P->sn != 1)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "STOP with %zu values on the stack (1 expected)",
                                P->sn);
        P->done = 1;
        return 0;
    case PK_MARK:
        if (P->mn == P->mcap) {
            size_t nc = P->mcap ? P->mcap * 2 : 64;
            if (charge(P, (nc - P->mcap) * sizeof *P->marks) < 0)
                return -1;
            size_t *n = realloc(P->marks, nc * sizeof *n);
            if (!n)
                return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
            P->marks = n;
            P->mcap = nc;
        }
        P->marks[P->mn++] = P->sn;
        return 0;
    case PK_POP:
        if (P->sn > mark_base(P)) {
            unref(P, &P->stack[--P->sn]);
            return 0;
        }
        return pop_mark(P, &first);
    case PK_POP_MARK:
        if (pop_mark(P, &first) < 0)
            return -1;
        drop_from(P, first);
        return 0;
    case PK_DUP:
        if (P->sn <= mark_base(P))
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "stack underflow");
        v = P->stack[P->sn - 1];
        ref(&v);
        return push(P, v);
    case PK_NONE: v = (gmp_pkv){.type = GMP_PK_NONE}; return push(P, v);
    case PK_NEWTRUE:
    case PK_NEWFALSE:
        v = (gmp_pkv){.type = GMP_PK_BOOL, .v.i = op == PK_NEWTRUE};
        return push(P, v);
    case PK_BININT:
        if (take(P, 4, &b) < 0)
            return -1;
        return push_int(P, (int64_t)(int32_t)(uint32_t)le(b, 4));
    case PK_BININT1:
        if (take(P, 1, &b) < 0)
            return -1;
        return push_int(P, b[0]);
    case PK_BININT2:
        if (take(P, 2, &b) < 0)
            return -1;
        return push_int(P, (int64_t)le(b, 2));
    case PK_LONG1:
        if (take_len(P, 1, &len) < 0 || take(P, len, &b) < 0)
            return -1;
        return push_long(P, b, len);
    case PK_LONG4:
        if (take(P, 4, &b) < 0)
            return -1;
        if (b[3] & 0x80)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "LONG4 with a negative length");
        P->p -= 4;
        if (take_len(P, 4, &len) < 0 || take(P, len, &b) < 0)
            return -1;
        return push_long(P, b, len);
    case PK_BINFLOAT: {
        if (take(P, 8, &b) < 0)
            return -1;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | b[i];
        v = (gmp_pkv){.type = GMP_PK_FLOAT};
        memcpy(&v.v.f, &u, sizeof u);
        return push(P, v);
    }
    case PK_SHORT_BINUNICODE:
    case PK_BINUNICODE:
    case PK_BINUNICODE8:
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_STR, len);
    case PK_SHORT_BINBYTES:
    case PK_BINBYTES:
    case PK_BINBYTES8:
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_BYTES, len);
    case PK_EMPTY_LIST:
    case PK_EMPTY_DICT:
    case PK_EMPTY_TUPLE: {
        uint8_t t = op == PK_EMPTY_LIST   ? GMP_PK_LIST
                    : op == PK_EMPTY_DICT ? GMP_PK_DICT
                                          : GMP_PK_TUPLE;
        if (!(c = gmp_pks_obj_new(P, t)))
            return -1;
        if (t != GMP_PK_TUPLE)
            predict(P, c);
        v = (gmp_pkv){.type = t, .v.o = c};
        return push(P, v);
    }
    case PK_APPEND:
    case PK_APPENDS:
        if (store_target(P, op == PK_APPENDS, 2, GMP_PK_LIST,
                         op == PK_APPENDS ? "APPENDS to" : "APPEND to", &c, &first) < 0)
            return -1;
        return append_items(P, c, first);
    case PK_LIST:
    case PK_TUPLE:
        if (pop_mark(P, &first) < 0)
            return -1;
        return build_seq(P, op == PK_LIST ? GMP_PK_LIST : GMP_PK_TUPLE, first);
    case PK_TUPLE1:
    case PK_TUPLE2:
    case PK_TUPLE3:
        len = op - PK_TUPLE1 + 1u;
        if (P->sn < mark_base(P) + len)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "stack underflow");
        return build_seq(P, GMP_PK_TUPLE, P->sn - len);
    case PK_DICT: {
        if (pop_mark(P, &first) < 0)
            return -1;
        if ((P->sn - first) % 2)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "DICT with an odd number of items");
        /* the dict takes the pairs' place: it is pushed after them, so move them aside */
        if (!(c = gmp_pks_obj_new(P, GMP_PK_DICT)))
            return -1;
        v = (gmp_pkv){.type = GMP_PK_DICT, .v.o = c};
        if (set_items(P, c, first) < 0) {
            unref(P, &v);
            return -1;
        }
        if (P->sn == 0 && P->mn == 0 && !P->root) {
            px(c)->role = R_ROOT;
            px(c)->refs++;
            P->root = c;
        }
        return push(P, v);
    }
    case PK_SETITEM:
    case PK_SETITEMS:
        if (store_target(P, op == PK_SETITEMS, 3, GMP_PK_DICT,
                         op == PK_SETITEMS ? "SETITEMS on" : "SETITEM on", &c, &first) < 0)
            return -1;
        return set_items(P, c, first);
    case PK_MEMOIZE: return gmp_pks_memo_put(P, P->ndefined);
    case PK_BINPUT: return take(P, 1, &b) < 0 ? -1 : gmp_pks_memo_put(P, b[0]);
    case PK_LONG_BINPUT: return take(P, 4, &b) < 0 ? -1 : gmp_pks_memo_put(P, le(b, 4));
    case PK_BINGET: return take(P, 1, &b) < 0 ? -1 : gmp_pks_memo_get(P, b[0]);
    case PK_LONG_BINGET: return take(P, 4, &b) < 0 ? -1 : gmp_pks_memo_get(P, le(b, 4));
    default: {
        const char *why, *name = gmp_pickle_refused_name(op, &why);
        if (name)
            return gmp_pks_fail(P, GMP_ERR_FORMAT, "opcode %s (0x%02x) %s", name, op, why);
        return gmp_pks_fail(P, GMP_ERR_FORMAT, "unknown opcode 0x%02x", op);
    }
    }
}

/* The parse loop. The opcodes snapshots are made of are decoded here in place, while the window
 * holds all their bytes and nothing can go wrong; everything else (the first opcode, the rare
 * ones, the end of the window, anything that would fail) goes through step() from the opcode's
 * first byte, which then does all the checks and says what is wrong. Where a helper can fail
 * (memory, a limit, the streaming rules), op_off is set first. */
__attribute__((noinline)) static void parse(gmp_pkstream *P)
{
    if (step(P) < 0 || P->done)
        return;
    for (;;) {
        /* the window and the stack in locals (written back before anything else uses them) */
        const unsigned char *p = P->p, *end = P->end;
        gmp_pkv *stk = P->stack;
        size_t sn = P->sn, scap = P->scap;
#define SYNC_OUT() (P->sn = sn)
#define SYNC_IN() (stk = P->stack, sn = P->sn, scap = P->scap)
        while (end - p >= 9) {
            const unsigned char *op = p;
            uint64_t key, vu;
            unsigned vt, vb = 0;
            switch (*p) {
            case PK_BINGET:
            case PK_LONG_BINGET:
                p += op_get(p, end, &key); /* the window holds 9 bytes: never 0 */
                goto get;
            case PK_MEMOIZE: {
                key = P->ndefined;
                if (sn <= (P->mn ? P->marks[P->mn - 1] : 0) || key >= P->lim.max_memo ||
                    (P->nflat && sn <= P->flat_top))
                    goto slow; /* step says what is wrong (or makes the dicts first) */
                if (P->sparse && (key >= (uint64_t)P->nwords * 64 || sparse_keeps(&stk[sn - 1])))
                    goto slow; /* sparse_put keeps it, or grows the memo */
                if (key < (uint64_t)P->nwords * 64) {
                    uint64_t bit = (uint64_t)1 << (key & 63);
                    if (!(P->defined[key >> 6] & bit)) {
                        P->defined[key >> 6] |= bit;
                        P->ndefined++;
                    }
                    const mword *w = &P->mw[key >> 6];
                    if (w->bits & bit) {
                        mslot *m = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
                        if (m->left) {
                            const gmp_pkv *top = &stk[sn - 1];
                            ref(top);
                            slot_unref(P, m);
                            m->type = top->type;
                            m->big = top->big;
                            m->plain = 0;
                            m->v.u = top->v.u;
                        }
                    }
                } else {
                    P->ndefined++; /* never fetched: only its count matters */
                }
                p++;
                continue;
            }
            case PK_MARK:
                if (P->mn == P->mcap)
                    goto slow;
                P->marks[P->mn++] = sn;
                p++;
                continue;
            case PK_BININT1:
            case PK_BININT2:
            case PK_BININT:
            case PK_NONE:
            case PK_NEWTRUE:
            case PK_NEWFALSE:
            case PK_LONG1: {
                size_t len = op_scalar(p, end, &vt, &vb, &vu); /* LONG1 over 8 bytes: step */
                if (!len)
                    goto slow;
                p += len;
                goto push_v;
            }
            case PK_SHORT_BINUNICODE: {
                size_t n = p[1];
                if ((size_t)(end - p) < 2 + n || sn == scap)
                    goto slow;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                gmp_pkobj *o = gmp_pks_obj_new(P, GMP_PK_STR);
                if (!o)
                    goto bail;
                o->d.s = gmp_pks_xalloc(P, n + 1);
                if (!o->d.s) {
                    gmp_pks_fl_put(P, &P->objs, o, sizeof *o);
                    goto bail;
                }
                memcpy(o->d.s, p + 2, n);
                o->d.s[n] = 0;
                o->n = (uint32_t)n;
                pkv_put_obj(&stk[sn++], GMP_PK_STR, o);
                p += 2 + n;
                continue;
            }
            case PK_EMPTY_LIST:
            case PK_EMPTY_DICT: {
                if (*p == PK_EMPTY_DICT && P->mn && !P->no_flat) {
                    const unsigned char *np = gmp_pks_fast_entry(P, p, end, sn);
                    if (np) {
                        p = np;
                        sn++;
                        continue;
                    }
                }
                if (sn == scap || (P->nflat && !gmp_pks_flat_predicts(P, sn)))
                    goto slow;
                uint8_t t = *p == PK_EMPTY_LIST ? GMP_PK_LIST : GMP_PK_DICT;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                gmp_pkobj *c = gmp_pks_obj_new(P, t);
                if (!c)
                    goto bail;
                SYNC_OUT();
                predict(P, c);
                pkv_put_obj(&stk[sn++], t, c);
                p++;
                continue;
            }
            case PK_SETITEMS:
            case PK_APPENDS: {
                if (!P->mn)
                    goto slow;
                size_t first = P->marks[P->mn - 1];
                size_t below = P->mn >= 2 ? P->marks[P->mn - 2] : 0;
                if (first <= below || first == 0)
                    goto slow;
                gmp_pkv *c = &stk[first - 1];
                if (c->type != (*p == PK_SETITEMS ? GMP_PK_DICT : GMP_PK_LIST) ||
                    px(c->v.o)->sealed)
                    goto slow;
                if (P->nflat && first <= P->flat_top && (*p == PK_SETITEMS || !streams(c->v.o)))
                    goto slow; /* step makes the dicts first */
                P->mn--;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                SYNC_OUT();
                int rc = *p == PK_SETITEMS ? set_items(P, c->v.o, first)
                                           : append_items(P, c->v.o, first);
                SYNC_IN();
                if (rc < 0)
                    goto bail;
                p++;
                continue;
            }
            default: goto slow;
            }
        get:
            if (key >= (uint64_t)P->nwords * 64 || sn == scap)
                goto slow;
            {
                /* no check of P->defined: the scan counted only fetches of defined indices and
                 * stopped at the first other one, where the parse fails (through step) */
                const mword *w = &P->mw[key >> 6];
                uint64_t bit = (uint64_t)1 << (key & 63);
                if (!(w->bits & bit))
                    goto slow;
                mslot *m = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
                if (!m->left || m->type == GMP_PK_NONE) /* one pass: not kept */
                    goto slow;
                vt = m->type, vb = m->big, vu = m->v.u;
                if (m->left != KEEP && --m->left == 0)
                    m->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
                else if (vt >= GMP_PK_STR)
                    px(m->v.o)->refs++;
                pkv_put(&stk[sn++], vt, vb, vu);
                continue;
            }
        push_v:
            if (sn == scap) {
                p = op;
                goto slow;
            }
            pkv_put(&stk[sn++], vt, vb, vu);
            continue;
        slow:
            p = op;
            break;
        }
        SYNC_OUT();
        P->p = p;
        if (step(P) < 0 || P->done)
            return;
        continue;
    bail: /* a helper failed (P->code says why): the values pushed meanwhile are the stack's */
        SYNC_OUT();
        return;
    }
#undef SYNC_OUT
#undef SYNC_IN
}

/* After STOP: the root must be the value predicted, every streamed list where it was predicted;
 * lists that could not be streamed (a root made by DICT, say) are handed over now. */
static int finish(gmp_pkstream *P)
{
    gmp_pkv root = P->stack[0];
    if (P->root && (!is_obj(&root) || root.v.o != P->root) && P->root->n)
        return gmp_pks_fail(
            P, GMP_ERR_FORMAT,
            "the pickle's result is not its first value, whose items were read already");
    if (P->roles_pending)
        return gmp_pks_fail(
            P, GMP_ERR_FORMAT,
            "a list whose items were read as they came is not part of the result (a "
            "pickle shaped unlike a snapshot)");
    if (!is_obj(&root))
        return 0;
    gmp_pkobj *r = root.v.o;
    char msg[512];
    if (r->type == GMP_PK_LIST && !streams(r)) {
        /* the items are already stored: hand them over in order */
        for (uint32_t i = 0; i < r->n; i++) {
            msg[0] = 0;
            if (P->cb.item &&
                P->cb.item(P->cb.ctx, GMP_PKS_LIST, 0, &r->d.items[i], msg, sizeof msg) != 0)
                goto stopped;
        }
        return 0;
    }
    if (r->type != GMP_PK_DICT)
        return 0;
    for (uint32_t i = 0; i < r->n; i++) {
        gmp_pkv *k = &r->d.items[2 * (size_t)i], *val = &r->d.items[2 * (size_t)i + 1];
        if (!is_obj(k) || val->type != GMP_PK_LIST || streams(val->v.o))
            continue;
        gmp_pkobj *l = val->v.o;
        if (P->cb.list_key && str_eq_obj(k->v.o, P->cb.list_key)) {
            for (uint32_t j = 0; j < l->n; j++) {
                msg[0] = 0;
                if (P->cb.item &&
                    P->cb.item(P->cb.ctx, GMP_PKS_LIST, 0, &l->d.items[j], msg, sizeof msg) != 0)
                    goto stopped;
            }
        } else if (P->cb.lists_key && str_eq_obj(k->v.o, P->cb.lists_key) &&
                   px(l)->role != R_TRACES) {
            for (uint32_t d = 0; d < l->n; d++) {
                gmp_pkv *dl = &l->d.items[d];
                if (dl->type != GMP_PK_LIST || streams(dl->v.o))
                    continue;
                for (uint32_t j = 0; j < dl->v.o->n; j++) {
                    msg[0] = 0;
                    if (P->cb.item && P->cb.item(P->cb.ctx, GMP_PKS_LISTS, d, &dl->v.o->d.items[j],
                                                 msg, sizeof msg) != 0)
                        goto stopped;
                }
            }
        }
    }
    for (uint32_t i = 0; i < r->n; i++) {
        gmp_pkv *k = &r->d.items[2 * (size_t)i], *val = &r->d.items[2 * (size_t)i + 1];
        if (!is_obj(k) || val->type != GMP_PK_LIST || px(val->v.o)->role != R_TRACES)
            continue;
        for (uint32_t d = 0; d < val->v.o->n; d++) {
            gmp_pkv *dl = &val->v.o->d.items[d];
            if (dl->type != GMP_PK_LIST || streams(dl->v.o))
                continue;
            for (uint32_t j = 0; j < dl->v.o->n; j++) {
                msg[0] = 0;
                if (P->cb.item && P->cb.item(P->cb.ctx, GMP_PKS_LISTS, d, &dl->v.o->d.items[j], msg,
                                             sizeof msg) != 0)
                    goto stopped;
            }
        }
    }
    return 0;
stopped:
    P->code = GMP_ERR_FORMAT;
    P->consumer_stop = 1;
    if (P->err && P->errlen)
        snprintf(P->err, P->errlen, "%s", msg);
    return -1;
}

gmp_pkstream *gmp_pkstream_new(const gmp_pickle_limits *lim, const gmp_pkstream_cb *cb)
{
    gmp_pkstream *P = calloc(1, sizeof *P);
    if (!P)
        return NULL;
    if (lim)
        P->lim = *lim;
    else
        gmp_pickle_limits_default(&P->lim);
    if (cb)
        P->cb = *cb;
    P->fd = -1;
    return P;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static gmp_err run(gmp_pkstream *P, char *err, size_t errlen)
{
    P->err = err;
    P->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    if (P->done || P->code != GMP_OK || P->sn)
        return gmp_pks_fail(P, GMP_ERR_ARG, "bad argument"), GMP_ERR_ARG;
    double t0 = now_s();
    gmp_pks_input_reset(P);
    if (P->sparse) {
        gmp_pks_sparse_grow(P, 0);
    } else {
        gmp_pks_scan(P);
        if (P->code == GMP_OK)
            gmp_pks_memo_prepare(P);
    }
    double t1 = now_s();
    gmp_pks_input_reset(P);
    P->fill = &P->bat;
    if (P->code == GMP_OK)
        parse(P);
    gmp_pks_flat_drop(P); /* the records never handed over */
    gmp_pks_flush(P);
    if (P->code == GMP_OK && P->done && finish(P) == 0) {
        P->result = P->stack[0];
        P->sn = 0;
    }
    P->scan_s = t1 - t0;
    P->parse_s = now_s() - t1;
    free(P->buf);
    P->buf = NULL;
    return P->code != GMP_OK ? P->code : GMP_OK;
}

gmp_err gmp_pkstream_run_fd(gmp_pkstream *P, int fd, char *err, size_t errlen)
{
    if (!P)
        return GMP_ERR_ARG;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) {
        if (err && errlen)
            snprintf(err, errlen, "cannot read the input: %s", strerror(errno));
        return GMP_ERR_IO;
    }
    P->fd = fd;
    P->size = (uint64_t)end;
    P->bufcap = INBUF;
    P->buf = malloc(P->bufcap);
    if (!P->buf) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    P->mem += P->bufcap;
    return run(P, err, errlen);
}

gmp_err gmp_pkstream_run_mem(gmp_pkstream *P, const void *data, size_t n, char *err, size_t errlen)
{
    if (!P || (!data && n))
        return GMP_ERR_ARG;
    P->fd = -1;
    P->size = n;
    P->data = data ? data : (const void *)"";
    return run(P, err, errlen);
}

void gmp_pkstream_one_pass(gmp_pkstream *P, const char *keep_key, size_t budget)
{
    if (P) {
        P->sparse = 1;
        P->keep_key = keep_key;
        P->budget = budget;
    }
}

int gmp_pkstream_stopped_by_consumer(const gmp_pkstream *P)
{
    return P && P->consumer_stop;
}

const gmp_pkv *gmp_pkstream_root(const gmp_pkstream *P)
{
    return P && P->done && P->code == GMP_OK ? &P->result : NULL;
}

size_t gmp_pkstream_peak_memory(const gmp_pkstream *P)
{
    return P ? P->peak : 0;
}

void gmp_pkstream_times(const gmp_pkstream *P, double *scan_s, double *parse_s)
{
    if (scan_s)
        *scan_s = P ? P->scan_s : 0;
    if (parse_s)
        *parse_s = P ? P->parse_s : 0;
}

void gmp_pkstream_no_flat(gmp_pkstream *P)
{
    if (P)
        P->no_flat = 1;
}

size_t gmp_pkstream_flat_entries(const gmp_pkstream *P)
{
    return P ? P->nflat_total : 0;
}

void gmp_pkstream_free(gmp_pkstream *P)
{
    if (!P)
        return;
    unref(P, &P->result);
    drop_from(P, 0);
    for (size_t i = 0; i < P->nslots; i++) {
        slot_unref(P, &P->slots[i]);
    }
    if (P->root) {
        gmp_pkv r = {.type = P->root->type, .v.o = P->root};
        unref(P, &r);
    }
    free(P->bat.it);
    free(P->bat.pairs);
    free(P->bat.recs);
    free(P->bat.husks);
    free(P->stack);
    free(P->marks);
    free(P->cnt);
    free(P->mw);
    free(P->slots);
    free(P->defined);
    free(P->buf);
    gmp_pks_slabs_free(P);
    free(P);
}
