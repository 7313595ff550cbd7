/* The row shapes that more than one reviewer read returns: a decision's summary (lists, export)
 * and a contest's resolution (one decision, contest queue). Plain structs: every string is
 * NUL-terminated UTF-8 as stored, NULL where the column is NULL, and lives in the read's
 * pgcl_row_arena (row_arena.h). The JSON of the HTTP answers is built from them in server/. */
#ifndef PGCL_REVIEW_ROWS_H
#define PGCL_REVIEW_ROWS_H

#include <stdbool.h>
#include <stdint.h>

/* A number column that may be NULL. */
typedef struct pgcl_opt_real {
    bool present;
    double value;
} pgcl_opt_real;

typedef struct pgcl_opt_int {
    bool present;
    int64_t value;
} pgcl_opt_int;

/* What a decision row holds beside the decision (migration 0011), each NULL when absent: the
 * request's trace id and the item's facts for a statement of reasons (territorial_scope the JSON
 * array text as stored). */
typedef struct pgcl_decision_facts {
    const char *trace_id, *content_date, *territorial_scope, *content_language;
} pgcl_decision_facts;

/* One decision as the lists show it. */
typedef struct pgcl_decision_summary {
    int64_t seq;
    const char *decision_id, *created_at, *item_id, *request_id, *model_name, *model_version, *label, *decision;
    pgcl_opt_real toxicity;
    const char *contest_status; /* "none", "open" or "resolved" (derived from the contests) */
    pgcl_decision_facts facts;  /* the lists' rows only (NULLs in an export's) */
} pgcl_decision_summary;

/* A contest's resolution; present false while the contest is open. */
typedef struct pgcl_resolution_row {
    bool present;
    const char *resolved_at, *resolved_by, *resolver_key_id, *outcome, *corrected_label, *note;
} pgcl_resolution_row;

#endif
