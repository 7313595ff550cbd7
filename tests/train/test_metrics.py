"""The report's metrics against scikit-learn's, the bootstrap, the geometry diagnostics and the thresholds."""

import unittest

import common
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import (accuracy_score, cohen_kappa_score, f1_score, log_loss, mean_absolute_error,
                             roc_auc_score, silhouette_score)

from train import calibrate, metrics
from train.report import assess


class AgainstSklearn(unittest.TestCase):
    def test_classification_metrics(self):
        rng = np.random.default_rng(0)
        for K in (2, 3, 5):
            for trial in range(20):
                n = int(rng.integers(5, 200))
                y = rng.integers(0, K, n)
                pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, K, n))
                labels = list(range(K))
                self.assertAlmostEqual(metrics.weighted_f1(y, pred, K),
                                       f1_score(y, pred, labels=labels, average="weighted", zero_division=0), places=12)
                self.assertAlmostEqual(metrics.macro_f1(y, pred, K),
                                       f1_score(y, pred, labels=labels, average="macro", zero_division=0), places=12)
                np.testing.assert_allclose(metrics.per_class_f1(y, pred, K),
                                           f1_score(y, pred, labels=labels, average=None, zero_division=0), atol=1e-12)
                self.assertAlmostEqual(metrics.accuracy(y, pred), accuracy_score(y, pred), places=12)
                self.assertAlmostEqual(metrics.mae(y, pred), mean_absolute_error(y, pred), places=12)
                if len(np.unique(np.r_[y, pred])) > 1:
                    self.assertAlmostEqual(metrics.quadratic_weighted_kappa(y, pred, K),
                                           cohen_kappa_score(y, pred, labels=labels, weights="quadratic"), places=10)
                if K == 2:
                    self.assertAlmostEqual(metrics.precision_recall_f1(y, pred)[2],
                                           f1_score(y, pred, zero_division=0), places=12)

    def test_roc_auc_with_ties(self):
        rng = np.random.default_rng(1)
        for _ in range(20):
            y = rng.integers(0, 2, 300)
            score = np.round(rng.random(300) + 0.3 * y, 1)  # many ties
            self.assertAlmostEqual(metrics.roc_auc(y, score), roc_auc_score(y, score), places=12)
        self.assertTrue(np.isnan(metrics.roc_auc(np.zeros(4, int), np.arange(4.0))))

    def test_severe_error_rate(self):
        self.assertAlmostEqual(metrics.severe_error_rate([0, 1, 2, 4, 4], [0, 3, 2, 1, 3]), 2 / 5)

    def test_task_metrics_binary_threshold(self):
        y = np.array([0, 0, 1, 1, 1, 0])
        p1 = np.array([0.1, 0.7, 0.65, 0.9, 0.2, 0.3])
        result = metrics.task_metrics("binary", y, np.c_[1 - p1, p1], 2, threshold=0.6)
        pred = (p1 >= 0.6).astype(int)
        self.assertAlmostEqual(result["positive_f1"], f1_score(y, pred))
        self.assertAlmostEqual(result["weighted_f1"], f1_score(y, pred, average="weighted"))
        self.assertAlmostEqual(result["roc_auc"], roc_auc_score(y, p1))

    def test_best_f1_over_thresholds(self):
        rng = np.random.default_rng(2)
        y = rng.integers(0, 2, 200)
        score = np.round(rng.random(200) + 0.4 * y, 2)
        brute = max(f1_score(y, score >= t, zero_division=0) for t in np.unique(score))
        self.assertAlmostEqual(metrics.best_f1_over_thresholds(y, score), brute, places=12)


