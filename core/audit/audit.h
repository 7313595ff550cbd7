/* The audit store interface: where every decision, event and shadow output is recorded, in the
 * chain's order, before the answer leaves. A store is an opaque handle (pgcl_audit) behind an
 * operations table (audit_store_impl.h), created by pgcl_audit_open and destroyed by
 * pgcl_audit_close. Two stores implement it, each chosen by the driver that claims the --db
 * (store_registry.h): SQLite (audit_sqlite.c), the embedded default, a database in WAL mode that
 * receives one row per scored item; and PostgreSQL (pg/), one database for a fleet of replicas.
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
typedef struct pgcl_idem_entry pgcl_idem_entry; /* idempotency.h */

typedef struct pgcl_audit_options {
    const char *path;       /* a SQLite file, or a libpq URI (postgresql://, postgres://): the PostgreSQL store */
    const char *writer_id;  /* PostgreSQL: the name of this process's chain (NULL: the host name) */
    int writer_lock_wait_ms; /* PostgreSQL: how long to wait for another process to release writer_id (0: fail
                              * at once when it is in use) */
    bool synchronous_full;  /* FULL (fsync on every commit) or NORMAL (WAL: durable on checkpoint) */
    int busy_timeout_ms;
    int max_pending_rows;   /* append() fails with PGCL_ERR_BUSY beyond this backlog */
    int chain_encoding;     /* of new chain entries: 1 or 2 (chain.h); 0 = PGCL_CHAIN_ENCODING_DEFAULT (2) */
    bool read_only;         /* For read-only commands (keys list, audit verify): no writer, no migrations;
                             * every write answers PGCL_ERR_UNSUPPORTED, the reads work. PostgreSQL: no
                             * writers row, no chain, no writer lock (the schema must be this build's).
                             * SQLite: the file must exist; it, its -wal and -shm are never written and no
                             * file is created beside them (db.h, pgcl_db_untouched_uri); an older schema
                             * is read as it is (a file without the log's tables has no logs). */
} pgcl_audit_options;

/* One decision row; every pointer is borrowed for the duration of pgcl_audit_append(). created_at
 * is set by the writer (the commit's time, never earlier than the previous commit's). */
typedef struct pgcl_decision_row {
    const char *decision_id, *request_id, *item_id;
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
    const void *input;       /* the stored input (NULL: not stored) */
    int input_bytes;
    const char *input_dtype; /* "f16" or "f32" */
    const unsigned char *input_digest; /* optional: SHA-256 of input's input_bytes bytes (32), computed by
                                        * the caller off the writer's thread; NULL: the writer computes it */
    /* Migration 0011, each NULL when absent (chained when any is set: chain_encoding.h): */
    const char *trace_id;          /* the request's W3C trace id, 32 lowercase hex */
    const char *content_date;      /* "YYYY-MM-DD", the caller's (a DSA statement's content_date) */
    const char *territorial_scope; /* a JSON array of ISO 3166-1 alpha-2 EEA codes, e.g. ["DE","FR"] */
    const char *content_language;  /* ISO 639-1, uppercase, e.g. "EN" */
    /* The log record's (issue 28, log/record_rows.h), each optional: unset, the writer reads them
     * from probabilities_json (its keys in order, its values) and the label count. */
    int record_task;                  /* 1 + pgcl_record_task (1 binary, 2 multiclass, 3 ordinal); 0: derived */
    const char *const *labels;        /* (n_labels) the model's labels in order; NULL: derived */
    const float *probabilities;       /* (n_labels); NULL: derived */
    int n_labels;
} pgcl_decision_row;

/* One administrative event (admin_events); pointers borrowed for the call. details is a JSON object. */
typedef struct pgcl_admin_event {
    const char *actor, *action, *target, *details_json;
} pgcl_admin_event;

/* One shadow output beside the primary decision it shadows (shadow_decisions); created_at is the
 * writer's. */
typedef struct pgcl_shadow_row {
    const char *decision_id, *model_name, *primary_version, *shadow_version, *shadow_sha256;
    const char *primary_label, *shadow_label, *primary_decision, *shadow_decision;
    double primary_score, shadow_score;
    const char *probabilities_json;
} pgcl_shadow_row;

/* Opens or creates the database, applies pending migrations in one transaction, and starts the
 * writer thread, through the store driver that claims opts->path (store_registry.h). On failure returns an error with the reason in err and *out NULL. */
pgcl_status pgcl_audit_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);

/* Stops accepting rows, commits what is queued, stops the writer and closes. Accepts NULL. */
void pgcl_audit_close(pgcl_audit *a);

/* Commits n rows atomically (all or none) and returns once they are durable. Thread-safe.
 * PGCL_ERR_BUSY: backlog full; PGCL_ERR_DB: the write failed (err says why); PGCL_ERR_CLOSED:
 * shutting down. On any error no row of this call is in the database. */
pgcl_status pgcl_audit_append(pgcl_audit *a, const pgcl_decision_row *rows, int n, char *err, int cap);

/* The store's name ("sqlite"), for logs and /metrics. */
const char *pgcl_audit_store_name(pgcl_audit *a);

/* ---- arbitrary work in the writer's transaction ----
 * Jobs are the SQLite store's extension point: they see the SQLite connection of the open
 * transaction (pgcl_audit_txn_db). Other stores answer pgcl_audit_run with PGCL_ERR_UNSUPPORTED;
 * work every store must do is an operation of the store interface (audit_store_impl.h). */

