/* Audit store: migrations on a new and on an existing database, refusal of an edited or newer
 * schema, WAL mode, rows that survive close/reopen, group commit under concurrent appenders, and
 * all-or-nothing appends (a failing batch leaves none of its rows while its neighbours commit, also
 * inside one shared transaction), the checkpointer keeping the WAL bounded, and the asynchronous
 * append's callback (once, after the commit, or at once when refused), and the writer's stall as
 * the systemd watchdog reads it (0 when idle, growing while the writer is held inside one job).
 * Also the UUIDv7 format and ordering the decision ids rely on. */
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "chain.h"
#include "clock.h"
#include "ids.h"
#include "decision_lists.h"
#include "migrations.h"
#include "reader_pool.h"
#include "row_arena.h"
#include "test_sqlite.h"
#include "test_util.h"

static char g_dir[] = "/tmp/pgcl-audit-XXXXXX";

static void exec_on(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
}

static pgcl_audit *open_at(const char *path, char *err, int cap) {
    pgcl_audit_options o = {.path = path, .synchronous_full = true, .max_pending_rows = 100000};
    pgcl_audit *a = NULL;
    pgcl_audit_open(&o, &a, err, cap);
    return a;
}

typedef struct row_store {
    char ids[64][PGCL_UUID_LEN + 1];
    char item[64][16];
    float vec[64][4];
    pgcl_decision_row rows[64];
} row_store;

/* Rows the log can record (log/record_rows.h): hex digests of SHA-256's length, a policy object. */
#define MODEL_SHA256 "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f"
#define INPUT_SHA256 "abababababababababababababababababababababababababababababababab"

static void make_rows(row_store *rs, int n, const char *request_id) {
    for (int i = 0; i < n; i++) {
        pgcl_uuid7(rs->ids[i]);
        snprintf(rs->item[i], sizeof rs->item[i], "item-%d", i);
        for (int j = 0; j < 4; j++) rs->vec[i][j] = (float)(i + j);
        rs->rows[i] = (pgcl_decision_row){
            .decision_id = rs->ids[i], .request_id = request_id, .item_id = rs->item[i],
            .model_name = "m", .model_version = "1", .model_sha256 = MODEL_SHA256, .label = "toxic",
            .label_index = 1, .probabilities_json = "{\"non_toxic\":0.125,\"toxic\":0.875}", .has_toxicity = true,
            .toxicity = 0.875, .decision = "block",
            .policy_json = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.8,\"t_review\":0.5}",
            .has_thresholds = true, .t_review = 0.5, .t_block = 0.8, .vector = rs->vec[i], .d = 4,
            .input_sha256 = INPUT_SHA256, .latency_us = 10};
    }
}

typedef struct thread_arg {
    pgcl_audit *a;
    int ok;
} thread_arg;

static void *appender(void *p) {
    thread_arg *t = p;
    row_store *rs = malloc(sizeof *rs);
    char err[256];
    for (int r = 0; r < 20; r++) {
        make_rows(rs, 5, "req");
        if (pgcl_audit_append(t->a, rs->rows, 5, err, sizeof err) == PGCL_OK) t->ok += 5;
    }
    free(rs);
    return NULL;
}

/* A job that holds the writer until wait_rows rows are pending, so that the jobs queued meanwhile
 * share the next transaction (one group commit of several jobs). */
typedef struct gate_ctx {
    pgcl_audit *a;
    int wait_rows;
} gate_ctx;

static pgcl_status gate_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    (void)t, (void)err, (void)cap;
    gate_ctx *g = ctx;
    for (int i = 0; i < 60000 && pgcl_audit_pending_rows(g->a) < g->wait_rows; i++) usleep(1000); /* 60 s: reached only when failing */
    return PGCL_OK;
}

typedef struct append_arg {
    pgcl_audit *a;
    pgcl_decision_row *rows;
    int n;
    pgcl_status st;
    gate_ctx *gate; /* when set, runs the gate job instead */
} append_arg;

static void *append_once(void *p) {
    append_arg *x = p;
    char err[256];
    x->st = x->gate ? pgcl_audit_run(x->a, gate_fn, x->gate, err, sizeof err)
                    : pgcl_audit_append(x->a, x->rows, x->n, err, sizeof err);
    return NULL;
}

static void wait_pending(pgcl_audit *a, int rows) {
    for (int i = 0; i < 60000 && pgcl_audit_pending_rows(a) < rows; i++) usleep(1000); /* 60 s: reached only when failing */
}

