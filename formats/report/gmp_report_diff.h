/* gmp_report_diff: `gpumemprof diff` in the report's words. Each trace's profile
 * (formats/replay/gmp_diff.h) is taken from its report model (gmp_report.h), so that diff's
 * figures, leaks and frames are the report's: stacks symbolized by the report's symbolizer, keyed
 * by their frames as the report names them and shown folded as the report shows them, static
 * __device__ memory not leaked, what a snapshot holds at its end not leaked. The document
 * (gmp_doc.h) compares two traces per device and table by table, biggest changes first; the CLI
 * renders it with any renderer (gmp_render.h); the JSON it gives is the schema gpumemprof-diff/3
 * of docs/diff.md. */
#ifndef GMP_REPORT_DIFF_H
#define GMP_REPORT_DIFF_H

#include <stddef.h>

#include "gmp_diff.h"
#include "gmp_doc.h"
#include "gmp_report.h"

/* The profile of trace t (complete: its replay has ended), called name. Entries of the stack
 * tables have the stack's index in t as their ref. */
gmp_err gmp_report_diff_profile(gmp_diff_profile **out, const gmp_report_trace *t,
                                const char *name);

/* The comparison D of a (before, the profile of trace ta) and b (after, of tb). top: rows per
 * device in each table (0: all); all_frames: stacks unfolded (--all-frames). NULL when out of
 * memory. */
gmp_doc *gmp_report_diff_doc(const gmp_diff *D, const gmp_diff_profile *a,
                             const gmp_diff_profile *b, const gmp_report_trace *ta,
                             const gmp_report_trace *tb, size_t top, int all_frames);

#endif
