"""Archival past a horizon on the PostgreSQL store (issue 17; docs/audit.md, "Archival on PostgreSQL").

On a throw-away PostgreSQL 15 cluster (pg_cluster.py), two daemons (--writer-id a / b, inputs
stored, API keys made with `pgcld keys create`, whose admin events the CLI's own writer chains)
score decisions before a horizon and after it; one old decision is contested through a and resolved
through b, another has an open contest (a row the test inserts as the superuser, removed again
after the cut), and one old decision's stored input was dropped (as retention drops it). Then
`pgcld audit archive --db URI`:

  * with the default contest window (180 days) no decision is that old: only the admin events go;
  * with --contest-window-days 0 it archives the decisions older than the horizon up to the one
    with the open contest (kept, with every later decision), the resolved contest and its
    resolution with their decision, signs a fleet checkpoint over the three writers' heads,
    records the cut in audit_cuts and deletes the rows;
  * verify (`pgcld audit verify --db URI`, GET /v1/audit/verify on either daemon) is intact over
    both chains, counts the archived rows, and accepts the cut's checkpoint file;
  * GET /v1/decisions/{id} of an archived decision answers 404 naming the cut (as the SQLite
    store does); the contested one and the later ones answer 200, with proofs;
  * the archive file verifies offline (`pgcld audit verify --db ARCHIVE --checkpoint CUT`), holds
    the stored inputs that were live and not the dropped one, and fails when one of its rows is
    changed or removed, or against another checkpoint;
  * the live tables stay append-only except below the cut, and an archived row inserted again is
    reported by verify;
  * a second cut runs while both daemons score: every request answers 200, every decision answered
    meanwhile stays live, verify stays intact, the second archive verifies; then nothing is left.

Every refusal names what the operator can change (PgArchiveRefusalTest, one daemon whose keys were
made before its first start, the first decision contested): with the keys' events archived, the
contest window is named (--contest-window-days); without the window, the open contest is named,
with its decision and that resolving it allows archival (exit 3); resolved, the archive runs, and
then a later horizon is what would move the next cut.

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_pg_archive.py
"""
import datetime
import json
import os
import shutil
import sqlite3
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster  # noqa: E402


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


run_cli = H.run_pgcld
verify_json = H.verify_json


class PgArchiveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models("toxicity")
        pg_cluster.cluster_for_class(cls, "pgcld-pgarchive-")
        cls.uri = cls.cluster.new_database()
        cls.dbname = cls.uri.rsplit("/", 1)[1]
        cls.key = os.path.join(cls.tmp, "signing.key")
        p = run_cli("audit", "keygen", "--out", cls.key)
        assert p.returncode == 0, p.stderr
        cls.public = p.stdout.strip().splitlines()[-1]
        cls.cp_dir = os.path.join(cls.tmp, "cps")
        os.mkdir(cls.cp_dir)
        cls.daemons = {}
        for w in ("a", "b"):
            d = H.Daemon(db_path=cls.uri, args=["--writer-id", w, "--store-inputs", "float32"])
            try:
                d.start()
            except H.DaemonError:
                d.cleanup(check=False)
                for other in cls.daemons.values():
                    other.cleanup(check=False)
                raise
            cls.daemons[w] = d
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.seed = 0
        cls.old = []
        for _ in range(3):
            for w in ("a", "b"):
                cls.old += cls.score(w, 2)
        # the third old decision: contested through a, resolved through b (another reviewer's key)
        r = cls.daemons["a"].post(f"/v1/decisions/{cls.old[2]}/contests", {"reason": "a quote, not abuse"},
                                  key=cls.daemons["a"].keys["reviewer"])
        assert r.status == 201, r
        r = cls.daemons["b"].post(f"/v1/contests/{r.json['contest_id']}/resolution",
                                  {"outcome": "upheld", "note": "abuse"}, key=cls.daemons["b"].keys["reviewer"])
        assert r.status in (200, 201), r
        # the horizon: later than every row so far (stamped before their answers came back), and
        # earlier than every row from now on (the clock moves past it before the next request)
        H.wait_for_clock_past(now_rfc3339())
        cls.horizon = now_rfc3339()
        H.wait_for_clock_past(cls.horizon)
        cls.mid = []
        for w in ("b", "a"):
            cls.mid += cls.score(w, 2)
        cls.conn = cls.cluster.connect(cls.dbname)
        cls.addClassCleanup(cls.conn.close)
        cls.seq = {did: cls.one("SELECT seq FROM decisions WHERE decision_id = %s", (did,)) for did in cls.old}
        # the fifth old decision has an open contest (inserted by hand: the rule, not the route),
        # the second its stored input dropped (as retention drops it: the row in decision_inputs)
        cls.contested = cls.old[4]
        cls.dropped = cls.old[1]
        cls.sql("INSERT INTO contests SELECT contests + 1, 'c-open', %s, %s, 'reviewer', NULL, 'a quote'"
                " FROM fleet_counters", (cls.contested, "2000-01-01T00:00:00.000000Z"))
        cls.sql("DELETE FROM decision_inputs WHERE decision_seq = %s", (cls.seq[cls.dropped],))
        cls.window_archive = os.path.join(cls.tmp, "admin-events.db")
        cls.window = run_cli("audit", "archive", "--db", cls.uri, "--before", cls.horizon, "--out", cls.window_archive,
                             "--signing-key", cls.key, "--checkpoint-dir", cls.cp_dir)
        cls.archive = os.path.join(cls.tmp, "archive-1.db")
        p = run_cli("audit", "archive", "--db", cls.uri, "--before", cls.horizon, "--out", cls.archive,
                    "--signing-key", cls.key, "--checkpoint-dir", cls.cp_dir, "--contest-window-days", "0")
        assert p.returncode == 0, p.stdout + p.stderr
        cls.cut = json.loads(p.stdout.strip().splitlines()[-1])
        # the contest goes again (it was never chained), as the superuser with the triggers off
        cls.sql("ALTER TABLE contests DISABLE TRIGGER USER; DELETE FROM contests WHERE contest_id = 'c-open';"
                " ALTER TABLE contests ENABLE TRIGGER USER")

    @classmethod
    def tearDownClass(cls):
        for d in cls.daemons.values():
            d.cleanup(check=False)

    @classmethod
    def score(cls, w, n):
        cls.seed += 1
        r = cls.daemons[w].score({"items": H.json_items(H.random_embeddings(n, cls.D, seed=cls.seed),
                                                        f"{w}{cls.seed}-")})
        assert r.status == 200, r
        return [x["decision_id"] for x in r.json["results"]]

    @classmethod
    def sql(cls, statement, args=None):
        cls.conn.cursor().execute(statement, args)

    @classmethod
    def one(cls, statement, args=None):
        cur = cls.conn.cursor()
        cur.execute(statement, args)
        row = cur.fetchone()
        return row[0] if row else None

    def archived(self):
        return [did for did in self.old if self.seq[did] <= self.cut["decisions_through"]]

    def test_1_the_contest_window_keeps_every_decision(self):
        # the default window (180 days): no decision, and so neither contest nor resolution, only the
        # admin events older than the horizon (the keys made with `pgcld keys create`)
        self.assertEqual(self.window.returncode, 0, self.window.stdout + self.window.stderr)
        cut = json.loads(self.window.stdout.strip().splitlines()[-1])
        self.assertEqual(cut["cut_seq"], 1)
        self.assertEqual((cut["decisions_through"], cut["contests_through"], cut["resolutions_through"]), (0, 0, 0))
        self.assertGreater(cut["admin_events_through"], 0)
        self.assertEqual(cut["rows_archived"], cut["admin_events_through"])
        rc, rep, err = verify_json(self.window_archive, "--checkpoint", cut["checkpoint"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["archived_rows"], cut["rows_archived"])

    def test_1_the_cut(self):
        self.assertEqual(self.cut["cut_seq"], 2)
        self.assertEqual(self.cut["decisions_through"], self.seq[self.contested] - 1)
        # the resolved contest went with its decision; the open one stays (its seq is the next)
        self.assertEqual((self.cut["contests_through"], self.cut["resolutions_through"]), (1, 1))
        archived = self.archived()
        self.assertEqual(len(archived), 4)
        self.assertEqual(self.cut["rows_archived"], len(archived) + 2)  # the admin events went with cut 1
        fleet = self.cut["fleet_checkpoint"]
        self.assertEqual([h["writer_id"] for h in fleet["writers"] if h["writer_id"] in "ab"], ["a", "b"])
        row = self.conn.cursor()
        row.execute("SELECT decisions_through, rows_archived, archived_before, archive_name, archive_sha256"
                    " FROM audit_cuts WHERE seq = 2")
        self.assertEqual(row.fetchall(), [(self.cut["decisions_through"], self.cut["rows_archived"], self.horizon,
                                           self.archive, self.cut["archive_sha256"])])
        for did in archived:
            self.assertIsNone(self.one("SELECT seq FROM decisions WHERE decision_id = %s", (did,)))
        self.assertEqual(self.one("SELECT count(*) FROM decision_inputs WHERE decision_seq <= %s",
                                  (self.cut["decisions_through"],)), 0)
        # chain entries, runs and nodes stay
        self.assertGreater(self.one("SELECT count(*) FROM audit_chain_runs WHERE kind = 'decisions' AND"
                                    " first_row_seq <= %s", (self.cut["decisions_through"],)), 0)

    def test_2_verify_continues_from_the_cut(self):
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, err)
        self.assertTrue(rep["intact"], rep)
        self.assertEqual(rep["archive_cut_seq"], 2)
        self.assertEqual(rep["archived_rows"], self.cut["rows_archived"] + self.cut["admin_events_through"])
        self.assertEqual(len(rep["writers"]), 3)
        rc, rep, err = verify_json(self.uri, "--checkpoint", self.cut["checkpoint"], "--public-key", self.public)
        self.assertEqual(rc, 0, err)
        for d in self.daemons.values():
            r = d.get("/v1/audit/verify", key=d.keys["reviewer"])
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json["intact"], r.json)
            self.assertEqual(r.json["archived_rows"], rep["archived_rows"])

    def test_2_archived_decision_answers_like_sqlite(self):
        for d in self.daemons.values():
            rk = d.keys["reviewer"]
            for did in self.archived():
                r = d.get(f"/v1/decisions/{did}", key=rk)
                self.assertEqual(r.status, 404, r)
                self.assertEqual(r.json["error"]["code"], "decision_not_found")
                msg = r.json["error"]["message"]
                self.assertIn(f"decisions made before {self.horizon} were archived at the cut", msg)
                self.assertIn(self.archive, msg)
            for did in [self.contested] + self.mid:
                r = d.get(f"/v1/decisions/{did}", key=rk)
                self.assertEqual(r.status, 200, r)
                r = d.get(f"/v1/decisions/{did}/proof?format=chain-v2", key=rk)
                self.assertEqual(r.status, 200, r)
            r = d.get("/v1/decisions/0190d6c0-0000-7000-8000-000000000000", key=rk)  # 2024: before the horizon
            self.assertIn("were archived", r.json["error"]["message"])
            r = d.get("/v1/decisions/7a90d6c0-0000-7000-8000-000000000000", key=rk)  # after it
            self.assertEqual(r.json["error"]["message"],
                             "no decision with id '7a90d6c0-0000-7000-8000-000000000000'")

    def test_3_archive_verifies_offline(self):
        rc, rep, err = verify_json(self.archive, "--checkpoint", self.cut["checkpoint"], "--public-key", self.public)
        self.assertEqual(rc, 0, err)
        self.assertTrue(rep["intact"], rep)
        self.assertEqual(rep["archived_rows"], self.cut["rows_archived"])
        self.assertEqual([(w["writer_id"], w["head_seq"]) for w in rep["writers"]],
                         [(h["writer_id"], h["head_seq"]) for h in self.cut["fleet_checkpoint"]["writers"]])
        rc, rep, err = verify_json(self.archive)  # the checkpoint it holds
        self.assertEqual(rc, 0, err)
        db = sqlite3.connect(self.archive)
        try:
            ids = [r[0] for r in db.execute("SELECT decision_id FROM decisions ORDER BY seq")]
            self.assertEqual(ids, self.archived())
            inputs = [r[0] for r in db.execute("SELECT decision_seq FROM decision_inputs ORDER BY decision_seq")]
            self.assertEqual(inputs, [self.seq[d] for d in self.archived() if d != self.dropped])
            # both daemons' chains and the CLI's (`pgcld keys create`, writer: the host name)
            self.assertEqual(db.execute("SELECT count(DISTINCT writer_id) FROM audit_chain").fetchone()[0], 3)
            self.assertEqual(db.execute("SELECT count(*) FROM contests").fetchone()[0], 1)
            self.assertEqual(db.execute("SELECT count(*) FROM resolutions").fetchone()[0], 1)
        finally:
            db.close()
        self.assertEqual(os.stat(self.archive).st_mode & 0o777, 0o600)

    def tampered(self, name, statement):
        path = os.path.join(self.tmp, name)
        shutil.copy(self.archive, path)
        db = sqlite3.connect(path)
        db.execute(statement)
        db.commit()
        db.close()
        return verify_json(path, "--checkpoint", self.cut["checkpoint"])

    def test_3_a_changed_archive_fails(self):
        rc, rep, err = self.tampered("label.db", "UPDATE decisions SET label = 'changed' WHERE seq ="
                                     " (SELECT min(seq) FROM decisions)")
        self.assertEqual(rc, 1)
        self.assertFalse(rep["intact"])
        self.assertIn("payload differs", rep["reason"])
        rc, rep, err = self.tampered("input.db", "UPDATE decision_inputs SET input = x'00' WHERE decision_seq ="
                                     " (SELECT max(decision_seq) FROM decision_inputs)")
        self.assertEqual(rc, 1)
        self.assertIn("payload differs", rep["reason"])
        rc, rep, err = self.tampered("gone.db", "DELETE FROM decisions WHERE seq = (SELECT max(seq) FROM decisions)")
        self.assertEqual(rc, 1)
        self.assertIn("missing", rep["reason"])
        rc, rep, err = self.tampered("entry.db", "UPDATE audit_chain SET hash = prev_hash WHERE seq = 2")
        self.assertEqual(rc, 1)
        self.assertFalse(rep["intact"])
        # another checkpoint than the cut's (of later heads)
        self.score("b", 1)
        other = os.path.join(self.tmp, "later.json")
        p = run_cli("audit", "checkpoint", "--db", self.uri, "--signing-key", self.key, "--out", other)
        self.assertEqual(p.returncode, 0, p.stderr)
        rc, rep, err = verify_json(self.archive, "--checkpoint", other)
        self.assertEqual(rc, 1)
        self.assertIn("not the checkpoint the archive was cut at", rep["reason"])

    def test_4_append_only_but_below_the_cut(self):
        import psycopg2
        first_live = self.one("SELECT min(seq) FROM decisions")
        for statement in (f"DELETE FROM decisions WHERE seq = {first_live}",
                          f"UPDATE decisions SET label = 'x' WHERE seq = {first_live}",
                          "DELETE FROM audit_cuts", "UPDATE audit_cuts SET rows_archived = 0",
                          "DELETE FROM audit_chain WHERE seq = 1"):
            with self.assertRaises(psycopg2.Error, msg=statement):
                self.sql(statement)

    def test_5_a_reinserted_archived_row_is_reported(self):
        db = sqlite3.connect(self.archive)
        try:
            row = db.execute("SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version,"
                             " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review,"
                             " t_block, vector, input_sha256, latency_us, input_dtype, input_digest FROM decisions"
                             " ORDER BY seq LIMIT 1").fetchone()
        finally:
            db.close()
        self.sql("INSERT INTO decisions (seq, decision_id, created_at, request_id, item_id, model_name, model_version,"
                 " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
                 " vector, input_sha256, latency_us, input_dtype, input_digest) VALUES (" + ", ".join(["%s"] * 21) +
                 ")", [bytes(v) if isinstance(v, bytes) else v for v in row])
        try:
            rc, rep, err = verify_json(self.uri)
            self.assertEqual(rc, 1, rep)
            self.assertIn("is in the live database again", rep["reason"])
            r = self.daemons["b"].get("/v1/audit/verify", key=self.daemons["b"].keys["reviewer"])
            self.assertFalse(r.json["intact"])
        finally:  # below the cut, the append-only rule lets it go again
            self.sql("DELETE FROM decisions WHERE seq = %s", (row[0],))
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, rep)

    def test_5_a_changed_cut_statement_is_reported(self):
        statement = self.one("SELECT statement FROM audit_cuts WHERE seq = 2")
        first_head = statement.split("\n")[3]  # created_at, the count, then the first head: "seq hash root id"
        seq, rest = first_head.split(" ", 1)
        forged = statement.replace(first_head, f"{int(seq) + 1} {rest}", 1)
        self.assertNotEqual(forged, statement)
        alter = "ALTER TABLE audit_cuts {} TRIGGER USER"
        self.sql(alter.format("DISABLE") + "; UPDATE audit_cuts SET statement = %s WHERE seq = 2; " +
                 alter.format("ENABLE"), (forged,))
        try:
            rc, rep, err = verify_json(self.uri)
            self.assertEqual(rc, 1, rep)
            self.assertIn("the signed statement of archive cut 2 does not verify", rep["reason"])
        finally:
            self.sql(alter.format("DISABLE") + "; UPDATE audit_cuts SET statement = %s WHERE seq = 2; " +
                     alter.format("ENABLE"), (statement,))
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, rep)

    def test_6_a_second_cut_while_both_writers_score(self):
        H.wait_for_clock_past(now_rfc3339())  # later than every row so far
        horizon = now_rfc3339()
        archive = os.path.join(self.tmp, "archive-2.db")
        answered, failures, stop = [], [], threading.Event()

        def keep_scoring(w):
            D, i = self.D, 0
            while not stop.is_set():
                i += 1
                r = self.daemons[w].score({"items": H.json_items(H.random_embeddings(2, D, seed=1000 + i),
                                                                 f"late-{w}{i}-")})
                if r.status == 200:
                    answered.extend(x["decision_id"] for x in r.json["results"])
                else:
                    failures.append(r.status)

        threads = [threading.Thread(target=keep_scoring, args=(w,)) for w in ("a", "b")]
        for t in threads:
            t.start()
        try:
            p = run_cli("audit", "archive", "--db", self.uri, "--before", horizon, "--out", archive,
                        "--signing-key", self.key, "--checkpoint-dir", self.cp_dir, "--contest-window-days", "0")
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(failures, [])
        self.assertGreater(len(answered), 0)
        cut = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(cut["cut_seq"], 3)
        self.assertGreater(cut["decisions_through"], self.cut["decisions_through"])
        # everything before the horizon left; every decision answered while it ran is live
        self.assertEqual(self.one("SELECT count(*) FROM decisions WHERE created_at < %s", (horizon,)), 0)
        for did in answered:
            self.assertIsNotNone(self.one("SELECT seq FROM decisions WHERE decision_id = %s", (did,)), did)
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["archive_cut_seq"], 3)
        rc, rep, err = verify_json(archive, "--checkpoint", cut["checkpoint"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["archived_rows"], cut["rows_archived"])
        # the daemons go on scoring after the cuts; verify stays intact
        self.score("a", 2)
        rc, rep, err = verify_json(self.uri)
        self.assertEqual(rc, 0, err)
        p = run_cli("audit", "archive", "--db", self.uri, "--before", horizon, "--out",
                    os.path.join(self.tmp, "archive-3.db"), "--signing-key", self.key, "--contest-window-days", "0")
        self.assertEqual(p.returncode, 3, p.stderr)


class PgArchiveRefusalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models("tiny_binary")
        pg_cluster.cluster_for_class(cls, "pgcld-pgarchive-refusal-")
        cls.uri = cls.cluster.new_database()
        cls.key = os.path.join(cls.tmp, "signing.key")
        p = run_cli("audit", "keygen", "--out", cls.key)
        assert p.returncode == 0, p.stderr
        cls.cp_dir = os.path.join(cls.tmp, "cps")
        os.mkdir(cls.cp_dir)
        # the harness makes the keys with `pgcld keys create --db URI` before the first start
        cls.d = H.start_daemon(cls, models=H.tiny_binary_root(cls.tmp), default_model="tiny", db_path=cls.uri)
        cls.first = cls.score(3)
        r = cls.d.post(f"/v1/decisions/{cls.first[0]}/contests", {"reason": "a quote, not abuse"},
                       key=cls.d.keys["reviewer"])
        assert r.status == 201, r
        cls.contest_id = r.json["contest_id"]
        cls.later = cls.score(2)

    @classmethod
    def score(cls, n):
        r = cls.d.score({"items": H.json_items(H.random_embeddings(n, 32, seed=7 + n), "pgref-")})
        assert r.status == 200, r
        return [x["decision_id"] for x in r.json["results"]]

    def archive(self, name, *args):
        out = os.path.join(self.tmp, name)
        return run_cli("audit", "archive", "--db", self.uri, "--older-than-days", "0", "--out", out, "--signing-key",
                       self.key, "--checkpoint-dir", self.cp_dir, *args), out

    def test_1_the_contest_window_is_named(self):
        p, out = self.archive("keys.db")  # the keys' admin events: older, outside every window
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        cut = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(cut["decisions_through"], 0, cut)
        self.assertGreater(cut["admin_events_through"], 0, cut)
        p, out = self.archive("window.db")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("nothing to archive", p.stderr)
        self.assertIn("contest window (--contest-window-days 180", p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_2_the_open_contest_is_named(self):
        for bound in ((), ("--max-decisions", "1")):
            p, out = self.archive("contested.db", "--contest-window-days", "0", *bound)
            H.assert_archive_names_open_contest(self, p, self.first[0], self.contest_id, bound)
            self.assertFalse(os.path.exists(out))

    def test_3_resolved_it_archives(self):
        second = self.d.create_key("reviewer", "second reviewer")
        r = self.d.post(f"/v1/contests/{self.contest_id}/resolution", {"outcome": "upheld", "note": "abuse"},
                        key=second)
        self.assertEqual(r.status, 201, r)
        last = self.d.scalar("SELECT seq FROM decisions WHERE decision_id = ?", (self.later[-1],))
        p, out = self.archive("archive.db", "--contest-window-days", "0")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        cut = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual((cut["decisions_through"], cut["contests_through"], cut["resolutions_through"]), (last, 1, 1))
        r = self.d.get(f"/v1/decisions/{self.first[0]}", key=self.d.keys["reviewer"])
        self.assertEqual(r.status, 404, r)
        p, out = self.archive("again.db", "--contest-window-days", "0")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("nothing to archive: no event row after the previous cut is older than", p.stderr)
        self.assertIn("a later horizon", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
