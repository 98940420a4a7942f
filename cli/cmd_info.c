/* gpumemprof info: what this machine offers for profiling and whether `gpumemprof run` can work.
 *
 * Everything is found at run time with dlopen, never linked (the CLI builds and runs without CUDA):
 * the driver (libcuda.so.1: version, then cuInit and its devices with their memory), the CUDA
 * runtime (libcudart.so.13), CUPTI (the version the agent was built against, passed by CMake as
 * GMP_CUPTI_API_VERSION, and libcupti.so.13 found with the agent's own search order), NVML
 * (libnvidia-ml.so.1) and the agent library (loaded with RTLD_LAZY: it has no constructors, and
 * nothing runs until the driver calls InitializeInjection). Profiling can work when the driver
 * initializes with at least one device, CUPTI loads with the agent's major version and the agent
 * loads and exports its entry points; otherwise the output says why and the exit status is 1.
 * Before cuInit the CLI removes CUDA_INJECTION64_PATH from its own environment, so that no tool is
 * injected into this process. With files, `info FILE...` says what each recording is instead
 * (cmd_info_file.c). See docs/info.md. */
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cmd_info_file.h"
#include "gmp_units.h"
#include "cli_opts.h"
#include "cli_paths.h"
#include "gmp_escape.h"

#ifndef GMP_VERSION_STRING
#define GMP_VERSION_STRING "unknown"
#endif
#ifndef GMP_CUPTI_API_VERSION
#define GMP_CUPTI_API_VERSION 0 /* built without the CUDA toolkit */
#endif

#define MAX_DEVICES 64
#define MAX_REASONS 8

/* CUDA driver API, declared here with plain C types (CUresult and CUdevice are int). */
typedef int (*cu_int_fn)(int *);
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_dev_name_fn)(char *, int, int);
typedef int (*cu_dev_mem_fn)(size_t *, int);
typedef int (*cu_dev_attr_fn)(int *, int, int);
typedef int (*cu_err_fn)(int, const char **);
typedef int (*cupti_ver_fn)(uint32_t *);
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_ver_fn)(char *, unsigned);
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76

typedef struct device {
    int ordinal;
    char name[256];
    uint64_t total;
    int cc_major, cc_minor;
} device;

typedef struct lib {
    int found;
    char path[4096];
    char error[512];
} lib;

typedef struct info {
    lib driver;
    int driver_version; /* cuDriverGetVersion, 0 unknown */
    int init_result;    /* cuInit; -1 not called */
    char init_error[128];
    int ndev;
    device dev[MAX_DEVICES];
    lib runtime;
    int runtime_version;
    lib cupti;
    char cupti_why[128]; /* why this CUPTI: the rule of the agent's order that found it */
    uint32_t cupti_version;
    int cupti_compatible;
    int cupti_driver_mismatch; /* newer than the driver: cannot work with it */
    lib nvml;
    char nvml_driver[96];
    lib agent;
    int agent_entry; /* InitializeInjection exported */
    char injection_env[4096];
    int possible;
    char reasons[MAX_REASONS][1024];
    int nreasons;
} info;

/* The CUPTI versions the agent takes (collectors/gmp_cupti.c, docs/collectors.md): its callbacks
 * from any; activity records from CUPTI 12.2 (API version 20) to 12.9 (28) and of the major it was
 * built against (13: 130000..139999), whose MEMORY2 and MEMORY_POOL records share the fields the
 * agent reads. Before CUDA 13 the API version counted 1, 2, ...; from 13 on it is
 * major * 10000 + minor * 100 + update (cupti_version.h). */
static int gmp_cupti_version_ok(uint32_t v)
{
    if (GMP_CUPTI_API_VERSION < 10000)
        return 0;
    return (v >= 20 && v < 10000) || v / 10000 == (uint32_t)GMP_CUPTI_API_VERSION / 10000;
}

