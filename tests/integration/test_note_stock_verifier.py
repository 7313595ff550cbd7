"""pgcld's signed notes against the stock verifier (issue 28).

core/audit/log/note.h makes and opens C2SP signed notes, checkpoints and cosignatures; a verifier
that is not ours must agree with it. The stock one is Go's golang.org/x/mod/sumdb/note (Debian's
golang-golang-x-mod-dev), driven by tests/tlog/verify_note, which this test builds with Debian's Go
in GOPATH mode (nothing is downloaded; its build cache lives in the test's temporary directory).
The C side is tests/core/note_tool ($PGCLD_NOTE_TOOL).

  - keys cross over: Go reads C's signer keys and C reads Go's, and both sign a text to the same
    bytes (Ed25519 is deterministic);
  - C signs, Go verifies; Go signs, C verifies (texts with blank lines, Unicode, 100 kB);
  - a tampered text, a tampered signature, another key, another key name: both refuse;
  - cosignatures/v1 (x/mod 0.7.0 does not know them: tests/tlog/verify_note checks them with
    crypto/ed25519 from the specification): C's and Go's lines are the same bytes, each verifies the
    other's, a changed timestamp is refused by both; a witness's answer is kept by C;
  - checkpoint texts: C's format, and both parsers on good and bad texts;
  - pgcld's signing key file (`pgcld audit keygen`) as a note key: Go makes the same verifier key
    from the public key keygen printed (and `pgcld audit note-key` prints it), and verifies what C
    signs with the file;
  - 5000 mutations of signed notes (bytes changed, cut, inserted; lines repeated, dropped, swapped):
    C and Go accept the same ones with the same text, and refuse the others. The one difference
    allowed is by design: C refuses base64 with non-zero unused bits, which Go reads.

Without Go or x/mod it skips, and fails under PGCLD_REQUIRE_SUITE_DEPS=1 (tests/run_all.sh):
`deploy/install-deps.sh --test` installs golang-go and golang-golang-x-mod-dev.

Run: PGCLD_NOTE_TOOL=build/tests/note_tool PGCLD_BIN=build/server/pgcld \\
     /usr/bin/python3 tests/integration/test_note_stock_verifier.py
"""
import base64
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import skips  # noqa: E402

ROOT = os.path.abspath(os.environ.get("PGCLD_SOURCE_ROOT") or os.path.join(HERE, os.pardir, os.pardir))
NOTE_TOOL = os.environ.get("PGCLD_NOTE_TOOL") or os.path.join(ROOT, "build", "tests", "note_tool")
PGCLD = os.environ.get("PGCLD_BIN") or os.path.join(ROOT, "build", "server", "pgcld")
GO = shutil.which("go") or "/usr/bin/go"
GOPATH = "/usr/share/gocode"
XMOD_NOTE = os.path.join(GOPATH, "src", "golang.org", "x", "mod", "sumdb", "note", "note.go")
GO_DEPS = "go and golang.org/x/mod (Debian's golang-go and golang-golang-x-mod-dev; deploy/install-deps.sh --test)"
TIMEOUT_S = 120
EM_DASH = "\u2014 "
LOG = "example.com/pgcld/w1"
WITNESS = "witness.example/w1"
MUTANTS = 5000


def have_go():
    return os.access(GO, os.X_OK) and os.path.isfile(XMOD_NOTE)


def run(argv, stdin=b"", env=None, cwd=None):
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S, env=env, cwd=cwd)


def b64_canonical(s):
    """Whether s is base64 whose decoding encodes back to s (no non-zero unused bits)."""
    try:
        return base64.b64encode(base64.b64decode(s, validate=True)).decode() == s
    except (ValueError, UnicodeError):
        return True  # not base64 at all: both refuse it, for their own reasons


def has_non_canonical_signature(note):
    """Whether a signature line of note (bytes) carries base64 that only a lenient decoder reads."""
    split = note.rfind(b"\n\n")
    if split < 0:
        return False
    for line in note[split + 2:].split(b"\n"):
        parts = line.decode("utf-8", "replace").split(" ", 2)
        if len(parts) == 3 and not b64_canonical(parts[2]):
            return True
    return False


class NoteStockVerifierTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-note-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.go_tool = os.path.join(cls.tmp, "verify_note")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cls.tmp, "GO111MODULE": "off",
               "GOPATH": GOPATH, "GOCACHE": os.path.join(cls.tmp, "gocache"), "GOENV": "off", "GOFLAGS": "",
               "CGO_ENABLED": "0", "GOTMPDIR": cls.tmp}
        built = subprocess.run([GO, "build", "-o", cls.go_tool, "./tests/tlog/verify_note"], cwd=ROOT, env=env,
                               capture_output=True, timeout=600)
        if built.returncode != 0:
            raise AssertionError(f"go build tests/tlog/verify_note failed:\n{built.stderr.decode()}")
        cls.c_skey, cls.c_vkey = cls.c_ok("keygen", LOG).decode().split()
        cls.go_skey, cls.go_vkey = cls.go_ok("keygen", LOG).decode().split()
        cls.w_skey, cls.w_vkey = cls.c_ok("keygen", WITNESS, "4").decode().split()

    # ---- the two tools ----

    @classmethod
    def c(cls, *args, stdin=b""):
        return run([NOTE_TOOL, *args], stdin)

    @classmethod
    def go(cls, *args, stdin=b""):
        return run([cls.go_tool, *args], stdin)

    @classmethod
    def c_ok(cls, *args, stdin=b""):
        r = cls.c(*args, stdin=stdin)
        if r.returncode != 0:
            raise AssertionError(f"note_tool {' '.join(args)}: {r.returncode}: {r.stderr.decode()}")
        return r.stdout

    @classmethod
    def go_ok(cls, *args, stdin=b""):
        r = cls.go(*args, stdin=stdin)
        if r.returncode != 0:
            raise AssertionError(f"verify_note {' '.join(args)}: {r.returncode}: {r.stderr.decode()}")
        return r.stdout

    def both_refuse(self, note, c_keys, go_keys, what):
        c, go = self.c("verify", *c_keys, stdin=note), self.go("verify", *go_keys, stdin=note)
        self.assertEqual(c.returncode, 1, f"C accepted {what}: {c.stdout!r}")
        self.assertEqual(go.returncode, 1, f"Go accepted {what}: {go.stdout!r}")

    @staticmethod
    def public_hex(vkey):
        return base64.b64decode(vkey.split("+", 2)[2])[1:].hex()

    TEXTS = [
        b"a\n",
        b"\n",
        b"example.com/pgcld/w1\n42\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
        "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned \u00e8 subito sera.\n".encode(),
        "blank lines\n\n\nat the end\n\n".encode(),
        "\u2014 looks like a signature\n\ufffd\x7f \U0001f511 \u3000\n".encode(),
        b"".join(b"line %06d of a long note\n" % i for i in range(4000)),
    ]

    # ---- cases ----

    def test_keys_cross_over(self):
        self.assertEqual(self.c_ok("vkey", self.go_skey).decode().strip(), self.go_vkey, "C reads Go's signer key")
        text = self.TEXTS[3]
        for skey, vkey in ((self.go_skey, self.go_vkey), (self.c_skey, self.c_vkey)):
            with self.subTest(key=vkey):
                c_note, go_note = self.c_ok("sign", skey, stdin=text), self.go_ok("sign", skey, stdin=text)
                self.assertEqual(c_note, go_note, "the same signed note, byte for byte")

    def test_c_signs_go_verifies(self):
        _, other_vkey = self.c_ok("keygen", "example.com/other").decode().split()
        other_skey = self.c_ok("keygen", "example.com/other").decode().split()[0]
        for i, text in enumerate(self.TEXTS):
            with self.subTest(text=i):
                note = self.c_ok("sign", self.c_skey, other_skey, stdin=text)
                self.assertEqual(self.go_ok("verify", self.c_vkey, stdin=note), text)
                self.assertEqual(self.go_ok("verify", self.c_vkey, other_vkey, stdin=note), text,
                                 "an unknown other key is ignored")

    def test_go_signs_c_verifies(self):
        for i, text in enumerate(self.TEXTS):
            with self.subTest(text=i):
                note = self.go_ok("sign", self.go_skey, self.c_skey, stdin=text)
                self.assertEqual(self.c_ok("verify", self.go_vkey, stdin=note), text)
                self.assertEqual(self.c_ok("verify", self.c_vkey, stdin=note), text)

    def test_both_refuse_tampering(self):
        text = self.TEXTS[2]
        other_skey, other_vkey = self.go_ok("keygen", LOG).decode().split()  # same name, another key
        renamed = self.go_ok("vkey", "example.com/pgcld/w2", self.public_hex(self.c_vkey)).decode().strip()
        for signer, skey, vkey in (("C", self.c_skey, self.c_vkey), ("Go", self.go_skey, self.go_vkey)):
            tool = self.c_ok if signer == "C" else self.go_ok
            note = tool("sign", skey, stdin=text)
            with self.subTest(signer=signer):
                self.assertEqual(self.c_ok("verify", vkey, stdin=note), text)
                self.assertEqual(self.go_ok("verify", vkey, stdin=note), text)
                self.both_refuse(note.replace(b"\n42\n", b"\n43\n"), [vkey], [vkey], "a tampered text")
                sig_at = note.rindex(b" ") + 20
                flipped = note[:sig_at] + (b"B" if note[sig_at:sig_at + 1] != b"B" else b"C") + note[sig_at + 1:]
                self.both_refuse(flipped, [vkey], [vkey], "a tampered signature")
                self.both_refuse(note, [other_vkey], [other_vkey], "another key of the same name")
                if signer == "C":
                    self.both_refuse(note, [renamed], [renamed], "the same key under another name")
                self.both_refuse(note, [self.w_vkey], ["-c", self.w_vkey], "only a witness's key")

    def test_cosignatures(self):
        text = self.c_ok("checkpoint", LOG, "7", "ab" * 32)
        self.assertEqual(self.go_ok("checkpoint", stdin=text).decode().split(), [LOG, "7", "ab" * 32, "0"])
        signed = self.c_ok("sign", self.c_skey, stdin=text)
        t = "1679315147"
        c_line = self.c_ok("sign", "--time", t, self.w_skey, stdin=text)[len(text) + 1:]
        go_line = self.go_ok("cosign", self.w_skey, t, stdin=text)
        self.assertTrue(c_line.startswith(EM_DASH.encode() + WITNESS.encode() + b" "), c_line)
        self.assertEqual(c_line, go_line, "the same cosignature, byte for byte")
        cosigned = signed + c_line
        self.assertEqual(self.go_ok("verify", "-c", self.w_vkey, stdin=cosigned), text)
        self.assertEqual(self.go_ok("verify", self.c_vkey, "-c", self.w_vkey, stdin=cosigned), text)
        r = self.c("verify", self.c_vkey, self.w_vkey, stdin=cosigned)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"verified {WITNESS}+".encode(), r.stderr)
        self.assertIn(f" {t}\n".encode(), r.stderr)
        opened = self.c_ok("open-checkpoint", self.c_vkey, "1", self.w_vkey, stdin=cosigned).decode().split()
        self.assertEqual(opened, [LOG, "7", "ab" * 32, "1"])
        self.assertEqual(self.c("open-checkpoint", self.c_vkey, "1", self.w_vkey, stdin=signed).returncode, 1,
                         "no cosignature, quorum 1")
        # a changed timestamp (its bytes follow the key ID's four)
        raw = bytearray(base64.b64decode(c_line.split(b" ")[2]))
        raw[11] ^= 1
        bad = signed + EM_DASH.encode() + WITNESS.encode() + b" " + base64.b64encode(bytes(raw)) + b"\n"
        self.both_refuse(bad, [self.c_vkey, self.w_vkey], [self.c_vkey, "-c", self.w_vkey], "a changed timestamp")
        # a witness's answer: other witnesses' lines and its own
        other_w = self.c_ok("keygen", "witness.example/w2", "4").decode().split()[0]
        answer = self.go_ok("cosign", other_w, "1700000000", stdin=text) + go_line
        with open(os.path.join(self.tmp, "checkpoint.txt"), "wb") as f:
            f.write(text)
        kept = self.c_ok("witness-answer", self.w_vkey, os.path.join(self.tmp, "checkpoint.txt"), stdin=answer)
        self.assertEqual(kept, t.encode() + b"\n" + go_line)

    def test_checkpoint_parsers_agree(self):
        root = base64.b64encode(bytes(range(32))).decode()
        good = [f"o\n0\n{root}\n", f"example.com/x\n9223372036854775807\n{root}\n", f"o r\n1\n{root}\next\nmore\n"]
        bad = ["", "o\n", f"o\n1\n{root}", f"\n1\n{root}\n", f"o\n01\n{root}\n", f"o\n-1\n{root}\n",
               f"o\n9223372036854775808\n{root}\n", f"o\n1\n{root[:-2]}9=\n", f"o\n1\n{root}\n\n", f"o\n1\n{root}\na\n\nb\n",
               f"o\n1\n{root[:-1]}\n", f"o\n+1\n{root}\n"]
        for text in good:
            with self.subTest(good=text):
                self.assertEqual(self.c_ok("parse-checkpoint", stdin=text.encode()),
                                 self.go_ok("checkpoint", stdin=text.encode()))
        for text in bad:
            with self.subTest(bad=text):
                self.assertEqual(self.c("parse-checkpoint", stdin=text.encode()).returncode, 1)
                self.assertEqual(self.go("checkpoint", stdin=text.encode()).returncode, 1)

    @skips.needs(os.access(PGCLD, os.X_OK), f"the pgcld binary ({PGCLD})")
    def test_signing_key_file_as_note_key(self):
        path = os.path.join(self.tmp, "signing.key")
        keygen = run([PGCLD, "audit", "keygen", "--out", path], cwd=self.tmp)
        self.assertEqual(keygen.returncode, 0, keygen.stderr)
        public_hex = keygen.stdout.decode().strip()
        vkey = self.c_ok("key-file-vkey", path, LOG).decode().strip()
        self.assertEqual(vkey, self.go_ok("vkey", LOG, public_hex).decode().strip(),
                         "Go's verifier key of keygen's public key")
        note = self.c_ok("key-file-sign", path, LOG, stdin=self.TEXTS[2])
        self.assertEqual(self.go_ok("verify", vkey, stdin=note), self.TEXTS[2])
        # what an operator runs: `pgcld audit note-key` prints the same verifier key
        cli = run([PGCLD, "audit", "note-key", "--signing-key", path, "--origin", LOG], cwd=self.tmp)
        self.assertEqual((cli.returncode, cli.stdout.decode()), (0, vkey + "\n"), cli.stderr)
        bad = run([PGCLD, "audit", "note-key", "--signing-key", path, "--origin", "two words"], cwd=self.tmp)
        self.assertEqual(bad.returncode, 1, bad.stderr)
        self.assertIn("key name", bad.stderr.decode())

    def test_mutations_judged_alike(self):
        rng = random.Random(28)
        text = self.TEXTS[2]
        t = "1700000000"
        notes = [
            self.c_ok("sign", self.c_skey, stdin=text) + self.c_ok("sign", "--time", t, self.w_skey, stdin=text)[len(text) + 1:],
            self.go_ok("sign", self.go_skey, self.c_skey, stdin=self.TEXTS[4]),
            self.go_ok("sign", self.go_skey, stdin=self.TEXTS[5]) + self.go_ok("sign", self.go_skey,
                                                                               stdin=self.TEXTS[5])[len(self.TEXTS[5]) + 1:],
        ]
        pool = [b"\n", b" ", b"+", b"/", b"=", b"A", b"z", b"0", b"\x00", b"\t", b"\r", b"\x7f", b"\x80", b"\xc2",
                b"\xe2", b"\x94", b"\xff", "\u2014".encode(), "\u00a0".encode(), b"\n\n"]

        def mutate(note):
            lines = note.split(b"\n")
            kind = rng.randrange(7)
            at = rng.randrange(len(note))
            if kind == 0:
                return note[:at] + rng.choice(pool) + note[at + 1:]
            if kind == 1:
                return note[:at] + note[at + 1:]
            if kind == 2:
                return note[:at] + rng.choice(pool) + note[at:]
            if kind == 3:
                return note[:at] + bytes([note[at] ^ (1 << rng.randrange(8))]) + note[at + 1:]
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == 4:
                lines.insert(i, lines[j])
            elif kind == 5:
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            return b"\n".join(lines)

        mutants = [n for n in notes]
        while len(mutants) < MUTANTS:
            m = rng.choice(notes)
            for _ in range(rng.randrange(1, 4)):
                m = mutate(m) or b"\n"
            mutants.append(m)
        batch = b"".join(base64.b64encode(m) + b"\n" for m in mutants)
        keys = [self.c_vkey, self.w_vkey, self.go_vkey]
        c_out = self.c_ok("verify-batch", *keys, stdin=batch).decode().splitlines()
        go_out = self.go_ok("verify-batch", self.c_vkey, "-c", self.w_vkey, self.go_vkey, stdin=batch).decode().splitlines()
        self.assertEqual((len(c_out), len(go_out)), (len(mutants), len(mutants)))
        accepted = by_design = 0
        for m, c, go in zip(mutants, c_out, go_out):
            c_ok, go_ok = c.startswith("ok "), go.startswith("ok ")
            if c_ok and go_ok:
                self.assertEqual(c, go, f"the same text: {m!r}")
                accepted += 1
            elif c_ok != go_ok:
                if go_ok and has_non_canonical_signature(m):
                    by_design += 1
                    continue
                self.fail(f"C says {c[:120]!r}, Go says {go[:120]!r}, of {m!r}")
        print(f"mutants: {len(mutants)}, accepted by both: {accepted}, refused by both: "
              f"{len(mutants) - accepted - by_design}, refused by C only (non-canonical base64): {by_design}")
        self.assertGreater(accepted, 3)
        self.assertGreater(len(mutants) - accepted - by_design, MUTANTS // 2)


if __name__ == "__main__":
    if not have_go():
        skips.missing_for_program(GO_DEPS)
    if not os.access(NOTE_TOOL, os.X_OK):
        skips.missing_for_program(f"tests/core/note_tool ({NOTE_TOOL}; the build makes it)")
    unittest.main(verbosity=2)
