/* Input retention (issue 16; docs/audit.md, "Retention"): a decision's stored input is kept for
 * --input-retention-days, then dropped. The decision's record, its chain leaf and every proof
 * stay: an encoding-2 leaf commits to the input's SHA-256 (decisions.input_digest), not to its
 * bytes, so `verify` and the proofs pass after the drop; a re-score answers that the input was
 * dropped.
 *
 * What is never dropped: inputs stored inline (before migration 0008: decisions rows are
 * append-only), inputs of decisions chained by an encoding-1 entry (its payload hashes the bytes
 * themselves), and inputs of decisions with an open contest (a reviewer may need to re-score
 * them; they are dropped once the contest is resolved).
 *
 * pgcl_sqlite_drop_inputs_fn is one bounded step, run on the store's writer (pgcl_audit_run);
 * pgcl_retention is the daemon's thread that runs it periodically. */
#ifndef PGCL_RETENTION_H
#define PGCL_RETENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"

/* The SQLite store's step (run on its writer, inside a write transaction, through
 * pgcl_audit_run): drops the stored inputs of at most max_rows decisions created before
 * older_than (RFC 3339 UTC), continuing where the last step stopped. *dropped: how many inputs
 * were deleted; *more: whether decisions older than the horizon remain to be looked at. */
typedef struct pgcl_drop_inputs {
    const char *older_than;
    int max_rows;
    int64_t dropped;
    bool more;
} pgcl_drop_inputs;
pgcl_status pgcl_sqlite_drop_inputs_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap);

/* ---- for the audit stores: the step's walk, over a store's statements ----
 * Each store writes these statements in its own SQL; their parameters are lo, hi and text, in
 * that order, as many as the statement takes ("(lo, hi]": lo < seq <= hi). */
typedef enum pgcl_retention_sql {
    PGCL_RETENTION_CURSOR,        /* the cursor, input_retention.through_seq (no parameter) */
    PGCL_RETENTION_LAST_SEQ,      /* the last decision's seq (no parameter) */
    PGCL_RETENTION_FIRST_RECENT,  /* the first decision in (lo, hi] created at or after text */
    PGCL_RETENTION_DROP_RANGE,    /* deletes the inputs in (lo, hi] but those that stay */
    PGCL_RETENTION_DROP_RESOLVED, /* deletes the inputs at or before hi kept for a contest resolved since */
    PGCL_RETENTION_ADVANCE,       /* the cursor := lo */
} pgcl_retention_sql;

/* A store's statements inside its write transaction. */
typedef struct pgcl_retention_db {
    void *ctx;
    /* The one integer statement `which` (CURSOR, LAST_SEQ or FIRST_RECENT) answers; *found false
     * when no row or NULL. */
    pgcl_status (*read_int)(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, const char *text,
                             int64_t *out, bool *found, char *err, int cap);
    /* Runs statement `which` (DROP_RANGE, DROP_RESOLVED or ADVANCE) for its effect; adds the rows
     * it changed to *changed (may be NULL). */
    pgcl_status (*run)(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, int64_t *changed, char *err,
                       int cap);
} pgcl_retention_db;

/* One step of the walk (what pgcl_sqlite_drop_inputs_fn does) on db's statements. */
pgcl_status pgcl_retention_step(const pgcl_retention_db *db, pgcl_drop_inputs *job, char *err, int cap);

typedef struct pgcl_retention pgcl_retention;

/* Starts the thread that drops the inputs older than `days` (> 0 or 0: drop as soon as written)
 * every interval (derived from days: a tenth of it, between 1 s and 5 min), in steps of a few
 * thousand rows so that scoring commits interleave. on_dropped (may be NULL) is told each step's
 * count (for the metrics). NULL with err set on failure. */
pgcl_retention *pgcl_retention_create(pgcl_audit *store, double days, void (*on_dropped)(int64_t n, void *ctx),
                                      void *ctx, char *err, int cap);
/* Stops and joins the thread (a step in progress finishes). Accepts NULL. */
void pgcl_retention_destroy(pgcl_retention *r);

/* The retention period of `days` in microseconds, rounded to the nearest (created_at's resolution:
 * a fraction of a day is not cut to whole seconds): a pass's horizon is now minus this. Pure; for
 * tests of the arithmetic (tests/core/test_chain_v2.c). */
int64_t pgcl_retention_period_us(double days);

/* One full pass now (every step until nothing older than the horizon is left); the number of
 * inputs dropped, or -1 on error (err set). For tests. */
int64_t pgcl_retention_run_once(pgcl_audit *store, double days, char *err, int cap);

/* The same pass with the horizon given instead of derived from the clock: older_than in the audit
 * columns' format (RFC 3339 UTC, 6 fraction digits). For tests that place the horizon between
 * decisions they wrote (tests/core/retention_pass.c), on either store. */
int64_t pgcl_retention_run_before(pgcl_audit *store, const char *older_than, char *err, int cap);

#endif
