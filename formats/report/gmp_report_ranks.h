/* gmp_report_ranks: the ranks of a job side by side, at any number of ranks. Each trace is reduced
 * to a per-rank summary (gmp_rank_summary: its devices' peaks, OOMs, leaks, growth, its ranges'
 * peaks), which is all that is kept of it: the cross-rank view (gmp_ranks_build: the table of
 * ranks, the outliers, each range's spread across the ranks) is made from the summaries alone, so
 * memory grows with the number of ranks only by a summary each, and the summaries can be made
 * apart (one task per trace, on other machines) and reduced later. A summary is written and read
 * as JSON (schema GMP_RANK_SUMMARY_SCHEMA, docs/report.md "Cross-rank view"); reading back what was
 * written gives the same summary, byte for byte, hence the same report.
 *
 * Other code that needs a per-rank row (the Parquet export's summary table, an analysis of OOMs
 * across ranks) includes this header and uses the same struct. */
#ifndef GMP_REPORT_RANKS_H
#define GMP_REPORT_RANKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmp_doc.h"
#include "gmp_error.h"
#include "gmp_report.h"

#define GMP_RANK_SUMMARY_SCHEMA "gpumemprof-rank-summary/1"
#define GMP_RANKS_SCHEMA "gpumemprof-ranks/1" /* the cross-rank view's JSON */
/* ranges kept per summary: the largest peaks (a summary stays small whatever the trace) */
#define GMP_RANK_MAX_RANGES 256
/* more traces than this make `report` show the cross-rank view (unless --per-process) */
#define GMP_RANKS_AUTO_ABOVE 8
#define GMP_RANKS_AUTO_ABOVE_S "8"

/* Where a summary's rank comes from. */
typedef enum gmp_rank_source {
    GMP_RANK_FROM_TRACE = 0, /* the trace's header (RANK, OMPI_COMM_WORLD_RANK, ... at run time) */
    GMP_RANK_FROM_ORDER = 1, /* none recorded: the trace's place among the inputs, from 0 */
} gmp_rank_source;

typedef struct gmp_rank_device {
    int32_t id;   /* -1 host */
    gmp_str name; /* the DEVICE record's (owned), empty when none */
    uint64_t total_bytes;
    uint64_t peak_allocated_bytes, peak_allocated_ns; /* ns: from the trace's start (t0) */
    uint64_t peak_reserved_bytes, peak_reserved_ns;
    uint64_t allocs, ooms;
    uint64_t leaked_bytes, leaked_count; /* still allocated at the program's exit */
    uint64_t unexplained_max_bytes;      /* driver-reported use no allocation explains */
} gmp_rank_device;

/* One range path on one device, as the report's ranges table has it. */
typedef struct gmp_rank_range {
    gmp_str path; /* owned */
    int32_t device;
    uint64_t entered;
    uint64_t peak_bytes;        /* the device's allocated bytes, max while inside */
    uint64_t peak_inside_bytes; /* of it, allocated inside the range */
    uint64_t left_bytes;        /* allocated inside and still live at the end */
} gmp_rank_range;

/* What is kept of one trace. Strings are owned (NUL-terminated too); times are ns from the trace's
 * first event (t0). */
typedef struct gmp_rank_summary {
    /* identity. rank is the hook for rank identity: the trace's own rank when it has one, else its
     * place among the inputs (rank_source says which); local_rank and world_size are -1 when the
     * trace does not say. */
    uint64_t index; /* place among the inputs, from 0 */
    int64_t rank;
    gmp_rank_source rank_source;
    int64_t local_rank, world_size;
    gmp_str path, label, host;
    uint32_t pid;
    uint64_t start_wall_ns; /* the wall clock at the trace's start (0: none) */
    /* the recording */
    uint64_t events, lost, duration_ns;
    int complete;
    gmp_report_end end;
    /* memory: the device with the largest allocated peak (-2 when nothing was allocated) */
    int32_t peak_device;
    uint64_t peak_allocated_bytes, peak_ns, peak_reserved_bytes; /* reserved: that device's */
    gmp_str top;      /* what held most of the peak: a range path, or a frame (top_is_frame) */
    int top_is_frame; /* the trace has no ranges */
    uint64_t top_bytes;
    uint64_t leaked_bytes; /* every device's, at the program's exit (0 for a cut trace) */
    uint64_t ooms;
    uint64_t first_oom_ns, first_oom_requested; /* valid when ooms */
    int32_t first_oom_device;
    /* growth: of the ranges that repeat, the one whose device memory grew most from its first to
     * its last exit (the analysis of docs/report.md "Growth over iterations"); 0 and empty: none */
    int64_t growth_bytes;
    uint64_t growth_repetitions;
    gmp_str growth_range;
    size_t ndevices;
    gmp_rank_device *devices; /* by id */
    size_t nranges;
    gmp_rank_range *ranges;   /* largest peak first, ties by path and device */
    uint64_t ranges_left_out; /* beyond GMP_RANK_MAX_RANGES */
} gmp_rank_summary;

/* The summary of trace t (complete: after its replay's end), index its place among the inputs.
 * Copies what it keeps: t may be freed afterwards. */
gmp_err gmp_rank_summary_from_trace(const gmp_report_trace *t, uint64_t index,
                                    gmp_rank_summary *out);
void gmp_rank_summary_clear(gmp_rank_summary *s);

/* JSON: {"schema": GMP_RANK_SUMMARY_SCHEMA, "summaries": [ ... n objects ... ]}. */
gmp_err gmp_rank_summary_write_json(FILE *f, const gmp_rank_summary *s, size_t n);
/* Parses such a document (untrusted bytes: any input gives a summary list or an error) and
 * appends its summaries to *arr (*n of them, *cap allocated; realloc'd). err: why not. */
gmp_err gmp_rank_summary_read_json(const char *buf, size_t len, gmp_rank_summary **arr, size_t *n,
                                   size_t *cap, char *err, size_t errlen);

/* The cross-rank view of n summaries (n >= 1) in the order given (the inputs' order): the
 * outliers, the table of ranks, the ranges' spread. v: top (rows of the ranges table and of the
 * ranks table; 0 all), device (only that device's figures). NULL when out of memory. */
/* The label a report gives summary s, the i-th of its inputs (from 0): "rank R, pid P", "pid P",
 * "snapshot I" or "trace I" (I from 1), as the per-process report labels it. */
void gmp_rank_summary_label(const gmp_rank_summary *s, size_t i, char *b, size_t cap);

/* An OOM across ranks for the view (gmp_report_ranks_oom.h, which depends on this module, hence
 * the functions): finding(d, parent, cmp) adds its line to a Findings block that then opens the
 * view, section(d, parent, cmp) the comparison's section (cmp NULL: none); else note, one line
 * saying why there is none when a rank ran out of memory (NULL: say nothing). */
typedef struct gmp_ranks_build_oom {
    const void *cmp;
    void (*finding)(gmp_doc *d, gmp_doc_block *parent, const void *cmp);
    void (*section)(gmp_doc *d, gmp_doc_block *parent, const void *cmp);
    const char *note;
} gmp_ranks_build_oom;

/* brief: the short form (the header, the findings, the outliers, then a line saying what the
 * full view adds), as `gpumemprof run` prints it for many processes. */
gmp_doc *gmp_ranks_build(const gmp_rank_summary *s, size_t n, const gmp_report_view *v,
                         const gmp_ranks_build_oom *oom, int brief);

#endif
