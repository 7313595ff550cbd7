/* Reviewer reads: one decision in full, decision lists with cursor paging, the statement of
 * reasons of a decision in the vocabulary of the EU DSA Transparency Database, a streamed export,
 * figures for a time range, and the contest queue. The reads live in core (decision_record.c,
 * decision_lists.c, contest_reads.c, stats_reads.c, export.c) and return structs; this file
 * validates query strings, calls them, and answers (the JSON is built by review_json.c).
 *
 * Query strings: http.c has checked that every parameter is one the route knows (its table),
 * given once, with a non-empty value; anything else was 400 invalid_request naming it. Times are RFC 3339 date-times (any offset; '+' must be
 * sent as %2B, though a '+' decoded to a space is accepted), compared with created_at (decisions)
 * or filed_at (contests) after conversion to UTC; `since` is inclusive and `until` exclusive. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_reads.h"
#include "dsa_vocabulary.h"
#include "log.h"
#include "model.h"
#include "registry.h"
#include "review_json.h"
#include "server.h"

#define ERR_CAP 512
#define MAX_PARAM_BYTES 256
#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000

/* ---- query-string parameters ---- */

/* An optional text parameter: absent → *out NULL; present → 1..MAX_PARAM_BYTES bytes. */
static int text_param(const pgcld_request *req, const char *key, const char **out, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, key);
    *out = NULL;
    if (!v) return 0;
    size_t n = strlen(v);
    if (n == 0 || n > MAX_PARAM_BYTES) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key, "'%s' must be 1 to %d bytes", key, MAX_PARAM_BYTES);
        return -1;
    }
    *out = v;
    return 0;
}

/* The optional trace_id parameter: a W3C trace id, 32 lowercase hex digits. */
static int trace_id_param(const pgcld_request *req, const char **out, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, "trace_id");
    *out = NULL;
    if (!v) return 0;
    bool ok = strlen(v) == PGCL_TRACE_ID_LEN;
    for (const char *p = v; ok && *p; p++) ok = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
    if (!ok) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "trace_id",
                          "'trace_id' must be a W3C trace id: 32 lowercase hexadecimal digits");
        return -1;
    }
    *out = v;
    return 0;
}

/* An optional parameter that must be one of the NULL-terminated choices. */
static int choice_param(const pgcld_request *req, const char *key, const char *const *choices, const char **out,
                        pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, key);
    *out = NULL;
    if (!v) return 0;
    for (int i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0) {
            *out = choices[i];
            return 0;
        }
    char list[160] = "";
    for (int i = 0; choices[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", choices[i]);
    pgcld_reply_error(reply, 400, "invalid_request", -1, key, "'%s' must be one of %s", key, list);
    return -1;
}

/* An optional RFC 3339 time, converted into the columns' format in buf; *out NULL when absent. */
static int time_param(const pgcld_request *req, const char *key, char buf[PGCL_QTIME_LEN + 1], const char **out,
                      pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, key);
    *out = NULL;
    if (!v) return 0;
    int64_t us;
    if (!pgcl_time_parse(v, &us)) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, key,
                          "'%s' must be an RFC 3339 date-time such as 2026-11-21T10:33:00Z or "
                          "2026-11-21T11:33:00.5%%2B01:00, got '%.64s'",
                          key, v);
        return -1;
    }
    pgcl_time_format(us, buf);
    *out = buf;
    return 0;
}

/* since and until, with since <= until. */
static int window_params(const pgcld_request *req, char since_buf[PGCL_QTIME_LEN + 1],
                         char until_buf[PGCL_QTIME_LEN + 1], const char **since, const char **until,
                         pgcld_reply *reply) {
    if (time_param(req, "since", since_buf, since, reply) != 0 ||
        time_param(req, "until", until_buf, until, reply) != 0)
        return -1;
    if (*since && *until && strcmp(*since, *until) > 0) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "until", "'until' (%s) is before 'since' (%s)", *until,
                          *since);
        return -1;
    }
    return 0;
}

/* The optional page size: 1..MAX_LIMIT (DEFAULT_LIMIT when absent). A malformed value and one out
 * of range are both 400, each with its own message naming the bounds. */
