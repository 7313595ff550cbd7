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
    {"decisions", 19, 21,
     "SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
     " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us,"
     " coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = decisions.seq)),"
     " input_dtype, input_digest, trace_id, content_date, territorial_scope, content_language"
     " FROM decisions WHERE seq = ?1",
     "SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
     " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us,"
     " coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = decisions.seq)),"
     " input_dtype, input_digest, NULL, NULL, NULL, NULL FROM decisions WHERE seq = ?1",
     "SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
     " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us,"
     " input, input_dtype, NULL, NULL, NULL, NULL, NULL FROM decisions WHERE seq = ?1"},
    {"admin_events", -1, -1,
     "SELECT seq, event_id, created_at, actor, action, target, details FROM admin_events WHERE seq = ?1", NULL, NULL},
    {"contests", -1, -1,
     "SELECT seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests WHERE seq = ?1",
     NULL, NULL},
    {"resolutions", -1, -1,
     "SELECT seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note"
     " FROM resolutions WHERE seq = ?1",
     NULL, NULL},
};
_Static_assert(PGCL_CHAIN_DECISIONS_INPUT_COLUMN == 19 && PGCL_CHAIN_DECISIONS_ENCODED_COLUMNS == 21,
               "decisions' row SELECT above: input is column 19, and input, input_dtype end the encoded columns");
_Static_assert(PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN == 22 && PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS == 4,
               "decisions' row SELECT above: trace_id .. content_language follow input_digest");

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

/* How many of sel's columns the encoding of a row of `table` holds. */
static int encoded_columns(int table, sqlite3_stmt *sel) {
    int n = pgcl_chain_tables[table].encoded_columns;
    return n >= 0 ? n : sqlite3_column_count(sel);
}

/* ---- the decision leaf's extension (migration 0011; docs/audit.md, "Decision leaf, extended") ----
 * A decisions row whose trace_id, content_date, territorial_scope or content_language is not NULL
 * is encoded with those four values appended, in that order, after its encoded columns (in both
 * encoding versions); a row with all four NULL (every row written before 0011) encodes exactly as
 * before. Values are self-delimiting, so an extended encoding never equals a plain one: setting
 * any of the four on an old row, or clearing them on a new one, changes its hash. */

/* Whether the extension columns of the row sel is positioned on are present and any is not NULL. */
static bool decision_extension_set(sqlite3_stmt *sel) {
    if (sqlite3_column_count(sel) < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN + PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS)
        return false;
    for (int i = 0; i < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS; i++)
        if (sqlite3_column_type(sel, PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN + i) != SQLITE_NULL) return true;
    return false;
}

static void encode_decision_extension(encoder *e, sqlite3_stmt *sel) {
    if (!decision_extension_set(sel)) return;
    for (int i = 0; i < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS; i++)
        enc_column(e, sel, PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN + i);
}

int pgcl_chain_hash_row(int table, sqlite3_stmt *sel, int64_t row_seq, char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    PGCL_ASSERT(table >= 0 && table < PGCL_CHAIN_TABLES);
    sqlite3_reset(sel);
    sqlite3_bind_int64(sel, 1, row_seq);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) {
        encoder e;
        enc_init(&e);
        int n = encoded_columns(table, sel);
        for (int i = 0; i < n; i++)
            enc_column(&e, sel, i);
        if (table == 0) encode_decision_extension(&e, sel);
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

/* Whether db has migration 0008's decisions.input_digest (a verifier may read an older file). */
static bool schema_has_0008(sqlite3 *db) {
    sqlite3_stmt *s = NULL;
    bool has = sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info('decisions') WHERE name = 'input_digest'",
                                  -1, &s, NULL) == SQLITE_OK &&
               sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == 1;
    sqlite3_finalize(s);
    return has;
}

int pgcl_chain_prepare_row_selects(sqlite3 *db, sqlite3_stmt *sel[PGCL_CHAIN_TABLES], char *err, int cap) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        int rc = sqlite3_prepare_v3(db, pgcl_chain_tables[t].select_sql, -1, SQLITE_PREPARE_PERSISTENT, &sel[t], NULL);
        if (rc != SQLITE_OK && pgcl_chain_tables[t].select_sql_before_0011) /* a file that predates migration 0011 */
            rc = sqlite3_prepare_v3(db, pgcl_chain_tables[t].select_sql_before_0011, -1, SQLITE_PREPARE_PERSISTENT,
                                    &sel[t], NULL);
        if (rc != SQLITE_OK && pgcl_chain_tables[t].select_sql_before_0008 && !schema_has_0008(db))
            rc = sqlite3_prepare_v3(db, pgcl_chain_tables[t].select_sql_before_0008, -1, SQLITE_PREPARE_PERSISTENT,
                                    &sel[t], NULL);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "%s: %s", pgcl_chain_tables[t].name, sqlite3_errmsg(db));
            return rc;
        }
    }
    return SQLITE_OK;
}

