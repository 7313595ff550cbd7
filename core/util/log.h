/* Process-wide logging to stderr: one line per event, "TIME LEVEL message". Thread-safe.
 * Never pass secrets (API keys, embeddings) to these functions. */
#ifndef PGCL_LOG_H
#define PGCL_LOG_H

typedef enum { PGCL_LOG_DEBUG = 0, PGCL_LOG_INFO, PGCL_LOG_WARN, PGCL_LOG_ERROR } pgcl_log_level;

void pgcl_log_set_level(pgcl_log_level level);
/* Parses "debug", "info", "warn" or "error"; returns 0 on success, -1 otherwise. */
int pgcl_log_parse_level(const char *name, pgcl_log_level *out);
void pgcl_log(pgcl_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pgcl_log_debug(...) pgcl_log(PGCL_LOG_DEBUG, __VA_ARGS__)
#define pgcl_log_info(...) pgcl_log(PGCL_LOG_INFO, __VA_ARGS__)
#define pgcl_log_warn(...) pgcl_log(PGCL_LOG_WARN, __VA_ARGS__)
#define pgcl_log_error(...) pgcl_log(PGCL_LOG_ERROR, __VA_ARGS__)

#endif
