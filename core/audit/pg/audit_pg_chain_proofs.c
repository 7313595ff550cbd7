/* The PostgreSQL store's chain reads (audit_pg_chain.c describes them): fleet checkpoints over every
 * writer's head, a decision's inclusion proof, consistency proofs within one writer's log, and the
 * log tree read from its stored subtrees that the proofs walk. */
#include "audit_pg_chain_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_pg.h"
#include "chain.h"
#include "chain_proof.h"
#include "clock.h"
#include "fleet_checkpoint.h"
#include "merkle.h"
#include "sha256.h"

/* ---- the log tree from stored subtrees (pgcl_merkle_subtree_fn over one writer's nodes) ---- */

static const char ENTRY_HASH_SQL[] = "SELECT hash FROM audit_chain WHERE writer_id = $1 AND seq = $2";
static const char NODE_SQL[] = "SELECT hash FROM audit_log_nodes WHERE writer_id = $1 AND level = $2 AND idx = $3";

typedef struct node_source {
    PGconn *conn;
    const char *writer_id;
    pgcl_status st; /* of the last failed get */
    char err[ERR_CAP];
} node_source;

static bool get_node(void *ctx, int level, uint64_t index, pgcl_merkle_hash *out) {
    node_source *src = ctx;
    char a[24], b[24];
    snprintf(a, sizeof a, "%d", level);
    snprintf(b, sizeof b, "%llu", (unsigned long long)(level == 0 ? index + 1 : index));
    const char *entry_values[] = {src->writer_id, b}, *node_values[] = {src->writer_id, a, b};
    pgcl_status st;
    PGresult *res =
        level == 0
            ? pgcl_pg_query(src->conn, "audit_chain", ENTRY_HASH_SQL, 2, entry_values, &st, src->err, sizeof src->err)
            : pgcl_pg_query(src->conn, "audit_log_nodes", NODE_SQL, 3, node_values, &st, src->err, sizeof src->err);
    if (!res) {
        src->st = st;
        return false;
    }
    bool ok = PQntuples(res) == 1;
    if (ok && level == 0) {
        pgcl_merkle_hash entry;
        ok = pgcl_merkle_from_hex(pgcl_pg_text(res, 0, 0), &entry);
        if (ok) *out = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
    } else if (ok) {
        unsigned char *h = NULL;
        size_t len = 0;
        ok = pgcl_pg_bytea(res, 0, 0, &h, &len) == PGCL_OK && h && len == PGCL_MERKLE_HASH_BYTES;
        if (ok) memcpy(out->b, h, PGCL_MERKLE_HASH_BYTES);
        free(h);
    }
    if (!ok) {
        src->st = PQntuples(res) == 1 ? PGCL_ERR_FORMAT : PGCL_ERR_NOT_FOUND;
        snprintf(src->err, sizeof src->err,
                 "writer '%s': the log tree %s at level %d, index %llu is %s (run `pgcld audit verify`)",
                 src->writer_id, level == 0 ? "entry" : "node", level, (unsigned long long)index,
                 src->st == PGCL_ERR_FORMAT ? "malformed" : "not stored");
    }
    PQclear(res);
    return ok;
}

/* The failure of a *_from_subtrees call as a status, with its message. A node that is not stored
 * is PGCL_ERR_FORMAT (the writer stores every node in the commit that completes it). */
static pgcl_status source_failed(const node_source *src, char *err, int cap) {
    pgcl_errorf(err, cap, "%s", src->err);
    return src->st == PGCL_ERR_DB ? PGCL_ERR_DB : PGCL_ERR_FORMAT;
}

/* ---- fleet checkpoints ---- */

static const char HEADS_SQL[] =
    "SELECT c.writer_id, c.seq, c.hash FROM audit_chain AS c JOIN (SELECT writer_id, max(seq) AS seq FROM audit_chain"
    " GROUP BY writer_id) AS h ON h.writer_id = c.writer_id AND h.seq = c.seq ORDER BY c.writer_id COLLATE \"C\"";
