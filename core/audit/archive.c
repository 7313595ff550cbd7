/* Archival past a horizon (archive.h; docs/audit.md, "Archival past a horizon"). */
#include "archive.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "clock.h"
#include "db.h"
#include "files.h"
#include "time_cursor.h"

#define ERR_CAP 512

/* The time of row ?1 of each table, pgcl_chain_tables order (rows of one commit share it). */
static const char *const ROW_TIME_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT created_at FROM decisions WHERE seq = ?1", "SELECT created_at FROM admin_events WHERE seq = ?1",
    "SELECT filed_at FROM contests WHERE seq = ?1", "SELECT resolved_at FROM resolutions WHERE seq = ?1"};

/* The rows of each table older than the chain (legacy rows) end below its first chained row. */
static const char *const LEGACY_MAX_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT max(seq) FROM decisions WHERE seq < (SELECT min(x) FROM (SELECT min(row_seq) AS x FROM audit_chain"
    " WHERE kind = 'decisions' UNION ALL SELECT min(first_row_seq) FROM audit_chain_runs WHERE kind = 'decisions'))",
    "SELECT max(seq) FROM admin_events WHERE seq < (SELECT min(x) FROM (SELECT min(row_seq) AS x FROM audit_chain"
    " WHERE kind = 'admin_events' UNION ALL SELECT min(first_row_seq) FROM audit_chain_runs WHERE kind ="
    " 'admin_events'))",
    "SELECT max(seq) FROM contests WHERE seq < (SELECT min(x) FROM (SELECT min(row_seq) AS x FROM audit_chain"
    " WHERE kind = 'contests' UNION ALL SELECT min(first_row_seq) FROM audit_chain_runs WHERE kind = 'contests'))",
    "SELECT max(seq) FROM resolutions WHERE seq < (SELECT min(x) FROM (SELECT min(row_seq) AS x FROM audit_chain"
    " WHERE kind = 'resolutions' UNION ALL SELECT min(first_row_seq) FROM audit_chain_runs WHERE kind ="
    " 'resolutions'))"};

/* The largest row of table ?2 chained by entries 2..?1. */
#define CHAINED_MAX_SQL                                                                                          \
    "SELECT max(m) FROM (SELECT max(row_seq) AS m FROM audit_chain WHERE kind = ?2 AND seq > 1 AND seq <= ?1" \
    " UNION ALL SELECT max(first_row_seq + n - 1) FROM audit_chain_runs WHERE kind = ?2 AND entry_seq <= ?1)"

/* The first decision at or below ?1 that must stay: one with a contest chained after the cut
 * (contests seq > ?2) or not resolved by a resolution at or below the cut (resolutions seq <= ?3). */
#define CONTESTED_DECISION_SQL                                                                               \
    "SELECT min(d.seq) FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id WHERE d.seq <= ?1" \
    " AND (c.seq > ?2 OR NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id AND"     \
    " r.seq <= ?3))"

/* The contest that keeps decisions row ?1 at a cut that chains contests up to ?2 and resolutions
 * up to ?3 (CONTESTED_DECISION_SQL's rule), an open one first. */
#define BLOCKER_SQL                                                                                                    \
    "SELECT d.decision_id, c.contest_id, c.filed_at, coalesce(r.resolved_at, '') FROM decisions AS d JOIN"             \
    " contests AS c ON c.decision_id = d.decision_id LEFT JOIN resolutions AS r ON r.contest_id = c.contest_id"        \
    " WHERE d.seq = ?1 AND (c.seq > ?2 OR r.seq IS NULL OR r.seq > ?3) ORDER BY r.seq IS NOT NULL, c.seq LIMIT 1"

/* The last commit entry in (?1, ?3); the first commit entry after ?1. */
#define LAST_COMMIT_BETWEEN_SQL "SELECT max(seq) FROM audit_chain WHERE kind = 'commit' AND seq > ?1 AND seq < ?3"
#define FIRST_COMMIT_AFTER_SQL "SELECT min(seq) FROM audit_chain WHERE kind = 'commit' AND seq > ?1"

/* The entry that chains decisions row ?1 (a run of a commit entry, or a version-1 entry). */
#define ENTRY_OF_DECISION_SQL                                                                                  \
    "SELECT coalesce((SELECT entry_seq FROM audit_chain_runs WHERE kind = 'decisions' AND first_row_seq <= ?1" \
    " AND ?1 < first_row_seq + n ORDER BY first_row_seq DESC LIMIT 1), (SELECT seq FROM audit_chain WHERE"    \
    " kind = 'decisions' AND row_seq = ?1))"

/* The entries after the previous cut, each with the table and first row of its first leaf. */
#define ENTRIES_AFTER_SQL                                                                                   \
    "SELECT c.seq, c.kind, c.row_seq, u.kind, u.first_row_seq FROM audit_chain AS c LEFT JOIN audit_chain_runs" \
    " AS u ON u.entry_seq = c.seq AND u.first_leaf = 0 WHERE c.seq > ?1 ORDER BY c.seq"

/* ?1 = a, ?2 = a text b (when given), ?3 = c (when the statement has it). */
typedef struct query_args {
    int64_t a;
    const char *b;
    int64_t c;
} query_args;

static int bind_args(sqlite3_stmt *s, void *ctx) {
    const query_args *q = ctx;
    int n = sqlite3_bind_parameter_count(s), rc = SQLITE_OK;
    if (n >= 1) rc = sqlite3_bind_int64(s, 1, q->a);
    if (rc == SQLITE_OK && n >= 2 && q->b) rc = sqlite3_bind_text(s, 2, q->b, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(s) >= 3) rc = sqlite3_bind_int64(s, 3, q->c);
    return rc;
}

/* Runs sql with those parameters; one integer out (*is_null when NULL or no row): pgcl_db_query_int. */
static int query_int(sqlite3 *db, const char *sql, int64_t a, const char *b, int64_t c, int64_t *out, bool *is_null,
                     char *err, int cap) {
    query_args q = {a, b, c};
    bool found = false;
    int rc = pgcl_db_query_int(db, sql, bind_args, &q, out, &found, err, cap);
    if (is_null) *is_null = !found;
    return rc;
}

static pgcl_status db_failed(const char *what, const char *sub, char *err, int cap) {
    pgcl_errorf(err, cap, "%s: %s", what, sub);
    return PGCL_ERR_DB;
}

/* The per-table maxima at entry e: the largest chained row, the legacy rows, and never below the
 * previous cut's. */
static pgcl_status maxima_at(sqlite3 *db, int64_t e, const int64_t previous[PGCL_CHAIN_TABLES],
                             int64_t through[PGCL_CHAIN_TABLES], char *err, int cap) {
    char sub[ERR_CAP];
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        int64_t chained = 0, legacy = 0;
        if (query_int(db, CHAINED_MAX_SQL, e, pgcl_chain_tables[t].name, 0, &chained, NULL, sub, sizeof sub) !=
                SQLITE_OK ||
            query_int(db, LEGACY_MAX_SQL[t], 0, NULL, 0, &legacy, NULL, sub, sizeof sub) != SQLITE_OK)
            return db_failed(pgcl_chain_tables[t].name, sub, err, cap);
        through[t] = chained > legacy ? chained : legacy;
        if (previous[t] > through[t]) through[t] = previous[t];
    }
    return PGCL_OK;
}

