/* Audit chain encoding version 2 (issue 16; docs/audit.md): one chain entry per write transaction,
 * committing to an RFC 9162 Merkle tree over its events. Through the real audit store and real
 * SQLite files:
 *  - each append of n decisions is one commit entry of n leaves, with one run;
 *  - every stored leaf equals an independent transcription of the leaf encoding (TEXT kind, the
 *    row's columns in the documented order, the stored input replaced by its SHA-256), and the
 *    entry's root and hash follow from them;
 *  - verify names the commit and the leaf of a changed row, and catches a changed stored input, a
 *    changed leaf list, root, run, a deleted row and a row inserted without an entry;
 *  - a chain that began in version 1 goes on in version 2 (a store reopened with encoding 2, then
 *    the keys CLI following the head) and verifies whole;
 *  - input retention drops the inputs and leaves the chain whole; its period is kept to the
 *    microsecond (pgcl_retention_period_us). */
#include "audit_reads.h"
#include "chain_fixture.h"
#include "keys.h"
#include "merkle.h"
#include "retention.h"
#include "sha256.h"

static pgcl_audit *open_store(const char *path, int encoding) {
    char err[512] = "";
    pgcl_audit_options o = {
        .path = path, .synchronous_full = false, .max_pending_rows = 10000, .chain_encoding = encoding};
    pgcl_audit *a = NULL;
    CHECK(pgcl_audit_open(&o, &a, err, sizeof err) == PGCL_OK, "open %s: %s", path, err);
    return a;
}

/* Appends n decisions in one call; every third stores a float16-sized input. */
static void append_decisions(pgcl_audit *a, int n, int tag) {
    char ids[16][PGCL_UUID_LEN + 1], items[16][32];
    float vec[16][4];
    unsigned char input[16][8];
    pgcl_decision_row rows[16];
    CHECK(n <= 16, "at most 16 rows");
    for (int i = 0; i < n; i++) {
        pgcl_uuid7(ids[i]);
        snprintf(items[i], sizeof items[i], "item-%d-%d", tag, i);
        for (int j = 0; j < 4; j++)
            vec[i][j] = (float)(tag * 100 + i + j) / 7.0f;
        for (int j = 0; j < 8; j++)
            input[i][j] = (unsigned char)(tag + i * 8 + j);
        rows[i] = (pgcl_decision_row){.decision_id = ids[i],
                                      .request_id = "req",
                                      .item_id = items[i],
                                      .model_name = "toxicity",
                                      .model_version = "1",
                                      .model_sha256 = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f",
                                      .label = i % 2 ? "toxic" : "non_toxic",
                                      .label_index = i % 2,
                                      .probabilities_json = "{\"non_toxic\":0.25,\"toxic\":0.75}",
                                      .has_toxicity = true,
                                      .toxicity = 0.75,
                                      .decision = "review",
                                      .policy_json = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.9,\"t_review\":0.5}",
                                      .has_thresholds = true,
                                      .t_review = 0.5,
                                      .t_block = 0.9,
                                      .vector = vec[i],
                                      .d = 4,
                                      .input_sha256 = "abababababababababababababababababababababababababababababababab",
                                      .latency_us = 42 + i,
                                      .input = i % 3 == 0 ? input[i] : NULL,
                                      .input_bytes = 8,
                                      .input_dtype = i % 3 == 0 ? "f16" : NULL,
                                      /* migration 0011's extension: rows with all four NULL (the plain
                                       * leaf), with some, and with all */
                                      .trace_id = i % 4 == 1 ? NULL : "4bf92f3577b34da6a3ce929d0e0e4736",
                                      .content_date = i % 2 ? "2024-02-29" : NULL,
                                      .territorial_scope = i % 4 == 2 ? "[\"DE\",\"FR\"]" : NULL,
                                      .content_language = i % 4 == 3 ? "EN" : NULL};
        if (i % 4 == 1) rows[i].content_date = NULL; /* i % 4 == 1: no extension at all */
    }
    char err[512] = "";
    CHECK(pgcl_audit_append(a, rows, n, err, sizeof err) == PGCL_OK, "append %d: %s", n, err);
}

/* ---- an independent transcription of the version-2 leaf encoding (docs/audit.md) ---- */

typedef struct kbuf {
    unsigned char b[8192];
    size_t n;
} kbuf;

