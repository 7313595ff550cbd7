/* Rows to records (core/audit/log/record_rows.c): each converter on realistic rows — decisions of
 * the real models in models/ (toxicity: binary, threshold; emotions: multiclass, label_map), with
 * the row's record fields set (as score.c fills them) and unset (read back from
 * probabilities_json) — against the record built by hand field by field (as record_tool.c's
 * typical_record does), then encoded, decoded and compared again; admin and key events, contests
 * and resolutions from the texts record_samples.h's samples hold; and a list of bad texts, each
 * refused with the field named. */
#include <stdint.h>
#include <stdlib.h>

#include "audit.h"
#include "model.h"
#include "record.h"
#include "record_rows.h"
#include "record_samples.h"
#include "sha256.h"
#include "test_util.h"

static const char DECISION_ID[] = "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091";
static const char CREATED_AT[] = "2026-01-02T03:04:05.123456Z";
static const char TRACE_ID[] = "4bf92f3577b34da6a3ce929d0e0e4736";

/* One decision of model m and the storage its row points into. */
typedef struct decision_case {
    const pgcl_model *m;
    float probs[64];
    float vector[4096];
    char *probs_json;
    char input_sha_hex[65];
    unsigned char input_sha[32], stored_digest[32];
    pgcl_decision verdict;
    int label_index;
    pgcl_decision_row row;
} decision_case;

/* A row as score.c writes it (record fields unset: derived), stored input f16 when half. */
static void make_case(decision_case *c, const pgcl_model *m, bool half, bool facts) {
    memset(c, 0, sizeof *c);
    c->m = m;
    for (int k = 0; k < m->K; k++)
        c->probs[k] = (float)(k + 1) / (float)(m->K * (m->K + 1) / 2); /* sums to 1, the last the largest */
    for (int k = 0; k < m->d; k++)
        c->vector[k] = (float)k / 7.0f - 3.0f;
    sample_fill(c->input_sha, 32, 0x40);
    sample_fill(c->stored_digest, 32, half ? 0x80 : 0x40);
    pgcl_sha256_to_hex(c->input_sha, c->input_sha_hex);
    c->probs_json = pgcl_model_probabilities_json(m, c->probs);
    c->verdict = pgcl_model_decide(m, c->probs, &c->label_index);
    bool threshold = m->policy.kind == PGCL_POLICY_THRESHOLD;
    c->row = (pgcl_decision_row){
        .decision_id = DECISION_ID, .request_id = "0190b6a2-8f3c-7000-8000-000000000001", .item_id = "comment-42",
        .model_name = m->name, .model_version = m->version, .model_sha256 = m->sha256,
        .label = m->labels[c->label_index], .label_index = c->label_index, .probabilities_json = c->probs_json,
        .has_toxicity = m->task == PGCL_TASK_BINARY, .toxicity = c->probs[1],
        .decision = pgcl_decision_str(c->verdict), .policy_json = m->policy_text, .has_thresholds = threshold,
        .t_review = threshold ? m->policy.t_review : 0, .t_block = threshold ? m->policy.t_block : 0,
        .vector = c->vector, .d = m->d, .input_sha256 = c->input_sha_hex, .latency_us = 1834,
        .input_dtype = half ? "f16" : NULL, .trace_id = facts ? TRACE_ID : NULL,
        .content_date = facts ? "2025-12-31" : NULL, .territorial_scope = facts ? "[\"DE\",\"FR\"]" : NULL,
        .content_language = facts ? "EN" : NULL};
}

