/* The log's records (core/audit/log/record.c; docs/log-record.md; issue 28):
 *  - known answers: one record of each kind (record_samples.h) encodes to the bytes below, which
 *    tests/integration/test_record_known_answers.py derives again from the document with its own
 *    encoder, and decodes back to its values;
 *  - random round trips of every kind, up to the largest records the limits allow:
 *    decode(encode(r)) == r and encode(decode(b)) == b;
 *  - every truncation is refused; every single-byte change is refused or decodes to another event
 *    (and then re-encodes to exactly the changed bytes: one encoding per event);
 *  - non-canonical forms and broken rules are refused by the decoder and the encoder alike;
 *  - the text forms of today's rows (UUIDs, times, territorial scopes) convert both ways exactly. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record_internal.h"
#include "record_samples.h"
#include "registry.h"
#include "test_util.h"

static const char *const KNOWN_HEX[SAMPLES] = {
    /* decision */
    "01010190b6a28f3c7a119b2e4c5d6e7f80910006475ef64ed5804bf92f3577b34da6a3ce929d0e0e4736101112131415161718191a1b1c1d"
    "1e1f202122232425262728292a2b2c2d2e2f9a08d059df75c2b7b6a858bbc5534f673f134547592015cc85c3f245a87b14c7404142434445"
    "464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f1f00010001000200000004000102d71533c2dbab3fe5f04927124cd63f00"
    "00603f0000003e0000803e0000c0bf0000404000000000d2090190b6a28f3c70008000000000000001076974656d2d343208746f78696369"
    "74790131808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f07e90c1f0244454652454e",
    /* decision_label_map */
    "01010190b6a28f3c7a12a0000000000000030006475ef65c357f00000000000000000000000000000000202122232425262728292a2b2c2d"
    "2e2f303132333435363738393a3b3c3d3e3f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455"
    "565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f0001020100000300000002000000000000e03f0000003f0000803e000080"
    "3e0000803f00000080e0a71210636c69656e742d726571756573742d3705c3a974c3a908656d6f74696f6e7303322e31",
    /* admin_event */
    "01020190b6a28f3c7b228a000000000000020006475ee7b28c011661646d696e20287067636c645f3161326233633464290e6d6f64656c2e"
    "61637469766174650a746f7869636974792f32397b226d6f64656c223a22746f786963697479222c2270726576696f75735f76657273696f"
    "6e223a2231222c2276657273696f6e223a2232227d",
    /* key_event */
    "01030190b6a28f3c7c33b000000000000004000647484620400000010badc0de05616c69636508636c693a726f6f74",
    /* contest */
    "01040190b6a28f3c7d4480000000000000050190b6a28f3c7a119b2e4c5d6e7f80910006477a90c25120011a2b3c4d16616c696365202870"
    "67636c645f316132623363346429166e6f7420746f7869633a20612071756f746174696f6e",
    /* resolution */
    "01050190b6a28f3c7d4480000000000000050190b6a28f3c7a119b2e4c5d6e7f80910006478bbf8d520001030badc0de14626f6220287067"
    "636c645f306261646330646529096e6f6e5f746f78696314612071756f746174696f6e3b20616c6c6f776564",
    /* policy */
    "01060002096e6f6e5f746f78696305746f7869634b7b226b696e64223a227468726573686f6c64222c226c6162656c223a22746f78696322"
    "2c22745f626c6f636b223a302e3334383339332c22745f726576696577223a302e3035343431317d",
    /* legacy_head */
    "0107000649b7e334e00000000000000004d2c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf016061626364"
    "65666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f097265706c6963612d31",
};

static unsigned char g_buf[PGCL_RECORD_MAX_BYTES], g_buf2[PGCL_RECORD_MAX_BYTES];

static size_t from_hex(const char *hex, unsigned char *out) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    return n;
}

/* Encodes r into g_buf; its length, or 0 (and a failed check) when the encoder refused it. */
static size_t encode(const pgcl_record *r, const char *what) {
    size_t len;
    char why[256] = "";
    pgcl_status st = pgcl_record_encode(r, g_buf, sizeof g_buf, &len, why, sizeof why);
    CHECK(st == PGCL_OK, "%s: encode: %s", what, why);
    return st == PGCL_OK ? len : 0;
}

