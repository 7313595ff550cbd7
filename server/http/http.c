/* libmicrohttpd glue: a request's life from its request line to its completion (head checks,
 * routing through route_table.c, authentication, overload protection, body accumulation with
 * limits, the handler's call, sending its reply and counting the outcome), and start/stop.
 *
 * Event-driven: a fixed pool of --http-threads libmicrohttpd threads (epoll where available)
 * serves every connection. A handler that would wait for another thread (the scoring routes: the
 * forward pass, the audit commit) defers its answer instead (pgcld_request_defer): the connection
 * is suspended (MHD_suspend_connection) and holds no thread until the work's completion resumes it
 * (MHD_resume_connection, from the batcher worker or the audit writer); then the handler is called
 * again and the deferred finish writes the answer on a pool thread. Other handlers run to the end
 * on the pool thread (short reads, single commits). A body waiting for --max-body-memory is
 * suspended the same way (bodybudget.h). Error bodies and media types are reply.c's; request
 * accessors and fingerprints request.c's. */
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

/* The first buffer of a body without Content-Length, doubled as it grows. */
#define BODY_FIRST_CAP 16384

/* A request whose answer waits for deferred work (pgcld_request_defer). `done` and `suspended`
 * are read and written under g_suspend_lock, so that the connection is resumed exactly when it was
 * suspended: the work may end before the handler has returned (then the connection is never
 * suspended and the answer is written at once), or after (then its completion resumes it). */
struct pgcld_deferred {
    pgcld_server *srv;
    struct MHD_Connection *conn;
    pgcld_finish_fn finish; /* NULL once the answer was written (or none was deferred) */
    void *state;
    bool done;      /* pgcld_deferred_resume was called */
    bool suspended; /* the connection is suspended, waiting for that call */
    bool counted;   /* in srv->deferred_open until the request completes */
};

static pthread_mutex_t g_suspend_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per-request state kept by libmicrohttpd between calls of the access handler. */
typedef struct request_ctx {
    pgcld_server *srv;
    const pgcld_route *route;
    int route_index;
    pgcld_path_params path_params; /* the route pattern's "{…}" segments */
    pgcl_identity identity;
    bool authenticated;
    char actor[PGCLD_ACTOR_LEN];
    char *body;
    size_t len, cap;
    unsigned long long declared; /* Content-Length, read once with the headers; 0 when absent */
    size_t reserved;      /* bytes of the --max-body-memory budget this body holds */
    bool too_large;
    bool shed;            /* waited too long for the body budget: the body is discarded, 503 */
    char retry_after[16]; /* Retry-After of a 429 sent by admit() */
    int64_t t_start_us;
    int status; /* of the answer sent, for metrics; 0 while none was sent */
    /* For the access log line (pgcld_http_on_completed): */
    char request_id[PGCL_REQUEST_ID_MAX + 1]; /* a UUIDv7 made with the context, or the client's X-Request-Id
                                               * (trace_context.h); the answer's X-Request-Id */
    char trace_id[PGCL_TRACE_ID_LEN + 1];     /* the traceparent's, or made at the start; "" before */
    char method[16];
    char path[256];                     /* the decoded path, cut at 255 bytes */
    unsigned long long bytes_in;        /* body bytes read (kept or discarded) */
    long long bytes_out;                /* the answer's body; -1 when streamed (unknown) */
    int items;                          /* a scoring answer's items, model and version (pgcld_reply) */
    char model[64], version[64];
    bool started;              /* the handler's first call (headers in) has run */
    bool oip;                  /* a /v2 path: errors go in the Open Inference Protocol's shape */
    pgcld_raw_target target;   /* what the request target said before it was decoded */
    bool scoring_admitted;     /* counted in score_in_flight until the answer is written */
    pgcld_deferred deferred;   /* the handler's deferred answer, if it deferred one; its conn too */
    /* A scoring body waiting for --max-body-memory (reserve_body): */
    pgcld_body_wait body_wait;
    bool body_queued;          /* in the budget's queue, or its wait just ended */
    bool body_wait_over, body_wait_suspended; /* under g_suspend_lock */
} request_ctx;


static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    pgcld_reply *r = cls;
    long n = r->stream_fn(r->stream_ctx, buf, max);
    if (n > 0) return (ssize_t)n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_done(void *cls) {
    pgcld_reply *r = cls;
    if (r->stream_free) r->stream_free(r->stream_ctx);
    free(r);
}

/* Queues a streamed response; takes over the reply's stream. */
static enum MHD_Result send_stream(struct MHD_Connection *conn, pgcld_reply *reply, bool close,
                                   const char *request_id) {
    pgcld_reply *copy = malloc(sizeof *copy);
    if (!copy) {
        if (reply->stream_free) reply->stream_free(reply->stream_ctx);
        return MHD_NO;
    }
    *copy = *reply;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_reader, copy,
                                                                  stream_done);
    if (!resp) {
        stream_done(copy);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, reply->content_type ? reply->content_type : "application/octet-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, "X-Request-Id", request_id);
    if (reply->content_disposition)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, reply->content_disposition);
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)reply->status, resp);
    MHD_destroy_response(resp);
    json_decref(reply->body);
    reply->body = NULL;
    return rc;
}

