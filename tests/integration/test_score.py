#!/usr/bin/python3
"""Happy-path scoring against a real pgcld: JSON and base64 inputs, every task, the audit DB,
restarts and migrations.

Run: /usr/bin/python3 tests/integration/test_score.py
"""

import base64
import calendar
import hashlib
import json
import math
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

ALL_MODELS = ["toxicity", "tiny_binary", "tiny_multi", "tiny_ordinal"]
# Generous limits so that 64 JSON-encoded 1024-d embeddings (~1.4 MB) fit whatever the defaults.
BIG_LIMITS = ["--max-body-bytes", str(16 * 1024 * 1024), "--max-batch", "1024"]

DECISION_COLUMNS = {
    "seq", "decision_id", "created_at", "request_id", "item_id", "model_name", "model_version",
    "model_sha256", "label", "label_index", "probabilities", "toxicity", "decision", "policy",
    "t_review", "t_block", "vector", "input_sha256", "latency_us",
}


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_created_at(s):
    """RFC 3339 'YYYY-MM-DDTHH:MM:SS.ffffffZ' -> unix seconds (float)."""
    base, frac = s[:-1].split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1e6


class ScoreChecks:
    """Assertions shared by the test classes (mixed into unittest.TestCase)."""

    daemon = None

    def assertJsonClose(self, got, want, tol=1e-9, path="$"):
        if isinstance(want, bool) or want is None or isinstance(want, str):
            self.assertEqual(got, want, path)
        elif isinstance(want, (int, float)):
            self.assertIsInstance(got, (int, float), path)
            self.assertNotIsInstance(got, bool, path)
            self.assertLessEqual(abs(got - want), tol, f"{path}: {got} != {want}")
        elif isinstance(want, list):
            self.assertIsInstance(got, list, path)
            self.assertEqual(len(got), len(want), path)
            for i, (g, w) in enumerate(zip(got, want)):
                self.assertJsonClose(g, w, tol, f"{path}[{i}]")
        elif isinstance(want, dict):
            self.assertIsInstance(got, dict, path)
            self.assertEqual(set(got), set(want), path)
            for k in want:
                self.assertJsonClose(got[k], want[k], tol, f"{path}.{k}")
        else:  # pragma: no cover
            self.fail(f"{path}: unexpected type {type(want)}")

    def score_ok(self, body, **kw):
        r = self.timed(lambda: self.daemon.score(body, **kw))
        self.assertEqual(r.status, 200, f"request failed: {r}")
        self.assertEqual(r.content_type, "application/json", r)
        self.assertIsInstance(r.json, dict, r)
        return r.json

    def timed(self, send):
        """send() (a request), with the wall-clock window [sent, answered] of a 200 recorded under
        its request_id: the decision ids and created_at of its answer must fall inside it."""
        t_sent = time.time()
        r = send()
        t_answered = time.time()
        if r.status == 200 and isinstance(r.json, dict) and "request_id" in r.json:
            if not hasattr(self, "windows"):
                self.windows = {}
            self.windows[r.json["request_id"]] = (t_sent, t_answered)
        return r

    def window_ms(self, resp):
        """The request's window in unix milliseconds, widened by 1 ms for the millisecond rounding
        of UUIDv7 (and its counter running into the next millisecond)."""
        w = getattr(self, "windows", {}).get(resp["request_id"])
        self.assertIsNotNone(w, "no time window recorded for this answer (send it with score_ok or timed)")
        return w[0] * 1000 - 1, w[1] * 1000 + 1

    def check_response(self, resp, model_name, item_ids, return_vector=True):
        """Checks every result against the checkpoint's config and the policy; returns results."""
        cfg = H.load_config(model_name)
        labels, d = cfg["labels"], cfg["dims"]["d"]
        self.assertRegex(resp["request_id"], H.UUID_RE)
        m = resp["model"]
        self.assertEqual(m["name"], model_name)
        self.assertEqual(m["version"], "1")
        self.assertEqual(m["task"], cfg["task"])
        self.assertEqual(m["sha256"],
                         file_sha256(os.path.join(H.version_dir(model_name), "model.safetensors")),
                         "model.sha256 should be the SHA-256 of model.safetensors")
        policy = resp["policy"]
        self.assertJsonClose(policy, cfg["decision_policy"])
        results = resp["results"]
        self.assertEqual([r["id"] for r in results], list(item_ids), "results not in item order")
        for i, r in enumerate(results):
            where = f"results[{i}]"
            self.assertRegex(r["decision_id"], H.UUID7_RE, where)
            self.assertEqual(set(r["probabilities"]), set(labels), where)
            probs = [r["probabilities"][lab] for lab in labels]
            for p in probs:
                self.assertIsInstance(p, (int, float), where)
                self.assertTrue(0.0 <= p <= 1.0, f"{where}: probability {p}")
            self.assertAlmostEqual(sum(probs), 1.0, delta=1e-5, msg=where)
            self.assertIsInstance(r["label_index"], int, where)
            self.assertNotIsInstance(r["label_index"], bool, where)
            self.assertTrue(0 <= r["label_index"] < len(labels), where)
            self.assertEqual(r["label"], labels[r["label_index"]], where)
            top2 = sorted(probs)[-2:]
            if top2[1] - top2[0] > 1e-6:
                self.assertEqual(r["label_index"], int(np.argmax(probs)),
                                 f"{where}: label is not the most probable class")
            if cfg["task"] == "binary":
                self.assertIn("toxicity", r, where)
                self.assertAlmostEqual(r["toxicity"], probs[1], delta=1e-6, msg=where)
            else:
                self.assertNotIn("toxicity", r, f"{where}: toxicity only for binary models")
            self.assertIn(r["decision"], ("allow", "review", "block"), where)
            if not H.near_policy_boundary(policy, labels, probs):
                self.assertEqual(r["decision"], H.policy_decision(policy, labels, probs),
                                 f"{where}: decision inconsistent with policy {policy}, "
                                 f"probabilities {r['probabilities']}")
            if return_vector:
                v = np.asarray(r["vector"], dtype=np.float64)
                self.assertEqual(v.shape, (d,), where)
                self.assertTrue(np.all(np.isfinite(v)), where)
                self.assertAlmostEqual(float(np.linalg.norm(v)), 1.0, delta=1e-5, msg=where)
            else:
                self.assertNotIn("vector", r, f"{where}: return_vector false but vector present")
        ids = [r["decision_id"] for r in results]
        self.assertEqual(len(set(ids)), len(ids), "decision_ids not unique")
        ms = [H.uuid7_millis(x) for x in ids]
        self.assertEqual(ms, sorted(ms), "decision_id timestamps go backwards within a batch")
        lo, hi = self.window_ms(resp)
        for x in ms:  # made between the request's sending and its answer
            self.assertTrue(lo <= x <= hi, f"decision_id timestamp {x} is outside the request's window [{lo}, {hi}] ms")
        return results

    def check_rows(self, resp, Z, item_ids, model_name):
        """The audit rows of one response: one per result, matching it column by column."""
        cfg = H.load_config(model_name)
        d = cfg["dims"]["d"]
        results = resp["results"]
        rows = self.daemon.rows_for(r["decision_id"] for r in results)
        self.assertEqual(set(rows), {r["decision_id"] for r in results},
                         "audit rows missing for some decision_ids")
        for i, r in enumerate(results):
            row = rows[r["decision_id"]]
            where = f"row for results[{i}]"
            self.assertEqual(row["item_id"], item_ids[i], where)
            self.assertEqual(row["request_id"], resp["request_id"], where)
            self.assertEqual(row["model_name"], resp["model"]["name"], where)
            self.assertEqual(row["model_version"], resp["model"]["version"], where)
            self.assertEqual(row["model_sha256"], resp["model"]["sha256"], where)
            self.assertEqual(row["label"], r["label"], where)
            self.assertEqual(row["label_index"], r["label_index"], where)
            self.assertEqual(row["decision"], r["decision"], where)
            self.assertJsonClose(json.loads(row["probabilities"]), r["probabilities"], 1e-6, where)
            if cfg["task"] == "binary":
                self.assertIsNotNone(row["toxicity"], where)
                self.assertAlmostEqual(row["toxicity"], r["toxicity"], delta=1e-6, msg=where)
            else:
                self.assertIsNone(row["toxicity"], where)
            self.assertJsonClose(json.loads(row["policy"]), resp["policy"], 1e-9, where)
            pol = resp["policy"]
            if pol["kind"] == "threshold":
                self.assertAlmostEqual(row["t_review"], pol["t_review"], delta=1e-9, msg=where)
                self.assertAlmostEqual(row["t_block"], pol["t_block"], delta=1e-9, msg=where)
            else:
                self.assertIsNone(row["t_review"], where)
                self.assertIsNone(row["t_block"], where)
            self.assertIsInstance(row["vector"], bytes, f"{where}: vector is not a BLOB")
            self.assertEqual(len(row["vector"]), 4 * d, f"{where}: vector BLOB length")
            blob = H.blob_vector(row["vector"])
            if "vector" in r:
                # the JSON numbers, rounded to float32, are exactly the stored float32 values
                returned = np.asarray(r["vector"], dtype=np.float64).astype(np.float32)
                self.assertTrue(np.array_equal(blob, returned),
                                f"{where}: vector BLOB differs from the returned vector beyond "
                                f"float32 rounding (max diff "
                                f"{float(np.max(np.abs(blob.astype(np.float64) - returned)))})")
            blob = blob.astype(np.float64)
            self.assertAlmostEqual(float(np.linalg.norm(blob)), 1.0, delta=1e-5, msg=where)
            self.assertEqual(row["input_sha256"], H.input_sha256(Z[i]), where)
            self.assertRegex(row["created_at"], H.CREATED_AT_RE, where)
            t_ms = parse_created_at(row["created_at"]) * 1000
            lo, hi = self.window_ms(resp)
            # committed after the decision id was made and before the answer left (UTC)
            self.assertTrue(H.uuid7_millis(r["decision_id"]) - 1 <= t_ms <= hi,
                            f"{where}: created_at {row['created_at']} is not between its decision_id's "
                            f"timestamp and the answer")
            self.assertIsInstance(row["latency_us"], int, where)
            self.assertGreaterEqual(row["latency_us"], 0, where)
        return rows


