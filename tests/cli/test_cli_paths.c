/* Prints the agent path that gmp_cli_agent_path finds for this executable's location; exit 0 when
 * the agent exists there, 1 when not. Run by the cli_agent_path test from a fake install tree. */
#include <stdio.h>

#include "cli_paths.h"

int main(void)
{
    char buf[4096];
    gmp_err e = gmp_cli_agent_path(buf, sizeof buf);
    if (e == GMP_OK || e == GMP_ERR_IO)
        printf("%s\n", buf);
    else
        fprintf(stderr, "gmp_cli_agent_path: %s\n", gmp_err_str(e));
    return e == GMP_OK ? 0 : 1;
}
