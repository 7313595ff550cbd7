/* The request-body memory budget; see bodybudget.h. */
#include "bodybudget.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "ids.h" /* the monotonic clock and its condition variables */

/* A request waiting for room; lives on its thread's stack. */
typedef struct waiter {
    struct waiter *next;
} waiter;

struct pgcld_body_budget {
    const _Atomic long *limit_bytes;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a release, or a new head of the queue; on CLOCK_MONOTONIC */
    long long reserved;     /* guarded by lock */
    waiter *head, *tail;    /* FIFO of waiters, guarded by lock */
};

pgcld_body_budget *pgcld_body_budget_create(const _Atomic long *limit_bytes) {
    pgcld_body_budget *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->limit_bytes = limit_bytes;
    pgcl_cond_init_monotonic(&b->changed);
    pthread_mutex_init(&b->lock, NULL);
    return b;
}

void pgcld_body_budget_destroy(pgcld_body_budget *b) {
    if (!b) return;
    pthread_cond_destroy(&b->changed);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

/* Whether `bytes` more may be reserved now: nothing is reserved, or they fit in the budget. */
static bool fits(const pgcld_body_budget *b, size_t bytes) {
    long limit = *b->limit_bytes;
    return limit <= 0 || b->reserved == 0 || b->reserved + (long long)bytes <= limit;
}

/* Takes w out of the queue (it is in it). */
static void unlink_waiter(pgcld_body_budget *b, waiter *w) {
    waiter **pp = &b->head, *prev = NULL;
    while (*pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = w->next;
    if (b->tail == w) b->tail = prev;
}

/* First come, first served: a request goes ahead only when no one waits before it (and it fits),
 * so a large body is not passed over forever by small ones, and the wait adds the same delay to
 * every request instead of a long tail for a few. */
bool pgcld_body_budget_reserve(pgcld_body_budget *b, size_t bytes, int64_t deadline_us) {
    pthread_mutex_lock(&b->lock);
    if (b->head || !fits(b, bytes)) {
        waiter w = {0};
        if (b->tail) b->tail->next = &w;
        else b->head = &w;
        b->tail = &w;
        struct timespec until = pgcl_monotonic_timespec(deadline_us);
        int rc = 0;
        while (!(b->head == &w && fits(b, bytes)) && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&b->changed, &b->lock, &until);
        bool admitted = b->head == &w && fits(b, bytes);
        unlink_waiter(b, &w);
        pthread_cond_broadcast(&b->changed); /* the next in line may fit too, or is now the head */
        if (!admitted) {
            pthread_mutex_unlock(&b->lock);
            return false;
        }
    }
    b->reserved += (long long)bytes;
    pthread_mutex_unlock(&b->lock);
    return true;
}

void pgcld_body_budget_grow(pgcld_body_budget *b, size_t bytes) {
    pthread_mutex_lock(&b->lock);
    b->reserved += (long long)bytes;
    pthread_mutex_unlock(&b->lock);
}

void pgcld_body_budget_release(pgcld_body_budget *b, size_t bytes) {
    if (!bytes) return;
    pthread_mutex_lock(&b->lock);
    b->reserved -= (long long)bytes;
    if (b->head) pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
}

void pgcld_body_budget_stats(pgcld_body_budget *b, long long *reserved, int *waiting) {
    pthread_mutex_lock(&b->lock);
    *reserved = b->reserved;
    *waiting = 0;
    for (const waiter *w = b->head; w; w = w->next) ++*waiting; /* at most one a connection */
    pthread_mutex_unlock(&b->lock);
}
