/* Packed-weight matrix product of the CPU forward pass; see gemm_packed.h for the layout and the
 * bit-identity contract. Two kernels compute the same bits:
 *   - scalar: the contract written out with fmaf, one output element at a time. Portable, slow;
 *     the fallback on CPUs without AVX2+FMA and the oracle the AVX2 kernel is tested against;
 *   - AVX2+FMA: register-blocked microkernels of MR rows (1..6) × NP panels (1..8) of 8 columns,
 *     one ymm accumulator per (row, panel), each lane an output element's accumulator. Per k it
 *     loads the NP weight vectors once, broadcasts x[i][k] and issues MR × NP FMAs. Blocking along
 *     k (for more than 6 rows, so that a weight block stays in L1 while every row block passes
 *     over it) stores the accumulators to y and loads them back, which changes no bit.
 * Compiled with __attribute__((target)) so the rest of the build stays baseline x86-64; the kernel
 * is chosen at run time from cpuid. */
#include "gemm_packed.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define PGCL_HAVE_X86 1
#else
#define PGCL_HAVE_X86 0
#endif

/* Full unrolling of the loops over rows and panels (constant trip counts once micro_avx2 is
 * inlined), so that the accumulators live in registers; clang ignores GCC's spelling and needs "full". */
#if defined(__clang__)
#define UNROLL_FULL _Pragma("clang loop unroll(full)")
#else
#define UNROLL_FULL _Pragma("GCC unroll 8")
#endif

#define MR_MAX 6     /* rows per microkernel */
#define NP_MAX 8     /* panels per microkernel */
#define KC_BLOCK 512 /* inputs per k block when several row blocks share a weight block */

pgcl_packed_matrix *pgcl_packed_create(const float *w, int n_out, int n_in) {
    if (n_out < 1 || n_in < 1) return NULL;
    pgcl_packed_matrix *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_out = n_out;
    p->n_in = n_in;
    p->n_panels = (n_out + PGCL_PANEL_WIDTH - 1) / PGCL_PANEL_WIDTH;
    size_t n = (size_t)p->n_panels * (size_t)n_in * PGCL_PANEL_WIDTH;
    p->panels = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!p->panels) {
        free(p);
        return NULL;
    }
    for (int pi = 0; pi < p->n_panels; pi++) {
        float *panel = p->panels + (size_t)pi * (size_t)n_in * PGCL_PANEL_WIDTH;
        for (int k = 0; k < n_in; k++)
            for (int c = 0; c < PGCL_PANEL_WIDTH; c++) {
                int o = pi * PGCL_PANEL_WIDTH + c;
                panel[(size_t)k * PGCL_PANEL_WIDTH + c] = o < n_out ? w[(size_t)o * (size_t)n_in + (size_t)k] : 0.0f;
            }
    }
    return p;
}

void pgcl_packed_destroy(pgcl_packed_matrix *p) {
    if (!p) return;
    free(p->panels);
    free(p);
}

