/* pgcld entry point: command line, start-up in dependency order (BLAS kernel, audit store, models,
 * HTTP), and graceful shutdown. Signal handlers only set a flag; the main thread does the work. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_audit.h"
#include "cli_help.h"
#include "cli_keys.h"
#include "cli_migrate.h"
#include "clock.h"
#include "config.h"
#include "cuda_module.h"
#include "head_signer.h"
#include "log.h"
#include "model.h"
#include "audit_reads.h"
#include "reader_pool.h"
#include "retention.h"
#include "server.h"
#include "signing.h"
#include "checkpointer.h"
#include "witnesses.h"
#include "store_registry.h"
#include "systemd_notify.h"

#ifndef PGCLD_VERSION
#define PGCLD_VERSION "dev"
#endif

/* The stop signals (SIGTERM, SIGINT, SIGHUP) are blocked in every thread pgcld starts and taken by
 * the main thread with sigwait(). A thread started before main() blocked them (OpenBLAS starts its
 * own in a library constructor) still takes them whenever the main thread is not in sigwait() (a
 * reload in progress, start-up), and their default action would end the process there, without a
 * drain: this handler catches them on such a thread and hands them to the main thread's sigwait().
 * Once the drain has begun it is a second signal: SIGTERM or SIGINT ends the process at once. */
static pthread_t g_main_thread;
static volatile sig_atomic_t g_draining;

static void on_stop_signal(int sig) {
    if (g_draining) {
        if (sig != SIGHUP) _exit(1);
        return;
    }
    pthread_kill(g_main_thread, sig); /* pending on the main thread, which blocks it until sigwait() */
}

static int write_port_file(const char *path, int port) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0) return -1;
    return rename(tmp, path); /* readers never see a half-written file */
}

/* ------------------------------------------------------------------------------------------------
 * HTTPS: the PEM files of --tls-cert and --tls-key, read and checked once at start, before anything
 * else opens, so that a wrong file is reported by name with exit status 2 (as a bad option is). */

#define TLS_PEM_MAX (1 << 20) /* no certificate chain or key comes near 1 MiB */

/* Reads the whole file of option opt into a new NUL-terminated string. Refuses, naming the option
 * and the file, one that cannot be opened or read, is not a regular file, is empty or larger than
 * 1 MiB, or holds a NUL byte. *mode gets its permission bits. NULL with err set on failure. */
static char *read_pem_file(const char *opt, const char *path, mode_t *mode, char *err, int cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s '%s': cannot open: %s", opt, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    size_t size = 0, got = 0;
    if (fstat(fd, &st) != 0) {
        pgcl_errorf(err, cap, "%s '%s': cannot stat: %s", opt, path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        pgcl_errorf(err, cap, "%s '%s': not a regular file", opt, path);
        goto fail;
    }
    if (st.st_size == 0 || st.st_size > TLS_PEM_MAX) {
        pgcl_errorf(err, cap, "%s '%s': %s (%lld bytes): not a PEM file", opt, path,
                    st.st_size == 0 ? "empty" : "larger than 1 MiB", (long long)st.st_size);
        goto fail;
    }
    size = (size_t)st.st_size;
    buf = malloc(size + 1);
    if (!buf) {
        pgcl_errorf(err, cap, "%s '%s': out of memory", opt, path);
        goto fail;
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            pgcl_errorf(err, cap, "%s '%s': cannot read: %s", opt, path, n < 0 ? strerror(errno) : "file shrank");
            goto fail;
        }
        got += (size_t)n;
    }
    buf[size] = 0;
    if (strlen(buf) != size) {
        pgcl_errorf(err, cap, "%s '%s': holds a NUL byte: not a PEM file", opt, path);
        goto fail;
    }
    close(fd);
    *mode = st.st_mode & 07777;
    return buf;
fail:
    if (buf) explicit_bzero(buf, size);
    free(buf);
    close(fd);
    return NULL;
}

