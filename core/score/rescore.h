/* Re-scoring a recorded decision on review: read the decision's stored input (float16 or float32,
 * --store-inputs) from the audit store, score it with the active version of its model on a
 * compute slot, and return the decision as recorded beside the new outcome. Plain structs in,
 * plain structs out: the route words the errors and builds the answer. */
#ifndef PGCL_RESCORE_H
#define PGCL_RESCORE_H

#include <stdbool.h>

#include "audit_reads.h"
#include "compute_slots.h"
#include "model.h"
#include "registry.h"

/* Why a re-score could not be done; pgcl_rescore_outcome_str names it. */
typedef enum {
    PGCL_RESCORE_OK,
    PGCL_RESCORE_DB_UNAVAILABLE,       /* the database could not be read: err says why */
    PGCL_RESCORE_NOT_FOUND,            /* no decision with that id */
    PGCL_RESCORE_INPUT_NOT_STORED,     /* recorded without its input */
    PGCL_RESCORE_INPUT_DROPPED,        /* recorded with its input, which retention dropped since */
    PGCL_RESCORE_MODEL_NOT_READY,      /* the decision's model has no active version */
    PGCL_RESCORE_INPUT_INCOMPATIBLE,   /* the stored input has stored_values values, the model another D */
    PGCL_RESCORE_INPUT_NOT_FINITE,     /* the stored input holds an infinity or NaN (float16 overflow) */
    PGCL_RESCORE_NO_MEMORY,            /* an allocation or the forward pass failed */
    PGCL_RESCORE_OUTPUT_NOT_FINITE,    /* the active version gives no finite output for the input */
} pgcl_rescore_outcome;

const char *pgcl_rescore_outcome_str(pgcl_rescore_outcome o);

/* Zero-initialise; release with pgcl_rescore_clear. Filled as far as the call got. */
typedef struct pgcl_rescore {
    pgcl_stored_decision stored; /* the decision as recorded, and its stored input */
    int stored_values;        /* values in the stored input */
    pgcl_model *model;        /* the active version that re-scored it (retained), or NULL */
    float *vector;            /* (d) */
    float *probs;             /* (K) */
    int label_index;
    pgcl_decision decision;
    /* private */
    float *work;              /* z (D), vector, probs, in one allocation */
} pgcl_rescore;

/* Re-scores decision `decision_id`, read from the audit store, with the active version of its model from `registry`, on a slot of `compute`. Returns
 * PGCL_RESCORE_OK with *out filled, or why not (err is set for PGCL_RESCORE_DB_UNAVAILABLE).
 * Thread-safe. */
pgcl_rescore_outcome pgcl_rescore_decision(pgcl_audit *store, pgcl_registry *registry, pgcl_compute_slots *compute,
                                           const char *decision_id, pgcl_rescore *out, char *err, int cap);

/* Frees what a pgcl_rescore holds and zeroes it. Accepts a zeroed one. */
void pgcl_rescore_clear(pgcl_rescore *r);

#endif
