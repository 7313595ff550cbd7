"""The test command without the npm registry (issue 19, item 8).

`deploy/install-deps.sh --test` runs `npm ci` for the optional browser test. Where the registry
cannot be reached it must not stop the test command: it goes on, says in one line that the browser
test will skip and why, and leaves npm's reason in tests/browser/.npm-ci-failed; the browser test
then skips (exit 77, even under tests/run_all.sh's PGCLD_REQUIRE_SUITE_DEPS=1) with that reason,
and tests/closing_summary.py lists it under "Skipped:" with the reason.

Everything runs on a copy (deploy/, tests/browser's package files and runner, skips.py, the closing
summary) in a temporary directory, so the repository's node_modules are never touched: the real
install-deps.sh with the real npm pointed at a closed port (npm_config_registry=http://127.0.0.1:9/,
an empty npm cache, no retries) and `apt-get` replaced by a stub that fails, so that the test never
installs anything (where a Debian package is missing, the case cannot run: a missing suite
dependency). It needs root (install-deps.sh refuses to run otherwise).

Run: /usr/bin/python3 tests/integration/test_install_deps.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import skips  # noqa: E402

ROOT = os.path.abspath(os.environ.get("PGCLD_SOURCE_ROOT") or os.path.join(HERE, os.pardir, os.pardir))
UNREACHABLE = "http://127.0.0.1:9/"
SCRIPT_TIMEOUT_S = 240
IS_ROOT = os.geteuid() == 0
HAVE_BROWSER_TOOLS = os.access("/usr/bin/chromium", os.X_OK) and shutil.which("node") and shutil.which("npm")


@unittest.skipUnless(IS_ROOT, "deploy/install-deps.sh runs as root only (apt-get needs it)")
@skips.needs(HAVE_BROWSER_TOOLS, "chromium, node and npm (deploy/install-deps.sh --test installs them)")
class NpmUnreachableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-install-deps-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        shutil.copytree(os.path.join(ROOT, "deploy"), os.path.join(cls.tmp, "deploy"))
        cls.browser = os.path.join(cls.tmp, "tests", "browser")
        os.makedirs(cls.browser)
        for name in ("package.json", "package-lock.json", "run_console_test.py"):
            shutil.copy2(os.path.join(ROOT, "tests", "browser", name), cls.browser)
        os.makedirs(os.path.join(cls.tmp, "tests", "integration"))
        shutil.copy2(os.path.join(HERE, "skips.py"), os.path.join(cls.tmp, "tests", "integration"))
        stubs = os.path.join(cls.tmp, "stubs")
        os.mkdir(stubs)
        with open(os.path.join(stubs, "apt-get"), "w", encoding="utf-8") as f:
            f.write('#!/bin/sh\necho "stub apt-get called: $*" >&2\nexit 1\n')
        os.chmod(os.path.join(stubs, "apt-get"), 0o755)
        env = dict(os.environ, PATH=stubs + os.pathsep + os.environ.get("PATH", ""),
                   npm_config_registry=UNREACHABLE, npm_config_fetch_retries="0",
                   npm_config_cache=os.path.join(cls.tmp, "npm-cache"))
        env.pop("PGCLD_REQUIRE_SUITE_DEPS", None)
        cls.install = subprocess.run([os.path.join(cls.tmp, "deploy", "install-deps.sh"), "--test"], env=env,
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)

    def setUp(self):
        if "stub apt-get called" in self.install.stderr:
            skips.missing_in_case(self, "Debian packages that deploy/install-deps.sh --test installs "
                                        f"(it tried apt-get): {self.install.stdout.strip()}")

    def browser_test(self, require):
        env = dict(os.environ, PGCLD_REQUIRE_SUITE_DEPS="1" if require else "0")
        return subprocess.run([sys.executable, os.path.join(self.browser, "run_console_test.py")], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    def test_install_deps_goes_on_and_says_why(self):
        self.assertEqual(self.install.returncode, 0, self.install.stdout + self.install.stderr)
        lines = self.install.stdout.splitlines()
        self.assertTrue(lines and all(line.startswith("install-deps: ") for line in lines), lines)
        self.assertRegex(lines[0], r"^install-deps: all \d+ Debian packages already installed$")
        self.assertIn("install-deps: npm ci in tests/browser", self.install.stdout)
        failed = [line for line in lines if "npm ci failed" in line]
        self.assertEqual(len(failed), 1, lines)
        self.assertIn("ECONNREFUSED", failed[0])
        self.assertIn(f"registry {UNREACHABLE}", failed[0])
        self.assertTrue(failed[0].endswith(": the browser test (tests/browser) will skip; everything else is installed"),
                        failed[0])
        self.assertEqual(lines[-1], "install-deps: dependencies present")
        with open(os.path.join(self.browser, ".npm-ci-failed"), encoding="utf-8") as f:
            self.assertIn("ECONNREFUSED", f.read())
        self.assertFalse(os.path.exists(os.path.join(self.browser, "node_modules", "playwright-core")))

    def test_the_browser_test_skips_with_the_reason_and_the_summary_lists_it(self):
        p = self.browser_test(require=True)
        self.assertEqual(p.returncode, skips.SKIP_STATUS, p.stdout + p.stderr)
        skip_line = p.stdout.strip().splitlines()[-1]
        self.assertTrue(skip_line.startswith("SKIP: tests/browser/node_modules/playwright-core is missing"), skip_line)
        self.assertIn("ECONNREFUSED", skip_line)
        # what meson records of it, read by tests/run_all.sh's closing summary
        os.makedirs(os.path.join(self.tmp, "build-x", "meson-logs"), exist_ok=True)
        log = os.path.join("build-x", "meson-logs", "testlog.json")  # the build: its first component
        with open(os.path.join(self.tmp, log), "w", encoding="utf-8") as f:
            f.write(json.dumps({"name": "pgcld:browser / test_console_browser", "result": "SKIP",
                                "stdout": p.stdout}) + "\n")
        s = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "closing_summary.py"), log],
                           cwd=self.tmp, capture_output=True, text=True, timeout=60)
        self.assertEqual(s.returncode, 0, s.stderr)
        out = s.stdout.splitlines()
        self.assertIn("Skipped:", out)
        self.assertIn(f"  browser/test_console_browser [build-x]: {skip_line[len('SKIP: '):]}", out)
        self.assertEqual(out[-1], "0 passed, 0 failed, 1 skipped (1 whole tests, 0 cases inside tests that ran)")

    def test_without_the_note_missing_modules_still_fail_under_run_all(self):
        note = os.path.join(self.browser, ".npm-ci-failed")
        os.rename(note, note + ".away")
        self.addCleanup(os.rename, note + ".away", note)
        p = self.browser_test(require=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL: missing suite dependency: tests/browser/node_modules/playwright-core is missing", p.stdout)


if __name__ == "__main__":
    unittest.main()