/* Whether entry e is a commit entry (encoding 2). */
static pgcl_status is_commit_entry(sqlite3 *db, int64_t e, bool *yes, char *err, int cap) {
    char sub[ERR_CAP];
    int64_t n = 0;
    if (query_int(db, "SELECT count(*) FROM audit_chain WHERE seq = ?1 AND kind = 'commit'", e, NULL, 0, &n, NULL, sub,
                  sizeof sub) != SQLITE_OK)
        return db_failed("audit_chain", sub, err, cap);
    *yes = n == 1;
    return PGCL_OK;
}

/* Step 1a: the last entry after `after` whose rows are all older than the horizon, walking entries
 * in seq order and stopping at the first that is not (the writer stamps commits in order; a row with
 * an older date written behind its back cannot pull newer ones in). *last 0: none. */
static pgcl_status last_older_entry(sqlite3 *db, const char *horizon, int64_t after, int64_t *last, char *err,
                                    int cap) {
    sqlite3_stmt *walk = NULL, *time_of[PGCL_CHAIN_TABLES] = {0};
    pgcl_status st = PGCL_ERR_DB;
    *last = 0;
    if (sqlite3_prepare_v2(db, ENTRIES_AFTER_SQL, -1, &walk, NULL) != SQLITE_OK) goto db_error;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        if (sqlite3_prepare_v2(db, ROW_TIME_SQL[t], -1, &time_of[t], NULL) != SQLITE_OK) goto db_error;
    sqlite3_bind_int64(walk, 1, after);
    int rc;
    while ((rc = sqlite3_step(walk)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(walk, 0);
        const char *kind = (const char *)sqlite3_column_text(walk, 1);
        if (kind && strcmp(kind, "genesis") == 0) {
            *last = seq;
            continue;
        }
        bool commit = kind && strcmp(kind, PGCL_CHAIN_COMMIT_KIND) == 0;
        const char *table = commit ? (const char *)sqlite3_column_text(walk, 3) : kind;
        int64_t row = sqlite3_column_int64(walk, commit ? 4 : 2);
        int t = table ? pgcl_chain_table_index(table, strlen(table)) : -1;
        if (t < 0) break; /* malformed: verify reports it; nothing past it is archived */
        sqlite3_stmt *s = time_of[t];
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, row);
        int trc = sqlite3_step(s);
        bool older = trc == SQLITE_ROW && sqlite3_column_text(s, 0) &&
                     strcmp((const char *)sqlite3_column_text(s, 0), horizon) < 0;
        if (trc != SQLITE_ROW && trc != SQLITE_DONE) goto db_error;
        if (!older) break;
        *last = seq;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto db_error;
    st = PGCL_OK;
    goto done;
db_error:
    pgcl_errorf(err, cap, "reading the chain: %s", sqlite3_errmsg(db));
done:
    sqlite3_finalize(walk);
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_finalize(time_of[t]);
    return st;
}

static const char *const TABLE_MAX_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT max(seq) FROM decisions", "SELECT max(seq) FROM admin_events", "SELECT max(seq) FROM contests",
    "SELECT max(seq) FROM resolutions"};

/* Step 1c: through[] from chained[] (archive.h): each table keeps its last row, a kept resolution
 * keeps its contest, a kept contest its decision. */
