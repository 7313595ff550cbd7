/* Archival of the PostgreSQL store past a horizon (audit_pg_archive.h; docs/audit.md, "Archival on
 * PostgreSQL"): the plan, the archive file, the pruning, the run. The offline check of an archive
 * file is audit_pg_archive_verify.c. */
#include "audit_pg_archive.h"

#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive.h"
#include "audit_pg.h"
#include "clock.h"
#include "files.h"
#include "merkle.h"
#include "sha256.h"
#include "time_cursor.h"

#define ERR_CAP 512
enum { MAX_PLAN_ROUNDS = 64 };

/* ---- the archive file's schema: the SQLite store's event columns, the fleet's chain tables ---- */

static const char *const ARCHIVE_SCHEMA_SQL[] = {
    "CREATE TABLE fleet_archive (id INTEGER PRIMARY KEY CHECK (id = 1), format TEXT NOT NULL, version "
    "INTEGER NOT NULL, archived_before TEXT NOT NULL, checkpoint TEXT NOT NULL, decisions_previous "
    "INTEGER NOT NULL, admin_events_previous INTEGER NOT NULL, contests_previous INTEGER NOT NULL, "
    "resolutions_previous INTEGER NOT NULL, decisions_through INTEGER NOT NULL, admin_events_through "
    "INTEGER NOT NULL, contests_through INTEGER NOT NULL, resolutions_through INTEGER NOT NULL)",
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, decision_id TEXT NOT NULL UNIQUE, created_at TEXT "
    "NOT NULL, request_id TEXT NOT NULL, item_id TEXT NOT NULL, model_name TEXT NOT NULL, model_version "
    "TEXT NOT NULL, model_sha256 TEXT NOT NULL, label TEXT NOT NULL, label_index INTEGER NOT NULL, "
    "probabilities TEXT NOT NULL, toxicity REAL, decision TEXT NOT NULL, policy TEXT NOT NULL, t_review "
    "REAL, t_block REAL, vector BLOB NOT NULL, input_sha256 TEXT NOT NULL, latency_us INTEGER NOT NULL, "
    "input BLOB, input_dtype TEXT, input_digest BLOB, trace_id TEXT, content_date TEXT, territorial_scope TEXT, "
    "content_language TEXT)",
    "CREATE INDEX decisions_created_at ON decisions (created_at)",
    "CREATE TABLE decision_inputs (decision_seq INTEGER PRIMARY KEY, input BLOB NOT NULL)",
    "CREATE TABLE admin_events (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, created_at TEXT "
    "NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL, details TEXT NOT NULL)",
    "CREATE TABLE contests (seq INTEGER PRIMARY KEY, contest_id TEXT NOT NULL UNIQUE, decision_id TEXT "
    "NOT NULL, filed_at TEXT NOT NULL, filed_by TEXT NOT NULL, filer_key_id TEXT, reason TEXT NOT NULL)",
    "CREATE TABLE resolutions (seq INTEGER PRIMARY KEY, contest_id TEXT NOT NULL UNIQUE, resolved_at TEXT "
    "NOT NULL, resolved_by TEXT NOT NULL, resolver_key_id TEXT, outcome TEXT NOT NULL, corrected_label "
    "TEXT, note TEXT NOT NULL)",
    "CREATE TABLE audit_chain (writer_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, row_seq "
    "INTEGER NOT NULL, payload_sha256 TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, "
    "leaf_count INTEGER, leaves BLOB, PRIMARY KEY (writer_id, seq))",
    "CREATE TABLE audit_chain_runs (kind TEXT NOT NULL, first_row_seq INTEGER NOT NULL, n INTEGER NOT "
    "NULL, writer_id TEXT NOT NULL, entry_seq INTEGER NOT NULL, first_leaf INTEGER NOT NULL, PRIMARY KEY "
    "(kind, first_row_seq))",
    "CREATE TABLE audit_log_nodes (writer_id TEXT NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL, "
    "hash BLOB NOT NULL, PRIMARY KEY (writer_id, level, idx))",
};

/* ---- small helpers ---- */

static void int_text(int64_t v, char out[24]) {
    snprintf(out, 24, "%lld", (long long)v);
}

/* ---- step 1: the plan ---- */

static const char PREVIOUS_CUT_SQL[] =
    "SELECT coalesce(max(decisions_through), 0), coalesce(max(admin_events_through), 0),"
    " coalesce(max(contests_through), 0), coalesce(max(resolutions_through), 0) FROM audit_cuts";

