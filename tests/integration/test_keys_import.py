#!/usr/bin/python3
"""`pgcld keys import`: one key made elsewhere, valid on several databases (docs/operations.md, "API
keys and roles"; the Kubernetes Secret of docs/scaling.md is imported this way).

Keys of each role are made with `pgcld keys create` on a scratch database and written to key files
the way the docs say (`| tail -n 1 > FILE`, so with a final newline). Against two running daemons
(two replicas, each with its own database):

- importing the files makes each key authenticate on both, with its role (403 elsewhere), and
  writes one chained key.import event per key (the chain stays intact);
- importing the same key again with the same role changes nothing and exits 0;
- the same key with another role, or another secret under the same key_id, exits 1 with the reason
  and writes nothing; the forged key is refused by the daemon;
- a revoked key cannot be imported again;
- a key file ending in CRLF or in no newline holds the same key;
- malformed key files (empty, too long, trailing or leading bytes, a lone CR, a second line,
  upper-case hex, a bad separator, a character outside base64url, a non-canonical last character,
  not a regular file, missing) exit 1 with a message naming the file and the rule, and write nothing, not even
  a new database file; usage errors exit 2;
- a key imported into a database that does not exist yet (a replica's first start) works once the
  daemon starts on it;
- no key text, nor its secret part, appears in any stdout or stderr of the CLI, in the daemons'
  logs (--log-level debug) or in the database files.

Run: /usr/bin/python3 tests/integration/test_keys_import.py
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

KEY_RE = re.compile(r"^(pgcld_[0-9a-f]{8})_([A-Za-z0-9_-]{43})$")


class KeysImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_binary()
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-keys-import-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.outputs = []  # every stdout and stderr of the CLI but `keys create`'s, scanned for key texts
        cls.secrets = []  # every key text handled here
        cls.scratch = os.path.join(cls.tmp, "scratch.db")
        cls.files = {}
        for role in ("scorer", "reviewer", "admin"):
            cls.files[role] = cls.make_key_file(role, f"fleet-{role}")
        cls.replicas = [H.start_daemon(cls, args=["--log-level", "debug"]) for _ in range(2)]

    # -- helpers
    @classmethod
    def cli(cls, *args):
        p = subprocess.run([H.PGCLD_BIN, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60, cwd=cls.tmp)
        if args[:2] != ("keys", "create"):  # create prints its key, by design; nothing else may
            cls.outputs.append(p.stdout + p.stderr)
        return p

    @classmethod
    def make_key_file(cls, role, name):
        """A key made on the scratch database, written as `tail -n 1 > FILE` does; returns (path, key)."""
        p = cls.cli("keys", "create", "--db", cls.scratch, "--role", role, "--name", name)
        assert p.returncode == 0, p.stderr
        key = p.stdout.strip().splitlines()[-1]
        assert KEY_RE.match(key), "keys create printed no key"
        cls.secrets.append(key)
        path = os.path.join(cls.tmp, f"{role}.{name}")
        with open(path, "w") as f:
            f.write(key + "\n")
        return path, key

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def import_key(self, db, role, name, key_file):
        return self.cli("keys", "import", "--db", db, "--role", role, "--name", name, "--key-file", key_file)

    @staticmethod
    def state(db):
        """What an import may change: the keys, the admin events and the chain."""
        return tuple(H.db_scalar(db, f"SELECT count(*) FROM {t}") for t in ("api_keys", "admin_events", "audit_chain"))

    def assertNoSecretIn(self, text, where):
        for key in self.secrets:
            self.assertNotIn(key, text, f"{where} holds a key text")
            self.assertNotIn(key[15:], text, f"{where} holds a key's secret part")

    def authenticates(self, d, key, role):
        """The key's answers on one route of each role: 200 where its role may go, 403 elsewhere."""
        want = {"scorer": ("POST", "/v1/score"), "reviewer": ("GET", "/v1/decisions?limit=1"),
                "admin": ("GET", "/v1/admin/keys")}
        out = {}
        for r, (method, path) in want.items():
            body = {"items": H.b64_items(H.random_embeddings(1, 1024, 5), prefix="imp-")} if method == "POST" else None
            out[r] = d.request(method, path, body, key=key).status
        return out

    # -- tests
    def test_imported_keys_authenticate_on_every_replica(self):
        for d in self.replicas:
            for role, (path, key) in self.files.items():
                before = self.state(d.db_path)
                p = self.import_key(d.db_path, role, f"fleet-{role}", path)
                self.assertEqual(p.returncode, 0, p.stderr)
                if "already" in p.stdout:  # another test imported it first
                    continue
                self.assertIn(f"Imported API key {key[:14]} (role {role})", p.stdout)
                self.assertEqual(self.state(d.db_path), (before[0] + 1, before[1] + 1, before[2] + 1))
                # stored exactly as `keys create` stores it: the SHA-256 of the key text
                self.assertEqual(d.scalar("SELECT key_sha256 FROM api_keys WHERE key_id = ?", (key[:14],)),
                                 hashlib.sha256(key.encode()).hexdigest())
                self.assertEqual(d.scalar("SELECT count(*) FROM admin_events WHERE action = 'key.import'"
                                          " AND target = ? AND actor LIKE 'cli:%'"
                                          " AND json_extract(details, '$.role') = ?", (key[:14], role)), 1)
        for d in self.replicas:
            for role, (_, key) in self.files.items():
                got = self.authenticates(d, key, role)
                self.assertEqual(got, {r: 200 if r == role else 403 for r in got}, role)
            listed = {k["key_id"]: k for k in d.get("/v1/admin/keys", key=self.files["admin"][1]).json["keys"]}
            self.assertEqual(listed[self.files["scorer"][1][:14]]["role"], "scorer")
            verify = d.get("/v1/audit/verify", key=self.files["reviewer"][1])
            self.assertEqual(verify.status, 200, verify)
            self.assertTrue(verify.json["intact"], verify.json)

    def test_reimport_changes_nothing(self):
        d = self.replicas[0]
        path, key = self.files["scorer"]
        self.assertEqual(self.import_key(d.db_path, "scorer", "fleet-scorer", path).returncode, 0)
        before = self.state(d.db_path)
        for name in ("fleet-scorer", "another name"):
            p = self.import_key(d.db_path, "scorer", name, path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"API key {key[:14]} (role scorer) is already in", p.stdout)
            self.assertIn("nothing changed", p.stdout)
            self.assertEqual(self.state(d.db_path), before)
        # the same key written by a Windows editor (CRLF) or without a final newline is the same key
        for ending in ("\r\n", ""):
            p = self.import_key(d.db_path, "scorer", "fleet-scorer", self.write("scorer.crlf", key + ending))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("nothing changed", p.stdout)
        self.assertEqual(self.state(d.db_path), before)
        self.assertEqual(d.scalar("SELECT name FROM api_keys WHERE key_id = ?", (key[:14],)), "fleet-scorer")
        self.assertEqual(self.authenticates(d, key, "scorer")["scorer"], 200)

    def test_conflicting_imports_fail_and_write_nothing(self):
        d = self.replicas[1]
        path, key = self.files["scorer"]
        self.assertEqual(self.import_key(d.db_path, "scorer", "fleet-scorer", path).returncode, 0)
        before = self.state(d.db_path)
        # the same key with another role
        p = self.import_key(d.db_path, "admin", "fleet-scorer", path)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"key {key[:14]} is already in", p.stderr)
        self.assertIn("with role scorer, not admin", p.stderr)
        self.assertEqual(p.stdout, "")
        # another secret under the same key_id (a key made elsewhere whose id collides, or a forgery)
        _, other = self.files["admin"]
        forged = key[:15] + other[15:]
        self.secrets.append(forged)
        p = self.import_key(d.db_path, "scorer", "forged", self.write("forged.key", forged + "\n"))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"already holds another key with key_id {key[:14]}", p.stderr)
        self.assertEqual(self.state(d.db_path), before)
        self.assertEqual(d.score({"items": H.b64_items(H.random_embeddings(1, 1024, 6))}, key=forged).status, 401)
        self.assertEqual(self.authenticates(d, key, "scorer")["scorer"], 200)

    def test_revoked_key_is_not_imported_again(self):
        d = self.replicas[0]
        path, key = self.make_key_file("scorer", "to-revoke")
        self.assertEqual(self.import_key(d.db_path, "scorer", "to-revoke", path).returncode, 0)
        self.assertEqual(self.authenticates(d, key, "scorer")["scorer"], 200)
        r = d.request("DELETE", f"/v1/admin/keys/{key[:14]}")
        self.assertEqual(r.status, 200, r)
        before = self.state(d.db_path)
        p = self.import_key(d.db_path, "scorer", "to-revoke", path)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"key {key[:14]} was revoked at", p.stderr)
        self.assertIn("cannot be imported again", p.stderr)
        self.assertEqual(self.state(d.db_path), before)
        self.assertTrue(H.wait_until(lambda: d.score({"items": H.b64_items(H.random_embeddings(1, 1024, 7))},
                                                     key=key).status == 401))

    def test_malformed_key_files_fail_clearly_and_write_nothing(self):
        d = self.replicas[1]
        _, key = self.files["reviewer"]
        last = key[-1]
        # a last character whose two low bits are set: 43 characters would then carry 258 bits
        noncanonical = key[:-1] + ("B" if last != "B" else "C")
        cases = {
            "empty": (b"", "the file is empty"),
            "newline only": (b"\n", "the file is empty"),
            "junk": (b"not a key\n", "a key is 58 characters (pgcld_, 8 lowercase hex digits"),
            "two newlines": (key + "\n\n", "this text has 59"),
            "trailing space": (key + " \n", "this text has 59"),
            "a lone CR": (key + "\r", "this text has 59"),
            "leading space": (" " + key, "this text has 59"),
            "a second line": (key + "\n" + self.files["admin"][1] + "\n", "58 characters"),
            "truncated": (key[:-1] + "\n", "this text has 57"),
            "upper-case hex": ("PGCLD" + key[5:], "starts with pgcld_"),
            "key_id not hex": (key[:8] + "g" + key[9:], "characters 7 to 14 must be lowercase hex digits, character 9"),
            "separator": (key[:14] + "." + key[15:], "character 15 must be '_'"),
            "outside base64url": (key[:30] + "=" + key[31:], "must be base64url (A-Z a-z 0-9 - _), character 31"),
            "non-canonical end": (noncanonical, "not the base64url of 32 bytes"),
            "NUL inside": (key[:20] + "\0" + key[21:], "it holds a NUL byte"),
            "too long": (b"x" * 5000, "more than 4096 bytes"),
        }
        before = self.state(d.db_path)
        fresh = os.path.join(self.tmp, "never-created.db")
        for what, (data, message) in cases.items():
            with self.subTest(what):
                if isinstance(data, str) and len(data.strip("\n ")) >= 50:  # key-like: never to be echoed
                    self.secrets.append(data.strip("\n "))
                path = self.write(f"bad-{what.replace(' ', '-')}.key", data)
                p = self.import_key(d.db_path, "reviewer", "bad", path)
                self.assertEqual(p.returncode, 1, p.stdout)
                self.assertTrue(p.stderr.startswith(f"pgcld keys import: --key-file {path}: "), p.stderr)
                self.assertIn(message, p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertNoSecretIn(p.stderr, f"stderr for {what}")
                p = self.import_key(fresh, "reviewer", "bad", path)
                self.assertEqual(p.returncode, 1)
                self.assertFalse(os.path.exists(fresh), f"{what}: a bad key file created the database")
        self.assertEqual(self.state(d.db_path), before)
        # not a regular file, missing
        p = self.import_key(d.db_path, "reviewer", "bad", self.tmp)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a regular file", p.stderr)
        p = self.import_key(d.db_path, "reviewer", "bad", os.path.join(self.tmp, "missing.key"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot open: No such file or directory", p.stderr)
        # usage: exit 2
        path = self.files["reviewer"][0]
        for args in (["--db", d.db_path, "--role", "reviewer", "--name", "x"],
                     ["--db", d.db_path, "--role", "root", "--name", "x", "--key-file", path],
                     ["--db", d.db_path, "--role", "reviewer", "--key-file", path],
                     ["--db", d.db_path, "--role", "reviewer", "--name", "x", "--key-file", path, "--key-id", "y"]):
            p = self.cli("keys", "import", *args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("usage: pgcld keys", p.stderr)
        # a bad name is refused by the core after the file passed
        p = self.import_key(d.db_path, "reviewer", "a\nb", path)
        self.assertEqual(p.returncode, 1)
        self.assertIn("name must be", p.stderr)
        self.assertEqual(self.state(d.db_path), before)

    def test_import_before_the_first_start(self):
        """A replica's first start: the database does not exist yet when the keys are imported."""
        db = os.path.join(self.tmp, "first-start", "audit.db")
        os.makedirs(os.path.dirname(db))
        path, key = self.files["admin"]
        p = self.import_key(db, "admin", "fleet-admin", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"Imported API key {key[:14]} (role admin)", p.stdout)
        d = H.Daemon(db_path=db, args=["--log-level", "debug"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertEqual(d.get("/v1/admin/keys", key=key).status, 200)
        self.assertEqual(self.import_key(db, "admin", "fleet-admin", path).returncode, 0)
        self.assertEqual(d.stop(), 0, d.logs())
        self.assertNoSecretIn(d.logs(limit=10 ** 9), "the daemon log")

    def test_zz_no_key_text_anywhere(self):
        """Runs last (unittest sorts by name): scans what every test above left."""
        self.assertGreater(len(self.outputs), 10, "no CLI output to scan")
        for i, text in enumerate(self.outputs):
            self.assertNoSecretIn(text, f"CLI output {i}")
        for d in self.replicas:
            logs = d.logs(limit=10 ** 9)
            self.assertIn("debug", logs, "the daemon did not log at debug level")
            self.assertNoSecretIn(logs, "the daemon log")
            raw = b""
            for suffix in ("", "-wal"):
                if os.path.exists(d.db_path + suffix):
                    with open(d.db_path + suffix, "rb") as f:
                        raw += f.read()
            self.assertIn(self.files["scorer"][1][:14].encode(), raw, "the scan is blind: no key_id in the database")
            self.assertNoSecretIn(raw.decode("latin-1"), "the database file")


if __name__ == "__main__":
    unittest.main(verbosity=2)