static pgcl_status rows_to_delete(sqlite3 *db, pgcl_archive_cut *cut, const int64_t previous[PGCL_CHAIN_TABLES],
                                  char *err, int cap) {
    char sub[ERR_CAP];
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        int64_t last = 0;
        bool empty = true;
        if (query_int(db, TABLE_MAX_SQL[t], 0, NULL, 0, &last, &empty, sub, sizeof sub) != SQLITE_OK)
            return db_failed(pgcl_chain_tables[t].name, sub, err, cap);
        cut->through[t] = cut->chained[t];
        if (!empty && last - 1 < cut->through[t]) cut->through[t] = last - 1;
    }
    int64_t first_kept = 0;
    bool none = true;
    if (query_int(db,
                  "SELECT min(c.seq) FROM resolutions AS r JOIN contests AS c ON c.contest_id = r.contest_id"
                  " WHERE r.seq > ?1",
                  cut->through[3], NULL, 0, &first_kept, &none, sub, sizeof sub) != SQLITE_OK)
        return db_failed("resolutions", sub, err, cap);
    if (!none && first_kept - 1 < cut->through[2]) cut->through[2] = first_kept - 1;
    if (query_int(db,
                  "SELECT min(d.seq) FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id"
                  " WHERE c.seq > ?1",
                  cut->through[2], NULL, 0, &first_kept, &none, sub, sizeof sub) != SQLITE_OK)
        return db_failed("contests", sub, err, cap);
    if (!none && first_kept - 1 < cut->through[0]) cut->through[0] = first_kept - 1;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        if (cut->through[t] < previous[t]) {
            pgcl_errorf(err, cap,
                        "the cut at entry %lld would keep %s rows the previous cut archived (rows below "
                        "the previous cut are back in the database: run 'pgcld audit verify' on it)",
                        (long long)cut->entry_seq, pgcl_chain_tables[t].name);
            return PGCL_ERR_UNSUPPORTED;
        }
    return PGCL_OK;
}

/* Step 1b: e lowered so that the cut archives at most max_decisions decisions after the previous
 * cut's: the last commit entry before the one that chains the first decision over the bound; that
 * entry itself, taken whole, when no commit entry after the previous cut comes before it (it is the
 * first commit entry, after the encoding-1 entries of a chain begun before the first `serve`). */
static pgcl_status bound_decisions(sqlite3 *db, int64_t max_decisions, int64_t previous_entry,
                                   int64_t previous_through, int64_t *e, char *err, int cap) {
    char sub[ERR_CAP];
    int64_t chained = 0, over_entry = 0;
    bool is_null = true;
    if (max_decisions <= 0) return PGCL_OK;
    if (query_int(db, CHAINED_MAX_SQL, *e, "decisions", 0, &chained, NULL, sub, sizeof sub) != SQLITE_OK)
        return db_failed("audit_chain_runs", sub, err, cap);
    if (chained - previous_through <= max_decisions) return PGCL_OK;
    if (query_int(db, ENTRY_OF_DECISION_SQL, previous_through + max_decisions + 1, NULL, 0, &over_entry, &is_null,
                  sub, sizeof sub) != SQLITE_OK)
        return db_failed("audit_chain_runs", sub, err, cap);
    if (is_null) return PGCL_OK; /* a gap in the decisions: keep the horizon's cut */
    int64_t before = 0;
    if (query_int(db, LAST_COMMIT_BETWEEN_SQL, previous_entry, NULL, over_entry, &before, &is_null, sub, sizeof sub) !=
        SQLITE_OK)
        return db_failed("audit_chain", sub, err, cap);
    *e = is_null ? over_entry : before;
    return PGCL_OK;
}

/* ---- refusals that name what the operator can change ---- */

/* "decision ID (decisions row N) has an open contest, C (filed T)" or "... a contest, C (filed T,
 * resolved R)". */
static void describe_blocker(const pgcl_archive_blocker *b, char *out, size_t cap) {
    if (!b->resolved_at[0])
        snprintf(out, cap, "decision %s (decisions row %lld) has an open contest, %s (filed %s)", b->decision_id,
                 (long long)b->decision_seq, b->contest_id, b->filed_at);
    else
        snprintf(out, cap, "decision %s (decisions row %lld) has a contest, %s (filed %s, resolved %s)", b->decision_id,
                 (long long)b->decision_seq, b->contest_id, b->filed_at, b->resolved_at);
}

/* What lets the cut pass b's contest. */
static void remedy(const pgcl_archive_blocker *b, const char *horizon, bool bounded, char *out, size_t cap) {
    if (!b->resolved_at[0])
        snprintf(out, cap, "resolving the contest (POST /v1/contests/%s/resolution) allows archival", b->contest_id);
    else if (strcmp(b->resolved_at, horizon) >= 0 || strcmp(b->filed_at, horizon) >= 0)
        snprintf(out, cap, "the contest was resolved after the horizon %s: a horizon after %s allows archival", horizon,
                 b->resolved_at);
    else if (bounded)
        snprintf(out, cap,
                 "the bound on the decisions of one run stops the cut before the contest's resolution: a "
                 "larger --max-decisions (0: no bound) allows archival");
    else
        snprintf(out, cap, "the cut cannot reach the contest's resolution");
}

void pgcl_archive_contest_refusal(const pgcl_archive_blocker *b, const pgcl_archive_blocker *root, const char *horizon,
                                  bool bounded, char *err, int cap) {
    char what[512], fix[384];
    describe_blocker(b, what, sizeof what);
    if (root && root->decision_seq == b->decision_seq) root = NULL;
    if (!b->resolved_at[0] || !root) {
        remedy(b, horizon, bounded, fix, sizeof fix);
        pgcl_errorf(err, cap,
                    "nothing to archive: %s; a decision stays in the live database, and every decision after it, "
                    "while a contest of it is open or chained after the cut: %s",
                    what, fix);
        return;
    }
    char first[512];
    describe_blocker(root, first, sizeof first);
    remedy(root, horizon, bounded, fix, sizeof fix);
    pgcl_errorf(err, cap, "nothing to archive: %s; it stays, and every decision after it, because %s: %s", what, first,
                fix);
}

