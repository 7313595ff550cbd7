/* The canonical binary record of every event of the transparency log (docs/log-record.md): one
 * RFC 6962/9162 leaf per event, leaf hash = SHA-256(0x00 ‖ record). Store-neutral: this module
 * turns an event into its bytes and bytes back into the event, and knows nothing of SQLite,
 * PostgreSQL or HTTP.
 *
 * A record is a version byte (PGCL_RECORD_VERSION), a kind byte (pgcl_record_kind), then the
 * kind's fields at documented positions: fixed-width fields first at fixed offsets, then the
 * variable part in a fixed order (counted float arrays, length-prefixed texts, and the fields a
 * flag or enum of the fixed part says are present). Integers are big-endian, IEEE-754 values
 * little-endian (the order of the vector and input blobs pgcld stores), lengths unsigned LEB128
 * varints in their shortest form.
 *
 * Every record has exactly one encoding: pgcl_record_decode() refuses anything that
 * pgcl_record_encode() would not write for the struct it decodes to (trailing or missing bytes,
 * an unknown version or kind, an enum out of range, a text too long or not of its character set,
 * a redundant varint byte, padding that is not zero, a flag bit no field uses, a value out of its
 * range), so decode(encode(r)) == r and encode(decode(b)) == b for every b it accepts. Both run
 * the same field rules (pgcl_record_check). Pure functions: any thread, no allocation, no I/O.
 *
 * Structs borrow: long texts (pgcl_record_text) and float arrays (pgcl_record_f32s) point into
 * the caller's memory for an encode and into the record's bytes after a decode, which must then
 * outlive the struct. Short texts are NUL-terminated arrays in the struct ("" = absent where a
 * field is optional; no field may hold an empty text otherwise). */
#ifndef PGCL_RECORD_H
#define PGCL_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define PGCL_RECORD_VERSION 1
#define PGCL_RECORD_MAX_BYTES (256u * 1024u) /* no record of this version is longer (a policy of 1024 labels) */

/* ---- limits: today's validation of each field (record_check.c ties them to their sources) ---- */
#define PGCL_RECORD_UUID_BYTES 16
#define PGCL_RECORD_SHA256_BYTES 32
#define PGCL_RECORD_TRACE_ID_BYTES 16
#define PGCL_RECORD_CLASSES_MAX 1024  /* K: 2..1024 labels (config.json dims.K) */
#define PGCL_RECORD_DIMS_MAX 4096     /* d: 1..4096 (config.json dims.d) */
#define PGCL_RECORD_REQUEST_ID_MAX 128
#define PGCL_RECORD_ITEM_ID_MAX 256
#define PGCL_RECORD_MODEL_NAME_MAX 64 /* a model's name and its version (the registry's names) */
#define PGCL_RECORD_LABEL_MAX 128
#define PGCL_RECORD_ACTOR_MAX 256
#define PGCL_RECORD_ACTION_MAX 64
#define PGCL_RECORD_TARGET_MAX 256
#define PGCL_RECORD_JSON_MAX 65536 /* an admin event's details, a policy's JSON */
#define PGCL_RECORD_KEY_NAME_MAX 128
#define PGCL_RECORD_KEY_ID_LEN 14 /* "pgcld_" + 8 lowercase hex: 4 bytes in a record */
#define PGCL_RECORD_REASON_MAX 2000 /* a contest's reason, a resolution's note */
#define PGCL_RECORD_WRITER_ID_MAX 128
#define PGCL_RECORD_TERRITORIES_MAX 30 /* the EEA's countries */
#define PGCL_RECORD_DATE_LEN 10        /* "YYYY-MM-DD" */
/* Times: microseconds since 1970-01-01T00:00:00Z, from 0 to the end of year 9999 (exclusive). */
#define PGCL_RECORD_TIME_END_US INT64_C(253402300800000000)

typedef enum pgcl_record_kind {
    PGCL_RECORD_DECISION = 1,
    PGCL_RECORD_ADMIN_EVENT = 2,
    PGCL_RECORD_KEY_EVENT = 3,
    PGCL_RECORD_CONTEST = 4,
    PGCL_RECORD_RESOLUTION = 5,
    PGCL_RECORD_POLICY = 6,
    PGCL_RECORD_LEGACY_HEAD = 7, /* the first leaf of a log that continues a pre-log audit chain */
} pgcl_record_kind;
#define PGCL_RECORD_KINDS 7

