/* The audit store interface, implementer's side (in the manner of backend_impl.h).
 *
 * A store is a struct whose first member is `pgcl_audit base`, with base.ops pointing at its
 * operations table. audit.c dispatches every public pgcl_audit_* call on a handle through that
 * table and does the checks common to every store (an empty append is a no-op, never a
 * transaction). Each operation keeps the contract of its public counterpart in audit.h.
 *
 * Stores: audit_sqlite.c (the embedded default, one file, one writer with group commit) and
 * core/audit/pg/ (PostgreSQL, for a fleet of replicas on one database; pg/audit_pg.h). */
#ifndef PGCL_AUDIT_STORE_IMPL_H
#define PGCL_AUDIT_STORE_IMPL_H

#include "audit.h"
#include "audit_log.h"
#include "audit_reads.h"
#include "review.h"

typedef struct pgcl_audit_store_ops {
    const char *name; /* "sqlite" */
    void (*close)(pgcl_audit *store);
    /* n >= 1; idem may be NULL. */
    pgcl_status (*append)(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                          char *err, int cap);
    /* n >= 1; idem may be NULL; done is never NULL. */
    void (*append_async)(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                         pgcl_audit_done_fn done, void *done_ctx);
    /* n >= 1. */
    pgcl_status (*append_shadow)(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap);
    pgcl_status (*record_event)(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap);
    pgcl_status (*run)(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap);
    void (*set_max_pending_rows)(pgcl_audit *store, int max_pending_rows);
    int (*pending_rows)(pgcl_audit *store);
    bool (*healthy)(pgcl_audit *store);
    /* pgcl_audit_writer_stall_us's two instants (pgcl_monotonic_us's clock, 0 = none), read together
     * under the writer's queue lock: when the writer began its current piece of work, and when work
     * it has not taken yet was queued. */
    void (*writer_activity)(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us);
    int (*schema_version)(pgcl_audit *store);
    /* the read side (audit_reads.h), each with its public counterpart's contract */
    pgcl_status (*read_decision)(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena,
                                 pgcl_decision_record *out, char *err, int cap);
    pgcl_status (*read_decisions)(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                  pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap);
    pgcl_status (*read_contests)(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days,
                                 int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err, int cap);
    pgcl_status (*read_stats)(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena,
                              pgcl_audit_stats *out, char *err, int cap);
    pgcl_status (*open_export)(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt,
                               pgcl_export **out, char *err, int cap);
    pgcl_status (*read_stored_decision)(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                        char *err, int cap);
    pgcl_status (*read_idempotency_key)(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                        bool *found, pgcl_idem_record *out, char *err, int cap);
    pgcl_status (*read_proof)(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err, int cap);
    pgcl_status (*read_consistency)(pgcl_audit *store, const char *writer_id, int64_t first, int64_t second,
                                    pgcl_log_consistency *out, char *err, int cap);
    pgcl_status (*read_archive_where)(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out, char *err,
                                      int cap);
    pgcl_status (*verify_chain)(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap);
    /* out zeroed by the caller */
    pgcl_status (*create_checkpoint)(pgcl_audit *store, const char *key_path, const char *out_file, const char *out_dir,
                                     pgcl_store_checkpoint *out, char *err, int cap);
    pgcl_status (*create_key)(pgcl_audit *store, pgcl_role role, const char *name, const char *actor, char key_out[128],
                              char key_id_out[32], char *err, int cap);
    pgcl_status (*revoke_key)(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap);
    pgcl_status (*import_key)(pgcl_audit *store, pgcl_role role, const char *name, const char *actor, const char *key,
                              char key_id_out[32], bool *created, char *err, int cap);
    pgcl_status (*open_keyring)(pgcl_audit *store, pgcl_keyring **out, char *err, int cap);
    pgcl_status (*read_keys)(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap);
    pgcl_status (*read_activations)(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                    int cap);
    pgcl_status (*read_shadow_report)(pgcl_audit *store, const char *model, const char *shadow_version,
                                      pgcl_shadow_report *out, char *err, int cap);
    /* the reviewers' writes (review.h), each one transaction of the writer, its rules checked inside it */
    pgcl_status (*file_contest)(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap);
    pgcl_status (*resolve_contest)(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap);
    /* input retention (retention.h): one step, dropping at most max_rows stored inputs of decisions
     * created before older_than (RFC 3339) in one write transaction; *dropped how many, *more whether
     * some are left. A step with nothing to drop writes nothing. */
    pgcl_status (*drop_inputs)(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped, bool *more,
                               char *err, int cap);
    /* Optional (NULL: the store cannot tell cheaply): the bytes the database takes on disk now. */
    bool (*size_bytes)(pgcl_audit *store, int64_t *bytes);
    /* the transparency logs (audit_log.h, issue 28), in that header's order, each with its public
     * counterpart's contract. NULL: the store has none yet (audit.c answers PGCL_ERR_UNSUPPORTED,
     * and "" for writer_id). */
    pgcl_status (*logs)(pgcl_audit *store, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap);
    const char *(*writer_id)(pgcl_audit *store);
    pgcl_status (*log_read)(pgcl_audit *store, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx,
                            char *err, int cap);
    pgcl_status (*log_checkpoint)(pgcl_audit *store, const char *writer_id, char **note, uint64_t *size, char *err,
                                  int cap);
    pgcl_status (*log_put_checkpoint)(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap);
    pgcl_status (*log_add_cosignatures)(pgcl_audit *store, uint64_t size, const char *signature_lines, char *err,
                                        int cap);
    pgcl_status (*log_leaf_of)(pgcl_audit *store, const char *kind, const char *id,
                               char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err, int cap);
} pgcl_audit_store_ops;

