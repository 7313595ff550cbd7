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

typedef struct pgcl_retention pgcl_retention;

/* Starts the thread that drops the inputs older than `days` (> 0 or 0: drop as soon as written)
 * every interval (derived from days: a tenth of it, between 1 s and 5 min), in steps of a few
 * thousand rows so that scoring commits interleave. on_dropped (may be NULL) is told each step's
 * count (for the metrics). NULL with err set on failure. */
pgcl_retention *pgcl_retention_create(pgcl_audit *store, double days, void (*on_dropped)(int64_t n, void *ctx),
                                      void *ctx, char *err, int cap);
/* Stops and joins the thread (a step in progress finishes). Accepts NULL. */
void pgcl_retention_destroy(pgcl_retention *r);

/* One full pass now (every step until nothing older than the horizon is left); the number of
 * inputs dropped, or -1 on error (err set). For tests and `pgcld audit drop-inputs`. */
int64_t pgcl_retention_run_once(pgcl_audit *store, double days, char *err, int cap);

#endif
