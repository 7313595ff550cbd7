#!/usr/bin/python3
"""Secrets are never logged: no API key's secret text reaches the daemon's log or the database.

The daemon runs with --log-level debug (the most it ever writes). Keys are made both ways (the CLI,
which the harness uses, and POST /v1/admin/keys); then every kind of authenticated traffic: valid
keys of each role, a key of the wrong role (403), no key, a malformed token, a well-formed unknown
key, a real key id with a wrong secret (a typo of a real key), a revoked key; an upload, an
activation, a shadow report, a SIGHUP (which re-reads and counts the keys), and a config reload.
Afterwards, with the daemon stopped:

  * its whole stderr and stdout hold no key text, no secret part of a key (the 43 characters after
    the key id) and none of the wrong tokens that were presented;
  * no table of the audit database holds them either (admin_events included: it records key
    creation and revocation by key id only), and neither do the raw bytes of the database file
    and its WAL (so no column, index or free page keeps one);
  * the key ids, which are meant to be logged, are there (the scan would find a secret).

Run: /usr/bin/python3 tests/integration/test_secrets.py
"""

import base64
import hashlib
import os
import re
import signal
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

KEY_RE = re.compile(r"^(pgcld_[0-9a-f]{8})_([A-Za-z0-9_-]{43})$")


class SecretsNeverLoggedTest(unittest.TestCase):
    def test_no_secret_in_logs_or_database(self):
        d = H.Daemon(models=("tiny_binary",), default_model="tiny_binary", args=["--log-level", "debug"])
        self.addCleanup(d.cleanup)
        d.start()
        secrets = {}  # text -> what it is

        def remember(key, what):
            m = KEY_RE.match(key)
            self.assertIsNotNone(m, f"{what}: {key!r} does not look like a key")
            secrets[key] = what
            secrets[m.group(2)] = what + " (secret part)"

        for role, key in d.keys.items():
            remember(key, f"CLI {role} key")

        # Keys created over HTTP.
        made = {}
        for role in ("scorer", "reviewer", "admin"):
            r = d.post("/v1/admin/keys", {"role": role, "name": f"http-{role}"}, key=d.keys["admin"])
            self.assertIn(r.status, (200, 201), r)
            made[role] = r.json
            remember(r.json["key"], f"HTTP {role} key")

        D = H.load_config("tiny_binary")["dims"]["D"]
        items = H.json_items(H.random_embeddings(3, D, seed=1))

        # Valid traffic, each role.
        self.assertEqual(d.score({"items": items}, key=made["scorer"]["key"]).status, 200)
        self.assertEqual(d.score({"items": items}).status, 200)
        r = d.get("/v1/decisions", key=made["reviewer"]["key"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(d.get("/v1/models", key=made["admin"]["key"]).status, 200)
        self.assertEqual(d.get("/v1/admin/keys", key=made["admin"]["key"]).status, 200)

        # Refused traffic: wrong role, none, malformed, unknown, wrong secret for a real id.
        wrong = []
        self.assertEqual(d.get("/v1/admin/keys", key=made["scorer"]["key"]).status, 403)
        self.assertEqual(d.score({"items": items}, key="").status, 401)
        malformed = "not-a-key-" + hashlib.sha256(b"malformed").hexdigest()
        unknown = "pgcld_0badc0de_" + base64.urlsafe_b64encode(hashlib.sha256(b"u").digest()).decode()[:43]
        real_id = KEY_RE.match(made["scorer"]["key"]).group(1)
        typo = real_id + "_" + base64.urlsafe_b64encode(hashlib.sha256(b"typo").digest()).decode()[:43]
        for token in (malformed, unknown, typo):
            wrong.append(token)
            self.assertEqual(d.score({"items": items}, key=token).status, 401, token)
            self.assertEqual(d.get("/v1/decisions", key=token).status, 401, token)
        r = d.raw("GET", "/v1/models", key="", headers={"Authorization": "Basic " + malformed})
        self.assertEqual(r.status, 401)

        # Revoke one key, then present it.
        r = d.request("DELETE", f"/v1/admin/keys/{made['reviewer']['key_id']}", key=made["admin"]["key"])
        self.assertEqual(r.status, 200, r)
        self.assertTrue(H.wait_until(
            lambda: d.get("/v1/decisions", key=made["reviewer"]["key"]).status == 401))

        # An upload and an activation (admin actions logged and recorded in admin_events).
        vdir = H.version_dir("tiny_binary")
        with open(os.path.join(vdir, "model.safetensors"), "rb") as f:
            w = f.read()
        body = {"config": H.load_config("tiny_binary"), "weights_b64": base64.b64encode(w).decode(),
                "weights_sha256": hashlib.sha256(w).hexdigest()}
        r = d.request("PUT", "/v1/admin/models/tiny_binary/versions/2", body, key=made["admin"]["key"])
        self.assertIn(r.status, (200, 201), r)
        r = d.post("/v1/admin/models/tiny_binary/activate", {"version": "2"}, key=made["admin"]["key"])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(d.score({"items": items}, key=made["scorer"]["key"]).status, 200)

        # SIGHUP: keys and configuration re-read (and logged).
        reloads = d.logs(limit=10 ** 8).count("SIGHUP: ")
        d.proc.send_signal(signal.SIGHUP)
        # the reload's log lines are part of what is scanned below: wait for them, not a pause
        self.assertTrue(H.wait_until(lambda: d.logs(limit=10 ** 8).count("SIGHUP: ") > reloads),
                        f"the SIGHUP reload was not logged\n{d.logs()}")
        self.assertEqual(d.get("/healthz").status, 200)
        self.assertEqual(d.stop(), 0, d.logs())

        logs = b""
        for p in (d._stderr_path, d._stdout_path):
            with open(p, "rb") as f:
                logs += f.read()
        text = logs.decode("utf-8", "replace")
        self.assertIn("debug", text, "the daemon did not log at debug level")
        for key_id in [KEY_RE.match(k).group(1) for k in secrets if KEY_RE.match(k)]:
            self.assertIn(key_id.encode(), logs + self._db_bytes(d), f"{key_id} appears nowhere: the scan is blind")
        forbidden = dict(secrets)
        for t in wrong:
            forbidden[t] = "presented wrong token"
        forbidden[typo.split("_", 2)[2]] = "secret part of the typo token"
        for s, what in forbidden.items():
            self.assertNotIn(s, text, f"the daemon log holds a {what}")

        # The database: every text and blob of every table, then the raw file bytes.
        conn = sqlite3.connect(d.db_path)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            self.assertIn("admin_events", tables)
            events = conn.execute("SELECT count(*) FROM admin_events WHERE action LIKE 'key.%'").fetchone()[0]
            self.assertGreaterEqual(events, 7)  # 6 creations and a revocation
            for t in tables:
                for row in conn.execute(f'SELECT * FROM "{t}"'):  # t: a name from sqlite_master
                    for v in row:
                        if isinstance(v, bytes):
                            v = v.decode("latin-1")
                        if isinstance(v, str):
                            for s, what in forbidden.items():
                                self.assertNotIn(s, v, f"table {t} holds a {what}")
        finally:
            conn.close()
        raw = self._db_bytes(d)
        for s, what in forbidden.items():
            self.assertNotIn(s.encode(), raw, f"the database file holds a {what}")

    @staticmethod
    def _db_bytes(d):
        out = b""
        for suffix in ("", "-wal", "-journal"):
            p = d.db_path + suffix
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out += f.read()
        return out


if __name__ == "__main__":
    unittest.main(verbosity=2)
