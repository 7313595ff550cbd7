"""The PostgreSQL store's reviewer reads (issue 17) against the SQLite store's, over real HTTP.

Two daemons, one on a SQLite file and one on a throw-away PostgreSQL database (pg_cluster.py),
hold the same audit rows — decisions over several models, versions, labels, items, requests and
times (a few written out of time order, as a fleet of writers with skewed clocks may write them),
stored and dropped inputs, contests open and resolved — inserted with sqlite3 and psycopg2 while
the daemons are stopped. Every reviewer read must then answer the same, byte for byte where the
answer is a file: GET /v1/decisions with every filter and every page of its cursors,
/v1/decisions/{id} (and its statement), the contest queues, /v1/audit/stats, the NDJSON and CSV
exports. The one difference allowed: a decision's chain entry names its writer with PostgreSQL.

Also: a row that commits "late" (a lower seq than rows already listed is impossible in the fleet
order; a higher one appears on the next walk) never makes a cursor skip, and the plans of the list
queries on 100k rows use an index for each page (EXPLAIN through auto_explain of the daemon's own
statements).

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_pg_reads.py
"""
import json
import os
import random
import shutil
import sqlite3
import struct
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

TINY = "tiny_binary"
N_DECISIONS = 420
MODELS = [("tox", "1"), ("tox", "2"), ("tox", "10"), ("spam", "1"), ("spam", "b")]
LABELS = ["ok", "insult", "threat", "Zeta", "é-accent"]


def tiny_models_dir(parent, versions=("1",)):
    root = os.path.join(parent, "models")
    for v in versions:
        shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", v))
    return root