/* Walks the PEM blocks of text ("-----BEGIN LABEL-----" ... "-----END LABEL-----"): each must be
 * closed by its END line and hold base64 of DER (an ASN.1 SEQUENCE). For the certificate file
 * (want_key false) *n_found counts CERTIFICATE blocks; for the key file it counts private-key blocks
 * (PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY), and an encrypted key is refused (pgcld takes no
 * passphrase: protect the key by its file permissions). 0, or -1 with err naming opt and path. */
static int check_pem(const char *opt, const char *path, const char *text, bool want_key, int *n_found, char *err,
                     int cap) {
    *n_found = 0;
    int block = 0;
    for (const char *p = strstr(text, "-----BEGIN "); p; p = strstr(p, "-----BEGIN ")) {
        block++;
        const char *label = p + 11, *label_end = strstr(label, "-----");
        if (!label_end || label_end == label || label_end - label > 64 ||
            memchr(label, '\n', (size_t)(label_end - label))) {
            pgcl_errorf(err, cap, "%s '%s': PEM block %d: malformed BEGIN line", opt, path, block);
            return -1;
        }
        char end_line[96];
        snprintf(end_line, sizeof end_line, "-----END %.*s-----", (int)(label_end - label), label);
        const char *body = label_end + 5, *end = strstr(body, end_line);
        if (!end) {
            pgcl_errorf(err, cap, "%s '%s': PEM block %d (%.*s) has no '%s' line", opt, path, block,
                        (int)(label_end - label), label, end_line);
            return -1;
        }
        size_t label_len = (size_t)(label_end - label);
        bool is_cert = label_len == 11 && strncmp(label, "CERTIFICATE", 11) == 0;
        bool is_key = (label_len == 11 && strncmp(label, "PRIVATE KEY", 11) == 0) ||
                      (label_len == 15 && strncmp(label, "RSA PRIVATE KEY", 15) == 0) ||
                      (label_len == 14 && strncmp(label, "EC PRIVATE KEY", 14) == 0);
        bool encrypted = (label_len == 21 && strncmp(label, "ENCRYPTED PRIVATE KEY", 21) == 0) ||
                         (is_key && memmem(body, (size_t)(end - body), "ENCRYPTED", 9));
        if (want_key && encrypted) {
            pgcl_errorf(err, cap, "%s '%s': the private key is encrypted; pgcld needs it unencrypted (decrypt it with "
                                  "`openssl pkey -in KEY -out KEY.plain` and protect the file with chmod 600)",
                        opt, path);
            return -1;
        }
        size_t body_len = (size_t)(end - body), bin_len = 0;
        unsigned char *bin = malloc(body_len + 1);
        if (!bin) {
            pgcl_errorf(err, cap, "%s '%s': out of memory", opt, path);
            return -1;
        }
        int bad = sodium_base642bin(bin, body_len + 1, body, body_len, " \t\r\n", &bin_len, NULL,
                                    sodium_base64_VARIANT_ORIGINAL) != 0 ||
                  bin_len < 2 || bin[0] != 0x30;
        sodium_memzero(bin, body_len + 1);
        free(bin);
        if (bad) {
            pgcl_errorf(err, cap, "%s '%s': PEM block %d (%.*s) is not valid base64 of DER data", opt, path, block,
                        (int)label_len, label);
            return -1;
        }
        if (want_key ? is_key : is_cert) ++*n_found;
        p = end + strlen(end_line);
    }
    if (*n_found == 0) {
        pgcl_errorf(err, cap, "%s '%s': no %s in the file (expected a PEM block '-----BEGIN %s-----')", opt, path,
                    want_key ? "private key" : "certificate", want_key ? "PRIVATE KEY" : "CERTIFICATE");
        return -1;
    }
    return 0;
}

