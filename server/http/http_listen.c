/* libmicrohttpd glue: the listening side (http.c is a request's life). Connection admission
 * (--max-connections: libmicrohttpd's accept policy and its connection notifications, with the
 * --request-timeout watch of each connection), and the server's start, drain and stop. */
#include "http_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bodybudget.h"
#include "clock.h"
#include "ids.h"
#include "log.h"
#include "ratelimit.h"
#include "reaper.h"
#include "request_head.h"
#include "route_table.h"
#include "server.h"
#include "trace_context.h"

/* libmicrohttpd's MHD_OPTION_CONNECTION_LIMIT is set this far above --max-connections, so that
 * libmicrohttpd never reaches it itself: at its own limit it stops polling the listening socket,
 * and connections past the limit would wait unanswered in the kernel's accept queue until one
 * closes (seen with 0.9.75). Its count also includes connections whose thread has ended but not yet
 * been joined, which the margin absorbs. */
#define MHD_LIMIT_MARGIN 16

static void refuse_connection(pgcld_server *srv, int open);

/* The connection's request-deadline entry (set by on_connection), or NULL. */
pgcld_reaper_conn *pgcld_http_connection_watch(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: counts the open connections (for accept_connection) and watches
 * each for the --request-timeout deadline. STARTED comes on the pool thread that accepted the
 * socket, right after accept_connection admitted it; CLOSED on the thread that served it.
 *
 * Pool threads accept on their own, so two may admit a socket each at the last free place: the
 * count taken here settles it. A connection counted past --max-connections is shut down at once,
 * before a byte is read (libmicrohttpd then sees end of stream and closes it): the client sees
 * what accept_connection's refusal shows, and no more than --max-connections are ever served. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    pgcld_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        int before = atomic_fetch_add(&srv->open_connections, 1);
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (before >= srv->cfg->max_connections && info) {
            refuse_connection(srv, before);
            shutdown(info->connect_fd, SHUT_RDWR);
        }
        if (!srv->reaper) return;
        *socket_context = info ? pgcld_reaper_open(srv->reaper, info->connect_fd) : NULL;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&srv->open_connections, 1);
        if (!srv->reaper) return;
        pgcld_reaper_close(srv->reaper, *socket_context);
        *socket_context = NULL;
    }
}

/* MHD's accept policy, called on the accepting pool thread for every accepted socket that passed
 * --max-connections-per-ip: refuses it (libmicrohttpd closes it at once, before reading a byte, so
 * the client sees end of stream or a reset and no HTTP answer) while --max-connections connections
 * are open. Two pool threads may both admit a socket at the last free place; on_connection's count
 * shuts the second down the same way. Refusals are counted in
 * pgcld_rejected_total{reason="connection_limit"} and logged at most once every 10 s. */
static enum MHD_Result accept_connection(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addr;
    (void)addrlen;
    pgcld_server *srv = cls;
    int open = atomic_load(&srv->open_connections);
    if (open < srv->cfg->max_connections) return MHD_YES;
    refuse_connection(srv, open);
    return MHD_NO;
}

