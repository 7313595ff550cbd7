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

#include "audit.h"
#include "audit_log.h"
#include "chain.h"
#include "clock.h"
#include "db.h"
#include "ids.h"
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
    CHECK(info.size == want_size, "size %llu, want %llu", (unsigned long long)info.size, (unsigned long long)want_size);
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
    CHECK(pgcl_chain_record(chain, "admin_events", sqlite3_last_insert_rowid(db), g_err, sizeof g_err) == PGCL_OK, "%s",
          g_err);
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

/* ---- the store's logs (audit_log.h) through a real SQLite store ---- */

typedef struct read_probe {
    uint64_t size;
    pgcl_merkle_hash root, tile_root;
    size_t tile_len;
} read_probe;

/* log_read's callback: the state, and level 0's partial tile built from the rows. */
static pgcl_status probe_log(void *ctx, const pgcl_log_ops *ops, void *ops_ctx, const pgcl_audit_log_info *log,
                             char *err, int cap) {
    read_probe *p = ctx;
    p->size = log->size;
    p->root = log->root;
    pgcl_log_source src;
    pgcl_log_source_init(&src, ops, ops_ctx, log->size);
    pgcl_tile_id id = {.level = 0, .index = 0, .width = (int)log->size};
    const unsigned char *data = NULL;
    pgcl_status st = pgcl_log_tile_read(&src, &id, &data, &p->tile_len, err, cap);
    if (st == PGCL_OK) p->tile_root = pgcl_merkle_root((const pgcl_merkle_hash *)data, log->size);
    pgcl_log_source_free(&src);
    return st;
}

