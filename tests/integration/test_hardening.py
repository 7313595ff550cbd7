"""Issue 13: the classes of input an outside probe answered wrongly, against a real pgcld over
loopback HTTP with real SQLite files. The framing and header-field classes are raw-socket cases in
tests/bad_inputs/ (test_bad_inputs); this file holds the classes that need state or several steps:

1. re-scoring an input float16 cannot hold (stored as float32 now; a re-score that cannot be
   done says so);
2. Idempotency-Key fingerprints everything that determines the answer, on /v1/score and /v2 infer;
3. CSV export neutralises formulas (OWASP), in every Unicode form that folds to one (issue 27);
4. a percent-encoded NUL never truncates a name (versions, models);
5. metrics count unanswered requests under their own label, never as 500;
6. the effective outcome is the latest resolution's until a later one replaces it;
7. cursors belong to their filters;
8. smaller items: paths in error messages, shadow reports and attachments, uploads to new models.

Issue 27's classes that need a running daemon:
9. a header's value is evaluated without the optional whitespace (SP, HTAB) around it (RFC 9110
   §5.5), for every header pgcld reads, and in the Idempotency-Key fingerprint; other whitespace is
   part of the value;
10. an integer parameter (query or header) that is malformed and one that is out of range are told
    apart the same way everywhere (tree sizes: tests/integration/test_consistency.py).

Run: /usr/bin/python3 tests/integration/test_hardening.py (PGCLD_BIN selects the binary).
"""
import base64
import csv
import hashlib
import io
import json
import os
import socket
import struct
import sys
import unicodedata
import unittest
import urllib.parse

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

TINY = "tiny_binary"
D = 32
OCTETS = "application/octet-stream"


def octets(Z):
    return np.asarray(Z, dtype="<f4").tobytes()


def q(**params):
    return "?" + urllib.parse.urlencode(params) if params else ""


def counter(d, series):
    """A counter of d's /metrics, 0 when the series is absent."""
    return H.parse_metrics(d.get("/metrics", key="").body.decode()).get(series, 0.0)


