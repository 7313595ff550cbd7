/* pgcld keys ...: the command line that creates, imports, lists and revokes API keys in the audit
 * database. */
#ifndef PGCLD_CLI_KEYS_H
#define PGCLD_CLI_KEYS_H

/* Runs one keys subcommand. argv starts after the word "keys": argv[0] is "create", "import",
 * "list", "revoke" or "help". Initialises libsodium itself. Writes results to stdout and reasons to stderr.
 * Returns the process exit status: 0 done, 1 the operation failed, 2 bad usage. Not thread-safe
 * (meant to be called from main). */
int pgcld_cli_keys(int argc, char **argv);

#endif
