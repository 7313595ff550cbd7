#!/usr/bin/python3
"""Every live answer of the administrative operations matches what openapi.yaml documents.

Model activation, uploads, shadows, keys and /metrics: successes, every error the daemon can be
made to answer deterministically, 401 and 403 (LiveAdminTest); 503 audit_unavailable and 409
conflict while another process holds the audit database's write lock (LiveAdminAuditLockTest);
--auth off --metrics off (LiveAuthOffTest).

Each response body is validated with jsonschema (Draft 2020-12, #/components refs inlined) against
the schema openapi.yaml documents for its path, method, status and media type, and each required
response header is checked; a newline-delimited JSON body is also validated line by line against
its media type's x-item-schema, and a CSV body against its x-csv-columns (openapi_contract.py,
LiveValidationMixin). The statuses validated are listed on stderr at the end.
Self-check: deliberately wrong bodies must fail validation.

openapi.yaml is checked by four programs: test_openapi_spec (the document itself),
test_openapi_score (probes, scoring, v2 inference), test_openapi_admin (administration) and
test_openapi_review (reviewers and the audit log); what they share is in openapi_contract.py.

Run: /usr/bin/python3 tests/integration/test_openapi_admin.py
"""

import base64
import copy
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
from openapi_contract import (  # noqa: E402
    validation_errors, SPEC, error_body, parse_prometheus, metric_families, LiveValidationMixin,
    tiny_copy, edit_config, bad_shape, tiny_b64_items, OCTETS, octets, embedding_tensor,
    print_validated_responses,
)


