-- 0005: idempotency keys of POST /v1/score. A completed request's answer, kept for a configurable
-- time (--idempotency-ttl) so that a client's retry with the same Idempotency-Key and body gets
-- the original answer (the same decision_ids) and writes no new row. Written in the transaction
-- of the decisions it answers for: the key is durable exactly when they are. Not an audit event
-- (not chained, not append-only): expired keys are deleted by the writer.
CREATE TABLE idempotency_keys (
  scope        TEXT NOT NULL,              -- the API key's key_id, or 'anonymous' with --auth off
  idem_key     TEXT NOT NULL,              -- the client's Idempotency-Key header
  body_sha256  TEXT NOT NULL,              -- SHA-256 of the request body, hex
  request_id   TEXT NOT NULL,              -- the original request (decisions.request_id)
  answer       TEXT NOT NULL,              -- the original answer's JSON text
  created_at   TEXT NOT NULL,
  expires_at   TEXT NOT NULL,              -- RFC 3339 UTC; the key is free again from then on
  PRIMARY KEY (scope, idem_key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