static const char INSERT_CHECKPOINT_SQL[] =
    "INSERT INTO audit_checkpoints (created_at, statement, public_key, signature) VALUES ($1, $2, $3, $4)";

/* Every writer's head and log root, in one snapshot. PGCL_ERR_NOT_FOUND when no chain has an entry. */
static pgcl_status read_heads(PGconn *conn, pgcl_fleet_checkpoint *cp, char *err, int cap) {
    pgcl_status st = pgchain_begin_snapshot(conn, err, cap);
    if (st != PGCL_OK) return st;
    PGresult *res = pgcl_pg_query(conn, "audit_chain", HEADS_SQL, 0, NULL, &st, err, cap);
    if (!res) goto done;
    int n = PQntuples(res);
    st = PGCL_ERR_NOT_FOUND;
    if (n == 0) {
        pgcl_errorf(err, cap, "the audit chains are empty (no writer has recorded anything yet)");
        goto done;
    }
    st = PGCL_ERR_NOMEM;
    if (n > PGCL_FLEET_WRITERS_MAX || !(cp->heads = calloc((size_t)n, sizeof *cp->heads))) {
        pgcl_errorf(err, cap, n > PGCL_FLEET_WRITERS_MAX ? "more than %d writers" : "out of memory",
                    PGCL_FLEET_WRITERS_MAX);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        pgcl_fleet_head *h = &cp->heads[cp->n_heads++];
        const char *id = pgcl_pg_text(res, i, 0), *hash = pgcl_pg_text(res, i, 2);
        pgcl_merkle_hash ignored, root;
        if (!pgcl_fleet_writer_id_ok(id) || !pgcl_merkle_from_hex(hash, &ignored) || strlen(hash) != 64) {
            pgcl_errorf(err, cap,
                        "writer '%.128s': its writer id or head's hash cannot be signed (run `pgcld audit "
                        "verify`)",
                        id ? id : "");
            st = PGCL_ERR_FORMAT;
            goto done;
        }
        snprintf(h->writer_id, sizeof h->writer_id, "%s", id);
        h->head_seq = pgcl_pg_int(res, i, 1);
        snprintf(h->head_hash, sizeof h->head_hash, "%s", hash);
        node_source src = {.conn = conn, .writer_id = h->writer_id};
        if (!pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)h->head_seq, &root)) {
            st = source_failed(&src, err, cap);
            goto done;
        }
        pgcl_merkle_to_hex(&root, h->log_root);
    }
    st = PGCL_OK;
done:
    PQclear(res);
    pgchain_end_transaction(conn, false);
    return st;
}

pgcl_status pgcl_pg_checkpoint_create(PGconn *conn, const char *key_path, const char *out_file, const char *out_dir,
                                      pgcl_fleet_checkpoint *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    char sub[ERR_CAP];
    pgcl_status st = read_heads(conn, out, err, cap);
    if (st != PGCL_OK) return st;
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    snprintf(out->created_at, sizeof out->created_at, "%s", now);
    if ((st = pgcl_fleet_checkpoint_sign(out, key_path, err, cap)) != PGCL_OK) return st;
    if ((st = pgcl_fleet_checkpoint_write(out, out_file, out_dir, err, cap)) != PGCL_OK) return st;
    size_t len;
    char *statement = pgcl_fleet_checkpoint_statement(out, &len);
    if (!statement) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    const char *values[] = {out->created_at, statement, out->public_key, out->signature};
    st = pgcl_pg_exec(conn, "audit_checkpoints", INSERT_CHECKPOINT_SQL, 4, values, sub, sizeof sub);
    free(statement);
    if (st != PGCL_OK)
        pgcl_errorf(err, cap,
                    "the checkpoint file %s was written and is valid, but recording it in audit_checkpoints "
                    "failed: %s",
                    out->file, sub);
    return st;
}

pgcl_status pgcl_pg_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                      const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap) {
    out->is_fleet = true;
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_pg_checkpoint_create(conn, key_path, out_file, out_dir, &out->fleet, err, cap);
    pgcl_pg_reader_release(store, conn);
    return st;
}

