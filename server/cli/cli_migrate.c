/* pgcld migrate: see cli_migrate.h. The store driver that claims --db applies its migrations
 * (store_registry.h, pgcl_store_migrate): a PostgreSQL URI gets migrations/pg under the migrations
 * advisory lock exactly as a starting replica applies them, on one connection and without starting
 * a writer; a SQLite file gets the SQLite migrations through the store's own open (which creates
 * the file when missing), as pgcld serve would. */
#include "cli_migrate.h"

#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_options.h"
#include "store_registry.h"

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

/* The driver's migrations; prints the schema's version. */
static int migrate(const char *db, const char *shown) {
    char err[1024];
    int version = 0;
    const char *title = NULL;
    if (pgcl_store_migrate(db, &version, &title, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld migrate: %s\n", err);
        return 1;
    }
    printf("%s: %s schema at version %d\n", shown, title, version);
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
    char buf[512];
    rc = migrate(o.db, pgcl_store_shown(o.db, buf, sizeof buf)); /* a URI's password hidden */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld migrate: cannot write to stdout\n");
        rc = 1;
    }
    return rc;
}
