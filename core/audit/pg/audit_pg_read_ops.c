/* The PostgreSQL store's reads for the scoring routes and the operators (audit_pg.h; the reads'
 * shape in audit_pg_read_internal.h): a decision as recorded with its stored input (re-score),
 * an idempotency key, the model activations, the shadow report, and the cut that archived a
 * decision. */
#include "audit_pg_read_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- a decision as recorded, with its stored input (re-score) ---- */

/* The columns of STORED_DECISION_SQL, in this order. */
enum {
    COL_MODEL_NAME,
    COL_MODEL_VERSION,
    COL_MODEL_SHA256,
    COL_LABEL,
    COL_DECISION,
    COL_PROBABILITIES,
    COL_TOXICITY,
    COL_INPUT,
    COL_INPUT_DTYPE,
    COL_WAS_STORED
};

static const char STORED_DECISION_SQL[] =
    "SELECT d.model_name, d.model_version, d.model_sha256, d.label, d.decision, d.probabilities, d.toxicity,"
    " i.input, d.input_dtype, d.input_digest IS NOT NULL"
    " FROM decisions AS d LEFT JOIN decision_inputs AS i ON i.decision_seq = d.seq WHERE d.decision_id = $1";

/* Copies the row (the input first, for its alignment, then the texts) into one allocation. */
static pgcl_status take_stored_decision(const PGresult *res, pgcl_stored_decision *out, char *err, int cap) {
    unsigned char *input = NULL;
    size_t input_bytes = 0;
    pgcl_status st = pgcl_pg_bytea(res, 0, COL_INPUT, &input, &input_bytes);
    if (st == PGCL_ERR_NOMEM) return out_of_memory(err, cap);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "reading the decision: an input that is not bytea text");
        return PGCL_ERR_DB;
    }
    const char *dtype = pgcl_pg_text(res, 0, COL_INPUT_DTYPE);
    bool input_stored = input && dtype;
    /* stored once (its digest is recorded), dropped by retention */
    out->input_dropped = !input && (bool_of(res, 0, COL_WAS_STORED) || dtype);
    static const int text_cols[] = {COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256,
                                    COL_LABEL,      COL_DECISION,      COL_PROBABILITIES};
    enum { N_TEXTS = sizeof text_cols / sizeof text_cols[0] };
    size_t total = input_stored ? input_bytes : 0;
    for (int t = 0; t < N_TEXTS; t++)
        total += (size_t)PQgetlength(res, 0, text_cols[t]) + 1;
    if (!(out->owned = malloc(total))) {
        free(input);
        return out_of_memory(err, cap);
    }
    unsigned char *p = out->owned;
    if (input_stored) {
        memcpy(p, input, input_bytes);
        out->input = p;
        out->input_bytes = (int)input_bytes;
        out->input_half = strcmp(dtype, "f16") == 0;
        p += input_bytes;
    }
    free(input);
    const char **texts[N_TEXTS] = {&out->original.model_name,   &out->original.model_version,
                                   &out->original.model_sha256, &out->original.label,
                                   &out->original.decision,     &out->original.probabilities_json};
    for (int t = 0; t < N_TEXTS; t++) {
        const char *text = pgcl_pg_text(res, 0, text_cols[t]);
        size_t len = (size_t)PQgetlength(res, 0, text_cols[t]);
        *texts[t] = text ? memcpy(p, text, len + 1) : NULL;
        p += len + 1;
    }
    out->original.has_toxicity = !PQgetisnull(res, 0, COL_TOXICITY);
    out->original.toxicity = pgcl_pg_double(res, 0, COL_TOXICITY);
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                         char *err, int cap) {
    const char *values[] = {decision_id};
    pgcl_status st;
    PGresult *res = pgcl_pg_read_once(store, "reading the decision", STORED_DECISION_SQL, 1, values, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgcl_errorf(err, cap, "no decision with id %.64s", decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    st = take_stored_decision(res, out, err, cap);
    PQclear(res);
    return st;
}

/* ---- the scoring routes, the operators ---- */

static const char IDEMPOTENCY_SQL[] = "SELECT body_sha256, request_id, answer, request_sha256 FROM idempotency_keys"
                                      " WHERE scope = $1 AND idem_key = $2 AND expires_at > $3";

pgcl_status pgcl_pg_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                         bool *found, pgcl_idem_record *out, char *err, int cap) {
    *found = false;
    memset(out, 0, sizeof *out);
    const char *values[] = {scope, key, now};
    pgcl_status st;
    PGresult *res = pgcl_pg_read_once(store, "idempotency lookup", IDEMPOTENCY_SQL, 3, values, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) > 0) {
        if (pgcl_idem_record_set(out, pgcl_pg_text(res, 0, 0), pgcl_pg_text(res, 0, 1), pgcl_pg_text(res, 0, 2),
                                 pgcl_pg_text(res, 0, 3)))
            *found = true;
        else
            st = out_of_memory(err, cap);
    }
    PQclear(res);
    return st;
}

