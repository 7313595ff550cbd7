/* The daemon's configuration: one table row per option (name, type, bounds, default, help, target
 * field) drives command-line parsing, validation, --help and the dump of the effective
 * configuration at start. */
#ifndef PGCLD_CONFIG_H
#define PGCLD_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

typedef struct pgcld_config {
    char *listen;         /* HOST:PORT */
    char *models_dir;
    char *db_path;
    char *default_model;
    char *port_file;      /* written with the bound port once listening; "" = none */
    char *synchronous;    /* FULL or NORMAL */
    char *log_level;
    long max_body_bytes;
    long max_batch;
    long max_connections;
    long connection_timeout_s;
    long compute_workers; /* concurrent forward passes; 0 = number of CPUs */
    long blas_threads;    /* OpenBLAS threads inside one forward pass */
    long chunk_rows;      /* rows per GEMM call; also scratch size */
    long max_pending_rows;
    long shutdown_grace_s;
} pgcld_config;

/* Fills cfg with the defaults. */
void pgcld_config_defaults(pgcld_config *cfg);

/* Parses "--name value" / "--name=value" arguments. Returns 0, or -1 with a message in err. */
int pgcld_config_parse(pgcld_config *cfg, int argc, char **argv, char *err, int cap);

void pgcld_config_print_help(FILE *out);

/* Logs every option with its effective value, one line. */
void pgcld_config_log(const pgcld_config *cfg);

void pgcld_config_free(pgcld_config *cfg);

#endif
