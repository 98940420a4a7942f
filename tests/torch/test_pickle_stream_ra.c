/* test_pickle_stream_ra: the streaming pickle reader (formats/import/gmp_pickle_stream.c) reading
 * files whole through its read-ahead thread, in pieces of 4 KiB, with its first pass on that
 * thread and the parse overlapping it: the tests of test_pickle_stream_window.c (a file gives the
 * items, or the error, that the same bytes in memory give: whole, cut, changed), plus memory
 * limits and a consumer that stops the parse (test_overlap there). */
#define GMP_PKSTREAM_RA_TEST 1
#define GMP_PKSTREAM_RA_CHUNK 4099u
#define GMP_PKSTREAM_RA_SYNC 4096u
static int g_ra_off; /* 1: the file through the window, as without read-ahead */
#define GMP_PKSTREAM_RA_OFF g_ra_off
#include "test_pickle_stream_window.c"
