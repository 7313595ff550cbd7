/* The contest queue for reviewers (GET /v1/contests): open contests oldest first, or resolved ones
 * most recently resolved first, each with its decision's label, decision and model, its deadline
 * and its age. Rows come back as plain structs in the caller's arena; server/wire/review_json.c builds
 * the answer. */
#ifndef PGCL_CONTEST_READS_H
#define PGCL_CONTEST_READS_H

#include <stdbool.h>
#include <stdint.h>

#include "reader_pool.h"
#include "review_rows.h"
#include "row_arena.h"
#include "status.h"

/* One contest of the queue. */
typedef struct pgcl_contest_queue_row {
    const char *contest_id, *decision_id, *filed_at, *filed_by, *reason;
    bool timed;                        /* filed_at parsed: the next three members are set */
    int64_t age_seconds;               /* now - filed_at, in whole seconds (rounded towards minus infinity) */
    char deadline[PGCL_QTIME_LEN + 1]; /* filed_at + the contest window */
    bool overdue;                      /* open and past its deadline */
    pgcl_resolution_row resolution;
    const char *label, *decision, *model_name, *model_version, *item_id; /* of the decision (NULL if gone) */
} pgcl_contest_queue_row;

/* Sets c's timed, deadline (filed_at + window_days), age_seconds (at now_us) and overdue (open and
 * past its deadline) when c->filed_at parses; leaves them unset otherwise. Every store's queue. */
void pgcl_contest_queue_row_time(pgcl_contest_queue_row *c, bool open, int window_days, int64_t now_us);

typedef struct pgcl_contest_page {
    const pgcl_contest_queue_row *rows; /* (n) */
    int n;
    int64_t next; /* the cursor seq for the next page, or 0: no more rows */
} pgcl_contest_page;

/* Up to `limit` contests: open ones oldest first (the review queue, seq > after_seq; 0 = from the
 * start), or resolved ones most recently resolved first (resolution seq < after_seq; 0 = from the
 * newest). Deadlines are filed_at + window_days, ages are taken at now_us. Rows allocated in a.
 * PGCL_ERR_BUSY / PGCL_ERR_DB: the database could not be read; PGCL_ERR_NOMEM. Thread-safe. */
pgcl_status pgcl_contests_list(pgcl_qpool *p, bool open, int64_t after_seq, int limit, int window_days, int64_t now_us,
                               pgcl_row_arena *a, pgcl_contest_page *out, char *err, int cap);

#endif