/* Counts (and, at most every 10 s, logs) a connection refused by --max-connections. */
static void refuse_connection(pgcld_server *srv, int open) {
    pgcld_metrics_rejected(srv->metrics, PGCLD_REJECT_CONNECTION_LIMIT);
    unsigned long long refused = atomic_fetch_add(&srv->connections_refused, 1) + 1;
    int64_t now = pgcl_monotonic_us(), logged = atomic_load(&srv->connection_limit_logged_us);
    if ((logged == 0 || now - logged >= 10 * 1000000) &&
        atomic_compare_exchange_strong(&srv->connection_limit_logged_us, &logged, now))
        pgcl_log_warn("http: %d connections open (max-connections): closing new connections unanswered "
                      "(%llu refused since start)", open, refused);
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

/* Registers a path, as configured and resolved, to be said as `instead` in error messages. */
static void redact_path(const char *path, const char *instead) {
    if (!path || !*path) return;
    pgcld_reply_redact(path, instead);
    char resolved[PATH_MAX];
    if (realpath(path, resolved)) pgcld_reply_redact(resolved, instead);
}

/* The configured paths: an error answer says "the audit database", never where it lies. */
static void register_redactions(const pgcld_server *srv) {
    static bool done;
    if (done) return;
    done = true;
    const pgcld_config *cfg = srv->cfg;
    redact_path(cfg->db_path, "the audit database");
    redact_path(srv->registry ? pgcl_registry_dir(srv->registry) : NULL, "the model repository");
    redact_path(cfg->models_dir, "the model repository");
    redact_path(cfg->checkpoint_dir, "the checkpoint directory");
    redact_path(cfg->signing_key, "the signing key file");
    redact_path(cfg->tls_cert, "the TLS certificate file");
    redact_path(cfg->tls_key, "the TLS key file");
}

unsigned pgcld_http_threads(const pgcld_config *cfg) {
    long n = cfg->http_threads;
    if (n > 0) return (unsigned)n;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > 8 ? 8 : (unsigned)cpus;
}

int pgcld_server_start(pgcld_server *srv, char *err, int cap) {
    srv->quiesced_listener = -1;
    srv->handlers_running = 0;
    srv->handlers_closed = false;
    register_redactions(srv);
    struct sockaddr_storage ss = {0};
    socklen_t sslen;
    /* An empty listen address (which the configuration refuses, so only in-process callers such as
     * tests/fuzz/fuzz_daemon.c set it): no listening socket; connections come in through
     * MHD_add_connection(). */
    bool no_listen = srv->cfg->listen[0] == 0;
    if (!no_listen && resolve_listen(srv->cfg->listen, &ss, &sslen, err, cap) != 0) return -1;
    /* A pool of threads each polling its share of the connections (epoll where libmicrohttpd has
     * it, else poll; never select, which cannot watch a socket numbered 1024 or above), with
     * suspend/resume for deferred answers (which needs the inter-thread channel, MHD_USE_ITC). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                     (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_POLL);
    unsigned threads = pgcld_http_threads(srv->cfg);
    if (no_listen) flags |= MHD_USE_NO_LISTEN_SOCKET;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* HTTPS when main.c has read --tls-cert and --tls-key (and checked them with a trial daemon):
     * the PEM texts stay in cfg for the daemon's life. Without them the array is empty. */
    struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL}};
    bool https = srv->cfg->tls_cert_pem && srv->cfg->tls_key_pem;
    if (https) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            pgcl_errorf(err, cap, "HTTPS asked for (tls-cert, tls-key) but this libmicrohttpd has no TLS support");
            return -1;
        }
        flags |= MHD_USE_TLS;
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, srv->cfg->tls_cert_pem};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, srv->cfg->tls_key_pem};
        tls[2] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)pgcld_config_tls_priorities(srv->cfg)};
        tls[3] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    /* Overload protection: the per-key rate limit's buckets (a fixed table) and the reaper of
     * requests that take over --request-timeout to arrive. */
    if (!srv->ratelimit && !(srv->ratelimit = pgcld_ratelimit_create(4096, NULL, NULL))) {
        pgcl_errorf(err, cap, "out of memory");
        return -1;
    }
    if (!srv->reaper && !(srv->reaper = pgcld_reaper_create(&srv->cfg->request_timeout_s, srv->metrics))) {
        pgcl_errorf(err, cap, "cannot start the request-timeout thread");
        return -1;
    }
    if (!srv->body_budget && !(srv->body_budget = pgcld_body_budget_create(&srv->cfg->max_body_memory))) {
        pgcl_errorf(err, cap, "out of memory");
        return -1;
    }
    /* --max-connections is enforced by accept_connection (refused at once); libmicrohttpd's own
     * limit sits MHD_LIMIT_MARGIN above it so that it never queues connections instead. */
    srv->daemon = MHD_start_daemon(flags, 0, accept_connection, srv, pgcld_http_on_request, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                                   MHD_OPTION_SOCK_ADDR, no_listen ? NULL : (struct sockaddr *)&ss,
                                   MHD_OPTION_THREAD_POOL_SIZE, threads,
                                   MHD_OPTION_CONNECTION_LIMIT,
                                   (unsigned)srv->cfg->max_connections + MHD_LIMIT_MARGIN * threads,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg->connection_timeout_s,
                                   MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)srv->cfg->max_connections_per_ip,
                                   MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                                   MHD_OPTION_NOTIFY_COMPLETED, pgcld_http_on_completed, srv,
                                   MHD_OPTION_URI_LOG_CALLBACK, pgcld_http_on_request_line, srv,
                                   MHD_OPTION_ARRAY, tls,
                                   MHD_OPTION_END);
    if (!srv->daemon) {
        pgcl_errorf(err, cap, "cannot listen on %s (address in use or not available%s)", srv->cfg->listen,
                    https ? ", or the TLS set-up failed: see the http: warning above" : "");
        pgcld_reaper_destroy(srv->reaper);
        srv->reaper = NULL;
        pgcld_ratelimit_destroy(srv->ratelimit);
        srv->ratelimit = NULL;
        pgcld_body_budget_destroy(srv->body_budget);
        srv->body_budget = NULL;
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    return 0;
}

