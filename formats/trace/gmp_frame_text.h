/* gmp_frame_text: the one-line name of a stack frame, one way for every reader of a trace (the
 * report in every format, diff, view): "function (file:line)". Python frames keep the file as
 * recorded; native frames, symbolized, show the source file's base name. The callers handle frames
 * without a function (native frames not symbolized: "libfoo.so+0x1a2b", or "0x401000"). */
#ifndef GMP_FRAME_TEXT_H
#define GMP_FRAME_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_trace.h"

/* A frame with a function name. python: a Python frame (or a frame of a PyTorch snapshot, which
 * records native frames that way: no line, no file or "??", shown as the function alone); else a
 * symbolized native frame. Writes at most n bytes with the NUL (raw bytes: escape them where the
 * output needs it); returns the length written. */
size_t gmp_frame_text(int python, gmp_str function, gmp_str file, uint32_t line, char *buf,
                      size_t n);

#endif
