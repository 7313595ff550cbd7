"""Model management over real HTTP: hot swap under load, refused candidates, concurrent
activations, uploads, shadows, API keys and the endpoint x role matrix, metrics, persisted
activations, and SIGTERM during a long request.

Run: /usr/bin/python3 tests/integration/test_admin.py (PGCLD_BIN selects the binary).
"""
import base64
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

TINY = "tiny_binary"


def tiny_models_dir(parent, versions=("1", "2")):
    """A models dir with `tiny` at the given versions (copies of tiny_binary/1)."""
    root = os.path.join(parent, "models")
    for v in versions:
        shutil.copytree(H.version_dir(TINY), os.path.join(root, "tiny", v))
    return root


def write_variant(root, version, edit_config=None, edit_weights=None):
    """tiny/<version>: tiny_binary/1 with its config and/or weights edited."""
    dst = os.path.join(root, "tiny", version)
    shutil.copytree(H.version_dir(TINY), dst)
    cfg_path = os.path.join(dst, "config.json")
    w_path = os.path.join(dst, "model.safetensors")
    if edit_weights:
        with open(w_path, "rb") as f:
            data = bytearray(f.read())
        data = edit_weights(data)
        with open(w_path, "wb") as f:
            f.write(data)
    if edit_config:
        with open(cfg_path) as f:
            cfg = json.load(f)
        edit_config(cfg)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
    return dst


def tensor_offset(data, name):
    n = int.from_bytes(data[:8], "little")
    header = json.loads(bytes(data[8:8 + n]))
    return 8 + n + header[name]["data_offsets"][0]


def tiny_items(n, seed, prefix="it"):
    return H.json_items(H.random_embeddings(n, 32, seed), prefix)


class SwapUnderLoadTest(unittest.TestCase):
    """Scoring on several connections while versions 1 and 2 are activated back and forth 200
    times: every answer is 200, names a version active during the request, and its audit rows
    name the same version."""

    ACTIVATIONS = 200
    CLIENTS = 4

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-swap-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp), default_model="tiny")

    def test_swap_under_load(self):
        d = self.daemon
        stop = threading.Event()
        answers, failures = [], []
        lock = threading.Lock()

        def client(k):
            i = 0
            while not stop.is_set():
                s = time.monotonic()
                r = d.score({"items": tiny_items(3, 1000 * k + i, f"c{k}-{i}")})
                e = time.monotonic()
                with lock:
                    if r.status != 200:
                        failures.append(r)
                    else:
                        answers.append((s, e, r.json["model"]["version"],
                                        [x["decision_id"] for x in r.json["results"]]))
                i += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(self.CLIENTS)]
        for t in threads:
            t.start()
        timeline = [(float("-inf"), float("-inf"), "2")]  # (sent, answered, version); 2 serves first
        try:
            for n in range(self.ACTIVATIONS):
                v = "1" if n % 2 == 0 else "2"
                s = time.monotonic()
                r = d.post("/v1/admin/models/tiny/activate", {"version": v})
                e = time.monotonic()
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json["version"], v)
                timeline.append((s, e, v))
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(failures, [], f"{len(failures)} non-200 answers, first: {failures[:1]}")
        self.assertGreater(len(answers), 50, "the clients made too few requests to test anything")

        def possible(s, e):
            """Versions that may have been active at some moment of [s, e]."""
            out = set()
            for k, (a_sent, _a_done, v) in enumerate(timeline):
                superseded = timeline[k + 1][1] if k + 1 < len(timeline) else float("inf")
                if a_sent <= e and superseded >= s:
                    out.add(v)
            return out

        for s, e, v, _ids in answers:
            self.assertIn(v, possible(s, e), f"answer named version {v} outside its request's window")
        rows = d.rows_for(i for a in answers for i in a[3])
        self.assertEqual(len(rows), sum(len(a[3]) for a in answers), "an answered decision has no row")
        for _s, _e, v, ids in answers:
            for i in ids:
                self.assertEqual(rows[i]["model_version"], v, "audit row names another version")
        swaps = d.scalar("SELECT count(*) FROM admin_events WHERE action = 'model.activate'")
        self.assertEqual(swaps, self.ACTIVATIONS)


