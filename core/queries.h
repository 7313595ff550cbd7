/* Reviewer reads of the audit database: one decision with its provenance, chain entry, contest
 * history and effective outcome; filtered decision lists with keyset cursors; the contest queue;
 * figures for a time range; and a chunked export. This is the SQL side only (no HTTP): every value
 * that comes from a caller is bound as a parameter, never pasted into SQL text.
 *
 * Connections: reads run on read-only connections taken from a small pool (pgcl_qpool), opened
 * lazily, so that readers never wait for the audit writer (WAL) and never hold a connection longer
 * than one query (one export chunk). The daemon uses one process-wide pool per database path
 * (pgcl_queries_pool), created on first use and destroyed by pgcl_queries_shutdown().
 *
 * Pagination: lists are ordered by a table's seq (INTEGER PRIMARY KEY, insertion order) and resume
 * with `seq < last` (newest first) or `seq > last` (oldest first). Audit rows are append-only and
 * new rows get higher seqs, so a walk that starts while rows are being inserted sees every row that
 * existed when it started exactly once. Cursors are opaque strings (pgcl_cursor_*). */
#ifndef PGCL_QUERIES_H
#define PGCL_QUERIES_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* ---- the reader pool ---- */

typedef struct pgcl_qpool pgcl_qpool;

/* A pool of at most `size` read-only connections to db_path (size <= 0: max(4, online CPUs)).
 * Nothing is opened until the first acquire. Returns NULL with err set on failure. */
pgcl_qpool *pgcl_qpool_create(const char *db_path, int size, char *err, int cap);

/* Closes every connection. No connection may be out. Accepts NULL. */
void pgcl_qpool_destroy(pgcl_qpool *p);

/* Takes a connection, opening one if none is free and fewer than `size` are open, else waiting
 * up to PGCL_DB_BUSY_TIMEOUT_MS for one to come back. PGCL_ERR_BUSY: none came back in time;
 * PGCL_ERR_DB: opening failed (err says why). Thread-safe. */
pgcl_status pgcl_qpool_acquire(pgcl_qpool *p, sqlite3 **out, char *err, int cap);

/* Gives a connection back (an open transaction is rolled back first). Thread-safe. */
void pgcl_qpool_release(pgcl_qpool *p, sqlite3 *db);

/* The process-wide pool for db_path, created on first use (thread-safe). Returns NULL with err
 * set only when out of memory. */
pgcl_qpool *pgcl_queries_pool(const char *db_path, char *err, int cap);

/* Destroys every process-wide pool. Call once at shutdown, after the HTTP server stopped. */
void pgcl_queries_shutdown(void);

/* ---- timestamps ---- */

#define PGCL_QTIME_LEN 27 /* 2026-11-21T10:33:00.123456Z, the format of every *_at column */

/* Parses an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM); 't'/'z' accepted; a space
 * in place of '+' before the offset too, since query strings decode '+' as a space) into Unix
 * microseconds, rounding a finer fraction up to the next microsecond (so `x >= t` and `x < t`
 * mean the same for the stored microsecond values). Returns false for anything else, including
 * impossible dates and years outside 0000..9999 after conversion to UTC. */
bool pgcl_time_parse(const char *text, int64_t *us);

/* Formats Unix microseconds in the columns' format (UTC, 6 fraction digits, 'Z'). */
void pgcl_time_format(int64_t us, char out[PGCL_QTIME_LEN + 1]);

/* Current time in Unix microseconds. */
int64_t pgcl_time_now_us(void);

/* ---- cursors ---- */

#define PGCL_CURSOR_LEN 32     /* base64url (no padding) of 24 bytes */
#define PGCL_CURSOR_BINDING 8  /* bytes of the digest that ties a cursor to its listing's filters */

/* Kinds keep a cursor of one listing from being used for another. */
#define PGCL_CURSOR_DECISIONS 'd'
#define PGCL_CURSOR_CONTESTS_OPEN 'o'
#define PGCL_CURSOR_CONTESTS_RESOLVED 'r'

