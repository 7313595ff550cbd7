/* The administration commands' option parser and help (see cli_options.h). */
#include "cli_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pgcld_cli_command_name(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, char *buf, size_t cap) {
    if (cmd && cmd->name)
        snprintf(buf, cap, "%s %s", spec->command, cmd->name);
    else
        snprintf(buf, cap, "%s", spec->command);
}

#define HELP_WIDTH 100      /* columns of the help's filled lines */
#define HELP_TEXT_COLUMN 27 /* where an option's text starts */

/* "usage: " before the first line, aligned blanks before the others. */
static void print_usage_lines(const pgcld_cli_spec *spec, const pgcld_cli_command *only, FILE *out) {
    for (size_t i = 0; i < spec->n_commands; i++) {
        const pgcld_cli_command *cmd = &spec->commands[i];
        if (only && cmd != only) continue;
        char name[128];
        pgcld_cli_command_name(spec, cmd, name, sizeof name);
        int column = fprintf(out, "%s%s", i == 0 || only ? "usage: " : "       ", name);
        if (*cmd->synopsis) fputc(' ', out);
        /* a long synopsis continues under its first argument */
        pgcld_cli_print_filled(out, cmd->synopsis, column + 1, column + 1, HELP_WIDTH);
    }
}

int pgcld_cli_usage_error(const pgcld_cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", spec->command);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see %s --help)\n\n", spec->command);
    print_usage_lines(spec, NULL, stderr);
    return 2;
}

/* A usage error of one subcommand: "<command> <sub>: <reason> (see <command> <sub> --help)" and
 * its usage line. Returns 2. */
static int command_usage_error(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int command_usage_error(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, const char *fmt, ...) {
    char name[128];
    pgcld_cli_command_name(spec, cmd, name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see %s --help)\n\n", name);
    print_usage_lines(spec, cmd, stderr);
    return 2;
}

bool pgcld_cli_is_help_flag(const char *arg) {
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

bool pgcld_cli_is_help(const char *word) {
    return strcmp(word, "help") == 0 || pgcld_cli_is_help_flag(word);
}

int pgcld_cli_select(const pgcld_cli_spec *spec, int argc, char **argv, const pgcld_cli_command **cmd) {
    if (spec->n_commands == 1 && !spec->commands[0].name) {
        *cmd = &spec->commands[0];
        return PGCLD_CLI_PROCEED;
    }
    char list[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < spec->n_commands && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s",
                                i == 0                      ? ""
                                : i + 1 == spec->n_commands ? " or "
                                                            : ", ",
                                spec->commands[i].name);
    if (argc < 1) return pgcld_cli_usage_error(spec, "missing subcommand: %s", list);
    if (pgcld_cli_is_help(argv[0])) {
        pgcld_cli_print_help(spec, NULL, stdout);
        return 0;
    }
    for (size_t i = 0; i < spec->n_commands; i++) {
        if (strcmp(argv[0], spec->commands[i].name) == 0) {
            *cmd = &spec->commands[i];
            return PGCLD_CLI_PROCEED;
        }
    }
    if (argv[0][0] == '-')
        return pgcld_cli_usage_error(spec, "unknown option '%s'; a subcommand comes first: %s", argv[0], list);
    return pgcld_cli_usage_error(spec, "unknown subcommand '%s' (%s)", argv[0], list);
}

/* The allowed option named by the `len` bytes at zname, or NULL. */
static const pgcld_cli_option *find_option(const pgcld_cli_spec *spec, int allowed, const char *zname, size_t len) {
    for (size_t j = 0; j < spec->n_options; j++) {
        const pgcld_cli_option *opt = &spec->options[j];
        if ((allowed & opt->bit) && strlen(opt->name) == len && strncmp(opt->name, zname, len) == 0) return opt;
    }
    return NULL;
}

int pgcld_cli_parse(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, int argc, char **argv, void *target) {
    char *base = target;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (pgcld_cli_is_help_flag(arg)) {
            pgcld_cli_print_help(spec, cmd, stdout);
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (arg[0] == '-' && arg[1]) return command_usage_error(spec, cmd, "unknown option '%s'", arg);
            return command_usage_error(spec, cmd, "unexpected argument '%s'", arg);
        }
        const char *zname = arg + 2, *eq = strchr(zname, '=');
        size_t len = eq ? (size_t)(eq - zname) : strlen(zname);
        const pgcld_cli_option *opt = find_option(spec, cmd->allowed, zname, len);
        if (!opt) return command_usage_error(spec, cmd, "unknown option '%.*s'", (int)len + 2, arg);
        const char **single = opt->list_cap == 0 ? (const char **)(base + opt->offset) : NULL;
        if (single && *single && spec->duplicate_before_value)
            return command_usage_error(spec, cmd, "option '%s' given twice", arg);
        if (opt->flag && eq) return command_usage_error(spec, cmd, "--%s takes no value", opt->name);
        const char *value = opt->flag ? "1" : eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value || (!*value && !spec->empty_value_ok))
            return command_usage_error(spec, cmd, "%s needs a value", arg);
        if (!single) {
            int *count = (int *)(base + opt->count_offset);
            if (*count == opt->list_cap)
                return command_usage_error(spec, cmd, "at most %d %s", opt->list_cap, opt->list_noun);
            ((const char **)(base + opt->offset))[(*count)++] = value;
            continue;
        }
        if (*single) return command_usage_error(spec, cmd, "option '%s' given twice", arg);
        *single = value;
    }
    return PGCLD_CLI_PROCEED;
}