class LiveAdminTest(LiveValidationMixin, unittest.TestCase):
    """Every administrative endpoint: successes, every error the daemon can be made to answer
    deterministically, 401 and 403. Each test works on its own model so that the order of the
    tests does not matter."""

    MAX_BODY = 4096
    MAX_UPLOAD = 2 << 20

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-admin-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = os.path.join(cls.tmp, "models")
        for v in ("1", "2", "3"):
            tiny_copy(root, "tiny", v)  # activations
        edit_config(tiny_copy(root, "tiny", "shape"), bad_shape)
        for v in ("1", "2", "3"):
            tiny_copy(root, "shadowed", v)  # shadows
        edit_config(tiny_copy(root, "shadowed", "shape"), bad_shape)
        tiny_copy(root, "shadowed", "0wide", src=("toxicity", "1"))  # D = 1024; sorts below 3
        edit_config(tiny_copy(root, "broken", "1"), bad_shape)  # no active version
        with open(os.path.join(root, "plainfile"), "w") as f:  # not a model directory
            f.write("not a model\n")
        cls.daemon = H.start_daemon(cls, models=root, default_model="tiny",
                                    args=["--max-body-bytes", str(cls.MAX_BODY),
                                          "--max-upload-bytes", str(cls.MAX_UPLOAD)])
        vdir = H.version_dir("tiny_binary")
        with open(os.path.join(vdir, "config.json"), encoding="utf-8") as f:
            cls.config = json.load(f)
        with open(os.path.join(vdir, "model.safetensors"), "rb") as f:
            cls.weights = f.read()

    def upload_body(self, weights=None, digest=None, config=None):
        w = self.weights if weights is None else weights
        return {"config": config or self.config, "weights_b64": base64.b64encode(w).decode(),
                "weights_sha256": digest or hashlib.sha256(w).hexdigest()}

    def models(self):
        body = self.check_live("GET", "/v1/models", self.daemon.get("/v1/models"))
        return {m["name"]: m for m in body["models"]}

    def too_large(self, method, path, size):
        """A body over the limit, announced by Content-Length (answered before it is read)."""
        body = b'{"version": "' + b"x" * size + b'"}'
        r = self.daemon.raw(method, path, body, headers={"Content-Type": "application/json"})
        self.assertEqual((r.status, r.error_code()), (413, "payload_too_large"), r)
        self.check_live(method, path, r)

    # ------------------------------------------------------------------ activate
    def test_activate(self):
        d, path = self.daemon, "/v1/admin/models/tiny/activate"
        before = self.models()["tiny"]
        self.assertEqual(before["active_version"], "3")
        body = self.expect("POST", path, 200, body={"version": "2"})
        self.assertEqual((body["model"], body["version"], body["previous_version"]),
                         ("tiny", "2", "3"))
        self.assertEqual(body["activated_by"], f"test-admin ({d.keys['admin'][:14]})")
        body = self.expect("POST", path, 200, body={"version": "2"})  # already active
        self.assertEqual(body["previous_version"], "2")
        self.expect("POST", path, 404, "version_not_found", {"version": "9"})
        self.expect("POST", "/v1/admin/models/nope/activate", 404, "model_not_found",
                    {"version": "1"})
        self.expect("POST", "/v1/admin/models/bad.name/activate", 404, "model_not_found",
                    {"version": "1"})
        self.expect("POST", f"/v1/admin/models/{'x' * 200}/activate", 404, "not_found",
                    {"version": "1"})
        self.expect("POST", path, 400, "invalid_request", {"version": "../1"})
        self.expect("POST", path, 400, "invalid_request", {"version": "1", "extra": 1})
        self.expect("POST", path, 400, "invalid_request", {})
        self.expect("POST", path, 400, "invalid_request", ["1"])
        self.expect("POST", path, 400, "invalid_json", b'{"version": ')
        self.expect("POST", path, 415, "unsupported_media_type", {"version": "1"},
                    content_type="text/plain")
        self.too_large("POST", path, self.MAX_BODY)
        body = self.expect("POST", path, 422, "invalid_checkpoint", {"version": "shape"})
        self.assertIn("shape", body["error"]["message"])
        self.expect("GET", path, 405, "method_not_allowed")
        self.expect_auth_errors("POST", path, {"version": "1"},
                                forbidden_roles=("scorer", "reviewer"))
        after = self.models()["tiny"]
        states = {v["version"]: v for v in after["versions"]}
        self.assertEqual(after["active_version"], "2")
        self.assertEqual(states["2"]["role"], "active")
        self.assertEqual(states["3"]["state"], "retired")
        self.assertNotIn("role", states["3"])
        self.assertEqual(states["shape"]["state"], "failed")
        self.assertEqual(states["1"]["state"], "available")
        r = d.score({"items": tiny_b64_items(2, 1)})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.check_live("POST", "/v1/score", r)["model"]["version"], "2")

    # ------------------------------------------------------------------ upload
    def test_upload(self):
        path = "/v1/admin/models/up/versions/1"
        # a new model only with ?create_model=true
        self.expect("PUT", path, 404, "model_not_found", self.upload_body())
        self.expect("PUT", path + "?create_model=yes", 400, "invalid_request", self.upload_body())
        body = self.expect("PUT", path + "?create_model=true", 201, body=self.upload_body())
        self.assertEqual(body, {"model": "up", "version": "1", "state": "available", "created_model": True,
                                "sha256": hashlib.sha256(self.weights).hexdigest()})
        self.expect("PUT", path, 409, "version_exists", self.upload_body())
        self.expect("PUT", "/v1/admin/models/plainfile/versions/1", 409, "conflict",
                    self.upload_body())
        p2 = "/v1/admin/models/up/versions/2"
        self.expect("PUT", p2, 422, "checksum_mismatch", self.upload_body(digest="0" * 64))
        self.expect("PUT", p2, 422, "invalid_checkpoint",
                    self.upload_body(weights=self.weights[:-100]))
        bad = self.upload_body()
        bad["weights_b64"] = "***"
        self.expect("PUT", p2, 400, "invalid_base64", bad)
        self.expect("PUT", p2, 400, "invalid_json", b'{"config": ')
        self.expect("PUT", p2, 400, "invalid_request", {"config": {}})
        self.expect("PUT", p2, 400, "invalid_request", dict(self.upload_body(), extra=1))
        self.expect("PUT", "/v1/admin/models/bad.name/versions/2", 400, "invalid_request",
                    self.upload_body())
        self.expect("PUT", f"/v1/admin/models/{'x' * 200}/versions/2", 404, "not_found",
                    self.upload_body())
        self.expect("PUT", p2, 415, "unsupported_media_type", self.upload_body(),
                    content_type="text/plain")
        self.too_large("PUT", p2, self.MAX_UPLOAD)
        self.expect("POST", p2, 405, "method_not_allowed", {})
        self.expect_auth_errors("PUT", p2, self.upload_body(),
                                forbidden_roles=("scorer", "reviewer"))
        up = self.models()["up"]
        self.assertEqual((up["active_version"], [v["state"] for v in up["versions"]]),
                         (None, ["available"]))
        # a model in the repository without an active version is not ready for inference
        for path in ("/v2/models/up", "/v2/models/up/ready", "/v2/models/broken"):
            r = self.send("GET", path)
            self.assertEqual((r.status, r.error_code(), r.headers.get("Retry-After")),
                             (503, "not_ready", "5"), r)
            self.check_live("GET", path, r)
        # an upload bigger than --max-body-bytes but within --max-upload-bytes was accepted
        self.assertGreater(len(json.dumps(self.upload_body())), self.MAX_BODY)

    # ------------------------------------------------------------------ shadows
    def test_shadow(self):
        d, path = self.daemon, "/v1/admin/models/shadowed/shadow"
        self.assertEqual(self.models()["shadowed"]["active_version"], "3")
        self.expect("GET", path, 404, "no_shadow")
        self.expect("DELETE", path, 404, "no_shadow")
        body = self.expect("POST", path, 200, body={"version": "1"})
        self.assertEqual((body["shadow_version"], body["active_version"],
                          body["previous_shadow_version"]), ("1", "3", None))
        body = self.expect("POST", path, 200, body={"version": "2"})
        self.assertEqual(body["previous_shadow_version"], "1")
        listed = self.models()["shadowed"]
        states = {v["version"]: v for v in listed["versions"]}
        self.assertEqual(listed["shadow_version"], "2")
        self.assertEqual((states["2"]["state"], states["2"]["role"]), ("ready", "shadow"))
        self.assertEqual(states["1"]["state"], "retired")
        total = 0
        for k in range(3):
            r = d.score({"model": "shadowed", "items": tiny_b64_items(8, 300 + k, f"s{k}")})
            self.assertEqual(r.status, 200, r)
            self.check_live("POST", "/v1/score", r)
            total += 8
        self.assertTrue(H.wait_until(lambda: d.scalar(
            "SELECT count(*) FROM shadow_decisions WHERE model_name = 'shadowed'"
            " AND shadow_version = '2'") == total), "shadow rows did not all arrive")
        report = self.expect("GET", path, 200)
        self.assertEqual((report["items"], report["attached"], report["shadow_version"],
                          report["active_version"]), (total, True, "2", "3"))
        self.assertEqual(report["decision_flips"], 0)  # same weights, same policy
        self.assertEqual(report["label_agreement"], 1.0)
        # errors while attached
        self.expect("POST", path, 404, "version_not_found", {"version": "9"})
        self.expect("POST", path, 422, "invalid_checkpoint", {"version": "shape"})
        body = self.expect("POST", path, 422, "invalid_checkpoint", {"version": "0wide"})
        self.assertIn("D=", body["error"]["message"])
        self.expect("POST", path, 400, "invalid_request", {"version": ".hidden"})
        self.expect("POST", path, 400, "invalid_json", b"[")
        self.expect("POST", path, 415, "unsupported_media_type", {"version": "1"},
                    content_type="application/x-www-form-urlencoded")
        self.too_large("POST", path, self.MAX_BODY)
        self.expect("POST", "/v1/admin/models/broken/shadow", 503, "not_ready", {"version": "1"})
        for method in ("POST", "DELETE", "GET"):
            self.expect(method, "/v1/admin/models/nope/shadow", 404, "model_not_found",
                        {"version": "1"} if method == "POST" else None)
            self.expect(method, f"/v1/admin/models/{'x' * 130}/shadow", 404, "not_found",
                        {"version": "1"} if method == "POST" else None)
            self.expect_auth_errors(method, path, {"version": "2"} if method == "POST" else None,
                                    forbidden_roles=("scorer", "reviewer"))
        self.expect("PUT", path, 405, "method_not_allowed", {})
        # detach, then the past shadow's report
        body = self.expect("DELETE", path, 200)
        self.assertEqual(body, {"model": "shadowed", "shadow_version": None,
                                "previous_shadow_version": "2"})
        self.expect("DELETE", path, 404, "no_shadow")
        self.expect("GET", path, 404, "no_shadow")
        report = self.expect("GET", path + "?version=2", 200)
        self.assertEqual((report["items"], report["attached"]), (total, False))
        report = self.expect("GET", path + "?version=1", 200)
        self.assertEqual(report["items"], 0)
        self.assertIsNone(self.models()["shadowed"]["shadow_version"])

    # ------------------------------------------------------------------ keys
    def test_keys(self):
        d = self.daemon
        created = self.expect("POST", "/v1/admin/keys", 201,
                              body={"role": "scorer", "name": "openapi scorer"})
        key, key_id = created["key"], created["key_id"]
        self.assertTrue(key.startswith(key_id + "_"), created)
        r = d.score({"items": tiny_b64_items(1, 2)}, key=key)
        self.assertEqual(r.status, 200, r)
        self.check_live("POST", "/v1/score", r)
        listed = self.expect("GET", "/v1/admin/keys", 200)
        by_id = {k["key_id"]: k for k in listed["keys"]}
        self.assertEqual((by_id[key_id]["role"], by_id[key_id]["revoked_at"]), ("scorer", None))
        self.assertEqual(by_id[d.keys["admin"][:14]]["created_by"][:4], "cli:")
        revoked = self.expect("DELETE", f"/v1/admin/keys/{key_id}", 200)
        self.assertEqual((revoked["key_id"], revoked["revoked"]), (key_id, True))
        listed = self.expect("GET", "/v1/admin/keys", 200)
        mine = [k for k in listed["keys"] if k["key_id"] == key_id][0]
        self.assertIsNotNone(mine["revoked_at"])
        self.assertEqual(mine["revoked_by"], revoked["revoked_by"])
        self.assertTrue(H.wait_until(
            lambda: d.score({"items": tiny_b64_items(1, 3)}, key=key).status == 401))
        r = d.score({"items": tiny_b64_items(1, 3)}, key=key)
        self.check_live("POST", "/v1/score", r)
        self.expect("DELETE", f"/v1/admin/keys/{key_id}", 404, "key_not_found")
        self.expect("DELETE", "/v1/admin/keys/pgcld_00000000", 404, "key_not_found")
        self.expect("DELETE", "/v1/admin/keys/garbage", 404, "key_not_found")
        self.expect("DELETE", f"/v1/admin/keys/{'x' * 200}", 404, "not_found")
        self.expect("POST", "/v1/admin/keys", 400, "invalid_request", {"role": "boss", "name": "x"})
        self.expect("POST", "/v1/admin/keys", 400, "invalid_request", {"role": "admin", "name": ""})
        self.expect("POST", "/v1/admin/keys", 400, "invalid_request", {"role": "admin"})
        self.expect("POST", "/v1/admin/keys", 400, "invalid_request",
                    {"role": "admin", "name": "x", "key": "mine"})
        self.expect("POST", "/v1/admin/keys", 400, "invalid_json", b"{")
        self.expect("POST", "/v1/admin/keys", 415, "unsupported_media_type",
                    {"role": "admin", "name": "x"}, content_type="text/plain")
        self.too_large("POST", "/v1/admin/keys", self.MAX_BODY)
        self.expect("PUT", "/v1/admin/keys", 405, "method_not_allowed", {})
        self.expect("GET", "/v1/admin/keys/pgcld_00000000", 405, "method_not_allowed")
        for method, path, body in (("POST", "/v1/admin/keys", {"role": "admin", "name": "x"}),
                                   ("GET", "/v1/admin/keys", None),
                                   ("DELETE", "/v1/admin/keys/pgcld_00000000", None)):
            self.expect_auth_errors(method, path, body, forbidden_roles=("scorer", "reviewer"))
        # a revoked key is refused like an unknown one
        r = d.get("/v1/models", key=key)
        self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)
        self.check_live("GET", "/v1/models", r)

    # ------------------------------------------------------------------ metrics
    def test_metrics(self):
        d = self.daemon
        self.assertEqual(d.score({"items": tiny_b64_items(3, 9)}).status, 200)
        r = d.get("/metrics", key="")
        self.assertEqual(r.status, 200, r)
        text = self.check_live("GET", "/metrics", r)
        ctype = r.headers.get("Content-Type", "")
        self.assertIn("version=0.0.4", ctype.replace(" ", ""), ctype)
        live = parse_prometheus(text)
        documented = metric_families()
        self.assertEqual(set(live), set(documented), "live metric families differ from the spec")
        for name, fam in live.items():
            with self.subTest(family=name):
                doc = documented[name]
                self.assertEqual(fam["type"], doc["type"])
                for sample, labels, _value in fam["samples"]:
                    expected = set(doc["labels"])
                    if sample.endswith("_bucket"):
                        expected.add("le")
                    self.assertEqual(set(labels), expected, sample)
        routes = {lbl["route"] for _, lbl, _ in live["pgcld_requests_total"]["samples"]}
        self.assertIn("POST /v1/score", routes)
        known = {f"{m.upper()} {p}" for p, m, _ in SPEC.operations()} | {"unmatched"}
        self.assertTrue(routes <= known, routes - known)

    # ------------------------------------------------------------------ the test can fail
    def test_validation_rejects_wrong_admin_bodies(self):
        """Negative self-check for the new schemas: live bodies pass, mutated ones do not."""
        d = self.daemon

        def mutated(good, fn):
            b = copy.deepcopy(good)
            fn(b)
            return b

        def assert_rejected(schema, cases):
            for what, body in cases.items():
                with self.subTest(case=what):
                    self.assertTrue(validation_errors(schema, body),
                                    f"{what}: a wrong body passed validation")

        models = self.check_live("GET", "/v1/models", d.get("/v1/models"))
        schema = SPEC.schema_for(SPEC.response("/v1/models", "get", 200))
        self.assertFalse(validation_errors(schema, models))
        i = [m["name"] for m in models["models"]].index("shadowed")

        def version(b, state):
            """The active version for "ready", else the first version in that state."""
            return [v for v in b["models"][i]["versions"] if v["state"] == state and
                    (state != "ready" or v.get("role") == "active")][0]

        assert_rejected(schema, {
            "no shadow_version": mutated(models, lambda b: b["models"][i].pop("shadow_version")),
            "bad state": mutated(models, lambda b: version(b, "ready").__setitem__("state", "up")),
            "role on a failed version": mutated(
                models, lambda b: version(b, "failed").__setitem__("role", "active")),
            "task without role": mutated(
                models, lambda b: version(b, "ready").pop("role")),
            "active without dims": mutated(models, lambda b: version(b, "ready").pop("dims")),
            "failed without error": mutated(models, lambda b: version(b, "failed").pop("error")),
            "error on a ready version": mutated(
                models, lambda b: version(b, "ready").__setitem__("error", "x")),
            "bad role": mutated(models, lambda b: version(b, "ready").__setitem__("role", "boss")),
        })

        act = self.expect("POST", "/v1/admin/models/tiny/activate", 200, body={"version": "2"})
        schema = SPEC.schema_for(SPEC.response("/v1/admin/models/{name}/activate", "post", 200))
        assert_rejected(schema, {
            "no previous_version": mutated(act, lambda b: b.pop("previous_version")),
            "bad actor": mutated(act, lambda b: b.__setitem__("activated_by", "someone")),
            "short sha256": mutated(act, lambda b: b.__setitem__("sha256", "abc")),
        })

        bad = self.expect("GET", "/v1/admin/models/shadowed/shadow?version=..", 400, "invalid_request")
        self.assertEqual(bad["error"]["field"], "version")
        for q, field in (("version=1&version=2", "version"), ("colour=red", "colour")):
            bad = self.expect("GET", f"/v1/admin/models/shadowed/shadow?{q}", 400,
                              "invalid_request")
            self.assertEqual(bad["error"]["field"], field)
        report = self.expect("GET", "/v1/admin/models/shadowed/shadow?version=1", 200)
        schema = SPEC.schema_for(SPEC.response("/v1/admin/models/{name}/shadow", "get", 200))
        assert_rejected(schema, {
            "matrix without block": mutated(report, lambda b: b["decision_matrix"].pop("block")),
            "negative count": mutated(report, lambda b: b["decision_matrix"]["allow"].__setitem__(
                "review", -1)),
            "agreement > 1": mutated(report, lambda b: b.__setitem__("label_agreement", 1.5)),
            "attached as string": mutated(report, lambda b: b.__setitem__("attached", "yes")),
            "unknown member": mutated(report, lambda b: b.__setitem__("extra", 1)),
        })

        created = self.expect("POST", "/v1/admin/keys", 201,
                              body={"role": "reviewer", "name": "self-check"})
        schema = SPEC.schema_for(SPEC.response("/v1/admin/keys", "post", 201))
        assert_rejected(schema, {
            "short key": mutated(created, lambda b: b.__setitem__("key", b["key"][:-1])),
            "upper-case key_id": mutated(created, lambda b: b.__setitem__(
                "key_id", b["key_id"].upper())),
            "bad role": mutated(created, lambda b: b.__setitem__("role", "root")),
        })
        listed = self.expect("GET", "/v1/admin/keys", 200)
        schema = SPEC.schema_for(SPEC.response("/v1/admin/keys", "get", 200))
        assert_rejected(schema, {
            "digest listed": mutated(listed, lambda b: b["keys"][0].__setitem__("key_sha256", "0")),
            "revoked_by without revoked_at": mutated(
                listed, lambda b: b["keys"][0].__setitem__("revoked_by", "cli:x")),
            "bad created_at": mutated(
                listed, lambda b: b["keys"][0].__setitem__("created_at", "yesterday")),
        })
        # error schemas: a code documented under another status or another operation
        for (path, method, status), body in {
            ("/v1/admin/models/{name}/activate", "post", 404): error_body("no_shadow"),
            ("/v1/admin/models/{name}/activate", "post", 409): error_body("version_exists"),
            ("/v1/admin/models/{name}/versions/{version}", "put", 404):
                error_body("version_not_found"),
            ("/v1/admin/models/{name}/shadow", "delete", 404): error_body("version_not_found"),
            ("/v1/admin/keys/{key_id}", "delete", 404): error_body("model_not_found"),
            ("/v1/score", "post", 401): error_body("forbidden"),
            ("/v1/score", "post", 403): error_body("unauthorized"),
        }.items():
            with self.subTest(case=f"{method} {path} {status} {body['error']['code']}"):
                schema = SPEC.schema_for(SPEC.response(path, method, status))
                self.assertTrue(validation_errors(schema, body))
        # the live check fails on a 401 without WWW-Authenticate, and on wrong metrics text
        r = d.get("/v1/models", key="")
        self.assertEqual(r.status, 401)
        headers = r.headers.__class__()
        for k, v in r.headers.items():
            if k.lower() != "www-authenticate":
                headers[k] = v
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/v1/models", H.Response(401, headers, r.body))
        m = d.get("/metrics", key="")
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/metrics", H.Response(200, m.headers, b""))
        with self.assertRaises(ValueError):
            parse_prometheus("# TYPE pgcld_x counter\npgcld_x{a=b} 1\n")


