/* The PostgreSQL store's reads (audit_pg.h): the reviewers' reads, the idempotency lookups, the
 * activations and the shadow report, for the whole fleet, each with exactly the contract and the
 * output structs of its SQLite counterpart (audit_reads.h; core/review/), so that the JSON
 * answers built from them in server/ are the same whichever store holds the record.
 *
 * Shape of every read: a connection from the store's read pool (PGCL_PG_READ_WAIT_MS; each set up
 * once with extra_float_digits = 3 by the pool, PGCL_PG_POOL_SESSION_SQL, so that double precision
 * columns come back in text that strtod turns into the stored double exactly), constant SQL with text
 * parameters ($n), the connection given back. A read of one query runs it as one statement (its
 * own snapshot: one round trip, read_once); a read of several runs them in a read-only REPEATABLE
 * READ transaction (one snapshot for all of them: read_open, ROLLBACK in read_close). bytea
 * columns come back in hex text and are decoded (pgcl_pg_bytea).
 *
 * Order: seq is handed out in commit order across the fleet (migrations/pg/0001_fleet.sql,
 * fleet_counters), so the committed rows of a table are always a prefix of its seqs and the
 * seq cursors of the lists never skip a row that commits late on another writer, as with SQLite.
 *
 * Collation: timestamps are fixed-format RFC 3339 text, ordered alike in any collation; names
 * whose order shows in an answer (labels, model versions) are sorted COLLATE "C", SQLite's BINARY.
 *
 * The file reads top to bottom: the read transaction and value helpers, one decision, the
 * decision lists, the contest queue, the stats, the export, then the scoring and operators' reads. */
#include "audit_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read_sql.h" /* PGCL_READ_ERR_CAP */

/* Whether a decision has been contested, derived from its contests (alias d in the query): the
 * meaning of read_sql.h's CONTEST_STATUS_SQL, written as one correlated aggregate so that
 * PostgreSQL probes contests_decision per row (its NOT EXISTS forms get hashed over the whole
 * contests table). */
#define PG_CONTEST_STATUS_SQL                                                                                          \
    "(SELECT CASE WHEN count(*) = 0 THEN 'none' WHEN count(*) FILTER (WHERE r1.seq IS NULL) > 0 THEN 'open'"           \
    " ELSE 'resolved' END FROM contests c1 LEFT JOIN resolutions r1 ON r1.contest_id = c1.contest_id"                  \
    " WHERE c1.decision_id = d.decision_id)"

/* The summary of a decision: columns 0..10 of every list and export query (read_sql.h's SUMMARY_COLS). */
#define PG_SUMMARY_COLS                                                                                                \
    "d.seq, d.decision_id, d.created_at, d.item_id, d.request_id, d.model_name, d.model_version, d.label,"             \
    " d.decision, d.toxicity, " PG_CONTEST_STATUS_SQL

/* A decision's facts (review_rows.h): after the summary in the lists' rows, and in a record's. */

/* ---- the read transaction, values ---- */

#define READ_BEGIN_SQL "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

/* Runs a read's first statement, sql (n text parameters; what: its name in err), on a connection
 * of the read pool: its result, with *conn the connection (given back with read_close), or NULL
 * with *st and err ("<prefix>: <what>: …") set and *conn NULL. A pooled connection that turns out
 * to be gone (the server restarted since it was last used: libpq only notices on the next
 * statement) is dropped and the statement runs again on the next one (each idle connection of the
 * pool may be gone: at most PGCL_PG_READERS of them, then a new one); a read changes nothing, so
 * running its first statement again is safe. */
static PGresult *read_first(pgcl_audit *store, const char *prefix, const char *what, const char *sql, int n,
                            const char *const *values, PGconn **conn, pgcl_status *st, char *err, int cap) {
    pgcl_pg_pool *pool = pgcl_audit_pg_of(store)->readers;
    *conn = NULL;
    *st = PGCL_ERR_DB;
    for (int attempt = 0; attempt <= PGCL_PG_READERS; attempt++) {
        if ((*st = pgcl_pg_pool_acquire(pool, PGCL_PG_READ_WAIT_MS, conn, err, cap)) != PGCL_OK) return NULL;
        char sub[PGCL_READ_ERR_CAP];
        PGresult *res = pgcl_pg_query(*conn, what, sql, n, values, st, sub, sizeof sub);
        if (res) return res;
        pgcl_errorf(err, cap, "%s: %s", prefix, sub);
        bool gone = pgcl_pg_broken(*conn);
        pgcl_pg_pool_release(pool, *conn); /* a broken connection is closed, not pooled */
        *conn = NULL;
        if (!gone) break;
    }
    return NULL;
}

/* A read connection inside a read transaction (for a read of several queries), or a status with
 * err set. */
static pgcl_status read_open(pgcl_audit *store, PGconn **conn, char *err, int cap) {
    pgcl_status st;
    PQclear(read_first(store, "reading the audit database", "starting a read", READ_BEGIN_SQL, 0, NULL, conn, &st, err,
                       cap));
    return st;
}

/* Ends the read transaction (whatever its state) and gives the connection back. Accepts NULL. */
static void read_close(pgcl_audit *store, PGconn *conn) {
    if (!conn) return;
    if (!pgcl_pg_broken(conn) && PQtransactionStatus(conn) != PQTRANS_IDLE) {
        char ignored[128];
        pgcl_pg_exec(conn, "ending a read", "ROLLBACK", 0, NULL, ignored, sizeof ignored);
    }
    pgcl_pg_pool_release(pgcl_audit_pg_of(store)->readers, conn);
}

/* Runs a query of the read; NULL with err "reading the audit database: …" and *st on failure. */
static PGresult *read_query(PGconn *conn, const char *sql, int n, const char *const *values, pgcl_status *st, char *err,
                            int cap) {
    char sub[PGCL_READ_ERR_CAP];
    PGresult *res = pgcl_pg_query(conn, "query", sql, n, values, st, sub, sizeof sub);
    if (!res) pgcl_errorf(err, cap, "reading the audit database: %s", sub);
    return res;
}

/* A read of one query: sql run as one statement on a pooled connection, given back at once; NULL
 * with err ("<prefix>: query: …") and *st on failure. */
static PGresult *read_once(pgcl_audit *store, const char *prefix, const char *sql, int n, const char *const *values,
                           pgcl_status *st, char *err, int cap) {
    PGconn *conn;
    PGresult *res = read_first(store, prefix, "query", sql, n, values, &conn, st, err, cap);
    read_close(store, conn);
    return res;
}

/* An integer parameter in text. */
typedef struct int_text {
    char s[24];
} int_text;

static int_text int_param(int64_t v) {
    int_text t;
    snprintf(t.s, sizeof t.s, "%lld", (long long)v);
    return t;
}

static const char *text_of(pgcl_row_arena *a, const PGresult *res, int row, int col) {
    return pgcl_row_arena_strdup(a, pgcl_pg_text(res, row, col));
}

