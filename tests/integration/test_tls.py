#!/usr/bin/python3
"""HTTPS: --tls-cert / --tls-key (libmicrohttpd + GnuTLS), checked with the openssl and curl CLIs.

A self-signed certificate (CN=localhost, SAN IP:127.0.0.1) is made with `openssl req` in a
temporary directory. The daemon serves /healthz and /v1/score over https (curl --cacert), refuses
plain http on the TLS port, refuses TLS 1.2 when --tls-min-version 1.3, warns about a key file
others can read, and refuses to start (exit 2, a message naming the file) with a missing,
unreadable, non-PEM, corrupt, encrypted or mismatched key, or with only one of the two options.
Run as root, the unreadable-key case starts the daemon without root's file-access override
(setpriv drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set), and skips only
where that cannot be done. Without openssl or curl the tests skip when run by hand and fail under
tests/run_all.sh (tests/integration/skips.py): deploy/install-deps.sh --test installs both.

Run: /usr/bin/python3 tests/integration/test_tls.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import skips  # noqa: E402

USAGE_ERROR = 2
EXAMPLE = os.path.join(H.SOURCE_ROOT, "docs", "examples", "score-request.json")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_cert(d, name):
    """name.crt / name.key: a self-signed P-256 certificate for localhost and 127.0.0.1."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", cwd=d)
    os.chmod(os.path.join(d, f"{name}.key"), 0o600)
    return os.path.join(d, f"{name}.crt"), os.path.join(d, f"{name}.key")


def curl(*args, timeout=60):
    return subprocess.run(["curl", "-sS", "--noproxy", "*", "--max-time", "30", *args],
                          capture_output=True, text=True, timeout=timeout)


