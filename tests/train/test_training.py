"""Training on synthetic clustered data: PGCL + LR beats raw-embedding LR where it should, and two runs
under one seed give identical weights."""

import unittest

import common
import numpy as np
import torch

from train import probe, trainer
from train.fit import SELECT_GRID, fit_pgcl
from train.metrics import geometry, macro_f1, roc_auc

CFG = trainer.TrainConfig(epochs=25, patience=25, lr=1e-3)


class BeatsRawLR(unittest.TestCase):
    """Each class is two antipodal clusters (±u_k): a linear probe on the raw embeddings cannot separate
    them (every class mean is ~0), while PGCL's nonlinear map can cluster each class around its prototype.
    The margin is wide by construction (raw ~ chance, PGCL near perfect), so the test is not fragile."""

    def test_binary_auc_and_geometry(self):
        X, y = common.xor_clusters(200, D=32, noise=0.25, seed=1, classes=2)
        Xtr, ytr, Xv, yv, Xt, yt = X[:480], y[:480], X[480:640], y[480:640], X[640:], y[640:]
        raw = probe.fit(Xtr, ytr)
        raw_auc = roc_auc(yt, probe.probabilities(raw, Xt, "binary")[:, 1])
        model, info = trainer.train(Xtr, ytr, Xv, yv, task="binary", K=2, cfg=CFG, seed=0, metric="auc")
        E, Et = trainer.embed(model, Xtr), trainer.embed(model, Xt)
        pgcl = probe.fit(E, ytr)
        pgcl_auc = roc_auc(yt, probe.probabilities(pgcl, Et, "binary")[:, 1])
        self.assertLess(raw_auc, 0.7)
        self.assertGreater(pgcl_auc, 0.95)
        self.assertGreater(pgcl_auc - raw_auc, 0.25)
        self.assertGreater(geometry(Et, yt)["gqi"], geometry(Xt, yt)["gqi"])
        self.assertEqual(tuple(E.shape), (480, 64))
        self.assertTrue(np.allclose(np.linalg.norm(E, axis=1), 1, atol=1e-5))

    def test_multiclass_macro_f1(self):
        X, y = common.xor_clusters(120, D=32, noise=0.2, seed=3, classes=3)
        Xtr, ytr, Xv, yv, Xt, yt = X[:480], y[:480], X[480:600], y[480:600], X[600:], y[600:]
        raw = probe.fit(Xtr, ytr)
        raw_f1 = macro_f1(yt, np.argmax(probe.probabilities(raw, Xt, "multiclass"), axis=1), 3)
        model, _ = trainer.train(Xtr, ytr, Xv, yv, task="multiclass", K=3, cfg=CFG, seed=0, metric="weighted_f1")
        pgcl = probe.fit(trainer.embed(model, Xtr), ytr)
        pgcl_f1 = macro_f1(yt, np.argmax(probe.probabilities(pgcl, trainer.embed(model, Xt), "multiclass"), axis=1), 3)
        self.assertLess(raw_f1, 0.6)
        self.assertGreater(pgcl_f1, 0.9)


class Determinism(unittest.TestCase):
    def run_once(self, seed, task="ordinal", K=3):
        X, y = common.xor_clusters(40, D=16, noise=0.3, seed=5, classes=K)
        cfg = trainer.TrainConfig(epochs=4, patience=4, batch_size=32)
        model, info = trainer.train(X[:180], y[:180], X[180:], y[180:], task=task, K=K, cfg=cfg, seed=seed,
                                    metric="qwk" if task == "ordinal" else "weighted_f1")
        return model.state_dict(), info

    def test_same_seed_same_weights(self):
        a, info_a = self.run_once(7)
        b, info_b = self.run_once(7)
        self.assertEqual(list(a), list(b))
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), name)
        self.assertEqual([h["total"] for h in info_a["history"]], [h["total"] for h in info_b["history"]])
        self.assertEqual(info_a["lambda_scale"], info_b["lambda_scale"])

    def test_other_seed_other_weights(self):
        a, _ = self.run_once(7)
        b, _ = self.run_once(8)
        self.assertFalse(torch.equal(a["query_fc.weight"], b["query_fc.weight"]))

    def test_early_stopping_restores_the_best_epoch(self):
        X, y = common.xor_clusters(40, D=16, noise=0.3, seed=5, classes=2)
        cfg = trainer.TrainConfig(epochs=8, patience=2, batch_size=32)
        model, info = trainer.train(X[:120], y[:120], X[120:], y[120:], task="binary", K=2, cfg=cfg, seed=0,
                                    metric="auc")
        scores = [h["val_score"] for h in info["history"]]
        self.assertEqual(info["val_score"], max(scores))
        self.assertEqual(info["best_epoch"], scores.index(max(scores)) + 1)
        again = trainer.validation_score(model, X[:120], y[:120], X[120:], y[120:], "binary", 2, "auc",
                                         cfg.es_probe_c)
        self.assertAlmostEqual(again, info["val_score"], places=12)


