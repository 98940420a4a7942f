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

/* The report's last trace so far (after its replay: the CLI hands it the what-if of an OOM,
 * cli/cli_whatif.h, so that the files are what `report` writes); NULL when c is not one of the
 * two outputs above or no trace was added. */
struct gmp_report_trace *gmp_out_report_last_trace(const gmp_output *fmt, gmp_output_ctx *c);

#endif
