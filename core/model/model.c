/* Checkpoint loading: tensor binding and shape checks, folding of the constants the fast path
 * needs, verification of golden vectors, and the load itself; config.json's fields are parsed in
 * model_config.c (model_internal.h). The contract is in model.h; the format in
 * docs/checkpoint-format.md. */
#include "model.h"
#include "model_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsa_vocabulary.h"
#include "gemm_packed.h"
#include "ids.h"
#include "safetensors.h"

#define ERR_CAP 512
#define ARENA_ALIGN 16 /* floats: 64-byte alignment for BLAS */

const char *pgcl_task_str(pgcl_task t) {
    switch (t) {
    case PGCL_TASK_BINARY: return "binary";
    case PGCL_TASK_MULTICLASS: return "multiclass";
    case PGCL_TASK_ORDINAL: return "ordinal";
    }
    return "?";
}

const char *pgcl_decision_str(pgcl_decision d) {
    switch (d) {
    case PGCL_DECISION_ALLOW: return "allow";
    case PGCL_DECISION_REVIEW: return "review";
    case PGCL_DECISION_BLOCK: return "block";
    }
    return "?";
}

static float *arena_take(load_ctx *c, size_t n) {
    size_t padded = (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (padded > c->arena_left) return NULL; /* sizing bug: caught by the caller as NOMEM */
    float *p = c->arena_next;
    c->arena_next += padded;
    c->arena_left -= padded;
    return p;
}

static size_t arena_size(size_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

/* Binds tensor `name` with the expected shape, copying it to float32 in the arena. */
static pgcl_status bind_tensor(load_ctx *c, const char *name, int ndim, const int64_t *shape, float **out) {
    const pgcl_st_tensor *t = pgcl_safetensors_find(c->st, name);
    char want[64], got[64];
    pgcl_shape_str(shape, ndim, want, sizeof want);
    if (!t) {
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s' is missing (config expects shape %s)",
                    c->label, name, want);
        return PGCL_ERR_INVALID;
    }
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        pgcl_shape_str(t->shape, t->ndim, got, sizeof got);
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s': shape %s, config expects %s", c->label,
                    name, got, want);
        return PGCL_ERR_INVALID;
    }
    if (t->dtype != PGCL_DT_F32 && t->dtype != PGCL_DT_F16 && t->dtype != PGCL_DT_BF16) {
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s': dtype %s, weights must be F32, F16 or BF16",
                    c->label, name, pgcl_dtype_name(t->dtype));
        return PGCL_ERR_UNSUPPORTED;
    }
    if (c->dry_run) return PGCL_OK;
    float *dst = arena_take(c, (size_t)t->numel);
    if (!dst) return PGCL_ERR_NOMEM;
    char sub[ERR_CAP];
    pgcl_status st = pgcl_st_read_f32(t, dst, sub, sizeof sub);
    if (st != PGCL_OK) {
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: %s", c->label, sub);
        return st;
    }
    c->bound[c->n_bound++] = t->name;
    *out = dst;
    return PGCL_OK;
}

static pgcl_status bind_1d(load_ctx *c, const char *prefix, const char *suffix, int64_t n0, float **out) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", prefix, *suffix ? "." : "", suffix);
    int64_t shape[1] = {n0};
    return bind_tensor(c, name, 1, shape, out);
}

static pgcl_status bind_2d(load_ctx *c, const char *prefix, const char *suffix, int64_t n0, int64_t n1,
                           float **out) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", prefix, *suffix ? "." : "", suffix);
    int64_t shape[2] = {n0, n1};
    return bind_tensor(c, name, 2, shape, out);
}

