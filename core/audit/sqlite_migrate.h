/* The SQLite store's schema at open (sqlite_migrate.c). */
#ifndef PGCL_SQLITE_MIGRATE_H
#define PGCL_SQLITE_MIGRATE_H

#include <sqlite3.h>

#include "status.h"

/* Applies the migrations db (at path, for messages) lacks, in one transaction (BEGIN IMMEDIATE),
 * with the log tree's backfill (log_tree.h) and the transparency log's writer row (sqlite_log.h:
 * created with writer_id, NULL for the host name, when the database has none; an existing log keeps
 * its id). *schema_version: the version now applied. PGCL_ERR_UNSUPPORTED: the database is newer
 * than this build; PGCL_ERR_MISMATCH: an applied migration differs from this build's; PGCL_ERR_DB
 * otherwise. Nothing is changed on failure. */
pgcl_status pgcl_sqlite_apply_migrations(sqlite3 *db, const char *path, const char *writer_id, int *schema_version,
                                         char *err, int cap);

/* The schema version of db (at path, for messages) as recorded in schema_migrations, read without
 * writing anything, for a read-only open: 0 for a file without that table (an archive file, an
 * empty file). An older schema is not an error (its reads answer what its tables hold); a newer
 * one is PGCL_ERR_UNSUPPORTED and an applied migration that differs from this build's
 * PGCL_ERR_MISMATCH, as pgcl_sqlite_apply_migrations answers them; PGCL_ERR_DB when it cannot be
 * read (not a database: the message says so). */
pgcl_status pgcl_sqlite_read_schema_version(sqlite3 *db, const char *path, int *schema_version, char *err, int cap);

#endif
