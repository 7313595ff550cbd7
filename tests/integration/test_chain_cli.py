"""Tamper evidence end to end: a real daemon writes decisions and an admin event (each chained by
the audit writer), answers GET /v1/audit/verify and POST /v1/audit/checkpoints; then, with the
daemon stopped, each tampering the issue names is done with the sqlite3 command-line tool on a fresh
copy of the database (append-only triggers dropped first) and `pgcld audit verify` must exit 1
naming the right entry: an edited score, a deleted row, reordered entries and rows, a forged row, a
truncated tail (only caught with a checkpoint exported before). The intact copy exits 0; keygen,
checkpoint and verify with checkpoints (right and wrong signer, altered file); bad usage exits 2.
The daemon runs audit chain encoding version 1 (--chain-encoding 1: an entry per event), whose
entry-by-entry findings these cases pin; version 2's (an entry per commit, findings naming the
commit and the leaf) are tests/core/test_chain_v2.c's and tests/integration/test_proof.py's.

Run: /usr/bin/python3 tests/integration/test_chain_cli.py (PGCLD_BIN selects the binary).
"""
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

MODEL = "tiny_binary"


def rfc9162_root(leaves):
    """MTH of RFC 9162 s2.1.1 over leaf hashes, as written there."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + rfc9162_root(leaves[:k]) + rfc9162_root(leaves[k:])).digest()
HEX64 = re.compile(r"^[0-9a-f]{64}$")

DROP_TRIGGERS = "".join(
    f"DROP TRIGGER IF EXISTS {t}_append_only_{op};\n"
    for t in ("decisions", "admin_events", "contests", "resolutions", "audit_chain", "audit_log_nodes")
    for op in ("u", "d"))


def pgcld(*args):
    """Runs `pgcld ARGS...` in an empty directory that must stay so (harness.run_pgcld); returns the
    CompletedProcess."""
    return H.run_pgcld(*args)


def sqlite_cli(path, sql):
    """Runs sql with the sqlite3 command-line tool (stops at the first error)."""
    p = subprocess.run(["sqlite3", "-bail", path], input=sql, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"sqlite3 {path} failed ({p.returncode}): {p.stderr}\n{sql}")
    return p.stdout


def scalar(path, sql, params=()):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


class ChainCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-chain-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.D = H.load_config(MODEL)["dims"]["D"]

        # A signing key, and a daemon that knows it.
        cls.key = os.path.join(cls.tmp, "signing.key")
        p = pgcld("audit", "keygen", "--out", cls.key)
        assert p.returncode == 0, p.stderr
        cls.pub = p.stdout.strip()
        cls.cp_dir = os.path.join(cls.tmp, "checkpoints")
        os.mkdir(cls.cp_dir)
        d = H.start_daemon(cls, models=(MODEL,), args=["--signing-key", cls.key, "--checkpoint-dir", cls.cp_dir,
                                                       "--chain-encoding", "1"])
        cls.daemon = d

        for i in range(3):
            Z = H.random_embeddings(6, cls.D, seed=100 + i, scale=0.5 + i)
            r = d.score({"model": MODEL, "items": H.json_items(Z, f"r{i}")})
            assert r.status == 200, r
        r = d.post(f"/v1/admin/models/{MODEL}/activate", {"version": "1"})
        assert r.status == 200, r
        cls.verify_http = d.get("/v1/audit/verify", key=d.keys["reviewer"])
        cls.verify_http_admin = d.get("/v1/audit/verify", key=d.keys["admin"])
        cls.verify_http_scorer = d.get("/v1/audit/verify", key=d.keys["scorer"])
        cls.entries_at_verify = scalar(d.db_path, "SELECT count(*) FROM audit_chain")
        cls.cp_http = d.post("/v1/audit/checkpoints", key=d.keys["admin"])
        cls.cp_http_reviewer = d.post("/v1/audit/checkpoints", key=d.keys["reviewer"])
        # more events after the checkpoint; the last transaction is 4 decisions (the tail)
        Z = H.random_embeddings(4, cls.D, seed=7)
        r = d.score({"model": MODEL, "items": H.json_items(Z, "tail")})
        assert r.status == 200, r
        rc = d.stop()
        assert rc == 0, d.logs()
        conn = sqlite3.connect(d.db_path)  # fold any WAL left behind into the file before copying it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        cls.base = os.path.join(cls.tmp, "base.db")
        shutil.copyfile(d.db_path, cls.base)
        cls.n_entries = scalar(cls.base, "SELECT count(*) FROM audit_chain")
        cls.n_copies = 0

    # -- helpers
    def copy(self, sql=None):
        """A fresh copy of the database, triggers dropped, sql applied with the sqlite3 tool."""
        type(self).n_copies += 1
        path = os.path.join(self.tmp, f"copy-{self.n_copies}.db")
        shutil.copyfile(self.base, path)
        sqlite_cli(path, DROP_TRIGGERS + (sql or ""))
        return path

    def verify(self, path, *extra):
        p = pgcld("audit", "verify", "--db", path, *extra)
        report = None
        if p.stdout.strip():
            report = json.loads(p.stdout.strip().splitlines()[-1])
        return p.returncode, report, p.stderr

    def assert_bad(self, path, seq, text, *extra):
        rc, rep, err = self.verify(path, *extra)
        self.assertEqual(rc, 1, f"verify should fail: {rep} {err}")
        self.assertIsNotNone(rep, err)
        self.assertFalse(rep["intact"])
        self.assertEqual(rep["first_bad_seq"], seq, rep["reason"])
        self.assertIn(text, rep["reason"])
        self.assertIn(f"entry {seq}", err)
        return rep

    def decision_seq(self, k):
        """seq of the k-th decision row (0-based)."""
        return scalar(self.base, "SELECT seq FROM decisions ORDER BY seq LIMIT 1 OFFSET ?", (k,))

    def entry_of(self, kind, row_seq):
        return scalar(self.base, "SELECT seq FROM audit_chain WHERE kind = ? AND row_seq = ?", (kind, row_seq))

    # -- the daemon's chain and HTTP
    def test_daemon_chains_every_event(self):
        n_dec = scalar(self.base, "SELECT count(*) FROM decisions")
        self.assertEqual(n_dec, 22)
        self.assertEqual(scalar(self.base, "SELECT count(*) FROM audit_chain WHERE kind = 'decisions'"), n_dec)
        self.assertGreaterEqual(
            scalar(self.base, "SELECT count(*) FROM audit_chain WHERE kind = 'admin_events'"), 1)
        self.assertEqual(scalar(self.base, "SELECT kind FROM audit_chain WHERE seq = 1"), "genesis")

    def test_http_verify(self):
        r = self.verify_http
        self.assertEqual(r.status, 200, r)
        body = r.json
        self.assertEqual(set(body), {"intact", "events", "first_bad_seq", "reason", "head_seq", "head_hash",
                                     "archive_cut_seq", "archived_rows"})
        self.assertIs(body["intact"], True, body)
        self.assertIsNone(body["first_bad_seq"])
        self.assertIsNone(body["reason"])
        self.assertEqual(body["events"], self.entries_at_verify)
        self.assertEqual(body["head_seq"], self.entries_at_verify)
        self.assertRegex(body["head_hash"], HEX64)
        self.assertEqual(self.verify_http_admin.status, 200)
        self.assertEqual(self.verify_http_scorer.status, 403, self.verify_http_scorer)

    def test_http_checkpoint(self):
        r = self.cp_http
        self.assertEqual(r.status, 201, r)
        body = r.json
        self.assertEqual(body["public_key"], self.pub)
        self.assertEqual(body["head_seq"], self.entries_at_verify)
        self.assertEqual(body["head_hash"], self.verify_http.json["head_hash"])
        self.assertEqual(body["file"], os.path.join(self.cp_dir, f"checkpoint-{body['head_seq']}.json"))
        with open(body["file"], encoding="utf-8") as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "pgcld-audit-checkpoint")
        self.assertEqual(doc["version"], 2)
        for k in ("head_seq", "head_hash", "log_root", "created_at", "public_key", "signature"):
            self.assertEqual(doc[k], body[k], k)
        # the log tree's root over entries 1..head_seq, derived here from docs/audit.md
        hashes = [r[0] for r in sqlite3.connect(self.base).execute(
            "SELECT hash FROM audit_chain WHERE seq <= ? ORDER BY seq", (body["head_seq"],))]
        self.assertEqual(doc["log_root"], rfc9162_root([hashlib.sha256(b"\x00" + bytes.fromhex(h)).digest()
                                                         for h in hashes]).hex())
        self.assertEqual(scalar(self.base, "SELECT count(*) FROM audit_checkpoints WHERE head_seq = ?",
                                (body["head_seq"],)), 1)
        self.assertEqual(self.cp_http_reviewer.status, 403)
        # the chain went on after it and still contains it
        rc, rep, err = self.verify(self.base, "--checkpoint", body["file"], "--public-key", self.pub)
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["checkpoints"], 1)

    # -- the CLI on tampered copies
    def test_intact_copy(self):
        rc, rep, err = self.verify(self.copy())
        self.assertEqual(rc, 0, err)
        chain = {k: rep[k] for k in ("intact", "events", "first_bad_seq", "reason", "head_seq", "head_hash",
                                     "checkpoints", "archive_cut_seq", "archived_rows")}
        self.assertEqual(chain, {"intact": True, "events": self.n_entries, "first_bad_seq": None, "reason": None,
                                 "head_seq": self.n_entries, "head_hash": rep["head_hash"], "checkpoints": 0,
                                 "archive_cut_seq": None, "archived_rows": 0})
        self.assertTrue(rep["log_intact"], rep)  # the transparency log's part (test_log_verify.py)
        self.assertRegex(rep["head_hash"], HEX64)

    def test_edit_score(self):
        row = self.decision_seq(9)
        path = self.copy(f"UPDATE decisions SET toxicity = 0.999, decision = 'block' WHERE seq = {row};")
        self.assert_bad(path, self.entry_of("decisions", row), f"decisions row {row}: payload differs")

    def test_delete_row(self):
        row = self.decision_seq(4)
        path = self.copy(f"DELETE FROM decisions WHERE seq = {row};")
        self.assert_bad(path, self.entry_of("decisions", row), f"decisions row {row} is missing")

    def test_delete_chain_entry(self):
        path = self.copy("DELETE FROM audit_chain WHERE seq = 6;")
        self.assert_bad(path, 6, "entry 6 missing (sequence jumps from 5 to 7)")

    def test_reorder_entries(self):
        i = self.entry_of("decisions", self.decision_seq(3))
        j = i + 3
        path = self.copy(f"UPDATE audit_chain SET seq = -1 WHERE seq = {i};"
                         f"UPDATE audit_chain SET seq = {i} WHERE seq = {j};"
                         f"UPDATE audit_chain SET seq = {j} WHERE seq = -1;")
        self.assert_bad(path, i, f"entry {i}: prev_hash does not match entry {i - 1}")

    def test_reorder_rows(self):
        a, b = self.decision_seq(7), self.decision_seq(11)
        path = self.copy(f"UPDATE decisions SET seq = -1 WHERE seq = {a};"
                         f"UPDATE decisions SET seq = {a} WHERE seq = {b};"
                         f"UPDATE decisions SET seq = {b} WHERE seq = -1;")
        self.assert_bad(path, self.entry_of("decisions", a), f"decisions row {a}: payload differs")

    def test_forged_row(self):
        path = self.copy(
            "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
            " vector, input_sha256, latency_us) SELECT 'forged-' || decision_id, created_at, request_id,"
            " 'forged', model_name, model_version, model_sha256, label, label_index, probabilities, toxicity,"
            " decision, policy, t_review, t_block, vector, input_sha256, latency_us FROM decisions"
            " ORDER BY seq DESC LIMIT 1;")
        forged = scalar(path, "SELECT max(seq) FROM decisions")
        self.assert_bad(path, self.n_entries + 1, f"decisions row {forged} is not in the chain")

    def test_truncated_tail(self):
        k = 3
        keep = self.n_entries - k
        # a checkpoint exported before the truncation, with the CLI
        before = self.copy()
        cp = os.path.join(self.tmp, "before-truncation.json")
        p = pgcld("audit", "checkpoint", "--db", before, "--signing-key", self.key, "--out", cp)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["head_seq"], self.n_entries)
        self.assertEqual(out["file"], cp)
        self.assertEqual(oct(os.stat(self.key).st_mode & 0o777), "0o600")

        truncate = (f"DELETE FROM decisions WHERE seq IN (SELECT row_seq FROM audit_chain"
                    f" WHERE seq > {keep} AND kind = 'decisions');"
                    f"DELETE FROM audit_chain WHERE seq > {keep};")
        # the log tree's nodes over the removed entries give it away ...
        self.assert_bad(self.copy(truncate), keep + 1, "covers entries beyond the chain's end")
        # ... unless they go too
        path = self.copy(truncate + f"DELETE FROM audit_log_nodes WHERE ((idx + 1) << level) > {keep};")
        rc, rep, err = self.verify(path)
        self.assertEqual(rc, 0, f"a clean truncation alone looks intact: {rep} {err}")
        self.assertEqual(rep["head_seq"], keep)
        self.assert_bad(path, keep + 1, f"checkpoint at seq {self.n_entries} but the chain ends at {keep}",
                        "--checkpoint", cp)
        # the untouched copy verifies with the same checkpoint and the right signer
        rc, rep, err = self.verify(before, "--checkpoint", cp, "--public-key", self.pub)
        self.assertEqual(rc, 0, err)

    def test_checkpoint_signer_and_alterations(self):
        cp = os.path.join(self.tmp, "signed.json")
        p = pgcld("audit", "checkpoint", "--db", self.copy(), "--signing-key", self.key, "--out", cp)
        self.assertEqual(p.returncode, 0, p.stderr)
        other = os.path.join(self.tmp, "other.key")
        other_pub = pgcld("audit", "keygen", "--out", other).stdout.strip()
        rc, rep, err = self.verify(self.base, "--checkpoint", cp, "--public-key", other_pub)
        self.assertEqual(rc, 1)
        self.assertIn("not by the expected", err)
        with open(cp, encoding="utf-8") as f:
            doc = json.load(f)
        for field, value in (("signature", ("0" if doc["signature"][0] != "0" else "1") + doc["signature"][1:]),
                             ("head_seq", doc["head_seq"] - 1),
                             ("created_at", "2020-01-01T00:00:00.000000Z")):
            bad = dict(doc, **{field: value})
            path = os.path.join(self.tmp, f"bad-{field}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(bad, f)
            rc, rep, err = self.verify(self.base, "--checkpoint", path)
            self.assertEqual(rc, 1, field)
            self.assertIn("signature does not verify", err, field)

    def test_usage_and_errors(self):
        self.assertEqual(pgcld("audit", "verify").returncode, 2)
        self.assertEqual(pgcld("audit", "verify", "--db", self.base, "--bogus", "x").returncode, 2)
        self.assertEqual(pgcld("audit", "frobnicate").returncode, 2)
        self.assertEqual(pgcld("audit", "checkpoint", "--db", self.base).returncode, 2)
        self.assertEqual(pgcld("audit", "verify", "--db", self.base, "--public-key", "abc").returncode, 2)
        p = pgcld("audit", "help")
        self.assertEqual(p.returncode, 0)
        self.assertIn("pgcld audit verify", p.stdout)
        p = pgcld("audit", "keygen", "--out", self.key)
        self.assertEqual(p.returncode, 1)
        self.assertIn("never overwritten", p.stderr)
        p = pgcld("audit", "verify", "--db", os.path.join(self.tmp, "missing.db"))
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.strip())


class NoSigningKeyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        saved = os.environ.pop("PGCLD_SIGNING_KEY", None)
        try:
            cls.daemon = H.start_daemon(cls, models=(MODEL,))
        finally:
            if saved is not None:
                os.environ["PGCLD_SIGNING_KEY"] = saved

    def test_checkpoint_without_key_is_409(self):
        d = self.daemon
        r = d.post("/v1/audit/checkpoints", key=d.keys["admin"])
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.error_code(), "no_signing_key")


if __name__ == "__main__":
    H.main()
