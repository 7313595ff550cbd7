/* The field rules of the log's records (record.h; docs/log-record.md, "Field rules"): one function
 * per kind, run by the encoder before it writes and by the decoder on what it read, so that the
 * two accept exactly the same events. The limits are today's validation of each field, tied here
 * to the constants of the code that validates it where core/ can see them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fleet_checkpoint.h"
#include "ids.h"
#include "keys.h"
#include "model.h"
#include "record.h"
#include "record_internal.h"
#include "review.h"

_Static_assert(PGCL_RECORD_REQUEST_ID_MAX == PGCL_REQUEST_ID_MAX, "request ids: ids.h");
_Static_assert(PGCL_RECORD_REASON_MAX == PGCL_REASON_MAX, "reasons and notes: review.h");
_Static_assert(PGCL_RECORD_KEY_NAME_MAX == PGCL_KEY_NAME_MAX, "key names: keys.h");
_Static_assert(PGCL_RECORD_KEY_ID_LEN == PGCL_KEY_ID_LEN, "key ids: keys.h");
_Static_assert(PGCL_RECORD_LABEL_MAX == PGCL_MAX_LABEL_BYTES, "labels: model.h");
_Static_assert(PGCL_RECORD_WRITER_ID_MAX == PGCL_FLEET_WRITER_ID_MAX, "writer ids: fleet_checkpoint.h");
_Static_assert((int)PGCL_RECORD_TASK_BINARY == (int)PGCL_TASK_BINARY &&
                   (int)PGCL_RECORD_TASK_MULTICLASS == (int)PGCL_TASK_MULTICLASS &&
                   (int)PGCL_RECORD_TASK_ORDINAL == (int)PGCL_TASK_ORDINAL,
               "task values: model.h");
_Static_assert((int)PGCL_RECORD_ALLOW == (int)PGCL_DECISION_ALLOW && (int)PGCL_RECORD_REVIEW == (int)PGCL_DECISION_REVIEW &&
                   (int)PGCL_RECORD_BLOCK == (int)PGCL_DECISION_BLOCK,
               "decision values: model.h");
_Static_assert((int)PGCL_RECORD_POLICY_THRESHOLD == (int)PGCL_POLICY_THRESHOLD &&
                   (int)PGCL_RECORD_POLICY_LABEL_MAP == (int)PGCL_POLICY_LABEL_MAP,
               "policy kinds: model.h");
/* Not visible from core/: item ids are at most 256 bytes (server/wire/score_parse.c, MAX_ID_BYTES),
 * actors at most 256 (core/audit/keys.c ACTOR_MAX; HTTP actors are shorter, server.h). */

/* ---- character sets ---- */

bool pgcl_record_utf8_ok(const unsigned char *s, size_t n, bool controls_ok) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c == 0 || (!controls_ok && (c < 0x20 || c == 0x7f))) return false;
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false; /* a continuation byte first, an overlong two-byte lead, or past U+10FFFF */
        }
        if (n - i - 1 < k) return false;
        for (size_t j = 1; j <= k; j++) {
            unsigned b = s[i + j];
            if ((b & 0xc0) != 0x80) return false;
            cp = cp << 6 | (b & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false; /* overlong */
        if (cp >= 0xd800 && cp <= 0xdfff) return false;                                          /* surrogate */
        if (!controls_ok && cp <= 0x9f) return false;                                             /* C1 */
        i += k + 1;
    }
    return true;
}

/* Whether the NUL-terminated s (within max + 1 bytes) is 1..max bytes of class cls. */
static bool text_ok(const char *s, size_t max, pgcl_record_text_class cls) {
    size_t n = strnlen(s, max + 1);
    return n >= 1 && n <= max && pgcl_record_text_class_ok((const unsigned char *)s, n, cls);
}

