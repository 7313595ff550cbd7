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

A test program counts once, as passed, failed or (whole) skipped; N skipped adds to the W whole
programs the C cases skipped inside programs that ran. The reasons come from the test's output:
`SKIP: <reason>` from a program that skips as a whole (C and GPU tests, tests/integration/skips.py),
`SKIP CASE: <case id>: <reason>` from tests/run_python_test.py for each case a Python program
skipped. The closing line is the last line and keeps starting "N passed, N failed, N skipped":
.ci/run's reader depends on it.
"""

import collections
import json
import os
import sys

PASSED = ("OK", "EXPECTEDFAIL")
SKIPPED = "SKIP"
WHOLE_MARK = "SKIP: "
CASE_MARK = "SKIP CASE: "  # tests/run_python_test.py


def test_name(meson_name):
    """'pgcld:integration / test_tls' -> 'integration/test_tls'."""
    suite, _, name = meson_name.partition(" / ")
    if not name:
        return meson_name
    return suite.split(":", 1)[-1] + "/" + name


def skip_reasons(output):
    """(whole-program reasons, [(case, reason)]) from a test's output."""
    whole, cases = [], []
    for line in (output or "").splitlines():
        if line.startswith(CASE_MARK):
            case, sep, reason = line[len(CASE_MARK):].partition(": ")
            cases.append((case.strip(), reason.strip()) if sep else ("?", case.strip()))
        elif line.startswith(WHOLE_MARK):
            whole.append(line[len(WHOLE_MARK):].strip())
    return whole, cases


def whole_test_reason(whole, cases, output):
    """One line for a test that exited 77: its own reasons, else its cases' reasons grouped."""
    if whole:
        return "; ".join(whole)
    if cases:
        grouped = collections.Counter(reason for _, reason in cases)
        return f"all {len(cases)} cases skipped: " + "; ".join(
            f"{reason} ({n} case{'s' if n > 1 else ''})" for reason, n in grouped.most_common())
    last = (output.strip().splitlines() or [""])[-1][:300]
    return f"(it printed no `SKIP: ` line; its last line: {last})"


def read_results(path):
    """(build, entries) of one results file; entries is None when the file does not exist."""
    build = os.path.normpath(path).split(os.sep)[0]
    if not os.path.exists(path):
        return build, None
    with open(path, encoding="utf-8") as f:
        return build, [json.loads(line) for line in f if line.strip()]


def summarise(paths):
    """Returns (counts, skips): skips maps (test, case or None, reason) to the builds it happened in."""
    counts = {"passed": 0, "failed": 0, "whole": 0, "cases": 0}
    skips = {}
    for path in paths:
        build, entries = read_results(path)
        if entries is None:
            counts["failed"] += 1
            continue
        for e in entries:
            name, result = test_name(e["name"]), e.get("result")
            output = (e.get("stdout") or "") + "\n" + (e.get("stderr") or "")
            whole, cases = skip_reasons(output)
            if result == SKIPPED:
                counts["whole"] += 1
                skips.setdefault((name, None, whole_test_reason(whole, cases, output)), []).append(build)
                continue
            counts["passed" if result in PASSED else "failed"] += 1
            for case, reason in cases:
                counts["cases"] += 1
                skips.setdefault((name, case, reason), []).append(build)
    return counts, skips


def main(paths):
    counts, skips = summarise(paths)
    if skips:
        print("Skipped:")
        for (name, case, reason), builds in sorted(skips.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            where = name if case is None else f"{name} > {case}"
            print(f"  {where} [{', '.join(builds)}]: {reason}")
    print("%d passed, %d failed, %d skipped (%d whole tests, %d cases inside tests that ran)" % (
        counts["passed"], counts["failed"], counts["whole"] + counts["cases"], counts["whole"], counts["cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
