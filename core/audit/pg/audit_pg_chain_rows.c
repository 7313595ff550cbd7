/* The PostgreSQL store's chain reads (audit_pg_chain.c describes them): the leaves of rows as
 * PostgreSQL stores them (binary results into pgcl_chain_value columns), a decision's row, and the
 * read snapshot every chain read runs in. */
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

static const char BEGIN_SNAPSHOT_SQL[] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
static const char COMMIT_SQL[] = "COMMIT";
static const char ROLLBACK_SQL[] = "ROLLBACK";

/* ---- leaves of rows as PostgreSQL stores them ----
 * The row selects return the chained columns in pgcl_chain_tables[t].select_sql's order; for
 * decisions, column 19 is SHA-256 of the stored input (decision_inputs) and a last column
 * input_digest, from which pgcl_chain_leaf_of_values makes the leaf's digest value as for a SQLite
 * row (chain_encoding.c; docs/audit.md, the table under "Encoding version 2"), then the decision
 * leaf's extension: trace_id, content_date, territorial_scope, content_language (migration 0002;
 * docs/audit.md, "Decision leaf, extended"). A proof reads its one decision with DECISION_ROW_SQL;
 * the verifier reads every table through DECLARE_ROWS_SQL. */
static const char DECISION_ROW_SQL[] =
    "SELECT d.seq, d.decision_id, d.created_at, d.request_id, d.item_id, d.model_name, d.model_version,"
    " d.model_sha256, d.label, d.label_index, d.probabilities, d.toxicity, d.decision, d.policy, d.t_review,"
    " d.t_block, d.vector, d.input_sha256, d.latency_us, sha256(i.input), d.input_dtype, d.input_digest,"
    " d.trace_id, d.content_date, d.territorial_scope, d.content_language"
    " FROM decisions AS d LEFT JOIN decision_inputs AS i ON i.decision_seq = d.seq WHERE d.seq = $1";

/* PostgreSQL type oids of the chained columns (pg_type.h). */
enum { OID_BYTEA = 17, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT4 = 700, OID_FLOAT8 = 701 };

static uint64_t be_uint(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* An integer column of a binary result (int2, int4 or int8, big-endian). */
int64_t pgchain_binary_int(const PGresult *res, int row, int col) {
    int n = PQgetlength(res, row, col);
    uint64_t u = be_uint((const unsigned char *)PQgetvalue(res, row, col), n);
    if (n == 2) return (int16_t)u;
    if (n == 4) return (int32_t)u;
    return (int64_t)u;
}

/* Column col of row of a binary result as the encoding types it (by its PostgreSQL type).
 * PGCL_ERR_FORMAT for a value of an unexpected size. */
static pgcl_status column_value(const PGresult *res, int row, int col, pgcl_chain_value *v) {
    memset(v, 0, sizeof *v);
    if (PQgetisnull(res, row, col)) {
        v->type = PGCL_CHAIN_VALUE_NULL;
        return PGCL_OK;
    }
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
    int n = PQgetlength(res, row, col);
    switch (PQftype(res, col)) {
    case OID_INT8:
    case OID_INT4:
    case OID_INT2:
        if (n != 8 && n != 4 && n != 2) return PGCL_ERR_FORMAT;
        v->type = PGCL_CHAIN_VALUE_INTEGER;
        v->integer = pgchain_binary_int(res, row, col);
        return PGCL_OK;
    case OID_FLOAT8: {
        if (n != 8) return PGCL_ERR_FORMAT;
        uint64_t bits = be_uint(p, 8);
        v->type = PGCL_CHAIN_VALUE_REAL;
        memcpy(&v->real, &bits, sizeof v->real);
        return PGCL_OK;
    }
    case OID_FLOAT4: {
        if (n != 4) return PGCL_ERR_FORMAT;
        uint32_t bits = (uint32_t)be_uint(p, 4);
        float f;
        memcpy(&f, &bits, sizeof f);
        v->type = PGCL_CHAIN_VALUE_REAL;
        v->real = f;
        return PGCL_OK;
    }
    case OID_BYTEA:
        v->type = PGCL_CHAIN_VALUE_BLOB;
        v->bytes = p;
        v->len = (size_t)n;
        return PGCL_OK;
    default: /* text: its UTF-8 bytes in the binary format too */
        v->type = PGCL_CHAIN_VALUE_TEXT;
        v->bytes = p;
        v->len = (size_t)n;
        return PGCL_OK;
    }
}

/* The values of row `row` of a result of table `table`'s row select, its columns from offset, for
 * pgcl_chain_leaf_of_values. PGCL_ERR_FORMAT for a value of an unexpected size (a decision's input
 * SHA-256 that is not NULL or 32 bytes included). */
pgcl_status pgchain_row_values_of(int table, const PGresult *res, int row, int offset, row_values *r) {
    memset(r, 0, sizeof *r);
    r->n = PQnfields(res) - offset;
    PGCL_ASSERT(r->n <= MAX_ROW_COLUMNS &&
                (table != DECISIONS_TABLE || r->n == PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN +
                                                     PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS));
    for (int i = 0; i < r->n; i++) {
        pgcl_status st = column_value(res, row, offset + i, &r->v[i]);
        if (st != PGCL_OK) return st;
    }
    const pgcl_chain_value *input = &r->v[PGCL_CHAIN_DECISIONS_INPUT_COLUMN];
    if (table == DECISIONS_TABLE && input->type != PGCL_CHAIN_VALUE_NULL &&
        (input->type != PGCL_CHAIN_VALUE_BLOB || input->len != PGCL_SHA256_BYTES))
        return PGCL_ERR_FORMAT;
    return PGCL_OK;
}

/* Decision row_seq (DECISION_ROW_SQL) in the binary format (a vector or digest is sent as its
 * bytes, not as hex text), or NULL with *st and err. Read values with column_value and pgchain_binary_int. */
PGresult *pgchain_read_decision_row(PGconn *conn, int64_t row_seq, pgcl_status *st, char *err, int cap) {
    char seq_text[24];
    snprintf(seq_text, sizeof seq_text, "%lld", (long long)row_seq);
    const char *values[] = {seq_text};
    PGresult *res = PQexecParams(conn, DECISION_ROW_SQL, 1, NULL, values, NULL, NULL, 1);
    if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
        *st = PGCL_OK;
        return res;
    }
    pgcl_errorf(err, cap, "decisions: %.300s", res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
    char *nl = strchr(err, '\n');
    if (nl) *nl = 0;
    PQclear(res);
    *st = PGCL_ERR_DB;
    return NULL;
}

/* ---- small helpers ---- */

pgcl_status pgchain_begin_snapshot(PGconn *conn, char *err, int cap) {
    return pgcl_pg_exec(conn, "begin", BEGIN_SNAPSHOT_SQL, 0, NULL, err, cap);
}

void pgchain_end_transaction(PGconn *conn, bool commit) {
    char ignored[64];
    pgcl_pg_exec(conn, commit ? "commit" : "rollback", commit ? COMMIT_SQL : ROLLBACK_SQL, 0, NULL, ignored,
                 sizeof ignored);
}
