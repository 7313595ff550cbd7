/* The administration commands' option parser (see cli_options.h). */
#include "cli_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int pgcld_cli_usage_error(const pgcld_cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", spec->command);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", spec->usage);
    return 2;
}

bool pgcld_cli_is_help(const char *word) {
    return strcmp(word, "help") == 0 || strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0;
}

/* The allowed option named by the `len` bytes at zname, or NULL. */
static const pgcld_cli_option *find_option(const pgcld_cli_spec *spec, int allowed, const char *zname, size_t len) {
    for (size_t j = 0; j < spec->n_options; j++) {
        const pgcld_cli_option *opt = &spec->options[j];
        if ((allowed & opt->bit) && strlen(opt->name) == len && strncmp(opt->name, zname, len) == 0) return opt;
    }
    return NULL;
}

int pgcld_cli_parse(const pgcld_cli_spec *spec, int argc, char **argv, int allowed, void *target) {
    char *base = target;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) return pgcld_cli_usage_error(spec, "unexpected argument '%s'", arg);
        const char *zname = arg + 2, *eq = strchr(zname, '=');
        size_t len = eq ? (size_t)(eq - zname) : strlen(zname);
        const pgcld_cli_option *opt = find_option(spec, allowed, zname, len);
        if (!opt) return pgcld_cli_usage_error(spec, "unknown option '%s'", arg);
        const char **single = opt->list_cap == 0 ? (const char **)(base + opt->offset) : NULL;
        if (single && *single && spec->duplicate_before_value)
            return pgcld_cli_usage_error(spec, "option '%s' given twice", arg);
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value || (!*value && !spec->empty_value_ok)) return pgcld_cli_usage_error(spec, "%s needs a value", arg);
        if (!single) {
            int *count = (int *)(base + opt->count_offset);
            if (*count == opt->list_cap)
                return pgcld_cli_usage_error(spec, "at most %d %s", opt->list_cap, opt->list_noun);
            ((const char **)(base + opt->offset))[(*count)++] = value;
            continue;
        }
        if (*single) return pgcld_cli_usage_error(spec, "option '%s' given twice", arg);
        *single = value;
    }
    return 0;
}