/* Several jobs in one transaction: the one that fails (a repeated decision_id) is undone alone by
 * its savepoint, its neighbours commit, and the hash chain stays intact. */
static void test_shared_commit_isolates_a_failing_job(const char *path) {
    char err[512] = "";
    pgcl_audit *a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "open: %s", err);
    if (!a) return;
    row_store *good1 = malloc(sizeof *good1), *bad = malloc(sizeof *bad), *good2 = malloc(sizeof *good2);
    make_rows(good1, 5, "grp-good-1");
    make_rows(bad, 4, "grp-bad");
    memcpy(bad->ids[3], bad->ids[0], sizeof bad->ids[0]);
    make_rows(good2, 5, "grp-good-2");
    gate_ctx gate = {a, 1 + 5 + 4 + 5};
    append_arg args[4] = {{.a = a, .gate = &gate},
                          {.a = a, .rows = good1->rows, .n = 5},
                          {.a = a, .rows = bad->rows, .n = 4},
                          {.a = a, .rows = good2->rows, .n = 5}};
    pthread_t th[4];
    int queued = 0;
    for (int i = 0; i < 4; i++) { /* queued in this order, each after the previous one */
        queued += i == 0 ? 1 : args[i].n;
        pthread_create(&th[i], NULL, append_once, &args[i]);
        /* not after the last: once it is queued the gate lets the writer commit, and the pending
         * count can drop to 0 before this thread looks (it then waited out the whole deadline) */
        if (i < 3) wait_pending(a, queued);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(args[0].st == PGCL_OK && args[1].st == PGCL_OK && args[3].st == PGCL_OK, "neighbours committed: %d %d %d",
          args[0].st, args[1].st, args[3].st);
    CHECK(args[2].st == PGCL_ERR_DB, "the failing job reports its error: %d", args[2].st);
    pgcl_audit_close(a);
    CHECK(query_int(path, "SELECT count(*) FROM decisions WHERE request_id = 'grp-good-1'") == 5, "first good job");
    CHECK(query_int(path, "SELECT count(*) FROM decisions WHERE request_id = 'grp-bad'") == 0, "failed job undone");
    CHECK(query_int(path, "SELECT count(*) FROM decisions WHERE request_id = 'grp-good-2'") == 5, "second good job");
    pgcl_chain_report rep;
    CHECK(pgcl_chain_verify(path, NULL, 0, &rep, err, sizeof err) == PGCL_OK && rep.intact, "chain intact: %s %s",
          err, rep.reason);
    free(good1), free(bad), free(good2);
}

/* pgcl_audit_writer_stall_us: 0 while the writer waits with nothing queued; while a job holds it
 * inside its transaction, the time since it took that job (no more than since the job was handed
 * over, and it grows with now); 0 again once the commit is done. */
