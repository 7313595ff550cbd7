/* The canonical encodings of the audit chain, shared by its writer (chain.c) and its verifier
 * (chain_verify.c); internal to core/audit. docs/audit.md is the format's reference:
 *   version 1  one entry per event: payload = SHA-256(row encoding), entry hash over
 *              (seq, kind, row_seq, payload, prev_hash);
 *   version 2  one entry per write transaction (kind "commit"): the payload is the root of an
 *              RFC 9162 Merkle tree over the transaction's events, row_seq holds the entry's own
 *              seq, and the entry hash is the version-1 hash with leaf_count in row_seq's place.
 * Value encoding: a 1-byte type tag (0 NULL, 1 INTEGER 8 bytes big-endian, 2 REAL 8 bytes IEEE-754
 * big-endian, 3 TEXT and 4 BLOB: 4-byte big-endian length then the bytes). */
#ifndef PGCL_CHAIN_ENCODING_H
#define PGCL_CHAIN_ENCODING_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"

#define PGCL_CHAIN_TABLES 4
#define PGCL_CHAIN_HEX_LEN 64 /* a SHA-256 in lowercase hex, without the NUL */
#define PGCL_CHAIN_COMMIT_KIND "commit"
#define PGCL_CHAIN_HEAD_SQL "SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1" /* the last entry */

/* An event table: its name (also a version-1 entry's kind), the column whose bytes a version-2
 * leaf replaces by their SHA-256 (-1: none), and the SELECT of its chained columns by seq (?1).
 * Changing a list changes every payload: that needs a new encoding version, never an edit.
 *
 * decisions' SELECT ends with one column that is not encoded: input_digest (migration 0008), the
 * recorded SHA-256 of the stored input, which a version-2 leaf commits to in the input's place
 * once the input itself was dropped (retention); its input column reads the input wherever it is
 * stored (inline before 0008, table decision_inputs since). select_sql_before_0008 is the same
 * SELECT for a database that predates migration 0008 (NULL for the other tables).
 *
 * After input_digest come the decision leaf's extension columns (migration 0011): trace_id,
 * content_date, territorial_scope, content_language. They are encoded after the encoded columns,
 * all four, only when any of them is not NULL (chain_encoding.c, docs/audit.md "Decision leaf,
 * extended"): a row without them encodes as it did before 0011. */
typedef struct pgcl_chain_table {
    const char *name;
    int digest_column;
    int encoded_columns; /* the SELECT's first columns that are encoded; -1: all */
    const char *select_sql;
    const char *select_sql_before_0011; /* decisions: the same SELECT before migration 0011 (NULLs for
                                         * its columns); NULL for the other tables */
    const char *select_sql_before_0008;
} pgcl_chain_table;

/* decisions' columns in its row SELECT: the leaf of a row written from bound values
 * (pgcl_chain_decision_leaf) must encode the same values in the same order. */
enum {
    PGCL_CHAIN_DECISIONS_INPUT_COLUMN = 19,
    PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS = 21,
    PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN = 22, /* trace_id, after input_digest (column 21) */
    PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS = 4, /* trace_id, content_date, territorial_scope, content_language */
};

extern const pgcl_chain_table pgcl_chain_tables[PGCL_CHAIN_TABLES]; /* decisions, admin_events, contests, resolutions */
extern const char pgcl_chain_zero_hash[PGCL_CHAIN_HEX_LEN + 1];     /* the genesis entry's prev_hash */

/* Index of the event table named by kind[0..len), or -1. */
int pgcl_chain_table_index(const char *kind, size_t len);

/* Prepares the four row selects on db. Returns SQLITE_OK or the failing code (err set). */
int pgcl_chain_prepare_row_selects(sqlite3 *db, sqlite3_stmt *sel[PGCL_CHAIN_TABLES], char *err, int cap);

/* Version 1: steps sel (a row select) for row_seq and writes SHA-256 of the row's encoding in hex.
 * Returns SQLITE_ROW (hashed), SQLITE_DONE (no such row) or an error code; sel is reset. */
int pgcl_chain_hash_row(int table, sqlite3_stmt *sel, int64_t row_seq, char out_hex[PGCL_CHAIN_HEX_LEN + 1]);

/* hash = SHA-256(INTEGER seq, TEXT kind, INTEGER row_seq, TEXT payload, TEXT prev_hash); version 2
 * passes kind "commit", its leaf count as row_seq and its Merkle root (hex) as payload. */
void pgcl_chain_entry_hash(int64_t seq, const char *kind, size_t kind_len, int64_t row_seq, const char *payload,
                           size_t payload_len, const char *prev, size_t prev_len, char out_hex[PGCL_CHAIN_HEX_LEN + 1]);

/* The genesis payload: SHA-256 of the INTEGERs max(seq) of decisions, admin_events, contests and
 * resolutions (0 for an empty table) when the chain began. */