/* Reads the layer list and the tensor names; sizes the arena; binds every tensor. */
static pgcl_status bind_weights(load_ctx *c) {
    pgcl_model *m = c->m;
    pgcl_weights *w = &m->raw;
    pgcl_status st;
    json_t *mlp = json_object_get(c->config, "semantic_mlp");
    if (!json_is_object(mlp)) return model_cfg_fail(c, "semantic_mlp", "must be an object");
    static const char *const mlp_keys[] = {"layers", "batchnorm_eps", NULL};
    if ((st = model_cfg_only(c, mlp, "semantic_mlp", mlp_keys))) return st;
    double eps;
    if ((st = model_cfg_real(c, mlp, "batchnorm_eps", "semantic_mlp.batchnorm_eps", 1e-30, 1, &eps))) return st;
    if (eps <= 0) return model_cfg_fail(c, "semantic_mlp.batchnorm_eps", "must be > 0");
    w->bn_eps = (float)eps;
    json_t *layers = json_object_get(mlp, "layers");
    if (!json_is_array(layers) || json_array_size(layers) < 1 || json_array_size(layers) > PGCL_MAX_LAYERS)
        return model_cfg_fail(c, "semantic_mlp.layers", "must be an array of 1 to 8 layers");
    w->n_layers = (int)json_array_size(layers);

    const char *lin_names[PGCL_MAX_LAYERS], *bn_names[PGCL_MAX_LAYERS];
    size_t raw_floats = 0, folded_floats = 0;
    int prev_out = m->D;
    m->max_hidden = 0;
    for (int i = 0; i < w->n_layers; i++) {
        json_t *l = json_array_get(layers, (size_t)i);
        char where[48], field[96];
        snprintf(where, sizeof where, "semantic_mlp.layers[%d]", i);
        if (!json_is_object(l)) return model_cfg_fail(c, where, "must be an object");
        static const char *const layer_keys[] = {"linear", "in", "out", "activation", "negative_slope",
                                                 "batchnorm", NULL};
        if ((st = model_cfg_only(c, l, where, layer_keys))) return st;
        pgcl_layer *L = &w->layers[i];
        snprintf(field, sizeof field, "%s.linear", where);
        if ((st = model_cfg_str(c, l, "linear", field, &lin_names[i]))) return st;
        snprintf(field, sizeof field, "%s.in", where);
        if ((st = model_cfg_int(c, l, "in", field, 1, 65536, &L->n_in))) return st;
        if (L->n_in != prev_out)
            return model_cfg_fail(c, field, i == 0 ? "must equal dims.D" : "must equal the previous layer's out");
        snprintf(field, sizeof field, "%s.out", where);
        if ((st = model_cfg_int(c, l, "out", field, 1, 65536, &L->n_out))) return st;
        if (i == w->n_layers - 1 && L->n_out != m->d)
            return model_cfg_fail(c, field, "of the last layer must equal dims.d");
        const char *act = "identity";
        snprintf(field, sizeof field, "%s.activation", where);
        if (json_object_get(l, "activation") && (st = model_cfg_str(c, l, "activation", field, &act))) return st;
        if (strcmp(act, "leaky_relu") == 0) L->act = PGCL_ACT_LEAKY_RELU;
        else if (strcmp(act, "relu") == 0) L->act = PGCL_ACT_RELU;
        else if (strcmp(act, "identity") == 0) L->act = PGCL_ACT_IDENTITY;
        else return model_cfg_fail(c, field, "must be \"leaky_relu\", \"relu\" or \"identity\"");
        double slope = 0.01;
        snprintf(field, sizeof field, "%s.negative_slope", where);
        if (json_object_get(l, "negative_slope")) {
            if (L->act != PGCL_ACT_LEAKY_RELU) return model_cfg_fail(c, field, "only applies to leaky_relu");
            if ((st = model_cfg_real(c, l, "negative_slope", field, 0, 1, &slope))) return st;
        }
        L->slope = (float)slope;
        bn_names[i] = NULL;
        snprintf(field, sizeof field, "%s.batchnorm", where);
        if (json_object_get(l, "batchnorm") && (st = model_cfg_str(c, l, "batchnorm", field, &bn_names[i]))) return st;
        L->has_bn = bn_names[i] != NULL;
        raw_floats += arena_size((size_t)L->n_out * (size_t)L->n_in) + arena_size((size_t)L->n_out) +
                      (L->has_bn ? 4 * arena_size((size_t)L->n_out) : 0);
        if (i > 0) folded_floats += arena_size((size_t)L->n_out * (size_t)L->n_in) + arena_size((size_t)L->n_out);
        if (L->n_out > m->max_hidden) m->max_hidden = L->n_out;
        prev_out = L->n_out;
    }

    json_t *att = json_object_get(c->config, "attention");
    if (!json_is_object(att)) return model_cfg_fail(c, "attention", "must be an object");
    static const char *const att_keys[] = {"query", "key", "value", "prototypes", "alpha", NULL};
    if ((st = model_cfg_only(c, att, "attention", att_keys))) return st;
    const char *q_name, *k_name, *v_name, *proto_name, *alpha_name, *head_name;
    if ((st = model_cfg_str(c, att, "query", "attention.query", &q_name))) return st;
    if ((st = model_cfg_str(c, att, "key", "attention.key", &k_name))) return st;
    if ((st = model_cfg_str(c, att, "value", "attention.value", &v_name))) return st;
    if ((st = model_cfg_str(c, att, "prototypes", "attention.prototypes", &proto_name))) return st;
    if ((st = model_cfg_str(c, att, "alpha", "attention.alpha", &alpha_name))) return st;
    json_t *head = json_object_get(c->config, "head");
    if (!json_is_object(head)) return model_cfg_fail(c, "head", "must be an object");
    static const char *const head_keys[] = {"linear", NULL};
    if ((st = model_cfg_only(c, head, "head", head_keys))) return st;
    if ((st = model_cfg_str(c, head, "linear", "head.linear", &head_name))) return st;

    size_t D = (size_t)m->D, d = (size_t)m->d, K = (size_t)m->K, H = (size_t)m->H;
    size_t h1 = (size_t)w->layers[0].n_out;
    raw_floats += arena_size(d * D) + arena_size(d) + 2 * (arena_size(d * d) + arena_size(d)) + arena_size(K * d) +
                  arena_size(1) + arena_size(H * d) + arena_size(H);
    folded_floats += arena_size((h1 + K) * D) + arena_size(h1 + K) + 2 * arena_size(d) + arena_size(K * d);
    size_t total = raw_floats + folded_floats;
    if (total > ((size_t)1 << 31)) return model_cfg_fail(c, "dims", "model is too large (over 8 GiB of weights)");
    c->bound = calloc((size_t)(6 * w->n_layers + 12), sizeof *c->bound);
    if (!c->bound) return PGCL_ERR_NOMEM;
    /* Twice: first (dry_run) only checking that every tensor exists with the shape and dtype the
     * config gives, before the arena sized from config.json alone is allocated, so that a small file
     * whose config declares huge dimensions is refused without allocating (and zeroing) gigabytes;
     * then binding. */
    c->dry_run = true;
bind:
    c->n_bound = 0;
    for (int i = 0; i < w->n_layers; i++) {
        pgcl_layer *L = &w->layers[i];
        if ((st = bind_2d(c, lin_names[i], "weight", L->n_out, L->n_in, &L->w))) return st;
        if ((st = bind_1d(c, lin_names[i], "bias", L->n_out, &L->b))) return st;
        if (L->has_bn) {
            if ((st = bind_1d(c, bn_names[i], "weight", L->n_out, &L->bn_weight))) return st;
            if ((st = bind_1d(c, bn_names[i], "bias", L->n_out, &L->bn_bias))) return st;
            if ((st = bind_1d(c, bn_names[i], "running_mean", L->n_out, &L->bn_mean))) return st;
            if ((st = bind_1d(c, bn_names[i], "running_var", L->n_out, &L->bn_var))) return st;
            for (int j = 0; !c->dry_run && j < L->n_out; j++) {
                if (L->bn_var[j] < 0) {
                    pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s.running_var': element %d is negative",
                                c->label, bn_names[i], j);
                    return PGCL_ERR_INVALID;
                }
            }
        }
    }
    if ((st = bind_2d(c, q_name, "weight", m->d, m->D, &w->wq))) return st;
    if ((st = bind_1d(c, q_name, "bias", m->d, &w->bq))) return st;
    if ((st = bind_2d(c, k_name, "weight", m->d, m->d, &w->wk))) return st;
    if ((st = bind_1d(c, k_name, "bias", m->d, &w->bk))) return st;
    if ((st = bind_2d(c, v_name, "weight", m->d, m->d, &w->wv))) return st;
    if ((st = bind_1d(c, v_name, "bias", m->d, &w->bv))) return st;
    if ((st = bind_2d(c, proto_name, "", m->K, m->d, &w->prototypes))) return st;
    if ((st = bind_2d(c, head_name, "weight", m->H, m->d, &w->head_w))) return st;
    if ((st = bind_1d(c, head_name, "bias", m->H, &w->head_b))) return st;

    /* alpha is stored as a scalar () or a one-element vector (1). */
    const pgcl_st_tensor *ta = pgcl_safetensors_find(c->st, alpha_name);
    if (!ta || !(ta->ndim == 0 || (ta->ndim == 1 && ta->shape[0] == 1))) {
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s' %s (config expects shape [] or [1])",
                    c->label, alpha_name, ta ? "has the wrong shape" : "is missing");
        return PGCL_ERR_INVALID;
    }
    float *alpha;
    int64_t ashape[1] = {1};
    if ((st = bind_tensor(c, alpha_name, ta->ndim, ta->ndim ? ashape : NULL, &alpha))) return st;
    if (c->dry_run) {
        /* Every tensor is there with its shape and dtype: now the arena, sized from config.json. */
        c->dry_run = false;
        m->arena = aligned_alloc(64, total * sizeof(float));
        if (!m->arena) return PGCL_ERR_NOMEM;
        memset(m->arena, 0, total * sizeof(float));
        c->arena_next = m->arena;
        c->arena_left = total;
        goto bind;
    }
    if (!(alpha[0] >= 0 && alpha[0] <= 1)) {
        pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s': alpha %g is outside [0, 1]", c->label,
                    alpha_name, alpha[0]);
        return PGCL_ERR_INVALID;
    }
    w->alpha = alpha[0];

    /* Every tensor in the file must be used (bookkeeping counters excepted). */
    for (int i = 0; i < pgcl_safetensors_count(c->st); i++) {
        const pgcl_st_tensor *t = pgcl_safetensors_at(c->st, i);
        bool used = false;
        for (int j = 0; j < c->n_bound && !used; j++) used = c->bound[j] == t->name;
        size_t len = strlen(t->name);
        static const char suffix[] = ".num_batches_tracked";
        if (!used && !(len >= sizeof suffix - 1 && strcmp(t->name + len - (sizeof suffix - 1), suffix) == 0)) {
            pgcl_errorf(c->err, c->cap, "%s/model.safetensors: tensor '%s' is not referenced by config.json",
                        c->label, t->name);
            return PGCL_ERR_INVALID;
        }
    }
    return PGCL_OK;
}

