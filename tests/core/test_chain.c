/* The audit hash chain (core/audit/chain.c) and signed checkpoints (core/audit/signing.c): tampering is found.
 *
 * A database made by pgcl_audit_open() (the real migrations) gets events written the way the audit
 * writer writes them (chain_fixture.h). Then every kind of tampering, each on a fresh copy of that
 * database through a separate connection with the append-only triggers dropped first, must be
 * reported at the right entry with a precise reason: an edited score, a deleted row, a deleted
 * entry, reordered entries or rows, a forged unchained row, a duplicated entry, a truncated tail
 * (intact alone, caught by a checkpoint exported before), a rewritten history, edits of the rows
 * that predate the chain. Checkpoints with a bad signature or another signer are refused; the
 * triggers refuse UPDATE and DELETE while they stand. Verification during concurrent appends sees one
 * snapshot (always intact). record() and verify() are timed. The encoding itself is pinned by
 * test_chain_encoding.c. */
#include "chain_fixture.h"

/* ---- the cases ---- */

static void test_triggers(const char *base) {
    const char *path = tmp_path("triggers.db");
    char err[512];
    CHECK(copy_file(base, path) == 0, "copy");
    static const char *const sqls[] = {
        "UPDATE decisions SET toxicity = 0.01 WHERE seq = 1", "DELETE FROM decisions WHERE seq = 1",
        "UPDATE admin_events SET actor = 'x'", "DELETE FROM admin_events", "UPDATE contests SET reason = 'x'",
        "DELETE FROM resolutions", "UPDATE audit_chain SET hash = 'x' WHERE seq = 2",
        "DELETE FROM audit_chain WHERE seq = 47"};
    for (size_t i = 0; i < sizeof sqls / sizeof sqls[0]; i++) {
        int rc = exec_on(path, sqls[i], err, sizeof err);
        CHECK(rc == SQLITE_CONSTRAINT && strstr(err, "append-only"), "trigger refuses '%s': rc %d %s", sqls[i], rc, err);
    }
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact, "still intact after refused changes: %s", rep.reason);
}

static void test_edit_score(const char *base) {
    const char *p = tampered(base, "edit.db", "UPDATE decisions SET toxicity = 0.01 WHERE seq = 17");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "decisions", 17), "decisions row 17: payload differs");
    /* the same edit with the chain entry's payload and hash recomputed: the next entry breaks */
    p = tampered(base, "edit-vector.db", "UPDATE decisions SET vector = zeroblob(16) WHERE seq = 33");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "decisions", 33), "decisions row 33: payload differs");
    /* an admin event and a resolution are covered the same way */
    p = tampered(base, "edit-event.db", "UPDATE admin_events SET actor = 'someone else' WHERE seq = 2");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "admin_events", 2), "admin_events row 2: payload differs");
    p = tampered(base, "edit-resolution.db", "UPDATE resolutions SET outcome = 'upheld'");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "resolutions", 1), "resolutions row 1: payload differs");
}

static void test_delete_row(const char *base) {
    const char *p = tampered(base, "delrow.db", "DELETE FROM decisions WHERE seq = 20");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "decisions", 20), "decisions row 20 is missing");
}

static void test_delete_entry(const char *base) {
    const char *p = tampered(base, "delentry.db", "DELETE FROM audit_chain WHERE seq = 12");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 12, "entry 12 missing (sequence jumps from 11 to 13)");
    CHECK(rep.events == 11, "events checked before the gap: %lld", (long long)rep.events);
    p = tampered(base, "delgenesis.db", "DELETE FROM audit_chain WHERE seq = 1");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 1, "entry 1 missing");
}

