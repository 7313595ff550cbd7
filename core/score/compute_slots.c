/* Compute slots; see compute_slots.h. */
#include "compute_slots.h"

#include <pthread.h>
#include <stdlib.h>

#include "ids.h"
#include "log.h"

typedef struct slot {
    pgcl_backend_worker *worker; /* NULL until first use */
    struct slot *next_free;
} slot;

struct pgcl_compute_slots {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    pgcl_backend *backend;
    slot *slots;
    slot *free_list;
    int workers, chunk_rows;
};

pgcl_compute_slots *pgcl_compute_slots_create(pgcl_backend *backend, int workers, int chunk_rows) {
    pgcl_compute_slots *c = calloc(1, sizeof *c);
    if (!c || !(c->slots = calloc((size_t)workers, sizeof *c->slots))) {
        free(c);
        pgcl_backend_destroy(backend);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->freed, NULL);
    c->backend = backend;
    c->workers = workers;
    c->chunk_rows = chunk_rows;
    for (int i = 0; i < workers; i++) {
        c->slots[i].next_free = c->free_list;
        c->free_list = &c->slots[i];
    }
    return c;
}

void pgcl_compute_slots_destroy(pgcl_compute_slots *c) {
    if (!c) return;
    for (int i = 0; i < c->workers; i++) pgcl_backend_worker_destroy(c->slots[i].worker);
    pgcl_backend_destroy(c->backend);
    free(c->slots);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->freed);
    free(c);
}

pgcl_backend *pgcl_compute_slots_backend(pgcl_compute_slots *c) { return c->backend; }

pgcl_status pgcl_compute_slots_forward(pgcl_compute_slots *c, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us) {
    pthread_mutex_lock(&c->lock);
    while (!c->free_list) pthread_cond_wait(&c->freed, &c->lock);
    slot *s = c->free_list;
    c->free_list = s->next_free;
    pthread_mutex_unlock(&c->lock);
    if (t_start_us) *t_start_us = pgcl_monotonic_us();

    pgcl_status st;
    if (!s->worker || !pgcl_backend_worker_fits(s->worker, m)) {
        char err[512];
        pgcl_backend_worker_destroy(s->worker);
        s->worker = pgcl_backend_worker_create(c->backend, m, c->chunk_rows, err, sizeof err);
        if (!s->worker) pgcl_log_error("compute: %s: %s", pgcl_backend_name(c->backend), err);
    }
    st = s->worker ? pgcl_backend_forward(s->worker, m, z, n, vectors, probs) : PGCL_ERR_NOMEM;

    pthread_mutex_lock(&c->lock);
    s->next_free = c->free_list;
    c->free_list = s;
    pthread_cond_signal(&c->freed);
    pthread_mutex_unlock(&c->lock);
    return st;
}
