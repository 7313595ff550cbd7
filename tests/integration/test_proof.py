"""Inclusion proofs of decisions (issue 16; docs/audit.md, "Inclusion proofs"), end to end.

A daemon with --chain-encoding 2 scores batches; GET /v1/decisions/{id}/proof answers a proof that
the stand-alone verifier docs/verify_proof.py (standard library only, run as a separate process)
and `pgcld audit verify-proof` both accept, for every decision of several commits and against the
chain entry's hash as `GET /v1/audit/verify` publishes it when the entry is the head. After one
byte of a decision's row is changed in the database (the append-only triggers dropped, as an
attacker with the file would), a proof taken again from the API fails both verifiers, and
`pgcld audit verify` names the commit entry and the leaf. A decision chained in encoding version 1
has no proof (409 proof_unavailable); an unknown id is 404.

Run: /usr/bin/python3 tests/integration/test_proof.py (PGCLD_BIN selects the binary).
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
DROP_TRIGGERS = "DROP TRIGGER decisions_append_only_u; DROP TRIGGER decisions_append_only_d;"


def run_verifiers(d, proof, entry_hash=None, checkpoint=None, public_key=None):
    """(stand-alone verifier's exit code and output, pgcld audit verify-proof's); checkpoint: a
    checkpoint file the holder has."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=d.tmp, delete=False) as f:
        json.dump(proof, f)
    extra = [entry_hash] if entry_hash else [checkpoint] if checkpoint else []
    py = subprocess.run([PY, VERIFIER, f.name, *extra], capture_output=True, text=True, timeout=60)
    extra = ["--entry-hash", entry_hash] if entry_hash else []
    extra += ["--checkpoint", checkpoint] if checkpoint else []
    extra += ["--public-key", public_key] if public_key else []
    c = d.cli("audit", "verify-proof", f.name, *extra, check=False)
    os.unlink(f.name)
    return (py.returncode, py.stdout + py.stderr), (c.returncode, c.stdout + c.stderr)