def ts(day, second, micro):
    """A timestamp in the audit columns' format (2026-01-DD, seconds into the day)."""
    return "2026-01-%02dT%02d:%02d:%02d.%06dZ" % (day, second // 3600, second // 60 % 60, second % 60, micro)


def synthetic_rows(seed=17):
    """Decisions, inputs, contests and resolutions as column dicts, the same for both stores."""
    rnd = random.Random(seed)
    decisions, inputs = [], []
    for seq in range(1, N_DECISIONS + 1):
        model, version = MODELS[rnd.randrange(len(MODELS)) if seq > 40 else 0]
        second = seq * 90 + (rnd.randrange(-200, 0) if seq % 37 == 0 else 0)  # a few out of time order
        probs = {"ok": rnd.random(), "insult": rnd.random() / 3, "threat": 1e-7 * rnd.random()}
        stored = seq % 3 != 0
        dtype = ("f16" if seq % 2 else "f32") if stored else None
        decisions.append({
            "seq": seq, "decision_id": "01a1fdee-%04x-7000-8000-%012x" % (seq, seq),
            "created_at": ts(1 + seq // 200, second % 86400, (seq * 7919) % 1000000),
            "request_id": "req-%d" % (seq // 3), "item_id": "item-%d" % (seq % 17),
            "model_name": model, "model_version": version, "model_sha256": "ab" * 32,
            "label": LABELS[rnd.randrange(len(LABELS))], "label_index": rnd.randrange(3),
            "probabilities": json.dumps(probs), "toxicity": None if seq % 11 == 0 else rnd.random() / 7,
            "decision": rnd.choice(["allow", "allow", "review", "block"]),
            "policy": json.dumps({"t_review": 0.5, "t_block": 0.9}), "t_review": 0.5, "t_block": 0.1 + rnd.random(),
            "vector": struct.pack("<4f", rnd.random(), -rnd.random(), 1 / 3, 1e-30),
            "input_sha256": "cd" * 32, "latency_us": rnd.randrange(100, 5000),
            "input_dtype": dtype, "input_digest": bytes(32) if stored else None,
        })
        if stored and seq % 5 != 0:  # every fifth stored input dropped by retention
            inputs.append({"decision_seq": seq, "input": struct.pack("<2f", 0.5, seq)})
    contests, resolutions = [], []
    contested = rnd.sample(range(1, N_DECISIONS + 1), 60)
    for i, dseq in enumerate(contested, start=1):
        filed = ts(5, 3600 + i * 600, (i * 104729) % 1000000)
        contests.append({"seq": i, "contest_id": "c0ffee00-%04x-7000-8000-000000000000" % i,
                         "decision_id": decisions[dseq - 1]["decision_id"], "filed_at": filed,
                         "filed_by": "reviewer %d" % (i % 4), "filer_key_id": None if i % 3 else "pgcld_k%d" % i,
                         "reason": "reason %d, \"quoted\"" % i})
    # two contests of one decision: the first resolved, the second open
    contests.append({"seq": 61, "contest_id": "c0ffee00-0061-7000-8000-000000000000",
                     "decision_id": contests[0]["decision_id"], "filed_at": ts(6, 100, 1),
                     "filed_by": "again", "filer_key_id": None, "reason": "second"})
    for j, c in enumerate(contests[:45], start=1):
        resolutions.append({"seq": j, "contest_id": c["contest_id"],
                            "resolved_at": ts(7, 60 * j + rnd.randrange(59), rnd.randrange(1000000)),
                            "resolved_by": "lead", "resolver_key_id": None,
                            "outcome": "overturned" if j % 3 == 0 else "upheld",
                            "corrected_label": "ok" if j % 6 == 0 else None, "note": "note %d" % j})
    return decisions, inputs, contests, resolutions


def insert_sqlite(path, rows):
    decisions, inputs, contests, resolutions = rows
    conn = sqlite3.connect(path)
    with conn:
        for table, rs in (("decisions", decisions), ("decision_inputs", inputs), ("contests", contests),
                          ("resolutions", resolutions)):
            for r in rs:
                cols = list(r)
                conn.execute("INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(cols), ", ".join("?" * len(cols))),
                             [r[c] for c in cols])
    conn.close()


def insert_pg(uri, rows, chain=True):
    import psycopg2
    decisions, inputs, contests, resolutions = rows
    conn = psycopg2.connect(uri)
    with conn, conn.cursor() as cur:
        for table, rs in (("decisions", decisions), ("decision_inputs", inputs), ("contests", contests),
                          ("resolutions", resolutions)):
            for r in rs:
                cols = list(r)
                vals = [psycopg2.Binary(v) if isinstance(v, bytes) else v for v in (r[c] for c in cols)]
                cur.execute("INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(cols), ", ".join(["%s"] * len(cols))),
                            vals)
        cur.execute("UPDATE fleet_counters SET decisions = greatest(decisions, %s), contests = greatest(contests, %s),"
                    " resolutions = greatest(resolutions, %s)", (len(decisions), len(contests), len(resolutions)))
    conn.close()


def chain_decisions_pg(uri, writer_id, first_seq, n, entry_seq):
    """Chains decisions first_seq .. first_seq + n - 1 in an entry of writer_id's chain (test rows:
    the reads only look the entry up)."""
    import psycopg2
    conn = psycopg2.connect(uri)
    with conn, conn.cursor() as cur:
        cur.execute("INSERT INTO writers VALUES (%s, '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')"
                    " ON CONFLICT DO NOTHING", (writer_id,))
        cur.execute("INSERT INTO audit_chain VALUES (%s, %s, 'commit', 0, 'p', 'prev', %s, %s, NULL)",
                    (writer_id, entry_seq, "%064x" % entry_seq, n))
        cur.execute("INSERT INTO audit_chain_runs VALUES ('decisions', %s, %s, %s, %s, 0)",
                    (first_seq, n, writer_id, entry_seq))
    conn.close()


def q(**params):
    return "?" + urllib.parse.urlencode(params) if params else ""


class PgReadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models(TINY)
        cls.cluster = pg_cluster.PgCluster()
        cls.addClassCleanup(cls.cluster.drop)
        cls.uri = cls.cluster.new_database()
        cls.rows = synthetic_rows()
        cls.daemons = {}
        for name, db in (("sqlite", None), ("pg", cls.uri)):
            d = H.Daemon(models=tiny_models_dir(H.tempfile.mkdtemp(prefix="pgcld-pgreads-")), auth=False,
                         db_path=db, default_model="tiny", args=["--input-retention-days", "36500"])
            cls.addClassCleanup(d.cleanup)
            d.start()  # creates the schema
            d.stop()
            cls.daemons[name] = d
        insert_sqlite(cls.daemons["sqlite"].db_path, cls.rows)
        insert_pg(cls.uri, cls.rows)
        # the first 200 decisions chained in two entries of two writers' chains
        chain_decisions_pg(cls.uri, "replica-a", 1, 150, 2)
        chain_decisions_pg(cls.uri, "replica-b", 151, 50, 2)
        for d in cls.daemons.values():
            d.start()

    # -- helpers
    def both(self, path):
        """The answers of both daemons to GET path: (sqlite, pg) as (status, body bytes)."""
        out = []
        for name in ("sqlite", "pg"):
            r = self.daemons[name].get(path)
            out.append((r.status, r.body))
        return out

    def same_json(self, path, adjust=None):
        (s_status, s_body), (p_status, p_body) = self.both(path)
        self.assertEqual((s_status, p_status), (200, 200), (path, s_body[:300], p_body[:300]))
        s, p = json.loads(s_body), json.loads(p_body)
        if adjust:
            adjust(s, p)
        self.assertEqual(s, p, path)
        return s

    def walk(self, params, limit):
        """Every page of a decision listing through its cursors, compared page by page; the rows."""
        rows, cursor = [], None
        for _ in range(N_DECISIONS + 2):
            page = self.same_json("/v1/decisions" + q(**params, limit=limit, **({"cursor": cursor} if cursor else {})))
            rows += page["decisions"]
            cursor = page["next_cursor"]
            if not cursor:
                return rows
        self.fail("the cursor never ended")

    # -- tests
    def test_decision_lists_every_filter_and_cursor(self):
        d = self.rows[0]
        filters = [{}, {"model": "tox"}, {"model": "spam"}, {"model": "tox", "version": "10"},
                   {"model": "nope"}, {"label": "insult"}, {"label": "é-accent"}, {"decision": "allow"},
                   {"decision": "review"}, {"decision": "block"}, {"item_id": "item-3"}, {"request_id": "req-12"},
                   {"since": "2026-01-02T00:00:00Z"}, {"until": "2026-01-02T06:00:00Z"},
                   {"since": "2026-01-01T12:00:00Z", "until": "2026-01-02T01:00:00.5Z"},
                   {"since": "2030-01-01T00:00:00Z"},
                   {"contest": "open"}, {"contest": "resolved"}, {"contest": "contested"}, {"contest": "none"},
                   {"model": "tox", "label": "ok", "since": "2026-01-01T06:00:00Z"},
                   {"decision": "block", "contest": "none", "until": "2026-01-03T00:00:00Z"},
                   {"model": "spam", "contest": "contested"}, {"item_id": "item-5", "decision": "allow"}]
        for f in filters:
            with self.subTest(filters=f):
                for limit in (7, 100):
                    rows = self.walk(f, limit)
                    # the oracle: the synthetic rows themselves, filtered naively
                    expected = [r["seq"] for r in reversed(d) if self.matches(r, f)]
                    self.assertEqual([r["seq"] for r in rows], expected)

    def matches(self, r, f):
        contests = [c for c in self.rows[2] if c["decision_id"] == r["decision_id"]]
        resolved = {x["contest_id"] for x in self.rows[3]}
        status = "none" if not contests else "open" if any(c["contest_id"] not in resolved for c in contests) \
            else "resolved"
        return all([
            f.get("model") in (None, r["model_name"]), f.get("version") in (None, r["model_version"]),
            f.get("label") in (None, r["label"]), f.get("decision") in (None, r["decision"]),
            f.get("item_id") in (None, r["item_id"]), f.get("request_id") in (None, r["request_id"]),
            "since" not in f or r["created_at"] >= normal_ts(f["since"]),
            "until" not in f or r["created_at"] < normal_ts(f["until"]),
            f.get("contest") in (None, status) or (f.get("contest") == "contested" and status != "none")])

    def test_one_decision_and_its_statement(self):
        contested = {c["decision_id"] for c in self.rows[2]}
        ids = [r["decision_id"] for r in self.rows[0] if r["seq"] % 9 == 0 or r["decision_id"] in contested]
        ids += [self.rows[0][0]["decision_id"], self.rows[0][199]["decision_id"], self.rows[0][200]["decision_id"]]
        for decision_id in ids:
            with self.subTest(decision_id=decision_id):
                chains = {}

                def take_chains(s, p):  # the SQLite file's rows were never chained; the PostgreSQL rows partly
                    chains["sqlite"], chains["pg"] = s.pop("chain"), p.pop("chain")

                rec = self.same_json("/v1/decisions/" + decision_id, take_chains)
                seq = rec["seq"]
                self.assertIsNone(chains["sqlite"])
                # with PostgreSQL: the entry of the writer whose run holds the row
                if seq <= 200:
                    self.assertEqual(chains["pg"], {"seq": 2, "hash": "%064x" % 2,
                                                    "writer_id": "replica-a" if seq <= 150 else "replica-b"})
                else:
                    self.assertIsNone(chains["pg"])
                self.assertEqual(rec["input_dropped"], seq % 3 != 0 and seq % 5 == 0)
                self.same_json("/v1/decisions/%s/statement" % decision_id)

    def test_rescore_reads_the_stored_input(self):
        """Stored, dropped (digest set, input row gone) and never stored inputs answer alike; the
        decisions' model is not loaded, so a stored input gets as far as the model lookup."""
        for seq in (1, 2, 3, 5, 10, 15, 400):
            decision_id = self.rows[0][seq - 1]["decision_id"]
            answers = [self.daemons[name].post("/v1/decisions/%s/rescore" % decision_id) for name in ("sqlite", "pg")]
            self.assertEqual([(a.status, a.body) for a in answers][0], [(a.status, a.body) for a in answers][1], seq)
        r = self.daemons["pg"].post("/v1/decisions/%s/rescore" % self.rows[0][4]["decision_id"])  # seq 5: dropped
        self.assertEqual((r.status, r.json["error"]["code"]), (410, "input_dropped"))

    def test_z_reads_come_back_after_a_server_restart(self):
        """The server restarts between two reads: the next read answers at once, on a new
        connection (the pooled one is gone, which libpq notices only when it is used). The server
        down: reads answer 503 audit_unavailable, and come back with it."""
        d = self.daemons["pg"]
        for _ in range(3):
            self.assertEqual(d.get("/v1/decisions?limit=3").status, 200)
        self.cluster.stop("fast")
        self.cluster.start()
        self.assertEqual(self.both("/v1/decisions?limit=3")[1], self.both("/v1/decisions?limit=3")[0])
        self.cluster.stop("fast")
        try:
            r = d.get("/v1/decisions?limit=3")
            self.assertEqual((r.status, r.json["error"]["code"]), (503, "audit_unavailable"), r.body[:300])
        finally:
            self.cluster.start()
        self.same_json("/v1/audit/stats")

    def test_chain_entry_names_its_writer(self):
        rec = json.loads(self.daemons["pg"].get("/v1/decisions/" + self.rows[0][160]["decision_id"]).body)
        self.assertEqual(rec["chain"], {"seq": 2, "hash": "%064x" % 2, "writer_id": "replica-b"})
        rec = json.loads(self.daemons["pg"].get("/v1/decisions/" + self.rows[0][300]["decision_id"]).body)
        self.assertIsNone(rec["chain"])
        self.assertEqual(self.daemons["pg"].get("/v1/decisions/01a1fdee-0000-7000-8000-999999999999").status, 404)

    def test_contest_queues(self):
        for status in ("open", "resolved"):
            for limit in (4, 100):
                with self.subTest(status=status, limit=limit):
                    cursor, n = None, 0
                    while True:
                        page = self.same_json("/v1/contests" + q(status=status, limit=limit,
                                                                 **({"cursor": cursor} if cursor else {})),
                                              lambda s, p: [r.pop("age_seconds") for r in s["contests"] + p["contests"]])
                        n += len(page["contests"])
                        cursor = page["next_cursor"]
                        if not cursor:
                            break
                    self.assertEqual(n, 16 if status == "open" else 45)

    def test_stats(self):
        for params in ({}, {"since": "2026-01-02T00:00:00Z"}, {"until": "2026-01-05T05:00:00Z"},
                       {"since": "2026-01-01T10:00:00Z", "until": "2026-01-05T10:00:00Z"}, {"since": "2031-01-01T00:00:00Z"}):
            with self.subTest(params=params):
                stats = self.same_json("/v1/audit/stats" + q(**params))
        self.assertIsNotNone(json.dumps(stats))

    def test_exports_are_the_same_bytes(self):
        for fmt in ("ndjson", "csv"):
            for params in ({}, {"since": "2026-01-01T20:00:00Z", "until": "2026-01-02T12:00:00Z"}):
                with self.subTest(format=fmt, params=params):
                    (s_status, s_body), (p_status, p_body) = self.both("/v1/audit/export" + q(format=fmt, **params))
                    self.assertEqual((s_status, p_status), (200, 200))
                    self.assertGreater(len(s_body), 1000)
                    self.assertEqual(s_body, p_body)


class ScoredThroughBothTest(LiveValidationMixin, unittest.TestCase):
    """The same scoring requests sent to a SQLite daemon and to a PostgreSQL daemon (its writer
    committing them): every reviewer read answers the same but for what each daemon makes up
    itself (decision and request ids, times, latencies, chain entries); the PostgreSQL daemon's
    answers as openapi.yaml documents them."""

    VOLATILE = {"decision_id", "request_id", "created_at", "latency_us", "chain", "puid", "application_date"}

    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models(TINY)
        import base64
        import numpy as np
        cls.cluster = pg_cluster.PgCluster()
        cls.addClassCleanup(cls.cluster.drop)
        cls.daemons = {}
        for name, db in (("sqlite", None), ("pg", cls.cluster.new_database())):
            d = H.Daemon(models=tiny_models_dir(H.tempfile.mkdtemp(prefix="pgcld-pgscored-"), ("1", "2")), auth=False,
                         db_path=db, default_model="tiny", args=["--store-inputs", "float32"])
            cls.addClassCleanup(d.cleanup)
            d.start()
            cls.daemons[name] = d
            r = d.post("/v1/admin/models/tiny/activate", {"version": "1"})
            assert r.status == 200, r
        rng = np.random.default_rng(5)
        golden = [np.frombuffer(base64.b64decode(g["embedding_b64"]), "<f4")
                  for g in H.load_config(TINY)["golden"]]
        for batch in range(16):
            if batch == 8:  # version 2 in shadow from here on
                for d in cls.daemons.values():
                    r = d.post("/v1/admin/models/tiny/shadow", {"version": "2"})
                    assert r.status == 200, r
            items = []
            for k in range(1 + batch % 4):
                z = golden[(batch + k) % 3] + rng.normal(0, 0.05, golden[0].shape).astype("<f4")
                items.append({"id": "item-%d" % ((batch * 5 + k) % 7), "embedding_b64": H.embedding_b64(z)})
                if k == 1:  # a statement's facts on some items (issue 19, item 9)
                    items[-1].update(content_date="2026-01-%02d" % (1 + batch), territorial_scope=["DE", "GR"],
                                     content_language="EL")
            # one trace per batch, the same on both daemons: stored, listed and filtered alike
            traceparent = "00-%032x-00f067aa0ba902b7-01" % (0x4bf92f3577b34da6a3ce929d0e0e4700 + batch)
            for d in cls.daemons.values():
                r = d.score({"items": items}, headers={"traceparent": traceparent})
                assert r.status == 200, r
        cls.shadows = sum(1 + b % 4 for b in range(8, 16))
        import psycopg2
        conn = psycopg2.connect(cls.daemons["pg"].db_path)
        conn.autocommit = True

        def pg_shadows():
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM shadow_decisions")
                return cur.fetchone()[0]

        assert H.wait_until(lambda: pg_shadows() == cls.shadows and
                            cls.daemons["sqlite"].scalar("SELECT count(*) FROM shadow_decisions") == cls.shadows)
        conn.close()

    def normal(self, v):
        """v without what each daemon makes up itself."""
        if isinstance(v, dict):
            return {k: self.normal(x) for k, x in v.items() if k not in self.VOLATILE}
        if isinstance(v, list):
            return [self.normal(x) for x in v]
        return v

    def get_both(self, path):
        out = []
        for name in ("sqlite", "pg"):
            r = self.daemons[name].get(path)
            self.assertEqual(r.status, 200, (name, path, r.body[:300]))
            out.append(r)
        return out

    def test_lists_records_stats_and_exports(self):
        filters = [{}, {"label": "pos"}, {"label": "neg"}, {"decision": "allow"}, {"decision": "review"},
                   {"decision": "block"}, {"item_id": "item-3"}, {"model": "tiny"}, {"model": "tiny", "version": "1"},
                   {"contest": "none"}, {"since": "2000-01-01T00:00:00Z"},
                   {"trace_id": "%032x" % (0x4bf92f3577b34da6a3ce929d0e0e4700 + 5)},
                   {"trace_id": "%032x" % (0x4bf92f3577b34da6a3ce929d0e0e4700 + 3), "label": "pos"}]
        for f in filters:
            with self.subTest(filters=f):
                pages = {}
                for name in ("sqlite", "pg"):
                    rows, cursor = [], None
                    while True:
                        r = self.daemons[name].get("/v1/decisions" + q(**f, limit=4,
                                                                       **({"cursor": cursor} if cursor else {})))
                        self.assertEqual(r.status, 200)
                        rows += r.json["decisions"]
                        cursor = r.json["next_cursor"]
                        if not cursor:
                            break
                    pages[name] = rows
                self.assertEqual(self.normal(pages["sqlite"]), self.normal(pages["pg"]))
                if "trace_id" in f:
                    self.assertTrue(pages["pg"] and all(r["trace_id"] == f["trace_id"] for r in pages["pg"]), pages)
        all_rows = {name: json.loads(self.daemons[name].get("/v1/decisions?limit=1000").body)["decisions"]
                    for name in ("sqlite", "pg")}
        self.assertGreater(len(all_rows["pg"]), 20)
        for s_row, p_row in zip(all_rows["sqlite"], all_rows["pg"]):
            s_rec = self.daemons["sqlite"].get("/v1/decisions/" + s_row["decision_id"])
            p_rec = self.daemons["pg"].get("/v1/decisions/" + p_row["decision_id"])
            self.assertEqual((s_rec.status, p_rec.status), (200, 200))
            self.assertEqual(self.normal(s_rec.json), self.normal(p_rec.json))
            self.assertIsNotNone(p_rec.json["chain"], "the writer chains every decision")
            self.assertIn("writer_id", p_rec.json["chain"])
            self.check_live("get", "/v1/decisions/" + p_row["decision_id"], p_rec)
            self.assertNotIn("writer_id", s_rec.json["chain"])
        s, p = self.get_both("/v1/audit/stats")
        self.assertEqual(s.json, p.json)
        self.check_live("get", "/v1/audit/stats", p)
        self.check_live("get", "/v1/decisions", self.get_both("/v1/decisions?limit=5")[1])
        s, p = self.get_both("/v1/admin/models/tiny/shadow")
        self.assertEqual(s.json["items"], self.shadows)
        self.assertEqual(s.json, p.json)
        for fmt in ("ndjson", "csv"):
            s, p = self.get_both("/v1/audit/export?format=" + fmt)
            if fmt == "ndjson":
                s_lines = [self.normal(json.loads(x)) for x in s.body.decode().splitlines()]
                p_lines = [self.normal(json.loads(x)) for x in p.body.decode().splitlines()]
                self.assertEqual(s_lines, p_lines)
            else:
                self.assertEqual(len(s.body.splitlines()), len(p.body.splitlines()))

    def test_rescore_and_an_idempotent_retry(self):
        """Re-score reads the stored input back (decision_inputs, bytea); a retry with the same
        Idempotency-Key is answered from idempotency_keys: both as with SQLite."""
        rows = {name: json.loads(self.daemons[name].get("/v1/decisions?limit=6").body)["decisions"]
                for name in ("sqlite", "pg")}
        for s_row, p_row in zip(rows["sqlite"], rows["pg"]):
            s = self.daemons["sqlite"].post("/v1/decisions/%s/rescore" % s_row["decision_id"])
            p = self.daemons["pg"].post("/v1/decisions/%s/rescore" % p_row["decision_id"])
            self.assertEqual((s.status, p.status), (200, 200), p.body[:300])
            self.assertEqual(self.normal(s.json), self.normal(p.json))
            self.assertTrue(p.json["same_label"] and p.json["same_decision"])  # float32 inputs, same version
        z = H.embedding_b64([0.25] * 32)
        for name in ("sqlite", "pg"):
            d = self.daemons[name]
            body = {"items": [{"id": "retried", "embedding_b64": z}]}
            first = d.score(body, headers={"Idempotency-Key": "retry-1"})
            again = d.score(body, headers={"Idempotency-Key": "retry-1"})
            self.assertEqual((first.status, again.status), (200, 200), (name, again.body[:300]))
            self.assertEqual(first.json["results"][0]["decision_id"], again.json["results"][0]["decision_id"], name)
            self.assertEqual(first.json["request_id"], again.json["request_id"], name)

    def test_z_restart_comes_back_with_the_activated_version(self):
        """The activations read back at start-up (admin_events, details as JSON text)."""
        d = self.daemons["pg"]
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "2"}).status, 200)
        d.restart()
        r = d.score({"items": [{"id": "after-restart", "embedding_b64": H.embedding_b64([0.0] * 32)}]})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["model"]["version"], "2")
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "1"}).status, 200)
        d.restart()
        r = d.score({"items": [{"id": "after-restart", "embedding_b64": H.embedding_b64([0.0] * 32)}]})
        self.assertEqual(r.json["model"]["version"], "1")


