/* The pool of read-only connections to the audit database that every reviewer read uses.
 *
 * Reads run on read-only connections taken from a small pool, opened lazily, so that readers never
 * wait for the audit writer (WAL) and never hold a connection longer than one query (one export
 * chunk). The daemon uses one process-wide pool per database path (pgcl_queries_pool), created on
 * first use and destroyed by pgcl_queries_shutdown().
 *
 * A pool also keeps one verdict about its database that the decision lists need across requests:
 * whether created_at follows seq order (pgcl_time_order, see decision_lists.c). */
#ifndef PGCL_READER_POOL_H
#define PGCL_READER_POOL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#include "status.h"

#define PGCL_QTIME_LEN 27 /* 2026-11-21T10:33:00.123456Z, the format of every *_at column */

typedef struct pgcl_qpool pgcl_qpool;

/* A pool of at most `size` read-only connections to db_path (size <= 0: max(4, online CPUs)).
 * Nothing is opened until the first acquire. Returns NULL with err set on failure. */
pgcl_qpool *pgcl_qpool_create(const char *db_path, int size, char *err, int cap);

/* Closes every connection. No connection may be out. Accepts NULL. */
void pgcl_qpool_destroy(pgcl_qpool *p);

/* Takes a connection, opening one if none is free and fewer than `size` are open, else waiting
 * up to PGCL_DB_BUSY_TIMEOUT_MS for one to come back. PGCL_ERR_BUSY: none came back in time;
 * PGCL_ERR_DB: opening failed (err says why). Thread-safe. */
pgcl_status pgcl_qpool_acquire(pgcl_qpool *p, sqlite3 **out, char *err, int cap);

/* Gives a connection back (an open transaction is rolled back first). Accepts db NULL.
 * Thread-safe. */
void pgcl_qpool_release(pgcl_qpool *p, sqlite3 *db);

/* The database path the pool was made for (for messages). */
const char *pgcl_qpool_path(const pgcl_qpool *p);

/* Whether created_at follows seq order in the pool's database, as far as it was checked:
 * state 0 not checked yet, 1 holds for rows 1..seq (whose created_at is ts), -1 does not hold.
 * Read and written only with lock held; only the decision lists use it. */
typedef struct pgcl_time_order {
    pthread_mutex_t lock;
    int state;
    int64_t seq;
    char ts[PGCL_QTIME_LEN + 8];
} pgcl_time_order;

/* The pool's time-order verdict (lives as long as the pool). */
pgcl_time_order *pgcl_qpool_time_order(pgcl_qpool *p);

/* The process-wide pool for db_path, created on first use (thread-safe). Returns NULL with err
 * set only when out of memory. */
pgcl_qpool *pgcl_queries_pool(const char *db_path, char *err, int cap);

/* Destroys the process-wide pool for db_path, if there is one (a store that owns its pool's path
 * alone, e.g. the SQLite read-only store, at its close). No connection of it may be out. */
void pgcl_queries_pool_drop(const char *db_path);

/* Destroys every process-wide pool. Call once at shutdown, after the HTTP server stopped. */
void pgcl_queries_shutdown(void);

#endif