/* Enums are one byte each; their values are the format's and never change. */
typedef enum { PGCL_RECORD_TASK_BINARY = 0, PGCL_RECORD_TASK_MULTICLASS = 1, PGCL_RECORD_TASK_ORDINAL = 2 } pgcl_record_task;
typedef enum { PGCL_RECORD_ALLOW = 0, PGCL_RECORD_REVIEW = 1, PGCL_RECORD_BLOCK = 2 } pgcl_record_verdict;
typedef enum { PGCL_RECORD_POLICY_THRESHOLD = 0, PGCL_RECORD_POLICY_LABEL_MAP = 1 } pgcl_record_policy_kind;
typedef enum { PGCL_RECORD_INPUT_NONE = 0, PGCL_RECORD_INPUT_F16 = 1, PGCL_RECORD_INPUT_F32 = 2 } pgcl_record_dtype;
typedef enum { PGCL_RECORD_KEY_CREATE = 0, PGCL_RECORD_KEY_IMPORT = 1, PGCL_RECORD_KEY_REVOKE = 2 } pgcl_record_key_action;
typedef enum { PGCL_RECORD_ROLE_SCORER = 0, PGCL_RECORD_ROLE_REVIEWER = 1, PGCL_RECORD_ROLE_ADMIN = 2 } pgcl_record_role;
typedef enum { PGCL_RECORD_UPHELD = 0, PGCL_RECORD_OVERTURNED = 1 } pgcl_record_outcome;

/* A borrowed byte string (not NUL-terminated). */
typedef struct pgcl_record_text {
    const char *p;
    size_t len;
} pgcl_record_text;

/* n float32 values: either native floats (an encoder's input) or their little-endian bytes in a
 * record (a decoder's output); exactly one of the two pointers is set when n > 0. */
typedef struct pgcl_record_f32s {
    uint32_t n;
    const float *native;
    const unsigned char *le;
} pgcl_record_f32s;

/* Value i of a (i < a->n). */
float pgcl_record_f32_at(const pgcl_record_f32s *a, uint32_t i);

/* A scored item. What is not here is derived: the label is the policy's labels[label_index], the
 * probabilities' JSON pairs those labels with probabilities, toxicity (binary task) is
 * probabilities[1], the policy's JSON is the policy record's whose leaf hash is policy_ref. */
typedef struct pgcl_record_decision {
    uint8_t decision_id[PGCL_RECORD_UUID_BYTES]; /* UUIDv7 */
    int64_t created_at_us;
    bool has_trace_id;
    uint8_t trace_id[PGCL_RECORD_TRACE_ID_BYTES]; /* all zero when !has_trace_id */
    uint8_t model_sha256[PGCL_RECORD_SHA256_BYTES];
    uint8_t policy_ref[PGCL_RECORD_SHA256_BYTES];   /* leaf hash of the policy record in force */
    uint8_t input_sha256[PGCL_RECORD_SHA256_BYTES]; /* of the D float32 input values, little-endian */
    pgcl_record_task task;
    pgcl_record_verdict decision;
    pgcl_record_policy_kind policy_kind;
    pgcl_record_dtype stored_dtype; /* the stored input's dtype; NONE: no input stored */
    uint16_t label_index;           /* < probabilities.n */
    uint16_t policy_label;          /* threshold: the scored label (< K); label_map: 0 */
    double t_review, t_block;       /* threshold: 0 <= t_review <= t_block <= 1; label_map: 0 */
    double min_confidence;          /* label_map: 0..1; threshold: 0 */
    pgcl_record_f32s probabilities; /* K = n: 2..1024, each 0..1 */
    pgcl_record_f32s vector;        /* d = n: 1..4096, finite */
    int64_t latency_us;             /* >= 0 */
    char request_id[PGCL_RECORD_REQUEST_ID_MAX + 1]; /* 1..128 visible ASCII, not " ' \ */
    char item_id[PGCL_RECORD_ITEM_ID_MAX + 1];       /* 1..256 bytes of UTF-8 without NUL */
    char model_name[PGCL_RECORD_MODEL_NAME_MAX + 1];
    char model_version[PGCL_RECORD_MODEL_NAME_MAX + 1];
    uint8_t stored_digest[PGCL_RECORD_SHA256_BYTES]; /* F16: SHA-256 of the stored bytes; F32: equals
                                                      * input_sha256; NONE: all zero */
    char content_date[PGCL_RECORD_DATE_LEN + 1];     /* "YYYY-MM-DD" or "" */
    uint8_t n_territories;                           /* 0 (absent) or 1..30 */
    char territories[PGCL_RECORD_TERRITORIES_MAX][3]; /* ISO 3166-1 alpha-2, uppercase, unique, in order */
    char content_language[3];                         /* ISO 639-1 uppercase, or "" */
} pgcl_record_decision;

