"""Inputs and the numpy reference model for the integration tests (imported through harness.py,
which re-exports it: `H.random_embeddings`, `H.ReferenceModel`).

Embeddings as the daemon's request bodies carry them (JSON floats, base64 float32), their SHA-256,
a safetensors reader, a forward pass of a PGCL checkpoint in float64 numpy (the oracle the daemon's
scores are compared with) and the decision policies applied to its probabilities.
"""

import base64
import hashlib
import json
import os
import struct
import uuid

import numpy as np

def f32(values):
    """float32 copy of an array-like."""
    return np.asarray(values, dtype=np.float32)


def embedding_json(z):
    """JSON numbers whose float32 rounding is exactly z (float32)."""
    return [float(v) for v in f32(z)]


def embedding_b64(z):
    return base64.b64encode(f32(z).astype("<f4").tobytes()).decode("ascii")


def input_sha256(z):
    return hashlib.sha256(f32(z).astype("<f4").tobytes()).hexdigest()


def random_embeddings(n, D, seed, scale=None):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, D))
    z *= (1.0 / np.sqrt(D)) if scale is None else scale
    return z.astype(np.float32)


def json_items(Z, prefix="item"):
    return [{"id": f"{prefix}-{i}", "embedding": embedding_json(z)} for i, z in enumerate(Z)]


def b64_items(Z, prefix="item"):
    return [{"id": f"{prefix}-{i}", "embedding_b64": embedding_b64(z)} for i, z in enumerate(Z)]


def uuid7_millis(s):
    """The 48-bit unix-millisecond timestamp of a UUIDv7 string."""
    return uuid.UUID(s).int >> 80


# --------------------------------------------------------------------------- reference model

def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    buf = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = buf[b:e]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, "<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, "<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


class ReferenceModel:
    """Naive float64 implementation of docs/checkpoint-format.md, "What pgcld computes"."""

    def __init__(self, vdir):
        with open(os.path.join(vdir, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        self.t = load_safetensors(os.path.join(vdir, "model.safetensors"))
        self.labels = self.config["labels"]
        self.task = self.config["task"]

    def forward(self, Z):
        c, t = self.config, self.t
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float32)).astype(np.float64)
        eps = c["semantic_mlp"].get("batchnorm_eps", 1e-5)
        h = Z
        for layer in c["semantic_mlp"]["layers"]:
            p = layer["linear"]
            h = h @ t[p + ".weight"].T + t[p + ".bias"]
            act = layer.get("activation", "identity")
            if act == "leaky_relu":
                h = np.where(h >= 0, h, h * layer.get("negative_slope", 0.01))
            elif act == "relu":
                h = np.maximum(h, 0)
            bn = layer.get("batchnorm")
            if bn:
                h = ((h - t[bn + ".running_mean"]) / np.sqrt(t[bn + ".running_var"] + eps)
                     * t[bn + ".weight"] + t[bn + ".bias"])
        s = h
        a = c["attention"]
        q = Z @ t[a["query"] + ".weight"].T + t[a["query"] + ".bias"]
        C = t[a["prototypes"]]
        Kp = C @ t[a["key"] + ".weight"].T + t[a["key"] + ".bias"]
        Vp = C @ t[a["value"] + ".weight"].T + t[a["value"] + ".bias"]
        d = Kp.shape[1]
        logits = q @ Kp.T / np.sqrt(d)
        logits -= logits.max(axis=1, keepdims=True)
        att = np.exp(logits)
        att /= att.sum(axis=1, keepdims=True)
        m = att @ Vp
        alpha = float(np.asarray(t[a["alpha"]]).reshape(-1)[0])
        e = alpha * s + (1 - alpha) * m
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        hp = c["head"]["linear"]
        out = e @ t[hp + ".weight"].T + t[hp + ".bias"]
        if self.task == "binary":
            p1 = 1.0 / (1.0 + np.exp(-out[:, 0]))
            probs = np.stack([1 - p1, p1], axis=1)
        else:
            out -= out.max(axis=1, keepdims=True)
            probs = np.exp(out)
            probs /= probs.sum(axis=1, keepdims=True)
        return e, probs


def policy_decision(policy, labels, probs):
    """Expected decision for one item's probability vector (list in label order)."""
    if policy["kind"] == "threshold":
        score = probs[labels.index(policy["label"])]
        if score >= policy["t_block"]:
            return "block"
        if score >= policy["t_review"]:
            return "review"
        return "allow"
    top = int(np.argmax(probs))
    action = policy["actions"].get(labels[top], "allow")
    if action == "allow" and probs[top] < policy.get("min_confidence", 0):
        action = "review"
    return action


def near_policy_boundary(policy, labels, probs, tol=1e-5):
    """True when rounding could flip the decision (skip exact checks for such items)."""
    if policy["kind"] == "threshold":
        score = probs[labels.index(policy["label"])]
        return any(abs(score - t) < tol for t in (policy["t_review"], policy["t_block"]))
    srt = sorted(probs, reverse=True)
    return (srt[0] - srt[1] < tol or
            abs(srt[0] - policy.get("min_confidence", 0)) < tol)
