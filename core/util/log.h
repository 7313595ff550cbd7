/* Process-wide logging to stderr: one line per event, thread-safe. Two formats (--log-format):
 *   text: "TIME LEVEL message key=value key=value" (a value with a blank, '"', '=' or a byte that is
 *         not printable is quoted, with C-style escapes; control bytes in the message are escaped);
 *   json: one JSON object per line, {"ts", "level", "msg"[, "component"], fields...}, which any JSON
 *         parser (jq) reads: control characters are escaped, invalid UTF-8 becomes U+FFFD.
 * TIME and "ts" are RFC 3339 UTC with milliseconds. "component" is the message's leading "word: "
 * (e.g. "audit" for "audit: ... open"), when it has one.
 * Never pass secrets (API keys, their hashes, embeddings) to these functions. */
#ifndef PGCL_LOG_H
#define PGCL_LOG_H

#include <stddef.h>
#include <time.h>

typedef enum { PGCL_LOG_DEBUG = 0, PGCL_LOG_INFO, PGCL_LOG_WARN, PGCL_LOG_ERROR } pgcl_log_level;
typedef enum { PGCL_LOG_TEXT = 0, PGCL_LOG_JSON } pgcl_log_format;

void pgcl_log_set_level(pgcl_log_level level);
/* Parses "debug", "info", "warn" or "error"; returns 0 on success, -1 otherwise. */
int pgcl_log_parse_level(const char *name, pgcl_log_level *out);
/* Any thread may log while the main thread changes the format (SIGHUP). */
void pgcl_log_set_format(pgcl_log_format format);
/* Parses "text" or "json"; returns 0 on success, -1 otherwise. */
int pgcl_log_parse_format(const char *name, pgcl_log_format *out);
/* True when a line of this level would be written. */
int pgcl_log_enabled(pgcl_log_level level);

void pgcl_log(pgcl_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One structured field of a line: a text (omitted when NULL), an integer, or a number written with
 * three decimals (milliseconds). The key is a static identifier ([a-z_]+). */
typedef enum { PGCL_LOG_FIELD_TEXT, PGCL_LOG_FIELD_INT, PGCL_LOG_FIELD_MS } pgcl_log_field_type;
typedef struct pgcl_log_field {
    const char *key;
    pgcl_log_field_type type;
    const char *text;
    long long integer;
    double number;
} pgcl_log_field;

#define PGCL_LOG_TEXT_FIELD(k, v) ((pgcl_log_field){.key = (k), .type = PGCL_LOG_FIELD_TEXT, .text = (v)})
#define PGCL_LOG_INT_FIELD(k, v) ((pgcl_log_field){.key = (k), .type = PGCL_LOG_FIELD_INT, .integer = (v)})
#define PGCL_LOG_MS_FIELD(k, v) ((pgcl_log_field){.key = (k), .type = PGCL_LOG_FIELD_MS, .number = (v)})

/* Writes one line: msg (plain text, not a format) and the n fields, in the current format. */
void pgcl_log_fields(pgcl_log_level level, const char *msg, const pgcl_log_field *fields, int n);

/* The line pgcl_log_fields writes, into buf (cap >= 128), NUL-terminated and ending in '\n'; a line
 * longer than cap is cut inside a value, and stays well-formed (a JSON line stays an object).
 * Returns its length. Pure: for tests. */
size_t pgcl_log_format_line(char *buf, size_t cap, pgcl_log_format format, const struct timespec *when,
                            pgcl_log_level level, const char *msg, const pgcl_log_field *fields, int n);

#define pgcl_log_debug(...) pgcl_log(PGCL_LOG_DEBUG, __VA_ARGS__)
#define pgcl_log_info(...) pgcl_log(PGCL_LOG_INFO, __VA_ARGS__)
#define pgcl_log_warn(...) pgcl_log(PGCL_LOG_WARN, __VA_ARGS__)
#define pgcl_log_error(...) pgcl_log(PGCL_LOG_ERROR, __VA_ARGS__)

#endif