/* ---- a deterministic generator of valid records (xorshift64*) ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1du;
}

static uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }

static void rnd_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd();
}

static void rnd_uuid7(uint8_t id[16]) {
    rnd_bytes(id, 16);
    id[6] = (uint8_t)(0x70 | (id[6] & 0x0f));
    id[8] = (uint8_t)(0x80 | (id[8] & 0x3f));
}

static int64_t rnd_time(void) { return (int64_t)(rnd() % (uint64_t)PGCL_RECORD_TIME_END_US); }

/* One code point of class cls, UTF-8 encoded into out; its length. */
static size_t rnd_char(pgcl_record_text_class cls, bool first, char *out) {
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.";
    static const char action_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_.";
    switch (cls) {
    case PGCL_RECORD_TEXT_REQUEST_ID:
        for (;;) {
            char c = (char)(0x21 + below(0x7e - 0x21 + 1));
            if (c != '"' && c != '\'' && c != '\\') return (void)(out[0] = c), 1;
        }
    case PGCL_RECORD_TEXT_MODEL_NAME:
        return (void)(out[0] = name_chars[below(sizeof name_chars - 2)]), 1; /* not '.' */
    case PGCL_RECORD_TEXT_MODEL_VERSION:
        return (void)(out[0] = name_chars[below(sizeof name_chars - (first ? 2 : 1))]), 1;
    case PGCL_RECORD_TEXT_ACTION:
        return (void)(out[0] = action_chars[below(sizeof action_chars - 1)]), 1;
    default:
        break;
    }
    for (;;) {
        uint32_t r = below(10), cp;
        if (r < 5) cp = 1 + below(0x7f);
        else if (r < 7) cp = 0x80 + below(0x800 - 0x80);
        else if (r < 9) cp = 0x800 + below(0x10000 - 0x800);
        else cp = 0x10000 + below(0x110000 - 0x10000);
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        if (cls == PGCL_RECORD_TEXT_PLAIN && (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))) continue;
        if (cp < 0x80) return (void)(out[0] = (char)cp), 1;
        if (cp < 0x800) {
            out[0] = (char)(0xc0 | cp >> 6);
            out[1] = (char)(0x80 | (cp & 0x3f));
            return 2;
        }
        if (cp < 0x10000) {
            out[0] = (char)(0xe0 | cp >> 12);
            out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
            out[2] = (char)(0x80 | (cp & 0x3f));
            return 3;
        }
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
    }
}

/* A text of class cls, 1..max bytes (exactly max when full), NUL-terminated in out (max + 1). */
static size_t rnd_text(char *out, size_t max, pgcl_record_text_class cls, bool full) {
    size_t target = full ? max : 1 + below((uint32_t)(below(4) ? (max < 24 ? max : 24) : max));
    size_t n = 0;
    char c[4];
    while (n < target) {
        size_t k = rnd_char(cls, n == 0, c);
        if (n + k > target) break;
        memcpy(out + n, c, k);
        n += k;
    }
    while (n < target) out[n++] = 'a'; /* fill what a wide character left */
    out[n] = 0;
    if (cls == PGCL_RECORD_TEXT_ACTION && n >= 4 && memcmp(out, "key.", 4) == 0) out[0] = 'm';
    return n;
}

/* A JSON object of about len bytes: {"a":<n>,"t":"<letters>"}. */
static size_t rnd_json(char *out, size_t len) {
    int n = snprintf(out, 64, "{\"a\":%u,\"t\":\"", below(100000));
    while ((size_t)n + 2 < len) out[n++] = (char)('a' + below(26));
    out[n++] = '"';
    out[n++] = '}';
    out[n] = 0;
    return (size_t)n;
}

static float rnd_unit_f32(void) {
    switch (below(8)) {
    case 0: return 0.0f;
    case 1: return 1.0f;
    case 2: return -0.0f;
    default: return (float)below(16777217) / 16777216.0f;
    }
}

static double rnd_unit_f64(void) { return below(8) == 0 ? 1.0 : (double)(rnd() >> 11) * 0x1p-53; }

static float rnd_finite_f32(void) {
    for (;;) {
        uint32_t bits = (uint32_t)rnd();
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f)) return f;
    }
}

/* The memory random records point into. */
static struct {
    float probs[PGCL_RECORD_CLASSES_MAX], vec[PGCL_RECORD_DIMS_MAX];
    char json[PGCL_RECORD_JSON_MAX + 1];
    char reason[PGCL_RECORD_REASON_MAX + 1];
    char label_bytes[PGCL_RECORD_CLASSES_MAX][PGCL_RECORD_LABEL_MAX + 8];
    pgcl_record_text labels[PGCL_RECORD_CLASSES_MAX];
} g_mem;

static void rnd_key_id(char out[PGCL_RECORD_KEY_ID_LEN + 1]) {
    uint8_t b[4];
    rnd_bytes(b, 4);
    memcpy(out, "pgcld_", 6);
    pgcl_record_hex_format(b, 4, out + 6);
}

