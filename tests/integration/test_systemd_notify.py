"""systemd's notification protocol (issue 19, item 1), the way a Type=notify unit sees it.

systemd is not PID 1 here, so the test plays the service manager: it binds a unix datagram socket,
starts the real daemon with NOTIFY_SOCKET pointing at it (and WATCHDOG_USEC, WATCHDOG_PID as systemd
sets them: the main process's pid) and reads what arrives, with the sender's credentials (the unit
file's NotifyAccess=main accepts only the main process). It checks, in order:

  - READY=1 only once /readyz answers 200 (asked the moment READY=1 arrives), with STATUS= naming
    the models served; with no model at start, no READY=1 until a model is activated;
  - WATCHDOG=1 keeps coming (every half WATCHDOG_USEC; its pace is not checked); none when
    WATCHDOG_PID names another process;
  - RELOADING=1 (with MONOTONIC_USEC=, CLOCK_MONOTONIC, read between the signal and the message)
    then READY=1 around SIGHUP;
  - the watchdog's liveness rule (docs/operations.md, "systemd"): while the audit writer is stuck
    inside one write (the database write-locked by another connection) for more than half
    WATCHDOG_USEC, no ping goes out and STATUS= says so; pings resume once it commits. Shown by
    the order of the messages (stall_round), never by their times;
  - STOPPING=1 when SIGTERM's drain begins, and no READY=1 after it;
  - without NOTIFY_SOCKET nothing is sent and nothing about systemd is logged (every other test
    runs the daemon that way).
"""

import os
import re
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import skips  # noqa: E402

WATCHDOG_USEC = 2_000_000  # pings every 1 s; the writer may owe progress for less than 1 s
D = 1024                   # the toxicity model's input width
WAIT_S = 60                # deadlines of waits that a failing test never ends
STALL_ROUNDS = 3           # tries of the stall, which the writer's busy timeout may end early


