-- 0009: the log tree's stored subtrees (docs/audit.md, "The log tree"). The log tree is the RFC 9162
-- Merkle tree over the chain's entries (leaf i = SHA-256(0x00 || the 32 bytes of entry i + 1's
-- hash)). Each row is one of its complete (perfect, aligned) subtrees: the node at level `level`
-- (1 and up; level 0, the leaves, is implied by audit_chain.hash) and index `idx` is the root of
-- the 2^level leaves idx * 2^level .. (idx + 1) * 2^level - 1, 32 bytes. The chain's writer adds
-- the nodes an entry completes when it appends the entry (one per entry, amortised), so that roots,
-- inclusion paths and consistency proofs read O(log n) rows instead of every entry. Derived data,
-- checked by `pgcld audit verify`; filled for the entries older than this migration when the store
-- opens (core/audit/log_tree.c).
CREATE TABLE audit_log_nodes (
  level  INTEGER NOT NULL CHECK (level >= 1),
  idx    INTEGER NOT NULL CHECK (idx >= 0),
  hash   BLOB NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (level, idx)
) WITHOUT ROWID;

CREATE TRIGGER audit_log_nodes_append_only_u BEFORE UPDATE ON audit_log_nodes
  BEGIN SELECT RAISE(ABORT, 'the audit log tree is append-only'); END;
CREATE TRIGGER audit_log_nodes_append_only_d BEFORE DELETE ON audit_log_nodes
  BEGIN SELECT RAISE(ABORT, 'the audit log tree is append-only'); END;
