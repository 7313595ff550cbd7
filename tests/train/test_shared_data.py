"""The committed trained models against the shared data folder: the provenance hashes match the files
they were trained on, the report's PGCL --select run produced the same weights, and the checkpoints' own
figures on the held-out split equal those in docs/train-report.json. Skips (77) when ../shared/data is
absent (an environment limit: the data is never copied into the repository). With it present, every
committed model's dataset must be there and be checked: a missing dataset folder, checkpoint or report
entry is a failure, so the test cannot pass having looked at nothing."""

import json
import os
import unittest

import common

SHARED = os.environ.get("PGCL_SHARED_DATA") or os.path.join(os.path.dirname(common.ROOT), "shared", "data")
if not os.path.isdir(SHARED):
    common.skip(f"no shared data folder at {SHARED}")

from train import data  # noqa: E402
from train.evaluate import evaluate_checkpoint  # noqa: E402
from train.load import load_checkpoint  # noqa: E402

MODELS = {"toxic": "models/toxicity/1", "goemotions5": "models/emotions/1"}
REPORT = os.path.join(common.ROOT, "docs", "train-report.json")


class CommittedModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(REPORT, encoding="utf-8") as f:
            cls.report = {r["dataset"]: r for r in json.load(f)["datasets"]}

    def each(self):
        """Every (dataset, checkpoint directory) of MODELS; fails on the first one that is not all there."""
        for dataset, relative in MODELS.items():
            directory = os.path.join(common.ROOT, relative)
            self.assertTrue(os.path.isdir(os.path.join(SHARED, dataset)), f"{SHARED} has no {dataset}/")
            self.assertTrue(os.path.isdir(directory), f"the committed checkpoint {relative} is missing")
            yield dataset, directory

    def test_provenance_hashes(self):
        checked = []
        for dataset, directory in self.each():
            _, config = load_checkpoint(directory)
            source = config["training"]["data"]["source"]
            self.assertEqual(source["embeddings_sha256"],
                             data.sha256_file(os.path.join(SHARED, dataset, "train.emb.npy")), dataset)
            self.assertEqual(source["labels_sha256"], data.sha256_file(os.path.join(SHARED, dataset, "train.tsv")),
                             dataset)
            checked.append(dataset)
        self.assertEqual(checked, list(MODELS))

    def test_held_out_figures_match_the_report(self):
        checked = []
        for dataset, directory in self.each():
            self.assertIn(dataset, self.report, "docs/train-report.json has no figures for " + dataset)
            labels = data.read_label_names(os.path.join(SHARED, dataset, "labels.txt"))
            X, y, _ = data.load_split(os.path.join(SHARED, dataset, "val.emb.npy"),
                                      os.path.join(SHARED, dataset, "val.tsv"), labels)
            result = evaluate_checkpoint(directory, X, y, with_geometry=False)
            method = self.report[dataset]["methods"]["pgcl_select"]
            self.assertEqual(result["weights_sha256"], method["weights_sha256"], dataset)
            for key in ("weighted_f1", "macro_f1", "roc_auc", "positive_f1"):
                if key in method["held_out"]:
                    self.assertAlmostEqual(result["metrics"][key], method["held_out"][key], places=4,
                                           msg=f"{dataset} {key}")
                    checked.append((dataset, key))
        self.assertEqual({d for d, _ in checked}, set(MODELS), f"figures compared: {checked}")


if __name__ == "__main__":
    unittest.main()
