/* The transparency figures for a time range (GET /v1/audit/stats): decision counts by model
 * version, label and decision (created_at in range), and contest figures (contests filed in
 * range): filed, resolved, open, median time to resolution, overturns per model version. Returned
 * as a plain struct in the caller's arena; server/wire/review_json.c builds the answer. */
#ifndef PGCL_STATS_READS_H
#define PGCL_STATS_READS_H

#include <stdint.h>

#include "reader_pool.h"
#include "review_rows.h"
#include "row_arena.h"
#include "status.h"

typedef struct pgcl_model_version_count {
    const char *model_name, *model_version;
    int64_t count;
} pgcl_model_version_count;

typedef struct pgcl_named_count {
    const char *name;
    int64_t count;
} pgcl_named_count;

/* The contests of the decisions of one model version (names NULL when the decision is gone). */
typedef struct pgcl_contest_figures {
    const char *model_name, *model_version;
    int64_t filed, resolved, overturned;
    pgcl_opt_real median_resolution_seconds; /* absent when none is resolved */
} pgcl_contest_figures;

typedef struct pgcl_audit_stats {
    int64_t decisions_total;
    const pgcl_model_version_count *by_model_version; /* (n_by_model_version) by model, version */
    int n_by_model_version;
    const pgcl_named_count *by_label; /* (n_by_label) in the order the labels were first met */
    int n_by_label;
    const pgcl_named_count *by_decision; /* (n_by_decision) allow, review, block (always), then others */
    int n_by_decision;
    int64_t contests_filed, contests_resolved;
    pgcl_opt_real median_resolution_seconds;               /* over every resolved contest filed in range */
    const pgcl_contest_figures *contests_by_model_version; /* (n_contests_by_model_version) by model, version */
    int n_contests_by_model_version;
} pgcl_audit_stats;

/* A growable array of named counts in an arena. */
typedef struct pgcl_named_counts {
    pgcl_named_count *v;
    int n, room;
} pgcl_named_counts;

/* The decision figures of pgcl_audit_stats as both stores gather them, in an arena, from grouped
 * rows (model_name, model_version, label, decision, count; NULL where not grouped). */
typedef struct pgcl_decision_counts {
    pgcl_model_version_count *by_mv;
    int n_mv, room_mv;
    pgcl_named_counts by_label, by_decision;
    int64_t total;
} pgcl_decision_counts;

/* Empty counts whose by_decision lists allow, review and block first (at 0 until counted). False
 * when out of memory. */
bool pgcl_decision_counts_start(pgcl_row_arena *a, pgcl_decision_counts *dc);
/* Adds one grouped row (the rows of one model and version come one after another); strings are
 * copied into a. False when out of memory. */
bool pgcl_decision_counts_add(pgcl_row_arena *a, pgcl_decision_counts *dc, const char *model, const char *version,
                              const char *label, const char *decision, int64_t n);
/* Sets out's decisions_total, by_model_version, by_label and by_decision from dc. */
void pgcl_decision_counts_put(const pgcl_decision_counts *dc, pgcl_audit_stats *out);

/* The figures for [since, until) (columns' format; either may be NULL), read in one transaction,
 * allocated in a. PGCL_ERR_BUSY / PGCL_ERR_DB: the database could not be read; PGCL_ERR_NOMEM.
 * Thread-safe. */
pgcl_status pgcl_audit_stats_read(pgcl_qpool *p, const char *since, const char *until, pgcl_row_arena *a,
                                  pgcl_audit_stats *out, char *err, int cap);

#endif