/* The contest that keeps decisions row seq at the cut (chained[] at its entry); *found false when
 * none (the caller's query and this one disagree only if the database changed under the plan). */
static pgcl_status blocker_of(sqlite3 *db, int64_t seq, const int64_t chained[PGCL_CHAIN_TABLES],
                              pgcl_archive_blocker *b, bool *found, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    memset(b, 0, sizeof *b);
    *found = false;
    if (sqlite3_prepare_v2(db, BLOCKER_SQL, -1, &s, NULL) != SQLITE_OK)
        return db_failed("contests", sqlite3_errmsg(db), err, cap);
    sqlite3_bind_int64(s, 1, seq);
    sqlite3_bind_int64(s, 2, chained[2]);
    sqlite3_bind_int64(s, 3, chained[3]);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *found = true;
        b->decision_seq = seq;
        const char *col[4];
        for (int i = 0; i < 4; i++)
            col[i] = (const char *)sqlite3_column_text(s, i);
        snprintf(b->decision_id, sizeof b->decision_id, "%s", col[0] ? col[0] : "");
        snprintf(b->contest_id, sizeof b->contest_id, "%s", col[1] ? col[1] : "");
        snprintf(b->filed_at, sizeof b->filed_at, "%s", col[2] ? col[2] : "");
        snprintf(b->resolved_at, sizeof b->resolved_at, "%s", col[3] ? col[3] : "");
    }
    pgcl_status st =
        rc == SQLITE_ROW || rc == SQLITE_DONE ? PGCL_OK : db_failed("contests", sqlite3_errmsg(db), err, cap);
    sqlite3_finalize(s);
    return st;
}

/* The refusal of a cut on entry e, an encoding-1 entry, placed there by the horizon or (bounded) by
 * the bound on decisions: what would let it reach a commit entry. */
static pgcl_status refuse_encoding_1(sqlite3 *db, int64_t e, bool bounded, int64_t max_decisions, char *err, int cap) {
    char sub[ERR_CAP];
    int64_t first = 0;
    bool none = true;
    if (query_int(db, FIRST_COMMIT_AFTER_SQL, e, NULL, 0, &first, &none, sub, sizeof sub) != SQLITE_OK)
        return db_failed("audit_chain", sub, err, cap);
    char next[160];
    if (none)
        snprintf(next, sizeof next,
                 "the chain has no commit entry after it yet (pgcld serve writes them with "
                 "--chain-encoding 2, the default)");
    else if (bounded)
        snprintf(next, sizeof next, "a larger --max-decisions (0: no bound) lets it reach commit entry %lld",
                 (long long)first);
    else
        snprintf(next, sizeof next,
                 "the first commit entry after it is entry %lld: a horizon after its rows allows "
                 "archival",
                 (long long)first);
    if (bounded)
        pgcl_errorf(err, cap,
                    "the bound of %lld decisions per run puts the cut on entry %lld, an encoding-1 entry (one "
                    "per event): archival cuts only at commit entries (encoding 2); %s",
                    (long long)max_decisions, (long long)e, next);
    else
        pgcl_errorf(err, cap,
                    "the cut would fall on entry %lld, an encoding-1 entry (one per event, as the chain "
                    "is written before its first commit entry): archival cuts only at commit entries "
                    "(encoding 2); %s",
                    (long long)e, next);
    return PGCL_ERR_UNSUPPORTED;
}

