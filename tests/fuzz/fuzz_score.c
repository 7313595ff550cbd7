/* libFuzzer harness: the /v1/score input paths that need no connection.
 *  1. pgcld_parse_f32() at the start of the input: when it takes a number, the float must be
 *     bit-identical to strtof() of the same text (both round correctly).
 *  2. pgcld_fast_parse_score() (server/wire/fastjson.c) on the whole input, D = 32, at most 8 items.
 *     When it accepts, the DOM path must agree (differential oracle): jansson parses the body (with
 *     the flags server/wire/score_parse.c uses), with the same model, return_vector, items, ids, and the same
 *     values (within one float32 rounding step for JSON numbers: the DOM path rounds through a
 *     double; exactly for base64).
 *  3. pgcld_score_take_floats() (octet-stream and v2 binary bodies) on the input as float32 rows.
 *  4. pgcld_score_take_ids() (the Pgcld-Item-Ids header) on the input as a string.
 *  5. pgcl_base64_decode_exact() (the fast path's embedding_b64 decoder) against libsodium's
 *     (ASCII only: libsodium 1.0.18 reads every byte >= 0x80 as '/'). */
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "fastjson.h"
#include "score_job.h"

#define DIM 32
#define MAX_ITEMS 8

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pgcld_config g_cfg;
static pgcld_server g_srv;
static pgcl_model g_model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (sodium_init() < 0) abort();
    pgcld_config_defaults(&g_cfg);
    g_cfg.max_batch = MAX_ITEMS;
    g_srv.cfg = &g_cfg;
    g_model.name = (char *)"fuzz";
    g_model.version = (char *)"1";
    g_model.D = DIM;
    return 0;
}

/* What the fast parser asked the registry for: the route scores with that model, so it must be
 * the model the body names (or the default when it names none). */
typedef struct resolved {
    int calls;
    bool named;
    char name[256];
} resolved;

static int resolve(void *ctx, const char *name) {
    resolved *r = ctx;
    r->calls++;
    r->named = name != NULL;
    if (name) snprintf(r->name, sizeof r->name, "%s", name);
    return !name || strcmp(name, "tiny") == 0 ? DIM : 0;
}

static void fail(const char *what, const uint8_t *data, size_t size) {
    fprintf(stderr, "fuzz_score: %s (input of %zu bytes)\n", what, size);
    abort();
}

static bool within_one_step(float a, float b) {
    if (a == b) return true;
    return nextafterf(a, b) == b;
}

