/* libmicrohttpd glue: body accumulation with limits, routing, JSON serialisation of replies,
 * start/stop. One thread per connection: a handler may block on the audit commit without holding
 * up other clients. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ids.h"
#include "log.h"
#include "server.h"

typedef void (*route_fn)(pgcld_server *, const pgcld_request *, pgcld_reply *);

typedef struct route {
    const char *method;
    const char *path;
    route_fn fn;
    bool takes_body;
} route;

static const route g_routes[] = {
    {"POST", "/v1/score", pgcld_handle_score, true},
    {"GET", "/v1/models", pgcld_handle_models, false},
    {"GET", "/healthz", pgcld_handle_healthz, false},
    {"GET", "/readyz", pgcld_handle_readyz, false},
};
#define N_ROUTES ((int)(sizeof g_routes / sizeof g_routes[0]))

/* Per-request state kept by libmicrohttpd between calls of the access handler. */
typedef struct request_ctx {
    pgcld_server *srv;
    const route *route;
    char *body;
    size_t len, cap;
    bool too_large;
    int64_t t_start_us;
} request_ctx;

void pgcld_reply_error(pgcld_reply *reply, int status, const char *code, int item, const char *field,
                       const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (item >= 0) json_object_set_new(err, "item", json_integer(item));
    if (field) json_object_set_new(err, "field", json_string(field));
    json_decref(reply->body);
    reply->status = status;
    reply->body = json_pack("{s:o}", "error", err);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, pgcld_reply *reply) {
    char *text = reply->body ? json_dumps(reply->body, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    if (reply->body && !text) {
        reply->status = 500;
        text = strdup("{\"error\":{\"code\":\"internal_error\",\"message\":\"out of memory\"}}");
    }
    size_t len = text ? strlen(text) : 0;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text ? text : (char *)"",
                                                                text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (reply->retry_after) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, reply->retry_after);
    if (reply->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, reply->allow);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)reply->status, resp);
    MHD_destroy_response(resp);
    json_decref(reply->body);
    reply->body = NULL;
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, int status, const char *code, const char *msg,
                                  const char *allow) {
    pgcld_reply reply = {0};
    pgcld_reply_error(&reply, status, code, -1, NULL, "%s", msg);
    reply.allow = allow;
    return send_reply(conn, &reply);
}

/* Finds the route for method+path. Sets *path_known when some method serves the path. */
static const route *find_route(const char *method, const char *path, bool *path_known, char *allow, size_t cap) {
    *path_known = false;
    allow[0] = 0;
    const route *hit = NULL;
    for (int i = 0; i < N_ROUTES; i++) {
        if (strcmp(g_routes[i].path, path) != 0) continue;
        *path_known = true;
        size_t used = strlen(allow);
        snprintf(allow + used, cap - used, "%s%s", used ? ", " : "", g_routes[i].method);
        if (strcmp(g_routes[i].method, method) == 0) hit = &g_routes[i];
    }
    return hit;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    pgcld_server *srv = cls;
    request_ctx *ctx = *con_cls;
    if (!ctx) {
        /* First call: headers only. Route, and refuse early what can be refused from headers. */
        ctx = calloc(1, sizeof *ctx);
        if (!ctx) return MHD_NO;
        ctx->srv = srv;
        ctx->t_start_us = pgcl_monotonic_us();
        *con_cls = ctx;
        atomic_fetch_add(&srv->in_flight, 1);
        bool path_known;
        char allow[64];
        const char *lookup = strcmp(method, "HEAD") == 0 ? "GET" : method;
        ctx->route = find_route(lookup, url, &path_known, allow, sizeof allow);
        if (!ctx->route) {
            if (path_known)
                return send_error(conn, 405, "method_not_allowed", "this path does not accept that method", allow);
            char msg[320];
            snprintf(msg, sizeof msg, "no route for %.256s", url);
            return send_error(conn, 404, "not_found", msg, NULL);
        }
        if (ctx->route->takes_body) {
            const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl && strtoull(cl, NULL, 10) > (unsigned long long)srv->cfg->max_body_bytes) {
                char msg[128];
                snprintf(msg, sizeof msg, "request body of %s bytes exceeds the limit of %ld bytes", cl,
                         srv->cfg->max_body_bytes);
                return send_error(conn, 413, "payload_too_large", msg, NULL);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->too_large || ctx->len + n > (size_t)srv->cfg->max_body_bytes) {
            ctx->too_large = true; /* keep reading and discarding; answer 413 at the end */
            return MHD_YES;
        }
        if (ctx->len + n + 1 > ctx->cap) {
            size_t cap = ctx->cap ? ctx->cap : 16384;
            while (cap < ctx->len + n + 1) cap *= 2;
            char *grown = realloc(ctx->body, cap);
            if (!grown) return MHD_NO;
            ctx->body = grown;
            ctx->cap = cap;
        }
        memcpy(ctx->body + ctx->len, upload_data, n);
        ctx->len += n;
        ctx->body[ctx->len] = 0;
        return MHD_YES;
    }
    if (ctx->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body exceeds the limit of %ld bytes", srv->cfg->max_body_bytes);
        return send_error(conn, 413, "payload_too_large", msg, NULL);
    }
    pgcld_request req = {
        .method = method,
        .path = url,
        .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        .body = ctx->body ? ctx->body : "",
        .body_len = ctx->len,
        .t_start_us = ctx->t_start_us,
    };
    pgcld_reply reply = {.status = 200};
    ctx->route->fn(srv, &req, &reply);
    if (!reply.body) pgcld_reply_error(&reply, 500, "internal_error", -1, NULL, "handler produced no answer");
    return send_reply(conn, &reply);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    request_ctx *ctx = *con_cls;
    if (!ctx) return;
    atomic_fetch_sub(&ctx->srv->in_flight, 1);
    free(ctx->body);
    free(ctx);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    pgcl_log_warn("http: %s", msg);
}

/* Splits "HOST:PORT" ("[v6]:PORT" for IPv6) and resolves it. */
static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *err, int cap) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host) {
        pgcl_errorf(err, cap, "--listen '%s' must be HOST:PORT", listen);
        return -1;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    char *port_end;
    long port = strtol(colon + 1, &port_end, 10);
    if (colon[1] == 0 || *port_end || port < 0 || port > 65535) {
        pgcl_errorf(err, cap, "--listen '%s': port must be a number from 0 to 65535", listen);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) {
        pgcl_errorf(err, cap, "--listen '%s': %s", listen, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int pgcld_server_start(pgcld_server *srv, char *err, int cap) {
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (resolve_listen(srv->cfg->listen, &ss, &sslen, err, cap) != 0) return -1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                                   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg->max_connections,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg->connection_timeout_s,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                   MHD_OPTION_END);
    if (!srv->daemon) {
        pgcl_errorf(err, cap, "cannot listen on %s (address in use or not available)", srv->cfg->listen);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    return 0;
}

void pgcld_server_stop(pgcld_server *srv, int grace_s) {
    if (!srv->daemon) return;
    MHD_socket listener = MHD_quiesce_daemon(srv->daemon);
    if (listener != MHD_INVALID_SOCKET) close(listener);
    int64_t deadline = pgcl_monotonic_us() + (int64_t)grace_s * 1000000;
    while (atomic_load(&srv->in_flight) > 0 && pgcl_monotonic_us() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int left = atomic_load(&srv->in_flight);
    if (left > 0) pgcl_log_warn("shutdown: %d requests still running after %d s; closing them", left, grace_s);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}