static int limit_param(const pgcld_request *req, int *out, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, "limit");
    *out = DEFAULT_LIMIT;
    if (!v) return 0;
    uint64_t n = 0;
    pgcld_decimal d = pgcld_parse_decimal(v, strlen(v), MAX_LIMIT, &n);
    if (d == PGCLD_DECIMAL_MALFORMED) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "limit",
                          "'limit' must be a decimal integer from 1 to %d, got '%.40s'", MAX_LIMIT, v);
        return -1;
    }
    if (d == PGCLD_DECIMAL_TOO_LARGE || n < 1) {
        pgcld_reply_error(reply, 400, "invalid_request", -1, "limit",
                          "'limit' is out of range: it must be from 1 to %d, got %.40s", MAX_LIMIT, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* An optional cursor of the given kind, made by a listing with the given binding (its filters);
 * *seq 0 when absent. */
static int cursor_param(const pgcld_request *req, char kind, const unsigned char binding[PGCL_CURSOR_BINDING],
                        int64_t *seq, pgcld_reply *reply) {
    const char *v = pgcld_request_query(req, "cursor");
    *seq = 0;
    if (!v) return 0;
    pgcl_cursor_check check = pgcl_cursor_decode(v, kind, binding, seq);
    if (check == PGCL_CURSOR_OTHER_FILTERS) {
        pgcld_reply_error(reply, 400, "invalid_cursor", -1, "cursor",
                          "'cursor' was made by a listing with other filters; send the same filters with it, or "
                          "start again without one");
        return -1;
    }
    if (check != PGCL_CURSOR_OK) {
        pgcld_reply_error(reply, 400, "invalid_cursor", -1, "cursor",
                          "'cursor' is not a cursor this listing produced; start again without one");
        return -1;
    }
    return 0;
}

static json_t *next_cursor(char kind, const unsigned char binding[PGCL_CURSOR_BINDING], int64_t seq) {
    if (seq <= 0) return json_null();
    char text[PGCL_CURSOR_LEN + 1];
    pgcl_cursor_encode(kind, seq, binding, text);
    return json_string(text);
}

/* The binding of listings without filters (the contest queues: the kind says which). */
static const unsigned char NO_FILTERS[PGCL_CURSOR_BINDING] = {0};

/* ---- shared ---- */

/* Replies to a failed read: 503 when the database is busy or failing (retry), else 500. */
static void read_error(pgcld_reply *reply, const char *what, pgcl_status st, const char *err) {
    pgcl_log_error("%s: %s (%s)", what, err, pgcl_status_str(st));
    if (st == PGCL_ERR_BUSY || st == PGCL_ERR_DB) {
        reply->retry_after = "1";
        pgcld_reply_error(reply, 503, st == PGCL_ERR_BUSY ? "overloaded" : "audit_unavailable", -1, NULL,
                          "the audit database could not be read; retry shortly");
    } else {
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "%s", err);
    }
}


/* ---- GET /v1/decisions/{id} ---- */

/* The full record of the decision named in the path (core/review/decision_record.c) into *rec, its
 * strings in a. Replies 404 decision_not_found itself; returns false with reply set on failure. */
static bool load_decision(pgcld_server *srv, const pgcld_request *req, pgcl_row_arena *a, pgcl_decision_record *rec,
                          pgcld_reply *reply) {
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_decision(srv->audit, req->params[0], a, rec, err, sizeof err);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcld_reply_decision_not_found(srv, req->params[0], reply);
        return false;
    }
    if (st != PGCL_OK) {
        read_error(reply, "decision", st, err);
        return false;
    }
    return true;
}

/* The record as the answer of GET /v1/decisions/{id} (review_json.c, without nearest_prototypes):
 * every column of the decision but the stored input (vector decoded from its float32 BLOB,
 * probabilities and policy as JSON objects, input_stored "f16" / "f32" / null), provenance, chain
 * {seq, hash} or null, contests oldest first each with its resolution or null, contest_status and
 * effective_outcome {status, label, decision, contest_id}. Returns NULL with reply set on failure. */
static json_t *load_decision_json(pgcld_server *srv, const pgcld_request *req, pgcl_row_arena *a,
                                  pgcl_decision_record *rec, pgcld_reply *reply) {
    if (!load_decision(srv, req, a, rec, reply)) return NULL;
    json_t *out = pgcld_decision_record_json(rec);
    if (!out) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    return out;
}

#define NEAREST_MAX 10

/* Whether m (NULL: no) is the model version that made a decision of (version, weights SHA-256). */
static bool made_the_decision(const pgcl_model *m, const char *version, const char *sha) {
    return m && version && sha && strcmp(m->version, version) == 0 && strcmp(m->sha256, sha) == 0;
}

/* The cosine similarity of the decision's vector to each class prototype (the K rows of the
 * checkpoint's `prototypes`, which live in the same d-dimensional space) of the version that made
 * the decision, nearest first, at most NEAREST_MAX: [{label, label_index, similarity}]. That version
 * must be loaded now, as the model's active or shadow version with the same weights SHA-256;
 * otherwise (or when the vector does not have d values) null. Never fails: null on any doubt. */
