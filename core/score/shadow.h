/* Shadow scoring: a candidate version attached as the shadow of a model scores the same items as
 * the active version, off the response path. The scoring call (score.h) hands a copy of its inputs
 * and primary outcomes to pgcl_shadow_submit(), which never blocks (a full queue drops the job and
 * counts it); one worker thread with its own scratch runs the shadow forward pass and writes
 * shadow_decisions rows through the audit writer. A shadow can neither delay nor fail a live
 * request beyond the copy. What happened to each job is reported to an observer (the daemon's
 * metrics), so this file knows nothing of how it is exposed. */
#ifndef PGCL_SHADOW_H
#define PGCL_SHADOW_H

#include <stdbool.h>

#include "audit.h"
#include "ids.h"
#include "model.h"

typedef struct pgcl_shadow pgcl_shadow;

/* Told of every submitted job once: `items` items of primary model `model` were scored by the
 * shadow and recorded (dropped false), or dropped (queue full, out of memory, rows not written).
 * Called from the submitting thread or the worker; must be thread-safe. */
typedef void (*pgcl_shadow_count_fn)(void *ctx, const char *model, bool dropped, int items);

/* A shadow worker writing through `audit` (borrowed; must outlive it), queueing at most max_jobs
 * jobs, with scratch for chunk_rows rows per forward step. count (may be NULL) is told of every
 * job, with count_ctx. NULL when out of memory or the thread cannot start. */
pgcl_shadow *pgcl_shadow_create(pgcl_audit *audit, pgcl_shadow_count_fn count, void *count_ctx, int max_jobs,
                                int chunk_rows);
/* Scores what is queued, stops the worker and frees. Accepts NULL. Call before closing the audit. */
void pgcl_shadow_destroy(pgcl_shadow *s);

/* Changes how many jobs may wait (SIGHUP reload); a value <= 0 is ignored. Thread-safe. */
void pgcl_shadow_set_capacity(pgcl_shadow *s, int max_jobs);

/* Queues n items. Takes over the caller's references to primary and shadow in every case. Copies
 * z (n, D), the decision ids, the primary labels, decisions and probabilities (n, K), so the
 * caller's buffers may be freed on return. Returns false when the job was dropped (queue full or
 * out of memory). Thread-safe; never blocks on the worker. */
bool pgcl_shadow_submit(pgcl_shadow *s, pgcl_model *primary, pgcl_model *shadow, int n, const float *z,
                        const char (*decision_ids)[PGCL_UUID_LEN + 1], const int *labels,
                        const pgcl_decision *decisions, const float *probs);

/* The score a policy looks at: the probability of the threshold label, or the top probability.
 * probs: (K) of model m; label_index: the predicted label. */
double pgcl_policy_score(const pgcl_model *m, const float *probs, int label_index);

#endif
