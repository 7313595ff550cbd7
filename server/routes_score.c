/* POST /v1/score: validate every item, run the forward pass, commit one audit row per item, answer.
 *
 * Order matters for the audit guarantee: nothing is computed until the whole request validated
 * (a rejected request writes no row), and the answer is built only after pgcl_audit_append()
 * returned, i.e. after the rows are durable. */
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <strings.h>

#include "f16.h"
#include "fastjson.h"
#include "jsonw.h"
#include "ids.h"
#include "log.h"
#include "queries.h"
#include "score.h"
#include "server.h"

#define MAX_ID_BYTES 256

void pgcld_score_job_free(score_job *j) {
    for (int i = 0; j->probs_json && i < j->n; i++) free(j->probs_json[i]);
    free(j->probs_json);
    free(j->ids);
    free(j->z);
    free(j->vectors);
    free(j->probs);
    free(j->label_index);
    free(j->decision);
    free(j->decision_id);
    free(j->input_sha);
    free(j->rows);
    free(j->inputs_f16);
    free(j->id_arena);
    free(j->answer);
    pgcl_model_release(j->model);
    pgcl_model_release(j->shadow);
    json_decref(j->root);
}

/* Decodes one item's embedding into z (D). Returns 0, or -1 with reply filled. */
static int parse_embedding(const pgcl_model *m, json_t *item, int i, float *z, pgcld_reply *reply) {
    char field[64];
    json_t *arr = json_object_get(item, "embedding");
    json_t *b64 = json_object_get(item, "embedding_b64");
    if ((arr != NULL) == (b64 != NULL)) {
        snprintf(field, sizeof field, "items[%d]", i);
        pgcld_reply_error(reply, 400, "invalid_request", i, field,
                          "item %d must have exactly one of 'embedding' and 'embedding_b64'", i);
        return -1;
    }
    if (arr) {
        snprintf(field, sizeof field, "items[%d].embedding", i);
        if (!json_is_array(arr)) {
            pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d: 'embedding' must be an array of numbers", i);
            return -1;
        }
        if ((int)json_array_size(arr) != m->D) {
            pgcld_reply_error(reply, 400, "dimension_mismatch", i, field,
                              "item %d: embedding has %zu values, model %s expects %d", i, json_array_size(arr),
                              m->name, m->D);
            return -1;
        }
        for (int k = 0; k < m->D; k++) {
            json_t *v = json_array_get(arr, (size_t)k);
            if (!json_is_number(v)) {
                pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d: embedding[%d] is not a number", i, k);
                return -1;
            }
            z[k] = (float)json_number_value(v);
            if (!isfinite(z[k])) {
                pgcld_reply_error(reply, 400, "non_finite_value", i, field,
                                  "item %d: embedding[%d] is not finite as a float32", i, k);
                return -1;
            }
        }
        return 0;
    }
    snprintf(field, sizeof field, "items[%d].embedding_b64", i);
    if (!json_is_string(b64)) {
        pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d: 'embedding_b64' must be a string", i);
        return -1;
    }
    size_t want = (size_t)m->D * 4, got = 0;
    const char *text = json_string_value(b64);
    size_t text_len = json_string_length(b64);
    if (text_len > sodium_base64_ENCODED_LEN(want, sodium_base64_VARIANT_ORIGINAL) - 1) {
        /* Too long for D values: say why without decoding it anywhere. */
        bool alphabet = text_len % 4 == 0;
        for (size_t k = 0; k < text_len && alphabet; k++) {
            char ch = text[k];
            alphabet = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                       ch == '+' || ch == '/' || (ch == '=' && k + 2 >= text_len);
        }
        if (alphabet)
            pgcld_reply_error(reply, 400, "dimension_mismatch", i, field,
                              "item %d: embedding_b64 holds more than %d float32 values (model %s expects %d)", i,
                              m->D, m->name, m->D);
        else
            pgcld_reply_error(reply, 400, "invalid_base64", i, field,
                              "item %d: embedding_b64 is not valid padded base64 (standard alphabet)", i);
        return -1;
    }
    const char *end = NULL;
    bool ascii = true; /* libsodium 1.0.18 decodes every byte >= 0x80 as if it were '/' */
    for (size_t k = 0; k < text_len && ascii; k++) ascii = (unsigned char)text[k] < 0x80;
    if (!ascii ||
        sodium_base642bin((unsigned char *)z, want, text, text_len, NULL, &got, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != text + text_len) {
        pgcld_reply_error(reply, 400, "invalid_base64", i, field,
                          "item %d: embedding_b64 is not valid padded base64 (standard alphabet)", i);
        return -1;
    }
    if (got != want) {
        if (got % 4)
            pgcld_reply_error(reply, 400, "invalid_base64", i, field,
                              "item %d: embedding_b64 decodes to %zu bytes, not a whole number of float32 values", i, got);
        else
            pgcld_reply_error(reply, 400, "dimension_mismatch", i, field,
                              "item %d: embedding_b64 holds %zu float32 values, model %s expects %d", i, got / 4,
                              m->name, m->D);
        return -1;
    }
    for (int k = 0; k < m->D; k++) { /* little-endian on the wire; this build is little-endian */
        if (!isfinite(z[k])) {
            pgcld_reply_error(reply, 400, "non_finite_value", i, field, "item %d: value %d is NaN or infinite", i, k);
            return -1;
        }
    }
    return 0;
}

/* Parses and validates the whole request into job. Returns 0, or -1 with reply filled. */
static int parse_request(pgcld_server *srv, const pgcld_request *req, score_job *job, bool *return_vector,
                         pgcld_reply *reply) {
    /* As pgcld_parse_json_body() (the caller checked the Content-Type), but integers are read as
     * reals: an embedding value written as a long integer is a number like any other (the fast
     * path reads it so), not a "too big integer" for jansson's int64. */
    json_error_t jerr;
    job->root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
                           &jerr);
    if (!job->root) {
        pgcld_reply_error(reply, 400, "invalid_json", -1, NULL, "malformed JSON at line %d column %d: %s", jerr.line,
                          jerr.column, jerr.text);
        return -1;
    }
    if (!json_is_object(job->root)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL, "the body must be a JSON object");
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(job->root, key, val) {
        if (strcmp(key, "model") && strcmp(key, "items") && strcmp(key, "return_vector")) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown field '%.64s'", key);
            return -1;
        }
    }
    json_t *jmodel = json_object_get(job->root, "model");
    if (jmodel && !json_is_string(jmodel)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "model", "'model' must be a string");
        return -1;
    }
    const char *name = jmodel ? json_string_value(jmodel) : srv->cfg->default_model;
    json_t *jrv = json_object_get(job->root, "return_vector");
    if (jrv && !json_is_boolean(jrv)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "return_vector", "'return_vector' must be true or false");
        return -1;
    }
    *return_vector = jrv ? json_is_true(jrv) : true;
    json_t *items = json_object_get(job->root, "items");
    if (!items || !json_is_array(items)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "items", "'items' must be an array of items");
        return -1;
    }
    size_t n = json_array_size(items);
    if (n == 0) {
        pgcld_reply_error(reply, 400, "empty_batch", -1, "items", "'items' is empty: send at least one item");
        return -1;
    }
    if (n > (size_t)srv->cfg->max_batch) {
        pgcld_reply_error(reply, 413, "batch_too_large", -1, "items", "%zu items exceed the limit of %ld per request", n,
                          srv->cfg->max_batch);
        return -1;
    }
    if (!(job->model = pgcld_score_acquire(srv, name, &job->shadow, "model", reply))) return -1;
    const pgcl_model *m = job->model;
    job->n = (int)n;
    job->ids = calloc(n, sizeof *job->ids);
    job->z = malloc(n * (size_t)m->D * sizeof(float));
    if (!job->ids || !job->z) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    for (int i = 0; i < (int)n; i++) {
        json_t *item = json_array_get(items, (size_t)i);
        char field[64];
        snprintf(field, sizeof field, "items[%d]", i);
        if (!json_is_object(item)) {
            pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d must be an object", i);
            return -1;
        }
        json_object_foreach(item, key, val) {
            if (strcmp(key, "id") && strcmp(key, "embedding") && strcmp(key, "embedding_b64")) {
                snprintf(field, sizeof field, "items[%d].%.32s", i, key);
                pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d: unknown field '%.64s'", i, key);
                return -1;
            }
        }
        json_t *id = json_object_get(item, "id");
        snprintf(field, sizeof field, "items[%d].id", i);
        if (!id || json_is_null(id)) {
            pgcld_reply_error(reply, 400, "missing_id", i, field, "item %d has no 'id'", i);
            return -1;
        }
        if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) > MAX_ID_BYTES ||
            strlen(json_string_value(id)) != json_string_length(id)) {
            pgcld_reply_error(reply, 400, "invalid_request", i, field,
                              "item %d: 'id' must be a non-empty string of at most %d bytes without NUL", i, MAX_ID_BYTES);
            return -1;
        }
        job->ids[i] = json_string_value(id);
        if (parse_embedding(m, item, i, job->z + (size_t)i * m->D, reply) != 0) return -1;
    }
    return 0;
}

