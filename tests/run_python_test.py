#!/usr/bin/python3
"""Runs one Python test program the way meson registers it, so that its skips are seen (issue 14).

    /usr/bin/python3 tests/run_python_test.py tests/integration/test_x.py [unittest arguments]

The test file runs as __main__, exactly as `/usr/bin/python3 tests/integration/test_x.py` would run it
(same sys.argv[0], same sys.path[0]), but every unittest result it makes records the cases it
skipped. At the end this prints one line per skipped case on stdout,

    SKIP CASE: <test id>: <reason>

and decides the exit status, which meson reads:
  - the program's own status when it did not run unittest (the browser test) or exited with 77 (a
    whole-program skip: it printed its own `SKIP: <reason>` line);
  - 77 when every case that ran was skipped (a program that only skipped did not pass);
  - 1 when unittest ran no test case at all (a program that checked nothing did not pass either);
  - otherwise unittest's own verdict.

tests/run_all.sh collects these lines, and the `SKIP: <reason>` lines of whole programs that skip,
from meson's test logs and lists them before its closing line (tests/closing_summary.py).
Nothing here turns a skip into a failure: a test that needs something deploy/install-deps.sh --test
installs does that itself (tests/integration/skips.py, PGCLD_REQUIRE_SUITE_DEPS).
"""

import os
import runpy
import sys
import unittest

SKIP_STATUS = 77  # meson's "skipped"
CASE_MARK = "SKIP CASE: "  # tests/closing_summary.py reads it
RESULTS = []  # every unittest result made while the test program ran


class RecordingResult(unittest.TextTestResult):
    """unittest's text result that also counts its successes (skips it already keeps in .skipped)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.successes = 0
        RESULTS.append(self)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.successes += 1


def run_program(path, argv):
    """Runs the test file as __main__ with argv; returns the status it exited with (0 if it returned)."""
    sys.argv = [path] + argv
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    return 0


def verdict(status, results):
    """The exit status meson should see, from the program's own status and its unittest results."""
    if status == SKIP_STATUS or not results:
        return status
    ran = sum(r.testsRun for r in results)
    skipped = sum(len(r.skipped) for r in results)  # a class skipped in setUpClass runs no case
    if ran == 0 and not skipped:
        print("FAIL: unittest ran no test case: this program checked nothing", flush=True)
        return 1
    if status != 0:
        return status
    passed = sum(r.successes + len(r.expectedFailures) for r in results)
    return SKIP_STATUS if skipped and not passed else 0


def print_skips(results):
    for r in results:
        for test, reason in r.skipped:
            print(f"{CASE_MARK}{test.id().replace('__main__.', '')}: {' '.join(str(reason).split())}")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    unittest.TextTestRunner.resultclass = RecordingResult
    status = run_program(sys.argv[1], sys.argv[2:])
    sys.stderr.flush()
    print_skips(RESULTS)
    sys.stdout.flush()
    return verdict(status, RESULTS)


if __name__ == "__main__":
    sys.exit(main())