/* Adds reply->headers (name/value pairs) to resp; true when they include a Cache-Control. */
static bool add_extra_headers(struct MHD_Response *resp, const pgcld_reply *reply) {
    bool cache_control = false;
    for (const char *const *h = reply->headers; h && h[0] && h[1]; h += 2) {
        MHD_add_response_header(resp, h[0], h[1]);
        if (strcasecmp(h[0], MHD_HTTP_HEADER_CACHE_CONTROL) == 0) cache_control = true;
    }
    return cache_control;
}

/* Queues reply on conn. While the server drains (shutdown), every answer carries Connection: close,
 * so that a client on a kept-open connection goes to another replica instead of sending a request
 * the stopping server would drop unanswered when it closes its connections. */
static enum MHD_Result send_reply(request_ctx *ctx, struct MHD_Connection *conn, pgcld_reply *reply) {
    const pgcld_server *srv = ctx->srv;
    bool close = reply->close_connection || atomic_load(&srv->draining);
    ctx->items = reply->log_items;
    snprintf(ctx->model, sizeof ctx->model, "%s", reply->log_model);
    snprintf(ctx->version, sizeof ctx->version, "%s", reply->log_version);
    if (reply->stream_fn) {
        ctx->bytes_out = -1;
        return send_stream(conn, reply, close, ctx->request_id);
    }
    if (ctx->oip && reply->body) pgcld_reply_oip_error(reply->body);
    struct MHD_Response *resp;
    if (reply->data) {
        ctx->bytes_out = (long long)reply->data_len;
        resp = MHD_create_response_from_buffer(reply->data_len, (void *)reply->data,
                                               reply->data_owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        free(reply->text);
        reply->text = NULL;
        if (!resp) {
            if (reply->data_owned) free((void *)reply->data);
            return MHD_NO;
        }
    } else {
        char *text = reply->text ? reply->text : reply->body ? json_dumps(reply->body, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        reply->text = NULL;
        if (reply->body && !text) {
            reply->status = 500;
            text = strdup(ctx->oip ? "{\"error\":\"out of memory\",\"code\":\"internal_error\"}"
                                   : "{\"error\":{\"code\":\"internal_error\",\"message\":\"out of memory\"}}");
        }
        size_t len = text ? strlen(text) : 0;
        ctx->bytes_out = (long long)len;
        resp = MHD_create_response_from_buffer(len, text ? text : (char *)"",
                                               text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
            free(text);
            return MHD_NO;
        }
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, reply->content_type ? reply->content_type : "application/json");
    MHD_add_response_header(resp, "X-Request-Id", ctx->request_id);
    if (!add_extra_headers(resp, reply)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (reply->retry_after) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, reply->retry_after);
    if (reply->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, reply->allow);
    if (reply->www_authenticate) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, reply->www_authenticate);
    if (reply->dynamic_header_name)
        MHD_add_response_header(resp, reply->dynamic_header_name, reply->dynamic_header_value);
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)reply->status, resp);
    MHD_destroy_response(resp);
    json_decref(reply->body);
    reply->body = NULL;
    return rc;
}

static enum MHD_Result send_error(request_ctx *ctx, struct MHD_Connection *conn, int status, const char *code,
                                  const char *msg,
                                  const char *allow) {
    pgcld_reply reply = {0};
    pgcld_reply_error(&reply, status, code, -1, NULL, "%s", msg);
    reply.allow = allow;
    if (status == 401) reply.www_authenticate = "Bearer";
    return send_reply(ctx, conn, &reply);
}

/* Checks the caller's key against the route's roles. Returns 0, or sends 401/403 and returns -1
 * with *rc set. */
