/* A host emulation of the parts of the CUDA runtime, cuBLAS and gpu/kernels.h that
 * gpu/backend_cuda.c uses, so that the backend's host code — weight upload and carving, worker
 * buffers, the cuBLAS argument order and leading dimensions, chunking, the precision plumbing, the
 * error paths — runs and is checked on a machine without a GPU (tests/gpu/test_cuda_host and
 * test_cuda_faults link it instead of libcudart and libcublas).
 *
 * What it is not: the kernels here are C loops written from kernels.h's contracts, not the .cu
 * code, and "device memory" is host memory. GEMMs are column-major cblas_sgemm calls, whose
 * arguments mean exactly what cuBLAS's mean; TF32 math rounds the GEMM inputs to 10 significand
 * bits and BF16 operands are widened, both with FP32 accumulation. Only test_cuda_parity on a real
 * device checks the kernels and cuBLAS themselves. */
#ifndef PGCL_TEST_FAKE_CUDA_H
#define PGCL_TEST_FAKE_CUDA_H

/* Number of device plus pinned allocations not yet freed. */
int fake_cuda_live_allocations(void);

/* Makes the nth next cudaMalloc (1 = the next one) fail with cudaErrorMemoryAllocation; 0 = none. */
void fake_cuda_fail_malloc(int nth);

/* Makes the nth next GEMM (cublasSgemm or cublasGemmEx) fail with CUBLAS_STATUS_EXECUTION_FAILED. */
void fake_cuda_fail_gemm(int nth);

/* Number of devices cudaGetDeviceCount reports (default 1). */
void fake_cuda_set_devices(int n);

#endif
