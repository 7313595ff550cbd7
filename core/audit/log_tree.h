/* The log tree's stored subtrees (table audit_log_nodes, migration 0009; docs/audit.md, "The log
 * tree"). The log tree is the RFC 9162 Merkle tree over the chain's entries, leaf i =
 * SHA-256(0x00 ‖ the 32 bytes of entry i + 1's hash). Its complete (perfect, aligned) subtrees never
 * change once the log has grown past them, so the chain's writer stores each one when the entry that
 * completes it is appended:
 *
 *   node (level L >= 1, index j) = MTH(leaves j·2^L .. (j+1)·2^L − 1)      (level 0: audit_chain.hash)
 *
 * Appending entry k + 1 (leaf k) stores one node per trailing 1 bit of k: one per entry amortised,
 * each from its left sibling (one row read) and the node just made. Reads then need O(log n) rows
 * for a root, an inclusion path or a consistency proof at any size (merkle.h, "from stored perfect
 * subtrees"), instead of every entry's hash.
 *
 * Invariant: a node is stored only when both its children are (the writer skips a parent whose left
 * sibling is missing, the backfill is one transaction), so the stored nodes of a perfect subtree are
 * all there when its root is. Missing nodes are not an error for readers of chain_proof.h, which then
 * hash the entries as before; `pgcld audit verify` reports them, and any node that differs from the
 * entries, by level and index. */
#ifndef PGCL_LOG_TREE_H
#define PGCL_LOG_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "merkle.h"
#include "status.h"

struct sqlite3;

/* ---- the writer ---- */

typedef struct pgcl_log_tree pgcl_log_tree;

/* Prepares the statements on db, the chain writer's read-write connection. On a schema without
 * audit_log_nodes (older than migration 0009, e.g. the keys CLI on a database the daemon has not
 * upgraded yet) the writer stores nothing: the backfill fills the nodes at the next upgrade. NULL
 * with err set on failure; destroy before closing db. */
pgcl_log_tree *pgcl_log_tree_create(struct sqlite3 *db, char *err, int cap);
void pgcl_log_tree_destroy(pgcl_log_tree *t); /* accepts NULL */

/* Inside the write transaction that has just inserted chain entry seq with hash hash_hex (64 hex
 * digits): stores the nodes it completes. PGCL_ERR_DB when a node cannot be written (one already
 * there: the table disagrees with the chain, run `pgcld audit verify`). */
pgcl_status pgcl_log_tree_append(pgcl_log_tree *t, int64_t seq, const char *hash_hex, char *err, int cap);

/* Inside the caller's write transaction (the store's migration transaction at open): when some node
 * of the chain's complete subtrees is missing — a chain older than migration 0009 — stores them
 * all from the entries in one pass (O(entries) hashes, O(log n) memory); *added says how many.
 * Otherwise O(log n) lookups. Stops quietly at an entry whose hash is malformed (verify reports
 * it). PGCL_ERR_DB when the database cannot be read or written. */
pgcl_status pgcl_log_tree_backfill(struct sqlite3 *db, int64_t *added, char *err, int cap);

/* ---- the reads: inside the caller's read transaction, O(log size) rows each ----
 *
 * size is a tree size (a number of entries, 1 .. the head's seq). PGCL_ERR_NOT_FOUND when a node or
 * entry they need is not stored (the caller may then hash the entries: chain_proof.h does);
 * PGCL_ERR_FORMAT when a stored hash is malformed; PGCL_ERR_DB when the database cannot be read. */

/* The root of the log tree over entries 1..size. */
pgcl_status pgcl_log_tree_root(struct sqlite3 *db, int64_t size, pgcl_merkle_hash *root, char *err, int cap);

/* The root over entries 1..size and the RFC 9162 inclusion path of leaf index (entry index + 1). */
pgcl_status pgcl_log_tree_inclusion(struct sqlite3 *db, int64_t size, int64_t index, pgcl_merkle_hash *root,
                                    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap);

/* The roots of the trees of first and second entries (1 <= first <= second) and the RFC 9162
 * §2.1.4.1 consistency proof between them. */
pgcl_status pgcl_log_tree_consistency(struct sqlite3 *db, int64_t first, int64_t second, pgcl_merkle_hash *first_root,
                                      pgcl_merkle_hash *second_root, pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH],
                                      int *proof_len, char *err, int cap);

#endif
