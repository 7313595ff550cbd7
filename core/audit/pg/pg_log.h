/* The PostgreSQL store's side of each writer's transparency log (issue 28; log/log.h): the rows of
 * migrations/pg/0003_log.sql over libpq, for one writer.
 *
 *   pgcl_pg_log_rows   pgcl_log_ops over one connection and one writer id: the reads (in
 *                      whatever transaction or snapshot the connection is in) and, for the writer,
 *                      the writes gathered into a batch that goes as one multi-row INSERT per
 *                      table (binary array parameters, pg_array.h) in the commit's pipeline, not a
 *                      round trip per leaf.
 *   pgcl_pg_log        one writer's log: its state (size, root) as committed, the appender, the
 *                      batch; used by audit_pg_writer.c in each group's transaction:
 *                        begin → add (decisions, records; mark/rewind around savepoints) → seal
 *                        (connection not in pipeline mode: the appender may read earlier rows) →
 *                        send each of pgcl_pg_log_statement's statements → COMMIT → committed.
 *
 * A log begins (pgcl_pg_log_load, at the writer's (re)connection) with its log_writers row, in a
 * transaction of its own; when the writer's old audit chain holds events already, the log's first
 * leaf is a legacy_head record (record.h) binding that chain's head, the writer id set. */
#ifndef PGCL_PG_LOG_H
#define PGCL_PG_LOG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "log/log.h"
#include "pg_array.h"
#include "record.h"
#include "status.h"

/* ---- rows over a connection ---- */

typedef struct pgcl_pg_log_batch pgcl_pg_log_batch;
struct pgcl_pg_log_edge;

typedef struct pgcl_pg_log_rows {
    PGconn *conn;
    const char *writer_id;
    pgcl_pg_log_batch *batch;            /* the writer's: where writes go (NULL: a reader, writes refused) */
    const struct pgcl_pg_log_edge *edge; /* the writer's copy of its tree's right edge (NULL: none) */
} pgcl_pg_log_rows;

/* ops over a pgcl_pg_log_rows (its ctx). Reads of a writer's rows see its batch's leaves and tile
 * roots (not yet sent) and its edge first, and read only the rest from the server; writes without
 * a batch are PGCL_ERR_UNSUPPORTED. */
extern const pgcl_log_ops pgcl_pg_log_ops;

/* ---- one writer's log ---- */

typedef struct pgcl_pg_log pgcl_pg_log;

pgcl_pg_log *pgcl_pg_log_create(const char *writer_id); /* NULL: out of memory */
void pgcl_pg_log_destroy(pgcl_pg_log *l);               /* accepts NULL */

/* The legacy head a log that begins now binds: the writer's audit chain head (seq >= 2: it has
 * events) and its log tree root over entries 1..head_seq. */
typedef struct pgcl_pg_chain_head {
    int64_t seq;
    pgcl_merkle_hash hash;
    pgcl_merkle_hash log_root;
} pgcl_pg_chain_head;

/* At (re)connection, on conn outside any transaction (the writer id's lock held): reads the log's
 * state, or begins the log (its log_writers row, and leaf 0 = the legacy head when head is not
 * NULL) in a transaction of its own. */
pgcl_status pgcl_pg_log_load(pgcl_pg_log *l, PGconn *conn, const pgcl_pg_chain_head *head, char *err, int cap);

/* The committed state (as loaded, then as each committed transaction left it). */
uint64_t pgcl_pg_log_size(const pgcl_pg_log *l);

/* A group's transaction begins: no leaf pending, the batch empty. */
void pgcl_pg_log_begin(pgcl_pg_log *l);
/* Decision row r as committed at created_at (the transaction's time) with its stored input's
 * digest (NULL: none stored): its record (record_rows.h), added; *leaf_index its leaf. */
pgcl_status pgcl_pg_log_add_decision(pgcl_pg_log *l, const pgcl_decision_row *r, const char *created_at,
                                     const unsigned char *input_digest, uint64_t *leaf_index, char *err, int cap);
pgcl_status pgcl_pg_log_add_record(pgcl_pg_log *l, const pgcl_record *r, uint64_t *leaf_index, char *err, int cap);
size_t pgcl_pg_log_mark(const pgcl_pg_log *l);
void pgcl_pg_log_rewind(pgcl_pg_log *l, size_t mark);

/* Before COMMIT, on conn with no pipeline open: the pending leaves and the tile roots they complete
 * into the batch, and the new state. Nothing to send when nothing is pending. */
pgcl_status pgcl_pg_log_seal(pgcl_pg_log *l, PGconn *conn, char *err, int cap);

/* One statement of the sealed batch, to be sent in the commit's transaction: the leaves (one
 * INSERT per chunk of them), the tile roots, and last the state row, which fails the transaction
 * when the log's stored state is not the one this writer began from (another process wrote this
 * writer's log). values[i] text, or binary bytea when binary_len[i] >= 0. */
#define PGCL_PG_LOG_STMT_PARAMS 5
typedef struct pgcl_pg_log_stmt {
    const char *what, *sql;
    int n;
    const char *values[PGCL_PG_LOG_STMT_PARAMS];
    int binary_len[PGCL_PG_LOG_STMT_PARAMS];
} pgcl_pg_log_stmt;
/* Statement i (0, 1, ...) of the sealed batch into *out: false past the last one (or when the
 * batch ran out of memory: *oom set). The values point into l until the next begin. */
bool pgcl_pg_log_statement(pgcl_pg_log *l, int i, pgcl_pg_log_stmt *out, bool *oom);

/* After COMMIT succeeded: the sealed state is the log's. */
void pgcl_pg_log_committed(pgcl_pg_log *l);

#endif
