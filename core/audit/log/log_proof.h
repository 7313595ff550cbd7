/* Proofs in the transparency-log shape (issue 28 item 3): an event's leaf, its RFC 9162 inclusion
 * path to a tree size a signed checkpoint covers, and consistency proofs between two sizes of one
 * writer's log. Store-neutral: read through audit_log.h and log.h's tile source; the checks are in
 * log/proof_check.h.
 *
 * Which tree a proof is against: the latest stored checkpoint of the leaf's log when it covers the
 * leaf (leaf_index < its size): then tree_size is that checkpoint's size and `checkpoint` its signed
 * note with every cosignature received; else the log's current size, with checkpoint NULL (the next
 * checkpoint will cover it: ask again, or POST /log/checkpoint). */
#ifndef PGCL_LOG_PROOF_H
#define PGCL_LOG_PROOF_H

#include <stddef.h>
#include <stdint.h>

#include "audit_log.h"
#include "merkle.h"
#include "status.h"

typedef struct pgcl_log_proof {
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1];
    uint64_t leaf_index;
    uint64_t tree_size;
    pgcl_merkle_hash root;    /* MTH of the first tree_size leaves */
    unsigned char *leaf_data; /* the record hashed as the leaf (malloc'd) */
    size_t leaf_len;
    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH]; /* PATH(leaf_index, D[0:tree_size]), leaf upwards */
    int path_len;
    char *checkpoint; /* the signed note proven against (malloc'd), or NULL */
} pgcl_log_proof;

/* The proof of leaf leaf_index of writer_id's log into *out (release it with pgcl_log_proof_release,
 * also after a failure). Checks what it serves: the record hashes to the leaf hash the path starts
 * from, the path leads to the root, and that root is the checkpoint's (PGCL_ERR_MISMATCH otherwise:
 * a store whose rows disagree with what it signed). PGCL_ERR_NOT_FOUND: no such log or leaf;
 * PGCL_ERR_NOMEM; the store's errors. */
pgcl_status pgcl_log_proof_read(pgcl_audit *a, const char *writer_id, uint64_t leaf_index, pgcl_log_proof *out,
                                char *err, int cap);
void pgcl_log_proof_release(pgcl_log_proof *p); /* accepts NULL and a zeroed struct */

/* RFC 9162 PROOF(first, D[0:second]) of writer_id's log with both roots. 0 < first <= second
 * (PGCL_ERR_INVALID otherwise); PGCL_ERR_NOT_FOUND: no such log, or second beyond its size. */
pgcl_status pgcl_log_consistency_read(pgcl_audit *a, const char *writer_id, uint64_t first, uint64_t second,
                                      pgcl_merkle_hash *first_root, pgcl_merkle_hash *second_root,
                                      pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *proof_len, char *err, int cap);

#endif