static void test_store_logs(const char *path) {
    unlink(path);
    pgcl_audit_options o = {.path = path, .writer_id = "store-writer", .max_pending_rows = 1000};
    pgcl_audit *a = NULL;
    CHECK(pgcl_audit_open(&o, &a, g_err, sizeof g_err) == PGCL_OK, "open: %s", g_err);
    if (!a) return;
    CHECK(strcmp(pgcl_audit_writer_id(a), "store-writer") == 0, "writer id: %s", pgcl_audit_writer_id(a));
    char ids[3][PGCL_UUID_LEN + 1];
    float vec[4] = {0.5f, -1, 2, 0};
    pgcl_decision_row rows[3];
    for (int i = 0; i < 3; i++) {
        pgcl_uuid7(ids[i]);
        rows[i] = (pgcl_decision_row){
            .decision_id = ids[i],
            .request_id = "req",
            .item_id = "item",
            .model_name = "m",
            .model_version = "1",
            .model_sha256 = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f",
            .label = "toxic",
            .label_index = 1,
            .probabilities_json = "{\"non_toxic\":0.25,\"toxic\":0.75}",
            .has_toxicity = true,
            .toxicity = 0.75,
            .decision = "review",
            .policy_json = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.9,\"t_review\":0.5}",
            .has_thresholds = true,
            .t_review = 0.5,
            .t_block = 0.9,
            .vector = vec,
            .d = 4,
            .input_sha256 = "abababababababababababababababababababababababababababababababab",
            .latency_us = 7};
    }
    CHECK(pgcl_audit_append(a, rows, 3, g_err, sizeof g_err) == PGCL_OK, "append: %s", g_err);
    pgcl_admin_event ev = {.actor = "unit", .action = "model.activate", .target = "m/1", .details_json = "{}"};
    CHECK(pgcl_audit_record_event(a, &ev, g_err, sizeof g_err) == PGCL_OK, "event: %s", g_err);

    pgcl_audit_log_info logs[2];
    int n = 0;
    CHECK(pgcl_audit_logs(a, logs, 2, &n, g_err, sizeof g_err) == PGCL_OK && n == 1, "logs: %d %s", n, g_err);
    CHECK(n == 1 && strcmp(logs[0].writer_id, "store-writer") == 0 && logs[0].size == 5,
          "one log: the policy, 3 decisions, the event (%llu)", (unsigned long long)logs[0].size);
    read_probe probe = {0};
    CHECK(pgcl_audit_log_read(a, "store-writer", probe_log, &probe, g_err, sizeof g_err) == PGCL_OK, "read: %s", g_err);
    CHECK(probe.size == 5 && probe.tile_len == 5 * PGCL_MERKLE_HASH_BYTES, "the partial tile 0/0.p/5");
    CHECK(memcmp(probe.root.b, probe.tile_root.b, 32) == 0, "the tile's hashes give the log's root");
    CHECK(pgcl_audit_log_read(a, "another", probe_log, &probe, g_err, sizeof g_err) == PGCL_ERR_NOT_FOUND,
          "no log of another writer");

    char writer[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t leaf = 99;
    CHECK(pgcl_audit_log_leaf_of(a, "decision", ids[0], writer, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 1 &&
              strcmp(writer, "store-writer") == 0,
          "decision 0 is leaf 1 (after its policy): %llu %s", (unsigned long long)leaf, g_err);
    CHECK(pgcl_audit_log_leaf_of(a, "decision", ids[2], writer, &leaf, g_err, sizeof g_err) == PGCL_OK && leaf == 3,
          "decision 2 is leaf 3");
    CHECK(pgcl_audit_log_leaf_of(a, "contest", ids[2], writer, &leaf, g_err, sizeof g_err) == PGCL_ERR_NOT_FOUND,
          "no contest of that id");
    CHECK(pgcl_audit_log_leaf_of(a, "nonsense", ids[2], writer, &leaf, g_err, sizeof g_err) == PGCL_ERR_INVALID,
          "an unknown kind");

    char *note = NULL;
    uint64_t size = 0;
    CHECK(pgcl_audit_log_checkpoint(a, "store-writer", &note, &size, g_err, sizeof g_err) == PGCL_ERR_NOT_FOUND,
          "no checkpoint yet");
    const char *cp4 = "store-writer\n4\nAAAA\n\n\xe2\x80\x94 k sig4\n";
    const char *cp5 = "store-writer\n5\nBBBB\n\n\xe2\x80\x94 k sig5\n";
    CHECK(pgcl_audit_log_put_checkpoint(a, 4, cp4, g_err, sizeof g_err) == PGCL_OK, "put 4: %s", g_err);
    CHECK(pgcl_audit_log_put_checkpoint(a, 4, cp4, g_err, sizeof g_err) == PGCL_OK, "idempotent");
    CHECK(pgcl_audit_log_put_checkpoint(a, 4, cp5, g_err, sizeof g_err) == PGCL_ERR_MISMATCH, "another note at 4");
    CHECK(pgcl_audit_log_put_checkpoint(a, 6, cp5, g_err, sizeof g_err) == PGCL_ERR_INVALID, "beyond the log");
    CHECK(pgcl_audit_log_put_checkpoint(a, 5, cp5, g_err, sizeof g_err) == PGCL_OK, "put 5: %s", g_err);
    const char *w1 = "\xe2\x80\x94 w1 cosig1\n", *w2 = "\xe2\x80\x94 w2 cosig2\n";
    CHECK(pgcl_audit_log_add_cosignatures(a, 5, w1, g_err, sizeof g_err) == PGCL_OK, "cosig: %s", g_err);
    CHECK(pgcl_audit_log_add_cosignatures(a, 5, w1, g_err, sizeof g_err) == PGCL_OK, "cosig again");
    char both[128];
    snprintf(both, sizeof both, "%s%s", w1, w2);
    CHECK(pgcl_audit_log_add_cosignatures(a, 5, both, g_err, sizeof g_err) == PGCL_OK, "cosigs");
    CHECK(pgcl_audit_log_add_cosignatures(a, 3, w1, g_err, sizeof g_err) == PGCL_ERR_NOT_FOUND, "no checkpoint 3");
    CHECK(pgcl_audit_log_checkpoint(a, "store-writer", &note, &size, g_err, sizeof g_err) == PGCL_OK && size == 5,
          "latest: %s", g_err);
    char want[256];
    snprintf(want, sizeof want, "%s%s%s", cp5, w1, w2);
    CHECK(note && strcmp(note, want) == 0, "the note with each cosignature once: %s", note ? note : "NULL");
    free(note);
    pgcl_audit_close(a);
}

int main(void) {
    char dir[] = "/tmp/pgcl-sqlite-log-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/a.db", dir);
    test_transactions(path);
    snprintf(path, sizeof path, "%s/b.db", dir);
    test_legacy_head(path);
    snprintf(path, sizeof path, "%s/c.db", dir);
    test_store_logs(path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_sqlite_log");
}
