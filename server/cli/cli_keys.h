/* pgcld keys ...: the command line that creates, imports, lists and revokes API keys in the audit
 * database. */
#ifndef PGCLD_CLI_KEYS_H
#define PGCLD_CLI_KEYS_H

#include "cli_options.h"

/* The command group's description: its subcommands and options (help, man page). */
extern const pgcld_cli_spec pgcld_cli_keys_spec;

/* Runs one keys subcommand. argv starts after the word "keys": argv[0] is "create", "import",
 * "list", "revoke" or "help"; --help or -h after a subcommand prints its help. Initialises libsodium itself. Writes results to stdout and reasons to stderr.
 * Returns the process exit status: 0 done, 1 the operation failed, 2 bad usage. Not thread-safe
 * (meant to be called from main). */
int pgcld_cli_keys(int argc, char **argv);

#endif