static json_t *nearest_prototypes(pgcld_server *srv, const pgcl_decision_record *rec) {
    const char *name = rec->model_name, *version = rec->model_version, *sha = rec->model_sha256;
    const float *vec = rec->vector;
    if (!name || !version || !sha) return json_null();
    pgcl_model *shadow = NULL;
    pgcl_model *active = pgcl_registry_acquire(srv->registry, name, &shadow);
    const pgcl_model *m = made_the_decision(active, version, sha)   ? active
                          : made_the_decision(shadow, version, sha) ? shadow
                                                                    : NULL;
    json_t *out = NULL;
    double sim[NEAREST_MAX];
    int idx[NEAREST_MAX], n = 0;
    if (m && m->raw.prototypes && rec->n_vector == m->d) {
        double vnorm = 0;
        for (int j = 0; j < m->d; j++) {
            double v = vec[j];
            vnorm += v * v;
        }
        for (int k = 0; k < m->K; k++) {
            const float *c = m->raw.prototypes + (size_t)k * (size_t)m->d;
            double dot = 0, cnorm = 0;
            for (int j = 0; j < m->d; j++) {
                dot += (double)c[j] * (double)vec[j];
                cnorm += (double)c[j] * c[j];
            }
            double s = vnorm > 0 && cnorm > 0 ? dot / sqrt(vnorm * cnorm) : 0.0;
            /* insert into the descending top list (first index wins ties) */
            int at = n < NEAREST_MAX ? n : NEAREST_MAX;
            while (at > 0 && sim[at - 1] < s) at--;
            if (at >= NEAREST_MAX) continue;
            int last = n < NEAREST_MAX ? n : NEAREST_MAX - 1;
            for (int i = last; i > at; i--) {
                sim[i] = sim[i - 1];
                idx[i] = idx[i - 1];
            }
            sim[at] = s;
            idx[at] = k;
            if (n < NEAREST_MAX) n++;
        }
        out = json_array();
        for (int i = 0; out && i < n; i++)
            json_array_append_new(out, json_pack("{s:s, s:i, s:f}", "label", m->labels[idx[i]], "label_index", idx[i],
                                                 "similarity", sim[i]));
    }
    pgcl_model_release(active);
    pgcl_model_release(shadow);
    return out ? out : json_null();
}

void pgcld_handle_decision_get(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_row_arena a = {0};
    pgcl_decision_record rec;
    json_t *out = load_decision_json(srv, req, &a, &rec, reply);
    if (out) {
        json_object_set_new(out, "nearest_prototypes", nearest_prototypes(srv, &rec));
        reply->status = 200;
        reply->body = out;
    }
    pgcl_row_arena_release(&a);
}

/* ---- GET /v1/decisions ---- */

static const char *const DECISION_VALUES[] = {"allow", "review", "block", NULL};
static const char *const CONTEST_VALUES[] = {"open", "resolved", "contested", "none", NULL};

void pgcld_handle_decisions_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_decision_filter f = {0};
    char since[PGCL_QTIME_LEN + 1], until[PGCL_QTIME_LEN + 1];
    const char *contest;
    int limit;
    int64_t before;
    if (text_param(req, "model", &f.model, reply) != 0 ||
        text_param(req, "version", &f.version, reply) != 0 || text_param(req, "label", &f.label, reply) != 0 ||
        choice_param(req, "decision", DECISION_VALUES, &f.decision, reply) != 0 ||
        text_param(req, "item_id", &f.item_id, reply) != 0 ||
        text_param(req, "request_id", &f.request_id, reply) != 0 || trace_id_param(req, &f.trace_id, reply) != 0 ||
        window_params(req, since, until, &f.since, &f.until, reply) != 0 ||
        choice_param(req, "contest", CONTEST_VALUES, &contest, reply) != 0 || limit_param(req, &limit, reply) != 0)
        return;
    if (f.version && !f.model) {
        /* The index is (model_name, model_version, seq): a version means nothing without its model. */
        pgcld_reply_error(reply, 400, "invalid_request", -1, "version", "'version' needs 'model'");
        return;
    }
    static const pgcl_contest_filter contest_filter[] = {PGCL_CONTEST_OPEN, PGCL_CONTEST_RESOLVED,
                                                         PGCL_CONTEST_CONTESTED, PGCL_CONTEST_NONE};
    for (int i = 0; contest && CONTEST_VALUES[i]; i++)
        if (contest == CONTEST_VALUES[i]) f.contest = contest_filter[i];
    unsigned char binding[PGCL_CURSOR_BINDING];
    pgcl_decision_filter_binding(&f, binding);
    if (cursor_param(req, PGCL_CURSOR_DECISIONS, binding, &before, reply) != 0) return;
    pgcl_row_arena a = {0};
    pgcl_decision_page page;
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_decisions(srv->audit, &f, before, limit, &a, &page, err, sizeof err);
    if (st != PGCL_OK) {
        read_error(reply, "decisions", st, err);
    } else {
        reply->status = 200;
        reply->body = json_pack("{s:o, s:o}", "decisions", pgcld_decision_rows_json(&page), "next_cursor",
                                next_cursor(PGCL_CURSOR_DECISIONS, binding, page.next_before));
        if (!reply->body) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    }
    pgcl_row_arena_release(&a);
}

