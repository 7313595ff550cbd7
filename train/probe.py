"""The logistic-regression probe (scikit-learn) that becomes a checkpoint's head.

The probe is fitted on the training rows' vectors only. Its inverse regularisation C is chosen from a
grid by the validation score (the same rule for raw embeddings, PGCL and the baselines). `install_head`
copies it into the PGCL module's nn.Linear head so that the exported model's PyTorch forward reproduces
`predict_proba`: binary -> one output, the coefficients of labels[1] (sigmoid); otherwise K outputs
(multinomial, softmax).
"""

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from .metrics import selection_score

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


def select(E, y, Ev, yv, task, K, metric, grid=C_GRID):
    """Fit a probe for each C of `grid` and keep the best by validation `metric` (ties: the smaller C).

    Returns (probe, chosen C, {C: validation score}).
    """
    scores, best = {}, None
    for C in grid:
        model = fit(E, y, C)
        score = selection_score(metric, yv, probabilities(model, Ev, task), K)
        scores[repr(float(C))] = score
        if best is None or score > best[0]:
            best = (score, C, model)
    return best[2], best[1], scores


def install_head(pgcl, model, task):
    """Copy the probe's coefficients into pgcl.head (float32)."""
    coef = np.asarray(model.coef_, dtype=np.float32)
    intercept = np.asarray(model.intercept_, dtype=np.float32)
    expected = 1 if task == "binary" else pgcl.K
    if coef.shape != (expected, pgcl.d):
        raise ValueError(f"probe coefficients of shape {coef.shape}, the head needs {(expected, pgcl.d)}")
    with torch.no_grad():
        pgcl.head.weight.copy_(torch.from_numpy(coef))
        pgcl.head.bias.copy_(torch.from_numpy(intercept))
