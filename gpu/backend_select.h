/* Choosing the backend from the `device` option: "cpu", "cuda:N" or "auto" (CUDA device 0 when
 * this build has CUDA and the driver reports a device, otherwise the CPU). Compiled with or without
 * CUDA, so the server calls it unconditionally. */
#ifndef PGCL_BACKEND_SELECT_H
#define PGCL_BACKEND_SELECT_H

#include <stdbool.h>

#include "backend.h"

/* True when this build contains the CUDA backend. */
bool pgcl_backend_have_cuda(void);

/* Opens the backend `device` names with `precision` (fp32|tf32|bf16; CUDA only, the CPU computes in
 * FP32). On success returns it, and note holds "" or a remark for the log (why auto chose the CPU,
 * that a precision does not apply). On failure returns NULL and note holds the reason: a malformed
 * device, "cuda:N" in a build without CUDA, no such device, or the device failed to initialise —
 * start-up errors, never silently replaced by the CPU. */
pgcl_backend *pgcl_backend_open(const char *device, const char *precision, char *note, int cap);

#endif
