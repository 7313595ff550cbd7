#!/usr/bin/python3
"""openapi.yaml is sane, and every live pgcld response matches the schema it documents.

1. Structure: OpenAPI 3.1, every operation has responses with descriptions, every $ref (and
   discriminator mapping) resolves, every component schema is valid Draft 2020-12, every example
   validates against its schema, every error code of the contract is documented under the right
   status of exactly the operations that answer it, and the documented operations, their
   security and their roles match the daemon's route table (server/http/route_table.c).
2. Live: requests to real daemons (successes and errors on every endpoint, 401 and 403
   included); each response body is validated with jsonschema (Draft 2020-12, #/components refs
   inlined) against the schema for its path, method, status and media type, and each required
   response header is checked; a newline-delimited JSON body is also validated line by line
   against its media type's x-item-schema, and a CSV body against its x-csv-columns.
3. Self-check: deliberately wrong bodies must fail validation.

Run: /usr/bin/python3 tests/integration/test_openapi.py
"""

import base64
import copy
import csv
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jsonschema  # noqa: E402,F401
import yaml  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

import harness as H  # noqa: E402
import numpy as np  # noqa: E402

SPEC_PATH = os.path.join(H.SOURCE_ROOT, "openapi.yaml")
ROUTE_TABLE_C = os.path.join(H.SOURCE_ROOT, "server", "http", "route_table.c")
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# (code -> HTTP status) as the contract defines them; "route" errors are answered on any path.
CONTRACT_ERRORS = {
    "invalid_json": 400, "invalid_request": 400, "missing_id": 400, "dimension_mismatch": 400,
    "non_finite_value": 400, "invalid_base64": 400, "empty_batch": 400,
    "unauthorized": 401, "forbidden": 403,
    "model_not_found": 404, "version_not_found": 404, "no_shadow": 404, "key_not_found": 404,
    "not_found": 404, "method_not_allowed": 405,
    "conflict": 409, "version_exists": 409, "idempotency_in_flight": 409, "idempotency_key_reused": 422,
    "rate_limited": 429,
    "payload_too_large": 413, "batch_too_large": 413, "unsupported_media_type": 415,
    "invalid_checkpoint": 422, "checksum_mismatch": 422,
    "not_ready": 503, "audit_unavailable": 503, "overloaded": 503, "internal_error": 500,
    # reviewers and the audit log
    "invalid_cursor": 400, "filer_cannot_resolve": 403, "decision_not_found": 404,
    "contest_not_found": 404, "contest_open": 409, "already_resolved": 409,
    "input_not_stored": 409, "input_incompatible": 409, "no_signing_key": 409, "empty_chain": 409,
    "contest_window_closed": 422, "invalid_label": 422, "checkpoint_failed": 500,
    "input_not_rescorable": 409, "shadow_is_active": 409,
    # the request's head, checked before routing on every path (documented in info.description)
    "not_implemented": 501,
}
# Answered before routing, whatever the path (a Transfer-Encoding other than chunked).
HEAD_ERRORS = {"not_implemented"}
# A code one operation answers with another status than CONTRACT_ERRORS says (documented in the
# ErrorCode schema): (method, path) -> {code: status}.
STATUS_OVERRIDES = {}


def status_of(method, path, code):
    """The HTTP status the operation answers code with."""
    return STATUS_OVERRIDES.get((method, path), {}).get(code, CONTRACT_ERRORS[code])


# Answered by every operation of a documented path.
ROUTE_ERRORS = {"method_not_allowed", "internal_error"}
AUTH_ERRORS = {"unauthorized", "forbidden"}
BODY_ERRORS = {"invalid_json", "invalid_request", "payload_too_large", "unsupported_media_type"}
READ_ERRORS = {"overloaded", "audit_unavailable"}
# The error codes each operation answers (besides ROUTE_ERRORS), and nothing else.
OPERATION_ERRORS = {
    ("get", "/healthz"): set(),
    ("get", "/readyz"): set(),
    ("get", "/metrics"): {"not_found"},
    ("get", "/console"): set(),
    ("get", "/console/"): set(),
    ("get", "/console/{file}"): {"not_found"},
    ("get", "/v1/models"): AUTH_ERRORS | {"invalid_request"},
    ("post", "/v1/score"): AUTH_ERRORS | {
        "invalid_json", "invalid_request", "missing_id", "dimension_mismatch", "non_finite_value",
        "invalid_base64", "empty_batch", "model_not_found", "payload_too_large", "batch_too_large",
        "unsupported_media_type", "not_ready", "audit_unavailable", "overloaded",
        "idempotency_in_flight", "idempotency_key_reused", "rate_limited"},
    ("post", "/v1/admin/models/{name}/activate"): AUTH_ERRORS | BODY_ERRORS | {
        "model_not_found", "version_not_found", "not_found", "conflict", "invalid_checkpoint",
        "audit_unavailable"},
    ("put", "/v1/admin/models/{name}/versions/{version}"): AUTH_ERRORS | BODY_ERRORS | {
        "invalid_base64", "model_not_found", "not_found", "version_exists", "conflict", "checksum_mismatch",
        "invalid_checkpoint", "audit_unavailable"},
    ("post", "/v1/admin/models/{name}/shadow"): AUTH_ERRORS | BODY_ERRORS | {
        "model_not_found", "version_not_found", "not_found", "conflict", "shadow_is_active",
        "invalid_checkpoint", "not_ready", "audit_unavailable"},
    ("delete", "/v1/admin/models/{name}/shadow"): AUTH_ERRORS | {
        "invalid_request", "model_not_found", "no_shadow", "not_found", "conflict", "audit_unavailable"},
    ("get", "/v1/admin/models/{name}/shadow"): AUTH_ERRORS | {
        "invalid_request", "model_not_found", "no_shadow", "version_not_found", "not_found",
        "audit_unavailable"},
    ("post", "/v1/admin/keys"): AUTH_ERRORS | BODY_ERRORS | {"audit_unavailable"},
    ("get", "/v1/admin/keys"): AUTH_ERRORS | {"invalid_request", "audit_unavailable"},
    ("delete", "/v1/admin/keys/{key_id}"): AUTH_ERRORS | {
        "invalid_request", "key_not_found", "not_found", "audit_unavailable"},
    # reviewer reads: 503 overloaded / audit_unavailable when the database cannot be read
    ("get", "/v1/decisions"): AUTH_ERRORS | READ_ERRORS | {"invalid_request", "invalid_cursor"},
    ("get", "/v1/decisions/{id}"): AUTH_ERRORS | READ_ERRORS | {
        "invalid_request", "decision_not_found", "not_found"},
    ("get", "/v1/decisions/{id}/statement"): AUTH_ERRORS | READ_ERRORS | {
        "invalid_request", "decision_not_found", "not_found"},
    ("get", "/v1/contests"): AUTH_ERRORS | READ_ERRORS | {"invalid_request", "invalid_cursor"},
    ("get", "/v1/audit/export"): AUTH_ERRORS | READ_ERRORS | {"invalid_request"},
    ("get", "/v1/audit/stats"): AUTH_ERRORS | READ_ERRORS | {"invalid_request"},
    # reviewer writes (audit events): 503 audit_unavailable when they cannot be recorded
    ("post", "/v1/decisions/{id}/contests"): AUTH_ERRORS | BODY_ERRORS | {
        "invalid_json", "decision_not_found", "not_found", "contest_open", "contest_window_closed",
        "audit_unavailable"},
    ("post", "/v1/contests/{id}/resolution"): AUTH_ERRORS | BODY_ERRORS | {
        "contest_not_found", "not_found", "filer_cannot_resolve", "already_resolved",
        "invalid_label", "audit_unavailable"},
    ("post", "/v1/decisions/{id}/rescore"): AUTH_ERRORS | {
        "invalid_request", "decision_not_found", "not_found", "input_not_stored", "input_incompatible",
        "input_not_rescorable", "not_ready", "audit_unavailable"},
    # the chain
    ("get", "/v1/audit/verify"): AUTH_ERRORS | {"invalid_request", "audit_unavailable"},
    ("post", "/v1/audit/checkpoints"): AUTH_ERRORS | BODY_ERRORS | {
        "no_signing_key", "empty_chain", "checkpoint_failed"},
    # the Open Inference Protocol (KServe v2): public health and metadata, model metadata for every
    # role, inference for scorers
    ("get", "/v2"): set(),
    ("get", "/v2/health/live"): set(),
    ("get", "/v2/health/ready"): set(),
    ("get", "/v2/models/{name}"): AUTH_ERRORS | {"invalid_request", "model_not_found", "not_found", "not_ready"},
    ("get", "/v2/models/{name}/ready"): AUTH_ERRORS | {"invalid_request", "model_not_found", "not_found",
                                                       "not_ready"},
    ("post", "/v2/models/{name}/infer"): AUTH_ERRORS | {
        "invalid_json", "invalid_request", "dimension_mismatch", "non_finite_value", "empty_batch",
        "model_not_found", "not_found", "payload_too_large", "batch_too_large",
        "unsupported_media_type", "not_ready", "audit_unavailable", "overloaded", "rate_limited",
        "idempotency_in_flight", "idempotency_key_reused"},
}
ALL_ROLES = ["scorer", "reviewer", "admin"]


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
EXPORT_COLUMNS = ["decision_id", "seq", "created_at", "item_id", "request_id", "model_name",
                  "model_version", "label", "decision", "toxicity", "contest_status",
                  "probabilities", "vector"]


def template_regex(template):
    return re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$")


def spec_path_for(path):
    """The documented path (template) a concrete request path falls under, or the path itself
    when none does (it is then an undocumented path: RouteNotFound)."""
    path = path.split("?")[0]
    if path in DOC["paths"]:
        return path
    for template in DOC["paths"]:
        if "{" in template and template_regex(template).match(path):
            return template
    return path


def error_body(code):
    return {"error": {"code": code, "message": "m"}}


def ndjson_documents(text):
    """The JSON documents of a newline-delimited JSON text (every line ends in a newline).
    Raises ValueError when it is not one."""
    if text and not text.endswith("\n"):
        raise ValueError("the last line does not end with a newline")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def csv_rows(text, columns):
    """The records of an RFC 4180 text with CRLF line ends whose header is columns, as dicts of
    strings. Raises ValueError otherwise."""
    if not text.endswith("\r\n"):
        raise ValueError("the CSV text does not end with CRLF")
    records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    if not records or records[0] != list(columns):
        raise ValueError(f"CSV header {records[:1]} is not {columns}")
    for i, rec in enumerate(records[1:], 1):
        if len(rec) != len(columns):
            raise ValueError(f"CSV record {i} has {len(rec)} fields, not {len(columns)}")
    return [dict(zip(columns, rec)) for rec in records[1:]]


def csv_export_record(row):
    """A CSV export record as the JSON record it stands for (numbers in decimal, null as an
    empty field, probabilities and vector as JSON text)."""
    out = dict(row)
    out["seq"] = int(row["seq"])
    out["toxicity"] = float(row["toxicity"]) if row["toxicity"] != "" else None
    out["probabilities"] = json.loads(row["probabilities"])
    out["vector"] = json.loads(row["vector"])
    return out


def read_route_table():
    """(method, pattern) -> roles (sorted list; [] for public routes) from server/http/route_table.c."""
    with open(ROUTE_TABLE_C, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("g_routes[] = {"):]
    table = table[:table.index("};")]
    routes = {}
    for m in re.finditer(r'\{"([A-Z]+)",\s*"([^"]+)",\s*\w+,\s*([A-Z_| ]+?),\s*(true|false),\s*\w+\}',
                         table):
        method, pattern, roles, _upload = m.groups()
        roles = roles.strip()
        if roles == "ANYONE":
            names = []
        elif roles == "ANY_ROLE":
            names = list(ALL_ROLES)
        else:
            names = [r.strip().replace("PGCL_ROLE_", "").lower() for r in roles.split("|")]
        routes[(method.lower(), pattern)] = sorted(names)
    return routes


