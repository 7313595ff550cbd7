/* Prometheus metrics: counters, gauges and histograms kept with atomics (fixed label sets) or under
 * a mutex (per model/version series), rendered in the text exposition format for GET /metrics. */
#ifndef PGCLD_METRICS_H
#define PGCLD_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

typedef struct pgcld_metrics pgcld_metrics;

/* Stages of a /v1/score request whose latency is recorded. */
typedef enum { PGCLD_STAGE_QUEUE, PGCLD_STAGE_COMPUTE, PGCLD_STAGE_AUDIT, PGCLD_STAGE_TOTAL, PGCLD_N_STAGES } pgcld_stage;

/* route_names: the route patterns, indexed as passed to pgcld_metrics_request(); borrowed. */
pgcld_metrics *pgcld_metrics_create(const char *const *route_names, int n_routes);
void pgcld_metrics_destroy(pgcld_metrics *m); /* accepts NULL */

/* route < 0 counts a request that matched no route. status: the status of the answer that was sent. */
void pgcld_metrics_request(pgcld_metrics *m, int route, int status);

/* Why a request ended with no answer sent (pgcld_requests_total{code="unanswered"}). */
typedef enum {
    PGCLD_UNANSWERED_REQUEST_TIMEOUT,    /* cut by the reaper: the request took over --request-timeout */
    PGCLD_UNANSWERED_CONNECTION_TIMEOUT, /* libmicrohttpd's idle timeout (--connection-timeout) */
    PGCLD_UNANSWERED_CLIENT_CLOSED,      /* the client closed or reset the connection first */
    PGCLD_UNANSWERED_SHUTDOWN,           /* the daemon stopped (--shutdown-grace ran out) */
    PGCLD_UNANSWERED_ERROR,              /* the connection failed on the server's side */
    PGCLD_N_UNANSWERED
} pgcld_unanswered_reason;
void pgcld_metrics_unanswered(pgcld_metrics *m, int route, pgcld_unanswered_reason reason);
/* The reason as its metrics label spells it ("client_closed", ...). */
const char *pgcld_unanswered_reason_str(pgcld_unanswered_reason reason);
void pgcld_metrics_stage(pgcld_metrics *m, pgcld_stage stage, double seconds);
void pgcld_metrics_batch(pgcld_metrics *m, int items);
/* Rows of the forward pass a request ran in (several requests' rows when batched together). */
void pgcld_metrics_forward_rows(pgcld_metrics *m, int rows);
void pgcld_metrics_scored(pgcld_metrics *m, const char *model, const char *version, int items);
/* One scoring call of a model version that reached the scoring pipeline (a request refused while
 * parsing is not one): ok or failed (audit unavailable, backlog, a non-finite output), its time
 * from arrival to answer, and, when it was computed, its queue and compute time. For Triton's
 * statistics extension (GET /v2/models/{name}/stats). */
void pgcld_metrics_model_call(pgcld_metrics *m, const char *model, const char *version, bool ok, int64_t total_ns,
                              bool computed, int64_t queue_ns, int64_t compute_ns);

/* The counters of one model version (zeros for one never called). */
typedef struct pgcld_model_stats {
    unsigned long long items;                 /* items scored (pgcld_items_scored_total) */
    unsigned long long executions;            /* calls that were computed */
    unsigned long long success, success_ns;   /* calls answered 200, and their total time */
    unsigned long long fail, fail_ns;         /* calls that failed, and their total time */
    unsigned long long queue_ns, compute_ns;  /* of the computed calls */
    unsigned long long last_ms;               /* wall-clock ms of the last call; 0 = never */
} pgcld_model_stats;
void pgcld_metrics_model_stats(pgcld_metrics *m, const char *model, const char *version, pgcld_model_stats *out);

void pgcld_metrics_swap(pgcld_metrics *m, const char *model, bool ok);
void pgcld_metrics_shadow(pgcld_metrics *m, const char *model, bool dropped, int items);
/* pgcld_metrics_shadow as core/score/shadow.h's observer (pgcl_shadow_count_fn): ctx is the pgcld_metrics. */
void pgcld_metrics_shadow_observer(void *metrics, const char *model, bool dropped, int items);

/* Requests refused by overload protection (http.c), by reason. */
typedef enum {
    PGCLD_REJECT_RATE_LIMITED,    /* 429: the key's (or address's) token bucket was empty */
    PGCLD_REJECT_OVERLOADED,      /* 503: --max-score-in-flight scoring requests were being handled */
    PGCLD_REJECT_REQUEST_TIMEOUT, /* connection closed: the request took over --request-timeout */
    PGCLD_REJECT_CONNECTION_LIMIT, /* connection closed unanswered: --max-connections were open */
    PGCLD_N_REJECT
} pgcld_reject_reason;
void pgcld_metrics_rejected(pgcld_metrics *m, pgcld_reject_reason reason);
/* n more stored inputs dropped by input retention; metrics is a pgcld_metrics * (a
 * pgcl_retention callback). */
void pgcld_metrics_inputs_dropped(int64_t n, void *metrics);

/* Appends the exposition text to a growing buffer. Gauges that live elsewhere are passed in. */
typedef struct pgcld_metrics_gauges {
    int audit_pending_rows;
    int in_flight;
    int open_connections;          /* accepted and not yet closed (--max-connections) */
    long long body_bytes_reserved; /* --max-body-memory in use */
    int body_waiting;              /* scoring requests waiting for it */
    int models_ready;
    bool draining;
    long long audit_db_bytes;          /* the audit database on disk; -1: the store cannot tell */
    long long audit_last_commit_unix_us; /* the audit writer's last commit; 0: none since start */
    const struct pgcl_witness_state *witnesses; /* [n_witnesses] (witness.h), the witness manager's */
    int n_witnesses;                            /* 0: no --witness, no witness families */
} pgcld_metrics_gauges;

/* Returns a malloc'd NUL-terminated text, with the process_* families of Prometheus' client
 * libraries (from /proc/self) and pgcld_build_info; `extra` (may be NULL) is appended verbatim (the active
 * version info lines, built by the caller under the registry lock). */
char *pgcld_metrics_render(pgcld_metrics *m, const pgcld_metrics_gauges *g, const char *extra);

#endif
