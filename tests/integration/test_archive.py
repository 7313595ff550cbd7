"""Archival past a horizon (docs/audit.md, "Archival past a horizon"), end to end on a running daemon.

The daemon (with a signing key) scores three batches of commits a little over a second apart, and a
reviewer contests one decision of the first batch; `pgcld audit archive --before H` runs while the
daemon goes on, with H between the first and second batch. Then:
  - the cut is the commit before the contested decision's (an open contest keeps its decision live);
  - `pgcld audit verify` is intact on both files: the archive ends at the cut, with the hash the
    checkpoint signed at the cut (also verified with --checkpoint and --public-key); the live database
    reports the cut and the rows archived, as does GET /v1/audit/verify;
  - an archived decision answers 404 decision_not_found naming the cut; the contested one is still
    there; lists and stats no longer include archived rows;
  - the proof of a live decision, taken after pruning, verifies with docs/verify_proof.py and
    `pgcld audit verify-proof` against a checkpoint made after; the consistency proof from the cut's
    checkpoint to that later one verifies (GET /v1/audit/consistency);
  - archiving again at the same horizon exits 3 (nothing to archive); bad usage exits 2; the archive
    file is never overwritten.

A second daemon's database starts in the README's order: API keys made with `pgcld keys create`
before the first `pgcld serve` (their events are encoding-1 entries, one per event), then commits;
the first commit's first decision is contested. Every refusal of `pgcld audit archive` names what
the operator can change:
  - a horizon between the keys and the first commit: the cut would fall on an encoding-1 entry; the
    refusal names the first commit entry (a later horizon reaches it);
  - the open contest pulls the cut below the first commit: exit 3, naming the contest, its decision
    and that resolving it allows archival (never "a later horizon", which cannot help), with or
    without --max-decisions;
  - resolved, a bound of one decision per run still stops before the resolution: exit 3, naming the
    contest and --max-decisions; without the bound the archive runs.

Run: /usr/bin/python3 tests/integration/test_archive.py (PGCLD_BIN selects the binary).
"""
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

