/* Parser A/B for POST /v1/score bodies (issue 15, scope 4): the fast parser (server/wire/fastjson.c)
 * against jansson walked the way the fallback parser (server/wire/score_parse.c) walks it.
 *
 * Bodies are made here, deterministically: batch 1, 8, 64 and 256 items of D = 1024 float32
 * embeddings (about N(0, 1/D), from a fixed-seed generator), each value written as a Python client
 * writes a float32 numpy vector (json.dumps(z.tolist()): the float32 widened to a double, 17
 * significant digits), and the same embeddings as base64 (embedding_b64). Each parser runs each
 * body repeatedly for about --seconds and the best of --rounds rounds is printed: MB/s of body
 * and µs per request. Both sides produce the same thing: z (n, D) float32 and the n item ids.
 *
 *   BUILD/bench/parser_ab [--seconds 0.5] [--rounds 3] [--dim 1024]
 */
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fastjson.h"

#define MAX_BATCH 256

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- bodies ---- */

typedef struct body {
    char *text;
    size_t len, cap;
} body;

static void put(body *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(body *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)n + 64;
        if (!(b->text = realloc(b->text, b->cap))) abort();
    }
}

/* A fixed-seed generator (xorshift64*) and an approximately normal value from it. */
static double next_normal(unsigned long long *state) {
    double sum = 0;
    for (int k = 0; k < 12; k++) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        sum += (double)((*state * 2685821657736338717ULL) >> 11) * 0x1.0p-53;
    }
    return sum - 6.0;
}

/* {"items": [{"id": "bench-B-i", "embedding": [...]}, ...]} as json.dumps writes it, or with
 * "embedding_b64". */
static body make_body(int batch, int dim, bool b64) {
    body b = {.cap = 1 << 16};
    if (!(b.text = malloc(b.cap))) abort();
    unsigned long long state = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)batch;
    float *row = malloc(sizeof(float) * (size_t)dim);
    char *encoded = malloc(sodium_base64_ENCODED_LEN((size_t)dim * 4, sodium_base64_VARIANT_ORIGINAL));
    if (!row || !encoded) abort();
    put(&b, "{\"items\": [");
    for (int i = 0; i < batch; i++) {
        for (int k = 0; k < dim; k++) row[k] = (float)(next_normal(&state) / sqrt((double)dim));
        put(&b, "%s{\"id\": \"bench-%d-%d\", ", i ? ", " : "", batch, i);
        if (b64) {
            sodium_bin2base64(encoded, sodium_base64_ENCODED_LEN((size_t)dim * 4, sodium_base64_VARIANT_ORIGINAL),
                              (const unsigned char *)row, (size_t)dim * 4, sodium_base64_VARIANT_ORIGINAL);
            put(&b, "\"embedding_b64\": \"%s\"}", encoded);
        } else {
            put(&b, "\"embedding\": [");
            for (int k = 0; k < dim; k++) put(&b, "%s%.17g", k ? ", " : "", (double)row[k]);
            put(&b, "]}");
        }
    }
    put(&b, "]}");
    free(row);
    free(encoded);
    return b;
}

/* ---- side A: the fast parser ---- */

static int resolve_dim(void *ctx, const char *name) {
    (void)name;
    return *(const int *)ctx;
}

static int parse_fast(const body *b, int dim) {
    pgcld_fast_request fr;
    if (pgcld_fast_parse_score(b->text, b->len, MAX_BATCH, resolve_dim, &dim, &fr) != PGCLD_FAST_OK) return -1;
    int n = fr.n;
    pgcld_fast_request_free(&fr);
    return n;
}

/* ---- side B: jansson, walked as the fallback walks it ---- */

