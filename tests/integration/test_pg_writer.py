#!/usr/bin/python3
"""The PostgreSQL store's writer (core/audit/pg/audit_pg_writer.c) against a real PostgreSQL 15:
what it writes (decisions, their chain entries, leaves, runs and log tree nodes, each recomputed
here in Python from docs/audit.md's encodings), fleet order with two writers, the writer id's lock,
and the server going away and coming back under a running daemon.

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_pg_writer.py
"""

import hashlib
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import pg_cluster  # noqa: E402

ZERO_HASH = "0" * 64
WAIT_S = 60.0  # a deadline for conditions: reached only when a test fails


# ---- the chain's encodings (docs/audit.md), written out again from the document ----

def enc_int(v):
    return b"\x01" + struct.pack(">q", v)


def enc_real(v):
    return b"\x02" + struct.pack(">d", v)


def enc_text(s):
    b = s.encode()
    return b"\x03" + struct.pack(">I", len(b)) + b


def enc_blob(b):
    b = bytes(b)
    return b"\x04" + struct.pack(">I", len(b)) + b


NULL = b"\x00"


def enc_real_or_null(v):
    return NULL if v is None else enc_real(v)


def entry_hash(seq, kind, row_seq, payload, prev):
    data = enc_int(seq) + enc_text(kind) + enc_int(row_seq) + enc_text(payload) + enc_text(prev)
    return hashlib.sha256(data).hexdigest()


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_root(leaves):
    """RFC 9162 MTH, recursively as the RFC defines it."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def decision_leaf(row):
    """The version-2 leaf hash of a decisions row as read back (with its stored input)."""
    data = enc_text("decisions") + enc_int(row["seq"])
    for col in ("decision_id", "created_at", "request_id", "item_id", "model_name", "model_version",
                "model_sha256", "label"):
        data += enc_text(row[col])
    data += enc_int(row["label_index"]) + enc_text(row["probabilities"]) + enc_real_or_null(row["toxicity"])
    data += enc_text(row["decision"]) + enc_text(row["policy"])
    data += enc_real_or_null(row["t_review"]) + enc_real_or_null(row["t_block"])
    data += enc_blob(row["vector"]) + enc_text(row["input_sha256"]) + enc_int(row["latency_us"])
    if row["input"] is not None:
        digest = hashlib.sha256(bytes(row["input"])).digest()
        assert row["input_digest"] is None or bytes(row["input_digest"]) == digest, "input_digest differs"
        data += enc_blob(digest) + enc_text(row["input_dtype"])
    elif row["input_digest"] is not None:
        data += enc_blob(row["input_digest"]) + enc_text(row["input_dtype"])
    else:
        data += NULL + NULL
    # docs/audit.md, "Decision leaf, extended": the four after, when any is set
    extension = [row[c] for c in ("trace_id", "content_date", "territorial_scope", "content_language")]
    if any(v is not None for v in extension):
        data += b"".join(NULL if v is None else enc_text(v) for v in extension)
    return leaf_hash(data)


def event_leaf(row):
    data = enc_text("admin_events") + enc_int(row["seq"])
    for col in ("event_id", "created_at", "actor", "action", "target", "details"):
        data += enc_text(row[col])
    return leaf_hash(data)


def dict_rows(cur):
    names = [c.name for c in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


class Fleet:
    """A database on a throw-away cluster and what the tests read from it."""

    def __init__(self, cluster, uri):
        self.cluster = cluster
        self.uri = uri
        self.dbname = uri.rsplit("/", 1)[1]

    def query(self, sql, params=()):
        conn = self.cluster.connect(self.dbname)
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            return dict_rows(cur)
        finally:
            conn.close()

    def decisions(self):
        return {r["decision_id"]: r for r in self.query(
            "SELECT d.*, i.input FROM decisions AS d LEFT JOIN decision_inputs AS i ON i.decision_seq = d.seq"
            " ORDER BY d.seq")}


def score_body(n, seed, prefix):
    Z = H.random_embeddings(n, H.load_config("toxicity")["dims"]["D"], seed)
    return {"items": H.json_items(Z, prefix)}


def answered_ids(resp):
    return [r["decision_id"] for r in resp.json["results"]]


class ChainChecks:
    """Recomputes each writer's chain from the database (a verifier written from the document)."""

    def check_chains(self, fleet, writers):
        decisions = {r["seq"]: r for r in fleet.decisions().values()}
        events = {r["seq"]: r for r in fleet.query("SELECT * FROM admin_events")}
        leaf_of = {"decisions": lambda s: decision_leaf(decisions[s]),
                   "admin_events": lambda s: event_leaf(events[s])}
        chained = {"decisions": set(), "admin_events": set()}
        self.assertEqual({r["writer_id"] for r in fleet.query("SELECT writer_id FROM writers")}, set(writers))
        for writer in writers:
            entries = fleet.query("SELECT * FROM audit_chain WHERE writer_id = %s ORDER BY seq", (writer,))
            self.assertGreaterEqual(len(entries), 1, writer)
            self.assertEqual([e["seq"] for e in entries], list(range(1, len(entries) + 1)), writer)
            g = entries[0]
            self.assertEqual((g["kind"], g["row_seq"], g["prev_hash"], g["leaf_count"], g["leaves"]),
                             ("genesis", 0, ZERO_HASH, None, None))
            self.assertEqual(g["payload_sha256"], hashlib.sha256(enc_text(writer)).hexdigest())
            self.assertEqual(g["hash"], entry_hash(1, "genesis", 0, g["payload_sha256"], ZERO_HASH))
            runs = fleet.query("SELECT * FROM audit_chain_runs WHERE writer_id = %s ORDER BY entry_seq, first_leaf",
                               (writer,))
            for prev, e in zip(entries, entries[1:]):
                where = f"writer {writer} entry {e['seq']}"
                leaves = bytes(e["leaves"])
                self.assertEqual(e["kind"], "commit", where)
                self.assertEqual(e["prev_hash"], prev["hash"], where)
                self.assertEqual(e["row_seq"], e["leaf_count"], where)
                self.assertEqual(len(leaves), 32 * e["leaf_count"], where)
                split = [leaves[i:i + 32] for i in range(0, len(leaves), 32)]
                self.assertEqual(e["payload_sha256"], merkle_root(split).hex(), where)
                self.assertEqual(e["hash"], entry_hash(e["seq"], "commit", e["leaf_count"], e["payload_sha256"],
                                                       e["prev_hash"]), where)
                # the runs of this entry cover its leaves 0..leaf_count-1 once each, in order
                mine = [u for u in runs if u["entry_seq"] == e["seq"]]
                at = 0
                for u in mine:
                    self.assertEqual(u["first_leaf"], at, where)
                    for k in range(u["n"]):
                        row_seq = u["first_row_seq"] + k
                        self.assertNotIn(row_seq, chained[u["kind"]], f"{where}: chained twice")
                        chained[u["kind"]].add(row_seq)
                        self.assertEqual(leaf_of[u["kind"]](row_seq), split[at + k],
                                         f"{where}: leaf {at + k} ({u['kind']} row {row_seq})")
                    at += u["n"]
                self.assertEqual(at, e["leaf_count"], where)
            self.check_log_nodes(fleet, writer, entries)
        self.assertEqual(chained["decisions"], set(decisions), "every decision is chained exactly once")
        self.assertEqual(chained["admin_events"], set(events), "every admin event is chained exactly once")

    def check_log_nodes(self, fleet, writer, entries):
        """Every stored node is the root of its perfect subtree of entry leaves, and every complete
        subtree of the chain is stored (the naive oracle: hash the entries)."""
        leaves = [leaf_hash(bytes.fromhex(e["hash"])) for e in entries]
        stored = {(r["level"], r["idx"]): bytes(r["hash"]) for r in fleet.query(
            "SELECT level, idx, hash FROM audit_log_nodes WHERE writer_id = %s", (writer,))}
        want = {}
        level = 1
        while (1 << level) <= len(leaves):
            span = 1 << level
            for j in range(len(leaves) // span):
                want[(level, j)] = merkle_root(leaves[j * span:(j + 1) * span])
            level += 1
        self.assertEqual(stored, want, f"writer {writer}: audit_log_nodes")


class PgWriterTest(ChainChecks, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models("toxicity")
        cls.cluster = pg_cluster.PgCluster()
        cls.addClassCleanup(cls.cluster.drop)

    def new_fleet(self):
        return Fleet(self.cluster, self.cluster.new_database())

    def start(self, fleet, writer, check=True):
        d = H.Daemon(db_path=fleet.uri, auth=False, args=["--writer-id", writer])
        self.addCleanup(d.cleanup, check)
        d.start()
        return d

    def test_rows_chain_and_events(self):
        fleet = self.new_fleet()
        d = self.start(fleet, "a")
        answered = []
        for i in range(6):
            r = d.score(score_body(1 + 5 * i, i, f"one-{i}"))
            self.assertEqual(r.status, 200, r)
            answered += answered_ids(r)
        # concurrent requests: group commits of several requests
        errors = []

        def client(k):
            for i in range(8):
                r = d.score(score_body(3, 100 + 10 * k + i, f"c{k}-{i}"))
                if r.status != 200:
                    errors.append(r)
                else:
                    answered.extend(answered_ids(r))
        threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # an administrative event (record_event): the activation of the served version
        r = d.post("/v1/admin/models/toxicity/activate", {"version": "1"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(d.get("/readyz").status, 200)
        rows = fleet.decisions()
        self.assertEqual(set(rows), set(answered))
        self.assertEqual(sorted(r["seq"] for r in rows.values()), list(range(1, len(answered) + 1)))
        self.assertEqual(len(fleet.query("SELECT * FROM admin_events WHERE action = 'model.activate'")), 1)
        # created_at follows seq
        stamps = [r["created_at"] for r in sorted(rows.values(), key=lambda r: r["seq"])]
        self.assertEqual(stamps, sorted(stamps))
        counters = fleet.query("SELECT * FROM fleet_counters")[0]
        self.assertEqual(counters["decisions"], len(answered))
        self.check_chains(fleet, ["a"])
        # a restart continues the same chain (head and log edge read back): one entry per request,
        # enough of them for new log tree nodes over the nodes read back
        d.restart()
        for i in range(9):
            r = d.score(score_body(1 + i, 900 + i, f"after-restart-{i}"))
            self.assertEqual(r.status, 200, r)
        self.check_chains(fleet, ["a"])
        self.assertEqual(len(fleet.query("SELECT 1 FROM audit_chain WHERE kind = 'genesis'")), 1)

    def test_two_writers_fleet_order(self):
        fleet = self.new_fleet()
        a = self.start(fleet, "a")
        b = self.start(fleet, "b")
        answered, errors, gaps = [], [], []
        stop = threading.Event()

        def client(d, k):
            for i in range(10):
                r = d.score(score_body(1 + (i % 4), 1000 + 20 * k + i, f"w{k}-{i}"))
                if r.status != 200:
                    errors.append(r)
                else:
                    answered.extend(answered_ids(r))

        def watcher():
            # the committed rows are a prefix of the seqs at every moment
            conn = self.cluster.connect(fleet.dbname)
            try:
                cur = conn.cursor()
                while not stop.is_set():
                    cur.execute("SELECT count(*), coalesce(max(seq), 0) FROM decisions")
                    n, top = cur.fetchone()
                    if n != top:
                        gaps.append((n, top))
                    time.sleep(0.005)  # the sampling pace (it samples until stopped: no event to wait for)
            finally:
                conn.close()
        w = threading.Thread(target=watcher)
        w.start()
        threads = [threading.Thread(target=client, args=(d, k)) for k, d in enumerate([a, b, a, b])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        w.join()
        self.assertEqual(errors, [])
        self.assertEqual(gaps, [], "a snapshot saw a gap in the committed seqs")
        rows = fleet.decisions()
        self.assertEqual(set(rows), set(answered))
        self.assertEqual(sorted(r["seq"] for r in rows.values()), list(range(1, len(answered) + 1)))
        # created_at follows seq across both writers (each takes it under the counters' lock)
        stamps = [r["created_at"] for r in sorted(rows.values(), key=lambda r: r["seq"])]
        self.assertEqual(stamps, sorted(stamps))
        self.check_chains(fleet, ["a", "b"])
        per_writer = {r["writer_id"]: r["n"] for r in fleet.query(
            "SELECT writer_id, sum(n) AS n FROM audit_chain_runs GROUP BY writer_id")}
        self.assertGreater(per_writer.get("a", 0), 0)
        self.assertGreater(per_writer.get("b", 0), 0)

    def test_failed_request_alone_fails(self):
        """A statement that fails inside a group (here a trigger refuses one request's rows) fails
        that request alone: the group runs again with each request in a savepoint, the others
        commit, and no seq is skipped. The group is made deterministically: a transaction holding
        fleet_counters' row (as another replica's commit would) stops the writer inside its first
        group, the requests sent meanwhile queue, and they go as the next group together."""
        fleet = self.new_fleet()
        d = self.start(fleet, "a")
        conn = self.cluster.connect(fleet.dbname)
        locker = self.cluster.connect(fleet.dbname)
        try:
            conn.cursor().execute(
                "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.item_id LIKE 'poison%' THEN RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW; END $$;"
                " CREATE TRIGGER refuse_poison BEFORE INSERT ON decisions FOR EACH ROW"
                " EXECUTE FUNCTION refuse_poison()")
            answered, refused, unexpected = [], [], []
            lock = threading.Lock()

            def score(prefix, seed):
                r = d.score(score_body(2, seed, prefix))
                with lock:
                    if prefix.startswith("poison"):
                        (refused if (r.status, r.error_code()) == (503, "audit_unavailable") else unexpected).append(r)
                    elif r.status == 200:
                        answered.extend(answered_ids(r))
                    else:
                        unexpected.append(r)

            held = locker.cursor()
            held.execute("BEGIN")
            held.execute("SELECT 1 FROM fleet_counters FOR UPDATE")
            first = threading.Thread(target=score, args=("ok-first", 300))
            first.start()
            self.assertTrue(H.wait_until(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) >= 2, WAIT_S),
                            "the first request never reached the writer")
            prefixes = ["ok-a", "poison-1", "ok-b", "ok-c", "poison-2", "ok-d"]
            group = [threading.Thread(target=score, args=(p, 301 + i)) for i, p in enumerate(prefixes)]
            for t in group:
                t.start()
            queued = H.wait_until(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) >= 2 * (1 + len(prefixes)),
                                  WAIT_S)
            held.execute("ROLLBACK")
            self.assertTrue(queued, "the requests sent while the writer waited never queued")
            for t in [first, *group]:
                t.join(WAIT_S)
        finally:
            locker.close()
            conn.close()
        self.assertEqual(unexpected, [])
        self.assertEqual(len(refused), 2)
        self.assertEqual(len(answered), 2 * 5)
        rows = fleet.decisions()
        self.assertEqual(set(rows), set(answered))
        self.assertEqual(sorted(r["seq"] for r in rows.values()), list(range(1, len(answered) + 1)))
        self.check_chains(fleet, ["a"])
        self.assertEqual(fleet.query("SELECT decisions FROM fleet_counters")[0]["decisions"], len(answered))
        self.assertIn("each request of the group runs alone", d.logs(10 ** 9),
                      "the poisoned requests did not share a group with others: the test did not test the fallback")

    def test_idempotency_key_on_two_replicas(self):
        """The same request with the same Idempotency-Key sent to two replicas at the same moment:
        both answer 200 with the same bytes, and its rows are recorded once. When both had scored
        before either committed, the writer that comes second finds the key live after the
        counters' lock, writes nothing, and its replica replays the stored answer."""
        fleet = self.new_fleet()
        a, b = self.start(fleet, "a"), self.start(fleet, "b")
        probe = a.score(score_body(1, 1, "probe"), headers={"Idempotency-Key": "probe"})
        self.assertEqual(probe.status, 200, probe)
        rounds = 8
        for k in range(rounds):
            body = score_body(3, 7000 + k, f"race{k}")
            barrier = threading.Barrier(2)
            out = {}

            def send(d, name):
                barrier.wait()
                out[name] = d.score(body, headers={"Idempotency-Key": f"race-{k}"})
            threads = [threading.Thread(target=send, args=(d, n)) for d, n in ((a, "a"), (b, "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for name in "ab":
                self.assertIn(out[name].status, (200, 409), out[name])
            done = [out[n] for n in "ab" if out[n].status == 200]
            self.assertGreaterEqual(len(done), 1)
            self.assertTrue(all(r.body == done[0].body for r in done), "two answers for one key")
            ids = answered_ids(done[0])
            rows = fleet.query("SELECT decision_id FROM decisions WHERE item_id LIKE %s", (f"race{k}-%",))
            self.assertEqual(sorted(r["decision_id"] for r in rows), sorted(ids), f"round {k}")
        replays = a.logs(10 ** 9).count("replaying its stored answer") + b.logs(10 ** 9).count(
            "replaying its stored answer")
        print(f"\n  {replays} of {rounds} rounds answered through a key another replica committed first",
              file=sys.stderr)
        self.assertGreater(replays, 0, "no round raced through the commit: the replay path was not tested")
        self.check_chains(fleet, ["a", "b"])

    def test_shadow_rows(self):
        """Shadow outputs: shadow_decisions rows with seqs from the fleet counters, not chained."""
        import test_admin
        fleet = self.new_fleet()
        tmp = tempfile.mkdtemp(prefix="pgcld-pg-shadow-")
        self.addCleanup(shutil.rmtree, tmp, True)
        d = H.Daemon(models=test_admin.tiny_models_dir(tmp, ("1", "2")), default_model="tiny", db_path=fleet.uri,
                     auth=False, args=["--writer-id", "a"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "1"}).status, 200)
        r = d.post("/v1/admin/models/tiny/shadow", {"version": "2"})
        self.assertEqual(r.status, 200, r)
        total = 0
        for k in range(5):
            r = d.score({"items": test_admin.tiny_items(4, 40 + k, f"s{k}")})
            self.assertEqual(r.status, 200, r)
            total += 4
        self.assertTrue(H.wait_until(
            lambda: fleet.query("SELECT count(*) AS n FROM shadow_decisions")[0]["n"] == total),
            "shadow rows did not all arrive")
        shadows = fleet.query("SELECT seq, decision_id, shadow_version FROM shadow_decisions ORDER BY seq")
        self.assertEqual([r["seq"] for r in shadows], list(range(1, total + 1)))
        self.assertEqual({r["decision_id"] for r in shadows}, set(fleet.decisions()))
        self.assertEqual(fleet.query("SELECT shadow_decisions FROM fleet_counters")[0]["shadow_decisions"], total)
        runs = fleet.query("SELECT count(*) AS n FROM audit_chain_runs WHERE kind = 'shadow_decisions'")
        self.assertEqual(runs[0]["n"], 0)
        self.check_chains(fleet, ["a"])

    def test_connection_killed(self):
        """The writer's session terminated by the server (pg_terminate_backend): the next request may
        fail (503), the writer reconnects at once, takes its lock again and continues its chain."""
        fleet = self.new_fleet()
        d = self.start(fleet, "a")
        answered = []
        for i in range(3):
            r = d.score(score_body(2, 60 + i, f"before-{i}"))
            self.assertEqual(r.status, 200, r)
            answered += answered_ids(r)
        killed = fleet.query("SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity"
                             " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        self.assertGreater(len(killed), 0)
        ok = [0]

        def three_scored():
            r = d.score(score_body(2, 80 + ok[0], f"after-{ok[0]}"))
            if r.status != 200:
                self.assertEqual((r.status, r.error_code()), (503, "audit_unavailable"), r)
                return False
            answered.extend(answered_ids(r))
            ok[0] += 1
            return ok[0] == 3
        H.wait_for(three_scored, "the writer reconnects and three requests score", interval=0.1)
        self.assertEqual(set(fleet.decisions()), set(answered))
        self.check_chains(fleet, ["a"])
        locks = fleet.query("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
                            (0x70676364,))
        self.assertEqual(locks[0]["n"], 1, "the writer holds its id's lock again")

    def test_expired_idempotency_key_replaced(self):
        """A key past its expiry is no longer answered: the same key with another request scores
        afresh, and its new entry replaces the expired one in the same transaction."""
        fleet = self.new_fleet()
        d = H.Daemon(db_path=fleet.uri, auth=False, args=["--writer-id", "a", "--idempotency-ttl", "1"])
        self.addCleanup(d.cleanup)
        d.start()
        first = d.score(score_body(2, 11, "first"), headers={"Idempotency-Key": "k1"})
        self.assertEqual(first.status, 200, first)
        again = d.score(score_body(2, 11, "first"), headers={"Idempotency-Key": "k1"})
        self.assertEqual((again.status, again.body), (200, first.body))
        expires_at = fleet.query("SELECT expires_at FROM idempotency_keys WHERE idem_key = 'k1'")[0]["expires_at"]
        H.wait_for_clock_past(expires_at)  # the key expires (its 1 s TTL passes)
        other = d.score(score_body(3, 12, "second"), headers={"Idempotency-Key": "k1"})
        self.assertEqual(other.status, 200, other)
        self.assertNotEqual(other.json["request_id"], first.json["request_id"])
        keys = fleet.query("SELECT request_id FROM idempotency_keys WHERE idem_key = 'k1'")
        self.assertEqual([k["request_id"] for k in keys], [other.json["request_id"]])
        self.assertEqual(set(fleet.decisions()), set(answered_ids(first) + answered_ids(other)))

    def test_same_writer_id_refused(self):
        fleet = self.new_fleet()
        self.start(fleet, "a")
        second = H.Daemon(db_path=fleet.uri, auth=False, args=["--writer-id", "a"])
        self.addCleanup(second.cleanup, False)
        with self.assertRaises(H.DaemonError) as ctx:
            second.start()
        self.assertIn("writer id a is in use by another process", str(ctx.exception))
        # another id on the same database is fine
        third = self.start(fleet, "c")
        self.assertEqual(third.score(score_body(2, 5, "third")).status, 200)

    def test_server_restart_under_load(self):
        fleet = self.new_fleet()
        d = self.start(fleet, "a")
        answered, statuses, unexpected = [], [], []
        stop = threading.Event()

        def client(k):
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = d.score(score_body(2, 5000 + 1000 * k + i, f"l{k}-{i}"))
                except OSError:
                    continue
                statuses.append(r.status)
                if r.status == 200:
                    answered.extend(answered_ids(r))
                elif (r.status, r.error_code()) != (503, "audit_unavailable"):
                    unexpected.append(r)
                time.sleep(0.01)  # the clients' pace (load, not a wait)
        threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        H.wait_for(lambda: len(answered) >= 20, "the clients' requests are answered")  # load before the stop
        self.cluster.stop("immediate")
        try:
            # with the server gone: 503 audit_unavailable for scoring, and /readyz 503, answered while
            # it is down (it starts again only in the finally below)
            last = []

            def refused():  # a commit may finish as it stops
                last[:] = [d.score(score_body(1, 1, "down"))]
                return last[0].status != 200
            H.wait_for(refused, "scoring is refused with the server stopped")
            r = last[0]
            self.assertEqual((r.status, r.error_code()), (503, "audit_unavailable"), r)
            r = d.score(score_body(1, 2, "down2"))
            self.assertEqual(r.status, 503, r)
            self.assertEqual(d.get("/readyz").status, 503)
            # the clients keep scoring against the stopped server
            refused_so_far = statuses.count(503)
            H.wait_for(lambda: statuses.count(503) >= refused_so_far + 6, "the clients are refused while it is down")
        finally:
            self.cluster.start()
        # back: scoring works again, without restarting pgcld
        back = []

        def scored():
            r = d.score(score_body(2, 77, "back"))
            back[:] = [r]
            return r.status == 200
        H.wait_for(scored, "scoring works again after the server came back", interval=0.2)
        answered.extend(answered_ids(back[0]))
        answered_so_far = len(answered)
        H.wait_for(lambda: len(answered) >= answered_so_far + 12, "the clients score again")
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(d.get("/readyz").status, 200)
        self.assertIn(503, statuses)
        self.assertEqual(unexpected, [], "answers other than 200 and 503 audit_unavailable")
        rows = fleet.decisions()
        missing = set(answered) - set(rows)
        self.assertEqual(missing, set(), "a decision answered 200 is not in the database")
        self.assertEqual(sorted(r["seq"] for r in rows.values()), list(range(1, len(rows) + 1)))
        self.check_chains(fleet, ["a"])
        self.assertIn("reconnected", d.logs(10 ** 9))


if __name__ == "__main__":
    unittest.main()
