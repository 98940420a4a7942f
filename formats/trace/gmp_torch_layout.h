/* gmp_torch_layout: how a PyTorch memory snapshot is laid out in a gpumemprof trace, shared by the
 * importer that writes it (formats/import/gmp_import_torch.c) and the PyTorch snapshot export that
 * reads it back (formats/export/gmp_out_pytorch.c). docs/import.md describes the whole mapping. */
#ifndef GMP_TORCH_LAYOUT_H
#define GMP_TORCH_LAYOUT_H

#include <stdint.h>

#define GMP_TORCH_MAX_DEVICES 1024 /* device ordinals accepted: 0 .. this - 1 */
/* The pool handle that holds the mapped memory of device d's expandable segments. */
#define GMP_TORCH_EXPANDABLE_POOL(d) (0xe000000000000000ull | (uint64_t)(d))

#endif
