"""The transparency log over HTTP on a live daemon, checked by a stock verifier (issue 28).

A pgcld daemon on a SQLite store, with --signing-key, scores a batch (more than one full tile of
leaves); tests/tlog/verify_tiles (Go, golang.org/x/mod/sumdb/note and tlog, built here in GOPATH
mode from Debian's packages) then fetches GET /log/, each log's signed checkpoint, verifies its
signature against the listed note verifier key, the tree hash from the tiles, every full tile under
its parent, and the inclusion of every leaf (records from the entry bundles, hashed with
tlog.RecordHash). After more traffic and a new checkpoint it proves the consistency of the two.
Through a tampering proxy (a flipped byte in a hash tile, in a record of an entry bundle, in the
checkpoint's body, in its signature) it must refuse. The routes' own promises are checked too:
access (--log-access reviewer and public; entry bundles always a reviewer's), 400 for a malformed
tile path naming it, 404 beyond the tree and for an unknown writer, the immutable cache headers,
pgcld audit keygen --origin's note key equal to the one /log/ lists.

LogCase holds the machinery; test_pg_log_http.py runs the same checks on a two-replica PostgreSQL
fleet. Without Go and golang-golang-x-mod-dev the verifier cases skip (and fail under
PGCLD_REQUIRE_SUITE_DEPS=1, tests/run_all.sh).

Run: meson test -C build-test test_log_http
"""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as H  # noqa: E402
import skips  # noqa: E402
from test_tlog_stock_verifier import GO, HAVE_GO, ROOT, go_env  # noqa: E402

MODEL = "tiny_binary"
D = 32
ORIGIN_PREFIX = "pgcld.test"
IMMUTABLE = "public, max-age=31536000, immutable"
VERIFY_TIMEOUT_S = 240


def items(n, seed, prefix):
    return H.b64_items(H.random_embeddings(n, D, seed), prefix)


def build_verifier(tmp):
    """tests/tlog/verify_tiles built into tmp; its path."""
    out = os.path.join(tmp, "verify_tiles")
    subprocess.run([GO, "build", "-o", out, "./tests/tlog/verify_tiles"], cwd=ROOT, env=go_env(tmp), check=True,
                   capture_output=True, timeout=VERIFY_TIMEOUT_S)
    return out