/* The last row of each table whose rows after the previous cut ($1) are all older than $2. */
static const char *const OLDER_THROUGH_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT coalesce((SELECT min(seq) - 1 FROM decisions WHERE seq > $1 AND created_at >= $2),"
    " (SELECT max(seq) FROM decisions), $1)",
    "SELECT coalesce((SELECT min(seq) - 1 FROM admin_events WHERE seq > $1 AND created_at >= $2),"
    " (SELECT max(seq) FROM admin_events), $1)",
    "SELECT coalesce((SELECT min(seq) - 1 FROM contests WHERE seq > $1 AND filed_at >= $2),"
    " (SELECT max(seq) FROM contests), $1)",
    "SELECT coalesce((SELECT min(seq) - 1 FROM resolutions WHERE seq > $1 AND resolved_at >= $2),"
    " (SELECT max(seq) FROM resolutions), $1)"};

/* The first decision in ($1, $2] that must stay: a contest of it stays (after $3, or not resolved
 * by a resolution at or below $4). */
#define DECISION_KEPT_SQL                                                                                              \
    "SELECT min(d.seq) FROM decisions AS d JOIN contests AS c ON c.decision_id = d.decision_id WHERE d.seq > $1"       \
    " AND d.seq <= $2 AND (c.seq > $3 OR NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE"                             \
    " r.contest_id = c.contest_id AND r.seq <= $4))"
/* The first contest in ($1, $2] that must stay: its decision stays (after $3) or its resolution
 * does (after $4). */
#define CONTEST_KEPT_SQL                                                                                               \
    "SELECT min(c.seq) FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id WHERE c.seq > $1"       \
    " AND c.seq <= $2 AND (d.seq > $3 OR EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id"     \
    " AND r.seq > $4))"
/* The first resolution in ($1, $2] that must stay: its contest stays (after $3). */
#define RESOLUTION_KEPT_SQL                                                                                            \
    "SELECT min(r.seq) FROM resolutions AS r JOIN contests AS c ON c.contest_id = r.contest_id WHERE r.seq > $1"       \
    " AND r.seq <= $2 AND c.seq > $3"

/* The contest that keeps the first decision in ($1, $2] that stays at contests through $3 and
 * resolutions through $4 (DECISION_KEPT_SQL's rule), an open one first. */
#define BLOCKER_SQL                                                                                                    \
    "SELECT d.seq, d.decision_id, c.contest_id, c.filed_at, coalesce(r.resolved_at, '') FROM decisions AS d JOIN"      \
    " contests AS c ON c.decision_id = d.decision_id LEFT JOIN resolutions AS r ON r.contest_id = c.contest_id WHERE"  \
    " d.seq > $1 AND d.seq <= $2 AND (c.seq > $3 OR r.seq IS NULL OR r.seq > $4) ORDER BY d.seq, r.seq IS NOT NULL,"   \
    " c.seq LIMIT 1"
/* Contest $1 with its decision (contests are archived in seq order: the first that stays keeps
 * every later one). */
#define CONTEST_BLOCKER_SQL                                                                                            \
    "SELECT d.seq, d.decision_id, c.contest_id, c.filed_at, coalesce(r.resolved_at, '') FROM contests AS c JOIN"       \
    " decisions AS d ON d.decision_id = c.decision_id LEFT JOIN resolutions AS r ON r.contest_id = c.contest_id"       \
    " WHERE c.seq = $1"

/* Lowers *through to (first kept row - 1) when sql (n_params of previous, *through, a, b) finds one;
 * *changed when it did. */
static pgcl_status lower_to_kept(PGconn *conn, const char *what, const char *sql, int n_params, int64_t previous,
                                 int64_t *through, int64_t a, int64_t b, bool *changed, char *err, int cap) {
    PGCL_ASSERT(n_params == 3 || n_params == 4);
    char p[24], t[24], x[24], y[24];
    int_text(previous, p);
    int_text(*through, t);
    int_text(a, x);
    int_text(b, y);
    const char *values[] = {p, t, x, y};
    int64_t kept = 0;
    bool found = false;
    pgcl_status st = pgcl_pg_query_int(conn, what, sql, n_params, values, &kept, &found, err, cap);
    if (st == PGCL_OK && found) {
        PGCL_ASSERT(kept > previous && kept <= *through);
        *through = kept - 1;
        *changed = true;
    }
    return st;
}

