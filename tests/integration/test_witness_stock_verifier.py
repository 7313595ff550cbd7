"""The test witness (tests/tlog/witness.py) held against the stock verifiers (issue 28).

tests/core/test_witness.c trusts tests/tlog/witness.py to behave as c2sp.org/tlog-witness says; this
test checks that witness with code that is neither pgcld's client nor the witness itself:
  - its cosignature/v1 lines verify with tests/tlog/verify_note (Go: golang.org/x/mod/sumdb/note and
    crypto/ed25519 from c2sp.org/tlog-cosignature) and with pgcld's note_tool open-checkpoint, over a
    checkpoint signed by pgcld's note_tool; a changed timestamp is refused by both;
  - it follows a log from the empty tree with consistency proofs computed here from RFC 9162's
    recursive definition (a third implementation), and refuses a bad proof (422);
  - its answers by status: 400 (old size above the checkpoint's), 403 (signed by another key of the
    same name), 404 (unknown origin), 409 with Content-Type text/x.tlog.size and its size.
Without Go it skips, and fails under PGCLD_REQUIRE_SUITE_DEPS=1 (tests/run_all.sh).

Run: PGCLD_NOTE_TOOL=build/tests/note_tool /usr/bin/python3 tests/integration/test_witness_stock_verifier.py
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rfc6962 import mth, subproof  # noqa: E402
import skips  # noqa: E402
from test_tlog_stock_verifier import go_env  # noqa: E402

ROOT = os.path.abspath(os.environ.get("PGCLD_SOURCE_ROOT") or os.path.join(HERE, os.pardir, os.pardir))
NOTE_TOOL = os.environ.get("PGCLD_NOTE_TOOL") or os.path.join(ROOT, "build", "tests", "note_tool")
GO = shutil.which("go") or "/usr/bin/go"
GOPATH = "/usr/share/gocode"
XMOD_NOTE = os.path.join(GOPATH, "src", "golang.org", "x", "mod", "sumdb", "note", "note.go")
GO_DEPS = "go and golang.org/x/mod (Debian's golang-go and golang-golang-x-mod-dev; deploy/install-deps.sh --test)"
LOG = "example.com/pgcld/witnessed"
TIMEOUT_S = 120
EM_DASH = "\u2014 "


def run(argv, stdin=b""):
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S)


def leaf(i):
    return hashlib.sha256(b"\x00" + b"leaf %d" % i).digest()






class WitnessStockVerifierTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-witness-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.go_tool = os.path.join(cls.tmp, "verify_note")
        built = subprocess.run([GO, "build", "-o", cls.go_tool, "./tests/tlog/verify_note"], cwd=ROOT,
                               env=go_env(cls.tmp),
                               capture_output=True, timeout=600)
        if built.returncode != 0:
            raise AssertionError(f"go build tests/tlog/verify_note failed:\n{built.stderr.decode()}")
        cls.skey, cls.vkey = cls.tool("keygen", LOG).decode().split()
        cls.witness = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(ROOT, "tests", "tlog", "witness.py"), "--name", "w.example",
             "--seed", "55" * 32, "--log", cls.vkey], stdout=subprocess.PIPE)
        cls.addClassCleanup(cls.witness.wait)
        cls.addClassCleanup(cls.witness.terminate)
        hello = json.loads(cls.witness.stdout.readline())
        cls.url = "http://127.0.0.1:%d/add-checkpoint" % hello["port"]
        cls.w_vkey = hello["vkey"]
        cls.leaves = [leaf(i) for i in range(40)]

    @classmethod
    def tool(cls, *args, stdin=b""):
        r = run([NOTE_TOOL, *args], stdin)
        if r.returncode != 0:
            raise AssertionError(f"note_tool {args[0]}: {r.stderr.decode()}")
        return r.stdout

    def checkpoint(self, size, skey=None):
        """(text, signed note) of the checkpoint of the first size leaves."""
        text = self.tool("checkpoint", LOG, str(size), mth(self.leaves[:size]).hex())
        return text, self.tool("sign", skey or self.skey, stdin=text)

    def post(self, old, proof, note):
        body = b"old %d\n" % old + b"".join(base64.b64encode(h) + b"\n" for h in proof) + b"\n" + note
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url, data=body), timeout=10) as r:
                return r.status, r.headers.get("Content-Type"), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read()

    def verified_by_both(self, text, cosigned):
        go = run([self.go_tool, "verify", "-c", self.w_vkey, self.vkey], cosigned)
        self.assertEqual(go.returncode, 0, go.stderr.decode())
        self.assertEqual(go.stdout, text)
        c = run([NOTE_TOOL, "open-checkpoint", self.vkey, "1", self.w_vkey], cosigned)
        self.assertEqual(c.returncode, 0, c.stderr.decode())

    def test_a_log_followed_and_cosigned(self):
        sizes = [0, 3, 8, 8, 21, 40]
        old = 0
        for size in sizes:
            text, note = self.checkpoint(size)
            proof = subproof(old, self.leaves[:size], True) if 0 < old < size else []
            status, _, line = self.post(old, proof, note)
            self.assertEqual(status, 200, f"{old} -> {size}: {line!r}")
            self.assertTrue(line.decode().startswith(EM_DASH + "w.example "), line)
            self.verified_by_both(text, note + line)
            # the cosignature's timestamp changed: both refuse
            name, sig = line.decode()[len(EM_DASH):].split()
            raw = bytearray(base64.b64decode(sig))
            raw[11] ^= 1
            forged = note + (EM_DASH + name + " " + base64.b64encode(bytes(raw)).decode() + "\n").encode()
            self.assertNotEqual(run([self.go_tool, "verify", "-c", self.w_vkey, self.vkey], forged).returncode, 0)
            self.assertNotEqual(run([NOTE_TOOL, "open-checkpoint", self.vkey, "1", self.w_vkey], forged).returncode,
                                0)
            old = size
        # now at 40: a bad proof is refused, a stale old size is a conflict with the size in the body
        _, note = self.checkpoint(40)
        self.assertEqual(self.post(39, [], note)[0], 409)
        status, ctype, body = self.post(21, [], note)
        self.assertEqual((status, ctype, body), (409, "text/x.tlog.size", b"40\n"))
        extra = self.leaves + [leaf(40)]
        self.leaves = extra
        _, note41 = self.checkpoint(41)
        proof = subproof(40, extra, True)
        proof[0] = bytes([proof[0][0] ^ 1]) + proof[0][1:]
        self.assertEqual(self.post(40, proof, note41)[0], 422)

    def test_refusals(self):
        _, note = self.checkpoint(3)
        self.assertEqual(self.post(4, [], note)[0], 400, "an old size above the checkpoint's")
        impostor_skey, _ = self.tool("keygen", LOG).decode().split()
        _, forged = self.checkpoint(3, impostor_skey)
        self.assertEqual(self.post(0, [], forged)[0], 403, "another key of the log's name")
        other_skey, _ = self.tool("keygen", "example.com/another-log").decode().split()
        text = self.tool("checkpoint", "example.com/another-log", "0", mth([]).hex())
        self.assertEqual(self.post(0, [], self.tool("sign", other_skey, stdin=text))[0], 404, "an unknown origin")


if __name__ == "__main__":
    if not (os.access(GO, os.X_OK) and os.path.isfile(XMOD_NOTE)):
        skips.missing_for_program(GO_DEPS)
    if subprocess.run(["/usr/bin/python3", "-c", "import cryptography"], capture_output=True).returncode != 0:
        skips.missing_for_program("python3-cryptography (the test witness's Ed25519; deploy/install-deps.sh --test)")
    if not os.access(NOTE_TOOL, os.X_OK):
        skips.missing_for_program(f"tests/core/note_tool ({NOTE_TOOL}; the build makes it)")
    unittest.main()
