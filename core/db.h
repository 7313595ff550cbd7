/* Small SQLite helpers shared by the modules that talk to the audit database (audit store,
 * keys): statement execution with the error turned into text where it happens, and opening
 * connections with the project's busy timeout. */
#ifndef PGCL_DB_H
#define PGCL_DB_H

#include <sqlite3.h>

#define PGCL_DB_BUSY_TIMEOUT_MS 5000

/* Runs one or more statements. Returns the SQLite result code; on failure err holds the message. */
int pgcl_db_exec(sqlite3 *db, const char *sql, char *err, int cap);

/* Opens path read-only with the busy timeout and extended result codes. Returns NULL with err set
 * on failure. Close with sqlite3_close(). */
sqlite3 *pgcl_db_open_reader(const char *path, char *err, int cap);

#endif
