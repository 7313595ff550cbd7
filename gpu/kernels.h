/* The element-wise and per-row steps of the forward pass on the GPU (gpu/kernels.cu), between the
 * cuBLAS GEMMs that gpu/backend_cuda.c issues. Each function enqueues one kernel on `stream` and
 * returns the launch status (cudaGetLastError); nothing waits. Matrices are row-major with an
 * explicit leading dimension, as in core/model/model_forward.c. BF16 buffers are passed as uint16_t so
 * that this header stays C. */
#ifndef PGCL_GPU_KERNELS_H
#define PGCL_GPU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation codes (gpu/backend_cuda.c maps pgcl_activation onto them). */
enum { PGCL_CUDA_ACT_IDENTITY = 0, PGCL_CUDA_ACT_RELU = 1, PGCL_CUDA_ACT_LEAKY_RELU = 2 };

/* y[i] = bf16(x[i]) for n values, round to nearest even. */
cudaError_t pgcl_cuda_to_bf16(const float *x, uint16_t *y, size_t n, cudaStream_t stream);

/* For each of `rows` rows of y (leading dimension ld): y[:, j] += bias[j] for j < cols, then the
 * activation on the first n_act columns. When yb is not NULL the activated columns j < n_act are
 * also written to yb (rows, n_act) as BF16 with leading dimension ldb (the next GEMM's input). */
cudaError_t pgcl_cuda_bias_act(float *y, int rows, int cols, int ld, const float *bias, int n_act, int act,
                               float slope, uint16_t *yb, int ldb, cudaStream_t stream);

/* Per row i of `rows`: a = softmax(scores[i, 0..K)) over the K prototypes; then
 * e[i] = s_scale ⊙ u[i] + s_shift + a · v_scaled (d values), normalised to unit L2 norm (norm
 * floored at 1e-12, as torch.nn.functional.normalize). scores has leading dimension ld_scores,
 * u ld_u, e is (rows, d) packed; s_scale, s_shift (d), v_scaled (K, d). K <= 1024. */
cudaError_t pgcl_cuda_attend_fuse(const float *scores, int ld_scores, const float *u, int ld_u, const float *s_scale,
                                  const float *s_shift, const float *v_scaled, int rows, int d, int K, float *e,
                                  cudaStream_t stream);

/* Per row: the head's probabilities from logits (rows, H) and bias (H). H == 1 (binary): p =
 * sigmoid(logit + b), probs = (1 − p, p) with K = 2. Otherwise H == K and probs = softmax(logits +
 * b). probs is (rows, K) packed. */
cudaError_t pgcl_cuda_head_probs(const float *logits, const float *bias, int rows, int H, int K, float *probs,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
