/* The backend registry: which backend serves a `device` name. "cpu" is the CPU/OpenBLAS backend;
 * "cuda:N" is device N of the accelerator provider this build contains; "auto" is CUDA device 0
 * when the provider reports a device and it opens, otherwise the CPU. An explicit "cuda:N" never
 * falls back. The provider itself (the CUDA backend, linked in or loaded as a module) is gpu/'s:
 * core knows it only through the two functions below, so it includes no CUDA header. */
#ifndef PGCL_BACKEND_REGISTRY_H
#define PGCL_BACKEND_REGISTRY_H

#include "backend.h"

/* An accelerator backend a build contains (today: CUDA, gpu/cuda_module.c). */
typedef struct pgcl_device_provider {
    /* Devices present: 0 when there is none or no usable driver, with the reason in why. */
    int (*device_count)(char *why, int cap);
    /* The backend on device `index` (0-based) computing in `precision` (fp32|tf32|bf16); NULL with
     * the reason in err. */
    pgcl_backend *(*create)(int index, const char *precision, char *err, int cap);
} pgcl_device_provider;

/* Opens the backend `device` names with `precision` (the CPU computes in FP32 whatever it says).
 * cuda: the provider this build contains, or NULL in a build without CUDA (static storage). On
 * success returns the backend, and note holds "" or a remark for the log (why auto chose the CPU,
 * that a precision does not apply). On failure returns NULL and note holds the reason: a malformed
 * device, "cuda:N" in a build without CUDA, no such device, or the device failed to initialise —
 * start-up errors, never silently replaced by the CPU. Thread-safe when the provider is. */
pgcl_backend *pgcl_backend_registry_open(const pgcl_device_provider *cuda, const char *device, const char *precision,
                                         char *note, int cap);

#endif
