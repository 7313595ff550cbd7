/* Cross-request batching; see batcher.h. */
#include "batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ids.h"

typedef struct batch_job {
    const pgcl_model *m;
    const float *z;
    int n;
    float *vectors, *probs;
    int64_t t_start_us;
    int batch_rows;
    pgcl_status status;
    bool done;
    pthread_cond_t done_cond; /* the blocking submitter waits on its own condition */
    /* An asynchronous job (pgcl_batcher_submit): malloc'd, owned by the batcher, finished by
     * calling on_done (outside the lock) instead of signalling done_cond. NULL for a blocking one. */
    pgcl_batcher_done_fn on_done;
    void *on_done_ctx;
    struct batch_job *next;
} batch_job;

typedef struct worker {
    pgcl_batcher *b;
    pthread_t thread;
    float *z, *vectors, *probs; /* gathered batch, grown on demand (first uses only) */
    size_t cap_z, cap_v, cap_p;
} worker;

struct pgcl_batcher {
    pgcl_compute_slots *compute;
    int max_rows;
    long max_wait_us;
    pthread_mutex_t lock;
    pthread_cond_t work;
    batch_job *head, *tail;
    bool stopping;
    int n_workers;
    worker *workers;
};

/* Removes from the queue up to max_rows rows of jobs for the head job's model, in order. Caller
 * holds the lock. Returns the list (linked through next) and the row count. */
static batch_job *take_batch(pgcl_batcher *b, int *rows) {
    batch_job *first = b->head, *list = NULL, **tail = &list, **prev = &b->head;
    *rows = 0;
    for (batch_job *j = b->head; j;) {
        batch_job *next = j->next;
        bool fits = j == first || (j->m == first->m && *rows + j->n <= b->max_rows);
        if (fits) {
            *prev = next;
            j->next = NULL;
            *tail = j;
            tail = &j->next;
            *rows += j->n;
            if (*rows >= b->max_rows) break;
        } else {
            prev = &j->next;
        }
        j = next;
    }
    b->tail = NULL;
    for (batch_job *j = b->head; j; j = j->next) b->tail = j;
    return list;
}

static bool grow(float **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    float *p = realloc(*buf, need * sizeof(float));
    if (!p) return false;
    *buf = p;
    *cap = need;
    return true;
}

static void run_batch(worker *w, batch_job *list, int rows) {
    pgcl_batcher *b = w->b;
    const pgcl_model *m = list->m;
    pgcl_status st;
    int64_t t_start = 0;
    if (!list->next) { /* alone: no copies */
        st = pgcl_compute_slots_forward(b->compute, m, list->z, list->n, list->vectors, list->probs, &t_start);
    } else if (!grow(&w->z, &w->cap_z, (size_t)rows * m->D) || !grow(&w->vectors, &w->cap_v, (size_t)rows * m->d) ||
               !grow(&w->probs, &w->cap_p, (size_t)rows * m->K)) {
        st = PGCL_ERR_NOMEM;
    } else {
        size_t r = 0;
        for (batch_job *j = list; j; j = j->next) {
            memcpy(w->z + r * m->D, j->z, sizeof(float) * (size_t)j->n * m->D);
            r += (size_t)j->n;
        }
        st = pgcl_compute_slots_forward(b->compute, m, w->z, rows, w->vectors, w->probs, &t_start);
        r = 0;
        for (batch_job *j = list; j && st == PGCL_OK; j = j->next) {
            memcpy(j->vectors, w->vectors + r * m->d, sizeof(float) * (size_t)j->n * m->d);
            memcpy(j->probs, w->probs + r * m->K, sizeof(float) * (size_t)j->n * m->K);
            r += (size_t)j->n;
        }
    }
    batch_job *async_jobs = NULL;
    pthread_mutex_lock(&b->lock);
    for (batch_job *j = list, *next; j; j = next) {
        next = j->next; /* a blocking job belongs to its submitter once done is set */
        j->status = st;
        j->t_start_us = t_start;
        j->batch_rows = rows;
        if (j->on_done) {
            j->next = async_jobs;
            async_jobs = j;
            continue;
        }
        j->done = true;
        pthread_cond_signal(&j->done_cond);
    }
    pthread_mutex_unlock(&b->lock);
    for (batch_job *j = async_jobs, *next; j; j = next) { /* outside the lock: a callback may submit */
        next = j->next;
        j->on_done(j->on_done_ctx, j->status, j->t_start_us, j->batch_rows);
        free(j);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    pgcl_batcher *b = w->b;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->head && !b->stopping) pthread_cond_wait(&b->work, &b->lock);
        if (!b->head) break;
        if (b->max_wait_us > 0) { /* hold the batch open for more rows of the same model */
            struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + b->max_wait_us);
            for (;;) {
                int rows = 0;
                for (batch_job *j = b->head; j; j = j->next)
                    if (j->m == b->head->m) rows += j->n;
                if (rows >= b->max_rows || b->stopping) break;
                if (pthread_cond_timedwait(&b->work, &b->lock, &deadline) == ETIMEDOUT) break;
                if (!b->head) break;
            }
            if (!b->head) continue;
        }
        int rows;
        batch_job *list = take_batch(b, &rows);
        if (b->head) pthread_cond_signal(&b->work); /* other models are waiting: wake another worker */
        pthread_mutex_unlock(&b->lock);
        run_batch(w, list, rows);
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

