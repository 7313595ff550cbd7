/* The JSON of the reviewers' read answers; see review_json.h. Built with jansson's json_pack so that
 * a member that cannot be made (out of memory, a string that is not UTF-8) fails the whole answer,
 * as it always has. */
#include "review_json.h"

#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalars ---- */

static json_t *text_json(const char *text) {
    return text ? json_string(text) : json_null();
}

static json_t *opt_real_json(pgcl_opt_real v) {
    return v.present ? json_real(v.value) : json_null();
}

static json_t *opt_int_json(pgcl_opt_int v) {
    return v.present ? json_integer(v.value) : json_null();
}

/* A stored JSON text as a JSON value (null if absent or not JSON). */
static json_t *stored_json(const char *text) {
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_null();
}

/* A duration in seconds as a JSON number rounded to milliseconds (they suffice for these figures). */
static json_t *seconds_json(double seconds) {
    return json_real((double)llround(seconds * 1000.0) / 1000.0);
}

static json_t *vector_json(const float *v, int n) {
    json_t *arr = json_array();
    for (int k = 0; arr && k < n; k++)
        json_array_append_new(arr, json_real(v[k]));
    return arr;
}

/* ---- rows ---- */

static json_t *resolution_json(const pgcl_resolution_row *r) {
    if (!r->present) return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "resolved_at", text_json(r->resolved_at), "resolved_by",
                     text_json(r->resolved_by), "resolver_key_id", text_json(r->resolver_key_id), "outcome",
                     text_json(r->outcome), "corrected_label", text_json(r->corrected_label), "note",
                     text_json(r->note));
}

/* Sets a decision's trace id and statement facts on o (each null when absent; territorial_scope as
 * the array it was stored as). Returns o, or NULL (o released) when out of memory. */
static json_t *with_facts(json_t *o, const pgcl_decision_facts *f) {
    if (!o) return NULL;
    if (json_object_set_new(o, "trace_id", text_json(f->trace_id)) != 0 ||
        json_object_set_new(o, "content_date", text_json(f->content_date)) != 0 ||
        json_object_set_new(o, "territorial_scope", stored_json(f->territorial_scope)) != 0 ||
        json_object_set_new(o, "content_language", text_json(f->content_language)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *pgcld_decision_summary_json(const pgcl_decision_summary *r) {
    return with_facts(json_pack("{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "decision_id",
                     text_json(r->decision_id), "seq", (json_int_t)r->seq, "created_at", text_json(r->created_at),
                     "item_id", text_json(r->item_id), "request_id", text_json(r->request_id), "model_name",
                     text_json(r->model_name), "model_version", text_json(r->model_version), "label",
                     text_json(r->label), "decision", text_json(r->decision), "toxicity", opt_real_json(r->toxicity),
                     "contest_status", text_json(r->contest_status)), &r->facts);
}

json_t *pgcld_decision_rows_json(const pgcl_decision_page *page) {
    json_t *rows = json_array();
    for (int i = 0; rows && i < page->n; i++) {
        json_t *row = pgcld_decision_summary_json(&page->rows[i]);
        if (!row || json_array_append_new(rows, row) != 0) {
            json_decref(rows);
            return NULL;
        }
    }
    return rows;
}

static json_t *record_contests_json(const pgcl_decision_record *r) {
    json_t *contests = json_array();
    for (int i = 0; contests && i < r->n_contests; i++) {
        const pgcl_contest_row *c = &r->contests[i];
        json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "contest_id", text_json(c->contest_id), "filed_at",
                              text_json(c->filed_at), "filed_by", text_json(c->filed_by), "filer_key_id",
                              text_json(c->filer_key_id), "reason", text_json(c->reason), "resolution",
                              resolution_json(&c->resolution));
        if (!o || json_array_append_new(contests, o) != 0) {
            json_decref(contests);
            return NULL;
        }
    }
    return contests;
}

json_t *pgcld_decision_record_json(const pgcl_decision_record *r) {
    json_t *rec =
        json_pack("{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                  "decision_id", text_json(r->decision_id), "seq", (json_int_t)r->seq, "created_at",
                  text_json(r->created_at), "request_id", text_json(r->request_id), "item_id", text_json(r->item_id),
                  "model_name", text_json(r->model_name), "model_version", text_json(r->model_version), "model_sha256",
                  text_json(r->model_sha256), "label", text_json(r->label), "label_index", opt_int_json(r->label_index),
                  "probabilities", stored_json(r->probabilities), "toxicity", opt_real_json(r->toxicity), "decision",
                  text_json(r->decision), "policy", stored_json(r->policy), "t_review", opt_real_json(r->t_review),
                  "t_block", opt_real_json(r->t_block), "vector", vector_json(r->vector, r->n_vector), "input_sha256",
                  text_json(r->input_sha256), "latency_us", opt_int_json(r->latency_us));
    if (!(rec = with_facts(rec, &r->facts))) return NULL;
    json_object_set_new(rec, "input_stored", text_json(r->input_stored));
    json_object_set_new(rec, "input_dropped", json_boolean(r->input_dropped));
    json_object_set_new(rec, "contest_status", text_json(r->contest_status));
    json_object_set_new(
        rec, "provenance",
        json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "model_name", json_object_get(rec, "model_name"),
                  "model_version", json_object_get(rec, "model_version"), "model_sha256",
                  json_object_get(rec, "model_sha256"), "request_id", json_object_get(rec, "request_id"), "item_id",
                  json_object_get(rec, "item_id"), "input_sha256", json_object_get(rec, "input_sha256"), "created_at",
                  json_object_get(rec, "created_at"), "latency_us", json_object_get(rec, "latency_us")));
    json_t *chain =
        r->has_chain ? json_pack("{s:o, s:o}", "seq", opt_int_json(r->chain_seq), "hash", text_json(r->chain_hash))
                     : json_null();
    if (chain && r->has_chain && r->writer_id) /* a fleet's store: whose chain holds the entry */
        json_object_set_new(chain, "writer_id", json_string(r->writer_id));
    json_object_set_new(rec, "chain", chain);
    json_t *contests = record_contests_json(r);
    if (!contests) {
        json_decref(rec);
        return NULL;
    }
    json_object_set_new(rec, "contests", contests);
    const pgcl_effective_outcome *o = &r->outcome;
    json_object_set_new(rec, "effective_outcome",
                        json_pack("{s:s, s:s, s:s, s:s, s:o}", "status", o->status, "label", o->label, "decision",
                                  o->decision, "decided_by", o->decided_by, "contest_id", text_json(o->contest_id)));
    return rec;
}

json_t *pgcld_contest_rows_json(const pgcl_contest_page *page) {
    json_t *rows = json_array();
    for (int i = 0; rows && i < page->n; i++) {
        const pgcl_contest_queue_row *c = &page->rows[i];
        json_t *row = json_pack(
            "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "contest_id",
            text_json(c->contest_id), "decision_id", text_json(c->decision_id), "filed_at", text_json(c->filed_at),
            "filed_by", text_json(c->filed_by), "reason", text_json(c->reason), "age_seconds",
            c->timed ? json_integer(c->age_seconds) : json_null(), "deadline",
            c->timed ? json_string(c->deadline) : json_null(), "overdue",
            c->timed ? json_boolean(c->overdue) : json_null(), "resolution", resolution_json(&c->resolution), "label",
            text_json(c->label), "decision", text_json(c->decision), "model_name", text_json(c->model_name),
            "model_version", text_json(c->model_version), "item_id", text_json(c->item_id));
        if (!row || json_array_append_new(rows, row) != 0) {
            json_decref(rows);
            return NULL;
        }
    }
    return rows;
}

/* ---- figures ---- */

static json_t *named_counts_json(const pgcl_named_count *v, int n) {
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++)
        json_object_set_new(o, v[i].name, json_integer(v[i].count));
    return o;
}

