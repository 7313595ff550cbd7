/* A scoring request as the routes that score hold it (JSON, base64, octet-stream, the Open
 * Inference Protocol). A route's parser fills a score_job's model, n, ids and z (score_parse.c for
 * /v1/score, routes_v2.c for the Open Inference Protocol); pgcld_score_begin() hands it to the one
 * scoring call in core (core/score/score.h), which computes, decides, records and fills
 * job->result while the request is suspended; the route's answer writer then writes the answer
 * from the job. The data path of a score:
 *   http.c → route → parser → core/score/score.c → batcher worker (forward pass, decisions) →
 *   audit writer (commit) → resume → the job's answer writer on a server thread. */
#ifndef PGCLD_SCORE_JOB_H
#define PGCLD_SCORE_JOB_H

#include <jansson.h>
#include <stdint.h>

#include "idempotency.h"
#include "ids.h"
#include "model.h"
#include "score.h"
#include "server.h"

/* An Idempotency-Key being answered: held from pgcld_score_idempotency_begin to _end. */
typedef struct pgcld_idem_claim pgcld_idem_claim;

/* Everything one request holds, in one place for one cleanup (pgcld_score_job_free). A route's
 * handler makes it (pgcld_score_job_create), fills it, and either answers at once (a refusal: it
 * frees the job) or hands it to pgcld_score_begin, after which the job is the request's. */
typedef struct score_job {
    json_t *root;             /* the DOM parser's document (ids point into it), or NULL */
    pgcl_model *model;        /* retained */
    pgcl_model *shadow;       /* candidate scoring the same items off the response path, or NULL */
    int n;
    const char **ids;         /* (n) borrowed from root, or from id_arena */
    char *id_arena;           /* the decoded ids (fast parser, octet-stream, v2) */
    float *z;                 /* (n, D) */
    pgcl_item_facts *facts;   /* (n) each item's facts for a statement of reasons, or NULL when none has any */
    char *facts_arena;        /* the items' territorial_scope texts (item_facts.h) */
    bool return_vector;
    /* A request with an Idempotency-Key (idem.key set): the core call builds the answer with
     * answer_fn before the commit and stores it with the rows (job->result.answer). */
    pgcl_idem_entry idem;
    char body_sha256[65], request_sha256[65]; /* what idem points to */
    /* The route's answer text for a scored job (its wire format), or NULL when out of memory. */
    char *(*answer_fn)(const struct score_job *job, const void *ctx);
    const void *answer_ctx;
    /* Optional: rewrites a 200 reply's answer text into the route's wire form before it is sent
     * (v2's binary outputs); runs on fresh and replayed answers alike. NULL: sent as it is. */
    void (*wire_fn)(pgcld_reply *reply);
    pgcl_score_result result; /* filled by the core call */
    /* Between pgcld_score_begin and the answer (the request is suspended meanwhile): */
    pgcld_idem_claim *claim;      /* the Idempotency-Key held, or NULL (released by the free) */
    json_t *header;               /* a document the answer reads (v2's inference header), or NULL */
    pgcld_deferred *deferred;     /* the request to resume when the call is over */
    pgcl_score_failure failure;   /* the call's outcome, set before the resume */
    int64_t t_start_us;           /* the request's arrival */
} score_job;


/* Handles the Idempotency-Key header of a scoring request, if it has one. Returns 1 when reply is
 * complete (an invalid key, 409 while the same key is being answered, 422 when the key was used
 * for a request that asked something else, or the stored answer of the same request, byte for
 * byte, with Idempotent-Replayed: true), or 0 to score the request: then, when it has a key,
 * *claim holds it and job->idem is filled, so that the scoring call stores the answer with the
 * rows. "The same request" is the same route, path, query, media type, the headers the routes read
 * and body (pgcld_request_fingerprint). */
int pgcld_score_idempotency_begin(pgcld_server *srv, const pgcld_request *req, score_job *job,
                                  pgcld_idem_claim **claim, pgcld_reply *reply);

/* The answer of a request whose key another request (another replica, on a shared PostgreSQL
 * store) committed while this one was scored (PGCL_SCORE_IDEMPOTENCY_ANSWERED: its own rows were not
 * recorded): the stored answer as pgcld_score_idempotency_begin replays it, 422 when that key
 * answered another request, 409 when it is gone again (expired), 503 when it cannot be read. */
void pgcld_score_idempotency_replay(pgcld_server *srv, const score_job *job, pgcld_reply *reply);

/* Releases the claim (accepts NULL). */
void pgcld_score_idempotency_end(pgcld_idem_claim *claim);

/* Parses a POST /v1/score body (application/json through the fast parser, then jansson, which
 * words every error; or application/octet-stream with the query and Pgcld-Item-Ids) into job:
 * model and shadow retained, n, ids, z and return_vector. Returns 0, or -1 with reply set. */
int pgcld_score_parse_v1(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply);

/* A zeroed job on the heap whose answer answer_fn writes; NULL when out of memory. */
score_job *pgcld_score_job_create(char *(*answer_fn)(const score_job *job, const void *ctx));

/* Starts a parsed job (model retained, n, ids, z filled) through the core scoring call
 * (pgcl_score_start) and defers the request's answer (pgcld_request_defer): the handler returns
 * at once, its reply untouched, and no server thread waits. When the call is over (the rows
 * durable, or a failure with nothing recorded), the request is resumed and the answer written on a
 * server thread: the job's answer (answer_fn, or the one stored for the Idempotency-Key), or the
 * failure's error; the stages are counted in the metrics; the job is freed. Takes the job. */
void pgcld_score_begin(pgcld_server *srv, const pgcld_request *req, score_job *job);

/* The active version of model `name` (and its shadow, when shadow is not NULL), retained; or NULL
 * with reply set: 404 model_not_found, or 503 not_ready when the model exists without a loaded
 * version. `field` (may be NULL) names the request field in the error. */
pgcl_model *pgcld_score_acquire(pgcld_server *srv, const char *name, pgcl_model **shadow, const char *field,
                                pgcld_reply *reply);

/* Copies `bytes` of little-endian float32 embeddings into job->z for job->model (set), checking
 * whole rows, the batch limit and finiteness; sets job->n. `field` names the source in errors.
 * Returns 0, or -1 with reply set. */
int pgcld_score_take_floats(pgcld_server *srv, score_job *job, const unsigned char *data, size_t bytes,
                            const char *field, pgcld_reply *reply);

/* Takes z (n, D) of job->model (set), malloc'd, already shaped and bounded by the caller: job
 * owns it from here whatever happens. Checks finiteness as pgcld_score_take_floats does; sets
 * job->n. Returns 0, or -1 with reply set. */
int pgcld_score_adopt_floats(score_job *job, float *z, int n, const char *field, pgcld_reply *reply);

/* Item ids from a JSON array of job->n strings (ids_json, len bytes; `field` names its source in
 * errors), or "0".."n-1" when ids_json is NULL. Returns 0, or -1 with reply set. */
int pgcld_score_take_ids(score_job *job, const char *ids_json, size_t len, const char *field, pgcld_reply *reply);

/* Releases everything a job holds (its result, Idempotency-Key claim and header included) and
 * the job. Accepts NULL. */
void pgcld_score_job_free(score_job *job);

#endif
