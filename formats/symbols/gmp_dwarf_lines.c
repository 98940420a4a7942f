/* gmp_dwarf_lines: the symbolizer's own reader of DWARF line tables (.debug_line, versions 2 to
 * 5), see gmp_dwarf_lines.h. */
#include "gmp_dwarf_lines.h"

#include <libdwarf/dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The line programs of .debug_line are read here rather than through libdwarf: libdwarf 20210528
 * (Debian 12) starts every DWARF 5 sequence with the file register at 0, where DWARF 5 (section
 * 6.2.2, table 6.4) says 1, as in DWARF 2-4. Rows before a sequence's first DW_LNS_set_file then
 * name file 0, which is the primary source file (what gcc lists as both 0 and 1, but not always:
 * a header whose function comes first in the assembly is gcc's file 1) or nvcc's temporary
 * tmpxft_*.cudafe1.cpp (file 0, where file 1 is the .cu file that #line directives name). Later
 * libdwarf releases start at 1. File names are built as llvm-symbolizer builds them (an absolute
 * name as it is; else the directory entry, after the compilation directory when that entry is
 * relative; DWARF 5's directory 0 is the compilation directory itself). Every offset and length is
 * checked against the section: a bad table is dropped (libdwarf's rows are used instead). */

typedef struct lcur {
    const uint8_t *p, *end;
    int bad;
} lcur;

static uint64_t lc_fixed(lcur *c, unsigned n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)c->p[i] << (8 * i); /* little-endian (x86-64, aarch64) */
    c->p += n;
    return v;
}

static uint64_t lc_uleb(lcur *c)
{
    uint64_t v = 0;
    for (unsigned sh = 0; !c->bad; sh += 7) {
        if (c->p >= c->end) {
            c->bad = 1;
            break;
        }
        uint8_t b = *c->p++;
        if (sh < 64)
            v |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

static int64_t lc_sleb(lcur *c)
{
    uint64_t v = 0;
    unsigned sh = 0;
    uint8_t b = 0;
    do {
        if (c->bad || c->p >= c->end) {
            c->bad = 1;
            return 0;
        }
        b = *c->p++;
        if (sh < 64)
            v |= (uint64_t)(b & 0x7f) << sh;
        sh += 7;
    } while (b & 0x80);
    if (sh < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << sh;
    return (int64_t)v;
}

static const char *lc_cstr(lcur *c)
{
    if (c->bad)
        return NULL;
    const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!z) {
        c->bad = 1;
        return NULL;
    }
    const char *r = (const char *)c->p;
    c->p = z + 1;
    return r;
}

static void lc_skip(lcur *c, uint64_t n)
{
    if (c->bad || (uint64_t)(c->end - c->p) < n)
        c->bad = 1;
    else
        c->p += n;
}

/* A NUL-terminated string at off in a string section; NULL when out of bounds. */
static const char *sect_str(const gmp_dwarf_sect *s, uint64_t off)
{
    if (!s->p || off >= s->n || !memchr(s->p + off, 0, s->n - (size_t)off))
        return NULL;
    return (const char *)s->p + off;
}

/* One attribute value of a DWARF 5 directory or file entry: a string (*str) or a number (*num).
 * Returns 0, or -1 for a form not allowed here (or not supported: DW_FORM_strx needs the unit's
 * string offsets). */
static int lc_form(gmp_dwarf_lines *c, lcur *cur, uint64_t form, int off64, const char **str,
                   uint64_t *num)
{
    *str = NULL;
    *num = 0;
    switch (form) {
    case DW_FORM_string: *str = lc_cstr(cur); return 0;
    case DW_FORM_line_strp:
        *str = sect_str(&c->debug_line_str, lc_fixed(cur, off64 ? 8 : 4));
        return 0;
    case DW_FORM_strp: *str = sect_str(&c->debug_str, lc_fixed(cur, off64 ? 8 : 4)); return 0;
    case DW_FORM_udata: *num = lc_uleb(cur); return 0;
    case DW_FORM_data1: *num = lc_fixed(cur, 1); return 0;
    case DW_FORM_data2: *num = lc_fixed(cur, 2); return 0;
    case DW_FORM_data4: *num = lc_fixed(cur, 4); return 0;
    case DW_FORM_data8: *num = lc_fixed(cur, 8); return 0;
    case DW_FORM_data16: lc_skip(cur, 16); return 0;
    case DW_FORM_block: lc_skip(cur, lc_uleb(cur)); return 0;
    case DW_FORM_block1: lc_skip(cur, lc_fixed(cur, 1)); return 0;
    default: return -1;
    }
}

static int is_abs(const char *p)
{
    return p && p[0] == '/';
}

/* dir + "/" + name, skipping empty parts (as llvm's sys::path::append) */
static void path_append(char *buf, size_t n, const char *part)
{
    if (!part || !*part)
        return;
    size_t k = strlen(buf);
    if (k && buf[k - 1] != '/' && k + 1 < n)
        buf[k++] = '/', buf[k] = 0;
    snprintf(buf + k, n - k, "%s", part);
}

static int ftab_push(gmp_dwarf_lines *c, const char *name)
{
    if (c->nftab == c->capftab) {
        size_t nc = c->capftab ? c->capftab * 2 : 64;
        const char **nt = realloc(c->ftab, nc * sizeof *nt);
        if (!nt)
            return -1;
        c->ftab = nt;
        c->capftab = nc;
    }
    c->ftab[c->nftab++] = name;
    return 0;
}

/* The file entry's full name, as llvm-symbolizer shows it, interned. */
static const char *full_name(gmp_dwarf_lines *c, int version, const char *name, uint64_t dir,
                             const char **dirs, size_t ndirs, const char *comp_dir)
{
    if (!name)
        return NULL;
    if (is_abs(name))
        return c->intern(c->ctx, name);
    const char *inc = NULL;
    if (version >= 5) {
        if (dir < ndirs)
            inc = dirs[dir];
    } else if (dir > 0 && dir <= ndirs) {
        inc = dirs[dir - 1];
    }
    char buf[4096];
    buf[0] = 0;
    if ((version < 5 || dir != 0) && comp_dir && !is_abs(inc))
        path_append(buf, sizeof buf, comp_dir);
    path_append(buf, sizeof buf, inc);
    path_append(buf, sizeof buf, name);
    return c->intern(c->ctx, buf);
}

/* DWARF 5 directory or file entries: count entries of the formats at cur. Directories: names into
 * dirs; files: full names into c->ftab. */
static int lc_entries(gmp_dwarf_lines *c, lcur *cur, int off64, int files, const char ***dirs,
                      size_t *ndirs, const char *comp_dir)
{
    uint64_t fmt[2][16];
    unsigned nfmt = (unsigned)lc_fixed(cur, 1);
    if (nfmt > 16)
        return -1;
    for (unsigned i = 0; i < nfmt; i++) {
        fmt[0][i] = lc_uleb(cur);
        fmt[1][i] = lc_uleb(cur);
    }
    uint64_t count = lc_uleb(cur);
    if (cur->bad || count > (uint64_t)(cur->end - cur->p)) /* each entry takes a byte at least */
        return -1;
    if (!files) {
        *dirs = calloc(count ? count : 1, sizeof **dirs);
        if (!*dirs)
            return -1;
        *ndirs = (size_t)count;
    }
    for (uint64_t e = 0; e < count && !cur->bad; e++) {
        const char *name = NULL;
        uint64_t dir = 0;
        for (unsigned i = 0; i < nfmt; i++) {
            const char *str;
            uint64_t num;
            if (lc_form(c, cur, fmt[1][i], off64, &str, &num) != 0)
                return -1;
            if (fmt[0][i] == DW_LNCT_path)
                name = str;
            else if (fmt[0][i] == DW_LNCT_directory_index)
                dir = num;
        }
        if (!files)
            (*dirs)[e] = name;
        else if (ftab_push(c, full_name(c, 5, name, dir, *dirs, *ndirs, comp_dir)) != 0)
            return -1;
    }
    return cur->bad ? -1 : 0;
}

static int push_row(gmp_dwarf_lines *c, uint64_t addr, uint64_t file, uint64_t line, int end)
{
    return c->row(c->ctx, addr, end ? NULL : gmp_dwarf_lines_file(c, file), line, end);
}

int gmp_dwarf_lines_read(gmp_dwarf_lines *c, uint64_t off, const char *comp_dir)
{
    const gmp_dwarf_sect *s = &c->debug_line;
    if (!s->p || off >= s->n)
        return -1;
    const char **dirs = NULL;
    size_t ndirs = 0;
    c->nftab = 0;
    lcur cur = {s->p + off, s->p + s->n, 0};
    uint64_t len = lc_fixed(&cur, 4);
    int off64 = 0;
    if (len == 0xffffffffu) {
        len = lc_fixed(&cur, 8);
        off64 = 1;
    }
    if (cur.bad || len > (uint64_t)(cur.end - cur.p))
        return -1;
    cur.end = cur.p + len; /* this unit's table */
    int version = (int)lc_fixed(&cur, 2);
    if (version < 2 || version > 5)
        return -1;
    unsigned asz = 8;
    if (version >= 5) {
        asz = (unsigned)lc_fixed(&cur, 1);
        lc_fixed(&cur, 1); /* segment selector size */
    }
    uint64_t hlen = lc_fixed(&cur, off64 ? 8 : 4);
    if (cur.bad || hlen > (uint64_t)(cur.end - cur.p))
        return -1;
    const uint8_t *prog = cur.p + hlen;
    unsigned min_inst = (unsigned)lc_fixed(&cur, 1);
    if (version >= 4)
        lc_fixed(&cur, 1); /* maximum operations per instruction (VLIW: not supported) */
    int default_stmt = (int)lc_fixed(&cur, 1);
    (void)default_stmt;
    int line_base = (int8_t)lc_fixed(&cur, 1);
    unsigned line_range = (unsigned)lc_fixed(&cur, 1);
    unsigned opcode_base = (unsigned)lc_fixed(&cur, 1);
    if (cur.bad || line_range == 0 || opcode_base == 0 || (asz != 4 && asz != 8))
        return -1;
    uint8_t oplen[256] = {0};
    for (unsigned i = 1; i < opcode_base; i++)
        oplen[i] = (uint8_t)lc_fixed(&cur, 1);
    int rc = 0;
    if (version >= 5) {
        c->fbase = 0;
        if (lc_entries(c, &cur, off64, 0, &dirs, &ndirs, comp_dir) != 0 ||
            lc_entries(c, &cur, off64, 1, &dirs, &ndirs, comp_dir) != 0)
            rc = -1;
    } else {
        c->fbase = 1;
        size_t capdirs = 0;
        for (;;) {
            const char *d = lc_cstr(&cur);
            if (!d || !*d)
                break;
            if (ndirs == capdirs) {
                size_t nc = capdirs ? capdirs * 2 : 16;
                const char **nd = realloc(dirs, nc * sizeof *nd);
                if (!nd) {
                    cur.bad = 1;
                    break;
                }
                dirs = nd;
                capdirs = nc;
            }
            dirs[ndirs++] = d;
        }
        for (;;) {
            const char *name = lc_cstr(&cur);
            if (!name || !*name)
                break;
            uint64_t dir = lc_uleb(&cur);
            lc_uleb(&cur); /* modification time */
            lc_uleb(&cur); /* length */
            if (cur.bad ||
                ftab_push(c, full_name(c, version, name, dir, dirs, ndirs, comp_dir)) != 0) {
                rc = -1;
                break;
            }
        }
        if (cur.bad)
            rc = -1;
    }
    free(dirs);
    if (rc != 0 || prog > cur.end) {
        c->nftab = 0;
        return -1;
    }
    /* the line number program */
    cur.p = prog;
    uint64_t addr = 0, file = 1, line = 1;
    while (cur.p < cur.end && !cur.bad) {
        unsigned op = *cur.p++;
        if (op >= opcode_base) { /* special opcode */
            unsigned adj = op - opcode_base;
            addr += (uint64_t)(adj / line_range) * min_inst;
            line += (uint64_t)(int64_t)(line_base + (int)(adj % line_range));
            if (push_row(c, addr, file, line, 0) != 0)
                cur.bad = 1;
            continue;
        }
        switch (op) {
        case 0: { /* extended */
            uint64_t n = lc_uleb(&cur);
            if (cur.bad || n == 0 || n > (uint64_t)(cur.end - cur.p)) {
                cur.bad = 1;
                break;
            }
            const uint8_t *next = cur.p + n;
            unsigned sub = *cur.p++;
            if (sub == DW_LNE_end_sequence) {
                if (push_row(c, addr, file, line, 1) != 0)
                    cur.bad = 1;
                addr = 0;
                file = 1;
                line = 1;
            } else if (sub == DW_LNE_set_address) {
                if (n - 1 == 4 || n - 1 == 8)
                    addr = lc_fixed(&cur, (unsigned)(n - 1));
            }
            cur.p = next; /* define_file, set_discriminator, vendor opcodes: skipped */
            break;
        }
        case DW_LNS_copy:
            if (push_row(c, addr, file, line, 0) != 0)
                cur.bad = 1;
            break;
        case DW_LNS_advance_pc: addr += lc_uleb(&cur) * min_inst; break;
        case DW_LNS_advance_line: line += (uint64_t)lc_sleb(&cur); break;
        case DW_LNS_set_file: file = lc_uleb(&cur); break;
        case DW_LNS_const_add_pc:
            addr += (uint64_t)((255 - opcode_base) / line_range) * min_inst;
            break;
        case DW_LNS_fixed_advance_pc: addr += lc_fixed(&cur, 2); break;
        default: /* set_column, negate_stmt, ..., unknown: skip their operands */
            for (unsigned i = 0; i < oplen[op] && !cur.bad; i++)
                lc_uleb(&cur);
            break;
        }
    }
    if (cur.bad) {
        c->nftab = 0;
        return -1;
    }
    return 0;
}

const char *gmp_dwarf_lines_file(const gmp_dwarf_lines *c, uint64_t no)
{
    if (no < (uint64_t)c->fbase || no - (uint64_t)c->fbase >= c->nftab)
        return NULL;
    return c->ftab[no - (uint64_t)c->fbase];
}

void gmp_dwarf_lines_free(gmp_dwarf_lines *c)
{
    free(c->ftab);
    c->ftab = NULL;
    c->nftab = c->capftab = 0;
}