class RescoreBeyondFloat16Test(unittest.TestCase):
    """Finding 1: a finite value above 65504 was stored as float16 infinity, and the re-score then
    answered 200 with no probabilities and "same_label": true."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)  # --store-inputs float16

    def rescore(self, did):
        return self.daemon.post(f"/v1/decisions/{did}/rescore", key=self.daemon.keys["reviewer"])

    def test_beyond_float16_is_stored_as_float32_and_rescores_exactly(self):
        d = self.daemon
        z = H.random_embeddings(3, D, 5)
        z[0, 3] = 70000.0    # finite in float32, infinite in float16
        z[1, 7] = -65520.0   # rounds to -infinity in float16
        z[2, 0] = 65504.0    # the largest float16: stays float16
        r = d.score({"items": H.b64_items(z, "big")})
        self.assertEqual(r.status, 200, r)
        ids = [x["decision_id"] for x in r.json["results"]]
        rows = d.rows_for(ids)
        self.assertEqual([rows[i]["input_dtype"] for i in ids], ["f32", "f32", "f16"])
        for k, did in enumerate(ids):
            stored = np.frombuffer(rows[did]["input"], dtype="<f4" if k < 2 else "<f2").astype(np.float32)
            self.assertTrue(np.all(np.isfinite(stored)))
            if k < 2:  # float32 rows hold exactly what was scored
                np.testing.assert_array_equal(stored, z[k])
            rs = self.rescore(did)
            self.assertEqual(rs.status, 200, rs)
            original, again = rs.json["original"], rs.json["rescored"]
            self.assertEqual(set(again["probabilities"]), {"neg", "pos"}, rs)
            self.assertIn("toxicity", again)
            self.assertEqual(rs.json["input_precision"], "float32" if k < 2 else "float16")
            if k < 2:  # the same input through the same version: the same answer
                self.assertEqual(again["probabilities"], original["probabilities"])
                self.assertTrue(rs.json["same_label"] and rs.json["same_decision"])

    def forged_row(self, dtype, values):
        """A copy of a real decision row (its model and version) with another id and stored input,
        written straight into the database: what a row stored by an older pgcld looks like."""
        d = self.daemon
        r = d.score({"items": H.json_items(H.random_embeddings(1, D, 9), "base")})
        self.assertEqual(r.status, 200, r)
        src = r.json["results"][0]["decision_id"]
        did = src[:-12] + "%012x" % (int(src[-12:], 16) ^ 0xABCDEF)
        blob = np.asarray(values, dtype="<f2" if dtype == "f16" else "<f4").tobytes()
        cols = [c["name"] for c in d.query("PRAGMA table_info(decisions)") if c["name"] != "seq"]
        import sqlite3
        with sqlite3.connect(d.db_path) as con:
            con.execute(f"INSERT INTO decisions ({', '.join(cols)}) SELECT "
                        + ", ".join("?" if c in ("decision_id", "input", "input_dtype") else c for c in cols)
                        + " FROM decisions WHERE decision_id = ?",
                        [v for c in cols for v in ((did,) if c == "decision_id" else (blob,) if c == "input"
                                                   else (dtype,) if c == "input_dtype" else ())] + [src])
        return did

    def test_a_rescore_that_cannot_be_done_says_so(self):
        inf_row = np.full(D, 0.125, dtype=np.float32)
        inf_row[4] = np.inf  # an older pgcld stored 70000 as float16 infinity
        did = self.forged_row("f16", inf_row)
        r = self.rescore(did)
        self.assertEqual((r.status, r.error_code()), (409, "input_not_rescorable"), r)
        self.assertIn(did, r.json["error"]["message"])
        self.assertIn("not the input that was scored", r.json["error"]["message"])
        # a stored input the active version gives no finite output for
        did = self.forged_row("f32", np.full(D, 3e38, dtype=np.float32))
        r = self.rescore(did)
        self.assertEqual((r.status, r.error_code()), (409, "input_not_rescorable"), r)
        self.assertIn("no finite output", r.json["error"]["message"])


class IdempotencyFingerprintTest(unittest.TestCase):
    """Finding 2: the replay was keyed on the body alone, and /v2 infer ignored the header."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY, "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=[TINY, "tiny_multi"], default_model=TINY)
        cls.Z = H.random_embeddings(2, D, 21)

    def octet_score(self, key, path="/v1/score", ids=None):
        headers = {"Idempotency-Key": key}
        if ids is not None:
            headers["Pgcld-Item-Ids"] = json.dumps(ids)
        return self.daemon.request("POST", path, octets(self.Z), content_type=OCTETS, headers=headers)

    def assert_refused(self, r, first):
        self.assertEqual((r.status, r.error_code()), (422, "idempotency_key_reused"), r)
        self.assertIn(first.json.get("request_id") or first.json["parameters"]["request_id"],
                      r.error()["message"])

    def test_everything_that_determines_the_answer_is_in_the_fingerprint(self):
        d = self.daemon
        first = self.octet_score("oct-1")
        self.assertEqual(first.status, 200, first)
        rows = d.count()
        again = self.octet_score("oct-1")
        self.assertEqual((again.status, again.headers.get("Idempotent-Replayed"), again.body),
                         (200, "true", first.body))
        # the same key and body, another question: the model, the ids, the vector option, the route
        for r in (self.octet_score("oct-1", "/v1/score?model=tiny_multi"),
                  self.octet_score("oct-1", ids=["x", "y"]),
                  self.octet_score("oct-1", "/v1/score?return_vector=false"),
                  self.octet_score("oct-1", f"/v1/score?model={TINY}")):
            self.assert_refused(r, first)
        self.assertEqual(d.count(), rows, "a refused retry wrote rows")
        # the same body as JSON (base64 of the same floats) is another request too
        r = d.score({"items": H.b64_items(self.Z, "")}, headers={"Idempotency-Key": "oct-1"})
        self.assert_refused(r, first)
        # with the ids sent the first time, a retry replays
        first_ids = self.octet_score("oct-2", ids=["a", "b"])
        self.assertEqual(first_ids.status, 200, first_ids)
        self.assertEqual([x["id"] for x in first_ids.json["results"]], ["a", "b"])
        self.assertEqual(self.octet_score("oct-2", ids=["a", "b"]).body, first_ids.body)
        self.assert_refused(self.octet_score("oct-2", ids=["a", "c"]), first_ids)

    def infer(self, key, model=TINY, Z=None, request_id="r1"):
        body = {"id": request_id, "inputs": [{"name": "embedding", "datatype": "FP32", "shape": [2, D],
                                              "data": (self.Z if Z is None else Z).reshape(-1).tolist()}]}
        return self.daemon.request("POST", f"/v2/models/{model}/infer", body, headers={"Idempotency-Key": key})

    def test_v2_infer_honours_the_key(self):
        d = self.daemon
        first = self.infer("v2-1")
        self.assertEqual(first.status, 200, first)
        self.assertIsNone(first.headers.get("Idempotent-Replayed"))
        rows = d.count()
        again = self.infer("v2-1")
        self.assertEqual((again.status, again.headers.get("Idempotent-Replayed"), again.body),
                         (200, "true", first.body))
        self.assertEqual(d.count(), rows, "a retried infer scored twice")
        self.assert_refused(self.infer("v2-1", model="tiny_multi"), first)
        self.assert_refused(self.infer("v2-1", Z=self.Z[::-1].copy()), first)
        self.assert_refused(self.infer("v2-1", request_id="r2"), first)
        # one key space per API key: a key used on /v2 is another request on /v1
        self.assert_refused(self.octet_score("v2-1"), first)
        self.assertEqual(d.count(), rows)
        r = d.request("POST", f"/v2/models/{TINY}/infer", {"inputs": []}, headers={"Idempotency-Key": "k" * 256})
        self.assertEqual((r.status, r.error_code(), r.error()["field"]),
                         (400, "invalid_request", "Idempotency-Key"), r)

    def test_keys_stored_before_fingerprints_still_replay(self):
        """A key stored before migration 0006 (request_sha256 NULL) is compared by its body, as it
        was when it was stored: a retry across the upgrade replays instead of failing."""
        d = self.daemon
        first = self.octet_score("old-1")
        self.assertEqual(first.status, 200, first)
        import sqlite3
        with sqlite3.connect(d.db_path) as con:
            con.execute("INSERT INTO idempotency_keys (scope, idem_key, body_sha256, request_id, answer,"
                        " created_at, expires_at) SELECT scope, 'old-2', body_sha256, request_id, answer,"
                        " created_at, expires_at FROM idempotency_keys WHERE idem_key = 'old-1'")
        self.assertIsNone(d.scalar("SELECT request_sha256 FROM idempotency_keys WHERE idem_key = 'old-2'"))
        again = self.octet_score("old-2")
        self.assertEqual((again.status, again.body), (200, first.body), again)
        r = d.request("POST", "/v1/score", octets(self.Z[:1]), content_type=OCTETS,
                      headers={"Idempotency-Key": "old-2"})
        self.assertEqual((r.status, r.error_code()), (422, "idempotency_key_reused"), r)


