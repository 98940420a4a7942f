/* gmp_driver: see gmp_driver.h. */
#include "gmp_driver.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *handle;
static char path[4096];

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libcuda.so", 10) != 0)
        return 0;
    snprintf(path, sizeof path, "%s", name);
    return 1;
}

static void find_driver(void)
{
    /* a driver visible globally first (the usual case), else one loaded privately */
    void *cuinit = dlsym(RTLD_DEFAULT, "cuInit");
    Dl_info di;
    if (cuinit && dladdr(cuinit, &di) && di.dli_fname)
        snprintf(path, sizeof path, "%s", di.dli_fname);
    else
        dl_iterate_phdr(find_cb, NULL);
    if (path[0])
        handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the loaded one: never a new load */
}

void *gmp_driver_sym(const char *name)
{
    pthread_once(&once, find_driver);
    if (handle)
        return dlsym(handle, name);
    return dlsym(RTLD_DEFAULT, name);
}

int gmp_driver_dir(char *buf, size_t n)
{
    pthread_once(&once, find_driver);
    const char *slash = strrchr(path, '/');
    if (!path[0] || !slash) {
        if (n)
            buf[0] = 0;
        return -1;
    }
    snprintf(buf, n, "%.*s", (int)(slash - path), path);
    return 0;
}

struct find_prefix {
    const char *prefix;
    char *path;
    size_t n;
    int found;
};

static int prefix_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find_prefix *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, f->prefix, strlen(f->prefix)) != 0)
        return 0;
    snprintf(f->path, f->n, "%s", name);
    f->found = 1;
    return 1;
}

int gmp_loaded_object(const char *prefix, char *out, size_t n)
{
    struct find_prefix f = {prefix, out, n, 0};
    if (n)
        out[0] = 0;
    dl_iterate_phdr(prefix_cb, &f);
    return f.found;
}
