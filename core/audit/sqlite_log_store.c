/* The SQLite store's transparency log for its callers (audit_log.h): the reads on the store's
 * reader pool, each in one read transaction (one snapshot), and the checkpoints' writes as jobs of
 * the store's writer (pgcl_audit_run), so that they never race its commits. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_store_impl.h"
#include "db.h"
#include "reader_pool.h"
#include "sqlite_log.h"

/* One read of the store: a reader connection inside BEGIN ... COMMIT. */
typedef pgcl_status (*snapshot_fn)(sqlite3 *db, void *ctx, char *err, int cap);

static pgcl_status in_snapshot(pgcl_audit *store, snapshot_fn fn, void *ctx, char *err, int cap) {
    pgcl_qpool *p = pgcl_queries_pool(pgcl_audit_sqlite_path(store), err, cap);
    if (!p) return PGCL_ERR_NOMEM;
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    char sub[256];
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "log read: %s", sub);
        st = PGCL_ERR_DB;
    } else {
        st = fn(db, ctx, err, cap);
        pgcl_db_exec(db, "COMMIT", sub, sizeof sub); /* a read: nothing to keep */
    }
    pgcl_qpool_release(p, db);
    return st;
}

/* ---- the logs, a log's rows ---- */

typedef struct logs_ctx {
    pgcl_audit_log_info *out;
    int cap;
    int *n;
} logs_ctx;

static pgcl_status logs_in(sqlite3 *db, void *ctx, char *err, int cap) {
    logs_ctx *c = ctx;
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = pgcl_sqlite_log_state(db, &info, &found, err, cap);
    if (st != PGCL_OK || !found) return st;
    *c->n = 1;
    if (c->cap >= 1) c->out[0] = info;
    return PGCL_OK;
}

pgcl_status pgcl_sqlite_logs(pgcl_audit *store, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap) {
    *n = 0;
    logs_ctx c = {out, cap, n};
    return in_snapshot(store, logs_in, &c, err, err_cap);
}

typedef struct read_ctx {
    const char *writer_id;
    pgcl_audit_log_read_fn fn;
    void *ctx;
} read_ctx;

static pgcl_status read_in(sqlite3 *db, void *ctx, char *err, int cap) {
    read_ctx *c = ctx;
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = pgcl_sqlite_log_state(db, &info, &found, err, cap);
    if (st != PGCL_OK) return st;
    if (!found || strcmp(info.writer_id, c->writer_id) != 0) {
        pgcl_errorf(err, cap, "this store has no log of writer '%.128s'", c->writer_id);
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_sqlite_log_rows *rows = pgcl_sqlite_log_rows_create(db, info.writer_id);
    if (!rows) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    st = c->fn(c->ctx, &pgcl_sqlite_log_ops, rows, &info, err, cap);
    pgcl_sqlite_log_rows_destroy(rows);
    return st;
}

pgcl_status pgcl_sqlite_log_read(pgcl_audit *store, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx,
                                 char *err, int cap) {
    read_ctx c = {writer_id ? writer_id : "", fn, ctx};
    return in_snapshot(store, read_in, &c, err, cap);
}

/* ---- checkpoints ---- */

typedef struct checkpoint_ctx {
    const char *writer_id;
    char **note;
    uint64_t *size;
} checkpoint_ctx;

static pgcl_status checkpoint_in(sqlite3 *db, void *ctx, char *err, int cap) {
    checkpoint_ctx *c = ctx;
    sqlite3_stmt *s = NULL;
    pgcl_status st = PGCL_ERR_DB;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT size, note, cosignatures FROM log_checkpoints WHERE writer_id = ?1"
                                " ORDER BY size DESC LIMIT 1",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, c->writer_id, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
    }
    if (rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "no checkpoint of writer '%.128s' is stored yet", c->writer_id);
        st = PGCL_ERR_NOT_FOUND;
    } else if (rc == SQLITE_ROW) {
        const char *note = (const char *)sqlite3_column_text(s, 1);
        const char *cosignatures = (const char *)sqlite3_column_text(s, 2);
        size_t a = note ? strlen(note) : 0, b = cosignatures ? strlen(cosignatures) : 0;
        if ((*c->note = malloc(a + b + 1))) {
            memcpy(*c->note, note ? note : "", a);
            memcpy(*c->note + a, cosignatures ? cosignatures : "", b + 1);
            *c->size = (uint64_t)sqlite3_column_int64(s, 0);
            st = PGCL_OK;
        } else {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
        }
    } else {
        pgcl_errorf(err, cap, "log_checkpoints: %s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_sqlite_log_checkpoint(pgcl_audit *store, const char *writer_id, char **note, uint64_t *size,
                                       char *err, int cap) {
    *note = NULL;
    *size = 0;
    checkpoint_ctx c = {writer_id ? writer_id : "", note, size};
    return in_snapshot(store, checkpoint_in, &c, err, cap);
}

/* A job's view of a checkpoint write. */
typedef struct put_ctx {
    const char *writer_id;
    uint64_t size;
    const char *text; /* the note, or the cosignature lines */
} put_ctx;

/* The stored note and cosignatures of (writer, size) into *note / *cosignatures (malloc'd; NULL
 * both when there is no such checkpoint). */
static pgcl_status stored_checkpoint(sqlite3 *db, const put_ctx *c, char **note, char **cosignatures, char *err,
                                     int cap) {
    *note = *cosignatures = NULL;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT note, cosignatures FROM log_checkpoints WHERE writer_id = ?1 AND size = ?2",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, c->writer_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (int64_t)c->size);
        rc = sqlite3_step(s);
    }
    pgcl_status st = PGCL_OK;
    if (rc == SQLITE_ROW) {
        *note = strdup((const char *)sqlite3_column_text(s, 0));
        *cosignatures = strdup((const char *)sqlite3_column_text(s, 1));
        if (!*note || !*cosignatures) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
        }
    } else if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "log_checkpoints: %s", sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    sqlite3_finalize(s);
    if (st != PGCL_OK) {
        free(*note);
        free(*cosignatures);
        *note = *cosignatures = NULL;
    }
    return st;
}