# Cells a spreadsheet would read as formulas, and cells it would not. Issue 27: the compatibility
# forms beyond the full-width ones (small forms, superscripts and subscripts, U+2212 and what folds
# to it) and formulas behind Unicode whitespace or invisible format characters.
FORMULA_IDS = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "\tx=1", "\rx", "\nx", "  =HYPERLINK(\"http://x\")",
               "\uff1d1+1", "\uff0bA1", "\uff0d1", "\uff20A1", "=\"a,b\"", "=cmd|' /C calc'!A0",
               "\ufe62A1", "\ufe631", "\ufe66cmd", "\ufe6bA1", "\u207a1", "\u207b1", "\u207c1", "\u208a1",
               "\u208b1", "\u208c1", "\u22121", "\ufb29A1", "\u2a75x", "\u00a0=1+1", "\u3000+A1", "\u2003-1",
               "\u0085@x", "\u000b=1", "\u001f=1", "\u2028=1", "\u200b=1", "\ufeff@x", "\u202e=1",
               "\u00ad-1", " \u00a0\u3000\ufe66x", "\uff1d\u0338"]
SAFE_IDS = ["comment-1", "1+1=2", "a=b", "'quoted", "x@y", " plain", "a,=b", "\u00e9=1", "\u00a0plain",
            "\u3000\u4e00=1", "\u2010x", "\u2013x", "\u2260x", "\u00a8=1", "x\u00a0="]


def formula(text):
    """The export's rule (docs/audit.md, "CSV exports and spreadsheets"), from Python's Unicode
    tables: a first tab, CR or LF; else, each character folded by NFKC and whitespace and format
    characters skipped, a first remaining = + - @ or U+2212."""
    if text[:1] in ("\t", "\r", "\n"):
        return True
    for ch in text:
        for f in unicodedata.normalize("NFKC", ch):
            if not (f.isspace() or unicodedata.category(f) == "Cf"):
                return f in "=+-@\u2212"
    return False


