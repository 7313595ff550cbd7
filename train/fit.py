"""`python3 -m train fit`: embeddings + labels -> a trained, calibrated, exported pgcld checkpoint.

Pipeline: read the data (a --val split, or a stratified --val-fraction carve of --train, seeded); train
PGCL (one run, or with --select the documented grid SELECT_GRID and keep the best by the validation
metric); fit the logistic-regression probe on the training rows' vectors (C by validation log-loss),
calibrate it on the validation rows and move it to the deployment prevalence (train/calibration.py),
and fold that into the head; choose the decision policy on the validation rows at that prevalence;
pick golden inputs clear of every decision boundary; export config.json + model.safetensors with the
calibration record in `calibration` and the provenance in `training`.
"""

import json
import os
import sys
import tempfile

import numpy as np
import sklearn
import torch

from . import calibrate, calibration, data, probe, safetensors_io, trainer
from .export import GOLDEN_MARGIN, decide, decision_margin, export_checkpoint, state_tensors
from .metrics import DEFAULT_SELECTION, SELECTION_METRICS, calibration_metrics, selection_score, task_metrics

# --select: the documented grid, applied on top of the command line's settings. A variant whose settings
# equal an earlier one's (e.g. lr_1e-4 when --lr is already 1e-4) is not trained twice.
SELECT_GRID = (
    ("full", {}),
    ("no_offset", {"lambda_offset": 0.0}),
    ("no_contrastive", {"lambda_contrastive": 0.0}),
    ("no_orthogonality", {"lambda_orth": 0.0}),
    ("offset_0.5", {"lambda_offset": 0.5}),
    ("offset_2.0", {"lambda_offset": 2.0}),
    ("lr_1e-4", {"lr": 1e-4}),
    ("lr_1e-3", {"lr": 1e-3}),
    # Not in the paper: a one-layer semantic stream trained towards the raw-embedding probe's
    # out-of-fold probabilities (trainer.teacher_probabilities), without the orthogonality term; on
    # goemotions5 the deeper stream overfits 5,659 rows and every 64-d variant above falls short of
    # the raw probe (docs/train-report.md).
    ("distill_shallow", {"lambda_distill": 10.0, "hidden": (), "lambda_orth": 0.0}),
)
GOLDEN_COUNT = 6
GOLDEN_RANDOM_POOL = 1024
GOLDEN_CENTROID_POOL = 64  # per class


def clean(value):
    """JSON-safe copy: nan/inf floats become None, tuples lists, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def calibrated_head(E, y, Ev, yv, *, task, K, metric, probe_grid=probe.C_GRID, criterion="log_loss",
                    method="auto", prevalence=None):
    """The head of one model: the probe on the training vectors E (C chosen on the validation vectors Ev
    by `criterion`), calibrated on Ev and moved to `prevalence`. Returns a dict: probe, C, C_scores,
    calibration, coef and intercept (folded), validation probabilities and selection score."""
    lr, C, c_scores = probe.select(E, y, Ev, yv, task, K, metric, probe_grid, criterion)
    cal = calibration.calibrate(lr.coef_, lr.intercept_, Ev, yv, K, method, prevalence)
    coef, intercept = cal.fold(lr.coef_, lr.intercept_)
    pv = calibration.probabilities_from_logits(calibration.head_logits(coef, intercept, Ev))
    return {"probe": lr, "C": C, "C_scores": c_scores, "calibration": cal, "coef": coef, "intercept": intercept,
            "p_val": pv, "val_score": selection_score(metric, yv, pv, K)}


def fit_pgcl(X, y, Xv, yv, *, task, K, cfg, seed, metric, select=False, threads=1, probe_grid=probe.C_GRID,
             log=None, criterion="log_loss", calibration_method="auto", prevalence=None):
    """Train PGCL (the grid with select=True); every run gets its calibrated head (calibrated_head)
    installed. Returns (list of variant dicts, index of the chosen one: best validation score, first wins)."""
    variants = SELECT_GRID if select else SELECT_GRID[:1]
    results = []
    for name, overrides in variants:
        vcfg = cfg.replace(**overrides)
        twin = next((r for r in results if r["config"] == vcfg), None)
        if twin is not None:
            if log:
                log(f"variant {name}: same settings as {twin['name']}, not trained again")
            twin.setdefault("also", []).append(name)
            continue
        if log:
            log(f"variant {name}: {overrides or 'command-line settings'}")
        model, info = trainer.train(X, y, Xv, yv, task=task, K=K, cfg=vcfg, seed=seed, metric=metric,
                                    threads=threads, log=log)
        head = calibrated_head(trainer.embed(model, X), y, trainer.embed(model, Xv), yv, task=task, K=K, metric=metric,
                               probe_grid=probe_grid, criterion=criterion, method=calibration_method,
                               prevalence=prevalence)
        probe.install_head_weights(model, head["coef"], head["intercept"], task)
        results.append({"name": name, "overrides": overrides, "config": vcfg, "model": model, "info": info, **head})
        if log:
            log(f"variant {name}: best epoch {info['best_epoch']} of {info['epochs_run']}, probe C={head['C']}, "
                f"validation {metric} {head['val_score']:.4f} ({info['seconds']} s)")
    chosen = max(range(len(results)), key=lambda i: (results[i]["val_score"], -i))
    return results, chosen


def forward_probabilities(model, X):
    """The checkpoint's own probabilities (N, K) from the PyTorch forward in eval mode."""
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(X)))["probabilities"].numpy().astype(np.float64)