/* Runs sql (?1 writer, ?2 size, ?3 text, ?4 the transaction's time) once. */
static pgcl_status exec_put(sqlite3 *db, const char *sql, const put_ctx *c, const char *text, const char *now,
                            char *err, int cap) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, c->writer_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (int64_t)c->size);
        sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(s) >= 4) sqlite3_bind_text(s, 4, now, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_DONE) return PGCL_OK;
    pgcl_errorf(err, cap, "log_checkpoints: %s", sqlite3_errmsg(db));
    return PGCL_ERR_DB;
}

static pgcl_status put_checkpoint_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const put_ctx *c = ctx;
    sqlite3 *db = pgcl_audit_txn_db(t);
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = pgcl_sqlite_log_state(db, &info, &found, err, cap);
    if (st != PGCL_OK) return st;
    if (!found || strcmp(info.writer_id, c->writer_id) != 0 || c->size > info.size) {
        pgcl_errorf(err, cap, "a checkpoint of %llu leaves: the log of '%.128s' has %llu", (unsigned long long)c->size,
                    c->writer_id, (unsigned long long)(found ? info.size : 0));
        return PGCL_ERR_INVALID;
    }
    char *note = NULL, *cosignatures = NULL;
    if ((st = stored_checkpoint(db, c, &note, &cosignatures, err, cap)) != PGCL_OK) return st;
    if (note) {
        st = strcmp(note, c->text) == 0 ? PGCL_OK : PGCL_ERR_MISMATCH;
        if (st != PGCL_OK)
            pgcl_errorf(err, cap, "another checkpoint of size %llu is already stored", (unsigned long long)c->size);
    } else {
        st = exec_put(db, "INSERT INTO log_checkpoints (writer_id, size, note, created_at) VALUES (?1, ?2, ?3, ?4)", c,
                      c->text, pgcl_audit_txn_now(t), err, cap);
    }
    free(note);
    free(cosignatures);
    return st;
}

pgcl_status pgcl_sqlite_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap) {
    if (!note || !*note || note[strlen(note) - 1] != '\n') {
        pgcl_errorf(err, cap, "a checkpoint's note must be a signed note's text, ending in a newline");
        return PGCL_ERR_INVALID;
    }
    put_ctx c = {pgcl_audit_writer_id(store), size, note};
    return pgcl_audit_run(store, put_checkpoint_fn, &c, err, cap);
}

/* Whether the text `lines` holds `line` (len bytes, its newline included) as one of its lines. */
static bool has_line(const char *lines, const char *line, size_t len) {
    for (const char *p = lines; *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        if (n == len && memcmp(p, line, len) == 0) return true;
        p += n;
    }
    return false;
}

