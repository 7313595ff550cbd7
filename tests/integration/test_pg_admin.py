"""Reviewers, API keys and input retention across a fleet (issue 17): two pgcld replicas
(--writer-id a and b) on one real PostgreSQL database (a throw-away cluster, pg_cluster.py).

  - a decision scored through a is contested through b and resolved through a; the key that filed
    the contest cannot resolve it, on either replica;
  - two reviewers contest one decision at the same moment, one through a and one through b, round
    after round: exactly one 201 each round, the other 409 contest_open; two resolutions of one
    contest race the same way: exactly one 201, the other 409 already_resolved;
  - a key made with `pgcld keys create --db URI` works at once on both replicas; `keys list`,
    `keys import` and `keys revoke` work on the URI too; `pgcld migrate --db URI` is idempotent;
  - a key revoked through a's admin route is refused by b, which learns it from the database by
    itself (docs: within about a second; the test waits for it, it does not time it);
  - with a tiny --input-retention-days the stored inputs are dropped (decision_inputs emptied)
    except under an open contest, and a re-score through the other replica answers 410
    input_dropped.

Skips (77) when PostgreSQL 15 or psycopg2 is not installed (pg_cluster.require()).

Run: /usr/bin/python3 tests/integration/test_pg_admin.py (PGCLD_BIN selects the binary).
"""
import functools
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import pg_cluster as PG  # noqa: E402

TINY = "tiny_binary"
RACE_ROUNDS = 12


def items(n, seed, prefix="fleet"):
    return H.json_items(H.random_embeddings(n, 32, seed), prefix)


pgcld = functools.partial(H.run_pgcld, check=True)


