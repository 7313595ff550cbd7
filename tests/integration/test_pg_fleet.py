"""A fleet of pgcld replicas on one PostgreSQL database (issue 17, "Acceptance" and scope 5-7).

Every case runs real pgcld processes against a real PostgreSQL 15 (one throw-away cluster for the
program, harness.pg_cluster(); a fresh database per case) and checks what the fleet promises:

  - three replicas (--writer-id a, b, c) scoring at once: every decision_id answered is in the
    database exactly once, and GET /v1/audit/verify on each replica is intact over every chain;
  - a decision scored through one replica is read, contested and resolved through another; two
    reviewers contesting one decision through two replicas at once: exactly one wins;
  - SIGKILL of a replica under load: every decision_id a client received with a 200 is in the
    database; the killed replica restarts with the same writer id and its chain goes on;
  - the server stopped with `pg_ctl stop -m immediate` under load: no 200 without its row, 503
    audit_unavailable and /readyz 503 while it is down, both replicas back by themselves after it
    starts again;
  - a key revoked through one replica is refused by the others, which learn it by themselves;
  - the schema applied once when replicas start together, the record append-only (triggers), and a
    second process with a writer id in use refused.

Skips (77) without postgresql-15 or psycopg2, and fails then under tests/run_all.sh (skips.py).
"""

import hashlib
import os
import sys
import threading
import time
import unittest
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster  # noqa: E402

MODEL = "tiny_binary"  # D = 32: cheap to score, so the clients load the writers, not the CPU
D = 32
DECISION_COLUMNS = {  # the contract's columns (test_score.py checks them on SQLite)
    "seq", "decision_id", "created_at", "request_id", "item_id", "model_name", "model_version",
    "model_sha256", "label", "label_index", "probabilities", "toxicity", "decision", "policy",
    "t_review", "t_block", "vector", "input_sha256", "latency_us",
}


def items(n, seed, prefix="x"):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)


class FleetCase(unittest.TestCase):
    """A fresh database per test; replica() starts pgcld processes on it, stopped at the end."""

    def setUp(self):
        H.require_models(MODEL)
        self.cluster = H.pg_cluster()
        self.uri = self.cluster.new_database()

    def replica(self, writer_id, auth=False, args=()):
        d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=self.uri, auth=auth,
                     args=["--writer-id", writer_id, *args])
        self.addCleanup(d.cleanup)
        return d.start()

    # -- what the database holds
    def scalar(self, sql, params=()):
        return H.db_scalar(self.uri, sql, params)

    def assert_all_recorded(self, answered, what):
        """Every decision_id in answered has exactly one row."""
        self.assertEqual(len(answered), len(set(answered)), f"{what}: a decision_id was answered twice")
        self.assertEqual(H.decisions_present(self.uri, answered), len(answered),
                         f"{what}: decisions answered with 200 are missing from the database")

    def assert_verify_intact(self, replicas, key=None):
        """GET /v1/audit/verify on each replica: intact, over every writer's whole chain."""
        entries = self.scalar("SELECT count(*) FROM audit_chain")
        writers = {r["writer_id"] for r in H.db_query(self.uri, "SELECT DISTINCT writer_id FROM audit_chain")}
        for d in replicas:
            r = d.get("/v1/audit/verify", key=key if key is not None else d.keys.get("reviewer"))
            self.assertEqual(r.status, 200, f"{r}\n{d.logs()}")
            self.assertTrue(r.json["intact"], r)
            self.assertEqual(r.json["events"], entries,
                             f"verify through one replica checked {r.json['events']} entries of {entries} "
                             f"(writers {sorted(writers)}): it must walk every writer's chain")
        return writers

    def assert_chain_contiguous(self, writer_id):
        """Writer writer_id's entries are 1..N without a gap, one genesis (entry 1)."""
        n, first, last = H.db_query(self.uri, "SELECT count(*) AS n, min(seq) AS lo, max(seq) AS hi FROM audit_chain"
                                              " WHERE writer_id = ?", (writer_id,))[0].values()
        self.assertEqual((first, last), (1, n), f"writer {writer_id}: entries are not 1..{n}")
        self.assertEqual(self.scalar("SELECT count(*) FROM audit_chain WHERE writer_id = ? AND kind = 'genesis'",
                                     (writer_id,)), 1, f"writer {writer_id}: not exactly one genesis entry")
        return n