/* The records built by hand from the model and the case's values. */
static void expected_records(const decision_case *c, bool half, bool facts, pgcl_record *decision,
                             pgcl_record *policy, pgcl_record_text *labels) {
    const pgcl_model *m = c->m;
    for (int k = 0; k < m->K; k++)
        labels[k] = (pgcl_record_text){m->labels[k], strlen(m->labels[k])};
    memset(policy, 0, sizeof *policy);
    policy->kind = PGCL_RECORD_POLICY;
    policy->policy = (pgcl_record_policy){
        .n_labels = (uint16_t)m->K, .labels = labels, .policy_json = {m->policy_text, strlen(m->policy_text)}};
    memset(decision, 0, sizeof *decision);
    decision->kind = PGCL_RECORD_DECISION;
    pgcl_record_decision *d = &decision->decision;
    bool ok = pgcl_record_uuid_parse(DECISION_ID, d->decision_id) &&
              pgcl_record_time_parse(CREATED_AT, &d->created_at_us) &&
              pgcl_record_hex_parse(m->sha256, d->model_sha256, 32) &&
              pgcl_record_policy_ref(&policy->policy, d->policy_ref, NULL, 0) == PGCL_OK;
    CHECK(ok, "the expected record's texts");
    d->has_trace_id = facts;
    if (facts) pgcl_record_hex_parse(TRACE_ID, d->trace_id, 16);
    memcpy(d->input_sha256, c->input_sha, 32);
    d->task = (pgcl_record_task)m->task;
    d->decision = (pgcl_record_verdict)c->verdict;
    if (m->policy.kind == PGCL_POLICY_THRESHOLD) {
        d->policy_kind = PGCL_RECORD_POLICY_THRESHOLD;
        d->policy_label = (uint16_t)m->policy.label_index;
        d->t_review = m->policy.t_review;
        d->t_block = m->policy.t_block;
    } else {
        d->policy_kind = PGCL_RECORD_POLICY_LABEL_MAP;
        d->min_confidence = m->policy.min_confidence;
    }
    d->stored_dtype = half ? PGCL_RECORD_INPUT_F16 : PGCL_RECORD_INPUT_NONE;
    if (half) memcpy(d->stored_digest, c->stored_digest, 32);
    d->label_index = (uint16_t)c->label_index;
    d->probabilities = (pgcl_record_f32s){.n = (uint32_t)m->K, .native = c->probs};
    d->vector = (pgcl_record_f32s){.n = (uint32_t)m->d, .native = c->vector};
    d->latency_us = 1834;
    strcpy(d->request_id, "0190b6a2-8f3c-7000-8000-000000000001");
    strcpy(d->item_id, "comment-42");
    snprintf(d->model_name, sizeof d->model_name, "%s", m->name);
    snprintf(d->model_version, sizeof d->model_version, "%s", m->version);
    if (facts) {
        strcpy(d->content_date, "2025-12-31");
        pgcl_record_territories_parse("[\"DE\",\"FR\"]", d);
        strcpy(d->content_language, "EN");
    }
}

/* r encodes, decodes, and the decoded record is r again. */
static void check_round_trip(const pgcl_record *r, const char *what) {
    static unsigned char buf[PGCL_RECORD_MAX_BYTES];
    size_t len = 0;
    char why[256] = "";
    pgcl_record back;
    pgcl_status st = pgcl_record_encode(r, buf, sizeof buf, &len, why, sizeof why);
    CHECK(st == PGCL_OK, "%s encodes: %s", what, why);
    st = pgcl_record_decode(buf, len, &back, why, sizeof why);
    CHECK(st == PGCL_OK && pgcl_record_equal(&back, r), "%s round trip: %s", what, why);
}

static void check_decision(const pgcl_model *m, bool half, bool facts, bool record_fields, pgcl_decision_record_buf *buf) {
    decision_case *c = malloc(sizeof *c);
    make_case(c, m, half, facts);
    if (record_fields) { /* as score.c sets them */
        c->row.record_task = 1 + (int)m->task;
        c->row.labels = (const char *const *)m->labels;
        c->row.probabilities = c->probs;
        c->row.n_labels = m->K;
    }
    int64_t at;
    pgcl_record_time_parse(CREATED_AT, &at);
    char why[256] = "";
    pgcl_status st = pgcl_record_of_decision_row(&c->row, at, half ? c->stored_digest : NULL, buf, why, sizeof why);
    CHECK(st == PGCL_OK, "%s (half %d, facts %d, record fields %d): %s", m->name, half, facts, record_fields, why);
    pgcl_record decision, policy;
    pgcl_record_text labels[64];
    expected_records(c, half, facts, &decision, &policy, labels);
    CHECK(pgcl_record_equal(&buf->decision, &decision), "%s: the decision's record is the one built by hand", m->name);
    CHECK(pgcl_record_equal(&buf->policy, &policy), "%s: the policy's record is the one built by hand", m->name);
    check_round_trip(&buf->decision, "decision");
    check_round_trip(&buf->policy, "policy");
    free(c->probs_json);
    free(c);
}

/* A row with one text made bad: refused, why naming field. */
typedef void (*row_mutation)(pgcl_decision_row *row, unsigned char **digest);

