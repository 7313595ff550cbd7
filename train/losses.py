"""The PGCL training objective (paper §3.3 and Appendix A.3).

    L_total = λ_offset L_offset + λ_contrastive L_contrastive + λ_orth L_orthogonality + λ_mag L_magnitude

Every term is a per-batch mean of per-sample terms weighted by w_{y_i}, the inverse frequency of the
sample's class within the batch, normalised so that the weights of a batch average to 1:

    w_y = B / (C_B · n_y)     (n_y rows of class y in the batch, C_B classes present in the batch)

(sklearn's "balanced" formula applied per batch; a batch of one class gets all weights 1).

Choices where the paper leaves a detail open are documented next to each function and in train/README.md.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

# Distances and norms get this under the square root so their gradient stays finite at 0.
SQRT_EPS = 1e-12


def class_weights(y, K):
    """Per-sample weights w_{y_i} (B,) = B / (C_B · n_{y_i}), the inverse in-batch class frequency."""
    counts = torch.bincount(y, minlength=K).to(torch.float32)
    present = (counts > 0).sum().to(torch.float32)
    return (y.numel() / (present * counts))[y]


def supcon_loss(e, y, w, tau=0.1):
    """Supervised contrastive loss (Khosla et al.) on the fused vectors e (B, d), temperature τ.

        L = 1/B Σ_i  -w_i / |P(i)| Σ_{p ∈ P(i)} log( exp(sim(e_i, e_p)/τ) / Σ_{a ∈ A(i)} exp(sim(e_i, e_a)/τ) )

    sim is the cosine similarity (e is normalised here as well, so raw vectors may be passed); A(i) is
    every other sample of the batch, P(i) those of A(i) with label y_i. An anchor without any positive in
    the batch contributes 0 (the sum still divides by B).
    """
    B = e.shape[0]
    z = F.normalize(e, dim=1)
    logits = z @ z.T / tau
    self_mask = torch.eye(B, dtype=torch.bool, device=e.device)
    logits = logits.masked_fill(self_mask, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positives = (y[:, None] == y[None, :]) & ~self_mask
    n_pos = positives.sum(dim=1)
    pos_log_prob = torch.where(positives, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    mean_pos = pos_log_prob / n_pos.clamp(min=1)
    per_anchor = torch.where(n_pos > 0, -w * mean_pos, torch.zeros_like(mean_pos))
    return per_anchor.sum() / B


def prototype_distances(m, C):
    """Euclidean distances (B, K) between prototype mappings m (B, d) and anchors C (K, d)."""
    sq = (m[:, None, :] - C[None, :, :]).pow(2).sum(dim=2)
    return (sq + SQRT_EPS).sqrt()


def offset_loss(m, C, y, w, delta_intra=0.1, delta_inter=0.5, lambda_inclass=1.0, lambda_crossclass=1.0):
    """Offset loss on the prototype mapping m (B, d) against the anchors C (K, d).

        P_intra,i = max(0, ‖m_i − c_{y_i}‖ − δ_intra)²
        P_inter,i = max(0, ‖m_i − c_{y_i}‖ − min_{k≠y_i} ‖m_i − c_k‖ + δ_inter)²
        L = 1/B Σ_i w_i (λ_inclass P_intra,i + λ_crossclass P_inter,i)
    """
    dist = prototype_distances(m, C)
    true = dist.gather(1, y[:, None])[:, 0]
    wrong = dist.masked_fill(F.one_hot(y, C.shape[0]).bool(), float("inf")).min(dim=1).values
    p_intra = torch.relu(true - delta_intra).pow(2)
    p_inter = torch.relu(true - wrong + delta_inter).pow(2)
    return (w * (lambda_inclass * p_intra + lambda_crossclass * p_inter)).sum() / m.shape[0]


def orthogonality_loss(s, m, w, delta):
    """Soft orthogonality between the semantic basis s and the prototype mapping m (both (B, d)).

        L = 1/B Σ_i w_i max(0, |cos(s_i, m_i)| − δ_orth)
    """
    cos = F.cosine_similarity(s, m, dim=1, eps=1e-8)
    return (w * torch.relu(cos.abs() - delta)).sum() / s.shape[0]


def magnitude_loss(m, C, y, w, scale, intensity):
    """Ordinal magnitude loss on the pre-normalisation prototype mapping m (B, d).

        L = 1/B Σ_i w_i (‖m_i‖ − λ_scale I(y_i) ‖c_{y_i}‖)²

    scale: λ_scale (a learnable scalar tensor); intensity: I(y_i) per sample (B,).
    """
    m_norm = (m.pow(2).sum(dim=1) + SQRT_EPS).sqrt()
    c_norm = (C.pow(2).sum(dim=1) + SQRT_EPS).sqrt()[y]
    return (w * (m_norm - scale * intensity * c_norm).pow(2)).sum() / m.shape[0]


def orth_margin(epoch, epochs, start=0.5, end=0.05):
    """δ_orth for a 0-based epoch: linear from `start` at epoch 0 to `end` at epoch `epochs` − 1 (the
    annealing budget, --orth-anneal-epochs), then held at `end`."""
    if epochs <= 1:
        return end
    return start + (end - start) * min(epoch, epochs - 1) / (epochs - 1)


def intensity(y, offset=1.0):
    """I(y) = y + offset: the label index as an intensity; with offset 1, I is the 1-based rating."""
    return y.to(torch.float32) + offset


class PGCLObjective(nn.Module):
    """L_total for a PGCL forward output; holds the learnable λ_scale of the magnitude loss.

    λ_scale is a parameter of the objective, not of the PGCL module: it is trained with the model but is
    not part of the checkpoint (the checkpoint's tensor names are the contract).
    """

    def __init__(self, K, task, *, tau=0.1, lambda_offset=1.0, lambda_contrastive=1.0, lambda_orth=1.0,
                 lambda_mag=1.0, lambda_inclass=1.0, lambda_crossclass=1.0, delta_intra=0.1, delta_inter=0.5,
                 orth_start=0.5, orth_end=0.05, intensity_offset=1.0, scale_init=None, orth_anneal_epochs=10):
        super().__init__()
        self.K, self.task, self.orth_anneal_epochs = K, task, orth_anneal_epochs
        self.tau, self.delta_intra, self.delta_inter = tau, delta_intra, delta_inter
        self.lambda_offset, self.lambda_contrastive = lambda_offset, lambda_contrastive
        self.lambda_orth, self.lambda_inclass, self.lambda_crossclass = lambda_orth, lambda_inclass, lambda_crossclass
        self.orth_start, self.orth_end, self.intensity_offset = orth_start, orth_end, intensity_offset
        # The magnitude term is active for ordinal tasks only (paper §3.3).
        self.lambda_mag = lambda_mag if task == "ordinal" else 0.0
        if scale_init is None:
            # 1 / mean intensity: the average target norm starts at ‖c‖ (the prototypes start as unit vectors).
            scale_init = 1.0 / (intensity_offset + (K - 1) / 2.0)
        self.scale = nn.Parameter(torch.tensor(float(scale_init)))

    def forward(self, out, y, prototypes, epoch):
        """Returns (total loss, dict of the float values of each term and of δ_orth)."""
        w = class_weights(y, self.K)
        delta_orth = orth_margin(epoch, self.orth_anneal_epochs, self.orth_start, self.orth_end)
        terms = {}
        total = torch.zeros((), dtype=torch.float32)
        if self.lambda_contrastive:
            terms["contrastive"] = supcon_loss(out["e"], y, w, self.tau)
            total = total + self.lambda_contrastive * terms["contrastive"]
        if self.lambda_offset:
            terms["offset"] = offset_loss(out["m"], prototypes, y, w, self.delta_intra, self.delta_inter,
                                          self.lambda_inclass, self.lambda_crossclass)
            total = total + self.lambda_offset * terms["offset"]
        if self.lambda_orth:
            terms["orthogonality"] = orthogonality_loss(out["s"], out["m"], w, delta_orth)
            total = total + self.lambda_orth * terms["orthogonality"]
        if self.lambda_mag:
            terms["magnitude"] = magnitude_loss(out["m"], prototypes, y, w, self.scale,
                                                intensity(y, self.intensity_offset))
            total = total + self.lambda_mag * terms["magnitude"]
        values = {name: float(value.detach()) for name, value in terms.items()}
        values["delta_orth"] = delta_orth
        return total, values


class SupConObjective(nn.Module):
    """The SupCon projection-head baseline's objective: class-weighted SupCon on e only."""

    def __init__(self, K, tau=0.1):
        super().__init__()
        self.K, self.tau = K, tau

    def forward(self, out, y, prototypes, epoch):
        loss = supcon_loss(out["e"], y, class_weights(y, self.K), self.tau)
        return loss, {"contrastive": float(loss.detach())}


def check_finite(value, what):
    if not math.isfinite(value):
        raise FloatingPointError(f"{what} is not finite ({value})")
