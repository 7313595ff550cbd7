"""`python3 -m train evaluate`: a checkpoint's figures on a labelled split, using its own head and policy.

Binary checkpoints are scored at their t_block (the prediction "labels[1]" is `P >= t_block`); the
decision counts (allow / review / block) follow the checkpoint's decision_policy exactly. Calibration
(ECE, Brier, NLL) is of the rows as given: it means most when they are drawn at the prevalence the
checkpoint assumes (`assumed_prevalence`, from its calibration record).
"""

import json
import os

import numpy as np

from . import data, trainer
from .export import decide
from .fit import clean, forward_probabilities
from .load import load_checkpoint
from .metrics import calibration_metrics, geometry, task_metrics


def evaluate_checkpoint(directory, X, y, with_geometry=True):
    model, config = load_checkpoint(directory)
    labels, policy, task = config["labels"], config["decision_policy"], config["task"]
    if X.shape[1] != model.D:
        raise ValueError(f"embeddings have D = {X.shape[1]}, the checkpoint expects {model.D}")
    probabilities = forward_probabilities(model, X)
    threshold = policy["t_block"] if task == "binary" and policy["kind"] == "threshold" else None
    result = {"checkpoint": directory, "weights_sha256": config.get("weights_sha256"), "task": task,
              "metrics": task_metrics(task, y, probabilities, len(labels), threshold),
              "calibration": calibration_metrics(y, probabilities), "assumed_prevalence":
                  config.get("calibration", {}).get("prevalence")}
    decisions = [decide(p, labels, policy) for p in probabilities.astype(np.float32)]
    result["decisions"] = {action: {labels[k]: int(sum(1 for d, t in zip(decisions, y) if d == action and t == k))
                                    for k in range(len(labels))} for action in ("allow", "review", "block")}
    if with_geometry:
        result["geometry"] = geometry(trainer.embed(model, X), y)
    return clean(result)


def run_evaluate_command(args):
    with open(os.path.join(args.checkpoint, "config.json"), encoding="utf-8") as f:
        model_labels = json.load(f)["labels"]  # a TSV's label_name column must match them
    X = data.read_embeddings(args.emb)
    y = data.read_labels(args.emb_labels, model_labels)
    if len(y) != len(X):
        raise ValueError(f"{args.emb_labels}: {len(y)} labels for {len(X)} embeddings")
    result = evaluate_checkpoint(args.checkpoint, X, y, not args.no_geometry)
    result["data"] = {"embeddings": args.emb, "embeddings_sha256": data.sha256_file(args.emb),
                      "labels": args.emb_labels, "labels_sha256": data.sha256_file(args.emb_labels)}
    text = json.dumps(result, indent=2, allow_nan=False)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
