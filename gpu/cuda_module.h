/* The backends this build contains, for callers that open one by `device` name: the CPU always,
 * CUDA when the build has it (linked in, or the module pgcld_cuda.so the daemon loads on first
 * need). Which one serves a name is core/model/backend_registry.c's decision; this file hands it the CUDA
 * backend. Compiled with or without CUDA, so the server calls it unconditionally. */
#ifndef PGCL_CUDA_MODULE_H
#define PGCL_CUDA_MODULE_H

#include <stdbool.h>

#include "backend.h"

/* True when this build contains the CUDA backend. */
bool pgcl_backend_have_cuda(void);

/* pgcl_backend_registry_open() with this build's CUDA backend (or none): "cpu", "cuda:N" or
 * "auto" with `precision` (fp32|tf32|bf16; CUDA only, the CPU computes in FP32). On success
 * returns the backend, and note holds "" or a remark for the log (why auto chose the CPU, that a
 * precision does not apply). On failure returns NULL and note holds the reason: a malformed
 * device, "cuda:N" in a build without CUDA, no such device, or the device failed to initialise —
 * start-up errors, never silently replaced by the CPU. */
pgcl_backend *pgcl_backend_open(const char *device, const char *precision, char *note, int cap);

#endif
