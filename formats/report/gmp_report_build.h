/* gmp_report_build: builds the report document (gmp_doc.h) from the report model (gmp_report.h)
 * and a view (--top, --device, --by, --sort). What the report says, in which order, is decided
 * here and only here; the renderers (gmp_render.h) write the document in each format.
 *
 *   gmp_report_build.c           the trace header, devices, kinds, largest allocations, sites,
 *                                ranges, OOMs, anomalies, notices; several traces and their summary
 *   gmp_report_build_analysis.c  the analyses (gmp_analysis.h): growth, temporary allocations,
 *                                allocator overhead, why each OOM happened
 *   gmp_report_diff.c            `gpumemprof diff`: two traces compared (gmp_diff.h) */
#ifndef GMP_REPORT_BUILD_H
#define GMP_REPORT_BUILD_H

#include "gmp_doc.h"
#include "gmp_report.h"

/* The whole report of doc (one trace or several). NULL when out of memory. */
gmp_doc *gmp_report_build(const gmp_report_doc *doc, const gmp_report_view *v);

/* The analyses' blocks of one trace, appended to parent (the trace's section). Nothing when the
 * trace has no analysis. */
void gmp_report_build_analysis(gmp_doc *d, gmp_doc_block *parent, const gmp_report_trace *t,
                               const gmp_report_view *v);

/* A stack of the model as a document stack (copied into d); NULL for GMP_REPORT_NO_STACK. */
const gmp_doc_stack *gmp_report_doc_stack(gmp_doc *d, const gmp_report_trace *t, uint32_t stack);
/* A trace string as a value (STR; `none` when empty). */
gmp_doc_val gmp_report_dv_str(const gmp_report_trace *t, uint32_t i, const char *none);

#endif
