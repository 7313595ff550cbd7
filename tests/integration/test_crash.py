#!/usr/bin/python3
"""Crash consistency (issue 7, item 1): pgcld killed with SIGKILL under load, and power cuts.

1. SIGKILL: the production binary, one audit database for every cycle; each cycle starts the
   daemon, lets client threads score (batches of 1-16 items, base64 and JSON), kills it with
   SIGKILL a random 50-500 ms after its first answer, restarts it and checks: every decision_id
   any client received in a 200 answer is in the database with its item id, PRAGMA
   integrity_check is ok and `pgcld audit verify` finds the chain intact.
2. Power loss: the same under tests/faults/pgcld_faults with PGCLD_FAULTS_POWERLOSS=1, which logs
   every write not yet covered by an fsync; after the SIGKILL, `pgcld_faults powerloss-revert`
   rewinds the database and its WAL to their last synced content (what a power cut leaves), and the
   production daemon is restarted on it. With synchronous=FULL nothing acknowledged may be lost.
3. The negative control: the same with --synchronous NORMAL (commits are not fsynced) must lose
   acknowledged decisions in at least one cycle, which shows that test 2 can fail.

Figures go to $PGCLD_ARTEFACTS/crash-consistency.json. Environment: PGCLD_CRASH_CYCLES (default 50),
PGCLD_POWERLOSS_CYCLES (default 20), PGCLD_CRASH_SEED (default: random, printed).

Run: /usr/bin/python3 tests/integration/test_crash.py
"""

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, "faults"))

import faultlib as F  # noqa: E402
import harness as H  # noqa: E402

CRASH_CYCLES = int(os.environ.get("PGCLD_CRASH_CYCLES", "50"))
POWERLOSS_CYCLES = int(os.environ.get("PGCLD_POWERLOSS_CYCLES", "20"))
NEGATIVE_MAX_CYCLES = 10
CLIENT_THREADS = 4
SEED = int(os.environ.get("PGCLD_CRASH_SEED") or random.SystemRandom().randrange(1 << 30))
ARTEFACT = "crash-consistency.json"


def max_seq(db_path):
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT coalesce(max(seq), 0) FROM decisions").fetchone()[0]
    finally:
        conn.close()


