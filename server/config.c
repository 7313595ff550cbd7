/* The option table and the three sources of values; see config.h for the contract.
 *
 * Reading top to bottom: the table (one row per option), validation of one value, the sources
 * (config file, environment, flags) in the order they are applied, parse and reload, then the
 * outputs (--print-config, --help, the start-up log line).
 *
 * Config file format: one "name = value" per line, names exactly the long option names; blank
 * lines and lines starting with '#' are ignored; an unquoted value ends at a '#' that starts it or
 * follows a space or tab (an inline comment) and has its surrounding blanks trimmed; a value in
 * double quotes is taken as is, with \" and \\ as the only escapes, and may be followed by a
 * comment. Unknown names, repeated names and malformed lines are errors naming FILE:LINE. */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cli_options.h"
#include "log.h"
#include "note.h"
#include "status.h"
#include "store_registry.h"
#include "witness.h"

typedef enum { OPT_STRING, OPT_LONG } opt_type;

/* Extra validation of a string value: 0, or -1 with the reason (without the source) in why. */
typedef int (*opt_check_fn)(const char *value, char *why, int cap);

typedef struct opt_def {
    const char *name; /* long option name; also the file name and, upper-cased, the env name */
    opt_type type;
    size_t offset;       /* of the target field in pgcld_config: char * or _Atomic long */
    const char *def;     /* default, as text; validated like any other value */
    long min, max;       /* OPT_LONG: inclusive bounds */
    const char *choices; /* OPT_STRING: allowed values "A|B|C", or NULL for any text */
    opt_check_fn check;  /* OPT_STRING: further validation, or NULL */
    const char *meta;    /* placeholder for the value in --help */
    bool reload;         /* pgcld_config_reload() may change it while the server runs */
    bool repeat;         /* OPT_STRING: may be given more than once within one source (flags, lines of the
                          * file); the values are kept in order, separated by one space; a later source
                          * replaces the whole list */
    const char *help;
} opt_def;

static int check_listen(const char *value, char *why, int cap);
static int check_device(const char *value, char *why, int cap);
static int check_retention_days(const char *value, char *why, int cap);
static int check_log_origin(const char *value, char *why, int cap);
static int check_witnesses(const char *value, char *why, int cap);

#define S(field, placeholder) .type = OPT_STRING, .offset = offsetof(pgcld_config, field), .meta = placeholder
#define L(field, lo, hi) .type = OPT_LONG, .offset = offsetof(pgcld_config, field), .min = lo, .max = hi, .meta = "N"

/* Reloadable rows are those whose readers look the value up on every use (request limits, the log
 * level, queue bounds); the others size or open something once at start. One option per row reads
 * better than one field per line, hence no clang-format here. */