/* Folds BatchNorm, alpha and the attention query into the fast path's constants. Computed in
 * double and rounded once, so the fast path stays within float rounding of the oracle. */
static pgcl_status fold_constants(load_ctx *c) {
    pgcl_model *m = c->m;
    const pgcl_weights *w = &m->raw;
    pgcl_folded *f = &m->fast;
    const int D = m->D, d = m->d, K = m->K, h1 = w->layers[0].n_out;
    const double inv_sqrt_d = 1.0 / sqrt((double)d);
    double *g = malloc(sizeof(double) * (size_t)m->max_hidden * 2);
    double *kp = malloc(sizeof(double) * (size_t)K * (size_t)d);
    if (!g || !kp) {
        free(g);
        free(kp);
        return PGCL_ERR_NOMEM;
    }
    double *shift = g + m->max_hidden;

    /* Kp = C · Wkᵀ + bk  (K, d); Vp likewise, scaled by (1 − α). */
    f->v_scaled = arena_take(c, (size_t)K * (size_t)d);
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < d; j++) {
            double sk = w->bk[j], sv = w->bv[j];
            for (int t = 0; t < d; t++) {
                sk += (double)w->prototypes[k * d + t] * w->wk[j * d + t];
                sv += (double)w->prototypes[k * d + t] * w->wv[j * d + t];
            }
            kp[k * d + j] = sk;
            f->v_scaled[k * d + j] = (float)((1.0 - (double)w->alpha) * sv);
        }
    }
    /* First GEMM: [layer-0 weight ; Kp·Wq/√d] so that z meets one (h1+K, D) matrix. */
    f->n_first = h1 + K;
    f->w_first = arena_take(c, (size_t)(h1 + K) * (size_t)D);
    f->b_first = arena_take(c, (size_t)(h1 + K));
    memcpy(f->w_first, w->layers[0].w, sizeof(float) * (size_t)h1 * (size_t)D);
    memcpy(f->b_first, w->layers[0].b, sizeof(float) * (size_t)h1);
    for (int k = 0; k < K; k++) {
        double sb = 0;
        for (int j = 0; j < d; j++) sb += kp[k * d + j] * w->bq[j];
        f->b_first[h1 + k] = (float)(sb * inv_sqrt_d);
        for (int x = 0; x < D; x++) {
            double s = 0;
            for (int j = 0; j < d; j++) s += kp[k * d + j] * w->wq[(size_t)j * D + x];
            f->w_first[(size_t)(h1 + k) * D + x] = (float)(s * inv_sqrt_d);
        }
    }
    /* Layers 1..L-1 absorb the previous layer's BatchNorm: W' = W·diag(g), b' = b + W·shift. */
    for (int l = 0; l < w->n_layers; l++) {
        const pgcl_layer *L = &w->layers[l];
        for (int j = 0; j < L->n_out; j++) {
            if (L->has_bn) {
                g[j] = (double)L->bn_weight[j] / sqrt((double)L->bn_var[j] + (double)w->bn_eps);
                shift[j] = (double)L->bn_bias[j] - (double)L->bn_mean[j] * g[j];
            } else {
                g[j] = 1.0;
                shift[j] = 0.0;
            }
        }
        if (l + 1 < w->n_layers) {
            const pgcl_layer *N = &w->layers[l + 1];
            f->w[l + 1] = arena_take(c, (size_t)N->n_out * (size_t)N->n_in);
            f->b[l + 1] = arena_take(c, (size_t)N->n_out);
            for (int o = 0; o < N->n_out; o++) {
                double sb = N->b[o];
                for (int i = 0; i < N->n_in; i++) {
                    f->w[l + 1][(size_t)o * N->n_in + i] = (float)((double)N->w[(size_t)o * N->n_in + i] * g[i]);
                    sb += (double)N->w[(size_t)o * N->n_in + i] * shift[i];
                }
                f->b[l + 1][o] = (float)sb;
            }
        } else {
            f->s_scale = arena_take(c, (size_t)d);
            f->s_shift = arena_take(c, (size_t)d);
            for (int j = 0; j < d; j++) {
                f->s_scale[j] = (float)((double)w->alpha * g[j]);
                f->s_shift[j] = (float)((double)w->alpha * shift[j]);
            }
        }
    }
    free(g);
    free(kp);
    if (!f->s_shift) return PGCL_ERR_NOMEM; /* the arena was sized too small: a bug */
    /* The CPU kernel's layout, packed once here rather than by every forward pass. */
    f->packed_first = pgcl_packed_create(f->w_first, f->n_first, D);
    if (!f->packed_first) return PGCL_ERR_NOMEM;
    for (int l = 1; l < w->n_layers; l++) {
        f->packed[l] = pgcl_packed_create(f->w[l], w->layers[l].n_out, w->layers[l].n_in);
        if (!f->packed[l]) return PGCL_ERR_NOMEM;
    }
    return PGCL_OK;
}