void pgcld_cli_print_filled(FILE *out, const char *text, int column, int indent, int width) {
    int col = column;
    bool line_empty = true;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len) break;
        if (!line_empty && col + 1 + (int)len > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            line_empty = true;
        }
        if (!line_empty) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, len, out);
        col += (int)len;
        line_empty = false;
        p += len;
    }
    fputc('\n', out);
}

/* One line per option whose bit is in allowed, then --help. */
static void print_options(const pgcld_cli_spec *spec, int allowed, FILE *out) {
    fputs("\nOptions (--name VALUE or --name=VALUE):\n", out);
    for (size_t j = 0; j < spec->n_options; j++) {
        const pgcld_cli_option *opt = &spec->options[j];
        if (!(allowed & opt->bit)) continue;
        char flag[64], text[1024];
        snprintf(flag, sizeof flag, "--%s%s%s", opt->name, opt->meta[0] ? " " : "", opt->meta);
        snprintf(text, sizeof text, "%s%s%s%s%s", opt->help, opt->list_cap ? " (repeatable)" : "",
                 opt->def ? " (default: " : "", opt->def ? opt->def : "", opt->def ? ")" : "");
        fprintf(out, "  %-24s ", flag);
        int flag_len = (int)strlen(flag), column = 2 + (flag_len > 24 ? flag_len : 24) + 1;
        pgcld_cli_print_filled(out, text, column, HELP_TEXT_COLUMN, HELP_WIDTH);
    }
    fprintf(out, "  %-24s %s\n", "--help, -h", "print this help and exit");
}

/* The one-line summary as a sentence: capital first letter, final period. */
static void print_sentence(const char *summary, FILE *out) {
    char first = summary[0] >= 'a' && summary[0] <= 'z' ? (char)(summary[0] - 'a' + 'A') : summary[0];
    fprintf(out, "\n%c%s.\n", first, summary[0] ? summary + 1 : "");
}

void pgcld_cli_print_help(const pgcld_cli_spec *spec, const pgcld_cli_command *cmd, FILE *out) {
    if (spec->n_commands == 1 && !spec->commands[0].name) cmd = &spec->commands[0];
    print_usage_lines(spec, cmd, out);
    if (cmd) {
        print_sentence(cmd->summary, out);
        if (cmd->description) fprintf(out, "\n%s", cmd->description);
        if (spec->description && !cmd->name) fprintf(out, "\n%s", spec->description);
        print_options(spec, cmd->allowed, out);
    } else {
        print_sentence(spec->summary, out);
        if (spec->description) fprintf(out, "\n%s", spec->description);
        fputs("\nCommands:\n", out);
        int all = 0;
        for (size_t i = 0; i < spec->n_commands; i++) {
            fprintf(out, "  %-20s %s\n", spec->commands[i].name, spec->commands[i].summary);
            all |= spec->commands[i].allowed;
        }
        fprintf(out, "%s COMMAND --help describes a command and lists its options.\n", spec->command);
        print_options(spec, all, out);
    }
    char status[512];
    snprintf(status, sizeof status, "Exit status: %s.", spec->exit_status);
    fputc('\n', out);
    pgcld_cli_print_filled(out, status, 0, 2, HELP_WIDTH);
}
