/* The SQLite store's driver (store_driver.h): a --db that no other driver claims is a SQLite file
 * name, handed to SQLite as it is. Each operation calls the SQLite store's own functions (keys.h,
 * signing.h, chain.h, archive.h); a SQLite file made by the PostgreSQL store's archival (a fleet
 * archive, audit_pg_archive.h) is verified as one. */
#include "store_driver.h"

#include <stdio.h>
#include <string.h>

#include "audit_store_impl.h"
#include "files.h"

/* The directory of the database file ("." when it has none). */
static void sqlite_checkpoint_dir(const char *db, char *out, size_t cap) { pgcl_path_directory(db, out, cap); }

static void sqlite_describe(const pgcl_audit_options *opts, char *out, int cap) {
    snprintf(out, (size_t)cap, "WAL, synchronous=%s", opts->synchronous_full ? "FULL" : "NORMAL");
}

/* Opens (creating the file and applying the migrations, as pgcld serve would) and closes. */
static pgcl_status sqlite_migrate(const char *db, int *version, char *err, int cap) {
    pgcl_audit_options aopts = {.path = db, .synchronous_full = true};
    pgcl_audit *audit = NULL;
    pgcl_status st = pgcl_audit_sqlite_open(&aopts, &audit, err, cap);
    if (st != PGCL_OK) return st;
    if (version) *version = pgcl_audit_schema_version(audit);
    pgcl_audit_close(audit);
    return PGCL_OK;
}

/* The first admin key is made before the daemon ever ran: the schema is created first. */
static pgcl_status sqlite_keys_create(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                      char key_out[128], char key_id_out[32], char *err, int cap) {
    pgcl_status st = sqlite_migrate(t->db, NULL, err, cap);
    return st != PGCL_OK ? st : pgcl_keys_create(t->db, role, name, actor, key_out, key_id_out, err, cap);
}

static pgcl_status sqlite_keys_import(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                      const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    pgcl_status st = sqlite_migrate(t->db, NULL, err, cap);
    return st != PGCL_OK ? st : pgcl_keys_import(t->db, role, name, actor, key, key_id_out, created, err, cap);
}

/* A read: the store opened read-only, so that listing writes nothing (no migration, no -wal). */
static pgcl_status sqlite_keys_list(const pgcl_store_target *t, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    pgcl_audit_options aopts = {.path = t->db, .read_only = true};
    pgcl_audit *audit = NULL;
    pgcl_status st = pgcl_audit_sqlite_open(&aopts, &audit, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_audit_read_keys(audit, on_key, ctx, err, cap);
    pgcl_audit_close(audit);
    return st;
}

static pgcl_status sqlite_keys_revoke(const pgcl_store_target *t, const char *key_id, const char *actor, char *err,
                                      int cap) {
    return pgcl_keys_revoke(t->db, key_id, actor, err, cap);
}

static pgcl_status sqlite_verify(const char *db, const char *const *checkpoint_files, int n_checkpoints,
                                 const char *public_key_hex, pgcl_chain_report *report, bool *per_writer, char *err,
                                 int cap) {
    if (pgcl_pg_archive_is_fleet(db)) { /* a fleet archive: one chain per writer */
        *per_writer = true;
        return pgcl_pg_archive_verify(db, checkpoint_files, n_checkpoints, public_key_hex, report, err, cap);
    }
    return pgcl_chain_verify_signed(db, checkpoint_files, n_checkpoints, public_key_hex, report, err, cap);
}

static pgcl_status sqlite_checkpoint(const char *db, const char *key_path, const char *out_file,
                                     pgcl_store_checkpoint *out, char *err, int cap) {
    out->is_fleet = false;
    return pgcl_checkpoint_create(db, key_path, out_file, NULL, &out->chain, err, cap);
}

static pgcl_status sqlite_archive(const char *db, const pgcl_store_archive_params *p, pgcl_store_archive_result *out,
                                  char *err, int cap) {
    out->is_fleet = false;
    return pgcl_archive_run(db, p->horizon, p->max_decisions, p->key_path, p->archive_path, p->checkpoint_dir,
                            &out->chain, err, cap);
}

const pgcl_store_driver pgcl_store_driver_sqlite = {.scheme = "sqlite",
                                                    .title = "SQLite",
                                                    .has_writers = false,
                                                    .claims = NULL,
                                                    .open_failure_note = NULL,
                                                    .redacted = false,
                                                    .open = pgcl_audit_sqlite_open,
                                                    .default_checkpoint_dir = sqlite_checkpoint_dir,
                                                    .describe = sqlite_describe,
                                                    .migrate = sqlite_migrate,
                                                    .keys_create = sqlite_keys_create,
                                                    .keys_import = sqlite_keys_import,
                                                    .keys_list = sqlite_keys_list,
                                                    .keys_revoke = sqlite_keys_revoke,
                                                    .verify = sqlite_verify,
                                                    .checkpoint = sqlite_checkpoint,
                                                    .archive = sqlite_archive};