/* ---- GET /v1/decisions/{id}/statement ----
 *
 * The decision as a statement of reasons in the field names and values of the EU DSA Transparency
 * Database (TDB) API (Article 24(5) DSA), ready to submit as it is once the `pgcld` member is
 * dropped. It always describes the decision in force (the effective outcome) and names it:
 *
 * One puid per restriction. The TDB accepts a puid once per platform and updates nothing, so each
 * outcome in force is its own statement. The outcome in force since the automated decision has
 * puid = the decision_id (a UUID: letters, digits, hyphens); an outcome a contest's resolution put
 * in force (an overturn: block/review → allow, allow → review) has puid "<decision_id>-r<n>", n the
 * 1-based position of that contest in the decision's contest history (oldest first; contests and
 * resolutions are never changed or removed, so n, and the puid, never change). An upheld
 * resolution changes nothing in force: same puid. When to submit (docs/operations.md): after the
 * decision when it restricts, and again after each resolution that starts a restriction (the
 * statement then names its new puid); pgcld.restriction false means nothing to submit.
 *
 *   puid                     as above; pgcld.in_force_since_contest is n (null: the decision
 *                            itself) and pgcld.previous_puids the puids of the outcomes it replaced
 *   application_date         the date (UTC, YYYY-MM-DD) the outcome in force started: created_at,
 *                            or the resolved_at of the resolution that put it in force
 *   decision_visibility      block → ["DECISION_VISIBILITY_CONTENT_REMOVED"];
 *                            review → ["DECISION_VISIBILITY_OTHER"] with decision_visibility_other
 *                            saying the content is held for human review;
 *                            allow → [] (no restriction: Article 17 requires no statement, this
 *                            one is informational; pgcld.restriction is false)
 *   decision_ground          DECISION_GROUND_INCOMPATIBLE_CONTENT, with incompatible_content_ground
 *                            and incompatible_content_explanation (the classifier judges content
 *                            against the platform's policy, not legality; incompatible_content_illegal
 *                            is left out)
 *   category, category_specification, category_specification_other
 *                            from the `dsa` object of the model version that decided
 *                            (config.json, dsa_vocabulary.h), or that version task's default; a
 *                            version that is not loaded now is read from the model repository
 *                            (same version name and weights SHA-256), never another version's
 *                            vocabulary (a puid's category must not change when versions do);
 *                            when that version cannot be read, STATEMENT_CATEGORY_OTHER_VIOLATION_TC
 *                            (pgcld.category_source: config | task_default | fallback)
 *   content_type             ["CONTENT_TYPE_TEXT"] (pgcld scores text embeddings)
 *   content_date, territorial_scope, content_language
 *                            as the score request gave them for the item (stored with the
 *                            decision); absent when not given. content_date is required by the TDB
 *                            and territorial_scope by its documentation: a missing one is listed in
 *                            pgcld.missing_fields, the platform adds it before submitting
 *   automated_detection      "Yes"
 *   automated_decision       AUTOMATED_DECISION_FULLY, or AUTOMATED_DECISION_PARTIALLY once a human
 *                            resolved a contest of it
 *   decision_facts           score, thresholds or policy, model name, version and SHA-256, and the
 *                            contest history as dates and outcomes (at most 2047 bytes; the TDB's
 *                            limit is 5000 characters)
 *   source_type              SOURCE_VOLUNTARY (the platform's own initiative)
 * No personal data: no item_id, request_id, key names, actors, contest reasons or notes. */

