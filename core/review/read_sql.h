/* What the reviewer reads share below their own SQL (private to core's read modules:
 * decision_record, decision_lists, contest_reads, stats_reads, export):
 *   - the SQL builder: text only from literals (qb_sql), every value a bound '?' (qb_text, qb_int),
 *     so no caller value is ever pasted into SQL (tests/integration/test_sql_params.py checks it);
 *   - a read transaction, a scalar query, the error of a failed step;
 *   - columns copied into a row arena, and the two row shapes more than one read takes
 *     (the decision summary, a resolution). */
#ifndef PGCL_READ_SQL_H
#define PGCL_READ_SQL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "review_rows.h"
#include "row_arena.h"
#include "status.h"

#define PGCL_READ_ERR_CAP 512

/* ---- the SQL builder ---- */

#define QB_SQL_CAP 32768
#define QB_MAX_ARGS 512

typedef struct qarg {
    bool is_int;
    int64_t i;
    const char *s; /* borrowed: must outlive the prepared statement */
} qarg;

typedef struct qbuild {
    char sql[QB_SQL_CAP];
    size_t len;
    qarg args[QB_MAX_ARGS];
    int n;
    bool overflow; /* text or values did not fit: qb_prepare refuses the query */
} qbuild;

/* Appends SQL text. Only literals (and macros of literals) may be passed. */
void qb_sql(qbuild *q, const char *text);
/* Appends '?' and records the value to bind (text borrowed: it must outlive the statement). */
void qb_text(qbuild *q, const char *s);
void qb_int(qbuild *q, int64_t v);

/* Prepares prefix (a literal, or NULL) + the built SQL and binds its values.
 * PGCL_ERR_INVALID: the builder overflowed; PGCL_ERR_DB: SQLite refused it (err says why). */
pgcl_status qb_prepare(sqlite3 *db, const qbuild *q, const char *prefix, sqlite3_stmt **out, char *err, int cap);

/* ---- reading ---- */

/* The status of a failed sqlite3_step (rc): PGCL_ERR_BUSY when busy or locked, else PGCL_ERR_DB;
 * err says "reading the audit database: …". */
pgcl_status pgcl_read_step_error(sqlite3 *db, int rc, char *err, int cap);

/* The status of a pgcl_db_each_row() result: PGCL_OK for SQLITE_OK and SQLITE_DONE (a row
 * callback that stops after the row it needed); SQLITE_NOMEM (a callback out of memory) is
 * PGCL_ERR_NOMEM with err "out of memory"; SQLITE_BUSY or SQLITE_LOCKED (as pgcl_read_step_error) PGCL_ERR_BUSY;
 * anything else PGCL_ERR_DB (err as pgcl_db_each_row set it). */
pgcl_status pgcl_read_walk_status(int rc, char *err, int cap);

/* Starts a read transaction: the queries that follow see one snapshot (released with the
 * connection: pgcl_qpool_release rolls it back). */
pgcl_status pgcl_read_begin(sqlite3 *db, char *err, int cap);

/* Runs q, a query of one integer column, and takes its first row: *out its value (0 when there is
 * no row or the value is NULL; *null, when given, says which). */
pgcl_status pgcl_read_scalar_int(sqlite3 *db, const qbuild *q, int64_t *out, bool *null, char *err, int cap);

/* ---- columns ---- */

/* Column i as text copied into a (NULL when the column is NULL, or when out of memory: a->failed). */
const char *pgcl_read_text(pgcl_row_arena *a, sqlite3_stmt *s, int i);
/* Column i as a number, absent when the column is NULL. */
pgcl_opt_real pgcl_read_opt_real(sqlite3_stmt *s, int i);
pgcl_opt_int pgcl_read_opt_int(sqlite3_stmt *s, int i);

/* Whether a decision has been contested, derived from its contests (alias d in the query). */
#define CONTEST_STATUS_SQL                                                                                             \
    "(CASE WHEN NOT EXISTS (SELECT 1 FROM contests c1 WHERE c1.decision_id = d.decision_id) THEN 'none'"               \
    " WHEN EXISTS (SELECT 1 FROM contests c1 WHERE c1.decision_id = d.decision_id AND NOT EXISTS"                      \
    " (SELECT 1 FROM resolutions r1 WHERE r1.contest_id = c1.contest_id)) THEN 'open' ELSE 'resolved' END)"

/* The summary of a decision: columns 0..10 of every list and export query. */
#define SUMMARY_COLS                                                                                                   \
    "d.seq, d.decision_id, d.created_at, d.item_id, d.request_id, d.model_name, d.model_version, d.label,"             \
    " d.decision, d.toxicity, " CONTEST_STATUS_SQL

/* The facts of a decision (review_rows.h): four columns of a list's rows after its SUMMARY_COLS,
 * and of a record's. */
#define FACTS_COLS "d.trace_id, d.content_date, d.territorial_scope, d.content_language"

/* Columns first..first+3 (FACTS_COLS) of the current row, strings copied into a. */
void pgcl_read_facts(pgcl_row_arena *a, sqlite3_stmt *s, int first, pgcl_decision_facts *out);

/* Columns 0..10 (SUMMARY_COLS) of the current row, strings copied into a. */
void pgcl_read_summary(pgcl_row_arena *a, sqlite3_stmt *s, pgcl_decision_summary *out);

/* Resolution columns first..first+6 (seq, resolved_at, resolved_by, resolver_key_id, outcome,
 * corrected_label, note): present false when the seq is NULL. */
void pgcl_read_resolution(pgcl_row_arena *a, sqlite3_stmt *s, int first, pgcl_resolution_row *out);

#endif