/* The open transaction a job runs in. */
typedef struct pgcl_audit_txn pgcl_audit_txn;
/* Its connection (use only inside the job). */
struct sqlite3 *pgcl_audit_txn_db(pgcl_audit_txn *t);
/* The transaction's timestamp (RFC 3339, monotonic across transactions). */
const char *pgcl_audit_txn_now(pgcl_audit_txn *t);
/* Appends the chain entry of row row_seq of table kind (see chain.h). */
pgcl_status pgcl_audit_txn_chain(pgcl_audit_txn *t, const char *kind, int64_t row_seq, char *err, int cap);
/* Adds record r (log/record.h) as the next leaf of the writer's transparency log in this
 * transaction (issue 28; sqlite_log.h): call it before inserting the event's row, and store
 * *leaf_index in the row's leaf_index (-1: the store keeps no log yet; store NULL). A job's savepoint
 * takes the leaf back with its rows. PGCL_ERR_INVALID (err names the field) when r breaks a rule. */
struct pgcl_record;
pgcl_status pgcl_audit_txn_log(pgcl_audit_txn *t, const struct pgcl_record *r, int64_t *leaf_index, char *err,
                               int cap);

/* A job: runs inside a savepoint of the writer's transaction; anything but PGCL_OK undoes exactly
 * its own writes. Must not block. */
typedef pgcl_status (*pgcl_audit_fn)(pgcl_audit_txn *t, void *ctx, char *err, int cap);

/* Runs fn in the writer's next transaction and returns once that transaction committed, with fn's
 * status (or PGCL_ERR_DB if the commit failed). Thread-safe. */
pgcl_status pgcl_audit_run(pgcl_audit *a, pgcl_audit_fn fn, void *ctx, char *err, int cap);

/* pgcl_audit_append(), and the idempotency key that answers for the rows (idempotency.h; may be
 * NULL) stored in the same all-or-nothing unit. PGCL_ERR_DUPLICATE (the PostgreSQL store only):
 * another process committed a live key of the same (scope, key) first; nothing of this call is
 * recorded, and the stored key's answer is the request's answer (server/routes/score_idempotency.c). */
pgcl_status pgcl_audit_append_with(pgcl_audit *a, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                   char *err, int cap);

/* What pgcl_audit_append_async calls once its rows are committed durably (st PGCL_OK, err "") or
 * refused / failed (st as pgcl_audit_append would return it, err the reason; no row recorded). */
typedef void (*pgcl_audit_done_fn)(void *ctx, pgcl_status st, const char *err);

/* The asynchronous form of pgcl_audit_append_with, for callers that must not hold a thread while
 * the group commit runs: queues the rows and returns at once. done(ctx, ...) is called exactly once:
 * on the writer thread right after the commit that made the rows durable (or failed), or before
 * this call returns when the rows are refused at once (PGCL_ERR_BUSY, PGCL_ERR_CLOSED,
 * PGCL_ERR_NOMEM). The same all-or-nothing guarantee as pgcl_audit_append_with. rows (and what they
 * point to) and idem stay borrowed until done is called. done runs on the writer thread, which
 * every commit waits for: it must be cheap and never block (mark done, wake someone). n <= 0 calls
 * done(ctx, PGCL_OK, "") at once. */
void pgcl_audit_append_async(pgcl_audit *a, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                             pgcl_audit_done_fn done, void *done_ctx);

/* Records one administrative event durably (same writer, same guarantees as append). */
pgcl_status pgcl_audit_record_event(pgcl_audit *a, const pgcl_admin_event *ev, char *err, int cap);

/* Commits n shadow rows. Never blocks on a full backlog: returns PGCL_ERR_BUSY instead. */
pgcl_status pgcl_audit_append_shadow(pgcl_audit *a, const pgcl_shadow_row *rows, int n, char *err, int cap);

/* Changes the backlog limit (SIGHUP reload). */
void pgcl_audit_set_max_pending_rows(pgcl_audit *a, int max_pending_rows);

/* Rows waiting for the writer (a gauge for /metrics). */
int pgcl_audit_pending_rows(pgcl_audit *a);

/* The read side of the store (reviewers' reads, idempotency keys, API keys, activations, the
 * shadow report) is declared in audit_reads.h. */

/* False after a failed commit until the next successful one. */
bool pgcl_audit_healthy(pgcl_audit *a);

/* Wall-clock time (unix microseconds) of the last transaction of rows, events or jobs this
 * process's writer committed; 0 when none since open. For /metrics. */
int64_t pgcl_audit_last_commit_unix_us(pgcl_audit *a);

/* The bytes the database takes on disk now (SQLite: the database file and its -wal); false when
 * the store cannot tell cheaply (PostgreSQL). For /metrics. */
bool pgcl_audit_size_bytes(pgcl_audit *a, int64_t *bytes);

/* The writer's liveness, for a watchdog (server/systemd_notify.c): how long, at time now_us on
 * pgcl_monotonic_us's clock, the writer has owed progress. 0 while it waits with nothing queued;
 * otherwise the time since it began its current piece of work (a group commit and its callbacks, a
 * probe write, a reconnection) or, when work is queued that it has not taken yet, since that work
 * was queued. A writer whose writes fail quickly (a full disk, a lock wait that ends in
 * SQLITE_BUSY) keeps this small; one stuck inside one write (a hung fsync, a server that never
 * answers) makes it grow. It takes the writer's queue lock for a moment, so a writer that holds
 * that lock forever blocks this call too. Thread-safe. A store without a writer answers 0. */
int64_t pgcl_audit_writer_stall_us(pgcl_audit *a, int64_t now_us);

/* Highest applied migration version. */
int pgcl_audit_schema_version(pgcl_audit *a);

#endif
