"""Known answers for the audit hash chain over every chained table, from the real daemon's rows.

The daemon's audit writer and `pgcld audit verify` hash a row through one SELECT of one column
list (core/audit/chain.c), so a column missing from that list is missing from both and the verifier
still says "intact". This test re-derives every entry of databases written by real daemons (and
by the keys CLI, which chains its own admin events) with an encoder written here from
docs/audit.md alone ("Canonical encoding (version 1)": type tags, big-endian lengths and numbers,
the explicit column list per table), from the genesis entry to the head: each payload_sha256,
prev_hash and hash must match. The rows cover every chained table and every nullable column
both ways: decisions of a binary model (toxicity and thresholds) and of a multiclass one (NULL),
with the input stored (float16) and not (NULL); admin events (keys made by the CLI, a key made
and one revoked over HTTP, an activation); contests with and without a filer key (--auth off);
resolutions overturned with a corrected label and upheld without one, with and without a resolver
key. Every column of those tables must be in the documented list (or knowingly in UNCHAINED): a
column added to a table is not covered by the chain until a new encoding version lists it.

The daemons run encoding version 1 (--chain-encoding 1); version 2's leaves and commit entries are
derived independently in tests/core/test_chain_v2.c.

Run: /usr/bin/python3 tests/integration/test_chain_known_answers.py (PGCLD_BIN selects the binary).
"""
import hashlib
import os
import sqlite3
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

# docs/audit.md, "Canonical encoding (version 1)": the columns of each event table, in order.
COLUMNS = {
    "decisions": ["seq", "decision_id", "created_at", "request_id", "item_id", "model_name", "model_version",
                  "model_sha256", "label", "label_index", "probabilities", "toxicity", "decision", "policy",
                  "t_review", "t_block", "vector", "input_sha256", "latency_us", "input", "input_dtype"],
    "admin_events": ["seq", "event_id", "created_at", "actor", "action", "target", "details"],
    "contests": ["seq", "contest_id", "decision_id", "filed_at", "filed_by", "filer_key_id", "reason"],
    "resolutions": ["seq", "contest_id", "resolved_at", "resolved_by", "resolver_key_id", "outcome",
                    "corrected_label", "note"],
}
# Columns of those tables that encoding version 1 does not cover (docs/audit.md: a column added to a
# table later is not covered until a new encoding version lists it). Empty: every column is chained.
# A new column must be listed in a new encoding version, or here, knowingly.
# decisions.input_digest (migration 0008) is the SHA-256 of the stored input: version 1 encodes the
# input's bytes themselves (where it is stored: inline before 0008, in decision_inputs since), and a
# version-2 leaf puts the digest in the input's place, so it is covered either way.
# leaf_index (migration 0012): where the event is in the transparency log, whose leaf binds the event
# itself (docs/log-record.md); the old chain, kept beside the log for now, does not cover it.
UNCHAINED = {"decisions": ["input_digest", "leaf_index"], "admin_events": ["leaf_index"], "contests": ["leaf_index"],
             "resolutions": ["leaf_index"]}
# docs/audit.md, "Decision leaf, extended" (migration 0011): after its columns above, a decisions row
# whose trace_id, content_date, territorial_scope or content_language is not NULL encodes those four,
# in this order; a row with all four NULL encodes as before.
EXTENSION = {"decisions": ["trace_id", "content_date", "territorial_scope", "content_language"]}
# docs/audit.md: the value of decisions' `input` column is the stored input wherever it is kept.
STORED_INPUT = "coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = decisions.seq))"


def column_sql(table, column):
    return STORED_INPUT if (table, column) == ("decisions", "input") else column
GENESIS_TABLES = ["decisions", "admin_events", "contests", "resolutions"]  # the genesis payload's order
ZERO_HASH = "0" * 64


