/* Contest and resolution transactions; see review.h. */
#include "review.h"

#include "audit_store_impl.h"
#include "log/record_rows.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* Runs one prepared statement expecting at most one row; returns the sqlite3_step code with the
 * statement left on its row (caller finalizes). */
static int query_row(sqlite3 *db, const char *sql, sqlite3_stmt **out, const char *arg) {
    if (sqlite3_prepare_v2(db, sql, -1, out, NULL) != SQLITE_OK) return SQLITE_ERROR;
    sqlite3_bind_text(*out, 1, arg, -1, SQLITE_STATIC);
    return sqlite3_step(*out);
}

pgcl_status pgcl_review_check_decision(pgcl_contest_request *r, bool found, double age_days, char *err, int cap) {
    if (!found) {
        r->code = "decision_not_found";
        pgcl_errorf(err, cap, "no decision with id %.64s", r->decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    if (age_days > r->window_days) {
        r->code = "contest_window_closed";
        pgcl_errorf(err, cap, "decision %s is %.0f days old; contests are accepted for %d days", r->decision_id,
                    age_days, r->window_days);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_review_check_open(pgcl_contest_request *r, const char *open_contest_id, char *err, int cap) {
    if (!open_contest_id) return PGCL_OK;
    r->code = "contest_open";
    pgcl_errorf(err, cap, "decision %s already has an open contest (%s)", r->decision_id, open_contest_id);
    return PGCL_ERR_MISMATCH;
}

static pgcl_status contest_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    pgcl_contest_request *r = ctx;
    sqlite3 *db = pgcl_audit_txn_db(t);
    sqlite3_stmt *s = NULL;
    pgcl_status st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(db, "SELECT julianday(?2) - julianday(created_at) FROM decisions WHERE decision_id = ?1",
                           -1, &s, NULL) != SQLITE_OK)
        goto db_error;
    sqlite3_bind_text(s, 1, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, pgcl_audit_txn_now(t), -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto db_error;
    st = pgcl_review_check_decision(r, rc == SQLITE_ROW, rc == SQLITE_ROW ? sqlite3_column_double(s, 0) : 0, err, cap);
    if (st != PGCL_OK) goto done;
    sqlite3_finalize(s);
    rc = query_row(db,
                   "SELECT c.contest_id FROM contests c WHERE c.decision_id = ?1"
                   " AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id = c.contest_id)",
                   &s, r->decision_id);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto db_error;
    st = pgcl_review_check_open(r, rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL, err, cap);
    if (st != PGCL_OK) goto done;
    sqlite3_finalize(s);
    s = NULL;
    pgcl_uuid7(r->contest_id);
    memcpy(r->filed_at, pgcl_audit_txn_now(t), sizeof r->filed_at);
    pgcl_record record; /* the contest's log leaf, before its row (which stores the leaf's index) */
    int64_t leaf_index = -1;
    st = pgcl_record_of_contest(r->contest_id, r->decision_id, r->filed_at, r->filer_key_id ? r->filer_key_id : "",
                                r->filed_by, r->reason, &record, err, cap);
    if (st == PGCL_OK) st = pgcl_audit_txn_log(t, &record, &leaf_index, err, cap);
    if (st != PGCL_OK) goto done;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO contests (contest_id, decision_id, filed_at, filed_by, filer_key_id, reason,"
                           " leaf_index) VALUES (?,?,?,?,?,?,?)",
                           -1, &s, NULL) != SQLITE_OK)
        goto db_error;
    const char *vals[] = {r->contest_id, r->decision_id, r->filed_at, r->filed_by, r->filer_key_id, r->reason};
    for (int i = 0; i < 6; i++) {
        if (vals[i]) sqlite3_bind_text(s, i + 1, vals[i], -1, SQLITE_STATIC);
        else sqlite3_bind_null(s, i + 1);
    }
    if (leaf_index >= 0) sqlite3_bind_int64(s, 7, leaf_index);
    if (sqlite3_step(s) != SQLITE_DONE) goto db_error;
    st = pgcl_audit_txn_chain(t, "contests", sqlite3_last_insert_rowid(db), err, cap);
    goto done;
db_error:
    pgcl_errorf(err, cap, "contest: %s", sqlite3_errmsg(db));
    st = PGCL_ERR_DB;
done:
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_review_file_contest(pgcl_audit *a, pgcl_contest_request *r, char *err, int cap) {
    r->code = NULL;
    return a->ops->file_contest(a, r, err, cap);
}

pgcl_status pgcl_sqlite_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap) {
    return pgcl_audit_run(store, contest_fn, r, err, cap);
}

pgcl_status pgcl_review_check_resolution(pgcl_resolution_request *r, bool found, const char *decision_id,
                                         const char *filer_key_id, const char *probabilities, int64_t resolutions,
                                         char *err, int cap) {
    if (!found) {
        r->code = "contest_not_found";
        pgcl_errorf(err, cap, "no contest with id %.64s", r->contest_id);
        return PGCL_ERR_NOT_FOUND;
    }
    snprintf(r->decision_id, sizeof r->decision_id, "%s", decision_id);
    if (resolutions > 0) {
        r->code = "already_resolved";
        pgcl_errorf(err, cap, "contest %s is already resolved", r->contest_id);
        return PGCL_ERR_MISMATCH;
    }
    if (filer_key_id && r->resolver_key_id && strcmp(filer_key_id, r->resolver_key_id) == 0) {
        r->code = "filer_cannot_resolve";
        pgcl_errorf(err, cap, "the key that filed contest %s (%s) cannot resolve it; another reviewer must",
                    r->contest_id, filer_key_id);
        return PGCL_ERR_UNSUPPORTED;
    }
    if (r->corrected_label) {
        json_t *probs = probabilities ? json_loads(probabilities, 0, NULL) : NULL;
        bool known = probs && json_object_get(probs, r->corrected_label);
        json_decref(probs);
        if (!known) {
            r->code = "invalid_label";
            pgcl_errorf(err, cap, "corrected_label '%.128s' is not a label of the decision's model", r->corrected_label);
            return PGCL_ERR_INVALID;
        }
    }
    return PGCL_OK;
}

static pgcl_status resolve_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    pgcl_resolution_request *r = ctx;
    sqlite3 *db = pgcl_audit_txn_db(t);
    sqlite3_stmt *s = NULL;
    pgcl_status st = PGCL_ERR_DB;
    int rc = query_row(db,
                       "SELECT c.decision_id, c.filer_key_id, d.probabilities,"
                       " (SELECT count(*) FROM resolutions r WHERE r.contest_id = c.contest_id)"
                       " FROM contests c JOIN decisions d ON d.decision_id = c.decision_id WHERE c.contest_id = ?1",
                       &s, r->contest_id);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto db_error;
    bool found = rc == SQLITE_ROW;
    st = pgcl_review_check_resolution(r, found, found ? (const char *)sqlite3_column_text(s, 0) : NULL,
                                      found ? (const char *)sqlite3_column_text(s, 1) : NULL,
                                      found ? (const char *)sqlite3_column_text(s, 2) : NULL,
                                      found ? sqlite3_column_int64(s, 3) : 0, err, cap);
    if (st != PGCL_OK) goto done;
    sqlite3_finalize(s);
    s = NULL;
    memcpy(r->resolved_at, pgcl_audit_txn_now(t), sizeof r->resolved_at);
    pgcl_record record; /* the resolution's log leaf, before its row (which stores the leaf's index) */
    int64_t leaf_index = -1;
    st = pgcl_record_of_resolution(r->contest_id, r->decision_id, r->resolved_at, r->outcome,
                                   r->resolver_key_id ? r->resolver_key_id : "", r->resolved_by,
                                   r->corrected_label ? r->corrected_label : "", r->note, &record, err, cap);
    if (st == PGCL_OK) st = pgcl_audit_txn_log(t, &record, &leaf_index, err, cap);
    if (st != PGCL_OK) goto done;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO resolutions (contest_id, resolved_at, resolved_by, resolver_key_id, outcome,"
                           " corrected_label, note, leaf_index) VALUES (?,?,?,?,?,?,?,?)",
                           -1, &s, NULL) != SQLITE_OK)
        goto db_error;
    const char *vals[] = {r->contest_id, r->resolved_at, r->resolved_by, r->resolver_key_id, r->outcome,
                          r->corrected_label, r->note};
    for (int i = 0; i < 7; i++) {
        if (vals[i]) sqlite3_bind_text(s, i + 1, vals[i], -1, SQLITE_STATIC);
        else sqlite3_bind_null(s, i + 1);
    }
    if (leaf_index >= 0) sqlite3_bind_int64(s, 8, leaf_index);
    if (sqlite3_step(s) != SQLITE_DONE) goto db_error;
    st = pgcl_audit_txn_chain(t, "resolutions", sqlite3_last_insert_rowid(db), err, cap);
    goto done;
db_error:
    pgcl_errorf(err, cap, "resolution: %s", sqlite3_errmsg(db));
    st = PGCL_ERR_DB;
done:
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_review_resolve(pgcl_audit *a, pgcl_resolution_request *r, char *err, int cap) {
    r->code = NULL;
    return a->ops->resolve_contest(a, r, err, cap);
}

pgcl_status pgcl_sqlite_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap) {
    return pgcl_audit_run(store, resolve_fn, r, err, cap);
}