static int authorise(request_ctx *ctx, struct MHD_Connection *conn, enum MHD_Result *rc) {
    pgcld_server *srv = ctx->srv;
    bool log_public = pgcld_route_is_public_log(ctx->route) && strcmp(srv->cfg->log_access, "public") == 0;
    if (ctx->route->roles == PGCLD_ROUTE_ANYONE || !srv->keyring || log_public) {
        snprintf(ctx->actor, sizeof ctx->actor, "anonymous");
        return 0;
    }
    pgcld_field auth;
    pgcld_header_field(conn, MHD_HTTP_HEADER_AUTHORIZATION, &auth);
    if (!auth.at || auth.len < 7 || strncasecmp(auth.at, "Bearer ", 7) != 0) {
        ctx->status = 401;
        *rc = send_error(ctx, conn, 401, "unauthorized", "this endpoint needs an API key: Authorization: Bearer <key>", NULL);
        return -1;
    }
    pgcld_field token = pgcld_field_trim(auth.at + 7, auth.len - 7); /* "Bearer" 1*SP token68 */
    char key[PGCL_KEY_LEN + 1]; /* a longer token is no key: refused as unknown */
    if (!pgcld_field_copy(token, key, sizeof key) || pgcl_keyring_verify(srv->keyring, key, &ctx->identity) != PGCL_OK) {
        ctx->status = 401;
        *rc = send_error(ctx, conn, 401, "unauthorized", "the API key is unknown or revoked", NULL);
        return -1;
    }
    ctx->authenticated = true;
    snprintf(ctx->actor, sizeof ctx->actor, "%s (%s)", ctx->identity.name, ctx->identity.key_id);
    if (!(ctx->route->roles & (int)ctx->identity.role)) {
        char msg[160];
        snprintf(msg, sizeof msg, "a %s key may not use this endpoint", pgcl_role_str(ctx->identity.role));
        ctx->status = 403;
        *rc = send_error(ctx, conn, 403, "forbidden", msg, NULL);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Overload protection (docs/RELIABILITY.md, "Overload"). */

/* The scoring routes (pgcld_route_is_scoring) are rate-limited per key and bounded by
 * --max-score-in-flight. Reviewer, admin and public routes are neither, so they keep answering
 * while scoring is saturated. */

/* The rate-limit bucket name: the key id, or the client's address when no key was checked. */
static void client_name(const request_ctx *ctx, struct MHD_Connection *conn, char *out, size_t cap) {
    if (ctx->authenticated) {
        snprintf(out, cap, "key:%s", ctx->identity.key_id);
        return;
    }
    char host[NI_MAXHOST] = "unknown";
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info && info->client_addr) {
        const struct sockaddr *sa = info->client_addr;
        socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (getnameinfo(sa, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0) snprintf(host, sizeof host, "unknown");
    }
    snprintf(out, cap, "ip:%s", host);
}

/* The longest a scoring request waits for --max-body-memory before it is answered 503 overloaded:
 * half its --request-timeout (so that the answer leaves before the deadline closes the connection),
 * at most MAX_BODY_WAIT_S. */
#define MAX_BODY_WAIT_S 10

/* ---- Suspension: a connection waiting for another thread holds none ----
 * Two waits suspend a connection: a scoring body waiting for --max-body-memory, and a deferred
 * answer (pgcld_request_defer). Each has a pair of flags under g_suspend_lock: `over` (set by the
 * thread that ends the wait) and `suspended` (set by the pool thread that suspends). */

/* Suspends conn for a wait unless it is over already (it may end before the handler returns).
 * True when suspended: the handler returns, and is called again after end_wait resumes it. */
static bool suspend_unless_over(pgcld_server *srv, struct MHD_Connection *conn, const bool *over, bool *suspended) {
    pthread_mutex_lock(&g_suspend_lock);
    bool suspend = !*over;
    if (suspend) {
        *suspended = true;
        atomic_fetch_add(&srv->suspended, 1);
        MHD_suspend_connection(conn);
    }
    pthread_mutex_unlock(&g_suspend_lock);
    return suspend;
}

/* Ends a wait (from any thread): resumes conn if the wait had suspended it. Touches nothing of
 * the request once the lock is released (a resumed request may complete at once). */
static void end_wait(pgcld_server *srv, struct MHD_Connection *conn, bool *over, bool *suspended) {
    pthread_mutex_lock(&g_suspend_lock);
    PGCL_ASSERT(!*over); /* each wait ends once */
    *over = true;
    if (*suspended) {
        *suspended = false;
        MHD_resume_connection(conn);
        atomic_fetch_sub(&srv->suspended, 1);
    }
    pthread_mutex_unlock(&g_suspend_lock);
}

/* Whether a wait is over (its flag read under the lock). */
static bool wait_over(const bool *over) {
    pthread_mutex_lock(&g_suspend_lock);
    bool v = *over;
    pthread_mutex_unlock(&g_suspend_lock);
    return v;
}

pgcld_deferred *pgcld_request_defer(const pgcld_request *req, pgcld_finish_fn finish, void *state) {
    pgcld_deferred *d = req->deferred;
    PGCL_ASSERT(d != NULL && d->finish == NULL && finish != NULL); /* once per request */
    d->finish = finish;
    d->state = state;
    d->counted = true;
    atomic_fetch_add(&d->srv->deferred_open, 1);
    return d;
}

void pgcld_deferred_resume(pgcld_deferred *d) { end_wait(d->srv, d->conn, &d->done, &d->suspended); }

/* The body budget's wake (bodybudget.h): the scoring body's wait for --max-body-memory is over. */
static void on_body_wait_over(void *arg) {
    request_ctx *ctx = arg;
    end_wait(ctx->srv, ctx->deferred.conn, &ctx->body_wait_over, &ctx->body_wait_suspended);
}

/* A scoring request's body once its handler has parsed it and deferred its answer: the job holds
 * its own copies (the embeddings as float32, the ids), so the body's bytes and their share of
 * --max-body-memory go back now rather than when the answer is sent — a request waiting for its
 * commit holds its arrays, not its body (for a JSON body, several times their size). */
static void drop_body(request_ctx *ctx) {
    size_t share = ctx->cap < ctx->reserved ? ctx->cap : ctx->reserved;
    free(ctx->body);
    ctx->body = NULL;
    ctx->len = ctx->cap = 0;
    if (share) {
        pgcld_body_budget_release(ctx->srv->body_budget, share);
        ctx->reserved -= share;
    }
}

/* Reserves ctx's body (`bytes`) in --max-body-memory for the first chunk of a scoring body. 1:
 * reserved; 0: the wait is over without room (deadline: the body is shed); -1: the connection is
 * suspended until the budget makes room or gives up (the chunk stays unconsumed: libmicrohttpd
 * hands it again after the resume, and reads nothing more meanwhile, so TCP flow control holds
 * the client back). */
static int reserve_body(request_ctx *ctx, struct MHD_Connection *conn, size_t bytes) {
    pgcld_server *srv = ctx->srv;
    if (!ctx->body_queued) {
        long timeout_s = srv->cfg->request_timeout_s;
        int64_t wait_us = timeout_s > 0 && timeout_s < 2 * MAX_BODY_WAIT_S ? timeout_s * 500000
                                                                            : MAX_BODY_WAIT_S * 1000000;
        if (pgcld_body_budget_reserve_async(srv->body_budget, &ctx->body_wait, bytes, ctx->t_start_us + wait_us,
                                            on_body_wait_over, ctx)) {
            ctx->reserved = bytes;
            return 1;
        }
        ctx->body_queued = true;
        if (suspend_unless_over(srv, conn, &ctx->body_wait_over, &ctx->body_wait_suspended)) return -1;
    }
    PGCL_ASSERT(wait_over(&ctx->body_wait_over));
    ctx->body_queued = false;
    if (!ctx->body_wait.admitted) return 0;
    ctx->reserved = ctx->body_wait.bytes;
    return 1;
}

void pgcld_request_hold_memory(pgcld_server *srv, const pgcld_request *req, size_t bytes) {
    if (!req->memory_held || !bytes) return;
    pgcld_body_budget_grow(srv->body_budget, bytes);
    *req->memory_held += bytes;
}

/* Admits a scoring request whose body has arrived (checked then, not at the headers, so that a
 * client still sending its body reads the answer instead of a reset): the per-key rate limit
 * (429 rate_limited), then the bound on scoring requests handled at once (503 overloaded, at
 * once rather than queued, so scoring never holds every thread). Returns 0 with the request
 * counted in score_in_flight (the caller releases it), or -1 with the refusal in reply. */
static int admit(request_ctx *ctx, struct MHD_Connection *conn, pgcld_reply *reply) {
    pgcld_server *srv = ctx->srv;
    long rps = srv->cfg->rate_limit_rps;
    if (rps > 0 && srv->ratelimit) {
        char name[PGCLD_RATELIMIT_NAME_LEN + 8];
        client_name(ctx, conn, name, sizeof name);
        int wait_s = pgcld_ratelimit_take(srv->ratelimit, name, rps, srv->cfg->rate_limit_burst);
        if (wait_s > 0) {
            snprintf(ctx->retry_after, sizeof ctx->retry_after, "%d", wait_s);
            reply->retry_after = ctx->retry_after;
            pgcld_reply_error(reply, 429, "rate_limited", -1, NULL,
                              "more than %ld scoring requests a second (burst %ld) from this %s; retry after %d s",
                              rps, srv->cfg->rate_limit_burst > 0 ? (long)srv->cfg->rate_limit_burst : rps,
                              ctx->authenticated ? "API key" : "address", wait_s);
            pgcld_metrics_rejected(srv->metrics, PGCLD_REJECT_RATE_LIMITED);
            return -1;
        }
    }
    long bound = srv->cfg->max_score_in_flight;
    int before = atomic_fetch_add(&srv->score_in_flight, 1);
    if (bound > 0 && before >= bound) {
        atomic_fetch_sub(&srv->score_in_flight, 1);
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "overloaded", -1, NULL,
                          "%ld scoring requests are being handled (max-score-in-flight); retry shortly", bound);
        pgcld_metrics_rejected(srv->metrics, PGCLD_REJECT_OVERLOADED);
        return -1;
    }
    return 0;
}

/* A request's context, made when libmicrohttpd has read its request line. */
static request_ctx *request_ctx_create(pgcld_server *srv, const char *raw_target) {
    request_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->srv = srv;
    ctx->route_index = -1;
    pgcl_uuid7(ctx->request_id);
    pgcld_raw_target_note(raw_target, &ctx->target);
    return ctx;
}

/* MHD_OPTION_URI_LOG_CALLBACK: called once per request, right after its request line, with the
 * request target still percent-encoded (libmicrohttpd decodes it into C strings afterwards, and
 * a decoded NUL would cut them short unseen). The context made here is the handler's *con_cls,
 * and pgcld_http_on_completed sees every request libmicrohttpd started, also one it answered itself. */
void *pgcld_http_on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)conn;
    return request_ctx_create(cls, uri);
}