pgcl_status pgcl_archive_plan(sqlite3 *db, const char *horizon, int64_t max_decisions, pgcl_archive_cut *cut,
                              char *err, int cap) {
    char sub[ERR_CAP];
    memset(cut, 0, sizeof *cut);
    int64_t previous[PGCL_CHAIN_TABLES] = {0}, has_cuts = 0;
    if (query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_cuts'", 0, NULL, 0,
                  &has_cuts, NULL, sub, sizeof sub) != SQLITE_OK)
        return db_failed("sqlite_schema", sub, err, cap);
    if (has_cuts != 1) {
        pgcl_errorf(err, cap,
                    "the database has no audit_cuts table: its schema is older than migration 0010 (run "
                    "'pgcld migrate --db FILE', or 'pgcld serve' once, to upgrade it)");
        return PGCL_ERR_FORMAT;
    }
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT entry_seq, decisions_through, admin_events_through, contests_through,"
                           " resolutions_through FROM audit_cuts ORDER BY seq DESC LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK)
        return db_failed("audit_cuts", sqlite3_errmsg(db), err, cap);
    if (sqlite3_step(s) == SQLITE_ROW) {
        cut->previous_entry_seq = sqlite3_column_int64(s, 0);
        for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
            previous[t] = sqlite3_column_int64(s, 1 + t);
    }
    sqlite3_finalize(s);

    int64_t e = 0;
    pgcl_status st = last_older_entry(db, horizon, cut->previous_entry_seq, &e, err, cap);
    if (st != PGCL_OK) return st;
    if (e <= cut->previous_entry_seq || e < 2) {
        pgcl_errorf(err, cap,
                    "nothing to archive: no entry after %s%lld has all its rows older than %s (a later "
                    "horizon moves the cut)",
                    cut->previous_entry_seq ? "the previous cut at entry " : "entry ",
                    (long long)(cut->previous_entry_seq ? cut->previous_entry_seq : 1), horizon);
        return PGCL_ERR_NOT_FOUND;
    }
    const int64_t horizon_entry = e;
    if ((st = bound_decisions(db, max_decisions, cut->previous_entry_seq, previous[0], &e, err, cap)) != PGCL_OK)
        return st;
    const bool bounded = e < horizon_entry;
    bool commit = false;
    if ((st = is_commit_entry(db, e, &commit, err, cap)) != PGCL_OK) return st;
    if (!commit) return refuse_encoding_1(db, e, bounded, max_decisions, err, cap);
    /* Lower the cut below any decision that must stay for its contests: below the commit entry that
     * chains it, which must be a commit entry after the previous cut. When there is none, the
     * refusal names the contest (the first one met: what lowered the cut, and the last: what stops
     * it), never the horizon, which cannot help. */
    pgcl_archive_blocker first_blocker = {0};
    for (;;) {
        if ((st = maxima_at(db, e, previous, cut->chained, err, cap)) != PGCL_OK) return st;
        int64_t keep = 0, keep_entry = 0;
        bool none = true;
        if (sqlite3_prepare_v2(db, CONTESTED_DECISION_SQL, -1, &s, NULL) != SQLITE_OK)
            return db_failed("contests", sqlite3_errmsg(db), err, cap);
        sqlite3_bind_int64(s, 1, cut->chained[0]);
        sqlite3_bind_int64(s, 2, cut->chained[2]);
        sqlite3_bind_int64(s, 3, cut->chained[3]);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
            none = false;
            keep = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_failed("contests", sqlite3_errmsg(db), err, cap);
        if (none) break;
        pgcl_archive_blocker blocker;
        bool described = false;
        if ((st = blocker_of(db, keep, cut->chained, &blocker, &described, err, cap)) != PGCL_OK) return st;
        if (described && !first_blocker.decision_seq) first_blocker = blocker;
        bool is_null = true;
        if (query_int(db, ENTRY_OF_DECISION_SQL, keep, NULL, 0, &keep_entry, &is_null, sub, sizeof sub) != SQLITE_OK)
            return db_failed("audit_chain_runs", sub, err, cap);
        /* the last commit entry after the previous cut and before the one that chains the contested
         * decision (encoding-1 entries between them stay, after the cut) */
        int64_t below = 0;
        bool no_commit_below = true;
        if (!is_null && query_int(db, LAST_COMMIT_BETWEEN_SQL, cut->previous_entry_seq, NULL, keep_entry, &below,
                                  &no_commit_below, sub, sizeof sub) != SQLITE_OK)
            return db_failed("audit_chain", sub, err, cap);
        if (no_commit_below || below < 2) { /* a cut is entry 2 or later, as the horizon's */
            if (!described) {
                pgcl_errorf(err, cap,
                            "nothing to archive: decisions row %lld has a contest that stays, and no commit "
                            "entry before it can be the cut",
                            (long long)keep);
                return PGCL_ERR_NOT_FOUND;
            }
            pgcl_archive_contest_refusal(&blocker, first_blocker.decision_seq ? &first_blocker : NULL, horizon, bounded,
                                         err, cap);
            return PGCL_ERR_NOT_FOUND;
        }
        e = below;
    }
    cut->entry_seq = e;
    if ((st = rows_to_delete(db, cut, previous, err, cap)) != PGCL_OK) return st;
    if (sqlite3_prepare_v2(db, "SELECT hash FROM audit_chain WHERE seq = ?1", -1, &s, NULL) != SQLITE_OK)
        return db_failed("audit_chain", sqlite3_errmsg(db), err, cap);
    sqlite3_bind_int64(s, 1, e);
    bool found = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_bytes(s, 0) == PGCL_CHAIN_HEX_LEN;
    if (found) memcpy(cut->entry_hash, sqlite3_column_text(s, 0), PGCL_CHAIN_HEX_LEN + 1);
    sqlite3_finalize(s);
    if (!found) {
        pgcl_errorf(err, cap, "entry %lld has no well-formed hash (run 'pgcld audit verify' on the database)",
                    (long long)e);
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

/* ---- step 3: the archive database ---- */

/* Dropped in the copy only, so that the rows after the cut can be deleted there; recreated after. */
static const char *const ARCHIVE_UNLOCK_SQL[] = {
    "DROP TRIGGER IF EXISTS decisions_append_only_d",       "DROP TRIGGER IF EXISTS admin_events_append_only_d",
    "DROP TRIGGER IF EXISTS contests_append_only_d",        "DROP TRIGGER IF EXISTS resolutions_append_only_d",
    "DROP TRIGGER IF EXISTS audit_chain_append_only_d",     "DROP TRIGGER IF EXISTS audit_chain_runs_append_only_d",
    "DROP TRIGGER IF EXISTS audit_log_nodes_append_only_d", "DROP TRIGGER IF EXISTS audit_checkpoints_append_only_d"};

/* The same triggers as migrations 0003, 0007, 0009 and 0010 make them. */
static const char *const ARCHIVE_RELOCK_SQL[] = {
    "CREATE TRIGGER decisions_append_only_d BEFORE DELETE ON decisions"
    " WHEN OLD.seq > coalesce((SELECT max(decisions_through) FROM audit_cuts), 0)"
    " BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END",
    "CREATE TRIGGER admin_events_append_only_d BEFORE DELETE ON admin_events"
    " WHEN OLD.seq > coalesce((SELECT max(admin_events_through) FROM audit_cuts), 0)"
    " BEGIN SELECT RAISE(ABORT, 'admin_events are append-only'); END",
    "CREATE TRIGGER contests_append_only_d BEFORE DELETE ON contests"
    " WHEN OLD.seq > coalesce((SELECT max(contests_through) FROM audit_cuts), 0)"
    " BEGIN SELECT RAISE(ABORT, 'contests are append-only'); END",
    "CREATE TRIGGER resolutions_append_only_d BEFORE DELETE ON resolutions"
    " WHEN OLD.seq > coalesce((SELECT max(resolutions_through) FROM audit_cuts), 0)"
    " BEGIN SELECT RAISE(ABORT, 'resolutions are append-only'); END",
    "CREATE TRIGGER audit_chain_append_only_d BEFORE DELETE ON audit_chain"
    " BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END",
    "CREATE TRIGGER audit_chain_runs_append_only_d BEFORE DELETE ON audit_chain_runs"
    " BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END",
    "CREATE TRIGGER audit_log_nodes_append_only_d BEFORE DELETE ON audit_log_nodes"
    " BEGIN SELECT RAISE(ABORT, 'the audit log tree is append-only'); END",
    "CREATE TRIGGER audit_checkpoints_append_only_d BEFORE DELETE ON audit_checkpoints"
    " BEGIN SELECT RAISE(ABORT, 'audit checkpoints are append-only'); END"};

#define N_ARCHIVE_TRIGGERS 8

/* Everything after the cut, and the secrets, out of the copy. ?1 = E, ?2..?5 = the maxima. */
static const char *const ARCHIVE_TRIM_SQL[] = {
    "DELETE FROM audit_chain WHERE seq > ?1",
    "DELETE FROM audit_chain_runs WHERE entry_seq > ?1",
    "DELETE FROM audit_log_nodes WHERE level > 62 OR ((idx + 1) << level) > ?1",
    "DELETE FROM audit_checkpoints WHERE head_seq > ?1",
    "DELETE FROM resolutions WHERE seq > ?5",
    "DELETE FROM contests WHERE seq > ?4",
    "DELETE FROM decision_inputs WHERE decision_seq > ?2",
    "DELETE FROM decisions WHERE seq > ?2",
    "DELETE FROM admin_events WHERE seq > ?3",
    "DELETE FROM api_keys",
    "DELETE FROM idempotency_keys",
    "DELETE FROM shadow_decisions",
};

typedef struct trim_ctx {
    const pgcl_archive_cut *cut;
} trim_ctx;

static int trim_copy(sqlite3 *db, void *ctx, char *err, int cap) {
    const pgcl_archive_cut *cut = ((const trim_ctx *)ctx)->cut;
    int rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && i < N_ARCHIVE_TRIGGERS; i++)
        rc = pgcl_db_exec(db, ARCHIVE_UNLOCK_SQL[i], err, cap);
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof ARCHIVE_TRIM_SQL / sizeof ARCHIVE_TRIM_SQL[0]; i++) {
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db, ARCHIVE_TRIM_SQL[i], -1, &s, NULL);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
            break;
        }
        int n = sqlite3_bind_parameter_count(s);
        if (n >= 1) sqlite3_bind_int64(s, 1, cut->entry_seq);
        for (int t = 0; t < PGCL_CHAIN_TABLES && t + 2 <= n; t++)
            sqlite3_bind_int64(s, t + 2, cut->chained[t]);
        rc = sqlite3_step(s);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        if (rc != SQLITE_OK) pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
        sqlite3_finalize(s);
    }
    for (int i = 0; rc == SQLITE_OK && i < N_ARCHIVE_TRIGGERS; i++)
        rc = pgcl_db_exec(db, ARCHIVE_RELOCK_SQL[i], err, cap);
    return rc;
}

