/* The Open Inference Protocol (KServe v2 / Triton) on the same scoring pipeline as /v1/score, so
 * existing Triton and KServe clients can call pgcld:
 *   GET  /v2                          server metadata
 *   GET  /v2/health/live, /v2/health/ready
 *   GET  /v2/models/{name}[/versions/{version}]        model metadata (inputs and outputs)
 *   GET  /v2/models/{name}[/versions/{version}]/ready
 *   POST /v2/repository/index        Triton's model repository extension: every version on disk
 *   GET  /v2/models/{name}[/versions/{version}]/stats  Triton's statistics extension
 *   POST /v2/models/{name}[/versions/{version}]/infer  JSON tensors, or the binary tensor extension
 *                                     (Inference-Header-Content-Length: a JSON header, then raw
 *                                     tensor bytes in input order, sized by binary_data_size)
 * Inputs: "embedding" FP32 [n, D] (required) and "id" BYTES [n] (optional item ids), each at most
 * once, checked by one rule for every input, JSON or binary (read_input, g_inputs). Outputs:
 * label, decision, decision_id (BYTES [n]), probabilities FP32 [n, K], vector FP32 [n, d]; the
 * request's `outputs` picks some of them, and those asked with parameters.binary_data (or all of
 * them, with the request's parameters.binary_data_output) come back in the binary extension's
 * layout. A version in the path must be the active one: /v1/score scores only the active version
 * (which the metadata lists), so an inactive version answers 409 version_not_active.
 * Validation and audit rows are exactly those of /v1/score. Errors on /v2 are written as the
 * protocol's {"error": "<message>"} with pgcld's code beside it (http.c, pgcld_reply_oip_error). */
#include <math.h>
#include <stdint.h>
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
    reply->body = json_pack("{s:s, s:s, s:[s, s, s]}", "name", "pgcld", "version", PGCLD_VERSION, "extensions",
                            "binary_tensor_data", "model_repository", "statistics");
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

/* The active version of the path's model, retained, when the path names no version or names the
 * active one; else NULL with reply set: 404 model_not_found / version_not_found, 503 not_ready,
 * or 409 version_not_active for a version on disk that is not the active one (pgcld scores only
 * the active version, as /v1/score does). shadow as pgcld_score_acquire's. */
static pgcl_model *acquire_path_version(pgcld_server *srv, const pgcld_request *req, pgcl_model **shadow,
                                        pgcld_reply *reply) {
    pgcl_model *m = pgcld_score_acquire(srv, req->params[0], shadow, NULL, reply);
    const char *version = req->params[1];
    if (!m || !version || strcmp(version, m->version) == 0) return m;
    bool on_disk = pgcl_registry_knows_version(srv->registry, req->params[0], version);
    if (on_disk)
        pgcld_reply_error(reply, 409, "version_not_active", -1, "version",
                          "version '%.64s' of model %s is not the active version (%s): pgcld serves and scores only "
                          "the active version; activate it with POST /v1/admin/models/%s/activate",
                          version, m->name, m->version, m->name);
    else
        pgcld_reply_error(reply, 404, "version_not_found", -1, "version", "model %s has no version '%.64s'", m->name,
                          version);
    if (shadow && *shadow) {
        pgcl_model_release(*shadow);
        *shadow = NULL;
    }
    pgcl_model_release(m);
    return NULL;
}

void pgcld_handle_v2_model(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_model *m = acquire_path_version(srv, req, NULL, reply);
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
    pgcl_model *m = acquire_path_version(srv, req, NULL, reply);
    if (!m) return;
    reply->status = 200;
    reply->body = json_pack("{s:s, s:s, s:b}", "name", m->name, "version", m->version, "ready", 1);
    pgcl_model_release(m);
}

/* The outputs of an infer answer, in the order they are written. */
enum { OUT_LABEL, OUT_DECISION, OUT_DECISION_ID, OUT_PROBABILITIES, OUT_VECTOR, N_OUTPUTS };
static const char *const g_output_names[N_OUTPUTS] = {"label", "decision", "decision_id", "probabilities", "vector"};

/* Which outputs the answer holds and which of them go as binary data. */
typedef struct output_selection {
    bool wanted[N_OUTPUTS];
    bool binary[N_OUTPUTS];
} output_selection;