class CrashConsistency(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"seed {SEED} (PGCLD_CRASH_SEED={SEED} repeats the random delays)", flush=True)
        cls.rng = random.Random(SEED)

    def run_cycle(self, d, outcome, seed):
        """Starts d, loads it until a random 50-500 ms after its first answer, kills it with
        SIGKILL. Returns the decisions acknowledged in this cycle."""
        d.start()
        before = set(outcome.acked)
        load = F.Load(d, outcome, CLIENT_THREADS, seed).start()
        # the kill comes a random 50-500 ms after the load is being served (its first 200 in this
        # cycle), so that every cycle kills the daemon with requests in flight however slow the
        # machine is
        served = H.wait_until(lambda: len(outcome.acked) > len(before) or d.proc.poll() is not None, 60)
        time.sleep(self.rng.uniform(0.05, 0.5))
        d.proc.kill()
        d.proc.wait()
        self.assertTrue(load.stop(), "a client thread did not finish after the kill")
        d.kill()  # bookkeeping only: the process is gone
        self.assertTrue(served, f"the daemon served nothing before the kill\n{d.logs()}")
        return {k: v for k, v in outcome.acked.items() if k not in before}

    def test_1_sigkill_under_load(self):
        d = H.Daemon(models=[F.MODEL])
        self.addCleanup(d.cleanup)
        outcome = F.Outcome()
        t0 = time.monotonic()
        per_cycle = []
        for cycle in range(CRASH_CYCLES):
            new = self.run_cycle(d, outcome, SEED + cycle)
            per_cycle.append(len(new))
            d.start()  # the restart: WAL recovery happens here
            F.check_database(self, d.db_path, new, f"after kill {cycle + 1}")
            self.assertEqual(d.stop(), 0, f"pgcld did not exit 0 on SIGTERM after kill {cycle + 1}\n{d.logs()}")
            d.kill()
        # Everything once more at the end, after a clean start.
        d.start()
        doc = F.check_database(self, d.db_path, outcome.acked, "at the end")
        rows = F.decisions_count(d.db_path)
        self.assertEqual(outcome.problems, [], "answers that were neither 200 nor 503 audit_unavailable")
        self.assertGreater(len(outcome.acked), 0, "no request was ever acknowledged")
        figures = {
            "kills": CRASH_CYCLES, "acknowledged_decisions_checked": len(outcome.acked),
            "acknowledged_lost": 0, "rows_in_db": rows,
            "rows_committed_but_unacknowledged": rows - len(outcome.acked),
            "acknowledged_per_kill_min": min(per_cycle), "acknowledged_per_kill_max": max(per_cycle),
            "requests_refused": len(outcome.refused), "transport_errors_at_kills": outcome.transport_errors,
            "chain_events": doc["events"], "seconds": round(time.monotonic() - t0, 1), "seed": SEED,
        }
        print("sigkill:", figures, flush=True)
        F.write_artefact(ARTEFACT, {"sigkill": figures})

    def power_loss_cycles(self, synchronous, max_cycles, stop_at_first_loss):
        F.require_faults_binary()
        d = H.Daemon(models=[F.MODEL], args=["--synchronous", synchronous])
        self.addCleanup(d.cleanup)
        outcome = F.Outcome()
        stats = {"cycles": 0, "acknowledged": 0, "acknowledged_lost": 0, "cycles_losing_acknowledged": 0,
                 "unacknowledged_rows_lost": 0, "undo_records": 0, "bytes_restored": 0, "bytes_cut": 0}
        copy_dir = os.path.join(d.tmp, "before-revert")
        os.makedirs(copy_dir)
        t0 = time.monotonic()
        for cycle in range(max_cycles):
            d.binary, d.env = F.PGCLD_FAULTS_BIN, {"PGCLD_FAULTS_POWERLOSS": "1"}
            new = self.run_cycle(d, outcome, SEED + 5000 + cycle)
            # What the crash alone would have kept: a copy of the files as they are (a copy, so
            # that opening it leaves the originals untouched).
            for suffix in ("", "-wal"):
                if os.path.exists(d.db_path + suffix):
                    shutil.copyfile(d.db_path + suffix, os.path.join(copy_dir, "audit.db" + suffix))
            rows_at_kill = max_seq(os.path.join(copy_dir, "audit.db"))
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(os.path.join(copy_dir, "audit.db" + suffix)):
                    os.remove(os.path.join(copy_dir, "audit.db" + suffix))
            p = subprocess.run([F.PGCLD_FAULTS_BIN, "powerloss-revert", d.db_path], capture_output=True,
                               text=True, timeout=120, cwd=d.tmp)
            self.assertEqual(p.returncode, 0, f"powerloss-revert: {p.stdout} {p.stderr}")
            rev = json.loads(p.stdout)
            for k in ("records", "bytes_restored", "bytes_cut"):
                stats[{"records": "undo_records"}.get(k, k)] += rev[k]
            d.binary, d.env = H.PGCLD_BIN, {}
            d.start()  # the production daemon on what the power cut left
            rows_after = max_seq(d.db_path)
            missing, wrong = F.missing_acknowledged(d.db_path, new)
            self.assertEqual(wrong, [], "rows with another item id than the answer gave")
            self.assertEqual(F.integrity_check(d.db_path), ["ok"], f"power cut {cycle + 1}: integrity_check")
            rc, doc, err = F.chain_verify(d.db_path)
            self.assertEqual(rc, 0, f"power cut {cycle + 1}: pgcld audit verify: {doc} {err}")
            stats["cycles"] += 1
            stats["acknowledged"] += len(new)
            stats["acknowledged_lost"] += len(missing)
            stats["cycles_losing_acknowledged"] += 1 if missing else 0
            # Rows the crash alone would have kept but the power cut took: committed, not synced.
            stats["unacknowledged_rows_lost"] += max(0, rows_at_kill - rows_after) - len(missing)
            # Forget what was lost, so that a later cycle does not count it again.
            for x in missing:
                outcome.acked.pop(x, None)
            self.assertEqual(d.stop(), 0, f"pgcld did not exit 0 on SIGTERM after power cut {cycle + 1}\n{d.logs()}")
            d.kill()
            if stop_at_first_loss and missing:
                break
        stats["seconds"] = round(time.monotonic() - t0, 1)
        self.assertEqual(outcome.problems, [], "answers that were neither 200 nor 503 audit_unavailable")
        return stats

    def test_2_power_loss_full(self):
        stats = self.power_loss_cycles("FULL", POWERLOSS_CYCLES, stop_at_first_loss=False)
        print("power loss, synchronous=FULL:", stats, flush=True)
        F.write_artefact(ARTEFACT, {"power_loss_full": stats})
        self.assertGreater(stats["acknowledged"], 0, "no request was ever acknowledged")
        self.assertEqual(stats["acknowledged_lost"], 0,
                         "a power cut lost decisions that clients had received (synchronous=FULL)")

    def test_3_power_loss_normal_negative_control(self):
        stats = self.power_loss_cycles("NORMAL", NEGATIVE_MAX_CYCLES, stop_at_first_loss=True)
        print("power loss, synchronous=NORMAL (negative control):", stats, flush=True)
        F.write_artefact(ARTEFACT, {"power_loss_normal_negative_control": stats})
        self.assertGreater(stats["acknowledged_lost"], 0,
                           f"with synchronous=NORMAL no power cut in {stats['cycles']} cycles lost an "
                           "acknowledged decision: the power-loss test could not tell durable from not")


if __name__ == "__main__":
    H.main()