pgcl_status pgcl_archive_file_sha256(const char *path, char out[PGCL_CHAIN_HEX_LEN + 1], char *err, int cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        pgcl_errorf(err, cap, "%s: cannot read the archive", path);
        return PGCL_ERR_IO;
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    unsigned char buf[65536], digest[crypto_hash_sha256_BYTES];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        crypto_hash_sha256_update(&h, buf, n);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) {
        pgcl_errorf(err, cap, "%s: cannot read the archive", path);
        return PGCL_ERR_IO;
    }
    crypto_hash_sha256_final(&h, digest);
    sodium_bin2hex(out, PGCL_CHAIN_HEX_LEN + 1, digest, sizeof digest);
    return PGCL_OK;
}

static sqlite3 *open_writer(const char *path, char *err, int cap) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot open the database: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    char sub[ERR_CAP];
    if (pgcl_db_exec(db, "PRAGMA foreign_keys=ON", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* Step 3: the archive file, trimmed to the cut and verified against the checkpoint. */
static pgcl_status export_archive(sqlite3 *live, const char *archive_path, const pgcl_archive_cut *cut,
                                  const pgcl_checkpoint *cp, char *err, int cap) {
    char sub[ERR_CAP];
    if (access(archive_path, F_OK) == 0) {
        pgcl_errorf(err, cap, "%s exists: the archive is always a new file (name another with --out)", archive_path);
        return PGCL_ERR_INVALID;
    }
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(live, "VACUUM INTO ?1", -1, &s, NULL) != SQLITE_OK)
        return db_failed("VACUUM INTO", sqlite3_errmsg(live), err, cap);
    sqlite3_bind_text(s, 1, archive_path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "copying the database to %s: %s", archive_path, sqlite3_errmsg(live));
        return PGCL_ERR_IO;
    }
    if (chmod(archive_path, 0600) != 0) { /* decisions, inputs: personal data, like the live database */
        pgcl_errorf(err, cap, "%s: cannot restrict the archive to its owner (chmod 600)", archive_path);
        return PGCL_ERR_IO;
    }
    sqlite3 *copy = open_writer(archive_path, err, cap);
    if (!copy) return PGCL_ERR_IO;
    trim_ctx ctx = {.cut = cut};
    rc = pgcl_db_write_transaction(copy, trim_copy, &ctx, sub, sizeof sub);
    if (rc == SQLITE_OK) rc = pgcl_db_exec(copy, "PRAGMA journal_mode=DELETE; VACUUM", sub, sizeof sub);
    sqlite3_close(copy);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: trimming the archive to entry %lld: %s", archive_path, (long long)cut->entry_seq,
                    sub);
        return PGCL_ERR_DB;
    }
    pgcl_chain_report rep;
    const char *files[1] = {cp->file};
    pgcl_status st = pgcl_chain_verify_signed(archive_path, files, 1, cp->public_key, &rep, sub, sizeof sub);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "verifying the archive %s: %s", archive_path, sub);
        return st;
    }
    if (!rep.intact || rep.head_seq != cut->entry_seq || strcmp(rep.head_hash, cut->entry_hash) != 0) {
        pgcl_errorf(err, cap, "the archive %s does not verify to the cut at entry %lld (head %lld): %s", archive_path,
                    (long long)cut->entry_seq, (long long)rep.head_seq, rep.intact ? "another head" : rep.reason);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

/* ---- step 4: pruning ---- */

typedef struct prune_ctx {
    const char *horizon, *archive_path;
    pgcl_archive_result *out;
} prune_ctx;

static const char *const COUNT_BELOW_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT count(*) FROM decisions WHERE seq <= ?1", "SELECT count(*) FROM admin_events WHERE seq <= ?1",
    "SELECT count(*) FROM contests WHERE seq <= ?1", "SELECT count(*) FROM resolutions WHERE seq <= ?1"};

