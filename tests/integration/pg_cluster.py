"""Throw-away PostgreSQL clusters for the PostgreSQL store's tests (issue 17).

Each PgCluster is a real PostgreSQL 15 server from Debian's packages, made with pg_createcluster
(postgresql-common; works as root: the server runs as the postgres user) under a unique name on a
free port, with trust authentication on the loopback, and dropped at the end. A test makes its
databases with new_database(); restart()/stop(mode='immediate') let fault tests take the server
away under load. A watchdog process drops the cluster when the test process is gone, even after a
SIGKILL (meson's timeout), so no cluster is left behind.

Without pg_createcluster (postgresql-15 not installed) the tests skip (77), and fail under
tests/run_all.sh, where deploy/install-deps.sh --test has installed it (skips.py).
"""

import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import skips

PG_VERSION = "15"
PG_CREATECLUSTER = shutil.which("pg_createcluster") or "/usr/bin/pg_createcluster"
AVAILABLE = os.path.exists(PG_CREATECLUSTER) and os.path.exists(f"/usr/lib/postgresql/{PG_VERSION}/bin/postgres")

try:
    import psycopg2  # noqa: F401  (python3-psycopg2)
    HAVE_PSYCOPG2 = True
except ImportError:  # pragma: no cover - installed by deploy/install-deps.sh --test
    HAVE_PSYCOPG2 = False


def require():
    """Skips (77) the whole test program when PostgreSQL or psycopg2 is not installed."""
    if not AVAILABLE:
        skips.missing_for_program("PostgreSQL 15 (postgresql-15)")
    if not HAVE_PSYCOPG2:
        skips.missing_for_program("psycopg2 (python3-psycopg2)")


def cluster_for_class(testcase_cls, tmp_prefix):
    """setUpClass's common part: sets testcase_cls.cluster (a new PgCluster) and testcase_cls.tmp (a
    scratch directory named tmp_prefix...), both removed once the class is done."""
    testcase_cls.cluster = PgCluster()
    testcase_cls.addClassCleanup(testcase_cls.cluster.drop)
    testcase_cls.tmp = tempfile.mkdtemp(prefix=tmp_prefix)
    testcase_cls.addClassCleanup(shutil.rmtree, testcase_cls.tmp, True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """A running throw-away cluster; use as a context manager (or call drop())."""

    def __init__(self, settings=None):
        self.name = "pgcld_" + uuid.uuid4().hex[:12]
        self.port = _free_port()
        opts = ["-o", "listen_addresses=localhost", "-o", "fsync=on", "-o", "max_connections=200",
                "-o", "shared_buffers=64MB"]
        for k, v in (settings or {}).items():
            opts += ["-o", f"{k}={v}"]
        subprocess.run([PG_CREATECLUSTER, PG_VERSION, self.name, "-p", str(self.port), "--start"] + opts +
                       ["--", "--auth-host=trust", "--auth-local=trust"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._watchdog = _start_watchdog(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.drop()

    def uri(self, dbname="postgres", user="postgres"):
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname="postgres"):
        import psycopg2
        conn = psycopg2.connect(self.uri(dbname))
        conn.autocommit = True
        return conn

    def new_database(self):
        """Creates an empty database; returns its URI."""
        name = "d" + uuid.uuid4().hex[:16]
        conn = self.connect()
        try:
            conn.cursor().execute(f"CREATE DATABASE {name}")
        finally:
            conn.close()
        return self.uri(name)

    def ctl(self, action, *args):
        subprocess.run(["pg_ctlcluster", PG_VERSION, self.name, action] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self, mode="fast"):
        self.ctl("stop", "-m", mode)

    def start(self):
        self.ctl("start")

    def drop(self):
        subprocess.run(["pg_dropcluster", "--stop", PG_VERSION, self.name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if self._watchdog.poll() is None:
            self._watchdog.kill()
            self._watchdog.wait()


# The watchdog: a shell in a session of its own (so that a signal to the test's process group, such
# as meson's SIGTERM then SIGKILL half a second later on a timeout, does not reach it) that drops the
# cluster once the test process is gone, however it ended. drop() ends it after dropping the cluster.
_WATCHDOG = ('while kill -0 "$0" 2>/dev/null; do sleep 1; done; '
             'pg_dropcluster --stop "$1" "$2" >/dev/null 2>&1')


def _start_watchdog(name):
    return subprocess.Popen(["/bin/sh", "-c", _WATCHDOG, str(os.getpid()), PG_VERSION, name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
