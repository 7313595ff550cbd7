/* The audit store drivers: which driver serves a --db string, and the store-neutral entry points of
 * store_registry.h, each handed to that driver (store_driver.h). The one place that decides which
 * store a database string names. */
#include "store_driver.h"

#include <stddef.h>
#include <string.h>

#include "audit_store_impl.h"
#include "pg_db.h"

/* In claim order; the last claims every string. */
static const pgcl_store_driver *const DRIVERS[] = {&pgcl_store_driver_postgres, &pgcl_store_driver_sqlite};

const pgcl_store_driver *pgcl_store_driver_for(const char *db) {
    size_t n = sizeof DRIVERS / sizeof DRIVERS[0];
    for (size_t i = 0; i + 1 < n; i++)
        if (DRIVERS[i]->claims && DRIVERS[i]->claims(db)) return DRIVERS[i];
    return DRIVERS[n - 1];
}

pgcl_status pgcl_audit_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap) {
    pgcl_status st = pgcl_store_driver_for(opts->path)->open(opts, out, err, cap);
    /* Always on: a store that reports success must hand back a usable handle. */
    PGCL_ASSERT(st != PGCL_OK || (*out && (*out)->ops));
    return st;
}

const char *pgcl_store_scheme(const char *db) {
    return pgcl_store_driver_for(db)->scheme;
}

bool pgcl_store_has_writers(const char *db) {
    return pgcl_store_driver_for(db)->has_writers;
}

/* URI syntax, whichever store: a SQLite name holds no password, and is unchanged by this. */
void pgcl_store_redact(const char *db, char *out, int cap) {
    pgcl_pg_redact(db, out, cap);
}

const char *pgcl_store_shown(const char *db, char *buf, int cap) {
    if (!pgcl_store_driver_for(db)->redacted) return db;
    pgcl_store_redact(db, buf, cap);
    return buf;
}

void pgcl_store_default_checkpoint_dir(const char *db, char *out, size_t cap) {
    pgcl_store_driver_for(db)->default_checkpoint_dir(db, out, cap);
}

const char *pgcl_store_open_failure_note(const char *db) {
    return pgcl_store_driver_for(db)->open_failure_note;
}

void pgcl_store_describe(const pgcl_audit_options *opts, char *out, int cap) {
    pgcl_store_driver_for(opts->path)->describe(opts, out, cap);
}

pgcl_status pgcl_store_migrate(const char *db, int *version, const char **title, char *err, int cap) {
    const pgcl_store_driver *d = pgcl_store_driver_for(db);
    *title = d->title;
    return d->migrate(db, version, err, cap);
}

pgcl_status pgcl_store_keys_create(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                   char key_out[128], char key_id_out[32], char *err, int cap) {
    return pgcl_store_driver_for(t->db)->keys_create(t, role, name, actor, key_out, key_id_out, err, cap);
}

pgcl_status pgcl_store_keys_import(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                   const char *key, char key_id_out[32], bool *created, char *err, int cap) {
    return pgcl_store_driver_for(t->db)->keys_import(t, role, name, actor, key, key_id_out, created, err, cap);
}

pgcl_status pgcl_store_keys_list(const pgcl_store_target *t, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    return pgcl_store_driver_for(t->db)->keys_list(t, on_key, ctx, err, cap);
}

pgcl_status pgcl_store_keys_revoke(const pgcl_store_target *t, const char *key_id, const char *actor, char *err,
                                   int cap) {
    return pgcl_store_driver_for(t->db)->keys_revoke(t, key_id, actor, err, cap);
}

pgcl_status pgcl_store_verify(const char *db, const char *const *checkpoint_files, int n_checkpoints,
                              const char *public_key_hex, pgcl_chain_report *report, bool *per_writer, char *err,
                              int cap) {
    *per_writer = false;
    return pgcl_store_driver_for(db)->verify(db, checkpoint_files, n_checkpoints, public_key_hex, report, per_writer,
                                             err, cap);
}

pgcl_status pgcl_store_checkpoint_db(const char *db, const char *key_path, const char *out_file,
                                     pgcl_store_checkpoint *out, char *err, int cap) {
    return pgcl_store_driver_for(db)->checkpoint(db, key_path, out_file, out, err, cap);
}

pgcl_status pgcl_store_archive(const char *db, const pgcl_store_archive_params *p, pgcl_store_archive_result *out,
                               char *err, int cap) {
    return pgcl_store_driver_for(db)->archive(db, p, out, err, cap);
}

void pgcl_store_archive_result_release(pgcl_store_archive_result *r) {
    if (r) pgcl_pg_archive_result_release(&r->fleet); /* zeroed when the run was not a fleet's */
}