class CsvExportTest(unittest.TestCase):
    """Finding 3: item ids that begin with a formula character were exported as is."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)

    def test_formulas_are_neutralised(self):
        d = self.daemon
        ids = FORMULA_IDS + SAFE_IDS
        Z = H.random_embeddings(len(ids), D, 3)
        r = d.score({"items": [{"id": i, "embedding": z} for i, z in zip(ids, Z.tolist())]})
        self.assertEqual(r.status, 200, r)
        export = d.get("/v1/audit/export?format=csv", key=d.keys["reviewer"])
        self.assertEqual(export.status, 200, export)
        text = export.body.decode("utf-8")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        got = {row["decision_id"]: row["item_id"] for row in rows}
        self.assertEqual(len(got), len(ids))
        for x in r.json["results"]:
            cell = got[x["decision_id"]]
            if x["id"] in FORMULA_IDS:
                self.assertEqual(cell, "'" + x["id"], x["id"])
            else:
                self.assertEqual(cell, x["id"])
        # every cell of every text column: none a spreadsheet would take for a formula
        self.assertEqual([i for i in FORMULA_IDS if not formula(i)] + [i for i in SAFE_IDS if formula(i)], [])
        for row in rows:
            for col in ("decision_id", "created_at", "item_id", "request_id", "model_name", "model_version",
                        "label", "decision", "contest_status", "probabilities", "vector"):
                self.assertFalse(formula(row[col]), (col, row[col]))
        # the neutralised cells are quoted, so no cell starts inside them either
        for i in FORMULA_IDS:
            self.assertIn('"\'' + i.replace('"', '""') + '"', text)
        # NDJSON is JSON: the ids come back unchanged
        nd = d.get("/v1/audit/export?format=ndjson", key=d.keys["reviewer"])
        lines = nd.body.decode().split("\n")  # not splitlines(): U+2028 and U+0085 are inside the JSON strings
        self.assertEqual((sorted(json.loads(line)["item_id"] for line in lines[:-1]), lines[-1]), (sorted(ids), ""))


class PercentNulTest(unittest.TestCase):
    """Finding 4: a decoded NUL cut names short (a%00b made version a; ?model=x%00y scored on x)."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY, "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=[TINY, "tiny_multi"], default_model=TINY)

    def test_no_name_is_cut_short(self):
        d = self.daemon
        cfg = H.load_config(TINY)
        with open(os.path.join(H.version_dir(TINY), "model.safetensors"), "rb") as f:
            weights = f.read()
        upload = {"config": cfg, "weights_b64": base64.b64encode(weights).decode(),
                  "weights_sha256": hashlib.sha256(weights).hexdigest()}
        rows, events = d.count(), d.scalar("SELECT count(*) FROM admin_events")
        for method, path, body, ctype in (
                ("PUT", f"/v1/admin/models/{TINY}/versions/a%00b", upload, "application/json"),
                ("PUT", f"/v1/admin/models/{TINY}%00x/versions/7", upload, "application/json"),
                ("POST", "/v1/score?model=tiny_multi%00x", octets(H.random_embeddings(1, D, 1)), OCTETS),
                ("POST", "/v1/score%00/../score", {"items": H.json_items(H.random_embeddings(1, D, 1))},
                 "application/json"),
                ("POST", f"/v1/admin/models/{TINY}%00/activate", {"version": "1"}, "application/json")):
            key = d.keys["admin" if "admin" in path else "scorer"]
            # raw: the answer comes at the headers, before the body is read
            r = d.raw(method, path, body, key=key, headers={"Content-Type": ctype})
            self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), (path, r))
            self.assertIn(r.json["error"]["field"], ("path", "query"), r)
        self.assertFalse(os.path.exists(os.path.join(d.models_dir, TINY, "a")))
        self.assertEqual(sorted(os.listdir(os.path.join(d.models_dir, TINY))), ["1"])
        self.assertEqual((d.count(), d.scalar("SELECT count(*) FROM admin_events")), (rows, events))


