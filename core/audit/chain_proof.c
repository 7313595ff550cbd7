/* Inclusion proofs (chain_proof.h): the run holding the row gives its commit entry and leaf index;
 * the path is built from the commit's stored leaves, and the leaf data from the row as it is now,
 * so a changed row yields a proof that no longer verifies. */
#include "chain_proof.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chain.h"
#include "chain_decoding.h"
#include "chain_encoding.h"
#include "db.h"
#include "log_tree.h"

#define DECISIONS_TABLE 0 /* pgcl_chain_tables[0] */

void pgcl_chain_proof_release(pgcl_chain_proof *p) {
    if (!p) return;
    free(p->leaf_data);
    p->leaf_data = NULL;
    pgcl_fleet_checkpoint_release(p->fleet);
    free(p->fleet);
    p->fleet = NULL;
}

static const char FIND_SQL[] =
    "SELECT d.seq, u.entry_seq, u.first_leaf + d.seq - u.first_row_seq, c.leaf_count, c.leaves, c.payload_sha256,"
    " c.prev_hash, c.hash FROM decisions AS d"
    " LEFT JOIN audit_chain_runs AS u ON " PGCL_CHAIN_RUN_OF_DECISION_SQL
    " LEFT JOIN audit_chain AS c ON c.seq = u.entry_seq WHERE d.decision_id = ?1";

typedef struct prove_walk {
    const char *decision_id;
    pgcl_chain_proof *out;
    bool found, chained;
    pgcl_status st;
} prove_walk;

static int bind_id(sqlite3_stmt *s, void *ctx) {
    return sqlite3_bind_text(s, 1, ((prove_walk *)ctx)->decision_id, -1, SQLITE_STATIC);
}

static int take_entry(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    prove_walk *w = ctx;
    pgcl_chain_proof *p = w->out;
    w->found = true;
    p->row_seq = sqlite3_column_int64(s, 0);
    if (sqlite3_column_type(s, 1) == SQLITE_NULL) return SQLITE_DONE; /* not in a commit entry */
    p->entry_seq = sqlite3_column_int64(s, 1);
    p->leaf_index = sqlite3_column_int64(s, 2);
    p->tree_size = sqlite3_column_int64(s, 3);
    const void *leaves = sqlite3_column_blob(s, 4);
    const char *root = (const char *)sqlite3_column_text(s, 5), *prev = (const char *)sqlite3_column_text(s, 6),
               *hash = (const char *)sqlite3_column_text(s, 7);
    if (p->tree_size < 1 || p->leaf_index < 0 || p->leaf_index >= p->tree_size || !leaves ||
        sqlite3_column_bytes(s, 4) != p->tree_size * PGCL_MERKLE_HASH_BYTES || !root ||
        !pgcl_merkle_from_hex(root, &p->root) || !prev || strlen(prev) != 64 || !hash || strlen(hash) != 64) {
        pgcl_errorf(err, cap, "audit chain entry %lld is malformed (run `pgcld audit verify`)",
                    (long long)p->entry_seq);
        w->st = PGCL_ERR_FORMAT;
        return SQLITE_DONE;
    }
    memcpy(p->prev_hash, prev, 65);
    memcpy(p->entry_hash, hash, 65);
    pgcl_merkle_hash *all = malloc((size_t)p->tree_size * sizeof *all);
    if (!all) return SQLITE_NOMEM;
    memcpy(all, leaves, (size_t)p->tree_size * sizeof *all);
    p->leaf_hash = all[p->leaf_index];
    p->path_len = pgcl_merkle_inclusion_path(all, (uint64_t)p->tree_size, (uint64_t)p->leaf_index, p->path);
    free(all);
    w->chained = true;
    return SQLITE_DONE;
}