POPULATE_100K_SQL = """
INSERT INTO decisions
SELECT g, 'id-' || g,
  to_char(timestamp '2026-01-01' + g * interval '1 second' - (g % 13) * interval '3 second', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
  'req-' || (g / 2), 'item-' || (g % 5000), (ARRAY['tox', 'spam', 'nsfw'])[1 + g % 3],
  (CASE WHEN g < 20000 THEN 'old' ELSE (g % 4)::text END), 'sha',
  (ARRAY['ok', 'insult', 'threat', 'spam', 'obscene'])[1 + (g * 7) % 5] || (CASE WHEN g < 100 THEN '-rare' ELSE '' END),
  g % 5, '{"ok":0.5}', (g % 1000) / 1000.0,
  CASE WHEN g % 10 = 0 THEN 'block' WHEN g % 10 = 1 THEN 'review' ELSE 'allow' END,
  '{}', 0.5, 0.9, '\\x0000803f'::bytea, 'in', g % 900, NULL, NULL
FROM generate_series(1, 100000) g;
INSERT INTO contests SELECT g, 'c-' || g, 'id-' || (g * 37), '2026-03-01T00:00:00.000000Z', 'r', NULL, 'why'
FROM generate_series(1, 2000) g;
INSERT INTO resolutions SELECT g, 'c-' || (g * 2), '2026-03-02T00:00:00.000000Z', 'b', NULL, 'upheld', NULL, 'n'
FROM generate_series(1, 700) g;
UPDATE fleet_counters SET decisions = 100000, contests = 2000, resolutions = 700;
"""


