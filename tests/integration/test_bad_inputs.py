#!/usr/bin/python3
"""Every malformed request of tests/bad_inputs/ against a real daemon, over a raw socket.

Each case file (NNN-name.http) is a line of expectations ("#! {json}") and the raw request bytes;
see tests/bad_inputs/make_cases.py. For every case: the answer's status and error code (and the
item and field the error must name, where the case says so), that the rest of what came back on
the connection is sane (nothing, or further whole HTTP answers), and that the daemon is still
alive and answering. At the end: not one decision row was written, and GET /v1/audit/verify
reports an intact chain.

Run: /usr/bin/python3 tests/integration/test_bad_inputs.py   (PGCLD_BAD_INPUT=NNN runs one case)
"""

import glob
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

CASES_DIR = os.path.join(H.SOURCE_ROOT, "tests", "bad_inputs")
NO_ANSWER_WAIT_S = 1.5   # how long a case expecting no answer waits for one
ANSWER_WAIT_S = 30.0     # how long a case waits for its answer
TRAILING_WAIT_S = 0.3    # after the first answer: what else arrives on the connection


def load_cases():
    cases = []
    for path in sorted(glob.glob(os.path.join(CASES_DIR, "*.http"))):
        with open(path, "rb") as f:
            data = f.read()
        first, _, raw = data.partition(b"\n")
        if not first.startswith(b"#! "):
            raise ValueError(f"{path}: the first line must be '#! {{expectations}}'")
        cases.append((os.path.basename(path)[:-5], json.loads(first[3:]), raw))
    return cases


def parse_answer(buf, closed=False):
    """One HTTP answer at the start of buf: (status, headers, body, rest) or None if incomplete.
    An answer without a length ends where the server closed (closed: it has). Raises ValueError
    when buf does not start with an HTTP answer."""
    if not buf.startswith(b"HTTP/1."):
        if len(buf) >= 7 or not b"HTTP/1.".startswith(buf):
            raise ValueError(f"not an HTTP answer: {buf[:80]!r}")
        return None
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    lines = buf[:head_end].decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    rest = buf[head_end + 4:]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            eol = rest.find(b"\r\n")
            if eol < 0:
                return None
            size = int(rest[:eol].split(b";")[0], 16)
            if len(rest) < eol + 2 + size + 2:
                return None
            body += rest[eol + 2:eol + 2 + size]
            rest = rest[eol + 2 + size + 2:]
            if size == 0:
                return status, headers, body, rest
    if "content-length" not in headers:
        return (status, headers, rest, b"") if closed else None
    n = int(headers["content-length"])
    if len(rest) < n:
        return None
    return status, headers, rest[:n], rest[n:]


def exchange(port, raw, expect_answer):
    """Sends raw; returns (answer or None, trailing bytes, closed_by_server)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT_S)
    buf = b""
    answer = None
    closed = False
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered early and stopped reading: the answer is on the wire
        deadline = time.monotonic() + (ANSWER_WAIT_S if expect_answer else NO_ANSWER_WAIT_S)
        while answer is None and time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                answer = parse_answer(buf, closed=True)
                break
            buf += chunk
            answer = parse_answer(buf)
        if answer is not None and not closed:
            rest = answer[3]
            deadline = time.monotonic() + TRAILING_WAIT_S
            while time.monotonic() < deadline:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                rest += chunk
            return answer, rest, closed
        return answer, buf, closed
    finally:
        s.close()


class BadInputsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=["tiny_binary", "tiny_multi"], default_model="tiny_binary",
                                    args=["--max-batch", "8", "--max-body-bytes", "16384",
                                          "--connection-timeout", "5"])
        cls.cases = load_cases()
        only = os.environ.get("PGCLD_BAD_INPUT")
        if only:
            cls.cases = [c for c in cls.cases if c[0].startswith(only)]

    def substitute(self, raw):
        head, sep, body = raw.partition(b"\r\n\r\n")
        for role, key in self.daemon.keys.items():
            head = head.replace(b"{{%s}}" % role.upper().encode(), key.encode())
        return head + sep + body

    def check_alive(self, name):
        self.assertIsNone(self.daemon.proc.poll(), f"{name}: the daemon died\n{self.daemon.logs()}")
        r = H.http_request(self.daemon.port, "GET", "/healthz", timeout=10)
        self.assertEqual(r.status, 200, f"{name}: /healthz after the case: {r}")

    def check_case(self, name, exp, raw):
        want_status = exp["status"]
        t0 = time.monotonic()
        answer, rest, _closed = exchange(self.daemon.port, self.substitute(raw), want_status is not None)
        if "max_seconds" in exp:
            took = time.monotonic() - t0
            self.assertLess(took, exp["max_seconds"], f"{name}: the answer took {took:.1f} s")
        if want_status is None:
            self.assertIsNone(answer, f"{name}: expected no answer, got {answer and answer[:3]}")
            self.assertEqual(rest, b"", f"{name}: expected nothing back, got {rest[:200]!r}")
            return
        self.assertIsNotNone(answer, f"{name}: no answer (got {rest[:200]!r})")
        status, headers, body, rest = answer
        what = f"{name}: {status} {body[:300]!r}"
        self.assertEqual(status, want_status, what)
        if exp["code"] is None:
            # libmicrohttpd's own refusal, before pgcld sees the request: no pgcld error body, and
            # the connection closes. (libmicrohttpd 0.9.75 writes the status line and headers of
            # some of these twice, so what follows is not checked further.)
            self.assertNotIn(b'"error"', body, what)
            self.assertEqual(headers.get("connection", "").lower(), "close", what)
            return
        else:
            self.assertEqual(headers.get("content-type", "").split(";")[0], "application/json", what)
            err = json.loads(body)["error"]
            self.assertEqual(err.get("code"), exp["code"], what)
            self.assertTrue(err.get("message"), what)
            self.assertLessEqual(set(err), {"code", "message", "item", "field"}, what)
            if "item" in exp:
                self.assertEqual(err.get("item"), exp["item"], what)
                self.assertIn(str(exp["item"]), err["message"], what)
            if "field" in exp:
                self.assertEqual(err.get("field"), exp["field"], what)
        if status == 401:
            self.assertEqual(headers.get("www-authenticate"), "Bearer", what)
        if status == 405:
            self.assertIn("allow", headers, what)
        # Whatever else came back must be whole HTTP answers (e.g. to the bytes after a lying
        # Content-Length, read as a next request), never garbage or a half answer.
        while rest:
            try:
                parsed = parse_answer(rest)
            except ValueError as e:
                self.fail(f"{name}: garbage after the first answer: {e}")
            self.assertIsNotNone(parsed, f"{name}: a half answer after the first: {rest[:200]!r}")
            rest = parsed[3]

    def test_bad_inputs(self):
        self.assertGreaterEqual(len(self.cases), 1 if os.environ.get("PGCLD_BAD_INPUT") else 60)
        failures = []
        for name, exp, raw in self.cases:
            with self.subTest(case=name):
                try:
                    self.check_case(name, exp, raw)
                except AssertionError as e:
                    failures.append(name)
                    raise e
                finally:
                    self.check_alive(name)
        self.assertEqual(self.daemon.count(), 0, "bad inputs wrote decision rows")
        r = self.daemon.get("/v1/audit/verify", key=self.daemon.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertIs(r.json.get("intact"), True, r)
        self.assertEqual(failures, [])


if __name__ == "__main__":
    H.main()