class CandidateRefusalTest(unittest.TestCase):
    """Corrupt candidates are refused with the reason, the old version keeps serving, and the
    refusal is recorded."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-refuse-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = tiny_models_dir(cls.tmp, versions=("1",))
        nan = bytes.fromhex("0000c07f")

        def poison(data):
            off = tensor_offset(data, "query_fc.weight")
            data[off:off + 4] = nan
            return data

        def drop_digest(cfg):
            cfg.pop("weights_sha256", None)

        def bad_shape(cfg):
            cfg["dims"]["d"] = 9
            cfg["semantic_mlp"]["layers"][-1]["out"] = 9

        def bad_golden(cfg):
            cfg["golden"][0]["vector"][0] += 0.5

        write_variant(root, "shape", edit_config=bad_shape)
        write_variant(root, "nan", edit_config=drop_digest, edit_weights=poison)
        write_variant(root, "truncated", edit_config=drop_digest, edit_weights=lambda b: b[:-64])
        write_variant(root, "golden", edit_config=bad_golden)
        cls.daemon = H.start_daemon(cls, models=root, default_model="tiny")

    def test_each_corrupt_candidate_is_refused(self):
        d = self.daemon
        cases = {"shape": "shape", "nan": "NaN", "truncated": "out of range", "golden": "golden[0]"}
        for version, needle in cases.items():
            with self.subTest(version=version):
                r = d.post("/v1/admin/models/tiny/activate", {"version": version})
                self.assertEqual(r.status, 422, r)
                self.assertEqual(r.error_code(), "invalid_checkpoint")
                self.assertIn(needle, r.json["error"]["message"])
                s = d.score({"items": tiny_items(2, 7)})
                self.assertEqual(s.status, 200, s)
                self.assertEqual(s.json["model"]["version"], "1")
        models = {m["name"]: m for m in d.get("/v1/models").json["models"]}
        states = {v["version"]: v for v in models["tiny"]["versions"]}
        self.assertEqual(models["tiny"]["active_version"], "1")
        for version in cases:
            self.assertEqual(states[version]["state"], "failed")
            self.assertTrue(states[version]["error"])
        refused = d.scalar("SELECT count(*) FROM admin_events WHERE action = 'model.load_refused'")
        self.assertEqual(refused, len(cases))

    def test_unknown_version_and_model(self):
        d = self.daemon
        r = d.post("/v1/admin/models/tiny/activate", {"version": "404"})
        self.assertEqual((r.status, r.error_code()), (404, "version_not_found"), r)
        r = d.post("/v1/admin/models/nope/activate", {"version": "1"})
        self.assertEqual((r.status, r.error_code()), (404, "model_not_found"), r)
        r = d.post("/v1/admin/models/tiny/activate", {"version": "../1"})
        self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), r)
        r = d.post("/v1/admin/models/tiny/activate", {"version": "1", "extra": 1})
        self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), r)


class ConcurrentActivationTest(unittest.TestCase):
    """Concurrent activations of one model are serialised or refused with 409, never interleaved."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-conc-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp, ("1", "2", "3")), default_model="tiny")

    def test_concurrent_activations(self):
        d = self.daemon
        results = []
        barrier = threading.Barrier(9)

        def go(v):
            barrier.wait()
            results.append(d.post("/v1/admin/models/tiny/activate", {"version": v}))

        threads = [threading.Thread(target=go, args=(str(1 + k % 3),)) for k in range(9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(r.status for r in results)
        self.assertTrue(set(statuses) <= {200, 409}, statuses)
        self.assertIn(200, statuses)
        for r in results:
            if r.status == 409:
                self.assertEqual(r.error_code(), "conflict")
        ok = d.scalar("SELECT count(*) FROM admin_events WHERE action = 'model.activate'")
        self.assertEqual(ok, statuses.count(200))
        last = json.loads(d.scalar("SELECT details FROM admin_events"
                                   " WHERE action = 'model.activate' ORDER BY seq DESC LIMIT 1"))["version"]
        models = {m["name"]: m for m in d.get("/v1/models").json["models"]}
        self.assertEqual(models["tiny"]["active_version"], last)


class PersistedActivationTest(unittest.TestCase):
    """An activation survives a restart: the last activated version serves, not the highest."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-persist-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp, ("1", "2")), default_model="tiny")

    def test_rollback_survives_restart(self):
        d = self.daemon
        self.assertEqual(d.score({"items": tiny_items(1, 1)}).json["model"]["version"], "2")
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "1"}).status, 200)
        d.restart()
        self.assertEqual(d.score({"items": tiny_items(1, 2)}).json["model"]["version"], "1")
        models = {m["name"]: m for m in d.get("/v1/models").json["models"]}
        states = {v["version"]: v["state"] for v in models["tiny"]["versions"]}
        self.assertEqual(states, {"1": "ready", "2": "available"})


class UploadTest(unittest.TestCase):
    """Adding a version over HTTP: checksum verified, validated before it is accepted, immutable,
    confined to the model repository."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-upload-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.root = tiny_models_dir(cls.tmp, ("1",))
        cls.daemon = H.start_daemon(cls, models=cls.root, default_model="tiny")
        with open(os.path.join(H.version_dir(TINY), "config.json")) as f:
            cls.config = json.load(f)
        with open(os.path.join(H.version_dir(TINY), "model.safetensors"), "rb") as f:
            cls.weights = f.read()

    def body(self, weights=None, digest=None, config=None):
        w = self.weights if weights is None else weights
        return {"config": config or self.config, "weights_b64": base64.b64encode(w).decode(),
                "weights_sha256": digest or hashlib.sha256(w).hexdigest()}

    def test_upload_then_activate(self):
        d = self.daemon
        r = d.request("PUT", "/v1/admin/models/tiny/versions/7", self.body())
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json["sha256"], hashlib.sha256(self.weights).hexdigest())
        r = d.request("PUT", "/v1/admin/models/tiny/versions/7", self.body())
        self.assertEqual((r.status, r.error_code()), (409, "version_exists"), r)
        r = d.post("/v1/admin/models/tiny/activate", {"version": "7"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(d.score({"items": tiny_items(1, 3)}).json["model"]["version"], "7")
        self.assertEqual(d.scalar("SELECT count(*) FROM admin_events WHERE action = 'model.upload'"), 1)
        # a new model is created by upload only when the request says so (a mistyped name must not
        # start serving a model), and nothing is left of the refused upload
        r = d.request("PUT", "/v1/admin/models/fresh/versions/1", self.body())
        self.assertEqual((r.status, r.error_code()), (404, "model_not_found"), r)
        self.assertIn("create_model=true", r.json["error"]["message"])
        self.assertFalse(os.path.exists(os.path.join(self.root, "fresh")))
        r = d.request("PUT", "/v1/admin/models/fresh/versions/1?create_model=true", self.body())
        self.assertEqual(r.status, 201, r)
        self.assertTrue(r.json["created_model"])
        uploads = [json.loads(r["details"]) for r in d.query("SELECT details FROM admin_events"
                                                              " WHERE action = 'model.upload'")]
        self.assertEqual([u.get("created_model") for u in uploads].count(True), 1, uploads)
        r = d.post("/v1/admin/models/fresh/activate", {"version": "1"})
        self.assertEqual(r.status, 200, r)

    def test_bad_uploads_leave_nothing(self):
        d = self.daemon
        before = sorted(os.listdir(os.path.join(self.root, "tiny")))
        r = d.request("PUT", "/v1/admin/models/tiny/versions/8", self.body(digest="0" * 64))
        self.assertEqual((r.status, r.error_code()), (422, "checksum_mismatch"), r)
        truncated = self.weights[:-100]
        r = d.request("PUT", "/v1/admin/models/tiny/versions/8", self.body(weights=truncated))
        self.assertEqual((r.status, r.error_code()), (422, "invalid_checkpoint"), r)
        cfg = json.loads(json.dumps(self.config))
        cfg["golden"][0]["vector"][1] += 1
        r = d.request("PUT", "/v1/admin/models/tiny/versions/8", self.body(config=cfg))
        self.assertEqual((r.status, r.error_code()), (422, "invalid_checkpoint"), r)
        for path in ("/v1/admin/models/tiny/versions/..", "/v1/admin/models/..%2f..%2ftmp/versions/1",
                     "/v1/admin/models/tiny/versions/.hidden"):
            r = d.raw("PUT", path, self.body(), headers={"Content-Type": "application/json"})
            self.assertIn(r.status, (400, 404), (path, r))
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "tiny"))), before)

    def test_symlink_out_of_the_repository_is_not_served(self):
        d = self.daemon
        outside = tempfile.mkdtemp(prefix="pgcld-outside-")
        self.addCleanup(shutil.rmtree, outside, True)
        shutil.copytree(H.version_dir(TINY), os.path.join(outside, "1"))
        os.symlink(os.path.join(outside, "1"), os.path.join(self.root, "tiny", "evil"))
        r = d.post("/v1/admin/models/tiny/activate", {"version": "evil"})
        self.assertEqual(r.status, 422, r)
        self.assertIn("outside the model repository", r.json["error"]["message"])