pgcl_batcher *pgcl_batcher_create(pgcl_compute_slots *compute, int workers, int max_rows, long max_wait_us) {
    pgcl_batcher *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->compute = compute;
    b->max_rows = max_rows > 0 ? max_rows : 256;
    b->max_wait_us = max_wait_us;
    pthread_mutex_init(&b->lock, NULL);
    pgcl_cond_init_monotonic(&b->work);
    b->workers = calloc((size_t)workers, sizeof *b->workers);
    if (!b->workers) {
        pgcl_batcher_destroy(b);
        return NULL;
    }
    for (int i = 0; i < workers; i++) {
        b->workers[i].b = b;
        if (pthread_create(&b->workers[i].thread, NULL, worker_main, &b->workers[i]) != 0) break;
        b->n_workers++;
    }
    if (b->n_workers == 0) {
        pgcl_batcher_destroy(b);
        return NULL;
    }
    return b;
}

void pgcl_batcher_destroy(pgcl_batcher *b) {
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    b->stopping = true;
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->lock);
    for (int i = 0; i < b->n_workers; i++) {
        pthread_join(b->workers[i].thread, NULL);
        free(b->workers[i].z);
        free(b->workers[i].vectors);
        free(b->workers[i].probs);
    }
    free(b->workers);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->work);
    free(b);
}

pgcl_status pgcl_batcher_forward(pgcl_batcher *b, const pgcl_model *m, const float *z, int n, float *vectors,
                                  float *probs, int64_t *t_start_us, int *batch_rows) {
    if (n >= b->max_rows) { /* large enough on its own: skip the queue and the copies */
        if (batch_rows) *batch_rows = n;
        return pgcl_compute_slots_forward(b->compute, m, z, n, vectors, probs, t_start_us);
    }
    batch_job job = {.m = m, .z = z, .n = n, .vectors = vectors, .probs = probs, .status = PGCL_ERR_CLOSED};
    pthread_cond_init(&job.done_cond, NULL);
    pthread_mutex_lock(&b->lock);
    if (b->stopping) {
        pthread_mutex_unlock(&b->lock);
        pthread_cond_destroy(&job.done_cond);
        return PGCL_ERR_CLOSED;
    }
    if (b->tail) b->tail->next = &job;
    else b->head = &job;
    b->tail = &job;
    pthread_cond_signal(&b->work);
    while (!job.done) pthread_cond_wait(&job.done_cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
    pthread_cond_destroy(&job.done_cond);
    if (t_start_us) *t_start_us = job.t_start_us;
    if (batch_rows) *batch_rows = job.batch_rows;
    return job.status;
}

void pgcl_batcher_submit(pgcl_batcher *b, const pgcl_model *m, const float *z, int n, float *vectors, float *probs,
                         pgcl_batcher_done_fn done, void *ctx) {
    PGCL_ASSERT(done != NULL && n >= 1);
    batch_job *job = malloc(sizeof *job);
    if (!job) {
        done(ctx, PGCL_ERR_NOMEM, 0, 0);
        return;
    }
    *job = (batch_job){.m = m, .z = z, .n = n, .vectors = vectors, .probs = probs, .status = PGCL_ERR_CLOSED,
                       .on_done = done, .on_done_ctx = ctx};
    pthread_mutex_lock(&b->lock);
    if (b->stopping) {
        pthread_mutex_unlock(&b->lock);
        free(job);
        done(ctx, PGCL_ERR_CLOSED, 0, 0);
        return;
    }
    if (b->tail) b->tail->next = job;
    else b->head = job;
    b->tail = job;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->lock);
}
