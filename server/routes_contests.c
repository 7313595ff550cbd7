/* Reviewer writes: file a contest, resolve it, and re-score a decision's stored input with the
 * model version active now. The rules live in core/review.c; this file maps them to HTTP. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "f16.h"
#include "review.h"
#include "server.h"

/* HTTP status for a review rule's machine code. */
static int review_status(const char *code) {
    static const struct { const char *code; int status; } map[] = {
        {"decision_not_found", 404}, {"contest_not_found", 404},     {"contest_window_closed", 422},
        {"contest_open", 409},       {"already_resolved", 409},      {"filer_cannot_resolve", 403},
        {"invalid_label", 422},
    };
    for (size_t i = 0; code && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].code, code) == 0) return map[i].status;
    return 503;
}

static void review_error(pgcld_reply *reply, pgcl_status st, const char *code, const char *err) {
    if (code) {
        pgcld_reply_error(reply, review_status(code), code, -1, NULL, "%s", err);
    } else {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "could not be recorded: %s", err);
    }
    (void)st;
}

/* A string member of body that must be 1..max bytes (optional members may be absent). Returns 0,
 * or -1 with reply set. */
static int text_member(json_t *body, const char *key, size_t max, bool required, const char **out,
                       pgcld_reply *reply) {
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        pgcld_reply_error(reply, 400, "invalid_request", -1, key, "'%s' is required", key);
        return -1;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key, "'%s' must be a string of 1 to %zu bytes", key, max);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static int only_members(json_t *body, const char *const *allowed, pgcld_reply *reply) {
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            pgcld_reply_error(reply, 400, "invalid_request", -1, key, "unknown field '%.64s'", key);
            return -1;
        }
    }
    return 0;
}

void pgcld_handle_contest_file(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    json_t *body = pgcld_parse_json_body(req, reply);
    if (!body) return;
    static const char *const allowed[] = {"reason", NULL};
    pgcl_contest_request r = {.decision_id = req->params[0],
                              .filed_by = req->actor,
                              .filer_key_id = req->identity ? req->identity->key_id : NULL,
                              .window_days = (int)srv->cfg->contest_window_days};
    char err[1024];
    if (only_members(body, allowed, reply) == 0 && text_member(body, "reason", PGCL_REASON_MAX, true, &r.reason, reply) == 0) {
        pgcl_status st = pgcl_review_file_contest(srv->audit, &r, err, sizeof err);
        if (st != PGCL_OK) {
            review_error(reply, st, r.code, err);
        } else {
            reply->status = 201;
            reply->body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "contest_id", r.contest_id, "decision_id",
                                    r.decision_id, "status", "open", "filed_at", r.filed_at, "filed_by", r.filed_by,
                                    "reason", r.reason, "window_days", r.window_days);
        }
    }
    json_decref(body);
}

void pgcld_handle_resolution(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    json_t *body = pgcld_parse_json_body(req, reply);
    if (!body) return;
    static const char *const allowed[] = {"outcome", "corrected_label", "note", NULL};
    pgcl_resolution_request r = {.contest_id = req->params[0],
                                 .resolved_by = req->actor,
                                 .resolver_key_id = req->identity ? req->identity->key_id : NULL};
    char err[1024];
    if (only_members(body, allowed, reply) != 0 ||
        text_member(body, "outcome", 16, true, &r.outcome, reply) != 0 ||
        text_member(body, "corrected_label", 128, false, &r.corrected_label, reply) != 0 ||
        text_member(body, "note", PGCL_REASON_MAX, true, &r.note, reply) != 0)
        goto done;
    if (strcmp(r.outcome, "upheld") != 0 && strcmp(r.outcome, "overturned") != 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "outcome", "'outcome' must be \"upheld\" or \"overturned\"");
        goto done;
    }
    if (r.corrected_label && strcmp(r.outcome, "upheld") == 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "corrected_label",
                          "'corrected_label' only goes with the outcome \"overturned\"");
        goto done;
    }
    pgcl_status st = pgcl_review_resolve(srv->audit, &r, err, sizeof err);
    if (st != PGCL_OK) {
        review_error(reply, st, r.code, err);
        goto done;
    }
    reply->status = 201;
    reply->body = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:s}", "contest_id", r.contest_id, "decision_id",
                            r.decision_id, "outcome", r.outcome, "corrected_label",
                            r.corrected_label ? json_string(r.corrected_label) : json_null(), "note", r.note,
                            "resolved_at", r.resolved_at, "resolved_by", r.resolved_by);
done:
    json_decref(body);
}

/* ---- re-score ---- */

/* One side of the comparison: a model version's answer for the input. */
static json_t *answer_json(const pgcl_model *m, const float *probs, int label, pgcl_decision decision) {
    json_t *p = json_object();
    for (int k = 0; k < m->K; k++) json_object_set_new(p, m->labels[k], json_real(probs[k]));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "model_name", m->name, "model_version", m->version,
                          "model_sha256", m->sha256, "label", m->labels[label], "probabilities", p, "decision",
                          pgcl_decision_str(decision));
    if (m->task == PGCL_TASK_BINARY) json_object_set_new(o, "toxicity", json_real(probs[1]));
    return o;
}