/* Sends the refusal of a request's head; the connection closes after it. */
static enum MHD_Result refuse_head(request_ctx *ctx, struct MHD_Connection *conn, const pgcld_head_problem *p) {
    pgcld_reply reply = {.close_connection = true};
    pgcld_reply_error(&reply, p->status, p->code, -1, p->field[0] ? p->field : NULL, "%s", p->message);
    ctx->status = p->status;
    return send_reply(ctx, conn, &reply);
}

/* Writes all of buf on the non-blocking socket fd, waiting up to a second for room. */
static bool send_all(int fd, const char *buf, size_t len) {
    int64_t deadline = pgcl_monotonic_us() + 1000000;
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || pgcl_monotonic_us() >= deadline) return false;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, 100);
    }
    return true;
}

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 413: return "Content Too Large";
    default: return "Error";
    }
}

/* libmicrohttpd 0.9.75 answers a request whose Content-Length is not a decimal number (or too
 * large for 64 bits) with its own HTML page before the handler's first call, and then writes that
 * answer's status line and headers a second time (its state machine builds the header again after
 * the handler ran): the client reads a broken answer. The handler cannot queue another answer (one
 * is queued already), so pgcld writes its JSON error on the socket itself and returns MHD_NO, which
 * makes libmicrohttpd close the connection without sending its own. Nothing else is written on the
 * connection at this point (its previous answer, if any, has been sent; the body is not read).
 * Over TLS the socket carries records pgcld cannot write: the connection is closed unanswered. */
