/* The request deadline; see reaper.h. */
#include "reaper.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "ids.h"
#include "log.h"

#define SCAN_INTERVAL_MS 200

struct pgcld_reaper_conn {
    int fd;
    bool receiving;   /* a request is (or may be) on its way: the deadline runs */
    bool cut;         /* shut down already */
    int64_t since_us; /* when the deadline started */
    pgcld_reaper_conn *prev, *next;
};

struct pgcld_reaper {
    const _Atomic long *timeout_s;
    pgcld_metrics *metrics;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* with CLOCK_MONOTONIC */
    bool stopping;
    pthread_t thread;
    pgcld_reaper_conn *head;
    _Atomic unsigned long long cut;
};

static void scan(pgcld_reaper *r, int64_t now) {
    long t = atomic_load_explicit(r->timeout_s, memory_order_relaxed);
    if (t <= 0) return;
    for (pgcld_reaper_conn *c = r->head; c; c = c->next) {
        if (!c->receiving || c->cut || now - c->since_us < (int64_t)t * 1000000) continue;
        /* The serving thread's recv() sees end of stream and closes the connection. */
        shutdown(c->fd, SHUT_RDWR);
        c->cut = true;
        atomic_fetch_add_explicit(&r->cut, 1, memory_order_relaxed);
        pgcld_metrics_rejected(r->metrics, PGCLD_REJECT_REQUEST_TIMEOUT);
        pgcl_log_info("http: closed a connection that took over %ld s to send its request (request-timeout)", t);
    }
}

static void *reaper_main(void *arg) {
    pgcld_reaper *r = arg;
    pthread_mutex_lock(&r->lock);
    while (!r->stopping) {
        struct timespec ts = pgcl_monotonic_timespec(pgcl_monotonic_us() + SCAN_INTERVAL_MS * 1000);
        int rc = pthread_cond_timedwait(&r->wake, &r->lock, &ts);
        if (r->stopping) break;
        if (rc == ETIMEDOUT || rc == 0) scan(r, pgcl_monotonic_us());
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

pgcld_reaper *pgcld_reaper_create(const _Atomic long *timeout_s, pgcld_metrics *metrics) {
    pgcld_reaper *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->timeout_s = timeout_s;
    r->metrics = metrics;
    pgcl_cond_init_monotonic(&r->wake);
    pthread_mutex_init(&r->lock, NULL);
    if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

void pgcld_reaper_destroy(pgcld_reaper *r) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    while (r->head) { /* none should be left; free them anyway */
        pgcld_reaper_conn *c = r->head;
        r->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

pgcld_reaper_conn *pgcld_reaper_open(pgcld_reaper *r, int fd) {
    pgcld_reaper_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->receiving = true;
    c->since_us = pgcl_monotonic_us();
    pthread_mutex_lock(&r->lock);
    c->next = r->head;
    if (r->head) r->head->prev = c;
    r->head = c;
    pthread_mutex_unlock(&r->lock);
    return c;
}

void pgcld_reaper_close(pgcld_reaper *r, pgcld_reaper_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&r->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&r->lock);
    free(c);
}

void pgcld_reaper_received(pgcld_reaper *r, pgcld_reaper_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&r->lock);
    c->receiving = false;
    pthread_mutex_unlock(&r->lock);
}

void pgcld_reaper_next(pgcld_reaper *r, pgcld_reaper_conn *c) {
    if (!c) return;
    int64_t now = pgcl_monotonic_us();
    pthread_mutex_lock(&r->lock);
    c->receiving = true;
    c->since_us = now;
    pthread_mutex_unlock(&r->lock);
}

bool pgcld_reaper_was_cut(pgcld_reaper *r, pgcld_reaper_conn *c) {
    if (!r || !c) return false;
    pthread_mutex_lock(&r->lock);
    bool cut = c->cut;
    pthread_mutex_unlock(&r->lock);
    return cut;
}

unsigned long long pgcld_reaper_cut_count(pgcld_reaper *r) {
    return r ? atomic_load_explicit(&r->cut, memory_order_relaxed) : 0;
}
