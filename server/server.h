/* The HTTP server: libmicrohttpd with a pool of threads and suspended connections for deferred
 * answers (docs/architecture.md, "Threads"), a route table with path
 * parameters and the roles allowed on each route, JSON replies and errors, and the shared state
 * every handler sees. Handlers are plain functions that fill a pgcld_reply; they never touch
 * libmicrohttpd directly. */
#ifndef PGCLD_SERVER_H
#define PGCLD_SERVER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "batcher.h"
#include "compute_slots.h"
#include "config.h"
#include "header_field.h"
#include "keys.h"
#include "metrics.h"
#include "registry.h"
#include "shadow.h"

typedef struct pgcld_server {
    pgcld_config *cfg;
    pgcl_registry *registry;
    pgcl_audit *audit;
    pgcl_keyring *keyring;     /* NULL when --auth off */
    pgcl_compute_slots *compute;
    pgcl_batcher *batcher;   /* coalesces concurrent forward passes */
    pgcld_metrics *metrics;
    pgcl_shadow *shadow;
    /* The transparency log (routes_log.c): the checkpointer of this writer's log (NULL without
     * --signing-key, or on a read-only store), and the public key that signs every writer's
     * checkpoints (the fleet shares --signing-key), has_log_key false without one. */
    struct pgcl_checkpointer *checkpointer;
    /* Its witnesses (witnesses.h): the manager that keeps them up to date (NULL without
     * --witness), and the witnesses configured (malloc'd [n_witnesses]). */
    struct pgcl_witness_manager *witness_manager;
    struct pgcl_witness *witnesses;
    int n_witnesses;
    bool has_log_key;
    unsigned char log_public_key[32];
    struct MHD_Daemon *daemon;
    int port;
    int quiesced_listener;     /* the listening socket once the drain began (shut down, closed at stop); -1 */
    _Atomic int in_flight;     /* requests between arrival and completion */
    _Atomic bool draining;     /* set at shutdown: /readyz answers 503 */
    /* Overload protection (http.c; made by pgcld_server_start, freed by pgcld_server_stop). */
    struct pgcld_ratelimit *ratelimit; /* per-key token buckets: --rate-limit-rps */
    struct pgcld_reaper *reaper;       /* the --request-timeout deadline */
    struct pgcld_body_budget *body_budget; /* --max-body-memory */
    _Atomic int score_in_flight;       /* scoring requests being handled: --max-score-in-flight */
    _Atomic int open_connections;      /* accepted and not yet closed: --max-connections */
    /* Refusals by --max-connections, from whichever server thread admitted the socket. */
    _Atomic unsigned long long connections_refused;
    _Atomic int64_t connection_limit_logged_us; /* monotonic time of the last warning; 0 = never */
    _Atomic int suspended;             /* connections suspended (a deferred answer, a body waiting) */
    _Atomic int deferred_open;         /* requests that deferred their answer and have not completed */
    /* The last step of a shutdown (http.c, both under its suspension lock): pool threads inside
     * on_request, and whether on_request is closed to every call (then it closes the connection). */
    int handlers_running;
    bool handlers_closed;
} pgcld_server;

#define PGCLD_MAX_PARAMS 4
#define PGCLD_ACTOR_LEN 200

typedef struct pgcld_request {
    const char *request_id;               /* UUIDv7 made at arrival, or the client's X-Request-Id (1..128 visible
                                           * ASCII bytes); the X-Request-Id of the answer */
    const char *trace_id;                 /* the W3C trace id: the traceparent's, or a random one (32 hex) */
    const char *method;
    const char *path;
    const char *params[PGCLD_MAX_PARAMS]; /* the {…} segments of the route pattern, in order */
    pgcld_field content_type;             /* the Content-Type header (header_field.h); .at NULL when absent */
    const char *body;
    size_t body_len;
    int64_t t_start_us;                   /* monotonic arrival time */
    const pgcl_identity *identity;        /* the caller's key; NULL when --auth off */
    const char *actor;                    /* "name (key_id)" or "anonymous": who, for the audit log */
    void *connection;                     /* for pgcld_request_query() only */
    size_t *memory_held;                  /* a scoring request's share of --max-body-memory; else NULL */
    struct pgcld_deferred *deferred;      /* http.c's, for pgcld_request_defer() only */
} pgcld_request;

