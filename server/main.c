/* pgcld entry point: command line, start-up in dependency order (BLAS kernel, audit store, models,
 * HTTP), and graceful shutdown. Signal handlers only set a flag; the main thread does the work. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_select.h"
#include "blas.h"
#include "checkpointer.h"
#include "cli_audit.h"
#include "cli_keys.h"
#include "config.h"
#include "ids.h"
#include "log.h"
#include "model.h"
#include "queries.h"
#include "signing.h"
#include "server.h"

#ifndef PGCLD_VERSION
#define PGCLD_VERSION "dev"
#endif

/* During the drain only the main thread has SIGTERM/SIGINT unblocked: a second signal ends the
 * process at once. */
static void on_second_signal(int sig) { _exit(1); }

static int write_port_file(const char *path, int port) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0) return -1;
    return rename(tmp, path); /* readers never see a half-written file */
}

static int serve(int argc, char **argv, const sigset_t *stop_signals) {
    pgcld_config cfg;
    pgcld_config_defaults(&cfg);
    char err[1024];
    int rc = 1;
    pgcld_server srv = {.cfg = &cfg};
    pgcld_checkpointer *checkpointer = NULL;
    if (pgcld_config_parse(&cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "pgcld: %s\n", err);
        pgcld_config_free(&cfg);
        return 2;
    }
    if (cfg.print_config) {
        pgcld_config_print(&cfg, stdout);
        pgcld_config_free(&cfg);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    int64_t t0 = pgcl_monotonic_us();
    pgcl_log_info("pgcld %s starting", PGCLD_VERSION);
    pgcld_config_log(&cfg);
    pgcl_blas_set_threads((int)cfg.blas_threads);

    int workers = cfg.compute_workers > 0 ? (int)cfg.compute_workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (workers < 1) workers = 1;
    /* The backend from --device: auto falls back to the CPU, an explicit cuda:N must work. */
    pgcl_backend *backend = pgcl_backend_open(cfg.device, cfg.cuda_precision, err, sizeof err);
    if (!backend) {
        pgcl_log_error("device: %s", err);
        goto out;
    }
    pgcl_log_info("compute: %s, %d workers%s%s", pgcl_backend_name(backend), workers, *err ? "; " : "", err);
    srv.compute = pgcld_compute_create(backend, workers, (int)cfg.chunk_rows);
    srv.metrics = pgcld_metrics_create(pgcld_route_names, pgcld_route_count);
    srv.batcher = srv.compute ? pgcld_batcher_create(srv.compute, workers, (int)cfg.batch_max_rows,
                                                     cfg.batch_max_wait_us)
                              : NULL;
    if (!srv.compute || !srv.metrics || !srv.batcher) {
        pgcl_log_error("out of memory");
        goto out;
    }
    pgcl_audit_options aopts = {.path = cfg.db_path,
                                .synchronous_full = strcmp(cfg.synchronous, "FULL") == 0,
                                .busy_timeout_ms = 5000,
                                .max_pending_rows = (int)cfg.max_pending_rows};
    if (pgcl_audit_open(&aopts, &srv.audit, err, sizeof err) != PGCL_OK) {
        pgcl_log_error("audit: %s", err);
        goto out;
    }
    pgcl_log_info("audit: %s open (WAL, synchronous=%s, schema version %d)", cfg.db_path, cfg.synchronous,
                  pgcl_audit_schema_version(srv.audit));
    if (*cfg.signing_key) { /* a bad key file is an operator error: say so now, not at the first checkpoint */
        char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1];
        if (pgcl_signing_public_key(cfg.signing_key, public_hex, err, sizeof err) != PGCL_OK) {
            pgcl_log_error("audit: --signing-key: %s", err);
            goto out;
        }
        pgcl_log_info("audit: checkpoints are signed by Ed25519 key %s", public_hex);
    }
    if (strcmp(cfg.auth, "required") == 0) {
        if (pgcl_keyring_open(cfg.db_path, &srv.keyring, err, sizeof err) != PGCL_OK) {
            pgcl_log_error("keys: %s", err);
            goto out;
        }
        int n_keys = pgcl_keyring_count_active(srv.keyring);
        pgcl_log_info("keys: %d active API keys; create one with: pgcld keys create --db %s --role scorer --name NAME",
                      n_keys, cfg.db_path);
    } else {
        pgcl_log_warn("keys: --auth off: every endpoint is open to anyone who can reach %s", cfg.listen);
    }
    srv.shadow = pgcld_shadow_create(srv.audit, srv.metrics, (int)cfg.shadow_queue, (int)cfg.chunk_rows);
    if (!srv.shadow) {
        pgcl_log_error("cannot start the shadow worker");
        goto out;
    }
    if (pgcl_registry_create(cfg.models_dir, &srv.registry, err, sizeof err) != PGCL_OK) {
        pgcl_log_error("models: %s", err);
        goto out;
    }

    if (pgcld_server_start(&srv, err, sizeof err) != 0) {
        pgcl_log_error("http: %s", err);
        goto out;
    }
    pgcl_log_info("http: listening on %s (port %d), %d compute workers; /healthz answers, loading models",
                  cfg.listen, srv.port, workers);
    /* Models load while /healthz already answers and /readyz says 503. */
    json_t *preferred = NULL;
    if (pgcl_audit_read_activations(cfg.db_path, &preferred, err, sizeof err) != PGCL_OK)
        pgcl_log_warn("models: cannot read past activations (%s); serving the highest versions", err);
    pgcl_registry_load_initial(srv.registry, preferred);
    json_decref(preferred);
    if (pgcl_registry_ready_count(srv.registry) == 0)
        pgcl_log_warn("models: no model could be loaded from %s; /readyz answers 503", cfg.models_dir);
    pgcl_log_info("ready in %.1f ms", (double)(pgcl_monotonic_us() - t0) / 1000.0);
    checkpointer = pgcld_checkpointer_start(&srv);
    if (*cfg.port_file && write_port_file(cfg.port_file, srv.port) != 0) {
        pgcl_log_error("cannot write --port-file %s: %s", cfg.port_file, strerror(errno));
        goto out;
    }
    int sig = 0;
    for (;;) {
        sigwait(stop_signals, &sig);
        if (sig != SIGHUP) break;
        /* SIGHUP: re-read the configuration's reloadable options and the API keys. */
        if (pgcld_config_reload(&cfg, err, sizeof err) != 0) {
            pgcl_log_error("SIGHUP: configuration not reloaded: %s", err);
        } else {
            pgcl_audit_set_max_pending_rows(srv.audit, (int)cfg.max_pending_rows);
            pgcld_shadow_set_capacity(srv.shadow, (int)cfg.shadow_queue);
            pgcld_config_log(&cfg);
        }
        if (srv.keyring && pgcl_keyring_reload(srv.keyring, err, sizeof err) != PGCL_OK)
            pgcl_log_error("SIGHUP: keys not reloaded: %s", err);
        else if (srv.keyring)
            pgcl_log_info("SIGHUP: %d active API keys", pgcl_keyring_count_active(srv.keyring));
    }
    struct sigaction sa = {.sa_handler = on_second_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t term_signals = *stop_signals; /* SIGHUP stays blocked: its default action would kill us */
    sigdelset(&term_signals, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &term_signals, NULL);
    pgcl_log_info("shutdown: %s received; draining (up to %ld s)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                  cfg.shutdown_grace_s);
    rc = 0;
out:
    pgcld_server_stop(&srv, (int)cfg.shutdown_grace_s);
    pgcld_shadow_destroy(srv.shadow);
    pgcld_checkpointer_stop(checkpointer); /* after the drain: its last checkpoint covers every answered decision */
    pgcl_queries_shutdown();
    pgcl_audit_close(srv.audit);
    pgcl_keyring_close(srv.keyring);
    pgcl_registry_destroy(srv.registry);
    pgcld_batcher_destroy(srv.batcher);
    pgcld_compute_destroy(srv.compute);
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
    if (argc >= 2 && strcmp(argv[1], "keys") == 0) return pgcld_cli_keys(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "audit") == 0) return pgcld_cli_audit(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 || (i == 1 && strcmp(argv[i], "help") == 0)) {
            pgcld_config_print_help(stdout);
            return 0;
        }
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("pgcld %s\n", PGCLD_VERSION);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "check-model") == 0) {
        if (argc < 3 || sodium_init() < 0) {
            fprintf(stderr, "usage: pgcld check-model DIR...\n");
            return 2;
        }
        return check_models(argc - 2, argv + 2);
    }
    if (argc < 2 || strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "usage: pgcld serve [OPTIONS] | pgcld check-model DIR...   (pgcld --help for more)\n");
        return 2;
    }
    pgcl_blas_ensure_fast_kernel(argv);
    if (sodium_init() < 0) {
        fprintf(stderr, "pgcld: libsodium failed to initialise\n");
        return 1;
    }
    /* Block the stop signals before any thread exists, so every thread inherits the mask and the
     * main thread alone takes them with sigwait(). */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    return serve(argc - 2, argv + 2, &stop_signals);
}
