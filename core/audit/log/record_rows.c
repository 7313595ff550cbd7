/* Records of the events from the rows the stores write today (record_rows.h): texts parsed by
 * record_text.c's strict parsers, JSON (a decision's probabilities and policy, a key event's
 * details) by jansson, then every field checked by pgcl_record_check, so a row that is not of
 * pgcld's forms is refused here, field named, before anything reaches the log. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record_rows.h"

/* Copies text (NULL: "") into out[0..cap) or says field is too long. */
static pgcl_status copy_text(const char *text, char *out, size_t cap, const char *field, char *why, int why_cap) {
    if (!text) text = "";
    size_t len = strlen(text);
    if (len >= cap) {
        pgcl_errorf(why, why_cap, "%s: %zu bytes, at most %zu", field, len, cap - 1);
        return PGCL_ERR_INVALID;
    }
    memcpy(out, text, len + 1);
    return PGCL_OK;
}

static pgcl_status parse_uuid(const char *text, uint8_t out[PGCL_RECORD_UUID_BYTES], const char *field, char *why,
                              int cap) {
    if (text && pgcl_record_uuid_parse(text, out)) return PGCL_OK;
    pgcl_errorf(why, cap, "%s: not a lowercase UUID (%.40s)", field, text ? text : "NULL");
    return PGCL_ERR_INVALID;
}

static pgcl_status parse_time(const char *text, int64_t *us, const char *field, char *why, int cap) {
    if (text && pgcl_record_time_parse(text, us)) return PGCL_OK;
    pgcl_errorf(why, cap, "%s: not a time of pgcld's form (%.40s)", field, text ? text : "NULL");
    return PGCL_ERR_INVALID;
}

static pgcl_status parse_hex(const char *text, uint8_t *out, size_t n, const char *field, char *why, int cap) {
    if (text && pgcl_record_hex_parse(text, out, n)) return PGCL_OK;
    pgcl_errorf(why, cap, "%s: not %zu lowercase hex digits", field, 2 * n);
    return PGCL_ERR_INVALID;
}

/* A long text field: borrowed from the row. */
static pgcl_status borrow_text(const char *text, pgcl_record_text *out, const char *field, char *why, int cap) {
    if (!text) {
        pgcl_errorf(why, cap, "%s: missing", field);
        return PGCL_ERR_INVALID;
    }
    *out = (pgcl_record_text){text, strlen(text)};
    return PGCL_OK;
}

/* ---- decisions ---- */

/* The labels and probabilities of the row: its arrays when set, else probabilities_json's keys and
 * values in order (labels copied into out->label_bytes). Sets out->policy's labels. */
