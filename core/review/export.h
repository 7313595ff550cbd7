/* The export of the decisions (GET /v1/audit/export) as NDJSON or CSV, streamed in chunks, and the
 * neutralisation of CSV cells that a spreadsheet would take for formulas. The export is a file
 * format, not an HTTP answer: it is written here, byte for byte as documented in docs/audit.md
 * ("Export"); server/ only hands the stream to the client. */
#ifndef PGCL_EXPORT_H
#define PGCL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "reader_pool.h"
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

/* Copies up to max bytes of the export into buf. Returns the number of bytes, 0 at the end, or
 * -1 on a database error (the reason is logged). Not thread-safe on one export. */
long pgcl_export_read(pgcl_export *e, char *buf, size_t max);

void pgcl_export_destroy(pgcl_export *e); /* accepts NULL */

/* True when a CSV cell starting with text would be taken for a formula by a spreadsheet (and the
 * export neutralises it: docs/audit.md, "Export"). */
bool pgcl_csv_formula_trigger(const char *text);

#endif