@skips.needs(shutil.which("openssl") and shutil.which("curl"), "the openssl and curl CLIs")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="pgcld-tls-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.cert, cls.key = make_cert(cls.dir, "server")
        cls.d = H.start_daemon(cls, models=("toxicity",),
                               args=["--tls-cert", cls.cert, "--tls-key", cls.key])
        cls.base = f"https://127.0.0.1:{cls.d.port}"

    def https(self, path, *extra):
        r = curl("--cacert", self.cert, "-w", "\n%{http_code}", *extra, self.base + path)
        self.assertEqual(r.returncode, 0, f"curl failed: {r.stderr}\n{self.d.logs()}")
        body, _, code = r.stdout.rpartition("\n")
        return int(code), body

    def test_healthz_and_readyz_over_tls(self):
        code, body = self.https("/healthz")
        self.assertEqual(code, 200, body)
        self.assertTrue(H.wait_until(lambda: self.https("/readyz")[0] == 200, timeout=60))

    def test_score_over_tls(self):
        before = self.d.count()
        code, body = self.https("/v1/score", "-H", f"Authorization: Bearer {self.d.keys['scorer']}",
                                "-H", "Content-Type: application/json", "--data-binary", "@" + EXAMPLE)
        self.assertEqual(code, 200, body)
        answer = json.loads(body)
        self.assertEqual(len(answer["results"]), 2)
        self.assertEqual(self.d.count(), before + 2)
        for r in answer["results"]:
            self.assertRegex(r["decision_id"], H.UUID7_RE)

    def test_auth_still_required_over_tls(self):
        code, body = self.https("/v1/models")
        self.assertEqual(code, 401, body)

    def test_certificate_is_verified(self):
        # Without the CA, curl must refuse the self-signed certificate: the client really verifies.
        r = curl(self.base + "/healthz")
        self.assertNotEqual(r.returncode, 0)

    def test_plain_http_to_tls_port_fails(self):
        r = curl("-w", "%{http_code}", f"http://127.0.0.1:{self.d.port}/healthz")
        self.assertTrue(r.returncode != 0 or not r.stdout.endswith("200"), r)
        # And the daemon keeps serving TLS afterwards.
        self.assertEqual(self.https("/healthz")[0], 200)

    def test_tls_1_2_accepted_by_default(self):
        code, _ = self.https("/healthz", "--tlsv1.2", "--tls-max", "1.2")
        self.assertEqual(code, 200)

    def test_key_with_private_mode_logs_no_warning(self):
        with open(self.d._stderr_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        self.assertIn("tls: HTTPS with tls-cert", log)
        self.assertIn("listening on https://", log)
        self.assertNotIn("chmod 600", log)


@skips.needs(shutil.which("openssl") and shutil.which("curl"), "the openssl and curl CLIs")
class TlsMinVersionTest(unittest.TestCase):
    """--tls-min-version 1.3, with a key file others may read (a warning, not a refusal)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="pgcld-tls13-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.cert, cls.key = make_cert(cls.dir, "server")
        os.chmod(cls.key, 0o644)
        cls.d = H.start_daemon(cls, models=("tiny_binary",), default_model="tiny_binary",
                               args=["--tls-cert", cls.cert, "--tls-key", cls.key, "--tls-min-version", "1.3"])
        cls.base = f"https://127.0.0.1:{cls.d.port}/healthz"

    def test_tls_1_2_refused(self):
        r = curl("--cacert", self.cert, "--tlsv1.2", "--tls-max", "1.2", self.base)
        self.assertNotEqual(r.returncode, 0, r)

    def test_tls_1_3_accepted(self):
        r = curl("--cacert", self.cert, "--tlsv1.3", "-w", "%{http_code}", "-o", "/dev/null", self.base)
        self.assertEqual((r.returncode, r.stdout), (0, "200"), r.stderr)

    def test_readable_key_warned_about(self):
        with open(self.d._stderr_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        self.assertIn(f"tls-key '{self.key}' is accessible to its group or to others (mode 0644)", log)


@skips.needs(shutil.which("openssl"), "the openssl CLI")
class TlsRefusalTest(unittest.TestCase):
    """Every bad TLS set-up stops the daemon before it listens: exit 2 and a message naming the file."""

    @classmethod
    def setUpClass(cls):
        H.require_binary()
        cls.dir = tempfile.mkdtemp(prefix="pgcld-tlsbad-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.cert, cls.key = make_cert(cls.dir, "good")
        cls.other_cert, cls.other_key = make_cert(cls.dir, "other")
        cls.models = H.make_models_dir(cls.dir, ["tiny_binary"])

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def write(self, name, data, mode=0o600):
        p = os.path.join(self.dir, name)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def serve(self, *tls_args, prefix=()):
        db = os.path.join(self.dir, "audit.db")
        return subprocess.run([*prefix, H.PGCLD_BIN, "serve", "--listen", "127.0.0.1:0", "--models", self.models,
                               "--default-model", "tiny_binary", "--db", db,
                               "--port-file", os.path.join(self.dir, "port"), *tls_args],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                              cwd=self.dir)

    def assertRefused(self, p, *needles):
        self.assertEqual(p.returncode, USAGE_ERROR, p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "port")), "it listened")

    def test_missing_key_file(self):
        missing = os.path.join(self.dir, "nope.key")
        p = self.serve("--tls-cert", self.cert, "--tls-key", missing)
        self.assertRefused(p, f"tls-key '{missing}': cannot open: No such file or directory")

    def test_missing_cert_file(self):
        missing = os.path.join(self.dir, "nope.crt")
        p = self.serve("--tls-cert", missing, "--tls-key", self.key)
        self.assertRefused(p, f"tls-cert '{missing}': cannot open")

    def without_file_access_override(self, path):
        """The command prefix under which `path` (mode 000) cannot be read: none for a user; for root,
        setpriv dropping CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH. Skips where root cannot drop them."""
        if os.geteuid() != 0:
            return ()
        prefix = ("setpriv", "--bounding-set=-dac_override,-dac_read_search")
        try:
            probe = subprocess.run([*prefix, "cat", path], capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            self.skipTest("running as root, and setpriv (util-linux) is absent: root reads any file")
        if probe.returncode == 0 or "Permission denied" not in probe.stderr:
            self.skipTest("running as root, and setpriv cannot drop root's file-access override here: "
                          f"{probe.stderr.strip()[-200:] or 'it read the file'}")
        return prefix

    def test_unreadable_key_file(self):
        k = self.write("unreadable.key", self.read(self.key), 0o000)
        prefix = self.without_file_access_override(k)
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", k, prefix=prefix), "Permission denied")

    def test_key_is_not_pem(self):
        k = self.write("text.key", b"this is not a key\n")
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", k),
                           f"tls-key '{k}': no private key in the file")

    def test_key_with_corrupt_base64(self):
        text = self.read(self.key).replace(b"\n", b"\n@@@", 2)
        k = self.write("corrupt.key", text)
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", k),
                           f"tls-key '{k}': PEM block 1", "not valid base64")

    def test_truncated_key(self):
        lines = self.read(self.key).splitlines(keepends=True)
        k = self.write("truncated.key", b"".join(lines[:-1]))
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", k), f"tls-key '{k}'", "-----END")

    def test_empty_key(self):
        k = self.write("empty.key", b"")
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", k), f"tls-key '{k}': empty")

    def test_encrypted_key(self):
        enc = os.path.join(self.dir, "enc.key")
        openssl("pkey", "-in", self.key, "-out", enc, "-aes256", "-passout", "pass:secret", cwd=self.dir)
        self.assertRefused(self.serve("--tls-cert", self.cert, "--tls-key", enc), "is encrypted")

    def test_key_of_another_certificate(self):
        p = self.serve("--tls-cert", self.cert, "--tls-key", self.other_key)
        self.assertRefused(p, "GnuTLS refused", self.cert, self.other_key)

    def test_certificate_file_holding_a_key(self):
        self.assertRefused(self.serve("--tls-cert", self.key, "--tls-key", self.key),
                           f"tls-cert '{self.key}': no certificate in the file")

    def test_cert_without_key(self):
        p = self.serve("--tls-cert", self.cert)
        self.assertRefused(p, "tls-cert and tls-key go together")

    def test_key_without_cert_from_environment(self):
        env = dict(os.environ, PGCLD_TLS_KEY=self.key)
        p = subprocess.run([H.PGCLD_BIN, "serve", "--print-config"], capture_output=True, text=True,
                           timeout=60, env=env, cwd=self.dir)
        self.assertEqual(p.returncode, USAGE_ERROR, p.stderr)
        self.assertIn("tls-key is set but tls-cert is empty", p.stderr)

    def test_bad_min_version(self):
        p = self.serve("--tls-cert", self.cert, "--tls-key", self.key, "--tls-min-version", "1.0")
        self.assertRefused(p, "--tls-min-version: '1.0' must be 1.2 or 1.3")


if __name__ == "__main__":
    unittest.main(verbosity=2)
