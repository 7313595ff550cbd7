"""The decision policy exactly at its thresholds, end to end: a real daemon, real checkpoint
versions on disk, real HTTP, the stored rows.

The other integration tests skip items within 1e-5 of a threshold (rounding could flip them). Here
the thresholds are made equal to the score, bit for bit: an input is scored once on version 1 of a
fixture model; its probability comes back as the shortest decimal that identifies the float32
(9 significant digits), which rounded to float32 and widened to double is the exact value the
daemon compares (a float32 probability widened to double against a double threshold). New version
directories (the same weights, the policy replaced, the goldens dropped because their recorded
decisions belong to the old policy) are written beside version 1 with that value, or one double
ulp either side of it, as the threshold, each activated in turn over /v1/admin, and the same input
is scored again. Expected decisions come from docs/checkpoint-format.md:

  threshold  block if score >= t_block, else review if score >= t_review, else allow
  label_map  the predicted label's action; an allow becomes review if the top probability is
             below min_confidence

and the stored row must say the same (decision, thresholds and score bit for bit). Turning a `>=`
of the policy into `>`, or its `<` into `<=`, fails this test.

Run: /usr/bin/python3 tests/integration/test_policy_boundary.py (PGCLD_BIN selects the binary).
"""
import json
import math
import os
import shutil
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BINARY, MULTI = "tiny_binary", "tiny_multi"


def exact_f32(text_value):
    """The float32 a 9-significant-digit probability from the daemon denotes, as a Python float
    (a double holding that float32 exactly)."""
    return float(np.float32(text_value))


class PolicyBoundaryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(BINARY, MULTI)
        cls.d = H.start_daemon(cls, models=(BINARY, MULTI))
        cls.next_version = 2
        cls.z = {name: H.random_embeddings(1, H.load_config(name)["dims"]["D"], seed=1414)[0]
                 for name in (BINARY, MULTI)}
        # The reference answers, on version 1.
        cls.first = {name: cls.score_once(name) for name in (BINARY, MULTI)}

    @classmethod
    def score_once(cls, model):
        r = cls.d.score({"model": model, "items": H.json_items([cls.z[model]], "boundary")})
        assert r.status == 200, r
        return r.json

    def make_version(self, model, policy):
        """Writes version N of model (version 1's weights, `policy`), activates it over HTTP and
        returns N."""
        version = str(type(self).next_version)
        type(self).next_version += 1
        src = os.path.join(self.d.models_dir, model, "1")
        dst = os.path.join(self.d.models_dir, model, version)
        os.mkdir(dst)
        shutil.copyfile(os.path.join(src, "model.safetensors"), os.path.join(dst, "model.safetensors"))
        with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config["decision_policy"] = policy
        config.pop("golden", None)
        with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)  # floats as repr(): the shortest text that parses back to the same double
        r = self.d.post(f"/v1/admin/models/{model}/activate", {"version": version})
        self.assertEqual(r.status, 200, r)
        return version

    def score_and_check(self, model, policy, want, what):
        """Scores the input on a new version with `policy`; checks the answer and the stored row
        against `want`; returns the stored row."""
        version = self.make_version(model, policy)
        answer = self.score_once(model)
        self.assertEqual(answer["model"]["version"], version)
        result = answer["results"][0]
        # The premise: the same weights give the same probabilities, bit for bit.
        self.assertEqual(result["probabilities"], self.first[model]["results"][0]["probabilities"],
                         f"{what}: version {version} scores the input differently from version 1")
        self.assertEqual(result["decision"], want, f"{what} (version {version}, policy {policy})")
        row = self.d.query("SELECT * FROM decisions WHERE decision_id = ?", (result["decision_id"],))[0]
        self.assertEqual(row["decision"], want, f"{what}: the stored row")
        self.assertEqual(row["model_version"], version)
        self.assertEqual(json.loads(row["policy"]), policy, f"{what}: the stored policy, bit for bit")
        return row

    # -- threshold (binary model): the score is the probability of "pos"

    def binary_score(self):
        p = exact_f32(self.first[BINARY]["results"][0]["probabilities"]["pos"])
        self.assertTrue(0.0 < p < 1.0, p)
        return p

    def threshold(self, t_review, t_block):
        return {"kind": "threshold", "label": "pos", "t_review": t_review, "t_block": t_block}

    def check_threshold(self, t_review, t_block, want, what):
        p = self.binary_score()
        row = self.score_and_check(BINARY, self.threshold(t_review, t_block), want, what)
        self.assertEqual(row["toxicity"], p, f"{what}: the stored score is the float32 the answer gave")
        self.assertEqual((row["t_review"], row["t_block"]), (t_review, t_block), f"{what}: stored thresholds")

    def test_block_exactly_at_t_block(self):
        p = self.binary_score()
        self.check_threshold(p / 2, p, "block", "score == t_block")

    def test_t_block_one_ulp_above_the_score(self):
        p = self.binary_score()
        self.check_threshold(p / 2, math.nextafter(p, 1.0), "review", "t_block one double ulp above the score")

    def test_t_block_one_ulp_below_the_score(self):
        p = self.binary_score()
        self.check_threshold(p / 2, math.nextafter(p, 0.0), "block", "t_block one double ulp below the score")

    def test_review_exactly_at_t_review(self):
        p = self.binary_score()
        self.check_threshold(p, 1.0, "review", "score == t_review")

    def test_t_review_one_ulp_above_the_score(self):
        p = self.binary_score()
        self.check_threshold(math.nextafter(p, 1.0), 1.0, "allow", "t_review one double ulp above the score")

    def test_t_review_one_ulp_below_the_score(self):
        p = self.binary_score()
        self.check_threshold(math.nextafter(p, 0.0), 1.0, "review", "t_review one double ulp below the score")

    def test_both_thresholds_at_the_score(self):
        p = self.binary_score()
        self.check_threshold(p, p, "block", "t_review == t_block == score")

    # -- label_map (multiclass model): min_confidence against the top probability

    def top(self):
        probs = self.first[MULTI]["results"][0]["probabilities"]
        label = self.first[MULTI]["results"][0]["label"]
        q = exact_f32(probs[label])
        self.assertEqual(q, max(exact_f32(v) for v in probs.values()))
        return label, q

    def check_label_map(self, actions, min_confidence, want, what):
        policy = {"kind": "label_map", "actions": actions, "min_confidence": min_confidence}
        row = self.score_and_check(MULTI, policy, want, what)
        self.assertIsNone(row["t_review"])
        self.assertIsNone(row["t_block"])

    def test_allow_exactly_at_min_confidence(self):
        _, q = self.top()
        self.check_label_map({}, q, "allow", "top probability == min_confidence")

    def test_min_confidence_one_ulp_above_the_top(self):
        _, q = self.top()
        self.check_label_map({}, math.nextafter(q, 1.0), "review", "min_confidence one double ulp above the top")

    def test_min_confidence_one_ulp_below_the_top(self):
        _, q = self.top()
        self.check_label_map({}, math.nextafter(q, 0.0), "allow", "min_confidence one double ulp below the top")

    def test_min_confidence_leaves_block_alone(self):
        label, q = self.top()
        self.check_label_map({label: "block"}, math.nextafter(q, 1.0), "block",
                             "a block below min_confidence stays block")


if __name__ == "__main__":
    H.main()
