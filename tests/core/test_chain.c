/* The audit hash chain (core/chain.c) and signed checkpoints (core/signing.c).
 *
 * A database made by pgcl_audit_open() (the real migrations) gets events written the way the audit
 * writer writes them: inside BEGIN IMMEDIATE, begin(), plain INSERTs of decisions, admin events,
 * contests and resolutions, each followed by record(). Then every kind of tampering, each on a fresh
 * copy of that database through a separate connection with the append-only triggers dropped first,
 * must be reported at the right entry with a precise reason: an edited score, a deleted row, a
 * deleted entry, reordered entries or rows, a forged unchained row, a duplicated entry, a truncated
 * tail (intact alone, caught by a checkpoint exported before), a rewritten history, edits of the rows
 * that predate the chain. Checkpoints with a bad signature or another signer are refused; the
 * triggers refuse UPDATE and DELETE while they stand. Verification during concurrent appends sees one
 * snapshot (always intact). The encoding is pinned by an independent implementation of it (known
 * answers), and record() and verify() are timed. */
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

static char g_dir[] = "/tmp/pgcl-chain-XXXXXX";

static const char DROP_TRIGGERS[] =
    "DROP TRIGGER IF EXISTS decisions_append_only_u; DROP TRIGGER IF EXISTS decisions_append_only_d;"
    "DROP TRIGGER IF EXISTS admin_events_append_only_u; DROP TRIGGER IF EXISTS admin_events_append_only_d;"
    "DROP TRIGGER IF EXISTS contests_append_only_u; DROP TRIGGER IF EXISTS contests_append_only_d;"
    "DROP TRIGGER IF EXISTS resolutions_append_only_u; DROP TRIGGER IF EXISTS resolutions_append_only_d;"
    "DROP TRIGGER IF EXISTS audit_chain_append_only_u; DROP TRIGGER IF EXISTS audit_chain_append_only_d;";

/* ---- files and SQL helpers ---- */

/* A path in the test's directory; valid for the next 64 calls. */
static const char *tmp_path(const char *name) {
    static char buf[64][512];
    static int next;
    char *out = buf[next++ % 64];
    snprintf(out, sizeof buf[0], "%s/%s", g_dir, name);
    return out;
}