/* In dependency order (foreign keys): a resolution before its contest before its decision; each
 * bound to the maximum of PRUNE_TABLE's table (decision_inputs: the decisions'). */
static const char *const PRUNE_SQL[] = {
    "DELETE FROM decision_inputs WHERE decision_seq <= ?1", "DELETE FROM resolutions WHERE seq <= ?1",
    "DELETE FROM contests WHERE seq <= ?1", "DELETE FROM decisions WHERE seq <= ?1",
    "DELETE FROM admin_events WHERE seq <= ?1"};
static const int PRUNE_TABLE[] = {0, 3, 2, 0, 1};
static const bool PRUNE_COUNTED[] = {false, true, true, true, true}; /* event rows, counted before */

static int prune_live(sqlite3 *db, void *vctx, char *err, int cap) {
    prune_ctx *ctx = vctx;
    pgcl_archive_result *out = ctx->out;
    const pgcl_archive_cut *cut = &out->cut;
    /* The cut still stands in this write transaction: no contest filed since the plan. (The entry
     * cannot change: the chain is append-only and the checkpoint signed its hash.) */
    char sub[ERR_CAP];
    int64_t keep = 0, counts[PGCL_CHAIN_TABLES] = {0};
    bool none = true;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, CONTESTED_DECISION_SQL, -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
        return SQLITE_ERROR;
    }
    sqlite3_bind_int64(s, 1, cut->through[0]);
    sqlite3_bind_int64(s, 2, cut->through[2]);
    sqlite3_bind_int64(s, 3, cut->through[3]);
    int rc = sqlite3_step(s);
    none = !(rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL);
    keep = none ? 0 : sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
        return rc;
    }
    if (!none) {
        pgcl_errorf(err, cap, "decisions row %lld was contested while archiving: run the archive again",
                    (long long)keep);
        return SQLITE_ABORT;
    }
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        if (query_int(db, COUNT_BELOW_SQL[t], cut->through[t], NULL, 0, &counts[t], NULL, sub, sizeof sub) !=
            SQLITE_OK) {
            pgcl_errorf(err, cap, "%s", sub);
            return SQLITE_ERROR;
        }
        out->rows_archived += counts[t];
    }
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO audit_cuts (entry_seq, entry_hash, log_root, decisions_through,"
                           " admin_events_through, contests_through, resolutions_through, rows_archived,"
                           " archived_before, created_at, statement, public_key, signature, archive_sha256,"
                           " archive_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                           -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
        return SQLITE_ERROR;
    }
    char statement[1024];
    int n = pgcl_checkpoint_statement(&out->checkpoint, statement, sizeof statement);
    PGCL_ASSERT(n > 0);
    sqlite3_bind_int64(s, 1, cut->entry_seq);
    sqlite3_bind_text(s, 2, cut->entry_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, out->checkpoint.log_root, -1, SQLITE_STATIC);
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        sqlite3_bind_int64(s, 4 + t, cut->through[t]);
    sqlite3_bind_int64(s, 8, out->rows_archived);
    sqlite3_bind_text(s, 9, ctx->horizon, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 10, out->checkpoint.created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 11, statement, n, SQLITE_STATIC);
    sqlite3_bind_text(s, 12, out->checkpoint.public_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 13, out->checkpoint.signature, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 14, out->archive_sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 15, ctx->archive_path, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "recording the cut: %s", sqlite3_errmsg(db));
        return rc;
    }
    for (size_t i = 0; i < sizeof PRUNE_SQL / sizeof PRUNE_SQL[0]; i++) {
        int t = PRUNE_TABLE[i];
        if (sqlite3_prepare_v2(db, PRUNE_SQL[i], -1, &s, NULL) != SQLITE_OK) {
            pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
            return SQLITE_ERROR;
        }
        sqlite3_bind_int64(s, 1, cut->through[t]);
        rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "pruning: %s", sqlite3_errmsg(db));
            return rc;
        }
        /* every row counted above is deleted, and nothing else */
        if (PRUNE_COUNTED[i] && sqlite3_changes64(db) != counts[t]) {
            pgcl_errorf(err, cap, "pruning %s deleted %lld rows, expected %lld", pgcl_chain_tables[t].name,
                        (long long)sqlite3_changes64(db), (long long)counts[t]);
            return SQLITE_ABORT;
        }
    }
    return SQLITE_OK;
}