static pgcl_status verify_golden(load_ctx *c) {
    pgcl_model *m = c->m;
    json_t *golden = json_object_get(c->config, "golden");
    if (!golden) return PGCL_OK;
    if (!json_is_array(golden) || json_array_size(golden) > 64)
        return model_cfg_fail(c, "golden", "must be an array of at most 64 entries");
    int n = (int)json_array_size(golden);
    pgcl_status st = PGCL_OK;
    float *z = malloc(sizeof(float) * (size_t)m->D);
    float *vec = malloc(sizeof(float) * (size_t)m->d);
    float *probs = malloc(sizeof(float) * (size_t)m->K);
    unsigned char *bytes = malloc((size_t)m->D * 4);
    pgcl_scratch *s = pgcl_scratch_create(m, 1);
    if (!z || !vec || !probs || !bytes || !s) {
        st = PGCL_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n && st == PGCL_OK; i++) {
        json_t *g = json_array_get(golden, (size_t)i);
        char where[32], field[64];
        snprintf(where, sizeof where, "golden[%d]", i);
        static const char *const keys[] = {"embedding_b64", "vector", "probabilities", "label_index", "decision", NULL};
        if (!json_is_object(g)) { st = model_cfg_fail(c, where, "must be an object"); break; }
        if ((st = model_cfg_only(c, g, where, keys))) break;
        const char *b64;
        snprintf(field, sizeof field, "%s.embedding_b64", where);
        if ((st = model_cfg_str(c, g, "embedding_b64", field, &b64))) break;
        size_t len = 0;
        bool ascii = true; /* libsodium 1.0.18 decodes every byte >= 0x80 as if it were '/' */
        for (const char *ch = b64; *ch && ascii; ch++) ascii = (unsigned char)*ch < 0x80;
        if (!ascii || sodium_base642bin(bytes, (size_t)m->D * 4, b64, strlen(b64), NULL, &len, NULL,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            len != (size_t)m->D * 4) {
            st = model_cfg_fail(c, field, "is not base64 of D little-endian float32 values");
            break;
        }
        for (int j = 0; j < m->D; j++) {
            uint32_t bits = (uint32_t)bytes[4 * j] | (uint32_t)bytes[4 * j + 1] << 8 |
                            (uint32_t)bytes[4 * j + 2] << 16 | (uint32_t)bytes[4 * j + 3] << 24;
            memcpy(&z[j], &bits, 4);
            if (!isfinite(z[j])) { st = model_cfg_fail(c, field, "holds a non-finite value"); break; }
        }
        if (st) break;
        pgcl_forward(m, s, z, 1, vec, probs);
        int label;
        pgcl_decision dec = pgcl_model_decide(m, probs, &label);
        const struct { const char *key; const float *got; int n; } arrays[] = {
            {"vector", vec, m->d}, {"probabilities", probs, m->K}};
        for (int a = 0; a < 2 && !st; a++) {
            json_t *arr = json_object_get(g, arrays[a].key);
            snprintf(field, sizeof field, "%s.%s", where, arrays[a].key);
            if (!json_is_array(arr) || (int)json_array_size(arr) != arrays[a].n) {
                st = model_cfg_fail(c, field, "must be an array of the output's length");
                break;
            }
            for (int j = 0; j < arrays[a].n; j++) {
                json_t *x = json_array_get(arr, (size_t)j);
                if (!json_is_number(x)) { st = model_cfg_fail(c, field, "must hold numbers"); break; }
                double diff = fabs(json_number_value(x) - (double)arrays[a].got[j]);
                if (!(diff <= 1e-4)) {
                    pgcl_errorf(c->err, c->cap,
                                "%s/config.json: %s: recomputed %s[%d] = %.9g, checkpoint says %.9g (difference %.3g > 1e-4)",
                                c->label, where, arrays[a].key, j, (double)arrays[a].got[j], json_number_value(x), diff);
                    st = PGCL_ERR_MISMATCH;
                    break;
                }
            }
        }
        if (st) break;
        json_t *jl = json_object_get(g, "label_index");
        if (jl && (!json_is_integer(jl) || json_integer_value(jl) != label)) {
            pgcl_errorf(c->err, c->cap, "%s/config.json: %s: recomputed label_index %d differs", c->label, where, label);
            st = PGCL_ERR_MISMATCH;
            break;
        }
        json_t *jd = json_object_get(g, "decision");
        if (jd && (!json_is_string(jd) || strcmp(json_string_value(jd), pgcl_decision_str(dec)) != 0)) {
            pgcl_errorf(c->err, c->cap, "%s/config.json: %s: recomputed decision '%s' differs", c->label, where,
                        pgcl_decision_str(dec));
            st = PGCL_ERR_MISMATCH;
            break;
        }
        m->n_golden++;
    }
done:
    pgcl_scratch_destroy(s);
    free(z);
    free(vec);
    free(probs);
    free(bytes);
    return st;
}

static pgcl_status load_common(load_ctx *c, const char *config_text, size_t config_len) {
    pgcl_model *m = c->m;
    pgcl_status st;
    pgcl_sha256_hex((const unsigned char *)config_text, config_len, m->config_sha256);
    const uint8_t *wbytes;
    size_t wlen;
    pgcl_safetensors_bytes(c->st, &wbytes, &wlen);
    pgcl_sha256_hex(wbytes ? wbytes : (const uint8_t *)"", wlen, m->sha256);

    json_error_t jerr;
    c->config = json_loadb(config_text, config_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!c->config) {
        pgcl_errorf(c->err, c->cap, "%s/config.json: invalid JSON at line %d column %d: %s", c->label, jerr.line,
                    jerr.column, jerr.text);
        return PGCL_ERR_FORMAT;
    }
    if ((st = model_parse_header(c))) return st;
    json_t *digest = json_object_get(c->config, "weights_sha256");
    if (digest) {
        if (!json_is_string(digest)) return model_cfg_fail(c, "weights_sha256", "must be a hex string");
        if (strcmp(json_string_value(digest), m->sha256) != 0) {
            pgcl_errorf(c->err, c->cap, "%s/model.safetensors: SHA-256 %s does not match config.json weights_sha256 %s",
                        c->label, m->sha256, json_string_value(digest));
            return PGCL_ERR_MISMATCH;
        }
    }
    if ((st = model_parse_policy(c))) return st;
    if ((st = model_parse_calibration(c))) return st;
    if ((st = model_parse_dsa(c))) return st;
    if ((st = bind_weights(c))) return st;
    if ((st = fold_constants(c))) return st;
    return verify_golden(c);
}

static pgcl_status load_finish(load_ctx *c, pgcl_status st, pgcl_model **out) {
    json_decref(c->config);
    pgcl_safetensors_destroy(c->st);
    free(c->bound);
    if (st != PGCL_OK) {
        if (st == PGCL_ERR_NOMEM) pgcl_errorf(c->err, c->cap, "%s: out of memory while loading", c->label);
        pgcl_model_release(c->m);
        return st;
    }
    *out = c->m;
    return PGCL_OK;
}

static pgcl_model *model_alloc(const char *name, const char *version, const char *dir) {
    pgcl_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    atomic_init(&m->refcount, 1);
    m->name = strdup(name);
    m->version = strdup(version);
    m->dir = strdup(dir);
    if (!m->name || !m->version || !m->dir) {
        pgcl_model_release(m);
        return NULL;
    }
    return m;
}

static char *read_file(const char *path, size_t *len, char *err, int cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && n <= (16l << 20) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
                *len = (size_t)n;
                buf[n] = 0;
            } else {
                free(buf);
                buf = NULL;
            }
        }
    }
    if (!buf) pgcl_errorf(err, cap, "%s: cannot read (missing, unreadable or over 16 MiB)", path);
    fclose(f);
    return buf;
}