class TamperingProxy:
    """An HTTP proxy in front of a daemon that rewrites the answer of the paths `tamper` (a function
    path, bytes -> bytes, or None) chooses; it forwards the Authorization header."""

    def __init__(self, port):
        self.port = port
        self.tamper = None
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                req = urllib.request.Request(f"http://127.0.0.1:{proxy.port}{self.path}")
                if self.headers.get("Authorization"):
                    req.add_header("Authorization", self.headers["Authorization"])
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        status, ctype, body = r.status, r.headers.get("Content-Type"), r.read()
                except urllib.error.HTTPError as e:
                    status, ctype, body = e.code, e.headers.get("Content-Type"), e.read()
                if status == 200 and proxy.tamper:
                    body = proxy.tamper(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def flip_at(offset):
    def f(body):
        b = bytearray(body)
        b[offset] ^= 0x01
        return bytes(b)
    return f


class LogCase:
    """Shared checks; a subclass's setUpClass sets cls.daemons (one or more replicas of one store),
    cls.signing_key and cls.tmp, and calls cls.prepare()."""

    daemons = ()

    @classmethod
    def prepare(cls):
        cls.verifier = build_verifier(cls.tmp) if HAVE_GO else None
        cls.decisions = 0

    @property
    def first(self):
        return self.daemons[0]

    def score_on_each(self, n, seed):
        for k, d in enumerate(self.daemons):
            r = d.score({"items": items(n, seed + k, f"s{seed}-{k}")})
            self.assertEqual(r.status, 200, r)
            type(self).decisions += n

    def checkpoint_each(self):
        """POST /log/checkpoint on every replica: each signs its own writer's log now."""
        sizes = {}
        for d in self.daemons:
            r = d.post("/log/checkpoint", key=d.keys["admin"])
            self.assertEqual(r.status, 200, r)
            sizes[r.json["writer_id"]] = r.json["size"]
            self.assertTrue(r.json["checkpoint"].startswith(f"{ORIGIN_PREFIX}/{r.json['writer_id']}\n"), r.json)
        return sizes

    def logs(self, key=None):
        d = self.first
        r = d.get("/log/", key=d.keys["reviewer"] if key is None else key)
        self.assertEqual(r.status, 200, r)
        return r.json["logs"]

    def verify(self, base, *args, expect_ok=True):
        p = subprocess.run([self.verifier, "-list", "-token", self.first.keys["reviewer"], *args, base],
                           capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S)
        if expect_ok:
            self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        else:
            self.assertEqual(p.returncode, 1, f"tampering not refused:\n{p.stdout}{p.stderr}")
            self.assertIn("verify_tiles: FAIL", p.stderr)
        return p.stdout + p.stderr

    # ---- the cases ----

    def test_list_names_every_writer_with_its_key(self):
        logs = self.logs()
        self.assertEqual(len(logs), len(self.daemons), logs)
        for log in logs:
            self.assertEqual(log["origin"], f"{ORIGIN_PREFIX}/{log['writer_id']}")
            self.assertEqual(log["prefix"], f"/log/{log['writer_id']}/")
            self.assertTrue(log["key"].startswith(log["origin"] + "+"), log)
            note_key = self.first.cli("audit", "note-key", "--signing-key", self.signing_key, "--origin",
                                      log["origin"]).stdout.strip()
            self.assertEqual(log["key"], note_key)

    def test_tile_routes(self):
        self.score_on_each(3, 7)
        self.checkpoint_each()
        d = self.first
        writer = self.logs()[0]["writer_id"]
        rev = d.keys["reviewer"]
        r = d.get(f"/log/{writer}/tile/0/000.p/1", key=rev)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body), 32)
        self.assertEqual(r.headers.get("Cache-Control"), IMMUTABLE)
        self.assertTrue(r.headers.get("Content-Type", "").startswith("application/octet-stream"))
        r = d.get(f"/log/{writer}/tile/entries/000.p/1", key=rev)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers.get("Cache-Control"), IMMUTABLE)
        for bad in ("tile/0/0", "tile/00/000", "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/x000/001",
                    "tile/entries/000.p/01", "tile/0/000/extra"):
            r = d.get(f"/log/{writer}/{bad}", key=rev)
            self.assertEqual(r.status, 400, (bad, r))
            self.assertIn(bad, r.error()["message"])
        self.assertEqual(d.get(f"/log/{writer}/tile/0/x999/999", key=rev).status, 404)
        self.assertEqual(d.get(f"/log/{writer}/tile/5/000.p/1", key=rev).status, 404)
        self.assertEqual(d.get("/log/no-such-writer/tile/0/000.p/1", key=rev).status, 404)
        self.assertEqual(d.get("/log/no-such-writer/checkpoint", key=rev).status, 404)
        self.assertEqual(d.get("/log/bad+writer/checkpoint", key=rev).status, 404)
        # access: reviewer by default; entry bundles never for an admin or a scorer
        self.assertEqual(d.get("/log/", key="").status, 401)
        self.assertEqual(d.get(f"/log/{writer}/checkpoint", key="").status, 401)
        self.assertEqual(d.get(f"/log/{writer}/tile/entries/000.p/1", key=d.keys["admin"]).status, 403)
        self.assertEqual(d.get(f"/log/{writer}/tile/0/000.p/1", key=d.keys["scorer"]).status, 403)
        self.assertEqual(d.post("/log/checkpoint", key=rev).status, 403)
        r = d.get(f"/log/{writer}/checkpoint", key=rev)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers.get("Content-Type", "").startswith("text/plain"))
        self.assertIn("\n\n\u2014 ", r.body.decode())

    @skips.needs(HAVE_GO, "Go with golang.org/x/mod/sumdb (golang-go, golang-golang-x-mod-dev)")
    def test_stock_verifier_inclusion_consistency_tampering(self):
        self.score_on_each(300, 1)  # more than a full tile of leaves on each writer
        sizes = self.checkpoint_each()
        self.assertGreaterEqual(sum(sizes.values()), self.decisions)
        saved = os.path.join(self.tmp, "saved")
        os.makedirs(saved, exist_ok=True)
        base = f"http://127.0.0.1:{self.first.port}"
        out = self.verify(base, "-save", saved)
        self.assertEqual(out.count("verify_tiles: OK"), len(self.daemons), out)
        for writer, size in sizes.items():
            self.assertIn(f"OK {ORIGIN_PREFIX}/{writer} size {size} ", out)
            self.assertIn(f"{size} entries included", out)

        self.score_on_each(40, 2)
        later = self.checkpoint_each()
        for writer in sizes:
            self.assertGreater(later[writer], sizes[writer])
        out = self.verify(base, "-old-dir", saved)
        for writer, size in sizes.items():
            self.assertIn(f"consistent with size {size}", out)

        proxy = TamperingProxy(self.first.port)
        self.addCleanup(proxy.close)
        self.verify(proxy.url)  # the proxy itself changes nothing
        writer = self.logs()[0]["writer_id"]
        cases = {
            "a full hash tile": (f"/log/{writer}/tile/0/000", flip_at(100)),
            "a partial hash tile": (f"/log/{writer}/tile/0/001.p/", flip_at(5)),
            "a record in an entry bundle": (f"/log/{writer}/tile/entries/000", flip_at(40)),
            "the checkpoint's size": (f"/log/{writer}/checkpoint",
                                      lambda b: b.replace(f"\n{later[writer]}\n".encode(),
                                                          f"\n{later[writer] - 1}\n".encode(), 1)),
            "the checkpoint's root": (f"/log/{writer}/checkpoint",
                                      lambda b: flip_at(len(f"{ORIGIN_PREFIX}/{writer}\n{later[writer]}\n") + 3)(b)),
            "the signature": (f"/log/{writer}/checkpoint", lambda b: flip_at(len(b) - 6)(b)),
        }
        for what, (prefix, change) in cases.items():
            with self.subTest(tampered=what):
                hits = []

                def tamper(path, body, prefix=prefix, change=change, hits=hits):
                    if not path.startswith(prefix):
                        return body
                    hits.append(path)
                    return change(body)
                proxy.tamper = tamper
                self.verify(proxy.url, expect_ok=False)
                self.assertTrue(hits, f"{what}: the verifier never fetched {prefix}")
        proxy.tamper = None


