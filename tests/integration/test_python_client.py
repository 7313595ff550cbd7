"""The Python client (clients/python/pgcld_client) against the real daemon (issue 19, item 7).

- scoring: lists of floats, a 2-D numpy array (sent as an octet-stream body) and a list of 1-D
  arrays give the numbers a raw POST /v1/score gives for the same float32 values (and the same
  input_sha256 in the audit rows); results come back in the order of the embeddings with their ids,
  also when the ids are too many for the Pgcld-Item-Ids header; the model and policy come along;
  error answers raise PgcldError with pgcld's status, code, field and item;
- retries: a scoring request whose answer is lost (a proxy drops the connection after pgcld
  answered) is repeated with its Idempotency-Key and recorded once (rows counted in the audit
  database), the repeat being pgcld's stored answer; a 503 audit_unavailable (the SQLite file
  write-locked behind pgcld's back) is retried after its Retry-After and recorded once; a 429 of
  the rate limit is retried no sooner than its Retry-After says;
- reads: decisions() walks several cursor pages and lists every decision once, newest first;
- contests and resolutions, with the filer rule and the effective outcome;
- proofs: client.proof() verifies offline with verify_inclusion() against a signed checkpoint the
  caller holds and against the published head hash; a tampered proof, or the proof of a row
  changed in the database, does not;
- the README's "Try it" snippet runs as printed.

Run: /usr/bin/python3 tests/integration/test_python_client.py (PGCLD_BIN selects the binary).
"""
import base64
import copy
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

sys.path.insert(0, os.path.join(H.SOURCE_ROOT, "clients", "python"))
from pgcld_client import Client, PgcldError, ProofError, verify_inclusion  # noqa: E402

import numpy as np  # noqa: E402

RATE_TRIES = 60
RESULT_MEMBERS = ("id", "label", "label_index", "probabilities", "toxicity", "decision", "vector")