/* The blocker BLOCKER_SQL or CONTEST_BLOCKER_SQL finds with values; *found false when none. */
static pgcl_status find_blocker(PGconn *conn, const char *sql, int n_params, const char *const *values,
                                pgcl_archive_blocker *b, bool *found, char *err, int cap) {
    pgcl_status st = PGCL_OK;
    memset(b, 0, sizeof *b);
    PGresult *res = pgcl_pg_query(conn, "contests", sql, n_params, values, &st, err, cap);
    if (!res) return st;
    *found = PQntuples(res) == 1;
    if (*found) {
        b->decision_seq = pgcl_pg_int(res, 0, 0);
        snprintf(b->decision_id, sizeof b->decision_id, "%s", PQgetvalue(res, 0, 1));
        snprintf(b->contest_id, sizeof b->contest_id, "%s", PQgetvalue(res, 0, 2));
        snprintf(b->filed_at, sizeof b->filed_at, "%s", PQgetvalue(res, 0, 3));
        snprintf(b->resolved_at, sizeof b->resolved_at, "%s", PQgetvalue(res, 0, 4));
    }
    PQclear(res);
    return PGCL_OK;
}

/* The refusal when the plan found nothing to archive, naming what the operator can change: the
 * contest that keeps the first decision older than the horizon (initial: the bounds before the
 * contest rules and max_decisions, th: after them), the contest window that keeps the decisions
 * older than the horizon, or the horizon. PGCL_ERR_NOT_FOUND, or the error of a query. */
static pgcl_status refuse_nothing(PGconn *conn, const char *horizon, const char *decision_horizon,
                                  int contest_window_days, bool bounded, const int64_t previous[PGCL_CHAIN_TABLES],
                                  const int64_t initial[PGCL_CHAIN_TABLES], const int64_t th[PGCL_CHAIN_TABLES],
                                  char *err, int cap) {
    pgcl_status st = PGCL_OK;
    if (initial[0] > previous[0]) { /* old decisions, all kept for their contests */
        char p[24], i0[24], t2[24], t3[24];
        int_text(previous[0], p);
        int_text(initial[0], i0);
        int_text(th[2], t2);
        int_text(th[3], t3);
        const char *values[] = {p, i0, t2, t3};
        pgcl_archive_blocker b, root;
        bool found = false, have_root = false;
        if ((st = find_blocker(conn, BLOCKER_SQL, 4, values, &b, &found, err, cap)) != PGCL_OK) return st;
        if (found) {
            if (b.resolved_at[0] && strcmp(b.filed_at, horizon) < 0 && strcmp(b.resolved_at, horizon) < 0) {
                /* resolved before the horizon: its contest stays behind the first contest that stays */
                char first_kept[24];
                int_text(th[2] + 1, first_kept);
                const char *rv[] = {first_kept};
                if ((st = find_blocker(conn, CONTEST_BLOCKER_SQL, 1, rv, &root, &have_root, err, cap)) != PGCL_OK)
                    return st;
            }
            pgcl_archive_contest_refusal(&b, have_root ? &root : NULL, horizon, bounded, err, cap);
            return PGCL_ERR_NOT_FOUND;
        }
    }
    if (strcmp(decision_horizon, horizon) < 0) { /* are decisions older than the horizon kept by the window? */
        char p[24];
        int_text(previous[0], p);
        const char *values[] = {p, horizon};
        int64_t older = 0;
        if ((st = pgcl_pg_query_int(conn, "decisions", OLDER_THROUGH_SQL[0], 2, values, &older, NULL, err, cap)) !=
            PGCL_OK)
            return st;
        if (older > previous[0]) {
            pgcl_errorf(err, cap,
                        "nothing to archive: the decisions older than %s were made within the contest window "
                        "(--contest-window-days %d: a decision made after %s may still be contested, so it stays), "
                        "and no other event row after the previous cut is older than %s; they can be archived "
                        "once the window has passed them (or with a smaller --contest-window-days)",
                        horizon, contest_window_days, decision_horizon, horizon);
            return PGCL_ERR_NOT_FOUND;
        }
    }
    pgcl_errorf(err, cap,
                "nothing to archive: no event row after the previous cut is older than %s (a later horizon moves the "
                "cut)",
                horizon);
    return PGCL_ERR_NOT_FOUND;
}

