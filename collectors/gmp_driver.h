/* gmp_driver: the CUDA driver library the profiled process has loaded. The driver may be loaded
 * privately (RTLD_LOCAL: by libcudart, by Python's ctypes), where dlsym(RTLD_DEFAULT) does not see
 * it; this module finds it among the loaded objects (dl_iterate_phdr) and gives its symbols and its
 * directory. It never loads a driver itself. */
#ifndef GMP_DRIVER_H
#define GMP_DRIVER_H

#include <stddef.h>

/* A symbol of the loaded driver (libcuda.so*), NULL when no driver is loaded or it lacks it. */
void *gmp_driver_sym(const char *name);

/* The directory of the loaded driver into buf ("" when none). Returns 0, -1 when none. */
int gmp_driver_dir(char *buf, size_t n);

/* The path of a loaded object (dl_iterate_phdr) whose file name starts with prefix
 * ("libcupti.so", "libcudart.so"), the first in load order, into path. Returns 1 when one is
 * loaded, 0 when none. */
int gmp_loaded_object(const char *prefix, char *path, size_t n);

#endif
