#!/usr/bin/python3
"""Every live answer of the reviewer and audit operations matches what openapi.yaml documents.

Decision reads, statements of reasons, contests, resolutions, re-scoring, exports (JSON, NDJSON,
CSV), figures, chain verification and signed checkpoints: successes, errors, 401 and 403
(LiveReviewTest); the answers that need a particular state of the daemon or its database
(LiveReviewStatesTest).

Each response body is validated with jsonschema (Draft 2020-12, #/components refs inlined) against
the schema openapi.yaml documents for its path, method, status and media type, and each required
response header is checked; a newline-delimited JSON body is also validated line by line against
its media type's x-item-schema, and a CSV body against its x-csv-columns (openapi_contract.py,
LiveValidationMixin). The statuses validated are listed on stderr at the end.
Self-check: deliberately wrong bodies must fail validation.

openapi.yaml is checked by four programs: test_openapi_spec (the document itself),
test_openapi_score (probes, scoring, v2 inference), test_openapi_admin (administration) and
test_openapi_review (reviewers and the audit log); what they share is in openapi_contract.py.

Run: /usr/bin/python3 tests/integration/test_openapi_review.py
"""

import copy
import json
import os
import shutil
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
from openapi_contract import (  # noqa: E402
    validation_errors, SPEC, EXPORT_COLUMNS, error_body, ndjson_documents, csv_rows,
    csv_export_record, LiveValidationMixin, tiny_copy, tiny_b64_items, print_validated_responses,
)


REVIEW_UNKNOWN_ID = "01a1fdb2-0000-7000-8000-000000000000"
OLD_DECISION_ID = "01890000-0000-7000-8000-000000000001"


def query(**params):
    return "?" + urllib.parse.urlencode(params) if params else ""


