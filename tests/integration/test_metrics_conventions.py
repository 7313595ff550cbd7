"""/metrics follows Prometheus' conventions (issue 19, item 5), against the real daemon over loopback.

A daemon with a real SQLite audit database scores a few items; then its live /metrics:
  - passes `promtool check metrics` (Debian's prometheus package) without a single warning;
  - has the process_* families as Prometheus' client libraries name them: the start time within the
    test's window, resident memory > 0 and below the virtual size, CPU seconds that grow while the
    daemon scores, open fds > 0 and at most the limit, the limit the daemon inherited;
  - pgcld_build_info{version, commit} 1: the version meson.build declares, the commit one of this
    repository's (or "unknown" outside a git checkout);
  - pgcld_audit_db_size_bytes equal to the database file plus its -wal, as stat() sees them (no
    sample on the PostgreSQL store: tests/meson.build runs this program on both stores);
  - pgcld_audit_last_commit_timestamp_seconds within the window of the score that committed;
  - pgcld_requests_total's status under the conventional label name `code`.

Run: /usr/bin/python3 tests/integration/test_metrics_conventions.py (PGCLD_BIN selects the binary).
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import skips  # noqa: E402
from openapi_contract import parse_prometheus  # noqa: E402

PROMTOOL = shutil.which("promtool")
# process_start_time_seconds is the boot time (whole seconds, /proc/stat's btime, rounded down) plus
# the start in clock ticks: it may read up to a second before the real start.
START_SLACK_S = 1.5


def project_version():
    with open(os.path.join(H.SOURCE_ROOT, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


class MetricsConventionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models("toxicity")
        cls.D = H.load_config("toxicity")["dims"]["D"]
        cls.before_start = time.time()
        cls.d = H.start_daemon(cls, models=("toxicity",))
        cls.after_start = time.time()
        cls.score_window = cls.score(1)

    @classmethod
    def score(cls, seed, n=4):
        """Scores n items; returns the (time before, time after) of the request."""
        t0 = time.time()
        r = cls.d.score({"items": H.b64_items(H.random_embeddings(n, cls.D, seed=seed), f"mc{seed}-")})
        t1 = time.time()
        assert r.status == 200, r
        return t0, t1

    def scrape(self):
        r = self.d.get("/metrics", key="")
        self.assertEqual(r.status, 200, r)
        return r.body.decode()

    def families(self):
        return parse_prometheus(self.scrape())

    def value(self, families, name):
        """The one sample of an unlabelled family."""
        self.assertIn(name, families)
        samples = families[name]["samples"]
        self.assertEqual(len(samples), 1, samples)
        self.assertEqual(samples[0][1], {}, samples)
        return samples[0][2]

    @skips.needs(PROMTOOL is not None, "promtool (Debian's prometheus package)")
    def test_promtool_check_metrics(self):
        """promtool parses the live exposition and its linter finds nothing to say."""
        self.d.get("/no/such/route", key="")  # a 404 series beside the 200s
        text = self.scrape()
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout.strip(), p.stderr.strip()), (0, "", ""),
                         f"promtool check metrics:\n{p.stdout}{p.stderr}")

    def test_process_metrics(self):
        fams = self.families()
        for name, typ in (("process_start_time_seconds", "gauge"), ("process_resident_memory_bytes", "gauge"),
                          ("process_virtual_memory_bytes", "gauge"), ("process_cpu_seconds_total", "counter"),
                          ("process_open_fds", "gauge"), ("process_max_fds", "gauge")):
            with self.subTest(family=name):
                self.assertEqual(fams.get(name, {}).get("type"), typ, name)
                self.assertTrue(fams[name]["help"], name)
        start = self.value(fams, "process_start_time_seconds")
        self.assertGreaterEqual(start, self.before_start - START_SLACK_S)
        self.assertLessEqual(start, self.after_start)
        rss = self.value(fams, "process_resident_memory_bytes")
        self.assertGreater(rss, 0)
        self.assertLess(rss, self.value(fams, "process_virtual_memory_bytes"))
        open_fds = self.value(fams, "process_open_fds")
        self.assertGreater(open_fds, 0)
        # the daemon's own count of its descriptors, beside the one the test reads from outside
        self.assertLessEqual(abs(open_fds - len(os.listdir(f"/proc/{self.d.proc.pid}/fd"))), 4)
        # the daemon inherits the test's limit (subprocess changes no rlimit)
        self.assertEqual(self.value(fams, "process_max_fds"), resource.getrlimit(resource.RLIMIT_NOFILE)[0])

    def test_cpu_seconds_increase(self):
        first = self.value(self.families(), "process_cpu_seconds_total")
        self.assertGreater(first, 0)
        later, seed, deadline = first, 100, time.monotonic() + 60
        while later <= first and time.monotonic() < deadline:  # clock ticks are 10 ms: score until one passes
            self.score(seed, n=64)
            seed += 1
            later = self.value(self.families(), "process_cpu_seconds_total")
        self.assertGreater(later, first)

    def test_build_info(self):
        samples = self.families()["pgcld_build_info"]["samples"]
        self.assertEqual(len(samples), 1, samples)
        _, labels, value = samples[0]
        self.assertEqual((set(labels), value), ({"version", "commit"}, 1.0))
        self.assertEqual(labels["version"], project_version())
        commit = labels["commit"]
        self.assertRegex(commit, r"^([0-9a-f]{12}|unknown)$")
        git = shutil.which("git")
        in_checkout = git and subprocess.run([git, "-C", H.SOURCE_ROOT, "rev-parse", "HEAD"],
                                             capture_output=True).returncode == 0
        if in_checkout:
            # the commit the binary was built from (perhaps before HEAD): one of this repository's
            p = subprocess.run([git, "-C", H.SOURCE_ROOT, "cat-file", "-e", commit + "^{commit}"], capture_output=True)
            self.assertEqual(p.returncode, 0, f"build_info commit {commit!r} is not a commit of {H.SOURCE_ROOT}")

    def test_audit_db_size(self):
        """SQLite: the gauge equals the file plus its -wal; the writer may change them between the
        scrape and the stat, so the check is made when both stats around a scrape agree.
        PostgreSQL: the family is there, with no sample (documented)."""
        if self.d.on_postgres:
            self.assertEqual(self.families()["pgcld_audit_db_size_bytes"]["samples"], [])
            return
        db = self.d.db_path

        def on_disk():
            wal = db + "-wal"
            return os.path.getsize(db) + (os.path.getsize(wal) if os.path.exists(wal) else 0)

        for _ in range(50):
            before = on_disk()
            reported = self.value(self.families(), "pgcld_audit_db_size_bytes")
            if on_disk() == before:
                break
            time.sleep(0.1)
        self.assertGreater(before, 0)
        self.assertEqual(reported, before)

    def test_last_commit_timestamp(self):
        """Within the window of the scoring request whose rows it committed, and again after a later one."""
        t0, t1 = self.score_window
        ts = self.value(self.families(), "pgcld_audit_last_commit_timestamp_seconds")
        self.assertGreaterEqual(ts, t0 - 0.001)  # printed to the microsecond
        latest = time.time()
        self.assertLessEqual(ts, latest)
        t0, t1 = self.score(2)
        ts = self.value(self.families(), "pgcld_audit_last_commit_timestamp_seconds")
        self.assertGreaterEqual(ts, t0 - 0.001)
        self.assertLessEqual(ts, t1 + 0.001)

    def test_requests_counted_under_code(self):
        self.d.get("/no/such/route", key="")
        samples = self.families()["pgcld_requests_total"]["samples"]
        self.assertTrue(samples)
        for _, labels, _ in samples:
            self.assertEqual(set(labels), {"route", "code"}, labels)
        counted = {(lbl["route"], lbl["code"]) for _, lbl, _ in samples}
        self.assertIn(("POST /v1/score", "200"), counted)
        self.assertIn(("unmatched", "404"), counted)


if __name__ == "__main__":
    unittest.main()
