/* The device option -> a backend; see backend_registry.h. The one place that decides which backend
 * serves: "auto" may fall back to the CPU, an explicit "cuda:N" never does. */
#include "backend_registry.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* "cuda:N" with N a decimal device index in [0, 1023]: returns N, or -1. */
static int parse_cuda_index(const char *device) {
    if (strncmp(device, "cuda:", 5) != 0) return -1;
    const char *digits = device + 5;
    if (*digits < '0' || *digits > '9') return -1;
    char *end;
    errno = 0;
    long n = strtol(digits, &end, 10);
    if (errno || *end || n > 1023) return -1;
    return (int)n;
}

/* The CPU backend; note gets why it was chosen (may be NULL) and whether the precision is ignored. */
static pgcl_backend *open_cpu(const char *precision, char *note, int cap, const char *why) {
    pgcl_backend *b = pgcl_backend_cpu_create();
    if (!b) {
        pgcl_errorf(note, cap, "out of memory");
        return NULL;
    }
    bool reduced = precision && strcmp(precision, "fp32") != 0;
    pgcl_errorf(note, cap, "%s%s%s%s%s", why ? why : "", why && reduced ? "; " : "",
                reduced ? "device-precision " : "", reduced ? precision : "",
                reduced ? " applies only to CUDA (the CPU computes in fp32)" : "");
    return b;
}

/* "auto" with a CUDA provider: device 0 when there is one and it opens, else the CPU with why. */
static pgcl_backend *open_auto(const pgcl_device_provider *cuda, const char *precision, char *note, int cap) {
    char why[512];
    if (cuda->device_count(why, sizeof why) != 0) {
        pgcl_backend *b = cuda->create(0, precision, why, sizeof why);
        if (b) return b;
    }
    char reason[600];
    snprintf(reason, sizeof reason, "device auto: %s; serving on the CPU", why);
    return open_cpu(precision, note, cap, reason);
}

pgcl_backend *pgcl_backend_registry_open(const pgcl_device_provider *cuda, const char *device, const char *precision,
                                         char *note, int cap) {
    pgcl_errorf(note, cap, "%s", "");
    if (strcmp(device, "cpu") == 0) return open_cpu(precision, note, cap, NULL);
    int index = strcmp(device, "auto") == 0 ? -2 : parse_cuda_index(device);
    if (index == -1) {
        pgcl_errorf(note, cap, "device '%s' must be auto, cpu or cuda:N (N a device index)", device);
        return NULL;
    }
    if (cuda) return index == -2 ? open_auto(cuda, precision, note, cap) : cuda->create(index, precision, note, cap);
    if (index == -2)
        return open_cpu(precision, note, cap, "device auto: this pgcld was built without CUDA; serving on the CPU");
    pgcl_errorf(note, cap,
                "device %s: this pgcld was built without CUDA (rebuild with the CUDA toolkit: meson setup -Dcuda=enabled)",
                device);
    return NULL;
}