class PgListsAtScaleTest(unittest.TestCase):
    """On 100k decisions: every page of every list query uses an index and sorts at most a few
    pages of rows (the plans of the daemon's own statements, logged by auto_explain with actual row
    counts in the cluster's log); a cursor walk skips no row while writers commit."""

    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_models(TINY)
        cls.cluster = pg_cluster.PgCluster()
        cls.addClassCleanup(cls.cluster.drop)
        cls.uri = cls.cluster.new_database()
        cls.log = "/var/log/postgresql/postgresql-%s-%s.log" % (pg_cluster.PG_VERSION, cls.cluster.name)
        if not os.access(cls.log, os.R_OK):
            raise unittest.SkipTest("the cluster's log %s cannot be read" % cls.log)
        cls.d = H.Daemon(models=tiny_models_dir(H.tempfile.mkdtemp(prefix="pgcld-pgplans-")), auth=False,
                         db_path=cls.uri, default_model="tiny", args=["--input-retention-days", "36500"])
        cls.addClassCleanup(cls.d.cleanup)
        cls.d.start()
        cls.d.stop()
        import psycopg2
        conn = psycopg2.connect(cls.uri)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(POPULATE_100K_SQL)
            cur.execute("VACUUM ANALYZE")
            dbname = cls.uri.rsplit("/", 1)[1]
            for setting in ("session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0",
                            "auto_explain.log_analyze = on", "auto_explain.log_timing = off",
                            "auto_explain.log_format = json", "auto_explain.log_nested_statements = on"):
                cur.execute("ALTER DATABASE %s SET %s" % (dbname, setting))
        conn.close()
        cls.d.start()

    def plans_of(self, path):
        """The JSON plans the cluster logged while the daemon answered GET path."""
        with open(self.log, encoding="utf-8", errors="replace") as f:
            f.seek(0, os.SEEK_END)
            start = f.tell()
        r = self.d.get(path)
        self.assertEqual(r.status, 200, r.body[:300])
        H.wait_until(lambda: os.path.getsize(self.log) > start, timeout=5)
        with open(self.log, encoding="utf-8", errors="replace") as f:
            f.seek(start)
            text = f.read()
        plans, decoder, at = [], json.JSONDecoder(), 0
        while (at := text.find("plan:", at)) >= 0:
            at = text.index("{", at)
            plan, at = decoder.raw_decode(text, at)
            plans.append(plan)
        return plans

    def nodes(self, node):
        yield node
        for child in node.get("Plans", []):
            yield from self.nodes(child)

    def test_cursor_walk_while_writers_commit(self):
        """Two writers commit rows through the fleet order (fleet_counters' lock held until COMMIT,
        as audit_pg_writer.c does) while a reviewer walks the list newest first: the walk gives every
        seq below its first page's top exactly once, in order, none skipped."""
        import psycopg2
        stop = threading.Event()

        def writer(name):
            conn = psycopg2.connect(self.uri)
            try:
                while not stop.is_set():
                    with conn, conn.cursor() as cur:
                        cur.execute("UPDATE fleet_counters SET decisions = decisions + 3 RETURNING decisions")
                        last = cur.fetchone()[0]
                        for seq in range(last - 2, last + 1):
                            cur.execute("INSERT INTO decisions SELECT %s, %s, '2026-02-01T00:00:00.000000Z', 'r', 'i',"
                                        " 'tox', '9', 's', 'ok', 0, '{}', NULL, 'allow', '{}', NULL, NULL, '', 'x',"
                                        " 1, NULL, NULL", (seq, "late-%s-%d" % (name, seq)))
                        # the point: it commits late, holding the fleet order meanwhile, so that
                        # the other writer's rows wait behind it (not a wait for a condition)
                        time.sleep(0.02)
            finally:
                conn.close()

        threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        check = psycopg2.connect(self.uri)
        check.autocommit = True

        def newest():
            with check.cursor() as cur:
                cur.execute("SELECT max(seq) FROM decisions")
                return cur.fetchone()[0]

        try:
            H.wait_until(lambda: newest() > 100000, timeout=10)
            seqs, cursor = [], None
            for _ in range(12):
                page = json.loads(self.d.get("/v1/decisions" + q(limit=150, **({"cursor": cursor} if cursor else {})))
                                  .body)
                seqs += [r["seq"] for r in page["decisions"]]
                cursor = page["next_cursor"]
                committed = newest()
                H.wait_for(lambda: newest() > committed, "a writer commits between two pages of the walk",
                           interval=0.005)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertGreater(newest(), seqs[0], "rows committed during the walk")
        check.close()
        self.assertGreater(seqs[0], 100000)
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] - len(seqs), -1)))

    def test_every_list_page_uses_an_index(self):
        cursor_seq = 30000  # a page deep in the table, below rows of every kind
        cases = [{}, {"label": "insult"}, {"label": "ok-rare"}, {"decision": "block"}, {"decision": "review"},
                 {"model": "tox", "version": "old"}, {"model": "spam"}, {"item_id": "item-42"},
                 {"request_id": "req-4000"}, {"since": "2026-01-01T03:00:00Z", "until": "2026-01-01T04:00:00Z"},
                 {"since": "2026-01-01T01:00:00Z"}, {"until": "2026-01-01T00:30:00Z"},
                 {"contest": "open"}, {"contest": "resolved"}, {"contest": "contested"}, {"contest": "none"},
                 {"label": "threat", "since": "2026-01-01T05:00:00Z", "until": "2026-01-01T06:00:00Z"}]
        for f in cases:
            with self.subTest(filters=f):
                first = json.loads(self.d.get("/v1/decisions" + q(**f, limit=50)).body)
                paths = ["/v1/decisions" + q(**f, limit=50)]
                if first["next_cursor"]:
                    paths.append("/v1/decisions" + q(**f, limit=50, cursor=first["next_cursor"]))
                for path in paths:
                    plans = [p for p in self.plans_of(path) if "FROM decisions d WHERE d.seq IN" in p["Query Text"]]
                    self.assertEqual(len(plans), 1, path)
                    nodes = list(self.nodes(plans[0]["Plan"]))
                    scans = [n for n in nodes if n.get("Relation Name") == "decisions"]
                    self.assertTrue(scans and all("Index" in n["Node Type"] for n in scans),
                                    (path, [(n["Node Type"], n.get("Index Name")) for n in scans]))
                    for n in nodes:  # a sort takes at most a few pages (of several model versions), the
                        # contests, or a time window's rows when fewer than the window probe's bound
                        if n["Node Type"] == "Sort":
                            taken = sum(c["Actual Rows"] * c.get("Actual Loops", 1) for c in n.get("Plans", []))
                            self.assertLessEqual(taken, 10000, path)
                    read = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) + n.get("Rows Removed by Filter", 0)
                               for n in scans)
                    self.assertLess(read, 20000, (path, "rows read from decisions"))
                    if os.environ.get("PGCLD_SHOW_PLANS"):
                        print(path, read, [(n["Node Type"], n.get("Index Name"), n.get("Actual Rows")) for n in nodes
                                           if "Scan" in n["Node Type"] or n["Node Type"] == "Sort"])


def normal_ts(text):
    """An RFC 3339 'Z' time of the tests in the columns' format (6 fraction digits)."""
    base, _, frac = text.rstrip("Z").partition(".")
    return "%s.%sZ" % (base, (frac + "000000")[:6])


if __name__ == "__main__":
    unittest.main()
