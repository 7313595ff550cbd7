/* The PGCL forward pass: the fast path on folded constants (its matrix products by the packed-weight
 * kernel of gemm_packed.h), and the naive oracle on the checkpoint's own tensors. Both implement
 * docs/checkpoint-format.md "What pgcld computes".
 *
 * Every step of the fast path works on one row at a time with an order of operations fixed by the
 * model alone (the GEMMs by gemm_packed.h's contract, the element-wise and per-row steps by
 * construction), so a row's output bits do not depend on the batch it was computed in. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_packed.h"
#include "model.h"

#define NORM_EPS 1e-12 /* as torch.nn.functional.normalize */

struct pgcl_scratch {
    int max_rows;
    int n_first, max_hidden;
    float *first; /* (max_rows, h1 + K): layer-0 pre-activations, then attention scores */
    float *ping;  /* (max_rows, max_hidden) */
    float *pong;  /* (max_rows, max_hidden) */
};

pgcl_scratch *pgcl_scratch_create(const pgcl_model *m, int max_rows) {
    if (max_rows < 1) return NULL;
    pgcl_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->max_rows = max_rows;
    s->n_first = m->fast.n_first;
    s->max_hidden = m->max_hidden;
    size_t nf = (size_t)max_rows * (size_t)s->n_first, nh = (size_t)max_rows * (size_t)s->max_hidden;
    s->first = aligned_alloc(64, ((nf * sizeof(float) + 63) / 64) * 64);
    s->ping = aligned_alloc(64, ((nh * sizeof(float) + 63) / 64) * 64);
    s->pong = aligned_alloc(64, ((nh * sizeof(float) + 63) / 64) * 64);
    if (!s->first || !s->ping || !s->pong) {
        pgcl_scratch_destroy(s);
        return NULL;
    }
    return s;
}

void pgcl_scratch_destroy(pgcl_scratch *s) {
    if (!s) return;
    free(s->first);
    free(s->ping);
    free(s->pong);
    free(s);
}

int pgcl_scratch_rows(const pgcl_scratch *s) { return s->max_rows; }

bool pgcl_scratch_fits(const pgcl_scratch *s, const pgcl_model *m) {
    return s->n_first >= m->fast.n_first && s->max_hidden >= m->max_hidden;
}

static inline float activate(pgcl_activation act, float slope, float x) {
    switch (act) {
    case PGCL_ACT_LEAKY_RELU: return x >= 0 ? x : x * slope;
    case PGCL_ACT_RELU: return x > 0 ? x : 0;
    case PGCL_ACT_IDENTITY: break;
    }
    return x;
}

/* Adds bias (n_out) and applies the activation to the first n_out columns of each of r rows. */
static void bias_act(float *y, int r, int n_out, int ld, const float *bias, pgcl_activation act, float slope) {
    for (int i = 0; i < r; i++) {
        float *row = y + (size_t)i * ld;
        for (int j = 0; j < n_out; j++) row[j] = activate(act, slope, row[j] + bias[j]);
    }
}

/* Writes probabilities (K) from a head applied to the unit vector e (d). */
static void head_probs(const pgcl_model *m, const float *e, float *probs) {
    const int d = m->d;
    if (m->task == PGCL_TASK_BINARY) {
        float logit = m->raw.head_b[0];
        for (int j = 0; j < d; j++) logit += m->raw.head_w[j] * e[j];
        float p = 1.0f / (1.0f + expf(-logit));
        probs[0] = 1.0f - p;
        probs[1] = p;
        return;
    }
    float mx = -INFINITY;
    for (int k = 0; k < m->K; k++) {
        float logit = m->raw.head_b[k];
        for (int j = 0; j < d; j++) logit += m->raw.head_w[(size_t)k * d + j] * e[j];
        probs[k] = logit;
        if (logit > mx) mx = logit;
    }
    float sum = 0;
    for (int k = 0; k < m->K; k++) sum += probs[k] = expf(probs[k] - mx);
    for (int k = 0; k < m->K; k++) probs[k] /= sum;
}

