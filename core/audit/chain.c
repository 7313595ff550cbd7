/* The audit chain's writer (see chain.h; the format is in docs/audit.md): begin/record/seal inside
 * the caller's write transaction. Encoding version 1 appends one entry per event; version 2 collects
 * the transaction's events as Merkle leaves and seal() appends one entry for all of them. */
#include "chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_encoding.h"
#include "merkle.h"

#define ERR_CAP 512

/* ---- the writer ---- */

struct pgcl_chain {
    sqlite3 *db;
    sqlite3_stmt *row_select[PGCL_CHAIN_TABLES];
    sqlite3_stmt *head;   /* PGCL_CHAIN_HEAD_SQL */
    sqlite3_stmt *maxima; /* max(seq) of the four tables */
    sqlite3_stmt *insert;
    bool begun;                 /* begin() succeeded at least once */
    bool genesis_now;           /* the last begin() wrote the genesis entry */
    int64_t legacy[PGCL_CHAIN_TABLES];   /* its maxima (valid while genesis_now) */
    int64_t head_seq;           /* 0 before any begin() */
    char head_hash[PGCL_CHAIN_HEX_LEN + 1];
};

pgcl_chain *pgcl_chain_create(sqlite3 *db, char *err, int cap) {
    pgcl_chain *c = calloc(1, sizeof *c);
    if (!c) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    c->db = db;
    if (pgcl_chain_prepare_row_selects(db, c->row_select, err, cap) != SQLITE_OK) goto fail;
    const unsigned flags = SQLITE_PREPARE_PERSISTENT;
    if (sqlite3_prepare_v3(db, PGCL_CHAIN_HEAD_SQL, -1, flags, &c->head, NULL) != SQLITE_OK ||
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
    return c;
fail:
    pgcl_chain_destroy(c);
    return NULL;
}

void pgcl_chain_destroy(pgcl_chain *c) {
    if (!c) return;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) sqlite3_finalize(c->row_select[t]);
    sqlite3_finalize(c->head);
    sqlite3_finalize(c->maxima);
    sqlite3_finalize(c->insert);
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
    return PGCL_OK;
}

pgcl_status pgcl_chain_begin(pgcl_chain *c, char *err, int cap) {
    c->begun = false;
    c->genesis_now = false;
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
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) c->legacy[t] = sqlite3_column_int64(s, t);
    sqlite3_reset(s);
    char payload[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_chain_genesis_payload(c->legacy, payload);
    pgcl_chain_entry_hash(1, "genesis", 7, 0, payload, PGCL_CHAIN_HEX_LEN, pgcl_chain_zero_hash, PGCL_CHAIN_HEX_LEN, hash);
    memcpy(c->head_hash, pgcl_chain_zero_hash, sizeof pgcl_chain_zero_hash);
    pgcl_status st = insert_entry(c, 1, "genesis", 0, payload, hash, err, cap);
    if (st != PGCL_OK) return st;
    c->head_seq = 1;
    memcpy(c->head_hash, hash, sizeof hash);
    c->genesis_now = true;
    c->begun = true;
    return PGCL_OK;
}

pgcl_status pgcl_chain_record(pgcl_chain *c, const char *kind, int64_t row_seq, char *err, int cap) {
    int t = kind ? pgcl_chain_table_index(kind, strlen(kind)) : -1;
    if (t < 0) {
        pgcl_errorf(err, cap, "audit chain: unknown event kind '%.32s'", kind ? kind : "(null)");
        return PGCL_ERR_INVALID;
    }
    if (!c->begun || sqlite3_get_autocommit(c->db)) {
        pgcl_errorf(err, cap, "audit chain: record() outside a transaction started with begin()");
        return PGCL_ERR_INVALID;
    }
    if (c->genesis_now && row_seq <= c->legacy[t]) {
        /* The row was inserted before begin() wrote the genesis entry, which counted it as older
         * than the chain: the verifier would then reject the chain. */
        pgcl_errorf(err, cap, "audit chain: %s row %lld predates the genesis entry; call begin() before inserting "
                    "the transaction's rows", pgcl_chain_tables[t].name, (long long)row_seq);
        return PGCL_ERR_INVALID;
    }
    char payload[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    int rc = pgcl_chain_hash_row(c->row_select[t], row_seq, payload);
    if (rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit chain: %s row %lld does not exist", pgcl_chain_tables[t].name, (long long)row_seq);
        return PGCL_ERR_NOT_FOUND;
    }
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "audit chain: reading %s row %lld: %s", pgcl_chain_tables[t].name, (long long)row_seq,
                    sqlite3_errmsg(c->db));
        return PGCL_ERR_DB;
    }
    int64_t seq = c->head_seq + 1;
    pgcl_chain_entry_hash(seq, pgcl_chain_tables[t].name, strlen(pgcl_chain_tables[t].name), row_seq, payload, PGCL_CHAIN_HEX_LEN, c->head_hash, PGCL_CHAIN_HEX_LEN,
               hash);
    pgcl_status st = insert_entry(c, seq, pgcl_chain_tables[t].name, row_seq, payload, hash, err, cap);
    if (st != PGCL_OK) return st;
    c->head_seq = seq;
    memcpy(c->head_hash, hash, sizeof hash);
    return PGCL_OK;
}

int64_t pgcl_chain_head_seq(const pgcl_chain *c) { return c->head_seq; }

const char *pgcl_chain_head_hash(const pgcl_chain *c) { return c->head_seq ? c->head_hash : ""; }

