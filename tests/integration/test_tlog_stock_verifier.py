"""The transparency log's tiles against a stock client (issue 28).

tests/core/tlog_fixture writes a C2SP tlog-tiles log of 70,000 generated entries with pgcld's tile
code (core/audit/log/tiles.h) in commits of varying sizes — the spec's own example size: full and
partial tiles on levels 0, 1 and 2 — and unsigned checkpoint bodies at sizes 0, 1,000 and 65,536
on the way. tests/tlog/verify_tiles, built here from source with Debian's Go and
golang.org/x/mod/sumdb/{tlog,note} in GOPATH mode, must accept it: the tree hash from the tiles, the
inclusion of every entry of every bundle, and the consistency of each older checkpoint. It must
refuse tampered copies: a flipped byte in a full or partial tile of each level and in a full or
partial entry bundle, a missing or truncated tile, a checkpoint with a wrong size or root or a
malformed body, an older checkpoint inconsistent with the newer, of another origin or larger, a
published size whose partial tiles are gone; and with a note verifier key (-key), a checkpoint
without a valid signature by that key (signatures made here with `openssl pkeyutl`, Ed25519, as
C2SP signed-note lays them out).

Without Go and golang-golang-x-mod-dev (deploy/install-deps.sh --test installs both) the test skips,
and fails under PGCLD_REQUIRE_SUITE_DEPS=1 (tests/run_all.sh).

Run: meson test -C build-test test_tlog_stock_verifier, or
     PGCLD_TLOG_FIXTURE=build-test/tests/tlog_fixture /usr/bin/python3 tests/integration/test_tlog_stock_verifier.py
"""
import base64
import hashlib
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
FIXTURE = os.environ.get("PGCLD_TLOG_FIXTURE") or os.path.join(ROOT, "build-test", "tests", "tlog_fixture")
GOPATH = "/usr/share/gocode"
GO = shutil.which("go") or ("/usr/bin/go" if os.access("/usr/bin/go", os.X_OK) else None)
HAVE_GO = bool(GO) and all(os.path.isdir(os.path.join(GOPATH, "src", "golang.org", "x", "mod", "sumdb", p))
                           for p in ("tlog", "note"))
HAVE_OPENSSL = bool(shutil.which("openssl"))
ORIGIN = "pgcld.test/tlog"
SIZE = 70000
VERIFY_TIMEOUT_S = 240


def go_env(tmp):
    """GOPATH mode on Debian's packages, offline, with the build cache under the build directory."""
    cache = os.environ.get("PGCLD_GO_CACHE") or os.path.join(tmp, "go-cache")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=cache, GOFLAGS="-buildvcs=false",
               GOTOOLCHAIN="local", GOPROXY="off", GOENV="off", CGO_ENABLED="0")
    env.setdefault("HOME", tmp)
    return env


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


