/* bench_symbolize: cost of symbolizing 100,000 distinct addresses (formats/symbols/gmp_symbolize).
 * The addresses are instruction addresses spread over the functions of a big ELF file with DWARF:
 * the first argument, else libc's separate debug file when installed, else this program. Prints
 * the time to read the module's debug information (first lookup), per address (cold), and per
 * address again (cache).
 * Usage: bench_symbolize [ELF] [N] */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gmp_symbolize.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The executable span of the file: [lo, hi) of its .text section, and its build-id. */
static int text_span(const char *path, uint64_t *lo, uint64_t *hi, uint8_t *bid, uint32_t *bidlen)
{
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstr;
    int rc = -1;
    *bidlen = 0;
    if (e && elf_getshdrstrndx(e, &shstr) == 0) {
        for (Elf_Scn *s = elf_nextscn(e, NULL); s; s = elf_nextscn(e, s)) {
            GElf_Shdr sh;
            if (!gelf_getshdr(s, &sh))
                continue;
            const char *n = elf_strptr(e, shstr, sh.sh_name);
            if (n && !strcmp(n, ".text") && sh.sh_size) {
                *lo = sh.sh_addr;
                *hi = sh.sh_addr + sh.sh_size;
                rc = 0;
            }
            if (sh.sh_type == SHT_NOTE) {
                Elf_Data *d = elf_getdata(s, NULL);
                GElf_Nhdr nh;
                size_t off = 0, no, dof;
                while (d && (off = gelf_getnote(d, off, &nh, &no, &dof)) > 0)
                    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_descsz <= 64) {
                        memcpy(bid, (char *)d->d_buf + dof, nh.n_descsz);
                        *bidlen = nh.n_descsz;
                    }
            }
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    char self[4096];
    const char *path = argc > 1 ? argv[1] : NULL;
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 100000;
    if (n < 2)
        n = 2;
    if (!path) {
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0)
            return 1;
        self[k] = 0;
        path = self;
    }
    char abs[4096];
    if (path[0] != '/' && realpath(path, abs))
        path = abs; /* module paths are absolute */
    uint64_t lo = 0, hi = 0;
    uint8_t bid[64];
    uint32_t bl = 0;
    if (text_span(path, &lo, &hi, bid, &bl) < 0 || hi <= lo) {
        fprintf(stderr, "bench_symbolize: %s: no .text\n", path);
        return 1;
    }
    gmp_symbolizer *s;
    if (gmp_symbolizer_new(&s, NULL) != GMP_OK)
        return 1;
    /* the file as a module loaded at 0x10000000 */
    gmp_rec_module m = {1,  {path, (uint32_t)strlen(path)}, 0x10000000, 0x10000000,
                        hi, {(const char *)bid, bl}};
    gmp_symbolizer_add_module(s, &m);
    uint64_t span = hi - lo;
    uint64_t *addrs = malloc(n * sizeof *addrs);
    if (!addrs)
        return 1;
    for (size_t i = 0; i < n; i++) /* distinct, spread evenly over .text */
        addrs[i] = 0x10000000 + lo + 1 + (span > n ? (uint64_t)i * (span / n) : i % span);
    const gmp_sym_frame *f;
    double t0 = now_s();
    gmp_symbolize(s, addrs[0], &f);
    double t1 = now_s();
    size_t named = 0, lined = 0, frames = 0;
    for (size_t i = 1; i < n; i++) {
        size_t k = gmp_symbolize(s, addrs[i], &f);
        frames += k;
        named += f[0].function != NULL;
        lined += f[0].line != 0;
    }
    double t2 = now_s();
    for (size_t i = 0; i < n; i++)
        gmp_symbolize(s, addrs[i], &f);
    double t3 = now_s();
    gmp_sym_stats st;
    gmp_symbolizer_get_stats(s, &st);
    printf("symbolize_module: %s (%.1f MiB of .text, DWARF: %s)\n", path, (double)span / (1 << 20),
           st.dwarf_modules ? "yes" : "no");
    printf("symbolize_load_debug_info: %.1f ms\n", (t1 - t0) * 1e3);
    printf("symbolize_%zu_distinct_addresses: %.1f ms (%.2f us per address; %.0f%% named, %.0f%% "
           "with a line, %.2f frames per address)\n",
           n, (t2 - t1) * 1e3, (t2 - t1) * 1e6 / (double)(n - 1), 100.0 * (double)named / (double)n,
           100.0 * (double)lined / (double)n, (double)frames / (double)(n - 1));
    printf("symbolize_cached_ns_per_address: %.1f ns\n", (t3 - t2) * 1e9 / (double)n);
    free(addrs);
    gmp_symbolizer_free(s);
    return 0;
}
