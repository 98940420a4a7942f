/* gmp_frames: which frames of a call stack are the user's code, and which are folded away as
 * internal (docs/stacks.md, "Frames from user code"). Every output that shows a stack (the report
 * in every format, speedscope, pprof, the HTML view) asks here, so that a stack looks the same in
 * all of them and one option (`--all-frames`) shows everything. A one-line output builds a stack's
 * line from gmp_frame_text (each frame's name), gmp_frames_fold, gmp_frames_apart (two rows that
 * look alike) and gmp_frames_line.
 *
 * The rules are data: a table of patterns per runtime (gmp_frame_rule_at lists them, in the order
 * they are tried; the first that matches decides). A frame is
 *   INTERNAL   the recorder (gpumemprof's agent, PyTorch's CapturedTraceback), the allocators
 *              (PyTorch's caching allocator, cudart, libcuda, CUPTI), the Python interpreter's C
 *              frames (its C API, libffi and ctypes), pybind11's call machinery, libc, the C++
 *              runtime and the dynamic loader: always folded;
 *   FRAMEWORK  a framework's or library's own code (ATen/c10 dispatch and kernels, every other
 *              torch:: namespace, torch's Python modules and the code torch.compile generates,
 *              CUDA's libraries, installed Python packages and the standard library, Windows
 *              paths included): folded when the stack has a USER frame (the user's call explains
 *              it), shown otherwise;
 *   USER       everything else (no rule matched), and what a rule names as user code (autograd's
 *              nodes: on autograd's thread, where PyTorch records no Python frame, the node is
 *              what the user's code asked for): always shown.
 * A frame with no function, file nor module (a native address inside no loaded module: a
 * frame-pointer walk reads data words as return addresses, JIT code) is INTERNAL, with no rule.
 * A stack whose frames are all folded keeps them all (a stack is never shown empty).
 *
 * A stack shown on one line (gmp_frames_line) opens at its first frame shown, the frames folded
 * inside it counted ("[+25 inside]"); two stacks that look alike once folded are told apart by the
 * folded frame that differs nearest that opening frame (gmp_frames_apart), never by unfolding.
 * C++ names are shortened there (gmp_frame_short_name); outputs that show a whole frame (JSON,
 * pprof) keep the full name.
 *
 * Patterns are globs where `*` matches any run of bytes (nothing else is special), matched against
 * one field of the frame: the function's qualified name without its return type, template
 * arguments after the name and parameters ("at::detail::empty_cuda" for "at::TensorBase
 * at::detail::empty_cuda(c10::ArrayRef<long>, ...)"), the source file as recorded, or the file name
 * of a native frame's module ("libcudart.so.12"). A rule may name a function and a file; both must
 * match. Nothing here allocates but the memo (gmp_frame_memo). */
#ifndef GMP_FRAMES_H
#define GMP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_trace.h"

typedef enum gmp_frame_class {
    GMP_FRAME_USER = 0,
    GMP_FRAME_FRAMEWORK = 1,
    GMP_FRAME_INTERNAL = 2,
} gmp_frame_class;

typedef struct gmp_frame_rule {
    const char *runtime;  /* "gpumemprof", "pytorch", "cuda", "python", "libc", "c++" */
    gmp_frame_class cls;  /* FRAMEWORK or INTERNAL; USER for what is user code by name */
    const char *function; /* glob on the function's qualified name, NULL: any */
    const char *file;     /* glob on the source file (as recorded), NULL: any, "": unknown (empty
                             or "??") */
    const char *module;   /* glob on the module's file name (native frames), NULL: any */
    const char *what;     /* what the rule folds, for the docs */
} gmp_frame_rule;

/* The rules, in the order they are tried. */
size_t gmp_frame_rule_count(void);
const gmp_frame_rule *gmp_frame_rule_at(size_t i);

/* A frame as any output knows it: raw bytes, empty when unknown. module: the module's path (or
 * file name). */
