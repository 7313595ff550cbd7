/* A fixed set of compute slots on one backend (core/backend.h: the CPU, or a CUDA device). A
 * request takes a slot for its forward pass, so at most `workers` forward passes run at once
 * however many connections are open, and the hot path allocates nothing: a slot's backend worker
 * (scratch; on a GPU also its stream, cuBLAS handle and pinned buffers) is created on first use and
 * re-created only when a model with wider layers arrives. */
#ifndef PGCLD_COMPUTE_H
#define PGCLD_COMPUTE_H

#include <stdint.h>

#include "backend.h"
#include "model.h"

typedef struct pgcld_compute pgcld_compute;

/* `workers` slots of `chunk_rows` rows per step on `backend`. Takes ownership of backend (destroyed
 * by pgcld_compute_destroy(), or here when this fails). NULL when out of memory. */
pgcld_compute *pgcld_compute_create(pgcl_backend *backend, int workers, int chunk_rows);
void pgcld_compute_destroy(pgcld_compute *c); /* accepts NULL; no forward pass may be running */

/* The backend the slots run on. */
pgcl_backend *pgcld_compute_backend(pgcld_compute *c);

/* Runs the forward pass of n rows on a free slot, waiting for one if all are busy; *t_start_us
 * (may be NULL) receives the monotonic time the slot was obtained. Returns PGCL_OK, PGCL_ERR_NOMEM
 * when a worker could not be allocated (host or device memory), or PGCL_ERR_IO when the device
 * failed (logged with the device's message). */
pgcl_status pgcld_compute_forward(pgcld_compute *c, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us);

#endif