static void test_writer_stall(const char *path) {
    char err[512] = "";
    pgcl_audit *a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "open: %s", err);
    if (!a) return;
    CHECK(pgcl_audit_writer_stall_us(a, pgcl_monotonic_us()) == 0, "an idle writer owes nothing");
    gate_ctx gate = {a, 1 + 1}; /* held until one more row is queued behind it */
    append_arg held = {.a = a, .gate = &gate};
    pthread_t th_gate, th_row;
    int64_t handed_over = pgcl_monotonic_us();
    pthread_create(&th_gate, NULL, append_once, &held);
    wait_pending(a, 1);
    /* the writer takes the gate job and is held inside it: from then on it owes progress */
    int64_t now = 0, stall = 0;
    for (int i = 0; i < 60000 && (stall = pgcl_audit_writer_stall_us(a, now = pgcl_monotonic_us())) == 0; i++)
        usleep(1000); /* 60 s: reached only when failing */
    CHECK(stall > 0 && stall <= now - handed_over, "a held writer's stall: %lld us (handed over %lld us before)",
          (long long)stall, (long long)(now - handed_over));
    CHECK(pgcl_audit_writer_stall_us(a, now + 1000000) == stall + 1000000, "the stall grows with the clock");
    row_store *rs = malloc(sizeof *rs);
    make_rows(rs, 1, "stall-release");
    append_arg row = {.a = a, .rows = rs->rows, .n = 1};
    pthread_create(&th_row, NULL, append_once, &row);
    pthread_join(th_gate, NULL);
    pthread_join(th_row, NULL);
    CHECK(held.st == PGCL_OK && row.st == PGCL_OK, "both committed: %d %d", held.st, row.st);
    for (int i = 0; i < 5000 && pgcl_audit_writer_stall_us(a, pgcl_monotonic_us()) != 0; i++) usleep(1000);
    CHECK(pgcl_audit_writer_stall_us(a, pgcl_monotonic_us()) == 0, "idle again after the commit");
    pgcl_audit_close(a);
    free(rs);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The checkpointer thread copies the WAL back into the database file while the store is open, so
 * the file grows, and the WAL starts over (after the writer's short catch-up at 2000 frames, 32 MiB)
 * instead of growing with every commit: 800 one-row commits write about 8 frames of 16 KiB each,
 * about 100 MiB of WAL if nothing were checkpointed. */
static void test_checkpointer_bounds_the_wal(const char *dir) {
    char path[256], wal[300], err[512] = "";
    snprintf(path, sizeof path, "%s/ckpt.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    pgcl_audit *a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "open: %s", err);
    if (!a) return;
    long db_at_open = file_size(path), wal_max = 0;
    row_store *rs = malloc(sizeof *rs);
    for (int i = 0; i < 800; i++) {
        make_rows(rs, 1, "ckpt");
        if (pgcl_audit_append(a, rs->rows, 1, err, sizeof err) != PGCL_OK) {
            CHECK(false, "append %d: %s", i, err);
            break;
        }
        long w = file_size(wal);
        if (w > wal_max) wal_max = w;
    }
    long db_open_after = file_size(path);
    pgcl_audit_close(a);
    free(rs);
    CHECK(db_open_after > db_at_open, "the database file grew while open (%ld -> %ld bytes): checkpointed", db_at_open,
          db_open_after);
    CHECK(wal_max < 40L << 20, "the WAL stayed under 40 MiB (largest %ld bytes)", wal_max);
    CHECK(query_int(path, "SELECT count(*) FROM decisions") == 800, "800 rows");
}

/* ---- pgcl_audit_append_async ---- */

typedef struct async_done {
    const char *path, *request_id;
    pthread_t caller;
    _Atomic int calls;
    pgcl_status st;
    bool on_caller_thread;
    int rows_seen; /* rows of request_id readable from another connection when done ran */
    char err[256];
} async_done;

static void on_async_done(void *ctx, pgcl_status st, const char *err) {
    async_done *d = ctx;
    d->st = st;
    d->on_caller_thread = pthread_equal(pthread_self(), d->caller);
    snprintf(d->err, sizeof d->err, "%s", err);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM decisions WHERE request_id = '%s'", d->request_id);
    d->rows_seen = (int)query_int(d->path, sql);
    atomic_fetch_add(&d->calls, 1);
}

static void wait_calls(async_done *d) {
    for (int i = 0; i < 60000 && atomic_load(&d->calls) == 0; i++) usleep(1000); /* 60 s: only when failing */
}

/* The asynchronous append calls its callback exactly once: on the writer thread once the rows are
 * durable (readable from another connection), with the error and nothing recorded when its job
 * fails, and at once on the caller's thread when the backlog refuses it. Jobs queued while the
 * writer is held share its next commit. */
static void test_async_append(const char *dir) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/async.db", dir);
    pgcl_audit *a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "open: %s", err);
    if (!a) return;
    row_store *rs = calloc(3, sizeof *rs);
    async_done done[3] = {{.path = path, .request_id = "async-0"}, {.path = path, .request_id = "async-1"},
                          {.path = path, .request_id = "async-dup"}};
    gate_ctx gate = {a, 1 + 5 + 5 + 5};
    append_arg gate_arg = {.a = a, .gate = &gate};
    pthread_t gate_thread;
    pthread_create(&gate_thread, NULL, append_once, &gate_arg);
    wait_pending(a, 1); /* the writer is held by the gate */
    make_rows(&rs[0], 5, "async-0");
    make_rows(&rs[1], 5, "async-1");
    make_rows(&rs[2], 5, "async-dup");
    memcpy(rs[2].ids[4], rs[0].ids[0], sizeof rs[2].ids[4]); /* a decision_id already used: the job fails */
    for (int k = 0; k < 3; k++) {
        done[k].caller = pthread_self();
        pgcl_audit_append_async(a, rs[k].rows, 5, NULL, on_async_done, &done[k]);
    }
    pthread_join(gate_thread, NULL);
    for (int k = 0; k < 3; k++) wait_calls(&done[k]);
    for (int k = 0; k < 2; k++) {
        CHECK(done[k].calls == 1 && done[k].st == PGCL_OK, "async %d: %d calls, status %d (%s)", k, done[k].calls,
              done[k].st, done[k].err);
        CHECK(!done[k].on_caller_thread, "async %d: called on the writer thread", k);
        CHECK(done[k].rows_seen == 5, "async %d: its 5 rows were durable when done ran (%d)", k, done[k].rows_seen);
    }
    CHECK(done[2].calls == 1 && done[2].st == PGCL_ERR_DB && strstr(done[2].err, "UNIQUE"),
          "the failing job reports its error: %d %s", done[2].st, done[2].err);
    CHECK(done[2].rows_seen == 0, "nothing of the failing job recorded (%d)", done[2].rows_seen);

    /* the backlog full: refused at once, on the caller's thread, nothing recorded */
    pgcl_audit_set_max_pending_rows(a, 6); /* the gate's 1 row + 5 */
    gate = (gate_ctx){a, 1 + 5};
    pthread_create(&gate_thread, NULL, append_once, &gate_arg);
    wait_pending(a, 1);
    async_done queued = {.path = path, .request_id = "async-q", .caller = pthread_self()};
    async_done refused = {.path = path, .request_id = "async-busy", .caller = pthread_self()};
    make_rows(&rs[0], 5, "async-q");
    make_rows(&rs[1], 5, "async-busy");
    pgcl_audit_append_async(a, rs[0].rows, 5, NULL, on_async_done, &queued);
    pgcl_audit_append_async(a, rs[1].rows, 5, NULL, on_async_done, &refused);
    CHECK(refused.calls == 1 && refused.st == PGCL_ERR_BUSY && refused.on_caller_thread,
          "a full backlog refuses at once: %d calls, status %d", refused.calls, refused.st);
    pthread_join(gate_thread, NULL);
    wait_calls(&queued);
    CHECK(queued.calls == 1 && queued.st == PGCL_OK && queued.rows_seen == 5, "the queued one commits: %d %d %d",
          queued.calls, queued.st, queued.rows_seen);
    pgcl_audit_close(a);
    CHECK(query_int(path, "SELECT count(*) FROM decisions") == 15, "15 rows in all");
    pgcl_chain_report rep;
    CHECK(pgcl_chain_verify(path, NULL, 0, &rep, err, sizeof err) == PGCL_OK && rep.intact, "chain intact: %s", err);
    free(rs);
}

