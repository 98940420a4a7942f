/* cli_report_sym: plugs the offline symbolizer (formats/symbols/gmp_symbolize.h, libdwarf) into the
 * report model (gmp_report_set_symbolizer), which lives in gmp_formats and cannot link it. Every
 * command that makes a report (report, convert --report/--json) calls this once. */
#ifndef GMP_CLI_REPORT_SYM_H
#define GMP_CLI_REPORT_SYM_H

/* debug_dir: separate debug files (NULL: /usr/lib/debug); kept by pointer. */
void gmp_cli_report_symbolizer_install(const char *debug_dir);

/* The module images every symbolizer of the process shares (made by the first install, which
 * comes before any thread that symbolizes; freed at exit; NULL before, or when out of memory).
 * One debug_dir per process: the commands install one. */
struct gmp_sym_cache;
struct gmp_sym_cache *gmp_cli_sym_cache(void);

/* The outputs' native frames (gmp_output_opts.symbolize): one symbolizer per trace (each has its
 * own module map), made on the trace's first native frame. Start with {0} (debug_dir: separate
 * debug files, NULL: /usr/lib/debug); gmp_cli_symctx_reset frees the symbolizer (between traces,
 * whose readers' addresses may be reused, and at the end). */
#include <stdint.h>

#include "gmp_output.h"

struct gmp_symbolizer;
typedef struct gmp_cli_symctx {
    struct gmp_symbolizer *s;
    const gmp_reader *r; /* the trace s was made for */
    const char *debug_dir;
    int failed;
} gmp_cli_symctx;

int gmp_cli_symbolize_frame(void *ctx, const gmp_reader *r, uint64_t address, gmp_obuf *name,
                            gmp_obuf *file, uint32_t *line);
void gmp_cli_symctx_reset(gmp_cli_symctx *sc);

#endif