/* The answer's text, written directly (jsonw.h): the same bytes json_dumps() wrote from the DOM
 * this replaced, without building it. NULL when out of memory. */
static char *build_answer(const score_job *job, const char *request_id, bool return_vector) {
    const pgcl_model *m = job->model;
    char *policy = json_dumps(m->policy_json, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (!policy) return NULL;
    pgcld_jsonw w;
    size_t per_item = 160 + (size_t)m->K * 32 + (return_vector ? (size_t)m->d * 16 : 0);
    pgcld_jsonw_init(&w, 512 + strlen(policy) + (size_t)job->n * per_item);
    pgcld_jsonw_lit(&w, "{\"request_id\":");
    pgcld_jsonw_str(&w, request_id);
    pgcld_jsonw_lit(&w, ",\"model\":{\"name\":");
    pgcld_jsonw_str(&w, m->name);
    pgcld_jsonw_lit(&w, ",\"version\":");
    pgcld_jsonw_str(&w, m->version);
    pgcld_jsonw_lit(&w, ",\"sha256\":");
    pgcld_jsonw_str(&w, m->sha256);
    pgcld_jsonw_lit(&w, ",\"task\":");
    pgcld_jsonw_str(&w, pgcl_task_str(m->task));
    pgcld_jsonw_lit(&w, "},\"policy\":");
    pgcld_jsonw_lit(&w, policy);
    free(policy);
    pgcld_jsonw_lit(&w, ",\"results\":[");
    for (int i = 0; i < job->n; i++) {
        const float *p = job->probs + (size_t)i * m->K;
        pgcld_jsonw_lit(&w, i ? ",{\"id\":" : "{\"id\":");
        pgcld_jsonw_str(&w, job->ids[i]);
        pgcld_jsonw_lit(&w, ",\"decision_id\":");
        pgcld_jsonw_str(&w, job->decision_id[i]);
        pgcld_jsonw_lit(&w, ",\"label\":");
        pgcld_jsonw_str(&w, m->labels[job->label_index[i]]);
        pgcld_jsonw_lit(&w, ",\"label_index\":");
        pgcld_jsonw_int(&w, job->label_index[i]);
        pgcld_jsonw_lit(&w, ",\"probabilities\":{");
        for (int k = 0; k < m->K; k++) {
            if (k) pgcld_jsonw_lit(&w, ",");
            pgcld_jsonw_str(&w, m->labels[k]);
            pgcld_jsonw_lit(&w, ":");
            pgcld_jsonw_f32(&w, p[k]);
        }
        pgcld_jsonw_lit(&w, "},\"decision\":");
        pgcld_jsonw_str(&w, pgcl_decision_str(job->decision[i]));
        if (m->task == PGCL_TASK_BINARY) {
            pgcld_jsonw_lit(&w, ",\"toxicity\":");
            pgcld_jsonw_f32(&w, p[1]);
        }
        if (return_vector) {
            const float *v = job->vectors + (size_t)i * m->d;
            pgcld_jsonw_lit(&w, ",\"vector\":[");
            for (int j = 0; j < m->d; j++) {
                if (j) pgcld_jsonw_lit(&w, ",");
                pgcld_jsonw_f32(&w, v[j]);
            }
            pgcld_jsonw_lit(&w, "]");
        }
        pgcld_jsonw_lit(&w, "}");
    }
    pgcld_jsonw_lit(&w, "]}");
    return pgcld_jsonw_take(&w, NULL);
}

pgcl_model *pgcld_score_acquire(pgcld_server *srv, const char *name, pgcl_model **shadow, const char *field,
                                pgcld_reply *reply) {
    pgcl_model *m = pgcl_registry_acquire(srv->registry, name, shadow);
    if (m) return m;
    if (pgcl_registry_knows(srv->registry, name)) {
        reply->retry_after = "5";
        pgcld_reply_error(reply, 503, "not_ready", -1, field,
                          "model '%.128s' has no loaded version (see GET /v1/models for the reason)", name);
    } else {
        pgcld_reply_error(reply, 404, "model_not_found", -1, field, "no model named '%.128s' is being served", name);
    }
    return NULL;
}

/* The fast path's model lookup: the same acquisition the DOM path makes, kept for the request. */
typedef struct fast_ctx {
    pgcld_server *srv;
    pgcl_model *model, *shadow;
} fast_ctx;

static int fast_resolve(void *arg, const char *name) {
    fast_ctx *c = arg;
    c->model = pgcl_registry_acquire(c->srv->registry, name ? name : c->srv->cfg->default_model, &c->shadow);
    return c->model ? c->model->D : 0;
}

/* Parses a valid request with the fast parser; returns false (nothing held) when it bails, and
 * the DOM path then parses the body and words the error. */
static bool parse_fast(pgcld_server *srv, const pgcld_request *req, score_job *job, bool *return_vector) {
    fast_ctx ctx = {.srv = srv};
    pgcld_fast_request fr;
    if (pgcld_fast_parse_score(req->body, req->body_len, (int)srv->cfg->max_batch, fast_resolve, &ctx, &fr) !=
        PGCLD_FAST_OK) {
        pgcl_model_release(ctx.model);
        pgcl_model_release(ctx.shadow);
        return false;
    }
    job->model = ctx.model;
    job->shadow = ctx.shadow;
    job->n = fr.n;
    job->z = fr.z;
    job->ids = (const char **)fr.ids;
    job->id_arena = fr.id_arena;
    *return_vector = fr.return_vector;
    return true;
}

/* About what a job holds per item from here to its answer, beside its body: the input (z, from the
 * input path), the outputs, the decision row with its ids and texts, the float16 copy of the input
 * when inputs are stored as float16 (float32 rows point into z), and the item's share of the answer
 * (its vector written out, when asked). */
static size_t job_bytes_per_item(const pgcld_server *srv, const score_job *job) {
    const pgcl_model *m = job->model;
    size_t b = (size_t)m->D * sizeof(float) + (size_t)(m->d + m->K) * sizeof(float) + sizeof(pgcl_decision_row) +
               sizeof(pgcl_decision) + PGCL_UUID_LEN + 1 + 65 + 512;
    if (strcmp(srv->cfg->store_inputs, "float16") == 0) b += (size_t)m->D * sizeof(uint16_t);
    if (job->return_vector) b += (size_t)m->d * 16;
    return b;
}

int pgcld_score_run(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply) {
    const pgcl_model *m = job->model;
    size_t n = (size_t)job->n;
    pgcld_request_hold_memory(srv, req, n * job_bytes_per_item(srv, job));
    job->vectors = malloc(n * (size_t)m->d * sizeof(float));
    job->probs = malloc(n * (size_t)m->K * sizeof(float));
    job->label_index = calloc(n, sizeof *job->label_index);
    job->decision = calloc(n, sizeof *job->decision);
    job->decision_id = calloc(n, sizeof *job->decision_id);
    job->input_sha = calloc(n, sizeof *job->input_sha);
    job->probs_json = calloc(n, sizeof *job->probs_json);
    job->rows = calloc(n, sizeof *job->rows);
    int64_t t_queue = pgcl_monotonic_us(), t_compute = 0;
    int forward_rows = 0;
    if (!job->vectors || !job->probs || !job->label_index || !job->decision || !job->decision_id || !job->input_sha ||
        !job->probs_json || !job->rows ||
        pgcl_batcher_forward(srv->batcher, m, job->z, job->n, job->vectors, job->probs, &t_compute, &forward_rows) !=
            PGCL_OK) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    /* Finite inputs of huge magnitude (1e38) overflow inside the model: such an item has no
     * decision to record (NaN probabilities would decide "allow"). Refused like a non-finite input. */
    for (size_t i = 0; i < n; i++) {
        bool finite = true;
        for (int k = 0; finite && k < m->K; k++) finite = isfinite(job->probs[i * (size_t)m->K + (size_t)k]);
        for (int k = 0; finite && k < m->d; k++) finite = isfinite(job->vectors[i * (size_t)m->d + (size_t)k]);
        if (!finite) {
            pgcld_reply_error(reply, 400, "non_finite_value", (int)i, NULL,
                              "item %zu: the model's output is not finite for this embedding (its values are too "
                              "large)", i);
            return -1;
        }
    }
    int64_t t_computed = pgcl_monotonic_us();
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_QUEUE, (double)(t_compute - t_queue) * 1e-6);
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_COMPUTE, (double)(t_computed - t_compute) * 1e-6);

    pgcl_uuid7(job->request_id);
    int64_t latency = pgcl_monotonic_us() - req->t_start_us;
    for (size_t i = 0; i < n; i++) {
        const float *p = job->probs + i * (size_t)m->K;
        job->decision[i] = pgcl_model_decide(m, p, &job->label_index[i]);
        pgcl_uuid7(job->decision_id[i]);
        pgcl_sha256_hex(job->z + i * (size_t)m->D, (size_t)m->D * sizeof(float), job->input_sha[i]);
        job->probs_json[i] = pgcl_model_probabilities_json(m, p);
        if (!job->probs_json[i]) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return -1;
        }
        bool threshold = m->policy.kind == PGCL_POLICY_THRESHOLD;
        job->rows[i] = (pgcl_decision_row){
            .decision_id = job->decision_id[i], .request_id = job->request_id,
            .item_id = job->ids[i], .model_name = m->name, .model_version = m->version, .model_sha256 = m->sha256,
            .label = m->labels[job->label_index[i]], .label_index = job->label_index[i],
            .probabilities_json = job->probs_json[i], .has_toxicity = m->task == PGCL_TASK_BINARY,
            .toxicity = m->task == PGCL_TASK_BINARY ? p[1] : 0, .decision = pgcl_decision_str(job->decision[i]),
            .policy_json = m->policy_text, .has_thresholds = threshold,
            .t_review = threshold ? m->policy.t_review : 0, .t_block = threshold ? m->policy.t_block : 0,
            .vector = job->vectors + i * (size_t)m->d, .d = m->d, .input_sha256 = job->input_sha[i],
            .latency_us = latency,
        };
    }
    /* The input kept for re-scoring on review (--store-inputs). */
    if (strcmp(srv->cfg->store_inputs, "float16") == 0) {
        job->inputs_f16 = malloc(n * (size_t)m->D * sizeof *job->inputs_f16);
        if (!job->inputs_f16) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return -1;
        }
        pgcl_f32_to_f16_array(job->z, job->inputs_f16, n * (size_t)m->D);
    }
    /* An item with a value float16 cannot hold (|x| > 65504 converts to infinity) keeps its input
     * as float32: the stored input must be the one that was scored, or a re-score would compute
     * something else (or nothing) and still be compared with the original. */
    for (size_t i = 0; i < n && strcmp(srv->cfg->store_inputs, "none") != 0; i++) {
        const uint16_t *row_f16 = job->inputs_f16 ? job->inputs_f16 + i * (size_t)m->D : NULL;
        bool half = row_f16 && pgcl_f16_all_finite(row_f16, (size_t)m->D);
        job->rows[i].input = half ? (const void *)row_f16 : (const void *)(job->z + i * (size_t)m->D);
        job->rows[i].input_bytes = m->D * (half ? 2 : 4);
        job->rows[i].input_dtype = half ? "f16" : "f32";
    }
    char err[512];
    pgcl_status st;
    if (job->idem.key) { /* the answer is stored with the rows, so it is built first */
        PGCL_ASSERT(job->answer_fn != NULL);
        if (!(job->answer = job->answer_fn(job, job->answer_ctx))) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return -1;
        }
        job->idem.request_id = job->request_id;
        job->idem.answer = job->answer;
        st = pgcl_audit_append_with(srv->audit, job->rows, job->n, pgcl_idem_store, &job->idem, err, sizeof err);
    } else {
        st = pgcl_audit_append(srv->audit, job->rows, job->n, err, sizeof err);
    }
    if (st != PGCL_OK) {
        reply->retry_after = "1";
        if (st == PGCL_ERR_BUSY)
            pgcld_reply_error(reply, 503, "overloaded", -1, NULL, "the audit log is behind; retry shortly");
        else
            pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL,
                              "the decision could not be recorded, so it is not returned; retry shortly");
        pgcl_log_error("score: audit append failed (%s): %s", pgcl_status_str(st), err);
        return -1;
    }
    int64_t t_committed = pgcl_monotonic_us();
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_AUDIT, (double)(t_committed - t_computed) * 1e-6);
    pgcld_metrics_batch(srv->metrics, job->n);
    pgcld_metrics_forward_rows(srv->metrics, forward_rows);
    pgcld_metrics_scored(srv->metrics, m->name, m->version, job->n);
    if (job->shadow) {
        pgcl_model *shadow = job->shadow;
        job->shadow = NULL; /* the shadow worker takes both references */
        pgcl_shadow_submit(srv->shadow, pgcl_model_retain(job->model), shadow, job->n, job->z,
                            (const char(*)[PGCL_UUID_LEN + 1])job->decision_id, job->label_index, job->decision, job->probs);
    }
    return 0;
}