static void kb_be(kbuf *k, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--)
        k->b[k->n++] = (unsigned char)(v >> (8 * i));
}
static void kb_bytes(kbuf *k, int tag, const void *p, size_t n) {
    k->b[k->n++] = (unsigned char)tag;
    kb_be(k, n, 4);
    memcpy(k->b + k->n, p, n);
    k->n += n;
}

/* The leaf of decisions row seq, from its columns read here and encoded by type. */
static pgcl_merkle_hash expected_decision_leaf(const char *path, long long seq) {
    static const char *const columns[] = {
        "seq",          "decision_id", "created_at",  "request_id",    "item_id",    "model_name", "model_version",
        "model_sha256", "label",       "label_index", "probabilities", "toxicity",   "decision",   "policy",
        "t_review",     "t_block",     "vector",      "input_sha256",  "latency_us", "input",      "input_dtype"};
    kbuf k = {.n = 0};
    kb_bytes(&k, 3, "decisions", 9);
    sqlite3 *db;
    sqlite3_open(path, &db);
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++) {
        char sql[256];
        /* the stored input: inline before migration 0008, in decision_inputs since; its recorded
         * digest beside it (what the leaf holds once retention dropped the input) */
        if (strcmp(columns[c], "input") == 0)
            snprintf(sql, sizeof sql,
                     "SELECT coalesce(input, (SELECT i.input FROM decision_inputs AS i WHERE i.decision_seq = seq)),"
                     " input_digest FROM decisions WHERE seq = %lld",
                     seq);
        else
            snprintf(sql, sizeof sql, "SELECT %s FROM decisions WHERE seq = %lld", columns[c], seq);
        sqlite3_stmt *s;
        sqlite3_prepare_v2(db, sql, -1, &s, NULL);
        CHECK(sqlite3_step(s) == SQLITE_ROW, "row %lld", seq);
        int type = sqlite3_column_type(s, 0);
        if (strcmp(columns[c], "input") == 0 && type == SQLITE_NULL && sqlite3_column_type(s, 1) == SQLITE_BLOB) {
            kb_bytes(&k, 4, sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1)); /* dropped */
        } else if (type == SQLITE_NULL) {
            k.b[k.n++] = 0;
        } else if (type == SQLITE_INTEGER) {
            k.b[k.n++] = 1;
            kb_be(&k, (uint64_t)sqlite3_column_int64(s, 0), 8);
        } else if (type == SQLITE_FLOAT) {
            double d = sqlite3_column_double(s, 0);
            uint64_t u;
            memcpy(&u, &d, 8);
            k.b[k.n++] = 2;
            kb_be(&k, u, 8);
        } else if (strcmp(columns[c], "input") == 0) { /* the stored input: its SHA-256 instead */
            unsigned char digest[32];
            crypto_hash_sha256(digest, sqlite3_column_blob(s, 0), (unsigned long long)sqlite3_column_bytes(s, 0));
            if (sqlite3_column_type(s, 1) == SQLITE_BLOB)
                CHECK(sqlite3_column_bytes(s, 1) == 32 && memcmp(sqlite3_column_blob(s, 1), digest, 32) == 0,
                      "row %lld: input_digest is the stored input's SHA-256", seq);
            kb_bytes(&k, 4, digest, 32);
        } else {
            kb_bytes(&k, type == SQLITE_TEXT ? 3 : 4, sqlite3_column_blob(s, 0), (size_t)sqlite3_column_bytes(s, 0));
        }
        sqlite3_finalize(s);
    }
    /* the extension (docs/audit.md, "Decision leaf, extended"): appended when any is not NULL */
    sqlite3_stmt *x;
    char xsql[160];
    snprintf(xsql, sizeof xsql,
             "SELECT trace_id, content_date, territorial_scope, content_language FROM decisions WHERE seq = %lld", seq);
    sqlite3_prepare_v2(db, xsql, -1, &x, NULL);
    CHECK(sqlite3_step(x) == SQLITE_ROW, "row %lld: its extension", seq);
    bool extended = false;
    for (int c = 0; c < 4; c++) extended = extended || sqlite3_column_type(x, c) != SQLITE_NULL;
    for (int c = 0; extended && c < 4; c++) {
        if (sqlite3_column_type(x, c) == SQLITE_NULL) k.b[k.n++] = 0;
        else kb_bytes(&k, 3, sqlite3_column_text(x, c), (size_t)sqlite3_column_bytes(x, c));
    }
    sqlite3_finalize(x);
    sqlite3_close(db);
    /* leaf hash = SHA-256(0x00 ‖ data), here with libsodium, not the code under test */
    unsigned char msg[8193];
    msg[0] = 0;
    memcpy(msg + 1, k.b, k.n);
    pgcl_merkle_hash h;
    crypto_hash_sha256(h.b, msg, k.n + 1);
    return h;
}

