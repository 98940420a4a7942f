/* gmp_export: the outputs of formats/export that formats/replay/gmp_output.h does not declare
 * (each is a `const gmp_output`, listed in cli/cmd_convert.c's table). */
#ifndef GMP_EXPORT_H
#define GMP_EXPORT_H

#include "gmp_output.h"

extern const gmp_output gmp_out_pprof;    /* gmp_out_pprof.c: gzip-compressed profile.proto */
extern const gmp_output gmp_out_htmlview; /* gmp_out_htmlview.c: the offline HTML view */
/* gmp_out_htmlview.c: the same view as a <div id="gmp-view"> for the HTML report (no <html>) */
extern const gmp_output gmp_out_htmlview_fragment;

#endif