typedef struct gmp_frame_info {
    gmp_str function, file, module;
} gmp_frame_info;

/* The class of one frame, and (rule != NULL) the rule that decided it (NULL: no rule decided). */
gmp_frame_class gmp_frame_classify(const gmp_frame_info *f, const gmp_frame_rule **rule);

/* Folding a stack of n frames (innermost first) whose classes are cls[]: hide[i] = 1 for the
 * frames folded away (see above). Returns the number of frames hidden. */
size_t gmp_frames_fold(const uint8_t *cls, size_t n, uint8_t *hide);

/* A stack as one line: names[i] is frame i's one-line name (innermost first; gmp_frame_short_name
 * for a C++ function), hide[i] 0 shown, 1 folded (gmp_frames_fold), 2 folded but shown to tell the
 * stack apart (gmp_frames_apart). The line opens at the first frame shown, with the frames folded
 * inside it and those of them shown to tell it apart ("DivBackward0::apply [+22 inside, via
 * at::_ops::neg::call]"), then frames and runs of folded ones ("+8 internal frames") joined by
 * " < ", at most max_items of them (0: all) then " < ...". Writes a NUL-terminated line into buf
 * (cut at cap - 1 bytes) and returns its length. Every one-line output (the report's text,
 * Markdown and HTML rows, diff) shows a stack this way. */
size_t gmp_frames_line(const gmp_str *names, const uint8_t *hide, size_t n, size_t max_items,
                       char *buf, size_t cap);

/* Two stacks a and b (names and hide as gmp_frames_line takes them) that look alike on one line
 * (the same frames shown, the same runs folded) are told apart: the folded frame whose name
 * differs nearest the opening frame (inside it first, from the opening frame inwards: what the
 * user's frame called; then the later runs in the order shown) is marked 2 in both ha and hb.
 * Returns 1 when a frame was marked, 0 when they do not look alike or no name differs. */
int gmp_frames_apart(const gmp_str *a, uint8_t *ha, size_t na, const gmp_str *b, uint8_t *hb,
                     size_t nb);

/* A frame's one-line name, as every one-line output names it (the report's rows, diff): a Python
 * frame "function (file:line)" (the file as recorded), a native frame "function (base.c:42)" (the
 * file's base name; "function" without a line), a C++ function shortened (gmp_frame_short_name);
 * a native frame of a PyTorch snapshot (python, no line) "function" or "function (file)" when the
 * file is known (not "??"); a native frame without a function "module+0xoffset" (the module's
 * base name), without a module "?". Into buf, NUL-terminated, cut at cap - 1; returns the length.
 */
size_t gmp_frame_text(const gmp_frame_info *f, int python, uint32_t line, uint64_t offset,
                      char *buf, size_t cap);

/* A function's name as one line shows it, into buf (NUL-terminated, cut at cap - 1 bytes;
 * returns its length): a C++ name without its return type, its template arguments and parameter
 * lists (those of the function, of an enclosing function, of a lambda) and a " [clone ...]"
 * suffix: "pybind11::cpp_function::initialize<F, R>(F&&)::{lambda(function_call&)#3}::_FUN(
 * function_call&)" -> "pybind11::cpp_function::initialize::{lambda#3}::_FUN", "at::TensorBase
 * at::detail::_empty_generic<long>(c10::ArrayRef<long>)" -> "at::detail::_empty_generic";
 * "(anonymous namespace)" and operator names are kept. A name with no ':' and no '(' (C, Python:
 * "<module>", "f.<locals>.g") is kept as it is. */
size_t gmp_frame_short_name(gmp_str name, char *buf, size_t cap);

/* What an allocation is for, in a PyTorch job (docs/report.md, "Memory by category"), from what the
 * recording has: the frames of its stack and its range path. */
