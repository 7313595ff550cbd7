"""Calibration (train/calibration.py) and the calibration metrics (train/metrics.py) against oracles:

- ECE against a hand-worked example and a loop over rows; Brier and NLL against scikit-learn;
- every weighted metric equal to the unweighted one on rows repeated by their integer weights;
- Platt scaling against an unregularised scikit-learn fit on the logits (with weights: on repeated
  rows), temperature scaling against a fine grid over T;
- the prior shift against Bayes' rule done by hand; folding equal to applying the calibration;
- --prevalence parsing and its refusals.
"""

import unittest

import common  # noqa: F401  (sys.path, skips)
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss

from train import calibration, metrics


def random_probabilities(rng, n, K):
    z = rng.normal(0, 2, (n, K))
    return calibration.probabilities_from_logits(z)


class Metrics(unittest.TestCase):
    def test_ece_hand_worked(self):
        # two rows in the bin [0.6, 0.667): confidences 0.61 and 0.65, one right -> |0.5 - 0.63| = 0.13;
        # one row in [0.933, 1]: confidence 0.95, right -> 0.05. ECE = 2/3 * 0.13 + 1/3 * 0.05
        p = np.array([[0.39, 0.61], [0.65, 0.35], [0.05, 0.95]])
        y = np.array([1, 1, 1])
        self.assertAlmostEqual(metrics.expected_calibration_error(y, p), 2 / 3 * 0.13 + 1 / 3 * 0.05, places=12)

    def test_ece_against_a_loop(self):
        rng = np.random.default_rng(0)
        for K in (2, 5):
            p = random_probabilities(rng, 300, K)
            y = rng.integers(0, K, 300)
            conf, right = p.max(1), p.argmax(1) == y
            total = 0.0
            for b in range(15):
                lo, hi = b / 15, (b + 1) / 15
                inside = [(c, r) for c, r in zip(conf, right) if lo <= c < hi or (b == 14 and c == 1.0)]
                if inside:
                    total += len(inside) / 300 * abs(np.mean([r for _, r in inside]) - np.mean([c for c, _ in inside]))
            self.assertAlmostEqual(metrics.expected_calibration_error(y, p), total, places=10)

    def test_brier_and_nll_against_sklearn(self):
        rng = np.random.default_rng(1)
        p = random_probabilities(rng, 200, 2)
        y = rng.integers(0, 2, 200)
        self.assertAlmostEqual(metrics.brier_score(y, p), brier_score_loss(y, p[:, 1]), places=12)
        self.assertAlmostEqual(metrics.negative_log_likelihood(y, p), log_loss(y, p), places=10)
        p5 = random_probabilities(rng, 200, 5)
        y5 = rng.integers(0, 5, 200)
        self.assertAlmostEqual(metrics.negative_log_likelihood(y5, p5), log_loss(y5, p5, labels=range(5)), places=10)
        self.assertAlmostEqual(metrics.brier_score(y5, p5), np.mean(((p5 - np.eye(5)[y5]) ** 2).sum(1)), places=12)

    def test_weights_equal_repeated_rows(self):
        rng = np.random.default_rng(2)
        for K in (2, 4):
            p = random_probabilities(rng, 120, K)
            y = rng.integers(0, K, 120)
            w = rng.integers(0, 4, 120).astype(float)
            w[0] = 1
            rows = np.repeat(np.arange(120), w.astype(int))
            for name in ("expected_calibration_error", "brier_score", "negative_log_likelihood"):
                fn = getattr(metrics, name)
                self.assertAlmostEqual(fn(y, p, weight=w), fn(y[rows], p[rows]), places=10, msg=name)
            pred = p[:, -1] > 0.5
            np.testing.assert_allclose(metrics.precision_recall_f1(y == 1, pred, w),
                                       metrics.precision_recall_f1((y == 1)[rows], pred[rows]), atol=1e-12)


