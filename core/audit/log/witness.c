/* Witnesses (witness.h): the operator's --witness specs, the count of cosigners of a checkpoint,
 * and one add-checkpoint exchange over HTTP (libcurl), c2sp.org/tlog-witness as the client sees it.
 * The texts of the protocol (request body, 409 size, cosignature lines) are note.h's. */
#include "witness.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- --witness NAME=URL,VERIFIER_KEY ---- */

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

static bool hex_digit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A host: a DNS name or IPv4 ([A-Za-z0-9.-], not starting or ending with '.' or '-') or an IPv6
 * literal in brackets ([0-9A-Fa-f:.]); then an optional ":port" (1 to 65535). */
static bool authority_valid(const char *s, size_t len) {
    size_t i = 0;
    if (len > 0 && s[0] == '[') {
        for (i = 1; i < len && s[i] != ']'; i++)
            if (!hex_digit(s[i]) && s[i] != ':' && s[i] != '.') return false;
        if (i >= len || i < 3) return false;
        i++;
    } else {
        for (; i < len && s[i] != ':'; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                  s[i] == '.' || s[i] == '-'))
                return false;
        if (i == 0 || s[0] == '.' || s[0] == '-' || s[i - 1] == '.' || s[i - 1] == '-') return false;
    }
    if (i == len) return true;
    if (s[i] != ':' || len - i < 2 || len - i > 6) return false;
    unsigned port = 0;
    for (size_t j = i + 1; j < len; j++) {
        if (s[j] < '0' || s[j] > '9') return false;
        port = port * 10 + (unsigned)(s[j] - '0');
    }
    return s[i + 1] != '0' && port >= 1 && port <= 65535;
}

/* A path: RFC 3986 pchars and '/' (no '?', '#', '@', blanks), '%' followed by two hex digits. */
static bool path_valid(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= len) return false;
            if (!hex_digit(s[i + 1]) || !hex_digit(s[i + 2])) return false;
            i += 2;
            continue;
        }
        if (name_char(c) || c == '~' || c == '/' || c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' ||
            c == ')' || c == '*' || c == '+' || c == ',' || c == ';' || c == '=' || c == ':')
            continue;
        return false;
    }
    return true;
}

/* Checks url[0:len) and copies it, without a trailing '/', into out. */
static bool url_parse(const char *url, size_t len, char out[PGCL_WITNESS_URL_MAX + 1], char *err, int cap) {
    size_t scheme = 0;
    if (len >= 7 && memcmp(url, "http://", 7) == 0) scheme = 7;
    if (len >= 8 && memcmp(url, "https://", 8) == 0) scheme = 8;
    if (scheme == 0) {
        pgcl_errorf(err, cap, "the URL must start with http:// or https://");
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        const char *why = url[i] == '?' || url[i] == '#' ? "neither a query ('?') nor a fragment ('#')"
                          : url[i] == '@'                ? "no user information ('@')"
                          : (unsigned char)url[i] <= 0x20 || url[i] == 0x7f ? "no blank or control character"
                                                                            : NULL;
        if (why) {
            pgcl_errorf(err, cap, "the URL may hold %s", why);
            return false;
        }
    }
    while (len > scheme && url[len - 1] == '/')
        len--;
    if (len > PGCL_WITNESS_URL_MAX) {
        pgcl_errorf(err, cap, "the URL is longer than %d bytes", PGCL_WITNESS_URL_MAX);
        return false;
    }
    const char *host = url + scheme;
    const char *slash = memchr(host, '/', len - scheme);
    size_t host_len = slash ? (size_t)(slash - host) : len - scheme;
    if (!authority_valid(host, host_len)) {
        pgcl_errorf(err, cap,
                    "the URL's host \"%.*s\" is not a host name, an IPv4 address or a [IPv6] address, "
                    "with an optional :port (no user information)",
                    (int)(host_len > 80 ? 80 : host_len), host);
        return false;
    }
    if (!path_valid(host + host_len, len - scheme - host_len)) {
        pgcl_errorf(err, cap,
                    "the URL's path may hold neither a query ('?'), a fragment ('#'), '@', blanks, "
                    "control characters nor a '%%' without two hex digits");
        return false;
    }
    memcpy(out, url, len);
    out[len] = 0;
    return true;
}