static int take_embedding(json_t *item, int dim, float *z) {
    json_t *arr = json_object_get(item, "embedding"), *b64 = json_object_get(item, "embedding_b64");
    if ((arr != NULL) == (b64 != NULL)) return -1;
    if (arr) {
        if (!json_is_array(arr) || (int)json_array_size(arr) != dim) return -1;
        for (int k = 0; k < dim; k++) {
            json_t *v = json_array_get(arr, (size_t)k);
            if (!json_is_number(v)) return -1;
            z[k] = (float)json_number_value(v);
            if (!isfinite(z[k])) return -1;
        }
        return 0;
    }
    size_t got = 0;
    const char *end = NULL, *text = json_string_value(b64);
    if (!text || sodium_base642bin((unsigned char *)z, (size_t)dim * 4, text, json_string_length(b64), NULL, &got,
                                   &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != (size_t)dim * 4)
        return -1;
    for (int k = 0; k < dim; k++)
        if (!isfinite(z[k])) return -1;
    return 0;
}

static int parse_jansson(const body *b, int dim) {
    json_t *root = json_loadb(b->text, b->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
                              NULL);
    int n = -1;
    const char **ids = NULL;
    float *z = NULL;
    json_t *items = root ? json_object_get(root, "items") : NULL;
    if (!json_is_object(root) || !json_is_array(items) || json_array_size(items) == 0 ||
        json_array_size(items) > MAX_BATCH)
        goto done;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "model") && strcmp(key, "items") && strcmp(key, "return_vector")) goto done;
    }
    size_t count = json_array_size(items);
    ids = calloc(count, sizeof *ids);
    z = malloc(count * (size_t)dim * sizeof(float));
    if (!ids || !z) goto done;
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(items, i);
        if (!json_is_object(item)) goto done;
        json_object_foreach(item, key, val) {
            if (strcmp(key, "id") && strcmp(key, "embedding") && strcmp(key, "embedding_b64")) goto done;
        }
        json_t *id = json_object_get(item, "id");
        if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) > 256 ||
            strlen(json_string_value(id)) != json_string_length(id))
            goto done;
        ids[i] = json_string_value(id);
        if (take_embedding(item, dim, z + i * (size_t)dim) != 0) goto done;
    }
    n = (int)count;
done:
    free(ids);
    free(z);
    json_decref(root);
    return n;
}

/* ---- timing ---- */

typedef int (*parse_fn)(const body *b, int dim);

/* Best µs per request over `rounds` rounds of about `seconds` each. */
static double time_parser(parse_fn parse, const body *b, int dim, int batch, double seconds, int rounds) {
    double best = INFINITY;
    for (int r = 0; r < rounds; r++) {
        long reps = 0;
        double t0 = now_s(), t = t0;
        do {
            if (parse(b, dim) != batch) {
                fprintf(stderr, "parser_ab: a parser refused the batch-%d body\n", batch);
                exit(1);
            }
            reps++;
            t = now_s();
        } while (t - t0 < seconds);
        double us = (t - t0) * 1e6 / (double)reps;
        if (us < best) best = us;
    }
    return best;
}

int main(int argc, char **argv) {
    double seconds = 0.5;
    int rounds = 3, dim = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--dim") == 0) dim = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: parser_ab [--seconds S] [--rounds R] [--dim D]\n");
            return 2;
        }
    }
    if (sodium_init() < 0 || dim <= 0 || rounds <= 0) return 2;
    static const int batches[] = {1, 8, 64, 256};
    printf("| encoding | batch | body KB | fast µs/req | fast MB/s | jansson µs/req | jansson MB/s | jansson / fast |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int enc = 0; enc < 2; enc++) {
        for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
            body b = make_body(batches[k], dim, enc == 1);
            double fast = time_parser(parse_fast, &b, dim, batches[k], seconds, rounds);
            double dom = time_parser(parse_jansson, &b, dim, batches[k], seconds, rounds);
            double mb = (double)b.len / 1e6;
            printf("| %s | %d | %.1f | %.1f | %.0f | %.1f | %.0f | %.1f× |\n", enc ? "base64" : "JSON array",
                   batches[k], (double)b.len / 1e3, fast, mb / (fast * 1e-6), dom, mb / (dom * 1e-6), dom / fast);
            fflush(stdout);
            free(b.text);
        }
    }
    return 0;
}
