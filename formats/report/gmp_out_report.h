/* gmp_out_report: the report as outputs of `gpumemprof convert` (formats/replay/gmp_output.h's
 * interface; listed in cli/cmd_convert.c's table): --report FILE (text, Markdown, HTML or JSON by
 * FILE's extension) and --json FILE. Defined in gmp_out_report.c. */
#ifndef GMP_OUT_REPORT_H
#define GMP_OUT_REPORT_H

#include "gmp_error.h"
#include "gmp_output.h"

extern const gmp_output gmp_out_report;      /* text, Markdown or HTML by extension */
extern const gmp_output gmp_out_report_json; /* the JSON report */

/* convert --report FILE.html: `view` (an output writing markup, the HTML view's fragment) runs on
 * the same traces into memory and is placed as the report's timeline. Nothing for a report that is
 * not HTML. Call after gmp_out_report's start, before any trace. */
gmp_err gmp_out_report_set_view(gmp_output_ctx *c, const gmp_output *view,
                                const gmp_output_opts *opts);

#endif
