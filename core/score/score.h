/* One scoring call: everything between a parsed request and its answer. Given a model, n inputs
 * and their ids, pgcl_score_run() runs the batched forward pass (batcher.h → compute_slots.h →
 * backend.h), refuses outputs that are not finite, decides each item (policy), gives the request
 * and every decision a UUIDv7, digests each input, keeps the input to store (float16 or float32),
 * appends the audit rows durably (with the idempotency key that answers for them, if any) and
 * hands the shadow its copy. The results come back as plain arrays in a pgcl_score_result.
 *
 * The audit guarantee lives here: nothing is recorded unless every item has a finite output, and
 * the call returns the results only after the rows are durable. Knows no HTTP: the caller turns a
 * pgcl_score_failure into its own error answer. */
#ifndef PGCL_SCORE_H
#define PGCL_SCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "batcher.h"
#include "idempotency.h"
#include "ids.h"
#include "model.h"
#include "shadow.h"

/* Which copy of each input the decision row keeps for re-scoring on review (--store-inputs). */
typedef enum {
    PGCL_STORE_INPUTS_NONE,
    PGCL_STORE_INPUTS_FLOAT16, /* float16, or float32 for an item float16 cannot hold */
    PGCL_STORE_INPUTS_FLOAT32,
} pgcl_store_inputs;

/* "none", "float16" or "float32" (as --store-inputs spells them); anything else is NONE. */
pgcl_store_inputs pgcl_store_inputs_parse(const char *text);

/* What the daemon lends every scoring call; all borrowed, shared by every thread. */
typedef struct pgcl_score_env {
    pgcl_batcher *batcher;
    pgcl_audit *audit;
    pgcl_shadow *shadow;
    pgcl_store_inputs store_inputs;
} pgcl_score_env;

typedef struct pgcl_score_result pgcl_score_result;

/* Builds the answer text of a scored request (malloc'd, or NULL when out of memory). Called only
 * for a request with an Idempotency-Key, after the decisions and before the commit: the answer is
 * stored with the rows. */
typedef char *(*pgcl_score_answer_fn)(const pgcl_score_result *res, void *ctx);

/* What the caller says of one item, stored with its decision (migration 0011) for a DSA statement
 * of reasons; each NULL when not given. The wire parser validated them (server/wire/score_parse.c). */
typedef struct pgcl_item_facts {
    const char *content_date;      /* "YYYY-MM-DD" */
    const char *territorial_scope; /* JSON array text of ISO 3166-1 alpha-2 EEA codes: ["DE","FR"] */
    const char *content_language;  /* ISO 639-1, uppercase: "EN" */
} pgcl_item_facts;

/* One parsed request. Everything is borrowed for the call except `shadow`. */
typedef struct pgcl_score_input {
    pgcl_model *model;       /* a reference the caller keeps */
    pgcl_model *shadow;      /* a reference the call takes over (submitted or released), or NULL */
    int n;                   /* 1 <= n */
    const char *const *ids;  /* (n) item ids */
    const float *z;          /* (n, D) finite embeddings; stored float32 rows point here */
    int64_t t_start_us;      /* monotonic time the request arrived: the rows' latency */
    const char *request_id;  /* the request's id (at most PGCL_REQUEST_ID_MAX bytes; the answer's X-Request-Id),
                              * or NULL: a UUIDv7 is made. Copied before pgcl_score_start returns */
    const char *trace_id;    /* the request's W3C trace id (32 lowercase hex), stored with every row, or NULL:
                              * none stored. Copied before pgcl_score_start returns */
    const pgcl_item_facts *facts; /* (n) what the caller said of each item (stored with its row), or NULL */
    /* With an Idempotency-Key: the entry to store with the rows (its request_id and answer are
     * filled by the call) and the answer's builder. NULL / NULL without one. */
    const pgcl_idem_entry *idem;
    pgcl_score_answer_fn answer_fn;
    void *answer_ctx;
} pgcl_score_input;

