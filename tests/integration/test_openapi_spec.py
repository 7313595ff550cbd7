#!/usr/bin/python3
"""openapi.yaml is sane and agrees with the daemon's route table.

OpenAPI 3.1, every operation has responses with descriptions, every $ref (and discriminator
mapping) resolves, every component schema is valid Draft 2020-12, every example validates against
its schema, every metric family and streamed media type is described, every error code of the
contract is documented under the right status of exactly the operations that answer it, and the
documented operations, their security and their roles match the daemon's route table
(server/http/route_table.c). No daemon is started.

openapi.yaml is checked by four programs: test_openapi_spec (the document itself),
test_openapi_score (probes, scoring, v2 inference), test_openapi_admin (administration) and
test_openapi_review (reviewers and the audit log); what they share is in openapi_contract.py.

Run: /usr/bin/python3 tests/integration/test_openapi_spec.py
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jsonschema import Draft202012Validator  # noqa: E402

import harness as H  # noqa: E402
from openapi_contract import (  # noqa: E402
    ALL_ROLES, make_validator, validation_errors, DOC, SPEC, error_body, ndjson_documents, csv_rows,
    csv_export_record, parse_prometheus,
)


ROUTE_TABLE_C = os.path.join(H.SOURCE_ROOT, "server", "http", "route_table.c")

# (code -> HTTP status) as the contract defines them; "route" errors are answered on any path.
CONTRACT_ERRORS = {
    "invalid_json": 400, "invalid_request": 400, "missing_id": 400, "dimension_mismatch": 400,
    "non_finite_value": 400, "invalid_base64": 400, "empty_batch": 400,
    # a score item's facts for a statement of reasons (issue 19, item 9)
    "invalid_content_date": 400, "invalid_territorial_scope": 400, "invalid_content_language": 400,
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
    "contest_not_found": 404, "resolution_not_found": 404, "contest_open": 409, "already_resolved": 409,
    "input_not_stored": 409, "input_incompatible": 409, "no_signing_key": 409, "empty_chain": 409,
    "contest_window_closed": 422, "invalid_label": 422, "checkpoint_failed": 500,
    "input_not_rescorable": 409, "shadow_is_active": 409, "proof_unavailable": 409,
    "input_dropped": 410,
    "tree_size_beyond_log": 404,
    # the request's head, checked before routing on every path (documented in info.description)
    "not_implemented": 501,
    # the Open Inference Protocol
    "model_name_mismatch": 400, "model_version_mismatch": 400, "version_not_active": 409,
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
V2_INFER_ERRORS = {
    "invalid_json", "invalid_request", "dimension_mismatch", "non_finite_value", "empty_batch",
    "model_not_found", "not_found", "payload_too_large", "batch_too_large",
    "unsupported_media_type", "not_ready", "audit_unavailable", "overloaded", "rate_limited",
    "idempotency_in_flight", "idempotency_key_reused", "model_name_mismatch", "model_version_mismatch"}
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
        "idempotency_in_flight", "idempotency_key_reused", "rate_limited", "invalid_content_date",
        "invalid_territorial_scope", "invalid_content_language"},
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
    ("get", "/v1/decisions/{id}/proof"): AUTH_ERRORS | READ_ERRORS | {
        "invalid_request", "decision_not_found", "not_found", "proof_unavailable"},
    ("get", "/v1/contests/{id}/proof"): AUTH_ERRORS | READ_ERRORS | {"invalid_request", "contest_not_found", "not_found"},
    ("get", "/v1/contests/{id}/resolution/proof"): AUTH_ERRORS | READ_ERRORS | {
        "invalid_request", "resolution_not_found", "not_found"},
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
        "input_not_rescorable", "input_dropped", "not_ready", "audit_unavailable"},
    # the chain
    ("get", "/v1/audit/verify"): AUTH_ERRORS | {"invalid_request", "audit_unavailable"},
    ("post", "/v1/audit/checkpoints"): AUTH_ERRORS | BODY_ERRORS | {
        "no_signing_key", "empty_chain", "checkpoint_failed"},
    ("get", "/v1/audit/consistency"): AUTH_ERRORS | READ_ERRORS | {"invalid_request", "tree_size_beyond_log"},
    # the transparency log (routes_log.c): 404s are not_found (an unknown writer, a tile beyond the tree)
    ("get", "/log/"): AUTH_ERRORS | {"audit_unavailable"},
    ("post", "/log/checkpoint"): AUTH_ERRORS | {"audit_unavailable", "no_signing_key"},
    ("get", "/log/{writer_id}/checkpoint"): AUTH_ERRORS | {"audit_unavailable", "not_found"},
    ("get", "/log/{writer_id}/consistency"): AUTH_ERRORS | {"audit_unavailable", "invalid_request",
                                                            "tree_size_beyond_log", "not_found"},
    ("get", "/log/{writer_id}/tile/entries/{tile...}"): AUTH_ERRORS | {"audit_unavailable", "invalid_request",
                                                                       "not_found"},
    ("get", "/log/{writer_id}/tile/{tile...}"): AUTH_ERRORS | {"audit_unavailable", "invalid_request", "not_found"},
    # the Open Inference Protocol (KServe v2): public health and metadata, model metadata for every
    # role, inference for scorers
    ("get", "/v2"): set(),
    ("get", "/v2/health/live"): set(),
    ("get", "/v2/health/ready"): set(),
    ("post", "/v2/repository/index"): AUTH_ERRORS | BODY_ERRORS,
    ("get", "/v2/models/{name}/stats"): AUTH_ERRORS | {"invalid_request", "model_not_found", "not_found"},
    ("get", "/v2/models/{name}/versions/{version}/stats"): AUTH_ERRORS | {
        "invalid_request", "model_not_found", "version_not_found", "not_found"},
    ("get", "/v2/models/{name}"): AUTH_ERRORS | {"invalid_request", "model_not_found", "not_found", "not_ready"},
    ("get", "/v2/models/{name}/ready"): AUTH_ERRORS | {"invalid_request", "model_not_found", "not_found",
                                                       "not_ready"},
    ("post", "/v2/models/{name}/infer"): AUTH_ERRORS | V2_INFER_ERRORS,
    ("get", "/v2/models/{name}/versions/{version}"): AUTH_ERRORS | {
        "invalid_request", "model_not_found", "version_not_found", "version_not_active", "not_found", "not_ready"},
    ("get", "/v2/models/{name}/versions/{version}/ready"): AUTH_ERRORS | {
        "invalid_request", "model_not_found", "version_not_found", "version_not_active", "not_found", "not_ready"},
    ("post", "/v2/models/{name}/versions/{version}/infer"): AUTH_ERRORS | V2_INFER_ERRORS | {
        "version_not_found", "version_not_active"},
}


def walk(node, path="#"):
    """Yield (json-pointer, node) for every dict in a document."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}/{i}")


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


