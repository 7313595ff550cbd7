"""`python3 -m train fit` end to end on synthetic files: the checkpoint's head reproduces the sklearn
probe calibrated on the validation rows (Platt scaling equal to an unregularised sklearn fit on the
logits) and moved to --prevalence, the thresholds come from the validation rows reweighted to that
prevalence, the calibration record and provenance are written, `evaluate` agrees."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import common
import numpy as np
import torch

from sklearn.linear_model import LogisticRegression

from train import calibration, data, probe, trainer
from train.calibrate import binary_thresholds
from train.load import load_checkpoint
from train.metrics import calibration_metrics, task_metrics

PREVALENCE = 0.2  # the deployment share of "rude" the binary fit is told (its validation rows: 0.5)


def write_tsv(path, y, names):
    with open(path, "w", encoding="utf-8") as f:
        f.write("label\tlabel_name\ttext\n")
        for i, k in enumerate(y):
            f.write(f"{k}\t{names[k]}\ttext {i}\twith a tab kept in the text\n")


def run_cli(*args):
    result = subprocess.run([sys.executable, "-m", "train", *args], cwd=common.ROOT, capture_output=True, text=True,
                            timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"python3 -m train {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


class FitBinary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        tmp = cls.tmp.name
        X, y = common.xor_clusters(60, D=24, noise=0.3, seed=11, classes=2)
        cls.X, cls.y = X, y
        np.save(os.path.join(tmp, "train.npy"), X[:180])
        write_tsv(os.path.join(tmp, "train.tsv"), y[:180], ["calm", "rude"])
        np.save(os.path.join(tmp, "val.npy"), X[180:])
        with open(os.path.join(tmp, "val.txt"), "w") as f:
            f.write("".join(f"{k}\n" for k in y[180:]))
        cls.out = os.path.join(tmp, "models", "rude", "1")
        cls.stdout = run_cli("fit", "--train", os.path.join(tmp, "train.npy"), "--train-labels",
                             os.path.join(tmp, "train.tsv"), "--val", os.path.join(tmp, "val.npy"), "--val-labels",
                             os.path.join(tmp, "val.txt"), "--labels", "calm,rude", "--task", "binary", "--out",
                             cls.out, "--select", "--epochs", "3", "--batch-size", "32", "--seed", "3", "--quiet",
                             "--review-recall", "0.95", "--prevalence", str(PREVALENCE))
        cls.model, cls.config = load_checkpoint(cls.out)
        cls.yv = y[180:]
        cls.weight = calibration.prevalence_weights(cls.yv, calibration.class_shares(cls.yv, 2),
                                                    [1 - PREVALENCE, PREVALENCE])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_head_is_the_calibrated_sklearn_probe(self):
        training, record = self.config["training"], self.config["calibration"]
        E = trainer.embed(self.model, self.X[:180])
        lr = probe.fit(E, self.y[:180], training["head"]["C"])
        z = lr.decision_function(trainer.embed(self.model, self.X).astype(np.float64))
        # Platt's (a, b): the oracle is an (almost) unregularised sklearn fit on the validation logits
        oracle = LogisticRegression(C=1e10, max_iter=10000, tol=1e-10).fit(z[180:, None], self.yv)
        a, b = record["parameters"]["scale"], record["parameters"]["shift"]
        self.assertEqual(record["method"], "platt")
        self.assertAlmostEqual(a, float(oracle.coef_[0, 0]), delta=1e-3 * max(1.0, abs(a)))
        self.assertAlmostEqual(b, float(oracle.intercept_[0]), delta=1e-3 * max(1.0, abs(b)))
        shift = np.log(PREVALENCE / (1 - PREVALENCE)) - np.log(self.yv.mean() / (1 - self.yv.mean()))
        with torch.no_grad():
            p = self.model(torch.from_numpy(self.X))["probabilities"].numpy()
        expected = 1 / (1 + np.exp(-(a * z + b + shift)))
        self.assertLess(float(np.max(np.abs(p[:, 1] - expected))), 1e-5)
        self.assertEqual(tuple(self.model.head.weight.shape), (1, 64))

    def test_calibration_record(self):
        record = self.config["calibration"]
        self.assertEqual(record["prevalence"], {"calm": 1 - PREVALENCE, "rude": PREVALENCE})
        self.assertEqual((record["prevalence_source"], record["folded_into_head"]), ("--prevalence", True))
        with torch.no_grad():
            p = self.model(torch.from_numpy(self.X[180:]))["probabilities"].numpy()
        figures = calibration_metrics(self.yv, p, self.weight)
        self.assertEqual(record["validation"]["rows"], 60)
        for key in ("ece", "brier", "nll"):
            self.assertAlmostEqual(record["validation"][key], figures[key], places=5)
            self.assertIn(key, record["validation"]["uncalibrated"])
        summary = json.loads(self.stdout)
        self.assertEqual(summary["calibration"]["prevalence"], record["prevalence"])

    def test_thresholds_from_validation_at_the_prevalence(self):
        policy = self.config["decision_policy"]
        self.assertEqual((policy["kind"], policy["label"]), ("threshold", "rude"))
        with torch.no_grad():
            score = self.model(torch.from_numpy(self.X[180:]))["probabilities"].numpy()[:, 1]
        t_review, t_block, source = binary_thresholds(self.yv, score, review_recall=0.95, weight=self.weight)
        self.assertEqual((policy["t_review"], policy["t_block"]), (t_review, t_block))
        self.assertLessEqual(policy["t_review"], policy["t_block"])
        self.assertEqual(policy["source"]["rows"], 60)
        self.assertEqual(policy["source"]["prevalence"], PREVALENCE)
        self.assertGreaterEqual(policy["source"]["at_t_review"]["recall"], 0.95)

    def test_provenance(self):
        training = self.config["training"]
        self.assertEqual(training["seed"], 3)
        self.assertEqual(training["data"]["train"]["embeddings_sha256"],
                         data.sha256_file(os.path.join(self.tmp.name, "train.npy")))
        self.assertEqual(training["data"]["validation"]["labels_sha256"],
                         data.sha256_file(os.path.join(self.tmp.name, "val.txt")))
        variants = training["selection"]["variants"]
        self.assertEqual(len(variants), 8)  # the grid less lr_1e-4 (= full at the default lr)
        scores = [v["validation_score"] for v in variants]
        chosen = training["selection"]["chosen_variant"]
        self.assertEqual(next(v for v in variants if v["name"] == chosen)["validation_score"], max(scores))
        self.assertEqual(training["objective"]["lambda_offset"], 1.0)
        self.assertEqual(training["objective"]["delta_inter"], 0.5)
        summary = json.loads(self.stdout)
        self.assertEqual(summary["chosen_variant"], chosen)
        self.assertEqual(len(self.config["golden"]), 6)

    def test_evaluate_command(self):
        out = json.loads(run_cli("evaluate", "--checkpoint", self.out, "--emb", os.path.join(self.tmp.name, "val.npy"),
                                 "--emb-labels", os.path.join(self.tmp.name, "val.txt")))
        with torch.no_grad():
            p = self.model(torch.from_numpy(self.X[180:]))["probabilities"].numpy()
        expected = task_metrics("binary", self.y[180:], p, 2, self.config["decision_policy"]["t_block"])
        self.assertAlmostEqual(out["metrics"]["positive_f1"], expected["positive_f1"], places=12)
        self.assertAlmostEqual(out["metrics"]["roc_auc"], expected["roc_auc"], places=12)
        self.assertEqual(sum(sum(v.values()) for v in out["decisions"].values()), 60)
        self.assertAlmostEqual(out["calibration"]["nll"], calibration_metrics(self.yv, p)["nll"], places=10)
        self.assertEqual(out["assumed_prevalence"], self.config["calibration"]["prevalence"])


class DataChecks(unittest.TestCase):
    """data.check_splits warns (never refuses) about zero rows, rows not of unit norm and rows shared
    across splits, and says nothing about clean data."""

    def test_warnings(self):
        rng = np.random.default_rng(0)
        A = rng.standard_normal((20, 8)).astype(np.float32)
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        B = rng.standard_normal((10, 8)).astype(np.float32)
        B /= np.linalg.norm(B, axis=1, keepdims=True)
        self.assertEqual(data.check_splits({"a": A, "b": B}), [])
        A[3] = 0
        A[4] *= 2
        B[0], B[1], B[2] = A[5], A[6], 0  # two shared rows; a zero row is not a duplicate
        logged = []
        warnings = data.check_splits({"a": A, "b": B}, logged.append)
        self.assertEqual(len(warnings), 4, warnings)
        self.assertIn("a: 1 of 20 rows are all zeros", warnings)
        self.assertIn("b: 1 of 10 rows are all zeros", warnings)
        self.assertTrue(any(w.startswith("a: 1 of 20 non-zero rows are not of unit norm") for w in warnings), warnings)
        self.assertIn("a and b: 2 rows of b are identical to rows of a (zero rows not counted)", warnings)
        self.assertEqual(logged, [f"data check: {w}" for w in warnings])


class FitCarvedOrdinal(unittest.TestCase):
    def test_val_fraction_carve_and_label_map(self):
        with tempfile.TemporaryDirectory() as tmp:
            X, y = common.xor_clusters(40, D=16, noise=0.3, seed=12, classes=3)
            np.save(os.path.join(tmp, "x.npy"), X)
            write_tsv(os.path.join(tmp, "y.tsv"), y, ["low", "mid", "high"])
            with open(os.path.join(tmp, "labels.txt"), "w") as f:
                f.write("low\nmid\nhigh\n")
            out = os.path.join(tmp, "ckpt")
            run_cli("fit", "--train", os.path.join(tmp, "x.npy"), "--train-labels", os.path.join(tmp, "y.tsv"),
                    "--labels-file", os.path.join(tmp, "labels.txt"), "--task", "ordinal", "--out", out, "--epochs",
                    "2", "--batch-size", "32", "--val-fraction", "0.25", "--action", "high=block", "--action",
                    "mid=review", "--min-confidence", "0.5", "--quiet")
            model, config = load_checkpoint(out)
            self.assertEqual(config["decision_policy"],
                             {"kind": "label_map", "actions": {"high": "block", "mid": "review"}, "min_confidence": 0.5})
            split = config["training"]["data"]
            self.assertEqual((split["train_rows"], split["validation_rows"]), (180, 60))
            self.assertEqual(split["validation_class_counts"], [20, 20, 20])
            self.assertIn("lambda_scale", config["training"])
            self.assertEqual(tuple(model.head.weight.shape), (3, 64))

    def test_bad_labels_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            np.save(os.path.join(tmp, "x.npy"), np.zeros((4, 8), np.float32))
            write_tsv(os.path.join(tmp, "y.tsv"), [0, 1, 0, 1], ["a", "b"])
            result = subprocess.run([sys.executable, "-m", "train", "fit", "--train", os.path.join(tmp, "x.npy"),
                                     "--train-labels", os.path.join(tmp, "y.tsv"), "--labels", "a,c", "--task",
                                     "binary", "--out", os.path.join(tmp, "o")], cwd=common.ROOT,
                                    capture_output=True, text=True, timeout=60)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("does not match the label names", result.stderr)


class DataFiles(unittest.TestCase):
    def test_tsv_splits_on_the_first_two_tabs_only(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("label\tlabel_name\ttext\n1\tb\tsome\ttext\n0\ta\t\n")
        try:
            self.assertEqual(data.read_tsv(f.name), [(1, "b", "some\ttext"), (0, "a", "")])
            self.assertEqual(data.read_labels(f.name, ["a", "b"]).tolist(), [1, 0])
        finally:
            os.unlink(f.name)

    def test_stratified_split_is_seeded(self):
        y = np.array([0] * 30 + [1] * 10)
        a, b = data.stratified_split(y, 0.25, 4), data.stratified_split(y, 0.25, 4)
        self.assertTrue(np.array_equal(a[1], b[1]))
        self.assertEqual(np.bincount(y[a[1]]).tolist(), [8, 2])  # 7.5 : 2.5 rounded by sklearn
        self.assertEqual(len(np.intersect1d(a[0], a[1])), 0)


if __name__ == "__main__":
    unittest.main()
