"""Test harness for pgcld integration tests.

Starts a real ``pgcld serve`` on 127.0.0.1:0 with a fresh temporary audit database and a
models directory assembled from checkpoint directories, waits for the port file, and offers
HTTP (urllib, loopback only), SQLite and numpy reference helpers.

Environment:
  PGCLD_BIN          the daemon binary (default: <root>/build/server/pgcld)
  PGCLD_SOURCE_ROOT  the repository root (default: two directories above this file)
  PGCLD_KEEP_TMP     if set, temporary directories are not removed (for debugging)
  PGCLD_TEST_STORE   "postgresql": every Daemon not given a db_path gets a fresh database in one
                     throw-away PostgreSQL cluster per test program (pg_cluster.PgCluster, made on
                     first use, dropped at exit and on SIGTERM/SIGINT/SIGHUP) and is started with
                     --db <URI>; anything else (or unset): a SQLite file in the daemon's directory

The database helpers (db_query, db_scalar, Daemon.query/scalar/count/rows_for) take either store:
a libpq URI is read through psycopg2 with the same SQL and `?` placeholders, rows come back as
dicts keyed by column name, bytea as bytes. Tests that are about the SQLite file by nature (they
open, lock or tamper it, read PRAGMAs) skip on PostgreSQL with sqlite_only(reason).

Parts of it live in their own modules, which this one re-exports (`H.<name>` is the way to use
them): harness_http.py (requests and answers), harness_db.py (the audit database, either store) and
harness_reference.py (inputs and the numpy reference model). This module keeps the paths, the
checkpoints, the PostgreSQL test cluster and the daemon.

Only the Python standard library and numpy are used (psycopg2 on PostgreSQL only).
"""

import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error

# The parts of the harness in their own modules, re-exported so that `H.<name>` keeps working.
from harness_db import (  # noqa: F401
    TEST_STORE, ON_POSTGRES, is_postgres, sqlite_only, db_query, db_scalar, db_execute,
    db_insert_events, WriterLock, decision_count, decisions_present, sqlite_integrity_ok,
    blob_vector, _PG_CONNECTIONS, _pg_forget)
from harness_http import (  # noqa: F401
    HTTP_TIMEOUT_S, error_object, Response, encode_body, http_request, raw_request)
from harness_reference import (  # noqa: F401
    f32, embedding_json, embedding_b64, input_sha256, random_embeddings, json_items, b64_items,
    uuid7_millis, load_safetensors, ReferenceModel, policy_decision, near_policy_boundary)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.abspath(
    os.environ.get("PGCLD_SOURCE_ROOT") or os.path.join(HERE, os.pardir, os.pardir))
PGCLD_BIN = os.path.abspath(
    os.environ.get("PGCLD_BIN") or os.path.join(SOURCE_ROOT, "build", "server", "pgcld"))

START_TIMEOUT_S = 60.0  # deadlines of waits for the port file and for the exit: reached only when
STOP_TIMEOUT_S = 60.0   # a test fails (the sanitizer build on a loaded two-core machine is slow)

# Checkpoint directories (a model directory holds version directories).
MODEL_SOURCES = {
    "toxicity": os.path.join(SOURCE_ROOT, "models", "toxicity"),
    "tiny_binary": os.path.join(SOURCE_ROOT, "tests", "fixtures", "models", "tiny_binary"),
    "tiny_multi": os.path.join(SOURCE_ROOT, "tests", "fixtures", "models", "tiny_multi"),
    "tiny_ordinal": os.path.join(SOURCE_ROOT, "tests", "fixtures", "models", "tiny_ordinal"),
}

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
UUID7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
CREATED_AT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")



# --------------------------------------------------------------------------- checkpoints

def model_source(name):
    """Directory of a known model (all its versions)."""
    return MODEL_SOURCES[name]


def version_dir(name, version="1"):
    return os.path.join(MODEL_SOURCES[name], version)


def require_models(*names):
    """Raise a descriptive error when a checkpoint the test needs is absent."""
    missing = [
        os.path.join(version_dir(n), f)
        for n in names
        for f in ("config.json", "model.safetensors")
        if not os.path.isfile(os.path.join(version_dir(n), f))
    ]
    if missing:
        raise RuntimeError("missing checkpoint files (generate the models first): " +
                           ", ".join(missing))


def require_binary():
    if not (os.path.isfile(PGCLD_BIN) and os.access(PGCLD_BIN, os.X_OK)):
        raise RuntimeError(f"pgcld binary not found or not executable: {PGCLD_BIN} "
                           "(build it, or set PGCLD_BIN)")


