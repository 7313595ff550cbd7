-- 0002: the SQLite store's migration 0011 (trace context, DSA statement facts) for the PostgreSQL
-- store: the same nullable columns, chained the same way (docs/audit.md, "Decision leaf, extended").
-- Adding nullable columns without a default only changes the catalogue. The trace id's check is added
-- NOT VALID: every row that exists now has NULL there, which the check accepts, so validating it would
-- only scan the whole table under this migration's ACCESS EXCLUSIVE lock; rows written from now on are
-- checked all the same. The partial index still reads the table once (docs/operations.md, "Upgrading").
ALTER TABLE decisions ADD COLUMN trace_id text;
ALTER TABLE decisions ADD CONSTRAINT decisions_trace_id_hex CHECK (trace_id IS NULL OR trace_id ~ '^[0-9a-f]{32}$') NOT VALID;
ALTER TABLE decisions ADD COLUMN content_date text;
ALTER TABLE decisions ADD COLUMN territorial_scope text;
ALTER TABLE decisions ADD COLUMN content_language text;
CREATE INDEX decisions_trace_seq ON decisions (trace_id, seq) WHERE trace_id IS NOT NULL;
