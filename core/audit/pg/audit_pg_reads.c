/* The PostgreSQL store's reads. See audit_pg.h. (A stub until it is written: every call answers PGCL_ERR_UNSUPPORTED.) */
#include "audit_pg.h"

pgcl_status pgcl_pg_read_decision(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena, pgcl_decision_record *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_decisions(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq, int limit, pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_contests(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days, int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_stats(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena, pgcl_audit_stats *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_open_export(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt, pgcl_export **out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now, bool *found, pgcl_idem_record *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version, pgcl_shadow_report *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}