class ScoreTest(ScoreChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(*ALL_MODELS)
        cls.daemon = H.start_daemon(cls, models=ALL_MODELS, args=BIG_LIMITS)
        cls.tox_cfg = H.load_config("toxicity")
        cls.D = cls.tox_cfg["dims"]["D"]

    def toxicity_inputs(self, n, seed):
        """n float32 embeddings: the checkpoint's golden inputs first, then random ones."""
        goldens = [H.f32(np.frombuffer(base64.b64decode(g["embedding_b64"]), "<f4"))
                   for g in self.tox_cfg.get("golden", []) if "embedding_b64" in g]
        Z = H.random_embeddings(n, self.D, seed)
        for i, g in enumerate(goldens[:n // 2]):
            Z[i] = g
        # a spread of scales, so that the batch is not all one decision
        Z[n // 2:] *= np.linspace(0.5, 4.0, n - n // 2, dtype=np.float32)[:, None]
        return Z

    def run_batch(self, items, Z, model=None, return_vector=None, model_name="toxicity"):
        body = {"items": items}
        if model is not None:
            body["model"] = model
        if return_vector is not None:
            body["return_vector"] = return_vector
        before = self.daemon.count()
        resp = self.score_ok(body)
        ids = [it["id"] for it in items]
        self.check_response(resp, model_name, ids,
                            return_vector=True if return_vector is None else return_vector)
        self.assertEqual(self.daemon.count(), before + len(items),
                         "the audit DB should hold exactly one new row per item")
        self.check_rows(resp, Z, ids, model_name)
        return resp

    # ------------------------------------------------------------------ toxicity
    def test_json_batch_of_64(self):
        Z = self.toxicity_inputs(64, seed=1)
        resp = self.run_batch(H.json_items(Z, "json"), Z)
        self.assertEqual(len(resp["results"]), 64)

    def test_base64_batch_of_64(self):
        Z = self.toxicity_inputs(64, seed=2)
        resp = self.run_batch(H.b64_items(Z, "b64"), Z, model="toxicity")
        self.assertEqual(len(resp["results"]), 64)

    def test_json_and_base64_identical(self):
        Z = self.toxicity_inputs(16, seed=3)
        a = self.run_batch(H.json_items(Z, "same"), Z)
        b = self.run_batch(H.b64_items(Z, "same"), Z)
        for i, (ra, rb) in enumerate(zip(a["results"], b["results"])):
            ra, rb = dict(ra), dict(rb)
            self.assertNotEqual(ra.pop("decision_id"), rb.pop("decision_id"))
            self.assertEqual(ra, rb, f"item {i}: JSON and base64 of the same floats differ")
        rows_a = self.daemon.rows_for(r["decision_id"] for r in a["results"])
        rows_b = self.daemon.rows_for(r["decision_id"] for r in b["results"])
        for i, (ra, rb) in enumerate(zip(a["results"], b["results"])):
            sa = rows_a[ra["decision_id"]]["input_sha256"]
            sb = rows_b[rb["decision_id"]]["input_sha256"]
            self.assertEqual(sa, sb, f"item {i}: input_sha256 differs between JSON and base64")
            self.assertEqual(sa, H.input_sha256(Z[i]))
            self.assertEqual(rows_a[ra["decision_id"]]["vector"],
                             rows_b[rb["decision_id"]]["vector"])

    def test_mixed_json_and_base64_in_one_batch(self):
        Z = self.toxicity_inputs(6, seed=4)
        items = [{"id": f"m{i}", "embedding": H.embedding_json(z)} if i % 2 == 0 else
                 {"id": f"m{i}", "embedding_b64": H.embedding_b64(z)} for i, z in enumerate(Z)]
        self.run_batch(items, Z)

    def test_return_vector_false(self):
        Z = self.toxicity_inputs(8, seed=5)
        resp = self.run_batch(H.b64_items(Z, "nv"), Z, return_vector=False)
        for r in resp["results"]:
            self.assertNotIn("vector", r)

    def test_return_vector_true_explicit(self):
        Z = self.toxicity_inputs(2, seed=6)
        resp = self.run_batch(H.b64_items(Z, "v"), Z, return_vector=True)
        for r in resp["results"]:
            self.assertEqual(len(r["vector"]), self.tox_cfg["dims"]["d"])

    def test_default_model_is_toxicity(self):
        Z = self.toxicity_inputs(1, seed=7)
        resp = self.score_ok({"items": H.b64_items(Z)})
        self.assertEqual(resp["model"]["name"], "toxicity")

    def test_charset_parameter_accepted(self):
        Z = self.toxicity_inputs(1, seed=8)
        for ct in ("application/json; charset=utf-8", "application/json;charset=UTF-8"):
            r = self.daemon.score({"items": H.b64_items(Z)}, content_type=ct)
            self.assertEqual(r.status, 200, f"Content-Type {ct!r}: {r}")

    def test_integer_and_exponent_numbers(self):
        """JSON integers and exponent notation are numbers like any other."""
        z = np.zeros(self.D, dtype=np.float32)
        z[::3] = 1
        z[1::3] = -2
        z[2::7] = 0.0625
        as_floats = [float(v) for v in z]
        as_mixed = []
        for v in z:
            fv = float(v)
            as_mixed.append(int(fv) if fv.is_integer() else fv)
        text = json.dumps({"items": [{"id": "a", "embedding": as_floats},
                                     {"id": "b", "embedding": as_mixed}]})
        # and a third item with exponent notation
        exp = ",".join("%.17e" % v for v in as_floats)
        text = text[:-2] + ', {"id": "c", "embedding": [' + exp + ']}]}'
        resp = self.score_ok(text.encode())
        res = resp["results"]
        self.assertEqual(len(res), 3)
        # (rows of one batch may differ in the last bits, so compare with a tolerance; the
        # parsed input itself must be bit-identical, see input_sha256 below)
        for r in res[1:]:
            self.assertJsonClose(r["probabilities"], res[0]["probabilities"], 1e-6)
            self.assertJsonClose(r["vector"], res[0]["vector"], 1e-6)
        rows = self.daemon.rows_for(r["decision_id"] for r in res)
        self.assertEqual({rows[r["decision_id"]]["input_sha256"] for r in res},
                         {H.input_sha256(z)})

    def test_item_id_limits(self):
        """ids are 1..256 bytes: 256 bytes of UTF-8 (128 two-byte characters) is accepted and
        stored verbatim."""
        Z = self.toxicity_inputs(3, seed=9)
        ids = ["x", "é" * 128, "id with \"quotes\", \\ and \u2603"]
        items = [{"id": i, "embedding_b64": H.embedding_b64(z)} for i, z in zip(ids, Z)]
        resp = self.run_batch(items, Z)
        self.assertEqual([r["id"] for r in resp["results"]], ids)

    def test_goldens_match(self):
        """The checkpoint's golden outputs are reproduced by the daemon."""
        goldens = [g for g in self.tox_cfg.get("golden", []) if "embedding_b64" in g]
        self.assertTrue(goldens, "the committed toxicity config.json has no golden entries to reproduce")
        items = [{"id": f"g{i}", "embedding_b64": g["embedding_b64"]} for i, g in enumerate(goldens)]
        resp = self.score_ok({"items": items})
        labels = self.tox_cfg["labels"]
        for i, (g, r) in enumerate(zip(goldens, resp["results"])):
            got = [r["probabilities"][lab] for lab in labels]
            np.testing.assert_allclose(got, g["probabilities"], atol=1e-4, err_msg=f"golden {i}")
            np.testing.assert_allclose(r["vector"], g["vector"], atol=1e-4, err_msg=f"golden {i}")
            self.assertEqual(r["label_index"], g["label_index"], f"golden {i}")
            self.assertEqual(r["decision"], g["decision"], f"golden {i}")

    def test_matches_reference_implementation(self):
        """Every model's vectors and probabilities agree with a naive float64 numpy
        implementation of docs/checkpoint-format.md within 1e-4."""
        for name in ALL_MODELS:
            with self.subTest(model=name):
                ref = H.ReferenceModel(H.version_dir(name))
                D = ref.config["dims"]["D"]
                # the reference must itself reproduce the checkpoint's goldens
                for g in ref.config.get("golden", []):
                    if "embedding_b64" not in g:
                        continue
                    z = np.frombuffer(base64.b64decode(g["embedding_b64"]), "<f4")
                    e, p = ref.forward(z)
                    np.testing.assert_allclose(e[0], g["vector"], atol=1e-4,
                                               err_msg=f"{name}: reference vs golden (test bug?)")
                    np.testing.assert_allclose(p[0], g["probabilities"], atol=1e-4)
                Z = H.random_embeddings(20, D, seed=10)
                Z[10:] *= 3
                resp = self.score_ok({"model": name, "items": H.b64_items(Z)})
                e, p = ref.forward(Z)
                for i, r in enumerate(resp["results"]):
                    np.testing.assert_allclose(r["vector"], e[i], atol=1e-4,
                                               err_msg=f"{name} item {i} vector")
                    got = [r["probabilities"][lab] for lab in ref.labels]
                    np.testing.assert_allclose(got, p[i], atol=1e-4,
                                               err_msg=f"{name} item {i} probabilities")

    def test_decision_ids_increase_across_requests(self):
        Z = self.toxicity_inputs(4, seed=11)
        first = self.score_ok({"items": H.b64_items(Z)})
        a = max(H.uuid7_millis(r["decision_id"]) for r in first["results"])
        # the second request in a later millisecond than the first's ids
        H.wait_for(lambda: time.time() * 1000 > a + 1, "the clock passes the first ids' millisecond", interval=0.001)
        second = self.score_ok({"items": H.b64_items(Z)})
        b = min(H.uuid7_millis(r["decision_id"]) for r in second["results"])
        self.assertLessEqual(a, b, "UUIDv7 timestamps should not go backwards")
        self.assertNotEqual(first["request_id"], second["request_id"])
        seqs = self.daemon.query(
            "SELECT seq, request_id FROM decisions WHERE request_id IN (?, ?) ORDER BY seq",
            (first["request_id"], second["request_id"]))
        self.assertEqual([r["request_id"] for r in seqs],
                         [first["request_id"]] * 4 + [second["request_id"]] * 4)

    # ------------------------------------------------------------------ other tasks
    def _other_model(self, name, expected_task):
        cfg = H.load_config(name)
        self.assertEqual(cfg["task"], expected_task)
        D = cfg["dims"]["D"]
        Z = H.random_embeddings(24, D, seed=sum(map(ord, name)))
        Z[12:] *= np.linspace(1, 6, 12, dtype=np.float32)[:, None]
        resp = self.run_batch(H.json_items(Z, name), Z, model=name, model_name=name)
        b = self.score_ok({"model": name, "items": H.b64_items(Z, name)})
        for ra, rb in zip(resp["results"], b["results"]):
            ra, rb = dict(ra), dict(rb)
            ra.pop("decision_id"), rb.pop("decision_id")
            self.assertEqual(ra, rb)
        return cfg, resp

    def test_multiclass_model(self):
        cfg, resp = self._other_model("tiny_multi", "multiclass")
        self.assertEqual(cfg["labels"], ["joy", "anger", "fear"])
        self.assertEqual(cfg["dims"]["D"], 32)
        self.assertEqual(resp["policy"]["kind"], "label_map")

    def test_ordinal_model(self):
        cfg, resp = self._other_model("tiny_ordinal", "ordinal")
        self.assertEqual(resp["policy"]["kind"], cfg["decision_policy"]["kind"])

    def test_tiny_binary_model(self):
        cfg, resp = self._other_model("tiny_binary", "binary")
        self.assertEqual(cfg["dims"]["D"], 32)
        for r in resp["results"]:
            self.assertAlmostEqual(r["toxicity"], r["probabilities"][cfg["labels"][1]], delta=1e-9)

    # ------------------------------------------------------------------ the audit DB itself
    @H.sqlite_only("the SQLite file's journal mode and schema through PRAGMAs (the PostgreSQL schema: test_pg_fleet)")
    def test_audit_schema(self):
        mode = self.daemon.scalar("PRAGMA journal_mode")
        self.assertEqual(mode.lower(), "wal")
        cols = {r["name"]: r for r in self.daemon.query("PRAGMA table_info(decisions)")}
        self.assertLessEqual(DECISION_COLUMNS, set(cols), "decisions lacks contract columns")
        self.assertEqual(cols["seq"]["pk"], 1)
        self.assertEqual(cols["seq"]["type"].upper(), "INTEGER")
        uniq = [i for i in self.daemon.query("PRAGMA index_list(decisions)") if i["unique"]]
        unique_cols = set()
        for idx in uniq:
            for c in self.daemon.query(f"PRAGMA index_info('{idx['name']}')"):
                unique_cols.add(c["name"])
        self.assertIn("decision_id", unique_cols, "decision_id should be UNIQUE")
        mcols = {r["name"] for r in self.daemon.query("PRAGMA table_info(schema_migrations)")}
        self.assertTrue({"version", "name", "sha256", "applied_at"} <= mcols, mcols)
        migs = self.daemon.query("SELECT * FROM schema_migrations ORDER BY version")
        self.assertGreaterEqual(len(migs), 1, "no migration recorded")
        self.assertEqual(len({m["version"] for m in migs}), len(migs))
        for m in migs:
            self.assertRegex(str(m["sha256"]), r"^[0-9a-f]{64}$")

    def test_models_endpoint_agrees(self):
        r = self.daemon.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        by_name = {m["name"]: m for m in r.json["models"]}
        self.assertEqual(set(by_name), set(ALL_MODELS))
        for name in ALL_MODELS:
            cfg = H.load_config(name)
            m = by_name[name]
            self.assertEqual(m["active_version"], "1")
            (v,) = m["versions"]
            self.assertEqual(v["version"], "1")
            self.assertEqual(v["state"], "ready")
            self.assertEqual(v["task"], cfg["task"])
            self.assertEqual(v["labels"], cfg["labels"])
            self.assertEqual(v["dims"], cfg["dims"])
            self.assertEqual(v["sha256"], file_sha256(
                os.path.join(H.version_dir(name), "model.safetensors")))
        self.assertEqual(self.daemon.get("/healthz").json, {"status": "ok"})
        self.assertEqual(self.daemon.get("/readyz").json,
                         {"status": "ready", "checks": {"models": True, "audit_db": True, "draining": False}})


class RestartTest(ScoreChecks, unittest.TestCase):
    """Rows and migrations survive a SIGTERM restart on the same DB."""

    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity", "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=["toxicity", "tiny_multi"], args=BIG_LIMITS)

    def test_rows_survive_restart(self):
        d = self.daemon
        D = H.load_config("toxicity")["dims"]["D"]
        Z = H.random_embeddings(10, D, seed=20)
        first = self.score_ok({"items": H.b64_items(Z, "r1")})
        Zm = H.random_embeddings(5, 32, seed=21)
        self.score_ok({"model": "tiny_multi", "items": H.json_items(Zm, "r1m")})
        rows_before = d.query("SELECT * FROM decisions ORDER BY seq")
        self.assertEqual(len(rows_before), 15)
        migs_before = d.query("SELECT * FROM schema_migrations ORDER BY version")
        self.assertGreaterEqual(len(migs_before), 1)

        rc = d.stop()
        self.assertEqual(rc, 0, f"pgcld should exit 0 on SIGTERM\n{d.logs()}")
        # the DB is consistent with the daemon gone
        self.assertEqual(H.db_query(d.db_path, "SELECT * FROM decisions ORDER BY seq"),
                         rows_before)
        self.assertTrue(H.sqlite_integrity_ok(d.db_path))

        d.start()  # d.stop() has waited for the exit
        self.assertEqual(d.get("/readyz").status, 200)
        self.assertEqual(d.query("SELECT * FROM decisions ORDER BY seq"), rows_before,
                         "rows changed across a restart")
        self.assertEqual(d.query("SELECT * FROM schema_migrations ORDER BY version"),
                         migs_before, "migrations re-applied (or changed) on restart")

        second = self.score_ok({"items": H.b64_items(Z, "r2")})
        self.check_response(second, "toxicity", [f"r2-{i}" for i in range(10)])
        self.check_rows(second, Z, [f"r2-{i}" for i in range(10)], "toxicity")
        self.assertEqual(d.count(), 25)
        max_before = max(r["seq"] for r in rows_before)
        new_seqs = [r["seq"] for r in d.query("SELECT seq FROM decisions WHERE request_id = ?",
                                              (second["request_id"],))]
        self.assertTrue(all(s > max_before for s in new_seqs), "seq went backwards after restart")
        # same inputs, same outputs, before and after the restart
        for a, b in zip(first["results"], second["results"]):
            self.assertEqual(a["probabilities"], b["probabilities"])
            self.assertEqual(a["vector"], b["vector"])
            self.assertLess(H.uuid7_millis(a["decision_id"]) - 1,
                            H.uuid7_millis(b["decision_id"]))

        # and a second restart still applies nothing
        self.assertEqual(d.restart().get("/healthz").status, 200)
        self.assertEqual(d.query("SELECT * FROM schema_migrations ORDER BY version"), migs_before)
        self.assertEqual(d.count(), 25)


class ConcurrencyTest(ScoreChecks, unittest.TestCase):
    """Parallel clients and a SIGTERM under load: every 200 answer has its audit rows."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "tiny_multi")
        cls.daemon = H.start_daemon(cls, models=["tiny_binary", "tiny_multi"],
                                    default_model="tiny_multi",
                                    args=["--synchronous", "NORMAL"])

    def test_default_model_and_synchronous_normal(self):
        Z = H.random_embeddings(3, 32, seed=30)
        resp = self.score_ok({"items": H.b64_items(Z, "dm")})
        self.assertEqual(resp["model"]["name"], "tiny_multi")
        self.check_response(resp, "tiny_multi", ["dm-0", "dm-1", "dm-2"])
        self.check_rows(resp, Z, ["dm-0", "dm-1", "dm-2"], "tiny_multi")

    def test_escaped_model_key_after_items(self):
        """A "model" key written with an escape, after "items", names the model that scores (a fuzz
        finding: the fast parser's look-ahead compared raw key bytes, missed it and scored with the
        default model). Both models here take D = 32, so only the answer's model tells."""
        Z = H.random_embeddings(2, 32, seed=32)
        items = json.dumps(H.json_items(Z, "esc"))
        for key in ("model", "mod\\u0065l"):
            body = '{"items":%s,"%s":"tiny_binary"}' % (items, key)
            r = self.timed(lambda: self.daemon.raw("POST", "/v1/score", body.encode(),
                                                   headers={"Content-Type": "application/json"}))
            self.assertEqual(r.status, 200, (key, r))
            self.assertEqual(r.json["model"]["name"], "tiny_binary", key)
            self.check_rows(r.json, Z, ["esc-0", "esc-1"], "tiny_binary")
        body = '{"items":[{"id":"a","embedding\\u0000":%s}]}' % json.dumps(H.embedding_json(Z[0]))
        r = self.daemon.raw("POST", "/v1/score", body.encode(), headers={"Content-Type": "application/json"})
        self.assertEqual((r.status, r.error_code()), (400, "invalid_json"), r)

    def test_parallel_requests(self):
        import threading
        d = self.daemon
        before = d.count()
        Z = H.random_embeddings(4, 32, seed=31)
        answers, failures = [], []
        lock = threading.Lock()

        def client(k):
            for j in range(10):
                model = "tiny_binary" if (k + j) % 2 else "tiny_multi"
                r = d.score({"model": model, "items": H.b64_items(Z, f"c{k}-{j}")})
                with lock:
                    (answers if r.status == 200 else failures).append((model, r))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertFalse(failures, failures[:3])
        self.assertEqual(len(answers), 160)
        ids = [r["decision_id"] for _, a in answers for r in a.json["results"]]
        self.assertEqual(len(set(ids)), 640, "decision_ids not unique across parallel requests")
        self.assertEqual(len({a.json["request_id"] for _, a in answers}), 160)
        self.assertEqual(d.count(), before + 640)
        rows = d.rows_for(ids)
        self.assertEqual(len(rows), 640)
        for model, a in answers:
            for i, r in enumerate(a.json["results"]):
                row = rows[r["decision_id"]]
                self.assertEqual((row["model_name"], row["item_id"], row["request_id"]),
                                 (model, r["id"], a.json["request_id"]))
                self.assertEqual(row["input_sha256"], H.input_sha256(Z[i]))

    def test_zz_sigterm_under_load(self):
        """SIGTERM while 8 clients keep posting: pgcld exits 0 within the grace period, and every
        decision it answered with 200 is in the audit DB. Three rounds (restarting on the same
        DB), because a shutdown race shows only some of the time. Runs last in its class."""
        import threading
        import urllib.error
        d = self.daemon
        Z = H.random_embeddings(8, 32, seed=32)
        for round_ in range(3):
            answered, stop = [], threading.Event()
            lock = threading.Lock()

            def client(k):
                j = 0
                while not stop.is_set():
                    try:
                        r = d.score({"items": H.b64_items(Z, f"s{round_}-{k}-{j}")}, timeout=30)
                    except (urllib.error.URLError, ConnectionError, OSError):
                        return  # the daemon is gone
                    if r.status == 200:
                        with lock:
                            answered.extend(x["decision_id"] for x in r.json["results"])
                    j += 1

            threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
            for t in threads:
                t.start()

            def under_load():  # SIGTERM once the clients are being answered, not after a fixed pause
                with lock:
                    return len(answered) >= 8 * len(Z)

            loaded = H.wait_until(under_load, 60)
            try:
                self.assertTrue(loaded, f"round {round_}: the clients were not answered")
                rc = d.stop()
            finally:
                stop.set()
                for t in threads:
                    t.join(60)
            self.assertEqual(rc, 0, f"round {round_}: pgcld should exit 0 on SIGTERM under load"
                                    f"\n{d.logs()}")
            self.assertGreater(len(answered), 0)
            found = H.decisions_present(d.db_path, answered)
            self.assertEqual(found, len(answered), f"round {round_}: decisions answered with 200 "
                                                   "are missing from the audit DB after SIGTERM")
            self.assertTrue(H.sqlite_integrity_ok(d.db_path))
            d.start()
            self.assertEqual(d.get("/healthz").status, 200)


class CliTest(unittest.TestCase):
    def test_help_exits_zero(self):
        H.require_binary()
        p = H.run_pgcld("--help", timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("serve", p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
