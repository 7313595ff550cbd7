/* The packed-weight kernel (core/model/gemm_packed.h) and the batch-independence of pgcl_forward:
 *  (a) every kernel against a naive double-precision oracle on the unpacked weights, within the
 *      rounding bound of an n_in-term fused sum (|err| <= (n_in + 1) · 2⁻²⁴ · Σ|x·w|), on odd
 *      shapes: r = 1..9, 63, 64, 65, n_in not a multiple of 8, n_out not a multiple of the panel;
 *  (b) bit identity: every row of an r-row product equals that row computed alone, for r = 1..70
 *      and larger (1..17 and 63..65 on the model-sized shapes), with row strides wider than the
 *      matrices;
 *      the AVX2 kernel equals the scalar fmaf kernel bit for bit (skipped where the CPU lacks AVX2);
 *  (c) through the model: pgcl_forward of a batch equals each row alone (memcmp of vectors and
 *      probabilities) on every committed checkpoint, for several batch sizes and scratch sizes. */
#include <math.h>
#include <stdint.h>

#include "gemm_packed.h"
#include "model.h"
#include "test_util.h"

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1), with a sprinkle of exact zeros and of values of very different magnitude. */
static float next_value(void) {
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t bits = g_seed >> 11;
    double u = (double)bits / 9007199254740992.0 * 2.0 - 1.0;
    switch ((bits >> 3) % 23) {
    case 0:
        return 0.0f;
    case 1:
        return (float)(u * 1e3);
    case 2:
        return (float)(u * 1e-4);
    default:
        return (float)u;
    }
}

static float *random_matrix(int rows, int cols, int ld) {
    float *a = malloc(sizeof(float) * (size_t)rows * (size_t)ld);
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < ld; k++)
            a[(size_t)i * ld + k] = k < cols ? next_value() : NAN; /* padding: poison */
    return a;
}

static const float SENTINEL = -12345.0f;

static float *sentinel_matrix(int rows, int ld) {
    float *y = malloc(sizeof(float) * (size_t)rows * (size_t)ld);
    for (size_t i = 0; i < (size_t)rows * (size_t)ld; i++)
        y[i] = SENTINEL;
    return y;
}

typedef struct shape {
    int n_out, n_in;
} shape;

static const shape g_shapes[] = {{1, 1},    {7, 3},    {8, 8},     {9, 17},     {16, 5},    {17, 31}, {65, 33},
                                 {23, 257}, {64, 513}, {130, 600}, {514, 1024}, {256, 512}, {64, 256}};
#define N_SHAPES ((int)(sizeof g_shapes / sizeof g_shapes[0]))

static int n_isas(pgcl_gemm_isa *isas) {
    int n = 0;
    isas[n++] = PGCL_GEMM_SCALAR;
    if (pgcl_gemm_isa_supported(PGCL_GEMM_AVX2)) isas[n++] = PGCL_GEMM_AVX2;
    return n;
}

/* (a) against the double oracle. */
/* The model-sized shapes take most of the time (under ASan too): fewer row counts for them. */
static bool is_large(shape sh) {
    return (long)sh.n_out * sh.n_in > 100000;
}

