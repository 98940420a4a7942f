/* cli_heap: how the gpumemprof program's own heap is set up before a command reads a recording
 * (see cli_heap.c). */
#ifndef GMP_CLI_HEAP_H
#define GMP_CLI_HEAP_H

/* Once, at the start of a command that reads recordings; never fails (does what the C library and
 * the kernel allow, else nothing). */
void gmp_cli_heap_setup(void);

#endif
