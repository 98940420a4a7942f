/* gmp_demangle: C++ names demangled by the C++ runtime's demangler (libstdc++'s __cxa_demangle, a C
 * symbol of the Itanium C++ ABI every Linux compiler uses; see docs/dependencies.md), clone
 * suffixes (".cold", ".isra.0") shown as "[clone .cold]". */
#include "gmp_demangle.h"

#include <stddef.h>
#include <stdlib.h>

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *gmp_demangle(const char *name)
{
    if (!name || name[0] != '_' || name[1] != 'Z')
        return NULL;
    int status = -1;
    char *d = __cxa_demangle(name, NULL, NULL, &status);
    if (d && status == 0)
        return d;
    free(d);
    return NULL;
}