/* Step 1 in the snapshot the caller holds on conn. */
static pgcl_status plan_cut(PGconn *conn, const char *horizon, const char *decision_horizon, int contest_window_days,
                            int64_t max_decisions, pgcl_pg_archive_cut *cut, char *err, int cap) {
    pgcl_status st = PGCL_OK;
    PGresult *res = pgcl_pg_query(conn, "audit_cuts", PREVIOUS_CUT_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        cut->previous[t] = pgcl_pg_int(res, 0, t);
    PQclear(res);
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        char p[24];
        int_text(cut->previous[t], p);
        const char *values[] = {p, t == 0 ? decision_horizon : horizon};
        if ((st = pgcl_pg_query_int(conn, pgcl_chain_tables[t].name, OLDER_THROUGH_SQL[t], 2, values, &cut->through[t],
                                    NULL, err, cap)) != PGCL_OK)
            return st;
        if (cut->through[t] < cut->previous[t]) cut->through[t] = cut->previous[t];
    }
    int64_t initial[PGCL_CHAIN_TABLES];
    memcpy(initial, cut->through, sizeof initial);
    const bool bounded = max_decisions > 0 && cut->through[0] > cut->previous[0] + max_decisions;
    if (bounded) cut->through[0] = cut->previous[0] + max_decisions;
    /* the contest rules, to a fixed point (each bound only goes down) */
    int64_t *th = cut->through;
    const int64_t *pr = cut->previous;
    for (int round = 0;; round++) {
        PGCL_ASSERT(round < MAX_PLAN_ROUNDS * 1024);
        bool changed = false;
        if ((st = lower_to_kept(conn, "decisions", DECISION_KEPT_SQL, 4, pr[0], &th[0], th[2], th[3], &changed, err,
                                cap)) != PGCL_OK ||
            (st = lower_to_kept(conn, "contests", CONTEST_KEPT_SQL, 4, pr[2], &th[2], th[0], th[3], &changed, err, cap)) !=
                PGCL_OK ||
            (st = lower_to_kept(conn, "resolutions", RESOLUTION_KEPT_SQL, 3, pr[3], &th[3], th[2], 0, &changed, err,
                                cap)) != PGCL_OK)
            return st;
        if (!changed) break;
    }
    bool any = false;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        any = any || th[t] > pr[t];
    if (!any)
        return refuse_nothing(conn, horizon, decision_horizon, contest_window_days, bounded, pr, initial, th, err, cap);
    return PGCL_OK;
}

/* ---- step 3: the archive file ---- */

/* The rows copied into the archive, in its tables' column order; $1 = previous, $2 = through (or
 * writer id and head for the chain tables). */
static const char *const COPY_ROWS_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT seq, decision_id, created_at, request_id, item_id, model_name, model_version, model_sha256, label,"
    " label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector, input_sha256, latency_us,"
    " NULL::bytea, input_dtype, input_digest, trace_id, content_date, territorial_scope, content_language"
    " FROM decisions WHERE seq > $1 AND seq <= $2 ORDER BY seq",
    "SELECT seq, event_id, created_at, actor, action, target, details FROM admin_events WHERE seq > $1 AND"
    " seq <= $2 ORDER BY seq",
    "SELECT seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason FROM contests WHERE seq > $1 AND"
    " seq <= $2 ORDER BY seq",
    "SELECT seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label, note FROM"
    " resolutions WHERE seq > $1 AND seq <= $2 ORDER BY seq"};
static const char *const INSERT_ROWS_SQL[PGCL_CHAIN_TABLES] = {
    "INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO admin_events VALUES (?, ?, ?, ?, ?, ?, ?)", "INSERT INTO contests VALUES (?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO resolutions VALUES (?, ?, ?, ?, ?, ?, ?, ?)"};
static const char COPY_INPUTS_SQL[] =
    "SELECT decision_seq, input FROM decision_inputs WHERE decision_seq > $1 AND decision_seq <= $2"
    " ORDER BY decision_seq";
static const char INSERT_INPUTS_SQL[] = "INSERT INTO decision_inputs VALUES (?, ?)";
/* A writer's chain tables up to its head ($1 = writer id, $2 = head seq): its entries, their runs,
 * its log's nodes. */
enum { CHAIN_COPIES = 3 };
static const char *const CHAIN_COPY_TABLE[CHAIN_COPIES] = {"audit_chain", "audit_chain_runs", "audit_log_nodes"};
static const char *const COPY_CHAIN_SQL[CHAIN_COPIES] = {
    "SELECT writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count, leaves FROM audit_chain"
    " WHERE writer_id = $1 AND seq <= $2 ORDER BY seq",
    "SELECT kind, first_row_seq, n, writer_id, entry_seq, first_leaf FROM audit_chain_runs WHERE writer_id = $1 AND"
    " entry_seq <= $2",
    "SELECT writer_id, level, idx, hash FROM audit_log_nodes WHERE writer_id = $1 AND level <= 62 AND"
    " ((idx + 1) << level) <= $2"};
