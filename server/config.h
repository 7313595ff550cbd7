/* The daemon's configuration: one table row per option (name, type, bounds or allowed values,
 * default, help, target field, whether SIGHUP may change it) drives every source of values — the
 * config file, the environment and the command line — and validation, --help, --print-config and
 * the dump of the effective configuration at start.
 *
 * Precedence, highest first: command-line flags (--max-batch 256), environment variables
 * (PGCLD_MAX_BATCH=256: "PGCLD_" + the option name upper-cased with '-' as '_'), the config file
 * (--config FILE or PGCLD_CONFIG; lines "max-batch = 256"), the defaults in the table.
 *
 * Threads: parse, reload, print and free run on the main thread only. The integer options are
 * _Atomic so that request threads may read them (a plain read of cfg->max_batch is an atomic load)
 * while pgcld_config_reload() changes them. String options never change after parse, except
 * log_level, log_format and access_log, which only the main thread reads (it hands them to the
 * logger and to access_log_on). */
#ifndef PGCLD_CONFIG_H
#define PGCLD_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

/* Bound on the number of option rows; config.c checks the table against it at compile time. */
#define PGCLD_CONFIG_MAX_OPTIONS 56

/* Where an option's effective value came from. */
typedef enum pgcld_config_source {
    PGCLD_SRC_DEFAULT = 0,
    PGCLD_SRC_FILE,
    PGCLD_SRC_ENV,
    PGCLD_SRC_FLAG,
} pgcld_config_source;

typedef struct pgcld_config {
    char *listen; /* HOST:PORT */
    char *models_dir;
    char *db_path;
    char *writer_id;             /* PostgreSQL store: "" = the host name (core/audit/pg/audit_pg.h) */
    char *default_model;
    char *port_file;             /* written with the bound port once listening; "" = none */
    char *synchronous;           /* FULL or NORMAL */
    char *chain_encoding;        /* "1" or "2" (core/audit/chain.h) */
    char *log_level;             /* debug, info, warn or error; reloadable */
    char *log_format;            /* text or json; reloadable */
    char *access_log;            /* on or off; reloadable (request threads read access_log_on) */
    _Atomic bool access_log_on;  /* access_log is "on"; set at parse and reload */
    char *auth;                  /* "required" (API keys enforced) or "off" */
    char *metrics;               /* "on" (serve GET /metrics) or "off" */
    char *config_path;           /* the config file read; "" = none */
    char *store_inputs;          /* none, float16 or float32 */
    char *input_retention_days;  /* decimal days, or empty: the contest window (pgcld_config_input_retention_days) */
    char *signing_key;           /* Ed25519 secret key file; "" = none */
    char *checkpoint_dir;        /* "" = the audit database's directory */
    char *log_access;            /* who reads /log/ tiles and checkpoints: public or reviewer */
    char *log_origin;            /* the prefix of each log's origin: "<log_origin>/<writer_id>" */
    char *witness;               /* --witness specs (witness.h), separated by one space; "" = none */
    char *device;                /* auto, cpu or cuda:N; needs a restart */
    char *cuda_precision;        /* device-precision: fp32, tf32 or bf16 (CUDA only); needs a restart */
    char *tls_cert;              /* PEM certificate (chain) file for HTTPS; "" = plain HTTP */
    char *tls_key;               /* PEM private key file; set exactly when tls_cert is */
    char *tls_min_version;       /* oldest TLS version accepted: 1.2 or 1.3 */
    _Atomic long max_body_bytes; /* reloadable */
    _Atomic long max_body_memory; /* scoring bodies held at once (bytes); 0 = no bound; reloadable */
    _Atomic long max_batch;      /* reloadable */
    _Atomic long max_connections;
    _Atomic long http_threads;   /* libmicrohttpd's thread pool; 0 = CPUs, at most 8 */
    _Atomic long connection_timeout_s;
    _Atomic long max_connections_per_ip; /* 0 = no limit */
    _Atomic long request_timeout_s;      /* to receive a whole request; 0 = none; reloadable */
    _Atomic long max_score_in_flight;    /* scoring requests handled at once; 0 = no bound; reloadable */
    _Atomic long rate_limit_rps;         /* scoring requests per second per key; 0 = off; reloadable */
    _Atomic long rate_limit_burst;       /* bucket size; 0 = rate_limit_rps; reloadable */
    _Atomic long compute_workers;  /* concurrent forward passes; 0 = number of CPUs */
    _Atomic long blas_threads;     /* OpenBLAS threads inside one forward pass */
    _Atomic long chunk_rows;       /* rows per GEMM call; also scratch size */
    _Atomic long max_pending_rows; /* reloadable */
    _Atomic long shutdown_grace_s;
    _Atomic long max_upload_bytes; /* largest model upload accepted */
    _Atomic long shadow_queue;     /* shadow jobs waiting before they are dropped; reloadable */
    _Atomic long contest_window_days;
    _Atomic long batch_max_rows;
    _Atomic long batch_max_wait_us;
    _Atomic long checkpoint_interval_s; /* 0 = checkpoints only on demand */
    _Atomic long log_checkpoint_interval_s; /* the log's signed-note checkpoints; 0 = only on demand */
    _Atomic long idempotency_ttl_s;     /* reloadable */

    bool print_config; /* --print-config was given: the caller prints the config and exits */
    bool print_help;   /* --help or -h was given: nothing else was read; the caller prints the help and exits */

    /* The contents of tls_cert and tls_key, NUL-terminated, read once at start by main.c (they are
     * data, not options: no source, never printed); NULL without TLS. pgcld_config_free() wipes
     * the key before freeing it. */
    char *tls_cert_pem;
    char *tls_key_pem;

    /* Bookkeeping of config.c; read it through the functions below. */
    unsigned char source[PGCLD_CONFIG_MAX_OPTIONS]; /* pgcld_config_source per table row */
    int source_line[PGCLD_CONFIG_MAX_OPTIONS];      /* line in config_path when source is FILE */
    int argc;                                       /* copy of the serve arguments, for reload */
    char **argv;
} pgcld_config;

