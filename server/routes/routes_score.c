/* POST /v1/score: parse (score_parse.c), score (core/score/score.c, through pgcld_score_begin, which
 * the Open Inference Protocol's route shares: the request is suspended until the rows are durable),
 * answer.
 *
 * Order matters for the audit guarantee: nothing is computed until the whole request validated
 * (a rejected request writes no row), and the answer is built only after the rows are durable
 * (or, with an Idempotency-Key, built first and committed with them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "item_facts.h"
#include "jsonw.h"
#include "log.h"
#include "score_job.h"
#include "server.h"

score_job *pgcld_score_job_create(char *(*answer_fn)(const score_job *job, const void *ctx)) {
    score_job *job = calloc(1, sizeof *job);
    if (job) job->answer_fn = answer_fn;
    return job;
}

void pgcld_score_job_free(score_job *j) {
    if (!j) return;
    pgcl_score_result_clear(&j->result);
    free(j->ids);
    free(j->z);
    free(j->id_arena);
    free(j->facts);
    free(j->facts_arena);
    pgcl_model_release(j->model);
    pgcl_model_release(j->shadow);
    json_decref(j->root);
    json_decref(j->header);
    pgcld_score_idempotency_end(j->claim);
    free(j);
}

/* ---- the scoring call, shared with routes_v2.c ---- */

/* About what a job holds per item from here to its answer, beside its body: the input (z, from the
 * input path), the outputs, the decision row with its ids and texts, the float16 copy of the input
 * when inputs are stored as float16 (float32 rows point into z), and the item's share of the answer
 * (its vector written out, when asked). */
static size_t job_bytes_per_item(const pgcld_server *srv, const score_job *job) {
    const pgcl_model *m = job->model;
    size_t b = (size_t)m->D * sizeof(float) + (size_t)(m->d + m->K) * sizeof(float) + sizeof(pgcl_decision_row) +
               sizeof(pgcl_decision) + PGCL_UUID_LEN + 1 + 65 + 512;
    if (job->facts) b += sizeof(pgcl_item_facts) + PGCLD_TERRITORIAL_SCOPE_MAX + 1;
    if (strcmp(srv->cfg->store_inputs, "float16") == 0) b += (size_t)m->D * sizeof(uint16_t);
    if (job->return_vector) b += (size_t)m->d * 16;
    return b;
}

/* The core call's answer builder: the route's own, on the job the result belongs to. */
static char *job_answer(const pgcl_score_result *res, void *ctx) {
    const score_job *job = ctx;
    PGCL_ASSERT(res == &job->result);
    return job->answer_fn(job, job->answer_ctx);
}

/* The error answer of a failed scoring call. */
static void reply_failure(pgcl_score_failure f, const pgcl_score_result *res, pgcld_reply *reply) {
    switch (f) {
    case PGCL_SCORE_OUTPUT_NOT_FINITE:
        pgcld_reply_error(reply, 400, "non_finite_value", res->failed_item, NULL,
                          "item %d: the model's output is not finite for this embedding (its values are too large)",
                          res->failed_item);
        return;
    case PGCL_SCORE_AUDIT_BEHIND:
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "overloaded", -1, NULL, "the audit log is behind; retry shortly");
        return;
    case PGCL_SCORE_AUDIT_FAILED:
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL,
                          "the decision could not be recorded, so it is not returned; retry shortly");
        return;
    case PGCL_SCORE_OK:
    case PGCL_SCORE_IDEMPOTENCY_ANSWERED: /* score_finish replays the stored answer */
    case PGCL_SCORE_NO_MEMORY:
    case PGCL_SCORE_FORWARD_FAILED:
        break;
    }
    pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
}

/* The stages a scoring call got through, into the metrics. */
static void count_stages(pgcld_server *srv, const pgcl_model *m, pgcl_score_failure f, const pgcl_score_result *res) {
    const pgcl_score_timings *t = &res->timings;
    if (t->computed) {
        pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_QUEUE, (double)t->queue_us * 1e-6);
        pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_COMPUTE, (double)t->compute_us * 1e-6);
    }
    if (f != PGCL_SCORE_OK) return;
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_AUDIT, (double)t->audit_us * 1e-6);
    pgcld_metrics_batch(srv->metrics, res->n);
    pgcld_metrics_forward_rows(srv->metrics, t->forward_rows);
    pgcld_metrics_scored(srv->metrics, m->name, m->version, res->n);
}

/* The core call's callback (on the audit writer or a batcher worker, or in pgcld_score_begin):
 * keeps the outcome and wakes the request; the answer is written in score_finish. */
static void on_scored(void *ctx, pgcl_score_failure f) {
    score_job *job = ctx;
    job->failure = f;
    pgcld_deferred_resume(job->deferred);
}

