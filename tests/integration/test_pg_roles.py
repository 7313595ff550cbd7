#!/usr/bin/python3
"""The PostgreSQL store's roles (issue 17, scope 2; deploy/postgres/roles.sql, docs/scaling.md
"Privileges"), against a real throw-away PostgreSQL 15 cluster (pg_cluster.py).

The set-up an operator follows: roles.sql run with psql as the superuser, `pgcld migrate` as
pgcld_owner, daemons as pgcld_writer. Checked:

  - pgcld_writer holds exactly the documented privileges on every table of the schema (a table this
    test does not know fails it: a new table needs its grant and its line here), owns nothing and
    cannot create; roles.sql run again, before or after the migration, changes nothing;
  - as pgcld_writer, the statements the store makes go through (rows appended to every append-only
    table, foreign keys and the checkpoints' identity column included; the seq ranges, last_seen,
    retention, revocation and idempotency expiry), and changing or deleting an audit row, truncating,
    creating or dropping is refused with permission denied (SQLSTATE 42501);
  - the owner, who holds every privilege, is refused too, by the append-only triggers;
  - a daemon started as pgcld_writer (the URI names the role) scores, and its rows and chain are there;
  - a daemon as pgcld_writer on a database not yet migrated stops, saying to run `pgcld migrate` as
    the owner.

Run: PGCLD_BIN=build-test/server/pgcld /usr/bin/python3 tests/integration/test_pg_roles.py
"""

import functools
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import pg_cluster  # noqa: E402

ROLES_SQL = os.path.join(H.SOURCE_ROOT, "deploy", "postgres", "roles.sql")
PSQL = "/usr/lib/postgresql/15/bin/psql"

APPEND = {"SELECT", "INSERT"}
# table -> (table-wide privileges, columns it may UPDATE): deploy/postgres/roles.sql and
# pgcld_grant_writer in migrations/pg/0001_fleet.sql say why each one beyond APPEND is there.
EXPECTED = {
    "schema_migrations": ({"SELECT"}, set()),
    "fleet_counters": ({"SELECT"}, {"decisions", "admin_events", "contests", "resolutions", "shadow_decisions"}),
    "writers": (APPEND, {"last_seen"}),
    "decisions": (APPEND, set()),
    "decision_inputs": (APPEND | {"DELETE"}, set()),
    "input_retention": ({"SELECT"}, {"through_seq"}),
    "api_keys": (APPEND, {"revoked_at", "revoked_by"}),
    "admin_events": (APPEND, set()),
    "shadow_decisions": (APPEND, set()),
    "contests": (APPEND, set()),
    "resolutions": (APPEND, set()),
    "idempotency_keys": (APPEND | {"DELETE"}, set()),
    "audit_chain": (APPEND, set()),
    "audit_chain_runs": (APPEND, set()),
    "audit_log_nodes": (APPEND, set()),
    "audit_checkpoints": (APPEND, set()),
    "audit_cuts": ({"SELECT"}, set()),  # archival runs as the owner
    "log_writers": (APPEND, {"size", "root"}),  # migrations/pg/0003_log.sql: a log's state moves forward
    "log_leaves": (APPEND, set()),
    "log_tile_roots": (APPEND, set()),
    "log_checkpoints": (APPEND, {"cosignatures"}),  # witnesses' lines are appended
}
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
APPEND_ONLY = ("decisions", "admin_events", "shadow_decisions", "contests", "resolutions", "audit_chain",
               "audit_chain_runs", "audit_log_nodes", "audit_checkpoints", "log_writers", "log_leaves",
               "log_tile_roots", "log_checkpoints")

T0 = H.timestamp()  # the rows' times: now, as the store stamps them (never a fixed date that grows old)


pgcld = functools.partial(H.run_pgcld, timeout=60)


