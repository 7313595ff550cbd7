-- 0001: the decision log. One row per scored item, written before the HTTP answer leaves.
-- Rows are append-only; later migrations add contests and the hash chain on top of this table.
CREATE TABLE decisions (
  seq            INTEGER PRIMARY KEY,       -- insertion order
  decision_id    TEXT    NOT NULL UNIQUE,   -- UUIDv7: unique and time-ordered
  created_at     TEXT    NOT NULL,          -- RFC 3339 UTC with microseconds, e.g. 2026-11-21T10:33:00.123456Z
  request_id     TEXT    NOT NULL,          -- UUIDv7 of the HTTP request
  item_id        TEXT    NOT NULL,          -- the client's id for the item
  model_name     TEXT    NOT NULL,
  model_version  TEXT    NOT NULL,
  model_sha256   TEXT    NOT NULL,          -- SHA-256 of model.safetensors, hex
  label          TEXT    NOT NULL,
  label_index    INTEGER NOT NULL,
  probabilities  TEXT    NOT NULL,          -- JSON object {label: p}
  toxicity       REAL,                      -- probability of the positive label; binary models only
  decision       TEXT    NOT NULL CHECK (decision IN ('allow', 'review', 'block')),
  policy         TEXT    NOT NULL,          -- JSON: the decision policy in force, thresholds included
  t_review       REAL,                      -- threshold policies only
  t_block        REAL,
  vector         BLOB    NOT NULL,          -- d float32, little-endian
  input_sha256   TEXT    NOT NULL,          -- SHA-256 of the D float32 input values, little-endian, hex
  latency_us     INTEGER NOT NULL           -- request arrival to row creation
);
CREATE INDEX decisions_request_id ON decisions (request_id);
CREATE INDEX decisions_item_id ON decisions (item_id);
CREATE INDEX decisions_model_time ON decisions (model_name, model_version, created_at);
CREATE INDEX decisions_created_at ON decisions (created_at);