static void reason(info *I, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason(info *I, const char *fmt, ...)
{
    if (I->nreasons >= MAX_REASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(I->reasons[I->nreasons++], sizeof I->reasons[0], fmt, ap);
    va_end(ap);
}

/* Path of the loaded object that defines sym in handle h. */
static void lib_path(void *h, const char *sym, char *out, size_t n, const char *fallback)
{
    void *p = h ? dlsym(h, sym) : NULL;
    Dl_info di;
    char real[PATH_MAX];
    if (p && dladdr(p, &di) && di.dli_fname && di.dli_fname[0])
        snprintf(out, n, "%s", realpath(di.dli_fname, real) ? real : di.dli_fname);
    else
        snprintf(out, n, "%s", fallback);
}

static void *try_open(lib *L, const char *name, int flags)
{
    void *h = dlopen(name, flags | RTLD_LOCAL);
    if (!h && !L->error[0]) {
        const char *e = dlerror();
        snprintf(L->error, sizeof L->error, "%.500s", e ? e : name);
    }
    return h;
}

static const char *cu_error(void *h, int rc, char *buf, size_t n)
{
    cu_err_fn name = (cu_err_fn)dlsym(h, "cuGetErrorName");
    const char *s = NULL;
    if (name && name(rc, &s) == 0 && s)
        snprintf(buf, n, "%s (%d)", s, rc);
    else
        snprintf(buf, n, "error %d", rc);
    return buf;
}

static void *probe_driver(info *I)
{
    void *h = try_open(&I->driver, "libcuda.so.1", RTLD_NOW);
    I->init_result = -1;
    if (!h)
        return NULL;
    I->driver.found = 1;
    lib_path(h, "cuInit", I->driver.path, sizeof I->driver.path, "libcuda.so.1");
    cu_int_fn ver = (cu_int_fn)dlsym(h, "cuDriverGetVersion");
    if (ver && ver(&I->driver_version) != 0)
        I->driver_version = 0;
    cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
    if (!init) {
        snprintf(I->init_error, sizeof I->init_error, "cuInit not exported");
        return h;
    }
    /* no tool injected into this process */
    unsetenv("CUDA_INJECTION64_PATH");
    I->init_result = init(0);
    if (I->init_result != 0) {
        cu_error(h, I->init_result, I->init_error, sizeof I->init_error);
        return h;
    }
    cu_int_fn count = (cu_int_fn)dlsym(h, "cuDeviceGetCount");
    cu_dev_get_fn get = (cu_dev_get_fn)dlsym(h, "cuDeviceGet");
    cu_dev_name_fn name = (cu_dev_name_fn)dlsym(h, "cuDeviceGetName");
    cu_dev_mem_fn mem = (cu_dev_mem_fn)dlsym(h, "cuDeviceTotalMem_v2");
    if (!mem)
        mem = (cu_dev_mem_fn)dlsym(h, "cuDeviceTotalMem");
    cu_dev_attr_fn attr = (cu_dev_attr_fn)dlsym(h, "cuDeviceGetAttribute");
    int n = 0;
    if (!count || count(&n) != 0 || n < 0)
        n = 0;
    for (int i = 0; i < n && I->ndev < MAX_DEVICES; i++) {
        int d = i;
        if (get && get(&d, i) != 0)
            continue;
        device *o = &I->dev[I->ndev++];
        o->ordinal = i;
        if (!name || name(o->name, (int)sizeof o->name, d) != 0)
            snprintf(o->name, sizeof o->name, "(unknown)");
        o->name[sizeof o->name - 1] = 0;
        size_t total = 0;
        if (mem && mem(&total, d) == 0)
            o->total = total;
        if (attr) {
            if (attr(&o->cc_major, CU_ATTR_CC_MAJOR, d) != 0)
                o->cc_major = 0;
            if (attr(&o->cc_minor, CU_ATTR_CC_MINOR, d) != 0)
                o->cc_minor = 0;
        }
    }
    return h;
}

/* The CUDA runtime of a Python environment's pip wheels ($VIRTUAL_ENV or $CONDA_PREFIX:
 * lib/python3.N/site-packages/...), or 0. Two layouts: the CUDA 13 wheels put every library of the
 * toolkit in one directory, nvidia/cu13/lib (NVIDIA's cuda-python, cuda_pathfinder
 * supported_nvidia_libs.py: "cudart": ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib")); the
 * CUDA 12 wheels one directory per component, nvidia/cuda_runtime/lib beside
 * nvidia/cuda_cupti/lib. */
static int venv_runtime(char *out, size_t n)
{
    const char *envs[] = {getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX")};
    const char *dirs[] = {"cu13/lib", "cuda_runtime/lib", "cuda_runtime/lib"};
    const int majors[] = {13, 13, 12};
    for (int i = 0; i < 2; i++) {
        if (!envs[i] || !*envs[i])
            continue;
        for (int minor = 20; minor >= 6; minor--) {
            for (size_t k = 0; k < sizeof majors / sizeof majors[0]; k++) {
                snprintf(out, n, "%.3000s/lib/python3.%d/site-packages/nvidia/%s/libcudart.so.%d",
                         envs[i], minor, dirs[k], majors[k]);
                void *h = dlopen(out, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
                if (h || access(out, R_OK) == 0)
                    return 1;
            }
        }
    }
    return 0;
}

static void probe_runtime(info *I)
{
    const char *names[] = {NULL,
                           "libcudart.so.13",
                           NULL,
                           NULL,
                           "/usr/local/cuda/lib64/libcudart.so.13",
                           "libcudart.so.12"};
    char home[2][4096], venv[4096];
    if (venv_runtime(venv, sizeof venv))
        names[0] = venv;
    const char *envs[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    for (int i = 0; i < 2; i++)
        if (envs[i] && *envs[i]) {
            snprintf(home[i], sizeof home[i], "%s/lib64/libcudart.so.13", envs[i]);
            names[2 + i] = home[i];
        }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!names[i])
            continue;
        void *h = try_open(&I->runtime, names[i], RTLD_LAZY);
        if (!h)
            continue;
        I->runtime.found = 1;
        lib_path(h, "cudaRuntimeGetVersion", I->runtime.path, sizeof I->runtime.path, names[i]);
        cu_int_fn ver = (cu_int_fn)dlsym(h, "cudaRuntimeGetVersion");
        if (ver && ver(&I->runtime_version) != 0)
            I->runtime_version = 0;
        /* NVIDIA's libraries are left loaded: what their constructors allocate stays reachable
         * (unloading them made LeakSanitizer report it), and info ends at once anyway */
        return;
    }
}

static int str_ends(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The agent's search order (collectors/gmp_cupti.c, load_cupti): GPUMEMPROF_CUPTI; a CUPTI the
 * program itself loaded (only known inside the program: said in the text); libcupti.so.MAJOR
 * beside the CUDA runtime found above (its directory, the pip wheels' nvidia/cuda_cupti/lib and
 * torch/lib, extras/CUPTI/lib64); a toolkit's (next to the driver, CUDA_HOME / CUDA_PATH, the
 * library path, the usual install places), of the runtime's major first (with no runtime found,
 * of the driver's major first when it is older than the agent's). */
static void probe_cupti(info *I)
{
    char cand[48][4096];
    const char *why[48];
    int n = 0;
    const char *explicit_path = getenv("GPUMEMPROF_CUPTI");
    int major = 0;
    if (explicit_path && *explicit_path) {
        why[n] = "GPUMEMPROF_CUPTI (run --cupti)";
        snprintf(cand[n++], sizeof cand[0], "%s", explicit_path);
    } else {
        char rt[4096];
        snprintf(rt, sizeof rt, "%s", I->runtime.path);
        const char *base = strrchr(rt, '/');
        if (I->runtime.found && base && !strncmp(base + 1, "libcudart.so.", 13))
            major = atoi(base + 14);
        if (I->runtime.found && !major && I->runtime_version)
            major = I->runtime_version / 1000;
        char *slash = strrchr(rt, '/');
        if (major > 0 && slash) {
            *slash = 0;
            size_t len = strlen(rt);
            why[n] = str_ends(rt, len, "/nvidia/cu13/lib")
                         ? "the CUDA runtime's pip wheel layout (nvidia/cu13/lib, beside it)"
                         : "beside the CUDA runtime";
            snprintf(cand[n++], sizeof cand[0], "%.4000s/libcupti.so.%d", rt, major);
            if (str_ends(rt, len, "/nvidia/cuda_runtime/lib")) {
                size_t root = len - strlen("/cuda_runtime/lib");
                why[n] = "the CUDA runtime's pip wheel layout (nvidia/cuda_cupti/lib)";
                snprintf(cand[n++], sizeof cand[0], "%.*s/cuda_cupti/lib/libcupti.so.%d", (int)root,
                         rt, major);
                root -= strlen("/nvidia");
                why[n] = "the CUDA runtime's pip wheel layout (torch/lib)";
                snprintf(cand[n++], sizeof cand[0], "%.*s/torch/lib/libcupti.so.%d", (int)root, rt,
                         major);
            }
            if (str_ends(rt, len, "/lib64")) {
                why[n] = "the CUDA runtime's toolkit (extras/CUPTI/lib64)";
                snprintf(cand[n++], sizeof cand[0], "%.*s/extras/CUPTI/lib64/libcupti.so.%d",
                         (int)(len - 6), rt, major);
            }
        }
        int built = GMP_CUPTI_API_VERSION >= 10000 ? GMP_CUPTI_API_VERSION / 10000 : 13;
        /* no runtime found: the driver's major first when it is older than the agent's (the
         * agent does so for a program that loads no runtime: collectors/gmp_cupti_load.c) */
        int dmajor = !I->runtime.found && I->driver_version > 0 && I->driver_version / 1000 < built
                         ? I->driver_version / 1000
                         : 0;
        int majors[3] = {major > 0 && major != built ? major : 0, dmajor, built};
        for (int mi = 0; mi < 3; mi++) {
            if (!majors[mi])
                continue;
            char so[32];
            snprintf(so, sizeof so, "libcupti.so.%d", majors[mi]);
            if (I->driver.found && strchr(I->driver.path, '/')) {
                const char *ds = strrchr(I->driver.path, '/');
                why[n] = "next to the CUDA driver";
                snprintf(cand[n++], sizeof cand[0], "%.*s/%s", (int)(ds - I->driver.path),
                         I->driver.path, so);
            }
            const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
            const char *subs[] = {"lib64", "extras/CUPTI/lib64", "lib"};
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3 && homes[i] && *homes[i]; j++) {
                    why[n] = i ? "CUDA_PATH" : "CUDA_HOME";
                    snprintf(cand[n++], sizeof cand[0], "%.3000s/%s/%s", homes[i], subs[j], so);
                }
            const char *places[] = {"", "/usr/local/cuda/lib64/",
                                    "/usr/local/cuda/extras/CUPTI/lib64/",
                                    "/usr/lib/x86_64-linux-gnu/"};
            for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
                why[n] = i ? "a toolkit's usual place" : "the library search path";
                snprintf(cand[n++], sizeof cand[0], "%s%s", places[i], so);
            }
        }
        why[n] = "the library search path";
        snprintf(cand[n++], sizeof cand[0], "libcupti.so");
    }
    for (int i = 0; i < n; i++) {
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        I->cupti.found = 1;
        lib_path(h, "cuptiGetVersion", I->cupti.path, sizeof I->cupti.path, cand[i]);
        snprintf(I->cupti_why, sizeof I->cupti_why, "%s", why[i]);
        cupti_ver_fn ver = (cupti_ver_fn)dlsym(h, "cuptiGetVersion");
        if (!ver || ver(&I->cupti_version) != 0)
            I->cupti_version = 0;
        break; /* left loaded, as the runtime */
    }
    if (!I->cupti.found && explicit_path && *explicit_path)
        snprintf(I->cupti.error, sizeof I->cupti.error, "GPUMEMPROF_CUPTI=%.300s cannot be loaded",
                 explicit_path);
    else if (!I->cupti.found)
        snprintf(I->cupti.error, sizeof I->cupti.error,
                 "libcupti.so.%d not found beside the CUDA runtime, next to libcuda, in "
                 "CUDA_HOME/CUDA_PATH, on the library path or in /usr/local/cuda",
                 major > 0 ? major : 13);
    I->cupti_compatible = I->cupti.found && gmp_cupti_version_ok(I->cupti_version);
}