class RolesTest(unittest.TestCase):
    """One cluster, one database set up as deploy/postgres/roles.sql says."""

    @classmethod
    def setUpClass(cls):
        pg_cluster.require()
        H.require_binary()
        cls.cluster = pg_cluster.PgCluster()
        cls.addClassCleanup(cls.cluster.drop)
        cls.db = cls.cluster.new_database().rsplit("/", 1)[1]
        cls.run_roles_sql()
        cls.migrate_as_owner()

    @classmethod
    def migrate_as_owner(cls):
        p = pgcld("migrate", "--db", cls.uri("pgcld_owner"))
        if p.returncode != 0:
            raise AssertionError(f"pgcld migrate as pgcld_owner: exit {p.returncode}\n{p.stderr}")
        if "schema at version" not in p.stdout:
            raise AssertionError(f"pgcld migrate said: {p.stdout!r}")

    @classmethod
    def uri(cls, user):
        return cls.cluster.uri(cls.db, user)

    @classmethod
    def run_roles_sql(cls):
        p = subprocess.run([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", ROLES_SQL, cls.uri("postgres")],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError(f"psql -f roles.sql: exit {p.returncode}\n{p.stderr}")

    def connect(self, user):
        import psycopg2
        conn = psycopg2.connect(self.uri(user))
        self.addCleanup(conn.close)
        return conn

    def privileges(self):
        """{table: (table-wide privileges, columns with UPDATE)} of pgcld_writer, for every table of
        the schema."""
        cur = self.connect("postgres").cursor()
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        out = {}
        for (table,) in cur.fetchall():
            privs = set()
            for p in TABLE_PRIVILEGES:
                cur.execute("SELECT has_table_privilege('pgcld_writer', %s, %s)", (f"public.{table}", p))
                if cur.fetchone()[0]:
                    privs.add(p)
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
                        " AND table_name = %s AND has_column_privilege('pgcld_writer', %s, column_name, 'UPDATE')",
                        (table, f"public.{table}"))
            out[table] = (privs, {r[0] for r in cur.fetchall()} if "UPDATE" not in privs else {"*"})
        return out

    def refused(self, conn, sql, params=(), needle="permission denied"):
        """sql fails on conn with SQLSTATE 42501 (insufficient_privilege) and needle in the message;
        the transaction is rolled back."""
        import psycopg2
        cur = conn.cursor()
        with self.assertRaises(psycopg2.Error, msg=sql) as cm:
            cur.execute(sql, params)
        conn.rollback()
        self.assertEqual(cm.exception.pgcode, "42501", f"{sql}: {cm.exception}")
        self.assertIn(needle, str(cm.exception), sql)
        return cm.exception

    def append_rows(self, conn, writer_id, seq):
        """As the store does: one decision, its input, a contest, a resolution, an admin event, a
        chain entry with its run and node, a checkpoint; the seq counters and the writer's row kept
        current. Returns the decision id."""
        cur = conn.cursor()
        d = f"0190a000-0000-7000-8000-{seq:012d}"
        cur.execute("INSERT INTO writers VALUES (%s, %s, %s) ON CONFLICT (writer_id) DO UPDATE SET last_seen ="
                    " EXCLUDED.last_seen", (writer_id, T0, T0))
        cur.execute("UPDATE fleet_counters SET decisions = decisions + 1, contests = contests + 1,"
                    " resolutions = resolutions + 1, admin_events = admin_events + 1 WHERE id = 1 RETURNING decisions")
        cur.execute("INSERT INTO decisions (seq, decision_id, created_at, request_id, item_id, model_name,"
                    " model_version, model_sha256, label, label_index, probabilities, decision, policy, vector,"
                    " input_sha256, latency_us) VALUES (%s, %s, %s, 'r', 'i', 'toxicity', '1', 'x', 'toxic', 1,"
                    " '{}', 'block', '{}', '\\x00', 'y', 1)", (seq, d, T0))
        cur.execute("INSERT INTO decision_inputs VALUES (%s, '\\x00')", (seq,))
        cur.execute("INSERT INTO contests VALUES (%s, %s, %s, %s, 'a', NULL, 'why')", (seq, f"c-{seq}", d, T0))
        cur.execute("INSERT INTO resolutions VALUES (%s, %s, %s, 'b', NULL, 'upheld', NULL, 'ok')",
                    (seq, f"c-{seq}", T0))
        cur.execute("INSERT INTO admin_events VALUES (%s, %s, %s, 'a', 'key.create', 't', '{}')", (seq, f"e-{seq}", T0))
        cur.execute("INSERT INTO audit_chain VALUES (%s, %s, 'commit', %s, 'p', 'h0', 'h1', 1, '\\x00')",
                    (writer_id, seq, seq))
        cur.execute("INSERT INTO audit_chain_runs VALUES ('decisions', %s, 1, %s, %s, 0)", (seq, writer_id, seq))
        cur.execute("INSERT INTO audit_log_nodes VALUES (%s, 1, %s, %s)", (writer_id, seq, b"\x01" * 32))
        cur.execute("INSERT INTO audit_checkpoints (created_at, statement, public_key, signature)"
                    " VALUES (%s, 's', 'k', 'g') RETURNING seq", (T0,))
        cur.execute("INSERT INTO api_keys VALUES (%s, 'n', 'scorer', 'h', %s, 'a', NULL, NULL)", (f"k-{seq}", T0))
        cur.execute("UPDATE api_keys SET revoked_at = %s, revoked_by = 'a' WHERE key_id = %s", (T0, f"k-{seq}"))
        cur.execute("INSERT INTO idempotency_keys VALUES ('s', %s, 'b', 'r', '{}', %s, %s, NULL)", (f"i-{seq}", T0, T0))
        cur.execute("DELETE FROM idempotency_keys WHERE idem_key = %s", (f"i-{seq}",))
        # the writer's log (migrations/pg/0003_log.sql): begun, a leaf and a tile root, its state moved,
        # a checkpoint and a witness's cosignature line appended
        cur.execute("INSERT INTO log_writers (writer_id, created_at, size, root) VALUES (%s, %s, 0, %s)"
                    " ON CONFLICT (writer_id) DO NOTHING", (writer_id, T0, b"\x00" * 32))
        cur.execute("INSERT INTO log_leaves VALUES (%s, %s, %s, %s)", (writer_id, seq, b"\x02" * 32, b"\x01\x06"))
        cur.execute("INSERT INTO log_tile_roots VALUES (%s, 0, %s, %s)", (writer_id, seq, b"\x03" * 32))
        cur.execute("UPDATE log_writers SET size = size + 1, root = %s WHERE writer_id = %s", (b"\x04" * 32, writer_id))
        cur.execute("INSERT INTO log_checkpoints (writer_id, size, note, created_at) VALUES (%s, %s, 'n', %s)",
                    (writer_id, seq, T0))
        cur.execute("UPDATE log_checkpoints SET cosignatures = cosignatures || 'w' WHERE writer_id = %s AND size = %s",
                    (writer_id, seq))
        cur.execute("UPDATE input_retention SET through_seq = %s WHERE id = 1", (seq,))
        cur.execute("DELETE FROM decision_inputs WHERE decision_seq = %s", (seq,))
        return d

    # ---------------------------------------------------------------- the grants

    def test_writer_holds_exactly_the_documented_privileges(self):
        got = self.privileges()
        self.assertEqual(set(got) - set(EXPECTED), set(),
                         "a table pgcld_writer's grants do not cover: add it to pgcld_grant_writer and EXPECTED")
        self.assertEqual(set(EXPECTED) - set(got), set(), "a table of EXPECTED is not in the schema")
        for table, (privs, columns) in EXPECTED.items():
            self.assertEqual(got[table], (privs, columns), table)
        # roles.sql again, now that the schema exists, converges to the same grants.
        self.run_roles_sql()
        self.assertEqual(self.privileges(), got)

    def test_writer_owns_nothing_and_cannot_create(self):
        cur = self.connect("postgres").cursor()
        cur.execute("SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner"
                    " WHERE r.rolname = 'pgcld_writer'")
        self.assertEqual(cur.fetchone()[0], 0)
        cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'pgcld_owner'")
        self.assertEqual(cur.fetchone()[0], 0, "every table belongs to the role that ran pgcld migrate")
        cur.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles"
                    " WHERE rolname IN ('pgcld_owner', 'pgcld_writer')")
        self.assertEqual(cur.fetchall(), [(False, False, False, False)] * 2)
        w = self.connect("pgcld_writer")
        self.refused(w, "CREATE TABLE shadow_copy (x int)")
        self.refused(w, "DROP TABLE decisions", needle="must be owner")
        self.refused(w, "ALTER TABLE decisions DISABLE TRIGGER decisions_append_only", needle="must be owner")

    # ---------------------------------------------------------------- as pgcld_writer

    def test_writer_appends_what_the_store_writes(self):
        w = self.connect("pgcld_writer")
        self.append_rows(w, "roles-append", 1001)
        w.rollback()  # the rows themselves do not matter: the statements went through

    def test_writer_cannot_change_or_delete_audit_rows(self):
        owner = self.connect("pgcld_owner")
        self.append_rows(owner, "roles-refused", 2001)
        owner.commit()
        w = self.connect("pgcld_writer")
        self.refused(w, "UPDATE decisions SET decision = 'allow' WHERE seq = 2001")
        self.refused(w, "DELETE FROM decisions WHERE seq = 2001")
        self.refused(w, "DELETE FROM audit_chain WHERE writer_id = 'roles-refused'")
        self.refused(w, "UPDATE audit_chain SET hash = 'forged' WHERE writer_id = 'roles-refused'")
        self.refused(w, "UPDATE contests SET reason = 'other' WHERE seq = 2001")
        self.refused(w, "DELETE FROM resolutions")
        self.refused(w, "UPDATE log_leaves SET record = '\\x0102' WHERE writer_id = 'roles-refused'")
        self.refused(w, "DELETE FROM log_leaves WHERE writer_id = 'roles-refused'")
        self.refused(w, "UPDATE log_writers SET created_at = 'x' WHERE writer_id = 'roles-refused'")
        self.refused(w, "UPDATE log_checkpoints SET note = 'forged' WHERE writer_id = 'roles-refused'")
        self.refused(w, "DELETE FROM admin_events")
        self.refused(w, "UPDATE api_keys SET key_sha256 = 'mine', role = 'admin'")
        self.refused(w, "DELETE FROM api_keys")
        self.refused(w, "UPDATE fleet_counters SET id = 2")
        self.refused(w, "UPDATE idempotency_keys SET answer = '{}'")
        self.refused(w, "DELETE FROM schema_migrations")
        self.refused(w, "INSERT INTO audit_cuts (decisions_through, admin_events_through, contests_through,"
                        " resolutions_through, rows_archived, archived_before, created_at, statement, public_key,"
                        " signature, archive_sha256, archive_name) VALUES (9, 9, 9, 9, 0, 'x', 'x', 'x', 'x', 'x',"
                        " 'x', 'x')")
        for table in APPEND_ONLY + ("decision_inputs", "api_keys"):
            self.refused(w, f"TRUNCATE {table}")
        # nothing was changed
        cur = owner.cursor()
        cur.execute("SELECT decision FROM decisions WHERE seq = 2001")
        self.assertEqual(cur.fetchall(), [("block",)])

    # ---------------------------------------------------------------- as the owner: the triggers

    def test_owner_is_refused_by_the_append_only_triggers(self):
        owner = self.connect("pgcld_owner")
        self.append_rows(owner, "roles-owner", 3001)
        owner.cursor().execute("INSERT INTO decision_inputs VALUES (3001, '\\x00')")  # retention took the first
        owner.commit()
        self.refused(owner, "UPDATE decisions SET decision = 'allow' WHERE seq = 3001", needle="append-only")
        self.refused(owner, "DELETE FROM audit_chain WHERE writer_id = 'roles-owner'", needle="append-only")
        self.refused(owner, "UPDATE decision_inputs SET input = '\\x01'", needle="append-only")
        self.refused(owner, "UPDATE log_leaves SET record = '\\x0102'", needle="append-only")
        self.refused(owner, "UPDATE log_writers SET size = 0 WHERE writer_id = 'roles-owner'", needle="only grows")
        self.refused(owner, "UPDATE log_checkpoints SET note = 'forged'", needle="never rewritten")
        self.refused(owner, "UPDATE log_checkpoints SET cosignatures = ''", needle="never rewritten")
        for table in APPEND_ONLY:
            self.refused(owner, f"TRUNCATE {table} CASCADE", needle="append-only")

    # ---------------------------------------------------------------- a daemon as pgcld_writer

    def test_writer_on_an_unmigrated_database_says_who_can_migrate(self):
        db = self.cluster.new_database().rsplit("/", 1)[1]
        p = subprocess.run([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", ROLES_SQL, self.cluster.uri(db)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = pgcld("serve", "--listen", "127.0.0.1:0", "--models", os.path.join(H.SOURCE_ROOT, "models"), "--auth",
                  "off", "--db", self.cluster.uri(db, "pgcld_writer"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("permission denied", p.stderr)
        self.assertIn("run `pgcld migrate --db URI` as its owner", p.stderr)

    def test_daemon_as_writer_scores(self):
        d = H.Daemon(db_path=self.uri("pgcld_writer"), auth=False, args=["--writer-id", "roles-daemon"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertNotIn("pgcld_writer:", d.logs(10 ** 9), "a password or user:password in the logged URI")
        Z = H.random_embeddings(8, 1024, seed=17)
        r = d.score({"items": H.json_items(Z)})
        self.assertEqual(r.status, 200, r.body)
        ids = [x["decision_id"] for x in r.json["results"]]
        cur = self.connect("postgres").cursor()
        cur.execute("SELECT count(*) FROM decisions WHERE decision_id = ANY(%s)", (ids,))
        self.assertEqual(cur.fetchone()[0], len(ids))
        cur.execute("SELECT count(*) FROM audit_chain WHERE writer_id = 'roles-daemon'")
        self.assertGreaterEqual(cur.fetchone()[0], 2, "genesis and the commit of the scored rows")
        # an idempotent request and its replay: idempotency_keys written and read as pgcld_writer
        body = {"items": H.json_items(Z[:2], prefix="idem")}
        first = d.score(body, headers={"Idempotency-Key": "roles-idem-1"})
        self.assertEqual(first.status, 200, first.body)
        again = d.score(body, headers={"Idempotency-Key": "roles-idem-1"})
        self.assertEqual((again.status, again.body), (200, first.body))
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(d.stop(), 0, d.logs())
        d.start()  # its chain again, after a restart, as pgcld_writer
        v = d.get("/v1/audit/verify")
        self.assertEqual(v.status, 200, v.body)
        self.assertTrue(v.json.get("intact"), v.body)
        self.assertEqual(d.stop(), 0, d.logs())


if __name__ == "__main__":
    unittest.main(verbosity=2)
