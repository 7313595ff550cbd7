"""Each PostgreSQL writer's transparency log (issue 28; core/audit/pg/pg_log.c,
migrations/pg/0003_log.sql), read straight from the database after real traffic.

Real pgcld processes on a real PostgreSQL 15 (the program's throw-away cluster, a fresh database per
case). Checked, from the rows alone and with nothing of pgcld's code:

  - two replicas (--writer-id a, b) and the keys CLI (its own writer id) score, file a contest and
    resolve it: every event row (decisions, admin and key events, contests, resolutions) names a
    leaf of its writer's log; each log's leaves are 0..size-1 with no gap, each leaf hash is
    SHA-256(0x00 || record), the records decode at docs/log-record.md's positions and say what the
    rows say (ids, times, kinds, the decision's vector, probabilities and policy reference), every
    other leaf is a policy record; the RFC 6962 root recomputed here is log_writers.root, and each
    stored full-tile root is the tile's hash; the replicas' logs are independent (each holds only
    its own events, and neither waits for the other);
  - a restarted replica goes on with its log: the earlier leaves unchanged, the new ones after them;
  - the store interface (audit_log.h, through tests/server/pg_log_reads) serves the same: the logs'
    states, every C2SP tile and entry bundle built from the rows (compared with tiles built here),
    each event's (writer, leaf), and a checkpoint stored once, refused when another note claims its
    size, with a witness's cosignature appended;
  - a database written before the log (its log rows taken away by a superuser with the triggers
    off) gets, at the writer's next start, a log whose leaf 0 is a legacy_head record binding that
    writer's audit chain head (seq, hash, the chain's log tree root, the writer id).

Skips (77) without postgresql-15 or psycopg2, and fails then under tests/run_all.sh (skips.py).
"""

import datetime
import hashlib
import json
import os
import struct
import subprocess
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from rfc6962 import mth  # noqa: E402
import skips  # noqa: E402

MODEL = "tiny_binary"  # D = 32: cheap to score
D = 32
EVENT_TABLES = {  # table -> (id column, record kind(s))
    "decisions": ("decision_id", {1}),
    "admin_events": ("event_id", {2, 3}),
    "contests": ("contest_id", {4}),
    "resolutions": ("contest_id", {5}),
}
POLICY, LEGACY_HEAD = 6, 7


def items(n, seed, prefix="x"):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)


def sha256(b):
    return hashlib.sha256(b).digest()




def micros(text):
    """pgcld's RFC 3339 time ("2026-11-21T10:33:00.123456Z") as microseconds since the epoch."""
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return (t - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)


def be64(b, at):
    return struct.unpack_from(">q", b, at)[0]


def varint(b, at):
    v = shift = 0
    while True:
        byte = b[at]
        at += 1
        v |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return v, at


def text_at(b, at):
    n, at = varint(b, at)
    return b[at:at + n].decode(), at + n