static void rnd_decision(pgcl_record_decision *d, bool big) {
    rnd_uuid7(d->decision_id);
    d->created_at_us = rnd_time();
    if ((d->has_trace_id = below(2))) {
        rnd_bytes(d->trace_id, 16);
        d->trace_id[0] |= 1;
    }
    rnd_bytes(d->model_sha256, 32);
    rnd_bytes(d->policy_ref, 32);
    rnd_bytes(d->input_sha256, 32);
    d->task = (pgcl_record_task)below(3);
    d->decision = (pgcl_record_verdict)below(3);
    uint32_t k = d->task == PGCL_RECORD_TASK_BINARY ? 2 : big ? PGCL_RECORD_CLASSES_MAX : 2 + below(11);
    for (uint32_t i = 0; i < k; i++) g_mem.probs[i] = rnd_unit_f32();
    d->probabilities = (pgcl_record_f32s){.n = k, .native = g_mem.probs};
    d->label_index = (uint16_t)below(k);
    if ((d->policy_kind = (pgcl_record_policy_kind)below(2)) == PGCL_RECORD_POLICY_THRESHOLD) {
        d->policy_label = (uint16_t)below(k);
        double a = rnd_unit_f64(), b = rnd_unit_f64();
        d->t_review = a < b ? a : b;
        d->t_block = a < b ? b : a;
    } else {
        d->min_confidence = rnd_unit_f64();
    }
    uint32_t dims = big ? PGCL_RECORD_DIMS_MAX : 1 + below(80);
    for (uint32_t i = 0; i < dims; i++) g_mem.vec[i] = rnd_finite_f32();
    d->vector = (pgcl_record_f32s){.n = dims, .native = g_mem.vec};
    d->latency_us = (int64_t)(rnd() >> (1 + below(63)));
    if (!big && below(3) == 0) {
        uint8_t id[16];
        rnd_bytes(id, 16);
        pgcl_record_uuid_format(id, d->request_id);
    } else {
        rnd_text(d->request_id, PGCL_RECORD_REQUEST_ID_MAX, PGCL_RECORD_TEXT_REQUEST_ID, big);
    }
    rnd_text(d->item_id, PGCL_RECORD_ITEM_ID_MAX, PGCL_RECORD_TEXT_UTF8, big);
    rnd_text(d->model_name, PGCL_RECORD_MODEL_NAME_MAX, PGCL_RECORD_TEXT_MODEL_NAME, big);
    rnd_text(d->model_version, PGCL_RECORD_MODEL_NAME_MAX, PGCL_RECORD_TEXT_MODEL_VERSION, big);
    d->stored_dtype = (pgcl_record_dtype)below(3);
    if (d->stored_dtype == PGCL_RECORD_INPUT_F16) rnd_bytes(d->stored_digest, 32);
    if (d->stored_dtype == PGCL_RECORD_INPUT_F32) memcpy(d->stored_digest, d->input_sha256, 32);
    if (big || below(2)) {
        int y = 1 + (int)below(9999), m = 1 + (int)below(12), day = 1 + (int)below((uint32_t)pgcl_record_days_in_month(y, m));
        char date[48]; /* room for any int, as -Wformat-truncation counts it */
        snprintf(date, sizeof date, "%04d-%02d-%02d", y, m, day);
        memcpy(d->content_date, date, sizeof d->content_date);
    }
    if (big || below(2)) {
        int n = big ? PGCL_RECORD_TERRITORIES_MAX : 1 + (int)below(PGCL_RECORD_TERRITORIES_MAX);
        for (int i = 0; i < n; i++) { /* distinct: the i-th code of a walk through AA..ZZ */
            int code = (i * 23 + 7) % (26 * 26);
            d->territories[i][0] = (char)('A' + code / 26);
            d->territories[i][1] = (char)('A' + code % 26);
        }
        d->n_territories = (uint8_t)n;
    }
    if (big || below(2)) {
        d->content_language[0] = (char)('A' + below(26));
        d->content_language[1] = (char)('A' + below(26));
    }
}

