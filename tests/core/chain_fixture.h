/* The fixture the two chain test programs share (test_chain.c: tampering and checkpoints;
 * test_chain_encoding.c: the encoding's known answers; test_chain_v2.c uses its files and tampering
 * helpers): a private directory, a writer that appends
 * chained rows the way the audit store does (BEGIN IMMEDIATE, begin(), INSERT, record()), the base
 * database both start from, and helpers that tamper with a copy through a separate connection.
 * Header-only (static inline) like test_util.h, so that CHECK counts in the including program. */
#ifndef PGCL_TEST_CHAIN_FIXTURE_H
#define PGCL_TEST_CHAIN_FIXTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "chain.h"
#include "ids.h"
#include "signing.h"
#include "test_sqlite.h"
#include "test_util.h"
/* The private directory: mkdtemp fills in the X's. */
static char g_dir[] = "/tmp/pgcl-chain-XXXXXX";

static const char DROP_TRIGGERS[] =
    "DROP TRIGGER IF EXISTS decisions_append_only_u; DROP TRIGGER IF EXISTS decisions_append_only_d;"
    "DROP TRIGGER IF EXISTS admin_events_append_only_u; DROP TRIGGER IF EXISTS admin_events_append_only_d;"
    "DROP TRIGGER IF EXISTS contests_append_only_u; DROP TRIGGER IF EXISTS contests_append_only_d;"
    "DROP TRIGGER IF EXISTS resolutions_append_only_u; DROP TRIGGER IF EXISTS resolutions_append_only_d;"
    "DROP TRIGGER IF EXISTS audit_chain_append_only_u; DROP TRIGGER IF EXISTS audit_chain_append_only_d;"
    "DROP TRIGGER IF EXISTS audit_chain_runs_append_only_u; DROP TRIGGER IF EXISTS audit_chain_runs_append_only_d;"
    "DROP TRIGGER IF EXISTS decision_inputs_append_only_u;"
    "DROP TRIGGER IF EXISTS audit_log_nodes_append_only_u; DROP TRIGGER IF EXISTS audit_log_nodes_append_only_d;";

/* ---- files and SQL helpers ---- */

/* A path in the test's directory; valid for the next 64 calls. */
static inline const char *tmp_path(const char *name) {
    static char buf[64][512];
    static int next;
    char *out = buf[next++ % 64];
    snprintf(out, sizeof buf[0], "%s/%s", g_dir, name);
    return out;
}

static inline int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

/* Runs sql on path through its own connection; returns the SQLite code (message in err). */
static inline int exec_on(const char *path, const char *sql, char *err, size_t cap) {
    sqlite3 *db;
    char *msg = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (err) snprintf(err, cap, "%s", msg ? msg : "");
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc;
}

/* A fresh copy of base with the triggers dropped and sql applied, as an attacker would. */
static inline const char *tampered(const char *base, const char *name, const char *sql) {
    const char *path = tmp_path(name);
    char err[512];
    CHECK(copy_file(base, path) == 0, "copy %s", name);
    int rc = exec_on(path, DROP_TRIGGERS, err, sizeof err);
    CHECK(rc == SQLITE_OK, "drop triggers on %s: %s", name, err);
    if (sql) {
        rc = exec_on(path, sql, err, sizeof err);
        CHECK(rc == SQLITE_OK, "tamper %s: %s", name, err);
    }
    return path;
}

static inline pgcl_chain_report verify(const char *path, const char *const *cps, int n) {
    pgcl_chain_report rep;
    char err[512] = "";
    pgcl_status st = pgcl_chain_verify(path, cps, n, &rep, err, sizeof err);
    CHECK(st == PGCL_OK, "verify %s: %s", path, err);
    return rep;
}

static inline long long entry_of(const char *path, const char *kind, long long row_seq) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT seq FROM audit_chain WHERE kind = '%s' AND row_seq = %lld", kind, row_seq);
    return query_int(path, sql);
}