/* Encodes (version, kind, seq, binding) with a 6-byte keyed BLAKE2b check, as base64url. binding:
 * pgcl_decision_filter_binding of the listing's filters, or zeros for listings without filters. */
void pgcl_cursor_encode(char kind, int64_t seq, const unsigned char binding[PGCL_CURSOR_BINDING],
                        char out[PGCL_CURSOR_LEN + 1]);

typedef enum pgcl_cursor_check {
    PGCL_CURSOR_OK,
    PGCL_CURSOR_INVALID,       /* not a cursor this code produced for that kind (length, alphabet,
                                * version, kind, check, or seq < 1) */
    PGCL_CURSOR_OTHER_FILTERS, /* made by a listing with other filters */
} pgcl_cursor_check;

/* Decodes a cursor of the given kind made with the given binding. */
pgcl_cursor_check pgcl_cursor_decode(const char *text, char kind, const unsigned char binding[PGCL_CURSOR_BINDING],
                                     int64_t *seq);

/* ---- decisions ---- */

typedef enum pgcl_contest_filter {
    PGCL_CONTEST_ANY = 0,   /* no filter */
    PGCL_CONTEST_OPEN,      /* has an open (unresolved) contest */
    PGCL_CONTEST_RESOLVED,  /* has contests, none open */
    PGCL_CONTEST_CONTESTED, /* has any contest */
    PGCL_CONTEST_NONE,      /* was never contested */
} pgcl_contest_filter;

/* Every member is optional (NULL / ANY). since and until are in the columns' format (see
 * pgcl_time_format); since is inclusive, until exclusive. version requires model. */
typedef struct pgcl_decision_filter {
    const char *model, *version, *label, *decision, *item_id, *request_id;
    const char *since, *until;
    pgcl_contest_filter contest;
} pgcl_decision_filter;

/* The 8-byte digest of f's canonical encoding (each member absent, or present with its length and
 * bytes, in declaration order; since and until as given here, in the columns' format; the contest
 * filter as a byte) that ties a decision listing's cursors to its filters. `limit` and the cursor
 * itself are no filters: a listing may change its page size. */
void pgcl_decision_filter_binding(const pgcl_decision_filter *f, unsigned char out[PGCL_CURSOR_BINDING]);

/* The full record of one decision as a JSON object (see routes_audit.c for the field list),
 * read in one transaction. PGCL_ERR_NOT_FOUND: no such decision_id. */
pgcl_status pgcl_queries_decision(pgcl_qpool *p, const char *decision_id, json_t **out, char *err, int cap);

/* Up to `limit` decision summaries matching f, newest first, with seq < before_seq (0: from the
 * newest). *out is a JSON array; *next_before is the seq to pass next time, or 0 when there are
 * no more rows. */
pgcl_status pgcl_queries_decisions(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   json_t **out, int64_t *next_before, char *err, int cap);

/* The SQL that pgcl_queries_decisions() would run for these arguments and its EXPLAIN QUERY PLAN,
 * as {"sql": text, "plan": [lines]} (for the benchmark and for tests). */
pgcl_status pgcl_queries_decisions_explain(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                           json_t **out, char *err, int cap);

/* ---- contests ---- */

/* Up to `limit` contests: open ones oldest first (the review queue, seq > after_seq; 0 = from the
 * start), or resolved ones most recently resolved first (resolution seq < after_seq; 0 = from the
 * newest). Each item carries the deadline (filed_at + window_days) and its age at now_us.
 * *next is the cursor seq for the next page, or 0. */
pgcl_status pgcl_queries_contests(pgcl_qpool *p, bool open, int64_t after_seq, int limit, int window_days,
                                  int64_t now_us, json_t **out, int64_t *next, char *err, int cap);

/* ---- figures ---- */

/* Decision counts by model version, label and decision (created_at in range) and contest figures
 * (contests filed in range): filed, resolved, open, median resolution time, overturn rate per
 * model version. since/until may be NULL. */
pgcl_status pgcl_queries_stats(pgcl_qpool *p, const char *since, const char *until, json_t **out, char *err, int cap);

/* ---- export ---- */

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
