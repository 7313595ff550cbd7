#!/usr/bin/python3
"""The audit writer's backlog bound, --max-pending-rows (docs/RELIABILITY.md: "503 overloaded,
Retry-After: 1, nothing written").

The daemon is tests/faults/pgcld_faults (the real pgcld over the test-only SQLite VFS of
tests/faults/faultvfs.h) with --max-pending-rows 4. The VFS's "stall" mode holds every write and
fsync of the database and its WAL, as a hung disk would: the audit writer stops inside its commit
and the rows of the requests behind it stay pending, for as long as the test wants, with no clock
involved. The test waits on the daemon's own gauge (pgcld_audit_queue_rows), never on time:

1. a 3-row request is held by the stalled writer (3 rows pending);
2. a 2-row request would make 5 > 4: it is answered at once, 503 overloaded with Retry-After 1,
   while the first is still held;
3. a 1-row request makes exactly 4: it is admitted and held too; another 1-row request (5) is
   refused;
4. the disk comes back: both held requests are answered 200, their 4 rows and 4 chain entries are
   in the database, and nothing of the refused requests is (no row, no chain entry); the chain
   verifies intact;
5. the writer has recovered: the gauge is back at 0, a request of exactly 4 rows is answered, and
   one of 6 rows too, since nothing is queued (a request larger than the bound is admitted when the
   backlog is empty, or it could never be answered).

Run: /usr/bin/python3 tests/integration/test_backlog.py
"""

import os
import shutil
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, "faults"))

import faultlib as F  # noqa: E402
import harness as H  # noqa: E402

MODEL = "tiny_binary"
MAX_PENDING_ROWS = 4
QUEUE_GAUGE = "pgcld_audit_queue_rows"


class HeldRequest:
    """A scoring request sent from its own thread, because the stalled writer holds it."""

    def __init__(self, d, body):
        self.response = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(d, body), daemon=True)
        self.thread.start()

    def _run(self, d, body):
        try:
            self.response = d.score(body)
        except Exception as e:  # reported by the test
            self.error = e

    def done(self):
        return not self.thread.is_alive()

    def join(self):
        self.thread.join(H.HTTP_TIMEOUT_S)
        return self.response


class BacklogBoundTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        F.require_faults_binary()
        H.require_models(MODEL)
        cls.work = tempfile.mkdtemp(prefix="pgcld-backlog-")
        if not os.environ.get("PGCLD_KEEP_TMP"):
            cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)
        cls.ctl = os.path.join(cls.work, "fault-mode")
        cls.set_mode("ok")
        cls.d = H.Daemon(models=[MODEL], binary=F.PGCLD_FAULTS_BIN, env={"PGCLD_FAULTS_CONTROL": cls.ctl},
                         args=["--max-pending-rows", str(MAX_PENDING_ROWS)])
        cls.addClassCleanup(cls.d.cleanup)
        cls.d.start()
        cls.D = H.load_config(MODEL)["dims"]["D"]
        cls.seed = 0

    @classmethod
    def set_mode(cls, mode):
        with open(cls.ctl + ".tmp", "w", encoding="ascii") as f:
            f.write(mode + "\n")
        os.replace(cls.ctl + ".tmp", cls.ctl)  # a new inode: the VFS sees the change at its next stat

    def body(self, n, prefix):
        type(self).seed += 1
        return {"model": MODEL, "items": H.json_items(H.random_embeddings(n, self.D, seed=self.seed), prefix)}

    def queued(self):
        return H.metric(self.d, QUEUE_GAUGE)

    def wait_queued(self, n):
        self.assertTrue(H.wait_until(lambda: self.queued() == n), f"{QUEUE_GAUGE} is {self.queued()}, expected {n}")

    def refused_at_once(self, n, prefix, pending):
        """Sends an n-row request that must not fit behind `pending` rows; it must be answered while
        the writer is still stalled (were it admitted instead, the gauge would pass `pending`)."""
        r = HeldRequest(self.d, self.body(n, prefix))
        self.assertTrue(H.wait_until(lambda: r.done() or self.queued() > pending),
                        f"{prefix}: neither answered nor queued")
        self.assertTrue(r.done(), f"{prefix}: {n} rows were queued behind {pending} pending"
                                  f" ({self.queued()} now) instead of being refused")
        self.assertIsNone(r.error, r.error)
        return r.response

    def assert_refused(self, r, what):
        self.assertEqual((r.status, r.error_code()), (503, "overloaded"), f"{what}: {r}")
        self.assertEqual(r.headers.get("Retry-After"), "1", f"{what}: Retry-After")
        self.assertIn("audit log", r.json["error"]["message"], f"{what}: refused for the audit backlog")

    def counts(self):
        """Rows, chained decisions and chained events: events with an entry of their own (chain
        encoding version 1) plus those in a commit entry's runs (version 2, the default)."""
        return (self.d.scalar("SELECT count(*) FROM decisions"),
                self.d.scalar("SELECT (SELECT count(*) FROM audit_chain WHERE kind = 'decisions') +"
                              " (SELECT coalesce(sum(n), 0) FROM audit_chain_runs WHERE kind = 'decisions')"),
                self.d.scalar("SELECT (SELECT count(*) FROM audit_chain WHERE kind NOT IN ('genesis', 'commit')) +"
                              " (SELECT coalesce(sum(n), 0) FROM audit_chain_runs)"))

    def test_backlog_bound(self):
        d = self.d
        r = d.score(self.body(1, "warm"))  # the chain's genesis entry and a first row
        self.assertEqual(r.status, 200, r)
        rows_before, decision_entries_before, entries_before = self.counts()
        held = []
        try:
            self.set_mode("stall")
            held.append(HeldRequest(d, self.body(3, "held-a")))
            self.wait_queued(3)

            r = self.refused_at_once(2, "refused-b", 3)  # 3 + 2 > 4
            self.assert_refused(r, "2 rows behind 3 pending")
            self.assertTrue(held[0].thread.is_alive(), "the first request was answered while the writer stalled")

            fill = HeldRequest(d, self.body(1, "held-c"))  # 3 + 1 == 4: admitted, and held
            held.append(fill)
            H.wait_until(lambda: fill.done() or self.queued() == 4)
            self.assertEqual(self.queued(), 4, f"a request that exactly fills the backlog: {fill.response}")
            r = self.refused_at_once(1, "refused-d", 4)  # 4 + 1 > 4
            self.assert_refused(r, "1 row behind a full backlog")
            self.assertEqual(self.queued(), 4, "a refused request changed the backlog")
        finally:
            self.set_mode("ok")
            answers = [h.join() for h in held]

        for h, a in zip(held, answers):
            self.assertIsNone(h.error, h.error)
            self.assertIsNotNone(a, "a held request was not answered once the disk came back")
            self.assertEqual(a.status, 200, a)
        self.wait_queued(0)

        rows, decision_entries, entries = self.counts()
        self.assertEqual(rows - rows_before, 4, "the held requests' rows, and nothing else")
        self.assertEqual(decision_entries - decision_entries_before, 4)
        self.assertEqual(entries - entries_before, 4, "nothing chained for a refused request")
        items = {r["item_id"] for r in d.query("SELECT item_id FROM decisions")}
        self.assertFalse({i for i in items if i.startswith("refused-")}, "a refused request's row was written")
        self.assertEqual({i for i in items if i.startswith("held-")},
                         {"held-a-0", "held-a-1", "held-a-2", "held-c-0"})
        r = d.get("/v1/audit/verify", key=d.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json["intact"], r.json)

        # recovered: a full backlog's worth, and more than the bound when nothing is queued
        for n in (MAX_PENDING_ROWS, MAX_PENDING_ROWS + 2):
            r = d.score(self.body(n, f"after-{n}"))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(len(r.json["results"]), n)
        self.assertEqual(self.counts()[0] - rows, 2 * MAX_PENDING_ROWS + 2)


if __name__ == "__main__":
    H.main()