pgcl_status pgcl_model_load(const char *dir, const char *name, const char *version, pgcl_model **out,
                            char *err, int cap) {
    *out = NULL;
    load_ctx c = {.label = dir, .err = err, .cap = cap};
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t config_len = 0;
    char *config_text = read_file(path, &config_len, err, cap);
    if (!config_text) return PGCL_ERR_IO;
    pgcl_status st;
    c.m = model_alloc(name, version, dir);
    if (!c.m) {
        st = PGCL_ERR_NOMEM;
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        st = pgcl_safetensors_open(path, &c.st, err, cap);
        if (st == PGCL_OK) st = load_common(&c, config_text, config_len);
    }
    free(config_text);
    return load_finish(&c, st, out);
}

pgcl_status pgcl_model_load_mem(const char *config_text, size_t config_len, const unsigned char *weights,
                                size_t weights_len, const char *label, pgcl_model **out, char *err, int cap) {
    *out = NULL;
    load_ctx c = {.label = label, .err = err, .cap = cap};
    pgcl_status st;
    c.m = model_alloc(label, "mem", label);
    if (!c.m) {
        st = PGCL_ERR_NOMEM;
    } else {
        char stlabel[512];
        snprintf(stlabel, sizeof stlabel, "%s/model.safetensors", label);
        st = pgcl_safetensors_parse(weights, weights_len, stlabel, &c.st, err, cap);
        if (st == PGCL_OK) st = load_common(&c, config_text, config_len);
    }
    return load_finish(&c, st, out);
}

