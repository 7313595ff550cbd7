"""The PostgreSQL store under faults (issue 17, the polish round), with a real PostgreSQL 15
(a throw-away cluster, pg_cluster.py) and a replica that reaches it through a TCP relay of this
test's own, which can stop passing bytes without closing anything (a network silently dropped):

  - while the relay is stalled (a query of the replica's held in it), requests with a known key
    answer (the keyring checks the database on a thread of its own and keeps its last set), a key
    it has not seen is refused while the network is still silent (its wait is bounded), and once
    the relay flows again a key made meanwhile works;
  - after the server restarts while the replica is idle, the first score and the first reviewer
    read succeed (connections the server closed are replaced before use, not failed on);
  - with the server stopped (`-m immediate`), /readyz turns 503 with no request at all, known keys
    still answer, scoring and reviewer reads answer 503 while it is down; after start everything
    works again and a key made since is accepted;
  - a replica whose database is down at start exits non-zero by itself, with a message naming the
    database and what it does (docs/operations.md, "PostgreSQL: faults");

No assertion here bounds seconds: "answers while the network is silent" is checked as the answer
coming back while the relay still holds the replica's query (a request that waited on the database
would wait as long as the stall lasts); deadlines only stop waits that a failing test never ends.
  - `pgcld keys list --db URI` and `pgcld audit verify --db URI` open the store read-only: no
    writers row, no chain entry; on a database without the schema they say to run migrate.

Skips (77) when PostgreSQL 15 or psycopg2 is not installed (pg_cluster.require()).

Run: /usr/bin/python3 tests/integration/test_pg_faults.py (PGCLD_BIN selects the binary).
"""
import functools
import os
import select
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster as PG  # noqa: E402

TINY = "tiny_binary"


def items(n, seed):
    return H.json_items(H.random_embeddings(n, 32, seed), "fault")


pgcld = functools.partial(H.run_pgcld, check=True)


