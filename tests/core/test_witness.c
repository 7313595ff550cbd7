/* Witnesses (core/audit/log/witness.h) against a witness written from the specifications in Python
 * (tests/tlog/witness.py, spawned here, real HTTP over loopback): the --witness spec's strictness;
 * add-checkpoint from the empty tree, then with a consistency proof; a 409 recovered by one retry
 * from the witness's size; a bad proof (422); a witness that has seen a larger tree (split view),
 * and one holding another tree of a smaller size, both refused as conflicts; an unknown origin; a
 * cosignature that does not verify; a witness down (connection refused) and one that hangs (short
 * timeout); the manager: non-blocking submit, latest wins, retried with backoff until a stopped
 * witness comes back, per-witness state; and the count of distinct valid cosigners. */
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "test_util.h"
#include "witness.h"

#define ORIGIN "example.com/pgcld-witness-test"
#define N_LEAVES 600

static char g_err[512];
static pgcl_merkle_hash g_leaves[N_LEAVES];
static pgcl_note_signer *g_log;
static int g_proof_calls;
static bool g_proof_broken;

/* ---- the log: N_LEAVES leaves in memory, checkpoints signed by g_log ---- */

/* The signed checkpoint of the first size leaves (malloc'd), signed by signer. */
static char *checkpoint_note(const pgcl_note_signer *signer, uint64_t size, size_t *len) {
    pgcl_tlog_checkpoint cp = {0};
    snprintf(cp.origin, sizeof cp.origin, "%s", pgcl_note_signer_verifier(signer)->name);
    cp.size = size;
    cp.root = pgcl_merkle_root(g_leaves, size);
    char text[PGCL_TLOG_CHECKPOINT_MAX];
    size_t text_len;
    pgcl_status st = pgcl_tlog_checkpoint_format(&cp, text, &text_len, g_err, sizeof g_err);
    CHECK(st == PGCL_OK, "checkpoint: %s", g_err);
    char *note = pgcl_note_sign(text, text_len, &signer, 1, 0, len, &st, g_err, sizeof g_err);
    CHECK(note != NULL, "sign: %s", g_err);
    return note;
}

static pgcl_status proof_from_leaves(void *ctx, uint64_t old_size, uint64_t new_size,
                                     pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *n_proof, char *err, int cap) {
    (void)ctx;
    g_proof_calls++;
    if (new_size > N_LEAVES) {
        pgcl_errorf(err, cap, "beyond the test's log");
        return PGCL_ERR_NOT_FOUND;
    }
    *n_proof = pgcl_merkle_consistency_proof(g_leaves, old_size, new_size, proof);
    if (g_proof_broken && *n_proof > 0) proof[0].b[0] ^= 1;
    return PGCL_OK;
}

/* ---- the Python witness ---- */

typedef struct spawned {
    pid_t pid;
    int port;
    char vkey[PGCL_NOTE_VKEY_MAX];
    pgcl_witness w; /* its spec, parsed */
} spawned;

/* Starts tests/tlog/witness.py named name with a seed of byte seed_byte, knowing the log's key, and
 * extra arguments (NULL-terminated). */
static bool witness_start(spawned *out, const char *name, int seed_byte, const char *extra1, const char *extra2) {
    memset(out, 0, sizeof *out);
    char log_vkey[PGCL_NOTE_VKEY_MAX], seed[65];
    CHECK(pgcl_note_verifier_format(pgcl_note_signer_verifier(g_log), log_vkey, sizeof log_vkey) > 0, "log vkey");
    for (int i = 0; i < 32; i++)
        snprintf(seed + 2 * i, 3, "%02x", seed_byte);
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", source_path("tests/tlog/witness.py"), "--name", name, "--seed", seed,
              "--log", log_vkey, extra1, extra2, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[1024] = "";
    FILE *f = fdopen(fds[0], "r");
    bool ok = pid > 0 && f && fgets(line, sizeof line, f) != NULL;
    if (f)
        fclose(f);
    else
        close(fds[0]);
    const char *port = strstr(line, "\"port\": "), *vkey = strstr(line, "\"vkey\": \"");
    ok = ok && port && vkey && sscanf(port + 8, "%d", &out->port) == 1 && sscanf(vkey + 9, "%[^\"]", out->vkey) == 1;
    CHECK(ok, "witness %s started: %s", name, line);
    out->pid = pid;
    if (!ok) return false;
    char spec[2048];
    snprintf(spec, sizeof spec, "%s=http://127.0.0.1:%d/,%s", name, out->port, out->vkey);
    pgcl_status st = pgcl_witness_parse(spec, &out->w, g_err, sizeof g_err);
    CHECK(st == PGCL_OK, "spec %s: %s", spec, g_err);
    return st == PGCL_OK;
}

