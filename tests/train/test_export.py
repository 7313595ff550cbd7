"""Export -> `pgcld check-model` -> OK: the C loader accepts trained checkpoints of every task and
recomputes their goldens. Also checks the committed trained models (models/toxicity/1 and
models/emotions/1 must both be there). Without the binary ($PGCLD_BIN, else build/server/pgcld) it
skips (77) when run by hand and fails under tests/run_all.sh, where meson has built it."""

import json
import os
import subprocess
import tempfile
import unittest

import common

PGCLD = common.pgcld_binary()
if PGCLD is None:
    common.missing("no pgcld binary (set PGCLD_BIN or build build/server/pgcld)")

import numpy as np  # noqa: E402

from train import calibrate, probe, trainer  # noqa: E402
from train.export import export_checkpoint  # noqa: E402
from train.fit import choose_goldens, golden_pool  # noqa: E402
from train.load import load_checkpoint  # noqa: E402

COMMITTED = ("models/toxicity/1", "models/emotions/1")


def check_model(*dirs):
    result = subprocess.run([PGCLD, "check-model", *dirs], capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return result.returncode, lines, result.stderr


class TrainedExports(unittest.TestCase):
    def export(self, tmp, task, K, policy_fn):
        X, y = common.xor_clusters(40, D=48, noise=0.3, seed=20 + K, classes=K)
        n = len(y) * 3 // 4
        cfg = trainer.TrainConfig(epochs=4, batch_size=32, lr=1e-3)
        metric = {"binary": "auc", "multiclass": "weighted_f1", "ordinal": "qwk"}[task]
        model, _ = trainer.train(X[:n], y[:n], X[n:], y[n:], task=task, K=K, cfg=cfg, seed=1, metric=metric)
        probe.install_head(model, probe.fit(trainer.embed(model, X[:n]), y[:n], 10.0), task)
        labels = [f"c{k}" for k in range(K)]
        policy = policy_fn(model, X[n:], y[n:], labels)
        goldens = choose_goldens(model, golden_pool(np.random.default_rng(0), 48, X, y, K), 6, labels, policy)
        out = os.path.join(tmp, task, "1")
        export_checkpoint(model, out, task, labels, policy, golden_inputs=goldens, training={"kind": "test"})
        return out

    def test_every_task_passes_check_model(self):
        def threshold(model, Xv, yv, labels):
            import torch
            with torch.no_grad():
                score = model(torch.from_numpy(Xv))["probabilities"].numpy()[:, 1]
            return calibrate.threshold_policy(labels[1], yv, score, split_note="test")

        def label_map(model, Xv, yv, labels):
            return calibrate.label_map_policy(labels, [f"{labels[-1]}=block", f"{labels[1]}=review"], 0.6)

        with tempfile.TemporaryDirectory() as tmp:
            dirs = [self.export(tmp, "binary", 2, threshold), self.export(tmp, "multiclass", 3, label_map),
                    self.export(tmp, "ordinal", 4, label_map)]
            rc, lines, stderr = check_model(*dirs)
            self.assertEqual(rc, 0, stderr + json.dumps(lines))
            self.assertEqual(len(lines), 3)
            for directory, line in zip(dirs, lines):
                self.assertTrue(line["ok"], line)
                self.assertEqual(line["golden_verified"], 6, line)
                _, config = load_checkpoint(directory)
                self.assertEqual(line["sha256"], config["weights_sha256"])

    def test_tampered_golden_is_refused(self):
        def label_map(model, Xv, yv, labels):
            return calibrate.label_map_policy(labels)

        with tempfile.TemporaryDirectory() as tmp:
            directory = self.export(tmp, "multiclass", 3, label_map)
            path = os.path.join(directory, "config.json")
            with open(path) as f:
                config = json.load(f)
            config["golden"][0]["vector"][0] += 1e-3
            with open(path, "w") as f:
                json.dump(config, f)
            rc, lines, _ = check_model(directory)
            self.assertNotEqual(rc, 0)
            self.assertFalse(lines[0]["ok"])


class CommittedModels(unittest.TestCase):
    def test_committed_checkpoints(self):
        dirs = [os.path.join(common.ROOT, d) for d in COMMITTED]
        for d in dirs:
            self.assertTrue(os.path.isdir(d), f"the committed checkpoint {d} is missing")
        rc, lines, stderr = check_model(*dirs)
        self.assertEqual(rc, 0, stderr)
        for line in lines:
            self.assertTrue(line["ok"], line)
            self.assertGreaterEqual(line["golden_verified"], 1)
        for d in dirs:
            _, config = load_checkpoint(d)
            self.assertEqual(config["training"]["kind"], "pgcl-fit")
            self.assertIn("chosen_variant", config["training"]["selection"])


if __name__ == "__main__":
    unittest.main()