static int take_checkpoint(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    pgcl_chain_proof *p = ctx;
    pgcl_checkpoint *cp = &p->checkpoint;
    const char *text[5] = {(const char *)sqlite3_column_text(s, 1), (const char *)sqlite3_column_text(s, 2),
                           (const char *)sqlite3_column_text(s, 3), (const char *)sqlite3_column_text(s, 4),
                           (const char *)sqlite3_column_text(s, 5)};
    for (int i = 0; i < 5; i++)
        if (!text[i]) return SQLITE_DONE;
    cp->version = 2;
    cp->head_seq = sqlite3_column_int64(s, 0);
    snprintf(cp->head_hash, sizeof cp->head_hash, "%s", text[0]);
    snprintf(cp->log_root, sizeof cp->log_root, "%s", text[1]);
    snprintf(cp->created_at, sizeof cp->created_at, "%s", text[2]);
    snprintf(cp->public_key, sizeof cp->public_key, "%s", text[3]);
    snprintf(cp->signature, sizeof cp->signature, "%s", text[4]);
    p->has_checkpoint = true;
    return SQLITE_DONE;
}

static int bind_entry_seq(sqlite3_stmt *s, void *ctx) {
    return sqlite3_bind_int64(s, 1, ((pgcl_chain_proof *)ctx)->entry_seq);
}

static int take_head_seq(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    *(int64_t *)ctx = sqlite3_column_int64(s, 0);
    return SQLITE_DONE;
}

/* The entry's place in the log tree: that of the latest version-2 checkpoint covering it, else of
 * the chain now. Inside the proof's read transaction. */
static pgcl_status prove_in_log(sqlite3 *db, pgcl_chain_proof *p, char *err, int cap) {
    char sub[256] = "";
    int rc = pgcl_db_each_row(db,
                              "SELECT head_seq, head_hash, log_root, created_at, public_key, signature FROM"
                              " audit_checkpoints WHERE head_seq >= ?1 AND log_root IS NOT NULL AND log_root <> ''"
                              " ORDER BY seq DESC LIMIT 1",
                              bind_entry_seq, take_checkpoint, p, sub, sizeof sub);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_checkpoints: %s", sub);
        return PGCL_ERR_DB;
    }
    int64_t size = p->has_checkpoint ? p->checkpoint.head_seq : 0;
    if (!p->has_checkpoint) {
        rc = pgcl_db_each_row(db, "SELECT max(seq) FROM audit_chain", NULL, take_head_seq, &size, sub, sizeof sub);
        if (rc != SQLITE_OK && rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "audit_chain: %s", sub);
            return PGCL_ERR_DB;
        }
    }
    p->log_index = p->entry_seq - 1;
    p->log_size = size;
    return pgcl_chain_log_tree(db, size, p->log_index, &p->log_root, p->log_path, &p->log_path_len, err, cap);
}

pgcl_status pgcl_chain_prove_decision(sqlite3 *db, const char *decision_id, pgcl_chain_proof *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    prove_walk w = {.decision_id = decision_id, .out = out, .st = PGCL_OK};
    sqlite3_stmt *sel[PGCL_CHAIN_TABLES] = {0};
    char sub[256];
    pgcl_status st = PGCL_ERR_DB;
    /* One snapshot: the entry, its leaves and the row are read together. */
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit database: %s", sub);
        goto done;
    }
    sub[0] = 0;
    int rc = pgcl_db_each_row(db, FIND_SQL, bind_id, take_entry, &w, sub, sizeof sub);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit database: %s", sub[0] ? sub : sqlite3_errmsg(db));
        goto done;
    }
    if (w.st != PGCL_OK) {
        st = w.st;
        pgcl_errorf(err, cap, "%s", sub);
        goto done;
    }
    if (!w.found) {
        pgcl_errorf(err, cap, "no decision with id '%.64s'", decision_id);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    if (!w.chained) {
        pgcl_errorf(err, cap,
                    "decision '%.64s' was chained in audit chain encoding version 1 (an entry per event, "
                    "no Merkle tree) or before the chain began: it has no inclusion proof",
                    decision_id);
        st = PGCL_ERR_UNSUPPORTED;
        goto done;
    }
    if (pgcl_chain_prepare_row_selects(db, sel, sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit database: %s", sub);
        goto done;
    }
    if ((st = prove_in_log(db, out, err, cap)) != PGCL_OK) goto done;
    st = PGCL_ERR_DB;
    rc = pgcl_chain_leaf_data_of_row(DECISIONS_TABLE, sel[DECISIONS_TABLE], out->row_seq, &out->leaf_data,
                                     &out->leaf_data_len);
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "audit database: decisions row %lld: %s", (long long)out->row_seq, sqlite3_errmsg(db));
        goto done;
    }
    st = PGCL_OK;
