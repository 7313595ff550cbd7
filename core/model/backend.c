/* The backend interface (backend.h): dispatch through the function table of backend_impl.h, and the
 * cache of model states.
 *
 * The cache is one small process-wide array under one mutex, each entry tagged with its backend: a
 * server keeps a handful of model versions on one backend, and a forward pass scans the array once
 * (pointer compares plus one atomic load per entry of its backend). Process-wide because a model
 * may be cached by several backends (tests, the benchmark): an entry is unused when the model's
 * reference count equals the number of cache entries holding it, whichever backends they belong
 * to. The scan that finds an entry also drops its own backend's unused entries. A miss prepares the
 * state (uploads the weights) while holding the lock, so two workers never upload the same model
 * twice; other workers wait for that upload, once per model version. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "log.h"

typedef struct state_entry {
    pgcl_backend *b;
    pgcl_model *model; /* holds one reference */
    char sha256[65];
    void *state;
} state_entry;

static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the three below */
static state_entry *g_entries;
static int g_n_entries, g_cap_entries;

struct pgcl_backend {
    const pgcl_backend_ops *ops;
    void *ctx;
    char name[192];
};

struct pgcl_backend_worker {
    pgcl_backend *b;
    void *impl;
    int max_rows;
};

pgcl_backend *pgcl_backend_new(const pgcl_backend_ops *ops, void *ctx, const char *name) {
    pgcl_backend *b = calloc(1, sizeof *b);
    if (!b) {
        ops->destroy(ctx);
        return NULL;
    }
    b->ops = ops;
    b->ctx = ctx;
    snprintf(b->name, sizeof b->name, "%s", name);
    return b;
}

/* Called with g_cache_lock held. No one but caches holds the model: no registry slot, no request;
 * nobody can take a new reference (that needs one already), so no state can be in use. */
static bool entry_unused(const state_entry *e) {
    int holds = 0;
    for (int i = 0; i < g_n_entries; i++) holds += g_entries[i].model == e->model;
    return atomic_load_explicit(&e->model->refcount, memory_order_acquire) == holds;
}

/* Called with g_cache_lock held; moves the last entry into slot i. */
static void entry_drop(int i) {
    state_entry e = g_entries[i];
    g_entries[i] = g_entries[--g_n_entries];
    e.b->ops->model_release(e.b->ctx, e.state);
    pgcl_model_release(e.model);
}

void pgcl_backend_destroy(pgcl_backend *b) {
    if (!b) return;
    pthread_mutex_lock(&g_cache_lock);
    for (int i = 0; i < g_n_entries;) {
        if (g_entries[i].b == b) entry_drop(i);
        else i++;
    }
    if (g_n_entries == 0) { /* the last backend gone: nothing left for a leak checker to see */
        free(g_entries);
        g_entries = NULL;
        g_cap_entries = 0;
    }
    pthread_mutex_unlock(&g_cache_lock);
    b->ops->destroy(b->ctx);
    free(b);
}

const char *pgcl_backend_kind(const pgcl_backend *b) { return b->ops->kind; }
const char *pgcl_backend_name(const pgcl_backend *b) { return b->name; }

pgcl_backend_worker *pgcl_backend_worker_create(pgcl_backend *b, const pgcl_model *m, int max_rows, char *err,
                                                int cap) {
    if (max_rows < 1) {
        pgcl_errorf(err, cap, "a worker needs at least one row (got %d)", max_rows);
        return NULL;
    }
    pgcl_backend_worker *w = calloc(1, sizeof *w);
    if (!w) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    w->b = b;
    w->max_rows = max_rows;
    w->impl = b->ops->worker_create(b->ctx, m, max_rows, err, cap);
    if (!w->impl) {
        free(w);
        return NULL;
    }
    return w;
}

void pgcl_backend_worker_destroy(pgcl_backend_worker *w) {
    if (!w) return;
    w->b->ops->worker_destroy(w->b->ctx, w->impl);
    free(w);
}