/* What every store begins with. */
struct pgcl_audit {
    const pgcl_audit_store_ops *ops;
    _Atomic int64_t last_commit_unix_us; /* pgcl_audit_note_commit's; 0 = none since open */
    const char *read_only_shown; /* a store opened read-only: how its refusals name it (NULL: writable) */
};

/* ---- a store opened read-only (audit_read_only.c): the writes, each refused with
 * PGCL_ERR_UNSUPPORTED naming store->read_only_shown, and an idle writer's state. A store's
 * read-only table takes them all with PGCL_AUDIT_READ_ONLY_OPS and adds close, its reads and
 * writer_id. ---- */
pgcl_status pgcl_audit_ro_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                 char *err, int cap);
void pgcl_audit_ro_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                pgcl_audit_done_fn done, void *done_ctx);
pgcl_status pgcl_audit_ro_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap);
pgcl_status pgcl_audit_ro_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap);
pgcl_status pgcl_audit_ro_run(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap);
pgcl_status pgcl_audit_ro_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                            const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap);
pgcl_status pgcl_audit_ro_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                     char key_out[128], char key_id_out[32], char *err, int cap);
pgcl_status pgcl_audit_ro_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap);
pgcl_status pgcl_audit_ro_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                     const char *key, char key_id_out[32], bool *created, char *err, int cap);
pgcl_status pgcl_audit_ro_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap);
pgcl_status pgcl_audit_ro_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap);
pgcl_status pgcl_audit_ro_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped,
                                      bool *more, char *err, int cap);
pgcl_status pgcl_audit_ro_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap);
pgcl_status pgcl_audit_ro_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *lines, char *err,
                                               int cap);
void pgcl_audit_ro_set_max_pending_rows(pgcl_audit *store, int max_pending_rows);
int pgcl_audit_ro_pending_rows(pgcl_audit *store);
bool pgcl_audit_ro_healthy(pgcl_audit *store);
void pgcl_audit_ro_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us);
const char *pgcl_audit_ro_writer_id(pgcl_audit *store);

#define PGCL_AUDIT_READ_ONLY_OPS                                                                                       \
    .append = pgcl_audit_ro_append, .append_async = pgcl_audit_ro_append_async,                                       \
    .append_shadow = pgcl_audit_ro_append_shadow, .record_event = pgcl_audit_ro_record_event,                         \
    .run = pgcl_audit_ro_run, .set_max_pending_rows = pgcl_audit_ro_set_max_pending_rows,                              \
    .pending_rows = pgcl_audit_ro_pending_rows, .healthy = pgcl_audit_ro_healthy,                                      \
    .writer_activity = pgcl_audit_ro_writer_activity, .create_checkpoint = pgcl_audit_ro_create_checkpoint,            \
    .create_key = pgcl_audit_ro_create_key, .revoke_key = pgcl_audit_ro_revoke_key,                                    \
    .import_key = pgcl_audit_ro_import_key, .file_contest = pgcl_audit_ro_file_contest,                                \
    .resolve_contest = pgcl_audit_ro_resolve_contest, .drop_inputs = pgcl_audit_ro_drop_inputs,                        \
    .log_put_checkpoint = pgcl_audit_ro_log_put_checkpoint, .log_add_cosignatures = pgcl_audit_ro_log_add_cosignatures

