/* gmp_report_values: the report model's strings and stacks as document values, for the report's
 * builders. */
#ifndef GMP_REPORT_VALUES_H
#define GMP_REPORT_VALUES_H

#include <stdint.h>

#include "gmp_analysis.h"
#include "gmp_doc.h"
#include "gmp_report.h"

/* A stack of the model as a document stack (copied into d); NULL for GMP_REPORT_NO_STACK. Frames
 * that gmp_frames.h folds are marked internal unless all_frames. */
const gmp_doc_stack *gmp_report_doc_stack(gmp_doc *d, const gmp_report_trace *t, uint32_t stack,
                                          int all_frames);
/* After a document is built: in every table, two rows whose stacks differ never look the same in
 * a markup (which shows a stack's first items only): each such stack gets the number of items
 * that tells it apart (min_items), and two stacks that look the same even whole, their internal
 * frames folded, are shown unfolded. */
void gmp_report_stacks_apart(gmp_doc *d);

/* A trace string as a value (STR; `none` when empty). */
gmp_doc_val gmp_report_dv_str(const gmp_report_trace *t, uint32_t i, const char *none);

/* The columns that name an allocation site (gmp_analysis_site), after a table's own columns:
 * kind, range and stack, and for the JSON device and API. */
#define GMP_REPORT_SITE_COLS 5
/* Writes own[0..n) then the site's columns into out (n + GMP_REPORT_SITE_COLS of them); returns
 * how many. */
size_t gmp_report_site_table(gmp_doc_col *out, const gmp_doc_col *own, size_t n);
/* The site's cells (GMP_REPORT_SITE_COLS of them) of a row of such a table. */
void gmp_report_site_cells(gmp_doc *d, const gmp_report_trace *t, const gmp_report_view *v,
                           const gmp_analysis_site *s, gmp_doc_val *out);

#endif
