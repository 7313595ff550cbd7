/* The log tree's stored subtrees (core/audit/log_tree.c, migration 0009; docs/audit.md, "The log
 * tree"), against the naive oracle that hashes every entry (merkle.c's builders):
 *  - the subtree algorithms of merkle.c from an in-memory source: root, every inclusion path and
 *    every consistency proof for every n up to 70, random ones for random n up to 5000, and the
 *    number of nodes they read (O(log n));
 *  - a real chain in a SQLite file, written by the chain writer (version-1 entries, then version 2):
 *    after each commit up to 70 entries, the stored nodes are exactly the complete subtrees, and the
 *    O(log n) reads give the oracle's root, path and proof at every size, index and pair of sizes;
 *    then random sizes up to ~1100 entries;
 *  - the backfill at store open refills deleted nodes (all of them, or the upper levels) to the
 *    same bytes, and fills a database upgraded from before migration 0009; reads without a node
 *    say which (the chain_proof.h reads then fall back);
 *  - `verify` names a changed node, a missing node and a node beyond the chain's end by level and
 *    index, and passes the intact database. */
#include <stdint.h>
#include <stdlib.h>

#include "chain_fixture.h"
#include "chain_proof.h"
#include "db.h"
#include "keys.h"
#include "log_tree.h"
#include "merkle.h"
#include "merkle_test_util.h"

#define DROP_NODE_TRIGGERS                                                                                             \
    "DROP TRIGGER IF EXISTS audit_log_nodes_append_only_u; DROP TRIGGER IF EXISTS audit_log_nodes_append_only_d;"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) { return xorshift64(&g_rng); }

/* ---- the algorithms, from an in-memory source ---- */

typedef struct memory_source {
    const pgcl_merkle_hash *leaves;
    uint64_t n;
    int reads; /* nodes read so far */
} memory_source;

static bool memory_node(void *ctx, int level, uint64_t index, pgcl_merkle_hash *out) {
    memory_source *m = ctx;
    uint64_t span = (uint64_t)1 << level, lo = index * span;
    CHECK(lo + span <= m->n, "node (%d, %llu) within %llu leaves", level, (unsigned long long)index,
          (unsigned long long)m->n);
    if (lo + span > m->n) return false;
    m->reads++;
    *out = pgcl_merkle_root(m->leaves + lo, span); /* the oracle's hash of that subtree */
    return true;
}

/* Everything about the tree of n leaves against the builders; all indices and sizes when all. */
static void check_memory_tree(const pgcl_merkle_hash *leaves, uint64_t n, bool all) {
    memory_source src = {.leaves = leaves, .n = n};
    pgcl_merkle_hash root, want = pgcl_merkle_root(leaves, n);
    CHECK(pgcl_merkle_root_from_subtrees(memory_node, &src, n, &root) && same_hash(&root, &want), "root of %llu",
          (unsigned long long)n);
    int log2n = 64 - __builtin_clzll(n);
    CHECK(src.reads <= log2n, "root of %llu read %d nodes", (unsigned long long)n, src.reads);
    int tries = all ? (int)n : 8;
    for (int t = 0; t < tries; t++) {
        uint64_t i = all ? (uint64_t)t : next_random() % n;
        pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], want_path[PGCL_MERKLE_MAX_PATH];
        src.reads = 0;
        int len = pgcl_merkle_inclusion_path_from_subtrees(memory_node, &src, n, i, path);
        int want_len = pgcl_merkle_inclusion_path(leaves, n, i, want_path);
        CHECK(same_path(path, len, want_path, want_len), "inclusion path of %llu in %llu", (unsigned long long)i,
              (unsigned long long)n);
        CHECK(src.reads <= 2 * log2n + 1, "path of %llu in %llu read %d nodes", (unsigned long long)i,
              (unsigned long long)n, src.reads);
        CHECK(pgcl_merkle_verify_inclusion(&leaves[i], i, n, path, len, &want), "path verifies");
        uint64_t m = all ? (uint64_t)t + 1 : 1 + next_random() % n;
        src.reads = 0;
        len = pgcl_merkle_consistency_proof_from_subtrees(memory_node, &src, m, n, path);
        want_len = pgcl_merkle_consistency_proof(leaves, m, n, want_path);
        CHECK(same_path(path, len, want_path, want_len), "consistency proof %llu -> %llu", (unsigned long long)m,
              (unsigned long long)n);
        CHECK(src.reads <= 2 * log2n + 2, "proof %llu -> %llu read %d nodes", (unsigned long long)m,
              (unsigned long long)n, src.reads);
        pgcl_merkle_hash old_root = pgcl_merkle_root(leaves, m);
        CHECK(pgcl_merkle_verify_consistency(m, n, &old_root, &want, path, len), "proof %llu -> %llu verifies",
              (unsigned long long)m, (unsigned long long)n);
    }
}