class UnansweredMetricsTest(unittest.TestCase):
    """Finding 6: timed-out, aborted and slowloris requests were counted as status="500"."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY, args=["--request-timeout", "2"])

    def series(self):
        return H.parse_metrics(self.daemon.get("/metrics", key="").body.decode())

    def fives(self):
        return sum(v for k, v in self.series().items()
                   if k.startswith("pgcld_requests_total{") and 'code="5' in k)

    def test_unanswered_requests_have_their_own_label(self):
        d = self.daemon
        before = self.series()
        unanswered = 'pgcld_requests_total{route="POST /v1/score",code="unanswered"}'
        # slowloris: the body never ends; the reaper cuts it (request_timeout)
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(f"POST /v1/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {d.keys['scorer']}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\"".encode())
        self.assertTrue(H.wait_until(
            lambda: self.series().get('pgcld_requests_unanswered_total{reason="request_timeout"}', 0) >
            before.get('pgcld_requests_unanswered_total{reason="request_timeout"}', 0)), self.series())
        self.assertEqual(s.recv(100), b"", "the cut connection sent an answer")
        s.close()
        # a client that leaves in the middle of its body (client_closed)
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(f"POST /v1/score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {d.keys['scorer']}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
        self.assertTrue(H.wait_until(lambda: H.metric(d, "pgcld_in_flight_requests") >= 1))
        s.close()
        self.assertTrue(H.wait_until(
            lambda: self.series().get('pgcld_requests_unanswered_total{reason="client_closed"}', 0) >
            before.get('pgcld_requests_unanswered_total{reason="client_closed"}', 0)), self.series())
        after = self.series()
        self.assertEqual(after.get(unanswered, 0) - before.get(unanswered, 0), 2, after)
        self.assertEqual(self.fives(), 0, "a request nobody answered was counted as a 5xx")
        # libmicrohttpd's own answer to a malformed request is counted under its real status
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
        self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 431"))
        s.close()
        self.assertTrue(H.wait_until(
            lambda: self.series().get('pgcld_requests_total{route="unmatched",code="431"}', 0) >= 1))
        self.assertEqual(self.fives(), 0)


class SecondContestTest(unittest.TestCase):
    """Finding 8: while a second contest of an overturned decision was open, the effective
    outcome and the statement of reasons went back to the original block."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)
        cls.other = cls.daemon.create_key("reviewer", "second reviewer")

    def blocked_decision(self):
        Z = H.random_embeddings(64, D, 17)
        r = self.daemon.score({"items": H.json_items(Z, "c")})
        self.assertEqual(r.status, 200, r)
        blocked = [x for x in r.json["results"] if x["decision"] == "block"]
        self.assertTrue(blocked, "no item of the tiny model was blocked")
        return blocked[0]

    def contest(self, did, key):
        r = self.daemon.post(f"/v1/decisions/{did}/contests", {"reason": "please look again"}, key=key)
        self.assertEqual(r.status, 201, r)
        return r.json["contest_id"]

    def resolve(self, cid, outcome, key, corrected=None):
        body = {"outcome": outcome, "note": "n"}
        if corrected:
            body["corrected_label"] = corrected
        r = self.daemon.post(f"/v1/contests/{cid}/resolution", body, key=key)
        self.assertEqual(r.status, 201, r)

    def state(self, did):
        d = self.daemon
        rec = d.get(f"/v1/decisions/{did}", key=d.keys["reviewer"])
        st = d.get(f"/v1/decisions/{did}/statement", key=d.keys["reviewer"])
        self.assertEqual((rec.status, st.status), (200, 200), (rec, st))
        e = rec.json["effective_outcome"]
        return ((e["status"], e["label"], e["decision"], e["decided_by"]),
                (st.json["pgcld"]["effective_status"], st.json["pgcld"]["decision_in_force"],
                 st.json["decision_visibility"]))

    def test_the_latest_resolution_stands_until_a_later_one(self):
        d = self.daemon
        a, b = d.keys["reviewer"], self.other
        item = self.blocked_decision()
        did = item["decision_id"]
        removed = ["DECISION_VISIBILITY_CONTENT_REMOVED"]
        self.assertEqual(self.state(did), (("original", "pos", "block", "automated"), ("original", "block", removed)))
        c1 = self.contest(did, a)
        self.assertEqual(self.state(did), (("contested", "pos", "block", "automated"),
                                           ("contested", "block", removed)))
        self.resolve(c1, "overturned", b, corrected="neg")  # reinstated
        self.assertEqual(self.state(did), (("overturned", "neg", "allow", "reviewer"), ("overturned", "allow", [])))
        # a second contest challenges the reinstatement: while it is open the reinstatement stands
        c2 = self.contest(did, b)
        self.assertEqual(self.state(did), (("contested", "neg", "allow", "reviewer"), ("contested", "allow", [])))
        rec = d.get(f"/v1/decisions/{did}", key=a).json
        self.assertEqual(rec["effective_outcome"]["contest_id"], c2)
        st = d.get(f"/v1/decisions/{did}/statement", key=a).json
        self.assertIn("overturned", st["incompatible_content_explanation"])
        self.assertEqual(st["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")
        self.resolve(c2, "upheld", a)  # the reinstatement is upheld
        self.assertEqual(self.state(did), (("upheld", "neg", "allow", "reviewer"), ("upheld", "allow", [])))
        # a third contest overturns the decision in force: allow -> review, the label in force kept
        c3 = self.contest(did, a)
        self.resolve(c3, "overturned", b)
        held = ["DECISION_VISIBILITY_OTHER"]
        self.assertEqual(self.state(did), (("overturned", "neg", "review", "reviewer"), ("overturned", "review", held)))
        # the decision row itself never changed
        self.assertEqual(d.scalar("SELECT decision FROM decisions WHERE decision_id = ?", (did,)), "block")


class CursorBindingTest(unittest.TestCase):
    """Finding 7 (a cursor reused with different filters): a cursor belongs to its listing."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)
        r = cls.daemon.score({"items": H.json_items(H.random_embeddings(30, D, 4), "k")})
        assert r.status == 200, r

    def get(self, **params):
        return self.daemon.get("/v1/decisions" + q(**params), key=self.daemon.keys["reviewer"])

    def test_a_cursor_belongs_to_its_filters(self):
        page = self.get(label="pos", limit=2)
        self.assertEqual(page.status, 200, page)
        cursor = page.json["next_cursor"]
        self.assertIsNotNone(cursor)
        self.assertEqual(self.get(label="pos", limit=5, cursor=cursor).status, 200)  # limit may change
        for other in ({"label": "neg"}, {}, {"label": "pos", "decision": "block"}, {"label": "pos", "contest": "none"},
                      {"label": "pos", "since": "2000-01-01T00:00:00Z"}, {"label": "pos", "item_id": "k-1"}):
            r = self.get(**other, limit=2, cursor=cursor)
            self.assertEqual((r.status, r.error_code(), r.json["error"]["field"]), (400, "invalid_cursor", "cursor"),
                             (other, r))
            self.assertIn("other filters", r.json["error"]["message"])
        # the same window written another way is the same filter (times are compared in UTC)
        a = self.get(since="2000-01-01T00:00:00Z", limit=1).json["next_cursor"]
        self.assertEqual(self.get(since="2000-01-01T01:00:00+01:00", limit=1, cursor=a).status, 200)

    def test_the_encoding_is_the_documented_one(self):
        """An independent encoder (docs: openapi.yaml Cursor, core/review/time_cursor.c): version 2, kind, seq,
        an 8-byte BLAKE2b of the canonical filters, 6 bytes of keyed BLAKE2b-128. bench/audit_queries
        forges cursors this way."""
        page = self.get(label="pos", decision="block", limit=1).json
        last_seq = self.daemon.scalar("SELECT seq FROM decisions WHERE decision_id = ?",
                                      (page["decisions"][0]["decision_id"],))
        h = hashlib.blake2b(digest_size=8)
        h.update(b"pgcld decision filters 1")
        for v in (None, None, "pos", "block", None, None, None, None):  # model … until
            h.update(b"\0" if v is None else b"\1" + len(v.encode()).to_bytes(4, "big") + v.encode())
        h.update(b"\0")  # contest: any
        msg = bytes([2, ord("d")]) + last_seq.to_bytes(8, "big") + h.digest()
        mac = hashlib.blake2b(msg, digest_size=16, key=b"pgcld audit cursor, version 1 .\0").digest()[:6]
        self.assertEqual(page["next_cursor"], base64.urlsafe_b64encode(msg + mac).rstrip(b"=").decode())


class SmallerItemsTest(unittest.TestCase):
    """Finding 9."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp_models = None
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)
        # a second version of the model, for the shadow cases
        os.makedirs(os.path.join(cls.daemon.models_dir, TINY, "2"))
        for f in ("config.json", "model.safetensors"):
            with open(os.path.join(H.version_dir(TINY), f), "rb") as src, \
                    open(os.path.join(cls.daemon.models_dir, TINY, "2", f), "wb") as dst:
                dst.write(src.read())

    def test_error_messages_name_no_path(self):
        d = self.daemon
        admin = d.keys["admin"]
        bodies = []
        for method, path, body in (("DELETE", "/v1/admin/keys/pgcld_00000000", None),
                                   ("DELETE", "/v1/admin/keys/nonsense", None),
                                   ("POST", f"/v1/admin/models/{TINY}/activate", {"version": "9"}),
                                   ("GET", f"/v1/admin/models/{TINY}/shadow?version=9", None)):
            r = d.request(method, path, body, key=admin)
            self.assertGreaterEqual(r.status, 400, r)
            bodies.append(r.body.decode())
        r = d.request("DELETE", "/v1/admin/keys/pgcld_00000000", key=admin)
        self.assertEqual((r.status, r.error_code()), (404, "key_not_found"), r)
        self.assertIn("the audit database", r.json["error"]["message"])
        for text in bodies:
            for secret in (d.db_path, os.path.realpath(d.db_path), d.tmp, d.models_dir):
                self.assertNotIn(secret, text)

    def test_shadow_of_nothing_and_of_itself(self):
        d = self.daemon
        events = d.scalar("SELECT count(*) FROM admin_events")
        r = d.get(f"/v1/admin/models/{TINY}/shadow?version=41", key=d.keys["admin"])
        self.assertEqual((r.status, r.error_code(), r.json["error"]["field"]), (404, "version_not_found", "version"), r)
        r = d.post(f"/v1/admin/models/{TINY}/shadow", {"version": "1"}, key=d.keys["admin"])  # the active one
        self.assertEqual((r.status, r.error_code()), (409, "shadow_is_active"), r)
        self.assertEqual(d.scalar("SELECT count(*) FROM admin_events"), events, "a refused attachment was recorded")
        self.assertIsNone(d.get("/v1/models", key=d.keys["admin"]).json["models"][0]["shadow_version"])
        # another version is a shadow, and a version that shadowed nothing yet reports zeros
        r = d.post(f"/v1/admin/models/{TINY}/shadow", {"version": "2"}, key=d.keys["admin"])
        self.assertEqual(r.status, 200, r)
        r = d.get(f"/v1/admin/models/{TINY}/shadow?version=2", key=d.keys["admin"])
        self.assertEqual((r.status, r.json["items"]), (200, 0), r)