bool pgcl_gemm_isa_supported(pgcl_gemm_isa isa) {
    if (isa == PGCL_GEMM_SCALAR) return true;
#if PGCL_HAVE_X86
    if (isa == PGCL_GEMM_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return false;
}

pgcl_gemm_isa pgcl_gemm_best_isa(void) {
    return pgcl_gemm_isa_supported(PGCL_GEMM_AVX2) ? PGCL_GEMM_AVX2 : PGCL_GEMM_SCALAR;
}

const char *pgcl_gemm_isa_str(pgcl_gemm_isa isa) {
    switch (isa) {
    case PGCL_GEMM_SCALAR:
        return "scalar";
    case PGCL_GEMM_AVX2:
        return "avx2";
    }
    return "?";
}

/* ---- scalar: the contract, one output element at a time ---- */

static void gemm_scalar(const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y, int ldy) {
    for (int i = 0; i < r; i++) {
        const float *xi = x + (size_t)i * (size_t)ldx;
        for (int o = 0; o < w->n_out; o++) {
            /* column o of panel o / 8: stride 8 along k */
            const float *wo = w->panels + (size_t)(o / PGCL_PANEL_WIDTH) * (size_t)w->n_in * PGCL_PANEL_WIDTH +
                              (size_t)(o % PGCL_PANEL_WIDTH);
            float acc = 0.0f;
            for (int k = 0; k < w->n_in; k++)
                acc = fmaf(xi[k], wo[(size_t)k * PGCL_PANEL_WIDTH], acc);
            y[(size_t)i * (size_t)ldy + (size_t)o] = acc;
        }
    }
}

/* ---- AVX2 + FMA ---- */

#if PGCL_HAVE_X86
/* One microkernel call: MR rows × NP panels over inputs [k0, k1). */
typedef struct micro_args {
    const float *x; /* row block's first row, input 0; row stride ldx */
    int ldx;
    const float *w; /* first panel of the group, input 0; panels panel_stride floats apart */
    size_t panel_stride;
    float *y; /* row block's first row, the group's first column; row stride ldy */
    int ldy;
    int k0, k1;
    int last_cols; /* valid columns of the group's last panel, 1..8 (the others are not written) */
} micro_args;

__attribute__((target("avx2,fma"), always_inline)) static inline void micro_avx2(const int mr, const int np,
                                                                                 const micro_args *a) {
    __m256 acc[MR_MAX][NP_MAX];
    const __m256i last_mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(a->last_cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const bool last_partial = a->last_cols < PGCL_PANEL_WIDTH;
    UNROLL_FULL
    for (int i = 0; i < mr; i++) {
        UNROLL_FULL
        for (int p = 0; p < np; p++) {
            const float *yp = a->y + (size_t)i * (size_t)a->ldy + (size_t)p * PGCL_PANEL_WIDTH;
            if (a->k0 == 0)
                acc[i][p] = _mm256_setzero_ps();
            else if (p == np - 1 && last_partial)
                acc[i][p] = _mm256_maskload_ps(yp, last_mask);
            else
                acc[i][p] = _mm256_loadu_ps(yp);
        }
    }
    const float *xr[MR_MAX]; /* row i at input k0 */
    const float *wr[NP_MAX]; /* panel p at input k0 */
    UNROLL_FULL
    for (int i = 0; i < mr; i++)
        xr[i] = a->x + (size_t)i * (size_t)a->ldx + (size_t)a->k0;
    UNROLL_FULL
    for (int p = 0; p < np; p++)
        wr[p] = a->w + (size_t)p * a->panel_stride + (size_t)a->k0 * PGCL_PANEL_WIDTH;
    const size_t n_k = (size_t)(a->k1 - a->k0);
    for (size_t k = 0; k < n_k; k++) {
        UNROLL_FULL
        for (int i = 0; i < mr; i++) {
            const __m256 xb = _mm256_broadcast_ss(xr[i] + k);
            UNROLL_FULL
            for (int p = 0; p < np; p++)
                acc[i][p] = _mm256_fmadd_ps(xb, _mm256_load_ps(wr[p] + k * PGCL_PANEL_WIDTH), acc[i][p]);
        }
    }
    UNROLL_FULL
    for (int i = 0; i < mr; i++) {
        UNROLL_FULL
        for (int p = 0; p < np; p++) {
            float *yp = a->y + (size_t)i * (size_t)a->ldy + (size_t)p * PGCL_PANEL_WIDTH;
            if (p == np - 1 && last_partial)
                _mm256_maskstore_ps(yp, last_mask, acc[i][p]);
            else
                _mm256_storeu_ps(yp, acc[i][p]);
        }
    }
}

typedef void (*micro_fn)(const micro_args *a);

/* One specialised function per (MR, NP), so that the accumulators live in registers. */
#define MICRO(MR, NP)                                                                                                  \
    __attribute__((target("avx2,fma"))) static void micro_avx2_##MR##_##NP(const micro_args *a) {                      \
        micro_avx2(MR, NP, a);                                                                                         \
    }
#define MICRO_ROW(MR)                                                                                                  \
    MICRO(MR, 1) MICRO(MR, 2) MICRO(MR, 3) MICRO(MR, 4) MICRO(MR, 5) MICRO(MR, 6) MICRO(MR, 7) MICRO(MR, 8)
MICRO_ROW(1)
MICRO_ROW(2)
MICRO_ROW(3)
MICRO_ROW(4)
MICRO_ROW(5)
MICRO_ROW(6)
#define MICRO_NAME(MR, NP) micro_avx2_##MR##_##NP
#define MICRO_TABLE_ROW(MR)                                                                                            \
    {                                                                                                                  \
        MICRO_NAME(MR, 1), MICRO_NAME(MR, 2), MICRO_NAME(MR, 3), MICRO_NAME(MR, 4), MICRO_NAME(MR, 5),                 \
            MICRO_NAME(MR, 6), MICRO_NAME(MR, 7), MICRO_NAME(MR, 8)                                                    \
    }
static const micro_fn micro_table[MR_MAX][NP_MAX] = {MICRO_TABLE_ROW(1), MICRO_TABLE_ROW(2), MICRO_TABLE_ROW(3),
                                                     MICRO_TABLE_ROW(4), MICRO_TABLE_ROW(5), MICRO_TABLE_ROW(6)};

/* Panels per microkernel for a row block of MR rows: about 12 accumulators (of 16 ymm registers),
 * enough independent FMA chains to cover the FMA latency; one row is bound by memory anyway. */
static const int panels_for_rows[MR_MAX + 1] = {0, 8, 6, 4, 3, 2, 2};

/* Rows in nb = ceil(r / 6) blocks as even as possible (r = 8 is 4 + 4, r = 7 is 4 + 3, r = 64 is nine
 * of 6 and two of 5), so that every block keeps enough accumulators busy and the weights are read
 * in one pass; the panel grouping is the one of the largest block. With several row blocks the
 * inputs are taken KC_BLOCK at a time, so that a group's weight block stays in L1 while every row
 * block passes over it. */
static void gemm_avx2(const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y, int ldy) {
    const int n_blocks = (r + MR_MAX - 1) / MR_MAX, small = r / n_blocks, n_large = r % n_blocks;
    const int np = panels_for_rows[n_large ? small + 1 : small];
    const int kc = n_blocks == 1 ? w->n_in : KC_BLOCK;
    const size_t panel_stride = (size_t)w->n_in * PGCL_PANEL_WIDTH;
    for (int k0 = 0; k0 < w->n_in; k0 += kc) {
        const int k1 = w->n_in - k0 < kc ? w->n_in : k0 + kc;
        for (int p0 = 0; p0 < w->n_panels; p0 += np) {
            const int n_group = w->n_panels - p0 < np ? w->n_panels - p0 : np;
            const int last_cols =
                p0 + n_group == w->n_panels ? w->n_out - (w->n_panels - 1) * PGCL_PANEL_WIDTH : PGCL_PANEL_WIDTH;
            for (int b = 0, i0 = 0; b < n_blocks; b++) {
                const int mr = b < n_large ? small + 1 : small;
                const micro_args a = {.x = x + (size_t)i0 * (size_t)ldx,
                                      .ldx = ldx,
                                      .w = w->panels + (size_t)p0 * panel_stride,
                                      .panel_stride = panel_stride,
                                      .y = y + (size_t)i0 * (size_t)ldy + (size_t)p0 * PGCL_PANEL_WIDTH,
                                      .ldy = ldy,
                                      .k0 = k0,
                                      .k1 = k1,
                                      .last_cols = last_cols};
                micro_table[mr - 1][n_group - 1](&a);
                i0 += mr;
            }
        }
    }
}
#endif

void pgcl_packed_gemm_isa(pgcl_gemm_isa isa, const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y,
                          int ldy) {
    if (r < 0 || ldx < w->n_in || ldy < w->n_out || !pgcl_gemm_isa_supported(isa)) {
        fprintf(stderr, "pgcl_packed_gemm: bad call (isa %s, r %d, ldx %d, ldy %d, w %dx%d)\n", pgcl_gemm_isa_str(isa),
                r, ldx, ldy, w->n_out, w->n_in);
        abort(); /* a broken caller: its output would be garbage */
    }
    if (r == 0) return;
#if PGCL_HAVE_X86
    if (isa == PGCL_GEMM_AVX2) {
        gemm_avx2(w, x, ldx, r, y, ldy);
        return;
    }
#endif
    gemm_scalar(w, x, ldx, r, y, ldy);
}

void pgcl_packed_gemm(const pgcl_packed_matrix *w, const float *x, int ldx, int r, float *y, int ldy) {
    pgcl_packed_gemm_isa(pgcl_gemm_best_isa(), w, x, ldx, r, y, ldy);
}