def load_config(name, version="1"):
    with open(os.path.join(version_dir(name, version), "config.json"), encoding="utf-8") as f:
        return json.load(f)


def make_models_dir(parent, names, extra=None):
    """Create ``parent/models`` holding copies of the named model directories.

    ``extra`` maps model name -> source model directory for anything else (broken models, ...).
    Returns the path of the models directory.
    """
    models = os.path.join(parent, "models")
    os.makedirs(models, exist_ok=True)
    require_models(*names)
    for n in names:
        shutil.copytree(model_source(n), os.path.join(models, n))
    for n, src in (extra or {}).items():
        shutil.copytree(src, os.path.join(models, n))
    return models


# --------------------------------------------------------------------------- the test cluster

_PG_CLUSTER = None


def pg_cluster():
    """The test program's throw-away PostgreSQL cluster, made on first use (pg_cluster.PgCluster)
    and dropped when the program exits (atexit), or by its watchdog when the program is killed
    (on SIGTERM, SIGINT or SIGHUP the daemons are killed first)."""
    global _PG_CLUSTER
    if _PG_CLUSTER is None:
        import pg_cluster as pgc
        pgc.require()
        _PG_CLUSTER = pgc.PgCluster()
        print(f"harness: PostgreSQL test cluster {_PG_CLUSTER.name} on port {_PG_CLUSTER.port}", file=sys.stderr,
              flush=True)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, _drop_on_signal)
    return _PG_CLUSTER


def _drop_pg_cluster():
    """Kills the daemons still running (they use the cluster), then drops the cluster."""
    global _PG_CLUSTER
    cluster, _PG_CLUSTER = _PG_CLUSTER, None
    if cluster is None:
        return
    _kill_leftovers()
    for uri in list(_PG_CONNECTIONS):
        _pg_forget(uri)
    cluster.drop()


def _drop_on_signal(signum, frame):
    # unittest records a SystemExit raised inside a test as an error and goes on, so the daemons are
    # killed here and the signal is then delivered again with its default action; the cluster's
    # watchdog (pg_cluster.py) drops it once this process is gone (meson sends SIGKILL to the whole
    # process group half a second after SIGTERM: too soon for pg_dropcluster to finish here)
    _kill_leftovers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


if ON_POSTGRES:  # the whole program needs the server: skip (77) or fail (run_all.sh) up front
    import pg_cluster as _pgc
    _pgc.require()


def new_pg_database():
    """A fresh, empty database in the program's cluster; returns its URI."""
    return pg_cluster().new_database()


# --------------------------------------------------------------------------- daemon

_LIVE = set()


def _kill_leftovers():
    for d in list(_LIVE):
        try:
            d.kill()
        except Exception:
            pass


import atexit  # noqa: E402

atexit.register(_kill_leftovers)
atexit.register(_drop_pg_cluster)  # runs first (atexit is last in, first out); kills daemons too


class DaemonError(RuntimeError):
    pass


