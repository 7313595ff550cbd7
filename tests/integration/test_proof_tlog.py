#!/usr/bin/python3
"""Proofs in the transparency log's shape (issue 28 item 3), on a live daemon, checked by two
independent verifiers: `pgcld audit verify-proof --key` (core/audit/log/proof_check.c) and
docs/verify_proof.py (standard library only, its own Ed25519).

  * honest proofs of a decision, of decisions whose item id or request id is another decision's id,
    of a contest and of its resolution verify against the log's note key (GET /log/), and each
    verifier prints the id it read from the record at its position;
  * relabelled proofs are refused by both: a planted decision's proof presented as the victim's
    (--decision), one leaf's proof presented as another's (leaf_data swapped), a modified record
    byte, a wrong leaf_index, a checkpoint of another log (another writer_id; another log's key), a
    contest's proof presented as a decision's, no checkpoint;
  * GET /log/{writer}/consistency proves the checkpoint's tree a prefix of a later one (RFC 9162,
    checked here in Python); this shape is the default of /v1/decisions/{id}/proof, the old chain's
    shape answers ?format=chain-v2.

Runs on PostgreSQL too (PGCLD_TEST_STORE=postgresql, pg_test_proof_tlog).

Run: /usr/bin/python3 tests/integration/test_proof_tlog.py (PGCLD_BIN selects the binary).
"""
import base64
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

sys.path.insert(0, os.path.join(H.SOURCE_ROOT, "clients", "python"))
from pgcld_client import ProofError, verify_tlog_proof  # noqa: E402

