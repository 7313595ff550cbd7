/* Cross-request batching: concurrent requests for the same model version are coalesced into one
 * forward pass, so single-item traffic gets large-batch GEMM efficiency.
 *
 * Opportunistic by default: a worker takes every job queued for the model at the head of the
 * queue (up to max_rows rows) the moment it is free, so an idle daemon adds no delay and a busy
 * one batches by itself while its workers compute. --batch-max-wait-us > 0 additionally holds a
 * batch open that long for more rows. Jobs of max_rows rows or more run alone, without copies. */
#ifndef PGCL_BATCHER_H
#define PGCL_BATCHER_H

#include <stdint.h>

#include "compute_slots.h"
#include "model.h"

typedef struct pgcl_batcher pgcl_batcher;

/* workers: threads running forward passes (normally the compute slot count). */
pgcl_batcher *pgcl_batcher_create(pgcl_compute_slots *compute, int workers, int max_rows, long max_wait_us);
/* Finishes queued jobs and joins the workers. Accepts NULL. */
void pgcl_batcher_destroy(pgcl_batcher *b);

/* Runs the forward pass of n rows z (n, D) of model m, possibly together with other requests';
 * writes vectors (n, d) and probs (n, K). Blocks until done. *t_start_us (may be NULL) gets the
 * time the batch started computing; *batch_rows (may be NULL) the rows of the batch it ran in. */
pgcl_status pgcl_batcher_forward(pgcl_batcher *b, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us, int *batch_rows);

/* What pgcl_batcher_submit calls when its forward pass is over: st (PGCL_OK, or why it failed:
 * PGCL_ERR_CLOSED when the batcher is stopping, PGCL_ERR_NOMEM, a backend error), the time the
 * batch started computing and the rows of the batch it ran in. */
typedef void (*pgcl_batcher_done_fn)(void *ctx, pgcl_status st, int64_t t_start_us, int batch_rows);

/* The asynchronous form of pgcl_batcher_forward, for callers that must not hold a thread while
 * they wait (the event-driven HTTP server): queues the job and returns at once. done(ctx, ...) is
 * called exactly once, on a batcher worker right after the batch's forward pass (it delays that
 * worker's next batch, so it should hand heavy work on rather than block), or before submit returns
 * when the job cannot be queued (stopping, out of memory). z must stay valid and vectors, probs
 * writable until then. Jobs of max_rows rows or more are queued too (they run alone, without
 * copies), never on the submitter's thread. */
void pgcl_batcher_submit(pgcl_batcher *b, const pgcl_model *m, const float *z, int n, float *vectors, float *probs,
                         pgcl_batcher_done_fn done, void *ctx);

#endif
