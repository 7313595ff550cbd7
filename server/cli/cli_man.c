/* The man page pgcld(1), written in roff (the man macros) from the same tables that drive parsing
 * and --help: serve's option table (config.c) and each command group's spec (cli_options.h). The
 * build runs it (server/cli/gen_manpage.c, a meson custom_target), so the page cannot drift from
 * the code. See cli_man.h.
 *
 * Escaping: every text goes through roff_text(), which writes '\' as \e and '-' as \- (so option
 * names stay copyable), keeps a line from starting with a control character ('.' or '\''), and
 * writes any byte above ASCII as \[char<N>]: the tables are ASCII (an assertion says so). */
#include "cli_man.h"

#include <stdbool.h>
#include <string.h>

#include "cli_help.h"
#include "config.h"
#include "status.h"

/* Writes text as roff. Fill mode (fill true): each input line is trimmed of its leading blanks,
 * so that the formatter fills the paragraph, and a blank line starts a new paragraph (.PP).
 * No-fill mode: lines are kept as they are. No newline is added after the last line. */
static void roff_text(FILE *out, const char *text, bool fill) {
    bool line_start = true;
    for (const char *p = text; *p; p++) {
        if (line_start && fill) {
            while (*p == ' ')
                p++;
            if (*p == '\n') { /* a blank line: a new paragraph */
                fputs(".PP\n", out);
                continue;
            }
            if (!*p) break;
        }
        if (line_start && (*p == '.' || *p == '\'')) fputs("\\&", out);
        unsigned char c = (unsigned char)*p;
        PGCL_ASSERT(c < 0x80); /* the help tables are ASCII: a UTF-8 sequence would need decoding */
        if (c == '\\')
            fputs("\\e", out);
        else if (c == '-')
            fputs("\\-", out);
        else
            fputc(c, out);
        line_start = c == '\n';
    }
}

/* A line of text in fill mode, then a newline. */
static void roff_line(FILE *out, const char *text) {
    roff_text(out, text, true);
    fputc('\n', out);
}

/* "\fB--name\fR \fIMETA\fR" on a line of its own (the tag of a .TP). */
static void roff_option_tag(FILE *out, const char *name, const char *meta) {
    fputs("\\fB\\-\\-", out);
    roff_text(out, name, false);
    fputs("\\fR", out);
    if (meta && *meta) {
        fputs(" \\fI", out);
        roff_text(out, meta, false);
        fputs("\\fR", out);
    }
    fputc('\n', out);
}

/* text as a sentence: a capital first letter when `capital`, a final period unless it has one. */
static void roff_sentence_of(FILE *out, const char *text, bool capital) {
    char sentence[1100];
    size_t len = strlen(text);
    snprintf(sentence, sizeof sentence, "%c%s%s",
             capital && text[0] >= 'a' && text[0] <= 'z' ? text[0] - 'a' + 'A' : text[0], len ? text + 1 : "",
             len && text[len - 1] == '.' ? "" : ".");
    roff_line(out, sentence);
}

/* The summary as a sentence: capital first letter, final period. */
static void roff_sentence(FILE *out, const char *summary) {
    roff_sentence_of(out, summary, true);
}

/* "pgcld keys create" in bold, then its synopsis; one line. */
static void roff_synopsis(FILE *out, const pgcld_cli_spec *spec, const pgcld_cli_command *cmd) {
    char name[128];
    pgcld_cli_command_name(spec, cmd, name, sizeof name);
    fputs("\\fB", out);
    roff_text(out, name, false);
    fputs("\\fR ", out);
    roff_text(out, cmd->synopsis, false);
    fputc('\n', out);
}

