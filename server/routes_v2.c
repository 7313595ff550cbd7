/* The Open Inference Protocol (KServe v2 / Triton) on the same scoring pipeline as /v1/score, so
 * existing Triton and KServe clients can call pgcld:
 *   GET  /v2                          server metadata
 *   GET  /v2/health/live, /v2/health/ready
 *   GET  /v2/models/{name}            model metadata (inputs and outputs)
 *   GET  /v2/models/{name}/ready
 *   POST /v2/models/{name}/infer      JSON tensors, or the binary tensor extension
 *                                     (Inference-Header-Content-Length: a JSON header, then raw
 *                                     tensor bytes in input order, sized by binary_data_size)
 * Inputs: "embedding" FP32 [n, D] (required) and "id" BYTES [n] (optional item ids). Outputs:
 * label, decision, decision_id (BYTES [n]), probabilities FP32 [n, K], vector FP32 [n, d].
 * Validation and audit rows are exactly those of /v1/score; errors keep pgcld's JSON error body. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "server.h"

#ifndef PGCLD_VERSION
#define PGCLD_VERSION "dev"
#endif

void pgcld_handle_v2_server(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = json_pack("{s:s, s:s, s:[s]}", "name", "pgcld", "version", PGCLD_VERSION, "extensions",
                            "binary_tensor_data");
}

void pgcld_handle_v2_live(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    reply->status = 200;
    reply->body = json_pack("{s:b}", "live", 1);
}

void pgcld_handle_v2_ready(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    bool ready = pgcl_registry_ready_count(srv->registry) > 0 && pgcl_audit_healthy(srv->audit) &&
                 !atomic_load(&srv->draining);
    reply->status = ready ? 200 : 503;
    if (!ready) reply->retry_after = "1";
    reply->body = json_pack("{s:b}", "ready", ready);
}

void pgcld_handle_v2_model(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_model *m = pgcld_score_acquire(srv, req->params[0], NULL, NULL, reply);
    if (!m) return;
    reply->status = 200;
    reply->body = json_pack(
        "{s:s, s:[s], s:s, s:[{s:s, s:s, s:[i, i]}, {s:s, s:s, s:[i]}], s:[{s:s, s:s, s:[i]}, {s:s, s:s, s:[i]},"
        " {s:s, s:s, s:[i]}, {s:s, s:s, s:[i, i]}, {s:s, s:s, s:[i, i]}]}",
        "name", m->name, "versions", m->version, "platform", "pgcld", "inputs", "name", "embedding", "datatype", "FP32",
        "shape", -1, m->D, "name", "id", "datatype", "BYTES", "shape", -1, "outputs", "name", "label", "datatype",
        "BYTES", "shape", -1, "name", "decision", "datatype", "BYTES", "shape", -1, "name", "decision_id", "datatype",
        "BYTES", "shape", -1, "name", "probabilities", "datatype", "FP32", "shape", -1, m->K, "name", "vector",
        "datatype", "FP32", "shape", -1, m->d);
    pgcl_model_release(m);
}

void pgcld_handle_v2_model_ready(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_model *m = pgcld_score_acquire(srv, req->params[0], NULL, NULL, reply);
    if (!m) return;
    reply->status = 200;
    reply->body = json_pack("{s:s, s:s, s:b}", "name", m->name, "version", m->version, "ready", 1);
    pgcl_model_release(m);
}

/* Appends the FP32 values of a (possibly nested) JSON array to z; returns the count, -1 when there
 * are more than cap, or -2 when an element is not a number. */
static long flatten(json_t *v, float *z, long have, long cap) {
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            have = flatten(e, z, have, cap);
            if (have < 0) return have;
        }
        return have;
    }
    if (!json_is_number(v)) return -2;
    if (have >= cap) return -1;
    z[have] = (float)json_number_value(v);
    return have + 1;
}

/* Reads inputs[] of the inference header into job (model set): the embedding tensor (JSON data or
 * binary bytes from `binary`, consumed in input order) and the optional ids. */
