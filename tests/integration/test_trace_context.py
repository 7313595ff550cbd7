#!/usr/bin/python3
"""Trace context and statement facts (issue 19, items 3 and 9's storage) against a real pgcld:

  * a W3C `traceparent` (version 00) is taken on every route: its trace id is in the access line
    and stored with each decision of a score; GET /v1/decisions?trace_id= finds exactly those rows;
    an invalid traceparent is ignored (not an error): a fresh trace id is made, as without one;
  * a client's `X-Request-Id` of 1..128 visible ASCII bytes (no quotes, no backslash) is the
    request's id: echoed, in the answer's body, logged and stored; any other is replaced by a UUIDv7;
  * per score item, `content_date`, `territorial_scope` and `content_language` are stored and read
    back; a bad one is refused (400, a stable code naming the item's field) and nothing is written;
    an Idempotency-Key replays only the same facts;
  * the chain (SQLite file): rows written before migration 0011 (tests/fixtures/pre_0011_audit.sql,
    written by the build before it) verify as before beside new rows; inclusion proofs of both
    verify with docs/verify_proof.py; a changed trace id or fact of a new row, or one given to an
    old row, fails `pgcld audit verify`.

Every class runs on PostgreSQL too (PGCLD_TEST_STORE=postgresql, pg_test_trace_context) except the
one about the SQLite file.

Run: /usr/bin/python3 tests/integration/test_trace_context.py
"""

import base64
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

sys.path.insert(0, os.path.join(H.SOURCE_ROOT, "clients", "python"))
from pgcld_client.proof import decode_decision_leaf  # noqa: E402

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
VERIFIER = os.path.join(H.SOURCE_ROOT, "docs", "verify_proof.py")
LEGACY_DUMP = os.path.join(H.SOURCE_ROOT, "tests", "fixtures", "pre_0011_audit.sql")
D = 1024


def items(n, seed, prefix="it", **facts):
    out = H.json_items(H.random_embeddings(n, D, seed), prefix)
    for it in out:
        it.update(facts)
    return out


