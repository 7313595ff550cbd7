/* The top of pgcld's command line: the table of commands (serve, check-model, keys, audit,
 * migrate) that `pgcld --help` and the man page list, check-model's description, and the
 * top-level usage errors. Each command's own help comes from its spec (cli_options.h) or, for
 * serve, from the option table (config.c). */
#ifndef PGCLD_CLI_HELP_H
#define PGCLD_CLI_HELP_H

#include <stdio.h>

#include "cli_options.h"

/* One command of pgcld. */
typedef struct pgcld_cli_entry {
    const char *name;           /* "keys" */
    const pgcld_cli_spec *spec; /* its subcommands and options; NULL for serve (config.c) */
} pgcld_cli_entry;

/* What the command does: one line, no final period. */
const char *pgcld_cli_entry_summary(const pgcld_cli_entry *entry);

/* The commands, in the order help lists them; *n gets their number. */
const pgcld_cli_entry *pgcld_cli_entries(int *n);

/* pgcld check-model DIR...: no options. */
extern const pgcld_cli_spec pgcld_cli_check_model_spec;

/* The words after "check-model": prints its help to stdout and returns 0 for --help or -h
 * anywhere; returns 2 after a usage error on stderr for no directory or an option (a word starting
 * with '-'; name such a directory ./-x); otherwise PGCLD_CLI_PROCEED. */
int pgcld_cli_check_model_args(int argc, char **argv);

/* pgcld --help: the commands, then serve's help. */
void pgcld_cli_print_top_help(FILE *out);

/* Prints "pgcld: <reason> (see pgcld --help)" and the list of commands to stderr; returns 2. */
int pgcld_cli_top_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