class Load:
    """Client threads scoring through replicas until stop(): records every decision_id answered
    with a 200 and every other answer's (status, error code). A client whose replica is gone (the
    connection refused or reset) keeps trying: the replica may come back."""

    def __init__(self, replicas, per_replica=2, batch=4, key=None):
        self.lock = threading.Lock()
        self.answered = []
        self.others = []
        self.per_replica = {id(d): 0 for d in replicas}  # 200 answers per replica
        self.errors = 0
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(d, k, batch, key), daemon=True)
                        for d in replicas for k in range(per_replica)]
        for t in self.threads:
            t.start()

    def _client(self, d, k, batch, key):
        j = 0
        while not self._stop.is_set():
            body = {"items": items(batch, (k * 7919 + j) % 100000, f"{id(d) % 1000}-{k}-{j}")}
            j += 1
            try:
                r = d.score(body, timeout=30, key=key)
            except (urllib.error.URLError, ConnectionError, OSError):
                with self.lock:
                    self.errors += 1
                time.sleep(0.05)  # a client's pause after a failed request (load, not a wait)
                continue
            with self.lock:
                if r.status == 200:
                    self.answered.extend(x["decision_id"] for x in r.json["results"])
                    self.per_replica[id(d)] += 1
                else:
                    self.others.append((r.status, r.error_code()))
                    time.sleep(0.02)  # a client's pause after a refusal (load, not a wait)

    def count(self, d=None):
        with self.lock:
            return len(self.answered) if d is None else self.per_replica[id(d)]

    def stop(self):
        self._stop.set()
        for t in self.threads:
            t.join(60)
        return list(self.answered)


class SchemaTest(FleetCase):
    """The schema: applied once when replicas start at the same moment on an empty database, each
    migration recorded with its SHA-256; the record append-only even for a role that could write."""

    def test_replicas_starting_together_apply_the_migrations_once(self):
        replicas = [H.Daemon(models=[MODEL], default_model=MODEL, db_path=self.uri, auth=False,
                             args=["--writer-id", w]) for w in ("a", "b", "c")]
        for d in replicas:
            self.addCleanup(d.cleanup)
        failures = []

        def start(d):
            try:
                d.start()
            except H.DaemonError as e:
                failures.append(str(e))

        threads = [threading.Thread(target=start, args=(d,)) for d in replicas]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(failures, [])
        pg_dir = os.path.join(H.SOURCE_ROOT, "migrations", "pg")
        files = sorted(f for f in os.listdir(pg_dir) if f.endswith(".sql"))
        recorded = H.db_query(self.uri, "SELECT version, name, sha256 FROM schema_migrations ORDER BY version")
        self.assertEqual([r["version"] for r in recorded], [int(f[:4]) for f in files],
                         "each migration of migrations/pg recorded exactly once")
        for r, f in zip(recorded, files):
            with open(os.path.join(pg_dir, f), "rb") as fh:
                self.assertEqual(r["sha256"], hashlib.sha256(fh.read()).hexdigest(), f)
        self.assertEqual(self.scalar("SELECT count(*) FROM writers"), 3)
        columns = {r["column_name"]: r for r in H.db_query(
            self.uri, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'decisions'")}
        self.assertLessEqual(DECISION_COLUMNS, set(columns), "decisions lacks contract columns")
        self.assertEqual(columns["seq"]["data_type"], "bigint")
        unique = {r["attname"] for r in H.db_query(
            self.uri, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                      " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'decisions'::regclass AND i.indisunique")}
        self.assertLessEqual({"seq", "decision_id"}, unique)

    def test_the_record_is_append_only(self):
        self.replica("a")
        H.db_insert_events(
            self.uri, "decisions",
            "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
            " vector, input_sha256, latency_us) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [("01a1fdb2-0000-7000-8000-000000000001", H.timestamp(), "r", "i", MODEL, "1",
              "0" * 64, "pos", 1, "{}", 0.5, "block", "{}", 0.4, 0.7, b"\0" * 4, "0" * 64, 1)])
        self.assertGreater(self.scalar("SELECT count(*) FROM audit_chain"), 0, "a's genesis entry is missing")
        for sql in ("UPDATE decisions SET decision = 'allow'", "DELETE FROM decisions",
                    "UPDATE audit_chain SET hash = hash", "DELETE FROM audit_chain"):
            with self.subTest(sql=sql):
                with self.assertRaisesRegex(Exception, "append-only"):
                    H.db_execute(self.uri, sql)
        self.assertEqual(self.scalar("SELECT decision FROM decisions"), "block")


