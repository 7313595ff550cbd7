"""Shared pieces of tests/integration/test_crash.py and test_storage_faults.py: scoring load from
client threads, the checks run on an audit database after a crash or a fault, and the JSON
artefact the figures go to.

Environment:
  PGCLD_FAULTS_BIN   tests/faults/pgcld_faults (default: <root>/build/tests/faults/pgcld_faults)
  PGCLD_ARTEFACTS    where the JSON figures are written (default: a temporary directory)
"""

import http.client
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "integration"))

import harness as H  # noqa: E402

PGCLD_FAULTS_BIN = os.path.abspath(
    os.environ.get("PGCLD_FAULTS_BIN") or
    os.path.join(H.SOURCE_ROOT, "build", "tests", "faults", "pgcld_faults"))
ARTEFACTS = os.environ.get("PGCLD_ARTEFACTS") or tempfile.gettempdir()
MODEL = "toxicity"
D = 1024


def require_faults_binary():
    if not (os.path.isfile(PGCLD_FAULTS_BIN) and os.access(PGCLD_FAULTS_BIN, os.X_OK)):
        raise RuntimeError(f"pgcld_faults not found: {PGCLD_FAULTS_BIN} (build it, or set PGCLD_FAULTS_BIN)")


def make_bodies(seed, n=24, json_share=0.25):
    """Request bodies of 1-16 items each, as in test_score.py: most as base64 of float32, about a
    quarter as JSON arrays of numbers. Returns [(body bytes, [item ids])]."""
    rng = random.Random(seed)
    out = []
    for b in range(n):
        k = rng.randint(1, 16)
        Z = H.random_embeddings(k, D, seed * 1000 + b)
        prefix = f"s{seed}-b{b}"
        items = H.json_items(Z, prefix) if rng.random() < json_share else H.b64_items(Z, prefix)
        body = json.dumps({"model": MODEL, "items": items, "return_vector": False}).encode()
        out.append((body, [it["id"] for it in items]))
    return out


class Outcome:
    """What the clients saw, shared by the client threads (under a lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}          # decision_id -> item id, from 200 answers only
        self.statuses = {}       # HTTP status -> count
        self.refused = []        # (status, code, Retry-After) of every non-200 answer
        self.refused_items = []  # item ids of refused requests
        self.problems = []       # anything that is neither a 200 nor a well-formed 503
        self.transport_errors = 0
        self.first_200_after = {}  # tag -> monotonic time of the first 200 after mark(tag)
        self._marks = {}

    def mark(self, tag):
        with self.lock:
            self._marks[tag] = time.monotonic()

    def record(self, status, headers, payload, item_ids):
        try:
            doc = json.loads(payload.decode("utf-8")) if payload else None
        except ValueError:
            doc = None
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                now = time.monotonic()
                for tag, t in self._marks.items():
                    self.first_200_after.setdefault(tag, now)
                results = (doc or {}).get("results") or []
                if [r.get("id") for r in results] != item_ids:
                    self.problems.append(f"200 with results {len(results)} for {len(item_ids)} items")
                for r in results:
                    self.acked[r["decision_id"]] = r["id"]
                return
            code = ((doc or {}).get("error") or {}).get("code")
            retry = headers.get("Retry-After")
            self.refused.append((status, code, retry))
            self.refused_items.extend(item_ids)
            if status != 503 or code != "audit_unavailable" or not retry:
                self.problems.append(f"answer {status} code={code} Retry-After={retry}: {payload[:200]!r}")


class Load:
    """n client threads posting /v1/score to a daemon as fast as they can, over keep-alive
    connections, until stop(); a transport error (the daemon was killed) ends a thread."""

    def __init__(self, daemon, outcome, n_threads, seed, stop_on_error=True, timeout=30.0):
        self.daemon, self.outcome, self.timeout = daemon, outcome, timeout
        self.stop_on_error = stop_on_error
        self._stop = threading.Event()
        self.bodies = [make_bodies(seed * 100 + t) for t in range(n_threads)]
        self.threads = [threading.Thread(target=self._run, args=(t, seed), daemon=True)
                        for t in range(n_threads)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self, join_timeout=60.0):
        self._stop.set()
        for t in self.threads:
            t.join(join_timeout)
        return not any(t.is_alive() for t in self.threads)

    def _run(self, t, seed):
        rng = random.Random(seed * 7919 + t)
        key = self.daemon.keys.get("scorer")
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        conn = None
        while not self._stop.is_set():
            body, ids = rng.choice(self.bodies[t])
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.daemon.port, timeout=self.timeout)
                conn.request("POST", "/v1/score", body=body, headers=headers)
                r = conn.getresponse()
                payload = r.read()
                self.outcome.record(r.status, r.headers, payload, ids)
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except socket.timeout:
                with self.outcome.lock:
                    self.outcome.problems.append("a request timed out (the daemon hung?)")
                return
            except (OSError, http.client.HTTPException):
                with self.outcome.lock:
                    self.outcome.transport_errors += 1
                if conn is not None:
                    conn.close()
                    conn = None
                if self.stop_on_error:
                    return
                time.sleep(0.01)  # a client's pause after a transport error (load, not a wait)
        if conn is not None:
            conn.close()


# --------------------------------------------------------------------------- checks

def integrity_check(db_path):
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    finally:
        conn.close()


def chain_verify(db_path):
    """`pgcld audit verify --db` with the production binary: (exit status, parsed JSON or None, stderr)."""
    p = subprocess.run([H.PGCLD_BIN, "audit", "verify", "--db", db_path], capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    try:
        doc = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        doc = None
    return p.returncode, doc, p.stderr


def missing_acknowledged(db_path, acked):
    """The acknowledged decision ids that are not in the database, and those whose row has another
    item id than the answer gave."""
    ids = list(acked)
    found = {}
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            q = "SELECT decision_id, item_id FROM decisions WHERE decision_id IN (%s)" % ",".join("?" * len(chunk))
            found.update(conn.execute(q, chunk).fetchall())
    finally:
        conn.close()
    missing = [x for x in ids if x not in found]
    wrong = [x for x in ids if x in found and found[x] != acked[x]]
    return missing, wrong


def decisions_count(db_path):
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT count(*) FROM decisions").fetchone()[0]
    finally:
        conn.close()


def check_database(tc, db_path, acked, where):
    """Every acknowledged decision present with its item id, integrity_check ok, the chain intact."""
    missing, wrong = missing_acknowledged(db_path, acked)
    tc.assertEqual(missing, [], f"{where}: {len(missing)} acknowledged decisions are not in the database")
    tc.assertEqual(wrong, [], f"{where}: rows with another item id than the answer gave")
    tc.assertEqual(integrity_check(db_path), ["ok"], f"{where}: PRAGMA integrity_check")
    rc, doc, err = chain_verify(db_path)
    tc.assertEqual(rc, 0, f"{where}: pgcld audit verify: {doc} {err}")
    tc.assertTrue(doc and doc.get("intact"), f"{where}: chain not intact: {doc}")
    return doc


def write_artefact(name, figures):
    """Merges figures into ARTEFACTS/name (JSON) and returns the path."""
    os.makedirs(ARTEFACTS, exist_ok=True)
    path = os.path.join(ARTEFACTS, name)
    doc = {}
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        pass
    doc.update(figures)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path
