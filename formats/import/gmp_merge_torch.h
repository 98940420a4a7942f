/* gmp_merge_torch: one timeline from a gpumemprof trace and PyTorch's memory history of the same
 * process (`run --torch-history` writes TRACE.torch.pickle beside TRACE): segments from CUPTI,
 * blocks (tensors) with their Python/C++ stacks from PyTorch. docs/python.md has the user's view.
 *
 * Inputs: the trace, and the snapshot already imported as a trace (gmp_import_torch: segments are
 * pools whose handle is the segment's address, blocks are async-pool ALLOC/FREE records, its
 * header maps its clock to the wall clock). Output: a new trace, written to out_fd, where
 *  - every record of the trace is kept (ids of strings, stacks and ranges renumbered), except its
 *    allocations that are a snapshot segment (same device, address and size; a device allocation
 *    that succeeded): such an ALLOC becomes POOL create + POOL reserved (the segment's size, pool
 *    handle = its address) at the trace's time, its FREE a POOL destroy: the caching allocator's
 *    reserved memory, as a stream-ordered pool's is modelled (docs/trace-format.md);
 *  - the snapshot's blocks are added as they were imported (async-pool ALLOC/FREE with their
 *    frames, on a thread of their own named "PyTorch memory history"), their times moved from
 *    PyTorch's wall clock (time_us) to the trace clock through the two headers (start_wall_ns,
 *    start_trace_ns); blocks that existed before the history window keep the importer's rule
 *    (written at the window's start);
 *  - every block (tensor) gets a range path, from the first of: the entry's user_metadata (a path
 *    the program set with torch.cuda.memory._set_memory_metadata; --layers' hooks set the path of
 *    the ranges they opened: the range of the trace open at that time, on any thread, whose path
 *    ends with it, the one pushed last of several, so that the trace's outer ranges stay around
 *    it, e.g. `train/model/...` for `model/...`; else the path alone), the snapshot's
 * record_function annotations (both made ranges by the importer, told apart by their domains,
 *    gmp_torch_layout.h; the snapshot's range events come along on its threads) or its compiled
 *    region, else the range open on the trace at that time: the innermost range of the thread
 *    whose range stack changed last among those with one open (the thread running the forward, or
 *    autograd's for the backward), the block then written on that thread; a NOTICE says how many
 *    blocks each source gave;
 *  - the snapshot's own pool records are dropped (reserved memory is the trace's: segments that
 *    are none of the trace's allocations, expandable segments and pre-window filler are counted
 *    and said in a notice), and so are its OOM records (the trace has the failed cudaMalloc);
 *  - a NOTICE (info) says that the view is merged and from which file; the snapshot's notices are
 *    kept, prefixed.
 * Refused with one line (GMP_ERR_FORMAT) when the two cannot be one timeline: the snapshot has no
 * time_us or the trace no wall clock, it has no segment with an address, none of its segments is
 * an allocation of the trace, or its times are not within the trace's (another run); and
 * (GMP_ERR_UNSUPPORTED) when its only segments are expandable ones (expandable_segments:True: the
 * trace has their memory as VMM records, which are not matched yet; the replay would count the
 * blocks as reserved a second time). A snapshot with both kinds is merged: the blocks of its
 * expandable segments are added, and said in the notice. */
#ifndef GMP_MERGE_TORCH_H
#define GMP_MERGE_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"

typedef struct gmp_merge_torch_stats {
    uint64_t snap_segments;       /* snapshot segments with an address */
    uint64_t matched_segments;    /* of them, allocations of the trace (pools in the output) */
    uint64_t pools;               /* trace allocations turned into pools (address reuse counts) */
    uint64_t unmatched_segments;  /* snapshot segments the trace does not have */
    uint64_t other_pools;         /* expandable-segment and pre-window filler pools dropped */
    uint64_t blocks, block_frees; /* block ALLOC / FREE records added */
    uint64_t pre_blocks;          /* among the ALLOCs: blocks from before the history window */
    uint64_t ooms_dropped;
    /* where the blocks' ranges came from */
    uint64_t range_metadata, range_annotation, range_compile, range_trace, range_none;
    uint64_t range_metadata_trace; /* of range_metadata: the trace's range that ends with it */
    int64_t offset_ns;             /* snapshot trace time + offset_ns = trace time */
} gmp_merge_torch_stats;

/* Merges. trace_path: the trace; snap_trace_path: the snapshot imported by gmp_import_torch;
 * snap_name: the snapshot as the user knows it (for the notice). out_fd is owned (closed). On
 * failure returns an error with one line in msg (nothing useful is in out_fd then). stats may be
 * NULL. */
gmp_err gmp_merge_torch(const char *trace_path, const char *snap_trace_path, const char *snap_name,
                        int out_fd, gmp_merge_torch_stats *stats, char *msg, size_t msglen);

#endif
