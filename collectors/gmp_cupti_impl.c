/* gmp_cupti_impl: the state the files of the CUPTI collector share (declared in
 * gmp_cupti_impl.h), set by gmp_cupti_start. */
#include "gmp_cupti_impl.h"

gmp_cupti_fns gmp_cupti_lib;
const gmp_sink *gmp_cupti_sink;
int gmp_cupti_memory2_on;
