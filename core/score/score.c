/* The scoring call; see score.h. Read top to bottom: the result's arrays, the steps (check the
 * outputs, decide and fill the rows, choose the stored inputs, hand the shadow its copy), then the
 * continuation that runs them in order across threads (pgcl_score_start: forward pass on a batcher
 * worker → decide and fill the rows there → asynchronous append → the audit writer's commit → the
 * caller's callback), and pgcl_score_run, which waits for it. */
#include "score.h"

#include <math.h>
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "f16.h"
#include "log.h"
#include "sha256.h"

pgcl_store_inputs pgcl_store_inputs_parse(const char *text) {
    if (text && strcmp(text, "float16") == 0) return PGCL_STORE_INPUTS_FLOAT16;
    if (text && strcmp(text, "float32") == 0) return PGCL_STORE_INPUTS_FLOAT32;
    return PGCL_STORE_INPUTS_NONE;
}

const char *pgcl_score_failure_str(pgcl_score_failure f) {
    switch (f) {
    case PGCL_SCORE_OK: return "ok";
    case PGCL_SCORE_NO_MEMORY: return "no_memory";
    case PGCL_SCORE_FORWARD_FAILED: return "forward_failed";
    case PGCL_SCORE_OUTPUT_NOT_FINITE: return "output_not_finite";
    case PGCL_SCORE_AUDIT_BEHIND: return "audit_behind";
    case PGCL_SCORE_AUDIT_FAILED: return "audit_failed";
    case PGCL_SCORE_IDEMPOTENCY_ANSWERED: return "idempotency_answered";
    }
    return "unknown";
}

void pgcl_score_result_clear(pgcl_score_result *res) {
    for (int i = 0; res->probs_json && i < res->n; i++) free(res->probs_json[i]);
    free(res->arena);
    free(res->answer);
    *res = (pgcl_score_result){0};
}

/* ---- the arena: every per-item array of a result in one allocation ---- */

/* Reserves `bytes` at the next offset aligned for any object; returns the offset. */
static size_t reserve(size_t *used, size_t bytes) {
    size_t a = alignof(max_align_t), off = (*used + a - 1) / a * a;
    *used = off + bytes;
    return off;
}

/* Carves res's arrays for n items of model m from one allocation. The small arrays the rows are
 * built from start zeroed; vectors, probs and inputs_f16 are written in full before they are
 * read. Returns false when out of memory. */
static bool result_alloc(pgcl_score_result *res, const pgcl_model *m, int n, bool keep_f16) {
    size_t items = (size_t)n, used = 0;
    size_t off_rows = reserve(&used, items * sizeof *res->rows);
    size_t off_pj = reserve(&used, items * sizeof *res->probs_json);
    size_t off_label = reserve(&used, items * sizeof *res->label_index);
    size_t off_decision = reserve(&used, items * sizeof *res->decision);
    size_t off_id = reserve(&used, items * sizeof *res->decision_id);
    size_t off_sha = reserve(&used, items * sizeof *res->input_sha);
    size_t off_digest = reserve(&used, items * sizeof *res->input_digest);
    size_t zeroed = used;
    size_t off_vec = reserve(&used, items * (size_t)m->d * sizeof(float));
    size_t off_probs = reserve(&used, items * (size_t)m->K * sizeof(float));
    size_t off_f16 = keep_f16 ? reserve(&used, items * (size_t)m->D * sizeof(uint16_t)) : 0;
    unsigned char *a = malloc(used);
    if (!a) return false;
    memset(a, 0, zeroed);
    res->arena = a;
    res->n = n;
    res->rows = (pgcl_decision_row *)(a + off_rows);
    res->probs_json = (char **)(a + off_pj);
    res->label_index = (int *)(a + off_label);
    res->decision = (pgcl_decision *)(a + off_decision);
    res->decision_id = (char(*)[PGCL_UUID_LEN + 1])(a + off_id);
    res->input_sha = (char(*)[65])(a + off_sha);
    res->input_digest = (unsigned char(*)[PGCL_SHA256_BYTES])(a + off_digest);
    res->vectors = (float *)(a + off_vec);
    res->probs = (float *)(a + off_probs);
    res->inputs_f16 = keep_f16 ? (uint16_t *)(a + off_f16) : NULL;
    return true;
}

