-- 0010: archival past a horizon (docs/audit.md, "Archival past a horizon"). `pgcld audit archive`
-- exports the events up to a commit entry E into a self-contained archive database, signs a
-- checkpoint at E, and then deletes those event rows from the live database in one transaction
-- that also inserts one row here. The chain entries, their runs and the log tree's nodes stay:
-- the chain, every checkpoint and every proof of a live decision verify as before, and
-- `pgcld audit verify` checks entries 1..E as a hash chain without their rows.
CREATE TABLE audit_cuts (
  seq                    INTEGER PRIMARY KEY,
  entry_seq              INTEGER NOT NULL CHECK (entry_seq >= 2), -- E, a commit entry (encoding 2)
  entry_hash             TEXT NOT NULL,    -- audit_chain.hash of entry E
  log_root               TEXT NOT NULL,    -- the log tree's root over entries 1..E, hex
  decisions_through      INTEGER NOT NULL, -- rows with seq at most these were archived
  admin_events_through   INTEGER NOT NULL,
  contests_through       INTEGER NOT NULL,
  resolutions_through    INTEGER NOT NULL,
  rows_archived          INTEGER NOT NULL, -- event rows this cut deleted from the live database
  archived_before        TEXT NOT NULL,    -- the horizon asked for (RFC 3339): every archived row is older
  created_at             TEXT NOT NULL,    -- when the cut was made (the checkpoint's created_at)
  statement              TEXT NOT NULL,    -- the signed checkpoint statement at E (format version 2)
  public_key             TEXT NOT NULL,    -- Ed25519, hex
  signature              TEXT NOT NULL,    -- Ed25519 over statement, hex
  archive_sha256         TEXT NOT NULL,    -- SHA-256 of the archive database file, hex
  archive_name           TEXT NOT NULL     -- the archive file's name as given to the command
);
CREATE TRIGGER audit_cuts_append_only_u BEFORE UPDATE ON audit_cuts
  BEGIN SELECT RAISE(ABORT, 'audit cuts are append-only'); END;
CREATE TRIGGER audit_cuts_append_only_d BEFORE DELETE ON audit_cuts
  BEGIN SELECT RAISE(ABORT, 'audit cuts are append-only'); END;
-- A cut only moves forward: a later cut lies after the previous one, in the chain and in each table.
CREATE TRIGGER audit_cuts_forward BEFORE INSERT ON audit_cuts
  WHEN EXISTS (SELECT 1 FROM audit_cuts WHERE entry_seq >= NEW.entry_seq
               OR decisions_through > NEW.decisions_through OR admin_events_through > NEW.admin_events_through
               OR contests_through > NEW.contests_through OR resolutions_through > NEW.resolutions_through)
  BEGIN SELECT RAISE(ABORT, 'an archive cut must lie after the previous one'); END;

-- The event tables stay append-only, except that the rows at or below the latest cut's maxima may
-- be deleted (by the archive's pruning transaction, after the cut row is inserted).
DROP TRIGGER IF EXISTS decisions_append_only_d;
CREATE TRIGGER decisions_append_only_d BEFORE DELETE ON decisions
  WHEN OLD.seq > coalesce((SELECT max(decisions_through) FROM audit_cuts), 0)
  BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
DROP TRIGGER IF EXISTS admin_events_append_only_d;
CREATE TRIGGER admin_events_append_only_d BEFORE DELETE ON admin_events
  WHEN OLD.seq > coalesce((SELECT max(admin_events_through) FROM audit_cuts), 0)
  BEGIN SELECT RAISE(ABORT, 'admin_events are append-only'); END;
DROP TRIGGER IF EXISTS contests_append_only_d;
CREATE TRIGGER contests_append_only_d BEFORE DELETE ON contests
  WHEN OLD.seq > coalesce((SELECT max(contests_through) FROM audit_cuts), 0)
  BEGIN SELECT RAISE(ABORT, 'contests are append-only'); END;
DROP TRIGGER IF EXISTS resolutions_append_only_d;
CREATE TRIGGER resolutions_append_only_d BEFORE DELETE ON resolutions
  WHEN OLD.seq > coalesce((SELECT max(resolutions_through) FROM audit_cuts), 0)
  BEGIN SELECT RAISE(ABORT, 'resolutions are append-only'); END;