static enum MHD_Result answer_in_place_of_library(request_ctx *ctx, struct MHD_Connection *conn,
                                                  const pgcld_head_problem *p) {
    ctx->status = 0;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    bool https = ctx->srv->cfg->tls_cert_pem && ctx->srv->cfg->tls_key_pem;
    if (!info || https) return MHD_NO;
    pgcld_reply reply = {0};
    pgcld_reply_error(&reply, p->status, p->code, -1, p->field, "%s", p->message);
    if (ctx->oip) pgcld_reply_oip_error(reply.body);
    char *body = json_dumps(reply.body, JSON_COMPACT);
    json_decref(reply.body);
    if (!body) return MHD_NO;
    char head[512]; /* the status line and headers, with a request id of up to 128 bytes */
    int head_len = snprintf(head, sizeof head,
                            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                            "X-Request-Id: %s\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                            p->status, reason_phrase(p->status), ctx->request_id, strlen(body));
    int fd = info->connect_fd;
    bool sent = send_all(fd, head, (size_t)head_len) && send_all(fd, body, strlen(body));
    ctx->bytes_out = (long long)strlen(body);
    free(body);
    if (sent) {
        ctx->status = p->status;
        shutdown(fd, SHUT_WR); /* the answer ends here; libmicrohttpd closes the socket */
    }
    return MHD_NO;
}

/* The first call of the handler for a request: its head is in, its body not yet read. Checks the
 * head, routes, authenticates, checks the query parameters and the declared body size, and refuses
 * early what these refuse. */
static enum MHD_Result start_request(request_ctx *ctx, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version) {
    pgcld_server *srv = ctx->srv;
    ctx->started = true;
    ctx->oip = strncmp(url, "/v2", 3) == 0 && (url[3] == 0 || url[3] == '/');
    ctx->t_start_us = pgcl_monotonic_us();
    snprintf(ctx->method, sizeof ctx->method, "%s", method);
    snprintf(ctx->path, sizeof ctx->path, "%s", url);
    pgcld_trace_context_read(conn, ctx->request_id, ctx->trace_id);
    atomic_fetch_add(&srv->in_flight, 1);
    pgcld_head_problem problem;
    pgcld_check_request_head(conn, method, version, &ctx->target, &problem);
    if (problem.library_answered) return answer_in_place_of_library(ctx, conn, &problem);
    if (problem.status) return refuse_head(ctx, conn, &problem);
    bool path_known;
    char allow[64];
    const char *lookup = strcmp(method, "HEAD") == 0 ? "GET" : method;
    ctx->route_index = pgcld_route_find(lookup, url, &ctx->path_params, &path_known, allow, sizeof allow);
    if (ctx->route_index < 0) {
        if (path_known) {
            ctx->status = 405;
            return send_error(ctx, conn, 405, "method_not_allowed", "this path does not accept that method", allow);
        }
        char msg[320];
        snprintf(msg, sizeof msg, "no route for %.256s", url);
        ctx->status = 404;
        return send_error(ctx, conn, 404, "not_found", msg, NULL);
    }
    ctx->route = pgcld_route_at(ctx->route_index);
    enum MHD_Result rc;
    if (authorise(ctx, conn, &rc) != 0) return rc;
    pgcld_reply query_refusal = {0};
    if (pgcld_route_check_query(ctx->route, conn, &query_refusal) != 0) {
        ctx->status = query_refusal.status;
        return send_reply(ctx, conn, &query_refusal);
    }
    /* libmicrohttpd has read the length already: a value it took is decimal digits (pgcld_check_request_head) */
    pgcld_field cl;
    pgcld_header_field(conn, MHD_HTTP_HEADER_CONTENT_LENGTH, &cl);
    long limit = ctx->route->upload ? srv->cfg->max_upload_bytes : srv->cfg->max_body_bytes;
    uint64_t declared = 0;
    if (cl.at) pgcld_parse_decimal(cl.at, cl.len, UINT64_MAX, &declared);
    ctx->declared = declared;
    if (ctx->declared > (unsigned long long)limit) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body of %llu bytes exceeds the limit of %ld bytes", ctx->declared, limit);
        ctx->status = 413;
        return send_error(ctx, conn, 413, "payload_too_large", msg, NULL);
    }
    return MHD_YES;
}

/* Releases what a reply holds without sending it. */
static void discard_reply(pgcld_reply *reply) {
    json_decref(reply->body);
    if (reply->data_owned) free((void *)reply->data);
    free(reply->text);
    if (reply->stream_fn && reply->stream_free) reply->stream_free(reply->stream_ctx);
    *reply = (pgcld_reply){0};
}

/* Runs a deferred answer's finish into reply (its work is over) and ends the request's scoring
 * count. */
static void run_finish(request_ctx *ctx, pgcld_reply *reply) {
    pgcld_deferred *d = &ctx->deferred;
    PGCL_ASSERT(d->finish != NULL && wait_over(&d->done));
    pgcld_finish_fn finish = d->finish;
    d->finish = NULL;
    finish(ctx->srv, d->state, reply);
    if (ctx->scoring_admitted) atomic_fetch_sub(&ctx->srv->score_in_flight, 1);
    ctx->scoring_admitted = false;
}

