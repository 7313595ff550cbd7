/* A store opened read-only (pgcl_audit_options.read_only): the operations every such store
 * answers alike, whichever store it is — every write refused with PGCL_ERR_UNSUPPORTED and a
 * message naming the store (pgcl_audit.read_only_shown), and a writer's state that is always idle.
 * The stores' read-only tables (audit_sqlite_read_only.c, pg/audit_pg.c) take them through
 * PGCL_AUDIT_READ_ONLY_OPS (audit_store_impl.h) and add their own reads. */
#include <stdbool.h>
#include <stdint.h>

#include "audit_store_impl.h"
#include "log.h" /* util: pgcl_errorf */

static pgcl_status refusal(pgcl_audit *store, char *err, int cap) {
    PGCL_ASSERT(store->read_only_shown); /* only a store opened read-only has these operations */
    pgcl_errorf(err, cap, "%s: the audit store was opened read-only", store->read_only_shown);
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_audit_ro_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                 char *err, int cap) {
    (void)rows, (void)n, (void)idem;
    return refusal(store, err, cap);
}

void pgcl_audit_ro_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                                pgcl_audit_done_fn done, void *done_ctx) {
    char err[512];
    pgcl_audit_ro_append(store, rows, n, idem, err, sizeof err);
    done(done_ctx, PGCL_ERR_UNSUPPORTED, err);
}

pgcl_status pgcl_audit_ro_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    (void)rows, (void)n;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap) {
    (void)ev;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_run(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    (void)fn, (void)ctx;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                            const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap) {
    (void)key_path, (void)out_file, (void)out_dir, (void)out;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                     char key_out[128], char key_id_out[32], char *err, int cap) {
    (void)role, (void)name, (void)actor, (void)key_out, (void)key_id_out;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap) {
    (void)key_id, (void)actor;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                     const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    (void)role, (void)name, (void)actor, (void)key, (void)key_id_out;
    *created = false;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap) {
    (void)r;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap) {
    (void)r;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped,
                                      bool *more, char *err, int cap) {
    (void)older_than, (void)max_rows;
    *dropped = 0;
    *more = false;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap) {
    (void)size, (void)note;
    return refusal(store, err, cap);
}

pgcl_status pgcl_audit_ro_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *lines, char *err,
                                               int cap) {
    (void)size, (void)lines;
    return refusal(store, err, cap);
}

void pgcl_audit_ro_set_max_pending_rows(pgcl_audit *store, int max_pending_rows) { (void)store, (void)max_pending_rows; }
int pgcl_audit_ro_pending_rows(pgcl_audit *store) {
    (void)store;
    return 0;
}
bool pgcl_audit_ro_healthy(pgcl_audit *store) {
    (void)store;
    return false; /* it cannot write */
}
void pgcl_audit_ro_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us) {
    (void)store;
    *busy_since_us = *queued_since_us = 0; /* no writer */
}
/* "": this process writes no log. */
const char *pgcl_audit_ro_writer_id(pgcl_audit *store) {
    (void)store;
    return "";
}
