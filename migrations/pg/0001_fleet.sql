-- The PostgreSQL store's schema (core/audit/pg/, docs/scaling.md): the SQLite schema after its
-- migration 0010, in PostgreSQL's dialect, for a fleet of writers (replicas) on one database.
--
-- Differences from the SQLite store, each for the fleet:
--  * fleet_counters hands out every event table's seq in ranges. Each writer transaction locks its
--    one row first (UPDATE ... RETURNING) and holds the lock until COMMIT, so seqs are assigned in
--    commit order across the whole fleet: the committed rows of a table are always a prefix of its
--    seqs, and a cursor on seq never skips a row that commits late on another writer. The same lock
--    serialises the reviewers' rules (one open contest, one resolution) across replicas.
--  * audit_chain, audit_chain_runs and audit_log_nodes are keyed by writer_id: each writer extends
--    only its own chain (encoding version 2 only), holding a session advisory lock on its id.
--  * audit_checkpoints record one signed statement that covers every writer's head.
-- Timestamps stay RFC 3339 text, as the chain encodes them (docs/audit.md).

CREATE TABLE fleet_counters (
  id                 integer PRIMARY KEY CHECK (id = 1),
  decisions          bigint NOT NULL,   -- the last seq handed out, per table
  admin_events       bigint NOT NULL,
  contests           bigint NOT NULL,
  resolutions        bigint NOT NULL,
  shadow_decisions   bigint NOT NULL
);
INSERT INTO fleet_counters VALUES (1, 0, 0, 0, 0, 0);

CREATE TABLE writers (
  writer_id   text PRIMARY KEY CHECK (length(writer_id) BETWEEN 1 AND 128),
  first_seen  text NOT NULL,
  last_seen   text NOT NULL
);

CREATE TABLE decisions (
  seq            bigint PRIMARY KEY,
  decision_id    text   NOT NULL UNIQUE,
  created_at     text   NOT NULL,
  request_id     text   NOT NULL,
  item_id        text   NOT NULL,
  model_name     text   NOT NULL,
  model_version  text   NOT NULL,
  model_sha256   text   NOT NULL,
  label          text   NOT NULL,
  label_index    bigint NOT NULL,
  probabilities  text   NOT NULL,
  toxicity       double precision,
  decision       text   NOT NULL CHECK (decision IN ('allow', 'review', 'block')),
  policy         text   NOT NULL,
  t_review       double precision,
  t_block        double precision,
  vector         bytea  NOT NULL,
  input_sha256   text   NOT NULL,
  latency_us     bigint NOT NULL,
  input_dtype    text   CHECK (input_dtype IN ('f16', 'f32')),
  input_digest   bytea
);
-- The export and the time windows (core/audit/pg/audit_pg_reads.c) walk decisions in (created_at,
-- seq) order, keyset-paged on that pair, which an index on created_at alone cannot give without a
-- sort (SQLite's decisions_created_at carries the rowid; PostgreSQL's would not). It also serves
-- retention's created_at bound.
CREATE INDEX decisions_created_at_seq ON decisions (created_at, seq);
CREATE INDEX decisions_label ON decisions (label, seq);
CREATE INDEX decisions_flagged ON decisions (decision, seq) WHERE decision <> 'allow';
CREATE INDEX decisions_model_seq ON decisions (model_name, model_version, seq);
CREATE INDEX decisions_item_seq ON decisions (item_id, seq);
CREATE INDEX decisions_request_seq ON decisions (request_id, seq);

CREATE TABLE decision_inputs (
  decision_seq  bigint PRIMARY KEY,
  input         bytea  NOT NULL
);

CREATE TABLE input_retention (
  id           integer PRIMARY KEY CHECK (id = 1),
  through_seq  bigint NOT NULL
);
INSERT INTO input_retention VALUES (1, 0);

CREATE TABLE api_keys (
  key_id      text PRIMARY KEY,
  name        text NOT NULL,
  role        text NOT NULL CHECK (role IN ('scorer', 'reviewer', 'admin')),
  key_sha256  text NOT NULL,
  created_at  text NOT NULL,
  created_by  text NOT NULL,
  revoked_at  text,
  revoked_by  text
);

