/* A request header field's value as pgcld evaluates it. RFC 9110 §5.5: a field value does not
 * include the optional whitespace (OWS: SP and HTAB, nothing else) around it, which must be
 * excluded before the value is evaluated. libmicrohttpd 0.9.75 skips the leading whitespace only
 * and hands out "abc  " for "X-Request-Id: abc  ", so every header pgcld reads (Authorization,
 * Content-Type, Idempotency-Key, X-Request-Id, traceparent, Pgcld-Item-Ids,
 * Inference-Header-Content-Length, Transfer-Encoding, Content-Encoding, Content-Length) is read
 * through pgcld_header_field, which trims with pgcld_field_trim, and never with
 * MHD_lookup_connection_value. A value is a slice of libmicrohttpd's buffer (no copy, nothing
 * allocated), valid while the request is. */
#ifndef PGCLD_HEADER_FIELD_H
#define PGCLD_HEADER_FIELD_H

#include <stdbool.h>
#include <stddef.h>

struct MHD_Connection;

/* A header field's value without its surrounding OWS: len bytes at `at`, which are not
 * NUL-terminated where trailing whitespace was cut off. at is NULL (and len 0) when the header is
 * absent; an empty value is a non-NULL at with len 0. */
typedef struct pgcld_field {
    const char *at;
    size_t len;
} pgcld_field;

/* value[0..len) without the SP and HTAB bytes at its start and end (RFC 9110 §5.5); other
 * whitespace (CR, LF, VT, FF, NBSP) stays. value NULL gives the absent field. Pure. */
pgcld_field pgcld_field_trim(const char *value, size_t len);

/* The value of header `name` (case-insensitive) of the request on conn, trimmed by
 * pgcld_field_trim, in *out: the first one when the header came more than once, the absent field
 * when it did not come. Returns how many times it came. Call while the request's head is
 * available (from its first access-handler call on). */
int pgcld_header_field(struct MHD_Connection *conn, const char *name, pgcld_field *out);

/* Copies f into out as a C string. False (out "") when f is absent or does not fit in cap - 1
 * bytes. */
bool pgcld_field_copy(pgcld_field f, char *out, size_t cap);

/* Whether f is `text`, ASCII case-insensitively (a token such as "chunked"). False when absent. */
bool pgcld_field_is(pgcld_field f, const char *text);

/* The two printf arguments of a "%.*s" that shows f in a message: its first 64 bytes at most,
 * "(none)" when absent. f is evaluated more than once. */
#define PGCLD_FIELD_SHOWN(f) \
    (int)((f).at ? ((f).len < 64 ? (f).len : 64) : 6), ((f).at ? (f).at : "(none)")

#endif