static void facts_append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void facts_append(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

static const char *date_of(const char *ts, char out[11]) {
    snprintf(out, 11, "%s", ts ? ts : "");
    return out;
}

#define PUID_CAP 128 /* a 36-character decision id, "-r" and a contest position */

/* Since when the outcome in force holds, walking the contests as decision_record.c derives the
 * effective outcome (an overturn flips block/review → allow and allow → review; an upheld
 * resolution or an open contest changes nothing): the decision in force (must equal the record's
 * effective_outcome.decision), the timestamp it started, the 1-based position of the contest whose
 * resolution put it in force (0: the decision itself), and the earlier outcomes' puids. */
typedef struct {
    const char *decision;
    const char *since;
    size_t contest;
    json_t *previous_puids; /* owned */
} outcome_history;

static void puid_of(const char *decision_id, size_t contest, char out[PUID_CAP]) {
    if (contest == 0) snprintf(out, PUID_CAP, "%s", decision_id);
    else snprintf(out, PUID_CAP, "%s-r%zu", decision_id, contest);
}

static outcome_history history_of(json_t *rec) {
    const char *decision_id = json_string_value(json_object_get(rec, "decision_id"));
    outcome_history h = {.decision = json_string_value(json_object_get(rec, "decision")),
                         .since = json_string_value(json_object_get(rec, "created_at")),
                         .contest = 0,
                         .previous_puids = json_array()};
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(rec, "contests"), i, c) {
        json_t *res = json_object_get(c, "resolution");
        if (!json_is_object(res)) break; /* open: nothing changes until it is resolved */
        const char *oc = json_string_value(json_object_get(res, "outcome"));
        if (!oc || strcmp(oc, "overturned") != 0) continue;
        char puid[PUID_CAP];
        puid_of(decision_id ? decision_id : "", h.contest, puid);
        json_array_append_new(h.previous_puids, json_string(puid));
        h.decision = h.decision && strcmp(h.decision, "allow") == 0 ? "review" : "allow";
        h.since = json_string_value(json_object_get(res, "resolved_at"));
        h.contest = i + 1;
    }
    return h;
}

/* The DSA vocabulary of a decision's model, as the comment above says: a new object {category,
 * category_specification?, category_specification_other?, source}, or
 * NULL when out of memory. */
static json_t *model_dsa_of(pgcld_server *srv, json_t *rec) {
    const char *name = json_string_value(json_object_get(rec, "model_name"));
    const char *version = json_string_value(json_object_get(rec, "model_version"));
    const char *sha = json_string_value(json_object_get(rec, "model_sha256"));
    pgcl_model *shadow = NULL, *from_disk = NULL;
    pgcl_model *active = name ? pgcl_registry_acquire(srv->registry, name, &shadow) : NULL;
    const pgcl_model *m = made_the_decision(active, version, sha)   ? active
                          : made_the_decision(shadow, version, sha) ? shadow
                                                                    : NULL;
    if (!m && name && version && sha) {
        char err[ERR_CAP];
        if (pgcl_registry_read_version(srv->registry, name, version, &from_disk, err, sizeof err) == PGCL_OK &&
            made_the_decision(from_disk, version, sha))
            m = from_disk;
    }
    json_t *out;
    if (!m) out = json_pack("{s:s, s:s}", "category", PGCL_DSA_FALLBACK_CATEGORY, "source", "fallback");
    else out = pgcl_model_dsa_json(m, "source");
    pgcl_model_release(active);
    pgcl_model_release(shadow);
    pgcl_model_release(from_disk);
    return out;
}

/* Copies the item's content_date, territorial_scope and content_language from the record when it
 * has them (non-null), and lists in `missing` the ones the TDB requires that it lacks. */
static void content_fields(json_t *rec, json_t *sor, json_t *missing) {
    static const struct {
        const char *name;
        bool is_array, required;
    } fields[] = {{"content_date", false, true}, {"territorial_scope", true, true}, {"content_language", false, false}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(rec, fields[i].name);
        if (fields[i].is_array ? json_is_array(v) : json_is_string(v)) json_object_set(sor, fields[i].name, v);
        else if (fields[i].required) json_array_append_new(missing, json_string(fields[i].name));
    }
}

/* The statement, or NULL with *why set: out of memory, or a record whose contest history does not
 * lead to its outcome in force (a broken invariant of the reads: refused, never stated wrongly). */