static const char *const INSERT_CHAIN_SQL[CHAIN_COPIES] = {
    "INSERT INTO audit_chain VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO audit_chain_runs VALUES (?, ?, ?, ?, ?, ?)", "INSERT INTO audit_log_nodes VALUES (?, ?, ?, ?)"};
static const char INSERT_META_SQL[] = "INSERT INTO fleet_archive VALUES (1, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/* PostgreSQL type oids (pg_type.h) of the copied columns. */
enum { OID_BYTEA = 17, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT8 = 701 };

static uint64_t be_uint(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Binds column col of a binary result to parameter col + 1 of ins, by its PostgreSQL type: the
 * value as the SQLite store would hold it (integers, doubles bit for bit, bytes, text). */
static int bind_column(sqlite3_stmt *ins, const PGresult *res, int row, int col) {
    if (PQgetisnull(res, row, col)) return sqlite3_bind_null(ins, col + 1);
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
    int n = PQgetlength(res, row, col);
    switch (PQftype(res, col)) {
    case OID_INT8:
    case OID_INT4:
    case OID_INT2: {
        uint64_t u = be_uint(p, n);
        int64_t v = n == 2 ? (int16_t)u : n == 4 ? (int32_t)u : (int64_t)u;
        return sqlite3_bind_int64(ins, col + 1, v);
    }
    case OID_FLOAT8: {
        PGCL_ASSERT(n == 8);
        uint64_t bits = be_uint(p, 8);
        double d;
        memcpy(&d, &bits, sizeof d);
        return sqlite3_bind_double(ins, col + 1, d);
    }
    case OID_BYTEA:
        return sqlite3_bind_blob(ins, col + 1, p, n, SQLITE_TRANSIENT);
    default: /* text: its UTF-8 bytes */
        return sqlite3_bind_text(ins, col + 1, (const char *)p, n, SQLITE_TRANSIENT);
    }
}

/* Copies the rows of sql (two text parameters, binary results) into the archive through insert_sql;
 * *copied: how many. */
static pgcl_status copy_rows(PGconn *conn, sqlite3 *db, const char *what, const char *sql, const char *a, const char *b,
                             const char *insert_sql, int64_t *copied, char *err, int cap) {
    const char *values[] = {a, b};
    PGresult *res = PQexecParams(conn, sql, 2, NULL, values, NULL, NULL, 1);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        pgcl_errorf(err, cap, "%s: %s", what, PQerrorMessage(conn));
        PQclear(res);
        return PGCL_ERR_DB;
    }
    sqlite3_stmt *ins = NULL;
    pgcl_status st = PGCL_OK;
    if (sqlite3_prepare_v2(db, insert_sql, -1, &ins, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: the archive: %s", what, sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    PGCL_ASSERT(!ins || sqlite3_bind_parameter_count(ins) == PQnfields(res));
    int rows = PQntuples(res);
    for (int r = 0; st == PGCL_OK && r < rows; r++) {
        sqlite3_reset(ins);
        int rc = SQLITE_OK;
        for (int c = 0; rc == SQLITE_OK && c < PQnfields(res); c++)
            rc = bind_column(ins, res, r, c);
        if (rc == SQLITE_OK) rc = sqlite3_step(ins);
        if (rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "%s: writing the archive: %s", what, sqlite3_errmsg(db));
            st = PGCL_ERR_DB;
        }
    }
    if (copied) *copied = rows;
    sqlite3_finalize(ins);
    PQclear(res);
    return st;
}

static pgcl_status sqlite_exec(sqlite3 *db, const char *what, const char *sql, char *err, int cap) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return PGCL_OK;
    pgcl_errorf(err, cap, "%s: %s", what, msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return PGCL_ERR_DB;
}

/* The archive's one fleet_archive row. */
static pgcl_status write_meta(sqlite3 *db, const char *horizon, const pgcl_pg_archive_cut *cut,
                              const pgcl_fleet_checkpoint *cp, char *err, int cap) {
    json_t *doc = pgcl_fleet_checkpoint_to_json(cp);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    sqlite3_stmt *s = NULL;
    pgcl_status st = PGCL_ERR_DB;
    if (!text) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    if (sqlite3_prepare_v2(db, INSERT_META_SQL, -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, PGCL_PG_ARCHIVE_FORMAT, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, horizon, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
        for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
            sqlite3_bind_int64(s, 4 + t, cut->previous[t]);
            sqlite3_bind_int64(s, 8 + t, cut->through[t]);
        }
        if (sqlite3_step(s) == SQLITE_DONE) st = PGCL_OK;
    }
    if (st != PGCL_OK) pgcl_errorf(err, cap, "fleet_archive: %s", sqlite3_errmsg(db));
    sqlite3_finalize(s);
    free(text);
    return st;
}

/* Step 3: the archive at path (new), in one snapshot on conn; counts[t]: the event rows it holds. */
static pgcl_status export_archive(PGconn *conn, const char *path, const char *horizon, const pgcl_pg_archive_cut *cut,
                                  const pgcl_fleet_checkpoint *cp, int64_t counts[PGCL_CHAIN_TABLES], char *err,
                                  int cap) {
    sqlite3 *db = NULL;
    if (access(path, F_OK) == 0) {
        pgcl_errorf(err, cap, "%s exists: the archive is always a new file (name another with --out)", path);
        return PGCL_ERR_INVALID;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot create the archive: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return PGCL_ERR_IO;
    }
    pgcl_status st = PGCL_OK;
    if (chmod(path, 0600) != 0) { /* decisions, inputs: personal data, like the live database */
        pgcl_errorf(err, cap, "%s: cannot restrict the archive to its owner (chmod 600)", path);
        st = PGCL_ERR_IO;
    }
    for (size_t i = 0; st == PGCL_OK && i < sizeof ARCHIVE_SCHEMA_SQL / sizeof ARCHIVE_SCHEMA_SQL[0]; i++)
        st = sqlite_exec(db, path, ARCHIVE_SCHEMA_SQL[i], err, cap);
    if (st == PGCL_OK) st = sqlite_exec(db, path, "BEGIN", err, cap);
    if (st == PGCL_OK)
        st = pgcl_pg_exec(conn, "archive snapshot", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err,
                          cap);
    bool in_snapshot = st == PGCL_OK;
    for (int t = 0; st == PGCL_OK && t < PGCL_CHAIN_TABLES; t++) {
        char a[24], b[24];
        int_text(cut->previous[t], a);
        int_text(cut->through[t], b);
        st = copy_rows(conn, db, pgcl_chain_tables[t].name, COPY_ROWS_SQL[t], a, b, INSERT_ROWS_SQL[t], &counts[t], err,
                       cap);
        if (st == PGCL_OK && t == 0)
            st = copy_rows(conn, db, "decision_inputs", COPY_INPUTS_SQL, a, b, INSERT_INPUTS_SQL, NULL, err, cap);
        if (st == PGCL_OK && counts[t] != cut->through[t] - cut->previous[t]) {
            pgcl_errorf(err, cap, "%s: %lld rows in (%lld, %lld], expected one per seq", pgcl_chain_tables[t].name,
                        (long long)counts[t], (long long)cut->previous[t], (long long)cut->through[t]);
            st = PGCL_ERR_MISMATCH;
        }
    }
    for (int i = 0; st == PGCL_OK && i < cp->n_heads; i++) {
        char head[24];
        int_text(cp->heads[i].head_seq, head);
        for (int k = 0; st == PGCL_OK && k < CHAIN_COPIES; k++)
            st = copy_rows(conn, db, CHAIN_COPY_TABLE[k], COPY_CHAIN_SQL[k], cp->heads[i].writer_id, head,
                           INSERT_CHAIN_SQL[k], NULL, err, cap);
    }
    if (in_snapshot) pgcl_pg_exec(conn, "archive snapshot", "COMMIT", 0, NULL, NULL, 0);
    if (st == PGCL_OK) st = write_meta(db, horizon, cut, cp, err, cap);
    if (st == PGCL_OK) st = sqlite_exec(db, path, "COMMIT", err, cap);
    sqlite3_close(db);
    return st;
}

/* ---- step 4: pruning ---- */

/* One archiver at a time (a second one waits, then finds its counts changed); plain reads (verify,
 * the routes) are not blocked, nor are the writers, whose new rows lie above every bound. */
static const char LOCK_CUTS_SQL[] = "LOCK TABLE audit_cuts IN EXCLUSIVE MODE";
#define CONTESTED_SINCE_SQL                                                                                            \
    "SELECT min(d.seq) FROM decisions AS d JOIN contests AS c ON c.decision_id = d.decision_id WHERE d.seq <= $1"      \
    " AND (c.seq > $2 OR NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id AND"             \
    " r.seq <= $3))"
static const char *const COUNT_LIVE_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT count(*) FROM decisions WHERE seq <= $1", "SELECT count(*) FROM admin_events WHERE seq <= $1",
    "SELECT count(*) FROM contests WHERE seq <= $1", "SELECT count(*) FROM resolutions WHERE seq <= $1"};