// clang-format off
static const opt_def g_opts[] = {
    {.name = "config", S(config_path, "FILE"), .def = "",
     .help = "read options from this config file, which must exist"},
    {.name = "listen", S(listen, "HOST:PORT"), .def = "127.0.0.1:8080", .check = check_listen,
     .help = "HOST:PORT to listen on (port 0 picks a free port)"},
    {.name = "models", S(models_dir, "DIR"), .def = "models",
     .help = "model repository: DIR/<model>/<version>/{config.json,model.safetensors}"},
    {.name = "db", S(db_path, "FILE|URI"), .def = "pgcld-audit.db",
     .help = "audit store: a SQLite file (created if missing) or a PostgreSQL URI postgresql://... shared by a fleet"},
    {.name = "writer-id", S(writer_id, "NAME"), .def = "",
     .help = "PostgreSQL store: this process's chain and log (default: the host name), unique in the fleet; "
             "SQLite store: the log's writer, fixed when the database is created"},
    {.name = "default-model", S(default_model, "NAME"), .def = "toxicity",
     .help = "model used when a request names none"},
    {.name = "port-file", S(port_file, "FILE"), .def = "",
     .help = "write the bound port to this file once listening"},
    {.name = "synchronous", S(synchronous, "MODE"), .def = "FULL", .choices = "FULL|NORMAL",
     .help = "audit durability: FULL (fsync per commit) or NORMAL"},
    {.name = "chain-encoding", S(chain_encoding, "VERSION"), .def = "2", .choices = "1|2",
     .help = "audit chain encoding: 1 (an entry per event) or 2 (an entry per commit, a Merkle tree)"},
    {.name = "log-level", S(log_level, "LEVEL"), .def = "info", .choices = "debug|info|warn|error", .reload = true,
     .help = "least severe messages logged: debug, info, warn or error"},
    {.name = "log-format", S(log_format, "FORMAT"), .def = "text", .choices = "text|json", .reload = true,
     .help = "log lines as text (TIME LEVEL message key=value ...) or json (one JSON object a line, for jq)"},
    {.name = "access-log", S(access_log, "on|off"), .def = "on", .choices = "on|off", .reload = true,
     .help = "one info line per request: request id, route, status, latency, key id, items, model"},
    {.name = "auth", S(auth, "MODE"), .def = "required", .choices = "required|off",
     .help = "required: every API call needs a valid API key; off: keys are not checked"},
    {.name = "metrics", S(metrics, "on|off"), .def = "on", .choices = "on|off",
     .help = "serve GET /metrics"},
    {.name = "max-body-bytes", L(max_body_bytes, 1024, 1l << 31), .def = "67108864", .reload = true,
     .help = "largest request body accepted (413 beyond)"},
    {.name = "max-body-memory", L(max_body_memory, 0, 1l << 40), .def = "33554432", .reload = true,
     .help = "bytes of scoring request bodies and their arrays held at once; more wait, unread (0: no limit)"},
    {.name = "max-batch", L(max_batch, 1, 1 << 20), .def = "1024", .reload = true,
     .help = "most items in one request (413 beyond)"},
    {.name = "max-upload-bytes", L(max_upload_bytes, 1024, 1l << 40), .def = "268435456",
     .help = "largest model upload accepted"},
    {.name = "max-connections", L(max_connections, 1, 65536), .def = "512",
     .help = "simultaneous client connections"},
    {.name = "http-threads", L(http_threads, 0, 256), .def = "0",
     .help = "threads serving every connection (event-driven; 0 = number of CPUs, at most 8)"},
    {.name = "connection-timeout", L(connection_timeout_s, 1, 3600), .def = "30",
     .help = "seconds an idle connection is kept"},
    {.name = "max-connections-per-ip", L(max_connections_per_ip, 0, 65536), .def = "0",
     .help = "simultaneous connections from one client address, refused beyond (0: no limit)"},
    {.name = "request-timeout", L(request_timeout_s, 0, 3600), .def = "60", .reload = true,
     .help = "seconds a connection has to send a whole request, headers and body (0: no limit)"},
    {.name = "max-score-in-flight", L(max_score_in_flight, 0, 65536), .def = "128", .reload = true,
     .help = "scoring requests handled at once; 503 overloaded beyond (0: no limit)"},
    {.name = "rate-limit-rps", L(rate_limit_rps, 0, 1000000), .def = "0", .reload = true,
     .help = "scoring requests a second per API key (per client address with --auth off); 429 beyond (0: off)"},
    {.name = "rate-limit-burst", L(rate_limit_burst, 0, 1000000), .def = "0", .reload = true,
     .help = "scoring requests one key may make at once above its rate (0: the same as rate-limit-rps)"},
    {.name = "compute-workers", L(compute_workers, 0, 1024), .def = "0",
     .help = "concurrent forward passes (0 = number of CPUs)"},
    {.name = "blas-threads", L(blas_threads, 1, 256), .def = "1",
     .help = "no effect since the CPU forward pass has its own kernel (kept so that existing configs parse)"},
    {.name = "chunk-rows", L(chunk_rows, 1, 65536), .def = "256",
     .help = "rows per GEMM call (sizes each worker's scratch)"},
    {.name = "device", S(device, "DEVICE"), .def = "auto", .check = check_device,
     .help = "where forward passes run: auto (CUDA device 0 if present, else the CPU), cpu or cuda:N"},
    {.name = "device-precision", S(cuda_precision, "PRECISION"), .def = "fp32", .choices = "fp32|tf32|bf16",
     .help = "CUDA GEMM precision: fp32, tf32 (tensor cores) or bf16 (weights and inputs in BF16)"},
    {.name = "max-pending-rows", L(max_pending_rows, 1, 1 << 24), .def = "65536", .reload = true,
     .help = "audit rows waiting to be written before 503"},
    {.name = "shadow-queue", L(shadow_queue, 1, 1 << 20), .def = "4096", .reload = true,
     .help = "shadow jobs waiting before further ones are dropped"},
    {.name = "shutdown-grace", L(shutdown_grace_s, 0, 3600), .def = "10",
     .help = "seconds to let requests finish on SIGTERM"},
    {.name = "batch-max-rows", L(batch_max_rows, 1, 65536), .def = "256",
     .help = "most rows one forward pass gathers from concurrent requests"},
    {.name = "batch-max-wait-us", L(batch_max_wait_us, 0, 1000000), .def = "0",
     .help = "microseconds a batch waits for more rows (0: batch only what is already queued)"},
    {.name = "store-inputs", S(store_inputs, "none|float16|float32"), .def = "float16",
     .choices = "none|float16|float32",
     .help = "keep each decision's input embedding for re-scoring (float16: 2 bytes per dimension)"},
    {.name = "contest-window-days", L(contest_window_days, 1, 36500), .def = "180",
     .help = "days after a decision during which it may be contested"},
    {.name = "input-retention-days", S(input_retention_days, "DAYS"), .def = "", .check = check_retention_days,
     .help = "days each decision's stored input is kept (decimals allowed: kept to the microsecond), then "
             "dropped; the record, its proof and the chain stay (empty: --contest-window-days)"},
    {.name = "idempotency-ttl", L(idempotency_ttl_s, 1, 86400 * 30), .def = "86400", .reload = true,
     .help = "seconds an Idempotency-Key of POST /v1/score answers retries with the original answer"},
    {.name = "signing-key", S(signing_key, "FILE"), .def = "",
     .help = "Ed25519 secret key file for signed audit checkpoints (pgcld audit keygen)"},
    {.name = "checkpoint-dir", S(checkpoint_dir, "DIR"), .def = "",
     .help = "where signed audit checkpoints are written (default: beside the audit database)"},
    {.name = "checkpoint-interval", L(checkpoint_interval_s, 0, 86400 * 30), .def = "0",
     .help = "seconds between automatic signed checkpoints (0: only on demand); needs --signing-key"},
    {.name = "log-checkpoint-interval", L(log_checkpoint_interval_s, 0, 86400), .def = "5",
     .help = "at most this many seconds between signed-note checkpoints of the transparency log, one "
             "whenever it grew (0: only on demand, POST /log/checkpoint); needs --signing-key"},
    {.name = "log-access", S(log_access, "public|reviewer"), .def = "reviewer", .choices = "public|reviewer",
     .help = "who may read the transparency log's checkpoints and hash tiles under /log/ (entry bundles, "
             "which hold the records, always need a reviewer key)"},
    {.name = "log-origin", S(log_origin, "PREFIX"), .def = "pgcld", .check = check_log_origin,
     .help = "the prefix of each log's checkpoint origin and note key name: PREFIX/WRITER_ID"},
    {.name = "witness", S(witness, "NAME=URL,KEY"), .def = "", .check = check_witnesses, .repeat = true,
     .help = "a witness that cosigns the log's checkpoints (C2SP tlog-witness): its label, its submission URL "
             "and its cosignature/v1 verifier key; repeatable (several in one file line or env value: separated "
             "by spaces); never blocks scoring"},
    {.name = "tls-cert", S(tls_cert, "FILE"), .def = "",
     .help = "PEM certificate (chain, server first) to serve HTTPS; needs --tls-key (both empty: plain HTTP)"},
    {.name = "tls-key", S(tls_key, "FILE"), .def = "",
     .help = "PEM private key of --tls-cert, unencrypted; readable by pgcld's user only"},
    {.name = "tls-min-version", S(tls_min_version, "VERSION"), .def = "1.2", .choices = "1.2|1.3",
     .help = "oldest TLS version accepted with --tls-cert: 1.2 or 1.3"},
};
// clang-format on
#define N_OPTS ((int)(sizeof g_opts / sizeof g_opts[0]))
_Static_assert(sizeof g_opts / sizeof g_opts[0] <= PGCLD_CONFIG_MAX_OPTIONS, "raise PGCLD_CONFIG_MAX_OPTIONS");

