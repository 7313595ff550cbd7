"""`python3 -m train report`: the evaluation protocol of docs/train-report.md on the shared datasets.

Protocol per dataset (folder with labels.txt, train.{tsv,emb.npy}, val.{tsv,emb.npy}):
  * the shared `val` split is the HELD-OUT TEST: it is read once, after every choice is fixed;
  * a stratified validation split (--val-fraction, seeded) is carved from `train`; every choice (early
    stopping, the --select variant, the probe's C, the binary thresholds) uses it; the models and the
    probes are fitted on the remaining training rows only;
  * methods: raw embeddings + LR; PGCL + LR with the paper's defaults; PGCL + LR with --select; the
    SupCon projection-head baseline (paper Table 5) + LR, trained under the same protocol;
  * held-out figures, geometry diagnostics on the held-out vectors, paired-bootstrap intervals of PGCL
    minus each baseline.
PGCL training is exactly `python3 -m train fit --select --val-fraction F --seed S` (same code, same
arguments), so the chosen model's weights_sha256 can be compared with a checkpoint made by `fit`.
"""

import json
import os
import sys
import time

import numpy as np

from . import calibrate, data, probe, trainer
from .fit import clean, fit_pgcl, forward_probabilities, weights_sha256
from .metrics import (DEFAULT_SELECTION, geometry, macro_f1, mae, precision_recall_f1, quadratic_weighted_kappa,
                      roc_auc, paired_bootstrap, task_metrics, weighted_f1)

DATASETS = "toxic:binary,goemotions5:multiclass,amazon5:ordinal"
METHOD_TITLES = {"raw_lr": "raw embeddings + LR", "pgcl_default": "PGCL + LR (paper defaults)",
                 "pgcl_select": "PGCL + LR (--select)", "supcon": "SupCon projection head + LR (baseline)"}
COMPARISONS = (("pgcl_default", "raw_lr"), ("pgcl_default", "supcon"), ("pgcl_select", "raw_lr"),
               ("pgcl_select", "supcon"), ("pgcl_select", "pgcl_default"))


def bootstrap_metrics(task, K):
    """name -> (metric(y, values), which values: "pred" or "score"); the first is the main metric."""
    if task == "binary":
        return {"positive_f1": (lambda y, p: precision_recall_f1(y, p)[2], "pred"),
                "roc_auc": (roc_auc, "score"),
                "weighted_f1": (lambda y, p: weighted_f1(y, p, K), "pred")}
    if task == "multiclass":
        return {"weighted_f1": (lambda y, p: weighted_f1(y, p, K), "pred"),
                "macro_f1": (lambda y, p: macro_f1(y, p, K), "pred")}
    return {"weighted_f1": (lambda y, p: weighted_f1(y, p, K), "pred"),
            "qwk": (lambda y, p: quadratic_weighted_kappa(y, p, K), "pred"),
            "mae": (mae, "pred")}


def assess(task, K, metric, E, y, Ev, yv, Et, yt, lr=None, C=None, c_scores=None, grid=probe.C_GRID, pv=None,
           pt=None):
    """One method: probe (chosen on validation unless given), thresholds on validation, held-out figures.

    pv / pt: validation / held-out probabilities when they come from elsewhere (a PGCL module's own
    forward, whose head is the probe); otherwise the probe's predict_proba."""
    if lr is None:
        lr, C, c_scores = probe.select(E, y, Ev, yv, task, K, metric, grid)
    if pv is None:
        pv, pt = probe.probabilities(lr, Ev, task), probe.probabilities(lr, Et, task)
    out = {"probe_C": C, "probe_C_validation_scores": c_scores}
    threshold = None
    if task == "binary":
        t_review, threshold, source = calibrate.binary_thresholds(yv, pv[:, 1])
        out["thresholds"] = {"t_review": t_review, "t_block": threshold, "validation": source}
    out["validation"] = task_metrics(task, yv, pv, K, threshold)
    out["held_out"] = task_metrics(task, yt, pt, K, threshold)
    out["geometry_held_out"] = geometry(Et, yt)
    arrays = {"pred": (pt[:, 1] >= threshold).astype(np.int64) if task == "binary" else np.argmax(pt, axis=1),
              "score": pt[:, 1] if task == "binary" else None}
    return out, arrays


