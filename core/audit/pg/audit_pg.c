/* The PostgreSQL audit store: open, migrations, close and the operations table. See audit_pg.h. */
#include "audit_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "migrations.h"

extern const pgcl_audit_store_ops pgcl_audit_pg_ops;
extern const pgcl_audit_store_ops pgcl_audit_pg_read_only_ops;

pgcl_audit_pg *pgcl_audit_pg_of(pgcl_audit *store) {
    PGCL_ASSERT(store && (store->ops == &pgcl_audit_pg_ops || store->ops == &pgcl_audit_pg_read_only_ops));
    return (pgcl_audit_pg *)store;
}

/* schema_migrations as the SQLite store keeps it: one row per applied migration with its SHA-256. */
static const char MIGRATIONS_TABLE_SQL[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
    " sha256 text NOT NULL, applied_at text NOT NULL)";

/* The daemons' role may not change the schema (deploy/postgres/roles.sql): an error that says so
 * also says who can. */
static void add_owner_hint(char *err, int cap) {
    size_t n = strlen(err);
    if ((strstr(err, "permission denied") || strstr(err, "must be owner")) && n < (size_t)cap)
        snprintf(err + n, (size_t)cap - n,
                 " (this role may not change the schema: run `pgcld migrate --db URI` as its owner first)");
}

static pgcl_status apply_one(PGconn *conn, const pgcl_migration *m, char *err, int cap) {
    char sub[512];
    pgcl_status st = pgcl_pg_exec(conn, "begin", "BEGIN", 0, NULL, sub, sizeof sub);
    if (st == PGCL_OK) st = pgcl_pg_exec(conn, m->name, m->sql, 0, NULL, sub, sizeof sub);
    if (st == PGCL_OK) {
        char version[16], now[PGCL_TIMESTAMP_LEN + 1];
        snprintf(version, sizeof version, "%d", m->version);
        pgcl_timestamp_now(now);
        const char *values[] = {version, m->name, m->sha256, now};
        st = pgcl_pg_exec(conn, "record the migration",
                          "INSERT INTO schema_migrations (version, name, sha256, applied_at) VALUES ($1, $2, $3, $4)",
                          4, values, sub, sizeof sub);
    }
    if (st == PGCL_OK) st = pgcl_pg_exec(conn, "commit", "COMMIT", 0, NULL, sub, sizeof sub);
    if (st != PGCL_OK) {
        char ignored[64];
        pgcl_pg_exec(conn, "rollback", "ROLLBACK", 0, NULL, ignored, sizeof ignored);
        pgcl_errorf(err, cap, "migration %04d_%s: %s", m->version, m->name, sub);
        add_owner_hint(err, cap);
    }
    return st;
}

/* schema_migrations is created only where it is missing: CREATE TABLE IF NOT EXISTS needs CREATE on
 * the schema even when the table exists, which the daemons' role (pgcld_writer,
 * deploy/postgres/roles.sql) does not have. */
static const char MIGRATIONS_TABLE_EXISTS_SQL[] = "SELECT to_regclass('schema_migrations') IS NOT NULL";
static const char MIGRATIONS_RECORDED_SQL[] = "SELECT version, sha256 FROM schema_migrations ORDER BY version";

/* Whether schema_migrations exists (*exists), and when it does, its rows (MIGRATIONS_RECORDED_SQL)
 * into *recorded (the caller PQclear()s it; NULL when the table is missing). */
static pgcl_status read_recorded(PGconn *conn, bool *exists, PGresult **recorded, char *err, int cap) {
    pgcl_status st;
    *recorded = NULL;
    PGresult *res = pgcl_pg_query(conn, "schema_migrations", MIGRATIONS_TABLE_EXISTS_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    *exists = PQntuples(res) == 1 && pgcl_pg_text(res, 0, 0) && strcmp(pgcl_pg_text(res, 0, 0), "t") == 0;
    PQclear(res);
    if (*exists && !(*recorded = pgcl_pg_query(conn, "schema_migrations", MIGRATIONS_RECORDED_SQL, 0, NULL, &st, err,
                                               cap)))
        return st;
    return PGCL_OK;
}

/* The recorded rows (NULL: none) against this build's migrations: each of the first
 * min(rows, pgcl_pg_migration_count) must be this build's migration of its place, with its SHA-256.
 * *version: the last of them. PGCL_ERR_MISMATCH naming the first that is not. */
static pgcl_status check_recorded(const PGresult *recorded, int *version, char *err, int cap) {
    int applied = recorded ? PQntuples(recorded) : 0;
    *version = 0;
    for (int i = 0; i < applied && i < pgcl_pg_migration_count; i++) {
        const pgcl_migration *m = &pgcl_pg_migrations[i];
        const char *sha = pgcl_pg_text(recorded, i, 1);
        if (pgcl_pg_int(recorded, i, 0) != m->version || !sha || strcmp(sha, m->sha256) != 0) {
            pgcl_errorf(err, cap,
                        "migration %04d_%s: the database recorded another version of it (schema_migrations row %d);"
                        " this build cannot use this database",
                        m->version, m->name, i + 1);
            return PGCL_ERR_MISMATCH;
        }
        *version = m->version;
    }
    return PGCL_OK;
}

/* The migrations, the lock already held. */
static pgcl_status migrate_locked(PGconn *conn, int *version, char *err, int cap) {
    bool have_table = false;
    PGresult *res = NULL;
    pgcl_status st = read_recorded(conn, &have_table, &res, err, cap);
    if (st != PGCL_OK) return st;
    if (!have_table && (st = pgcl_pg_exec(conn, "schema_migrations", MIGRATIONS_TABLE_SQL, 0, NULL, err, cap)) != PGCL_OK) {
        add_owner_hint(err, cap);
        return st;
    }
    int applied = res ? PQntuples(res) : 0;
    st = check_recorded(res, version, err, cap);
    PQclear(res);
    for (int i = applied; st == PGCL_OK && i < pgcl_pg_migration_count; i++) {
        const pgcl_migration *m = &pgcl_pg_migrations[i];
        if ((st = apply_one(conn, m, err, cap)) != PGCL_OK) return st;
        pgcl_log_info("audit: applied PostgreSQL migration %04d_%s", m->version, m->name);
        *version = m->version;
    }
    if (st == PGCL_OK && applied > pgcl_pg_migration_count) {
        pgcl_errorf(err, cap, "the database's schema (version %d) is newer than this build's (%d)", applied,
                    pgcl_pg_migration_count);
        st = PGCL_ERR_UNSUPPORTED;
    }
    return st;
}

pgcl_status pgcl_pg_migrate(PGconn *conn, int *version, char *err, int cap) {
    char lock_args[2][16];
    snprintf(lock_args[0], sizeof lock_args[0], "%d", PGCL_PG_LOCK_CLASS);
    snprintf(lock_args[1], sizeof lock_args[1], "%d", PGCL_PG_LOCK_MIGRATIONS);
    const char *values[] = {lock_args[0], lock_args[1]};
    pgcl_status st = pgcl_pg_exec(conn, "migrations lock", "SELECT pg_advisory_lock($1::int, $2::int)", 2, values, err, cap);
    if (st != PGCL_OK) return st;
    st = migrate_locked(conn, version, err, cap);
    char ignored[64];
    pgcl_pg_exec(conn, "migrations unlock", "SELECT pg_advisory_unlock($1::int, $2::int)", 2, values, ignored,
                 sizeof ignored);
    return st;
}

/* A read-only open's check: the schema is this build's, every migration applied as recorded,
 * nothing changed. PGCL_ERR_UNSUPPORTED with what to do when it is not. */
static pgcl_status check_schema(PGconn *conn, int *version, char *err, int cap) {
    bool exists = false;
    PGresult *res = NULL;
    *version = 0;
    pgcl_status st = read_recorded(conn, &exists, &res, err, cap);
    if (st != PGCL_OK) return st;
    int applied = res ? PQntuples(res) : 0;
    st = check_recorded(res, version, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;
    if (applied != pgcl_pg_migration_count) {
        pgcl_errorf(err, cap,
                    applied < pgcl_pg_migration_count
                        ? "the database's schema is at version %d, this build's at %d: run `pgcld migrate --db URI`"
                          " (or start pgcld serve on it) first"
                        : "the database's schema (version %d) is newer than this build's (%d)",
                    applied, pgcl_pg_migration_count);
        return PGCL_ERR_UNSUPPORTED;
    }
    return PGCL_OK;
}

static void pg_close(pgcl_audit *store) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    pgcl_pg_writer_stop(s);
    pgcl_pg_pool_destroy(s->readers);
    if (s->uri) {
        memset(s->uri, 0, strlen(s->uri)); /* it may hold a password */
        free(s->uri);
    }
    free(s);
}

pgcl_status pgcl_audit_pg_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap) {
    *out = NULL;
    pgcl_audit_pg *s = calloc(1, sizeof *s);
    if (!s || !(s->uri = strdup(opts->path))) {
        free(s);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    s->base.ops = opts->read_only ? &pgcl_audit_pg_read_only_ops : &pgcl_audit_pg_ops;
    pgcl_pg_redact(opts->path, s->redacted, sizeof s->redacted);
    if (opts->read_only) s->base.read_only_shown = s->redacted;
    const char *id = opts->writer_id;
    char host[PGCL_PG_WRITER_ID_MAX + 1];
    if (!id || !id[0]) {
        if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "pgcld");
        host[sizeof host - 1] = 0;
        id = host;
    }
    pgcl_status st = PGCL_ERR_INVALID;
    if (strlen(id) > PGCL_PG_WRITER_ID_MAX) {
        pgcl_errorf(err, cap, "writer id: longer than %d bytes", PGCL_PG_WRITER_ID_MAX);
        goto fail;
    }
    snprintf(s->writer_id, sizeof s->writer_id, "%s", id);
    s->opts = *opts;
    s->opts.path = s->uri;
    s->opts.writer_id = s->writer_id;

    char sub[512];
    PGconn *conn = pgcl_pg_connect(s->uri, err, cap);
    if (!conn) {
        st = PGCL_ERR_DB;
        goto fail;
    }
    st = opts->read_only ? check_schema(conn, &s->schema_version, sub, sizeof sub)
                         : pgcl_pg_migrate(conn, &s->schema_version, sub, sizeof sub);
    if (st != PGCL_OK) {
        PQfinish(conn);
        pgcl_errorf(err, cap, "%s: %s", s->redacted, sub);
        goto fail;
    }
    if (!(s->readers = pgcl_pg_pool_create(s->uri, PGCL_PG_READERS, err, cap))) {
        PQfinish(conn);
        st = PGCL_ERR_NOMEM;
        goto fail;
    }
    pgcl_pg_pool_adopt(s->readers, conn); /* the first read needs no connection of its own */
    if (!opts->read_only && (st = pgcl_pg_writer_start(s, err, cap)) != PGCL_OK) goto fail;
    *out = &s->base;
    return PGCL_OK;
fail:
    pg_close(&s->base);
    return st;
}


static int pg_schema_version(pgcl_audit *store) { return pgcl_audit_pg_of(store)->schema_version; }

static pgcl_status pg_run(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    pgcl_errorf(err, cap, "the PostgreSQL store runs no SQLite jobs");
    return PGCL_ERR_UNSUPPORTED;
}

/* The read side, the same in the read-write and the read-only tables. */
#define PG_READ_OPS                                                                                                    \
    .schema_version = pg_schema_version, .read_decision = pgcl_pg_read_decision,                                      \
    .read_decisions = pgcl_pg_read_decisions, .read_contests = pgcl_pg_read_contests,                                 \
    .read_stats = pgcl_pg_read_stats, .open_export = pgcl_pg_open_export,                                             \
    .read_stored_decision = pgcl_pg_read_stored_decision, .read_idempotency_key = pgcl_pg_read_idempotency_key,       \
    .read_proof = pgcl_pg_read_proof, .read_consistency = pgcl_pg_read_consistency,                                   \
    .read_archive_where = pgcl_pg_read_archive_where, .verify_chain = pgcl_pg_verify_chain,                           \
    .open_keyring = pgcl_pg_open_keyring, .read_keys = pgcl_pg_read_keys,                                             \
    .read_activations = pgcl_pg_read_activations, .read_shadow_report = pgcl_pg_read_shadow_report,               \
    .logs = pgcl_pg_logs, .writer_id = pgcl_pg_writer_id, .log_read = pgcl_pg_log_read,                               \
    .log_checkpoint = pgcl_pg_log_checkpoint, .log_leaf_of = pgcl_pg_log_leaf_of

const pgcl_audit_store_ops pgcl_audit_pg_ops = {
    .name = "postgresql",
    .close = pg_close,
    .append = pgcl_pg_append,
    .append_async = pgcl_pg_append_async,
    .append_shadow = pgcl_pg_append_shadow,
    .record_event = pgcl_pg_record_event,
    .run = pg_run,
    .set_max_pending_rows = pgcl_pg_set_max_pending_rows,
    .pending_rows = pgcl_pg_pending_rows,
    .healthy = pgcl_pg_healthy,
    .writer_activity = pgcl_pg_writer_activity,
    PG_READ_OPS,
    .create_checkpoint = pgcl_pg_create_checkpoint,
    .create_key = pgcl_pg_create_key,
    .revoke_key = pgcl_pg_revoke_key,
    .import_key = pgcl_pg_import_key,
    .file_contest = pgcl_pg_file_contest,
    .resolve_contest = pgcl_pg_resolve_contest,
    .drop_inputs = pgcl_pg_drop_inputs,
    .log_put_checkpoint = pgcl_pg_log_put_checkpoint,
    .log_add_cosignatures = pgcl_pg_log_add_cosignatures,
};

/* ---- the read-only store (pgcl_audit_options.read_only): no writer; every write is refused ---- */

const pgcl_audit_store_ops pgcl_audit_pg_read_only_ops = {
    .name = "postgresql",
    .close = pg_close,
    PGCL_AUDIT_READ_ONLY_OPS,
    PG_READ_OPS,
};