CREATE TABLE admin_events (
  seq         bigint PRIMARY KEY,
  event_id    text NOT NULL UNIQUE,
  created_at  text NOT NULL,
  actor       text NOT NULL,
  action      text NOT NULL,
  target      text NOT NULL,
  details     text NOT NULL
);
CREATE INDEX admin_events_action ON admin_events (action, seq);

CREATE TABLE shadow_decisions (
  seq              bigint PRIMARY KEY,
  decision_id      text NOT NULL,
  created_at       text NOT NULL,
  model_name       text NOT NULL,
  primary_version  text NOT NULL,
  shadow_version   text NOT NULL,
  shadow_sha256    text NOT NULL,
  primary_label    text NOT NULL,
  shadow_label     text NOT NULL,
  primary_decision text NOT NULL,
  shadow_decision  text NOT NULL,
  primary_score    double precision NOT NULL,
  shadow_score     double precision NOT NULL,
  probabilities    text NOT NULL
);
CREATE INDEX shadow_decisions_model ON shadow_decisions (model_name, shadow_version, seq);

CREATE TABLE contests (
  seq           bigint PRIMARY KEY,
  contest_id    text NOT NULL UNIQUE,
  decision_id   text NOT NULL REFERENCES decisions (decision_id),
  filed_at      text NOT NULL,
  filed_by      text NOT NULL,
  filer_key_id  text,
  reason        text NOT NULL
);
CREATE INDEX contests_decision ON contests (decision_id, seq);

CREATE TABLE resolutions (
  seq             bigint PRIMARY KEY,
  contest_id      text NOT NULL UNIQUE REFERENCES contests (contest_id),
  resolved_at     text NOT NULL,
  resolved_by     text NOT NULL,
  resolver_key_id text,
  outcome         text NOT NULL CHECK (outcome IN ('upheld', 'overturned')),
  corrected_label text,
  note            text NOT NULL
);

CREATE TABLE idempotency_keys (
  scope           text NOT NULL,
  idem_key        text NOT NULL,
  body_sha256     text NOT NULL,
  request_id      text NOT NULL,
  answer          text NOT NULL,
  created_at      text NOT NULL,
  expires_at      text NOT NULL,
  request_sha256  text,
  PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- One chain per writer: entries 1, 2, 3, ... of writer_id, encoding version 2 (kind "commit", or
-- "genesis" for entry 1), leaves = the commit's leaf hashes (32 bytes each, in order).
CREATE TABLE audit_chain (
  writer_id       text   NOT NULL REFERENCES writers (writer_id),
  seq             bigint NOT NULL CHECK (seq >= 1),
  kind            text   NOT NULL CHECK (kind IN ('genesis', 'commit')),
  row_seq         bigint NOT NULL,
  payload_sha256  text   NOT NULL,
  prev_hash       text   NOT NULL,
  hash            text   NOT NULL,
  leaf_count      bigint,
  leaves          bytea,
  PRIMARY KEY (writer_id, seq)
);

-- Where each event row is chained: rows first_row_seq .. first_row_seq + n - 1 of kind are the
-- leaves first_leaf .. of entry (writer_id, entry_seq). Runs of one kind never overlap.
CREATE TABLE audit_chain_runs (
  kind           text   NOT NULL,
  first_row_seq  bigint NOT NULL,
  n              bigint NOT NULL CHECK (n >= 1),
  writer_id      text   NOT NULL,
  entry_seq      bigint NOT NULL,
  first_leaf     bigint NOT NULL,
  PRIMARY KEY (kind, first_row_seq)
);
CREATE INDEX audit_chain_runs_entry ON audit_chain_runs (writer_id, entry_seq, first_leaf);

CREATE TABLE audit_log_nodes (
  writer_id  text    NOT NULL,
  level      integer NOT NULL CHECK (level >= 1),
  idx        bigint  NOT NULL CHECK (idx >= 0),
  hash       bytea   NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (writer_id, level, idx)
);

-- A signed statement over every writer's head at created_at (signing.h, the fleet format).
CREATE TABLE audit_checkpoints (
  seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  created_at  text NOT NULL,
  statement   text NOT NULL,
  public_key  text NOT NULL,
  signature   text NOT NULL
);

-- Append-only, also for a role that could write: rows are never changed; only retention may
-- delete stored inputs, and only a writer's keys may be revoked (api_keys' revoked_* columns).
CREATE FUNCTION pgcld_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER decision_inputs_append_only BEFORE UPDATE ON decision_inputs
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER admin_events_append_only BEFORE UPDATE OR DELETE ON admin_events
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER shadow_decisions_append_only BEFORE UPDATE OR DELETE ON shadow_decisions
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER contests_append_only BEFORE UPDATE OR DELETE ON contests
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER resolutions_append_only BEFORE UPDATE OR DELETE ON resolutions
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_chain_append_only BEFORE UPDATE OR DELETE ON audit_chain
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_chain_runs_append_only BEFORE UPDATE OR DELETE ON audit_chain_runs
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_log_nodes_append_only BEFORE UPDATE OR DELETE ON audit_log_nodes
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();

