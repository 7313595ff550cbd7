/* The PostgreSQL store's export (audit_pg.h: pgcl_pg_open_export; export.h writes the file; the
 * reads' shape in audit_pg_read_internal.h).
 * Rows in (created_at, seq) order, a chunk of PGCL_EXPORT_CHUNK_ROWS at a time, each chunk one
 * statement on a pooled connection taken and given back within it (no transaction stays open
 * between chunks, memory stays constant), keyset-paged on (created_at, seq) through
 * decisions_created_at_seq; the newest seq is fixed when the export opens (committed seqs are a
 * prefix: rows committed later on any writer are not in it). The position is the export's own
 * (export.h). */
#include "audit_pg_read_internal.h"

#include <stdlib.h>

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
    PGresult *res = pgcl_pg_read_once(store, "reading the audit database", EXPORT_CHUNK_SQL, 6, values, &st, err, cap);
    if (!res) return -1;
    int result = 0;
    for (int i = 0; i < PQntuples(res) && result == 0; i++) {
        pgcl_row_arena a = {0};
        pgcl_decision_summary row;
        pgcl_pg_summary_of(&a, res, i, &row);
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
    PGresult *res = pgcl_pg_read_once(store, "reading the audit database",
                                      "SELECT coalesce(max(seq), 0) FROM decisions", 0, NULL, &st, err, cap);
    if (!res) return st;
    int64_t max_seq = pgcl_pg_int(res, 0, 0);
    PQclear(res);
    return pgcl_export_create_from(export_chunk, store, since, until, max_seq, fmt, out, err, cap);
}