class Tampered:
    """Context manager: the file as it was, restored on exit."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        with open(self.path, "rb") as f:
            self.saved = f.read()
        return self.path

    def __exit__(self, *exc):
        with open(self.path, "wb") as f:
            f.write(self.saved)


@skips.needs(HAVE_GO, "Go with golang.org/x/mod/sumdb (golang-go, golang-golang-x-mod-dev: "
                      "deploy/install-deps.sh --test installs them)")
class StockVerifierTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(FIXTURE, os.X_OK):
            raise AssertionError(f"{FIXTURE} is not built (meson builds tests/core/tlog_fixture.c)")
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-tlog-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.verifier = os.path.join(cls.tmp, "verify_tiles")
        build = subprocess.run([GO, "build", "-o", cls.verifier, "./tests/tlog/verify_tiles"], cwd=ROOT,
                               env=go_env(cls.tmp), capture_output=True, text=True, timeout=600)
        if build.returncode != 0:
            raise AssertionError(f"go build tests/tlog/verify_tiles failed:\n{build.stdout}{build.stderr}")
        cls.log = os.path.join(cls.tmp, "log")
        cls.cp = {n: os.path.join(cls.tmp, f"checkpoint.{n}") for n in (0, 1000, 65536)}
        args = [FIXTURE, cls.log, str(SIZE), "--origin", ORIGIN, "--seed", "28"]
        for n, path in cls.cp.items():
            args += ["--checkpoint-at", str(n), path]
        cls.fixture_run = cls.fixture(args)

    @classmethod
    def fixture(cls, args):
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        return p.stdout

    def verify(self, *args, base=None):
        return subprocess.run([self.verifier, *args, base or self.log], capture_output=True, text=True,
                              timeout=VERIFY_TIMEOUT_S)

    def assert_passes(self, *args, base=None):
        p = self.verify(*args, base=base)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 1, p.stdout)
        self.assertTrue(lines[0].startswith("verify_tiles: OK "), lines[0])
        return lines[0]

    def assert_refuses(self, *args, why="", base=None):
        p = self.verify(*args, base=base)
        self.assertEqual(p.returncode, 1, f"expected a refusal ({why}):\n{p.stdout}{p.stderr}")
        self.assertEqual(p.stdout, "")
        self.assertTrue(p.stderr.startswith("verify_tiles: FAIL: "), p.stderr)
        if why:
            self.assertIn(why, p.stderr)
        return p.stderr

    def path(self, rel):
        p = os.path.join(self.log, rel)
        self.assertTrue(os.path.isfile(p), f"the fixture has no {rel}")
        return p

    def checkpoint_body(self, size, root_b64, origin=ORIGIN):
        return f"{origin}\n{size}\n{root_b64}\n"

    def read_checkpoint(self, path=None):
        with open(path or os.path.join(self.log, "checkpoint"), encoding="utf-8") as f:
            return f.read()

    # ---- what must pass ----

    def test_the_log_verifies(self):
        self.assertIn(f"tlog_fixture: {SIZE} entries in ", self.fixture_run)
        line = self.assert_passes()
        body = self.read_checkpoint().splitlines()
        self.assertEqual(body[:2], [ORIGIN, str(SIZE)])
        self.assertIn(f"OK {ORIGIN} size {SIZE} root {body[2]}: signatures not checked (no -key), tree hash, "
                      f"274 full tiles under their parents, {SIZE} entries included (274 bundles, ", line)
        # the spec's example: 273 full level 0 tiles and one of 112, a full level 1 tile and one of
        # 17, a level 2 tile of 1 — as files, with the partial tiles of the older checkpoints kept
        for rel in ("tile/0/272", "tile/0/273.p/112", "tile/1/000", "tile/1/001.p/17", "tile/2/000.p/1",
                    "tile/entries/272", "tile/entries/273.p/112", "tile/0/003.p/232", "tile/1/000.p/3",
                    "tile/entries/003.p/232"):
            self.path(rel)
        self.assertFalse(os.path.exists(os.path.join(self.log, "tile", "0", "274")))

    def test_older_checkpoints_are_consistent(self):
        for n, cp in self.cp.items():
            self.assertTrue(self.assert_passes("-old", cp, "-origin", ORIGIN).endswith(f", consistent with size {n}"))
        self.assert_passes("-old", os.path.join(self.log, "checkpoint"))

    def test_small_logs(self):
        for n in (0, 1, 2, 255, 256, 257, 511, 512, 513):
            base = os.path.join(self.tmp, f"small-{n}")
            old = os.path.join(self.tmp, f"small-{n}.old")
            self.fixture([FIXTURE, base, str(n), "--origin", ORIGIN, "--seed", str(n), "--checkpoint-at",
                          str(n // 2 + (n > 0)), old])
            line = self.assert_passes("-old", old, base=base)
            self.assertIn(f"size {n} ", line)
        empty = self.read_checkpoint(os.path.join(self.tmp, "small-0", "checkpoint")).splitlines()
        self.assertEqual(base64.b64decode(empty[2]), hashlib.sha256(b"").digest())

    def test_over_http(self):
        import http.server
        import threading
        log = self.log

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=log, **kwargs)

            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        self.assert_passes("-old", self.cp[1000], base=url)
        self.assert_refuses(why="404", base=url + "/nothing-here")

    # ---- what must be refused ----

    def test_a_flipped_byte_in_any_tile(self):
        # a full tile is checked against its parent's hash; the tiles at the tree's edge (the partial
        # ones) against the checkpoint's root
        cases = {"tile/0/100": "tile/0/100 does not hash to its entry in tile tile/1/000",
                 "tile/0/272": "tile/0/272 does not hash to its entry in tile tile/1/001.p/17",
                 "tile/1/000": "tile/1/000 does not hash to its entry in tile tile/2/000.p/1",
                 "tile/0/273.p/112": "tree hash of size 70000: downloaded inconsistent tile",
                 "tile/1/001.p/17": "tree hash of size 70000: downloaded inconsistent tile",
                 "tile/2/000.p/1": "tree hash of size 70000: downloaded inconsistent tile"}
        for rel, why in cases.items():
            with self.subTest(rel), Tampered(self.path(rel)) as p:
                for offset in (0, os.path.getsize(p) - 1):
                    flip(p, offset)
                    self.assert_refuses(why=why)
                    flip(p, offset)

    def test_a_flipped_byte_in_an_entry_bundle(self):
        for rel in ("tile/entries/000", "tile/entries/150", "tile/entries/273.p/112"):
            with self.subTest(rel), Tampered(self.path(rel)) as p:
                flip(p, 2 + 3)  # inside the first entry ("pgcld tlog fixture entry ...")
                self.assert_refuses(why="not included")
                flip(p, 2 + 3)
                flip(p, os.path.getsize(p) - 1)  # the last entry's last byte
                self.assert_refuses()
                flip(p, os.path.getsize(p) - 1)
                flip(p, 1)  # the first entry's length
                self.assert_refuses(why=rel)

    def test_a_missing_or_truncated_tile(self):
        for rel in ("tile/0/050", "tile/1/001.p/17", "tile/entries/273.p/112", "tile/entries/010"):
            with self.subTest(rel), Tampered(self.path(rel)) as p:
                with open(p, "r+b") as f:
                    f.truncate(os.path.getsize(p) - 1)
                self.assert_refuses(why=rel)
                os.remove(p)
                self.assert_refuses(why=rel)

    def test_a_wrong_checkpoint(self):
        size, root = self.read_checkpoint().splitlines()[1:3]
        wrong_root = bytearray(base64.b64decode(root))
        wrong_root[31] ^= 1
        bodies = {
            "a smaller size": self.checkpoint_body(SIZE - 1, root),
            "a larger size": self.checkpoint_body(SIZE + 1, root),
            "a flipped root": self.checkpoint_body(SIZE, base64.b64encode(bytes(wrong_root)).decode()),
            "size 0 with the root": self.checkpoint_body(0, root),
            "a leading zero": self.checkpoint_body("0" + size, root),
            "no final newline": self.checkpoint_body(SIZE, root)[:-1],
            "a short root": self.checkpoint_body(SIZE, base64.b64encode(bytes(wrong_root[:31])).decode()),
            "no origin": self.checkpoint_body(SIZE, root, origin=""),
        }
        with Tampered(os.path.join(self.log, "checkpoint")) as p:
            for what, body in bodies.items():
                with self.subTest(what):
                    with open(p, "w", encoding="utf-8") as f:
                        f.write(body)
                    self.assert_refuses()
            with open(p, "w", encoding="utf-8") as f:  # an extension line is allowed
                f.write(self.checkpoint_body(SIZE, root) + "pgcld extension line\n")
            self.assert_passes()
        self.assert_refuses("-origin", "another.example/log", why="origin")

    def test_an_inconsistent_older_checkpoint(self):
        other = os.path.join(self.tmp, "other")
        self.fixture([FIXTURE, other, "1000", "--origin", ORIGIN, "--seed", "29"])
        self.assert_refuses("-old", os.path.join(other, "checkpoint"), why="not consistent")
        size, root = self.read_checkpoint(self.cp[1000]).splitlines()[1:3]
        cases = {
            "another origin": (self.checkpoint_body(size, root, origin="another.example/log"), "origin"),
            "larger than the checkpoint": (self.checkpoint_body(SIZE + 5, root), "exceeds"),
            "the same size, another root": (self.checkpoint_body(SIZE, root), "different roots"),
            "size 0, another root": (self.checkpoint_body(0, root), "empty tree"),
        }
        for what, (body, why) in cases.items():
            with self.subTest(what):
                old = os.path.join(self.tmp, "old-checkpoint")
                with open(old, "w", encoding="utf-8") as f:
                    f.write(body)
                self.assert_refuses("-old", old, why=why)

    def test_a_published_size_must_keep_its_partial_tiles(self):
        # the tree of 1,000 entries was published: its partial tiles must still be served
        with Tampered(self.path("tile/0/003.p/232")) as p:
            os.remove(p)
            self.assert_passes()
            self.assert_refuses("-old", self.cp[1000], why="tile/0/003.p/232")

    @skips.needs(HAVE_OPENSSL, "openssl (deploy/install-deps.sh --test installs it)")
    def test_signed_checkpoints(self):
        key, vkey = self.ed25519_key("pgcld.test/tlog")
        _, other_vkey = self.ed25519_key("pgcld.test/tlog")
        body = self.read_checkpoint()
        cp = os.path.join(self.log, "checkpoint")
        with Tampered(cp):
            self.assert_refuses("-key", vkey, why="signature")  # the unsigned body
            signed = self.sign(body, "pgcld.test/tlog", key, vkey)
            with open(cp, "w", encoding="utf-8") as f:
                f.write(signed)
            self.assertIn("signature verified", self.assert_passes("-key", vkey))
            self.assertIn("signatures not checked", self.assert_passes())
            self.assert_refuses("-key", other_vkey, why="signature")
            sig_line = signed.splitlines()[-1]
            raw = bytearray(base64.b64decode(sig_line.split(" ")[2]))
            raw[10] ^= 1
            with open(cp, "w", encoding="utf-8") as f:
                f.write(body + "\n" + " ".join(sig_line.split(" ")[:2]) + " " + base64.b64encode(bytes(raw)).decode()
                        + "\n")
            self.assert_refuses("-key", vkey, why="signature")
            with open(cp, "w", encoding="utf-8") as f:  # the body changed under the signature
                f.write(signed.replace(f"\n{SIZE}\n", f"\n{SIZE - 1}\n", 1))
            self.assert_refuses("-key", vkey, why="signature")
            # the older checkpoint is opened with the key too
            with open(cp, "w", encoding="utf-8") as f:
                f.write(signed)
            self.assert_refuses("-key", vkey, "-old", self.cp[1000], why="older checkpoint")
            old_signed = os.path.join(self.tmp, "checkpoint.1000.signed")
            with open(old_signed, "w", encoding="utf-8") as f:
                f.write(self.sign(self.read_checkpoint(self.cp[1000]), "pgcld.test/tlog", key, vkey))
            self.assertTrue(self.assert_passes("-key", vkey, "-old", old_signed).endswith("consistent with size 1000"))

    @skips.needs(HAVE_OPENSSL, "openssl (deploy/install-deps.sh --test installs it)")
    def test_checkpoints_signed_by_pgcld(self):
        """pgcld's own note signing (core/audit/log/note.c, through tlog_fixture --sign) opened by Go's
        sumdb/note: every checkpoint of a small log, and the older one for consistency."""
        pem, vkey = self.ed25519_key(ORIGIN)
        _, other_vkey = self.ed25519_key(ORIGIN)
        pkcs8 = subprocess.run(["openssl", "pkey", "-in", pem, "-outform", "DER"], check=True, capture_output=True,
                               timeout=60).stdout
        name, key_hash = vkey.split("+")[:2]  # the base64 after them may hold '+' too
        skey = f"PRIVATE+KEY+{name}+{key_hash}+" + base64.b64encode(b"\x01" + pkcs8[-32:]).decode()
        log, old = os.path.join(self.tmp, "signed-log"), os.path.join(self.tmp, "signed-checkpoint.300")
        self.fixture([FIXTURE, log, "700", "--origin", ORIGIN, "--seed", "29", "--sign", skey,
                      "--checkpoint-at", "300", old])
        with open(os.path.join(log, "checkpoint"), encoding="utf-8") as f:
            self.assertIn("\n\n\u2014 " + ORIGIN + " ", f.read())
        self.assertIn("signature verified", self.assert_passes("-key", vkey, base=log))
        self.assertTrue(self.assert_passes("-key", vkey, "-old", old, base=log).endswith("consistent with size 300"))
        self.assert_refuses("-key", other_vkey, why="signature", base=log)
        with Tampered(os.path.join(log, "checkpoint")) as cp:
            with open(cp, encoding="utf-8") as f:
                text = f.read()
            with open(cp, "w", encoding="utf-8") as f:  # the size changed under the signature
                f.write(text.replace("\n700\n", "\n699\n", 1))
            self.assert_refuses("-key", vkey, why="signature", base=log)

    def scratch(self, suffix):
        """A new file name in the test's directory."""
        fd, path = tempfile.mkstemp(dir=self.tmp, suffix=suffix)
        os.close(fd)
        return path

    def ed25519_key(self, name):
        """A new Ed25519 key (PEM path) and its note verifier key name+hash+base64(0x01 ‖ public key)."""
        pem = self.scratch(".pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", pem], check=True,
                       capture_output=True, timeout=60)
        der = subprocess.run(["openssl", "pkey", "-in", pem, "-pubout", "-outform", "DER"], check=True,
                             capture_output=True, timeout=60).stdout
        public = b"\x01" + der[-32:]
        key_hash = hashlib.sha256(name.encode() + b"\n" + public).digest()[:4]
        return pem, f"{name}+{key_hash.hex()}+{base64.b64encode(public).decode()}"

    def sign(self, body, name, pem, vkey):
        """The body as a signed note: a blank line, then "— name base64(key hash ‖ signature)"."""
        msg = self.scratch(".txt")
        with open(msg, "wb") as f:
            f.write(body.encode())
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", pem, "-rawin", "-in", msg], check=True,
                             capture_output=True, timeout=60).stdout
        self.assertEqual(len(sig), 64)
        key_hash = bytes.fromhex(vkey.split("+")[1])
        return body + "\n\u2014 " + name + " " + base64.b64encode(key_hash + sig).decode() + "\n"


if __name__ == "__main__":
    unittest.main()