def weights_sha256(model):
    """SHA-256 of the model.safetensors that export_checkpoint writes for `model`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.safetensors")
        safetensors_io.save(path, state_tensors(model), metadata={"format": "pt"})
        return data.sha256_file(path)


def golden_pool(rng, D, X, y, K):
    """Candidate golden inputs: random unit vectors, then unit vectors near each class's mean training
    embedding (mean direction plus noise of several sizes; aggregates only, no training row is copied)."""
    pool = rng.standard_normal((GOLDEN_RANDOM_POOL, D))
    rows = [pool / np.linalg.norm(pool, axis=1, keepdims=True)]
    for k in range(K):
        centre = X[y == k].astype(np.float64).mean(axis=0)
        centre /= max(np.linalg.norm(centre), 1e-12)
        noise = rng.standard_normal((GOLDEN_CENTROID_POOL, D))
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        sizes = np.linspace(0.0, 1.5, GOLDEN_CENTROID_POOL)[:, None]
        candidate = centre + sizes * noise
        rows.append(candidate / np.linalg.norm(candidate, axis=1, keepdims=True))
    return np.concatenate(rows).astype(np.float32)


def choose_goldens(model, pool, n, labels, policy):
    """n rows of `pool` clear of decision boundaries: first one per distinct decision, then one per
    distinct (label, decision) pair, then the clearest remaining rows; returned in pool order."""
    probabilities = forward_probabilities(model, pool).astype(np.float32)
    margins = np.array([decision_margin(p, labels, policy) for p in probabilities])
    clear = [i for i in np.argsort(-margins, kind="stable") if margins[i] >= 10 * GOLDEN_MARGIN]
    kinds = {i: (int(np.argmax(probabilities[i])), decide(probabilities[i], labels, policy)) for i in clear}
    chosen, decisions, pairs = [], set(), set()
    for i in sorted(clear):
        if kinds[i][1] not in decisions:
            decisions.add(kinds[i][1])
            pairs.add(kinds[i])
            chosen.append(i)
    for i in sorted(clear):
        if kinds[i] not in pairs:
            pairs.add(kinds[i])
            chosen.append(i)
    chosen = (chosen + [i for i in clear if i not in chosen])[:n]
    if len(chosen) < n:
        raise ValueError(f"only {len(chosen)} candidate goldens are clear of the decision boundaries")
    return pool[sorted(chosen)]


def config_from_args(args):
    return trainer.TrainConfig(
        d=args.d, dropout=args.dropout, alpha_init=args.alpha_init, lr=args.lr, weight_decay=args.weight_decay,
        batch_size=args.batch_size, epochs=args.epochs, scheduler=args.scheduler, patience=args.patience,
        tau=args.tau, lambda_offset=args.lambda_offset, lambda_contrastive=args.lambda_contrastive,
        lambda_orth=args.lambda_orth, lambda_mag=args.lambda_mag, lambda_inclass=args.lambda_inclass,
        lambda_crossclass=args.lambda_crossclass, delta_intra=args.delta_intra, delta_inter=args.delta_inter,
        orth_start=args.orth_start, orth_end=args.orth_end, orth_anneal_epochs=args.orth_anneal_epochs,
        intensity_offset=args.intensity_offset,
        scale_init=args.scale_init, es_probe_c=args.es_probe_c, lambda_distill=args.lambda_distill)


def add_training_arguments(parser):
    """Flags of every weight, margin and optimiser setting, with the paper's values as defaults."""
    d = trainer.TrainConfig()
    g = parser.add_argument_group("model and optimiser (paper §3.2, Appendix A.1, A.3)")
    g.add_argument("--d", type=int, default=d.d, help="output dimension (default %(default)s)")
    g.add_argument("--dropout", type=float, default=d.dropout, help="MLP dropout (default %(default)s)")
    g.add_argument("--alpha-init", type=float, default=d.alpha_init, help="initial gate α (default %(default)s)")
    g.add_argument("--lr", type=float, default=d.lr, help="AdamW learning rate (default %(default)s)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW weight decay (default %(default)s)")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help="batch size (default %(default)s)")
    g.add_argument("--epochs", type=int, default=d.epochs, help="most epochs (default %(default)s)")
    g.add_argument("--patience", type=int, default=d.patience,
                   help="early stopping: epochs without a better validation score (default %(default)s)")
    g.add_argument("--scheduler", choices=("cosine", "plateau"), default=d.scheduler,
                   help="cosine annealing over --epochs, or ReduceLROnPlateau on the validation score")
    g.add_argument("--es-probe-c", type=float, default=d.es_probe_c,
                   help="C of the per-epoch validation probe used for early stopping (default %(default)s)")
    g = parser.add_argument_group("objective (paper §3.3, Appendix A.3)")
    g.add_argument("--tau", type=float, default=d.tau, help="SupCon temperature τ (default %(default)s)")
    g.add_argument("--lambda-offset", type=float, default=d.lambda_offset, help="λ_offset (default %(default)s)")
    g.add_argument("--lambda-contrastive", type=float, default=d.lambda_contrastive,
                   help="λ_contrastive (default %(default)s)")
    g.add_argument("--lambda-orth", type=float, default=d.lambda_orth, help="λ_orth (default %(default)s)")
    g.add_argument("--lambda-mag", type=float, default=d.lambda_mag,
                   help="λ_mag, ordinal tasks only (default %(default)s)")
    g.add_argument("--lambda-inclass", type=float, default=d.lambda_inclass, help="λ_inclass (default %(default)s)")
    g.add_argument("--lambda-crossclass", type=float, default=d.lambda_crossclass,
                   help="λ_crossclass (default %(default)s)")
    g.add_argument("--delta-intra", type=float, default=d.delta_intra, help="δ_intra (default %(default)s)")
    g.add_argument("--delta-inter", type=float, default=d.delta_inter, help="δ_inter (default %(default)s)")
    g.add_argument("--orth-start", type=float, default=d.orth_start,
                   help="δ_orth at the first epoch (default %(default)s)")
    g.add_argument("--orth-end", type=float, default=d.orth_end,
                   help="δ_orth from the end of its annealing on (default %(default)s)")
    g.add_argument("--orth-anneal-epochs", type=int, default=d.orth_anneal_epochs,
                   help="epochs over which δ_orth falls linearly from --orth-start to --orth-end, a fixed "
                        "budget whatever early stopping does (default %(default)s)")
    g.add_argument("--intensity-offset", type=float, default=d.intensity_offset,
                   help="magnitude loss intensity I(y) = label index + this (default %(default)s: the 1-based rating)")
    g.add_argument("--lambda-distill", type=float, default=d.lambda_distill,
                   help="weight of the distillation term towards the raw-embedding probe's out-of-fold "
                        "probabilities; not in the paper (default %(default)s: off)")
    g.add_argument("--scale-init", type=float, default=None,
                   help="initial learnable λ_scale (default 1 / mean intensity)")


