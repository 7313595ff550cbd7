"""Evaluation metrics in numpy (fast enough to bootstrap), paired bootstrap, and the paper's geometry
diagnostics. tests/train/test_metrics.py checks every metric against scikit-learn's.

Conventions (equal to scikit-learn with labels=range(K) and zero_division=0): a class with no true and
no predicted row has F1 0; macro F1 averages over all K classes; weighted F1 weights by true support.
"""

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import silhouette_score
from sklearn.neighbors import NearestNeighbors


def confusion(y, pred, K):
    """(K, K) counts: rows are true labels, columns predictions."""
    return np.bincount(np.asarray(y) * K + np.asarray(pred), minlength=K * K).reshape(K, K)


def per_class_f1(y, pred, K):
    cm = confusion(y, pred, K)
    tp = np.diag(cm).astype(np.float64)
    denominator = cm.sum(axis=0) + cm.sum(axis=1)  # 2tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros(K), where=denominator > 0)


def weighted_f1(y, pred, K):
    support = np.bincount(y, minlength=K)
    return float(per_class_f1(y, pred, K) @ support / support.sum())


def macro_f1(y, pred, K):
    return float(per_class_f1(y, pred, K).mean())


def accuracy(y, pred):
    return float(np.mean(np.asarray(y) == np.asarray(pred)))


def binary_counts(y, positive_pred):
    y, positive_pred = np.asarray(y).astype(bool), np.asarray(positive_pred).astype(bool)
    tp = int(np.sum(y & positive_pred))
    fp = int(np.sum(~y & positive_pred))
    fn = int(np.sum(y & ~positive_pred))
    return tp, fp, fn


def precision_recall_f1(y, positive_pred, weight=None):
    """Positive-class precision, recall and F1 (0 where undefined); with `weight`, of the weighted counts
    (rows reweighted to another prevalence)."""
    if weight is None:
        tp, fp, fn = binary_counts(y, positive_pred)
    else:
        y, positive_pred = np.asarray(y).astype(bool), np.asarray(positive_pred).astype(bool)
        w = np.asarray(weight, dtype=np.float64)
        tp, fp, fn = float(w[y & positive_pred].sum()), float(w[~y & positive_pred].sum()), float(w[y & ~positive_pred].sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return precision, recall, f1


def roc_auc(y, score):
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties); nan with one class only."""
    y = np.asarray(y).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def mae(y, pred):
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(pred))))


def severe_error_rate(y, pred):
    """Fraction of predictions at least two levels from the label (|error| >= 2)."""
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(pred)) >= 2))


def quadratic_weighted_kappa(y, pred, K):
    """Cohen's kappa with quadratic weights (i - j)^2 over the K ordered classes."""
    observed = confusion(y, pred, K).astype(np.float64)
    n = observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    i, j = np.indices((K, K))
    weights = (i - j) ** 2
    denominator = (weights * expected).sum()
    if denominator == 0:
        return 0.0
    return float(1.0 - (weights * observed).sum() / denominator)


def task_metrics(task, y, probabilities, K, threshold=None):
    """Metrics of one method on one split.

    probabilities: (N, K). Binary: the prediction is `P(labels[1]) >= threshold` (the validation-chosen
    t_block; 0.5 when None) and the figures include ROC AUC, positive-class precision/recall/F1 and the
    weighted F1 of the label itself (the argmax, which pgcld returns as `label`).
    Otherwise the prediction is the argmax; ordinal adds MAE, QWK and the severe-error rate.
    """
    y = np.asarray(y)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if task == "binary":
        threshold = 0.5 if threshold is None else threshold
        score = probabilities[:, 1]
        pred = (score >= threshold).astype(np.int64)
    else:
        pred = np.argmax(probabilities, axis=1)
    result = {"n": int(len(y)), "weighted_f1": weighted_f1(y, pred, K), "macro_f1": macro_f1(y, pred, K),
              "accuracy": accuracy(y, pred), "per_class_f1": per_class_f1(y, pred, K).tolist()}
    if task == "binary":
        precision, recall, f1 = precision_recall_f1(y, pred)
        label = np.argmax(probabilities, axis=1)  # the label pgcld returns (P(labels[1]) > 0.5)
        result.update({"threshold": threshold, "roc_auc": roc_auc(y, score), "positive_f1": f1,
                       "positive_precision": precision, "positive_recall": recall,
                       "label_weighted_f1": weighted_f1(y, label, K)})
    if task == "ordinal":
        result.update({"mae": mae(y, pred), "qwk": quadratic_weighted_kappa(y, pred, K),
                       "severe_error_rate": severe_error_rate(y, pred)})
    return result


