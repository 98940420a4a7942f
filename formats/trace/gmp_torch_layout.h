/* gmp_torch_layout: how a PyTorch memory snapshot is laid out in a gpumemprof trace, shared by the
 * importer that writes it (formats/import/gmp_import_torch.c) and the PyTorch snapshot export that
 * reads it back (formats/export/gmp_out_pytorch.c). docs/import.md describes the whole mapping. */
#ifndef GMP_TORCH_LAYOUT_H
#define GMP_TORCH_LAYOUT_H

#include <stdint.h>

#define GMP_TORCH_MAX_DEVICES 1024 /* device ordinals accepted: 0 .. this - 1 */
/* The pool handle that holds the mapped memory of device d's expandable segments. */
#define GMP_TORCH_EXPANDABLE_POOL(d) (0xe000000000000000ull | (uint64_t)(d))
/* The domains of the ranges an import makes, by where each came from: a record_function
 * annotation (external_annotations), an entry's user_metadata (a range path set by
 * torch.cuda.memory._set_memory_metadata), an entry's compile_context (a torch.compile region). */
#define GMP_TORCH_DOMAIN_ANNOTATION "pytorch.record_function"
#define GMP_TORCH_DOMAIN_METADATA "pytorch.user_metadata"
#define GMP_TORCH_DOMAIN_COMPILE "pytorch.compile_context"

#endif
