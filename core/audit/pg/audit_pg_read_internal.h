/* The PostgreSQL store's reads (audit_pg.h), inside: what their files share. Each read has exactly
 * the contract and the output structs of its SQLite counterpart (audit_reads.h; core/review/), so
 * that the JSON answers built from them in server/ are the same whichever store holds the record.
 *
 * Files:
 *   audit_pg_read_txn.c    the read transaction (a pooled connection, one snapshot) and the row
 *                          columns every read takes (a decision's summary, facts, a resolution)
 *   audit_pg_reads.c       the reviewers' reads: one decision, the decision lists, the contest queue
 *   audit_pg_read_stats.c  the transparency figures
 *   audit_pg_read_export.c the export, chunk by chunk
 *   audit_pg_read_ops.c    the scoring routes' and operators' reads: a decision as recorded with its
 *                          input (re-score), idempotency keys, activations, the shadow report, where
 *                          a decision was archived
 * Nothing here is for other files of the store.
 *
 * Shape of every read: a connection from the store's read pool (PGCL_PG_READ_WAIT_MS; each set up
 * once with extra_float_digits = 3 by the pool, PGCL_PG_POOL_SESSION_SQL, so that double precision
 * columns come back in text that strtod turns into the stored double exactly), constant SQL with text
 * parameters ($n), the connection given back. A read of one query runs it as one statement (its
 * own snapshot: one round trip, pgcl_pg_read_once); a read of several runs them in a read-only
 * REPEATABLE READ transaction (one snapshot for all of them: pgcl_pg_read_txn_open, ROLLBACK in
 * pgcl_pg_read_txn_close). bytea columns come back in hex text and are decoded (pgcl_pg_bytea).
 *
 * Order: seq is handed out in commit order across the fleet (migrations/pg/0001_fleet.sql,
 * fleet_counters), so the committed rows of a table are always a prefix of its seqs and the
 * seq cursors of the lists never skip a row that commits late on another writer, as with SQLite.
 *
 * Collation: timestamps are fixed-format RFC 3339 text, ordered alike in any collation; names
 * whose order shows in an answer (labels, model versions) are sorted COLLATE "C", SQLite's BINARY. */
#ifndef PGCL_AUDIT_PG_READ_INTERNAL_H
#define PGCL_AUDIT_PG_READ_INTERNAL_H

#include <stdio.h>

#include "audit_pg.h"
#include "read_sql.h" /* PGCL_READ_ERR_CAP, FACTS_COLS */

/* Whether a decision has been contested, derived from its contests (alias d in the query): the
 * meaning of read_sql.h's CONTEST_STATUS_SQL, written as one correlated aggregate so that
 * PostgreSQL probes contests_decision per row (its NOT EXISTS forms get hashed over the whole
 * contests table). */
#define PG_CONTEST_STATUS_SQL                                                                                          \
    "(SELECT CASE WHEN count(*) = 0 THEN 'none' WHEN count(*) FILTER (WHERE r1.seq IS NULL) > 0 THEN 'open'"           \
    " ELSE 'resolved' END FROM contests c1 LEFT JOIN resolutions r1 ON r1.contest_id = c1.contest_id"                  \
    " WHERE c1.decision_id = d.decision_id)"

/* The summary of a decision: columns 0..10 of every list and export query (read_sql.h's SUMMARY_COLS;
 * pgcl_pg_summary_of reads them). A decision's facts (review_rows.h, FACTS_COLS) come after the
 * summary in the lists' rows, and in a record's. */
#define PG_SUMMARY_COLS                                                                                                \
    "d.seq, d.decision_id, d.created_at, d.item_id, d.request_id, d.model_name, d.model_version, d.label,"             \
    " d.decision, d.toxicity, " PG_CONTEST_STATUS_SQL

/* ---- the read transaction (audit_pg_read_txn.c) ---- */

/* A read connection inside a read-only REPEATABLE READ transaction (for a read of several
 * queries: one snapshot), in *conn; or a status with err set ("reading the audit database: …")
 * and *conn NULL. A pooled connection the server has closed is replaced. The caller ends it with
 * pgcl_pg_read_txn_close. */
pgcl_status pgcl_pg_read_txn_open(pgcl_audit *store, PGconn **conn, char *err, int cap);

/* Ends the read transaction (whatever its state: ROLLBACK) and gives the connection back to the
 * read pool. Accepts NULL. */
void pgcl_pg_read_txn_close(pgcl_audit *store, PGconn *conn);

/* Runs a query of the read on conn (sql constant, n text parameters): its result, which the caller
 * PQclears; or NULL with err "reading the audit database: …" and *st on failure. */
PGresult *pgcl_pg_read_txn_query(PGconn *conn, const char *sql, int n, const char *const *values, pgcl_status *st,
                                 char *err, int cap);

/* A read of one query: sql (constant, n text parameters) run as one statement (its own snapshot)
 * on a pooled connection, given back at once; the result, which the caller PQclears, or NULL with
 * err ("<prefix>: query: …") and *st on failure. A pooled connection the server has closed is
 * replaced and the query run again (a read changes nothing). */
PGresult *pgcl_pg_read_once(pgcl_audit *store, const char *prefix, const char *sql, int n, const char *const *values,
                            pgcl_status *st, char *err, int cap);

/* ---- the columns of a row (audit_pg_read_txn.c) ----
 * Strings are copied into the arena a; a failed copy leaves the field NULL and sets a->failed,
 * which the caller checks once after the row (out_of_memory). */

/* Columns 0..10 (PG_SUMMARY_COLS) of row. */
void pgcl_pg_summary_of(pgcl_row_arena *a, const PGresult *res, int row, pgcl_decision_summary *out);

/* Columns first..first+3 (FACTS_COLS) of row. */
void pgcl_pg_facts_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_decision_facts *out);

/* Resolution columns first..first+6 (seq, resolved_at, resolved_by, resolver_key_id, outcome,
 * corrected_label, note) of row: present false when the seq is NULL. */
void pgcl_pg_resolution_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_resolution_row *out);

/* ---- values ---- */

/* An integer parameter in text. */
typedef struct int_text {
    char s[24];
} int_text;

static inline int_text int_param(int64_t v) {
    int_text t;
    snprintf(t.s, sizeof t.s, "%lld", (long long)v);
    return t;
}

/* A text column, copied into a (NULL for SQL NULL). */
static inline const char *text_of(pgcl_row_arena *a, const PGresult *res, int row, int col) {
    return pgcl_row_arena_strdup(a, pgcl_pg_text(res, row, col));
}

static inline pgcl_opt_real opt_real_of(const PGresult *res, int row, int col) {
    if (PQgetisnull(res, row, col)) return (pgcl_opt_real){0};
    return (pgcl_opt_real){.present = true, .value = pgcl_pg_double(res, row, col)};
}

static inline pgcl_opt_int opt_int_of(const PGresult *res, int row, int col) {
    if (PQgetisnull(res, row, col)) return (pgcl_opt_int){0};
    return (pgcl_opt_int){.present = true, .value = pgcl_pg_int(res, row, col)};
}

/* A boolean column ('t' / 'f'). */
static inline bool bool_of(const PGresult *res, int row, int col) {
    const char *v = pgcl_pg_text(res, row, col);
    return v && v[0] == 't';
}

/* Sets err to "out of memory": PGCL_ERR_NOMEM, for `return out_of_memory(err, cap);`. */
static inline pgcl_status out_of_memory(char *err, int cap) {
    pgcl_errorf(err, cap, "out of memory");
    return PGCL_ERR_NOMEM;
}

#endif
