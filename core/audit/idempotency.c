/* Idempotency keys; see idempotency.h. */
#include "idempotency.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"

bool pgcl_idem_key_valid(const char *key) {
    size_t n = 0;
    for (; key[n]; n++)
        if ((unsigned char)key[n] < 0x21 || (unsigned char)key[n] > 0x7e) return false;
    return n >= 1 && n <= PGCL_IDEM_KEY_MAX;
}

bool pgcl_idem_record_set(pgcl_idem_record *out, const char *body_sha256, const char *request_id, const char *answer,
                          const char *request_sha256) {
    snprintf(out->body_sha256, sizeof out->body_sha256, "%s", body_sha256 ? body_sha256 : "");
    snprintf(out->request_sha256, sizeof out->request_sha256, "%s", request_sha256 ? request_sha256 : "");
    snprintf(out->request_id, sizeof out->request_id, "%s", request_id ? request_id : "");
    out->answer = strdup(answer ? answer : "");
    return out->answer != NULL;
}

bool pgcl_idem_same_request(const pgcl_idem_record *stored, const char *request_sha256, const char *body_sha256) {
    if (stored->request_sha256[0]) return strcmp(stored->request_sha256, request_sha256) == 0;
    return strcmp(stored->body_sha256, body_sha256) == 0;
}

pgcl_status pgcl_idem_lookup(sqlite3 *db, const char *scope, const char *key, const char *now, bool *found,
                             pgcl_idem_record *out, char *err, int cap) {
    *found = false;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT body_sha256, request_id, answer, request_sha256 FROM idempotency_keys"
                           " WHERE scope = ?1 AND idem_key = ?2 AND expires_at > ?3",
                           -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "idempotency lookup: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    pgcl_status st = PGCL_OK;
    if (rc == SQLITE_ROW) {
        if (!pgcl_idem_record_set(out, (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
                                  (const char *)sqlite3_column_text(s, 2), (const char *)sqlite3_column_text(s, 3))) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
        } else {
            *found = true;
        }
    } else if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "idempotency lookup: %s", sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_idem_store(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const pgcl_idem_entry *e = ctx;
    sqlite3 *db = pgcl_audit_txn_db(t);
    char expires[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_after(e->ttl_s, expires);
    /* Prepared once per connection by SQLite's statement cache would be nicer; these run once per
     * keyed request, next to that request's row inserts. */
    static const char *const sql[2] = {
        "DELETE FROM idempotency_keys WHERE (scope, idem_key) IN"
        " (SELECT scope, idem_key FROM idempotency_keys WHERE expires_at <= ?1 ORDER BY expires_at LIMIT 100)",
        "INSERT OR REPLACE INTO idempotency_keys (scope, idem_key, body_sha256, request_id, answer, created_at,"
        " expires_at, request_sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    };
    for (int k = 0; k < 2; k++) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, sql[k], -1, &s, NULL) != SQLITE_OK) {
            pgcl_errorf(err, cap, "idempotency key: %s", sqlite3_errmsg(db));
            return PGCL_ERR_DB;
        }
        if (k == 0) {
            sqlite3_bind_text(s, 1, pgcl_audit_txn_now(t), -1, SQLITE_STATIC);
        } else {
            const char *v[] = {e->scope, e->key, e->body_sha256, e->request_id, e->answer, pgcl_audit_txn_now(t), expires,
                               e->request_sha256};
            for (int i = 0; i < 8; i++) sqlite3_bind_text(s, i + 1, v[i], -1, SQLITE_STATIC);
        }
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "idempotency key: %s", sqlite3_errmsg(db));
            return PGCL_ERR_DB;
        }
    }
    return PGCL_OK;
}
