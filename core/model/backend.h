/* Compute backends: one interface for the PGCL forward pass, several implementations. The CPU
 * backend (core/model/backend_cpu.c) wraps pgcl_scratch/pgcl_forward on OpenBLAS; the CUDA backend
 * (gpu/backend_cuda.c, only when built with CUDA) runs the same fast path with cuBLAS and a few
 * kernels. Callers see opaque handles; the function table lives in core/model/backend_impl.h.
 *
 * Three objects, one job each:
 *  - pgcl_backend: the device and its settings. Shared by every thread. It also keeps, for backends
 *    that need it, each model's device-resident state (weights uploaded once per model version);
 *    see "Model state" below.
 *  - pgcl_backend_worker: what one concurrent forward pass owns (scratch activations; on a GPU a
 *    stream, a cuBLAS handle, device buffers and pinned host buffers), sized for `max_rows` rows at
 *    a time and a model's layer widths. One thread at a time.
 *  - the model (core/model/model.h): immutable and shared.
 *
 * Model state: a pgcl_model is immutable and reference-counted and has no slot for a backend's
 * data, so the backends keep their per-model state in a small cache (core/model/backend.c), keyed by
 * backend, model pointer and weights SHA-256. An entry holds a reference to its model, which keeps
 * the pointer unique while the entry lives. An entry whose model has no holder but backend caches
 * (no registry slot, no request: its refcount equals the number of cache entries for it) is
 * dropped — state freed, reference released — by the next pgcl_backend_forward() or
 * pgcl_backend_trim() on that backend, so device memory follows the models the server actually
 * keeps; a retired version stays resident until the next forward pass on that backend. The CPU
 * backend has no per-model state and never takes a reference. */
#ifndef PGCL_BACKEND_H
#define PGCL_BACKEND_H

#include <stdbool.h>

#include "model.h"
#include "status.h"

typedef struct pgcl_backend pgcl_backend;
typedef struct pgcl_backend_worker pgcl_backend_worker;

/* The CPU/OpenBLAS backend. NULL only when out of memory. */
pgcl_backend *pgcl_backend_cpu_create(void);

/* Frees the backend and every cached model state (releasing the models' references). Every
 * worker must have been destroyed first. Accepts NULL. */
void pgcl_backend_destroy(pgcl_backend *b);

/* "cpu" or "cuda". Never NULL. */
const char *pgcl_backend_kind(const pgcl_backend *b);

/* What serves, for the start-up log: "cpu (OpenBLAS, Haswell kernel)", "cuda:0 (NVIDIA H200,
 * sm_90, 139.8 GiB, fp32)". Never NULL. */
const char *pgcl_backend_name(const pgcl_backend *b);

/* A worker for up to max_rows rows per step, sized for m's dimensions (reusable for any model
 * that pgcl_backend_worker_fits()). NULL on failure with the reason in err. Thread-safe. */
pgcl_backend_worker *pgcl_backend_worker_create(pgcl_backend *b, const pgcl_model *m, int max_rows, char *err,
                                                int cap);
void pgcl_backend_worker_destroy(pgcl_backend_worker *w); /* accepts NULL */

/* True when w is large enough for m's dimensions. */
bool pgcl_backend_worker_fits(const pgcl_backend_worker *w, const pgcl_model *m);

/* Rows the worker processes per step. */
int pgcl_backend_worker_rows(const pgcl_backend_worker *w);

/* Makes m's state resident (for the CUDA backend: uploads its weights) if it is not already. The
 * forward pass does this on first use; calling it earlier moves the upload off a request. Returns
 * PGCL_OK, PGCL_ERR_NOMEM (host or device memory) or PGCL_ERR_IO (the device failed), with the
 * reason in err. Thread-safe; w is used for the upload and must not be in use elsewhere. */
pgcl_status pgcl_backend_prepare(pgcl_backend_worker *w, const pgcl_model *m, char *err, int cap);

/* The forward pass: z (n, D) row-major; writes vectors (n, d) and probs (n, K). Any n >= 0; rows
 * are processed pgcl_backend_worker_rows() at a time. m must stay referenced by the caller for the
 * duration. Returns PGCL_OK, PGCL_ERR_NOMEM, PGCL_ERR_IO (a device error, logged with its text
 * where it happened) or PGCL_ERR_INVALID (w does not fit m: a caller's bug, logged); outputs are
 * undefined on error. Allocates nothing on
 * the CPU backend, and nothing once m's state is resident on the CUDA backend. One thread per
 * worker; any number of workers of one backend may run at once. */
pgcl_status pgcl_backend_forward(pgcl_backend_worker *w, const pgcl_model *m, const float *z, int n, float *vectors,
                                 float *probs);

/* Drops the cached state of every model that no one but the cache holds. Thread-safe. */
void pgcl_backend_trim(pgcl_backend *b);

/* Number of models whose state the backend holds (for tests and metrics). */
int pgcl_backend_cached_models(pgcl_backend *b);

#endif