/* True for "application/octet-stream" with optional parameters. */
static bool is_octet_stream(const char *ct) {
    return pgcld_is_media_type(ct, "application/octet-stream", false);
}

int pgcld_score_take_floats(pgcld_server *srv, score_job *job, const unsigned char *data, size_t bytes,
                            const char *field, pgcld_reply *reply) {
    const pgcl_model *m = job->model;
    size_t row = (size_t)m->D * sizeof(float);
    if (bytes == 0) {
        pgcld_reply_error(reply, 400, "empty_batch", -1, field, "the body holds no embedding");
        return -1;
    }
    if (bytes % row) {
        pgcld_reply_error(reply, 400, "dimension_mismatch", -1, field,
                          "%zu bytes are not a whole number of %d-value float32 embeddings (%zu bytes each) for model %s",
                          bytes, m->D, row, m->name);
        return -1;
    }
    size_t n = bytes / row;
    if (n > (size_t)srv->cfg->max_batch) {
        pgcld_reply_error(reply, 413, "batch_too_large", -1, field, "%zu embeddings exceed the limit of %ld per request",
                          n, (long)srv->cfg->max_batch);
        return -1;
    }
    job->n = (int)n;
    job->z = malloc(bytes);
    if (!job->z) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    memcpy(job->z, data, bytes); /* little-endian float32 on the wire and in memory */
    for (size_t k = 0; k < n * (size_t)m->D; k++) {
        if (!isfinite(job->z[k])) {
            pgcld_reply_error(reply, 400, "non_finite_value", (int)(k / (size_t)m->D), field,
                              "item %zu: value %zu is NaN or infinite", k / (size_t)m->D, k % (size_t)m->D);
            return -1;
        }
    }
    return 0;
}

