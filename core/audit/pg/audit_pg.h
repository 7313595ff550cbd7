/* The PostgreSQL audit store (issue 17; docs/scaling.md): a fleet of pgcld replicas on one
 * PostgreSQL database, each with its own writer thread and its own chain (writer_id), every read
 * answered for the whole fleet. A second implementation of the store interface
 * (audit_store_impl.h); nothing outside core/audit knows which store is in use.
 *
 * Files:
 *   audit_pg.c         open (migrations under an advisory lock, the writer id's lock), close, the
 *                      operations table
 *   audit_pg_writer.c  the writer thread: group commit, one transaction per group in pipeline mode,
 *                      fleet order through fleet_counters, the writer's chain (encoding 2) and log
 *                      tree; decisions, shadows, admin events, idempotency keys; jobs (pgcl_pg_run)
 *   audit_pg_reads.c   the reviewers' reads; with audit_pg_read_*.c (audit_pg_read_internal.h) the
 *                      figures, the export, idempotency lookups, activations, the shadow report
 *   audit_pg_chain.c   proofs, consistency proofs, verify over every writer's chain, checkpoints
 *   audit_pg_admin.c   contests and resolutions, API keys and the keyring, input retention
 *   pg_log.c           each writer's transparency log over libpq (pg_log.h), written by the writer
 *   audit_pg_log.c     the store's logs for the routes, checkpoints and proofs (audit_log.h)
 * Schema: migrations/pg/. Connections: pg_db.h. */
#ifndef PGCL_AUDIT_PG_H
#define PGCL_AUDIT_PG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "audit_store_impl.h"
#include "chain_encoding.h"
#include "pg_db.h"

#define PGCL_PG_WRITER_ID_MAX 128
#define PGCL_PG_READERS 8          /* read connections per process */
#define PGCL_PG_READ_WAIT_MS 5000  /* how long a read waits for a free connection */

/* The advisory lock keys (pg_advisory_lock's two-int form: class, object). */
#define PGCL_PG_LOCK_CLASS 0x70676364 /* "pgcd" */
#define PGCL_PG_LOCK_MIGRATIONS 1     /* held while one process applies migrations */
/* a writer id's lock: (PGCL_PG_LOCK_CLASS, hashtext(writer_id)), held by its writer's session */

typedef struct pgcl_pg_writer pgcl_pg_writer; /* audit_pg_writer.c */

typedef struct pgcl_audit_pg {
    pgcl_audit base;                      /* first: the interface's view */
    char *uri;                            /* as given: may hold a password, never log it */
    char redacted[512];                   /* the URI for logs and errors (pgcl_pg_redact) */
    char writer_id[PGCL_PG_WRITER_ID_MAX + 1];
    pgcl_audit_options opts;              /* as opened (opts.path and opts.writer_id point at uri, writer_id) */
    int schema_version;
    pgcl_pg_pool *readers;                /* the read side's connections */
    pgcl_pg_writer *writer;               /* the writer thread and its connection */
} pgcl_audit_pg;

/* The PostgreSQL store behind a handle; always-on check of the operations table. */
pgcl_audit_pg *pgcl_audit_pg_of(pgcl_audit *store);

/* Opens the store at opts->path (a URI): connects, applies pending migrations under the
 * migrations lock, starts the writer (which takes writer_id's lock). */
pgcl_status pgcl_audit_pg_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);

/* Applies the pending migrations of migrations/pg on conn under the migrations lock (blocking
 * while another process holds it), each in its own transaction, recorded in schema_migrations with
 * its SHA-256; a recorded migration whose SHA-256 differs is an error. *version: the highest
 * applied. Also `pgcld migrate`. */
pgcl_status pgcl_pg_migrate(PGconn *conn, int *version, char *err, int cap);

/* ---- audit_pg_writer.c ---- */

/* Starts the writer: its own connection, writer_id's advisory lock (waiting up to
 * opts.writer_lock_wait_ms; PGCL_ERR_BUSY with err naming the id when another process holds it),
 * the writers row, the chain head (genesis entry when the chain is new), the thread. */
pgcl_status pgcl_pg_writer_start(pgcl_audit_pg *s, char *err, int cap);
/* Commits what is queued, stops the thread, closes its connection. Accepts s->writer NULL. */
void pgcl_pg_writer_stop(pgcl_audit_pg *s);

pgcl_status pgcl_pg_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                           char *err, int cap);
void pgcl_pg_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                          pgcl_audit_done_fn done, void *done_ctx);
pgcl_status pgcl_pg_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap);
pgcl_status pgcl_pg_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap);
void pgcl_pg_set_max_pending_rows(pgcl_audit *store, int max_pending_rows);
int pgcl_pg_pending_rows(pgcl_audit *store);
bool pgcl_pg_healthy(pgcl_audit *store);
void pgcl_pg_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us);

