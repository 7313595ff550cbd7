/* Inclusion proofs of chained events (audit chain encoding version 2; docs/audit.md, "Inclusion
 * proofs"): that a decision's row, as stored now, is leaf leaf_index of the Merkle tree whose root
 * the chain entry entry_seq commits to. Anyone holding the proof checks it without the database:
 *   leaf_hash = SHA-256(0x00 ‖ leaf_data)                              (the row's leaf encoding)
 *   root      = RFC 9162 §2.1.3.2 from leaf_hash, leaf_index, tree_size and path
 *   hash      = SHA-256(INTEGER entry_seq, TEXT "commit", INTEGER tree_size, TEXT root, TEXT prev_hash)
 * and the entry is leaf entry_seq - 1 of the log-wide tree whose root a signed checkpoint signs:
 *   log leaf  = SHA-256(0x00 ‖ the 32 bytes of hash);  log root = RFC 9162 from it along log_path
 * docs/verify_proof.py does all this (but the Ed25519 signature, which pgcld audit verify-proof and
 * pgcld audit verify --checkpoint check). */
#ifndef PGCL_CHAIN_PROOF_H
#define PGCL_CHAIN_PROOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet_checkpoint.h"
#include "merkle.h"
#include "signing.h"
#include "status.h"

struct sqlite3;

typedef struct pgcl_chain_proof {
    int64_t row_seq;          /* the decision's seq in its table */
    unsigned char *leaf_data; /* its leaf encoding as stored now (malloc'd) */
    size_t leaf_data_len;
    pgcl_merkle_hash leaf_hash; /* the leaf as chained (the commit's stored leaf) */
    int64_t leaf_index, tree_size;
    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH];
    int path_len;
    pgcl_merkle_hash root;
    int64_t entry_seq; /* the commit entry */
    char prev_hash[65], entry_hash[65];
    /* The entry in the log-wide tree (pgcl_chain_log_tree) of the latest signed checkpoint (format
     * version 2) that covers it, or, when none does, of the chain as it is now. */
    int64_t log_index, log_size; /* entry_seq - 1; the checkpoint's head_seq (or the head's seq) */
    pgcl_merkle_hash log_path[PGCL_MERKLE_MAX_PATH];
    int log_path_len;
    pgcl_merkle_hash log_root;
    bool has_checkpoint;
    pgcl_checkpoint checkpoint; /* valid when has_checkpoint: as recorded in audit_checkpoints */
    /* The PostgreSQL store: the writer whose chain holds the entry (entry_seq, log_* are in its chain
     * and its log tree), and the latest fleet checkpoint that covers the entry (NULL when none does;
     * malloc'd, freed by pgcl_chain_proof_release). "" and NULL for SQLite. */
    char writer_id[PGCL_FLEET_WRITER_ID_MAX + 1];
    pgcl_fleet_checkpoint *fleet;
} pgcl_chain_proof;

/* The proof for decision decision_id, read on db (a read-only connection with no transaction open,
 * e.g. one of the store's reader pool) in one read transaction (one snapshot), which it ends.
 * PGCL_ERR_NOT_FOUND: no such decision; PGCL_ERR_UNSUPPORTED: it was chained in encoding version 1
 * (or predates the chain), which has no Merkle tree; PGCL_ERR_DB: the database could not be read.
 * On PGCL_OK release it with pgcl_chain_proof_release. */
pgcl_status pgcl_chain_prove_decision(struct sqlite3 *db, const char *decision_id, pgcl_chain_proof *out, char *err,
                                      int cap);
void pgcl_chain_proof_release(pgcl_chain_proof *p);

/* Checks a proof without the database, as docs/verify_proof.py does: leaf_data, decoded by its
 * layout (chain_decoding.h), is a decisions row whose decision_id column is decision_id (and whose
 * seq is row_seq, unless row_seq is 0: a proof read from a file does not carry it), it hashes to
 * leaf_hash, the path leads to root, root and prev_hash give entry_hash, (unless
 * NULL) entry_hash is the one the caller holds, the entry is in the log tree of log_root, and a
 * checkpoint, when the proof carries one, signs that root with a valid signature. False with the
 * reason in why. */
bool pgcl_chain_proof_check(const pgcl_chain_proof *p, const char *decision_id, const char *entry_hash, char *why,
                            int cap);

/* The log-wide Merkle tree over the chain's entries 1..size (docs/audit.md, "The log tree"):
 * leaf i = SHA-256(0x00 ‖ the 32 bytes of entry i + 1's hash). Reads on db (inside the caller's
 * read transaction, so that they are one snapshot) and writes the root, and, when index >= 0, the
 * inclusion path of leaf index into path/path_len. From the stored subtrees (log_tree.h): O(log size)
 * rows; where a node is not stored, from every entry's hash (O(size) time, 32 bytes of memory per
 * entry). size must not exceed the head's seq. PGCL_ERR_FORMAT when entries 1..size are not all
 * there with well-formed hashes (or a stored node is malformed). */
pgcl_status pgcl_chain_log_tree(struct sqlite3 *db, int64_t size, int64_t index, pgcl_merkle_hash *root,
                                pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap);

/* The roots of the log trees over entries 1..first and 1..second (1 <= first <= second <= the
 * head's seq) and the RFC 9162 §2.1.4.1 consistency proof that the first is a prefix of the second
 * (GET /v1/audit/consistency). Same reads, cost and errors as pgcl_chain_log_tree. */
pgcl_status pgcl_chain_log_consistency(struct sqlite3 *db, int64_t first, int64_t second, pgcl_merkle_hash *first_root,
                                       pgcl_merkle_hash *second_root, pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH],
                                       int *proof_len, char *err, int cap);

/* A consistency proof between two sizes of the log tree, as GET /v1/audit/consistency answers it. */
typedef struct pgcl_log_consistency {
    int64_t first, second; /* tree sizes: signed checkpoints' head_seq */
    int64_t head_seq;      /* the chain's head when it was read */
    char writer_id[PGCL_FLEET_WRITER_ID_MAX + 1]; /* PostgreSQL: the writer whose log it is; "" for SQLite */
    pgcl_merkle_hash first_root, second_root;
    pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH];
    int proof_len;
} pgcl_log_consistency;

/* The consistency proof between the log trees of first and second entries, read on db (a read-only
 * connection with no transaction open) in one read transaction, which it ends.
 * PGCL_ERR_INVALID unless 1 <= first <= second; PGCL_ERR_NOT_FOUND when second is beyond the chain's
 * head (out->head_seq says where it ends); else as pgcl_chain_log_consistency. */
/* The start of every store's consistency proof: zeroes out, records the sizes, and checks
 * 1 <= first <= second (PGCL_ERR_INVALID with err otherwise). */
pgcl_status pgcl_log_consistency_start(pgcl_log_consistency *out, int64_t first, int64_t second, char *err, int cap);

pgcl_status pgcl_chain_prove_consistency(struct sqlite3 *db, int64_t first, int64_t second, pgcl_log_consistency *out,
                                         char *err, int cap);

/* The log tree's leaves for entries 1..size, malloc'd into *leaves (free it): for a caller that
 * needs the roots of several sizes from one read (pgcl_merkle_root of each prefix). Errors as above. */
pgcl_status pgcl_chain_log_leaves(struct sqlite3 *db, int64_t size, pgcl_merkle_hash **leaves, char *err, int cap);

#endif
