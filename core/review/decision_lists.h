/* Filtered decision lists with keyset cursors (GET /v1/decisions), and the SQL and plan behind a
 * page (for the benchmark and tests). Every value that comes from a caller is bound as a
 * parameter, never pasted into SQL text. Rows come back as plain structs (review_rows.h) in the
 * caller's arena; server/wire/review_json.c builds the answer. */
#ifndef PGCL_DECISION_LISTS_H
#define PGCL_DECISION_LISTS_H

#include <stdint.h>

#include "reader_pool.h"
#include "review_rows.h"
#include "row_arena.h"
#include "status.h"
#include "time_cursor.h"

/* One page of a decision listing. */
typedef struct pgcl_decision_page {
    const pgcl_decision_summary *rows; /* (n) newest first */
    int n;
    int64_t next_before; /* the seq to pass as before_seq for the next page, or 0: no more rows */
} pgcl_decision_page;

/* Up to `limit` decision summaries matching f, newest first, with seq < before_seq (0: from the
 * newest), read in one transaction; rows allocated in a. PGCL_ERR_BUSY / PGCL_ERR_DB: the database
 * could not be read; PGCL_ERR_INVALID: the query outgrew the builder; PGCL_ERR_NOMEM.
 * Thread-safe. */
pgcl_status pgcl_decisions_list(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                pgcl_row_arena *a, pgcl_decision_page *out, char *err, int cap);

/* How pgcl_decisions_list() would read a page. */
typedef struct pgcl_decisions_plan {
    const char *sql;          /* the query, '?' for each bound value */
    const char *strategy;     /* which plan was chosen, in words (a literal) */
    const char *const *lines; /* (n_lines) SQLite's EXPLAIN QUERY PLAN, indented by depth */
    int n_lines;
} pgcl_decisions_plan;

/* The SQL that pgcl_decisions_list() would run for these arguments and its EXPLAIN QUERY PLAN,
 * allocated in a. Errors as pgcl_decisions_list(). */
pgcl_status pgcl_decisions_explain(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   pgcl_row_arena *a, pgcl_decisions_plan *out, char *err, int cap);

#endif
