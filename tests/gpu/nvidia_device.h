/* Whether this machine has an NVIDIA GPU for the CUDA tests, judged without CUDA: a device node
 * (/dev/nvidiactl, /dev/nvidia0; /dev/dxg under WSL, as gpu/backend_select.c looks for) or a loaded
 * kernel driver (/proc/driver/nvidia). The CUDA tests skip only where there is none of these; where
 * there is one, a CUDA runtime that cannot initialise or reports no device is a misconfigured
 * driver, and a failure (docs/testing.md, "Skips"). */
#ifndef PGCL_TEST_NVIDIA_DEVICE_H
#define PGCL_TEST_NVIDIA_DEVICE_H

#include <stddef.h>
#include <unistd.h>

/* The first of the signs of an NVIDIA GPU that exists here, or NULL where none does. */
static inline const char *nvidia_device_evidence(void) {
    static const char *const signs[] = {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/proc/driver/nvidia"};
    for (size_t i = 0; i < sizeof signs / sizeof signs[0]; i++)
        if (access(signs[i], F_OK) == 0) return signs[i];
    return NULL;
}

#endif