/* The stored leaf hash of decisions row seq: its run's entry and leaf index. */
static int stored_leaf(const char *path, long long seq, long long *entry, long long *leaf_index,
                       pgcl_merkle_hash *leaf) {
    sqlite3 *db;
    sqlite3_stmt *s;
    int found = 0;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db,
                       "SELECT u.entry_seq, u.first_leaf + ?1 - u.first_row_seq, c.leaves FROM audit_chain_runs u"
                       " JOIN audit_chain c ON c.seq = u.entry_seq WHERE u.kind = 'decisions' AND u.first_row_seq <= ?1"
                       " AND ?1 < u.first_row_seq + u.n",
                       -1, &s, NULL);
    sqlite3_bind_int64(s, 1, seq);
    if (sqlite3_step(s) == SQLITE_ROW) {
        *entry = sqlite3_column_int64(s, 0);
        *leaf_index = sqlite3_column_int64(s, 1);
        const unsigned char *b = sqlite3_column_blob(s, 2);
        if (b && sqlite3_column_bytes(s, 2) >= (*leaf_index + 1) * 32) {
            memcpy(leaf->b, b + *leaf_index * 32, 32);
            found = 1;
        }
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return found;
}

/* ---- the tests ---- */

static const char *build_v2_database(void) {
    const char *path = tmp_path("v2.db");
    pgcl_audit *a = open_store(path, 2);
    append_decisions(a, 5, 1);
    append_decisions(a, 1, 2);
    append_decisions(a, 7, 3);
    pgcl_admin_event ev = {.actor = "test", .action = "model.activate", .target = "toxicity/1", .details_json = "{}"};
    char err[512] = "";
    CHECK(pgcl_audit_record_event(a, &ev, err, sizeof err) == PGCL_OK, "event: %s", err);
    pgcl_audit_close(a);
    return path;
}

static void test_layout_and_known_leaves(const char *path) {
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact, "a version-2 chain verifies: %s", rep.reason);
    CHECK(rep.head_seq == 5, "genesis + 4 commits, head %lld", (long long)rep.head_seq);
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain WHERE kind = 'commit'") == 4, "4 commit entries");
    CHECK(query_int(path, "SELECT leaf_count FROM audit_chain WHERE seq = 2") == 5, "first commit: 5 leaves");
    CHECK(query_int(path, "SELECT leaf_count FROM audit_chain WHERE seq = 3") == 1, "second: 1 leaf");
    CHECK(query_int(path, "SELECT leaf_count FROM audit_chain WHERE seq = 4") == 7, "third: 7 leaves");
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain_runs") == 4, "one run per commit");
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain WHERE kind = 'commit' AND row_seq <> seq") == 0,
          "a commit entry's row_seq is its seq");
    for (long long seq = 1; seq <= 13; seq++) {
        long long entry = 0, index = -1;
        pgcl_merkle_hash stored, want = expected_decision_leaf(path, seq);
        CHECK(stored_leaf(path, seq, &entry, &index, &stored), "row %lld has a leaf", seq);
        CHECK(memcmp(stored.b, want.b, 32) == 0, "row %lld (entry %lld, leaf %lld): stored leaf = independent encoding",
              seq, entry, index);
    }
    /* The entry's root and hash from its stored leaves, by the documented formulas. */
    sqlite3 *db;
    sqlite3_stmt *s;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db,
                       "SELECT seq, leaf_count, leaves, payload_sha256, prev_hash, hash FROM audit_chain WHERE"
                       " kind = 'commit' ORDER BY seq",
                       -1, &s, NULL);
    int entries = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        long long seq = sqlite3_column_int64(s, 0), n = sqlite3_column_int64(s, 1);
        pgcl_merkle_hash leaves[16];
        memcpy(leaves, sqlite3_column_blob(s, 2), (size_t)n * 32);
        pgcl_merkle_hash root = pgcl_merkle_root(leaves, (uint64_t)n);
        char root_hex[65];
        pgcl_merkle_to_hex(&root, root_hex);
        CHECK(strcmp(root_hex, (const char *)sqlite3_column_text(s, 3)) == 0, "entry %lld: root", seq);
        kbuf k = {.n = 0};
        k.b[k.n++] = 1;
        kb_be(&k, (uint64_t)seq, 8);
        kb_bytes(&k, 3, "commit", 6);
        k.b[k.n++] = 1;
        kb_be(&k, (uint64_t)n, 8);
        kb_bytes(&k, 3, root_hex, 64);
        kb_bytes(&k, 3, sqlite3_column_text(s, 4), 64);
        unsigned char digest[32];
        char hex[65];
        crypto_hash_sha256(digest, k.b, k.n);
        pgcl_sha256_to_hex(digest, hex);
        CHECK(strcmp(hex, (const char *)sqlite3_column_text(s, 5)) == 0, "entry %lld: hash", seq);
        entries++;
    }
    CHECK(entries == 4, "4 commit entries read");
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* verify() of a tampered copy (chain_fixture.h). */
static pgcl_chain_report verify_tampered(const char *base, const char *name, const char *sql) {
    return verify(tampered(base, name, sql), NULL, 0);
}

