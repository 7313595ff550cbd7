"""The logistic-regression probe (scikit-learn) that becomes a checkpoint's head.

The probe is fitted on the training rows' vectors only. Its inverse regularisation C is chosen from a
grid by the validation log-loss (the same rule for raw embeddings, PGCL and the baselines): a score of
the ranking (AUC) or of the argmax (F1) cannot see how confident the probabilities are. The probe is
then calibrated on the validation rows (train/calibration.py), and `install_head` copies the folded,
calibrated weights into the PGCL module's nn.Linear head: binary -> one output, the coefficients of
labels[1] (sigmoid); otherwise K outputs (multinomial, softmax).
"""

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from .metrics import negative_log_likelihood, selection_score

C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
MAX_ITER = 5000


def fit(E, y, C=1.0):
    """A LogisticRegression (lbfgs; multinomial when there are more than two classes) fitted on (E, y)."""
    model = LogisticRegression(C=C, max_iter=MAX_ITER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(np.asarray(E, dtype=np.float64), np.asarray(y))
    return model


def probabilities(model, E, task):
    """(N, K) class probabilities of the probe, in label-index order ([1 - p, p] for binary)."""
    p = model.predict_proba(np.asarray(E, dtype=np.float64))
    K = p.shape[1]
    if list(model.classes_) != list(range(K)):
        raise ValueError(f"the probe saw classes {list(model.classes_)}; every class needs training rows")
    return p


CRITERIA = ("log_loss", "metric")


def select(E, y, Ev, yv, task, K, metric, grid=C_GRID, criterion="log_loss"):
    """Fit a probe for each C of `grid` and keep the best on the validation rows: the lowest log-loss
    (criterion "log_loss") or the highest selection `metric` ("metric"); ties: the smaller C.

    Returns (probe, chosen C, {C: {"log_loss": validation NLL, metric: validation score}}).
    """
    if criterion not in CRITERIA:
        raise ValueError(f"probe C criterion {criterion!r} is not one of {CRITERIA}")
    scores, best = {}, None
    for C in grid:
        model = fit(E, y, C)
        p = probabilities(model, Ev, task)
        scores[repr(float(C))] = {"log_loss": negative_log_likelihood(yv, p), metric: selection_score(metric, yv, p, K)}
        key = -scores[repr(float(C))]["log_loss"] if criterion == "log_loss" else scores[repr(float(C))][metric]
        if best is None or key > best[0]:
            best = (key, C, model)
    return best[2], best[1], scores


def install_head(pgcl, model, task):
    """Copy the probe's own coefficients into pgcl.head (float32)."""
    install_head_weights(pgcl, model.coef_, model.intercept_, task)


def install_head_weights(pgcl, coef, intercept, task):
    """Copy a head's (H, d) coefficients and (H,) intercepts into pgcl.head (float32)."""
    coef = np.asarray(coef, dtype=np.float32)
    intercept = np.asarray(intercept, dtype=np.float32)
    expected = 1 if task == "binary" else pgcl.K
    if coef.shape != (expected, pgcl.d):
        raise ValueError(f"probe coefficients of shape {coef.shape}, the head needs {(expected, pgcl.d)}")
    with torch.no_grad():
        pgcl.head.weight.copy_(torch.from_numpy(coef))
        pgcl.head.bias.copy_(torch.from_numpy(intercept))
