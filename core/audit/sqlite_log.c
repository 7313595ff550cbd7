/* The SQLite store's transparency log: rows and the writer's transaction side (sqlite_log.h). */
#include "sqlite_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/record_rows.h"
#include "log_tree.h"
#include "merkle.h"

/* ---- the rows ---- */

struct pgcl_sqlite_log_rows {
    sqlite3 *db;
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    sqlite3_stmt *leaf_hashes, *records, *tile_roots, *put_leaf, *put_tile_root;
};

pgcl_sqlite_log_rows *pgcl_sqlite_log_rows_create(sqlite3 *db, const char *writer_id) {
    pgcl_sqlite_log_rows *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->db = db;
    snprintf(r->writer_id, sizeof r->writer_id, "%s", writer_id);
    return r;
}

void pgcl_sqlite_log_rows_destroy(pgcl_sqlite_log_rows *r) {
    if (!r) return;
    sqlite3_finalize(r->leaf_hashes);
    sqlite3_finalize(r->records);
    sqlite3_finalize(r->tile_roots);
    sqlite3_finalize(r->put_leaf);
    sqlite3_finalize(r->put_tile_root);
    free(r);
}

/* *s prepared from sql on first use, reset with ?1 = the writer's id. */
static pgcl_status statement(pgcl_sqlite_log_rows *r, sqlite3_stmt **s, const char *sql, char *err, int cap) {
    if (!*s && sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "log rows: %s", sqlite3_errmsg(r->db));
        return PGCL_ERR_DB;
    }
    sqlite3_reset(*s);
    sqlite3_clear_bindings(*s);
    sqlite3_bind_text(*s, 1, r->writer_id, -1, SQLITE_STATIC);
    return PGCL_OK;
}

/* Steps s over rows whose first column must be the indexes first, first+1, ... first+n-1 (a gap or
 * a short read is PGCL_ERR_NOT_FOUND) and hands each row to take. */
typedef pgcl_status (*row_fn)(sqlite3_stmt *s, int i, void *ctx, char *err, int cap);
static pgcl_status read_run(pgcl_sqlite_log_rows *r, sqlite3_stmt *s, uint64_t first, int n, const char *what,
                            row_fn take, void *ctx, char *err, int cap) {
    int i = 0, rc = SQLITE_DONE;
    pgcl_status st = PGCL_OK;
    while (st == PGCL_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (i >= n || (uint64_t)sqlite3_column_int64(s, 0) != first + (uint64_t)i) break;
        st = take(s, i, ctx, err, cap);
        i++;
    }
    if (st == PGCL_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "log %s: %s", what, sqlite3_errmsg(r->db));
        st = PGCL_ERR_DB;
    }
    sqlite3_reset(s);
    if (st == PGCL_OK && i != n) {
        pgcl_errorf(err, cap, "log %s %llu..%llu of writer %s: only %d stored", what, (unsigned long long)first,
                    (unsigned long long)(first + (uint64_t)n - 1), r->writer_id, i);
        st = PGCL_ERR_NOT_FOUND;
    }
    return st;
}

/* Column 1 of s as a 32-byte hash into out[i]. */
static pgcl_status take_hash(sqlite3_stmt *s, int i, void *ctx, char *err, int cap) {
    pgcl_merkle_hash *out = ctx;
    if (sqlite3_column_bytes(s, 1) != PGCL_MERKLE_HASH_BYTES) {
        pgcl_errorf(err, cap, "log row %lld: a stored hash is not 32 bytes", (long long)sqlite3_column_int64(s, 0));
        return PGCL_ERR_FORMAT;
    }
    memcpy(out[i].b, sqlite3_column_blob(s, 1), PGCL_MERKLE_HASH_BYTES);
    return PGCL_OK;
}