static const char INSERT_CUT_SQL[] =
    "INSERT INTO audit_cuts (decisions_through, admin_events_through, contests_through, resolutions_through,"
    " rows_archived, archived_before, created_at, statement, public_key, signature, archive_sha256, archive_name)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING seq";
/* In dependency order (foreign keys), each bound to PRUNE_TABLE's maximum. */
static const char *const PRUNE_SQL[] = {"DELETE FROM decision_inputs WHERE decision_seq <= $1",
                                        "DELETE FROM resolutions WHERE seq <= $1",
                                        "DELETE FROM contests WHERE seq <= $1", "DELETE FROM decisions WHERE seq <= $1",
                                        "DELETE FROM admin_events WHERE seq <= $1"};
static const int PRUNE_TABLE[] = {0, 3, 2, 0, 1};
static const bool PRUNE_COUNTED[] = {false, true, true, true, true};

static pgcl_status prune_in_transaction(PGconn *conn, const char *horizon, const char *archive_path,
                                        const int64_t counts[PGCL_CHAIN_TABLES], pgcl_pg_archive_result *out, char *err,
                                        int cap) {
    const pgcl_pg_archive_cut *cut = &out->cut;
    char th[PGCL_CHAIN_TABLES][24];
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        int_text(cut->through[t], th[t]);
    pgcl_status st = pgcl_pg_exec(conn, "audit_cuts", LOCK_CUTS_SQL, 0, NULL, err, cap);
    if (st != PGCL_OK) return st;
    int64_t kept = 0;
    bool found = false;
    const char *contested[] = {th[0], th[2], th[3]};
    if ((st = pgcl_pg_query_int(conn, "contests", CONTESTED_SINCE_SQL, 3, contested, &kept, &found, err, cap)) !=
        PGCL_OK)
        return st;
    if (found) {
        pgcl_errorf(err, cap, "decisions row %lld was contested while archiving: run the archive again",
                    (long long)kept);
        return PGCL_ERR_BUSY;
    }
    int64_t live[PGCL_CHAIN_TABLES] = {0};
    out->rows_archived = 0;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        const char *v[] = {th[t]};
        if ((st = pgcl_pg_query_int(conn, pgcl_chain_tables[t].name, COUNT_LIVE_SQL[t], 1, v, &live[t], NULL, err,
                                    cap)) != PGCL_OK)
            return st;
        if (live[t] != counts[t]) {
            pgcl_errorf(err, cap,
                        "%s: %lld live rows at or below %lld, but the archive holds %lld (another archive cut "
                        "meanwhile? run it again)",
                        pgcl_chain_tables[t].name, (long long)live[t], (long long)cut->through[t],
                        (long long)counts[t]);
            return PGCL_ERR_MISMATCH;
        }
        out->rows_archived += live[t];
    }
    size_t len = 0;
    char *statement = pgcl_fleet_checkpoint_statement(&out->checkpoint, &len);
    if (!statement) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    char rows[24];
    int_text(out->rows_archived, rows);
    const char *values[] = {th[0],
                            th[1],
                            th[2],
                            th[3],
                            rows,
                            horizon,
                            out->checkpoint.created_at,
                            statement,
                            out->checkpoint.public_key,
                            out->checkpoint.signature,
                            out->archive_sha256,
                            archive_path};
    PGresult *res = pgcl_pg_query(conn, "audit_cuts", INSERT_CUT_SQL, 12, values, &st, err, cap);
    free(statement);
    if (!res) return st;
    out->cut_seq = pgcl_pg_int(res, 0, 0);
    PQclear(res);
    for (size_t i = 0; i < sizeof PRUNE_SQL / sizeof PRUNE_SQL[0]; i++) {
        int t = PRUNE_TABLE[i];
        const char *v[] = {th[t]};
        res = pgcl_pg_query(conn, "pruning", PRUNE_SQL[i], 1, v, &st, err, cap);
        if (!res) return st;
        long long deleted = atoll(PQcmdTuples(res));
        PQclear(res);
        if (PRUNE_COUNTED[i] && deleted != live[t]) { /* every row counted above, and nothing else */
            pgcl_errorf(err, cap, "pruning %s deleted %lld rows, expected %lld", pgcl_chain_tables[t].name, deleted,
                        (long long)live[t]);
            return PGCL_ERR_MISMATCH;
        }
    }
    return PGCL_OK;
}

