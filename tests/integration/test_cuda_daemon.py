#!/usr/bin/python3
"""The daemon serving on CUDA end to end: `pgcld serve --device cuda:0` beside `--device cpu` on the
same checkpoints (every committed model and test fixture), scoring the same inputs over loopback
HTTP; the CUDA answers must agree with the CPU ones in FP32 (every probability and vector component
within 1e-5 + 1e-5·|cpu|, the tolerance of tests/gpu/test_cuda_parity.c), give the same label and
decision (except for an item within 1e-5 of a policy threshold), and be what the audit database
recorded. Covers batches of 1, 7, 64 and 300 items, JSON and base64 inputs, /v2 inference, and
eight clients at once (the batcher joining their requests on the device).

Exit 77 (skipped) only where this machine has no NVIDIA device node (/dev/nvidiactl, /dev/nvidia0
or /dev/dxg: what pgcld itself looks for). Where there is one, the test runs and never skips: a
pgcld built without CUDA, a driver that does not work or a GPU answer that differs is a failure.

Run: /usr/bin/python3 tests/integration/test_cuda_daemon.py   (PGCLD_BIN selects the binary)
"""

import os
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")
MODELS = {"toxicity": H.model_source("toxicity"),
          "emotions": os.path.join(H.SOURCE_ROOT, "models", "emotions"),
          "tiny_binary": H.model_source("tiny_binary"),
          "tiny_multi": H.model_source("tiny_multi"),
          "tiny_ordinal": H.model_source("tiny_ordinal")}
BATCHES = (1, 7, 64, 300)
ATOL = RTOL = 1e-5


def config(name):
    import json
    with open(os.path.join(MODELS[name], "1", "config.json"), encoding="utf-8") as f:
        return json.load(f)


def close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))


class CudaDaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        extra = {n: p for n, p in MODELS.items() if n not in H.MODEL_SOURCES}
        names = [n for n in MODELS if n in H.MODEL_SOURCES]
        # Under AddressSanitizer the CUDA driver needs the shadow gap unprotected (tests/meson.build
        # sets the same for tests/gpu).
        asan = os.environ.get("ASAN_OPTIONS", "")
        gpu_env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "protect_shadow_gap=0"}
        cls.cpu = H.start_daemon(cls, models=names, extra_models=extra, args=["--device", "cpu"])
        cls.gpu = H.start_daemon(cls, models=names, extra_models=extra, env=gpu_env,
                                 args=["--device", "cuda:0", "--device-precision", "fp32"])
        for d in (cls.cpu, cls.gpu):
            if not H.wait_until(lambda: d.get("/readyz").status == 200, 120):
                raise AssertionError(f"pgcld not ready\n{d.logs()}")

    def test_0_serves_on_the_device(self):
        logs = self.gpu.logs(limit=10 ** 9)
        self.assertRegex(logs, r"compute: cuda:0 \(.*fp32\)", "the daemon did not say it computes on cuda:0")
        self.assertIn("compute: cpu", self.cpu.logs(limit=10 ** 9).lower())

    def compare(self, name, cpu_r, gpu_r, where):
        self.assertEqual(cpu_r.status, 200, f"{where}: cpu {cpu_r}")
        self.assertEqual(gpu_r.status, 200, f"{where}: gpu {gpu_r}")
        cfg = config(name)
        labels, policy = cfg["labels"], cfg["decision_policy"]
        c_res, g_res = cpu_r.json["results"], gpu_r.json["results"]
        self.assertEqual([r["id"] for r in g_res], [r["id"] for r in c_res], where)
        worst = 0.0
        for c, g in zip(c_res, g_res):
            at = f"{where} item {c['id']}"
            cp = [c["probabilities"][lab] for lab in labels]
            gp = [g["probabilities"][lab] for lab in labels]
            self.assertTrue(close(gp, cp), f"{at}: probabilities cuda {gp} cpu {cp}")
            self.assertTrue(close(g["vector"], c["vector"]), f"{at}: vectors differ beyond FP32 rounding")
            worst = max(worst, float(np.max(np.abs(np.asarray(g["vector"]) - np.asarray(c["vector"])))),
                        float(np.max(np.abs(np.asarray(gp) - np.asarray(cp)))))
            top2 = sorted(cp)[-2:]
            if top2[1] - top2[0] > 1e-5:
                self.assertEqual(g["label"], c["label"], at)
            if not H.near_policy_boundary(policy, labels, cp):
                self.assertEqual(g["decision"], c["decision"], at)
        return worst

    def score_both(self, name, Z, form, prefix):
        items = (H.json_items if form == "json" else H.b64_items)(Z, prefix)
        body = {"model": name, "items": items, "return_vector": True}
        return self.cpu.score(body), self.gpu.score(body)

    def test_1_every_model_and_batch_size(self):
        worst = {}
        for name in MODELS:
            D = config(name)["dims"]["D"]
            for n in BATCHES:
                for form in ("b64", "json"):
                    with self.subTest(model=name, batch=n, form=form):
                        Z = H.random_embeddings(n, D, seed=1000 * n + len(name))
                        if n > 1:
                            Z[0] = 0.0  # a zero input (its normalisation divides by a small norm)
                        cpu_r, gpu_r = self.score_both(name, Z, form, f"{name}-{n}-{form}")
                        worst[name] = max(worst.get(name, 0.0),
                                          self.compare(name, cpu_r, gpu_r, f"{name} batch {n} {form}"))
                        self.check_audit_rows(gpu_r)
        print("max |cuda - cpu| per model: " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()),
              file=sys.stderr)

    def check_audit_rows(self, answer):
        rows = self.gpu.rows_for(r["decision_id"] for r in answer.json["results"])
        self.assertEqual(len(rows), len(answer.json["results"]), "decisions answered on CUDA are not in the audit db")
        for r in answer.json["results"]:
            row = rows[r["decision_id"]]
            self.assertEqual((row["item_id"], row["decision"]), (r["id"], r["decision"]))
            self.assertTrue(np.array_equal(H.blob_vector(row["vector"]), np.asarray(r["vector"], dtype=np.float32)),
                            f"{r['id']}: the recorded vector is not the answered one")

    def test_2_v2_inference(self):
        D = config("toxicity")["dims"]["D"]
        Z = H.random_embeddings(5, D, seed=77)
        body = {"inputs": [{"name": "embedding", "datatype": "FP32", "shape": [5, D],
                            "data": [float(x) for x in Z.reshape(-1)]}]}
        cpu_r = self.cpu.post("/v2/models/toxicity/infer", body)
        gpu_r = self.gpu.post("/v2/models/toxicity/infer", body)
        self.assertEqual((cpu_r.status, gpu_r.status), (200, 200), (cpu_r, gpu_r))
        c_out = {o["name"]: o for o in cpu_r.json["outputs"]}
        g_out = {o["name"]: o for o in gpu_r.json["outputs"]}
        self.assertEqual(set(g_out), set(c_out))
        self.assertTrue(close(g_out["probabilities"]["data"], c_out["probabilities"]["data"]), "/v2 probabilities")
        self.assertTrue(close(g_out["vector"]["data"], c_out["vector"]["data"]), "/v2 vectors")
        cfg = config("toxicity")
        probs = np.asarray(c_out["probabilities"]["data"]).reshape(5, -1)
        for i in range(5):
            self.assertEqual(g_out["label"]["data"][i], c_out["label"]["data"][i], f"/v2 item {i} label")
            if not H.near_policy_boundary(cfg["decision_policy"], cfg["labels"], list(probs[i])):
                self.assertEqual(g_out["decision"]["data"][i], c_out["decision"]["data"][i], f"/v2 item {i} decision")

    def test_3_concurrent_clients(self):
        """Eight clients at once: requests joined into shared forward passes on the device give each
        client its own rows."""
        D = config("toxicity")["dims"]["D"]
        inputs = [H.random_embeddings(16, D, seed=500 + k) for k in range(8)]
        answers = [None] * 8

        def client(k):
            answers[k] = self.gpu.score({"model": "toxicity", "items": H.b64_items(inputs[k], f"k{k}-"),
                                         "return_vector": True})

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(H.HTTP_TIMEOUT_S)
        for k in range(8):
            cpu_r = self.cpu.score({"model": "toxicity", "items": H.b64_items(inputs[k], f"k{k}-"),
                                    "return_vector": True})
            self.compare("toxicity", cpu_r, answers[k], f"client {k}")

    def test_4_models_resident_on_the_device(self):
        """After the tests above scored with every model: each was uploaded to the device (weights
        are uploaded at a model's first forward pass), so the answers compared came from it."""
        logs = self.gpu.logs(limit=10 ** 9)
        for name in MODELS:
            self.assertIn(f"cuda:0: model {name}/1 resident", logs, f"{name} was not uploaded to the device")

    def test_9_exits_cleanly(self):
        self.assertEqual(self.gpu.stop(), 0, self.gpu.logs())
        self.assertNotRegex(self.gpu.logs(limit=10 ** 9), r"Z error ", "the daemon logged an error")


if __name__ == "__main__":
    present = [p for p in DEVICE_NODES if os.path.exists(p)]
    if not present:
        print(f"SKIP: no NVIDIA device on this machine (none of {', '.join(DEVICE_NODES)} exists)")
        sys.exit(77)
    print(f"NVIDIA device nodes: {', '.join(present)}: the test runs (it never skips here)")
    H.main()
