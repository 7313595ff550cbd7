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

static pgcl_status read_only_refusal(pgcl_audit *store, char *err, int cap) {
    pgcl_errorf(err, cap, "%s: the audit store was opened read-only", read_only_store_of(store)->path);
    return PGCL_ERR_UNSUPPORTED;
}

/* ---- the writes, each refused ---- */

static pgcl_status ro_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                             char *err, int cap) {
    (void)rows, (void)n, (void)idem;
    return read_only_refusal(store, err, cap);
}

static void ro_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                            pgcl_audit_done_fn done, void *done_ctx) {
    char err[512];
    ro_append(store, rows, n, idem, err, sizeof err);
    done(done_ctx, PGCL_ERR_UNSUPPORTED, err);
}

static pgcl_status ro_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    (void)rows, (void)n;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap) {
    (void)ev;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_run(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    (void)fn, (void)ctx;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_create_checkpoint(pgcl_audit *store, const char *key_path, const char *out_file,
                                        const char *out_dir, pgcl_store_checkpoint *out, char *err, int cap) {
    (void)key_path, (void)out_file, (void)out_dir, (void)out;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                 char key_out[128], char key_id_out[32], char *err, int cap) {
    (void)role, (void)name, (void)actor, (void)key_out, (void)key_id_out;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap) {
    (void)key_id, (void)actor;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                                 const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    (void)role, (void)name, (void)actor, (void)key, (void)key_id_out;
    *created = false;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap) {
    (void)r;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap) {
    (void)r;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped,
                                  bool *more, char *err, int cap) {
    (void)older_than, (void)max_rows;
    *dropped = 0;
    *more = false;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap) {
    (void)size, (void)note;
    return read_only_refusal(store, err, cap);
}

static pgcl_status ro_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *lines, char *err, int cap) {
    (void)size, (void)lines;
    return read_only_refusal(store, err, cap);
}

/* ---- the writer's state: there is none ---- */

static void ro_set_max_pending_rows(pgcl_audit *store, int max_pending_rows) { (void)store, (void)max_pending_rows; }
static int ro_pending_rows(pgcl_audit *store) { (void)store; return 0; }
static bool ro_healthy(pgcl_audit *store) { (void)store; return false; } /* it cannot write */
static void ro_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us) {
    (void)store;
    *busy_since_us = *queued_since_us = 0; /* no writer */
}
static int ro_schema_version(pgcl_audit *store) { return read_only_store_of(store)->schema_version; }
/* "": this process writes no log (as the PostgreSQL store's read-only open answers). */
static const char *ro_writer_id(pgcl_audit *store) { (void)store; return ""; }

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
    .append = ro_append,
    .append_async = ro_append_async,
    .append_shadow = ro_append_shadow,
    .record_event = ro_record_event,
    .run = ro_run,
    .set_max_pending_rows = ro_set_max_pending_rows,
    .pending_rows = ro_pending_rows,
    .healthy = ro_healthy,
    .writer_activity = ro_writer_activity,
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
    .create_checkpoint = ro_create_checkpoint,
    .create_key = ro_create_key,
    .revoke_key = ro_revoke_key,
    .import_key = ro_import_key,
    .open_keyring = pgcl_sqlite_open_keyring,
    .read_keys = pgcl_sqlite_read_keys,
    .read_activations = pgcl_sqlite_read_activations,
    .read_shadow_report = pgcl_sqlite_read_shadow_report,
    .file_contest = ro_file_contest,
    .resolve_contest = ro_resolve_contest,
    .drop_inputs = ro_drop_inputs,
    .size_bytes = NULL,
    .logs = pgcl_sqlite_logs,
    .writer_id = ro_writer_id,
    .log_read = pgcl_sqlite_log_read,
    .log_checkpoint = pgcl_sqlite_log_checkpoint,
    .log_put_checkpoint = ro_log_put_checkpoint,
    .log_add_cosignatures = ro_log_add_cosignatures,
    .log_leaf_of = pgcl_sqlite_log_leaf_of,
};
