/* The SQLite store's transparency log (issue 28): its rows (migration 0012: log_writers,
 * log_leaves, log_tile_roots, log_checkpoints) as log/log.h's pgcl_log_ops, and the writer's side
 * of a write transaction, used beside the old chain (chain.h) by every connection that writes
 * events: the daemon's audit writer (audit_sqlite.c) and the keys CLI (keys.c) in another process.
 *
 * A SQLite store has ONE writer, whose id is fixed when the log begins (the database's creation or
 * its upgrade to 0012: the --writer-id given then, else the host name) and kept in log_writers, so
 * that a restart on another host continues the same log. Writers follow the chain's pattern:
 * begin() inside the write transaction (BEGIN IMMEDIATE: the state read is the one this
 * transaction extends), add() each event's record in commit order before its row is inserted (the
 * row stores the leaf index), seal() before COMMIT (leaves, completed tile roots and the new state
 * written in the same transaction), committed() after COMMIT succeeded; mark()/rewind() around a
 * savepoint. A database written before the log gets, in its first log transaction, a legacy_head
 * leaf binding the old chain's head as leaf 0 (record.h). */
#ifndef PGCL_SQLITE_LOG_H
#define PGCL_SQLITE_LOG_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "audit_log.h"
#include "log/log.h"
#include "log/record.h"
#include "status.h"

/* ---- the rows: pgcl_log_ops over one connection and one writer ---- */

typedef struct pgcl_sqlite_log_rows pgcl_sqlite_log_rows;

/* Rows of writer_id's log on db (statements prepared on first use; a read connection may use the
 * reads only). NULL: out of memory. Destroy before closing db. */
pgcl_sqlite_log_rows *pgcl_sqlite_log_rows_create(sqlite3 *db, const char *writer_id);
void pgcl_sqlite_log_rows_destroy(pgcl_sqlite_log_rows *r); /* accepts NULL */

/* The operations; their ctx is a pgcl_sqlite_log_rows. */
extern const pgcl_log_ops pgcl_sqlite_log_ops;

/* The log's state as stored (log_writers): *found false when the database has no log yet (or no
 * migration 0012: then PGCL_OK too). The one writer's row; PGCL_ERR_FORMAT when there are several. */
pgcl_status pgcl_sqlite_log_state(sqlite3 *db, pgcl_audit_log_info *out, bool *found, char *err, int cap);

/* Inside a write transaction: the log's writer row, created with id `writer_id` (NULL or "": the
 * host name) at time `now` when the database has none; *out (may be NULL) the stored id, which may
 * differ from writer_id (an existing log keeps its id). A database without migration 0012:
 * PGCL_ERR_UNSUPPORTED. */
pgcl_status pgcl_sqlite_log_ensure_writer(sqlite3 *db, const char *writer_id, const char *now,
                                          char out[PGCL_LOG_WRITER_ID_MAX + 1], char *err, int cap);

/* ---- the writer's side of a transaction ---- */

typedef struct pgcl_sqlite_log pgcl_sqlite_log;

/* The log writer over db (read-write). A database without migration 0012 (the keys CLI on a store
 * not yet upgraded) gets a log that records nothing: its events are bound by the legacy_head leaf
 * once the store is upgraded. NULL with err set on failure. Destroy before closing db. */
pgcl_sqlite_log *pgcl_sqlite_log_create(sqlite3 *db, char *err, int cap);
void pgcl_sqlite_log_destroy(pgcl_sqlite_log *l); /* accepts NULL */

/* Inside an open write transaction, after pgcl_chain_begin (so that a pre-log chain's head is
 * final): reads the log's state (creating the writer row when missing), and when the log is empty
 * but the database holds events, adds the legacy_head leaf. now: the transaction's time. */
pgcl_status pgcl_sqlite_log_begin(pgcl_sqlite_log *l, const char *now, char *err, int cap);

/* Adds the record of an event as the next leaf; *leaf_index its index (-1 when this log records
 * nothing: store NULL in the row). PGCL_ERR_INVALID (err names the field) when r breaks a rule. */
pgcl_status pgcl_sqlite_log_add(pgcl_sqlite_log *l, const pgcl_record *r, int64_t *leaf_index, char *err, int cap);

/* Adds decision row `row` committed at created_at (pgcld's RFC 3339 form) with its stored input's
 * SHA-256 input_digest (NULL: none stored), and its policy's leaf first when needed (log.h). */
pgcl_status pgcl_sqlite_log_add_decision(pgcl_sqlite_log *l, const pgcl_decision_row *row, const char *created_at,
                                         const unsigned char *input_digest, int64_t *leaf_index, char *err, int cap);

size_t pgcl_sqlite_log_mark(const pgcl_sqlite_log *l);
void pgcl_sqlite_log_rewind(pgcl_sqlite_log *l, size_t mark);

/* Before COMMIT: writes the pending leaves, the tile roots they complete and the new state
 * (log_writers) in the open transaction. Nothing when nothing is pending. */
pgcl_status pgcl_sqlite_log_seal(pgcl_sqlite_log *l, char *err, int cap);

/* After COMMIT succeeded (log.h's pgcl_log_committed). */
void pgcl_sqlite_log_committed(pgcl_sqlite_log *l);

/* The writer's id as of the last begin() ("" before any, or when this log records nothing). */
const char *pgcl_sqlite_log_writer_id(const pgcl_sqlite_log *l);

#endif