/* Jobs: work of other files in the writer's transaction (contests, resolutions, keys, retention).
 * A job runs on the writer's connection inside the group's transaction, after the fleet order lock
 * (fleet_counters' row) is held — so a rule it checks holds fleet-wide until COMMIT — inside a
 * savepoint: anything but PGCL_OK undoes exactly its own writes and leaves. It must not block on
 * anything but its own statements. pgcl_pg_run returns once the transaction committed, with the
 * job's status (PGCL_ERR_DB when the commit failed or its outcome is unknown). As in the SQLite
 * store, a job may run twice: when a statement of another request of its group fails, the group
 * is rolled back and runs again with each request alone in a savepoint; so a job writes only
 * through the transaction and into its own context (and takes its seqs from
 * pgcl_pg_txn_next_seq, which a savepoint's rollback takes back with it). */
typedef struct pgcl_pg_txn pgcl_pg_txn;
typedef pgcl_status (*pgcl_pg_job_fn)(pgcl_pg_txn *t, void *ctx, char *err, int cap);
pgcl_status pgcl_pg_run(pgcl_audit_pg *s, pgcl_pg_job_fn fn, void *ctx, char *err, int cap);
/* The connection, inside the open transaction (synchronous statements only). */
PGconn *pgcl_pg_txn_conn(pgcl_pg_txn *t);
/* The transaction's timestamp (RFC 3339 UTC, never earlier than this writer's previous one). */
const char *pgcl_pg_txn_now(pgcl_pg_txn *t);
/* Hands out the next seq of event table `table` ("decisions", "admin_events", "contests",
 * "resolutions", "shadow_decisions") in fleet order. */
pgcl_status pgcl_pg_txn_next_seq(pgcl_pg_txn *t, const char *table, int64_t *seq, char *err, int cap);
/* Chains row row_seq of chain table `table` (chain_encoding.h's index) with its leaf hash
 * (pgcl_chain_leaf_of_values) in this transaction's commit entry. */
pgcl_status pgcl_pg_txn_chain(pgcl_pg_txn *t, int table, int64_t row_seq, pgcl_merkle_hash leaf, char *err, int cap);

/* The writer's id (the log's). */
const char *pgcl_pg_txn_writer_id(pgcl_pg_txn *t);
/* Adds record r as the next leaf of this writer's log in this transaction (pg_log.h; a savepoint's
 * rollback takes it back with the job); *leaf_index its index, for the event row's leaf_index. */
struct pgcl_record;
pgcl_status pgcl_pg_txn_log(pgcl_pg_txn *t, const struct pgcl_record *r, uint64_t *leaf_index, char *err, int cap);

/* In a job (audit_pg_admin.c): appends one admin_events row (created_at the transaction's time, a
 * new event id, details a JSON object's text) and chains it. */
pgcl_status pgcl_pg_txn_add_admin_event(pgcl_pg_txn *t, const char *actor, const char *action, const char *target,
                                        const char *details, char *err, int cap);

/* ---- audit_pg_reads.c, audit_pg_read_stats.c, audit_pg_read_export.c, audit_pg_read_ops.c ---- */
pgcl_status pgcl_pg_read_decision(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena,
                                  pgcl_decision_record *out, char *err, int cap);
pgcl_status pgcl_pg_read_decisions(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap);
pgcl_status pgcl_pg_read_contests(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days,
                                  int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err, int cap);
pgcl_status pgcl_pg_read_stats(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena,
                               pgcl_audit_stats *out, char *err, int cap);
pgcl_status pgcl_pg_open_export(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt,
                                pgcl_export **out, char *err, int cap);
pgcl_status pgcl_pg_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                         char *err, int cap);
pgcl_status pgcl_pg_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                         bool *found, pgcl_idem_record *out, char *err, int cap);
pgcl_status pgcl_pg_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                     int cap);
pgcl_status pgcl_pg_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version,
                                       pgcl_shadow_report *out, char *err, int cap);
pgcl_status pgcl_pg_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out, char *err,
                                       int cap);

/* ---- audit_pg_chain.c ----
 * The store's operations run on a connection of its read pool, each in one REPEATABLE READ
 * snapshot. The proof names its writer (pgcl_chain_proof.writer_id) and carries the newest fleet
 * checkpoint that covers its entry; consistency proofs are within one writer's log (writer_id NULL:
 * the only writer's, PGCL_ERR_INVALID when there are several). Checkpoints are fleet checkpoints
 * (fleet_checkpoint.h) over every writer's head, recorded in audit_checkpoints (statement = the
 * signed bytes). */
