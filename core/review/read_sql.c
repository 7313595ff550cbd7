/* The SQL builder and the column readers the reviewer reads share; see read_sql.h. */
#include "read_sql.h"

#include <stdlib.h>
#include <string.h>

#include "db.h"

/* ---- the SQL builder ----
 * SQL text is assembled only from literals passed to qb_sql(); every value goes through qb_text()
 * or qb_int(), which append a '?' and record the value to bind. */
void qb_sql(qbuild *q, const char *text) {
    size_t n = strlen(text);
    if (q->len + n + 1 > sizeof q->sql) {
        q->overflow = true;
        return;
    }
    memcpy(q->sql + q->len, text, n + 1);
    q->len += n;
}

static void qb_arg(qbuild *q, qarg a) {
    if (q->n == QB_MAX_ARGS) {
        q->overflow = true;
        return;
    }
    q->args[q->n++] = a;
    qb_sql(q, "?");
}

void qb_text(qbuild *q, const char *s) {
    qb_arg(q, (qarg){.s = s});
}
void qb_int(qbuild *q, int64_t v) {
    qb_arg(q, (qarg){.is_int = true, .i = v});
}

pgcl_status qb_prepare(sqlite3 *db, const qbuild *q, const char *prefix, sqlite3_stmt **out, char *err, int cap) {
    *out = NULL;
    if (q->overflow) {
        pgcl_errorf(err, cap, "query too large");
        return PGCL_ERR_INVALID;
    }
    char *text = NULL;
    if (prefix) {
        size_t np = strlen(prefix);
        if (!(text = malloc(np + q->len + 1))) {
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        memcpy(text, prefix, np);
        memcpy(text + np, q->sql, q->len + 1);
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, text ? text : q->sql, -1, &s, NULL);
    free(text);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    for (int i = 0; i < q->n; i++) {
        rc = q->args[i].is_int ? sqlite3_bind_int64(s, i + 1, q->args[i].i)
                               : sqlite3_bind_text(s, i + 1, q->args[i].s, -1, SQLITE_STATIC);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "binding a query value: %s", sqlite3_errmsg(db));
            sqlite3_finalize(s);
            return PGCL_ERR_DB;
        }
    }
    *out = s;
    return PGCL_OK;
}

pgcl_status pgcl_read_step_error(sqlite3 *db, int rc, char *err, int cap) {
    pgcl_errorf(err, cap, "reading the audit database: %s", sqlite3_errmsg(db));
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? PGCL_ERR_BUSY : PGCL_ERR_DB;
}

pgcl_status pgcl_read_walk_status(int rc, char *err, int cap) {
    if (rc == SQLITE_OK || rc == SQLITE_DONE) return PGCL_OK;
    if (rc == SQLITE_NOMEM) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? PGCL_ERR_BUSY : PGCL_ERR_DB;
}

pgcl_status pgcl_read_begin(sqlite3 *db, char *err, int cap) {
    char sub[PGCL_READ_ERR_CAP];
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) == SQLITE_OK) return PGCL_OK;
    pgcl_errorf(err, cap, "starting a read: %s", sub);
    return PGCL_ERR_DB;
}

pgcl_status pgcl_read_scalar_int(sqlite3 *db, const qbuild *q, int64_t *out, bool *null, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    pgcl_status st = qb_prepare(db, q, NULL, &s, err, cap);
    if (st != PGCL_OK) return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        if (null) *null = sqlite3_column_type(s, 0) == SQLITE_NULL;
        *out = sqlite3_column_int64(s, 0);
    } else if (rc == SQLITE_DONE) {
        if (null) *null = true;
        *out = 0;
    } else {
        st = pgcl_read_step_error(db, rc, err, cap);
    }
    sqlite3_finalize(s);
    return st;
}

/* ---- columns ---- */

const char *pgcl_read_text(pgcl_row_arena *a, sqlite3_stmt *s, int i) {
    return pgcl_row_arena_strdup(a, (const char *)sqlite3_column_text(s, i));
}

pgcl_opt_real pgcl_read_opt_real(sqlite3_stmt *s, int i) {
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return (pgcl_opt_real){0};
    return (pgcl_opt_real){.present = true, .value = sqlite3_column_double(s, i)};
}

pgcl_opt_int pgcl_read_opt_int(sqlite3_stmt *s, int i) {
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return (pgcl_opt_int){0};
    return (pgcl_opt_int){.present = true, .value = sqlite3_column_int64(s, i)};
}

void pgcl_read_facts(pgcl_row_arena *a, sqlite3_stmt *s, int first, pgcl_decision_facts *out) {
    *out = (pgcl_decision_facts){
        .trace_id = pgcl_read_text(a, s, first),
        .content_date = pgcl_read_text(a, s, first + 1),
        .territorial_scope = pgcl_read_text(a, s, first + 2),
        .content_language = pgcl_read_text(a, s, first + 3),
    };
}

void pgcl_read_summary(pgcl_row_arena *a, sqlite3_stmt *s, pgcl_decision_summary *out) {
    *out = (pgcl_decision_summary){
        .seq = sqlite3_column_int64(s, 0),
        .decision_id = pgcl_read_text(a, s, 1),
        .created_at = pgcl_read_text(a, s, 2),
        .item_id = pgcl_read_text(a, s, 3),
        .request_id = pgcl_read_text(a, s, 4),
        .model_name = pgcl_read_text(a, s, 5),
        .model_version = pgcl_read_text(a, s, 6),
        .label = pgcl_read_text(a, s, 7),
        .decision = pgcl_read_text(a, s, 8),
        .toxicity = pgcl_read_opt_real(s, 9),
        .contest_status = pgcl_read_text(a, s, 10),
    };
}

void pgcl_read_resolution(pgcl_row_arena *a, sqlite3_stmt *s, int first, pgcl_resolution_row *out) {
    *out = (pgcl_resolution_row){0};
    if (sqlite3_column_type(s, first) == SQLITE_NULL) return;
    out->present = true;
    out->resolved_at = pgcl_read_text(a, s, first + 1);
    out->resolved_by = pgcl_read_text(a, s, first + 2);
    out->resolver_key_id = pgcl_read_text(a, s, first + 3);
    out->outcome = pgcl_read_text(a, s, first + 4);
    out->corrected_label = pgcl_read_text(a, s, first + 5);
    out->note = pgcl_read_text(a, s, first + 6);
}