/* Item ids for inputs that carry none in the body: a JSON array of n strings in the Pgcld-Item-Ids
 * header, or the item indexes "0", "1", … */
int pgcld_score_take_ids(score_job *job, const char *header_json, const char *field, pgcld_reply *reply) {
    size_t n = (size_t)job->n;
    job->ids = calloc(n, sizeof *job->ids);
    job->id_arena = malloc(n * 21 + (header_json ? strlen(header_json) : 0) + 1);
    if (!job->ids || !job->id_arena) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    size_t off = 0;
    if (!header_json) {
        for (size_t i = 0; i < n; i++) {
            job->ids[i] = job->id_arena + off;
            off += (size_t)sprintf(job->id_arena + off, "%zu", i) + 1;
        }
        return 0;
    }
    json_t *arr = json_loads(header_json, JSON_REJECT_DUPLICATES, NULL);
    int rc = -1;
    if (!json_is_array(arr) || json_array_size(arr) != n) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field, "%s must be a JSON array of %zu id strings", field, n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_array_get(arr, i);
        if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) > MAX_ID_BYTES ||
            strlen(json_string_value(id)) != json_string_length(id)) {
            pgcld_reply_error(reply, 400, "invalid_request", (int)i, field,
                              "item %zu: ids must be non-empty strings of at most %d bytes without NUL", i, MAX_ID_BYTES);
            goto done;
        }
        job->ids[i] = job->id_arena + off;
        memcpy(job->id_arena + off, json_string_value(id), json_string_length(id) + 1);
        off += json_string_length(id) + 1;
    }
    rc = 0;
