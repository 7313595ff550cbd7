/* A JSON text writer for the scoring answers, the hot path's replacement for building a jansson
 * DOM and calling json_dumps(): at batch 64 with vectors an answer holds 4,000+ numbers, and
 * formatting them through the DOM and printf took about a tenth of the daemon's CPU
 * (bench/RESULTS.md). The output is byte-for-byte what json_dumps(JSON_COMPACT |
 * JSON_REAL_PRECISION(9)) writes for the same values (tests/server/test_jsonw.c checks it against
 * jansson), so clients see no change. */
#ifndef PGCLD_JSONW_H
#define PGCLD_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing buffer. After an allocation failure every call is a no-op and failed is set. */
typedef struct pgcld_jsonw {
    char *buf;   /* NUL-terminated while not failed */
    size_t len, cap;
    bool failed;
} pgcld_jsonw;

/* Starts an empty text with room for about `hint` bytes. */
void pgcld_jsonw_init(pgcld_jsonw *w, size_t hint);
/* Hands the text over (the caller frees it) or NULL after a failure; w is empty afterwards. */
char *pgcld_jsonw_take(pgcld_jsonw *w, size_t *len);
/* Frees what w holds. */
void pgcld_jsonw_free(pgcld_jsonw *w);

/* Appends bytes as they are (punctuation, keys known to need no escaping, pre-serialised JSON). */
void pgcld_jsonw_raw(pgcld_jsonw *w, const char *text, size_t len);
/* Appends a NUL-terminated literal as it is. */
void pgcld_jsonw_lit(pgcld_jsonw *w, const char *text);
/* Appends a JSON string: quotes, and the escapes jansson uses (\" \\ \b \f \n \r \t, \u00XX for
 * other control bytes; UTF-8 passes through, '/' is not escaped). text must be valid UTF-8. */
void pgcld_jsonw_str(pgcld_jsonw *w, const char *text);
/* The same for n bytes that may include NUL (written as \u0000). */
void pgcld_jsonw_strn(pgcld_jsonw *w, const char *text, size_t n);
void pgcld_jsonw_int(pgcld_jsonw *w, int64_t v);
/* Appends v as jansson writes json_real((double)v) with precision 9: printf's "%.9g", then
 * exponent without '+' or leading zeros, and ".0" added to integers. v must be finite. */
void pgcld_jsonw_f32(pgcld_jsonw *w, float v);

/* The number text alone (the function behind pgcld_jsonw_f32); out needs 32 bytes. Returns the
 * length. */
int pgcld_format_f32(float v, char out[32]);
/* The same through snprintf, the oracle and the fallback for magnitudes outside 1e-12..1e9. */
int pgcld_format_f32_slow(float v, char out[32]);

#endif