/* ---- Deferred answers (the event-driven server, docs/architecture.md "Threads") ----
 * A handler whose work finishes on another thread (the scoring routes: a forward pass on a batcher
 * worker, then the audit writer's commit) does not wait for it on the server thread, which serves
 * many connections: it calls d = pgcld_request_defer(req, finish, state), starts the work, and
 * returns without filling its reply. The work's completion calls pgcld_deferred_resume(d), once, from
 * any thread (the audit writer: it only marks the request done and wakes its connection). Meanwhile
 * the connection is suspended and holds no thread. Then finish(srv, state, reply) runs on a server
 * thread: it writes the answer (JSON building belongs here) and releases state. If the connection
 * ends first (the server stopping once the work finished), finish runs all the same and its reply
 * is discarded. The work must always complete (it is never abandoned): shutdown waits for it. */
typedef struct pgcld_deferred pgcld_deferred;
struct pgcld_reply;
typedef void (*pgcld_finish_fn)(pgcld_server *srv, void *state, struct pgcld_reply *reply);

/* Defers req's answer to finish(srv, state, …) after pgcld_deferred_resume; see above. Called at
 * most once per request, by its handler, which must then start work that resumes it. */
pgcld_deferred *pgcld_request_defer(const pgcld_request *req, pgcld_finish_fn finish, void *state);

/* The deferred work is over: finish may run. Any thread; exactly once per pgcld_request_defer. */
void pgcld_deferred_resume(pgcld_deferred *d);

/* Value of a request header (case-insensitive name) without the whitespace around it
 * (pgcld_header_field): the first when it came more than once; .at NULL when absent. */
pgcld_field pgcld_request_header(const pgcld_request *req, const char *name);

/* Value of a query-string argument, or NULL. */
const char *pgcld_request_query(const pgcld_request *req, const char *key);

/* How a decimal integer reads (pgcld_parse_decimal): every integer parameter of the API (query
 * parameters, integer headers) is read by it, so that a malformed one and one out of range are
 * told apart the same way everywhere; what an out-of-range value means (400 naming the bound, or
 * 404 for a size beyond what exists) is the caller's, per parameter. */
typedef enum pgcld_decimal {
    PGCLD_DECIMAL_OK,        /* an integer from 0 to the bound */
    PGCLD_DECIMAL_TOO_LARGE, /* a well-formed integer above the bound, however many digits it has */
    PGCLD_DECIMAL_MALFORMED, /* not an integer: empty, a sign, a point, an exponent, a space, any other byte */
} pgcld_decimal;

/* Reads text[0..len) as a decimal integer: ASCII digits only, leading zeros allowed. *out is its
 * value when OK, max when TOO_LARGE, untouched when MALFORMED. text NULL is MALFORMED. Pure. */
pgcld_decimal pgcld_parse_decimal(const char *text, size_t len, uint64_t max, uint64_t *out);

/* SHA-256 (hex) of everything that determines a scoring request's answer: the method, the decoded
 * path (which names the model on /v2), the query parameters by name, the media type, the headers
 * the scoring routes read, and the body (given as its SHA-256, hex). Each part is length-prefixed,
 * so two different requests never encode alike. False when out of memory. */
bool pgcld_request_fingerprint(const pgcld_request *req, const char *body_sha256, char out[65]);

/* Adds `bytes` (the working memory a scoring request is about to allocate, once its size is known)
 * to what it holds against --max-body-memory beside its body, without waiting: later requests wait
 * for it instead. Given back with the body when the request completes. No-op for other requests. */
