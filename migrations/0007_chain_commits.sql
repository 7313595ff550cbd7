-- 0007: audit chain encoding version 2 (issue 16; docs/audit.md, "Encoding version 2"). One
-- chain entry per write transaction (kind 'commit', row_seq = its own seq) instead of one per
-- event: its payload_sha256 is the root of an RFC 9162 Merkle tree over the transaction's events,
-- leaf_count how many they are, and leaves their leaf hashes (32 bytes each, in leaf order), so an
-- inclusion proof needs no other row and the verifier can name the leaf that no longer matches.
-- Version-1 entries keep these columns NULL.
ALTER TABLE audit_chain ADD COLUMN leaf_count INTEGER;
ALTER TABLE audit_chain ADD COLUMN leaves BLOB;

-- Which rows a commit entry's leaves are: runs of consecutive rows of one table, leaves
-- first_leaf .. first_leaf + n - 1 of entry entry_seq. One row per run (a batch of decisions is one
-- run), not per event; the primary key finds the run holding a given row.
CREATE TABLE audit_chain_runs (
  kind           TEXT NOT NULL,           -- decisions | admin_events | contests | resolutions
  first_row_seq  INTEGER NOT NULL,
  n              INTEGER NOT NULL,
  entry_seq      INTEGER NOT NULL,
  first_leaf     INTEGER NOT NULL,
  PRIMARY KEY (kind, first_row_seq)
) WITHOUT ROWID;
CREATE INDEX audit_chain_runs_entry ON audit_chain_runs (entry_seq, first_leaf);

CREATE TRIGGER audit_chain_runs_append_only_u BEFORE UPDATE ON audit_chain_runs
  BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;
CREATE TRIGGER audit_chain_runs_append_only_d BEFORE DELETE ON audit_chain_runs
  BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;

-- Signed checkpoints of format version 2 also sign the root of the log-wide Merkle tree over the
-- chain's entries 1..head_seq (docs/audit.md, "The log tree"); NULL for version 1.
ALTER TABLE audit_checkpoints ADD COLUMN log_root TEXT;