static int take_inputs(pgcld_server *srv, json_t *hdr, const unsigned char *binary, size_t binary_len,
                       score_job *job, pgcld_reply *reply) {
    json_t *inputs = json_object_get(hdr, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "inputs", "'inputs' must be a non-empty array of tensors");
        return -1;
    }
    size_t used = 0;
    json_t *ids = NULL;
    bool have_embedding = false;
    size_t i;
    json_t *in;
    json_array_foreach(inputs, i, in) {
        const char *name = json_string_value(json_object_get(in, "name"));
        const char *dtype = json_string_value(json_object_get(in, "datatype"));
        json_t *shape = json_object_get(in, "shape"), *params = json_object_get(in, "parameters");
        json_t *bsize = params ? json_object_get(params, "binary_data_size") : NULL;
        char field[48];
        snprintf(field, sizeof field, "inputs[%zu]", i);
        if (!name || !dtype || !json_is_array(shape)) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field, "a tensor needs name, datatype and shape");
            return -1;
        }
        const unsigned char *bytes = NULL;
        size_t nbytes = 0;
        if (bsize) {
            if (!json_is_integer(bsize) || json_integer_value(bsize) < 0 ||
                (size_t)json_integer_value(bsize) > binary_len - used) {
                pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                                  "binary_data_size does not fit the binary part of the body");
                return -1;
            }
            bytes = binary + used;
            nbytes = (size_t)json_integer_value(bsize);
            used += nbytes;
        }
        if (strcmp(name, "embedding") == 0) {
            if (have_embedding || strcmp(dtype, "FP32") != 0 || json_array_size(shape) != 2) {
                pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                                  "'embedding' must be one FP32 tensor of shape [n, D]");
                return -1;
            }
            have_embedding = true;
            json_int_t n = json_integer_value(json_array_get(shape, 0)), D = json_integer_value(json_array_get(shape, 1));
            if (D != job->model->D) {
                pgcld_reply_error(reply, 400, "dimension_mismatch", -1, field, "shape [%lld, %lld]: model %s expects D = %d",
                                  (long long)n, (long long)D, job->model->name, job->model->D);
                return -1;
            }
            if (bytes) {
                if (nbytes != (size_t)n * (size_t)D * 4) {
                    pgcld_reply_error(reply, 400, "dimension_mismatch", -1, field,
                                      "binary_data_size %zu does not match shape [%lld, %lld] of FP32", nbytes,
                                      (long long)n, (long long)D);
                    return -1;
                }
                if (pgcld_score_take_floats(srv, job, bytes, nbytes, field, reply) != 0) return -1;
            } else {
                json_t *data = json_object_get(in, "data");
                if (n <= 0 || n > srv->cfg->max_batch) {
                    pgcld_reply_error(reply, n <= 0 ? 400 : 413, n <= 0 ? "empty_batch" : "batch_too_large", -1, field,
                                      "shape [%lld, %lld]: 1 to %ld embeddings per request", (long long)n,
                                      (long long)D, (long)srv->cfg->max_batch);
                    return -1;
                }
                float *tmp = malloc(sizeof(float) * (size_t)n * (size_t)D);
                long got = tmp ? flatten(data, tmp, 0, (long)(n * D)) : -1;
                int rc = 0;
                if (got == -2 || !json_is_array(data)) {
                    pgcld_reply_error(reply, 400, "invalid_request", -1, field, "'data' must be an array of numbers");
                    rc = -1;
                } else if (got != (long)(n * D)) {
                    pgcld_reply_error(reply, 400, "dimension_mismatch", -1, field,
                                      "'data' must hold %lld numbers for shape [%lld, %lld]", (long long)(n * D),
                                      (long long)n, (long long)D);
                    rc = -1;
                } else {
                    rc = pgcld_score_take_floats(srv, job, (const unsigned char *)tmp, sizeof(float) * (size_t)(n * D),
                                                 field, reply);
                }
                free(tmp);
                if (rc != 0) return -1;
            }
        } else if (strcmp(name, "id") == 0) {
            ids = json_object_get(in, "data");
            if (strcmp(dtype, "BYTES") != 0 || bytes || !json_is_array(ids)) {
                pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                                  "'id' must be a BYTES tensor with its strings as JSON data");
                return -1;
            }
        } else {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field, "unknown input '%.64s' (expected embedding, id)", name);
            return -1;
        }
    }
    if (!have_embedding) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "inputs", "no 'embedding' input");
        return -1;
    }
    if (used != binary_len) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL, "%zu binary bytes after the header are not claimed by any input",
                          binary_len - used);
        return -1;
    }
    char *ids_text = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
    int rc = pgcld_score_take_ids(job, ids_text, "inputs.id", reply);
    free(ids_text);
    return rc;
}