#define CHECK_BAD(rep, seq, text)                                                                             \
    do {                                                                                                   \
        CHECK(!(rep).intact, "expected NOT intact (%s)", text);                                            \
        CHECK((rep).first_bad_seq == (seq), "first_bad_seq %lld, expected %lld: %s", (long long)(rep).first_bad_seq, \
              (long long)(seq), (rep).reason);                                                             \
        CHECK(strstr((rep).reason, text) != NULL, "reason '%s' lacks '%s'", (rep).reason, text);          \
    } while (0)

/* ---- a writer like the audit store's ---- */

typedef struct writer {
    sqlite3 *db;
    pgcl_chain *chain;
    sqlite3_stmt *dec, *ev, *con, *res;
    int counter;
} writer;

static inline int writer_open(writer *w, const char *path, bool fast) {
    char err[512] = "";
    memset(w, 0, sizeof *w);
    /* The schema comes from the real migrations. */
    pgcl_audit_options o = {.path = path, .synchronous_full = !fast, .max_pending_rows = 1000};
    pgcl_audit *a = NULL;
    if (pgcl_audit_open(&o, &a, err, sizeof err) != PGCL_OK) {
        CHECK(0, "audit open: %s", err);
        return -1;
    }
    pgcl_audit_close(a);
    if (sqlite3_open(path, &w->db) != SQLITE_OK) return -1;
    sqlite3_exec(w->db, fast ? "PRAGMA synchronous=OFF" : "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    w->chain = pgcl_chain_create(w->db, err, sizeof err);
    CHECK(w->chain != NULL, "chain create: %s", err);
    int rc = sqlite3_prepare_v2(w->db,
                                "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name,"
                                " model_version, model_sha256, label, label_index, probabilities, toxicity, decision,"
                                " policy, t_review, t_block, vector, input_sha256, latency_us, input, input_dtype)"
                                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                -1, &w->dec, NULL);
    rc |= sqlite3_prepare_v2(w->db,
                             "INSERT INTO admin_events (event_id, created_at, actor, action, target, details)"
                             " VALUES (?,?,?,?,?,?)",
                             -1, &w->ev, NULL);
    rc |= sqlite3_prepare_v2(w->db,
                             "INSERT INTO contests (contest_id, decision_id, filed_at, filed_by, filer_key_id, reason)"
                             " VALUES (?, (SELECT decision_id FROM decisions WHERE seq = ?), ?, ?, NULL, ?)",
                             -1, &w->con, NULL);
    rc |= sqlite3_prepare_v2(w->db,
                             "INSERT INTO resolutions (contest_id, resolved_at, resolved_by, resolver_key_id, outcome,"
                             " corrected_label, note) VALUES ((SELECT contest_id FROM contests WHERE seq = ?), ?, ?,"
                             " ?, 'overturned', 'non_toxic', ?)",
                             -1, &w->res, NULL);
    CHECK(rc == SQLITE_OK && w->chain, "prepare: %s", sqlite3_errmsg(w->db));
    return rc == SQLITE_OK && w->chain ? 0 : -1;
}

static inline void writer_close(writer *w) {
    pgcl_chain_destroy(w->chain);
    sqlite3_finalize(w->dec);
    sqlite3_finalize(w->ev);
    sqlite3_finalize(w->con);
    sqlite3_finalize(w->res);
    sqlite3_close(w->db); /* the last connection: checkpoints and removes the WAL */
}

static inline void txn_begin(writer *w) {
    char err[512] = "";
    CHECK(sqlite3_exec(w->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK, "BEGIN");
    CHECK(pgcl_chain_begin(w->chain, err, sizeof err) == PGCL_OK, "chain begin: %s", err);
}

static inline void txn_end(writer *w, bool commit) {
    CHECK(sqlite3_exec(w->db, commit ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK, "end: %s",
          sqlite3_errmsg(w->db));
}

static inline int64_t step_insert(writer *w, sqlite3_stmt *s, const char *kind, bool chain) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    CHECK(rc == SQLITE_DONE, "insert %s: %s", kind, sqlite3_errmsg(w->db));
    int64_t seq = sqlite3_last_insert_rowid(w->db);
    if (chain) {
        char err[512] = "";
        CHECK(pgcl_chain_record(w->chain, kind, seq, err, sizeof err) == PGCL_OK, "record %s %lld: %s", kind,
              (long long)seq, err);
    }
    return seq;
}

static inline int64_t add_decision(writer *w, bool chain) {
    sqlite3_stmt *s = w->dec;
    char id[PGCL_UUID_LEN + 1], item[32], now[PGCL_TIMESTAMP_LEN + 1];
    float vec[4];
    int i = w->counter++;
    pgcl_uuid7(id);
    pgcl_timestamp_now(now);
    snprintf(item, sizeof item, "item-%d", i);
    for (int j = 0; j < 4; j++) vec[j] = (float)(i + j) / 8.0f;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, "req-1", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, item, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 5, "toxicity", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, "1", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, "0c26e97d", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, i % 2 ? "toxic" : "non_toxic", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 9, i % 2);
    sqlite3_bind_text(s, 10, "{\"non_toxic\":0.4,\"toxic\":0.6}", -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 11, 0.6 + i * 1e-3);
    sqlite3_bind_text(s, 12, i % 3 == 0 ? "block" : "review", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 13, "{\"kind\":\"threshold\"}", -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 14, 0.5);
    sqlite3_bind_double(s, 15, 0.8);
    sqlite3_bind_blob(s, 16, vec, sizeof vec, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 17, "ab12", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 18, 1000 + i);
    if (i % 4 == 0) {
        sqlite3_bind_blob(s, 19, vec, sizeof vec, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 20, "f32", -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(s, 19);
        sqlite3_bind_null(s, 20);
    }
    return step_insert(w, s, "decisions", chain);
}

static inline int64_t add_event(writer *w, const char *action, bool chain) {
    sqlite3_stmt *s = w->ev;
    char id[PGCL_UUID_LEN + 1], now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_uuid7(id);
    pgcl_timestamp_now(now);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, "ops (pgcld_00000000)", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, action, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, "toxicity/1", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, "{}", -1, SQLITE_STATIC);
    return step_insert(w, s, "admin_events", chain);
}

static inline int64_t add_contest(writer *w, int64_t decision_seq) {
    sqlite3_stmt *s = w->con;
    char id[PGCL_UUID_LEN + 1], now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_uuid7(id);
    pgcl_timestamp_now(now); /* filed now, after its decision, as the store files it */
    sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, decision_seq);
    sqlite3_bind_text(s, 3, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 4, "reviewer (pgcld_11111111)", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, "the comment quotes a slur to condemn it", -1, SQLITE_STATIC);
    return step_insert(w, s, "contests", true);
}

