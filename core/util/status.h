/* Status codes shared by every fallible call in core/ and the backends.
 * A function that fails returns one of these and, where it takes an error buffer, writes a
 * human-readable reason into it at the place the failure was detected. */
#ifndef PGCL_STATUS_H
#define PGCL_STATUS_H

typedef enum pgcl_status {
    PGCL_OK = 0,
    PGCL_ERR_IO,          /* a file could not be opened, read, mapped or written */
    PGCL_ERR_FORMAT,      /* a file or document is malformed */
    PGCL_ERR_INVALID,     /* well-formed but violates a rule (shape, range, non-finite value) */
    PGCL_ERR_NOMEM,       /* an allocation failed */
    PGCL_ERR_UNSUPPORTED, /* a version, dtype or feature this build does not handle */
    PGCL_ERR_MISMATCH,    /* a recomputed value differs from the recorded one (goldens, digests) */
    PGCL_ERR_DB,          /* SQLite reported an error */
    PGCL_ERR_BUSY,        /* a bounded resource is exhausted; retry later */
    PGCL_ERR_CLOSED,      /* the component is shutting down */
    PGCL_ERR_NOT_FOUND,   /* the named thing (model, version, key) does not exist */
    PGCL_ERR_DUPLICATE,   /* already done by another party (an Idempotency-Key another replica committed
                           * first): nothing recorded, the stored outcome answers */
} pgcl_status;

/* Stable lowercase name of a status, e.g. "format". Never NULL. */
const char *pgcl_status_str(pgcl_status st);

/* Writes printf-style text into a caller-provided error buffer of `cap` bytes (may be NULL/0). */
void pgcl_errorf(char *err, int cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* An invariant whose violation would give a wrong answer or a wrong record without any error:
 * checked in every build (NDEBUG does not remove it); on failure the expression and its place are
 * written to stderr and the process aborts, so a supervisor restarts it on a sound state. */
#define PGCL_ASSERT(expr) ((expr) ? (void)0 : pgcl_assert_failed(#expr, __FILE__, __LINE__))
_Noreturn void pgcl_assert_failed(const char *expr, const char *file, int line);

#endif
