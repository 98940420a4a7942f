/* gmp_report_values: the report model's strings and stacks as document values, for the report's
 * builders. */
#ifndef GMP_REPORT_VALUES_H
#define GMP_REPORT_VALUES_H

#include <stdint.h>

#include "gmp_doc.h"
#include "gmp_report.h"

/* A stack of the model as a document stack (copied into d); NULL for GMP_REPORT_NO_STACK. */
const gmp_doc_stack *gmp_report_doc_stack(gmp_doc *d, const gmp_report_trace *t, uint32_t stack);
/* A trace string as a value (STR; `none` when empty). */
gmp_doc_val gmp_report_dv_str(const gmp_report_trace *t, uint32_t i, const char *none);

#endif
