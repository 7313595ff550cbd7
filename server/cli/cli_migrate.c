/* pgcld migrate: see cli_migrate.h. A PostgreSQL URI gets migrations/pg, applied under the
 * migrations advisory lock exactly as a starting replica applies them (pgcl_pg_migrate), on one
 * connection and without starting a writer; a SQLite file gets the SQLite migrations through the
 * store's own open (which creates the file when missing), as pgcld serve would. */
#include "cli_migrate.h"

#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "audit_pg.h"
#include "cli_options.h"
#include "pg_db.h"

typedef struct cli_opts {
    const char *db;
} cli_opts;

enum { OPT_DB = 1 };

static const pgcld_cli_option OPTIONS[] = {
    {.name = "db",
     .bit = OPT_DB,
     .offset = offsetof(cli_opts, db),
     .meta = "DB",
     .help = "the audit database: a SQLite file (created when missing) or a PostgreSQL URI postgresql://..."}};

static const pgcld_cli_command COMMANDS[] = {
    {.name = NULL,
     .allowed = OPT_DB,
     .synopsis = "--db DB",
     .summary = "apply the audit database's pending schema migrations and exit",
     .description = "Applies the pending schema migrations of the audit database DB and exits: DB is a SQLite file\n"
                    "(created when missing) or a PostgreSQL URI (postgresql://... or postgres://...), the database\n"
                    "of a fleet, where the migrations run under an advisory lock, so that it is safe beside\n"
                    "replicas that are starting. pgcld serve applies them too; this command lets an operator do it\n"
                    "first, e.g. with a role that may create tables while the replicas' role may not.\n"}};

const pgcld_cli_spec pgcld_cli_migrate_spec = {.command = "pgcld migrate",
                                               .summary = "apply the audit database's pending migrations",
                                               .exit_status = "0 done, 1 the migrations failed (reason on stderr), "
                                                              "2 bad usage",
                                               .commands = COMMANDS,
                                               .n_commands = 1,
                                               .options = OPTIONS,
                                               .n_options = sizeof OPTIONS / sizeof OPTIONS[0]};
static const pgcld_cli_spec *const CLI = &pgcld_cli_migrate_spec;

/* PostgreSQL: one connection, the migrations under their lock. */
static int migrate_postgresql(const char *db, const char *shown) {
    char err[1024];
    PGconn *conn = pgcl_pg_connect(db, err, sizeof err);
    if (!conn) {
        fprintf(stderr, "pgcld migrate: %s\n", err);
        return 1;
    }
    int version = 0;
    pgcl_status st = pgcl_pg_migrate(conn, &version, err, sizeof err);
    PQfinish(conn);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld migrate: %s: %s\n", shown, err);
        return 1;
    }
    printf("%s: PostgreSQL schema at version %d\n", shown, version);
    return 0;
}

/* SQLite: the store's open applies them. */
static int migrate_sqlite(const char *db) {
    char err[1024];
    pgcl_audit_options aopts = {.path = db, .synchronous_full = true};
    pgcl_audit *audit = NULL;
    if (pgcl_audit_open(&aopts, &audit, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld migrate: %s\n", err);
        return 1;
    }
    int version = pgcl_audit_schema_version(audit);
    pgcl_audit_close(audit);
    printf("%s: SQLite schema at version %d\n", db, version);
    return 0;
}

int pgcld_cli_migrate(int argc, char **argv) {
    if (argc >= 1 && strcmp(argv[0], "help") == 0) { /* pgcld migrate help, as pgcld keys help */
        pgcld_cli_print_help(CLI, NULL, stdout);
        return 0;
    }
    cli_opts o = {0};
    int rc = pgcld_cli_parse(CLI, &COMMANDS[0], argc, argv, &o);
    if (rc != PGCLD_CLI_PROCEED) return rc;
    if (!o.db || !*o.db) return pgcld_cli_usage_error(CLI, "%s", "needs --db DB");
    if (sodium_init() < 0) {
        fprintf(stderr, "pgcld migrate: libsodium failed to initialise\n");
        return 1;
    }
    char shown[512];
    pgcl_pg_redact(o.db, shown, sizeof shown);
    rc = pgcl_pg_is_uri(o.db) ? migrate_postgresql(o.db, shown) : migrate_sqlite(o.db);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld migrate: cannot write to stdout\n");
        rc = 1;
    }
    return rc;
}
