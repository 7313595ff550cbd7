"""`python3 -m train report`: the evaluation protocol of docs/train-report.md on the shared datasets.

Protocol per dataset (folder with labels.txt, train.{tsv,emb.npy}, val.{tsv,emb.npy}):
  * the shared `val` split is the HELD-OUT TEST: it is read once, after every choice is fixed;
  * a stratified validation split (--val-fraction, seeded) is carved from `train`; every choice (early
    stopping, the --select variant, the probe's C, its calibration, the binary thresholds) uses it; the
    models and the probes are fitted on the remaining training rows only;
  * the deployment prevalence of each dataset (PREVALENCE: what its data README states) is given to
    every method's calibration and thresholds, as `fit --prevalence` does;
  * methods: raw embeddings + LR; PGCL + LR with the paper's defaults (several seeds); PGCL + LR with
    --select; the ablations α = 0 and α = 1; the SupCon projection-head baseline (paper Table 5) and a
    cross-entropy MLP baseline, each + LR and over the same seeds;
  * held-out figures with calibration (ECE, Brier, NLL, reliability bins), geometry diagnostics on the
    held-out vectors, PGCL's mapping-space diagnostics, paired-bootstrap intervals of PGCL minus each
    baseline (seed --seed), mean ± sd over the seeds.
PGCL training is exactly `python3 -m train fit --select --val-fraction F --seed S --prevalence P` (same
code, same arguments), so the chosen model's weights_sha256 can be compared with a checkpoint made by
`fit`.
"""

import json
import os
import sys
import time

import numpy as np

from . import calibrate, calibration, data, figures, trainer
from .fit import calibrated_head, clean, fit_pgcl, forward_probabilities, weights_sha256
from .metrics import (DEFAULT_SELECTION, calibration_metrics, geometry, macro_f1, mae, precision_recall_f1,
                      quadratic_weighted_kappa, reliability_bins, roc_auc, paired_bootstrap, task_metrics, weighted_f1)

DATASETS = "toxic:binary,goemotions5:multiclass,amazon5:ordinal"
# The deployment prevalence each dataset's README states (toxic: held-out splits at 1 toxic : 10 clean
# "by design"); the others: none stated, so the validation rows' class shares are assumed.
PREVALENCE = {"toxic": "0.0909090909090909"}
METHOD_TITLES = {"raw_lr": "raw embeddings + LR", "pgcl_default": "PGCL + LR (paper defaults)",
                 "pgcl_select": "PGCL + LR (--select)", "pgcl_alpha0": "PGCL, α = 0 (prototype stream only)",
                 "pgcl_alpha1": "PGCL, α = 1 (semantic stream only)",
                 "supcon": "SupCon projection head + LR (baseline)", "ce_mlp": "cross-entropy MLP + LR (baseline)"}
SEEDED = ("pgcl_default", "supcon", "ce_mlp")  # trained once per --seeds value
COMPARISONS = (("pgcl_default", "raw_lr"), ("pgcl_default", "supcon"), ("pgcl_default", "ce_mlp"),
               ("pgcl_select", "raw_lr"), ("pgcl_select", "supcon"), ("pgcl_select", "pgcl_default"))


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