/* Fills cfg with the defaults (every source DEFAULT). cfg needs pgcld_config_free() afterwards. */
void pgcld_config_defaults(pgcld_config *cfg);

/* Applies, over what cfg holds (normally the defaults), the config file, then the environment, then
 * the flags in argv (the arguments after "serve": "--name value", "--name=value", "--print-config";
 * "--help" or "-h" where an option may stand sets print_help and returns 0 with nothing else read).
 * The file is the one named by --config, else by PGCLD_CONFIG; when one is named it must exist.
 * Every value is validated as it is read; an error names its source ("--max-batch",
 * "PGCLD_MAX_BATCH" or "pgcld.conf:12"). Environment variables with the PGCLD_ prefix that name no
 * option are ignored. Keeps a copy of argv for pgcld_config_reload() and applies log-level and
 * log-format to the logger (access-log to access_log_on). Returns 0, or -1 with a message in err (cfg must then still be freed). */
int pgcld_config_parse(pgcld_config *cfg, int argc, char **argv, char *err, int cap);

/* For SIGHUP: reads the defaults, the config file and the environment again, and the flags kept
 * by pgcld_config_parse() (so they still win), into a fresh configuration. If that fails, returns
 * -1 with a message in err and changes nothing. Otherwise copies into cfg only the options that
 * are safe to change at run time — log-level, log-format, access-log, max-body-bytes, max-body-memory, max-batch, request-timeout,
 * max-score-in-flight, rate-limit-rps, rate-limit-burst, max-pending-rows, shadow-queue (the rows
 * marked reloadable in config.c; --help lists them) — logs each change,
 * warns about changed options that need a restart (they keep their running value), applies
 * the logging options as pgcld_config_parse does, and returns 0. Main thread only. */
int pgcld_config_reload(pgcld_config *cfg, char *err, int cap);

/* Prints every option as "name = value" with a comment naming its source (default, file PATH:LINE,
 * env NAME, flag --NAME) in the config-file format, so the output is a valid config file. The
 * config row itself is printed commented out, since a file cannot name another. */
void pgcld_config_print(const pgcld_config *cfg, FILE *out);

/* Prints serve's help: its usage line, every option with its default, --print-config, --help,
 * where values come from, the signals and the exit status. */
void pgcld_config_print_help(FILE *out);

/* One row of the option table as documentation, for the man page (server/cli/cli_man.c). */
typedef struct pgcld_config_option_doc {
    const char *name, *meta, *def, *help; /* static; def "" means none */
    char env[64];                         /* PGCLD_MAX_BATCH */
    char values[160];                     /* "integer from 1 to 1048576", "FULL or NORMAL", "text"... */
    bool reload;                          /* SIGHUP applies a new value */
} pgcld_config_option_doc;

/* The number of rows of the option table, and row i (0 <= i < count) described into *doc. */
int pgcld_config_option_count(void);
void pgcld_config_option_describe(int i, pgcld_config_option_doc *doc);

/* The prose of serve's help, shared with the man page: what serve does (one line, lower case, no
 * final period), where values come from (lines ending in '\n'), what --print-config does. */
extern const char pgcld_config_summary[];
extern const char pgcld_config_sources_help[];
extern const char pgcld_config_print_config_help[];

/* The names of the options SIGHUP reloads, separated by ", ". */
void pgcld_config_print_reloadable(FILE *out);

/* Logs every option with its effective value, one line. */
void pgcld_config_log(const pgcld_config *cfg);

/* The GnuTLS priority string for cfg->tls_min_version (libmicrohttpd's MHD_OPTION_HTTPS_PRIORITIES):
 * GnuTLS's NORMAL set of ciphers with every protocol version older than the minimum removed. A
 * static string. */
const char *pgcld_config_tls_priorities(const pgcld_config *cfg);

/* Days a stored input is kept: --input-retention-days, or --contest-window-days when it is empty.
 * Applied to the microsecond (core/audit/retention.c). */
double pgcld_config_input_retention_days(const pgcld_config *cfg);

#define PGCLD_MAX_DAYS 36500

/* A number of days as an option takes it (--input-retention-days; pgcld audit archive
 * --older-than-days): decimal digits with at most one point ("0.5", "3", "2."), from 0 to
 * PGCLD_MAX_DAYS; no sign, exponent or space. *days is set when true. */
bool pgcld_config_parse_days(const char *text, double *days);

/* Frees what cfg owns; safe on a zeroed or partly parsed cfg. */
void pgcld_config_free(pgcld_config *cfg);

#endif
