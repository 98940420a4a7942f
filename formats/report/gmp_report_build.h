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

#endif
