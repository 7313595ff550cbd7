/* The CUDA backend (cuBLAS + gpu/kernels.cu), built only when meson finds the CUDA toolkit
 * (PGCLD_HAVE_CUDA is then defined for everything that depends on gpu_dep). Plain C: callers need
 * no CUDA header. */
#ifndef PGCL_BACKEND_CUDA_H
#define PGCL_BACKEND_CUDA_H

#include "backend.h"

#ifdef PGCLD_HAVE_CUDA

/* Number of CUDA devices the driver reports: 0 when there is no device or no usable driver, with
 * the reason in why (may be NULL). */
int pgcl_cuda_device_count(char *why, int cap);

/* The backend on device `device` (0-based) computing in `precision`: "fp32" (default when NULL),
 * "tf32" (cuBLAS TF32 tensor-op math for the FP32 GEMMs) or "bf16" (GEMM weights and inputs in
 * BF16, FP32 accumulation; kernels and the head in FP32). Initialises the device's context now so
 * that a broken device fails at start-up. NULL with the reason in err: no such device, no driver,
 * an unknown precision, out of memory. */
pgcl_backend *pgcl_backend_cuda_create(int device, const char *precision, char *err, int cap);

#endif

#endif