VERIFIER = os.path.join(H.SOURCE_ROOT, "docs", "verify_proof.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ArchiveTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.daemon = cls.d = H.start_signing_daemon(cls, "pgcld-archive-")
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.seed = 0
        cls.old = [cls.score_batch(2) for _ in range(3)]  # three commits, older than the horizon
        cls.contested = cls.old[2][0]
        r = cls.d.post(f"/v1/decisions/{cls.contested}/contests", {"reason": "a quote, not abuse"},
                       key=cls.d.keys["reviewer"])
        assert r.status == 201, r
        # the horizon: later than every row so far (stamped before their answers came back), and
        # earlier than every row from now on (the clock moves past it before the next request)
        H.wait_for_clock_past(now_rfc3339())
        cls.horizon = now_rfc3339()
        H.wait_for_clock_past(cls.horizon)
        cls.mid = [cls.score_batch(3) for _ in range(2)]
        cls.archive = os.path.join(cls.tmp, "archive-1.db")
        cls.out = cls.run_archive("--before", cls.horizon, "--out", cls.archive)
        assert cls.out.returncode == 0, cls.out.stdout + cls.out.stderr
        cls.cut = json.loads(cls.out.stdout.splitlines()[-1])
        cls.late = [cls.score_batch(2) for _ in range(2)]  # after pruning

    @classmethod
    def score_batch(cls, n):
        cls.seed += 1
        r = cls.d.score({"items": H.json_items(H.random_embeddings(n, cls.D, seed=cls.seed), f"a{cls.seed}-")})
        assert r.status == 200, r
        return [x["decision_id"] for x in r.json["results"]]

    @classmethod
    def run_archive(cls, *args):
        return H.run_pgcld("audit", "archive", "--db", cls.d.db_path, "--signing-key", cls.key,
                           "--checkpoint-dir", cls.cp_dir, *args)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def verify(self, db, *args):
        c = self.d.cli("audit", "verify", "--db", db, *args, check=False)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        return json.loads(c.stdout.splitlines()[-1])

    def entry_of(self, decision_id):
        return self.d.scalar("SELECT u.entry_seq FROM decisions AS d JOIN audit_chain_runs AS u ON u.kind ="
                             " 'decisions' AND u.first_row_seq <= d.seq AND d.seq < u.first_row_seq + u.n"
                             " WHERE d.decision_id = ?", (decision_id,))

    def test_the_cut_stops_before_the_open_contest(self):
        cut = self.cut
        self.assertEqual(cut["entry_seq"], self.entry_of(self.contested) - 1, cut)
        self.assertEqual(cut["decisions_through"], 4, cut)  # the first two commits of two decisions each
        self.assertGreaterEqual(cut["rows_archived"], 4, cut)
        self.assertTrue(os.path.exists(cut["checkpoint"]), cut)
        self.assertEqual(self.d.scalar("SELECT count(*) FROM audit_cuts"), 1)
        cols = ("entry_seq", "entry_hash", "log_root", "archive_sha256", "public_key")
        row = self.d.query(f"SELECT {', '.join(cols)} FROM audit_cuts")[0]
        self.assertEqual(tuple(row[c] for c in cols), (cut["entry_seq"], cut["entry_hash"], cut["log_root"], cut["archive_sha256"],
                                      self.public))

    def test_both_files_verify(self):
        with open(self.cut["checkpoint"]) as f:
            cp = json.load(f)
        self.assertEqual((cp["head_seq"], cp["head_hash"], cp["log_root"]),
                         (self.cut["entry_seq"], self.cut["entry_hash"], self.cut["log_root"]))
        a = self.verify(self.archive, "--checkpoint", self.cut["checkpoint"], "--public-key", self.public)
        self.assertTrue(a["intact"], a)
        self.assertEqual((a["head_seq"], a["head_hash"]), (cp["head_seq"], cp["head_hash"]), a)
        self.assertEqual(os.stat(self.archive).st_mode & 0o777, 0o600)  # personal data: its owner only
        with open(self.archive, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), self.cut["archive_sha256"])
        self.assertEqual(H.db_scalar(self.archive, "SELECT count(*) FROM decisions"), 4)
        self.assertEqual(H.db_scalar(self.archive, "SELECT count(*) FROM api_keys"), 0)
        live = self.verify(self.d.db_path, "--checkpoint", self.cut["checkpoint"], "--public-key", self.public)
        self.assertTrue(live["intact"], live)
        self.assertEqual((live["archive_cut_seq"], live["archived_rows"]),
                         (self.cut["entry_seq"], self.cut["rows_archived"]), live)
        r = self.expect("GET", "/v1/audit/verify", 200, key=self.d.keys["reviewer"])
        self.assertTrue(r["intact"], r)
        self.assertEqual((r["archive_cut_seq"], r["archived_rows"]), (self.cut["entry_seq"], self.cut["rows_archived"]))

    def test_archived_decisions_answer_404_naming_the_cut(self):
        rk = self.d.keys["reviewer"]
        for did in self.old[0] + self.old[1]:
            err = self.expect_error("GET", f"/v1/decisions/{did}", 404, "decision_not_found", key=rk)
            self.assertIn(f"archived at the cut at chain entry {self.cut['entry_seq']}", err["message"])
            self.expect_error("GET", f"/v1/decisions/{did}/proof?format=chain-v2", 404, "decision_not_found", key=rk)
        for did in self.old[2] + self.mid[0]:  # the contested commit and everything after stay
            self.expect("GET", f"/v1/decisions/{did}", 200, key=rk)
        err = self.expect_error("GET", "/v1/decisions/0190f5b2-7c1e-7000-8000-000000000000", 404,
                                "decision_not_found", key=rk)  # an id from 2024: before the horizon too
        self.assertIn("archived", err["message"])
        listed = self.expect("GET", "/v1/decisions?limit=1000", 200, key=rk)["decisions"]
        ids = {x["decision_id"] for x in listed}
        self.assertFalse(ids & set(self.old[0] + self.old[1]))
        self.assertTrue(set(self.old[2] + self.mid[0] + self.mid[1]) <= ids)
        self.assertEqual(len(ids), self.d.count())

    def test_live_proofs_and_consistency_after_pruning(self):
        r = self.d.post("/v1/audit/checkpoints", {}, key=self.d.keys["admin"])
        self.assertEqual(r.status, 201, r)
        later = os.path.join(self.tmp, "later.json")
        shutil.copy(r.json["file"], later)
        rk = self.d.keys["reviewer"]
        for did in (self.mid[0][1], self.late[0][0], self.contested):
            p = self.expect("GET", f"/v1/decisions/{did}/proof?format=chain-v2", 200, key=rk)
            self.assertEqual(p["log"]["tree_size"], r.json["head_seq"], p["log"])
            with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.tmp, delete=False) as f:
                json.dump(p, f)
            py = subprocess.run([PY, VERIFIER, f.name, later], capture_output=True, text=True, timeout=60)
            self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
            c = self.d.cli("audit", "verify-proof", f.name, "--checkpoint", later, "--public-key", self.public,
                           check=False)
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        proof = self.expect("GET", f"/v1/audit/consistency?first={self.cut['entry_seq']}&second={r.json['head_seq']}",
                            200, key=rk)
        self.assertEqual((proof["first_root"], proof["second_root"]), (self.cut["log_root"], r.json["log_root"]))
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.tmp, delete=False) as f:
            json.dump(proof, f)
        py = subprocess.run([PY, VERIFIER, "--consistency", f.name, self.cut["checkpoint"], later],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
        c = self.d.cli("audit", "verify-consistency", f.name, "--checkpoint", self.cut["checkpoint"], "--checkpoint",
                       later, "--public-key", self.public, check=False)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)

    def test_stats_count_live_rows_only(self):
        s = self.expect("GET", "/v1/audit/stats", 200, key=self.d.keys["reviewer"])
        self.assertEqual(s["decisions"]["total"], self.d.count(), s["decisions"])

    def test_refusals(self):
        again = self.run_archive("--before", self.horizon, "--out", os.path.join(self.tmp, "again.db"))
        self.assertEqual(again.returncode, 3, again.stdout + again.stderr)
        self.assertIn("nothing to archive", again.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "again.db")))
        for args in (("--out", "x.db"), ("--before", self.horizon, "--older-than-days", "1", "--out", "x.db"),
                     ("--before", "yesterday", "--out", "x.db"), ("--older-than-days", "-1", "--out", "x.db"),
                     ("--older-than-days", "1", "--max-decisions", "-5", "--out", "x.db")):
            c = self.run_archive(*args)
            self.assertEqual(c.returncode, 2, (args, c.stdout + c.stderr))
        size = os.path.getsize(self.archive)
        c = self.run_archive("--older-than-days", "0", "--out", self.archive)
        self.assertEqual(c.returncode, 1, c.stdout + c.stderr)
        self.assertIn("exists", c.stderr)
        self.assertEqual(os.path.getsize(self.archive), size)