/* A store's writer calls this right after each transaction of rows, events or jobs committed (not
 * after its own probe writes): pgcl_audit_last_commit_unix_us reads it. */
void pgcl_audit_note_commit(pgcl_audit *store);

/* The SQLite store (audit_sqlite.c: open, the writer; audit_reads.c: the read side, on the
 * reader pool of its database file, core/review/reader_pool.c). */
extern const pgcl_audit_store_ops pgcl_audit_sqlite_ops;
pgcl_status pgcl_audit_sqlite_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);
/* What a SQLite store's reads open: the database file of the writing store; the read-only
 * store's "file:" URI (audit_sqlite_read_only.c), which every reader open accepts (db.h). */
const char *pgcl_audit_sqlite_path(pgcl_audit *store);
/* The SQLite store opened read-only (audit_sqlite_read_only.c): no migration, no writer, the file
 * never written; pgcl_audit_sqlite_open hands it opts when opts->read_only. */
extern const pgcl_audit_store_ops pgcl_audit_sqlite_read_only_ops;
pgcl_status pgcl_audit_sqlite_read_only_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);
const char *pgcl_audit_sqlite_read_only_uri(pgcl_audit *store);
pgcl_status pgcl_sqlite_read_decision(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena,
                                      pgcl_decision_record *out, char *err, int cap);
pgcl_status pgcl_sqlite_read_decisions(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq,
                                       int limit, pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap);
pgcl_status pgcl_sqlite_read_contests(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days,
                                      int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err,
                                      int cap);
pgcl_status pgcl_sqlite_read_stats(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena,
                                   pgcl_audit_stats *out, char *err, int cap);
pgcl_status pgcl_sqlite_open_export(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt,
                                    pgcl_export **out, char *err, int cap);
pgcl_status pgcl_sqlite_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                             char *err, int cap);
pgcl_status pgcl_sqlite_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                             bool *found, pgcl_idem_record *out, char *err, int cap);
pgcl_status pgcl_sqlite_read_proof(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err,
                                   int cap);
pgcl_status pgcl_sqlite_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out,
                                           char *err, int cap);
pgcl_status pgcl_sqlite_read_consistency(pgcl_audit *store, const char *writer_id, int64_t first, int64_t second,
                                         pgcl_log_consistency *out, char *err, int cap);
pgcl_status pgcl_sqlite_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                          const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap);
pgcl_status pgcl_sqlite_verify_chain(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap);
pgcl_status pgcl_sqlite_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                   char key_out[128], char key_id_out[32], char *err, int cap);
pgcl_status pgcl_sqlite_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap);
pgcl_status pgcl_sqlite_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                   const char *key, char key_id_out[32], bool *created, char *err, int cap);
pgcl_status pgcl_sqlite_open_keyring(pgcl_audit *store, pgcl_keyring **out, char *err, int cap);
pgcl_status pgcl_sqlite_read_keys(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap);
pgcl_status pgcl_sqlite_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                         int cap);
pgcl_status pgcl_sqlite_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap);
pgcl_status pgcl_sqlite_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap);
pgcl_status pgcl_sqlite_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped,
                                    bool *more, char *err, int cap);
/* The SQLite store's logs (sqlite_log_store.c; its one writer's id is the store's, audit_sqlite.c). */
pgcl_status pgcl_sqlite_logs(pgcl_audit *store, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap);
pgcl_status pgcl_sqlite_log_read(pgcl_audit *store, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx,
                                 char *err, int cap);
pgcl_status pgcl_sqlite_log_checkpoint(pgcl_audit *store, const char *writer_id, char **note, uint64_t *size,
                                       char *err, int cap);
pgcl_status pgcl_sqlite_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap);
pgcl_status pgcl_sqlite_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *signature_lines,
                                             char *err, int cap);
pgcl_status pgcl_sqlite_log_leaf_of(pgcl_audit *store, const char *kind, const char *id,
                                    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err,
                                    int cap);
pgcl_status pgcl_sqlite_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version,
                                           pgcl_shadow_report *out, char *err, int cap);

#endif
