-- 0006: an idempotency key answers a retry only when the retry asks the same question. The body
-- alone does not say that: an octet-stream request's model, item ids and return_vector travel in
-- the query string and headers, and POST /v2/models/{name}/infer names its model in the path.
-- request_sha256 is SHA-256 of everything that determines the answer (server/routes_score.c,
-- request_fingerprint: route, path, query, media type, the headers the route reads, body). Rows
-- written before this migration have it NULL and are compared by body_sha256, as they were.
ALTER TABLE idempotency_keys ADD COLUMN request_sha256 TEXT;