pgcl_status pgcl_witness_parse(const char *spec, pgcl_witness *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    char why[200] = "";
    const char *eq = spec ? strchr(spec, '=') : NULL;
    const char *comma = spec ? strrchr(spec, ',') : NULL;
    if (!eq || !comma || comma < eq) {
        pgcl_errorf(err, cap, "--witness: expected NAME=URL,VERIFIER_KEY");
        return PGCL_ERR_FORMAT;
    }
    size_t name_len = (size_t)(eq - spec);
    bool name_ok = name_len >= 1 && name_len <= PGCL_WITNESS_NAME_MAX;
    for (size_t i = 0; name_ok && i < name_len; i++)
        name_ok = name_char(spec[i]);
    if (!name_ok) {
        pgcl_errorf(err, cap, "--witness: the name \"%.*s\" must be 1 to %d of A-Z a-z 0-9 . _ -",
                    (int)(name_len > 80 ? 80 : name_len), spec, PGCL_WITNESS_NAME_MAX);
        return PGCL_ERR_FORMAT;
    }
    memcpy(out->name, spec, name_len);
    if (!url_parse(eq + 1, (size_t)(comma - eq - 1), out->url, why, sizeof why)) {
        pgcl_errorf(err, cap, "--witness %s: %s", out->name, why);
        memset(out, 0, sizeof *out);
        return PGCL_ERR_FORMAT;
    }
    pgcl_status st = pgcl_note_verifier_parse(comma + 1, &out->key, why, sizeof why);
    if (st == PGCL_OK && out->key.alg != PGCL_NOTE_ALG_COSIGNATURE_V1) {
        pgcl_errorf(why, sizeof why,
                    "a note signature key (algorithm 0x%02x), not a witness's cosignature/v1 key "
                    "(0x04)",
                    out->key.alg);
        st = PGCL_ERR_UNSUPPORTED;
    }
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "--witness %s: the verifier key: %s", out->name, why);
        memset(out, 0, sizeof *out);
        return st;
    }
    return PGCL_OK;
}

pgcl_status pgcl_witness_parse_all(const char *const *specs, int n, pgcl_witness *out, char *err, int cap) {
    if (n < 0 || n > PGCL_WITNESS_MAX) {
        pgcl_errorf(err, cap, "--witness: at most %d witnesses", PGCL_WITNESS_MAX);
        return PGCL_ERR_INVALID;
    }
    for (int i = 0; i < n; i++) {
        pgcl_status st = pgcl_witness_parse(specs[i], &out[i], err, cap);
        if (st != PGCL_OK) return st;
        for (int j = 0; j < i; j++) {
            const char *same = strcmp(out[i].name, out[j].name) == 0 ? "name"
                               : strcmp(out[i].url, out[j].url) == 0 ? "URL"
                               : memcmp(out[i].key.public_key, out[j].key.public_key, PGCL_NOTE_PUBLIC_KEY_BYTES) == 0
                                   ? "public key"
                                   : NULL;
            if (same) {
                pgcl_errorf(err, cap, "--witness %s (the %dth): the same %s as witness %s: a witness counts once",
                            out[i].name, i + 1, same, out[j].name);
                return PGCL_ERR_INVALID;
            }
        }
    }
    return PGCL_OK;
}

/* The text of the signed note msg[0:len): up to and including the newline before the first blank
 * line; 0 when there is none. */
static size_t note_text_len(const char *msg, size_t len) {
    const char *blank = len >= 2 ? memmem(msg, len, "\n\n", 2) : NULL;
    return blank ? (size_t)(blank - msg) + 1 : 0;
}