static void test_tampering(const char *base) {
    pgcl_chain_report rep;
    /* decisions row 9 is leaf 2 of entry 4 (rows 7..13) */
    rep = verify_tampered(base, "t-label.db", "UPDATE decisions SET label = 'tampered' WHERE seq = 9");
    CHECK_BAD(rep, 4, "entry 4, leaf 2 of 7: decisions row 9: payload differs");
    /* row 1 stores an input: its bytes are in the leaf through their digest */
    rep = verify_tampered(base, "t-input.db", "UPDATE decisions SET input = x'0000000000000000' WHERE seq = 1");
    CHECK_BAD(rep, 2, "entry 2, leaf 0 of 5: decisions row 1: payload differs");
    /* since migration 0008 the input is in decision_inputs and its digest in the row: either changed fails */
    rep = verify_tampered(base, "t-input-table.db",
                          "UPDATE decision_inputs SET input = x'0000000000000000' WHERE decision_seq = 1");
    CHECK_BAD(rep, 2, "entry 2, leaf 0 of 5: decisions row 1: payload differs");
    rep = verify_tampered(base, "t-digest.db", "UPDATE decisions SET input_digest = zeroblob(32) WHERE seq = 1");
    CHECK_BAD(rep, 2, "entry 2, leaf 0 of 5: decisions row 1: payload differs");
    /* a dropped input (retention) leaves the chain intact: the leaf holds the recorded digest ... */
    const char *dropped = tampered(base, "dropped.db", "DELETE FROM decision_inputs");
    rep = verify(dropped, NULL, 0);
    CHECK(rep.intact, "inputs dropped: the chain still verifies: %s", rep.reason);
    for (long long seq = 1; seq <= 13; seq++) {
        long long entry = 0, index = -1;
        pgcl_merkle_hash stored, want = expected_decision_leaf(dropped, seq);
        CHECK(stored_leaf(dropped, seq, &entry, &index, &stored) && memcmp(stored.b, want.b, 32) == 0,
              "row %lld: the leaf without the input is the leaf with it", seq);
    }
    /* ... which must still be the one committed */
    rep = verify_tampered(dropped, "t-dropped-digest.db", "UPDATE decisions SET input_digest = zeroblob(32) WHERE seq = 1");
    CHECK_BAD(rep, 2, "entry 2, leaf 0 of 5: decisions row 1: payload differs");
    rep = verify_tampered(base, "t-leaves.db",
                          "UPDATE audit_chain SET leaves = substr(leaves, 1, 32) || zeroblob(32) || substr(leaves, 65)"
                          " WHERE seq = 2");
    CHECK_BAD(rep, 2, "stored leaf hashes do not give its Merkle root");
    rep =
        verify_tampered(base, "t-root.db",
                        "UPDATE audit_chain SET payload_sha256 = replace(payload_sha256, substr(payload_sha256, 1, 1),"
                        " CASE substr(payload_sha256, 1, 1) WHEN '0' THEN '1' ELSE '0' END) WHERE seq = 3");
    CHECK_BAD(rep, 3, "hash does not match");
    rep = verify_tampered(base, "t-count.db", "UPDATE audit_chain SET leaf_count = 4 WHERE seq = 2");
    CHECK_BAD(rep, 2, "hash does not match");
    rep = verify_tampered(base, "t-run.db", "UPDATE audit_chain_runs SET n = 6 WHERE entry_seq = 4");
    CHECK_BAD(rep, 4, "runs cover 6 of its 7 leaves");
    rep = verify_tampered(base, "t-run-shift.db", "UPDATE audit_chain_runs SET first_row_seq = 8 WHERE entry_seq = 4");
    CHECK_BAD(rep, 4, "entry 4, leaf 0 of 7: decisions row 8: payload differs");
    rep = verify_tampered(base, "t-delete.db", "DELETE FROM decisions WHERE seq = 6");
    CHECK_BAD(rep, 3, "entry 3, leaf 0: decisions row 6 is missing");
    rep = verify_tampered(
        base, "t-extra.db",
        "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
        " model_version, model_sha256, label, label_index, probabilities, decision, policy, vector, input_sha256,"
        " latency_us) SELECT 'x', created_at, request_id, item_id, model_name, model_version,"
        " model_sha256, label, label_index, probabilities, decision, policy, vector, input_sha256, latency_us FROM"
        " decisions WHERE seq = 13");
    CHECK_BAD(rep, 6, "decisions row 14 is not in the chain");
    rep = verify_tampered(base, "t-twice.db",
                          "INSERT INTO audit_chain_runs (kind, first_row_seq, n, entry_seq, first_leaf) VALUES"
                          " ('decisions', 0, 1, 2, 5)");
    CHECK(!rep.intact, "an extra run is noticed: %s", rep.reason);
}

