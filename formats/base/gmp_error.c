#include "gmp_error.h"

const char *gmp_err_name(gmp_err e)
{
    switch (e) {
    case GMP_OK: return "ok";
    case GMP_END: return "end";
    case GMP_ERR_ARG: return "arg";
    case GMP_ERR_NOMEM: return "nomem";
    case GMP_ERR_IO: return "io";
    case GMP_ERR_FORMAT: return "format";
    case GMP_ERR_TRUNCATED: return "truncated";
    case GMP_ERR_VERSION: return "version";
    case GMP_ERR_EXISTS: return "exists";
    case GMP_ERR_UNSUPPORTED: return "unsupported";
    case GMP_ERR_LIMIT: return "limit";
    }
    return "unknown";
}

const char *gmp_err_str(gmp_err e)
{
    switch (e) {
    case GMP_OK: return "success";
    case GMP_END: return "end of input";
    case GMP_ERR_ARG: return "invalid argument";
    case GMP_ERR_NOMEM: return "out of memory";
    case GMP_ERR_IO: return "input/output error";
    case GMP_ERR_FORMAT: return "not a valid gpumemprof trace";
    case GMP_ERR_TRUNCATED: return "input is truncated";
    case GMP_ERR_VERSION: return "trace needs a newer gpumemprof";
    case GMP_ERR_EXISTS: return "file exists";
    case GMP_ERR_UNSUPPORTED: return "not supported";
    case GMP_ERR_LIMIT: return "size limit exceeded";
    }
    return "unknown error";
}