int pgcl_witness_count_cosignatures(const char *note, size_t len, const pgcl_witness *witnesses, int n, char *err,
                                    int cap) {
    pgcl_tlog_checkpoint cp;
    size_t text_len = note ? note_text_len(note, len) : 0;
    if (text_len == 0 || pgcl_tlog_checkpoint_parse(note, text_len, &cp, err, cap) != PGCL_OK) {
        if (text_len == 0) pgcl_errorf(err, cap, "witness count: not a signed note");
        return -1;
    }
    if (n <= 0) return 0;
    /* keys to open with: one per distinct (name, key ID, public key), so that pgcl_note_open sees no
     * ambiguous pair */
    pgcl_note_verifier *keys = calloc((size_t)n, sizeof *keys);
    if (!keys) {
        pgcl_errorf(err, cap, "out of memory");
        return -1;
    }
    int n_keys = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < n_keys && !seen; j++)
            seen = memcmp(&keys[j], &witnesses[i].key, sizeof keys[j]) == 0;
        if (!seen) keys[n_keys++] = witnesses[i].key;
    }
    pgcl_status st;
    pgcl_note *opened = pgcl_note_open(note, len, keys, n_keys, &st, err, cap);
    int count = 0;
    if (!opened) {
        count = st == PGCL_ERR_NOT_FOUND ? 0 : -1;
    } else {
        /* distinct public keys among the verified lines: a cosignature/v1 does not sign its key's name */
        for (int i = 0; i < opened->n_sigs; i++) {
            int v = opened->sigs[i].verifier;
            if (v < 0) continue;
            bool earlier = false;
            for (int j = 0; j < i && !earlier; j++) {
                int u = opened->sigs[j].verifier;
                earlier = u >= 0 && memcmp(keys[u].public_key, keys[v].public_key, PGCL_NOTE_PUBLIC_KEY_BYTES) == 0;
            }
            count += !earlier;
        }
        pgcl_note_destroy(opened);
    }
    free(keys);
    return count;
}

/* ---- one add-checkpoint exchange ---- */

const char *pgcl_witness_outcome_str(pgcl_witness_outcome o) {
    switch (o) {
    case PGCL_WITNESS_NONE:
        return "none";
    case PGCL_WITNESS_COSIGNED:
        return "cosigned";
    case PGCL_WITNESS_CONFLICT:
        return "conflict";
    case PGCL_WITNESS_BAD_PROOF:
        return "bad_proof";
    case PGCL_WITNESS_REFUSED:
        return "refused";
    case PGCL_WITNESS_UNREACHABLE:
        return "unreachable";
    case PGCL_WITNESS_BAD_ANSWER:
        return "bad_answer";
    case PGCL_WITNESS_NO_PROOF:
        return "no_proof";
    }
    return "unknown";
}

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static bool g_curl_ok;

static void curl_init_once(void) {
    g_curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

bool pgcl_witness_http_init(void) {
    pthread_once(&g_curl_once, curl_init_once);
    return g_curl_ok;
}

/* An answer's body, read up to PGCL_WITNESS_ANSWER_MAX bytes. */
typedef struct answer {
    char buf[PGCL_WITNESS_ANSWER_MAX + 1];
    size_t len;
    bool too_long;
} answer;

static size_t answer_write(char *data, size_t size, size_t nmemb, void *ctx) {
    answer *a = ctx;
    size_t n = size * nmemb;
    if (n > PGCL_WITNESS_ANSWER_MAX - a->len) {
        a->too_long = true;
        return 0; /* aborts the transfer */
    }
    memcpy(a->buf + a->len, data, n);
    a->len += n;
    a->buf[a->len] = 0;
    return n;
}

/* POSTs body[0:len) to w's add-checkpoint. Returns the HTTP status, 0 with err set when no answer
 * came (or it was too long: -1). */
static int http_post(const pgcl_witness *w, const char *body, size_t len, const pgcl_witness_timeouts *t, answer *a,
                     char *err, int cap) {
    a->len = 0;
    a->buf[0] = 0;
    a->too_long = false;
    char url[PGCL_WITNESS_URL_MAX + sizeof "/add-checkpoint"];
    snprintf(url, sizeof url, "%s/add-checkpoint", w->url);
    CURL *c = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: text/plain; charset=utf-8");
    struct curl_slist *more = headers ? curl_slist_append(headers, "Expect:") : NULL;
    if (!c || !more) {
        if (c) curl_easy_cleanup(c);
        curl_slist_free_all(more ? more : headers);
        pgcl_errorf(err, cap, "out of memory for an HTTP request");
        return 0;
    }
    headers = more;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(t && t->connect_ms > 0 ? t->connect_ms : 2000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(t && t->total_ms > 0 ? t->total_ms : 5000));
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "pgcld-witness-client");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, answer_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else if (a->too_long)
        status = -1;
    if (rc != CURLE_OK && !a->too_long) pgcl_errorf(err, cap, "POST %.200s: %s", url, curl_easy_strerror(rc));
    if (a->too_long) pgcl_errorf(err, cap, "POST %.200s: an answer over %d bytes", url, PGCL_WITNESS_ANSWER_MAX);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return (int)status;
}