class LiveReviewTest(LiveValidationMixin, unittest.TestCase):
    """The reviewer and audit operations: decision reads, statements of reasons, contests,
    resolutions, re-scoring, exports, figures, chain verification and signed checkpoints;
    successes, every error the daemon can be made to answer deterministically, 401 and 403.
    Each test scores its own decisions, so the order of the tests does not matter."""

    MAX_BODY = 4096

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-review-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = os.path.join(cls.tmp, "models")
        tiny_copy(root, "tiny", "1")
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        cls.cp_dir = os.path.join(cls.tmp, "checkpoints")
        os.makedirs(cls.cp_dir)
        d = H.Daemon(models=root, default_model="tiny",
                     args=["--max-body-bytes", str(cls.MAX_BODY), "--signing-key", cls.signing_key,
                           "--checkpoint-dir", cls.cp_dir])
        cls.addClassCleanup(d.cleanup)
        cls.public_key = d.cli("audit", "keygen", "--out", cls.signing_key).stdout.split()[-1]
        d.start()
        cls.daemon = d
        cls.second = d.create_key("reviewer", "second reviewer")
        cls.golden = [g["embedding_b64"] for g in H.load_config("tiny_binary")["golden"]]
        assert H.wait_until(lambda: d.get("/v1/contests", key=cls.second).status == 200)

    def send(self, method, path, body=None, key=None, content_type="application/json"):
        """As LiveValidationMixin.send, with the reviewer key by default."""
        if key is None:
            key = self.daemon.keys["reviewer"]
        return super().send(method, path, body, key=key, content_type=content_type)

    def score(self, n, seed, prefix):
        r = self.daemon.score({"items": tiny_b64_items(n, seed, prefix)})
        self.assertEqual(r.status, 200, r)
        self.check_live("POST", "/v1/score", r)
        return r.json["results"]

    def score_golden(self, prefix):
        """Three decisions: block, review, allow (the checkpoint's golden inputs)."""
        items = [{"id": f"{prefix}-{k}", "embedding_b64": b} for k, b in enumerate(self.golden)]
        r = self.daemon.score({"items": items})
        self.assertEqual(r.status, 200, r)
        results = r.json["results"]
        self.assertEqual([x["decision"] for x in results], ["block", "review", "allow"])
        return results

    def too_large(self, method, path, key=None):
        """A body over --max-body-bytes, announced by Content-Length (answered before it is
        read)."""
        body = b'{"reason": "' + b"x" * self.MAX_BODY + b'"}'
        r = self.send(method, path, body, key=key)
        self.assertEqual((r.status, r.error_code()), (413, "payload_too_large"), r)
        self.check_live(method, path, r)

    def bad_queries(self, path, cases):
        """Each (query, code, field) answers 400 with that code and field."""
        for q, code, field in cases:
            with self.subTest(query=f"{path}?{q}"):
                body = self.expect("GET", f"{path}?{q}", 400, code)
                self.assertEqual(body["error"].get("field"), field, body)

    # ------------------------------------------------------------------ reads
    def test_decision_reads(self):
        d = self.daemon
        results = self.score_golden("reads")
        for item in results:
            did = item["decision_id"]
            rec = self.expect("GET", f"/v1/decisions/{did}", 200)
            self.assertEqual(
                (rec["decision_id"], rec["label"], rec["decision"], rec["probabilities"]),
                (did, item["label"], item["decision"], item["probabilities"]))
            self.assertEqual((rec["contest_status"], rec["contests"], rec["input_stored"]),
                             ("none", [], "f16"))
            self.assertEqual(rec["effective_outcome"],
                             {"status": "original", "label": item["label"],
                              "decision": item["decision"], "decided_by": "automated", "contest_id": None})
            self.assertIsNotNone(rec["chain"])
            st = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
            self.assertEqual((st["puid"], st["pgcld"]["decision_in_force"],
                              st["automated_decision"]),
                             (did, item["decision"], "AUTOMATED_DECISION_FULLY"))
        block = results[0]
        # lists: paging, every filter
        page = self.expect("GET", "/v1/decisions" + query(limit=2), 200)
        self.assertEqual(len(page["decisions"]), 2)
        self.assertIsNotNone(page["next_cursor"])
        more = self.expect("GET", "/v1/decisions" + query(limit=2, cursor=page["next_cursor"]), 200)
        self.assertLess(more["decisions"][0]["seq"], page["decisions"][-1]["seq"])
        rec = self.expect("GET", f"/v1/decisions/{block['decision_id']}", 200)
        since = rec["created_at"]
        everything = self.expect("GET", "/v1/decisions" + query(
            model="tiny", version="1", label=block["label"], decision="block", item_id="reads-0",
            request_id=rec["request_id"], since=since, until=H.timestamp(86400), contest="none",
            limit=1000), 200)
        self.assertEqual([x["decision_id"] for x in everything["decisions"]],
                         [block["decision_id"]])
        self.assertIsNone(everything["next_cursor"])
        for contest in ("open", "resolved", "contested", "none"):
            self.expect("GET", "/v1/decisions" + query(contest=contest, limit=5), 200)
        self.expect("GET", "/v1/decisions" + query(since="2026-01-01T01:00:00+01:00"), 200)
        # errors
        cursor = page["next_cursor"]
        tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        self.bad_queries("/v1/decisions", [
            ("colour=red", "invalid_request", "colour"),
            ("label=pos&label=neg", "invalid_request", "label"),
            ("limit=0", "invalid_request", "limit"),
            ("limit=1001", "invalid_request", "limit"),
            ("limit=ten", "invalid_request", "limit"),
            ("label=", "invalid_request", "label"),
            ("decision=maybe", "invalid_request", "decision"),
            ("contest=maybe", "invalid_request", "contest"),
            ("version=1", "invalid_request", "version"),
            ("since=2026-11-21", "invalid_request", "since"),
            ("since=2026-11-21T10:00:00Z&until=2026-11-20T10:00:00Z", "invalid_request", "until"),
            ("cursor=garbage", "invalid_cursor", "cursor"),
            (f"cursor={tampered}", "invalid_cursor", "cursor"),
            ("cursor=", "invalid_cursor", "cursor"),
        ])
        for path in (f"/v1/decisions/{block['decision_id']}",
                     f"/v1/decisions/{block['decision_id']}/statement"):
            body = self.expect("GET", path + "?verbose=1", 400, "invalid_request")
            self.assertEqual(body["error"]["field"], "verbose")
            unknown = path.replace(block["decision_id"], REVIEW_UNKNOWN_ID)
            self.expect("GET", unknown, 404, "decision_not_found")
            self.expect("GET", path.replace(block["decision_id"], "x" * 130), 404, "not_found")
            self.expect("DELETE", path, 405, "method_not_allowed")
            self.expect_auth_errors("GET", path, forbidden_roles=("scorer", "admin"))
        self.expect("POST", "/v1/decisions", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/decisions", forbidden_roles=("scorer", "admin"))
        self.assertEqual(d.get("/v1/decisions", key=self.second).status, 200)

    # ------------------------------------------------------------------ contests and resolutions
    def test_contests_and_resolutions(self):
        d = self.daemon
        reviewer = d.keys["reviewer"]
        item, other, third = self.score(3, 51, "contest")
        did = item["decision_id"]
        path = f"/v1/decisions/{did}/contests"
        # validation before the rules
        for body, field in (({}, "reason"), ({"reason": ""}, "reason"),
                            ({"reason": "x" * 2001}, "reason"), ({"reason": 3}, "reason"),
                            ({"reason": "r", "extra": 1}, "extra")):
            with self.subTest(body=body):
                err = self.expect("POST", path, 400, "invalid_request", body)
                self.assertEqual(err["error"]["field"], field)
        self.expect("POST", path, 400, "invalid_request", ["r"])
        self.expect("POST", path, 400, "invalid_json", b'{"reason": ')
        self.expect("POST", path, 415, "unsupported_media_type", {"reason": "r"},
                    content_type="text/plain")
        self.too_large("POST", path)
        self.expect("POST", f"/v1/decisions/{REVIEW_UNKNOWN_ID}/contests", 404,
                    "decision_not_found", {"reason": "r"})
        self.expect("POST", f"/v1/decisions/{'x' * 130}/contests", 404, "not_found",
                    {"reason": "r"})
        self.expect("GET", path, 405, "method_not_allowed")
        self.expect_auth_errors("POST", path, {"reason": "r"}, forbidden_roles=("scorer", "admin"))
        # filing
        filed = self.expect("POST", path, 201, body={"reason": "a quotation, not abuse"})
        cid = filed["contest_id"]
        self.assertEqual(
            (filed["decision_id"], filed["status"], filed["filed_by"], filed["window_days"]),
            (did, "open", f"test-reviewer ({reviewer[:14]})", 180))
        self.expect("POST", path, 409, "contest_open", {"reason": "again"}, key=self.second)
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contest_status"], rec["effective_outcome"]["status"],
                          rec["effective_outcome"]["contest_id"]), ("open", "contested", cid))
        self.assertEqual(rec["contests"][0]["filer_key_id"], reviewer[:14])
        # the open queue, paged
        for x in (other, third):
            self.expect("POST", f"/v1/decisions/{x['decision_id']}/contests", 201,
                        body={"reason": "q"})
        queue = self.expect("GET", "/v1/contests", 200)
        mine = [c for c in queue["contests"] if c["contest_id"] == cid]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["resolution"], mine[0]["overdue"], mine[0]["item_id"]),
                         (None, False, "contest-0"))
        page = self.expect("GET", "/v1/contests" + query(status="open", limit=1), 200)
        self.assertIsNotNone(page["next_cursor"])
        self.expect("GET", "/v1/contests" + query(limit=1, cursor=page["next_cursor"]), 200)
        decisions_cursor = self.expect("GET", "/v1/decisions?limit=1", 200)["next_cursor"]
        self.bad_queries("/v1/contests", [
            ("status=maybe", "invalid_request", "status"),
            ("status=open&status=resolved", "invalid_request", "status"),
            ("limit=5000", "invalid_request", "limit"),
            ("colour=red", "invalid_request", "colour"),
            ("cursor=garbage", "invalid_cursor", "cursor"),
            (f"cursor={decisions_cursor}", "invalid_cursor", "cursor"),
            (f"status=resolved&cursor={page['next_cursor']}", "invalid_cursor", "cursor"),
        ])
        self.expect("POST", "/v1/contests", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/contests", forbidden_roles=("scorer", "admin"))
        # resolving
        rpath = f"/v1/contests/{cid}/resolution"
        self.expect("POST", rpath, 403, "filer_cannot_resolve",
                    {"outcome": "upheld", "note": "mine"})
        self.expect("POST", rpath, 422, "invalid_label",
                    {"outcome": "overturned", "corrected_label": "nope", "note": "n"},
                    key=self.second)
        for body, field in (({"outcome": "maybe", "note": "n"}, "outcome"),
                            ({"outcome": "upheld"}, "note"), ({"note": "n"}, "outcome"),
                            ({"outcome": "upheld", "corrected_label": "pos", "note": "n"},
                             "corrected_label"),
                            ({"outcome": "upheld", "note": "n", "extra": 1}, "extra")):
            with self.subTest(body=body):
                err = self.expect("POST", rpath, 400, "invalid_request", body, key=self.second)
                self.assertEqual(err["error"]["field"], field)
        self.expect("POST", rpath, 400, "invalid_json", b"{", key=self.second)
        self.expect("POST", rpath, 415, "unsupported_media_type",
                    {"outcome": "upheld", "note": "n"}, key=self.second,
                    content_type="text/plain")
        self.too_large("POST", rpath, key=self.second)
        self.expect("POST", f"/v1/contests/{REVIEW_UNKNOWN_ID}/resolution", 404,
                    "contest_not_found", {"outcome": "upheld", "note": "n"}, key=self.second)
        self.expect("POST", f"/v1/contests/{'x' * 130}/resolution", 404, "not_found",
                    {"outcome": "upheld", "note": "n"}, key=self.second)
        self.expect("GET", rpath, 405, "method_not_allowed")
        self.expect_auth_errors("POST", rpath, {"outcome": "upheld", "note": "n"},
                                forbidden_roles=("scorer", "admin"))
        corrected = "neg" if item["label"] == "pos" else "pos"
        res = self.expect("POST", rpath, 201, key=self.second,
                          body={"outcome": "overturned", "corrected_label": corrected,
                                "note": "context shows a quotation"})
        self.assertEqual(
            (res["contest_id"], res["decision_id"], res["corrected_label"], res["resolved_by"]),
            (cid, did, corrected, f"second reviewer ({self.second[:14]})"))
        self.expect("POST", rpath, 409, "already_resolved", {"outcome": "upheld", "note": "n"},
                    key=self.second)
        upheld = self.expect("POST", f"/v1/contests/{self.open_contest(other)}/resolution", 201,
                             body={"outcome": "upheld", "note": "fine", "corrected_label": None},
                             key=self.second)
        self.assertIsNone(upheld["corrected_label"])
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contest_status"], rec["effective_outcome"]["status"],
                          rec["effective_outcome"]["label"]), ("resolved", "overturned", corrected))
        self.assertEqual(rec["contests"][0]["resolution"]["resolver_key_id"], self.second[:14])
        st = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
        self.assertEqual((st["automated_decision"], st["pgcld"]["effective_status"]),
                         ("AUTOMATED_DECISION_PARTIALLY", "overturned"))
        resolved = self.expect("GET", "/v1/contests" + query(status="resolved"), 200)
        # most recently resolved first
        self.assertEqual(resolved["contests"][0]["contest_id"], upheld["contest_id"])
        self.assertIn(cid, [c["contest_id"] for c in resolved["contests"]])
        # after a resolution a new contest may be filed
        self.expect("POST", path, 201, body={"reason": "new evidence"}, key=self.second)
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((len(rec["contests"]), rec["contest_status"]), (2, "open"))

    def open_contest(self, item):
        rec = self.expect("GET", f"/v1/decisions/{item['decision_id']}", 200)
        return [c["contest_id"] for c in rec["contests"] if c["resolution"] is None][0]

    # ------------------------------------------------------------------ re-scoring
    def test_rescore(self):
        (item,) = self.score(1, 61, "rescore")
        path = f"/v1/decisions/{item['decision_id']}/rescore"
        body = self.expect("POST", path, 200)
        self.assertEqual((body["decision_id"], body["input_precision"], body["original"]["label"],
                          body["original"]["probabilities"], body["rescored"]["model_version"]),
                         (item["decision_id"], "float16", item["label"], item["probabilities"],
                          "1"))
        self.expect("POST", f"/v1/decisions/{REVIEW_UNKNOWN_ID}/rescore", 404, "decision_not_found")
        self.expect("POST", f"/v1/decisions/{'x' * 130}/rescore", 404, "not_found")
        self.expect("GET", path, 405, "method_not_allowed")
        self.expect_auth_errors("POST", path, forbidden_roles=("scorer", "admin"))

    # ------------------------------------------------------------------ export and figures
    def test_export(self):
        d = self.daemon
        mine = {x["decision_id"] for x in self.score(3, 71, "export")}
        r = self.send("GET", "/v1/audit/export")
        self.assertEqual(r.status, 200, r)
        docs = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.assertEqual(r.status, 200, r)
        rows = csv_rows(self.check_live("GET", "/v1/audit/export", r), EXPORT_COLUMNS)
        export_schema = SPEC.inline({"$ref": "#/components/schemas/ExportRecord"})
        from_csv = [csv_export_record(row) for row in rows]
        for rec in from_csv:
            self.assertFalse(validation_errors(export_schema, rec), rec)
        self.assertEqual(from_csv, docs, "the CSV and NDJSON exports differ")
        self.assertTrue(mine <= {x["decision_id"] for x in docs})
        self.assertEqual([(x["created_at"], x["seq"]) for x in docs],
                         sorted((x["created_at"], x["seq"]) for x in docs))
        since = min(x["created_at"] for x in docs if x["decision_id"] in mine)
        r = self.send("GET", "/v1/audit/export" + query(since=since, until=H.timestamp(86400),
                                                        format="ndjson"), key=d.keys["admin"])
        self.assertEqual(r.status, 200, r)
        window = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        self.assertTrue(mine <= {x["decision_id"] for x in window})
        for fmt, empty in (("ndjson", b""), ("csv", (",".join(EXPORT_COLUMNS) + "\r\n").encode())):
            r = self.send("GET", "/v1/audit/export" + query(since=H.timestamp(86400),
                                                            format=fmt))
            self.assertEqual((r.status, r.body), (200, empty))
            self.check_live("GET", "/v1/audit/export", r)
        self.bad_queries("/v1/audit/export", [
            ("format=xml", "invalid_request", "format"),
            ("since=soon", "invalid_request", "since"),
            ("since=2026-11-21T10:00:00Z&until=2026-11-20T10:00:00Z", "invalid_request", "until"),
            ("limit=1", "invalid_request", "limit"),
            ("format=csv&format=csv", "invalid_request", "format"),
        ])
        self.expect("POST", "/v1/audit/export", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/export", forbidden_roles=("scorer",))

    def test_stats(self):
        d = self.daemon
        self.score(2, 72, "stats")
        stats = self.expect("GET", "/v1/audit/stats", 200)
        self.assertEqual((stats["since"], stats["until"]), (None, None))
        self.assertEqual(stats["decisions"]["total"], d.count())
        self.assertEqual(sum(stats["decisions"]["by_decision"].values()), d.count())
        tomorrow = H.timestamp(86400)  # after every row, on any day (a fixed future date is not)
        window = self.expect("GET", "/v1/audit/stats" + query(since="2026-01-01T01:00:00+01:00",
                                                              until=tomorrow),
                             200, key=d.keys["admin"])
        self.assertEqual((window["since"], window["until"]), ("2026-01-01T00:00:00.000000Z", tomorrow))
        empty = self.expect("GET", "/v1/audit/stats" + query(since=tomorrow), 200)
        self.assertEqual((empty["decisions"]["total"],
                          empty["contests"]["median_resolution_seconds"]), (0, None))
        self.bad_queries("/v1/audit/stats", [
            ("until=2026-13-01T00:00:00Z", "invalid_request", "until"),
            ("format=csv", "invalid_request", "format"),
            ("since=", "invalid_request", "since"),
        ])
        self.expect("PUT", "/v1/audit/stats", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/stats", forbidden_roles=("scorer",))

    # ------------------------------------------------------------------ the chain
    def test_verify_and_checkpoints(self):
        d = self.daemon
        admin = d.keys["admin"]
        self.score(2, 81, "chain")
        report = self.expect("GET", "/v1/audit/verify", 200)
        self.assertTrue(report["intact"], report)
        self.assertEqual(report["events"], report["head_seq"])
        self.assertEqual(self.expect("GET", "/v1/audit/verify", 200, key=admin)["intact"], True)
        self.expect("POST", "/v1/audit/verify", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/verify", forbidden_roles=("scorer",))
        path = "/v1/audit/checkpoints"
        cp = self.expect("POST", path, 201, key=admin)  # no body
        if cp.get("format") == "pgcld-fleet-checkpoint":  # the PostgreSQL store: every writer's head
            heads = sum(w["head_seq"] for w in cp["writers"])
            self.assertGreaterEqual(heads, report["head_seq"])
            self.assertEqual((cp["file"], cp["public_key"]),
                             (os.path.join(self.cp_dir, f"fleet-checkpoint-{heads}.json"), self.public_key))
        else:
            self.assertGreaterEqual(cp["head_seq"], report["head_seq"])
            self.assertEqual((cp["file"], cp["public_key"]),
                             (os.path.join(self.cp_dir, f"checkpoint-{cp['head_seq']}.json"),
                              self.public_key))
        cp = self.expect("POST", path, 201, body={}, key=admin)
        with open(cp["file"], encoding="utf-8") as f:
            self.assertEqual(json.load(f)["signature"], cp["signature"])
        p = d.cli("audit", "verify", "--db", d.db_path, "--checkpoint", cp["file"], "--public-key",
                  self.public_key, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.expect("POST", path, 400, "invalid_request", {"force": True}, key=admin)
        self.expect("POST", path, 400, "invalid_request", [], key=admin)
        self.expect("POST", path, 400, "invalid_json", b"{", key=admin)
        self.expect("POST", path, 415, "unsupported_media_type", {}, key=admin,
                    content_type="text/plain")
        self.too_large("POST", path, key=admin)
        self.expect("GET", path, 405, "method_not_allowed", key=admin)
        self.expect_auth_errors("POST", path, {}, forbidden_roles=("scorer", "reviewer"))

    # ------------------------------------------------------------------ the test can fail
    def test_validation_rejects_wrong_review_bodies(self):
        """Negative self-check for the reviewer schemas: live bodies pass, mutated ones do not."""
        d = self.daemon

        def mutated(good, fn):
            b = copy.deepcopy(good)
            fn(b)
            return b

        def assert_rejected(schema, cases):
            self.assertTrue(cases)
            for what, body in cases.items():
                with self.subTest(case=what):
                    self.assertTrue(validation_errors(schema, body),
                                    f"{what}: a wrong body passed validation")

        def schema(path, method, status):
            return SPEC.schema_for(SPEC.response(path, method, status))

        block, review, allow = self.score_golden("selfcheck")
        did = block["decision_id"]
        filed = self.expect("POST", f"/v1/decisions/{did}/contests", 201, body={"reason": "r"})
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        s = schema("/v1/decisions/{id}", "get", 200)
        self.assertFalse(validation_errors(s, rec))
        assert_rejected(s, {
            "contests while contest_status is none": mutated(
                rec, lambda b: b.__setitem__("contest_status", "none")),
            "open contest but original outcome": mutated(
                rec, lambda b: b["effective_outcome"].update(status="original", contest_id=None)),
            "contested without contest_id": mutated(
                rec, lambda b: b["effective_outcome"].__setitem__("contest_id", None)),
            "bad outcome status": mutated(
                rec, lambda b: b["effective_outcome"].__setitem__("status", "pending")),
            "short chain hash": mutated(rec, lambda b: b["chain"].__setitem__("hash", "abc")),
            "input_stored f64": mutated(rec, lambda b: b.__setitem__("input_stored", "f64")),
            "input member": mutated(rec, lambda b: b.__setitem__("input", "AAAA")),
            "no provenance": mutated(rec, lambda b: b.pop("provenance")),
            "filed_by not an actor": mutated(
                rec, lambda b: b["contests"][0].__setitem__("filed_by", "someone")),
            "resolution of a string": mutated(
                rec, lambda b: b["contests"][0].__setitem__("resolution", "upheld")),
        })
        s = schema("/v1/decisions/{id}/statement", "get", 200)
        statements = {
            x["decision"]: self.expect("GET", f"/v1/decisions/{x['decision_id']}/statement", 200)
            for x in (block, review, allow)}
        for st in statements.values():
            self.assertFalse(validation_errors(s, st))
        assert_rejected(s, {
            "block without removal": mutated(
                statements["block"], lambda b: b.__setitem__("decision_visibility", [])),
            "review without visibility_other": mutated(
                statements["review"], lambda b: b.pop("decision_visibility_other")),
            "allow with a restriction": mutated(
                statements["allow"], lambda b: b["pgcld"].__setitem__("restriction", True)),
            "visibility_other on a removal": mutated(
                statements["block"], lambda b: b.__setitem__("decision_visibility_other", "x")),
            "other category": mutated(statements["block"], lambda b: b.__setitem__(
                "category", "STATEMENT_CATEGORY_SCAMS")),
            "bad application_date": mutated(
                statements["allow"], lambda b: b.__setitem__("application_date", "21/11/2026")),
            "no pgcld notes": mutated(statements["allow"], lambda b: b.pop("pgcld")),
            "item id leaked": mutated(statements["allow"], lambda b: b.__setitem__("item_id", "x")),
        })
        s = schema("/v1/decisions/{id}/contests", "post", 201)
        assert_rejected(s, {
            "status resolved": mutated(filed, lambda b: b.__setitem__("status", "resolved")),
            "window_days 0": mutated(filed, lambda b: b.__setitem__("window_days", 0)),
            "uuid v4 contest_id": mutated(filed, lambda b: b.__setitem__(
                "contest_id", "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f")),
        })
        queue = self.expect("GET", "/v1/contests", 200)
        s = schema("/v1/contests", "get", 200)
        upheld = {"resolved_at": "2026-11-21T11:47:38.885568Z", "resolved_by": "anonymous",
                  "resolver_key_id": None, "outcome": "upheld", "corrected_label": None,
                  "note": "n"}
        assert_rejected(s, {
            "overdue as text": mutated(
                queue, lambda b: b["contests"][0].__setitem__("overdue", "no")),
            "resolved yet overdue": mutated(
                queue, lambda b: b["contests"][0].update(overdue=True, resolution=upheld)),
            "upheld with a corrected label": mutated(queue, lambda b: b["contests"][0].__setitem__(
                "resolution", dict(upheld, corrected_label="neg"))),
            "short cursor": mutated(queue, lambda b: b.__setitem__("next_cursor", "abc")),
            "no next_cursor": mutated(queue, lambda b: b.pop("next_cursor")),
        })
        resolved = self.expect("POST", f"/v1/contests/{filed['contest_id']}/resolution", 201,
                               body={"outcome": "upheld", "note": "n"}, key=self.second)
        assert_rejected(schema("/v1/contests/{id}/resolution", "post", 201), {
            "upheld with a corrected label": mutated(
                resolved, lambda b: b.__setitem__("corrected_label", "neg")),
            "bad outcome": mutated(resolved, lambda b: b.__setitem__("outcome", "maybe")),
            "empty note": mutated(resolved, lambda b: b.__setitem__("note", "")),
        })
        rescored = self.expect("POST", f"/v1/decisions/{did}/rescore", 200)
        assert_rejected(schema("/v1/decisions/{id}/rescore", "post", 200), {
            "float64 input": mutated(
                rescored, lambda b: b.__setitem__("input_precision", "float64")),
            "original without label": mutated(rescored, lambda b: b["original"].pop("label")),
            "same_label as text": mutated(rescored, lambda b: b.__setitem__("same_label", "yes")),
        })
        stats = self.expect("GET", "/v1/audit/stats", 200)
        assert_rejected(schema("/v1/audit/stats", "get", 200), {
            "by_decision without block": mutated(
                stats, lambda b: b["decisions"]["by_decision"].pop("block")),
            "rate > 1": mutated(stats, lambda b: b["contests"]["overturn_rate_by_model_version"][0]
                                .__setitem__("rate", 1.5)),
            "rate without resolutions": mutated(
                stats, lambda b: b["contests"]["overturn_rate_by_model_version"][0].update(
                    resolved=0, overturned=0)),
            "since not UTC": mutated(
                stats, lambda b: b.__setitem__("since", "2026-01-01T00:00:00+01:00")),
        })
        report = self.expect("GET", "/v1/audit/verify", 200)
        assert_rejected(schema("/v1/audit/verify", "get", 200), {
            "intact with a reason": mutated(report, lambda b: b.__setitem__("reason", "x")),
            "not intact without first_bad_seq": mutated(
                report, lambda b: b.__setitem__("intact", False)),
            "empty chain with a head hash": mutated(report, lambda b: b.update(head_seq=0, head_hash="a" * 64)),
            "negative events": mutated(report, lambda b: b.__setitem__("events", -1)),
        })
        cp = self.expect("POST", "/v1/audit/checkpoints", 201, key=d.keys["admin"])
        assert_rejected(schema("/v1/audit/checkpoints", "post", 201), {
            "short signature": mutated(
                cp, lambda b: b.__setitem__("signature", b["signature"][:-2])),
            "upper-case public key": mutated(
                cp, lambda b: b.__setitem__("public_key", b["public_key"].upper())),
            "other file name": mutated(cp, lambda b: b.__setitem__("file", "/tmp/cp.json")),
            "head_seq 0": mutated(cp, lambda b: b.__setitem__("head_seq", 0)),
        })
        # the export: a wrong line or a wrong CSV header fails the live check
        r = self.send("GET", "/v1/audit/export")
        docs = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        bad = copy.deepcopy(docs[0])
        bad["contest_status"] = "maybe"
        for body in (json.dumps(bad).encode() + b"\n", r.body.rstrip(b"\n"), b"not json\n"):
            with self.assertRaises(AssertionError):
                self.check_live("GET", "/v1/audit/export", H.Response(200, r.headers, body))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.check_live("GET", "/v1/audit/export", r)
        for body in (r.body.replace(b"contest_status", b"status", 1),
                     r.body.replace(b"\r\n", b"\n"), r.body + b"x,1\r\n"):
            with self.assertRaises(AssertionError):
                self.check_live("GET", "/v1/audit/export", H.Response(200, r.headers, body))
        headers = r.headers.__class__()
        for k, v in r.headers.items():
            if k.lower() != "content-disposition":
                headers[k] = v
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/v1/audit/export", H.Response(200, headers, r.body))
        # error schemas: a code documented under another status or another operation
        for (path, method, status), body in {
            ("/v1/decisions/{id}/contests", "post", 409): error_body("already_resolved"),
            ("/v1/decisions/{id}/contests", "post", 422): error_body("invalid_label"),
            ("/v1/decisions/{id}/contests", "post", 404): error_body("contest_not_found"),
            ("/v1/contests/{id}/resolution", "post", 409): error_body("contest_open"),
            ("/v1/contests/{id}/resolution", "post", 404): error_body("decision_not_found"),
            ("/v1/contests/{id}/resolution", "post", 403): error_body("unauthorized"),
            ("/v1/decisions/{id}/rescore", "post", 409): error_body("contest_open"),
            ("/v1/decisions/{id}/rescore", "post", 503): error_body("overloaded"),
            ("/v1/decisions", "get", 400): error_body("decision_not_found"),
            ("/v1/decisions/{id}", "get", 400): error_body("invalid_cursor"),
            ("/v1/audit/stats", "get", 400): error_body("invalid_cursor"),
            ("/v1/audit/checkpoints", "post", 409): error_body("checkpoint_failed"),
            ("/v1/audit/checkpoints", "post", 500): error_body("empty_chain"),
            ("/v1/audit/verify", "get", 503): error_body("overloaded"),
            ("/v1/score", "post", 400): error_body("invalid_cursor"),
            ("/v1/score", "post", 403): error_body("filer_cannot_resolve"),
        }.items():
            with self.subTest(case=f"{method} {path} {status} {body['error']['code']}"):
                self.assertTrue(validation_errors(schema(path, method, status), body))
        # input_incompatible is the re-score's 409; dimension_mismatch stays the scoring 400
        self.assertFalse(validation_errors(schema("/v1/decisions/{id}/rescore", "post", 409),
                                           error_body("input_incompatible")))
        self.assertTrue(validation_errors(schema("/v1/decisions/{id}/rescore", "post", 409),
                                          error_body("dimension_mismatch")))
        self.assertFalse(validation_errors(schema("/v1/score", "post", 400),
                                           error_body("dimension_mismatch")))


class LiveReviewStatesTest(LiveValidationMixin, unittest.TestCase):
    """--auth off with a signing key: the answers that need a particular state of the daemon or
    its database, in order: an empty chain (verify, 409 empty_chain), anonymous contests and
    resolutions, 409 input_incompatible after activating a version of another D, a decision
    outside the contest window and without a stored input (422 contest_window_closed,
    409 input_not_stored, and a chain that is no longer intact), 500 checkpoint_failed, and
    503 not_ready for a model that is gone after a restart."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-states-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.root = os.path.join(cls.tmp, "models")
        tiny_copy(cls.root, "tiny", "1")
        tiny_copy(cls.root, "tiny", "0wide", src=("toxicity", "1"))  # D = 1024; sorts below 1
        tiny_copy(cls.root, "gone", "1")
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=cls.root, default_model="tiny", auth=False,
                     args=["--signing-key", cls.signing_key, "--checkpoint-dir", cls.tmp])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", cls.signing_key)
        d.start()
        cls.daemon = d

    def send(self, method, path, body=None, key="", content_type="application/json"):
        return super().send(method, path, body, key=key, content_type=content_type)

    def test_states(self):
        d = self.daemon
        # nothing recorded yet: an empty chain, empty lists
        report = self.expect("GET", "/v1/audit/verify", 200)
        if H.ON_POSTGRES:  # the writer's chain begins with its genesis entry when it starts
            self.assertEqual((report["intact"], report["events"], report["head_seq"], len(report["writers"])),
                             (True, 1, 1, 1), report)
        else:
            self.assertEqual(report, {"intact": True, "events": 0, "first_bad_seq": None,
                                      "reason": None, "head_seq": 0, "head_hash": None, "archive_cut_seq": None,
                                      "archived_rows": 0})
            self.expect("POST", "/v1/audit/checkpoints", 409, "empty_chain")
        self.assertEqual(self.expect("GET", "/v1/decisions", 200),
                         {"decisions": [], "next_cursor": None})
        self.assertEqual(self.expect("GET", "/v1/contests", 200),
                         {"contests": [], "next_cursor": None})
        stats = self.expect("GET", "/v1/audit/stats", 200)
        self.assertEqual((stats["decisions"]["total"], stats["contests"]["filed"]), (0, 0))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.assertEqual(csv_rows(self.check_live("GET", "/v1/audit/export", r), EXPORT_COLUMNS),
                         [])
        # anonymous contests and resolutions
        r = d.score({"items": tiny_b64_items(1, 91, "st")}, key="")
        self.assertEqual(r.status, 200, r)
        did = r.json["results"][0]["decision_id"]
        r = d.score({"model": "gone", "items": tiny_b64_items(1, 92, "gone")}, key="")
        self.assertEqual(r.status, 200, r)
        gone_did = r.json["results"][0]["decision_id"]
        filed = self.expect("POST", f"/v1/decisions/{did}/contests", 201, body={"reason": "r"})
        self.assertEqual(filed["filed_by"], "anonymous")
        resolved = self.expect("POST", f"/v1/contests/{filed['contest_id']}/resolution", 201,
                               body={"outcome": "upheld", "note": "n"})
        self.assertEqual((resolved["resolved_by"], resolved["corrected_label"]),
                         ("anonymous", None))
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contests"][0]["filer_key_id"],
                          rec["contests"][0]["resolution"]["resolver_key_id"],
                          rec["effective_outcome"]["status"]), (None, None, "upheld"))
        statement = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
        self.assertEqual(statement["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")
        cp = self.expect("POST", "/v1/audit/checkpoints", 201)
        self.assertTrue(os.path.isfile(cp["file"]))
        # the active version takes another dimension than the stored input
        self.expect("POST", "/v1/admin/models/tiny/activate", 200, body={"version": "0wide"})
        body = self.expect("POST", f"/v1/decisions/{did}/rescore", 409, "input_incompatible")
        self.assertIn("1024", body["error"]["message"])
        # a decision older than the contest window and recorded without its input, written behind
        # the daemon's back (so not chained either)
        H.db_insert_events(
            d.db_path, "decisions",
            "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
            " model_version, model_sha256, label, label_index, probabilities, toxicity,"
            " decision, policy, t_review, t_block, vector, input_sha256, latency_us) SELECT ?,"
            " '2020-01-01T00:00:00.000000Z', request_id, 'old', model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy,"
            " t_review, t_block, vector, input_sha256, latency_us FROM decisions"
            " WHERE decision_id = ?",
            [(OLD_DECISION_ID, did)])
        self.expect("POST", f"/v1/decisions/{OLD_DECISION_ID}/contests", 422,
                    "contest_window_closed", {"reason": "late"})
        self.expect("POST", f"/v1/decisions/{OLD_DECISION_ID}/rescore", 409, "input_not_stored")
        rec = self.expect("GET", f"/v1/decisions/{OLD_DECISION_ID}", 200)
        self.assertEqual((rec["input_stored"], rec["chain"]), (None, None))
        report = self.expect("GET", "/v1/audit/verify", 200)
        self.assertFalse(report["intact"])
        self.assertEqual(report["first_bad_seq"], report["head_seq"] + 1)
        self.assertIn("not in the chain", report["reason"])
        # a signing key readable by others is refused when it is used
        os.chmod(self.signing_key, 0o644)
        try:
            body = self.expect("POST", "/v1/audit/checkpoints", 500, "checkpoint_failed")
            self.assertIn("chmod 600", body["error"]["message"])
        finally:
            os.chmod(self.signing_key, 0o600)
        # the decision's model is gone after a restart: not ready
        self.assertEqual(d.stop(), 0)
        shutil.rmtree(os.path.join(self.root, "gone"))
        d.start()
        r = self.send("POST", f"/v1/decisions/{gone_did}/rescore")
        self.assertEqual((r.status, r.error_code()), (503, "not_ready"), r)
        self.assertEqual(r.headers.get("Retry-After"), "5")
        self.check_live("POST", f"/v1/decisions/{gone_did}/rescore", r)


def tearDownModule():
    print_validated_responses()


if __name__ == "__main__":
    unittest.main(verbosity=2)
