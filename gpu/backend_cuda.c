/* The CUDA backend: core/model/model_forward.c's fast path on one GPU. The GEMMs go to cuBLAS, the steps
 * between them to gpu/kernels.cu; the math is the same as the CPU's, on the same folded constants.
 *
 * Reading top to bottom: precision and error text → the model's device-resident weights (one
 * allocation, one copy per model version) → the worker (stream, cuBLAS handle, device scratch,
 * pinned host buffers) → the forward pass → the backend (device choice, checks at start-up).
 *
 * Per chunk of at most max_rows rows, on the worker's stream:
 *   z → pinned h_z → d_z                                    (one H2D copy)
 *   first (r, h1+K) = z · w_firstᵀ            (GEMM)  + b_first, activation on [0, h1)  (kernel)
 *   x_l (r, n_out)  = x_{l-1} · w[l]ᵀ         (GEMM)  + b[l], activation              (kernel)
 *   e (r, d) = normalise(s_scale ⊙ x_L + s_shift + softmax(first[:, h1:]) · v_scaled)  (kernel)
 *   logits (r, H) = e · head_wᵀ               (GEMM)  → sigmoid or softmax           (kernel)
 *   e, probs → pinned h_out → caller           (two D2H copies, one stream sync)
 *
 * Precision (one per backend): fp32 — plain cublasSgemm; tf32 — the same calls with the handle in
 * CUBLAS_TF32_TENSOR_OP_MATH; bf16 — the semantic-stream and first GEMMs as cublasGemmEx with BF16
 * weights (converted once at upload) and BF16 inputs (converted by the kernels that produce them),
 * FP32 output and accumulation. The kernels, the attention, the head GEMM and the outputs stay FP32
 * in every mode. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "backend_impl.h"
#include "kernels.h"
#include "log.h"

typedef enum { PREC_FP32, PREC_TF32, PREC_BF16 } cuda_precision;
static const char *const g_prec_names[] = {"fp32", "tf32", "bf16"};

typedef struct cuda_ctx {
    int device;
    cuda_precision prec;
} cuda_ctx;

#define ALIGN_BYTES 256 /* cudaMalloc's own alignment; cuBLAS prefers 16-byte aligned operands */