static void bad_decision_id(pgcl_decision_row *r, unsigned char **g) { r->decision_id = "0190B6A2-8F3C-7A11-9B2E-4C5D6E7F8091"; }
static void bad_model_sha(pgcl_decision_row *r, unsigned char **g) { r->model_sha256 = "abc"; }
static void bad_input_sha(pgcl_decision_row *r, unsigned char **g) { r->input_sha256 = NULL; }
static void bad_probs(pgcl_decision_row *r, unsigned char **g) { r->probabilities_json = "[0.5,0.5]"; }
static void bad_probs_value(pgcl_decision_row *r, unsigned char **g) { r->probabilities_json = "{\"non_toxic\":\"x\",\"toxic\":1}"; }
static void bad_kind(pgcl_decision_row *r, unsigned char **g) { r->policy_json = "{\"kind\":\"vote\"}"; }
static void bad_policy_label(pgcl_decision_row *r, unsigned char **g) {
    r->policy_json = "{\"kind\":\"threshold\",\"label\":\"spam\",\"t_block\":0.9,\"t_review\":0.5}";
}
static void bad_thresholds(pgcl_decision_row *r, unsigned char **g) { r->t_review += 0.01; }
static void bad_verdict(pgcl_decision_row *r, unsigned char **g) { r->decision = "maybe"; }
static void bad_dtype(pgcl_decision_row *r, unsigned char **g) { r->input_dtype = "bf16"; }
static void bad_digest(pgcl_decision_row *r, unsigned char **g) { *g = NULL; }
static void bad_trace(pgcl_decision_row *r, unsigned char **g) { r->trace_id = "00"; }
static void bad_date(pgcl_decision_row *r, unsigned char **g) { r->content_date = "2026-02-30"; }
static void bad_scope(pgcl_decision_row *r, unsigned char **g) { r->territorial_scope = "[\"de\"]"; }
static void bad_language(pgcl_decision_row *r, unsigned char **g) { r->content_language = "ENG"; }
static void bad_request_id(pgcl_decision_row *r, unsigned char **g) { r->request_id = "a\"b"; }
static void bad_item_id(pgcl_decision_row *r, unsigned char **g) { r->item_id = ""; }
static void bad_label(pgcl_decision_row *r, unsigned char **g) { r->label = "spam"; }
static void bad_label_index(pgcl_decision_row *r, unsigned char **g) { r->label_index = 2; }
static void bad_task(pgcl_decision_row *r, unsigned char **g) { r->record_task = 7; }
static void bad_vector(pgcl_decision_row *r, unsigned char **g) { r->d = 0; }
static void bad_latency(pgcl_decision_row *r, unsigned char **g) { r->latency_us = -5; }

static void test_bad_decisions(const pgcl_model *m, pgcl_decision_record_buf *buf) {
    static const struct {
        row_mutation mutate;
        const char *field;
    } cases[] = {
        {bad_decision_id, "decision_id"}, {bad_model_sha, "model_sha256"}, {bad_input_sha, "input_sha256"},
        {bad_probs, "probabilities_json"}, {bad_probs_value, "probabilities_json"}, {bad_kind, "policy_json.kind"},
        {bad_policy_label, "policy_json.label"}, {bad_thresholds, "t_review"}, {bad_verdict, "decision"},
        {bad_dtype, "input_dtype"}, {bad_digest, "input_digest"}, {bad_trace, "trace_id"},
        {bad_date, "content_date"}, {bad_scope, "territorial_scope"}, {bad_language, "content_language"},
        {bad_request_id, "request_id"}, {bad_item_id, "item_id"}, {bad_label, "label"},
        {bad_label_index, "label_index"}, {bad_task, "record_task"}, {bad_vector, "vector"},
        {bad_latency, "latency"},
    };
    decision_case *c = malloc(sizeof *c);
    make_case(c, m, true, true);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgcl_decision_row row = c->row;
        unsigned char *digest = c->stored_digest;
        cases[i].mutate(&row, &digest);
        char why[256] = "";
        pgcl_status st = pgcl_record_of_decision_row(&row, 1, digest, buf, why, sizeof why);
        CHECK(st == PGCL_ERR_INVALID && strstr(why, cases[i].field) != NULL, "bad %s refused: %s (%s)", cases[i].field,
              pgcl_status_str(st), why);
    }
    free(c->probs_json);
    free(c);
}

/* ---- the policy cache against the naive oracle ---- */

/* Rows of alternating policies (toxicity's, emotions', toxicity's with other thresholds, and a
 * policy_json of the same bytes at another address), with and without the row's record fields:
 * the cached buf gives exactly the records an uncached buf gives, row by row, and hits its cache
 * once each distinct (policy bytes, labels) was seen. Then a row whose thresholds differ from its
 * cached policy's is refused all the same. */