static void test_uuid7(void) {
    char prev[PGCL_UUID_LEN + 1] = "", cur[PGCL_UUID_LEN + 1];
    for (int i = 0; i < 10000; i++) {
        pgcl_uuid7(cur);
        CHECK(strlen(cur) == 36 && cur[14] == '7' && strchr("89ab", cur[19]) && cur[8] == '-', "uuid7 format %s", cur);
        CHECK(strcmp(prev, cur) < 0, "uuid7 not increasing: %s then %s", prev, cur);
        memcpy(prev, cur, sizeof cur);
    }
}

/* The plan of a decisions list filtered by decision: 'review' and 'block' read the partial index
 * decisions_flagged (migration 0008; SQLite uses it only when the query states its condition),
 * 'allow' walks seq, and no plan sorts. */
static void test_decision_plans(const char *path) {
    char err[512] = "";
    pgcl_qpool *pool = pgcl_qpool_create(path, 1, err, sizeof err);
    CHECK(pool != NULL, "reader pool: %s", err);
    if (!pool) return;
    static const struct {
        const char *decision, *index;
    } cases[] = {{"block", "decisions_flagged"}, {"review", "decisions_flagged"}, {"allow", NULL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pgcl_decision_filter f = {.decision = cases[c].decision};
        pgcl_row_arena arena = {0};
        pgcl_decisions_plan plan;
        CHECK(pgcl_decisions_explain(pool, &f, 0, 50, &arena, &plan, err, sizeof err) == PGCL_OK, "explain: %s", err);
        bool uses_index = false, sorts = false;
        for (int i = 0; i < plan.n_lines; i++) {
            uses_index = uses_index || strstr(plan.lines[i], "decisions_flagged") != NULL;
            sorts = sorts || strstr(plan.lines[i], "TEMP B-TREE") != NULL;
        }
        CHECK(uses_index == (cases[c].index != NULL), "decision=%s: decisions_flagged %s used", cases[c].decision,
              uses_index ? "is" : "is not");
        CHECK(!sorts, "decision=%s: no sort", cases[c].decision);
        pgcl_row_arena_release(&arena);
    }
    pgcl_qpool_destroy(pool);
}

int main(void) {
    if (sodium_init() < 0 || !mkdtemp(g_dir)) return 1;
    test_uuid7();
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/audit.db", g_dir);

    /* a new database gets every migration, recorded with its digest, in WAL mode */
    pgcl_audit *a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "open new: %s", err);
    if (!a) return test_finish("test_audit");
    CHECK(pgcl_audit_schema_version(a) == pgcl_migration_count, "schema version");
    row_store *rs = malloc(sizeof *rs);
    make_rows(rs, 10, "req-1");
    CHECK(pgcl_audit_append(a, rs->rows, 10, err, sizeof err) == PGCL_OK, "append: %s", err);
    pgcl_audit_close(a);
    CHECK(query_int(path, "SELECT count(*) FROM schema_migrations") == pgcl_migration_count, "migrations recorded");
    CHECK(query_int(path, "SELECT count(*) FROM decisions") == 10, "rows after close");
    CHECK(query_int(path, "SELECT length(vector) FROM decisions LIMIT 1") == 16, "vector blob of d float32");
    CHECK(query_int(path, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") == 1, "WAL mode");

    /* an existing database: nothing re-applied, rows kept, appends continue */
    a = open_at(path, err, sizeof err);
    CHECK(a != NULL, "reopen: %s", err);
    if (a) {
        make_rows(rs, 3, "req-2");
        CHECK(pgcl_audit_append(a, rs->rows, 3, err, sizeof err) == PGCL_OK, "append after reopen: %s", err);
        pgcl_audit_close(a);
    }
    CHECK(query_int(path, "SELECT count(*) FROM schema_migrations") == pgcl_migration_count, "not re-applied");
    CHECK(query_int(path, "SELECT count(*) FROM decisions") == 13, "13 rows");
    test_decision_plans(path);

    /* concurrent appenders share commits and lose nothing */
    a = open_at(path, err, sizeof err);
    pthread_t th[8];
    thread_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (thread_arg){.a = a};
        pthread_create(&th[i], NULL, appender, &args[i]);
    }
    int ok = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ok += args[i].ok;
    }
    CHECK(ok == 800, "concurrent appends acknowledged %d of 800", ok);
    CHECK(query_int(path, "SELECT count(*) FROM decisions") == 813, "813 rows after concurrency");

    /* all or nothing: a batch whose last row repeats an existing decision_id leaves no row */
    make_rows(rs, 4, "req-bad");
    memcpy(rs->ids[3], rs->ids[0], sizeof rs->ids[0]);
    CHECK(pgcl_audit_append(a, rs->rows, 4, err, sizeof err) == PGCL_ERR_DB, "duplicate decision_id refused");
    CHECK(strstr(err, "UNIQUE") != NULL, "duplicate message: %s", err);
    CHECK(query_int(path, "SELECT count(*) FROM decisions WHERE request_id = 'req-bad'") == 0, "no partial batch");
    CHECK(!pgcl_audit_healthy(a), "unhealthy after a failed write");
    make_rows(rs, 2, "req-after");
    CHECK(pgcl_audit_append(a, rs->rows, 2, err, sizeof err) == PGCL_OK, "recovers: %s", err);
    CHECK(pgcl_audit_healthy(a), "healthy again");
    pgcl_audit_close(a);

    test_shared_commit_isolates_a_failing_job(path);
    test_checkpointer_bounds_the_wal(g_dir);
    test_async_append(g_dir);
    test_writer_stall(path);

    /* an edited migration and a newer schema are refused with a reason */
    exec_on(path, "UPDATE schema_migrations SET sha256 = 'x' WHERE version = 1");
    CHECK(open_at(path, err, sizeof err) == NULL && strstr(err, "different SHA-256"), "edited migration: %s", err);
    char digest[65], fix[160];
    pgcl_sha256_hex(pgcl_migrations[0].sql, strlen(pgcl_migrations[0].sql), digest);
    snprintf(fix, sizeof fix, "UPDATE schema_migrations SET sha256 = '%s' WHERE version = 1", digest);
    exec_on(path, fix);
    exec_on(path, "INSERT INTO schema_migrations VALUES (999, 'future', 'x', 'now')");
    CHECK(open_at(path, err, sizeof err) == NULL && strstr(err, "newer than this pgcld"), "newer schema: %s", err);

    /* an unwritable location fails at open: a directory that does not exist (inside the test's own) */
    char missing[sizeof g_dir + 32];
    snprintf(missing, sizeof missing, "%s/no-such-dir/a.db", g_dir);
    CHECK(open_at(missing, err, sizeof err) == NULL && strstr(err, missing), "unwritable: %s", err);
    free(rs);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    return test_finish("test_audit");
}