/* ---- the steps ---- */

/* Finite inputs of huge magnitude (1e38) overflow inside the model: such an item has no decision
 * to record (NaN probabilities would decide "allow"). Returns the first such item, or -1. */
static int first_item_not_finite(const pgcl_model *m, const pgcl_score_result *res) {
    for (int i = 0; i < res->n; i++) {
        bool finite = true;
        for (int k = 0; finite && k < m->K; k++) finite = isfinite(res->probs[(size_t)i * m->K + (size_t)k]);
        for (int k = 0; finite && k < m->d; k++) finite = isfinite(res->vectors[(size_t)i * m->d + (size_t)k]);
        if (!finite) return i;
    }
    return -1;
}

/* Decides every item, gives it its decision id and input digest, and fills its audit row (without
 * the stored input). Returns false when out of memory. */
static bool decide_items(const pgcl_score_input *in, pgcl_score_result *res) {
    const pgcl_model *m = in->model;
    int64_t latency = pgcl_monotonic_us() - in->t_start_us;
    bool threshold = m->policy.kind == PGCL_POLICY_THRESHOLD, binary = m->task == PGCL_TASK_BINARY;
    for (int i = 0; i < res->n; i++) {
        const float *p = res->probs + (size_t)i * m->K;
        res->decision[i] = pgcl_model_decide(m, p, &res->label_index[i]);
        PGCL_ASSERT(res->label_index[i] >= 0 && res->label_index[i] < m->K);
        pgcl_uuid7(res->decision_id[i]);
        /* the SHA-256 of the float32 values: the row's input_sha256, and the stored input's digest
         * when the input is kept as float32 (attach_stored_inputs replaces it for float16) */
        pgcl_sha256(in->z + (size_t)i * m->D, (size_t)m->D * sizeof(float), res->input_digest[i]);
        pgcl_sha256_to_hex(res->input_digest[i], res->input_sha[i]);
        if (!(res->probs_json[i] = pgcl_model_probabilities_json(m, p))) return false;
        res->rows[i] = (pgcl_decision_row){
            .decision_id = res->decision_id[i], .request_id = res->request_id,
            .item_id = in->ids[i], .model_name = m->name, .model_version = m->version, .model_sha256 = m->sha256,
            .label = m->labels[res->label_index[i]], .label_index = res->label_index[i],
            .probabilities_json = res->probs_json[i], .has_toxicity = binary,
            .toxicity = binary ? p[1] : 0, .decision = pgcl_decision_str(res->decision[i]),
            .policy_json = m->policy_text, .has_thresholds = threshold,
            .t_review = threshold ? m->policy.t_review : 0, .t_block = threshold ? m->policy.t_block : 0,
            .vector = res->vectors + (size_t)i * m->d, .d = m->d, .input_sha256 = res->input_sha[i],
            .latency_us = latency, .trace_id = res->trace_id[0] ? res->trace_id : NULL,
            .content_date = in->facts ? in->facts[i].content_date : NULL,
            .territorial_scope = in->facts ? in->facts[i].territorial_scope : NULL,
            .content_language = in->facts ? in->facts[i].content_language : NULL,
            /* the log record's (record_rows.h): the model's, so the writer never parses them back */
            .record_task = 1 + (int)m->task, .labels = (const char *const *)m->labels, .probabilities = p,
            .n_labels = m->K,
        };
    }
    return true;
}

/* Points every row at the input kept for re-scoring on review. An item with a value float16
 * cannot hold (|x| > 65504 converts to infinity) keeps its input as float32: the stored input must
 * be the one that was scored, or a re-score would compute something else (or nothing) and still
 * be compared with the original. */
