/* The audit store drivers, caller's side: everything that opens or administers an audit database
 * by its --db string (a SQLite file, a PostgreSQL URI) without knowing which store it names. Each
 * store is a driver (store_driver.h) registered in store_registry.c, in the manner of the compute
 * backends (core/model/backend_registry.c); the first driver whose `claims` accepts the string
 * serves it: PostgreSQL claims postgresql:// and postgres:// URIs, SQLite every other string (a
 * file name, as SQLite opens it). pgcl_audit_open (audit.h) opens a store through the same table.
 *
 * Every entry point here keeps the contract of the per-store function it calls (named in
 * store_driver.h); err gets the reason on failure, in the words the store's function uses. */
#ifndef PGCL_STORE_REGISTRY_H
#define PGCL_STORE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "archive.h"
#include "audit.h"
#include "audit_pg_archive.h"
#include "audit_reads.h"
#include "chain.h"
#include "keys.h"
#include "status.h"

/* The scheme of the driver that serves db: "sqlite" or "postgresql". */
const char *pgcl_store_scheme(const char *db);

/* True when db's store is shared by writers of their own (PostgreSQL: --writer-id names one,
 * checkpoints are fleet checkpoints, archival keeps a contest window). */
bool pgcl_store_has_writers(const char *db);

/* db with any password replaced by "***" (a URI's userinfo, a password= query parameter), for logs
 * and messages; any other text unchanged. Always NUL-terminates out. */
void pgcl_store_redact(const char *db, char *out, int cap);

/* db as a message shows it: db itself where its driver names no secret in it (SQLite), else buf
 * (cap bytes) holding it redacted (pgcl_store_redact). */
const char *pgcl_store_shown(const char *db, char *buf, int cap);

/* Where checkpoints go when no directory is configured: a SQLite file's directory ("." when the
 * name has none), the working directory (".") for a PostgreSQL URI. */
void pgcl_store_default_checkpoint_dir(const char *db, char *out, size_t cap);

/* A line for the log after pgcl_audit_open(opts) failed, or NULL: the PostgreSQL store's reminder
 * that pgcld exits so that its supervisor restarts it (docs/operations.md, "PostgreSQL: faults"). */
const char *pgcl_store_open_failure_note(const char *db);

/* What the log says of a store just opened with opts: "WAL, synchronous=FULL" (SQLite),
 * "PostgreSQL, writer NAME" (NAME: opts->writer_id, or "= host name" when it is empty). */
void pgcl_store_describe(const pgcl_audit_options *opts, char *out, int cap);

/* Applies db's pending schema migrations (`pgcld migrate`): SQLite through the store's own open
 * (which creates the file), PostgreSQL on one connection under the migrations lock, no writer.
 * *version: the schema's version after; *title: "SQLite" or "PostgreSQL". err on failure: the
 * reason (PostgreSQL: "<redacted URI>: <reason>" once connected). */
pgcl_status pgcl_store_migrate(const char *db, int *version, const char **title, char *err, int cap);

/* Which database a key command writes to, and as whom: writer_id (and how long to wait for its
 * lock) name the writer a PostgreSQL store is opened as; SQLite ignores them. */
typedef struct pgcl_store_target {
    const char *db;
    const char *writer_id;
    int writer_lock_wait_ms;
} pgcl_store_target;

/* The API key commands of `pgcld keys` (keys.h's contracts). create and import create the database
 * and its schema when missing (SQLite: as the daemon would; PostgreSQL: the store's open migrates);
 * list reads (PostgreSQL: a read-only open, no writer); revoke writes. */
pgcl_status pgcl_store_keys_create(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                   char key_out[128], char key_id_out[32], char *err, int cap);
pgcl_status pgcl_store_keys_import(const pgcl_store_target *t, pgcl_role role, const char *name, const char *actor,
                                   const char *key, char key_id_out[32], bool *created, char *err, int cap);
pgcl_status pgcl_store_keys_list(const pgcl_store_target *t, pgcl_key_fn on_key, void *ctx, char *err, int cap);
pgcl_status pgcl_store_keys_revoke(const pgcl_store_target *t, const char *key_id, const char *actor, char *err,
                                   int cap);

/* `pgcld audit verify`: the chain(s) of db against the checkpoint files (chain.h's report; release
 * it). A SQLite file that is a fleet archive (audit_pg_archive.h) is verified as one. *per_writer:
 * the report has one chain per writer (PostgreSQL, a fleet archive). On a connection failure the
 * report is zeroed. */
pgcl_status pgcl_store_verify(const char *db, const char *const *checkpoint_files, int n_checkpoints,
                              const char *public_key_hex, pgcl_chain_report *report, bool *per_writer, char *err,
                              int cap);

/* `pgcld audit checkpoint`: signs db's head(s) with the key at key_path and writes out_file
 * (SQLite: pgcl_checkpoint_create; PostgreSQL: a fleet checkpoint, pgcl_pg_checkpoint_create).
 * out zeroed by the caller; release it (pgcl_store_checkpoint_release) in any case. */
pgcl_status pgcl_store_checkpoint_db(const char *db, const char *key_path, const char *out_file,
                                     pgcl_store_checkpoint *out, char *err, int cap);

/* `pgcld audit archive`'s parameters (archive.h, audit_pg_archive.h). */
typedef struct pgcl_store_archive_params {
    const char *horizon;     /* the audit columns' format */
    int contest_window_days; /* stores with writers only (pgcl_store_has_writers) */
    int64_t max_decisions;   /* 0: no bound */
    const char *key_path, *archive_path, *checkpoint_dir;
} pgcl_store_archive_params;

typedef struct pgcl_store_archive_result {
    bool is_fleet;
    pgcl_archive_result chain;    /* !is_fleet: pgcl_archive_run's */
    pgcl_pg_archive_result fleet; /* is_fleet: pgcl_pg_archive_run's */
} pgcl_store_archive_result;

/* Archives db's events before the horizon; out zeroed by the caller, released
 * (pgcl_store_archive_result_release) in any case. PGCL_ERR_NOT_FOUND: nothing to archive. */
pgcl_status pgcl_store_archive(const char *db, const pgcl_store_archive_params *p, pgcl_store_archive_result *out,
                               char *err, int cap);
void pgcl_store_archive_result_release(pgcl_store_archive_result *r); /* accepts NULL */

#endif