done:
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(sel[t]);
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    if (st != PGCL_OK) pgcl_chain_proof_release(out);
    return st;
}

bool pgcl_chain_proof_check(const pgcl_chain_proof *p, const char *decision_id, const char *entry_hash, char *why,
                            int cap) {
    if (!decision_id || !p->leaf_data) {
        pgcl_errorf(why, cap, "the decision id or the leaf data is missing");
        return false;
    }
    /* The claims are checked against the fields at their positions, never by finding the claimed
     * id somewhere in the leaf: a client's item id or request id can be another decision's id. */
    pgcl_chain_leaf row;
    char layout_why[256];
    if (pgcl_chain_leaf_decode(p->leaf_data, p->leaf_data_len, &row, layout_why, sizeof layout_why) != PGCL_OK) {
        pgcl_errorf(why, cap, "leaf_data is not the leaf of a row: %s", layout_why);
        return false;
    }
    if (row.table != DECISIONS_TABLE) {
        pgcl_errorf(why, cap, "leaf_data is a row of %s, not of decisions", pgcl_chain_tables[row.table].name);
        return false;
    }
    if (!pgcl_chain_value_is_text(&row.columns[PGCL_CHAIN_DECISION_ID], decision_id)) {
        pgcl_errorf(why, cap, "leaf_data is not decision %.64s's: its decision_id is another", decision_id);
        return false;
    }
    if (p->row_seq != 0 && row.columns[PGCL_CHAIN_DECISION_SEQ].integer != p->row_seq) {
        pgcl_errorf(why, cap, "leaf_data is decisions row %lld, not row %lld",
                    (long long)row.columns[PGCL_CHAIN_DECISION_SEQ].integer, (long long)p->row_seq);
        return false;
    }
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(p->leaf_data, p->leaf_data_len);
    if (memcmp(leaf.b, p->leaf_hash.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        pgcl_errorf(why, cap,
                    "leaf_data does not hash to the chained leaf_hash (the row differs from what was chained)");
        return false;
    }
    if (p->tree_size < 1 || p->leaf_index < 0 ||
        !pgcl_merkle_verify_inclusion(&leaf, (uint64_t)p->leaf_index, (uint64_t)p->tree_size, p->path, p->path_len,
                                      &p->root)) {
        pgcl_errorf(why, cap, "the path does not lead from leaf %lld of %lld to root", (long long)p->leaf_index,
                    (long long)p->tree_size);
        return false;
    }
    char root_hex[65], hash_hex[65];
    pgcl_merkle_to_hex(&p->root, root_hex);
    pgcl_chain_entry_hash(p->entry_seq, PGCL_CHAIN_COMMIT_KIND, strlen(PGCL_CHAIN_COMMIT_KIND), p->tree_size, root_hex,
                          PGCL_CHAIN_HEX_LEN, p->prev_hash, strnlen(p->prev_hash, PGCL_CHAIN_HEX_LEN), hash_hex);
    if (strcmp(hash_hex, p->entry_hash) != 0) {
        pgcl_errorf(why, cap, "root and prev_hash do not give chain entry %lld's hash", (long long)p->entry_seq);
        return false;
    }
    if (entry_hash && strcasecmp(entry_hash, hash_hex) != 0) {
        pgcl_errorf(why, cap, "chain entry %lld's hash is %s, not the %.64s you hold", (long long)p->entry_seq,
                    hash_hex, entry_hash);
        return false;
    }
    pgcl_merkle_hash entry_bytes, log_leaf;
    if (!pgcl_merkle_from_hex(hash_hex, &entry_bytes)) return false;
    log_leaf = pgcl_merkle_leaf_hash(entry_bytes.b, sizeof entry_bytes.b);
    if (p->log_index != p->entry_seq - 1 ||
        !pgcl_merkle_verify_inclusion(&log_leaf, (uint64_t)p->log_index, (uint64_t)p->log_size, p->log_path,
                                      p->log_path_len, &p->log_root)) {
        pgcl_errorf(why, cap, "the log path does not lead from entry %lld to the log root over %lld entries",
                    (long long)p->entry_seq, (long long)p->log_size);
        return false;
    }
    if (p->has_checkpoint) {
        char log_hex[65], sub[512];
        pgcl_merkle_to_hex(&p->log_root, log_hex);
        if (p->checkpoint.version < 2 || p->checkpoint.head_seq != p->log_size ||
            strcmp(p->checkpoint.log_root, log_hex) != 0) {
            pgcl_errorf(why, cap, "the checkpoint does not sign this log root over %lld entries",
                        (long long)p->log_size);
            return false;
        }
        if (pgcl_checkpoint_verify(&p->checkpoint, NULL, sub, sizeof sub) != PGCL_OK) {
            pgcl_errorf(why, cap, "%s", sub);
            return false;
        }
    }
    if (p->fleet) { /* the PostgreSQL store: the fleet checkpoint signs the writer's log root */
        char log_hex[65], sub[512];
        pgcl_merkle_to_hex(&p->log_root, log_hex);
        const pgcl_fleet_head *h = pgcl_fleet_checkpoint_head(p->fleet, p->writer_id);
        if (!h || h->head_seq != p->log_size || strcmp(h->log_root, log_hex) != 0) {
            pgcl_errorf(why, cap, "the fleet checkpoint does not sign writer '%.128s''s log root over %lld entries",
                        p->writer_id, (long long)p->log_size);
            return false;
        }
        if (pgcl_fleet_checkpoint_verify(p->fleet, NULL, sub, sizeof sub) != PGCL_OK) {
            pgcl_errorf(why, cap, "%s", sub);
            return false;
        }
    }
    return true;
}

/* ---- the log-wide tree over the chain's entries ---- */

typedef struct log_leaves {
    pgcl_merkle_hash *leaves;
    int64_t n, size;
    bool malformed;
} log_leaves;

static int bind_size(sqlite3_stmt *s, void *ctx) {
    return sqlite3_bind_int64(s, 1, ((log_leaves *)ctx)->size);
}

static int take_log_leaf(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    log_leaves *l = ctx;
    pgcl_merkle_hash h;
    const char *hex = (const char *)sqlite3_column_text(s, 1);
    if (sqlite3_column_int64(s, 0) != l->n + 1 || l->n >= l->size || !pgcl_merkle_from_hex(hex, &h)) {
        l->malformed = true;
        return SQLITE_DONE;
    }
    l->leaves[l->n++] = pgcl_merkle_leaf_hash(h.b, sizeof h.b);
    return SQLITE_OK;
}

pgcl_status pgcl_chain_log_leaves(sqlite3 *db, int64_t size, pgcl_merkle_hash **leaves, char *err, int cap) {
    PGCL_ASSERT(size >= 1);
    *leaves = NULL;
    log_leaves l = {.leaves = malloc((size_t)size * sizeof(pgcl_merkle_hash)), .size = size};
    if (!l.leaves) {
        pgcl_errorf(err, cap, "out of memory (a log tree of %lld entries)", (long long)size);
        return PGCL_ERR_NOMEM;
    }
    char sub[256] = "";
    int rc = pgcl_db_each_row(db, "SELECT seq, hash FROM audit_chain WHERE seq <= ?1 ORDER BY seq", bind_size,
                              take_log_leaf, &l, sub, sizeof sub);
    pgcl_status st = PGCL_OK;
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_chain: %s", sub[0] ? sub : sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    } else if (l.malformed || l.n != size) {
        pgcl_errorf(err, cap,
                    "the audit chain's entries 1..%lld are not all there, in order, with their hashes "
                    "(run `pgcld audit verify`)",
                    (long long)size);
        st = PGCL_ERR_FORMAT;
    }
    if (st == PGCL_OK)
        *leaves = l.leaves;
    else
        free(l.leaves);
    return st;
}

