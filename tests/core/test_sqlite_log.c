/* The SQLite store's log rows and writer (core/audit/sqlite_log.h) on a real database file: the
 * writer id fixed by the migrations, transactions of leaves (commit, savepoint rewind, rollback),
 * the state against a naive Merkle root of the leaf hashes read back, the full tile's root, the
 * rows as pgcl_log_ops (a gap is NOT_FOUND), and the legacy_head leaf of a database whose chain
 * predates the log. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain.h"
#include "clock.h"
#include "db.h"
#include "log/record.h"
#include "merkle.h"
#include "sqlite_log.h"
#include "sqlite_migrate.h"
#include "test_util.h"

static char g_err[512];

static sqlite3 *open_db(const char *path, const char *writer_id) {
    sqlite3 *db = NULL;
    unlink(path);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK, "open");
    int version = 0;
    CHECK(pgcl_sqlite_apply_migrations(db, path, writer_id, &version, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    return db;
}

/* An admin event record numbered n (its id and target carry n). */
static pgcl_record admin_record(int n) {
    pgcl_record r;
    memset(&r, 0, sizeof r);
    r.kind = PGCL_RECORD_ADMIN_EVENT;
    pgcl_record_uuid_parse("0190b6a2-8f3c-7b22-8a00-000000000000", r.admin.event_id);
    r.admin.event_id[14] = (uint8_t)(n >> 8);
    r.admin.event_id[15] = (uint8_t)n;
    r.admin.created_at_us = 1767225600000000LL + n;
    snprintf(r.admin.actor, sizeof r.admin.actor, "unit test");
    snprintf(r.admin.action, sizeof r.admin.action, "model.activate");
    snprintf(r.admin.target, sizeof r.admin.target, "model/%d", n);
    r.admin.details = (pgcl_record_text){"{}", 2};
    return r;
}

static void exec(sqlite3 *db, const char *sql) {
    CHECK(pgcl_db_exec(db, sql, g_err, sizeof g_err) == SQLITE_OK, "%s: %s", sql, g_err);
}

/* One committed transaction of n leaves numbered from first; returns the first leaf index. */
static int64_t commit_leaves(sqlite3 *db, pgcl_sqlite_log *log, int first, int n) {
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    exec(db, "BEGIN IMMEDIATE");
    CHECK(pgcl_sqlite_log_begin(log, now, g_err, sizeof g_err) == PGCL_OK, "begin: %s", g_err);
    int64_t first_leaf = -1;
    for (int i = 0; i < n; i++) {
        pgcl_record r = admin_record(first + i);
        int64_t leaf = -1;
        CHECK(pgcl_sqlite_log_add(log, &r, &leaf, g_err, sizeof g_err) == PGCL_OK, "add: %s", g_err);
        if (i == 0) first_leaf = leaf;
    }
    CHECK(pgcl_sqlite_log_seal(log, g_err, sizeof g_err) == PGCL_OK, "seal: %s", g_err);
    exec(db, "COMMIT");
    pgcl_sqlite_log_committed(log);
    return first_leaf;
}

