/* Inclusion proofs (chain_proof.h): the run holding the row gives its commit entry and leaf index;
 * the path is built from the commit's stored leaves, and the leaf data from the row as it is now,
 * so a changed row yields a proof that no longer verifies. */
#include "chain_proof.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chain_encoding.h"
#include "db.h"
#include "sha256.h"

#define DECISIONS_TABLE 0 /* pgcl_chain_tables[0] */

void pgcl_chain_proof_release(pgcl_chain_proof *p) {
    if (!p) return;
    free(p->leaf_data);
    p->leaf_data = NULL;
}

static const char FIND_SQL[] =
    "SELECT d.seq, u.entry_seq, u.first_leaf + d.seq - u.first_row_seq, c.leaf_count, c.leaves, c.payload_sha256,"
    " c.prev_hash, c.hash FROM decisions AS d"
    " LEFT JOIN audit_chain_runs AS u ON u.kind = 'decisions' AND u.first_row_seq = (SELECT max(first_row_seq) FROM"
    " audit_chain_runs WHERE kind = 'decisions' AND first_row_seq <= d.seq) AND d.seq < u.first_row_seq + u.n"
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

pgcl_status pgcl_chain_prove_decision(const char *path, const char *decision_id, pgcl_chain_proof *out, char *err,
                                      int cap) {
    memset(out, 0, sizeof *out);
    sqlite3 *db = pgcl_db_open_reader(path, err, cap);
    if (!db) return PGCL_ERR_DB;
    prove_walk w = {.decision_id = decision_id, .out = out, .st = PGCL_OK};
    sqlite3_stmt *sel[PGCL_CHAIN_TABLES] = {0};
    char sub[256];
    pgcl_status st = PGCL_ERR_DB;
    /* One snapshot: the entry, its leaves and the row are read together. */
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    sub[0] = 0;
    int rc = pgcl_db_each_row(db, FIND_SQL, bind_id, take_entry, &w, sub, sizeof sub);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: %s", path, sub[0] ? sub : sqlite3_errmsg(db));
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
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    rc = pgcl_chain_leaf_data_of_row(DECISIONS_TABLE, sel[DECISIONS_TABLE], out->row_seq, &out->leaf_data,
                                     &out->leaf_data_len);
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "%s: decisions row %lld: %s", path, (long long)out->row_seq, sqlite3_errmsg(db));
        goto done;
    }
    st = PGCL_OK;
done:
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(sel[t]);
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    sqlite3_close(db);
    if (st != PGCL_OK) pgcl_chain_proof_release(out);
    return st;
}

/* The version-1 value encodings the check needs (chain_encoding.h): TEXT and INTEGER. */
static size_t put_text(unsigned char *out, const char *s, size_t n) {
    out[0] = 3;
    for (int i = 0; i < 4; i++)
        out[1 + i] = (unsigned char)(n >> (24 - 8 * i));
    memcpy(out + 5, s, n);
    return 5 + n;
}

static size_t put_integer(unsigned char *out, int64_t v) {
    out[0] = 1;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (unsigned char)((uint64_t)v >> (56 - 8 * i));
    return 9;
}

bool pgcl_chain_proof_check(const pgcl_chain_proof *p, const char *decision_id, const char *entry_hash, char *why,
                            int cap) {
    unsigned char id_text[5 + 128];
    size_t id_len = strlen(decision_id);
    if (id_len > 128 || !p->leaf_data) {
        pgcl_errorf(why, cap, "the decision id or the leaf data is missing or too long");
        return false;
    }
    size_t n = put_text(id_text, decision_id, id_len);
    if (!memmem(p->leaf_data, p->leaf_data_len, id_text, n)) {
        pgcl_errorf(why, cap, "leaf_data is not decision %.64s's", decision_id);
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
    unsigned char msg[9 + 5 + 6 + 9 + 5 + 64 + 5 + 64];
    size_t m = put_integer(msg, p->entry_seq);
    m += put_text(msg + m, PGCL_CHAIN_COMMIT_KIND, strlen(PGCL_CHAIN_COMMIT_KIND));
    m += put_integer(msg + m, p->tree_size);
    m += put_text(msg + m, root_hex, 64);
    m += put_text(msg + m, p->prev_hash, strnlen(p->prev_hash, 64));
    unsigned char digest[PGCL_MERKLE_HASH_BYTES];
    pgcl_sha256(msg, m, digest);
    pgcl_sha256_to_hex(digest, hash_hex);
    if (strcmp(hash_hex, p->entry_hash) != 0) {
        pgcl_errorf(why, cap, "root and prev_hash do not give chain entry %lld's hash", (long long)p->entry_seq);
        return false;
    }
    if (entry_hash && strcasecmp(entry_hash, hash_hex) != 0) {
        pgcl_errorf(why, cap, "chain entry %lld's hash is %s, not the %.64s you hold", (long long)p->entry_seq,
                    hash_hex, entry_hash);
        return false;
    }
    return true;
}