static size_t align_up(size_t n) { return (n + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

/* ------------------------------------------------------------------------------------------------
 * Error text at the call site */

static bool cuda_ok(cudaError_t e, const char *what, pgcl_status *st, char *err, int cap) {
    if (e == cudaSuccess) return true;
    pgcl_errorf(err, cap, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    if (st) *st = e == cudaErrorMemoryAllocation ? PGCL_ERR_NOMEM : PGCL_ERR_IO;
    return false;
}

static bool blas_ok(cublasStatus_t s, const char *what, pgcl_status *st, char *err, int cap) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    pgcl_errorf(err, cap, "%s: %s", what, cublasGetStatusString(s));
    if (st) *st = s == CUBLAS_STATUS_ALLOC_FAILED ? PGCL_ERR_NOMEM : PGCL_ERR_IO;
    return false;
}

/* BF16 is the upper half of an FP32; round to nearest, ties to even (values are finite: the loader
 * refuses non-finite weights). */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ------------------------------------------------------------------------------------------------
 * Model state: the fast path's constants on the device */

typedef struct cuda_model {
    void *d_arena; /* every pointer below points into this one allocation */
    const float *w_first;            /* (h1 + K, D) */
    const float *b_first;            /* (h1 + K) */
    const float *w[PGCL_MAX_LAYERS]; /* layers 1..L-1: (n_out, n_in), previous BatchNorm folded in */
    const float *b[PGCL_MAX_LAYERS]; /* (n_out) */
    const float *s_scale, *s_shift;  /* (d) */
    const float *v_scaled;           /* (K, d) */
    const float *head_w;             /* (H, d) */
    const float *head_b;             /* (H) */
    const uint16_t *w_first_bf16;    /* (h1 + K, D), BF16 precision only */
    const uint16_t *w_bf16[PGCL_MAX_LAYERS]; /* layers 1..L-1, BF16 precision only */
} cuda_model;

/* One tensor of the upload: n floats from src, stored as FP32 or BF16 at *dst (a device pointer). */
typedef struct upload_item {
    const float *src;
    size_t n;
    bool bf16;
    const void **dst;
    size_t offset;
} upload_item;

typedef struct cuda_worker cuda_worker;
static cudaStream_t worker_stream(const cuda_worker *w);

static void *cuda_model_prepare(void *vctx, void *vworker, const pgcl_model *m, pgcl_status *st, char *err, int cap) {
    const cuda_ctx *ctx = vctx;
    const pgcl_folded *f = &m->fast;
    const pgcl_weights *raw = &m->raw;
    const int D = m->D, d = m->d, K = m->K, H = m->H, nf = f->n_first;
    const bool bf16 = ctx->prec == PREC_BF16;
    cuda_model *cm = calloc(1, sizeof *cm);
    unsigned char *host = NULL;
    upload_item items[2 * PGCL_MAX_LAYERS + 8 + PGCL_MAX_LAYERS];
    int n_items = 0;
    *st = PGCL_ERR_NOMEM;
    if (!cm) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }

    /* The table of tensors: FP32 first, then the BF16 copies of the GEMM weights. */
    items[n_items++] = (upload_item){f->w_first, (size_t)nf * D, false, (const void **)&cm->w_first, 0};
    items[n_items++] = (upload_item){f->b_first, (size_t)nf, false, (const void **)&cm->b_first, 0};
    for (int l = 1; l < raw->n_layers; l++) {
        const pgcl_layer *L = &raw->layers[l];
        items[n_items++] = (upload_item){f->w[l], (size_t)L->n_out * L->n_in, false, (const void **)&cm->w[l], 0};
        items[n_items++] = (upload_item){f->b[l], (size_t)L->n_out, false, (const void **)&cm->b[l], 0};
    }
    items[n_items++] = (upload_item){f->s_scale, (size_t)d, false, (const void **)&cm->s_scale, 0};
    items[n_items++] = (upload_item){f->s_shift, (size_t)d, false, (const void **)&cm->s_shift, 0};
    items[n_items++] = (upload_item){f->v_scaled, (size_t)K * d, false, (const void **)&cm->v_scaled, 0};
    items[n_items++] = (upload_item){raw->head_w, (size_t)H * d, false, (const void **)&cm->head_w, 0};
    items[n_items++] = (upload_item){raw->head_b, (size_t)H, false, (const void **)&cm->head_b, 0};
    if (bf16) {
        items[n_items++] = (upload_item){f->w_first, (size_t)nf * D, true, (const void **)&cm->w_first_bf16, 0};
        for (int l = 1; l < raw->n_layers; l++) {
            const pgcl_layer *L = &raw->layers[l];
            items[n_items++] =
                (upload_item){f->w[l], (size_t)L->n_out * L->n_in, true, (const void **)&cm->w_bf16[l], 0};
        }
    }
    size_t bytes = 0;
    for (int i = 0; i < n_items; i++) {
        items[i].offset = bytes;
        bytes += align_up(items[i].n * (items[i].bf16 ? sizeof(uint16_t) : sizeof(float)));
    }

    host = calloc(1, bytes);
    if (!host) {
        pgcl_errorf(err, cap, "out of memory staging %zu bytes of weights", bytes);
        goto fail;
    }
    for (int i = 0; i < n_items; i++) {
        if (!items[i].bf16) {
            memcpy(host + items[i].offset, items[i].src, items[i].n * sizeof(float));
        } else {
            uint16_t *dst = (uint16_t *)(host + items[i].offset);
            for (size_t k = 0; k < items[i].n; k++) dst[k] = f32_to_bf16(items[i].src[k]);
        }
    }
    cudaStream_t stream = worker_stream(vworker);
    if (!cuda_ok(cudaSetDevice(ctx->device), "cudaSetDevice", st, err, cap) ||
        !cuda_ok(cudaMalloc(&cm->d_arena, bytes), "cudaMalloc (model weights)", st, err, cap) ||
        !cuda_ok(cudaMemcpyAsync(cm->d_arena, host, bytes, cudaMemcpyHostToDevice, stream), "upload of the weights",
                 st, err, cap) ||
        /* Other workers' streams read these weights next: the copy must be complete, not queued. */
        !cuda_ok(cudaStreamSynchronize(stream), "upload of the weights", st, err, cap))
        goto fail;
    for (int i = 0; i < n_items; i++) *items[i].dst = (unsigned char *)cm->d_arena + items[i].offset;
    free(host);
    pgcl_log_info("cuda:%d: model %s/%s resident (%.1f MiB, %s)", ctx->device, m->name, m->version,
                  (double)bytes / (1 << 20), g_prec_names[ctx->prec]);
    *st = PGCL_OK;
    return cm;
fail:
    free(host);
    if (cm->d_arena) cudaFree(cm->d_arena);
    free(cm);
    return NULL;
}

static void cuda_model_release(void *vctx, void *state) {
    const cuda_ctx *ctx = vctx;
    cuda_model *cm = state;
    if (!cm) return;
    /* cudaFree waits for work in flight on the device; no stream still uses these weights (the
     * cache drops an entry only when no request holds its model). */
    cudaSetDevice(ctx->device);
    cudaFree(cm->d_arena);
    free(cm);
}

/* ------------------------------------------------------------------------------------------------
 * Workers */

struct cuda_worker {
    int max_rows;
    int D, n_first, max_hidden, d, K, H; /* the dimensions the buffers are sized for */
    cudaStream_t stream;                 /* non-blocking: no implicit sync with the legacy stream */
    cublasHandle_t blas;                 /* bound to stream; one per worker (handles are per thread) */
    void *d_buf;                         /* one device allocation, carved into: */
    float *d_z;                          /* (max_rows, D) */
    float *d_first;                      /* (max_rows, h1 + K) first GEMM, then attention scores */
    float *d_ping, *d_pong;              /* (max_rows, max_hidden) hidden layers */
    float *d_vec;                        /* (max_rows, d) the normalised vectors */
    float *d_logits;                     /* (max_rows, H) */
    float *d_probs;                      /* (max_rows, K) */
    uint16_t *d_zb;                      /* (max_rows, D) z in BF16; BF16 precision only */
    uint16_t *d_xb;                      /* (max_rows, max_hidden) next GEMM's input in BF16; BF16 only */
    void *h_buf;                         /* one pinned host allocation, carved into: */
    float *h_z;                          /* (max_rows, D) */
    float *h_vec;                        /* (max_rows, d) */
    float *h_probs;                      /* (max_rows, K) */
};

static cudaStream_t worker_stream(const cuda_worker *w) { return w->stream; }

static void cuda_worker_destroy(void *vctx, void *vworker) {
    const cuda_ctx *ctx = vctx;
    cuda_worker *w = vworker;
    if (!w) return;
    cudaSetDevice(ctx->device);
    if (w->blas) cublasDestroy(w->blas);
    if (w->stream) cudaStreamDestroy(w->stream);
    if (w->d_buf) cudaFree(w->d_buf);
    if (w->h_buf) cudaFreeHost(w->h_buf);
    free(w);
}

/* Carves n elements of `size` bytes from an allocation being laid out: returns the offset. */
static size_t carve(size_t *bytes, size_t n, size_t size) {
    size_t off = *bytes;
    *bytes += align_up(n * size);
    return off;
}

static void *cuda_worker_create(void *vctx, const pgcl_model *m, int max_rows, char *err, int cap) {
    const cuda_ctx *ctx = vctx;
    cuda_worker *w = calloc(1, sizeof *w);
    if (!w) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    w->max_rows = max_rows;
    w->D = m->D;
    w->n_first = m->fast.n_first;
    w->max_hidden = m->max_hidden;
    w->d = m->d;
    w->K = m->K;
    w->H = m->H;
    const size_t R = (size_t)max_rows;
    const bool bf16 = ctx->prec == PREC_BF16;
    size_t dev = 0, o_z, o_first, o_ping, o_pong, o_vec, o_logits, o_probs, o_zb = 0, o_xb = 0;
    o_z = carve(&dev, R * w->D, sizeof(float));
    o_first = carve(&dev, R * w->n_first, sizeof(float));
    o_ping = carve(&dev, R * w->max_hidden, sizeof(float));
    o_pong = carve(&dev, R * w->max_hidden, sizeof(float));
    o_vec = carve(&dev, R * w->d, sizeof(float));
    o_logits = carve(&dev, R * w->H, sizeof(float));
    o_probs = carve(&dev, R * w->K, sizeof(float));
    if (bf16) {
        o_zb = carve(&dev, R * w->D, sizeof(uint16_t));
        o_xb = carve(&dev, R * w->max_hidden, sizeof(uint16_t));
    }
    size_t host = 0, o_hz, o_hvec, o_hprobs;
    o_hz = carve(&host, R * w->D, sizeof(float));
    o_hvec = carve(&host, R * w->d, sizeof(float));
    o_hprobs = carve(&host, R * w->K, sizeof(float));

    const cublasMath_t math = ctx->prec == PREC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (!cuda_ok(cudaSetDevice(ctx->device), "cudaSetDevice", NULL, err, cap) ||
        !cuda_ok(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), "cudaStreamCreate", NULL, err, cap) ||
        !blas_ok(cublasCreate(&w->blas), "cublasCreate", NULL, err, cap) ||
        !blas_ok(cublasSetStream(w->blas, w->stream), "cublasSetStream", NULL, err, cap) ||
        !blas_ok(cublasSetMathMode(w->blas, math), "cublasSetMathMode", NULL, err, cap) ||
        !cuda_ok(cudaMalloc(&w->d_buf, dev), "cudaMalloc (worker buffers)", NULL, err, cap) ||
        !cuda_ok(cudaMallocHost(&w->h_buf, host), "cudaMallocHost (pinned buffers)", NULL, err, cap)) {
        cuda_worker_destroy(vctx, w);
        return NULL;
    }
    unsigned char *db = w->d_buf, *hb = w->h_buf;
    w->d_z = (float *)(db + o_z);
    w->d_first = (float *)(db + o_first);
    w->d_ping = (float *)(db + o_ping);
    w->d_pong = (float *)(db + o_pong);
    w->d_vec = (float *)(db + o_vec);
    w->d_logits = (float *)(db + o_logits);
    w->d_probs = (float *)(db + o_probs);
    w->d_zb = bf16 ? (uint16_t *)(db + o_zb) : NULL;
    w->d_xb = bf16 ? (uint16_t *)(db + o_xb) : NULL;
    w->h_z = (float *)(hb + o_hz);
    w->h_vec = (float *)(hb + o_hvec);
    w->h_probs = (float *)(hb + o_hprobs);
    return w;
}