/* Reads the request's `outputs` (each {"name"[, "parameters": {"binary_data": bool, …}]}; absent:
 * all five) and its parameters.binary_data_output (the default of binary_data: tritonclient sets
 * it when it asks no outputs). Other members and parameters are ignored. Into sel when not NULL.
 * Returns 0, or -1 with reply set (400 naming the field). */
static int read_output_selection(json_t *hdr, output_selection *sel, pgcld_reply *reply) {
    output_selection s = {{false}, {false}};
    json_t *params = json_object_get(hdr, "parameters"), *outputs = json_object_get(hdr, "outputs");
    if (params && !json_is_object(params)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "parameters", "'parameters' must be an object");
        return -1;
    }
    json_t *all_binary = params ? json_object_get(params, "binary_data_output") : NULL;
    if (all_binary && !json_is_boolean(all_binary)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "parameters.binary_data_output",
                          "'binary_data_output' must be true or false");
        return -1;
    }
    bool binary_default = all_binary && json_is_true(all_binary);
    if (!outputs) {
        for (int k = 0; k < N_OUTPUTS; k++) s.wanted[k] = true, s.binary[k] = binary_default;
    } else if (!json_is_array(outputs) || json_array_size(outputs) == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "outputs", "'outputs' must be a non-empty array");
        return -1;
    }
    size_t i;
    json_t *out;
    json_array_foreach(outputs, i, out) {
        char field[64];
        snprintf(field, sizeof field, "outputs[%zu]", i);
        const char *name = json_string_value(json_object_get(out, "name"));
        json_t *oparams = json_object_get(out, "parameters");
        json_t *binary = json_is_object(oparams) ? json_object_get(oparams, "binary_data") : NULL;
        int k = 0;
        while (k < N_OUTPUTS && !(name && strcmp(name, g_output_names[k]) == 0)) k++;
        if (k == N_OUTPUTS) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                              "unknown output '%.64s' (expected label, decision, decision_id, probabilities, vector)",
                              name ? name : "");
            return -1;
        }
        if ((oparams && !json_is_object(oparams)) || (binary && !json_is_boolean(binary))) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                              "'parameters' must be an object and its 'binary_data' true or false");
            return -1;
        }
        if (s.wanted[k]) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field, "output '%s' is asked twice", name);
            return -1;
        }
        s.wanted[k] = true;
        s.binary[k] = binary ? json_is_true(binary) : binary_default;
    }
    if (sel) *sel = s;
    return 0;
}

/* model_name and model_version, which clients send (KServe's InferRequest.to_rest() always names
 * the model), must agree with the path when present. Returns 0, or -1 with reply set. */
static int check_model_members(json_t *hdr, const pgcl_model *m, pgcld_reply *reply) {
    static const char *const members[2] = {"model_name", "model_version"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(hdr, members[k]);
        const char *want = k == 0 ? m->name : m->version;
        if (!v || (json_is_string(v) && json_string_length(v) == 0)) continue;
        if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0) {
            pgcld_reply_error(reply, 400, k == 0 ? "model_name_mismatch" : "model_version_mismatch", -1, members[k],
                              "'%s' %s%.64s%s does not match the %s of the path (%s)", members[k],
                              json_is_string(v) ? "'" : "", json_is_string(v) ? json_string_value(v) : "(not a string)",
                              json_is_string(v) ? "'" : "", k == 0 ? "model" : "version served", want);
            return -1;
        }
    }
    return 0;
}

/* Triton's repository index state of one version of /v1/models' description: READY for the active
 * version, UNAVAILABLE (with the registry's state, or "shadow", as the reason) for the others. */
static json_t *index_entry(const char *model, json_t *version) {
    const char *role = json_string_value(json_object_get(version, "role"));
    bool active = role && strcmp(role, "active") == 0;
    json_t *e = json_pack("{s:s, s:O, s:s}", "name", model, "version", json_object_get(version, "version"), "state",
                          active ? "READY" : "UNAVAILABLE");
    if (!active) {
        json_t *error = json_object_get(version, "error");
        json_object_set(e, "reason", error ? error : role ? json_object_get(version, "role")
                                                          : json_object_get(version, "state"));
    }
    return e;
}