class LogCase(unittest.TestCase):
    def setUp(self):
        H.require_models(MODEL)
        self.cluster = H.pg_cluster()
        self.uri = self.cluster.new_database()

    def replica(self, writer_id, auth=False):
        d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=self.uri, auth=auth, args=["--writer-id", writer_id])
        self.addCleanup(d.cleanup)
        return d.start()

    def query(self, sql, params=()):
        return H.db_query(self.uri, sql, params)

    def leaves(self, writer):
        return self.query("SELECT leaf_index, leaf_hash, record FROM log_leaves WHERE writer_id = ? ORDER BY leaf_index",
                          (writer,))

    # -- what every log must be
    def check_log(self, writer):
        """Writer's log: contiguous leaves, leaf hashes, root, full-tile roots. Returns its records."""
        state = self.query("SELECT size, root FROM log_writers WHERE writer_id = ?", (writer,))
        self.assertEqual(len(state), 1, f"log_writers has no row for {writer}")
        rows = self.leaves(writer)
        self.assertEqual([r["leaf_index"] for r in rows], list(range(state[0]["size"])),
                         f"log {writer}: the leaves are not 0..size-1")
        hashes = []
        for r in rows:
            self.assertEqual(r["leaf_hash"], sha256(b"\x00" + r["record"]), f"log {writer} leaf {r['leaf_index']}")
            self.assertEqual(r["record"][0], 1, "record version")
            hashes.append(r["leaf_hash"])
        self.assertEqual(mth(hashes), state[0]["root"], f"log {writer}: root")
        tiles = self.query("SELECT level, tile_index, root FROM log_tile_roots WHERE writer_id = ?"
                           " ORDER BY level, tile_index", (writer,))
        level0 = [t for t in tiles if t["level"] == 0]
        self.assertEqual([t["tile_index"] for t in level0], list(range(len(hashes) // 256)),
                         f"log {writer}: a full level-0 tile without its root, or a partial one with one")
        for t in level0:
            n = t["tile_index"]
            self.assertEqual(t["root"], mth(hashes[n * 256:(n + 1) * 256]), f"log {writer}: tile 0/{n}")
        return [r["record"] for r in rows]

    def check_events(self, records_of):
        """Every event row names a leaf of its writer's log whose record says what the row says;
        every leaf no row names is a policy (or the legacy head). Returns {writer: set of ids}."""
        named = {w: set() for w in records_of}
        ids = {w: set() for w in records_of}
        decisions = {r["decision_id"]: r for r in self.query("SELECT * FROM decisions")}
        contests = {r["contest_id"]: r for r in self.query("SELECT * FROM contests")}
        for table, (id_col, kinds) in EVENT_TABLES.items():
            for row in self.query(f"SELECT * FROM {table}"):
                w, leaf = row["writer_id"], row["leaf_index"]
                self.assertIsNotNone(leaf, f"{table} {row[id_col]}: no leaf")
                self.assertIn(w, records_of, f"{table} {row[id_col]}: writer {w} has no log")
                self.assertNotIn(leaf, named[w], f"log {w}: leaf {leaf} named twice")
                named[w].add(leaf)
                ids[w].add(row[id_col])
                rec = records_of[w][leaf]
                self.assertIn(rec[1], kinds, f"{table} {row[id_col]}: record kind {rec[1]}")
                self.assertEqual(rec[2:18], uuid.UUID(row[id_col]).bytes, f"{table}: the record's id")
                if table == "decisions":
                    self.check_decision(row, rec, records_of[w])
                elif table == "admin_events":
                    self.assertEqual(be64(rec, 18), micros(row["created_at"]))
                    self.assertEqual(rec[1], 3 if row["action"].startswith("key.") else 2, row["action"])
                elif table == "contests":
                    self.assertEqual(rec[18:34], uuid.UUID(row["decision_id"]).bytes)
                    self.assertEqual(be64(rec, 34), micros(row["filed_at"]))
                    self.assertEqual(text_at(rec, 47)[0], row["filed_by"])
                else:
                    decision_id = contests[row["contest_id"]]["decision_id"]
                    self.assertEqual(rec[18:34], uuid.UUID(decision_id).bytes, "the resolution's decision")
                    self.assertEqual(be64(rec, 34), micros(row["resolved_at"]))
                    self.assertEqual(rec[42], {"upheld": 0, "overturned": 1}[row["outcome"]])
        for w, records in records_of.items():
            for i, rec in enumerate(records):
                if i not in named[w]:
                    self.assertIn(rec[1], (POLICY, LEGACY_HEAD), f"log {w} leaf {i}: no row names it")
        self.assertTrue(decisions)
        return ids

    def check_decision(self, row, rec, log_records):
        self.assertEqual(be64(rec, 18), micros(row["created_at"]), "created_at")
        self.assertEqual(rec[42:74].hex(), row["model_sha256"])
        self.assertEqual(rec[106:138].hex(), row["input_sha256"])
        self.assertEqual(rec[140], {"allow": 0, "review": 1, "block": 2}[row["decision"]])
        k, label_index, d = struct.unpack_from(">HHH", rec, 143)
        self.assertEqual((label_index, 4 * d), (row["label_index"], len(row["vector"])))
        at = 149 + (18 if rec[141] == 0 else 8)
        probabilities = struct.unpack_from(f"<{k}f", rec, at)
        at += 4 * k
        self.assertEqual(rec[at:at + 4 * d], bytes(row["vector"]), "the vector")
        self.assertEqual(list(probabilities), [struct.unpack("<f", struct.pack("<f", v))[0]
                                               for v in json.loads(row["probabilities"]).values()])
        policy_refs = {sha256(b"\x00" + r) for r in log_records if r[1] == POLICY}
        self.assertIn(rec[74:106], policy_refs, "the decision's policy is a leaf of its log")

    def reads(self, *args):
        """tests/server/pg_log_reads ARGS on this database: (exit status, JSON or stderr)."""
        helper = os.environ.get("PGCLD_PG_LOG_READS") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(H.PGCLD_BIN))), "tests", "pg_log_reads")
        if not os.path.exists(helper):
            skips.missing_in_case(self, f"tests/server/pg_log_reads, built by meson ({helper})")
        p = subprocess.run([helper, self.uri, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else p.stderr)

    def expected_tiles(self, writer):
        """Every tile of writer's tree, built here from its rows (tlog-tiles: paths, bytes)."""
        rows = self.leaves(writer)
        hashes, records, size = [r["leaf_hash"] for r in rows], [r["record"] for r in rows], len(rows)

        def path(level, n, width):
            digits = f"{n:03d}"
            groups = []
            while n >= 1000:
                groups.insert(0, f"{n % 1000:03d}")
                n //= 1000
            groups.insert(0, f"{n:03d}")
            name = "/".join(["x" + g for g in groups[:-1]] + [groups[-1]]) if len(groups) > 1 else digits
            return f"tile/{level}/{name}" + (f".p/{width}" if width < 256 else "")

        tiles, level_hashes, level = {}, hashes, 0
        while level_hashes:
            for n in range(0, (len(level_hashes) + 255) // 256):
                part = level_hashes[n * 256:(n + 1) * 256]
                tiles[path(level, n, len(part))] = b"".join(part).hex()
                if level == 0:
                    bundle = b"".join(struct.pack(">H", len(r)) + r for r in records[n * 256:(n + 1) * 256])
                    tiles[path("entries", n, len(part))] = bundle.hex()
            level_hashes = [mth(level_hashes[i:i + 256]) for i in range(0, len(level_hashes) - 255, 256)]
            level += 1
        return size, tiles

    # -- the cases
    def test_two_replicas_log_every_event(self):
        a = self.replica("a", auth=True)
        b = self.replica("b", auth=True)
        answered = {"a": [], "b": []}
        for i in range(3):  # more than a tile (256 leaves) on a
            r = a.score({"items": items(100, 10 + i, f"a{i}")})
            self.assertEqual(r.status, 200, f"{r}\n{a.logs()}")
            answered["a"] += [x["decision_id"] for x in r.json["results"]]
        r = b.score({"items": items(7, 20, "b")})
        self.assertEqual(r.status, 200, r)
        answered["b"] += [x["decision_id"] for x in r.json["results"]]
        did = answered["a"][5]
        filed = b.post(f"/v1/decisions/{did}/contests", {"reason": "logged?"}, key=b.keys["reviewer"])
        self.assertEqual(filed.status, 201, f"{filed}\n{b.logs()}")
        cid = filed.json["contest_id"]
        resolved = a.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "logged too"},
                          key=a.keys["reviewer"])
        self.assertEqual(resolved.status, 201, f"{resolved}\n{a.logs()}")

        writers = [r["writer_id"] for r in self.query("SELECT writer_id FROM log_writers ORDER BY writer_id")]
        self.assertLessEqual({"a", "b"}, set(writers))
        records_of = {w: self.check_log(w) for w in writers}
        ids = self.check_events(records_of)
        self.assertGreater(len(records_of["a"]), 256)
        self.assertLessEqual(set(answered["a"]), ids["a"])
        self.assertLessEqual(set(answered["b"]), ids["b"])
        self.assertIn(cid, ids["b"], "the contest is in the log of the replica that filed it")
        self.assertIn(cid, ids["a"], "the resolution is in the log of the replica that resolved it")
        self.assertFalse(set(answered["a"]) & ids["b"], "a's decisions in b's log")
        self.assertFalse(set(answered["b"]) & ids["a"], "b's decisions in a's log")
        # the keys CLI logs its key events in a log of its own
        key_writers = {r["writer_id"] for r in self.query("SELECT writer_id FROM admin_events WHERE action = 'key.create'")}
        self.assertFalse(key_writers & {"a", "b"}, key_writers)

        # a restart goes on with the same log
        before = self.leaves("a")
        a.restart()
        r = a.score({"items": items(5, 30, "again")})
        self.assertEqual(r.status, 200, r)
        after = self.leaves("a")
        self.assertEqual(after[:len(before)], before, "a restart changed earlier leaves")
        self.assertGreater(len(after), len(before))
        records_of["a"] = self.check_log("a")
        ids = self.check_events(records_of)
        self.assertLessEqual({x["decision_id"] for x in r.json["results"]}, ids["a"])

        # the same through the store interface
        rc, got = self.reads("logs")
        self.assertEqual(rc, 0, got)
        states = self.query("SELECT writer_id, size, root FROM log_writers ORDER BY writer_id")
        self.assertEqual(sorted(got["logs"], key=lambda x: x["writer_id"]),
                         [{"writer_id": s["writer_id"], "size": s["size"], "root": s["root"].hex()} for s in states])
        for w in ("a", "b"):
            rc, got = self.reads("tiles", w)
            self.assertEqual(rc, 0, got)
            size, tiles = self.expected_tiles(w)
            self.assertEqual(got["size"], size)
            self.assertEqual(set(got["tiles"]), set(tiles), f"log {w}: the tile paths")
            for p, data in tiles.items():
                self.assertEqual(got["tiles"][p], data, f"log {w}: {p}")
        self.assertIn("tile/1/000.p/1", self.reads("tiles", "a")[1]["tiles"], "a's tree has a level-1 tile")
        self.assertEqual(self.reads("tiles", "nobody")[0], 3)
        leaf_of = self.query("SELECT writer_id, leaf_index FROM decisions WHERE decision_id = ?", (did,))[0]
        self.assertEqual(self.reads("leaf", "decision", did), (0, leaf_of))
        self.assertEqual(self.reads("leaf", "contest", cid)[1]["writer_id"], "b")
        self.assertEqual(self.reads("leaf", "resolution", cid)[1]["writer_id"], "a")
        self.assertEqual(self.reads("leaf", "contest", did)[0], 3, "a decision's id is no contest's")
        self.assertEqual(self.reads("leaf", "key_event", self.query(
            "SELECT event_id FROM admin_events WHERE action = 'key.create' LIMIT 1")[0]["event_id"])[0], 0)
        # a checkpoint of b's log (b stopped: the helper takes b's writer lock)
        self.assertEqual(b.stop(), 0)
        size_b = self.query("SELECT size FROM log_writers WHERE writer_id = 'b'")[0]["size"]
        rc, got = self.reads("checkpoint", "b", str(size_b))
        self.assertEqual(rc, 0, got)
        self.assertEqual(got, {"size": size_b, "note": f"test note of size {size_b}\n\n— test sig\n"
                                                        "— witness cosig\n"})
        self.assertEqual(self.reads("checkpoint", "b", str(size_b + 1))[0], 4, "a tree b's log has not reached")

    def test_database_with_an_old_chain_gets_a_legacy_head(self):
        old = self.replica("old")
        r = old.score({"items": items(4, 40, "old")})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(old.stop(), 0)
        # the database as it was before the log: no log rows, no leaves on the events
        import psycopg2
        conn = psycopg2.connect(self.uri)
        with conn, conn.cursor() as cur:
            cur.execute("SET session_replication_role = replica")  # the append-only triggers off
            cur.execute("DELETE FROM log_tile_roots WHERE writer_id = 'old'")
            cur.execute("DELETE FROM log_leaves WHERE writer_id = 'old'")
            cur.execute("DELETE FROM log_checkpoints WHERE writer_id = 'old'")
            cur.execute("DELETE FROM log_writers WHERE writer_id = 'old'")
            for table in EVENT_TABLES:
                cur.execute(f"UPDATE {table} SET writer_id = NULL, leaf_index = NULL WHERE writer_id = 'old'")
        conn.close()
        chain = self.query("SELECT seq, hash FROM audit_chain WHERE writer_id = 'old' ORDER BY seq")
        self.assertGreaterEqual(len(chain), 2)
        old.start()
        r = old.score({"items": items(3, 41, "new")})
        self.assertEqual(r.status, 200, r)
        records = self.check_log("old")
        head = records[0]
        self.assertEqual(head[1], LEGACY_HEAD, "leaf 0 of a log over an old chain")
        self.assertEqual(be64(head, 10), chain[-1]["seq"])
        self.assertEqual(head[18:50].hex(), chain[-1]["hash"])
        self.assertEqual(head[50], 1, "the chain's log root is bound")
        entries = [sha256(b"\x00" + bytes.fromhex(e["hash"])) for e in chain]
        self.assertEqual(head[51:83], mth(entries), "the chain's log tree root over its entries")
        self.assertEqual(text_at(head, 83), ("old", len(head)))
        # the decisions written before the log have no leaf; the new ones have theirs after the head
        rows = self.query("SELECT decision_id, leaf_index FROM decisions WHERE writer_id = 'old'")
        self.assertEqual({x["decision_id"] for x in rows}, {x["decision_id"] for x in r.json["results"]})
        self.assertTrue(all(x["leaf_index"] >= 1 for x in rows))
        self.assertEqual(self.query("SELECT count(*) AS n FROM decisions WHERE writer_id IS NULL")[0]["n"], 4)


if __name__ == "__main__":
    H.main()
