/* gmp_report_build_analysis: the analyses' blocks of the report document (gmp_analysis.h's
 * results: growth, temporary allocations, allocator overhead, why each OOM happened). Called by the
 * report builder (gmp_report_build.c) for each trace. */
#ifndef GMP_REPORT_BUILD_ANALYSIS_H
#define GMP_REPORT_BUILD_ANALYSIS_H

#include "gmp_doc.h"
#include "gmp_report.h"

/* The analyses' blocks of one trace, appended to parent (the trace's section). Nothing when the
 * trace has no analysis. pfx: the trace's anchor prefix (gmp_report_findings.h): "Growth over
 * iterations" is anchored pfx "growth", "Out of memory, why" pfx "oom-why". */
void gmp_report_build_analysis(gmp_doc *d, gmp_doc_block *parent, const gmp_report_trace *t,
                               const gmp_report_view *v, const char *pfx);

/* The owner a leak verdict names: its range, else the first frame its stack shows (the same words
 * in the "Growth over iterations" section and in the findings). */
gmp_doc_val gmp_report_leak_owner(const gmp_report_trace *t, const gmp_analysis_leak *L);

#endif