done:
    json_decref(arr);
    return rc;
}

/* A JSON body names its model, options and item ids in the body: the query parameters and the
 * Pgcld-Item-Ids header of octet-stream bodies beside it would be a second, ignored answer to the
 * same question. True with reply set (400). */
static bool json_body_with_query(const pgcld_request *req, pgcld_reply *reply) {
    static const char *const octet_params[] = {"model", "return_vector"};
    for (size_t i = 0; i < sizeof octet_params / sizeof octet_params[0]; i++) {
        if (!pgcld_request_query(req, octet_params[i])) continue;
        pgcld_reply_error(reply, 400, "invalid_request", -1, octet_params[i],
                          "query parameter '%s' goes with application/octet-stream bodies; a JSON body gives '%s' "
                          "in the body", octet_params[i], octet_params[i]);
        return true;
    }
    if (pgcld_request_header(req, "Pgcld-Item-Ids")) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "Pgcld-Item-Ids",
                          "the Pgcld-Item-Ids header goes with application/octet-stream bodies; a JSON body gives "
                          "each item's 'id'");
        return true;
    }
    return false;
}

/* application/octet-stream: n × D little-endian float32, model and options in the query string
 * (which http.c has checked: only these two, each once, with a value). */
static int parse_octets(pgcld_server *srv, const pgcld_request *req, score_job *job, bool *return_vector,
                        pgcld_reply *reply) {
    const char *name = pgcld_request_query(req, "model"), *rv = pgcld_request_query(req, "return_vector");
    if (rv && strcmp(rv, "true") && strcmp(rv, "false")) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "return_vector", "'return_vector' must be true or false");
        return -1;
    }
    *return_vector = !rv || strcmp(rv, "true") == 0;
    if (!name) name = srv->cfg->default_model;
    if (!(job->model = pgcld_score_acquire(srv, name, &job->shadow, "model", reply))) return -1;
    if (pgcld_score_take_floats(srv, job, (const unsigned char *)req->body, req->body_len, "body", reply) != 0)
        return -1;
    return pgcld_score_take_ids(job, pgcld_request_header(req, "Pgcld-Item-Ids"), "Pgcld-Item-Ids", reply);
}