class ShadowTest(unittest.TestCase):
    """A shadow with other thresholds on the same weights: its decision flips are exactly those
    the two policies imply for the same probabilities."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-shadow-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = tiny_models_dir(cls.tmp, ("1",))

        def stricter(cfg):
            cfg["decision_policy"]["t_review"] = 0.2
            cfg["decision_policy"]["t_block"] = 0.5
            cfg.pop("golden")

        write_variant(root, "2", edit_config=stricter)
        cls.daemon = H.start_daemon(cls, models=root, default_model="tiny")

    def test_shadow_flips(self):
        d = self.daemon
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "1"}).status, 200)
        r = d.get("/v1/admin/models/tiny/shadow")
        self.assertEqual((r.status, r.error_code()), (404, "no_shadow"), r)
        r = d.post("/v1/admin/models/tiny/shadow", {"version": "2"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json["shadow_version"], "2")
        shadow_policy = {"kind": "threshold", "label": "pos", "t_review": 0.2, "t_block": 0.5}
        expected = {a: {b: 0 for b in ("allow", "review", "block")} for a in ("allow", "review", "block")}
        total = 0
        for k in range(10):
            res = d.score({"items": tiny_items(20, 500 + k, f"s{k}")})
            self.assertEqual(res.status, 200, res)
            self.assertEqual(res.json["model"]["version"], "1")
            for item in res.json["results"]:
                probs = [item["probabilities"][lbl] for lbl in ("neg", "pos")]
                shadow = H.policy_decision(shadow_policy, ["neg", "pos"], probs)
                expected[item["decision"]][shadow] += 1
                total += 1
        self.assertTrue(H.wait_until(lambda: d.scalar("SELECT count(*) FROM shadow_decisions") == total),
                        "shadow rows did not all arrive")
        rep = d.get("/v1/admin/models/tiny/shadow")
        self.assertEqual(rep.status, 200, rep)
        self.assertEqual(rep.json["items"], total)
        self.assertEqual(rep.json["decision_matrix"], expected)
        flips = sum(v for a, row in expected.items() for b, v in row.items() if a != b)
        self.assertEqual(rep.json["decision_flips"], flips)
        self.assertGreater(flips, 0, "the constructed candidate should flip some decisions")
        self.assertEqual(rep.json["label_agreement"], 1.0)
        self.assertLess(rep.json["max_abs_score_difference"], 1e-6)
        r = d.request("DELETE", "/v1/admin/models/tiny/shadow")
        self.assertEqual(r.status, 200, r)
        before = d.scalar("SELECT count(*) FROM shadow_decisions")
        detached = d.score({"items": tiny_items(5, 9)})
        self.assertEqual(detached.status, 200, detached)
        rep = d.get("/v1/admin/models/tiny/shadow?version=2")
        self.assertEqual((rep.status, rep.json["items"], rep.json["attached"]), (200, total, False))
        actions = [r["action"] for r in d.query("SELECT action FROM admin_events ORDER BY seq")]
        self.assertEqual(actions[-2:], ["shadow.attach", "shadow.detach"])
        # No shadow work for the request scored while detached: one shadow worker takes jobs in
        # order, so once a later request's shadow row (attached again) is in, any job that request
        # had queued would have been written before it.
        self.assertEqual(d.post("/v1/admin/models/tiny/shadow", {"version": "2"}).status, 200)
        marker = d.score({"items": tiny_items(1, 10, "marker")})
        self.assertEqual(marker.status, 200, marker)
        self.assertTrue(H.wait_until(lambda: d.scalar("SELECT count(*) FROM shadow_decisions WHERE decision_id = ?",
                                                      (marker.json["results"][0]["decision_id"],)) == 1),
                        "the marker's shadow row did not arrive")
        self.assertEqual(d.scalar("SELECT count(*) FROM shadow_decisions"), before + 1,
                         "a request scored while the shadow was detached was shadowed")


class RoleMatrixTest(unittest.TestCase):
    """Every endpoint x {no key, bad key, revoked key, scorer, reviewer, admin}."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-roles-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp, ("1", "2")), default_model="tiny")

    def test_matrix(self):
        d = self.daemon
        revoked = d.create_key("scorer", "to-revoke")
        r = d.request("DELETE", f"/v1/admin/keys/{revoked[:14]}")
        self.assertEqual(r.status, 200, r)
        score = {"items": tiny_items(1, 1)}
        endpoints = [
            ("POST", "/v1/score", score, {"scorer"}),
            ("GET", "/v1/models", None, {"scorer", "reviewer", "admin"}),
            ("POST", "/v1/admin/models/tiny/activate", {"version": "2"}, {"admin"}),
            ("PUT", "/v1/admin/models/tiny/versions/9", {"config": {}, "weights_b64": "", "weights_sha256": ""},
             {"admin"}),
            ("POST", "/v1/admin/models/tiny/shadow", {"version": "1"}, {"admin"}),
            ("GET", "/v1/admin/models/tiny/shadow", None, {"admin"}),
            ("DELETE", "/v1/admin/models/tiny/shadow", None, {"admin"}),
            ("GET", "/v1/admin/keys", None, {"admin"}),
            ("POST", "/v1/admin/keys", {"role": "scorer", "name": "matrix"}, {"admin"}),
            ("DELETE", "/v1/admin/keys/pgcld_00000000", None, {"admin"}),
        ]
        callers = {"none": "", "bad": "pgcld_deadbeef_" + "A" * 43, "revoked": revoked,
                   "scorer": d.keys["scorer"], "reviewer": d.keys["reviewer"], "admin": d.keys["admin"]}
        for method, path, body, allowed in endpoints:
            for who, key in callers.items():
                with self.subTest(endpoint=f"{method} {path}", caller=who):
                    r = d.request(method, path, body, key=key)
                    if who in ("none", "bad", "revoked"):
                        self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)
                        self.assertEqual(r.headers.get("WWW-Authenticate"), "Bearer")
                    elif who not in allowed:
                        self.assertEqual((r.status, r.error_code()), (403, "forbidden"), r)
                    else:
                        self.assertNotIn(r.status, (401, 403), r)
        for path in ("/healthz", "/readyz", "/metrics"):
            self.assertEqual(d.get(path, key="").status, 200, path)

    def test_key_lifecycle_over_http(self):
        d = self.daemon
        r = d.post("/v1/admin/keys", {"role": "scorer", "name": "fresh"})
        self.assertEqual(r.status, 201, r)
        key, key_id = r.json["key"], r.json["key_id"]
        self.assertTrue(key.startswith(key_id + "_"))
        self.assertEqual(d.score({"items": tiny_items(1, 2)}, key=key).status, 200)
        listed = {k["key_id"]: k for k in d.get("/v1/admin/keys").json["keys"]}
        self.assertIn(key_id, listed)
        self.assertNotIn("key", listed[key_id])
        self.assertFalse(any(key in json.dumps(k) for k in listed.values()))
        self.assertEqual(d.request("DELETE", f"/v1/admin/keys/{key_id}").status, 200)
        r = d.score({"items": tiny_items(1, 3)}, key=key)
        self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)
        r = d.request("DELETE", f"/v1/admin/keys/{key_id}")
        self.assertEqual((r.status, r.error_code()), (404, "key_not_found"), r)
        actions = [x["action"] for x in d.query("SELECT action FROM admin_events WHERE target = ?", (key_id,))]
        self.assertEqual(actions, ["key.create", "key.revoke"])

    def test_cli_revocation_takes_effect_without_restart(self):
        d = self.daemon
        key = d.create_key("scorer", "cli-revoked")
        self.assertEqual(d.score({"items": tiny_items(1, 4)}, key=key).status, 200)
        d.cli("keys", "revoke", "--db", d.db_path, "--key-id", key[:14])
        self.assertTrue(H.wait_until(lambda: d.score({"items": tiny_items(1, 5)}, key=key).status == 401),
                        "a key revoked with the CLI kept working")


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-metrics-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp, ("1", "2")), default_model="tiny")

    def test_prometheus_text(self):
        d = self.daemon
        for k in range(3):
            self.assertEqual(d.score({"items": tiny_items(4, k)}).status, 200)
        self.assertEqual(d.score({"items": []}).status, 400)
        self.assertEqual(d.post("/v1/admin/models/tiny/activate", {"version": "1"}).status, 200)
        samples = {}

        def read_samples():
            r = d.get("/metrics", key="")
            self.assertEqual(r.status, 200)
            self.assertTrue(r.headers.get("Content-Type", "").startswith("text/plain"))
            samples.clear()
            samples.update(H.parse_metrics(r.body.decode()))
            return samples

        # pgcld_requests_total counts a request once its answer has been sent, so the client
        # can be ahead of it: poll until the last scoring request is counted.
        self.assertTrue(H.wait_until(lambda: read_samples().get(
            'pgcld_requests_total{route="POST /v1/score",code="400"}') == 1), samples)
        self.assertEqual(samples['pgcld_requests_total{route="POST /v1/score",code="200"}'], 3)
        self.assertEqual(samples['pgcld_requests_total{route="POST /v1/score",code="400"}'], 1)
        self.assertEqual(samples['pgcld_items_scored_total{model="tiny",version="2"}'], 12)
        self.assertEqual(samples['pgcld_batch_items_count'], 3)
        self.assertEqual(samples['pgcld_batch_items_sum'], 12)
        for stage in ("queue", "compute", "audit", "total"):
            self.assertEqual(samples[f'pgcld_request_duration_seconds_count{{stage="{stage}"}}'], 3)
            self.assertEqual(samples[f'pgcld_request_duration_seconds_bucket{{stage="{stage}",le="+Inf"}}'], 3)
        self.assertEqual(samples['pgcld_model_swaps_total{model="tiny",result="ok"}'], 1)
        self.assertIn("pgcld_audit_queue_rows", samples)
        active = [k for k in samples if k.startswith("pgcld_model_active_info")]
        self.assertEqual(len(active), 1)
        self.assertIn('version="1"', active[0])