typedef enum gmp_category {
    GMP_CAT_OTHER = 0,  /* nothing says (no stack, or no rule matched) */
    GMP_CAT_PARAMETER,  /* made while moving or building a model: Module.to/cuda/_apply, __init__,
                           reset_parameters, load_state_dict, from_pretrained */
    GMP_CAT_GRADIENT,   /* the autograd engine accumulating a leaf's gradient (AccumulateGrad) */
    GMP_CAT_OPTIMIZER,  /* an optimizer's step: a frame in torch/optim or in a file or range named
                         *optim* (its state, created on the first step, and its temporaries) */
    GMP_CAT_ACTIVATION, /* made in a forward: a Python frame `forward`, or a range *forward* */
    GMP_CAT_TEMPORARY,  /* made by the backward pass other than AccumulateGrad (gradients of
                           activations, freed as it goes): autograd nodes, the engine, a range
                           *backward* */
    GMP_CAT_COUNT
} gmp_category;

/* "parameter", "gradient", "optimizer", "activation", "temporary", "other". */
const char *gmp_category_name(gmp_category c);
/* The category of an allocation with these frames (innermost first) and range path (may be
 * empty). The first of these that matches decides: gradient, optimizer, temporary (backward),
 * activation, parameter, else other. */
gmp_category gmp_frames_category(const gmp_frame_info *f, size_t n, gmp_str range);

/* A memo of what the rules say of each distinct frame (by content: function, file, module), for
 * callers that classify many stacks sharing frames: a frame is matched against the patterns
 * once. It holds at most 32 MiB of keys, then starts afresh. NULL (out of memory) is accepted
 * below and computes every time. */
typedef struct gmp_frame_memo gmp_frame_memo;
gmp_frame_memo *gmp_frame_memo_new(void);
void gmp_frame_memo_free(gmp_frame_memo *m);
/* What the rules say of one frame, through the memo m (NULL: worked out without one), for callers
 * that keep it per frame or per stack: its class and the facts the categories test, as opaque bits.
 * A stack's facts are the OR of its frames': gmp_frames_category_of(OR of gmp_frame_facts_memo(m,
 * &f[i]), range) == gmp_frames_category(f, n, range), and
 * gmp_frame_facts_class(gmp_frame_facts_memo(m, f)) == gmp_frame_classify(f, NULL). */
unsigned gmp_frame_facts_memo(gmp_frame_memo *m, const gmp_frame_info *f);
gmp_frame_class gmp_frame_facts_class(unsigned facts);
gmp_category gmp_frames_category_of(unsigned facts, gmp_str range);
/* The category of an allocation of a replay with this stack and range path (ids of the trace),
 * during the pass: Python frames by name and file, native frames by their module only (they are
 * symbolized later), the first 128 frames. Python frames are kept per pair of string ids, native
 * frames go through the replay's memo (gmp_replay_frame_memo), and the replay keeps what the frames
 * from each stack node outwards say (4 bytes per stack definition), so a new stack costs its new
 * nodes; the category of a (stack, range) is not kept: callers keep what they need. */
struct gmp_replay;
gmp_category gmp_replay_category(struct gmp_replay *rp, uint32_t stack, uint32_t range);
/* What the rules say of the frame at one stack node of the replay's trace (gmp_frame_facts_memo),
 * as gmp_replay_category sees it: a Python frame by its function and file (as a report shows
 * it), a native frame by its module only. Kept per node. */
unsigned gmp_replay_frame_facts(struct gmp_replay *rp, uint32_t stack);
/* The replay's memo of frame facts (NULL when it could not be made), for its outputs. */
gmp_frame_memo *gmp_replay_frame_memo(const struct gmp_replay *rp);

/* The glob used by the rules: `*` matches any run of bytes. */
int gmp_frame_glob(const char *pat, const char *s, size_t n);

/* The part of a function name the rules match: the qualified name without return type,
 * parameters and the template arguments that follow it; "(anonymous namespace)" is kept. Returns
 * a slice of name. */
gmp_str gmp_frame_function_head(gmp_str name);

#endif
