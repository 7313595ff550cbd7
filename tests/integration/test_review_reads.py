"""Reviewer reads over real HTTP: the full record of a decision (every field equal to what
/v1/score answered), effective outcomes for every status, every list filter, cursor pagination
(also while decisions are being inserted), NDJSON and CSV exports, figures, the contest queue,
statements of reasons, roles and every 400/404.

Contests and resolutions are inserted directly with H.db_insert_events (valid rows, controlled timestamps),
so these tests do not depend on the contest endpoints.

Run: python3 tests/integration/test_review_reads.py (PGCLD_BIN selects the binary).
"""
import base64
import csv
import datetime as dt
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import unittest
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

TINY = "tiny_binary"
WINDOW_DAYS = 30
WEIRD_ID = 'quote, "comma"\nand a newline'


def tiny_models_dir(parent):
    root = os.path.join(parent, "models")
    for v in ("1", "2"):
        shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", v))
    return root


def ts(t):
    """The audit columns' timestamp format."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s):
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)


def q(**params):
    return "?" + urllib.parse.urlencode(params) if params else ""


def f32(values):
    return np.asarray(values, dtype=np.float32)


class ReviewReadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-reads-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = d = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny",
                                        args=["--contest-window-days", str(WINDOW_DAYS)])
        cls.reviewer_key = d.keys["reviewer"]
        golden = [g["embedding_b64"] for g in H.load_config(TINY)["golden"]]  # block, review, allow
        cls.golden = [np.frombuffer(base64.b64decode(b), "<f4") for b in golden]
        cls.scored = {}  # decision_id -> (result, request answer, embedding)

        def score(items, embeddings):
            r = d.score({"items": items})
            assert r.status == 200, r
            for res, z in zip(r.json["results"], embeddings):
                cls.scored[res["decision_id"]] = (res, r.json, z)
            return r.json

        def activate(v):
            r = d.post("/v1/admin/models/tiny/activate", {"version": v})
            assert r.status == 200, r

        def golden_items(prefix):
            return [{"id": f"{prefix}-{k}", "embedding_b64": b}
                    for k, b in zip(("block", "review", "allow"), golden)]

        activate("1")
        za = H.random_embeddings(12, 32, 11)
        cls.req_a = score(H.json_items(za, "a"), za)
        cls.req_g = score(golden_items("g") + [{"id": WEIRD_ID, "embedding": H.embedding_json(za[0])}],
                          cls.golden + [za[0]])
        activate("2")
        zb = H.random_embeddings(10, 32, 12)
        items_b = H.json_items(zb, "b")
        items_b[0]["id"] = "a-0"  # the same item scored again: item_id matches two decisions
        cls.req_b = score(items_b, zb)
        cls.req_h = score(golden_items("h"), cls.golden)
        cls.req_k = score(golden_items("k"), cls.golden)
        cls.by_item = {}
        for did, (res, _, _) in cls.scored.items():
            cls.by_item.setdefault(res["id"], []).append(did)

        # Contests, filed and resolved at controlled times (inserted in filing / resolving order).
        now = dt.datetime.now(dt.timezone.utc)
        h = lambda x: now - dt.timedelta(hours=x)  # noqa: E731
        one = lambda item: cls.by_item[item][0]  # noqa: E731
        cls.key_id = cls.reviewer_key[:14]
        contests = [  # name, decision, filed_at
            ("k1", one("k-block"), h(10)), ("hb", one("h-block"), h(8)), ("ha", one("h-allow"), h(7)),
            ("hr", one("h-review"), h(6)), ("gr", one("g-review"), h(5)), ("gb", one("g-block"), h(3)),
            ("k2", one("k-block"), h(2)),
        ]
        resolutions = [  # contest, resolved_at, outcome, corrected_label
            ("k1", h(9), "upheld", None), ("hb", h(7.5), "overturned", "neg"), ("ha", h(6.75), "overturned", None),
            ("hr", h(5), "overturned", None), ("gr", h(4), "upheld", None),
        ]
        cls.contest_ids = {}
        contest_rows = []
        for name, did, filed in contests:
            cid = str(uuid.uuid4())
            cls.contest_ids[name] = cid
            contest_rows.append((cid, did, ts(filed), f"test-reviewer ({cls.key_id})", cls.key_id, f"reason for {name}"))
        H.db_insert_events(d.db_path, "contests",
                           "INSERT INTO contests (contest_id, decision_id, filed_at, filed_by, filer_key_id, reason)"
                           " VALUES (?,?,?,?,?,?)", contest_rows)
        H.db_insert_events(d.db_path, "resolutions",
                           "INSERT INTO resolutions (contest_id, resolved_at, resolved_by, resolver_key_id,"
                           " outcome, corrected_label, note) VALUES (?,?,?,?,?,?,?)",
                           [(cls.contest_ids[name], ts(at), "lead (pgcld_lead0000)", "pgcld_lead0000", outcome,
                             corrected, f"note for {name}") for name, at, outcome, corrected in resolutions])

    # -- helpers
    def get(self, path, key=None, **kw):
        return self.daemon.get(path, key=self.reviewer_key if key is None else key, **kw)

    def ok(self, path, **kw):
        r = self.get(path, **kw)
        self.assertEqual(r.status, 200, f"{path}: {r}")
        return r.json

    def walk(self, params, limit=7):
        """Every page of /v1/decisions with params; returns the summaries in order."""
        out, cursor, pages = [], None, 0
        while True:
            p = dict(params, limit=limit)
            if cursor:
                p["cursor"] = cursor
            page = self.ok("/v1/decisions" + q(**p))
            self.assertLessEqual(len(page["decisions"]), limit)
            out += page["decisions"]
            cursor = page["next_cursor"]
            pages += 1
            if not cursor:
                return out
            self.assertLess(pages, 10000)

    def db_rows(self):
        """Every decision with its contest status, newest first, from SQLite."""
        d = self.daemon
        rows = d.query("SELECT * FROM decisions ORDER BY seq DESC")
        contests = d.query("SELECT c.decision_id, r.seq AS rseq FROM contests c"
                           " LEFT JOIN resolutions r ON r.contest_id = c.contest_id")
        status = {}
        for c in contests:
            cur = status.get(c["decision_id"], "resolved")
            status[c["decision_id"]] = "open" if c["rseq"] is None or cur == "open" else "resolved"
        for r in rows:
            r["contest_status"] = status.get(r["decision_id"], "none")
        return rows

    def one(self, item):
        return self.by_item[item][0]

    # -- the full record
    def test_full_record_equals_the_score_answer(self):
        d = self.daemon
        models = d.get("/v1/models").json
        shas = {(m["name"], v["version"]): v["sha256"] for m in models["models"] for v in m["versions"]
                if "sha256" in v}
        for did, (res, answer, z) in list(self.scored.items())[::3]:
            rec = self.ok(f"/v1/decisions/{did}")
            row = d.query("SELECT * FROM decisions WHERE decision_id = ?", (did,))[0]
            self.assertEqual(rec["decision_id"], did)
            self.assertEqual(rec["seq"], row["seq"])
            self.assertEqual(rec["item_id"], res["id"])
            self.assertEqual(rec["request_id"], answer["request_id"])
            self.assertEqual((rec["model_name"], rec["model_version"]), (answer["model"]["name"],
                                                                         answer["model"]["version"]))
            self.assertEqual(rec["model_sha256"], answer["model"]["sha256"])
            self.assertEqual(rec["model_sha256"], shas.get(("tiny", rec["model_version"]), rec["model_sha256"]))
            for k in ("label", "label_index", "probabilities", "toxicity", "decision", "vector"):
                self.assertEqual(rec[k], res[k], k)
            self.assertEqual(len(rec["vector"]), 8)
            self.assertEqual(rec["policy"], answer["policy"])
            self.assertEqual((rec["t_review"], rec["t_block"]), (answer["policy"]["t_review"],
                                                                 answer["policy"]["t_block"]))
            self.assertEqual(rec["input_sha256"], H.input_sha256(z))
            self.assertEqual(rec["created_at"], row["created_at"])
            self.assertRegex(rec["created_at"], H.CREATED_AT_RE)
            self.assertEqual(rec["latency_us"], row["latency_us"])
            self.assertNotIn("input", rec)
            self.assertEqual(rec["input_stored"], row["input_dtype"])
            self.assertIn(rec["input_stored"], ("f16", "f32"))
            self.assertEqual(rec["provenance"], {
                "model_name": "tiny", "model_version": rec["model_version"], "model_sha256": rec["model_sha256"],
                "request_id": answer["request_id"], "item_id": res["id"], "input_sha256": H.input_sha256(z),
                "created_at": row["created_at"], "latency_us": row["latency_us"]})
            # encoding version 2 (the default): the entry of the commit whose run holds the row
            # (on PostgreSQL entries are numbered per writer: the run names its writer's chain)
            chain = d.query(("SELECT c.writer_id, c.seq, c.hash FROM audit_chain_runs AS u JOIN audit_chain AS c"
                             " ON c.writer_id = u.writer_id AND c.seq = u.entry_seq" if d.on_postgres else
                             "SELECT c.seq, c.hash FROM audit_chain_runs AS u JOIN audit_chain AS c ON c.seq ="
                             " u.entry_seq") +
                            " WHERE u.kind = 'decisions' AND u.first_row_seq <= ?1 AND"
                            " ?1 < u.first_row_seq + u.n", (row["seq"],))
            self.assertEqual(rec["chain"], chain[0] if chain else None)
            self.assertIsNotNone(rec["chain"], "the writer chains every decision")
            self.assertEqual(list(f32(rec["vector"])), list(H.blob_vector(row["vector"])))

    def test_unknown_decision_is_404(self):
        for path in ("/v1/decisions/no-such-id", "/v1/decisions/01a1fdb6-41b0-7001-97cf-8022ef6c65f4",
                     "/v1/decisions/no-such-id/statement"):
            r = self.get(path)
            self.assertEqual(r.status, 404, r)
            self.assertEqual(r.error_code(), "decision_not_found")

    # -- effective outcomes and contest history
    def test_effective_outcomes(self):
        cases = {  # item: (status, label, decision)
            "g-allow": ("original", "neg", "allow"),
            "g-block": ("contested", "pos", "block"),
            "g-review": ("upheld", "pos", "review"),
            "h-block": ("overturned", "neg", "allow"),    # corrected label given; removal reinstated
            "h-allow": ("overturned", "neg", "review"),   # no corrected label; an allow goes to review
            "h-review": ("overturned", "pos", "allow"),   # a hold is released
            "k-block": ("contested", "pos", "block"),     # resolved once, then contested again
        }
        for item, (status, label, decision) in cases.items():
            rec = self.ok(f"/v1/decisions/{self.one(item)}")
            eff = rec["effective_outcome"]
            self.assertEqual((eff["status"], eff["label"], eff["decision"]), (status, label, decision), item)
            # the decision row itself never changes
            res = self.scored[self.one(item)][0]
            self.assertEqual((rec["label"], rec["decision"]), (res["label"], res["decision"]))
        rec = self.ok(f"/v1/decisions/{self.one('k-block')}")
        self.assertEqual([c["contest_id"] for c in rec["contests"]],
                         [self.contest_ids["k1"], self.contest_ids["k2"]])  # oldest first
        first, second = rec["contests"]
        self.assertEqual(first["resolution"]["outcome"], "upheld")
        self.assertEqual(first["resolution"]["note"], "note for k1")
        self.assertIsNone(second["resolution"])
        self.assertEqual(second["reason"], "reason for k2")
        self.assertEqual(rec["contest_status"], "open")
        self.assertEqual(rec["effective_outcome"]["contest_id"], self.contest_ids["k2"])
        rec = self.ok(f"/v1/decisions/{self.one('h-block')}")
        self.assertEqual(rec["contests"][0]["resolution"]["corrected_label"], "neg")
        self.assertEqual(self.ok(f"/v1/decisions/{self.one('g-allow')}")["contests"], [])

    # -- lists
    def check_filter(self, params, predicate, limit=7):
        expected = [r["decision_id"] for r in self.db_rows() if predicate(r)]
        got = self.walk(params, limit)
        ids = [x["decision_id"] for x in got]
        self.assertEqual(ids, expected, params)
        seqs = [x["seq"] for x in got]
        self.assertEqual(seqs, sorted(seqs, reverse=True))
        return got

    def test_every_filter(self):
        rows = self.db_rows()
        created = sorted({r["created_at"] for r in rows})
        since, until = created[1], created[3]
        req_id = self.req_b["request_id"]
        trace_b = [r["trace_id"] for r in rows if r["request_id"] == req_id][0]
        cases = [
            ({}, lambda r: True),
            ({"model": "tiny"}, lambda r: True),
            ({"model": "nope"}, lambda r: False),
            ({"model": "tiny", "version": "1"}, lambda r: r["model_version"] == "1"),
            ({"model": "tiny", "version": "2"}, lambda r: r["model_version"] == "2"),
            ({"label": "pos"}, lambda r: r["label"] == "pos"),
            ({"decision": "block"}, lambda r: r["decision"] == "block"),
            ({"decision": "allow"}, lambda r: r["decision"] == "allow"),
            ({"item_id": "a-0"}, lambda r: r["item_id"] == "a-0"),
            ({"item_id": WEIRD_ID}, lambda r: r["item_id"] == WEIRD_ID),
            ({"request_id": req_id}, lambda r: r["request_id"] == req_id),
            ({"trace_id": trace_b}, lambda r: r["trace_id"] == trace_b),
            ({"trace_id": trace_b, "label": "pos"}, lambda r: r["trace_id"] == trace_b and r["label"] == "pos"),
            ({"trace_id": "0" * 31 + "1"}, lambda r: False),
            ({"since": since}, lambda r: r["created_at"] >= since),
            ({"until": until}, lambda r: r["created_at"] < until),
            ({"since": since, "until": until}, lambda r: since <= r["created_at"] < until),
            ({"contest": "open"}, lambda r: r["contest_status"] == "open"),
            ({"contest": "resolved"}, lambda r: r["contest_status"] == "resolved"),
            ({"contest": "contested"}, lambda r: r["contest_status"] != "none"),
            ({"contest": "none"}, lambda r: r["contest_status"] == "none"),
            ({"label": "pos", "decision": "review"}, lambda r: r["label"] == "pos" and r["decision"] == "review"),
            ({"model": "tiny", "version": "2", "contest": "contested"},
             lambda r: r["model_version"] == "2" and r["contest_status"] != "none"),
            ({"model": "tiny", "label": "neg", "since": since},
             lambda r: r["label"] == "neg" and r["created_at"] >= since),
            ({"contest": "none", "until": until}, lambda r: r["contest_status"] == "none" and r["created_at"] < until),
        ]
        for params, pred in cases:
            with self.subTest(params=params):
                got = self.check_filter(params, pred)
                for x in got:
                    self.assertEqual(set(x), {"decision_id", "seq", "created_at", "item_id", "request_id",
                                              "model_name", "model_version", "label", "decision", "toxicity",
                                              "contest_status", "trace_id", "content_date", "territorial_scope",
                                              "content_language"})
        self.assertGreater(len(self.walk({"item_id": "a-0"})), 1)
        # a time with an offset means the same instant as its UTC form
        t = parse_ts(since)
        plus2 = (t + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+02:00"
        self.assertEqual(self.walk({"since": plus2}), self.walk({"since": since}))
        raw = f"/v1/decisions?since={plus2}&limit=1000"  # a bare '+' decodes to a space
        self.assertEqual(self.ok(raw)["decisions"], self.walk({"since": since}, 1000))
        summary = {x["decision_id"]: x for x in self.walk({}, 1000)}
        row = [r for r in rows if r["item_id"] == "h-block"][0]
        self.assertEqual(summary[row["decision_id"]]["contest_status"], "resolved")
        self.assertEqual(summary[self.one("g-block")]["contest_status"], "open")

    def test_pagination_walks_every_row_once(self):
        total = self.daemon.count()
        for limit in (1, 3, 100, 1000):
            got = self.walk({}, limit)
            ids = [x["decision_id"] for x in got]
            self.assertEqual(len(ids), total)
            self.assertEqual(len(set(ids)), total)
        page = self.ok("/v1/decisions")
        self.assertEqual(len(page["decisions"]), min(100, total))  # the default limit
        exact = self.ok("/v1/decisions" + q(limit=total))
        self.assertIsNone(exact["next_cursor"])  # no empty last page

    def test_pagination_under_concurrent_inserts(self):
        d = self.daemon
        for params in ({}, {"model": "tiny"}, {"decision": "allow"}):
            with self.subTest(params=params):
                before = set(r["decision_id"] for r in d.query("SELECT decision_id, decision FROM decisions")
                             if "decision" not in params or r["decision"] == params["decision"])
                stop, started, errors, added = threading.Event(), threading.Event(), [], []

                def writer():
                    i = 0
                    while not stop.is_set():
                        r = d.score({"items": H.json_items(H.random_embeddings(4, 32, 5000 + i), f"w{i}")})
                        if r.status != 200:
                            errors.append(r)
                        else:
                            added.extend(x["decision_id"] for x in r.json["results"])
                        started.set()
                        i += 1

                t = threading.Thread(target=writer)
                t.start()
                try:
                    started.wait(30)
                    seen = [x["decision_id"] for x in self.walk(params, 2)]
                finally:
                    stop.set()
                    t.join()
                self.assertEqual(errors, [])
                self.assertGreater(len(added), 0, "the writer should have scored while the walk ran")
                self.assertEqual(len(seen), len(set(seen)), "a decision appeared twice")
                self.assertEqual(before - set(seen), set(), "a decision that existed before the walk is missing")

    # -- export
    def export_expected(self, since=None, until=None):
        rows = [r for r in reversed(self.db_rows())
                if (since is None or r["created_at"] >= since) and (until is None or r["created_at"] < until)]
        return sorted(rows, key=lambda r: (r["created_at"], r["seq"]))

    def check_export_row(self, got, row):
        self.assertEqual(got["decision_id"], row["decision_id"])
        for k in ("seq", "created_at", "item_id", "request_id", "model_name", "model_version", "label", "decision",
                  "contest_status"):
            self.assertEqual(got[k], row[k], k)
        self.assertEqual(np.float32(got["toxicity"]), np.float32(row["toxicity"]))
        self.assertEqual(got["probabilities"], json.loads(row["probabilities"]))
        self.assertEqual(list(f32(got["vector"])), list(H.blob_vector(row["vector"])))
        res = self.scored.get(row["decision_id"], (None,))[0]
        if res:
            self.assertEqual(got["vector"], res["vector"])

    def test_export_ndjson(self):
        r = self.get("/v1/audit/export")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.content_type, "application/x-ndjson")
        self.assertTrue(r.headers.get("Content-Disposition", "").startswith("attachment"), r.headers)
        lines = r.body.decode().splitlines()
        expected = self.export_expected()
        self.assertEqual(len(lines), len(expected))
        for line, row in zip(lines, expected):
            self.check_export_row(json.loads(line), row)
        created = sorted({x["created_at"] for x in expected})
        since, until = created[1], created[-2]
        r = self.get("/v1/audit/export" + q(since=since, until=until, format="ndjson"))
        got = [json.loads(x) for x in r.body.decode().splitlines()]
        self.assertEqual([x["decision_id"] for x in got],
                         [x["decision_id"] for x in self.export_expected(since, until)])
        r = self.get("/v1/audit/export" + q(since=H.timestamp(86400)))  # tomorrow: after every row
        self.assertEqual((r.status, r.body), (200, b""))

    def test_export_csv(self):
        r = self.get("/v1/audit/export" + q(format="csv"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.content_type, "text/csv")
        self.assertIn("attachment", r.headers.get("Content-Disposition", ""))
        text = r.body.decode()
        self.assertTrue(text.endswith("\r\n"))
        records = list(csv.reader(io.StringIO(text, newline="")))
        header, body = records[0], records[1:]
        self.assertEqual(header, ["decision_id", "seq", "created_at", "item_id", "request_id", "model_name",
                                  "model_version", "label", "decision", "toxicity", "contest_status",
                                  "probabilities", "vector"])
        expected = self.export_expected()
        self.assertEqual(len(body), len(expected))
        for rec, row in zip(body, expected):
            got = dict(zip(header, rec))
            got["seq"] = int(got["seq"])
            got["toxicity"] = float(got["toxicity"])
            got["probabilities"] = json.loads(got["probabilities"])
            got["vector"] = json.loads(got["vector"])
            self.check_export_row(got, row)
        self.assertIn(WEIRD_ID, [rec[3] for rec in body])  # RFC 4180 quoting round-trips
        self.assertIn('"quote, ""comma""\nand a newline"', text)

    # -- figures
    def check_median(self, got, resolved):
        """got: the API's median time to resolution of these resolved contests (None when none)."""
        if not resolved:
            self.assertIsNone(got)
            return
        med = statistics.median((parse_ts(c["resolved_at"]) - parse_ts(c["filed_at"])).total_seconds()
                                for c in resolved)
        self.assertAlmostEqual(got, med, delta=0.01)

    def test_stats(self):
        rows = self.db_rows()
        d = self.daemon
        contests = d.query("SELECT c.contest_id, c.filed_at, c.decision_id, r.resolved_at, r.outcome FROM contests c"
                           " LEFT JOIN resolutions r ON r.contest_id = c.contest_id")
        version = {r["decision_id"]: r["model_version"] for r in rows}
        created = sorted({r["created_at"] for r in rows})
        for since, until in ((None, None), (created[1], created[4]), (None, created[3])):
            with self.subTest(since=since, until=until):
                params = {k: v for k, v in (("since", since), ("until", until)) if v}
                s = self.ok("/v1/audit/stats" + q(**params))
                sel = [r for r in rows if (not since or r["created_at"] >= since) and
                       (not until or r["created_at"] < until)]
                self.assertEqual((s["since"], s["until"]), (since, until))
                dec = s["decisions"]
                self.assertEqual(dec["total"], len(sel))
                for v in ("1", "2"):
                    n = sum(1 for r in sel if r["model_version"] == v)
                    got = [x["count"] for x in dec["by_model_version"] if x["model_version"] == v]
                    self.assertEqual(got, [n] if n else [])
                self.assertEqual(dec["by_label"], {lab: sum(1 for r in sel if r["label"] == lab)
                                                   for lab in {r["label"] for r in sel}})
                self.assertEqual(dec["by_decision"], {k: sum(1 for r in sel if r["decision"] == k)
                                                      for k in ("allow", "review", "block")})
                csel = [c for c in contests if (not since or c["filed_at"] >= since) and
                        (not until or c["filed_at"] < until)]
                resolved = [c for c in csel if c["resolved_at"]]
                con = s["contests"]
                self.assertEqual((con["filed"], con["resolved"], con["open"]),
                                 (len(csel), len(resolved), len(csel) - len(resolved)))
                self.check_median(con["median_resolution_seconds"], resolved)
                for x in con["overturn_rate_by_model_version"]:
                    mine = [c for c in resolved if version[c["decision_id"]] == x["model_version"]]
                    over = sum(1 for c in mine if c["outcome"] == "overturned")
                    self.assertEqual((x["model_name"], x["resolved"], x["overturned"]), ("tiny", len(mine), over))
                    if mine:
                        self.assertAlmostEqual(x["rate"], over / len(mine), places=6)
                # per version: the same versions in the same order, each with its own figures
                self.assertEqual([(x["model_name"], x["model_version"]) for x in con["by_model_version"]],
                                 [(x["model_name"], x["model_version"]) for x in con["overturn_rate_by_model_version"]])
                self.assertEqual(sorted({version[c["decision_id"]] for c in csel}),
                                 [x["model_version"] for x in con["by_model_version"]])
                for x in con["by_model_version"]:
                    filed = [c for c in csel if version[c["decision_id"]] == x["model_version"]]
                    done = [c for c in filed if c["resolved_at"]]
                    self.assertEqual((x["filed"], x["resolved"], x["open"], x["overturned"]),
                                     (len(filed), len(done), len(filed) - len(done),
                                      sum(1 for c in done if c["outcome"] == "overturned")))
                    self.check_median(x["median_resolution_seconds"], done)
        # contests counted by filed_at: a window holding only the last filing
        last = max(c["filed_at"] for c in contests)
        s = self.ok("/v1/audit/stats" + q(since=last))
        self.assertEqual((s["contests"]["filed"], s["contests"]["open"]), (1, 1))
        self.assertIsNone(s["contests"]["median_resolution_seconds"])

    # -- the contest queue
    def test_contest_queue(self):
        now = dt.datetime.now(dt.timezone.utc)
        page = self.ok("/v1/contests")  # default: open
        ids = [c["contest_id"] for c in page["contests"]]
        self.assertEqual(ids, [self.contest_ids["gb"], self.contest_ids["k2"]])  # oldest first
        self.assertIsNone(page["next_cursor"])
        first = page["contests"][0]
        self.assertEqual(first["decision_id"], self.one("g-block"))
        self.assertEqual((first["label"], first["decision"], first["model_name"], first["model_version"],
                          first["item_id"]), ("pos", "block", "tiny", "1", "g-block"))
        self.assertEqual(first["reason"], "reason for gb")
        self.assertIn(self.key_id, first["filed_by"])
        self.assertIsNone(first["resolution"])
        filed = parse_ts(first["filed_at"])
        self.assertEqual(parse_ts(first["deadline"]), filed + dt.timedelta(days=WINDOW_DAYS))
        self.assertAlmostEqual(first["age_seconds"], (now - filed).total_seconds(), delta=60)
        self.assertFalse(first["overdue"])

        resolved = self.ok("/v1/contests" + q(status="resolved"))["contests"]
        self.assertEqual([c["contest_id"] for c in resolved],
                         [self.contest_ids[k] for k in ("gr", "hr", "ha", "hb", "k1")])  # most recently resolved first
        self.assertEqual(resolved[3]["resolution"]["outcome"], "overturned")
        self.assertEqual(resolved[3]["resolution"]["corrected_label"], "neg")
        # paging through the resolved list one by one gives the same order
        walked, cursor = [], None
        while True:
            page = self.ok("/v1/contests" + q(status="resolved", limit=1, **({"cursor": cursor} if cursor else {})))
            walked += [c["contest_id"] for c in page["contests"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        self.assertEqual(walked, [c["contest_id"] for c in resolved])
        page = self.ok("/v1/contests" + q(limit=1))
        nxt = self.ok("/v1/contests" + q(limit=1, cursor=page["next_cursor"]))
        self.assertEqual([c["contest_id"] for c in page["contests"] + nxt["contests"]], ids)
        # an open cursor is not a resolved cursor
        r = self.get("/v1/contests" + q(status="resolved", cursor=page["next_cursor"]))
        self.assertEqual((r.status, r.error_code()), (400, "invalid_cursor"))

    # -- statements of reasons
    def test_statement(self):
        def statement(item):
            return self.ok(f"/v1/decisions/{self.one(item)}/statement")

        required = {"puid", "decision_visibility", "decision_ground", "incompatible_content_ground",
                    "incompatible_content_explanation", "category", "content_type", "automated_detection",
                    "automated_decision", "application_date", "decision_facts", "source_type"}
        for item in ("g-allow", "g-block", "g-review", "h-block", "h-allow", "k-block"):
            s = statement(item)
            self.assertTrue(required <= set(s), set(s) ^ required)
            rec = self.ok(f"/v1/decisions/{self.one(item)}")
            # h-block and h-allow: the first contest's resolution overturned the decision and put
            # the outcome in force; it has its own puid and starts on the resolution's date
            refiled = item in ("h-block", "h-allow")
            self.assertEqual(s["puid"], self.one(item) + ("-r1" if refiled else ""))
            self.assertEqual(s["application_date"],
                             (rec["contests"][0]["resolution"]["resolved_at"] if refiled else rec["created_at"])[:10])
            self.assertEqual(s["decision_ground"], "DECISION_GROUND_INCOMPATIBLE_CONTENT")
            self.assertEqual(s["category"], "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH")  # binary default
            self.assertEqual(s["content_type"], ["CONTENT_TYPE_TEXT"])
            self.assertEqual(s["automated_detection"], "Yes")
            self.assertEqual(s["source_type"], "SOURCE_VOLUNTARY")
            facts = s["decision_facts"]
            for part in ("'tiny'", f"'{rec['model_version']}'", rec["model_sha256"], "0.4", "0.7",
                         f"{rec['probabilities']['pos']:.4f}"):
                self.assertIn(part, facts)
            self.assertLessEqual(len(facts), 5000)
            text = json.dumps(s)
            for secret in (item, self.key_id, "test-reviewer", "lead (", rec["request_id"], "reason for",
                           "note for"):
                self.assertNotIn(secret, text, f"{item}: personal or internal data in the statement")
        self.assertEqual(statement("g-block")["decision_visibility"], ["DECISION_VISIBILITY_CONTENT_REMOVED"])
        self.assertEqual(statement("g-block")["automated_decision"], "AUTOMATED_DECISION_FULLY")  # contest open
        s = statement("g-review")
        self.assertEqual(s["decision_visibility"], ["DECISION_VISIBILITY_OTHER"])
        self.assertTrue(s["decision_visibility_other"])
        self.assertEqual(s["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")  # upheld by a human
        s = statement("g-allow")
        self.assertEqual(s["decision_visibility"], [])
        self.assertFalse(s["pgcld"]["restriction"])
        self.assertEqual(s["automated_decision"], "AUTOMATED_DECISION_FULLY")
        s = statement("h-block")  # overturned: the removal was lifted
        self.assertEqual(s["decision_visibility"], [])
        self.assertEqual(s["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")
        self.assertIn("overturned", s["decision_facts"])
        s = statement("h-allow")  # overturned allow: held for review
        self.assertEqual(s["decision_visibility"], ["DECISION_VISIBILITY_OTHER"])
        self.assertEqual(s["pgcld"]["decision_in_force"], "review")

    # -- roles and errors
    def test_roles(self):
        d = self.daemon
        did = self.one("g-block")
        reviewer_only = ["/v1/decisions", f"/v1/decisions/{did}", f"/v1/decisions/{did}/statement", "/v1/contests"]
        both = ["/v1/audit/stats", "/v1/audit/export"]
        for path in reviewer_only + both:
            with self.subTest(path=path):
                self.assertEqual(self.get(path).status, 200)
                r = self.get(path, key=d.keys["scorer"])
                self.assertEqual((r.status, r.error_code()), (403, "forbidden"))
                r = self.get(path, key="")
                self.assertEqual((r.status, r.error_code()), (401, "unauthorized"))
                r = self.get(path, key=d.keys["admin"])
                self.assertEqual(r.status, 200 if path in both else 403, r)

    def test_bad_parameters(self):
        page = self.ok("/v1/decisions" + q(limit=1))
        cursor = page["next_cursor"]
        tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        contest_cursor = self.ok("/v1/contests" + q(limit=1))["next_cursor"]
        bad = [
            ("/v1/decisions?colour=red", "invalid_request", "colour"),
            ("/v1/decisions?label=pos&label=neg", "invalid_request", "label"),
            ("/v1/decisions?limit=0", "invalid_request", "limit"),
            ("/v1/decisions?limit=1001", "invalid_request", "limit"),
            ("/v1/decisions?limit=ten", "invalid_request", "limit"),
            ("/v1/decisions?limit=", "invalid_request", "limit"),
            ("/v1/decisions?label=", "invalid_request", "label"),
            ("/v1/decisions?decision=maybe", "invalid_request", "decision"),
            ("/v1/decisions?contest=maybe", "invalid_request", "contest"),
            ("/v1/decisions?version=1", "invalid_request", "version"),
            ("/v1/decisions?since=2026-11-21", "invalid_request", "since"),
            ("/v1/decisions?since=2026-02-30T00:00:00Z", "invalid_request", "since"),
            ("/v1/decisions?since=2026-11-21T25:00:00Z", "invalid_request", "since"),
            ("/v1/decisions?until=2026-11-21T10:00:00", "invalid_request", "until"),
            ("/v1/decisions?until=yesterday", "invalid_request", "until"),
            ("/v1/decisions?since=2026-11-21T10:00:00Z&until=2026-11-20T10:00:00Z", "invalid_request", "until"),
            ("/v1/decisions?cursor=garbage", "invalid_cursor", "cursor"),
            (f"/v1/decisions?cursor={tampered}", "invalid_cursor", "cursor"),
            (f"/v1/decisions?cursor={contest_cursor}", "invalid_cursor", "cursor"),
            ("/v1/decisions?cursor=", "invalid_cursor", "cursor"),
            ("/v1/decisions/x?verbose=1", "invalid_request", "verbose"),
            ("/v1/audit/export?format=xml", "invalid_request", "format"),
            ("/v1/audit/export?since=soon", "invalid_request", "since"),
            ("/v1/audit/export?model=tiny", "invalid_request", "model"),
            ("/v1/audit/stats?until=2026-13-01T00:00:00Z", "invalid_request", "until"),
            ("/v1/audit/stats?format=csv", "invalid_request", "format"),
            ("/v1/contests?status=maybe", "invalid_request", "status"),
            ("/v1/contests?limit=5000", "invalid_request", "limit"),
            (f"/v1/contests?cursor={cursor}", "invalid_cursor", "cursor"),
        ]
        for path, code, field in bad:
            with self.subTest(path=path):
                r = self.get(path)
                self.assertEqual((r.status, r.error_code()), (400, code), r)
                self.assertEqual(r.json["error"].get("field"), field, r)
                self.assertIn("message", r.json["error"])
        # the good cursor still works
        self.assertEqual(self.get("/v1/decisions" + q(limit=1, cursor=cursor)).status, 200)

    def test_time_parsing(self):
        # offsets, fractions beyond microseconds (rounded up), lower-case t/z
        self.assertEqual(self.ok("/v1/audit/stats" + q(since="2026-01-01T01:00:00+01:00"))["since"],
                         "2026-01-01T00:00:00.000000Z")
        self.assertEqual(self.ok("/v1/audit/stats" + q(since="2026-01-01t00:00:00.1234561z"))["since"],
                         "2026-01-01T00:00:00.123457Z")
        self.assertEqual(self.ok("/v1/audit/stats" + q(until="2025-12-31T23:30:00.5-00:45"))["until"],
                         "2026-01-01T00:15:00.500000Z")
        self.assertEqual(self.ok("/v1/audit/stats" + q(since="2024-02-29T00:00:00Z"))["since"],
                         "2024-02-29T00:00:00.000000Z")


class LargeWindowTest(unittest.TestCase):
    """Time windows over more rows than the planner's probe (10,000), alone and with other
    filters, on decisions whose created_at does NOT follow seq for a third of them: every plan
    (seq walk, index top-N, seq bounds) must stay exact without relying on that order."""

    N = 24000

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-reads-large-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = d = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny")
        rng = np.random.default_rng(3)
        base = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
        vec = np.zeros(8, "<f4").tobytes()
        rows = []
        for i in range(cls.N):
            k = i if rng.random() > 0.33 else int(rng.integers(0, cls.N))  # a third out of order
            created = ts(base + dt.timedelta(milliseconds=k))
            label = "pos" if rng.random() < 0.3 else "neg"
            decision = ("block", "review", "allow")[int(rng.integers(0, 3))]
            rows.append((str(uuid.uuid4()), created, str(uuid.uuid4()), f"x-{i}", "tiny", str(1 + i % 2), "0" * 64,
                         label, int(label == "pos"), '{"neg":0.5,"pos":0.5}', 0.5, decision,
                         '{"kind":"threshold","label":"pos","t_block":0.7,"t_review":0.4}', 0.4, 0.7, vec, "0" * 64,
                         100))
        H.db_insert_events(
            d.db_path, "decisions",
            "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
            " vector, input_sha256, latency_us) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        cls.rows = d.query("SELECT seq, decision_id, created_at, label, decision, model_version FROM decisions"
                           " ORDER BY seq DESC")
        cls.base = base

    def at(self, ms):
        return ts(self.base + dt.timedelta(milliseconds=ms))

    def walk(self, params, limit, cursor=None):
        out = []
        while True:
            p = dict(params, limit=limit, **({"cursor": cursor} if cursor else {}))
            r = self.daemon.get("/v1/decisions" + q(**p), key=self.daemon.keys["reviewer"])
            self.assertEqual(r.status, 200, r)
            out += [x["decision_id"] for x in r.json["decisions"]]
            cursor = r.json["next_cursor"]
            if not cursor:
                return out

    def test_windows(self):
        cases = [
            ({"since": self.at(1000), "until": self.at(23000)}, lambda r: True),            # wide, alone
            ({"since": self.at(500)}, lambda r: True),                                       # open-ended
            ({"until": self.at(20000)}, lambda r: True),
            ({"since": self.at(11000), "until": self.at(11500)}, lambda r: True),           # narrow
            ({"since": self.at(1000), "until": self.at(23000), "label": "pos"}, lambda r: r["label"] == "pos"),
            ({"since": self.at(2000), "until": self.at(3000), "decision": "block"}, lambda r: r["decision"] == "block"),
            ({"since": self.at(1000), "model": "tiny"}, lambda r: True),                    # merged versions
            ({"since": self.at(1000), "until": self.at(9000), "model": "tiny", "version": "2"},
             lambda r: r["model_version"] == "2"),
        ]
        mid = self.rows[len(self.rows) // 2]["seq"]
        for params, pred in cases:
            with self.subTest(params=params):
                since, until = params.get("since"), params.get("until")
                want = [r for r in self.rows
                        if (not since or r["created_at"] >= since) and (not until or r["created_at"] < until) and
                        pred(r)]
                self.assertGreater(len(want), 100)
                self.assertEqual(self.walk(params, 1000), [r["decision_id"] for r in want])
                # resuming from a cursor in the middle of the table (a cursor belongs to its filters)
                ahead = sum(1 for r in want if r["seq"] >= mid)
                self.assertGreater(ahead, 0)
                self.assertEqual(self.walk(params, 700, cursor=self.cursor_below(params, ahead)),
                                 [r["decision_id"] for r in want if r["seq"] < mid])

    def cursor_below(self, params, ahead):
        """A cursor of the listing with params that resumes after its first `ahead` rows, taken from
        the daemon itself (pages of at most 1000 rows up to that one)."""
        cursor, left = None, ahead
        while left > 0:
            n = min(left, 1000)
            r = self.daemon.get("/v1/decisions" + q(**params, limit=n, **({"cursor": cursor} if cursor else {})),
                                key=self.daemon.keys["reviewer"]).json
            cursor, left = r["next_cursor"], left - n
        return cursor


class TimeOrderTest(unittest.TestCase):
    """Decisions written by the daemon have created_at in seq order, so time windows are read as
    seq ranges. A row that breaks that order (here inserted by hand, as an older pgcld or a clock
    stepped back across a restart could) must still be found: the daemon re-checks the order for
    new rows and falls back to its general plans."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-reads-order-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny")

    def ids(self, params):
        r = self.daemon.get("/v1/decisions" + q(limit=1000, **params), key=self.daemon.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.json["next_cursor"])
        return [x["decision_id"] for x in r.json["decisions"]]

    def test_out_of_order_row_is_found(self):
        d = self.daemon
        for i in range(4):
            self.assertEqual(d.score({"items": H.json_items(H.random_embeddings(5, 32, 70 + i), f"o{i}")}).status, 200)
        rows = d.query("SELECT seq, decision_id, created_at FROM decisions ORDER BY seq DESC")
        stamps = sorted({r["created_at"] for r in rows})
        window = {"since": stamps[0], "until": ts(parse_ts(stamps[-1]) + dt.timedelta(seconds=1))}
        self.assertEqual(self.ids(window), [r["decision_id"] for r in rows])  # the seq-range path
        self.assertEqual(self.ids(dict(window, label="pos")),
                         [r["decision_id"] for r in d.query("SELECT decision_id FROM decisions WHERE label = 'pos'"
                                                            " ORDER BY seq DESC")])
        # a new row stamped between two existing ones
        late = ts(parse_ts(stamps[1]) + dt.timedelta(microseconds=1))
        did = str(uuid.uuid4())
        H.db_insert_events(
            d.db_path, "decisions",
            "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
            " vector, input_sha256, latency_us) SELECT ?, ?, request_id, 'late', model_name, model_version,"
            " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
            " vector, input_sha256, latency_us FROM decisions WHERE seq = ?", [(did, late, rows[0]["seq"])])
        got = self.ids(window)
        self.assertEqual(got, [did] + [r["decision_id"] for r in rows])
        self.assertEqual(self.ids({"since": late, "until": stamps[2]}),
                         [did] + [r["decision_id"] for r in rows if late <= r["created_at"] < stamps[2]])


if __name__ == "__main__":
    H.main()
