#!/usr/bin/python3
"""openapi.yaml is sane, and every live pgcld response matches the schema it documents.

1. Structure: OpenAPI 3.1, every operation has responses with descriptions, every $ref (and
   discriminator mapping) resolves, every component schema is valid Draft 2020-12, every example
   validates against its schema, and every error code of the contract is documented under the
   right status.
2. Live: requests to a real daemon (successes and errors on every endpoint); each response body is
   validated with jsonschema (Draft 2020-12, #/components refs inlined) against the schema for
   its path, method and status.
3. Self-check: deliberately wrong bodies must fail validation.

Run: /usr/bin/python3 tests/integration/test_openapi.py
"""

import copy
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jsonschema  # noqa: E402
import yaml  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

import harness as H  # noqa: E402

SPEC_PATH = os.path.join(H.SOURCE_ROOT, "openapi.yaml")
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# (code -> HTTP status) as the contract defines them; "route" errors are answered on any path.
CONTRACT_ERRORS = {
    "invalid_json": 400, "invalid_request": 400, "missing_id": 400, "dimension_mismatch": 400,
    "non_finite_value": 400, "invalid_base64": 400, "empty_batch": 400,
    "model_not_found": 404, "not_found": 404, "method_not_allowed": 405,
    "payload_too_large": 413, "batch_too_large": 413, "unsupported_media_type": 415,
    "not_ready": 503, "audit_unavailable": 503, "overloaded": 503, "internal_error": 500,
}
SCORE_ERRORS = {c: s for c, s in CONTRACT_ERRORS.items()
                if c not in ("not_found", "method_not_allowed")}


def load_spec(path=SPEC_PATH):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


class Spec:
    """The loaded document with $ref resolution (local refs only)."""

    def __init__(self, doc):
        self.doc = doc

    def pointer(self, ref):
        if not ref.startswith("#/"):
            raise KeyError(f"only local refs are supported: {ref}")
        node = self.doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(part)]
            else:
                node = node[part]
        return node

    def deref(self, node):
        """Follow a chain of {"$ref": ...} (responses, headers, schemas)."""
        seen = set()
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise ValueError(f"$ref cycle at {ref}")
            seen.add(ref)
            node = self.pointer(ref)
        return node

    def inline(self, node, stack=()):
        """A copy of a schema with every $ref replaced by the referenced schema. A $ref with
        sibling keywords becomes allOf [target] plus the siblings (2020-12 semantics)."""
        if isinstance(node, list):
            return [self.inline(x, stack) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and isinstance(node["$ref"], str):
            ref = node["$ref"]
            if ref in stack:
                raise ValueError(f"recursive schema via {ref}; cannot inline")
            target = self.inline(self.pointer(ref), stack + (ref,))
            siblings = {k: self.inline(v, stack) for k, v in node.items() if k != "$ref"}
            if not siblings:
                return target
            return {"allOf": [target], **siblings}
        return {k: self.inline(v, stack) for k, v in node.items()}

    def operations(self):
        for path, item in self.doc.get("paths", {}).items():
            for method in HTTP_METHODS:
                if method in item:
                    yield path, method, item[method]

    def response(self, path, method, status):
        """The response object documented for (path, method, status), or None. Paths that are
        not documented answer RouteNotFound; documented paths with another method answer the
        405 response of the path's operations."""
        status = str(status)
        item = self.doc["paths"].get(path)
        if item is None:
            if status != "404":
                return None
            return self.pointer("#/components/responses/RouteNotFound")
        op = item.get(method.lower())
        if op is None:
            if status != "405":
                return None
            for m in HTTP_METHODS:
                if m in item and "405" in item[m]["responses"]:
                    return self.deref(item[m]["responses"]["405"])
            return None
        responses = op["responses"]
        r = responses.get(status, responses.get("default"))
        return None if r is None else self.deref(r)

    def schema_for(self, response, media_type="application/json"):
        content = response.get("content") or {}
        if media_type not in content:
            return None
        return self.inline(content[media_type]["schema"])


def make_validator(schema):
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def validation_errors(schema, instance):
    v = make_validator(schema)
    return sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path))