/* The naive oracle: every entry's hash, hashed into the tree (merkle.c's builders). */
static pgcl_status log_tree_from_entries(sqlite3 *db, int64_t size, int64_t index, pgcl_merkle_hash *root,
                                         pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err,
                                         int cap) {
    pgcl_merkle_hash *leaves;
    pgcl_status st = pgcl_chain_log_leaves(db, size, &leaves, err, cap);
    if (st != PGCL_OK) return st;
    *root = pgcl_merkle_root(leaves, (uint64_t)size);
    if (index >= 0) *path_len = pgcl_merkle_inclusion_path(leaves, (uint64_t)size, (uint64_t)index, path);
    free(leaves);
    return PGCL_OK;
}

pgcl_status pgcl_chain_log_tree(sqlite3 *db, int64_t size, int64_t index, pgcl_merkle_hash *root,
                                pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap) {
    PGCL_ASSERT(size >= 1 && index < size);
    pgcl_status st = index >= 0 ? pgcl_log_tree_inclusion(db, size, index, root, path, path_len, err, cap)
                                : pgcl_log_tree_root(db, size, root, err, cap);
    if (st != PGCL_ERR_NOT_FOUND) return st;
    /* A node or entry is not stored (a schema older than 0009, a gap): hash the entries, which also
     * says precisely which entry is missing. */
    return log_tree_from_entries(db, size, index, root, path, path_len, err, cap);
}