static void attach_stored_inputs(const pgcl_score_env *env, const pgcl_score_input *in, pgcl_score_result *res) {
    if (env->store_inputs == PGCL_STORE_INPUTS_NONE) return;
    size_t D = (size_t)in->model->D, n = (size_t)res->n;
    if (res->inputs_f16) pgcl_f32_to_f16_array(in->z, res->inputs_f16, n * D);
    for (size_t i = 0; i < n; i++) {
        const uint16_t *row_f16 = res->inputs_f16 ? res->inputs_f16 + i * D : NULL;
        bool half = row_f16 && pgcl_f16_all_finite(row_f16, D);
        res->rows[i].input = half ? (const void *)row_f16 : (const void *)(in->z + i * D);
        res->rows[i].input_bytes = (int)D * (half ? 2 : 4);
        res->rows[i].input_dtype = half ? "f16" : "f32";
        /* the digest the audit row records, hashed here rather than on the single writer thread */
        if (half) pgcl_sha256(row_f16, D * 2, res->input_digest[i]);
        res->rows[i].input_digest = res->input_digest[i];
    }
}

/* Hands the shadow (its reference included) a copy of the inputs and the primary outcomes. */
static void submit_shadow(const pgcl_score_env *env, const pgcl_score_input *in, const pgcl_score_result *res) {
    pgcl_shadow_submit(env->shadow, pgcl_model_retain(in->model), in->shadow, res->n, in->z,
                       (const char(*)[PGCL_UUID_LEN + 1])res->decision_id, res->label_index, res->decision,
                       res->probs);
}

/* ---- the continuation: start → forward done → commit done → the caller's callback ----
 * One call in flight, on the heap from pgcl_score_start until its callback has run. */
typedef struct score_call {
    pgcl_score_env env;
    pgcl_score_input in;
    pgcl_score_result *res;
    pgcl_score_done_fn done;
    void *done_ctx;
    int64_t t_queue;    /* when the forward pass was asked for */
    int64_t t_computed; /* when it was over */
    pgcl_idem_entry idem; /* the Idempotency-Key entry stored with the rows (in.idem, with ours filled) */
} score_call;

/* The end of every call: the shadow gets its copy when the rows were recorded (its reference is
 * released otherwise), the caller's callback runs, the call's memory goes. */
static void finish(score_call *call, pgcl_score_failure f) {
    if (f == PGCL_SCORE_OK && call->in.shadow) submit_shadow(&call->env, &call->in, call->res);
    else pgcl_model_release(call->in.shadow);
    pgcl_score_done_fn done = call->done;
    void *done_ctx = call->done_ctx;
    free(call);
    done(done_ctx, f);
}

/* The writer's callback (audit.h: cheap, never blocking): the rows are durable, or nothing was. */
static void on_committed(void *ctx, pgcl_status st, const char *err) {
    score_call *call = ctx;
    if (st == PGCL_ERR_DUPLICATE) { /* only with an Idempotency-Key, on a store shared by replicas */
        pgcl_log_info("score: %s; replaying its stored answer", err);
        finish(call, PGCL_SCORE_IDEMPOTENCY_ANSWERED);
        return;
    }
    if (st != PGCL_OK) {
        pgcl_log_error("score: audit append failed (%s): %s", pgcl_status_str(st), err);
        finish(call, st == PGCL_ERR_BUSY ? PGCL_SCORE_AUDIT_BEHIND : PGCL_SCORE_AUDIT_FAILED);
        return;
    }
    call->res->timings.audit_us = pgcl_monotonic_us() - call->t_computed;
    finish(call, PGCL_SCORE_OK);
}

/* Appends the rows (with the idempotency key and its answer when the request has one: the answer
 * is built first, here, off the writer's thread, since it is stored with the rows). The call
 * continues in on_committed. */