static json_t *statement_of_reasons(json_t *rec, json_t *dsa, const char **why) {
    *why = "out of memory";
    const char *model = json_string_value(json_object_get(rec, "model_name"));
    const char *version = json_string_value(json_object_get(rec, "model_version"));
    const char *sha = json_string_value(json_object_get(rec, "model_sha256"));
    const char *label = json_string_value(json_object_get(rec, "label"));
    const char *decision = json_string_value(json_object_get(rec, "decision"));
    const char *created = json_string_value(json_object_get(rec, "created_at"));
    const char *decision_id = json_string_value(json_object_get(rec, "decision_id"));
    json_t *probs = json_object_get(rec, "probabilities"), *policy = json_object_get(rec, "policy");
    json_t *outcome = json_object_get(rec, "effective_outcome"), *contests = json_object_get(rec, "contests");
    const char *status = json_string_value(json_object_get(outcome, "status"));
    const char *in_force = json_string_value(json_object_get(outcome, "decision"));
    const char *label_in_force = json_string_value(json_object_get(outcome, "label"));
    const char *kind = json_string_value(json_object_get(policy, "kind"));
    if (!model || !version || !sha || !label || !decision || !created || !in_force || !decision_id)
        return NULL; /* out of memory */
    outcome_history history = history_of(rec);
    /* The puid and application_date name the outcome this walk found: it must be the one in force. */
    if (!history.decision || strcmp(history.decision, in_force) != 0 || !history.since) {
        json_decref(history.previous_puids);
        *why = "the decision's contest history does not lead to its outcome in force";
        return NULL;
    }
    bool threshold = kind && strcmp(kind, "threshold") == 0;
    /* A reviewer's overturn made the outcome in force (also while a later contest of it is open, or
     * after a later one upheld it). */
    const char *decided_by = json_string_value(json_object_get(outcome, "decided_by"));
    bool overturned = decided_by && strcmp(decided_by, "reviewer") == 0;
    bool human = false;
    size_t i;
    json_t *c;
    json_array_foreach(contests, i, c) if (json_is_object(json_object_get(c, "resolution"))) human = true;

    char facts[2048] = "";
    facts_append(facts, sizeof facts,
                 "Automated classification of the text by model '%s' version '%s' (checkpoint SHA-256 %s). ", model,
                 version, sha);
    if (threshold) {
        const char *plabel = json_string_value(json_object_get(policy, "label"));
        facts_append(facts, sizeof facts,
                     "Score: probability of '%s' = %.4f; review threshold %.4g, removal threshold %.4g. ",
                     plabel ? plabel : "?", json_number_value(json_object_get(probs, plabel ? plabel : "")),
                     json_number_value(json_object_get(policy, "t_review")),
                     json_number_value(json_object_get(policy, "t_block")));
    } else {
        facts_append(facts, sizeof facts, "Score: probability of '%s' = %.4f (policy '%s'", label,
                     json_number_value(json_object_get(probs, label)), kind ? kind : "?");
        if (json_is_number(json_object_get(policy, "min_confidence")))
            facts_append(facts, sizeof facts, ", minimum confidence %.4g",
                         json_number_value(json_object_get(policy, "min_confidence")));
        facts_append(facts, sizeof facts, "). ");
    }
    facts_append(facts, sizeof facts, "Predicted label '%s'; automated decision '%s' on %s.", label, decision, created);
    json_array_foreach(contests, i, c) {
        char d1[11], d2[11];
        json_t *res = json_object_get(c, "resolution");
        facts_append(facts, sizeof facts, " Contested on %s",
                     date_of(json_string_value(json_object_get(c, "filed_at")), d1));
        if (!json_is_object(res)) {
            facts_append(facts, sizeof facts, "; the contest is pending human review.");
            continue;
        }
        const char *oc = json_string_value(json_object_get(res, "outcome"));
        const char *corrected = json_string_value(json_object_get(res, "corrected_label"));
        facts_append(facts, sizeof facts, "; a human reviewer %s the decision on %s", oc ? oc : "resolved",
                     date_of(json_string_value(json_object_get(res, "resolved_at")), d2));
        if (corrected) facts_append(facts, sizeof facts, ", correcting the label to '%s'", corrected);
        facts_append(facts, sizeof facts, ".");
    }
    if (overturned) facts_append(facts, sizeof facts, " Decision in force: '%s'.", in_force);

    bool restricted = strcmp(in_force, "allow") != 0;
    char puid[PUID_CAP];
    puid_of(decision_id, history.contest, puid);
    json_t *visibility = json_array();
    json_t *sor = json_object();
    json_object_set_new(sor, "puid", json_string(puid));
    if (strcmp(in_force, "block") == 0) {
        json_array_append_new(visibility, json_string("DECISION_VISIBILITY_CONTENT_REMOVED"));
        json_object_set_new(sor, "decision_visibility", visibility);
    } else if (strcmp(in_force, "review") == 0) {
        json_array_append_new(visibility, json_string("DECISION_VISIBILITY_OTHER"));
        json_object_set_new(sor, "decision_visibility", visibility);
        json_object_set_new(sor, "decision_visibility_other",
                            json_string(overturned  ? "Held for review by a human moderator: a reviewer overturned "
                                                      "the decision that allowed the content."
                                        : threshold ? "Held for review by a human moderator: the automated score "
                                                      "reached the review threshold but not the removal threshold."
                                                    : "Held for review by a human moderator, as the moderation "
                                                      "policy requires for this label or for low confidence."));
    } else {
        json_object_set_new(sor, "decision_visibility", visibility); /* empty: no restriction */
    }
    char ground[300], explanation[600], app_date[11];
    snprintf(ground, sizeof ground, "Terms of service: content policy applied through the '%s' moderation model",
             model);
    if (overturned)
        snprintf(explanation, sizeof explanation,
                 "A human reviewer overturned the automated decision '%s' (label '%s'); the label in force is '%s' "
                 "and the decision in force '%s'.",
                 decision, label, label_in_force ? label_in_force : label, in_force);
    else
        snprintf(explanation, sizeof explanation,
                 "An automated classifier labelled the content '%s'; under the platform's moderation policy this "
                 "label and score lead to the decision '%s'%s.",
                 label, in_force, status && strcmp(status, "upheld") == 0 ? ", which a human reviewer upheld" : "");
    json_object_set_new(sor, "decision_ground", json_string("DECISION_GROUND_INCOMPATIBLE_CONTENT"));
    json_object_set_new(sor, "incompatible_content_ground", json_string(ground));
    json_object_set_new(sor, "incompatible_content_explanation", json_string(explanation));
    json_object_set(sor, "category", json_object_get(dsa, "category"));
    if (json_object_get(dsa, "category_specification"))
        json_object_set(sor, "category_specification", json_object_get(dsa, "category_specification"));
    if (json_object_get(dsa, "category_specification_other"))
        json_object_set(sor, "category_specification_other", json_object_get(dsa, "category_specification_other"));
    json_object_set_new(sor, "content_type", json_pack("[s]", "CONTENT_TYPE_TEXT"));
    json_t *missing = json_array();
    content_fields(rec, sor, missing);
    json_object_set_new(sor, "automated_detection", json_string("Yes"));
    json_object_set_new(sor, "automated_decision",
                        json_string(human ? "AUTOMATED_DECISION_PARTIALLY" : "AUTOMATED_DECISION_FULLY"));
    json_object_set_new(sor, "application_date", json_string(date_of(history.since, app_date)));
    json_object_set_new(sor, "decision_facts", json_string(facts));
    json_object_set_new(sor, "source_type", json_string("SOURCE_VOLUNTARY"));
    char note[256] = "";
    if (!restricted) {
        snprintf(note, sizeof note, "No restriction is in force: Article 17 DSA asks for no statement of reasons; "
                                    "this one is for information and is not to be submitted.");
    } else if (json_array_size(missing) == 0) {
        snprintf(note, sizeof note, "Drop this 'pgcld' member before submitting.");
    } else {
        json_t *field;
        json_array_foreach(missing, i, field)
            facts_append(note, sizeof note, "%s%s", i == 0 ? "Add " : " and ", json_string_value(field));
        facts_append(note, sizeof note, " and drop this 'pgcld' member before submitting.");
    }
    json_object_set_new(
        sor, "pgcld",
        json_pack("{s:b, s:s, s:s, s:o, s:o, s:O, s:O, s:s}", "restriction", restricted, "effective_status",
                  status ? status : "", "decision_in_force", in_force, "missing_fields", missing,
                  "in_force_since_contest", history.contest ? json_integer((json_int_t)history.contest) : json_null(),
                  "previous_puids", history.previous_puids, "category_source", json_object_get(dsa, "source"),
                  "note", note));
    json_decref(history.previous_puids);
    if (!json_object_get(sor, "pgcld") || !json_object_get(sor, "category")) {
        json_decref(sor);
        return NULL; /* out of memory */
    }
    return sor;
}