class HeaderWhitespaceTest(unittest.TestCase):
    """Finding 9: libmicrohttpd 0.9.75 trims only the leading whitespace of a header's value, so a
    valid value followed by spaces was refused (Idempotency-Key, Authorization,
    Inference-Header-Content-Length), replaced (X-Request-Id) or fingerprinted as another request
    (Pgcld-Item-Ids)."""

    OWS = " \t "  # SP and HTAB: the optional whitespace of RFC 9110

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)
        cls.Z = H.random_embeddings(2, D, 27)

    def octet_score(self, headers, key=None):
        return self.daemon.request("POST", "/v1/score", octets(self.Z), content_type=OCTETS, headers=headers,
                                   key=key)

    def test_authorization(self):
        scorer = self.daemon.keys["scorer"]
        for value in (f"Bearer {scorer}{self.OWS}", f"{self.OWS}Bearer  {scorer}\t", f"bearer {scorer} "):
            with self.subTest(value=value):
                r = self.octet_score({"Authorization": value}, key="")
                self.assertEqual(r.status, 200, r)
        r = self.octet_score({"Authorization": f"Bearer {scorer}\xa0"}, key="")  # NBSP is no OWS
        self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)

    def test_idempotency_key_and_its_fingerprint(self):
        first = self.octet_score({"Idempotency-Key": f"ows-1{self.OWS}"})
        self.assertEqual(first.status, 200, first)
        for key in ("ows-1", f"{self.OWS}ows-1", f"ows-1{self.OWS}"):  # one key: the same request replays
            with self.subTest(key=key):
                r = self.octet_score({"Idempotency-Key": key})
                self.assertEqual((r.status, r.headers.get("Idempotent-Replayed"), r.body), (200, "true", first.body))
        # the ids header is in the fingerprint as evaluated: trailing whitespace makes no other request
        ids = json.dumps(["a", "b"])
        first = self.octet_score({"Idempotency-Key": "ows-2", "Pgcld-Item-Ids": ids + self.OWS})
        self.assertEqual(first.status, 200, first)
        self.assertEqual([x["id"] for x in first.json["results"]], ["a", "b"])
        r = self.octet_score({"Idempotency-Key": "ows-2", "Pgcld-Item-Ids": ids})
        self.assertEqual((r.status, r.headers.get("Idempotent-Replayed"), r.body), (200, "true", first.body))
        # other whitespace is part of the value: NBSP is not visible ASCII
        r = self.octet_score({"Idempotency-Key": "ows-3\xa0"})
        self.assertEqual((r.status, r.error_code(), r.error()["field"]),
                         (400, "invalid_request", "Idempotency-Key"), r)

    def test_request_id_and_content_type(self):
        r = self.octet_score({"X-Request-Id": f"ows-request{self.OWS}", "Content-Type": f"{OCTETS}{self.OWS}"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.headers["X-Request-Id"], r.json["request_id"]), ("ows-request", "ows-request"))
        r = self.octet_score({"X-Request-Id": "ows-request\xa0"})
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("ows-request", r.headers["X-Request-Id"])  # not acceptable: a UUIDv7 instead

    def test_inference_header_content_length(self):
        body = json.dumps({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [2, D],
                                       "data": self.Z.reshape(-1).tolist()}]}).encode()
        r = self.daemon.request("POST", f"/v2/models/{TINY}/infer", body, content_type=None,
                                headers={"Inference-Header-Content-Length": f"{len(body)}{self.OWS}"})
        self.assertEqual(r.status, 200, r)

    def test_chunked_with_whitespace_after_it_is_refused_at_once(self):
        """libmicrohttpd 0.9.75 frames a body by Transfer-Encoding as sent: "chunked " is no chunked
        body to it, and it would read the body until the connection closes while pgcld, reading
        "chunked", waited for its last chunk. Refused (the framing is in doubt), the connection
        closed."""
        head = ("POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {self.daemon.keys['scorer']}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked \t\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", self.daemon.port), timeout=60) as s:
            s.sendall(head + b"2\r\n{}\r\n0\r\n\r\n")  # the write side stays open, as a client waiting
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        status_line, _, rest = answer.partition(b"\r\n")
        self.assertEqual(status_line, b"HTTP/1.1 400 Bad Request", answer)
        error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
        self.assertEqual((error["code"], error["field"]), ("invalid_request", "Transfer-Encoding"), error)
        # whitespace before the value ("Transfer-Encoding: chunked") is skipped by libmicrohttpd too
        r = H.raw_request(self.daemon.port, "POST", "/v1/score", chunks=[octets(self.Z)],
                          headers={"Authorization": f"Bearer {self.daemon.keys['scorer']}", "Content-Type": OCTETS})
        self.assertEqual(r.status, 200, r)


