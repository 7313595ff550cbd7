/* What a handler reads of its request beyond pgcld_request's fields: header and query values,
 * and the fingerprint an Idempotency-Key is bound to. */
#include <ctype.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "sha256.h"

pgcld_field pgcld_request_header(const pgcld_request *req, const char *name) {
    pgcld_field value;
    pgcld_header_field(req->connection, name, &value);
    return value;
}

const char *pgcld_request_query(const pgcld_request *req, const char *key) {
    return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, key);
}

pgcld_decimal pgcld_parse_decimal(const char *text, size_t len, uint64_t max, uint64_t *out) {
    if (!text || len == 0) return PGCLD_DECIMAL_MALFORMED;
    for (size_t i = 0; i < len; i++)
        if (text[i] < '0' || text[i] > '9') return PGCLD_DECIMAL_MALFORMED;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        uint64_t d = (uint64_t)(text[i] - '0');
        if (d > max || v > (max - d) / 10) { /* v * 10 + d > max: the digits left only make it larger */
            *out = max;
            return PGCLD_DECIMAL_TOO_LARGE;
        }
        v = v * 10 + d;
    }
    *out = v;
    return PGCLD_DECIMAL_OK;
}

/* ---- request fingerprints (Idempotency-Key) ---- */

/* The headers a scoring route reads to make its answer. A route that starts reading another header
 * must add it here, or a retry that changed it would be answered with the answer to the old one. */
static const char *const FINGERPRINT_HEADERS[] = {"Pgcld-Item-Ids", "Inference-Header-Content-Length", NULL};

#define FINGERPRINT_MAX_ARGS 16

typedef struct fingerprint_args {
    const char *key[FINGERPRINT_MAX_ARGS], *value[FINGERPRINT_MAX_ARGS];
    size_t key_len[FINGERPRINT_MAX_ARGS], value_len[FINGERPRINT_MAX_ARGS];
    int n;
} fingerprint_args;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    (void)kind;
    fingerprint_args *a = cls;
    if (a->n == FINGERPRINT_MAX_ARGS) return MHD_NO;
    a->key[a->n] = key;
    a->key_len[a->n] = key_size;
    a->value[a->n] = value ? value : "";
    a->value_len[a->n++] = value ? value_size : 0;
    return MHD_YES;
}

/* Appends a length-prefixed part (8 bytes of length, little-endian, then the bytes) to buf. */
static void fingerprint_part(unsigned char **buf, size_t *len, size_t *cap, const void *part, size_t n) {
    if (!*buf) return;
    if (*len + 8 + n > *cap) {
        size_t grown_cap = (*len + 8 + n) * 2;
        unsigned char *grown = realloc(*buf, grown_cap);
        if (!grown) {
            free(*buf);
            *buf = NULL;
            return;
        }
        *buf = grown;
        *cap = grown_cap;
    }
    for (int i = 0; i < 8; i++) (*buf)[(*len)++] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(*buf + *len, part, n);
    *len += n;
}

bool pgcld_request_fingerprint(const pgcld_request *req, const char *body_sha256, char out[65]) {
    size_t len = 0, cap = 1024;
    unsigned char *buf = malloc(cap);
    static const char version[] = "pgcld request fingerprint 1";
    fingerprint_part(&buf, &len, &cap, version, sizeof version - 1);
    fingerprint_part(&buf, &len, &cap, req->method, strlen(req->method));
    fingerprint_part(&buf, &len, &cap, req->path, strlen(req->path));
    /* the query parameters by name (pgcld_route_check_query let each through at most once) */
    fingerprint_args a = {.n = 0};
    MHD_get_connection_values_n(req->connection, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
    for (int i = 1; i < a.n; i++) /* insertion sort: a handful at most */
        for (int j = i; j > 0 && strcmp(a.key[j - 1], a.key[j]) > 0; j--) {
            const char *k = a.key[j], *v = a.value[j];
            size_t kl = a.key_len[j], vl = a.value_len[j];
            a.key[j] = a.key[j - 1], a.value[j] = a.value[j - 1], a.key_len[j] = a.key_len[j - 1];
            a.value_len[j] = a.value_len[j - 1];
            a.key[j - 1] = k, a.value[j - 1] = v, a.key_len[j - 1] = kl, a.value_len[j - 1] = vl;
        }
    for (int i = 0; i < a.n; i++) {
        fingerprint_part(&buf, &len, &cap, a.key[i], a.key_len[i]);
        fingerprint_part(&buf, &len, &cap, a.value[i], a.value_len[i]);
    }
    /* the media type without parameters, in lower case (charset=utf-8 is the only one that passes) */
    char media[128] = "";
    pgcld_field ct = req->content_type;
    size_t m = 0;
    while (m < ct.len && ct.at[m] != ';' && ct.at[m] != ' ' && ct.at[m] != '\t' && m + 1 < sizeof media) {
        media[m] = (char)tolower((unsigned char)ct.at[m]);
        m++;
    }
    media[m] = 0;
    fingerprint_part(&buf, &len, &cap, media, m);
    /* the headers as evaluated, without the whitespace around them: "k" and "k " are one request */
    for (int i = 0; FINGERPRINT_HEADERS[i]; i++) {
        pgcld_field h = pgcld_request_header(req, FINGERPRINT_HEADERS[i]);
        fingerprint_part(&buf, &len, &cap, h.at ? "1" : "0", 1); /* absent and empty differ */
        fingerprint_part(&buf, &len, &cap, h.at ? h.at : "", h.len);
    }
    fingerprint_part(&buf, &len, &cap, body_sha256, strlen(body_sha256));
    if (!buf) return false;
    unsigned char digest[PGCL_SHA256_BYTES];
    pgcl_sha256(buf, len, digest);
    pgcl_sha256_to_hex(digest, out);
    free(buf);
    return true;
}

