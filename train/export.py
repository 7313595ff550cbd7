"""Writing a PGCL model as a pgcld checkpoint (config.json + model.safetensors), and the decision policy.

docs/checkpoint-format.md is the contract. Golden entries are computed by the PyTorch forward in eval
mode; floats are written as the exact value of their float32 (Python's repr of a double round-trips).
"""

import base64
import hashlib
import json
import os

import numpy as np
import torch

from . import safetensors_io
from .model import PGCL

FORMAT = "pgcld-checkpoint"
FORMAT_VERSION = 1
ACTIONS = ("allow", "review", "block")
# A golden whose probabilities lie closer than this to a decision boundary (a tie for the top label, a
# threshold, min_confidence) could flip in pgcld's float arithmetic; export refuses it.
GOLDEN_MARGIN = 1e-3


def validate_policy(policy, labels):
    """Raise ValueError unless `policy` is a decision policy of the documented form for `labels`."""
    if not isinstance(policy, dict):
        raise ValueError("decision_policy: must be a JSON object")
    kind = policy.get("kind")
    if kind == "threshold":
        required = {"kind", "label", "t_review", "t_block"}
        allowed = required | {"source"}
    elif kind == "label_map":
        required = {"kind", "actions"}
        allowed = required | {"min_confidence"}
    else:
        raise ValueError(f"decision_policy: unknown kind {kind!r}")
    if set(policy) - allowed or required - set(policy):
        raise ValueError(f"decision_policy: {kind} takes {sorted(allowed)}, requires {sorted(required)}, "
                         f"got {sorted(policy)}")
    if kind == "threshold":
        if policy["label"] not in labels:
            raise ValueError(f"decision_policy: label {policy['label']!r} is not one of {labels}")
        if not 0 <= policy["t_review"] <= policy["t_block"] <= 1:
            raise ValueError("decision_policy: requires 0 <= t_review <= t_block <= 1")
    else:
        for label, action in policy["actions"].items():
            if label not in labels or action not in ACTIONS:
                raise ValueError(f"decision_policy: action {label!r}: {action!r} is not a label -> {ACTIONS}")
        if not 0 <= policy.get("min_confidence", 0.0) <= 1:
            raise ValueError("decision_policy: min_confidence must lie in [0, 1]")


def predicted_index(probabilities):
    """Index of the largest probability; ties go to the lowest index."""
    return int(np.argmax(np.asarray(probabilities, dtype=np.float32)))


def decide(probabilities, labels, policy):
    """The decision ("allow", "review" or "block") for one row of K probabilities, per the doc's policy."""
    probabilities = [float(np.float32(p)) for p in probabilities]
    if policy["kind"] == "threshold":
        score = probabilities[labels.index(policy["label"])]
        if score >= policy["t_block"]:
            return "block"
        return "review" if score >= policy["t_review"] else "allow"
    top = predicted_index(probabilities)
    action = policy["actions"].get(labels[top], "allow")
    if action == "allow" and probabilities[top] < policy.get("min_confidence", 0.0):
        return "review"
    return action


def decision_margin(probabilities, labels, policy):
    """Distance of one row of probabilities to the nearest boundary that changes its label or decision."""
    ranked = sorted((float(p) for p in probabilities), reverse=True)
    distances = [ranked[0] - ranked[1]]
    if policy["kind"] == "threshold":
        score = float(probabilities[labels.index(policy["label"])])
        distances += [abs(score - policy["t_review"]), abs(score - policy["t_block"])]
    elif policy["actions"].get(labels[predicted_index(probabilities)], "allow") == "allow":
        distances.append(abs(ranked[0] - policy.get("min_confidence", 0.0)))
    return min(distances)


def state_tensors(model):
    """The model's state_dict as float32 numpy arrays, without num_batches_tracked; α clamped to [0, 1]."""
    tensors = {}
    for name, value in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        if name == "alpha":
            value = torch.clamp(value, 0.0, 1.0)
        tensors[name] = value.detach().cpu().numpy().astype(np.float32)
    return tensors