void pgcld_request_hold_memory(pgcld_server *srv, const pgcld_request *req, size_t bytes);


typedef struct pgcld_reply {
    int status;
    json_t *body;             /* owned; serialised compactly */
    const char *retry_after;  /* seconds, for 503/429; NULL for none */
    const char *allow;        /* Allow header for 405 */
    const char *www_authenticate; /* for 401 */
    char *text;               /* owned; a non-JSON body sent instead of `body` (e.g. /metrics) */
    const char *content_type; /* default application/json */
    /* A streamed body of unknown length (exports): stream_fn fills buf with up to max bytes and
     * returns how many it wrote, 0 at the end, or -1 on error (the connection is then closed);
     * stream_free releases stream_ctx when the response is done. Constant memory per request. */
    long (*stream_fn)(void *stream_ctx, char *buf, size_t max);
    void (*stream_free)(void *stream_ctx);
    void *stream_ctx;
    const char *content_disposition; /* e.g. attachment; filename="decisions.csv" */
    /* A body of data_len bytes (binary allowed) sent instead of `body` and `text` when data is not
     * NULL. Not owned: it must outlive the response (static storage, e.g. embedded files). */
    const void *data;
    size_t data_len;
    bool data_owned; /* data is malloc'd and freed with the response instead (dynamic binary bodies) */
    /* One response header with a value made per request (e.g. Inference-Header-Content-Length);
     * the name in static storage, NULL for none. */
    const char *dynamic_header_name;
    char dynamic_header_value[32];
    /* Extra response headers: name, value, name, value, …, NULL, in static storage; NULL for
     * none. A Cache-Control among them replaces the default "no-store". */
    const char *const *headers;
    bool close_connection;    /* send Connection: close and close after the answer */
    /* What the access log line says of a scoring answer (score_finish): its items, model and version;
     * 0 and "" for other answers. */
    int log_items;
    char log_model[64];
    char log_version[64];
} pgcld_reply;

/* Sets reply to {"error": {"code", "message"[, "item"][, "field"]}}. item < 0 and field NULL omit them.
 * The configuration's file system paths in the message are replaced (pgcld_reply_redact).
 * On /v2 paths http.c sends it in the Open Inference Protocol's shape (pgcld_reply_oip_error). */
void pgcld_reply_error(pgcld_reply *reply, int status, const char *code, int item, const char *field,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Rewrites an error body {"error": {"code", "message"[, "item"][, "field"]}} in place into the
 * Open Inference Protocol's shape, whose "error" is the message string: {"error": message, "code",
 * ["item",] ["field"]}. Any other body is left as it is. */
void pgcld_reply_oip_error(json_t *body);

/* In every error message from now on, `text` (a file system path with a '/' or a '.') standing as
 * a word of its own is replaced by `instead` (static storage). Called before the server starts
 * (pgcld_server_start registers the configured paths); not thread-safe. */
void pgcld_reply_redact(const char *text, const char *instead);


/* True when content_type (a Content-Type value, pgcld_request's) is the media type `want` (any
 * case) with optional, well-formed parameters; with utf8_only, a charset parameter must be utf-8 (a
 * body in another charset would be read as UTF-8 all the same). False when absent. */
bool pgcld_is_media_type(pgcld_field content_type, const char *want, bool utf8_only);

/* pgcld_is_media_type(content_type, "application/json", true): JSON is UTF-8 (RFC 8259). */
bool pgcld_is_json_type(pgcld_field content_type);

/* Parses the body as a JSON object. Returns it, or NULL with reply set (415 / 400). */
json_t *pgcld_parse_json_body(const pgcld_request *req, pgcld_reply *reply);

/* Signs the store's head(s) with --signing-key and writes <checkpoint-dir>/checkpoint-<seq>.json
 * (SQLite) or <checkpoint-dir>/fleet-checkpoint-<sum of seqs>.json (PostgreSQL: every writer's
 * head), through the store (pgcl_audit_create_checkpoint; routes_chain.c). PGCL_ERR_NOT_FOUND: the
 * chain is empty. Release out (pgcl_store_checkpoint_release) in any case. */
