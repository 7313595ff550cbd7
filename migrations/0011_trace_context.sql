-- 0011: a decision's trace context and the facts a DSA statement of reasons needs (issue 19,
-- items 3 and 9; docs/audit.md, "Decision leaf, extended"; docs/operations.md, "Trace context").
--
--   trace_id           the W3C trace id (32 lowercase hex) of the request that made the decision:
--                      the client's traceparent's, or one pgcld generated when it sent none
--   content_date       the date the content was posted, "YYYY-MM-DD" (the caller's, per item)
--   territorial_scope  the EEA countries the decision applies in: a JSON array of ISO 3166-1
--                      alpha-2 codes, as pgcld wrote it (unique, in the order given)
--   content_language   the content's ISO 639-1 language, uppercase ("EN")
-- All NULL on rows written before this migration. A row with any of them set is chained with them
-- (the decision leaf's extension): rows without any encode exactly as before, so every old leaf,
-- proof and checkpoint verifies unchanged.
ALTER TABLE decisions ADD COLUMN trace_id TEXT CHECK (trace_id IS NULL OR (length(trace_id) = 32
  AND trace_id NOT GLOB '*[^0-9a-f]*'));
ALTER TABLE decisions ADD COLUMN content_date TEXT;
ALTER TABLE decisions ADD COLUMN territorial_scope TEXT;
ALTER TABLE decisions ADD COLUMN content_language TEXT;
-- GET /v1/decisions?trace_id=...: the (trace_id, seq) pairs of the rows that have one.
CREATE INDEX decisions_trace_seq ON decisions (trace_id, seq) WHERE trace_id IS NOT NULL;
