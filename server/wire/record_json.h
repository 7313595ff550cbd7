/* A transparency-log record (core/audit/log/record.h) as JSON, field by field as decoded by
 * position: the "record" member of a tlog-shape proof (openapi.yaml, TlogProof). Also the proof's
 * JSON itself. Hashes and byte strings are lowercase hex inside a record (as the rows hold them),
 * base64 in the proof's log fields (as checkpoints and tiles hold them). */
#ifndef PGCLD_RECORD_JSON_H
#define PGCLD_RECORD_JSON_H

#include <jansson.h>

#include "log_proof.h"
#include "record.h"

/* r as a JSON object {"kind": ..., fields...}; NULL when out of memory. */
json_t *pgcld_record_json(const pgcl_record *r);

/* A tlog-shape proof of the event (kind, id): {format: "tlog", kind, id, writer_id, leaf_index,
 * leaf_data, tree_size, root, checkpoint, inclusion, record}. NULL when out of memory or when
 * leaf_data is not a record (never for a proof log_proof.c read). */
json_t *pgcld_tlog_proof_json(const char *kind, const char *id, const pgcl_log_proof *p);

/* A consistency proof of writer_id's log: {format: "tlog", writer_id, first, second, first_root,
 * second_root, proof}. */
json_t *pgcld_tlog_consistency_json(const char *writer_id, uint64_t first, uint64_t second,
                                    const pgcl_merkle_hash *first_root, const pgcl_merkle_hash *second_root,
                                    const pgcl_merkle_hash *proof, int proof_len);

#endif
