/* Shadow scoring: a candidate version attached as the shadow of a model scores the same items as
 * the active version, off the response path. The request handler hands a copy of its inputs and
 * primary outcomes to pgcld_shadow_submit(), which never blocks (a full queue drops the job and
 * counts it); one worker thread with its own scratch runs the shadow forward pass and writes
 * shadow_decisions rows through the audit writer. A shadow can neither delay nor fail a live
 * request beyond the copy. */
#ifndef PGCLD_SHADOW_H
#define PGCLD_SHADOW_H

#include <stdbool.h>

#include "audit.h"
#include "ids.h"
#include "metrics.h"
#include "model.h"

typedef struct pgcld_shadow pgcld_shadow;

pgcld_shadow *pgcld_shadow_create(pgcl_audit *audit, pgcld_metrics *metrics, int max_jobs, int chunk_rows);
/* Scores what is queued, stops the worker and frees. Accepts NULL. Call before closing the audit. */
void pgcld_shadow_destroy(pgcld_shadow *s);

/* Changes how many jobs may wait (SIGHUP reload). */
void pgcld_shadow_set_capacity(pgcld_shadow *s, int max_jobs);

/* Queues n items. Takes over the caller's references to primary and shadow in every case. Copies
 * z (n, D), the decision ids, the primary labels, decisions and probabilities (n, K). Returns false
 * when the job was dropped (queue full or out of memory). */
bool pgcld_shadow_submit(pgcld_shadow *s, pgcl_model *primary, pgcl_model *shadow, int n, const float *z,
                         const char (*decision_ids)[PGCL_UUID_LEN + 1], const int *labels,
                         const pgcl_decision *decisions, const float *probs);

/* The score a policy looks at: the probability of the threshold label, or the top probability. */
double pgcld_policy_score(const pgcl_model *m, const float *probs, int label_index);

#endif