def mlp_layers(model):
    """The semantic_mlp.layers list of config.json, read off the module; also returns the BatchNorm eps."""
    layers, eps = [], set()
    modules = list(model.semantic_mlp)
    for i in range(0, len(modules), 4):
        linear, activation, batchnorm = modules[i], modules[i + 1], modules[i + 2]
        layers.append({"linear": f"semantic_mlp.{i}", "in": linear.in_features, "out": linear.out_features,
                       "activation": "leaky_relu", "negative_slope": activation.negative_slope,
                       "batchnorm": f"semantic_mlp.{i + 2}"})
        eps.add(batchnorm.eps)
    if len(eps) != 1:
        raise ValueError(f"all BatchNorm layers must share one eps, got {sorted(eps)}")
    return layers, eps.pop()


def golden_entries(model, golden_inputs, labels, policy):
    """config.json `golden` entries for the rows of golden_inputs (float32 (G, D)), computed in eval mode."""
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(golden_inputs))
    entries = []
    for z, e, p in zip(golden_inputs, out["e"].numpy(), out["probabilities"].numpy()):
        margin = decision_margin(p, labels, policy)
        if margin < GOLDEN_MARGIN:
            raise ValueError(f"golden input lies {margin:.2e} from a decision boundary (< {GOLDEN_MARGIN})")
        entries.append({
            "embedding_b64": base64.b64encode(z.astype("<f4").tobytes()).decode("ascii"),
            "vector": e.tolist(),
            "probabilities": p.tolist(),
            "label_index": predicted_index(p),
            "decision": decide(p, labels, policy),
        })
    return entries


def export_checkpoint(model, out_dir, task, labels, decision_policy, golden_inputs=None, training=None,
                      calibration=None, dsa=None):
    """Write out_dir/model.safetensors and out_dir/config.json for `model` (a PGCL).

    golden_inputs: optional float32 numpy array (G, D) of embeddings whose outputs are recorded;
    training: optional JSON object of provenance, copied to config.json untouched;
    calibration: optional calibration record (docs/checkpoint-format.md: already folded into the head,
    which pgcld validates and shows on /v1/models);
    dsa: optional {"category": "STATEMENT_CATEGORY_...", ...} in the EU DSA Transparency Database's
    vocabulary (docs/checkpoint-format.md), which pgcld validates and puts in statements of reasons.
    Leaves the model in eval mode. Returns the config written.
    """
    if not isinstance(model, PGCL) or task != model.task:
        raise ValueError(f"task {task!r} does not match the model's task {getattr(model, 'task', None)!r}")
    labels = list(labels)
    if len(labels) != model.K or len(set(labels)) != len(labels) or not all(labels):
        raise ValueError(f"labels must be {model.K} unique non-empty names, got {labels}")
    validate_policy(decision_policy, labels)
    layers, eps = mlp_layers(model)

    os.makedirs(out_dir, exist_ok=True)
    weights_path = os.path.join(out_dir, "model.safetensors")
    safetensors_io.save(weights_path, state_tensors(model), metadata={"format": "pt"})
    with open(weights_path, "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()

    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task": task,
        "dims": {"D": model.D, "d": model.d, "K": model.K},
        "labels": labels,
        "semantic_mlp": {"batchnorm_eps": eps, "layers": layers},
        "attention": {"query": "query_fc", "key": "key_fc", "value": "value_fc",
                      "prototypes": "prototypes", "alpha": "alpha"},
        "head": {"linear": "head"},
        "decision_policy": decision_policy,
        "weights_sha256": sha256,
    }
    if golden_inputs is not None:
        config["golden"] = golden_entries(model, np.asarray(golden_inputs, dtype=np.float32),
                                          labels, decision_policy)
    if calibration is not None:
        config["calibration"] = calibration
    if dsa is not None:
        config["dsa"] = dsa
    if training is not None:
        config["training"] = training
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, allow_nan=False)
        f.write("\n")
    return config
