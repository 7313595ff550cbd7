/* The audit store: an SQLite database in WAL mode that receives one row per scored item.
 *
 * pgcl_audit_append() hands rows to a single writer thread and blocks until they are committed:
 * the writer takes every request waiting at that moment into one transaction (group commit), so
 * many concurrent requests share one fsync. With synchronous=FULL (the default) a row is on disk
 * before append returns, and the caller answers the client only then. The schema is created and
 * upgraded at open from the migrations compiled into the binary, each recorded in
 * schema_migrations with its SHA-256. */
#ifndef PGCL_AUDIT_H
#define PGCL_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef struct pgcl_audit pgcl_audit;

typedef struct pgcl_audit_options {
    const char *path;
    bool synchronous_full;  /* FULL (fsync on every commit) or NORMAL (WAL: durable on checkpoint) */
    int busy_timeout_ms;
    int max_pending_rows;   /* append() fails with PGCL_ERR_BUSY beyond this backlog */
} pgcl_audit_options;

/* One decision row; every pointer is borrowed for the duration of pgcl_audit_append(). */
typedef struct pgcl_decision_row {
    const char *decision_id, *created_at, *request_id, *item_id;
    const char *model_name, *model_version, *model_sha256;
    const char *label;
    int label_index;
    const char *probabilities_json;
    bool has_toxicity;
    double toxicity;
    const char *decision;
    const char *policy_json;
    bool has_thresholds;
    double t_review, t_block;
    const float *vector;    /* (d) */
    int d;
    const char *input_sha256;
    int64_t latency_us;
} pgcl_decision_row;

/* Opens or creates the database, applies pending migrations in one transaction, and starts the
 * writer thread. On failure returns an error with the reason in err and *out NULL. */
pgcl_status pgcl_audit_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);

/* Stops accepting rows, commits what is queued, stops the writer and closes. Accepts NULL. */
void pgcl_audit_close(pgcl_audit *a);

/* Commits n rows atomically (all or none) and returns once they are durable. Thread-safe.
 * PGCL_ERR_BUSY: backlog full; PGCL_ERR_DB: the write failed (err says why); PGCL_ERR_CLOSED:
 * shutting down. On any error no row of this call is in the database. */
pgcl_status pgcl_audit_append(pgcl_audit *a, const pgcl_decision_row *rows, int n, char *err, int cap);

/* False after a failed commit until the next successful one. */
bool pgcl_audit_healthy(pgcl_audit *a);

/* Highest applied migration version. */
int pgcl_audit_schema_version(pgcl_audit *a);

#endif
