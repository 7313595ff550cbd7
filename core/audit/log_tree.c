/* The log tree's stored subtrees (see log_tree.h): the writer's append, the one-time backfill, and
 * the O(log n) reads, all through one node source that reads level 0 from audit_chain.hash and
 * levels >= 1 from audit_log_nodes. */
#include "log_tree.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

static const char ENTRY_HASH_SQL[] = "SELECT hash FROM audit_chain WHERE seq = ?1";
static const char NODE_SQL[] = "SELECT hash FROM audit_log_nodes WHERE level = ?1 AND idx = ?2";
static const char INSERT_NODE_SQL[] = "INSERT INTO audit_log_nodes (level, idx, hash) VALUES (?1, ?2, ?3)";
static const char BACKFILL_INSERT_SQL[] =
    "INSERT OR IGNORE INTO audit_log_nodes (level, idx, hash) VALUES (?1, ?2, ?3)";
static const char ALL_ENTRIES_SQL[] = "SELECT seq, hash FROM audit_chain ORDER BY seq";
static const char HEAD_SEQ_SQL[] = "SELECT coalesce(max(seq), 0) FROM audit_chain";
static const char HAS_TABLE_SQL[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_log_nodes'";

/* ---- the node source ---- */

/* Where nodes come from: entry hashes (level 0) and stored nodes. get_node's failure is kept here
 * for the caller's message. */
typedef struct node_source {
    sqlite3 *db;
    sqlite3_stmt *entry_hash; /* ENTRY_HASH_SQL */
    sqlite3_stmt *node;       /* NODE_SQL */
    pgcl_status st;           /* of the last failed get_node */
    int failed_level;
    uint64_t failed_index;
} node_source;

static int source_prepare(node_source *src, sqlite3 *db, unsigned flags) {
    src->db = db;
    int rc = sqlite3_prepare_v3(db, ENTRY_HASH_SQL, -1, flags, &src->entry_hash, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(db, NODE_SQL, -1, flags, &src->node, NULL);
    return rc;
}

static void source_finalize(node_source *src) {
    sqlite3_finalize(src->entry_hash);
    sqlite3_finalize(src->node);
    src->entry_hash = src->node = NULL;
}

/* pgcl_merkle_subtree_fn over the database: the leaf hash of entry index + 1, or a stored node. */
static bool get_node(void *ctx, int level, uint64_t index, pgcl_merkle_hash *out) {
    node_source *src = ctx;
    sqlite3_stmt *s = level == 0 ? src->entry_hash : src->node;
    if (level == 0) {
        sqlite3_bind_int64(s, 1, (int64_t)index + 1);
    } else {
        sqlite3_bind_int(s, 1, level);
        sqlite3_bind_int64(s, 2, (int64_t)index);
    }
    int rc = sqlite3_step(s);
    bool ok = false;
    if (rc == SQLITE_ROW && level == 0) {
        pgcl_merkle_hash entry;
        ok = pgcl_merkle_from_hex((const char *)sqlite3_column_text(s, 0), &entry);
        if (ok) *out = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
        src->st = PGCL_ERR_FORMAT;
    } else if (rc == SQLITE_ROW) {
        ok = sqlite3_column_type(s, 0) == SQLITE_BLOB && sqlite3_column_bytes(s, 0) == PGCL_MERKLE_HASH_BYTES;
        if (ok) memcpy(out->b, sqlite3_column_blob(s, 0), PGCL_MERKLE_HASH_BYTES);
        src->st = PGCL_ERR_FORMAT;
    } else {
        src->st = rc == SQLITE_DONE ? PGCL_ERR_NOT_FOUND : PGCL_ERR_DB;
    }
    sqlite3_reset(s);
    if (!ok) {
        src->failed_level = level;
        src->failed_index = index;
    }
    return ok;
}

/* The message of a failed get_node. */
static pgcl_status source_error(const node_source *src, char *err, int cap) {
    if (src->st == PGCL_ERR_DB)
        pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(src->db));
    else if (src->failed_level == 0)
        pgcl_errorf(err, cap, "audit log tree: entry %llu is %s", (unsigned long long)src->failed_index + 1,
                    src->st == PGCL_ERR_NOT_FOUND ? "missing" : "malformed");
    else
        pgcl_errorf(err, cap, "audit log tree: the node at level %d, index %llu is %s", src->failed_level,
                    (unsigned long long)src->failed_index, src->st == PGCL_ERR_NOT_FOUND ? "not stored" : "malformed");
    return src->st;
}

/* ---- the writer ---- */

struct pgcl_log_tree {
    bool enabled; /* the schema has audit_log_nodes */
    node_source src;
    sqlite3_stmt *insert; /* INSERT_NODE_SQL */
};

/* Runs a query of one integer; -1 when it fails. */
static int64_t query_one(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

pgcl_log_tree *pgcl_log_tree_create(sqlite3 *db, char *err, int cap) {
    pgcl_log_tree *t = calloc(1, sizeof *t);
    if (!t) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    int64_t has_table = query_one(db, HAS_TABLE_SQL);
    if (has_table < 0) {
        pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(db));
        free(t);
        return NULL;
    }
    if (has_table == 0) return t; /* a schema older than 0009: nothing to maintain */
    const unsigned flags = SQLITE_PREPARE_PERSISTENT;
    if (source_prepare(&t->src, db, flags) != SQLITE_OK ||
        sqlite3_prepare_v3(db, INSERT_NODE_SQL, -1, flags, &t->insert, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(db));
        pgcl_log_tree_destroy(t);
        return NULL;
    }
    t->enabled = true;
    return t;
}

void pgcl_log_tree_destroy(pgcl_log_tree *t) {
    if (!t) return;
    source_finalize(&t->src);
    sqlite3_finalize(t->insert);
    free(t);
}

static int insert_node(sqlite3_stmt *s, int level, uint64_t index, const pgcl_merkle_hash *h) {
    sqlite3_bind_int(s, 1, level);
    sqlite3_bind_int64(s, 2, (int64_t)index);
    sqlite3_bind_blob(s, 3, h->b, PGCL_MERKLE_HASH_BYTES, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc;
}

pgcl_status pgcl_log_tree_append(pgcl_log_tree *t, int64_t seq, const char *hash_hex, char *err, int cap) {
    if (!t->enabled) return PGCL_OK;
    pgcl_merkle_hash entry;
    bool well_formed = pgcl_merkle_from_hex(hash_hex, &entry); /* the chain writer's own hash */
    PGCL_ASSERT(seq >= 1 && well_formed);
    /* Leaf k = seq - 1 completes one subtree per trailing 1 bit of k: while the node made so far is
     * a right child, its parent is node(left sibling, it). */
    pgcl_merkle_hash made = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b), sibling;
    uint64_t index = (uint64_t)seq - 1;
    for (int level = 0; index & 1; level++, index >>= 1) {
        if (!get_node(&t->src, level, index - 1, &sibling)) {
            if (t->src.st == PGCL_ERR_DB) return source_error(&t->src, err, cap);
            return PGCL_OK; /* a gap (see the invariant in log_tree.h): readers hash the entries */
        }
        made = pgcl_merkle_node_hash(&sibling, &made);
        if (insert_node(t->insert, level + 1, index >> 1, &made) != SQLITE_DONE) {
            pgcl_errorf(err, cap,
                        "audit log tree: storing the node at level %d, index %llu (entry %lld): %s (run `pgcld "
                        "audit verify`)",
                        level + 1, (unsigned long long)(index >> 1), (long long)seq, sqlite3_errmsg(t->src.db));
            return PGCL_ERR_DB;
        }
    }
    return PGCL_OK;
}

/* ---- the backfill ---- */

/* True when the roots of the perfect subtrees of n's binary decomposition (levels >= 1) are all
 * stored: by the invariant, every node below them is then stored too. */
static bool nodes_complete(node_source *src, uint64_t n) {
    uint64_t at = 0;
    pgcl_merkle_hash ignored;
    for (int level = 63; level >= 1; level--) {
        uint64_t span = (uint64_t)1 << level;
        if (!(n & span)) continue;
        if (!get_node(src, level, at >> level, &ignored)) return false;
        at += span;
    }
    return true;
}

/* One pass over the entries with a stack of perfect subtrees (pgcl_merkle_stack, as
 * pgcl_merkle_root builds them), storing each node of level >= 1 as it completes; those already
 * stored are kept. */
static pgcl_status fill_all(sqlite3 *db, int64_t *added, char *err, int cap) {
    sqlite3_stmt *scan = NULL, *insert = NULL;
    pgcl_merkle_stack tree;
    tree.top = 0;
    pgcl_status st = PGCL_ERR_DB;
    int rc;
    if (sqlite3_prepare_v2(db, ALL_ENTRIES_SQL, -1, &scan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, BACKFILL_INSERT_SQL, -1, &insert, NULL) != SQLITE_OK)
        goto fail;
    for (int64_t expected = 1; (rc = sqlite3_step(scan)) == SQLITE_ROW; expected++) {
        pgcl_merkle_hash entry;
        if (sqlite3_column_int64(scan, 0) != expected ||
            !pgcl_merkle_from_hex((const char *)sqlite3_column_text(scan, 1), &entry))
            break; /* a broken chain: nodes stop here; verify reports the entry */
        pgcl_merkle_hash leaf_hash = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
        pgcl_merkle_stack_push(&tree, &leaf_hash);
        uint64_t leaf = (uint64_t)expected - 1;
        int level;
        while (pgcl_merkle_stack_merge(&tree, &level)) {
            if (insert_node(insert, level, leaf >> level, &tree.node[tree.top - 1]) != SQLITE_DONE) goto fail;
            *added += sqlite3_changes(db);
        }
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto fail;
    st = PGCL_OK;
fail:
    if (st != PGCL_OK) pgcl_errorf(err, cap, "audit log tree: backfill: %s", sqlite3_errmsg(db));
    sqlite3_finalize(scan);
    sqlite3_finalize(insert);
    return st;
}

pgcl_status pgcl_log_tree_backfill(sqlite3 *db, int64_t *added, char *err, int cap) {
    *added = 0;
    int64_t n = query_one(db, HEAD_SEQ_SQL);
    if (n < 0) {
        pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    if (n < 2) return PGCL_OK; /* no node of level >= 1 yet */
    node_source src = {0};
    if (source_prepare(&src, db, 0) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(db));
        source_finalize(&src);
        return PGCL_ERR_DB;
    }
    bool complete = nodes_complete(&src, (uint64_t)n);
    pgcl_status st = complete || src.st != PGCL_ERR_DB ? PGCL_OK : source_error(&src, err, cap);
    source_finalize(&src);
    if (st != PGCL_OK || complete) return st;
    return fill_all(db, added, err, cap);
}

/* ---- the reads ---- */

/* Opens a node source for one read; the caller finalizes it. */
static pgcl_status open_source(sqlite3 *db, node_source *src, char *err, int cap) {
    memset(src, 0, sizeof *src);
    if (source_prepare(src, db, 0) == SQLITE_OK) return PGCL_OK;
    /* A schema older than 0009 has no nodes: the caller hashes the entries. */
    bool no_table = strstr(sqlite3_errmsg(db), "no such table") != NULL;
    pgcl_errorf(err, cap, "audit log tree: %s", sqlite3_errmsg(db));
    source_finalize(src);
    return no_table ? PGCL_ERR_NOT_FOUND : PGCL_ERR_DB;
}

pgcl_status pgcl_log_tree_root(sqlite3 *db, int64_t size, pgcl_merkle_hash *root, char *err, int cap) {
    PGCL_ASSERT(size >= 1);
    node_source src;
    pgcl_status st = open_source(db, &src, err, cap);
    if (st != PGCL_OK) return st;
    if (!pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)size, root)) st = source_error(&src, err, cap);
    source_finalize(&src);
    return st;
}