class Daemon:
    """A pgcld process on 127.0.0.1 with its own temporary directory.

    ``models``: a list of model names from MODEL_SOURCES copied into a fresh models directory,
    or a path to an existing models directory. ``extra_models`` maps name -> source dir.
    """

    def __init__(self, models=("toxicity",), extra_models=None, args=(), default_model=None,
                 db_path=None, auth=True, binary=None, env=None):
        require_binary()
        # binary: another executable that serves like `pgcld serve` (tests/faults/pgcld_faults);
        # env: extra environment variables for the daemon. The CLI (keys) always runs PGCLD_BIN.
        self.binary = binary or PGCLD_BIN
        self.env = dict(env or {})
        self.tmp = tempfile.mkdtemp(prefix="pgcld-it-")
        if isinstance(models, str):
            self.models_dir = models
        else:
            self.models_dir = make_models_dir(self.tmp, list(models), extra_models)
        if db_path is None:
            db_path = new_pg_database() if ON_POSTGRES else os.path.join(self.tmp, "audit.db")
        self.db_path = db_path  # a SQLite file or a PostgreSQL URI (is_postgres)
        self.args = list(args)
        self.default_model = default_model
        self.proc = None
        self.port = None
        self.starts = 0
        self._stderr_path = None
        self._stdout_path = None
        # API keys: one per role, made with the CLI before the first start (which also creates
        # the database). With auth=False the daemon runs with --auth off.
        self.auth = auth
        self.keys = {}
        if auth:
            for role in ("scorer", "reviewer", "admin"):
                self.keys[role] = self.create_key(role, f"test-{role}")
        else:
            self.args.append("--auth=off")

    # -- keys and the CLI
    def cli(self, *args, check=True):
        """Runs `pgcld ARGS...`; returns the CompletedProcess (raises on failure when check)."""
        p = subprocess.run([PGCLD_BIN, *args], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60, cwd=self.tmp)
        if check and p.returncode != 0:
            raise DaemonError(f"pgcld {' '.join(args)} exited {p.returncode}\n{p.stderr}")
        return p

    def create_key(self, role, name):
        """A new key made with `pgcld keys create`; returns the key text (its last output line)."""
        out = self.cli("keys", "create", "--db", self.db_path, "--role", role, "--name", name).stdout
        return out.strip().splitlines()[-1]

    def auth_headers(self, path, key=None):
        """Authorization for path: key=None picks the role the route needs (admin for /v1/admin/,
        scorer otherwise); key="" sends none; any other string is sent as the key."""
        if key is None:
            if not self.auth:
                return {}
            key = self.keys["admin" if path.startswith("/v1/admin/") else "scorer"]
        return {"Authorization": f"Bearer {key}"} if key else {}

    # -- lifecycle
    def command(self, port_file):
        cmd = [self.binary, "serve", "--listen", "127.0.0.1:0", "--models", self.models_dir,
               "--db", self.db_path, "--port-file", port_file]
        if self.default_model:
            cmd += ["--default-model", self.default_model]
        if self.on_postgres and not any(a == "--writer-id" or a.startswith("--writer-id=") for a in self.args):
            # a writer id of its own (the same across restarts), not the host name, which the CLI
            # (`pgcld keys ... --db URI`) uses: its writer must not wait for the daemon's chain
            cmd += ["--writer-id", "it-" + os.path.basename(self.tmp)]
        return cmd + self.args

    def start(self):
        if self.proc is not None and self.proc.poll() is None:
            raise DaemonError("already running")
        self.starts += 1
        port_file = os.path.join(self.tmp, f"port.{self.starts}")
        self._stderr_path = os.path.join(self.tmp, f"stderr.{self.starts}.log")
        self._stdout_path = os.path.join(self.tmp, f"stdout.{self.starts}.log")
        cmd = self.command(port_file)
        with open(self._stderr_path, "wb") as err, open(self._stdout_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         cwd=self.tmp,
                                         env={**os.environ, **self.env} if self.env else None)
        _LIVE.add(self)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise DaemonError(f"pgcld exited with status {rc} before writing its port file\n"
                                  f"command: {' '.join(cmd)}\n{self.logs()}")
            try:
                with open(port_file, encoding="ascii") as f:
                    text = f.read()
            except (FileNotFoundError, UnicodeDecodeError):
                text = ""
            m = re.fullmatch(r"(\d+)\n", text)
            if m:
                self.port = int(m.group(1))
                if not 0 < self.port < 65536:
                    raise DaemonError(f"port file holds {text!r}")
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise DaemonError(f"pgcld did not write its port file within {START_TIMEOUT_S} s"
                                  f" (content {text!r})\ncommand: {' '.join(cmd)}\n{self.logs()}")
            time.sleep(0.05)

    def stop(self, timeout=STOP_TIMEOUT_S):
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.proc = None  # reported here; the cleanup need not report it again
                _LIVE.discard(self)
                raise DaemonError(f"pgcld did not exit within {timeout} s of SIGTERM\n"
                                  f"{self.logs()}")
        _LIVE.discard(self)
        return self.proc.returncode

    def restart(self):
        rc = self.stop()
        if rc != 0:
            raise DaemonError(f"pgcld exited with status {rc} on SIGTERM\n{self.logs()}")
        return self.start()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        _LIVE.discard(self)

    def cleanup(self, check=True):
        """Stop the daemon (SIGTERM) and remove its directory. With ``check``, a daemon that does
        not exit 0 on SIGTERM (a crash, a sanitizer report, a hang) raises DaemonError, which
        unittest reports as an error of the class cleanup."""
        problem = None
        try:
            rc = self.stop()
            if rc not in (0, None):
                problem = f"pgcld exited with status {rc} on SIGTERM\n{self.logs()}"
        except DaemonError as e:
            problem = str(e)
        finally:
            self.kill()
            if not os.environ.get("PGCLD_KEEP_TMP"):
                shutil.rmtree(self.tmp, ignore_errors=True)
        if problem and check:
            raise DaemonError(problem)

    def logs(self, limit=4000):
        parts = []
        for label, p in (("stderr", self._stderr_path), ("stdout", self._stdout_path)):
            if p and os.path.exists(p):
                with open(p, "rb") as f:
                    data = f.read()
                if data:
                    parts.append(f"--- pgcld {label} (last {limit} bytes) ---\n" +
                                 data[-limit:].decode("utf-8", "replace"))
        return "\n".join(parts) or "(pgcld wrote nothing to stderr/stdout)"

    # -- HTTP
    def request(self, method, path, body=None, key=None, headers=None, **kw):
        hdrs = self.auth_headers(path, key)
        hdrs.update(headers or {})
        return http_request(self.port, method, path, body, headers=hdrs, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def score(self, body, **kw):
        return self.post("/v1/score", body, **kw)

    def raw(self, method, path, body=None, key=None, headers=None, **kw):
        hdrs = self.auth_headers(path, key)
        hdrs.update(headers or {})
        return raw_request(self.port, method, path, body, headers=hdrs, **kw)

    # -- DB
    def query(self, sql, params=()):
        return db_query(self.db_path, sql, params)

    def scalar(self, sql, params=()):
        return db_scalar(self.db_path, sql, params)

    def execute(self, sql, params=()):
        db_execute(self.db_path, sql, params)

    def count(self):
        return decision_count(self.db_path)

    @property
    def on_postgres(self):
        return is_postgres(self.db_path)

    def rows_for(self, decision_ids):
        ids = list(decision_ids)
        out = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            # "input": the stored input wherever it is kept (inline before migration 0008, in
            # decision_inputs since)
            # (the PostgreSQL schema has decision_inputs only)
            inline = "NULL" if self.on_postgres else "d.input"
            q = ("SELECT d.*, coalesce(%s, (SELECT i.input FROM decision_inputs AS i"
                 " WHERE i.decision_seq = d.seq)) AS stored_input FROM decisions AS d"
                 " WHERE d.decision_id IN (%s)" % (inline, ",".join("?" * len(chunk))))
            for r in self.query(q, chunk):
                row = dict(r)
                row["input"] = row.pop("stored_input")
                out[row["decision_id"]] = row
        return out


def start_daemon(testcase_cls, *args, **kwargs):
    """Start a Daemon and register its cleanup on a unittest TestCase class."""
    d = Daemon(*args, **kwargs)
    testcase_cls.addClassCleanup(d.cleanup)
    d.start()
    return d


def start_signing_daemon(testcase_cls, prefix, models=("toxicity",)):
    """A daemon that signs checkpoints: a fresh Ed25519 key (pgcld audit keygen) and checkpoint
    directory in a temporary directory. Sets on the class: tmp, key (the key file), public (its
    public key, hex) and cp_dir; returns the Daemon."""
    testcase_cls.tmp = tempfile.mkdtemp(prefix=prefix)
    testcase_cls.addClassCleanup(shutil.rmtree, testcase_cls.tmp, True)
    testcase_cls.key = os.path.join(testcase_cls.tmp, "signing.key")
    p = run_pgcld("audit", "keygen", "--out", testcase_cls.key, timeout=60, check=True)
    testcase_cls.public = p.stdout.strip().splitlines()[-1]
    testcase_cls.cp_dir = os.path.join(testcase_cls.tmp, "checkpoints")
    os.mkdir(testcase_cls.cp_dir)
    return start_daemon(testcase_cls, models=models,
                        args=["--signing-key", testcase_cls.key, "--checkpoint-dir", testcase_cls.cp_dir])


def parse_metrics(text):
    """Prometheus text as {series: value}, a series written as in the text: 'name' or
    'name{labels}'. Comment lines are skipped."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


def metric(d, name, labels=None):
    """The value of one series in d's /metrics (labels: the text between the braces, None for
    none), or None when the series is absent."""
    samples = parse_metrics(http_request(d.port, "GET", "/metrics").body.decode())
    return samples.get(f"{name}{{{labels}}}" if labels is not None else name)


def wait_until(predicate, timeout=30.0, interval=0.05):
    """Polls predicate until it holds or timeout seconds pass; returns its last value. The default
    deadline is generous on purpose: it is only reached when a test is failing, and CI runs the
    sanitizer build two tests at a time on two cores."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_for(predicate, what, timeout=30.0, interval=0.05):
    """Polls predicate until it holds and returns its value; fails the test (AssertionError) with
    "<what>: condition never held within <timeout> s" when it does not. The deadline only bounds the
    wait (reached only when a test is failing); it is not a claim about speed, so tests that wait
    for something to happen use this instead of a fixed sleep or an assertion on seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: condition never held within {timeout} s")
        time.sleep(interval)


def timestamp(offset_s=0.0):
    """The wall clock now + offset_s seconds in the audit columns' format (RFC 3339 UTC with
    microseconds, 2026-11-21T10:33:00.123456Z). Rows written behind the daemon's back and horizons
    that are compared with the clock take their times from here, never from a fixed date: a fixed
    "recent" date becomes old, and a test that passes today fails next month."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def wait_for_clock_past(stamp):
    """Waits until timestamp() is later than stamp (a time in the same format): what comes next is
    stamped strictly after it. Microseconds: it returns at once unless the clock stepped back."""
    return wait_for(lambda: timestamp() > stamp, f"the wall clock passes {stamp}", interval=0.001)


