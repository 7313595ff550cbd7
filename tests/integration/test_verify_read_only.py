"""The commands that must never write open a SQLite store read-only (issue 28 item 7; audit.h
pgcl_audit_options.read_only, core/audit/audit_sqlite_read_only.c, db.h pgcl_db_untouched_uri).

- `pgcld audit verify` on a database at rest (a daemon stopped cleanly: WAL mode, no -wal) leaves
  the file byte-identical and creates no file beside it except the verify state it documents
  (DB.verify-state), and none at all with --state elsewhere; `pgcld keys list` neither.
- On a database a daemon left with its -wal and -shm (killed): verify reads the WAL's commits (every
  decision is counted) and leaves the file, its -wal and its -shm byte-identical.
- A database at an older schema (the pre-0011 fixture: no log tables) is neither migrated nor
  refused: verify checks its chain and reports no logs (log_note), keys list reads its keys, and
  schema_migrations still ends at version 10.

Run: /usr/bin/python3 tests/integration/test_verify_read_only.py (PGCLD_BIN selects the binary).
"""
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

MODEL = "tiny_binary"
D = 32
LEGACY_DUMP = os.path.join(H.SOURCE_ROOT, "tests", "fixtures", "pre_0011_audit.sql")


def items(n, seed, prefix):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)


def snapshot(directory):
    """{file name: SHA-256} of every file in directory."""
    out = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def verify(d, db, *args):
    p = d.cli("audit", "verify", "--db", db, *args, check=False)
    lines = p.stdout.strip().splitlines()
    return p.returncode, (json.loads(lines[-1]) if lines else None), p.stderr


class VerifyReadOnlyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-verify-ro-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)

    def new_dir(self):
        return tempfile.mkdtemp(dir=self.tmp)

    def daemon(self, db):
        d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=db)
        self.addCleanup(d.cleanup, False)
        return d

    def test_at_rest_untouched_but_for_the_state(self):
        where = self.new_dir()
        db = os.path.join(where, "audit.db")
        d = self.daemon(db)
        d.start()
        self.assertEqual(d.score({"items": items(30, 1, "rest")}).status, 200)
        d.stop()
        self.assertFalse(os.path.exists(db + "-wal"), "a clean stop checkpoints and removes the WAL")
        before = snapshot(where)
        elsewhere = os.path.join(self.new_dir(), "state")
        rc, out, err = verify(d, db, "--state", elsewhere)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["intact"] and out["log_intact"], out)
        self.assertGreaterEqual(out["logs"][0]["size"], 30)
        self.assertEqual(snapshot(where), before, "verify --state elsewhere wrote beside the database")
        self.assertTrue(os.path.exists(elsewhere))
        rc, out, err = verify(d, db)
        self.assertEqual(rc, 0, err)
        after = snapshot(where)
        self.assertEqual(set(after) - set(before), {"audit.db.verify-state"}, after)
        self.assertEqual({k: after[k] for k in before}, before, "verify changed the database")
        p = d.cli("keys", "list", "--db", db)
        self.assertIn("admin", p.stdout)
        self.assertEqual(snapshot(where), after, "keys list wrote to the database")

    def test_killed_daemon_wal_read_untouched(self):
        where = self.new_dir()
        db = os.path.join(where, "audit.db")
        d = self.daemon(db)
        d.start()
        self.assertEqual(d.score({"items": items(25, 2, "crash")}).status, 200)
        d.kill()
        self.assertTrue(os.path.exists(db + "-wal") and os.path.exists(db + "-shm"))
        before = snapshot(where)
        rc, out, err = verify(d, db, "--state", os.path.join(self.new_dir(), "state"))
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["intact"] and out["log_intact"], out)
        # every decision the daemon acknowledged, some of them only in the WAL
        self.assertGreaterEqual(out["logs"][0]["size"], 25)
        self.assertEqual(snapshot(where), before, "verify changed the database, its -wal or its -shm")

    def test_older_schema_read_not_migrated(self):
        where = self.new_dir()
        db = os.path.join(where, "legacy.db")
        with open(LEGACY_DUMP) as f:
            c = sqlite3.connect(db)
            c.executescript(f.read())
            c.close()
        before = snapshot(where)
        d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=os.path.join(self.new_dir(), "unused.db"))
        self.addCleanup(d.cleanup, False)
        rc, out, err = verify(d, db, "--state", os.path.join(self.new_dir(), "state"))
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["intact"], out)
        self.assertGreater(out["events"], 0, out)
        self.assertEqual(out["logs"], [], out)
        self.assertIn("no log", out["log_note"])
        d.cli("keys", "list", "--db", db)  # raises unless it exits 0
        self.assertEqual(snapshot(where), before, "a read-only command changed an older database")
        self.assertEqual(H.db_scalar(db, "SELECT max(version) FROM schema_migrations"), 10)


if __name__ == "__main__":
    unittest.main()