bool pgcl_record_text_class_ok(const unsigned char *s, size_t n, pgcl_record_text_class cls) {
    switch (cls) {
    case PGCL_RECORD_TEXT_UTF8:
        return pgcl_record_utf8_ok(s, n, true);
    case PGCL_RECORD_TEXT_PLAIN:
        return pgcl_record_utf8_ok(s, n, false);
    case PGCL_RECORD_TEXT_REQUEST_ID:
        for (size_t i = 0; i < n; i++)
            if (s[i] < 0x21 || s[i] > 0x7e || s[i] == '"' || s[i] == '\'' || s[i] == '\\') return false;
        return true;
    case PGCL_RECORD_TEXT_MODEL_NAME:
    case PGCL_RECORD_TEXT_MODEL_VERSION:
        if (n > 0 && s[0] == '.') return false;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = s[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || (cls == PGCL_RECORD_TEXT_MODEL_VERSION && c == '.');
            if (!ok) return false;
        }
        return true;
    case PGCL_RECORD_TEXT_ACTION:
        if (n >= 4 && memcmp(s, "key.", 4) == 0) return false; /* a key event has its own kind */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = s[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
        }
        return true;
    }
    return false;
}

bool pgcl_record_key_id_ok(const char *s) {
    if (strnlen(s, PGCL_RECORD_KEY_ID_LEN + 1) != PGCL_RECORD_KEY_ID_LEN || memcmp(s, "pgcld_", 6) != 0) return false;
    for (int i = 6; i < PGCL_RECORD_KEY_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

bool pgcl_record_json_object_ok(pgcl_record_text t) {
    if (!t.p || t.len < 2 || t.len > PGCL_RECORD_JSON_MAX) return false;
    json_error_t error;
    json_t *v = json_loadb(t.p, t.len, JSON_REJECT_DUPLICATES, &error); /* refuses NUL, bad UTF-8, trailing text */
    bool ok = json_is_object(v);
    json_decref(v);
    return ok;
}

static bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int pgcl_record_days_in_month(int y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* "YYYY-MM-DD", a real date of years 0001..9999. */
static bool date_ok(const char *s) {
    if (strnlen(s, PGCL_RECORD_DATE_LEN + 1) != PGCL_RECORD_DATE_LEN || s[4] != '-' || s[7] != '-') return false;
    for (int i = 0; i < PGCL_RECORD_DATE_LEN; i++)
        if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9')) return false;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    return y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= pgcl_record_days_in_month(y, m);
}

static bool upper2(const char *s) {
    return s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] == 0;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

static bool uuid7_ok(const uint8_t id[PGCL_RECORD_UUID_BYTES]) {
    return id[6] >> 4 == 7 && (id[8] & 0xc0) == 0x80; /* version 7, variant 10 (RFC 9562) */
}

static bool time_ok(int64_t us) { return us >= 0 && us < PGCL_RECORD_TIME_END_US; }

static bool bits_zero(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b == 0;
}

static bool unit_ok(double v) { return v >= 0 && v <= 1; } /* false for NaN */

static bool f32s_form_ok(const pgcl_record_f32s *a) {
    return a->n == 0 || ((a->native != NULL) != (a->le != NULL));
}

/* ---- the kinds ---- */

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        pgcl_errorf(why, cap, __VA_ARGS__);                                                                            \
        return PGCL_ERR_INVALID;                                                                                       \
    } while (0)

static pgcl_status check_decision(const pgcl_record_decision *d, char *why, int cap) {
    if (!uuid7_ok(d->decision_id)) FAIL("decision_id: not a UUIDv7");
    if (!time_ok(d->created_at_us)) FAIL("created_at: out of range");
    if (d->has_trace_id == all_zero(d->trace_id, sizeof d->trace_id))
        FAIL("trace_id: %s", d->has_trace_id ? "all zero (no W3C trace id is)" : "set without its flag");
    if ((unsigned)d->task > PGCL_RECORD_TASK_ORDINAL) FAIL("task: out of range");
    if ((unsigned)d->decision > PGCL_RECORD_BLOCK) FAIL("decision: out of range");
    if ((unsigned)d->stored_dtype > PGCL_RECORD_INPUT_F32) FAIL("stored_input: out of range");
    const pgcl_record_f32s *p = &d->probabilities, *v = &d->vector;
    if (!f32s_form_ok(p) || !f32s_form_ok(v)) FAIL("probabilities or vector: neither or both forms given");
    if (p->n < 2 || p->n > PGCL_RECORD_CLASSES_MAX) FAIL("probabilities: %u classes, not 2..1024", p->n);
    if (d->task == PGCL_RECORD_TASK_BINARY && p->n != 2) FAIL("probabilities: a binary task has 2 classes");
    for (uint32_t k = 0; k < p->n; k++)
        if (!unit_ok(pgcl_record_f32_at(p, k))) FAIL("probabilities[%u]: not within 0..1", k);
    if (d->label_index >= p->n) FAIL("label_index: %u is not below K = %u", d->label_index, p->n);
    if (d->policy_kind == PGCL_RECORD_POLICY_THRESHOLD) {
        if (d->policy_label >= p->n) FAIL("policy_label: %u is not below K = %u", d->policy_label, p->n);
        if (!unit_ok(d->t_review) || !unit_ok(d->t_block) || d->t_review > d->t_block)
            FAIL("t_review, t_block: not 0 <= t_review <= t_block <= 1");
        if (!bits_zero(d->min_confidence)) FAIL("min_confidence: set for a threshold policy");
    } else if (d->policy_kind == PGCL_RECORD_POLICY_LABEL_MAP) {
        if (d->policy_label != 0 || !bits_zero(d->t_review) || !bits_zero(d->t_block))
            FAIL("policy_label, t_review, t_block: set for a label_map policy");
        if (!unit_ok(d->min_confidence)) FAIL("min_confidence: not within 0..1");
    } else {
        FAIL("policy_kind: out of range");
    }
    if (v->n < 1 || v->n > PGCL_RECORD_DIMS_MAX) FAIL("vector: %u values, not 1..4096", v->n);
    for (uint32_t k = 0; k < v->n; k++)
        if (!isfinite(pgcl_record_f32_at(v, k))) FAIL("vector[%u]: not finite", k);
    if (d->latency_us < 0) FAIL("latency_us: negative");
    if (!text_ok(d->request_id, PGCL_RECORD_REQUEST_ID_MAX, PGCL_RECORD_TEXT_REQUEST_ID))
        FAIL("request_id: not 1..128 visible ASCII characters other than \" ' \\");
    if (!text_ok(d->item_id, PGCL_RECORD_ITEM_ID_MAX, PGCL_RECORD_TEXT_UTF8))
        FAIL("item_id: not 1..256 bytes of UTF-8 without NUL");
    if (!text_ok(d->model_name, PGCL_RECORD_MODEL_NAME_MAX, PGCL_RECORD_TEXT_MODEL_NAME))
        FAIL("model_name: not 1..64 of [A-Za-z0-9_-]");
    if (!text_ok(d->model_version, PGCL_RECORD_MODEL_NAME_MAX, PGCL_RECORD_TEXT_MODEL_VERSION))
        FAIL("model_version: not 1..64 of [A-Za-z0-9_.-], not starting with '.'");
    if (d->stored_dtype == PGCL_RECORD_INPUT_NONE && !all_zero(d->stored_digest, sizeof d->stored_digest))
        FAIL("stored_digest: set without a stored input");
    if (d->stored_dtype == PGCL_RECORD_INPUT_F32 && memcmp(d->stored_digest, d->input_sha256, 32) != 0)
        FAIL("stored_digest: a float32 input's digest is input_sha256");
    if (d->content_date[0] && !date_ok(d->content_date)) FAIL("content_date: not a date YYYY-MM-DD");
    if (d->n_territories > PGCL_RECORD_TERRITORIES_MAX) FAIL("territorial_scope: more than 30 countries");
    for (int i = 0; i < d->n_territories; i++) {
        if (!upper2(d->territories[i])) FAIL("territorial_scope[%d]: not two letters A-Z", i);
        for (int j = 0; j < i; j++)
            if (memcmp(d->territories[i], d->territories[j], 2) == 0) FAIL("territorial_scope[%d]: a repeat", i);
    }
    if (d->content_language[0] && !upper2(d->content_language)) FAIL("content_language: not two letters A-Z");
    return PGCL_OK;
}

static pgcl_status check_admin(const pgcl_record_admin_event *e, char *why, int cap) {
    if (!uuid7_ok(e->event_id)) FAIL("event_id: not a UUIDv7");
    if (!time_ok(e->created_at_us)) FAIL("created_at: out of range");
    if (!text_ok(e->actor, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("actor: not 1..256 bytes of UTF-8 without control characters");
    if (!text_ok(e->action, PGCL_RECORD_ACTION_MAX, PGCL_RECORD_TEXT_ACTION))
        FAIL("action: not 1..64 of [a-z0-9_.] (key.* actions are key events)");
    if (!text_ok(e->target, PGCL_RECORD_TARGET_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("target: not 1..256 bytes of UTF-8 without control characters");
    if (!pgcl_record_json_object_ok(e->details)) FAIL("details: not a JSON object of 2..65536 bytes");
    return PGCL_OK;
}

static pgcl_status check_key(const pgcl_record_key_event *e, char *why, int cap) {
    if (!uuid7_ok(e->event_id)) FAIL("event_id: not a UUIDv7");
    if (!time_ok(e->created_at_us)) FAIL("created_at: out of range");
    if ((unsigned)e->action > PGCL_RECORD_KEY_REVOKE) FAIL("action: out of range");
    if ((unsigned)e->role > PGCL_RECORD_ROLE_ADMIN) FAIL("role: out of range");
    if (!pgcl_record_key_id_ok(e->key_id)) FAIL("key_id: not pgcld_ and 8 lowercase hex digits");
    if (!text_ok(e->name, PGCL_RECORD_KEY_NAME_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("name: not 1..128 bytes of UTF-8 without control characters");
    if (!text_ok(e->actor, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("actor: not 1..256 bytes of UTF-8 without control characters");
    return PGCL_OK;
}

static bool reason_ok(pgcl_record_text t) {
    return t.p && t.len >= 1 && t.len <= PGCL_RECORD_REASON_MAX &&
           pgcl_record_utf8_ok((const unsigned char *)t.p, t.len, true);
}

static pgcl_status check_contest(const pgcl_record_contest *c, char *why, int cap) {
    if (!uuid7_ok(c->contest_id)) FAIL("contest_id: not a UUIDv7");
    if (!uuid7_ok(c->decision_id)) FAIL("decision_id: not a UUIDv7");
    if (!time_ok(c->filed_at_us)) FAIL("filed_at: out of range");
    if (c->filer_key_id[0] && !pgcl_record_key_id_ok(c->filer_key_id)) FAIL("filer_key_id: not a key id");
    if (!text_ok(c->filed_by, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("filed_by: not 1..256 bytes of UTF-8 without control characters");
    if (!reason_ok(c->reason)) FAIL("reason: not 1..2000 bytes of UTF-8 without NUL");
    return PGCL_OK;
}

static pgcl_status check_resolution(const pgcl_record_resolution *r, char *why, int cap) {
    if (!uuid7_ok(r->contest_id)) FAIL("contest_id: not a UUIDv7");
    if (!uuid7_ok(r->decision_id)) FAIL("decision_id: not a UUIDv7");
    if (!time_ok(r->resolved_at_us)) FAIL("resolved_at: out of range");
    if ((unsigned)r->outcome > PGCL_RECORD_OVERTURNED) FAIL("outcome: out of range");
    if (r->resolver_key_id[0] && !pgcl_record_key_id_ok(r->resolver_key_id)) FAIL("resolver_key_id: not a key id");
    if (!text_ok(r->resolved_by, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("resolved_by: not 1..256 bytes of UTF-8 without control characters");
    if (r->corrected_label[0]) {
        if (!text_ok(r->corrected_label, PGCL_RECORD_LABEL_MAX, PGCL_RECORD_TEXT_UTF8))
            FAIL("corrected_label: not 1..128 bytes of UTF-8 without NUL");
        if (r->outcome != PGCL_RECORD_OVERTURNED) FAIL("corrected_label: only with the outcome overturned");
    }
    if (!reason_ok(r->note)) FAIL("note: not 1..2000 bytes of UTF-8 without NUL");
    return PGCL_OK;
}

static pgcl_status check_policy(const pgcl_record_policy *p, char *why, int cap) {
    if (p->n_labels < 2 || p->n_labels > PGCL_RECORD_CLASSES_MAX) FAIL("labels: %u, not 2..1024", p->n_labels);
    if ((p->labels != NULL) == (p->label_list != NULL)) FAIL("labels: neither or both forms given");
    pgcl_record_text seen[PGCL_RECORD_CLASSES_MAX]; /* 16 KiB: labels read once, in order */
    pgcl_record_label_iter it = pgcl_record_label_iter_start(p);
    for (uint16_t i = 0; i < p->n_labels; i++) {
        pgcl_record_text t = pgcl_record_label_iter_next(&it);
        if (!t.p || t.len < 1 || t.len > PGCL_RECORD_LABEL_MAX ||
            !pgcl_record_utf8_ok((const unsigned char *)t.p, t.len, true))
            FAIL("labels[%u]: not 1..128 bytes of UTF-8 without NUL", i);
        for (uint16_t j = 0; j < i; j++)
            if (seen[j].len == t.len && memcmp(seen[j].p, t.p, t.len) == 0) FAIL("labels[%u]: a repeat", i);
        seen[i] = t;
    }
    if (!pgcl_record_json_object_ok(p->policy_json)) FAIL("policy: not a JSON object of 2..65536 bytes");
    return PGCL_OK;
}

static pgcl_status check_legacy(const pgcl_record_legacy_head *h, char *why, int cap) {
    if (!time_ok(h->created_at_us)) FAIL("created_at: out of range");
    if (h->head_seq < 1) FAIL("head_seq: not >= 1");
    if (h->has_log_root == all_zero(h->log_root, sizeof h->log_root))
        FAIL("log_root: %s", h->has_log_root ? "all zero" : "set without its flag");
    if (h->writer_id[0] && !text_ok(h->writer_id, PGCL_RECORD_WRITER_ID_MAX, PGCL_RECORD_TEXT_PLAIN))
        FAIL("writer_id: not 0..128 bytes of UTF-8 without control characters");
    return PGCL_OK;
}

pgcl_status pgcl_record_check(const pgcl_record *r, char *why, int cap) {
    switch (r->kind) {
    case PGCL_RECORD_DECISION:
        return check_decision(&r->decision, why, cap);
    case PGCL_RECORD_ADMIN_EVENT:
        return check_admin(&r->admin, why, cap);
    case PGCL_RECORD_KEY_EVENT:
        return check_key(&r->key, why, cap);
    case PGCL_RECORD_CONTEST:
        return check_contest(&r->contest, why, cap);
    case PGCL_RECORD_RESOLUTION:
        return check_resolution(&r->resolution, why, cap);
    case PGCL_RECORD_POLICY:
        return check_policy(&r->policy, why, cap);
    case PGCL_RECORD_LEGACY_HEAD:
        return check_legacy(&r->legacy, why, cap);
    }
    FAIL("kind: %d is not a record kind", (int)r->kind);
}