/* ---- Idempotency-Key ----
 * Keys being answered right now, per scope (the API key): a second request with the same key
 * while the first runs gets 409 instead of scoring twice. At most one entry per connection. */
struct pgcld_idem_claim {
    char scope[sizeof ((pgcl_identity *)0)->key_id];
    char key[PGCL_IDEM_KEY_MAX + 1];
    struct pgcld_idem_claim *next;
};

static pthread_mutex_t g_idem_lock = PTHREAD_MUTEX_INITIALIZER;
static pgcld_idem_claim *g_idem_in_flight;

/* Claims (scope, key); NULL when it is already claimed (or out of memory: *oom set). */
static pgcld_idem_claim *idem_claim(const char *scope, const char *key, bool *oom) {
    *oom = false;
    pthread_mutex_lock(&g_idem_lock);
    for (pgcld_idem_claim *s = g_idem_in_flight; s; s = s->next) {
        if (strcmp(s->scope, scope) == 0 && strcmp(s->key, key) == 0) {
            pthread_mutex_unlock(&g_idem_lock);
            return NULL;
        }
    }
    pgcld_idem_claim *slot = calloc(1, sizeof *slot);
    if (slot) {
        snprintf(slot->scope, sizeof slot->scope, "%s", scope);
        snprintf(slot->key, sizeof slot->key, "%s", key);
        slot->next = g_idem_in_flight;
        g_idem_in_flight = slot;
    }
    pthread_mutex_unlock(&g_idem_lock);
    *oom = !slot;
    return slot;
}

