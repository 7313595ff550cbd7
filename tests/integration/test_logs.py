#!/usr/bin/python3
"""Logs (issue 19, item 2): --log-format json writes one JSON object a line that json.loads and jq
read, every line the daemon writes included; one access line per request carries the request id of
the answer's X-Request-Id (and of a score's body), the route pattern and the path, the status, the
latency, the key's id (never the key), and for scoring the items, model and version; the text
format carries the same fields as key=value; --access-log off leaves them out; SIGHUP switches the
format of a config file.

Run: /usr/bin/python3 tests/integration/test_logs.py
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
LEVELS = {"debug", "info", "warn", "error"}


def stderr_text(d):
    with open(d._stderr_path, "rb") as f:
        return f.read()


def score_body(n, seed):
    return {"items": H.json_items(H.random_embeddings(n, 1024, seed))}


class JsonLogs(unittest.TestCase):
    """One daemon with --log-format json: requests of each kind, then its whole stderr."""

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.Daemon(args=["--log-format", "json"])
        d = cls.d
        d.start()
        body = H.encode_body(score_body(2, 1))
        cls.scored = d.score(body)
        cls.scored_len = len(body)
        Z = H.random_embeddings(3, 1024, 7)
        cls.inferred = d.post("/v2/models/toxicity/infer", {"inputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [3, 1024],
             "data": [float(f"{v:.9g}") for v in Z.reshape(-1)]}]})
        cls.not_found = d.get("/v1/decisions/0190f0c8-0000-7000-8000-000000000000", key=d.keys["reviewer"])
        cls.bad = d.score({"items": [{"id": "x", "embedding": [1.0]}]})
        cls.anonymous = d.score(score_body(1, 2), key="")
        cls.wrong_key = d.score(score_body(1, 2), key="pgcld_00000000_" + "A" * 43)
        # a path of control characters, a quote and a byte that is not UTF-8, decoded by the server
        cls.nasty = H.raw_request(d.port, "GET", "/v1/no%0Awhere%22%FF%01", headers={"Connection": "close"})
        d.stop()
        cls.raw = stderr_text(d)
        cls.lines = [json.loads(line) for line in cls.raw.decode("utf-8").splitlines() if line]

    @classmethod
    def tearDownClass(cls):
        cls.d.cleanup()

    def access(self, resp):
        rid = resp.headers.get("X-Request-Id")
        self.assertRegex(rid or "", H.UUID7_RE, f"X-Request-Id of {resp}")
        found = [r for r in self.lines if r.get("msg") == "access" and r.get("request_id") == rid]
        self.assertEqual(len(found), 1, f"one access line for {rid}: {found}\n{self.raw[-3000:]!r}")
        line = found[0]
        self.assertEqual(line["level"], "info")
        self.assertEqual(line["status"], resp.status, line)
        self.assertIsInstance(line["latency_ms"], float, line)
        self.assertGreater(line["latency_ms"], 0, line)
        self.assertEqual(line["bytes_out"], len(resp.body), line)
        return line

    def test_every_line_is_json(self):
        self.assertGreater(len(self.lines), 10)
        for rec in self.lines:
            self.assertIsInstance(rec, dict)
            self.assertRegex(rec.get("ts", ""), TS_RE, rec)
            self.assertIn(rec.get("level"), LEVELS, rec)
            self.assertIsInstance(rec.get("msg"), str, rec)
        msgs = [r["msg"] for r in self.lines]
        self.assertTrue(any(m.startswith("pgcld ") and m.endswith(" starting") for m in msgs), msgs[:5])
        self.assertIn("shutdown: complete", msgs)
        started = [r for r in self.lines if r["msg"].startswith("http: listening")]
        self.assertEqual(started[0].get("component"), "http", started)

    def test_jq_reads_every_line(self):
        jq = shutil.which("jq")
        if not jq:
            self.skipTest("jq is not installed")
        p = subprocess.run([jq, "-c", "."], input=self.raw, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(p.stdout.splitlines()), len(self.lines))

    def test_score_access_line(self):
        self.assertEqual(self.scored.status, 200, self.scored)
        line = self.access(self.scored)
        self.assertEqual(self.scored.json["request_id"], line["request_id"], "the body's request_id is the header's")
        self.assertEqual(line["method"], "POST")
        self.assertEqual(line["route"], "/v1/score")
        self.assertEqual(line["path"], "/v1/score")
        self.assertEqual(line["key_id"], self.d.keys["scorer"][:14])
        self.assertEqual(line["items"], 2)
        self.assertEqual(line["model"], "toxicity")
        self.assertEqual(line["version"], self.scored.json["model"]["version"])
        self.assertEqual(line["bytes_in"], self.scored_len)

    def test_infer_access_line(self):
        self.assertEqual(self.inferred.status, 200, self.inferred)
        line = self.access(self.inferred)
        self.assertEqual(line["route"], "/v2/models/{name}/infer")
        self.assertEqual(line["path"], "/v2/models/toxicity/infer")
        self.assertEqual((line["items"], line["model"]), (3, "toxicity"))
        self.assertEqual(line["version"], self.inferred.json["model_version"])
        self.assertEqual(self.inferred.json["parameters"]["request_id"], line["request_id"])

    def test_route_is_the_pattern(self):
        self.assertEqual(self.not_found.status, 404, self.not_found)
        line = self.access(self.not_found)
        self.assertEqual(line["route"], "/v1/decisions/{id}")
        self.assertEqual(line["path"], "/v1/decisions/0190f0c8-0000-7000-8000-000000000000")
        self.assertEqual(line["key_id"], self.d.keys["reviewer"][:14])
        self.assertNotIn("items", line)

    def test_client_errors(self):
        self.assertEqual(self.bad.status, 400, self.bad)
        line = self.access(self.bad)
        self.assertEqual(line["key_id"], self.d.keys["scorer"][:14])
        for resp in (self.anonymous, self.wrong_key):
            self.assertEqual(resp.status, 401, resp)
            line = self.access(resp)
            self.assertNotIn("key_id", line, "no key id for a request whose key was not accepted")
            self.assertEqual(line["route"], "/v1/score")

    def test_nasty_path_is_escaped(self):
        self.assertIn(self.nasty.status, (400, 404), self.nasty)
        line = self.access(self.nasty)
        # json.loads gave back what the escapes stand for: the decoded bytes, 0xFF as U+FFFD
        self.assertEqual(line["path"], "/v1/no\nwhere\"\ufffd\x01", line)
        self.assertNotIn("route", line)

    def test_no_key_in_the_log(self):
        text = self.raw.decode("utf-8", "replace")
        for key in self.d.keys.values():
            self.assertNotIn(key, text, "a key text in the log")
            self.assertNotIn(key[15:], text, "a key's secret part in the log")
        self.assertNotIn("A" * 43, text, "the refused key's secret part in the log")


class TextLogs(unittest.TestCase):
    def test_access_line_as_key_value(self):
        d = H.Daemon()
        try:
            d.start()
            trace = "4bf92f3577b34da6a3ce929d0e0e4736"  # W3C trace context (item 3): logged as given
            r = d.score(score_body(3, 4), headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
            self.assertEqual(r.status, 200, r)
            unauth = d.get("/v1/models", key="")
            d.stop()
            text = stderr_text(d).decode("utf-8")
            rid = r.headers["X-Request-Id"]
            want = (rf"^\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z info  access request_id={rid} trace_id={trace} method=POST "
                    rf"route=/v1/score path=/v1/score status=200 latency_ms=\d+\.\d{{3}} "
                    rf"key_id={d.keys['scorer'][:14]} model=toxicity version=\S+ items=3 bytes_in=\d+ "
                    rf"bytes_out={len(r.body)}$")
            self.assertRegex(text, re.compile(want, re.M))
            rid = unauth.headers["X-Request-Id"]
            self.assertRegex(text, re.compile(rf" access request_id={rid} trace_id=[0-9a-f]{{32}} method=GET route=/v1/models "
                                              rf"path=/v1/models status={unauth.status} latency_ms=", re.M))
            self.assertIn(" info  pgcld ", text, "the other lines keep their text format")
            self.assertFalse(any(line.startswith("{") for line in text.splitlines()), "no JSON in text format")
        finally:
            d.cleanup()

    def test_access_log_off_and_sighup_switches_format(self):
        d = H.Daemon()
        conf = os.path.join(d.tmp, "pgcld.conf")
        with open(conf, "w") as f:
            f.write("access-log = off\n")
        d.args += ["--config", conf]
        try:
            d.start()
            r = d.score(score_body(1, 5))
            self.assertEqual(r.status, 200, r)
            self.assertNotIn(" access ", stderr_text(d).decode("utf-8"), "--access-log off")
            with open(conf, "w") as f:
                f.write("log-format = json\n")
            before = stderr_text(d).count(b"config: reloaded")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(H.wait_until(lambda: stderr_text(d).count(b"SIGHUP: ") > 0 and
                                         stderr_text(d).count(b"config: reloaded") > before), d.logs())
            r = d.score(score_body(1, 6))
            self.assertEqual(r.status, 200, r)
            d.stop()
            tail = stderr_text(d).decode("utf-8").split("config: reloaded", 1)[1].splitlines()[1:]
            records = [json.loads(line) for line in tail if line]
            found = [x for x in records if x.get("request_id") == r.headers["X-Request-Id"]]
            self.assertEqual(len(found), 1, records)
            self.assertEqual(found[0]["route"], "/v1/score")
        finally:
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
