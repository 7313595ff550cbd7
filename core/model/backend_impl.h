/* For backend implementations only (core/model/backend_cpu.c, gpu/backend_cuda.c): the function table
 * behind core/model/backend.h. Callers use backend.h and never see this file.
 *
 * `ctx` is the implementation's backend-wide state, `worker` its per-worker state and `state` its
 * per-model state, all opaque to core/model/backend.c. Entries marked optional may be NULL. */
#ifndef PGCL_BACKEND_IMPL_H
#define PGCL_BACKEND_IMPL_H

#include "backend.h"

typedef struct pgcl_backend_ops {
    const char *kind; /* "cpu", "cuda" */

    /* Frees ctx. Called once by pgcl_backend_destroy() after every model state was released. */
    void (*destroy)(void *ctx);

    /* A worker for max_rows rows sized for m; NULL with the reason in err. */
    void *(*worker_create)(void *ctx, const pgcl_model *m, int max_rows, char *err, int cap);
    void (*worker_destroy)(void *ctx, void *worker);
    bool (*worker_fits)(const void *worker, const pgcl_model *m);

    /* Optional pair: per-model state (device-resident weights). prepare runs at most once per
     * model while its entry lives, under the backend's cache lock, on the calling worker; release
     * runs when the entry is dropped, when no forward pass can be using the state. When prepare is
     * NULL, forward receives state NULL and the cache is never used. */
    void *(*model_prepare)(void *ctx, void *worker, const pgcl_model *m, pgcl_status *st, char *err, int cap);
    void (*model_release)(void *ctx, void *state);

    /* n >= 1 rows, any number: the implementation steps through them max_rows at a time. */
    pgcl_status (*forward)(void *ctx, void *worker, const pgcl_model *m, void *state, const float *z, int n,
                           float *vectors, float *probs);
} pgcl_backend_ops;

/* Wraps an implementation. Takes ownership of ctx (ops->destroy frees it, also when this fails).
 * name is copied. NULL when out of memory. */
pgcl_backend *pgcl_backend_new(const pgcl_backend_ops *ops, void *ctx, const char *name);

#endif
