/* nvtx_libs: the functions of the two test libraries that use NVTX (nvtx_lib.c built twice). */
#ifndef NVTX_LIBS_H
#define NVTX_LIBS_H

#include <stddef.h>

int liba_push(const char *name);
int liba_pop(void);
void liba_region_register(void *p, size_t n);
void liba_region_unregister(void *p);
int libb_push(const char *name);
int libb_pop(void);
void libb_region_register(void *p, size_t n);
void libb_region_unregister(void *p);

#endif