static void tls_trial_log(void *cls, const char *fmt, va_list ap) {
    char *buf = cls, msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == '.')) msg[--n] = 0;
    size_t used = strlen(buf);
    if (n && used + n + 3 < 512) snprintf(buf + used, 512 - used, "%s%s", used ? "; " : "", msg);
}

static enum MHD_Result tls_trial_refuse(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                        const char *version, const char *data, size_t *size, void **con_cls) {
    return MHD_NO;
}

/* With tls-cert and tls-key set: checks that libmicrohttpd has TLS, reads both files into
 * cfg->tls_cert_pem / tls_key_pem, warns when the key is readable by group or others, and has
 * GnuTLS (through libmicrohttpd, with no socket) load the pair with the priorities in force, so a
 * key that does not match its certificate or a file GnuTLS cannot parse is refused now. 0, or -1
 * with err set. */
static int load_tls(pgcld_config *cfg, char *err, int cap) {
    if (!*cfg->tls_cert) return 0;
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        pgcl_errorf(err, cap, "tls-cert and tls-key ask for HTTPS, but this libmicrohttpd was built without TLS "
                              "support (Debian's libmicrohttpd12 has it, through GnuTLS)");
        return -1;
    }
    mode_t cert_mode, key_mode;
    int n_certs, n_keys;
    if (!(cfg->tls_cert_pem = read_pem_file("tls-cert", cfg->tls_cert, &cert_mode, err, cap)) ||
        check_pem("tls-cert", cfg->tls_cert, cfg->tls_cert_pem, false, &n_certs, err, cap) != 0 ||
        !(cfg->tls_key_pem = read_pem_file("tls-key", cfg->tls_key, &key_mode, err, cap)) ||
        check_pem("tls-key", cfg->tls_key, cfg->tls_key_pem, true, &n_keys, err, cap) != 0)
        return -1;
    if (key_mode & (S_IRWXG | S_IRWXO))
        pgcl_log_warn("tls: tls-key '%s' is accessible to its group or to others (mode %04o): whoever reads it can "
                      "impersonate this server; make it readable by pgcld's user only (chmod 600)",
                      cfg->tls_key, (unsigned)key_mode);
    char why[512] = "";
    struct MHD_Daemon *trial = MHD_start_daemon(
        MHD_USE_TLS | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, tls_trial_refuse, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, tls_trial_log, why, MHD_OPTION_HTTPS_MEM_CERT, cfg->tls_cert_pem,
        MHD_OPTION_HTTPS_MEM_KEY, cfg->tls_key_pem, MHD_OPTION_HTTPS_PRIORITIES, pgcld_config_tls_priorities(cfg),
        MHD_OPTION_END);
    if (!trial) {
        pgcl_errorf(err, cap, "GnuTLS refused tls-cert '%s' with tls-key '%s': %s", cfg->tls_cert, cfg->tls_key,
                    *why ? why : "no reason given (a certificate or key it cannot use, or another certificate's key)");
        return -1;
    }
    MHD_stop_daemon(trial);
    pgcl_log_info("tls: HTTPS with tls-cert '%s' (%d certificate%s), tls-key '%s', TLS %s or newer", cfg->tls_cert,
                  n_certs, n_certs == 1 ? "" : "s", cfg->tls_key, cfg->tls_min_version);
    return 0;
}

/* pgcl_audit_read_activations' callback: the last activation of a model wins. */
static void remember_activation(const char *model, const char *version, void *ctx) {
    json_object_set_new(ctx, model, json_string(version));
}

/* The transparency log's names and checkpointer (checkpointer.h): this writer's id must name a log
 * (else the daemon refuses to start: a log it could not serve); with --signing-key the key signs
 * this writer's checkpoints under the origin "<--log-origin>/<writer id>", every
 * --log-checkpoint-interval when the log grew. Without a key no checkpoint is signed (tiles are
 * served all the same; /log/ lists no key). Returns 0, or -1 with err set. */