_CLI_CWD = []  # the empty working directory of run_pgcld's commands (made on first use)


def _cli_cwd():
    if not _CLI_CWD:
        import atexit
        _CLI_CWD.append(tempfile.mkdtemp(prefix="pgcld-cli-cwd-"))
        atexit.register(shutil.rmtree, _CLI_CWD[0], True)
    return _CLI_CWD[0]


def run_pgcld(*args, timeout=120, check=False, env=None):
    """Runs `pgcld ARGS...` (stdin closed, output captured as text); returns the CompletedProcess.
    check: an AssertionError with the output when it exits non-zero; env: its whole environment
    (None: the test's).

    It runs in an empty directory of its own, which must stay empty: a command that writes into
    its working directory (a default --out or --checkpoint-dir of ".") fails the test, since a test
    writes only inside its own temporary directory (the repository and meson's build directory are
    the working directory otherwise)."""
    cwd = _cli_cwd()
    p = subprocess.run([PGCLD_BIN, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout, cwd=cwd, env=env)
    left = sorted(os.listdir(cwd))
    if left:
        for name in left:
            path = os.path.join(cwd, name)
            shutil.rmtree(path, True) if os.path.isdir(path) else os.remove(path)
        raise AssertionError(f"pgcld {' '.join(args)} wrote {left} into its working directory: give it a path "
                             f"inside the test's temporary directory")
    if check and p.returncode != 0:
        raise AssertionError(f"pgcld {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def verify_json(db, *extra):
    """`pgcld audit verify --db DB EXTRA...`: (exit status, its last stdout line as JSON or None, stderr)."""
    p = run_pgcld("audit", "verify", "--db", db, *extra)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "null"
    return p.returncode, json.loads(line), p.stderr


def tiny_binary_root(parent):
    """parent/models holding the tiny_binary model as model "tiny", version 1; returns its path."""
    root = os.path.join(parent, "models")
    shutil.copytree(version_dir("tiny_binary"), os.path.join(root, "tiny", "1"))
    return root


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    """unittest entry point for ``python3 tests/integration/test_X.py``."""
    import unittest
    unittest.main(module="__main__", verbosity=2)


if __name__ == "__main__":
    # Smoke: start the daemon with whatever models exist and print its health.
    names = [n for n in MODEL_SOURCES if os.path.isdir(version_dir(n))]
    d = Daemon(models=names)
    try:
        d.start()
        print("port", d.port, d.get("/healthz"), d.get("/readyz"), sep="\n")
    finally:
        d.cleanup()
        sys.stdout.flush()


def assert_archive_names_open_contest(tc, p, decision_id, contest_id, bound=()):
    """`pgcld audit archive`'s refusal when an open contest stops the cut, on either store: exit 3,
    "nothing to archive", the decision and the contest named with the way out (resolving it), and no
    advice about the horizon, which cannot help (issue 27, finding 5)."""
    tc.assertEqual(p.returncode, 3, (bound, p.stdout + p.stderr))
    tc.assertIn("nothing to archive", p.stderr)
    tc.assertIn(f"decision {decision_id}", p.stderr)
    tc.assertIn(f"open contest, {contest_id}", p.stderr)
    tc.assertIn(f"resolving the contest (POST /v1/contests/{contest_id}/resolution) allows archival", p.stderr)
    tc.assertNotIn("horizon", p.stderr.split("nothing to archive", 1)[1], "a later horizon cannot help")
