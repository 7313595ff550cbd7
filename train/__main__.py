"""Command line: `python3 -m train {fit,evaluate,report,examples,random-checkpoint,parity} ...`.

fit trains, calibrates and exports a checkpoint from embeddings and labels (train/README.md); evaluate
scores a checkpoint on a labelled split; report runs the evaluation protocol of docs/train-report.md;
examples writes /v1/score request files from labelled rows. random-checkpoint writes a checkpoint with
seeded random weights (for tests); parity writes PyTorch reference outputs of a checkpoint for pgcld's
parity tests. Every random draw of those two comes from numpy's Generator seeded with --seed, so the
output is reproducible byte for byte.
"""

import argparse
import json
import sys

import numpy as np
import torch

from . import evaluate as evaluate_module
from . import examples as examples_module
from . import fit as fit_module
from . import report as report_module
from . import safetensors_io
from .export import GOLDEN_MARGIN, decide, decision_margin, export_checkpoint, validate_policy
from .load import load_checkpoint
from .model import PGCL

ALPHA = 0.3
CALIBRATION_ROWS = 256
GOLDEN_POOL = 1024
# Parity inputs that are not unit vectors: the zero embedding, then small and large norms.
PARITY_SPECIAL_NORMS = (0.0, 1e-3, 0.1, 10.0, 100.0)


def unit_vectors(rng, n, D):
    """(n, D) float32 rows drawn uniformly from the unit sphere."""
    x = rng.standard_normal((n, D))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _set(tensor, values):
    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.asarray(values, dtype=np.float32)))


def randomise(model, rng):
    """Overwrite every parameter and buffer of `model` with draws from `rng`.

    Scales keep each intermediate of order 1 for unit-norm inputs, so every tensor visibly shapes the
    output: layers fed by z use weights of standard deviation 1, the others 1/sqrt(in). Each BatchNorm's
    running statistics are measured on random unit inputs and then perturbed (variance times 0.5..2,
    mean shifted), and its affine weight and bias are random, so BatchNorm folding is fully exercised.
    """
    def linear(layer, std):
        _set(layer.weight, rng.normal(0.0, std, layer.weight.shape))
        _set(layer.bias, rng.normal(0.0, 0.1, layer.bias.shape))

    model.eval()
    h = torch.from_numpy(unit_vectors(rng, CALIBRATION_ROWS, model.D))
    modules = list(model.semantic_mlp)
    for i in range(0, len(modules), 4):
        lin, act, bn = modules[i], modules[i + 1], modules[i + 2]
        linear(lin, 1.0 if i == 0 else lin.in_features ** -0.5)
        with torch.no_grad():
            a = act(lin(h))
        mean, var = a.mean(0).numpy(), a.var(0).numpy()
        n = bn.num_features
        _set(bn.running_mean, mean + rng.normal(0.0, 0.2, n) * np.sqrt(var))
        _set(bn.running_var, var * rng.uniform(0.5, 2.0, n))
        _set(bn.weight, rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n))
        _set(bn.bias, rng.normal(0.0, 0.2, n))
        with torch.no_grad():
            h = bn(a)

    linear(model.query_fc, 1.0)
    linear(model.key_fc, 1.0)  # prototypes are unit rows, so keys and values are of order 1
    linear(model.value_fc, 1.0)
    _set(model.prototypes, unit_vectors(rng, model.K, model.d))
    _set(model.alpha, ALPHA)
    linear(model.head, 3.0)  # e is a unit vector: logits of standard deviation ~3 spread the probabilities


def pick_goldens(model, rng, n, labels, policy):
    """n unit inputs clear of decision boundaries: first one per distinct decision, then one per distinct
    (predicted label, decision) pair (this reaches min_confidence promotions), then any."""
    pool = unit_vectors(rng, GOLDEN_POOL, model.D)
    with torch.no_grad():
        probabilities = model(torch.from_numpy(pool))["probabilities"].numpy()
    clear = [i for i, p in enumerate(probabilities) if decision_margin(p, labels, policy) >= GOLDEN_MARGIN]
    kinds = {i: (int(np.argmax(probabilities[i])), decide(probabilities[i], labels, policy)) for i in clear}
    chosen, seen_decisions, seen_kinds = [], set(), set()
    for i in clear:
        if kinds[i][1] not in seen_decisions:
            seen_decisions.add(kinds[i][1])
            seen_kinds.add(kinds[i])
            chosen.append(i)
    for i in clear:
        if kinds[i] not in seen_kinds:
            seen_kinds.add(kinds[i])
            chosen.append(i)
    chosen = (chosen + [i for i in clear if i not in chosen])[:n]
    if len(chosen) < n:
        raise ValueError(f"only {len(chosen)} of {GOLDEN_POOL} candidate goldens are clear of "
                         "decision boundaries")
    return pool[sorted(chosen)]


def default_policy(task, labels):
    if task == "binary":
        return {"kind": "threshold", "label": labels[1], "t_review": 0.5, "t_block": 0.8}
    return {"kind": "label_map", "actions": {}, "min_confidence": 0.0}


def random_checkpoint(args):
    labels = args.labels.split(",")
    model = PGCL(K=len(labels), task=args.task, D=args.D, d=args.d)
    try:
        policy = json.loads(args.policy_json) if args.policy_json else default_policy(args.task, labels)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--policy-json: {exc}") from exc
    validate_policy(policy, labels)  # before pick_goldens applies it
    rng = np.random.default_rng(args.seed)
    randomise(model, rng)
    goldens = pick_goldens(model, rng, args.golden, labels, policy) if args.golden else None
    training = {"kind": "random", "seed": args.seed,
                "note": "seeded random weights from `python3 -m train random-checkpoint`; not trained"}
    export_checkpoint(model, args.out, args.task, labels, policy, golden_inputs=goldens, training=training)


