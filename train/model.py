"""The PGCL principle extractor (paper §3.2 and Appendix A.1) as a PyTorch module.

This module is the reference that pgcld reproduces in C: its attribute names are the state_dict
names written to model.safetensors (docs/checkpoint-format.md), and `forward` computes, in eval mode,
exactly the formulas listed under "What pgcld computes".
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

TASKS = ("binary", "multiclass", "ordinal")


def init_prototypes(K, d, task):
    """Prototype anchors on the unit hypersphere (paper, Appendix A.2), drawn from torch's global RNG.

    Classification: random unit vectors with the target minimum pairwise distance sqrt(2): when K <= d
    they are made orthonormal, which reaches it exactly; for K > d (where it is unreachable for all pairs)
    they are pushed apart by spread_on_sphere. Ordinal: points at equal angular steps along one half
    great circle (a geodesic from c_1 to c_K = -c_1), so anchors of distant ratings start farther apart
    than adjacent ones.
    """
    if task == "ordinal":
        basis, _ = torch.linalg.qr(torch.randn(d, 2))  # (d, 2): two orthonormal directions u, v
        angles = torch.linspace(0.0, math.pi, K)
        return torch.cos(angles)[:, None] * basis[:, 0] + torch.sin(angles)[:, None] * basis[:, 1]
    if K <= d:
        q, _ = torch.linalg.qr(torch.randn(d, K))  # (d, K) with orthonormal columns
        return q.T.contiguous()
    return spread_on_sphere(F.normalize(torch.randn(K, d), dim=1))


def spread_on_sphere(x, steps=300, step_size=0.1):
    """Push K > d unit vectors apart (the target distance sqrt(2) cannot hold for all pairs then).

    Projected steps along the tangent repulsion sum_j (x_i - x_j) / |x_i - x_j|^3, normalised per point,
    with a linearly decaying step; deterministic for a given x. Returns unit rows.
    """
    x = x.clone()
    eye = torch.eye(len(x), dtype=torch.bool)
    for t in range(steps):
        d2 = (2.0 - 2.0 * x @ x.T).clamp_min(1e-12).masked_fill(eye, float("inf"))  # unit rows
        weight = d2.pow(-1.5)
        force = x * weight.sum(dim=1, keepdim=True) - weight @ x
        force = force - (force * x).sum(dim=1, keepdim=True) * x
        force = force / force.norm(dim=1, keepdim=True).clamp_min(1e-12)
        x = F.normalize(x + step_size * (1 - t / steps) * force, dim=1)
    return x


class PGCL(nn.Module):
    """Dual-stream extractor: semantic MLP s and prototype attention m, fused as e = normalize(αs + (1-α)m).

    Arguments: K classes (= prototypes; 2 for binary), task in TASKS, D input and d output dimensions,
    the hidden sizes of the semantic MLP, the LeakyReLU slope, the dropout rate (training only),
    the initial gate α and the BatchNorm epsilon.
    """

    def __init__(self, *, K, task, D=1024, d=64, hidden=(512, 256), negative_slope=0.01,
                 dropout=0.2, alpha_init=0.05, batchnorm_eps=1e-5):
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        if K < 2:
            raise ValueError(f"a model needs K >= 2 classes, got K = {K}")
        if task == "binary" and K != 2:
            raise ValueError(f"a binary model has K = 2 classes, got K = {K}")
        self.task, self.D, self.d, self.K = task, D, d, K

        # Semantic stream: per layer Linear -> LeakyReLU -> BatchNorm1d -> Dropout, so the tensors sit at
        # indices 0, 2, 4, 6, ... of the Sequential (Linear at 4i, BatchNorm at 4i + 2).
        sizes = (D, *hidden, d)
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(n_in, n_out), nn.LeakyReLU(negative_slope),
                       nn.BatchNorm1d(n_out, eps=batchnorm_eps), nn.Dropout(dropout)]
        self.semantic_mlp = nn.Sequential(*layers)

        # Prototype stream: the query comes from z, keys and values from the prototype anchors C.
        self.query_fc = nn.Linear(D, d)
        self.key_fc = nn.Linear(d, d)
        self.value_fc = nn.Linear(d, d)
        self.prototypes = nn.Parameter(init_prototypes(K, d, task))  # (K, d)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))  # ()

        # Binary: one logit whose sigmoid is P(labels[1]); otherwise K logits and softmax.
        self.head = nn.Linear(d, 1 if task == "binary" else K)

    def forward(self, z):
        """z: (B, D) embeddings. Returns a dict of (B, ·) tensors:
        s (B, d) semantic basis, attention (B, K), m (B, d) prototype mapping, e (B, d) unit fused vector,
        logits (B, 1) binary or (B, K), probabilities (B, K) ([1 - p, p] for binary)."""
        s = self.semantic_mlp(z)

        q = self.query_fc(z)  # (B, d)
        keys = self.key_fc(self.prototypes)  # (K, d)
        values = self.value_fc(self.prototypes)  # (K, d)
        attention = torch.softmax(q @ keys.T / math.sqrt(self.d), dim=1)  # (B, K)
        m = attention @ values  # (B, d)

        alpha = torch.clamp(self.alpha, 0.0, 1.0)
        e = F.normalize(alpha * s + (1.0 - alpha) * m, dim=1)

        logits = self.head(e)
        if self.task == "binary":
            p = torch.sigmoid(logits[:, 0])
            probabilities = torch.stack([1.0 - p, p], dim=1)
        else:
            probabilities = torch.softmax(logits, dim=1)
        return {"s": s, "attention": attention, "m": m, "e": e,
                "logits": logits, "probabilities": probabilities}