/* The DOM path's reading of a body the fast parser accepted must be the same request. */
static void check_against_dom(const uint8_t *data, size_t size, const pgcld_fast_request *fr, const resolved *r) {
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
                              &jerr);
    if (!json_is_object(root)) fail("fast path accepted a body that is not a JSON object", data, size);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "model") && strcmp(key, "items") && strcmp(key, "return_vector"))
            fail("fast path accepted an unknown field", data, size);
    }
    json_t *model = json_object_get(root, "model");
    if ((model != NULL) != fr->has_model) fail("model presence differs", data, size);
    if (model && (!json_is_string(model) || strcmp(json_string_value(model), fr->model) != 0))
        fail("model differs", data, size);
    if (r->named != (model != NULL) || (model && strcmp(r->name, json_string_value(model)) != 0))
        fail("the model resolved is not the model the body names", data, size);
    json_t *rv = json_object_get(root, "return_vector");
    if (rv ? !json_is_boolean(rv) || json_is_true(rv) != fr->return_vector : !fr->return_vector)
        fail("return_vector differs", data, size);
    json_t *items = json_object_get(root, "items");
    if (!json_is_array(items) || (int)json_array_size(items) != fr->n || fr->n < 1 || fr->n > MAX_ITEMS)
        fail("item count differs", data, size);
    float z[DIM];
    for (int i = 0; i < fr->n; i++) {
        json_t *item = json_array_get(items, (size_t)i);
        if (!json_is_object(item) || json_object_size(item) != 2) fail("item shape differs", data, size);
        json_t *id = json_object_get(item, "id");
        if (!json_is_string(id) || json_string_length(id) != strlen(fr->ids[i]) ||
            strcmp(json_string_value(id), fr->ids[i]) != 0 || json_string_length(id) == 0 ||
            json_string_length(id) > 256)
            fail("id differs", data, size);
        json_t *arr = json_object_get(item, "embedding"), *b64 = json_object_get(item, "embedding_b64");
        const float *got = fr->z + (size_t)i * DIM;
        if (arr) {
            if (!json_is_array(arr) || json_array_size(arr) != DIM) fail("embedding length differs", data, size);
            for (int k = 0; k < DIM; k++) {
                json_t *v = json_array_get(arr, (size_t)k);
                if (!json_is_number(v)) fail("embedding value is not a number", data, size);
                float dom = (float)json_number_value(v);
                if (!isfinite(got[k]) || !within_one_step(dom, got[k])) fail("embedding value differs", data, size);
            }
        } else {
            size_t len = 0;
            if (!json_is_string(b64) ||
                sodium_base642bin((unsigned char *)z, sizeof z, json_string_value(b64), json_string_length(b64), NULL,
                                  &len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
                len != sizeof z || memcmp(z, got, sizeof z) != 0)
                fail("embedding_b64 differs", data, size);
            for (int k = 0; k < DIM; k++)
                if (!isfinite(got[k])) fail("fast path accepted a non-finite value", data, size);
        }
    }
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* 1. one number */
    float f;
    size_t used = pgcld_parse_f32((const char *)data, (const char *)data + size, &f);
    if (used) {
        char *text = malloc(used + 1);
        if (!text) abort();
        memcpy(text, data, used);
        text[used] = 0;
        char *end;
        float want = strtof(text, &end);
        if (end != text + used) fail("parse_f32 took a different number of bytes than strtof", data, size);
        if (memcmp(&want, &f, sizeof f) != 0) {
            fprintf(stderr, "fuzz_score: '%.80s': parse_f32 %a, strtof %a\n", text, (double)f, (double)want);
            fail("parse_f32 is not correctly rounded", data, size);
        }
        free(text);
    }

    /* 2. the fast request parser, checked against the DOM path */
    pgcld_fast_request fr;
    resolved res = {0};
    if (pgcld_fast_parse_score((const char *)data, size, MAX_ITEMS, resolve, &res, &fr) == PGCLD_FAST_OK) {
        check_against_dom(data, size, &fr, &res);
        pgcld_fast_request_free(&fr);
    }
    if (res.calls > 1) fail("the model was resolved more than once", data, size);

    /* 3. float32 rows (octet-stream, v2 binary) */
    score_job job = {.model = &g_model};
    pgcld_reply reply = {0};
    if (pgcld_score_take_floats(&g_srv, &job, data, size, "body", &reply) == 0) {
        if (job.n < 1 || job.n > MAX_ITEMS || (size_t)job.n * DIM * 4 != size) fail("take_floats: bad n", data, size);
        for (int k = 0; k < job.n * DIM; k++)
            if (!isfinite(job.z[k])) fail("take_floats accepted a non-finite value", data, size);
    } else if (!reply.body || reply.status < 400) {
        fail("take_floats failed without an error reply", data, size);
    }
    json_decref(reply.body);
    free(job.z);

    /* 4. ids from a header value (a C string: up to the first NUL) */
    char *header = malloc(size + 1);
    if (!header) abort();
    memcpy(header, data, size);
    header[size] = 0;
    score_job ids_job = {.model = &g_model, .n = 1 + (size ? data[0] % MAX_ITEMS : 0)};
    pgcld_reply ids_reply = {0};
    if (pgcld_score_take_ids(&ids_job, header, strlen(header), "Pgcld-Item-Ids", &ids_reply) == 0) {
        for (int i = 0; i < ids_job.n; i++) {
            size_t len = strlen(ids_job.ids[i]);
            if (len == 0 || len > 256) fail("take_ids accepted a bad id", data, size);
        }
    }
    json_decref(ids_reply.body);
    free(ids_job.ids);
    free(ids_job.id_arena);
    free(header);

    /* 5. the fast path's base64 decoder (core/util/base64.c) against libsodium's, both strict: the first
     * byte is the decoded length wanted, the rest the text. */
    if (size >= 1) {
        size_t want = data[0], len = size - 1;
        const char *text = (const char *)data + 1;
        unsigned char *fast = malloc(want ? want : 1), *ref = malloc(want + 3);
        if (!fast || !ref) abort();
        bool ok_fast = pgcl_base64_decode_exact(text, len, fast, want);
        size_t got = 0;
        const char *end = NULL;
        bool ascii = true; /* libsodium 1.0.18 decodes every byte >= 0x80 as if it were '/' */
        for (size_t k = 0; k < len && ascii; k++) ascii = (unsigned char)text[k] < 0x80;
        bool ok_ref = ascii && len == pgcl_base64_encoded_len(want) &&
                      sodium_base642bin(ref, want + 3, text, len, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) == 0 &&
                      end == text + len && got == want;
        if (ok_fast != ok_ref) fail(ok_fast ? "base64: accepted what libsodium refuses" : "base64: refused valid base64",
                                    data, size);
        if (ok_fast && want && memcmp(fast, ref, want) != 0) fail("base64: decoded bytes differ", data, size);
        free(fast);
        free(ref);
    }
    return 0;
}
