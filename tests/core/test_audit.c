/* Audit store: migrations on a new and on an existing database, refusal of an edited or newer
 * schema, WAL mode, rows that survive close/reopen, group commit under concurrent appenders, and
 * all-or-nothing appends (a failing batch leaves none of its rows while its neighbours commit).
 * Also the UUIDv7 format and ordering the decision ids rely on. */
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <unistd.h>

#include "audit.h"
#include "ids.h"
#include "migrations.h"
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

static void make_rows(row_store *rs, int n, const char *request_id) {
    for (int i = 0; i < n; i++) {
        pgcl_uuid7(rs->ids[i]);
        snprintf(rs->item[i], sizeof rs->item[i], "item-%d", i);
        for (int j = 0; j < 4; j++) rs->vec[i][j] = (float)(i + j);
        rs->rows[i] = (pgcl_decision_row){
            .decision_id = rs->ids[i], .request_id = request_id, .item_id = rs->item[i],
            .model_name = "m", .model_version = "1", .model_sha256 = "00", .label = "toxic", .label_index = 1,
            .probabilities_json = "{\"toxic\":1}", .has_toxicity = true, .toxicity = 0.9, .decision = "block",
            .policy_json = "{}", .has_thresholds = true, .t_review = 0.5, .t_block = 0.8, .vector = rs->vec[i],
            .d = 4, .input_sha256 = "ab", .latency_us = 10};
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

static void test_uuid7(void) {
    char prev[PGCL_UUID_LEN + 1] = "", cur[PGCL_UUID_LEN + 1];
    for (int i = 0; i < 10000; i++) {
        pgcl_uuid7(cur);
        CHECK(strlen(cur) == 36 && cur[14] == '7' && strchr("89ab", cur[19]) && cur[8] == '-', "uuid7 format %s", cur);
        CHECK(strcmp(prev, cur) < 0, "uuid7 not increasing: %s then %s", prev, cur);
        memcpy(prev, cur, sizeof cur);
    }
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

    /* an edited migration and a newer schema are refused with a reason */
    exec_on(path, "UPDATE schema_migrations SET sha256 = 'x' WHERE version = 1");
    CHECK(open_at(path, err, sizeof err) == NULL && strstr(err, "different SHA-256"), "edited migration: %s", err);
    char digest[65], fix[160];
    pgcl_sha256_hex(pgcl_migrations[0].sql, strlen(pgcl_migrations[0].sql), digest);
    snprintf(fix, sizeof fix, "UPDATE schema_migrations SET sha256 = '%s' WHERE version = 1", digest);
    exec_on(path, fix);
    exec_on(path, "INSERT INTO schema_migrations VALUES (999, 'future', 'x', 'now')");
    CHECK(open_at(path, err, sizeof err) == NULL && strstr(err, "newer than this pgcld"), "newer schema: %s", err);

    /* an unwritable location fails at open */
    CHECK(open_at("/nonexistent-dir/a.db", err, sizeof err) == NULL && strstr(err, "/nonexistent-dir/a.db"),
          "unwritable: %s", err);
    free(rs);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    return test_finish("test_audit");
}
