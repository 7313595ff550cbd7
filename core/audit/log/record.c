/* The log's records, bytes to struct and back (record.h). docs/log-record.md is the format's
 * reference: the offsets below are its tables, and tests/integration/test_record_known_answers.py
 * re-derives the bytes from the document with its own encoder.
 *
 * The encoder runs the field rules (record_check.c), measures the record by writing it to no
 * buffer, then writes it. The decoder reads each field where the layout puts it, refuses anything
 * the encoder cannot have written (a length past its maximum, a redundant varint byte, a text with
 * a NUL, a flag bit no field uses, a request id in text form that the UUID form must hold, bytes
 * after the last field), then runs the same field rules on what it read. */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merkle.h"
#include "record_internal.h"

/* ---- the layouts' fixed parts: byte offsets (docs/log-record.md) ---- */
enum {
    AT_VERSION = 0,
    AT_KIND = 1,
    /* decision */
    D_ID = 2,
    D_CREATED = 18,
    D_TRACE = 26,
    D_MODEL_SHA = 42,
    D_POLICY_REF = 74,
    D_INPUT_SHA = 106,
    D_FLAGS = 138,
    D_TASK = 139,
    D_DECISION = 140,
    D_POLICY_KIND = 141,
    D_STORED = 142,
    D_K = 143,
    D_LABEL = 145,
    D_DIMS = 147,
    D_FIXED = 149,
    /* admin event */
    A_ID = 2,
    A_CREATED = 18,
    A_FIXED = 26,
    /* key event */
    K_ID = 2,
    K_CREATED = 18,
    K_ACTION = 26,
    K_ROLE = 27,
    K_KEY = 28,
    K_FIXED = 32,
    /* contest */
    C_ID = 2,
    C_DECISION = 18,
    C_FILED = 34,
    C_FLAGS = 42,
    C_KEY = 43,
    C_FIXED = 47,
    /* resolution */
    R_CONTEST = 2,
    R_DECISION = 18,
    R_RESOLVED = 34,
    R_OUTCOME = 42,
    R_FLAGS = 43,
    R_KEY = 44,
    R_FIXED = 48,
    /* policy */
    P_LABELS = 2,
    P_FIXED = 4,
    /* legacy chain head */
    L_CREATED = 2,
    L_SEQ = 10,
    L_HASH = 18,
    L_FLAGS = 50,
    L_ROOT = 51,
    L_FIXED = 83,
};

/* flag bits */
enum {
    DF_TRACE = 0x01,
    DF_DATE = 0x02,
    DF_SCOPE = 0x04,
    DF_LANGUAGE = 0x08,
    DF_REQUEST_UUID = 0x10,
    DF_ALL = 0x1f,
    CF_KEY = 0x01,
    CF_ALL = 0x01,
    RF_KEY = 0x01,
    RF_LABEL = 0x02,
    RF_ALL = 0x03,
    LF_ROOT = 0x01,
    LF_ALL = 0x01,
};

const char *pgcl_record_kind_name(int kind) {
    static const char *const names[PGCL_RECORD_KINDS + 1] = {
        NULL, "decision", "admin_event", "key_event", "contest", "resolution", "policy", "legacy_head"};
    return kind >= 1 && kind <= PGCL_RECORD_KINDS ? names[kind] : "unknown";
}