static void test_reorder(const char *base) {
    /* renumber: entries 15 and 20 swap places */
    const char *p = tampered(base, "renumber.db",
                             "UPDATE audit_chain SET seq = -1 WHERE seq = 15; UPDATE audit_chain SET seq = 15 WHERE seq "
                             "= 20; UPDATE audit_chain SET seq = 20 WHERE seq = -1");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 15, "entry 15: prev_hash does not match entry 14");
    /* the entries keep their places but point at each other's rows */
    p = tampered(base, "swaprefs.db",
                 "DROP INDEX audit_chain_row;"
                 "UPDATE audit_chain SET row_seq = -1 WHERE kind = 'decisions' AND row_seq = 4;"
                 "UPDATE audit_chain SET row_seq = 4 WHERE kind = 'decisions' AND row_seq = 9;"
                 "UPDATE audit_chain SET row_seq = 9 WHERE kind = 'decisions' AND row_seq = -1");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 5, "entry 5: hash does not match");
    /* the rows swap places (their seq), the chain untouched */
    p = tampered(base, "swaprows.db",
                 "UPDATE decisions SET seq = -1 WHERE seq = 24; UPDATE decisions SET seq = 24 WHERE seq = 26;"
                 "UPDATE decisions SET seq = 26 WHERE seq = -1");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, entry_of(p, "decisions", 24), "decisions row 24: payload differs");
}

static void test_forged_row(const char *base, const base_info *info) {
    const char *p = tampered(base, "forged.db",
                             "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
                             " model_version, model_sha256, label, label_index, probabilities, toxicity, decision,"
                             " policy, vector, input_sha256, latency_us) SELECT 'forged', created_at, request_id,"
                             " 'x', model_name, model_version, model_sha256, label, label_index, probabilities, 0.99,"
                             " 'block', policy, vector, input_sha256, 1 FROM decisions WHERE seq = 1");
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, info->entries + 1, "decisions row 41 is not in the chain");
    CHECK(rep.events == info->entries, "every entry checked");
    /* a chain entry removed at the tail leaves its row unchained */
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM audit_chain WHERE seq = %lld", info->entries);
    p = tampered(base, "unchained-tail.db", sql);
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, info->entries, "decisions row 40 is not in the chain");
}

static void test_duplicate_entry(const char *base) {
    /* an attacker with pgcld's own code: a second, correctly linked entry for an existing row */
    const char *p = tampered(base, "dup.db", "DROP INDEX audit_chain_row");
    writer w;
    char err[512] = "";
    memset(&w, 0, sizeof w);
    sqlite3_open(p, &w.db);
    w.chain = pgcl_chain_create(w.db, err, sizeof err);
    txn_begin(&w);
    CHECK(pgcl_chain_record(w.chain, "decisions", 5, err, sizeof err) == PGCL_OK, "duplicate record: %s", err);
    int64_t dup = pgcl_chain_head_seq(w.chain);
    txn_end(&w, true);
    pgcl_chain_destroy(w.chain);
    sqlite3_close(w.db);
    pgcl_chain_report rep = verify(p, NULL, 0);
    CHECK_BAD(rep, dup, "refers to a row an earlier entry already refers to");
}