class SpecStructureTest(unittest.TestCase):
    def test_openapi_31_header(self):
        self.assertTrue(str(DOC.get("openapi", "")).startswith("3.1."), DOC.get("openapi"))
        self.assertTrue(DOC["info"]["title"])
        self.assertTrue(DOC["info"]["version"])
        self.assertEqual(set(DOC["paths"]), {
            "/healthz", "/readyz", "/metrics", "/v1/models", "/v1/score",
            "/v1/admin/models/{name}/activate", "/v1/admin/models/{name}/versions/{version}",
            "/v1/admin/models/{name}/shadow", "/v1/admin/keys", "/v1/admin/keys/{key_id}",
            "/v1/decisions", "/v1/decisions/{id}", "/v1/decisions/{id}/statement", "/v1/decisions/{id}/proof",
            "/v1/decisions/{id}/contests", "/v1/decisions/{id}/rescore", "/v1/contests",
            "/v1/contests/{id}/resolution", "/v1/audit/export", "/v1/audit/stats",
            "/v1/audit/verify", "/v1/audit/checkpoints", "/v1/audit/consistency", "/v2", "/v2/health/live",
            "/v2/health/ready", "/v2/models/{name}", "/v2/models/{name}/ready",
            "/v2/models/{name}/infer", "/v2/repository/index", "/v2/models/{name}/versions/{version}",
            "/v2/models/{name}/versions/{version}/ready", "/v2/models/{name}/versions/{version}/infer",
            "/v2/models/{name}/stats", "/v2/models/{name}/versions/{version}/stats",
            "/log/", "/log/checkpoint", "/log/{writer_id}/checkpoint", "/log/{writer_id}/consistency",
            "/v1/contests/{id}/proof", "/v1/contests/{id}/resolution/proof", "/log/{writer_id}/tile/entries/{tile...}",
            "/log/{writer_id}/tile/{tile...}",
            "/console", "/console/", "/console/{file}"})

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
                self.assertFalse(validation_errors(SPEC.schema_for(r), error_body(code, path)), where)
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
            # pgcld's own families, and the process_* ones named as Prometheus' client libraries do
            self.assertTrue(f["name"].startswith(("pgcld_", "process_")), f)
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
                accepted = {c for c in CONTRACT_ERRORS if validator.is_valid(error_body(c, path))}
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
                                               error_body("method_not_allowed", path)))
        resp = SPEC.response("/no/such/path", "get", 404)
        self.assertFalse(validation_errors(SPEC.schema_for(resp), error_body("not_found")))
        # per-item errors: item and field are documented
        detail = DOC["components"]["schemas"]["ErrorDetail"]["properties"]
        self.assertIn("item", detail)
        self.assertIn("field", detail)


if __name__ == "__main__":
    unittest.main(verbosity=2)
