/* gmp_cupti_load: which CUPTI the collector loads (gmp_cupti_impl.h): never a second one in the
 * process. */
#include "gmp_cupti_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmp_driver.h"

#define CUPTI_SONAME "libcupti.so.13"

static void *try_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return h;
}

/* The major version of a loaded CUDA runtime, from its file name (libcudart.so.12 or the real
 * file libcudart.so.12.4.127); 0 when unknown. */
static int runtime_major(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *v = base + strlen("libcudart.so");
    if (v[0] == '.' && v[1] >= '0' && v[1] <= '9')
        return atoi(v + 1);
    char real[4096];
    if (realpath(path, real)) {
        base = strrchr(real, '/');
        base = base ? base + 1 : real;
        if (!strncmp(base, "libcudart.so.", 13) && base[13] >= '0' && base[13] <= '9')
            return atoi(base + 13);
    }
    return 0;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The CUPTI of the process: first the one it names, then one it already loaded, then
 * one matching its CUDA runtime beside that runtime, then a toolkit's. Never a second CUPTI: a
 * loaded one is reused (RTLD_NOLOAD), and the runtime's neighbour is the file the program's own
 * profiler (torch.profiler, a wheel's kineto) would load. gpumemprof info (cli/cmd_info.c) follows
 * the same order. */
void *gmp_cupti_load(const char *explicit_path, const gmp_sink *sink, char *why, size_t whylen)
{
    char path[4096], loaded[4096];
    int have_loaded = gmp_loaded_object("libcupti.so", loaded, sizeof loaded);
    /* 0. an explicit path (--cupti, GPUMEMPROF_CUPTI) */
    if (explicit_path && *explicit_path) {
        void *h = try_open(explicit_path);
        if (!h) {
            snprintf(why, whylen, "cannot profile: cannot load CUPTI from %s: %s", explicit_path,
                     dlerror());
            return NULL;
        }
        char now[4096];
        if (have_loaded && gmp_loaded_object("libcupti.so", now, sizeof now) &&
            strcmp(now, loaded) == 0 && strcmp(loaded, explicit_path) != 0 && sink && sink->log) {
            char a[4096], b[4096];
            if (!realpath(loaded, a) || !realpath(explicit_path, b) || strcmp(a, b) != 0)
                sink->log("the program had loaded CUPTI %s; --cupti %s is a second CUPTI in the "
                          "process",
                          loaded, explicit_path);
        }
        return h;
    }
    /* 1. the CUPTI the process already loaded (its own profiler, a wheel's kineto): reused */
    if (have_loaded) {
        void *h = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return h;
    }
    /* 2. beside the loaded CUDA runtime, of its major version: the runtime's directory (a
     * toolkit's lib64, torch/lib of wheels that bundle it), the pip wheels' layout
     * (site-packages/nvidia/cuda_runtime/lib -> nvidia/cuda_cupti/lib, torch/lib) and a toolkit's
     * extras/CUPTI/lib64 */
    char rt[4096];
    int major = 0;
    if (gmp_loaded_object("libcudart.so", rt, sizeof rt) && (major = runtime_major(rt)) > 0) {
        char *slash = strrchr(rt, '/');
        if (slash) {
            *slash = 0;
            size_t n = strlen(rt);
            char cand[4][4200];
            size_t nc = 0;
            snprintf(cand[nc++], sizeof cand[0], "%s/libcupti.so.%d", rt, major);
            if (ends_with(rt, n, "/nvidia/cuda_runtime/lib")) {
                size_t root = n - strlen("/cuda_runtime/lib"); /* .../nvidia */
                snprintf(cand[nc++], sizeof cand[0], "%.*s/cuda_cupti/lib/libcupti.so.%d",
                         (int)root, rt, major);
                root -= strlen("/nvidia"); /* site-packages */
                snprintf(cand[nc++], sizeof cand[0], "%.*s/torch/lib/libcupti.so.%d", (int)root, rt,
                         major);
            }
            if (ends_with(rt, n, "/lib64"))
                snprintf(cand[nc++], sizeof cand[0], "%.*s/extras/CUPTI/lib64/libcupti.so.%d",
                         (int)(n - 6), rt, major);
            for (size_t i = 0; i < nc; i++) {
                void *h = try_open(cand[i]);
                if (h)
                    return h;
            }
        }
    }
    /* 3. a toolkit's: next to the driver, CUDA_HOME/CUDA_PATH, the library path, the usual
     * places; of the runtime's major first when one is loaded. A program that loads no runtime
     * (numba drives the driver API alone) gets a CUPTI of the driver's major first when the
     * driver is older than the agent's major: a CUPTI needs a driver of its major or later
     * (gmp_cupti_driver_hint), so the agent's own (13) cannot work with a 12.x driver. */
    int dmajor = 0;
    if (major <= 0) {
        int (*get)(int *) = (int (*)(int *))gmp_driver_sym("cuDriverGetVersion");
        int drv = 0;
        if (get && get(&drv) == 0 && drv > 0 && drv / 1000 < CUPTI_API_VERSION / 10000)
            dmajor = drv / 1000;
    }
    int majors[3] = {major > 0 && major != CUPTI_API_VERSION / 10000 ? major : 0, dmajor,
                     CUPTI_API_VERSION / 10000};
    for (int mi = 0; mi < 3; mi++) {
        if (!majors[mi])
            continue;
        char soname[32];
        snprintf(soname, sizeof soname, "libcupti.so.%d", majors[mi]);
        char dir[4000];
        if (gmp_driver_dir(dir, sizeof dir) == 0) {
            snprintf(path, sizeof path, "%.4000s/%s", dir, soname);
            void *h = try_open(path);
            if (h)
                return h;
        }
        const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
        for (size_t i = 0; i < 2; i++) {
            if (!homes[i] || !*homes[i])
                continue;
            const char *subs[] = {"lib64", "extras/CUPTI/lib64", "lib"};
            for (size_t j = 0; j < 3; j++) {
                snprintf(path, sizeof path, "%.3000s/%s/%s", homes[i], subs[j], soname);
                void *h = try_open(path);
                if (h)
                    return h;
            }
        }
        const char *places[] = {"", "/usr/local/cuda/lib64/", "/usr/local/cuda/extras/CUPTI/lib64/",
                                "/usr/lib/x86_64-linux-gnu/"};
        for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
            snprintf(path, sizeof path, "%s%s", places[i], soname);
            void *h = try_open(path);
            if (h)
                return h;
        }
    }
    void *h = try_open("libcupti.so");
    if (h)
        return h;
    if (major > 0 && major != CUPTI_API_VERSION / 10000)
        snprintf(why, whylen,
                 "cannot profile: libcupti.so.%d (for the program's CUDA %d runtime %s) not "
                 "found beside the runtime, in a wheel's nvidia/cuda_cupti/lib or torch/lib, next "
                 "to libcuda, in CUDA_HOME, on the library path or in /usr/local/cuda; use "
                 "--cupti PATH",
                 major, major, rt);
    else
        snprintf(why, whylen,
                 "cannot profile: %s not found (looked beside the CUDA runtime, next to libcuda, "
                 "in CUDA_HOME, on the library path and in /usr/local/cuda; use --cupti PATH)",
                 CUPTI_SONAME);
    return NULL;
}

/* The CUDA major version of a CUPTI API version (cupti_version.h: 19 is CUDA 12.0's, 20 to 28 are
 * 12.2 to 12.9 Update 1's, 13 to 18 are 11.x's; from CUDA 13.0 on major * 10000 + minor * 100 +
 * update); 0 when older or unknown. */
unsigned gmp_cupti_major(uint32_t ver)
{
    if (ver >= 10000)
        return ver / 10000;
    if (ver >= 19)
        return 12;
    if (ver >= 13)
        return 11;
    return 0;
}

/* CUDA's compatibility rules: a toolkit's components run on a driver of their major release or a
 * later one (docs.nvidia.com/deploy/cuda-compatibility, "Minor Version Compatibility": CUDA 13.x
 * needs a driver >= 580, which is CUDA 13.0's; 12.x needs >= 525), and CUPTI is one of them: the
 * real CUPTI 13.0 answers cuptiSubscribe with CUPTI_ERROR_UNKNOWN on a 12.8 driver. When the CUPTI
 * loaded (API version ver) is of a later major than the driver's (cuDriverGetVersion, asked only
 * here, outside any callback), fills out with what to do instead and returns 1. */
int gmp_cupti_driver_hint(uint32_t ver, char *out, size_t n)
{
    int (*get)(int *) = (int (*)(int *))gmp_driver_sym("cuDriverGetVersion");
    int drv = 0;
    unsigned major = gmp_cupti_major(ver);
    if (!get || get(&drv) != 0 || drv <= 0 || !major || major <= (unsigned)drv / 1000)
        return 0;
    char path[4096] = "";
    Dl_info di;
    void *sym = gmp_cupti_lib.lib ? dlsym(gmp_cupti_lib.lib, "cuptiGetVersion") : NULL;
    if (sym && dladdr(sym, &di) && di.dli_fname)
        snprintf(path, sizeof path, "%s", di.dli_fname);
    int dm = drv / 1000;
    snprintf(out, n,
             "the CUPTI loaded (%.1000s, CUDA %u, API version %u) is newer than the CUDA driver "
             "(CUDA %d.%d), and a CUPTI needs a driver of its CUDA major version or later: give a "
             "CUDA %d CUPTI with --cupti PATH (a CUDA %d toolkit's libcupti.so.%d, or a Python "
             "environment's site-packages/nvidia/%s/libcupti.so.%d), or update the driver",
             path[0] ? path : "?", major, (unsigned)ver, dm, drv % 1000 / 10, dm, dm, dm,
             dm >= 13 ? "cu13/lib" : "cuda_cupti/lib", dm);
    return 1;
}