def assess(task, K, metric, E, y, Ev, yv, Et, yt, head=None, prevalence=None, pv=None, pt=None):
    """One method: its calibrated head (fit.calibrated_head on (E, y) and (Ev, yv), unless given),
    thresholds on validation at the prevalence, held-out figures with calibration and reliability bins.

    pv / pt: validation / held-out probabilities when they come from elsewhere (a PGCL module's own
    forward, whose head is the calibrated probe); otherwise the folded head's on Ev / Et."""
    if head is None:
        head = calibrated_head(E, y, Ev, yv, task=task, K=K, metric=metric, prevalence=prevalence)
    if pv is None:
        pv = head["p_val"]
        pt = calibration.probabilities_from_logits(calibration.head_logits(head["coef"], head["intercept"], Et))
    cal = head["calibration"]
    weight = cal.validation_weights(yv)
    out = {"probe_C": head["C"], "probe_C_validation_scores": head["C_scores"], "validation_score": head["val_score"],
           "calibration": cal.to_dict()}
    threshold = None
    if task == "binary":
        t_review, threshold, source = calibrate.binary_thresholds(yv, pv[:, 1], weight=weight)
        out["thresholds"] = {"t_review": t_review, "t_block": threshold, "validation": source}
    out["validation"] = task_metrics(task, yv, pv, K, threshold)
    out["validation"]["calibration"] = calibration_metrics(yv, pv, weight)
    out["held_out"] = task_metrics(task, yt, pt, K, threshold)
    out["held_out"]["calibration"] = calibration_metrics(yt, pt)
    out["held_out"]["reliability"] = reliability_bins(yt, pt)
    uncalibrated = head["probe"].predict_proba(np.asarray(Et, dtype=np.float64))
    out["held_out"]["uncalibrated"] = {**calibration_metrics(yt, uncalibrated),
                                      "reliability": reliability_bins(yt, uncalibrated)}
    out["geometry_held_out"] = geometry(Et, yt)
    arrays = {"pred": (pt[:, 1] >= threshold).astype(np.int64) if task == "binary" else np.argmax(pt, axis=1),
              "score": pt[:, 1] if task == "binary" else None}
    return out, arrays


def assess_model(model, info, task, K, metric, X, y, Xv, yv, Xt, yt, prevalence, cfg=None):
    """assess() of a trained extractor (PGCL or a baseline): its vectors, a calibrated head on them; for
    PGCL also the mapping-space diagnostics on the held-out rows."""
    E, Ev, Et = (trainer.embed(model, Z) for Z in (X, Xv, Xt))
    out, arrays = assess(task, K, metric, E, y, Ev, yv, Et, yt, prevalence=prevalence)
    out.update({"best_epoch": info["best_epoch"], "epochs_run": info["epochs_run"], "train_seconds": info["seconds"]})
    if "alpha" in info:
        out["alpha"] = info["alpha"]
        out["mapping_held_out"] = trainer.mapping_diagnostics(model, Xt, yt, cfg.delta_intra, cfg.delta_inter)
    return out, arrays


