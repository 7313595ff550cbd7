"""The transparency log over HTTP on a two-replica PostgreSQL fleet, checked by the stock verifier
(issue 28): test_log_http.py's LogCase (GET /log/ lists both writers' logs with their note keys;
tests/tlog/verify_tiles verifies each log's signed checkpoint, tiles, every leaf's inclusion, the
consistency of two checkpoints, and refuses tampering), with two pgcld replicas (--writer-id a,
--writer-id b) sharing one database and one --signing-key, both scoring.

Skips (77) without postgresql-15 or psycopg2 (pg_cluster.py), and while the PostgreSQL store does
not serve the log yet (its GET /log/ answers no log): the integrator's to lift once log-pg lands.
"""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as H  # noqa: E402
from test_log_http import MODEL, ORIGIN_PREFIX, LogCase  # noqa: E402


class PgFleetLogTest(LogCase, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        H.require_models(MODEL)
        cluster = H.pg_cluster()
        uri = cluster.new_database()
        cls.tmp = tempfile.mkdtemp(prefix="pgcld-pg-log-http-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.signing_key = os.path.join(cls.tmp, "signing.key")
        daemons = []
        for writer in ("a", "b"):
            d = H.Daemon(models=[MODEL], default_model=MODEL, db_path=uri,
                         args=["--writer-id", writer, "--signing-key", cls.signing_key, "--log-origin", ORIGIN_PREFIX,
                               "--log-checkpoint-interval", "1"])
            cls.addClassCleanup(d.cleanup)
            if not daemons:
                d.cli("audit", "keygen", "--out", cls.signing_key)
            daemons.append(d)
        for d in daemons:
            d.start()
        # both replicas use the keys made for the first (one database)
        for d in daemons[1:]:
            d.keys = daemons[0].keys
        cls.daemons = tuple(daemons)
        r = daemons[0].get("/log/", key=daemons[0].keys["reviewer"])
        if r.status != 200 or not r.json.get("logs"):
            raise unittest.SkipTest(f"the PostgreSQL store serves no log yet (GET /log/: {r.status})")
        cls.prepare()


if __name__ == "__main__":
    unittest.main()