class NotifySocket:
    """The service manager's end: a unix datagram socket and a thread that records every message
    as (monotonic time, sender pid, {field: value}, what on_ready returned for a READY=1)."""

    def __init__(self, directory, on_ready):
        self.path = os.path.join(directory, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.on_ready = on_ready
        self.messages = []
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        cred_size = struct.calcsize("iII")
        while not self.stopping:
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(cred_size))
            except socket.timeout:
                continue
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:cred_size])[0]
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            ready_check = self.on_ready() if fields.get("READY") == "1" else None
            with self.lock:
                self.messages.append((time.monotonic(), pid, fields, ready_check))

    def snapshot(self):
        with self.lock:
            return list(self.messages)

    def wait_for(self, predicate, timeout=30.0):
        """Waits for a message (t, pid, fields, ready_check) that satisfies predicate; returns the
        first such, or None after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.snapshot():
                if predicate(m):
                    return m
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    def close(self):
        self.stopping = True
        self.thread.join(5)
        self.sock.close()


def has(field, value=None):
    return lambda m: field in m[2] and (value is None or m[2][field] == value)


def pings(messages, since=0.0, until=float("inf")):
    return [m[0] for m in messages if m[2].get("WATCHDOG") == "1" and since <= m[0] <= until]


class SystemdNotifyTest(unittest.TestCase):
    def start(self, models=("toxicity",), watchdog_pid="self"):
        """A daemon under the test's 'service manager'; returns (daemon, socket). watchdog_pid:
        "self" sets WATCHDOG_PID to the daemon's own pid (a wrapper that execs pgcld, as systemd
        does), another value is passed as it is."""
        tmp = tempfile.mkdtemp(prefix="pgcld-notify-")
        self.addCleanup(shutil.rmtree, tmp, True)
        box = {}

        def readyz_now():
            port_file = os.path.join(box["d"].tmp, f"port.{box['d'].starts}")
            with open(port_file, encoding="ascii") as f:
                return H.http_request(int(f.read()), "GET", "/readyz").status

        notify = NotifySocket(tmp, readyz_now)
        self.addCleanup(notify.close)
        env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)}
        binary = None
        if watchdog_pid == "self":
            binary = os.path.join(tmp, "pgcld-as-main-pid")
            with open(binary, "w", encoding="utf-8") as f:
                f.write(f'#!/bin/sh\nWATCHDOG_PID=$$; export WATCHDOG_PID\nexec "{H.PGCLD_BIN}" "$@"\n')
            os.chmod(binary, stat.S_IRWXU)
        else:
            env["WATCHDOG_PID"] = watchdog_pid
        d = box["d"] = H.Daemon(models=models, binary=binary, env=env)
        self.addCleanup(d.cleanup, False)
        d.start()
        if "built without libsystemd" in d.logs(10 ** 9):
            skips.missing_in_case(self, "pgcld built with libsystemd (Debian's libsystemd-dev)")
        return d, notify

    def stall_round(self, d, notify, attempt):
        """The audit writer stuck in one write: the database write-locked by another connection, and a
        request whose rows the writer must commit. The notifier thread sends, in order, a ping or
        nothing every half WATCHDOG_USEC, and STATUS= whenever its text changes: "audit queue 1
        rows" once the row waits, then "audit writer stalled X s, watchdog withheld" with X growing
        each second while the stall lasts. Their order on the socket says what happened, whatever
        the machine's speed: after the row is queued at most one ping (the writer owes progress for
        less than half WATCHDOG_USEC until then), and none between two "withheld" statuses.

        The lock is held until the second "withheld" status has arrived, which the daemon's own
        clock puts 2 to 4 s into the stall. The writer waits for the lock only so long (SQLite's
        busy timeout, 5 s; PostgreSQL's lock_timeout, 10 s), then gives up (503 audit_unavailable)
        and the stall ends: if that comes first, the round shows nothing and None is returned.
        Otherwise (the messages since the round began, the indexes among them of the "withheld"
        statuses, the time of the release)."""
        def last_status():
            return next((m[2]["STATUS"] for m in reversed(notify.snapshot()) if "STATUS" in m[2]), "")

        # the last status says the queue is empty: a later one that does not is this round's row's
        H.wait_for(lambda: "; audit queue 0 rows" in last_status(), "a STATUS= with the audit queue empty")
        start = len(notify.snapshot())
        locker = H.WriterLock(d.db_path)
        self.addCleanup(locker.release)
        answers = []
        scorer = threading.Thread(target=lambda: answers.append(
            d.score({"items": H.json_items(H.random_embeddings(1, D, 7), f"stalled{attempt}-")}, timeout=WAIT_S)))
        scorer.start()

        def stalled_or_answered():
            after = notify.snapshot()[start:]
            held = [k for k, m in enumerate(after) if "watchdog withheld" in m[2].get("STATUS", "")]
            return (after, held) if len(held) >= 2 or not scorer.is_alive() else None

        try:
            after, held = H.wait_for(stalled_or_answered, "two STATUS= messages saying the watchdog is withheld")
        finally:
            t_release = time.monotonic()
            locker.release()
        scorer.join(WAIT_S)
        self.assertFalse(scorer.is_alive(), "the stalled request was never answered")
        self.assertEqual(len(answers), 1, "the stalled request failed")
        if len(held) >= 2:
            self.assertIn(answers[0].status, (200, 503), answers[0])
            return after, held, t_release
        # answered first: only because the writer gave up on the lock (never with its rows committed)
        self.assertEqual((answers[0].status, answers[0].error_code()), (503, "audit_unavailable"), answers[0])
        print(f"note: round {attempt}: the writer gave up on the lock before the watchdog was withheld twice; "
              f"again", file=sys.stderr)
        return None

    def test_ready_reload_watchdog_stall_and_stop(self):
        d, notify = self.start()
        ready = notify.wait_for(has("READY", "1"))
        self.assertIsNotNone(ready, f"no READY=1 within 30 s: {notify.snapshot()}\n{d.logs(10 ** 9)}")
        self.assertEqual(ready[3], 200, "READY=1 arrived while /readyz did not answer 200")
        self.assertIn("serving toxicity/1", ready[2].get("STATUS", ""), ready)
        self.assertRegex(ready[2]["STATUS"], r"; audit queue \d+ rows")

        # the watchdog: pings keep coming while the daemon is healthy (every half WATCHDOG_USEC; how
        # fast is not checked, a loaded machine delays them)
        H.wait_for(lambda: len(pings(notify.snapshot(), since=ready[0])) >= 3, "three pings after READY=1")

        # SIGHUP: RELOADING=1 with MONOTONIC_USEC (CLOCK_MONOTONIC, Python's time.monotonic), then READY=1
        hup_at = time.monotonic()
        d.proc.send_signal(signal.SIGHUP)
        reloading = notify.wait_for(lambda m: m[0] >= hup_at and has("RELOADING", "1")(m))
        self.assertIsNotNone(reloading, notify.snapshot())
        # CLOCK_MONOTONIC: read after the signal was sent and before the message was received
        self.assertLessEqual(hup_at, int(reloading[2]["MONOTONIC_USEC"]) / 1e6 + 1e-6, reloading)
        self.assertLessEqual(int(reloading[2]["MONOTONIC_USEC"]) / 1e6, reloading[0] + 1e-6, reloading)
        reloaded = notify.wait_for(lambda m: m[0] >= reloading[0] and m is not reloading and has("READY", "1")(m))
        self.assertIsNotNone(reloaded, notify.snapshot())
        self.assertEqual(reloaded[3], 200)
        self.assertIn("serving toxicity/1", reloaded[2].get("STATUS", ""))

        # the audit writer stuck in one write (stall_round): at most one ping once the row waits,
        # none between two statuses saying the watchdog is withheld, and "withheld" said
        for attempt in range(1, STALL_ROUNDS + 1):
            stall = self.stall_round(d, notify, attempt)
            if stall:
                break
        else:
            self.fail(f"in each of {STALL_ROUNDS} rounds the audit writer gave up on the locked database (its "
                      f"busy timeout) before two STATUS= messages said the watchdog was withheld: a machine too "
                      f"slow for this check")
        after, held, t_release = stall
        # from the first status that shows the row waiting to the second "withheld" one
        queued = next((k for k, m in enumerate(after) if re.search(r"; audit queue [1-9]\d* rows", m[2].get("STATUS", ""))),
                      None)
        self.assertIsNotNone(queued, f"no STATUS= showed the row waiting: {after}")
        self.assertLessEqual(queued, held[0], after)
        stalled = [m for m in after[queued:held[1] + 1] if m[2].get("WATCHDOG") == "1"]
        self.assertLessEqual(len(stalled), 1, f"pings while the writer was stuck: {after}")
        self.assertEqual([m for m in after[held[0]:held[1] + 1] if m[2].get("WATCHDOG") == "1"], [],
                         f"a ping between two statuses saying the watchdog was withheld: {after}")
        stall_s = [float(re.search(r"stalled ([0-9.]+) s", after[k][2]["STATUS"]).group(1)) for k in held[:2]]
        self.assertLess(stall_s[0], stall_s[1], f"the stall does not grow: {after}")
        self.assertGreaterEqual(stall_s[0], WATCHDOG_USEC / 2e6, "withheld before the writer owed half WATCHDOG_USEC")
        self.assertIn("watchdog ping withheld", d.logs(10 ** 9))
        # and they resume once it commits
        H.wait_for(lambda: len(pings(notify.snapshot(), since=t_release)) >= 2, "pings resume after the lock was released")
        self.assertIn("watchdog pings resume", d.logs(10 ** 9))

        # SIGTERM: STOPPING=1 once the drain begins, and no READY=1 after it
        self.assertEqual(d.stop(), 0, d.logs(10 ** 9))
        messages = notify.snapshot()
        stopping = [m for m in messages if m[2].get("STOPPING") == "1"]
        self.assertEqual(len(stopping), 1, messages)
        self.assertIn("draining", stopping[0][2].get("STATUS", ""))
        self.assertFalse([m for m in messages if m[0] > stopping[0][0] and m[2].get("READY") == "1"])
        # every message came from the main process (NotifyAccess=main)
        self.assertEqual({m[1] for m in messages}, {d.proc.pid}, "a message came from another process")
        # the state messages in order
        states = [k for m in messages for k in ("READY", "RELOADING", "STOPPING") if m[2].get(k) == "1"]
        self.assertEqual(states, ["READY", "RELOADING", "READY", "STOPPING"], messages)

    def test_ready_waits_until_a_model_serves(self):
        empty = os.path.join(tempfile.mkdtemp(prefix="pgcld-notify-models-"), "models")
        os.makedirs(empty)
        self.addCleanup(shutil.rmtree, os.path.dirname(empty), True)
        # WATCHDOG_PID names another process: sd_watchdog_enabled says no watchdog for this one
        d, notify = self.start(models=empty, watchdog_pid="1")
        not_ready = notify.wait_for(lambda m: "not ready" in m[2].get("STATUS", ""), 10)
        self.assertIsNotNone(not_ready, notify.snapshot())
        self.assertIn("no model serves", not_ready[2]["STATUS"])
        # the point: time passes (1.5 s, more than a ping period) in which no READY=1 may arrive
        time.sleep(1.5)
        self.assertEqual(d.get("/readyz").status, 503)
        self.assertFalse([m for m in notify.snapshot() if m[2].get("READY") == "1"], "READY=1 while not ready")

        shutil.copytree(H.model_source("toxicity"), os.path.join(empty, "toxicity"))
        activated_at = time.monotonic()
        r = d.post("/v1/admin/models/toxicity/activate", {"version": "1"})
        self.assertEqual(r.status, 200, r)
        ready = notify.wait_for(has("READY", "1"), 10)
        self.assertIsNotNone(ready, notify.snapshot())
        self.assertGreaterEqual(ready[0], activated_at)
        self.assertEqual(ready[3], 200, "READY=1 arrived while /readyz did not answer 200")
        self.assertIn("serving toxicity/1", ready[2].get("STATUS", ""))
        self.assertEqual(d.stop(), 0)
        self.assertEqual(pings(notify.snapshot()), [], "pings although WATCHDOG_PID named another process")
        self.assertIn("no watchdog", d.logs(10 ** 9))

    def test_without_notify_socket_nothing_changes(self):
        if os.environ.get("NOTIFY_SOCKET"):
            self.skipTest("the test itself runs under a service manager ($NOTIFY_SOCKET set)")
        d = H.Daemon(env={"WATCHDOG_USEC": str(WATCHDOG_USEC)})
        self.addCleanup(d.cleanup, False)
        d.start()
        self.assertTrue(H.wait_until(lambda: d.get("/readyz").status == 200, 30))
        self.assertEqual(d.stop(), 0)
        self.assertNotIn("systemd:", d.logs(10 ** 9))


if __name__ == "__main__":
    H.main()
