"""`pgcld audit verify` checks the transparency logs (issue 28 item 6; core/audit/log/log_verify.c).

A daemon on a SQLite store with --signing-key scores more than a full tile of decisions and signs a
checkpoint; `pgcld audit verify` then verifies the log (records decode and hash to their leaves, full
tile roots, the state root, the checkpoint's signature and root), remembers the tree in the state
file beside the database, and the next run checks only the leaves after it (after more traffic: only
the new ones; --full: all). Each tampering an attacker could do to the file (the append-only
triggers dropped, as an attacker with the file would) is refused with the writer, the leaf and what
broke: a changed record byte, a changed leaf hash, a deleted leaf, a changed tile root, a changed
state root, a history rewritten (shorter, or a different tree of the same size, both behind the
state file's back), a checkpoint signed by another key. A database written before the log binds
the old chain's head in leaf 0; a changed legacy leaf is refused. The PostgreSQL twin
(PgLogVerifyTest) runs two writers on one database when postgresql-15 is installed.

Run: /usr/bin/python3 tests/integration/test_log_verify.py (PGCLD_BIN selects the binary).
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from rfc6962 import leaf_hash, mth  # noqa: E402

MODEL = "tiny_binary"
D = 32
ORIGIN_PREFIX = "pgcld.test"
LEGACY_DUMP = os.path.join(H.SOURCE_ROOT, "tests", "fixtures", "pre_0011_audit.sql")
TRIGGERS = ["log_leaves_append_only_u", "log_leaves_append_only_d", "log_tile_roots_append_only_u",
            "log_tile_roots_append_only_d", "log_writers_grow_only"]


def items(n, seed, prefix):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)






def verify(d, db, *args):
    """(exit status, the JSON line or None, stderr) of pgcld audit verify --db db ARGS."""
    p = d.cli("audit", "verify", "--db", db, "--log-origin", ORIGIN_PREFIX, *args, check=False)
    line = p.stdout.strip().splitlines()
    return p.returncode, (json.loads(line[-1]) if line else None), p.stderr


class Attacker:
    """The SQLite file opened as an attacker would: the log's triggers dropped."""

    def __init__(self, path):
        self.c = sqlite3.connect(path, isolation_level=None)
        for t in TRIGGERS:
            self.c.execute(f"DROP TRIGGER IF EXISTS {t}")

    def leaves(self):
        return [bytes(r[0]) for r in self.c.execute("SELECT leaf_hash FROM log_leaves ORDER BY leaf_index")]

    def set_record(self, i, record, rehash=True):
        self.c.execute("UPDATE log_leaves SET record = ? WHERE leaf_index = ?", (record, i))
        if rehash:
            self.c.execute("UPDATE log_leaves SET leaf_hash = ? WHERE leaf_index = ?", (leaf_hash(record), i))

    def record(self, i):
        return bytes(self.c.execute("SELECT record FROM log_leaves WHERE leaf_index = ?", (i,)).fetchone()[0])

    def reroot(self):
        """Makes every tile root and the state row agree with the leaves as they are now."""
        hashes = self.leaves()
        level, nodes = 0, hashes
        while len(nodes) >= 256:
            roots = [mth(nodes[k:k + 256]) for k in range(0, len(nodes) - 255, 256)]
            for k, r in enumerate(roots):
                self.c.execute("UPDATE log_tile_roots SET root = ? WHERE level = ? AND tile_index = ?", (r, level, k))
            level, nodes = level + 1, roots
        self.c.execute("UPDATE log_writers SET size = ?, root = ?", (len(hashes), mth(hashes)))

    def close(self):
        self.c.close()


class SqliteLogVerifyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-log-verify-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--signing-key", cls.key, "--log-origin", ORIGIN_PREFIX, "--log-checkpoint-interval", "0"])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", cls.key)
        d.start()
        for k in range(3):
            r = d.score({"items": items(100, k, f"v{k}")})
            assert r.status == 200, r
        r = d.post("/log/checkpoint", key=d.keys["admin"])
        assert r.status == 200, r
        cls.writer = r.json["writer_id"]
        d.stop()
        cls.d = d

    def copy(self):
        """A copy of the database (and no state file) to tamper with."""
        tmp = tempfile.mkdtemp(dir=self.tmp)
        db = os.path.join(tmp, "audit.db")
        src = sqlite3.connect(self.d.db_path)
        dst = sqlite3.connect(db)
        src.backup(dst)
        src.close()
        dst.close()
        return db

    def assert_refused(self, db, *args, leaf=None, says=()):
        rc, out, err = verify(self.d, db, *args)
        self.assertEqual(rc, 1, err)
        self.assertFalse(out["log_intact"], out)
        self.assertEqual(out["log_bad_writer"], self.writer)
        self.assertEqual(out["log_bad_leaf"], leaf, out["log_reason"])
        for s in says:
            self.assertIn(s, out["log_reason"])
        self.assertIn(f"writer {self.writer}", err)
        return out

    def test_intact_then_incremental(self):
        db = self.copy()
        rc, out, err = verify(self.d, db, "--signing-key", self.key)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["intact"] and out["log_intact"], out)
        (log,) = out["logs"]
        self.assertEqual(log["writer_id"], self.writer)
        self.assertGreater(log["size"], 300)  # 300 decisions and their policy leaf
        self.assertEqual(out["log_leaves_checked"], log["size"])
        self.assertEqual(log["checkpoint_size"], log["size"])
        self.assertTrue(log["checkpoint_signed"])
        c = sqlite3.connect(db)
        hashes = [bytes(r[0]) for r in c.execute("SELECT leaf_hash FROM log_leaves ORDER BY leaf_index")]
        c.close()
        self.assertEqual(log["root"], mth(hashes).hex())
        with open(db + ".verify-state") as f:
            self.assertEqual(f.read(), f"pgcld-log-verify-state 1\n{self.writer} {log['size']} {log['root']}\n")
        # the next run: nothing new to check
        rc, out, err = verify(self.d, db, "--signing-key", self.key)
        self.assertEqual((rc, out["log_leaves_checked"], out["logs"][0]["verified_from"]), (0, 0, log["size"]), err)
        # --full: everything again
        rc, out, err = verify(self.d, db, "--full")
        self.assertEqual((rc, out["log_mode"], out["log_leaves_checked"]), (0, "full", log["size"]), err)
        self.assertFalse(out["logs"][0]["checkpoint_signed"])  # no key given: its root checked only

    def test_a_days_check_costs_a_days_entries(self):
        db = self.copy()
        rc, out, _ = verify(self.d, db)
        size = out["logs"][0]["size"]
        d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=db,
                     args=["--signing-key", self.key, "--log-origin", ORIGIN_PREFIX, "--log-checkpoint-interval", "0"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertEqual(d.score({"items": items(20, 9, "later")}).status, 200)
        self.assertEqual(d.post("/log/checkpoint", key=d.keys["admin"]).status, 200)
        rc, out, err = verify(d, db, "--public-key", d.cli("audit", "keygen", "--out", os.path.join(d.tmp, "x.key"))
                              .stdout.split()[0])
        self.assertEqual(rc, 1, "another key's checkpoint signature must be refused")
        self.assertIn("signature", out["log_reason"])
        rc, out, err = verify(d, db, "--signing-key", self.key)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out["logs"][0]["verified_from"], size)
        self.assertEqual(out["log_leaves_checked"], out["logs"][0]["size"] - size)
        self.assertGreaterEqual(out["log_leaves_checked"], 20)
        d.stop()

    def test_log_key(self):
        db = self.copy()
        vkey = self.d.cli("audit", "note-key", "--signing-key", self.key, "--origin",
                          f"{ORIGIN_PREFIX}/{self.writer}").stdout.strip()
        rc, out, err = verify(self.d, db, "--log-key", vkey)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["logs"][0]["checkpoint_signed"])
        other = os.path.join(self.tmp, "other.key")
        if not os.path.exists(other):
            self.d.cli("audit", "keygen", "--out", other)
        wrong = self.d.cli("audit", "note-key", "--signing-key", other, "--origin",
                           f"{ORIGIN_PREFIX}/{self.writer}").stdout.strip()
        self.assert_refused(db, "--full", "--log-key", wrong, says=("signature",))
        self.assertEqual(verify(self.d, db, "--log-key", "not-a-key")[0], 2)

    def test_changed_record_byte(self):
        db = self.copy()
        a = Attacker(db)
        rec = bytearray(a.record(7))
        rec[-1] ^= 1
        a.set_record(7, bytes(rec), rehash=False)
        a.close()
        self.assert_refused(db, leaf=7, says=("leaf 7",))

    def test_changed_leaf_hash(self):
        db = self.copy()
        a = Attacker(db)
        a.c.execute("UPDATE log_leaves SET leaf_hash = ? WHERE leaf_index = 12", (b"\x11" * 32,))
        a.close()
        self.assert_refused(db, leaf=12, says=("leaf 12", "leaf hash"))

    def test_deleted_leaf(self):
        db = self.copy()
        a = Attacker(db)
        a.c.execute("DELETE FROM log_leaves WHERE leaf_index = 20")
        a.close()
        self.assert_refused(db, leaf=20, says=("leaf 20 is missing",))

    def test_changed_tile_root(self):
        db = self.copy()
        a = Attacker(db)
        a.c.execute("UPDATE log_tile_roots SET root = ? WHERE level = 0 AND tile_index = 0", (b"\x22" * 32,))
        a.close()
        self.assert_refused(db, leaf=0, says=("tile (level 0, index 0", "changed tile root"))

    def test_changed_state_root(self):
        db = self.copy()
        a = Attacker(db)
        a.c.execute("UPDATE log_writers SET root = ?", (b"\x33" * 32,))
        a.close()
        self.assert_refused(db, says=("state root",))

    def test_history_rewritten_shorter(self):
        db = self.copy()
        self.assertEqual(verify(self.d, db)[0], 0)  # the state remembers the whole tree
        a = Attacker(db)
        n = len(a.leaves())
        a.c.execute("DELETE FROM log_leaves WHERE leaf_index >= ?", (n - 5,))
        a.reroot()
        a.close()
        self.assert_refused(db, says=("history rewritten",))

    def test_history_rewritten_same_size(self):
        db = self.copy()
        self.assertEqual(verify(self.d, db)[0], 0)
        a = Attacker(db)
        n = len(a.leaves())
        a.set_record(n - 2, a.record(n - 1))  # a valid record, another leaf's: a different tree
        a.reroot()
        a.close()
        self.assert_refused(db, says=("history rewritten",))
        # --full walks every leaf (all hash right now) and still refuses: the checkpoint signed the old root
        self.assert_refused(db, "--full", says=("checkpoint", "history rewritten"))

    def test_legacy_head(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        db = os.path.join(tmp, "legacy.db")
        with open(LEGACY_DUMP) as f:
            c = sqlite3.connect(db)
            c.executescript(f.read())
            c.close()
        d = H.Daemon(models=("toxicity",), db_path=db)
        self.addCleanup(d.cleanup)
        d.start()
        self.assertEqual(d.score({"items": H.json_items(H.random_embeddings(2, 1024, 5), "new")}).status, 200)
        d.stop()
        rc, out, err = verify(d, db, "--state", os.path.join(tmp, "state"))
        self.assertEqual(rc, 0, err)
        self.assertTrue(out["logs"][0]["legacy_head"], out)
        writer = out["logs"][0]["writer_id"]
        a = Attacker(db)
        rec = bytearray(a.record(0))
        self.assertEqual(rec[1], 7)
        rec[51] ^= 1  # the chain's log root it binds
        a.set_record(0, bytes(rec))
        a.reroot()
        a.close()
        rc, out, err = verify(d, db, "--full")
        self.assertEqual(rc, 1, err)
        self.assertEqual((out["log_bad_writer"], out["log_bad_leaf"]), (writer, 0))
        self.assertIn("legacy_head", out["log_reason"])


class PgLogVerifyTest(unittest.TestCase):
    """Two writers on one PostgreSQL database: each log verified, incrementally; a changed record refused."""

    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cluster = H.pg_cluster()
        cls.uri = cluster.new_database()
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-pg-log-verify-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.key = os.path.join(cls.tmp, "signing.key")
        daemons = []
        for writer in ("a", "b"):
            d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=cls.uri,
                         args=["--writer-id", writer, "--signing-key", cls.key, "--log-origin", ORIGIN_PREFIX,
                               "--log-checkpoint-interval", "0"])
            cls.addClassCleanup(d.cleanup)
            if not daemons:
                d.cli("audit", "keygen", "--out", cls.key)
            daemons.append(d)
        for d in daemons:
            d.start()
        for d in daemons[1:]:
            d.keys = daemons[0].keys
        for k, d in enumerate(daemons):
            assert d.score({"items": items(60, k, f"p{k}")}).status == 200
            assert d.post("/log/checkpoint", key=d.keys["admin"]).status == 200
        for d in daemons:
            d.stop()
        cls.d = daemons[0]

    def test_writers_incremental_and_tampering(self):
        state = os.path.join(self.tmp, "pg.verify-state")
        rc, out, err = verify(self.d, self.uri, "--state", state, "--signing-key", self.key)
        self.assertEqual(rc, 0, err)
        logs = {w["writer_id"]: w for w in out["logs"]}
        self.assertTrue({"a", "b"} <= set(logs), logs)  # and the keys CLI's own writer (<host>/cli)
        for w in (logs["a"], logs["b"]):
            self.assertGreater(w["size"], 60)
            self.assertTrue(w["checkpoint_signed"])
        rc, out, err = verify(self.d, self.uri, "--state", state)
        self.assertEqual((rc, out["log_leaves_checked"]), (0, 0), err)
        import psycopg2
        c = psycopg2.connect(self.uri)
        c.autocommit = True
        cur = c.cursor()
        cur.execute("ALTER TABLE log_leaves DISABLE TRIGGER USER")
        cur.execute("UPDATE log_leaves SET leaf_hash = %s WHERE writer_id = 'b' AND leaf_index = 5",
                    (psycopg2.Binary(b"\x44" * 32),))
        c.close()
        # incremental: leaf 5 is in the tree's partial tile, which gives the remembered root no more
        rc, out, err = verify(self.d, self.uri, "--state", state)
        self.assertEqual(rc, 1, err)
        self.assertEqual(out["log_bad_writer"], "b", out)
        self.assertIn("history rewritten", out["log_reason"])
        rc, out, err = verify(self.d, self.uri, "--state", state, "--full")
        self.assertEqual(rc, 1, err)
        self.assertEqual((out["log_bad_writer"], out["log_bad_leaf"]), ("b", 5), out)


if __name__ == "__main__":
    unittest.main()
