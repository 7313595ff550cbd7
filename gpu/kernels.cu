// The small kernels of the GPU forward pass; see kernels.h for each one's contract. They mirror the
// loops of core/model/model_forward.c (bias_act, the per-row attention/fusion/normalisation block and
// head_probs) with the same operation order where it matters for FP32 parity: softmax divides by
// the sum, the fusion adds s_scale·u + s_shift first and then the K prototype terms in order.
// Compiled by nvcc (gpu/meson.build) for sm_90 with a compute_90 PTX fallback.
#include <cuda_bf16.h>
#include <math.h>

#include "kernels.h"

namespace {

constexpr float kNormEps = 1e-12f; // as torch.nn.functional.normalize
constexpr int kMaxK = 1024;        // docs/checkpoint-format.md: 2 <= K <= 1024

__device__ __forceinline__ float activate(int act, float slope, float x) {
    if (act == PGCL_CUDA_ACT_LEAKY_RELU) return x >= 0.0f ? x : x * slope;
    if (act == PGCL_CUDA_ACT_RELU) return x > 0.0f ? x : 0.0f;
    return x;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Sum (or max) of v over the block; every thread gets the result. blockDim.x is a multiple of 32
// and at most 1024; red holds 32 floats of shared memory. Starts with a barrier so that red may be
// reused from one call to the next.
__device__ float block_reduce(float v, float *red, bool is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float identity = is_max ? -INFINITY : 0.0f;
        float x = lane < n_warps ? red[lane] : identity;
        x = is_max ? warp_max(x) : warp_sum(x);
        if (lane == 0) red[0] = x;
    }
    __syncthreads();
    return red[0];
}

__global__ void to_bf16_kernel(const float *x, __nv_bfloat16 *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void bias_act_kernel(float *y, int rows, int cols, int ld, const float *bias, int n_act, int act,
                                float slope, __nv_bfloat16 *yb, int ldb) {
    const size_t total = (size_t)rows * (size_t)cols;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx / (size_t)cols), j = (int)(idx % (size_t)cols);
        float *p = y + (size_t)i * ld + j;
        float v = *p + bias[j];
        if (j < n_act) {
            v = activate(act, slope, v);
            if (yb) yb[(size_t)i * ldb + j] = __float2bfloat16_rn(v);
        }
        *p = v;
    }
}

// One block per row. Shared memory: a[K] (attention weights), then 32 floats for reductions.
__global__ void attend_fuse_kernel(const float *scores, int ld_scores, const float *u, int ld_u,
                                   const float *s_scale, const float *s_shift, const float *v_scaled, int d, int K,
                                   float *e) {
    extern __shared__ float shared[];
    float *a = shared, *red = shared + K;
    const int i = blockIdx.x;
    const float *sc = scores + (size_t)i * ld_scores;
    const float *ur = u + (size_t)i * ld_u;
    float *er = e + (size_t)i * d;

    float mx = -INFINITY;
    for (int k = threadIdx.x; k < K; k += blockDim.x) mx = fmaxf(mx, sc[k]);
    mx = block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        a[k] = expf(sc[k] - mx);
        sum += a[k];
    }
    sum = block_reduce(sum, red, false); // its barriers also publish a[]
    for (int k = threadIdx.x; k < K; k += blockDim.x) a[k] /= sum;
    __syncthreads();

    float norm2 = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = s_scale[j] * ur[j] + s_shift[j];
        for (int k = 0; k < K; k++) v += a[k] * v_scaled[(size_t)k * d + j];
        er[j] = v;
        norm2 += v * v;
    }
    norm2 = block_reduce(norm2, red, false);
    const float inv = 1.0f / fmaxf(sqrtf(norm2), kNormEps);
    for (int j = threadIdx.x; j < d; j += blockDim.x) er[j] *= inv; // the values this thread wrote
}

// One warp per row, kRowsPerBlock rows per block.
constexpr int kRowsPerBlock = 4;

__global__ void head_probs_kernel(const float *logits, const float *bias, int rows, int H, int K, float *probs) {
    const int lane = threadIdx.x & 31;
    const int i = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    if (i >= rows) return; // the whole warp leaves together: the shuffles below stay full-warp
    const float *l = logits + (size_t)i * H;
    float *p = probs + (size_t)i * K;
    if (H == 1) {
        if (lane == 0) {
            const float q = 1.0f / (1.0f + expf(-(l[0] + bias[0])));
            p[0] = 1.0f - q;
            p[1] = q;
        }
        return;
    }
    float mx = -INFINITY;
    for (int k = lane; k < K; k += 32) mx = fmaxf(mx, l[k] + bias[k]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int k = lane; k < K; k += 32) {
        const float x = expf(l[k] + bias[k] - mx);
        p[k] = x;
        sum += x;
    }
    sum = warp_sum(sum);
    for (int k = lane; k < K; k += 32) p[k] /= sum; // the values this lane wrote
}

unsigned grid_for(size_t n, int block) {
    size_t g = (n + (size_t)block - 1) / (size_t)block;
    if (g < 1) g = 1;
    return g > 65535u * 16u ? 65535u * 16u : (unsigned)g; // grid-stride loops cover the rest
}

} // namespace

extern "C" cudaError_t pgcl_cuda_to_bf16(const float *x, uint16_t *y, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    const int block = 256;
    to_bf16_kernel<<<grid_for(n, block), block, 0, stream>>>(x, reinterpret_cast<__nv_bfloat16 *>(y), n);
    return cudaGetLastError();
}

extern "C" cudaError_t pgcl_cuda_bias_act(float *y, int rows, int cols, int ld, const float *bias, int n_act, int act,
                                          float slope, uint16_t *yb, int ldb, cudaStream_t stream) {
    const size_t total = (size_t)rows * (size_t)cols;
    if (total == 0) return cudaSuccess;
    const int block = 256;
    bias_act_kernel<<<grid_for(total, block), block, 0, stream>>>(y, rows, cols, ld, bias, n_act, act, slope,
                                                                  reinterpret_cast<__nv_bfloat16 *>(yb), ldb);
    return cudaGetLastError();
}

extern "C" cudaError_t pgcl_cuda_attend_fuse(const float *scores, int ld_scores, const float *u, int ld_u,
                                             const float *s_scale, const float *s_shift, const float *v_scaled,
                                             int rows, int d, int K, float *e, cudaStream_t stream) {
    if (rows == 0) return cudaSuccess;
    if (K < 1 || K > kMaxK || d < 1) return cudaErrorInvalidValue;
    const int block = d <= 64 ? 64 : d <= 128 ? 128 : 256;
    const size_t shared = ((size_t)K + 32) * sizeof(float);
    attend_fuse_kernel<<<rows, block, shared, stream>>>(scores, ld_scores, u, ld_u, s_scale, s_shift, v_scaled, d, K,
                                                        e);
    return cudaGetLastError();
}

extern "C" cudaError_t pgcl_cuda_head_probs(const float *logits, const float *bias, int rows, int H, int K,
                                            float *probs, cudaStream_t stream) {
    if (rows == 0) return cudaSuccess;
    if ((H != 1 && H != K) || (H == 1 && K != 2)) return cudaErrorInvalidValue;
    const unsigned grid = (unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    head_probs_kernel<<<grid, 32 * kRowsPerBlock, 0, stream>>>(logits, bias, rows, H, K, probs);
    return cudaGetLastError();
}
