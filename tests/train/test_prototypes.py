"""Prototype initialisation (paper Appendix A.2) meets its geometric properties."""

import math
import unittest

import common  # noqa: F401
import torch

from train.model import PGCL, init_prototypes


def pairwise(C):
    return torch.cdist(C.double(), C.double())


class Classification(unittest.TestCase):
    def test_unit_vectors_at_least_sqrt2_apart(self):
        for K, d in ((2, 64), (5, 64), (8, 8), (3, 4)):
            for seed in range(3):
                torch.manual_seed(seed)
                C = init_prototypes(K, d, "multiclass")
                self.assertEqual(tuple(C.shape), (K, d))
                self.assertTrue(torch.allclose(C.norm(dim=1), torch.ones(K), atol=1e-5), (K, d, seed))
                D = pairwise(C) + torch.eye(K, dtype=torch.float64) * 10
                self.assertGreaterEqual(float(D.min()), math.sqrt(2) - 1e-5, (K, d, seed))

    def test_random_not_fixed(self):
        torch.manual_seed(0)
        a = init_prototypes(5, 64, "multiclass")
        b = init_prototypes(5, 64, "multiclass")
        self.assertFalse(torch.allclose(a, b))

    def test_more_classes_than_dimensions_are_spread(self):
        torch.manual_seed(0)
        K, d = 16, 8  # the cross-polytope reaches sqrt(2) here
        C = init_prototypes(K, d, "multiclass")
        self.assertTrue(torch.allclose(C.norm(dim=1), torch.ones(K), atol=1e-5))
        D = pairwise(C) + torch.eye(K, dtype=torch.float64) * 10
        plain = pairwise(torch.nn.functional.normalize(torch.randn(K, d), dim=1)) + torch.eye(K) * 10
        self.assertGreater(float(D.min()), 1.3)
        self.assertGreater(float(D.min()), float(plain.min()))


class Ordinal(unittest.TestCase):
    def test_angular_progression_along_a_geodesic(self):
        for K in (3, 5, 7):
            torch.manual_seed(K)
            C = init_prototypes(K, 64, "ordinal").double()
            self.assertTrue(torch.allclose(C.norm(dim=1), torch.ones(K, dtype=torch.float64), atol=1e-6))
            # one great circle: the anchors span a plane through the origin
            self.assertEqual(int(torch.linalg.matrix_rank(C, tol=1e-6)), 2)
            # equal angular steps pi / (K - 1), from c_1 to its antipode c_K
            cos = C @ C.T
            step = math.pi / (K - 1)
            for i in range(K):
                for j in range(K):
                    self.assertAlmostEqual(float(cos[i, j]), math.cos(abs(i - j) * step), places=5)
            # distance grows strictly with the rating gap
            D = pairwise(C)
            for gap in range(1, K - 1):
                self.assertLess(float(D[0, gap]), float(D[0, gap + 1]))
            self.assertAlmostEqual(float(D[0, K - 1]), 2.0, places=5)


class Module(unittest.TestCase):
    def test_pgcl_uses_its_task_initialisation(self):
        torch.manual_seed(0)
        model = PGCL(K=5, task="ordinal", D=16, d=8)
        self.assertEqual(int(torch.linalg.matrix_rank(model.prototypes.detach().double(), tol=1e-6)), 2)
        self.assertAlmostEqual(float(model.alpha), 0.05, places=7)
        torch.manual_seed(0)
        model = PGCL(K=5, task="multiclass", D=16, d=8)
        C = model.prototypes.detach().double()
        self.assertTrue(torch.allclose(C @ C.T, torch.eye(5, dtype=torch.float64), atol=1e-5))


if __name__ == "__main__":
    unittest.main()