/* A printable excerpt of an answer's body for an error text. */
static void body_excerpt(const answer *a, char out[81]) {
    size_t n = 0;
    for (size_t i = 0; i < a->len && n < 80; i++)
        out[n++] = (a->buf[i] >= 0x20 && a->buf[i] < 0x7f) ? a->buf[i] : ' ';
    out[n] = 0;
}

static pgcl_witness_outcome fail(pgcl_witness_result *out, pgcl_witness_outcome o) {
    out->outcome = o;
    return o;
}

/* One request from old_size; fills the request's part of *out. */
static int request_once(const pgcl_witness *w, const char *note, size_t len, uint64_t old_size, uint64_t new_size,
                        pgcl_witness_proof_fn proof_fn, void *proof_ctx, const pgcl_witness_timeouts *t, answer *a,
                        pgcl_witness_result *out) {
    pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH];
    int n_proof = 0;
    if (old_size > 0 && old_size < new_size) {
        char why[200] = "";
        pgcl_status st =
            proof_fn ? proof_fn(proof_ctx, old_size, new_size, proof, &n_proof, why, sizeof why) : PGCL_ERR_INVALID;
        if (st != PGCL_OK || n_proof < 0 || n_proof > PGCL_TLOG_WITNESS_PROOF_MAX) {
            pgcl_errorf(out->error, sizeof out->error, "no consistency proof from %" PRIu64 " to %" PRIu64 ": %s",
                        old_size, new_size, proof_fn ? why : "no proof source");
            return -2;
        }
    }
    pgcl_status st;
    size_t body_len;
    char *body =
        pgcl_tlog_witness_request(old_size, proof, n_proof, note, len, &body_len, &st, out->error, sizeof out->error);
    if (!body) return -2;
    out->requests++;
    int status = http_post(w, body, body_len, t, a, out->error, sizeof out->error);
    free(body);
    out->http_status = status > 0 ? status : 0;
    return status;
}