-- ---- Privileges (issue 17, scope 2: deploy/postgres/roles.sql, docs/scaling.md "Privileges") ----
-- The daemons connect as pgcld_writer, which may read every table and append to the append-only
-- ones, and change nothing else but the few columns the store must keep current; the schema belongs
-- to the role that runs `pgcld migrate` (pgcld_owner in roles.sql). A table added by a later
-- migration must be added to pgcld_grant_writer (CREATE OR REPLACE it there) and to
-- tests/integration/test_pg_roles.py's table of expected privileges, which fails on a table it
-- does not know.

-- TRUNCATE fires no row trigger: refuse it on the append-only tables too (even for the owner).
CREATE TRIGGER decisions_no_truncate BEFORE TRUNCATE ON decisions
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER decision_inputs_no_truncate BEFORE TRUNCATE ON decision_inputs
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER admin_events_no_truncate BEFORE TRUNCATE ON admin_events
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER shadow_decisions_no_truncate BEFORE TRUNCATE ON shadow_decisions
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER contests_no_truncate BEFORE TRUNCATE ON contests
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER resolutions_no_truncate BEFORE TRUNCATE ON resolutions
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_chain_no_truncate BEFORE TRUNCATE ON audit_chain
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_chain_runs_no_truncate BEFORE TRUNCATE ON audit_chain_runs
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_log_nodes_no_truncate BEFORE TRUNCATE ON audit_log_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION pgcld_append_only();

-- Gives writer_role exactly the daemons' privileges on pgcld's tables (everything else revoked
-- first, so running it again after a change of this list converges). Run by the tables' owner or a
-- superuser: by this migration for pgcld_writer when that role exists, and by roles.sql when the
-- roles are made after the schema.
CREATE FUNCTION pgcld_grant_writer(writer_role name) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['schema_migrations', 'fleet_counters', 'writers', 'decisions', 'decision_inputs',
                           'input_retention', 'api_keys', 'admin_events', 'shadow_decisions', 'contests',
                           'resolutions', 'idempotency_keys', 'audit_chain', 'audit_chain_runs',
                           'audit_log_nodes', 'audit_checkpoints', 'audit_cuts'] LOOP
    EXECUTE format('REVOKE ALL ON TABLE %I FROM %I', t, writer_role);
    EXECUTE format('GRANT SELECT ON TABLE %I TO %I', t, writer_role);
  END LOOP;
  -- audit_cuts: read only (verify); archival (pgcld audit archive) runs as the owner.
  -- Append-only: rows are added, never changed (the triggers above refuse it to every role).
  FOREACH t IN ARRAY ARRAY['decisions', 'decision_inputs', 'admin_events', 'shadow_decisions', 'contests',
                           'resolutions', 'audit_chain', 'audit_chain_runs', 'audit_log_nodes',
                           'audit_checkpoints', 'api_keys', 'idempotency_keys', 'writers'] LOOP
    EXECUTE format('GRANT INSERT ON TABLE %I TO %I', t, writer_role);
  END LOOP;
  -- Beyond appending, only what the store must keep current:
  -- the fleet order: each writer transaction takes its seq range by UPDATE ... RETURNING of the one
  -- row (which is also the lock that orders commits fleet-wide); id stays fixed.
  EXECUTE format('GRANT UPDATE (decisions, admin_events, contests, resolutions, shadow_decisions)'
                 ' ON TABLE fleet_counters TO %I', writer_role);
  -- a writer's row: registered once (INSERT above), then its last_seen at each start.
  EXECUTE format('GRANT UPDATE (last_seen) ON TABLE writers TO %I', writer_role);
  -- input retention: a stored input is deleted past the contest window (the decision, its digest
  -- and its chain entry stay), and the mark of how far the pass has gone moves forward.
  EXECUTE format('GRANT DELETE ON TABLE decision_inputs TO %I', writer_role);
  EXECUTE format('GRANT UPDATE (through_seq) ON TABLE input_retention TO %I', writer_role);
  -- revocation: a key's revoked_at and revoked_by are set once; its hash, role and name never change.
  EXECUTE format('GRANT UPDATE (revoked_at, revoked_by) ON TABLE api_keys TO %I', writer_role);
  -- idempotency keys expire: the writer deletes expired entries (a new request under an expired
  -- key deletes it, then inserts its own); a live entry is never changed.
  EXECUTE format('GRANT DELETE ON TABLE idempotency_keys TO %I', writer_role);