class Geometry(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(3)
        self.y = rng.integers(0, 3, 120)
        self.X = rng.standard_normal((120, 5)) + 2.0 * np.eye(5)[self.y]

    def test_within_between(self):
        X, y = self.X, self.y
        mu = X.mean(0)
        within = sum(np.sum((X[y == k] - X[y == k].mean(0)) ** 2) for k in range(3))
        between = sum((y == k).sum() * np.sum((X[y == k].mean(0) - mu) ** 2) for k in range(3))
        self.assertAlmostEqual(metrics.within_between_ratio(X, y), within / between, places=10)

    def test_overlap_and_gqi(self):
        X, y = self.X, self.y
        D = np.linalg.norm(X[:, None] - X[None], axis=2)
        np.fill_diagonal(D, np.inf)
        brute = np.mean([np.mean(y[np.argsort(D[i], kind="stable")[:10]] != y[i]) for i in range(len(y))])
        g = metrics.geometry(X, y)
        self.assertAlmostEqual(g["class_overlap_10nn"], brute, places=10)
        self.assertAlmostEqual(g["silhouette"], silhouette_score(X, y), places=10)
        self.assertAlmostEqual(g["gqi"], (1 - g["within_between_ratio"]) * g["silhouette"] * (1 - brute), places=10)


class Bootstrap(unittest.TestCase):
    def test_identical_methods_give_zero(self):
        y = np.arange(50) % 2
        r = metrics.paired_bootstrap(lambda a, b: metrics.weighted_f1(a, b, 2), y, y, y, 200, seed=0)
        self.assertEqual((r["difference"], r["ci_low"], r["ci_high"]), (0.0, 0.0, 0.0))

    def test_seeded_and_paired(self):
        rng = np.random.default_rng(4)
        y = rng.integers(0, 2, 400)
        good = np.where(rng.random(400) < 0.9, y, 1 - y)
        bad = np.where(rng.random(400) < 0.6, y, 1 - y)
        fn = lambda a, b: metrics.accuracy(a, b)  # noqa: E731
        r1 = metrics.paired_bootstrap(fn, y, good, bad, 1000, seed=5)
        r2 = metrics.paired_bootstrap(fn, y, good, bad, 1000, seed=5)
        self.assertEqual(r1, r2)
        self.assertAlmostEqual(r1["difference"], metrics.accuracy(y, good) - metrics.accuracy(y, bad))
        self.assertGreater(r1["ci_low"], 0)
        self.assertLess(r1["ci_low"], r1["difference"])
        self.assertGreater(r1["ci_high"], r1["difference"])
        self.assertEqual(r1["resamples"], 1000)


class Thresholds(unittest.TestCase):
    def test_best_f1_and_review_recall(self):
        y = np.array([0, 0, 0, 0, 1, 0, 0, 1, 1, 1])
        score = np.array([0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.6, 0.7, 0.8])
        t_review, t_block, source = calibrate.binary_thresholds(y, score, review_recall=1.0)
        # best F1 between 0.45 and 0.6: P = 1, R = 3/4, F1 = 6/7 (at 0.325: 4 of 6 flagged, F1 = 0.8)
        self.assertAlmostEqual(t_block, 0.525)
        self.assertAlmostEqual(source["at_t_block"]["f1"], 6 / 7)
        # recall 1 needs everything from 0.35 up: the highest such threshold is between 0.3 and 0.35
        self.assertAlmostEqual(t_review, 0.325)
        self.assertEqual(source["at_t_review"]["recall"], 1.0)
        self.assertLessEqual(t_review, t_block)

    def test_precision_target(self):
        y = np.array([0, 1, 0, 1, 1, 1])
        score = np.array([0.1, 0.2, 0.3, 0.5, 0.6, 0.8])
        _, t_block, source = calibrate.binary_thresholds(y, score, block_precision=1.0)
        self.assertAlmostEqual(t_block, 0.4)  # lowest threshold with precision 1
        self.assertTrue(source["target_met"])
        self.assertEqual(source["at_t_block"]["precision"], 1.0)

    def test_review_clamped_to_block(self):
        y = np.array([1, 0, 0, 0, 1])
        score = np.array([0.1, 0.2, 0.3, 0.4, 0.9])
        t_review, t_block, source = calibrate.binary_thresholds(y, score, block_precision=0.99, review_recall=0.9)
        self.assertLessEqual(t_review, t_block)

    def test_label_map(self):
        policy = calibrate.label_map_policy(["a", "b"], ["b=block"], 0.4)
        self.assertEqual(policy, {"kind": "label_map", "actions": {"b": "block"}, "min_confidence": 0.4})
        with self.assertRaises(ValueError):
            calibrate.label_map_policy(["a", "b"], ["c=block"])


class ReportAssess(unittest.TestCase):
    """report.assess (what docs/train-report.json holds) against sklearn on the same predictions, the
    probe's logits rescaled by the calibration it recorded."""

    def test_binary_and_multiclass(self):
        for task, K in (("binary", 2), ("multiclass", 3), ("ordinal", 4)):
            rng = np.random.default_rng(K)
            n = 600
            y = rng.integers(0, K, n)
            X = rng.standard_normal((n, 6)) + 1.2 * np.eye(6)[y % 6]
            tr, va, te = slice(0, 300), slice(300, 450), slice(450, n)
            metric = metrics.DEFAULT_SELECTION[task]
            out, arrays = assess(task, K, metric, X[tr], y[tr], X[va], y[va], X[te], y[te])
            lr = LogisticRegression(C=out["probe_C"], max_iter=5000).fit(X[tr], y[tr])
            # the calibrated head (no prevalence given: no shift): sklearn's logits rescaled by the record
            z = lr.decision_function(X[te])
            parameters = out["calibration"]["parameters"]
            if task == "binary":
                p1 = 1 / (1 + np.exp(-(parameters["scale"] * z + parameters["shift"])))
                p = np.stack([1 - p1, p1], axis=1)
            else:
                e = np.exp(z / parameters["temperature"] - (z / parameters["temperature"]).max(1, keepdims=True))
                p = e / e.sum(1, keepdims=True)
            self.assertAlmostEqual(out["held_out"]["calibration"]["nll"], log_loss(y[te], p, labels=range(K)),
                                   places=8)
            self.assertAlmostEqual(out["held_out"]["uncalibrated"]["nll"],
                                   log_loss(y[te], lr.predict_proba(X[te]), labels=range(K)), places=8)
            if task == "binary":
                pred = (p[:, 1] >= out["thresholds"]["t_block"]).astype(int)
                self.assertAlmostEqual(out["held_out"]["roc_auc"], roc_auc_score(y[te], p[:, 1]), places=10)
                self.assertAlmostEqual(out["held_out"]["positive_f1"], f1_score(y[te], pred), places=10)
            else:
                pred = np.argmax(p, axis=1)
            np.testing.assert_array_equal(arrays["pred"], pred)
            self.assertAlmostEqual(out["held_out"]["weighted_f1"], f1_score(y[te], pred, average="weighted"), places=10)
            self.assertAlmostEqual(out["held_out"]["macro_f1"], f1_score(y[te], pred, average="macro"), places=10)
            if task == "ordinal":
                self.assertAlmostEqual(out["held_out"]["qwk"], cohen_kappa_score(y[te], pred, weights="quadratic"),
                                       places=10)
                self.assertAlmostEqual(out["held_out"]["mae"], mean_absolute_error(y[te], pred), places=10)
            self.assertAlmostEqual(out["geometry_held_out"]["silhouette"], silhouette_score(X[te], y[te]), places=10)


if __name__ == "__main__":
    unittest.main()
