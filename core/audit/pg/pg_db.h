/* libpq helpers shared by the PostgreSQL store's files (core/audit/pg/): connecting with a URI whose
 * password never reaches a log, one-statement execution with the error turned into text where it
 * happens, and a small pool of read connections that reconnects by itself.
 *
 * Error convention: every call that can fail returns a pgcl_status and writes "<what>: <message>"
 * into err. PGCL_ERR_DB means the statement failed or the server could not be reached (the routes
 * answer 503 audit_unavailable); pgcl_pg_broken() tells whether the connection itself is gone (the
 * server is down or restarting: retry later, on a new connection). PGCL_ERR_CLOSED keeps the store
 * interface's meaning, "shutting down", and is never a database error. */
#ifndef PGCL_PG_DB_H
#define PGCL_PG_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "status.h"

/* True when db names a PostgreSQL database (a libpq URI: postgresql://... or postgres://...)
 * rather than a SQLite file. */
bool pgcl_pg_is_uri(const char *db);

/* db with any password replaced by "***" (in the userinfo and in a password= query parameter), for
 * logs and error messages. Always NUL-terminates out. */
void pgcl_pg_redact(const char *db, char *out, int cap);

#define PGCL_PG_CONNECT_TIMEOUT_S 10 /* how long a connection attempt may take, by default */

/* Opens a connection to uri (blocking, at most PGCL_PG_CONNECT_TIMEOUT_S), with application_name
 * "pgcld" unless the URI sets one, and TCP keepalives and tcp_user_timeout so that a connection
 * whose server vanished silently fails within about 30 s. NULL with err set (the URI redacted) on
 * failure. Close with PQfinish. */
PGconn *pgcl_pg_connect(const char *uri, char *err, int cap);
/* The same, waiting at most timeout_s (>= 2) for the connection. */
PGconn *pgcl_pg_connect_within(const char *uri, int timeout_s, char *err, int cap);

/* True when the connection is unusable (closed by the server, network lost). */
bool pgcl_pg_broken(const PGconn *conn);

/* For an idle connection about to be used: true when it is broken, or when the server closed it
 * since its last statement (a restart, an administrator's pg_terminate_backend), which libpq
 * notices only by reading what is pending: this reads it, without waiting. A connection with a
 * statement in flight is left alone (false unless already broken). */
bool pgcl_pg_gone_while_idle(PGconn *conn);

/* Runs sql with n text parameters (values[i] NULL: SQL NULL; no binary parameters here; n = 0: the
 * simple protocol, which runs several ;-separated statements and returns the last result) and
 * returns its result, which the caller PQclear()s, when its status is PGRES_COMMAND_OK or
 * PGRES_TUPLES_OK. NULL otherwise, with err "<what>: <message>" and *st PGCL_ERR_DB. */
PGresult *pgcl_pg_query(PGconn *conn, const char *what, const char *sql, int n, const char *const *values,
                        pgcl_status *st, char *err, int cap);

/* pgcl_pg_query for a statement run for its effect: PGCL_OK, or its status with err. */
pgcl_status pgcl_pg_exec(PGconn *conn, const char *what, const char *sql, int n, const char *const *values, char *err,
                         int cap);

/* The first column of the first row as an integer (*found false and *out 0: no row or NULL). */
pgcl_status pgcl_pg_query_int(PGconn *conn, const char *what, const char *sql, int n, const char *const *values,
                              int64_t *out, bool *found, char *err, int cap);

/* The SQLSTATE of a failed result ("" when none), e.g. "23505" for a unique violation. */
const char *pgcl_pg_sqlstate(const PGresult *res);

/* Values of a result: NULL for SQL NULL (text), the integer / double of a text column. */
const char *pgcl_pg_text(const PGresult *res, int row, int col);
int64_t pgcl_pg_int(const PGresult *res, int row, int col);
double pgcl_pg_double(const PGresult *res, int row, int col);

/* A bytea column in text (hex, "\x...") form decoded into out (malloc'd, *len bytes; the caller
 * frees it); *out NULL for SQL NULL. PGCL_ERR_FORMAT for malformed hex, PGCL_ERR_NOMEM. */
pgcl_status pgcl_pg_bytea(const PGresult *res, int row, int col, unsigned char **out, size_t *len);

/* ---- the read pool ----
 * Up to `size` connections to one database, made on demand and reused; a broken connection is
 * dropped when it is released, and the next acquire makes a new one. Each new connection is set up
 * once with extra_float_digits = 3 (PGCL_PG_POOL_SESSION_SQL), so that double precision columns
 * come back in text that strtod turns into the stored double exactly, whatever the server's
 * default. Thread-safe. */
#define PGCL_PG_POOL_SESSION_SQL "SET extra_float_digits = 3"

typedef struct pgcl_pg_pool pgcl_pg_pool;

pgcl_pg_pool *pgcl_pg_pool_create(const char *uri, int size, char *err, int cap);
void pgcl_pg_pool_destroy(pgcl_pg_pool *p); /* accepts NULL; no connection may be out */

/* A connection for one read (or one short transaction), waiting up to wait_ms for one to be free:
 * PGCL_ERR_BUSY when none is, PGCL_ERR_DB when the server cannot be reached (err says why). */
pgcl_status pgcl_pg_pool_acquire(pgcl_pg_pool *p, int wait_ms, PGconn **out, char *err, int cap);

/* The connect timeout of the pool's new connections (default PGCL_PG_CONNECT_TIMEOUT_S; >= 2). Call
 * before the first acquire. */
void pgcl_pg_pool_set_connect_timeout(pgcl_pg_pool *p, int timeout_s);

/* Gives conn back; a broken one (or one left inside a transaction) is closed instead. */
void pgcl_pg_pool_release(pgcl_pg_pool *p, PGconn *conn);

/* Hands the pool a connection to its database made elsewhere (the open's, after the migrations),
 * set up as the pool sets up its own (PGCL_PG_POOL_SESSION_SQL) and as though it had been acquired
 * and is now released; one that cannot be set up is closed instead. The pool may not be full. */
void pgcl_pg_pool_adopt(pgcl_pg_pool *p, PGconn *conn);

#endif
