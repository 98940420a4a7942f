/* gmp_alert: `gpumemprof run --alert-threshold BYTES|PERCENT`. Tracks the live device memory of
 * each device inside the process (only when an alert is asked for: it costs a hash-table update per
 * allocation and free) and, the first time a device's allocated memory reaches the threshold,
 * prints one line on stderr with the range paths holding most of it and records an ALERT event.
 * Counts what the replay counts as allocated: device, async-pool, VMM physical, array, static. */
#ifndef GMP_ALERT_H
#define GMP_ALERT_H

#include <stdint.h>

#include "gmp_sink.h"

/* bytes > 0: an absolute threshold; else percent (1-100) of each device's total memory. */
int gmp_alert_init(const gmp_sink *sink, uint64_t bytes, unsigned percent);

/* Non-zero when alerts are on (a cheap check before calling the functions below). */
extern int gmp_alert_on;

/* A successful ALLOC or FREE that was just recorded by thread t. */
void gmp_alert_alloc(gmp_wthread *t, const gmp_rec_mem *m);
void gmp_alert_free(const gmp_rec_mem *m);

#endif