/* The IEEE-754 bits of value i of a (i < a->n), whichever form a has. */
static uint32_t f32_bits_at(const pgcl_record_f32s *a, uint32_t i) {
    PGCL_ASSERT(i < a->n);
    uint32_t bits;
    if (a->native) {
        memcpy(&bits, &a->native[i], sizeof bits);
        return bits;
    }
    PGCL_ASSERT(a->le);
    const unsigned char *b = a->le + 4 * (size_t)i;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

float pgcl_record_f32_at(const pgcl_record_f32s *a, uint32_t i) {
    uint32_t bits = f32_bits_at(a, i);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

size_t pgcl_record_varint_put(uint64_t v, unsigned char out[10]) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

bool pgcl_record_varint_get(const unsigned char *data, size_t len, size_t *at, uint64_t max, uint64_t *v) {
    uint64_t x = 0;
    for (size_t i = 0; i < 10 && *at + i < len; i++) {
        unsigned char b = data[*at + i];
        if (i == 9 && b > 1) return false; /* past 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0) return false; /* a redundant last group: not the shortest form */
            if (x > max) return false;
            *at += i + 1;
            *v = x;
            return true;
        }
    }
    return false;
}

pgcl_record_label_iter pgcl_record_label_iter_start(const pgcl_record_policy *p) {
    return (pgcl_record_label_iter){.p = p, .i = 0, .at = 0};
}

pgcl_record_text pgcl_record_label_iter_next(pgcl_record_label_iter *it) {
    const pgcl_record_policy *p = it->p;
    pgcl_record_text none = {NULL, 0};
    if (it->i >= p->n_labels) return none;
    if (p->labels) return p->labels[it->i++];
    uint64_t n;
    if (!p->label_list || !pgcl_record_varint_get(p->label_list, p->label_list_len, &it->at, PGCL_RECORD_LABEL_MAX, &n) ||
        n > p->label_list_len - it->at)
        return none;
    pgcl_record_text t = {(const char *)p->label_list + it->at, (size_t)n};
    it->at += (size_t)n;
    it->i++;
    return t;
}

pgcl_record_text pgcl_record_policy_label(const pgcl_record_policy *p, uint16_t i) {
    PGCL_ASSERT(i < p->n_labels);
    pgcl_record_label_iter it = pgcl_record_label_iter_start(p);
    pgcl_record_text t = {NULL, 0};
    for (uint16_t k = 0; k <= i; k++)
        t = pgcl_record_label_iter_next(&it);
    PGCL_ASSERT(t.p); /* a checked policy has all its labels */
    return t;
}

/* ---- writing: to no buffer (p NULL: measuring) or to one of the measured size ---- */

typedef struct writer {
    unsigned char *p;
    size_t n, cap;
} writer;

static void put(writer *w, const void *src, size_t n) {
    if (w->p && n) {
        PGCL_ASSERT(w->n + n <= w->cap);
        memcpy(w->p + w->n, src, n);
    }
    w->n += n;
}

static void put_u8(writer *w, unsigned v) {
    unsigned char b = (unsigned char)v;
    put(w, &b, 1);
}

static void put_be(writer *w, uint64_t v, int bytes) {
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    put(w, b, (size_t)bytes);
}

static void put_f64le(writer *w, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(bits >> (8 * i));
    put(w, b, 8);
}

static void put_f32s(writer *w, const pgcl_record_f32s *a) {
    if (a->le) {
        put(w, a->le, 4 * (size_t)a->n);
        return;
    }
    for (uint32_t i = 0; i < a->n; i++) {
        uint32_t bits = f32_bits_at(a, i);
        unsigned char b[4] = {(unsigned char)bits, (unsigned char)(bits >> 8), (unsigned char)(bits >> 16),
                              (unsigned char)(bits >> 24)};
        put(w, b, 4);
    }
}

static void put_varint(writer *w, uint64_t v) {
    unsigned char b[10];
    put(w, b, pgcl_record_varint_put(v, b));
}

static void put_text(writer *w, const char *p, size_t n) {
    put_varint(w, n);
    put(w, p, n);
}

static void put_str(writer *w, const char *s) { put_text(w, s, strlen(s)); }

/* The 4 bytes of a key id's 8 hex digits (a checked "pgcld_xxxxxxxx"). */
static void put_key_id(writer *w, const char *key_id) {
    uint8_t b[4];
    bool parsed = pgcl_record_hex_parse(key_id + 6, b, 4);
    PGCL_ASSERT(parsed);
    put(w, b, 4);
}

static void write_decision(writer *w, const pgcl_record_decision *d) {
    uint8_t request_uuid[PGCL_RECORD_UUID_BYTES];
    bool request_is_uuid = pgcl_record_uuid_parse(d->request_id, request_uuid);
    unsigned flags = (d->has_trace_id ? DF_TRACE : 0) | (d->content_date[0] ? DF_DATE : 0) |
                     (d->n_territories ? DF_SCOPE : 0) | (d->content_language[0] ? DF_LANGUAGE : 0) |
                     (request_is_uuid ? DF_REQUEST_UUID : 0);
    put(w, d->decision_id, 16);
    put_be(w, (uint64_t)d->created_at_us, 8);
    put(w, d->trace_id, 16);
    put(w, d->model_sha256, 32);
    put(w, d->policy_ref, 32);
    put(w, d->input_sha256, 32);
    put_u8(w, flags);
    put_u8(w, d->task);
    put_u8(w, d->decision);
    put_u8(w, d->policy_kind);
    put_u8(w, d->stored_dtype);
    put_be(w, d->probabilities.n, 2);
    put_be(w, d->label_index, 2);
    put_be(w, d->vector.n, 2);
    PGCL_ASSERT(!w->p || w->n == D_FIXED);
    if (d->policy_kind == PGCL_RECORD_POLICY_THRESHOLD) {
        put_be(w, d->policy_label, 2);
        put_f64le(w, d->t_review);
        put_f64le(w, d->t_block);
    } else {
        put_f64le(w, d->min_confidence);
    }
    put_f32s(w, &d->probabilities);
    put_f32s(w, &d->vector);
    put_varint(w, (uint64_t)d->latency_us);
    if (request_is_uuid) put(w, request_uuid, 16);
    else put_str(w, d->request_id);
    put_str(w, d->item_id);
    put_str(w, d->model_name);
    put_str(w, d->model_version);
    if (d->stored_dtype == PGCL_RECORD_INPUT_F16) put(w, d->stored_digest, 32);
    if (flags & DF_DATE) {
        const char *s = d->content_date;
        int y = atoi(s), m = (s[5] - '0') * 10 + (s[6] - '0'), day = (s[8] - '0') * 10 + (s[9] - '0');
        put_be(w, (uint64_t)y, 2);
        put_u8(w, (unsigned)m);
        put_u8(w, (unsigned)day);
    }
    if (flags & DF_SCOPE) {
        put_u8(w, d->n_territories);
        for (int i = 0; i < d->n_territories; i++)
            put(w, d->territories[i], 2);
    }
    if (flags & DF_LANGUAGE) put(w, d->content_language, 2);
}

static void write_record(writer *w, const pgcl_record *r) {
    put_u8(w, PGCL_RECORD_VERSION);
    put_u8(w, r->kind);
    switch (r->kind) {
    case PGCL_RECORD_DECISION:
        write_decision(w, &r->decision);
        break;
    case PGCL_RECORD_ADMIN_EVENT: {
        const pgcl_record_admin_event *e = &r->admin;
        put(w, e->event_id, 16);
        put_be(w, (uint64_t)e->created_at_us, 8);
        put_str(w, e->actor);
        put_str(w, e->action);
        put_str(w, e->target);
        put_text(w, e->details.p, e->details.len);
        break;
    }
    case PGCL_RECORD_KEY_EVENT: {
        const pgcl_record_key_event *e = &r->key;
        put(w, e->event_id, 16);
        put_be(w, (uint64_t)e->created_at_us, 8);
        put_u8(w, e->action);
        put_u8(w, e->role);
        put_key_id(w, e->key_id);
        put_str(w, e->name);
        put_str(w, e->actor);
        break;
    }
    case PGCL_RECORD_CONTEST: {
        const pgcl_record_contest *c = &r->contest;
        put(w, c->contest_id, 16);
        put(w, c->decision_id, 16);
        put_be(w, (uint64_t)c->filed_at_us, 8);
        put_u8(w, c->filer_key_id[0] ? CF_KEY : 0);
        if (c->filer_key_id[0]) put_key_id(w, c->filer_key_id);
        else put_be(w, 0, 4);
        put_str(w, c->filed_by);
        put_text(w, c->reason.p, c->reason.len);
        break;
    }
    case PGCL_RECORD_RESOLUTION: {
        const pgcl_record_resolution *s = &r->resolution;
        put(w, s->contest_id, 16);
        put(w, s->decision_id, 16);
        put_be(w, (uint64_t)s->resolved_at_us, 8);
        put_u8(w, s->outcome);
        put_u8(w, (s->resolver_key_id[0] ? RF_KEY : 0) | (s->corrected_label[0] ? RF_LABEL : 0));
        if (s->resolver_key_id[0]) put_key_id(w, s->resolver_key_id);
        else put_be(w, 0, 4);
        put_str(w, s->resolved_by);
        if (s->corrected_label[0]) put_str(w, s->corrected_label);
        put_text(w, s->note.p, s->note.len);
        break;
    }
    case PGCL_RECORD_POLICY: {
        const pgcl_record_policy *p = &r->policy;
        put_be(w, p->n_labels, 2);
        pgcl_record_label_iter it = pgcl_record_label_iter_start(p);
        for (uint16_t i = 0; i < p->n_labels; i++) {
            pgcl_record_text t = pgcl_record_label_iter_next(&it);
            put_text(w, t.p, t.len);
        }
        put_text(w, p->policy_json.p, p->policy_json.len);
        break;
    }
    case PGCL_RECORD_LEGACY_HEAD: {
        const pgcl_record_legacy_head *h = &r->legacy;
        put_be(w, (uint64_t)h->created_at_us, 8);
        put_be(w, (uint64_t)h->head_seq, 8);
        put(w, h->head_hash, 32);
        put_u8(w, h->has_log_root ? LF_ROOT : 0);
        put(w, h->log_root, 32);
        put_str(w, h->writer_id);
        break;
    }
    }
}

pgcl_status pgcl_record_encode(const pgcl_record *r, unsigned char *out, size_t cap, size_t *len, char *why,
                               int cap_why) {
    *len = 0;
    pgcl_status st = pgcl_record_check(r, why, cap_why);
    if (st != PGCL_OK) return st;
    writer measure = {NULL, 0, 0};
    write_record(&measure, r);
    PGCL_ASSERT(measure.n <= PGCL_RECORD_MAX_BYTES); /* the field limits bound every record */
    *len = measure.n;
    if (cap < measure.n) {
        pgcl_errorf(why, cap_why, "the %s record is %zu bytes; the buffer holds %zu", pgcl_record_kind_name(r->kind),
                    measure.n, cap);
        return PGCL_ERR_BUSY;
    }
    writer w = {out, 0, cap};
    write_record(&w, r);
    PGCL_ASSERT(w.n == measure.n);
    return PGCL_OK;
}

void pgcl_record_leaf_hash(const unsigned char *data, size_t len, uint8_t out[PGCL_RECORD_SHA256_BYTES]) {
    pgcl_merkle_hash h = pgcl_merkle_leaf_hash(data, len);
    memcpy(out, h.b, PGCL_RECORD_SHA256_BYTES);
}

pgcl_status pgcl_record_policy_ref(const pgcl_record_policy *p, uint8_t out[PGCL_RECORD_SHA256_BYTES], char *why,
                                   int cap) {
    pgcl_record r = {.kind = PGCL_RECORD_POLICY, .policy = *p};
    size_t len;
    pgcl_status st = pgcl_record_encode(&r, NULL, 0, &len, why, cap);
    if (st != PGCL_ERR_BUSY) return st; /* invalid (a zero-length record does not exist) */
    unsigned char *buf = malloc(len);
    if (!buf) {
        pgcl_errorf(why, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    st = pgcl_record_encode(&r, buf, len, &len, why, cap);
    PGCL_ASSERT(st == PGCL_OK);
    pgcl_record_leaf_hash(buf, len, out);
    free(buf);
    return PGCL_OK;
}

/* ---- reading ---- */

typedef struct reader {
    const unsigned char *p;
    size_t len, at;
    char *why;
    int cap;
} reader;

/* Refuses the record at the reader's position with a reason; always false. */
static bool refuse(reader *r, const char *field, const char *problem) {
    pgcl_errorf(r->why, r->cap, "%s at byte %zu: %s", field, r->at, problem);
    return false;
}

static bool need(reader *r, size_t n, const char *field) {
    return n <= r->len - r->at || refuse(r, field, "the record ends inside it");
}

static bool get_bytes(reader *r, void *out, size_t n, const char *field) {
    if (!need(r, n, field)) return false;
    memcpy(out, r->p + r->at, n);
    r->at += n;
    return true;
}

static bool get_be(reader *r, int bytes, uint64_t *v, const char *field) {
    if (!need(r, (size_t)bytes, field)) return false;
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++)
        x = x << 8 | r->p[r->at + (size_t)i];
    r->at += (size_t)bytes;
    *v = x;
    return true;
}

/* A one-byte enum or flags value: at most max. */
static bool get_small(reader *r, unsigned max, unsigned *v, const char *field) {
    if (!need(r, 1, field)) return false;
    if (r->p[r->at] > max) return refuse(r, field, "out of range");
    *v = r->p[r->at++];
    return true;
}

static bool get_f64le(reader *r, double *v, const char *field) {
    if (!need(r, 8, field)) return false;
    uint64_t bits = 0;
    for (int i = 7; i >= 0; i--)
        bits = bits << 8 | r->p[r->at + (size_t)i];
    r->at += 8;
    memcpy(v, &bits, sizeof *v);
    return true;
}

static bool get_f32s(reader *r, uint32_t n, pgcl_record_f32s *out, const char *field) {
    if (!need(r, 4 * (size_t)n, field)) return false;
    *out = (pgcl_record_f32s){.n = n, .native = NULL, .le = r->p + r->at};
    r->at += 4 * (size_t)n;
    return true;
}

static bool get_varint(reader *r, uint64_t max, uint64_t *v, const char *field) {
    return pgcl_record_varint_get(r->p, r->len, &r->at, max, v) ||
           refuse(r, field, "no varint in its shortest form within its range");
}

/* A length-prefixed text of min..max bytes, viewed in place. */
static bool get_view(reader *r, size_t min, size_t max, pgcl_record_text *out, const char *field) {
    uint64_t n;
    if (!get_varint(r, max, &n, field)) return false;
    if (n < min) return refuse(r, field, "shorter than its minimum");
    if (!need(r, (size_t)n, field)) return false;
    *out = (pgcl_record_text){(const char *)r->p + r->at, (size_t)n};
    r->at += (size_t)n;
    return true;
}

/* A length-prefixed text of min..max bytes without NUL, copied into dst (max + 1 bytes). */
static bool get_str(reader *r, size_t min, size_t max, char *dst, const char *field) {
    pgcl_record_text t;
    if (!get_view(r, min, max, &t, field)) return false;
    if (memchr(t.p, 0, t.len)) return refuse(r, field, "holds a NUL byte");
    memcpy(dst, t.p, t.len);
    dst[t.len] = 0;
    return true;
}

/* 4 bytes of a key id into "pgcld_" and 8 lowercase hex digits. */
static bool get_key_id(reader *r, char dst[PGCL_RECORD_KEY_ID_LEN + 1], const char *field) {
    uint8_t b[4];
    if (!get_bytes(r, b, 4, field)) return false;
    memcpy(dst, "pgcld_", 6);
    pgcl_record_hex_format(b, 4, dst + 6);
    return true;
}

/* n zero bytes: an absent fixed-width field. */
static bool get_zeros(reader *r, size_t n, const char *field) {
    if (!need(r, n, field)) return false;
    for (size_t i = 0; i < n; i++)
        if (r->p[r->at + i]) return refuse(r, field, "not zero without its flag");
    r->at += n;
    return true;
}

/* Two letters of a code (a territory, a language): no NUL, so that the text keeps both bytes. */
static bool get_code(reader *r, char dst[3], const char *field) {
    if (!get_bytes(r, dst, 2, field)) return false;
    dst[2] = 0;
    return (dst[0] && dst[1]) || refuse(r, field, "holds a NUL byte");
}

static bool read_decision(reader *r, pgcl_record_decision *d) {
    uint64_t v;
    unsigned flags, task, decision, policy_kind, stored;
    if (!get_bytes(r, d->decision_id, 16, "decision_id") || !get_be(r, 8, &v, "created_at")) return false;
    d->created_at_us = (int64_t)v;
    if (!get_bytes(r, d->trace_id, 16, "trace_id") || !get_bytes(r, d->model_sha256, 32, "model_sha256") ||
        !get_bytes(r, d->policy_ref, 32, "policy_ref") || !get_bytes(r, d->input_sha256, 32, "input_sha256") ||
        !get_small(r, DF_ALL, &flags, "flags") || !get_small(r, PGCL_RECORD_TASK_ORDINAL, &task, "task") ||
        !get_small(r, PGCL_RECORD_BLOCK, &decision, "decision") ||
        !get_small(r, PGCL_RECORD_POLICY_LABEL_MAP, &policy_kind, "policy_kind") ||
        !get_small(r, PGCL_RECORD_INPUT_F32, &stored, "stored_input"))
        return false;
    d->has_trace_id = flags & DF_TRACE;
    d->task = (pgcl_record_task)task;
    d->decision = (pgcl_record_verdict)decision;
    d->policy_kind = (pgcl_record_policy_kind)policy_kind;
    d->stored_dtype = (pgcl_record_dtype)stored;
    uint64_t k, label, dims;
    if (!get_be(r, 2, &k, "classes") || !get_be(r, 2, &label, "label_index") || !get_be(r, 2, &dims, "dims"))
        return false;
    d->label_index = (uint16_t)label;
    if (k < 2 || k > PGCL_RECORD_CLASSES_MAX) return refuse(r, "classes", "not 2..1024");
    if (dims < 1 || dims > PGCL_RECORD_DIMS_MAX) return refuse(r, "dims", "not 1..4096");
    if (policy_kind == PGCL_RECORD_POLICY_THRESHOLD) {
        if (!get_be(r, 2, &v, "policy_label") || !get_f64le(r, &d->t_review, "t_review") ||
            !get_f64le(r, &d->t_block, "t_block"))
            return false;
        d->policy_label = (uint16_t)v;
    } else if (!get_f64le(r, &d->min_confidence, "min_confidence")) {
        return false;
    }
    if (!get_f32s(r, (uint32_t)k, &d->probabilities, "probabilities") ||
        !get_f32s(r, (uint32_t)dims, &d->vector, "vector") || !get_varint(r, INT64_MAX, &v, "latency_us"))
        return false;
    d->latency_us = (int64_t)v;
    if (flags & DF_REQUEST_UUID) {
        uint8_t id[PGCL_RECORD_UUID_BYTES];
        if (!get_bytes(r, id, 16, "request_id")) return false;
        pgcl_record_uuid_format(id, d->request_id);
    } else {
        uint8_t id[PGCL_RECORD_UUID_BYTES];
        if (!get_str(r, 1, PGCL_RECORD_REQUEST_ID_MAX, d->request_id, "request_id")) return false;
        if (pgcl_record_uuid_parse(d->request_id, id)) return refuse(r, "request_id", "a UUID in text form");
    }
    if (!get_str(r, 1, PGCL_RECORD_ITEM_ID_MAX, d->item_id, "item_id") ||
        !get_str(r, 1, PGCL_RECORD_MODEL_NAME_MAX, d->model_name, "model_name") ||
        !get_str(r, 1, PGCL_RECORD_MODEL_NAME_MAX, d->model_version, "model_version"))
        return false;
    if (stored == PGCL_RECORD_INPUT_F16 && !get_bytes(r, d->stored_digest, 32, "stored_digest")) return false;
    if (stored == PGCL_RECORD_INPUT_F32) memcpy(d->stored_digest, d->input_sha256, 32);
    if (flags & DF_DATE) {
        uint64_t y;
        unsigned char md[2];
        if (!get_be(r, 2, &y, "content_date") || !get_bytes(r, md, 2, "content_date")) return false;
        if (y > 9999 || md[0] > 99 || md[1] > 99) return refuse(r, "content_date", "not a date YYYY-MM-DD");
        /* the modulos change nothing after the check; they show the compiler the width (-O0 -Wformat-truncation) */
        snprintf(d->content_date, sizeof d->content_date, "%04u-%02u-%02u", (unsigned)(y % 10000), md[0] % 100u,
                 md[1] % 100u);
    }
    if (flags & DF_SCOPE) {
        unsigned n;
        if (!get_small(r, PGCL_RECORD_TERRITORIES_MAX, &n, "territorial_scope")) return false;
        if (n == 0) return refuse(r, "territorial_scope", "no country (its flag says there are some)");
        d->n_territories = (uint8_t)n;
        for (unsigned i = 0; i < n; i++)
            if (!get_code(r, d->territories[i], "territorial_scope")) return false;
    }
    if ((flags & DF_LANGUAGE) && !get_code(r, d->content_language, "content_language")) return false;
    return true;
}

static bool read_policy(reader *r, pgcl_record_policy *p) {
    uint64_t n;
    if (!get_be(r, 2, &n, "labels")) return false;
    if (n < 2 || n > PGCL_RECORD_CLASSES_MAX) return refuse(r, "labels", "not 2..1024");
    p->n_labels = (uint16_t)n;
    size_t first = r->at;
    for (uint64_t i = 0; i < n; i++) {
        pgcl_record_text t;
        if (!get_view(r, 1, PGCL_RECORD_LABEL_MAX, &t, "label")) return false;
    }
    p->label_list = r->p + first;
    p->label_list_len = r->at - first;
    return get_view(r, 2, PGCL_RECORD_JSON_MAX, &p->policy_json, "policy");
}

static bool read_body(reader *r, pgcl_record *out) {
    uint64_t v;
    unsigned flags, e1, e2;
    switch (out->kind) {
    case PGCL_RECORD_DECISION:
        return read_decision(r, &out->decision);
    case PGCL_RECORD_ADMIN_EVENT: {
        pgcl_record_admin_event *e = &out->admin;
        if (!get_bytes(r, e->event_id, 16, "event_id") || !get_be(r, 8, &v, "created_at")) return false;
        e->created_at_us = (int64_t)v;
        return get_str(r, 1, PGCL_RECORD_ACTOR_MAX, e->actor, "actor") &&
               get_str(r, 1, PGCL_RECORD_ACTION_MAX, e->action, "action") &&
               get_str(r, 1, PGCL_RECORD_TARGET_MAX, e->target, "target") &&
               get_view(r, 2, PGCL_RECORD_JSON_MAX, &e->details, "details");
    }
    case PGCL_RECORD_KEY_EVENT: {
        pgcl_record_key_event *e = &out->key;
        if (!get_bytes(r, e->event_id, 16, "event_id") || !get_be(r, 8, &v, "created_at") ||
            !get_small(r, PGCL_RECORD_KEY_REVOKE, &e1, "action") || !get_small(r, PGCL_RECORD_ROLE_ADMIN, &e2, "role"))
            return false;
        e->created_at_us = (int64_t)v;
        e->action = (pgcl_record_key_action)e1;
        e->role = (pgcl_record_role)e2;
        return get_key_id(r, e->key_id, "key_id") && get_str(r, 1, PGCL_RECORD_KEY_NAME_MAX, e->name, "name") &&
               get_str(r, 1, PGCL_RECORD_ACTOR_MAX, e->actor, "actor");
    }
    case PGCL_RECORD_CONTEST: {
        pgcl_record_contest *c = &out->contest;
        if (!get_bytes(r, c->contest_id, 16, "contest_id") || !get_bytes(r, c->decision_id, 16, "decision_id") ||
            !get_be(r, 8, &v, "filed_at") || !get_small(r, CF_ALL, &flags, "flags"))
            return false;
        c->filed_at_us = (int64_t)v;
        if (!((flags & CF_KEY) ? get_key_id(r, c->filer_key_id, "filer_key_id") : get_zeros(r, 4, "filer_key_id")))
            return false;
        return get_str(r, 1, PGCL_RECORD_ACTOR_MAX, c->filed_by, "filed_by") &&
               get_view(r, 1, PGCL_RECORD_REASON_MAX, &c->reason, "reason");
    }
    case PGCL_RECORD_RESOLUTION: {
        pgcl_record_resolution *s = &out->resolution;
        if (!get_bytes(r, s->contest_id, 16, "contest_id") || !get_bytes(r, s->decision_id, 16, "decision_id") ||
            !get_be(r, 8, &v, "resolved_at") || !get_small(r, PGCL_RECORD_OVERTURNED, &e1, "outcome") ||
            !get_small(r, RF_ALL, &flags, "flags"))
            return false;
        s->resolved_at_us = (int64_t)v;
        s->outcome = (pgcl_record_outcome)e1;
        if (!((flags & RF_KEY) ? get_key_id(r, s->resolver_key_id, "resolver_key_id")
                               : get_zeros(r, 4, "resolver_key_id")))
            return false;
        return get_str(r, 1, PGCL_RECORD_ACTOR_MAX, s->resolved_by, "resolved_by") &&
               (!(flags & RF_LABEL) || get_str(r, 1, PGCL_RECORD_LABEL_MAX, s->corrected_label, "corrected_label")) &&
               get_view(r, 1, PGCL_RECORD_REASON_MAX, &s->note, "note");
    }
    case PGCL_RECORD_POLICY:
        return read_policy(r, &out->policy);
    case PGCL_RECORD_LEGACY_HEAD: {
        pgcl_record_legacy_head *h = &out->legacy;
        uint64_t seq;
        if (!get_be(r, 8, &v, "created_at") || !get_be(r, 8, &seq, "head_seq")) return false;
        if (seq > INT64_MAX) return refuse(r, "head_seq", "past 2^63 - 1");
        h->created_at_us = (int64_t)v;
        h->head_seq = (int64_t)seq;
        if (!get_bytes(r, h->head_hash, 32, "head_hash") || !get_small(r, LF_ALL, &flags, "flags") ||
            !get_bytes(r, h->log_root, 32, "log_root"))
            return false;
        h->has_log_root = flags & LF_ROOT;
        return get_str(r, 0, PGCL_RECORD_WRITER_ID_MAX, h->writer_id, "writer_id");
    }
    }
    return refuse(r, "kind", "not a record kind");
}

pgcl_status pgcl_record_decode(const unsigned char *data, size_t len, pgcl_record *out, char *why, int cap) {
    memset(out, 0, sizeof *out);
    if (!data || len < 2) {
        pgcl_errorf(why, cap, "the record is %zu bytes: shorter than its version and kind", data ? len : 0);
        return PGCL_ERR_FORMAT;
    }
    if (data[AT_VERSION] != PGCL_RECORD_VERSION) {
        pgcl_errorf(why, cap, "version %u: this build reads version %d", data[AT_VERSION], PGCL_RECORD_VERSION);
        return PGCL_ERR_UNSUPPORTED;
    }
    if (len > PGCL_RECORD_MAX_BYTES) {
        pgcl_errorf(why, cap, "the record is %zu bytes: no record is longer than %u", len, PGCL_RECORD_MAX_BYTES);
        return PGCL_ERR_FORMAT;
    }
    if (data[AT_KIND] < 1 || data[AT_KIND] > PGCL_RECORD_KINDS) {
        pgcl_errorf(why, cap, "kind at byte 1: %u is not a record kind", data[AT_KIND]);
        return PGCL_ERR_FORMAT;
    }
    out->kind = (pgcl_record_kind)data[AT_KIND];
    char sub[256] = "";
    reader r = {data, len, 2, sub, (int)sizeof sub};
    bool ok = read_body(&r, out);
    if (ok && r.at != len) ok = refuse(&r, "the end", "bytes follow the last field");
    if (ok && pgcl_record_check(out, sub, (int)sizeof sub) != PGCL_OK) ok = false;
    if (!ok) {
        pgcl_errorf(why, cap, "a %s record: %s", pgcl_record_kind_name(out->kind), sub);
        pgcl_record_kind kind = out->kind;
        memset(out, 0, sizeof *out);
        out->kind = kind;
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

/* ---- equality ---- */

#define SAME(f) (a->f == b->f)
#define SAME_BYTES(f) (memcmp(a->f, b->f, sizeof a->f) == 0)
#define SAME_STR(f) (strncmp(a->f, b->f, sizeof a->f) == 0)

static bool same_f64(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

static bool same_f32s(const pgcl_record_f32s *x, const pgcl_record_f32s *y) {
    if (x->n != y->n) return false;
    for (uint32_t i = 0; i < x->n; i++)
        if (f32_bits_at(x, i) != f32_bits_at(y, i)) return false;
    return true;
}

static bool same_text(pgcl_record_text x, pgcl_record_text y) {
    return x.len == y.len && (x.len == 0 || memcmp(x.p, y.p, x.len) == 0);
}

static bool same_decision(const pgcl_record_decision *a, const pgcl_record_decision *b) {
    if (!(SAME_BYTES(decision_id) && SAME(created_at_us) && SAME(has_trace_id) && SAME_BYTES(trace_id) &&
          SAME_BYTES(model_sha256) && SAME_BYTES(policy_ref) && SAME_BYTES(input_sha256) && SAME(task) &&
          SAME(decision) && SAME(policy_kind) && SAME(stored_dtype) && SAME(label_index) && SAME(policy_label) &&
          same_f64(a->t_review, b->t_review) && same_f64(a->t_block, b->t_block) &&
          same_f64(a->min_confidence, b->min_confidence) && same_f32s(&a->probabilities, &b->probabilities) &&
          same_f32s(&a->vector, &b->vector) && SAME(latency_us) && SAME_STR(request_id) && SAME_STR(item_id) &&
          SAME_STR(model_name) && SAME_STR(model_version) && SAME_BYTES(stored_digest) && SAME_STR(content_date) &&
          SAME(n_territories) && SAME_STR(content_language)))
        return false;
    for (int i = 0; i < a->n_territories && i < PGCL_RECORD_TERRITORIES_MAX; i++)
        if (memcmp(a->territories[i], b->territories[i], 2) != 0) return false;
    return true;
}

static bool same_policy(const pgcl_record_policy *a, const pgcl_record_policy *b) {
    if (!SAME(n_labels) || !same_text(a->policy_json, b->policy_json)) return false;
    pgcl_record_label_iter x = pgcl_record_label_iter_start(a), y = pgcl_record_label_iter_start(b);
    for (uint16_t i = 0; i < a->n_labels; i++)
        if (!same_text(pgcl_record_label_iter_next(&x), pgcl_record_label_iter_next(&y))) return false;
    return true;
}

bool pgcl_record_equal(const pgcl_record *x, const pgcl_record *y) {
    if (x->kind != y->kind) return false;
    switch (x->kind) {
    case PGCL_RECORD_DECISION:
        return same_decision(&x->decision, &y->decision);
    case PGCL_RECORD_ADMIN_EVENT: {
        const pgcl_record_admin_event *a = &x->admin, *b = &y->admin;
        return SAME_BYTES(event_id) && SAME(created_at_us) && SAME_STR(actor) && SAME_STR(action) &&
               SAME_STR(target) && same_text(a->details, b->details);
    }
    case PGCL_RECORD_KEY_EVENT: {
        const pgcl_record_key_event *a = &x->key, *b = &y->key;
        return SAME_BYTES(event_id) && SAME(created_at_us) && SAME(action) && SAME(role) && SAME_STR(key_id) &&
               SAME_STR(name) && SAME_STR(actor);
    }
    case PGCL_RECORD_CONTEST: {
        const pgcl_record_contest *a = &x->contest, *b = &y->contest;
        return SAME_BYTES(contest_id) && SAME_BYTES(decision_id) && SAME(filed_at_us) && SAME_STR(filer_key_id) &&
               SAME_STR(filed_by) && same_text(a->reason, b->reason);
    }
    case PGCL_RECORD_RESOLUTION: {
        const pgcl_record_resolution *a = &x->resolution, *b = &y->resolution;
        return SAME_BYTES(contest_id) && SAME_BYTES(decision_id) && SAME(resolved_at_us) && SAME(outcome) &&
               SAME_STR(resolver_key_id) && SAME_STR(resolved_by) && SAME_STR(corrected_label) &&
               same_text(a->note, b->note);
    }
    case PGCL_RECORD_POLICY:
        return same_policy(&x->policy, &y->policy);
    case PGCL_RECORD_LEGACY_HEAD: {
        const pgcl_record_legacy_head *a = &x->legacy, *b = &y->legacy;
        return SAME(created_at_us) && SAME(head_seq) && SAME_BYTES(head_hash) && SAME(has_log_root) &&
               SAME_BYTES(log_root) && SAME_STR(writer_id);
    }
    }
    return false;
}

_Static_assert(D_FIXED == D_DIMS + 2 && D_DIMS == D_LABEL + 2 && D_LABEL == D_K + 2 && D_K == D_STORED + 1 &&
                   D_STORED == D_POLICY_KIND + 1 && D_POLICY_KIND == D_DECISION + 1 && D_DECISION == D_TASK + 1 &&
                   D_TASK == D_FLAGS + 1 && D_FLAGS == D_INPUT_SHA + 32 && D_INPUT_SHA == D_POLICY_REF + 32 &&
                   D_POLICY_REF == D_MODEL_SHA + 32 && D_MODEL_SHA == D_TRACE + 16 && D_TRACE == D_CREATED + 8 &&
                   D_CREATED == D_ID + 16,
               "the decision's fixed part as docs/log-record.md lays it out");
_Static_assert(A_FIXED == A_CREATED + 8 && K_FIXED == K_KEY + 4 && K_KEY == K_ROLE + 1 && K_ROLE == K_ACTION + 1 &&
                   K_ACTION == K_CREATED + 8 && C_FIXED == C_KEY + 4 && C_KEY == C_FLAGS + 1 &&
                   C_FLAGS == C_FILED + 8 && C_FILED == C_DECISION + 16 && R_FIXED == R_KEY + 4 &&
                   R_KEY == R_FLAGS + 1 && R_FLAGS == R_OUTCOME + 1 && R_OUTCOME == R_RESOLVED + 8 &&
                   R_RESOLVED == R_DECISION + 16 && P_FIXED == P_LABELS + 2 && L_FIXED == L_ROOT + 32 &&
                   L_ROOT == L_FLAGS + 1 && L_FLAGS == L_HASH + 32 && L_HASH == L_SEQ + 8 && L_SEQ == L_CREATED + 8,
               "the other kinds' fixed parts as docs/log-record.md lays them out");