static json_t *decision_figures_json(const pgcl_audit_stats *s) {
    json_t *by_mv = json_array();
    for (int i = 0; by_mv && i < s->n_by_model_version; i++) {
        const pgcl_model_version_count *c = &s->by_model_version[i];
        json_array_append_new(by_mv, json_pack("{s:s, s:s, s:I}", "model_name", c->model_name, "model_version",
                                               c->model_version, "count", (json_int_t)c->count));
    }
    return json_pack("{s:I, s:o, s:o, s:o}", "total", (json_int_t)s->decisions_total, "by_model_version", by_mv,
                     "by_label", named_counts_json(s->by_label, s->n_by_label), "by_decision",
                     named_counts_json(s->by_decision, s->n_by_decision));
}

static json_t *contest_figures_json(const pgcl_audit_stats *s) {
    json_t *rates = json_array(), *by_version = json_array();
    for (int i = 0; rates && by_version && i < s->n_contests_by_model_version; i++) {
        const pgcl_contest_figures *c = &s->contests_by_model_version[i];
        json_array_append_new(
            rates, json_pack("{s:o, s:o, s:I, s:I, s:o}", "model_name", text_json(c->model_name), "model_version",
                             text_json(c->model_version), "resolved", (json_int_t)c->resolved, "overturned",
                             (json_int_t)c->overturned, "rate",
                             c->resolved ? json_real((double)c->overturned / (double)c->resolved) : json_null()));
        json_t *med =
            c->median_resolution_seconds.present ? seconds_json(c->median_resolution_seconds.value) : json_null();
        json_array_append_new(
            by_version, json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:o}", "model_name", text_json(c->model_name),
                                  "model_version", text_json(c->model_version), "filed", (json_int_t)c->filed,
                                  "resolved", (json_int_t)c->resolved, "open", (json_int_t)(c->filed - c->resolved),
                                  "overturned", (json_int_t)c->overturned, "median_resolution_seconds", med));
    }
    json_t *median =
        s->median_resolution_seconds.present ? seconds_json(s->median_resolution_seconds.value) : json_null();
    return json_pack("{s:I, s:I, s:I, s:o, s:o, s:o}", "filed", (json_int_t)s->contests_filed, "resolved",
                     (json_int_t)s->contests_resolved, "open", (json_int_t)(s->contests_filed - s->contests_resolved),
                     "median_resolution_seconds", median, "overturn_rate_by_model_version", rates, "by_model_version",
                     by_version);
}