def seed_summary(runs, task):
    """Mean and sample sd over seeds of each method's main held-out figures."""
    keys = ["weighted_f1", "macro_f1"] + (["roc_auc", "positive_f1", "label_weighted_f1"] if task == "binary" else []) \
        + (["qwk", "mae"] if task == "ordinal" else [])
    out = {}
    for key in keys + ["ece", "brier", "nll"]:
        values = [r["held_out"]["calibration"][key] if key in ("ece", "brier", "nll") else r["held_out"][key]
                  for r in runs]
        out[key] = {"mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
                    "values": values}
    return out


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
    prevalence = calibration.parse_prevalence(PREVALENCE[name], labels) if name in PREVALENCE else None
    seeds = [int(v) for v in str(args.seeds).split(",")]
    assert seeds[0] == args.seed, "--seeds must start with --seed (the run the checkpoints and bootstrap use)"
    started = time.time()

    # Every choice below is made on (Xv, yv); the held-out split is read only after they are fixed.
    log(f"[{name}] PGCL --select grid")
    results, chosen = fit_pgcl(X, y, Xv, yv, task=task, K=K, cfg=cfg, seed=args.seed, metric=metric, select=True,
                               threads=args.threads, log=log if args.verbose else None, prevalence=prevalence)
    trained = {}  # (method, seed) -> (model, info)
    for key, kind, overrides in (("pgcl_default", "pgcl", {}), ("supcon", "supcon", {}), ("ce_mlp", "ce", {}),
                                 ("pgcl_alpha0", "pgcl", {"alpha_fixed": 0.0}),
                                 ("pgcl_alpha1", "pgcl", {"alpha_fixed": 1.0})):
        for seed in (seeds if key in SEEDED else seeds[:1]):
            if key == "pgcl_default" and seed == args.seed:
                trained[key, seed] = (results[0]["model"], results[0]["info"])
                continue
            log(f"[{name}] {key} seed {seed}")
            trained[key, seed] = trainer.train(X, y, Xv, yv, task=task, K=K, cfg=cfg.replace(**overrides), seed=seed,
                                               metric=metric, kind=kind, threads=args.threads,
                                               log=log if args.verbose else None)

    Xt, yt, test_prov = data.load_split(os.path.join(folder, "val.emb.npy"), os.path.join(folder, "val.tsv"), labels)
    warnings = data.check_splits({"train": X_all, "held-out": Xt}, log)
    log(f"[{name}] held-out evaluation")
    methods, arrays, seeded = {}, {}, {key: [] for key in SEEDED}
    methods["raw_lr"], arrays["raw_lr"] = assess(task, K, metric, X, y, Xv, yv, Xt, yt, prevalence=prevalence)
    r = results[chosen]
    E, Ev, Et = (trainer.embed(r["model"], Z) for Z in (X, Xv, Xt))
    # the checkpoint's own forward (head = the calibrated probe), exactly what `fit` exports and `evaluate` scores
    methods["pgcl_select"], arrays["pgcl_select"] = assess(task, K, metric, E, y, Ev, yv, Et, yt, head=r,
                                                           pv=forward_probabilities(r["model"], Xv),
                                                           pt=forward_probabilities(r["model"], Xt))
    methods["pgcl_select"].update({"variant": r["name"], "best_epoch": r["info"]["best_epoch"],
                                   "epochs_run": r["info"]["epochs_run"], "train_seconds": r["info"]["seconds"],
                                   "alpha": r["info"].get("alpha"), "weights_sha256": weights_sha256(r["model"]),
                                   "mapping_held_out": trainer.mapping_diagnostics(r["model"], Xt, yt, r["config"].delta_intra,
                                                                                   r["config"].delta_inter)})
    if "lambda_scale" in r["info"]:
        methods["pgcl_select"]["lambda_scale"] = r["info"]["lambda_scale"]
    for (key, seed), (model, info) in trained.items():
        out, arr = assess_model(model, info, task, K, metric, X, y, Xv, yv, Xt, yt, prevalence, cfg)
        out["seed"] = seed
        if key in SEEDED:
            seeded[key].append(out)
        if seed == args.seed:
            methods[key], arrays[key] = out, arr
            if key == "pgcl_default":
                methods[key].update({"variant": results[0]["name"], "weights_sha256": weights_sha256(model)})

    variants = []
    for v in results:
        pv, pt = forward_probabilities(v["model"], Xv), forward_probabilities(v["model"], Xt)
        cal = v["calibration"]
        weight = cal.validation_weights(yv)
        threshold = calibrate.binary_thresholds(yv, pv[:, 1], weight=weight)[1] if task == "binary" else None
        held_out = task_metrics(task, yt, pt, K, threshold)
        held_out["ece"] = calibration_metrics(yt, pt)["ece"]
        variants.append({"name": v["name"], "also": v.get("also", []), "overrides": v["overrides"],
                         "validation_score": v["val_score"], "best_epoch": v["info"]["best_epoch"],
                         "epochs_run": v["info"]["epochs_run"], "probe_C": v["C"], "seconds": v["info"]["seconds"],
                         "held_out_diagnostic": {k: held_out[k] for k in held_out
                                                 if k in ("weighted_f1", "macro_f1", "roc_auc", "positive_f1",
                                                          "qwk", "mae", "ece")}})

    log(f"[{name}] paired bootstrap ({args.bootstrap} resamples)")
    bootstrap = []
    for a, b in COMPARISONS:
        for metric_name, (fn, kind) in bootstrap_metrics(task, K).items():
            result = paired_bootstrap(fn, yt, arrays[a][kind], arrays[b][kind], args.bootstrap, args.seed)
            bootstrap.append({"a": a, "b": b, "metric": metric_name, **result})

    return clean({
        "dataset": name, "task": task, "labels": labels, "selection_metric": metric,
        "prevalence": None if prevalence is None else dict(zip(labels, prevalence.tolist())),
        "data": {"train_file": train_prov, "held_out_file": test_prov, "checks": warnings,
                 "split": {"val_fraction": args.val_fraction, "seed": args.seed, "train_rows": int(len(y)),
                           "validation_rows": int(len(yv)), "held_out_rows": int(len(yt)),
                           "train_class_counts": np.bincount(y, minlength=K).tolist(),
                           "validation_class_counts": np.bincount(yv, minlength=K).tolist(),
                           "held_out_class_counts": np.bincount(yt, minlength=K).tolist()}},
        "select": {"chosen_variant": results[chosen]["name"], "variants": variants},
        "methods": methods, "seeds": seeds,
        "seed_summary": {key: seed_summary(runs, task) for key, runs in seeded.items()},
        "bootstrap": bootstrap, "seconds": round(time.time() - started, 1),
        "objective_defaults": cfg.to_dict(),
    })


