/* gmp_export: the outputs of formats/export, each a `const gmp_output` (the interface of
 * formats/replay/gmp_output.h) defined in its own gmp_out_NAME.c and listed in cli/cmd_convert.c's
 * table. The report's outputs are in formats/report/gmp_out_report.h. */
#ifndef GMP_EXPORT_H
#define GMP_EXPORT_H

#include "gmp_output.h"

extern const gmp_output gmp_out_speedscope; /* gmp_out_speedscope.c: speedscope JSON */
extern const gmp_output gmp_out_chrome;     /* gmp_out_chrome.c: Chrome trace / Perfetto JSON */
extern const gmp_output gmp_out_pytorch;    /* gmp_out_pytorch.c: a PyTorch snapshot pickle */
extern const gmp_output gmp_out_pprof;      /* gmp_out_pprof.c: gzip-compressed profile.proto */
extern const gmp_output gmp_out_htmlview;   /* gmp_out_htmlview.c: the offline HTML view */
/* gmp_out_parquet.c: Parquet tables in a directory (the output's path is a directory: start gets
 * no FILE) */
extern const gmp_output gmp_out_parquet;
/* Removes what a parquet export wrote into dir (its tables, its rank=R directories, dir when
 * empty): a conversion that fails leaves no output behind. */
void gmp_out_parquet_remove(const char *dir);
/* gmp_out_htmlview.c: the same view as a <div id="gmp-view"> for the HTML report (no <html>) */
extern const gmp_output gmp_out_htmlview_fragment;

#endif
