/* The SQLite store opened read-only (pgcl_audit_options.read_only): for the commands that must
 * never write (audit verify, keys list, the witness quorum check). Unlike the writing store
 * (audit_sqlite.c) it applies no migration, switches no journal mode, starts no writer or WAL
 * checkpointer, and opens the file only through pgcl_db_untouched_uri's URI, so that the database,
 * its -wal and -shm stay byte-identical and no file appears beside them. A database at an older
 * schema (or an archive file, which has no schema_migrations) is read as it is: each read answers
 * what its tables hold, and a file without the log's tables simply has no logs. Every write
 * answers PGCL_ERR_UNSUPPORTED. The reads are the writing store's (audit_reads.c,
 * sqlite_log_store.c), on a reader pool of this store's own URI, dropped at close. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_store_impl.h"
#include "db.h"
#include "reader_pool.h"
#include "sqlite_migrate.h"

typedef struct sqlite_read_only_store {
    pgcl_audit base; /* first: the interface's view of this store */
    char *path;      /* the database file, for messages */
    char *uri;       /* what every read opens: pgcl_db_untouched_uri's, made unique to this store */
    int schema_version;
} sqlite_read_only_store;

/* Always-on: another store's handle here would read through the wrong layout. */
static sqlite_read_only_store *read_only_store_of(pgcl_audit *store) {
    PGCL_ASSERT(store->ops == &pgcl_audit_sqlite_read_only_ops);
    return (sqlite_read_only_store *)store;
}

const char *pgcl_audit_sqlite_read_only_uri(pgcl_audit *store) { return read_only_store_of(store)->uri; }

static int ro_schema_version(pgcl_audit *store) { return read_only_store_of(store)->schema_version; }

/* ---- open / close ---- */

static void ro_close(pgcl_audit *store) {
    sqlite_read_only_store *s = read_only_store_of(store);
    if (s->uri) pgcl_queries_pool_drop(s->uri);
    free(s->uri);
    free(s->path);
    free(s);
}

/* This store's URI: the untouched one, with a parameter SQLite ignores that is unique to the open,
 * so that its reader pool (keyed by the string) is its own and goes with it. NULL when out of
 * memory or the path is too long. */
static char *unique_uri(const char *path) {
    static _Atomic long opens;
    size_t cap = strlen(path) * 3 + 96;
    char *uri = malloc(cap);
    if (!uri || !pgcl_db_untouched_uri(path, uri, cap)) {
        free(uri);
        return NULL;
    }
    size_t at = strlen(uri);
    snprintf(uri + at, cap - at, "%spgcld_read_only=%ld", strchr(uri, '?') ? "&" : "?", ++opens);
    return uri;
}

pgcl_status pgcl_audit_sqlite_read_only_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap) {
    *out = NULL;
    PGCL_ASSERT(opts->read_only);
    sqlite_read_only_store *s = calloc(1, sizeof *s);
    if (!s) return PGCL_ERR_NOMEM;
    s->base.ops = &pgcl_audit_sqlite_read_only_ops;
    if (!(s->path = strdup(opts->path)) || !(s->uri = unique_uri(opts->path))) {
        pgcl_errorf(err, cap, "%.200s: out of memory or the path is too long", opts->path);
        ro_close(&s->base);
        return PGCL_ERR_NOMEM;
    }
    s->base.read_only_shown = s->path;
    /* The schema is read once here, on a connection of its own, never migrated. */
    sqlite3 *db = pgcl_db_open_untouched(opts->path, err, cap);
    if (!db) {
        ro_close(&s->base);
        return PGCL_ERR_DB;
    }
    pgcl_status st = pgcl_sqlite_read_schema_version(db, opts->path, &s->schema_version, err, cap);
    sqlite3_close(db);
    if (st != PGCL_OK) {
        ro_close(&s->base);
        return st;
    }
    *out = &s->base;
    return PGCL_OK;
}

const pgcl_audit_store_ops pgcl_audit_sqlite_read_only_ops = {
    .name = "sqlite",
    .close = ro_close,
    PGCL_AUDIT_READ_ONLY_OPS,
    .schema_version = ro_schema_version,
    .read_decision = pgcl_sqlite_read_decision,
    .read_decisions = pgcl_sqlite_read_decisions,
    .read_contests = pgcl_sqlite_read_contests,
    .read_stats = pgcl_sqlite_read_stats,
    .open_export = pgcl_sqlite_open_export,
    .read_stored_decision = pgcl_sqlite_read_stored_decision,
    .read_idempotency_key = pgcl_sqlite_read_idempotency_key,
    .read_proof = pgcl_sqlite_read_proof,
    .read_consistency = pgcl_sqlite_read_consistency,
    .read_archive_where = pgcl_sqlite_read_archive_where,
    .verify_chain = pgcl_sqlite_verify_chain,
    .open_keyring = pgcl_sqlite_open_keyring,
    .read_keys = pgcl_sqlite_read_keys,
    .read_activations = pgcl_sqlite_read_activations,
    .read_shadow_report = pgcl_sqlite_read_shadow_report,
    .size_bytes = NULL,
    .logs = pgcl_sqlite_logs,
    .writer_id = pgcl_audit_ro_writer_id,
    .log_read = pgcl_sqlite_log_read,
    .log_checkpoint = pgcl_sqlite_log_checkpoint,
    .log_leaf_of = pgcl_sqlite_log_leaf_of,
};
