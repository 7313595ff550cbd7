"""Calibrated probabilities: a head's logits rescaled on validation data, then moved to the deployment
prevalence, and folded into the head's weights so that pgcld's forward needs no new operator.

A probe fitted on the training rows' PGCL vectors sees rows it (and the extractor) learnt, which are
close to separable: its logits are too large on new rows, and its probabilities too confident. On the
validation rows, which neither saw:

  * binary: Platt scaling, p = σ(a·z + b) with z the head's logit, (a, b) minimising the validation NLL;
  * multiclass / ordinal: temperature scaling, p = softmax(z / T), T minimising the validation NLL
    (one parameter: the argmax, so every label, is unchanged).

Prior shift (Saerens et al., 2002): probabilities calibrated at the validation rows' class shares π_v
are moved to a deployment prevalence π by adding log(π_k / π_v,k) to each class's logit (binary: the
log-odds difference logit(π) − logit(π_v) to the one logit). With no --prevalence the validation shares
are assumed, and recorded as such.

Folding: binary z' = a·(w·e + c) + b + shift, so w' = a·w, c' = a·c + b + shift; softmax
z'_k = (w_k·e + c_k) / T + shift_k, so w'_k = w_k / T, c'_k = c_k / T + shift_k. The exported head is an
ordinary Linear layer whose sigmoid / softmax are the calibrated probabilities (fit.py checks this on the
validation rows against `probabilities_from_logits` of the numpy computation below).
"""

import dataclasses

import numpy as np
from scipy.optimize import minimize, minimize_scalar

METHODS = ("auto", "none")


def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


def probabilities_from_logits(z):
    """(N,) binary logits of labels[1] -> (N, 2); (N, K) logits -> softmax (N, K)."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        p = sigmoid(z)
        return np.stack([1.0 - p, p], axis=1)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def head_logits(coef, intercept, E):
    """The head's logits: (N,) for a one-output (binary) head, else (N, K)."""
    z = np.asarray(E, dtype=np.float64) @ np.asarray(coef, dtype=np.float64).T + np.asarray(intercept, np.float64)
    return z[:, 0] if z.shape[1] == 1 else z


def fit_platt(z, y, weight=None):
    """(a, b) minimising Σ w·NLL(σ(a·z + b), y) for binary labels y (0/1); L-BFGS from (1, 0)."""
    z, y = np.asarray(z, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = np.ones_like(z) if weight is None else np.asarray(weight, dtype=np.float64)

    def loss(theta):
        q = theta[0] * z + theta[1]
        value = np.sum(w * (np.logaddexp(0.0, q) - y * q))
        residual = w * (sigmoid(q) - y)
        return value, np.array([residual @ z, residual.sum()])

    result = minimize(loss, np.array([1.0, 0.0]), jac=True, method="L-BFGS-B")
    assert np.all(np.isfinite(result.x)), "Platt scaling diverged"
    return float(result.x[0]), float(result.x[1])


def fit_temperature(Z, y, weight=None):
    """T > 0 minimising Σ w·NLL(softmax(Z / T), y), searched over log T in [−5, 5]."""
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
    w = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)

    def loss(log_t):
        p = probabilities_from_logits(Z / np.exp(log_t))
        return -np.sum(w * np.log(np.clip(p[np.arange(len(y)), y], 1e-300, 1.0)))

    result = minimize_scalar(loss, bounds=(-5.0, 5.0), method="bounded", options={"xatol": 1e-7})
    return float(np.exp(result.x))


def class_shares(y, K):
    return np.bincount(np.asarray(y), minlength=K) / len(y)


def prevalence_weights(y, source, target):
    """Per-row weights that make rows drawn at class shares `source` count as if drawn at `target`."""
    ratio = np.asarray(target, dtype=np.float64) / np.asarray(source, dtype=np.float64)
    return ratio[np.asarray(y)]


def prior_shift(source, target):
    """The logit offset moving probabilities calibrated at `source` class shares to `target`: a scalar
    (the log-odds of labels[1]) for K = 2, else one log ratio per class."""
    source, target = np.asarray(source, dtype=np.float64), np.asarray(target, dtype=np.float64)
    assert np.all(source > 0) and np.all(target > 0), "class shares must be positive"
    if len(source) == 2:
        return float(np.log(target[1] / target[0]) - np.log(source[1] / source[0]))
    return np.log(target) - np.log(source)


