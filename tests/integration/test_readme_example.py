"""The README's example answer is the bundled model's live answer (issue 19, item 8).

README.md's "Try it" posts a request file with curl and shows the answer, abridged, in a JSON
block. This test starts the real daemon on the bundled models directory (models/, as the README's
run command serves it), posts that same file to the same route the README's curl line names, and
checks the block against the live answer member by member: the same members in the same order, and
every value shown equal to the value pgcld printed, compared as text (so the README shows exactly
the digits pgcld sends). Where the block abridges, it is checked for what it stands for:
  - "…" inside a string (the sha256): the live value starts with what is shown;
  - {…}: an object; [64 numbers]: a list of 64 numbers; a list ending in ", …": the items shown are
    the first items of the live list;
  - request_id and decision_id: example UUIDv7s in the README, any UUIDv7 live.
So retraining the bundled model, or changing the example request or the answer's shape, fails this
test until the README shows the new answer.

Run: /usr/bin/python3 tests/integration/test_readme_example.py (PGCLD_BIN selects the binary).
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

README = os.path.join(H.SOURCE_ROOT, "README.md")
TRY_IT = re.compile(r"^## Try it\n(.*?)^## ", re.S | re.M)
EXAMPLE_BLOCK = re.compile(r"^```json\n(.*?)\n```", re.S | re.M)  # the first JSON block of "Try it"
CURL_LINE = re.compile(r"--data @(\S+) http://127\.0\.0\.1:8080(/\S+)")
VARYING = ("request_id", "decision_id")  # made fresh for every request

# The README's abridgements, rewritten into JSON strings that name what they stand for.
ELLIPSIS = "…"
ABRIDGED_OBJECT, ABRIDGED_LIST_OF = "<an object>", "<a list of "
ABRIDGED_TAIL = "<more items>"


def parse_shown(block):
    """The README's abridged answer as JSON: object members keep their order (a list of pairs),
    numbers stay the text they are written as."""
    text = block.replace("{" + ELLIPSIS + "}", json.dumps(ABRIDGED_OBJECT))
    text = re.sub(r"\[(\d+) numbers\]", lambda m: json.dumps(f"{ABRIDGED_LIST_OF}{m.group(1)} numbers>"), text)
    text = text.replace(", " + ELLIPSIS + "]", ", " + json.dumps(ABRIDGED_TAIL) + "]")
    return json.loads(text, object_pairs_hook=list, parse_float=str, parse_int=str)


def parse_live(body):
    return json.loads(body, object_pairs_hook=list, parse_float=str, parse_int=str)


class ReadmeExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        with open(README, encoding="utf-8") as f:
            readme = f.read()
        try_it = TRY_IT.search(readme)
        if try_it is None:
            raise AssertionError("README.md has no \"Try it\" section")
        block, curl = EXAMPLE_BLOCK.search(try_it.group(1)), CURL_LINE.search(try_it.group(1))
        if block is None or curl is None:
            raise AssertionError("README.md's \"Try it\" no longer has its curl line and its answer block")
        cls.block = block.group(1)
        request_file, cls.route = curl.groups()
        with open(os.path.join(H.SOURCE_ROOT, request_file), "rb") as f:
            cls.request_body = f.read()
        cls.d = H.start_daemon(cls, models=os.path.join(H.SOURCE_ROOT, "models"))

    def compare(self, shown, live, where):
        """Asserts that live is what shown (the README's value, abridgements included) says."""
        if isinstance(shown, list) and all(isinstance(p, tuple) for p in shown) and shown:
            self.assertTrue(isinstance(live, list) and all(isinstance(p, tuple) for p in live),
                            f"{where}: the README shows an object, pgcld sent {live!r}")
            self.assertEqual([k for k, _ in shown], [k for k, _ in live],
                             f"{where}: the README shows other members, or another order, than pgcld sends")
            for (key, value), (_, live_value) in zip(shown, live):
                if key in VARYING:
                    self.assertRegex(value, H.UUID7_RE, f"{where}.{key} in the README")
                    self.assertRegex(live_value, H.UUID7_RE, f"{where}.{key}")
                else:
                    self.compare(value, live_value, f"{where}.{key}")
        elif isinstance(shown, list):
            abridged = bool(shown) and shown[-1] == ABRIDGED_TAIL
            items = shown[:-1] if abridged else shown
            self.assertIsInstance(live, list, where)
            if abridged:
                self.assertGreater(len(live), len(items), f"{where}: the README abridges a list that has no more items")
            else:
                self.assertEqual(len(live), len(items), where)
            for i, item in enumerate(items):
                self.compare(item, live[i], f"{where}[{i}]")
        elif shown == ABRIDGED_OBJECT:
            self.assertTrue(isinstance(live, list) and all(isinstance(p, tuple) for p in live),
                            f"{where}: the README shows an object, pgcld sent {live!r}")
        elif isinstance(shown, str) and shown.startswith(ABRIDGED_LIST_OF):
            n = int(shown[len(ABRIDGED_LIST_OF):].split()[0])
            self.assertIsInstance(live, list, where)
            self.assertEqual(len(live), n, where)
            for x in live:
                float(x)  # a number, kept as its text
        elif isinstance(shown, str) and shown.endswith(ELLIPSIS):
            self.assertTrue(live.startswith(shown[:-1]),
                            f"{where}: the README shows {shown!r}, pgcld sent {live!r}")
        else:
            self.assertEqual(shown, live, f"{where}: the README shows {shown!r}, pgcld sent {live!r}")

    def test_the_readme_shows_the_live_answer(self):
        shown = parse_shown(self.block)
        r = self.d.post(self.route, self.request_body)
        self.assertEqual(r.status, 200, r)
        try:
            self.compare(shown, parse_live(r.body.decode("utf-8")), "answer")
        except AssertionError as e:
            # the live answer (vectors and the policy's source left out), to bring the README up to date
            live = json.loads(r.body)
            live["policy"]["source"] = ELLIPSIS
            for result in live["results"]:
                result["vector"] = f"[{len(result['vector'])} numbers]"
            raise AssertionError(f"{e}\nREADME.md's answer block is stale; pgcld answers now:\n"
                                 f"{json.dumps(live, ensure_ascii=False)}") from None

    def test_the_readme_shows_the_numbers_that_matter(self):
        """Guards the comparison itself: the block still shows the model's sha256, the thresholds
        and the first item's probabilities and decision, so the check above has them to compare."""
        for needle in ('"sha256": "', '"t_review": ', '"t_block": ', '"probabilities": {', '"decision": "'):
            self.assertIn(needle, self.block)


if __name__ == "__main__":
    unittest.main()