static pgcl_opt_real opt_real_of(const PGresult *res, int row, int col) {
    if (PQgetisnull(res, row, col)) return (pgcl_opt_real){0};
    return (pgcl_opt_real){.present = true, .value = pgcl_pg_double(res, row, col)};
}

static pgcl_opt_int opt_int_of(const PGresult *res, int row, int col) {
    if (PQgetisnull(res, row, col)) return (pgcl_opt_int){0};
    return (pgcl_opt_int){.present = true, .value = pgcl_pg_int(res, row, col)};
}

/* A boolean column ('t' / 'f'). */
static bool bool_of(const PGresult *res, int row, int col) {
    const char *v = pgcl_pg_text(res, row, col);
    return v && v[0] == 't';
}

static pgcl_status out_of_memory(char *err, int cap) {
    pgcl_errorf(err, cap, "out of memory");
    return PGCL_ERR_NOMEM;
}

/* Columns 0..10 (SUMMARY_COLS) of a row, strings copied into a. */
static void summary_of(pgcl_row_arena *a, const PGresult *res, int row, pgcl_decision_summary *out) {
    *out = (pgcl_decision_summary){
        .seq = pgcl_pg_int(res, row, 0),
        .decision_id = text_of(a, res, row, 1),
        .created_at = text_of(a, res, row, 2),
        .item_id = text_of(a, res, row, 3),
        .request_id = text_of(a, res, row, 4),
        .model_name = text_of(a, res, row, 5),
        .model_version = text_of(a, res, row, 6),
        .label = text_of(a, res, row, 7),
        .decision = text_of(a, res, row, 8),
        .toxicity = opt_real_of(res, row, 9),
        .contest_status = text_of(a, res, row, 10),
    };
}

/* Columns first..first+3 (FACTS_COLS) of a row, strings copied into a. */
static void facts_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_decision_facts *out) {
    *out = (pgcl_decision_facts){
        .trace_id = text_of(a, res, row, first),
        .content_date = text_of(a, res, row, first + 1),
        .territorial_scope = text_of(a, res, row, first + 2),
        .content_language = text_of(a, res, row, first + 3),
    };
}

/* Resolution columns first..first+6 (seq, resolved_at, resolved_by, resolver_key_id, outcome,
 * corrected_label, note): present false when the seq is NULL. */
static void resolution_of(pgcl_row_arena *a, const PGresult *res, int row, int first, pgcl_resolution_row *out) {
    *out = (pgcl_resolution_row){0};
    if (PQgetisnull(res, row, first)) return;
    out->present = true;
    out->resolved_at = text_of(a, res, row, first + 1);
    out->resolved_by = text_of(a, res, row, first + 2);
    out->resolver_key_id = text_of(a, res, row, first + 3);
    out->outcome = text_of(a, res, row, first + 4);
    out->corrected_label = text_of(a, res, row, first + 5);
    out->note = text_of(a, res, row, first + 6);
}

/* ---- one decision ---- */

static const char RECORD_SQL[] =
    "SELECT d.seq, d.decision_id, d.created_at, d.request_id, d.item_id, d.model_name, d.model_version,"
    " d.model_sha256, d.label, d.label_index, d.probabilities, d.toxicity, d.decision, d.policy, d.t_review,"
    " d.t_block, d.vector, d.input_sha256, d.latency_us, d.input_dtype,"
    " EXISTS (SELECT 1 FROM decision_inputs AS i WHERE i.decision_seq = d.seq), d.input_digest IS NOT NULL,"
    " " PG_CONTEST_STATUS_SQL ", " FACTS_COLS " FROM decisions d WHERE d.decision_id = $1";
/* The entry of the commit that chained the row: the run of decisions holding its seq (the last run
 * starting at or before it, through the runs' primary key), in its writer's chain. */
static const char CHAIN_SQL[] =
    "SELECT c.writer_id, c.seq, c.hash FROM (SELECT writer_id, entry_seq, first_row_seq, n FROM audit_chain_runs"
    " WHERE kind = 'decisions' AND first_row_seq <= $1::bigint ORDER BY first_row_seq DESC LIMIT 1) AS u"
    " JOIN audit_chain AS c ON c.writer_id = u.writer_id AND c.seq = u.entry_seq"
    " WHERE $1::bigint < u.first_row_seq + u.n";
static const char RECORD_CONTESTS_SQL[] =
    "SELECT c.contest_id, c.filed_at, c.filed_by, c.filer_key_id, c.reason, r.seq, r.resolved_at, r.resolved_by,"
    " r.resolver_key_id, r.outcome, r.corrected_label, r.note"
    " FROM contests c LEFT JOIN resolutions r ON r.contest_id = c.contest_id"
    " WHERE c.decision_id = $1 ORDER BY c.seq";

/* A float32 little-endian bytea (hex text) as floats in the arena. */
static pgcl_status vector_of(pgcl_row_arena *a, const PGresult *res, int row, int col, const float **out, int *n_out,
                             char *err, int cap) {
    unsigned char *bytes = NULL;
    size_t len = 0;
    *out = NULL;
    *n_out = 0;
    pgcl_status st = pgcl_pg_bytea(res, row, col, &bytes, &len);
    if (st == PGCL_ERR_NOMEM) return out_of_memory(err, cap);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "reading the audit database: a vector that is not bytea text");
        return PGCL_ERR_DB;
    }
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vectors are stored little-endian");
    int n = (int)(len / sizeof(float));
    float *v = bytes && n > 0 ? pgcl_row_arena_alloc(a, (size_t)n * sizeof *v) : NULL;
    if (v) memcpy(v, bytes, (size_t)n * sizeof *v);
    free(bytes);
    *out = v;
    *n_out = v ? n : 0;
    return PGCL_OK;
}

static pgcl_status take_record_row(pgcl_row_arena *a, const PGresult *res, pgcl_decision_record *rec, char *err,
                                   int cap) {
    const char *dtype = pgcl_pg_text(res, 0, 19);
    bool has_input = bool_of(res, 0, 20), was_stored = bool_of(res, 0, 21);
    *rec = (pgcl_decision_record){
        .seq = pgcl_pg_int(res, 0, 0),
        .decision_id = text_of(a, res, 0, 1),
        .created_at = text_of(a, res, 0, 2),
        .request_id = text_of(a, res, 0, 3),
        .item_id = text_of(a, res, 0, 4),
        .model_name = text_of(a, res, 0, 5),
        .model_version = text_of(a, res, 0, 6),
        .model_sha256 = text_of(a, res, 0, 7),
        .label = text_of(a, res, 0, 8),
        .label_index = opt_int_of(res, 0, 9),
        .probabilities = text_of(a, res, 0, 10),
        .toxicity = opt_real_of(res, 0, 11),
        .decision = text_of(a, res, 0, 12),
        .policy = text_of(a, res, 0, 13),
        .t_review = opt_real_of(res, 0, 14),
        .t_block = opt_real_of(res, 0, 15),
        .input_sha256 = text_of(a, res, 0, 17),
        .latency_us = opt_int_of(res, 0, 18),
        .input_stored = has_input && dtype ? pgcl_row_arena_strdup(a, dtype) : NULL,
        .input_dropped = !has_input && (was_stored || dtype), /* kept once, dropped by retention */
        .contest_status = text_of(a, res, 0, 22),
    };
    facts_of(a, res, 0, 23, &rec->facts);
    pgcl_status st = vector_of(a, res, 0, 16, &rec->vector, &rec->n_vector, err, cap);
    return st == PGCL_OK && a->failed ? out_of_memory(err, cap) : st;
}

