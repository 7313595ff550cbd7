/* One decision in full, for the reviewers: every column of the decision row but the stored input,
 * its entry in the audit chain, its contests oldest first with their resolutions, and the outcome
 * in force derived from them (the decision row itself never changes). Read in one transaction on a
 * pooled connection; returned as a plain struct (server/wire/review_json.c turns it into the answer of
 * GET /v1/decisions/{id}). */
#ifndef PGCL_DECISION_RECORD_H
#define PGCL_DECISION_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "reader_pool.h"
#include "review_rows.h"
#include "row_arena.h"
#include "status.h"

/* One contest of a decision. */
typedef struct pgcl_contest_row {
    const char *contest_id, *filed_at, *filed_by, *filer_key_id, *reason;
    pgcl_resolution_row resolution; /* present false while the contest is open */
} pgcl_contest_row;

/* What is in force for a decision now (see pgcl_effective_outcome_of). Strings are literals or
 * point into the record. */
typedef struct pgcl_effective_outcome {
    const char *status;     /* "original", "contested", "upheld" or "overturned" */
    const char *label;      /* in force now (while a contest is open: the one it challenges) */
    const char *decision;   /* likewise */
    const char *decided_by; /* "automated" or "reviewer" */
    const char *contest_id; /* the latest contest, or NULL */
} pgcl_effective_outcome;

typedef struct pgcl_decision_record {
    int64_t seq;
    const char *decision_id, *created_at, *request_id, *item_id, *model_name, *model_version, *model_sha256;
    const char *label;
    pgcl_opt_int label_index;
    const char *probabilities; /* the stored JSON text (an object label -> probability), or NULL */
    pgcl_opt_real toxicity;
    const char *decision;
    const char *policy; /* the stored JSON text of the policy, or NULL */
    pgcl_opt_real t_review, t_block;
    const float *vector; /* (n_vector) the task-adapted vector, decoded from its float32 BLOB */
    int n_vector;
    const char *input_sha256;
    pgcl_opt_int latency_us;
    const char *input_stored;   /* "f16" / "f32" when the input is stored, else NULL */
    bool input_dropped;         /* the input was stored, then dropped after --input-retention-days */
    const char *contest_status; /* "none", "open" or "resolved" */
    pgcl_decision_facts facts;
    bool has_chain;             /* the chain entry of the row: */
    pgcl_opt_int chain_seq;
    const char *chain_hash;
    const char *writer_id;            /* the chain's writer (PostgreSQL store: one chain per writer), or
                                       * NULL (SQLite store: one chain) */
    const pgcl_contest_row *contests; /* (n_contests) oldest first */
    int n_contests;
    pgcl_effective_outcome outcome;
} pgcl_decision_record;

/* Reads the record of decision_id into *out, its strings and arrays allocated in a (the caller
 * releases a when done with *out). PGCL_ERR_NOT_FOUND: no such decision (err says so);
 * PGCL_ERR_BUSY / PGCL_ERR_DB: the database could not be read; PGCL_ERR_NOMEM. Thread-safe. */
pgcl_status pgcl_decision_record_read(pgcl_qpool *p, const char *decision_id, pgcl_row_arena *a,
                                      pgcl_decision_record *out, char *err, int cap);

/* The effective outcome of a decision with the given automated label and decision and its
 * contests (oldest first): the rule is stated at its definition. Pure; never fails. */
pgcl_effective_outcome pgcl_effective_outcome_of(const char *label, const char *decision,
                                                 const pgcl_contest_row *contests, int n_contests);

#endif
