/* gmp_error: the error codes every gpumemprof module returns, and their names.
 * Functions return a gmp_err; GMP_OK is 0. Modules that can say more keep a message of their own
 * (for example gmp_reader_error()). */
#ifndef GMP_ERROR_H
#define GMP_ERROR_H

typedef enum gmp_err {
    GMP_OK = 0,
    GMP_END = 1,              /* not an error: no more records */
    GMP_ERR_ARG = -1,         /* bad argument from the caller */
    GMP_ERR_NOMEM = -2,       /* out of memory, or a configured memory bound reached */
    GMP_ERR_IO = -3,          /* read/write/open failed (errno kept by the caller) */
    GMP_ERR_FORMAT = -4,      /* input is not a valid trace (corrupt, bad reference) */
    GMP_ERR_TRUNCATED = -5,   /* input ends before a frame or record is complete */
    GMP_ERR_VERSION = -6,     /* trace needs a newer reader */
    GMP_ERR_EXISTS = -7,      /* output exists and overwriting was not asked for */
    GMP_ERR_UNSUPPORTED = -8, /* feature not available here */
    GMP_ERR_LIMIT = -9,       /* a size limit of the format or of this reader was exceeded */
} gmp_err;

/* Short stable name of an error code, e.g. "format". Never NULL. */
const char *gmp_err_name(gmp_err e);
/* One-line description of an error code. Never NULL. */
const char *gmp_err_str(gmp_err e);

#endif
