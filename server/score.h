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
    /* POST /v1/score with an Idempotency-Key (idem.key set): pgcld_score_run builds the answer
     * (into `answer`, owned) before the commit and stores it with the rows. */
    pgcl_idem_entry idem;
    bool return_vector;
    char *answer;
} score_job;

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
