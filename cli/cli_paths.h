/* cli_paths: where the gpumemprof CLI finds its companion files.
 *
 * The agent library is found relative to the running executable, never through the build tree:
 * the executable lives in PREFIX/bin and the agent in PREFIX/lib/gpumemprof, both when installed
 * (`cmake --install`) and in the build tree (the top-level CMakeLists.txt places the CLI in
 * build/bin and the agent in build/lib/gpumemprof). GMP_AGENT_RELPATH, a compile definition
 * derived in cli/CMakeLists.txt from the top-level layout variables, is that relative path. The
 * environment variable GPUMEMPROF_AGENT, when set and non-empty, overrides the search. */
#ifndef GMP_CLI_PATHS_H
#define GMP_CLI_PATHS_H

#include <stddef.h>

#include "gmp_error.h"

#define GMP_AGENT_ENV "GPUMEMPROF_AGENT"

/* Directory of the running executable (from /proc/self/exe), without a trailing slash.
 * GMP_ERR_IO when it cannot be read, GMP_ERR_LIMIT when n is too small. */
gmp_err gmp_cli_self_dir(char *buf, size_t n);

/* Absolute path of libgpumemprof_agent.so into buf. GMP_OK when the file exists and is readable;
 * GMP_ERR_IO when it does not (buf then holds the path that was tried, for the message);
 * GMP_ERR_LIMIT when n is too small; GMP_ERR_ARG when buf is NULL or n is 0. */
gmp_err gmp_cli_agent_path(char *buf, size_t n);

#endif