#define CONFIG_ROW 0 /* g_opts[0] is "config": the file cannot set it, print comments it out */

/* ------------------------------------------------------------------------------------------------
 * Table access and validation of one value */

static const char *str_field(const pgcld_config *cfg, const opt_def *o) {
    return *(char *const *)((const char *)cfg + o->offset);
}

static long long_field(const pgcld_config *cfg, const opt_def *o) {
    return atomic_load_explicit((const _Atomic long *)((const char *)cfg + o->offset), memory_order_relaxed);
}

static int find_opt(const char *name, size_t len) {
    for (int i = 0; i < N_OPTS; i++)
        if (strlen(g_opts[i].name) == len && strncmp(g_opts[i].name, name, len) == 0) return i;
    return -1;
}

/* "PGCLD_" + the name upper-cased with '-' as '_'. */
static void env_name(const opt_def *o, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "PGCLD_%s", o->name);
    for (int i = 6; i < n && (size_t)i < cap; i++)
        buf[i] = buf[i] == '-' ? '_' : (buf[i] >= 'a' && buf[i] <= 'z') ? (char)(buf[i] - 'a' + 'A') : buf[i];
}

/* "A|B|C" as "A, B or C". */
static void choices_text(const char *choices, char *buf, size_t cap) {
    const char *last = strrchr(choices, '|');
    size_t off = 0;
    buf[0] = 0;
    for (const char *p = choices; *p && off + 5 < cap; p++) {
        if (*p != '|') {
            buf[off++] = *p;
        } else {
            const char *sep = p == last ? " or " : ", ";
            size_t n = strlen(sep);
            memcpy(buf + off, sep, n);
            off += n;
        }
    }
    buf[off] = 0;
}

static bool is_choice(const char *choices, const char *value) {
    size_t len = strlen(value);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, value, n) == 0) return true;
        p += n + (bar ? 1 : 0);
    }
    return false;
}

static int check_listen(const char *value, char *why, int cap) {
    const char *colon = strrchr(value, ':');
    char *port_end = NULL;
    errno = 0;
    long port = colon && colon[1] ? strtol(colon + 1, &port_end, 10) : -1;
    if (!colon || colon == value || !colon[1] || errno || *port_end || colon[1] == '-' || colon[1] == '+' ||
        colon[1] == ' ' || port < 0 || port > 65535) {
        pgcl_errorf(why, cap, "'%s' must be HOST:PORT with a port from 0 to 65535", value);
        return -1;
    }
    return 0;
}

/* auto, cpu or cuda:N (N a decimal device index below 1024); whether the device exists is checked
 * at start, when the backend is created. */
static int check_device(const char *value, char *why, int cap) {
    if (strcmp(value, "auto") == 0 || strcmp(value, "cpu") == 0) return 0;
    const char *n = strncmp(value, "cuda:", 5) == 0 ? value + 5 : NULL;
    size_t digits = n ? strspn(n, "0123456789") : 0;
    if (!n || digits == 0 || digits > 4 || n[digits] || atoi(n) > 1023) {
        pgcl_errorf(why, cap, "'%s' must be auto, cpu or cuda:N (N a device index)", value);
        return -1;
    }
    return 0;
}