pgcl_witness_outcome pgcl_witness_add_checkpoint(const pgcl_witness *w, const char *note, size_t len, uint64_t old_size,
                                                 pgcl_witness_proof_fn proof_fn, void *proof_ctx,
                                                 const pgcl_witness_timeouts *timeouts, pgcl_witness_result *out) {
    memset(out, 0, sizeof *out);
    out->witness_size = old_size;
    pgcl_tlog_checkpoint cp;
    size_t text_len = note ? note_text_len(note, len) : 0;
    if (text_len == 0 || pgcl_tlog_checkpoint_parse(note, text_len, &cp, out->error, sizeof out->error) != PGCL_OK) {
        if (text_len == 0) pgcl_errorf(out->error, sizeof out->error, "not a signed note");
        return fail(out, PGCL_WITNESS_NO_PROOF);
    }
    if (!pgcl_witness_http_init()) {
        pgcl_errorf(out->error, sizeof out->error, "libcurl could not be initialised");
        return fail(out, PGCL_WITNESS_UNREACHABLE);
    }
    if (old_size > cp.size) old_size = 0;
    answer *a = malloc(sizeof *a);
    if (!a) {
        pgcl_errorf(out->error, sizeof out->error, "out of memory");
        return fail(out, PGCL_WITNESS_UNREACHABLE);
    }
    pgcl_witness_outcome o = PGCL_WITNESS_NONE;
    bool retried = false;
    char excerpt[81];
    while (o == PGCL_WITNESS_NONE) {
        int status = request_once(w, note, len, old_size, cp.size, proof_fn, proof_ctx, timeouts, a, out);
        uint64_t size = 0;
        if (status == -2) {
            o = PGCL_WITNESS_NO_PROOF;
        } else if (status == -1) {
            o = PGCL_WITNESS_BAD_ANSWER;
        } else if (status == 200) {
            pgcl_status st = pgcl_tlog_witness_cosignature(note, text_len, a->buf, a->len, &w->key, out->line,
                                                           &out->timestamp, out->error, sizeof out->error);
            o = st == PGCL_OK ? PGCL_WITNESS_COSIGNED : PGCL_WITNESS_BAD_ANSWER;
            if (st == PGCL_OK) out->witness_size = cp.size;
        } else if (status == 409) {
            if (pgcl_tlog_witness_parse_size(a->buf, a->len, &size, out->error, sizeof out->error) != PGCL_OK) {
                o = PGCL_WITNESS_BAD_ANSWER;
            } else if (size > cp.size) {
                out->witness_size = size;
                pgcl_errorf(out->error, sizeof out->error,
                            "the witness has cosigned a tree of %" PRIu64 " leaves, larger than this checkpoint's "
                            "%" PRIu64 ": refused (a split view, or a stale checkpoint)",
                            size, cp.size);
                o = PGCL_WITNESS_CONFLICT;
            } else if (retried || size == old_size) {
                out->witness_size = size;
                pgcl_errorf(out->error, sizeof out->error,
                            "the witness holds a tree of %" PRIu64 " leaves that this checkpoint of %" PRIu64
                            " does not extend (409 from old size %" PRIu64 "): refused (a split view)",
                            size, cp.size, old_size);
                o = PGCL_WITNESS_CONFLICT;
            } else {
                out->witness_size = size;
                old_size = size; /* once, from the witness's own size */
                retried = true;
            }
        } else if (status == 422) {
            body_excerpt(a, excerpt);
            if (retried) {
                pgcl_errorf(out->error, sizeof out->error,
                            "the witness refuses the consistency proof from its own size %" PRIu64 " to %" PRIu64
                            ": its tree is not a prefix of this one (a split view): %s",
                            old_size, cp.size, excerpt);
                o = PGCL_WITNESS_CONFLICT;
            } else {
                pgcl_errorf(out->error, sizeof out->error,
                            "422: the witness refuses the consistency proof from %" PRIu64 " to %" PRIu64 ": %s",
                            old_size, cp.size, excerpt);
                o = PGCL_WITNESS_BAD_PROOF;
            }
        } else if (status >= 400 && status < 500) {
            body_excerpt(a, excerpt);
            pgcl_errorf(out->error, sizeof out->error, "%d: the witness refuses the checkpoint%s: %s", status,
                        status == 404   ? " (it does not know this log's origin)"
                        : status == 403 ? " (it does not know this log's key)"
                                        : "",
                        excerpt);
            o = PGCL_WITNESS_REFUSED;
        } else if (status == 0 || status >= 500) {
            if (status >= 500) {
                body_excerpt(a, excerpt);
                pgcl_errorf(out->error, sizeof out->error, "%d: the witness failed: %s", status, excerpt);
            }
            o = PGCL_WITNESS_UNREACHABLE;
        } else {
            pgcl_errorf(out->error, sizeof out->error, "an unexpected HTTP status %d", status);
            o = PGCL_WITNESS_BAD_ANSWER;
        }
    }
    free(a);
    if (o == PGCL_WITNESS_COSIGNED) out->error[0] = 0;
    return fail(out, o);
}