# ------------------------------------------------------------------------------------------- markdown

def f(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def pm(summary, key, digits=3):
    """mean ± sd of a seed_summary entry."""
    v = summary[key]
    return f(v["mean"], digits) + ("" if v["sd"] is None else f" ± {f(v['sd'], digits)}")


def render_dataset(r, figure=None):
    task, labels = r["task"], r["labels"]
    split = r["data"]["split"]
    prevalence = r.get("prevalence")
    lines = [f"## {r['dataset']} ({task}, K = {len(labels)}: {', '.join(labels)})", "",
             f"Rows: train {split['train_rows']} {split['train_class_counts']}, validation (carved) "
             f"{split['validation_rows']} {split['validation_class_counts']}, held-out (shared `val`) "
             f"{split['held_out_rows']} {split['held_out_class_counts']}. Selection metric on validation: "
             f"`{r['selection_metric']}`. --select chose **{r['select']['chosen_variant']}**. Deployment prevalence "
             "given to calibration and thresholds: " +
             (", ".join(f"{k} {v:.4f}" for k, v in prevalence.items()) if prevalence else
              "none stated (the validation rows' class shares)") + ".", ""]
    if r["data"].get("checks"):
        lines += ["Data checks: " + "; ".join(r["data"]["checks"]) + ".", ""]
    head = ["method", "val " + r["selection_metric"], "weighted F1", "macro F1"]
    if task == "binary":
        head += ["label weighted F1", "ROC AUC", "pos. F1 @ t_block", "pos. P / R", "t_block (val)"]
    if task == "ordinal":
        head += ["MAE", "QWK", "severe (error ≥ 2 levels)"]
    head += ["W/B", "silhouette", "10-NN overlap", "GQI"]
    lines += ["Held-out figures (shared `val`), seed " + str(r["seeds"][0]) + "; calibrated probe fitted on the "
              "training rows, C, calibration and thresholds from validation:", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, title in METHOD_TITLES.items():
        m = r["methods"][key]
        t, g = m["held_out"], m["geometry_held_out"]
        name = title + (f" [{m['variant']}]" if key == "pgcl_select" else "")
        row = [name, f(m["validation_score"]), f(t["weighted_f1"]), f(t["macro_f1"])]
        if task == "binary":
            row += [f(t["label_weighted_f1"]), f(t["roc_auc"]), f(t["positive_f1"]),
                    f"{f(t['positive_precision'])} / {f(t['positive_recall'])}", f(t["threshold"], 4)]
        if task == "ordinal":
            row += [f(t["mae"]), f(t["qwk"]), f(t["severe_error_rate"])]
        row += [f(g["within_between_ratio"], 3), f(g["silhouette"]), f(g["class_overlap_10nn"]), f(g["gqi"], 4)]
        lines.append("| " + " | ".join(row) + " |")

    head = ["method", "ECE held-out (uncalibrated → calibrated)", "Brier", "NLL", "ECE validation"]
    if task == "binary":
        head += ["precision @ t_block: validation → held-out"]
    lines += ["", f"Calibration ({r['methods']['raw_lr']['held_out']['calibration']['ece_bins']}-bin top-label ECE, "
              "Brier score, NLL; validation figures at the deployment prevalence):", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, title in METHOD_TITLES.items():
        m = r["methods"][key]
        c, u = m["held_out"]["calibration"], m["held_out"]["uncalibrated"]
        row = [title, f"{f(u['ece'])} → {f(c['ece'])}", f(c["brier"]), f(c["nll"]), f(m["validation"]["calibration"]["ece"])]
        if task == "binary":
            row.append(f"{f(m['thresholds']['validation']['at_t_block']['precision'])} → "
                       f"{f(m['held_out']['positive_precision'])}")
        lines.append("| " + " | ".join(row) + " |")
    if figure:
        lines += ["", f"![reliability diagram, {r['dataset']}]({figure})", ""]

    main = {"binary": "positive_f1", "multiclass": "macro_f1", "ordinal": "qwk"}[task]
    lines += ["", f"Over seeds {', '.join(map(str, r['seeds']))} (mean ± sample sd of the held-out figures; "
              "raw LR has no seed):", "", f"| method | weighted F1 | {main} | ECE | NLL |", "|---|---|---|---|---|"]
    for key, summary in r["seed_summary"].items():
        lines.append(f"| {METHOD_TITLES[key]} | {pm(summary, 'weighted_f1')} | {pm(summary, main)} | "
                     f"{pm(summary, 'ece')} | {pm(summary, 'nll')} |")

    lines += ["", "Mapping space of the PGCL models (held-out rows; distances to the raw prototypes; variances "
              "across rows of the two fused parts):", "",
              "| model | α | within δ_intra | nearest wrong ≥ δ_inter | attention entropy / log K | var(α·s) | "
              "var((1 − α)·m) |", "|---|---|---|---|---|---|---|"]
    for key in ("pgcl_default", "pgcl_select", "pgcl_alpha0", "pgcl_alpha1"):
        d = r["methods"][key]["mapping_held_out"]
        lines.append(f"| {METHOD_TITLES[key]} | {f(d['alpha'])} | {f(d['within_delta_intra'])} | "
                     f"{f(d['inter_margin_met'])} | {f(d['attention_entropy'])} | {d['variance_alpha_s']:.3g} | "
                     f"{d['variance_one_minus_alpha_m']:.3g} |")

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
              " | best epoch / run | probe C | held-out weighted F1 | held-out main | held-out ECE |",
              "|---|---|---|---|---|---|---|---|"]
    for v in r["select"]["variants"]:
        name = v["name"] + (f" (= {', '.join(v['also'])})" if v["also"] else "")
        overrides = ", ".join(f"{k}={val}" for k, val in v["overrides"].items()) or "–"
        lines.append(f"| {name} | {overrides} | {f(v['validation_score'], 4)} | {v['best_epoch']} / {v['epochs_run']} "
                     f"| {v['probe_C']} | {f(v['held_out_diagnostic']['weighted_f1'])} | "
                     f"{main} {f(v['held_out_diagnostic'][main])} | {f(v['held_out_diagnostic']['ece'])} |")
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
        lines += render_dataset(r, report.get("figures", {}).get(r["dataset"]))
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
        "variant, the probe's C (grid 0.01 … 100, lowest validation log-loss), the probe's calibration and the "
        "binary thresholds. Models and probes are fitted on the remaining training rows.",
        "Every method ends in the same head: scikit-learn LogisticRegression (lbfgs, multinomial for K > 2) on the "
        "training rows' vectors, then calibrated on validation (Platt scaling for binary, temperature scaling "
        "otherwise) and moved to the deployment prevalence by a prior shift (toxic: 1 toxic : 10 clean, the ratio "
        "its data README gives its held-out splits; the others state none, so their validation shares are kept). "
        "Binary thresholds are chosen on validation rows reweighted to that prevalence: t_block = best "
        "positive-class F1. Binary predictions use t_block (positive F1, P / R, weighted F1) and the label itself "
        "(label weighted F1: the argmax, what pgcld returns); multiclass/ordinal predictions are the argmax.",
        "Calibration: top-label ECE with 15 equal-width bins, Brier score (binary: of P(labels[1]); K > 2: summed "
        "over classes), NLL. Held-out figures are unweighted (the held-out split is drawn at the deployment "
        "prevalence); validation figures are weighted to it. \"Uncalibrated\" is the probe's own predict_proba.",
        f"PGCL defaults: the paper's settings (see train/README.md), seeds {args.seeds}. PGCL --select: the "
        f"documented grid of 8 trained variants (train/README.md), seed {args.seed}, best validation score; one "
        "variant, `distill_shallow`, is not in the paper: a one-layer semantic stream without the orthogonality "
        "term, trained with an added cross-entropy towards the out-of-fold probabilities of the raw-embedding "
        f"probe (λ_distill = 10). Ablations (seed {args.seed}): α held "
        "at 0 (e = m / ‖m‖, prototype stream only) and at 1 (e = s / ‖s‖). Baselines, seeds as PGCL defaults: a "
        "SupCon projection head (the same MLP D→512→256→64 + L2 normalisation, class-weighted SupCon τ = 0.1) and "
        "a cross-entropy MLP (the same MLP, a linear classifier on s trained with class-weighted cross-entropy; "
        "its s / ‖s‖ go to the probe), trained with the same optimiser, schedule, early stopping and head.",
        "Geometry diagnostics are computed on the held-out vectors (raw: the 1024-d embeddings; others: the 64-d "
        "unit vectors): W/B = mean squared distance of a row to its class mean over the count-weighted mean "
        "squared distance of the class means to the overall mean (within over between, so lower is better), "
        "silhouette (Euclidean), mean share of each row's 10 nearest neighbours with another label, the paper's "
        "GQI = (1 − W/B) × silhouette × (1 − overlap). When W/B > 1 and the silhouette is negative, both factors "
        "are negative and GQI is positive: the worst geometries can outrank good ones, so GQI is not used to rank.",
        "Mapping-space diagnostics (PGCL, held-out rows): share of rows whose prototype mapping m lies within "
        "δ_intra of its own prototype, share whose nearest wrong prototype is at least δ_inter away, mean "
        "attention entropy over log K, and the variance across rows of α·s and of (1 − α)·m.",
        f"Paired bootstrap: {args.bootstrap} resamples of the held-out rows (seed {args.seed}); the same resampled "
        "rows score both methods; percentile 95 % intervals of the difference. The intervals cover held-out "
        "sampling; the seed table covers training-seed variance.",
        "Data: the stand-in LSA embeddings of /work/shared/data (TF-IDF + SVD, see its README), not a neural "
        "encoder; the amazon5 (ordinal) model exists only inside this report and is not shipped. Data checks "
        "(all-zero rows, rows not of unit norm, rows identical across train and held-out) are listed per dataset.",
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
    figure_links = {}
    if args.figures_dir:
        os.makedirs(args.figures_dir, exist_ok=True)
        for r in datasets:
            path = os.path.join(args.figures_dir, f"reliability-{r['dataset']}.svg")
            series = {"raw LR (calibrated)": r["methods"]["raw_lr"]["held_out"]["reliability"],
                      "PGCL --select (uncalibrated)": r["methods"]["pgcl_select"]["held_out"]["uncalibrated"]["reliability"],
                      "PGCL --select (calibrated)": r["methods"]["pgcl_select"]["held_out"]["reliability"]}
            figures.write_reliability_svg(path, f"{r['dataset']}: held-out reliability (top label)", series)
            if args.out_md:
                figure_links[r["dataset"]] = os.path.relpath(path, os.path.dirname(os.path.abspath(args.out_md)))
    report = {"protocol": protocol(args), "figures": figure_links,
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
