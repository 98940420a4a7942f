/* sym_dump: the symbolizer (formats/symbols) on one ELF file, for comparison with llvm-symbolizer
 * (tests/stacks/check_llvm_symbolizer.py).
 *
 *   sym_dump FILE [ADDR...]   ADDRs (hex, file virtual addresses) from the arguments, else one per
 *                             line on stdin
 *
 * For each ADDR, the frames gmp_symbolize gives for the return address ADDR+1 (so that the line
 * looked up is ADDR's, as llvm-symbolizer looks up ADDR itself), innermost first, in
 * llvm-symbolizer's LLVM output style: per frame a function line and a "file:line" line ("??" and
 * "??:0" when unknown), then an empty line. The module is FILE mapped at 0 (no build-id check). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_symbolize.h"

static void dump(gmp_symbolizer *s, uint64_t addr)
{
    const gmp_sym_frame *f;
    size_t n = gmp_symbolize(s, addr + 1, &f);
    for (size_t i = 0; i < n; i++) {
        printf("%s\n", f[i].function ? f[i].function : "??");
        printf("%s:%" PRIu32 "\n", f[i].file ? f[i].file : "??", f[i].file ? f[i].line : 0);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sym_dump FILE [ADDR...]\n");
        return 2;
    }
    char *path = realpath(argv[1], NULL); /* the symbolizer reads absolute paths only */
    if (!path) {
        perror(argv[1]);
        return 1;
    }
    gmp_rec_module m = {1, {path, (uint32_t)strlen(path)}, 0, 0, UINT64_MAX / 2, {"", 0}};
    gmp_symbolizer *s;
    if (gmp_symbolizer_new(&s, NULL) != GMP_OK || gmp_symbolizer_add_module(s, &m) != GMP_OK)
        return 1;
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            dump(s, strtoull(argv[i], NULL, 16));
    } else {
        char line[256];
        while (fgets(line, sizeof line, stdin))
            if (line[0] != '\n')
                dump(s, strtoull(line, NULL, 16));
    }
    gmp_symbolizer_free(s);
    free(path);
    return fflush(stdout) == 0 ? 0 : 1;
}