def parse_prometheus(text):
    """{family: {"type", "help", "samples": [(name, {label: value}, value)]}} of a text exposition.
    Raises ValueError on a malformed line."""
    families, current = {}, None
    sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
    if not text.endswith("\n"):
        raise ValueError("the exposition must end with a newline")
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            current = families.setdefault(name, {"type": None, "help": help_text, "samples": []})
            continue
        if line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            if typ not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ValueError(f"bad TYPE line {line!r}")
            current = families.setdefault(name, {"type": None, "help": "", "samples": []})
            current["type"] = typ
            continue
        if line.startswith("#"):
            continue
        m = sample_re.match(line)
        if not m:
            raise ValueError(f"bad sample line {line!r}")
        name, labels_text, value = m.groups()
        float(value)  # ValueError when not a number (+Inf, NaN are accepted by float())
        labels = {}
        if labels_text:
            pos = 0
            for lm in label_re.finditer(labels_text):
                if lm.start() != pos:
                    raise ValueError(f"bad labels in {line!r}")
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
            if pos != len(labels_text):
                raise ValueError(f"bad labels in {line!r}")
        family = None
        for fam in families:
            if name == fam or (families[fam]["type"] == "histogram" and
                               name in (fam + "_bucket", fam + "_sum", fam + "_count")):
                family = fam
        if family is None:
            raise ValueError(f"sample {name} before its # TYPE line")
        families[family]["samples"].append((name, labels, float(value)))
    return families


def metric_families():
    resp = SPEC.response("/metrics", "get", 200)
    return {f["name"]: f for f in resp["x-metric-families"]}


class SpecStructureTest(unittest.TestCase):
    def test_openapi_31_header(self):
        self.assertTrue(str(DOC.get("openapi", "")).startswith("3.1."), DOC.get("openapi"))
        self.assertTrue(DOC["info"]["title"])
        self.assertTrue(DOC["info"]["version"])
        self.assertEqual(set(DOC["paths"]), {
            "/healthz", "/readyz", "/metrics", "/v1/models", "/v1/score",
            "/v1/admin/models/{name}/activate", "/v1/admin/models/{name}/versions/{version}",
            "/v1/admin/models/{name}/shadow", "/v1/admin/keys", "/v1/admin/keys/{key_id}",
            "/v1/decisions", "/v1/decisions/{id}", "/v1/decisions/{id}/statement",
            "/v1/decisions/{id}/contests", "/v1/decisions/{id}/rescore", "/v1/contests",
            "/v1/contests/{id}/resolution", "/v1/audit/export", "/v1/audit/stats",
            "/v1/audit/verify", "/v1/audit/checkpoints", "/v2", "/v2/health/live",
            "/v2/health/ready", "/v2/models/{name}", "/v2/models/{name}/ready",
            "/v2/models/{name}/infer", "/console", "/console/", "/console/{file}"})

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
                if status == "204":
                    continue
                content = r.get("content", {})
                self.assertTrue(content, f"{where} {status}: no content")
                if not status.startswith("2"):  # errors are always JSON
                    self.assertIn("application/json", content,
                                  f"{where} {status}: no application/json content")
                for media_type, media in content.items():
                    self.assertIn("schema", media, f"{where} {status} {media_type}: no schema")
            self.assertTrue(any(s.startswith("2") for s in responses), f"{where}: no 2xx")
            for s in ("405", "500"):
                self.assertIn(s, responses, f"{where}: {s} not documented")
            allow = SPEC.deref(responses["405"]).get("headers", {}).get("Allow")
            self.assertIsNotNone(allow, f"{where}: 405 must document the Allow header")
            self.assertTrue(SPEC.deref(allow).get("required"), f"{where}: Allow must be required")
            # path parameters are declared
            params = [SPEC.deref(p) for p in
                      DOC["paths"][path].get("parameters", []) + op.get("parameters", [])]
            declared = {p["name"] for p in params if p["in"] == "path"}
            self.assertEqual(declared, set(re.findall(r"\{([^}]+)\}", path)), where)
            for p in params:
                if p["in"] == "path":
                    self.assertTrue(p.get("required"), f"{where}: path parameter {p['name']}")
        self.assertEqual(len(op_ids), len(set(op_ids)), "operationIds must be unique")

    def test_security(self):
        schemes = DOC["components"]["securitySchemes"]
        self.assertEqual(set(schemes), {"bearerAuth"})
        bearer = schemes["bearerAuth"]
        self.assertEqual((bearer["type"], bearer["scheme"]), ("http", "bearer"))
        self.assertIn("pgcld_", bearer.get("bearerFormat", ""))
        self.assertNotIn("security", DOC, "security is applied per operation")
        key_schema = SPEC.inline({"$ref": "#/components/schemas/ApiKey"})
        sample = "pgcld_0123abcd_" + "A-_z" * 10 + "xyz"
        self.assertFalse(validation_errors(key_schema, sample))
        for bad in (sample[:-1], sample.replace("0123abcd", "0123ABCD"), sample + "A",
                    "pgcld_0123abcd", sample.replace("_A", "+A", 1)):
            self.assertTrue(validation_errors(key_schema, bad), bad)
        for path, method, op in SPEC.operations():
            where = f"{method.upper()} {path}"
            self.assertIn("security", op, f"{where}: no security (use [] for public operations)")
            self.assertIn("x-roles", op, f"{where}: no x-roles")
            roles = op["x-roles"]
            self.assertTrue(set(roles) <= set(ALL_ROLES), f"{where}: {roles}")
            responses = op["responses"]
            if not roles:
                self.assertEqual(op["security"], [], where)
                self.assertNotIn("401", responses, where)
                self.assertNotIn("403", responses, where)
                continue
            self.assertEqual(op["security"], [{"bearerAuth": []}], where)
            for role in roles:
                self.assertIn(role, op["description"], f"{where}: roles not in the description")
            for status, code in (("401", "unauthorized"), ("403", "forbidden")):
                self.assertIn(status, responses, f"{where}: {status} not documented")
                r = SPEC.deref(responses[status])
                self.assertFalse(validation_errors(SPEC.schema_for(r), error_body(code)), where)
            www = SPEC.deref(SPEC.deref(responses["401"])["headers"]["WWW-Authenticate"])
            self.assertTrue(www.get("required"), f"{where}: WWW-Authenticate must be required")
            self.assertFalse(validation_errors(www["schema"], "Bearer"))

    def test_operations_match_the_route_table(self):
        routes = read_route_table()
        self.assertGreaterEqual(len(routes), 13, "could not parse g_routes in server/http/route_table.c")
        documented = {(method, path): sorted(op["x-roles"])
                      for path, method, op in SPEC.operations()}
        self.assertEqual(set(documented), set(routes),
                         "the documented operations differ from the daemon's routes")
        for key, roles in routes.items():
            self.assertEqual(documented[key], roles, f"{key}: x-roles differ from the route table")
        self.assertEqual(set(OPERATION_ERRORS), set(routes))

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
        self.assertGreaterEqual(n, 30)
        # the metrics example is a valid exposition
        example = SPEC.response("/metrics", "get", 200)["content"]["text/plain"]["example"]
        self.assertTrue(parse_prometheus(example))

    def test_metric_families_documented(self):
        fams = SPEC.response("/metrics", "get", 200).get("x-metric-families")
        self.assertTrue(fams, "x-metric-families missing")
        names = [f["name"] for f in fams]
        self.assertEqual(len(names), len(set(names)))
        for f in fams:
            self.assertTrue(f["name"].startswith("pgcld_"), f)
            self.assertIn(f["type"], ("counter", "gauge", "histogram"), f)
            self.assertIsInstance(f["labels"], list, f)
            self.assertTrue(f["help"], f)
            if f["type"] == "counter":
                self.assertTrue(f["name"].endswith("_total"), f)

    def test_streamed_media_types(self):
        """x-item-schema (one JSON document per line) and x-csv-columns: the extension's schema
        resolves and the example follows it."""
        n = 0
        for where, node in walk(DOC):
            if "x-item-schema" in node:
                n += 1
                item = SPEC.inline(node["x-item-schema"])
                Draft202012Validator.check_schema(item)
                docs = ndjson_documents(node["example"])
                self.assertTrue(docs, where)
                for doc in docs:
                    self.assertFalse(validation_errors(item, doc), where)
            if "x-csv-columns" in node:
                n += 1
                rows = csv_rows(node["example"], node["x-csv-columns"])
                self.assertTrue(rows, where)
                export = SPEC.inline({"$ref": "#/components/schemas/ExportRecord"})
                self.assertEqual(list(export["properties"]), node["x-csv-columns"])
                for row in rows:
                    self.assertFalse(validation_errors(export, csv_export_record(row)), where)
        self.assertEqual(n, 2)
        with self.assertRaises(ValueError):
            ndjson_documents('{"a": 1}')
        with self.assertRaises(ValueError):
            csv_rows("a,b\r\n1\r\n", ["a", "b"])

    def test_every_contract_error_is_documented(self):
        enum = set(DOC["components"]["schemas"]["ErrorCode"]["enum"])
        self.assertEqual(enum, set(CONTRACT_ERRORS))
        answered = set().union(*OPERATION_ERRORS.values()) | ROUTE_ERRORS | HEAD_ERRORS | {"not_found"}
        self.assertEqual(answered, set(CONTRACT_ERRORS), "codes no operation answers")
        # Per operation: each status's error schema accepts exactly the codes the operation
        # answers with that status (so a code is neither missing nor documented where it is not
        # answered).
        for (method, path), codes in OPERATION_ERRORS.items():
            where = f"{method.upper()} {path}"
            codes = codes | ROUTE_ERRORS
            op = DOC["paths"][path][method]
            for status in op["responses"]:
                if int(status) < 400:
                    continue
                validator = make_validator(SPEC.schema_for(SPEC.response(path, method, status)))
                accepted = {c for c in CONTRACT_ERRORS if validator.is_valid(error_body(c))}
                expected = {c for c in codes if str(status_of(method, path, c)) == status}
                self.assertEqual(accepted, expected, f"{where} {status}: error codes")
            for code in codes:
                self.assertIn(str(status_of(method, path, code)), op["responses"],
                              f"{where}: {status_of(method, path, code)} ({code}) not documented")
        for (method, path), overrides in STATUS_OVERRIDES.items():
            for code, status in overrides.items():
                self.assertIn(code, OPERATION_ERRORS[(method, path)], (method, path, code))
                self.assertNotEqual(status, CONTRACT_ERRORS[code], "not an override")
                self.assertIn(code, DOC["components"]["schemas"]["ErrorCode"]["description"])
        # route-level errors on every documented path
        for path in DOC["paths"]:
            resp = SPEC.response(path, "trace", 405)
            self.assertIsNotNone(resp)
            self.assertFalse(validation_errors(SPEC.schema_for(resp),
                                               error_body("method_not_allowed")))
        resp = SPEC.response("/no/such/path", "get", 404)
        self.assertFalse(validation_errors(SPEC.schema_for(resp), error_body("not_found")))
        # per-item errors: item and field are documented
        detail = DOC["components"]["schemas"]["ErrorDetail"]["properties"]
        self.assertIn("item", detail)
        self.assertIn("field", detail)