class Fitting(unittest.TestCase):
    def test_platt_equals_unregularised_logistic_regression(self):
        rng = np.random.default_rng(3)
        z = rng.normal(0, 3, 400)
        y = (rng.random(400) < 1 / (1 + np.exp(-(0.4 * z - 0.7)))).astype(int)
        for w in (None, rng.integers(1, 4, 400).astype(float)):
            a, b = calibration.fit_platt(z, y, w)
            rows = np.arange(400) if w is None else np.repeat(np.arange(400), w.astype(int))
            oracle = LogisticRegression(C=1e12, max_iter=10000, tol=1e-12).fit(z[rows, None], y[rows])
            self.assertAlmostEqual(a, oracle.coef_[0, 0], places=4)
            self.assertAlmostEqual(b, oracle.intercept_[0], places=4)

    def test_temperature_is_the_grid_minimum(self):
        rng = np.random.default_rng(4)
        Z = rng.normal(0, 4, (300, 5))
        y = np.array([rng.choice(5, p=calibration.probabilities_from_logits(row[None] / 2.5)[0]) for row in Z])
        T = calibration.fit_temperature(Z, y)
        grid = np.exp(np.linspace(np.log(T) - 0.2, np.log(T) + 0.2, 2001))
        nll = [metrics.negative_log_likelihood(y, calibration.probabilities_from_logits(Z / t)) for t in grid]
        self.assertAlmostEqual(T, grid[int(np.argmin(nll))], delta=T * 2e-3)
        self.assertGreater(T, 1.5)  # the logits were drawn too confident by 2.5

    def test_prior_shift_is_bayes_rule(self):
        rng = np.random.default_rng(5)
        for K in (2, 4):
            source = rng.dirichlet(np.ones(K))
            target = rng.dirichlet(np.ones(K))
            p = random_probabilities(rng, 50, K)
            # Bayes: p'_k ∝ p_k · target_k / source_k
            by_hand = p * (target / source)
            by_hand /= by_hand.sum(1, keepdims=True)
            offset = calibration.prior_shift(source, target)
            logits = np.log(p[:, 1] / p[:, 0]) if K == 2 else np.log(p)
            shifted = calibration.probabilities_from_logits(logits + offset)
            np.testing.assert_allclose(shifted, by_hand, atol=1e-12)

    def test_fold_equals_applying_the_calibration(self):
        rng = np.random.default_rng(6)
        E = rng.normal(0, 1, (80, 8))
        for K, H in ((2, 1), (3, 3)):
            coef, intercept = rng.normal(0, 2, (H, 8)), rng.normal(0, 1, H)
            y = rng.integers(0, K, 80)
            y[:K] = np.arange(K)
            cal = calibration.calibrate(coef, intercept, E, y, K, prevalence=rng.dirichlet(np.ones(K) * 5))
            z = calibration.head_logits(coef, intercept, E)
            if H == 1:
                a, b = cal.parameters["scale"], cal.parameters["shift"]
                expected = calibration.probabilities_from_logits(a * z + b + cal.logit_offset())
            else:
                expected = calibration.probabilities_from_logits(z / cal.parameters["temperature"] + cal.logit_offset())
            folded = calibration.probabilities_from_logits(calibration.head_logits(*cal.fold(coef, intercept), E))
            np.testing.assert_allclose(folded, expected, atol=1e-12)
            self.assertEqual(cal.method, "platt" if H == 1 else "temperature")

    def test_none_keeps_the_probe_and_still_shifts(self):
        coef, intercept = np.array([[1.0, -2.0]]), np.array([0.5])
        E = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
        cal = calibration.calibrate(coef, intercept, E, np.array([0, 1, 1]), 2, method="none", prevalence=[0.9, 0.1])
        folded_coef, folded_intercept = cal.fold(coef, intercept)
        np.testing.assert_array_equal(folded_coef, coef)
        self.assertAlmostEqual(float(folded_intercept[0]), 0.5 + np.log(0.1 / 0.9) - np.log(2.0), places=12)


class Prevalence(unittest.TestCase):
    def test_parse(self):
        np.testing.assert_allclose(calibration.parse_prevalence("0.1", ["ok", "bad"]), [0.9, 0.1])
        np.testing.assert_allclose(calibration.parse_prevalence("b=0.25,a=0.5,c=0.25", ["a", "b", "c"]),
                                   [0.5, 0.25, 0.25])
        for text, labels in (("0", ["ok", "bad"]), ("1", ["ok", "bad"]), ("0.2", ["a", "b", "c"]),
                             ("a=0.5,b=0.4", ["a", "b", "c"]), ("a=0.5,b=0.6,c=0.1", ["a", "b", "c"]),
                             ("a=0.5,a=0.5", ["a", "b"]), ("a=0.5,x=0.5", ["a", "b"])):
            with self.assertRaises(ValueError, msg=text):
                calibration.parse_prevalence(text, labels)

    def test_weights_move_the_shares(self):
        y = np.array([0, 0, 0, 1])
        w = calibration.prevalence_weights(y, [0.75, 0.25], [0.9, 0.1])
        self.assertAlmostEqual(w[y == 1].sum() / w.sum(), 0.1, places=12)


if __name__ == "__main__":
    unittest.main()