static bool cuda_worker_fits(const void *vworker, const pgcl_model *m) {
    const cuda_worker *w = vworker;
    return m->D <= w->D && m->fast.n_first <= w->n_first && m->max_hidden <= w->max_hidden && m->d <= w->d &&
           m->K <= w->K && m->H <= w->H;
}

/* ------------------------------------------------------------------------------------------------
 * The forward pass */

static int cuda_act(pgcl_activation a) {
    switch (a) {
    case PGCL_ACT_LEAKY_RELU: return PGCL_CUDA_ACT_LEAKY_RELU;
    case PGCL_ACT_RELU: return PGCL_CUDA_ACT_RELU;
    case PGCL_ACT_IDENTITY: break;
    }
    return PGCL_CUDA_ACT_IDENTITY;
}

/* Y (r, n_out) = X (r, n_in) · Wᵀ with everything row-major and W stored (n_out, n_in) as
 * PyTorch's Linear stores it; ld_x and ld_y are the row strides of X and Y.
 *
 * cuBLAS is column-major, and a row-major (a, b) matrix is, read column-major, its (b, a)
 * transpose. So we ask cuBLAS for Yᵀ (n_out, r) = W · Xᵀ, which it writes as the column-major
 * (n_out, r) matrix with ldc = ld_y: exactly row-major Y. The stored W is, to cuBLAS, Wᵀ (n_in,
 * n_out) with lda = n_in, so op(A) = T gives W; the stored X is Xᵀ (n_in, r) with ldb = ld_x, used
 * as is: op(B) = N. Hence (OP_T, OP_N, m = n_out, n = r, k = n_in), as llm.c does for inp @ weight.T.
 * In BF16 mode (Wb, Xb given) the same call goes through cublasGemmEx with BF16 A and B, an FP32 C
 * and FP32 accumulation (CUBLAS_COMPUTE_32F). */
