/* The PostgreSQL store's transparency figures (audit_pg.h: pgcl_pg_read_stats; the reads' shape in
 * audit_pg_read_internal.h): decision counts by model version, label and decision, and the
 * contests filed, resolved and overturned with their median time to resolution, all in one
 * snapshot, each figure the SQLite store's to the last bit (core/review/stats_reads.c). */
#include "audit_pg_read_internal.h"

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
        PGresult *res =
            pgcl_pg_read_txn_query(conn, window ? STATS_WINDOW_SQL : STATS_WHOLE_SQL[k], 2, values, &st, err, cap);
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
    PGresult *res = pgcl_pg_read_txn_query(conn, STATS_CONTESTS_SQL, 2, values, &st, err, cap);
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
        if (!(res = pgcl_pg_read_txn_query(conn, STATS_MEDIAN_SQL, 4, median_values, &st, err, cap))) return st;
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
    pgcl_status st = pgcl_pg_read_txn_open(store, &conn, err, cap); /* one snapshot for every figure */
    if (st == PGCL_OK) st = stats_decisions(conn, since, until, arena, out, err, cap);
    if (st == PGCL_OK) st = stats_contests(conn, since, until, arena, out, err, cap);
    pgcl_pg_read_txn_close(store, conn);
    if (st != PGCL_OK) *out = (pgcl_audit_stats){0};
    return st;
}
