"""The Open Inference Protocol as its real clients speak it: NVIDIA's tritonclient.http and KServe's
Python SDK. The requests below are written byte for byte the way those clients build them (read
from their sources: tritonclient/http/_utils.py _get_inference_request, _infer_input.py,
_requested_output.py and _client.py infer(); kserve/protocol/infer_type.py InferRequest.to_rest()
and kserve/inference_client.py), and the answers are parsed the way those clients parse them
(tritonclient's InferResult: the JSON header cut at Inference-Header-Content-Length, then each
output's bytes at the running sum of binary_data_size; its _get_error: str(body["error"])). The
numbers must equal /v1/score's for the same embeddings, exactly.

Neither client library is needed: the test carries its own copy of their wire format.

Run: /usr/bin/python3 tests/integration/test_oip_clients.py (PGCLD_BIN selects the binary).
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest
import uuid

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from openapi_contract import LiveValidationMixin  # noqa: E402

MODEL = "toxicity"
OUTPUTS = ("label", "decision", "decision_id", "probabilities", "vector")


# ----------------------------------------------------------------- tritonclient.http's wire format

def triton_input(name, datatype, array, binary_data=True):
    """(tensor dict, raw bytes or None) as InferInput(name, shape, datatype) then
    set_data_from_numpy(array, binary_data) build them (_get_tensor, _get_binary_data)."""
    tensor = {"name": name, "shape": list(array.shape), "datatype": datatype}
    if binary_data:
        if datatype == "BYTES":  # serialize_byte_tensor: per element <I length, then the bytes
            raw = b"".join(struct.pack("<I", len(s)) + s
                           for s in (x.encode() if isinstance(x, str) else x for x in array.reshape(-1)))
        else:
            raw = array.tobytes()
        tensor["parameters"] = {"binary_data_size": len(raw)}
        return tensor, raw
    if datatype == "BYTES":
        tensor["data"] = [str(x) for x in array.reshape(-1)]
    else:
        tensor["data"] = [v.item() for v in array.flatten()]
    return tensor, None


def triton_output(name, binary_data=True):
    """InferRequestedOutput(name, binary_data)._get_tensor(): binary_data is always sent."""
    return {"name": name, "parameters": {"binary_data": binary_data}}


def triton_body(inputs, outputs=None, request_id=""):
    """(body, headers) as _get_inference_request and InferenceServerClient.infer send them: id
    when given, inputs, outputs (or, when none are asked, parameters.binary_data_output: true),
    serialised compactly (rapidjson.dumps), then the inputs' raw bytes in order. Headers:
    Inference-Header-Content-Length when there are raw bytes; no Content-Type ever."""
    request, parameters = {}, {}
    if request_id:
        request["id"] = request_id
    request["inputs"] = [t for t, _ in inputs]
    if outputs:
        request["outputs"] = outputs
    else:
        parameters["binary_data_output"] = True
    if parameters:
        request["parameters"] = parameters
    header = json.dumps(request, separators=(",", ":")).encode()
    raws = [r for _, r in inputs if r is not None]
    if not raws:
        return header, {}
    return header + b"".join(raws), {"Inference-Header-Content-Length": str(len(header))}


class TritonResult:
    """tritonclient.http.InferResult, as it reads an answer."""

    def __init__(self, resp):
        header_length = resp.headers.get("Inference-Header-Content-Length")
        self.buffers = {}
        if header_length is None:
            self.result = json.loads(resp.body)
            return
        header_length = int(header_length)
        self.result = json.loads(resp.body[:header_length])
        buffer, index = resp.body[header_length:], 0
        for output in self.result["outputs"]:
            size = (output.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                self.buffers[output["name"]] = buffer[index:index + size]
                index += size
        self.binary_bytes_left = len(buffer) - index

    def output(self, name):
        return next((o for o in self.result["outputs"] if o["name"] == name), None)

    def as_numpy(self, name):
        out = self.output(name)
        if out is None:
            return None
        shape = out["shape"]
        if name in self.buffers:
            raw = self.buffers[name]
            if out["datatype"] == "BYTES":  # deserialize_bytes_tensor
                strs, at = [], 0
                while at < len(raw):
                    n = struct.unpack_from("<I", raw, at)[0]
                    strs.append(raw[at + 4:at + 4 + n])
                    at += 4 + n
                return np.array(strs, dtype=np.object_).reshape(shape)
            return np.frombuffer(raw, dtype="<f4").reshape(shape)
        if out["datatype"] == "BYTES":
            return np.array(out["data"], dtype=np.object_).reshape(shape)
        return np.array(out["data"], dtype=np.float32).reshape(shape)


def triton_error(resp):
    """What tritonclient's _get_error makes of a non-200 answer: InferenceServerException(msg=
    body["error"]), whose str() must work (it fails when "error" is not a string)."""
    body = json.loads(resp.body.decode("utf-8"))
    msg = body["error"]
    return "[" + str(resp.status) + "] " + msg  # str + msg: a TypeError unless msg is a str


# ------------------------------------------------------------------ KServe's SDK wire format

def kserve_body(model_name, inputs, outputs=None, parameters=None, request_id=None):
    """(body, headers) as InferRequest(model_name, infer_inputs).to_rest() and
    InferenceRESTClient.infer send it: numpy inputs become JSON data (set_data_from_numpy with
    binary_data=False), the request always carries an id (a uuid4 when not given) and
    model_name, serialised by orjson (compact), Content-Type application/json."""
    request = {"id": request_id or str(uuid.uuid4()), "model_name": model_name,
               "inputs": [dict(triton_input(n, dt, a, binary_data=False)[0]) for n, dt, a in inputs]}
    for t in request["inputs"]:  # to_rest writes name, shape, datatype, then data
        t_data = t.pop("data")
        t["data"] = t_data
    if outputs:
        request["outputs"] = outputs
    if parameters:
        request["parameters"] = parameters
    return json.dumps(request, separators=(",", ":")).encode(), {"content-type": "application/json"}


def kserve_binary_body(model_name, name, datatype, array):
    """to_rest() with an input whose _raw_data is set: the JSON (no data), then the raw bytes;
    the client sends inference-header-content-length and content-type application/octet-stream."""
    raw = array.tobytes()
    request = {"id": str(uuid.uuid4()), "model_name": model_name,
               "inputs": [{"name": name, "shape": list(array.shape), "datatype": datatype,
                           "parameters": {"binary_data_size": len(raw)}}]}
    header = json.dumps(request, separators=(",", ":")).encode()
    return header + raw, {"inference-header-content-length": str(len(header)),
                          "content-type": "application/octet-stream"}


def kserve_response(resp):
    """InferenceRESTClient.infer's parse: orjson.loads of the body, or InferResponse.from_bytes
    when the answer has an inference-header-content-length."""
    return TritonResult(resp)


class OipClientsTest(LiveValidationMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        # two versions on disk: "2" (highest, so active) and "1" (available, not active)
        tmp = tempfile.mkdtemp(prefix="pgcld-oip-")
        cls.addClassCleanup(shutil.rmtree, tmp, True)
        models = H.make_models_dir(tmp, [MODEL])
        shutil.copytree(os.path.join(models, MODEL, "1"), os.path.join(models, MODEL, "2"))
        cls.daemon = H.start_daemon(cls, models=models)
        cls.Z = H.random_embeddings(5, 1024, 1919).astype(np.float32)
        cls.labels = H.load_config(MODEL)["labels"]

    def infer(self, body, headers, version=None):
        path = f"/v2/models/{MODEL}/versions/{version}/infer" if version else f"/v2/models/{MODEL}/infer"
        return self.daemon.raw("POST", path, body, headers=headers)

    def v1_reference(self, Z):
        """/v1/score's probabilities (rows in the model's label order) and vectors for Z."""
        r = self.daemon.score({"model": MODEL, "items": H.b64_items(Z, "ref"), "return_vector": True})
        self.assertEqual(r.status, 200, r)
        res = r.json["results"]
        probs = np.array([[x["probabilities"][lab] for lab in self.labels] for x in res], dtype=np.float32)
        vecs = np.array([x["vector"] for x in res], dtype=np.float32)
        return probs, vecs, [x["label"] for x in res], [x["decision"] for x in res]

    def assert_same_numbers(self, result, Z, outputs=OUTPUTS):
        probs, vecs, labels, decisions = self.v1_reference(Z)
        if "probabilities" in outputs:
            np.testing.assert_array_equal(result.as_numpy("probabilities"), probs)
        if "vector" in outputs:
            np.testing.assert_array_equal(result.as_numpy("vector"), vecs)
        as_text = [x.decode() if isinstance(x, bytes) else x for x in result.as_numpy("label").reshape(-1)] \
            if "label" in outputs else None
        if as_text is not None:
            self.assertEqual(as_text, labels)
        if "decision" in outputs:
            got = [x.decode() if isinstance(x, bytes) else x for x in result.as_numpy("decision").reshape(-1)]
            self.assertEqual(got, decisions)

    # ------------------------------------------------------------------------ tritonclient
    def test_triton_binary_inputs_no_outputs_asked_come_back_binary(self):
        """infer(inputs=[binary]) with no outputs: binary_data_output, every output binary."""
        Z = self.Z[:3]
        ids = np.array(["t-a", "t-b", "t-c"], dtype=np.object_)
        body, headers = triton_body([triton_input("embedding", "FP32", Z), triton_input("id", "BYTES", ids)],
                                    request_id="tc-1")
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        self.assertIn("Inference-Header-Content-Length", r.headers, r)
        self.assertEqual(r.content_type, "application/octet-stream")
        result = TritonResult(r)
        self.assertEqual(result.binary_bytes_left, 0, "bytes after the outputs")
        self.assertEqual([o["name"] for o in result.result["outputs"]], list(OUTPUTS))
        for o in result.result["outputs"]:
            self.assertNotIn("data", o)
            self.assertIn("binary_data_size", o["parameters"])
        self.assertEqual(result.result["id"], "tc-1")
        self.assertEqual(result.as_numpy("vector").shape, (3, 64))
        self.assert_same_numbers(result, Z)
        dids = [x.decode() for x in result.as_numpy("decision_id")]
        items = [r["item_id"] for r in self.daemon.query(
            "SELECT item_id FROM decisions WHERE decision_id IN (%s) ORDER BY seq" % ",".join("?" * 3), dids)]
        self.assertEqual(items, list(ids), "binary ids are the audit rows' item ids")

    def test_triton_outputs_asked_binary_and_json(self):
        """Only the outputs asked come back; binary_data=True ones in the binary layout."""
        Z = self.Z[1:4]
        outputs = [triton_output("probabilities", True), triton_output("label", False),
                   triton_output("vector", True)]
        body, headers = triton_body([triton_input("embedding", "FP32", Z)], outputs)
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        result = TritonResult(r)
        self.assertEqual([o["name"] for o in result.result["outputs"]], ["label", "probabilities", "vector"])
        self.assertIn("data", result.output("label"))
        self.assertEqual(result.output("probabilities")["parameters"], {"binary_data_size": 3 * 2 * 4})
        self.assertEqual(result.output("vector")["parameters"], {"binary_data_size": 3 * 64 * 4})
        self.assertEqual(result.binary_bytes_left, 0)
        self.assertIsNone(result.as_numpy("decision"))
        self.assert_same_numbers(result, Z, ("label", "probabilities", "vector"))

    def test_triton_json_tensors_without_content_type(self):
        """set_data_from_numpy(binary_data=False), outputs asked as JSON: the client sends no
        Content-Type at all; the whole answer is JSON."""
        Z = self.Z[:2]
        outputs = [triton_output(n, False) for n in OUTPUTS]
        body, headers = triton_body([triton_input("embedding", "FP32", Z, binary_data=False)], outputs)
        self.assertNotIn("Content-Type", headers)
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.headers.get("Inference-Header-Content-Length"))
        self.assertEqual(r.content_type, "application/json")
        result = TritonResult(r)
        self.assert_same_numbers(result, Z)
        # JSON-only, no outputs asked: binary_data_output makes every output binary
        body, headers = triton_body([triton_input("embedding", "FP32", Z, binary_data=False)])
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        self.assertIsNotNone(r.headers.get("Inference-Header-Content-Length"), r)
        self.assert_same_numbers(TritonResult(r), Z)
        # a wrong explicit type is still refused
        r = self.infer(body, {"Content-Type": "text/plain"})
        self.assertEqual((r.status, r.error_code()), (415, "unsupported_media_type"), r)

    def test_triton_model_version_routes(self):
        """infer(model_version=...) calls /v2/models/{name}/versions/{v}/infer."""
        meta = self.daemon.get(f"/v2/models/{MODEL}")
        self.assertEqual(meta.json["versions"], ["2"], meta)
        active = meta.json["versions"][0]
        r = self.daemon.get(f"/v2/models/{MODEL}/versions/{active}")
        self.assertEqual((r.status, r.json), (200, meta.json), r)
        self.check_live("GET", f"/v2/models/{MODEL}/versions/{active}", r)
        r = self.daemon.get(f"/v2/models/{MODEL}/versions/{active}/ready")
        self.assertEqual((r.status, r.json), (200, {"name": MODEL, "version": active, "ready": True}), r)
        Z = self.Z[:2]
        body, headers = triton_body([triton_input("embedding", "FP32", Z)], [triton_output("probabilities")])
        r = self.infer(body, headers, version=active)
        self.assertEqual(r.status, 200, r)
        result = TritonResult(r)
        self.assertEqual(result.result["model_version"], active)
        self.assert_same_numbers(result, Z, ("probabilities",))
        before = self.daemon.count()
        for suffix in ("", "/ready", "/infer"):
            method = "POST" if suffix == "/infer" else "GET"
            r = self.daemon.raw(method, f"/v2/models/{MODEL}/versions/1{suffix}",
                                body if method == "POST" else None, headers=headers if method == "POST" else {})
            self.assertEqual((r.status, r.error_code(), r.error().get("field")),
                             (409, "version_not_active", "version"), r)
            self.assertIn("active", triton_error(r))
            self.check_live(method, f"/v2/models/{MODEL}/versions/1{suffix}", r)
            r = self.daemon.raw(method, f"/v2/models/{MODEL}/versions/9{suffix}",
                                body if method == "POST" else None, headers=headers if method == "POST" else {})
            self.assertEqual((r.status, r.error_code()), (404, "version_not_found"), r)
            self.check_live(method, f"/v2/models/{MODEL}/versions/9{suffix}", r)
        self.assertEqual(self.daemon.count(), before, "a refused version wrote rows")

    def test_triton_errors_are_printable(self):
        """tritonclient raises InferenceServerException(msg=body["error"]); str(e) must work."""
        Z = np.zeros((1, 1000), dtype=np.float32)
        body, headers = triton_body([triton_input("embedding", "FP32", Z)])
        r = self.infer(body, headers)
        self.assertEqual(r.status, 400, r)
        self.assertIsInstance(r.json["error"], str, r)
        self.assertEqual(r.json["code"], "dimension_mismatch")
        self.assertEqual(r.json["field"], "inputs[0]")
        self.assertIn("1024", triton_error(r))
        self.check_live("POST", f"/v2/models/{MODEL}/infer", r)
        for path, status in (("/v2/models/nope", 404), ("/v2/models/nope/ready", 404), ("/v2/nowhere", 404)):
            r = self.daemon.get(path)
            self.assertEqual(r.status, status, r)
            self.assertIsInstance(r.json["error"], str, r)
            self.assertIn("code", r.json)
        r = self.daemon.raw("POST", f"/v2/models/{MODEL}/infer", body, headers=headers, key="")
        self.assertEqual((r.status, r.json.get("code"), type(r.json.get("error"))), (401, "unauthorized", str), r)
        r = self.daemon.raw("POST", "/v1/score", b"{", headers={"Content-Type": "application/json"})
        self.assertIsInstance(r.json["error"], dict, "/v1 keeps its error object")
        r = self.infer(body, {**headers, "Inference-Header-Content-Length": "x"})
        self.assertEqual(r.json, {"error": r.json["error"], "code": "invalid_request",
                                  "field": "Inference-Header-Content-Length"})

    # ------------------------------------------------------- one validation for every input (issue 27)
    def test_every_input_once_and_its_shape_agrees(self):
        """Each input at most once, with its name's datatype and rank, and a shape that counts its
        values (JSON data or binary bytes alike); ids one per embedding. A refusal is 400 with a
        code, the tensor's field and its name in the message, and writes nothing. (A second id
        tensor used to replace the first, and an id shape that disagreed was accepted.)"""
        Z = self.Z[:2]
        emb_json = triton_input("embedding", "FP32", Z, binary_data=False)
        emb_bin = triton_input("embedding", "FP32", Z)

        def ids(values, shape=None, datatype="BYTES", binary=True):
            tensor, raw = triton_input("id", datatype, np.array(values, dtype=np.object_), binary_data=binary)
            if shape is not None:
                tensor["shape"] = shape
            return tensor, raw

        def with_members(pair, **members):
            return dict(pair[0], **members), pair[1]

        two = ["a", "b"]
        cases = [  # (inputs, outputs, status, code, field, name in the message)
            ([emb_json, ids(two, binary=False), ids(["c", "d"], binary=False)], None, 400, "invalid_request",
             "inputs[2]", "'id'"),
            ([emb_bin, ids(two), ids(["c", "d"])], None, 400, "invalid_request", "inputs[2]", "'id'"),
            ([ids(two), emb_bin, ids(two, binary=False)], None, 400, "invalid_request", "inputs[2]", "'id'"),
            ([emb_bin, emb_bin], None, 400, "invalid_request", "inputs[1]", "'embedding'"),
            ([emb_json, ids(two, shape=[3], binary=False)], None, 400, "dimension_mismatch", "inputs[1]", "'id'"),
            ([emb_bin, ids(two, shape=[3])], None, 400, "dimension_mismatch", "inputs[1]", "'id'"),
            ([emb_bin, ids(two, shape=[1])], None, 400, "dimension_mismatch", "inputs[1]", "'id'"),
            ([emb_json, ids(two, shape=[-2], binary=False)], None, 400, "dimension_mismatch", "inputs[1]", "'id'"),
            ([emb_bin, ids(two, shape=[2, 1])], None, 400, "invalid_request", "inputs[1]", "'id'"),
            ([emb_bin, ids(two, shape=[2, 1], binary=False)], None, 400, "invalid_request", "inputs[1]", "'id'"),
            ([emb_json, with_members(ids(two, binary=False), datatype="FP32")], None, 400, "invalid_request",
             "inputs[1]", "'id'"),
            ([with_members(emb_bin, data=[0.0] * Z.size)], None, 400, "invalid_request", "inputs[0]",
             "'embedding'"),
            ([emb_bin, with_members(ids(two), data=two)], None, 400, "invalid_request", "inputs[1]", "'id'"),
            ([with_members(emb_json, parameters=[1])], None, 400, "invalid_request", "inputs[0]", "'embedding'"),
            ([emb_json, ids(["a", "b", "c"], binary=False)], None, 400, "invalid_request", "inputs.id", "3"),
            ([emb_bin], [triton_output("label"), triton_output("vector"), triton_output("label", False)], 400,
             "invalid_request", "outputs[2]", "'label'"),
        ]
        before = self.daemon.count()
        for inputs, outputs, status, code, field, named in cases:
            body, headers = triton_body(inputs, outputs)
            with self.subTest(request=body[:300]):
                r = self.infer(body, headers)
                self.assertEqual((r.status, r.error_code(), r.error().get("field")), (status, code, field), r)
                self.assertIn(named, triton_error(r))
                self.check_live("POST", f"/v2/models/{MODEL}/infer", r)
        self.assertEqual(self.daemon.count(), before, "a refused request wrote rows")
        # the same tensors, each once and with shapes that agree, are scored, in any input order
        for inputs in ([emb_json, ids(two, binary=False)], [ids(two), emb_bin], [emb_bin, ids(two, binary=False)]):
            body, headers = triton_body(inputs)
            r = self.infer(body, headers)
            self.assertEqual(r.status, 200, r)
            dids = [x.decode() for x in TritonResult(r).as_numpy("decision_id")]
            items = [x["item_id"] for x in self.daemon.query(
                "SELECT item_id FROM decisions WHERE decision_id IN (?, ?) ORDER BY seq", dids)]
            self.assertEqual(items, two)

    # ------------------------------------------------------------------------ KServe's SDK
    def test_kserve_to_rest_with_model_name(self):
        """InferRequest.to_rest() always sends model_name (and an id): accepted when it names the
        path's model; a contradicting one is refused with a code naming the field."""
        Z = self.Z[2:5]
        body, headers = kserve_body(MODEL, [("embedding", "FP32", Z)], request_id="ks-1",
                                    parameters={"anything": "goes"})
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        result = kserve_response(r)
        self.check_live("POST", f"/v2/models/{MODEL}/infer", r)
        self.assertEqual((result.result["model_name"], result.result["id"]), (MODEL, "ks-1"))
        self.assert_same_numbers(result, Z)
        # requested outputs with KServe's parameters (binary_data false), per-input parameters
        body, headers = kserve_body(MODEL, [("embedding", "FP32", Z)],
                                    outputs=[{"name": "vector", "parameters": {"binary_data": False}}])
        doc = json.loads(body)
        doc["inputs"][0]["parameters"] = {"content_type": "np"}
        r = self.infer(json.dumps(doc).encode(), headers)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([o["name"] for o in r.json["outputs"]], ["vector"])
        self.assert_same_numbers(kserve_response(r), Z, ("vector",))
        # binary input (to_rest with raw data)
        body, headers = kserve_binary_body(MODEL, "embedding", "FP32", Z)
        r = self.infer(body, headers)
        self.assertEqual(r.status, 200, r)
        self.assert_same_numbers(kserve_response(r), Z)
        # model_name / model_version that contradict the path
        before = self.daemon.count()
        body, headers = kserve_body("other_model", [("embedding", "FP32", Z)])
        r = self.infer(body, headers)
        self.assertEqual((r.status, r.error_code(), r.error()["field"]), (400, "model_name_mismatch", "model_name"), r)
        doc = json.loads(kserve_body(MODEL, [("embedding", "FP32", Z)])[0])
        doc["model_version"] = "1"
        r = self.infer(json.dumps(doc).encode(), headers)
        self.assertEqual((r.status, r.error_code(), r.error()["field"]),
                         (400, "model_version_mismatch", "model_version"), r)
        doc["model_version"] = "2"
        r = self.infer(json.dumps(doc).encode(), headers, version="2")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.daemon.count(), before + len(Z))

    # ------------------------------------------------------------------ Triton's extensions
    def test_repository_index(self):
        """tritonclient's get_model_repository_index(): POST with an empty, untyped body."""
        d = self.daemon
        self.assertEqual(d.get("/v2", key="").json["extensions"], ["binary_tensor_data", "model_repository", "statistics"])
        r = d.raw("POST", "/v2/repository/index", b"")
        self.assertEqual(r.status, 200, r)
        self.check_live("POST", "/v2/repository/index", r)
        self.assertEqual(r.json, [{"name": MODEL, "version": "1", "state": "UNAVAILABLE", "reason": "available"},
                                  {"name": MODEL, "version": "2", "state": "READY"}])
        r = d.raw("POST", "/v2/repository/index", b'{"ready":true}')
        self.assertEqual(r.json, [{"name": MODEL, "version": "2", "state": "READY"}], r)
        for body, ctype, status, code in ((b'{"ready":1}', "application/json", 400, "invalid_request"),
                                          (b"[", None, 400, "invalid_json"),
                                          (b"{}", "text/plain", 415, "unsupported_media_type")):
            r = d.raw("POST", "/v2/repository/index", body, headers={"Content-Type": ctype} if ctype else {})
            self.assertEqual((r.status, r.error_code()), (status, code), r)
            self.check_live("POST", "/v2/repository/index", r)
        r = d.raw("POST", "/v2/repository/index", b"", key="")
        self.assertEqual((r.status, r.error_code()), (401, "unauthorized"), r)

    def test_model_statistics(self):
        """tritonclient's get_inference_statistics(model, version): counts follow what was scored."""
        d = self.daemon
        path = f"/v2/models/{MODEL}/versions/2/stats"

        def stats():
            r = d.get(path)
            self.assertEqual(r.status, 200, r)
            self.check_live("GET", path, r)
            (entry,) = r.json["model_stats"]
            self.assertEqual((entry["name"], entry["version"]), (MODEL, "2"))
            return entry

        before = stats()
        body, headers = triton_body([triton_input("embedding", "FP32", self.Z[:3])])
        self.assertEqual(self.infer(body, headers).status, 200)
        self.assertEqual(d.score({"model": MODEL, "items": H.b64_items(self.Z[:2], "st")}).status, 200)
        bad = triton_body([triton_input("embedding", "FP32", np.zeros((1, 7), dtype=np.float32))])
        self.assertEqual(self.infer(*bad).status, 400)  # refused while parsing: not a call
        after = stats()
        self.assertEqual(after["inference_count"] - before["inference_count"], 5)
        self.assertEqual(after["execution_count"] - before["execution_count"], 2)
        got, was = after["inference_stats"], before["inference_stats"]
        self.assertEqual(got["success"]["count"] - was["success"]["count"], 2)
        self.assertEqual(got["fail"]["count"], was["fail"]["count"])
        self.assertGreater(got["success"]["ns"], was["success"]["ns"])
        self.assertGreater(got["compute_infer"]["ns"], was["compute_infer"]["ns"])
        self.assertGreaterEqual(got["success"]["ns"] - was["success"]["ns"],
                                got["compute_infer"]["ns"] - was["compute_infer"]["ns"])
        self.assertGreater(after["last_inference"], 1_700_000_000_000)
        r = d.get(f"/v2/models/{MODEL}/stats")
        self.assertEqual([(e["version"], e["inference_count"]) for e in r.json["model_stats"]],
                         [("1", 0), ("2", after["inference_count"])], r)
        self.check_live("GET", f"/v2/models/{MODEL}/stats", r)
        for p, code in ((f"/v2/models/{MODEL}/versions/9/stats", "version_not_found"),
                        ("/v2/models/nope/stats", "model_not_found")):
            r = d.get(p)
            self.assertEqual((r.status, r.error_code()), (404, code), r)
            self.check_live("GET", p, r)

    def test_binary_answer_replays_byte_for_byte(self):
        """An Idempotency-Key retry of a binary-output request gets the same bytes and header."""
        body, headers = triton_body([triton_input("embedding", "FP32", self.Z[:2])])
        headers = {**headers, "Idempotency-Key": "oip-binary-1"}
        first, again = self.infer(body, headers), self.infer(body, headers)
        self.assertEqual((first.status, again.status), (200, 200), again)
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(again.body, first.body)
        self.assertEqual(again.headers.get("Inference-Header-Content-Length"),
                         first.headers.get("Inference-Header-Content-Length"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
