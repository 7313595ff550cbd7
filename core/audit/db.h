/* Small SQLite helpers shared by the modules that talk to the audit database (audit store,
 * keys): statement execution with the error turned into text where it happens, and opening
 * connections with the project's busy timeout. */
#ifndef PGCL_DB_H
#define PGCL_DB_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGCL_DB_BUSY_TIMEOUT_MS 5000

/* Runs one or more statements. Returns the SQLite result code; on failure err holds the message. */
int pgcl_db_exec(sqlite3 *db, const char *sql, char *err, int cap);

/* Opens path read-only with the busy timeout and extended result codes. path may also be a
 * "file:" URI (pgcl_db_untouched_uri's). Returns NULL with err set on failure. Close with
 * sqlite3_close(). For a database some process may be writing (the daemon's own reads). */
sqlite3 *pgcl_db_open_reader(const char *path, char *err, int cap);

/* The "file:" URI that reads the database file at path (a "file:" URI is copied as it is) without
 * writing to it or creating a file beside it, chosen by the files beside it now:
 *   - a -wal (a writer is running, or one stopped without checkpointing) and its -shm:
 *     mode=ro&readonly_shm=1: the WAL's commits are read, the -shm is only mapped read-only (with
 *     no live writer SQLite rebuilds the index in private memory);
 *   - a -wal without its -shm: mode=ro (SQLite must create the -shm to index the WAL);
 *   - no -wal but a -journal (possibly hot): mode=ro, so that a hot journal is refused
 *     (SQLITE_READONLY_ROLLBACK) rather than silently ignored;
 *   - neither (a database at rest, in WAL or rollback mode, an archive file): mode=ro&immutable=1,
 *     so that SQLite creates no -wal or -shm (a read-only connection to a WAL database otherwise
 *     does, and leaves them). A writer that starts while such a reader reads can make its reads
 *     fail (SQLITE_CORRUPT): the reader is for files at rest (audit verify, keys list).
 * false when out (cap bytes) is too small. */
bool pgcl_db_untouched_uri(const char *path, char *out, size_t cap);

/* The file name that name (a path, or a "file:" URI as pgcl_db_untouched_uri makes them) opens,
 * for messages, into out (cap bytes, truncated). */
void pgcl_db_file_of(const char *name, char *out, size_t cap);

/* pgcl_db_open_reader on pgcl_db_untouched_uri(path); messages name path. For the commands that
 * must never write (audit verify, keys list, the read-only store). */
sqlite3 *pgcl_db_open_untouched(const char *path, char *err, int cap);

/* pgcl_db_open_untouched, then a read transaction begun and its snapshot taken (the schema read
 * once): a verification's one consistent view of a file a writer may be using. The untouched open
 * is chosen from the files beside the database as they are at that moment, and a writer may
 * create or remove them in between (its last connection closing, the WAL reset); a snapshot that
 * cannot be taken then is tried again, re-reading them, up to about a second (the live daemon's
 * GET /v1/audit/verify and tests/core/test_chain.c's concurrent verification). NULL with err set
 * when it still fails. The caller ends the transaction (COMMIT or ROLLBACK) before closing. */
sqlite3 *pgcl_db_open_untouched_snapshot(const char *path, char *err, int cap);

/* Binds a statement's parameters. Returns SQLITE_OK or the failing sqlite3_bind_* code. */
typedef int (*pgcl_db_bind_fn)(sqlite3_stmt *stmt, void *ctx);
/* Takes one result row. Returns SQLITE_OK to go on; any other code stops the walk and is what
 * pgcl_db_each_row returns (the function sets err itself when it has more to say). */
typedef int (*pgcl_db_row_fn)(sqlite3_stmt *stmt, void *ctx, char *err, int cap);

/* Prepare, bind, step every row, finalize: the one copy of that loop.
 * bind and on_row may be NULL (a statement without parameters; a statement run for its effect).
 * Returns SQLITE_OK when every row was taken (SQLITE_DONE is reported as SQLITE_OK), the SQLite
 * code of the first failure with err set to "<what>: <message>", or on_row's stopping code.
 * Nothing is left prepared whatever happens. */
int pgcl_db_each_row(sqlite3 *db, const char *sql, pgcl_db_bind_fn bind, pgcl_db_row_fn on_row, void *ctx,
                     char *err, int cap);

/* The first column of the first row of sql (bound by bind(ctx), which may be NULL) into *out;
 * *found (may be NULL) false, and *out 0, when there is no row or the value is NULL. Returns as
 * pgcl_db_each_row, on which it is built. */
int pgcl_db_query_int(sqlite3 *db, const char *sql, pgcl_db_bind_fn bind, void *ctx, int64_t *out, bool *found,
                      char *err, int cap);

/* The work of one write transaction. Returns SQLITE_OK to commit; anything else rolls back. */
typedef int (*pgcl_db_tx_fn)(sqlite3 *db, void *ctx, char *err, int cap);

/* BEGIN IMMEDIATE, work, COMMIT — or ROLLBACK when the work or the commit fails: the one copy of
 * "begin write, do, commit". Returns SQLITE_OK or the first failing code with err set; after a
 * failure no part of the work is in the database. */
int pgcl_db_write_transaction(sqlite3 *db, pgcl_db_tx_fn work, void *ctx, char *err, int cap);

#endif
