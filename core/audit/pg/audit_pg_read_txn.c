/* The PostgreSQL store's read transaction (audit_pg_read_internal.h): a connection of the store's
 * read pool, one statement or one read-only REPEATABLE READ snapshot for several, the connection
 * given back; and the columns that several reads take from a row (a decision's summary, its facts,
 * a contest's resolution). A pooled connection that the server closed since it was last used is
 * noticed on the read's first statement and replaced (read_first). */
#include "audit_pg_read_internal.h"

#define READ_BEGIN_SQL "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

/* Runs a read's first statement, sql (n text parameters; what: its name in err), on a connection
 * of the read pool: its result, with *conn the connection (given back with pgcl_pg_read_txn_close), or NULL
 * with *st and err ("<prefix>: <what>: …") set and *conn NULL. A pooled connection that turns out
 * to be gone (the server restarted since it was last used: libpq only notices on the next
 * statement) is dropped and the statement runs again on the next one (each idle connection of the
 * pool may be gone: at most PGCL_PG_READERS of them, then a new one); a read changes nothing, so
 * running its first statement again is safe. */
static PGresult *read_first(pgcl_audit *store, const char *prefix, const char *what, const char *sql, int n,
                            const char *const *values, PGconn **conn, pgcl_status *st, char *err, int cap) {
    pgcl_pg_pool *pool = pgcl_audit_pg_of(store)->readers;
    *conn = NULL;
    *st = PGCL_ERR_DB;
    for (int attempt = 0; attempt <= PGCL_PG_READERS; attempt++) {
        if ((*st = pgcl_pg_pool_acquire(pool, PGCL_PG_READ_WAIT_MS, conn, err, cap)) != PGCL_OK) return NULL;
        char sub[PGCL_READ_ERR_CAP];
        PGresult *res = pgcl_pg_query(*conn, what, sql, n, values, st, sub, sizeof sub);
        if (res) return res;
        pgcl_errorf(err, cap, "%s: %s", prefix, sub);
        bool gone = pgcl_pg_broken(*conn);
        pgcl_pg_pool_release(pool, *conn); /* a broken connection is closed, not pooled */
        *conn = NULL;
        if (!gone) break;
    }
    return NULL;
}

pgcl_status pgcl_pg_read_txn_open(pgcl_audit *store, PGconn **conn, char *err, int cap) {
    pgcl_status st;
    PQclear(read_first(store, "reading the audit database", "starting a read", READ_BEGIN_SQL, 0, NULL, conn, &st, err,
                       cap));
    return st;
}

void pgcl_pg_read_txn_close(pgcl_audit *store, PGconn *conn) {
    if (!conn) return;
    if (!pgcl_pg_broken(conn) && PQtransactionStatus(conn) != PQTRANS_IDLE) {
        char ignored[128];
        pgcl_pg_exec(conn, "ending a read", "ROLLBACK", 0, NULL, ignored, sizeof ignored);
    }
    pgcl_pg_pool_release(pgcl_audit_pg_of(store)->readers, conn);
}

PGresult *pgcl_pg_read_txn_query(PGconn *conn, const char *sql, int n, const char *const *values, pgcl_status *st,
                                 char *err, int cap) {
    char sub[PGCL_READ_ERR_CAP];
    PGresult *res = pgcl_pg_query(conn, "query", sql, n, values, st, sub, sizeof sub);
    if (!res) pgcl_errorf(err, cap, "reading the audit database: %s", sub);
    return res;
}

PGresult *pgcl_pg_read_once(pgcl_audit *store, const char *prefix, const char *sql, int n, const char *const *values,
                            pgcl_status *st, char *err, int cap) {
    PGconn *conn;
    PGresult *res = read_first(store, prefix, "query", sql, n, values, &conn, st, err, cap);
    pgcl_pg_read_txn_close(store, conn);
    return res;
}

void pgcl_pg_summary_of(pgcl_row_arena *a, const PGresult *res, int row, pgcl_decision_summary *out) {
    *out = (pgcl_decision_summary){
        .seq = pgcl_pg_int(res, row, 0),
        .decision_id = text_of(a, res, row, 1),
        .created_at = text_of(a, res, row, 2),
        .item_id = text_of(a, res, row, 3),
        .request_id = text_of(a, res, row, 4),
        .model_name = text_of(a, res, row, 5),
        .model_version = text_of(a, res, row, 6),
        .label = text_of(a, res, row, 7),
        .decision = text_of(a, res, row, 8),
        .toxicity = opt_real_of(res, row, 9),
        .contest_status = text_of(a, res, row, 10),
    };
}

void pgcl_pg_facts_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_decision_facts *out) {
    *out = (pgcl_decision_facts){
        .trace_id = text_of(a, res, row, first),
        .content_date = text_of(a, res, row, first + 1),
        .territorial_scope = text_of(a, res, row, first + 2),
        .content_language = text_of(a, res, row, first + 3),
    };
}

void pgcl_pg_resolution_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_resolution_row *out) {
    *out = (pgcl_resolution_row){0};
    if (PQgetisnull(res, row, first)) return;
    out->present = true;
    out->resolved_at = text_of(a, res, row, first + 1);
    out->resolved_by = text_of(a, res, row, first + 2);
    out->resolver_key_id = text_of(a, res, row, first + 3);
    out->outcome = text_of(a, res, row, first + 4);
    out->corrected_label = text_of(a, res, row, first + 5);
    out->note = text_of(a, res, row, first + 6);
}