/* ---- Staff routes on a thread of their own ----
 * Routes only reviewer and admin keys may call (pgcld_route_is_staff) may wait for the audit
 * writer (one commit, or the busy timeout of a locked database: 5 s), the reader pool or a compute
 * slot (a re-score). On a pool thread such a wait would hold up every connection of that thread,
 * scoring answers included, so the handler runs on a thread made for it (staff calls are few)
 * while the connection is suspended like a deferred answer; the reply it wrote is sent on the pool
 * thread. Public routes (probes, /metrics, the console's files) and model metadata are quick and
 * run inline. */
typedef struct staff_call {
    request_ctx *ctx;
    pgcld_request req; /* what it points to lives until the request completes */
    pgcld_reply reply;
} staff_call;

static void *staff_call_main(void *arg) {
    staff_call *call = arg;
    request_ctx *ctx = call->ctx;
    ctx->route->fn(ctx->srv, &call->req, &call->reply);
    pgcld_deferred_resume(&ctx->deferred); /* the last touch: the request may complete at once */
    return NULL;
}

/* The deferred finish of a staff call: its reply, written on its thread. */
static void staff_call_finish(pgcld_server *srv, void *state, pgcld_reply *reply) {
    staff_call *call = state;
    *reply = call->reply;
    free(call);
}

/* Runs the staff route's handler on a thread of its own; the request's answer is deferred to it.
 * Out of memory or threads: the handler runs here. */
static void start_staff_call(request_ctx *ctx, const pgcld_request *req, pgcld_reply *reply) {
    staff_call *call = malloc(sizeof *call);
    pthread_attr_t attr;
    if (!call || pthread_attr_init(&attr) != 0) {
        free(call);
        ctx->route->fn(ctx->srv, req, reply);
        return;
    }
    *call = (staff_call){.ctx = ctx, .req = *req, .reply = {.status = 200}};
    call->req.deferred = NULL; /* staff handlers answer when they return */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pgcld_request_defer(req, staff_call_finish, call);
    pthread_t thread;
    if (pthread_create(&thread, &attr, staff_call_main, call) != 0) {
        ctx->route->fn(ctx->srv, &call->req, &call->reply);
        pgcld_deferred_resume(&ctx->deferred);
    }
    pthread_attr_destroy(&attr);
}

/* Sends the answer a handler (or its deferred finish) wrote. */
static enum MHD_Result send_answer(request_ctx *ctx, struct MHD_Connection *conn, pgcld_reply *reply) {
    if (!reply->body && !reply->text && !reply->stream_fn && !reply->data)
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "handler produced no answer");
    ctx->status = reply->status;
    return send_reply(ctx, conn, reply);
}

/* Appends an upload chunk to ctx's body (its budget reserved when it is a scoring body). */
static enum MHD_Result take_chunk(request_ctx *ctx, const char *data, size_t n) {
    pgcld_server *srv = ctx->srv;
    /* Exactly Content-Length when the client sent one (checked against the limit at the
     * headers): doubling would hold up to twice every body in flight. */
    unsigned long long declared = ctx->declared >= ctx->len + n ? ctx->declared : 0;
    if (ctx->len + n + 1 > ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap : BODY_FIRST_CAP;
        if (declared) cap = (size_t)declared + 1;
        while (cap < ctx->len + n + 1) cap *= 2;
        char *grown = realloc(ctx->body, cap);
        if (!grown) return MHD_NO;
        ctx->body = grown;
        ctx->cap = cap;
        if (ctx->reserved && cap > ctx->reserved) { /* a body without Content-Length grows */
            pgcld_body_budget_grow(srv->body_budget, cap - ctx->reserved);
            ctx->reserved = cap;
        }
    }
    memcpy(ctx->body + ctx->len, data, n);
    ctx->len += n;
    ctx->body[ctx->len] = 0;
    return MHD_YES;
}

/* The gate between the pool threads and the end of a shutdown. libmicrohttpd aborts the process when
 * MHD_stop_daemon finds a suspended connection, and a request on a connection kept open from before
 * the drain can arrive at any moment and defer (suspend) its answer. So every pgcld_http_on_request call runs
 * inside enter_handler/leave_handler, and pgcld_server_stop closes the gate only at a moment when no
 * call is running, nothing is suspended and no deferred answer is open (pgcld_http_close_handlers_when_idle,
 * under the same lock): after that no call can suspend, because none runs. */
static bool enter_handler(pgcld_server *srv) {
    pthread_mutex_lock(&g_suspend_lock);
    bool open = !srv->handlers_closed;
    if (open) srv->handlers_running++;
    pthread_mutex_unlock(&g_suspend_lock);
    return open;
}

static void leave_handler(pgcld_server *srv) {
    pthread_mutex_lock(&g_suspend_lock);
    PGCL_ASSERT(srv->handlers_running > 0);
    srv->handlers_running--;
    pthread_mutex_unlock(&g_suspend_lock);
}

/* Closes the gate if no pgcld_http_on_request call runs, no connection is suspended and no deferred answer is
 * open; true when closed. */
