/* Rules for a request's head; see request_head.h. */
#include "request_head.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "header_field.h"
#include "server.h"

void pgcld_raw_target_note(const char *target, pgcld_raw_target *out) {
    *out = (pgcld_raw_target){0};
    if (!target) return;
    out->at = target;
    out->len = strlen(target);
    /* libmicrohttpd decodes %XY left to right, and '%' is no hex digit, so no earlier escape can
     * take the '%' of a "%00": the target holds "%00" exactly when its decoding holds a NUL. */
    const char *query = strchr(target, '?');
    for (const char *p = strstr(target, "%00"); p; p = strstr(p + 1, "%00")) {
        if (query && p > query) out->nul_in_query = true;
        else out->nul_in_path = true;
    }
}

/* The headers pgcld reads, each of which must come at most once. */
static const char *const SINGLETON_HEADERS[] = {
    MHD_HTTP_HEADER_HOST, MHD_HTTP_HEADER_CONTENT_LENGTH, MHD_HTTP_HEADER_TRANSFER_ENCODING,
    MHD_HTTP_HEADER_CONTENT_TYPE, MHD_HTTP_HEADER_CONTENT_ENCODING, MHD_HTTP_HEADER_AUTHORIZATION,
    "Idempotency-Key", "Pgcld-Item-Ids", "Inference-Header-Content-Length", NULL};
#define N_SINGLETONS 9
_Static_assert(sizeof SINGLETON_HEADERS / sizeof SINGLETON_HEADERS[0] == N_SINGLETONS + 1, "N_SINGLETONS");

/* What one pass over the header fields found. */
typedef struct head_scan {
    char bad_name[48];        /* the first name that is not a token */
    char bad_value[48];       /* the name of the first value holding a control character */
    int counts[N_SINGLETONS]; /* how often each singleton header came */
    pgcld_field transfer_encoding, content_encoding; /* without OWS (header_field.h) */
    bool transfer_encoding_ows_after; /* libmicrohttpd frames by the value with it (see below) */
    pgcld_field content_length_as_sent; /* with its OWS: what libmicrohttpd read (and may have refused) */
    bool host;
} head_scan;

/* RFC 9110 §5.6.2: tchar. */
static bool is_token_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

