/* The known-answer records of the log (one of each kind, and a second decision that takes the
 * other branches of its layout), shared by tests/core/test_record.c (which holds their expected
 * hex) and tests/core/record_tool.c (which prints them for
 * tests/integration/test_record_known_answers.py, whose encoder builds the same bytes from
 * docs/log-record.md). The values here are written out again in that Python file: change both. */
#ifndef PGCL_TEST_RECORD_SAMPLES_H
#define PGCL_TEST_RECORD_SAMPLES_H

#include <string.h>

#include "record.h"

enum {
    SAMPLE_DECISION,
    SAMPLE_DECISION_LABEL_MAP,
    SAMPLE_ADMIN_EVENT,
    SAMPLE_KEY_EVENT,
    SAMPLE_CONTEST,
    SAMPLE_RESOLUTION,
    SAMPLE_POLICY,
    SAMPLE_LEGACY_HEAD,
    SAMPLES
};

static const char *const SAMPLE_NAMES[SAMPLES] = {"decision",   "decision_label_map", "admin_event", "key_event",
                                                  "contest",    "resolution",         "policy",      "legacy_head"};

static const pgcl_record_text SAMPLE_LABELS[2] = {{"non_toxic", 9}, {"toxic", 5}};
static const char SAMPLE_POLICY_JSON[] = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.348393,"
                                         "\"t_review\":0.054411}";
static const float SAMPLE_PROBS[2] = {0.875f, 0.125f};
static const float SAMPLE_VECTOR[4] = {0.25f, -1.5f, 3.0f, 0.0f};
static const float SAMPLE_PROBS3[3] = {0.5f, 0.25f, 0.25f};
static const float SAMPLE_VECTOR2[2] = {1.0f, -0.0f};
static const char SAMPLE_DETAILS[] = "{\"model\":\"toxicity\",\"previous_version\":\"1\",\"version\":\"2\"}";
static const char SAMPLE_REASON[] = "not toxic: a quotation";
static const char SAMPLE_NOTE[] = "a quotation; allowed";

/* n bytes first, first + 1, ... */
static inline void sample_fill(uint8_t *p, size_t n, unsigned first) {
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(first + i);
}

static inline pgcl_record sample_policy(void) {
    pgcl_record r = {.kind = PGCL_RECORD_POLICY};
    r.policy.n_labels = 2;
    r.policy.labels = SAMPLE_LABELS;
    r.policy.policy_json = (pgcl_record_text){SAMPLE_POLICY_JSON, sizeof SAMPLE_POLICY_JSON - 1};
    return r;
}