bool pgcld_http_close_handlers_when_idle(pgcld_server *srv) {
    pthread_mutex_lock(&g_suspend_lock);
    bool idle = srv->handlers_running == 0 && atomic_load(&srv->suspended) == 0 &&
                atomic_load(&srv->deferred_open) == 0;
    if (idle) srv->handlers_closed = true;
    pthread_mutex_unlock(&g_suspend_lock);
    return idle;
}

static enum MHD_Result handle_request(pgcld_server *srv, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls);

enum MHD_Result pgcld_http_on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    pgcld_server *srv = cls;
    if (!enter_handler(srv)) return MHD_NO; /* the server is stopping: the connection closes unanswered */
    enum MHD_Result result = handle_request(srv, conn, url, method, version, upload_data, upload_data_size, con_cls);
    leave_handler(srv);
    return result;
}

/* pgcld_http_on_request's work: one call of libmicrohttpd's access handler. */
static enum MHD_Result handle_request(pgcld_server *srv, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
    request_ctx *ctx = *con_cls;
    if (!ctx) { /* pgcld_http_on_request_line ran out of memory (or the connection came in without it) */
        if (!(ctx = request_ctx_create(srv, NULL))) return MHD_NO;
        *con_cls = ctx;
    }
    if (!ctx->started) {
        ctx->deferred.srv = srv;
        ctx->deferred.conn = conn;
        return start_request(ctx, conn, url, method, version);
    }
    if (ctx->deferred.finish) { /* resumed: the deferred work is over */
        pgcld_reply reply = {.status = 200};
        run_finish(ctx, &reply);
        return send_answer(ctx, conn, &reply);
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        long limit = ctx->route->upload ? srv->cfg->max_upload_bytes : srv->cfg->max_body_bytes;
        if (ctx->too_large || ctx->len + n > (size_t)limit) {
            ctx->bytes_in += n;
            *upload_data_size = 0;
            ctx->too_large = true; /* keep reading and discarding; answer 413 at the end */
            return MHD_YES;
        }
        if (ctx->shed) { /* discarding; 503 at the end */
            ctx->bytes_in += n;
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (ctx->len == 0 && !ctx->reserved && pgcld_route_is_scoring(ctx->route)) {
            unsigned long long declared = ctx->declared >= n ? ctx->declared : 0;
            int reserved = reserve_body(ctx, conn, declared ? declared + 1 : BODY_FIRST_CAP);
            if (reserved < 0) return MHD_YES; /* suspended, the chunk unconsumed */
            if (reserved == 0) {
                ctx->bytes_in += n;
                *upload_data_size = 0;
                ctx->shed = true;
                return MHD_YES;
            }
        }
        *upload_data_size = 0;
        ctx->bytes_in += n;
        return take_chunk(ctx, upload_data, n);
    }
    if (ctx->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body exceeds the limit of %ld bytes",
                 ctx->route->upload ? srv->cfg->max_upload_bytes : srv->cfg->max_body_bytes);
        ctx->status = 413;
        return send_error(ctx, conn, 413, "payload_too_large", msg, NULL);
    }
    if (ctx->shed) {
        pgcld_reply shed = {.status = 503, .retry_after = "1"};
        pgcld_reply_error(&shed, 503, "overloaded", -1, NULL,
                          "request bodies of other scoring requests filled max-body-memory (%ld bytes) for too long; "
                          "retry shortly", (long)srv->cfg->max_body_memory);
        pgcld_metrics_rejected(srv->metrics, PGCLD_REJECT_OVERLOADED);
        ctx->status = 503;
        return send_reply(ctx, conn, &shed);
    }
    pgcld_field content_type;
    pgcld_header_field(conn, MHD_HTTP_HEADER_CONTENT_TYPE, &content_type);
    pgcld_request req = {
        .request_id = ctx->request_id,
        .trace_id = ctx->trace_id,
        .method = method,
        .path = url,
        .content_type = content_type,
        .body = ctx->body ? ctx->body : "",
        .body_len = ctx->len,
        .t_start_us = ctx->t_start_us,
        .identity = ctx->authenticated ? &ctx->identity : NULL,
        .actor = ctx->actor,
        .connection = conn,
        .memory_held = ctx->reserved ? &ctx->reserved : NULL,
        .deferred = &ctx->deferred,
    };
    for (int i = 0; i < ctx->path_params.n; i++) req.params[i] = ctx->path_params.values[i];
    pgcld_reply reply = {.status = 200};
    pgcld_reaper_received(srv->reaper, pgcld_http_connection_watch(conn));
    bool scoring = pgcld_route_is_scoring(ctx->route);
    if (scoring && admit(ctx, conn, &reply) != 0) {
        ctx->status = reply.status;
        return send_reply(ctx, conn, &reply);
    }
    ctx->scoring_admitted = scoring;
    if (pgcld_route_is_staff(ctx->route)) start_staff_call(ctx, &req, &reply);
    else ctx->route->fn(srv, &req, &reply);
    if (ctx->deferred.finish) { /* the handler deferred its answer */
        PGCL_ASSERT(!reply.body && !reply.text && !reply.stream_fn && !reply.data);
        if (scoring) drop_body(ctx);
        if (suspend_unless_over(srv, conn, &ctx->deferred.done, &ctx->deferred.suspended)) return MHD_YES;
        run_finish(ctx, &reply); /* the work was over before the handler returned */
        return send_answer(ctx, conn, &reply);
    }
    if (ctx->scoring_admitted) atomic_fetch_sub(&srv->score_in_flight, 1);
    ctx->scoring_admitted = false;
    return send_answer(ctx, conn, &reply);
}