/* A statement as recorded in audit_checkpoints (or audit_cuts) back into cp, with its key and
 * signature (heads malloc'd); false when it is not a fleet statement. */
bool pgchain_parse_statement(const char *text, const char *public_key, const char *signature,
                            pgcl_fleet_checkpoint *cp) {
    if (!pgcl_fleet_checkpoint_parse_statement(text, cp)) return false;
    snprintf(cp->public_key, sizeof cp->public_key, "%s", public_key ? public_key : "");
    snprintf(cp->signature, sizeof cp->signature, "%s", signature ? signature : "");
    snprintf(cp->file, sizeof cp->file, "audit_checkpoints");
    return true;
}

/* ---- inclusion proofs ---- */

static const char FIND_SQL[] =
    "SELECT d.seq, u.writer_id, u.entry_seq, u.first_leaf + d.seq - u.first_row_seq, c.leaf_count, c.leaves,"
    " c.payload_sha256, c.prev_hash, c.hash FROM decisions AS d"
    " LEFT JOIN audit_chain_runs AS u ON " PGCL_CHAIN_RUN_OF_DECISION_SQL
    " LEFT JOIN audit_chain AS c ON c.writer_id = u.writer_id AND c.seq = u.entry_seq WHERE d.decision_id = $1";
static const char WRITER_HEAD_SQL[] = "SELECT coalesce(max(seq), 0) FROM audit_chain WHERE writer_id = $1";
/* the latest fleet checkpoints, newest first: the proof takes the newest that covers its entry */
static const char RECENT_CHECKPOINTS_SQL[] =
    "SELECT statement, public_key, signature FROM audit_checkpoints ORDER BY seq DESC LIMIT 64";

/* The commit entry holding the decision, its leaf and path; found and chained as in chain_proof.c. */
static pgcl_status find_entry(PGconn *conn, const char *decision_id, pgcl_chain_proof *p, bool *found, bool *chained,
                              char *err, int cap) {
    pgcl_status st;
    const char *values[] = {decision_id};
    PGresult *res = pgcl_pg_query(conn, "decisions", FIND_SQL, 1, values, &st, err, cap);
    if (!res) return st;
    *found = PQntuples(res) == 1;
    *chained = *found && !PQgetisnull(res, 0, 2);
    st = PGCL_OK;
    if (!*chained) goto done;
    p->row_seq = pgcl_pg_int(res, 0, 0);
    snprintf(p->writer_id, sizeof p->writer_id, "%s", pgcl_pg_text(res, 0, 1));
    p->entry_seq = pgcl_pg_int(res, 0, 2);
    p->leaf_index = pgcl_pg_int(res, 0, 3);
    p->tree_size = pgcl_pg_int(res, 0, 4);
    const char *root = pgcl_pg_text(res, 0, 6), *prev = pgcl_pg_text(res, 0, 7), *hash = pgcl_pg_text(res, 0, 8);
    unsigned char *leaves = NULL;
    size_t len = 0;
    if (p->tree_size < 1 || p->leaf_index < 0 || p->leaf_index >= p->tree_size ||
        pgcl_pg_bytea(res, 0, 5, &leaves, &len) != PGCL_OK || !leaves ||
        len != (size_t)p->tree_size * PGCL_MERKLE_HASH_BYTES || !root || !pgcl_merkle_from_hex(root, &p->root) ||
        !prev || strlen(prev) != 64 || !hash || strlen(hash) != 64) {
        free(leaves);
        pgcl_errorf(err, cap, "writer '%s': audit chain entry %lld is malformed (run `pgcld audit verify`)",
                    p->writer_id, (long long)p->entry_seq);
        st = PGCL_ERR_FORMAT;
        goto done;
    }
    memcpy(p->prev_hash, prev, 65);
    memcpy(p->entry_hash, hash, 65);
    const pgcl_merkle_hash *all = (const pgcl_merkle_hash *)leaves;
    p->leaf_hash = all[p->leaf_index];
    p->path_len = pgcl_merkle_inclusion_path(all, (uint64_t)p->tree_size, (uint64_t)p->leaf_index, p->path);
    free(leaves);
done:
    PQclear(res);
    return st;
}