void pgcld_handle_decision_statement(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    pgcl_row_arena a = {0};
    pgcl_decision_record rec;
    json_t *json = load_decision_json(srv, req, &a, &rec, reply);
    pgcl_row_arena_release(&a);
    if (!json) return;
    json_t *dsa = model_dsa_of(srv, json);
    const char *why = "out of memory";
    json_t *body = dsa ? statement_of_reasons(json, dsa, &why) : NULL;
    json_decref(dsa);
    json_decref(json);
    if (!body) {
        pgcl_log_error("statement of decision %s: %s", req->params[0], why);
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "%s", why);
        return;
    }
    /* the decision's inclusion proof rides with the statement (null before encoding version 2) */
    pgcl_chain_proof proof;
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_proof(srv->audit, req->params[0], &proof, err, sizeof err);
    if (st != PGCL_OK && st != PGCL_ERR_UNSUPPORTED) {
        json_decref(body);
        read_error(reply, "decision", st, err);
        return;
    }
    json_t *proof_json = st == PGCL_OK ? pgcld_inclusion_proof_json(req->params[0], &proof) : json_null();
    if (st == PGCL_OK) pgcl_chain_proof_release(&proof);
    if (!proof_json || json_object_set_new(json_object_get(body, "pgcld"), "proof", proof_json) != 0) {
        json_decref(body);
        pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
        return;
    }
    reply->status = 200;
    reply->body = body;
}