pgcl_status pgcl_chain_log_consistency(sqlite3 *db, int64_t first, int64_t second, pgcl_merkle_hash *first_root,
                                       pgcl_merkle_hash *second_root, pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH],
                                       int *proof_len, char *err, int cap) {
    PGCL_ASSERT(first >= 1 && first <= second);
    pgcl_status st = pgcl_log_tree_consistency(db, first, second, first_root, second_root, proof, proof_len, err, cap);
    if (st != PGCL_ERR_NOT_FOUND) return st;
    pgcl_merkle_hash *leaves;
    if ((st = pgcl_chain_log_leaves(db, second, &leaves, err, cap)) != PGCL_OK) return st;
    *first_root = pgcl_merkle_root(leaves, (uint64_t)first);
    *second_root = pgcl_merkle_root(leaves, (uint64_t)second);
    *proof_len = pgcl_merkle_consistency_proof(leaves, (uint64_t)first, (uint64_t)second, proof);
    free(leaves);
    return PGCL_OK;
}

pgcl_status pgcl_log_consistency_start(pgcl_log_consistency *out, int64_t first, int64_t second, char *err, int cap) {
    memset(out, 0, sizeof *out);
    out->first = first;
    out->second = second;
    if (first < 1 || first > second) {
        pgcl_errorf(err, cap, "tree sizes must satisfy 1 <= first (%lld) <= second (%lld)", (long long)first,
                    (long long)second);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_chain_prove_consistency(sqlite3 *db, int64_t first, int64_t second, pgcl_log_consistency *out,
                                         char *err, int cap) {
    pgcl_status st = pgcl_log_consistency_start(out, first, second, err, cap);
    if (st != PGCL_OK) return st;
    char sub[256] = "";
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit database: %s", sub);
        return PGCL_ERR_DB;
    }
    st = PGCL_ERR_DB;
    int rc = pgcl_db_each_row(db, "SELECT coalesce(max(seq), 0) FROM audit_chain", NULL, take_head_seq, &out->head_seq,
                              sub, sizeof sub);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_chain: %s", sub);
    } else if (second > out->head_seq) {
        pgcl_errorf(err, cap, "the log has %lld entries: no tree of size %lld yet", (long long)out->head_seq,
                    (long long)second);
        st = PGCL_ERR_NOT_FOUND;
    } else {
        st = pgcl_chain_log_consistency(db, first, second, &out->first_root, &out->second_root, out->proof,
                                        &out->proof_len, err, cap);
    }
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    return st;
}