static int start_log_checkpointer(pgcld_server *srv, char *err, int cap) {
    const char *writer = pgcl_audit_writer_id(srv->audit);
    if (!writer || !*writer) return 0; /* a read-only store: nothing to sign */
    char origin[PGCL_TLOG_ORIGIN_MAX + 1];
    if (pgcl_log_origin(srv->cfg->log_origin, writer, origin, err, cap) != PGCL_OK) return -1;
    if (!*srv->cfg->signing_key) {
        pgcl_log_warn("log: no --signing-key: the log of writer '%s' is served without signed checkpoints", writer);
        return 0;
    }
    pgcl_status st;
    pgcl_note_signer *signer = pgcl_note_signer_from_key_file(srv->cfg->signing_key, origin, &st, err, cap);
    if (!signer) return -1;
    memcpy(srv->log_public_key, pgcl_note_signer_verifier(signer)->public_key, sizeof srv->log_public_key);
    srv->has_log_key = true;
    srv->checkpointer = pgcl_checkpointer_create(srv->audit, signer, srv->cfg->log_checkpoint_interval_s, err, cap);
    if (!srv->checkpointer) return -1;
    char vkey[PGCL_NOTE_VKEY_MAX];
    pgcl_checkpointer_verifier_key(srv->checkpointer, vkey);
    pgcl_log_info("log: checkpoints of %s signed by note key %s, every %ld s when the log grew%s", origin, vkey,
                  srv->cfg->log_checkpoint_interval_s,
                  srv->cfg->log_checkpoint_interval_s ? "" : " (0: only on demand, POST /log/checkpoint)");
    return 0;
}