static void write_synopsis(FILE *out) {
    /* fill mode, a break after each line: a long synopsis wraps instead of running off the page */
    fputs(".SH SYNOPSIS\n\\fBpgcld serve\\fR [\\fIOPTIONS\\fR]\n.br\n", out);
    int n;
    const pgcld_cli_entry *entries = pgcld_cli_entries(&n);
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; entries[i].spec && j < entries[i].spec->n_commands; j++) {
            roff_synopsis(out, entries[i].spec, &entries[i].spec->commands[j]);
            fputs(".br\n", out);
        }
    }
    fputs("\\fBpgcld\\fR \\fICOMMAND\\fR [\\fISUBCOMMAND\\fR] \\fB\\-\\-help\\fR | \\fB\\-h\\fR\n.br\n"
          "\\fBpgcld \\-\\-version\\fR\n",
          out);
}

static void write_description(FILE *out) {
    fputs(".SH DESCRIPTION\n", out);
    roff_line(out, "pgcld serves PGCL checkpoints (moderation classifiers over text embeddings) over HTTP and "
                   "records every decision in a tamper-evident audit database: a SQLite file, or a PostgreSQL "
                   "database shared by a fleet of replicas. Its commands:");
    int n;
    const pgcld_cli_entry *entries = pgcld_cli_entries(&n);
    for (int i = 0; i < n; i++) {
        fputs(".TP\n\\fB", out);
        roff_text(out, entries[i].name, false);
        fputs("\\fR\n", out);
        roff_sentence(out, pgcld_cli_entry_summary(&entries[i]));
    }
    fputs(".PP\n", out);
    roff_line(out, "Every command and subcommand prints its own help with --help or -h (pgcld keys create --help) "
                   "and exits 0. An unknown option exits 2 with a message on standard error that names it.");
}

/* serve's options, from the option table. */
static void write_serve_options(FILE *out) {
    fputs(".SH OPTIONS\n", out);
    roff_line(out, "The options of pgcld serve, as --name VALUE or --name=VALUE. Each can also be set in the "
                   "environment (its variable is named below) or in a config file (name = value); see "
                   "CONFIGURATION.");
    for (int i = 0; i < pgcld_config_option_count(); i++) {
        pgcld_config_option_doc doc;
        pgcld_config_option_describe(i, &doc);
        char text[1024];
        snprintf(text, sizeof text, "Default: %s. Value: %s. Environment: %s. %s.", *doc.def ? doc.def : "none",
                 doc.values, doc.env, doc.reload ? "SIGHUP applies a new value" : "Needs a restart to change");
        fputs(".TP\n", out);
        roff_option_tag(out, doc.name, doc.meta);
        roff_sentence_of(out, doc.help, false);
        fputs(".br\n", out);
        roff_line(out, text);
    }
    fputs(".TP\n", out);
    roff_option_tag(out, "print-config", NULL);
    roff_sentence(out, pgcld_config_print_config_help);
    fputs(".TP\n\\fB\\-\\-help\\fR, \\fB\\-h\\fR\n", out);
    roff_line(out, "Print serve's help and exit.");
}

static void write_configuration(FILE *out) {
    fputs(".SH CONFIGURATION\n.nf\n", out);
    roff_text(out, pgcld_config_sources_help, false);
    fputs(".fi\n", out);
}

static void write_signals(FILE *out) {
    fputs(".SH SIGNALS\n", out);
    roff_line(out, "SIGHUP re-reads the config file and the environment (flags still win) and applies the new "
                   "values of these options:");
    /* the list, captured from config.c, so that it is the table's */
    char list[1024] = "";
    FILE *mem = fmemopen(list, sizeof list - 1, "w");
    if (mem) {
        pgcld_config_print_reloadable(mem);
        fclose(mem);
    }
    char sentence[1100];
    snprintf(sentence, sizeof sentence, "%s; the other options need a restart.", list);
    roff_line(out, sentence);
    roff_line(out, "An invalid configuration is refused whole (the running one stays). SIGTERM or SIGINT stop "
                   "accepting, let running requests finish (up to --shutdown-grace seconds), flush the audit log "
                   "and exit 0; a second signal exits at once.");
}