class ThreeWritersTest(FleetCase):
    """(a) Three replicas on one database scoring at once."""

    def test_three_writers_score_at_once(self):
        replicas = [self.replica(w) for w in ("a", "b", "c")]
        results, lock = [], threading.Lock()

        def client(d, k):
            for j in range(12):
                r = d.score({"items": items(4, 1000 * k + j, f"{k}-{j}")})
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=client, args=(d, 3 * i + k)) for i, d in enumerate(replicas)
                   for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(len(results), 9 * 12)
        bad = [r for r in results if r.status != 200]
        self.assertFalse(bad, f"{len(bad)} requests were not answered 200, e.g. {bad[:3]}\n{replicas[0].logs()}")
        answered = [x["decision_id"] for r in results for x in r.json["results"]]
        self.assertEqual(len(answered), 9 * 12 * 4)
        self.assert_all_recorded(answered, "three writers")
        self.assertEqual(self.scalar("SELECT count(*) FROM decisions"), len(answered),
                         "the database holds decisions nobody was answered")
        # fleet order: seqs 1..N without a gap, whichever writer committed them
        self.assertEqual((self.scalar("SELECT min(seq) FROM decisions"), self.scalar("SELECT max(seq) FROM decisions")),
                         (1, len(answered)))
        writers = self.assert_verify_intact(replicas)
        self.assertLessEqual({"a", "b", "c"}, writers)
        for w in ("a", "b", "c"):
            self.assertGreaterEqual(self.assert_chain_contiguous(w), 2, f"writer {w} chained no commit")
        # each decision is a leaf of exactly one writer's chain
        chained = self.scalar("SELECT coalesce(sum(n), 0) FROM audit_chain_runs WHERE kind = 'decisions'")
        self.assertEqual(chained, len(answered))


