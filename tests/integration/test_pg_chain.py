"""One chain per writer on the PostgreSQL store (issue 17; docs/audit.md, "A fleet on PostgreSQL").

On a throw-away PostgreSQL 15 cluster (pg_cluster.py):

  * Chains written by the test itself with psycopg2, following the writer's convention (genesis
    over the writer id, one commit entry per transaction over an RFC 9162 Merkle tree of its
    events, runs, log tree nodes), for two writers 'a' and 'b' whose transactions interleave on
    the fleet's seqs. A naive oracle here (Python, the standard library) recomputes every leaf from
    the rows, every entry hash, root and log tree root, and checks what `pgcld audit verify --db
    URI` says against it: intact over both chains, each writer's head and log root.
  * `pgcld audit checkpoint --db URI` signs a fleet checkpoint over both heads (checked against
    the oracle's heads and log roots, recorded in audit_checkpoints); verify accepts it, and
    refuses a checkpoint file whose head was changed (its signature), and reports a checkpoint
    whose head the chain no longer has (a truncated chain) at that writer and entry.
  * Tampering, as the superuser with the append-only triggers disabled (ALTER TABLE ... DISABLE
    TRIGGER USER) on a copy of the database: one decision's label, one stored leaf, a deleted run
    row, an unchained decision, a log tree node: each is reported at the right writer and entry.
  * With the PostgreSQL writer built (audit_pg_writer.c), two daemons (--writer-id a / b) on one
    database score decisions: GET /v1/audit/verify on either is intact over both chains; proofs of
    decisions of both writers verify with docs/verify_proof.py and `pgcld audit verify-proof`,
    also against a fleet checkpoint made through POST /v1/audit/checkpoints; consistency proofs
    need writer= and verify.

The rows the test writes itself are stamped relative to the clock (two hours ago onwards), never
with a fixed date: `audit archive --older-than-days 1` must find nothing that old on any day.

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_pg_chain.py
"""
import base64
import datetime
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster  # noqa: E402
import skips  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

