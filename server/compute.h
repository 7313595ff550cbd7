/* A fixed set of compute slots, each with its own scratch activations. A request takes a slot for
 * its forward pass, so at most `workers` forward passes run at once however many connections are
 * open, and the hot path allocates nothing: a slot's scratch is created on first use and re-created
 * only when a model with wider layers arrives. */
#ifndef PGCLD_COMPUTE_H
#define PGCLD_COMPUTE_H

#include <stdint.h>

#include "model.h"

typedef struct pgcld_compute pgcld_compute;

pgcld_compute *pgcld_compute_create(int workers, int chunk_rows);
void pgcld_compute_destroy(pgcld_compute *c); /* accepts NULL */

/* Runs the forward pass of n rows on a free slot, waiting for one if all are busy; *t_start_us
 * (may be NULL) receives the monotonic time the slot was obtained. Returns PGCL_OK, or
 * PGCL_ERR_NOMEM when a scratch could not be allocated. */
pgcl_status pgcld_compute_forward(pgcld_compute *c, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us);

#endif
