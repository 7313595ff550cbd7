/* The SQLite store's schema: the migrations compiled into the binary (migrations/), applied at
 * open in one transaction, each recorded in schema_migrations with its SHA-256. */
#include "sqlite_migrate.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "db.h"
#include "log.h"
#include "log_tree.h"
#include "migrations.h"
#include "sqlite_log.h"

#define ERR_CAP 512

pgcl_status pgcl_sqlite_apply_migrations(sqlite3 *db, const char *path, const char *writer_id, int *schema_version,
                                         char *err, int cap) {
    char sub[ERR_CAP];
    sqlite3_stmt *get = NULL, *put = NULL;
    pgcl_status st = PGCL_ERR_DB;
    if (pgcl_db_exec(db, "BEGIN IMMEDIATE", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot start the migration transaction: %s", path, sub);
        return PGCL_ERR_DB;
    }
    if (pgcl_db_exec(db,
                     "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " sha256 TEXT NOT NULL, applied_at TEXT NOT NULL)",
                     sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    if (sqlite3_prepare_v2(db, "SELECT version, sha256 FROM schema_migrations ORDER BY version", -1, &get, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO schema_migrations (version, name, sha256, applied_at) VALUES (?,?,?,?)", -1,
                           &put, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sqlite3_errmsg(db));
        goto done;
    }
    int applied = 0;
    while (sqlite3_step(get) == SQLITE_ROW) {
        int version = sqlite3_column_int(get, 0);
        const char *digest = (const char *)sqlite3_column_text(get, 1);
        if (version < 1 || version > pgcl_migration_count) {
            pgcl_errorf(err, cap, "%s: schema version %d is newer than this pgcld (knows 1..%d); use a newer pgcld",
                        path, version, pgcl_migration_count);
            st = PGCL_ERR_UNSUPPORTED;
            goto done;
        }
        const pgcl_migration *mig = &pgcl_migrations[version - 1];
        if (!digest || strcmp(digest, mig->sha256) != 0) {
            pgcl_errorf(err, cap,
                        "%s: migration %d (%s) recorded with a different SHA-256 than this build's; "
                        "the schema file was edited after it was applied",
                        path, version, mig->name);
            st = PGCL_ERR_MISMATCH;
            goto done;
        }
        applied = version;
    }
    for (int v = applied + 1; v <= pgcl_migration_count; v++) {
        const pgcl_migration *mig = &pgcl_migrations[v - 1];
        if (pgcl_db_exec(db, mig->sql, sub, sizeof sub) != SQLITE_OK) {
            pgcl_errorf(err, cap, "%s: migration %d (%s) failed: %s", path, v, mig->name, sub);
            goto done;
        }
        char now[PGCL_TIMESTAMP_LEN + 1];
        pgcl_timestamp_now(now);
        sqlite3_reset(put);
        sqlite3_bind_int(put, 1, v);
        sqlite3_bind_text(put, 2, mig->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(put, 3, mig->sha256, -1, SQLITE_STATIC);
        sqlite3_bind_text(put, 4, now, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(put) != SQLITE_DONE) {
            pgcl_errorf(err, cap, "%s: recording migration %d: %s", path, v, sqlite3_errmsg(db));
            goto done;
        }
        pgcl_log_info("audit: applied migration %04d_%s to %s", v, mig->name, path);
    }
    /* The log tree's nodes for entries older than migration 0009, once, in the same transaction. */
    int64_t nodes_added = 0;
    if (pgcl_log_tree_backfill(db, &nodes_added, sub, sizeof sub) != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    if (nodes_added > 0) pgcl_log_info("audit: stored %lld log tree nodes in %s", (long long)nodes_added, path);
    /* The transparency log's writer, fixed once: at the database's creation or its upgrade. */
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    if (pgcl_sqlite_log_ensure_writer(db, writer_id, now, NULL, sub, sizeof sub) != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        goto done;
    }
    if (pgcl_db_exec(db, "COMMIT", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: committing migrations: %s", path, sub);
        goto done;
    }
    *schema_version = pgcl_migration_count;
    st = PGCL_OK;
done:
    sqlite3_finalize(get);
    sqlite3_finalize(put);
    if (st != PGCL_OK) pgcl_db_exec(db, "ROLLBACK", sub, sizeof sub);
    return st;
}

pgcl_status pgcl_sqlite_read_schema_version(sqlite3 *db, const char *path, int *schema_version, char *err, int cap) {
    *schema_version = 0;
    int64_t tables = 0;
    char sub[ERR_CAP];
    if (pgcl_db_query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
                          NULL, NULL, &tables, NULL, sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sub);
        return PGCL_ERR_DB;
    }
    if (tables == 0) return PGCL_OK;
    sqlite3_stmt *get = NULL;
    if (sqlite3_prepare_v2(db, "SELECT version, sha256 FROM schema_migrations ORDER BY version", -1, &get, NULL) !=
        SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    pgcl_status st = PGCL_OK;
    int rc = SQLITE_DONE;
    while (st == PGCL_OK && (rc = sqlite3_step(get)) == SQLITE_ROW) {
        int version = sqlite3_column_int(get, 0);
        const char *digest = (const char *)sqlite3_column_text(get, 1);
        if (version < 1 || version > pgcl_migration_count) {
            pgcl_errorf(err, cap, "%s: schema version %d is newer than this pgcld (knows 1..%d); use a newer pgcld",
                        path, version, pgcl_migration_count);
            st = PGCL_ERR_UNSUPPORTED;
        } else if (!digest || strcmp(digest, pgcl_migrations[version - 1].sha256) != 0) {
            pgcl_errorf(err, cap, "%s: migration %d (%s) recorded with a different SHA-256 than this build's", path,
                        version, pgcl_migrations[version - 1].name);
            st = PGCL_ERR_MISMATCH;
        } else {
            *schema_version = version;
        }
    }
    if (st == PGCL_OK && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: schema_migrations: %s", path, sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
    }
    sqlite3_finalize(get);
    return st;
}
