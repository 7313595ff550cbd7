/* The host emulation of CUDA, cuBLAS and gpu/kernels.h; see fake_cuda.h. Signatures are the real
 * headers' (this file includes them), so a call backend_cuda.c makes with a wrong type does not
 * compile here either. */
#include "fake_cuda.h"

#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static _Atomic int g_live, g_devices = 1, g_fail_malloc, g_fail_gemm;

int fake_cuda_live_allocations(void) { return atomic_load(&g_live); }
void fake_cuda_fail_malloc(int nth) { atomic_store(&g_fail_malloc, nth); }
void fake_cuda_fail_gemm(int nth) { atomic_store(&g_fail_gemm, nth); }
void fake_cuda_set_devices(int n) { atomic_store(&g_devices, n); }

/* True when the countdown c reaches its mark with this call. */
static bool countdown(_Atomic int *c) {
    int v = atomic_load(c);
    while (v > 0 && !atomic_compare_exchange_weak(c, &v, v - 1)) {
    }
    return v == 1;
}

/* ---- runtime ---- */

cudaError_t cudaGetDeviceCount(int *n) {
    *n = atomic_load(&g_devices);
    return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int d) { return d >= 0 && d < atomic_load(&g_devices) ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "host emulation");
    p->major = 9;
    p->totalGlobalMem = (size_t)1 << 34;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaErrorMemoryAllocation ? "out of memory" : "emulated error"; }
const char *cudaGetErrorName(cudaError_t e) {
    return e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation"
           : e == cudaErrorNoDevice       ? "cudaErrorNoDevice"
                                          : "cudaErrorUnknown";
}

cudaError_t cudaMalloc(void **p, size_t n) {
    *p = NULL;
    if (countdown(&g_fail_malloc)) return cudaErrorMemoryAllocation;
    if (!n) return cudaSuccess; /* cudaFree(NULL)-style context creation passes through cudaFree */
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, n); /* NaN everywhere: reading what was never written shows */
    atomic_fetch_add(&g_live, 1);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (p) {
        free(p);
        atomic_fetch_sub(&g_live, 1);
    }
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) {
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    atomic_fetch_add(&g_live, 1);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    memcpy(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    *s = (cudaStream_t)malloc(1);
    atomic_fetch_add(&g_live, 1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { return cudaFree(s); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return cudaSuccess; }

/* ---- cuBLAS ---- */

struct cublasContext {
    cublasMath_t math;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = calloc(1, sizeof **h);
    atomic_fetch_add(&g_live, 1);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    cudaFree(h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated failure"; }

static float round_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0xfffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

static float bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Elements a column-major (rows, cols) operand with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld) { return (size_t)ld * (size_t)(cols - 1) + (size_t)rows; }

/* C = op(A)·op(B) with cuBLAS's meaning of every argument, A and B already FP32. */
static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE; /* what cuBLAS answers to a bad leading dimension */
    if (countdown(&g_fail_gemm)) return CUBLAS_STATUS_EXECUTION_FAILED;
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    if (h->math != CUBLAS_TF32_TENSOR_OP_MATH) return gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
    size_t na = span(ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda);
    size_t nb = span(tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    for (size_t i = 0; i < na; i++) a[i] = round_tf32(A[i]);
    for (size_t i = 0; i < nb; i++) b[i] = round_tf32(B[i]);
    cublasStatus_t st = gemm(ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, C, ldc);
    free(a);
    free(b);
    return st;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType a_type, int lda, const void *B,
                            cudaDataType b_type, int ldb, const void *beta, void *C, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    if (a_type != CUDA_R_16BF || b_type != CUDA_R_16BF || c_type != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* the one combination backend_cuda.c uses */
    size_t na = span(ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda);
    size_t nb = span(tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb);
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    for (size_t i = 0; i < na; i++) a[i] = bf16_widen(((const uint16_t *)A)[i]);
    for (size_t i = 0; i < nb; i++) b[i] = bf16_widen(((const uint16_t *)B)[i]);
    cublasStatus_t st = gemm(ta, tb, m, n, k, *(const float *)alpha, a, lda, b, ldb, *(const float *)beta, C, ldc);
    free(a);
    free(b);
    return st;
}

/* ---- kernels.h, from its contracts ---- */

static uint16_t bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

cudaError_t pgcl_cuda_to_bf16(const float *x, uint16_t *y, size_t n, cudaStream_t stream) {
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(x[i]);
    return cudaSuccess;
}

cudaError_t pgcl_cuda_bias_act(float *y, int rows, int cols, int ld, const float *bias, int n_act, int act,
                               float slope, uint16_t *yb, int ldb, cudaStream_t stream) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float v = y[(size_t)i * ld + j] + bias[j];
            if (j < n_act) {
                if (act == PGCL_CUDA_ACT_LEAKY_RELU) v = v >= 0 ? v : v * slope;
                else if (act == PGCL_CUDA_ACT_RELU) v = v > 0 ? v : 0;
                if (yb) yb[(size_t)i * ldb + j] = bf16_round(v);
            }
            y[(size_t)i * ld + j] = v;
        }
    return cudaSuccess;
}

cudaError_t pgcl_cuda_attend_fuse(const float *scores, int ld_scores, const float *u, int ld_u, const float *s_scale,
                                  const float *s_shift, const float *v_scaled, int rows, int d, int K, float *e,
                                  cudaStream_t stream) {
    if (K < 1 || K > 1024) return cudaErrorInvalidValue;
    for (int i = 0; i < rows; i++) {
        const float *sc = scores + (size_t)i * ld_scores;
        float a[1024], mx = -INFINITY, sum = 0, norm2 = 0;
        for (int k = 0; k < K; k++) mx = fmaxf(mx, sc[k]);
        for (int k = 0; k < K; k++) sum += a[k] = expf(sc[k] - mx);
        for (int k = 0; k < K; k++) a[k] /= sum;
        float *er = e + (size_t)i * d;
        for (int j = 0; j < d; j++) {
            float v = s_scale[j] * u[(size_t)i * ld_u + j] + s_shift[j];
            for (int k = 0; k < K; k++) v += a[k] * v_scaled[(size_t)k * d + j];
            er[j] = v;
            norm2 += v * v;
        }
        float inv = 1.0f / fmaxf(sqrtf(norm2), 1e-12f);
        for (int j = 0; j < d; j++) er[j] *= inv;
    }
    return cudaSuccess;
}

cudaError_t pgcl_cuda_head_probs(const float *logits, const float *bias, int rows, int H, int K, float *probs,
                                 cudaStream_t stream) {
    if ((H != 1 && H != K) || (H == 1 && K != 2)) return cudaErrorInvalidValue;
    for (int i = 0; i < rows; i++) {
        const float *l = logits + (size_t)i * H;
        float *p = probs + (size_t)i * K;
        if (H == 1) {
            float q = 1.0f / (1.0f + expf(-(l[0] + bias[0])));
            p[0] = 1.0f - q;
            p[1] = q;
            continue;
        }
        float mx = -INFINITY, sum = 0;
        for (int k = 0; k < K; k++) mx = fmaxf(mx, l[k] + bias[k]);
        for (int k = 0; k < K; k++) sum += p[k] = expf(l[k] + bias[k] - mx);
        for (int k = 0; k < K; k++) p[k] /= sum;
    }
    return cudaSuccess;
}
