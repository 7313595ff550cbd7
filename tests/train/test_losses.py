"""Each loss of train/losses.py against values computed by hand on tiny tensors."""

import math
import unittest

import common  # noqa: F401  (sys.path, skip without torch)
import torch

from train.losses import (PGCLObjective, class_weights, magnitude_loss, offset_loss, orth_margin,
                          orthogonality_loss, supcon_loss)


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


class ClassWeights(unittest.TestCase):
    def test_inverse_in_batch_frequency(self):
        # counts [3, 1, 0]: 2 classes present, B = 4 -> w_0 = 4 / (2*3), w_1 = 4 / (2*1)
        w = class_weights(torch.tensor([0, 0, 0, 1]), 3)
        self.assertTrue(torch.allclose(w, t([2 / 3, 2 / 3, 2 / 3, 2.0])))
        self.assertAlmostEqual(float(w.mean()), 1.0, places=6)

    def test_single_class_batch(self):
        self.assertTrue(torch.equal(class_weights(torch.tensor([2, 2, 2]), 4), t([1.0, 1.0, 1.0])))


class SupCon(unittest.TestCase):
    def test_three_rows_by_hand(self):
        # e0 = (1, 0), e1 = (0.6, 0.8), e2 = (0, 1): sim01 = 0.6, sim02 = 0, sim12 = 0.8; y = [0, 0, 1].
        e, y, tau = t([[1, 0], [0.6, 0.8], [0, 1]]), torch.tensor([0, 0, 1]), 0.5
        w = class_weights(y, 2)  # [0.75, 0.75, 1.5]
        log_p0 = 0.6 / tau - math.log(math.exp(0.6 / tau) + math.exp(0.0 / tau))
        log_p1 = 0.6 / tau - math.log(math.exp(0.6 / tau) + math.exp(0.8 / tau))
        expected = (-0.75 * log_p0 - 0.75 * log_p1 + 0.0) / 3  # row 2 has no positive: contributes 0
        self.assertAlmostEqual(float(supcon_loss(e, y, w, tau)), expected, places=5)
        # cosine similarity: scaling the rows changes nothing
        scaled = e * t([[2.0], [0.5], [3.0]])
        self.assertAlmostEqual(float(supcon_loss(scaled, y, w, tau)), expected, places=5)

    def test_two_positives_are_averaged(self):
        # e = unit vectors at angles 0, 90, 180, 270 degrees; y = [0, 0, 0, 1]
        e = t([[1, 0], [0, 1], [-1, 0], [0, -1]])
        y, tau = torch.tensor([0, 0, 0, 1]), 1.0
        w = class_weights(y, 2)  # [2/3, 2/3, 2/3, 2]
        sims = [[None, 0, -1, 0], [0, None, 0, -1], [-1, 0, None, 0], [0, -1, 0, None]]
        total = 0.0
        for i in range(3):  # anchors of class 0; anchor 3 has no positive
            others = [j for j in range(4) if j != i]
            log_z = math.log(sum(math.exp(sims[i][j] / tau) for j in others))
            positives = [j for j in others if y[j] == y[i]]
            mean = sum(sims[i][p] / tau - log_z for p in positives) / len(positives)
            total += -float(w[i]) * mean
        self.assertAlmostEqual(float(supcon_loss(e, y, w, tau)), total / 4, places=5)

    def test_default_temperature(self):
        e, y = t([[1, 0], [0.6, 0.8], [0, 1]]), torch.tensor([0, 0, 1])
        w = torch.ones(3)
        log_p = 0.6 / 0.1 - math.log(math.exp(6.0) + math.exp(0.0))
        log_q = 0.6 / 0.1 - math.log(math.exp(6.0) + math.exp(8.0))
        self.assertAlmostEqual(float(supcon_loss(e, y, w)), -(log_p + log_q) / 3, places=4)


class Offset(unittest.TestCase):
    def test_by_hand_with_min_over_wrong_prototypes(self):
        C = t([[1, 0], [0, 1], [-1, 0]])
        m = t([[0.5, 0], [0, 0], [-0.2, 0.9]])
        y = torch.tensor([0, 1, 0])
        w = class_weights(y, 3)  # [0.75, 1.5, 0.75]
        # row 0: true 0.5, wrong min(sqrt(1.25), 1.5) = sqrt(1.25)
        p_intra0, p_inter0 = (0.5 - 0.1) ** 2, max(0.0, 0.5 - math.sqrt(1.25) + 0.5) ** 2
        # row 1: true 1, wrong min(1, 1) = 1
        p_intra1, p_inter1 = (1 - 0.1) ** 2, (1 - 1 + 0.5) ** 2
        # row 2: true sqrt(2.25) = 1.5; wrong: c1 at sqrt(0.05), c2 at sqrt(1.45) -> the min is c1, not c2
        p_intra2 = (1.5 - 0.1) ** 2
        p_inter2 = (1.5 - math.sqrt(0.05) + 0.5) ** 2
        lam_in, lam_cross = 1.0, 2.0
        expected = (0.75 * (lam_in * p_intra0 + lam_cross * p_inter0) + 1.5 * (lam_in * p_intra1 + lam_cross * p_inter1)
                    + 0.75 * (lam_in * p_intra2 + lam_cross * p_inter2)) / 3
        got = offset_loss(m, C, y, w, delta_intra=0.1, delta_inter=0.5, lambda_inclass=lam_in,
                          lambda_crossclass=lam_cross)
        self.assertAlmostEqual(float(got), expected, places=5)
        self.assertEqual(p_inter0, 0.0)  # the hinge is inactive for a well-placed row

    def test_zero_inside_the_margins(self):
        C = t([[1, 0], [0, 1]])
        m = t([[0.95, 0.0], [0.0, 1.05]])
        y = torch.tensor([0, 1])
        self.assertEqual(float(offset_loss(m, C, y, torch.ones(2), 0.1, 0.5)), 0.0)

    def test_gradient_reaches_prototypes(self):
        C = t([[1, 0], [0, 1]]).requires_grad_()
        m = t([[0.2, 0.3]]).requires_grad_()
        offset_loss(m, C, torch.tensor([0]), torch.ones(1)).backward()
        self.assertGreater(float(C.grad.abs().sum()), 0)
        self.assertGreater(float(m.grad.abs().sum()), 0)


