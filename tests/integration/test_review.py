"""Reviewers over real HTTP: the end-to-end flow (score -> contest -> open queue -> resolve
overturned -> effective outcome -> figures -> chain intact), the contest rules (one open contest,
window, filer cannot resolve, roles) and re-scoring with each --store-inputs setting.

Run: /usr/bin/python3 tests/integration/test_review.py (PGCLD_BIN selects the binary).
"""
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

TINY = "tiny_binary"


def tiny_root(parent):
    root = os.path.join(parent, "models")
    shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", "1"))
    return root


def items(n, seed, prefix="r"):
    return H.json_items(H.random_embeddings(n, 32, seed), prefix)


class ReviewFlowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-review-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_root(cls.tmp), default_model="tiny")
        cls.second = cls.daemon.create_key("reviewer", "second reviewer")

    def reviewer(self, method, path, body=None, key=None):
        return self.daemon.request(method, path, body, key=key or self.daemon.keys["reviewer"])

    def test_end_to_end(self):
        d = self.daemon
        scored = d.score({"items": items(5, 1)})
        self.assertEqual(scored.status, 200, scored)
        target = scored.json["results"][2]
        did = target["decision_id"]

        r = self.reviewer("POST", f"/v1/decisions/{did}/contests", {"reason": "this comment is a quote, not abuse"})
        self.assertEqual(r.status, 201, r)
        contest = r.json
        self.assertEqual((contest["decision_id"], contest["status"]), (did, "open"))
        self.assertIn("test-reviewer", contest["filed_by"])

        queue = self.reviewer("GET", "/v1/contests?status=open")
        self.assertEqual(queue.status, 200, queue)
        ids = [c["contest_id"] for c in queue.json["contests"]]
        self.assertIn(contest["contest_id"], ids)

        labels = ["neg", "pos"]
        corrected = labels[1 - labels.index(target["label"])]
        r = self.reviewer("POST", f"/v1/contests/{contest['contest_id']}/resolution",
                          {"outcome": "overturned", "corrected_label": corrected, "note": "context shows satire"},
                          key=self.second)
        self.assertEqual(r.status, 201, r)
        self.assertEqual((r.json["outcome"], r.json["corrected_label"]), ("overturned", corrected))
        self.assertIn("second reviewer", r.json["resolved_by"])

        rec = self.reviewer("GET", f"/v1/decisions/{did}")
        self.assertEqual(rec.status, 200, rec)
        eff = rec.json["effective_outcome"]
        self.assertEqual(eff["status"], "overturned")
        self.assertEqual(eff["label"], corrected)
        self.assertEqual(len(rec.json["contests"]), 1)
        # the original decision row is unchanged
        row = d.query("SELECT label, decision FROM decisions WHERE decision_id = ?", (did,))[0]
        self.assertEqual((row["label"], row["decision"]), (target["label"], target["decision"]))

        queue = self.reviewer("GET", "/v1/contests?status=open")
        self.assertNotIn(contest["contest_id"], [c["contest_id"] for c in queue.json["contests"]])
        resolved = self.reviewer("GET", "/v1/contests?status=resolved")
        self.assertIn(contest["contest_id"], [c["contest_id"] for c in resolved.json["contests"]])

        stats = self.reviewer("GET", "/v1/audit/stats")
        self.assertEqual(stats.status, 200, stats)
        self.assertGreaterEqual(stats.json["contests"]["filed"], 1)
        self.assertGreaterEqual(stats.json["contests"]["resolved"], 1)
        rates = {(x["model_name"], x["model_version"]): x for x in stats.json["contests"]["overturn_rate_by_model_version"]}
        self.assertGreaterEqual(rates[("tiny", "1")]["overturned"], 1)

        verify = self.reviewer("GET", "/v1/audit/verify")
        self.assertEqual(verify.status, 200, verify)
        self.assertTrue(verify.json["intact"], verify)
        # encoding version 2 (the default): one commit entry per write transaction, its events in runs
        kinds = {r["kind"] for r in d.query("SELECT DISTINCT kind FROM audit_chain")}
        self.assertTrue({"genesis", "commit"} <= kinds, kinds)
        chained = {r["kind"] for r in d.query("SELECT DISTINCT kind FROM audit_chain_runs")}
        self.assertTrue({"decisions", "contests", "resolutions"} <= chained, chained)

    def test_contest_rules(self):
        d = self.daemon
        did = d.score({"items": items(1, 2)}).json["results"][0]["decision_id"]
        r = self.reviewer("POST", f"/v1/decisions/{did}/contests", {"reason": "first"})
        self.assertEqual(r.status, 201, r)
        cid = r.json["contest_id"]
        r = self.reviewer("POST", f"/v1/decisions/{did}/contests", {"reason": "second while open"}, key=self.second)
        self.assertEqual((r.status, r.error_code()), (409, "contest_open"), r)
        # the key that filed cannot resolve
        r = self.reviewer("POST", f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "mine"})
        self.assertEqual((r.status, r.error_code()), (403, "filer_cannot_resolve"), r)
        r = self.reviewer("POST", f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "ok"}, key=self.second)
        self.assertEqual(r.status, 201, r)
        r = self.reviewer("POST", f"/v1/contests/{cid}/resolution", {"outcome": "overturned", "note": "again"},
                          key=self.second)
        self.assertEqual((r.status, r.error_code()), (409, "already_resolved"), r)
        # after a resolution, a new contest may be filed
        r = self.reviewer("POST", f"/v1/decisions/{did}/contests", {"reason": "new evidence"}, key=self.second)
        self.assertEqual(r.status, 201, r)
        # validation
        for body, field in (({}, "reason"), ({"reason": ""}, "reason"), ({"reason": "x" * 2001}, "reason"),
                            ({"reason": "ok", "extra": 1}, "extra")):
            r = self.reviewer("POST", f"/v1/decisions/{did}/contests", body)
            self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), (body, r))
            self.assertEqual(r.json["error"].get("field"), field)
        cid2 = self.reviewer("GET", "/v1/contests?status=open").json["contests"][-1]["contest_id"]
        for body in ({"outcome": "maybe", "note": "n"}, {"outcome": "upheld"},
                     {"outcome": "upheld", "corrected_label": "pos", "note": "n"}):
            r = self.reviewer("POST", f"/v1/contests/{cid2}/resolution", body)
            self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), (body, r))
        r = self.reviewer("POST", f"/v1/contests/{cid2}/resolution",
                          {"outcome": "overturned", "corrected_label": "nope", "note": "n"})
        self.assertEqual((r.status, r.error_code()), (422, "invalid_label"), r)
        r = self.reviewer("POST", "/v1/decisions/01a1fdb2-0000-7000-8000-000000000000/contests", {"reason": "x"})
        self.assertEqual((r.status, r.error_code()), (404, "decision_not_found"), r)
        r = self.reviewer("POST", "/v1/contests/01a1fdb2-0000-7000-8000-000000000000/resolution",
                          {"outcome": "upheld", "note": "x"})
        self.assertEqual((r.status, r.error_code()), (404, "contest_not_found"), r)
        # roles: a scorer cannot contest, resolve or read
        for method, path, body in (("POST", f"/v1/decisions/{did}/contests", {"reason": "x"}),
                                   ("POST", f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "x"}),
                                   ("GET", f"/v1/decisions/{did}", None), ("GET", "/v1/contests", None)):
            r = d.request(method, path, body, key=d.keys["scorer"])
            self.assertEqual((r.status, r.error_code()), (403, "forbidden"), (path, r))
        # nothing of the refused attempts was written
        self.assertEqual(d.scalar("SELECT count(*) FROM contests WHERE decision_id = ?", (did,)), 2)
        self.assertEqual(d.scalar("SELECT count(*) FROM resolutions WHERE contest_id = ?", (cid,)), 1)

    def test_rescore_float16(self):
        d = self.daemon
        res = d.score({"items": items(3, 3)}).json["results"]
        for item in res:
            r = self.reviewer("POST", f"/v1/decisions/{item['decision_id']}/rescore")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json["input_precision"], "float16")
            self.assertEqual(r.json["original"]["label"], item["label"])
            self.assertEqual(r.json["rescored"]["model_version"], "1")
            for lbl, p in item["probabilities"].items():
                self.assertAlmostEqual(r.json["rescored"]["probabilities"][lbl], p, delta=5e-3)
        blob = d.scalar("SELECT length(i.input) FROM decisions AS d JOIN decision_inputs AS i ON i.decision_seq = d.seq"
                        " WHERE d.decision_id = ?", (res[0]["decision_id"],))
        self.assertEqual(blob, 32 * 2)


