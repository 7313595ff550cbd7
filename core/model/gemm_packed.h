/* The CPU forward pass's matrix product: Y (r, n_out) = X (r, n_in) · Wᵀ, W stored (n_out, n_in) as
 * PyTorch stores Linear weights, with W packed once at model load into panels of 8 output columns
 * laid out contiguously along the input dimension (what an 8-lane AVX2 FMA wants), so that a call
 * packs nothing, whatever r is (OpenBLAS packs the whole of W on every call, which dominated the
 * cost for 1 to 7 rows).
 *
 * The bit-identity contract: every output element y[i][o] is computed by the same sequence of
 * floating-point operations whatever r is, wherever row i sits in the batch and whichever kernel
 * runs (AVX2 or scalar):
 *     acc = +0.0f;  for k = 0, 1, ..., n_in - 1:  acc = fmaf(x[i][k], w[o][k], acc);  y[i][o] = acc
 * one fused multiply-add per input, one accumulator per output element, in increasing k. The
 * kernels differ only in how many elements they carry at once (row and column blocking, blocking
 * along k with the accumulator stored to y and loaded back, which is exact), never in that
 * sequence. So an item's result is the same bits scored alone or coalesced into any batch, and the
 * AVX2 kernel equals the portable scalar one (fmaf in the same order) bit for bit; tests/core/
 * test_gemm_packed.c checks both, and both against a double-precision oracle.
 *
 * A pgcl_packed_matrix is immutable after pgcl_packed_create() and may be used by any number of
 * threads at once; the kernels allocate nothing. */
#ifndef PGCL_GEMM_PACKED_H
#define PGCL_GEMM_PACKED_H

#include <stdbool.h>

#define PGCL_PANEL_WIDTH 8 /* output columns per panel: one AVX2 register of floats */

typedef enum { PGCL_GEMM_SCALAR, PGCL_GEMM_AVX2 } pgcl_gemm_isa;

typedef struct pgcl_packed_matrix {
    int n_out, n_in;
    int n_panels;  /* ceil(n_out / 8) */
    float *panels; /* (n_panels, n_in, 8), 64-byte aligned: panels[(p * n_in + k) * 8 + c] = w[8p + c][k],
                      0 for 8p + c >= n_out */
} pgcl_packed_matrix;

/* Packs w (n_out, n_in), row-major. Returns NULL when out of memory or a dimension is < 1. */
pgcl_packed_matrix *pgcl_packed_create(const float *w, int n_out, int n_in);
void pgcl_packed_destroy(pgcl_packed_matrix *p); /* accepts NULL */

/* The fastest kernel this CPU runs (AVX2 needs avx2 and fma), and its name ("avx2", "scalar"). */
pgcl_gemm_isa pgcl_gemm_best_isa(void);
const char *pgcl_gemm_isa_str(pgcl_gemm_isa isa);
/* True when this CPU can run the kernel. */
bool pgcl_gemm_isa_supported(pgcl_gemm_isa isa);

/* y (r, n_out), row stride ldy = x (r, n_in), row stride ldx, · wᵀ with the best kernel; r >= 0,
 * ldx >= n_in, ldy >= n_out, y must not overlap x. Writes only the first n_out columns of each row. */
void pgcl_packed_gemm(const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y, int ldy);

/* The same with a chosen kernel, which must be supported (aborts otherwise). Same bits. */
void pgcl_packed_gemm_isa(pgcl_gemm_isa isa, const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y,
                          int ldy);

#endif
