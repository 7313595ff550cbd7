#!/usr/bin/python3
"""The PostgreSQL writer's array statements (a group's rows as one INSERT ... SELECT FROM unnest per
table, core/audit/pg/audit_pg_writer.c), against a real throw-away PostgreSQL 15 cluster.

bench/audit_write commits jobs of 2,500 decisions (two threads, so groups of 2,500 to 5,000 rows:
more than ROWS_PER_STATEMENT, the statements split mid-job), with float16 inputs stored and without.
Checked: every seq 1..N once; `pgcld audit verify` intact (it recomputes every decision's leaf from
the stored row and compares it with the leaves the writer hashed from its own values: a value
stored differently from the per-row statements' fails it); with inputs, one decision_inputs row
per decision whose SHA-256 is the decision's input_digest, and input_dtype 'f16'; without, none.

Run: PGCLD_BIN=build-test/server/pgcld PGCLD_AUDIT_WRITE=build-test/bench/audit_write \
     /usr/bin/python3 tests/integration/test_pg_array_rows.py
"""

import hashlib
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import pg_cluster  # noqa: E402
import skips  # noqa: E402

ROWS = 5000
JOB_ROWS = 2500


class ArrayRows(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        cls.audit_write = os.environ.get("PGCLD_AUDIT_WRITE") or os.path.join(
            os.path.dirname(os.path.dirname(H.PGCLD_BIN)), "bench", "audit_write")
        if not os.path.exists(cls.audit_write):
            skips.missing_for_program(f"bench/audit_write ({cls.audit_write})")
        cls.cluster = pg_cluster.PgCluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.drop()

    def write_and_check(self, inputs):
        db = self.cluster.new_database()
        run = subprocess.run([self.audit_write, "--db", db, "--rows", str(ROWS), "--batch", str(JOB_ROWS),
                              "--threads", "2", "--store-inputs", inputs, "--writer-id", "arrays"],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertEqual(json.loads(run.stdout.strip().splitlines()[-1])["failures"], 0)
        verify = H.run_pgcld("audit", "verify", "--db", db, timeout=300)
        self.assertEqual(verify.returncode, 0, verify.stdout[-2000:] + verify.stderr[-2000:])
        self.assertTrue(json.loads(verify.stdout.strip().splitlines()[-1])["intact"], verify.stdout)
        import psycopg2  # pg_cluster.require() checked it is there

        conn = psycopg2.connect(db)
        try:
            cur = conn.cursor()
            cur.execute("SELECT seq, input_digest, input_dtype, length(vector) FROM decisions ORDER BY seq")
            rows = cur.fetchall()
            self.assertEqual([r[0] for r in rows], list(range(1, ROWS + 1)))
            self.assertTrue(all(r[3] > 0 and r[3] % 4 == 0 for r in rows))
            cur.execute("SELECT decision_seq, input FROM decision_inputs ORDER BY decision_seq")
            stored = cur.fetchall()
            if inputs == "none":
                self.assertEqual(stored, [])
                self.assertTrue(all(r[1] is None and r[2] is None for r in rows))
                return
            self.assertEqual([s[0] for s in stored], list(range(1, ROWS + 1)))
            for (seq, digest, dtype, _), (_, data) in zip(rows, stored):
                self.assertEqual(dtype, "f16", seq)
                self.assertEqual(bytes(digest), hashlib.sha256(bytes(data)).digest(), seq)
        finally:
            conn.close()

    def test_inputs_stored(self):
        self.write_and_check("f16")

    def test_no_inputs(self):
        self.write_and_check("none")


if __name__ == "__main__":
    unittest.main(verbosity=2)
