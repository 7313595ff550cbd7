/* String names for pgcl_status and the error-buffer helper. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *pgcl_status_str(pgcl_status st) {
    switch (st) {
    case PGCL_OK: return "ok";
    case PGCL_ERR_IO: return "io";
    case PGCL_ERR_FORMAT: return "format";
    case PGCL_ERR_INVALID: return "invalid";
    case PGCL_ERR_NOMEM: return "nomem";
    case PGCL_ERR_UNSUPPORTED: return "unsupported";
    case PGCL_ERR_MISMATCH: return "mismatch";
    case PGCL_ERR_DB: return "db";
    case PGCL_ERR_BUSY: return "busy";
    case PGCL_ERR_CLOSED: return "closed";
    case PGCL_ERR_NOT_FOUND: return "not_found";
    case PGCL_ERR_DUPLICATE: return "duplicate";
    }
    return "unknown";
}

void pgcl_errorf(char *err, int cap, const char *fmt, ...) {
    if (!err || cap <= 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)cap, fmt, ap);
    va_end(ap);
}

void pgcl_assert_failed(const char *expr, const char *file, int line) {
    fprintf(stderr, "pgcld: invariant broken at %s:%d: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
