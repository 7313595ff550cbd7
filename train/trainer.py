"""Training a PGCL module (or the SupCon projection-head baseline) on frozen embeddings.

AdamW (lr 1e-4, weight decay 1e-5), batch 128 (the last partial batch of an epoch is dropped so that
BatchNorm and SupCon always see full batches), at most 100 epochs, cosine annealing over the planned
epochs (or ReduceLROnPlateau on the validation score), early stopping on the validation score with the
best epoch's weights restored. After every epoch the validation score is measured the way the model will
be used: a logistic-regression probe (C = `es_probe_c`) is fitted on the training rows' vectors and scored
on the validation rows (train.metrics.selection_score).

Deterministic under a seed: torch.manual_seed (initialisation, dropout), a seeded torch.Generator for
the shuffles, torch.use_deterministic_algorithms(True), a fixed number of CPU threads.
"""

import copy
import dataclasses
import hashlib
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold
from torch import nn

from . import probe
from .losses import PGCLObjective, SupConObjective, check_finite, class_weights
from .metrics import DEFAULT_SELECTION, selection_score
from .model import PGCL


@dataclasses.dataclass
class TrainConfig:
    """Every hyperparameter of a training run; the defaults are the paper's (or documented choices)."""
    d: int = 64
    hidden: tuple = (512, 256)
    dropout: float = 0.2
    alpha_init: float = 0.05
    lr: float = 1e-4
    weight_decay: float = 1e-5
    batch_size: int = 128
    epochs: int = 100
    scheduler: str = "cosine"  # or "plateau"
    patience: int = 10  # early stopping: epochs without a better validation score
    min_delta: float = 0.0
    tau: float = 0.1
    lambda_offset: float = 1.0
    lambda_contrastive: float = 1.0
    lambda_orth: float = 1.0
    lambda_mag: float = 1.0
    lambda_inclass: float = 1.0
    lambda_crossclass: float = 1.0
    delta_intra: float = 0.1
    delta_inter: float = 0.5
    orth_start: float = 0.5
    orth_end: float = 0.05
    # δ_orth reaches orth_end after this many epochs and stays there: a fixed budget, so that the term
    # acts however early early stopping ends the run (annealed over the 100 planned epochs it stayed
    # ≥ 0.35 in runs stopped at 12-82 epochs, above |cos(s, m)|, and never acted).
    orth_anneal_epochs: int = 10
    intensity_offset: float = 1.0
    scale_init: float = None  # λ_scale start; None: 1 / mean intensity
    es_probe_c: float = 1.0
    alpha_fixed: float = None  # ablations: α held at this value (0: prototype stream only, 1: semantic only)
    # Distillation (not in the paper; off by default): weight of a cross-entropy between the head's
    # probabilities and a teacher's, the out-of-fold probabilities of a logistic-regression probe on
    # the raw embeddings (teacher_probabilities). It pulls the 64-d vectors towards what a linear
    # probe finds in the 1024-d input where the contrastive terms alone overfit (goemotions5).
    lambda_distill: float = 0.0

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["hidden"] = list(self.hidden)
        return out

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def set_determinism(seed, threads=1):
    """Seed torch's global RNG and make its CPU kernels deterministic; returns a seeded shuffle generator."""
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


class ProjectionHead(nn.Module):
    """The SupCon projection-head baseline: the same semantic MLP as PGCL, then L2 normalisation."""

    def __init__(self, *, D=1024, d=64, hidden=(512, 256), negative_slope=0.01, dropout=0.2):
        super().__init__()
        sizes = (D, *hidden, d)
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(n_in, n_out), nn.LeakyReLU(negative_slope), nn.BatchNorm1d(n_out), nn.Dropout(dropout)]
        self.semantic_mlp = nn.Sequential(*layers)
        self.D, self.d = D, d
        self.prototypes = None

    def forward(self, z):
        s = self.semantic_mlp(z)
        return {"s": s, "e": F.normalize(s, dim=1)}


class CrossEntropyMLP(ProjectionHead):
    """The cross-entropy baseline: the same semantic MLP, a linear classifier on s trained with
    class-weighted cross-entropy; its vectors e = s / ‖s‖ go to the same probe as every method."""

    def __init__(self, *, K, **kwargs):
        super().__init__(**kwargs)
        self.classifier = nn.Linear(self.d, K)

    def forward(self, z):
        out = super().forward(z)
        out["logits"] = self.classifier(out["s"])
        return out


class CrossEntropyObjective(nn.Module):
    """Class-weighted cross-entropy (the weights of losses.class_weights, per batch)."""

    def __init__(self, K):
        super().__init__()
        self.K = K

    def forward(self, out, y, prototypes, epoch):
        w = class_weights(y, self.K)
        loss = (w * F.cross_entropy(out["logits"], y, reduction="none")).mean()
        return loss, {"cross_entropy": float(loss.detach())}


TEACHER_FOLDS = 5
_teacher_cache = {}


