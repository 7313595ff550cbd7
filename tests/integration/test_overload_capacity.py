#!/usr/bin/python3
"""Overload protection against the real daemon: the memory and the compute it lends to requests.

- --max-body-memory: a scoring request whose body does not fit beside the bodies being handled
  waits with its body unread and is served after them, or gets 503 overloaded after half of
  --request-timeout; a request parked in a held-open forward batch holds its float32 arrays in the
  budget as well as its body;
- --max-score-in-flight (2, or $PGCLD_OVERLOAD_IN_FLIGHT): /v1/score saturated by many clients
  with batches of 64 gets 503 overloaded with Retry-After while GET /v1/decisions, GET /v1/models,
  /healthz and an admin call keep answering 200 (their latency is printed: docs/RELIABILITY.md
  quotes it).

Overload protection (docs/RELIABILITY.md, "Overload") is tested by three programs:
test_overload_connections (slow, oversized and too many clients), test_overload_capacity (the
body-memory budget and the in-flight bound under saturation) and test_overload_rate_limits (rate
limits, and the options' parsing and reload); the sockets and raw HTTP they share are in
overload_clients.py.

Run: /usr/bin/python3 tests/integration/test_overload_capacity.py
Environment: PGCLD_BIN (default build/server/pgcld), PGCLD_SOURCE_ROOT (default: the repository),
PGCLD_OVERLOAD_IN_FLIGHT (--max-score-in-flight of SaturationTest, default 2; 0 = no bound).
"""