def run_dataset(name, task, args, log):
    folder = os.path.join(args.data_root, name)
    labels = data.read_label_names(os.path.join(folder, "labels.txt"))
    K = len(labels)
    X_all, y_all, train_prov = data.load_split(os.path.join(folder, "train.emb.npy"),
                                               os.path.join(folder, "train.tsv"), labels)
    keep, held = data.stratified_split(y_all, args.val_fraction, args.seed)
    X, y, Xv, yv = X_all[keep], y_all[keep], X_all[held], y_all[held]
    metric = DEFAULT_SELECTION[task]
    cfg = trainer.TrainConfig()
    started = time.time()

    # Every choice below is made on (Xv, yv); the held-out split is read only after they are fixed.
    log(f"[{name}] PGCL --select grid")
    results, chosen = fit_pgcl(X, y, Xv, yv, task=task, K=K, cfg=cfg, seed=args.seed, metric=metric, select=True,
                               threads=args.threads, log=log if args.verbose else None)
    log(f"[{name}] SupCon projection-head baseline")
    supcon_model, supcon_info = trainer.train(X, y, Xv, yv, task=task, K=K, cfg=cfg, seed=args.seed, metric=metric,
                                              kind="supcon", threads=args.threads,
                                              log=log if args.verbose else None)

    Xt, yt, test_prov = data.load_split(os.path.join(folder, "val.emb.npy"), os.path.join(folder, "val.tsv"), labels)
    log(f"[{name}] held-out evaluation")
    methods, arrays = {}, {}
    methods["raw_lr"], arrays["raw_lr"] = assess(task, K, metric, X, y, Xv, yv, Xt, yt)
    for key, r in (("pgcl_default", results[0]), ("pgcl_select", results[chosen])):
        E, Ev, Et = (trainer.embed(r["model"], Z) for Z in (X, Xv, Xt))
        # the checkpoint's own forward (head = probe), exactly what `fit` calibrates and `evaluate` scores
        methods[key], arrays[key] = assess(task, K, metric, E, y, Ev, yv, Et, yt, r["probe"], r["C"], r["C_scores"],
                                           pv=forward_probabilities(r["model"], Xv),
                                           pt=forward_probabilities(r["model"], Xt))
        methods[key].update({"variant": r["name"], "best_epoch": r["info"]["best_epoch"],
                             "epochs_run": r["info"]["epochs_run"], "train_seconds": r["info"]["seconds"],
                             "alpha": r["info"].get("alpha"), "weights_sha256": weights_sha256(r["model"])})
        if "lambda_scale" in r["info"]:
            methods[key]["lambda_scale"] = r["info"]["lambda_scale"]
    E, Ev, Et = (trainer.embed(supcon_model, Z) for Z in (X, Xv, Xt))
    methods["supcon"], arrays["supcon"] = assess(task, K, metric, E, y, Ev, yv, Et, yt)
    methods["supcon"].update({"best_epoch": supcon_info["best_epoch"], "epochs_run": supcon_info["epochs_run"],
                              "train_seconds": supcon_info["seconds"]})

    variants = []
    for r in results:
        pv, pt = forward_probabilities(r["model"], Xv), forward_probabilities(r["model"], Xt)
        threshold = calibrate.binary_thresholds(yv, pv[:, 1])[1] if task == "binary" else None
        held_out = task_metrics(task, yt, pt, K, threshold)
        variants.append({"name": r["name"], "also": r.get("also", []), "overrides": r["overrides"],
                         "validation_score": r["val_score"], "best_epoch": r["info"]["best_epoch"],
                         "epochs_run": r["info"]["epochs_run"], "probe_C": r["C"], "seconds": r["info"]["seconds"],
                         "held_out_diagnostic": {k: held_out[k] for k in held_out
                                                 if k in ("weighted_f1", "macro_f1", "roc_auc", "positive_f1",
                                                          "qwk", "mae")}})

    log(f"[{name}] paired bootstrap ({args.bootstrap} resamples)")
    bootstrap = []
    for a, b in COMPARISONS:
        for metric_name, (fn, kind) in bootstrap_metrics(task, K).items():
            result = paired_bootstrap(fn, yt, arrays[a][kind], arrays[b][kind], args.bootstrap, args.seed)
            bootstrap.append({"a": a, "b": b, "metric": metric_name, **result})

    return clean({
        "dataset": name, "task": task, "labels": labels, "selection_metric": metric,
        "data": {"train_file": train_prov, "held_out_file": test_prov,
                 "split": {"val_fraction": args.val_fraction, "seed": args.seed, "train_rows": int(len(y)),
                           "validation_rows": int(len(yv)), "held_out_rows": int(len(yt)),
                           "train_class_counts": np.bincount(y, minlength=K).tolist(),
                           "validation_class_counts": np.bincount(yv, minlength=K).tolist(),
                           "held_out_class_counts": np.bincount(yt, minlength=K).tolist()}},
        "select": {"chosen_variant": results[chosen]["name"], "variants": variants},
        "methods": methods, "bootstrap": bootstrap, "seconds": round(time.time() - started, 1),
        "objective_defaults": cfg.to_dict(),
    })