static const char ACTIVATIONS_SQL[] = "SELECT (details::jsonb)->>'model', (details::jsonb)->>'version'"
                                      " FROM admin_events WHERE action = 'model.activate' ORDER BY seq";

pgcl_status pgcl_pg_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                     int cap) {
    pgcl_status st;
    PGresult *res = pgcl_pg_read_once(store, "reading the audit database", ACTIVATIONS_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *model = pgcl_pg_text(res, i, 0), *version = pgcl_pg_text(res, i, 1);
        if (model && version) on_activation(model, version, ctx);
    }
    PQclear(res);
    return PGCL_OK;
}

static int decision_kind_index(const char *name) {
    for (int i = 0; name && i < PGCL_DECISION_KINDS; i++)
        if (strcmp(name, pgcl_decision_kind_names[i]) == 0) return i;
    return -1;
}

/* One row per (primary decision, shadow decision) pair. */
static const char SHADOW_REPORT_SQL[] =
    "SELECT primary_decision, shadow_decision, count(*), count(*) FILTER (WHERE primary_label = shadow_label),"
    " sum(abs(primary_score - shadow_score)), max(abs(primary_score - shadow_score))"
    " FROM shadow_decisions WHERE model_name = $1 AND shadow_version = $2"
    " GROUP BY primary_decision, shadow_decision"
    " ORDER BY primary_decision COLLATE \"C\", shadow_decision COLLATE \"C\"";

pgcl_status pgcl_pg_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version,
                                       pgcl_shadow_report *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    const char *values[] = {model, shadow_version};
    pgcl_status st;
    PGresult *res = pgcl_pg_read_once(store, "reading the audit database", SHADOW_REPORT_SQL, 2, values, &st, err, cap);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *primary = pgcl_pg_text(res, i, 0), *shadow = pgcl_pg_text(res, i, 1);
        int64_t n = pgcl_pg_int(res, i, 2);
        int p = decision_kind_index(primary), q = decision_kind_index(shadow);
        if (p >= 0 && q >= 0) out->decision_matrix[p][q] = n;
        out->items += n;
        if (primary && shadow && strcmp(primary, shadow) == 0) out->decision_agreements += n;
        out->label_agreements += pgcl_pg_int(res, i, 3);
        out->sum_abs_score_difference += pgcl_pg_double(res, i, 4);
        if (pgcl_pg_double(res, i, 5) > out->max_abs_score_difference)
            out->max_abs_score_difference = pgcl_pg_double(res, i, 5);
    }
    PQclear(res);
    return PGCL_OK;
}

static const char ARCHIVE_WHERE_SQL[] =
    "SELECT c.seq, c.archived_before, c.created_at, c.archive_name FROM audit_cuts AS c WHERE c.archived_before > $1"
    " AND c.decisions_through > coalesce((SELECT max(p.decisions_through) FROM audit_cuts AS p WHERE p.seq < c.seq),"
    " 0) ORDER BY c.seq LIMIT 1";

pgcl_status pgcl_pg_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out, char *err,
                                       int cap) {
    /* As the SQLite store (pgcl_archive_where_is): the first cut (audit_cuts, pgcl_pg_archive_run)
     * that archived decisions and whose horizon lies after the time in the id (a cut inside the
     * contest window may archive other events only); entry_seq is that cut's seq. */
    memset(out, 0, sizeof *out);
    char made[32];
    if (!pgcl_archive_id_time(decision_id, made)) return PGCL_OK;
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_pool_acquire(pgcl_audit_pg_of(store)->readers, PGCL_PG_READ_WAIT_MS, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *values[] = {made};
    PGresult *res = pgcl_pg_query(conn, "audit_cuts", ARCHIVE_WHERE_SQL, 1, values, &st, err, cap);
    if (res && PQntuples(res) == 1) {
        out->archived = true;
        out->entry_seq = pgcl_pg_int(res, 0, 0);
        snprintf(out->before, sizeof out->before, "%s", pgcl_pg_text(res, 0, 1));
        snprintf(out->created_at, sizeof out->created_at, "%s", pgcl_pg_text(res, 0, 2));
        snprintf(out->archive_name, sizeof out->archive_name, "%s", pgcl_pg_text(res, 0, 3));
    }
    PQclear(res);
    pgcl_pg_pool_release(pgcl_audit_pg_of(store)->readers, conn);
    return st;
}
