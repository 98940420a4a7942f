/* gmp_tui_tree: what is live at the viewer's cursor, as a tree with sizes that expands.
 *
 * The live allocations of one device (device kinds: what its allocated bytes count) are grouped by
 * allocation site first, then each site is placed on a path that depends on the grouping:
 *  - by range:  range path components (outermost first), then the site (kind, API, top frame);
 *  - by stack:  frames outermost first (internal frames left out unless shown), then the site;
 *  - by kind:   memory kind, then the whole range path, then the site;
 *  - by category: what the allocation is for in a PyTorch job (parameter, gradient, optimizer,
 *    activation, temporary, other: formats/replay/gmp_frames.h), then the range path, the site.
 * Under an expanded site, its largest allocations. Every node has its bytes and count (inclusive),
 * and the largest allocation under it (the one the focus pane shows). Expanded nodes are
 * remembered by a hash of their path, so the tree keeps its shape while the cursor moves.
 *
 * Labels of sites (range components, frames as text, which frames are folded) are computed once
 * per site and cached; native frames are named by the offline symbolizer (formats/symbols: DWARF
 * or ELF symbols of the run's modules, "module+0xoffset" when they cannot be read). Frames are
 * folded by the rules every output uses (formats/replay/gmp_frames.h: internal frames always,
 * framework frames when the stack has a frame of the user's code); `i` shows them all. */
#ifndef GMP_TUI_TREE_H
#define GMP_TUI_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_tui_model.h"

/* How the live set is grouped (g cycles through them in this order). */
enum {
    GMP_TUI_BY_RANGE = 0,
    GMP_TUI_BY_FRAME, /* the call stack from the innermost user frame outwards: the roots are the
                         report's "by user frame" rows, their children the callers */
    GMP_TUI_BY_STACK, /* the call stack from the outermost frame inwards */
    GMP_TUI_BY_KIND,
    GMP_TUI_BY_CATEGORY,
    GMP_TUI_BY_COUNT
};

typedef struct gmp_tui_row {
    const char *label;
    uint64_t bytes, count;
    int depth;
    int has_children, expanded;
    int is_alloc;  /* an allocation (a leaf) */
    uint64_t hkey; /* the node's path hash (for toggling) */
    size_t best;   /* index into the live array of the largest allocation under it */
} gmp_tui_row;

/* A site's labels (valid while the tree and its model live). */
typedef struct gmp_tui_site {
    int ready;
    int32_t device;
    uint32_t kind, api, stack, range;
    size_t nranges;
    char **ranges;   /* range path components, outermost first */
    char *range_str; /* joined with "/"; "" none */
    size_t nframes;
    char **frames;           /* innermost first */
    unsigned char *internal; /* per frame */
    char *api_str;
    uint32_t category; /* gmp_category (formats/replay/gmp_frames.h) of its frames and range */
} gmp_tui_site;

typedef struct gmp_tui_tree gmp_tui_tree;

gmp_tui_tree *gmp_tui_tree_new(void);
void gmp_tui_tree_free(gmp_tui_tree *t);
/* Forgets the cached site labels (a new model); expanded nodes are kept. */
void gmp_tui_tree_set_model(gmp_tui_tree *t, const gmp_tui_model *m);

/* Builds the tree of live[0..n) for device dev. */
gmp_err gmp_tui_tree_build(gmp_tui_tree *t, const gmp_tui_live *live, size_t n, int32_t dev, int by,
                           int show_internal);
size_t gmp_tui_tree_nrows(const gmp_tui_tree *t);
const gmp_tui_row *gmp_tui_tree_row(const gmp_tui_tree *t, size_t i);
uint64_t gmp_tui_tree_total(const gmp_tui_tree *t); /* bytes of the device live at the cursor */
uint64_t gmp_tui_tree_count(const gmp_tui_tree *t);
/* Expands a collapsed node or collapses an expanded one. */
void gmp_tui_tree_toggle(gmp_tui_tree *t, const gmp_tui_row *row);
/* Expands every node on the path to the largest allocation of site (by the current grouping) at
 * the next build. */
void gmp_tui_tree_reveal_site(gmp_tui_tree *t, uint32_t site);

/* The labels of a site; NULL when out of memory or no such site. */
const gmp_tui_site *gmp_tui_tree_site(gmp_tui_tree *t, uint32_t site);
/* The labels of a request that failed (an OOM, a failed allocation): made from its device, memory
 * kind, API, range and stack ids as a site's are (the same frames, folded the same way); kept
 * until the next request or model; NULL when out of memory. */
const gmp_tui_site *gmp_tui_tree_request(gmp_tui_tree *t, int32_t device, uint32_t kind,
                                         uint32_t api, uint32_t range, uint32_t stack);
/* 1 when the site's range path or one of its frames contains needle (case-insensitive). */
int gmp_tui_tree_site_matches(gmp_tui_tree *t, uint32_t site, const char *needle);

#endif