static cublasStatus_t linear(cuda_worker *w, int r, int n_out, int n_in, const float *W, const float *X, int ld_x,
                             const uint16_t *Wb, const uint16_t *Xb, int ld_xb, float *Y, int ld_y) {
    const float one = 1.0f, zero = 0.0f;
    if (Wb && Xb)
        return cublasGemmEx(w->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, r, n_in, &one, Wb, CUDA_R_16BF, n_in, Xb,
                            CUDA_R_16BF, ld_xb, &zero, Y, CUDA_R_32F, ld_y, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublasSgemm(w->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, r, n_in, &one, W, n_in, X, ld_x, &zero, Y, ld_y);
}

/* r <= max_rows rows. Returns PGCL_OK or the failure with its text in err. */
static pgcl_status forward_chunk(const cuda_ctx *ctx, cuda_worker *w, const pgcl_model *m, const cuda_model *cm,
                                 const float *z, int r, float *vectors, float *probs, char *err, int cap) {
    const pgcl_weights *raw = &m->raw;
    const int D = m->D, d = m->d, K = m->K, H = m->H, nf = m->fast.n_first, h1 = raw->layers[0].n_out;
    const int L = raw->n_layers;
    const bool bf16 = ctx->prec == PREC_BF16;
    const cudaStream_t s = w->stream;
    pgcl_status st = PGCL_ERR_IO;

    memcpy(w->h_z, z, (size_t)r * D * sizeof(float));
    if (!cuda_ok(cudaMemcpyAsync(w->d_z, w->h_z, (size_t)r * D * sizeof(float), cudaMemcpyHostToDevice, s),
                 "copy of the inputs", &st, err, cap))
        return st;
    if (bf16 && !cuda_ok(pgcl_cuda_to_bf16(w->d_z, w->d_zb, (size_t)r * D, s), "to_bf16 kernel", &st, err, cap))
        return st;

    /* first (r, h1+K) = z (r, D) · w_firstᵀ, w_first stored (h1+K, D); see linear(). */
    if (!blas_ok(linear(w, r, nf, D, cm->w_first, w->d_z, D, cm->w_first_bf16, w->d_zb, D, w->d_first, nf),
                 "GEMM first layer", &st, err, cap))
        return st;
    /* Bias on every column; activation on layer 0's h1 columns only (the K score columns are not a layer). */
    const pgcl_layer *L0 = &raw->layers[0];
    if (!cuda_ok(pgcl_cuda_bias_act(w->d_first, r, nf, nf, cm->b_first, h1, cuda_act(L0->act), L0->slope,
                                    bf16 && L > 1 ? w->d_xb : NULL, h1, s),
                 "bias_act kernel", &st, err, cap))
        return st;

    const float *in = w->d_first;
    int ld_in = nf;
    float *out = w->d_ping;
    for (int l = 1; l < L; l++) {
        const pgcl_layer *Ll = &raw->layers[l];
        /* out (r, n_out) = in (r, n_in) · w[l]ᵀ, w[l] stored (n_out, n_in); in BF16 the input is the
         * packed copy d_xb (ld n_in) that the previous kernel wrote. */
        if (!blas_ok(linear(w, r, Ll->n_out, Ll->n_in, cm->w[l], in, ld_in, cm->w_bf16[l], w->d_xb, Ll->n_in, out,
                            Ll->n_out),
                     "GEMM hidden layer", &st, err, cap))
            return st;
        if (!cuda_ok(pgcl_cuda_bias_act(out, r, Ll->n_out, Ll->n_out, cm->b[l], Ll->n_out, cuda_act(Ll->act), Ll->slope,
                                        bf16 && l < L - 1 ? w->d_xb : NULL, Ll->n_out, s),
                     "bias_act kernel", &st, err, cap))
            return st;
        in = out;
        ld_in = Ll->n_out;
        out = out == w->d_ping ? w->d_pong : w->d_ping;
    }
    if (!cuda_ok(pgcl_cuda_attend_fuse(w->d_first + h1, nf, in, ld_in, cm->s_scale, cm->s_shift, cm->v_scaled, r, d, K,
                                       w->d_vec, s),
                 "attend_fuse kernel", &st, err, cap))
        return st;
    /* logits (r, H) = e (r, d) · head_wᵀ, head_w stored (H, d): FP32 in every precision (TF32
     * math on a TF32 handle). */
    if (!blas_ok(linear(w, r, H, d, cm->head_w, w->d_vec, d, NULL, NULL, 0, w->d_logits, H), "GEMM head", &st, err,
                 cap) ||
        !cuda_ok(pgcl_cuda_head_probs(w->d_logits, cm->head_b, r, H, K, w->d_probs, s), "head_probs kernel", &st,
                 err, cap) ||
        !cuda_ok(cudaMemcpyAsync(w->h_vec, w->d_vec, (size_t)r * d * sizeof(float), cudaMemcpyDeviceToHost, s),
                 "copy of the vectors", &st, err, cap) ||
        !cuda_ok(cudaMemcpyAsync(w->h_probs, w->d_probs, (size_t)r * K * sizeof(float), cudaMemcpyDeviceToHost, s),
                 "copy of the probabilities", &st, err, cap) ||
        !cuda_ok(cudaStreamSynchronize(s), "forward pass", &st, err, cap))
        return st;
    memcpy(vectors, w->h_vec, (size_t)r * d * sizeof(float));
    memcpy(probs, w->h_probs, (size_t)r * K * sizeof(float));
    return PGCL_OK;
}

static pgcl_status cuda_forward(void *vctx, void *vworker, const pgcl_model *m, void *state, const float *z, int n,
                                float *vectors, float *probs) {
    const cuda_ctx *ctx = vctx;
    cuda_worker *w = vworker;
    char err[512];
    pgcl_status st = PGCL_ERR_IO;
    if (!cuda_ok(cudaSetDevice(ctx->device), "cudaSetDevice", &st, err, sizeof err)) goto fail;
    for (int done = 0; done < n; done += w->max_rows) {
        int r = n - done < w->max_rows ? n - done : w->max_rows;
        st = forward_chunk(ctx, w, m, state, z + (size_t)done * m->D, r, vectors + (size_t)done * m->d,
                           probs + (size_t)done * m->K, err, sizeof err);
        if (st != PGCL_OK) goto fail;
    }
    return PGCL_OK;
fail:
    pgcl_log_error("cuda:%d: model %s/%s: %s", ctx->device, m->name, m->version, err);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * The backend */

static void cuda_destroy(void *vctx) { free(vctx); }

static const pgcl_backend_ops cuda_ops = {
    .kind = "cuda",
    .destroy = cuda_destroy,
    .worker_create = cuda_worker_create,
    .worker_destroy = cuda_worker_destroy,
    .worker_fits = cuda_worker_fits,
    .model_prepare = cuda_model_prepare,
    .model_release = cuda_model_release,
    .forward = cuda_forward,
};

int pgcl_cuda_device_count(char *why, int cap) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        pgcl_errorf(why, cap, "no usable CUDA device (cudaGetDeviceCount: %s, %s%s)", cudaGetErrorName(e),
                    cudaGetErrorString(e),
                    e == cudaErrorInsufficientDriver ? "; no NVIDIA driver is loaded, or it is older than this build's "
                                                       "CUDA runtime"
                                                     : "");
        return 0;
    }
    if (n == 0) pgcl_errorf(why, cap, "the CUDA driver reports no device");
    return n;
}

