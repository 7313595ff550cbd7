/* The PostgreSQL store's writer. See audit_pg.h. (A stub until it is written: every call answers PGCL_ERR_UNSUPPORTED.) */
#include "audit_pg.h"

pgcl_status pgcl_pg_writer_start(pgcl_audit_pg *s, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

void pgcl_pg_writer_stop(pgcl_audit_pg *s) {
}

pgcl_status pgcl_pg_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

void pgcl_pg_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem, pgcl_audit_done_fn done, void *done_ctx) {
    done(done_ctx, PGCL_ERR_UNSUPPORTED, "the PostgreSQL store is not written yet");
}

pgcl_status pgcl_pg_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

void pgcl_pg_set_max_pending_rows(pgcl_audit *store, int max_pending_rows) {
}

int pgcl_pg_pending_rows(pgcl_audit *store) {
    return 0;
}

bool pgcl_pg_healthy(pgcl_audit *store) {
    return false;
}

pgcl_status pgcl_pg_run(pgcl_audit_pg *s, pgcl_pg_job_fn fn, void *ctx, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

PGconn *pgcl_pg_txn_conn(pgcl_pg_txn *t) {
    return NULL;
}

const char *pgcl_pg_txn_now(pgcl_pg_txn *t) {
    return NULL;
}

const char *pgcl_pg_txn_writer_id(pgcl_pg_txn *t) {
    return NULL;
}

pgcl_status pgcl_pg_txn_next_seq(pgcl_pg_txn *t, const char *table, int64_t *seq, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_pg_txn_chain(pgcl_pg_txn *t, int table, int64_t row_seq, pgcl_merkle_hash leaf, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store is not written yet");
    return PGCL_ERR_UNSUPPORTED;
}
