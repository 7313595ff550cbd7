/* The audit store drivers, implementer's side (in the manner of backend_impl.h): one table per
 * store, registered in store_registry.c. Callers use store_registry.h (and audit.h for an open
 * store) and never see this file. Every operation takes the --db string its driver claimed. */
#ifndef PGCL_STORE_DRIVER_H
#define PGCL_STORE_DRIVER_H

#include "store_registry.h"

typedef struct pgcl_store_driver {
    const char *scheme; /* "sqlite", "postgresql" */
    const char *title;  /* "SQLite", "PostgreSQL": for messages */
    bool has_writers;   /* pgcl_store_has_writers */
    /* NULL: the driver claims every string (the last one registered: SQLite's file names). */
    bool (*claims)(const char *db);
    const char *open_failure_note; /* pgcl_store_open_failure_note; NULL: none */
    bool redacted;                 /* its strings may hold a password: messages show them redacted (pgcl_store_shown) */

    pgcl_status (*open)(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap);
    void (*default_checkpoint_dir)(const char *db, char *out, size_t cap);
    void (*describe)(const pgcl_audit_options *opts, char *out, int cap);
    pgcl_status (*migrate)(const char *db, int *version, char *err, int cap);

    pgcl_status (*keys_create)(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                               char key_out[128], char key_id_out[32], char *err, int cap);
    pgcl_status (*keys_import)(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                               const char *key, char key_id_out[32], bool *created, char *err, int cap);
    pgcl_status (*keys_list)(const pgcl_store_target *t, pgcl_key_fn on_key, void *ctx, char *err, int cap);
    pgcl_status (*keys_revoke)(const pgcl_store_target *t, const char *key_id, const char *actor, char *err, int cap);

    pgcl_status (*verify)(const char *db, const char *const *checkpoint_files, int n_checkpoints,
                          const char *public_key_hex, pgcl_chain_report *report, bool *per_writer, char *err, int cap);
    pgcl_status (*checkpoint)(const char *db, const char *key_path, const char *out_file, pgcl_store_checkpoint *out,
                              char *err, int cap);
    pgcl_status (*archive)(const char *db, const pgcl_store_archive_params *p, pgcl_store_archive_result *out,
                           char *err, int cap);
} pgcl_store_driver;

extern const pgcl_store_driver pgcl_store_driver_sqlite;   /* store_sqlite_driver.c */
extern const pgcl_store_driver pgcl_store_driver_postgres; /* pg/store_pg_driver.c */

/* The driver that serves db (never NULL: SQLite takes what no other driver claims). */
const pgcl_store_driver *pgcl_store_driver_for(const char *db);

#endif
