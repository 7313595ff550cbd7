/* Option table and parsing; see config.h. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "status.h"

typedef enum { OPT_STRING, OPT_LONG } opt_type;

typedef struct opt_def {
    const char *name;
    opt_type type;
    size_t offset;
    const char *def;
    long min, max;
    const char *help;
} opt_def;

#define S(field) OPT_STRING, offsetof(pgcld_config, field)
#define L(field) OPT_LONG, offsetof(pgcld_config, field)

static const opt_def g_opts[] = {
    {"listen", S(listen), "127.0.0.1:8080", 0, 0, "HOST:PORT to listen on (port 0 picks a free port)"},
    {"models", S(models_dir), "models", 0, 0, "model repository: DIR/<model>/<version>/{config.json,model.safetensors}"},
    {"db", S(db_path), "pgcld-audit.db", 0, 0, "SQLite audit database (created if missing)"},
    {"default-model", S(default_model), "toxicity", 0, 0, "model used when a request names none"},
    {"port-file", S(port_file), "", 0, 0, "write the bound port to this file once listening"},
    {"synchronous", S(synchronous), "FULL", 0, 0, "audit durability: FULL (fsync per commit) or NORMAL"},
    {"log-level", S(log_level), "info", 0, 0, "debug, info, warn or error"},
    {"max-body-bytes", L(max_body_bytes), "67108864", 1024, 1l << 31, "largest request body accepted (413 beyond)"},
    {"max-batch", L(max_batch), "1024", 1, 1 << 20, "most items in one request (413 beyond)"},
    {"max-connections", L(max_connections), "512", 1, 65536, "simultaneous client connections"},
    {"connection-timeout", L(connection_timeout_s), "30", 1, 3600, "seconds an idle connection is kept"},
    {"compute-workers", L(compute_workers), "0", 0, 1024, "concurrent forward passes (0 = number of CPUs)"},
    {"blas-threads", L(blas_threads), "1", 1, 256, "OpenBLAS threads inside one forward pass"},
    {"chunk-rows", L(chunk_rows), "256", 1, 65536, "rows per GEMM call (sizes each worker's scratch)"},
    {"max-pending-rows", L(max_pending_rows), "65536", 1, 1 << 24, "audit rows waiting to be written before 503"},
    {"shutdown-grace", L(shutdown_grace_s), "10", 0, 3600, "seconds to let requests finish on SIGTERM"},
};
#define N_OPTS ((int)(sizeof g_opts / sizeof g_opts[0]))

static int set_opt(pgcld_config *cfg, const opt_def *o, const char *value, char *err, int cap) {
    void *field = (char *)cfg + o->offset;
    if (o->type == OPT_STRING) {
        char *copy = strdup(value);
        if (!copy) return -1;
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < o->min || v > o->max) {
        pgcl_errorf(err, cap, "--%s: '%s' is not an integer in [%ld, %ld]", o->name, value, o->min, o->max);
        return -1;
    }
    *(long *)field = v;
    return 0;
}

void pgcld_config_defaults(pgcld_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_OPTS; i++) set_opt(cfg, &g_opts[i], g_opts[i].def, NULL, 0);
}

void pgcld_config_free(pgcld_config *cfg) {
    for (int i = 0; i < N_OPTS; i++)
        if (g_opts[i].type == OPT_STRING) free(*(char **)((char *)cfg + g_opts[i].offset));
}

int pgcld_config_parse(pgcld_config *cfg, int argc, char **argv, char *err, int cap) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            pgcl_errorf(err, cap, "unexpected argument '%s'", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *o = NULL;
        for (int j = 0; j < N_OPTS && !o; j++)
            if (strlen(g_opts[j].name) == len && strncmp(g_opts[j].name, name, len) == 0) o = &g_opts[j];
        if (!o) {
            pgcl_errorf(err, cap, "unknown option '%.*s' (see pgcld --help)", (int)len + 2, arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) {
            pgcl_errorf(err, cap, "--%s needs a value", o->name);
            return -1;
        }
        if (set_opt(cfg, o, value, err, cap) != 0) return -1;
    }
    const char *colon = strrchr(cfg->listen, ':');
    char *port_end = NULL;
    long port = colon ? strtol(colon + 1, &port_end, 10) : -1;
    if (!colon || colon == cfg->listen || colon[1] == 0 || *port_end || port < 0 || port > 65535) {
        pgcl_errorf(err, cap, "--listen: '%s' must be HOST:PORT with a port from 0 to 65535", cfg->listen);
        return -1;
    }
    if (strcmp(cfg->synchronous, "FULL") && strcmp(cfg->synchronous, "NORMAL")) {
        pgcl_errorf(err, cap, "--synchronous: '%s' must be FULL or NORMAL", cfg->synchronous);
        return -1;
    }
    pgcl_log_level level;
    if (pgcl_log_parse_level(cfg->log_level, &level) != 0) {
        pgcl_errorf(err, cap, "--log-level: '%s' must be debug, info, warn or error", cfg->log_level);
        return -1;
    }
    pgcl_log_set_level(level);
    return 0;
}

void pgcld_config_print_help(FILE *out) {
    fprintf(out,
            "pgcld: serves PGCL checkpoints over HTTP and logs every decision to SQLite.\n\n"
            "Usage:\n"
            "  pgcld serve [OPTIONS]    start the daemon\n"
            "  pgcld check-model DIR... validate checkpoints as serve would (goldens included); JSON per line\n"
            "  pgcld --help             this text\n"
            "  pgcld --version          print the version\n\n"
            "Options of serve (--name VALUE or --name=VALUE):\n");
    for (int i = 0; i < N_OPTS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s %s", g_opts[i].name, g_opts[i].type == OPT_LONG ? "N" : "VALUE");
        fprintf(out, "  %-28s %s (default: %s)\n", flag, g_opts[i].help, *g_opts[i].def ? g_opts[i].def : "none");
    }
    fprintf(out, "\nSignals: SIGTERM or SIGINT stop accepting, let running requests finish (up to\n"
                 "--shutdown-grace seconds), flush the audit log and exit 0; a second signal exits at once.\n"
                 "Environment: OPENBLAS_CORETYPE overrides the OpenBLAS kernel pgcld would pick.\n");
}

void pgcld_config_log(const pgcld_config *cfg) {
    char line[2048];
    int off = 0;
    for (int i = 0; i < N_OPTS && off < (int)sizeof line; i++) {
        const void *field = (const char *)cfg + g_opts[i].offset;
        if (g_opts[i].type == OPT_STRING)
            off += snprintf(line + off, sizeof line - (size_t)off, " %s=%s", g_opts[i].name, *(char *const *)field);
        else
            off += snprintf(line + off, sizeof line - (size_t)off, " %s=%ld", g_opts[i].name, *(const long *)field);
    }
    pgcl_log_info("config:%s", line);
}