def teacher_probabilities(X, y, Xv, yv, task, K, seed):
    """The distillation teacher (N, K): a logistic-regression probe on the raw embeddings, its C chosen
    by validation log-loss over probe.C_GRID (the raw-LR baseline's rule), and its probabilities for
    each training row from the fold that did not see it (stratified TEACHER_FOLDS folds, seeded), so
    the targets carry held-out confidence rather than the training rows' own fit. Cached per data
    and seed: the --select grid and the report ask for the same teacher many times."""
    key = tuple(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in (X, y, Xv, yv)) + (task, K, seed)
    if key not in _teacher_cache:
        _, C, _ = probe.select(X, y, Xv, yv, task, K, DEFAULT_SELECTION[task], criterion="log_loss")
        folds = StratifiedKFold(TEACHER_FOLDS, shuffle=True, random_state=seed)
        out = np.zeros((len(y), K))
        for fit_rows, held_rows in folds.split(X, y):
            out[held_rows] = probe.probabilities(probe.fit(X[fit_rows], y[fit_rows], C), X[held_rows], task)
        _teacher_cache[key] = out.astype(np.float32)
    return _teacher_cache[key]


def distillation_loss(out, teacher, task):
    """Mean cross-entropy of the model's head against teacher probabilities (B, K): for a binary head
    (one logit) the binary cross-entropy with the teacher's P(labels[1]); otherwise the softmax's."""
    logits = out["logits"]
    if task == "binary":
        return F.binary_cross_entropy_with_logits(logits[:, 0], teacher[:, 1])
    return -(teacher * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def embed(model, X, batch=1024):
    """The unit vectors e (N, d) of `model` in eval mode, as float32 numpy."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(X), batch):
            out.append(model(torch.from_numpy(np.ascontiguousarray(X[i:i + batch])))["e"].numpy())
    return np.concatenate(out).astype(np.float32)


def build(kind, task, K, D, cfg):
    """A fresh model and its objective: kind "pgcl", or the baselines "supcon" and "ce"."""
    if kind == "pgcl":
        model = PGCL(K=K, task=task, D=D, d=cfg.d, hidden=tuple(cfg.hidden), dropout=cfg.dropout,
                     alpha_init=cfg.alpha_init)
        objective = PGCLObjective(K, task, tau=cfg.tau, lambda_offset=cfg.lambda_offset,
                                  lambda_contrastive=cfg.lambda_contrastive, lambda_orth=cfg.lambda_orth,
                                  lambda_mag=cfg.lambda_mag, lambda_inclass=cfg.lambda_inclass,
                                  lambda_crossclass=cfg.lambda_crossclass, delta_intra=cfg.delta_intra,
                                  delta_inter=cfg.delta_inter, orth_start=cfg.orth_start, orth_end=cfg.orth_end,
                                  intensity_offset=cfg.intensity_offset, scale_init=cfg.scale_init,
                                  orth_anneal_epochs=cfg.orth_anneal_epochs)
        if cfg.alpha_fixed is not None:
            with torch.no_grad():
                model.alpha.fill_(float(cfg.alpha_fixed))
            model.alpha.requires_grad_(False)
    elif kind == "supcon":
        model = ProjectionHead(D=D, d=cfg.d, hidden=tuple(cfg.hidden), dropout=cfg.dropout)
        objective = SupConObjective(K, tau=cfg.tau)
    elif kind == "ce":
        model = CrossEntropyMLP(K=K, D=D, d=cfg.d, hidden=tuple(cfg.hidden), dropout=cfg.dropout)
        objective = CrossEntropyObjective(K)
    else:
        raise ValueError(f"unknown model kind {kind!r}")
    return model, objective


def train(X, y, Xv, yv, *, task, K, cfg, seed, metric, kind="pgcl", threads=1, log=None):
    """Train on (X, y), early-stop on (Xv, yv) by `metric`; returns (model in eval mode, info dict).

    info: best_epoch (1-based), epochs_run, best validation score, seconds, final λ_scale (PGCL), and
    the per-epoch history (mean loss terms, validation score, learning rate, δ_orth).
    """
    generator = set_determinism(seed, threads)
    model, objective = build(kind, task, K, X.shape[1], cfg)
    decay = [p for p in model.parameters()]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    extra = [p for p in objective.parameters()]
    if extra:
        groups.append({"params": extra, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.scheduler == "cosine":
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    elif cfg.scheduler == "plateau":
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=0.5, patience=5)
    else:
        raise ValueError(f"unknown scheduler {cfg.scheduler!r}")

    teacher = None
    if cfg.lambda_distill > 0:
        if kind != "pgcl":
            raise ValueError("distillation (lambda_distill > 0) needs a model with a head: kind 'pgcl'")
        teacher = torch.from_numpy(teacher_probabilities(X, y, Xv, yv, task, K, seed))
    Xt, yt = torch.from_numpy(np.ascontiguousarray(X)), torch.from_numpy(np.asarray(y, dtype=np.int64))
    n = len(Xt)
    batch = min(cfg.batch_size, n)
    started = time.time()
    best = {"score": -np.inf, "epoch": 0, "state": None, "scale": None}
    history, stale = [], 0
    for epoch in range(cfg.epochs):
        model.train()
        order = torch.randperm(n, generator=generator)
        sums, batches = {}, 0
        for i in range(0, n - batch + 1, batch):
            idx = order[i:i + batch]
            out = model(Xt[idx])
            loss, values = objective(out, yt[idx], model.prototypes, epoch)
            if teacher is not None:
                distill = distillation_loss(out, teacher[idx], task)
                loss = loss + cfg.lambda_distill * distill
                values["distill"] = float(distill.detach())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            check_finite(float(loss.detach()), f"training loss at epoch {epoch + 1}")
            values["total"] = float(loss.detach())
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + value
            batches += 1
        lr_now = optimizer.param_groups[0]["lr"]
        score = validation_score(model, X, y, Xv, yv, task, K, metric, cfg.es_probe_c)
        if cfg.scheduler == "cosine":
            scheduler.step()
        else:
            scheduler.step(score)
        entry = {name: value / batches for name, value in sums.items()}
        entry.update({"epoch": epoch + 1, "val_score": score, "lr": lr_now})
        if kind == "pgcl":
            entry["alpha"] = float(model.alpha.detach())
        history.append(entry)
        if log:
            log(f"  epoch {epoch + 1:3d}  loss {entry['total']:.4f}  val {metric} {score:.4f}")
        if np.isfinite(score) and score > best["score"] + cfg.min_delta:
            best = {"score": score, "epoch": epoch + 1, "state": copy.deepcopy(model.state_dict()),
                    "scale": float(objective.scale.detach()) if hasattr(objective, "scale") else None}
            stale = 0
        else:
            stale += 1
            if stale >= cfg.patience:
                break
    if best["state"] is None:  # no finite validation score: keep the last epoch
        best.update(epoch=len(history), score=float("nan"))
    else:
        model.load_state_dict(best["state"])
    model.eval()
    info = {"best_epoch": best["epoch"], "epochs_run": len(history), "val_score": best["score"],
            "seconds": round(time.time() - started, 1), "history": history}
    if best["scale"] is not None and task == "ordinal":
        info["lambda_scale"] = best["scale"]
    if kind == "pgcl":
        info["alpha"] = float(torch.clamp(model.alpha.detach(), 0, 1))
    return model, info


def validation_score(model, X, y, Xv, yv, task, K, metric, C):
    """The selection metric on the validation rows of an LR probe (C fixed) fitted on the training rows."""
    E, Ev = embed(model, X), embed(model, Xv)
    lr = probe.fit(E, y, C)
    return selection_score(metric, yv, probe.probabilities(lr, Ev, task), K)


def mapping_diagnostics(model, X, y, delta_intra, delta_inter, batch=1024):
    """How far a PGCL model's prototype mapping m meets the objective's margins, on rows (X, y):
    share of rows within δ_intra of their own prototype, share whose nearest wrong prototype is at
    least δ_inter away (the offset loss's two hinges, distances Euclidean to the raw prototypes), the
    mean attention entropy over log K (0: one prototype, 1: uniform), and the variance across rows
    of the two fused parts α·s and (1 − α)·m (which one carries the input-dependent signal)."""
    model.eval()
    parts = {"s": [], "m": [], "attention": []}
    with torch.no_grad():
        for i in range(0, len(X), batch):
            out = model(torch.from_numpy(np.ascontiguousarray(X[i:i + batch])))
            for key in parts:
                parts[key].append(out[key].numpy().astype(np.float64))
        s, m, attention = (np.concatenate(parts[key]) for key in ("s", "m", "attention"))
        prototypes = model.prototypes.detach().numpy().astype(np.float64)
        alpha = float(torch.clamp(model.alpha.detach(), 0, 1))
    y = np.asarray(y)
    distance = np.linalg.norm(m[:, None, :] - prototypes[None, :, :], axis=2)  # (N, K)
    own = distance[np.arange(len(y)), y]
    wrong = np.where(np.eye(prototypes.shape[0], dtype=bool)[y], np.inf, distance).min(axis=1)
    entropy = -(attention * np.log(np.clip(attention, 1e-300, 1.0))).sum(axis=1) / np.log(prototypes.shape[0])

    def total_variance(v):
        return float(((v - v.mean(axis=0)) ** 2).sum(axis=1).mean())

    return {"within_delta_intra": float(np.mean(own <= delta_intra)),
            "inter_margin_met": float(np.mean(wrong >= delta_inter)),
            "mean_own_distance": float(own.mean()), "mean_nearest_wrong_distance": float(wrong.mean()),
            "attention_entropy": float(entropy.mean()), "alpha": alpha,
            "variance_alpha_s": total_variance(alpha * s), "variance_one_minus_alpha_m": total_variance((1 - alpha) * m)}