static void witness_stop(spawned *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* ---- the --witness spec ---- */

static void test_parse(const char *vkey_w, const char *vkey_log) {
    pgcl_witness w;
    char spec[2048];
    snprintf(spec, sizeof spec, "w1=https://witness.example.org/tlog/,%s", vkey_w);
    CHECK(pgcl_witness_parse(spec, &w, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    CHECK(strcmp(w.name, "w1") == 0 && strcmp(w.url, "https://witness.example.org/tlog") == 0, "%s %s", w.name, w.url);
    CHECK(w.key.alg == PGCL_NOTE_ALG_COSIGNATURE_V1, "a cosignature key");
    const char *ok_urls[] = {"http://127.0.0.1:8080", "https://[::1]:443/a/b", "http://h-1.example/p%20q/,x=y"};
    for (size_t i = 0; i < sizeof ok_urls / sizeof *ok_urls; i++) {
        snprintf(spec, sizeof spec, "w.2_x=%s,%s", ok_urls[i], vkey_w);
        CHECK(pgcl_witness_parse(spec, &w, g_err, sizeof g_err) == PGCL_OK, "%s: %s", spec, g_err);
    }
    const char *bad[][2] = {
        {"", "NAME=URL"},
        {"w1", "NAME=URL"},
        {"=https://a.example,%s", "name"},
        {"w 1=https://a.example,%s", "name"},
        {"w/1=https://a.example,%s", "name"},
        {"w1=ftp://a.example,%s", "http:// or https://"},
        {"w1=https://,%s", "host"},
        {"w1=https://user@a.example,%s", "user information"},
        {"w1=https://a.example?x=1,%s", "query"},
        {"w1=https://a.example/#f,%s", "query"},
        {"w1=https://a.example:0,%s", "host"},
        {"w1=https://a.example:70000,%s", "host"},
        {"w1=https://a.example/%%zz,%s", "hex"},
        {"w1=https://a .example,%s", "blank"},
        {"w1=https://-a.example,%s", "host"},
        {"w1=https://a.example,", "verifier key"},
        {"w1=https://a.example,%sx", "verifier key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(spec, sizeof spec, bad[i][0], vkey_w);
        g_err[0] = 0;
        pgcl_status st = pgcl_witness_parse(spec, &w, g_err, sizeof g_err);
        CHECK(st == PGCL_ERR_FORMAT && strstr(g_err, bad[i][1]) && w.name[0] == 0, "%s: %s (%s)", spec,
              pgcl_status_str(st), g_err);
    }
    char long_name[100];
    memset(long_name, 'n', 65);
    long_name[65] = 0;
    snprintf(spec, sizeof spec, "%s=https://a.example,%s", long_name, vkey_w);
    CHECK(pgcl_witness_parse(spec, &w, g_err, sizeof g_err) == PGCL_ERR_FORMAT, "a 65-byte name");
    snprintf(spec, sizeof spec, "w1=https://a.example,%s", vkey_log);
    CHECK(pgcl_witness_parse(spec, &w, g_err, sizeof g_err) == PGCL_ERR_UNSUPPORTED && strstr(g_err, "0x04"),
          "a note key (0x01) is not a witness key: %s", g_err);

    /* a list: no repeated name, URL or public key */
    char a[2048], b[2048], c[2048];
    snprintf(a, sizeof a, "w1=https://a.example,%s", vkey_w);
    snprintf(b, sizeof b, "w2=https://b.example,%s", vkey_w);
    snprintf(c, sizeof c, "w1=https://c.example,%s", vkey_w);
    pgcl_witness ws[3];
    const char *one[] = {a};
    CHECK(pgcl_witness_parse_all(one, 1, ws, g_err, sizeof g_err) == PGCL_OK, "%s", g_err);
    const char *same_key[] = {a, b};
    CHECK(pgcl_witness_parse_all(same_key, 2, ws, g_err, sizeof g_err) == PGCL_ERR_INVALID &&
              strstr(g_err, "public key"),
          "%s", g_err);
    const char *same_name[] = {a, c};
    CHECK(pgcl_witness_parse_all(same_name, 2, ws, g_err, sizeof g_err) == PGCL_ERR_INVALID && strstr(g_err, "name"),
          "%s", g_err);
}

/* ---- one exchange ---- */

static pgcl_witness_outcome send_cp(const pgcl_witness *w, uint64_t size, uint64_t old, pgcl_witness_result *r) {
    size_t len;
    char *note = checkpoint_note(g_log, size, &len);
    pgcl_witness_timeouts t = {.connect_ms = 1000, .total_ms = 3000};
    pgcl_witness_outcome o = pgcl_witness_add_checkpoint(w, note, len, old, proof_from_leaves, NULL, &t, r);
    if (o == PGCL_WITNESS_COSIGNED) {
        /* the line makes a note cosigned by exactly this witness */
        size_t n = len + strlen(r->line);
        char *cosigned = malloc(n + 1);
        memcpy(cosigned, note, len);
        memcpy(cosigned + len, r->line, strlen(r->line) + 1);
        int count = pgcl_witness_count_cosignatures(cosigned, n, w, 1, g_err, sizeof g_err);
        CHECK(count == 1, "the returned line cosigns: %d %s", count, g_err);
        free(cosigned);
    }
    free(note);
    return o;
}

static void test_client(spawned *a) {
    pgcl_witness_result r;
    CHECK(send_cp(&a->w, 10, 0, &r) == PGCL_WITNESS_COSIGNED, "from the empty tree: %s %s",
          pgcl_witness_outcome_str(r.outcome), r.error);
    CHECK(r.requests == 1 && r.http_status == 200 && r.witness_size == 10 && r.timestamp > 1700000000, "one request");
    int calls = g_proof_calls;
    CHECK(send_cp(&a->w, 100, 10, &r) == PGCL_WITNESS_COSIGNED, "10 -> 100 with a proof: %s", r.error);
    CHECK(g_proof_calls == calls + 1 && r.requests == 1, "one proof, one request");

    g_proof_broken = true;
    CHECK(send_cp(&a->w, 150, 100, &r) == PGCL_WITNESS_BAD_PROOF && r.http_status == 422, "a broken proof: %s %s",
          pgcl_witness_outcome_str(r.outcome), r.error);
    g_proof_broken = false;

    /* the client forgot the witness's size: 409 (100), then once from 100 */
    CHECK(send_cp(&a->w, 200, 0, &r) == PGCL_WITNESS_COSIGNED, "409 recovered: %s %s",
          pgcl_witness_outcome_str(r.outcome), r.error);
    CHECK(r.requests == 2 && r.witness_size == 200, "two requests: %d", r.requests);
    /* the same checkpoint again, from its own size: the witness compares roots and cosigns again */
    CHECK(send_cp(&a->w, 200, 200, &r) == PGCL_WITNESS_COSIGNED, "the same size: %s", r.error);
    /* an older checkpoint than the witness has cosigned: refused, never "recovered" */
    CHECK(send_cp(&a->w, 150, 0, &r) == PGCL_WITNESS_CONFLICT && r.witness_size == 200 && r.requests == 1,
          "a stale checkpoint: %s %s", pgcl_witness_outcome_str(r.outcome), r.error);

    /* a note of another log: the witness does not know its origin (404) */
    pgcl_status st;
    pgcl_note_signer *other =
        pgcl_note_signer_generate("example.com/other-log", PGCL_NOTE_ALG_ED25519, &st, g_err, sizeof g_err);
    size_t len;
    char *note = checkpoint_note(other, 5, &len);
    pgcl_witness_outcome o = pgcl_witness_add_checkpoint(&a->w, note, len, 0, proof_from_leaves, NULL, NULL, &r);
    CHECK(o == PGCL_WITNESS_REFUSED && r.http_status == 404, "an unknown origin: %s %d %s", pgcl_witness_outcome_str(o),
          r.http_status, r.error);
    free(note);
    pgcl_note_signer_destroy(other);
}

static void test_conflicts(spawned *a) {
    pgcl_witness_result r;
    /* a witness that has cosigned a larger tree of this origin, never made by this log */
    char seen[256], root_b64[64];
    pgcl_merkle_hash fake = pgcl_merkle_leaf_hash("another history", 15);
    sodium_bin2base64(root_b64, sizeof root_b64, fake.b, sizeof fake.b, sodium_base64_VARIANT_ORIGINAL);
    snprintf(seen, sizeof seen, "%s=500,%s", ORIGIN, root_b64);
    spawned big;
    if (witness_start(&big, "big.example", 0x22, "--seen", seen)) {
        CHECK(send_cp(&big.w, 300, 0, &r) == PGCL_WITNESS_CONFLICT && r.witness_size == 500 && r.http_status == 409,
              "split view (larger): %s %s", pgcl_witness_outcome_str(r.outcome), r.error);
        CHECK(strstr(r.error, "split view") != NULL, "%s", r.error);
        /* the same from the witness's size claimed as ours is never tried: 500 > 300 */
        CHECK(r.requests == 1, "no retry");
    }
    witness_stop(&big);
    /* a witness holding another tree of 50 leaves: the proof from 50 fails there (422 after a 409) */
    snprintf(seen, sizeof seen, "%s=50,%s", ORIGIN, root_b64);
    spawned fork_w;
    if (witness_start(&fork_w, "fork.example", 0x33, "--seen", seen)) {
        CHECK(send_cp(&fork_w.w, 100, 0, &r) == PGCL_WITNESS_CONFLICT && r.requests == 2 && r.http_status == 422,
              "split view (smaller): %s %s", pgcl_witness_outcome_str(r.outcome), r.error);
        /* and at its own size, with another root: 409 twice */
        CHECK(send_cp(&fork_w.w, 50, 0, &r) == PGCL_WITNESS_CONFLICT && r.requests == 2 && r.http_status == 409,
              "same size, other root: %s %s", pgcl_witness_outcome_str(r.outcome), r.error);
    }
    witness_stop(&fork_w);

    /* a cosignature by another key than configured: a bad answer, never kept */
    pgcl_witness wrong = a->w;
    pgcl_status st;
    pgcl_note_signer *k =
        pgcl_note_signer_generate(a->w.key.name, PGCL_NOTE_ALG_COSIGNATURE_V1, &st, g_err, sizeof g_err);
    wrong.key = *pgcl_note_signer_verifier(k);
    size_t len;
    char *note = checkpoint_note(g_log, 200, &len);
    pgcl_witness_outcome o = pgcl_witness_add_checkpoint(&wrong, note, len, 200, proof_from_leaves, NULL, NULL, &r);
    CHECK(o == PGCL_WITNESS_BAD_ANSWER && r.http_status == 200 && r.line[0] == 0, "a line by another key: %s %s",
          pgcl_witness_outcome_str(o), r.error);
    free(note);
    pgcl_note_signer_destroy(k);
}

static void test_down(spawned *a) {
    pgcl_witness_result r;
    pgcl_witness down = a->w;
    snprintf(down.url, sizeof down.url, "http://127.0.0.1:%d", closed_port());
    CHECK(send_cp(&down, 200, 200, &r) == PGCL_WITNESS_UNREACHABLE && r.http_status == 0 && r.error[0],
          "connection refused: %s %s", pgcl_witness_outcome_str(r.outcome), r.error);
    /* a witness that accepts and never answers: the short timeout ends it */
    kill(a->pid, SIGSTOP);
    size_t len;
    char *note = checkpoint_note(g_log, 200, &len);
    pgcl_witness_timeouts t = {.connect_ms = 300, .total_ms = 500};
    int64_t t0 = pgcl_monotonic_us();
    pgcl_witness_outcome o = pgcl_witness_add_checkpoint(&a->w, note, len, 200, proof_from_leaves, NULL, &t, &r);
    int64_t took_ms = (pgcl_monotonic_us() - t0) / 1000;
    CHECK(o == PGCL_WITNESS_UNREACHABLE && took_ms < 2000, "a hung witness: %s after %" PRId64 " ms: %s",
          pgcl_witness_outcome_str(o), took_ms, r.error);
    kill(a->pid, SIGCONT);
    free(note);
}

/* ---- the manager ---- */

typedef struct cosigned_log {
    int n;
    int index[16];
    uint64_t size[16];
    char line[16][PGCL_NOTE_SIG_LINE_MAX];
} cosigned_log;

static void on_cosigned(void *ctx, int index, const pgcl_witness *w, uint64_t size, const char *line) {
    cosigned_log *c = ctx;
    (void)w;
    if (c->n >= 16) return;
    c->index[c->n] = index;
    c->size[c->n] = size;
    snprintf(c->line[c->n], sizeof c->line[0], "%s", line);
    c->n++;
}

static void test_manager(spawned *a) {
    spawned e;
    if (!witness_start(&e, "e.example", 0x44, NULL, NULL)) return;
    kill(e.pid, SIGSTOP); /* down (hangs) until SIGCONT */
    pgcl_witness ws[2] = {a->w, e.w};
    cosigned_log got = {0};
    pgcl_witness_manager_config cfg = {.witnesses = ws,
                                       .n = 2,
                                       .proof_fn = proof_from_leaves,
                                       .on_cosigned = on_cosigned,
                                       .cosigned_ctx = &got,
                                       .timeouts = {.connect_ms = 200, .total_ms = 300},
                                       .backoff_min_ms = 100,
                                       .backoff_max_ms = 400};
    pgcl_status st;
    pgcl_witness_manager *m = pgcl_witness_manager_create(&cfg, &st, g_err, sizeof g_err);
    CHECK(m != NULL, "manager: %s", g_err);
    if (!m) return;
    size_t len;
    char *note = checkpoint_note(g_log, 300, &len);
    int64_t t0 = pgcl_monotonic_us();
    CHECK(pgcl_witness_manager_submit(m, note, len, 300) == PGCL_OK, "submit");
    CHECK(pgcl_monotonic_us() - t0 < 50000, "submit does not wait for a witness");
    char *older = checkpoint_note(g_log, 250, &len);
    CHECK(pgcl_witness_manager_submit(m, older, len, 250) == PGCL_OK, "an older one is ignored");
    free(older);
    CHECK(pgcl_witness_manager_wait(m, 10000), "every witness tried");
    pgcl_witness_state s[2];
    CHECK(pgcl_witness_manager_states(m, s, 2) == 2, "two states");
    /* a: it had cosigned 200 (the client test), the manager starts from 0: 409, then from 200 */
    CHECK(s[0].cosigned_size == 300 && s[0].cosignatures == 1 && s[0].consecutive_failures == 0 &&
              s[0].last_outcome == PGCL_WITNESS_COSIGNED && s[0].pending_size == 0,
          "a cosigned 300: %" PRIu64 " %s %s", s[0].cosigned_size, pgcl_witness_outcome_str(s[0].last_outcome),
          s[0].last_error);
    CHECK(got.n == 1 && got.index[0] == 0 && got.size[0] == 300, "one line handed back");
    CHECK(s[1].cosigned_size == 0 && s[1].failures >= 1 && s[1].consecutive_failures >= 1 &&
              s[1].last_outcome == PGCL_WITNESS_UNREACHABLE && s[1].pending_size == 300 && s[1].last_error[0],
          "e is down: %s", pgcl_witness_outcome_str(s[1].last_outcome));
    /* retried with backoff while down */
    struct timespec nap = {.tv_sec = 1, .tv_nsec = 0};
    nanosleep(&nap, NULL);
    pgcl_witness_manager_states(m, s, 2);
    CHECK(s[1].failures >= 2, "retried: %" PRIu64 " failures", s[1].failures);
    /* back up: cosigned on a retry */
    kill(e.pid, SIGCONT);
    for (int i = 0; i < 100; i++) {
        pgcl_witness_manager_states(m, s, 2);
        if (s[1].cosigned_size == 300) break;
        nap = (struct timespec){.tv_sec = 0, .tv_nsec = 100000000};
        nanosleep(&nap, NULL);
    }
    CHECK(s[1].cosigned_size == 300 && s[1].consecutive_failures == 0 && s[1].failures >= 2,
          "e cosigned after it came back: %s %s", pgcl_witness_outcome_str(s[1].last_outcome), s[1].last_error);
    CHECK(got.n == 2 && got.index[1] == 1, "e's line handed back: %d", got.n);

    /* a newer checkpoint: both from their cosigned size, one proof each */
    free(note);
    note = checkpoint_note(g_log, 400, &len);
    CHECK(pgcl_witness_manager_submit(m, note, len, 400) == PGCL_OK, "submit 400");
    CHECK(pgcl_witness_manager_wait(m, 10000), "tried");
    pgcl_witness_manager_states(m, s, 2);
    CHECK(s[0].cosigned_size == 400 && s[1].cosigned_size == 400, "both at 400");
    CHECK(got.n == 4, "four lines: %d", got.n);

    /* the cosigned note: both witnesses count, each once, even listed twice */
    if (got.n == 4) {
        size_t n = len + strlen(got.line[2]) + strlen(got.line[3]);
        char *cosigned = malloc(n + 1);
        snprintf(cosigned, n + 1, "%s%s%s", note, got.line[2], got.line[3]);
        pgcl_witness three[3] = {a->w, e.w, a->w};
        snprintf(three[2].name, sizeof three[2].name, "again");
        CHECK(pgcl_witness_count_cosignatures(cosigned, n, three, 3, g_err, sizeof g_err) == 2, "two cosigners");
        CHECK(pgcl_witness_count_cosignatures(cosigned, n, three, 1, g_err, sizeof g_err) == 1, "one of them known");
        CHECK(pgcl_witness_count_cosignatures(note, len, three, 3, g_err, sizeof g_err) == 0, "none on the bare note");
        /* a tampered cosignature is an error, not a smaller count */
        char *sig = strstr(cosigned + len, " ") + 10;
        *sig = *sig == 'A' ? 'B' : 'A';
        CHECK(pgcl_witness_count_cosignatures(cosigned, n, three, 3, g_err, sizeof g_err) == -1, "tampered: %s", g_err);
        CHECK(pgcl_witness_count_cosignatures("not a note\n", 11, three, 3, g_err, sizeof g_err) == -1, "not a note");
        free(cosigned);
    }
    free(note);
    pgcl_witness_manager_destroy(m);
    witness_stop(&e);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    /* the witness needs Debian's python3-cryptography (deploy/install-deps.sh --test): without it the
     * test skips, and fails under tests/run_all.sh (PGCLD_REQUIRE_SUITE_DEPS=1) */
    if (system("/usr/bin/python3 -c 'import cryptography' 2>/dev/null") != 0) {
        const char *required = getenv("PGCLD_REQUIRE_SUITE_DEPS");
        printf("SKIP: /usr/bin/python3 with python3-cryptography (deploy/install-deps.sh --test)\n");
        return required && strcmp(required, "1") == 0 ? 1 : 77;
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < N_LEAVES; i++) {
        char leaf[32];
        int n = snprintf(leaf, sizeof leaf, "leaf %d", i);
        g_leaves[i] = pgcl_merkle_leaf_hash(leaf, (size_t)n);
    }
    pgcl_status st;
    g_log = pgcl_note_signer_generate(ORIGIN, PGCL_NOTE_ALG_ED25519, &st, g_err, sizeof g_err);
    CHECK(g_log != NULL, "log key: %s", g_err);
    spawned a;
    if (g_log && witness_start(&a, "a.example", 0x11, NULL, NULL)) {
        char log_vkey[PGCL_NOTE_VKEY_MAX];
        pgcl_note_verifier_format(pgcl_note_signer_verifier(g_log), log_vkey, sizeof log_vkey);
        test_parse(a.vkey, log_vkey);
        test_client(&a);
        test_conflicts(&a);
        test_down(&a);
        test_manager(&a);
        witness_stop(&a);
    }
    pgcl_note_signer_destroy(g_log);
    return test_finish("test_witness");
}
