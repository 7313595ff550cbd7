#!/usr/bin/python3
"""What pgcld promises at shutdown (docs/operations.md, "Signals and shutdown"; pgcld --help),
against the real daemon over loopback, with real SQLite files:

- SIGTERM, and SIGINT alike: /readyz and /v2/health/ready turn 503 (draining) on connections already
  open, the listening socket closes (a new connection is refused), a request still arriving is
  completed and answered, its rows are committed, and the daemon exits 0;
- a second SIGTERM or SIGINT during the drain exits at once, with status 1, without waiting for the
  request in flight; signals arriving while an earlier one is handled (a burst of SIGHUPs, a
  SIGTERM during a reload) never end the process by their default action;
- --shutdown-grace running out: the requests still running are closed without an answer and the
  daemon exits 0; nothing it acknowledged is lost, no request has some of its rows and not others,
  every row belongs to a request that was acknowledged or cut, and the audit chain verifies;
- with --signing-key and --checkpoint-interval, a signed checkpoint of the chain head is written at
  shutdown, after the drain: it verifies (`pgcld audit verify --checkpoint --public-key`, and its
  Ed25519 signature checked here with libsodium over the statement of docs/audit.md), and it covers
  the last entry of the chain, including the request answered during the drain;
- checkpoint files survive a SIGKILL: every checkpoint-<head>.json left is whole and verifies, the
  daemon starts again on the same database and directory, and the checkpoints it writes next sign
  later heads that verify with the earlier ones.

No assertion bounds how long anything takes: each step waits on a condition (a metric, a log line,
an answer, an exit) with a generous deadline that is only reached when the test fails.

Run: /usr/bin/python3 tests/integration/test_shutdown.py   (PGCLD_BIN selects the binary)
"""

import ctypes
import ctypes.util
import glob
import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

MODEL = "tiny_binary"
D = 32
WAIT_S = 60.0  # a deadline for conditions: reached only when the test fails


def score_body(n, seed, prefix):
    """A JSON scoring body of n items with ids prefix-0..; returns (bytes, item ids)."""
    Z = H.random_embeddings(n, D, seed)
    items = H.b64_items(Z, prefix=f"{prefix}-")
    return H.encode_body({"items": items}), [it["id"] for it in items]