/* One command: a subsection with its synopsis, summary, description and options. */
static void write_command(FILE *out, const pgcld_cli_spec *spec, const pgcld_cli_command *cmd) {
    char name[128];
    pgcld_cli_command_name(spec, cmd, name, sizeof name);
    fputs(".SS ", out);
    roff_text(out, name, false);
    fputs("\n", out);
    roff_synopsis(out, spec, cmd);
    fputs(".PP\n", out);
    roff_sentence(out, cmd->summary);
    if (cmd->description) {
        fputs(".PP\n", out);
        roff_text(out, cmd->description, true);
    }
    for (size_t k = 0; k < spec->n_options; k++) {
        const pgcld_cli_option *opt = &spec->options[k];
        if (!(cmd->allowed & opt->bit)) continue;
        fputs(".TP\n", out);
        roff_option_tag(out, opt->name, opt->meta);
        roff_sentence_of(out, opt->help, false);
        if (opt->list_cap) roff_line(out, "Repeatable.");
        if (opt->def) {
            char text[256];
            snprintf(text, sizeof text, "Default: %s.", opt->def);
            roff_line(out, text);
        }
    }
}

/* A command group: what is common to its subcommands (its description, its exit status), then a
 * subsection per subcommand. A group without subcommands (pgcld migrate) is one subsection. */
static void write_group(FILE *out, const pgcld_cli_spec *spec) {
    bool single = spec->n_commands == 1 && !spec->commands[0].name;
    if (single) {
        write_command(out, spec, &spec->commands[0]);
    } else {
        fputs(".SS ", out);
        roff_text(out, spec->command, false);
        fputs("\n", out);
        roff_sentence(out, spec->summary);
    }
    if (spec->description) {
        fputs(".PP\n", out);
        roff_text(out, spec->description, true);
    }
    fputs(".PP\nExit status: ", out);
    roff_text(out, spec->exit_status, false);
    fputs(".\n", out);
    for (size_t j = 0; !single && j < spec->n_commands; j++)
        write_command(out, spec, &spec->commands[j]);
}

static void write_commands(FILE *out) {
    fputs(".SH COMMANDS\n", out);
    int n;
    const pgcld_cli_entry *entries = pgcld_cli_entries(&n);
    for (int i = 0; i < n; i++)
        if (entries[i].spec) write_group(out, entries[i].spec);
}

static void write_tail(FILE *out) {
    fputs(".SH ENVIRONMENT\n", out);
    roff_line(out, "PGCLD_<NAME>: the serve option --<name> (upper-cased, '-' as '_'), e.g. PGCLD_MAX_BATCH=256; "
                   "see OPTIONS. PGCLD_CONFIG names the config file. OPENBLAS_CORETYPE overrides the OpenBLAS "
                   "kernel pgcld would pick.");
    fputs(".SH EXIT STATUS\n", out);
    roff_line(out, "pgcld serve exits 0 after a drain, 1 on a start-up failure (the reason is logged) and 2 on bad "
                   "usage or a bad option value (the reason is on standard error). Each other command's exit "
                   "status is given under COMMANDS; 2 is always bad usage.");
    fputs(".SH SEE ALSO\n", out);
    roff_line(out, "README.md and docs/operations.md in pgcld's source tree; deploy/pgcld.conf, a sample config "
                   "file; deploy/systemd/, the systemd unit.");
}

int pgcld_cli_write_man(FILE *out, const char *version) {
    fputs(".\\\" pgcld(1): generated at build time by pgcld-manpage from pgcld's option tables; do not edit.\n", out);
    fputs(".TH PGCLD 1 \"\" \"pgcld ", out);
    roff_text(out, version, false);
    fputs("\" \"User Commands\"\n.SH NAME\npgcld \\- serve PGCL checkpoints over HTTP and log every decision to "
          "an audit database\n"
          ".nh\n.ad l\n", /* no hyphenation (option and variable names), ragged right */
          out);
    write_synopsis(out);
    write_description(out);
    write_serve_options(out);
    write_configuration(out);
    write_signals(out);
    write_commands(out);
    write_tail(out);
    return ferror(out) ? -1 : 0;
}