/* Why a request ended without an answer. */
static pgcld_unanswered_reason unanswered_reason(const request_ctx *ctx, struct MHD_Connection *conn,
                                                 enum MHD_RequestTerminationCode toe) {
    if (pgcld_reaper_was_cut(ctx->srv->reaper, pgcld_http_connection_watch(conn)))
        return PGCLD_UNANSWERED_REQUEST_TIMEOUT;
    switch (toe) {
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return PGCLD_UNANSWERED_CONNECTION_TIMEOUT;
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return PGCLD_UNANSWERED_SHUTDOWN;
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
    case MHD_REQUEST_TERMINATED_READ_ERROR: return PGCLD_UNANSWERED_CLIENT_CLOSED;
    default: return PGCLD_UNANSWERED_ERROR;
    }
}

/* The access log line of a completed request (--access-log): who asked what, and how it ended.
 * status 0: nothing was sent, for `unanswered`. The key's id only, never the key. */
static void log_access(const request_ctx *ctx, int status, const char *unanswered, int64_t latency_us) {
    const char *route = NULL;
    if (ctx->route_index >= 0) {
        route = strchr(pgcld_route_names[ctx->route_index], ' '); /* "POST /v1/score": the pattern */
        route = route ? route + 1 : pgcld_route_names[ctx->route_index];
    }
    pgcl_log_field f[14];
    int n = 0;
    f[n++] = PGCL_LOG_TEXT_FIELD("request_id", ctx->request_id);
    f[n++] = PGCL_LOG_TEXT_FIELD("trace_id", ctx->trace_id[0] ? ctx->trace_id : NULL);
    f[n++] = PGCL_LOG_TEXT_FIELD("method", ctx->method[0] ? ctx->method : NULL);
    f[n++] = PGCL_LOG_TEXT_FIELD("route", route);
    f[n++] = PGCL_LOG_TEXT_FIELD("path", ctx->started ? ctx->path : NULL);
    f[n++] = PGCL_LOG_INT_FIELD("status", status);
    f[n++] = PGCL_LOG_TEXT_FIELD("unanswered", unanswered);
    f[n++] = PGCL_LOG_MS_FIELD("latency_ms", (double)latency_us / 1000.0);
    f[n++] = PGCL_LOG_TEXT_FIELD("key_id", ctx->authenticated ? ctx->identity.key_id : NULL);
    f[n++] = PGCL_LOG_TEXT_FIELD("model", ctx->model[0] ? ctx->model : NULL);
    f[n++] = PGCL_LOG_TEXT_FIELD("version", ctx->version[0] ? ctx->version : NULL);
    if (ctx->items) f[n++] = PGCL_LOG_INT_FIELD("items", ctx->items); /* scoring answers only */
    f[n++] = PGCL_LOG_INT_FIELD("bytes_in", (long long)ctx->bytes_in);
    if (ctx->bytes_out >= 0) /* a streamed answer's size is not known here */
        f[n++] = PGCL_LOG_INT_FIELD("bytes_out", ctx->bytes_out);
    pgcl_log_fields(PGCL_LOG_INFO, "access", f, n);
}

/* MHD_OPTION_NOTIFY_COMPLETED: the request is over (answered, or its connection closed). Counts
 * it by the status that was sent — pgcld's, or libmicrohttpd's own answer to a malformed request
 * — or, when nothing was sent (timeouts, clients that left, shutdown), as unanswered with the
 * reason: never as a 500 that nobody received. */
void pgcld_http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    request_ctx *ctx = *con_cls;
    if (!ctx) return;
    int status = ctx->status;
    const union MHD_ConnectionInfo *queued = status ? NULL : MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
    if (queued) status = (int)queued->http_status;
    pgcld_unanswered_reason reason = status ? PGCLD_UNANSWERED_ERROR : unanswered_reason(ctx, conn, toe);
    if (status) pgcld_metrics_request(ctx->srv->metrics, ctx->route_index, status);
    else pgcld_metrics_unanswered(ctx->srv->metrics, ctx->route_index, reason);
    if (atomic_load(&ctx->srv->cfg->access_log_on) && pgcl_log_enabled(PGCL_LOG_INFO) && (ctx->started || status))
        log_access(ctx, status, status ? NULL : pgcld_unanswered_reason_str(reason),
                   ctx->started ? pgcl_monotonic_us() - ctx->t_start_us : 0);
    if (ctx->deferred.finish) { /* resumed, then closed before its answer was written */
        pgcld_reply unsent = {0};
        run_finish(ctx, &unsent);
        discard_reply(&unsent);
    }
    if (ctx->scoring_admitted) atomic_fetch_sub(&ctx->srv->score_in_flight, 1);
    if (ctx->deferred.counted) atomic_fetch_sub(&ctx->srv->deferred_open, 1);
    pgcld_reaper_next(ctx->srv->reaper, pgcld_http_connection_watch(conn));
    if (ctx->started) atomic_fetch_sub(&ctx->srv->in_flight, 1);
    pgcld_body_budget_release(ctx->srv->body_budget, ctx->reserved);
    free(ctx->body);
    free(ctx);
    *con_cls = NULL;
}
