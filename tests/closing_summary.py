#!/usr/bin/python3
"""The end of tests/run_all.sh: every skip with its reason, then the closing line.

    tests/closing_summary.py build-test/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
        build-fuzz/fuzz-results.jsonl

Each argument is a JSON-lines file of test results in meson's testlog format ({"name", "result",
"stdout"}); the build is the first component of its path. A fuzz results file that does not exist
counts as one failure (tests/fuzz/run.sh did not get as far as writing it).

Prints
    Skipped:
      <test> [<builds>]: <reason>               a whole test that exited 77
      <test> > <case> [<builds>]: <reason>      a case skipped inside a test program that ran
    N passed, N failed, N skipped (W whole tests, C cases inside tests that ran)

A test counts once, as passed, failed or (whole) skipped; N skipped adds to the whole tests the cases
skipped inside the tests that ran. Reasons are the `SKIP: ` lines a test printed: C tests and the GPU
tests print `SKIP: <reason>` before exiting 77; tests/run_python_test.py prints
`SKIP: <case id>: <reason>` for every case a Python program skipped, and a Python program that skips
as a whole prints `SKIP: <reason>` (tests/integration/skips.py). The closing line stays the last
line and keeps starting "N passed, N failed, N skipped": .ci/run's reader depends on it.
"""

import json
import os
import sys

PASSED = ("OK", "EXPECTEDFAIL")
SKIPPED = "SKIP"
MARK = "SKIP: "


def test_name(meson_name):
    """'pgcld:integration / test_tls' -> 'integration/test_tls'."""
    suite, _, name = meson_name.partition(" / ")
    if not name:
        return meson_name
    return suite.split(":", 1)[-1] + "/" + name


def skip_lines(output):
    return [line[len(MARK):].strip() for line in (output or "").splitlines() if line.startswith(MARK)]


def read_results(path):
    """(build, entries) of one results file; None when a fuzz results file is missing."""
    build = os.path.normpath(path).split(os.sep)[0]
    if not os.path.exists(path):
        return build, None
    with open(path, encoding="utf-8") as f:
        return build, [json.loads(line) for line in f if line.strip()]


def summarise(paths):
    """Returns (counts, skips): skips maps (test, case or None, reason) to the builds it happened in."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "whole": 0, "cases": 0}
    skips = {}
    for path in paths:
        build, entries = read_results(path)
        if entries is None:
            counts["failed"] += 1
            continue
        for e in entries:
            name, result = test_name(e["name"]), e.get("result")
            output = (e.get("stdout") or "") + "\n" + (e.get("stderr") or "")
            lines = [line.replace("__main__.", "") for line in skip_lines(output)]
            if result == SKIPPED:
                counts["whole"] += 1
                last = (output.strip().splitlines() or [""])[-1][:300]
                reasons = lines or [f"(it printed no `SKIP: ` line; its last line: {last})"]
                skips.setdefault((name, None, "; ".join(reasons)), []).append(build)
                continue
            counts["passed" if result in PASSED else "failed"] += 1
            for line in lines:
                case, sep, reason = line.partition(": ")
                if not sep:
                    case, reason = "?", line
                counts["cases"] += 1
                skips.setdefault((name, case, reason), []).append(build)
    counts["skipped"] = counts["whole"] + counts["cases"]
    return counts, skips


def main(paths):
    counts, skips = summarise(paths)
    if skips:
        print("Skipped:")
        for (name, case, reason), builds in sorted(skips.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            where = name if case is None else f"{name} > {case}"
            print(f"  {where} [{', '.join(builds)}]: {reason}")
    print("%d passed, %d failed, %d skipped (%d whole tests, %d cases inside tests that ran)" % (
        counts["passed"], counts["failed"], counts["skipped"], counts["whole"], counts["cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
