/* pgcld audit ...: the command line that verifies the audit chain of a database, exports signed
 * checkpoints of it, and makes signing keys. */
#ifndef PGCLD_CLI_AUDIT_H
#define PGCLD_CLI_AUDIT_H

#include "cli_options.h"

/* The command group's description: its subcommands and options (help, man page). */
extern const pgcld_cli_spec pgcld_cli_audit_spec;

/* Runs one audit subcommand. argv starts after the word "audit": argv[0] is a subcommand
 * (verify, checkpoint, keygen, archive, verify-proof, verify-consistency) or "help"; --help or -h
 * after a subcommand prints its help. Initialises libsodium itself. Writes results to stdout and
 * reasons to stderr. Returns the process exit status: 0 done (verify: the chain is intact), 1 the
 * chain is not intact or the operation failed, 2 bad usage. Not thread-safe (meant for main). */
int pgcld_cli_audit(int argc, char **argv);

#endif