class IntegerParametersTest(unittest.TestCase):
    """Finding 10: every integer parameter is read by one parser that tells a malformed value from
    one out of range, however many digits it has; each parameter answers out of range its own way:
    limit and Inference-Header-Content-Length with 400 naming the bound, a tree size beyond the log
    with 404 (test_consistency.py)."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.daemon = H.start_daemon(cls, models=[TINY], default_model=TINY)

    def test_limit(self):
        d, rk = self.daemon, self.daemon.keys["reviewer"]
        for path in ("/v1/decisions", "/v1/contests"):
            for value in ("1001", str(2 ** 53), str(2 ** 64), "9" * 40):
                with self.subTest(path=path, value=value):
                    r = d.get(f"{path}?limit={value}", key=rk)
                    self.assertEqual((r.status, r.error_code(), r.error()["field"]), (400, "invalid_request", "limit"))
                    self.assertIn("out of range", r.error()["message"])
                    self.assertIn("1000", r.error()["message"])
            for value in ("0", "00"):
                r = d.get(f"{path}?limit={value}", key=rk)
                self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), r)
                self.assertIn("out of range", r.error()["message"])
            for value in ("ten", "1e3", "-1", "%2B5", "5%20", "5.0", "0x10", "9" * 40 + "x"):
                with self.subTest(path=path, value=value):
                    r = d.get(f"{path}?limit={value}", key=rk)
                    self.assertEqual((r.status, r.error_code(), r.error()["field"]), (400, "invalid_request", "limit"))
                    self.assertIn("decimal integer", r.error()["message"])
            for value in ("1", "1000", "0007"):
                self.assertEqual(d.get(f"{path}?limit={value}", key=rk).status, 200)

    def test_inference_header_content_length(self):
        d = self.daemon
        body = json.dumps({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [1, D],
                                       "data": [0.5] * D}]}).encode()

        def infer(length):
            return d.request("POST", f"/v2/models/{TINY}/infer", body, content_type=None,
                             headers={"Inference-Header-Content-Length": length})

        for length in (str(len(body) + 1), str(2 ** 64), "9" * 40):
            with self.subTest(length=length):
                r = infer(length)
                self.assertEqual((r.status, r.error_code(), r.error()["field"]),
                                 (400, "invalid_request", "Inference-Header-Content-Length"), r)
                self.assertIn(f"at most {len(body)}", r.error()["message"])
        for length in ("1e3", "-1", "+5", "0x10", "5 5", "9" * 40 + "x"):
            with self.subTest(length=length):
                r = infer(length)
                self.assertEqual((r.status, r.error_code(), r.error()["field"]),
                                 (400, "invalid_request", "Inference-Header-Content-Length"), r)
                self.assertIn("decimal", r.error()["message"])
        self.assertEqual(infer("000" + str(len(body))).status, 200)


if __name__ == "__main__":
    H.main()
