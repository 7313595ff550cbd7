"""The log tree's stored subtrees and consistency proofs (docs/audit.md, "The log tree"), end to end.

A daemon with a signing key scores batches and signs three checkpoints (A, B, C) as the log grows.
Over real HTTP:
  - a decision's proof reaches checkpoint B through its log part, and both offline verifiers
    (docs/verify_proof.py and `pgcld audit verify-proof`) accept it;
  - GET /v1/audit/consistency between the sizes of A and B, B and C, A and C answers roots equal to
    the checkpoints' log_root and a path that docs/verify_proof.py --consistency and
    `pgcld audit verify-consistency` (which also checks both signatures) accept; one changed byte in
    the path or a root, or the checkpoints swapped, fails both;
  - bad parameters are 400 invalid_request naming the field, a size beyond the log 404
    tree_size_beyond_log, and every answer matches openapi.yaml;
  - a changed audit_log_nodes row (the append-only triggers dropped, as an attacker with the file
    would) is named by level and index by `pgcld audit verify`, and the consistency proof the daemon
    then builds from it no longer matches the signed checkpoints.

Run: /usr/bin/python3 tests/integration/test_consistency.py (PGCLD_BIN selects the binary).
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

VERIFIER = os.path.join(H.SOURCE_ROOT, "docs", "verify_proof.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class ConsistencyTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.daemon = cls.d = H.start_signing_daemon(cls, "pgcld-consistency-")
        D = H.load_config("toxicity")["dims"]["D"]
        cls.cps, cls.decisions = [], []
        seed = 0
        for rounds in (3, 6, 11):  # commits before each checkpoint: sizes that are not powers of two
            for _ in range(rounds):
                seed += 1
                r = cls.d.score({"items": H.json_items(H.random_embeddings(1 + seed % 3, D, seed=seed), f"s{seed}-")})
                assert r.status == 200, r
                cls.decisions.append(r.json["results"][0]["decision_id"])
            r = cls.d.post("/v1/audit/checkpoints", {}, key=cls.d.keys["admin"])
            assert r.status == 201, r
            # keep each checkpoint file: a later checkpoint of another head has another name
            kept = os.path.join(cls.tmp, f"cp-{len(cls.cps)}.json")
            shutil.copy(r.json["file"], kept)
            cls.cps.append(dict(r.json, file=kept))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def consistency(self, first, second):
        r = self.d.get(f"/v1/audit/consistency?first={first}&second={second}", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        return r.json

    def verifiers(self, proof, old=None, new=None):
        """(exit code and output of docs/verify_proof.py --consistency, of pgcld audit verify-consistency)."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.tmp, delete=False) as f:
            json.dump(proof, f)
        cps = [old["file"], new["file"]] if old else []
        py = subprocess.run([PY, VERIFIER, "--consistency", f.name, *cps], capture_output=True, text=True,
                            timeout=60)
        args = [a for cp in cps for a in ("--checkpoint", cp)] + (["--public-key", self.public] if cps else [])
        c = self.d.cli("audit", "verify-consistency", f.name, *args, check=False)
        os.unlink(f.name)
        return (py.returncode, py.stdout + py.stderr), (c.returncode, c.stdout + c.stderr)

    def test_sizes_grow(self):
        sizes = [cp["head_seq"] for cp in self.cps]
        self.assertEqual(sizes, sorted(set(sizes)), sizes)

    def test_a_proof_log_part_reaches_a_checkpoint(self):
        b = self.cps[1]
        decision_id = self.decisions[4]  # scored between checkpoints A and B
        r = self.d.get(f"/v1/decisions/{decision_id}/proof?format=chain-v2", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        p = r.json
        log = p["log"]
        self.assertEqual((log["tree_size"], log["root"]), (self.cps[2]["head_seq"], self.cps[2]["log_root"]), log)
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.tmp, delete=False) as f:
            json.dump(p, f)
        py = subprocess.run([PY, VERIFIER, f.name, self.cps[2]["file"]], capture_output=True, text=True, timeout=60)
        self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
        c = self.d.cli("audit", "verify-proof", f.name, "--checkpoint", self.cps[2]["file"], "--public-key",
                       self.public, check=False)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        os.unlink(f.name)
        self.assertLessEqual(p["chain_entry"]["seq"], b["head_seq"])

    def test_consistency_between_checkpoints_verifies(self):
        for i, j in ((0, 1), (1, 2), (0, 2), (1, 1)):
            old, new = self.cps[i], self.cps[j]
            proof = self.consistency(old["head_seq"], new["head_seq"])
            self.assertEqual((proof["first"], proof["second"]), (old["head_seq"], new["head_seq"]))
            self.assertEqual((proof["first_root"], proof["second_root"]), (old["log_root"], new["log_root"]))
            if i == j:
                self.assertEqual(proof["path"], [])
            (py_rc, py_out), (c_rc, c_out) = self.verifiers(proof, old, new)
            self.assertEqual(py_rc, 0, py_out)
            self.assertIn("consistency OK", py_out)
            self.assertEqual(c_rc, 0, c_out)
            self.assertTrue(json.loads(c_out.splitlines()[-1])["valid"], c_out)
            (py_rc, py_out), (c_rc, c_out) = self.verifiers(proof)  # without checkpoints: the path alone
            self.assertEqual((py_rc, c_rc), (0, 0), py_out + c_out)

    def test_one_changed_byte_fails(self):
        old, new = self.cps[0], self.cps[2]
        proof = self.consistency(old["head_seq"], new["head_seq"])
        self.assertGreater(len(proof["path"]), 0)
        flip = lambda h: ("1" if h[0] == "0" else "0") + h[1:]  # noqa: E731
        for what in ("path", "first_root", "second_root", "second"):
            bad = json.loads(json.dumps(proof))
            if what == "path":
                bad["path"][len(bad["path"]) // 2] = flip(bad["path"][len(bad["path"]) // 2])
            elif what == "second":
                bad["second"] += 1
            else:
                bad[what] = flip(bad[what])
            # a size alone is bound by the checkpoint that signs it, not by the path
            for cps in ((old, new),) if what == "second" else ((old, new), (None, None)):
                (py_rc, py_out), (c_rc, c_out) = self.verifiers(bad, *cps)
                self.assertEqual(py_rc, 1, (what, py_out))
                self.assertIn("FAILED", py_out)
                self.assertEqual(c_rc, 1, (what, c_out))
                self.assertIn("NOT VALID", c_out)
        (py_rc, _), (c_rc, _) = self.verifiers(proof, new, old)  # the checkpoints swapped
        self.assertEqual((py_rc, c_rc), (1, 1))

    def test_bad_parameters(self):
        rk = self.d.keys["reviewer"]
        head = self.cps[2]["head_seq"]
        for query, field in (("second=3", "first"), ("first=1", "second"), ("first=0&second=3", "first"),
                             ("first=-1&second=3", "first"), ("first=x&second=3", "first"),
                             ("first=1&second=1.5", "second"), ("first=5&second=3", "first"),
                             ("first=1&second=3&verbose=1", "verbose"), ("first=1&first=2&second=3", "first"),
                             ("first=1&second=3&writer=a", "writer")):  # SQLite: one log, no writer
            self.expect_error("GET", f"/v1/audit/consistency?{query}", 400, "invalid_request", key=rk, field=field)
        err = self.expect_error("GET", f"/v1/audit/consistency?first=1&second={head + 1000}", 404,
                                "tree_size_beyond_log", key=rk, field="second")
        self.assertIn("entries", err["message"])
        self.expect("GET", f"/v1/audit/consistency?first=1&second={head}", 200, key=rk)
        self.expect_auth_errors("GET", "/v1/audit/consistency?first=1&second=2", forbidden_roles=("scorer", "admin"))

    def test_a_size_beyond_the_log_is_404_however_large(self):
        """Issue 27, class 6: a well-formed size beyond the log is 404 tree_size_beyond_log whatever
        its number of digits (2^32, 2^53, beyond int64 and uint64); only a malformed one is 400."""
        rk = self.d.keys["reviewer"]
        head = self.cps[2]["head_seq"]
        for second in (head + 1, 2 ** 32, 2 ** 53, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, 10 ** 30,
                       "0" * 40 + str(10 ** 40)):
            with self.subTest(second=second):
                err = self.expect_error("GET", f"/v1/audit/consistency?first=1&second={second}", 404,
                                        "tree_size_beyond_log", key=rk, field="second")
                self.assertIn(str(second).lstrip("0")[:30], err["message"])
        # both beyond the log: still a size beyond it, unless first is the larger (400, as below)
        self.expect_error("GET", f"/v1/audit/consistency?first={2 ** 64}&second={10 ** 30}", 404,
                          "tree_size_beyond_log", key=rk, field="second")
        for query in (f"first={2 ** 64}&second={head}", f"first={10 ** 30}&second={2 ** 64}",
                      f"first={10 ** 30 + 1}&second=000{10 ** 30}"):
            with self.subTest(query=query):
                self.expect_error("GET", f"/v1/audit/consistency?{query}", 400, "invalid_request", key=rk,
                                  field="first")
        # malformed, however the digits around it look
        for second in ("1e30", "%2B5", "-5", "%205", "5%20", "0x10", "1_000", "5.0", "9" * 30 + "x", "%EF%BC%95"):
            with self.subTest(second=second):
                self.expect_error("GET", f"/v1/audit/consistency?first=1&second={second}", 400,
                                  "invalid_request", key=rk, field="second")
        # a decimal integer may have leading zeros: 007 is 7
        plain = self.expect("GET", f"/v1/audit/consistency?first=1&second={head}", 200, key=rk)
        padded = self.expect("GET", f"/v1/audit/consistency?first=0001&second=000{head}", 200, key=rk)
        self.assertEqual(padded, plain)

    def test_zz_a_changed_node_is_named_and_breaks_consistency(self):
        # Runs last (zz): it changes the database under the daemon.
        conn = sqlite3.connect(self.d.db_path)
        conn.executescript("DROP TRIGGER audit_log_nodes_append_only_u; DROP TRIGGER audit_log_nodes_append_only_d;")
        level, idx = conn.execute("SELECT level, idx FROM audit_log_nodes WHERE level = 2 ORDER BY idx LIMIT 1") \
            .fetchone()
        conn.execute("UPDATE audit_log_nodes SET hash = zeroblob(32) WHERE level = ? AND idx = ?", (level, idx))
        conn.commit()
        conn.close()
        c = self.d.cli("audit", "verify", "--db", self.d.db_path, check=False)
        self.assertEqual(c.returncode, 1, c.stdout + c.stderr)
        self.assertIn(f"log tree node at level {level}, index {idx}", c.stdout + c.stderr)
        old, new = self.cps[0], self.cps[2]
        proof = self.consistency(old["head_seq"], new["head_seq"])
        (py_rc, py_out), (c_rc, c_out) = self.verifiers(proof, old, new)
        self.assertEqual((py_rc, c_rc), (1, 1), py_out + c_out)


if __name__ == "__main__":
    H.main()