static void test_policy_cache(const pgcl_model *toxicity, const pgcl_model *emotions) {
    pgcl_decision_record_buf *cached = pgcl_decision_record_buf_create();
    pgcl_decision_record_buf *oracle = pgcl_decision_record_buf_create();
    CHECK(cached && oracle, "bufs");
    oracle->use_policy_cache = false;
    decision_case *cases = malloc(2 * sizeof *cases);
    make_case(&cases[0], toxicity, true, true);
    make_case(&cases[1], emotions, false, false);
    static const char OTHER[] = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.9,\"t_review\":0.5}";
    char *copy = strdup(toxicity->policy_text); /* the same bytes elsewhere: a hit, by bytes */
    int64_t at;
    pgcl_record_time_parse(CREATED_AT, &at);
    for (int i = 0; i < 40; i++) {
        const int variant = i % 4;
        decision_case *c = &cases[variant == 1 ? 1 : 0];
        pgcl_decision_row row = c->row;
        if (variant == 2) {
            row.policy_json = OTHER;
            row.t_review = 0.5;
            row.t_block = 0.9;
        }
        if (variant == 3) row.policy_json = copy;
        if (i % 8 >= 4) { /* the row's record fields, as score.c sets them */
            row.record_task = 1 + (int)c->m->task;
            row.labels = (const char *const *)c->m->labels;
            row.probabilities = c->probs;
            row.n_labels = c->m->K;
        }
        const unsigned char *digest = variant == 1 ? NULL : c->stored_digest;
        char why_a[256] = "", why_b[256] = "";
        pgcl_status a = pgcl_record_of_decision_row(&row, at, digest, cached, why_a, sizeof why_a);
        pgcl_status b = pgcl_record_of_decision_row(&row, at, digest, oracle, why_b, sizeof why_b);
        CHECK(a == PGCL_OK && b == PGCL_OK, "row %d: cached %s (%s), uncached %s (%s)", i, pgcl_status_str(a), why_a,
              pgcl_status_str(b), why_b);
        CHECK(pgcl_record_equal(&cached->decision, &oracle->decision), "row %d: the cached decision is the oracle's",
              i);
        CHECK(pgcl_record_equal(&cached->policy, &oracle->policy), "row %d: the cached policy is the oracle's", i);
        CHECK(memcmp(cached->decision.decision.policy_ref, oracle->decision.decision.policy_ref, 32) == 0,
              "row %d: policy_ref", i);
    }
    /* distinct keys: toxicity's policy with labels from the row and from the JSON are the same
     * bytes, so 3 policies (toxicity, emotions, OTHER) */
    CHECK(cached->policy_cache_misses == 3 && cached->policy_cache_hits == 37, "cache: %llu misses, %llu hits",
          (unsigned long long)cached->policy_cache_misses, (unsigned long long)cached->policy_cache_hits);
    CHECK(oracle->policy_cache_misses == 0 && oracle->policy_cache_hits == 0, "the oracle keeps no cache");
    pgcl_decision_row row = cases[0].row;
    row.t_block += 0.01; /* its policy is cached: the row's thresholds are still checked */
    char why[256] = "";
    pgcl_status st = pgcl_record_of_decision_row(&row, at, cases[0].stored_digest, cached, why, sizeof why);
    CHECK(st == PGCL_ERR_INVALID && strstr(why, "t_block"), "a cached policy, other thresholds: %s", why);
    /* a policy of other labels with the same JSON bytes: not the cached entry */
    row = cases[0].row;
    row.probabilities_json = "{\"benign\":0.5,\"toxic\":0.5}";
    row.label = row.label_index == 0 ? "benign" : "toxic";
    st = pgcl_record_of_decision_row(&row, at, cases[0].stored_digest, cached, why, sizeof why);
    char why2[256] = "";
    pgcl_status st2 = pgcl_record_of_decision_row(&row, at, cases[0].stored_digest, oracle, why2, sizeof why2);
    CHECK(st == PGCL_OK && st2 == PGCL_OK && pgcl_record_equal(&cached->policy, &oracle->policy) &&
              memcmp(cached->decision.decision.policy_ref, oracle->decision.decision.policy_ref, 32) == 0 &&
              cached->policy_cache_misses == 4,
          "other labels, same policy bytes: a miss, the oracle's records (%s; %s; %llu misses)", why, why2,
          (unsigned long long)cached->policy_cache_misses);
    /* more distinct policies than slots: every one converted right */
    char json[PGCL_POLICY_CACHE_SLOTS * 2][128];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < PGCL_POLICY_CACHE_SLOTS * 2; i++) {
            snprintf(json[i], sizeof json[i],
                     "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.9,\"t_review\":0.%02d}", 10 + i);
            row = cases[0].row;
            row.policy_json = json[i];
            row.t_review = (10 + i) / 100.0;
            row.t_block = 0.9;
            pgcl_status x = pgcl_record_of_decision_row(&row, at, cases[0].stored_digest, cached, why, sizeof why);
            pgcl_status y = pgcl_record_of_decision_row(&row, at, cases[0].stored_digest, oracle, why, sizeof why);
            CHECK(x == PGCL_OK && y == PGCL_OK && pgcl_record_equal(&cached->decision, &oracle->decision) &&
                      pgcl_record_equal(&cached->policy, &oracle->policy),
                  "policy %d of %d (round %d): the oracle's records", i, PGCL_POLICY_CACHE_SLOTS * 2, round);
        }
    free(copy);
    free(cases[0].probs_json);
    free(cases[1].probs_json);
    free(cases);
    pgcl_decision_record_buf_destroy(cached);
    pgcl_decision_record_buf_destroy(oracle);
}