bool pgcld_config_parse_days(const char *text, double *days) {
    size_t digits = strspn(text, "0123456789");
    size_t point = text[digits] == '.' ? 1 : 0;
    size_t fraction = strspn(text + digits + point, "0123456789");
    if (digits + fraction == 0 || text[digits + point + fraction] != 0) return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || !(v >= 0 && v <= PGCLD_MAX_DAYS)) return false;
    *days = v;
    return true;
}

/* Empty (the contest window) or a decimal number of days from 0 to 36500; parsed by
 * pgcld_config_input_retention_days(). */
static int check_retention_days(const char *value, char *why, int cap) {
    double days;
    if (!*value || pgcld_config_parse_days(value, &days)) return 0;
    pgcl_errorf(why, cap, "'%s' must be a number of days from 0 to %d (decimals allowed), or empty", value,
                PGCLD_MAX_DAYS);
    return -1;
}

/* A log origin prefix: a valid note key name (no white space, '+' or control characters) of at
 * most 126 bytes, so that "<prefix>/<writer id>" fits an origin line (checkpointer.h). */
static int check_log_origin(const char *value, char *why, int cap) {
    size_t n = strlen(value);
    if (n > 0 && n <= 126 && pgcl_note_name_valid(value, n)) return 0;
    pgcl_errorf(why, cap, "'%s' must be 1 to 126 bytes of UTF-8 without white space, '+' or control characters",
                value);
    return -1;
}

/* One or more --witness specs separated by spaces, each as pgcl_witness_parse reads it (repeats
 * among them are refused at start, by pgcl_witness_parse_all over the whole list). */
static int check_witnesses(const char *value, char *why, int cap) {
    for (const char *p = value + strspn(value, " "); *p; p += strspn(p, " ")) {
        size_t len = strcspn(p, " ");
        char spec[PGCL_WITNESS_NAME_MAX + PGCL_WITNESS_URL_MAX + PGCL_NOTE_VKEY_MAX + 8], reason[512];
        pgcl_witness w;
        if (len >= sizeof spec) {
            pgcl_errorf(why, cap, "witness '%.40s...' is too long for NAME=URL,KEY", p);
            return -1;
        }
        memcpy(spec, p, len);
        spec[len] = 0;
        if (pgcl_witness_parse(spec, &w, reason, sizeof reason) != PGCL_OK) {
            pgcl_errorf(why, cap, "witness '%.200s': %s", spec, reason);
            return -1;
        }
        p += len;
    }
    return 0;
}

/* Validates value for row o; an integer is returned in *out. 0, or -1 with the reason in why. */
static int check_value(const opt_def *o, const char *value, long *out, char *why, int cap) {
    if (o->type == OPT_LONG) {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max) {
            pgcl_errorf(why, cap, "'%s' is not an integer in [%ld, %ld]", value, o->min, o->max);
            return -1;
        }
        *out = v;
        return 0;
    }
    /* No control characters: every value must print back as one line of a config file. */
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            pgcl_errorf(why, cap, "the value contains a control character (0x%02x)", *p);
            return -1;
        }
    }
    if (o->choices && !is_choice(o->choices, value)) {
        char list[128];
        choices_text(o->choices, list, sizeof list);
        pgcl_errorf(why, cap, "'%s' must be %s", value, list);
        return -1;
    }
    return o->check ? o->check(value, why, cap) : 0;
}

/* "a b": a repeatable row's list grown by one value (malloc'd; NULL when out of memory). */
static char *joined(const char *list, const char *value) {
    size_t a = strlen(list), b = strlen(value);
    char *out = malloc(a + b + 2);
    if (!out) return NULL;
    memcpy(out, list, a);
    out[a] = ' ';
    memcpy(out + a + 1, value, b + 1);
    return out;
}

/* Validates and stores one value of row i, recording its source. label names the source in an
 * error ("--max-batch", "PGCLD_MAX_BATCH", "pgcld.conf:12: max-batch"). 0, or -1 with err set. */
static int set_opt(pgcld_config *cfg, int i, const char *value, pgcld_config_source src, int line, const char *label,
                   char *err, int cap) {
    const opt_def *o = &g_opts[i];
    char why[512];
    long v = 0;
    if (check_value(o, value, &v, why, sizeof why) != 0) {
        pgcl_errorf(err, cap, "%s: %s", label, why);
        return -1;
    }
    void *field = (char *)cfg + o->offset;
    if (o->type == OPT_STRING) {
        char *copy = o->repeat && cfg->source[i] == (unsigned char)src && src != PGCLD_SRC_DEFAULT &&
                             **(char **)field
                         ? joined(*(char **)field, value)
                         : strdup(value);
        if (!copy) {
            pgcl_errorf(err, cap, "%s: out of memory", label);
            return -1;
        }
        free(*(char **)field);
        *(char **)field = copy;
    } else {
        atomic_store_explicit((_Atomic long *)field, v, memory_order_relaxed);
    }
    cfg->source[i] = (unsigned char)src;
    cfg->source_line[i] = line;
    return 0;
}

