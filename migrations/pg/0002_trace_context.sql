-- 0002: the SQLite store's migration 0011 (trace context, DSA statement facts) for the PostgreSQL
-- store: the same nullable columns, chained the same way (docs/audit.md, "Decision leaf, extended").
ALTER TABLE decisions ADD COLUMN trace_id text CHECK (trace_id IS NULL OR trace_id ~ '^[0-9a-f]{32}$');
ALTER TABLE decisions ADD COLUMN content_date text;
ALTER TABLE decisions ADD COLUMN territorial_scope text;
ALTER TABLE decisions ADD COLUMN content_language text;
CREATE INDEX decisions_trace_seq ON decisions (trace_id, seq) WHERE trace_id IS NOT NULL;