/* ---- the other events: the samples' texts give the samples ---- */

static void check_event(pgcl_status st, const pgcl_record *got, int sample, const char *why) {
    pgcl_record want;
    CHECK(sample_record(sample, &want), "sample %s", SAMPLE_NAMES[sample]);
    CHECK(st == PGCL_OK && pgcl_record_equal(got, &want), "%s from its row: %s", SAMPLE_NAMES[sample], why);
    if (st == PGCL_OK) check_round_trip(got, SAMPLE_NAMES[sample]);
}

static void test_events(void) {
    pgcl_record r;
    char why[256] = "";
    pgcl_status st = pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-02T03:00:00.000001Z",
                                                "admin (pgcld_1a2b3c4d)", "model.activate", "toxicity/2",
                                                SAMPLE_DETAILS, &r, why, sizeof why);
    check_event(st, &r, SAMPLE_ADMIN_EVENT, why);
    st = pgcl_record_of_admin_event("0190b6a2-8f3c-7c33-b000-000000000004", "2026-01-01T00:00:00.000000Z", "cli:root",
                                    "key.create", "pgcld_0badc0de", "{\"name\":\"alice\",\"role\":\"reviewer\"}", &r,
                                    why, sizeof why);
    check_event(st, &r, SAMPLE_KEY_EVENT, why);
    st = pgcl_record_of_admin_event("0190b6a2-8f3c-7c33-b000-000000000004", "2026-01-01T00:00:00.000000Z", "cli:root",
                                    "key.revoke", "pgcld_0badc0de", "{\"name\":\"alice\",\"role\":\"admin\"}", &r, why,
                                    sizeof why);
    CHECK(st == PGCL_OK && r.kind == PGCL_RECORD_KEY_EVENT && r.key.action == PGCL_RECORD_KEY_REVOKE &&
              r.key.role == PGCL_RECORD_ROLE_ADMIN,
          "key.revoke: %s", why);
    st = pgcl_record_of_contest("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                "2026-01-03T12:00:00.500000Z", "pgcld_1a2b3c4d", "alice (pgcld_1a2b3c4d)",
                                SAMPLE_REASON, &r, why, sizeof why);
    check_event(st, &r, SAMPLE_CONTEST, why);
    st = pgcl_record_of_resolution("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                   "2026-01-04T08:30:00.000000Z", "overturned", "pgcld_0badc0de",
                                   "bob (pgcld_0badc0de)", "non_toxic", SAMPLE_NOTE, &r, why, sizeof why);
    check_event(st, &r, SAMPLE_RESOLUTION, why);
    /* keys off: no key ids; upheld: no corrected label */
    st = pgcl_record_of_resolution("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                   "2026-01-04T08:30:00.000000Z", "upheld", NULL, "anonymous", NULL, SAMPLE_NOTE, &r,
                                   why, sizeof why);
    CHECK(st == PGCL_OK && r.resolution.outcome == PGCL_RECORD_UPHELD && r.resolution.resolver_key_id[0] == 0,
          "an upheld resolution without keys: %s", why);
    st = pgcl_record_of_contest("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                "2026-01-03T12:00:00.500000Z", NULL, "anonymous", SAMPLE_REASON, &r, why, sizeof why);
    CHECK(st == PGCL_OK && r.contest.filer_key_id[0] == 0, "a contest without keys: %s", why);

    /* refusals, each naming its field */
    struct {
        pgcl_status st;
        const char *field;
    } bad[12];
    int n = 0;
#define BAD(call, f) (bad[n].st = (call), bad[n].field = (f), why[0] = 0, n++)
    char whys[12][256];
#define WHY whys[n], (int)sizeof whys[n]
    BAD(pgcl_record_of_admin_event("x", "2026-01-01T00:00:00.000000Z", "a", "model.activate", "t", "{}", &r, WHY),
        "event_id");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01 00:00:00", "a",
                                   "model.activate", "t", "{}", &r, WHY),
        "created_at");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01T00:00:00.000000Z", "a",
                                   "Model Activate", "t", "{}", &r, WHY),
        "action");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01T00:00:00.000000Z", "a",
                                   "model.activate", "t", "[]", &r, WHY),
        "details");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01T00:00:00.000000Z", "a",
                                   "key.rotate", "pgcld_0badc0de", "{\"name\":\"a\",\"role\":\"admin\"}", &r, WHY),
        "action");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01T00:00:00.000000Z", "a",
                                   "key.create", "pgcld_0badc0de", "{\"name\":\"a\",\"role\":\"root\"}", &r, WHY),
        "details_json.role");
    BAD(pgcl_record_of_admin_event("0190b6a2-8f3c-7b22-8a00-000000000002", "2026-01-01T00:00:00.000000Z", "a",
                                   "key.create", "key-1", "{\"name\":\"a\",\"role\":\"admin\"}", &r, WHY),
        "key_id");
    BAD(pgcl_record_of_contest("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                               "2026-01-03T12:00:00.500000Z", NULL, "anonymous", NULL, &r, WHY),
        "reason");
    BAD(pgcl_record_of_contest("0190b6a2-8f3c-7d44-8000-000000000005", "nope", "2026-01-03T12:00:00.500000Z", NULL,
                               "anonymous", "r", &r, WHY),
        "decision_id");
    BAD(pgcl_record_of_resolution("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                  "2026-01-04T08:30:00.000000Z", "maybe", NULL, "a", NULL, "n", &r, WHY),
        "outcome");
    BAD(pgcl_record_of_resolution("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                  "2026-01-04T08:30:00.000000Z", "upheld", NULL, "a", "toxic", "n", &r, WHY),
        "corrected_label");
    BAD(pgcl_record_of_resolution("0190b6a2-8f3c-7d44-8000-000000000005", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091",
                                  "2026-13-04T08:30:00.000000Z", "upheld", NULL, "a", NULL, "n", &r, WHY),
        "resolved_at");
#undef BAD
#undef WHY
    for (int i = 0; i < n; i++)
        CHECK(bad[i].st == PGCL_ERR_INVALID && strstr(whys[i], bad[i].field) != NULL, "bad %s refused: %s (%s)",
              bad[i].field, pgcl_status_str(bad[i].st), whys[i]);
}

int main(void) {
    pgcl_model *toxicity = NULL, *emotions = NULL;
    char err[512] = "";
    if (pgcl_model_load(source_path("models/toxicity/1"), "toxicity", "1", &toxicity, err, sizeof err) != PGCL_OK ||
        pgcl_model_load(source_path("models/emotions/1"), "emotions", "1", &emotions, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "test_record_rows: models: %s\n", err);
        return 1;
    }
    CHECK(toxicity->task == PGCL_TASK_BINARY && toxicity->policy.kind == PGCL_POLICY_THRESHOLD &&
              emotions->task == PGCL_TASK_MULTICLASS && emotions->policy.kind == PGCL_POLICY_LABEL_MAP &&
              emotions->K <= 64,
          "the models are a binary threshold one and a multiclass label_map one");
    pgcl_decision_record_buf *buf = pgcl_decision_record_buf_create();
    for (int mask = 0; mask < 8; mask++) {
        check_decision(toxicity, mask & 1, mask & 2, mask & 4, buf);
        check_decision(emotions, mask & 1, mask & 2, mask & 4, buf);
    }
    test_bad_decisions(toxicity, buf);
    test_policy_cache(toxicity, emotions);
    test_events();
    pgcl_decision_record_buf_destroy(buf);
    pgcl_model_release(toxicity);
    pgcl_model_release(emotions);
    return test_finish("test_record_rows");
}