void pgcld_handle_v2_repository_index(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    bool ready_only = false;
    if (req->body_len > 0) { /* optional {"ready": bool}; tritonclient posts an empty body, untyped */
        if (req->content_type.at && !pgcld_is_json_type(req->content_type)) {
            pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                              "Content-Type must be application/json, or absent");
            return;
        }
        json_error_t jerr;
        json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *ready = json_object_get(body, "ready");
        if (!json_is_object(body) || (ready && !json_is_boolean(ready))) {
            pgcld_reply_error(reply, 400, body ? "invalid_request" : "invalid_json", -1, body ? "ready" : NULL, "%s",
                              body ? "the body must be an object whose 'ready' is true or false" : jerr.text);
            json_decref(body);
            return;
        }
        ready_only = json_is_true(ready);
        json_decref(body);
    }
    json_t *described = pgcl_registry_describe(srv->registry), *index = json_array();
    size_t i, v;
    json_t *model, *version;
    json_array_foreach(json_object_get(described, "models"), i, model) {
        const char *name = json_string_value(json_object_get(model, "name"));
        json_array_foreach(json_object_get(model, "versions"), v, version) {
            json_t *e = index_entry(name, version);
            if (ready_only && strcmp(json_string_value(json_object_get(e, "state")), "READY") != 0)
                json_decref(e);
            else
                json_array_append_new(index, e);
        }
    }
    json_decref(described);
    reply->status = 200;
    reply->body = index;
}

/* One model_stats entry of Triton's statistics extension from pgcld's counters. */
static json_t *version_stats(pgcld_server *srv, const char *model, const char *version) {
    pgcld_model_stats st;
    pgcld_metrics_model_stats(srv->metrics, model, version, &st);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:{s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I},"
                     " s:{s:I, s:I}, s:{s:I, s:I}}, s:[]}",
                     "name", model, "version", version, "last_inference", (json_int_t)st.last_ms, "inference_count",
                     (json_int_t)st.items, "execution_count", (json_int_t)st.executions, "inference_stats", "success",
                     "count", (json_int_t)st.success, "ns", (json_int_t)st.success_ns, "fail", "count",
                     (json_int_t)st.fail, "ns", (json_int_t)st.fail_ns, "queue", "count", (json_int_t)st.executions,
                     "ns", (json_int_t)st.queue_ns, "compute_input", "count", (json_int_t)0, "ns", (json_int_t)0,
                     "compute_infer", "count", (json_int_t)st.executions, "ns", (json_int_t)st.compute_ns,
                     "compute_output", "count", (json_int_t)0, "ns", (json_int_t)0, "batch_stats");
}