def parse_prevalence(text, labels):
    """--prevalence: binary "P" (the share of labels[1]) or "LABEL=SHARE,..." naming every label; the
    shares must be in (0, 1) and sum to 1 (within 1e-6). Returns the K shares in label order."""
    K = len(labels)
    if "=" not in text:
        if K != 2:
            raise ValueError(f"--prevalence {text!r}: with {K} labels give LABEL=SHARE for each of {labels}")
        p = float(text)
        shares = np.array([1.0 - p, p])
    else:
        given = {}
        for item in text.split(","):
            label, _, share = item.partition("=")
            if label not in labels or label in given:
                raise ValueError(f"--prevalence {item!r}: expected each of {labels} once as LABEL=SHARE")
            given[label] = float(share)
        if set(given) != set(labels):
            raise ValueError(f"--prevalence: missing {sorted(set(labels) - set(given))}")
        shares = np.array([given[label] for label in labels])
    if not np.all((shares > 0) & (shares < 1)) or abs(shares.sum() - 1.0) > 1e-6:
        raise ValueError(f"--prevalence {text!r}: shares must lie in (0, 1) and sum to 1")
    return shares


@dataclasses.dataclass
class Calibration:
    """How a head's logits were rescaled and shifted (see the module comment)."""
    method: str                 # "platt", "temperature" or "none"
    parameters: dict            # platt: {"scale", "shift"}; temperature: {"temperature"}; none: {}
    validation_shares: list     # the validation rows' class shares (what the rescaled probabilities assume)
    prevalence: list            # the class shares the served probabilities and thresholds assume
    prevalence_source: str      # "--prevalence" or "validation rows"

    def logit_offset(self):
        return prior_shift(self.validation_shares, self.prevalence)

    def fold(self, coef, intercept):
        """(coef', intercept') of the calibrated, shifted head (float64)."""
        coef, intercept = np.array(coef, dtype=np.float64), np.array(intercept, dtype=np.float64)
        if self.method == "platt":
            a, b = self.parameters["scale"], self.parameters["shift"]
            coef, intercept = a * coef, a * intercept + b
        elif self.method == "temperature":
            t = self.parameters["temperature"]
            coef, intercept = coef / t, intercept / t
        return coef, intercept + self.logit_offset()

    def validation_weights(self, yv):
        """Weights moving the validation rows yv to the deployment prevalence; None when that is their
        own (no --prevalence), so that figures stay plain counts."""
        if self.prevalence_source != "--prevalence":
            return None
        return prevalence_weights(yv, self.validation_shares, self.prevalence)

    def to_dict(self):
        return {"method": self.method, "parameters": self.parameters,
                "validation_class_shares": list(map(float, self.validation_shares)),
                "prevalence": list(map(float, self.prevalence)), "prevalence_source": self.prevalence_source}


def calibrate(coef, intercept, Ev, yv, K, method="auto", prevalence=None):
    """A Calibration of the head (coef, intercept) fitted on the validation vectors Ev with labels yv.

    method "auto": Platt for a one-output head, temperature otherwise; "none": only the prior shift.
    prevalence: the deployment class shares (None: the validation rows' own)."""
    if method not in METHODS:
        raise ValueError(f"calibration method {method!r} is not one of {METHODS}")
    shares = class_shares(yv, K)
    if np.any(shares == 0):
        raise ValueError("calibration needs validation rows of every class")
    z = head_logits(coef, intercept, Ev)
    if method == "none":
        name, parameters = "none", {}
    elif z.ndim == 1:
        a, b = fit_platt(z, yv)
        name, parameters = "platt", {"scale": a, "shift": b}
    else:
        name, parameters = "temperature", {"temperature": fit_temperature(z, yv)}
    target = shares if prevalence is None else np.asarray(prevalence, dtype=np.float64)
    return Calibration(name, parameters, shares.tolist(), list(map(float, target)),
                       "validation rows" if prevalence is None else "--prevalence")
