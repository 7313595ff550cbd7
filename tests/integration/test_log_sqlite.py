"""The SQLite store writes the transparency log (issue 28; migration 0012, core/audit/sqlite_log.c).

A real daemon over HTTP scores batches, a reviewer files a contest and another resolves it, the keys
CLI (another process, its own connection) creates a key while the daemon runs; then the SQLite file
is read with Python's sqlite3 and checked against an oracle written here: every event row has a
leaf, the leaves run from 0 without gap, every leaf hash is SHA-256(0x00 || record), each record
decodes by position (docs/log-record.md) to its row (decision: id, label index, decision, model;
contest, resolution, key and admin events: their ids), log_writers.root is the RFC 6962 root
recomputed here, and each full tile's stored root is the root of its 256 hashes. A restart continues
the same log; a database written before the log (tests/fixtures/pre_0011_audit.sql) begins its log
with a legacy_head leaf binding the old chain's head; after kill -9 mid-traffic every acknowledged
decision has its leaf and the root still matches the leaves.

Run: /usr/bin/python3 tests/integration/test_log_sqlite.py (PGCLD_BIN selects the binary).
"""
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from rfc6962 import leaf_hash, mth  # noqa: E402

TINY = "tiny_binary"
LEGACY_DUMP = os.path.join(H.SOURCE_ROOT, "tests", "fixtures", "pre_0011_audit.sql")
KINDS = {1: "decision", 2: "admin_event", 3: "key_event", 4: "contest", 5: "resolution", 6: "policy",
         7: "legacy_head"}
VERDICTS = {0: "allow", 1: "review", 2: "block"}


def tiny_root(parent):
    root = os.path.join(parent, "models")
    shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", "1"))
    return root


def items(n, seed, prefix="l"):
    return H.json_items(H.random_embeddings(n, 32, seed), prefix)


# ---- the oracle: RFC 6962 hashing and the records' fixed positions ----





def uuid_text(b):
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def varint(data, at):
    n, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return n, at


def text(data, at):
    n, at = varint(data, at)
    return data[at:at + n].decode("utf-8"), at + n


def decode_decision(rec):
    """The fields this test compares, read at the positions docs/log-record.md gives."""
    assert rec[0] == 1 and rec[1] == 1, rec[:2]
    flags, policy_kind = rec[138], rec[141]
    k, label_index, d = struct.unpack(">HHH", rec[143:149])
    at = 149 + (2 + 8 + 8 if policy_kind == 0 else 8)
    at += 4 * k + 4 * d
    _, at = varint(rec, at)  # latency_us
    if flags & 0x10:
        at += 16  # the request id in UUID form
    else:
        _, at = text(rec, at)
    item_id, at = text(rec, at)
    model_name, at = text(rec, at)
    model_version, at = text(rec, at)
    return {"decision_id": uuid_text(rec[2:18]), "decision": VERDICTS[rec[140]], "label_index": label_index,
            "item_id": item_id, "model_name": model_name, "model_version": model_version}


def decode_legacy_head(rec):
    assert rec[0] == 1 and rec[1] == 7, rec[:2]
    head_seq = struct.unpack(">Q", rec[10:18])[0]
    return {"head_seq": head_seq, "head_hash": rec[18:50].hex(), "has_log_root": bool(rec[50] & 1),
            "log_root": rec[51:83].hex() if rec[50] & 1 else None}