class WindowAndStorageTest(unittest.TestCase):
    """The contest window, and --store-inputs float32 / none."""

    def start(self, *args):
        tmp = tempfile.mkdtemp(prefix="pgcld-window-")
        self.addCleanup(shutil.rmtree, tmp, True)
        d = H.Daemon(models=tiny_root(tmp), default_model="tiny", args=list(args))
        self.addCleanup(d.cleanup)
        d.start()
        return d

    def test_window_closed(self):
        d = self.start("--contest-window-days", "1")
        did = d.score({"items": items(1, 4)}).json["results"][0]["decision_id"]
        d.stop()
        # age the decision by two days behind pgcld's back (triggers dropped for the test only)
        if d.on_postgres:
            d.execute("ALTER TABLE decisions DISABLE TRIGGER decisions_append_only")
            d.execute("UPDATE decisions SET created_at = to_char(now() AT TIME ZONE 'UTC' - interval '2 days',"
                      " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') WHERE decision_id = ?", (did,))
            d.execute("ALTER TABLE decisions ENABLE TRIGGER decisions_append_only")
        else:
            db = sqlite3.connect(d.db_path)
            db.execute("DROP TRIGGER decisions_append_only_u")
            db.execute("UPDATE decisions SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 days')"
                       " WHERE decision_id = ?", (did,))
            db.commit()
            db.close()
        d.start()
        r = d.request("POST", f"/v1/decisions/{did}/contests", {"reason": "late"}, key=d.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (422, "contest_window_closed"), r)

    def test_store_float32_rescores_exactly(self):
        d = self.start("--store-inputs", "float32")
        item = d.score({"items": items(1, 5)}).json["results"][0]
        r = d.request("POST", f"/v1/decisions/{item['decision_id']}/rescore", key=d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["input_precision"], "float32")
        self.assertEqual(r.json["rescored"]["probabilities"], item["probabilities"])
        self.assertTrue(r.json["same_label"] and r.json["same_decision"])

    def test_store_none(self):
        d = self.start("--store-inputs", "none")
        item = d.score({"items": items(1, 6)}).json["results"][0]
        self.assertIsNone(d.rows_for([item["decision_id"]])[item["decision_id"]]["input"])
        r = d.request("POST", f"/v1/decisions/{item['decision_id']}/rescore", key=d.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (409, "input_not_stored"), r)