static void test_algorithms(void) {
    enum { MAX_N = 5000 };
    pgcl_merkle_hash *leaves = malloc(MAX_N * sizeof *leaves);
    for (int i = 0; i < MAX_N; i++) {
        uint64_t r[4] = {next_random(), next_random(), next_random(), next_random()};
        leaves[i] = pgcl_merkle_leaf_hash(r, sizeof r);
    }
    for (uint64_t n = 1; n <= 70; n++)
        check_memory_tree(leaves, n, true);
    for (int t = 0; t < 40; t++)
        check_memory_tree(leaves, 71 + next_random() % (MAX_N - 71), false);
    check_memory_tree(leaves, 4096, false);
    free(leaves);
}

/* ---- a real chain ---- */

/* The oracle's leaves for entries 1..size, read on a fresh reader. */
static pgcl_merkle_hash *oracle_leaves(const char *path, int64_t size) {
    char err[512] = "";
    sqlite3 *db = pgcl_db_open_reader(path, err, sizeof err);
    pgcl_merkle_hash *leaves = NULL;
    CHECK(db && pgcl_chain_log_leaves(db, size, &leaves, err, sizeof err) == PGCL_OK, "leaves: %s", err);
    sqlite3_close(db);
    return leaves;
}

/* The stored nodes are exactly the complete subtrees of the n entries, with the oracle's hashes. */
static void check_stored_nodes(const char *path, const pgcl_merkle_hash *leaves, int64_t n) {
    CHECK(query_int(path, "SELECT count(*) FROM audit_log_nodes") == n - __builtin_popcountll((unsigned long long)n),
          "%lld entries: n - popcount(n) nodes, not %lld", (long long)n,
          (long long)query_int(path, "SELECT count(*) FROM audit_log_nodes"));
    sqlite3 *db;
    sqlite3_stmt *s;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
              sqlite3_prepare_v2(db, "SELECT level, idx, hash FROM audit_log_nodes", -1, &s, NULL) == SQLITE_OK,
          "read nodes");
    while (sqlite3_step(s) == SQLITE_ROW) {
        int level = sqlite3_column_int(s, 0);
        int64_t idx = sqlite3_column_int64(s, 1), span = (int64_t)1 << level;
        pgcl_merkle_hash want = pgcl_merkle_root(leaves + idx * span, (uint64_t)span);
        CHECK((idx + 1) * span <= n && sqlite3_column_bytes(s, 2) == 32 &&
                  memcmp(sqlite3_column_blob(s, 2), want.b, 32) == 0,
              "node (%d, %lld) of %lld entries", level, (long long)idx, (long long)n);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* The O(log n) reads at size (every index and first size when all) against the oracle. */
static void check_reads(sqlite3 *db, const pgcl_merkle_hash *leaves, int64_t size, bool all) {
    char err[512] = "";
    pgcl_merkle_hash root, want = pgcl_merkle_root(leaves, (uint64_t)size);
    CHECK(pgcl_log_tree_root(db, size, &root, err, sizeof err) == PGCL_OK && same_hash(&root, &want),
          "root at %lld: %s", (long long)size, err);
    int tries = all ? (int)size : 6;
    for (int t = 0; t < tries; t++) {
        int64_t i = all ? t : (int64_t)(next_random() % (uint64_t)size);
        pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], want_path[PGCL_MERKLE_MAX_PATH];
        int len = -1;
        int want_len = pgcl_merkle_inclusion_path(leaves, (uint64_t)size, (uint64_t)i, want_path);
        CHECK(pgcl_log_tree_inclusion(db, size, i, &root, path, &len, err, sizeof err) == PGCL_OK &&
                  same_hash(&root, &want) && same_path(path, len, want_path, want_len),
              "inclusion of %lld at %lld: %s", (long long)i, (long long)size, err);
        int64_t m = all ? t + 1 : 1 + (int64_t)(next_random() % (uint64_t)size);
        pgcl_merkle_hash first_root, second_root, want_first = pgcl_merkle_root(leaves, (uint64_t)m);
        want_len = pgcl_merkle_consistency_proof(leaves, (uint64_t)m, (uint64_t)size, want_path);
        CHECK(pgcl_log_tree_consistency(db, m, size, &first_root, &second_root, path, &len, err, sizeof err) ==
                      PGCL_OK &&
                  same_hash(&first_root, &want_first) && same_hash(&second_root, &want) &&
                  same_path(path, len, want_path, want_len),
              "consistency %lld -> %lld: %s", (long long)m, (long long)size, err);
    }
}

