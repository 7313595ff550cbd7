-- 0003: reviewers. Contests and resolutions, the stored input for re-scoring, the tamper-evident
-- hash chain over every audit event, signed chain checkpoints, and append-only triggers.

-- The original embedding, kept so that a reviewer can re-score it (setting --store-inputs):
-- NULL (none), or D little-endian float16 / float32 values.
ALTER TABLE decisions ADD COLUMN input BLOB;
ALTER TABLE decisions ADD COLUMN input_dtype TEXT CHECK (input_dtype IN ('f16', 'f32'));

CREATE INDEX decisions_label ON decisions (label, seq);
CREATE INDEX decisions_decision ON decisions (decision, seq);
CREATE INDEX decisions_model_seq ON decisions (model_name, model_version, seq);
CREATE INDEX decisions_item_seq ON decisions (item_id, seq);
CREATE INDEX decisions_request_seq ON decisions (request_id, seq);

-- A contest of one decision. At most one open (unresolved) contest per decision.
CREATE TABLE contests (
  seq           INTEGER PRIMARY KEY,
  contest_id    TEXT NOT NULL UNIQUE,      -- UUIDv7
  decision_id   TEXT NOT NULL REFERENCES decisions (decision_id),
  filed_at      TEXT NOT NULL,
  filed_by      TEXT NOT NULL,             -- actor: "name (key_id)" or "anonymous"
  filer_key_id  TEXT,                      -- NULL with --auth off
  reason        TEXT NOT NULL
);
CREATE INDEX contests_decision ON contests (decision_id, seq);

-- The resolution of a contest (at most one). The decision row itself is never changed: the
-- effective outcome is derived from the decision and its resolutions.
CREATE TABLE resolutions (
  seq             INTEGER PRIMARY KEY,
  contest_id      TEXT NOT NULL UNIQUE REFERENCES contests (contest_id),
  resolved_at     TEXT NOT NULL,
  resolved_by     TEXT NOT NULL,
  resolver_key_id TEXT,
  outcome         TEXT NOT NULL CHECK (outcome IN ('upheld', 'overturned')),
  corrected_label TEXT,
  note            TEXT NOT NULL
);

-- The hash chain: one entry per audit event (decision, admin event, contest, resolution), in
-- commit order. hash = SHA-256 over the canonical encoding of (seq, kind, row_seq,
-- payload_sha256, prev_hash); payload_sha256 = SHA-256 of the canonical encoding of the event's
-- row (see core/chain.c and docs/audit.md). Entry 1 is the genesis entry.
CREATE TABLE audit_chain (
  seq             INTEGER PRIMARY KEY,
  kind            TEXT NOT NULL,           -- genesis | decisions | admin_events | contests | resolutions
  row_seq         INTEGER NOT NULL,        -- the event's seq in its table (0 for genesis)
  payload_sha256  TEXT NOT NULL,
  prev_hash       TEXT NOT NULL,
  hash            TEXT NOT NULL
);
CREATE UNIQUE INDEX audit_chain_row ON audit_chain (kind, row_seq);

-- Signed checkpoints of the chain head that were exported (also kept here for reference; the
-- exported files are what makes a rewrite detectable).
CREATE TABLE audit_checkpoints (
  seq         INTEGER PRIMARY KEY,
  head_seq    INTEGER NOT NULL,
  head_hash   TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  public_key  TEXT NOT NULL,               -- Ed25519, hex
  signature   TEXT NOT NULL                -- Ed25519 over the checkpoint statement, hex
);

-- Append-only: the audit tables refuse UPDATE and DELETE.
CREATE TRIGGER decisions_append_only_u BEFORE UPDATE ON decisions
  BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
CREATE TRIGGER decisions_append_only_d BEFORE DELETE ON decisions
  BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
CREATE TRIGGER admin_events_append_only_u BEFORE UPDATE ON admin_events
  BEGIN SELECT RAISE(ABORT, 'admin_events are append-only'); END;
CREATE TRIGGER admin_events_append_only_d BEFORE DELETE ON admin_events
  BEGIN SELECT RAISE(ABORT, 'admin_events are append-only'); END;
CREATE TRIGGER contests_append_only_u BEFORE UPDATE ON contests
  BEGIN SELECT RAISE(ABORT, 'contests are append-only'); END;
CREATE TRIGGER contests_append_only_d BEFORE DELETE ON contests
  BEGIN SELECT RAISE(ABORT, 'contests are append-only'); END;
CREATE TRIGGER resolutions_append_only_u BEFORE UPDATE ON resolutions
  BEGIN SELECT RAISE(ABORT, 'resolutions are append-only'); END;
CREATE TRIGGER resolutions_append_only_d BEFORE DELETE ON resolutions
  BEGIN SELECT RAISE(ABORT, 'resolutions are append-only'); END;
CREATE TRIGGER audit_chain_append_only_u BEFORE UPDATE ON audit_chain
  BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;
CREATE TRIGGER audit_chain_append_only_d BEFORE DELETE ON audit_chain
  BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;
CREATE TRIGGER audit_checkpoints_append_only_u BEFORE UPDATE ON audit_checkpoints
  BEGIN SELECT RAISE(ABORT, 'audit checkpoints are append-only'); END;
CREATE TRIGGER audit_checkpoints_append_only_d BEFORE DELETE ON audit_checkpoints
  BEGIN SELECT RAISE(ABORT, 'audit checkpoints are append-only'); END;
