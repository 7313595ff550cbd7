"""Witnesses wired into a live daemon (issue 28, c2sp.org/tlog-witness), on a SQLite store.

A pgcld daemon with --signing-key and three --witness, each a tests/tlog/witness.py process (a
witness written from the specification): w1 and w2 follow the log; w3 starts as if it had already
cosigned a larger tree of this log (witness.py --seen: a split view). Checked:
  - w1's and w2's cosignatures appear in the checkpoint served at GET /log/<writer>/checkpoint and
    verify there with note_tool (pgcld's C) and, with Go, tests/tlog/verify_note (Go's
    golang.org/x/mod/sumdb/note); the log's own signature too;
  - w3 never cosigns, shows as a conflict in /metrics (pgcld_witness_conflicts_total,
    pgcld_witness_last_outcome) and in the daemon's log as an error;
  - w2 stopped (SIGSTOP: a hung witness, the worst kind) does not fail or noticeably delay a single
    score among many, and cosigns once it comes back (SIGCONT);
  - pgcld audit verify --witness-quorum 2 passes with w1 and w2, fails with 3 and when the only
    witnesses counted are w1 and w3 (w3 never cosigned), naming the log and the count.

Run: meson test -C build-test test_witness_daemon
"""
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import json

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as H  # noqa: E402
from test_tlog_stock_verifier import go_env  # noqa: E402
from test_witness_stock_verifier import GO, NOTE_TOOL, ROOT, XMOD_NOTE  # noqa: E402

MODEL = "tiny_binary"
D = 32
ORIGIN_PREFIX = "pgcld.test"
HAVE_GO = os.path.exists(GO) and os.path.exists(XMOD_NOTE)
SCORE_BUDGET_S = 2.0  # a witness's request may take 5 s (its timeout): a score must never wait for one


def items(n, seed, prefix):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)


def start_witness(name, seed, log_vkey, seen=None):
    args = ["/usr/bin/python3", os.path.join(ROOT, "tests", "tlog", "witness.py"), "--name", name, "--seed",
            seed * 32, "--log", log_vkey]
    if seen:
        args += ["--seen", seen]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    hello = json.loads(p.stdout.readline())
    return p, "http://127.0.0.1:%d" % hello["port"], hello["vkey"]


class WitnessDaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-witness-daemon-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--signing-key", key, "--log-origin", ORIGIN_PREFIX, "--log-checkpoint-interval", "1"])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", key)
        # a first start tells the writer id (fixed with the database) and the log's note key
        d.start()
        r = d.get("/log/", key=d.keys["reviewer"])
        assert r.status == 200, r
        cls.writer, cls.log_vkey = r.json["logs"][0]["writer_id"], r.json["logs"][0]["key"]
        d.stop()
        cls.witnesses = {}
        root = base64.b64encode(bytes(range(32))).decode()
        for name, seed, seen in (("w1", "11", None), ("w2", "22", None),
                                 ("w3", "33", f"{ORIGIN_PREFIX}/{cls.writer}=1000000,{root}")):
            p, url, vkey = start_witness(name, seed, cls.log_vkey, seen)
            cls.addClassCleanup(p.wait)
            cls.addClassCleanup(p.kill)
            cls.addClassCleanup(p.send_signal, signal.SIGCONT)
            cls.witnesses[name] = (p, url, vkey)
            d.args += ["--witness", f"{name}={url},{vkey}"]
        d.start()
        cls.d = d
        cls.go_tool = None
        if HAVE_GO:
            cls.go_tool = os.path.join(cls.tmp, "verify_note")
            subprocess.run([GO, "build", "-o", cls.go_tool, "./tests/tlog/verify_note"], cwd=ROOT,
                           env=go_env(cls.tmp),
                           check=True, capture_output=True, timeout=600)

    def vkey(self, name):
        return self.witnesses[name][2]

    def checkpoint(self):
        r = self.d.get(f"/log/{self.writer}/checkpoint", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        return r.body

    def size_of(self, note):
        return int(note.decode().split("\n")[1])

    def cosigned_by(self, note, *names):
        """True when note_tool opens note with the log key and a quorum of every witness named."""
        p = subprocess.run([NOTE_TOOL, "open-checkpoint", self.log_vkey, str(len(names)),
                            *(self.vkey(n) for n in names)], input=note, capture_output=True, timeout=60)
        return p.returncode == 0

    def score_once(self, seed):
        r = self.d.score({"items": items(2, seed, f"s{seed}")})
        self.assertEqual(r.status, 200, r)

    def wait_cosigned(self, names, at_least, timeout=60):
        def ok():
            note = self.checkpoint()
            return self.size_of(note) >= at_least and self.cosigned_by(note, *names)
        self.assertTrue(H.wait_until(ok, timeout=timeout),
                        f"no checkpoint of size >= {at_least} cosigned by {names}:\n{self.checkpoint().decode()}\n"
                        f"{self.d.logs()}")
        return self.checkpoint()

    def test_1_cosigned_and_split_view_refused(self):
        for seed in range(5):
            self.score_once(seed)
        size = self.d.get("/log/", key=self.d.keys["reviewer"]).json["logs"][0]["size"]
        note = self.wait_cosigned(("w1", "w2"), size)
        # Go's note verifier: the log's signature and both cosignatures
        if self.go_tool:
            for w in ("w1", "w2"):
                p = subprocess.run([self.go_tool, "verify", "-c", self.vkey(w), self.log_vkey], input=note,
                                   capture_output=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr.decode())
        # w3 holds a larger tree: it never cosigns, and says so as a conflict
        self.assertFalse(self.cosigned_by(note, "w3"), note.decode())
        self.assertTrue(H.wait_until(lambda: (H.metric(self.d, "pgcld_witness_conflicts_total",
                                                       'witness="w3"') or 0) >= 1, timeout=30), self.d.logs())
        self.assertEqual(H.metric(self.d, "pgcld_witness_last_outcome", 'witness="w3",outcome="conflict"'), 1)
        self.assertEqual(H.metric(self.d, "pgcld_witness_cosignatures_total", 'witness="w3"'), 0)
        self.assertGreaterEqual(H.metric(self.d, "pgcld_witness_cosigned_tree_size", 'witness="w1"'), size)
        self.assertEqual(H.metric(self.d, "pgcld_witness_last_outcome", 'witness="w1",outcome="cosigned"'), 1)
        self.assertRegex(self.d.logs(100000), r"(?i)error.*witness: w3: conflict")

    def test_2_an_outage_never_delays_scoring(self):
        w2 = self.witnesses["w2"][0]
        w2.send_signal(signal.SIGSTOP)  # hung: connections accepted, never answered
        try:
            slowest = 0.0
            for seed in range(100, 160):
                t = time.monotonic()
                self.score_once(seed)
                slowest = max(slowest, time.monotonic() - t)
                time.sleep(0.03)  # the checkpoints (every 1 s) and the witness's retries run meanwhile
            self.assertLess(slowest, SCORE_BUDGET_S, "a score waited for the hung witness")
            size = self.d.get("/log/", key=self.d.keys["reviewer"]).json["logs"][0]["size"]
            self.wait_cosigned(("w1",), size)
            self.assertFalse(self.cosigned_by(self.checkpoint(), "w2"))
            self.assertTrue(H.wait_until(lambda: (H.metric(self.d, "pgcld_witness_failures_total",
                                                           'witness="w2"') or 0) >= 1, timeout=30))
        finally:
            w2.send_signal(signal.SIGCONT)
        self.wait_cosigned(("w1", "w2"), size, timeout=120)

    def test_3_verify_witness_quorum(self):
        def verify(quorum, *names):
            args = ["audit", "verify", "--db", self.d.db_path, "--witness-quorum", str(quorum),
                    "--log-key", self.log_vkey, "--log-origin", ORIGIN_PREFIX]
            for n in names:
                args += ["--witness", f"{n}={self.witnesses[n][1]},{self.vkey(n)}"]
            return self.d.cli(*args, check=False)
        self.score_once(900)
        size = self.d.get("/log/", key=self.d.keys["reviewer"]).json["logs"][0]["size"]
        self.wait_cosigned(("w1", "w2"), size)
        p = verify(2, "w1", "w2", "w3")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertTrue(out["witness_quorum"]["met"], out)
        self.assertEqual(out["witness_logs"][0]["cosigners"], 2, out)
        p = verify(3, "w1", "w2", "w3")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"writer '{self.writer}'", p.stderr)
        self.assertIn("has 2 of the 3 witness cosignatures required", p.stderr)
        p = verify(2, "w1", "w3")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("has 1 of the 2", p.stderr)
        # a log key that did not sign it is no quorum either
        other = os.path.join(self.tmp, "other.key")
        self.d.cli("audit", "keygen", "--out", other)
        other_vkey = self.d.cli("audit", "note-key", "--signing-key", other, "--origin",
                                f"{ORIGIN_PREFIX}/{self.writer}").stdout.strip()
        p = self.d.cli("audit", "verify", "--db", self.d.db_path, "--witness-quorum", "1", "--log-key", other_vkey,
                       "--log-origin", ORIGIN_PREFIX,
                       "--witness", f"w1={self.witnesses['w1'][1]},{self.vkey('w1')}", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("not signed by its log key", p.stderr)


if __name__ == "__main__":
    unittest.main()
