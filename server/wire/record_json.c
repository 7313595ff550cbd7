/* record_json.h: records and tlog-shape proofs as JSON. */
#include "record_json.h"

#include <sodium.h>
#include <stdlib.h>

static const char *const TASKS[] = {"binary", "multiclass", "ordinal"};
static const char *const VERDICTS[] = {"allow", "review", "block"};
static const char *const POLICY_KINDS[] = {"threshold", "label_map"};
static const char *const DTYPES[] = {"none", "f16", "f32"};
static const char *const KEY_ACTIONS[] = {"create", "import", "revoke"};
static const char *const ROLES[] = {"scorer", "reviewer", "admin"};
static const char *const OUTCOMES[] = {"upheld", "overturned"};

static json_t *hex(const uint8_t *b, size_t n) {
    char out[2 * 64 + 1];
    PGCL_ASSERT(n <= 64);
    pgcl_record_hex_format(b, n, out);
    return json_string(out);
}

static json_t *uuid(const uint8_t b[PGCL_RECORD_UUID_BYTES]) {
    char out[37];
    pgcl_record_uuid_format(b, out);
    return json_string(out);
}

static json_t *time_json(int64_t us) {
    char out[28];
    pgcl_record_time_format(us, out);
    return json_string(out);
}

static json_t *text(pgcl_record_text t) {
    return json_stringn(t.p, t.len);
}

static json_t *opt_string(const char *s) {
    return *s ? json_string(s) : json_null();
}

static json_t *floats(const pgcl_record_f32s *a) {
    json_t *out = json_array();
    for (uint32_t i = 0; out && i < a->n; i++)
        json_array_append_new(out, json_real(pgcl_record_f32_at(a, i)));
    return out;
}

static json_t *decision_json(const pgcl_record_decision *d) {
    json_t *territories = json_array();
    for (int i = 0; territories && i < d->n_territories; i++)
        json_array_append_new(territories, json_string(d->territories[i]));
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f}", "decision_id",
                          uuid(d->decision_id), "created_at", time_json(d->created_at_us), "trace_id",
                          d->has_trace_id ? hex(d->trace_id, PGCL_RECORD_TRACE_ID_BYTES) : json_null(), "model_sha256",
                          hex(d->model_sha256, 32), "policy_ref", hex(d->policy_ref, 32), "input_sha256",
                          hex(d->input_sha256, 32), "task", TASKS[d->task], "decision", VERDICTS[d->decision],
                          "policy_kind", POLICY_KINDS[d->policy_kind], "stored_dtype", DTYPES[d->stored_dtype],
                          "label_index", (int)d->label_index, "policy_label", (int)d->policy_label, "t_review",
                          d->t_review, "t_block", d->t_block, "min_confidence", d->min_confidence);
    if (!o) {
        json_decref(territories);
        return NULL;
    }
    json_object_set_new(o, "probabilities", floats(&d->probabilities));
    json_object_set_new(o, "vector", floats(&d->vector));
    json_object_set_new(o, "latency_us", json_integer(d->latency_us));
    json_object_set_new(o, "request_id", json_string(d->request_id));
    json_object_set_new(o, "item_id", json_string(d->item_id));
    json_object_set_new(o, "model_name", json_string(d->model_name));
    json_object_set_new(o, "model_version", json_string(d->model_version));
    json_object_set_new(o, "stored_digest",
                        d->stored_dtype == PGCL_RECORD_INPUT_NONE ? json_null() : hex(d->stored_digest, 32));
    json_object_set_new(o, "content_date", opt_string(d->content_date));
    json_object_set_new(o, "territorial_scope",
                        d->n_territories ? territories : (json_decref(territories), json_null()));
    json_object_set_new(o, "content_language", opt_string(d->content_language));
    return o;
}

static json_t *policy_json(const pgcl_record_policy *p) {
    json_t *labels = json_array();
    for (uint16_t i = 0; labels && i < p->n_labels; i++)
        json_array_append_new(labels, text(pgcl_record_policy_label(p, i)));
    return json_pack("{s:o, s:o}", "labels", labels ? labels : json_null(), "policy", text(p->policy_json));
}

static json_t *legacy_json(const pgcl_record_legacy_head *h) {
    return json_pack("{s:o, s:I, s:o, s:o, s:o}", "created_at", time_json(h->created_at_us), "head_seq",
                     (json_int_t)h->head_seq, "head_hash", hex(h->head_hash, 32), "log_root",
                     h->has_log_root ? hex(h->log_root, 32) : json_null(), "writer_id", opt_string(h->writer_id));
}