# ---------------------------------------------------------------------------------------- calibration

ECE_BINS = 15


def row_weights(n, weight):
    """Per-row weights normalised to mean 1 (all ones when weight is None)."""
    if weight is None:
        return np.ones(n)
    w = np.asarray(weight, dtype=np.float64)
    assert w.shape == (n,) and np.all(w >= 0) and w.sum() > 0, "row weights: (N,), non-negative, not all 0"
    return w * (n / w.sum())


def reliability_bins(y, probabilities, bins=ECE_BINS, weight=None):
    """Top-label reliability: the rows binned by their top probability (bins of equal width on [0, 1],
    the last one closed); per non-empty bin its range, rows, weight share, mean confidence and accuracy."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(y)
    w = row_weights(len(y), weight)
    confidence, correct = p.max(axis=1), (np.argmax(p, axis=1) == y).astype(np.float64)
    index = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    out = []
    for b in range(bins):
        m = index == b
        if not m.any():
            continue
        wb = w[m]
        out.append({"low": b / bins, "high": (b + 1) / bins, "rows": int(m.sum()), "share": float(wb.sum() / w.sum()),
                    "confidence": float(wb @ confidence[m] / wb.sum()), "accuracy": float(wb @ correct[m] / wb.sum())})
    return out


def expected_calibration_error(y, probabilities, bins=ECE_BINS, weight=None):
    """Top-label ECE: Σ_bins share · |accuracy − confidence| over `bins` equal-width confidence bins."""
    return float(sum(b["share"] * abs(b["accuracy"] - b["confidence"])
                     for b in reliability_bins(y, probabilities, bins, weight)))


def brier_score(y, probabilities, weight=None):
    """Binary (K = 2): mean (P(labels[1]) − y)², scikit-learn's brier_score_loss. K > 2: the multi-class
    Brier score, mean over rows of Σ_k (P_k − 1[y = k])²."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(y)
    w = row_weights(len(y), weight)
    if p.shape[1] == 2:
        per_row = (p[:, 1] - (y == 1)) ** 2
    else:
        per_row = ((p - np.eye(p.shape[1])[y]) ** 2).sum(axis=1)
    return float(w @ per_row / w.sum())