def walk(node, path="#"):
    """Yield (json-pointer, node) for every dict in a document."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}/{i}")


DOC = load_spec()
SPEC = Spec(DOC)


class SpecStructureTest(unittest.TestCase):
    def test_openapi_31_header(self):
        self.assertTrue(str(DOC.get("openapi", "")).startswith("3.1."), DOC.get("openapi"))
        self.assertTrue(DOC["info"]["title"])
        self.assertTrue(DOC["info"]["version"])
        self.assertEqual(set(DOC["paths"]), {"/healthz", "/readyz", "/v1/models", "/v1/score"})

    def test_every_operation_has_responses(self):
        op_ids = []
        for path, method, op in SPEC.operations():
            where = f"{method.upper()} {path}"
            self.assertIn("operationId", op, where)
            op_ids.append(op["operationId"])
            responses = op.get("responses")
            self.assertTrue(responses, f"{where}: no responses")
            for status, resp in responses.items():
                self.assertIsInstance(status, str, f"{where}: status keys must be strings "
                                                   f"(quote them in YAML): {status!r}")
                self.assertTrue(status == "default" or
                                (status.isdigit() and 100 <= int(status) <= 599), status)
                r = SPEC.deref(resp)
                self.assertTrue(r.get("description"), f"{where} {status}: no description")
                if status != "204":
                    self.assertIn("application/json", r.get("content", {}),
                                  f"{where} {status}: no application/json content")
            self.assertTrue(any(s.startswith("2") for s in responses), f"{where}: no 2xx")
            for s in ("405", "500"):
                self.assertIn(s, responses, f"{where}: {s} not documented")
            allow = SPEC.deref(responses["405"]).get("headers", {}).get("Allow")
            self.assertIsNotNone(allow, f"{where}: 405 must document the Allow header")
            self.assertTrue(SPEC.deref(allow).get("required"), f"{where}: Allow must be required")
        self.assertEqual(len(op_ids), len(set(op_ids)), "operationIds must be unique")

    def test_every_ref_resolves(self):
        count = 0
        for where, node in walk(DOC):
            ref = node.get("$ref")
            if isinstance(ref, str):
                count += 1
                try:
                    SPEC.pointer(ref)
                except (KeyError, IndexError, ValueError) as e:
                    self.fail(f"{where}: $ref {ref} does not resolve ({e})")
            disc = node.get("discriminator")
            if isinstance(disc, dict):
                for value, target in disc.get("mapping", {}).items():
                    try:
                        SPEC.pointer(target)
                    except (KeyError, IndexError) as e:
                        self.fail(f"{where}: discriminator mapping {value} -> {target}: {e}")
        self.assertGreater(count, 20)

    def test_component_schemas_are_valid_2020_12(self):
        for name in DOC["components"]["schemas"]:
            with self.subTest(schema=name):
                Draft202012Validator.check_schema(
                    SPEC.inline({"$ref": f"#/components/schemas/{name}"}))

    def test_examples_validate(self):
        n = 0
        for where, node in walk(DOC):
            if "schema" not in node or not ("example" in node or "examples" in node):
                continue
            schema = SPEC.inline(node["schema"])
            examples = []
            if "example" in node:
                examples.append(("example", node["example"]))
            for k, ex in (node.get("examples") or {}).items():
                examples.append((k, SPEC.deref(ex)["value"]))
            for k, value in examples:
                n += 1
                errs = validation_errors(schema, value)
                self.assertFalse(errs, f"{where} {k}: " + "; ".join(e.message for e in errs[:3]))
        self.assertGreaterEqual(n, 10)

    def test_every_contract_error_is_documented(self):
        enum = set(DOC["components"]["schemas"]["ErrorCode"]["enum"])
        self.assertEqual(enum, set(CONTRACT_ERRORS))
        # /v1/score: every code its status documents accepts it, and no other status does
        for code, status in SCORE_ERRORS.items():
            body = {"error": {"code": code, "message": "m"}}
            resp = SPEC.response("/v1/score", "post", status)
            self.assertIsNotNone(resp, f"POST /v1/score {status} ({code}) not documented")
            self.assertFalse(validation_errors(SPEC.schema_for(resp), body),
                             f"POST /v1/score {status} does not accept code {code}")
            for other in ("400", "404", "413", "415", "500", "503"):
                if other == str(status):
                    continue
                o = SPEC.response("/v1/score", "post", other)
                self.assertTrue(validation_errors(SPEC.schema_for(o), body),
                                f"POST /v1/score {other} wrongly accepts code {code}")
        # route-level errors on every documented path
        for path in DOC["paths"]:
            for status, code in ((405, "method_not_allowed"),):
                resp = SPEC.response(path, "trace", status)
                self.assertIsNotNone(resp)
                self.assertFalse(validation_errors(
                    SPEC.schema_for(resp), {"error": {"code": code, "message": "m"}}))
        resp = SPEC.response("/no/such/path", "get", 404)
        self.assertFalse(validation_errors(SPEC.schema_for(resp),
                                           {"error": {"code": "not_found", "message": "m"}}))
        # per-item errors: item and field are documented
        detail = DOC["components"]["schemas"]["ErrorDetail"]["properties"]
        self.assertIn("item", detail)
        self.assertIn("field", detail)


class LiveValidationMixin:
    checked = []  # (method, path, status, code)

    def check_live(self, method, path, resp, spec_path=None):
        """Validate a live Response against the spec; returns the parsed body."""
        spec_path = spec_path or path.split("?")[0]
        where = f"{method} {path} -> {resp.status}"
        r = SPEC.response(spec_path, method, resp.status)
        self.assertIsNotNone(r, f"{where}: status {resp.status} is not documented for this "
                                f"path/method; body {resp.body[:300]!r}")
        content = r.get("content") or {}
        self.assertIn(resp.content_type, content,
                      f"{where}: Content-Type {resp.headers.get('Content-Type')!r} not documented")
        self.assertIsNotNone(resp.json, f"{where}: body is not JSON: {resp.body[:300]!r}")
        errs = validation_errors(SPEC.schema_for(r, resp.content_type), resp.json)
        if errs:
            self.fail(f"{where}: body does not match the schema: " +
                      " | ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                                 for e in errs[:5]) + f"\nbody: {resp.body[:500]!r}")
        for name, h in (r.get("headers") or {}).items():
            h = SPEC.deref(h)
            if h.get("required"):
                self.assertIsNotNone(resp.headers.get(name), f"{where}: header {name} missing")
        code = resp.json.get("error", {}).get("code") if isinstance(resp.json, dict) else None
        type(self).checked.append((method, spec_path, resp.status, code))
        return resp.json


class LiveTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity", "tiny_multi", "tiny_ordinal", "tiny_binary")
        cls.daemon = H.start_daemon(
            cls, models=["toxicity", "tiny_multi", "tiny_ordinal", "tiny_binary"],
            args=["--max-body-bytes", str(8 << 20)])
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.Z = H.random_embeddings(6, cls.D, seed=200)

    def test_health_endpoints(self):
        d = self.daemon
        self.check_live("GET", "/healthz", d.get("/healthz"))
        self.check_live("GET", "/readyz", d.get("/readyz"))
        body = self.check_live("GET", "/v1/models", d.get("/v1/models"))
        self.assertEqual(len(body["models"]), 4)
        for m, p in (("POST", "/healthz"), ("PUT", "/readyz"), ("DELETE", "/v1/models"),
                     ("POST", "/v1/models")):
            r = d.request(m, p, {} if m != "DELETE" else None)
            self.assertEqual(r.status, 405, r)
            self.check_live(m, p, r)

    def test_score_successes(self):
        d = self.daemon
        for body in (
            {"items": H.json_items(self.Z)},
            {"model": "toxicity", "items": H.b64_items(self.Z), "return_vector": False},
            {"model": "tiny_multi", "items": H.json_items(H.random_embeddings(3, 32, 1))},
            {"model": "tiny_ordinal", "items": H.b64_items(H.random_embeddings(3, 32, 2))},
            {"model": "tiny_binary", "items": H.b64_items(H.random_embeddings(3, 32, 3)),
             "return_vector": True},
        ):
            r = d.score(body)
            self.assertEqual(r.status, 200, r)
            self.check_live("POST", "/v1/score", r)

    def test_score_errors(self):
        d = self.daemon
        good = H.b64_items(self.Z[:2])
        bad_dim = [{"id": "x", "embedding": [0.5] * (self.D - 1)}]
        nan = self.Z[0].copy()
        nan[0] = float("nan")
        cases = [
            (b'{"items": [', 400, "invalid_json"),
            ({"items": good, "bogus": 1}, 400, "invalid_request"),
            ({"items": [{"embedding_b64": good[0]["embedding_b64"]}]}, 400, "missing_id"),
            ({"items": good + bad_dim}, 400, "dimension_mismatch"),
            ({"items": [{"id": "n", "embedding_b64": H.embedding_b64(nan)}]}, 400,
             "non_finite_value"),
            ({"items": [{"id": "b", "embedding_b64": "***"}]}, 400, "invalid_base64"),
            ({"items": []}, 400, "empty_batch"),
            ({"model": "nope", "items": good}, 404, "model_not_found"),
        ]
        for body, status, code in cases:
            with self.subTest(code=code):
                r = d.score(body)
                self.assertEqual((r.status, r.error_code()), (status, code), r)
                self.check_live("POST", "/v1/score", r)
        r = d.score({"items": good}, content_type="text/plain")
        self.assertEqual((r.status, r.error_code()), (415, "unsupported_media_type"), r)
        self.check_live("POST", "/v1/score", r)
        r = d.get("/v1/score")
        self.assertEqual((r.status, r.error_code()), (405, "method_not_allowed"), r)
        self.check_live("GET", "/v1/score", r)

    def test_unknown_routes(self):
        for m, p in (("GET", "/nope"), ("POST", "/v2/score"), ("GET", "/v1/models/x")):
            r = self.daemon.request(m, p, {"items": []} if m == "POST" else None)
            self.assertEqual((r.status, r.error_code()), (404, "not_found"), r)
            self.check_live(m, p, r)

    # ------------------------------------------------------------------ the test can fail
    def test_validation_rejects_wrong_bodies(self):
        """Negative self-check: the same validation must reject deliberately wrong bodies."""
        r = self.daemon.score({"items": H.b64_items(self.Z[:2])})
        self.assertEqual(r.status, 200, r)
        good = self.check_live("POST", "/v1/score", r)  # positive control
        schema = SPEC.schema_for(SPEC.response("/v1/score", "post", 200))
        self.assertFalse(validation_errors(schema, good))

        def mutated(fn):
            b = copy.deepcopy(good)
            fn(b)
            return b

        wrong = {
            "bad decision": mutated(lambda b: b["results"][0].__setitem__("decision", "maybe")),
            "no decision_id": mutated(lambda b: b["results"][0].pop("decision_id")),
            "uuid v4 decision_id": mutated(lambda b: b["results"][0].__setitem__(
                "decision_id", "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f")),
            "probability > 1": mutated(lambda b: b["results"][0]["probabilities"].__setitem__(
                "toxic", 1.5)),
            "vector of strings": mutated(lambda b: b["results"][1].__setitem__("vector", ["x"])),
            "unknown member": mutated(lambda b: b.__setitem__("extra", 1)),
            "no results": mutated(lambda b: b.pop("results")),
            "bad policy kind": mutated(lambda b: b["policy"].__setitem__("kind", "magic")),
            "short sha256": mutated(lambda b: b["model"].__setitem__("sha256", "abc")),
            "error body": {"error": {"code": "invalid_json", "message": "m"}},
        }
        for what, body in wrong.items():
            with self.subTest(case=what):
                self.assertTrue(validation_errors(schema, body),
                                f"{what}: a wrong body passed validation")
        err_schema = SPEC.schema_for(SPEC.response("/v1/score", "post", 400))
        for what, body in {
            "unknown code": {"error": {"code": "oops", "message": "m"}},
            "404 code under 400": {"error": {"code": "model_not_found", "message": "m"}},
            "no message": {"error": {"code": "invalid_json"}},
            "string item": {"error": {"code": "missing_id", "message": "m", "item": "3"}},
            "negative item": {"error": {"code": "missing_id", "message": "m", "item": -1}},
            "flat error": {"code": "invalid_json", "message": "m"},
        }.items():
            with self.subTest(case=what):
                self.assertTrue(validation_errors(err_schema, body),
                                f"{what}: a wrong error body passed validation")
        # and the live check itself fails on an undocumented status or a wrong body
        fake = H.Response(418, r.headers, r.body)
        with self.assertRaises(AssertionError):
            self.check_live("POST", "/v1/score", fake)
        fake = H.Response(200, r.headers, json.dumps(wrong["bad decision"]).encode())
        with self.assertRaises(AssertionError):
            self.check_live("POST", "/v1/score", fake)
        fake = H.Response(200, r.headers, b'{"status": "not ok"}')
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/healthz", fake)


class LiveLimitsTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity", "tiny_binary")
        cls.daemon = H.start_daemon(cls, models=["toxicity", "tiny_binary"],
                                    args=["--max-batch", "8", "--max-body-bytes", "100000"])

    def test_413(self):
        d = self.daemon
        r = d.score({"model": "tiny_binary", "items": H.b64_items(H.random_embeddings(9, 32, 5))})
        self.assertEqual((r.status, r.error_code()), (413, "batch_too_large"), r)
        self.check_live("POST", "/v1/score", r)
        body = json.dumps({"items": H.json_items(H.random_embeddings(8, 1024, 6))})
        r = d.score(body.encode())
        self.assertEqual((r.status, r.error_code()), (413, "payload_too_large"), r)
        self.check_live("POST", "/v1/score", r)


class LiveNotReadyTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        src = tempfile.mkdtemp(prefix="pgcld-broken-")
        cls.addClassCleanup(shutil.rmtree, src, True)
        broken = os.path.join(src, "toxicity")
        shutil.copytree(H.model_source("tiny_binary"), broken)
        cfg_path = os.path.join(broken, "1", "config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        cfg["dims"]["D"] = cfg["dims"]["D"] + 1  # weights no longer match
        cfg.pop("golden", None)
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        cls.daemon = H.start_daemon(cls, models=[], extra_models={"toxicity": broken})

    def test_not_ready_responses(self):
        d = self.daemon
        r = d.get("/readyz")
        self.assertEqual(r.status, 503, r)
        self.check_live("GET", "/readyz", r)
        r = d.get("/v1/models")
        self.assertEqual(r.status, 200, r)
        body = self.check_live("GET", "/v1/models", r)
        states = {m["name"]: [v["state"] for v in m["versions"]] for m in body["models"]}
        self.assertEqual(states.get("toxicity"), ["failed"], body)
        r = d.score({"items": H.b64_items(H.random_embeddings(1, 32, 1))})
        # the contract leaves open whether a model with no loaded version is 503 or 404
        self.assertIn((r.status, r.error_code()), ((503, "not_ready"), (404, "model_not_found")),
                      r)
        self.check_live("POST", "/v1/score", r)


class LiveOverloadTest(LiveValidationMixin, unittest.TestCase):
    """Under audit back-pressure (a tiny --max-pending-rows and 16 parallel clients) every answer
    is still one the contract documents, and only answered decisions are written."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.daemon = H.start_daemon(cls, models=["tiny_binary"], default_model="tiny_binary",
                                    args=["--max-pending-rows", "8"])

    def test_backpressure_answers_are_documented(self):
        import threading
        d = self.daemon
        before = d.count()
        Z = H.random_embeddings(8, 32, seed=40)
        answers, lock = [], threading.Lock()

        def client():
            for _ in range(20):
                r = d.score({"items": H.b64_items(Z)})
                with lock:
                    answers.append(r)

        threads = [threading.Thread(target=client) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        ok = [r for r in answers if r.status == 200]
        self.assertEqual(d.count(), before + 8 * len(ok),
                         "rows written for requests that were not answered 200")
        seen = {}
        for r in answers:
            seen.setdefault((r.status, r.error_code()), r)
        for (status, code), r in sorted(seen.items(), key=str):
            with self.subTest(status=status, code=code):
                self.check_live("POST", "/v1/score", r)


def tearDownModule():
    statuses = sorted({(m, p, s) for m, p, s, _ in LiveValidationMixin.checked})
    if statuses:
        print("\nvalidated live responses: " +
              ", ".join(f"{m} {p} {s}" for m, p, s in statuses), file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