void pgcld_score_idempotency_end(pgcld_idem_claim *slot) {
    if (!slot) return;
    pthread_mutex_lock(&g_idem_lock);
    for (pgcld_idem_claim **p = &g_idem_in_flight; *p; p = &(*p)->next) {
        if (*p == slot) {
            *p = slot->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_idem_lock);
    free(slot);
}

static const char *const g_replayed_headers[] = {"Idempotent-Replayed", "true", NULL};

int pgcld_score_idempotency_begin(pgcld_server *srv, const pgcld_request *req, score_job *job,
                                  pgcld_idem_claim **slot, pgcld_reply *reply) {
    *slot = NULL;
    const char *key = pgcld_request_header(req, "Idempotency-Key");
    if (!key) return 0;
    if (!pgcl_idem_key_valid(key)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "Idempotency-Key",
                          "the Idempotency-Key header must be 1 to %d visible ASCII characters", PGCL_IDEM_KEY_MAX);
        return 1;
    }
    const char *scope = req->identity ? req->identity->key_id : "anonymous";
    bool oom;
    if (!(*slot = idem_claim(scope, key, &oom))) {
        if (oom) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        } else {
            reply->retry_after = "1";
            pgcld_reply_error(reply, 409, "idempotency_in_flight", -1, "Idempotency-Key",
                              "a request with this Idempotency-Key is still being answered; retry after it");
        }
        return 1;
    }
    pgcl_sha256_hex(req->body, req->body_len, job->body_sha256);
    if (!pgcld_request_fingerprint(req, job->body_sha256, job->request_sha256)) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return 1;
    }
    char err[512], now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    pgcl_qpool *pool = pgcl_queries_pool(srv->cfg->db_path, err, sizeof err);
    sqlite3 *db = NULL;
    bool found = false;
    pgcl_idem_record rec = {0};
    pgcl_status st = pool ? pgcl_qpool_acquire(pool, &db, err, sizeof err) : PGCL_ERR_DB;
    if (st == PGCL_OK) {
        st = pgcl_idem_lookup(db, scope, key, now, &found, &rec, err, sizeof err);
        pgcl_qpool_release(pool, db);
    }
    if (st != PGCL_OK) {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "idempotency keys cannot be read; retry shortly");
        pgcl_log_error("score: idempotency lookup failed: %s", err);
        return 1;
    }
    if (found) {
        if (pgcl_idem_same_request(&rec, job->request_sha256, job->body_sha256)) {
            reply->status = 200;
            reply->text = rec.answer; /* the original answer, byte for byte */
            reply->headers = g_replayed_headers;
        } else {
            free(rec.answer);
            pgcld_reply_error(reply, 422, "idempotency_key_reused", -1, "Idempotency-Key",
                              "this Idempotency-Key was used for a different request (request %s): another body, "
                              "route, model, query or item ids",
                              rec.request_id);
        }
        return 1;
    }
    job->idem = (pgcl_idem_entry){.scope = (*slot)->scope, .key = (*slot)->key, .body_sha256 = job->body_sha256,
                                  .request_sha256 = job->request_sha256, .ttl_s = srv->cfg->idempotency_ttl_s};
    return 0;
}