static void test_oracle(void) {
    static const int rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 63, 64, 65};
    pgcl_gemm_isa isas[2];
    int ni = n_isas(isas);
    for (int s = 0; s < N_SHAPES; s++) {
        const int n_out = g_shapes[s].n_out, n_in = g_shapes[s].n_in;
        float *w = random_matrix(n_out, n_in, n_in);
        pgcl_packed_matrix *p = pgcl_packed_create(w, n_out, n_in);
        CHECK(p && p->n_panels == (n_out + 7) / 8, "pack %dx%d", n_out, n_in);
        if (!p) continue;
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int r = rows[ri], ldx = n_in + 3, ldy = n_out + 5;
            if (is_large(g_shapes[s]) && r != 1 && r != 7 && r != 65) continue;
            float *x = random_matrix(r, n_in, ldx);
            for (int t = 0; t < ni; t++) {
                float *y = sentinel_matrix(r, ldy);
                pgcl_packed_gemm_isa(isas[t], p, x, ldx, r, y, ldy);
                int bad = 0;
                for (int i = 0; i < r; i++) {
                    for (int o = 0; o < n_out; o++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < n_in; k++) {
                            double term = (double)x[(size_t)i * ldx + k] * w[(size_t)o * n_in + k];
                            ref += term;
                            mag += fabs(term);
                        }
                        double tol = (n_in + 1) * ldexp(1.0, -24) * mag + 1e-30;
                        double got = y[(size_t)i * ldy + o];
                        if (!(fabs(got - ref) <= tol) && bad++ < 3)
                            CHECK(0, "%s %dx%d r=%d y[%d][%d] = %.9g, oracle %.9g (tol %.3g)",
                                  pgcl_gemm_isa_str(isas[t]), n_out, n_in, r, i, o, got, ref, tol);
                    }
                    for (int o = n_out; o < ldy; o++)
                        if (y[(size_t)i * ldy + o] != SENTINEL && bad++ < 3)
                            CHECK(0, "%s %dx%d r=%d wrote padding column %d", pgcl_gemm_isa_str(isas[t]), n_out, n_in,
                                  r, o);
                }
                CHECK(bad == 0, "%s %dx%d r=%d: %d elements off", pgcl_gemm_isa_str(isas[t]), n_out, n_in, r, bad);
                free(y);
            }
            free(x);
        }
        pgcl_packed_destroy(p);
        free(w);
    }
}

/* (b) a batch's rows equal the rows alone, and the AVX2 kernel equals the scalar one, bit for bit. */
static void test_bit_identity(void) {
    pgcl_gemm_isa isas[2];
    int ni = n_isas(isas);
    if (ni < 2) printf("test_gemm_packed: no AVX2+FMA on this CPU; AVX2 = scalar not checked\n");
    static const int big_rows[] = {96, 127, 128, 200, 257};
    for (int s = 0; s < N_SHAPES; s++) {
        const bool large = is_large(g_shapes[s]);
        const int n_out = g_shapes[s].n_out, n_in = g_shapes[s].n_in, r_max = large ? 80 : 257, ldx = n_in + 1,
                  ldy = n_out + 2;
        float *w = random_matrix(n_out, n_in, n_in);
        float *x = random_matrix(r_max, n_in, ldx);
        pgcl_packed_matrix *p = pgcl_packed_create(w, n_out, n_in);
        float *alone = sentinel_matrix(r_max, ldy), *scalar = sentinel_matrix(r_max, ldy),
              *batch = sentinel_matrix(r_max, ldy);
        for (int t = 0; t < ni; t++) /* each row alone, at its own place in `alone` */
            for (int i = 0; i < r_max; i++)
                pgcl_packed_gemm_isa(isas[t], p, x + (size_t)i * ldx, ldx, 1, (t ? alone : scalar) + (size_t)i * ldy,
                                     ldy);
        if (ni == 2)
            CHECK(memcmp(alone, scalar, sizeof(float) * (size_t)r_max * ldy) == 0, "%dx%d: avx2 != scalar", n_out,
                  n_in);
        else
            memcpy(alone, scalar, sizeof(float) * (size_t)r_max * ldy);
        for (int t = 0; t < ni; t++) {
            const int n_r = large ? 20 : 70 + (int)(sizeof big_rows / sizeof big_rows[0]);
            for (int r = 1; r <= n_r; r++) {
                const int rr = !large ? (r <= 70 ? r : big_rows[r - 71]) : r <= 17 ? r : 63 + (r - 18); /* 63..65 */
                /* the rows [off, off + rr) as one batch; off moves so that rows sit at varied places */
                const int off = (r * 7) % (r_max - rr + 1);
                pgcl_packed_gemm_isa(isas[t], p, x + (size_t)off * ldx, ldx, rr, batch + (size_t)off * ldy, ldy);
                CHECK(memcmp(batch + (size_t)off * ldy, alone + (size_t)off * ldy, sizeof(float) * (size_t)rr * ldy) ==
                          0,
                      "%s %dx%d: a batch of %d rows (from row %d) differs from its rows alone",
                      pgcl_gemm_isa_str(isas[t]), n_out, n_in, rr, off);
            }
        }
        pgcl_packed_destroy(p);
        free(w), free(x), free(alone), free(scalar), free(batch);
    }
}