class LiveAdminAuditLockTest(LiveValidationMixin, unittest.TestCase):
    """Another process holds the SQLite write lock: changes, contests and resolutions that cannot
    be recorded are refused with 503 audit_unavailable, and a second change of a model whose
    change is in progress gets 409 conflict."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-lock-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = os.path.join(cls.tmp, "models")
        for model in ("tiny", "other"):
            for v in ("1", "2"):
                tiny_copy(root, model, v)
        cls.daemon = H.start_daemon(cls, models=root, default_model="tiny")
        cls.resolver = cls.daemon.create_key("reviewer", "resolver")
        vdir = H.version_dir("tiny_binary")
        with open(os.path.join(vdir, "config.json"), encoding="utf-8") as f:
            cls.config = json.load(f)
        with open(os.path.join(vdir, "model.safetensors"), "rb") as f:
            cls.weights = f.read()

    @H.sqlite_only("write-locks the SQLite file and relies on its busy timeout (PostgreSQL going away: test_pg_fleet)")
    def test_locked_audit_database(self):
        d = self.daemon
        reviewer = d.keys["reviewer"]
        r = d.score({"items": tiny_b64_items(2, 7, "lock")})
        self.assertEqual(r.status, 200, r)
        contested, uncontested = (x["decision_id"] for x in r.json["results"])
        r = d.post(f"/v1/decisions/{contested}/contests", {"reason": "r"}, key=reviewer)
        self.assertEqual(r.status, 201, r)
        contest_id = r.json["contest_id"]
        self.assertTrue(H.wait_until(
            lambda: d.get("/v1/contests", key=self.resolver).status == 200))
        upload = {"config": self.config, "weights_b64": base64.b64encode(self.weights).decode(),
                  "weights_sha256": hashlib.sha256(self.weights).hexdigest()}
        blocked = [  # each of these needs a write, so waits for the lock and gives up
            ("POST", "/v1/admin/models/tiny/activate", {"version": "1"}),
            ("POST", "/v1/admin/models/other/shadow", {"version": "1"}),
            ("PUT", "/v1/admin/models/third/versions/5?create_model=true", upload),
            ("POST", "/v1/admin/keys", {"role": "scorer", "name": "locked out"}),
            ("DELETE", f"/v1/admin/keys/{d.keys['reviewer'][:14]}", None),
            ("POST", f"/v1/decisions/{uncontested}/contests", {"reason": "locked out"}),
            ("POST", f"/v1/contests/{contest_id}/resolution", {"outcome": "upheld", "note": "n"}),
        ]
        keys = {5: reviewer, 6: self.resolver}  # the others use the route's default key
        answers = {}
        lock = sqlite3.connect(d.db_path, timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")
            lock.execute("INSERT INTO schema_migrations SELECT * FROM schema_migrations WHERE 0")

            def call(i, method, path, body):
                answers[i] = d.request(method, path, body, key=keys.get(i), timeout=120)

            threads = [threading.Thread(target=call, args=(i, *c)) for i, c in enumerate(blocked)]
            for t in threads:
                t.start()
            # the 7 changes and this /metrics request are in flight; then the five that record
            # through the audit writer (activation, attachment, upload, contest, resolution; the
            # key changes use their own connections) have begun their change and wait in its queue
            # on the lock (they give up after the 5 s busy timeout): the daemon's own count, not a pause
            self.assertTrue(H.wait_until(lambda: (H.metric(d, "pgcld_in_flight_requests") or 0) >= len(blocked) + 1))
            self.assertTrue(H.wait_until(lambda: (H.metric(d, "pgcld_audit_queue_rows") or 0) >= 5),
                            f"the changes did not reach the audit writer: {H.metric(d, 'pgcld_audit_queue_rows')}")
            for method, path, body in (("POST", "/v1/admin/models/tiny/activate", {"version": "2"}),
                                       ("POST", "/v1/admin/models/tiny/shadow", {"version": "2"}),
                                       ("DELETE", "/v1/admin/models/tiny/shadow", None),
                                       ("POST", "/v1/admin/models/other/activate",
                                        {"version": "2"})):
                with self.subTest(conflict=f"{method} {path}"):
                    self.expect(method, path, 409, "conflict", body)
            for t in threads:
                t.join(130)
                self.assertFalse(t.is_alive(), "a change hung while the audit DB was locked")
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        for i, (method, path, _body) in enumerate(blocked):
            with self.subTest(blocked=f"{method} {path}"):
                r = answers[i]
                self.assertEqual((r.status, r.error_code()), (503, "audit_unavailable"), r)
                self.check_live(method, path, r)
        models = {m["name"]: m for m in self.check_live("GET", "/v1/models",
                                                        d.get("/v1/models"))["models"]}
        self.assertEqual(models["tiny"]["active_version"], "2", "a refused activation took effect")
        self.assertIsNone(models["other"]["shadow_version"], "a refused shadow was attached")
        self.assertEqual(models["third"]["versions"], [], "an upload that could not be recorded appeared")
        self.assertEqual(d.get("/v1/models", key=d.keys["reviewer"]).status, 200,
                         "a refused revocation took effect")
        self.assertEqual((d.scalar("SELECT count(*) FROM contests"),
                          d.scalar("SELECT count(*) FROM resolutions")), (1, 0),
                         "a refused contest or resolution was recorded")
        rec = self.check_live("GET", f"/v1/decisions/{contested}",
                              d.get(f"/v1/decisions/{contested}", key=reviewer))
        self.assertEqual(rec["effective_outcome"]["status"], "contested")


class LiveAuthOffTest(LiveValidationMixin, unittest.TestCase):
    """--auth off --metrics off: no key is needed, changes are made by `anonymous`, and /metrics
    is 404."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-noauth-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = os.path.join(cls.tmp, "models")
        for v in ("1", "2"):
            tiny_copy(root, "tiny", v)
        cls.daemon = H.start_daemon(cls, models=root, default_model="tiny", auth=False,
                                    args=["--metrics", "off"])

    def test_auth_off(self):
        d = self.daemon
        body = self.expect("POST", "/v1/admin/models/tiny/activate", 200, body={"version": "1"},
                           key="")
        self.assertEqual(body["activated_by"], "anonymous")
        r = d.score({"items": tiny_b64_items(1, 1)}, key="")
        self.assertEqual(r.status, 200, r)
        self.check_live("POST", "/v1/score", r)
        self.expect("POST", "/v1/score", 200, body=octets(H.random_embeddings(2, 32, 3)),
                    content_type=OCTETS, key="")
        self.expect("GET", "/v2/models/tiny", 200, key="")
        self.expect("GET", "/v2/models/tiny/ready", 200, key="")
        body = self.expect("POST", "/v2/models/tiny/infer", 200, key="",
                           body={"inputs": [embedding_tensor(H.random_embeddings(1, 32, 4))]})
        self.assertEqual(body["model_version"], "1")
        self.expect("GET", "/metrics", 404, "not_found", key="")
        created = self.expect("POST", "/v1/admin/keys", 201, body={"role": "admin", "name": "a"},
                              key="")
        revoked = self.expect("DELETE", f"/v1/admin/keys/{created['key_id']}", 200, key="")
        self.assertEqual(revoked["revoked_by"], "anonymous")
        listed = self.expect("GET", "/v1/admin/keys", 200, key="")
        self.assertEqual(listed["keys"][-1]["created_by"], "anonymous")
        # without --signing-key
        self.expect("POST", "/v1/audit/checkpoints", 409, "no_signing_key", key="")


def tearDownModule():
    print_validated_responses()


if __name__ == "__main__":
    unittest.main(verbosity=2)