/* The entry's place in its writer's log tree: that of the newest fleet checkpoint covering it
 * (among the recent ones), else of the chain now. */
static pgcl_status prove_in_log(PGconn *conn, pgcl_chain_proof *p, char *err, int cap) {
    pgcl_status st;
    PGresult *res = pgcl_pg_query(conn, "audit_checkpoints", RECENT_CHECKPOINTS_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    int64_t size = 0;
    for (int i = 0; i < PQntuples(res) && !p->fleet; i++) {
        pgcl_fleet_checkpoint cp;
        if (!pgchain_parse_statement(pgcl_pg_text(res, i, 0), pgcl_pg_text(res, i, 1), pgcl_pg_text(res, i, 2), &cp))
            continue;
        const pgcl_fleet_head *h = pgcl_fleet_checkpoint_head(&cp, p->writer_id);
        if (h && h->head_seq >= p->entry_seq && (p->fleet = malloc(sizeof *p->fleet))) {
            size = h->head_seq;
            *p->fleet = cp;
        } else {
            pgcl_fleet_checkpoint_release(&cp);
        }
    }
    PQclear(res);
    if (!p->fleet) {
        const char *values[] = {p->writer_id};
        if ((st = pgcl_pg_query_int(conn, "audit_chain", WRITER_HEAD_SQL, 1, values, &size, NULL, err, cap)) != PGCL_OK)
            return st;
    }
    p->log_index = p->entry_seq - 1;
    p->log_size = size;
    node_source src = {.conn = conn, .writer_id = p->writer_id};
    if (size < p->entry_seq || !pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)size, &p->log_root) ||
        (p->log_path_len = pgcl_merkle_inclusion_path_from_subtrees(get_node, &src, (uint64_t)size,
                                                                    (uint64_t)p->log_index, p->log_path)) < 0) {
        if (size < p->entry_seq)
            snprintf(src.err, sizeof src.err, "writer '%s': the chain ends before entry %lld", p->writer_id,
                     (long long)p->entry_seq);
        return source_failed(&src, err, cap);
    }
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_proof(pgcl_audit *store, const char *decision_id, pgcl_chain_proof *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_pg_chain_prove(conn, decision_id, out, err, cap);
    pgcl_pg_reader_release(store, conn);
    return st;
}

