/* A fixed set of compute slots on one backend (core/model/backend.h: the CPU, or a CUDA device). A
 * request takes a slot for its forward pass, so at most `workers` forward passes run at once
 * however many connections are open, and the hot path allocates nothing: a slot's backend worker
 * (scratch; on a GPU also its stream, cuBLAS handle and pinned buffers) is created on first use and
 * re-created only when a model with wider layers arrives. */
#ifndef PGCL_COMPUTE_SLOTS_H
#define PGCL_COMPUTE_SLOTS_H

#include <stdint.h>

#include "backend.h"
#include "model.h"

typedef struct pgcl_compute_slots pgcl_compute_slots;

/* `workers` slots of `chunk_rows` rows per step on `backend`. Takes ownership of backend (destroyed
 * by pgcl_compute_slots_destroy(), or here when this fails). NULL when out of memory. */
pgcl_compute_slots *pgcl_compute_slots_create(pgcl_backend *backend, int workers, int chunk_rows);
void pgcl_compute_slots_destroy(pgcl_compute_slots *c); /* accepts NULL; no forward pass may be running */

/* The backend the slots run on. */
pgcl_backend *pgcl_compute_slots_backend(pgcl_compute_slots *c);

/* Runs the forward pass of n rows on a free slot, waiting for one if all are busy; *t_start_us
 * (may be NULL) receives the monotonic time the slot was obtained. Returns PGCL_OK, PGCL_ERR_NOMEM
 * when a worker could not be allocated (host or device memory), or PGCL_ERR_IO when the device
 * failed (logged with the device's message). */
pgcl_status pgcl_compute_slots_forward(pgcl_compute_slots *c, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us);

#endif
