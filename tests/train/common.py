"""Shared set-up of the train/ tests: repository root on sys.path, skip (exit 77) without torch,
synthetic data, one CPU thread.

Every test file is runnable as `/usr/bin/python3 tests/train/test_X.py` from the repository root.
"""

import os
import sys

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


try:
    import numpy as np
    import torch
except ImportError as exc:  # pragma: no cover - depends on the machine
    skip(f"{exc.name} is not installed")
try:
    import sklearn  # noqa: F401
except ImportError:  # pragma: no cover
    skip("scikit-learn is not installed")

torch.set_num_threads(1)


def xor_clusters(n_per_cluster, D=32, noise=0.15, seed=0, classes=2):
    """Clustered data that no linear model separates: class k has two antipodal clusters ±u_k
    (orthonormal u_k), so each class's mean is ~0 in every direction. Rows are L2-normalised like
    sentence embeddings. Returns (X float32 (N, D), y int64 (N,)), rows shuffled."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((D, classes)))[0].T  # (classes, D) orthonormal
    X, y = [], []
    for k in range(classes):
        for sign in (1.0, -1.0):
            X.append(sign * basis[k] + noise * rng.standard_normal((n_per_cluster, D)))
            y.append(np.full(n_per_cluster, k))
    X, y = np.concatenate(X), np.concatenate(y)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    order = rng.permutation(len(y))
    return X[order].astype(np.float32), y[order].astype(np.int64)


def pgcld_binary():
    """Path of the pgcld binary: $PGCLD_BIN, else build/server/pgcld; None when absent."""
    path = os.environ.get("PGCLD_BIN") or os.path.join(ROOT, "build", "server", "pgcld")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