void pgcld_config_defaults(pgcld_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char err[512];
    for (int i = 0; i < N_OPTS; i++) {
        if (set_opt(cfg, i, g_opts[i].def, PGCLD_SRC_DEFAULT, 0, g_opts[i].name, err, sizeof err) != 0) {
            /* A default that fails its own row's validation, or no memory at start: never serve. */
            fprintf(stderr, "pgcld: default of option %s\n", err);
            abort();
        }
    }
}

void pgcld_config_free(pgcld_config *cfg) {
    if (cfg->tls_key_pem) explicit_bzero(cfg->tls_key_pem, strlen(cfg->tls_key_pem));
    free(cfg->tls_key_pem);
    free(cfg->tls_cert_pem);
    cfg->tls_key_pem = cfg->tls_cert_pem = NULL;
    for (int i = 0; i < N_OPTS; i++) {
        if (g_opts[i].type != OPT_STRING) continue;
        char **field = (char **)((char *)cfg + g_opts[i].offset);
        free(*field);
        *field = NULL;
    }
    for (int i = 0; cfg->argv && i < cfg->argc; i++)
        free(cfg->argv[i]);
    free(cfg->argv);
    cfg->argv = NULL;
    cfg->argc = 0;
}

/* ------------------------------------------------------------------------------------------------
 * Source 1: the config file */

/* Splits one line of a config file, in place. Returns 1 with *name and *value set, 0 for a blank or
 * comment line, -1 with the reason in why for a malformed line. */
static int split_line(char *line, char **name, char **value, char *why, int cap) {
    char *s = line;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == 0 || *s == '#') return 0;
    char *eq = strchr(s, '=');
    if (!eq) {
        pgcl_errorf(why, cap, "expected 'name = value'");
        return -1;
    }
    char *e = eq;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (e == s) {
        pgcl_errorf(why, cap, "no option name before '='");
        return -1;
    }
    *e = 0;
    *name = s;

    char *v = eq + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v == '"') {
        char *src = v + 1, *dst = v;
        for (; *src && *src != '"'; src++) {
            if (*src == '\\') {
                if (src[1] != '"' && src[1] != '\\') {
                    pgcl_errorf(why, cap, "unknown escape in a quoted value (only \\\" and \\\\ are escapes)");
                    return -1;
                }
                src++;
            }
            *dst++ = *src;
        }
        if (*src != '"') {
            pgcl_errorf(why, cap, "unterminated quoted value");
            return -1;
        }
        char *rest = src + 1;
        while (*rest == ' ' || *rest == '\t')
            rest++;
        if (*rest && *rest != '#') {
            pgcl_errorf(why, cap, "unexpected text after the closing quote");
            return -1;
        }
        *dst = 0;
    } else {
        char *end = v;
        for (; *end; end++)
            if (*end == '#' && (end == v || end[-1] == ' ' || end[-1] == '\t')) break;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        *end = 0;
    }
    *value = v;
    return 1;
}

/* Applies every "name = value" of the file at path. label names where the path came from
 * ("--config" or "PGCLD_CONFIG") in an error about opening it. 0, or -1 with err set. */
