/* gmp_demangle: C++ names (Itanium C++ ABI, "_Z...") shown as their source spells them, for the
 * offline tools (symbolization of native frames, the nsys import's static symbols). A library of
 * its own (gmp_demangle) so that only the tools that demangle link the C++ runtime. */
#ifndef GMP_DEMANGLE_H
#define GMP_DEMANGLE_H

/* The demangled form of a mangled C++ name (malloc'd, the caller frees it), or NULL when name is
 * not one ("_Z" prefix) or the demangler refuses it (then show the name as it is). */
char *gmp_demangle(const char *name);

#endif