def encode(value):
    """One value: a type tag, then NULL nothing, INTEGER 8 bytes big-endian two's complement, REAL
    the 8 big-endian bytes of the IEEE-754 binary64, TEXT and BLOB a 4-byte big-endian length and
    the (UTF-8) bytes. Python's sqlite3 returns each value with the type SQLite stored."""
    if value is None:
        return b"\x00"
    if isinstance(value, int):
        return b"\x01" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"\x02" + struct.pack(">d", value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        return b"\x03" + struct.pack(">I", len(data)) + data
    if isinstance(value, bytes):
        return b"\x04" + struct.pack(">I", len(value)) + value
    raise TypeError(f"unexpected SQLite value {value!r}")


def sha256_hex(parts):
    return hashlib.sha256(b"".join(parts)).hexdigest()


def entry_hash(seq, kind, row_seq, payload, prev):
    return sha256_hex([encode(seq), encode(kind), encode(row_seq), encode(payload), encode(prev)])


class Checker:
    """Re-derives a database's whole chain; returns a list of findings (empty when it matches)."""

    def __init__(self, db_path):
        self.conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)

    def close(self):
        self.conn.close()

    def row_payload(self, table, row_seq):
        extension = EXTENSION.get(table, [])
        cols = ", ".join(column_sql(table, c) for c in COLUMNS[table] + extension)
        row = self.conn.execute(f"SELECT {cols} FROM {table} WHERE seq = ?", (row_seq,)).fetchone()
        if row is None:
            return None
        base, ext = row[:len(COLUMNS[table])], row[len(COLUMNS[table]):]
        return sha256_hex([encode(v) for v in base] + ([encode(v) for v in ext] if any(v is not None for v in ext)
                                                       else []))

    def findings(self):
        out = []
        prev = ZERO_HASH
        entries = self.conn.execute(
            "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash FROM audit_chain ORDER BY seq").fetchall()
        for i, (seq, kind, row_seq, payload, prev_hash, hash_) in enumerate(entries):
            if seq != i + 1:
                out.append(f"entry {seq}: expected seq {i + 1}")
            if kind == "genesis":
                # a database made by this pgcld: no row predates the chain
                want = sha256_hex([encode(0) for _ in GENESIS_TABLES])
            else:
                want = self.row_payload(kind, row_seq)
            if payload != want:
                out.append(f"entry {seq} ({kind} row {row_seq}): payload {payload}, independent encoding {want}")
            if prev_hash != prev:
                out.append(f"entry {seq}: prev_hash {prev_hash}, previous hash {prev}")
            want_hash = entry_hash(seq, kind, row_seq, payload, prev_hash)
            if hash_ != want_hash:
                out.append(f"entry {seq} ({kind}): hash {hash_}, independent encoding {want_hash}")
            prev = hash_
        return out

    def counts(self):
        """{table: (rows, chain entries)}."""
        return {t: (self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0],
                    self.conn.execute("SELECT count(*) FROM audit_chain WHERE kind = ?", (t,)).fetchone()[0])
                for t in COLUMNS}

    def null_counts(self, table, column):
        """(rows where column is NULL, rows where it is not)."""
        expr = column_sql(table, column)
        n_null = self.conn.execute(f"SELECT count(*) FROM {table} WHERE {expr} IS NULL").fetchone()[0]
        n_set = self.conn.execute(f"SELECT count(*) FROM {table} WHERE {expr} IS NOT NULL").fetchone()[0]
        return n_null, n_set

    def table_columns(self, table):
        return [r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")]


def fill(d, models, with_keys):
    """Scores on each model, activates one, files contests and resolves them; with_keys (auth on):
    a key made and one revoked over HTTP, and a second reviewer resolves. The database is what the
    tests check."""
    for m in models:
        D = H.load_config(m)["dims"]["D"]
        scored = H.json_items(H.random_embeddings(3, D, seed=len(m)), m)
        # the extension's columns set and not (each row has a trace id: every fact is NULL in some)
        scored[0].update(content_date="2024-02-29", territorial_scope=["DE", "FR"], content_language="EN")
        scored[1].update(territorial_scope=["NO"])
        r = d.score({"model": m, "items": scored})
        assert r.status == 200, r
    did = [row["decision_id"] for row in d.query("SELECT decision_id FROM decisions ORDER BY seq")]
    labels = {m: H.load_config(m)["labels"] for m in models}
    reviewer = d.keys.get("reviewer")
    second = None
    if with_keys:
        r = d.post("/v1/admin/keys", {"role": "reviewer", "name": "second reviewer"})
        assert r.status in (200, 201), r
        second = r.json["key"]
        r = d.post("/v1/admin/keys", {"role": "scorer", "name": "to revoke"})
        assert r.status in (200, 201), r
        r = d.request("DELETE", f"/v1/admin/keys/{r.json['key_id']}")
        assert r.status == 200, r
    r = d.post(f"/v1/admin/models/{models[0]}/activate", {"version": "1"})
    assert r.status == 200, r
    contests = []
    for i, decision_id in enumerate(did[:2]):
        r = d.request("POST", f"/v1/decisions/{decision_id}/contests", {"reason": f"reason {i}: quoted, not abuse"},
                      key=reviewer)
        assert r.status == 201, r
        contests.append(r.json["contest_id"])
    model0 = d.query("SELECT model_name FROM decisions WHERE decision_id = ?", (did[0],))[0]["model_name"]
    corrected = labels[model0][-1]
    r = d.request("POST", f"/v1/contests/{contests[0]}/resolution",
                  {"outcome": "overturned", "corrected_label": corrected, "note": "context shows counter-speech"},
                  key=second)
    assert r.status == 201, r
    r = d.request("POST", f"/v1/contests/{contests[1]}/resolution", {"outcome": "upheld", "note": "stands"},
                  key=second)
    assert r.status == 201, r


class ChainKnownAnswersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "tiny_multi")
        # auth on, inputs stored as float16: keys made by the CLI and over HTTP, filer and resolver keys
        cls.keyed = H.start_daemon(cls, models=("tiny_binary", "tiny_multi"), args=["--chain-encoding", "1"])
        fill(cls.keyed, ["tiny_binary", "tiny_multi"], with_keys=True)
        # auth off, no inputs stored: NULL filer and resolver keys, NULL inputs
        cls.open = H.start_daemon(cls, models=("tiny_multi", "tiny_binary"), auth=False,
                                  args=["--store-inputs", "none", "--chain-encoding", "1"])
        fill(cls.open, ["tiny_multi", "tiny_binary"], with_keys=False)

    def checker(self, d):
        c = Checker(d.db_path)
        self.addCleanup(c.close)
        return c

    def test_documented_columns_are_every_column(self):
        c = self.checker(self.keyed)
        for table, cols in COLUMNS.items():
            have = c.table_columns(table)
            self.assertEqual([x for x in have if x in cols], cols,
                             f"{table}: docs/audit.md's encoding version 1 columns are not all in the table, in order")
            uncovered = [x for x in have if x not in cols + EXTENSION.get(table, []) and x not in UNCHAINED[table]]
            self.assertEqual(uncovered, [], f"{table}: columns the chain does not cover; list them in a new encoding"
                                            " version (docs/audit.md), or in UNCHAINED here if that is intended")

    def test_rows_cover_every_table_and_nullable_column(self):
        for d, nulls, sets in (
                (self.keyed, [], [("contests", "filer_key_id"), ("resolutions", "resolver_key_id"),
                                  ("decisions", "input"), ("decisions", "input_dtype")]),
                (self.open, [("contests", "filer_key_id"), ("resolutions", "resolver_key_id"),
                             ("decisions", "input"), ("decisions", "input_dtype")], [])):
            c = self.checker(d)
            counts = c.counts()
            for table, (rows, entries) in counts.items():
                self.assertGreaterEqual(rows, 1, f"{table}: no row to check")
                self.assertEqual(rows, entries, f"{table}: {rows} rows, {entries} chain entries")
            for col in ("toxicity", "t_review", "t_block"):
                n_null, n_set = c.null_counts("decisions", col)
                self.assertTrue(n_null and n_set, f"decisions.{col}: NULL {n_null}, set {n_set}")
            n_null, n_set = c.null_counts("resolutions", "corrected_label")
            self.assertTrue(n_null and n_set, f"resolutions.corrected_label: NULL {n_null}, set {n_set}")
            for table, col in nulls:
                self.assertEqual(c.null_counts(table, col)[1], 0, f"{table}.{col} set")
            for table, col in sets:
                self.assertEqual(c.null_counts(table, col)[0], 0, f"{table}.{col} NULL")

    def test_every_entry_matches_the_documented_encoding(self):
        for d in (self.keyed, self.open):
            c = self.checker(d)
            findings = c.findings()
            self.assertEqual(findings, [], "\n".join(findings[:20]))
            kinds = {k for (k,) in c.conn.execute("SELECT DISTINCT kind FROM audit_chain")}
            self.assertEqual(kinds, {"genesis", *COLUMNS}, kinds)

    def test_verifier_agrees(self):
        for d in (self.keyed, self.open):
            r = d.get("/v1/audit/verify", key=d.keys.get("reviewer", ""))
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json["intact"], r.json)


if __name__ == "__main__":
    H.main()