/* The stored state against the naive root of every leaf hash read back through the ops. */
static void check_state(sqlite3 *db, uint64_t want_size) {
    pgcl_audit_log_info info;
    bool found = false;
    CHECK(pgcl_sqlite_log_state(db, &info, &found, g_err, sizeof g_err) == PGCL_OK && found, "state: %s", g_err);
    CHECK(info.size == want_size, "size %llu, want %llu", (unsigned long long)info.size,
          (unsigned long long)want_size);
    pgcl_merkle_hash *hashes = calloc(want_size + 1, sizeof *hashes);
    pgcl_sqlite_log_rows *rows = pgcl_sqlite_log_rows_create(db, info.writer_id);
    if (want_size > 0)
        CHECK(pgcl_sqlite_log_ops.leaf_hashes(rows, 0, (int)want_size, hashes, g_err, sizeof g_err) == PGCL_OK,
              "leaf hashes: %s", g_err);
    pgcl_merkle_hash naive = pgcl_merkle_root(hashes, want_size);
    CHECK(memcmp(naive.b, info.root.b, sizeof naive.b) == 0, "the root is the MTH of the leaves");
    CHECK(pgcl_sqlite_log_ops.leaf_hashes(rows, want_size - 1, 2, hashes, g_err, sizeof g_err) == PGCL_ERR_NOT_FOUND,
          "a read past the end is NOT_FOUND");
    if (want_size >= 256) {
        pgcl_merkle_hash tile, full = pgcl_merkle_root(hashes, 256);
        CHECK(pgcl_sqlite_log_ops.leaf_hashes(rows, 0, 256, hashes, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
        full = pgcl_merkle_root(hashes, 256);
        CHECK(pgcl_sqlite_log_ops.tile_roots(rows, 0, 0, 1, &tile, g_err, sizeof g_err) == PGCL_OK, "tile 0/0: %s",
              g_err);
        CHECK(memcmp(tile.b, full.b, sizeof tile.b) == 0, "tile 0/0's root is the MTH of its 256 hashes");
    }
    pgcl_sqlite_log_rows_destroy(rows);
    free(hashes);
}

static void test_transactions(const char *path) {
    sqlite3 *db = open_db(path, "unit-writer");
    pgcl_audit_log_info info;
    bool found = false;
    CHECK(pgcl_sqlite_log_state(db, &info, &found, g_err, sizeof g_err) == PGCL_OK && found &&
              strcmp(info.writer_id, "unit-writer") == 0 && info.size == 0,
          "the migrations fixed the writer id");
    pgcl_sqlite_log *log = pgcl_sqlite_log_create(db, g_err, sizeof g_err);
    CHECK(log != NULL, "create: %s", g_err);
    CHECK(commit_leaves(db, log, 0, 3) == 0, "first leaf 0 (a new database has no legacy head)");
    CHECK(strcmp(pgcl_sqlite_log_writer_id(log), "unit-writer") == 0, "writer id");
    check_state(db, 3);

    /* a savepoint's leaves go back with it */
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    exec(db, "BEGIN IMMEDIATE");
    CHECK(pgcl_sqlite_log_begin(log, now, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    pgcl_record r = admin_record(100);
    int64_t leaf = -1;
    CHECK(pgcl_sqlite_log_add(log, &r, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 3, "leaf 3: %lld",
          (long long)leaf);
    size_t mark = pgcl_sqlite_log_mark(log);
    r = admin_record(101);
    CHECK(pgcl_sqlite_log_add(log, &r, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 4, "leaf 4");
    pgcl_sqlite_log_rewind(log, mark);
    r = admin_record(102);
    CHECK(pgcl_sqlite_log_add(log, &r, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 4, "leaf 4 again");
    CHECK(pgcl_sqlite_log_seal(log, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    exec(db, "COMMIT");
    pgcl_sqlite_log_committed(log);
    check_state(db, 5);

    /* a rolled-back transaction leaves nothing; the next one starts from the stored state */
    exec(db, "BEGIN IMMEDIATE");
    CHECK(pgcl_sqlite_log_begin(log, now, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    r = admin_record(200);
    CHECK(pgcl_sqlite_log_add(log, &r, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 5, "leaf 5");
    CHECK(pgcl_sqlite_log_seal(log, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    exec(db, "ROLLBACK");
    check_state(db, 5);
    CHECK(commit_leaves(db, log, 300, 300) == 5, "the log goes on at 5");
    check_state(db, 305);

    /* the rows refuse a rewrite (append-only) */
    CHECK(pgcl_db_exec(db, "UPDATE log_leaves SET record = x'00' WHERE leaf_index = 0", g_err, sizeof g_err) !=
              SQLITE_OK,
          "log_leaves is append-only");
    CHECK(pgcl_db_exec(db, "UPDATE log_writers SET size = 1", g_err, sizeof g_err) != SQLITE_OK, "a log only grows");
    pgcl_sqlite_log_destroy(log);
    sqlite3_close(db);
}

static void test_legacy_head(const char *path) {
    sqlite3 *db = open_db(path, NULL);
    /* an event chained by the old chain alone, as before the log */
    pgcl_chain *chain = pgcl_chain_create(db, g_err, sizeof g_err);
    exec(db, "BEGIN IMMEDIATE");
    CHECK(pgcl_chain_begin(chain, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    exec(db, "INSERT INTO admin_events (event_id, created_at, actor, action, target, details) VALUES"
             " ('0190b6a2-8f3c-7b22-8a00-0000000000aa', '2026-01-01T00:00:00.000000Z', 'a', 'x.y', 't', '{}')");
    CHECK(pgcl_chain_record(chain, "admin_events", sqlite3_last_insert_rowid(db), g_err, sizeof g_err) == PGCL_OK,
          "%s", g_err);
    CHECK(pgcl_chain_seal(chain, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    exec(db, "COMMIT");
    int64_t head_seq = pgcl_chain_head_seq(chain);
    char head_hash[65];
    snprintf(head_hash, sizeof head_hash, "%s", pgcl_chain_head_hash(chain));
    pgcl_chain_destroy(chain);

    pgcl_sqlite_log *log = pgcl_sqlite_log_create(db, g_err, sizeof g_err);
    CHECK(commit_leaves(db, log, 0, 2) == 1, "the events follow the legacy head at leaf 0");
    check_state(db, 3);
    pgcl_audit_log_info info;
    bool found = false;
    pgcl_sqlite_log_state(db, &info, &found, g_err, sizeof g_err);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    CHECK(strcmp(info.writer_id, host[0] ? host : "pgcld") == 0, "the default writer id is the host name: %s",
          info.writer_id);
    struct {
        pgcl_record r;
        unsigned char bytes[512];
        size_t len;
    } got = {0};
    sqlite3_stmt *s = NULL;
    CHECK(sqlite3_prepare_v2(db, "SELECT record FROM log_leaves WHERE leaf_index = 0", -1, &s, NULL) == SQLITE_OK &&
              sqlite3_step(s) == SQLITE_ROW,
          "leaf 0");
    got.len = (size_t)sqlite3_column_bytes(s, 0);
    if (got.len <= sizeof got.bytes) memcpy(got.bytes, sqlite3_column_blob(s, 0), got.len);
    sqlite3_finalize(s);
    CHECK(pgcl_record_decode(got.bytes, got.len, &got.r, g_err, sizeof g_err) == PGCL_OK, "decode: %s", g_err);
    CHECK(got.r.kind == PGCL_RECORD_LEGACY_HEAD, "leaf 0 is a legacy head");
    char hex[65];
    pgcl_record_hex_format(got.r.legacy.head_hash, 32, hex);
    CHECK(got.r.legacy.head_seq == head_seq && strcmp(hex, head_hash) == 0, "it binds the chain head %lld",
          (long long)head_seq);
    CHECK(got.r.legacy.has_log_root, "and the chain's log tree root");
    pgcl_sqlite_log_destroy(log);
    sqlite3_close(db);
}

int main(void) {
    char dir[] = "/tmp/pgcl-sqlite-log-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/a.db", dir);
    test_transactions(path);
    snprintf(path, sizeof path, "%s/b.db", dir);
    test_legacy_head(path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_sqlite_log");
}
