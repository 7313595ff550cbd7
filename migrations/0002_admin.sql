-- 0002: API keys and the administrative event log (model swaps, shadows, key changes).
-- A key is stored only as the SHA-256 of its full text; key_id is its visible prefix.
CREATE TABLE api_keys (
  key_id      TEXT PRIMARY KEY,            -- visible prefix of the key, e.g. pgcld_3f9a1c2b
  name        TEXT NOT NULL,               -- who or what holds it
  role        TEXT NOT NULL CHECK (role IN ('scorer', 'reviewer', 'admin')),
  key_sha256  TEXT NOT NULL,               -- hex SHA-256 of the whole key text
  created_at  TEXT NOT NULL,
  created_by  TEXT NOT NULL,               -- actor: 'cli' or the admin key's "name (key_id)"
  revoked_at  TEXT,
  revoked_by  TEXT
);

-- Append-only record of every administrative action, with who and when.
CREATE TABLE admin_events (
  seq         INTEGER PRIMARY KEY,
  event_id    TEXT NOT NULL UNIQUE,        -- UUIDv7
  created_at  TEXT NOT NULL,
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,               -- model.activate, model.activate_failed, model.upload,
                                           -- shadow.attach, shadow.detach, key.create, key.revoke
  target      TEXT NOT NULL,               -- "model/version" or a key_id
  details     TEXT NOT NULL                -- JSON object
);
CREATE INDEX admin_events_action ON admin_events (action, seq);

-- Outputs of shadow candidates on live traffic, beside the primary decision they shadow.
CREATE TABLE shadow_decisions (
  seq             INTEGER PRIMARY KEY,
  decision_id     TEXT NOT NULL,           -- the primary decision (decisions.decision_id)
  created_at      TEXT NOT NULL,
  model_name      TEXT NOT NULL,
  primary_version TEXT NOT NULL,
  shadow_version  TEXT NOT NULL,
  shadow_sha256   TEXT NOT NULL,
  primary_label   TEXT NOT NULL,
  shadow_label    TEXT NOT NULL,
  primary_decision TEXT NOT NULL,
  shadow_decision TEXT NOT NULL,
  primary_score   REAL NOT NULL,           -- policy score (threshold policies) or top probability
  shadow_score    REAL NOT NULL,
  probabilities   TEXT NOT NULL            -- shadow's JSON {label: p}
);
CREATE INDEX shadow_decisions_model ON shadow_decisions (model_name, shadow_version, seq);