/* Why a call failed; pgcl_score_failure_str names it. */
typedef enum {
    PGCL_SCORE_OK,
    PGCL_SCORE_NO_MEMORY,          /* an allocation (or the answer builder) failed */
    PGCL_SCORE_FORWARD_FAILED,     /* the backend failed (out of device memory, device error, closing) */
    PGCL_SCORE_OUTPUT_NOT_FINITE,  /* item `failed_item`'s output overflowed: nothing recorded */
    PGCL_SCORE_AUDIT_BEHIND,       /* the audit backlog is full: nothing recorded, retry */
    PGCL_SCORE_AUDIT_FAILED,       /* the rows could not be recorded: nothing recorded */
    PGCL_SCORE_IDEMPOTENCY_ANSWERED, /* the Idempotency-Key was committed meanwhile by another request (another
                                      * replica on a shared store): nothing recorded; its stored answer is the
                                      * answer */
} pgcl_score_failure;

const char *pgcl_score_failure_str(pgcl_score_failure f);

/* Where a call spent its time (monotonic microseconds), for the caller's metrics. */
typedef struct pgcl_score_timings {
    bool computed;        /* the forward pass ran and its outputs were finite: queue_us, compute_us set */
    int64_t queue_us;     /* waiting for a batch and a compute slot */
    int64_t compute_us;   /* the forward pass of the batch this request ran in */
    int64_t audit_us;     /* deciding, recording and committing (set when the call succeeded) */
    int forward_rows;     /* rows of that batch (this request's and others') */
} pgcl_score_timings;

/* The outcome of one call. Zero-initialise before pgcl_score_run; release with
 * pgcl_score_result_clear. The arrays live in one allocation owned by the result. */
struct pgcl_score_result {
    char request_id[PGCL_REQUEST_ID_MAX + 1];
    char trace_id[PGCL_TRACE_ID_LEN + 1];    /* "" when the call was given none */
    int n;
    float *vectors;                          /* (n, d) */
    float *probs;                            /* (n, K) */
    int *label_index;                        /* (n) */
    pgcl_decision *decision;                 /* (n) */
    char (*decision_id)[PGCL_UUID_LEN + 1];  /* (n) */
    char *answer;        /* with an Idempotency-Key: the answer stored with the rows (owned) */
    int failed_item;     /* PGCL_SCORE_OUTPUT_NOT_FINITE: the first item without a finite output */
    pgcl_score_timings timings;
    /* private: what the rows point to until the commit */
    unsigned char *arena;
    char (*input_sha)[65];                   /* (n) */
    unsigned char (*input_digest)[32];       /* (n) SHA-256 of each stored input's bytes */
    char **probs_json;                       /* (n) owned strings */
    pgcl_decision_row *rows;                 /* (n) */
    uint16_t *inputs_f16;                    /* (n, D) with PGCL_STORE_INPUTS_FLOAT16, else NULL */
};

/* What pgcl_score_start calls when the call is over: f is what pgcl_score_run would return, and
 * the result holds what it would hold. */
typedef void (*pgcl_score_done_fn)(void *ctx, pgcl_score_failure f);

/* Scores, decides and records one request without holding the caller's thread: returns at once,
 * and done(ctx, f) is called exactly once when the call is over (PGCL_SCORE_OK only once the rows
 * are durable): on the audit writer's thread after the commit, on a batcher worker when the call
 * ended before the append (a failed forward pass, an output that is not finite), or before this
 * function returns when it could not start (out of memory, the batcher closing, the backlog full).
 * done must therefore be cheap and never block (the writer runs it between commits). *env and *in
 * are copied; what `in` points to (model, ids, z, idem and the answer builder's context) and *out
 * must stay valid until done is called. The shadow reference of `in` is consumed either way. The
 * answer builder (in->answer_fn), when there is one, runs on a batcher worker. */
void pgcl_score_start(const pgcl_score_env *env, const pgcl_score_input *in, pgcl_score_result *out,
                      pgcl_score_done_fn done, void *ctx);

/* Scores, decides and records one request (see the top of this file). Returns PGCL_SCORE_OK with
 * *out filled and the rows committed; or a failure with nothing recorded, out->failed_item and
 * out->timings set as far as the call got. The shadow reference of `in` is consumed either way.
 * Thread-safe (env's parts are); blocks for the forward pass and the commit (pgcl_score_start,
 * waited for). */
pgcl_score_failure pgcl_score_run(const pgcl_score_env *env, const pgcl_score_input *in, pgcl_score_result *out);

/* Frees what a result holds and zeroes it. Accepts a zeroed result. */
void pgcl_score_result_clear(pgcl_score_result *res);

#endif
