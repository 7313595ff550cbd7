/* Compute slots; see compute.h. */
#include "compute.h"

#include <pthread.h>
#include <stdlib.h>

#include "ids.h"

typedef struct slot {
    pgcl_scratch *scratch;
    struct slot *next_free;
} slot;

struct pgcld_compute {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    slot *slots;
    slot *free_list;
    int workers, chunk_rows;
};

pgcld_compute *pgcld_compute_create(int workers, int chunk_rows) {
    pgcld_compute *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slots = calloc((size_t)workers, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->freed, NULL);
    c->workers = workers;
    c->chunk_rows = chunk_rows;
    for (int i = 0; i < workers; i++) {
        c->slots[i].next_free = c->free_list;
        c->free_list = &c->slots[i];
    }
    return c;
}

void pgcld_compute_destroy(pgcld_compute *c) {
    if (!c) return;
    for (int i = 0; i < c->workers; i++) pgcl_scratch_destroy(c->slots[i].scratch);
    free(c->slots);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->freed);
    free(c);
}

pgcl_status pgcld_compute_forward(pgcld_compute *c, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us) {
    pthread_mutex_lock(&c->lock);
    while (!c->free_list) pthread_cond_wait(&c->freed, &c->lock);
    slot *s = c->free_list;
    c->free_list = s->next_free;
    pthread_mutex_unlock(&c->lock);
    if (t_start_us) *t_start_us = pgcl_monotonic_us();

    pgcl_status st = PGCL_OK;
    if (!s->scratch || !pgcl_scratch_fits(s->scratch, m)) {
        pgcl_scratch_destroy(s->scratch);
        s->scratch = pgcl_scratch_create(m, c->chunk_rows);
    }
    if (s->scratch) pgcl_forward(m, s->scratch, z, n, vectors, probs);
    else st = PGCL_ERR_NOMEM;

    pthread_mutex_lock(&c->lock);
    s->next_free = c->free_list;
    c->free_list = s;
    pthread_cond_signal(&c->freed);
    pthread_mutex_unlock(&c->lock);
    return st;
}