void pgcld_handle_v2_model_stats(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *name = req->params[0], *version = req->params[1];
    if (!pgcl_registry_valid_name(name, false) || !pgcl_registry_knows(srv->registry, name)) {
        pgcld_reply_error(reply, 404, "model_not_found", -1, "name", "no model named '%.64s' is being served", name);
        return;
    }
    if (version && !(pgcl_registry_valid_name(version, true) &&
                     pgcl_registry_knows_version(srv->registry, name, version))) {
        pgcld_reply_error(reply, 404, "version_not_found", -1, "version", "model %s has no version '%.64s'", name,
                          version);
        return;
    }
    json_t *stats = json_array();
    if (version) {
        json_array_append_new(stats, version_stats(srv, name, version));
    } else { /* every version on disk, in version order */
        json_t *described = pgcl_registry_describe(srv->registry);
        size_t i, v;
        json_t *model, *ver;
        json_array_foreach(json_object_get(described, "models"), i, model) {
            if (strcmp(json_string_value(json_object_get(model, "name")), name) != 0) continue;
            json_array_foreach(json_object_get(model, "versions"), v, ver) {
                const char *version_name = json_string_value(json_object_get(ver, "version"));
                json_array_append_new(stats, version_stats(srv, name, version_name));
            }
        }
        json_decref(described);
    }
    reply->status = 200;
    reply->body = json_pack("{s:o}", "model_stats", stats);
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

/* The strings of a BYTES tensor in the binary extension's layout (each a 4-byte little-endian
 * length, then that many bytes), as a JSON array; NULL when the bytes are not that layout exactly or
 * a string is not UTF-8. */
static json_t *read_bytes_tensor(const unsigned char *p, size_t len) {
    json_t *arr = json_array();
    size_t at = 0;
    while (arr && at < len) {
        if (len - at < 4) break;
        size_t n = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 | (size_t)p[at + 3] << 24;
        at += 4;
        json_t *str = n <= len - at ? json_stringn((const char *)p + at, n) : NULL;
        if (!str) break;
        json_array_append_new(arr, str);
        at += n;
    }
    if (arr && at == len) return arr;
    json_decref(arr);
    return NULL;
}

/* The inputs pgcld takes, as GET /v2/models/{name} lists them: every input at most once, with this
 * datatype and rank. The embedding's shape is [n, D] (D the model's); every other input has one
 * row per embedding, which pgcld_score_take_ids checks for the ids. */
enum { IN_EMBEDDING, IN_ID, N_INPUTS };
static const struct input_spec {
    const char *name, *datatype, *shape; /* shape: as the messages write it */
    size_t rank;
} g_inputs[N_INPUTS] = {{"embedding", "FP32", "[n, D]", 2}, {"id", "BYTES", "[n]", 1}};

/* One input of the request as its header describes it, checked on its own (read_input). */
typedef struct input_tensor {
    json_t *tensor; /* inputs[index], borrowed from the header; NULL when the request has no such input */
    size_t index;
    json_int_t shape[2];        /* its dimensions (g_inputs[].rank of them) */
    const unsigned char *bytes; /* its binary data (nbytes), or NULL when its values are JSON "data" */
    size_t nbytes;
    char field[32]; /* "inputs[i]" */
} input_tensor;

/* The element count a tensor's shape announces; false when a dimension is negative or the
 * product does not fit a size_t (no data can hold it then). */
static bool shape_elements(const input_tensor *t, size_t rank, size_t *count) {
    size_t n = 1;
    for (size_t k = 0; k < rank; k++) {
        if (t->shape[k] < 0 || (t->shape[k] > 0 && n > SIZE_MAX / (size_t)t->shape[k])) return false;
        n *= (size_t)t->shape[k];
    }
    *count = n;
    return true;
}

/* Checks inputs[i] on its own, the same way for every input and for JSON and binary data alike: an
 * object with a name, a datatype and a shape; a name pgcld takes, not given before; its datatype
 * and rank; integer dimensions; parameters an object; its values given once, as "data" or as
 * parameters.binary_data_size bytes of the binary part (taken from binary + *used, in input
 * order). Fills slots[] for that name. Returns 0, or -1 with reply set (400 invalid_request, field
 * inputs[i]). */
static int read_input(json_t *in, size_t i, input_tensor slots[N_INPUTS], const unsigned char *binary,
                      size_t binary_len, size_t *used, pgcld_reply *reply) {
    char field[32];
    snprintf(field, sizeof field, "inputs[%zu]", i);
    const char *name = json_string_value(json_object_get(in, "name"));
    const char *dtype = json_string_value(json_object_get(in, "datatype"));
    json_t *shape = json_object_get(in, "shape"), *params = json_object_get(in, "parameters");
    if (!name || !dtype || !json_is_array(shape)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field, "a tensor needs name, datatype and shape");
        return -1;
    }
    int k = 0;
    while (k < N_INPUTS && strcmp(name, g_inputs[k].name) != 0)
        k++;
    if (k == N_INPUTS) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field, "unknown input '%.64s' (expected embedding, id)",
                          name);
        return -1;
    }
    const struct input_spec *spec = &g_inputs[k];
    if (slots[k].tensor) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                          "input '%s' is given twice (inputs[%zu] and inputs[%zu]): each input at most once", name,
                          slots[k].index, i);
        return -1;
    }
    if (strcmp(dtype, spec->datatype) != 0 || json_array_size(shape) != spec->rank) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field, "'%s' must be one %s tensor of shape %s", name,
                          spec->datatype, spec->shape);
        return -1;
    }
    input_tensor t = {.tensor = in, .index = i};
    for (size_t d = 0; d < spec->rank; d++) {
        if (!json_is_integer(json_array_get(shape, d))) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field, "'%s' shape must be %s integers", name,
                              spec->shape);
            return -1;
        }
        t.shape[d] = json_integer_value(json_array_get(shape, d));
    }
    json_t *bsize = json_is_object(params) ? json_object_get(params, "binary_data_size") : NULL;
    bool has_data = json_object_get(in, "data") != NULL;
    if ((params && !json_is_object(params)) || (bsize && has_data) || (!bsize && !has_data)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                          params && !json_is_object(params) ? "'%s': 'parameters' must be an object"
                          : has_data ? "'%s' has both 'data' and parameters.binary_data_size: give its values once"
                                     : "'%s' has no values: give 'data', or parameters.binary_data_size and the bytes",
                          name);
        return -1;
    }
    if (bsize) {
        if (!json_is_integer(bsize) || json_integer_value(bsize) < 0 ||
            (size_t)json_integer_value(bsize) > binary_len - *used) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, field,
                              "binary_data_size does not fit the binary part of the body");
            return -1;
        }
        t.bytes = binary + *used;
        t.nbytes = (size_t)json_integer_value(bsize);
        *used += t.nbytes;
    }
    snprintf(t.field, sizeof t.field, "%s", field);
    slots[k] = t;
    return 0;
}

