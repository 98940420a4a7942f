/* gmp_report_diff: the document (gmp_doc.h) of `gpumemprof diff`: two traces compared
 * (formats/replay/gmp_diff.h), per device and table by table, biggest changes first. The CLI
 * renders it with any renderer (gmp_render.h); the JSON it gives is the schema gpumemprof-diff/2 of
 * docs/diff.md. */
#ifndef GMP_REPORT_DIFF_H
#define GMP_REPORT_DIFF_H

#include <stddef.h>

#include "gmp_diff.h"
#include "gmp_doc.h"

/* The comparison D of a (before) and b (after). top: rows per device in each table (0: all).
 * NULL when out of memory. */
gmp_doc *gmp_report_diff_doc(const gmp_diff *D, const gmp_diff_profile *a,
                             const gmp_diff_profile *b, size_t top);

#endif