def add_fit_arguments(parser):
    parser.add_argument("--train", required=True, help="training embeddings, .npy float32 N x D")
    parser.add_argument("--train-labels", required=True,
                        help="training labels: TSV label<TAB>label_name<TAB>text, or one integer per line")
    parser.add_argument("--val", help="validation embeddings (default: carve --val-fraction from --train)")
    parser.add_argument("--val-labels", help="validation labels (with --val)")
    parser.add_argument("--val-fraction", type=float, default=0.15,
                        help="without --val: stratified fraction of --train held out for validation "
                             "(default %(default)s, seeded by --seed)")
    names = parser.add_mutually_exclusive_group(required=True)
    names.add_argument("--labels-file", help="class names, one per line, in index order")
    names.add_argument("--labels", help="comma-separated class names in index order")
    parser.add_argument("--task", required=True, choices=("binary", "multiclass", "ordinal"))
    parser.add_argument("--out", required=True, help="checkpoint directory to write, e.g. models/<name>/<version>")
    parser.add_argument("--select", action="store_true",
                        help="train the documented grid (see train/README.md) and keep the best on validation")
    parser.add_argument("--select-metric", help="validation metric for early stopping, --select and the probe's "
                                                "C: binary auc|f1 (default auc), multiclass weighted_f1|macro_f1 "
                                                "(default weighted_f1), ordinal qwk|weighted_f1|neg_mae (default qwk)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, initialisation, dropout, shuffles")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1; results are "
                                                               "reproducible for a fixed value)")
    parser.add_argument("--probe-c-grid", default=",".join(str(c) for c in probe.C_GRID),
                        help="C values tried for the logistic-regression head (default %(default)s)")
    parser.add_argument("--probe-c-criterion", choices=probe.CRITERIA, default="log_loss",
                        help="how the head's C is chosen on the validation rows: log_loss (default; the "
                             "probabilities' quality) or metric (the --select-metric)")
    g = parser.add_argument_group("calibration (fitted on the validation rows, folded into the head)")
    g.add_argument("--calibration", choices=calibration.METHODS, default="auto",
                   help="auto (default): Platt scaling for binary, temperature scaling otherwise; none: the "
                        "probe's own probabilities (the prior shift of --prevalence still applies)")
    g.add_argument("--prevalence", help="the class shares at deployment, which the served probabilities and the "
                                        "thresholds assume: binary P (the share of labels[1]), otherwise "
                                        "LABEL=SHARE for every label (default: the validation rows' shares)")
    parser.add_argument("--dsa-category", help="the STATEMENT_CATEGORY_* of the DSA Transparency Database the "
                                               "model's statements of reasons name (config.json `dsa`; default: "
                                               "none, pgcld then uses its default for the task)")
    g = parser.add_argument_group("decision policy (chosen on the validation rows)")
    g.add_argument("--block-precision", type=float,
                   help="binary: t_block = lowest threshold with this validation precision (default: best F1)")
    g.add_argument("--review-recall", type=float, default=0.9,
                   help="binary: t_review = highest threshold with this validation recall (default %(default)s)")
    g.add_argument("--action", action="append", default=[], metavar="LABEL=ACTION",
                   help="multiclass/ordinal: decision for a predicted label (allow, review, block); repeatable")
    g.add_argument("--min-confidence", type=float, default=0.0,
                   help="multiclass/ordinal: allow below this top probability becomes review (default 0)")
    parser.add_argument("--golden", type=int, default=GOLDEN_COUNT, help="golden entries (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no per-epoch progress on stderr")
    add_training_arguments(parser)