class LiveValidationMixin:
    checked = []  # (method, path, status, code)

    def check_live(self, method, path, resp, spec_path=None):
        """Validate a live Response against the spec; returns the parsed body (the text for
        media types other than JSON). The documented path is found from the request path
        (templates included) unless spec_path is given."""
        spec_path = spec_path or spec_path_for(path)
        where = f"{method} {path} -> {resp.status}"
        r = SPEC.response(spec_path, method, resp.status)
        self.assertIsNotNone(r, f"{where}: status {resp.status} is not documented for this "
                                f"path/method; body {resp.body[:300]!r}")
        content = r.get("content") or {}
        self.assertIn(resp.content_type, content,
                      f"{where}: Content-Type {resp.headers.get('Content-Type')!r} not documented")
        if resp.content_type == "application/json":
            self.assertIsNotNone(resp.json, f"{where}: body is not JSON: {resp.body[:300]!r}")
            body = resp.json
        else:
            try:
                body = resp.body.decode("utf-8")
            except UnicodeDecodeError:
                self.fail(f"{where}: body is not UTF-8 text")
        errs = validation_errors(SPEC.schema_for(r, resp.content_type), body)
        if errs:
            self.fail(f"{where}: body does not match the schema: " +
                      " | ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                                 for e in errs[:5]) + f"\nbody: {resp.body[:500]!r}")
        media = content[resp.content_type]
        if "x-item-schema" in media:  # newline-delimited JSON: every line is one document
            try:
                docs = ndjson_documents(body)
            except ValueError as e:
                self.fail(f"{where}: not newline-delimited JSON: {e}")
            item_schema = SPEC.inline(media["x-item-schema"])
            for i, doc in enumerate(docs):
                errs = validation_errors(item_schema, doc)
                self.assertFalse(errs, f"{where}: line {i + 1}: " +
                                 " | ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                                            for e in errs[:5]))
        if "x-csv-columns" in media:
            try:
                csv_rows(body, media["x-csv-columns"])
            except (ValueError, csv.Error) as e:
                self.fail(f"{where}: not the documented CSV: {e}")
        for name, h in (r.get("headers") or {}).items():
            h = SPEC.deref(h)
            value = resp.headers.get(name)
            if h.get("required"):
                self.assertIsNotNone(value, f"{where}: header {name} missing")
            if value is not None and "schema" in h:
                self.assertFalse(validation_errors(SPEC.inline(h["schema"]), value),
                                 f"{where}: header {name}: {value!r} does not match its schema")
        code = body.get("error", {}).get("code") if isinstance(body, dict) else None
        type(self).checked.append((method, spec_path, resp.status, code))
        return body

    def send(self, method, path, body=None, key=None, content_type="application/json",
             headers=None):
        """One request with http.client (harness.raw_request), which also reads answers the
        daemon sends before it has read a large body (401, 403, 404, 413). headers are sent
        besides Content-Type (None: no Content-Type)."""
        hdrs = {"Content-Type": content_type} if body is not None and content_type else {}
        hdrs.update(headers or {})
        return self.daemon.raw(method, path, body, key=key, headers=hdrs)

    def expect(self, method, path, status, code=None, body=None, **kw):
        """Send a request, assert its status (and error code), validate it; returns the body."""
        r = self.send(method, path, body, **kw)
        self.assertEqual((r.status, r.error_code()), (status, code), f"{method} {path}: {r!r}")
        return self.check_live(method, path, r)

    def expect_error(self, method, path, status, code, body=None, field=None, item=None, **kw):
        """As expect, for an error: also asserts its field and item (None: absent)."""
        err = self.expect(method, path, status, code, body, **kw)["error"]
        self.assertEqual((err.get("field"), err.get("item")), (field, item), err)
        return err

    def expect_auth_errors(self, method, path, body=None, forbidden_roles=(), **kw):
        """401 without a key and with an unknown key, 403 for each role in forbidden_roles."""
        d = self.daemon
        for key in ("", "pgcld_deadbeef_" + "A" * 43, "not-a-key"):
            r = self.send(method, path, body, key=key, **kw)
            self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)
            self.assertEqual(r.headers.get("WWW-Authenticate"), "Bearer")
            self.check_live(method, path, r)
        for role in forbidden_roles:
            r = self.send(method, path, body, key=d.keys[role], **kw)
            self.assertEqual((r.status, r.error_code()), (403, "forbidden"), (role, r))
            self.check_live(method, path, r)


def tiny_copy(root, model, version, src=("tiny_binary", "1")):
    dst = os.path.join(root, model, version)
    shutil.copytree(H.version_dir(*src), dst)
    return dst


def edit_config(vdir, fn):
    path = os.path.join(vdir, "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    fn(cfg)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)


def bad_shape(cfg):
    cfg["dims"]["d"] = 9
    cfg["semantic_mlp"]["layers"][-1]["out"] = 9


def tiny_b64_items(n, seed, prefix="it"):
    return H.b64_items(H.random_embeddings(n, 32, seed), prefix)


# ---------------------------------------------------------------- octet-stream and v2 requests
OCTETS = "application/octet-stream"


def octets(Z):
    """n × D little-endian float32 bytes."""
    return np.ascontiguousarray(Z, dtype="<f4").tobytes()


def embedding_tensor(Z, nested=True):
    """The JSON `embedding` input of an inference request (float32 values as exact numbers)."""
    Z = np.asarray(Z, dtype=np.float32)
    data = [[float(v) for v in row] for row in Z] if nested else [float(v) for v in Z.reshape(-1)]
    return {"name": "embedding", "datatype": "FP32", "shape": list(Z.shape), "data": data}


def id_tensor(ids):
    return {"name": "id", "datatype": "BYTES", "shape": [len(ids)], "data": list(ids)}


def binary_infer(Z, ids=None, raw=None, size=None):
    """(body, headers) of an inference request in the binary tensor extension: the JSON header,
    then raw (default: Z as little-endian float32); size overrides binary_data_size."""
    raw = octets(Z) if raw is None else raw
    emb = {"name": "embedding", "datatype": "FP32", "shape": list(np.shape(Z)),
           "parameters": {"binary_data_size": len(raw) if size is None else size}}
    inputs = [emb] + ([id_tensor(ids)] if ids is not None else [])
    header = json.dumps({"inputs": inputs}).encode()
    return header + raw, {"Inference-Header-Content-Length": str(len(header))}


def infer_outputs(body):
    """The outputs of an inference answer by name."""
    return {o["name"]: o for o in body["outputs"]}


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
        for path in ("/healthz", "/readyz", "/metrics"):
            r = d.get(path, key="")  # public: no key needed
            self.assertEqual(r.status, 200, r)
            self.check_live("GET", path, r)
        body = self.check_live("GET", "/readyz", d.get("/readyz", key=""))
        self.assertEqual(body["checks"], {"models": True, "audit_db": True, "draining": False})
        for m, p in (("POST", "/healthz"), ("PUT", "/readyz"), ("DELETE", "/v1/models"),
                     ("POST", "/v1/models"), ("POST", "/metrics"), ("POST", "/v2/health/live")):
            r = d.request(m, p, {} if m != "DELETE" else None)
            self.assertEqual(r.status, 405, r)
            self.check_live(m, p, r)

    def test_models(self):
        d = self.daemon
        for role in ("scorer", "reviewer", "admin"):  # every role may list the models
            r = d.get("/v1/models", key=d.keys[role])
            self.assertEqual(r.status, 200, (role, r))
            body = self.check_live("GET", "/v1/models", r)
            self.assertEqual(len(body["models"]), 4)
            for m in body["models"]:
                self.assertIsNone(m["shadow_version"])
                (v,) = m["versions"]
                self.assertEqual((v["state"], v["role"]), ("ready", "active"), v)
                self.assertIn("policy", v)
        self.expect_auth_errors("GET", "/v1/models")

    def test_score_auth(self):
        body = {"items": H.b64_items(self.Z[:1])}
        self.expect_auth_errors("POST", "/v1/score", body, forbidden_roles=("reviewer", "admin"))

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
        for m, p in (("GET", "/nope"), ("POST", "/v2/score"), ("GET", "/v1/models/x"),
                     ("GET", "/v2/models"), ("GET", "/v2/models/"), ("GET", "/v2/"),
                     ("POST", "/v2/models/toxicity/infer/x"), ("GET", "/v2/health")):
            r = self.daemon.request(m, p, {"items": []} if m == "POST" else None)
            self.assertEqual((r.status, r.error_code()), (404, "not_found"), r)
            self.check_live(m, p, r)

    # ------------------------------------------------------------------ octet-stream bodies
    def test_score_octet_stream(self):
        d = self.daemon
        Z = self.Z[:3]
        as_json = d.score({"items": H.b64_items(Z, "o")})
        self.assertEqual(as_json.status, 200, as_json)
        as_json = self.check_live("POST", "/v1/score", as_json)
        before = d.count()
        body = self.expect("POST", "/v1/score", 200, body=octets(Z), content_type=OCTETS)
        self.assertEqual(d.count(), before + 3)
        self.assertEqual(body["model"]["name"], "toxicity")  # --default-model
        self.assertEqual([x["id"] for x in body["results"]], ["0", "1", "2"])
        for got, ref in zip(body["results"], as_json["results"]):
            self.assertEqual((got["label"], got["decision"], got["probabilities"]),
                             (ref["label"], ref["decision"], ref["probabilities"]))
            self.assertEqual(len(got["vector"]), len(ref["vector"]))
        # model and return_vector in the query, ids in Pgcld-Item-Ids; charset-like parameters
        Z3, ids = H.random_embeddings(3, 32, 11), ["oct-a", "oct-b", "oct-c"]
        body = self.expect("POST", "/v1/score?model=tiny_multi&return_vector=false", 200,
                           body=octets(Z3), content_type=OCTETS + "; foo=bar",
                           headers={"Pgcld-Item-Ids": json.dumps(ids)})
        self.assertEqual((body["model"]["name"], [x["id"] for x in body["results"]]),
                         ("tiny_multi", ids))
        self.assertFalse([x for x in body["results"] if "vector" in x])
        rows = d.rows_for([x["decision_id"] for x in body["results"]])
        self.assertEqual(sorted(r["item_id"] for r in rows.values()), ids)
        body = self.expect("POST", "/v1/score?model=tiny_binary&return_vector=true", 200,
                           body=octets(Z3[:1]), content_type=OCTETS)
        self.assertEqual(len(body["results"][0]["vector"]), 8)
        # with JSON, the model, options and ids are in the body: the octet-stream query parameters
        # and Pgcld-Item-Ids beside it are refused, not ignored, and so is any other parameter
        json_body = {"model": "tiny_binary", "items": H.b64_items(Z3[:1], "j")}
        before = d.count()
        for path, headers, field in (("/v1/score?model=nope", None, "model"),
                                     ("/v1/score?return_vector=false", None, "return_vector"),
                                     ("/v1/score?colour=red", None, "colour"),
                                     ("/v1/score", {"Pgcld-Item-Ids": "garbage"}, "Pgcld-Item-Ids")):
            bad = self.expect("POST", path, 400, "invalid_request", body=json_body, headers=headers)
            self.assertEqual(bad["error"]["field"], field)
        self.assertEqual(d.count(), before)
        body = self.expect("POST", "/v1/score", 200, body=json_body)
        self.assertEqual(body["results"][0]["id"], "j-0")

    def test_score_octet_stream_errors(self):
        d = self.daemon
        one = octets(self.Z[:1])
        nan = self.Z[:2].copy()
        nan[1, 5] = np.inf
        before = d.count()
        for path, body, headers, status, code, field, item in (
            ("/v1/score", one[:-4], None, 400, "dimension_mismatch", "body", None),
            ("/v1/score", one + b"\0\0\0\0", None, 400, "dimension_mismatch", "body", None),
            ("/v1/score", b"", None, 400, "empty_batch", "body", None),
            ("/v1/score", octets(nan), None, 400, "non_finite_value", "body", 1),
            ("/v1/score?colour=red", one, None, 400, "invalid_request", "colour", None),
            ("/v1/score?model=toxicity&model=tiny_binary", one, None, 400, "invalid_request",
             "model", None),
            ("/v1/score?return_vector=yes", one, None, 400, "invalid_request", "return_vector",
             None),
            ("/v1/score", one, {"Pgcld-Item-Ids": "[1]"}, 400, "invalid_request",
             "Pgcld-Item-Ids", 0),
            ("/v1/score", one, {"Pgcld-Item-Ids": '["a", "b"]'}, 400, "invalid_request",
             "Pgcld-Item-Ids", None),
            ("/v1/score", one, {"Pgcld-Item-Ids": "a"}, 400, "invalid_request", "Pgcld-Item-Ids",
             None),
            ("/v1/score", one, {"Pgcld-Item-Ids": '[""]'}, 400, "invalid_request",
             "Pgcld-Item-Ids", 0),
            ("/v1/score?model=nope", one, None, 404, "model_not_found", "model", None),
        ):
            with self.subTest(path=path, code=code, headers=headers):
                self.expect_error("POST", path, status, code, body, field=field, item=item,
                                  content_type=OCTETS, headers=headers)
        self.assertEqual(d.count(), before, "a refused octet-stream request wrote rows")
        self.expect_auth_errors("POST", "/v1/score", one, forbidden_roles=("reviewer", "admin"),
                                content_type=OCTETS)

    # ------------------------------------------------------------------ Open Inference Protocol
    def test_v2_health_and_metadata(self):
        d = self.daemon
        server = self.expect("GET", "/v2", 200, key="")
        self.assertEqual(server["name"], "pgcld")
        self.assertEqual(self.expect("GET", "/v2/health/live", 200, key=""), {"live": True})
        self.assertEqual(self.expect("GET", "/v2/health/ready", 200, key=""), {"ready": True})
        self.expect("GET", "/v2/health/ready?verbose=1", 200, key="")  # query ignored
        for model in ("toxicity", "tiny_multi", "tiny_ordinal", "tiny_binary"):
            dims = H.load_config(model)["dims"]
            for role in ALL_ROLES:  # every role may read the metadata
                with self.subTest(model=model, role=role):
                    meta = self.expect("GET", f"/v2/models/{model}", 200, key=d.keys[role])
                    self.assertEqual((meta["name"], meta["versions"]), (model, ["1"]))
                    self.assertEqual(meta["inputs"][0]["shape"], [-1, dims["D"]])
                    out = {o["name"]: o["shape"] for o in meta["outputs"]}
                    self.assertEqual((out["probabilities"], out["vector"]),
                                     ([-1, dims["K"]], [-1, dims["d"]]))
                    ready = self.expect("GET", f"/v2/models/{model}/ready", 200,
                                        key=d.keys[role])
                    self.assertEqual(ready, {"name": model, "version": "1", "ready": True})
        for path in ("/v2/models/nope", "/v2/models/nope/ready", "/v2/models/bad.name"):
            self.expect("GET", path, 404, "model_not_found")
        for path in (f"/v2/models/{'x' * 130}", f"/v2/models/{'x' * 130}/ready"):
            self.expect("GET", path, 404, "not_found")
        for method, path in (("POST", "/v2"), ("PUT", "/v2/health/live"),
                             ("POST", "/v2/health/ready"), ("DELETE", "/v2/models/toxicity"),
                             ("POST", "/v2/models/toxicity/ready"),
                             ("GET", "/v2/models/toxicity/infer")):
            with self.subTest(method=method, path=path):
                body = {} if method in ("POST", "PUT") else None
                self.expect(method, path, 405, "method_not_allowed", body)
        for path in ("/v2/models/toxicity", "/v2/models/toxicity/ready"):
            self.expect_auth_errors("GET", path)

    def check_infer_answer(self, body, model, n, ids=None, request_id=None):
        """The outputs agree with each other, with the model and with the audit rows."""
        cfg = H.load_config(model)
        K, dd = cfg["dims"]["K"], cfg["dims"]["d"]
        out = infer_outputs(body)
        self.assertEqual([o["name"] for o in body["outputs"]],
                         ["label", "decision", "decision_id", "probabilities", "vector"])
        for name in ("label", "decision", "decision_id"):
            self.assertEqual((out[name]["shape"], len(out[name]["data"])), ([n], n), name)
        self.assertEqual((out["probabilities"]["shape"], len(out["probabilities"]["data"])),
                         ([n, K], n * K))
        self.assertEqual((out["vector"]["shape"], len(out["vector"]["data"])), ([n, dd], n * dd))
        probs = np.array(out["probabilities"]["data"]).reshape(n, K)
        self.assertTrue(np.allclose(probs.sum(axis=1), 1.0, atol=1e-5), probs)
        self.assertEqual(out["label"]["data"], [cfg["labels"][k] for k in probs.argmax(axis=1)])
        self.assertEqual(body["model_name"], model)
        if request_id is not None:
            self.assertEqual(body["id"], request_id)
        else:
            self.assertEqual(body["id"], body["parameters"]["request_id"])
        rows = self.daemon.rows_for(out["decision_id"]["data"])
        self.assertEqual(len(rows), n, "answered decisions missing from the audit database")
        recorded = [rows[did] for did in out["decision_id"]["data"]]
        self.assertEqual([r["item_id"] for r in recorded],
                         list(ids) if ids is not None else [str(i) for i in range(n)])
        self.assertEqual({r["request_id"] for r in recorded}, {body["parameters"]["request_id"]})
        self.assertEqual([r["decision"] for r in recorded], out["decision"]["data"])
        self.assertEqual({r["model_sha256"] for r in recorded},
                         {body["parameters"]["model_sha256"]})

    def test_v2_infer(self):
        d = self.daemon
        metrics_before = parse_prometheus(d.get("/metrics", key="").body.decode())
        Z = H.random_embeddings(3, 32, 21)
        ids = ["v2-a", "v2-b", "v2-c"]
        request_schema = SPEC.inline(
            DOC["paths"]["/v2/models/{name}/infer"]["post"]["requestBody"]["content"]
            ["application/json"]["schema"])
        answers = []
        for model, request, want_ids, want_id in (
            ("tiny_binary", {"inputs": [embedding_tensor(Z)]}, None, None),
            ("tiny_binary", {"id": "req-1", "inputs": [id_tensor(ids), embedding_tensor(Z, False)]},
             ids, "req-1"),
            ("tiny_multi", {"id": 7, "parameters": {"x": 1}, "inputs": [embedding_tensor(Z)],
                            "outputs": [{"name": "label"}, {"name": "vector",
                                                            "parameters": {"binary_data": True}}]},
             None, None),
            ("tiny_ordinal", {"inputs": [embedding_tensor(Z[:1]), {"name": "id",
                                                                  "datatype": "BYTES",
                                                                  "shape": [1], "data": ["only"]}]},
             ["only"], None),
            ("toxicity", {"inputs": [embedding_tensor(self.Z[:2])]}, None, None),
        ):
            with self.subTest(model=model, request=str(request)[:80]):
                self.assertFalse(validation_errors(request_schema, request))
                n = request["inputs"][-1 if request["inputs"][0]["name"] == "id" else 0]["shape"][0]
                body = self.expect("POST", f"/v2/models/{model}/infer", 200, body=request)
                self.check_infer_answer(body, model, n, want_ids, want_id)
                answers.append(body)
        # the binary tensor extension, with and without ids, with and without a Content-Type
        for want_ids, content_type in ((ids, OCTETS), (None, None), (None, "application/json")):
            with self.subTest(binary=True, ids=want_ids, content_type=content_type):
                raw, headers = binary_infer(Z, want_ids)
                body = self.expect("POST", "/v2/models/tiny_binary/infer", 200, body=raw,
                                   content_type=content_type, headers=headers)
                self.check_infer_answer(body, "tiny_binary", 3, want_ids)
                # the same values get the same answer on every path
                self.assertEqual(infer_outputs(body)["probabilities"]["data"],
                                 infer_outputs(answers[0])["probabilities"]["data"])
        # and the same as POST /v1/score
        r = d.score({"model": "tiny_binary", "items": H.b64_items(Z, "cmp")})
        scored = self.check_live("POST", "/v1/score", r)
        out = infer_outputs(answers[1])
        self.assertEqual([x["decision"] for x in scored["results"]], out["decision"]["data"])
        self.assertEqual([p for x in scored["results"] for p in x["probabilities"].values()],
                         out["probabilities"]["data"])
        self.assertEqual([v for x in scored["results"] for v in x["vector"]],
                         out["vector"]["data"])
        # an inference request is observed by the scoring metrics it shares with /v1/score
        after = parse_prometheus(d.get("/metrics", key="").body.decode())

        def count(fams, family):
            return [v for name, _l, v in fams[family]["samples"] if name == family + "_count"][0]

        for family in ("pgcld_forward_batch_rows", "pgcld_batch_items"):
            self.assertEqual(count(after, family) - count(metrics_before, family), 9, family)
        routes = {lbl["route"] for _, lbl, _ in after["pgcld_requests_total"]["samples"]}
        self.assertIn("POST /v2/models/{name}/infer", routes)

    def test_v2_infer_errors(self):
        d = self.daemon
        path = "/v2/models/tiny_binary/infer"
        Z = H.random_embeddings(2, 32, 22)
        emb = embedding_tensor(Z)
        big = embedding_tensor(Z)
        big["data"][1][3] = 1e39  # finite as a double, not as a float32
        ids = id_tensor(["a", "b"])
        request_schema = SPEC.inline(
            DOC["paths"]["/v2/models/{name}/infer"]["post"]["requestBody"]["content"]
            ["application/json"]["schema"])
        before = d.count()
        cases = [  # (body, status, code, field, item, the request schema rejects it)
            (b'{"inputs": [', 400, "invalid_json", None, None, None),
            (b'{"inputs": [], "inputs": []}', 400, "invalid_json", None, None, None),
            ([emb], 400, "invalid_request", None, None, True),
            ({}, 400, "invalid_request", "inputs", None, True),
            ({"inputs": []}, 400, "invalid_request", "inputs", None, True),
            ({"inputs": emb}, 400, "invalid_request", "inputs", None, True),
            ({"inputs": [{"name": "embedding", "datatype": "FP32"}]}, 400, "invalid_request",
             "inputs[0]", None, True),
            ({"inputs": [emb, {"name": "colour", "datatype": "BYTES", "shape": [2],
                               "data": ["x", "y"]}]}, 400, "invalid_request", "inputs[1]", None,
             True),
            ({"inputs": [emb, emb]}, 400, "invalid_request", "inputs[1]", None, True),
            ({"inputs": [dict(emb, datatype="FP64")]}, 400, "invalid_request", "inputs[0]", None,
             True),
            ({"inputs": [dict(emb, shape=[64])]}, 400, "invalid_request", "inputs[0]", None, True),
            ({"inputs": [emb, dict(ids, datatype="STRING")]}, 400, "invalid_request",
             "inputs[1]", None, True),
            ({"inputs": [ids]}, 400, "invalid_request", "inputs", None, True),
            ({"inputs": [dict(emb, parameters={"binary_data_size": 256})]}, 400,
             "invalid_request", "inputs[0]", None, None),
            ({"inputs": [emb, dict(ids, data=["a"])]}, 400, "invalid_request", "inputs.id",
             None, None),
            ({"inputs": [emb, dict(ids, data=["a", 2])]}, 400, "invalid_request",
             "inputs.id", 1, True),
            ({"inputs": [emb, {"name": "id", "datatype": "BYTES", "shape": [2]}]}, 400,
             "invalid_request", "inputs[1]", None, None),
            ({"inputs": [dict(emb, shape=[2, 31])]}, 400, "dimension_mismatch", "inputs[0]", None,
             None),
            ({"inputs": [dict(emb, data=emb["data"][0])]}, 400, "dimension_mismatch",
             "inputs[0]", None, None),
            ({"inputs": [dict(emb, data=[emb["data"][0], ["x"] * 32])]}, 400,
             "invalid_request", "inputs[0]", None, None),
            ({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [2, 32]}]}, 400,
             "invalid_request", "inputs[0]", None, True),
            ({"inputs": [emb], "extra": 1}, 400, "invalid_request", "extra", None, None),
            ({"inputs": [dict(emb, shape=[0, 32], data=[])]}, 400, "empty_batch", "inputs[0]",
             None, True),
            ({"inputs": [big]}, 400, "non_finite_value", "inputs[0]", 1, None),
        ]
        for body, status, code, field, item, schema_rejects in cases:
            with self.subTest(code=code, body=str(body)[:100]):
                self.expect_error("POST", path, status, code, body, field=field, item=item)
                if schema_rejects:
                    self.assertTrue(validation_errors(request_schema, body),
                                    "the documented request schema accepts a refused request")
        # the binary tensor extension
        raw, headers = binary_infer(Z)
        header_len = int(headers["Inference-Header-Content-Length"])
        nan = Z.copy()
        nan[1, 0] = np.nan
        bad_id = json.dumps({"inputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [2, 32],
             "parameters": {"binary_data_size": 256}},
            {"name": "id", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": 2},
             "data": ["a", "b"]}]}).encode()
        empty = json.dumps({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [0, 32],
                                        "parameters": {"binary_data_size": 0}}]}).encode()
        for body, hlen, status, code, field, item in (
            (raw, "abc", 400, "invalid_request", "Inference-Header-Content-Length", None),
            (raw, "", 400, "invalid_request", "Inference-Header-Content-Length", None),
            (raw, str(len(raw) + 1), 400, "invalid_request", "Inference-Header-Content-Length",
             None),
            (raw, "5", 400, "invalid_json", None, None),
            (raw + b"\0" * 4, str(header_len), 400, "invalid_request", None, None),
            (raw[:-4], str(header_len), 400, "invalid_request", "inputs[0]", None),
            (binary_infer(Z, size=252, raw=octets(Z)[:252])[0], None, 400, "dimension_mismatch",
             "inputs[0]", None),
            (binary_infer(nan)[0], str(header_len), 400, "non_finite_value", "inputs[0]", 1),
            (bad_id + octets(Z) + b"ab", str(len(bad_id)), 400, "invalid_request", "inputs[1]",
             None),
            (empty, str(len(empty)), 400, "empty_batch", "inputs[0]", None),
        ):
            with self.subTest(binary=code, hlen=hlen, field=field):
                if hlen is None:
                    hlen = str(len(body) - 252)
                self.expect_error("POST", path, status, code, body, field=field, item=item,
                                  content_type=OCTETS,
                                  headers={"Inference-Header-Content-Length": hlen})
        self.expect("POST", path, 415, "unsupported_media_type", {"inputs": [emb]},
                    content_type="text/plain")
        self.expect("POST", path, 415, "unsupported_media_type", raw, content_type=OCTETS)
        self.expect("POST", path, 415, "unsupported_media_type", {"inputs": [emb]},
                    content_type=None)
        self.assertEqual(d.count(), before, "a refused inference request wrote rows")
        self.expect("POST", "/v2/models/nope/infer", 404, "model_not_found", {"inputs": [emb]})
        self.expect("POST", f"/v2/models/{'x' * 130}/infer", 404, "not_found", {"inputs": [emb]})
        self.expect("PUT", path, 405, "method_not_allowed", {"inputs": [emb]})
        self.expect_auth_errors("POST", path, {"inputs": [emb]},
                                forbidden_roles=("reviewer", "admin"))
        self.expect_auth_errors("POST", path, raw, forbidden_roles=("reviewer", "admin"),
                                content_type=OCTETS, headers=headers)
        self.assertEqual(d.count(), before, "a refused inference request wrote rows")

    def test_validation_rejects_wrong_infer_bodies(self):
        """Negative self-check for the Open Inference Protocol schemas: live bodies pass, mutated
        ones do not."""
        d = self.daemon

        def mutated(good, fn):
            b = copy.deepcopy(good)
            fn(b)
            return b

        def assert_rejected(schema, cases):
            self.assertTrue(cases)
            for what, body in cases.items():
                with self.subTest(case=what):
                    self.assertTrue(validation_errors(schema, body),
                                    f"{what}: a wrong body passed validation")

        def schema(path, method, status):
            return SPEC.schema_for(SPEC.response(path, method, status))

        path = "/v2/models/{name}/infer"
        good = self.expect("POST", "/v2/models/tiny_multi/infer", 200,
                           body={"inputs": [embedding_tensor(H.random_embeddings(2, 32, 31))]})
        s = schema(path, "post", 200)
        self.assertFalse(validation_errors(s, good))  # positive control

        def out(b, name):
            return [o for o in b["outputs"] if o["name"] == name][0]

        assert_rejected(s, {
            "outputs reordered": mutated(good, lambda b: b["outputs"].reverse()),
            "output missing": mutated(good, lambda b: b["outputs"].pop()),
            "sixth output": mutated(good, lambda b: b["outputs"].append(copy.deepcopy(
                b["outputs"][0]))),
            "label as FP32": mutated(good, lambda b: out(b, "label").__setitem__("datatype",
                                                                                 "FP32")),
            "bad decision": mutated(good, lambda b: out(b, "decision")["data"].__setitem__(
                0, "maybe")),
            "uuid v4 decision_id": mutated(
                good, lambda b: out(b, "decision_id")["data"].__setitem__(
                    0, "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f")),
            "probability > 1": mutated(good, lambda b: out(b, "probabilities")["data"].__setitem__(
                0, 1.5)),
            "probabilities of rank 1": mutated(
                good, lambda b: out(b, "probabilities").__setitem__("shape", [2])),
            "vector of strings": mutated(good, lambda b: out(b, "vector").__setitem__("data",
                                                                                      ["x"])),
            "shape with 0": mutated(good, lambda b: out(b, "vector").__setitem__("shape", [0, 8])),
            "tensor without data": mutated(good, lambda b: out(b, "label").pop("data")),
            "no model_sha256": mutated(good, lambda b: b["parameters"].pop("model_sha256")),
            "short model_sha256": mutated(good, lambda b: b["parameters"].__setitem__(
                "model_sha256", "abc")),
            "numeric id": mutated(good, lambda b: b.__setitem__("id", 7)),
            "unknown member": mutated(good, lambda b: b.__setitem__("results", [])),
            "v1 answer": self.check_live("POST", "/v1/score", d.score(
                {"model": "tiny_multi", "items": tiny_b64_items(1, 32)})),
        })
        meta = self.expect("GET", "/v2/models/tiny_multi", 200)
        s = schema("/v2/models/{name}", "get", 200)
        self.assertFalse(validation_errors(s, meta))
        assert_rejected(s, {
            "inputs swapped": mutated(meta, lambda b: b["inputs"].reverse()),
            "fixed batch size": mutated(meta, lambda b: b["inputs"][0].__setitem__("shape",
                                                                                   [2, 32])),
            "two versions": mutated(meta, lambda b: b["versions"].append("2")),
            "other platform": mutated(meta, lambda b: b.__setitem__("platform", "onnxruntime")),
            "one class": mutated(meta, lambda b: b["outputs"][3].__setitem__("shape", [-1, 1])),
            "INT64 output": mutated(meta, lambda b: b["outputs"][2].__setitem__("datatype",
                                                                                "INT64")),
        })
        server = self.expect("GET", "/v2", 200, key="")
        assert_rejected(schema("/v2", "get", 200), {
            "no binary extension": mutated(server, lambda b: b.__setitem__("extensions", [])),
            "other name": mutated(server, lambda b: b.__setitem__("name", "triton")),
            "empty version": mutated(server, lambda b: b.__setitem__("version", "")),
        })
        ready = self.expect("GET", "/v2/models/tiny_multi/ready", 200)
        assert_rejected(schema("/v2/models/{name}/ready", "get", 200), {
            "not ready under 200": mutated(ready, lambda b: b.__setitem__("ready", False)),
            "no version": mutated(ready, lambda b: b.pop("version")),
        })
        assert_rejected(schema("/v2/health/ready", "get", 200), {"not ready": {"ready": False}})
        assert_rejected(schema("/v2/health/ready", "get", 503), {"ready": {"ready": True}})
        assert_rejected(schema("/v2/health/live", "get", 200), {"dead": {"live": False}})
        # error schemas: a code documented under another status or another operation
        for (p, method, status), body in (
            ((path, "post", 400), error_body("missing_id")),
            ((path, "post", 400), error_body("invalid_base64")),
            ((path, "post", 400), error_body("batch_too_large")),
            ((path, "post", 404), error_body("version_not_found")),
            ((path, "post", 503), error_body("conflict")),
            (("/v2/models/{name}", "get", 503), error_body("audit_unavailable")),
            (("/v2/models/{name}/ready", "get", 404), error_body("no_shadow")),
            (("/v2/health/ready", "get", 503), error_body("not_ready")),
            (("/v1/score", "post", 415), error_body("invalid_request")),
        ):
            with self.subTest(case=f"{method} {p} {status} {body['error']['code']}"):
                self.assertTrue(validation_errors(schema(p, method, status), body))
        for code in ("dimension_mismatch", "non_finite_value", "empty_batch", "invalid_json"):
            self.assertFalse(validation_errors(schema(path, "post", 400), error_body(code)))
        # and the live check fails on an undocumented status or a wrong inference answer
        r = d.post("/v2/models/tiny_multi/infer",
                   {"inputs": [embedding_tensor(H.random_embeddings(1, 32, 33))]})
        self.check_live("POST", "/v2/models/tiny_multi/infer", r)
        short = json.dumps(mutated(r.json, lambda b: b["outputs"].pop())).encode()
        for status, body in ((418, r.body), (201, r.body), (200, short)):
            with self.assertRaises(AssertionError):
                self.check_live("POST", "/v2/models/tiny_multi/infer",
                                H.Response(status, r.headers, body))
        r = d.get("/v2/health/ready", key="")
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/v2/health/ready", H.Response(503, r.headers, r.body))

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

    def test_413_octet_stream_and_infer(self):
        nine, eight = H.random_embeddings(9, 32, 7), H.random_embeddings(8, 32, 8)
        before = self.daemon.count()
        self.expect_error("POST", "/v1/score?model=tiny_binary", 413, "batch_too_large",
                          octets(nine), field="body", content_type=OCTETS)
        path = "/v2/models/tiny_binary/infer"
        self.expect_error("POST", path, 413, "batch_too_large",
                          {"inputs": [embedding_tensor(nine)]}, field="inputs[0]")
        raw, headers = binary_infer(nine)
        self.expect_error("POST", path, 413, "batch_too_large", raw, field="inputs[0]",
                          content_type=OCTETS, headers=headers)
        big = octets(H.random_embeddings(30, 1024, 9))  # 122880 bytes > --max-body-bytes
        self.expect("POST", "/v1/score", 413, "payload_too_large", big, content_type=OCTETS)
        raw, headers = binary_infer(H.random_embeddings(30, 1024, 9))
        self.expect("POST", "/v2/models/toxicity/infer", 413, "payload_too_large", raw,
                    content_type=OCTETS, headers=headers)
        self.assertEqual(self.daemon.count(), before)
        # at the limit
        body = self.expect("POST", "/v1/score?model=tiny_binary", 200, body=octets(eight),
                           content_type=OCTETS)
        self.assertEqual(len(body["results"]), 8)
        raw, headers = binary_infer(eight)
        body = self.expect("POST", path, 200, body=raw, content_type=OCTETS, headers=headers)
        self.assertEqual(infer_outputs(body)["decision"]["shape"], [8])


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

    def test_v2_not_ready(self):
        d = self.daemon
        self.assertEqual(self.expect("GET", "/v2/health/live", 200, key=""), {"live": True})
        self.expect("GET", "/v2", 200, key="")
        r = d.get("/v2/health/ready", key="")
        self.assertEqual((r.status, r.json, r.headers.get("Retry-After")),
                         (503, {"ready": False}, "1"))
        self.check_live("GET", "/v2/health/ready", r)
        Z = H.random_embeddings(1, 32, 2)
        raw, headers = binary_infer(Z)
        for method, path, body, kw in (
            ("GET", "/v2/models/toxicity", None, {}),
            ("GET", "/v2/models/toxicity/ready", None, {}),
            ("POST", "/v2/models/toxicity/infer", {"inputs": [embedding_tensor(Z)]}, {}),
            ("POST", "/v2/models/toxicity/infer", raw,
             {"content_type": OCTETS, "headers": headers}),
            ("POST", "/v1/score?model=toxicity", octets(Z), {"content_type": OCTETS}),
        ):
            with self.subTest(method=method, path=path):
                r = self.send(method, path, body, **kw)
                self.assertEqual((r.status, r.error_code(), r.headers.get("Retry-After")),
                                 (503, "not_ready", "5"), r)
                self.check_live(method, path, r)


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

        infer = {"inputs": [embedding_tensor(Z)]}

        def client(k):
            for _ in range(20):
                if k % 2:
                    r = ("POST", "/v2/models/tiny_binary/infer",
                         d.post("/v2/models/tiny_binary/infer", infer))
                else:
                    r = ("POST", "/v1/score", d.score({"items": H.b64_items(Z)}))
                with lock:
                    answers.append(r)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        ok = [r for _m, _p, r in answers if r.status == 200]
        self.assertEqual(d.count(), before + 8 * len(ok),
                         "rows written for requests that were not answered 200")
        seen = {}
        for method, path, r in answers:
            seen.setdefault((path, r.status, r.error_code()), (method, r))
        for (path, status, code), (method, r) in sorted(seen.items(), key=str):
            with self.subTest(path=path, status=status, code=code):
                self.check_live(method, path, r)
                if status == 503:
                    self.assertEqual(r.headers.get("Retry-After"), "1")


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


