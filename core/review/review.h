/* Contests and resolutions: the reviewer's writes to the audit log, each one transaction of the
 * audit writer (so it is chained and serialised with every other event). The rules are checked
 * inside that transaction, against the rows as they are, so two reviewers racing cannot both
 * succeed: at most one open contest per decision, a contest window, one resolution per contest,
 * and the key that filed a contest cannot resolve it. Decision rows are never changed. */
#ifndef PGCL_REVIEW_H
#define PGCL_REVIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "ids.h"
#include "status.h"

#define PGCL_REASON_MAX 2000 /* bytes of a contest reason or a resolution note */

typedef struct pgcl_contest_request {
    const char *decision_id;
    const char *reason;        /* 1..PGCL_REASON_MAX bytes */
    const char *filed_by;      /* actor */
    const char *filer_key_id;  /* NULL when keys are off */
    int window_days;
    /* out */
    char contest_id[PGCL_UUID_LEN + 1];
    char filed_at[PGCL_TIMESTAMP_LEN + 1];
    const char *code;          /* on failure: decision_not_found, contest_window_closed, contest_open */
} pgcl_contest_request;

/* Files a contest. PGCL_OK, or an error with r->code and a message in err. */
pgcl_status pgcl_review_file_contest(pgcl_audit *a, pgcl_contest_request *r, char *err, int cap);

typedef struct pgcl_resolution_request {
    const char *contest_id;
    const char *outcome;          /* "upheld" or "overturned" */
    const char *corrected_label;  /* NULL, or one of the decision's labels */
    const char *note;             /* 1..PGCL_REASON_MAX bytes */
    const char *resolved_by;
    const char *resolver_key_id;  /* NULL when keys are off */
    /* out */
    char resolved_at[PGCL_TIMESTAMP_LEN + 1];
    char decision_id[PGCL_UUID_LEN + 1];
    const char *code;             /* on failure: contest_not_found, already_resolved, filer_cannot_resolve,
                                     invalid_label */
} pgcl_resolution_request;

/* Resolves a contest. PGCL_OK, or an error with r->code and a message in err. */
pgcl_status pgcl_review_resolve(pgcl_audit *a, pgcl_resolution_request *r, char *err, int cap);

/* ---- for the audit stores: the rules every store checks, with their codes and messages ----
 * Each sets r->code and err and returns the error when its rule refuses, PGCL_OK otherwise. */

/* A contest on the decision's row: found whether r->decision_id names one, age_days its age in
 * days at the transaction's time. */
pgcl_status pgcl_review_check_decision(pgcl_contest_request *r, bool found, double age_days, char *err, int cap);
/* open_contest_id: the decision's open contest, NULL when it has none. */
pgcl_status pgcl_review_check_open(pgcl_contest_request *r, const char *open_contest_id, char *err, int cap);
/* A resolution on the contest's row: found whether r->contest_id names one; then its
 * decision_id (copied to r->decision_id), filer_key_id, the decision's probabilities (JSON text)
 * and the contest's resolutions so far. */
pgcl_status pgcl_review_check_resolution(pgcl_resolution_request *r, bool found, const char *decision_id,
                                         const char *filer_key_id, const char *probabilities, int64_t resolutions,
                                         char *err, int cap);

#endif