/* The embedding's values into job: D must be the model's (400 dimension_mismatch), n from 1 to
 * --max-batch (400 empty_batch, 413 batch_too_large), and its values n × D numbers (JSON: flat or
 * nested as the shape) or 4·n·D bytes (400 dimension_mismatch), all finite. 0, or -1 with reply set. */
static int take_embedding(pgcld_server *srv, const input_tensor *t, score_job *job, pgcld_reply *reply) {
    json_int_t n = t->shape[0], D = t->shape[1];
    if (D != job->model->D) {
        pgcld_reply_error(reply, 400, "dimension_mismatch", -1, t->field, "shape [%lld, %lld]: model %s expects D = %d",
                          (long long)n, (long long)D, job->model->name, job->model->D);
        return -1;
    }
    /* n is bounded before n * D * 4 is computed: a huge n would wrap around to the binary size. */
    if (n <= 0 || n > srv->cfg->max_batch) {
        pgcld_reply_error(reply, n <= 0 ? 400 : 413, n <= 0 ? "empty_batch" : "batch_too_large", -1, t->field,
                          "shape [%lld, %lld]: 1 to %ld embeddings per request", (long long)n, (long long)D,
                          (long)srv->cfg->max_batch);
        return -1;
    }
    if (t->bytes) {
        if (t->nbytes != (size_t)n * (size_t)D * 4) {
            pgcld_reply_error(reply, 400, "dimension_mismatch", -1, t->field,
                              "binary_data_size %zu does not match shape [%lld, %lld] of FP32", t->nbytes, (long long)n,
                              (long long)D);
            return -1;
        }
        return pgcld_score_take_floats(srv, job, t->bytes, t->nbytes, t->field, reply);
    }
    json_t *data = json_object_get(t->tensor, "data");
    float *tmp = malloc(sizeof(float) * (size_t)n * (size_t)D);
    const char *why = NULL;
    if (!tmp) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    if (read_tensor_data(data, (size_t)n, (size_t)D, tmp, &why) != 0) {
        bool count = json_is_array(data) && strncmp(why, "'data' must hold", 16) == 0;
        pgcld_reply_error(reply, 400, count ? "dimension_mismatch" : "invalid_request", -1, t->field,
                          "%s, for shape [%lld, %lld]", why, (long long)n, (long long)D);
        free(tmp);
        return -1;
    }
    return pgcld_score_adopt_floats(job, tmp, (int)n, t->field, reply); /* job owns tmp now */
}

/* The item ids into job (its n set): the id tensor's strings (JSON data, or binary in the BYTES
 * layout), as many as its shape [m] announces (400 dimension_mismatch, field inputs[i]), m = n
 * (400 invalid_request, field inputs.id, as pgcld_score_take_ids refuses a count), and each a
 * non-empty string of at most 256 bytes (pgcld_score_take_ids). Without an id tensor, the ids
 * "0" … "n-1". 0, or -1 with reply set. */
