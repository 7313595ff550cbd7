-- 0003 (issue 28): each writer's transparency log (core/audit/log/log.h), in the SQLite store's
-- names (its migration 0012_log). One RFC 6962/9162 tree per writer over its events in commit
-- order, kept as rows written in the same transaction as the events they log:
--   log_leaves      leaf (writer, leaf_index): its hash and its record (docs/log-record.md)
--   log_tile_roots  the root of each full C2SP tile (writer, level, tile_index), written once
--   log_writers     the log's state (size, root): one row per writer, updated only by that writer
--                   (which holds its id's advisory lock), so no fleet-wide lock is taken for the log
--   log_checkpoints the signed notes of the log (C2SP tlog-checkpoint) and the cosignature lines
--                   witnesses returned for them (only ever appended to)
-- Every tile is built on read from these rows. The event tables name the leaf of each row they
-- gained from now on (writer_id, leaf_index); rows written before the log have NULL there (the
-- log's first leaf, a legacy_head record, binds the chain that holds them). Adding nullable
-- columns without a default only changes the catalogue.

CREATE TABLE log_writers (
  writer_id   text   PRIMARY KEY CHECK (length(writer_id) BETWEEN 1 AND 128),
  created_at  text   NOT NULL,
  size        bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
  root        bytea  NOT NULL CHECK (length(root) = 32)
);

CREATE TABLE log_leaves (
  writer_id   text   NOT NULL REFERENCES log_writers (writer_id),
  leaf_index  bigint NOT NULL CHECK (leaf_index >= 0),
  leaf_hash   bytea  NOT NULL CHECK (length(leaf_hash) = 32),
  record      bytea  NOT NULL CHECK (length(record) >= 2),
  PRIMARY KEY (writer_id, leaf_index)
);

CREATE TABLE log_tile_roots (
  writer_id   text    NOT NULL REFERENCES log_writers (writer_id),
  level       integer NOT NULL CHECK (level >= 0),
  tile_index  bigint  NOT NULL CHECK (tile_index >= 0),
  root        bytea   NOT NULL CHECK (length(root) = 32),
  PRIMARY KEY (writer_id, level, tile_index)
);

CREATE TABLE log_checkpoints (
  writer_id     text   NOT NULL REFERENCES log_writers (writer_id),
  size          bigint NOT NULL CHECK (size >= 0),
  note          text   NOT NULL,
  cosignatures  text   NOT NULL DEFAULT '',
  created_at    text   NOT NULL,
  PRIMARY KEY (writer_id, size)
);

ALTER TABLE decisions ADD COLUMN writer_id text;
ALTER TABLE decisions ADD COLUMN leaf_index bigint;
ALTER TABLE admin_events ADD COLUMN writer_id text;
ALTER TABLE admin_events ADD COLUMN leaf_index bigint;
ALTER TABLE contests ADD COLUMN writer_id text;
ALTER TABLE contests ADD COLUMN leaf_index bigint;
ALTER TABLE resolutions ADD COLUMN writer_id text;
ALTER TABLE resolutions ADD COLUMN leaf_index bigint;

-- Append-only, as the other audit tables (pgcld_append_only: 0001_fleet.sql).
CREATE TRIGGER log_leaves_append_only BEFORE UPDATE OR DELETE ON log_leaves
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER log_tile_roots_append_only BEFORE UPDATE OR DELETE ON log_tile_roots
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER log_checkpoints_append_only BEFORE DELETE ON log_checkpoints
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER log_leaves_no_truncate BEFORE TRUNCATE ON log_leaves
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER log_tile_roots_no_truncate BEFORE TRUNCATE ON log_tile_roots
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON log_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();

-- A checkpoint's note never changes; cosignature lines are only appended to it.
CREATE FUNCTION pgcld_log_checkpoints_cosign_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.writer_id <> OLD.writer_id OR NEW.size <> OLD.size OR NEW.note <> OLD.note
     OR NEW.created_at <> OLD.created_at OR left(NEW.cosignatures, length(OLD.cosignatures)) <> OLD.cosignatures THEN
    RAISE EXCEPTION 'log_checkpoints: a checkpoint is never rewritten' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER log_checkpoints_cosign_only BEFORE UPDATE ON log_checkpoints
  FOR EACH ROW EXECUTE FUNCTION pgcld_log_checkpoints_cosign_only();

-- A log's state only grows: its size never goes back, its writer never changes, its root changes with its size.
CREATE FUNCTION pgcld_log_writers_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR NEW.writer_id <> OLD.writer_id OR NEW.size < OLD.size
     OR (NEW.size = OLD.size AND NEW.root <> OLD.root) THEN
    RAISE EXCEPTION 'log_writers: a log only grows' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER log_writers_forward BEFORE UPDATE OR DELETE ON log_writers
  FOR EACH ROW EXECUTE FUNCTION pgcld_log_writers_forward();
CREATE TRIGGER log_writers_no_truncate BEFORE TRUNCATE ON log_writers
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();

-- The daemons' privileges with the log's tables (0001_fleet.sql's list, and these).
CREATE OR REPLACE FUNCTION pgcld_grant_writer(writer_role name) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['schema_migrations', 'fleet_counters', 'writers', 'decisions', 'decision_inputs',
                           'input_retention', 'api_keys', 'admin_events', 'shadow_decisions', 'contests',
                           'resolutions', 'idempotency_keys', 'audit_chain', 'audit_chain_runs',
                           'audit_log_nodes', 'audit_checkpoints', 'audit_cuts', 'log_writers', 'log_leaves',
                           'log_tile_roots', 'log_checkpoints'] LOOP
    EXECUTE format('REVOKE ALL ON TABLE %I FROM %I', t, writer_role);
    EXECUTE format('GRANT SELECT ON TABLE %I TO %I', t, writer_role);
  END LOOP;
  FOREACH t IN ARRAY ARRAY['decisions', 'decision_inputs', 'admin_events', 'shadow_decisions', 'contests',
                           'resolutions', 'audit_chain', 'audit_chain_runs', 'audit_log_nodes',
                           'audit_checkpoints', 'api_keys', 'idempotency_keys', 'writers', 'log_writers',
                           'log_leaves', 'log_tile_roots', 'log_checkpoints'] LOOP
    EXECUTE format('GRANT INSERT ON TABLE %I TO %I', t, writer_role);
  END LOOP;
  EXECUTE format('GRANT UPDATE (decisions, admin_events, contests, resolutions, shadow_decisions)'
                 ' ON TABLE fleet_counters TO %I', writer_role);
  EXECUTE format('GRANT UPDATE (last_seen) ON TABLE writers TO %I', writer_role);
  EXECUTE format('GRANT DELETE ON TABLE decision_inputs TO %I', writer_role);
  EXECUTE format('GRANT UPDATE (through_seq) ON TABLE input_retention TO %I', writer_role);
  EXECUTE format('GRANT UPDATE (revoked_at, revoked_by) ON TABLE api_keys TO %I', writer_role);
  EXECUTE format('GRANT DELETE ON TABLE idempotency_keys TO %I', writer_role);
  -- a log's state: its size, root and time move forward with each commit (log_writers_forward)
  EXECUTE format('GRANT UPDATE (size, root) ON TABLE log_writers TO %I', writer_role);
  -- a checkpoint's witnesses' cosignature lines are appended (log_checkpoints_cosign_only)
  EXECUTE format('GRANT UPDATE (cosignatures) ON TABLE log_checkpoints TO %I', writer_role);
END $$;
REVOKE ALL ON FUNCTION pgcld_grant_writer(name) FROM PUBLIC;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgcld_writer') THEN
    PERFORM pgcld_grant_writer('pgcld_writer');
  END IF;
END $$;
