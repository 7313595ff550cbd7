/* Archival past a horizon (core/audit/archive.h; docs/audit.md, "Archival past a horizon"), on real
 * SQLite files written by an encoding-2 writer like the audit store's:
 *  - the cut is the last commit entry older than the horizon, lowered below a decision with an open
 *    contest; nothing to archive (a horizon before every entry, the same horizon twice) and a cut on
 *    an encoding-1 entry are refused;
 *  - the archive verifies intact with head = the cut and the checkpoint signed at it; it holds no
 *    API keys; the pruned live database verifies intact, says how many rows were archived and up to
 *    which entry, and a live decision's proof still checks;
 *  - the triggers allow deleting exactly the rows at or below the cut, and cuts only move forward;
 *  - tampering is reported precisely: an archived row put back, a changed cut row (entry hash, log
 *    root, signature, another key), a changed entry or leaf list below the cut, a deleted row above
 *    it, a cut row deleted after pruning;
 *  - a second cut after the contest is resolved moves forward and the totals add up. */
#include "archive.h"
#include "chain_fixture.h"
#include "chain_proof.h"
#include "db.h"

/* The audit_cuts triggers too: an attacker drops them all. */
static const char DROP_CUT_TRIGGERS[] =
    "DROP TRIGGER IF EXISTS audit_cuts_append_only_u; DROP TRIGGER IF EXISTS audit_cuts_append_only_d;"
    "DROP TRIGGER IF EXISTS audit_cuts_forward;";

typedef struct fixture {
    char horizon_all[PGCL_TIMESTAMP_LEN + 1];  /* after every commit but the last two */
    char horizon_none[PGCL_TIMESTAMP_LEN + 1]; /* before every commit */
    char horizon_end[PGCL_TIMESTAMP_LEN + 1];  /* after every commit */
    int64_t open_contest_decision;
    int64_t entries;
} fixture;

/* Waits until the wall clock reads later than stamp (microseconds: at once, unless the clock stepped
 * back); out: the clock then. A deadline of 60 s is reached only when the clock does not move. */
static void clock_past(const char *stamp, char out[PGCL_TIMESTAMP_LEN + 1]) {
    int64_t deadline = pgcl_monotonic_us() + 60 * 1000000;
    do pgcl_timestamp_now(out);
    while (strcmp(out, stamp) <= 0 && pgcl_monotonic_us() < deadline);
    CHECK(strcmp(out, stamp) > 0, "the wall clock never passed %s (now %s)", stamp, out);
}

/* A horizon strictly between the commits before and after it: later than every row stamped so far,
 * earlier than every row stamped after it returns. */