/* Copies at most cap - 1 bytes of a name for an error text, printable ASCII only. */
static void quote_name(char *out, size_t cap, const char *name, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) out[n++] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
    out[n] = 0;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    (void)kind;
    head_scan *s = cls;
    bool token = key_size > 0;
    for (size_t i = 0; i < key_size && token; i++) token = is_token_char((unsigned char)key[i]);
    if (!token) {
        if (!s->bad_name[0]) quote_name(s->bad_name, sizeof s->bad_name, key, key_size);
        if (!s->bad_name[0]) snprintf(s->bad_name, sizeof s->bad_name, "(empty)");
        return MHD_YES;
    }
    /* RFC 9110 §5.5: a field value is visible characters, SP and HTAB (obs-text allowed). */
    for (size_t i = 0; value && i < value_size; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            if (!s->bad_value[0]) quote_name(s->bad_value, sizeof s->bad_value, key, key_size);
            break;
        }
    }
    for (int i = 0; i < N_SINGLETONS; i++) {
        if (strlen(SINGLETON_HEADERS[i]) != key_size || strncasecmp(SINGLETON_HEADERS[i], key, key_size) != 0) continue;
        s->counts[i]++;
        pgcld_field field = pgcld_field_trim(value ? value : "", value ? value_size : 0);
        /* the first of a repeated header: the one libmicrohttpd frames by (the repeat is refused below) */
        bool first = s->counts[i] == 1;
        if (first && strcasecmp(SINGLETON_HEADERS[i], MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
            s->transfer_encoding = field;
            s->transfer_encoding_ows_after = field.at + field.len != value + value_size;
        }
        if (first && strcasecmp(SINGLETON_HEADERS[i], MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
            s->content_length_as_sent = (pgcld_field){value ? value : "", value ? value_size : 0};
        if (first && strcasecmp(SINGLETON_HEADERS[i], MHD_HTTP_HEADER_CONTENT_ENCODING) == 0) s->content_encoding = field;
        if (strcasecmp(SINGLETON_HEADERS[i], MHD_HTTP_HEADER_HOST) == 0) s->host = true;
    }
    return MHD_YES;
}

/* Query arguments whose decoded key or value holds a NUL (their sizes say more than strlen). */
static enum MHD_Result scan_argument(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size) {
    (void)kind;
    bool *nul = cls;
    if (strlen(key) != key_size || (value && strlen(value) != value_size)) *nul = true;
    return MHD_YES;
}

/* ---- bytes hidden behind a NUL ----
 * libmicrohttpd (0.9.75) hands out the method, the target, the version and every header name and
 * value as C strings, so a NUL byte in a line hides the rest of it from every check. It parses the
 * head in place, in one buffer that starts at the method's first byte and is header_size bytes long
 * (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE), replacing the space after the method and before the
 * version, each header's colon, and each line's CR and LF by NUL; the pointers it hands out point
 * into that buffer, in the order of the head. So what lies between the end of one string and the
 * start of the next is known: after the method, NUL and spaces up to the target; after the
 * target (as the URI log callback measured it), exactly the NUL before the version; after a
 * header's value, its line end (CRLF or LF: 1 or 2 NULs) up to the next name; after the last value,
 * two line ends (2 to 4 NULs) up to the end of the head. Any other byte there was hidden behind a
 * NUL (or belongs to a continuation line, obs-fold, which 0.9.75 also mishandles: it appends it to
 * the header's name). A later libmicrohttpd may lay the head out differently: the check is made
 * for the version it was written against, and the tests of tests/bad_inputs show it holds. */
#if MHD_VERSION >= 0x00097500 && MHD_VERSION < 0x00097600
#define CHECK_HIDDEN_BYTES 1
#else
#define CHECK_HIDDEN_BYTES 0
#endif

#define MAX_HEAD_FIELDS 256

typedef struct head_fields {
    const char *name[MAX_HEAD_FIELDS], *value[MAX_HEAD_FIELDS];
    int n;
    bool too_many;
} head_fields;

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size) {
    (void)kind;
    (void)key_size;
    (void)value_size;
    head_fields *f = cls;
    if (f->n == MAX_HEAD_FIELDS) {
        f->too_many = true;
        return MHD_NO;
    }
    f->name[f->n] = key;
    f->value[f->n++] = value ? value : key;
    return MHD_YES;
}

/* True when [from, to) lies inside [begin, end) and holds only bytes of `allowed` (NUL counted by
 * `nuls`), with the number of NULs within [min_nuls, max_nuls]. */
static bool gap_is(const char *begin, const char *end, const char *from, const char *to, const char *allowed,
                   int min_nuls, int max_nuls) {
    if (from < begin || to > end || from > to) return false;
    int nuls = 0;
    for (const char *q = from; q < to; q++) {
        if (*q == 0) nuls++;
        else if (!strchr(allowed, *q)) return false;
    }
    return nuls >= min_nuls && nuls <= max_nuls;
}

/* Why the head hides bytes behind a NUL (see above), or NULL when it does not; *field names the
 * part of the head. */
static const char *hidden_bytes(struct MHD_Connection *conn, const char *method, const char *version,
                                const pgcld_raw_target *t, const char **field) {
    *field = "headers";
    if (!CHECK_HIDDEN_BYTES || !method || !t->at) return NULL;
    const union MHD_ConnectionInfo *size = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (!size || size->header_size == 0) return NULL;
    const char *begin = method, *end = method + size->header_size;
    if (t->at < begin || t->at + t->len > end) return NULL; /* not the layout described above */
    *field = "method";
    if (!gap_is(begin, end, method + strlen(method), t->at, " ", 1, 1)) return "the method holds a NUL byte";
    *field = "path";
    const char *after_target = t->at + t->len;
    if (version >= begin && version < end && !gap_is(begin, end, after_target, version, "", 1, 1))
        return "the request target holds a NUL byte";
    *field = "headers";
    head_fields f = {.n = 0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, collect_field, &f);
    if (f.too_many) return NULL;
    const char *prev_end = NULL;
    for (int i = 0; i < f.n; i++) {
        if (f.name[i] < begin || f.name[i] >= end) return "a header line is folded onto the next (obs-fold)";
        if (prev_end && !gap_is(begin, end, prev_end, f.name[i], "", 1, 2))
            return "a header line holds a NUL byte, or is folded onto the next (obs-fold)";
        if (f.value[i] < f.name[i] || f.value[i] >= end) return "a header line is folded onto the next (obs-fold)";
        prev_end = f.value[i] + strlen(f.value[i]);
    }
    if (prev_end && !gap_is(begin, end, prev_end, end, "", 2, 4))
        return "a header line holds a NUL byte, or is folded onto the next (obs-fold)";
    return NULL;
}

static void refuse(pgcld_head_problem *p, int status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse(pgcld_head_problem *p, int status, const char *code, const char *field, const char *fmt, ...) {
    p->status = status;
    p->code = code;
    snprintf(p->field, sizeof p->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof p->message, fmt, ap);
    va_end(ap);
}

void pgcld_check_request_head(struct MHD_Connection *conn, const char *method, const char *version,
                              const pgcld_raw_target *target, pgcld_head_problem *p) {
    *p = (pgcld_head_problem){0};
    head_scan s = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &s);

    /* libmicrohttpd 0.9.75 refuses a Content-Length that is not a decimal number (or does not fit
     * in 64 bits) itself, before this first call, and has queued its own HTML answer. It reads the
     * value as sent: "5 " is not a number to it. */
    const union MHD_ConnectionInfo *queued = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
    if (queued && queued->http_status != 0) {
        p->library_answered = true;
        pgcld_field cl = s.content_length_as_sent;
        uint64_t length;
        if (cl.at && pgcld_parse_decimal(cl.at, cl.len, UINT64_MAX, &length) != PGCLD_DECIMAL_MALFORMED)
            refuse(p, 413, "payload_too_large", MHD_HTTP_HEADER_CONTENT_LENGTH,
                   "Content-Length %.*s is larger than any body this server accepts", (int)(cl.len < 40 ? cl.len : 40),
                   cl.at);
        else
            refuse(p, 400, "invalid_request", MHD_HTTP_HEADER_CONTENT_LENGTH,
                   "Content-Length must be one decimal number of bytes");
        return;
    }
    if (s.bad_name[0]) {
        refuse(p, 400, "invalid_request", "headers",
               "header field name '%s' is not a token (no whitespace before the colon, no control or separator "
               "characters)", s.bad_name);
        return;
    }
    const char *hidden_in;
    const char *hidden = hidden_bytes(conn, method, version, target, &hidden_in);
    if (hidden) {
        refuse(p, 400, "invalid_request", hidden_in, "%s", hidden);
        return;
    }
    if (s.bad_value[0]) {
        refuse(p, 400, "invalid_request", s.bad_value, "header '%s' holds a control character (NUL, CR, LF, …)",
               s.bad_value);
        return;
    }
    for (int i = 0; i < N_SINGLETONS; i++) {
        if (s.counts[i] > 1) {
            refuse(p, 400, "invalid_request", SINGLETON_HEADERS[i], "header '%s' is given %d times; send it once",
                   SINGLETON_HEADERS[i], s.counts[i]);
            return;
        }
    }
    bool http10 = version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    if (!http10 && !s.host) {
        refuse(p, 400, "invalid_request", MHD_HTTP_HEADER_HOST, "an HTTP/1.1 request must carry a Host header");
        return;
    }
    if (s.transfer_encoding.at) {
        if (http10) {
            refuse(p, 400, "invalid_request", MHD_HTTP_HEADER_TRANSFER_ENCODING,
                   "an HTTP/1.0 request cannot use Transfer-Encoding");
            return;
        }
        if (!pgcld_field_is(s.transfer_encoding, "chunked")) {
            refuse(p, 501, "not_implemented", MHD_HTTP_HEADER_TRANSFER_ENCODING,
                   "Transfer-Encoding '%.*s' is not supported: send the body as is, with Content-Length or "
                   "Transfer-Encoding: chunked", PGCLD_FIELD_SHOWN(s.transfer_encoding));
            return;
        }
        if (s.transfer_encoding_ows_after) {
            refuse(p, 400, "invalid_request", MHD_HTTP_HEADER_TRANSFER_ENCODING,
                   "Transfer-Encoding must be 'chunked' without whitespace after it (this server would not read "
                   "the body as chunked)");
            return;
        }
        if (s.content_length_as_sent.at) {
            refuse(p, 400, "invalid_request", MHD_HTTP_HEADER_CONTENT_LENGTH,
                   "Content-Length and Transfer-Encoding headers disagree on the body's length");
            return;
        }
    }
    bool nul_argument = false;
    MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, scan_argument, &nul_argument);
    if (target->nul_in_path) {
        refuse(p, 400, "invalid_request", "path", "the request path decodes to a NUL byte (%%00)");
        return;
    }
    if (target->nul_in_query || nul_argument) {
        refuse(p, 400, "invalid_request", "query", "the query string decodes to a NUL byte (%%00)");
        return;
    }
    if (s.content_encoding.at && !pgcld_field_is(s.content_encoding, "identity")) {
        refuse(p, 415, "unsupported_media_type", MHD_HTTP_HEADER_CONTENT_ENCODING,
               "Content-Encoding '%.*s' is not supported: send the body unencoded", PGCLD_FIELD_SHOWN(s.content_encoding));
        return;
    }
}