/* (c) through the model. */
static const char *const g_models[] = {"tests/fixtures/models/tiny_binary/1", "tests/fixtures/models/tiny_multi/1",
                                       "tests/fixtures/models/tiny_ordinal/1", "models/toxicity/1",
                                       "models/emotions/1"};

static void test_forward_batches(const char *dir) {
    pgcl_model *m = NULL;
    char err[1024];
    pgcl_status st = pgcl_model_load(source_path(dir), "m", "1", &m, err, sizeof err);
    CHECK(st == PGCL_OK, "%s: %s", dir, err);
    if (st != PGCL_OK) return;
    const int n_max = 150, D = m->D, d = m->d, K = m->K;
    float *z = malloc(sizeof(float) * (size_t)n_max * D);
    for (size_t i = 0; i < (size_t)n_max * D; i++)
        z[i] = next_value() * 0.05f;
    float *v1 = malloc(sizeof(float) * (size_t)n_max * d), *p1 = malloc(sizeof(float) * (size_t)n_max * K);
    float *vb = malloc(sizeof(float) * (size_t)n_max * d), *pb = malloc(sizeof(float) * (size_t)n_max * K);
    pgcl_scratch *one = pgcl_scratch_create(m, 1);
    for (int i = 0; i < n_max; i++)
        pgcl_forward(m, one, z + (size_t)i * D, 1, v1 + (size_t)i * d, p1 + (size_t)i * K);
    static const int scratch_rows[] = {7, 64, 256};
    static const int batches[] = {2, 3, 5, 6, 7, 8, 9, 13, 31, 63, 64, 65, 100, 150};
    for (size_t si = 0; si < sizeof scratch_rows / sizeof scratch_rows[0]; si++) {
        pgcl_scratch *s = pgcl_scratch_create(m, scratch_rows[si]);
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            const int n = batches[bi], off = (n * 5) % (n_max - n + 1);
            pgcl_forward(m, s, z + (size_t)off * D, n, vb, pb);
            CHECK(memcmp(vb, v1 + (size_t)off * d, sizeof(float) * (size_t)n * d) == 0,
                  "%s: vectors of a batch of %d (rows %d.., scratch %d) differ from the rows alone", dir, n, off,
                  scratch_rows[si]);
            CHECK(memcmp(pb, p1 + (size_t)off * K, sizeof(float) * (size_t)n * K) == 0,
                  "%s: probabilities of a batch of %d (rows %d.., scratch %d) differ from the rows alone", dir, n, off,
                  scratch_rows[si]);
        }
        pgcl_scratch_destroy(s);
    }
    /* and the fast path still agrees with the oracle (as test_model checks more thoroughly) */
    float vr[1024], pr[1024];
    for (int i = 0; i < 5; i++) {
        pgcl_forward_reference(m, z + (size_t)i * D, vr, pr);
        for (int j = 0; j < d; j++)
            CHECK(fabsf(vr[j] - v1[(size_t)i * d + j]) <= 1e-4f, "%s: row %d vector[%d] %.9g vs oracle %.9g", dir, i, j,
                  v1[(size_t)i * d + j], vr[j]);
    }
    pgcl_scratch_destroy(one);
    free(z), free(v1), free(p1), free(vb), free(pb);
    pgcl_model_release(m);
}

int main(void) {
    printf("test_gemm_packed: best kernel %s\n", pgcl_gemm_isa_str(pgcl_gemm_best_isa()));
    test_oracle();
    test_bit_identity();
    for (size_t i = 0; i < sizeof g_models / sizeof g_models[0]; i++)
        test_forward_batches(g_models[i]);
    return test_finish("test_gemm_packed");
}