def parity_inputs(rng, n, D):
    """(n, D) float32: the PARITY_SPECIAL_NORMS rows (random directions) first, then unit vectors."""
    x = unit_vectors(rng, n, D)
    norms = PARITY_SPECIAL_NORMS[:n]
    x[:len(norms)] *= np.asarray(norms, dtype=np.float32)[:, None]
    return x


def parity(args):
    model, _ = load_checkpoint(args.checkpoint)
    inputs = parity_inputs(np.random.default_rng(args.seed), args.n, model.D)
    with torch.no_grad():
        out = model(torch.from_numpy(inputs))
    probabilities = out["probabilities"].numpy()
    tensors = {"inputs": inputs, "vectors": out["e"].numpy(), "probabilities": probabilities,
               "label_index": np.argmax(probabilities, axis=1).astype(np.float32)}
    metadata = {"checkpoint": args.checkpoint, "n": args.n, "seed": args.seed}
    safetensors_io.save(args.out, tensors, metadata=metadata)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m train", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    rc = commands.add_parser("random-checkpoint", help="write a checkpoint with seeded random weights")
    rc.add_argument("--out", required=True, help="checkpoint directory to write")
    rc.add_argument("--task", required=True, choices=("binary", "multiclass", "ordinal"))
    rc.add_argument("--labels", required=True, help="comma-separated class names in index order")
    rc.add_argument("--D", type=int, default=1024, help="input embedding dimension")
    rc.add_argument("--d", type=int, default=64, help="output vector dimension")
    rc.add_argument("--seed", type=int, required=True)
    rc.add_argument("--policy-json", help="decision_policy object (default: threshold 0.5/0.8 on "
                                          "labels[1] for binary, label_map allowing everything otherwise)")
    rc.add_argument("--golden", type=int, default=4, help="number of golden entries (default 4)")
    rc.set_defaults(run=random_checkpoint)

    pa = commands.add_parser("parity", help="write PyTorch reference outputs of a checkpoint")
    pa.add_argument("--checkpoint", required=True, help="checkpoint directory")
    pa.add_argument("--n", type=int, required=True, help="number of input rows")
    pa.add_argument("--seed", type=int, required=True)
    pa.add_argument("--out", required=True, help="safetensors file to write")
    pa.set_defaults(run=parity)

    fi = commands.add_parser("fit", help="train PGCL on embeddings and export a calibrated checkpoint",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    fit_module.add_fit_arguments(fi)
    fi.set_defaults(run=fit_module.run_fit_command)

    ev = commands.add_parser("evaluate", help="a checkpoint's figures on a labelled split (JSON)")
    ev.add_argument("--checkpoint", required=True, help="checkpoint directory")
    ev.add_argument("--emb", required=True, help="embeddings, .npy float32 N x D")
    ev.add_argument("--emb-labels", required=True, help="labels: shared-layout TSV or one integer per line")
    ev.add_argument("--no-geometry", action="store_true", help="skip the geometry diagnostics")
    ev.add_argument("--out", help="also write the JSON here")
    ev.set_defaults(run=evaluate_module.run_evaluate_command)

    rp = commands.add_parser("report", help="the evaluation protocol of docs/train-report.md on shared datasets")
    rp.add_argument("--data-root", default="../shared/data", help="folder of dataset folders (default %(default)s)")
    rp.add_argument("--datasets", default=report_module.DATASETS, help="NAME:TASK,... (default %(default)s)")
    rp.add_argument("--seed", type=int, default=0)
    rp.add_argument("--seeds", default="0,1,2", help="seeds of PGCL defaults and the baselines, the first = --seed "
                                                   "(default %(default)s)")
    rp.add_argument("--figures-dir", help="folder for the reliability diagrams (SVG), linked from --out-md")
    rp.add_argument("--val-fraction", type=float, default=0.15)
    rp.add_argument("--bootstrap", type=int, default=2000, help="paired-bootstrap resamples (default %(default)s)")
    rp.add_argument("--threads", type=int, default=1)
    rp.add_argument("--work-dir", default="/tmp/pgcl-report", help="per-dataset JSON results (outside the repository)")
    rp.add_argument("--render-only", action="store_true", help="re-render from --work-dir without training")
    rp.add_argument("--reading", help="Markdown file with the written reading, inserted after the protocol")
    rp.add_argument("--command-line", help="the command line to print under Reproduction")
    rp.add_argument("--out-json", help="report JSON to write")
    rp.add_argument("--out-md", help="report Markdown to write")
    rp.add_argument("--verbose", action="store_true", help="per-epoch progress")
    rp.set_defaults(run=report_module.run_report_command)

    ex = commands.add_parser("examples", help="example /v1/score request files from labelled rows")
    ex.add_argument("--emb", required=True, help="embeddings, .npy")
    ex.add_argument("--tsv", required=True, help="the matching shared-layout TSV (its text becomes the item id)")
    ex.add_argument("--model", required=True, help="model name written in each request")
    ex.add_argument("--out-dir", required=True)
    ex.add_argument("--prefix", required=True, help="files are PREFIX-1.json, PREFIX-2.json, ...")
    ex.add_argument("--files", type=int, default=4)
    ex.add_argument("--items", type=int, default=3)
    ex.add_argument("--id-bytes", type=int, default=200)
    ex.add_argument("--seed", type=int, default=0)
    ex.set_defaults(run=examples_module.run_examples_command)

    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (ValueError, OSError) as exc:
        sys.exit(f"python3 -m train {args.command}: {exc}")


if __name__ == "__main__":
    main()
