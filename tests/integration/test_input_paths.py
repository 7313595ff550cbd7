"""Every input path gives the same decisions for the same float32 inputs: JSON arrays (the fast
parser), base64, application/octet-stream, and the Open Inference Protocol (JSON tensors and the
binary tensor extension). Their audit rows are bit-identical apart from ids and times.

Run: /usr/bin/python3 tests/integration/test_input_paths.py (PGCLD_BIN selects the binary).
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

COLUMNS = ("label", "label_index", "probabilities", "toxicity", "decision", "vector", "input_sha256", "input")


class InputPathsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.daemon = H.start_daemon(cls, models=["toxicity"])
        cls.Z = H.random_embeddings(6, 1024, 4242)

    def rows(self, decision_ids):
        rows = self.daemon.rows_for(decision_ids)
        return [tuple(rows[i][c] for c in COLUMNS) for i in decision_ids]

    def test_paths_agree(self):
        d, Z = self.daemon, self.Z
        ids = [f"p{i}" for i in range(len(Z))]
        answers = {}
        # JSON numbers as float32 round-trip text (what a client writing float32 values sends)
        r = d.score({"items": [{"id": ids[i], "embedding": [float(f"{v:.9g}") for v in Z[i]]} for i in range(len(Z))]})
        answers["json"] = r
        answers["base64"] = d.score({"items": H.b64_items(Z, "p")})
        raw = np.ascontiguousarray(Z, dtype="<f4").tobytes()
        answers["octets"] = d.raw("POST", "/v1/score?model=toxicity", raw,
                                  headers={"Content-Type": "application/octet-stream",
                                           "Pgcld-Item-Ids": json.dumps(ids)})
        tensor = {"name": "embedding", "datatype": "FP32", "shape": [len(Z), 1024],
                  "data": [float(f"{v:.9g}") for v in Z.reshape(-1)]}
        id_tensor = {"name": "id", "datatype": "BYTES", "shape": [len(Z)], "data": ids}
        answers["v2-json"] = d.post("/v2/models/toxicity/infer", {"inputs": [tensor, id_tensor]})
        header = json.dumps({"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [len(Z), 1024],
                                         "parameters": {"binary_data_size": len(raw)}}, id_tensor]}).encode()
        answers["v2-binary"] = d.raw("POST", "/v2/models/toxicity/infer", header + raw,
                                     headers={"Inference-Header-Content-Length": str(len(header)),
                                              "Content-Type": "application/octet-stream"})
        decision_ids = {}
        for path, r in answers.items():
            self.assertEqual(r.status, 200, (path, r))
            if path.startswith("v2"):
                out = {o["name"]: o for o in r.json["outputs"]}
                decision_ids[path] = out["decision_id"]["data"]
                self.assertEqual(out["vector"]["shape"], [len(Z), 64])
            else:
                decision_ids[path] = [x["decision_id"] for x in r.json["results"]]
        reference = self.rows(decision_ids["json"])
        for path, dids in decision_ids.items():
            with self.subTest(path=path):
                self.assertEqual(self.rows(dids), reference, f"{path} differs from the JSON path")
        items = {path: [r["item_id"] for r in d.query(
            "SELECT item_id FROM decisions WHERE decision_id IN (%s) ORDER BY seq" % ",".join("?" * len(dids)), dids)]
            for path, dids in decision_ids.items()}
        self.assertEqual(items["octets"], ids)
        self.assertEqual(items["v2-binary"], ids)

    def test_v2_metadata_and_health(self):
        d = self.daemon
        self.assertEqual(d.get("/v2/health/live", key="").json, {"live": True})
        self.assertEqual(d.get("/v2/health/ready", key="").json, {"ready": True})
        meta = d.get("/v2/models/toxicity")
        self.assertEqual(meta.status, 200, meta)
        self.assertEqual(meta.json["inputs"][0], {"name": "embedding", "datatype": "FP32", "shape": [-1, 1024]})
        self.assertEqual(d.get("/v2/models/nope").error_code(), "model_not_found")
        self.assertEqual(d.get("/v2", key="").json["name"], "pgcld")

    def test_bad_inputs_on_new_paths(self):
        d = self.daemon
        raw = np.zeros(1023, dtype="<f4").tobytes()
        r = d.raw("POST", "/v1/score", raw, headers={"Content-Type": "application/octet-stream"})
        self.assertEqual((r.status, r.error_code()), (400, "dimension_mismatch"), r)
        bad = np.zeros(1024, dtype="<f4")
        bad[7] = np.nan
        r = d.raw("POST", "/v1/score", bad.tobytes(), headers={"Content-Type": "application/octet-stream"})
        self.assertEqual((r.status, r.error_code()), (400, "non_finite_value"), r)
        r = d.raw("POST", "/v1/score?model=toxicity", np.zeros(1024, dtype="<f4").tobytes(),
                  headers={"Content-Type": "application/octet-stream", "Pgcld-Item-Ids": "[1]"})
        self.assertEqual((r.status, r.error_code()), (400, "invalid_request"), r)
        r = d.post("/v2/models/toxicity/infer", {"inputs": [{"name": "embedding", "datatype": "FP32",
                                                             "shape": [1, 1000], "data": [0] * 1000}]})
        self.assertEqual((r.status, r.error_code()), (400, "dimension_mismatch"), r)
        r = d.post("/v2/models/toxicity/infer", {"inputs": [{"name": "embedding", "datatype": "FP32",
                                                             "shape": [2, 1024], "data": [0] * 1024}]})
        self.assertEqual((r.status, r.error_code()), (400, "dimension_mismatch"), r)
        r = d.post("/v2/models/toxicity/infer", {"inputs": [{"name": "embedding", "datatype": "FP32",
                                                             "shape": [1, 1024], "data": [0] * 1024}]},
                   key=d.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (403, "forbidden"), r)
        before = d.count()
        self.assertEqual(d.count(), before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
