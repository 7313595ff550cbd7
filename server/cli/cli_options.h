/* The command-line description and parser shared by the administration commands (pgcld keys,
 * pgcld audit, pgcld migrate, pgcld check-model): each command group describes its subcommands and
 * options in tables (a spec), and that one description drives parsing (--name VALUE or
 * --name=VALUE, the same error messages, exit status 2 for bad usage), `--help` / `-h` at every
 * level, and the man page (cli_man.c). pgcld serve has its own table-driven parser (config.c): its
 * options are typed and bounded. */
#ifndef PGCLD_CLI_OPTIONS_H
#define PGCLD_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* One option. A single option stores its value (a pointer into argv) in the `const char *` at
 * `offset` of the caller's struct. A list option (list_cap > 0) may be repeated: each value is
 * appended to the `const char *[list_cap]` array at `offset`, counted in the int at count_offset. */
typedef struct pgcld_cli_option {
    const char *name; /* without the leading "--" */
    int bit;          /* one bit: a subcommand allows a set of options by mask */
    size_t offset;
    int list_cap;          /* 0: a single option */
    size_t count_offset;   /* list options only */
    const char *list_noun; /* list options only: "at most <cap> <noun>" */
    const char *meta;      /* the value's placeholder in help: "FILE" */
    const char *def;       /* what applies when the option is absent, for help; NULL: nothing (or required) */
    const char *help;      /* one sentence, no final period */
    bool flag;             /* takes no value: present, its string is "1" (meta ""); --name=VALUE is refused */
} pgcld_cli_option;

/* One subcommand (pgcld keys create). A spec whose command takes no subcommand word (pgcld
 * migrate) has one row with name NULL. */
typedef struct pgcld_cli_command {
    const char *name;        /* "create"; NULL: the group itself */
    int allowed;             /* the option bits it takes */
    const char *synopsis;    /* its arguments after "pgcld keys create" in the usage line */
    const char *summary;     /* one line: what it does, no final period */
    const char *description; /* paragraphs, lines ending in '\n', blank line between paragraphs */
} pgcld_cli_command;

/* A command group: its subcommands, its options and the two habits in which pgcld keys and pgcld
 * audit differ (kept as each always answered). */
typedef struct pgcld_cli_spec {
    const char *command;     /* e.g. "pgcld keys": the prefix of every error and usage line */
    const char *summary;     /* one line for pgcld --help and the man page, no final period */
    const char *description; /* the group's paragraphs, shown in the group's help (may be NULL) */
    const char *exit_status; /* "0 done, 1 ..., 2 bad usage" */
    const pgcld_cli_command *commands;
    size_t n_commands;
    const pgcld_cli_option *options;
    size_t n_options;
    bool empty_value_ok;         /* "--name=" gives "" instead of "--name= needs a value" */
    bool duplicate_before_value; /* a repeated single option is refused before its value is read */
} pgcld_cli_spec;

/* The answer of pgcld_cli_select() and pgcld_cli_parse() that means "go on"; any other answer is
 * the exit status the command must exit with at once. */
#define PGCLD_CLI_PROCEED (-1)

/* Prints "<command>: <reason> (see <command> --help)", a blank line and the usage lines of the
 * group to stderr. Returns 2, the exit status of bad usage. */
int pgcld_cli_usage_error(const pgcld_cli_spec *spec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when word asks for the usage at the subcommand's place: "help", "--help" or "-h". */
bool pgcld_cli_is_help(const char *word);

/* True when arg is the help flag, "--help" or "-h". */
bool pgcld_cli_is_help_flag(const char *arg);

/* The subcommand of argv[0] (the word after the group's name): prints the group's help to stdout
 * and returns 0 for "help", "--help" or "-h"; prints a usage error and returns 2 when it is
 * missing or unknown; otherwise sets *cmd and returns PGCLD_CLI_PROCEED. For a group whose only
 * row has name NULL, *cmd is that row and argv[0] is not consumed (the caller knows which). */
int pgcld_cli_select(const pgcld_cli_spec *spec, int argc, char **argv, const pgcld_cli_command **cmd);

/* Parses argv[0..argc) (the words after the subcommand) for cmd's options into *target (the struct
 * the table's offsets describe; zeroed by the caller). Values point into argv. "--help" or "-h"
 * where an option may stand prints cmd's help to stdout and returns 0. Returns PGCLD_CLI_PROCEED,
 * or 2 after printing the reason (naming the option) and where the help is to stderr (an argument
 * that is not an option, an unknown or not allowed option, a single option given twice, a missing
 * value, too many values of a list option). Not thread-safe (prints). */
int pgcld_cli_parse(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, int argc, char **argv, void *target);

/* Prints the help of cmd (usage line, description, its options with their defaults, exit status),
 * or of the whole group when cmd is NULL (every usage line, the group's description, a line per
 * subcommand, every option). */
void pgcld_cli_print_help(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, FILE *out);

/* Prints text (one paragraph, no newline) filled to lines of at most `width` columns: the first
 * line continues at column `column` (where the caller already is), the others start with `indent`
 * blanks. Ends with a newline. A word longer than a line stands alone. */
void pgcld_cli_print_filled(FILE *out, const char *text, int column, int indent, int width);

/* "pgcld keys create" (or "pgcld migrate" for a row with name NULL) into buf. */
void pgcld_cli_command_name(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, char *buf, size_t cap);

#endif