class TwoReplicasReviewTest(FleetCase):
    """(b) Scored through one replica, read, contested and resolved through the other."""

    def test_read_contest_resolve_through_the_other(self):
        a = self.replica("a", auth=True)
        b = self.replica("b", auth=True)
        scored = a.score({"items": items(3, 1)})
        self.assertEqual(scored.status, 200, scored)
        target = scored.json["results"][1]
        did = target["decision_id"]

        rec = b.get(f"/v1/decisions/{did}", key=b.keys["reviewer"])
        self.assertEqual(rec.status, 200, f"{rec}\n{b.logs()}")
        self.assertEqual((rec.json["decision_id"], rec.json["label"], rec.json["decision"]),
                         (did, target["label"], target["decision"]))
        self.assertEqual(rec.json["probabilities"], target["probabilities"])

        # a's reviewer key is valid on b, and b's on a: keys are fleet-wide
        filed = b.post(f"/v1/decisions/{did}/contests", {"reason": "filed through b with a's key"},
                       key=a.keys["reviewer"])
        self.assertEqual(filed.status, 201, f"{filed}\n{b.logs()}")
        cid = filed.json["contest_id"]
        # the filer cannot resolve, whichever replica it asks
        r = a.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "mine"}, key=a.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (403, "filer_cannot_resolve"), r)
        queue = a.get("/v1/contests?status=open", key=b.keys["reviewer"])
        self.assertEqual(queue.status, 200, queue)
        self.assertIn(cid, [c["contest_id"] for c in queue.json["contests"]])
        corrected = "pos" if target["label"] == "neg" else "neg"
        resolved = a.post(f"/v1/contests/{cid}/resolution",
                          {"outcome": "overturned", "corrected_label": corrected, "note": "through a"},
                          key=b.keys["reviewer"])
        self.assertEqual(resolved.status, 201, f"{resolved}\n{a.logs()}")
        again = b.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "again"},
                       key=b.keys["reviewer"])
        self.assertEqual((again.status, again.error_code()), (409, "already_resolved"), again)
        for d in (a, b):
            rec = d.get(f"/v1/decisions/{did}", key=d.keys["reviewer"])
            self.assertEqual(rec.status, 200, rec)
            self.assertEqual((rec.json["effective_outcome"]["status"], rec.json["effective_outcome"]["label"]),
                             ("overturned", corrected))
            self.assertEqual(len(rec.json["contests"]), 1)
        # (the keys CLI, `pgcld keys create --db URI`, writes its admin events in a chain of its own)
        self.assertLessEqual({"a", "b"}, self.assert_verify_intact([a, b]))

    def test_two_reviewers_contest_one_decision_through_two_replicas(self):
        a = self.replica("a", auth=True)
        b = self.replica("b", auth=True)
        dids = [x["decision_id"] for x in a.score({"items": items(8, 2)}).json["results"]]
        for did in dids:  # eight races: one open contest per decision, fleet-wide
            answers, barrier = [], threading.Barrier(2)

            def contest(d, key):
                barrier.wait()
                answers.append(d.post(f"/v1/decisions/{did}/contests", {"reason": "race"}, key=key))

            threads = [threading.Thread(target=contest, args=(a, a.keys["reviewer"])),
                       threading.Thread(target=contest, args=(b, b.keys["reviewer"]))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            got = sorted((r.status, r.error_code()) for r in answers)
            self.assertEqual(got, [(201, None), (409, "contest_open")], f"decision {did}: {answers}")
            self.assertEqual(self.scalar("SELECT count(*) FROM contests WHERE decision_id = ?", (did,)), 1)
        self.assert_verify_intact([a, b])


class KillReplicaTest(FleetCase):
    """(c) SIGKILL of one replica under load."""

    def test_sigkill_under_load(self):
        a = self.replica("a")
        b = self.replica("b")
        load = Load([a, b])
        try:
            self.assertTrue(H.wait_until(lambda: load.count(a) >= 10 and load.count(b) >= 10, 60),
                            "the clients were not answered")
            entries_before = self.scalar("SELECT count(*) FROM audit_chain WHERE writer_id = 'a'")
            a.proc.kill()  # SIGKILL: no drain, no goodbye to the server
            a.proc.wait()
            served_by_b = load.count(b)
            self.assertTrue(H.wait_until(lambda: load.count(b) >= served_by_b + 10, 60),
                            f"b stopped answering when a was killed\n{b.logs()}")
            a.start()  # the same writer id: its chain goes on
            served_by_a = load.count(a)
            self.assertTrue(H.wait_until(lambda: load.count(a) >= served_by_a + 10, 60),
                            f"a does not answer after its restart\n{a.logs()}")
        finally:
            answered = load.stop()
        self.assertEqual(load.others, [], "answers other than 200 (a refused connection is expected, not these)")
        self.assert_all_recorded(answered, "SIGKILL under load")
        self.assertGreater(self.assert_chain_contiguous("a"), entries_before, "a's chain did not go on")
        self.assert_chain_contiguous("b")
        self.assertLessEqual({"a", "b"}, self.assert_verify_intact([a, b]))


class WriterIdTest(FleetCase):
    """One process per chain: a second pgcld with a writer id in use is refused (advisory lock)."""

    def test_a_writer_id_in_use_is_refused(self):
        a = self.replica("a")
        twin = H.Daemon(models=[MODEL], default_model=MODEL, db_path=self.uri, auth=False, args=["--writer-id", "a"])
        self.addCleanup(twin.cleanup, check=False)
        with self.assertRaisesRegex(H.DaemonError, "in use"):
            twin.start()
        self.assertEqual(a.score({"items": items(2, 8)}).status, 200)
        self.assertEqual(self.scalar("SELECT count(*) FROM writers"), 1)
        self.assert_chain_contiguous("a")


class ServerStoppedTest(FleetCase):
    """(d) The PostgreSQL server stopped (immediate mode) under load, then started again."""

    def test_server_stopped_immediately_under_load(self):
        a = self.replica("a")
        b = self.replica("b")
        load = Load([a, b])
        started = True
        try:
            self.assertTrue(H.wait_until(lambda: load.count(a) >= 10 and load.count(b) >= 10, 60),
                            "the clients were not answered")
            self.cluster.stop("immediate")
            started = False

            def down_everywhere():
                for d in (a, b):
                    s = d.score({"items": items(1, 3)})
                    if (s.status, s.error_code()) != (503, "audit_unavailable") or d.get("/readyz").status != 503:
                        return False
                return True

            self.assertTrue(H.wait_until(down_everywhere, 60),
                            f"scoring and /readyz do not answer 503 while the server is down\n{a.logs()}")
            refused = len(load.others)  # the clients keep scoring against the stopped server
            H.wait_for(lambda: len(load.others) >= refused + 4, "the clients are refused while the server is down",
                       timeout=60)
            self.cluster.start()
            started = True

            def back_everywhere():
                return all(d.score({"items": items(1, 4)}).status == 200 and d.get("/readyz").status == 200
                           for d in (a, b))

            self.assertTrue(H.wait_until(back_everywhere, 60),
                            f"the replicas did not recover by themselves\n{a.logs()}\n{b.logs()}")
            counts = (load.count(a), load.count(b))
            self.assertTrue(H.wait_until(lambda: load.count(a) > counts[0] + 5 and load.count(b) > counts[1] + 5, 60),
                            "the clients are not answered again")
        finally:
            answered = load.stop()
            if not started:
                self.cluster.start()
        for d in (a, b):
            self.assertIsNone(d.proc.poll(), f"a replica exited while the server was down\n{d.logs()}")
        unexpected = [o for o in load.others if o != (503, "audit_unavailable")]
        self.assertEqual(unexpected, [], "answers other than 200 and 503 audit_unavailable")
        self.assertGreater(len(load.others), 0, "no client saw the server down")
        self.assert_all_recorded(answered, "server stopped under load")
        self.assertLessEqual({"a", "b"}, self.assert_verify_intact([a, b]))
        self.assert_chain_contiguous("a")
        self.assert_chain_contiguous("b")


class RevocationTest(FleetCase):
    """(e) A key revoked through one replica is refused by the others, which learn it from the
    database by themselves (their periodic key checks; docs/scaling.md says within about a second:
    the test waits for it and does not time it)."""

    def test_revocation_reaches_every_replica(self):
        a = self.replica("a", auth=True)
        others = [self.replica("b", auth=True), self.replica("c", auth=True)]
        for round_ in range(3):
            made = a.post("/v1/admin/keys", {"role": "scorer", "name": f"fleet {round_}"})
            self.assertEqual(made.status, 201, made)
            key, key_id = made.json["key"], made.json["key_id"]
            for d in others:  # a key made on one replica is valid on the others
                H.wait_for(lambda: d.score({"items": items(1, 5)}, key=key).status == 200,
                           "a key created through a is accepted by another replica")
            revoked = a.request("DELETE", f"/v1/admin/keys/{key_id}")
            self.assertEqual(revoked.status, 200, revoked)
            pending = list(others)

            def refused_everywhere():
                pending[:] = [d for d in pending if d.score({"items": items(1, 6)}, key=key).status != 401]
                return not pending
            H.wait_for(refused_everywhere, f"round {round_}: every other replica refuses the revoked key",
                       interval=0.02)
            for d in [a] + others:  # and it stays refused
                r = d.score({"items": items(1, 7)}, key=key)
                self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)


if __name__ == "__main__":
    pg_cluster.require()
    H.main()