static int read_file(pgcld_config *cfg, const char *path, const char *label, char *err, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        pgcl_errorf(err, cap, "%s: cannot open config file '%s': %s", label, path, strerror(errno));
        return -1;
    }
    int rc = -1, lineno = 0;
    int first_line[N_OPTS];
    memset(first_line, 0, sizeof first_line);
    char *line = NULL, why[512], where[4200];
    size_t line_cap = 0;
    ssize_t n;
    while ((n = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        char *s = line;
        if (lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte order mark */
            s += 3;
            n -= 3;
        }
        if (strlen(s) != (size_t)n) {
            pgcl_errorf(err, cap, "%s:%d: the line contains a NUL byte", path, lineno);
            goto out;
        }
        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
            s[--n] = 0;
        char *name, *value;
        int kind = split_line(s, &name, &value, why, sizeof why);
        if (kind < 0) {
            pgcl_errorf(err, cap, "%s:%d: %s", path, lineno, why);
            goto out;
        }
        if (kind == 0) continue;
        int i = find_opt(name, strlen(name));
        if (i < 0) {
            pgcl_errorf(err, cap, "%s:%d: unknown option '%s' (see pgcld serve --help)", path, lineno, name);
            goto out;
        }
        if (i == CONFIG_ROW) {
            pgcl_errorf(err, cap, "%s:%d: 'config' cannot be set in a config file (use --config or PGCLD_CONFIG)", path,
                        lineno);
            goto out;
        }
        if (first_line[i] && !g_opts[i].repeat) {
            pgcl_errorf(err, cap, "%s:%d: duplicate option '%s' (first set on line %d)", path, lineno, name,
                        first_line[i]);
            goto out;
        }
        if (!first_line[i]) first_line[i] = lineno;
        snprintf(where, sizeof where, "%s:%d: %s", path, lineno, name);
        if (set_opt(cfg, i, value, PGCLD_SRC_FILE, lineno, where, err, cap) != 0) goto out;
    }
    if (ferror(f)) {
        pgcl_errorf(err, cap, "%s: cannot read config file '%s': %s", label, path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Source 2: the environment. Only names derived from the table are looked up, so PGCLD_ variables
 * that are not options (PGCLD_BIN, PGCLD_BLAS_REEXEC, ...) are never even read. */

static int read_env(pgcld_config *cfg, char *err, int cap) {
    for (int i = 0; i < N_OPTS; i++) {
        char name[64];
        env_name(&g_opts[i], name, sizeof name);
        const char *value = getenv(name);
        if (value && set_opt(cfg, i, value, PGCLD_SRC_ENV, 0, name, err, cap) != 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Source 3: the flags. They are checked for syntax before anything is applied, because --config
 * among them decides which file comes first. */

typedef struct flag_value {
    int opt;
    const char *value; /* points into argv */
} flag_value;

/* Checks the syntax of the flags and collects them into out. "--help" or "-h" where an option may
 * stand sets *print_help and ends the scan (what follows is not looked at). 0, or -1 with err set. */
static int scan_flags(int argc, char **argv, flag_value *out, int *n_out, bool *print_config, bool *print_help,
                      char *err, int cap) {
    int n = 0;
    *n_out = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *print_help = true;
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (arg[0] == '-' && arg[1])
                pgcl_errorf(err, cap, "unknown option '%s' (see pgcld serve --help)", arg);
            else
                pgcl_errorf(err, cap, "unexpected argument '%s' (see pgcld serve --help)", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == strlen("print-config") && strncmp(name, "print-config", len) == 0) {
            if (eq) {
                pgcl_errorf(err, cap, "--print-config takes no value");
                return -1;
            }
            *print_config = true;
            continue;
        }
        int o = find_opt(name, len);
        if (o < 0) {
            pgcl_errorf(err, cap, "unknown option '%.*s' (see pgcld serve --help)", (int)len + 2, arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) {
            pgcl_errorf(err, cap, "--%s needs a value", g_opts[o].name);
            return -1;
        }
        out[n++] = (flag_value){o, value};
    }
    *n_out = n;
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Parse and reload */

/* File, environment, flags over what cfg holds. No side effect outside cfg. */
static int read_sources(pgcld_config *cfg, int argc, char **argv, char *err, int cap) {
    int rc = -1, n_flags = 0;
    flag_value *flags = calloc(argc > 0 ? (size_t)argc : 1, sizeof *flags);
    if (!flags) {
        pgcl_errorf(err, cap, "out of memory");
        return -1;
    }
    if (scan_flags(argc, argv, flags, &n_flags, &cfg->print_config, &cfg->print_help, err, cap) != 0) goto out;
    if (cfg->print_help) { /* the help needs no valid configuration */
        rc = 0;
        goto out;
    }

    /* The file is named by the last --config, else PGCLD_CONFIG, else whatever cfg holds. */
    const char *path = str_field(cfg, &g_opts[CONFIG_ROW]), *path_label = "config";
    const char *env_path = getenv("PGCLD_CONFIG");
    if (env_path) path = env_path, path_label = "PGCLD_CONFIG";
    for (int k = 0; k < n_flags; k++)
        if (flags[k].opt == CONFIG_ROW) path = flags[k].value, path_label = "--config";
    if (*path && read_file(cfg, path, path_label, err, cap) != 0) goto out;

    if (read_env(cfg, err, cap) != 0) goto out;

    for (int k = 0; k < n_flags; k++) {
        char label[80];
        snprintf(label, sizeof label, "--%s", g_opts[flags[k].opt].name);
        if (set_opt(cfg, flags[k].opt, flags[k].value, PGCLD_SRC_FLAG, 0, label, err, cap) != 0) goto out;
    }
    if (!*cfg->tls_cert != !*cfg->tls_key) {
        pgcl_errorf(err, cap, "tls-cert and tls-key go together: %s is set but %s is empty (give both for HTTPS, "
                              "or neither for plain HTTP)",
                    *cfg->tls_cert ? "tls-cert" : "tls-key", *cfg->tls_cert ? "tls-key" : "tls-cert");
        goto out;
    }
    rc = 0;
out:
    free(flags);
    return rc;
}

/* Hands the logging options to the logger (level, format) and to the request threads (access-log,
 * through cfg->access_log_on: they never read the string, which a reload swaps). */
static void apply_logging(pgcld_config *cfg) {
    pgcl_log_level level;
    if (pgcl_log_parse_level(cfg->log_level, &level) == 0) pgcl_log_set_level(level);
    pgcl_log_format format;
    if (pgcl_log_parse_format(cfg->log_format, &format) == 0) pgcl_log_set_format(format);
    atomic_store(&cfg->access_log_on, strcmp(cfg->access_log, "on") == 0);
}

int pgcld_config_parse(pgcld_config *cfg, int argc, char **argv, char *err, int cap) {
    if (read_sources(cfg, argc, argv, err, cap) != 0) return -1;
    for (int i = 0; cfg->argv && i < cfg->argc; i++)
        free(cfg->argv[i]);
    free(cfg->argv);
    cfg->argc = 0;
    cfg->argv = calloc((size_t)argc + 1, sizeof *cfg->argv);
    if (!cfg->argv) goto oom;
    for (; cfg->argc < argc; cfg->argc++)
        if (!(cfg->argv[cfg->argc] = strdup(argv[cfg->argc]))) goto oom;
    apply_logging(cfg);
    return 0;
oom:
    pgcl_errorf(err, cap, "out of memory");
    return -1;
}

/* The value of row i as text: the string itself, or the integer formatted into buf. */
static const char *value_text(const pgcld_config *cfg, int i, char *buf, size_t cap) {
    if (g_opts[i].type == OPT_STRING) return str_field(cfg, &g_opts[i]);
    snprintf(buf, cap, "%ld", long_field(cfg, &g_opts[i]));
    return buf;
}

/* Where row i's value came from: "default", "file PATH:LINE", "env PGCLD_X" or "flag --x". */
static const char *source_text(const pgcld_config *cfg, int i, char *buf, size_t cap) {
    switch ((pgcld_config_source)cfg->source[i]) {
    case PGCLD_SRC_FILE:
        snprintf(buf, cap, "file %s:%d", cfg->config_path, cfg->source_line[i]);
        break;
    case PGCLD_SRC_ENV: {
        char name[64];
        env_name(&g_opts[i], name, sizeof name);
        snprintf(buf, cap, "env %s", name);
        break;
    }
    case PGCLD_SRC_FLAG:
        snprintf(buf, cap, "flag --%s", g_opts[i].name);
        break;
    default:
        snprintf(buf, cap, "default");
    }
    return buf;
}

/* value_text for a log line: a PostgreSQL URI's password (--db) shows as "***". */
static const char *shown_text(const pgcld_config *cfg, int i, char *buf, int cap) {
    char small[32];
    const char *v = value_text(cfg, i, small, sizeof small);
    pgcl_store_redact(v, buf, cap);
    return buf;
}

int pgcld_config_reload(pgcld_config *cfg, char *err, int cap) {
    pgcld_config fresh;
    pgcld_config_defaults(&fresh);
    if (read_sources(&fresh, cfg->argc, cfg->argv, err, cap) != 0) {
        pgcld_config_free(&fresh);
        return -1;
    }
    /* From here nothing can fail: strings are swapped, integers stored. */
    int changed = 0;
    for (int i = 0; i < N_OPTS; i++) {
        const opt_def *o = &g_opts[i];
        char old_buf[1024], new_buf[1024], src[4200];
        const char *old_text = shown_text(cfg, i, old_buf, sizeof old_buf);
        const char *new_text = shown_text(&fresh, i, new_buf, sizeof new_buf);
        bool same = strcmp(old_text, new_text) == 0;
        if (!same && !o->reload) {
            pgcl_log_warn("config: reload: %s changed to '%s' (%s) but takes effect only after a restart; "
                          "keeping '%s'",
                          o->name, new_text, source_text(&fresh, i, src, sizeof src), old_text);
            continue;
        }
        if (!same) {
            pgcl_log_info("config: reload: %s = %s (was %s; %s)", o->name, new_text, old_text,
                          source_text(&fresh, i, src, sizeof src));
            changed++;
            if (o->type == OPT_STRING) {
                char **a = (char **)((char *)cfg + o->offset), **b = (char **)((char *)&fresh + o->offset);
                char *t = *a;
                *a = *b;
                *b = t;
            } else {
                atomic_store_explicit((_Atomic long *)((char *)cfg + o->offset), long_field(&fresh, o),
                                      memory_order_relaxed);
            }
        }
        cfg->source[i] = fresh.source[i];
        cfg->source_line[i] = fresh.source_line[i];
    }
    pgcl_log_info("config: reloaded (config file: %s); %d option%s changed",
                  *cfg->config_path ? cfg->config_path : "none", changed, changed == 1 ? "" : "s");
    apply_logging(cfg);
    pgcld_config_free(&fresh);
    return 0;
}

double pgcld_config_input_retention_days(const pgcld_config *cfg) {
    if (!cfg->input_retention_days || !*cfg->input_retention_days) return (double)cfg->contest_window_days;
    return strtod(cfg->input_retention_days, NULL); /* validated by check_retention_days */
}

const char *pgcld_config_tls_priorities(const pgcld_config *cfg) {
    /* -VERS-ALL then the versions allowed: a whitelist, so no future or legacy version slips in. */
    if (strcmp(cfg->tls_min_version, "1.3") == 0) return "NORMAL:-VERS-ALL:+VERS-TLS1.3";
    return "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
}

/* ------------------------------------------------------------------------------------------------
 * Outputs */

int pgcld_config_option_count(void) {
    return N_OPTS;
}

void pgcld_config_option_describe(int i, pgcld_config_option_doc *doc) {
    PGCL_ASSERT(i >= 0 && i < N_OPTS); /* a row past the table would document garbage */
    const opt_def *o = &g_opts[i];
    doc->name = o->name;
    doc->meta = o->meta;
    doc->def = o->def;
    doc->help = o->help;
    doc->reload = o->reload;
    env_name(o, doc->env, sizeof doc->env);
    if (o->type == OPT_LONG) {
        snprintf(doc->values, sizeof doc->values, "integer from %ld to %ld", o->min, o->max);
    } else if (o->choices) {
        choices_text(o->choices, doc->values, sizeof doc->values);
    } else {
        snprintf(doc->values, sizeof doc->values, "%s", o->check ? o->meta : "text");
    }
}

static void print_quoted(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

void pgcld_config_print(const pgcld_config *cfg, FILE *out) {
    fprintf(out, "# pgcld configuration, as printed by `pgcld serve --print-config`: every option with its\n"
                 "# effective value; the comment after a value says where it came from (default, file PATH:LINE,\n"
                 "# env NAME or flag --NAME). This is a valid config file: pgcld serve --config FILE.\n"
                 "# Precedence, highest first: flags, environment (PGCLD_<NAME>), this file, defaults.\n"
                 "# Format: name = value; '#' starts a comment; values may be in double quotes (escapes \\\" \\\\).\n");
    for (int i = 0; i < N_OPTS; i++) {
        const opt_def *o = &g_opts[i];
        pgcld_config_option_doc doc;
        char buf[32], src[4200];
        pgcld_config_option_describe(i, &doc);
        fprintf(out, "\n# %s: %s.\n# %s; env %s; %s.\n", o->name, o->help, doc.values, doc.env,
                o->reload ? "SIGHUP reloads it" : "needs a restart to change");
        if (i == CONFIG_ROW)
            fputs("# (a config file cannot name another: set it with --config or PGCLD_CONFIG)\n# ", out);
        fprintf(out, "%s = ", o->name);
        if (o->type == OPT_STRING)
            print_quoted(out, str_field(cfg, o));
        else
            fputs(value_text(cfg, i, buf, sizeof buf), out);
        fprintf(out, "  # %s\n", source_text(cfg, i, src, sizeof src));
    }
}

const char pgcld_config_summary[] =
    "start the daemon: serve the model repository's checkpoints over HTTP(S) and record every decision in the "
    "audit database";

const char pgcld_config_sources_help[] =
    "Where options come from, highest precedence first:\n"
    "  1. the flags above;\n"
    "  2. the environment: PGCLD_ + the option name upper-cased with '-' as '_', e.g.\n"
    "     PGCLD_MAX_BATCH=256, PGCLD_DB=/var/lib/pgcld/audit.db (PGCLD_ variables that name no\n"
    "     option are ignored);\n"
    "  3. the config file named by --config FILE or PGCLD_CONFIG (it must exist): one\n"
    "     'name = value' per line with the option names above (max-batch = 256), '#' comments,\n"
    "     blank lines, optional double quotes around a value; an unknown or repeated name or a\n"
    "     malformed line is an error naming FILE:LINE (deploy/pgcld.conf is a sample);\n"
    "  4. the defaults.\n"
    "Every source is validated alike, and an error names the flag, variable or FILE:LINE.\n"
    "--print-config shows the result; its output is itself a valid config file.\n";

const char pgcld_config_print_config_help[] =
    "print the effective configuration as a config file, with the source of each value, and exit";

void pgcld_config_print_reloadable(FILE *out) {
    const char *sep = "";
    for (int i = 0; i < N_OPTS; i++) {
        if (!g_opts[i].reload) continue;
        fprintf(out, "%s%s", sep, g_opts[i].name);
        sep = ", ";
    }
}

void pgcld_config_print_help(FILE *out) {
    char sentence[sizeof pgcld_config_summary + 1];
    snprintf(sentence, sizeof sentence, "%c%s.", pgcld_config_summary[0] - 'a' + 'A', pgcld_config_summary + 1);
    fputs("usage: pgcld serve [OPTIONS]\n\n", out);
    pgcld_cli_print_filled(out, sentence, 0, 0, 100);
    fputc('\n', out);
    fprintf(out, "Options of serve (--name VALUE or --name=VALUE):\n");
    for (int i = 0; i < N_OPTS; i++) {
        char flag[64], text[1024];
        snprintf(flag, sizeof flag, "--%s %s", g_opts[i].name, g_opts[i].meta);
        snprintf(text, sizeof text, "%s (default: %s)", g_opts[i].help, *g_opts[i].def ? g_opts[i].def : "none");
        int flag_len = (int)strlen(flag);
        fprintf(out, "  %-28s ", flag);
        pgcld_cli_print_filled(out, text, 2 + (flag_len > 28 ? flag_len : 28) + 1, 31, 110);
    }
    fprintf(out, "  %-28s ", "--print-config");
    pgcld_cli_print_filled(out, pgcld_config_print_config_help, 31, 31, 110);
    fprintf(out, "  %-28s %s\n", "--help, -h", "print this help and exit");
    fprintf(out, "\n%s", pgcld_config_sources_help);
    fprintf(out, "\nSignals: SIGHUP re-reads the config file and the environment (flags still win) and applies\n"
                 "the new values of ");
    pgcld_config_print_reloadable(out);
    fprintf(out, ";\nthe other options need a restart. An invalid configuration is refused whole (the running one\n"
                 "stays). SIGTERM or SIGINT stop accepting, let running requests finish (up to --shutdown-grace\n"
                 "seconds), flush the audit log and exit 0; a second signal exits at once.\n"
                 "Environment: OPENBLAS_CORETYPE overrides the OpenBLAS kernel pgcld would pick.\n"
                 "\nExit status: 0 after a drain, 1 a start-up failure (reason in the log), 2 bad usage or a\n"
                 "bad option value (reason on stderr).\n");
}

void pgcld_config_log(const pgcld_config *cfg) {
    char line[4096], buf[1024];
    int off = 0;
    for (int i = 0; i < N_OPTS && off < (int)sizeof line; i++)
        off += snprintf(line + off, sizeof line - (size_t)off, " %s=%s", g_opts[i].name,
                        shown_text(cfg, i, buf, sizeof buf));
    pgcl_log_info("config:%s", line);
}