static int take_id_tensor(const input_tensor *t, score_job *job, pgcld_reply *reply) {
    if (!t->tensor) return pgcld_score_take_ids(job, NULL, 0, "inputs.id", reply);
    json_t *ids = t->bytes ? read_bytes_tensor(t->bytes, t->nbytes) : json_incref(json_object_get(t->tensor, "data"));
    size_t count = 0;
    int rc = -1;
    if (!json_is_array(ids)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, t->field,
                          "'id' must be a BYTES tensor: its strings as JSON data, or as binary data "
                          "(each a 4-byte little-endian length, then that many bytes of UTF-8)");
    } else if (!shape_elements(t, g_inputs[IN_ID].rank, &count) || count != json_array_size(ids)) {
        pgcld_reply_error(reply, 400, "dimension_mismatch", -1, t->field,
                          "'id' has shape [%lld] but holds %zu ids: a tensor's shape must count its values",
                          (long long)t->shape[0], json_array_size(ids));
    } else if (count != (size_t)job->n) { /* pgcld_score_take_ids' refusal, with the shapes in the message */
        pgcld_reply_error(reply, 400, "invalid_request", -1, "inputs.id",
                          "'id' has shape [%zu] but 'embedding' has %d rows: one id per embedding", count, job->n);
    } else {
        char *ids_text = json_dumps(ids, JSON_COMPACT);
        rc = ids_text ? pgcld_score_take_ids(job, ids_text, strlen(ids_text), "inputs.id", reply) : -1;
        if (!ids_text) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        free(ids_text);
    }
    json_decref(ids);
    return rc;
}

/* Reads inputs[] of the inference header into job (model set): every input checked on its own
 * (read_input), then together (an embedding, every binary byte claimed), then the embedding's
 * values and the ids. Returns 0, or -1 with reply set. */
static int take_inputs(pgcld_server *srv, json_t *hdr, const unsigned char *binary, size_t binary_len, score_job *job,
                       pgcld_reply *reply) {
    json_t *inputs = json_object_get(hdr, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "inputs", "'inputs' must be a non-empty array of tensors");
        return -1;
    }
    input_tensor slots[N_INPUTS] = {{0}};
    size_t used = 0, i;
    json_t *in;
    json_array_foreach(inputs, i, in) {
        if (read_input(in, i, slots, binary, binary_len, &used, reply) != 0) return -1;
    }
    if (!slots[IN_EMBEDDING].tensor) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "inputs", "no 'embedding' input");
        return -1;
    }
    if (used != binary_len) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, NULL,
                          "%zu binary bytes after the header are not claimed by any input", binary_len - used);
        return -1;
    }
    if (take_embedding(srv, &slots[IN_EMBEDDING], job, reply) != 0) return -1;
    return take_id_tensor(&slots[IN_ID], job, reply);
}

/* Opens one output tensor {"name","datatype","shape":[n(,cols)],["parameters":{"binary_data":true},]
 * "data":[ — the caller writes the data and closes with "]}". */
static void tensor_open(pgcld_jsonw *w, bool first, int output, bool binary, int n, int cols) {
    pgcld_jsonw_lit(w, first ? "{\"name\":" : ",{\"name\":");
    pgcld_jsonw_str(w, g_output_names[output]);
    pgcld_jsonw_lit(w, ",\"datatype\":");
    pgcld_jsonw_str(w, output >= OUT_PROBABILITIES ? "FP32" : "BYTES");
    pgcld_jsonw_lit(w, ",\"shape\":[");
    pgcld_jsonw_int(w, n);
    if (cols > 0) {
        pgcld_jsonw_lit(w, ",");
        pgcld_jsonw_int(w, cols);
    }
    pgcld_jsonw_lit(w, binary ? "],\"parameters\":{\"binary_data\":true},\"data\":[" : "],\"data\":[");
}

/* The first member of an answer with binary outputs: the answer text (the one stored for an
 * Idempotency-Key too) stays JSON, and v2_binary_wire() turns it into the extension's layout when
 * it is sent. Never sent itself. */
#define BINARY_MARK "{\"pgcld_binary_outputs\":true,"