/* Input retention (retention.h) through the store's writer: every input of a version-2 chain goes,
 * the decisions, leaves and verification stay; a re-read says the input was dropped. */
static void test_retention(void) {
    const char *path = tmp_path("retention.db");
    pgcl_audit *a = open_store(path, 2);
    append_decisions(a, 9, 7);
    long long stored = query_int(path, "SELECT count(*) FROM decision_inputs");
    CHECK(stored == 3, "every third row stores its input: %lld", stored);
    char err[512] = "";
    CHECK(pgcl_retention_run_once(a, 30, err, sizeof err) == 0, "nothing is 30 days old: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM decision_inputs") == 3, "inputs kept within the retention period");
    CHECK(pgcl_retention_run_once(a, 0, err, sizeof err) == 3, "retention 0 drops the 3 inputs: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM decision_inputs") == 0, "no input left");
    CHECK(query_int(path, "SELECT count(*) FROM decisions WHERE input_digest IS NOT NULL") == 3, "digests stay");
    CHECK(query_int(path, "SELECT through_seq FROM input_retention") == 9, "the cursor is past every row");
    append_decisions(a, 4, 8);
    CHECK(pgcl_retention_run_once(a, 0, err, sizeof err) == 2, "the next pass drops only the new inputs: %s", err);
    /* a decision dated 2020 written behind the writer's back after newer ones with inputs: the
     * walk stops at the first recent decision, so their inputs stay */
    append_decisions(a, 3, 9);
    char sub[512] = "";
    CHECK(exec_on(path,
                  "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
                  " model_sha256, label, label_index, probabilities, decision, policy, vector, input_sha256,"
                  " latency_us) SELECT 'forged', '2020-01-01T00:00:00.000000Z', request_id, item_id, model_name,"
                  " model_version, model_sha256, label, label_index, probabilities, decision, policy, vector,"
                  " input_sha256, latency_us FROM decisions WHERE seq = 1",
                  sub, sizeof sub) == SQLITE_OK,
          "forge: %s", sub);
    CHECK(pgcl_retention_run_once(a, 1, err, sizeof err) == 0, "a forged old row drops nothing newer: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM decision_inputs") == 1, "the recent input stays");
    pgcl_stored_decision sd = {0};
    char id[64];
    snprintf(id, sizeof id, "%s", query_text(path, "SELECT decision_id FROM decisions WHERE seq = 1"));
    CHECK(pgcl_audit_read_stored_decision(a, id, &sd, err, sizeof err) == PGCL_OK, "read: %s", err);
    CHECK(!sd.input && sd.input_dropped, "the stored decision says its input was dropped");
    pgcl_stored_decision_clear(&sd);
    pgcl_audit_close(a);
    CHECK(exec_on(path,
                  "DROP TRIGGER decisions_append_only_d; DELETE FROM decisions WHERE decision_id = 'forged';"
                  " CREATE TRIGGER decisions_append_only_d BEFORE DELETE ON decisions"
                  " BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;",
                  sub, sizeof sub) == SQLITE_OK,
          "un-forge: %s", sub);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact, "after retention the chain verifies: %s", rep.reason);
}