void pgcl_chain_writer_genesis_payload(const char *writer_id, char out_hex[PGCL_CHAIN_HEX_LEN + 1]) {
    unsigned char value[5 + 1024], digest[PGCL_SHA256_BYTES];
    size_t n = pgcl_chain_text_value(writer_id, strlen(writer_id), value, sizeof value);
    PGCL_ASSERT(n > 0); /* a writer id is at most PGCL_PG_WRITER_ID_MAX (128) bytes */
    pgcl_sha256(value, n, digest);
    pgcl_sha256_to_hex(digest, out_hex);
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

/* The digest column's value in a leaf: BLOB SHA-256 of the stored bytes; once they were dropped,
 * the recorded digest (the column after the encoded ones, decisions.input_digest). When both are
 * there and differ, the value is the recorded digest followed by the bytes' SHA-256: 64 bytes,
 * which no leaf was ever written with, so a changed input and a changed digest both fail.
 * For rows of every store: from input_sha256 (NULL: no stored input) and the recorded digest
 * (when have_recorded: recorded_len bytes, possibly none). */
static void encode_digest_value(encoder *e, const unsigned char *input_sha256, bool have_recorded,
                                const void *recorded, size_t recorded_len) {
    if (!input_sha256) {
        if (have_recorded) {
            enc_bytes(e, TAG_BLOB, recorded, recorded_len);
        } else {
            unsigned char tag = TAG_NULL; /* no input was stored */
            enc_put(e, &tag, 1);
        }
        return;
    }
    if (!have_recorded ||
        (recorded_len == PGCL_SHA256_BYTES && memcmp(recorded, input_sha256, PGCL_SHA256_BYTES) == 0)) {
        enc_bytes(e, TAG_BLOB, input_sha256, PGCL_SHA256_BYTES);
        return;
    }
    unsigned char both[2 * PGCL_SHA256_BYTES];
    if (recorded_len > 0) memcpy(both, recorded, recorded_len < PGCL_SHA256_BYTES ? recorded_len : PGCL_SHA256_BYTES);
    if (recorded_len < PGCL_SHA256_BYTES) memset(both + recorded_len, 0, PGCL_SHA256_BYTES - recorded_len);
    memcpy(both + PGCL_SHA256_BYTES, input_sha256, PGCL_SHA256_BYTES);
    enc_bytes(e, TAG_BLOB, both, sizeof both);
}

static void encode_digest_column(encoder *e, sqlite3_stmt *sel, int i, int recorded_column) {
    bool have_recorded = recorded_column < sqlite3_column_count(sel) &&
                         sqlite3_column_type(sel, recorded_column) == SQLITE_BLOB;
    const void *recorded = have_recorded ? sqlite3_column_blob(sel, recorded_column) : NULL;
    size_t recorded_len = have_recorded ? (size_t)sqlite3_column_bytes(sel, recorded_column) : 0;
    if (sqlite3_column_type(sel, i) == SQLITE_NULL) {
        encode_digest_value(e, NULL, have_recorded, recorded, recorded_len);
        return;
    }
    unsigned char input_sha256[PGCL_SHA256_BYTES];
    pgcl_sha256(sqlite3_column_blob(sel, i), (size_t)sqlite3_column_bytes(sel, i), input_sha256);
    encode_digest_value(e, input_sha256, have_recorded, recorded, recorded_len);
}

/* Encodes the row sel is positioned on (a row select of table `table`) as version-2 leaf data. */
static void encode_leaf(int table, sqlite3_stmt *sel, encoder *e) {
    const pgcl_chain_table *t = &pgcl_chain_tables[table];
    enc_bytes(e, TAG_TEXT, t->name, strlen(t->name));
    int n = encoded_columns(table, sel);
    for (int i = 0; i < n; i++) {
        if (i == t->digest_column) encode_digest_column(e, sel, i, n);
        else enc_column(e, sel, i);
    }
    if (table == 0) encode_decision_extension(e, sel);
}

static void enc_text(encoder *e, const char *s) {
    enc_bytes(e, TAG_TEXT, s, strlen(s));
}

static void enc_real_or_null(encoder *e, bool has, double v) {
    if (has) {
        enc_real(e, v);
    } else {
        unsigned char tag = TAG_NULL;
        enc_put(e, &tag, 1);
    }
}

pgcl_merkle_hash pgcl_chain_decision_leaf(const pgcl_chain_decision_values *v) {
    encoder e;
    enc_init(&e);
    enc_text(&e, pgcl_chain_tables[0].name);
    enc_integer(&e, v->seq);
    const char *const texts[] = {v->decision_id, v->created_at,    v->request_id,   v->item_id,
                                 v->model_name,  v->model_version, v->model_sha256, v->label};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) enc_text(&e, texts[i]);
    enc_integer(&e, v->label_index);
    enc_text(&e, v->probabilities);
    enc_real_or_null(&e, v->has_toxicity, v->toxicity);
    enc_text(&e, v->decision);
    enc_text(&e, v->policy);
    enc_real_or_null(&e, v->has_thresholds, v->t_review);
    enc_real_or_null(&e, v->has_thresholds, v->t_block);
    enc_bytes(&e, TAG_BLOB, v->vector, v->vector_bytes);
    enc_text(&e, v->input_sha256);
    enc_integer(&e, v->latency_us);
    if (v->input_digest && v->input_dtype) {
        enc_bytes(&e, TAG_BLOB, v->input_digest, PGCL_SHA256_BYTES);
        enc_text(&e, v->input_dtype);
    } else {
        unsigned char nulls[2] = {TAG_NULL, TAG_NULL};
        enc_put(&e, nulls, sizeof nulls);
    }
    const char *const extension[PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS] = {v->trace_id, v->content_date,
                                                                          v->territorial_scope, v->content_language};
    bool extended = false;
    for (int i = 0; i < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS; i++) extended = extended || extension[i];
    for (int i = 0; extended && i < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS; i++) {
        if (extension[i]) {
            enc_text(&e, extension[i]);
        } else {
            unsigned char tag = TAG_NULL;
            enc_put(&e, &tag, 1);
        }
    }
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(e.buf, e.n);
    if (e.buf != e.inline_buf) free(e.buf);
    return leaf;
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

/* ---- leaves from values ---- */

static void encode_value(encoder *e, const pgcl_chain_value *v) {
    switch (v->type) {
    case PGCL_CHAIN_VALUE_INTEGER:
        enc_integer(e, v->integer);
        break;
    case PGCL_CHAIN_VALUE_REAL:
        enc_real(e, v->real);
        break;
    case PGCL_CHAIN_VALUE_TEXT:
        enc_bytes(e, TAG_TEXT, v->bytes, v->len);
        break;
    case PGCL_CHAIN_VALUE_BLOB:
        enc_bytes(e, TAG_BLOB, v->bytes, v->len);
        break;
    default: {
        unsigned char tag = TAG_NULL;
        enc_put(e, &tag, 1);
    }
    }
}

static void encode_values_leaf(int table, const pgcl_chain_value *values, int n, encoder *e) {
    PGCL_ASSERT(table >= 0 && table < PGCL_CHAIN_TABLES);
    const pgcl_chain_table *t = &pgcl_chain_tables[table];
    int encoded = t->encoded_columns >= 0 && n > t->encoded_columns ? t->encoded_columns : n;
    enc_init(e);
    enc_text(e, t->name);
    for (int i = 0; i < encoded; i++) {
        const pgcl_chain_value *v = &values[i];
        if (i == t->digest_column) { /* the input's SHA-256 (or NULL), and the recorded digest after */
            const pgcl_chain_value *recorded =
                encoded < n && values[encoded].type == PGCL_CHAIN_VALUE_BLOB ? &values[encoded] : NULL;
            PGCL_ASSERT(v->type == PGCL_CHAIN_VALUE_NULL ||
                        (v->type == PGCL_CHAIN_VALUE_BLOB && v->len == PGCL_SHA256_BYTES));
            encode_digest_value(e, v->type == PGCL_CHAIN_VALUE_BLOB ? v->bytes : NULL, recorded != NULL,
                                recorded ? recorded->bytes : NULL, recorded ? recorded->len : 0);
            continue;
        }
        encode_value(e, v);
    }
    /* decisions: the extension after the recorded digest, when any of it is set (as for a SQLite row) */
    const int first = PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN, count = PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS;
    if (table != 0 || n < first + count) return;
    bool extended = false;
    for (int i = 0; i < count; i++) extended = extended || values[first + i].type != PGCL_CHAIN_VALUE_NULL;
    for (int i = 0; extended && i < count; i++) encode_value(e, &values[first + i]);
}

void pgcl_chain_leaf_data_of_values(int table, const pgcl_chain_value *values, int n, unsigned char **data,
                                    size_t *len) {
    encoder e;
    encode_values_leaf(table, values, n, &e);
    *len = 0;
    if ((*data = malloc(e.n ? e.n : 1))) {
        memcpy(*data, e.buf, e.n);
        *len = e.n;
    }
    if (e.buf != e.inline_buf) free(e.buf);
}

pgcl_merkle_hash pgcl_chain_leaf_of_values(int table, const pgcl_chain_value *values, int n) {
    encoder e;
    encode_values_leaf(table, values, n, &e);
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(e.buf, e.n);
    if (e.buf != e.inline_buf) free(e.buf);
    return leaf;
}