static pgcl_status take_record_contests(pgcl_row_arena *a, const PGresult *res, pgcl_decision_record *rec, char *err,
                                        int cap) {
    int n = PQntuples(res);
    pgcl_contest_row *contests = n ? pgcl_row_arena_alloc(a, (size_t)n * sizeof *contests) : NULL;
    if (n && !contests) return out_of_memory(err, cap);
    for (int i = 0; i < n; i++) {
        pgcl_contest_row *c = &contests[i];
        c->contest_id = text_of(a, res, i, 0);
        c->filed_at = text_of(a, res, i, 1);
        c->filed_by = text_of(a, res, i, 2);
        c->filer_key_id = text_of(a, res, i, 3);
        c->reason = text_of(a, res, i, 4);
        resolution_of(a, res, i, 5, &c->resolution);
    }
    rec->contests = contests;
    rec->n_contests = n;
    return a->failed ? out_of_memory(err, cap) : PGCL_OK;
}

/* The three queries of a record, in conn's read transaction. */
static pgcl_status read_record(PGconn *conn, const char *decision_id, pgcl_row_arena *a, pgcl_decision_record *rec,
                               char *err, int cap) {
    pgcl_status st;
    const char *id_values[] = {decision_id};
    PGresult *res = read_query(conn, RECORD_SQL, 1, id_values, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgcl_errorf(err, cap, "no decision with id '%.64s'", decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    st = take_record_row(a, res, rec, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;

    int_text seq = int_param(rec->seq);
    const char *seq_values[] = {seq.s};
    if (!(res = read_query(conn, CHAIN_SQL, 1, seq_values, &st, err, cap))) return st;
    if (PQntuples(res) > 0) {
        rec->has_chain = true;
        rec->writer_id = text_of(a, res, 0, 0);
        rec->chain_seq = opt_int_of(res, 0, 1);
        rec->chain_hash = text_of(a, res, 0, 2);
    }
    PQclear(res);
    if (a->failed) return out_of_memory(err, cap);

    if (!(res = read_query(conn, RECORD_CONTESTS_SQL, 1, id_values, &st, err, cap))) return st;
    st = take_record_contests(a, res, rec, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(rec->label && rec->decision); /* NOT NULL columns: the outcome in force starts from them */
    rec->outcome = pgcl_effective_outcome_of(rec->label, rec->decision, rec->contests, rec->n_contests);
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_decision(pgcl_audit *store, const char *decision_id, pgcl_row_arena *arena,
                                  pgcl_decision_record *out, char *err, int cap) {
    *out = (pgcl_decision_record){0};
    PGconn *conn = NULL;
    pgcl_status st = read_open(store, &conn, err, cap);
    if (st == PGCL_OK) st = read_record(conn, decision_id, arena, out, err, cap);
    read_close(store, conn);
    if (st != PGCL_OK) *out = (pgcl_decision_record){0};
    return st;
}

/* ---- decision lists ----
 * Every list query takes the same eleven parameters (filters.h order below) and applies every
 * filter as a condition `($k IS NULL OR column = $k)`. PostgreSQL plans an unnamed statement with
 * its parameter values as constants, so the conditions of absent filters fold away and the
 * planner sees only the filters given, and picks the index that serves them:
 *   - no filter, or a time window alone: the primary key walked backwards from the cursor (a
 *     window far in the past is found through decisions_created_at_seq and its rows sorted by seq,
 *     top-N);
 *   - label, decision (review / block: the partial index decisions_flagged, whose condition is
 *     stated literally), model + version, item_id, request_id: their (x, seq) indexes, walked
 *     backwards from the cursor: rows come in seq order, no sort;
 *   - model without version (MODEL_SQL): one walk of (model_name, model_version, seq) per version
 *     of the model (the versions found by a recursive skip-scan, one probe each), each at most a
 *     page, merged: a sort of at most (page × versions) rows. Each walk orders by (version, seq),
 *     which that index gives and the primary key does not, so that a version whose rows are all
 *     old is not looked for by walking the newer rows of the table (the version is matched as a
 *     range of one value: an equality would make the planner drop the version from the order);
 *   - contest open / resolved / contested (CONTESTED_SQL): driven by the contests table (its size
 *     is the number of contests), joined to decisions by decision_id, then sorted;
 *     (a probe of decisions' decision_id per contest: the correlated LIMIT 1 keeps the planner
 *     from hashing the whole decisions table);
 *   - never contested: a probe of contests_decision per row met (a correlated LIMIT 1, which the
 *     planner cannot turn into a hash of the whole contests table as it does NOT EXISTS here);
 *   - a time window: the planner would walk the primary key from the cursor, taking the window's
 *     rows to be spread evenly over the table, when they are in fact together (created_at grows
 *     with seq, nearly) and may lie far below the cursor. So the window's rows below the cursor are
 *     first counted on decisions_created_at_seq, up to WINDOW_PROBE_ROWS index entries
 *     (WINDOW_PROBE_SQL); when there are fewer, their exact lowest and highest seqs bound the page
 *     ($12, $13), and the walk starts at the window's newest row and stops at its oldest. A
 *     larger window is walked from the cursor (it is then dense below it, or the walk is long).
 * The page's rows are then read by seq (the outer query), newest first. */

/* The parameters: $1 before_seq (NULL: from the newest), $2 model, $3 version, $4 label,
 * $5 decision, $6 item_id, $7 request_id, $8 since, $9 until, $10 rows to read, $11 the contest
 * filter ("any", "open", "resolved", "contested", "none"), $12 and $13 the seq range of the time
 * window's rows below the cursor when it is known (WINDOW_PROBE_SQL), else NULL, $14 trace_id. */
enum { LIST_PARAMS = 14 };

#define LIST_FILTERS_SQL                                                                                               \
    " ($1::bigint IS NULL OR d.seq < $1::bigint)"                                                                      \
    " AND ($2::text IS NULL OR d.model_name = $2::text)"                                                               \
    " AND ($3::text IS NULL OR d.model_version = $3::text)"                                                            \
    " AND ($4::text IS NULL OR d.label = $4::text)"                                                                    \
    " AND ($5::text IS NULL OR d.decision = $5::text)"                                                                 \
    " AND ($5::text IS NULL OR $5::text = 'allow' OR d.decision <> 'allow')"                                           \
    " AND ($6::text IS NULL OR d.item_id = $6::text)"                                                                  \
    " AND ($7::text IS NULL OR d.request_id = $7::text)"                                                               \
    " AND ($14::text IS NULL OR d.trace_id = $14::text)"                                                               \
    " AND ($8::text IS NULL OR d.created_at >= $8::text)"                                                              \
    " AND ($9::text IS NULL OR d.created_at < $9::text)"                                                               \
    " AND ($12::bigint IS NULL OR d.seq >= $12::bigint) AND ($13::bigint IS NULL OR d.seq <= $13::bigint)"             \
    " AND ($11::text <> 'none'"                                                                                        \
    " OR (SELECT c0.seq FROM contests c0 WHERE c0.decision_id = d.decision_id LIMIT 1) IS NULL)"

#define LIST_OUTER_SQL "SELECT " PG_SUMMARY_COLS ", " FACTS_COLS " FROM decisions d WHERE d.seq IN ("
#define LIST_OUTER_END_SQL ") ORDER BY d.seq DESC"

static const char LIST_SQL[] = LIST_OUTER_SQL "SELECT d.seq FROM decisions d WHERE" LIST_FILTERS_SQL
                                              " ORDER BY d.seq DESC LIMIT $10::bigint" LIST_OUTER_END_SQL;

static const char MODEL_SQL[] =
    "WITH RECURSIVE v(version) AS ("
    " SELECT min(model_version) FROM decisions WHERE model_name = $2::text"
    " UNION ALL SELECT (SELECT min(d.model_version) FROM decisions d WHERE d.model_name = $2::text"
    " AND d.model_version > v.version) FROM v WHERE v.version IS NOT NULL) " LIST_OUTER_SQL
    "SELECT p.seq FROM v CROSS JOIN LATERAL (SELECT d.seq FROM decisions d"
    " WHERE d.model_version >= v.version AND d.model_version <= v.version"
    " AND" LIST_FILTERS_SQL " ORDER BY d.model_version DESC, d.seq DESC LIMIT $10::bigint) AS p"
    " WHERE v.version IS NOT NULL ORDER BY p.seq DESC LIMIT $10::bigint" LIST_OUTER_END_SQL;

static const char CONTESTED_SQL[] =
    LIST_OUTER_SQL "SELECT DISTINCT d.seq FROM contests c CROSS JOIN LATERAL (SELECT * FROM decisions d1"
                   " WHERE d1.decision_id = c.decision_id LIMIT 1) AS d WHERE" LIST_FILTERS_SQL
                   " AND ($11::text <> 'open' OR NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id ="
                   " c.contest_id))"
                   " AND ($11::text <> 'resolved' OR NOT EXISTS (SELECT 1 FROM contests c2 WHERE c2.decision_id ="
                   " d.decision_id AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id = c2.contest_id)))"
                   " ORDER BY d.seq DESC LIMIT $10::bigint" LIST_OUTER_END_SQL;

#define WINDOW_PROBE_ROWS 10000

/* How many rows of the window lie below the cursor (at most WINDOW_PROBE_ROWS), and their lowest
 * and highest seq: $1 before_seq, $2 since, $3 until, $4 WINDOW_PROBE_ROWS. An index-only walk of
 * decisions_created_at_seq. */
static const char WINDOW_PROBE_SQL[] =
    "SELECT count(*), min(w.seq), max(w.seq) FROM (SELECT d.seq FROM decisions d"
    " WHERE ($2::text IS NULL OR d.created_at >= $2::text) AND ($3::text IS NULL OR d.created_at < $3::text)"
    " AND ($1::bigint IS NULL OR d.seq < $1::bigint) ORDER BY d.created_at, d.seq LIMIT $4::bigint) AS w";

static const char *contest_filter_name(pgcl_contest_filter c) {
    switch (c) {
    case PGCL_CONTEST_OPEN:
        return "open";
    case PGCL_CONTEST_RESOLVED:
        return "resolved";
    case PGCL_CONTEST_CONTESTED:
        return "contested";
    case PGCL_CONTEST_NONE:
        return "none";
    case PGCL_CONTEST_ANY:
        break;
    }
    return "any";
}

/* Whether a page of f is driven by the contests table (CONTESTED_SQL). */
static bool contest_driven(const pgcl_decision_filter *f) {
    return f->contest == PGCL_CONTEST_OPEN || f->contest == PGCL_CONTEST_RESOLVED ||
           f->contest == PGCL_CONTEST_CONTESTED;
}

/* Whether a page of f first bounds its time window (window_bounds). */
static bool window_bounded(const pgcl_decision_filter *f) { return (f->since || f->until) && !contest_driven(f); }

/* The time window's seq range below the cursor into lo and hi ("" when unknown: a window too
 * large to bound), in conn's read transaction (window_bounded(f)). An empty window gives lo > hi. */
static pgcl_status window_bounds(PGconn *conn, const pgcl_decision_filter *f, const char *before, int_text *lo,
                                 int_text *hi, char *err, int cap) {
    int_text probe_rows = int_param(WINDOW_PROBE_ROWS);
    const char *values[] = {before, f->since, f->until, probe_rows.s};
    pgcl_status st;
    PGresult *res = read_query(conn, WINDOW_PROBE_SQL, 4, values, &st, err, cap);
    if (!res) return st;
    int64_t n = pgcl_pg_int(res, 0, 0);
    if (n == 0) { /* nothing in the window below the cursor */
        *lo = int_param(1);
        *hi = int_param(0);
    } else if (n < WINDOW_PROBE_ROWS) {
        *lo = int_param(pgcl_pg_int(res, 0, 1));
        *hi = int_param(pgcl_pg_int(res, 0, 2));
    }
    PQclear(res);
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_decisions(pgcl_audit *store, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   pgcl_row_arena *arena, pgcl_decision_page *out, char *err, int cap) {
    *out = (pgcl_decision_page){0};
    PGCL_ASSERT(limit >= 1);
    int_text before = int_param(before_seq), n = int_param((int64_t)limit + 1), lo = {{0}}, hi = {{0}};
    const char *values[LIST_PARAMS] = {before_seq > 0 ? before.s : NULL,
                                       f->model,
                                       f->version,
                                       f->label,
                                       f->decision,
                                       f->item_id,
                                       f->request_id,
                                       f->since,
                                       f->until,
                                       n.s,
                                       contest_filter_name(f->contest),
                                       NULL,
                                       NULL,
                                       f->trace_id};
    const char *sql = contest_driven(f) ? CONTESTED_SQL : f->model && !f->version ? MODEL_SQL : LIST_SQL;
    PGresult *res = NULL;
    pgcl_status st;
    if (!window_bounded(f)) {
        res = read_once(store, "reading the audit database", sql, LIST_PARAMS, values, &st, err, cap);
    } else { /* the window's bounds and the page from one snapshot */
        PGconn *conn = NULL;
        st = read_open(store, &conn, err, cap);
        if (st == PGCL_OK) st = window_bounds(conn, f, values[0], &lo, &hi, err, cap);
        if (st == PGCL_OK) {
            values[11] = lo.s[0] ? lo.s : NULL;
            values[12] = hi.s[0] ? hi.s : NULL;
            res = read_query(conn, sql, LIST_PARAMS, values, &st, err, cap);
        }
        read_close(store, conn);
    }
    if (!res) return st;
    int n_rows = PQntuples(res) > limit ? limit : PQntuples(res);
    pgcl_decision_summary *rows = n_rows ? pgcl_row_arena_alloc(arena, (size_t)n_rows * sizeof *rows) : NULL;
    for (int i = 0; i < n_rows && rows; i++) {
        summary_of(arena, res, i, &rows[i]);
        facts_of(arena, res, i, 11, &rows[i].facts);
        /* Keyset paging holds only if the page is strictly newest first and below the cursor:
         * otherwise the next cursor would skip or repeat rows. */
        PGCL_ASSERT(before_seq <= 0 || rows[i].seq < before_seq);
        PGCL_ASSERT(i == 0 || rows[i].seq < rows[i - 1].seq);
    }
    bool more = PQntuples(res) > limit;
    PQclear(res);
    if (arena->failed || (n_rows && !rows)) return out_of_memory(err, cap);
    /* the extra row: there is a next page, starting below the last one sent */
    *out = (pgcl_decision_page){.rows = rows, .n = n_rows, .next_before = more ? rows[n_rows - 1].seq : 0};
    return PGCL_OK;
}

/* ---- the contest queue ---- */

static const char CONTESTS_OPEN_SQL[] =
    "SELECT c.seq, c.contest_id, c.decision_id, c.filed_at, c.filed_by, c.reason, d.label, d.decision,"
    " d.model_name, d.model_version, d.item_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
    " FROM contests c LEFT JOIN decisions d ON d.decision_id = c.decision_id"
    " WHERE c.seq > $1::bigint AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id = c.contest_id)"
    " ORDER BY c.seq LIMIT $2::bigint";
static const char CONTESTS_RESOLVED_SQL[] =
    "SELECT r.seq, c.contest_id, c.decision_id, c.filed_at, c.filed_by, c.reason, d.label, d.decision,"
    " d.model_name, d.model_version, d.item_id, r.seq, r.resolved_at, r.resolved_by, r.resolver_key_id,"
    " r.outcome, r.corrected_label, r.note"
    " FROM resolutions r JOIN contests c ON c.contest_id = r.contest_id"
    " LEFT JOIN decisions d ON d.decision_id = c.decision_id"
    " WHERE r.seq < $1::bigint ORDER BY r.seq DESC LIMIT $2::bigint";

pgcl_status pgcl_pg_read_contests(pgcl_audit *store, bool open, int64_t after_seq, int limit, int window_days,
                                  int64_t now_us, pgcl_row_arena *arena, pgcl_contest_page *out, char *err, int cap) {
    *out = (pgcl_contest_page){0};
    PGCL_ASSERT(limit >= 1);
    int_text from = int_param(open ? after_seq : after_seq > 0 ? after_seq : INT64_MAX);
    int_text n = int_param((int64_t)limit + 1);
    const char *values[] = {from.s, n.s};
    pgcl_status st;
    PGresult *res = read_once(store, "reading the audit database", open ? CONTESTS_OPEN_SQL : CONTESTS_RESOLVED_SQL,
                              2, values, &st, err, cap);
    if (!res) return st;
    int n_rows = PQntuples(res) > limit ? limit : PQntuples(res);
    pgcl_contest_queue_row *rows = n_rows ? pgcl_row_arena_alloc(arena, (size_t)n_rows * sizeof *rows) : NULL;
    int64_t last = 0;
    for (int i = 0; i < n_rows && rows; i++) {
        pgcl_contest_queue_row *c = &rows[i];
        c->contest_id = text_of(arena, res, i, 1);
        c->decision_id = text_of(arena, res, i, 2);
        c->filed_at = text_of(arena, res, i, 3);
        c->filed_by = text_of(arena, res, i, 4);
        c->reason = text_of(arena, res, i, 5);
        c->label = text_of(arena, res, i, 6);
        c->decision = text_of(arena, res, i, 7);
        c->model_name = text_of(arena, res, i, 8);
        c->model_version = text_of(arena, res, i, 9);
        c->item_id = text_of(arena, res, i, 10);
        resolution_of(arena, res, i, 11, &c->resolution);
        pgcl_contest_queue_row_time(c, open, window_days, now_us);
        /* The cursor is the last row's seq: rows must come strictly past the previous cursor and
         * in the queue's order, or a page would skip or repeat contests. */
        int64_t seq = pgcl_pg_int(res, i, 0);
        if (open)
            PGCL_ASSERT(seq > after_seq && (i == 0 || seq > last));
        else
            PGCL_ASSERT((after_seq <= 0 || seq < after_seq) && (i == 0 || seq < last));
        last = seq;
    }
    bool more = PQntuples(res) > limit;
    PQclear(res);
    if (arena->failed || (n_rows && !rows)) return out_of_memory(err, cap);
    *out = (pgcl_contest_page){.rows = rows, .n = n_rows, .next = more ? last : 0};
    return PGCL_OK;
}

/* ---- the transparency figures ---- */

/* Decision counts: without a window, three grouped reads (model+version, label, decision: their
 * indexes); with one, one grouped pass over the window's rows. Columns (model_name,
 * model_version, label, decision, count), NULL where not grouped, in SQLite's group order
 * (BINARY: COLLATE "C"), which is the order the answer lists labels in. $1 since, $2 until. */
static const char *const STATS_WHOLE_SQL[] = {
    "SELECT model_name, model_version, NULL, NULL, count(*) FROM decisions"
    " WHERE $1::text IS NULL AND $2::text IS NULL"
    " GROUP BY model_name, model_version ORDER BY model_name COLLATE \"C\", model_version COLLATE \"C\"",
    "SELECT NULL, NULL, label, NULL, count(*) FROM decisions WHERE $1::text IS NULL AND $2::text IS NULL"
    " GROUP BY label ORDER BY label COLLATE \"C\"",
    "SELECT NULL, NULL, NULL, decision, count(*) FROM decisions WHERE $1::text IS NULL AND $2::text IS NULL"
    " GROUP BY decision ORDER BY decision COLLATE \"C\"",
};
static const char STATS_WINDOW_SQL[] =
    "SELECT model_name, model_version, label, decision, count(*) FROM decisions"
    " WHERE ($1::text IS NULL OR created_at >= $1::text) AND ($2::text IS NULL OR created_at < $2::text)"
    " GROUP BY model_name, model_version, label, decision"
    " ORDER BY model_name COLLATE \"C\", model_version COLLATE \"C\", label COLLATE \"C\", decision COLLATE \"C\"";

static pgcl_status stats_decisions(PGconn *conn, const char *since, const char *until, pgcl_row_arena *a,
                                   pgcl_audit_stats *out, char *err, int cap) {
    pgcl_decision_counts dc;
    if (!pgcl_decision_counts_start(a, &dc)) return out_of_memory(err, cap);
    const char *values[] = {since, until};
    bool window = since || until;
    for (int k = 0; k < (window ? 1 : 3); k++) {
        pgcl_status st;
        PGresult *res = read_query(conn, window ? STATS_WINDOW_SQL : STATS_WHOLE_SQL[k], 2, values, &st, err, cap);
        if (!res) return st;
        bool ok = true;
        for (int i = 0; ok && i < PQntuples(res); i++)
            ok = pgcl_decision_counts_add(a, &dc, pgcl_pg_text(res, i, 0), pgcl_pg_text(res, i, 1),
                                          pgcl_pg_text(res, i, 2), pgcl_pg_text(res, i, 3), pgcl_pg_int(res, i, 4));
        PQclear(res);
        if (!ok) return out_of_memory(err, cap);
    }
    pgcl_decision_counts_put(&dc, out);
    return PGCL_OK;
}

/* A contest's resolved_at and filed_at (RFC 3339 UTC, the columns' fixed format) as SQLite's
 * julianday() computes them, so that the medians are the SQLite store's to the last bit: whole
 * milliseconds since the Julian epoch (the minute's, plus the seconds field parsed as SQLite
 * parses it, whole seconds + fraction digits / 10^6 in double precision, times 1000 rounded half
 * up), divided by 86400000 in double precision. (Written out twice rather than as a function-like
 * macro: tests/integration/test_sql_params.py accepts SQL text made of literals and plain macros.) */
#define JULIANDAY_RESOLVED_SQL                                                                                         \
    "((210866760000000 + extract(epoch FROM date_trunc('minute', r.resolved_at::timestamptz AT TIME ZONE 'UTC'))"      \
    "::bigint * 1000 + trunc((substr(r.resolved_at, 18, 2)::int + substr(r.resolved_at, 21, 6)::float8"                \
    " / 1000000.0::float8) * 1000.0::float8 + 0.5::float8)::bigint)::float8 / 86400000.0::float8)"
#define JULIANDAY_FILED_SQL                                                                                            \
    "((210866760000000 + extract(epoch FROM date_trunc('minute', c.filed_at::timestamptz AT TIME ZONE 'UTC'))"         \
    "::bigint * 1000 + trunc((substr(c.filed_at, 18, 2)::int + substr(c.filed_at, 21, 6)::float8"                      \
    " / 1000000.0::float8) * 1000.0::float8 + 0.5::float8)::bigint)::float8 / 86400000.0::float8)"

/* SQL: a resolved contest's time from filing to resolution, in seconds (c: contests, r: resolutions),
 * as the SQLite store computes it: (julianday(resolved_at) - julianday(filed_at)) * 86400. */
#define RESOLUTION_SECONDS_SQL "((" JULIANDAY_RESOLVED_SQL " - " JULIANDAY_FILED_SQL ") * 86400.0::float8)"

#define FILED_IN_RANGE_SQL                                                                                             \
    "($1::text IS NULL OR c.filed_at >= $1::text) AND ($2::text IS NULL OR c.filed_at < $2::text)"

/* One row per model version of the contested decisions: contests filed, resolved and overturned,
 * and the median time to resolution of its resolved ones (the middle row, or the mean of the two
 * middle rows), ordered as SQLite orders them (NULL first, BINARY). */
static const char STATS_CONTESTS_SQL[] =
    "SELECT v.mn, v.mv, v.filed, v.resolved, v.overturned, m.median FROM"
    " (SELECT d.model_name AS mn, d.model_version AS mv, count(*) AS filed, count(r.seq) AS resolved,"
    " count(*) FILTER (WHERE r.outcome = 'overturned') AS overturned"
    " FROM contests c LEFT JOIN decisions d ON d.decision_id = c.decision_id"
    " LEFT JOIN resolutions r ON r.contest_id = c.contest_id WHERE " FILED_IN_RANGE_SQL " GROUP BY 1, 2) v"
    " LEFT JOIN (SELECT mn, mv, avg(s) AS median FROM"
    " (SELECT d.model_name AS mn, d.model_version AS mv, " RESOLUTION_SECONDS_SQL " AS s,"
    " row_number() OVER (PARTITION BY d.model_name, d.model_version ORDER BY " RESOLUTION_SECONDS_SQL ") AS rn,"
    " count(*) OVER (PARTITION BY d.model_name, d.model_version) AS cnt"
    " FROM contests c JOIN resolutions r ON r.contest_id = c.contest_id"
    " LEFT JOIN decisions d ON d.decision_id = c.decision_id WHERE " FILED_IN_RANGE_SQL ") w"
    " WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY mn, mv) m"
    " ON m.mn IS NOT DISTINCT FROM v.mn AND m.mv IS NOT DISTINCT FROM v.mv"
    " ORDER BY v.mn COLLATE \"C\" NULLS FIRST, v.mv COLLATE \"C\" NULLS FIRST";
/* The middle one or two of every resolved contest filed in range ($3 how many, $4 offset). */
static const char STATS_MEDIAN_SQL[] = "SELECT " RESOLUTION_SECONDS_SQL " AS s"
                                       " FROM contests c JOIN resolutions r ON r.contest_id = c.contest_id"
                                       " WHERE " FILED_IN_RANGE_SQL " ORDER BY s LIMIT $3::bigint OFFSET $4::bigint";

static pgcl_status stats_contests(PGconn *conn, const char *since, const char *until, pgcl_row_arena *a,
                                  pgcl_audit_stats *out, char *err, int cap) {
    pgcl_status st;
    const char *values[] = {since, until};
    PGresult *res = read_query(conn, STATS_CONTESTS_SQL, 2, values, &st, err, cap);
    if (!res) return st;
    int n_rows = PQntuples(res);
    pgcl_contest_figures *rows = n_rows ? pgcl_row_arena_alloc(a, (size_t)n_rows * sizeof *rows) : NULL;
    int64_t filed = 0, resolved = 0;
    for (int i = 0; i < n_rows && rows; i++) {
        rows[i] = (pgcl_contest_figures){.model_name = text_of(a, res, i, 0),
                                         .model_version = text_of(a, res, i, 1),
                                         .filed = pgcl_pg_int(res, i, 2),
                                         .resolved = pgcl_pg_int(res, i, 3),
                                         .overturned = pgcl_pg_int(res, i, 4),
                                         .median_resolution_seconds = opt_real_of(res, i, 5)};
        filed += rows[i].filed;
        resolved += rows[i].resolved;
    }
    PQclear(res);
    if (a->failed || (n_rows && !rows)) return out_of_memory(err, cap);

    /* Median time from filing to resolution, over the resolved contests filed in range. */
    pgcl_opt_real median = {0};
    if (resolved > 0) {
        int_text n = int_param(resolved % 2 ? 1 : 2), offset = int_param((resolved - 1) / 2);
        const char *median_values[] = {since, until, n.s, offset.s};
        if (!(res = read_query(conn, STATS_MEDIAN_SQL, 4, median_values, &st, err, cap))) return st;
        double sum = 0;
        for (int i = 0; i < PQntuples(res); i++)
            sum += pgcl_pg_double(res, i, 0);
        if (PQntuples(res) > 0) median = (pgcl_opt_real){.present = true, .value = sum / PQntuples(res)};
        PQclear(res);
    }
    out->contests_filed = filed;
    out->contests_resolved = resolved;
    out->median_resolution_seconds = median;
    out->contests_by_model_version = rows;
    out->n_contests_by_model_version = n_rows;
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_stats(pgcl_audit *store, const char *since, const char *until, pgcl_row_arena *arena,
                               pgcl_audit_stats *out, char *err, int cap) {
    *out = (pgcl_audit_stats){0};
    PGconn *conn = NULL;
    pgcl_status st = read_open(store, &conn, err, cap); /* one snapshot for every figure */
    if (st == PGCL_OK) st = stats_decisions(conn, since, until, arena, out, err, cap);
    if (st == PGCL_OK) st = stats_contests(conn, since, until, arena, out, err, cap);
    read_close(store, conn);
    if (st != PGCL_OK) *out = (pgcl_audit_stats){0};
    return st;
}

/* ---- the export ----
 * Rows in (created_at, seq) order, a chunk of PGCL_EXPORT_CHUNK_ROWS at a time, each chunk one
 * statement on a pooled connection taken and given back within it (no transaction stays open
 * between chunks, memory stays constant), keyset-paged on (created_at, seq) through
 * decisions_created_at_seq; the newest seq is fixed when the export opens (committed seqs are a
 * prefix: rows committed later on any writer are not in it). The position is the export's own
 * (export.h). */

/* $1 since, $2 until, $3 max seq, $4 and $5 the last row's created_at and seq, $6 the chunk size. */
static const char EXPORT_CHUNK_SQL[] =
    "SELECT " PG_SUMMARY_COLS ", d.probabilities, d.vector FROM decisions d"
    " WHERE ($1::text IS NULL OR d.created_at >= $1::text) AND ($2::text IS NULL OR d.created_at < $2::text)"
    " AND d.seq <= $3::bigint AND (d.created_at, d.seq) > ($4::text, $5::bigint)"
    " ORDER BY d.created_at, d.seq LIMIT $6::bigint";

/* pgcl_export_chunk_fn; ctx: the store. */
static int export_chunk(void *ctx, pgcl_export *out, const pgcl_export_position *at, char *err, int cap) {
    pgcl_audit *store = ctx;
    int_text max_seq = int_param(at->max_seq), last_seq = int_param(at->last_seq),
             n = int_param(PGCL_EXPORT_CHUNK_ROWS);
    const char *values[] = {at->since, at->until, max_seq.s, at->last_ts, last_seq.s, n.s};
    pgcl_status st;
    PGresult *res = read_once(store, "reading the audit database", EXPORT_CHUNK_SQL, 6, values, &st, err, cap);
    if (!res) return -1;
    int result = 0;
    for (int i = 0; i < PQntuples(res) && result == 0; i++) {
        pgcl_row_arena a = {0};
        pgcl_decision_summary row;
        summary_of(&a, res, i, &row);
        unsigned char *vector = NULL;
        size_t vector_bytes = 0;
        pgcl_status vst = pgcl_pg_bytea(res, i, 12, &vector, &vector_bytes);
        if (vst != PGCL_OK) {
            pgcl_errorf(err, cap, vst == PGCL_ERR_NOMEM ? "out of memory" : "a vector that is not bytea text");
            result = -1;
        } else if (a.failed || !pgcl_export_put_row(out, &row, pgcl_pg_text(res, i, 11), vector, vector_bytes)) {
            pgcl_errorf(err, cap, "out of memory");
            result = -1;
        }
        free(vector);
        pgcl_row_arena_release(&a);
    }
    PQclear(res);
    return result;
}

pgcl_status pgcl_pg_open_export(pgcl_audit *store, const char *since, const char *until, pgcl_export_format fmt,
                                pgcl_export **out, char *err, int cap) {
    *out = NULL;
    pgcl_status st;
    PGresult *res = read_once(store, "reading the audit database", "SELECT coalesce(max(seq), 0) FROM decisions", 0,
                              NULL, &st, err, cap);
    if (!res) return st;
    int64_t max_seq = pgcl_pg_int(res, 0, 0);
    PQclear(res);
    return pgcl_export_create_from(export_chunk, store, since, until, max_seq, fmt, out, err, cap);
}

/* ---- a decision as recorded, with its stored input (re-score) ---- */

/* The columns of STORED_DECISION_SQL, in this order. */
enum {
    COL_MODEL_NAME,
    COL_MODEL_VERSION,
    COL_MODEL_SHA256,
    COL_LABEL,
    COL_DECISION,
    COL_PROBABILITIES,
    COL_TOXICITY,
    COL_INPUT,
    COL_INPUT_DTYPE,
    COL_WAS_STORED
};

static const char STORED_DECISION_SQL[] =
    "SELECT d.model_name, d.model_version, d.model_sha256, d.label, d.decision, d.probabilities, d.toxicity,"
    " i.input, d.input_dtype, d.input_digest IS NOT NULL"
    " FROM decisions AS d LEFT JOIN decision_inputs AS i ON i.decision_seq = d.seq WHERE d.decision_id = $1";

/* Copies the row (the input first, for its alignment, then the texts) into one allocation. */
static pgcl_status take_stored_decision(const PGresult *res, pgcl_stored_decision *out, char *err, int cap) {
    unsigned char *input = NULL;
    size_t input_bytes = 0;
    pgcl_status st = pgcl_pg_bytea(res, 0, COL_INPUT, &input, &input_bytes);
    if (st == PGCL_ERR_NOMEM) return out_of_memory(err, cap);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "reading the decision: an input that is not bytea text");
        return PGCL_ERR_DB;
    }
    const char *dtype = pgcl_pg_text(res, 0, COL_INPUT_DTYPE);
    bool input_stored = input && dtype;
    /* stored once (its digest is recorded), dropped by retention */
    out->input_dropped = !input && (bool_of(res, 0, COL_WAS_STORED) || dtype);
    static const int text_cols[] = {COL_MODEL_NAME, COL_MODEL_VERSION, COL_MODEL_SHA256,
                                    COL_LABEL,      COL_DECISION,      COL_PROBABILITIES};
    enum { N_TEXTS = sizeof text_cols / sizeof text_cols[0] };
    size_t total = input_stored ? input_bytes : 0;
    for (int t = 0; t < N_TEXTS; t++)
        total += (size_t)PQgetlength(res, 0, text_cols[t]) + 1;
    if (!(out->owned = malloc(total))) {
        free(input);
        return out_of_memory(err, cap);
    }
    unsigned char *p = out->owned;
    if (input_stored) {
        memcpy(p, input, input_bytes);
        out->input = p;
        out->input_bytes = (int)input_bytes;
        out->input_half = strcmp(dtype, "f16") == 0;
        p += input_bytes;
    }
    free(input);
    const char **texts[N_TEXTS] = {&out->original.model_name,   &out->original.model_version,
                                   &out->original.model_sha256, &out->original.label,
                                   &out->original.decision,     &out->original.probabilities_json};
    for (int t = 0; t < N_TEXTS; t++) {
        const char *text = pgcl_pg_text(res, 0, text_cols[t]);
        size_t len = (size_t)PQgetlength(res, 0, text_cols[t]);
        *texts[t] = text ? memcpy(p, text, len + 1) : NULL;
        p += len + 1;
    }
    out->original.has_toxicity = !PQgetisnull(res, 0, COL_TOXICITY);
    out->original.toxicity = pgcl_pg_double(res, 0, COL_TOXICITY);
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_stored_decision(pgcl_audit *store, const char *decision_id, pgcl_stored_decision *out,
                                         char *err, int cap) {
    const char *values[] = {decision_id};
    pgcl_status st;
    PGresult *res = read_once(store, "reading the decision", STORED_DECISION_SQL, 1, values, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgcl_errorf(err, cap, "no decision with id %.64s", decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    st = take_stored_decision(res, out, err, cap);
    PQclear(res);
    return st;
}

/* ---- the scoring routes, the operators ---- */

static const char IDEMPOTENCY_SQL[] = "SELECT body_sha256, request_id, answer, request_sha256 FROM idempotency_keys"
                                      " WHERE scope = $1 AND idem_key = $2 AND expires_at > $3";

pgcl_status pgcl_pg_read_idempotency_key(pgcl_audit *store, const char *scope, const char *key, const char *now,
                                         bool *found, pgcl_idem_record *out, char *err, int cap) {
    *found = false;
    memset(out, 0, sizeof *out);
    const char *values[] = {scope, key, now};
    pgcl_status st;
    PGresult *res = read_once(store, "idempotency lookup", IDEMPOTENCY_SQL, 3, values, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) > 0) {
        if (pgcl_idem_record_set(out, pgcl_pg_text(res, 0, 0), pgcl_pg_text(res, 0, 1), pgcl_pg_text(res, 0, 2),
                                 pgcl_pg_text(res, 0, 3)))
            *found = true;
        else
            st = out_of_memory(err, cap);
    }
    PQclear(res);
    return st;
}

static const char ACTIVATIONS_SQL[] = "SELECT (details::jsonb)->>'model', (details::jsonb)->>'version'"
                                      " FROM admin_events WHERE action = 'model.activate' ORDER BY seq";

pgcl_status pgcl_pg_read_activations(pgcl_audit *store, pgcl_activation_fn on_activation, void *ctx, char *err,
                                     int cap) {
    pgcl_status st;
    PGresult *res = read_once(store, "reading the audit database", ACTIVATIONS_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *model = pgcl_pg_text(res, i, 0), *version = pgcl_pg_text(res, i, 1);
        if (model && version) on_activation(model, version, ctx);
    }
    PQclear(res);
    return PGCL_OK;
}

static int decision_kind_index(const char *name) {
    for (int i = 0; name && i < PGCL_DECISION_KINDS; i++)
        if (strcmp(name, pgcl_decision_kind_names[i]) == 0) return i;
    return -1;
}

/* One row per (primary decision, shadow decision) pair. */
static const char SHADOW_REPORT_SQL[] =
    "SELECT primary_decision, shadow_decision, count(*), count(*) FILTER (WHERE primary_label = shadow_label),"
    " sum(abs(primary_score - shadow_score)), max(abs(primary_score - shadow_score))"
    " FROM shadow_decisions WHERE model_name = $1 AND shadow_version = $2"
    " GROUP BY primary_decision, shadow_decision"
    " ORDER BY primary_decision COLLATE \"C\", shadow_decision COLLATE \"C\"";

pgcl_status pgcl_pg_read_shadow_report(pgcl_audit *store, const char *model, const char *shadow_version,
                                       pgcl_shadow_report *out, char *err, int cap) {
    memset(out, 0, sizeof *out);
    const char *values[] = {model, shadow_version};
    pgcl_status st;
    PGresult *res = read_once(store, "reading the audit database", SHADOW_REPORT_SQL, 2, values, &st, err, cap);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *primary = pgcl_pg_text(res, i, 0), *shadow = pgcl_pg_text(res, i, 1);
        int64_t n = pgcl_pg_int(res, i, 2);
        int p = decision_kind_index(primary), q = decision_kind_index(shadow);
        if (p >= 0 && q >= 0) out->decision_matrix[p][q] = n;
        out->items += n;
        if (primary && shadow && strcmp(primary, shadow) == 0) out->decision_agreements += n;
        out->label_agreements += pgcl_pg_int(res, i, 3);
        out->sum_abs_score_difference += pgcl_pg_double(res, i, 4);
        if (pgcl_pg_double(res, i, 5) > out->max_abs_score_difference)
            out->max_abs_score_difference = pgcl_pg_double(res, i, 5);
    }
    PQclear(res);
    return PGCL_OK;
}

static const char ARCHIVE_WHERE_SQL[] =
    "SELECT c.seq, c.archived_before, c.created_at, c.archive_name FROM audit_cuts AS c WHERE c.archived_before > $1"
    " AND c.decisions_through > coalesce((SELECT max(p.decisions_through) FROM audit_cuts AS p WHERE p.seq < c.seq),"
    " 0) ORDER BY c.seq LIMIT 1";

pgcl_status pgcl_pg_read_archive_where(pgcl_audit *store, const char *decision_id, pgcl_archive_where *out, char *err,
                                       int cap) {
    /* As the SQLite store (pgcl_archive_where_is): the first cut (audit_cuts, pgcl_pg_archive_run)
     * that archived decisions and whose horizon lies after the time in the id (a cut inside the
     * contest window may archive other events only); entry_seq is that cut's seq. */
    memset(out, 0, sizeof *out);
    char made[32];
    if (!pgcl_archive_id_time(decision_id, made)) return PGCL_OK;
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_pool_acquire(pgcl_audit_pg_of(store)->readers, PGCL_PG_READ_WAIT_MS, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *values[] = {made};
    PGresult *res = pgcl_pg_query(conn, "audit_cuts", ARCHIVE_WHERE_SQL, 1, values, &st, err, cap);
    if (res && PQntuples(res) == 1) {
        out->archived = true;
        out->entry_seq = pgcl_pg_int(res, 0, 0);
        snprintf(out->before, sizeof out->before, "%s", pgcl_pg_text(res, 0, 1));
        snprintf(out->created_at, sizeof out->created_at, "%s", pgcl_pg_text(res, 0, 2));
        snprintf(out->archive_name, sizeof out->archive_name, "%s", pgcl_pg_text(res, 0, 3));
    }
    PQclear(res);
    pgcl_pg_pool_release(pgcl_audit_pg_of(store)->readers, conn);
    return st;
}