static void forward_chunk(const pgcl_model *m, pgcl_scratch *s, const float *z, int r, float *vectors,
                          float *probs) {
    const pgcl_weights *w = &m->raw;
    const pgcl_folded *f = &m->fast;
    const int D = m->D, d = m->d, K = m->K, h1 = w->layers[0].n_out, nf = f->n_first;

    /* first (r, h1+K) = z (r, D) · w_firstᵀ, w_first (h1+K, D) packed at load. Row-major throughout. */
    pgcl_packed_gemm(f->packed_first, z, D, r, s->first, nf);
    bias_act(s->first, r, nf, nf, f->b_first, PGCL_ACT_IDENTITY, 0);
    for (int i = 0; i < r; i++) {
        float *row = s->first + (size_t)i * nf;
        for (int j = 0; j < h1; j++) row[j] = activate(w->layers[0].act, w->layers[0].slope, row[j]);
    }
    const float *in = s->first;
    int ld_in = nf;
    float *out = s->ping;
    for (int l = 1; l < w->n_layers; l++) {
        const pgcl_layer *L = &w->layers[l];
        /* out (r, n_out) = in (r, n_in) · w[l]ᵀ, w[l] (n_out, n_in) packed at load. */
        pgcl_packed_gemm(f->packed[l], in, ld_in, r, out, L->n_out);
        bias_act(out, r, L->n_out, L->n_out, f->b[l], L->act, L->slope);
        in = out;
        ld_in = L->n_out;
        out = out == s->ping ? s->pong : s->ping;
    }
    /* Per row: attention over K prototypes, fusion with the semantic stream, normalisation, head. */
    for (int i = 0; i < r; i++) {
        const float *u = in + (size_t)i * ld_in;           /* (d) last layer, BatchNorm not yet applied */
        const float *score = s->first + (size_t)i * nf + h1; /* (K) q·Kpᵀ/√d */
        float a[1024];
        float mx = -INFINITY, sum = 0;
        for (int k = 0; k < K; k++) mx = score[k] > mx ? score[k] : mx;
        for (int k = 0; k < K; k++) sum += a[k] = expf(score[k] - mx);
        for (int k = 0; k < K; k++) a[k] /= sum;
        float *e = vectors + (size_t)i * d;
        float norm2 = 0;
        for (int j = 0; j < d; j++) {
            float v = f->s_scale[j] * u[j] + f->s_shift[j];
            for (int k = 0; k < K; k++) v += a[k] * f->v_scaled[(size_t)k * d + j];
            e[j] = v;
            norm2 += v * v;
        }
        float inv = 1.0f / fmaxf(sqrtf(norm2), (float)NORM_EPS);
        for (int j = 0; j < d; j++) e[j] *= inv;
        head_probs(m, e, probs + (size_t)i * K);
    }
}

void pgcl_forward(const pgcl_model *m, pgcl_scratch *s, const float *z, int n, float *vectors, float *probs) {
    for (int done = 0; done < n; done += s->max_rows) {
        int r = n - done < s->max_rows ? n - done : s->max_rows;
        forward_chunk(m, s, z + (size_t)done * m->D, r, vectors + (size_t)done * m->d, probs + (size_t)done * m->K);
    }
}

/* ---- the oracle ---- */

static double act_ref(pgcl_activation act, double slope, double x) {
    if (act == PGCL_ACT_LEAKY_RELU) return x >= 0 ? x : x * slope;
    if (act == PGCL_ACT_RELU) return x > 0 ? x : 0;
    return x;
}

