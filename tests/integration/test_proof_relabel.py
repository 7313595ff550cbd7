#!/usr/bin/python3
"""An inclusion proof cannot be relabelled to another decision (issue 27, finding 1).

A proof names its decision (`decision_id`) and carries the decision's leaf (`leaf_data`). A
verifier that only looked for the claimed id *somewhere* in the leaf accepted a proof of decision P
relabelled to decision V whenever P's row held V's id in a text a client chose: the item's `id`
(POST /v1/score, or the "id" tensor of POST /v2/models/{name}/infer) or the request's
`X-Request-Id`. Every verifier must read the leaf by its layout (docs/audit.md, "Encoding version
2" and "Decision leaf, extended") and compare each claim with the field at its position. Checked
here against the three verifiers: docs/verify_proof.py (a separate process, standard library
only), `pgcld audit verify-proof`, and the Python client's verify_inclusion:

  * honest proofs verify: a plain decision, decisions whose item id or request id is another
    decision's id, a decision with a trace id and every statement fact;
  * the client-controlled texts of a decision leaf, enumerated: item_id and request_id can hold
    any decision id (planted through all three routes above, and the proof relabelled to it is
    refused); trace_id (the traceparent's), content_date, territorial_scope and content_language
    are validated formats that cannot (the daemon refuses or replaces such a value, so no leaf
    holds one); the Idempotency-Key is not in the leaf at all; and a proof relabelled to any text
    value its leaf holds (the trace id, each fact, the model's name, ...) is refused;
  * the leaf of another kind: a contest's leaf holds the contested decision's id as its own
    decision_id column; a proof assembled from it, with a path, root, chain entry and log path
    that are all correct, is refused as not a decision's;
  * relabelled positions of a leaf inside a commit's tree of five (leaf_index, tree_size, the
    path's order and length, chain_entry.seq, log.leaf_index) and another encoding are refused;
    the Python client, given the decision's record, compares its seq, trace id and facts with the
    leaf's too.

Runs on PostgreSQL too (PGCLD_TEST_STORE=postgresql, pg_test_proof_relabel).

Run: /usr/bin/python3 tests/integration/test_proof_relabel.py (PGCLD_BIN selects the binary).
"""
import base64
import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

sys.path.insert(0, os.path.join(H.SOURCE_ROOT, "clients", "python"))
from pgcld_client.errors import ProofError  # noqa: E402
from pgcld_client.proof import decode_values, verify_inclusion  # noqa: E402