static pgcl_status add_cosignatures_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const put_ctx *c = ctx;
    sqlite3 *db = pgcl_audit_txn_db(t);
    char *note = NULL, *cosignatures = NULL;
    pgcl_status st = stored_checkpoint(db, c, &note, &cosignatures, err, cap);
    if (st != PGCL_OK) return st;
    if (!note) {
        pgcl_errorf(err, cap, "no checkpoint of size %llu is stored", (unsigned long long)c->size);
        return PGCL_ERR_NOT_FOUND;
    }
    size_t have = strlen(cosignatures), add = strlen(c->text);
    char *merged = malloc(have + add + 1);
    if (!merged) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
    } else {
        memcpy(merged, cosignatures, have + 1);
        size_t len = have;
        for (const char *p = c->text; *p;) { /* each new line once */
            const char *end = strchr(p, '\n');
            size_t n = (size_t)(end - p) + 1; /* every line ends in '\n' (checked by the caller) */
            if (n > 1 && !has_line(merged, p, n) && !has_line(note, p, n)) {
                memcpy(merged + len, p, n);
                merged[len += n] = '\0';
            }
            p += n;
        }
        st = len == have ? PGCL_OK
                         : exec_put(db, "UPDATE log_checkpoints SET cosignatures = ?3 WHERE writer_id = ?1 AND size = ?2",
                                    c, merged, "", err, cap);
    }
    free(merged);
    free(note);
    free(cosignatures);
    return st;
}

pgcl_status pgcl_sqlite_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *signature_lines,
                                             char *err, int cap) {
    if (!signature_lines || (*signature_lines && signature_lines[strlen(signature_lines) - 1] != '\n')) {
        pgcl_errorf(err, cap, "cosignature lines must each end in a newline");
        return PGCL_ERR_INVALID;
    }
    put_ctx c = {pgcl_audit_writer_id(store), size, signature_lines};
    return pgcl_audit_run(store, add_cosignatures_fn, &c, err, cap);
}

/* ---- where an event is ---- */

/* The SQL that finds kind's leaf by id (NULL: not a kind). */
static const char *leaf_sql(const char *kind) {
    static const struct {
        const char *kind, *sql;
    } kinds[] = {
        {"decision", "SELECT leaf_index FROM decisions WHERE decision_id = ?1"},
        {"contest", "SELECT leaf_index FROM contests WHERE contest_id = ?1"},
        {"resolution", "SELECT leaf_index FROM resolutions WHERE contest_id = ?1"},
        {"admin_event", "SELECT leaf_index FROM admin_events WHERE event_id = ?1 AND action NOT LIKE 'key.%'"},
        {"key_event", "SELECT leaf_index FROM admin_events WHERE event_id = ?1 AND action LIKE 'key.%'"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i].kind) == 0) return kinds[i].sql;
    return NULL;
}

typedef struct leaf_ctx {
    const char *sql, *id;
    char *writer_id;
    uint64_t *leaf_index;
} leaf_ctx;

static pgcl_status leaf_in(sqlite3 *db, void *ctx, char *err, int cap) {
    leaf_ctx *c = ctx;
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = pgcl_sqlite_log_state(db, &info, &found, err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_stmt *s = NULL;
    int rc = found ? sqlite3_prepare_v2(db, c->sql, -1, &s, NULL) : SQLITE_DONE;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, c->id, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
    }
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER) {
        *c->leaf_index = (uint64_t)sqlite3_column_int64(s, 0);
        snprintf(c->writer_id, PGCL_LOG_WRITER_ID_MAX + 1, "%s", info.writer_id);
        PGCL_ASSERT(*c->leaf_index < info.size); /* a row's leaf was committed with it */
    } else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "no event '%.64s' in the log%s", c->id, rc == SQLITE_ROW ? " (it predates it)" : "");
        st = PGCL_ERR_NOT_FOUND;
    } else {
        pgcl_errorf(err, cap, "leaf of '%.64s': %s", c->id, sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_sqlite_log_leaf_of(pgcl_audit *store, const char *kind, const char *id,
                                    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err,
                                    int cap) {
    writer_id[0] = '\0';
    *leaf_index = 0;
    const char *sql = kind ? leaf_sql(kind) : NULL;
    if (!sql || !id) {
        pgcl_errorf(err, cap, "unknown event kind '%.32s'", kind ? kind : "");
        return PGCL_ERR_INVALID;
    }
    leaf_ctx c = {sql, id, writer_id, leaf_index};
    return in_snapshot(store, leaf_in, &c, err, cap);
}