class RecordingClient(Client):
    """A Client that records what each attempt sent: (time, method, path, headers)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent = []

    def _send(self, request):
        self.sent.append((time.monotonic(), request.method, request.path, dict(request.headers)))
        return super()._send(request)


def client_for(owner, d, role="scorer", **kwargs):
    """A RecordingClient of d with the key of role, closed when owner (a test or its class) ends."""
    c = RecordingClient(f"http://127.0.0.1:{d.port}", d.keys[role], timeout=120, **kwargs)
    (owner.addCleanup if isinstance(owner, unittest.TestCase) else owner.addClassCleanup)(c.close)
    return c


def same_numbers(results):
    """The members of score results that must not depend on the wire form (not decision_id)."""
    return [{k: r.get(k) for k in RESULT_MEMBERS} for r in results]


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 in front of the daemon. The first `drops` connections forward the
    request and, as soon as the daemon starts answering (its rows are committed by then), close
    the client's side without passing the answer on: the client loses an answer that was given.
    Later connections are passed through."""

    def __init__(self, upstream_port, drops):
        self.upstream_port = upstream_port
        self.drops = drops
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.listener.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            drop = self.dropped < self.drops
            self.dropped += drop
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, drop), daemon=True).start()

    @staticmethod
    def _pump(source, sink, drop):
        try:
            while True:
                data = source.recv(65536)
                if not data or drop:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (sink, source):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class ScoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",))
        cls.D = H.load_config("toxicity")["dims"]["D"]

    def test_lists_arrays_and_raw_score_give_the_same_numbers(self):
        Z = H.random_embeddings(6, self.D, seed=1)
        ids = [f"m-{i}" for i in range(len(Z))]
        raw = self.d.score({"items": [{"id": i, "embedding": H.embedding_json(z)} for i, z in zip(ids, Z)]})
        self.assertEqual(raw.status, 200, raw)
        c = client_for(self, self.d)
        answers = {
            "lists": c.score(Z.tolist(), ids=ids),
            "array": c.score(Z, ids=ids),
            "array float64": c.score(Z.astype(np.float64), ids=ids),
            "rows": c.score(list(Z), ids=ids),
        }
        sent = {name: headers["Content-Type"] for (_, _, _, headers), name in zip(c.sent, answers)}
        self.assertEqual(sent, {"lists": "application/json", "array": "application/octet-stream",
                                "array float64": "application/octet-stream", "rows": "application/json"})
        want = same_numbers(raw.json["results"])
        for name, answer in answers.items():
            with self.subTest(name):
                self.assertEqual(same_numbers(answer.results), want)
                self.assertEqual(answer.model, raw.json["model"])
                self.assertEqual(answer.policy, raw.json["policy"])
                self.assertFalse(answer.replayed)
                rows = self.d.rows_for(r["decision_id"] for r in answer)
                self.assertEqual([rows[r["decision_id"]]["input_sha256"] for r in answer],
                                 [H.input_sha256(z) for z in Z])

    def test_ids_stay_in_order(self):
        n = 40
        Z = H.random_embeddings(n, self.D, seed=2)
        ids = [f"id-{(i * 17) % n:03d}" for i in range(n)]  # not sorted
        c = client_for(self, self.d)
        for name, answer in (("array", c.score(Z, ids=ids)), ("lists", c.score(Z.tolist(), ids=ids))):
            with self.subTest(name):
                self.assertEqual([r["id"] for r in answer], ids)
        self.assertEqual([r["id"] for r in c.score(Z[:3])], ["0", "1", "2"])
        self.assertEqual([r["id"] for r in c.score(Z[:3].tolist())], ["0", "1", "2"])
        # ids too many for the Pgcld-Item-Ids header: the array goes as JSON, ids still in order
        Z = H.random_embeddings(100, self.D, seed=3)
        long_ids = [f"{i:04d}-" + "x" * 250 for i in range(len(Z))][::-1]  # 25 KB of ids
        answer = c.score(Z, ids=long_ids, return_vector=False)
        self.assertEqual(c.sent[-1][3]["Content-Type"], "application/json")
        self.assertEqual([r["id"] for r in answer], long_ids)
        self.assertNotIn("vector", answer[0])
        with self.assertRaises(ValueError):
            c.score(Z, ids=ids[:-1])

    def test_without_numpy(self):
        """Lists are scored with the standard library alone (numpy made unimportable)."""
        Z = H.random_embeddings(2, self.D, seed=4)
        script = ("import json, sys\nsys.modules['numpy'] = None\nfrom pgcld_client import Client\n"
                  "rows, url, key = json.loads(sys.stdin.read())\n"
                  "print(json.dumps(Client(url, key).score(rows, ids=['a', 'b']).results))\n")
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           input=json.dumps([Z.tolist(), f"http://127.0.0.1:{self.d.port}", self.d.keys["scorer"]]),
                           env={**os.environ, "PYTHONPATH": os.path.join(H.SOURCE_ROOT, "clients", "python")})
        self.assertEqual(p.returncode, 0, p.stderr)
        with client_for(self, self.d) as c:
            self.assertEqual(same_numbers(json.loads(p.stdout)), same_numbers(c.score(Z, ids=["a", "b"]).results))

    def test_one_client_shared_by_threads(self):
        c = client_for(self, self.d)
        Z = H.random_embeddings(16, self.D, seed=5)
        want = same_numbers(c.score(Z, ids=[str(i) for i in range(16)]).results)
        got, errors = [None] * 8, []

        def work(k):
            try:
                got[k] = same_numbers(c.score(Z[2 * k:2 * k + 2], ids=[str(2 * k), str(2 * k + 1)]).results)
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(sum(got, []), want)

    def test_errors_raise_pgcld_errors(self):
        c = client_for(self, self.d)
        Z = H.random_embeddings(2, self.D, seed=3)
        with self.assertRaises(PgcldError) as e:
            c.score([Z[0].tolist(), Z[1].tolist()[:-1]])
        self.assertEqual((e.exception.status, e.exception.code, e.exception.item, e.exception.field),
                         (400, "dimension_mismatch", 1, "items[1].embedding_b64"))
        with self.assertRaises(PgcldError) as e:
            c.score(Z, model="no_such_model")
        self.assertEqual((e.exception.status, e.exception.code), (404, "model_not_found"))
        self.assertIn("no_such_model", e.exception.message)
        with self.assertRaises(PgcldError) as e, Client(f"http://127.0.0.1:{self.d.port}", "pgcld_bogus_key") as bad:
            bad.score(Z)
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthorized"))
        too_big = Z.tolist()
        too_big[0][5] = 1e39  # beyond float32: sent as JSON numbers, pgcld names the value
        with self.assertRaises(PgcldError) as e:
            c.score(too_big)
        self.assertEqual((e.exception.status, e.exception.code, e.exception.item), (400, "non_finite_value", 0))