json_t *pgcld_audit_stats_json(const pgcl_audit_stats *s, const char *since, const char *until) {
    json_t *res = json_pack("{s:o, s:o}", "since", text_json(since), "until", text_json(until));
    if (!res) return NULL;
    json_object_set_new(res, "decisions", decision_figures_json(s));
    json_object_set_new(res, "contests", contest_figures_json(s));
    return res;
}

/* ---- inclusion proofs ---- */

static json_t *hash_json(const pgcl_merkle_hash *h) {
    char hex[2 * PGCL_MERKLE_HASH_BYTES + 1];
    pgcl_merkle_to_hex(h, hex);
    return json_string(hex);
}

json_t *pgcld_inclusion_proof_json(const char *decision_id, const pgcl_chain_proof *p) {
    size_t b64_cap = sodium_base64_encoded_len(p->leaf_data_len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(b64_cap);
    json_t *path = json_array();
    if (!b64 || !path) {
        free(b64);
        json_decref(path);
        return NULL;
    }
    sodium_bin2base64(b64, b64_cap, p->leaf_data, p->leaf_data_len, sodium_base64_VARIANT_ORIGINAL);
    for (int i = 0; i < p->path_len; i++)
        json_array_append_new(path, hash_json(&p->path[i]));
    json_t *log_path = json_array();
    for (int i = 0; log_path && i < p->log_path_len; i++)
        json_array_append_new(log_path, hash_json(&p->log_path[i]));
    const pgcl_checkpoint *cp = &p->checkpoint;
    json_t *checkpoint = p->fleet ? pgcl_fleet_checkpoint_to_json(p->fleet)
                         : p->has_checkpoint
                             ? json_pack("{s:s, s:i, s:I, s:s, s:s, s:s, s:s, s:s}", "format", PGCL_CHECKPOINT_FORMAT,
                                         "version", cp->version, "head_seq", (json_int_t)cp->head_seq, "head_hash",
                                         cp->head_hash, "log_root", cp->log_root, "created_at", cp->created_at,
                                         "public_key", cp->public_key, "signature", cp->signature)
                             : json_null();
    json_t *out =
        json_pack("{s:s, s:s, s:i, s:s, s:o, s:I, s:I, s:o, s:o, s:{s:I, s:s, s:s}, s:{s:I, s:I, s:o, s:o, s:o}}",
                  "format", "chain-v2", "decision_id", decision_id, "encoding", 2, "leaf_data", b64, "leaf_hash", hash_json(&p->leaf_hash),
                  "leaf_index", (json_int_t)p->leaf_index, "tree_size", (json_int_t)p->tree_size, "path", path, "root",
                  hash_json(&p->root), "chain_entry", "seq", (json_int_t)p->entry_seq, "prev_hash", p->prev_hash,
                  "hash", p->entry_hash, "log", "leaf_index", (json_int_t)p->log_index, "tree_size",
                  (json_int_t)p->log_size, "path", log_path, "root", hash_json(&p->log_root), "checkpoint", checkpoint);
    free(b64);
    /* the PostgreSQL store: the writer whose chain and log the entry is in */
    if (out && p->writer_id[0]) json_object_set_new(out, "writer_id", json_string(p->writer_id));
    return out;
}

json_t *pgcld_chain_writers_json(const pgcl_chain_report *rep) {
    json_t *writers = json_array();
    for (int i = 0; writers && i < rep->n_writers; i++) {
        const pgcl_chain_writer_head *h = &rep->writers[i];
        json_array_append_new(writers, json_pack("{s:s, s:I, s:s, s:o, s:b}", "writer_id", h->writer_id, "head_seq",
                                                 (json_int_t)h->head_seq, "head_hash", h->head_hash, "log_root",
                                                 h->log_root[0] ? json_string(h->log_root) : json_null(), "intact",
                                                 h->intact));
    }
    return writers;
}

json_t *pgcld_consistency_proof_json(const pgcl_log_consistency *c) {
    json_t *path = json_array();
    for (int i = 0; path && i < c->proof_len; i++)
        json_array_append_new(path, hash_json(&c->proof[i]));
    json_t *out = json_pack("{s:I, s:I, s:o, s:o, s:o}", "first", (json_int_t)c->first, "second",
                            (json_int_t)c->second, "first_root", hash_json(&c->first_root), "second_root",
                            hash_json(&c->second_root), "path", path);
    if (out && c->writer_id[0]) json_object_set_new(out, "writer_id", json_string(c->writer_id));
    return out;
}
