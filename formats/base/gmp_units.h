/* gmp_units: how gpumemprof writes quantities for people, one way everywhere (summaries, reports,
 * diff, info, alerts): byte counts in powers of 1024 with two decimals ("1.50 GiB", "512 B"). */
#ifndef GMP_UNITS_H
#define GMP_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Writes b into buf (n bytes, 16 are always enough) and returns buf. */
const char *gmp_fmt_bytes(uint64_t b, char *buf, size_t n);

#endif