class ReadmeTest(unittest.TestCase):
    """The README's "Try it" runs the client's snippet as it is printed there."""

    def test_the_readme_snippet_scores_the_example(self):
        H.require_models("toxicity")
        d = H.start_daemon(self.__class__, models=("toxicity",))
        with open(os.path.join(H.SOURCE_ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        m = re.search(r'PYTHONPATH=clients/python python3 - "\$KEY" <<\'PY\'\n(.*?)\nPY\n', readme, re.S)
        self.assertIsNotNone(m, "the README's Python snippet is gone")
        script = m.group(1).replace("http://127.0.0.1:8080", f"http://127.0.0.1:{d.port}")
        self.assertNotEqual(script, m.group(1))
        p = subprocess.run([sys.executable, "-", d.keys["scorer"]], input=script, capture_output=True, text=True,
                           timeout=120, cwd=H.SOURCE_ROOT,
                           env={**os.environ, "PYTHONPATH": os.path.join(H.SOURCE_ROOT, "clients", "python")})
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(H.SOURCE_ROOT, "docs", "examples", "score-request.json"), encoding="utf-8") as f:
            item_id = json.load(f)["items"][0]["id"]
        item, label, decision, toxicity = p.stdout.split()
        self.assertEqual(item, item_id)
        self.assertIn(decision, ("allow", "review", "block"))
        self.assertEqual(d.count(), 1)


class RetryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",))
        cls.D = H.load_config("toxicity")["dims"]["D"]

    def test_a_lost_answer_is_retried_and_recorded_once(self):
        proxy = DroppingProxy(self.d.port, drops=1)
        self.addCleanup(proxy.close)
        retries = []
        c = RecordingClient(f"http://127.0.0.1:{proxy.port}", self.d.keys["scorer"], timeout=120,
                            on_retry=lambda *a: retries.append(a))
        self.addCleanup(c.close)
        Z = H.random_embeddings(4, self.D, seed=10)
        for name, embeddings in (("array", Z), ("lists", Z.tolist())):
            with self.subTest(name):
                before, proxy.dropped, proxy.drops = self.d.count(), 0, 1
                c.close()  # the next request opens the connection the proxy drops
                answer = c.score(embeddings, ids=["a", "b", "c", "d"])
                self.assertEqual(proxy.dropped, 1)
                self.assertEqual(len(retries), 1 if name == "array" else 2, retries)
                self.assertIsInstance(retries[-1][2], OSError)
                self.assertEqual(self.d.count(), before + 4, "the repeated request was recorded twice")
                self.assertTrue(answer.replayed, "the repeat should be the answer pgcld stored")
                keys = [headers.get("Idempotency-Key") for _, _, _, headers in c.sent[-2:]]
                self.assertEqual(keys[0], keys[1])
                rows = self.d.rows_for(r["decision_id"] for r in answer)
                self.assertEqual(len(rows), 4)
                self.assertEqual({row["request_id"] for row in rows.values()}, {answer.request_id})

    @H.sqlite_only("write-locks the SQLite file")
    def test_503_is_retried_after_retry_after_and_recorded_once(self):
        lock = sqlite3.connect(self.d.db_path, timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        lock.execute("INSERT INTO schema_migrations SELECT * FROM schema_migrations WHERE 0")
        waits = []

        def release_and_record(attempt, delay, error):
            waits.append((attempt, delay, getattr(error, "status", None), getattr(error, "code", None)))
            if lock.in_transaction:
                lock.execute("ROLLBACK")

        self.addCleanup(lock.close)
        self.addCleanup(lambda: lock.in_transaction and lock.execute("ROLLBACK"))
        c = client_for(self, self.d, on_retry=release_and_record)
        before = self.d.count()
        answer = c.score(H.random_embeddings(3, self.D, seed=11))
        self.assertEqual(waits, [(1, 1.0, 503, "audit_unavailable")])
        self.assertGreaterEqual(c.sent[1][0] - c.sent[0][0], 1.0)
        self.assertEqual(c.sent[0][3]["Idempotency-Key"], c.sent[1][3]["Idempotency-Key"])
        self.assertFalse(answer.replayed)
        self.assertEqual(self.d.count(), before + 3)

    @H.sqlite_only("write-locks the SQLite file")
    def test_a_timed_out_attempt_is_answered_once(self):
        """The first attempt times out while pgcld waits for the audit database; the repeat finds it
        still being answered (409 idempotency_in_flight, retried after its Retry-After), and then
        gets its stored answer: one set of rows."""
        lock = sqlite3.connect(self.d.db_path, timeout=30, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        lock.execute("INSERT INTO schema_migrations SELECT * FROM schema_migrations WHERE 0")
        self.addCleanup(lock.close)
        self.addCleanup(lambda: lock.in_transaction and lock.execute("ROLLBACK"))
        waits = []

        def release_on_409(attempt, delay, error):
            waits.append((delay, getattr(error, "code", type(error).__name__)))
            if getattr(error, "status", None) == 409 and lock.in_transaction:
                lock.execute("ROLLBACK")

        c = RecordingClient(f"http://127.0.0.1:{self.d.port}", self.d.keys["scorer"], timeout=1.5,
                            retries=5, on_retry=release_on_409)
        self.addCleanup(c.close)
        before = self.d.count()
        answer = c.score(H.random_embeddings(3, self.D, seed=12))
        self.assertIn((1.0, "idempotency_in_flight"), waits)
        self.assertIn(waits[0][1], ("timeout", "TimeoutError"), waits)
        self.assertTrue(answer.replayed)
        self.assertEqual(self.d.count(), before + 3)
        self.assertEqual(len({h["Idempotency-Key"] for _, _, _, h in c.sent}), 1)

    def test_a_non_retryable_error_is_raised_at_once(self):
        # a non-retryable status is raised at once, whatever retries says
        c = client_for(self, self.d, retries=5)
        with self.assertRaises(PgcldError) as e:
            c.score([[0.0] * (self.D + 1)])
        self.assertEqual(e.exception.code, "dimension_mismatch")
        self.assertEqual(len(c.sent), 1)


class IdleConnectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",), args=["--connection-timeout", "1"])
        cls.D = H.load_config("toxicity")["dims"]["D"]

    def wait_idle_closed(self):
        """Waits until pgcld has closed every kept-open connection (its gauge counts only the
        /metrics request asking)."""
        H.wait_for(lambda: H.metric(self.d, "pgcld_open_connections") == 1,
                   "pgcld closes the idle kept-open connections (--connection-timeout 1)")

    def test_a_connection_closed_while_idle_is_reopened(self):
        """pgcld closes the kept-open connection after 1 s idle: the next call, even without
        retries, goes out again on a new connection, once."""
        c = client_for(self, self.d, retries=0)
        before = self.d.count()
        c.score(H.random_embeddings(2, self.D, seed=80))
        self.wait_idle_closed()
        c.score(H.random_embeddings(2, self.D, seed=81))
        self.assertEqual(len(list(client_for(self, self.d, "reviewer", retries=0).decisions(page_size=1))), before + 4)
        self.wait_idle_closed()
        self.assertEqual(c.score(H.random_embeddings(1, self.D, seed=82))[0]["id"], "0")
        self.assertEqual(self.d.count(), before + 5)


class RateLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_daemon(cls, models=("toxicity",), args=["--rate-limit-rps", "1", "--rate-limit-burst", "1"])
        cls.D = H.load_config("toxicity")["dims"]["D"]

    def test_429_waits_for_retry_after(self):
        waits = []
        c = client_for(self, self.d, retries=10, on_retry=lambda attempt, delay, error: waits.append((delay, error)))
        before = self.d.count()
        # a 429 comes as soon as two requests fall within a second (RATE_TRIES: see
        # test_overload_rate_limits, for a machine so loaded that each request takes a second)
        for i in range(RATE_TRIES):
            c.score(H.random_embeddings(2, self.D, seed=20 + i))
            if waits and i >= 3:
                break
        self.assertEqual(self.d.count(), before + 2 * (i + 1))
        self.assertTrue(waits, "requests at once under a limit of 1 a second were never refused")
        for delay, error in waits:
            self.assertEqual((error.status, error.code), (429, "rate_limited"))
            self.assertEqual(delay, error.retry_after)
            self.assertGreaterEqual(delay, 1)
        # every retry came no sooner than the Retry-After of the refusal before it
        times = [t for t, *_ in c.sent]
        refused = 0
        for k in range(1, len(times)):
            if c.sent[k][3]["Idempotency-Key"] == c.sent[k - 1][3]["Idempotency-Key"]:
                self.assertGreaterEqual(times[k] - times[k - 1], waits[refused][0])
                refused += 1
        self.assertEqual(refused, len(waits))

    def test_without_retries_the_429_is_raised(self):
        c = client_for(self, self.d, retries=0)
        with self.assertRaises(PgcldError) as e:
            for i in range(RATE_TRIES):
                c.score(H.random_embeddings(1, self.D, seed=40 + i))
        self.assertEqual((e.exception.status, e.exception.code), (429, "rate_limited"))
        self.assertGreaterEqual(e.exception.retry_after, 1)


class ReviewTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.d = H.start_signing_daemon(cls, "pgcld-pyclient-")
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.scorer = client_for(cls, cls.d)
        cls.reviewer = client_for(cls, cls.d, "reviewer")
        cls.answers = [cls.scorer.score(H.random_embeddings(n, cls.D, seed=50 + n), ids=[f"r{n}-{i}" for i in range(n)])
                       for n in (5, 7, 11)]

    def test_decisions_follow_the_cursors(self):
        c = client_for(self, self.d, "reviewer")
        listed = [s["decision_id"] for s in c.decisions(page_size=4, model="toxicity")]
        in_db = [r["decision_id"] for r in self.d.query("SELECT decision_id FROM decisions ORDER BY seq DESC")]
        self.assertEqual(listed, in_db)
        self.assertGreater(len(in_db), 8)
        pages = [path for _, _, path, _ in c.sent]
        self.assertEqual(len(pages), len(in_db) // 4 + 1, pages)
        self.assertTrue(all("cursor=" in p for p in pages[1:]), pages)
        one = self.answers[1]
        listed = [s["item_id"] for s in c.decisions(page_size=3, request_id=one.request_id)]
        self.assertEqual(listed, [r["id"] for r in one][::-1])
        with self.assertRaises(PgcldError) as e:
            list(c.decisions(decision="maybe"))
        self.assertEqual((e.exception.status, e.exception.field), (400, "decision"))

    def test_contest_and_resolution(self):
        decision_id = self.answers[0][2]["decision_id"]
        second = self.d.create_key("reviewer", "second reviewer")
        other = Client(f"http://127.0.0.1:{self.d.port}", second, timeout=120)
        self.addCleanup(other.close)
        filed = self.reviewer.contest(decision_id, "quotes an insult to condemn it")
        self.assertEqual((filed["decision_id"], filed["status"]), (decision_id, "open"))
        with self.assertRaises(PgcldError) as e:
            other.contest(decision_id, "again")
        self.assertEqual((e.exception.status, e.exception.code), (409, "contest_open"))
        self.assertIn(filed["contest_id"], [c["contest_id"] for c in self.reviewer.contests()])
        with self.assertRaises(PgcldError) as e:
            self.reviewer.resolve(filed["contest_id"], "upheld", "my own")
        self.assertEqual((e.exception.status, e.exception.code), (403, "filer_cannot_resolve"))
        labels = list(self.answers[0][2]["probabilities"])
        corrected = [label for label in labels if label != self.answers[0][2]["label"]][0]
        resolved = other.resolve(filed["contest_id"], "overturned", "quotation, not abuse", corrected_label=corrected)
        self.assertEqual((resolved["outcome"], resolved["corrected_label"]), ("overturned", corrected))
        record = self.reviewer.decision(decision_id)
        self.assertEqual(record["contest_status"], "resolved")
        self.assertEqual((record["effective_outcome"]["status"], record["effective_outcome"]["label"]),
                         ("overturned", corrected))
        self.assertIn(filed["contest_id"], [c["contest_id"] for c in self.reviewer.contests(status="resolved")])
        self.assertIn(decision_id, [s["decision_id"] for s in self.reviewer.decisions(contest="resolved")])
        with self.assertRaises(PgcldError) as e:
            self.reviewer.decision("0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b")
        self.assertEqual((e.exception.status, e.exception.code), (404, "decision_not_found"))

    def test_proofs_verify_offline_and_tampered_ones_do_not(self):
        r = self.d.post("/v1/audit/checkpoints", {}, key=self.d.keys["admin"])
        self.assertEqual(r.status, 201, r)
        with open(r.json["file"], encoding="utf-8") as f:
            held = json.load(f)
        for answer in self.answers:
            for result in answer:
                proof = self.reviewer.proof(result["decision_id"], format="chain-v2")
                record = self.reviewer.decision(result["decision_id"])
                ok = verify_inclusion(proof, checkpoint=held, decision=record)
                self.assertEqual(ok.anchored_by, "checkpoint")
                self.assertEqual(ok.decision["decision_id"], result["decision_id"])
                self.assertEqual((ok.decision["label"], ok.decision["item_id"]), (result["label"], result["id"]))
                self.assertEqual(ok.entry_hash, proof["chain_entry"]["hash"])
                verify_inclusion(proof, decision=result)
        proof = self.reviewer.proof(self.answers[1][3]["decision_id"], format="chain-v2")
        for name, tamper in self.tamperings(proof, held):
            with self.subTest(name):
                bad, check = tamper()
                with self.assertRaises(ProofError):
                    check(bad)

    def test_tlog_proofs_verify_with_the_log_key_and_tampered_ones_do_not(self):
        """The default proof (the transparency log's shape) verifies with the log's note key and
        names its decision by the record's id at its position; every tampering, a relabelled
        proof, another key, and no key at all are refused."""
        key = self.reviewer.log_key()
        ids = [result["decision_id"] for answer in self.answers for result in answer]
        for decision_id in ids:
            proof = self.reviewer.proof(decision_id)
            self.assertEqual(proof["format"], "tlog", proof)
            ok = verify_inclusion(proof, key=key, decision=self.reviewer.decision(decision_id))
            self.assertEqual((ok.kind, ok.id, ok.anchored_by), ("decision", decision_id, "checkpoint"))
        proof, other = self.reviewer.proof(ids[3]), self.reviewer.proof(ids[0])

        def edited(edit):
            bad = copy.deepcopy(proof)
            edit(bad)
            return bad

        def byte_changed(p):
            data = bytearray(base64.b64decode(p["leaf_data"]))
            data[-1] ^= 1
            p["leaf_data"] = base64.b64encode(bytes(data)).decode()

        def flip(b64_text):
            raw = bytearray(base64.b64decode(b64_text))
            raw[0] ^= 1
            return base64.b64encode(bytes(raw)).decode()

        def signature_changed(p):
            body, sep, sigs = p["checkpoint"].partition("\n\n")
            who, sig = sigs.splitlines()[0][2:].split(" ", 1)
            raw = bytearray(base64.b64decode(sig))
            raw[-1] ^= 1
            p["checkpoint"] = body + sep + f"\u2014 {who} {base64.b64encode(bytes(raw)).decode()}\n"

        another_key = "pgcld/other+00000000+" + base64.b64encode(b"\x01" + bytes(32)).decode()
        refused = [
            ("a record byte", edited(byte_changed), {}),
            ("another leaf's data", edited(lambda p: p.update(leaf_data=other["leaf_data"])), {}),
            ("an inclusion hash", edited(lambda p: p["inclusion"].__setitem__(0, flip(p["inclusion"][0]))), {}),
            ("leaf_index", edited(lambda p: p.update(leaf_index=p["leaf_index"] ^ 1)), {}),
            ("root", edited(lambda p: p.update(root=flip(p["root"]))), {}),
            ("the checkpoint's signature", edited(signature_changed), {}),
            ("no checkpoint", edited(lambda p: p.update(checkpoint=None)), {}),
            ("another writer", edited(lambda p: p.update(writer_id=p["writer_id"] + "x")), {}),
            ("a contest's kind", edited(lambda p: p.update(kind="contest")), {}),
            ("relabelled to another decision", proof, {"decision": {"decision_id": ids[0]}}),
            ("another key", proof, {"key_": another_key}),
            ("no key", proof, {"key_": None}),
        ]
        for name, bad, kw in refused:
            with self.subTest(name):
                k = kw.pop("key_", key)
                with self.assertRaises(ProofError):
                    verify_inclusion(copy.deepcopy(bad), key=k, **kw)

    def tamperings(self, proof, held):
        def edited(edit):
            bad = copy.deepcopy(proof)
            edit(bad)
            return bad

        def other_label(p):
            data = base64.b64decode(p["leaf_data"])
            label = self.answers[1][3]["label"].encode()
            other = b"non_toxic" if label == b"toxic" else b"toxic"
            old = b"\x03" + len(label).to_bytes(4, "big") + label
            p["leaf_data"] = base64.b64encode(data.replace(old, b"\x03" + len(other).to_bytes(4, "big") + other, 1)).decode()

        def flip(hex_text):
            return ("1" if hex_text[0] == "0" else "0") + hex_text[1:]

        plain = lambda bad: verify_inclusion(bad)  # noqa: E731
        return [
            ("label changed in leaf_data", lambda: (edited(other_label), plain)),
            ("leaf_hash", lambda: (edited(lambda p: p.update(leaf_hash=flip(p["leaf_hash"]))), plain)),
            ("path", lambda: (edited(lambda p: p["path"].__setitem__(0, flip(p["path"][0]))), plain)),
            ("leaf_index", lambda: (edited(lambda p: p.update(leaf_index=p["leaf_index"] ^ 1)), plain)),
            ("prev_hash", lambda: (edited(lambda p: p["chain_entry"].update(prev_hash=flip(p["chain_entry"]["prev_hash"]))), plain)),
            ("commit root", lambda: (edited(lambda p: p.update(root=flip(p["root"]))), plain)),
            ("log root", lambda: (edited(lambda p: p["log"].update(root=flip(p["log"]["root"]))), plain)),
            ("another decision's id", lambda: (edited(lambda p: p.update(decision_id=self.answers[0][0]["decision_id"])), plain)),
            ("entry hash held", lambda: (proof, lambda p: verify_inclusion(p, entry_hash="0" * 64))),
            ("checkpoint of another tree", lambda: (proof, lambda p: verify_inclusion(
                p, checkpoint=dict(held, head_seq=held["head_seq"] + 1)))),
            ("another decision record", lambda: (proof, lambda p: verify_inclusion(p, decision=self.answers[1][4]))),
        ]

    @H.sqlite_only("changes a row of the SQLite file")
    def test_proof_of_a_row_changed_in_the_database_fails(self):
        result = self.scorer.score(H.random_embeddings(3, self.D, seed=60))[1]  # this test's own row
        verify_inclusion(self.reviewer.proof(result["decision_id"], format="chain-v2"))
        other = "non_toxic" if result["label"] == "toxic" else "toxic"
        db = sqlite3.connect(self.d.db_path, timeout=30)
        try:
            db.executescript("DROP TRIGGER decisions_append_only_u; DROP TRIGGER decisions_append_only_d;")
            db.execute("UPDATE decisions SET label = ? WHERE decision_id = ?", (other, result["decision_id"]))
            db.commit()
        finally:
            db.close()
        with self.assertRaises(ProofError) as e:
            verify_inclusion(self.reviewer.proof(result["decision_id"], format="chain-v2"))
        self.assertIn("leaf_hash", str(e.exception))

    def test_head_hash_anchors_the_newest_decision(self):
        answer = self.scorer.score(H.random_embeddings(2, self.D, seed=70))
        head = self.d.get("/v1/audit/verify", key=self.d.keys["admin"]).json
        proof = self.reviewer.proof(answer[1]["decision_id"], format="chain-v2")
        if proof["chain_entry"]["seq"] != head["head_seq"]:
            self.skipTest("another commit came after the decision's")  # not in this test's daemon
        self.assertEqual(verify_inclusion(proof, entry_hash=head["head_hash"]).anchored_by, "entry_hash")


if __name__ == "__main__":
    H.main()