/* ---- GET /v1/audit/export ----
 * Streamed: core/review/export.c reads the rows in chunks of a few hundred, each chunk on a pooled
 * connection taken and given back within the callback that needs it, so no read transaction is
 * held while a slow client downloads, and memory stays constant. The export covers the rows that
 * existed when it started. */

static const char *const FORMAT_VALUES[] = {"ndjson", "csv", NULL};

static long export_stream(void *ctx, char *buf, size_t max) {
    return pgcl_export_read(ctx, buf, max);
}
static void export_free(void *ctx) {
    pgcl_export_destroy(ctx);
}

void pgcld_handle_audit_export(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    char since_buf[PGCL_QTIME_LEN + 1], until_buf[PGCL_QTIME_LEN + 1];
    const char *since, *until, *format;
    if (window_params(req, since_buf, until_buf, &since, &until, reply) != 0 ||
        choice_param(req, "format", FORMAT_VALUES, &format, reply) != 0)
        return;
    bool csv = format && strcmp(format, "csv") == 0;
    pgcl_export *e = NULL;
    char err[ERR_CAP];
    pgcl_status st =
        pgcl_audit_open_export(srv->audit, since, until, csv ? PGCL_EXPORT_CSV : PGCL_EXPORT_NDJSON, &e, err, sizeof err);
    if (st != PGCL_OK) {
        read_error(reply, "export", st, err);
        return;
    }
    reply->status = 200;
    reply->stream_fn = export_stream;
    reply->stream_free = export_free;
    reply->stream_ctx = e;
    reply->content_type = csv ? "text/csv; charset=utf-8; header=present" : "application/x-ndjson";
    reply->content_disposition =
        csv ? "attachment; filename=\"pgcld-decisions.csv\"" : "attachment; filename=\"pgcld-decisions.ndjson\"";
}

/* ---- GET /v1/audit/stats ---- */


void pgcld_handle_audit_stats(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    char since_buf[PGCL_QTIME_LEN + 1], until_buf[PGCL_QTIME_LEN + 1];
    const char *since, *until;
    if (window_params(req, since_buf, until_buf, &since, &until, reply) != 0)
        return;
    pgcl_row_arena a = {0};
    pgcl_audit_stats stats;
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_stats(srv->audit, since, until, &a, &stats, err, sizeof err);
    if (st != PGCL_OK) {
        read_error(reply, "stats", st, err);
    } else {
        reply->status = 200;
        reply->body = pgcld_audit_stats_json(&stats, since, until);
        if (!reply->body) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    }
    pgcl_row_arena_release(&a);
}

/* ---- GET /v1/contests ---- */

static const char *const STATUS_VALUES[] = {"open", "resolved", NULL};

/* The contest window in days: the --contest-window-days option. */
static int contest_window_days(const pgcld_server *srv) {
    return (int)srv->cfg->contest_window_days;
}

void pgcld_handle_contests_list(pgcld_server *srv, const pgcld_request *req, pgcld_reply *reply) {
    const char *status;
    int limit;
    int64_t after;
    if (choice_param(req, "status", STATUS_VALUES, &status, reply) != 0 || limit_param(req, &limit, reply) != 0)
        return;
    bool open = !status || strcmp(status, "open") == 0;
    char kind = open ? PGCL_CURSOR_CONTESTS_OPEN : PGCL_CURSOR_CONTESTS_RESOLVED;
    if (cursor_param(req, kind, NO_FILTERS, &after, reply) != 0) return;
    pgcl_row_arena a = {0};
    pgcl_contest_page page;
    char err[ERR_CAP];
    pgcl_status st = pgcl_audit_read_contests(srv->audit, open, after, limit, contest_window_days(srv), pgcl_time_now_us(), &a, &page,
                                        err, sizeof err);
    if (st != PGCL_OK) {
        read_error(reply, "contests", st, err);
    } else {
        reply->status = 200;
        reply->body = json_pack("{s:o, s:o}", "contests", pgcld_contest_rows_json(&page), "next_cursor",
                                next_cursor(kind, NO_FILTERS, page.next));
        if (!reply->body) pgcld_reply_error(reply, 500, "internal_error", -1, NULL, "out of memory");
    }
    pgcl_row_arena_release(&a);
}
