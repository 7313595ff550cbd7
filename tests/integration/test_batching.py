"""Cross-request batching over real HTTP: many concurrent single-item requests are coalesced into
larger forward passes (seen in /metrics), and each answer equals, bit for bit, what the same item
gets alone (one request at a time) and inside one 48-item request: vectors and probabilities are
written with 9 significant digits, which tell every float32 apart, and compared with ==. The CPU
kernel computes a row's result by a sequence of operations that does not depend on the batch
(core/model/gemm_packed.h).

Run: /usr/bin/python3 tests/integration/test_batching.py (PGCLD_BIN selects the binary).
"""
import os
import shutil
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


class BatchingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-batch-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        # a held-open batch makes coalescing certain even on an idle 2-core machine
        cls.daemon = H.start_daemon(cls, models=["toxicity"], args=["--batch-max-wait-us", "20000",
                                                                    "--compute-workers", "1"])

    def test_concurrent_singles_are_coalesced_and_unchanged(self):
        d = self.daemon
        Z = H.random_embeddings(48, 1024, 77)
        in_one_request = d.score({"items": H.json_items(Z, "batch")}).json["results"]
        alone = []
        for i in range(48):  # one at a time: nothing to coalesce with
            r = d.score({"items": H.json_items(Z[i:i + 1], f"a{i}-")})
            self.assertEqual(r.status, 200, r)
            alone.append(r.json["results"][0])
        answers = {}

        def one(i):
            r = d.score({"items": H.json_items(Z[i:i + 1], f"c{i}-")})
            answers[i] = r

        threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(48):
            r = answers[i]
            self.assertEqual(r.status, 200, r)
            ref = alone[i]
            for how, got in (("coalesced", r.json["results"][0]), ("in one request", in_one_request[i])):
                self.assertEqual((got["label"], got["decision"]), (ref["label"], ref["decision"]), f"item {i} {how}")
                self.assertEqual(len(got["vector"]), 64)
                self.assertEqual(got["vector"], ref["vector"], f"item {i} {how}: vector differs from alone")
                self.assertEqual(got["probabilities"], ref["probabilities"], f"item {i} {how}: probabilities differ")
                self.assertEqual(got["toxicity"], ref["toxicity"], f"item {i} {how}")
        text = d.get("/metrics", key="").body.decode()
        rows = {}
        for line in text.splitlines():
            if line.startswith("pgcld_forward_batch_rows_bucket"):
                le = line.split('le="')[1].split('"')[0]
                rows[le] = float(line.rsplit(" ", 1)[1])
        count = [float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("pgcld_forward_batch_rows_count")][0]
        self.assertEqual(count, 1 + 48 + 48)
        # at least some of the 48 single-item requests ran in a forward pass of more than one row
        self.assertLess(rows["1"], 48 + 48, f"no request was batched with another: {rows}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
