/* The log tree's reads on a long chain (docs/audit.md, "The log tree"; bench/RESULTS.md): builds a
 * chain of N entries through the chain writer (one admin event per commit, encoding version 2,
 * synchronous=OFF: the chain's cost, not the disk's), then times
 *   - a proof's log part (root and inclusion path at the head) from the stored subtrees, and the
 *     naive read of every entry's hash it replaces;
 *   - a consistency proof between two random sizes;
 *   - the one-time backfill of all nodes (as for a chain older than migration 0009).
 * Usage: BUILD/bench/log_tree [--entries N] (default 100000) [--no-nodes] (the chain only, as before
 * migration 0009: the writer's cost without the nodes; no reads timed). The database is made under
 * /tmp and removed. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "chain.h"
#include "chain_proof.h"
#include "db.h"
#include "log_tree.h"
#include "merkle.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *err) {
    fprintf(stderr, "log_tree: %s: %s\n", what, err);
    exit(1);
}

/* N - 1 commits of one admin event each after the genesis entry; returns seconds taken. */
static double build_chain(sqlite3 *db, int64_t entries) {
    char err[512] = "";
    pgcl_chain *chain = pgcl_chain_create_encoding(db, 2, err, sizeof err);
    sqlite3_stmt *ins = NULL;
    if (!chain || sqlite3_prepare_v2(db,
                                     "INSERT INTO admin_events (event_id, created_at, actor, action, target, details)"
                                     " VALUES (printf('ev-%d', ?1), '2026-11-26T00:00:00.000000Z', 'bench',"
                                     " 'bench.event', 'log_tree', '{}')",
                                     -1, &ins, NULL) != SQLITE_OK)
        die("prepare", chain ? sqlite3_errmsg(db) : err);
    double t0 = now_s();
    for (int64_t i = 0; pgcl_chain_head_seq(chain) < entries; i++) {
        if (pgcl_db_exec(db, "BEGIN IMMEDIATE", err, sizeof err) != SQLITE_OK) die("begin", err);
        if (pgcl_chain_begin(chain, err, sizeof err) != PGCL_OK) die("chain begin", err);
        sqlite3_bind_int64(ins, 1, i);
        if (sqlite3_step(ins) != SQLITE_DONE) die("insert", sqlite3_errmsg(db));
        sqlite3_reset(ins);
        if (pgcl_chain_record(chain, "admin_events", sqlite3_last_insert_rowid(db), err, sizeof err) != PGCL_OK ||
            pgcl_chain_seal(chain, err, sizeof err) != PGCL_OK)
            die("chain", err);
        if (pgcl_db_exec(db, "COMMIT", err, sizeof err) != SQLITE_OK) die("commit", err);
    }
    double t = now_s() - t0;
    sqlite3_finalize(ins);
    pgcl_chain_destroy(chain);
    return t;
}

int main(int argc, char **argv) {
    int64_t entries = 100000;
    bool no_nodes = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc) entries = atoll(argv[++i]);
        if (strcmp(argv[i], "--no-nodes") == 0) no_nodes = true;
    }
    if (entries < 2) die("usage", "log_tree [--entries N >= 2]");
    char path[64], err[512] = "";
    snprintf(path, sizeof path, "/tmp/pgcl-log-tree-bench-%d.db", (int)getpid());
    pgcl_audit_options o = {.path = path, .max_pending_rows = 1000};
    pgcl_audit *a = NULL;
    if (pgcl_audit_open(&o, &a, err, sizeof err) != PGCL_OK) die("open", err);
    pgcl_audit_close(a);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die("open", path);
    pgcl_db_exec(db, "PRAGMA synchronous=OFF", NULL, 0);
    if (no_nodes) pgcl_db_exec(db, "DROP TABLE audit_log_nodes", NULL, 0);
    double build = build_chain(db, entries);
    printf("chain of %lld entries built in %.2f s (%.1f us per commit, %s)\n", (long long)entries, build,
           build * 1e6 / (double)entries, no_nodes ? "without log tree nodes" : "log tree nodes included");
    if (no_nodes) entries = 0; /* nothing more to time */

    sqlite3 *reader = entries ? pgcl_db_open_reader(path, err, sizeof err) : NULL;
    if (!entries) goto done;
    if (!reader) die("reader", err);
    pgcl_db_exec(reader, "BEGIN", NULL, 0);
    pgcl_merkle_hash root, path_hashes[PGCL_MERKLE_MAX_PATH], proof[PGCL_MERKLE_MAX_PATH], r1, r2;
    int len = 0;
    enum { FAST_READS = 2000, NAIVE_READS = 5 };
    srand(7);
    double t0 = now_s();
    for (int i = 0; i < FAST_READS; i++)
        if (pgcl_log_tree_inclusion(reader, entries, rand() % entries, &root, path_hashes, &len, err, sizeof err) !=
            PGCL_OK)
            die("inclusion", err);
    double fast = (now_s() - t0) / FAST_READS;
    t0 = now_s();
    for (int i = 0; i < NAIVE_READS; i++) {
        pgcl_merkle_hash *leaves;
        if (pgcl_chain_log_leaves(reader, entries, &leaves, err, sizeof err) != PGCL_OK) die("leaves", err);
        pgcl_merkle_hash naive_root = pgcl_merkle_root(leaves, (uint64_t)entries);
        len = pgcl_merkle_inclusion_path(leaves, (uint64_t)entries, (uint64_t)(rand() % entries), path_hashes);
        free(leaves);
        (void)naive_root;
    }
    double naive = (now_s() - t0) / NAIVE_READS;
    printf("log part of a proof (root + inclusion path at %lld): stored subtrees %.1f us, every entry's hash %.1f ms"
           " (%.0fx)\n",
           (long long)entries, fast * 1e6, naive * 1e3, naive / fast);
    t0 = now_s();
    for (int i = 0; i < FAST_READS; i++) {
        int64_t m = 1 + rand() % entries, n = m + rand() % (entries - m + 1);
        if (pgcl_log_tree_consistency(reader, m, n, &r1, &r2, proof, &len, err, sizeof err) != PGCL_OK)
            die("consistency", err);
    }
    printf("consistency proof between random sizes: %.1f us\n", (now_s() - t0) / FAST_READS * 1e6);
    pgcl_db_exec(reader, "COMMIT", NULL, 0);
    sqlite3_close(reader);

    int64_t added = 0;
    if (pgcl_db_exec(db, "DROP TRIGGER audit_log_nodes_append_only_d; DELETE FROM audit_log_nodes; BEGIN IMMEDIATE",
                     err, sizeof err) != SQLITE_OK)
        die("delete nodes", err);
    t0 = now_s();
    if (pgcl_log_tree_backfill(db, &added, err, sizeof err) != PGCL_OK) die("backfill", err);
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    printf("backfill of %lld nodes: %.2f s\n", (long long)added, now_s() - t0);
done:
    sqlite3_close(db);
    char wal[80];
    unlink(path);
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", path);
    unlink(wal);
    return 0;
}
