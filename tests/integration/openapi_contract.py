"""What the test_openapi_* programs share: openapi.yaml loaded with its $refs resolved, the
Draft 2020-12 validation of a body against a schema, the documented path of a request path, the
readers of newline-delimited JSON, CSV and Prometheus text, LiveValidationMixin (a live response
checked against what the document says of it), and the model copies and request bodies the live
tests build.

Imported by tests/integration/test_openapi_{spec,score,admin,review}.py (like harness.py).
"""

import csv
import io
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jsonschema  # noqa: E402,F401
import yaml  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

import harness as H  # noqa: E402
import numpy as np  # noqa: E402

SPEC_PATH = os.path.join(H.SOURCE_ROOT, "openapi.yaml")
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
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


def error_body(code, path=""):
    """An error body with code as pgcld writes it on path: the Open Inference Protocol's shape
    under /v2, {"error": {...}} elsewhere."""
    if path == "/v2" or path.startswith("/v2/"):
        return {"error": "m", "code": code}
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
        code = (H.error_object(body) or {}).get("code")
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
        err = H.error_object(self.expect(method, path, status, code, body, **kw))
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


def print_validated_responses():
    """The statuses validated against the document by this program, on stderr (tearDownModule)."""
    statuses = sorted({(m, p, s) for m, p, s, _ in LiveValidationMixin.checked})
    if statuses:
        print("\nvalidated live responses: " +
              ", ".join(f"{m} {p} {s}" for m, p, s in statuses), file=sys.stderr)
