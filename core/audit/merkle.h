/* Merkle trees as RFC 9162 (Certificate Transparency v2) §2.1 defines them, for the audit chain's
 * encoding version 2 (issue 16; docs/audit.md): the tree over one group commit's events and the
 * log-wide tree over commit roots that signed checkpoints cover.
 *
 *   leaf hash  = SHA-256(0x00 ‖ data)
 *   node hash  = SHA-256(0x01 ‖ left ‖ right)
 *   MTH({})    = SHA-256()                 (the empty tree)
 *   MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])) with k the largest power of two below n.
 *
 * Every function takes leaf *hashes* (already hashed with pgcl_merkle_leaf_hash), so a tree can be
 * rebuilt from stored leaf hashes without the events. Proofs are ordered from the leaf upwards, as
 * the RFC's verification algorithms read them. Sizes and indices are uint64_t: a path holds at most
 * PGCL_MERKLE_MAX_PATH hashes. The builders are O(n) in time and O(log n) in memory; tests check
 * them against a direct transcription of the RFC's recursive definitions (tests/core/test_merkle.c). */
#ifndef PGCL_MERKLE_H
#define PGCL_MERKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGCL_MERKLE_HASH_BYTES 32
#define PGCL_MERKLE_MAX_PATH 64 /* an inclusion path of a tree of < 2^64 leaves; a consistency proof + 1 */

typedef struct pgcl_merkle_hash {
    unsigned char b[PGCL_MERKLE_HASH_BYTES];
} pgcl_merkle_hash;

/* SHA-256(0x00 ‖ data[0:len)). */
pgcl_merkle_hash pgcl_merkle_leaf_hash(const void *data, size_t len);

/* SHA-256(0x01 ‖ left ‖ right). */
pgcl_merkle_hash pgcl_merkle_node_hash(const pgcl_merkle_hash *left, const pgcl_merkle_hash *right);

/* MTH(D[0:n]) over the leaf hashes leaves[0..n); n = 0 gives SHA-256 of the empty string. */
pgcl_merkle_hash pgcl_merkle_root(const pgcl_merkle_hash *leaves, uint64_t n);

/* ---- a tree grown one leaf at a time ----
 * node[i] is a perfect subtree of 2^height[i] leaves; once merged, heights strictly decrease upwards,
 * so the stack is the leaf count's binary decomposition, largest (leftmost) subtree at the bottom:
 * O(log n) memory for a walk that checks or stores each complete subtree as it is made (the
 * verifiers, the log tree's writer). Zero it to start. */
typedef struct pgcl_merkle_stack {
    pgcl_merkle_hash node[PGCL_MERKLE_MAX_PATH + 1];
    int height[PGCL_MERKLE_MAX_PATH + 1];
    int top;
} pgcl_merkle_stack;

/* Pushes a leaf hash; then call pgcl_merkle_stack_merge until it returns false. */
void pgcl_merkle_stack_push(pgcl_merkle_stack *s, const pgcl_merkle_hash *leaf);
/* Merges the two top subtrees when they are of one height: true with *level, the height of the node
 * just made (s->node[s->top - 1], covering leaves j·2^level .. (j+1)·2^level − 1 for the last leaf
 * pushed, index l, and j = l >> level); false when none is left to merge. */
bool pgcl_merkle_stack_merge(pgcl_merkle_stack *s, int *level);
/* MTH of the leaves pushed (at least one, asserted): node(largest subtree, MTH(the rest)), folded
 * from the right. */
pgcl_merkle_hash pgcl_merkle_stack_root(const pgcl_merkle_stack *s);

/* The audit path PATH(index, D[0:n]) of RFC 9162 §2.1.3.1 into path[], leaf upwards; returns its
 * length (0 for a tree of one leaf). Requires index < n (asserted). */
int pgcl_merkle_inclusion_path(const pgcl_merkle_hash *leaves, uint64_t n, uint64_t index,
                               pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH]);

/* RFC 9162 §2.1.3.2: true when path proves that leaf is leaf number index of a tree of tree_size
 * leaves whose root is root. Any index >= tree_size, wrong length or wrong hash gives false. */
bool pgcl_merkle_verify_inclusion(const pgcl_merkle_hash *leaf, uint64_t index, uint64_t tree_size,
                                  const pgcl_merkle_hash *path, int path_len, const pgcl_merkle_hash *root);

/* The consistency proof PROOF(m, D[0:n]) of RFC 9162 §2.1.4.1 into proof[]: that the tree of the
 * first m leaves is a prefix of the tree of n. Returns its length. Requires 0 < m <= n (asserted). */
int pgcl_merkle_consistency_proof(const pgcl_merkle_hash *leaves, uint64_t m, uint64_t n,
                                  pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH]);

/* RFC 9162 §2.1.4.2: true when proof shows that the tree of size first with root first_root is a
 * prefix of the tree of size second with root second_root (first = second: the roots are equal and
 * the proof is empty). first = 0 or first > second gives false. */
bool pgcl_merkle_verify_consistency(uint64_t first, uint64_t second, const pgcl_merkle_hash *first_root,
                                    const pgcl_merkle_hash *second_root, const pgcl_merkle_hash *proof,
                                    int proof_len);

/* ---- the same, from stored perfect subtrees (core/audit/log_tree.c) ----
 *
 * A tree that grows by appends can keep the root of every complete, aligned subtree: the node at
 * level L, index j is MTH(D[j * 2^L : (j + 1) * 2^L]) (level 0: the leaf hashes). Every subtree the
 * RFC's definitions recurse into is then at most O(log n) such nodes, so the functions below give
 * the same answers as the ones above with O(log n) calls of get and no leaves in memory
 * (tests/core/test_merkle.c and test_log_tree.c check them against the builders above). */

/* Writes the node at (level, index) into out; false when the source cannot (e.g. a stored node is
 * missing), which makes the caller answer false / -1 as well. */
typedef bool (*pgcl_merkle_subtree_fn)(void *ctx, int level, uint64_t index, pgcl_merkle_hash *out);

/* As pgcl_merkle_root for n >= 1 leaves; false when get failed. At most popcount(n) calls. */
bool pgcl_merkle_root_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t n, pgcl_merkle_hash *root);

/* As pgcl_merkle_inclusion_path; -1 when get failed. Requires index < n (asserted). */
int pgcl_merkle_inclusion_path_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t n, uint64_t index,
                                             pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH]);

/* As pgcl_merkle_consistency_proof; -1 when get failed. Requires 0 < m <= n (asserted). */
int pgcl_merkle_consistency_proof_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t m, uint64_t n,
                                                pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH]);

/* Lowercase hex of a hash (65 bytes with the NUL), and back: false unless hex is exactly 64 hex digits. */
void pgcl_merkle_to_hex(const pgcl_merkle_hash *h, char out[2 * PGCL_MERKLE_HASH_BYTES + 1]);
bool pgcl_merkle_from_hex(const char *hex, pgcl_merkle_hash *out);

#endif
