/* cli_report_sym: see cli_report_sym.h. One symbolizer per trace (the module maps of several
 * processes must not mix), made on the first native frame of the trace; all of them share one
 * cache of module images (gmp_sym_cache), so that the ranks of a job, which load the same
 * libraries, read each library's symbols once. */
#include "cli_report_sym.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_report.h"
#include "gmp_symbolize.h"

static const char *g_debug_dir;
/* made by the first install, before any thread that uses it (NULL until then, or when out of
 * memory: no sharing) */
static gmp_sym_cache *g_cache;

static void cache_free(void)
{
    gmp_sym_cache_free(g_cache);
    g_cache = NULL;
}

gmp_sym_cache *gmp_cli_sym_cache(void)
{
    return g_cache;
}

/* The names tables show, as gpumemprof's text report has always shown them: "function
 * (file.c:42)" when the line is known, else the symbolizer's innermost name for the address. */
static void display(gmp_symbolizer *sym, const gmp_sym_frame *y, char *buf, size_t n)
{
    if (y->function && y->file && y->line) {
        const char *b = strrchr(y->file, '/');
        snprintf(buf, n, "%s (%s:%" PRIu32 ")", y->function, b ? b + 1 : y->file, y->line);
    } else {
        gmp_symbolize_frame(sym, y->address, 1, buf, n);
    }
}

static size_t resolve(void **state, const gmp_reader *r, uint64_t address, gmp_report_sym *out,
                      size_t max)
{
    gmp_symbolizer *sym = *state;
    if (!sym) {
        gmp_sym_opts so = {g_debug_dir, 0, gmp_cli_sym_cache()};
        if (gmp_symbolizer_new(&sym, &so) != GMP_OK)
            return 0;
        *state = sym;
    }
    gmp_symbolizer_add_reader_modules(sym, r); /* modules defined since the last call */
    const gmp_sym_frame *sf = NULL;
    size_t n = gmp_symbolize(sym, address, &sf);
    if (n > max)
        n = max;
    for (size_t k = 0; k < n; k++) {
        const gmp_sym_frame *y = &sf[k];
        gmp_report_sym *o = &out[k];
        o->function = y->function;
        o->file = y->file;
        o->line = y->line;
        o->module = y->module;
        o->offset = y->offset;
        o->inlined = y->inlined;
        o->unknown = y->status != GMP_SYM_OK ? gmp_sym_status_name(y->status) : NULL;
        display(sym, y, o->display, sizeof o->display);
    }
    return n;
}

static void free_state(void *state)
{
    gmp_symbolizer_free(state);
}

static const gmp_report_symbolizer cli_symbolizer = {resolve, free_state};

void gmp_cli_report_symbolizer_install(const char *debug_dir)
{
    g_debug_dir = debug_dir;
    if (!g_cache && gmp_sym_cache_new(&g_cache) == GMP_OK)
        (void)atexit(cache_free);
    gmp_report_set_symbolizer(&cli_symbolizer);
}

int gmp_cli_symbolize_frame(void *ctx, const gmp_reader *r, uint64_t address, gmp_obuf *name,
                            gmp_obuf *file, uint32_t *line)
{
    gmp_cli_symctx *sc = ctx;
    if (sc->r != r) {
        gmp_symbolizer_free(sc->s);
        sc->s = NULL;
        sc->r = r;
        gmp_sym_opts so = {sc->debug_dir, 0, gmp_cli_sym_cache()};
        sc->failed = gmp_symbolizer_new(&sc->s, &so) != GMP_OK;
    }
    if (sc->failed)
        return 0;
    gmp_symbolizer_add_reader_modules(sc->s, r); /* modules defined since the last call */
    const gmp_sym_frame *fr = NULL;
    size_t n = gmp_symbolize(sc->s, address, &fr);
    if (!n || fr[0].status != GMP_SYM_OK)
        return 0; /* unknown: the caller's "module+0xoffset" */
    char buf[1024];
    gmp_symbolize_frame(sc->s, address, 0, buf, sizeof buf);
    gmp_obuf_add(name, buf, strlen(buf));
    if (fr[0].file)
        gmp_obuf_add(file, fr[0].file, strlen(fr[0].file));
    else if (fr[0].module)
        gmp_obuf_add(file, fr[0].module, strlen(fr[0].module));
    *line = fr[0].file ? fr[0].line : 0;
    return 1;
}

void gmp_cli_symctx_reset(gmp_cli_symctx *sc)
{
    gmp_symbolizer_free(sc->s);
    sc->s = NULL;
    sc->r = NULL;
    sc->failed = 0;
}
