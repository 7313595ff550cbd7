/* Re-scoring a recorded decision; see rescore.h. The one statement reads the decision's row; the
 * rest is the forward pass of one stored input. */
#include "rescore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "f16.h"

const char *pgcl_rescore_outcome_str(pgcl_rescore_outcome o) {
    switch (o) {
    case PGCL_RESCORE_OK: return "ok";
    case PGCL_RESCORE_DB_UNAVAILABLE: return "db_unavailable";
    case PGCL_RESCORE_NOT_FOUND: return "not_found";
    case PGCL_RESCORE_INPUT_NOT_STORED: return "input_not_stored";
    case PGCL_RESCORE_INPUT_DROPPED: return "input_dropped";
    case PGCL_RESCORE_MODEL_NOT_READY: return "model_not_ready";
    case PGCL_RESCORE_INPUT_INCOMPATIBLE: return "input_incompatible";
    case PGCL_RESCORE_INPUT_NOT_FINITE: return "input_not_finite";
    case PGCL_RESCORE_NO_MEMORY: return "no_memory";
    case PGCL_RESCORE_OUTPUT_NOT_FINITE: return "output_not_finite";
    }
    return "unknown";
}

void pgcl_rescore_clear(pgcl_rescore *r) {
    pgcl_model_release(r->model);
    pgcl_stored_decision_clear(&r->stored);
    free(r->work);
    *r = (pgcl_rescore){0};
}

/* Decodes the stored input into z (D), little-endian float16 or float32. False when a value is
 * not finite: rows stored before pgcld kept such inputs as float32 hold infinities where the
 * scored value was above float16's range, and re-scoring them would compare the original with the
 * answer to another question (or with no answer at all). */
static bool decode_input(const pgcl_rescore *r, int D, float *z) {
    bool finite = true;
    for (int k = 0; k < D; k++) {
        const unsigned char *in = r->stored.input;
        if (r->stored.input_half) z[k] = pgcl_f16_to_f32((uint16_t)(in[2 * k] | in[2 * k + 1] << 8));
        else memcpy(&z[k], in + 4 * k, 4);
        finite = finite && isfinite(z[k]);
    }
    return finite;
}

static bool outputs_finite(const pgcl_model *m, const float *vector, const float *probs) {
    bool finite = true;
    for (int k = 0; k < m->K; k++) finite = finite && isfinite(probs[k]);
    for (int k = 0; k < m->d; k++) finite = finite && isfinite(vector[k]);
    return finite;
}

/* The outcome of reading the decision (its texts are those the route has always given). */
static pgcl_rescore_outcome read_outcome(pgcl_status st, const pgcl_stored_decision *d) {
    switch (st) {
    case PGCL_OK:
        if (d->input) return PGCL_RESCORE_OK;
        return d->input_dropped ? PGCL_RESCORE_INPUT_DROPPED : PGCL_RESCORE_INPUT_NOT_STORED;
    case PGCL_ERR_NOT_FOUND: return PGCL_RESCORE_NOT_FOUND;
    case PGCL_ERR_NOMEM: return PGCL_RESCORE_NO_MEMORY;
    default: return PGCL_RESCORE_DB_UNAVAILABLE;
    }
}

pgcl_rescore_outcome pgcl_rescore_decision(pgcl_audit *store, pgcl_registry *registry, pgcl_compute_slots *compute,
                                           const char *decision_id, pgcl_rescore *out, char *err, int cap) {
    pgcl_rescore_outcome o =
        read_outcome(pgcl_audit_read_stored_decision(store, decision_id, &out->stored, err, cap), &out->stored);
    if (o != PGCL_RESCORE_OK) return o;
    out->stored_values = out->stored.input_bytes / (out->stored.input_half ? 2 : 4);
    pgcl_model *m = out->model = pgcl_registry_acquire(registry, out->stored.original.model_name, NULL);
    if (!m) return PGCL_RESCORE_MODEL_NOT_READY;
    if (out->stored_values != m->D || out->stored.input_bytes % (out->stored.input_half ? 2 : 4))
        return PGCL_RESCORE_INPUT_INCOMPATIBLE;
    if (!(out->work = malloc(sizeof(float) * ((size_t)m->D + (size_t)m->d + (size_t)m->K))))
        return PGCL_RESCORE_NO_MEMORY;
    float *z = out->work;
    out->vector = z + m->D;
    out->probs = out->vector + m->d;
    if (!decode_input(out, m->D, z)) return PGCL_RESCORE_INPUT_NOT_FINITE;
    if (pgcl_compute_slots_forward(compute, m, z, 1, out->vector, out->probs, NULL) != PGCL_OK)
        return PGCL_RESCORE_NO_MEMORY;
    if (!outputs_finite(m, out->vector, out->probs)) return PGCL_RESCORE_OUTPUT_NOT_FINITE;
    out->decision = pgcl_model_decide(m, out->probs, &out->label_index);
    return PGCL_RESCORE_OK;
}
