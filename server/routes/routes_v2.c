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

#include "jsonw.h"
#include "score_job.h"
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

/* Reads a tensor's JSON data of shape [n, cols] into z (n × cols): either flat, n × cols numbers in
 * row-major order (as the protocol writes it), or nested exactly as the shape, n arrays of cols
 * numbers. Any other nesting is refused rather than flattened: a ragged or deeper array does not
 * hold the tensor its shape announces. Returns 0, or -1 with *why set. */
static int read_tensor_data(json_t *data, size_t n, size_t cols, float *z, const char **why) {
    if (!json_is_array(data)) {
        *why = "'data' must be an array";
        return -1;
    }
    size_t len = json_array_size(data);
    bool nested = len > 0 && json_is_array(json_array_get(data, 0));
    if (!nested && len != n * cols) {
        *why = "'data' must hold n × D numbers (flat), or n arrays of D numbers (nested as the shape)";
        return -1;
    }
    if (nested && len != n) {
        *why = "'data' nested as the shape must hold n arrays of D numbers";
        return -1;
    }
    for (size_t r = 0; r < (nested ? n : 1); r++) {
        json_t *row = nested ? json_array_get(data, r) : data;
        size_t want = nested ? cols : n * cols;
        if (!json_is_array(row) || json_array_size(row) != want) {
            *why = "'data' nested as the shape must hold n arrays of D numbers";
            return -1;
        }
        for (size_t k = 0; k < want; k++) {
            json_t *v = json_array_get(row, k);
            if (!json_is_number(v)) {
                *why = "the elements of 'data' must be numbers";
                return -1;
            }
            z[r * cols + k] = (float)json_number_value(v);
        }
    }
    return 0;
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
            if (!json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1))) {
                pgcld_reply_error(reply, 400, "invalid_request", -1, field, "'embedding' shape must be [n, D] integers");
                return -1;
            }
            json_int_t n = json_integer_value(json_array_get(shape, 0)), D = json_integer_value(json_array_get(shape, 1));
            if (D != job->model->D) {
                pgcld_reply_error(reply, 400, "dimension_mismatch", -1, field, "shape [%lld, %lld]: model %s expects D = %d",
                                  (long long)n, (long long)D, job->model->name, job->model->D);
                return -1;
            }
            /* n is bounded before n * D * 4 is computed: a huge n would wrap around to the binary size. */
            if (n <= 0 || n > srv->cfg->max_batch) {
                pgcld_reply_error(reply, n <= 0 ? 400 : 413, n <= 0 ? "empty_batch" : "batch_too_large", -1, field,
                                  "shape [%lld, %lld]: 1 to %ld embeddings per request", (long long)n, (long long)D,
                                  (long)srv->cfg->max_batch);
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
                float *tmp = malloc(sizeof(float) * (size_t)n * (size_t)D);
                const char *why = NULL;
                int rc = 0;
                if (!tmp) {
                    pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
                    rc = -1;
                } else if (read_tensor_data(data, (size_t)n, (size_t)D, tmp, &why) != 0) {
                    bool count = json_is_array(data) && strncmp(why, "'data' must hold", 16) == 0;
                    pgcld_reply_error(reply, 400, count ? "dimension_mismatch" : "invalid_request", -1, field,
                                      "%s, for shape [%lld, %lld]", why, (long long)n, (long long)D);
                    rc = -1;
                } else {
                    rc = pgcld_score_adopt_floats(job, tmp, (int)n, field, reply); /* job owns tmp now */
                    tmp = NULL;
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

/* Opens one output tensor {"name","datatype","shape":[n(,cols)],"data":[ — the caller writes the
 * data and closes with "]}". */
static void tensor_open(pgcld_jsonw *w, bool first, const char *name, const char *dtype, int n, int cols) {
    pgcld_jsonw_lit(w, first ? "{\"name\":" : ",{\"name\":");
    pgcld_jsonw_str(w, name);
    pgcld_jsonw_lit(w, ",\"datatype\":");
    pgcld_jsonw_str(w, dtype);
    pgcld_jsonw_lit(w, ",\"shape\":[");
    pgcld_jsonw_int(w, n);
    if (cols > 0) {
        pgcld_jsonw_lit(w, ",");
        pgcld_jsonw_int(w, cols);
    }
    pgcld_jsonw_lit(w, "],\"data\":[");
}

/* The infer answer's text (jsonw.h: the bytes json_dumps wrote from the DOM it replaced); NULL
 * when out of memory. */
static char *infer_answer(const score_job *job, const char *id, size_t id_len) {
    const pgcl_model *m = job->model;
    pgcld_jsonw w;
    pgcld_jsonw_init(&w, 1024 + (size_t)job->n * (200 + (size_t)(m->K + m->d) * 16));
    pgcld_jsonw_lit(&w, "{\"model_name\":");
    pgcld_jsonw_str(&w, m->name);
    pgcld_jsonw_lit(&w, ",\"model_version\":");
    pgcld_jsonw_str(&w, m->version);
    pgcld_jsonw_lit(&w, ",\"id\":");
    pgcld_jsonw_strn(&w, id, id_len);
    pgcld_jsonw_lit(&w, ",\"parameters\":{\"request_id\":");
    pgcld_jsonw_str(&w, job->result.request_id);
    pgcld_jsonw_lit(&w, ",\"model_sha256\":");
    pgcld_jsonw_str(&w, m->sha256);
    pgcld_jsonw_lit(&w, "},\"outputs\":[");
    tensor_open(&w, true, "label", "BYTES", job->n, 0);
    for (int i = 0; i < job->n; i++) {
        if (i) pgcld_jsonw_lit(&w, ",");
        pgcld_jsonw_str(&w, m->labels[job->result.label_index[i]]);
    }
    pgcld_jsonw_lit(&w, "]}");
    tensor_open(&w, false, "decision", "BYTES", job->n, 0);
    for (int i = 0; i < job->n; i++) {
        if (i) pgcld_jsonw_lit(&w, ",");
        pgcld_jsonw_str(&w, pgcl_decision_str(job->result.decision[i]));
    }
    pgcld_jsonw_lit(&w, "]}");
    tensor_open(&w, false, "decision_id", "BYTES", job->n, 0);
    for (int i = 0; i < job->n; i++) {
        if (i) pgcld_jsonw_lit(&w, ",");
        pgcld_jsonw_str(&w, job->result.decision_id[i]);
    }
    pgcld_jsonw_lit(&w, "]}");
    tensor_open(&w, false, "probabilities", "FP32", job->n, m->K);
    for (size_t k = 0; k < (size_t)job->n * (size_t)m->K; k++) {
        if (k) pgcld_jsonw_lit(&w, ",");
        pgcld_jsonw_f32(&w, job->result.probs[k]);
    }
    pgcld_jsonw_lit(&w, "]}");
    tensor_open(&w, false, "vector", "FP32", job->n, m->d);
    for (size_t k = 0; k < (size_t)job->n * (size_t)m->d; k++) {
        if (k) pgcld_jsonw_lit(&w, ",");
        pgcld_jsonw_f32(&w, job->result.vectors[k]);
    }
    pgcld_jsonw_lit(&w, "]}]}");
    return pgcld_jsonw_take(&w, NULL);
}

/* The infer answer for a scored job (answer_fn of its jobs; ctx: the inference header, whose
 * "id" the answer repeats, or the request id when it has none). */
static char *v2_answer(const score_job *job, const void *ctx) {
    json_t *req_id = json_object_get(ctx, "id");
    return json_is_string(req_id) ? infer_answer(job, json_string_value(req_id), json_string_length(req_id))
                                  : infer_answer(job, job->result.request_id, strlen(job->result.request_id));
}

/* The infer handler's checks and parse, into job; 0, or -1 with reply set. */
static int parse_infer(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply) {
    const char *hlen = pgcld_request_header(req, "Inference-Header-Content-Length");
    size_t header_len = req->body_len;
    if (hlen) {
        char *end;
        unsigned long long v = strtoull(hlen, &end, 10);
        if (!(*hlen >= '0' && *hlen <= '9') || *end || v > req->body_len) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, "Inference-Header-Content-Length",
                              "Inference-Header-Content-Length must be a byte count within the body");
            return -1;
        }
        header_len = (size_t)v;
    } else if (!pgcld_is_json_type(req->content_type)) {
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json (or use Inference-Header-Content-Length)");
        return -1;
    }
    json_error_t jerr;
    json_t *hdr = job->header = json_loadb(req->body, header_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!hdr || !json_is_object(hdr)) {
        pgcld_reply_error(reply, 400, hdr ? "invalid_request" : "invalid_json", -1, NULL, "inference header: %s",
                          hdr ? "must be a JSON object" : jerr.text);
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(hdr, key, val) {
        if (strcmp(key, "id") && strcmp(key, "inputs") && strcmp(key, "outputs") && strcmp(key, "parameters")) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown member '%.64s' of the inference request",
                              key);
            return -1;
        }
    }
    if (!(job->model = pgcld_score_acquire(srv, req->params[0], &job->shadow, NULL, reply))) return -1;
    if (take_inputs(srv, hdr, (const unsigned char *)req->body + header_len, req->body_len - header_len, job, reply) != 0)
        return -1;
    job->answer_ctx = hdr;
    return 0;
}

void pgcld_handle_v2_infer(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    score_job *job = pgcld_score_job_create(v2_answer);
    if (!job) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    if (pgcld_score_idempotency_begin(srv, req, job, &job->claim, reply) != 0 ||
        parse_infer(srv, req, job, reply) != 0) {
        pgcld_score_job_free(job);
        return;
    }
    pgcld_score_begin(srv, req, job); /* answered when the rows are durable */
}
