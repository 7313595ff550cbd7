/* The audit chain's writer (see chain.h; the format is in docs/audit.md): begin/record/seal inside
 * the caller's write transaction. Encoding version 1 appends one entry per event; version 2 collects
 * the transaction's events as Merkle leaves and seal() appends one entry for all of them. */
#include "chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_encoding.h"
#include "log_tree.h"
#include "merkle.h"
#include "status.h"

#define ERR_CAP 512

/* ---- the writer ---- */

/* A version-2 event waiting for seal(): its table, row and leaf hash. */
typedef struct pending_leaf {
    int table;
    int64_t row_seq;
    pgcl_merkle_hash leaf;
} pending_leaf;

struct pgcl_chain {
    sqlite3 *db;
    int encoding_wanted; /* PGCL_CHAIN_ENCODING_* as created; AS_HEAD resolves at each begin() */
    int encoding;        /* of the current transaction's entries: 1 or 2 */
    sqlite3_stmt *row_select[PGCL_CHAIN_TABLES];
    sqlite3_stmt *head;   /* the last entry's seq, hash and kind */
    sqlite3_stmt *maxima; /* max(seq) of the four tables */
    sqlite3_stmt *insert;
    sqlite3_stmt *insert_commit; /* version 2, prepared on first use (needs migration 0007) */
    sqlite3_stmt *insert_run;
    pgcl_log_tree *log_tree;           /* the log tree's stored subtrees, kept current as entries are appended */
    bool begun;                        /* begin() succeeded at least once */
    bool genesis_now;                  /* the last begin() wrote the genesis entry */
    int64_t legacy[PGCL_CHAIN_TABLES]; /* its maxima (valid while genesis_now) */
    int64_t head_seq;                  /* 0 before any begin() */
    char head_hash[PGCL_CHAIN_HEX_LEN + 1];
    pending_leaf *pending; /* version 2: the transaction's events so far, in leaf order */
    size_t n_pending, cap_pending;
    pgcl_merkle_hash *leaves; /* seal()'s scratch: the pending leaves packed */
    size_t cap_leaves;
};

pgcl_chain *pgcl_chain_create(sqlite3 *db, char *err, int cap) {
    return pgcl_chain_create_encoding(db, PGCL_CHAIN_ENCODING_AS_HEAD, err, cap);
}