/* The answer of POST /v1/score (answer_fn of its jobs). */
static char *score_answer(const score_job *job, const void *ctx) {
    (void)ctx;
    return build_answer(job, job->request_id, job->return_vector);
}

void pgcld_handle_score(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    score_job job = {.answer_fn = score_answer};
    bool return_vector = true;
    pgcld_idem_claim *slot = NULL;
    if (pgcld_score_idempotency_begin(srv, req, &job, &slot, reply) != 0) goto done;
    if (is_octet_stream(req->content_type)) {
        if (parse_octets(srv, req, &job, &return_vector, reply) != 0) goto done;
    } else if (!pgcld_is_json_type(req->content_type)) {
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json or application/octet-stream, got '%.64s'",
                          req->content_type ? req->content_type : "(none)");
        goto done;
    } else if (json_body_with_query(req, reply) ||
               (!parse_fast(srv, req, &job, &return_vector) &&
                parse_request(srv, req, &job, &return_vector, reply) != 0)) {
        goto done;
    }
    job.return_vector = return_vector;

    if (pgcld_score_run(srv, req, &job, reply) != 0) goto done;
    reply->status = 200;
    if (job.answer) {
        reply->text = job.answer;
        job.answer = NULL;
    } else {
        reply->text = score_answer(&job, NULL);
    }
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_TOTAL, (double)(pgcl_monotonic_us() - req->t_start_us) * 1e-6);
    if (!reply->text) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
done:
    pgcld_score_job_free(&job);
    pgcld_score_idempotency_end(slot);
}