class ProofMixin:
    def proof(self, decision_id):
        """The proof the daemon self.d answers for decision_id (asserting 200)."""
        r = self.d.get(f"/v1/decisions/{decision_id}/proof?format=chain-v2", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        return r.json


class ProofTest(ProofMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",), args=["--chain-encoding=2"])
        D = H.load_config("toxicity")["dims"]["D"]
        cls.ids = []
        for batch, n in enumerate((5, 1, 9)):
            r = cls.d.score({"items": H.json_items(H.random_embeddings(n, D, seed=batch), f"b{batch}-")})
            assert r.status == 200, r
            cls.ids.append([it["decision_id"] for it in r.json["results"]])

    def test_every_proof_verifies_with_both_verifiers(self):
        for batch in self.ids:
            for i, decision_id in enumerate(batch):
                p = self.proof(decision_id)
                self.assertEqual((p["leaf_index"], p["tree_size"]), (i, len(batch)), p)
                self.assertEqual(p["decision_id"], decision_id)
                (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p)
                self.assertEqual(py_rc, 0, py_out)
                self.assertIn("proof OK", py_out)
                self.assertEqual(c_rc, 0, c_out)
                self.assertTrue(json.loads(c_out.splitlines()[-1])["valid"], c_out)

    def test_the_stand_alone_verifier_names_the_decision_it_proves(self):
        """A genuine proof of P handed out as the proof of V: the verifier prints P's id, and with
        --decision V it refuses (the proof itself is intact; only the claim about it is wrong)."""
        p_id, v_id = self.ids[0][1], self.ids[0][2]
        path = os.path.join(self.d.tmp, "proof-of-p.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.proof(p_id), f)
        out = subprocess.run([PY, VERIFIER, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn(f"proof OK: decision {p_id}, leaf 1 of a tree of 5", out.stdout)
        ok = subprocess.run([PY, VERIFIER, "--decision", p_id, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        bad = subprocess.run([PY, VERIFIER, "--decision", v_id, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn(f"a proof of decision {p_id}, not of {v_id}", bad.stderr)

    def test_proof_of_the_head_matches_the_published_head(self):
        head = self.d.get("/v1/audit/verify", key=self.d.keys["admin"]).json
        self.assertTrue(head["intact"], head)
        p = self.proof(self.ids[-1][3])
        self.assertEqual(p["chain_entry"]["seq"], head["head_seq"])
        (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p, head["head_hash"])
        self.assertEqual((py_rc, c_rc), (0, 0), py_out + c_out)
        (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p, "0" * 64)
        self.assertEqual((py_rc, c_rc), (1, 1), "a hash the holder does not have must fail")

    def test_a_forged_path_or_leaf_fails(self):
        p = self.proof(self.ids[0][2])
        bad = json.loads(json.dumps(p))
        bad["path"][0] = ("0" if bad["path"][0][0] != "0" else "1") + bad["path"][0][1:]
        (py_rc, _), (c_rc, _) = run_verifiers(self.d, bad)
        self.assertEqual((py_rc, c_rc), (1, 1))
        bad = json.loads(json.dumps(p))
        bad["leaf_index"] = 3
        (py_rc, _), (c_rc, _) = run_verifiers(self.d, bad)
        self.assertEqual((py_rc, c_rc), (1, 1))
        bad = json.loads(json.dumps(p))
        bad["decision_id"] = self.ids[0][3]
        (py_rc, _), (c_rc, _) = run_verifiers(self.d, bad)
        self.assertEqual((py_rc, c_rc), (1, 1), "a proof of another decision")

    def test_the_statement_of_reasons_carries_the_proof(self):
        decision_id = self.ids[1][0]
        r = self.d.get(f"/v1/decisions/{decision_id}/statement", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        p = r.json["pgcld"]["proof"]
        self.assertEqual(p["decision_id"], decision_id)
        (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p)
        self.assertEqual((py_rc, c_rc), (0, 0), py_out + c_out)

    def test_unknown_id_is_404(self):
        r = self.d.get("/v1/decisions/00000000-0000-7000-8000-000000000000/proof", key=self.d.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (404, "decision_not_found"), r)

    def test_zz_one_changed_byte_fails_the_proof_and_verify_names_the_leaf(self):
        # Runs last (zz): it changes the database under the daemon.
        target = self.ids[2][4]
        seq = self.d.scalar("SELECT seq FROM decisions WHERE decision_id = ?", (target,))
        conn = sqlite3.connect(self.d.db_path)
        conn.executescript(DROP_TRIGGERS)
        item = conn.execute("SELECT item_id FROM decisions WHERE seq = ?", (seq,)).fetchone()[0]
        changed = item[:-1] + ("x" if item[-1] != "x" else "y")  # one byte
        conn.execute("UPDATE decisions SET item_id = ? WHERE seq = ?", (changed, seq))
        conn.commit()
        conn.close()
        p = self.proof(target)
        (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p)
        self.assertEqual(py_rc, 1, py_out)
        self.assertIn("does not hash to the chained leaf_hash", py_out)
        self.assertEqual(c_rc, 1, c_out)
        self.assertIn("NOT VALID", c_out)
        entry = p["chain_entry"]["seq"]
        r = self.d.get("/v1/audit/verify", key=self.d.keys["admin"]).json
        self.assertFalse(r["intact"], r)
        self.assertEqual(r["first_bad_seq"], entry, r)
        self.assertIn(f"entry {entry}, leaf 4 of 9: decisions row {seq}: payload differs", r["reason"])
        c = self.d.cli("audit", "verify", "--db", self.d.db_path, check=False)
        self.assertEqual(c.returncode, 1, c.stdout + c.stderr)
        self.assertIn(f"leaf 4 of 9: decisions row {seq}", c.stdout + c.stderr)


class ContractTest(LiveValidationMixin, unittest.TestCase):
    """Every answer of the operation against openapi.yaml (InclusionProof and its errors)."""

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.daemon = H.start_daemon(cls, models=("toxicity",), args=["--chain-encoding=2"])
        D = H.load_config("toxicity")["dims"]["D"]
        r = cls.daemon.score({"items": H.json_items(H.random_embeddings(3, D, seed=11))})
        assert r.status == 200, r
        cls.decision_id = r.json["results"][1]["decision_id"]

    def test_answers_match_the_spec(self):
        d = self.daemon
        path = f"/v1/decisions/{self.decision_id}/proof"
        body = self.expect("GET", path + "?format=chain-v2", 200, key=d.keys["reviewer"])
        self.assertEqual(body["format"], "chain-v2")
        self.assertEqual((body["leaf_index"], body["tree_size"], len(body["path"])), (1, 3, 2), body)
        body = self.expect("GET", path, 200, key=d.keys["reviewer"])  # the default: the log's shape
        self.assertEqual((body["format"], body["record"]["decision_id"]), ("tlog", self.decision_id), body)
        self.assertEqual(self.expect("GET", path + "?format=tlog", 200, key=d.keys["reviewer"])["leaf_data"],
                         body["leaf_data"])
        self.expect_error("GET", path + "?format=chain-v3", 400, "invalid_request", key=d.keys["reviewer"],
                          field="format")
        self.expect_error("GET", "/v1/decisions/01a1fdee-f6d5-7001-bd28-0e186b68696d/proof", 404,
                          "decision_not_found", key=d.keys["reviewer"])
        self.expect_error("GET", path + "?x=1", 400, "invalid_request", key=d.keys["reviewer"], field="x")
        self.expect_auth_errors("GET", path, forbidden_roles=("scorer",))


class CheckpointTest(ProofMixin, unittest.TestCase):
    """A proof reaches a signed checkpoint through the log tree: the latest checkpoint covering the
    decision's entry, whatever was written after it."""

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_signing_daemon(cls, "pgcld-proof-")
        D = H.load_config("toxicity")["dims"]["D"]
        cls.before = [cls.d.score({"items": H.json_items(H.random_embeddings(n, D, seed=20 + n), f"c{n}-")})
                      .json["results"][0]["decision_id"] for n in (2, 3)]
        r = cls.d.post("/v1/audit/checkpoints", {}, key=cls.d.keys["admin"])
        assert r.status == 201, r
        cls.cp = r.json
        cls.after = cls.d.score({"items": H.json_items(H.random_embeddings(4, D, seed=30), "late-")}) \
            .json["results"][2]["decision_id"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_decision_before_the_checkpoint_reaches_it(self):
        for decision_id in self.before:
            p = self.proof(decision_id)
            cp = p["log"]["checkpoint"]
            self.assertIsNotNone(cp, p)
            self.assertEqual((cp["head_seq"], cp["log_root"], cp["public_key"]),
                             (self.cp["head_seq"], self.cp["log_root"], self.public))
            self.assertEqual(p["log"]["tree_size"], self.cp["head_seq"])
            (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p, checkpoint=self.cp["file"],
                                                           public_key=self.public)
            self.assertEqual((py_rc, c_rc), (0, 0), py_out + c_out)
            self.assertTrue(json.loads(c_out.splitlines()[-1])["checkpoint"], c_out)

    def test_a_decision_after_it_reaches_the_head(self):
        p = self.proof(self.after)
        self.assertIsNone(p["log"]["checkpoint"], p)
        head = self.d.get("/v1/audit/verify", key=self.d.keys["admin"]).json
        self.assertEqual(p["log"]["tree_size"], head["head_seq"])
        (py_rc, py_out), (c_rc, c_out) = run_verifiers(self.d, p)
        self.assertEqual((py_rc, c_rc), (0, 0), py_out + c_out)
        # a checkpoint of another tree does not vouch for it
        (py_rc, _), (c_rc, _) = run_verifiers(self.d, p, checkpoint=self.cp["file"])
        self.assertEqual((py_rc, c_rc), (1, 1))

    def test_the_default_proof_is_the_logs_and_verifies(self):
        """Without format, a decision's proof is the transparency log's (a leaf, its inclusion and a
        signed note): both verifiers accept it with the log's note key and name the decision; a proof
        of another decision presented as this one's is refused."""
        vkey = self.d.get("/log/", key=self.d.keys["reviewer"]).json["logs"][0]["key"]
        for decision_id in (*self.before, self.after):
            r = self.d.get(f"/v1/decisions/{decision_id}/proof", key=self.d.keys["reviewer"])
            self.assertEqual(r.status, 200, r)
            p = r.json
            self.assertEqual((p["format"], p["record"]["decision_id"]), ("tlog", decision_id), p)
            self.assertIsNotNone(p["checkpoint"], p)
            for expected, ok in ((decision_id, True), (self.before[0] if decision_id != self.before[0]
                                                       else self.after, False)):
                path = os.path.join(self.tmp, "tlog-proof.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(p, f)
                c = self.d.cli("audit", "verify-proof", path, "--key", vkey, "--decision", expected, check=False)
                py = subprocess.run([PY, VERIFIER, "--key", vkey, "--decision", expected, path],
                                    capture_output=True, text=True, timeout=60)
                self.assertEqual((c.returncode == 0, py.returncode == 0), (ok, ok),
                                 (expected, c.stdout + c.stderr, py.stdout + py.stderr))

    def test_a_forged_log_part_fails(self):
        p = self.proof(self.before[0])
        for forge in ("path", "root", "checkpoint_root", "signature"):
            bad = json.loads(json.dumps(p))
            if forge == "path" and bad["log"]["path"]:
                bad["log"]["path"][-1] = "0" * 64
            elif forge == "root":
                bad["log"]["root"] = bad["log"]["checkpoint"]["log_root"] = "1" * 64
            elif forge == "checkpoint_root":
                bad["log"]["checkpoint"]["log_root"] = "2" * 64
            else:
                bad["log"]["checkpoint"]["created_at"] = "2030-01-01T00:00:00Z"
            (_, py_out), (c_rc, c_out) = run_verifiers(self.d, bad)
            self.assertEqual(c_rc, 1, (forge, c_out))
            if forge != "signature":  # the stand-alone verifier does not check Ed25519 (docs/audit.md)
                self.assertIn("FAILED", py_out, forge)
        (_, _), (c_rc, c_out) = run_verifiers(self.d, p, public_key="ab" * 32)
        self.assertEqual(c_rc, 1, "another signer than --public-key")


class VersionOneTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",), args=["--chain-encoding=1"])

    def test_no_proof_for_version_one(self):
        D = H.load_config("toxicity")["dims"]["D"]
        r = self.d.score({"items": H.json_items(H.random_embeddings(2, D, seed=7))})
        self.assertEqual(r.status, 200, r)
        r = self.d.get(f"/v1/decisions/{r.json['results'][0]['decision_id']}/proof?format=chain-v2",
                       key=self.d.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (409, "proof_unavailable"), r)
        self.assertIn("version 1", r.json["error"]["message"])
        r = self.d.get(f"/v1/decisions/{r.json['error']['message'].split(chr(39))[1]}/statement",
                       key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.json["pgcld"]["proof"], "no proof for a version-1 decision")


if __name__ == "__main__":
    H.main()