/* The infer answer's text (jsonw.h: the bytes json_dumps wrote from the DOM it replaced) with the
 * outputs of sel; NULL when out of memory. */
static char *infer_answer(const score_job *job, const output_selection *sel, const char *id, size_t id_len) {
    const pgcl_model *m = job->model;
    bool any_binary = false;
    for (int k = 0; k < N_OUTPUTS; k++) any_binary |= sel->wanted[k] && sel->binary[k];
    pgcld_jsonw w;
    pgcld_jsonw_init(&w, 1024 + (size_t)job->n * (200 + (size_t)(m->K + m->d) * 16));
    pgcld_jsonw_lit(&w, any_binary ? BINARY_MARK "\"model_name\":" : "{\"model_name\":");
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
    bool first = true;
    for (int k = 0; k < N_OUTPUTS; k++) {
        if (!sel->wanted[k]) continue;
        int cols = k == OUT_PROBABILITIES ? m->K : k == OUT_VECTOR ? m->d : 0;
        tensor_open(&w, first, k, sel->binary[k], job->n, cols);
        first = false;
        size_t count = (size_t)job->n * (size_t)(cols ? cols : 1);
        for (size_t i = 0; i < count; i++) {
            if (i) pgcld_jsonw_lit(&w, ",");
            switch (k) {
            case OUT_LABEL: pgcld_jsonw_str(&w, m->labels[job->result.label_index[i]]); break;
            case OUT_DECISION: pgcld_jsonw_str(&w, pgcl_decision_str(job->result.decision[i])); break;
            case OUT_DECISION_ID: pgcld_jsonw_str(&w, job->result.decision_id[i]); break;
            case OUT_PROBABILITIES: pgcld_jsonw_f32(&w, job->result.probs[i]); break;
            default: pgcld_jsonw_f32(&w, job->result.vectors[i]); break;
            }
        }
        pgcld_jsonw_lit(&w, "]}");
    }
    pgcld_jsonw_lit(&w, "]}");
    return pgcld_jsonw_take(&w, NULL);
}

/* The infer answer for a scored job (answer_fn of its jobs; ctx: the inference header, whose
 * "id" the answer repeats, or the request id when it has none, and whose outputs it holds). */
static char *v2_answer(const score_job *job, const void *ctx) {
    output_selection sel;
    pgcld_reply ignored = {0};
    int rc = read_output_selection((json_t *)ctx, &sel, &ignored);
    PGCL_ASSERT(rc == 0); /* parse_infer checked the same header */
    json_t *req_id = json_object_get(ctx, "id");
    return json_is_string(req_id) ? infer_answer(job, &sel, json_string_value(req_id), json_string_length(req_id))
                                  : infer_answer(job, &sel, job->result.request_id, strlen(job->result.request_id));
}

/* Appends the binary extension's bytes of one output's JSON data to buf: FP32 as little-endian
 * float32, BYTES as each string's length (4 bytes, little-endian) then its bytes. Returns the byte
 * count, or -1 when out of memory. */
static long append_tensor_bytes(json_t *data, bool fp32, unsigned char **buf, size_t *len, size_t *cap) {
    size_t start = *len, i;
    json_t *v;
    json_array_foreach(data, i, v) {
        size_t n = fp32 ? 4 : 4 + json_string_length(v);
        if (*len + n > *cap) {
            size_t grown = (*cap ? *cap * 2 : 4096) + n;
            unsigned char *p = realloc(*buf, grown);
            if (!p) return -1;
            *buf = p;
            *cap = grown;
        }
        uint32_t word;
        if (fp32) {
            float f = (float)json_number_value(v); /* exact: the text was the float's %.9g */
            memcpy(&word, &f, 4);
        } else {
            word = (uint32_t)json_string_length(v);
        }
        for (int b = 0; b < 4; b++) (*buf)[(*len)++] = (unsigned char)(word >> (8 * b)); /* little-endian */
        if (!fp32) {
            memcpy(*buf + *len, json_string_value(v), json_string_length(v));
            *len += json_string_length(v);
        }
    }
    return (long)(*len - start);
}

