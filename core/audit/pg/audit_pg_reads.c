/* The PostgreSQL store's reviewers' reads (audit_pg.h; audit_pg_read_internal.h says what all the
 * reads share): one decision's record (its row, its chain entry, its contests, in one snapshot),
 * the decision lists (keyset pages newest first, each filter served by its index) and the contest
 * queue (open contests oldest first, resolved ones newest first). */
#include "audit_pg_read_internal.h"

#include <stdlib.h>
#include <string.h>

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
    pgcl_pg_facts_of(a, res, 0, 23, &rec->facts);
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
        pgcl_pg_resolution_of(a, res, i, 5, &c->resolution);
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
    PGresult *res = pgcl_pg_read_txn_query(conn, RECORD_SQL, 1, id_values, &st, err, cap);
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
    if (!(res = pgcl_pg_read_txn_query(conn, CHAIN_SQL, 1, seq_values, &st, err, cap))) return st;
    if (PQntuples(res) > 0) {
        rec->has_chain = true;
        rec->writer_id = text_of(a, res, 0, 0);
        rec->chain_seq = opt_int_of(res, 0, 1);
        rec->chain_hash = text_of(a, res, 0, 2);
    }
    PQclear(res);
    if (a->failed) return out_of_memory(err, cap);

    if (!(res = pgcl_pg_read_txn_query(conn, RECORD_CONTESTS_SQL, 1, id_values, &st, err, cap))) return st;
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
    pgcl_status st = pgcl_pg_read_txn_open(store, &conn, err, cap);
    if (st == PGCL_OK) st = read_record(conn, decision_id, arena, out, err, cap);
    pgcl_pg_read_txn_close(store, conn);
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
static bool window_bounded(const pgcl_decision_filter *f) {
    return (f->since || f->until) && !contest_driven(f);
}

/* The time window's seq range below the cursor into lo and hi ("" when unknown: a window too
 * large to bound), in conn's read transaction (window_bounded(f)). An empty window gives lo > hi. */
static pgcl_status window_bounds(PGconn *conn, const pgcl_decision_filter *f, const char *before, int_text *lo,
                                 int_text *hi, char *err, int cap) {
    int_text probe_rows = int_param(WINDOW_PROBE_ROWS);
    const char *values[] = {before, f->since, f->until, probe_rows.s};
    pgcl_status st;
    PGresult *res = pgcl_pg_read_txn_query(conn, WINDOW_PROBE_SQL, 4, values, &st, err, cap);
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
        res = pgcl_pg_read_once(store, "reading the audit database", sql, LIST_PARAMS, values, &st, err, cap);
    } else { /* the window's bounds and the page from one snapshot */
        PGconn *conn = NULL;
        st = pgcl_pg_read_txn_open(store, &conn, err, cap);
        if (st == PGCL_OK) st = window_bounds(conn, f, values[0], &lo, &hi, err, cap);
        if (st == PGCL_OK) {
            values[11] = lo.s[0] ? lo.s : NULL;
            values[12] = hi.s[0] ? hi.s : NULL;
            res = pgcl_pg_read_txn_query(conn, sql, LIST_PARAMS, values, &st, err, cap);
        }
        pgcl_pg_read_txn_close(store, conn);
    }
    if (!res) return st;
    int n_rows = PQntuples(res) > limit ? limit : PQntuples(res);
    pgcl_decision_summary *rows = n_rows ? pgcl_row_arena_alloc(arena, (size_t)n_rows * sizeof *rows) : NULL;
    for (int i = 0; i < n_rows && rows; i++) {
        pgcl_pg_summary_of(arena, res, i, &rows[i]);
        pgcl_pg_facts_of(arena, res, i, 11, &rows[i].facts);
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
    PGresult *res = pgcl_pg_read_once(store, "reading the audit database",
                                      open ? CONTESTS_OPEN_SQL : CONTESTS_RESOLVED_SQL, 2, values, &st, err, cap);
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
        pgcl_pg_resolution_of(arena, res, i, 11, &c->resolution);
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
