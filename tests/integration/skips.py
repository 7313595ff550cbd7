"""Skipping a test, the suite's way (issue 14; docs/testing.md, "Skips").

Two kinds of reason, kept apart:

  - an environment limit the suite cannot provide (no NVIDIA device, no ../shared/data, no right to
    mount a tmpfs): a skip, always, with its reason;
  - a dependency that `deploy/install-deps.sh --test` installs, or that the suite builds (openssl,
    curl, Chromium, node and tests/browser/node_modules, systemd-analyze, torch, the pgcld binary):
    a skip when a developer runs one test by hand, and a FAILURE when PGCLD_REQUIRE_SUITE_DEPS=1,
    which tests/run_all.sh exports: there its absence means the install step or the build is broken.

A whole test program that skips prints `SKIP: <reason>` and exits 77 (meson's "skipped"); a skipped
case inside a program is listed by tests/run_python_test.py. tests/run_all.sh shows both.

Only the Python standard library is used here: the browser and train tests import it too.
"""

import functools
import os
import sys
import unittest

SKIP_STATUS = 77
REQUIRE_ENV = "PGCLD_REQUIRE_SUITE_DEPS"


def suite_deps_required():
    """True under tests/run_all.sh: a missing suite dependency fails instead of skipping."""
    return os.environ.get(REQUIRE_ENV) == "1"


def missing_dependency_message(what):
    return (f"missing suite dependency: {what} ({REQUIRE_ENV}=1: deploy/install-deps.sh --test installs it, "
            f"or the build makes it, so its absence is a failure)")


def needs(available, what):
    """Decorator for a test method or TestCase class that needs a suite dependency.

    available: whether it is there (evaluated once, at import); what: what is missing, said in the skip
    or failure. Without the dependency the test skips, or fails under PGCLD_REQUIRE_SUITE_DEPS=1."""
    if available:
        return lambda obj: obj
    if not suite_deps_required():
        return unittest.skip(what)

    def fail_instead(obj):
        if isinstance(obj, type):
            def setUpClass(cls):
                raise AssertionError(missing_dependency_message(what))
            obj.setUpClass = classmethod(setUpClass)
            return obj

        @functools.wraps(obj)
        def failing(self, *args, **kwargs):
            self.fail(missing_dependency_message(what))
        return failing
    return fail_instead


def missing_in_case(testcase, what):
    """Inside a running test case: skips it, or fails it under PGCLD_REQUIRE_SUITE_DEPS=1."""
    if suite_deps_required():
        testcase.fail(missing_dependency_message(what))
    testcase.skipTest(what)


def skip_program(reason):
    """An environment limit for a whole test program: prints the reason and exits 77 (skipped)."""
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP_STATUS)


def missing_for_program(what):
    """A suite dependency a whole test program lacks: exit 77 by hand, exit 1 (failed) under
    PGCLD_REQUIRE_SUITE_DEPS=1."""
    if suite_deps_required():
        print(f"FAIL: {missing_dependency_message(what)}", flush=True)
        sys.exit(1)
    skip_program(what)