import http.client
import os
import select
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
from overload_clients import (  # noqa: E402
    ANSWER_TIMEOUT_S, b64_body, open_socket, metric, raw_score_request, expect_answer,
)


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class BodyBudgetCase:
    """--max-body-memory: a scoring request whose body does not fit beside the bodies being handled
    waits with its body unread, is served once they are done, and gets 503 overloaded with
    Retry-After if the wait passes half of --request-timeout. Client A holds the budget by sending
    half of its body; B's body is the same size, and the budget holds one body, not two.
    A subclass sets REQUEST_TIMEOUT_S: long where B must be served (A's scoring and fsync'd
    commit all happen inside B's wait), short enough where B must be refused to keep the test quick,
    with room left for A, whose own deadline runs meanwhile."""

    N_ITEMS = 8
    REQUEST_TIMEOUT_S = None

    @classmethod
    def setUpClass(cls):
        cls.body_a = H.encode_body(b64_body(cls.N_ITEMS, 501))
        cls.body_b = H.encode_body(b64_body(cls.N_ITEMS, 502))
        budget = max(len(cls.body_a), len(cls.body_b)) + 1024
        cls.d = H.start_daemon(cls, args=["--max-body-memory", str(budget),
                                          "--request-timeout", str(cls.REQUEST_TIMEOUT_S)])

    def hold_budget(self):
        """Client A: headers and half its body; returns its socket once pgcld has reserved it."""
        head, body = raw_score_request(self.d.keys["scorer"], self.body_a)
        a = open_socket(self.d.port)
        a.sendall(head + body[:len(body) // 2])
        self.assertTrue(H.wait_until(lambda: (metric(self.d, "pgcld_body_bytes_reserved") or 0) >= len(body),
                                     timeout=ANSWER_TIMEOUT_S), "A's body was not reserved")
        return a, body[len(body) // 2:]


class BodyBudgetServedTest(BodyBudgetCase, unittest.TestCase):
    REQUEST_TIMEOUT_S = 30  # B may wait 15 s

    def test_waits_unread_then_served(self):
        a, a_rest = self.hold_budget()
        b = open_socket(self.d.port)
        try:
            head, body = raw_score_request(self.d.keys["scorer"], self.body_b)
            b.sendall(head + body)  # fits in the socket buffers: pgcld has not read it
            self.assertTrue(H.wait_until(lambda: metric(self.d, "pgcld_body_waiting_requests") == 1,
                                         timeout=ANSWER_TIMEOUT_S), "B is not waiting for the budget")
            # Other routes are not held back by the budget.
            self.assertEqual(self.d.get("/v1/models", key=self.d.keys["reviewer"]).status, 200)
            # B is still waiting, unanswered, while A holds the budget (its state, read from the
            # daemon, not a pause: B's wait ends only at A's release or at its own deadline, 15 s)
            self.assertEqual(metric(self.d, "pgcld_body_waiting_requests"), 1, "B stopped waiting while A held the budget")
            self.assertEqual(select.select([b], [], [], 0)[0], [], "B was answered while A held the budget")
            a.sendall(a_rest)
            expect_answer(self, a, 200, "A")
            answer_b = expect_answer(self, b, 200, "B after A released the budget")
            self.assertEqual(len(answer_b.json["results"]), self.N_ITEMS)
        finally:
            a.close()
            b.close()
        self.assertTrue(H.wait_until(lambda: metric(self.d, "pgcld_body_bytes_reserved") == 0),
                        "the budget was not given back")


class BodyBudgetRefusedTest(BodyBudgetCase, unittest.TestCase):
    REQUEST_TIMEOUT_S = 10  # B is refused after about 5 s; A's deadline is 10 s

    def test_503_when_the_wait_is_too_long(self):
        before = metric(self.d, "pgcld_rejected_total", 'reason="overloaded"') or 0
        a, a_rest = self.hold_budget()
        b = open_socket(self.d.port)
        try:
            head, body = raw_score_request(self.d.keys["scorer"], self.body_b)
            t0 = time.monotonic()
            b.sendall(head + body)
            seen = {}

            def waiting_or_answered():
                seen["waiting"] = seen.get("waiting") or metric(self.d, "pgcld_body_waiting_requests") == 1
                return seen["waiting"] or select.select([b], [], [], 0)[0]

            H.wait_until(waiting_or_answered, timeout=ANSWER_TIMEOUT_S)
            self.assertTrue(seen["waiting"], "B was not seen waiting for the budget")
            answer_b = expect_answer(self, b, 503, "B")  # at half of --request-timeout
            waited = time.monotonic() - t0
            self.assertEqual(answer_b.error_code(), "overloaded")
            self.assertEqual(answer_b.headers.get("Retry-After"), "1")
            # B's wait runs from its headers' arrival, after t0: it cannot end sooner than half the
            # request timeout after t0 (an inequality that a loaded machine only makes truer)
            self.assertGreaterEqual(waited, self.REQUEST_TIMEOUT_S / 2, "refused before its wait was over")
            a.sendall(a_rest)  # A, admitted first, is still served
            expect_answer(self, a, 200, "A")
        finally:
            a.close()
            b.close()
        self.assertGreaterEqual(metric(self.d, "pgcld_rejected_total", 'reason="overloaded"'), before + 1)


class WorkingMemoryTest(unittest.TestCase):
    """A parsed scoring request holds its arrays in the budget (pgcld_request_hold_memory) and gives
    its body back once parsed (http.c, drop_body): while A waits in a held-open forward batch
    (--batch-max-wait-us), the reservation is at least A's float32 and float16 inputs but no longer
    A's body, and B, whose body fits beside A's body but not beside A's arrays, waits until A is
    answered."""

    N_ITEMS = 8
    HOLD_US = 1000000  # the longest batch wait allowed: A sits parsed in the batcher for 1 s

    @classmethod
    def setUpClass(cls):
        cls.body_a = H.encode_body(b64_body(cls.N_ITEMS, 511))
        cls.body_b = H.encode_body(b64_body(1, 512))
        cls.arrays = cls.N_ITEMS * 1024 * (4 + 2)  # A's float32 inputs and their float16 copy, at least
        assert len(cls.body_a) < cls.arrays, "the test needs A's arrays to outweigh its body"
        # A's body fits, and so does B's beside it; A's arrays and B's body do not
        cls.budget = cls.arrays + len(cls.body_b) // 2
        cls.d = H.start_daemon(cls, args=["--max-body-memory", str(cls.budget), "--compute-workers", "1",
                                          "--batch-max-wait-us", str(cls.HOLD_US), "--max-batch", "64"])

    def test_parsed_arrays_hold_the_budget(self):
        """B must arrive while A sits in its held-open batch: B is seen waiting for the budget
        (pgcld_body_waiting_requests) before A is answered. On a machine so loaded that B came
        only after A's answer, the attempt shows nothing, and another is made."""
        for attempt in range(3):
            rows_before = (metric(self.d, "pgcld_forward_batch_rows_count") or 0,
                           metric(self.d, "pgcld_forward_batch_rows_sum") or 0)
            a = open_socket(self.d.port)
            b = open_socket(self.d.port)
            try:
                head, body = raw_score_request(self.d.keys["scorer"], self.body_a)
                a.sendall(head + body)
                self.assertTrue(H.wait_until(lambda: (metric(self.d, "pgcld_body_bytes_reserved") or 0)
                                             >= self.arrays, interval=0.01),
                                "A's parsed arrays are not in the budget: reserved %s, arrays %d" %
                                (metric(self.d, "pgcld_body_bytes_reserved"), self.arrays))
                # the body goes back right after the handler (A then sits in its batch for a second)
                self.assertTrue(H.wait_until(lambda: self.arrays <= (metric(self.d, "pgcld_body_bytes_reserved") or 0)
                                             < self.arrays + len(self.body_a), interval=0.01),
                                "A's body is still in the budget once parsed: reserved %s" %
                                metric(self.d, "pgcld_body_bytes_reserved"))
                head, body = raw_score_request(self.d.keys["scorer"], self.body_b)
                b.sendall(head + body)
                seen = {"b_waited": False}

                def b_waits_or_a_answered():
                    seen["b_waited"] = seen["b_waited"] or metric(self.d, "pgcld_body_waiting_requests") == 1
                    return seen["b_waited"] or select.select([a], [], [], 0)[0]

                H.wait_until(b_waits_or_a_answered, timeout=ANSWER_TIMEOUT_S, interval=0.01)
                expect_answer(self, a, 200, "A")
                expect_answer(self, b, 200, "B")
                # B was admitted only after A was answered: it did not join A's held-open batch
                rows_after = (metric(self.d, "pgcld_forward_batch_rows_count"),
                              metric(self.d, "pgcld_forward_batch_rows_sum"))
                self.assertEqual((rows_after[0] - rows_before[0], rows_after[1] - rows_before[1]),
                                 (2, self.N_ITEMS + 1), "B joined A's batch")
            finally:
                a.close()
                b.close()
            self.assertTrue(H.wait_until(lambda: metric(self.d, "pgcld_body_bytes_reserved") == 0),
                            "the budget was not given back")
            if seen["b_waited"]:
                return
        self.fail("B was never seen waiting for the budget while A was held (3 attempts)")


class SaturationTest(unittest.TestCase):
    """Many clients post batches of 64 to /v1/score without pause; --max-score-in-flight 2 turns
    the excess away at once with 503 overloaded, so reviewer, admin and probe calls answer.

    PGCLD_OVERLOAD_IN_FLIGHT=N runs it with --max-score-in-flight N instead (each row of the table
    in docs/RELIABILITY.md, "Measured"); with 0 (no bound) every scoring answer must be a 200."""

    CLIENTS = 24
    SECONDS = 8.0
    IN_FLIGHT = int(os.environ.get("PGCLD_OVERLOAD_IN_FLIGHT", "2"))

    @classmethod
    def setUpClass(cls):
        cls.d = H.start_daemon(cls, args=["--max-score-in-flight", str(cls.IN_FLIGHT), "--compute-workers", "1"])

    @staticmethod
    def saturate(d, clients, seconds, probes, bounded=True):
        """Runs `clients` scoring loops; once each has been answered (and, when bounded, some were
        refused), probes `probes` (path, key) in turn for `seconds`. Returns (score status counts,
        {path: [latency]}, {path: [status]}, retry_after values)."""
        stop = threading.Event()
        counts, retry, lock = {}, set(), threading.Lock()
        bodies = [H.encode_body(b64_body(64, 100 + i)) for i in range(clients)]
        key = d.keys.get("scorer")

        def scorer(i):
            hdrs = {"Content-Type": "application/json"}
            if key:
                hdrs["Authorization"] = f"Bearer {key}"
            while not stop.is_set():
                conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
                try:
                    while not stop.is_set():
                        conn.request("POST", "/v1/score", body=bodies[i], headers=hdrs)
                        r = conn.getresponse()
                        r.read()
                        with lock:
                            counts[r.status] = counts.get(r.status, 0) + 1
                            if r.status == 503 and r.getheader("Retry-After"):
                                retry.add(r.getheader("Retry-After"))
                except (OSError, http.client.HTTPException):
                    with lock:
                        counts["error"] = counts.get("error", 0) + 1
                finally:
                    conn.close()

        threads = [threading.Thread(target=scorer, args=(i,), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()

        def loaded():  # the load has built up: every client answered, and the bound refused some
            with lock:
                return (sum(v for k, v in counts.items() if k != "error") >= clients and
                        (counts.get(503, 0) > 0 or not bounded))

        if not H.wait_until(loaded, timeout=ANSWER_TIMEOUT_S):
            stop.set()
            raise AssertionError(f"the scoring load did not build up: {counts}")
        lat, status = {p: [] for p, _ in probes}, {p: [] for p, _ in probes}
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            for path, pkey in probes:
                t0 = time.monotonic()
                try:
                    r = H.http_request(d.port, "GET", path, timeout=ANSWER_TIMEOUT_S,
                                       headers={"Authorization": f"Bearer {pkey}"} if pkey else {})
                    status[path].append(r.status)
                except OSError as e:  # a timeout: recorded as a failure
                    status[path].append(repr(e))
                lat[path].append(time.monotonic() - t0)
            time.sleep(0.05)  # the probes' pace over the saturated window (recorded, not asserted)
        stop.set()
        for t in threads:
            t.join(60)
        return counts, lat, status, retry

    def test_staff_and_probes_answer_while_score_saturated(self):
        d = self.d
        probes = [("/v1/decisions?limit=20", d.keys["reviewer"]), ("/v1/models", d.keys["reviewer"]),
                  ("/healthz", None), ("/v1/admin/keys", d.keys["admin"])]
        counts, lat, status, retry = self.saturate(d, self.CLIENTS, self.SECONDS, probes, bounded=self.IN_FLIGHT > 0)
        report = [f"scoring: {self.CLIENTS} clients x batch 64 for {self.SECONDS:.0f} s, "
                  f"--max-score-in-flight {self.IN_FLIGHT}: {counts}"]
        for path, _ in probes:
            ms = [x * 1000 for x in lat[path]]
            report.append(f"  {path}: n={len(ms)} p50={percentile(ms, 50):.1f} ms p99={percentile(ms, 99):.1f} ms "
                          f"max={max(ms):.1f} ms")
        print("\n".join(report), file=sys.stderr)
        for path, _ in probes:
            self.assertTrue(status[path], path)
            self.assertTrue(all(s == 200 for s in status[path]), f"{path}: {status[path]}")
        self.assertGreater(counts.get(200, 0), 0, counts)
        self.assertNotIn("error", counts)
        if self.IN_FLIGHT == 0:  # no bound: nothing is refused, every client waits its turn
            self.assertEqual(set(counts), {200}, counts)
            self.assertEqual(metric(d, "pgcld_rejected_total", 'reason="overloaded"'), 0)
        else:
            self.assertGreater(counts.get(503, 0), 0, counts)
            self.assertEqual(retry, {"1"})
            self.assertGreaterEqual(metric(d, "pgcld_rejected_total", 'reason="overloaded"'), counts[503])
        # afterwards a single request is admitted again
        self.assertEqual(d.score(b64_body(1, 99)).status, 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