class StallingRelay:
    """A TCP relay from a local port to the cluster's. stall(): no byte passes either way and no new
    connection is accepted (the kernel still completes handshakes into the backlog), nothing is
    closed: to both ends the network went silent. flow(): bytes pass again, delayed, none lost."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.closing = False
        self.lock = threading.Lock()
        self.live = set()  # ids of the relayed connections still open
        self.next_id = 0
        self.held = threading.Event()  # set when bytes from the replica wait in a stalled relay
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def stall(self):
        self.held.clear()
        self.flowing.clear()

    def open_connections(self):
        with self.lock:
            return set(self.live)

    def flow(self):
        self.flowing.set()

    def close(self):
        self.closing = True
        self.flowing.set()
        self.listener.close()

    def _accept(self):
        while not self.closing:
            self.flowing.wait()
            try:
                ready, _, _ = select.select([self.listener], [], [], 0.05)
                if not ready or not self.flowing.is_set():
                    continue
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=2)
            except OSError:  # the server is down: the client sees its connection closed
                client.close()
                continue
            with self.lock:
                self.next_id += 1
                cid = self.next_id
                self.live.add(cid)
            t = threading.Thread(target=self._pump, args=(client, upstream, cid), daemon=True)
            t.start()

    def _pump(self, a, b, cid):
        peer = {a: b, b: a}
        try:
            while not self.closing:
                if not self.flowing.is_set():
                    # silent: nothing is read (what was sent stays in the kernel until the relay
                    # flows again), but a query the replica sends meanwhile is noticed
                    if not self.held.is_set() and select.select([a], [], [], 0)[0]:
                        self.held.set()
                    self.flowing.wait(0.05)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.05)
                if not self.flowing.is_set():
                    continue
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peer[s].sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()
            with self.lock:
                self.live.discard(cid)


class OutageTest(unittest.TestCase):
    """One replica through the relay; tests run in name order and each leaves the server up."""

    @classmethod
    def setUpClass(cls):
        PG.require()
        H.require_models(TINY)
        PG.cluster_for_class(cls, "pgcld-pg-faults-")
        cls.direct = cls.cluster.new_database()
        cls.relay = StallingRelay(cls.cluster.port)
        cls.addClassCleanup(cls.relay.close)
        relayed = cls.direct.replace(f":{cls.cluster.port}/", f":{cls.relay.port}/")
        cls.d = H.Daemon(models=H.tiny_binary_root(cls.tmp), default_model="tiny", db_path=relayed, args=["--writer-id", "r1"])
        cls.addClassCleanup(cls.d.cleanup)
        cls.d.start()

    def models(self, key=None):
        return self.d.get("/v1/models", key=key, timeout=10)

    def reviewer_read(self):
        return self.d.get("/v1/decisions?limit=5", key=self.d.keys["reviewer"], timeout=30)

    def new_key(self, name):
        """A scorer key made with the CLI directly on the database (not through the relay)."""
        out = pgcld("keys", "create", "--db", self.direct, "--role", "scorer", "--name", name).stdout
        return out.strip().splitlines()[-1]

    def test_a_silent_network_known_keys_answer_at_once(self):
        self.assertEqual(self.d.score({"items": items(1, 1)}).status, 200)
        self.assertEqual(self.models().status, 200)
        self.relay.stall()
        try:
            # the keyring's periodic check (every 250 ms) sends its query into the silence
            H.wait_for(self.relay.held.is_set, "a query of the replica's held in the stalled relay")
            # the answers come back while the network is still silent (it flows again only in the
            # finally below): a request that waited on the database would wait for the stall's end
            for _ in range(5):
                r = self.models()
                self.assertEqual(r.status, 200, r)
                # spread over two of the keyring's 250 ms periods: rechecks fall due, none is waited on
                time.sleep(0.1)
            fresh = self.new_key("made during the stall")
            r = self.models(key=fresh)  # its wait for the stuck check is bounded: refused, still stalled
            self.assertEqual(r.status, 401, r)
        finally:
            self.relay.flow()
        # the keyring catches up once the network is back
        H.wait_for(lambda: self.models(key=fresh).status == 200, "the key made during the stall becomes valid",
                   timeout=40)
        H.wait_for(lambda: self.d.score({"items": items(1, 2)}).status == 200, "scoring works again", timeout=40)

    def test_b_server_restart_while_idle(self):
        self.assertEqual(self.d.score({"items": items(1, 3)}).status, 200)
        self.assertEqual(self.reviewer_read().status, 200)
        before = self.relay.open_connections()
        self.assertTrue(before)
        self.cluster.stop("fast")
        self.cluster.start()
        # the pooled read connections and the writer's connection were closed by the restart: the
        # relay has seen every connection from before it end
        H.wait_for(lambda: not (before & self.relay.open_connections()),
                   "the server's restart closes the replica's connections")
        r = self.d.score({"items": items(1, 4)})
        self.assertEqual(r.status, 200, r)
        r = self.reviewer_read()
        self.assertEqual(r.status, 200, r)

    def test_c_server_down_then_back(self):
        self.assertEqual(self.d.score({"items": items(1, 5)}).status, 200)
        self.cluster.stop("immediate")
        try:
            # an idle replica turns unready by itself (its writer notices the closed connection)
            H.wait_for(lambda: self.d.get("/readyz", key="").status == 503, "/readyz turns 503 by itself")
            # while the server is down (it is started again only below): known keys answer, and
            # reviewer reads and scoring fail with 503 instead of waiting for it
            for _ in range(3):
                r = self.models()
                self.assertEqual(r.status, 200, r)
            r = self.reviewer_read()
            self.assertEqual(r.status, 503, r)
            r = self.d.score({"items": items(1, 6)})
            self.assertEqual((r.status, r.error_code()), (503, "audit_unavailable"), r)
        finally:
            self.cluster.start()
        H.wait_for(lambda: self.d.score({"items": items(1, 7)}).status == 200, "scoring works again")
        self.assertEqual(self.reviewer_read().status, 200)
        H.wait_for(lambda: self.d.get("/readyz", key="").status == 200, "/readyz turns 200 again")
        fresh = self.new_key("made after the restart")
        H.wait_for(lambda: self.models(key=fresh).status == 200, "a key made after the restart is accepted")


class DownAtStartTest(unittest.TestCase):
    def test_exits_with_a_clear_message(self):
        PG.require()
        H.require_models(TINY)
        tmp = tempfile.mkdtemp(prefix="pgcld-pg-down-")
        self.addCleanup(shutil.rmtree, tmp, True)
        cluster = PG.PgCluster()
        self.addCleanup(cluster.drop)
        uri = cluster.new_database()
        cluster.stop("fast")
        d = H.Daemon(models=H.tiny_binary_root(tmp), default_model="tiny", db_path=uri, auth=False)
        self.addCleanup(d.cleanup, False)
        with self.assertRaises(H.DaemonError) as caught:
            d.start()
        message = str(caught.exception)
        # it exited by itself, before its port file (not killed at the harness's start deadline)
        self.assertIn("exited with status", message)
        self.assertNotEqual(d.proc.returncode, 0)
        self.assertIn("cannot connect", message)
        self.assertIn(f":{cluster.port}/", message)
        self.assertIn("exits", message)


class ReadOnlyCliTest(unittest.TestCase):
    def test_list_and_verify_leave_no_writer(self):
        PG.require()
        cluster = PG.PgCluster()
        self.addCleanup(cluster.drop)
        uri = cluster.new_database()
        # no schema yet: a read does not create it, and says what to do
        p = pgcld("keys", "list", "--db", uri, check=False)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("pgcld migrate", p.stderr)
        pgcld("migrate", "--db", uri)

        def count(table):
            conn = cluster.connect(uri.rsplit("/", 1)[1])
            try:
                cur = conn.cursor()
                cur.execute(f"SELECT count(*) FROM {table}")
                return cur.fetchone()[0]
            finally:
                conn.close()

        self.assertEqual((count("writers"), count("audit_chain")), (0, 0))
        p = pgcld("keys", "list", "--db", uri)
        self.assertEqual(p.stdout.strip(), "", p)  # one JSON line per key: none
        pgcld("audit", "verify", "--db", uri, check=False)  # its answer is audit_pg_chain.c's
        self.assertEqual((count("writers"), count("audit_chain")), (0, 0), "a read-only command made a writer")
        # a write through the CLI still makes its writer, as before
        pgcld("keys", "create", "--db", uri, "--role", "scorer", "--name", "w")
        self.assertEqual(count("writers"), 1)
        listed = pgcld("keys", "list", "--db", uri).stdout
        self.assertIn('"name":"w"', listed.replace(" ", ""))
        self.assertEqual(count("writers"), 1)


if __name__ == "__main__":
    H.main()