class ArchiveRefusalTest(unittest.TestCase):
    """Refusals on a chain begun by `pgcld keys create` before the first `pgcld serve`."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-archive-refusal-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.key = os.path.join(cls.tmp, "signing.key")
        H.run_pgcld("audit", "keygen", "--out", cls.key, timeout=60, check=True)
        cls.cp_dir = os.path.join(cls.tmp, "checkpoints")
        os.mkdir(cls.cp_dir)
        # the harness makes the keys with the CLI before the first start: the README's order
        cls.d = H.start_daemon(cls, models=H.tiny_binary_root(cls.tmp), default_model="tiny")
        cls.first = cls.score(3)
        r = cls.d.post(f"/v1/decisions/{cls.first[0]}/contests", {"reason": "a quote, not abuse"},
                       key=cls.d.keys["reviewer"])
        assert r.status == 201, r
        cls.contest_id = r.json["contest_id"]
        cls.later = cls.score(2)

    @classmethod
    def score(cls, n):
        r = cls.d.score({"items": H.json_items(H.random_embeddings(n, 32, seed=len(cls.tmp) + n), "ref-")})
        assert r.status == 200, r
        return [x["decision_id"] for x in r.json["results"]]

    def archive(self, name, *args):
        out = os.path.join(self.tmp, name)
        p = H.run_pgcld("audit", "archive", "--db", self.d.db_path, "--signing-key", self.key,
                        "--checkpoint-dir", self.cp_dir, "--out", out, *args)
        return p, out

    def first_commit(self):
        return self.d.scalar("SELECT min(seq) FROM audit_chain WHERE kind = 'commit'")

    def test_1_a_horizon_before_the_first_commit_names_it(self):
        self.assertEqual(self.d.scalar("SELECT count(*) FROM audit_chain WHERE kind = 'admin_events'"), 3)
        self.assertEqual(self.first_commit(), 5, "genesis, three key events, then the first commit")
        horizon = self.d.scalar("SELECT min(created_at) FROM decisions")  # the key events are older
        p, out = self.archive("early.db", "--before", horizon)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("entry 4, an encoding-1 entry", p.stderr)
        self.assertIn("the first commit entry after it is entry 5", p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_2_the_open_contest_is_named(self):
        for bound in ((), ("--max-decisions", "1")):
            p, out = self.archive("contested.db", "--older-than-days", "0", *bound)
            H.assert_archive_names_open_contest(self, p, self.first[0], self.contest_id, bound)
            self.assertNotIn("encoding-1", p.stderr)
            self.assertFalse(os.path.exists(out))
        self.assertEqual(self.d.scalar("SELECT count(*) FROM audit_cuts"), 0)

    def test_3_resolved_then_the_bound_is_named_then_it_archives(self):
        second = self.d.create_key("reviewer", "second reviewer")
        r = self.d.post(f"/v1/contests/{self.contest_id}/resolution", {"outcome": "upheld", "note": "abuse"},
                        key=second)
        self.assertEqual(r.status, 201, r)
        # one decision per run: the first commit is taken whole, but its contest is chained after it
        p, out = self.archive("bounded.db", "--older-than-days", "0", "--max-decisions", "1")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn(f"decision {self.first[0]}", p.stderr)
        self.assertIn(f"a contest, {self.contest_id}", p.stderr)
        self.assertIn("a larger --max-decisions (0: no bound) allows archival", p.stderr)
        self.assertFalse(os.path.exists(out))
        # a later decision contested and resolved too: the tables' last rows (which stay) are its
        r = self.d.post(f"/v1/decisions/{self.later[0]}/contests", {"reason": "satire"}, key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 201, r)
        r = self.d.post(f"/v1/contests/{r.json['contest_id']}/resolution", {"outcome": "upheld", "note": "no"},
                        key=second)
        self.assertEqual(r.status, 201, r)
        p, out = self.archive("archive.db", "--older-than-days", "0")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        cut = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual((cut["decisions_through"], cut["contests_through"], cut["resolutions_through"]), (3, 1, 1),
                         cut)
        r = self.d.get(f"/v1/decisions/{self.first[0]}", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 404, r)
        c = self.d.cli("audit", "verify", "--db", out, "--checkpoint", cut["checkpoint"], check=False)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)


if __name__ == "__main__":
    H.main()