static pgcl_status rows_leaf_hashes(void *ctx, uint64_t first, int n, pgcl_merkle_hash *out, char *err, int cap) {
    pgcl_sqlite_log_rows *r = ctx;
    pgcl_status st = statement(r, &r->leaf_hashes,
                               "SELECT leaf_index, leaf_hash FROM log_leaves WHERE writer_id = ?1"
                               " AND leaf_index >= ?2 AND leaf_index < ?3 ORDER BY leaf_index",
                               err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_bind_int64(r->leaf_hashes, 2, (int64_t)first);
    sqlite3_bind_int64(r->leaf_hashes, 3, (int64_t)(first + (uint64_t)n));
    return read_run(r, r->leaf_hashes, first, n, "leaves", take_hash, out, err, cap);
}

typedef struct record_take {
    pgcl_log_record_fn fn;
    void *fctx;
} record_take;

static pgcl_status take_record(sqlite3_stmt *s, int i, void *ctx, char *err, int cap) {
    (void)i;
    const record_take *t = ctx;
    const unsigned char *data = sqlite3_column_blob(s, 1);
    return t->fn(t->fctx, (uint64_t)sqlite3_column_int64(s, 0), data ? data : (const unsigned char *)"",
                 (size_t)sqlite3_column_bytes(s, 1), err, cap);
}

static pgcl_status rows_records(void *ctx, uint64_t first, int n, pgcl_log_record_fn fn, void *fctx, char *err,
                                int cap) {
    pgcl_sqlite_log_rows *r = ctx;
    pgcl_status st = statement(r, &r->records,
                               "SELECT leaf_index, record FROM log_leaves WHERE writer_id = ?1"
                               " AND leaf_index >= ?2 AND leaf_index < ?3 ORDER BY leaf_index",
                               err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_bind_int64(r->records, 2, (int64_t)first);
    sqlite3_bind_int64(r->records, 3, (int64_t)(first + (uint64_t)n));
    record_take t = {fn, fctx};
    return read_run(r, r->records, first, n, "records", take_record, &t, err, cap);
}

static pgcl_status rows_tile_roots(void *ctx, int level, uint64_t first, int n, pgcl_merkle_hash *out, char *err,
                                   int cap) {
    pgcl_sqlite_log_rows *r = ctx;
    pgcl_status st = statement(r, &r->tile_roots,
                               "SELECT tile_index, root FROM log_tile_roots WHERE writer_id = ?1 AND level = ?2"
                               " AND tile_index >= ?3 AND tile_index < ?4 ORDER BY tile_index",
                               err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_bind_int(r->tile_roots, 2, level);
    sqlite3_bind_int64(r->tile_roots, 3, (int64_t)first);
    sqlite3_bind_int64(r->tile_roots, 4, (int64_t)(first + (uint64_t)n));
    return read_run(r, r->tile_roots, first, n, "tile roots", take_hash, out, err, cap);
}

/* Steps an insert; SQLITE_DONE or the error. */
static pgcl_status step_insert(pgcl_sqlite_log_rows *r, sqlite3_stmt *s, const char *what, char *err, int cap) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) return PGCL_OK;
    pgcl_errorf(err, cap, "log %s: %s", what, sqlite3_errmsg(r->db));
    return PGCL_ERR_DB;
}

static pgcl_status rows_put_leaf(void *ctx, uint64_t leaf_index, const pgcl_merkle_hash *leaf_hash,
                                 const unsigned char *record, size_t len, char *err, int cap) {
    pgcl_sqlite_log_rows *r = ctx;
    pgcl_status st =
        statement(r, &r->put_leaf,
                  "INSERT INTO log_leaves (writer_id, leaf_index, leaf_hash, record) VALUES (?1,?2,?3,?4)", err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_bind_int64(r->put_leaf, 2, (int64_t)leaf_index);
    sqlite3_bind_blob(r->put_leaf, 3, leaf_hash->b, PGCL_MERKLE_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_blob(r->put_leaf, 4, record, (int)len, SQLITE_STATIC);
    return step_insert(r, r->put_leaf, "leaf", err, cap);
}

static pgcl_status rows_put_tile_root(void *ctx, int level, uint64_t tile_index, const pgcl_merkle_hash *root,
                                      char *err, int cap) {
    pgcl_sqlite_log_rows *r = ctx;
    pgcl_status st =
        statement(r, &r->put_tile_root,
                  "INSERT INTO log_tile_roots (writer_id, level, tile_index, root) VALUES (?1,?2,?3,?4)", err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_bind_int(r->put_tile_root, 2, level);
    sqlite3_bind_int64(r->put_tile_root, 3, (int64_t)tile_index);
    sqlite3_bind_blob(r->put_tile_root, 4, root->b, PGCL_MERKLE_HASH_BYTES, SQLITE_STATIC);
    return step_insert(r, r->put_tile_root, "tile root", err, cap);
}

const pgcl_log_ops pgcl_sqlite_log_ops = {
    .leaf_hashes = rows_leaf_hashes,
    .records = rows_records,
    .tile_roots = rows_tile_roots,
    .put_leaf = rows_put_leaf,
    .put_tile_root = rows_put_tile_root,
};

/* ---- the state ---- */

/* Whether db's schema has the log (migration 0012). */
static bool has_log_tables(sqlite3 *db) {
    sqlite3_stmt *s = NULL;
    bool found = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_writers'", -1,
                                    &s, NULL) == SQLITE_OK &&
                 sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return found;
}

static const char STATE_SQL[] = "SELECT writer_id, size, root FROM log_writers ORDER BY writer_id";

/* The state through s (STATE_SQL prepared on db; reset after). */
static pgcl_status read_state(sqlite3 *db, sqlite3_stmt *s, pgcl_audit_log_info *out, bool *found, char *err, int cap) {
    memset(out, 0, sizeof *out);
    *found = false;
    pgcl_status st = PGCL_OK;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (*found || !id || strlen(id) > PGCL_LOG_WRITER_ID_MAX || sqlite3_column_int64(s, 1) < 0 ||
            sqlite3_column_bytes(s, 2) != PGCL_MERKLE_HASH_BYTES) {
            pgcl_errorf(err, cap, "log_writers: %s",
                        *found ? "more than one writer in a SQLite store" : "a malformed writer row");
            st = PGCL_ERR_FORMAT;
            break;
        }
        *found = true;
        snprintf(out->writer_id, sizeof out->writer_id, "%s", id);
        out->size = (uint64_t)sqlite3_column_int64(s, 1);
        memcpy(out->root.b, sqlite3_column_blob(s, 2), PGCL_MERKLE_HASH_BYTES);
    }
    if (st == PGCL_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "log_writers: %s", sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    sqlite3_reset(s);
    return st;
}

pgcl_status pgcl_sqlite_log_state(sqlite3 *db, pgcl_audit_log_info *out, bool *found, char *err, int cap) {
    memset(out, 0, sizeof *out);
    *found = false;
    if (!has_log_tables(db)) return PGCL_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, STATE_SQL, -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "log_writers: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    pgcl_status st = read_state(db, s, out, found, err, cap);
    sqlite3_finalize(s);
    return st;
}

pgcl_status pgcl_sqlite_log_ensure_writer(sqlite3 *db, const char *writer_id, const char *now,
                                          char out[PGCL_LOG_WRITER_ID_MAX + 1], char *err, int cap) {
    if (!has_log_tables(db)) {
        pgcl_errorf(err, cap, "the database has no log tables (migration 0012): run 'pgcld serve' once to upgrade it");
        return PGCL_ERR_UNSUPPORTED;
    }
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = pgcl_sqlite_log_state(db, &info, &found, err, cap);
    if (st != PGCL_OK) return st;
    if (!found) {
        char host[PGCL_LOG_WRITER_ID_MAX + 1] = "";
        if (!writer_id || !*writer_id) {
            if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "pgcld");
            writer_id = host;
        }
        if (strlen(writer_id) > PGCL_LOG_WRITER_ID_MAX) {
            pgcl_errorf(err, cap, "writer id '%.40s...' is longer than %d bytes", writer_id, PGCL_LOG_WRITER_ID_MAX);
            return PGCL_ERR_INVALID;
        }
        pgcl_merkle_hash empty = pgcl_merkle_root(NULL, 0);
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(db, "INSERT INTO log_writers (writer_id, created_at, size, root) VALUES (?,?,0,?)",
                                    -1, &s, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(s, 1, writer_id, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 2, now, -1, SQLITE_STATIC);
            sqlite3_bind_blob(s, 3, empty.b, PGCL_MERKLE_HASH_BYTES, SQLITE_STATIC);
            rc = sqlite3_step(s);
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "log_writers: %s", sqlite3_errmsg(db));
            return PGCL_ERR_DB;
        }
        snprintf(info.writer_id, sizeof info.writer_id, "%s", writer_id);
    }
    if (out) snprintf(out, PGCL_LOG_WRITER_ID_MAX + 1, "%s", info.writer_id);
    return PGCL_OK;
}

/* ---- the writer ---- */

struct pgcl_sqlite_log {
    sqlite3 *db;
    bool enabled;               /* the schema has the log */
    pgcl_sqlite_log_rows *rows; /* of writer_id, on db */
    pgcl_log_appender *appender;
    pgcl_decision_record_buf *decision; /* large: one per writer */
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t begun_size; /* the state begin() read */
    sqlite3_stmt *get_state, *put_state;
};

pgcl_sqlite_log *pgcl_sqlite_log_create(sqlite3 *db, char *err, int cap) {
    pgcl_sqlite_log *l = calloc(1, sizeof *l);
    if (!l) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    l->db = db;
    l->enabled = has_log_tables(db);
    if (!l->enabled) return l;
    if (!(l->appender = pgcl_log_appender_create()) || !(l->decision = pgcl_decision_record_buf_create())) {
        pgcl_errorf(err, cap, "out of memory");
        pgcl_sqlite_log_destroy(l);
        return NULL;
    }
    if (sqlite3_prepare_v3(db, STATE_SQL, -1, SQLITE_PREPARE_PERSISTENT, &l->get_state, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(db, "UPDATE log_writers SET size = ?2, root = ?3 WHERE writer_id = ?1", -1,
                           SQLITE_PREPARE_PERSISTENT, &l->put_state, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "log_writers: %s", sqlite3_errmsg(db));
        pgcl_sqlite_log_destroy(l);
        return NULL;
    }
    return l;
}

void pgcl_sqlite_log_destroy(pgcl_sqlite_log *l) {
    if (!l) return;
    pgcl_sqlite_log_rows_destroy(l->rows);
    pgcl_log_appender_destroy(l->appender);
    pgcl_decision_record_buf_destroy(l->decision);
    sqlite3_finalize(l->get_state);
    sqlite3_finalize(l->put_state);
    free(l);
}

/* Whether db holds events written before the log: any event row, or an old chain past genesis. */
static pgcl_status has_pre_log_events(sqlite3 *db, bool *yes, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT EXISTS (SELECT 1 FROM decisions) OR EXISTS (SELECT 1 FROM admin_events)"
                                " OR EXISTS (SELECT 1 FROM contests) OR EXISTS (SELECT 1 FROM resolutions)"
                                " OR EXISTS (SELECT 1 FROM audit_chain WHERE seq > 1)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    *yes = rc == SQLITE_ROW && sqlite3_column_int(s, 0) != 0;
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW) return PGCL_OK;
    pgcl_errorf(err, cap, "log begin: %s", sqlite3_errmsg(db));
    return PGCL_ERR_DB;
}

/* The legacy_head record of the old chain's head (*found false when the chain is empty). */
static pgcl_status legacy_head(sqlite3 *db, const char *now, pgcl_record *r, bool *found, char *err, int cap) {
    memset(r, 0, sizeof *r);
    *found = false;
    r->kind = PGCL_RECORD_LEGACY_HEAD;
    pgcl_record_legacy_head *h = &r->legacy;
    if (!pgcl_record_time_parse(now, &h->created_at_us)) {
        pgcl_errorf(err, cap, "log begin: the transaction's time '%s' is not pgcld's form", now);
        return PGCL_ERR_INVALID;
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        h->head_seq = sqlite3_column_int64(s, 0);
        const char *hash = (const char *)sqlite3_column_text(s, 1);
        *found = hash && pgcl_record_hex_parse(hash, h->head_hash, sizeof h->head_hash);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "log begin: audit_chain: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    if (rc == SQLITE_ROW && !*found) {
        pgcl_errorf(err, cap, "log begin: the chain head %lld has a malformed hash", (long long)h->head_seq);
        return PGCL_ERR_FORMAT;
    }
    pgcl_merkle_hash root;
    char sub[256];
    if (*found && pgcl_log_tree_root(db, h->head_seq, &root, sub, sizeof sub) == PGCL_OK) {
        h->has_log_root = true;
        memcpy(h->log_root, root.b, sizeof h->log_root);
    }
    return PGCL_OK;
}

pgcl_status pgcl_sqlite_log_begin(pgcl_sqlite_log *l, const char *now, char *err, int cap) {
    if (!l->enabled) return PGCL_OK;
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_status st = read_state(l->db, l->get_state, &info, &found, err, cap);
    if (st == PGCL_OK && !found) { /* a database created by a build that fixed no writer: now */
        st = pgcl_sqlite_log_ensure_writer(l->db, NULL, now, NULL, err, cap);
        if (st == PGCL_OK) st = read_state(l->db, l->get_state, &info, &found, err, cap);
    }
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(found);
    if (!l->rows || strcmp(l->writer_id, info.writer_id) != 0) {
        pgcl_sqlite_log_rows_destroy(l->rows);
        if (!(l->rows = pgcl_sqlite_log_rows_create(l->db, info.writer_id))) {
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        memcpy(l->writer_id, info.writer_id, sizeof l->writer_id);
    }
    pgcl_log_begin(l->appender, info.size, &info.root);
    l->begun_size = info.size;
    if (info.size > 0) return PGCL_OK;
    bool pre_log = false;
    if ((st = has_pre_log_events(l->db, &pre_log, err, cap)) != PGCL_OK || !pre_log) return st;
    pgcl_record head;
    if ((st = legacy_head(l->db, now, &head, &found, err, cap)) != PGCL_OK || !found) return st;
    int64_t leaf = -1;
    st = pgcl_sqlite_log_add(l, &head, &leaf, err, cap);
    PGCL_ASSERT(st != PGCL_OK || leaf == 0);
    return st;
}

pgcl_status pgcl_sqlite_log_add(pgcl_sqlite_log *l, const pgcl_record *r, int64_t *leaf_index, char *err, int cap) {
    *leaf_index = -1;
    if (!l->enabled) return PGCL_OK;
    uint64_t leaf = 0;
    pgcl_status st = pgcl_log_add_record(l->appender, r, &leaf, err, cap);
    if (st == PGCL_OK) *leaf_index = (int64_t)leaf;
    return st;
}

pgcl_status pgcl_sqlite_log_add_decision(pgcl_sqlite_log *l, const pgcl_decision_row *row, const char *created_at,
                                         const unsigned char *input_digest, int64_t *leaf_index, char *err, int cap) {
    *leaf_index = -1;
    if (!l->enabled) return PGCL_OK;
    int64_t created_at_us = 0;
    if (!pgcl_record_time_parse(created_at, &created_at_us)) {
        pgcl_errorf(err, cap, "decision %s: created_at '%s' is not pgcld's form", row->decision_id, created_at);
        return PGCL_ERR_INVALID;
    }
    pgcl_status st = pgcl_record_of_decision_row(row, created_at_us, input_digest, l->decision, err, cap);
    uint64_t leaf = 0;
    if (st == PGCL_OK) st = pgcl_log_add_decision(l->appender, l->decision, &leaf, err, cap);
    if (st == PGCL_OK) *leaf_index = (int64_t)leaf;
    return st;
}

size_t pgcl_sqlite_log_mark(const pgcl_sqlite_log *l) {
    return l->enabled ? pgcl_log_mark(l->appender) : 0;
}

void pgcl_sqlite_log_rewind(pgcl_sqlite_log *l, size_t mark) {
    if (l->enabled) pgcl_log_rewind(l->appender, mark);
}

pgcl_status pgcl_sqlite_log_seal(pgcl_sqlite_log *l, char *err, int cap) {
    if (!l->enabled || pgcl_log_pending(l->appender) == 0) return PGCL_OK;
    uint64_t size = 0;
    pgcl_merkle_hash root;
    pgcl_status st = pgcl_log_seal(l->appender, &pgcl_sqlite_log_ops, l->rows, &size, &root, err, cap);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(size > l->begun_size);
    sqlite3_stmt *s = l->put_state;
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, l->writer_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (int64_t)size);
    sqlite3_bind_blob(s, 3, root.b, PGCL_MERKLE_HASH_BYTES, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int changed = sqlite3_changes(l->db);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE || changed != 1) {
        pgcl_errorf(err, cap, "log_writers: %s", rc != SQLITE_DONE ? sqlite3_errmsg(l->db) : "the writer row is gone");
        return PGCL_ERR_DB;
    }
    return PGCL_OK;
}

void pgcl_sqlite_log_committed(pgcl_sqlite_log *l) {
    if (l->enabled) pgcl_log_committed(l->appender);
}

const char *pgcl_sqlite_log_writer_id(const pgcl_sqlite_log *l) {
    return l->writer_id;
}
