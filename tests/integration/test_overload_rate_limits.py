#!/usr/bin/python3
"""Overload protection against the real daemon: rate limits, and the overload options.

- --rate-limit-rps / --rate-limit-burst: 429 rate_limited with Retry-After and the JSON error,
  then success after waiting; /v1/score and v2 inference share a key's bucket; per key (per
  address with --auth off); reviewer and admin calls are not limited;
- the overload options' parsing and validation (defaults, flags, environment, file, bounds,
  --help), and their SIGHUP reload (rate limits, the in-flight bound, the request deadline).

Overload protection (docs/RELIABILITY.md, "Overload") is tested by three programs:
test_overload_connections (slow, oversized and too many clients), test_overload_capacity (the
body-memory budget and the in-flight bound under saturation) and test_overload_rate_limits (rate
limits, and the options' parsing and reload); the sockets and raw HTTP they share are in
overload_clients.py.

Run: /usr/bin/python3 tests/integration/test_overload_rate_limits.py
Environment: PGCLD_BIN (default build/server/pgcld), PGCLD_SOURCE_ROOT (default: the repository).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
from overload_clients import (  # noqa: E402
    b64_body, open_socket, Trickle, source_available, http_from, metric,
)


# Scoring requests a rate-limit test makes at most while waiting for its first 429 (at 1 request a
# second, a 429 needs two requests within a second: reached at once except on a machine so loaded
# that every request takes a second).
RATE_TRIES = 60


class RateLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.start_daemon(cls, args=["--rate-limit-rps", "1", "--rate-limit-burst", "2"])

    V2_BODY = {"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [1, 1024], "data": [0.01] * 1024}]}

    def test_429_then_success_after_waiting(self):
        key = self.d.create_key("scorer", "rl-1")
        for i in range(2):  # the burst
            self.assertEqual(self.d.score(b64_body(1, 10 + i), key=key).status, 200)
        # then 1 a second: a 429 comes as soon as two requests fall within a second of each other
        # (on a machine so loaded that each takes a second, only after more tries)
        for i in range(RATE_TRIES):
            r = self.d.score(b64_body(1, 12 + i), key=key)
            if r.status != 200:
                break
        self.assertEqual((r.status, r.error_code()), (429, "rate_limited"), r)
        self.assertIsInstance(r.json["error"]["message"], str)
        self.assertEqual(set(r.json["error"]), {"code", "message"})
        retry = r.headers.get("Retry-After")
        self.assertIsNotNone(retry)
        self.assertTrue(retry.isdigit() and int(retry) >= 1, retry)
        time.sleep(int(retry) + 0.1)  # the point: the wait Retry-After asks for, then a 200 (no polling)
        self.assertEqual(self.d.score(b64_body(1, 30), key=key).status, 200)

    def test_v1_and_v2_share_the_key_bucket(self):
        key = self.d.create_key("scorer", "rl-v2")
        t0, ok, refused = time.monotonic(), 0, {"v1": 0, "v2": 0}
        for i in range(RATE_TRIES):
            if i >= 12 and refused["v1"] and refused["v2"]:
                break
            if i % 2:
                r = self.d.post("/v2/models/toxicity/infer", self.V2_BODY, key=key)
                which = "v2"
            else:
                r = self.d.score(b64_body(1, 40 + i), key=key)
                which = "v1"
            if r.status == 200:
                ok += 1
            else:
                self.assertEqual((r.status, r.error_code()), (429, "rate_limited"), r)
                self.assertTrue(r.headers.get("Retry-After", "").isdigit(), r.headers)
                refused[which] += 1
        elapsed = time.monotonic() - t0
        # one bucket: at most the burst plus the refill, whatever the route
        self.assertLessEqual(ok, 2 + int(elapsed) + 1, (ok, elapsed))
        self.assertGreater(refused["v2"], 0, refused)
        self.assertGreater(refused["v1"], 0, refused)

    def test_keys_are_independent_and_staff_not_limited(self):
        a, b = self.d.create_key("scorer", "rl-a"), self.d.create_key("scorer", "rl-b")
        codes = []
        while 429 not in codes and len(codes) < RATE_TRIES:
            codes.append(self.d.score(b64_body(1, 20 + len(codes)), key=a).status)
        self.assertIn(429, codes)
        self.assertEqual(self.d.score(b64_body(1, 30), key=b).status, 200)
        for _ in range(10):
            self.assertEqual(self.d.get("/v1/decisions?limit=1", key=self.d.keys["reviewer"]).status, 200)
            self.assertEqual(self.d.get("/v1/admin/keys", key=self.d.keys["admin"]).status, 200)
            self.assertEqual(self.d.get("/v1/models", key=a).status, 200)  # only scoring is limited
        self.assertGreaterEqual(metric(self.d, "pgcld_rejected_total", 'reason="rate_limited"'), 1)
        self.assertGreaterEqual(metric(self.d, "pgcld_requests_total", 'route="POST /v1/score",code="429"'), 1)


class RateLimitByAddressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = H.start_daemon(cls, auth=False, args=["--rate-limit-rps", "1", "--rate-limit-burst", "1"])

    def test_per_address_with_auth_off(self):
        self.assertEqual(self.d.score(b64_body(1, 40)).status, 200)
        for i in range(RATE_TRIES):
            r = self.d.score(b64_body(1, 41 + i))
            if r.status != 200:
                break
        self.assertEqual((r.status, r.error_code()), (429, "rate_limited"), r)
        if source_available("127.0.0.2"):
            r = http_from(self.d.port, "127.0.0.2", "POST", "/v1/score", b64_body(1, 42))
            self.assertEqual(r.status, 200, r)


class OptionsTest(unittest.TestCase):
    """Parsing and validation of the overload options (as tests/integration/test_config.py)."""

    OPTIONS = {  # name: (default, lowest, highest, reloadable)
        "max-connections-per-ip": ("0", 0, 65536, False),
        "request-timeout": ("60", 0, 3600, True),
        "max-score-in-flight": ("128", 0, 65536, True),
        "rate-limit-rps": ("0", 0, 1000000, True),
        "rate-limit-burst": ("0", 0, 1000000, True),
    }

    def setUp(self):
        H.require_binary()
        self.tmp = tempfile.mkdtemp(prefix="pgcld-overload-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def pgcld(self, *args, env=None):
        base = {k: v for k, v in os.environ.items() if not k.startswith("PGCLD_") or k in ("PGCLD_BIN",)}
        base.update(env or {})
        return subprocess.run([H.PGCLD_BIN, "serve", *args, "--print-config"], cwd=self.tmp, env=base,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    def printed(self, *args, env=None):
        r = self.pgcld(*args, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = {}
        for line in r.stdout.splitlines():
            if " = " in line and not line.startswith("#"):
                name, rest = line.split(" = ", 1)
                value, _, source = rest.partition("  # ")
                out[name] = (value, source)
        return out

    def test_defaults_flags_env_file_and_bounds(self):
        got = self.printed()
        for name, (default, lo, hi, _) in self.OPTIONS.items():
            self.assertEqual(got[name], (default, "default"), name)
        conf = os.path.join(self.tmp, "o.conf")
        with open(conf, "w") as f:
            f.write("rate-limit-rps = 5\nrequest-timeout = 7\n")
        got = self.printed("--config", conf, "--max-score-in-flight", "3",
                           env={"PGCLD_RATE_LIMIT_BURST": "9", "PGCLD_REQUEST_TIMEOUT": "8"})
        self.assertEqual(got["rate-limit-rps"], ("5", f"file {conf}:1"))
        self.assertEqual(got["request-timeout"], ("8", "env PGCLD_REQUEST_TIMEOUT"))
        self.assertEqual(got["rate-limit-burst"], ("9", "env PGCLD_RATE_LIMIT_BURST"))
        self.assertEqual(got["max-score-in-flight"], ("3", "flag --max-score-in-flight"))
        for name, (_, lo, hi, _) in self.OPTIONS.items():
            with self.subTest(name=name):
                self.assertEqual(self.printed(f"--{name}", str(hi))[name][0], str(hi))
                self.assertEqual(self.printed(f"--{name}={lo}")[name][0], str(lo))
                for bad in (str(lo - 1), str(hi + 1), "x", "1.5", ""):
                    r = self.pgcld(f"--{name}={bad}")
                    self.assertEqual(r.returncode, 2, f"--{name}={bad}: {r.stdout}{r.stderr}")
                    self.assertIn(f"--{name}", r.stderr)
                    self.assertEqual(r.stdout, "")
                env = "PGCLD_" + name.upper().replace("-", "_")
                r = self.pgcld(env={env: "-5"})
                self.assertEqual(r.returncode, 2)
                self.assertIn(env, r.stderr)

    def test_help_lists_them(self):
        r = H.run_pgcld("--help", timeout=60)
        for name, (_, _, _, reloadable) in self.OPTIONS.items():
            self.assertIn(f"--{name} N", r.stdout)
            tail = r.stdout.split("SIGHUP re-reads", 1)[1].split(";", 1)[0]
            self.assertEqual(name in tail, reloadable, name)


class ReloadTest(unittest.TestCase):
    """SIGHUP applies new rate limits, the in-flight bound and the request deadline."""

    def test_sighup(self):
        H.require_binary()
        tmp = tempfile.mkdtemp(prefix="pgcld-overload-reload-")
        self.addCleanup(shutil.rmtree, tmp, True)
        conf = os.path.join(tmp, "pgcld.conf")

        def write_conf(text):
            with open(conf + ".tmp", "w") as f:
                f.write(text)
            os.replace(conf + ".tmp", conf)

        def reload():
            before = d.logs(limit=10 ** 9).count("config: reloaded")
            d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(H.wait_until(lambda: d.logs(limit=10 ** 9).count("config: reloaded") > before),
                            d.logs())

        write_conf("rate-limit-rps = 0\nrequest-timeout = 0\n")  # no request deadline at first
        d = H.Daemon(args=["--config", conf])
        self.addCleanup(d.cleanup)
        d.start()
        for i in range(5):
            self.assertEqual(d.score(b64_body(1, 200 + i)).status, 200)
        write_conf("rate-limit-rps = 1\nrate-limit-burst = 1\nmax-score-in-flight = 1\nrequest-timeout = 2\n")
        reload()
        self.assertIn("rate-limit-rps = 1", d.logs(limit=10 ** 9))
        codes = [d.score(b64_body(1, 210)).status]
        while 429 not in codes and len(codes) < RATE_TRIES:
            codes.append(d.score(b64_body(1, 210 + len(codes))).status)
        self.assertEqual(codes[0], 200)
        self.assertIn(429, codes)
        # the deadline (none before the reload) applies to new requests: a trickle is cut by it
        before = metric(d, "pgcld_rejected_total", 'reason="request_timeout"')
        t_connect = time.monotonic()
        s = open_socket(d.port)
        t = Trickle(s, b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 2000, 0.2).start()
        try:
            self.assertTrue(t.wait_closed(), "the reloaded request-timeout did not cut a trickling client")
        finally:
            t.stop()
            s.close()
        self.assertEqual(t.answer, b"")
        self.assertGreaterEqual(t.closed_at - t_connect, 2)
        self.assertEqual(metric(d, "pgcld_rejected_total", 'reason="request_timeout"'), before + 1)
        write_conf("rate-limit-rps = 0\n")
        reload()
        for i in range(4):
            self.assertEqual(d.score(b64_body(1, 220 + i)).status, 200)
        self.assertEqual(d.stop(), 0, d.logs())


if __name__ == "__main__":
    unittest.main(verbosity=2)
