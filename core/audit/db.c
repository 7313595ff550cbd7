/* SQLite helpers; see db.h. */
#include "db.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* Opens name (a path or a "file:" URI) read-only; messages name shown. */
static sqlite3 *open_read_only(const char *name, const char *shown, char *err, int cap) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(name, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", shown, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    return db;
}

sqlite3 *pgcl_db_open_reader(const char *path, char *err, int cap) { return open_read_only(path, path, err, cap); }

/* Whether the file path+suffix exists. */
static bool sibling_exists(const char *path, const char *suffix) {
    char name[4096];
    int n = snprintf(name, sizeof name, "%s%s", path, suffix);
    return n > 0 && (size_t)n < sizeof name && access(name, F_OK) == 0;
}

bool pgcl_db_untouched_uri(const char *path, char *out, size_t cap) {
    if (strncmp(path, "file:", 5) == 0) {
        int n = snprintf(out, cap, "%s", path);
        return n >= 0 && (size_t)n < cap;
    }
    size_t at = 0;
    const char *head = "file:";
    for (const char *p = head; *p; p++) {
        if (at + 1 >= cap) return false;
        out[at++] = *p;
    }
    /* RFC 3986 escapes for what a URI's path would otherwise take as its query, fragment or an
     * escape; SQLite decodes them back. */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        bool escape = *p == '?' || *p == '#' || *p == '%' || *p < 0x20;
        if (at + (escape ? 3 : 1) >= cap) return false;
        if (escape) {
            static const char hex[] = "0123456789ABCDEF";
            out[at++] = '%';
            out[at++] = hex[*p >> 4];
            out[at++] = hex[*p & 15];
        } else {
            out[at++] = (char)*p;
        }
    }
    const char *query = "?mode=ro&immutable=1";
    if (sibling_exists(path, "-wal"))
        query = sibling_exists(path, "-shm") ? "?mode=ro&readonly_shm=1" : "?mode=ro";
    else if (sibling_exists(path, "-journal"))
        query = "?mode=ro";
    int n = snprintf(out + at, cap - at, "%s", query);
    return n >= 0 && (size_t)n < cap - at;
}

static int hex_value(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void pgcl_db_file_of(const char *name, char *out, size_t cap) {
    if (cap == 0) return;
    size_t at = 0;
    if (strncmp(name, "file:", 5) != 0) {
        snprintf(out, cap, "%s", name);
        return;
    }
    for (const char *p = name + 5; *p && *p != '?' && *p != '#' && at + 1 < cap; p++) {
        int hi = p[0] == '%' ? hex_value(p[1]) : -1, lo = hi >= 0 ? hex_value(p[2]) : -1;
        if (lo >= 0) {
            out[at++] = (char)(hi * 16 + lo);
            p += 2;
        } else {
            out[at++] = *p;
        }
    }
    out[at] = '\0';
}

sqlite3 *pgcl_db_open_untouched(const char *path, char *err, int cap) {
    char uri[4096 * 3 + 64];
    if (!pgcl_db_untouched_uri(path, uri, sizeof uri)) {
        pgcl_errorf(err, cap, "%s: the path is too long", path);
        return NULL;
    }
    return open_read_only(uri, path, err, cap);
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

/* Begins a read transaction on db and takes its snapshot; SQLITE_OK or the failing step's code. */
static int begin_snapshot(sqlite3 *db, char *err, int cap) {
    int rc = pgcl_db_exec(db, "BEGIN", err, cap);
    if (rc != SQLITE_OK) return rc;
    sqlite3_stmt *s = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s) == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(db);
    if (rc != SQLITE_OK) pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
    sqlite3_finalize(s);
    if (rc != SQLITE_OK) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

sqlite3 *pgcl_db_open_untouched_snapshot(const char *path, char *err, int cap) {
    enum { ATTEMPTS = 40 }; /* 1, 2, ..., 40 ms apart: about 0.8 s in all */
    char sub[512] = "";
    for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
        sqlite3 *db = pgcl_db_open_untouched(path, err, cap);
        if (!db) return NULL; /* the file itself cannot be opened: no retry helps */
        if (begin_snapshot(db, sub, sizeof sub) == SQLITE_OK) return db;
        sqlite3_close(db);
        if (attempt < ATTEMPTS) usleep((useconds_t)attempt * 1000);
    }
    pgcl_errorf(err, cap, "%s: %s", path, sub);
    return NULL;
}