/* Sample `which` into *r; false when a helper refused a value (a broken sample). */
static inline bool sample_record(int which, pgcl_record *r) {
    bool ok = true;
    memset(r, 0, sizeof *r);
    switch (which) {
    case SAMPLE_DECISION: {
        pgcl_record_decision *d = &r->decision;
        r->kind = PGCL_RECORD_DECISION;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091", d->decision_id);
        ok = ok && pgcl_record_time_parse("2026-01-02T03:04:05.123456Z", &d->created_at_us);
        d->has_trace_id = true;
        ok = ok && pgcl_record_hex_parse("4bf92f3577b34da6a3ce929d0e0e4736", d->trace_id, 16);
        sample_fill(d->model_sha256, 32, 0x10);
        pgcl_record policy = sample_policy();
        ok = ok && pgcl_record_policy_ref(&policy.policy, d->policy_ref, NULL, 0) == PGCL_OK;
        sample_fill(d->input_sha256, 32, 0x40);
        d->task = PGCL_RECORD_TASK_BINARY;
        d->decision = PGCL_RECORD_REVIEW;
        d->policy_kind = PGCL_RECORD_POLICY_THRESHOLD;
        d->stored_dtype = PGCL_RECORD_INPUT_F16;
        d->label_index = 0;
        d->policy_label = 1;
        d->t_review = 0.054411;
        d->t_block = 0.348393;
        d->probabilities = (pgcl_record_f32s){.n = 2, .native = SAMPLE_PROBS};
        d->vector = (pgcl_record_f32s){.n = 4, .native = SAMPLE_VECTOR};
        d->latency_us = 1234;
        strcpy(d->request_id, "0190b6a2-8f3c-7000-8000-000000000001");
        strcpy(d->item_id, "item-42");
        strcpy(d->model_name, "toxicity");
        strcpy(d->model_version, "1");
        sample_fill(d->stored_digest, 32, 0x80);
        strcpy(d->content_date, "2025-12-31");
        ok = ok && pgcl_record_territories_parse("[\"DE\",\"FR\"]", d);
        strcpy(d->content_language, "EN");
        break;
    }
    case SAMPLE_DECISION_LABEL_MAP: {
        pgcl_record_decision *d = &r->decision;
        r->kind = PGCL_RECORD_DECISION;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7a12-a000-000000000003", d->decision_id);
        ok = ok && pgcl_record_time_parse("2026-01-02T03:04:05.999999Z", &d->created_at_us);
        sample_fill(d->model_sha256, 32, 0x20);
        sample_fill(d->policy_ref, 32, 0x30);
        sample_fill(d->input_sha256, 32, 0x50);
        d->task = PGCL_RECORD_TASK_MULTICLASS;
        d->decision = PGCL_RECORD_BLOCK;
        d->policy_kind = PGCL_RECORD_POLICY_LABEL_MAP;
        d->stored_dtype = PGCL_RECORD_INPUT_NONE;
        d->label_index = 0;
        d->min_confidence = 0.5;
        d->probabilities = (pgcl_record_f32s){.n = 3, .native = SAMPLE_PROBS3};
        d->vector = (pgcl_record_f32s){.n = 2, .native = SAMPLE_VECTOR2};
        d->latency_us = 300000;
        strcpy(d->request_id, "client-request-7");
        strcpy(d->item_id, "\xc3\xa9t\xc3\xa9"); /* "été" */
        strcpy(d->model_name, "emotions");
        strcpy(d->model_version, "2.1");
        break;
    }
    case SAMPLE_ADMIN_EVENT: {
        pgcl_record_admin_event *e = &r->admin;
        r->kind = PGCL_RECORD_ADMIN_EVENT;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7b22-8a00-000000000002", e->event_id);
        ok = ok && pgcl_record_time_parse("2026-01-02T03:00:00.000001Z", &e->created_at_us);
        strcpy(e->actor, "admin (pgcld_1a2b3c4d)");
        strcpy(e->action, "model.activate");
        strcpy(e->target, "toxicity/2");
        e->details = (pgcl_record_text){SAMPLE_DETAILS, sizeof SAMPLE_DETAILS - 1};
        break;
    }
    case SAMPLE_KEY_EVENT: {
        pgcl_record_key_event *e = &r->key;
        r->kind = PGCL_RECORD_KEY_EVENT;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7c33-b000-000000000004", e->event_id);
        ok = ok && pgcl_record_time_parse("2026-01-01T00:00:00.000000Z", &e->created_at_us);
        e->action = PGCL_RECORD_KEY_CREATE;
        e->role = PGCL_RECORD_ROLE_REVIEWER;
        strcpy(e->key_id, "pgcld_0badc0de");
        strcpy(e->name, "alice");
        strcpy(e->actor, "cli:root");
        break;
    }
    case SAMPLE_CONTEST: {
        pgcl_record_contest *c = &r->contest;
        r->kind = PGCL_RECORD_CONTEST;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7d44-8000-000000000005", c->contest_id);
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091", c->decision_id);
        ok = ok && pgcl_record_time_parse("2026-01-03T12:00:00.500000Z", &c->filed_at_us);
        strcpy(c->filer_key_id, "pgcld_1a2b3c4d");
        strcpy(c->filed_by, "alice (pgcld_1a2b3c4d)");
        c->reason = (pgcl_record_text){SAMPLE_REASON, sizeof SAMPLE_REASON - 1};
        break;
    }
    case SAMPLE_RESOLUTION: {
        pgcl_record_resolution *s = &r->resolution;
        r->kind = PGCL_RECORD_RESOLUTION;
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7d44-8000-000000000005", s->contest_id);
        ok = ok && pgcl_record_uuid_parse("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091", s->decision_id);
        ok = ok && pgcl_record_time_parse("2026-01-04T08:30:00.000000Z", &s->resolved_at_us);
        s->outcome = PGCL_RECORD_OVERTURNED;
        strcpy(s->resolver_key_id, "pgcld_0badc0de");
        strcpy(s->resolved_by, "bob (pgcld_0badc0de)");
        strcpy(s->corrected_label, "non_toxic");
        s->note = (pgcl_record_text){SAMPLE_NOTE, sizeof SAMPLE_NOTE - 1};
        break;
    }
    case SAMPLE_POLICY:
        *r = sample_policy();
        break;
    case SAMPLE_LEGACY_HEAD: {
        pgcl_record_legacy_head *h = &r->legacy;
        r->kind = PGCL_RECORD_LEGACY_HEAD;
        ok = ok && pgcl_record_time_parse("2026-02-01T00:00:00.000000Z", &h->created_at_us);
        h->head_seq = 1234;
        sample_fill(h->head_hash, 32, 0xc0);
        h->has_log_root = true;
        sample_fill(h->log_root, 32, 0x60);
        strcpy(h->writer_id, "replica-1");
        break;
    }
    default:
        ok = false;
    }
    return ok;
}

#endif
