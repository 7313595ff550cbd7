/* Re-scoring a recorded decision; see rescore.h. The one statement reads the decision's row; the
 * rest is the forward pass of one stored input. */
#include "rescore.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "f16.h"

const char *pgcl_rescore_outcome_str(pgcl_rescore_outcome o) {
    switch (o) {
    case PGCL_RESCORE_OK: return "ok";
    case PGCL_RESCORE_DB_UNAVAILABLE: return "db_unavailable";
    case PGCL_RESCORE_NOT_FOUND: return "not_found";
    case PGCL_RESCORE_INPUT_NOT_STORED: return "input_not_stored";
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
    free(r->row_copy);
    free(r->work);
    *r = (pgcl_rescore){0};
}

/* The columns read_decision's statement reads, in this order. */
enum { COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256, COL_LABEL, COL_DECISION, COL_PROBABILITIES,
       COL_TOXICITY, COL_INPUT, COL_INPUT_DTYPE, N_COLS };

typedef struct read_ctx {
    const char *decision_id;
    pgcl_rescore *out;
    bool found, input_stored, out_of_memory;
} read_ctx;

static int bind_decision_id(sqlite3_stmt *stmt, void *ctx) {
    return sqlite3_bind_text(stmt, 1, ((read_ctx *)ctx)->decision_id, -1, SQLITE_STATIC);
}

/* Copies the row (texts, then the input blob) into one allocation owned by out. */
static int take_row(sqlite3_stmt *stmt, void *arg, char *err, int cap) {
    read_ctx *c = arg;
    pgcl_rescore *out = c->out;
    c->found = true;
    const unsigned char *blob = sqlite3_column_blob(stmt, COL_INPUT);
    int blob_bytes = sqlite3_column_bytes(stmt, COL_INPUT);
    const char *dtype = (const char *)sqlite3_column_text(stmt, COL_INPUT_DTYPE);
    c->input_stored = blob && dtype;
    static const int text_cols[] = {COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256, COL_LABEL, COL_DECISION,
                                    COL_PROBABILITIES};
    enum { N_TEXTS = sizeof text_cols / sizeof text_cols[0] };
    size_t total = c->input_stored ? (size_t)blob_bytes : 0;
    for (int t = 0; t < N_TEXTS; t++) total += (size_t)sqlite3_column_bytes(stmt, text_cols[t]) + 1;
    if (!(out->row_copy = malloc(total))) {
        c->out_of_memory = true;
        return SQLITE_NOMEM;
    }
    unsigned char *p = out->row_copy;
    if (c->input_stored) { /* first: the blob keeps the allocation's alignment */
        memcpy(p, blob, (size_t)blob_bytes);
        out->input = p;
        out->input_half = strcmp(dtype, "f16") == 0;
        out->stored_values = blob_bytes / (out->input_half ? 2 : 4);
        out->input_bytes = blob_bytes;
        p += blob_bytes;
    }
    const char **texts[N_TEXTS] = {&out->original.model_name, &out->original.model_version,
                                   &out->original.model_sha256, &out->original.label, &out->original.decision,
                                   &out->original.probabilities_json};
    for (int t = 0; t < N_TEXTS; t++) {
        const unsigned char *text = sqlite3_column_text(stmt, text_cols[t]);
        size_t len = (size_t)sqlite3_column_bytes(stmt, text_cols[t]);
        *texts[t] = text ? memcpy(p, text, len + 1) : NULL;
        p += len + 1;
    }
    out->original.has_toxicity = sqlite3_column_type(stmt, COL_TOXICITY) != SQLITE_NULL;
    out->original.toxicity = sqlite3_column_double(stmt, COL_TOXICITY);
    (void)err;
    (void)cap;
    return SQLITE_DONE; /* one row: stop */
}

/* Reads the decision's row into out. The messages are those the route has always given. */
static pgcl_rescore_outcome read_decision(const char *db_path, const char *decision_id, pgcl_rescore *out, char *err,
                                          int cap) {
    sqlite3 *db = pgcl_db_open_reader(db_path, err, cap);
    if (!db) return PGCL_RESCORE_DB_UNAVAILABLE;
    read_ctx c = {.decision_id = decision_id, .out = out};
    char why[512] = "";
    int rc = pgcl_db_each_row(db,
                              "SELECT model_name, model_version, model_sha256, label, decision, probabilities,"
                              " toxicity, input, input_dtype FROM decisions WHERE decision_id = ?",
                              bind_decision_id, take_row, &c, why, sizeof why);
    sqlite3_close(db);
    if (c.out_of_memory) return PGCL_RESCORE_NO_MEMORY;
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        /* pgcl_db_each_row says "<step>: <SQLite's message>" */
        const char *message = strchr(why, ':') ? strchr(why, ':') + 2 : why;
        if (strncmp(why, "prepare: ", 9) == 0) pgcl_errorf(err, cap, "%s", message);
        else pgcl_errorf(err, cap, "reading the decision: %s", message);
        return PGCL_RESCORE_DB_UNAVAILABLE;
    }
    if (!c.found) return PGCL_RESCORE_NOT_FOUND;
    return c.input_stored ? PGCL_RESCORE_OK : PGCL_RESCORE_INPUT_NOT_STORED;
}

/* Decodes the stored input into z (D), little-endian float16 or float32. False when a value is
 * not finite: rows stored before pgcld kept such inputs as float32 hold infinities where the
 * scored value was above float16's range, and re-scoring them would compare the original with the
 * answer to another question (or with no answer at all). */
static bool decode_input(const pgcl_rescore *r, int D, float *z) {
    bool finite = true;
    for (int k = 0; k < D; k++) {
        if (r->input_half) z[k] = pgcl_f16_to_f32((uint16_t)(r->input[2 * k] | r->input[2 * k + 1] << 8));
        else memcpy(&z[k], r->input + 4 * k, 4);
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

pgcl_rescore_outcome pgcl_rescore_decision(const char *db_path, pgcl_registry *registry, pgcl_compute_slots *compute,
                                           const char *decision_id, pgcl_rescore *out, char *err, int cap) {
    pgcl_rescore_outcome o = read_decision(db_path, decision_id, out, err, cap);
    if (o != PGCL_RESCORE_OK) return o;
    pgcl_model *m = out->model = pgcl_registry_acquire(registry, out->original.model_name, NULL);
    if (!m) return PGCL_RESCORE_MODEL_NOT_READY;
    if (out->stored_values != m->D || out->input_bytes % (out->input_half ? 2 : 4))
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