class SqliteLogTest(LogCase, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-log-http-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--signing-key", cls.signing_key, "--log-origin", ORIGIN_PREFIX,
                           "--log-checkpoint-interval", "1"])
        cls.addClassCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", cls.signing_key)
        d.start()
        cls.daemons = (d,)
        cls.prepare()

    def test_keygen_prints_the_note_key(self):
        key = os.path.join(self.tmp, "other.key")
        out = self.first.cli("audit", "keygen", "--out", key, "--origin", "pgcld.test/w1").stdout.split()
        self.assertEqual(len(out), 2, out)
        self.assertEqual(len(out[0]), 64)
        self.assertEqual(out[1], self.first.cli("audit", "note-key", "--signing-key", key, "--origin",
                                                "pgcld.test/w1").stdout.strip())

    def test_the_interval_checkpoints_by_itself(self):
        writer = self.logs()[0]["writer_id"]
        self.score_on_each(2, 99)
        size = self.logs()[0]["size"]
        d = self.first

        def covered():
            r = d.get(f"/log/{writer}/checkpoint", key=d.keys["reviewer"])
            return r.status == 200 and int(r.body.decode().split("\n")[1]) >= size
        self.assertTrue(H.wait_until(covered, timeout=15), "no checkpoint within --log-checkpoint-interval")


class PublicAccessTest(unittest.TestCase):
    """--log-access public: the list, checkpoints and hash tiles need no key; entry bundles do."""

    def test_public(self):
        H.require_models(MODEL)
        tmp = tempfile.mkdtemp(prefix="pgcld-log-public-")
        self.addCleanup(shutil.rmtree, tmp, True)
        key = os.path.join(tmp, "signing.key")
        d = H.Daemon(models=[MODEL], default_model=MODEL,
                     args=["--signing-key", key, "--log-access", "public", "--log-checkpoint-interval", "0"])
        self.addCleanup(d.cleanup)
        d.cli("audit", "keygen", "--out", key)
        d.start()
        self.assertEqual(d.score({"items": items(2, 5, "p")}).status, 200)
        self.assertEqual(d.post("/log/checkpoint", key=d.keys["admin"]).status, 200)
        r = d.get("/log/", key="")
        self.assertEqual(r.status, 200, r)
        writer = r.json["logs"][0]["writer_id"]
        self.assertEqual(d.get(f"/log/{writer}/checkpoint", key="").status, 200)
        self.assertEqual(d.get(f"/log/{writer}/tile/0/000.p/1", key="").status, 200)
        self.assertEqual(d.get(f"/log/{writer}/tile/entries/000.p/1", key="").status, 401)
        self.assertEqual(d.post("/log/checkpoint", key="").status, 401)


if __name__ == "__main__":
    unittest.main()