# ------------------------------------------------------------------------------------------- markdown

def f(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def render_dataset(r):
    task, labels = r["task"], r["labels"]
    split = r["data"]["split"]
    lines = [f"## {r['dataset']} ({task}, K = {len(labels)}: {', '.join(labels)})", "",
             f"Rows: train {split['train_rows']} {split['train_class_counts']}, validation (carved) "
             f"{split['validation_rows']} {split['validation_class_counts']}, held-out (shared `val`) "
             f"{split['held_out_rows']} {split['held_out_class_counts']}. Selection metric on validation: "
             f"`{r['selection_metric']}`. --select chose **{r['select']['chosen_variant']}**.", ""]
    head = ["method", "val " + r["selection_metric"], "weighted F1", "macro F1"]
    if task == "binary":
        head += ["ROC AUC", "pos. F1 @ t_block", "pos. P / R", "t_block (val)"]
    if task == "ordinal":
        head += ["MAE", "QWK", "severe (error ≥ 2 levels)"]
    head += ["W/B", "silhouette", "10-NN overlap", "GQI"]
    lines += ["Held-out figures (shared `val`), probe fitted on the training rows, thresholds and C from validation:", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, title in METHOD_TITLES.items():
        m = r["methods"][key]
        t, g = m["held_out"], m["geometry_held_out"]
        name = title + (f" [{m['variant']}]" if key == "pgcl_select" else "")
        vscore = r["select"]["variants"][0]["validation_score"] if key == "pgcl_default" else None
        if key == "pgcl_select":
            vscore = next(v["validation_score"] for v in r["select"]["variants"] if v["name"] == m["variant"])
        if vscore is None:
            vscore = m["probe_C_validation_scores"][repr(float(m["probe_C"]))]
        row = [name, f(vscore), f(t["weighted_f1"]), f(t["macro_f1"])]
        if task == "binary":
            row += [f(t["roc_auc"]), f(t["positive_f1"]), f"{f(t['positive_precision'])} / {f(t['positive_recall'])}",
                    f(t["threshold"], 4)]
        if task == "ordinal":
            row += [f(t["mae"]), f(t["qwk"]), f(t["severe_error_rate"])]
        row += [f(g["within_between_ratio"], 3), f(g["silhouette"]), f(g["class_overlap_10nn"]), f(g["gqi"], 4)]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Per-class held-out F1:", "", "| method | " + " | ".join(labels) + " |",
              "|---|" + "---|" * len(labels)]
    for key, title in METHOD_TITLES.items():
        lines.append(f"| {title} | " + " | ".join(f(v) for v in r["methods"][key]["held_out"]["per_class_f1"]) + " |")
    lines += ["", "Paired bootstrap on the held-out rows (difference A − B, 95 % percentile interval, "
              f"{r['bootstrap'][0]['resamples']} resamples, seed {r['bootstrap'][0]['seed']}; "
              "for MAE lower is better):", "",
              "| A − B | metric | difference | 95 % CI | share of resamples ≤ 0 |", "|---|---|---|---|---|"]
    for b in r["bootstrap"]:
        lines.append(f"| {b['a']} − {b['b']} | {b['metric']} | {b['difference']:+.4f} | "
                     f"[{b['ci_low']:+.4f}, {b['ci_high']:+.4f}] | {b['fraction_le_0']:.3f} |")
    lines += ["", "--select grid (validation score decides; held-out figures are a diagnostic only, never used "
              "to choose):", "", "| variant | overrides | val " + r["selection_metric"] +
              " | best epoch / run | probe C | held-out weighted F1 | held-out main |", "|---|---|---|---|---|---|---|"]
    main = {"binary": "positive_f1", "multiclass": "macro_f1", "ordinal": "qwk"}[task]
    for v in r["select"]["variants"]:
        name = v["name"] + (f" (= {', '.join(v['also'])})" if v["also"] else "")
        overrides = ", ".join(f"{k}={val}" for k, val in v["overrides"].items()) or "–"
        lines.append(f"| {name} | {overrides} | {f(v['validation_score'], 4)} | {v['best_epoch']} / {v['epochs_run']} "
                     f"| {v['probe_C']} | {f(v['held_out_diagnostic']['weighted_f1'])} | "
                     f"{main} {f(v['held_out_diagnostic'][main])} |")
    lines.append("")
    return lines


def render(report, reading):
    lines = ["# PGCL trainer: evaluation report", "",
             "Generated by `python3 -m train report` (train/report.py); the figures are in "
             "`docs/train-report.json`. Commands and environment are listed at the end.", "",
             "## Protocol", ""]
    lines += [f"* {p}" for p in report["protocol"]]
    lines.append("")
    if reading:
        lines += [reading.rstrip(), ""]
    for r in report["datasets"]:
        lines += render_dataset(r)
    lines += ["## Reproduction", "", "```sh", report["command"], "```", "",
              f"Environment: {report['environment']}. Wall time: " +
              ", ".join(f"{r['dataset']} {r['seconds']:.0f} s" for r in report["datasets"]) + ".", ""]
    return "\n".join(lines)


def protocol(args):
    return [
        "The shared folder has no test split (it is held out elsewhere). The shared **`val` split is used as the "
        "held-out test**: it is read once, after every choice is fixed, and never used to choose anything.",
        f"A **stratified {args.val_fraction:g} validation split is carved from `train`** "
        f"(sklearn `train_test_split`, `random_state={args.seed}`). It alone drives early stopping, the --select "
        "variant, the probe's C (grid 0.01 … 100) and the binary thresholds. Models and probes are fitted on the "
        "remaining training rows.",
        "Every method ends in the same probe: scikit-learn LogisticRegression (lbfgs, multinomial for K > 2) on the "
        "training rows' vectors. Binary predictions use the validation-chosen t_block (best positive-class F1 on "
        "validation); multiclass/ordinal predictions are the argmax.",
        "PGCL defaults: the paper's settings (see train/README.md), one run, seed "
        f"{args.seed}. PGCL --select: the documented 7-variant grid, best validation score. Baseline: a SupCon "
        "projection head (the same MLP D→512→256→64 + L2 normalisation, class-weighted SupCon τ = 0.1) trained with "
        "the same optimiser, schedule, early stopping and probe.",
        "Geometry diagnostics are computed on the held-out vectors (raw: the 1024-d embeddings; others: the 64-d "
        "unit vectors): within/between variance ratio, silhouette (Euclidean), mean share of each row's 10 nearest "
        "neighbours with another label, GQI = (1 − W/B) × silhouette × (1 − overlap).",
        f"Paired bootstrap: {args.bootstrap} resamples of the held-out rows (seed {args.seed}); the same resampled "
        "rows score both methods; percentile 95 % intervals of the difference.",
        "One seed per method: the intervals cover held-out sampling, not training-seed variance.",
        "Data: the stand-in LSA embeddings of /work/shared/data (TF-IDF + SVD, see its README), not a neural "
        "encoder; the amazon5 (ordinal) model exists only inside this report and is not shipped.",
    ]


def run_report_command(args):
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    os.makedirs(args.work_dir, exist_ok=True)
    datasets = []
    for spec in args.datasets.split(","):
        name, _, task = spec.partition(":")
        cache = os.path.join(args.work_dir, f"{name}.json")
        if args.render_only:
            with open(cache, encoding="utf-8") as f_:
                datasets.append(json.load(f_))
            continue
        result = run_dataset(name, task, args, log)
        with open(cache, "w", encoding="utf-8") as f_:
            json.dump(result, f_, indent=1, allow_nan=False)
        datasets.append(result)
        log(f"[{name}] done in {result['seconds']} s")
    import sklearn
    import torch
    report = {"protocol": protocol(args),
              "command": args.command_line or ("python3 -m train report " + " ".join(sys.argv[2:])),
              "environment": f"torch {torch.__version__}, numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
                             f"{args.threads} torch thread(s), CPU",
              "datasets": datasets}
    reading = None
    if args.reading:
        with open(args.reading, encoding="utf-8") as f_:
            reading = f_.read()
    if args.out_json:
        with open(args.out_json, "w", encoding="utf-8") as f_:
            json.dump(report, f_, indent=1, allow_nan=False)
            f_.write("\n")
    if args.out_md:
        with open(args.out_md, "w", encoding="utf-8") as f_:
            f_.write(render(report, reading))
