"""Inputs of the trainer: embeddings (.npy float32 N x D), labels, label names, and the seeded split.

Labels come either as a TSV in the layout of the shared data folder (header `label<TAB>label_name<TAB>text`,
each line split on its first two tabs only) or as a plain file with one integer per line.
"""

import hashlib

import numpy as np
from sklearn.model_selection import train_test_split

TSV_HEADER = ("label", "label_name", "text")


def sha256_file(path):
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_embeddings(path):
    """A 2-D float32 array of finite values from a .npy file (float64 input is converted)."""
    array = np.load(path, allow_pickle=False)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"{path}: expected an N x D array, got shape {array.shape}")
    if array.dtype not in (np.float32, np.float64):
        raise ValueError(f"{path}: expected float32 embeddings, got {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{path}: embeddings contain non-finite values")
    return array


def read_tsv(path):
    """Rows of a shared-layout TSV: list of (label int, label_name str, text str)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or tuple(lines[0].split("\t", 2)) != TSV_HEADER:
        raise ValueError(f"{path}: first line must be the header label<TAB>label_name<TAB>text")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split("\t", 2)
        if len(parts) != 3:
            raise ValueError(f"{path}:{number}: expected three tab-separated fields")
        try:
            label = int(parts[0])
        except ValueError:
            raise ValueError(f"{path}:{number}: label {parts[0]!r} is not an integer") from None
        rows.append((label, parts[1], parts[2]))
    return rows


def read_labels(path, label_names=None):
    """Integer labels from a shared-layout TSV or a one-int-per-line file.

    With label_names, every index must be < len(label_names), and a TSV's label_name column must match.
    """
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    if first.split("\t", 1)[0] == "label" and "\t" in first:
        rows = read_tsv(path)
        labels = np.array([row[0] for row in rows], dtype=np.int64)
        if label_names is not None:
            for number, (label, name, _) in enumerate(rows, start=2):
                if not 0 <= label < len(label_names) or label_names[label] != name:
                    raise ValueError(f"{path}:{number}: label {label} {name!r} does not match the label names "
                                     f"{label_names}")
    else:
        values = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if line.strip() == "":
                    continue
                try:
                    values.append(int(line.strip()))
                except ValueError:
                    raise ValueError(f"{path}:{number}: {line.strip()!r} is not an integer label") from None
        labels = np.array(values, dtype=np.int64)
    if labels.size == 0:
        raise ValueError(f"{path}: no labels")
    if labels.min() < 0 or (label_names is not None and labels.max() >= len(label_names)):
        raise ValueError(f"{path}: labels must lie in [0, {len(label_names) if label_names else 'K'})")
    return labels


def read_label_names(labels_file=None, labels=None):
    """Class names in index order from --labels-file (one per line) or --labels (comma-separated)."""
    if (labels_file is None) == (labels is None):
        raise ValueError("give exactly one of --labels-file and --labels")
    if labels_file is not None:
        with open(labels_file, encoding="utf-8") as f:
            names = [line.rstrip("\r\n") for line in f if line.strip()]
    else:
        names = labels.split(",")
    if len(names) < 2 or len(set(names)) != len(names) or not all(names):
        raise ValueError(f"labels must be at least two unique non-empty names, got {names}")
    return names


def load_split(emb_path, labels_path, label_names):
    """(X float32 (N, D), y int64 (N,), provenance dict) for one embeddings + labels pair."""
    X = read_embeddings(emb_path)
    y = read_labels(labels_path, label_names)
    if len(y) != len(X):
        raise ValueError(f"{labels_path}: {len(y)} labels for {len(X)} embeddings in {emb_path}")
    provenance = {"embeddings": emb_path, "embeddings_sha256": sha256_file(emb_path),
                  "labels": labels_path, "labels_sha256": sha256_file(labels_path),
                  "rows": int(len(y)), "class_counts": np.bincount(y, minlength=len(label_names)).tolist()}
    return X, y, provenance


def stratified_split(y, fraction, seed):
    """Indices (keep, held) of a stratified split with `fraction` of the rows held out, seeded.

    sklearn's train_test_split with stratify=y and random_state=seed; both index arrays sorted.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"the validation fraction must lie in (0, 1), got {fraction}")
    index = np.arange(len(y))
    keep, held = train_test_split(index, test_size=fraction, stratify=y, random_state=seed)
    return np.sort(keep), np.sort(held)


NORM_TOLERANCE = 1e-3  # a row whose L2 norm is off 1 by more than this is counted (encoders emit unit vectors)


def check_splits(splits, log=None):
    """Warnings about embeddings that train and serve badly but load: all-zero rows (a text with
    nothing the encoder knows), rows not of unit norm, and rows identical across two splits (the same
    text in training and evaluation data inflates held-out figures). splits: {name: (N, D) array or
    None}. Returns the warnings (strings), each also passed to log when given; nothing is refused."""
    warnings = []
    present = {name: X for name, X in splits.items() if X is not None}
    for name, X in present.items():
        norms = np.linalg.norm(X.astype(np.float64), axis=1)
        zero = int(np.sum(norms == 0))
        off = int(np.sum((norms > 0) & (np.abs(norms - 1.0) > NORM_TOLERANCE)))
        if zero:
            warnings.append(f"{name}: {zero} of {len(X)} rows are all zeros")
        if off:
            warnings.append(f"{name}: {off} of {len(X)} non-zero rows are not of unit norm (|‖x‖ − 1| > "
                            f"{NORM_TOLERANCE:g}; norms {norms[norms > 0].min():.4g} … {norms.max():.4g})")
    names = list(present)
    for i, a in enumerate(names):
        seen = {present[a][r].tobytes() for r in range(len(present[a])) if np.any(present[a][r])}
        for b in names[i + 1:]:
            shared = sum(1 for r in range(len(present[b])) if np.any(present[b][r]) and present[b][r].tobytes() in seen)
            if shared:
                warnings.append(f"{a} and {b}: {shared} rows of {b} are identical to rows of {a} (zero rows not counted)")
    if log:
        for warning in warnings:
            log(f"data check: {warning}")
    return warnings
