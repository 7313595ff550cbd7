/* The option parser shared by the administration commands (pgcld keys, pgcld audit): each command
 * describes its options in a table (name, bit, where the value goes) and gets the same syntax
 * (--name VALUE or --name=VALUE), the same error messages and the same exit status 2 for bad usage.
 * pgcld serve has its own table-driven parser (config.c): its options are typed and bounded. */
#ifndef PGCLD_CLI_OPTIONS_H
#define PGCLD_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

/* One option. A single option stores its value (a pointer into argv) in the `const char *` at
 * `offset` of the caller's struct. A list option (list_cap > 0) may be repeated: each value is
 * appended to the `const char *[list_cap]` array at `offset`, counted in the int at count_offset. */
typedef struct pgcld_cli_option {
    const char *name;    /* without the leading "--" */
    int bit;             /* one bit: a subcommand allows a set of options by mask */
    size_t offset;
    int list_cap;        /* 0: a single option */
    size_t count_offset; /* list options only */
    const char *list_noun; /* list options only: "at most <cap> <noun>" */
} pgcld_cli_option;

/* A command's options and the two habits in which pgcld keys and pgcld audit differ (kept as
 * each always answered). */
typedef struct pgcld_cli_spec {
    const char *command; /* e.g. "pgcld keys": the prefix of every error */
    const char *usage;   /* printed to stderr after every usage error */
    const pgcld_cli_option *options;
    size_t n_options;
    bool empty_value_ok;        /* "--name=" gives "" instead of "--name= needs a value" */
    bool duplicate_before_value; /* a repeated single option is refused before its value is read */
} pgcld_cli_spec;

/* Prints "<command>: <reason>", a blank line and the usage to stderr. Returns 2, the exit status
 * of bad usage. */
int pgcld_cli_usage_error(const pgcld_cli_spec *spec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when word asks for the usage: "help", "--help" or "-h". */
bool pgcld_cli_is_help(const char *word);

/* Parses argv[0..argc) (the words after the subcommand) for the options whose bits are in
 * `allowed` into *target (the struct the table's offsets describe; zeroed by the caller). Values
 * point into argv. Returns 0, or 2 after printing the reason and the usage (an argument that is not
 * an option, an unknown or not allowed option, a single option given twice, a missing value, too
 * many values of a list option). Not thread-safe (prints). */
int pgcld_cli_parse(const pgcld_cli_spec *spec, int argc, char **argv, int allowed, void *target);

#endif
