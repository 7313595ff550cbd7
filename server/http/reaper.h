/* The request deadline: a connection gets --request-timeout seconds, from its opening or from the
 * end of its previous answer, to deliver a complete request (headers and body). A client that
 * trickles its request (slowloris: a header byte every second, or a body that never ends) is
 * never idle, so libmicrohttpd's idle timeout (--connection-timeout) does not catch it; a reaper
 * thread does, by shutting the socket down, which the libmicrohttpd thread serving it sees as the
 * client going away (it then closes and frees the connection itself).
 *
 * While a request is being handled and answered there is no deadline (a long export streams for
 * as long as it needs); idle keep-alive connections are libmicrohttpd's to time out.
 *
 * Safety: the reaper only shuts down sockets of connections it tracks, under its lock, and a
 * connection is removed (pgcld_reaper_close, from libmicrohttpd's MHD_CONNECTION_NOTIFY_CLOSED,
 * which runs before libmicrohttpd closes the descriptor) under the same lock, so a descriptor
 * number reused by a later connection is never touched. */
#ifndef PGCLD_REAPER_H
#define PGCLD_REAPER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "metrics.h"

typedef struct pgcld_reaper pgcld_reaper;
typedef struct pgcld_reaper_conn pgcld_reaper_conn;

/* Starts the reaper thread; *timeout_s is read on every scan (0: no deadline), so a reload applies.
 * Each cut is counted in metrics (may be NULL) as PGCLD_REJECT_REQUEST_TIMEOUT.
 * NULL when out of memory or no thread could be started. */
pgcld_reaper *pgcld_reaper_create(const _Atomic long *timeout_s, pgcld_metrics *metrics);
/* Stops the thread; every connection must have been closed already. Accepts NULL. */
void pgcld_reaper_destroy(pgcld_reaper *r);

/* A connection on socket fd opened: its first request's deadline starts now. NULL when out of
 * memory (the connection is then not watched). */
pgcld_reaper_conn *pgcld_reaper_open(pgcld_reaper *r, int fd);
/* The connection is closing (before its descriptor is closed). Accepts NULL. */
void pgcld_reaper_close(pgcld_reaper *r, pgcld_reaper_conn *c);
/* Its request has arrived whole (or was answered early): no deadline until pgcld_reaper_next. */
void pgcld_reaper_received(pgcld_reaper *r, pgcld_reaper_conn *c);
/* Its answer is done: the deadline for the next request on the connection starts now. */
void pgcld_reaper_next(pgcld_reaper *r, pgcld_reaper_conn *c);

/* Whether the reaper cut this connection (its request ran out of time). Accepts NULLs. */
bool pgcld_reaper_was_cut(pgcld_reaper *r, pgcld_reaper_conn *c);

/* Connections cut so far (for metrics). */
unsigned long long pgcld_reaper_cut_count(pgcld_reaper *r);

#endif