def at_once(*calls):
    """Runs the calls on threads released together by a barrier; returns their results in order."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(i, call):
        barrier.wait()
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def start_fleet(testcase_cls, uri, models, args=()):
    """Replicas a and b on uri (each made its three keys with `pgcld keys create --db URI`)."""
    fleet = []
    for writer in ("a", "b"):
        d = H.Daemon(models=models, default_model="tiny", db_path=uri, args=["--writer-id", writer, *args])
        testcase_cls.addClassCleanup(d.cleanup)
        d.start()
        fleet.append(d)
    return fleet


class FleetReviewAndKeysTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        PG.require()
        H.require_models(TINY)
        PG.cluster_for_class(cls, "pgcld-pg-admin-")
        cls.uri = cls.cluster.new_database()
        cls.a, cls.b = start_fleet(cls, cls.uri, H.tiny_binary_root(cls.tmp))
        cls.reviewer2 = cls.a.create_key("reviewer", "second reviewer")

    def db_scalar(self, sql, params=()):
        conn = self.cluster.connect(self.uri.rsplit("/", 1)[1])
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            return cur.fetchone()[0]
        finally:
            conn.close()

    def score_one(self, replica, seed):
        r = replica.score({"items": items(1, seed)})
        self.assertEqual(r.status, 200, r)
        return r.json["results"][0]

    def test_contest_through_b_resolve_through_a(self):
        a, b = self.a, self.b
        target = self.score_one(a, 1)
        did = target["decision_id"]
        filer = b.keys["reviewer"]
        r = b.post(f"/v1/decisions/{did}/contests", {"reason": "a quote, not abuse"}, key=filer)
        self.assertEqual(r.status, 201, r)
        cid = r.json["contest_id"]
        # the filer cannot resolve it, through either replica
        for replica in (a, b):
            r = replica.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "mine"}, key=filer)
            self.assertEqual((r.status, r.error_code()), (403, "filer_cannot_resolve"), r)
        # a second contest on the same decision is refused through a
        r = a.post(f"/v1/decisions/{did}/contests", {"reason": "again"}, key=a.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (409, "contest_open"), r)
        corrected = "pos" if target["label"] == "neg" else "neg"
        r = a.post(f"/v1/contests/{cid}/resolution", {"outcome": "overturned", "corrected_label": "no-such-label",
                                                      "note": "x"}, key=self.reviewer2)
        self.assertEqual((r.status, r.error_code()), (422, "invalid_label"), r)
        r = a.post(f"/v1/contests/{cid}/resolution",
                   {"outcome": "overturned", "corrected_label": corrected, "note": "satire"}, key=self.reviewer2)
        self.assertEqual(r.status, 201, r)
        self.assertEqual((r.json["outcome"], r.json["corrected_label"]), ("overturned", corrected))
        r = b.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "late"}, key=a.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (409, "already_resolved"), r)
        r = b.post("/v1/contests/00000000-0000-7000-8000-000000000000/resolution", {"outcome": "upheld", "note": "?"},
                   key=a.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (404, "contest_not_found"), r)
        r = b.post("/v1/decisions/00000000-0000-7000-8000-000000000000/contests", {"reason": "?"},
                   key=a.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (404, "decision_not_found"), r)
        # once resolved, a new contest may be filed (through b), and the rows are in the database
        r = b.post(f"/v1/decisions/{did}/contests", {"reason": "new evidence"}, key=self.reviewer2)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.db_scalar("SELECT count(*) FROM contests WHERE decision_id = %s", (did,)), 2)
        self.assertEqual(self.db_scalar("SELECT count(*) FROM resolutions WHERE contest_id = %s", (cid,)), 1)
        self.assertEqual(self.db_scalar("SELECT filer_key_id FROM contests WHERE contest_id = %s", (cid,)),
                         filer[:14])

    def test_contest_and_resolution_races(self):
        a, b = self.a, self.b
        for round_ in range(RACE_ROUNDS):
            did = self.score_one(a if round_ % 2 else b, 100 + round_)["decision_id"]
            body = {"reason": f"race {round_}"}
            ra, rb = at_once(lambda: a.post(f"/v1/decisions/{did}/contests", body, key=a.keys["reviewer"]),
                             lambda: b.post(f"/v1/decisions/{did}/contests", body, key=b.keys["reviewer"]))
            statuses = sorted([ra.status, rb.status])
            self.assertEqual(statuses, [201, 409], (round_, ra, rb))
            loser = ra if ra.status == 409 else rb
            self.assertEqual(loser.error_code(), "contest_open", loser)
            winner = ra if ra.status == 201 else rb
            cid = winner.json["contest_id"]
            self.assertEqual(self.db_scalar("SELECT count(*) FROM contests WHERE decision_id = %s", (did,)), 1)
            # resolutions race: neither key filed it (the second reviewer's key and the admin-made one)
            note = {"outcome": "upheld", "note": f"race {round_}"}
            ra, rb = at_once(lambda: a.post(f"/v1/contests/{cid}/resolution", note, key=self.reviewer2),
                             lambda: b.post(f"/v1/contests/{cid}/resolution", note, key=self.reviewer2))
            self.assertEqual(sorted([ra.status, rb.status]), [201, 409], (round_, ra, rb))
            loser = ra if ra.status == 409 else rb
            self.assertEqual(loser.error_code(), "already_resolved", loser)
            self.assertEqual(self.db_scalar("SELECT count(*) FROM resolutions WHERE contest_id = %s", (cid,)), 1)

    def test_cli_key_works_on_both_replicas(self):
        out = pgcld("keys", "create", "--db", self.uri, "--role", "scorer", "--name", "cli scorer").stdout
        key = out.strip().splitlines()[-1]
        key_id = key[:14]
        # at once on both: an unknown key_id makes each replica look at the database now
        ra, rb = at_once(lambda: self.a.score({"items": items(1, 7)}, key=key),
                         lambda: self.b.score({"items": items(1, 8)}, key=key))
        self.assertEqual((ra.status, rb.status), (200, 200), (ra, rb))
        listed = pgcld("keys", "list", "--db", self.uri).stdout
        self.assertIn(f'"key_id":"{key_id}"', listed.replace(" ", ""))
        self.assertEqual(self.db_scalar("SELECT count(*) FROM admin_events WHERE action = 'key.create' AND target = %s",
                                        (key_id,)), 1)
        # import of the same key: nothing changes; with another role: refused
        key_file = os.path.join(self.tmp, "scorer.key")
        with open(key_file, "w") as f:
            f.write(key + "\n")
        p = pgcld("keys", "import", "--db", self.uri, "--role", "scorer", "--name", "x", "--key-file", key_file)
        self.assertIn("nothing changed", p.stdout)
        p = pgcld("keys", "import", "--db", self.uri, "--role", "admin", "--name", "x", "--key-file", key_file,
                  check=False)
        self.assertEqual(p.returncode, 1, p)
        # revoked with the CLI: refused on both, by their periodic checks
        pgcld("keys", "revoke", "--db", self.uri, "--key-id", key_id, "--writer-id", "ops-terminal")
        H.wait_for(lambda: self.a.score({"items": items(1, 9)}, key=key).status == 401 and
                   self.b.score({"items": items(1, 9)}, key=key).status == 401,
                   "both replicas refuse the key revoked with the CLI")
        self.assertIn(key_id, self.db_scalar("SELECT string_agg(target, ',') FROM admin_events"
                                             " WHERE action = 'key.revoke'"))
        p = pgcld("keys", "revoke", "--db", self.uri, "--key-id", key_id, check=False)
        self.assertEqual(p.returncode, 1, p)
        self.assertIn("already revoked", p.stderr)

    def test_revoked_through_a_refused_by_b(self):
        a, b = self.a, self.b
        r = a.post("/v1/admin/keys", {"role": "scorer", "name": "short-lived"})
        self.assertEqual(r.status, 201, r)
        key, key_id = r.json["key"], r.json["key_id"]
        self.assertEqual(b.score({"items": items(1, 11)}, key=key).status, 200)
        # b has checked its keys recently: the revocation must reach it by its periodic check
        self.assertEqual(b.score({"items": items(1, 12)}, key=key).status, 200)
        r = a.request("DELETE", f"/v1/admin/keys/{key_id}")
        self.assertEqual(r.status, 200, r)
        # b learns it from the database, by itself (no restart, nothing sent to b about it)
        H.wait_for(lambda: b.score({"items": items(1, 13)}, key=key).status == 401, "b refuses the revoked key",
                   interval=0.02)
        self.assertEqual(a.score({"items": items(1, 14)}, key=key).status, 401)
        listed = {k["key_id"]: k for k in b.get("/v1/admin/keys").json["keys"]}
        self.assertIsNotNone(listed[key_id]["revoked_at"])

    def test_zz_every_chain_verifies(self):
        """Last (unittest runs a class's tests in name order): contests, resolutions and key events
        of both replicas and of the CLI's writers are chained, and every chain verifies."""
        for kind in ("contests", "resolutions", "admin_events"):
            self.assertEqual(self.db_scalar(f"SELECT count(*) FROM {kind}"),
                             self.db_scalar("SELECT coalesce(sum(n), 0) FROM audit_chain_runs WHERE kind = %s",
                                            (kind,)), kind)
        for replica in (self.a, self.b):
            r = replica.get("/v1/audit/verify", key=replica.keys["reviewer"])
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.json["intact"], r.json)
            writers = [w["writer_id"] for w in r.json["writers"]]
            self.assertIn("a", writers)
            self.assertIn("b", writers)

    def test_migrate_command(self):
        p = pgcld("migrate", "--db", self.uri)
        self.assertIn("PostgreSQL schema at version", p.stdout)
        uri = self.cluster.new_database()
        p = pgcld("migrate", "--db", uri)
        self.assertIn("PostgreSQL schema at version", p.stdout)
        sqlite_path = os.path.join(self.tmp, "migrated.db")
        p = pgcld("migrate", "--db", sqlite_path)
        self.assertIn("SQLite schema at version", p.stdout)
        self.assertTrue(os.path.exists(sqlite_path))
        p = pgcld("migrate", check=False)
        self.assertEqual(p.returncode, 2, p)


class FleetRetentionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        PG.require()
        H.require_models(TINY)
        PG.cluster_for_class(cls, "pgcld-pg-retention-")
        cls.uri = cls.cluster.new_database()
        cls.dbname = cls.uri.rsplit("/", 1)[1]
        cls.a, cls.b = start_fleet(cls, cls.uri, H.tiny_binary_root(cls.tmp), args=["--input-retention-days", "0.00002"])

    def db_scalar(self, sql, params=()):
        conn = self.cluster.connect(self.dbname)
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            return cur.fetchone()[0]
        finally:
            conn.close()

    def test_old_inputs_dropped_except_under_open_contest(self):
        a, b = self.a, self.b
        r = a.score({"items": items(4, 21, "ret")})
        self.assertEqual(r.status, 200, r)
        ids = [x["decision_id"] for x in r.json["results"]]
        r = b.post(f"/v1/decisions/{ids[0]}/contests", {"reason": "keep my input"}, key=b.keys["reviewer"])
        self.assertEqual(r.status, 201, r)
        cid = r.json["contest_id"]
        kept = self.db_scalar("SELECT seq FROM decisions WHERE decision_id = %s", (ids[0],))

        def remaining():
            return self.db_scalar("SELECT count(*) FROM decision_inputs i JOIN decisions d ON d.seq = i.decision_seq"
                                  " WHERE d.decision_id = ANY(%s)", (ids,))

        self.assertTrue(H.wait_until(lambda: remaining() == 1, timeout=30), remaining())
        self.assertEqual(self.db_scalar("SELECT decision_seq FROM decision_inputs i JOIN decisions d"
                                        " ON d.seq = i.decision_seq WHERE d.decision_id = ANY(%s)", (ids,)), kept)
        # the other replica re-scores: dropped input -> 410; the contested one still re-scores
        r = b.post(f"/v1/decisions/{ids[1]}/rescore", {}, key=b.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (410, "input_dropped"), r)
        r = a.post(f"/v1/decisions/{ids[0]}/rescore", {}, key=a.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        # resolved: the kept input goes at a later pass
        r = a.post(f"/v1/contests/{cid}/resolution", {"outcome": "upheld", "note": "fine"}, key=a.keys["reviewer"])
        self.assertEqual(r.status, 201, r)
        self.assertTrue(H.wait_until(lambda: remaining() == 0, timeout=30), remaining())
        r = b.post(f"/v1/decisions/{ids[0]}/rescore", {}, key=b.keys["reviewer"])
        self.assertEqual((r.status, r.error_code()), (410, "input_dropped"), r)
        rec = b.get(f"/v1/decisions/{ids[1]}", key=b.keys["reviewer"])
        self.assertEqual(rec.status, 200, rec)
        self.assertIs(rec.json["input_dropped"], True, rec.json)
        # the leaves commit to the inputs' digests: every chain still verifies after the drop
        r = a.get("/v1/audit/verify", key=a.keys["reviewer"])
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json["intact"], r.json)
        self.assertGreaterEqual(self.db_scalar("SELECT through_seq FROM input_retention"), max(
            self.db_scalar("SELECT seq FROM decisions WHERE decision_id = %s", (i,)) for i in ids))


if __name__ == "__main__":
    H.main()