static json_t *fields_json(const pgcl_record *r) {
    switch (r->kind) {
    case PGCL_RECORD_DECISION:
        return decision_json(&r->decision);
    case PGCL_RECORD_ADMIN_EVENT:
        return json_pack("{s:o, s:o, s:s, s:s, s:s, s:o}", "event_id", uuid(r->admin.event_id), "created_at",
                         time_json(r->admin.created_at_us), "actor", r->admin.actor, "action", r->admin.action,
                         "target", r->admin.target, "details", text(r->admin.details));
    case PGCL_RECORD_KEY_EVENT:
        return json_pack("{s:o, s:o, s:s, s:s, s:s, s:s, s:s}", "event_id", uuid(r->key.event_id), "created_at",
                         time_json(r->key.created_at_us), "action", KEY_ACTIONS[r->key.action], "role",
                         ROLES[r->key.role], "key_id", r->key.key_id, "name", r->key.name, "actor", r->key.actor);
    case PGCL_RECORD_CONTEST:
        return json_pack("{s:o, s:o, s:o, s:o, s:s, s:o}", "contest_id", uuid(r->contest.contest_id), "decision_id",
                         uuid(r->contest.decision_id), "filed_at", time_json(r->contest.filed_at_us), "filer_key_id",
                         opt_string(r->contest.filer_key_id), "filed_by", r->contest.filed_by, "reason",
                         text(r->contest.reason));
    case PGCL_RECORD_RESOLUTION:
        return json_pack("{s:o, s:o, s:o, s:s, s:o, s:s, s:o, s:o}", "contest_id", uuid(r->resolution.contest_id),
                         "decision_id", uuid(r->resolution.decision_id), "resolved_at",
                         time_json(r->resolution.resolved_at_us), "outcome", OUTCOMES[r->resolution.outcome],
                         "resolver_key_id", opt_string(r->resolution.resolver_key_id), "resolved_by",
                         r->resolution.resolved_by, "corrected_label", opt_string(r->resolution.corrected_label),
                         "note", text(r->resolution.note));
    case PGCL_RECORD_POLICY:
        return policy_json(&r->policy);
    case PGCL_RECORD_LEGACY_HEAD:
        return legacy_json(&r->legacy);
    }
    return NULL;
}

json_t *pgcld_record_json(const pgcl_record *r) {
    json_t *o = fields_json(r);
    if (o && json_object_set_new(o, "kind", json_string(pgcl_record_kind_name(r->kind))) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Standard padded base64 of b[0..n). */
static json_t *b64(const void *b, size_t n) {
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = malloc(cap);
    if (!out) return NULL;
    sodium_bin2base64(out, cap, b, n, sodium_base64_VARIANT_ORIGINAL);
    json_t *s = json_string(out);
    free(out);
    return s;
}

static json_t *hashes_b64(const pgcl_merkle_hash *h, int n) {
    json_t *out = json_array();
    for (int i = 0; out && i < n; i++)
        json_array_append_new(out, b64(h[i].b, PGCL_MERKLE_HASH_BYTES));
    return out;
}

json_t *pgcld_tlog_proof_json(const char *kind, const char *id, const pgcl_log_proof *p) {
    pgcl_record r;
    char why[200];
    if (pgcl_record_decode(p->leaf_data, p->leaf_len, &r, why, sizeof why) != PGCL_OK) return NULL;
    json_t *record = pgcld_record_json(&r);
    if (!record) return NULL;
    return json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:I, s:o, s:o, s:o, s:o}", "format", "tlog", "kind", kind, "id",
                     id, "writer_id", p->writer_id, "leaf_index", (json_int_t)p->leaf_index, "leaf_data",
                     b64(p->leaf_data, p->leaf_len), "tree_size", (json_int_t)p->tree_size, "root",
                     b64(p->root.b, PGCL_MERKLE_HASH_BYTES), "checkpoint",
                     p->checkpoint ? json_string(p->checkpoint) : json_null(), "inclusion",
                     hashes_b64(p->path, p->path_len), "record", record);
}

json_t *pgcld_tlog_consistency_json(const char *writer_id, uint64_t first, uint64_t second,
                                    const pgcl_merkle_hash *first_root, const pgcl_merkle_hash *second_root,
                                    const pgcl_merkle_hash *proof, int proof_len) {
    return json_pack("{s:s, s:s, s:I, s:I, s:o, s:o, s:o}", "format", "tlog", "writer_id", writer_id, "first",
                     (json_int_t)first, "second", (json_int_t)second, "first_root",
                     b64(first_root->b, PGCL_MERKLE_HASH_BYTES), "second_root",
                     b64(second_root->b, PGCL_MERKLE_HASH_BYTES), "proof", hashes_b64(proof, proof_len));
}
