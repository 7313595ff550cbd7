-- 0008: a lean decision row (issue 16, part 3; docs/audit.md, "The stored input" and "Retention").
--
-- The stored input moves to its own table, keyed by the decision's seq: the decision row keeps the
-- input's dtype and the SHA-256 of its stored bytes (input_digest, 32 bytes), which is what an
-- encoding-2 leaf commits to. The input can so be dropped after --input-retention-days (a DELETE
-- here, by primary-key range) without touching the append-only decisions table, and every proof
-- and `verify` still pass. Rows written before 0008 keep their input inline (decisions.input).
CREATE TABLE decision_inputs (
  decision_seq  INTEGER PRIMARY KEY,      -- decisions.seq
  input         BLOB NOT NULL             -- little-endian float16 or float32 (decisions.input_dtype)
);
CREATE TRIGGER decision_inputs_append_only_u BEFORE UPDATE ON decision_inputs
  BEGIN SELECT RAISE(ABORT, 'stored inputs are never changed, only dropped'); END;
ALTER TABLE decisions ADD COLUMN input_digest BLOB;

-- Most decisions are 'allow'; reviewers list the 'review' and 'block' ones. The (decision, seq)
-- index now holds only those: an 'allow' row costs no insert into it, and a list of 'allow'
-- decisions walks seq, where nearly every row matches (core/review/decision_lists.c names the
-- decision as a literal so that SQLite can use the partial index).
DROP INDEX decisions_decision;
CREATE INDEX decisions_flagged ON decisions (decision, seq) WHERE decision <> 'allow';

-- Retention's progress: decisions with seq <= through_seq have had their inputs considered.
CREATE TABLE input_retention (
  id           INTEGER PRIMARY KEY CHECK (id = 1),
  through_seq  INTEGER NOT NULL
);
INSERT INTO input_retention (id, through_seq) VALUES (1, 0);