static json_t *tensor(const char *name, const char *dtype, json_t *shape, json_t *data) {
    return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "datatype", dtype, "shape", shape, "data", data);
}

void pgcld_handle_v2_infer(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    score_job job = {0};
    json_t *hdr = NULL;
    const char *hlen = pgcld_request_header(req, "Inference-Header-Content-Length");
    size_t header_len = req->body_len;
    if (hlen) {
        char *end;
        unsigned long long v = strtoull(hlen, &end, 10);
        if (!(*hlen >= '0' && *hlen <= '9') || *end || v > req->body_len) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, "Inference-Header-Content-Length",
                              "Inference-Header-Content-Length must be a byte count within the body");
            return;
        }
        header_len = (size_t)v;
    } else if (!pgcld_is_json_type(req->content_type)) {
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json (or use Inference-Header-Content-Length)");
        return;
    }
    json_error_t jerr;
    hdr = json_loadb(req->body, header_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!hdr || !json_is_object(hdr)) {
        pgcld_reply_error(reply, 400, hdr ? "invalid_request" : "invalid_json", -1, NULL, "inference header: %s",
                          hdr ? "must be a JSON object" : jerr.text);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(hdr, key, val) {
        if (strcmp(key, "id") && strcmp(key, "inputs") && strcmp(key, "outputs") && strcmp(key, "parameters")) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown member '%.64s' of the inference request",
                              key);
            goto done;
        }
    }
    if (!(job.model = pgcld_score_acquire(srv, req->params[0], &job.shadow, NULL, reply))) goto done;
    if (take_inputs(srv, hdr, (const unsigned char *)req->body + header_len, req->body_len - header_len, &job, reply) != 0)
        goto done;
    if (pgcld_score_run(srv, req, &job, reply) != 0) goto done;

    const pgcl_model *m = job.model;
    json_t *labels = json_array(), *decisions = json_array(), *ids = json_array(), *probs = json_array(),
           *vectors = json_array();
    for (int i = 0; i < job.n; i++) {
        json_array_append_new(labels, json_string(m->labels[job.label_index[i]]));
        json_array_append_new(decisions, json_string(pgcl_decision_str(job.decision[i])));
        json_array_append_new(ids, json_string(job.decision_id[i]));
        for (int k = 0; k < m->K; k++) json_array_append_new(probs, json_real(job.probs[(size_t)i * m->K + k]));
        for (int j = 0; j < m->d; j++) json_array_append_new(vectors, json_real(job.vectors[(size_t)i * m->d + j]));
    }
    json_t *req_id = json_object_get(hdr, "id");
    reply->status = 200;
    reply->body = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:[o, o, o, o, o]}", "model_name", m->name, "model_version",
                            m->version, "id", json_is_string(req_id) ? json_string_value(req_id) : job.request_id,
                            "parameters", "request_id", job.request_id, "model_sha256", m->sha256, "outputs",
                            tensor("label", "BYTES", json_pack("[i]", job.n), labels),
                            tensor("decision", "BYTES", json_pack("[i]", job.n), decisions),
                            tensor("decision_id", "BYTES", json_pack("[i]", job.n), ids),
                            tensor("probabilities", "FP32", json_pack("[i, i]", job.n, m->K), probs),
                            tensor("vector", "FP32", json_pack("[i, i]", job.n, m->d), vectors));
    pgcld_metrics_stage(srv->metrics, PGCLD_STAGE_TOTAL, (double)(pgcl_monotonic_us() - req->t_start_us) * 1e-6);
done:
    json_decref(hdr);
    pgcld_score_job_free(&job);
}