pgcl_status pgcl_archive_run(const char *db_path, const char *horizon, int64_t max_decisions, const char *key_path,
                             const char *archive_path, const char *checkpoint_dir, pgcl_archive_result *out, char *err,
                             int cap) {
    char sub[ERR_CAP], dir[PGCL_CHECKPOINT_PATH_MAX];
    memset(out, 0, sizeof *out);
    if (access(archive_path, F_OK) == 0) { /* before anything is signed or written */
        pgcl_errorf(err, cap, "%s exists: the archive is always a new file (name another with --out)", archive_path);
        return PGCL_ERR_INVALID;
    }
    sqlite3 *db = open_writer(db_path, err, cap);
    if (!db) return PGCL_ERR_IO;
    pgcl_status st = PGCL_ERR_DB;
    /* 1. the cut, in one read snapshot */
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sub);
        goto done;
    }
    st = pgcl_archive_plan(db, horizon, max_decisions, &out->cut, sub, sizeof sub);
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sub);
        goto done;
    }
    /* 2. the signed checkpoint at the cut */
    if (!checkpoint_dir) {
        pgcl_path_directory(db_path, dir, sizeof dir);
        checkpoint_dir = dir;
    }
    if ((st = pgcl_checkpoint_create_at(db_path, key_path, out->cut.entry_seq, NULL, checkpoint_dir, &out->checkpoint,
                                        err, cap)) != PGCL_OK)
        goto done;
    PGCL_ASSERT(out->checkpoint.head_seq == out->cut.entry_seq);
    if (strcmp(out->checkpoint.head_hash, out->cut.entry_hash) != 0) {
        pgcl_errorf(err, cap, "%s: entry %lld changed while archiving", db_path, (long long)out->cut.entry_seq);
        st = PGCL_ERR_MISMATCH;
        goto done;
    }
    /* 3. the archive */
    if ((st = export_archive(db, archive_path, &out->cut, &out->checkpoint, err, cap)) != PGCL_OK) goto done;
    if ((st = pgcl_archive_file_sha256(archive_path, out->archive_sha256, err, cap)) != PGCL_OK) goto done;
    /* 4. pruning */
    prune_ctx ctx = {.horizon = horizon, .archive_path = archive_path, .out = out};
    int64_t t0 = pgcl_monotonic_us();
    int prc = pgcl_db_write_transaction(db, prune_live, &ctx, sub, sizeof sub);
    out->prune_us = pgcl_monotonic_us() - t0;
    if (prc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: the archive %s was written and verified, but pruning the live database failed "
                              "(nothing was deleted): %s", db_path, archive_path, sub);
        st = PGCL_ERR_DB;
        goto done;
    }
    st = PGCL_OK;
done:
    sqlite3_close(db);
    return st;
}

/* ---- where an archived decision went ---- */

/* The Unix milliseconds of a UUIDv7 (its first 48 bits); false when id is not one. */
static bool uuid7_ms(const char *id, int64_t *ms) {
    if (!id || strlen(id) != 36 || id[8] != '-' || id[13] != '-' || id[14] != '7') return false;
    int64_t v = 0;
    for (int i = 0; i < 13; i++) {
        if (i == 8) continue;
        char c = id[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + d;
    }
    *ms = v;
    return true;
}

bool pgcl_archive_id_time(const char *decision_id, char out[32]) {
    int64_t ms = 0;
    if (!uuid7_ms(decision_id, &ms)) return false;
    _Static_assert(PGCL_QTIME_LEN + 1 <= 32, "a time fits the caller's buffer");
    pgcl_time_format(ms * 1000, out);
    return true;
}

pgcl_status pgcl_archive_where_is(sqlite3 *db, const char *decision_id, pgcl_archive_where *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    char made[32];
    if (!pgcl_archive_id_time(decision_id, made)) return PGCL_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT entry_seq, archived_before, created_at, archive_name FROM audit_cuts WHERE"
                           " archived_before > ?1 ORDER BY seq LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK) {
        if (strstr(sqlite3_errmsg(db), "no such table")) return PGCL_OK; /* before migration 0010 */
        pgcl_errorf(err, cap, "audit_cuts: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    sqlite3_bind_text(s, 1, made, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->archived = true;
        out->entry_seq = sqlite3_column_int64(s, 0);
        for (int i = 0; i < 3; i++) {
            const char *text = (const char *)sqlite3_column_text(s, 1 + i);
            char *dst = i == 0 ? out->before : i == 1 ? out->created_at : out->archive_name;
            size_t dst_cap = i == 2 ? sizeof out->archive_name : sizeof out->before;
            snprintf(dst, dst_cap, "%s", text ? text : "");
        }
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "audit_cuts: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    return PGCL_OK;
}