def resolve_metric(task, metric):
    metric = metric or DEFAULT_SELECTION[task]
    if metric not in SELECTION_METRICS[task]:
        raise ValueError(f"--select-metric {metric!r} is not one of {SELECTION_METRICS[task]} for {task}")
    return metric


def prepare_data(args, labels):
    """(X, y, Xv, yv, provenance) from the fit arguments."""
    X, y, train_prov = data.load_split(args.train, args.train_labels, labels)
    if args.val:
        if not args.val_labels:
            raise ValueError("--val needs --val-labels")
        Xv, yv, val_prov = data.load_split(args.val, args.val_labels, labels)
        split = {"protocol": "given validation split", "train": train_prov, "validation": val_prov}
    else:
        keep, held = data.stratified_split(y, args.val_fraction, args.seed)
        X, y, Xv, yv = X[keep], y[keep], X[held], y[held]
        split = {"protocol": (f"stratified {args.val_fraction:g} of the training file held out for validation "
                              f"(sklearn train_test_split, random_state={args.seed}); the model and the probe "
                              "see only the rest"),
                 "source": train_prov, "val_fraction": args.val_fraction, "split_seed": args.seed,
                 "train_rows": int(len(y)), "validation_rows": int(len(yv)),
                 "train_class_counts": np.bincount(y, minlength=len(labels)).tolist(),
                 "validation_class_counts": np.bincount(yv, minlength=len(labels)).tolist()}
    for name, labels_, rows in (("training", y, X), ("validation", yv, Xv)):
        missing = sorted(set(range(len(labels))) - set(labels_.tolist()))
        if missing:
            raise ValueError(f"the {name} rows have no example of {[labels[i] for i in missing]}")
    if X.shape[1] != Xv.shape[1]:
        raise ValueError(f"training embeddings have D = {X.shape[1]}, validation D = {Xv.shape[1]}")
    split["checks"] = data.check_splits({"training": X, "validation": Xv},
                                        lambda message: print(message, file=sys.stderr, flush=True))
    return X, y, Xv, yv, split