pgcl_model *pgcl_model_retain(pgcl_model *m) {
    atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
    return m;
}

json_t *pgcl_model_dsa_json(const pgcl_model *m, const char *source_key) {
    json_t *out = m->dsa ? json_copy(m->dsa) : json_pack("{s:s}", "category", m->dsa_category);
    if (out && json_object_set_new(out, source_key, json_string(m->dsa ? "config" : "task_default")) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

void pgcl_model_release(pgcl_model *m) {
    if (!m || atomic_fetch_sub_explicit(&m->refcount, 1, memory_order_acq_rel) != 1) return;
    for (int i = 0; m->labels && i < m->K; i++) {
        free(m->labels[i]);
        if (m->labels_json) free(m->labels_json[i]);
    }
    free(m->labels);
    free(m->labels_json);
    free(m->policy.actions);
    json_decref(m->policy_json);
    free(m->policy_text);
    json_decref(m->training);
    json_decref(m->calibration);
    json_decref(m->dsa);
    pgcl_packed_destroy(m->fast.packed_first);
    for (int l = 0; l < PGCL_MAX_LAYERS; l++) pgcl_packed_destroy(m->fast.packed[l]);
    free(m->arena);
    free(m->name);
    free(m->version);
    free(m->dir);
    free(m);
}

char *pgcl_model_probabilities_json(const pgcl_model *m, const float *probs) {
    size_t cap = 2;
    for (int k = 0; k < m->K; k++) cap += strlen(m->labels_json[k]) + 24;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t off = 0;
    s[off++] = '{';
    for (int k = 0; k < m->K; k++)
        off += (size_t)snprintf(s + off, cap - off, "%s%s:%.9g", k ? "," : "", m->labels_json[k], (double)probs[k]);
    snprintf(s + off, cap - off, "}");
    return s;
}

pgcl_decision pgcl_model_decide(const pgcl_model *m, const float *probs, int *label_index) {
    int best = 0;
    for (int k = 1; k < m->K; k++)
        if (probs[k] > probs[best]) best = k;
    *label_index = best;
    const pgcl_policy *p = &m->policy;
    if (p->kind == PGCL_POLICY_THRESHOLD) {
        double score = probs[p->label_index];
        if (score >= p->t_block) return PGCL_DECISION_BLOCK;
        if (score >= p->t_review) return PGCL_DECISION_REVIEW;
        return PGCL_DECISION_ALLOW;
    }
    pgcl_decision d = p->actions[best];
    if (d == PGCL_DECISION_ALLOW && (double)probs[best] < p->min_confidence) d = PGCL_DECISION_REVIEW;
    return d;
}
