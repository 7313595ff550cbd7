/* The scoring pipeline shared by every input path (JSON, base64, octet-stream, the Open Inference
 * Protocol): an input path fills a score_job's model, n, ids and z; pgcld_score_run() computes,
 * decides, records the audit rows (durably) and hands the shadow its copy; the path then builds its
 * own answer from the job. */
#ifndef PGCLD_SCORE_H
#define PGCLD_SCORE_H

#include <jansson.h>
#include <stdint.h>

#include "idempotency.h"
#include "ids.h"
#include "model.h"
#include "server.h"

/* Everything one request allocates, in one place for one cleanup. */
typedef struct score_job {
    json_t *root;
    pgcl_model *model;
    pgcl_model *shadow;       /* candidate scoring the same items off the response path, or NULL */
    int n;
    const char **ids;         /* (n) borrowed from root, or from id_arena on the fast path */
    char *id_arena;           /* fast path: the decoded ids */
    float *z;                 /* (n, D) */
    float *vectors;           /* (n, d) */
    float *probs;             /* (n, K) */
    int *label_index;         /* (n) */
    pgcl_decision *decision;  /* (n) */
    char (*decision_id)[PGCL_UUID_LEN + 1];
    char (*input_sha)[65];
    char **probs_json;        /* (n) */
    pgcl_decision_row *rows;  /* (n) */
    uint16_t *inputs_f16;     /* (n, D) when --store-inputs float16 */
    char request_id[PGCL_UUID_LEN + 1];
    /* A request with an Idempotency-Key (idem.key set): pgcld_score_run builds the answer with
     * answer_fn (into `answer`, owned) before the commit and stores it with the rows. */
    pgcl_idem_entry idem;
    char body_sha256[65], request_sha256[65]; /* what idem points to */
    bool return_vector;
    char *answer;
    /* The route's answer text for a scored job (its wire format), or NULL when out of memory. */
    char *(*answer_fn)(const struct score_job *job, const void *ctx);
    const void *answer_ctx;
} score_job;

/* An Idempotency-Key being answered: held from pgcld_score_idempotency_begin to _end. */
typedef struct pgcld_idem_claim pgcld_idem_claim;

/* Handles the Idempotency-Key header of a scoring request, if it has one. Returns 1 when reply is
 * complete (an invalid key, 409 while the same key is being answered, 422 when the key was used
 * for a request that asked something else, or the stored answer of the same request, byte for
 * byte, with Idempotent-Replayed: true), or 0 to score the request: then, when it has a key,
 * *claim holds it and job->idem is filled, so that pgcld_score_run stores the answer with the
 * rows. "The same request" is the same route, path, query, media type, the headers the routes read
 * and body (pgcld_request_fingerprint). */
int pgcld_score_idempotency_begin(pgcld_server *srv, const pgcld_request *req, score_job *job,
                                  pgcld_idem_claim **claim, pgcld_reply *reply);

/* Releases the claim (accepts NULL). */
void pgcld_score_idempotency_end(pgcld_idem_claim *claim);

/* Runs a parsed job (model retained, n, ids, z filled). Returns 0 with the outputs, decisions,
 * decision ids and request id filled and the rows committed; or -1 with reply set. */
int pgcld_score_run(pgcld_server *srv, const pgcld_request *req, score_job *job, pgcld_reply *reply);

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

/* Item ids from a JSON array of job->n strings (ids_json; `field` names its source in errors), or
 * "0".."n-1" when ids_json is NULL. */
int pgcld_score_take_ids(score_job *job, const char *ids_json, const char *field, pgcld_reply *reply);

/* Releases everything a job holds. */
void pgcld_score_job_free(score_job *job);

#endif