REVIEW_UNKNOWN_ID = "01a1fdb2-0000-7000-8000-000000000000"
OLD_DECISION_ID = "01890000-0000-7000-8000-000000000001"


def query(**params):
    return "?" + urllib.parse.urlencode(params) if params else ""


class LiveReviewTest(LiveValidationMixin, unittest.TestCase):
    """The reviewer and audit operations: decision reads, statements of reasons, contests,
    resolutions, re-scoring, exports, figures, chain verification and signed checkpoints;
    successes, every error the daemon can be made to answer deterministically, 401 and 403.
    Each test scores its own decisions, so the order of the tests does not matter."""

    MAX_BODY = 4096

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-review-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        root = os.path.join(cls.tmp, "models")
        tiny_copy(root, "tiny", "1")
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        cls.cp_dir = os.path.join(cls.tmp, "checkpoints")
        os.makedirs(cls.cp_dir)
        d = H.Daemon(models=root, default_model="tiny",
                     args=["--max-body-bytes", str(cls.MAX_BODY), "--signing-key", cls.signing_key,
                           "--checkpoint-dir", cls.cp_dir])
        cls.addClassCleanup(d.cleanup)
        cls.public_key = d.cli("audit", "keygen", "--out", cls.signing_key).stdout.split()[-1]
        d.start()
        cls.daemon = d
        cls.second = d.create_key("reviewer", "second reviewer")
        cls.golden = [g["embedding_b64"] for g in H.load_config("tiny_binary")["golden"]]
        assert H.wait_until(lambda: d.get("/v1/contests", key=cls.second).status == 200)

    def send(self, method, path, body=None, key=None, content_type="application/json"):
        """As LiveValidationMixin.send, with the reviewer key by default."""
        if key is None:
            key = self.daemon.keys["reviewer"]
        return super().send(method, path, body, key=key, content_type=content_type)

    def score(self, n, seed, prefix):
        r = self.daemon.score({"items": tiny_b64_items(n, seed, prefix)})
        self.assertEqual(r.status, 200, r)
        self.check_live("POST", "/v1/score", r)
        return r.json["results"]

    def score_golden(self, prefix):
        """Three decisions: block, review, allow (the checkpoint's golden inputs)."""
        items = [{"id": f"{prefix}-{k}", "embedding_b64": b} for k, b in enumerate(self.golden)]
        r = self.daemon.score({"items": items})
        self.assertEqual(r.status, 200, r)
        results = r.json["results"]
        self.assertEqual([x["decision"] for x in results], ["block", "review", "allow"])
        return results

    def too_large(self, method, path, key=None):
        """A body over --max-body-bytes, announced by Content-Length (answered before it is
        read)."""
        body = b'{"reason": "' + b"x" * self.MAX_BODY + b'"}'
        r = self.send(method, path, body, key=key)
        self.assertEqual((r.status, r.error_code()), (413, "payload_too_large"), r)
        self.check_live(method, path, r)

    def bad_queries(self, path, cases):
        """Each (query, code, field) answers 400 with that code and field."""
        for q, code, field in cases:
            with self.subTest(query=f"{path}?{q}"):
                body = self.expect("GET", f"{path}?{q}", 400, code)
                self.assertEqual(body["error"].get("field"), field, body)

    # ------------------------------------------------------------------ reads
    def test_decision_reads(self):
        d = self.daemon
        results = self.score_golden("reads")
        for item in results:
            did = item["decision_id"]
            rec = self.expect("GET", f"/v1/decisions/{did}", 200)
            self.assertEqual(
                (rec["decision_id"], rec["label"], rec["decision"], rec["probabilities"]),
                (did, item["label"], item["decision"], item["probabilities"]))
            self.assertEqual((rec["contest_status"], rec["contests"], rec["input_stored"]),
                             ("none", [], "f16"))
            self.assertEqual(rec["effective_outcome"],
                             {"status": "original", "label": item["label"],
                              "decision": item["decision"], "decided_by": "automated", "contest_id": None})
            self.assertIsNotNone(rec["chain"])
            st = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
            self.assertEqual((st["puid"], st["pgcld"]["decision_in_force"],
                              st["automated_decision"]),
                             (did, item["decision"], "AUTOMATED_DECISION_FULLY"))
        block = results[0]
        # lists: paging, every filter
        page = self.expect("GET", "/v1/decisions" + query(limit=2), 200)
        self.assertEqual(len(page["decisions"]), 2)
        self.assertIsNotNone(page["next_cursor"])
        more = self.expect("GET", "/v1/decisions" + query(limit=2, cursor=page["next_cursor"]), 200)
        self.assertLess(more["decisions"][0]["seq"], page["decisions"][-1]["seq"])
        rec = self.expect("GET", f"/v1/decisions/{block['decision_id']}", 200)
        since = rec["created_at"]
        everything = self.expect("GET", "/v1/decisions" + query(
            model="tiny", version="1", label=block["label"], decision="block", item_id="reads-0",
            request_id=rec["request_id"], since=since, until="2999-01-01T00:00:00Z", contest="none",
            limit=1000), 200)
        self.assertEqual([x["decision_id"] for x in everything["decisions"]],
                         [block["decision_id"]])
        self.assertIsNone(everything["next_cursor"])
        for contest in ("open", "resolved", "contested", "none"):
            self.expect("GET", "/v1/decisions" + query(contest=contest, limit=5), 200)
        self.expect("GET", "/v1/decisions" + query(since="2026-01-01T01:00:00+01:00"), 200)
        # errors
        cursor = page["next_cursor"]
        tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        self.bad_queries("/v1/decisions", [
            ("colour=red", "invalid_request", "colour"),
            ("label=pos&label=neg", "invalid_request", "label"),
            ("limit=0", "invalid_request", "limit"),
            ("limit=1001", "invalid_request", "limit"),
            ("limit=ten", "invalid_request", "limit"),
            ("label=", "invalid_request", "label"),
            ("decision=maybe", "invalid_request", "decision"),
            ("contest=maybe", "invalid_request", "contest"),
            ("version=1", "invalid_request", "version"),
            ("since=2026-11-21", "invalid_request", "since"),
            ("since=2026-11-21T10:00:00Z&until=2026-11-20T10:00:00Z", "invalid_request", "until"),
            ("cursor=garbage", "invalid_cursor", "cursor"),
            (f"cursor={tampered}", "invalid_cursor", "cursor"),
            ("cursor=", "invalid_cursor", "cursor"),
        ])
        for path in (f"/v1/decisions/{block['decision_id']}",
                     f"/v1/decisions/{block['decision_id']}/statement"):
            body = self.expect("GET", path + "?verbose=1", 400, "invalid_request")
            self.assertEqual(body["error"]["field"], "verbose")
            unknown = path.replace(block["decision_id"], REVIEW_UNKNOWN_ID)
            self.expect("GET", unknown, 404, "decision_not_found")
            self.expect("GET", path.replace(block["decision_id"], "x" * 130), 404, "not_found")
            self.expect("DELETE", path, 405, "method_not_allowed")
            self.expect_auth_errors("GET", path, forbidden_roles=("scorer", "admin"))
        self.expect("POST", "/v1/decisions", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/decisions", forbidden_roles=("scorer", "admin"))
        self.assertEqual(d.get("/v1/decisions", key=self.second).status, 200)

    # ------------------------------------------------------------------ contests and resolutions
    def test_contests_and_resolutions(self):
        d = self.daemon
        reviewer = d.keys["reviewer"]
        item, other, third = self.score(3, 51, "contest")
        did = item["decision_id"]
        path = f"/v1/decisions/{did}/contests"
        # validation before the rules
        for body, field in (({}, "reason"), ({"reason": ""}, "reason"),
                            ({"reason": "x" * 2001}, "reason"), ({"reason": 3}, "reason"),
                            ({"reason": "r", "extra": 1}, "extra")):
            with self.subTest(body=body):
                err = self.expect("POST", path, 400, "invalid_request", body)
                self.assertEqual(err["error"]["field"], field)
        self.expect("POST", path, 400, "invalid_request", ["r"])
        self.expect("POST", path, 400, "invalid_json", b'{"reason": ')
        self.expect("POST", path, 415, "unsupported_media_type", {"reason": "r"},
                    content_type="text/plain")
        self.too_large("POST", path)
        self.expect("POST", f"/v1/decisions/{REVIEW_UNKNOWN_ID}/contests", 404,
                    "decision_not_found", {"reason": "r"})
        self.expect("POST", f"/v1/decisions/{'x' * 130}/contests", 404, "not_found",
                    {"reason": "r"})
        self.expect("GET", path, 405, "method_not_allowed")
        self.expect_auth_errors("POST", path, {"reason": "r"}, forbidden_roles=("scorer", "admin"))
        # filing
        filed = self.expect("POST", path, 201, body={"reason": "a quotation, not abuse"})
        cid = filed["contest_id"]
        self.assertEqual(
            (filed["decision_id"], filed["status"], filed["filed_by"], filed["window_days"]),
            (did, "open", f"test-reviewer ({reviewer[:14]})", 180))
        self.expect("POST", path, 409, "contest_open", {"reason": "again"}, key=self.second)
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contest_status"], rec["effective_outcome"]["status"],
                          rec["effective_outcome"]["contest_id"]), ("open", "contested", cid))
        self.assertEqual(rec["contests"][0]["filer_key_id"], reviewer[:14])
        # the open queue, paged
        for x in (other, third):
            self.expect("POST", f"/v1/decisions/{x['decision_id']}/contests", 201,
                        body={"reason": "q"})
        queue = self.expect("GET", "/v1/contests", 200)
        mine = [c for c in queue["contests"] if c["contest_id"] == cid]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["resolution"], mine[0]["overdue"], mine[0]["item_id"]),
                         (None, False, "contest-0"))
        page = self.expect("GET", "/v1/contests" + query(status="open", limit=1), 200)
        self.assertIsNotNone(page["next_cursor"])
        self.expect("GET", "/v1/contests" + query(limit=1, cursor=page["next_cursor"]), 200)
        decisions_cursor = self.expect("GET", "/v1/decisions?limit=1", 200)["next_cursor"]
        self.bad_queries("/v1/contests", [
            ("status=maybe", "invalid_request", "status"),
            ("status=open&status=resolved", "invalid_request", "status"),
            ("limit=5000", "invalid_request", "limit"),
            ("colour=red", "invalid_request", "colour"),
            ("cursor=garbage", "invalid_cursor", "cursor"),
            (f"cursor={decisions_cursor}", "invalid_cursor", "cursor"),
            (f"status=resolved&cursor={page['next_cursor']}", "invalid_cursor", "cursor"),
        ])
        self.expect("POST", "/v1/contests", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/contests", forbidden_roles=("scorer", "admin"))
        # resolving
        rpath = f"/v1/contests/{cid}/resolution"
        self.expect("POST", rpath, 403, "filer_cannot_resolve",
                    {"outcome": "upheld", "note": "mine"})
        self.expect("POST", rpath, 422, "invalid_label",
                    {"outcome": "overturned", "corrected_label": "nope", "note": "n"},
                    key=self.second)
        for body, field in (({"outcome": "maybe", "note": "n"}, "outcome"),
                            ({"outcome": "upheld"}, "note"), ({"note": "n"}, "outcome"),
                            ({"outcome": "upheld", "corrected_label": "pos", "note": "n"},
                             "corrected_label"),
                            ({"outcome": "upheld", "note": "n", "extra": 1}, "extra")):
            with self.subTest(body=body):
                err = self.expect("POST", rpath, 400, "invalid_request", body, key=self.second)
                self.assertEqual(err["error"]["field"], field)
        self.expect("POST", rpath, 400, "invalid_json", b"{", key=self.second)
        self.expect("POST", rpath, 415, "unsupported_media_type",
                    {"outcome": "upheld", "note": "n"}, key=self.second,
                    content_type="text/plain")
        self.too_large("POST", rpath, key=self.second)
        self.expect("POST", f"/v1/contests/{REVIEW_UNKNOWN_ID}/resolution", 404,
                    "contest_not_found", {"outcome": "upheld", "note": "n"}, key=self.second)
        self.expect("POST", f"/v1/contests/{'x' * 130}/resolution", 404, "not_found",
                    {"outcome": "upheld", "note": "n"}, key=self.second)
        self.expect("GET", rpath, 405, "method_not_allowed")
        self.expect_auth_errors("POST", rpath, {"outcome": "upheld", "note": "n"},
                                forbidden_roles=("scorer", "admin"))
        corrected = "neg" if item["label"] == "pos" else "pos"
        res = self.expect("POST", rpath, 201, key=self.second,
                          body={"outcome": "overturned", "corrected_label": corrected,
                                "note": "context shows a quotation"})
        self.assertEqual(
            (res["contest_id"], res["decision_id"], res["corrected_label"], res["resolved_by"]),
            (cid, did, corrected, f"second reviewer ({self.second[:14]})"))
        self.expect("POST", rpath, 409, "already_resolved", {"outcome": "upheld", "note": "n"},
                    key=self.second)
        upheld = self.expect("POST", f"/v1/contests/{self.open_contest(other)}/resolution", 201,
                             body={"outcome": "upheld", "note": "fine", "corrected_label": None},
                             key=self.second)
        self.assertIsNone(upheld["corrected_label"])
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contest_status"], rec["effective_outcome"]["status"],
                          rec["effective_outcome"]["label"]), ("resolved", "overturned", corrected))
        self.assertEqual(rec["contests"][0]["resolution"]["resolver_key_id"], self.second[:14])
        st = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
        self.assertEqual((st["automated_decision"], st["pgcld"]["effective_status"]),
                         ("AUTOMATED_DECISION_PARTIALLY", "overturned"))
        resolved = self.expect("GET", "/v1/contests" + query(status="resolved"), 200)
        # most recently resolved first
        self.assertEqual(resolved["contests"][0]["contest_id"], upheld["contest_id"])
        self.assertIn(cid, [c["contest_id"] for c in resolved["contests"]])
        # after a resolution a new contest may be filed
        self.expect("POST", path, 201, body={"reason": "new evidence"}, key=self.second)
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((len(rec["contests"]), rec["contest_status"]), (2, "open"))

    def open_contest(self, item):
        rec = self.expect("GET", f"/v1/decisions/{item['decision_id']}", 200)
        return [c["contest_id"] for c in rec["contests"] if c["resolution"] is None][0]

    # ------------------------------------------------------------------ re-scoring
    def test_rescore(self):
        (item,) = self.score(1, 61, "rescore")
        path = f"/v1/decisions/{item['decision_id']}/rescore"
        body = self.expect("POST", path, 200)
        self.assertEqual((body["decision_id"], body["input_precision"], body["original"]["label"],
                          body["original"]["probabilities"], body["rescored"]["model_version"]),
                         (item["decision_id"], "float16", item["label"], item["probabilities"],
                          "1"))
        self.expect("POST", f"/v1/decisions/{REVIEW_UNKNOWN_ID}/rescore", 404, "decision_not_found")
        self.expect("POST", f"/v1/decisions/{'x' * 130}/rescore", 404, "not_found")
        self.expect("GET", path, 405, "method_not_allowed")
        self.expect_auth_errors("POST", path, forbidden_roles=("scorer", "admin"))

    # ------------------------------------------------------------------ export and figures
    def test_export(self):
        d = self.daemon
        mine = {x["decision_id"] for x in self.score(3, 71, "export")}
        r = self.send("GET", "/v1/audit/export")
        self.assertEqual(r.status, 200, r)
        docs = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.assertEqual(r.status, 200, r)
        rows = csv_rows(self.check_live("GET", "/v1/audit/export", r), EXPORT_COLUMNS)
        export_schema = SPEC.inline({"$ref": "#/components/schemas/ExportRecord"})
        from_csv = [csv_export_record(row) for row in rows]
        for rec in from_csv:
            self.assertFalse(validation_errors(export_schema, rec), rec)
        self.assertEqual(from_csv, docs, "the CSV and NDJSON exports differ")
        self.assertTrue(mine <= {x["decision_id"] for x in docs})
        self.assertEqual([(x["created_at"], x["seq"]) for x in docs],
                         sorted((x["created_at"], x["seq"]) for x in docs))
        since = min(x["created_at"] for x in docs if x["decision_id"] in mine)
        r = self.send("GET", "/v1/audit/export" + query(since=since, until="2999-01-01T00:00:00Z",
                                                        format="ndjson"), key=d.keys["admin"])
        self.assertEqual(r.status, 200, r)
        window = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        self.assertTrue(mine <= {x["decision_id"] for x in window})
        for fmt, empty in (("ndjson", b""), ("csv", (",".join(EXPORT_COLUMNS) + "\r\n").encode())):
            r = self.send("GET", "/v1/audit/export" + query(since="2100-01-01T00:00:00Z",
                                                            format=fmt))
            self.assertEqual((r.status, r.body), (200, empty))
            self.check_live("GET", "/v1/audit/export", r)
        self.bad_queries("/v1/audit/export", [
            ("format=xml", "invalid_request", "format"),
            ("since=soon", "invalid_request", "since"),
            ("since=2026-11-21T10:00:00Z&until=2026-11-20T10:00:00Z", "invalid_request", "until"),
            ("limit=1", "invalid_request", "limit"),
            ("format=csv&format=csv", "invalid_request", "format"),
        ])
        self.expect("POST", "/v1/audit/export", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/export", forbidden_roles=("scorer",))

    def test_stats(self):
        d = self.daemon
        self.score(2, 72, "stats")
        stats = self.expect("GET", "/v1/audit/stats", 200)
        self.assertEqual((stats["since"], stats["until"]), (None, None))
        self.assertEqual(stats["decisions"]["total"], d.count())
        self.assertEqual(sum(stats["decisions"]["by_decision"].values()), d.count())
        window = self.expect("GET", "/v1/audit/stats" + query(since="2026-01-01T01:00:00+01:00",
                                                              until="2999-01-01T00:00:00Z"),
                             200, key=d.keys["admin"])
        self.assertEqual((window["since"], window["until"]),
                         ("2026-01-01T00:00:00.000000Z", "2999-01-01T00:00:00.000000Z"))
        empty = self.expect("GET", "/v1/audit/stats" + query(since="2100-01-01T00:00:00Z"), 200)
        self.assertEqual((empty["decisions"]["total"],
                          empty["contests"]["median_resolution_seconds"]), (0, None))
        self.bad_queries("/v1/audit/stats", [
            ("until=2026-13-01T00:00:00Z", "invalid_request", "until"),
            ("format=csv", "invalid_request", "format"),
            ("since=", "invalid_request", "since"),
        ])
        self.expect("PUT", "/v1/audit/stats", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/stats", forbidden_roles=("scorer",))

    # ------------------------------------------------------------------ the chain
    def test_verify_and_checkpoints(self):
        d = self.daemon
        admin = d.keys["admin"]
        self.score(2, 81, "chain")
        report = self.expect("GET", "/v1/audit/verify", 200)
        self.assertTrue(report["intact"], report)
        self.assertEqual(report["events"], report["head_seq"])
        self.assertEqual(self.expect("GET", "/v1/audit/verify", 200, key=admin)["intact"], True)
        self.expect("POST", "/v1/audit/verify", 405, "method_not_allowed", {})
        self.expect_auth_errors("GET", "/v1/audit/verify", forbidden_roles=("scorer",))
        path = "/v1/audit/checkpoints"
        cp = self.expect("POST", path, 201, key=admin)  # no body
        self.assertGreaterEqual(cp["head_seq"], report["head_seq"])
        self.assertEqual((cp["file"], cp["public_key"]),
                         (os.path.join(self.cp_dir, f"checkpoint-{cp['head_seq']}.json"),
                          self.public_key))
        cp = self.expect("POST", path, 201, body={}, key=admin)
        with open(cp["file"], encoding="utf-8") as f:
            self.assertEqual(json.load(f)["signature"], cp["signature"])
        p = d.cli("audit", "verify", "--db", d.db_path, "--checkpoint", cp["file"], "--public-key",
                  self.public_key, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.expect("POST", path, 400, "invalid_request", {"force": True}, key=admin)
        self.expect("POST", path, 400, "invalid_request", [], key=admin)
        self.expect("POST", path, 400, "invalid_json", b"{", key=admin)
        self.expect("POST", path, 415, "unsupported_media_type", {}, key=admin,
                    content_type="text/plain")
        self.too_large("POST", path, key=admin)
        self.expect("GET", path, 405, "method_not_allowed", key=admin)
        self.expect_auth_errors("POST", path, {}, forbidden_roles=("scorer", "reviewer"))

    # ------------------------------------------------------------------ the test can fail
    def test_validation_rejects_wrong_review_bodies(self):
        """Negative self-check for the reviewer schemas: live bodies pass, mutated ones do not."""
        d = self.daemon

        def mutated(good, fn):
            b = copy.deepcopy(good)
            fn(b)
            return b

        def assert_rejected(schema, cases):
            self.assertTrue(cases)
            for what, body in cases.items():
                with self.subTest(case=what):
                    self.assertTrue(validation_errors(schema, body),
                                    f"{what}: a wrong body passed validation")

        def schema(path, method, status):
            return SPEC.schema_for(SPEC.response(path, method, status))

        block, review, allow = self.score_golden("selfcheck")
        did = block["decision_id"]
        filed = self.expect("POST", f"/v1/decisions/{did}/contests", 201, body={"reason": "r"})
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        s = schema("/v1/decisions/{id}", "get", 200)
        self.assertFalse(validation_errors(s, rec))
        assert_rejected(s, {
            "contests while contest_status is none": mutated(
                rec, lambda b: b.__setitem__("contest_status", "none")),
            "open contest but original outcome": mutated(
                rec, lambda b: b["effective_outcome"].update(status="original", contest_id=None)),
            "contested without contest_id": mutated(
                rec, lambda b: b["effective_outcome"].__setitem__("contest_id", None)),
            "bad outcome status": mutated(
                rec, lambda b: b["effective_outcome"].__setitem__("status", "pending")),
            "short chain hash": mutated(rec, lambda b: b["chain"].__setitem__("hash", "abc")),
            "input_stored f64": mutated(rec, lambda b: b.__setitem__("input_stored", "f64")),
            "input member": mutated(rec, lambda b: b.__setitem__("input", "AAAA")),
            "no provenance": mutated(rec, lambda b: b.pop("provenance")),
            "filed_by not an actor": mutated(
                rec, lambda b: b["contests"][0].__setitem__("filed_by", "someone")),
            "resolution of a string": mutated(
                rec, lambda b: b["contests"][0].__setitem__("resolution", "upheld")),
        })
        s = schema("/v1/decisions/{id}/statement", "get", 200)
        statements = {
            x["decision"]: self.expect("GET", f"/v1/decisions/{x['decision_id']}/statement", 200)
            for x in (block, review, allow)}
        for st in statements.values():
            self.assertFalse(validation_errors(s, st))
        assert_rejected(s, {
            "block without removal": mutated(
                statements["block"], lambda b: b.__setitem__("decision_visibility", [])),
            "review without visibility_other": mutated(
                statements["review"], lambda b: b.pop("decision_visibility_other")),
            "allow with a restriction": mutated(
                statements["allow"], lambda b: b["pgcld"].__setitem__("restriction", True)),
            "visibility_other on a removal": mutated(
                statements["block"], lambda b: b.__setitem__("decision_visibility_other", "x")),
            "other category": mutated(statements["block"], lambda b: b.__setitem__(
                "category", "STATEMENT_CATEGORY_SCAMS")),
            "bad application_date": mutated(
                statements["allow"], lambda b: b.__setitem__("application_date", "21/11/2026")),
            "no pgcld notes": mutated(statements["allow"], lambda b: b.pop("pgcld")),
            "item id leaked": mutated(statements["allow"], lambda b: b.__setitem__("item_id", "x")),
        })
        s = schema("/v1/decisions/{id}/contests", "post", 201)
        assert_rejected(s, {
            "status resolved": mutated(filed, lambda b: b.__setitem__("status", "resolved")),
            "window_days 0": mutated(filed, lambda b: b.__setitem__("window_days", 0)),
            "uuid v4 contest_id": mutated(filed, lambda b: b.__setitem__(
                "contest_id", "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f")),
        })
        queue = self.expect("GET", "/v1/contests", 200)
        s = schema("/v1/contests", "get", 200)
        upheld = {"resolved_at": "2026-11-21T11:47:38.885568Z", "resolved_by": "anonymous",
                  "resolver_key_id": None, "outcome": "upheld", "corrected_label": None,
                  "note": "n"}
        assert_rejected(s, {
            "overdue as text": mutated(
                queue, lambda b: b["contests"][0].__setitem__("overdue", "no")),
            "resolved yet overdue": mutated(
                queue, lambda b: b["contests"][0].update(overdue=True, resolution=upheld)),
            "upheld with a corrected label": mutated(queue, lambda b: b["contests"][0].__setitem__(
                "resolution", dict(upheld, corrected_label="neg"))),
            "short cursor": mutated(queue, lambda b: b.__setitem__("next_cursor", "abc")),
            "no next_cursor": mutated(queue, lambda b: b.pop("next_cursor")),
        })
        resolved = self.expect("POST", f"/v1/contests/{filed['contest_id']}/resolution", 201,
                               body={"outcome": "upheld", "note": "n"}, key=self.second)
        assert_rejected(schema("/v1/contests/{id}/resolution", "post", 201), {
            "upheld with a corrected label": mutated(
                resolved, lambda b: b.__setitem__("corrected_label", "neg")),
            "bad outcome": mutated(resolved, lambda b: b.__setitem__("outcome", "maybe")),
            "empty note": mutated(resolved, lambda b: b.__setitem__("note", "")),
        })
        rescored = self.expect("POST", f"/v1/decisions/{did}/rescore", 200)
        assert_rejected(schema("/v1/decisions/{id}/rescore", "post", 200), {
            "float64 input": mutated(
                rescored, lambda b: b.__setitem__("input_precision", "float64")),
            "original without label": mutated(rescored, lambda b: b["original"].pop("label")),
            "same_label as text": mutated(rescored, lambda b: b.__setitem__("same_label", "yes")),
        })
        stats = self.expect("GET", "/v1/audit/stats", 200)
        assert_rejected(schema("/v1/audit/stats", "get", 200), {
            "by_decision without block": mutated(
                stats, lambda b: b["decisions"]["by_decision"].pop("block")),
            "rate > 1": mutated(stats, lambda b: b["contests"]["overturn_rate_by_model_version"][0]
                                .__setitem__("rate", 1.5)),
            "rate without resolutions": mutated(
                stats, lambda b: b["contests"]["overturn_rate_by_model_version"][0].update(
                    resolved=0, overturned=0)),
            "since not UTC": mutated(
                stats, lambda b: b.__setitem__("since", "2026-01-01T00:00:00+01:00")),
        })
        report = self.expect("GET", "/v1/audit/verify", 200)
        assert_rejected(schema("/v1/audit/verify", "get", 200), {
            "intact with a reason": mutated(report, lambda b: b.__setitem__("reason", "x")),
            "not intact without first_bad_seq": mutated(
                report, lambda b: b.__setitem__("intact", False)),
            "empty chain with a head hash": mutated(report, lambda b: b.__setitem__("head_seq", 0)),
            "negative events": mutated(report, lambda b: b.__setitem__("events", -1)),
        })
        cp = self.expect("POST", "/v1/audit/checkpoints", 201, key=d.keys["admin"])
        assert_rejected(schema("/v1/audit/checkpoints", "post", 201), {
            "short signature": mutated(
                cp, lambda b: b.__setitem__("signature", b["signature"][:-2])),
            "upper-case public key": mutated(
                cp, lambda b: b.__setitem__("public_key", b["public_key"].upper())),
            "other file name": mutated(cp, lambda b: b.__setitem__("file", "/tmp/cp.json")),
            "head_seq 0": mutated(cp, lambda b: b.__setitem__("head_seq", 0)),
        })
        # the export: a wrong line or a wrong CSV header fails the live check
        r = self.send("GET", "/v1/audit/export")
        docs = ndjson_documents(self.check_live("GET", "/v1/audit/export", r))
        bad = copy.deepcopy(docs[0])
        bad["contest_status"] = "maybe"
        for body in (json.dumps(bad).encode() + b"\n", r.body.rstrip(b"\n"), b"not json\n"):
            with self.assertRaises(AssertionError):
                self.check_live("GET", "/v1/audit/export", H.Response(200, r.headers, body))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.check_live("GET", "/v1/audit/export", r)
        for body in (r.body.replace(b"contest_status", b"status", 1),
                     r.body.replace(b"\r\n", b"\n"), r.body + b"x,1\r\n"):
            with self.assertRaises(AssertionError):
                self.check_live("GET", "/v1/audit/export", H.Response(200, r.headers, body))
        headers = r.headers.__class__()
        for k, v in r.headers.items():
            if k.lower() != "content-disposition":
                headers[k] = v
        with self.assertRaises(AssertionError):
            self.check_live("GET", "/v1/audit/export", H.Response(200, headers, r.body))
        # error schemas: a code documented under another status or another operation
        for (path, method, status), body in {
            ("/v1/decisions/{id}/contests", "post", 409): error_body("already_resolved"),
            ("/v1/decisions/{id}/contests", "post", 422): error_body("invalid_label"),
            ("/v1/decisions/{id}/contests", "post", 404): error_body("contest_not_found"),
            ("/v1/contests/{id}/resolution", "post", 409): error_body("contest_open"),
            ("/v1/contests/{id}/resolution", "post", 404): error_body("decision_not_found"),
            ("/v1/contests/{id}/resolution", "post", 403): error_body("unauthorized"),
            ("/v1/decisions/{id}/rescore", "post", 409): error_body("contest_open"),
            ("/v1/decisions/{id}/rescore", "post", 503): error_body("overloaded"),
            ("/v1/decisions", "get", 400): error_body("decision_not_found"),
            ("/v1/decisions/{id}", "get", 400): error_body("invalid_cursor"),
            ("/v1/audit/stats", "get", 400): error_body("invalid_cursor"),
            ("/v1/audit/checkpoints", "post", 409): error_body("checkpoint_failed"),
            ("/v1/audit/checkpoints", "post", 500): error_body("empty_chain"),
            ("/v1/audit/verify", "get", 503): error_body("overloaded"),
            ("/v1/score", "post", 400): error_body("invalid_cursor"),
            ("/v1/score", "post", 403): error_body("filer_cannot_resolve"),
        }.items():
            with self.subTest(case=f"{method} {path} {status} {body['error']['code']}"):
                self.assertTrue(validation_errors(schema(path, method, status), body))
        # input_incompatible is the re-score's 409; dimension_mismatch stays the scoring 400
        self.assertFalse(validation_errors(schema("/v1/decisions/{id}/rescore", "post", 409),
                                           error_body("input_incompatible")))
        self.assertTrue(validation_errors(schema("/v1/decisions/{id}/rescore", "post", 409),
                                          error_body("dimension_mismatch")))
        self.assertFalse(validation_errors(schema("/v1/score", "post", 400),
                                           error_body("dimension_mismatch")))


class LiveReviewStatesTest(LiveValidationMixin, unittest.TestCase):
    """--auth off with a signing key: the answers that need a particular state of the daemon or
    its database, in order: an empty chain (verify, 409 empty_chain), anonymous contests and
    resolutions, 409 input_incompatible after activating a version of another D, a decision
    outside the contest window and without a stored input (422 contest_window_closed,
    409 input_not_stored, and a chain that is no longer intact), 500 checkpoint_failed, and
    503 not_ready for a model that is gone after a restart."""

    @classmethod
    def setUpClass(cls):
        H.require_models("tiny_binary", "toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-openapi-states-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.root = os.path.join(cls.tmp, "models")
        tiny_copy(cls.root, "tiny", "1")
        tiny_copy(cls.root, "tiny", "0wide", src=("toxicity", "1"))  # D = 1024; sorts below 1
        tiny_copy(cls.root, "gone", "1")
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=cls.root, default_model="tiny", auth=False,
                     args=["--signing-key", cls.signing_key, "--checkpoint-dir", cls.tmp])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", cls.signing_key)
        d.start()
        cls.daemon = d

    def send(self, method, path, body=None, key="", content_type="application/json"):
        return super().send(method, path, body, key=key, content_type=content_type)

    def test_states(self):
        d = self.daemon
        # nothing recorded yet: an empty chain, empty lists
        report = self.expect("GET", "/v1/audit/verify", 200)
        self.assertEqual(report, {"intact": True, "events": 0, "first_bad_seq": None,
                                  "reason": None, "head_seq": 0, "head_hash": None})
        self.expect("POST", "/v1/audit/checkpoints", 409, "empty_chain")
        self.assertEqual(self.expect("GET", "/v1/decisions", 200),
                         {"decisions": [], "next_cursor": None})
        self.assertEqual(self.expect("GET", "/v1/contests", 200),
                         {"contests": [], "next_cursor": None})
        stats = self.expect("GET", "/v1/audit/stats", 200)
        self.assertEqual((stats["decisions"]["total"], stats["contests"]["filed"]), (0, 0))
        r = self.send("GET", "/v1/audit/export?format=csv")
        self.assertEqual(csv_rows(self.check_live("GET", "/v1/audit/export", r), EXPORT_COLUMNS),
                         [])
        # anonymous contests and resolutions
        r = d.score({"items": tiny_b64_items(1, 91, "st")}, key="")
        self.assertEqual(r.status, 200, r)
        did = r.json["results"][0]["decision_id"]
        r = d.score({"model": "gone", "items": tiny_b64_items(1, 92, "gone")}, key="")
        self.assertEqual(r.status, 200, r)
        gone_did = r.json["results"][0]["decision_id"]
        filed = self.expect("POST", f"/v1/decisions/{did}/contests", 201, body={"reason": "r"})
        self.assertEqual(filed["filed_by"], "anonymous")
        resolved = self.expect("POST", f"/v1/contests/{filed['contest_id']}/resolution", 201,
                               body={"outcome": "upheld", "note": "n"})
        self.assertEqual((resolved["resolved_by"], resolved["corrected_label"]),
                         ("anonymous", None))
        rec = self.expect("GET", f"/v1/decisions/{did}", 200)
        self.assertEqual((rec["contests"][0]["filer_key_id"],
                          rec["contests"][0]["resolution"]["resolver_key_id"],
                          rec["effective_outcome"]["status"]), (None, None, "upheld"))
        statement = self.expect("GET", f"/v1/decisions/{did}/statement", 200)
        self.assertEqual(statement["automated_decision"], "AUTOMATED_DECISION_PARTIALLY")
        cp = self.expect("POST", "/v1/audit/checkpoints", 201)
        self.assertTrue(os.path.isfile(cp["file"]))
        # the active version takes another dimension than the stored input
        self.expect("POST", "/v1/admin/models/tiny/activate", 200, body={"version": "0wide"})
        body = self.expect("POST", f"/v1/decisions/{did}/rescore", 409, "input_incompatible")
        self.assertIn("1024", body["error"]["message"])
        # a decision older than the contest window and recorded without its input, written behind
        # the daemon's back (so not chained either)
        conn = sqlite3.connect(d.db_path, timeout=30)
        with conn:
            conn.execute(
                "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
                " model_version, model_sha256, label, label_index, probabilities, toxicity,"
                " decision, policy, t_review, t_block, vector, input_sha256, latency_us) SELECT ?,"
                " '2020-01-01T00:00:00.000000Z', request_id, 'old', model_name, model_version,"
                " model_sha256, label, label_index, probabilities, toxicity, decision, policy,"
                " t_review, t_block, vector, input_sha256, latency_us FROM decisions"
                " WHERE decision_id = ?",
                (OLD_DECISION_ID, did))
        conn.close()
        self.expect("POST", f"/v1/decisions/{OLD_DECISION_ID}/contests", 422,
                    "contest_window_closed", {"reason": "late"})
        self.expect("POST", f"/v1/decisions/{OLD_DECISION_ID}/rescore", 409, "input_not_stored")
        rec = self.expect("GET", f"/v1/decisions/{OLD_DECISION_ID}", 200)
        self.assertEqual((rec["input_stored"], rec["chain"]), (None, None))
        report = self.expect("GET", "/v1/audit/verify", 200)
        self.assertFalse(report["intact"])
        self.assertEqual(report["first_bad_seq"], report["head_seq"] + 1)
        self.assertIn("not in the chain", report["reason"])
        # a signing key readable by others is refused when it is used
        os.chmod(self.signing_key, 0o644)
        try:
            body = self.expect("POST", "/v1/audit/checkpoints", 500, "checkpoint_failed")
            self.assertIn("chmod 600", body["error"]["message"])
        finally:
            os.chmod(self.signing_key, 0o600)
        # the decision's model is gone after a restart: not ready
        self.assertEqual(d.stop(), 0)
        shutil.rmtree(os.path.join(self.root, "gone"))
        d.start()
        r = self.send("POST", f"/v1/decisions/{gone_did}/rescore")
        self.assertEqual((r.status, r.error_code()), (503, "not_ready"), r)
        self.assertEqual(r.headers.get("Retry-After"), "5")
        self.check_live("POST", f"/v1/decisions/{gone_did}/rescore", r)


def tearDownModule():
    statuses = sorted({(m, p, s) for m, p, s, _ in LiveValidationMixin.checked})
    if statuses:
        print("\nvalidated live responses: " +
              ", ".join(f"{m} {p} {s}" for m, p, s in statuses), file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