/* An administrative action other than a key's (model.activate, model.upload, shadow.attach, ...). */
typedef struct pgcl_record_admin_event {
    uint8_t event_id[PGCL_RECORD_UUID_BYTES]; /* UUIDv7 */
    int64_t created_at_us;
    char actor[PGCL_RECORD_ACTOR_MAX + 1];   /* 1..256, UTF-8 without control characters */
    char action[PGCL_RECORD_ACTION_MAX + 1]; /* 1..64 of [a-z0-9_.], never "key." + ... (a key event) */
    char target[PGCL_RECORD_TARGET_MAX + 1]; /* 1..256, UTF-8 without control characters */
    pgcl_record_text details;                /* a JSON object, 2..65536 bytes */
} pgcl_record_admin_event;

/* An API key's creation, import or revocation. */
typedef struct pgcl_record_key_event {
    uint8_t event_id[PGCL_RECORD_UUID_BYTES]; /* UUIDv7 */
    int64_t created_at_us;
    pgcl_record_key_action action;
    pgcl_record_role role;
    char key_id[PGCL_RECORD_KEY_ID_LEN + 1];    /* "pgcld_" + 8 lowercase hex */
    char name[PGCL_RECORD_KEY_NAME_MAX + 1];    /* 1..128, UTF-8 without control characters */
    char actor[PGCL_RECORD_ACTOR_MAX + 1];
} pgcl_record_key_event;

typedef struct pgcl_record_contest {
    uint8_t contest_id[PGCL_RECORD_UUID_BYTES];  /* UUIDv7 */
    uint8_t decision_id[PGCL_RECORD_UUID_BYTES]; /* UUIDv7 */
    int64_t filed_at_us;
    char filer_key_id[PGCL_RECORD_KEY_ID_LEN + 1]; /* "" when keys are off */
    char filed_by[PGCL_RECORD_ACTOR_MAX + 1];
    pgcl_record_text reason; /* 1..2000 bytes of UTF-8 without NUL */
} pgcl_record_contest;

typedef struct pgcl_record_resolution {
    uint8_t contest_id[PGCL_RECORD_UUID_BYTES];  /* UUIDv7 */
    uint8_t decision_id[PGCL_RECORD_UUID_BYTES]; /* the contested decision (the contest's) */
    int64_t resolved_at_us;
    pgcl_record_outcome outcome;
    char resolver_key_id[PGCL_RECORD_KEY_ID_LEN + 1];    /* "" when keys are off */
    char resolved_by[PGCL_RECORD_ACTOR_MAX + 1];
    char corrected_label[PGCL_RECORD_LABEL_MAX + 1];     /* "" or 1..128 bytes; only when OVERTURNED */
    pgcl_record_text note;                               /* 1..2000 bytes of UTF-8 without NUL */
} pgcl_record_resolution;

/* A decision policy with the labels it and its decisions are read through. Content only (no time,
 * no seq): its leaf hash is the same in every log, and decisions name it by that hash. The labels
 * are given as an array (an encoder's input, `labels`) or, after a decode, as the record's encoded
 * list (`label_list`); pgcl_record_policy_label() reads either. */
typedef struct pgcl_record_policy {
    uint16_t n_labels;                /* K: 2..1024 */
    const pgcl_record_text *labels;   /* (n_labels) each 1..128 bytes of UTF-8 without NUL, unique */
    const unsigned char *label_list;  /* decode: the n_labels length-prefixed labels in the record */
    size_t label_list_len;
    pgcl_record_text policy_json;     /* the policy object as pgcld stores it today, 2..65536 bytes */
} pgcl_record_policy;

/* Label i of p (i < n_labels). */
pgcl_record_text pgcl_record_policy_label(const pgcl_record_policy *p, uint16_t i);

/* The head of the audit chain of a database written before the log (docs/audit.md): the first
 * leaf of its log, so the log extends that chain's history. */
typedef struct pgcl_record_legacy_head {
    int64_t created_at_us;  /* when the log began */
    int64_t head_seq;       /* audit_chain.seq of the head entry, >= 1 */
    uint8_t head_hash[PGCL_RECORD_SHA256_BYTES]; /* its hash (the hex of audit_chain.hash, decoded) */
    bool has_log_root;
    uint8_t log_root[PGCL_RECORD_SHA256_BYTES];  /* the chain's log tree root over entries 1..head_seq;
                                                  * all zero when !has_log_root */
    char writer_id[PGCL_RECORD_WRITER_ID_MAX + 1]; /* PostgreSQL: the chain's writer; "" for SQLite */
} pgcl_record_legacy_head;

