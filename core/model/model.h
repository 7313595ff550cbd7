/* A loaded PGCL checkpoint: its configuration, its weights as stored (for the reference oracle),
 * and the constants the fast path precomputes at load (BatchNorm folded into the next layer,
 * the attention query folded into the first GEMM, alpha folded into both streams).
 *
 * A pgcl_model is immutable after pgcl_model_load() returns and is shared by every thread; the
 * per-thread activations live in a pgcl_scratch. Lifetime is reference-counted so that a model
 * being swapped out stays valid until its last request finishes. See docs/checkpoint-format.md. */
#ifndef PGCL_MODEL_H
#define PGCL_MODEL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "status.h"

#define PGCL_MAX_LAYERS 8
#define PGCL_MAX_LABEL_BYTES 128

typedef enum { PGCL_TASK_BINARY, PGCL_TASK_MULTICLASS, PGCL_TASK_ORDINAL } pgcl_task;
typedef enum { PGCL_ACT_IDENTITY, PGCL_ACT_RELU, PGCL_ACT_LEAKY_RELU } pgcl_activation;
typedef enum { PGCL_DECISION_ALLOW, PGCL_DECISION_REVIEW, PGCL_DECISION_BLOCK } pgcl_decision;
typedef enum { PGCL_POLICY_THRESHOLD, PGCL_POLICY_LABEL_MAP } pgcl_policy_kind;

const char *pgcl_task_str(pgcl_task t);
const char *pgcl_decision_str(pgcl_decision d);

typedef struct pgcl_policy {
    pgcl_policy_kind kind;
    int label_index;          /* threshold: the scored label */
    double t_review, t_block; /* threshold: 0 <= t_review <= t_block <= 1 */
    pgcl_decision *actions;   /* label_map: (K) action per predicted label */
    double min_confidence;    /* label_map: below it, allow becomes review */
} pgcl_policy;

/* One semantic-MLP layer as stored: y = BN(act(x · wᵀ + b)). */
typedef struct pgcl_layer {
    int n_in, n_out;
    pgcl_activation act;
    float slope;      /* leaky_relu negative slope */
    float *w;         /* (n_out, n_in) */
    float *b;         /* (n_out) */
    bool has_bn;
    float *bn_weight; /* (n_out) gamma */
    float *bn_bias;   /* (n_out) beta */
    float *bn_mean;   /* (n_out) running mean */
    float *bn_var;    /* (n_out) running variance */
} pgcl_layer;

/* The checkpoint's tensors, unchanged. Used by the reference oracle. */
typedef struct pgcl_weights {
    int n_layers;
    pgcl_layer layers[PGCL_MAX_LAYERS];
    float bn_eps;
    float *wq;         /* (d, D) query_fc.weight */
    float *bq;         /* (d) */
    float *wk;         /* (d, d) key_fc.weight */
    float *bk;         /* (d) */
    float *wv;         /* (d, d) value_fc.weight */
    float *bv;         /* (d) */
    float *prototypes; /* (K, d) */
    float alpha;
    float *head_w;     /* (H, d), H = 1 for binary else K */
    float *head_b;     /* (H) */
} pgcl_weights;

/* Constants of the fast path, derived at load (in double precision, stored as float). */
typedef struct pgcl_folded {
    int n_first;          /* h1 + K: width of the first GEMM's output */
    float *w_first;       /* (h1 + K, D): rows [0, h1) layer 0's weight, rows [h1, h1+K) Kp·Wq/√d */
    float *b_first;       /* (h1 + K): layer 0's bias, then Kp·bq/√d */
    float *w[PGCL_MAX_LAYERS]; /* layers 1..L-1: (n_out, n_in) with the previous BatchNorm folded in */
    float *b[PGCL_MAX_LAYERS]; /* (n_out) */
    float *s_scale;       /* (d) α·γ/√(var+eps) of the last BatchNorm (α when it has none) */
    float *s_shift;       /* (d) α·(β − mean·γ/√(var+eps)) (0 when it has none) */
    float *v_scaled;      /* (K, d) (1 − α)·(C·Wvᵀ + bv) */
    /* w_first and w[1..L-1] packed once for the CPU kernel (gemm_packed.h); malloc'd, not in the arena */
    struct pgcl_packed_matrix *packed_first;            /* of w_first */
    struct pgcl_packed_matrix *packed[PGCL_MAX_LAYERS]; /* of w[l], l >= 1 */
} pgcl_folded;