ROOT = H.SOURCE_ROOT
VERIFIER = os.path.join(ROOT, "docs", "verify_proof.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# The PostgreSQL store's migrations, in order (0001_fleet, 0002_trace_context, ...).
MIGRATIONS = sorted(os.path.join(ROOT, "migrations", "pg", f) for f in os.listdir(os.path.join(ROOT, "migrations", "pg"))
                    if f.endswith(".sql"))


def apply_migrations(conn):
    with conn.cursor() as cur:
        for path in MIGRATIONS:
            with open(path, encoding="utf-8") as f:
                cur.execute(f.read())
    conn.commit()
TABLES = ("decisions", "admin_events", "contests", "resolutions")

# The rows' times: seconds after a start two hours before the test ran (whole seconds, so that the
# fraction-less forms below stay exact). Relative to the clock: none is ever a day old.
T_START = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - datetime.timedelta(hours=2)


def at(seconds, fraction=True):
    """T_START + seconds in RFC 3339 UTC, with microseconds or (fraction=False) without."""
    return (T_START + datetime.timedelta(seconds=seconds)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ" if fraction else "%Y-%m-%dT%H:%M:%SZ")

# ---- the oracle: the encodings of docs/audit.md, written again from the text ----


def sha(b):
    return hashlib.sha256(b).digest()


def v_null():
    return b"\x00"


def v_int(v):
    return b"\x01" + int(v).to_bytes(8, "big", signed=True)


def v_real(v):
    return b"\x02" + struct.pack(">d", v)


def v_text(s):
    b = s.encode()
    return b"\x03" + len(b).to_bytes(4, "big") + b


def v_blob(b):
    return b"\x04" + len(b).to_bytes(4, "big") + bytes(b)


def value(v):
    if v is None:
        return v_null()
    if isinstance(v, bool):
        raise TypeError(v)
    if isinstance(v, int):
        return v_int(v)
    if isinstance(v, float):
        return v_real(v)
    if isinstance(v, str):
        return v_text(v)
    return v_blob(v)


def leaf_hash(data):
    return sha(b"\x00" + data)


def node(l, r):
    return sha(b"\x01" + l + r)


def mth(leaves):  # RFC 9162 2.1.1, recursively
    n = len(leaves)
    if n == 0:
        return sha(b"")
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node(mth(leaves[:k]), mth(leaves[k:]))


def entry_hash(seq, kind, row_seq, payload, prev):
    return sha(v_int(seq) + v_text(kind) + v_int(row_seq) + v_text(payload) + v_text(prev)).hex()


def digest_value(input_bytes, recorded):
    """The input's place in a decision's leaf (docs/audit.md, the table under "Encoding version 2")."""
    if input_bytes is None:
        return v_blob(recorded) if recorded is not None else v_null()
    h = sha(input_bytes)
    if recorded is None or bytes(recorded) == h:
        return v_blob(h)
    return v_blob((bytes(recorded) + b"\x00" * 32)[:32] + h)


DECISION_COLUMNS = ("seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
                    " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256,"
                    " latency_us")
ROW_SQL = {
    "decisions": f"SELECT {DECISION_COLUMNS}, input_dtype, input_digest FROM decisions WHERE seq = %s",
    "admin_events": "SELECT seq, event_id, created_at, actor, action, target, details FROM admin_events WHERE seq = %s",
    "contests": "SELECT seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests"
                " WHERE seq = %s",
    "resolutions": "SELECT seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note"
                   " FROM resolutions WHERE seq = %s",
}


def leaf_data_of_row(cur, kind, seq):
    """The leaf data of row seq of table kind, read back from PostgreSQL: None when absent."""
    cur.execute(ROW_SQL[kind], (seq,))
    row = cur.fetchone()
    if row is None:
        return None
    data = v_text(kind)
    if kind != "decisions":
        return data + b"".join(value(v) for v in row)
    cur.execute("SELECT input FROM decision_inputs WHERE decision_seq = %s", (seq,))
    stored = cur.fetchone()
    data += b"".join(value(v) for v in row[:19])
    data += digest_value(bytes(stored[0]) if stored else None, row[20])
    return data + value(row[19])


def log_root(entry_hashes):
    return mth([leaf_hash(bytes.fromhex(h)) for h in entry_hashes]).hex()


def oracle_verify(conn):
    """Recomputes everything from the rows; returns ({writer: (head_seq, head_hash, log_root)}, problems)."""
    cur = conn.cursor()
    heads, problems = {}, []
    cur.execute("SELECT writer_id FROM audit_chain GROUP BY writer_id ORDER BY writer_id COLLATE \"C\"")
    covered = {t: set() for t in TABLES}
    for (w,) in cur.fetchall():
        cur.execute("SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count, leaves FROM audit_chain"
                    " WHERE writer_id = %s ORDER BY seq", (w,))
        entries = cur.fetchall()
        prev, hashes = "0" * 64, []
        for i, (seq, kind, row_seq, payload, prev_hash, h, leaf_count, leaves) in enumerate(entries):
            if seq != i + 1 or prev_hash != prev or entry_hash(seq, kind, row_seq, payload, prev_hash) != h:
                problems.append((w, seq, "link"))
                break
            if seq == 1:
                if kind != "genesis" or payload != sha(v_text(w)).hex():
                    problems.append((w, 1, "genesis"))
            else:
                leaves = bytes(leaves or b"")
                ls = [leaves[j:j + 32] for j in range(0, len(leaves), 32)]
                if mth(ls).hex() != payload or row_seq != leaf_count or len(ls) != leaf_count:
                    problems.append((w, seq, "root"))
                cur.execute("SELECT kind, first_row_seq, n, first_leaf FROM audit_chain_runs WHERE writer_id = %s"
                            " AND entry_seq = %s ORDER BY first_leaf", (w, seq))
                at = 0
                for kind_r, first, n, first_leaf in cur.fetchall():
                    if first_leaf != at:
                        problems.append((w, seq, "runs"))
                    for k in range(n):
                        data = leaf_data_of_row(conn.cursor(), kind_r, first + k)
                        if data is None or at + k >= len(ls) or leaf_hash(data) != ls[at + k]:
                            problems.append((w, seq, "leaf"))
                        if first + k in covered[kind_r]:
                            problems.append((w, seq, "overlap"))
                        covered[kind_r].add(first + k)
                    at += n
                if at != leaf_count:
                    problems.append((w, seq, "runs"))
            hashes.append(h)
            prev = h
        # the log tree's stored nodes: every complete subtree, nothing else
        cur.execute("SELECT level, idx, hash FROM audit_log_nodes WHERE writer_id = %s", (w,))
        stored = {(lv, ix): bytes(hh) for lv, ix, hh in cur.fetchall()}
        want = {}
        level_hashes = [leaf_hash(bytes.fromhex(h)) for h in hashes]
        lv = 0
        while len(level_hashes) >= 2:
            lv += 1
            level_hashes = [node(level_hashes[j], level_hashes[j + 1]) for j in range(0, len(level_hashes) - 1, 2)]
            for j, hh in enumerate(level_hashes):
                want[(lv, j)] = hh
        if stored != want:
            problems.append((w, None, "nodes"))
        heads[w] = (len(hashes), hashes[-1] if hashes else None, log_root(hashes) if hashes else None)
    for t in TABLES:
        cur.execute(f"SELECT seq FROM {t}")
        rows = {r[0] for r in cur.fetchall()}
        if rows != covered[t]:
            problems.append((None, None, f"coverage of {t}"))
    return heads, problems


# ---- chains written as the writer writes them ----


class ChainWriter:
    """Writes event rows and the chains of several writers into one database, in the writer's
    convention (audit_pg_writer.c): each transaction takes the fleet's next seqs, chains its rows
    as one commit entry of its writer, its runs and the log tree nodes its entry completes."""

    def __init__(self, conn):
        self.conn = conn
        self.heads = {}  # writer -> (seq, hash)
        self.seqs = {t: 0 for t in TABLES}
        self.clock = 0

    def now(self):
        self.clock += 1
        return at(self.clock)

    def _append_entry(self, cur, w, kind, row_seq, payload, leaves=None):
        seq, prev = self.heads.get(w, (0, "0" * 64))
        seq += 1
        h = entry_hash(seq, kind, row_seq, payload, prev)
        cur.execute("INSERT INTO audit_chain (writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash,"
                    " leaf_count, leaves) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (w, seq, kind, row_seq, payload, prev, h, None if leaves is None else len(leaves),
                     None if leaves is None else b"".join(leaves)))
        self.heads[w] = (seq, h)
        self._store_nodes(cur, w, seq)
        return seq

    def _store_nodes(self, cur, w, seq):
        """Stores the nodes entry seq completes, each from the entries' hashes (simple, O(n))."""
        cur.execute("SELECT hash FROM audit_chain WHERE writer_id = %s ORDER BY seq", (w,))
        leaves = [leaf_hash(bytes.fromhex(r[0])) for r in cur.fetchall()]
        level, size = 0, 1
        while seq % (size * 2) == 0:
            level += 1
            size *= 2
            idx = seq // size - 1
            cur.execute("INSERT INTO audit_log_nodes (writer_id, level, idx, hash) VALUES (%s, %s, %s, %s)",
                        (w, level, idx, mth(leaves[idx * size:(idx + 1) * size])))

    def start(self, w):
        with self.conn.cursor() as cur:
            now = self.now()
            cur.execute("INSERT INTO writers (writer_id, first_seen, last_seen) VALUES (%s, %s, %s)", (w, now, now))
            self._append_entry(cur, w, "genesis", 0, sha(v_text(w)).hex())
        self.conn.commit()

    def commit(self, w, events):
        """One transaction of writer w: events are (kind, values) with values the row's columns after
        seq; returns the new rows' seqs."""
        cur = self.conn.cursor()
        leaves, runs, out = [], [], []
        for kind, vals in events:
            self.seqs[kind] += 1
            s = self.seqs[kind]
            out.append(s)
            if kind == "decisions":
                vals = dict(vals)
                stored = vals.pop("input", None)
                cols = ["seq"] + list(vals)
                cur.execute(f"INSERT INTO decisions ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                            [s] + list(vals.values()))
                if stored is not None:
                    cur.execute("INSERT INTO decision_inputs (decision_seq, input) VALUES (%s, %s)", (s, stored))
            else:
                cols = ["seq"] + list(vals)
                cur.execute(f"INSERT INTO {kind} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                            [s] + list(vals.values()))
            leaves.append(leaf_hash(leaf_data_of_row(cur, kind, s)))
            if runs and runs[-1][0] == kind and runs[-1][1] + runs[-1][2] == s:
                runs[-1][2] += 1
            else:
                runs.append([kind, s, 1, len(leaves) - 1])
        root = mth(leaves).hex()
        seq = self._append_entry(cur, w, "commit", len(leaves), root, leaves)
        for kind, first, n, first_leaf in runs:
            cur.execute("INSERT INTO audit_chain_runs (kind, first_row_seq, n, writer_id, entry_seq, first_leaf)"
                        " VALUES (%s, %s, %s, %s, %s, %s)", (kind, first, n, w, seq, first_leaf))
        self.conn.commit()
        return out, seq


def decision(i, w, stored_input=True):
    did = f"0190{i:04x}-{w}aaa-7bbb-8ccc-{i:012x}"
    inp = bytes((i * 7 + k) % 256 for k in range(64)) if stored_input else None
    return ("decisions", {
        "decision_id": did, "created_at": at(i), "request_id": f"req-{i}",
        "item_id": f"item-{i}", "model_name": "toxicity", "model_version": "1", "model_sha256": "ab" * 32,
        "label": "toxic" if i % 2 else "ok", "label_index": i % 2, "probabilities": "[0.25,0.75]",
        "toxicity": 0.1 + i / 1000.0 if i % 3 else None, "decision": ("allow", "review", "block")[i % 3],
        "policy": "{}", "t_review": 0.5 if i % 4 else None, "t_block": 0.9 if i % 4 else None,
        "vector": struct.pack("<4f", i, 0.5, -1.25, 3.0), "input_sha256": "cd" * 32, "latency_us": 1000 + i,
        "input_dtype": "f32" if stored_input else None, "input_digest": sha(inp) if stored_input else None,
        "input": inp})


def admin_event(i, w):
    return ("admin_events", {"event_id": f"ev-{w}-{i}", "created_at": at(60 + i, fraction=False),
                             "actor": f"admin-{w}", "action": "key.create", "target": f"k{i}", "details": "{}"})


def build_fleet(conn):
    """Two writers, interleaved transactions: decisions, admin events, a contest and its resolution,
    an input dropped by retention (its digest stays). Returns (ChainWriter, {decision_id: writer})."""
    cw = ChainWriter(conn)
    cw.start("a")
    cw.start("b")
    owner, i = {}, 0
    for round_ in range(7):
        for w in ("a", "b"):
            events = []
            for _ in range(1 + (round_ * 3 + len(w)) % 5):
                i += 1
                events.append(decision(i, w, stored_input=i % 4 != 0))
                owner[events[-1][1]["decision_id"]] = w
            if round_ % 3 == 1:
                events.append(admin_event(i, w))
            cw.commit(w, events)
    first = next(iter(owner))
    cw.commit("b", [("contests", {"contest_id": "c-1", "decision_id": first, "filed_at": at(3600, fraction=False),
                                  "filed_by": "rev-1", "filer_key_id": None, "reason": "wrong"})])
    cw.commit("a", [("resolutions", {"contest_id": "c-1", "resolved_at": at(3660, fraction=False),
                                     "resolved_by": "rev-2", "resolver_key_id": "k9", "outcome": "overturned",
                                     "corrected_label": "ok", "note": "n"}), admin_event(999, "a")])
    # retention: decision 2's stored input dropped; its leaf keeps committing to the recorded digest
    with conn.cursor() as cur:
        cur.execute("DELETE FROM decision_inputs WHERE decision_seq = 2")
    conn.commit()
    return cw, owner


run_cli = H.run_pgcld
verify_json = H.verify_json


class PgChainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_binary()
        import psycopg2
        cls.psycopg2 = psycopg2
        pg_cluster.cluster_for_class(cls, "pgcld-pgchain-")
        cls.base = cls.cluster.new_database()
        conn = psycopg2.connect(cls.base)
        apply_migrations(conn)
        cls.cw, cls.owner = build_fleet(conn)
        cls.heads, problems = oracle_verify(conn)
        assert problems == [], problems
        conn.close()
        cls.key = os.path.join(cls.tmp, "signing.key")
        p = run_cli("audit", "keygen", "--out", cls.key)
        assert p.returncode == 0, p.stderr
        cls.public = p.stdout.strip().splitlines()[-1]

    def copy_db(self):
        """A copy of the base database (CREATE DATABASE ... TEMPLATE) for one tampering."""
        name = "t" + os.urandom(6).hex()
        base_name = self.base.rsplit("/", 1)[1]
        admin = self.cluster.connect()
        admin.cursor().execute(f"CREATE DATABASE {name} TEMPLATE {base_name}")
        admin.close()
        uri = self.cluster.uri(name)
        conn = self.psycopg2.connect(uri)
        conn.autocommit = True
        with conn.cursor() as cur:
            for t in TABLES + ("audit_chain", "audit_chain_runs", "audit_log_nodes", "decision_inputs"):
                cur.execute(f"ALTER TABLE {t} DISABLE TRIGGER USER")
        return uri, conn

    def entry_of(self, cur, kind, seq):
        cur.execute("SELECT writer_id, entry_seq FROM audit_chain_runs WHERE kind = %s AND first_row_seq <= %s"
                    " AND %s < first_row_seq + n", (kind, seq, seq))
        return cur.fetchone()

    def assert_bad(self, uri, writer, seq, words, *extra):
        rc, rep, err = verify_json(uri, *extra)
        self.assertEqual(rc, 1, (rep, err))
        self.assertFalse(rep["intact"], rep)
        self.assertEqual((rep["first_bad_writer"], rep["first_bad_seq"]), (writer, seq), rep)
        self.assertIn(f"writer '{writer}'", rep["reason"])
        for w in words:
            self.assertIn(w, rep["reason"])
        if not extra:  # the oracle sees it too: in that writer's chain, or as a row no run covers
            conn = self.psycopg2.connect(uri)
            try:
                _, problems = oracle_verify(conn)
            finally:
                conn.close()
            self.assertTrue(any(p[0] in (writer, None) for p in problems), problems)
        return rep

    # -- intact

    def test_verify_intact_over_both_chains(self):
        rc, rep, err = verify_json(self.base)
        self.assertEqual(rc, 0, err)
        self.assertTrue(rep["intact"], rep)
        self.assertEqual(rep["events"], sum(h[0] for h in self.heads.values()))
        self.assertEqual(rep["head_seq"], sum(h[0] for h in self.heads.values()))
        self.assertIsNone(rep["head_hash"])  # several writers: see writers
        got = {w["writer_id"]: (w["head_seq"], w["head_hash"], w["log_root"]) for w in rep["writers"]}
        self.assertEqual(got, self.heads)
        self.assertEqual([w["writer_id"] for w in rep["writers"]], ["a", "b"])
        self.assertTrue(all(w["intact"] for w in rep["writers"]))

    # -- fleet checkpoints

    def test_fleet_checkpoint(self):
        out = os.path.join(self.tmp, "fleet.json")
        p = run_cli("audit", "checkpoint", "--db", self.base, "--signing-key", self.key, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        cp = json.loads(p.stdout)
        with open(out, encoding="utf-8") as f:
            on_disk = json.load(f)
        self.assertEqual(on_disk["format"], "pgcld-fleet-checkpoint")
        self.assertEqual(on_disk["version"], 1)
        self.assertEqual(cp["file"], out)
        self.assertEqual({w["writer_id"]: (w["head_seq"], w["head_hash"], w["log_root"]) for w in on_disk["writers"]},
                         self.heads)
        # the signed statement, rebuilt here from the format in docs/audit.md, is what is recorded
        statement = "pgcld-fleet-checkpoint-v1\n%s\n%d\n" % (on_disk["created_at"], len(on_disk["writers"]))
        statement += "".join(f"{w['head_seq']} {w['head_hash']} {w['log_root']} {w['writer_id']}\n"
                             for w in on_disk["writers"])
        conn = self.psycopg2.connect(self.base)
        with conn.cursor() as cur:
            cur.execute("SELECT statement, public_key, signature FROM audit_checkpoints ORDER BY seq DESC LIMIT 1")
            self.assertEqual(cur.fetchone(), (statement, self.public, on_disk["signature"]))
        conn.close()
        rc, rep, err = verify_json(self.base, "--checkpoint", out, "--public-key", self.public)
        self.assertEqual(rc, 0, err)
        self.assertTrue(rep["intact"])
        self.assertEqual(rep["checkpoints"], 1)
        # a changed head: the signature no longer verifies, and verify refuses the file
        changed = dict(on_disk)
        changed["writers"] = [dict(w) for w in on_disk["writers"]]
        changed["writers"][0]["head_hash"] = "0" * 64
        bad = os.path.join(self.tmp, "fleet-changed.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump(changed, f)
        rc, rep, err = verify_json(self.base, "--checkpoint", bad)
        self.assertEqual(rc, 1)
        self.assertIn("signature does not verify", err)
        # signed by another key than the expected one
        rc, rep, err = verify_json(self.base, "--checkpoint", out, "--public-key", "ab" * 32)
        self.assertEqual(rc, 1)
        self.assertIn("not by the expected", err)
        # a single-chain verifier (the SQLite verify) refuses a fleet checkpoint instead of misreading it
        sqlite_db = os.path.join(self.tmp, "empty.db")
        open(sqlite_db, "wb").close()
        p = run_cli("audit", "verify", "--db", sqlite_db, "--checkpoint", out)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a pgcld audit checkpoint", p.stderr)
        # the chain truncated after the checkpoint: writer a's head entry removed with its rows
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            seq_a, _ = self.cw.heads["a"]
            cur.execute("SELECT kind, first_row_seq, n FROM audit_chain_runs WHERE writer_id = 'a' AND entry_seq = %s",
                        (seq_a,))
            for kind, first, n in cur.fetchall():
                if kind == "decisions":
                    cur.execute("DELETE FROM decision_inputs WHERE decision_seq BETWEEN %s AND %s", (first, first + n - 1))
                cur.execute(f"DELETE FROM {kind} WHERE seq BETWEEN %s AND %s", (first, first + n - 1))
            cur.execute("DELETE FROM audit_chain_runs WHERE writer_id = 'a' AND entry_seq = %s", (seq_a,))
            cur.execute("DELETE FROM audit_chain WHERE writer_id = 'a' AND seq = %s", (seq_a,))
            cur.execute("DELETE FROM audit_log_nodes WHERE writer_id = 'a' AND ((idx + 1) << level) >= %s", (seq_a,))
        conn.close()
        rc, rep, err = verify_json(uri)
        self.assertEqual(rc, 0, (rep, err))  # the chains alone: consistent
        self.assert_bad(uri, "a", seq_a, ["fleet checkpoint at entry", "chain ends at"], "--checkpoint", out)

    # -- tampering

    def test_tamper_decision_label(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT seq FROM decisions ORDER BY seq OFFSET 5 LIMIT 1")
            seq = cur.fetchone()[0]
            w, entry = self.entry_of(cur, "decisions", seq)
            cur.execute("UPDATE decisions SET label = 'forged' WHERE seq = %s", (seq,))
        conn.close()
        self.assert_bad(uri, w, entry, [f"decisions row {seq}", "payload differs"])

    def test_tamper_stored_input(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT decision_seq FROM decision_inputs ORDER BY decision_seq DESC LIMIT 1")
            seq = cur.fetchone()[0]
            w, entry = self.entry_of(cur, "decisions", seq)
            cur.execute("UPDATE decision_inputs SET input = '\\x00'::bytea WHERE decision_seq = %s", (seq,))
        conn.close()
        self.assert_bad(uri, w, entry, [f"decisions row {seq}", "payload differs"])

    def test_tamper_deleted_decision(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT first_row_seq + 1, writer_id, entry_seq, first_leaf + 1 FROM audit_chain_runs"
                        " WHERE kind = 'decisions' AND n >= 3 ORDER BY first_row_seq DESC LIMIT 1")
            seq, w, entry, leaf = cur.fetchone()
            cur.execute("DELETE FROM decision_inputs WHERE decision_seq = %s", (seq,))
            cur.execute("DELETE FROM decisions WHERE seq = %s", (seq,))
        conn.close()
        self.assert_bad(uri, w, entry, [f"entry {entry}, leaf {leaf}: decisions row {seq} is missing"])

    def test_tamper_leaf(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT seq, leaves FROM audit_chain WHERE writer_id = 'b' AND kind = 'commit'"
                        " ORDER BY seq OFFSET 2 LIMIT 1")
            seq, leaves = cur.fetchone()
            leaves = bytearray(leaves)
            leaves[0] ^= 1
            cur.execute("UPDATE audit_chain SET leaves = %s WHERE writer_id = 'b' AND seq = %s", (bytes(leaves), seq))
            cur.execute("UPDATE audit_chain SET leaves = NULL WHERE writer_id = 'a' AND seq = 2")
            cur.execute("SELECT d.decision_id FROM audit_chain_runs AS u JOIN decisions AS d ON d.seq = u.first_row_seq"
                        " WHERE u.writer_id = 'a' AND u.entry_seq = 2 AND u.kind = 'decisions'")
            broken = cur.fetchone()[0]
        conn.close()
        self.assert_bad(uri, "a", 2, ["not a well-formed commit entry"])
        rc, _, err = self.reads(uri, "proof", broken)  # a malformed entry gives no proof: 409, not 503
        self.assertEqual(rc, 5, err)
        self.assertIn("malformed", err)

    def test_tamper_delete_run(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT kind, first_row_seq, entry_seq FROM audit_chain_runs WHERE writer_id = 'a'"
                        " AND kind = 'decisions' ORDER BY entry_seq DESC LIMIT 1")
            kind, first, entry = cur.fetchone()
            cur.execute("DELETE FROM audit_chain_runs WHERE kind = %s AND first_row_seq = %s", (kind, first))
        conn.close()
        self.assert_bad(uri, "a", entry, ["runs"])

    def test_tamper_unchained_decision(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("SELECT max(seq) FROM decisions")
            top = cur.fetchone()[0]
            w, _ = self.entry_of(cur, "decisions", top)
            vals = dict(decision(5000, "x", stored_input=False)[1])
            vals.pop("input")
            cols = ["seq"] + list(vals)
            cur.execute(f"INSERT INTO decisions ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                        [top + 1] + list(vals.values()))
        conn.close()
        self.assert_bad(uri, w, self.cw.heads[w][0] + 1, [f"decisions row {top + 1}", "not in the chain of any writer"])
        rc, _, err = self.reads(uri, "proof", vals["decision_id"])  # it has no proof (409 proof_unavailable)
        self.assertEqual(rc, 5, err)
        self.assertIn("no writer's chain", err)

    def test_tamper_log_node(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("UPDATE audit_log_nodes SET hash = %s WHERE writer_id = 'a' AND level = 2 AND idx = 0",
                        (b"\x11" * 32,))
        conn.close()
        self.assert_bad(uri, "a", 4, ["level 2, index 0", "does not match"])

    def test_tamper_entry_removed(self):
        uri, conn = self.copy_db()
        with conn.cursor() as cur:
            cur.execute("DELETE FROM audit_chain WHERE writer_id = 'a' AND seq = 3")
        conn.close()
        self.assert_bad(uri, "a", 3, ["entry 3 missing"])

    # -- proofs, read by the store's code on a URI (tests/server/pg_chain_reads.c) without a daemon

    def reads(self, *args):
        helper = os.environ.get("PGCLD_PG_CHAIN_READS") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(H.PGCLD_BIN))), "tests", "pg_chain_reads")
        if not os.path.exists(helper):
            skips.missing_in_case(self, f"tests/server/pg_chain_reads, built by meson ({helper})")
        p = subprocess.run([helper, *args], capture_output=True, text=True, timeout=60)
        return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr

    def check_proof_file(self, proof, *held):
        path = os.path.join(self.tmp, f"proof-{os.urandom(4).hex()}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(proof, f)
        py = subprocess.run([PY, VERIFIER, path, *held], capture_output=True, text=True, timeout=60)
        cli = run_cli("audit", "verify-proof", path, *[a for h in held for a in ("--checkpoint", h)],
                      *(("--public-key", self.public) if held else ()))
        return py.returncode, cli.returncode, py.stdout + py.stderr + cli.stderr

    def test_proofs_of_both_writers(self):
        uri, conn = self.copy_db()
        cur = conn.cursor()
        cur.execute("SELECT decision_id, seq FROM decisions ORDER BY seq")
        rows = cur.fetchall()
        picked = [rows[0], rows[1], rows[3], rows[-1]] + [r for r in rows if self.owner[r[0]] == "b"][:2]
        out = os.path.join(self.tmp, "fleet-proofs.json")
        p = run_cli("audit", "checkpoint", "--db", uri, "--signing-key", self.key, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        for did, seq in picked:
            rc, proof, err = self.reads(uri, "proof", did)
            self.assertEqual(rc, 0, err)
            w = self.owner[did]
            self.assertEqual(proof["writer_id"], w)
            # the oracle: the leaf data of the row as stored, its entry, the writer's log root
            self.assertEqual(base64.b64decode(proof["leaf_data"]), leaf_data_of_row(conn.cursor(), "decisions", seq))
            self.assertEqual((proof["log"]["tree_size"], proof["log"]["root"]), (self.heads[w][0], self.heads[w][2]))
            self.assertEqual(proof["log"]["leaf_index"], proof["chain_entry"]["seq"] - 1)
            cp = proof["log"]["checkpoint"]
            self.assertEqual(cp["format"], "pgcld-fleet-checkpoint")
            py, cli, text = self.check_proof_file(proof, out)
            self.assertEqual((py, cli), (0, 0), text)
            # a changed leaf fails both; another writer's head in the checkpoint fails both
            forged = dict(proof, leaf_data=base64.b64encode(b"\x03" + base64.b64decode(proof["leaf_data"])).decode())
            self.assertEqual(self.check_proof_file(forged)[:2], (1, 1))
            other = dict(proof, writer_id="b" if w == "a" else "a")
            self.assertNotEqual(self.check_proof_file(other, out)[:2], (0, 0))
        # a changed row: the proof built now no longer matches what was chained
        cur.execute("UPDATE decisions SET label = 'forged' WHERE seq = %s", (picked[0][1],))
        rc, proof, err = self.reads(uri, "proof", picked[0][0])
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.check_proof_file(proof)[:2], (1, 1))
        rc, _, err = self.reads(uri, "proof", "0190ffff-nope")
        self.assertEqual(rc, 3, err)
        conn.close()

    def test_consistency_per_writer(self):
        rc, _, err = self.reads(self.base, "consistency", "-", "1", "2")
        self.assertEqual(rc, 4, err)
        self.assertIn("writer=", err)
        conn = self.psycopg2.connect(self.base)
        for w in ("a", "b"):
            cur = conn.cursor()
            cur.execute("SELECT hash FROM audit_chain WHERE writer_id = %s ORDER BY seq", (w,))
            hashes = [r[0] for r in cur.fetchall()]
            for first, second in ((1, 1), (2, 5), (3, len(hashes)), (4, 8)):
                rc, c, err = self.reads(self.base, "consistency", w, str(first), str(second))
                self.assertEqual(rc, 0, err)
                self.assertEqual(c["writer_id"], w)
                self.assertEqual((c["first_root"], c["second_root"]),
                                 (log_root(hashes[:first]), log_root(hashes[:second])))
                path = os.path.join(self.tmp, f"consistency-{w}-{first}-{second}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(c, f)
                p = subprocess.run([PY, VERIFIER, "--consistency", path], capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                p = run_cli("audit", "verify-consistency", path)
                self.assertEqual(p.returncode, 0, p.stderr)
            rc, _, err = self.reads(self.base, "consistency", w, "1", str(len(hashes) + 1))
            self.assertEqual(rc, 3, err)
        conn.close()
        rc, _, err = self.reads(self.base, "consistency", "nobody", "1", "1")
        self.assertEqual(rc, 3, err)

    def test_empty_store(self):
        uri = self.cluster.new_database()
        conn = self.psycopg2.connect(uri)
        apply_migrations(conn)
        conn.close()
        rc, rep, err = verify_json(uri)
        self.assertEqual(rc, 0, err)
        self.assertEqual((rep["intact"], rep["events"], rep["head_seq"], rep["head_hash"], rep["writers"]),
                         (True, 0, 0, None, []))
        p = run_cli("audit", "checkpoint", "--db", uri, "--signing-key", self.key, "--out",
                    os.path.join(self.tmp, "empty.json"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("empty", p.stderr)

    def test_archive_nothing_that_old(self):
        # archival itself: test_pg_archive.py; here every row is younger than the horizon (T_START is
        # two hours ago), so nothing is archived and --out (in a directory that does not exist) is
        # never written
        out = os.path.join(self.tmp, "not-made", "archive.db")
        p = run_cli("audit", "archive", "--db", self.base, "--older-than-days", "1", "--out", out,
                    "--signing-key", self.key, "--checkpoint-dir", os.path.join(self.tmp, "not-made"))
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("nothing to archive", p.stderr)
        self.assertFalse(os.path.exists(os.path.dirname(out)))


class PgChainDaemonsTest(LiveValidationMixin, unittest.TestCase):
    """Two daemons on one database, each with its own chain (needs the PostgreSQL writer)."""

    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models("toxicity")
        pg_cluster.cluster_for_class(cls, "pgcld-pgchain-d-")
        cls.uri = cls.cluster.new_database()
        cls.key = os.path.join(cls.tmp, "signing.key")
        p = run_cli("audit", "keygen", "--out", cls.key)
        assert p.returncode == 0, p.stderr
        cls.public = p.stdout.strip().splitlines()[-1]
        cls.cp_dir = os.path.join(cls.tmp, "cps")
        os.mkdir(cls.cp_dir)
        cls.daemons = {}
        for w in ("a", "b"):
            d = H.Daemon(db_path=cls.uri, auth=False,
                         args=["--writer-id", w, "--signing-key", cls.key, "--checkpoint-dir", cls.cp_dir])
            try:
                d.start()
            except H.DaemonError:
                d.cleanup(check=False)
                for other in cls.daemons.values():
                    other.cleanup(check=False)
                raise
            cls.daemons[w] = d
        cls.decisions = {"a": [], "b": []}
        D = H.load_config("toxicity")["dims"]["D"]
        for i in range(5):
            for w, d in cls.daemons.items():
                r = d.score({"items": H.json_items(H.random_embeddings(1 + i % 3, D, seed=i * 7 + len(w)), f"{w}{i}-")})
                assert r.status == 200, r
                cls.decisions[w] += [x["decision_id"] for x in r.json["results"]]

    @classmethod
    def tearDownClass(cls):
        for d in cls.daemons.values():
            d.cleanup(check=False)

    def test_verify_on_either(self):
        for d in self.daemons.values():
            r = d.get("/v1/audit/verify")
            self.assertEqual(r.status, 200, r)
            self.check_live("GET", "/v1/audit/verify", r)
            self.assertTrue(r.json["intact"], r.json)
            self.assertEqual([w["writer_id"] for w in r.json["writers"]], ["a", "b"])
            self.assertEqual(r.json["events"], sum(w["head_seq"] for w in r.json["writers"]))
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, err)

    def test_proofs_of_both_writers_and_checkpoint(self):
        r = self.daemons["a"].post("/v1/audit/checkpoints", {})
        self.assertEqual(r.status, 201, r)
        self.check_live("POST", "/v1/audit/checkpoints", r)
        self.assertEqual(r.json["format"], "pgcld-fleet-checkpoint")
        cp_file = r.json["file"]
        for w in ("a", "b"):
            for did in (self.decisions[w][0], self.decisions[w][-1]):
                for d in self.daemons.values():  # any replica answers for the whole fleet
                    r = d.get(f"/v1/decisions/{did}/proof?format=chain-v2")
                    self.assertEqual(r.status, 200, r)
                    self.check_live("GET", f"/v1/decisions/{did}/proof?format=chain-v2", r)
                    self.assertEqual(r.json["writer_id"], w)
                    self.assertEqual(r.json["log"]["checkpoint"]["format"], "pgcld-fleet-checkpoint")
                    path = os.path.join(self.tmp, f"proof-{did}.json")
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(r.json, f)
                    p = subprocess.run([PY, VERIFIER, path, cp_file], capture_output=True, text=True, timeout=60)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    p = run_cli("audit", "verify-proof", path, "--checkpoint", cp_file, "--public-key", self.public)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    # a changed leaf fails
                    forged = dict(r.json, leaf_data=base64.b64encode(b"x" + base64.b64decode(r.json["leaf_data"]))
                                  .decode())
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(forged, f)
                    p = subprocess.run([PY, VERIFIER, path], capture_output=True, text=True, timeout=60)
                    self.assertEqual(p.returncode, 1)
        rc, rep, err = verify_json(self.uri, "--checkpoint", cp_file, "--public-key", self.public)
        self.assertEqual(rc, 0, err)

    def test_consistency_per_writer(self):
        d = self.daemons["b"]
        r = d.get("/v1/audit/consistency?first=1&second=2")
        self.assertEqual(r.status, 400, r)
        self.check_live("GET", "/v1/audit/consistency", r)
        self.assertEqual(r.json["error"]["field"], "writer")
        for w in ("a", "b"):
            r = d.get(f"/v1/audit/consistency?first=2&second=3&writer={w}")
            self.assertEqual(r.status, 200, r)
            self.check_live("GET", "/v1/audit/consistency", r)
            self.assertEqual(r.json["writer_id"], w)
            path = os.path.join(self.tmp, f"consistency-{w}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(r.json, f)
            p = subprocess.run([PY, VERIFIER, "--consistency", path], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        r = d.get("/v1/audit/consistency?first=1&second=2&writer=nobody")
        self.assertEqual(r.status, 404, r)
        self.check_live("GET", "/v1/audit/consistency", r)

    def test_zz_fleet_checkpoints_extend(self):
        """Two fleet checkpoints with writer a's chain grown between them: the consistency proof of
        a's log between its two heads verifies against both checkpoints, offline."""
        old = self.daemons["b"].post("/v1/audit/checkpoints", {})
        self.assertEqual(old.status, 201, old)
        old_file = os.path.join(self.tmp, "fleet-old.json")
        shutil.copy(old.json["file"], old_file)
        D = H.load_config("toxicity")["dims"]["D"]
        for i in range(3):
            r = self.daemons["a"].score({"items": H.json_items(H.random_embeddings(2, D, seed=900 + i), f"g{i}-")})
            self.assertEqual(r.status, 200, r)
        new = self.daemons["a"].post("/v1/audit/checkpoints", {})
        self.assertEqual(new.status, 201, new)
        heads = [{w["writer_id"]: w["head_seq"] for w in cp.json["writers"]} for cp in (old, new)]
        self.assertGreater(heads[1]["a"], heads[0]["a"])
        r = self.daemons["b"].get(f"/v1/audit/consistency?first={heads[0]['a']}&second={heads[1]['a']}&writer=a")
        self.assertEqual(r.status, 200, r)
        path = os.path.join(self.tmp, "consistency-fleet.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(r.json, f)
        p = subprocess.run([PY, VERIFIER, "--consistency", path, old_file, new.json["file"]], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = run_cli("audit", "verify-consistency", path, "--checkpoint", old_file, "--checkpoint", new.json["file"],
                    "--public-key", self.public)
        self.assertEqual(p.returncode, 0, p.stderr)
        # the checkpoints swapped: refused
        p = run_cli("audit", "verify-consistency", path, "--checkpoint", new.json["file"], "--checkpoint", old_file)
        self.assertEqual(p.returncode, 1)
        rc, rep, err = verify_json(self.uri, "--checkpoint", old_file, "--checkpoint", new.json["file"],
                                   "--public-key", self.public)
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    unittest.main()