/* A live connection of the store's read pool (a pooled one the server closed is replaced), and its
 * release. */
pgcl_status pgcl_pg_reader_acquire(pgcl_audit *store, PGconn **conn, char *err, int cap);
void pgcl_pg_reader_release(pgcl_audit *store, PGconn *conn);
pgcl_status pgcl_pg_read_proof(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err, int cap);
pgcl_status pgcl_pg_read_consistency(pgcl_audit *store, const char *writer_id, int64_t first, int64_t second,
                                     pgcl_log_consistency *out, char *err, int cap);
pgcl_status pgcl_pg_verify_chain(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap);
pgcl_status pgcl_pg_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                      const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap);
/* The same on a connection of the caller's with no transaction open, for `pgcld audit` (no store,
 * no writer lock). Verify: every writer's chain (entries 1..N, links, hashes, genesis payloads,
 * commit roots from their leaves, each leaf against its row through the runs, the log tree nodes),
 * every row of the four chained tables covered by exactly one run, and each fleet checkpoint file
 * (read and checked as pgcl_fleet_checkpoint_read, by public_key_hex unless NULL: an unusable file
 * is an error) against the chains: each head it signs must be in its writer's chain with that hash
 * and log root. Report conventions: chain.h (pgcl_chain_report: writers, bad_writer_id); findings
 * are ordered by (writer id, entry), the first is reported; a row no run covers is reported at the
 * writer of the nearest run before it (or after it), at that chain's end + 1. Release the report. */
pgcl_status pgcl_pg_chain_verify(PGconn *conn, const char *const *checkpoint_files, int n_checkpoints,
                                 const char *public_key_hex, pgcl_chain_report *report, char *err, int cap);
/* Signs every writer's head (and log root) in one snapshot, writes the file (at out_file, or into
 * out_dir), records it in audit_checkpoints. PGCL_ERR_NOT_FOUND: no chain yet. Release out. */
pgcl_status pgcl_pg_checkpoint_create(PGconn *conn, const char *key_path, const char *out_file, const char *out_dir,
                                      pgcl_fleet_checkpoint *out, char *err, int cap);
/* The proof and the consistency proof of pgcl_pg_read_proof / pgcl_pg_read_consistency, on conn.
 * A decision no run covers, or whose entry or log nodes are malformed or missing, has no proof:
 * PGCL_ERR_UNSUPPORTED (409 proof_unavailable; the statement of reasons carries proof null), with
 * err saying why and to run `pgcld audit verify`. */
pgcl_status pgcl_pg_chain_prove(PGconn *conn, const char *decision_id, pgcl_chain_proof *out, char *err, int cap);
pgcl_status pgcl_pg_chain_consistency(PGconn *conn, const char *writer_id, int64_t first, int64_t second,
                                      pgcl_log_consistency *out, char *err, int cap);

/* ---- audit_pg_log.c: the store's logs (audit_log.h) ----
 * Reads on a connection of the read pool, each in one REPEATABLE READ snapshot; a checkpoint and its
 * cosignatures are plain statements on one (each its own transaction). */
pgcl_status pgcl_pg_logs(pgcl_audit *store, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap);
const char *pgcl_pg_writer_id(pgcl_audit *store);
pgcl_status pgcl_pg_log_read(pgcl_audit *store, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx, char *err,
                             int cap);
pgcl_status pgcl_pg_log_checkpoint(pgcl_audit *store, const char *writer_id, char **note, uint64_t *size, char *err,
                                   int cap);
pgcl_status pgcl_pg_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap);
pgcl_status pgcl_pg_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *signature_lines, char *err,
                                         int cap);
pgcl_status pgcl_pg_log_leaf_of(pgcl_audit *store, const char *kind, const char *id,
                                char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err, int cap);

/* ---- audit_pg_admin.c ---- */
pgcl_status pgcl_pg_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap);
pgcl_status pgcl_pg_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap);
pgcl_status pgcl_pg_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                               char key_out[128], char key_id_out[32], char *err, int cap);
pgcl_status pgcl_pg_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap);
pgcl_status pgcl_pg_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor, const char *key,
                               char key_id_out[32], bool *created, char *err, int cap);
pgcl_status pgcl_pg_open_keyring(pgcl_audit *store, pgcl_keyring **out, char *err, int cap);
pgcl_status pgcl_pg_read_keys(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap);
pgcl_status pgcl_pg_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped, bool *more,
                                char *err, int cap);

#endif
