/* The request-body memory budget; see bodybudget.h. One FIFO queue holds both kinds of waiters:
 * threads blocked in pgcld_body_budget_reserve (which admit themselves when they are first in line
 * and fit, woken by the `changed` broadcast) and asynchronous waiters (admitted for them, under
 * the lock, by whoever made room: admit_async_heads; woken after the lock is released). */
#include "bodybudget.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "ids.h" /* the monotonic clock and its condition variables */
#include "status.h"

typedef pgcld_body_wait waiter;

struct pgcld_body_budget {
    const _Atomic long *limit_bytes;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a release, or a new head of the queue; on CLOCK_MONOTONIC */
    long long reserved;     /* guarded by lock */
    waiter *head, *tail;    /* FIFO of waiters, guarded by lock */
    pthread_t timer;        /* wakes asynchronous waiters at their deadline */
    pthread_cond_t timer_wake; /* a new asynchronous waiter, or stopping; on CLOCK_MONOTONIC */
    bool stopping;
};

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

/* Admits the asynchronous waiters at the head of the queue that fit, in order, onto *woken (to
 * wake once the lock is released). Caller holds the lock. */
static void admit_async_heads(pgcld_body_budget *b, waiter **woken) {
    while (b->head && b->head->wake && fits(b, b->head->bytes)) {
        waiter *w = b->head;
        unlink_waiter(b, w);
        b->reserved += (long long)w->bytes;
        w->admitted = true;
        w->next = *woken;
        *woken = w;
    }
    if (b->head && !b->head->wake) pthread_cond_broadcast(&b->changed); /* a blocked thread leads */
}

/* Wakes what admit_async_heads or the timer collected; without the lock (w may be freed by then). */
static void wake_all(waiter *woken) {
    for (waiter *w = woken, *next; w; w = next) {
        next = w->next;
        w->wake(w->ctx);
    }
}

/* The timer thread: removes asynchronous waiters whose deadline passed (not admitted) and wakes
 * them; sleeps until the earliest deadline queued, or a new waiter. */
static void *timer_main(void *arg) {
    pgcld_body_budget *b = arg;
    pthread_mutex_lock(&b->lock);
    while (!b->stopping) {
        int64_t now = pgcl_monotonic_us(), earliest = INT64_MAX;
        waiter *woken = NULL;
        for (waiter *w = b->head, *next; w; w = next) {
            next = w->next;
            if (!w->wake) continue;
            if (w->deadline_us > now) {
                if (w->deadline_us < earliest) earliest = w->deadline_us;
                continue;
            }
            unlink_waiter(b, w);
            w->admitted = false;
            w->next = woken;
            woken = w;
        }
        if (woken) {
            admit_async_heads(b, &woken); /* the head may have changed */
            pthread_mutex_unlock(&b->lock);
            wake_all(woken);
            pthread_mutex_lock(&b->lock);
            continue;
        }
        if (earliest == INT64_MAX) {
            pthread_cond_wait(&b->timer_wake, &b->lock);
        } else {
            struct timespec until = pgcl_monotonic_timespec(earliest);
            pthread_cond_timedwait(&b->timer_wake, &b->lock, &until);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

pgcld_body_budget *pgcld_body_budget_create(const _Atomic long *limit_bytes) {
    pgcld_body_budget *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->limit_bytes = limit_bytes;
    pgcl_cond_init_monotonic(&b->changed);
    pgcl_cond_init_monotonic(&b->timer_wake);
    pthread_mutex_init(&b->lock, NULL);
    if (pthread_create(&b->timer, NULL, timer_main, b) != 0) {
        pthread_cond_destroy(&b->changed);
        pthread_cond_destroy(&b->timer_wake);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return NULL;
    }
    return b;
}

void pgcld_body_budget_destroy(pgcld_body_budget *b) {
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    PGCL_ASSERT(b->head == NULL); /* nothing may be waiting */
    b->stopping = true;
    pthread_cond_signal(&b->timer_wake);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->timer, NULL);
    pthread_cond_destroy(&b->changed);
    pthread_cond_destroy(&b->timer_wake);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

/* First come, first served: a request goes ahead only when no one waits before it (and it fits),
 * so a large body is not passed over forever by small ones, and the wait adds the same delay to
 * every request instead of a long tail for a few. */
bool pgcld_body_budget_reserve(pgcld_body_budget *b, size_t bytes, int64_t deadline_us) {
    pthread_mutex_lock(&b->lock);
    if (b->head || !fits(b, bytes)) {
        waiter w = {.bytes = bytes, .deadline_us = deadline_us};
        if (b->tail) b->tail->next = &w;
        else b->head = &w;
        b->tail = &w;
        struct timespec until = pgcl_monotonic_timespec(deadline_us);
        int rc = 0;
        while (!(b->head == &w && fits(b, bytes)) && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&b->changed, &b->lock, &until);
        bool admitted = b->head == &w && fits(b, bytes);
        unlink_waiter(b, &w);
        if (admitted) b->reserved += (long long)bytes;
        waiter *woken = NULL;
        admit_async_heads(b, &woken); /* the next in line may fit too, or is now the head */
        pthread_cond_broadcast(&b->changed);
        pthread_mutex_unlock(&b->lock);
        wake_all(woken);
        return admitted;
    }
    b->reserved += (long long)bytes;
    pthread_mutex_unlock(&b->lock);
    return true;
}

bool pgcld_body_budget_reserve_async(pgcld_body_budget *b, waiter *w, size_t bytes, int64_t deadline_us,
                                     void (*wake)(void *ctx), void *ctx) {
    PGCL_ASSERT(wake != NULL);
    pthread_mutex_lock(&b->lock);
    if (!b->head && fits(b, bytes)) {
        b->reserved += (long long)bytes;
        pthread_mutex_unlock(&b->lock);
        return true;
    }
    *w = (waiter){.bytes = bytes, .deadline_us = deadline_us, .wake = wake, .ctx = ctx};
    if (b->tail) b->tail->next = w;
    else b->head = w;
    b->tail = w;
    pthread_cond_signal(&b->timer_wake);
    pthread_mutex_unlock(&b->lock);
    return false;
}

void pgcld_body_budget_grow(pgcld_body_budget *b, size_t bytes) {
    pthread_mutex_lock(&b->lock);
    b->reserved += (long long)bytes;
    pthread_mutex_unlock(&b->lock);
}

void pgcld_body_budget_release(pgcld_body_budget *b, size_t bytes) {
    if (!bytes) return;
    waiter *woken = NULL;
    pthread_mutex_lock(&b->lock);
    b->reserved -= (long long)bytes;
    admit_async_heads(b, &woken);
    pthread_mutex_unlock(&b->lock);
    wake_all(woken);
}

void pgcld_body_budget_stats(pgcld_body_budget *b, long long *reserved, int *waiting) {
    pthread_mutex_lock(&b->lock);
    *reserved = b->reserved;
    *waiting = 0;
    for (const waiter *w = b->head; w; w = w->next) ++*waiting; /* at most one a connection */
    pthread_mutex_unlock(&b->lock);
}
