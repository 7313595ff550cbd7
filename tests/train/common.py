"""Shared set-up of the train/ tests: repository root on sys.path, synthetic data, one CPU thread.
Without numpy, torch or scikit-learn (which deploy/install-deps.sh --test installs) a test program
skips (exit 77) when run by hand and fails under tests/run_all.sh (tests/integration/skips.py).

Every test file is runnable as `/usr/bin/python3 tests/train/test_X.py` from the repository root.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "tests", "integration"))  # skips.py

import skips  # noqa: E402

skip = skips.skip_program  # an environment limit: exit 77 with the reason
missing = skips.missing_for_program  # a suite dependency: exit 77 by hand, a failure under run_all.sh

try:
    import numpy as np
    import torch
except ImportError as exc:  # pragma: no cover - depends on the machine
    missing(f"{exc.name} is not installed (Debian's python3-{exc.name})")
try:
    import sklearn  # noqa: F401
except ImportError:  # pragma: no cover
    missing("scikit-learn is not installed (Debian's python3-sklearn)")

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
