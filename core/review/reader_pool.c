/* The pool of read-only connections and the process-wide pools; see reader_pool.h. */
#include "reader_pool.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "ids.h"
#include "log.h"

struct pgcl_qpool {
    char *path;
    int size;       /* most connections ever open */
    int n_open;     /* opened so far (free or out) */
    sqlite3 **free; /* (size) the free list */
    int n_free;
    pthread_mutex_t lock;
    pthread_cond_t returned; /* signalled when a connection comes back or an open fails */
    struct pgcl_qpool *next; /* process-wide registry */
    pgcl_time_order order;   /* see reader_pool.h */
};
pgcl_qpool *pgcl_qpool_create(const char *db_path, int size, char *err, int cap) {
    if (size <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        size = cpus > 4 ? (int)cpus : 4;
    }
    pgcl_qpool *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(db_path)) || !(p->free = calloc((size_t)size, sizeof *p->free))) {
        if (p) free(p->path);
        free(p);
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    p->size = size;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->order.lock, NULL);
    pgcl_cond_init_monotonic(&p->returned);
    return p;
}

void pgcl_qpool_destroy(pgcl_qpool *p) {
    if (!p) return;
    if (p->n_free != p->n_open)
        pgcl_log_warn("queries: pool for %s destroyed with %d connections still out", p->path, p->n_open - p->n_free);
    for (int i = 0; i < p->n_free; i++)
        sqlite3_close(p->free[i]);
    pthread_cond_destroy(&p->returned);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->order.lock);
    free(p->free);
    free(p->path);
    free(p);
}

pgcl_status pgcl_qpool_acquire(pgcl_qpool *p, sqlite3 **out, char *err, int cap) {
    *out = NULL;
    struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + PGCL_DB_BUSY_TIMEOUT_MS * 1000LL);
    pthread_mutex_lock(&p->lock);
    while (p->n_free == 0 && p->n_open == p->size) {
        if (pthread_cond_timedwait(&p->returned, &p->lock, &deadline) != 0 && p->n_free == 0 && p->n_open == p->size) {
            pthread_mutex_unlock(&p->lock);
            pgcl_errorf(err, cap, "all %d reader connections are busy", p->size);
            return PGCL_ERR_BUSY;
        }
    }
    if (p->n_free > 0) {
        *out = p->free[--p->n_free];
        pthread_mutex_unlock(&p->lock);
        return PGCL_OK;
    }
    p->n_open++; /* reserve the slot, open outside the lock */
    pthread_mutex_unlock(&p->lock);
    sqlite3 *db = pgcl_db_open_reader(p->path, err, cap);
    if (!db) {
        pthread_mutex_lock(&p->lock);
        p->n_open--;
        pthread_cond_signal(&p->returned);
        pthread_mutex_unlock(&p->lock);
        return PGCL_ERR_DB;
    }
    *out = db;
    return PGCL_OK;
}

void pgcl_qpool_release(pgcl_qpool *p, sqlite3 *db) {
    if (!db) return;
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_lock(&p->lock);
    p->free[p->n_free++] = db;
    pthread_cond_signal(&p->returned);
    pthread_mutex_unlock(&p->lock);
}

const char *pgcl_qpool_path(const pgcl_qpool *p) {
    return p->path;
}

pgcl_time_order *pgcl_qpool_time_order(pgcl_qpool *p) {
    return &p->order;
}

/* ---- the process-wide pools ---- */

static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pgcl_qpool *g_pools;

pgcl_qpool *pgcl_queries_pool(const char *db_path, char *err, int cap) {
    pthread_mutex_lock(&g_pools_lock);
    pgcl_qpool *p = g_pools;
    while (p && strcmp(p->path, db_path) != 0)
        p = p->next;
    if (!p && (p = pgcl_qpool_create(db_path, 0, err, cap))) {
        p->next = g_pools;
        g_pools = p;
    }
    pthread_mutex_unlock(&g_pools_lock);
    return p;
}

void pgcl_queries_pool_drop(const char *db_path) {
    pthread_mutex_lock(&g_pools_lock);
    for (pgcl_qpool **at = &g_pools; *at; at = &(*at)->next)
        if (strcmp((*at)->path, db_path) == 0) {
            pgcl_qpool *p = *at;
            *at = p->next;
            pgcl_qpool_destroy(p);
            break;
        }
    pthread_mutex_unlock(&g_pools_lock);
}

void pgcl_queries_shutdown(void) {
    pthread_mutex_lock(&g_pools_lock);
    while (g_pools) {
        pgcl_qpool *p = g_pools;
        g_pools = p->next;
        pgcl_qpool_destroy(p);
    }
    pthread_mutex_unlock(&g_pools_lock);
}
