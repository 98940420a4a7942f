/* gmp_report_findings: the "Findings" block every report opens with (OOMs, probable leaks, memory
 * left at exit, growth, memory no allocation explains; each pointing at its detail). Called by the
 * report builder (gmp_report_build.c). */
#ifndef GMP_REPORT_FINDINGS_H
#define GMP_REPORT_FINDINGS_H

#include <stddef.h>

#include "gmp_doc.h"
#include "gmp_report.h"

/* The findings of trace `trace` of doc (SIZE_MAX: of every trace, each naming its process), as a
 * section appended to parent. The sections they point at are anchored by the builders with
 * gmp_report_anchor_prefix's prefix: "findings", "device-D", "device-D-leaks", "growth",
 * "oom-why". */
void gmp_report_build_findings(gmp_doc *d, gmp_doc_block *parent, const gmp_report_doc *doc,
                               size_t trace, const gmp_report_view *v);
/* The prefix of the anchors of trace `trace` ("" for a single trace, "p2-" for the second of
 * several) into buf. */
void gmp_report_anchor_prefix(char *buf, size_t n, const gmp_report_doc *doc, size_t trace);

#endif