/* Truncation and rewrites, detected only with a checkpoint exported before them. */
static void test_checkpoints(const char *base, const base_info *info) {
    char err[512] = "", pub[65], pub2[65];
    const char *key = tmp_path("signing.key"), *key2 = tmp_path("other.key");
    CHECK(pgcl_signing_keygen(key, pub, err, sizeof err) == PGCL_OK, "keygen: %s", err);
    CHECK(pgcl_signing_keygen(key, pub2, err, sizeof err) == PGCL_ERR_IO, "keygen never overwrites");
    CHECK(pgcl_signing_keygen(key2, pub2, err, sizeof err) == PGCL_OK, "keygen 2: %s", err);
    struct stat sb;
    CHECK(stat(key, &sb) == 0 && (sb.st_mode & 0777) == 0600, "key mode %o", (unsigned)(sb.st_mode & 0777));
    char pub_again[65];
    CHECK(pgcl_signing_public_key(key, pub_again, err, sizeof err) == PGCL_OK && strcmp(pub, pub_again) == 0,
          "public key from the key file: %s", err);

    char db[512];
    snprintf(db, sizeof db, "%s", tmp_path("cp-base.db"));
    CHECK(copy_file(base, db) == 0, "copy");
    pgcl_checkpoint cp;
    const char *cp_file = tmp_path("checkpoint.json");
    CHECK(pgcl_checkpoint_create(db, key, cp_file, NULL, &cp, err, sizeof err) == PGCL_OK, "checkpoint: %s", err);
    CHECK(cp.head_seq == info->entries && strcmp(cp.head_hash, info->head_hash) == 0 && strcmp(cp.public_key, pub) == 0,
          "checkpoint head %lld", (long long)cp.head_seq);
    CHECK(query_int(db, "SELECT count(*) FROM audit_checkpoints") == 1, "recorded in audit_checkpoints");
    CHECK(stat(cp_file, &sb) == 0, "file written");
    /* into a directory: checkpoint-<head_seq>.json */
    pgcl_checkpoint cp_dir;
    CHECK(pgcl_checkpoint_create(db, key, NULL, g_dir, &cp_dir, err, sizeof err) == PGCL_OK, "checkpoint dir: %s", err);
    char want_file[600];
    snprintf(want_file, sizeof want_file, "%s/checkpoint-%lld.json", g_dir, info->entries);
    CHECK(strcmp(cp_dir.file, want_file) == 0 && stat(want_file, &sb) == 0, "file %s", cp_dir.file);

    pgcl_checkpoint back;
    CHECK(pgcl_checkpoint_read(cp_file, pub, &back, err, sizeof err) == PGCL_OK, "read back: %s", err);
    CHECK(back.head_seq == cp.head_seq && strcmp(back.signature, cp.signature) == 0, "same checkpoint");
    CHECK(pgcl_checkpoint_read(cp_file, pub2, &back, err, sizeof err) == PGCL_ERR_MISMATCH && strstr(err, "expected"),
          "another signer refused: %s", err);

    const char *files[] = {cp_file};
    pgcl_chain_report rep = verify(db, files, 1);
    CHECK(rep.intact, "intact with its checkpoint: %s", rep.reason);

    /* a checkpoint of an empty chain cannot be made */
    const char *empty = tmp_path("empty.db");
    writer w;
    if (writer_open(&w, empty, true) == 0) writer_close(&w);
    CHECK(pgcl_checkpoint_create(empty, key, tmp_path("x.json"), NULL, &cp_dir, err, sizeof err) == PGCL_ERR_NOT_FOUND,
          "empty chain: %s", err);
    rep = verify(empty, NULL, 0);
    CHECK(rep.intact && rep.events == 0 && rep.head_seq == 0, "an empty chain is intact");

    /* truncate the tail: the last 3 decisions and their entries; the log tree's nodes over them
     * would give it away, so the attacker deletes those too */
    char sql[512];
    snprintf(sql, sizeof sql,
             "DELETE FROM audit_chain WHERE seq > %lld;"
             "DELETE FROM decisions WHERE seq > 37",
             info->entries - 3);
    const char *p = tampered(db, "truncated-nodes-left.db", sql);
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, info->entries - 2, "covers entries beyond the chain's end");
    snprintf(sql, sizeof sql,
             "DELETE FROM audit_chain WHERE seq > %lld;"
             "DELETE FROM decisions WHERE seq > 37; DELETE FROM audit_log_nodes WHERE ((idx + 1) << level) > %lld",
             info->entries - 3, info->entries - 3);
    p = tampered(db, "truncated.db", sql);
    rep = verify(p, NULL, 0);
    CHECK(rep.intact && rep.head_seq == info->entries - 3, "a truncated tail alone looks intact: %s", rep.reason);
    rep = verify(p, files, 1);
    char want[128];
    snprintf(want, sizeof want, "checkpoint at seq %lld but the chain ends at %lld", info->entries, info->entries - 3);
    CHECK_BAD(rep, info->entries - 2, want);

    /* a rewritten history: entries from the tail's start re-made after editing a row */
    snprintf(sql, sizeof sql,
             "DELETE FROM audit_chain WHERE seq >= %lld; UPDATE decisions SET decision = 'allow' WHERE seq = 35;"
             "DELETE FROM audit_log_nodes WHERE ((idx + 1) << level) >= %lld",
             info->tail_first, info->tail_first);
    p = tampered(db, "rewritten.db", sql);
    memset(&w, 0, sizeof w);
    sqlite3_open(p, &w.db);
    w.chain = pgcl_chain_create(w.db, err, sizeof err);
    txn_begin(&w);
    for (int row = 31; row <= 40; row++) pgcl_chain_record(w.chain, "decisions", row, err, sizeof err);
    txn_end(&w, true);
    CHECK(pgcl_chain_head_seq(w.chain) == info->entries, "same length after the rewrite");
    pgcl_chain_destroy(w.chain);
    sqlite3_close(w.db);
    rep = verify(p, NULL, 0);
    CHECK(rep.intact, "a consistent rewrite alone looks intact: %s", rep.reason);
    rep = verify(p, files, 1);
    snprintf(want, sizeof want, "entry %lld: hash differs from the signed checkpoint", info->entries);
    CHECK_BAD(rep, info->entries, want);

    /* bad checkpoints: the verification refuses them (an error, not a report) */
    static const struct {
        const char *name, *after; /* the edit: the character after `after` is changed */
        pgcl_status want;
        const char *why;
    } edits[] = {{"bad-sig.json", "\"signature\": \"", PGCL_ERR_MISMATCH, "signature does not verify"},
                 {"bad-seq.json", "\"head_seq\": ", PGCL_ERR_MISMATCH, "signature does not verify"},
                 {"bad-hash.json", "\"head_hash\": \"", PGCL_ERR_MISMATCH, "signature does not verify"},
                 {"bad-format.json", "\"format\": \"", PGCL_ERR_FORMAT, "not a pgcld audit checkpoint"}};
    FILE *f = fopen(cp_file, "rb");
    char text[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char edited[4096];
        memcpy(edited, text, sizeof text);
        char *at = strstr(edited, edits[i].after);
        CHECK(at != NULL, "%s: pattern", edits[i].name);
        if (!at) continue;
        at += strlen(edits[i].after);
        *at = *at == '1' ? '2' : '1'; /* a digit or letter, still well-formed */
        const char *bad = tmp_path(edits[i].name);
        f = fopen(bad, "wb");
        fputs(edited, f);
        fclose(f);
        const char *bad_files[] = {bad};
        pgcl_status st = pgcl_chain_verify(db, bad_files, 1, &rep, err, sizeof err);
        CHECK(st == edits[i].want && !rep.intact && strstr(err, edits[i].why), "%s refused: %s (%s)", edits[i].name,
              pgcl_status_str(st), err);
    }
    /* the expected signer */
    CHECK(pgcl_chain_verify_signed(db, files, 1, pub, &rep, err, sizeof err) == PGCL_OK && rep.intact, "signer ok");
    CHECK(pgcl_chain_verify_signed(db, files, 1, pub2, &rep, err, sizeof err) == PGCL_ERR_MISMATCH, "other signer");

    /* a signing key readable by others is refused */
    chmod(key, 0644);
    CHECK(pgcl_checkpoint_create(db, key, tmp_path("y.json"), NULL, &cp, err, sizeof err) == PGCL_ERR_INVALID &&
              strstr(err, "chmod 600"),
          "loose key mode: %s", err);
    chmod(key, 0600);
}