class PeriodicCheckpointTest(unittest.TestCase):
    """--checkpoint-interval with --signing-key writes signed checkpoints that verify the chain."""

    def test_periodic_checkpoints(self):
        tmp = tempfile.mkdtemp(prefix="pgcld-ckpt-")
        self.addCleanup(shutil.rmtree, tmp, True)
        key = os.path.join(tmp, "signing.key")
        ckdir = os.path.join(tmp, "checkpoints")
        os.makedirs(ckdir)
        d = H.Daemon(models=tiny_root(tmp), default_model="tiny",
                     args=["--signing-key", key, "--checkpoint-dir", ckdir, "--checkpoint-interval", "1"])
        self.addCleanup(d.cleanup)
        public = d.cli("audit", "keygen", "--out", key).stdout.strip().splitlines()[-1]
        d.start()
        self.assertEqual(d.score({"items": items(4, 9)}).status, 200)
        self.assertTrue(H.wait_until(lambda: len(os.listdir(ckdir)) > 0), "no checkpoint was written")
        self.assertEqual(d.stop(), 0)
        files = sorted(os.path.join(ckdir, f) for f in os.listdir(ckdir))
        args = ["audit", "verify", "--db", d.db_path, "--public-key", public]
        for f in files:
            args += ["--checkpoint", f]
        p = d.cli(*args, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertGreater(d.scalar("SELECT count(*) FROM audit_checkpoints"), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