void pgcld_handle_rescore(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    char err[1024];
    sqlite3 *db = pgcl_db_open_reader(srv->cfg->db_path, err, sizeof err);
    sqlite3_stmt *s = NULL;
    pgcl_model *m = NULL;
    float *z = NULL, *vec = NULL, *probs = NULL;
    if (!db || sqlite3_prepare_v2(db,
                                  "SELECT model_name, model_version, model_sha256, label, decision, probabilities,"
                                  " toxicity, input, input_dtype FROM decisions WHERE decision_id = ?",
                                  -1, &s, NULL) != SQLITE_OK) {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "%s", db ? sqlite3_errmsg(db) : err);
        goto done;
    }
    sqlite3_bind_text(s, 1, req->params[0], -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        pgcld_reply_error(reply, 404, "decision_not_found", -1, NULL, "no decision with id %.64s", req->params[0]);
        goto done;
    }
    if (rc != SQLITE_ROW) {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "reading the decision: %s", sqlite3_errmsg(db));
        goto done;
    }
    const char *model_name = (const char *)sqlite3_column_text(s, 0);
    const char *dtype = (const char *)sqlite3_column_text(s, 8);
    const unsigned char *input = sqlite3_column_blob(s, 7);
    int bytes = sqlite3_column_bytes(s, 7);
    if (!input || !dtype) {
        pgcld_reply_error(reply, 409, "input_not_stored", -1, NULL,
                          "decision %s was recorded without its input (with --store-inputs none, or before inputs were "
                          "kept), so it cannot be re-scored",
                          req->params[0]);
        goto done;
    }
    m = pgcl_registry_acquire(srv->registry, model_name, NULL);
    if (!m) {
        reply->retry_after = "5";
        pgcld_reply_error(reply, 503, "not_ready", -1, NULL, "model '%s' has no active version now", model_name);
        goto done;
    }
    bool half = strcmp(dtype, "f16") == 0;
    int D = bytes / (half ? 2 : 4);
    if (D != m->D || bytes % (half ? 2 : 4)) {
        pgcld_reply_error(reply, 409, "input_incompatible", -1, NULL,
                          "the stored input has %d values; the active version %s/%s takes %d", D, m->name, m->version,
                          m->D);
        goto done;
    }
    z = malloc(sizeof(float) * (size_t)D);
    vec = malloc(sizeof(float) * (size_t)m->d);
    probs = malloc(sizeof(float) * (size_t)m->K);
    if (!z || !vec || !probs) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        goto done;
    }
    bool finite = true;
    for (int k = 0; k < D; k++) {
        if (half) z[k] = pgcl_f16_to_f32((uint16_t)(input[2 * k] | input[2 * k + 1] << 8));
        else memcpy(&z[k], input + 4 * k, 4);
        finite = finite && isfinite(z[k]);
    }
    /* Rows stored before pgcld kept such inputs as float32 hold infinities where the scored
     * value was above float16's range: re-scoring them would compare the original with the answer
     * to another question (or with no answer at all). */
    if (!finite) {
        pgcld_reply_error(reply, 409, "input_not_rescorable", -1, NULL,
                          "the stored input of decision %s is not the input that was scored (a value beyond %s's "
                          "range was stored as infinity), so it cannot be re-scored",
                          req->params[0], half ? "float16" : "float32");
        goto done;
    }
    if (pgcl_compute_slots_forward(srv->compute, m, z, 1, vec, probs, NULL) != PGCL_OK) {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        goto done;
    }
    for (int k = 0; k < m->K; k++) finite = finite && isfinite(probs[k]);
    for (int k = 0; k < m->d; k++) finite = finite && isfinite(vec[k]);
    if (!finite) {
        pgcld_reply_error(reply, 409, "input_not_rescorable", -1, NULL,
                          "the active version %s/%s gives no finite output for the stored input of decision %s, so "
                          "there is nothing to compare with the original",
                          m->name, m->version, req->params[0]);
        goto done;
    }
    int label;
    pgcl_decision decision = pgcl_model_decide(m, probs, &label);
    json_t *original_probs = json_loads((const char *)sqlite3_column_text(s, 5), 0, NULL);
    json_t *original = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "model_name", model_name, "model_version",
                                 (const char *)sqlite3_column_text(s, 1), "model_sha256",
                                 (const char *)sqlite3_column_text(s, 2), "label",
                                 (const char *)sqlite3_column_text(s, 3), "probabilities",
                                 original_probs ? original_probs : json_object(), "decision",
                                 (const char *)sqlite3_column_text(s, 4));
    if (sqlite3_column_type(s, 6) != SQLITE_NULL)
        json_object_set_new(original, "toxicity", json_real(sqlite3_column_double(s, 6)));
    json_t *rescored = answer_json(m, probs, label, decision);
    bool same_label = strcmp(m->labels[label], (const char *)sqlite3_column_text(s, 3)) == 0;
    bool same_decision = strcmp(pgcl_decision_str(decision), (const char *)sqlite3_column_text(s, 4)) == 0;
    reply->status = 200;
    reply->body = json_pack("{s:s, s:o, s:o, s:s, s:b, s:b}", "decision_id", req->params[0], "original", original,
                            "rescored", rescored, "input_precision", half ? "float16" : "float32", "same_label",
                            same_label, "same_decision", same_decision);
done:
    free(z);
    free(vec);
    free(probs);
    pgcl_model_release(m);
    sqlite3_finalize(s);
    sqlite3_close(db);
}