def run_fit(args, log=None):
    """The fit command; returns the exported config."""
    labels = data.read_label_names(args.labels_file, args.labels)
    if args.task == "binary" and len(labels) != 2:
        raise ValueError(f"a binary task has two labels, got {labels}")
    metric = resolve_metric(args.task, args.select_metric)
    grid = tuple(float(c) for c in args.probe_c_grid.split(","))
    X, y, Xv, yv, split = prepare_data(args, labels)
    cfg = config_from_args(args)
    K = len(labels)
    prevalence = calibration.parse_prevalence(args.prevalence, labels) if args.prevalence else None
    results, chosen = fit_pgcl(X, y, Xv, yv, task=args.task, K=K, cfg=cfg, seed=args.seed, metric=metric,
                               select=args.select, threads=args.threads, probe_grid=grid, log=log,
                               criterion=args.probe_c_criterion, calibration_method=args.calibration,
                               prevalence=prevalence)
    best = results[chosen]
    model = best["model"]
    cal = best["calibration"]

    # The exported forward must reproduce the calibrated head; checked on the validation rows.
    p_val = forward_probabilities(model, Xv)
    gap = float(np.max(np.abs(p_val - best["p_val"])))
    if gap > 1e-4:
        raise RuntimeError(f"the head differs from the calibrated probe by {gap:.2e}")

    # Figures at the deployment prevalence: the validation rows reweighted to it (no weights without one).
    weight = cal.validation_weights(yv)
    split_note = "validation rows (" + ("given --val" if args.val else f"{args.val_fraction:g} carve of --train") + ")"
    if args.task == "binary":
        policy = calibrate.threshold_policy(labels[1], yv, p_val[:, 1], args.block_precision, args.review_recall,
                                            split_note, weight, cal.prevalence[1] if prevalence is not None else None)
        threshold = policy["t_block"]
    else:
        policy = calibrate.label_map_policy(labels, args.action, args.min_confidence)
        threshold = None
    validation = task_metrics(args.task, yv, p_val, K, threshold)
    figures = calibration_metrics(yv, p_val, weight)
    uncalibrated = calibration_metrics(yv, probe.probabilities(best["probe"], trainer.embed(model, Xv), args.task),
                                       weight)
    validation["calibration"] = figures
    calibration_record = clean({
        "method": cal.method, "parameters": cal.parameters, "folded_into_head": True,
        "prevalence": dict(zip(labels, cal.prevalence)), "prevalence_source": cal.prevalence_source,
        "validation": {"rows": int(len(yv)), **figures,
                       "uncalibrated": {k: uncalibrated[k] for k in ("ece", "brier", "nll")}}})

    rng = np.random.default_rng(args.seed)
    goldens = choose_goldens(model, golden_pool(rng, X.shape[1], X, y, K), args.golden, labels, policy) \
        if args.golden else None
    training = {
        "kind": "pgcl-fit",
        "command": "python3 -m train fit" + (" --select" if args.select else ""),
        "software": {"torch": torch.__version__, "numpy": np.__version__, "sklearn": sklearn.__version__,
                     "threads": args.threads},
        "seed": args.seed,
        "data": split,
        "objective": cfg.to_dict(),
        "selection": {
            "metric": metric,
            "grid": "select" if args.select else "single run",
            "chosen_variant": best["name"],
            "variants": [{"name": r["name"], "overrides": r["overrides"], "also": r.get("also", []),
                          "validation_score": r["val_score"], "best_epoch": r["info"]["best_epoch"],
                          "epochs_run": r["info"]["epochs_run"], "probe_C": r["C"], "seconds": r["info"]["seconds"]}
                         for r in results],
        },
        "head": {"kind": "sklearn LogisticRegression (lbfgs) on the training rows' vectors, calibrated on the "
                         "validation rows and folded into the head",
                 "C": best["C"], "C_criterion": args.probe_c_criterion, "C_validation_scores": best["C_scores"],
                 "calibration": cal.to_dict()},
        "alpha": best["info"].get("alpha"),
        "validation": validation,
    }
    if "lambda_scale" in best["info"]:
        training["lambda_scale"] = best["info"]["lambda_scale"]
    config = export_checkpoint(model, args.out, args.task, labels, policy, golden_inputs=goldens,
                               training=clean(training), calibration=calibration_record,
                               dsa={"category": args.dsa_category} if args.dsa_category else None)
    return config, results, chosen


def run_fit_command(args):
    log = None if args.quiet else (lambda message: print(message, file=sys.stderr, flush=True))
    config, results, chosen = run_fit(args, log)
    summary = {"out": args.out, "weights_sha256": config["weights_sha256"],
               "chosen_variant": results[chosen]["name"], "validation": config["training"]["validation"],
               "decision_policy": {k: v for k, v in config["decision_policy"].items() if k != "source"},
               "calibration": config["calibration"]}
    print(json.dumps(summary))
