/* gmp_symbolize: offline symbolization of native return addresses recorded in a trace (STACK
 * records of kind native) against the module map of the run (MODULE records).
 *
 * An address resolves to a list of frames, innermost first: the functions inlined at that address
 * (innermost first), then the function that contains it, each with file and line (DWARF 2-5: the
 * line table, read by our own reader, and DW_TAG_inlined_subroutine scopes through libdwarf), as
 * llvm-symbolizer gives them (tests/stacks/check_llvm_symbolizer.py); the outermost function is
 * named by its ELF symbol when one covers the address. Without DWARF, the ELF symbol table
 * (.symtab, else .dynsym) names the function. Debug information is looked for in the module's file
 * itself, in a separate debug file found by build-id (<debug-dir>/.build-id/xx/yyyy.debug) and by
 * .gnu_debuglink (next to the file, in its .debug/ directory, under <debug-dir>).
 *
 * Never a wrong name, never a failure: a module whose file is missing or whose build-id differs
 * from the one recorded at run time, an address outside every module, or a module without symbols
 * gives one frame with no function and a status that says why; its display name is
 * "module+0xoffset". Each address is resolved once (cache) and each module's debug information is
 * read once, when an address first needs it.
 *
 * Addresses are return addresses (the instruction after a call): lines are looked up at address-1,
 * which is the call instruction itself. */
#ifndef GMP_SYMBOLIZE_H
#define GMP_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_reader.h"
#include "gmp_trace.h"

typedef struct gmp_symbolizer gmp_symbolizer;

typedef enum gmp_sym_status {
    GMP_SYM_OK = 0,        /* function known (file and line when DWARF had them) */
    GMP_SYM_NO_MODULE = 1, /* the address is in no recorded module */
    GMP_SYM_MISSING = 2,   /* the module's file cannot be read (removed since the run) */
    GMP_SYM_CHANGED = 3,   /* the file's build-id differs from the run's: it was rebuilt */
    GMP_SYM_NO_SYMBOL = 4, /* the file has no symbol for this address (stripped) */
} gmp_sym_status;

typedef struct gmp_sym_frame {
    const char *function; /* NULL unless status is GMP_SYM_OK */
    const char *file;     /* source file, NULL when unknown */
    uint32_t line;        /* 0 when unknown */
    const char *module;   /* the module's path as recorded, NULL when none */
    uint64_t offset;      /* address - module load bias (the file's virtual address) */
    uint64_t address;     /* the address asked for */
    int inlined;          /* 1: inlined into the next frame of the list */
    gmp_sym_status status;
} gmp_sym_frame;

/* Module images shared by several symbolizers, e.g. one per trace of the ranks of a job, which
 * load the same libraries: each module file is read once for all of them. An image is keyed by
 * the module's build-id (any path), or, when the module has none, by its path and the file's size
 * and modification time. Safe to use from several threads at once (each with its own
 * symbolizer) once made (make it before the threads start: it sets libelf's global version);
 * symbolizers that share a cache must have the same debug_dir and no_dwarf. Free it
 * after every symbolizer that uses it (their frames point into its images). */
typedef struct gmp_sym_cache gmp_sym_cache;
gmp_err gmp_sym_cache_new(gmp_sym_cache **out);
void gmp_sym_cache_free(gmp_sym_cache *c);
/* Module files read through c so far. */
uint64_t gmp_sym_cache_loads(gmp_sym_cache *c);

typedef struct gmp_sym_opts {
    const char *debug_dir; /* separate debug files; NULL: /usr/lib/debug */
    int no_dwarf;          /* ELF symbols only (tests, benchmarks) */
    gmp_sym_cache *cache;  /* NULL: the symbolizer reads its own images */
} gmp_sym_opts;

gmp_err gmp_symbolizer_new(gmp_symbolizer **out, const gmp_sym_opts *o);
void gmp_symbolizer_free(gmp_symbolizer *s);

/* Adds a module of the run. An address resolves against the last added module that covers it. */
gmp_err gmp_symbolizer_add_module(gmp_symbolizer *s, const gmp_rec_module *m);

/* Adds the modules r has defined since the last call with r (call it after reading the trace, or
 * at any time: only the new ones are added). */
gmp_err gmp_symbolizer_add_reader_modules(gmp_symbolizer *s, const gmp_reader *r);

/* Resolves address: sets *frames to at least one frame (innermost first) and returns how many.
 * The frames and their strings live as long as s. Never fails: on any trouble the single frame
 * says why (status). */
size_t gmp_symbolize(gmp_symbolizer *s, uint64_t address, const gmp_sym_frame **frames);

/* A one-line name for a native frame, for exporters (speedscope, Chrome trace):
 * "function (file.c:42)", "function" when no line is known, "libfoo.so+0x1234" when unknown,
 * "0x7f12..." when no module covers it. Inlined frames are joined outermost first with " > "
 * ("caller (a.c:3) > inlined_fn (a.h:7)") unless innermost_only. Writes at most n bytes to buf
 * (always terminated) and returns buf. */
const char *gmp_symbolize_frame(gmp_symbolizer *s, uint64_t address, int innermost_only, char *buf,
                                size_t n);

/* "ok", "no module", "file missing", "build-id mismatch", "no symbol". */
const char *gmp_sym_status_name(gmp_sym_status st);

typedef struct gmp_sym_stats {
    uint64_t lookups, cache_hits; /* gmp_symbolize calls, answered from the cache */
    uint64_t modules_loaded;      /* module files read */
    uint64_t dwarf_modules;       /* among them, with DWARF */
} gmp_sym_stats;
void gmp_symbolizer_get_stats(const gmp_symbolizer *s, gmp_sym_stats *out);

#endif