pgcl_chain *pgcl_chain_create_encoding(sqlite3 *db, int encoding, char *err, int cap) {
    if (encoding != PGCL_CHAIN_ENCODING_AS_HEAD && encoding != 1 && encoding != 2) {
        pgcl_errorf(err, cap, "audit chain: encoding version %d is not 1 or 2", encoding);
        return NULL;
    }
    pgcl_chain *c = calloc(1, sizeof *c);
    if (!c) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    c->db = db;
    c->encoding_wanted = encoding;
    if (pgcl_chain_prepare_row_selects(db, c->row_select, err, cap) != SQLITE_OK) goto fail;
    const unsigned flags = SQLITE_PREPARE_PERSISTENT;
    if (sqlite3_prepare_v3(db, "SELECT seq, hash, kind FROM audit_chain ORDER BY seq DESC LIMIT 1", -1, flags, &c->head,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(db,
                           "SELECT (SELECT coalesce(max(seq), 0) FROM decisions),"
                           " (SELECT coalesce(max(seq), 0) FROM admin_events),"
                           " (SELECT coalesce(max(seq), 0) FROM contests),"
                           " (SELECT coalesce(max(seq), 0) FROM resolutions)",
                           -1, flags, &c->maxima, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(db,
                           "INSERT INTO audit_chain (seq, kind, row_seq, payload_sha256, prev_hash, hash)"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, flags, &c->insert, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit_chain: %s", sqlite3_errmsg(db));
        goto fail;
    }
    if (!(c->log_tree = pgcl_log_tree_create(db, err, cap))) goto fail;
    return c;
fail:
    pgcl_chain_destroy(c);
    return NULL;
}

void pgcl_chain_destroy(pgcl_chain *c) {
    if (!c) return;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(c->row_select[t]);
    sqlite3_finalize(c->head);
    sqlite3_finalize(c->maxima);
    sqlite3_finalize(c->insert);
    sqlite3_finalize(c->insert_commit);
    sqlite3_finalize(c->insert_run);
    pgcl_log_tree_destroy(c->log_tree);
    free(c->pending);
    free(c->leaves);
    free(c);
}

/* Inserts entry seq with the given fields; the caller updates the head. */
static pgcl_status insert_entry(pgcl_chain *c, int64_t seq, const char *kind, int64_t row_seq, const char *payload,
                                const char *hash, char *err, int cap) {
    sqlite3_stmt *s = c->insert;
    sqlite3_bind_int64(s, 1, seq);
    sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, row_seq);
    sqlite3_bind_text(s, 4, payload, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, c->head_hash, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, hash, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_chain: entry %lld: %s", (long long)seq, sqlite3_errmsg(c->db));
        return PGCL_ERR_DB;
    }
    return pgcl_log_tree_append(c->log_tree, seq, hash, err, cap);
}

/* The encoding of this transaction's entries: as created, or for AS_HEAD that of the head entry
 * (version 1 for a chain that holds no commit entry yet). */
static int resolve_encoding(const pgcl_chain *c, const unsigned char *head_kind) {
    if (c->encoding_wanted != PGCL_CHAIN_ENCODING_AS_HEAD) return c->encoding_wanted;
    return head_kind && strcmp((const char *)head_kind, PGCL_CHAIN_COMMIT_KIND) == 0 ? 2 : 1;
}

pgcl_status pgcl_chain_begin(pgcl_chain *c, char *err, int cap) {
    c->begun = false;
    c->genesis_now = false;
    c->n_pending = 0;
    if (sqlite3_get_autocommit(c->db)) {
        pgcl_errorf(err, cap, "audit chain: begin() needs an open write transaction");
        return PGCL_ERR_INVALID;
    }
    sqlite3_stmt *s = c->head;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *hash = sqlite3_column_text(s, 1);
        if (!hash || sqlite3_column_bytes(s, 1) != PGCL_CHAIN_HEX_LEN) {
            sqlite3_reset(s);
            pgcl_errorf(err, cap, "audit chain: the head entry's hash is not 64 hex digits");
            return PGCL_ERR_FORMAT;
        }
        c->head_seq = sqlite3_column_int64(s, 0);
        memcpy(c->head_hash, hash, PGCL_CHAIN_HEX_LEN + 1);
        c->encoding = resolve_encoding(c, sqlite3_column_text(s, 2));
        sqlite3_reset(s);
        c->begun = true;
        return PGCL_OK;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit chain: reading the head: %s", sqlite3_errmsg(c->db));
        return PGCL_ERR_DB;
    }
    /* An empty chain: the genesis entry records which rows predate it. */
    s = c->maxima;
    if (sqlite3_step(s) != SQLITE_ROW) {
        pgcl_errorf(err, cap, "audit chain: counting earlier rows: %s", sqlite3_errmsg(c->db));
        sqlite3_reset(s);
        return PGCL_ERR_DB;
    }
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        c->legacy[t] = sqlite3_column_int64(s, t);
    sqlite3_reset(s);
    char payload[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_chain_genesis_payload(c->legacy, payload);
    pgcl_chain_entry_hash(1, "genesis", 7, 0, payload, PGCL_CHAIN_HEX_LEN, pgcl_chain_zero_hash, PGCL_CHAIN_HEX_LEN,
                          hash);
    memcpy(c->head_hash, pgcl_chain_zero_hash, sizeof pgcl_chain_zero_hash);
    pgcl_status st = insert_entry(c, 1, "genesis", 0, payload, hash, err, cap);
    if (st != PGCL_OK) return st;
    c->head_seq = 1;
    memcpy(c->head_hash, hash, sizeof hash);
    c->genesis_now = true;
    c->encoding = resolve_encoding(c, (const unsigned char *)"genesis");
    c->begun = true;
    return PGCL_OK;
}

/* Grows the array *p of *cap elements of size elem to n elements; false (unchanged) on failure. */
static bool grow(void **p, size_t *cap, size_t n, size_t elem) {
    void *grown = realloc(*p, n * elem);
    if (!grown) return false;
    *p = grown;
    *cap = n;
    return true;
}

/* The status and message of a row select that did not find (SQLITE_DONE) or could not read its row. */
static pgcl_status row_read_error(const pgcl_chain *c, int t, int64_t row_seq, int rc, char *err, int cap) {
    if (rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit chain: %s row %lld does not exist", pgcl_chain_tables[t].name, (long long)row_seq);
        return PGCL_ERR_NOT_FOUND;
    }
    pgcl_errorf(err, cap, "audit chain: reading %s row %lld: %s", pgcl_chain_tables[t].name, (long long)row_seq,
                sqlite3_errmsg(c->db));
    return PGCL_ERR_DB;
}

/* Version 2: a free pending leaf slot (NULL when out of memory, err set). */
static pending_leaf *next_pending(pgcl_chain *c, char *err, int cap) {
    if (c->n_pending == c->cap_pending &&
        !grow((void **)&c->pending, &c->cap_pending, c->cap_pending ? 2 * c->cap_pending : 64, sizeof *c->pending)) {
        pgcl_errorf(err, cap, "audit chain: out of memory");
        return NULL;
    }
    return &c->pending[c->n_pending];
}

/* Version 2: hashes the row into a leaf and keeps it for seal(). */
static pgcl_status record_leaf(pgcl_chain *c, int t, int64_t row_seq, char *err, int cap) {
    pending_leaf *p = next_pending(c, err, cap);
    if (!p) return PGCL_ERR_NOMEM;
    int rc = pgcl_chain_leaf_of_row(t, c->row_select[t], row_seq, &p->leaf);
    if (rc != SQLITE_ROW) return row_read_error(c, t, row_seq, rc, err, cap);
    p->table = t;
    p->row_seq = row_seq;
    c->n_pending++;
    return PGCL_OK;
}

/* Whether row_seq of table t may be recorded now (err set when not). */
static pgcl_status check_recordable(const pgcl_chain *c, int t, int64_t row_seq, char *err, int cap) {
    if (!c->begun || sqlite3_get_autocommit(c->db)) {
        pgcl_errorf(err, cap, "audit chain: record() outside a transaction started with begin()");
        return PGCL_ERR_INVALID;
    }
    if (c->genesis_now && row_seq <= c->legacy[t]) {
        /* The row was inserted before begin() wrote the genesis entry, which counted it as older
         * than the chain: the verifier would then reject the chain. */
        pgcl_errorf(err, cap,
                    "audit chain: %s row %lld predates the genesis entry; call begin() before inserting "
                    "the transaction's rows",
                    pgcl_chain_tables[t].name, (long long)row_seq);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_chain_record_decision(pgcl_chain *c, const pgcl_chain_decision_values *v, char *err, int cap) {
    enum { DECISIONS = 0 };
    pgcl_status st = check_recordable(c, DECISIONS, v->seq, err, cap);
    if (st != PGCL_OK) return st;
    if (c->encoding != 2) return pgcl_chain_record(c, pgcl_chain_tables[DECISIONS].name, v->seq, err, cap);
    pending_leaf *p = next_pending(c, err, cap);
    if (!p) return PGCL_ERR_NOMEM;
    *p = (pending_leaf){.table = DECISIONS, .row_seq = v->seq, .leaf = pgcl_chain_decision_leaf(v)};
    c->n_pending++;
    return PGCL_OK;
}

pgcl_status pgcl_chain_record(pgcl_chain *c, const char *kind, int64_t row_seq, char *err, int cap) {
    int t = kind ? pgcl_chain_table_index(kind, strlen(kind)) : -1;
    if (t < 0) {
        pgcl_errorf(err, cap, "audit chain: unknown event kind '%.32s'", kind ? kind : "(null)");
        return PGCL_ERR_INVALID;
    }
    pgcl_status st = check_recordable(c, t, row_seq, err, cap);
    if (st != PGCL_OK) return st;
    if (c->encoding == 2) return record_leaf(c, t, row_seq, err, cap);
    char payload[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    int rc = pgcl_chain_hash_row(t, c->row_select[t], row_seq, payload);
    if (rc != SQLITE_ROW) return row_read_error(c, t, row_seq, rc, err, cap);
    int64_t seq = c->head_seq + 1;
    pgcl_chain_entry_hash(seq, pgcl_chain_tables[t].name, strlen(pgcl_chain_tables[t].name), row_seq, payload,
                          PGCL_CHAIN_HEX_LEN, c->head_hash, PGCL_CHAIN_HEX_LEN, hash);
    st = insert_entry(c, seq, pgcl_chain_tables[t].name, row_seq, payload, hash, err, cap);
    if (st != PGCL_OK) return st;
    c->head_seq = seq;
    memcpy(c->head_hash, hash, sizeof hash);
    return PGCL_OK;
}

int64_t pgcl_chain_head_seq(const pgcl_chain *c) {
    return c->head_seq;
}

const char *pgcl_chain_head_hash(const pgcl_chain *c) {
    return c->head_seq ? c->head_hash : "";
}

/* ---- version 2: one entry per transaction ---- */

static pgcl_status prepare_commit_statements(pgcl_chain *c, char *err, int cap) {
    if (c->insert_commit) return PGCL_OK;
    const unsigned flags = SQLITE_PREPARE_PERSISTENT;
    if (sqlite3_prepare_v3(c->db,
                           "INSERT INTO audit_chain (seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count,"
                           " leaves) VALUES (?1, '" PGCL_CHAIN_COMMIT_KIND "', ?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, flags, &c->insert_commit, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(c->db,
                           "INSERT INTO audit_chain_runs (kind, first_row_seq, n, entry_seq, first_leaf)"
                           " VALUES (?1, ?2, ?3, ?4, ?5)",
                           -1, flags, &c->insert_run, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "audit chain: encoding version 2 needs schema migration 0007: %s", sqlite3_errmsg(c->db));
        sqlite3_finalize(c->insert_commit);
        c->insert_commit = NULL;
        return PGCL_ERR_DB;
    }
    return PGCL_OK;
}

static pgcl_status step_done(pgcl_chain *c, sqlite3_stmt *s, const char *what, char *err, int cap) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_DONE) return PGCL_OK;
    pgcl_errorf(err, cap, "audit chain: %s: %s", what, sqlite3_errmsg(c->db));
    return PGCL_ERR_DB;
}

/* The runs of consecutive rows of one table among the pending leaves, one audit_chain_runs row each. */
static pgcl_status insert_runs(pgcl_chain *c, int64_t entry_seq, char *err, int cap) {
    size_t start = 0;
    for (size_t i = 1; i <= c->n_pending; i++) {
        const pending_leaf *first = &c->pending[start];
        bool continues = i < c->n_pending && c->pending[i].table == first->table &&
                         c->pending[i].row_seq == first->row_seq + (int64_t)(i - start);
        if (continues) continue;
        sqlite3_stmt *s = c->insert_run;
        sqlite3_bind_text(s, 1, pgcl_chain_tables[first->table].name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, first->row_seq);
        sqlite3_bind_int64(s, 3, (int64_t)(i - start));
        sqlite3_bind_int64(s, 4, entry_seq);
        sqlite3_bind_int64(s, 5, (int64_t)start);
        pgcl_status st = step_done(c, s, "audit_chain_runs", err, cap);
        if (st != PGCL_OK) return st;
        start = i;
    }
    return PGCL_OK;
}

pgcl_status pgcl_chain_seal(pgcl_chain *c, char *err, int cap) {
    if (c->encoding != 2 || c->n_pending == 0) return PGCL_OK;
    if (!c->begun || sqlite3_get_autocommit(c->db)) {
        pgcl_errorf(err, cap, "audit chain: seal() outside a transaction started with begin()");
        return PGCL_ERR_INVALID;
    }
    pgcl_status st = prepare_commit_statements(c, err, cap);
    if (st != PGCL_OK) return st;
    if (c->n_pending > c->cap_leaves && !grow((void **)&c->leaves, &c->cap_leaves, c->n_pending, sizeof *c->leaves)) {
        pgcl_errorf(err, cap, "audit chain: out of memory");
        return PGCL_ERR_NOMEM;
    }
    for (size_t i = 0; i < c->n_pending; i++)
        c->leaves[i] = c->pending[i].leaf;
    pgcl_merkle_hash root = pgcl_merkle_root(c->leaves, c->n_pending);
    char root_hex[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_merkle_to_hex(&root, root_hex);
    int64_t seq = c->head_seq + 1, leaf_count = (int64_t)c->n_pending;
    pgcl_chain_entry_hash(seq, PGCL_CHAIN_COMMIT_KIND, strlen(PGCL_CHAIN_COMMIT_KIND), leaf_count, root_hex,
                          PGCL_CHAIN_HEX_LEN, c->head_hash, PGCL_CHAIN_HEX_LEN, hash);
    sqlite3_stmt *s = c->insert_commit;
    sqlite3_bind_int64(s, 1, seq);
    sqlite3_bind_text(s, 2, root_hex, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, c->head_hash, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, hash, PGCL_CHAIN_HEX_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, leaf_count);
    sqlite3_bind_blob(s, 6, c->leaves, (int)(c->n_pending * sizeof *c->leaves), SQLITE_STATIC);
    if ((st = step_done(c, s, "audit_chain commit entry", err, cap)) != PGCL_OK) return st;
    if ((st = pgcl_log_tree_append(c->log_tree, seq, hash, err, cap)) != PGCL_OK) return st;
    if ((st = insert_runs(c, seq, err, cap)) != PGCL_OK) return st;
    c->head_seq = seq;
    memcpy(c->head_hash, hash, sizeof hash);
    c->n_pending = 0;
    return PGCL_OK;
}

size_t pgcl_chain_mark(const pgcl_chain *c) {
    return c->n_pending;
}

pgcl_status pgcl_chain_rewind(pgcl_chain *c, size_t mark, char *err, int cap) {
    if (c->encoding == 2) {
        PGCL_ASSERT(mark <= c->n_pending);
        c->n_pending = mark; /* nothing was written yet: the entry is made at seal() */
        return PGCL_OK;
    }
    return pgcl_chain_begin(c, err, cap); /* version 1: the head went back with the savepoint */
}