static inline int64_t add_resolution(writer *w, int64_t contest_seq) {
    sqlite3_stmt *s = w->res;
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    sqlite3_bind_int64(s, 1, contest_seq);
    sqlite3_bind_text(s, 2, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, "senior (pgcld_22222222)", -1, SQLITE_STATIC);
    sqlite3_bind_null(s, 4);
    sqlite3_bind_text(s, 5, "context shows counter-speech", -1, SQLITE_STATIC);
    return step_insert(w, s, "resolutions", true);
}


/* ---- the base database ---- */

typedef struct base_info {
    long long entries;       /* chain length */
    char head_hash[65];
    long long tail_first;    /* first entry of the last transaction (10 decisions) */
} base_info;

static inline void build_base(const char *path, base_info *info) {
    writer w;
    char err[512] = "";
    if (writer_open(&w, path, false) != 0) return;

    /* outside a transaction, before begin(): refused */
    CHECK(pgcl_chain_begin(w.chain, err, sizeof err) == PGCL_ERR_INVALID, "begin outside a transaction");
    CHECK(pgcl_chain_record(w.chain, "decisions", 1, err, sizeof err) == PGCL_ERR_INVALID, "record before begin");
    CHECK(pgcl_chain_head_seq(w.chain) == 0 && strcmp(pgcl_chain_head_hash(w.chain), "") == 0, "no head yet");

    /* a row inserted before begin() in the transaction that writes the genesis entry is refused */
    sqlite3_exec(w.db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    int64_t early = add_decision(&w, false);
    CHECK(pgcl_chain_begin(w.chain, err, sizeof err) == PGCL_OK, "begin: %s", err);
    CHECK(pgcl_chain_record(w.chain, "decisions", early, err, sizeof err) == PGCL_ERR_INVALID &&
              strstr(err, "predates the genesis"),
          "row inserted before begin(): %s", err);
    txn_end(&w, false);
    w.counter = 0;

    txn_begin(&w); /* genesis + 10 decisions */
    CHECK(pgcl_chain_head_seq(w.chain) == 1, "genesis written by begin(): head %lld",
          (long long)pgcl_chain_head_seq(w.chain));
    for (int i = 0; i < 10; i++) add_decision(&w, true);
    CHECK(pgcl_chain_record(w.chain, "shadow_decisions", 1, err, sizeof err) == PGCL_ERR_INVALID, "unknown kind");
    CHECK(pgcl_chain_record(w.chain, "decisions", 999, err, sizeof err) == PGCL_ERR_NOT_FOUND, "missing row: %s", err);
    CHECK(pgcl_chain_head_seq(w.chain) == 11, "head after 10 records");
    txn_end(&w, true);

    txn_begin(&w); /* 2 admin events and 10 decisions, interleaved */
    add_event(&w, "model.activate", true);
    for (int i = 0; i < 5; i++) add_decision(&w, true);
    add_event(&w, "key.create", true);
    for (int i = 0; i < 5; i++) add_decision(&w, true);
    txn_end(&w, true);
    char head_before[65];
    snprintf(head_before, sizeof head_before, "%s", pgcl_chain_head_hash(w.chain));
    int64_t seq_before = pgcl_chain_head_seq(w.chain);

    txn_begin(&w); /* rolled back: its entries go with it */
    for (int i = 0; i < 3; i++) add_decision(&w, true);
    CHECK(pgcl_chain_head_seq(w.chain) == seq_before + 3, "head inside the transaction");
    txn_end(&w, false);
    txn_begin(&w); /* begin() reads the head again */
    CHECK(pgcl_chain_head_seq(w.chain) == seq_before && strcmp(pgcl_chain_head_hash(w.chain), head_before) == 0,
          "head re-read after a rollback: %lld", (long long)pgcl_chain_head_seq(w.chain));
    int64_t c1 = add_contest(&w, 3);
    add_contest(&w, 7);
    add_resolution(&w, c1);
    for (int i = 0; i < 10; i++) add_decision(&w, true);
    txn_end(&w, true);

    txn_begin(&w);
    add_event(&w, "shadow.attach", true);
    txn_end(&w, true);

    txn_begin(&w); /* the tail: 10 decisions */
    info->tail_first = pgcl_chain_head_seq(w.chain) + 1;
    for (int i = 0; i < 10; i++) add_decision(&w, true);
    txn_end(&w, true);
    info->entries = pgcl_chain_head_seq(w.chain);
    snprintf(info->head_hash, sizeof info->head_hash, "%s", pgcl_chain_head_hash(w.chain));
    writer_close(&w);
    CHECK(info->entries == 1 + 40 + 3 + 2 + 1, "entries: %lld", info->entries);
}

/* Makes the private directory; false when it cannot (the program then exits 1). */
static inline bool chain_fixture_setup(void) {
    return sodium_init() >= 0 && mkdtemp(g_dir) != NULL;
}

/* Removes the private directory unless a check failed or PGCLD_KEEP_TMP is set. */
static inline void chain_fixture_cleanup(void) {
    if (!g_failures && !getenv("PGCLD_KEEP_TMP")) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
}

#endif