pgcl_backend *pgcl_backend_cuda_create(int device, const char *precision, char *err, int cap) {
    cuda_precision prec = PREC_FP32;
    if (precision) {
        int i = 0;
        while (i < 3 && strcmp(precision, g_prec_names[i]) != 0) i++;
        if (i == 3) {
            pgcl_errorf(err, cap, "unknown CUDA precision '%s' (fp32, tf32 or bf16)", precision);
            return NULL;
        }
        prec = (cuda_precision)i;
    }
    char why[256];
    int count = pgcl_cuda_device_count(why, sizeof why);
    if (count == 0) {
        pgcl_errorf(err, cap, "cuda:%d: %s", device, why);
        return NULL;
    }
    if (device < 0 || device >= count) {
        pgcl_errorf(err, cap, "cuda:%d: no such device (the driver reports %d: cuda:0 to cuda:%d)", device, count,
                    count - 1);
        return NULL;
    }
    struct cudaDeviceProp prop;
    if (!cuda_ok(cudaSetDevice(device), "cudaSetDevice", NULL, why, sizeof why) ||
        !cuda_ok(cudaFree(NULL), "creating the CUDA context", NULL, why, sizeof why) ||
        !cuda_ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", NULL, why, sizeof why)) {
        pgcl_errorf(err, cap, "cuda:%d: %s", device, why);
        return NULL;
    }
    if (prec != PREC_FP32 && prop.major < 8) {
        pgcl_errorf(err, cap, "cuda:%d: %s needs compute capability 8.0 or newer (%s is %d.%d)", device,
                    g_prec_names[prec], prop.name, prop.major, prop.minor);
        return NULL;
    }
    /* The kernels are compiled for sm_90 with compute_90 PTX (gpu/meson.build): launch one now so a
     * device they cannot run on fails at start-up, not on the first request. */
    void *probe = NULL;
    if (!cuda_ok(cudaMalloc(&probe, 256), "cudaMalloc", NULL, why, sizeof why) ||
        !cuda_ok(pgcl_cuda_to_bf16(probe, (uint16_t *)probe + 64, 1, 0), "test launch of a kernel", NULL, why,
                 sizeof why) ||
        !cuda_ok(cudaDeviceSynchronize(), "test launch of a kernel", NULL, why, sizeof why)) {
        if (probe) cudaFree(probe);
        pgcl_errorf(err, cap, "cuda:%d (%s, compute capability %d.%d): %s; gpu/meson.build sets the target "
                    "architectures", device, prop.name, prop.major, prop.minor, why);
        return NULL;
    }
    cudaFree(probe);

    cuda_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    ctx->device = device;
    ctx->prec = prec;
    char name[192];
    snprintf(name, sizeof name, "cuda:%d (%.96s, sm_%d%d, %.1f GiB, %s)", device, prop.name, prop.major, prop.minor,
             (double)prop.totalGlobalMem / (double)(1u << 30), g_prec_names[prec]);
    pgcl_backend *b = pgcl_backend_new(&cuda_ops, ctx, name);
    if (!b) pgcl_errorf(err, cap, "out of memory");
    return b;
}
