/* The parser of POST /v1/score bodies: application/json (the fast parser of fastjson.c for valid
 * requests; jansson's DOM for the rest, which words every error), application/octet-stream
 * (n × D float32 with the model and options in the query and the ids in Pgcld-Item-Ids), and the
 * pieces the Open Inference Protocol's parser shares (model acquisition, float32 rows, ids).
 *
 * Nothing is computed here: a request is validated whole before the scoring call, so a rejected
 * request writes no row. */
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastjson.h"
#include "item_facts.h"
#include "score_job.h"
#include "server.h"

#define MAX_ID_BYTES 256

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

/* Item i's facts for a statement of reasons (item_facts.h) into job->facts, which is made (for
 * all n items, zeroed) at the first item that has any. Returns 0, or -1 with reply filled. */
static int parse_item_facts(score_job *job, json_t *item, int i, long today, pgcld_reply *reply) {
    pgcld_item_fact_json members;
    if (!pgcld_item_fact_json_of(item, &members)) return 0;
    if (!job->facts) {
        job->facts = calloc((size_t)job->n, sizeof *job->facts);
        job->facts_arena = malloc((size_t)job->n * (PGCLD_TERRITORIAL_SCOPE_MAX + 1));
        if (!job->facts || !job->facts_arena) {
            pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
            return -1;
        }
    }
    char *scope_buf = job->facts_arena + (size_t)i * (PGCLD_TERRITORIAL_SCOPE_MAX + 1);
    return pgcld_item_facts_parse(&members, i, today, &job->facts[i], scope_buf, reply);
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
    long today = pgcld_today_ymd();
    for (int i = 0; i < (int)n; i++) {
        json_t *item = json_array_get(items, (size_t)i);
        char field[64];
        snprintf(field, sizeof field, "items[%d]", i);
        if (!json_is_object(item)) {
            pgcld_reply_error(reply, 400, "invalid_request", i, field, "item %d must be an object", i);
            return -1;
        }
        json_object_foreach(item, key, val) {
            if (strcmp(key, "id") && strcmp(key, "embedding") && strcmp(key, "embedding_b64") &&
                !pgcld_item_fact_member(key)) {
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
        if (parse_item_facts(job, item, i, today, reply) != 0) return -1;
    }
    return 0;
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

/* True for "application/octet-stream" with optional parameters. */
static bool is_octet_stream(pgcld_field ct) {
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
    float *z = malloc(bytes);
    if (!z) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return -1;
    }
    memcpy(z, data, bytes); /* little-endian float32 on the wire and in memory */
    return pgcld_score_adopt_floats(job, z, (int)n, field, reply);
}

int pgcld_score_adopt_floats(score_job *job, float *z, int n, const char *field, pgcld_reply *reply) {
    size_t D = (size_t)job->model->D;
    job->n = n;
    job->z = z;
    for (size_t k = 0; k < (size_t)n * D; k++) {
        if (!isfinite(z[k])) {
            pgcld_reply_error(reply, 400, "non_finite_value", (int)(k / D), field, "item %zu: value %zu is NaN or infinite",
                              k / D, k % D);
            return -1;
        }
    }
    return 0;
}

/* Item ids for inputs that carry none in the body: a JSON array of n strings in the Pgcld-Item-Ids
 * header, or the item indexes "0", "1", … */
int pgcld_score_take_ids(score_job *job, const char *header_json, size_t len, const char *field,
                         pgcld_reply *reply) {
    size_t n = (size_t)job->n;
    job->ids = calloc(n, sizeof *job->ids);
    job->id_arena = malloc(n * 21 + (header_json ? len : 0) + 1);
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
    json_t *arr = json_loadb(header_json, len, JSON_REJECT_DUPLICATES, NULL);
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
    if (pgcld_request_header(req, "Pgcld-Item-Ids").at) {
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
    pgcld_field ids = pgcld_request_header(req, "Pgcld-Item-Ids");
    return pgcld_score_take_ids(job, ids.at, ids.len, "Pgcld-Item-Ids", reply);
}

int pgcld_score_parse_v1(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply) {
    bool return_vector = true;
    if (is_octet_stream(req->content_type)) {
        if (parse_octets(srv, req, job, &return_vector, reply) != 0) return -1;
    } else if (!pgcld_is_json_type(req->content_type)) {
        pgcld_reply_error(reply, 415, "unsupported_media_type", -1, NULL,
                          "Content-Type must be application/json or application/octet-stream, got '%.*s'",
                          PGCLD_FIELD_SHOWN(req->content_type));
        return -1;
    } else if (json_body_with_query(req, reply) ||
               (!parse_fast(srv, req, job, &return_vector) &&
                parse_request(srv, req, job, &return_vector, reply) != 0)) {
        return -1;
    }
    job->return_vector = return_vector;
    return 0;
}