void pgcl_chain_genesis_payload(const int64_t maxima[PGCL_CHAIN_TABLES], char out_hex[PGCL_CHAIN_HEX_LEN + 1]);

/* A writer's genesis payload (the PostgreSQL store, one chain per writer: docs/audit.md): the hex
 * SHA-256 of the TEXT value of writer_id (at most 1024 bytes). */
void pgcl_chain_writer_genesis_payload(const char *writer_id, char out_hex[PGCL_CHAIN_HEX_LEN + 1]);

/* The encoding of one TEXT value (tag, 4-byte big-endian length, bytes) into out; its length, or 0
 * when it does not fit in cap bytes. (A leaf's fields are read by position: chain_decoding.h.) */
size_t pgcl_chain_text_value(const char *s, size_t n, unsigned char *out, size_t cap);

/* Version 2: steps sel (the row select of table `table`) for row_seq and writes the event's Merkle
 * leaf hash. Returns as pgcl_chain_hash_row. */
int pgcl_chain_leaf_of_row(int table, sqlite3_stmt *sel, int64_t row_seq, pgcl_merkle_hash *leaf);

/* The values of one decision row as the audit writer binds them: what a version-2 leaf encodes
 * without reading the row back (pgcl_chain_decision_leaf). The texts are NUL-terminated. */
typedef struct pgcl_chain_decision_values {
    int64_t seq;
    const char *decision_id, *created_at, *request_id, *item_id, *model_name, *model_version, *model_sha256, *label;
    int64_t label_index;
    const char *probabilities;
    bool has_toxicity;
    double toxicity;
    const char *decision, *policy;
    bool has_thresholds;
    double t_review, t_block;
    const void *vector; /* (vector_bytes) */
    size_t vector_bytes;
    const char *input_sha256;
    int64_t latency_us;
    const unsigned char *input_digest; /* 32 bytes: SHA-256 of the stored input; NULL: none stored */
    const char *input_dtype;           /* NULL when no input is stored */
    /* The extension (migration 0011), each NULL when absent; all NULL: the leaf of a pre-0011 row. */
    const char *trace_id, *content_date, *territorial_scope, *content_language;
} pgcl_chain_decision_values;

/* The version-2 leaf hash of a decision row from its values: the same bytes as
 * pgcl_chain_leaf_of_row() reading that row back (test_chain_v2 checks it against that oracle). */
pgcl_merkle_hash pgcl_chain_decision_leaf(const pgcl_chain_decision_values *v);

/* The leaf's data itself (what the leaf hash hashes after 0x00), malloc'd into *data (free it);
 * for an inclusion proof that lets its holder see what was committed. Returns as above, or
 * SQLITE_NOMEM. */
int pgcl_chain_leaf_data_of_row(int table, sqlite3_stmt *sel, int64_t row_seq, unsigned char **data, size_t *len);

/* ---- leaves from values: what a store that is not SQLite (core/audit/pg/) hashes ----
 * One column's value, typed as the encoding types it (the SQLite storage classes). */
typedef enum pgcl_chain_value_type {
    PGCL_CHAIN_VALUE_NULL,
    PGCL_CHAIN_VALUE_INTEGER,
    PGCL_CHAIN_VALUE_REAL,
    PGCL_CHAIN_VALUE_TEXT,
    PGCL_CHAIN_VALUE_BLOB
} pgcl_chain_value_type;

typedef struct pgcl_chain_value {
    pgcl_chain_value_type type;
    int64_t integer;
    double real;
    const void *bytes; /* TEXT (UTF-8, no NUL needed) or BLOB */
    size_t len;
} pgcl_chain_value;

/* The version-2 leaf data of a row of table `table` (pgcl_chain_tables order) from its n columns
 * in the row SELECT's order, malloc'd into *data (NULL when out of memory). For decisions, the
 * digest column (PGCL_CHAIN_DECISIONS_INPUT_COLUMN) must be the BLOB SHA-256 of the stored input,
 * or NULL (asserted), and the values may go on past the encoded columns with the recorded
 * input_digest (BLOB or NULL), as the row select does: the input's place in the leaf is then made
 * from both as for a SQLite row (see "The digest column's value" in chain_encoding.c), and then
 * by the extension's four values (PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN), encoded when any is not
 * NULL, as for a SQLite row. Equals the
 * leaf data of pgcl_chain_leaf_data_of_row() for the same row (tests/integration/test_pg_chain.py
 * checks it against its oracle). */
void pgcl_chain_leaf_data_of_values(int table, const pgcl_chain_value *values, int n, unsigned char **data,
                                    size_t *len);
/* Its leaf hash: SHA-256(0x00 ‖ leaf data). */
pgcl_merkle_hash pgcl_chain_leaf_of_values(int table, const pgcl_chain_value *values, int n);

#endif
