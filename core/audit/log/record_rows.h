/* Records of the events as the stores hold them today (issue 28): each store's writer turns the
 * row it is committing into its log record with these, so the conversion is written once.
 * Texts are pgcld's own forms (record.h's record_text.c parsers); a text not of its form is
 * PGCL_ERR_INVALID with why naming the field. */
#ifndef PGCL_RECORD_ROWS_H
#define PGCL_RECORD_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "record.h"
#include "status.h"

/* One policy a writer converted and checked: the key is the exact policy_json bytes and labels it
 * was read with (owned copies); the value what they gave — the decision's policy fields and the
 * policy record's leaf hash (policy_ref). An entry with policy_json NULL is empty. */
typedef struct pgcl_policy_cache_entry {
    char *policy_json; /* (policy_len bytes, not NUL-terminated) owned */
    size_t policy_len;
    char *label_bytes;    /* owned: the labels back to back */
    uint32_t *label_ends; /* owned: (n_labels) label i is label_bytes[label_ends[i-1] .. label_ends[i]) */
    uint16_t n_labels;
    pgcl_record_policy_kind kind;
    uint16_t policy_label;                    /* threshold: the label's position */
    double t_review, t_block, min_confidence; /* as pgcl_record_decision's */
    uint8_t policy_ref[PGCL_RECORD_SHA256_BYTES];
} pgcl_policy_cache_entry;

#define PGCL_POLICY_CACHE_SLOTS 8 /* a writer sees few distinct policies (one per model version) */

/* A decision's record and its policy's, with the storage they point into (and into the row's
 * strings and arrays: the row must outlive the records), and the policies converted so far. Large
 * (about 150 KB): keep one per writer, made by pgcl_decision_record_buf_create. All zero is an
 * empty buf too, its policy cache off (destroy it all the same). */
typedef struct pgcl_decision_record_buf {
    pgcl_record decision; /* kind DECISION, policy_ref = the leaf hash of `policy` */
    pgcl_record policy;   /* kind POLICY */
    pgcl_record_text labels[PGCL_RECORD_CLASSES_MAX];
    float probabilities[PGCL_RECORD_CLASSES_MAX];
    char label_bytes[PGCL_RECORD_CLASSES_MAX * PGCL_RECORD_LABEL_MAX]; /* labels read from probabilities_json */
    /* the policies: policy_json parsed, the policy record checked and hashed once per distinct
     * (policy_json bytes, labels); use_policy_cache false converts every row from scratch (the
     * naive oracle the tests compare against) */
    bool use_policy_cache;
    pgcl_policy_cache_entry policy_cache[PGCL_POLICY_CACHE_SLOTS];
    unsigned policy_cache_next;                      /* the slot the next new policy replaces */
    uint64_t policy_cache_hits, policy_cache_misses; /* counted when use_policy_cache */
} pgcl_decision_record_buf;

/* An empty buf with the policy cache on; NULL when out of memory. */
pgcl_decision_record_buf *pgcl_decision_record_buf_create(void);

/* Frees b and its cached policies; NULL is a no-op. */
void pgcl_decision_record_buf_destroy(pgcl_decision_record_buf *b);

/* The record of decision row `row` committed at created_at_us; input_digest: SHA-256 of the stored
 * input bytes (32, or NULL when no input is stored). The labels, probabilities and task are the
 * row's (labels, probabilities, task) when set, else read from probabilities_json (its keys in
 * order, its values) and the label count (2: binary, else multiclass). */
pgcl_status pgcl_record_of_decision_row(const pgcl_decision_row *row, int64_t created_at_us,
                                        const unsigned char *input_digest, pgcl_decision_record_buf *out, char *why,
                                        int cap);

/* An admin_events row: action "key.create" / "key.import" / "key.revoke" is a key event (its
 * key_id, role and name read from details_json), any other an admin event. event_id: the event's
 * UUIDv7 text. */
pgcl_status pgcl_record_of_admin_event(const char *event_id, const char *created_at, const char *actor,
                                       const char *action, const char *target, const char *details_json,
                                       pgcl_record *out, char *why, int cap);

pgcl_status pgcl_record_of_contest(const char *contest_id, const char *decision_id, const char *filed_at,
                                   const char *filer_key_id, const char *filed_by, const char *reason, pgcl_record *out,
                                   char *why, int cap);

pgcl_status pgcl_record_of_resolution(const char *contest_id, const char *decision_id, const char *resolved_at,
                                      const char *outcome, const char *resolver_key_id, const char *resolved_by,
                                      const char *corrected_label, const char *note, pgcl_record *out, char *why,
                                      int cap);

#endif
