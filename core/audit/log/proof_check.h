/* Checks a proof in the transparency-log shape (log_proof.h; GET /v1/decisions/{id}/proof with
 * "format": "tlog"), offline and store-neutral: what `pgcld audit verify-proof` runs. The Python
 * twin is docs/verify_proof.py. */
#ifndef PGCL_PROOF_CHECK_H
#define PGCL_PROOF_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "note.h"
#include "record.h"
#include "status.h"

/* What a proof claims: the fields of its JSON, decoded. */
typedef struct pgcl_tlog_proof_claim {
    const char *writer_id;
    const unsigned char *leaf_data;
    size_t leaf_len;
    uint64_t leaf_index;
    uint64_t tree_size;
    pgcl_merkle_hash root;
    const pgcl_merkle_hash *path;
    int path_len;
    const char *checkpoint; /* the signed note, NUL-terminated; NULL: none */
} pgcl_tlog_proof_claim;

/* The event a proof is expected to prove: kind "decision", "contest" or "resolution" (by its contest
 * id) and its UUID text; NULL kind: any event (the caller reads *record). */
typedef struct pgcl_tlog_proof_expect {
    const char *kind;
    const char *id;
} pgcl_tlog_proof_expect;

/* Checks c: the leaf hash is SHA-256(0x00 ‖ leaf_data); the path leads from it, at leaf_index, to
 * root in a tree of tree_size; the checkpoint is a note signed by key (whose name is the log's
 * origin, which must end in "/<writer_id>") whose text signs exactly (tree_size, root); leaf_data
 * decodes (by position, pgcl_record_decode) to a record into *record (pointing into leaf_data); and
 * the record is the expected event (its id field, never a search of its bytes). A proof without a
 * checkpoint is refused (nothing signs its root). PGCL_OK, or PGCL_ERR_MISMATCH /
 * PGCL_ERR_FORMAT / PGCL_ERR_NOT_FOUND with why saying which check failed. */
pgcl_status pgcl_tlog_proof_check(const pgcl_tlog_proof_claim *c, const pgcl_note_verifier *key,
                                  const pgcl_tlog_proof_expect *expect, pgcl_record *record, char *why, int cap);

/* The id field of r that names it for kind ("decision": decision_id; "contest", "resolution":
 * contest_id) as UUID text into out; false when r is of another kind. */
bool pgcl_tlog_record_id(const pgcl_record *r, const char *kind, char out[37]);

#endif