/* One transaction of k decisions (k >= 1), sealed. */
static void commit_decisions(writer *w, int k) {
    char err[512] = "";
    txn_begin(w);
    for (int i = 0; i < k; i++)
        add_decision(w, true);
    CHECK(pgcl_chain_seal(w->chain, err, sizeof err) == PGCL_OK, "seal: %s", err);
    txn_end(w, true);
}

static void test_real_chain(const char *path) {
    writer w;
    char err[512] = "";
    if (writer_open(&w, path, true) != 0) return;
    /* genesis and version-1 entries (one per event) up to 20, then version 2 (one per commit) */
    while (pgcl_chain_head_seq(w.chain) < 20)
        commit_decisions(&w, 1 + (int)(next_random() % 3));
    pgcl_chain_destroy(w.chain);
    w.chain = pgcl_chain_create_encoding(w.db, 2, err, sizeof err);
    CHECK(w.chain != NULL, "chain v2: %s", err);
    sqlite3 *reader = pgcl_db_open_reader(path, err, sizeof err);
    int64_t head = 0;
    for (;;) {
        head = query_int(path, "SELECT max(seq) FROM audit_chain");
        pgcl_merkle_hash *leaves = oracle_leaves(path, head);
        if (!leaves) break;
        check_stored_nodes(path, leaves, head);
        sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL);
        for (int64_t size = 1; size <= head; size++) /* every older size too: nodes never change */
            check_reads(reader, leaves, size, head <= 70 || size == head);
        sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
        free(leaves);
        if (head >= 70) break;
        commit_decisions(&w, 1 + (int)(next_random() % 4));
    }
    CHECK(head >= 70, "grew to 70 entries: %lld", (long long)head);
    while (pgcl_chain_head_seq(w.chain) < 1100)
        commit_decisions(&w, 1);
    head = query_int(path, "SELECT max(seq) FROM audit_chain");
    pgcl_merkle_hash *leaves = oracle_leaves(path, head);
    if (leaves) {
        check_stored_nodes(path, leaves, head);
        sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL);
        for (int t = 0; t < 60; t++)
            check_reads(reader, leaves, 71 + (int64_t)(next_random() % (uint64_t)(head - 70)), false);
        check_reads(reader, leaves, 1024, false);
        check_reads(reader, leaves, head, false);
        sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
    }
    free(leaves);
    sqlite3_close(reader);
    writer_close(&w);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact, "the chain with its nodes verifies: %s", rep.reason);
}

/* ---- backfill, fallbacks and verify ---- */

/* The stored nodes over entries 1..upto, as text. */
static char *node_dump_upto(const char *path, int64_t upto) {
    sqlite3 *db;
    sqlite3_stmt *s;
    char *out = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT group_concat(level || ':' || idx || ':' || hex(hash), ',') FROM"
                           " (SELECT * FROM audit_log_nodes WHERE ((idx + 1) << level) <= ?1 ORDER BY level, idx)",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, upto);
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
            out = strdup((const char *)sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return out ? out : strdup("");
}