def access_lines(d):
    """The daemon's JSON access lines so far."""
    with open(d._stderr_path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("msg") == "access":
            out.append(doc)
    return out


def access_line_of(d, request_id, timeout=10.0):
    """The access line of request_id (written when the request completes, just after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [a for a in access_lines(d) if a.get("request_id") == request_id]
        if found or time.monotonic() > deadline:
            return found[0] if found else None
        time.sleep(0.05)


class TraceContextTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",), args=["--log-format", "json"])

    def reviewer_get(self, path):
        return self.d.get(path, key=self.d.keys["reviewer"])

    def stored(self, decision_ids):
        rows = self.d.query("SELECT decision_id, request_id, trace_id, content_date, territorial_scope,"
                            " content_language FROM decisions")
        return {r["decision_id"]: r for r in rows if r["decision_id"] in set(decision_ids)}

    def decision_ids(self, r):
        self.assertEqual(r.status, 200, r)
        return [res["decision_id"] for res in r.json["results"]]

    # -- traceparent
    def test_traceparent_is_logged_stored_and_filterable(self):
        r = self.d.score({"items": items(3, 1, "tp")}, headers={"traceparent": TRACEPARENT})
        ids = self.decision_ids(r)
        self.assertEqual({row["trace_id"] for row in self.stored(ids).values()}, {TRACE})
        line = access_line_of(self.d, r.headers["X-Request-Id"])
        self.assertIsNotNone(line, "no access line for the score")
        self.assertEqual(line["trace_id"], TRACE)
        # other requests of other traces do not match the filter
        self.decision_ids(self.d.score({"items": items(2, 2, "other")}))
        path = f"/v1/decisions?trace_id={TRACE}"
        listed = self.reviewer_get(path)
        body = self.check_live("GET", "/v1/decisions", listed)
        self.assertEqual(listed.status, 200, listed)
        self.assertEqual(sorted(row["decision_id"] for row in body["decisions"]), sorted(ids))
        self.assertTrue(all(row["trace_id"] == TRACE for row in body["decisions"]))
        one = self.reviewer_get(f"/v1/decisions/{ids[0]}")
        self.assertEqual(self.check_live("GET", f"/v1/decisions/{ids[0]}", one)["trace_id"], TRACE)
        # every route takes it: a read's access line carries the reader's trace
        other = "0af7651916cd43dd8448eb211c80319c"
        r = self.d.get("/v1/models", headers={"traceparent": f"00-{other}-b7ad6b7169203331-00"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(access_line_of(self.d, r.headers["X-Request-Id"])["trace_id"], other)

    def test_open_inference_protocol_decisions_carry_the_trace_and_request_id(self):
        trace = "6bf92f3577b34da6a3ce929d0e0e4738"
        Z = H.random_embeddings(3, D, 36)
        r = self.d.post("/v2/models/toxicity/infer", {"inputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [3, D],
             "data": [float(f"{v:.9g}") for v in Z.reshape(-1)]}]},
            headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01", "X-Request-Id": "oip-request-1"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["X-Request-Id"], "oip-request-1")
        self.assertEqual(self.check_live("POST", "/v2/models/toxicity/infer", r)["parameters"]["request_id"],
                         "oip-request-1")
        rows = self.d.query("SELECT request_id FROM decisions WHERE trace_id = ?", (trace,))
        self.assertEqual([row["request_id"] for row in rows], ["oip-request-1"] * 3)

    def test_a_later_version_is_read_by_its_version_00_fields(self):
        trace = "11111111111111111111111111111111"
        r = self.d.score({"items": items(1, 3, "v1")},
                         headers={"traceparent": f"01-{trace}-2222222222222222-01-what-follows"})
        ids = self.decision_ids(r)
        self.assertEqual(self.stored(ids)[ids[0]]["trace_id"], trace)

    def test_invalid_traceparents_are_ignored(self):
        bad = [
            f"00-{TRACE.upper()}-00f067aa0ba902b7-01",            # uppercase hex
            f"00-{'0' * 32}-00f067aa0ba902b7-01",                 # all-zero trace id
            f"00-{TRACE}-{'0' * 16}-01",                          # all-zero parent id
            f"ff-{TRACE}-00f067aa0ba902b7-01",                    # version ff
            f"00-{TRACE}-00f067aa0ba902b7-01-extra",              # version 00 with more
            f"00-{TRACE[:-1]}-00f067aa0ba902b7-01",               # short trace id
            f"00-{TRACE}-00f067aa0ba902b7",                       # no flags
            f"00_{TRACE}_00f067aa0ba902b7_01",                    # wrong separators
            "",
        ]
        for i, value in enumerate(bad):
            with self.subTest(traceparent=value):
                r = self.d.score({"items": items(1, 10 + i, f"bad{i}-")}, headers={"traceparent": value})
                ids = self.decision_ids(r)
                trace = self.stored(ids)[ids[0]]["trace_id"]
                self.assertRegex(trace, HEX32)
                self.assertNotEqual(trace, TRACE)
                self.assertEqual(access_line_of(self.d, r.headers["X-Request-Id"])["trace_id"], trace)

    def test_whitespace_around_a_value_is_not_part_of_it(self):
        """Issue 27: RFC 9110 §5.5 excludes the optional whitespace (SP, HTAB) around a field value
        before it is evaluated; libmicrohttpd keeps it at the end. Other whitespace stays."""
        trace = "7bf92f3577b34da6a3ce929d0e0e4731"
        for i, ows in enumerate((" ", "  ", "\t", " \t ")):
            with self.subTest(ows=ows):
                request_id = f"ows-{i}"
                r = self.d.score({"items": items(1, 50 + i, f"ows{i}-")},
                                 headers={"traceparent": f"{ows}00-{trace}-00f067aa0ba902b7-01{ows}",
                                          "X-Request-Id": f"{request_id}{ows}"})
                ids = self.decision_ids(r)
                self.assertEqual(r.headers["X-Request-Id"], request_id)
                row = self.stored(ids)[ids[0]]
                self.assertEqual((row["trace_id"], row["request_id"]), (trace, request_id))
                line = access_line_of(self.d, request_id)
                self.assertIsNotNone(line, "no access line for the score")
                self.assertEqual(line["trace_id"], trace)
        # NBSP (obs-text) is no optional whitespace: the values are not valid, and replaced
        r = self.d.score({"items": items(1, 60, "nbsp-")},
                         headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01\xa0", "X-Request-Id": "nbsp\xa0"})
        ids = self.decision_ids(r)
        self.assertRegex(r.headers["X-Request-Id"], UUID7)
        self.assertNotEqual(self.stored(ids)[ids[0]]["trace_id"], trace)

    def test_without_traceparent_a_trace_id_is_made_and_finds_the_request(self):
        r = self.d.score({"items": items(2, 30, "none")})
        ids = self.decision_ids(r)
        traces = {row["trace_id"] for row in self.stored(ids).values()}
        self.assertEqual(len(traces), 1)
        trace = traces.pop()
        self.assertRegex(trace, HEX32)
        self.assertEqual(access_line_of(self.d, r.headers["X-Request-Id"])["trace_id"], trace)
        listed = self.reviewer_get(f"/v1/decisions?trace_id={trace}").json
        self.assertEqual(sorted(row["decision_id"] for row in listed["decisions"]), sorted(ids))

    def test_trace_filter_pages_with_cursors_bound_to_the_trace(self):
        trace = "5bf92f3577b34da6a3ce929d0e0e4737"
        ids = self.decision_ids(self.d.score({"items": items(5, 35, "paged")},
                                             headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"}))
        got, cursor = [], None
        while True:
            page = self.reviewer_get(f"/v1/decisions?trace_id={trace}&limit=2" + (f"&cursor={cursor}" if cursor else ""))
            self.assertEqual(page.status, 200, page)
            got += [row["decision_id"] for row in page.json["decisions"]]
            if not page.json["next_cursor"]:
                break
            cursor = page.json["next_cursor"]
            first_cursor = cursor
        self.assertEqual(got, list(reversed(ids)))  # newest first, each once
        # a cursor of one trace's listing is not a position in another's
        other = self.reviewer_get(f"/v1/decisions?trace_id={TRACE}&limit=2&cursor={first_cursor}")
        self.assertEqual((other.status, other.error_code()), (400, "invalid_cursor"))
        unfiltered = self.reviewer_get(f"/v1/decisions?limit=2&cursor={first_cursor}")
        self.assertEqual((unfiltered.status, unfiltered.error_code()), (400, "invalid_cursor"))

    def test_bad_trace_id_filters_are_400(self):
        for value in ("XYZ", TRACE.upper(), TRACE[:-1], TRACE + "0", ""):
            with self.subTest(trace_id=value):
                r = self.reviewer_get(f"/v1/decisions?trace_id={value}")
                self.check_live("GET", "/v1/decisions", r)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.json["error"]["field"], "trace_id")

    # -- X-Request-Id
    def test_client_request_id_is_echoed_logged_and_stored(self):
        for rid in ("client-42", "a" * 128, "opaque:ID/with.punct~!#$%&()*+,;<=>?@[]^_`{|}"):
            with self.subTest(request_id=rid):
                r = self.d.score({"items": items(1, 40, "rid")}, headers={"X-Request-Id": rid})
                ids = self.decision_ids(r)
                self.assertEqual(r.headers["X-Request-Id"], rid)
                self.assertEqual(r.json["request_id"], rid)
                self.assertEqual(self.stored(ids)[ids[0]]["request_id"], rid)
                self.assertIsNotNone(access_line_of(self.d, rid))
                listed = self.reviewer_get("/v1/decisions?request_id=" + rid.replace("%", "%25").replace(
                    "&", "%26").replace("#", "%23").replace("+", "%2B").replace("?", "%3F")).json
                self.assertIn(ids[0], [row["decision_id"] for row in listed["decisions"]])
        # any route echoes it, errors included
        r = self.d.get("/v1/no-such-route", headers={"X-Request-Id": "req-404"})
        self.assertEqual((r.status, r.headers["X-Request-Id"]), (404, "req-404"))

    def test_unacceptable_request_ids_are_replaced(self):
        for rid in ("a" * 129, "has space", 'quo"te', "back\\slash", "it's"):
            with self.subTest(request_id=rid):
                r = self.d.score({"items": items(1, 50, "rep")}, headers={"X-Request-Id": rid})
                ids = self.decision_ids(r)
                self.assertRegex(r.headers["X-Request-Id"], UUID7)
                self.assertEqual(r.json["request_id"], r.headers["X-Request-Id"])
                self.assertEqual(self.stored(ids)[ids[0]]["request_id"], r.headers["X-Request-Id"])

    # -- statement facts
    def test_item_facts_are_stored_and_read_back(self):
        body = {"items": [
            dict(items(1, 60, "f0")[0], content_date="2024-02-29", territorial_scope=["DE", "FR", "GR"],
                 content_language="EN"),
            dict(items(1, 61, "f1")[0], content_date="2000-01-01"),
            items(1, 62, "f2")[0],
        ]}
        r = self.d.score(body)
        self.check_live("POST", "/v1/score", r)
        ids = self.decision_ids(r)
        rows = self.stored(ids)
        self.assertEqual((rows[ids[0]]["content_date"], rows[ids[0]]["territorial_scope"],
                          rows[ids[0]]["content_language"]), ("2024-02-29", '["DE","FR","GR"]', "EN"))
        self.assertEqual((rows[ids[1]]["content_date"], rows[ids[1]]["territorial_scope"]), ("2000-01-01", None))
        expected = [("2024-02-29", ["DE", "FR", "GR"], "EN"), ("2000-01-01", None, None), (None, None, None)]
        for decision_id, want in zip(ids, expected):
            rec = self.check_live("GET", f"/v1/decisions/{decision_id}", self.reviewer_get(f"/v1/decisions/{decision_id}"))
            self.assertEqual((rec["content_date"], rec["territorial_scope"], rec["content_language"]), want)
        trace = rows[ids[0]]["trace_id"]
        listed = {row["decision_id"]: row for row in self.reviewer_get(f"/v1/decisions?trace_id={trace}").json["decisions"]}
        for decision_id, want in zip(ids, expected):
            row = listed[decision_id]
            self.assertEqual((row["content_date"], row["territorial_scope"], row["content_language"]), want)

    def test_bad_item_facts_are_refused_and_nothing_is_written(self):
        tomorrow_plus = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 3 * 86400))
        cases = [
            ("content_date", "2023-02-29", "invalid_content_date"),
            ("content_date", "2024-13-01", "invalid_content_date"),
            ("content_date", "2024-1-01", "invalid_content_date"),
            ("content_date", "1999-12-31", "invalid_content_date"),
            ("content_date", tomorrow_plus, "invalid_content_date"),
            ("content_date", 20240101, "invalid_content_date"),
            ("territorial_scope", ["de"], "invalid_territorial_scope"),
            ("territorial_scope", ["EL"], "invalid_territorial_scope"),   # Greece is GR in the TDB
            ("territorial_scope", ["GB"], "invalid_territorial_scope"),   # not in the EEA
            ("territorial_scope", ["DE", "DE"], "invalid_territorial_scope"),
            ("territorial_scope", [], "invalid_territorial_scope"),
            ("territorial_scope", "DE", "invalid_territorial_scope"),
            ("content_language", "en", "invalid_content_language"),
            ("content_language", "XX", "invalid_content_language"),
            ("content_language", "ENG", "invalid_content_language"),
        ]
        before = self.d.count()
        for field, value, code in cases:
            with self.subTest(field=field, value=value):
                body = {"items": items(1, 70, "ok") + [dict(items(1, 71, "bad")[0], **{field: value})]}
                r = self.d.score(body)
                self.check_live("POST", "/v1/score", r)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.error_code(), code)
                self.assertEqual(r.json["error"]["field"], f"items[1].{field}")
                self.assertEqual(r.json["error"]["item"], 1)
        self.assertEqual(self.d.count(), before)

    def test_chain_verifies_and_proves_the_new_rows(self):
        """On either store: the audit verifies with the trace ids and facts chained, and a proof of
        a row with them verifies with docs/verify_proof.py and pgcld audit verify-proof."""
        r = self.d.score({"items": [dict(items(1, 85, "proof")[0], content_date="2024-03-01", territorial_scope=["IS"],
                                         content_language="IS")]},
                         headers={"traceparent": "00-7bf92f3577b34da6a3ce929d0e0e4739-00f067aa0ba902b7-01"})
        decision_id = self.decision_ids(r)[0]
        v = self.d.get("/v1/audit/verify", key=self.d.keys["admin"])
        self.assertEqual(v.status, 200, v)
        self.assertTrue(v.json["intact"], v.json)
        proof = self.reviewer_get(f"/v1/decisions/{decision_id}/proof?format=chain-v2")
        self.assertEqual(proof.status, 200, proof)
        leaf = decode_decision_leaf(base64.b64decode(proof.json["leaf_data"]))
        self.assertEqual((leaf["trace_id"], leaf["content_date"], leaf["territorial_scope"], leaf["content_language"]),
                         ("7bf92f3577b34da6a3ce929d0e0e4739", "2024-03-01", '["IS"]', "IS"))
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.d.tmp, delete=False) as f:
            json.dump(proof.json, f)
        py = subprocess.run([PY, VERIFIER, f.name], capture_output=True, text=True, timeout=60)
        self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
        c = self.d.cli("audit", "verify-proof", f.name, check=False)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)

    def test_idempotent_replays_cover_the_facts(self):
        body = {"items": [dict(items(1, 80, "idem")[0], content_date="2024-05-01", content_language="DE")]}
        first = self.d.score(body, headers={"Idempotency-Key": "facts-1"})
        self.assertEqual(first.status, 200, first)
        again = self.d.score(body, headers={"Idempotency-Key": "facts-1", "traceparent": TRACEPARENT})
        self.assertEqual((again.status, again.body), (200, first.body))
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        other = {"items": [dict(body["items"][0], content_date="2024-05-02")]}
        r = self.d.score(other, headers={"Idempotency-Key": "facts-1"})
        self.assertEqual((r.status, r.error_code()), (422, "idempotency_key_reused"))


def sqlite_cli(path, sql):
    p = subprocess.run(["sqlite3", "-bail", path], input=sql, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"sqlite3 {path}: {p.stderr}")
    return p.stdout


DROP_DECISION_TRIGGERS = "DROP TRIGGER decisions_append_only_u; DROP TRIGGER decisions_append_only_d;"


@H.sqlite_only("the legacy rows and the tampering are SQLite files")
class ChainAcrossMigrationTest(unittest.TestCase):
    """A database written by the build before migration 0011 (its rows without trace ids or facts),
    upgraded by this build, which adds rows with them: both kinds verify and prove."""

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-trace-chain-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.db = os.path.join(cls.tmp, "audit.db")
        with open(LEGACY_DUMP) as f:
            legacy = sqlite3.connect(cls.db)
            legacy.executescript(f.read())
            legacy.close()
        cls.legacy_ids = [r[0] for r in sqlite3.connect(cls.db).execute(
            "SELECT decision_id FROM decisions ORDER BY seq")]
        cls.legacy_version = sqlite3.connect(cls.db).execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        cls.d = H.start_daemon(cls, models=("toxicity",), db_path=cls.db)
        r = cls.d.score({"items": [dict(items(1, 90, "new")[0], content_date="2025-01-31", territorial_scope=["NO"],
                                        content_language="NB"), items(1, 91, "new")[0]]},
                        headers={"traceparent": TRACEPARENT})
        assert r.status == 200, r
        cls.new_ids = [res["decision_id"] for res in r.json["results"]]
        cls.d.stop()

    def verify(self, path):
        p = H.run_pgcld("audit", "verify", "--db", path)
        return p.returncode, json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None, p.stderr

    def copy(self, name, sql):
        path = os.path.join(self.tmp, name)
        shutil.copyfile(self.db, path)
        sqlite_cli(path, DROP_DECISION_TRIGGERS + sql)
        return path

    def test_fixture_predates_the_migration(self):
        self.assertEqual(self.legacy_version, 10)
        self.assertGreaterEqual(len(self.legacy_ids), 2)
        rows = H.db_query(self.db, "SELECT trace_id, content_date FROM decisions WHERE decision_id IN (?, ?)",
                          tuple(self.legacy_ids[:2]))
        self.assertEqual(rows, [{"trace_id": None, "content_date": None}] * 2)

    def test_old_and_new_rows_verify(self):
        rc, report, err = self.verify(self.db)
        self.assertEqual(rc, 0, (report, err))
        self.assertTrue(report["intact"], report)
        n = H.db_scalar(self.db, "SELECT count(*) FROM decisions")
        self.assertEqual(n, len(self.legacy_ids) + 2)

    def test_proofs_of_old_and_new_rows_verify(self):
        self.d.start()
        try:
            for decision_id in (self.legacy_ids[0], self.legacy_ids[-1], *self.new_ids):
                with self.subTest(decision_id=decision_id):
                    r = self.d.get(f"/v1/decisions/{decision_id}/proof?format=chain-v2", key=self.d.keys["reviewer"])
                    self.assertEqual(r.status, 200, r)
                    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.tmp, delete=False) as f:
                        json.dump(r.json, f)
                    py = subprocess.run([PY, VERIFIER, f.name], capture_output=True, text=True, timeout=60)
                    self.assertEqual(py.returncode, 0, py.stdout + py.stderr)
                    c = self.d.cli("audit", "verify-proof", f.name, check=False)
                    self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
                    leaf = decode_decision_leaf(base64.b64decode(r.json["leaf_data"]))
                    self.assertEqual(leaf["trace_id"], TRACE if decision_id in self.new_ids else None)
                    self.assertEqual(leaf["extra"], [])
        finally:
            self.d.stop()

    def test_changed_facts_of_a_new_row_fail(self):
        new = self.new_ids[0]
        for column, value in (("trace_id", "'0af7651916cd43dd8448eb211c80319c'"), ("trace_id", "NULL"),
                              ("content_date", "'2025-02-01'"), ("territorial_scope", "'[\"NO\",\"IS\"]'"),
                              ("content_language", "NULL")):
            with self.subTest(column=column, value=value):
                path = self.copy(f"tamper-{column}-{value.strip(chr(39))[:8]}.db".replace('"', "").replace("[", "")
                                 .replace("]", "").replace(",", ""),
                                 f"UPDATE decisions SET {column} = {value} WHERE decision_id = '{new}';")
                rc, report, err = self.verify(path)
                self.assertNotEqual(rc, 0, report)
                self.assertFalse(report["intact"], report)

    def test_facts_given_to_an_old_row_fail(self):
        old = self.legacy_ids[0]
        for column, value in (("trace_id", f"'{TRACE}'"), ("content_language", "'EN'")):
            with self.subTest(column=column):
                path = self.copy(f"forge-{column}.db", f"UPDATE decisions SET {column} = {value} WHERE decision_id = '{old}';")
                rc, report, err = self.verify(path)
                self.assertNotEqual(rc, 0, report)
                self.assertFalse(report["intact"], report)


if __name__ == "__main__":
    unittest.main()
