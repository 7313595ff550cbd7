/* Reviewer writes: file a contest, resolve it, and re-score a decision's stored input with the
 * model version active now. The rules live in core/review/review.c; this file maps them to HTTP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rescore.h"
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
    const char *did = req->params[0];
    pgcl_rescore r = {0};
    switch (pgcl_rescore_decision(srv->audit, srv->registry, srv->compute, did, &r, err, sizeof err)) {
    case PGCL_RESCORE_OK:
        break;
    case PGCL_RESCORE_DB_UNAVAILABLE:
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, "audit_unavailable", -1, NULL, "%s", err);
        goto done;
    case PGCL_RESCORE_NOT_FOUND:
        pgcld_reply_error(reply, 404, "decision_not_found", -1, NULL, "no decision with id %.64s", did);
        goto done;
    case PGCL_RESCORE_INPUT_NOT_STORED:
        pgcld_reply_error(reply, 409, "input_not_stored", -1, NULL,
                          "decision %s was recorded without its input (with --store-inputs none, or before inputs were "
                          "kept), so it cannot be re-scored",
                          did);
        goto done;
    case PGCL_RESCORE_INPUT_DROPPED:
        pgcld_reply_error(reply, 410, "input_dropped", -1, NULL,
                          "decision %s's stored input was dropped when its retention period ended "
                          "(--input-retention-days %g), so it cannot be re-scored; its record, proof and chain "
                          "entry are unchanged",
                          did, pgcld_config_input_retention_days(srv->cfg));
        goto done;
    case PGCL_RESCORE_MODEL_NOT_READY:
        reply->retry_after = "5";
        pgcld_reply_error(reply, 503, "not_ready", -1, NULL, "model '%s' has no active version now",
                          r.stored.original.model_name);
        goto done;
    case PGCL_RESCORE_INPUT_INCOMPATIBLE:
        pgcld_reply_error(reply, 409, "input_incompatible", -1, NULL,
                          "the stored input has %d values; the active version %s/%s takes %d", r.stored_values,
                          r.model->name, r.model->version, r.model->D);
        goto done;
    case PGCL_RESCORE_INPUT_NOT_FINITE:
        pgcld_reply_error(reply, 409, "input_not_rescorable", -1, NULL,
                          "the stored input of decision %s is not the input that was scored (a value beyond %s's "
                          "range was stored as infinity), so it cannot be re-scored",
                          did, r.stored.input_half ? "float16" : "float32");
        goto done;
    case PGCL_RESCORE_NO_MEMORY:
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        goto done;
    case PGCL_RESCORE_OUTPUT_NOT_FINITE:
        pgcld_reply_error(reply, 409, "input_not_rescorable", -1, NULL,
                          "the active version %s/%s gives no finite output for the stored input of decision %s, so "
                          "there is nothing to compare with the original",
                          r.model->name, r.model->version, did);
        goto done;
    }
    const pgcl_recorded_decision *o = &r.stored.original;
    const pgcl_model *m = r.model;
    json_t *original_probs = json_loads(o->probabilities_json, 0, NULL);
    json_t *original = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "model_name", o->model_name, "model_version",
                                 o->model_version, "model_sha256", o->model_sha256, "label", o->label, "probabilities",
                                 original_probs ? original_probs : json_object(), "decision", o->decision);
    if (o->has_toxicity) json_object_set_new(original, "toxicity", json_real(o->toxicity));
    json_t *rescored = answer_json(m, r.probs, r.label_index, r.decision);
    bool same_label = strcmp(m->labels[r.label_index], o->label) == 0;
    bool same_decision = strcmp(pgcl_decision_str(r.decision), o->decision) == 0;
    reply->status = 200;
    reply->body = json_pack("{s:s, s:o, s:o, s:s, s:b, s:b}", "decision_id", did, "original", original,
                            "rescored", rescored, "input_precision", r.stored.input_half ? "float16" : "float32",
                            "same_label", same_label, "same_decision", same_decision);
done:
    pgcl_rescore_clear(&r);
}
