/* Records of the events as the stores hold them today (issue 28): each store's writer turns the
 * row it is committing into its log record with these, so the conversion is written once.
 * Texts are pgcld's own forms (record.h's record_text.c parsers); a text not of its form is
 * PGCL_ERR_INVALID with why naming the field. */
#ifndef PGCL_RECORD_ROWS_H
#define PGCL_RECORD_ROWS_H

#include <stdint.h>

#include "audit.h"
#include "record.h"
#include "status.h"

/* A decision's record and its policy's, with the storage they point into (and into the row's
 * strings and arrays: the row must outlive the records). Large (about 150 KB): keep one per
 * writer, not on a stack. */
typedef struct pgcl_decision_record_buf {
    pgcl_record decision; /* kind DECISION, policy_ref = the leaf hash of `policy` */
    pgcl_record policy;   /* kind POLICY */
    pgcl_record_text labels[PGCL_RECORD_CLASSES_MAX];
    float probabilities[PGCL_RECORD_CLASSES_MAX];
    char label_bytes[PGCL_RECORD_CLASSES_MAX * PGCL_RECORD_LABEL_MAX]; /* labels read from probabilities_json */
} pgcl_decision_record_buf;

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