void pgcld_server_begin_drain(pgcld_server *srv) {
    if (atomic_exchange(&srv->draining, true) || !srv->daemon) return;
    /* libmicrohttpd's threads may still hold the listening descriptor until MHD_stop_daemon (its
     * documentation: close it only after that), so it is shut down now — new connections are
     * refused — and closed at the end, never handed back for reuse while a thread may look at it. */
    MHD_socket listener = MHD_quiesce_daemon(srv->daemon);
    if (listener != MHD_INVALID_SOCKET) shutdown(listener, SHUT_RDWR);
    srv->quiesced_listener = listener == MHD_INVALID_SOCKET ? -1 : (int)listener;
}

void pgcld_server_stop(pgcld_server *srv, int grace_s) {
    pgcld_server_begin_drain(srv);
    if (!srv->daemon) return;
    int64_t deadline = pgcl_monotonic_us() + (int64_t)grace_s * 1000000;
    while (atomic_load(&srv->in_flight) > 0 && pgcl_monotonic_us() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int left = atomic_load(&srv->in_flight);
    if (left > 0) pgcl_log_warn("shutdown: %d requests still running after %d s; closing them", left, grace_s);
    /* A deferred answer's work (a forward pass, a commit) always ends, and libmicrohttpd must not
     * stop with a connection suspended: wait for every such request to be resumed and answered
     * (or its connection to close: a client that reads nothing is timed out), as the threads of
     * blocked handlers were waited for when each connection had its own. Bodies waiting for
     * --max-body-memory are resumed by its timer within 10 s. Then the gate closes (enter_handler):
     * a request arriving later on a kept-open connection is closed unanswered instead of
     * suspending under MHD_stop_daemon. */
    for (int64_t logged = pgcl_monotonic_us(); !pgcld_http_close_handlers_when_idle(srv);) {
        if (pgcl_monotonic_us() - logged >= 5 * 1000000) {
            logged = pgcl_monotonic_us();
            pgcl_log_warn("shutdown: waiting for %d requests' deferred answers (%d suspended)",
                          atomic_load(&srv->deferred_open), atomic_load(&srv->suspended));
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    if (srv->quiesced_listener >= 0) close(srv->quiesced_listener);
    srv->quiesced_listener = -1;
    pgcld_reaper_destroy(srv->reaper); /* every connection is closed now */
    srv->reaper = NULL;
    pgcld_ratelimit_destroy(srv->ratelimit);
    srv->ratelimit = NULL;
    pgcld_body_budget_destroy(srv->body_budget); /* every request has completed */
    srv->body_budget = NULL;
}
