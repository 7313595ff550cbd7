/* The PostgreSQL store's driver (store_driver.h): claims postgresql:// and postgres:// URIs
 * (pgcl_pg_is_uri). Each operation calls the PostgreSQL store's own functions (audit_pg.h,
 * audit_pg_archive.h) on a connection of its own, or on the store opened as a writer of its own
 * (the key commands). */
#include "store_driver.h"

#include <stdio.h>
#include <string.h>

#include "audit_pg.h"
#include "audit_pg_archive.h"
#include "pg_db.h"

static void pg_checkpoint_dir(const char *db, char *out, size_t cap) {
    (void)db;
    snprintf(out, cap, ".");
}

static void pg_describe(const pgcl_audit_options *opts, char *out, int cap) {
    snprintf(out, (size_t)cap, "PostgreSQL, writer %s",
             opts->writer_id && *opts->writer_id ? opts->writer_id : "= host name");
}

/* One connection, the migrations under their lock, no writer. */
static pgcl_status pg_migrate(const char *db, int *version, char *err, int cap) {
    char why[1024], shown[512];
    PGconn *conn = pgcl_pg_connect(db, err, cap);
    if (!conn) return PGCL_ERR_DB;
    pgcl_status st = pgcl_pg_migrate(conn, version, why, sizeof why);
    PQfinish(conn);
    if (st != PGCL_OK) {
        pgcl_pg_redact(db, shown, sizeof shown);
        snprintf(err, (size_t)cap, "%s: %s", shown, why);
    }
    return st;
}

/* The store of t->db opened (and migrated when needed) as the writer t->writer_id; read-only (no
 * writer, no writers row, no chain, no migration) for a read. NULL with err set. */
static pgcl_audit *open_as_writer(const pgcl_store_target *t, bool read_only, char *err, int cap) {
    pgcl_audit_options aopts = {.path = t->db, .read_only = true};
    if (!read_only)
        aopts = (pgcl_audit_options){.path = t->db,
                                     .writer_id = t->writer_id,
                                     .writer_lock_wait_ms = t->writer_lock_wait_ms,
                                     .synchronous_full = true};
    pgcl_audit *audit = NULL;
    return pgcl_audit_pg_open(&aopts, &audit, err, cap) == PGCL_OK ? audit : NULL;
}

static pgcl_status pg_keys_create(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                  char key_out[128], char key_id_out[32], char *err, int cap) {
    pgcl_audit *audit = open_as_writer(t, false, err, cap);
    if (!audit) return PGCL_ERR_DB;
    pgcl_status st = pgcl_audit_create_key(audit, role, name, actor, key_out, key_id_out, err, cap);
    pgcl_audit_close(audit);
    return st;
}

static pgcl_status pg_keys_import(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                  const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    pgcl_audit *audit = open_as_writer(t, false, err, cap);
    if (!audit) return PGCL_ERR_DB;
    pgcl_status st = pgcl_audit_import_key(audit, role, name, actor, key, key_id_out, created, err, cap);
    pgcl_audit_close(audit);
    return st;
}

static pgcl_status pg_keys_list(const pgcl_store_target *t, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    pgcl_audit *audit = open_as_writer(t, true, err, cap);
    if (!audit) return PGCL_ERR_DB;
    pgcl_status st = pgcl_audit_read_keys(audit, on_key, ctx, err, cap);
    pgcl_audit_close(audit);
    return st;
}

static pgcl_status pg_keys_revoke(const pgcl_store_target *t, const char *key_id, const char *actor, char *err,
                                  int cap) {
    pgcl_audit *audit = open_as_writer(t, false, err, cap);
    if (!audit) return PGCL_ERR_DB;
    pgcl_status st = pgcl_audit_revoke_key(audit, key_id, actor, err, cap);
    pgcl_audit_close(audit);
    return st;
}

/* Every writer's chain, on a connection of its own (no writer). */
static pgcl_status pg_verify(const char *db, const char *const *checkpoint_files, int n_checkpoints,
                             const char *public_key_hex, pgcl_chain_report *report, bool *per_writer, char *err,
                             int cap) {
    *per_writer = true;
    PGconn *conn = pgcl_pg_connect(db, err, cap);
    if (!conn) {
        memset(report, 0, sizeof *report);
        return PGCL_ERR_DB;
    }
    pgcl_status st = pgcl_pg_chain_verify(conn, checkpoint_files, n_checkpoints, public_key_hex, report, err, cap);
    PQfinish(conn);
    return st;
}

/* A fleet checkpoint of every writer's head. */
static pgcl_status pg_checkpoint(const char *db, const char *key_path, const char *out_file, pgcl_store_checkpoint *out,
                                 char *err, int cap) {
    out->is_fleet = true;
    PGconn *conn = pgcl_pg_connect(db, err, cap);
    if (!conn) return PGCL_ERR_DB;
    pgcl_status st = pgcl_pg_checkpoint_create(conn, key_path, out_file, NULL, &out->fleet, err, cap);
    PQfinish(conn);
    return st;
}

/* audit_pg_archive.h: a fleet checkpoint at the cut. */
static pgcl_status pg_archive(const char *db, const pgcl_store_archive_params *p, pgcl_store_archive_result *out,
                              char *err, int cap) {
    out->is_fleet = true;
    return pgcl_pg_archive_run(db, p->horizon, p->contest_window_days, p->max_decisions, p->key_path, p->archive_path,
                               p->checkpoint_dir, &out->fleet, err, cap);
}

const pgcl_store_driver pgcl_store_driver_postgres = {
    .scheme = "postgresql",
    .title = "PostgreSQL",
    .has_writers = true,
    .claims = pgcl_pg_is_uri,
    /* docs/operations.md, "PostgreSQL: faults" */
    .open_failure_note = "audit: pgcld does not serve without its audit database: it exits (status 1) so that its"
                         " supervisor restarts it until the database is reachable",
    .redacted = true,
    .open = pgcl_audit_pg_open,
    .default_checkpoint_dir = pg_checkpoint_dir,
    .describe = pg_describe,
    .migrate = pg_migrate,
    .keys_create = pg_keys_create,
    .keys_import = pg_keys_import,
    .keys_list = pg_keys_list,
    .keys_revoke = pg_keys_revoke,
    .verify = pg_verify,
    .checkpoint = pg_checkpoint,
    .archive = pg_archive};
