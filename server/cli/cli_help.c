/* pgcld's command table and top-level help (see cli_help.h). */
#include "cli_help.h"

#include <stdarg.h>
#include <string.h>

#include "cli_audit.h"
#include "cli_keys.h"
#include "cli_migrate.h"
#include "config.h"

static const pgcld_cli_command CHECK_MODEL[] = {
    {.name = NULL,
     .allowed = 0,
     .synopsis = "DIR...",
     .summary = "validate checkpoint directories exactly as serve would load them",
     .description = "Loads each checkpoint directory DIR (DIR/config.json, DIR/model.safetensors) as pgcld serve\n"
                    "would, with every validation and the golden outputs recomputed, and prints one JSON line per\n"
                    "directory: dir, ok, and sha256, task, dims, golden_verified when it loads, error when not.\n"}};

const pgcld_cli_spec pgcld_cli_check_model_spec = {
    .command = "pgcld check-model",
    .summary = "validate checkpoints as serve would (goldens included); a JSON line per directory",
    .exit_status = "0 every directory loads, 1 one or more do not, 2 bad usage",
    .commands = CHECK_MODEL,
    .n_commands = 1};

static const pgcld_cli_entry ENTRIES[] = {
    {"serve", NULL},
    {"check-model", &pgcld_cli_check_model_spec},
    {"keys", &pgcld_cli_keys_spec},
    {"audit", &pgcld_cli_audit_spec},
    {"migrate", &pgcld_cli_migrate_spec},
};

const char *pgcld_cli_entry_summary(const pgcld_cli_entry *entry) {
    return entry->spec ? entry->spec->summary : pgcld_config_summary;
}

const pgcld_cli_entry *pgcld_cli_entries(int *n) {
    *n = (int)(sizeof ENTRIES / sizeof ENTRIES[0]);
    return ENTRIES;
}

int pgcld_cli_check_model_args(int argc, char **argv) {
    const pgcld_cli_spec *spec = &pgcld_cli_check_model_spec;
    for (int i = 0; i < argc; i++) {
        if (pgcld_cli_is_help_flag(argv[i])) {
            pgcld_cli_print_help(spec, NULL, stdout);
            return 0;
        }
    }
    for (int i = 0; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1])
            return pgcld_cli_usage_error(spec, "unknown option '%s'; name a directory that starts with '-' as ./%s",
                                         argv[i], argv[i]);
    if (argc < 1) return pgcld_cli_usage_error(spec, "%s", "needs at least one checkpoint directory");
    return PGCLD_CLI_PROCEED;
}

static void print_commands(FILE *out) {
    fputs("usage: pgcld COMMAND [OPTIONS]    (pgcld COMMAND --help: that command's help)\n\nCommands:\n", out);
    for (size_t i = 0; i < sizeof ENTRIES / sizeof ENTRIES[0]; i++) {
        fprintf(out, "  %-13s ", ENTRIES[i].name);
        pgcld_cli_print_filled(out, pgcld_cli_entry_summary(&ENTRIES[i]), 16, 16, 100);
    }
    fprintf(out, "  %-13s %s\n  %-13s %s\n", "--help, -h", "this text", "--version", "print the version");
}

void pgcld_cli_print_top_help(FILE *out) {
    fputs("pgcld: serves PGCL checkpoints over HTTP and logs every decision to an audit database.\n\n", out);
    print_commands(out);
    fputs("Every command and subcommand takes --help (pgcld keys create --help); man pgcld has them all.\n\n", out);
    pgcld_config_print_help(out);
}

int pgcld_cli_top_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pgcld: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see pgcld --help)\n\n", stderr);
    print_commands(stderr);
    return 2;
}