static int serve(int argc, char **argv, const sigset_t *stop_signals) {
    /* Request bodies and their arrays (1.4 MB for 64 JSON embeddings) are allocated on many
     * threads (server pool, batcher workers): with glibc's adaptive threshold they come from per-thread arenas, which
     * keep the memory after the request (RSS grew with connections x largest body ever seen). A
     * fixed threshold maps every block over 256 KiB and unmaps it on free. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    pgcld_config cfg;
    pgcld_config_defaults(&cfg);
    char err[1024];
    int rc = 1;
    pgcld_server srv = {.cfg = &cfg};
    pgcld_head_signer *head_signer = NULL;
    pgcl_retention *retention = NULL;
    pgcld_notifier *notifier = NULL; /* systemd's sd_notify; NULL outside a Type=notify unit */
    if (pgcld_config_parse(&cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "pgcld: %s\n", err);
        pgcld_config_free(&cfg);
        return 2;
    }
    if (cfg.print_help) {
        pgcld_config_print_help(stdout);
        pgcld_config_free(&cfg);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (cfg.print_config) {
        pgcld_config_print(&cfg, stdout);
        pgcld_config_free(&cfg);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    int64_t t0 = pgcl_monotonic_us();
    pgcl_log_info("pgcld %s starting", PGCLD_VERSION);
    pgcld_config_log(&cfg);
    if (load_tls(&cfg, err, sizeof err) != 0) { /* an operator error, like a bad option: exit 2 */
        pgcl_log_error("tls: %s", err);
        pgcld_config_free(&cfg);
        return 2;
    }
    if (cfg.blas_threads != 1)
        pgcl_log_warn("config: --blas-threads %ld has no effect: the CPU forward pass runs pgcld's own packed-weight "
                      "kernel on its compute worker's thread (--compute-workers sets the parallelism)",
                      (long)cfg.blas_threads);

    int workers = cfg.compute_workers > 0 ? (int)cfg.compute_workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (workers < 1) workers = 1;
    /* The backend from --device: auto falls back to the CPU, an explicit cuda:N must work. */
    pgcl_backend *backend = pgcl_backend_open(cfg.device, cfg.cuda_precision, err, sizeof err);
    if (!backend) {
        pgcl_log_error("device: %s", err);
        goto out;
    }
    pgcl_log_info("compute: %s, %d workers%s%s", pgcl_backend_name(backend), workers, *err ? "; " : "", err);
    srv.compute = pgcl_compute_slots_create(backend, workers, (int)cfg.chunk_rows);
    srv.metrics = pgcld_metrics_create(pgcld_route_names, pgcld_route_count);
    srv.batcher = srv.compute ? pgcl_batcher_create(srv.compute, workers, (int)cfg.batch_max_rows,
                                                     cfg.batch_max_wait_us)
                              : NULL;
    if (!srv.compute || !srv.metrics || !srv.batcher) {
        pgcl_log_error("out of memory");
        goto out;
    }
    pgcl_audit_options aopts = {.path = cfg.db_path,
                                .writer_id = cfg.writer_id,
                                .writer_lock_wait_ms = 10000, /* a restarted replica waits for its old session to end */
                                .synchronous_full = strcmp(cfg.synchronous, "FULL") == 0,
                                .busy_timeout_ms = 5000,
                                .max_pending_rows = (int)cfg.max_pending_rows,
                                .chain_encoding = atoi(cfg.chain_encoding)};
    if (pgcl_audit_open(&aopts, &srv.audit, err, sizeof err) != PGCL_OK) {
        pgcl_log_error("audit: %s", err);
        const char *note = pgcl_store_open_failure_note(cfg.db_path); /* PostgreSQL: "faults", operations.md */
        if (note) pgcl_log_error("%s", note);
        goto out;
    }
    char db_shown[512]; /* a PostgreSQL URI may hold a password */
    char store_shown[1100]; /* "WAL, synchronous=FULL", "PostgreSQL, writer NAME" */
    pgcl_store_redact(cfg.db_path, db_shown, sizeof db_shown);
    pgcl_store_describe(&aopts, store_shown, sizeof store_shown);
    pgcl_log_info("audit: %s open (%s, schema version %d)", db_shown, store_shown,
                  pgcl_audit_schema_version(srv.audit));
    if (*cfg.signing_key) { /* a bad key file is an operator error: say so now, not at the first checkpoint */
        char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1];
        if (pgcl_signing_public_key(cfg.signing_key, public_hex, err, sizeof err) != PGCL_OK) {
            pgcl_log_error("audit: --signing-key: %s", err);
            goto out;
        }
        pgcl_log_info("audit: checkpoints are signed by Ed25519 key %s", public_hex);
    }
    if (start_log_checkpointer(&srv, err, sizeof err) != 0) {
        pgcl_log_error("log: %s", err);
        goto out;
    }
    if (pgcld_witnesses_start(&srv, err, sizeof err) != 0) {
        pgcl_log_error("witness: %s", err);
        goto out;
    }
    if (strcmp(cfg.auth, "required") == 0) {
        if (pgcl_audit_open_keyring(srv.audit, &srv.keyring, err, sizeof err) != PGCL_OK) {
            pgcl_log_error("keys: %s", err);
            goto out;
        }
        int n_keys = pgcl_keyring_count_active(srv.keyring);
        pgcl_log_info("keys: %d active API keys; create one with: pgcld keys create --db %s --role scorer --name NAME",
                      n_keys, db_shown);
    } else {
        pgcl_log_warn("keys: --auth off: every endpoint is open to anyone who can reach %s", cfg.listen);
    }
    double retention_days = pgcld_config_input_retention_days(&cfg);
    if (strcmp(cfg.store_inputs, "none") != 0)
        pgcl_log_info("audit: stored inputs are dropped %g days after their decision (--input-retention-days)",
                      retention_days);
    if (!(retention = pgcl_retention_create(srv.audit, retention_days, pgcld_metrics_inputs_dropped, srv.metrics, err,
                                            sizeof err))) {
        pgcl_log_error("audit: %s", err);
        goto out;
    }
    srv.shadow = pgcl_shadow_create(srv.audit, pgcld_metrics_shadow_observer, srv.metrics, (int)cfg.shadow_queue, (int)cfg.chunk_rows);
    if (!srv.shadow) {
        pgcl_log_error("cannot start the shadow worker");
        goto out;
    }
    if (pgcl_registry_create(cfg.models_dir, &srv.registry, err, sizeof err) != PGCL_OK) {
        pgcl_log_error("models: %s", err);
        goto out;
    }
    /* Before the models load: the watchdog is fed during a long load. */
    notifier = pgcld_notifier_start(&srv);

    if (pgcld_server_start(&srv, err, sizeof err) != 0) {
        pgcl_log_error("http: %s", err);
        goto out;
    }
    pgcl_log_info("http: listening on %s://%s (port %d), %d compute workers; /healthz answers, loading models",
                  *cfg.tls_cert ? "https" : "http", cfg.listen, srv.port, workers);
    /* Models load while /healthz already answers and /readyz says 503. */
    json_t *preferred = json_object();
    if (pgcl_audit_read_activations(srv.audit, remember_activation, preferred, err, sizeof err) != PGCL_OK) {
        pgcl_log_warn("models: cannot read past activations (%s); serving the highest versions", err);
        json_decref(preferred);
        preferred = NULL;
    }
    pgcl_registry_load_initial(srv.registry, preferred);
    json_decref(preferred);
    if (pgcl_registry_ready_count(srv.registry) == 0)
        pgcl_log_warn("models: no model could be loaded from %s; /readyz answers 503", cfg.models_dir);
    pgcl_log_info("ready in %.1f ms", (double)(pgcl_monotonic_us() - t0) / 1000.0);
    head_signer = pgcld_head_signer_start(&srv);
    if (*cfg.port_file && write_port_file(cfg.port_file, srv.port) != 0) {
        pgcl_log_error("cannot write --port-file %s: %s", cfg.port_file, strerror(errno));
        goto out;
    }
    pgcld_notifier_started(notifier); /* READY=1 now, or as soon as /readyz would answer 200 */
    int sig = 0;
    for (;;) {
        sigwait(stop_signals, &sig);
        if (sig != SIGHUP) break;
        /* SIGHUP: re-read the configuration's reloadable options and the API keys. */
        pgcld_notifier_reloading(notifier);
        if (pgcld_config_reload(&cfg, err, sizeof err) != 0) {
            pgcl_log_error("SIGHUP: configuration not reloaded: %s", err);
        } else {
            pgcl_audit_set_max_pending_rows(srv.audit, (int)cfg.max_pending_rows);
            pgcl_shadow_set_capacity(srv.shadow, (int)cfg.shadow_queue);
            pgcld_config_log(&cfg);
        }
        if (srv.keyring && pgcl_keyring_reload(srv.keyring, err, sizeof err) != PGCL_OK)
            pgcl_log_error("SIGHUP: keys not reloaded: %s", err);
        else if (srv.keyring)
            pgcl_log_info("SIGHUP: %d active API keys", pgcl_keyring_count_active(srv.keyring));
        pgcld_notifier_reloaded(notifier);
    }
    g_draining = 1; /* from now on on_stop_signal ends the process at a second SIGTERM or SIGINT */
    sigset_t term_signals = *stop_signals; /* SIGHUP stays blocked in the main thread */
    sigdelset(&term_signals, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &term_signals, NULL);
    /* Logged once the drain has begun: a request read after this line is answered as draining. */
    pgcld_server_begin_drain(&srv);
    pgcld_notifier_stopping(notifier);
    pgcl_log_info("shutdown: %s received; draining (up to %ld s)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                  cfg.shutdown_grace_s);
    rc = 0;
out:
    pgcld_server_stop(&srv, (int)cfg.shutdown_grace_s);
    pgcl_shadow_destroy(srv.shadow);
    pgcld_head_signer_stop(head_signer); /* after the drain: its last checkpoint covers every answered decision */
    pgcld_witnesses_stop(&srv); /* before the checkpointer, whose last checkpoint is not sent */
    pgcl_checkpointer_destroy(srv.checkpointer); /* the same: a last signed-note checkpoint */
    srv.checkpointer = NULL;
    pgcl_queries_shutdown();
    pgcl_retention_destroy(retention);
    pgcld_notifier_stop(notifier); /* after the drain (the watchdog watches the writer through it) */
    pgcl_audit_close(srv.audit);
    pgcl_keyring_close(srv.keyring);
    pgcl_registry_destroy(srv.registry);
    pgcl_batcher_destroy(srv.batcher);
    pgcl_compute_slots_destroy(srv.compute);
    pgcld_metrics_destroy(srv.metrics);
    if (rc == 0) pgcl_log_info("shutdown: complete");
    pgcld_config_free(&cfg);
    return rc;
}

/* pgcld check-model DIR...: loads each checkpoint exactly as serve would (every validation, goldens
 * recomputed) and prints one JSON line per directory. Exit 0 only if all of them load. */
static int check_models(int argc, char **argv) {
    int failed = 0;
    for (int i = 0; i < argc; i++) {
        pgcl_model *m = NULL;
        char err[1024];
        json_t *out;
        if (pgcl_model_load(argv[i], "check", "check", &m, err, sizeof err) == PGCL_OK) {
            out = json_pack("{s:s, s:b, s:s, s:s, s:{s:i, s:i, s:i}, s:i}", "dir", argv[i], "ok", 1, "sha256", m->sha256,
                            "task", pgcl_task_str(m->task), "dims", "D", m->D, "d", m->d, "K", m->K, "golden_verified",
                            m->n_golden);
        } else {
            out = json_pack("{s:s, s:b, s:s}", "dir", argv[i], "ok", 0, "error", err);
            failed++;
        }
        char *text = json_dumps(out, JSON_COMPACT);
        printf("%s\n", text);
        free(text);
        json_decref(out);
        pgcl_model_release(m);
    }
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *command = argc >= 2 ? argv[1] : NULL;
    if (!command) return pgcld_cli_top_usage_error("missing command");
    if (pgcld_cli_is_help(command)) { /* help, --help, -h */
        pgcld_cli_print_top_help(stdout);
        return 0;
    }
    if (strcmp(command, "--version") == 0) {
        printf("pgcld %s\n", PGCLD_VERSION);
        return 0;
    }
    if (strcmp(command, "keys") == 0) return pgcld_cli_keys(argc - 2, argv + 2);
    if (strcmp(command, "audit") == 0) return pgcld_cli_audit(argc - 2, argv + 2);
    if (strcmp(command, "migrate") == 0) return pgcld_cli_migrate(argc - 2, argv + 2);
    if (strcmp(command, "check-model") == 0) {
        int rc = pgcld_cli_check_model_args(argc - 2, argv + 2);
        if (rc != PGCLD_CLI_PROCEED) return rc;
        if (sodium_init() < 0) {
            fprintf(stderr, "pgcld: libsodium failed to initialise\n");
            return 1;
        }
        return check_models(argc - 2, argv + 2);
    }
    if (strcmp(command, "serve") != 0) {
        if (command[0] == '-') return pgcld_cli_top_usage_error("unknown option '%s'", command);
        return pgcld_cli_top_usage_error("unknown command '%s'", command);
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "pgcld: libsodium failed to initialise\n");
        return 1;
    }
    /* Block the stop signals before pgcld starts a thread, so every thread it starts inherits the
     * mask and the main thread alone takes them with sigwait(); on_stop_signal covers the threads
     * started before (see above). */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);
    g_main_thread = pthread_self();
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART, .sa_mask = stop_signals};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    return serve(argc - 2, argv + 2, &stop_signals);
}
