-- 0012: the audit record as a transparency log (issue 28; core/audit/log/log.h, docs/log-record.md).
-- A SQLite store has ONE writer, whose log is one RFC 6962/9162 tree; every C2SP tlog-tiles tile
-- is built on read from these rows. Written in the same transaction as the events they log.
--
--   log_writers      the writer's log: its id (fixed when the database is created, default the host
--                    name), when the log began, and its state (size leaves, root = their MTH)
--   log_leaves       each leaf: its hash SHA-256(0x00 || record) and the record's bytes
--   log_tile_roots   the root (MTH) of each FULL level tile (level, tile_index), written once
--   log_checkpoints  the signed checkpoints (C2SP signed notes) of the log, and the cosignature
--                    lines witnesses returned for them (appended to the served note)
-- The event tables' leaf_index is the event's leaf in the writer's log; NULL for events written
-- before the log (the log's first leaf, a legacy_head record, binds the old chain's head). The
-- lookups by id go through each table's UNIQUE id (decision_id, event_id, contest_id).
CREATE TABLE log_writers (
  writer_id   TEXT PRIMARY KEY,
  created_at  TEXT NOT NULL,
  size        INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0),
  root        BLOB NOT NULL CHECK (length(root) = 32)
);
CREATE TABLE log_leaves (
  writer_id   TEXT NOT NULL REFERENCES log_writers (writer_id),
  leaf_index  INTEGER NOT NULL CHECK (leaf_index >= 0),
  leaf_hash   BLOB NOT NULL CHECK (length(leaf_hash) = 32),
  record      BLOB NOT NULL,
  PRIMARY KEY (writer_id, leaf_index)
) WITHOUT ROWID;
CREATE TABLE log_tile_roots (
  writer_id   TEXT NOT NULL REFERENCES log_writers (writer_id),
  level       INTEGER NOT NULL CHECK (level >= 0),
  tile_index  INTEGER NOT NULL CHECK (tile_index >= 0),
  root        BLOB NOT NULL CHECK (length(root) = 32),
  PRIMARY KEY (writer_id, level, tile_index)
) WITHOUT ROWID;
CREATE TABLE log_checkpoints (
  writer_id     TEXT NOT NULL REFERENCES log_writers (writer_id),
  size          INTEGER NOT NULL CHECK (size >= 0),
  note          TEXT NOT NULL,
  cosignatures  TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL,
  PRIMARY KEY (writer_id, size)
);
CREATE TRIGGER log_leaves_append_only_u BEFORE UPDATE ON log_leaves
  BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
CREATE TRIGGER log_leaves_append_only_d BEFORE DELETE ON log_leaves
  BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
CREATE TRIGGER log_tile_roots_append_only_u BEFORE UPDATE ON log_tile_roots
  BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
CREATE TRIGGER log_tile_roots_append_only_d BEFORE DELETE ON log_tile_roots
  BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
-- A checkpoint's note never changes; only cosignature lines are added to it.
CREATE TRIGGER log_checkpoints_note_u BEFORE UPDATE OF writer_id, size, note, created_at ON log_checkpoints
  BEGIN SELECT RAISE(ABORT, 'a checkpoint is never rewritten'); END;
CREATE TRIGGER log_checkpoints_append_only_d BEFORE DELETE ON log_checkpoints
  BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
-- The writer's log only grows.
CREATE TRIGGER log_writers_grow_only BEFORE UPDATE ON log_writers
  WHEN NEW.writer_id IS NOT OLD.writer_id OR NEW.size < OLD.size
  BEGIN SELECT RAISE(ABORT, 'a log only grows'); END;
CREATE TRIGGER log_writers_append_only_d BEFORE DELETE ON log_writers
  BEGIN SELECT RAISE(ABORT, 'a log is never deleted'); END;
ALTER TABLE decisions ADD COLUMN leaf_index INTEGER;
ALTER TABLE contests ADD COLUMN leaf_index INTEGER;
ALTER TABLE resolutions ADD COLUMN leaf_index INTEGER;
ALTER TABLE admin_events ADD COLUMN leaf_index INTEGER;