/* Rows that predate the chain (an upgraded database): not reported; the genesis entry still pins
 * how many there were. */
static void test_legacy(void) {
    const char *path = tmp_path("legacy.db");
    writer w;
    if (writer_open(&w, path, true) != 0) return;
    sqlite3_exec(w.db, "BEGIN", NULL, NULL, NULL);
    for (int i = 0; i < 5; i++) add_decision(&w, false);
    add_event(&w, "model.activate", false);
    add_event(&w, "model.activate", false);
    sqlite3_exec(w.db, "COMMIT", NULL, NULL, NULL);
    txn_begin(&w);
    for (int i = 0; i < 4; i++) add_decision(&w, true);
    txn_end(&w, true);
    long long n = pgcl_chain_head_seq(w.chain);
    writer_close(&w);
    CHECK(n == 5, "genesis + 4: %lld", n);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact && rep.events == 5, "legacy rows are not tampering: %s", rep.reason);

    /* a legacy row edited: outside the chain's protection (documented) */
    const char *p = tampered(path, "legacy-edit.db", "UPDATE decisions SET toxicity = 0 WHERE seq = 2");
    rep = verify(p, NULL, 0);
    CHECK(rep.intact, "legacy rows are not covered: %s", rep.reason);
    /* a forged row in a table that has no chained rows yet */
    p = tampered(path, "legacy-forged-event.db",
                 "INSERT INTO admin_events (event_id, created_at, actor, action, target, details)"
                 " VALUES ('x', 'now', 'me', 'key.create', 'k', '{}')");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, n + 1, "admin_events row 3 is not in the chain");
    /* the last legacy row deleted: the genesis entry no longer matches */
    p = tampered(path, "legacy-delete.db", "DELETE FROM decisions WHERE seq = 5");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, 1, "entry 1 (genesis): the rows that predate the chain do not match it");
    /* a forged row given a seq SQLite never makes, to pass as older than the chain */
    p = tampered(path, "legacy-seq0.db",
                 "INSERT INTO decisions SELECT 0, 'forged', created_at, request_id, item_id, model_name,"
                 " model_version, model_sha256, label, label_index, probabilities, toxicity, decision, policy,"
                 " t_review, t_block, vector, input_sha256, latency_us, input, input_dtype, input_digest, trace_id,"
                 " content_date, territorial_scope, content_language, leaf_index FROM decisions WHERE seq = 1");
    rep = verify(p, NULL, 0);
    CHECK_BAD(rep, n + 1, "decisions row 0 is not in the chain");
}