static pgcl_status read_classes(const pgcl_decision_row *row, pgcl_decision_record_buf *out, uint16_t *k, char *why,
                                int cap) {
    pgcl_status st = PGCL_OK;
    if (row->labels && row->probabilities) {
        if (row->n_labels < 2 || row->n_labels > PGCL_RECORD_CLASSES_MAX) {
            pgcl_errorf(why, cap, "labels: %d, 2..%d", row->n_labels, PGCL_RECORD_CLASSES_MAX);
            return PGCL_ERR_INVALID;
        }
        for (int i = 0; i < row->n_labels; i++) {
            if (!row->labels[i]) return pgcl_errorf(why, cap, "labels[%d]: missing", i), PGCL_ERR_INVALID;
            out->labels[i] = (pgcl_record_text){row->labels[i], strlen(row->labels[i])};
        }
        *k = (uint16_t)row->n_labels;
        out->decision.decision.probabilities = (pgcl_record_f32s){.n = *k, .native = row->probabilities};
        return PGCL_OK;
    }
    json_error_t jerr;
    json_t *probs = row->probabilities_json ? json_loads(row->probabilities_json, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    size_t n = json_is_object(probs) ? json_object_size(probs) : 0;
    if (n < 2 || n > PGCL_RECORD_CLASSES_MAX) {
        pgcl_errorf(why, cap, "probabilities_json: not an object of 2..%d labels", PGCL_RECORD_CLASSES_MAX);
        json_decref(probs);
        return PGCL_ERR_INVALID;
    }
    const char *key;
    json_t *value;
    size_t i = 0, used = 0;
    json_object_foreach(probs, key, value) {
        size_t len = strlen(key);
        if (len == 0 || len > PGCL_RECORD_LABEL_MAX || !json_is_number(value)) {
            pgcl_errorf(why, cap, "probabilities_json: label %zu (\"%.40s\") or its value", i, key);
            st = PGCL_ERR_INVALID;
            break;
        }
        memcpy(out->label_bytes + used, key, len);
        out->labels[i] = (pgcl_record_text){out->label_bytes + used, len};
        out->probabilities[i] = (float)json_number_value(value); /* printed from a float: exact */
        used += len;
        i++;
    }
    json_decref(probs);
    if (st != PGCL_OK) return st;
    *k = (uint16_t)n;
    out->decision.decision.probabilities = (pgcl_record_f32s){.n = *k, .native = out->probabilities};
    return PGCL_OK;
}

static int label_position(const pgcl_decision_record_buf *out, uint16_t k, const char *label) {
    size_t len = strlen(label);
    for (int i = 0; i < k; i++)
        if (out->labels[i].len == len && memcmp(out->labels[i].p, label, len) == 0) return i;
    return -1;
}

static bool read_real(json_t *policy, const char *name, double *out) {
    json_t *v = json_object_get(policy, name);
    if (!json_is_number(v)) return false;
    *out = json_number_value(v);
    return true;
}

/* The policy's own fields, as policy_json and the labels give them (the row's thresholds aside). */
typedef struct policy_fields {
    pgcl_record_policy_kind kind;
    uint16_t policy_label;
    double t_review, t_block, min_confidence;
} policy_fields;

/* Parses policy_json into f (threshold: its label's position among the k labels and its
 * thresholds; label_map: min_confidence, 0 when absent). */
static pgcl_status parse_policy(const char *policy_json, const pgcl_decision_record_buf *out, uint16_t k,
                                policy_fields *f, char *why, int cap) {
    memset(f, 0, sizeof *f);
    json_error_t jerr;
    json_t *p = policy_json ? json_loads(policy_json, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    const char *kind = json_string_value(json_object_get(p, "kind"));
    pgcl_status st = PGCL_OK;
    if (!json_is_object(p) || !kind) {
        pgcl_errorf(why, cap, "policy_json: not a policy object with a kind");
        st = PGCL_ERR_INVALID;
    } else if (strcmp(kind, "threshold") == 0) {
        f->kind = PGCL_RECORD_POLICY_THRESHOLD;
        const char *label = json_string_value(json_object_get(p, "label"));
        int at = label ? label_position(out, k, label) : -1;
        if (at < 0) {
            pgcl_errorf(why, cap, "policy_json.label: not one of the decision's labels");
            st = PGCL_ERR_INVALID;
        } else if (!read_real(p, "t_review", &f->t_review) || !read_real(p, "t_block", &f->t_block)) {
            pgcl_errorf(why, cap, "policy_json.t_review, t_block: missing");
            st = PGCL_ERR_INVALID;
        }
        f->policy_label = (uint16_t)(at < 0 ? 0 : at);
    } else if (strcmp(kind, "label_map") == 0) {
        f->kind = PGCL_RECORD_POLICY_LABEL_MAP;
        if (json_object_get(p, "min_confidence") && !read_real(p, "min_confidence", &f->min_confidence)) {
            pgcl_errorf(why, cap, "policy_json.min_confidence: not a number");
            st = PGCL_ERR_INVALID;
        }
    } else {
        pgcl_errorf(why, cap, "policy_json.kind: \"%.20s\", not threshold or label_map", kind);
        st = PGCL_ERR_INVALID;
    }
    json_decref(p);
    return st;
}

/* From scratch: policy_json parsed into f, out->policy (labels and policy_json set) checked and
 * its leaf hash into ref. */
static pgcl_status convert_policy(const pgcl_decision_row *row, const pgcl_decision_record_buf *out, uint16_t k,
                                  policy_fields *f, uint8_t ref[PGCL_RECORD_SHA256_BYTES], char *why, int cap) {
    pgcl_status st = parse_policy(row->policy_json, out, k, f, why, cap);
    if (st == PGCL_OK) st = pgcl_record_check(&out->policy, why, cap);
    if (st == PGCL_OK) st = pgcl_record_policy_ref(&out->policy.policy, ref, why, cap);
    return st;
}

/* Whether entry e's key is exactly policy_json (len bytes) and the k labels. */
static bool entry_matches(const pgcl_policy_cache_entry *e, const char *policy_json, size_t len,
                          const pgcl_record_text *labels, uint16_t k) {
    if (!e->policy_json || e->policy_len != len || e->n_labels != k) return false;
    if (memcmp(e->policy_json, policy_json, len) != 0) return false;
    uint32_t begin = 0;
    for (uint16_t i = 0; i < k; i++) {
        const uint32_t end = e->label_ends[i];
        if (end - begin != labels[i].len || memcmp(e->label_bytes + begin, labels[i].p, labels[i].len) != 0)
            return false;
        begin = end;
    }
    return true;
}

static void entry_free(pgcl_policy_cache_entry *e) {
    free(e->policy_json);
    free(e->label_bytes);
    free(e->label_ends);
    memset(e, 0, sizeof *e);
}

/* Keeps a converted policy in the next slot (replacing its entry); out of memory: keeps nothing. */
static void cache_store(pgcl_decision_record_buf *out, const char *policy_json, size_t len, uint16_t k,
                        const policy_fields *f, const uint8_t ref[PGCL_RECORD_SHA256_BYTES]) {
    pgcl_policy_cache_entry *e = &out->policy_cache[out->policy_cache_next];
    out->policy_cache_next = (out->policy_cache_next + 1) % PGCL_POLICY_CACHE_SLOTS;
    entry_free(e);
    size_t label_total = 0;
    for (uint16_t i = 0; i < k; i++)
        label_total += out->labels[i].len;
    e->policy_json = malloc(len);
    e->label_bytes = malloc(label_total ? label_total : 1);
    e->label_ends = malloc(k * sizeof *e->label_ends);
    if (!e->policy_json || !e->label_bytes || !e->label_ends) {
        entry_free(e);
        return;
    }
    memcpy(e->policy_json, policy_json, len);
    e->policy_len = len;
    uint32_t at = 0;
    for (uint16_t i = 0; i < k; i++) {
        memcpy(e->label_bytes + at, out->labels[i].p, out->labels[i].len);
        at += (uint32_t)out->labels[i].len;
        e->label_ends[i] = at;
    }
    e->n_labels = k;
    e->kind = f->kind;
    e->policy_label = f->policy_label;
    e->t_review = f->t_review;
    e->t_block = f->t_block;
    e->min_confidence = f->min_confidence;
    memcpy(e->policy_ref, ref, PGCL_RECORD_SHA256_BYTES);
}

/* The policy's fields and policy_ref into d, out->policy (its labels and policy_json set) checked:
 * from the cache when this exact policy_json and these labels were converted before (bytes
 * compared), else converted from scratch (and cached when the cache is on). */
static pgcl_status read_policy(const pgcl_decision_row *row, pgcl_decision_record_buf *out, uint16_t k,
                               pgcl_record_decision *d, char *why, int cap) {
    policy_fields f;
    uint8_t ref[PGCL_RECORD_SHA256_BYTES];
    const pgcl_policy_cache_entry *hit = NULL;
    const size_t len = out->policy.policy.policy_json.len;
    if (out->use_policy_cache)
        for (int i = 0; i < PGCL_POLICY_CACHE_SLOTS && !hit; i++)
            if (entry_matches(&out->policy_cache[i], row->policy_json, len, out->labels, k))
                hit = &out->policy_cache[i];
    if (hit) {
        out->policy_cache_hits++;
        f = (policy_fields){hit->kind, hit->policy_label, hit->t_review, hit->t_block, hit->min_confidence};
        memcpy(ref, hit->policy_ref, sizeof ref);
    } else {
        pgcl_status st = convert_policy(row, out, k, &f, ref, why, cap);
        if (st != PGCL_OK) return st;
        if (out->use_policy_cache) {
            out->policy_cache_misses++;
            cache_store(out, row->policy_json, len, k, &f, ref);
        }
    }
    d->policy_kind = f.kind;
    d->policy_label = f.policy_label;
    d->t_review = f.t_review;
    d->t_block = f.t_block;
    d->min_confidence = f.min_confidence;
    memcpy(d->policy_ref, ref, sizeof ref);
    /* the row's own thresholds must be its policy's */
    if (f.kind == PGCL_RECORD_POLICY_THRESHOLD && row->has_thresholds &&
        (row->t_review != f.t_review || row->t_block != f.t_block)) {
        pgcl_errorf(why, cap, "t_review, t_block: the row's differ from its policy's");
        return PGCL_ERR_INVALID;
    }
    if (f.kind == PGCL_RECORD_POLICY_LABEL_MAP && row->has_thresholds) {
        pgcl_errorf(why, cap, "t_review: set for a label_map policy");
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

static pgcl_status read_verdict(const char *text, pgcl_record_verdict *out, char *why, int cap) {
    static const char *const names[] = {"allow", "review", "block"};
    for (int i = 0; text && i < 3; i++)
        if (strcmp(text, names[i]) == 0) return *out = (pgcl_record_verdict)i, PGCL_OK;
    pgcl_errorf(why, cap, "decision: not allow, review or block");
    return PGCL_ERR_INVALID;
}

/* The stored input's dtype and digest. */
static pgcl_status read_stored_input(const pgcl_decision_row *row, const unsigned char *input_digest,
                                     pgcl_record_decision *d, char *why, int cap) {
    if (!row->input_dtype && !input_digest) {
        d->stored_dtype = PGCL_RECORD_INPUT_NONE;
        return PGCL_OK;
    }
    if (!row->input_dtype || !input_digest) {
        pgcl_errorf(why, cap, "input_digest: %s", input_digest ? "given without an input_dtype" : "missing");
        return PGCL_ERR_INVALID;
    }
    if (strcmp(row->input_dtype, "f16") == 0)
        d->stored_dtype = PGCL_RECORD_INPUT_F16;
    else if (strcmp(row->input_dtype, "f32") == 0)
        d->stored_dtype = PGCL_RECORD_INPUT_F32;
    else {
        pgcl_errorf(why, cap, "input_dtype: \"%.10s\", not f16 or f32", row->input_dtype);
        return PGCL_ERR_INVALID;
    }
    memcpy(d->stored_digest, input_digest, PGCL_RECORD_SHA256_BYTES);
    return PGCL_OK;
}

/* The optional facts of migration 0011. */
static pgcl_status read_facts(const pgcl_decision_row *row, pgcl_record_decision *d, char *why, int cap) {
    pgcl_status st;
    d->has_trace_id = row->trace_id != NULL;
    if (row->trace_id && (st = parse_hex(row->trace_id, d->trace_id, PGCL_RECORD_TRACE_ID_BYTES, "trace_id", why,
                                         cap)) != PGCL_OK)
        return st;
    if ((st = copy_text(row->content_date, d->content_date, sizeof d->content_date, "content_date", why, cap)))
        return st;
    if ((st = copy_text(row->content_language, d->content_language, sizeof d->content_language, "content_language",
                        why, cap)))
        return st;
    if (row->territorial_scope && !pgcl_record_territories_parse(row->territorial_scope, d)) {
        pgcl_errorf(why, cap, "territorial_scope: not a JSON array of 1..%d unique EEA codes",
                    PGCL_RECORD_TERRITORIES_MAX);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_decision_record_buf *pgcl_decision_record_buf_create(void) {
    pgcl_decision_record_buf *b = calloc(1, sizeof *b);
    if (b) b->use_policy_cache = true;
    return b;
}

void pgcl_decision_record_buf_destroy(pgcl_decision_record_buf *b) {
    if (!b) return;
    for (int i = 0; i < PGCL_POLICY_CACHE_SLOTS; i++)
        entry_free(&b->policy_cache[i]);
    free(b);
}

pgcl_status pgcl_record_of_decision_row(const pgcl_decision_row *row, int64_t created_at_us,
                                        const unsigned char *input_digest, pgcl_decision_record_buf *out, char *why,
                                        int cap) {
    memset(&out->decision, 0, sizeof out->decision);
    memset(&out->policy, 0, sizeof out->policy);
    out->decision.kind = PGCL_RECORD_DECISION;
    out->policy.kind = PGCL_RECORD_POLICY;
    pgcl_record_decision *d = &out->decision.decision;
    d->created_at_us = created_at_us;
    uint16_t k = 0;
    pgcl_status st;
    if ((st = parse_uuid(row->decision_id, d->decision_id, "decision_id", why, cap)) ||
        (st = parse_hex(row->model_sha256, d->model_sha256, 32, "model_sha256", why, cap)) ||
        (st = parse_hex(row->input_sha256, d->input_sha256, 32, "input_sha256", why, cap)) ||
        (st = read_classes(row, out, &k, why, cap)) ||
        (st = borrow_text(row->policy_json, &out->policy.policy.policy_json, "policy_json", why, cap)))
        return st;
    out->policy.policy.n_labels = k;
    out->policy.policy.labels = out->labels;
    if ((st = read_policy(row, out, k, d, why, cap)) || (st = read_verdict(row->decision, &d->decision, why, cap)) ||
        (st = read_stored_input(row, input_digest, d, why, cap)) || (st = read_facts(row, d, why, cap)) ||
        (st = copy_text(row->request_id, d->request_id, sizeof d->request_id, "request_id", why, cap)) ||
        (st = copy_text(row->item_id, d->item_id, sizeof d->item_id, "item_id", why, cap)) ||
        (st = copy_text(row->model_name, d->model_name, sizeof d->model_name, "model_name", why, cap)) ||
        (st = copy_text(row->model_version, d->model_version, sizeof d->model_version, "model_version", why, cap)))
        return st;
    if (row->record_task < 0 || row->record_task > 3) {
        pgcl_errorf(why, cap, "record_task: %d, 0..3", row->record_task);
        return PGCL_ERR_INVALID;
    }
    d->task = row->record_task ? (pgcl_record_task)(row->record_task - 1)
                               : (k == 2 ? PGCL_RECORD_TASK_BINARY : PGCL_RECORD_TASK_MULTICLASS);
    if (row->label_index < 0 || row->label_index >= k) {
        pgcl_errorf(why, cap, "label_index: %d, not below the %u labels", row->label_index, k);
        return PGCL_ERR_INVALID;
    }
    d->label_index = (uint16_t)row->label_index;
    if (row->label && label_position(out, k, row->label) != row->label_index) {
        pgcl_errorf(why, cap, "label: not labels[label_index]");
        return PGCL_ERR_INVALID;
    }
    if (row->d < 1 || !row->vector) {
        pgcl_errorf(why, cap, "vector: %d dimensions", row->d);
        return PGCL_ERR_INVALID;
    }
    d->vector = (pgcl_record_f32s){.n = (uint32_t)row->d, .native = row->vector};
    d->latency_us = row->latency_us;
    return pgcl_record_check(&out->decision, why, cap);
}

/* ---- admin and key events, contests, resolutions ---- */

static pgcl_status read_key_event(const char *action, const char *target, const char *details_json,
                                  pgcl_record_key_event *e, char *why, int cap) {
    static const char *const actions[] = {"key.create", "key.import", "key.revoke"};
    static const char *const roles[] = {"scorer", "reviewer", "admin"};
    int a = -1, r = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(action, actions[i]) == 0) a = i;
    if (a < 0) {
        pgcl_errorf(why, cap, "action: \"%.64s\" is not a key event", action);
        return PGCL_ERR_INVALID;
    }
    e->action = (pgcl_record_key_action)a;
    json_error_t jerr;
    json_t *details = details_json ? json_loads(details_json, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    const char *name = json_string_value(json_object_get(details, "name"));
    const char *role = json_string_value(json_object_get(details, "role"));
    for (int i = 0; role && i < 3; i++)
        if (strcmp(role, roles[i]) == 0) r = i;
    pgcl_status st = PGCL_OK;
    if (!name) {
        pgcl_errorf(why, cap, "details_json.name: missing");
        st = PGCL_ERR_INVALID;
    } else if (r < 0) {
        pgcl_errorf(why, cap, "details_json.role: not scorer, reviewer or admin");
        st = PGCL_ERR_INVALID;
    } else {
        e->role = (pgcl_record_role)r;
        st = copy_text(name, e->name, sizeof e->name, "details_json.name", why, cap);
    }
    json_decref(details);
    if (st != PGCL_OK) return st;
    return copy_text(target, e->key_id, sizeof e->key_id, "target (key_id)", why, cap);
}

pgcl_status pgcl_record_of_admin_event(const char *event_id, const char *created_at, const char *actor,
                                       const char *action, const char *target, const char *details_json,
                                       pgcl_record *out, char *why, int cap) {
    memset(out, 0, sizeof *out);
    if (!action) return pgcl_errorf(why, cap, "action: missing"), PGCL_ERR_INVALID;
    pgcl_status st;
    if (strncmp(action, "key.", 4) == 0) {
        out->kind = PGCL_RECORD_KEY_EVENT;
        pgcl_record_key_event *e = &out->key;
        if ((st = parse_uuid(event_id, e->event_id, "event_id", why, cap)) ||
            (st = parse_time(created_at, &e->created_at_us, "created_at", why, cap)) ||
            (st = copy_text(actor, e->actor, sizeof e->actor, "actor", why, cap)) ||
            (st = read_key_event(action, target, details_json, e, why, cap)))
            return st;
    } else {
        out->kind = PGCL_RECORD_ADMIN_EVENT;
        pgcl_record_admin_event *e = &out->admin;
        if ((st = parse_uuid(event_id, e->event_id, "event_id", why, cap)) ||
            (st = parse_time(created_at, &e->created_at_us, "created_at", why, cap)) ||
            (st = copy_text(actor, e->actor, sizeof e->actor, "actor", why, cap)) ||
            (st = copy_text(action, e->action, sizeof e->action, "action", why, cap)) ||
            (st = copy_text(target, e->target, sizeof e->target, "target", why, cap)) ||
            (st = borrow_text(details_json, &e->details, "details_json", why, cap)))
            return st;
    }
    return pgcl_record_check(out, why, cap);
}

pgcl_status pgcl_record_of_contest(const char *contest_id, const char *decision_id, const char *filed_at,
                                   const char *filer_key_id, const char *filed_by, const char *reason, pgcl_record *out,
                                   char *why, int cap) {
    memset(out, 0, sizeof *out);
    out->kind = PGCL_RECORD_CONTEST;
    pgcl_record_contest *c = &out->contest;
    pgcl_status st;
    if ((st = parse_uuid(contest_id, c->contest_id, "contest_id", why, cap)) ||
        (st = parse_uuid(decision_id, c->decision_id, "decision_id", why, cap)) ||
        (st = parse_time(filed_at, &c->filed_at_us, "filed_at", why, cap)) ||
        (st = copy_text(filer_key_id, c->filer_key_id, sizeof c->filer_key_id, "filer_key_id", why, cap)) ||
        (st = copy_text(filed_by, c->filed_by, sizeof c->filed_by, "filed_by", why, cap)) ||
        (st = borrow_text(reason, &c->reason, "reason", why, cap)))
        return st;
    return pgcl_record_check(out, why, cap);
}

pgcl_status pgcl_record_of_resolution(const char *contest_id, const char *decision_id, const char *resolved_at,
                                      const char *outcome, const char *resolver_key_id, const char *resolved_by,
                                      const char *corrected_label, const char *note, pgcl_record *out, char *why,
                                      int cap) {
    memset(out, 0, sizeof *out);
    out->kind = PGCL_RECORD_RESOLUTION;
    pgcl_record_resolution *r = &out->resolution;
    pgcl_status st;
    if (outcome && strcmp(outcome, "upheld") == 0)
        r->outcome = PGCL_RECORD_UPHELD;
    else if (outcome && strcmp(outcome, "overturned") == 0)
        r->outcome = PGCL_RECORD_OVERTURNED;
    else
        return pgcl_errorf(why, cap, "outcome: not upheld or overturned"), PGCL_ERR_INVALID;
    if ((st = parse_uuid(contest_id, r->contest_id, "contest_id", why, cap)) ||
        (st = parse_uuid(decision_id, r->decision_id, "decision_id", why, cap)) ||
        (st = parse_time(resolved_at, &r->resolved_at_us, "resolved_at", why, cap)) ||
        (st = copy_text(resolver_key_id, r->resolver_key_id, sizeof r->resolver_key_id, "resolver_key_id", why,
                        cap)) ||
        (st = copy_text(resolved_by, r->resolved_by, sizeof r->resolved_by, "resolved_by", why, cap)) ||
        (st = copy_text(corrected_label, r->corrected_label, sizeof r->corrected_label, "corrected_label", why,
                        cap)) ||
        (st = borrow_text(note, &r->note, "note", why, cap)))
        return st;
    return pgcl_record_check(out, why, cap);
}
