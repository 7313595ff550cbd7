/* SQLite helpers; see db.h. */
#include "db.h"

#include <stddef.h>

#include "status.h"

int pgcl_db_exec(sqlite3 *db, const char *sql, char *err, int cap) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
    }
    return rc;
}

sqlite3 *pgcl_db_open_reader(const char *path, char *err, int cap) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    return db;
}

int pgcl_db_each_row(sqlite3 *db, const char *sql, pgcl_db_bind_fn bind, pgcl_db_row_fn on_row, void *ctx,
                     char *err, int cap) {
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "prepare: %s", sqlite3_errmsg(db));
        return rc;
    }
    if (bind) {
        rc = bind(stmt, ctx);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "bind: %s", sqlite3_errmsg(db));
            sqlite3_finalize(stmt);
            return rc;
        }
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (!on_row) continue;
        int taken = on_row(stmt, ctx, err, cap);
        if (taken != SQLITE_OK) {
            sqlite3_finalize(stmt);
            return taken;
        }
    }
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "step: %s", sqlite3_errmsg(db));
        sqlite3_finalize(stmt);
        return rc;
    }
    sqlite3_finalize(stmt);
    return SQLITE_OK;
}

typedef struct int_query {
    pgcl_db_bind_fn bind;
    void *ctx;
    int64_t value;
    bool found;
} int_query;

static int bind_int_query(sqlite3_stmt *stmt, void *ctx) {
    const int_query *q = ctx;
    return q->bind ? q->bind(stmt, q->ctx) : SQLITE_OK;
}

static int take_int(sqlite3_stmt *stmt, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    int_query *q = ctx;
    q->found = sqlite3_column_type(stmt, 0) != SQLITE_NULL;
    q->value = q->found ? sqlite3_column_int64(stmt, 0) : 0;
    return SQLITE_DONE; /* the first row only */
}

int pgcl_db_query_int(sqlite3 *db, const char *sql, pgcl_db_bind_fn bind, void *ctx, int64_t *out, bool *found,
                      char *err, int cap) {
    int_query q = {.bind = bind, .ctx = ctx};
    int rc = pgcl_db_each_row(db, sql, bind_int_query, take_int, &q, err, cap);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    *out = q.value;
    if (found) *found = q.found;
    return rc;
}

int pgcl_db_write_transaction(sqlite3 *db, pgcl_db_tx_fn work, void *ctx, char *err, int cap) {
    int rc = pgcl_db_exec(db, "BEGIN IMMEDIATE", err, cap);
    if (rc != SQLITE_OK) return rc;
    rc = work(db, ctx, err, cap);
    if (rc == SQLITE_OK) rc = pgcl_db_exec(db, "COMMIT", err, cap);
    if (rc != SQLITE_OK) {
        char ignored[128];
        /* After a failed COMMIT SQLite may already have rolled back; the ROLLBACK's own error then
         * says "no transaction is active" and is not the news. */
        if (!sqlite3_get_autocommit(db)) pgcl_db_exec(db, "ROLLBACK", ignored, sizeof ignored);
    }
    return rc;
}
