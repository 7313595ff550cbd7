/* The canonical encodings of the audit chain (chain_encoding.h; the format is in docs/audit.md):
 * values, rows, entries and, for encoding version 2, the Merkle leaves of events. The writer
 * (chain.c) and the verifier (chain_verify.c) hash a row through the same functions, from the same
 * SELECT of the same column list, so the two can only disagree when the stored row changed. */
#include "chain_encoding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "status.h"

/* ---- encoding version 1 ----
 *
 * Each value: a 1-byte type tag, then
 *   0 NULL     nothing
 *   1 INTEGER  8 bytes, big-endian two's complement
 *   2 REAL     8 bytes, big-endian IEEE-754 bits
 *   3 TEXT     4-byte big-endian length, then the UTF-8 bytes
 *   4 BLOB     4-byte big-endian length, then the bytes
 * A row is its columns' values concatenated in the order of the list below (the row's seq first).
 * Changing a list changes every payload: that needs a new encoding version, never an edit. */

enum { TAG_NULL = 0, TAG_INTEGER = 1, TAG_REAL = 2, TAG_TEXT = 3, TAG_BLOB = 4 };

const pgcl_chain_table pgcl_chain_tables[PGCL_CHAIN_TABLES] = {
    {"decisions", 19,
     "SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
     " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256,"
     " latency_us, input, input_dtype FROM decisions WHERE seq = ?1"},
    {"admin_events", -1,
     "SELECT seq, event_id, created_at, actor, action, target, details FROM admin_events WHERE seq = ?1"},
    {"contests", -1,
     "SELECT seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests WHERE seq = ?1"},
    {"resolutions", -1,
     "SELECT seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note"
     " FROM resolutions WHERE seq = ?1"},
};

const char pgcl_chain_zero_hash[PGCL_CHAIN_HEX_LEN + 1] =
    "0000000000000000000000000000000000000000000000000000000000000000";

int pgcl_chain_table_index(const char *kind, size_t len) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        if (strlen(pgcl_chain_tables[t].name) == len && memcmp(pgcl_chain_tables[t].name, kind, len) == 0) return t;
    return -1;
}

/* An encoder that collects a message's bytes and hashes them in one call at the end: one-shot
 * SHA-256 of a whole row is cheaper than many small updates. Rows up to sizeof inline_buf stay on
 * the stack; larger ones (float32 inputs of a wide encoder) move to the heap. */
typedef struct encoder {
    unsigned char *buf; /* inline_buf or heap */
    size_t n, cap;
    unsigned char inline_buf[8192];
} encoder;

static void enc_init(encoder *e) {
    e->buf = e->inline_buf;
    e->n = 0;
    e->cap = sizeof e->inline_buf;
}

static void enc_put(encoder *e, const void *p, size_t n) {
    if (e->n + n > e->cap) {
        size_t cap = e->cap * 2;
        while (cap < e->n + n)
            cap *= 2;
        unsigned char *grown = e->buf == e->inline_buf ? malloc(cap) : realloc(e->buf, cap);
        if (!grown) abort(); /* a row's hash cannot be skipped; 16+ KiB is not available */
        if (e->buf == e->inline_buf) memcpy(grown, e->inline_buf, e->n);
        e->buf = grown;
        e->cap = cap;
    }
    memcpy(e->buf + e->n, p, n);
    e->n += n;
}

static void enc_final(encoder *e, char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    unsigned char digest[PGCL_SHA256_BYTES];
    pgcl_sha256(e->buf, e->n, digest);
    pgcl_sha256_to_hex(digest, out_hex);
    if (e->buf != e->inline_buf) free(e->buf);
    e->buf = e->inline_buf;
}

static void put_be64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static void enc_integer(encoder *e, int64_t v) {
    unsigned char b[9];
    b[0] = TAG_INTEGER;
    put_be64(b + 1, (uint64_t)v);
    enc_put(e, b, sizeof b);
}

static void enc_real(encoder *e, double v) {
    unsigned char b[9];
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    b[0] = TAG_REAL;
    put_be64(b + 1, bits);
    enc_put(e, b, sizeof b);
}

/* TEXT or BLOB: tag, 4-byte length, bytes. SQLite values are shorter than 2^31 bytes. */
static void enc_bytes(encoder *e, int tag, const void *p, size_t n) {
    unsigned char b[5] = {(unsigned char)tag, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    enc_put(e, b, sizeof b);
    if (n) enc_put(e, p, n);
}

static void enc_column(encoder *e, sqlite3_stmt *s, int i) {
    switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER:
        enc_integer(e, sqlite3_column_int64(s, i));
        break;
    case SQLITE_FLOAT:
        enc_real(e, sqlite3_column_double(s, i));
        break;
    case SQLITE_TEXT: {
        const unsigned char *z = sqlite3_column_text(s, i); /* UTF-8; then its length */
        enc_bytes(e, TAG_TEXT, z, (size_t)sqlite3_column_bytes(s, i));
        break;
    }
    case SQLITE_BLOB: {
        const void *p = sqlite3_column_blob(s, i);
        enc_bytes(e, TAG_BLOB, p, (size_t)sqlite3_column_bytes(s, i));
        break;
    }
    default: {
        unsigned char tag = TAG_NULL;
        enc_put(e, &tag, 1);
    }
    }
}