static void rnd_record(int kind, pgcl_record *r, bool big) {
    memset(r, 0, sizeof *r);
    r->kind = (pgcl_record_kind)kind;
    switch (kind) {
    case PGCL_RECORD_DECISION:
        rnd_decision(&r->decision, big);
        break;
    case PGCL_RECORD_ADMIN_EVENT: {
        pgcl_record_admin_event *e = &r->admin;
        rnd_uuid7(e->event_id);
        e->created_at_us = rnd_time();
        rnd_text(e->actor, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        rnd_text(e->action, PGCL_RECORD_ACTION_MAX, PGCL_RECORD_TEXT_ACTION, big);
        rnd_text(e->target, PGCL_RECORD_TARGET_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        size_t n = rnd_json(g_mem.json, big ? PGCL_RECORD_JSON_MAX : 24 + below(200));
        e->details = (pgcl_record_text){g_mem.json, n};
        break;
    }
    case PGCL_RECORD_KEY_EVENT: {
        pgcl_record_key_event *e = &r->key;
        rnd_uuid7(e->event_id);
        e->created_at_us = rnd_time();
        e->action = (pgcl_record_key_action)below(3);
        e->role = (pgcl_record_role)below(3);
        rnd_key_id(e->key_id);
        rnd_text(e->name, PGCL_RECORD_KEY_NAME_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        rnd_text(e->actor, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        break;
    }
    case PGCL_RECORD_CONTEST: {
        pgcl_record_contest *c = &r->contest;
        rnd_uuid7(c->contest_id);
        rnd_uuid7(c->decision_id);
        c->filed_at_us = rnd_time();
        if (big || below(2)) rnd_key_id(c->filer_key_id);
        rnd_text(c->filed_by, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        size_t n = rnd_text(g_mem.reason, PGCL_RECORD_REASON_MAX, PGCL_RECORD_TEXT_UTF8, big);
        c->reason = (pgcl_record_text){g_mem.reason, n};
        break;
    }
    case PGCL_RECORD_RESOLUTION: {
        pgcl_record_resolution *s = &r->resolution;
        rnd_uuid7(s->contest_id);
        rnd_uuid7(s->decision_id);
        s->resolved_at_us = rnd_time();
        s->outcome = (pgcl_record_outcome)below(2);
        if (big || below(2)) rnd_key_id(s->resolver_key_id);
        rnd_text(s->resolved_by, PGCL_RECORD_ACTOR_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        if (s->outcome == PGCL_RECORD_OVERTURNED && (big || below(2)))
            rnd_text(s->corrected_label, PGCL_RECORD_LABEL_MAX, PGCL_RECORD_TEXT_UTF8, big);
        size_t n = rnd_text(g_mem.reason, PGCL_RECORD_REASON_MAX, PGCL_RECORD_TEXT_UTF8, big);
        s->note = (pgcl_record_text){g_mem.reason, n};
        break;
    }
    case PGCL_RECORD_POLICY: {
        pgcl_record_policy *p = &r->policy;
        p->n_labels = (uint16_t)(big ? PGCL_RECORD_CLASSES_MAX : 2 + below(11));
        for (uint16_t i = 0; i < p->n_labels; i++) { /* unique: "<i>:" first, or at the end when full */
            char *b = g_mem.label_bytes[i];
            size_t n = rnd_text(b, PGCL_RECORD_LABEL_MAX - 6, PGCL_RECORD_TEXT_UTF8, big);
            n += (size_t)sprintf(b + n, "#%u", i);
            while (big && n < PGCL_RECORD_LABEL_MAX) b[n++] = 'z';
            g_mem.labels[i] = (pgcl_record_text){b, n};
        }
        p->labels = g_mem.labels;
        size_t n = rnd_json(g_mem.json, big ? PGCL_RECORD_JSON_MAX : 24 + below(200));
        p->policy_json = (pgcl_record_text){g_mem.json, n};
        break;
    }
    case PGCL_RECORD_LEGACY_HEAD: {
        pgcl_record_legacy_head *h = &r->legacy;
        h->created_at_us = rnd_time();
        h->head_seq = (int64_t)((rnd() >> (1 + below(63))) | 1);
        rnd_bytes(h->head_hash, 32);
        if ((h->has_log_root = big || below(2))) {
            rnd_bytes(h->log_root, 32);
            h->log_root[31] |= 1;
        }
        if (big || below(2)) rnd_text(h->writer_id, PGCL_RECORD_WRITER_ID_MAX, PGCL_RECORD_TEXT_PLAIN, big);
        break;
    }
    }
}

/* ---- the properties ---- */

/* decode(bytes) == r and encode(decode(bytes)) == bytes. */
static void check_round_trip(const pgcl_record *r, const unsigned char *bytes, size_t len, const char *what) {
    pgcl_record back;
    char why[256] = "";
    pgcl_status st = pgcl_record_decode(bytes, len, &back, why, sizeof why);
    CHECK(st == PGCL_OK, "%s: decode: %s", what, why);
    if (st != PGCL_OK) return;
    CHECK(pgcl_record_equal(r, &back) && pgcl_record_equal(&back, r), "%s: decodes to another event", what);
    size_t len2;
    st = pgcl_record_encode(&back, g_buf2, sizeof g_buf2, &len2, why, sizeof why);
    CHECK(st == PGCL_OK && len2 == len && memcmp(g_buf2, bytes, len) == 0, "%s: re-encodes differently (%s)", what, why);
}

/* Every prefix is refused (every step-th for long records, and the last 64). */
static void check_truncations(const unsigned char *bytes, size_t len, const char *what) {
    size_t step = len > 4096 ? 97 : 1;
    int accepted = 0;
    for (size_t n = 0; n < len; n += (n + 64 >= len ? 1 : step)) {
        pgcl_record back;
        if (pgcl_record_decode(bytes, n, &back, NULL, 0) == PGCL_OK) accepted++;
    }
    CHECK(accepted == 0, "%s: %d truncations decoded", what, accepted);
}

/* Each changed byte (xor with every mask in masks) is refused, or decodes to another event that
 * encodes to exactly the changed bytes. */
static void check_flips(const pgcl_record *r, const unsigned char *bytes, size_t len, const unsigned *masks,
                        int n_masks, const char *what) {
    static unsigned char flipped[PGCL_RECORD_MAX_BYTES];
    memcpy(flipped, bytes, len);
    int same = 0, not_canonical = 0;
    for (size_t i = 0; i < len; i++) {
        for (int m = 0; m < n_masks; m++) {
            flipped[i] = (unsigned char)(bytes[i] ^ masks[m]);
            pgcl_record back;
            if (pgcl_record_decode(flipped, len, &back, NULL, 0) == PGCL_OK) {
                if (pgcl_record_equal(&back, r)) same++;
                size_t len2;
                if (pgcl_record_encode(&back, g_buf2, sizeof g_buf2, &len2, NULL, 0) != PGCL_OK || len2 != len ||
                    memcmp(g_buf2, flipped, len) != 0)
                    not_canonical++;
            }
        }
        flipped[i] = bytes[i];
    }
    CHECK(same == 0, "%s: %d changed bytes decode to the same event", what, same);
    CHECK(not_canonical == 0, "%s: %d changed records decode to an event that encodes otherwise", what, not_canonical);
}

static void test_known_answers(void) {
    unsigned masks[255];
    for (int i = 0; i < 255; i++) masks[i] = (unsigned)i + 1;
    for (int i = 0; i < SAMPLES; i++) {
        pgcl_record r;
        CHECK(sample_record(i, &r), "%s: the sample's values", SAMPLE_NAMES[i]);
        size_t len = encode(&r, SAMPLE_NAMES[i]);
        static unsigned char expected[4096];
        size_t n = from_hex(KNOWN_HEX[i], expected);
        CHECK(len == n && memcmp(g_buf, expected, n) == 0, "%s: not its known answer", SAMPLE_NAMES[i]);
        static unsigned char bytes[4096];
        memcpy(bytes, g_buf, len);
        check_round_trip(&r, bytes, len, SAMPLE_NAMES[i]);
        check_truncations(bytes, len, SAMPLE_NAMES[i]);
        check_flips(&r, bytes, len, masks, 255, SAMPLE_NAMES[i]);
    }
}

static void test_random_round_trips(void) {
    static const unsigned bit_masks[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    for (int kind = 1; kind <= PGCL_RECORD_KINDS; kind++) {
        for (int i = 0; i < 300; i++) {
            bool big = i % 100 == 99; /* every limit at its maximum */
            pgcl_record r;
            rnd_record(kind, &r, big);
            char what[64];
            snprintf(what, sizeof what, "random %s #%d%s", pgcl_record_kind_name(kind), i, big ? " (largest)" : "");
            size_t len = encode(&r, what);
            CHECK(len <= PGCL_RECORD_MAX_BYTES, "%s: %zu bytes", what, len);
            if (!len || len > PGCL_RECORD_MAX_BYTES) continue;
            static unsigned char bytes[PGCL_RECORD_MAX_BYTES];
            memcpy(bytes, g_buf, len);
            check_round_trip(&r, bytes, len, what);
            check_truncations(bytes, len, what);
            if (!big && i % 10 == 0) check_flips(&r, bytes, len, bit_masks, 8, what);
        }
    }
}

/* Bytes = a sample's record with [at, at + cut) replaced by the n bytes of with. */
static size_t spliced(int sample, size_t at, size_t cut, const void *with, size_t n, unsigned char *out) {
    pgcl_record r;
    PGCL_ASSERT(sample_record(sample, &r));
    size_t len = encode(&r, "splice");
    PGCL_ASSERT(at + cut <= len);
    memcpy(out, g_buf, at);
    memcpy(out + at, with, n);
    memcpy(out + at + n, g_buf + at + cut, len - at - cut);
    return len - cut + n;
}

static void expect_refused(const unsigned char *bytes, size_t len, pgcl_status want, const char *what) {
    pgcl_record back;
    char why[256] = "";
    pgcl_status st = pgcl_record_decode(bytes, len, &back, why, sizeof why);
    CHECK(st == want, "%s: decode gave %s (%s)", what, pgcl_status_str(st), why);
    CHECK(st == PGCL_OK || why[0], "%s: no reason given", what);
}

static void expect_changed_refused(int sample, size_t at, const char *with_hex, const char *what) {
    static unsigned char with[1024], out[8192];
    size_t n = from_hex(with_hex, with);
    expect_refused(out, spliced(sample, at, n, with, n, out), PGCL_ERR_FORMAT, what);
}

static void test_non_canonical_forms_refused(void) {
    static unsigned char out[8192];
    /* redundant varint groups: the actor's length 0x16 as 96 00; the latency 1234 as d2 89 00 */
    expect_refused(out, spliced(SAMPLE_ADMIN_EVENT, 26, 1, "\x96\x00", 2, out), PGCL_ERR_FORMAT, "varint 96 00");
    expect_refused(out, spliced(SAMPLE_DECISION, 191, 2, "\xd2\x89\x00", 3, out), PGCL_ERR_FORMAT, "varint d2 89 00");
    expect_refused(out, spliced(SAMPLE_DECISION, 191, 2, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10, out),
                   PGCL_ERR_FORMAT, "latency past 2^63 - 1");
    expect_refused(out, spliced(SAMPLE_DECISION, 191, 2, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10, out),
                   PGCL_ERR_FORMAT, "varint past 64 bits");
    /* a request id that is a UUID in text form (the flag cleared, the text in the UUID's place) */
    static const char uuid_text[] = "\x24" "0190b6a2-8f3c-7000-8000-000000000001";
    size_t len = spliced(SAMPLE_DECISION, 193, 16, uuid_text, 37, out);
    out[138] &= (unsigned char)~0x10;
    expect_refused(out, len, PGCL_ERR_FORMAT, "a UUID request id in text form");
    /* the same text with one uppercase digit is a text request id, and is accepted */
    out[194 + 3] = 'B';
    expect_refused(out, len, PGCL_OK, "an uppercase UUID request id in text form");
    /* flag bits no field uses, and fields whose flag disagrees with their bytes */
    expect_changed_refused(SAMPLE_DECISION, 138, "3f", "decision flag 0x20");
    expect_changed_refused(SAMPLE_DECISION, 138, "1e", "trace id without its flag");
    expect_changed_refused(SAMPLE_DECISION, 26, "00000000000000000000000000000000", "all-zero trace id");
    expect_changed_refused(SAMPLE_DECISION_LABEL_MAP, 30, "01", "trace bytes, no flag");
    expect_changed_refused(SAMPLE_CONTEST, 42, "03", "contest flag 0x02");
    expect_changed_refused(SAMPLE_CONTEST, 42, "00", "filer key bytes without their flag");
    expect_changed_refused(SAMPLE_RESOLUTION, 43, "07", "resolution flag 0x04");
    expect_changed_refused(SAMPLE_LEGACY_HEAD, 50, "03", "legacy head flag 0x02");
    expect_changed_refused(SAMPLE_LEGACY_HEAD, 50, "00", "log root without its flag");
    /* enums out of range */
    expect_changed_refused(SAMPLE_DECISION, 139, "03", "task 3");
    expect_changed_refused(SAMPLE_DECISION, 140, "03", "decision 3");
    expect_changed_refused(SAMPLE_DECISION, 141, "02", "policy kind 2");
    expect_changed_refused(SAMPLE_DECISION, 142, "03", "stored input 3");
    expect_changed_refused(SAMPLE_KEY_EVENT, 26, "03", "key action 3");
    expect_changed_refused(SAMPLE_KEY_EVENT, 27, "03", "role 3");
    expect_changed_refused(SAMPLE_RESOLUTION, 42, "02", "outcome 2");
    /* rules on values */
    expect_changed_refused(SAMPLE_DECISION, 8, "4a", "decision id of UUID version 4");
    expect_changed_refused(SAMPLE_DECISION, 18, "80", "created_at before 1970");
    expect_changed_refused(SAMPLE_DECISION, 145, "0002", "label index K");
    expect_changed_refused(SAMPLE_DECISION, 143, "0003", "a binary task with 3 classes");
    expect_changed_refused(SAMPLE_DECISION, 151, "e5f04927124cd63f02d71533c2dbab3f", "t_review > t_block");
    expect_changed_refused(SAMPLE_DECISION, 167, "0000c03f", "probability 1.5");
    expect_changed_refused(SAMPLE_DECISION, 167, "0000c07f", "probability NaN");
    expect_changed_refused(SAMPLE_DECISION, 175, "0000807f", "vector infinity");
    expect_changed_refused(SAMPLE_DECISION, 260, "07e9021d", "content date 2025-02-29");
    expect_changed_refused(SAMPLE_DECISION, 264, "0244454445", "a repeated territory");
    expect_changed_refused(SAMPLE_DECISION, 264, "00", "no territory under its flag");
    expect_changed_refused(SAMPLE_DECISION, 269, "656e", "a lowercase language");
    expect_changed_refused(SAMPLE_DECISION, 269, "4500", "a language with a NUL");
    expect_changed_refused(SAMPLE_DECISION, 219, "2f", "a model name with '/'");
    expect_changed_refused(SAMPLE_DECISION, 227, "2e", "a model version '.'");
    expect_changed_refused(SAMPLE_LEGACY_HEAD, 10, "0000000000000000", "head seq 0");
    expect_changed_refused(SAMPLE_LEGACY_HEAD, 10, "8000000000000000", "head seq past 2^63 - 1");
    expect_changed_refused(SAMPLE_ADMIN_EVENT, 50, "6b65792e637265617465", "admin action key.create");
    expect_changed_refused(SAMPLE_ADMIN_EVENT, 76, "5b", "details not an object");
    expect_refused(out, spliced(SAMPLE_POLICY, 4, 10, "\x05toxic", 6, out), PGCL_ERR_FORMAT, "a repeated label");
    expect_changed_refused(SAMPLE_RESOLUTION, 42, "00", "a corrected label with the outcome upheld");
    /* texts that are not UTF-8 of their class: a NUL, an overlong form, a surrogate, past U+10FFFF,
     * a cut sequence, a C1 control in an actor */
    expect_changed_refused(SAMPLE_DECISION, 210, "00", "an item id with a NUL");
    expect_changed_refused(SAMPLE_DECISION, 210, "c080", "an overlong NUL");
    expect_changed_refused(SAMPLE_DECISION, 210, "eda080", "a surrogate");
    expect_changed_refused(SAMPLE_DECISION, 210, "f4908080", "past U+10FFFF");
    expect_changed_refused(SAMPLE_DECISION, 215, "c3", "a cut sequence");
    expect_changed_refused(SAMPLE_ADMIN_EVENT, 27, "c285", "a C1 control in an actor");
    expect_changed_refused(SAMPLE_ADMIN_EVENT, 27, "0a", "a line feed in an actor");
    /* over-long texts: an item id of 257 bytes, a reason of 2001 */
    static char longer[2100];
    memset(longer, 'a', sizeof longer);
    longer[0] = (char)0x81, longer[1] = 0x02; /* varint 257 */
    expect_refused(out, spliced(SAMPLE_DECISION, 209, 8, longer, 2 + 257, out), PGCL_ERR_FORMAT, "item id 257");
    longer[0] = (char)0xd1, longer[1] = 0x0f; /* varint 2001 */
    expect_refused(out, spliced(SAMPLE_CONTEST, 70, 23, longer, 2 + 2001, out), PGCL_ERR_FORMAT, "reason 2001");
    longer[0] = (char)0xd0, longer[1] = 0x0f; /* 2000: the maximum */
    expect_refused(out, spliced(SAMPLE_CONTEST, 70, 23, longer, 2 + 2000, out), PGCL_OK, "reason 2000");
    /* versions, kinds, a byte after the end, a record past the maximum length */
    pgcl_record r;
    PGCL_ASSERT(sample_record(SAMPLE_KEY_EVENT, &r));
    len = encode(&r, "key event");
    memcpy(out, g_buf, len);
    out[len] = 0;
    expect_refused(out, len + 1, PGCL_ERR_FORMAT, "a trailing byte");
    const unsigned versions[] = {0, 2, 255}, kinds[] = {0, 8, 255};
    for (int i = 0; i < 3; i++) {
        out[0] = (unsigned char)versions[i];
        expect_refused(out, len, PGCL_ERR_UNSUPPORTED, "another version");
        out[0] = 1;
        out[1] = (unsigned char)kinds[i];
        expect_refused(out, len, PGCL_ERR_FORMAT, "an unknown kind");
        out[1] = PGCL_RECORD_KEY_EVENT;
    }
    static unsigned char huge[PGCL_RECORD_MAX_BYTES + 1];
    huge[0] = 1;
    huge[1] = PGCL_RECORD_POLICY;
    expect_refused(huge, sizeof huge, PGCL_ERR_FORMAT, "a record past the maximum length");
    pgcl_record back;
    CHECK(pgcl_record_decode(NULL, 0, &back, NULL, 0) == PGCL_ERR_FORMAT, "no data");
}

/* The encoder refuses what the decoder refuses: each change breaks one rule of a valid sample. */
static void test_encoder_refuses_broken_rules(void) {
    static const struct {
        int sample;
        const char *what;
    } cases[] = {
        {SAMPLE_DECISION, "binary with 3 classes"},    {SAMPLE_DECISION, "trace bytes without flag"},
        {SAMPLE_DECISION, "min_confidence set"},       {SAMPLE_DECISION, "f32 digest differs"},
        {SAMPLE_DECISION, "request id with a quote"},  {SAMPLE_DECISION, "territory lowercase"},
        {SAMPLE_DECISION, "date 2026-13-01"},          {SAMPLE_DECISION, "negative latency"},
        {SAMPLE_DECISION, "both float forms"},         {SAMPLE_DECISION_LABEL_MAP, "thresholds set"},
        {SAMPLE_ADMIN_EVENT, "duplicate JSON member"}, {SAMPLE_KEY_EVENT, "key id uppercase"},
        {SAMPLE_CONTEST, "empty reason"},              {SAMPLE_POLICY, "one label"},
        {SAMPLE_POLICY, "both label forms"},           {SAMPLE_LEGACY_HEAD, "writer id with a tab"},
        {SAMPLE_RESOLUTION, "label with upheld"},      {SAMPLE_ADMIN_EVENT, "unknown kind"},
    };
    static const float three[3] = {0.5f, 0.25f, 0.25f};
    static const char dup[] = "{\"a\":1,\"a\":2}";
    static const unsigned char list[] = {1, 'a'};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgcl_record r;
        PGCL_ASSERT(sample_record(cases[i].sample, &r));
        pgcl_record_decision *d = &r.decision;
        switch (i) {
        case 0: d->probabilities = (pgcl_record_f32s){.n = 3, .native = three}; break;
        case 1: d->has_trace_id = false; break;
        case 2: d->min_confidence = 0.5; break;
        case 3: d->stored_dtype = PGCL_RECORD_INPUT_F32; break;
        case 4: strcpy(d->request_id, "a\"b"); break;
        case 5: d->territories[1][0] = 'f'; break;
        case 6: strcpy(d->content_date, "2026-13-01"); break;
        case 7: d->latency_us = -1; break;
        case 8: d->vector.le = (const unsigned char *)"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"; break;
        case 9: d->t_block = 0.5; break;
        case 10: r.admin.details = (pgcl_record_text){dup, sizeof dup - 1}; break;
        case 11: strcpy(r.key.key_id, "pgcld_0BADC0DE"); break;
        case 12: r.contest.reason.len = 0; break;
        case 13: r.policy.n_labels = 1; break;
        case 14: r.policy.label_list = list, r.policy.label_list_len = sizeof list; break;
        case 15: strcpy(r.legacy.writer_id, "a\tb"); break;
        case 16: r.resolution.outcome = PGCL_RECORD_UPHELD; break;
        case 17: r.kind = (pgcl_record_kind)9; break;
        }
        size_t len = 1;
        char why[256] = "";
        CHECK(pgcl_record_encode(&r, g_buf, sizeof g_buf, &len, why, sizeof why) == PGCL_ERR_INVALID && len == 0 &&
                  why[0],
              "%s: encoded (%s)", cases[i].what, why);
    }
    /* a buffer too small: PGCL_ERR_BUSY and the length it needs */
    pgcl_record r;
    PGCL_ASSERT(sample_record(SAMPLE_DECISION, &r));
    size_t len = 0;
    CHECK(pgcl_record_encode(&r, g_buf, 10, &len, NULL, 0) == PGCL_ERR_BUSY && len == 271, "a small buffer: %zu", len);
}

static void test_text_forms(void) {
    uint8_t id[16];
    char text[64];
    CHECK(pgcl_record_uuid_parse("0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091", id), "a UUID");
    pgcl_record_uuid_format(id, text);
    CHECK(strcmp(text, "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091") == 0, "the UUID back: %s", text);
    static const char *const not_uuids[] = {"0190B6A2-8f3c-7a11-9b2e-4c5d6e7f8091", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f809",
                                            "0190b6a28f3c-7a11-9b2e-4c5d6e7f80911", "0190b6a2-8f3c-7a11-9b2e-4c5d6e7f8091x",
                                            "0190b6a2-8f3c-7a11-9b2e_4c5d6e7f8091", ""};
    for (size_t i = 0; i < sizeof not_uuids / sizeof not_uuids[0]; i++)
        CHECK(!pgcl_record_uuid_parse(not_uuids[i], id), "not a UUID: %s", not_uuids[i]);
    for (int i = 0; i < 2000; i++) {
        int64_t us = i == 0 ? 0 : i == 1 ? PGCL_RECORD_TIME_END_US - 1 : rnd_time(), back = -1;
        pgcl_record_time_format(us, text);
        CHECK(pgcl_record_time_parse(text, &back) && back == us, "time %lld: %s", (long long)us, text);
    }
    int64_t us;
    CHECK(pgcl_record_time_parse("2026-11-21T10:33:00.123456Z", &us) && us == INT64_C(1795257180123456), "%lld",
          (long long)us);
    static const char *const not_times[] = {"2026-02-29T00:00:00.000000Z", "2026-11-21T10:33:60.000000Z",
                                            "2026-11-21T24:00:00.000000Z", "2026-11-21T10:33:00.12345Z",
                                            "2026-11-21T10:33:00.123456",  "1969-12-31T23:59:59.999999Z",
                                            "2026-11-21 10:33:00.123456Z", "2026-11-21T10:33:00.123456+00:00"};
    for (size_t i = 0; i < sizeof not_times / sizeof not_times[0]; i++)
        CHECK(!pgcl_record_time_parse(not_times[i], &us), "not a time: %s", not_times[i]);
    pgcl_record_decision d;
    memset(&d, 0, sizeof d);
    CHECK(pgcl_record_territories_parse("[\"DE\",\"FR\",\"GR\"]", &d) && d.n_territories == 3, "a scope");
    char scope[PGCL_RECORD_TERRITORIES_MAX * 5 + 3];
    pgcl_record_territories_format(&d, scope);
    CHECK(strcmp(scope, "[\"DE\",\"FR\",\"GR\"]") == 0, "the scope back: %s", scope);
    static const char *const not_scopes[] = {"[]", "[\"DE\",\"DE\"]", "[\"de\"]", "[\"DE\",]", "[ \"DE\"]", "\"DE\"",
                                             "[\"DEU\"]"};
    for (size_t i = 0; i < sizeof not_scopes / sizeof not_scopes[0]; i++)
        CHECK(!pgcl_record_territories_parse(not_scopes[i], &d), "not a scope: %s", not_scopes[i]);
    uint8_t h[4];
    CHECK(pgcl_record_hex_parse("0badc0de", h, 4) && !pgcl_record_hex_parse("0BADC0DE", h, 4) &&
              !pgcl_record_hex_parse("0badc0d", h, 4),
          "hex");
}

/* The record's model-name rule is the registry's (pgcl_registry_valid_name). */
static void test_model_names_agree_with_registry(void) {
    static const char *const names[] = {"toxicity", "Tox_1-a", "1.2.3", ".hidden", "a/b", "a b", "", "v.", "ü",
                                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (int dot = 0; dot < 2; dot++) {
            pgcl_record r;
            PGCL_ASSERT(sample_record(SAMPLE_DECISION, &r));
            char *field = dot ? r.decision.model_version : r.decision.model_name;
            snprintf(field, PGCL_RECORD_MODEL_NAME_MAX + 1, "%s", names[i]);
            bool fits = strlen(names[i]) <= PGCL_RECORD_MODEL_NAME_MAX;
            bool ours = fits && pgcl_record_check(&r, NULL, 0) == PGCL_OK;
            CHECK(ours == pgcl_registry_valid_name(names[i], dot), "'%s' (version: %d)", names[i], dot);
        }
    }
}

static void test_policy_reference_and_views(void) {
    pgcl_record r, back;
    PGCL_ASSERT(sample_record(SAMPLE_POLICY, &r));
    size_t len = encode(&r, "policy");
    uint8_t ref[32], leaf[32];
    CHECK(pgcl_record_policy_ref(&r.policy, ref, NULL, 0) == PGCL_OK, "policy ref");
    pgcl_record_leaf_hash(g_buf, len, leaf);
    CHECK(memcmp(ref, leaf, 32) == 0, "the policy's reference is its leaf hash");
    CHECK(pgcl_record_decode(g_buf, len, &back, NULL, 0) == PGCL_OK, "decode");
    pgcl_record_text t0 = pgcl_record_policy_label(&back.policy, 0), t1 = pgcl_record_policy_label(&back.policy, 1);
    CHECK(t0.len == 9 && memcmp(t0.p, "non_toxic", 9) == 0 && t1.len == 5 && memcmp(t1.p, "toxic", 5) == 0, "labels");
    PGCL_ASSERT(sample_record(SAMPLE_DECISION, &r));
    len = encode(&r, "decision");
    CHECK(pgcl_record_decode(g_buf, len, &back, NULL, 0) == PGCL_OK && back.decision.probabilities.le &&
              pgcl_record_f32_at(&back.decision.probabilities, 0) == 0.875f &&
              pgcl_record_f32_at(&back.decision.vector, 1) == -1.5f && memcmp(back.decision.policy_ref, ref, 32) == 0,
          "decoded floats and reference");
}

int main(void) {
    test_known_answers();
    test_random_round_trips();
    test_non_canonical_forms_refused();
    test_encoder_refuses_broken_rules();
    test_text_forms();
    test_model_names_agree_with_registry();
    test_policy_reference_and_views();
    return test_finish("test_record");
}
