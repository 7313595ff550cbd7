/* The audit store interface: every public call on a store handle, dispatched to the store's
 * operations (audit_store_impl.h). See audit.h for the contract. */
#include "audit_store_impl.h"


#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* pgcl_audit_open: store_registry.c, which hands opts->path to the driver that claims it. */

void pgcl_audit_close(pgcl_audit *a) {
    if (a) a->ops->close(a);
}

pgcl_status pgcl_audit_append(pgcl_audit *a, const pgcl_decision_row *rows, int n, char *err, int cap) {
    return pgcl_audit_append_with(a, rows, n, NULL, err, cap);
}

pgcl_status pgcl_audit_append_with(pgcl_audit *a, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                   char *err, int cap) {
    if (n <= 0) return PGCL_OK;
    return a->ops->append(a, rows, n, idem, err, cap);
}

void pgcl_audit_append_async(pgcl_audit *a, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                             pgcl_audit_done_fn done, void *done_ctx) {
    PGCL_ASSERT(done != NULL);
    if (n <= 0) {
        done(done_ctx, PGCL_OK, "");
        return;
    }
    a->ops->append_async(a, rows, n, idem, done, done_ctx);
}

pgcl_status pgcl_audit_append_shadow(pgcl_audit *a, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    if (n <= 0) return PGCL_OK;
    return a->ops->append_shadow(a, rows, n, err, cap);
}

pgcl_status pgcl_audit_record_event(pgcl_audit *a, const pgcl_admin_event *ev, char *err, int cap) {
    return a->ops->record_event(a, ev, err, cap);
}

pgcl_status pgcl_audit_run(pgcl_audit *a, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    return a->ops->run(a, fn, ctx, err, cap);
}

void pgcl_audit_set_max_pending_rows(pgcl_audit *a, int max_pending_rows) {
    a->ops->set_max_pending_rows(a, max_pending_rows);
}

int pgcl_audit_pending_rows(pgcl_audit *a) { return a->ops->pending_rows(a); }

bool pgcl_audit_healthy(pgcl_audit *a) { return a->ops->healthy(a); }

int64_t pgcl_audit_writer_stall_us(pgcl_audit *a, int64_t now_us) {
    int64_t busy_since = 0, queued_since = 0;
    a->ops->writer_activity(a, &busy_since, &queued_since);
    int64_t since = busy_since && (!queued_since || busy_since < queued_since) ? busy_since : queued_since;
    return since && now_us > since ? now_us - since : 0;
}

int pgcl_audit_schema_version(pgcl_audit *a) { return a->ops->schema_version(a); }

const char *pgcl_audit_store_name(pgcl_audit *a) { return a->ops->name; }

void pgcl_audit_note_commit(pgcl_audit *store) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    atomic_store_explicit(&store->last_commit_unix_us, (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000,
                          memory_order_relaxed);
}

int64_t pgcl_audit_last_commit_unix_us(pgcl_audit *a) {
    return atomic_load_explicit(&a->last_commit_unix_us, memory_order_relaxed);
}

bool pgcl_audit_size_bytes(pgcl_audit *a, int64_t *bytes) {
    return a->ops->size_bytes && a->ops->size_bytes(a, bytes);
}

/* ---- the read side (audit_reads.h) ---- */

pgcl_status pgcl_audit_read_decision(pgcl_audit *a, const char *decision_id, pgcl_row_arena *arena,
                                     pgcl_decision_record *out, char *err, int cap) {
    return a->ops->read_decision(a, decision_id, arena, out, err, cap);
}

pgcl_status pgcl_audit_read_decisions(pgcl_audit *a, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                      pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap) {
    return a->ops->read_decisions(a, f, before_seq, limit, arena, out, err, cap);
}

pgcl_status pgcl_audit_read_contests(pgcl_audit *a, bool open, int64_t after_seq, int limit, int window_days,
                                     int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err,
                                     int cap) {
    return a->ops->read_contests(a, open, after_seq, limit, window_days, now_us, arena, out, err, cap);
}

pgcl_status pgcl_audit_read_stats(pgcl_audit *a, const char *since, const char *until, pgcl_row_arena *arena,
                                  pgcl_audit_stats *out, char *err, int cap) {
    return a->ops->read_stats(a, since, until, arena, out, err, cap);
}

pgcl_status pgcl_audit_open_export(pgcl_audit *a, const char *since, const char *until, pgcl_export_format fmt,
                                   pgcl_export **out, char *err, int cap) {
    return a->ops->open_export(a, since, until, fmt, out, err, cap);
}

pgcl_status pgcl_audit_read_stored_decision(pgcl_audit *a, const char *decision_id, pgcl_stored_decision *out,
                                            char *err, int cap) {
    return a->ops->read_stored_decision(a, decision_id, out, err, cap);
}

void pgcl_stored_decision_clear(pgcl_stored_decision *d) {
    free(d->owned);
    *d = (pgcl_stored_decision){0};
}

pgcl_status pgcl_audit_read_idempotency_key(pgcl_audit *a, const char *scope, const char *key, const char *now,
                                            bool *found, pgcl_idem_record *out, char *err, int cap) {
    return a->ops->read_idempotency_key(a, scope, key, now, found, out, err, cap);
}