def negative_log_likelihood(y, probabilities, weight=None):
    """Mean −log P(true label), probabilities clipped to [1e-15, 1] (scikit-learn's log_loss)."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(y)
    w = row_weights(len(y), weight)
    return float(w @ -np.log(np.clip(p[np.arange(len(y)), y], 1e-15, 1.0)) / w.sum())


def calibration_metrics(y, probabilities, weight=None, bins=ECE_BINS):
    """ECE (top label, `bins` bins), Brier score and NLL; with `weight`, as if the rows were drawn at the
    prevalence those weights stand for."""
    return {"ece": expected_calibration_error(y, probabilities, bins, weight), "ece_bins": bins,
            "brier": brier_score(y, probabilities, weight), "nll": negative_log_likelihood(y, probabilities, weight)}


def best_f1_over_thresholds(y, score):
    """The highest positive-class F1 reachable by any threshold on `score`."""
    order = np.argsort(-np.asarray(score), kind="stable")
    s, t = np.asarray(score)[order], np.asarray(y)[order].astype(bool)
    tp = np.cumsum(t)
    fp = np.cumsum(~t)
    last = np.r_[s[1:] != s[:-1], True]  # cut only between distinct scores
    f1 = 2 * tp / (tp + fp + t.sum())
    return float(f1[last].max()) if t.sum() else 0.0


SELECTION_METRICS = {"binary": ("auc", "f1", "neg_log_loss"), "multiclass": ("weighted_f1", "macro_f1", "neg_log_loss"),
                     "ordinal": ("qwk", "weighted_f1", "neg_mae", "neg_log_loss")}
DEFAULT_SELECTION = {"binary": "auc", "multiclass": "weighted_f1", "ordinal": "qwk"}


def selection_score(name, y, probabilities, K):
    """The validation score that early stopping, --select and the probe's C use (higher is better).

    auc: ROC AUC of P(labels[1]); f1: the best positive-class F1 over thresholds; weighted_f1, macro_f1,
    qwk, neg_mae (-MAE): of the argmax prediction; neg_log_loss: −NLL of the probabilities.
    """
    probabilities = np.asarray(probabilities)
    if name == "neg_log_loss":
        return -negative_log_likelihood(y, probabilities)
    if name == "auc":
        return roc_auc(y, probabilities[:, 1])
    if name == "f1":
        return best_f1_over_thresholds(y, probabilities[:, 1])
    pred = np.argmax(probabilities, axis=1)
    if name == "weighted_f1":
        return weighted_f1(y, pred, K)
    if name == "macro_f1":
        return macro_f1(y, pred, K)
    if name == "qwk":
        return quadratic_weighted_kappa(y, pred, K)
    if name == "neg_mae":
        return -mae(y, pred)
    raise ValueError(f"unknown selection metric {name!r}")


# ------------------------------------------------------------------------------------------ bootstrap

def paired_bootstrap(metric, y, pred_a, pred_b, n_resamples=2000, seed=0, level=0.95):
    """Paired bootstrap of metric(y, pred_a) - metric(y, pred_b) over resampled rows (same rows for both).

    metric(y, pred) -> float; pred_a / pred_b are per-row predictions or scores. Returns the observed
    difference, the percentile interval, the resample mean and the fraction of resamples with a
    difference <= 0.
    """
    y, pred_a, pred_b = np.asarray(y), np.asarray(pred_a), np.asarray(pred_b)
    rng = np.random.default_rng(seed)
    n = len(y)
    diffs = np.empty(n_resamples)
    for r in range(n_resamples):
        idx = rng.integers(0, n, n)
        diffs[r] = metric(y[idx], pred_a[idx]) - metric(y[idx], pred_b[idx])
    diffs = diffs[np.isfinite(diffs)]
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(diffs, [tail, 100 - tail])
    return {"difference": float(metric(y, pred_a) - metric(y, pred_b)), "ci_low": float(lo), "ci_high": float(hi),
            "level": level, "resamples": int(len(diffs)), "seed": seed, "bootstrap_mean": float(diffs.mean()),
            "fraction_le_0": float(np.mean(diffs <= 0))}


# ------------------------------------------------------------------------------------------- geometry

def within_between_ratio(X, y):
    """Within-class over between-class variance: (1/N Σ_i ‖x_i − μ_{y_i}‖²) / (1/N Σ_k n_k ‖μ_k − μ‖²)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    mu = X.mean(axis=0)
    within = between = 0.0
    for k in np.unique(y):
        Xk = X[y == k]
        mu_k = Xk.mean(axis=0)
        within += ((Xk - mu_k) ** 2).sum()
        between += len(Xk) * ((mu_k - mu) ** 2).sum()
    return float(within / between)


def class_overlap(X, y, k=10):
    """Mean fraction of each row's k nearest neighbours (Euclidean, the row itself excluded) with another label."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    neighbours = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X, return_distance=False)
    fractions = np.empty(len(X))
    for i, row in enumerate(neighbours):
        others = row[row != i][:k]
        fractions[i] = np.mean(y[others] != y[i])
    return float(fractions.mean())


def geometry(X, y, k=10):
    """The paper's diagnostics: W/B variance ratio, silhouette (Euclidean), k-NN class overlap and
    GQI = (1 − W/B) × silhouette × (1 − overlap)."""
    ratio = within_between_ratio(X, y)
    silhouette = float(silhouette_score(np.asarray(X, dtype=np.float64), y, metric="euclidean"))
    overlap = class_overlap(X, y, k)
    return {"within_between_ratio": ratio, "silhouette": silhouette, f"class_overlap_{k}nn": overlap,
            "gqi": (1.0 - ratio) * silhouette * (1.0 - overlap)}
