"""Decision policies from validation data only.

Binary (threshold policy on labels[1]):
  * t_block: the threshold with the best positive-class F1 on the validation rows, or with
    --block-precision P the lowest threshold whose validation precision is >= P (most recall at that
    precision; if no threshold reaches P, the one with the highest precision, and target_met is false);
  * t_review: the highest threshold whose validation recall is >= R (--review-recall, default 0.9),
    clamped to <= t_block.
Precision and F1 are those at the deployment prevalence: with --prevalence the validation rows are
reweighted to it (a positive row counts π/π_v, a negative one (1 − π)/(1 − π_v)).
Candidate thresholds are midpoints between consecutive distinct validation scores, rounded to 1e-6; the
figures in "source" are recomputed at the rounded thresholds. A row is flagged when score >= threshold.

Multiclass / ordinal: a label_map policy; every label allows unless --action LABEL=ACTION says otherwise.
"""

import numpy as np

from .metrics import precision_recall_f1

ROUND = 6


def candidate_thresholds(score):
    """Midpoints between consecutive distinct scores, plus one below the lowest and one above the highest."""
    u = np.unique(np.asarray(score, dtype=np.float64))
    mids = (u[:-1] + u[1:]) / 2
    low, high = max(u[0] - 1e-6, 0.0), min(u[-1] + 1e-6, 1.0)
    return np.unique(np.round(np.clip(np.r_[low, mids, high], 0.0, 1.0), ROUND))


def figures(y, score, t, weight=None):
    """Precision, recall and F1 of flagging score >= t (with `weight`, as at the prevalence the weights
    stand for), and the rows flagged."""
    flagged = np.asarray(score) >= t
    precision, recall, f1 = precision_recall_f1(y, flagged, weight)
    out = {"precision": precision, "recall": recall, "f1": f1, "flagged": int(np.sum(flagged))}
    if weight is not None:
        out["flagged_share"] = float(np.asarray(weight)[flagged].sum() / np.sum(weight))
    return out


def binary_thresholds(y, score, block_precision=None, review_recall=0.9, weight=None):
    """(t_review, t_block, source dict) from validation labels y (0/1) and scores P(labels[1]).

    weight: per-row weights moving the validation rows to the deployment prevalence (calibration.
    prevalence_weights); precision, and so F1 and t_block, depend on the prevalence, recall does not."""
    y = np.asarray(y).astype(bool)
    candidates = candidate_thresholds(score)
    table = [figures(y, score, t, weight) for t in candidates]
    f1 = np.array([row["f1"] for row in table])
    precision = np.array([row["precision"] for row in table])
    recall = np.array([row["recall"] for row in table])
    source = {"rows": int(len(y)), "positives": int(y.sum())}
    if block_precision is None:
        best = np.flatnonzero(f1 == f1.max())[-1]  # ties: the higher threshold
        source["t_block_rule"] = "best positive-class F1 on validation"
    else:
        ok = np.flatnonzero(precision >= block_precision)
        source["t_block_rule"] = f"lowest threshold with validation precision >= {block_precision}"
        source["target_met"] = bool(len(ok))
        best = ok[0] if len(ok) else int(np.argmax(precision))
    t_block = float(candidates[best])
    reach = np.flatnonzero(recall >= review_recall)
    t_review = float(candidates[reach[-1]]) if len(reach) else float(candidates[0])
    source["t_review_rule"] = f"highest threshold with validation recall >= {review_recall}, at most t_block"
    source["t_review_clamped"] = t_review > t_block
    t_review = min(t_review, t_block)
    source["at_t_block"] = figures(y, score, t_block, weight)
    source["at_t_review"] = figures(y, score, t_review, weight)
    return t_review, t_block, source


def threshold_policy(label, y, score, block_precision=None, review_recall=0.9, split_note=None, weight=None,
                     prevalence=None):
    """A threshold policy on label's probability; `prevalence` (the share of label the weights stand for)
    is recorded in its source."""
    t_review, t_block, source = binary_thresholds(y, score, block_precision, review_recall, weight)
    if prevalence is not None:
        source = {"prevalence": float(prevalence), **source}
    if split_note:
        source = {"split": split_note, **source}
    return {"kind": "threshold", "label": label, "t_review": t_review, "t_block": t_block, "source": source}


def label_map_policy(labels, actions=(), min_confidence=0.0):
    """A label_map policy from "LABEL=ACTION" strings (labels not named: allow)."""
    mapping = {}
    for item in actions:
        label, _, action = item.partition("=")
        if label not in labels or action not in ("allow", "review", "block"):
            raise ValueError(f"--action {item!r}: expected LABEL=allow|review|block with LABEL one of {labels}")
        mapping[label] = action
    return {"kind": "label_map", "actions": mapping, "min_confidence": float(min_confidence)}