/* Step 4: one transaction; rolled back on any failure. */
static pgcl_status prune_live(PGconn *conn, const char *horizon, const char *archive_path,
                              const int64_t counts[PGCL_CHAIN_TABLES], pgcl_pg_archive_result *out, char *err,
                              int cap) {
    pgcl_status st = pgcl_pg_exec(conn, "pruning", "BEGIN", 0, NULL, err, cap);
    if (st != PGCL_OK) return st;
    st = prune_in_transaction(conn, horizon, archive_path, counts, out, err, cap);
    if (st == PGCL_OK) return pgcl_pg_exec(conn, "pruning", "COMMIT", 0, NULL, err, cap);
    pgcl_pg_exec(conn, "pruning", "ROLLBACK", 0, NULL, NULL, 0);
    return st;
}

/* ---- the run ---- */

void pgcl_pg_archive_result_release(pgcl_pg_archive_result *r) {
    if (r) pgcl_fleet_checkpoint_release(&r->checkpoint);
}

pgcl_status pgcl_pg_archive_run(const char *uri, const char *horizon, int contest_window_days, int64_t max_decisions,
                                const char *key_path, const char *archive_path, const char *checkpoint_dir,
                                pgcl_pg_archive_result *out, char *err, int cap) {
    char sub[ERR_CAP], dir[PGCL_CHECKPOINT_PATH_MAX], decision_horizon[PGCL_QTIME_LEN + 1];
    memset(out, 0, sizeof *out);
    if (access(archive_path, F_OK) == 0) { /* before anything is signed or written */
        pgcl_errorf(err, cap, "%s exists: the archive is always a new file (name another with --out)", archive_path);
        return PGCL_ERR_INVALID;
    }
    snprintf(decision_horizon, sizeof decision_horizon, "%s", horizon);
    if (contest_window_days > 0) {
        char window_start[PGCL_QTIME_LEN + 1];
        pgcl_time_format(pgcl_time_now_us() - (int64_t)contest_window_days * 86400 * 1000000, window_start);
        if (strcmp(window_start, decision_horizon) < 0) memcpy(decision_horizon, window_start, sizeof window_start);
    }
    PGconn *conn = pgcl_pg_connect(uri, err, cap);
    if (!conn) return PGCL_ERR_DB;
    /* 1. the plan, in one snapshot */
    pgcl_status st = pgcl_pg_exec(conn, "plan", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err, cap);
    if (st != PGCL_OK) goto done;
    st = plan_cut(conn, horizon, decision_horizon, contest_window_days, max_decisions, &out->cut, err, cap);
    pgcl_pg_exec(conn, "plan", "COMMIT", 0, NULL, NULL, 0);
    if (st != PGCL_OK) goto done;
    /* 2. the fleet checkpoint: every head covers the planned rows (committed before it) */
    if (!checkpoint_dir) {
        pgcl_path_directory(archive_path, dir, sizeof dir);
        checkpoint_dir = dir;
    }
    if ((st = pgcl_pg_checkpoint_create(conn, key_path, NULL, checkpoint_dir, &out->checkpoint, err, cap)) != PGCL_OK)
        goto done;
    /* 3. the archive, verified offline against that checkpoint */
    int64_t counts[PGCL_CHAIN_TABLES] = {0};
    if ((st = export_archive(conn, archive_path, horizon, &out->cut, &out->checkpoint, counts, sub, sizeof sub)) !=
        PGCL_OK) {
        pgcl_errorf(err, cap, "writing the archive %s: %s", archive_path, sub);
        goto done;
    }
    pgcl_chain_report rep;
    const char *files[] = {out->checkpoint.file};
    st = pgcl_pg_archive_verify(archive_path, files, 1, out->checkpoint.public_key, &rep, sub, sizeof sub);
    if (st == PGCL_OK && !rep.intact) {
        pgcl_errorf(err, cap, "the archive %s does not verify against %s: %s", archive_path, out->checkpoint.file,
                    rep.reason);
        st = PGCL_ERR_MISMATCH;
    } else if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "verifying the archive %s: %s", archive_path, sub);
    }
    pgcl_chain_report_release(&rep);
    if (st != PGCL_OK) goto done;
    if ((st = pgcl_archive_file_sha256(archive_path, out->archive_sha256, err, cap)) != PGCL_OK) goto done;
    /* 4. pruning */
    int64_t t0 = pgcl_monotonic_us();
    st = prune_live(conn, horizon, archive_path, counts, out, sub, sizeof sub);
    out->prune_us = pgcl_monotonic_us() - t0;
    if (st != PGCL_OK)
        pgcl_errorf(err, cap,
                    "the archive %s was written and verified, but pruning the live database failed (nothing "
                    "was deleted): %s",
                    archive_path, sub);
done:
    PQfinish(conn);
    return st;
}
