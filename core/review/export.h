/* The export of the decisions (GET /v1/audit/export) as NDJSON or CSV, streamed in chunks, and the
 * neutralisation of CSV cells that a spreadsheet would take for formulas. The export is a file
 * format, not an HTTP answer: it is written here, byte for byte as documented in docs/audit.md
 * ("Export"); server/ only hands the stream to the client. */
#ifndef PGCL_EXPORT_H
#define PGCL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reader_pool.h"
#include "review_rows.h"
#include "status.h"

typedef enum pgcl_export_format { PGCL_EXPORT_NDJSON, PGCL_EXPORT_CSV } pgcl_export_format;

typedef struct pgcl_export pgcl_export;

/* An export of the decisions with created_at in [since, until) (either may be NULL) that exist
 * now: the newest seq is fixed here, so rows committed while the export runs are not in it.
 * Rows come in (created_at, seq) order, read in chunks of a few hundred rows, each on a pooled
 * connection taken and given back within the read() that needs it: no read transaction stays
 * open between chunks, and memory stays constant whatever the size of the export. */
pgcl_status pgcl_export_create(pgcl_qpool *p, const char *since, const char *until, pgcl_export_format fmt,
                               pgcl_export **out, char *err, int cap);

/* Where an export stands, for the store reading its rows: the rows it covers (created_at in
 * [since, until), each NULL when unbounded; seq <= max_seq) and the last row it has formatted
 * ((last_ts, last_seq): "" and 0 before the first). */
typedef struct pgcl_export_position {
    const char *since, *until;
    int64_t max_seq;
    const char *last_ts;
    int64_t last_seq;
} pgcl_export_position;

#define PGCL_EXPORT_CHUNK_ROWS 256 /* rows per chunk */

/* How a store reads an export's rows (ctx: the store's, as given to pgcl_export_create_from): the
 * next PGCL_EXPORT_CHUNK_ROWS rows (fewer at the end) after at's last row, within its bounds, in
 * (created_at, seq) order, each passed to pgcl_export_put_row. 0, or -1 with err set (the export
 * then ends with -1). */
typedef int (*pgcl_export_chunk_fn)(void *ctx, pgcl_export *e, const pgcl_export_position *at, char *err, int cap);

/* An export whose rows chunk reads from ctx (not owned: it must outlive the export): created_at in
 * [since, until) (either may be NULL), seq <= max_seq (the newest seq when the export opens).
 * Formats and header as pgcl_export_create, which is this with the SQLite store's chunks. */
pgcl_status pgcl_export_create_from(pgcl_export_chunk_fn chunk, void *ctx, const char *since, const char *until,
                                    int64_t max_seq, pgcl_export_format fmt, pgcl_export **out, char *err, int cap);

/* Formats one row (for a chunk function): its summary, the stored probabilities JSON text (NULL:
 * null) and the vector's float32 little-endian bytes, and moves the export's position past it
 * (rows must come in (created_at, seq) order after the last one: asserted). False when out of
 * memory. */
bool pgcl_export_put_row(pgcl_export *e, const pgcl_decision_summary *row, const char *probabilities,
                         const unsigned char *vector, size_t vector_bytes);

/* Copies up to max bytes of the export into buf. Returns the number of bytes, 0 at the end, or
 * -1 on a database error (the reason is logged). Not thread-safe on one export. */
long pgcl_export_read(pgcl_export *e, char *buf, size_t max);

void pgcl_export_destroy(pgcl_export *e); /* accepts NULL */

/* True when a CSV cell starting with text would be taken for a formula by a spreadsheet (and the
 * export neutralises it: docs/audit.md, "Export"). */
bool pgcl_csv_formula_trigger(const char *text);

#endif