typedef struct pgcl_model {
    char *name, *version, *dir;
    char sha256[65];        /* of model.safetensors, lowercase hex */
    char config_sha256[65]; /* of config.json */
    pgcl_task task;
    int D, d, K, H;
    int max_hidden;         /* widest layer output, for scratch sizing */
    char **labels;          /* (K) */
    char **labels_json;     /* (K) each label as a quoted, escaped JSON string */
    pgcl_policy policy;
    json_t *policy_json;    /* the policy object as in config.json */
    char *policy_text;      /* compact JSON of policy_json, for the audit log */
    json_t *training;       /* provenance object or NULL */
    json_t *calibration;    /* validated calibration object or NULL; informational, applied by nothing */
    json_t *dsa;            /* validated `dsa` object (DSA Transparency Database vocabulary) or NULL */
    const char *dsa_category; /* dsa.category, or the task's default (dsa_vocabulary.h); never NULL once loaded */
    int n_golden;           /* golden vectors verified at load */
    pgcl_weights raw;
    pgcl_folded fast;
    float *arena;           /* every float array above lives in this one allocation */
    _Atomic int refcount;
} pgcl_model;

/* Loads and validates DIR/config.json and DIR/model.safetensors. name and version are recorded
 * as given. On success *out has refcount 1. On failure returns an error, *out is NULL, and err
 * names the file, tensor or field and the problem. Goldens are recomputed with the fast path
 * and compared within 1e-4. Thread-safe (touches no global state). */
pgcl_status pgcl_model_load(const char *dir, const char *name, const char *version, pgcl_model **out,
                            char *err, int cap);

/* Same, from in-memory config text and safetensors image (for tests and fuzzing). `label` is used
 * as the directory name in messages. */
pgcl_status pgcl_model_load_mem(const char *config_text, size_t config_len, const unsigned char *weights,
                                size_t weights_len, const char *label, pgcl_model **out, char *err, int cap);

pgcl_model *pgcl_model_retain(pgcl_model *m);
void pgcl_model_release(pgcl_model *m); /* frees at zero; accepts NULL */

/* The DSA vocabulary m's statements of reasons use, as a new object: its `dsa` object as written
 * (category, category_specification?, category_specification_other?) or the task's default
 * {category}, with source_key set to "config" or "task_default". NULL when out of memory. */
json_t *pgcl_model_dsa_json(const pgcl_model *m, const char *source_key);

/* Applies the decision policy to one item's probabilities (K). Returns the decision and writes the
 * predicted label index (argmax, first on ties). */
pgcl_decision pgcl_model_decide(const pgcl_model *m, const float *probs, int *label_index);

/* {"label": p, ...} for probs (K), each with 9 significant digits (exact for float32), labels
 * escaped; malloc'd, NULL when out of memory. The text stored in the audit log. */
char *pgcl_model_probabilities_json(const pgcl_model *m, const float *probs);

/* ---- forward passes (model_forward.c, model_reference.c) ---- */

/* Per-thread activations for up to max_rows inputs at a time. */
typedef struct pgcl_scratch pgcl_scratch;
pgcl_scratch *pgcl_scratch_create(const pgcl_model *m, int max_rows);
void pgcl_scratch_destroy(pgcl_scratch *s); /* accepts NULL */
int pgcl_scratch_rows(const pgcl_scratch *s);
/* True when s is large enough for m's layer widths (scratches are reused across models). */
bool pgcl_scratch_fits(const pgcl_scratch *s, const pgcl_model *m);

/* Fast path (its matrix products by the packed-weight kernel of gemm_packed.h). z (n, D) row-major;
 * writes vectors (n, d) and probs (n, K). Any n >= 0: larger batches are processed max_rows at a
 * time. s must have been created for a model with the same dimensions. Allocates nothing. A row's
 * vector and probabilities are the same bits whatever n is, wherever the row sits among the n and
 * whatever max_rows is (see gemm_packed.h). */
void pgcl_forward(const pgcl_model *m, pgcl_scratch *s, const float *z, int n, float *vectors, float *probs);

/* Naive oracle: one input z (D) through the stored weights with no folding, double accumulators.
 * Writes vector (d) and probs (K). Slow; for tests only. */
void pgcl_forward_reference(const pgcl_model *m, const float *z, float *vector, float *probs);

#endif