pgcl_status pgcl_log_tree_inclusion(sqlite3 *db, int64_t size, int64_t index, pgcl_merkle_hash *root,
                                    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap) {
    PGCL_ASSERT(size >= 1 && index >= 0 && index < size);
    node_source src;
    pgcl_status st = open_source(db, &src, err, cap);
    if (st != PGCL_OK) return st;
    *path_len = pgcl_merkle_inclusion_path_from_subtrees(get_node, &src, (uint64_t)size, (uint64_t)index, path);
    if (*path_len < 0 || !pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)size, root))
        st = source_error(&src, err, cap);
    source_finalize(&src);
    return st;
}

pgcl_status pgcl_log_tree_consistency(sqlite3 *db, int64_t first, int64_t second, pgcl_merkle_hash *first_root,
                                      pgcl_merkle_hash *second_root, pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH],
                                      int *proof_len, char *err, int cap) {
    PGCL_ASSERT(first >= 1 && first <= second);
    node_source src;
    pgcl_status st = open_source(db, &src, err, cap);
    if (st != PGCL_OK) return st;
    *proof_len = pgcl_merkle_consistency_proof_from_subtrees(get_node, &src, (uint64_t)first, (uint64_t)second, proof);
    if (*proof_len < 0 || !pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)first, first_root) ||
        !pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)second, second_root))
        st = source_error(&src, err, cap);
    source_finalize(&src);
    return st;
}
