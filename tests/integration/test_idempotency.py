"""Idempotency-Key on POST /v1/score against a real pgcld: a retry with the same key and body gets
the original answer byte for byte (same decision_ids, no new rows), also after a model swap and a
restart; the same key with another body is 422; concurrent requests with one key score once (the
others 409 or the replay); keys are per API key, expire, and failed requests do not consume them.

Run: /usr/bin/python3 tests/integration/test_idempotency.py (PGCLD_BIN selects the binary).
"""
import os
import shutil
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

TINY = "tiny_binary"


def tiny_models_dir(parent, versions=("1", "2")):
    root = os.path.join(parent, "models")
    for v in versions:
        shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", v))
    return root


def body(n, seed, prefix="it"):
    return {"items": H.json_items(H.random_embeddings(n, 32, seed), prefix)}


class IdempotencyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-idem-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny",
                                    args=["--max-body-bytes", str(64 << 20), "--max-batch", "4096"])

    def score(self, b, key, api_key=None):
        return self.daemon.score(b, key=api_key, headers={"Idempotency-Key": key})

    def test_retry_returns_the_original_answer(self):
        d = self.daemon
        b = body(5, 1)
        first = self.score(b, "retry-1")
        self.assertEqual(first.status, 200, first)
        self.assertIsNone(first.headers.get("Idempotent-Replayed"))
        rows = d.count()
        again = self.score(b, "retry-1")
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(again.body, first.body)  # byte for byte: same request_id, decision_ids
        self.assertEqual(d.count(), rows, "a replay wrote rows")
        ids = [r["decision_id"] for r in first.json["results"]]
        self.assertEqual(len(d.rows_for(ids)), 5)
        # Without the key the same body is scored anew.
        fresh = d.score(b)
        self.assertEqual(fresh.status, 200)
        self.assertNotEqual(fresh.json["results"][0]["decision_id"], ids[0])

    def test_same_key_other_body_is_422(self):
        first = self.score(body(2, 2), "reuse-1")
        self.assertEqual(first.status, 200, first)
        rows = self.daemon.count()
        other = self.score(body(2, 3), "reuse-1")
        self.assertEqual(other.status, 422, other)
        self.assertEqual(other.error_code(), "idempotency_key_reused")
        self.assertEqual(other.json["error"]["field"], "Idempotency-Key")
        self.assertIn(first.json["request_id"], other.json["error"]["message"])
        self.assertEqual(self.daemon.count(), rows)

    def test_replay_after_model_swap_and_restart(self):
        d = self.daemon
        b = body(3, 4)
        first = self.score(b, "swap-1")
        self.assertEqual(first.status, 200, first)
        v0 = first.json["model"]["version"]
        other = "1" if v0 == "2" else "2"
        r = d.post("/v1/admin/models/tiny/activate", {"version": other})
        self.assertEqual(r.status, 200, r)
        try:
            self.assertEqual(d.score(body(1, 5)).json["model"]["version"], other)
            again = self.score(b, "swap-1")
            self.assertEqual(again.status, 200, again)
            self.assertEqual(again.body, first.body)
            self.assertEqual(again.json["model"]["version"], v0)
            d.restart()
            after_restart = self.score(b, "swap-1")
            self.assertEqual(after_restart.body, first.body)
            self.assertEqual(after_restart.headers.get("Idempotent-Replayed"), "true")
        finally:
            d.post("/v1/admin/models/tiny/activate", {"version": v0})

    def test_concurrent_requests_score_once(self):
        d = self.daemon
        for attempt in range(4):
            b = body(1500, 100 + attempt)  # a large body keeps the first request busy a while
            key = f"race-{attempt}"
            rows = d.count()
            results, lock = [], threading.Lock()
            start = threading.Barrier(6)

            def client():
                start.wait()
                r = self.score(b, key)
                with lock:
                    results.append(r)

            threads = [threading.Thread(target=client) for _ in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            statuses = sorted(r.status for r in results)
            self.assertTrue(set(statuses) <= {200, 409}, statuses)
            oks = [r for r in results if r.status == 200]
            self.assertTrue(oks, statuses)
            self.assertEqual(len({r.body for r in oks}), 1, "two different answers for one key")
            self.assertEqual(sum(r.headers.get("Idempotent-Replayed") is None for r in oks), 1)
            for r in results:
                if r.status == 409:
                    self.assertEqual(r.error_code(), "idempotency_in_flight")
                    self.assertEqual(r.headers.get("Retry-After"), "1")
            self.assertEqual(d.count(), rows + 1500, "the key scored more than once")
            if 409 in statuses:
                return
        self.fail("no request ever overlapped another with the same key (4 attempts)")

    def test_keys_are_per_api_key(self):
        d = self.daemon
        other_scorer = d.create_key("scorer", "second-scorer")
        b = body(1, 6)
        a = self.score(b, "shared-name")
        c = self.score(b, "shared-name", api_key=other_scorer)
        self.assertEqual((a.status, c.status), (200, 200))
        self.assertNotEqual(a.json["results"][0]["decision_id"], c.json["results"][0]["decision_id"])

    def test_failed_requests_do_not_consume_the_key(self):
        bad = self.score({"items": [{"id": "x", "embedding": [1.0, 2.0]}]}, "after-error")
        self.assertEqual(bad.status, 400, bad)
        good = self.score(body(1, 7), "after-error")
        self.assertEqual(good.status, 200, good)
        self.assertIsNone(good.headers.get("Idempotent-Replayed"))

    def test_invalid_keys(self):
        for key in ("has space", "x" * 256, "caf\u00e9"):
            r = self.daemon.raw("POST", "/v1/score", H.encode_body(body(1, 8)),
                                headers={"Idempotency-Key": key, "Content-Type": "application/json"})
            self.assertEqual(r.status, 400, (key, r))
            self.assertEqual(r.error_code(), "invalid_request")
            self.assertEqual(r.json["error"]["field"], "Idempotency-Key")


class ExpiryTest(unittest.TestCase):
    # long enough that the replay inside it cannot miss under a loaded sanitizer build
    TTL_S = 5

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-idem-ttl-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny",
                                    args=["--idempotency-ttl", str(cls.TTL_S)])

    def test_key_expires(self):
        d = self.daemon
        b = body(2, 9)
        first = d.score(b, headers={"Idempotency-Key": "short-lived"})
        self.assertEqual(first.status, 200)
        self.assertEqual(d.score(b, headers={"Idempotency-Key": "short-lived"}).body, first.body)
        # the key expires: the clock passes its recorded expiry (the TTL's seconds pass)
        H.wait_for_clock_past(d.scalar("SELECT expires_at FROM idempotency_keys WHERE idem_key = 'short-lived'"))
        later = d.score(b, headers={"Idempotency-Key": "short-lived"})
        self.assertEqual(later.status, 200)
        self.assertIsNone(later.headers.get("Idempotent-Replayed"))
        self.assertNotEqual(later.json["request_id"], first.json["request_id"])
        # The expired entry was replaced, and the writer purges expired keys.
        self.assertEqual(d.scalar("SELECT count(*) FROM idempotency_keys WHERE idem_key = 'short-lived'"), 1)


if __name__ == "__main__":
    H.main()
