/* The CUDA backend as this build contains it, handed to core's backend registry
 * (core/model/backend_registry.c decides which backend serves a device name): nothing in a build without
 * CUDA; linked in for tests and benchmarks (PGCLD_HAVE_CUDA); or, in the daemon
 * (PGCLD_CUDA_MODULE), the module pgcld_cuda.so, loaded on first need. See cuda_module.h. */
#include "cuda_module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PGCLD_CUDA_MODULE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#endif

#include "backend_cuda.h"
#include "backend_registry.h"
#include "status.h"

bool pgcl_backend_have_cuda(void) {
#if defined(PGCLD_HAVE_CUDA) || defined(PGCLD_CUDA_MODULE)
    return true;
#else
    return false;
#endif
}

#ifdef PGCLD_CUDA_MODULE
/* ---- the CUDA backend as a module (the daemon's build) ----
 * pgcld_cuda.so holds backend_cuda.c and the kernels and links cuBLAS; it is dlopen'ed on first
 * need, from $PGCLD_CUDA_MODULE, else beside the executable in a build tree (../gpu/), else from
 * the install directory. Its two entry points are the ones backend_cuda.h declares. */
typedef int (*device_count_fn)(char *why, int cap);
typedef pgcl_backend *(*cuda_create_fn)(int device, const char *precision, char *err, int cap);

static pthread_mutex_t g_module_lock = PTHREAD_MUTEX_INITIALIZER;
static device_count_fn g_device_count;
static cuda_create_fn g_cuda_create;

/* Loads the module once; false with the reason in why. */
static bool load_cuda_module(char *why, int cap) {
    pthread_mutex_lock(&g_module_lock);
    if (g_cuda_create) {
        pthread_mutex_unlock(&g_module_lock);
        return true;
    }
    char candidates[3][PATH_MAX + 64];
    int n = 0;
    const char *env = getenv("PGCLD_CUDA_MODULE");
    if (env && *env) snprintf(candidates[n++], sizeof candidates[0], "%s", env); /* then only this one */
    char exe[PATH_MAX];
    ssize_t len = n ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(candidates[n++], sizeof candidates[0], "%s/../gpu/pgcld_cuda.so", exe);
        }
    }
    if (!(env && *env)) snprintf(candidates[n++], sizeof candidates[0], "%s/pgcld_cuda.so", PGCLD_CUDA_MODULE_DIR);
    void *handle = NULL;
    const char *first_error = NULL;
    char error_text[512] = "";
    for (int i = 0; i < n && !handle; i++) {
        if (access(candidates[i], R_OK) != 0 && i + 1 < n) continue;
        handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!handle && !first_error) {
            snprintf(error_text, sizeof error_text, "%s", dlerror());
            first_error = error_text;
        }
    }
    if (handle) {
        g_device_count = (device_count_fn)(uintptr_t)dlsym(handle, "pgcl_cuda_device_count");
        g_cuda_create = (cuda_create_fn)(uintptr_t)dlsym(handle, "pgcl_backend_cuda_create");
        if (!g_device_count || !g_cuda_create) {
            snprintf(error_text, sizeof error_text, "pgcld_cuda.so lacks its entry points");
            first_error = error_text;
            g_device_count = NULL;
            g_cuda_create = NULL;
            dlclose(handle);
        }
    }
    bool ok = g_cuda_create != NULL;
    pthread_mutex_unlock(&g_module_lock);
    if (!ok) pgcl_errorf(why, cap, "cannot load the CUDA backend module: %s", first_error ? first_error : "not found");
    return ok;
}

static int module_device_count(char *why, int cap) {
    /* No NVIDIA device node: nothing to find, and no reason to map cuBLAS to find it. */
    if (access("/dev/nvidiactl", F_OK) != 0 && access("/dev/nvidia0", F_OK) != 0 && access("/dev/dxg", F_OK) != 0) {
        pgcl_errorf(why, cap, "no NVIDIA device (no /dev/nvidiactl)");
        return 0;
    }
    if (!load_cuda_module(why, cap)) return 0;
    return g_device_count(why, cap);
}

static pgcl_backend *module_cuda_create(int device, const char *precision, char *err, int cap) {
    if (!load_cuda_module(err, cap)) return NULL;
    return g_cuda_create(device, precision, err, cap);
}
#endif

/* The CUDA provider this build contains, or NULL. */
#if defined(PGCLD_CUDA_MODULE)
static const pgcl_device_provider CUDA_PROVIDER = {.device_count = module_device_count, .create = module_cuda_create};
#define CUDA_PROVIDER_OR_NULL (&CUDA_PROVIDER)
#elif defined(PGCLD_HAVE_CUDA)
static const pgcl_device_provider CUDA_PROVIDER = {.device_count = pgcl_cuda_device_count,
                                                   .create = pgcl_backend_cuda_create};
#define CUDA_PROVIDER_OR_NULL (&CUDA_PROVIDER)
#else
#define CUDA_PROVIDER_OR_NULL NULL
#endif

pgcl_backend *pgcl_backend_open(const char *device, const char *precision, char *note, int cap) {
    return pgcl_backend_registry_open(CUDA_PROVIDER_OR_NULL, device, precision, note, cap);
}