static void append_rows(score_call *call) {
    const pgcl_score_input *in = &call->in;
    pgcl_score_result *res = call->res;
    if (!in->idem) {
        pgcl_audit_append_async(call->env.audit, res->rows, res->n, NULL, on_committed, call);
        return;
    }
    PGCL_ASSERT(in->answer_fn != NULL);
    if (!(res->answer = in->answer_fn(res, in->answer_ctx))) {
        finish(call, PGCL_SCORE_NO_MEMORY);
        return;
    }
    call->idem = *in->idem;
    call->idem.request_id = res->request_id;
    call->idem.answer = res->answer;
    pgcl_audit_append_async(call->env.audit, res->rows, res->n, &call->idem, on_committed, call);
}

/* The batcher's callback, on its worker: checks the outputs, decides, digests and fills the rows
 * (nothing is recorded unless every output is finite), then appends them. */
static void on_forward_done(void *ctx, pgcl_status st, int64_t t_compute, int batch_rows) {
    score_call *call = ctx;
    pgcl_score_result *res = call->res;
    if (st != PGCL_OK) {
        finish(call, PGCL_SCORE_FORWARD_FAILED);
        return;
    }
    res->timings.queue_us = t_compute - call->t_queue;
    res->timings.forward_rows = batch_rows;
    if ((res->failed_item = first_item_not_finite(call->in.model, res)) >= 0) {
        finish(call, PGCL_SCORE_OUTPUT_NOT_FINITE);
        return;
    }
    call->t_computed = pgcl_monotonic_us();
    res->timings.computed = true;
    res->timings.compute_us = call->t_computed - t_compute;
    if (!res->request_id[0]) pgcl_uuid7(res->request_id); /* the caller gave none (pgcl_score_start) */
    if (!decide_items(&call->in, res)) {
        finish(call, PGCL_SCORE_NO_MEMORY);
        return;
    }
    attach_stored_inputs(&call->env, &call->in, res);
    append_rows(call);
}

void pgcl_score_start(const pgcl_score_env *env, const pgcl_score_input *in, pgcl_score_result *out,
                      pgcl_score_done_fn done, void *done_ctx) {
    PGCL_ASSERT(in->n >= 1 && in->model != NULL && in->z != NULL && in->ids != NULL && done != NULL);
    out->failed_item = -1;
    score_call *call = malloc(sizeof *call);
    if (!call) {
        pgcl_model_release(in->shadow);
        done(done_ctx, PGCL_SCORE_NO_MEMORY);
        return;
    }
    *call = (score_call){.env = *env, .in = *in, .res = out, .done = done, .done_ctx = done_ctx};
    out->request_id[0] = 0;
    if (in->request_id) {
        PGCL_ASSERT(strlen(in->request_id) <= PGCL_REQUEST_ID_MAX);
        memcpy(out->request_id, in->request_id, strlen(in->request_id) + 1);
    }
    call->in.request_id = NULL; /* copied: not read again */
    out->trace_id[0] = 0;
    if (in->trace_id) {
        PGCL_ASSERT(strlen(in->trace_id) == PGCL_TRACE_ID_LEN);
        memcpy(out->trace_id, in->trace_id, PGCL_TRACE_ID_LEN + 1);
    }
    call->in.trace_id = NULL;
    if (!result_alloc(out, in->model, in->n, env->store_inputs == PGCL_STORE_INPUTS_FLOAT16)) {
        finish(call, PGCL_SCORE_NO_MEMORY);
        return;
    }
    call->t_queue = pgcl_monotonic_us();
    pgcl_batcher_submit(env->batcher, in->model, in->z, in->n, out->vectors, out->probs, on_forward_done, call);
}

/* ---- the blocking form: the continuation, waited for ---- */

typedef struct score_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    pgcl_score_failure f;
} score_wait;

static void on_score_done(void *ctx, pgcl_score_failure f) {
    score_wait *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->f = f;
    w->done = true;
    pthread_cond_signal(&w->cond); /* under the lock: the waiter cannot return (and free w) before */
    pthread_mutex_unlock(&w->lock);
}

pgcl_score_failure pgcl_score_run(const pgcl_score_env *env, const pgcl_score_input *in, pgcl_score_result *out) {
    score_wait w = {.done = false};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    pgcl_score_start(env, in, out, on_score_done, &w);
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    return w.f;
}
