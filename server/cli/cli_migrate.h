/* pgcld migrate --db DB: applies the audit store's pending migrations and exits, so that a fleet's
 * schema can be created or upgraded before (or without) starting a replica. */
#ifndef PGCLD_CLI_MIGRATE_H
#define PGCLD_CLI_MIGRATE_H

#include "cli_options.h"

/* The command's description: its options (help, man page). */
extern const pgcld_cli_spec pgcld_cli_migrate_spec;

/* Runs the command; argv starts after the word "migrate". Returns the exit status: 0 done, 1 the
 * migrations failed (reason on stderr), 2 bad usage. Not thread-safe (meant to be called from
 * main). */
int pgcld_cli_migrate(int argc, char **argv);

#endif