/* Verification reads one snapshot: while another connection keeps appending chained decisions, every
 * verification is intact (a walk that saw rows or entries of a later commit would not be).
 * The writer starts only after the first verification, and the verifier runs once more after the
 * writer is done, so "the chain grew while being verified" holds however the threads are scheduled. */
typedef struct concurrent_arg {
    const char *path;
    int txns;
    int failed;
    atomic_int verified; /* set by the verifier after its first verification */
    atomic_int done;     /* set by the writer when it has committed (or failed) */
} concurrent_arg;

static void *concurrent_writer_run(concurrent_arg *arg) {
    writer w;
    memset(&w, 0, sizeof w);
    char err[512];
    while (!atomic_load(&arg->verified)) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
    if (sqlite3_open(arg->path, &w.db) != SQLITE_OK) {
        arg->failed = 1;
        return NULL;
    }
    sqlite3_busy_timeout(w.db, 5000);
    w.chain = pgcl_chain_create(w.db, err, sizeof err);
    sqlite3_prepare_v2(w.db,
                       "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
                       " model_version, model_sha256, label, label_index, probabilities, toxicity, decision,"
                       " policy, t_review, t_block, vector, input_sha256, latency_us, input, input_dtype)"
                       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       -1, &w.dec, NULL);
    for (int t = 0; t < arg->txns && w.chain && w.dec; t++) {
        if (sqlite3_exec(w.db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
            pgcl_chain_begin(w.chain, err, sizeof err) != PGCL_OK) {
            arg->failed = 1;
            break;
        }
        for (int i = 0; i < 20; i++) add_decision(&w, true);
        if (sqlite3_exec(w.db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) arg->failed = 1;
    }
    pgcl_chain_destroy(w.chain);
    sqlite3_finalize(w.dec);
    sqlite3_close(w.db);
    return NULL;
}

static void *concurrent_writer(void *p) {
    concurrent_arg *arg = p;
    concurrent_writer_run(arg);
    atomic_store(&arg->done, 1);
    return NULL;
}

static void test_concurrent_verify(void) {
    const char *path = tmp_path("concurrent.db");
    writer w;
    if (writer_open(&w, path, true) != 0) return;
    writer_close(&w);
    concurrent_arg arg = {.path = path, .txns = 150};
    pthread_t th;
    pthread_create(&th, NULL, concurrent_writer, &arg);
    /* (no CHECK on this thread while the writer's add_decision() uses them) */
    int runs = 0, intact = 0;
    long long last_head = -1;
    bool grew = false;
    char err[512];
    for (bool writer_done = false; !writer_done;) {
        writer_done = atomic_load(&arg.done); /* read before verifying: the last run sees every commit */
        pgcl_chain_report rep;
        pgcl_status st = pgcl_chain_verify(path, NULL, 0, &rep, err, sizeof err);
        runs++;
        intact += st == PGCL_OK && rep.intact;
        if (st != PGCL_OK || !rep.intact)
            fprintf(stderr, "concurrent verify: %s %lld %s\n", err, (long long)rep.first_bad_seq, rep.reason);
        if (last_head >= 0 && rep.head_seq > last_head) grew = true;
        last_head = rep.head_seq;
        atomic_store(&arg.verified, 1);
    }
    pthread_join(th, NULL);
    CHECK(!arg.failed, "concurrent writer failed");
    CHECK(intact == runs, "every verification during writes is intact (%d of %d)", intact, runs);
    CHECK(grew, "the chain grew while being verified");
    printf("concurrent: %d verifications while another connection appended %d entries\n", runs, 150 * 20);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact && rep.events == 1 + 150 * 20, "after the writer: %lld %s", (long long)rep.events, rep.reason);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* record() and verify() throughput (printed; asserted only loosely). */
static void bench(void) {
    const char *env = getenv("PGCL_CHAIN_BENCH_ROWS");
    int rows = env ? atoi(env) : 20000, per_txn = 500;
    const char *path = tmp_path("bench.db");
    writer w;
    if (writer_open(&w, path, true) != 0) return;
    double t_record = 0, t0 = now_s();
    char err[512];
    for (int done = 0; done < rows; done += per_txn) {
        txn_begin(&w);
        for (int i = 0; i < per_txn; i++) {
            int64_t seq = add_decision(&w, false);
            double t = now_s();
            pgcl_status st = pgcl_chain_record(w.chain, "decisions", seq, err, sizeof err);
            t_record += now_s() - t;
            if (st != PGCL_OK) {
                CHECK(0, "record: %s", err);
                break;
            }
        }
        txn_end(&w, true);
    }
    double t_total = now_s() - t0;
    writer_close(&w);
    t0 = now_s();
    pgcl_chain_report rep = verify(path, NULL, 0);
    double t_verify = now_s() - t0;
    CHECK(rep.intact && rep.events == rows + 1, "bench chain intact: %s", rep.reason);
    printf("bench: %d decisions: record() %.0f entries/s (%.2f us each); insert+record %.0f rows/s; "
           "verify() %.0f entries/s (%.2f s)\n",
           rows, rows / t_record, 1e6 * t_record / rows, rows / t_total, (rows + 1) / t_verify, t_verify);
}

int main(void) {
    if (!chain_fixture_setup()) return 1;
    static char base[512];
    snprintf(base, sizeof base, "%s", tmp_path("base.db"));
    base_info info = {0};
    build_base(base, &info);
    if (info.entries == 0) return test_finish("test_chain");
    test_triggers(base);
    test_edit_score(base);
    test_delete_row(base);
    test_delete_entry(base);
    test_reorder(base);
    test_forged_row(base, &info);
    test_duplicate_entry(base);
    test_checkpoints(base, &info);
    test_legacy();
    test_concurrent_verify();
    bench();
    chain_fixture_cleanup();
    return test_finish("test_chain");
}
