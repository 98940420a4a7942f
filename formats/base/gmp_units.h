/* gmp_units: how gpumemprof writes quantities for people, one way everywhere (summaries, reports,
 * diff, view, info, alerts): byte counts in powers of 1024 with two decimals ("1.50 GiB", "512 B"),
 * times of a trace relative to its zero with microseconds ("+17.042860 s"), durations with three
 * decimals in the unit that fits ("134.771 us", "1.234 ms"). */
#ifndef GMP_UNITS_H
#define GMP_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Writes b into buf (n bytes, 16 are always enough) and returns buf. */
const char *gmp_fmt_bytes(uint64_t b, char *buf, size_t n);

/* Writes ns (trace clock) relative to t0 into buf (n bytes, 32 are always enough):
 * "+1.234567 s", "-0.000100 s" before t0; returns buf. */
const char *gmp_fmt_reltime(uint64_t ns, uint64_t t0, char *buf, size_t n);

/* Writes a duration of ns nanoseconds into buf (n bytes, 32 are always enough): "850 ns",
 * "134.771 us", "1.234 ms", "2.500 s"; returns buf. */
const char *gmp_fmt_duration(uint64_t ns, char *buf, size_t n);

#endif