class LogChecks:
    """Checks of one SQLite file's log; mixed into the test cases."""

    def leaves(self, db):
        c = sqlite3.connect(db)
        try:
            return c.execute("SELECT leaf_index, leaf_hash, record FROM log_leaves ORDER BY leaf_index").fetchall()
        finally:
            c.close()

    def check_log(self, db):
        """The whole log's invariants; returns {leaf_index: (kind, record)}."""
        c = sqlite3.connect(db)
        try:
            writers = c.execute("SELECT writer_id, size, root FROM log_writers").fetchall()
            self.assertEqual(len(writers), 1, writers)
            writer, size, root = writers[0]
            leaves = self.leaves(db)
            self.assertEqual([i for i, _, _ in leaves], list(range(len(leaves))), "leaves contiguous from 0")
            self.assertEqual(size, len(leaves))
            for i, h, rec in leaves:
                self.assertEqual(h, leaf_hash(rec), f"leaf {i}'s hash")
                self.assertIn(rec[1], KINDS, f"leaf {i}'s kind")
            hashes = [h for _, h, _ in leaves]
            self.assertEqual(root, mth(hashes), "log_writers.root is the MTH of the leaves")
            # the full tiles' roots: level 0 over leaf hashes, level 1 over level-0 roots
            tiles = {(lv, n): r for lv, n, r in c.execute("SELECT level, tile_index, root FROM log_tile_roots")}
            full0 = len(hashes) // 256
            for n in range(full0):
                self.assertEqual(tiles.get((0, n)), mth(hashes[n * 256:(n + 1) * 256]), f"tile 0/{n}")
            self.assertEqual(sorted(k for k in tiles if k[0] == 0), [(0, n) for n in range(full0)])
            self.assertEqual([k for k in tiles if k[0] > 0], [], "no level-1 tile is full at this size")
            for w in [r[0] for r in c.execute("SELECT DISTINCT writer_id FROM log_leaves")]:
                self.assertEqual(w, writer)
            # every event row written since the log began has its leaf, of its kind and id
            by_index = {i: rec for i, _, rec in leaves}
            rows = {
                "decision": c.execute("SELECT decision_id, leaf_index FROM decisions").fetchall(),
                "contest": c.execute("SELECT contest_id, leaf_index FROM contests").fetchall(),
                "resolution": c.execute("SELECT contest_id, leaf_index FROM resolutions").fetchall(),
                "event": c.execute("SELECT event_id, leaf_index, action FROM admin_events").fetchall(),
            }
            legacy = by_index and by_index[0][1] == 7
            seen = set()
            for kind, found in rows.items():
                for row in found:
                    rid, leaf = row[0], row[1]
                    if leaf is None:
                        self.assertTrue(legacy, f"{kind} {rid} has no leaf in a log without a legacy head")
                        continue
                    self.assertNotIn(leaf, seen, f"leaf {leaf} claimed twice")
                    seen.add(leaf)
                    rec = by_index[leaf]
                    want = {"decision": 1, "contest": 4, "resolution": 4 + 1}.get(kind)
                    if kind == "event":
                        want = 3 if row[2].startswith("key.") else 2
                    self.assertEqual(rec[1], want, f"{kind} {rid}: leaf {leaf} is a {KINDS.get(rec[1])}")
                    self.assertEqual(uuid_text(rec[2:18]), rid, f"{kind} {rid}: the record's id")
            unclaimed = sorted(set(by_index) - seen)
            for i in unclaimed:  # only policies and the legacy head are no row's leaf
                self.assertIn(KINDS[by_index[i][1]], ("policy", "legacy_head"), f"leaf {i}")
            return writer, by_index
        finally:
            c.close()

    def check_decisions_match(self, db, by_index):
        c = sqlite3.connect(db)
        c.row_factory = sqlite3.Row
        try:
            rows = c.execute("SELECT decision_id, label_index, decision, item_id, model_name, model_version,"
                             " leaf_index FROM decisions WHERE leaf_index IS NOT NULL").fetchall()
            self.assertTrue(rows)
            for r in rows:
                got = decode_decision(by_index[r["leaf_index"]])
                want = {k: r[k] for k in ("decision_id", "decision", "label_index", "item_id", "model_name",
                                          "model_version")}
                self.assertEqual(got, want)
            return len(rows)
        finally:
            c.close()