static char *node_dump(const char *path) {
    return node_dump_upto(path, INT64_MAX);
}

static void reopen_store(const char *path) {
    char err[512] = "";
    pgcl_audit_options o = {.path = path, .max_pending_rows = 1000};
    pgcl_audit *a = NULL;
    CHECK(pgcl_audit_open(&o, &a, err, sizeof err) == PGCL_OK, "reopen %s: %s", path, err);
    pgcl_audit_close(a);
}

static void test_backfill_and_fallback(const char *base) {
    char *want = node_dump(base);
    int64_t head = query_int(base, "SELECT max(seq) FROM audit_chain");
    CHECK(strlen(want) > 1000, "the base has nodes");
    const char *cases[][2] = {{"nonodes.db", "DELETE FROM audit_log_nodes"},
                              {"uppernodes.db", "DELETE FROM audit_log_nodes WHERE level >= 4"},
                              {"onenode.db", "DELETE FROM audit_log_nodes WHERE level = 3 AND idx = 5"}};
    for (int c = 0; c < 3; c++) {
        const char *p = tampered(base, cases[c][0], DROP_NODE_TRIGGERS);
        char err[512] = "";
        CHECK(exec_on(p, cases[c][1], err, sizeof err) == SQLITE_OK, "%s: %s", cases[c][0], err);
        if (c == 2) {
            /* a missing node: verify names it; the strict reads say which; the chain_proof.h reads
             * fall back to the entries and give the same answer */
            pgcl_chain_report rep = verify(p, NULL, 0);
            CHECK_BAD(rep, 48, "level 3, index 5 (entries 41..48) is missing");
            sqlite3 *db = pgcl_db_open_reader(p, err, sizeof err);
            pgcl_merkle_hash root, path[PGCL_MERKLE_MAX_PATH], want_path[PGCL_MERKLE_MAX_PATH];
            int len = 0;
            /* leaf 32 of 48: its path's second sibling is leaves 40..47, the node (3, 5) */
            CHECK(pgcl_log_tree_inclusion(db, 48, 32, &root, path, &len, err, sizeof err) == PGCL_ERR_NOT_FOUND &&
                      strstr(err, "level 3, index 5 is not stored"),
                  "strict read names the missing node: %s", err);
            pgcl_merkle_hash *leaves = oracle_leaves(base, head);
            pgcl_merkle_hash oracle = pgcl_merkle_root(leaves, 48);
            int want_len = pgcl_merkle_inclusion_path(leaves, 48, 32, want_path);
            CHECK(pgcl_chain_log_tree(db, 48, 32, &root, path, &len, err, sizeof err) == PGCL_OK &&
                      same_hash(&root, &oracle) && same_path(path, len, want_path, want_len),
                  "the fallback gives the oracle's root and path: %s", err);
            free(leaves);
            sqlite3_close(db);
            /* the writer goes on over the gap (it skips the parents it cannot make) */
            writer w;
            if (writer_open(&w, p, true) == 0) {
                commit_decisions(&w, 2);
                writer_close(&w);
            }
        }
        reopen_store(p); /* the backfill */
        char *got = node_dump(p);
        pgcl_chain_report rep = verify(p, NULL, 0);
        if (c < 2) {
            CHECK(strcmp(got, want) == 0, "%s: the backfill restores the same nodes", cases[c][0]);
            CHECK(rep.intact, "%s after the backfill verifies: %s", cases[c][0], rep.reason);
        } else {
            /* One node deleted under stored ones breaks the writer's invariant: only tampering does
             * that, and the backfill's O(log n) check does not look below the stored roots. verify
             * goes on naming it. */
            CHECK_BAD(rep, 48, "level 3, index 5 (entries 41..48) is missing");
        }
        free(got);
    }
    free(want);
}

/* A database as an older pgcld left it: schema up to 0008 (no audit_log_nodes, audit_cuts,
 * 0011's columns or 0012's log). The keys CLI's chain writer extends it without nodes; opening the store applies
 * 0009 to 0011 and fills every node in the same transaction: those of the base, to the same bytes,
 * and the new entry's. */