pgcl_status pgcl_audit_read_proof(pgcl_audit *a, const char *decision_id, pgcl_chain_proof *out, char *err, int cap) {
    return a->ops->read_proof(a, decision_id, out, err, cap);
}

pgcl_status pgcl_audit_read_archive_where(pgcl_audit *a, const char *decision_id, pgcl_archive_where *out, char *err,
                                          int cap) {
    return a->ops->read_archive_where(a, decision_id, out, err, cap);
}

pgcl_status pgcl_audit_read_consistency(pgcl_audit *a, const char *writer_id, int64_t first, int64_t second,
                                        pgcl_log_consistency *out, char *err, int cap) {
    return a->ops->read_consistency(a, writer_id, first, second, out, err, cap);
}

void pgcl_store_checkpoint_release(pgcl_store_checkpoint *cp) {
    if (cp) pgcl_fleet_checkpoint_release(&cp->fleet);
}

pgcl_status pgcl_audit_create_checkpoint(pgcl_audit *a, const char *key_path, const char *out_file, const char *out_dir,
                                         pgcl_store_checkpoint *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    return a->ops->create_checkpoint(a, key_path, out_file, out_dir, out, err, cap);
}

pgcl_status pgcl_audit_verify_chain(pgcl_audit *a, pgcl_chain_report *report, char *err, int cap) {
    return a->ops->verify_chain(a, report, err, cap);
}

pgcl_status pgcl_audit_create_key(pgcl_audit *a, pgcl_role role, const char *name, const char *actor,
                                  char key_out[128], char key_id_out[32], char *err, int cap) {
    return a->ops->create_key(a, role, name, actor, key_out, key_id_out, err, cap);
}

pgcl_status pgcl_audit_revoke_key(pgcl_audit *a, const char *key_id, const char *actor, char *err, int cap) {
    return a->ops->revoke_key(a, key_id, actor, err, cap);
}

pgcl_status pgcl_audit_import_key(pgcl_audit *a, pgcl_role role, const char *name, const char *actor, const char *key,
                                  char key_id_out[32], bool *created, char *err, int cap) {
    return a->ops->import_key(a, role, name, actor, key, key_id_out, created, err, cap);
}

pgcl_status pgcl_audit_open_keyring(pgcl_audit *a, pgcl_keyring **out, char *err, int cap) {
    return a->ops->open_keyring(a, out, err, cap);
}

pgcl_status pgcl_audit_read_keys(pgcl_audit *a, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    return a->ops->read_keys(a, on_key, ctx, err, cap);
}

pgcl_status pgcl_audit_read_activations(pgcl_audit *a, pgcl_activation_fn on_activation, void *ctx, char *err,
                                        int cap) {
    return a->ops->read_activations(a, on_activation, ctx, err, cap);
}

pgcl_status pgcl_audit_read_shadow_report(pgcl_audit *a, const char *model, const char *shadow_version,
                                          pgcl_shadow_report *out, char *err, int cap) {
    return a->ops->read_shadow_report(a, model, shadow_version, out, err, cap);
}

/* ---- the transparency logs (audit_log.h) ---- */

/* A store without the operation yet (its op NULL). */
static pgcl_status unsupported(pgcl_audit *a, const char *what, char *err, int cap) {
    pgcl_errorf(err, cap, "the %s store has no %s yet", a->ops->name, what);
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_audit_logs(pgcl_audit *a, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap) {
    *n = 0;
    return a->ops->logs ? a->ops->logs(a, out, cap, n, err, err_cap) : unsupported(a, "logs", err, err_cap);
}

const char *pgcl_audit_writer_id(pgcl_audit *a) { return a->ops->writer_id ? a->ops->writer_id(a) : ""; }

pgcl_status pgcl_audit_log_read(pgcl_audit *a, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx, char *err,
                                int cap) {
    return a->ops->log_read ? a->ops->log_read(a, writer_id, fn, ctx, err, cap) : unsupported(a, "logs", err, cap);
}

pgcl_status pgcl_audit_log_checkpoint(pgcl_audit *a, const char *writer_id, char **note, uint64_t *size, char *err,
                                      int cap) {
    *note = NULL;
    *size = 0;
    return a->ops->log_checkpoint ? a->ops->log_checkpoint(a, writer_id, note, size, err, cap)
                                  : unsupported(a, "log checkpoints", err, cap);
}

pgcl_status pgcl_audit_log_put_checkpoint(pgcl_audit *a, uint64_t size, const char *note, char *err, int cap) {
    return a->ops->log_put_checkpoint ? a->ops->log_put_checkpoint(a, size, note, err, cap)
                                      : unsupported(a, "log checkpoints", err, cap);
}

pgcl_status pgcl_audit_log_add_cosignatures(pgcl_audit *a, uint64_t size, const char *signature_lines, char *err,
                                            int cap) {
    return a->ops->log_add_cosignatures ? a->ops->log_add_cosignatures(a, size, signature_lines, err, cap)
                                        : unsupported(a, "log checkpoints", err, cap);
}

pgcl_status pgcl_audit_log_leaf_of(pgcl_audit *a, const char *kind, const char *id,
                                   char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err,
                                   int cap) {
    writer_id[0] = '\0';
    *leaf_index = 0;
    return a->ops->log_leaf_of ? a->ops->log_leaf_of(a, kind, id, writer_id, leaf_index, err, cap)
                               : unsupported(a, "logs", err, cap);
}