/* Turns a 200 infer answer that asked binary outputs (reply->text starting with BINARY_MARK) into
 * the binary tensor extension's layout: the JSON header (those outputs carry
 * parameters.binary_data_size instead of data), then their raw bytes in output order, with
 * Inference-Header-Content-Length giving the header's size. Other replies are left as they are. */
static void v2_binary_wire(pgcld_reply *reply) {
    if (reply->status != 200 || !reply->text || strncmp(reply->text, BINARY_MARK, strlen(BINARY_MARK)) != 0) return;
    json_t *doc = json_loads(reply->text, 0, NULL);
    unsigned char *bytes = NULL;
    size_t len = 0, cap = 0;
    bool ok = doc != NULL;
    size_t i;
    json_t *out;
    if (ok) json_object_del(doc, "pgcld_binary_outputs");
    json_array_foreach(ok ? json_object_get(doc, "outputs") : NULL, i, out) {
        json_t *params = json_object_get(out, "parameters");
        if (!ok || !params) continue;
        bool fp32 = strcmp(json_string_value(json_object_get(out, "datatype")), "FP32") == 0;
        long n = append_tensor_bytes(json_object_get(out, "data"), fp32, &bytes, &len, &cap);
        ok = n >= 0 &&
             json_object_set_new(out, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)n)) == 0;
        json_object_del(out, "data");
    }
    char *header = ok ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    unsigned char *body = header ? malloc(strlen(header) + len + 1) : NULL;
    json_decref(doc);
    free(reply->text);
    reply->text = NULL;
    if (!body) {
        free(header);
        free(bytes);
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    size_t header_len = strlen(header);
    memcpy(body, header, header_len);
    if (len) memcpy(body + header_len, bytes, len);
    free(header);
    free(bytes);
    reply->data = body;
    reply->data_len = header_len + len;
    reply->data_owned = true;
    reply->content_type = "application/octet-stream";
    reply->dynamic_header_name = "Inference-Header-Content-Length";
    snprintf(reply->dynamic_header_value, sizeof reply->dynamic_header_value, "%zu", header_len);
}

/* The infer handler's checks and parse, into job; 0, or -1 with reply set. */
static int parse_infer(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply) {
    pgcld_field hlen = pgcld_request_header(req, "Inference-Header-Content-Length");
    size_t header_len = req->body_len;
    if (hlen.at) {
        uint64_t v;
        pgcld_decimal d = pgcld_parse_decimal(hlen.at, hlen.len, req->body_len, &v);
        if (d == PGCLD_DECIMAL_MALFORMED) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, "Inference-Header-Content-Length",
                              "Inference-Header-Content-Length must be a decimal byte count");
            return -1;
        }
        if (d == PGCLD_DECIMAL_TOO_LARGE) { /* a length beyond this body is the request's own error: 400 too */
            pgcld_reply_error(reply, 400, "invalid_request", -1, "Inference-Header-Content-Length",
                              "Inference-Header-Content-Length must be a byte count within the body (at most %zu)",
                              req->body_len);
            return -1;
        }
        header_len = (size_t)v;
    } else if (req->content_type.at && !pgcld_is_json_type(req->content_type)) {
        /* No Content-Type reads as JSON: tritonclient sends none on an infer with JSON tensors only. */
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json, or absent (or use Inference-Header-Content-Length)");
        return -1;
    }
    json_error_t jerr;
    json_t *hdr = job->header = json_loadb(req->body, header_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!hdr || !json_is_object(hdr)) {
        pgcld_reply_error(reply, 400, hdr ? "invalid_request" : "invalid_json", -1, NULL, "inference header: %s",
                          hdr ? "must be a JSON object" : jerr.text);
        return -1;
    }
    if (!(job->model = acquire_path_version(srv, req, &job->shadow, reply))) return -1;
    if (check_model_members(hdr, job->model, reply) != 0 || read_output_selection(hdr, NULL, reply) != 0) return -1;
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
    job->wire_fn = v2_binary_wire;
    if (pgcld_score_idempotency_begin(srv, req, job, &job->claim, reply) != 0 ||
        parse_infer(srv, req, job, reply) != 0) {
        v2_binary_wire(reply); /* a stored answer, replayed */
        pgcld_score_job_free(job);
        return;
    }
    pgcld_score_begin(srv, req, job); /* answered when the rows are durable */
}