/* The retention period in microseconds (pgcl_retention_period_us, a pass's horizon is now minus
 * it): to the nearest microsecond, never cut to whole seconds or milliseconds (issue 27: 0.999 s
 * once kept nothing at all), nor rounded up to them. Deterministic, unlike any wait for a drop. */
static void test_retention_period(void) {
    static const struct {
        double seconds;
        int64_t us;
    } cases[] = {
        {0, 0},
        {0.999, 999000},             /* not 0 (cut to whole seconds) nor 1000000 (rounded up) */
        {0.999999, 999999},          /* not 999000 (cut to milliseconds) */
        {1.728, 1728000},            /* --input-retention-days 0.00002 */
        {1.2345679, 1234568},        /* the nearest microsecond, not 1234567 (cut) */
        {1e-6, 1},
        {0.4e-6, 0},
        {0.6e-6, 1},
        {30 * 86400.0, 2592000000000},
        {180 * 86400.0, 15552000000000}, /* the default: the contest window */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got = pgcl_retention_period_us(cases[i].seconds / 86400.0);
        CHECK(got == cases[i].us, "%.9g s as days: %lld us, expected %lld", cases[i].seconds, (long long)got,
              (long long)cases[i].us);
    }
    /* the days as an operator writes them (test_retention.py's FractionalSecondsTest: 0.999 s) */
    CHECK(pgcl_retention_period_us(0.0000115625) == 999000, "0.0000115625 days: %lld us",
          (long long)pgcl_retention_period_us(0.0000115625));
    CHECK(pgcl_retention_period_us(0.00002) == 1728000, "0.00002 days: %lld us",
          (long long)pgcl_retention_period_us(0.00002));
}

static void test_v1_then_v2(void) {
    const char *path = tmp_path("mixed.db");
    pgcl_audit *a = open_store(path, 1);
    append_decisions(a, 3, 1);
    append_decisions(a, 2, 2);
    pgcl_audit_close(a);
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain WHERE kind = 'decisions'") == 5,
          "version 1: an entry per row");
    char err[512] = "", key[128], key_id[32];
    /* the keys CLI follows the head: still version 1 here */
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "before", "test", key, key_id, err, sizeof err) == PGCL_OK,
          "keys create: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain WHERE kind = 'admin_events'") == 1,
          "a version-1 event entry");
    a = open_store(path, 2);
    append_decisions(a, 4, 3);
    pgcl_audit_close(a);
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "after", "test", key, key_id, err, sizeof err) == PGCL_OK,
          "keys create: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM audit_chain WHERE kind = 'commit'") == 2,
          "after a commit entry the keys CLI writes one too");
    CHECK(query_int(path, "SELECT kind = 'commit' AND leaf_count = 1 FROM audit_chain ORDER BY seq DESC LIMIT 1") == 1,
          "the key event is a commit of one leaf");
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact, "a chain that switched from version 1 to 2 verifies: %s", rep.reason);
    CHECK(rep.head_seq == 1 + 5 + 1 + 1 + 1, "head %lld", (long long)rep.head_seq);
    rep = verify_tampered(path, "mixed-t.db", "UPDATE decisions SET label = 'x' WHERE seq = 2");
    CHECK_BAD(rep, 3, "entry 3: decisions row 2: payload differs");
    /* retention keeps the inputs chained by version-1 entries (their payload hashes the bytes) */
    a = open_store(path, 2);
    long long before = query_int(path, "SELECT count(*) FROM decision_inputs WHERE decision_seq <= 5");
    CHECK(pgcl_retention_run_once(a, 0, err, sizeof err) >= 0, "retention: %s", err);
    pgcl_audit_close(a);
    CHECK(query_int(path, "SELECT count(*) FROM decision_inputs WHERE decision_seq <= 5") == before && before > 0,
          "version-1 rows keep their inputs (%lld)", before);
    CHECK(query_int(path, "SELECT count(*) FROM decision_inputs WHERE decision_seq > 5") == 0,
          "version-2 rows lose theirs");
    rep = verify(path, NULL, 0);
    CHECK(rep.intact, "a mixed chain verifies after retention: %s", rep.reason);
}

int main(void) {
    if (!chain_fixture_setup()) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    const char *base = build_v2_database();
    test_layout_and_known_leaves(base);
    test_tampering(base);
    test_retention();
    test_retention_period();
    test_v1_then_v2();
    chain_fixture_cleanup();
    return test_finish("test_chain_v2");
}
