/* The in-process pgcld server of the daemon harnesses; see fuzz_server.h. Built as server/main.c
 * builds it, with the options of `pgcld serve --auth off --synchronous NORMAL` and an empty listen
 * address (server/http/http.c then starts libmicrohttpd with MHD_USE_NO_LISTEN_SOCKET). */
#include "fuzz_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "server.h"

#ifndef PGCLD_SOURCE_ROOT
#error "PGCLD_SOURCE_ROOT must name the repository root"
#endif

#define ANSWER_LIMIT_MS 20000 /* an answer (or the close) must come within this */

static pgcld_config g_cfg;
static pgcld_server g_srv;
static char g_tmp[512];

static void die(const char *what) {
    fprintf(stderr, "fuzz_server: %s\n", what);
    abort();
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) die(from);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) die(to);
    fclose(in);
    if (fclose(out) != 0) die(to);
}

static void copy_model(const char *models, const char *name) {
    char dir[2048], from[2048], to[2048];
    snprintf(dir, sizeof dir, "%s/%s", models, name);
    if (mkdir(dir, 0700) != 0) die(dir);
    snprintf(dir, sizeof dir, "%s/%s/1", models, name);
    if (mkdir(dir, 0700) != 0) die(dir);
    static const char *const files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/tests/fixtures/models/%s/1/%s", PGCLD_SOURCE_ROOT, name, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        copy_file(from, to);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) { return remove(path); }

static void remove_tmp(void) {
    if (g_tmp[0]) nftw(g_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void set_string(char **field, const char *value) {
    free(*field);
    *field = strdup(value);
    if (!*field) die("out of memory");
}

void fuzz_server_start(void) {
    signal(SIGPIPE, SIG_IGN);
    if (sodium_init() < 0) die("sodium_init");
    pgcl_log_set_level(PGCL_LOG_ERROR);
    const char *tmpdir = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/pgcld-fuzz-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(g_tmp)) die("mkdtemp");
    atexit(remove_tmp);
    char models[1024], db[1024];
    snprintf(models, sizeof models, "%s/models", g_tmp);
    snprintf(db, sizeof db, "%s/audit.db", g_tmp);
    if (mkdir(models, 0700) != 0) die(models);
    copy_model(models, "tiny_binary");
    copy_model(models, "tiny_multi");

    pgcld_config_defaults(&g_cfg);
    set_string(&g_cfg.listen, ""); /* no listening socket: see server/http/http.c */
    set_string(&g_cfg.models_dir, models);
    set_string(&g_cfg.db_path, db);
    set_string(&g_cfg.default_model, "tiny_binary");
    set_string(&g_cfg.auth, "off");
    set_string(&g_cfg.synchronous, "NORMAL");
    set_string(&g_cfg.checkpoint_dir, g_tmp);
    g_cfg.max_body_bytes = 1 << 20;
    g_cfg.max_upload_bytes = 1 << 20;
    g_cfg.max_batch = 64;
    g_cfg.connection_timeout_s = 10;
    g_cfg.compute_workers = 1;
    g_cfg.blas_threads = 1;
    g_srv.cfg = &g_cfg;

    char err[1024];
    pgcl_backend *backend = pgcl_backend_cpu_create();
    g_srv.compute = backend ? pgcl_compute_slots_create(backend, 1, (int)g_cfg.chunk_rows) : NULL;
    g_srv.metrics = pgcld_metrics_create(pgcld_route_names, pgcld_route_count);
    g_srv.batcher = g_srv.compute ? pgcl_batcher_create(g_srv.compute, 1, (int)g_cfg.batch_max_rows,
                                                         g_cfg.batch_max_wait_us)
                                  : NULL;
    if (!g_srv.compute || !g_srv.metrics || !g_srv.batcher) die("cannot create the compute pipeline");
    pgcl_audit_options aopts = {.path = db, .synchronous_full = false, .busy_timeout_ms = 5000,
                                .max_pending_rows = (int)g_cfg.max_pending_rows};
    if (pgcl_audit_open(&aopts, &g_srv.audit, err, sizeof err) != PGCL_OK) die(err);
    g_srv.shadow = pgcl_shadow_create(g_srv.audit, pgcld_metrics_shadow_observer, g_srv.metrics, (int)g_cfg.shadow_queue, (int)g_cfg.chunk_rows);
    if (!g_srv.shadow) die("cannot start the shadow worker");
    if (pgcl_registry_create(models, &g_srv.registry, err, sizeof err) != PGCL_OK) die(err);
    pgcl_registry_load_initial(g_srv.registry, NULL);
    if (pgcl_registry_ready_count(g_srv.registry) != 2) die("the tiny models did not load");
    if (pgcld_server_start(&g_srv, err, sizeof err) != 0) die(err);
}

/* Checks the first answer in what the server sent (all of it, up to the buffer's size): a pgcld
 * answer with a JSON body must carry valid JSON, an error answer its {"error": {"code"}}, and no
 * input may get a 500 (a handler that failed, or produced nothing). Aborts otherwise. */
static void check_answer(const char *buf, size_t len, bool whole) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    while (len >= sizeof cont - 1 && memcmp(buf, cont, sizeof cont - 1) == 0) {
        buf += sizeof cont - 1;
        len -= sizeof cont - 1;
    }
    if (len == 0) return; /* closed without an answer: the request never ended */
    const char *head_end = memmem(buf, len, "\r\n\r\n", 4);
    if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (!head_end && whole)) die("the answer is not an HTTP answer");
    if (!head_end) return;
    int status = atoi(buf + 9);
    if (status == 500) {
        fprintf(stderr, "fuzz_server: answer: %.*s\n", (int)(len < 600 ? len : 600), buf);
        die("a 500 answer");
    }
    size_t head_len = (size_t)(head_end - buf) + 4;
    char head[8192];
    snprintf(head, sizeof head, "%.*s", (int)(head_len < sizeof head ? head_len : sizeof head - 1), buf);
    for (char *c = head; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    const char *ctype = strstr(head, "\r\ncontent-type: "), *clen = strstr(head, "\r\ncontent-length: ");
    if (!ctype || strncmp(ctype + 16, "application/json", 16) != 0 || !clen) return;
    size_t body_len = (size_t)strtoull(clen + 18, NULL, 10);
    if (head_len + body_len > len) {
        if (whole) die("a JSON answer shorter than its Content-Length");
        return;
    }
    json_error_t jerr;
    json_t *body = json_loadb(buf + head_len, body_len, 0, &jerr);
    if (!body) {
        fprintf(stderr, "fuzz_server: answer: %.*s\n", (int)(len < 600 ? len : 600), buf);
        die("an answer whose JSON body does not parse");
    }
    /* An error answer names a stable code: {"error": {"code", ...}} (pgcld's own routes) or
     * {"error": "message", "code": ...} (the Open Inference Protocol's /v2 routes). */
    json_t *error = json_object_get(body, "error");
    bool coded = json_is_object(error) ? json_is_string(json_object_get(error, "code"))
                                       : json_is_string(error) && json_is_string(json_object_get(body, "code"));
    if (status >= 400 && !coded) {
        fprintf(stderr, "fuzz_server: answer: %.*s\n", (int)(len < 600 ? len : 600), buf);
        die("an error answer without a code (error.code, or code beside a v2 error message)");
    }
    json_decref(body);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

size_t fuzz_server_exchange(const uint8_t *data, size_t size) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair");
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (MHD_add_connection(g_srv.daemon, sv[0], (const struct sockaddr *)&peer, sizeof peer) != MHD_YES) {
        close(sv[1]); /* the daemon closed sv[0] */
        die("MHD_add_connection refused the connection");
    }
    if (fcntl(sv[1], F_SETFL, O_NONBLOCK) != 0) die("fcntl");
    /* Write and read together: the server may answer (and stop reading) before the input ends. */
    size_t sent = 0, received = 0;
    bool write_open = true;
    int64_t deadline = now_ms() + ANSWER_LIMIT_MS;
    static char answer[1 << 18]; /* the first 256 KiB of what comes back, for check_answer() */
    size_t kept = 0;
    char buf[65536];
    for (;;) {
        if (write_open && sent == size) {
            shutdown(sv[1], SHUT_WR);
            write_open = false;
        }
        struct pollfd p = {.fd = sv[1], .events = POLLIN | (write_open ? POLLOUT : 0)};
        int left = (int)(deadline - now_ms());
        if (left <= 0) die("no answer and no close within the time limit: the server hangs on this input");
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("poll");
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(sv[1], buf, sizeof buf, 0);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) break; /* the server closed the connection (or reset it) */
            size_t take = (size_t)n < sizeof answer - kept ? (size_t)n : sizeof answer - kept;
            memcpy(answer + kept, buf, take);
            kept += take;
            received += (size_t)n;
        }
        if (write_open && (p.revents & POLLOUT)) {
            ssize_t n = send(sv[1], data + sent, size - sent, MSG_NOSIGNAL);
            if (n < 0 && errno != EINTR && errno != EAGAIN) write_open = false; /* the server stopped reading */
            if (n > 0) sent += (size_t)n;
        }
    }
    close(sv[1]);
    size_t skip = 0; /* blank lines before the request line are skipped by the server too */
    while (skip < size && (data[skip] == '\r' || data[skip] == '\n' || data[skip] == ' ')) skip++;
    if (!(size - skip >= 5 && strncasecmp((const char *)data + skip, "HEAD ", 5) == 0)) /* HEAD: no body */
        check_answer(answer, kept, kept < sizeof answer);
    return received;
}