class Distillation(unittest.TestCase):
    def test_teacher_is_out_of_fold(self):
        """Each training row's target comes from the fold's probe that did not see it."""
        from sklearn.model_selection import StratifiedKFold
        X, y = common.xor_clusters(40, D=16, noise=0.5, seed=3, classes=3)
        X, y, Xv, yv = X[:90], y[:90], X[90:], y[90:]
        teacher = trainer.teacher_probabilities(X, y, Xv, yv, "multiclass", 3, seed=4)
        self.assertEqual(teacher.shape, (90, 3))
        np.testing.assert_allclose(teacher.sum(axis=1), 1.0, rtol=1e-5)
        _, C, _ = probe.select(X, y, Xv, yv, "multiclass", 3, "weighted_f1", criterion="log_loss")
        fit_rows, held_rows = next(StratifiedKFold(trainer.TEACHER_FOLDS, shuffle=True, random_state=4).split(X, y))
        oracle = probe.probabilities(probe.fit(X[fit_rows], y[fit_rows], C), X[held_rows], "multiclass")
        np.testing.assert_allclose(teacher[held_rows], oracle, atol=1e-6)
        in_sample = probe.probabilities(probe.fit(X, y, C), X[held_rows], "multiclass")
        self.assertGreater(np.abs(teacher[held_rows] - in_sample).max(), 1e-3)

    def test_the_term_is_trained_and_only_with_a_head(self):
        X, y = common.xor_clusters(40, D=16, noise=0.3, seed=5, classes=2)
        cfg = trainer.TrainConfig(epochs=6, patience=6, batch_size=32, lambda_distill=5.0, hidden=())
        model, info = trainer.train(X[:100], y[:100], X[100:], y[100:], task="binary", K=2, cfg=cfg, seed=0,
                                    metric="auc")
        distill = [h["distill"] for h in info["history"]]
        self.assertEqual(len(distill), info["epochs_run"])
        self.assertLess(distill[-1], distill[0])
        plain, info0 = trainer.train(X[:100], y[:100], X[100:], y[100:], task="binary", K=2,
                                     cfg=cfg.replace(lambda_distill=0.0), seed=0, metric="auc")
        self.assertNotIn("distill", info0["history"][0])
        with self.assertRaises(ValueError):
            trainer.train(X[:100], y[:100], X[100:], y[100:], task="binary", K=2, cfg=cfg, seed=0, metric="auc",
                          kind="supcon")


class Select(unittest.TestCase):
    def test_grid_is_the_documented_one_and_deduplicated(self):
        self.assertEqual([name for name, _ in SELECT_GRID],
                         ["full", "no_offset", "no_contrastive", "no_orthogonality", "offset_0.5", "offset_2.0",
                          "lr_1e-4", "lr_1e-3", "distill_shallow"])
        X, y = common.xor_clusters(30, D=16, noise=0.3, seed=6, classes=2)
        cfg = trainer.TrainConfig(epochs=2, patience=2, batch_size=32)
        results, chosen = fit_pgcl(X[:90], y[:90], X[90:], y[90:], task="binary", K=2, cfg=cfg, seed=0,
                                   metric="auc", select=True)
        names = [r["name"] for r in results]
        self.assertEqual(names, ["full", "no_offset", "no_contrastive", "no_orthogonality", "offset_0.5",
                                 "offset_2.0", "lr_1e-3", "distill_shallow"])  # lr_1e-4 = full's lr: folded
        self.assertEqual(results[0]["also"], ["lr_1e-4"])
        best = max(r["val_score"] for r in results)
        self.assertEqual(results[chosen]["val_score"], best)
        self.assertEqual(chosen, min(i for i, r in enumerate(results) if r["val_score"] == best))
        self.assertEqual(results[1]["config"].lambda_offset, 0.0)
        self.assertEqual(results[6]["config"].lr, 1e-3)


if __name__ == "__main__":
    unittest.main()