pgcl_status pgcl_pg_chain_prove(PGconn *conn, const char *decision_id, pgcl_chain_proof *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    pgcl_status st;
    bool found = false, chained = false;
    PGresult *rows = NULL;
    if ((st = pgchain_begin_snapshot(conn, err, cap)) != PGCL_OK) goto done;
    if ((st = find_entry(conn, decision_id, out, &found, &chained, err, cap)) != PGCL_OK) goto done;
    if (!found) {
        pgcl_errorf(err, cap, "no decision with id '%.64s'", decision_id);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    if (!chained) {
        pgcl_errorf(err, cap, "decision '%.64s' is in no writer's chain (no run covers it: run `pgcld audit verify`)",
                    decision_id);
        st = PGCL_ERR_UNSUPPORTED;
        goto done;
    }
    if ((st = prove_in_log(conn, out, err, cap)) != PGCL_OK) goto done;
    if (!(rows = pgchain_read_decision_row(conn, out->row_seq, &st, err, cap))) goto done;
    st = PGCL_ERR_DB;
    if (PQntuples(rows) != 1) {
        pgcl_errorf(err, cap, "decisions row %lld vanished", (long long)out->row_seq);
        goto done;
    }
    row_values rv;
    st = pgchain_row_values_of(DECISIONS_TABLE, rows, 0, 0, &rv);
    if (st == PGCL_OK)
        pgcl_chain_leaf_data_of_values(DECISIONS_TABLE, rv.v, rv.n, &out->leaf_data, &out->leaf_data_len);
    if (st != PGCL_OK || !out->leaf_data) {
        pgcl_errorf(err, cap, "decisions row %lld: %s", (long long)out->row_seq,
                    st == PGCL_OK ? "out of memory" : "malformed stored input digest");
        st = st == PGCL_OK ? PGCL_ERR_NOMEM : st;
        goto done;
    }
    st = PGCL_OK;
done:
    PQclear(rows);
    pgchain_end_transaction(conn, false);
    /* a chain that cannot give a proof (a malformed entry, a missing log node) is no database error:
     * the decision has no proof, as a version-1 one (the statement of reasons goes out without it) */
    if (st == PGCL_ERR_FORMAT) st = PGCL_ERR_UNSUPPORTED;
    if (st != PGCL_OK) pgcl_chain_proof_release(out);
    return st;
}

/* ---- consistency proofs, within one writer's log ---- */

static const char CHAINED_WRITERS_SQL[] =
    "SELECT writer_id FROM audit_chain WHERE seq = 1 ORDER BY writer_id COLLATE \"C\" LIMIT 8";

/* The writer whose log is meant: writer_id, or the only one. */
static pgcl_status pick_writer(PGconn *conn, const char *writer_id, pgcl_log_consistency *out, char *err, int cap) {
    if (writer_id) {
        snprintf(out->writer_id, sizeof out->writer_id, "%s", writer_id);
        return PGCL_OK;
    }
    pgcl_status st;
    PGresult *res = pgcl_pg_query(conn, "audit_chain", CHAINED_WRITERS_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    int n = PQntuples(res);
    if (n == 1) {
        snprintf(out->writer_id, sizeof out->writer_id, "%s", pgcl_pg_text(res, 0, 0));
        st = PGCL_OK;
    } else if (n == 0) {
        pgcl_errorf(err, cap, "no writer has a chain yet: no tree of size %lld", (long long)out->second);
        st = PGCL_ERR_NOT_FOUND;
    } else {
        char names[400] = "";
        for (int i = 0; i < n && strlen(names) < 300; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%.40s'", i ? ", " : "",
                     pgcl_pg_text(res, i, 0));
        pgcl_errorf(err, cap, "the store has one log per writer (%s%s): name one with writer=", names,
                    n == 8 ? ", ..." : "");
        st = PGCL_ERR_INVALID;
    }
    PQclear(res);
    return st;
}

pgcl_status pgcl_pg_read_consistency(pgcl_audit *store, const char *writer_id, int64_t first, int64_t second,
                                     pgcl_log_consistency *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_pg_chain_consistency(conn, writer_id, first, second, out, err, cap);
    pgcl_pg_reader_release(store, conn);
    return st;
}

pgcl_status pgcl_pg_chain_consistency(PGconn *conn, const char *writer_id, int64_t first, int64_t second,
                                      pgcl_log_consistency *out, char *err, int cap) {
    pgcl_status st = pgcl_log_consistency_start(out, first, second, err, cap);
    if (st != PGCL_OK) return st;
    if ((st = pgchain_begin_snapshot(conn, err, cap)) != PGCL_OK) goto done;
    if ((st = pick_writer(conn, writer_id, out, err, cap)) != PGCL_OK) goto done;
    const char *values[] = {out->writer_id};
    if ((st = pgcl_pg_query_int(conn, "audit_chain", WRITER_HEAD_SQL, 1, values, &out->head_seq, NULL, err, cap)) !=
        PGCL_OK)
        goto done;
    if (second > out->head_seq) {
        pgcl_errorf(err, cap, "writer '%.128s''s log has %lld entries: no tree of size %lld yet", out->writer_id,
                    (long long)out->head_seq, (long long)second);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    node_source src = {.conn = conn, .writer_id = out->writer_id};
    if (!pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)first, &out->first_root) ||
        !pgcl_merkle_root_from_subtrees(get_node, &src, (uint64_t)second, &out->second_root) ||
        (out->proof_len = pgcl_merkle_consistency_proof_from_subtrees(get_node, &src, (uint64_t)first, (uint64_t)second,
                                                                      out->proof)) < 0) {
        st = source_failed(&src, err, cap);
        goto done;
    }
    st = PGCL_OK;
done:
    pgchain_end_transaction(conn, false);
    return st;
}