class Orthogonality(unittest.TestCase):
    def test_by_hand(self):
        s = t([[1, 0], [1, 0], [1, 0]])
        m = t([[1, 1], [0, 2], [-1, -0.1]])
        y = torch.tensor([0, 0, 1])
        w = class_weights(y, 2)  # [0.75, 0.75, 1.5]
        cos = [1 / math.sqrt(2), 0.0, -1 / math.sqrt(1.01)]
        delta = 0.5
        expected = sum(float(w[i]) * max(0.0, abs(cos[i]) - delta) for i in range(3)) / 3
        self.assertAlmostEqual(float(orthogonality_loss(s, m, w, delta)), expected, places=6)

    def test_annealing_schedule(self):
        self.assertAlmostEqual(orth_margin(0, 100), 0.5)
        self.assertAlmostEqual(orth_margin(99, 100), 0.05)
        self.assertAlmostEqual(orth_margin(33, 100), 0.5 - 0.45 * 33 / 99)
        self.assertAlmostEqual(orth_margin(500, 100), 0.05)  # never below the end value


class Magnitude(unittest.TestCase):
    def test_by_hand(self):
        C = t([[2, 0], [0, 1], [0, 0.5]])
        m = t([[3, 4], [0, 1], [1, 0]])
        y = torch.tensor([0, 2, 2])
        w = class_weights(y, 3)  # counts [1, 0, 2]: [1.5, 0.75, 0.75]
        scale = torch.tensor(0.5)
        intensity = y.float() + 1  # I(y) = 1-based rating
        expected = (1.5 * (5 - 0.5 * 1 * 2) ** 2 + 0.75 * (1 - 0.5 * 3 * 0.5) ** 2 + 0.75 * (1 - 0.5 * 3 * 0.5) ** 2) / 3
        self.assertAlmostEqual(float(magnitude_loss(m, C, y, w, scale, intensity)), expected, places=5)


class Objective(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.out = {"e": torch.nn.functional.normalize(torch.randn(6, 4), dim=1), "s": torch.randn(6, 4),
                    "m": torch.randn(6, 4)}
        self.C = torch.nn.functional.normalize(torch.randn(3, 4), dim=1)
        self.y = torch.tensor([0, 1, 2, 0, 1, 1])

    def test_orthogonality_margin_over_its_budget(self):
        objective = PGCLObjective(3, "multiclass", orth_anneal_epochs=3)
        self.assertAlmostEqual(objective(self.out, self.y, self.C, epoch=1)[1]["delta_orth"], 0.275, places=6)
        self.assertAlmostEqual(objective(self.out, self.y, self.C, epoch=2)[1]["delta_orth"], 0.05, places=6)
        self.assertAlmostEqual(objective(self.out, self.y, self.C, epoch=40)[1]["delta_orth"], 0.05, places=6)

    def test_total_is_the_weighted_sum(self):
        objective = PGCLObjective(3, "ordinal", lambda_offset=2.0, lambda_contrastive=0.5, lambda_orth=3.0,
                                  lambda_mag=0.25, orth_anneal_epochs=10)
        total, values = objective(self.out, self.y, self.C, epoch=4)
        w = class_weights(self.y, 3)
        expected = (2.0 * offset_loss(self.out["m"], self.C, self.y, w) + 0.5 * supcon_loss(self.out["e"], self.y, w)
                    + 3.0 * orthogonality_loss(self.out["s"], self.out["m"], w, orth_margin(4, 10))
                    + 0.25 * magnitude_loss(self.out["m"], self.C, self.y, w, objective.scale, self.y.float() + 1))
        self.assertAlmostEqual(float(total), float(expected), places=5)
        self.assertEqual(set(values), {"offset", "contrastive", "orthogonality", "magnitude", "delta_orth"})
        total.backward()
        self.assertIsNotNone(objective.scale.grad)  # λ_scale is learnable
        self.assertAlmostEqual(float(objective.scale), 1 / 2.0, places=6)  # 1 / mean of I = 1, 2, 3

    def test_magnitude_only_for_ordinal_and_zero_weights_drop_terms(self):
        objective = PGCLObjective(3, "multiclass", lambda_contrastive=0.0, lambda_mag=5.0)
        _, values = objective(self.out, self.y, self.C, epoch=0)
        self.assertEqual(set(values), {"offset", "orthogonality", "delta_orth"})


if __name__ == "__main__":
    unittest.main()
