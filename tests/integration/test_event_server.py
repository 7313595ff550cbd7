"""The event-driven server over real HTTP: with --http-threads 2, many connections each holding a
scoring request that waits (for the audit commit, held back by a lock this test takes on the
database, or for a batch held open by --batch-max-wait-us) are all answered correctly, and the
daemon's thread count (/proc/PID/status Threads:) does not grow with them: a waiting request is a
suspended connection, not a thread. A staff call waiting for a locked database holds no pool
thread either (it runs on its own).

Run: /usr/bin/python3 tests/integration/test_event_server.py (PGCLD_BIN selects the binary).
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

MODEL = "toxicity"
D = 1024
CONNECTIONS = 64
WAIT_S = 60


def proc_status(pid, field):
    """An integer field of /proc/PID/status (Threads, VmRSS in kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class Clients:
    """CONNECTIONS threads, each sending one single-item scoring request on its own connection."""

    def __init__(self, d, prefix):
        self.Z = H.random_embeddings(CONNECTIONS, D, 11)
        self.answers, self.errors = {}, {}
        self.threads = [threading.Thread(target=self.one, args=(d, prefix, i), daemon=True)
                        for i in range(CONNECTIONS)]
        for t in self.threads:
            t.start()

    def one(self, d, prefix, i):
        try:
            self.answers[i] = d.score({"items": H.json_items(self.Z[i:i + 1], f"{prefix}{i}-")}, timeout=WAIT_S)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors[i] = e

    def join(self, test):
        for t in self.threads:
            t.join(WAIT_S)
            test.assertFalse(t.is_alive(), "a client was never answered")
        test.assertEqual(self.errors, {})


class EventServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)

    def start(self, *args):
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--http-threads", "2", "--compute-workers", "1", *args])
        self.addCleanup(d.cleanup)
        d.start()
        d.score({"items": H.json_items(H.random_embeddings(1, D, 1), "warm-")})  # every lazy thread started
        return d

    def check_answers(self, d, clients, prefix):
        """Every client got its own item's answer, and its decision row is in the database."""
        ref = H.ReferenceModel(H.version_dir(MODEL))
        _, want = ref.forward(clients.Z)
        ids = {}
        for i in range(CONNECTIONS):
            r = clients.answers[i]
            self.assertEqual(r.status, 200, r)
            (item,) = r.json["results"]
            self.assertEqual(item["id"], f"{prefix}{i}--0")
            probs = [item["probabilities"][label] for label in ref.labels]
            for got, exp in zip(probs, want[i]):
                self.assertAlmostEqual(got, float(exp), delta=1e-4)
            ids[item["id"]] = item["decision_id"]
        rows = {r["item_id"]: r["decision_id"] for r in
                H.db_query(d.db_path, "SELECT item_id, decision_id FROM decisions WHERE item_id LIKE ?",
                           (prefix + "%",))}
        self.assertEqual(rows, ids, "the answered decisions are not the recorded ones")

    def test_requests_waiting_for_the_commit_hold_no_thread(self):
        d = self.start()
        pid = d.proc.pid
        idle_threads = proc_status(pid, "Threads")
        locker = H.WriterLock(d.db_path)  # the writer's next commit waits for this lock
        self.addCleanup(locker.release)
        clients = Clients(d, "commit")
        # every request has its rows computed and queued for the writer: all 64 are waiting
        waiting = H.wait_until(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) >= CONNECTIONS, 20)
        busy_threads, busy_rss = proc_status(pid, "Threads"), proc_status(pid, "VmRSS")
        answered_early = len(clients.answers)
        locker.release()  # released at once: the commit goes through (check_answers: every one 200)
        self.assertTrue(waiting, "the requests did not all reach the audit writer")
        self.assertEqual(answered_early, 0, "answers left before their rows were committed")
        clients.join(self)
        print(f"{CONNECTIONS} requests waiting for the commit: {busy_threads} threads "
              f"(idle: {idle_threads}), VmRSS {busy_rss} kB", file=sys.stderr)
        self.assertLessEqual(busy_threads, idle_threads + 2,
                             "the daemon's threads grew with the connections waiting")
        self.check_answers(d, clients, "commit")

    def test_requests_waiting_for_a_held_batch_hold_no_thread(self):
        # a batch is held open up to 1 s for more rows (256 max): the 64 requests wait in the batcher
        d = self.start("--batch-max-wait-us", "1000000", "--batch-max-rows", "1024")
        pid = d.proc.pid
        idle_threads = proc_status(pid, "Threads")
        samples = []
        clients = Clients(d, "batch")
        while any(t.is_alive() for t in clients.threads):
            samples.append(proc_status(pid, "Threads"))
            time.sleep(0.01)  # the sampling pace, until every client is answered (not a wait)
        clients.join(self)
        print(f"{CONNECTIONS} requests waiting for a held batch: at most {max(samples)} threads "
              f"(idle: {idle_threads})", file=sys.stderr)
        self.assertLessEqual(max(samples), idle_threads + 2,
                             "the daemon's threads grew with the connections waiting")
        self.check_answers(d, clients, "batch")

    def test_a_staff_call_waiting_for_a_locked_database_holds_no_pool_thread(self):
        # one pool thread; a reviewer's contest waits for the locked database (up to the writer's
        # 5 s busy timeout) on a thread of its own, so the pool keeps answering meanwhile: the
        # pool's answer comes back while the staff call is still waiting (the lock is released
        # only after it), which a pool thread held by the staff call could not do
        d = self.start("--http-threads", "1")
        scored = d.score({"items": H.json_items(H.random_embeddings(1, D, 2), "contested-")})
        decision_id = scored.json["results"][0]["decision_id"]
        locker = H.WriterLock(d.db_path)
        self.addCleanup(locker.release)
        answers = {}
        staff = threading.Thread(target=lambda: answers.update(
            r=d.post(f"/v1/decisions/{decision_id}/contests", {"reason": "while locked"}, key=d.keys["reviewer"],
                     timeout=WAIT_S)), daemon=True)
        staff.start()
        try:
            H.wait_for(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) >= 1, "the contest reaches the audit writer")
            ready = d.get("/v1/models")
            still_waiting = staff.is_alive()
        finally:
            locker.release()
        staff.join(WAIT_S)
        self.assertEqual(ready.status, 200, ready)
        self.assertTrue(still_waiting, "the pool answered only once the staff call had ended: it waited with it")
        self.assertIn(answers["r"].status, (201, 503), answers["r"])


if __name__ == "__main__":
    unittest.main()