static void mark_time(char out[PGCL_TIMESTAMP_LEN + 1]) {
    char before[PGCL_TIMESTAMP_LEN + 1], after[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(before);
    clock_past(before, out);
    clock_past(out, after);
}

static void commit_v2(writer *w) {
    char err[512] = "";
    CHECK(pgcl_chain_seal(w->chain, err, sizeof err) == PGCL_OK, "seal: %s", err);
    txn_end(w, true);
}

/* genesis; [2] 5 decisions + an event; [3] 5 decisions, a contest of decision 2 and its resolution;
 * [4] 4 decisions; [5] 3 decisions and an open contest of decision 12; [6] 3 decisions, an event, a
 * contest of decision 16 and its resolution. */
static void build_v2(const char *path, fixture *f) {
    writer w;
    char err[512] = "";
    if (writer_open(&w, path, true) != 0) return;
    pgcl_chain_destroy(w.chain);
    w.chain = pgcl_chain_create_encoding(w.db, 2, err, sizeof err);
    CHECK(w.chain != NULL, "encoding 2: %s", err);
    mark_time(f->horizon_none);
    txn_begin(&w);
    for (int i = 0; i < 5; i++) add_decision(&w, true);
    add_event(&w, "model.activate", true);
    commit_v2(&w);
    txn_begin(&w);
    for (int i = 0; i < 5; i++) add_decision(&w, true);
    int64_t c = add_contest(&w, 2);
    add_resolution(&w, c);
    commit_v2(&w);
    txn_begin(&w);
    for (int i = 0; i < 4; i++) add_decision(&w, true);
    commit_v2(&w);
    txn_begin(&w);
    for (int i = 0; i < 3; i++) add_decision(&w, true);
    add_contest(&w, 12);
    commit_v2(&w);
    f->open_contest_decision = 12;
    mark_time(f->horizon_all);
    txn_begin(&w);
    for (int i = 0; i < 3; i++) add_decision(&w, true);
    add_event(&w, "key.create", true);
    add_resolution(&w, add_contest(&w, 16));
    commit_v2(&w);
    mark_time(f->horizon_end);
    f->entries = pgcl_chain_head_seq(w.chain);
    writer_close(&w);
    CHECK(f->entries == 6, "entries: %lld", (long long)f->entries);
    CHECK(exec_on(path, "INSERT INTO api_keys (key_id, name, role, key_sha256, created_at, created_by) VALUES"
                        " ('pgcld_0123abcd', 'ops', 'admin', 'x', '2026-11-21T10:00:00.000000Z', 'cli')",
                  err, sizeof err) == SQLITE_OK,
          "an API key: %s", err);
}

static pgcl_chain_report verify_with_key(const char *path, const char *const *cps, int n, const char *pk) {
    pgcl_chain_report rep;
    char err[512] = "";
    pgcl_status st = pgcl_chain_verify_signed(path, cps, n, pk, &rep, err, sizeof err);
    CHECK(st == PGCL_OK, "verify %s: %s", path, err);
    return rep;
}

static void test_plan(const char *base, const fixture *f) {
    sqlite3 *db = pgcl_db_open_reader(base, NULL, 0);
    CHECK(db != NULL, "open %s", base);
    pgcl_archive_cut cut;
    char err[512] = "";
    CHECK(pgcl_archive_plan(db, f->horizon_none, 0, &cut, err, sizeof err) == PGCL_ERR_NOT_FOUND &&
              strstr(err, "nothing to archive"),
          "a horizon before every entry: %s", err);
    /* entry 5 is the last older one, but decision 12 (entry 4) has an open contest: cut at 3 */
    CHECK(pgcl_archive_plan(db, f->horizon_all, 0, &cut, err, sizeof err) == PGCL_OK, "plan: %s", err);
    CHECK(cut.entry_seq == 3, "cut lowered below the open contest: %lld", (long long)cut.entry_seq);
    CHECK(cut.through[0] == 10 && cut.through[1] == 1 && cut.through[2] == 1 && cut.through[3] == 1,
          "maxima %lld %lld %lld %lld", (long long)cut.through[0], (long long)cut.through[1],
          (long long)cut.through[2], (long long)cut.through[3]);
    /* a bound of 7 decisions ends inside commit 3: the cut would be commit 2, whose decision 2 was
     * contested in commit 3, so nothing can be archived; a bound of 10 is commit 3 */
    CHECK(pgcl_archive_plan(db, f->horizon_all, 7, &cut, err, sizeof err) == PGCL_ERR_NOT_FOUND &&
              strstr(err, "(decisions row 2) has a contest"),
          "bounded to 7 decisions: %s", err);
    CHECK(pgcl_archive_plan(db, f->horizon_all, 10, &cut, err, sizeof err) == PGCL_OK && cut.entry_seq == 3,
          "bounded to 10 decisions: entry %lld", (long long)cut.entry_seq);
    sqlite3_close(db);
}

/* A copy of the pruned database with every trigger dropped and sql applied. */
static const char *tampered_cut(const char *live, const char *name, const char *sql) {
    const char *path = tampered(live, name, NULL);
    char err[512] = "";
    CHECK(exec_on(path, DROP_CUT_TRIGGERS, err, sizeof err) == SQLITE_OK, "drop cut triggers: %s", err);
    CHECK(exec_on(path, sql, err, sizeof err) == SQLITE_OK, "tamper %s: %s", name, err);
    return path;
}

static void test_tampering(const char *live, const char *archive, const char *other_pk) {
    char sql[1024];
    pgcl_chain_report rep;

    snprintf(sql, sizeof sql, "ATTACH '%s' AS a; INSERT INTO decisions SELECT * FROM a.decisions WHERE seq = 4;",
             archive);
    rep = verify(tampered_cut(live, "back.db", sql), NULL, 0);
    CHECK_BAD(rep, 3, "decisions row 4 is below the archive cut at entry 3 but present");

    rep = verify(tampered_cut(live, "back_event.db",
                              "INSERT INTO admin_events (seq, event_id, created_at, actor, action, target, details)"
                              " VALUES (1, 'x', '2026-11-21T10:00:00.000000Z', 'a', 'b', 'c', '{}')"),
                 NULL, 0);
    CHECK_BAD(rep, 3, "admin_events row 1 is below the archive cut at entry 3 but present");

    rep = verify(tampered_cut(live, "cut_hash.db",
                              "UPDATE audit_cuts SET entry_hash = (SELECT hash FROM audit_chain WHERE seq = 2)"),
                 NULL, 0);
    CHECK_BAD(rep, 3, "audit_cuts: the archive cut at entry 3: its entry_hash is not entry 3's hash");

    rep = verify(tampered_cut(live, "cut_root.db", "UPDATE audit_cuts SET log_root = entry_hash"), NULL, 0);
    CHECK_BAD(rep, 3, "its log_root is not the root of the log tree over entries 1..3");

    rep = verify(tampered_cut(live, "cut_sig.db",
                              "UPDATE audit_cuts SET created_at = '2026-01-01T00:00:00.000000Z',"
                              " statement = replace(statement, created_at, '2026-01-01T00:00:00.000000Z')"),
                 NULL, 0);
    CHECK_BAD(rep, 3, "its signed checkpoint statement does not verify");

    rep = verify(tampered_cut(live, "cut_entry.db", "UPDATE audit_cuts SET entry_seq = 2"), NULL, 0);
    CHECK_BAD(rep, 2, "audit_cuts: the archive cut at entry 2: its entry_hash is not entry 2's hash");

    rep = verify_with_key(live, NULL, 0, other_pk);
    CHECK_BAD(rep, 3, "does not verify (by the expected public key)");

    rep = verify(tampered_cut(live, "entry_below.db",
                              "UPDATE audit_chain SET payload_sha256 = (SELECT payload_sha256 FROM audit_chain"
                              " WHERE seq = 3) WHERE seq = 2"),
                 NULL, 0);
    CHECK_BAD(rep, 2, "entry 2: hash does not match the entry's contents");

    rep = verify(tampered_cut(live, "leaves_below.db", "UPDATE audit_chain SET leaves = zeroblob(length(leaves))"
                                                       " WHERE seq = 3"),
                 NULL, 0);
    CHECK_BAD(rep, 3, "entry 3: its 7 stored leaf hashes do not give its Merkle root");

    rep = verify(tampered_cut(live, "entry_deleted.db", "DELETE FROM audit_chain WHERE seq = 2"), NULL, 0);
    CHECK_BAD(rep, 2, "entry 2 missing (sequence jumps from 1 to 3)");

    rep = verify(tampered_cut(live, "deleted_above.db", "DELETE FROM decisions WHERE seq = 15"), NULL, 0);
    CHECK_BAD(rep, 5, "entry 5, leaf 0: decisions row 15 is missing");

    rep = verify(tampered_cut(live, "no_cut.db", "DELETE FROM audit_cuts"), NULL, 0);
    CHECK_BAD(rep, 2, "entry 2, leaf 0: decisions row 1 is missing");

    rep = verify(tampered_cut(live, "input_back.db", "INSERT INTO decision_inputs VALUES (1, x'00')"), NULL, 0);
    CHECK_BAD(rep, 3, "decision_inputs row 1 is below the archive cut at entry 3 but present");
}

static void test_archive(const char *base, const fixture *f) {
    const char *live = tmp_path("live.db"), *archive = tmp_path("archive.db"), *key = tmp_path("signing.key");
    const char *other_key = tmp_path("other.key");
    char pk[PGCL_PUBLIC_KEY_HEX_LEN + 1], other_pk[PGCL_PUBLIC_KEY_HEX_LEN + 1], err[1024] = "";
    CHECK(copy_file(base, live) == 0, "copy");
    CHECK(pgcl_signing_keygen(key, pk, err, sizeof err) == PGCL_OK, "keygen: %s", err);
    CHECK(pgcl_signing_keygen(other_key, other_pk, err, sizeof err) == PGCL_OK, "keygen: %s", err);
    pgcl_chain_report before = verify(live, NULL, 0);
    CHECK(before.intact && before.archive_cut_seq == 0 && before.archived_rows == 0, "before: %s", before.reason);
    long long decisions = query_int(live, "SELECT count(*) FROM decisions");

    pgcl_archive_result *res = calloc(1, sizeof *res);
    CHECK(pgcl_archive_run(live, f->horizon_all, 0, key, archive, g_dir, res, err, sizeof err) == PGCL_OK, "archive: %s",
          err);
    CHECK(res->cut.entry_seq == 3 && res->rows_archived == 13, "cut %lld, %lld rows", (long long)res->cut.entry_seq,
          (long long)res->rows_archived);
    CHECK(res->checkpoint.head_seq == 3 && strcmp(res->checkpoint.head_hash, res->cut.entry_hash) == 0,
          "checkpoint at the cut");
    CHECK(strstr(res->checkpoint.file, "checkpoint-3.json") != NULL, "checkpoint file %s", res->checkpoint.file);

    /* the archive: the log up to the cut, verified against the checkpoint signed at it */
    const char *cps[1] = {res->checkpoint.file};
    pgcl_chain_report ar = verify_with_key(archive, cps, 1, pk);
    CHECK(ar.intact && ar.head_seq == 3 && strcmp(ar.head_hash, res->checkpoint.head_hash) == 0 &&
              ar.archive_cut_seq == 0,
          "archive: intact %d head %lld: %s", ar.intact, (long long)ar.head_seq, ar.reason);
    CHECK(query_int(archive, "SELECT count(*) FROM decisions") == 10 &&
              query_int(archive, "SELECT count(*) FROM api_keys") == 0 &&
              query_int(archive, "SELECT count(*) FROM audit_checkpoints WHERE head_seq > 3") == 0,
          "archive contents");
    char sql_err[256] = "";
    CHECK(exec_on(archive, "DELETE FROM decisions WHERE seq = 1", sql_err, sizeof sql_err) != SQLITE_OK,
          "the archive is append-only again");

    /* the live database: rows gone, chain whole */
    pgcl_chain_report lr = verify_with_key(live, cps, 1, pk);
    CHECK(lr.intact && lr.head_seq == 6 && strcmp(lr.head_hash, before.head_hash) == 0 && lr.archive_cut_seq == 3 &&
              lr.archived_rows == 13 && lr.events == 6,
          "live: intact %d cut %lld rows %lld: %s", lr.intact, (long long)lr.archive_cut_seq,
          (long long)lr.archived_rows, lr.reason);
    CHECK(query_int(live, "SELECT count(*) FROM decisions") == decisions - 10 &&
              query_int(live, "SELECT count(*) FROM contests") == 2 &&
              query_int(live, "SELECT count(*) FROM audit_chain") == 6 &&
              query_int(live, "SELECT count(*) FROM audit_checkpoints WHERE head_seq = 3") == 1,
          "live contents");
    CHECK(query_int(live, "SELECT count(*) FROM decisions WHERE seq <= 10") == 0, "archived decisions gone");

    /* a live decision's proof still checks */
    sqlite3 *rdb = pgcl_db_open_reader(live, NULL, 0);
    char id[64] = "";
    sqlite3_stmt *s = NULL;
    sqlite3_prepare_v2(rdb, "SELECT decision_id FROM decisions WHERE seq = 15", -1, &s, NULL);
    if (sqlite3_step(s) == SQLITE_ROW) snprintf(id, sizeof id, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    pgcl_chain_proof proof;
    CHECK(pgcl_chain_prove_decision(rdb, id, &proof, err, sizeof err) == PGCL_OK, "proof: %s", err);
    char why[256] = "";
    CHECK(pgcl_chain_proof_check(&proof, id, NULL, why, sizeof why), "proof checks: %s", why);
    pgcl_chain_proof_release(&proof);
    sqlite3_close(rdb);

    /* the triggers: only rows at or below the cut may go; cuts only move forward */
    CHECK(exec_on(live, "DELETE FROM decisions WHERE seq = 11", sql_err, sizeof sql_err) != SQLITE_OK &&
              strstr(sql_err, "append-only"),
          "a live decision cannot be deleted: %s", sql_err);
    CHECK(exec_on(live, "DELETE FROM audit_cuts", sql_err, sizeof sql_err) != SQLITE_OK, "cuts are append-only");
    CHECK(exec_on(live, "INSERT INTO audit_cuts (entry_seq, entry_hash, log_root, decisions_through,"
                        " admin_events_through, contests_through, resolutions_through, rows_archived,"
                        " archived_before, created_at, statement, public_key, signature, archive_sha256,"
                        " archive_name) VALUES (2, '', '', 20, 1, 1, 1, 0, '', '', '', '', '', '', '')",
                  sql_err, sizeof sql_err) != SQLITE_OK &&
              strstr(sql_err, "after the previous one"),
          "a cut behind the last one is refused: %s", sql_err);

    /* nothing more to archive at the same horizon */
    const char *archive2 = tmp_path("archive2.db");
    CHECK(pgcl_archive_run(live, f->horizon_all, 0, key, archive2, g_dir, res, err, sizeof err) == PGCL_ERR_NOT_FOUND,
          "the same horizon again: %s", err);
    CHECK(pgcl_archive_run(live, f->horizon_all, 0, key, archive, g_dir, res, err, sizeof err) != PGCL_OK,
          "an existing archive file is refused");

    test_tampering(live, archive, other_pk);

    /* resolve the open contest, then a second cut moves forward over everything */
    writer w;
    if (writer_open(&w, live, true) == 0) {
        pgcl_chain_destroy(w.chain);
        w.chain = pgcl_chain_create_encoding(w.db, 2, err, sizeof err);
        txn_begin(&w);
        add_resolution(&w, 2); /* the open contest of decision 12 */
        commit_v2(&w);
        writer_close(&w);
    }
    char later[PGCL_TIMESTAMP_LEN + 1];
    mark_time(later);
    if (writer_open(&w, live, true) == 0) { /* [8] newer than the horizon */
        pgcl_chain_destroy(w.chain);
        w.chain = pgcl_chain_create_encoding(w.db, 2, err, sizeof err);
        txn_begin(&w);
        int64_t d = add_decision(&w, true);
        add_event(&w, "key.revoke", true);
        add_resolution(&w, add_contest(&w, d));
        commit_v2(&w);
        writer_close(&w);
    }
    CHECK(pgcl_archive_run(live, later, 0, key, archive2, g_dir, res, err, sizeof err) == PGCL_OK, "second cut: %s", err);
    /* every table keeps its last row (decision 21, event 3, contest 4 and resolution 4, all newer) */
    CHECK(res->cut.entry_seq == 7 && res->cut.previous_entry_seq == 3 && res->rows_archived == 10 + 1 + 2 + 2,
          "second cut %lld after %lld, %lld rows", (long long)res->cut.entry_seq,
          (long long)res->cut.previous_entry_seq, (long long)res->rows_archived);
    lr = verify(live, NULL, 0);
    CHECK(lr.intact && lr.archive_cut_seq == 7 && lr.archived_rows == 28, "after the second cut: %lld %lld %s",
          (long long)lr.archive_cut_seq, (long long)lr.archived_rows, lr.reason);
    ar = verify(archive2, NULL, 0);
    CHECK(ar.intact && ar.head_seq == 7 && ar.archive_cut_seq == 3, "the second archive continues the first: %s",
          ar.reason);
    CHECK(query_int(live, "SELECT count(*) FROM decisions") == 1 && query_int(live, "SELECT count(*) FROM contests") == 1 &&
              query_int(live, "SELECT count(*) FROM admin_events") == 1 &&
              query_int(live, "SELECT count(*) FROM resolutions") == 1,
          "every row up to the cut archived");
    free(res);
}

/* The bound on decisions per cut, on a chain of three commits (entries 2, 3, 4) of 4 decisions and no
 * contest: the cut is the last commit within the bound, or the first commit whole when it is larger. */
static void test_bounded(void) {
    const char *path = tmp_path("bounded.db");
    writer w;
    char err[512] = "", horizon[PGCL_TIMESTAMP_LEN + 1];
    if (writer_open(&w, path, true) != 0) return;
    pgcl_chain_destroy(w.chain);
    w.chain = pgcl_chain_create_encoding(w.db, 2, err, sizeof err);
    for (int c = 0; c < 3; c++) {
        txn_begin(&w);
        for (int i = 0; i < 4; i++) add_decision(&w, true);
        commit_v2(&w);
    }
    writer_close(&w);
    mark_time(horizon);
    sqlite3 *db = pgcl_db_open_reader(path, NULL, 0);
    pgcl_archive_cut cut;
    static const struct {
        int64_t bound, entry, through;
    } cases[] = {{0, 4, 11}, {12, 4, 11}, {11, 3, 8}, {10, 3, 8}, {8, 3, 8}, {7, 2, 4}, {5, 2, 4}, {4, 2, 4},
                 {3, 2, 4}, {1, 2, 4}}; /* through 11 at entry 4: the last decision stays (the table's last row) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgcl_status st = pgcl_archive_plan(db, horizon, cases[i].bound, &cut, err, sizeof err);
        CHECK(st == PGCL_OK && cut.entry_seq == cases[i].entry && cut.through[0] == cases[i].through,
              "bound %lld: entry %lld, through %lld (%s)", (long long)cases[i].bound, (long long)cut.entry_seq,
              (long long)cut.through[0], err);
    }
    sqlite3_close(db);
}

/* A chain in encoding 1 (the fixture's base): a cut there is refused, naming the entry. */
static void test_encoding_1_refused(void) {
    const char *path = tmp_path("v1.db");
    base_info info;
    build_base(path, &info);
    char horizon[PGCL_TIMESTAMP_LEN + 1], err[512] = "";
    mark_time(horizon);
    sqlite3 *db = pgcl_db_open_reader(path, NULL, 0);
    pgcl_archive_cut cut;
    CHECK(pgcl_archive_plan(db, horizon, 0, &cut, err, sizeof err) == PGCL_ERR_UNSUPPORTED &&
              strstr(err, "an encoding-1 entry"),
          "encoding 1: %s", err);
    sqlite3_close(db);
}

int main(void) {
    if (!chain_fixture_setup()) return 1;
    fixture f;
    const char *base = tmp_path("base.db");
    build_v2(base, &f);
    CHECK(verify(base, NULL, 0).intact, "the base verifies");
    test_plan(base, &f);
    test_archive(base, &f);
    test_encoding_1_refused();
    test_bounded();
    chain_fixture_cleanup();
    return test_finish("test_archive");
}
