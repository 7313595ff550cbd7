/* stderr logger with UTC timestamps. A single fprintf per line keeps lines whole across threads. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pgcl_log_level g_level = PGCL_LOG_INFO;
static const char *const g_names[] = {"debug", "info", "warn", "error"};

void pgcl_log_set_level(pgcl_log_level level) { g_level = level; }

int pgcl_log_parse_level(const char *name, pgcl_log_level *out) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, g_names[i]) == 0) {
            *out = (pgcl_log_level)i;
            return 0;
        }
    }
    return -1;
}

void pgcl_log(pgcl_log_level level, const char *fmt, ...) {
    if (level < g_level) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, g_names[level], msg);
}