static void test_upgrade_from_before_0009(const char *base) {
    char *want = node_dump(base);
    const char *p =
        tampered(base, "before0009.db",
                 "DROP TABLE audit_log_nodes; DROP TABLE audit_cuts; DROP INDEX decisions_trace_seq;"
                 " ALTER TABLE decisions DROP COLUMN trace_id; ALTER TABLE decisions DROP COLUMN content_date;"
                 " ALTER TABLE decisions DROP COLUMN territorial_scope;"
                 " ALTER TABLE decisions DROP COLUMN content_language;"
                 " DROP TABLE log_checkpoints; DROP TABLE log_tile_roots; DROP TABLE log_leaves;"
                 " DROP TABLE log_writers; ALTER TABLE decisions DROP COLUMN leaf_index;"
                 " ALTER TABLE contests DROP COLUMN leaf_index; ALTER TABLE resolutions DROP COLUMN leaf_index;"
                 " ALTER TABLE admin_events DROP COLUMN leaf_index;"
                 " DELETE FROM schema_migrations WHERE version >= 9");
    CHECK(query_int(p, "SELECT count(*) FROM sqlite_schema WHERE name = 'audit_log_nodes'") == 0, "no table");
    char key[128], key_id[32], err[512] = "";
    int64_t head = query_int(p, "SELECT max(seq) FROM audit_chain");
    CHECK(pgcl_keys_create(p, PGCL_ROLE_REVIEWER, "late", "test", key, key_id, err, sizeof err) == PGCL_OK,
          "the keys CLI extends a chain on a schema without audit_log_nodes: %s", err);
    CHECK(query_int(p, "SELECT max(seq) FROM audit_chain") == head + 1, "one more entry");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK(rep.intact, "a schema without nodes verifies: %s", rep.reason);
    reopen_store(p);
    char *got = node_dump_upto(p, head);
    CHECK(strcmp(got, want) == 0, "the upgrade stores the same nodes");
    int64_t n = head + 1;
    CHECK(query_int(p, "SELECT count(*) FROM audit_log_nodes") == n - __builtin_popcountll((unsigned long long)n),
          "and the new entry's");
    rep = verify(p, NULL, 0);
    CHECK(rep.intact, "upgraded: %s", rep.reason);
    free(got);
    free(want);
}

static void test_verify_names_nodes(const char *base) {
    int64_t head = query_int(base, "SELECT max(seq) FROM audit_chain");
    pgcl_chain_report rep = verify(base, NULL, 0);
    CHECK(rep.intact, "base intact: %s", rep.reason);
    const char *p = tampered(base, "changednode.db",
                             DROP_NODE_TRIGGERS "UPDATE audit_log_nodes SET hash = zeroblob(32) WHERE level = 2 AND"
                                                " idx = 3");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 16, "level 2, index 3 (entries 13..16) does not match");
    p = tampered(base, "flippednode.db",
                 DROP_NODE_TRIGGERS "UPDATE audit_log_nodes SET hash = randomblob(32) WHERE level = 6 AND idx = 0");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 64, "level 6, index 0 (entries 1..64) does not match");
    char sql[256];
    snprintf(sql, sizeof sql, DROP_NODE_TRIGGERS "INSERT INTO audit_log_nodes VALUES (1, %lld, zeroblob(32))",
             (long long)(head / 2 + 3));
    p = tampered(base, "beyondnode.db", sql);
    rep = verify(p, NULL, 0);
    snprintf(sql, sizeof sql, "level 1, index %lld covers entries beyond the chain's end", (long long)(head / 2 + 3));
    CHECK_BAD(rep, head + 1, sql);
}

int main(void) {
    if (!chain_fixture_setup()) return 1;
    test_algorithms();
    const char *path = tmp_path("log.db");
    test_real_chain(path);
    test_backfill_and_fallback(path);
    test_upgrade_from_before_0009(path);
    test_verify_names_nodes(path);
    chain_fixture_cleanup();
    return test_finish("test_log_tree");
}