struct pgcl_store_checkpoint;
pgcl_status pgcld_checkpoint_now(pgcld_server *srv, struct pgcl_store_checkpoint *out, char *err, int cap);
/* The JSON of a checkpoint just made (POST /v1/audit/checkpoints, pgcld audit checkpoint). */
json_t *pgcld_checkpoint_json(const struct pgcl_store_checkpoint *cp);

/* Route patterns, for metrics labels. */
extern const char *const pgcld_route_names[];
extern const int pgcld_route_count;

/* The threads of the server's pool: --http-threads, or the CPUs (at most 8) when it is 0. */
unsigned pgcld_http_threads(const pgcld_config *cfg);

/* Starts listening on cfg->listen. Returns 0, or -1 with a message in err. */
int pgcld_server_start(pgcld_server *srv, char *err, int cap);

/* Begins the drain: marks the server draining and stops accepting connections. Contract: every
 * request whose handler runs after this returns sees the drain (readiness 503, Connection: close);
 * a request handled before it may still be answered as before, with Connection: close. Idempotent. */
void pgcld_server_begin_drain(pgcld_server *srv);

/* Begins the drain if it has not begun, waits up to grace_s seconds for running requests, then
 * stops. */
void pgcld_server_stop(pgcld_server *srv, int grace_s);

/* What /readyz answers (routes_probes.c): true when at least one model serves, the audit store's
 * last write succeeded and the drain has not begun; each condition in its own out-parameter.
 * Thread-safe; also read by the systemd notifier (systemd_notify.h). */
bool pgcld_server_readiness(pgcld_server *srv, bool *models, bool *audit, bool *draining);

/* Route handlers (routes_*.c). */
void pgcld_handle_score(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_healthz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_readyz(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_models(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_metrics(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_activate(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_upload(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_shadow_attach(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_shadow_detach(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_shadow_report(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_keys_create(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_keys_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_keys_revoke(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* Reviewers (routes_audit.c: reads; routes_contests.c: contests, resolutions, re-score;
 * routes_chain.c: verification and signed checkpoints). */
void pgcld_handle_decision_get(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_decision_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* routes_proof.c: proofs in the transparency log's shape. pgcld_reply_tlog_proof answers the proof
 * of event (kind, id) (audit_log.h's kinds) and returns true, or returns false with reply untouched
 * when the store has no leaf for it. */
bool pgcld_reply_tlog_proof(pgcld_server *srv, const char *kind, const char *id, pgcld_reply *reply);
void pgcld_handle_contest_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_resolution_proof(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_log_consistency(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* 404 decision_not_found for decision_id; its message says so when the decision was archived
 * (audit_cuts: the cut whose horizon lies after the time in its UUIDv7). */
void pgcld_reply_decision_not_found(pgcld_server *srv, const char *decision_id, pgcld_reply *reply);
void pgcld_handle_audit_consistency(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_decisions_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_decision_statement(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_audit_export(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_audit_stats(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_contests_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_contest_file(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_resolution(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_rescore(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_audit_verify(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_audit_checkpoint(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* The transparency log (routes_log.c): GET /log/, /log/{writer_id}/checkpoint, its tiles and entry
 * bundles (C2SP tlog-tiles), POST /log/checkpoint. */
void pgcld_handle_log_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_log_checkpoint(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_log_tile(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_log_entries(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_log_checkpoint_now(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* The Open Inference Protocol (routes_v2.c). */
void pgcld_handle_v2_server(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_live(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_ready(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_model(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_model_ready(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_infer(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_repository_index(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_v2_model_stats(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
/* The web console's static files, embedded at build time (routes_console.c). */
void pgcld_handle_console_index(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);
void pgcld_handle_console_file(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply);

#endif