/* The deferred answer of a scoring request (pgcld_finish_fn), on a server thread. */
static void score_finish(pgcld_server *srv, void *state, pgcld_reply *reply) {
    score_job *job = state;
    reply->log_items = job->n;
    snprintf(reply->log_model, sizeof reply->log_model, "%s", job->model->name);
    snprintf(reply->log_version, sizeof reply->log_version, "%s", job->model->version);
    count_stages(srv, job->model, job->failure, &job->result);
    if (job->failure != PGCL_SCORE_IDEMPOTENCY_ANSWERED) {
        const pgcl_score_timings *t = &job->result.timings;
        pgcld_metrics_model_call(srv->metrics, job->model->name, job->model->version, job->failure == PGCL_SCORE_OK,
                                 (pgcl_monotonic_us() - job->t_start_us) * 1000, t->computed,
                                 (int64_t)t->queue_us * 1000, (int64_t)t->compute_us * 1000);
    }
    if (job->failure == PGCL_SCORE_IDEMPOTENCY_ANSWERED) {
        pgcld_score_idempotency_replay(srv, job, reply);
        if (job->wire_fn) job->wire_fn(reply);
        pgcld_score_job_free(job);
        return;
    }
    if (job->failure != PGCL_SCORE_OK) {
        reply_failure(job->failure, &job->result, reply);
        pgcld_score_job_free(job);
        return;
    }
    reply->status = 200;
    if (job->result.answer) { /* built before the commit, for the Idempotency-Key */
        reply->text = job->result.answer;
        job->result.answer = NULL;
    } else {
        reply->text = job->answer_fn(job, job->answer_ctx);
    }
    if (!reply->text) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    else if (job->wire_fn) job->wire_fn(reply);
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_TOTAL, (double)(pgcl_monotonic_us() - job->t_start_us) * 1e-6);
    pgcld_score_job_free(job);
}

void pgcld_score_begin(pgcld_server *srv, const pgcld_request *req, score_job *job) {
    pgcld_request_hold_memory(srv, req, (size_t)job->n * job_bytes_per_item(srv, job));
    pgcl_score_env env = {.batcher = srv->batcher, .audit = srv->audit, .shadow = srv->shadow,
                          .store_inputs = pgcl_store_inputs_parse(srv->cfg->store_inputs)};
    pgcl_score_input in = {.model = job->model, .shadow = job->shadow, .n = job->n,
                           .ids = (const char *const *)job->ids, .z = job->z, .t_start_us = req->t_start_us,
                           .request_id = req->request_id, .trace_id = req->trace_id, .facts = job->facts,
                           .idem = job->idem.key ? &job->idem : NULL, .answer_fn = job_answer, .answer_ctx = job};
    job->shadow = NULL; /* the call takes the reference */
    job->t_start_us = req->t_start_us;
    job->deferred = pgcld_request_defer(req, score_finish, job);
    pgcl_score_start(&env, &in, &job->result, on_scored, job);
}

/* ---- the answer ---- */

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
        const float *p = job->result.probs + (size_t)i * m->K;
        pgcld_jsonw_lit(&w, i ? ",{\"id\":" : "{\"id\":");
        pgcld_jsonw_str(&w, job->ids[i]);
        pgcld_jsonw_lit(&w, ",\"decision_id\":");
        pgcld_jsonw_str(&w, job->result.decision_id[i]);
        pgcld_jsonw_lit(&w, ",\"label\":");
        pgcld_jsonw_str(&w, m->labels[job->result.label_index[i]]);
        pgcld_jsonw_lit(&w, ",\"label_index\":");
        pgcld_jsonw_int(&w, job->result.label_index[i]);
        pgcld_jsonw_lit(&w, ",\"probabilities\":{");
        for (int k = 0; k < m->K; k++) {
            if (k) pgcld_jsonw_lit(&w, ",");
            pgcld_jsonw_str(&w, m->labels[k]);
            pgcld_jsonw_lit(&w, ":");
            pgcld_jsonw_f32(&w, p[k]);
        }
        pgcld_jsonw_lit(&w, "},\"decision\":");
        pgcld_jsonw_str(&w, pgcl_decision_str(job->result.decision[i]));
        if (m->task == PGCL_TASK_BINARY) {
            pgcld_jsonw_lit(&w, ",\"toxicity\":");
            pgcld_jsonw_f32(&w, p[1]);
        }
        if (return_vector) {
            const float *v = job->result.vectors + (size_t)i * m->d;
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

/* The answer of POST /v1/score (answer_fn of its jobs). */
static char *score_answer(const score_job *job, const void *ctx) {
    (void)ctx;
    return build_answer(job, job->result.request_id, job->return_vector);
}

void pgcld_handle_score(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    score_job *job = pgcld_score_job_create(score_answer);
    if (!job) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    if (pgcld_score_idempotency_begin(srv, req, job, &job->claim, reply) != 0 ||
        pgcld_score_parse_v1(srv, req, job, reply) != 0) {
        pgcld_score_job_free(job);
        return;
    }
    pgcld_score_begin(srv, req, job); /* answered when the rows are durable */
}