static int copy_file(const char *from, const char *to) {
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
static int exec_on(const char *path, const char *sql, char *err, size_t cap) {
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
static const char *tampered(const char *base, const char *name, const char *sql) {
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

static pgcl_chain_report verify(const char *path, const char *const *cps, int n) {
    pgcl_chain_report rep;
    char err[512] = "";
    pgcl_status st = pgcl_chain_verify(path, cps, n, &rep, err, sizeof err);
    CHECK(st == PGCL_OK, "verify %s: %s", path, err);
    return rep;
}

static long long entry_of(const char *path, const char *kind, long long row_seq) {
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

static int writer_open(writer *w, const char *path, bool fast) {
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

static void writer_close(writer *w) {
    pgcl_chain_destroy(w->chain);
    sqlite3_finalize(w->dec);
    sqlite3_finalize(w->ev);
    sqlite3_finalize(w->con);
    sqlite3_finalize(w->res);
    sqlite3_close(w->db); /* the last connection: checkpoints and removes the WAL */
}

static void txn_begin(writer *w) {
    char err[512] = "";
    CHECK(sqlite3_exec(w->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK, "BEGIN");
    CHECK(pgcl_chain_begin(w->chain, err, sizeof err) == PGCL_OK, "chain begin: %s", err);
}

static void txn_end(writer *w, bool commit) {
    CHECK(sqlite3_exec(w->db, commit ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK, "end: %s",
          sqlite3_errmsg(w->db));
}

static int64_t step_insert(writer *w, sqlite3_stmt *s, const char *kind, bool chain) {
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

static int64_t add_decision(writer *w, bool chain) {
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

static int64_t add_event(writer *w, const char *action, bool chain) {
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

static int64_t add_contest(writer *w, int64_t decision_seq) {
    sqlite3_stmt *s = w->con;
    char id[PGCL_UUID_LEN + 1];
    pgcl_uuid7(id);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, decision_seq);
    sqlite3_bind_text(s, 3, "2026-11-21T10:00:00.000000Z", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, "reviewer (pgcld_11111111)", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, "the comment quotes a slur to condemn it", -1, SQLITE_STATIC);
    return step_insert(w, s, "contests", true);
}

static int64_t add_resolution(writer *w, int64_t contest_seq) {
    sqlite3_stmt *s = w->res;
    sqlite3_bind_int64(s, 1, contest_seq);
    sqlite3_bind_text(s, 2, "2026-11-21T11:00:00.000000Z", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, "senior (pgcld_22222222)", -1, SQLITE_STATIC);
    sqlite3_bind_null(s, 4);
    sqlite3_bind_text(s, 5, "context shows counter-speech", -1, SQLITE_STATIC);
    return step_insert(w, s, "resolutions", true);
}

/* ---- an independent implementation of encoding version 1 (docs/audit.md), for known answers ---- */

typedef struct kbuf {
    unsigned char b[4096];
    size_t n;
} kbuf;

static void kb_be(kbuf *k, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) k->b[k->n++] = (unsigned char)(v >> (8 * i));
}
static void kb_int(kbuf *k, int64_t v) {
    k->b[k->n++] = 1;
    kb_be(k, (uint64_t)v, 8);
}
static void kb_real(kbuf *k, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    k->b[k->n++] = 2;
    kb_be(k, u, 8);
}
static void kb_text(kbuf *k, const char *s) {
    size_t n = strlen(s);
    k->b[k->n++] = 3;
    kb_be(k, n, 4);
    memcpy(k->b + k->n, s, n);
    k->n += n;
}
static void kb_blob(kbuf *k, const void *p, size_t n) {
    k->b[k->n++] = 4;
    kb_be(k, n, 4);
    memcpy(k->b + k->n, p, n);
    k->n += n;
}
static void kb_null(kbuf *k) { k->b[k->n++] = 0; }
static void kb_sha(const kbuf *k, char out[65]) { pgcl_sha256_hex(k->b, k->n, out); }

/* A nullable column as documented: NULL, or the given type read back from the row. */
static void kb_text_or_null(kbuf *k, sqlite3_stmt *r, int i) {
    if (sqlite3_column_type(r, i) == SQLITE_NULL) kb_null(k);
    else kb_text(k, (const char *)sqlite3_column_text(r, i));
}
static void kb_real_or_null(kbuf *k, sqlite3_stmt *r, int i) {
    if (sqlite3_column_type(r, i) == SQLITE_NULL) kb_null(k);
    else kb_real(k, sqlite3_column_double(r, i));
}

/* Re-derives entry `seq` of path (any kind: genesis, decisions, admin_events, contests or
 * resolutions) from its row with the independent encoder and compares payload and hash with what
 * is stored. The column lists and types are docs/audit.md's, written out here. */
static void check_known_answer(const char *path, long long seq) {
    sqlite3 *db;
    sqlite3_stmt *e = NULL, *r = NULL;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db, "SELECT kind, row_seq, payload_sha256, prev_hash, hash FROM audit_chain WHERE seq = ?",
                       -1, &e, NULL);
    sqlite3_bind_int64(e, 1, seq);
    CHECK(sqlite3_step(e) == SQLITE_ROW, "entry %lld", seq);
    const char *kind = (const char *)sqlite3_column_text(e, 0);
    long long row_seq = sqlite3_column_int64(e, 1);
    kbuf *k = calloc(1, sizeof *k);
    char want[65];
    if (strcmp(kind, "genesis") == 0) {
        for (int i = 0; i < 4; i++) kb_int(k, 0); /* a new database: no row predates the chain */
    } else if (strcmp(kind, "admin_events") == 0) {
        sqlite3_prepare_v2(db, "SELECT event_id, created_at, actor, action, target, details FROM admin_events"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "admin_events row");
        kb_int(k, row_seq);
        for (int i = 0; i < 6; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
    } else if (strcmp(kind, "contests") == 0) {
        sqlite3_prepare_v2(db, "SELECT contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "contests row");
        kb_int(k, row_seq);
        for (int i = 0; i < 4; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_text_or_null(k, r, 4);
        kb_text(k, (const char *)sqlite3_column_text(r, 5));
    } else if (strcmp(kind, "resolutions") == 0) {
        sqlite3_prepare_v2(db, "SELECT contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label,"
                               " note FROM resolutions WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "resolutions row");
        kb_int(k, row_seq);
        for (int i = 0; i < 3; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_text_or_null(k, r, 3);
        kb_text(k, (const char *)sqlite3_column_text(r, 4));
        kb_text_or_null(k, r, 5);
        kb_text(k, (const char *)sqlite3_column_text(r, 6));
    } else {
        /* decisions: every column in the documented order, with their stored types */
        sqlite3_prepare_v2(db, "SELECT decision_id, created_at, request_id, item_id, model_name, model_version,"
                               " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review,"
                               " t_block, vector, input_sha256, latency_us, input, input_dtype FROM decisions"
                               " WHERE seq = ?", -1, &r, NULL);
        sqlite3_bind_int64(r, 1, row_seq);
        CHECK(sqlite3_step(r) == SQLITE_ROW, "decisions row");
        kb_int(k, row_seq);
        for (int i = 0; i < 8; i++) kb_text(k, (const char *)sqlite3_column_text(r, i));
        kb_int(k, sqlite3_column_int64(r, 8));
        kb_text(k, (const char *)sqlite3_column_text(r, 9));
        kb_real_or_null(k, r, 10);
        kb_text(k, (const char *)sqlite3_column_text(r, 11));
        kb_text(k, (const char *)sqlite3_column_text(r, 12));
        kb_real_or_null(k, r, 13);
        kb_real_or_null(k, r, 14);
        kb_blob(k, sqlite3_column_blob(r, 15), (size_t)sqlite3_column_bytes(r, 15));
        kb_text(k, (const char *)sqlite3_column_text(r, 16));
        kb_int(k, sqlite3_column_int64(r, 17));
        if (sqlite3_column_type(r, 18) == SQLITE_NULL) {
            kb_null(k);
            kb_null(k);
        } else {
            kb_blob(k, sqlite3_column_blob(r, 18), (size_t)sqlite3_column_bytes(r, 18));
            kb_text(k, (const char *)sqlite3_column_text(r, 19));
        }
    }
    kb_sha(k, want);
    CHECK(strcmp(want, (const char *)sqlite3_column_text(e, 2)) == 0, "entry %lld (%s): payload %s, independent %s",
          seq, kind, sqlite3_column_text(e, 2), want);
    k->n = 0;
    kb_int(k, seq);
    kb_text(k, kind);
    kb_int(k, row_seq);
    kb_text(k, (const char *)sqlite3_column_text(e, 2));
    kb_text(k, (const char *)sqlite3_column_text(e, 3));
    kb_sha(k, want);
    CHECK(strcmp(want, (const char *)sqlite3_column_text(e, 4)) == 0, "entry %lld: hash differs from the independent "
          "encoding", seq);
    free(k);
    sqlite3_finalize(r);
    sqlite3_finalize(e);
    sqlite3_close(db);
}

/* ---- the base database ---- */

typedef struct base_info {
    long long entries;       /* chain length */
    char head_hash[65];
    long long tail_first;    /* first entry of the last transaction (10 decisions) */
} base_info;

static void build_base(const char *path, base_info *info) {
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

/* ---- the cases ---- */

static void test_intact(const char *base, const base_info *info) {
    pgcl_chain_report rep = verify(base, NULL, 0);
    CHECK(rep.intact, "base chain intact: %lld %s", (long long)rep.first_bad_seq, rep.reason);
    CHECK(rep.events == info->entries && rep.head_seq == info->entries, "events %lld head %lld", (long long)rep.events,
          (long long)rep.head_seq);
    CHECK(strcmp(rep.head_hash, info->head_hash) == 0, "head hash");
    CHECK(rep.first_bad_seq == 0 && rep.reason[0] == 0, "no finding");
    /* every entry: decisions with and without a stored input, admin events, contests (filer_key_id
     * NULL), a resolution (resolver_key_id NULL) */
    for (long long seq = 1; seq <= info->entries; seq++) check_known_answer(base, seq);
    CHECK(query_int(base, "SELECT count(*) FROM audit_chain WHERE kind = 'decisions'") == 40, "one entry per row");
}

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

    /* truncate the tail: the last 3 decisions and their entries */
    char sql[512];
    snprintf(sql, sizeof sql,
             "DELETE FROM audit_chain WHERE seq > %lld;"
             "DELETE FROM decisions WHERE seq > 37",
             info->entries - 3);
    const char *p = tampered(db, "truncated.db", sql);
    rep = verify(p, NULL, 0);
    CHECK(rep.intact && rep.head_seq == info->entries - 3, "a truncated tail alone looks intact: %s", rep.reason);
    rep = verify(p, files, 1);
    char want[128];
    snprintf(want, sizeof want, "checkpoint at seq %lld but the chain ends at %lld", info->entries, info->entries - 3);
    CHECK_BAD(rep, info->entries - 2, want);

    /* a rewritten history: entries from the tail's start re-made after editing a row */
    snprintf(sql, sizeof sql,
             "DELETE FROM audit_chain WHERE seq >= %lld; UPDATE decisions SET decision = 'allow' WHERE seq = 35",
             info->tail_first);
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
                 " t_review, t_block, vector, input_sha256, latency_us, input, input_dtype FROM decisions WHERE seq = 1");
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

/* ---- known answers from literal rows: every column of every chained table ----
 *
 * Rows whose every value is written out here (no two values of a row alike, every nullable column
 * both NULL and set) are inserted with docs/audit.md's column lists and chained by the real
 * writer; the payload and hash of each entry are then derived from these literals alone with the
 * independent encoder above, from genesis to head. Dropping, adding or reordering a column in any
 * table's encoding, or encoding a value with another type, changes a payload and fails here; the
 * check above (from the stored rows) cannot see what both the writer and the verifier leave out. */

typedef struct kval {
    char type; /* 'n' NULL, 'i' INTEGER, 'r' REAL, 't' TEXT, 'b' BLOB */
    int64_t i;
    double r;
    const char *p; /* TEXT (NUL-terminated) or BLOB bytes */
    size_t n;      /* BLOB length */
} kval;

#define KN {'n', 0, 0, NULL, 0}
#define KI(v) {'i', (v), 0, NULL, 0}
#define KR(v) {'r', 0, (v), NULL, 0}
#define KT(v) {'t', 0, 0, (v), 0}
#define KB(v, len) {'b', 0, 0, (const char *)(v), (len)}

typedef struct literal_row {
    const char *table; /* also the entry's kind */
    const kval *values; /* the documented columns, in order, the row's seq first */
    int n;
} literal_row;

static const char *const DECISION_COLUMNS =
    "seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label, label_index,"
    " probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us, input,"
    " input_dtype";
static const char *const ADMIN_EVENT_COLUMNS = "seq, event_id, created_at, actor, action, target, details";
static const char *const CONTEST_COLUMNS = "seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason";
static const char *const RESOLUTION_COLUMNS =
    "seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note";

static const char *columns_of(const char *table) {
    return strcmp(table, "decisions") == 0      ? DECISION_COLUMNS
           : strcmp(table, "admin_events") == 0 ? ADMIN_EVENT_COLUMNS
           : strcmp(table, "contests") == 0     ? CONTEST_COLUMNS
                                                : RESOLUTION_COLUMNS;
}

static void kb_value(kbuf *k, const kval *v) {
    switch (v->type) {
    case 'i': kb_int(k, v->i); break;
    case 'r': kb_real(k, v->r); break;
    case 't': kb_text(k, v->p); break;
    case 'b': kb_blob(k, v->p, v->n); break;
    default: kb_null(k);
    }
}

static void bind_value(sqlite3_stmt *s, int i, const kval *v) {
    switch (v->type) {
    case 'i': sqlite3_bind_int64(s, i, v->i); break;
    case 'r': sqlite3_bind_double(s, i, v->r); break;
    case 't': sqlite3_bind_text(s, i, v->p, -1, SQLITE_STATIC); break;
    case 'b': sqlite3_bind_blob(s, i, v->p, (int)v->n, SQLITE_STATIC); break;
    default: sqlite3_bind_null(s, i);
    }
}

/* INSERTs row with its documented column list and chains it inside w's open transaction. */
static void insert_literal(writer *w, const literal_row *row) {
    char sql[1024], marks[128] = "";
    for (int i = 0; i < row->n; i++) strcat(marks, i ? ", ?" : "?");
    snprintf(sql, sizeof sql, "INSERT INTO %s (%s) VALUES (%s)", row->table, columns_of(row->table), marks);
    sqlite3_stmt *s = NULL;
    CHECK(sqlite3_prepare_v2(w->db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(w->db));
    for (int i = 0; i < row->n; i++) bind_value(s, i + 1, &row->values[i]);
    CHECK(sqlite3_step(s) == SQLITE_DONE, "insert %s: %s", row->table, sqlite3_errmsg(w->db));
    sqlite3_finalize(s);
    char err[512] = "";
    CHECK(pgcl_chain_record(w->chain, row->table, row->values[0].i, err, sizeof err) == PGCL_OK, "record %s: %s",
          row->table, err);
}

static void test_known_answers_literal(void) {
    static const float vec[4] = {0.5f, -1.25f, 3.0f, 0.0625f};
    static const unsigned char input_f16[6] = {0x00, 0x3c, 0x00, 0xc0, 0x55, 0x35};
    const kval dec_full[] = {
        KI(1), KT("0190a5e0-1111-7000-8000-00000000d001"), KT("2026-11-21T10:00:00.000001Z"),
        KT("0190a5e0-2222-7000-8000-0000000000a1"), KT("item-full"), KT("toxicity"), KT("7"),
        KT("5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed"), KT("toxic"), KI(3),
        KT("{\"non_toxic\":0.25,\"toxic\":0.75}"), KR(0.75), KT("review"),
        KT("{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.875,\"t_review\":0.5}"), KR(0.5), KR(0.875),
        KB(vec, sizeof vec), KT("c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff"), KI(4242),
        KB(input_f16, sizeof input_f16), KT("f16")};
    const kval dec_nulls[] = {
        KI(2), KT("0190a5e0-1111-7000-8000-00000000d002"), KT("2026-11-21T10:00:00.000002Z"),
        KT("0190a5e0-2222-7000-8000-0000000000a2"), KT("item-nulls"), KT("emotions"), KT("3"),
        KT("0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0dd0"), KT("joy"), KI(0),
        KT("{\"joy\":0.5,\"anger\":0.3,\"fear\":0.2}"), KN, KT("allow"),
        KT("{\"actions\":{},\"kind\":\"label_map\"}"), KN, KN, KB(vec, 8),
        KT("feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface"), KI(99), KN, KN};
    const kval event[] = {KI(1), KT("0190a5e0-3333-7000-8000-0000000000e1"), KT("2026-11-21T10:00:01.000000Z"),
                          KT("ops (pgcld_0a0a0a0a)"), KT("key.create"), KT("pgcld_0b0b0b0b"),
                          KT("{\"name\":\"reviewer two\",\"role\":\"reviewer\"}")};
    const kval contest_keyed[] = {KI(1), KT("0190a5e0-4444-7000-8000-0000000000c1"),
                                  KT("0190a5e0-1111-7000-8000-00000000d001"), KT("2026-11-21T10:00:02.000000Z"),
                                  KT("reviewer (pgcld_11111111)"), KT("pgcld_11111111"),
                                  KT("the comment quotes a slur to condemn it")};
    const kval contest_anonymous[] = {KI(2), KT("0190a5e0-4444-7000-8000-0000000000c2"),
                                      KT("0190a5e0-1111-7000-8000-00000000d002"), KT("2026-11-21T10:00:03.000000Z"),
                                      KT("anonymous"), KN, KT("sarcasm, not joy")};
    const kval resolution_keyed[] = {KI(1), KT("0190a5e0-4444-7000-8000-0000000000c1"),
                                     KT("2026-11-21T11:00:00.000000Z"), KT("senior (pgcld_22222222)"),
                                     KT("pgcld_22222222"), KT("overturned"), KT("non_toxic"),
                                     KT("context shows counter-speech")};
    const kval resolution_plain[] = {KI(2), KT("0190a5e0-4444-7000-8000-0000000000c2"),
                                     KT("2026-11-21T11:00:01.000000Z"), KT("anonymous"), KN, KT("upheld"), KN,
                                     KT("the decision stands")};
#define ROW(table, v) {table, v, (int)(sizeof v / sizeof v[0])}
    const literal_row rows[] = {
        ROW("decisions", dec_full),      ROW("decisions", dec_nulls),          ROW("admin_events", event),
        ROW("contests", contest_keyed),  ROW("contests", contest_anonymous),  ROW("resolutions", resolution_keyed),
        ROW("resolutions", resolution_plain),
    };
#undef ROW
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    CHECK(rows[0].n == 21 && rows[1].n == 21 && rows[2].n == 7 && rows[3].n == 7 && rows[4].n == 7 &&
              rows[5].n == 8 && rows[6].n == 8,
          "every documented column has a value");

    const char *path = tmp_path("literal.db");
    writer w;
    if (writer_open(&w, path, true) != 0) return;
    txn_begin(&w); /* writes the genesis entry */
    for (int i = 0; i < n_rows; i++) insert_literal(&w, &rows[i]);
    txn_end(&w, true);
    writer_close(&w);

    /* the expected chain, from the literals alone */
    sqlite3 *db = NULL;
    sqlite3_stmt *e = NULL;
    sqlite3_open(path, &db);
    sqlite3_prepare_v2(db, "SELECT seq, kind, row_seq, payload_sha256, prev_hash, hash FROM audit_chain ORDER BY seq",
                       -1, &e, NULL);
    kbuf *k = calloc(1, sizeof *k);
    char prev[65], payload[65], hash[65];
    memset(prev, '0', 64);
    prev[64] = 0;
    int entries = 0;
    for (int i = -1; i < n_rows; i++) { /* -1: the genesis entry */
        const char *kind = i < 0 ? "genesis" : rows[i].table;
        int64_t row_seq = i < 0 ? 0 : rows[i].values[0].i, seq = i + 2;
        k->n = 0;
        if (i < 0) {
            for (int t = 0; t < 4; t++) kb_int(k, 0);
        } else {
            for (int c = 0; c < rows[i].n; c++) kb_value(k, &rows[i].values[c]);
        }
        kb_sha(k, payload);
        k->n = 0;
        kb_int(k, seq);
        kb_text(k, kind);
        kb_int(k, row_seq);
        kb_text(k, payload);
        kb_text(k, prev);
        kb_sha(k, hash);
        bool found = sqlite3_step(e) == SQLITE_ROW;
        CHECK(found, "entry %lld (%s row %lld) missing", (long long)seq, kind, (long long)row_seq);
        if (!found) break;
        entries++;
        CHECK(sqlite3_column_int64(e, 0) == seq && strcmp((const char *)sqlite3_column_text(e, 1), kind) == 0 &&
                  sqlite3_column_int64(e, 2) == row_seq,
              "entry %lld: %s row %lld, expected %s row %lld", (long long)seq, sqlite3_column_text(e, 1),
              (long long)sqlite3_column_int64(e, 2), kind, (long long)row_seq);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 3), payload) == 0,
              "entry %lld (%s row %lld): payload %s, from the literals %s", (long long)seq, kind, (long long)row_seq,
              sqlite3_column_text(e, 3), payload);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 4), prev) == 0, "entry %lld: prev_hash", (long long)seq);
        CHECK(strcmp((const char *)sqlite3_column_text(e, 5), hash) == 0, "entry %lld (%s): hash %s, from the literals %s",
              (long long)seq, kind, sqlite3_column_text(e, 5), hash);
        memcpy(prev, hash, sizeof prev);
    }
    CHECK(entries == n_rows + 1 && sqlite3_step(e) == SQLITE_DONE, "%d entries, expected %d", entries, n_rows + 1);
    free(k);
    sqlite3_finalize(e);
    sqlite3_close(db);
    pgcl_chain_report rep = verify(path, NULL, 0);
    CHECK(rep.intact && rep.events == n_rows + 1 && strcmp(rep.head_hash, prev) == 0,
          "literal chain verifies: intact %d events %lld %s", rep.intact, (long long)rep.events, rep.reason);
}

int main(void) {
    if (sodium_init() < 0 || !mkdtemp(g_dir)) return 1;
    static char base[512];
    snprintf(base, sizeof base, "%s", tmp_path("base.db"));
    base_info info = {0};
    build_base(base, &info);
    if (info.entries == 0) return test_finish("test_chain");
    test_intact(base, &info);
    test_known_answers_literal();
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
    if (!g_failures && !getenv("PGCLD_KEEP_TMP")) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return test_finish("test_chain");
}