VERIFIER = os.path.join(H.SOURCE_ROOT, "docs", "verify_proof.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
D = 1024


def sha(b):
    return hashlib.sha256(b).digest()


def text(s):
    b = s.encode()
    return b"\x03" + len(b).to_bytes(4, "big") + b


def integer(v):
    return b"\x01" + v.to_bytes(8, "big", signed=True)


def text_or_null(s):
    return b"\x00" if s is None else text(s)


def mth(leaves):
    """RFC 9162 s2.1.1 over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return sha(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def inclusion_path(leaves, index):
    """RFC 9162 s2.1.3.1 PATH(m, D[n]) over leaf hashes, from the leaf upwards."""
    if len(leaves) == 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < k:
        return inclusion_path(leaves[:k], index) + [mth(leaves[k:])]
    return inclusion_path(leaves[k:], index - k) + [mth(leaves[:k])]


def embedding(seed):
    return H.embedding_json(H.random_embeddings(1, D, seed)[0])


class RelabelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",))
        cls.victim = cls.score_one({"id": "victim", "embedding": embedding(1)})
        V = cls.victim
        # the planted decisions: V's id in a text the client sends
        cls.planted = {
            "item id (/v1/score)": (cls.score_one({"id": V, "embedding": embedding(2)}), "item_id"),
            "request id (X-Request-Id)": (cls.score_one({"id": "by-request", "embedding": embedding(3)},
                                                        headers={"X-Request-Id": V}), "request_id"),
            "item id (/v2 infer)": (cls.infer_one(V, 4), "item_id"),
        }
        cls.with_facts = cls.score_one(
            {"id": "facts", "embedding": embedding(5), "content_date": "2024-03-01",
             "territorial_scope": ["DE", "FR"], "content_language": "DE"},
            headers={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        # the contest's leaf holds V's id as its decision_id column
        r = cls.d.post(f"/v1/decisions/{V}/contests", {"reason": "relabel test"}, key=cls.d.keys["reviewer"])
        assert r.status == 201, r
        cls.contest_id = r.json["contest_id"]

    @classmethod
    def score_one(cls, item, headers=None):
        r = cls.d.score({"items": [item]}, headers=headers)
        assert r.status == 200, r
        return r.json["results"][0]["decision_id"]

    @classmethod
    def infer_one(cls, item_id, seed):
        z = H.random_embeddings(1, D, seed)[0]
        r = cls.d.post("/v2/models/toxicity/infer", {"inputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [1, D], "data": [float(f"{v:.9g}") for v in z]},
            {"name": "id", "datatype": "BYTES", "shape": [1], "data": [item_id]}]})
        assert r.status == 200, r
        return next(o["data"][0] for o in r.json["outputs"] if o["name"] == "decision_id")

    # -- helpers
    def proof(self, decision_id):
        r = self.d.get(f"/v1/decisions/{decision_id}/proof?format=chain-v2", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        return r.json

    def verdicts(self, proof):
        """{verifier: (accepted, what it said)} of the three verifiers on proof."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.d.tmp, delete=False) as f:
            json.dump(proof, f)
        try:
            py = subprocess.run([PY, VERIFIER, f.name], capture_output=True, text=True, timeout=60)
            cli = self.d.cli("audit", "verify-proof", f.name, check=False)
        finally:
            os.unlink(f.name)
        try:
            verify_inclusion(copy.deepcopy(proof))
            client = (True, "accepted")
        except ProofError as e:
            client = (False, str(e))
        return {"docs/verify_proof.py": (py.returncode == 0, py.stdout + py.stderr),
                "pgcld audit verify-proof": (cli.returncode == 0, cli.stdout + cli.stderr),
                "pgcld_client.verify_inclusion": client}

    def assert_accepted(self, proof):
        refusing = {v: said for v, (accepted, said) in self.verdicts(proof).items() if not accepted}
        self.assertEqual(refusing, {}, "verifiers refuse an honest proof")

    def assert_refused(self, proof, what):
        accepting = [v for v, (accepted, _) in self.verdicts(proof).items() if accepted]
        self.assertEqual(accepting, [], f"verifiers accept {what}")

    def relabelled(self, proof, decision_id):
        forged = copy.deepcopy(proof)
        forged["decision_id"] = decision_id
        return forged

    # -- honest proofs
    def test_honest_proofs_verify(self):
        for decision_id in (self.victim, self.with_facts, *(p for p, _ in self.planted.values())):
            with self.subTest(decision_id=decision_id):
                self.assert_accepted(self.proof(decision_id))

    # -- the client-controlled texts of a decision leaf
    def test_a_proof_relabelled_to_an_id_planted_in_the_leaf_is_refused(self):
        for route, (planted, column) in self.planted.items():
            with self.subTest(route=route):
                proof = self.proof(planted)
                data = base64.b64decode(proof["leaf_data"])
                # the attack's premise: the planted id is in the leaf, encoded as the claim would be
                self.assertEqual(self.d.scalar(f"SELECT {column} FROM decisions WHERE decision_id = ?", (planted,)),
                                 self.victim)
                self.assertIn(text(self.victim), data)
                self.assert_refused(self.relabelled(proof, self.victim),
                                    f"decision {planted}'s proof relabelled to {self.victim} planted as its {column}")

    def test_a_proof_relabelled_to_any_other_text_of_its_leaf_is_refused(self):
        proof = self.proof(self.with_facts)
        values = decode_values(base64.b64decode(proof["leaf_data"]))
        texts = {v for v in values[1:] if isinstance(v, str)} - {self.with_facts}
        # the trace id and the facts are among them (the leaf is extended)
        self.assertTrue({"4bf92f3577b34da6a3ce929d0e0e4736", "2024-03-01", '["DE","FR"]', "DE"} <= texts, texts)
        for value in sorted(texts):
            with self.subTest(relabelled_to=value[:48]):
                self.assert_refused(self.relabelled(proof, value), f"a proof relabelled to its leaf's text {value[:48]!r}")

    def test_the_other_client_texts_cannot_hold_a_decision_id(self):
        V = self.victim
        for fact, value in (("content_date", V), ("territorial_scope", [V]), ("content_language", V)):
            with self.subTest(fact=fact):
                r = self.d.score({"items": [{"id": "f", "embedding": embedding(6), fact: value}]})
                self.assertEqual(r.status, 400, r)
        # a traceparent with V in its trace id is invalid: replaced by a fresh trace id; an
        # Idempotency-Key is not chained
        for headers in ({"traceparent": f"00-{V}-00f067aa0ba902b7-01"},
                        {"traceparent": f"00-{V.replace('-', '')}-00f067aa0ba902b7-01"},
                        {"Idempotency-Key": V}):
            with self.subTest(headers=headers):
                decision_id = self.score_one({"id": "h", "embedding": embedding(7)}, headers=headers)
                self.assertNotIn(text(V), base64.b64decode(self.proof(decision_id)["leaf_data"]))

    def test_the_client_compares_a_record_it_is_given_field_by_field(self):
        proof = self.proof(self.with_facts)
        record = self.d.get(f"/v1/decisions/{self.with_facts}", key=self.d.keys["reviewer"]).json
        self.assertEqual(verify_inclusion(proof, decision=record).decision["seq"], record["seq"])
        for member, other in (("seq", record["seq"] + 1), ("decision_id", self.victim),
                              ("trace_id", "0af7651916cd43dd8448eb211c80319c"), ("content_date", "2024-03-02"),
                              ("territorial_scope", ["DE"]), ("content_language", "FR")):
            with self.subTest(member=member):
                with self.assertRaises(ProofError):
                    verify_inclusion(proof, decision=dict(record, **{member: other}))

    # -- another kind of leaf
    def assembled_proof(self, kind, row_seq, data, decision_id):
        """A proof that names decision_id, assembled from the chain (the test's own reads, RFC 9162
        here) around leaf data `data` of row row_seq of table kind: its path, commit root, chain
        entry and log path are all as the chain has them."""
        pg = self.d.on_postgres
        run = self.d.query("SELECT entry_seq, first_leaf + ? - first_row_seq AS leaf_index"
                           + (", writer_id" if pg else "") + " FROM audit_chain_runs"
                           " WHERE kind = ? AND first_row_seq <= ? AND first_row_seq + n > ?",
                           (row_seq, kind, row_seq, row_seq))[0]
        mine = " AND writer_id = ?" if pg else ""
        mine_args = (run["writer_id"],) if pg else ()
        entry = self.d.query("SELECT seq, prev_hash, hash, leaf_count, leaves FROM audit_chain WHERE seq = ?" + mine,
                             (run["entry_seq"], *mine_args))[0]
        blob = bytes(entry["leaves"])
        leaves = [blob[i:i + 32] for i in range(0, len(blob), 32)]
        index = run["leaf_index"]
        self.assertEqual(sha(b"\x00" + data), leaves[index], f"the leaf of {kind} row {row_seq}")
        where = " WHERE writer_id = ?" if pg else ""
        entry_hashes = [r["hash"] for r in self.d.query("SELECT hash FROM audit_chain" + where + " ORDER BY seq",
                                                        mine_args)]
        log_leaves = [sha(b"\x00" + bytes.fromhex(h)) for h in entry_hashes]
        proof = {"decision_id": decision_id, "encoding": 2, "leaf_data": base64.b64encode(data).decode(),
                 "leaf_hash": leaves[index].hex(), "leaf_index": index, "tree_size": len(leaves),
                 "path": [h.hex() for h in inclusion_path(leaves, index)], "root": mth(leaves).hex(),
                 "chain_entry": {"seq": entry["seq"], "prev_hash": entry["prev_hash"], "hash": entry["hash"]},
                 "log": {"leaf_index": entry["seq"] - 1, "tree_size": len(log_leaves),
                         "path": [h.hex() for h in inclusion_path(log_leaves, entry["seq"] - 1)],
                         "root": mth(log_leaves).hex(), "checkpoint": None}}
        if pg:
            proof["writer_id"] = run["writer_id"]
        return proof

    def test_an_assembled_proof_of_a_decision_leaf_verifies(self):
        """The control of test_a_contest_leaf_is_no_decision: assembled around a decision's own leaf, the proof is the
        daemon's (but for the log, which may have grown) and every verifier accepts it."""
        served = self.proof(self.victim)
        seq = self.d.scalar("SELECT seq FROM decisions WHERE decision_id = ?", (self.victim,))
        proof = self.assembled_proof("decisions", seq, base64.b64decode(served["leaf_data"]), self.victim)
        for member in ("leaf_hash", "leaf_index", "tree_size", "path", "root", "chain_entry"):
            self.assertEqual(proof[member], served[member], member)
        self.assert_accepted(proof)

    def test_a_contest_leaf_is_no_decision(self):
        c = self.d.query("SELECT seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests"
                         " WHERE contest_id = ?", (self.contest_id,))[0]
        self.assertEqual(c["decision_id"], self.victim)
        data = (text("contests") + integer(c["seq"]) + text(c["contest_id"]) + text(c["decision_id"]) +
                text(c["filed_at"]) + text(c["filed_by"]) + text_or_null(c["filer_key_id"]) + text(c["reason"]))
        proof = self.assembled_proof("contests", c["seq"], data, self.victim)
        self.assertIn(text(self.victim), base64.b64decode(proof["leaf_data"]))
        self.assert_refused(proof, "a contest's leaf as the proof of the decision it contests")
        # the same proof with the kind read as "decisions": the hash no longer matches
        forged = copy.deepcopy(proof)
        data = base64.b64decode(forged["leaf_data"])
        forged["leaf_data"] = base64.b64encode(text("decisions") + data[len(text("contests")):]).decode()
        self.assert_refused(forged, "a contest's leaf relabelled as a decisions row")

    # -- relabelled positions
    def middle_leaf_proof(self):
        """The proof of a decision whose leaf sits inside a commit's tree of at least 5 leaves, at
        neither end (one request of 5 items is one commit): its path has a left and a right
        sibling, so a verifier that ignored leaf_index, tree_size or the order of the path would
        either refuse this honest proof or accept the forgeries below. A one-item commit
        (tree_size 1, leaf_index 0, path []) could not tell."""
        r = self.d.score({"items": [{"id": f"batch-{k}", "embedding": embedding(20 + k)} for k in range(5)]})
        self.assertEqual(r.status, 200, r)
        proofs = [self.proof(x["decision_id"]) for x in r.json["results"]]
        inside = [p for p in proofs if 0 < p["leaf_index"] < p["tree_size"] - 1 and len(p["path"]) >= 2]
        self.assertTrue(inside, f"no decision of the batch inside a tree of 3 or more: "
                                f"{[(p['leaf_index'], p['tree_size'], len(p['path'])) for p in proofs]}")
        proof = inside[0]
        self.assertGreaterEqual(proof["tree_size"], 5, proof)
        self.assertEqual(len(set(proof["path"])), len(proof["path"]), proof)
        return proof

    def test_relabelled_positions_are_refused(self):
        proof = self.middle_leaf_proof()
        self.assert_accepted(proof)  # the control: the honest proof of a middle leaf verifies
        n, i = proof["tree_size"], proof["leaf_index"]
        for where, change in (("leaf_index + 1", lambda p: p.update(leaf_index=i + 1)),
                              ("leaf_index - 1", lambda p: p.update(leaf_index=i - 1)),
                              ("leaf_index 0", lambda p: p.update(leaf_index=0)),
                              ("leaf_index mirrored", lambda p: p.update(leaf_index=n - 1 - i if n - 1 - i != i else 0)),
                              ("tree_size + 1", lambda p: p.update(tree_size=n + 1)),
                              ("tree_size - 1", lambda p: p.update(tree_size=n - 1)),
                              ("leaf_index and tree_size + 1", lambda p: p.update(leaf_index=i + 1, tree_size=n + 1)),
                              ("the path reversed", lambda p: p.update(path=p["path"][::-1])),
                              ("the path's first two swapped", lambda p: p.update(path=[p["path"][1], p["path"][0],
                                                                                        *p["path"][2:]])),
                              ("the path without its last", lambda p: p.update(path=p["path"][:-1])),
                              ("the path with its last twice", lambda p: p.update(path=p["path"] + p["path"][-1:])),
                              ("chain_entry.seq - 1", lambda p: p["chain_entry"].update(seq=p["chain_entry"]["seq"] - 1)),
                              ("log.leaf_index - 1", lambda p: p["log"].update(leaf_index=p["log"]["leaf_index"] - 1)),
                              ("encoding 1", lambda p: p.update(encoding=1))):
            with self.subTest(relabelled=where):
                forged = copy.deepcopy(proof)
                change(forged)
                self.assertNotEqual(forged, proof)
                self.assert_refused(forged, f"a proof with {where}")

if __name__ == "__main__":
    H.main()
