/* The HTTP server: libmicrohttpd in thread-per-connection mode, a route table, JSON replies and
 * errors, and the shared state every handler sees. Handlers are plain functions that fill a
 * pgcld_reply; they never touch libmicrohttpd directly. */
#ifndef PGCLD_SERVER_H
#define PGCLD_SERVER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "compute.h"
#include "config.h"
#include "registry.h"

typedef struct pgcld_server {
    const pgcld_config *cfg;
    pgcl_registry *registry;
    pgcl_audit *audit;
    pgcld_compute *compute;
    struct MHD_Daemon *daemon;
    int port;
    _Atomic int in_flight; /* requests between arrival and completion */
} pgcld_server;

typedef struct pgcld_request {
    const char *method;
    const char *path;
    const char *content_type; /* NULL when absent */
    const char *body;
    size_t body_len;
    int64_t t_start_us;       /* monotonic arrival time */
} pgcld_request;

typedef struct pgcld_reply {
    int status;
    json_t *body;             /* owned; serialised compactly */
    const char *retry_after;  /* seconds, for 503/429; NULL for none */
    const char *allow;        /* Allow header for 405 */
} pgcld_reply;

/* Sets reply to {"error": {"code", "message"[, "item"][, "field"]}}. item < 0 and field NULL omit them. */
void pgcld_reply_error(pgcld_reply *reply, int status, const char *code, int item, const char *field,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Starts listening on cfg->listen. Returns 0, or -1 with a message in err. */
int pgcld_server_start(pgcld_server *srv, char *err, int cap);

/* Stops accepting connections, waits up to grace_s seconds for running requests, then stops. */
void pgcld_server_stop(pgcld_server *srv, int grace_s);

/* Route handlers (routes_*.c). */
void pgcld_handle_score(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_healthz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_readyz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_models(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);

#endif