/* The CUDA major version of a CUPTI API version (cupti_version.h: 19 is CUDA 12.0's, 20 to 28
 * 12.2 to 12.9 Update 1's, 13 to 18 11.x's; from 13.0 on major * 10000 + minor * 100 + update);
 * 0 when older or unknown. The agent reads it the same way (collectors/gmp_cupti_load.c). */
static int cupti_major(uint32_t v)
{
    if (v >= 10000)
        return (int)(v / 10000);
    return v >= 19 ? 12 : v >= 13 ? 11 : 0;
}

/* A CUPTI of CUDA major version m where a user would have one (the file only: it is not loaded):
 * a Python environment's wheels (both layouts, as venv_runtime), next to the driver, CUDA_HOME /
 * CUDA_PATH, a toolkit's usual places, /usr/local/cuda-M.N for N from 9 down to 0. */
static int cupti_of_major(const info *I, int m, char *out, size_t n)
{
    const char *envs[] = {getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX")};
    for (int i = 0; i < 2; i++)
        for (int minor = 20; minor >= 6 && envs[i] && *envs[i]; minor--) {
            snprintf(out, n, "%.3000s/lib/python3.%d/site-packages/nvidia/%s/libcupti.so.%d",
                     envs[i], minor, m >= 13 ? "cu13/lib" : "cuda_cupti/lib", m);
            if (access(out, R_OK) == 0)
                return 1;
        }
    if (I->driver.found && strchr(I->driver.path, '/')) {
        const char *ds = strrchr(I->driver.path, '/');
        snprintf(out, n, "%.*s/libcupti.so.%d", (int)(ds - I->driver.path), I->driver.path, m);
        if (access(out, R_OK) == 0)
            return 1;
    }
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    const char *subs[] = {"lib64", "extras/CUPTI/lib64", "lib"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3 && homes[i] && *homes[i]; j++) {
            snprintf(out, n, "%.3000s/%s/libcupti.so.%d", homes[i], subs[j], m);
            if (access(out, R_OK) == 0)
                return 1;
        }
    for (int minor = 9; minor >= 0; minor--)
        for (int j = 0; j < 2; j++) {
            snprintf(out, n, "/usr/local/cuda-%d.%d/%s/libcupti.so.%d", m, minor, subs[j], m);
            if (access(out, R_OK) == 0)
                return 1;
        }
    return 0;
}

static void probe_nvml(info *I)
{
    void *h = try_open(&I->nvml, "libnvidia-ml.so.1", RTLD_NOW);
    if (!h)
        return;
    I->nvml.found = 1;
    lib_path(h, "nvmlSystemGetDriverVersion", I->nvml.path, sizeof I->nvml.path,
             "libnvidia-ml.so.1");
    nvml_init_fn init = (nvml_init_fn)dlsym(h, "nvmlInit_v2");
    nvml_init_fn fini = (nvml_init_fn)dlsym(h, "nvmlShutdown");
    nvml_ver_fn ver = (nvml_ver_fn)dlsym(h, "nvmlSystemGetDriverVersion");
    if (init && init() == 0) {
        if (ver && ver(I->nvml_driver, sizeof I->nvml_driver) != 0)
            I->nvml_driver[0] = 0;
        I->nvml_driver[sizeof I->nvml_driver - 1] = 0;
        if (fini)
            fini();
    } else {
        snprintf(I->nvml.error, sizeof I->nvml.error, "nvmlInit failed");
    }
    /* left loaded, as the runtime */
}

static void probe_agent(info *I)
{
    gmp_err e = gmp_cli_agent_path(I->agent.path, sizeof I->agent.path);
    if (e != GMP_OK) {
        snprintf(I->agent.error, sizeof I->agent.error, "missing (looked for %.400s)",
                 I->agent.path);
        return;
    }
    /* RTLD_LAZY: the agent has no constructors; nothing runs until InitializeInjection */
    void *h = try_open(&I->agent, I->agent.path, RTLD_LAZY);
    if (!h)
        return;
    I->agent.found = 1;
    I->agent_entry = dlsym(h, "InitializeInjection") && dlsym(h, "InitializeInjectionNvtx2");
    if (!I->agent_entry)
        snprintf(I->agent.error, sizeof I->agent.error,
                 "does not export InitializeInjection and InitializeInjectionNvtx2");
    dlclose(h);
}

static void probe(info *I)
{
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    if (inj)
        snprintf(I->injection_env, sizeof I->injection_env, "%s", inj);
    probe_driver(I); /* the driver stays loaded: CUPTI is looked for next to it */
    probe_runtime(I);
    probe_cupti(I);
    probe_nvml(I);
    probe_agent(I);

    if (!I->driver.found)
        reason(I, "no CUDA driver: libcuda.so.1 cannot be loaded (%s)", I->driver.error);
    else if (I->init_result != 0)
        reason(I, "the CUDA driver does not initialize: cuInit returned %s", I->init_error);
    else if (I->ndev == 0)
        reason(I, "the CUDA driver reports no device");
    if (!I->cupti.found)
        reason(I, "CUPTI: %s", I->cupti.error);
    else if (GMP_CUPTI_API_VERSION == 0)
        reason(I, "this gpumemprof was built without the CUDA toolkit (no agent support)");
    else if (I->cupti_compatible && I->driver_version > 0 &&
             cupti_major(I->cupti_version) > I->driver_version / 1000) {
        /* CUDA's compatibility rules: a toolkit's components (CUPTI among them) need a driver of
         * their major release or later (docs.nvidia.com/deploy/cuda-compatibility, "Minor Version
         * Compatibility": 13.x needs >= 580, CUDA 13.0's driver); the real CUPTI 13.0 answers
         * cuptiSubscribe with CUPTI_ERROR_UNKNOWN on a 12.8 driver */
        int dm = I->driver_version / 1000;
        char alt[4096];
        I->cupti_compatible = 0;
        I->cupti_driver_mismatch = 1;
        if (cupti_of_major(I, dm, alt, sizeof alt))
            reason(I,
                   "CUPTI %s is CUDA %d's and the CUDA driver is CUDA %d.%d: a CUPTI needs a "
                   "driver of its major version or later (cuptiSubscribe would fail with "
                   "CUPTI_ERROR_UNKNOWN); a CUDA %d CUPTI is at %s: gpumemprof run --cupti %s",
                   I->cupti.path, cupti_major(I->cupti_version), dm, I->driver_version % 1000 / 10,
                   dm, alt, alt);
        else
            reason(I,
                   "CUPTI %s is CUDA %d's and the CUDA driver is CUDA %d.%d: a CUPTI needs a "
                   "driver of its major version or later (cuptiSubscribe would fail with "
                   "CUPTI_ERROR_UNKNOWN); give a CUDA %d CUPTI to run with --cupti PATH (a CUDA "
                   "%d toolkit's libcupti.so.%d, or a Python environment's "
                   "site-packages/nvidia/%s/libcupti.so.%d), or update the driver",
                   I->cupti.path, cupti_major(I->cupti_version), dm, I->driver_version % 1000 / 10,
                   dm, dm, dm, dm >= 13 ? "cu13/lib" : "cuda_cupti/lib", dm);
    } else if (!I->cupti_compatible)
        reason(I,
               "CUPTI %s has API version %" PRIu32 "; the agent takes CUPTI 12.2 to 12.9 (20 to "
               "28) and %d.x (built against %d)",
               I->cupti.path, I->cupti_version, GMP_CUPTI_API_VERSION / 10000,
               GMP_CUPTI_API_VERSION);
    if (!I->agent.found)
        reason(I, "agent library: %s", I->agent.error);
    else if (!I->agent_entry)
        reason(I, "agent library %s %s", I->agent.path, I->agent.error);
    I->possible = I->nreasons == 0;
}

/* ---- output ---- */

static const char *fmt_cuda_version(int v, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    return buf;
}

static void write_text(const info *I)
{
    char a[64], b[64];
    printf("gpumemprof %s\n", GMP_VERSION_STRING);
    if (I->driver.found) {
        printf("  CUDA driver   %s", I->driver.path);
        if (I->driver_version)
            printf(", CUDA %s (%d)", fmt_cuda_version(I->driver_version, a, sizeof a),
                   I->driver_version);
        printf("\n");
        if (I->init_result != 0)
            printf("                cuInit failed: %s\n", I->init_error);
    } else {
        printf("  CUDA driver   not found (%s)\n", I->driver.error);
    }
    if (I->init_result == 0) {
        printf("  devices       %d\n", I->ndev);
        for (int i = 0; i < I->ndev; i++) {
            const device *d = &I->dev[i];
            printf("    %d: %s, %s (%" PRIu64 " bytes), compute capability %d.%d\n", d->ordinal,
                   d->name, gmp_fmt_bytes(d->total, a, sizeof a), d->total, d->cc_major,
                   d->cc_minor);
        }
    }
    if (I->runtime.found)
        printf("  CUDA runtime  %s, CUDA %s\n", I->runtime.path,
               I->runtime_version ? fmt_cuda_version(I->runtime_version, a, sizeof a) : "?");
    else
        printf("  CUDA runtime  libcudart.so.13 not found (programs may bring their own)\n");
    if (GMP_CUPTI_API_VERSION)
        printf("  CUPTI         built against API version %d\n", GMP_CUPTI_API_VERSION);
    else
        printf("  CUPTI         built without the CUDA toolkit\n");
    if (I->cupti.found) {
        printf("                found %s, API version %" PRIu32 " (%s)\n", I->cupti.path,
               I->cupti_version,
               I->cupti_compatible        ? "compatible"
               : I->cupti_driver_mismatch ? "newer than the driver: cannot work with it"
                                          : "not compatible");
        printf("                chosen as: %s; a program that loaded its own CUPTI before CUDA\n"
               "                started gets that one instead (never a second CUPTI)\n",
               I->cupti_why);
    } else
        printf("                not found: %s\n", I->cupti.error);
    if (I->nvml.found)
        printf("  NVML          %s%s%s\n", I->nvml.path, I->nvml_driver[0] ? ", driver " : " (",
               I->nvml_driver[0] ? I->nvml_driver : "");
    else
        printf("  NVML          not found (optional: libnvidia-ml.so.1)\n");
    if (I->agent.found)
        printf("  agent         %s (%s)\n", I->agent.path,
               I->agent_entry ? "loads, exports its entry points" : I->agent.error);
    else
        printf("  agent         %s\n", I->agent.error);
    if (I->injection_env[0])
        printf("  note          CUDA_INJECTION64_PATH is already set to %s in this environment\n",
               I->injection_env);
    (void)b;
    if (I->possible) {
        printf("\nprofiling: possible (gpumemprof run -- COMMAND)\n");
    } else {
        printf("\nprofiling: not possible on this machine:\n");
        for (int i = 0; i < I->nreasons; i++)
            printf("  - %s\n", I->reasons[i]);
    }
}

static void j_str(const char *s)
{
    gmp_json_fputs(stdout, s, strlen(s));
}

static void j_lib(const char *name, const lib *L)
{
    printf("\"%s\":{\"found\":%s,\"path\":", name, L->found ? "true" : "false");
    if (L->found)
        j_str(L->path);
    else
        fputs("null", stdout);
    fputs(",\"error\":", stdout);
    if (!L->found && L->error[0])
        j_str(L->error);
    else
        fputs("null", stdout);
}

static void write_json(const info *I)
{
    printf("{\n  \"schema\": \"gpumemprof-info/1\",\n  \"version\": \"%s\",\n  ",
           GMP_VERSION_STRING);
    j_lib("driver", &I->driver);
    printf(",\"version\":%d,\"init_result\":%d},\n  \"devices\": [", I->driver_version,
           I->init_result);
    for (int i = 0; i < I->ndev; i++) {
        const device *d = &I->dev[i];
        printf("%s{\"ordinal\":%d,\"name\":", i ? ",\n    " : "\n    ", d->ordinal);
        j_str(d->name);
        printf(",\"total_bytes\":%" PRIu64 ",\"cc\":\"%d.%d\"}", d->total, d->cc_major,
               d->cc_minor);
    }
    printf("%s],\n  ", I->ndev ? "\n  " : "");
    j_lib("runtime", &I->runtime);
    printf(",\"version\":%d},\n  ", I->runtime_version);
    j_lib("cupti", &I->cupti);
    printf(",\"built_against\":%d,\"version\":%" PRIu32 ",\"compatible\":%s,\"chosen_as\":",
           GMP_CUPTI_API_VERSION, I->cupti_version, I->cupti_compatible ? "true" : "false");
    if (I->cupti.found)
        j_str(I->cupti_why);
    else
        fputs("null", stdout);
    fputs("},\n  ", stdout);
    j_lib("nvml", &I->nvml);
    fputs(",\"driver_version\":", stdout);
    if (I->nvml_driver[0])
        j_str(I->nvml_driver);
    else
        fputs("null", stdout);
    fputs("},\n  ", stdout);
    j_lib("agent", &I->agent);
    printf(",\"entry_points\":%s},\n  \"cuda_injection64_path\": ",
           I->agent_entry ? "true" : "false");
    if (I->injection_env[0])
        j_str(I->injection_env);
    else
        fputs("null", stdout);
    printf(",\n  \"profiling_possible\": %s,\n  \"reasons\": [", I->possible ? "true" : "false");
    for (int i = 0; i < I->nreasons; i++) {
        fputs(i ? ", " : "", stdout);
        j_str(I->reasons[i]);
    }
    printf("]\n}\n");
}

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Loads (never links) the CUDA driver, runtime, CUPTI, NVML and the gpumemprof\n"
           "agent, and reports their versions, the devices and their memory, and whether\n"
           "profiling can work here; when it cannot, the reasons.\n\n"
           "With FILEs: what each recording is (kind, process, devices, time span, events,\n"
           "whether it is complete), from its header and one pass over its records (no\n"
           "replay), and nothing about this machine.\n" GMP_CLI_INPUT_HELP "\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 when profiling can work on this machine, 1 when it cannot,\n"
           "2 for bad arguments. With FILEs: 0 when every file was read (an incomplete\n"
           "one too: its completeness line says what is missing), 1 when one could not\n"
           "be. See docs/info.md.\n");
}

int gmp_cmd_info(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    int json = 0, npos = 0;
    const gmp_cli_opt opts[] = {
        {"json", 0, GMP_CLI_FLAG, &json, NULL, "print JSON instead of text", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    if (npos)
        return gmp_cli_info_files(cmd, json, argv + 1, (size_t)npos);
    info *I = calloc(1, sizeof *I);
    if (!I) {
        fprintf(stderr, "gpumemprof info: out of memory\n");
        return 1;
    }
    probe(I);
    if (json)
        write_json(I);
    else
        write_text(I);
    int possible = I->possible;
    free(I);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "gpumemprof info: cannot write the output\n");
        return 1;
    }
    return possible ? 0 : 1;
}