class ShutdownTest(unittest.TestCase):
    """SIGTERM while a request's body is still arriving: the request completes, its rows are
    committed, readiness turns false, and the daemon exits 0."""

    @classmethod
    def setUpClass(cls):
        H.require_models(TINY)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-term-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.daemon = H.start_daemon(cls, models=tiny_models_dir(cls.tmp, ("1",)), default_model="tiny")

    def test_sigterm_during_long_request(self):
        d = self.daemon
        body = json.dumps({"items": tiny_items(200, 42, "long")}).encode()
        sock = socket.create_connection(("127.0.0.1", d.port), timeout=60)
        head = (f"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {d.keys['scorer']}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n").encode()
        sock.sendall(head + body[:len(body) // 2])
        # the request is in flight once pgcld has reserved its body's bytes (Content-Length)
        self.assertTrue(H.wait_until(lambda: (H.metric(d, "pgcld_body_bytes_reserved") or 0) >= len(body)),
                        "the request never arrived")
        d.proc.send_signal(15)
        # the rest of the body goes out once the daemon has begun its shutdown (its log says so),
        # not after a pause that a loaded machine could outlast
        self.assertTrue(H.wait_until(lambda: "shutdown: SIGTERM received; draining" in d.logs(limit=10 ** 9)),
                        f"pgcld did not begin to drain\n{d.logs()}")
        self.assertIsNone(d.proc.poll(), "pgcld exited while a request was in flight")
        sock.sendall(body[len(body) // 2:])
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        sock.close()
        status_line = data.split(b"\r\n", 1)[0]
        self.assertIn(b" 200 ", status_line, data[:300])
        answer = json.loads(data.split(b"\r\n\r\n", 1)[1])
        ids = [r["decision_id"] for r in answer["results"]]
        d.proc.wait(60)
        self.assertEqual(d.proc.returncode, 0, d.logs())
        self.assertEqual(len(d.rows_for(ids)), 200)
        self.assertIn("draining", d.logs())


if __name__ == "__main__":
    unittest.main(verbosity=2)