int pgcl_chain_hash_row(sqlite3_stmt *sel, int64_t row_seq, char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    sqlite3_reset(sel);
    sqlite3_bind_int64(sel, 1, row_seq);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) {
        encoder e;
        enc_init(&e);
        int n = sqlite3_column_count(sel);
        for (int i = 0; i < n; i++)
            enc_column(&e, sel, i);
        enc_final(&e, out_hex);
    }
    sqlite3_reset(sel);
    return rc;
}

void pgcl_chain_entry_hash(int64_t seq, const char *kind, size_t kind_len, int64_t row_seq, const char *payload,
                           size_t payload_len, const char *prev, size_t prev_len,
                           char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    encoder e;
    enc_init(&e);
    enc_integer(&e, seq);
    enc_bytes(&e, TAG_TEXT, kind, kind_len);
    enc_integer(&e, row_seq);
    enc_bytes(&e, TAG_TEXT, payload, payload_len);
    enc_bytes(&e, TAG_TEXT, prev, prev_len);
    enc_final(&e, out_hex);
}

void pgcl_chain_genesis_payload(const int64_t maxima[PGCL_CHAIN_TABLES], char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    encoder e;
    enc_init(&e);
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        enc_integer(&e, maxima[t]);
    enc_final(&e, out_hex);
}

int pgcl_chain_prepare_row_selects(sqlite3 *db, sqlite3_stmt *sel[PGCL_CHAIN_TABLES], char *err, int cap) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        int rc = sqlite3_prepare_v3(db, pgcl_chain_tables[t].select_sql, -1, SQLITE_PREPARE_PERSISTENT, &sel[t], NULL);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "%s: %s", pgcl_chain_tables[t].name, sqlite3_errmsg(db));
            return rc;
        }
    }
    return SQLITE_OK;
}

size_t pgcl_chain_text_value(const char *s, size_t n, unsigned char *out, size_t cap) {
    if (n > UINT32_MAX || cap < 5 || n > cap - 5) return 0;
    out[0] = TAG_TEXT;
    for (int i = 0; i < 4; i++)
        out[1 + i] = (unsigned char)(n >> (24 - 8 * i));
    memcpy(out + 5, s, n);
    return 5 + n;
}

/* ---- encoding version 2: the Merkle leaf of an event ----
 *
 * leaf data = TEXT kind, then the row's columns as in version 1, except that a table's digest
 * column (decisions.input) is replaced by BLOB SHA-256(its bytes) (NULL stays NULL): the leaf
 * commits to the stored input without holding it, so the input can be dropped after its retention
 * period and every proof still verifies. leaf hash = SHA-256(0x00 ‖ leaf data) (merkle.h). */

/* Encodes the row sel is positioned on (a row select of table `table`) as version-2 leaf data. */
static void encode_leaf(int table, sqlite3_stmt *sel, encoder *e) {
    const pgcl_chain_table *t = &pgcl_chain_tables[table];
    enc_bytes(e, TAG_TEXT, t->name, strlen(t->name));
    int n = sqlite3_column_count(sel);
    for (int i = 0; i < n; i++) {
        if (i == t->digest_column && sqlite3_column_type(sel, i) != SQLITE_NULL) {
            unsigned char digest[PGCL_SHA256_BYTES];
            pgcl_sha256(sqlite3_column_blob(sel, i), (size_t)sqlite3_column_bytes(sel, i), digest);
            enc_bytes(e, TAG_BLOB, digest, sizeof digest);
        } else {
            enc_column(e, sel, i);
        }
    }
}

/* Steps sel for row_seq and, on SQLITE_ROW, encodes the row's leaf data into e (enc_init'ed here;
 * the caller frees a heap buffer). sel is left positioned on the row: the caller resets it. */
static int step_and_encode_leaf(int table, sqlite3_stmt *sel, int64_t row_seq, encoder *e) {
    PGCL_ASSERT(table >= 0 && table < PGCL_CHAIN_TABLES);
    sqlite3_reset(sel);
    sqlite3_bind_int64(sel, 1, row_seq);
    enc_init(e);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) encode_leaf(table, sel, e);
    return rc;
}

int pgcl_chain_leaf_of_row(int table, sqlite3_stmt *sel, int64_t row_seq, pgcl_merkle_hash *leaf) {
    encoder e;
    int rc = step_and_encode_leaf(table, sel, row_seq, &e);
    if (rc == SQLITE_ROW) *leaf = pgcl_merkle_leaf_hash(e.buf, e.n);
    if (e.buf != e.inline_buf) free(e.buf);
    sqlite3_reset(sel);
    return rc;
}

int pgcl_chain_leaf_data_of_row(int table, sqlite3_stmt *sel, int64_t row_seq, unsigned char **data, size_t *len) {
    encoder e;
    *data = NULL;
    *len = 0;
    int rc = step_and_encode_leaf(table, sel, row_seq, &e);
    if (rc == SQLITE_ROW) {
        if ((*data = malloc(e.n ? e.n : 1))) {
            memcpy(*data, e.buf, e.n);
            *len = e.n;
        } else {
            rc = SQLITE_NOMEM;
        }
    }
    if (e.buf != e.inline_buf) free(e.buf);
    sqlite3_reset(sel);
    return rc;
}