VERIFIER = os.path.join(H.SOURCE_ROOT, "docs", "verify_proof.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODEL = "tiny_binary"
D = 32
ORIGIN_PREFIX = "pgcld.test"

_spec = importlib.util.spec_from_file_location("verify_proof", VERIFIER)
VP = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(VP)


class TlogProofTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-proof-tlog-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--signing-key", cls.signing_key, "--log-origin", ORIGIN_PREFIX])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", cls.signing_key)
        d.start()
        cls.d = d
        cls.rk = d.keys["reviewer"]
        cls.victim = cls.score_one({"id": "victim", "embedding_b64": cls.embedding(1)})
        V = cls.victim
        cls.planted_item = cls.score_one({"id": V, "embedding_b64": cls.embedding(2)})
        cls.planted_request = cls.score_one({"id": "by-request", "embedding_b64": cls.embedding(3)},
                                            headers={"X-Request-Id": V})
        r = d.post(f"/v1/decisions/{V}/contests", {"reason": "proof test"}, key=cls.rk)
        assert r.status == 201, r
        cls.contest_id = r.json["contest_id"]
        second = d.create_key("reviewer", "second reviewer")
        r = d.post(f"/v1/contests/{cls.contest_id}/resolution", {"outcome": "upheld", "note": "fine"}, key=second)
        assert r.status == 201, r
        cls.log = d.get("/log/", key=cls.rk).json["logs"][0]
        cls.vkey = cls.log["key"]

    @staticmethod
    def embedding(seed):
        return H.b64_items(H.random_embeddings(1, D, seed), "x")[0]["embedding_b64"]

    @classmethod
    def score_one(cls, item, headers=None):
        r = cls.d.score({"items": [item]}, headers=headers)
        assert r.status == 200, r
        return r.json["results"][0]["decision_id"]

    def proof(self, path):
        r = self.d.get(path, key=self.rk)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["format"], "tlog", r.json)
        return r.json

    def decision_proof(self, did):
        return self.proof(f"/v1/decisions/{did}/proof?format=tlog")

    def write(self, proof):
        fd, path = tempfile.mkstemp(suffix=".json", dir=self.tmp)
        with os.fdopen(fd, "w") as f:
            json.dump(proof, f)
        return path

    def run_both(self, proof, expected=None, vkey=None):
        """(cli ok, cli output, python ok, python output) of the two verifiers."""
        path, vkey = self.write(proof), vkey or self.vkey
        extra = ["--decision", expected] if expected else []
        cli = subprocess.run([H.PGCLD_BIN, "audit", "verify-proof", path, "--key", vkey, *extra],
                             capture_output=True, text=True, timeout=60)
        py = subprocess.run([PY, VERIFIER, "--key", vkey, *extra, path], capture_output=True, text=True, timeout=60)
        return cli.returncode == 0, cli.stdout + cli.stderr, py.returncode == 0, py.stdout + py.stderr

    def client_accepts(self, proof, expected=None, vkey=None):
        """Whether the Python client's verify_tlog_proof accepts it (the third verifier)."""
        try:
            return verify_tlog_proof(copy.deepcopy(proof), vkey or self.vkey, expected).id == (expected or proof["id"])
        except ProofError:
            return False

    def assert_accepted(self, proof, expected):
        self.assertTrue(self.client_accepts(proof, expected), "pgcld_client.verify_tlog_proof refused it")
        cli_ok, cli_out, py_ok, py_out = self.run_both(proof, expected)
        self.assertTrue(cli_ok, cli_out)
        self.assertTrue(py_ok, py_out)
        self.assertEqual(json.loads(cli_out)["id"], expected)
        self.assertIn(expected, py_out)

    def assert_refused(self, proof, expected=None, vkey=None):
        self.assertFalse(self.client_accepts(proof, expected, vkey), "pgcld_client.verify_tlog_proof accepted it")
        cli_ok, cli_out, py_ok, py_out = self.run_both(proof, expected, vkey)
        self.assertFalse(cli_ok, f"pgcld audit verify-proof accepted it: {cli_out}")
        self.assertIn("NOT VALID", cli_out)
        self.assertFalse(py_ok, f"verify_proof.py accepted it: {py_out}")
        self.assertIn("FAILED", py_out)

    # ---- honest proofs ----

    def test_decision_proof_shape(self):
        p = self.decision_proof(self.victim)
        for k in ("writer_id", "leaf_index", "leaf_data", "tree_size", "root", "checkpoint", "inclusion", "record"):
            self.assertIn(k, p)
        self.assertEqual(p["writer_id"], self.log["writer_id"])
        self.assertEqual(p["record"]["kind"], "decision")
        self.assertEqual(p["record"]["decision_id"], self.victim)
        self.assertEqual(p["record"]["item_id"], "victim")
        self.assertIsNotNone(p["checkpoint"], "a daemon with a signing key signs a checkpoint that covers the leaf")
        self.assertTrue(p["checkpoint"].startswith(f"{ORIGIN_PREFIX}/{p['writer_id']}\n{p['tree_size']}\n"))
        self.assertLess(p["leaf_index"], p["tree_size"])

    def test_honest_proofs_verify(self):
        for did in (self.victim, self.planted_item, self.planted_request):
            with self.subTest(decision=did):
                self.assert_accepted(self.decision_proof(did), did)

    def test_contest_and_resolution_are_provable(self):
        c = self.proof(f"/v1/contests/{self.contest_id}/proof")
        self.assertEqual((c["record"]["kind"], c["record"]["decision_id"]), ("contest", self.victim))
        self.assert_accepted(c, self.contest_id)
        r = self.proof(f"/v1/contests/{self.contest_id}/resolution/proof")
        self.assertEqual((r["record"]["kind"], r["record"]["outcome"]), ("resolution", "upheld"))
        self.assert_accepted(r, self.contest_id)
        self.assertNotEqual(c["leaf_index"], r["leaf_index"])

    def test_unknown_events_are_404(self):
        unknown = "01900000-0000-7000-8000-000000000000"
        for path, code in ((f"/v1/contests/{unknown}/proof", "contest_not_found"),
                           (f"/v1/contests/{unknown}/resolution/proof", "resolution_not_found"),
                           (f"/v1/decisions/{unknown}/proof?format=tlog", "decision_not_found")):
            r = self.d.get(path, key=self.rk)
            self.assertEqual((r.status, r.error_code()), (404, code), r)
        r = self.d.get(f"/v1/decisions/{self.victim}/proof?format=xml", key=self.rk)
        self.assertEqual(r.status, 400, r)

    def test_default_is_the_tlog_shape(self):
        r = self.d.get(f"/v1/decisions/{self.victim}/proof", key=self.rk)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["format"], "tlog", r.json)
        self.assertEqual(r.json["record"]["decision_id"], self.victim)
        self.assert_accepted(r.json, self.victim)
        old = self.d.get(f"/v1/decisions/{self.victim}/proof?format=chain-v2", key=self.rk)
        self.assertEqual(old.status, 200, old)
        self.assertEqual(old.json["format"], "chain-v2", old.json)
        self.assertEqual(old.json["decision_id"], self.victim)

    # ---- relabelled proofs ----

    def test_planted_ids_are_refused(self):
        for planted in (self.planted_item, self.planted_request):
            with self.subTest(planted=planted):
                p = self.decision_proof(planted)
                data = base64.b64decode(p["leaf_data"])  # the victim's id is in its bytes, as text or binary
                self.assertTrue(self.victim.encode() in data or uuid.UUID(self.victim).bytes in data[18:])
                self.assert_refused(p, self.victim)
                p["id"] = self.victim
                self.assert_refused(p, self.victim)

    def test_another_leaf_is_refused(self):
        victim, other = self.decision_proof(self.victim), self.decision_proof(self.planted_item)
        p = copy.deepcopy(other)
        p["leaf_data"] = victim["leaf_data"]  # the victim's record on another leaf's path
        self.assert_refused(p, self.victim)
        p = copy.deepcopy(victim)
        p["leaf_index"] = other["leaf_index"]
        self.assert_refused(p, self.victim)

    def test_modified_record_byte_is_refused(self):
        p = self.decision_proof(self.victim)
        data = bytearray(base64.b64decode(p["leaf_data"]))
        for at in (1, 20, len(data) - 1):
            with self.subTest(byte=at):
                changed = bytearray(data)
                changed[at] ^= 0x01
                q = dict(p, leaf_data=base64.b64encode(bytes(changed)).decode())
                self.assert_refused(q)

    def test_wrong_leaf_index_is_refused(self):
        p = self.decision_proof(self.victim)
        for index in (p["leaf_index"] + 1, p["leaf_index"] - 1 if p["leaf_index"] else p["tree_size"]):
            with self.subTest(index=index):
                self.assert_refused(dict(p, leaf_index=index), self.victim)

    def test_checkpoint_of_another_log_is_refused(self):
        p = self.decision_proof(self.victim)
        self.assert_refused(dict(p, writer_id="another-writer"), self.victim)
        other_key = self.d.cli("audit", "note-key", "--signing-key", self.signing_key, "--origin",
                               f"{ORIGIN_PREFIX}/another-writer").stdout.strip()
        self.assert_refused(p, self.victim, vkey=other_key)
        self.assert_refused(dict(p, checkpoint=None), self.victim)
        sig_at = p["checkpoint"].index("\n\n") + 10
        forged = p["checkpoint"][:sig_at] + ("A" if p["checkpoint"][sig_at] != "A" else "B") + p["checkpoint"][sig_at + 1:]
        self.assert_refused(dict(p, checkpoint=forged), self.victim)

    def test_a_contest_is_not_a_decision(self):
        c = self.proof(f"/v1/contests/{self.contest_id}/proof")
        self.assert_refused(dict(c, kind="decision"), self.victim)

    # ---- consistency ----

    def test_consistency(self):
        first = self.decision_proof(self.victim)["tree_size"]
        self.score_one({"id": "later", "embedding_b64": self.embedding(9)})
        r = self.d.post("/log/checkpoint", key=self.d.keys["admin"])
        self.assertEqual(r.status, 200, r)
        second = r.json["size"]
        self.assertGreater(second, first)
        w = self.log["writer_id"]
        r = self.d.get(f"/log/{w}/consistency?first={first}&second={second}", key=self.rk)
        self.assertEqual(r.status, 200, r)
        c = r.json
        doc = {"first": first, "second": second, "first_root": base64.b64decode(c["first_root"]).hex(),
               "second_root": base64.b64decode(c["second_root"]).hex(),
               "path": [base64.b64decode(h).hex() for h in c["proof"]]}
        VP.verify_consistency(doc)
        bad = dict(doc, path=doc["path"][:-1] + ["00" * 32])
        with self.assertRaises(ValueError):
            VP.verify_consistency(bad)
        for q, status in ((f"first={second}&second={first}", 400), (f"first=0&second={second}", 400),
                          (f"first=1&second={second + 1000}", 404)):
            r = self.d.get(f"/log/{w}/consistency?{q}", key=self.rk)
            self.assertEqual(r.status, status, (q, r))


if __name__ == "__main__":
    unittest.main(verbosity=2)