END $$;
REVOKE ALL ON FUNCTION pgcld_grant_writer(name) FROM PUBLIC;


-- Issue 17, archival past a horizon (core/audit/pg/audit_pg_archive.c; docs/audit.md, "Archival on
-- PostgreSQL"). `pgcld audit archive --db URI` signs a fleet checkpoint (every writer's head),
-- writes the event rows up to per-table maxima into a self-contained SQLite archive file, and then
-- deletes those rows from the live database in one transaction that also inserts one row here.
-- Chain entries, runs and log tree nodes stay: every proof and consistency proof is unchanged, and
-- verify treats a missing row at or below the latest cut's maxima as archived (and one that is
-- there as having reappeared).
CREATE TABLE audit_cuts (
  seq                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  decisions_through     bigint NOT NULL,  -- rows with seq at most these were archived
  admin_events_through  bigint NOT NULL,
  contests_through      bigint NOT NULL,
  resolutions_through   bigint NOT NULL,
  rows_archived         bigint NOT NULL,  -- event rows this cut deleted from the live database
  archived_before       text NOT NULL,    -- the horizon (RFC 3339): every archived row is older
  created_at            text NOT NULL,    -- the fleet checkpoint's created_at
  statement             text NOT NULL,    -- the signed fleet checkpoint statement at the cut
  public_key            text NOT NULL,    -- Ed25519, hex
  signature             text NOT NULL,    -- Ed25519 over statement, hex
  archive_sha256        text NOT NULL,    -- SHA-256 of the archive file, hex
  archive_name          text NOT NULL     -- the archive file's name as given to the command
);

-- A cut only moves forward, in each table.
CREATE FUNCTION pgcld_audit_cuts_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM audit_cuts WHERE decisions_through > NEW.decisions_through
             OR admin_events_through > NEW.admin_events_through OR contests_through > NEW.contests_through
             OR resolutions_through > NEW.resolutions_through) THEN
    RAISE EXCEPTION 'an archive cut must lie after the previous one' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER audit_cuts_forward BEFORE INSERT ON audit_cuts
  FOR EACH ROW EXECUTE FUNCTION pgcld_audit_cuts_forward();
CREATE TRIGGER audit_cuts_append_only BEFORE UPDATE OR DELETE ON audit_cuts
  FOR EACH ROW EXECUTE FUNCTION pgcld_append_only();

-- The event tables stay append-only, except that the rows at or below the latest cut's maxima may
-- be deleted (by the archive's pruning transaction, after its cut row is inserted); nothing else.
CREATE OR REPLACE FUNCTION pgcld_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  through bigint;
BEGIN
  IF TG_OP = 'DELETE' THEN
    through := CASE TG_TABLE_NAME
      WHEN 'decisions' THEN (SELECT max(decisions_through) FROM audit_cuts)
      WHEN 'admin_events' THEN (SELECT max(admin_events_through) FROM audit_cuts)
      WHEN 'contests' THEN (SELECT max(contests_through) FROM audit_cuts)
      WHEN 'resolutions' THEN (SELECT max(resolutions_through) FROM audit_cuts)
    END;
    IF through IS NOT NULL THEN  -- (nested: OLD.seq exists only in the event tables)
      IF OLD.seq <= through THEN
        RETURN OLD;
      END IF;
    END IF;
  END IF;
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;

-- ---- Privileges, last (issue 17, scope 2): pgcld_grant_writer above, once every table exists.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgcld_writer') THEN
    PERFORM pgcld_grant_writer('pgcld_writer');
  END IF;
END $$;