bool pgcl_backend_worker_fits(const pgcl_backend_worker *w, const pgcl_model *m) {
    return w->b->ops->worker_fits(w->impl, m);
}

int pgcl_backend_worker_rows(const pgcl_backend_worker *w) { return w->max_rows; }

/* Finds (or prepares) m's state; drops b's unused entries on the way. Called with g_cache_lock held. */
static pgcl_status state_get_locked(pgcl_backend_worker *w, const pgcl_model *m, void **state, char *err, int cap) {
    pgcl_backend *b = w->b;
    *state = NULL;
    for (int i = 0; i < g_n_entries;) {
        state_entry *e = &g_entries[i];
        if (e->b != b) {
            i++;
        } else if (e->model == m && strcmp(e->sha256, m->sha256) == 0) {
            *state = e->state;
            i++;
        } else if (entry_unused(e)) {
            entry_drop(i); /* slot i now holds another entry: look at it again */
        } else {
            i++;
        }
    }
    if (*state) return PGCL_OK;

    if (g_n_entries == g_cap_entries) {
        int cap_new = g_cap_entries ? 2 * g_cap_entries : 8;
        state_entry *grown = realloc(g_entries, (size_t)cap_new * sizeof *grown);
        if (!grown) {
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        g_entries = grown;
        g_cap_entries = cap_new;
    }
    pgcl_status st = PGCL_OK;
    void *s = b->ops->model_prepare(b->ctx, w->impl, m, &st, err, cap);
    if (!s) return st != PGCL_OK ? st : PGCL_ERR_NOMEM;
    /* The model is immutable; only its reference count changes, which is what retain is for. */
    state_entry *e = &g_entries[g_n_entries++];
    e->b = b;
    e->model = pgcl_model_retain((pgcl_model *)m);
    memcpy(e->sha256, m->sha256, sizeof e->sha256);
    e->state = s;
    *state = s;
    return PGCL_OK;
}

pgcl_status pgcl_backend_prepare(pgcl_backend_worker *w, const pgcl_model *m, char *err, int cap) {
    pgcl_backend *b = w->b;
    if (!b->ops->model_prepare) return PGCL_OK;
    void *state;
    pthread_mutex_lock(&g_cache_lock);
    pgcl_status st = state_get_locked(w, m, &state, err, cap);
    pthread_mutex_unlock(&g_cache_lock);
    return st;
}

pgcl_status pgcl_backend_forward(pgcl_backend_worker *w, const pgcl_model *m, const float *z, int n, float *vectors,
                                 float *probs) {
    pgcl_backend *b = w->b;
    if (n <= 0) return PGCL_OK;
    if (!b->ops->worker_fits(w->impl, m)) { /* would overrun the worker's buffers */
        pgcl_log_error("%s: model %s/%s is wider than the worker's buffers", b->name, m->name, m->version);
        return PGCL_ERR_INVALID;
    }
    void *state = NULL;
    if (b->ops->model_prepare) {
        char err[512] = "";
        pthread_mutex_lock(&g_cache_lock);
        pgcl_status st = state_get_locked(w, m, &state, err, sizeof err);
        pthread_mutex_unlock(&g_cache_lock);
        if (st != PGCL_OK) {
            pgcl_log_error("%s: model %s/%s: %s", b->name, m->name, m->version, err);
            return st;
        }
    }
    return b->ops->forward(b->ctx, w->impl, m, state, z, n, vectors, probs);
}

void pgcl_backend_trim(pgcl_backend *b) {
    pthread_mutex_lock(&g_cache_lock);
    for (int i = 0; i < g_n_entries;) {
        if (g_entries[i].b == b && entry_unused(&g_entries[i])) entry_drop(i);
        else i++;
    }
    pthread_mutex_unlock(&g_cache_lock);
}

int pgcl_backend_cached_models(pgcl_backend *b) {
    pthread_mutex_lock(&g_cache_lock);
    int n = 0;
    for (int i = 0; i < g_n_entries; i++) n += g_entries[i].b == b;
    pthread_mutex_unlock(&g_cache_lock);
    return n;
}