class HeldRequest:
    """A POST /v1/score whose headers and first half of its body have been sent on a raw socket:
    pgcld holds it in flight (its connection waits for the rest of the body)."""

    def __init__(self, d, n, seed, prefix):
        self.body, self.ids = score_body(n, seed, prefix)
        head = (f"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {d.keys['scorer']}\r\nContent-Length: {len(self.body)}\r\n\r\n").encode()
        # An earlier request's body is given back when the request completes, which can come a
        # moment after its client read the answer: let the count settle first, or `before` would
        # include bytes released meanwhile and the wait below would never end (seen about once in
        # 80 runs on a loaded machine, with the thread-per-connection server as with the pool).
        H.wait_until(lambda: (H.metric(d, "pgcld_body_bytes_reserved") or 0) == 0, 2)
        before = H.metric(d, "pgcld_body_bytes_reserved") or 0
        self.sock = socket.create_connection(("127.0.0.1", d.port), timeout=WAIT_S)
        self.sock.sendall(head + self.body[:len(self.body) // 2])
        # pgcld reserves the body's bytes (its Content-Length) once the first of them arrive
        if not H.wait_until(lambda: (H.metric(d, "pgcld_body_bytes_reserved") or 0) >= before + len(self.body),
                            WAIT_S):
            raise AssertionError(f"pgcld never took the held request in\n{d.logs()}")

    def finish(self):
        self.sock.sendall(self.body[len(self.body) // 2:])

    def answer(self):
        """The answer as an H.Response, or None when the connection closed without one."""
        r = http.client.HTTPResponse(self.sock)
        try:
            r.begin()
            return H.Response(r.status, r.headers, r.read())
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                http.client.IncompleteRead):
            return None

    def close(self):
        self.sock.close()


class KeepAlive:
    """A keep-alive connection opened (and answered once) before the signal: the only way to ask a
    draining daemon anything, since its listening socket is closed."""

    def __init__(self, d):
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=WAIT_S)
        self.last = None
        self.get("/healthz")

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        self.last = H.Response(r.status, r.headers, r.read())
        return self.last

    def close(self):
        self.conn.close()


def connection_refused(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    except ConnectionRefusedError:
        return True
    s.close()
    return False


def log_count(d, text):
    return d.logs(limit=10 ** 8).count(text)


def wait_exit(tc, d):
    """Waits for the daemon to exit; returns its status."""
    try:
        return d.proc.wait(WAIT_S)
    except subprocess.TimeoutExpired:
        tc.fail(f"pgcld did not exit\n{d.logs()}")


def audit_verify(d, *args):
    """`pgcld audit verify --db DB ARGS...`: (exit status, the JSON line or None, stderr)."""
    p = d.cli("audit", "verify", "--db", d.db_path, *args, check=False)
    try:
        doc = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        doc = None
    return p.returncode, doc, p.stderr


def integrity(db_path):
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def signal_drain(tc, d, sig):
    """Sends sig and waits for pgcld's log line saying the drain has begun. pgcld writes it once
    every request read after it is answered as draining, so a probe asked after this returns must
    see 503 at its first answer. (A probe asked during the signal can race the drain: read before,
    answered after, it is 200 with Connection: close, and that connection cannot ask again.)"""
    name = signal.Signals(sig).name
    d.proc.send_signal(sig)
    tc.assertTrue(H.wait_until(lambda: f"shutdown: {name} received; draining" in d.logs(limit=10 ** 9)
                               or d.proc.poll() is not None, WAIT_S),
                  f"no 'shutdown: {name} received; draining' in the log\n{d.logs()}")
    tc.assertIsNone(d.proc.poll(), f"pgcld exited at {name}\n{d.logs()}")


class DrainTest(unittest.TestCase):
    """SIGTERM and SIGINT: readiness 503 and no new connections while a request is still
    arriving; the request is answered and committed; exit 0."""

    def drain(self, sig):
        # a grace no loaded machine can outlast: what is tested is the drain, not its length
        d = H.Daemon(models=[MODEL], default_model=MODEL, args=["--shutdown-grace", "3600"])
        self.addCleanup(d.cleanup, check=False)
        d.start()
        self.assertEqual(d.get("/readyz").status, 200)
        self.assertEqual(d.score(score_body(3, 1, "before")[0]).status, 200)
        # keep-alive connections opened before the signal: while draining, every answer closes its
        # connection (Connection: close sends the client elsewhere), so each asks one thing
        probe, *others = [KeepAlive(d) for _ in range(4)]
        for p in (probe, *others):
            self.addCleanup(p.close)
        held = HeldRequest(d, 40, 2, "held")
        self.addCleanup(held.close)

        signal_drain(self, d, sig)
        ready = probe.get("/readyz")
        self.assertEqual(ready.json, {"status": "not_ready",
                                      "checks": {"models": True, "audit_db": True, "draining": True}}, ready)
        self.assertEqual(ready.headers.get("Retry-After"), "1")
        v2 = others[0].get("/v2/health/ready")
        self.assertEqual((v2.status, v2.json), (503, {"ready": False}), v2)
        live = others[1].get("/healthz")
        self.assertEqual(live.status, 200, "liveness stays 200 while draining")
        metrics = others[2].get("/metrics")
        self.assertEqual(H.parse_metrics(metrics.body.decode()).get("pgcld_draining"), 1.0)
        for r in (ready, v2, live, metrics):
            self.assertEqual((r.headers.get("Connection") or "").lower(), "close",
                             "an answer sent while draining keeps its connection open")
        self.assertTrue(H.wait_until(lambda: connection_refused(d.port), WAIT_S),
                        "a new connection was accepted while draining")
        self.assertIsNone(d.proc.poll(), f"pgcld exited with a request in flight\n{d.logs()}")

        held.finish()
        answer = held.answer()
        self.assertIsNotNone(answer, "the request in flight at the signal was not answered")
        self.assertEqual(answer.status, 200, answer)
        ids = [r["decision_id"] for r in answer.json["results"]]
        self.assertEqual([r["id"] for r in answer.json["results"]], held.ids)
        probe.close()
        self.assertEqual(wait_exit(self, d), 0, d.logs())
        logs = d.logs(limit=10 ** 9)
        self.assertIn("shutdown: complete", logs)
        self.assertNotIn("still running", logs)
        rows = d.rows_for(ids)
        self.assertEqual(sorted(r["item_id"] for r in rows.values()), sorted(held.ids),
                         "the request answered during the drain is not in the audit database")
        self.assertEqual(d.count(), 3 + 40)
        rc, doc, err = audit_verify(d)
        self.assertEqual((rc, doc and doc["intact"]), (0, True), f"{doc} {err}")

    def test_sigterm(self):
        self.drain(signal.SIGTERM)

    def test_sigint(self):
        self.drain(signal.SIGINT)


class SecondSignalTest(unittest.TestCase):
    """A second signal during the drain ends the process at once (status 1): with a grace of an
    hour and a request still arriving, only the second signal can end it."""

    def second_signal(self, first, second):
        d = H.Daemon(models=[MODEL], default_model=MODEL, args=["--shutdown-grace", "3600"])
        self.addCleanup(d.cleanup, check=False)
        d.start()
        acked = d.score(score_body(2, 3, "acked")[0])
        self.assertEqual(acked.status, 200, acked)
        probe = KeepAlive(d)
        self.addCleanup(probe.close)
        held = HeldRequest(d, 8, 4, "held")
        self.addCleanup(held.close)
        signal_drain(self, d, first)
        self.assertEqual(probe.get("/readyz").status, 503)
        self.assertIsNone(d.proc.poll(), "pgcld exited at the first signal with a request in flight")
        d.proc.send_signal(second)
        self.assertEqual(wait_exit(self, d), 1, f"the second signal should exit at once with status 1\n{d.logs()}")
        self.assertIsNone(held.answer(), "the request in flight was answered: the process did not exit at once")
        self.assertNotIn("shutdown: complete", d.logs(limit=10 ** 9))
        # what was acknowledged before is there, and the database is sound
        self.assertEqual(len(d.rows_for(r["decision_id"] for r in acked.json["results"])), 2)
        self.assertEqual(integrity(d.db_path), ["ok"])
        rc, doc, err = audit_verify(d)
        self.assertEqual((rc, doc and doc["intact"]), (0, True), f"{doc} {err}")

    def test_sigterm_then_sigterm(self):
        self.second_signal(signal.SIGTERM, signal.SIGTERM)

    def test_sigint_then_sigterm(self):
        self.second_signal(signal.SIGINT, signal.SIGTERM)

    def test_sigterm_then_sigint(self):
        self.second_signal(signal.SIGTERM, signal.SIGINT)


class SignalBurstTest(unittest.TestCase):
    """Signals that arrive while the daemon is busy with an earlier one (a reload in progress) are
    handled as documented, never by their default action: a burst of SIGHUPs reloads and leaves
    the daemon serving, and a SIGTERM right behind them still drains and exits 0. (Found here: a
    thread that OpenBLAS starts before main() blocks the signals takes them whenever the main
    thread is not waiting for one, and SIGHUP's and SIGTERM's default action ends the process.)"""

    def test_sighup_burst_then_sigterm(self):
        d = H.Daemon(models=[MODEL], default_model=MODEL, args=["--shutdown-grace", "3600"])
        self.addCleanup(d.cleanup, check=False)
        d.start()
        for _ in range(2000):
            os.kill(d.proc.pid, signal.SIGHUP)
        self.assertTrue(H.wait_until(lambda: log_count(d, "SIGHUP: ") > 0 or d.proc.poll() is not None, WAIT_S))
        self.assertIsNone(d.proc.poll(), f"a burst of SIGHUPs ended pgcld (status {d.proc.poll()})\n{d.logs()}")
        self.assertEqual(d.score(score_body(2, 7, "after-hup")[0]).status, 200)
        for _ in range(200):
            os.kill(d.proc.pid, signal.SIGHUP)
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(wait_exit(self, d), 0, f"SIGTERM during reloads did not drain and exit 0\n{d.logs()}")
        self.assertIn("shutdown: complete", d.logs(limit=10 ** 9))


class Client(threading.Thread):
    """Scores on one keep-alive connection until stopped or cut; records every request it made:
    prefix -> (item ids, outcome) with outcome 'acked' (a 200: its decision ids), 'refused' (any
    other answer) or 'cut' (the connection failed: sent, maybe handled, never answered)."""

    def __init__(self, d, k, requests, lock, stop):
        super().__init__(daemon=True)
        self.d, self.k, self.requests, self.lock, self.stop = d, k, requests, lock, stop

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.d.port, timeout=WAIT_S)
        hdrs = {"Content-Type": "application/json", "Authorization": f"Bearer {self.d.keys['scorer']}"}
        j = 0
        try:
            while not self.stop.is_set():
                prefix = f"c{self.k}-{j}"
                body, ids = score_body(1 + (j % 5), 1000 * self.k + j, prefix)
                with self.lock:
                    self.requests[prefix] = (ids, "cut")
                conn.request("POST", "/v1/score", body=body, headers=hdrs)
                r = conn.getresponse()
                payload = r.read()
                with self.lock:
                    if r.status == 200:
                        res = json.loads(payload)["results"]
                        self.requests[prefix] = (ids, ("acked", {x["id"]: x["decision_id"] for x in res}))
                    else:
                        self.requests[prefix] = (ids, ("refused", r.status))
                j += 1
        except (OSError, http.client.HTTPException):
            pass  # cut: the request stays recorded as 'cut'
        finally:
            conn.close()


class GraceRunsOutTest(unittest.TestCase):
    """--shutdown-grace 1 with requests that cannot finish in it: a request whose body never
    completes, one blocked on the audit database's write lock (held by this test), and clients
    that keep scoring on their keep-alive connections. They are closed without an answer (the
    blocked one, suspended, is answered once the lock is released: shutdown waits for suspended
    work) and the daemon exits 0; the audit database holds every acknowledged decision, whole requests only,
    nothing from a request that was refused, and a chain that verifies."""

    GRACE_S = 1

    def test_requests_closed_when_the_grace_runs_out(self):
        d = H.Daemon(models=[MODEL], default_model=MODEL, args=["--shutdown-grace", str(self.GRACE_S)])
        self.addCleanup(d.cleanup, check=False)
        d.start()
        requests, lock, stop = {}, threading.Lock(), threading.Event()
        clients = [Client(d, k, requests, lock, stop) for k in range(3)]
        for c in clients:
            c.start()
        self.addCleanup(stop.set)

        def acked_count():
            with lock:
                return sum(1 for _ids, out in requests.values() if out[0] == "acked")

        self.assertTrue(H.wait_until(lambda: acked_count() >= 30, WAIT_S), "the clients were not served")
        held = HeldRequest(d, 6, 5, "held")
        self.addCleanup(held.close)

        # A request blocked in its handler: the writer waits for the lock held here.
        locker = sqlite3.connect(d.db_path, timeout=30, isolation_level=None)
        self.addCleanup(locker.close)
        locker.execute("BEGIN EXCLUSIVE")
        blocked_body, blocked_ids = score_body(4, 6, "blocked")
        blocked = {}

        def send_blocked():
            try:
                blocked["r"] = d.score(blocked_body, timeout=WAIT_S)
            except (OSError, http.client.HTTPException) as e:
                blocked["error"] = e

        sender = threading.Thread(target=send_blocked, daemon=True)
        sender.start()
        # the blocked request's rows wait for the writer (which waits for the lock)
        self.assertTrue(H.wait_until(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) > 0, WAIT_S),
                        "no request reached the audit writer")

        t_signal = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        cut_log = "requests still running after %d s; closing them" % self.GRACE_S
        self.assertTrue(H.wait_until(lambda: cut_log in d.logs(limit=10 ** 9), WAIT_S),
                        f"no '{cut_log}' in the log\n{d.logs()}")
        locker.execute("ROLLBACK")  # the writer may commit the blocked request's rows now, or have given up
        locker.close()
        status = wait_exit(self, d)
        t_exit = time.monotonic()
        stop.set()
        for c in clients:
            c.join(WAIT_S)
            self.assertFalse(c.is_alive(), "a client hung after the daemon exited")
        sender.join(WAIT_S)
        self.assertFalse(sender.is_alive(), "the blocked request hung after the daemon exited")

        self.assertEqual(status, 0, d.logs())
        self.assertIn("shutdown: complete", d.logs(limit=10 ** 9))
        # the grace is counted from the signal: the exit cannot come before it (an inequality that a
        # loaded machine only makes truer)
        self.assertGreaterEqual(t_exit - t_signal, self.GRACE_S)
        self.assertIsNone(held.answer(), "the request whose body never completed was answered")
        blocked_outcome = "cut"
        if "r" in blocked:
            r = blocked["r"]
            if r.status == 200:
                # The request waits for its commit suspended (it holds no thread), and shutdown waits
                # for every suspended request's work to end before it stops the server: once the lock
                # is released the rows are committed, and the answer leaves.
                res = r.json["results"]
                blocked_outcome = ("acked", {x["id"]: x["decision_id"] for x in res})
            else:
                # The writer gives up on the lock after its 5 s busy timeout: on a machine slow enough
                # for that to come before the grace ran out, the blocked request was refused, as it
                # should be.
                self.assertEqual((r.status, r.error_code()), (503, "audit_unavailable"), r)
                blocked_outcome = ("refused", 503)
                print("note: the blocked request was refused before the grace ran out (a slow machine)",
                      file=sys.stderr)

        # The audit database: acknowledged decisions all there, whole requests only.
        with lock:
            outcomes = dict(requests)
        outcomes["held"] = (held.ids, "cut")
        outcomes["blocked"] = (blocked_ids, blocked_outcome)
        by_item = {r["item_id"]: r for r in H.db_query(d.db_path, "SELECT item_id, decision_id FROM decisions")}
        acked_rows = cut_whole = 0
        for prefix, (ids, out) in sorted(outcomes.items()):
            present = [i for i in ids if i in by_item]
            if out[0] == "acked":
                self.assertEqual({i: by_item[i]["decision_id"] for i in present}, out[1],
                                 f"{prefix}: acknowledged decisions missing or different in the database")
                acked_rows += len(ids)
            elif out[0] == "refused":
                self.assertEqual(present, [], f"{prefix}: refused ({out[1]}) but has rows")
            else:
                self.assertIn(len(present), (0, len(ids)), f"{prefix}: a request cut with some of its rows only")
                cut_whole += len(present)
        self.assertEqual(len(by_item), acked_rows + cut_whole,
                         "rows that belong to no request a client made")
        self.assertGreater(acked_rows, 0)
        self.assertEqual(integrity(d.db_path), ["ok"])
        rc, doc, err = audit_verify(d)
        self.assertEqual((rc, doc and doc["intact"]), (0, True), f"{doc} {err}")
        print(f"grace {self.GRACE_S} s: {acked_rows} acknowledged rows, {cut_whole} rows of requests cut "
              f"after their commit, {sum(1 for _i, o in outcomes.values() if o == 'cut')} requests cut",
              file=sys.stderr)


# --------------------------------------------------------------------------- signed checkpoints

def libsodium():
    path = ctypes.util.find_library("sodium")
    if not path:
        raise RuntimeError("libsodium not found (deploy/install-deps.sh installs libsodium-dev)")
    lib = ctypes.CDLL(path)
    if lib.sodium_init() < 0:
        raise RuntimeError("sodium_init failed")
    return lib


def signature_valid(cp):
    """Checks cp's Ed25519 signature over the statement docs/audit.md defines, with libsodium
    (independently of pgcld's own verification)."""
    if cp.get("version") == 1:
        statement = f"pgcld-audit-checkpoint-v1\n{cp['head_seq']}\n{cp['head_hash']}\n{cp['created_at']}\n".encode()
    else:
        statement = (f"pgcld-audit-checkpoint-v2\n{cp['head_seq']}\n{cp['head_hash']}\n{cp['log_root']}\n"
                     f"{cp['created_at']}\n").encode()
    sig, pk = bytes.fromhex(cp["signature"]), bytes.fromhex(cp["public_key"])
    if len(sig) != 64 or len(pk) != 32:
        return False
    return libsodium().crypto_sign_verify_detached(sig, statement, ctypes.c_ulonglong(len(statement)), pk) == 0


def read_checkpoints(directory):
    """{file name: parsed JSON} of every checkpoint-*.json in directory (raises on a file that is
    not whole JSON)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "checkpoint-*.json"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)] = json.load(f)
    return out


def chain_head(db_path):
    return H.db_scalar(db_path, "SELECT max(seq) FROM audit_chain")


class CheckpointTest(unittest.TestCase):
    def daemon(self, interval):
        d = H.Daemon(models=[MODEL], default_model=MODEL, args=["--shutdown-grace", "3600"])
        self.addCleanup(d.cleanup, check=False)
        self.key = os.path.join(d.tmp, "signing.key")
        self.cp_dir = os.path.join(d.tmp, "checkpoints")
        os.makedirs(self.cp_dir)
        self.public = d.cli("audit", "keygen", "--out", self.key).stdout.strip().splitlines()[-1]
        d.args += ["--signing-key", self.key, "--checkpoint-dir", self.cp_dir,
                   "--checkpoint-interval", str(interval)]
        return d

    def check_checkpoint(self, name, cp):
        self.assertEqual(name, f"checkpoint-{cp['head_seq']}.json")
        self.assertEqual((cp["format"], cp["version"], cp["public_key"]),
                         ("pgcld-audit-checkpoint", 2, self.public), cp)
        self.assertTrue(signature_valid(cp), f"{name}: the Ed25519 signature does not verify")
        forged = dict(cp, head_seq=cp["head_seq"] + 1)
        self.assertFalse(signature_valid(forged), "the signature check accepts anything")

    def verify_all(self, d, names):
        args = ["--public-key", self.public]
        for n in names:
            args += ["--checkpoint", os.path.join(self.cp_dir, n)]
        rc, doc, err = audit_verify(d, *args)
        self.assertEqual(rc, 0, f"pgcld audit verify with {names}: {doc} {err}")
        self.assertTrue(doc["intact"], doc)
        self.assertEqual(doc["checkpoints"], len(names))
        return doc

    def test_signed_checkpoint_at_shutdown_covers_the_drain(self):
        """An interval of an hour: the only checkpoint is the one written at shutdown, after the
        request answered during the drain."""
        d = self.daemon(3600)
        d.start()
        for i in range(3):
            self.assertEqual(d.score(score_body(2, 10 + i, f"pre{i}")[0]).status, 200)
        probe = KeepAlive(d)
        self.addCleanup(probe.close)
        held = HeldRequest(d, 5, 20, "drained")
        self.addCleanup(held.close)
        self.assertEqual(read_checkpoints(self.cp_dir), {}, "a checkpoint before the interval or the shutdown")
        signal_drain(self, d, signal.SIGTERM)
        self.assertEqual(probe.get("/readyz").status, 503)
        held.finish()
        answer = held.answer()
        self.assertEqual(answer and answer.status, 200, answer)
        probe.close()
        self.assertEqual(wait_exit(self, d), 0, d.logs())

        cps = read_checkpoints(self.cp_dir)
        self.assertEqual(len(cps), 1, f"one checkpoint, written at shutdown: {sorted(cps)}")
        self.assertEqual(glob.glob(os.path.join(self.cp_dir, "*.tmp*")), [], "a temporary file left behind")
        (name, cp), = cps.items()
        self.check_checkpoint(name, cp)
        head = chain_head(d.db_path)
        self.assertEqual(cp["head_seq"], head, "the shutdown checkpoint does not sign the chain's last entry")
        self.assertEqual(cp["head_hash"], H.db_scalar(d.db_path, "SELECT hash FROM audit_chain WHERE seq = ?",
                                                      (head,)))
        drained = [r["decision_id"] for r in answer.json["results"]]
        # the entries chaining them: their own (encoding version 1) or their commits' (version 2)
        covered = H.db_scalar(d.db_path, "SELECT max(e) FROM (SELECT c.seq AS e FROM audit_chain c JOIN decisions x "
                                         "ON c.kind = 'decisions' AND c.row_seq = x.seq "
                                         "WHERE x.decision_id IN (SELECT value FROM json_each(?1)) "
                                         "UNION ALL SELECT u.entry_seq FROM audit_chain_runs u JOIN decisions x "
                                         "ON u.kind = 'decisions' AND x.seq >= u.first_row_seq "
                                         "AND x.seq < u.first_row_seq + u.n "
                                         "WHERE x.decision_id IN (SELECT value FROM json_each(?1)))",
                              (json.dumps(drained),))
        self.assertIsNotNone(covered, "the drained request's decisions are not chained")
        self.assertLessEqual(covered, cp["head_seq"], "the checkpoint was written before the drain ended")
        doc = self.verify_all(d, [name])
        self.assertEqual(doc["head_seq"], cp["head_seq"])
        self.assertEqual(H.db_query(d.db_path, "SELECT head_seq, signature FROM audit_checkpoints"),
                         [{"head_seq": cp["head_seq"], "signature": cp["signature"]}])
        self.assertIn(f"audit checkpoint: head {head} signed", d.logs(limit=10 ** 9))
        # a checkpoint is only worth something if a rewrite of what it signs is caught
        with open(os.path.join(self.cp_dir, name), encoding="utf-8") as f:
            text = f.read()
        bad = os.path.join(d.tmp, "tampered.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write(text.replace(cp["head_hash"], "0" * 64))
        rc, doc, err = audit_verify(d, "--public-key", self.public, "--checkpoint", bad)
        self.assertNotEqual(rc, 0, f"a checkpoint with another head hash verified: {doc}")

    def test_checkpoint_files_survive_sigkill(self):
        d = self.daemon(1)
        d.start()
        round_ = [0]

        def score_and_count_heads():
            round_[0] += 1
            self.assertEqual(d.score(score_body(2, 100 + round_[0], f"r{round_[0]}")[0]).status, 200)
            return len(read_checkpoints(self.cp_dir)) >= 3

        self.assertTrue(H.wait_until(score_and_count_heads, WAIT_S, interval=0.2),
                        f"fewer than 3 checkpoints of different heads\n{d.logs()}")
        d.proc.kill()
        d.proc.wait()
        d.kill()

        before = read_checkpoints(self.cp_dir)  # json.load raises on a file that is not whole
        for name, cp in before.items():
            self.check_checkpoint(name, cp)
        leftovers = glob.glob(os.path.join(self.cp_dir, "*.tmp*"))
        self.verify_all(d, sorted(before))
        max_before = max(cp["head_seq"] for cp in before.values())

        d.start()  # the same database and checkpoint directory
        acked = d.score(score_body(3, 200, "after")[0])
        self.assertEqual(acked.status, 200, acked)
        self.assertTrue(H.wait_until(lambda: any(cp["head_seq"] > max_before
                                                 for cp in read_checkpoints(self.cp_dir).values()), WAIT_S),
                        f"no checkpoint of a later head after the restart\n{d.logs()}")
        self.assertEqual(d.stop(), 0, d.logs())

        after = read_checkpoints(self.cp_dir)
        for name, cp in after.items():
            self.check_checkpoint(name, cp)
        for name, cp in before.items():
            # still there, signing the same head (a checkpoint of an unchanged head is written again
            # under the same name)
            self.assertIn(name, after)
            self.assertEqual((after[name]["head_seq"], after[name]["head_hash"]), (cp["head_seq"], cp["head_hash"]))
        new = {n: cp for n, cp in after.items() if n not in before}
        self.assertTrue(new, "no new checkpoint after the restart")
        self.assertTrue(all(cp["head_seq"] > max_before for cp in new.values()), sorted(new))
        self.assertEqual(max(cp["head_seq"] for cp in after.values()), chain_head(d.db_path),
                         "the checkpoint at shutdown does not cover the chain's last entry")
        self.verify_all(d, sorted(after))
        print(f"checkpoints: {len(before)} before the SIGKILL (heads up to {max_before}), {len(new)} new after "
              f"the restart; {len(leftovers)} temporary files left by the kill", file=sys.stderr)


if __name__ == "__main__":
    H.main()