class SqliteLogTest(LogChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-log-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.d = H.start_daemon(cls, models=tiny_root(cls.tmp), default_model="tiny")
        d = cls.d
        cls.decision_ids = []
        for b in range(5):  # 320 decisions: the first level-0 tile fills
            r = d.score({"items": items(64, 100 + b, f"b{b}-")})
            assert r.status == 200, r
            cls.decision_ids += [x["decision_id"] for x in r.json["results"]]
        cls.second = d.create_key("reviewer", "second reviewer")  # the keys CLI while the daemon runs
        did = cls.decision_ids[3]
        r = d.request("POST", f"/v1/decisions/{did}/contests", {"reason": "a quotation"}, key=d.keys["reviewer"])
        assert r.status == 201, r
        cls.contest_id = r.json["contest_id"]
        r = d.request("POST", f"/v1/contests/{cls.contest_id}/resolution",
                      {"outcome": "upheld", "note": "checked"}, key=cls.second)
        assert r.status == 201, r
        d.stop()

    def test_every_event_has_its_leaf_and_the_root_matches(self):
        writer, by_index = self.check_log(self.d.db_path)
        self.assertTrue(writer)
        self.assertNotEqual(by_index[0][1], 7, "a new database's log has no legacy head")
        kinds = [KINDS[rec[1]] for rec in by_index.values()]
        self.assertEqual(kinds.count("decision"), len(self.decision_ids))
        self.assertEqual((kinds.count("contest"), kinds.count("resolution")), (1, 1))
        self.assertEqual(kinds.count("key_event"), 4, "three keys before the start, one while it ran")
        self.assertGreaterEqual(kinds.count("policy"), 1)
        self.assertEqual(self.check_decisions_match(self.d.db_path, by_index), len(self.decision_ids))

    def test_key_event_from_the_cli_is_in_order(self):
        c = sqlite3.connect(self.d.db_path)
        try:
            rows = c.execute("SELECT leaf_index FROM admin_events WHERE action = 'key.create' ORDER BY seq").fetchall()
        finally:
            c.close()
        leaves = [r[0] for r in rows]
        self.assertEqual(leaves, sorted(leaves))
        self.assertEqual(len(leaves), 4)

    def test_restart_continues_the_same_log(self):
        before = self.leaves(self.d.db_path)
        writer, _ = self.check_log(self.d.db_path)
        self.d.start()
        try:
            r = self.d.score({"items": items(3, 900, "after-")})
            self.assertEqual(r.status, 200, r)
        finally:
            self.d.stop()
        after = self.leaves(self.d.db_path)
        self.assertEqual(after[:len(before)], before, "the old leaves are unchanged")
        self.assertGreaterEqual(len(after), len(before) + 3)
        writer2, by_index = self.check_log(self.d.db_path)
        self.assertEqual(writer2, writer)
        self.check_decisions_match(self.d.db_path, by_index)


@H.sqlite_only("a SQLite fixture")
class LegacyUpgradeTest(LogChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-log-legacy-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.db = os.path.join(cls.tmp, "audit.db")
        with open(LEGACY_DUMP) as f:
            legacy = sqlite3.connect(cls.db)
            legacy.executescript(f.read())
            legacy.close()
        c = sqlite3.connect(cls.db)
        cls.head = c.execute("SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1").fetchone()
        c.close()
        cls.d = H.start_daemon(cls, models=("toxicity",), db_path=cls.db)
        r = cls.d.score({"items": H.json_items(H.random_embeddings(2, 1024, 5), "new")})
        assert r.status == 200, r
        cls.new_ids = [x["decision_id"] for x in r.json["results"]]
        cls.d.stop()

    def test_first_leaf_binds_the_old_chain(self):
        _, by_index = self.check_log(self.db)
        head = decode_legacy_head(by_index[0])
        # the keys the harness created (with the CLI, on the upgraded file) may have chained after
        # the fixture's head: leaf 0 binds the head as it was when the log began
        c = sqlite3.connect(self.db)
        try:
            at = c.execute("SELECT hash FROM audit_chain WHERE seq = ?", (head["head_seq"],)).fetchone()
        finally:
            c.close()
        self.assertGreaterEqual(head["head_seq"], self.head[0])
        self.assertEqual(head["head_hash"], at[0])
        self.assertTrue(head["has_log_root"])
        rows = H.db_query(self.db, "SELECT leaf_index FROM decisions WHERE decision_id IN (?, ?)",
                          tuple(self.new_ids))
        self.assertTrue(all(r["leaf_index"] is not None for r in rows), rows)
        self.check_decisions_match(self.db, by_index)

    def test_old_rows_have_no_leaf(self):
        n = H.db_scalar(self.db, "SELECT count(*) FROM decisions WHERE leaf_index IS NULL")
        self.assertGreater(n, 0)


@H.sqlite_only("kill -9 and the SQLite file")
class CrashTest(LogChecks, unittest.TestCase):
    def test_acknowledged_decisions_have_leaves_after_kill(self):
        H.require_models(TINY)
        tmp = tempfile.mkdtemp(prefix="pgcld-log-crash-")
        self.addCleanup(shutil.rmtree, tmp, True)
        d = H.Daemon(models=tiny_root(tmp), default_model="tiny")
        self.addCleanup(d.cleanup, False)
        d.start()
        acked, stop = [], threading.Event()
        lock = threading.Lock()

        def client(seed):
            n = 0
            while not stop.is_set():
                try:
                    r = d.score({"items": items(4, seed * 1000 + n, f"c{seed}-{n}-")})
                except Exception:
                    return
                if r.status == 200:
                    with lock:
                        acked.extend(x["decision_id"] for x in r.json["results"])
                n += 1

        threads = [threading.Thread(target=client, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        d.kill()
        stop.set()
        for t in threads:
            t.join(30)
        self.assertTrue(acked)
        _, by_index = self.check_log(d.db_path)
        logged = {uuid_text(rec[2:18]) for rec in by_index.values() if rec[1] == 1}
        missing = [i for i in acked if i not in logged]
        self.assertEqual(missing, [], "acknowledged decisions without a leaf")


if __name__ == "__main__":
    unittest.main()