typedef struct pgcl_record {
    pgcl_record_kind kind;
    union {
        pgcl_record_decision decision;
        pgcl_record_admin_event admin;
        pgcl_record_key_event key;
        pgcl_record_contest contest;
        pgcl_record_resolution resolution;
        pgcl_record_policy policy;
        pgcl_record_legacy_head legacy;
    };
} pgcl_record;

/* The kind's name ("decision", "admin_event", ...), or "unknown". */
const char *pgcl_record_kind_name(int kind);

/* Whether every field of r follows its rule (the rules above and docs/log-record.md). PGCL_OK, or
 * PGCL_ERR_INVALID with why naming the field and the rule. */
pgcl_status pgcl_record_check(const pgcl_record *r, char *why, int cap);

/* The record of r into out[0..cap). *len is always set to the record's length when r is valid.
 * PGCL_OK; PGCL_ERR_INVALID (why says which rule r breaks; nothing written); PGCL_ERR_BUSY when
 * cap < *len (nothing written: retry with *len bytes). Never longer than PGCL_RECORD_MAX_BYTES. */
pgcl_status pgcl_record_encode(const pgcl_record *r, unsigned char *out, size_t cap, size_t *len, char *why,
                               int cap_why);

/* Decodes data[0..len) into *out (pointing into data). PGCL_OK, or PGCL_ERR_FORMAT with why
 * naming the field and its byte offset (PGCL_ERR_UNSUPPORTED for a version other than
 * PGCL_RECORD_VERSION). Fuzz-safe: reads nothing outside data[0..len). */
pgcl_status pgcl_record_decode(const unsigned char *data, size_t len, pgcl_record *out, char *why, int cap);

/* Whether a and b are the same event: every field equal (floats bit for bit, labels and texts byte
 * for byte, whichever form they are given in). */
bool pgcl_record_equal(const pgcl_record *a, const pgcl_record *b);

/* The leaf hash of a record: SHA-256(0x00 ‖ data[0..len)). */
void pgcl_record_leaf_hash(const unsigned char *data, size_t len, uint8_t out[PGCL_RECORD_SHA256_BYTES]);

/* A policy's reference (what decisions carry as policy_ref): the leaf hash of its record. PGCL_OK,
 * PGCL_ERR_INVALID (a rule broken, why set) or PGCL_ERR_NOMEM. */
pgcl_status pgcl_record_policy_ref(const pgcl_record_policy *p, uint8_t out[PGCL_RECORD_SHA256_BYTES], char *why,
                                   int cap);

/* ---- today's text forms of the fields (record_text.c): what the stores hold now ---- */

/* A UUID as 36 lowercase characters ("0190b6a2-...") from/to its 16 bytes. parse: false unless
 * text is exactly the canonical lowercase form. */
bool pgcl_record_uuid_parse(const char *text, uint8_t out[PGCL_RECORD_UUID_BYTES]);
void pgcl_record_uuid_format(const uint8_t id[PGCL_RECORD_UUID_BYTES], char out[37]);

/* n bytes from/to 2n lowercase hex digits (SHA-256s, trace ids). parse: false unless text is
 * exactly 2n lowercase hex digits. */
bool pgcl_record_hex_parse(const char *text, uint8_t *out, size_t n);
void pgcl_record_hex_format(const uint8_t *bytes, size_t n, char *out); /* 2n + 1 bytes */

/* A time as pgcld writes it ("2026-11-21T10:33:00.123456Z", clock.h) from/to microseconds since
 * the epoch. parse: false unless text is exactly that form, a real date and time, in range. */
bool pgcl_record_time_parse(const char *text, int64_t *us);
void pgcl_record_time_format(int64_t us, char out[28]); /* us in [0, PGCL_RECORD_TIME_END_US) */

/* territorial_scope's JSON text as pgcld writes it (["DE","FR"]) from/to d's territories.
 * parse: false unless text is exactly that form with 1..30 unique codes of two letters A-Z. */
bool pgcl_record_territories_parse(const char *json, pgcl_record_decision *d);
void pgcl_record_territories_format(const pgcl_record_decision *d, char out[PGCL_RECORD_TERRITORIES_MAX * 5 + 3]);

#endif