void pgcl_forward_reference(const pgcl_model *m, const float *z, float *vector, float *probs) {
    const pgcl_weights *w = &m->raw;
    const int D = m->D, d = m->d, K = m->K;
    double *x = calloc((size_t)(m->max_hidden > D ? m->max_hidden : D), sizeof *x);
    double *y = calloc((size_t)(m->max_hidden > D ? m->max_hidden : D), sizeof *y);
    double *q = calloc((size_t)d, sizeof *q), *kp = calloc((size_t)K * d, sizeof *kp);
    double *vp = calloc((size_t)K * d, sizeof *vp), *a = calloc((size_t)K, sizeof *a), *e = calloc((size_t)d, sizeof *e);
    if (!x || !y || !q || !kp || !vp || !a || !e) abort(); /* test-only code */

    /* Semantic stream: each layer Linear -> activation -> BatchNorm (eval: running statistics). */
    for (int i = 0; i < D; i++) x[i] = z[i];
    for (int l = 0; l < w->n_layers; l++) {
        const pgcl_layer *L = &w->layers[l];
        for (int o = 0; o < L->n_out; o++) {
            double sum = L->b[o];
            for (int i = 0; i < L->n_in; i++) sum += (double)L->w[(size_t)o * L->n_in + i] * x[i];
            sum = act_ref(L->act, L->slope, sum);
            if (L->has_bn)
                sum = (sum - L->bn_mean[o]) / sqrt((double)L->bn_var[o] + (double)w->bn_eps) * L->bn_weight[o] +
                      L->bn_bias[o];
            y[o] = sum;
        }
        for (int o = 0; o < L->n_out; o++) x[o] = y[o];
    }
    /* Prototype stream: q = z·Wqᵀ + bq, K = C·Wkᵀ + bk, V = C·Wvᵀ + bv, a = softmax(q·Kᵀ/√d), m = a·V. */
    for (int j = 0; j < d; j++) {
        double sum = w->bq[j];
        for (int i = 0; i < D; i++) sum += (double)w->wq[(size_t)j * D + i] * z[i];
        q[j] = sum;
    }
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < d; j++) {
            double sk = w->bk[j], sv = w->bv[j];
            for (int t = 0; t < d; t++) {
                sk += (double)w->prototypes[k * d + t] * w->wk[j * d + t];
                sv += (double)w->prototypes[k * d + t] * w->wv[j * d + t];
            }
            kp[k * d + j] = sk;
            vp[k * d + j] = sv;
        }
    }
    double mx = -INFINITY, sum = 0;
    for (int k = 0; k < K; k++) {
        double sc = 0;
        for (int j = 0; j < d; j++) sc += q[j] * kp[k * d + j];
        a[k] = sc / sqrt((double)d);
        if (a[k] > mx) mx = a[k];
    }
    for (int k = 0; k < K; k++) sum += a[k] = exp(a[k] - mx);
    double norm2 = 0;
    for (int j = 0; j < d; j++) {
        double mj = 0;
        for (int k = 0; k < K; k++) mj += a[k] / sum * vp[k * d + j];
        e[j] = w->alpha * x[j] + (1.0 - w->alpha) * mj;
        norm2 += e[j] * e[j];
    }
    double inv = 1.0 / fmax(sqrt(norm2), NORM_EPS);
    for (int j = 0; j < d; j++) vector[j] = (float)(e[j] * inv);
    /* Head on the normalised vector. */
    if (m->task == PGCL_TASK_BINARY) {
        double logit = w->head_b[0];
        for (int j = 0; j < d; j++) logit += (double)w->head_w[j] * e[j] * inv;
        double p = 1.0 / (1.0 + exp(-logit));
        probs[0] = (float)(1.0 - p);
        probs[1] = (float)p;
    } else {
        double lmax = -INFINITY, lsum = 0;
        for (int k = 0; k < K; k++) {
            double logit = w->head_b[k];
            for (int j = 0; j < d; j++) logit += (double)w->head_w[(size_t)k * d + j] * e[j] * inv;
            a[k] = logit;
            if (logit > lmax) lmax = logit;
        }
        for (int k = 0; k < K; k++) lsum += a[k] = exp(a[k] - lmax);
        for (int k = 0; k < K; k++) probs[k] = (float)(a[k] / lsum);
    }
    free(x); free(y); free(q); free(kp); free(vp); free(a); free(e);
}
