/* Audit writer micro-benchmark: how many decision rows per second the audit store commits, with
 * no HTTP, no parsing and no forward pass in the way.
 *
 *   BUILD/bench/audit_write [--db PATH] [--rows N] [--batch B] [--threads T] [--store-inputs f16|none]
 *                           [--synchronous full|normal] [--chain-encoding 1|2] [--disk-check 0|1]
 *
 * T client threads each append jobs of B rows (like T connections sending batch-B requests) until
 * N rows are committed; the rows look like /v1/score's (UUIDv7 ids, a 2-label probabilities object,
 * the threshold policy, a 64-d vector, a 1024-d float16 input). Prints one JSON line: rows/s, the
 * writer's CPU seconds per row (the process's CPU minus nothing else: clients only wait) and the
 * database size; the bytes written per row (WAL frames and the checkpoint's copies, from
 * /proc/self/io), and with --disk-check 1 (the default) the disk's own rate for commits of that
 * size (write + fdatasync in a loop for 2 s beside the database) and the rows/s it allows. The
 * database is created fresh (PATH and its -wal/-shm are removed first).
 *
 * PATH may be a PostgreSQL URI (issue 17: the PostgreSQL store, e.g. a fresh database of a throw-away
 * cluster made by bench/store.sh; --writer-id names the chain): then nothing is removed, and the
 * database size, the bytes written and the disk check are not measured (-1: they are the server's). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit.h"
#include "ids.h"
#include "pg_db.h"

#define D_IN 1024
#define D_OUT 64

typedef struct bench_args {
    pgcl_audit *audit;
    int batch;
    long rows_each;
    bool store_inputs;
    int failures;
} bench_args;

static const char POLICY[] =
    "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_review\":0.35,\"t_block\":0.8,"
    "\"source\":{\"method\":\"validation\"}}";

static const char *const LABELS[] = {"non_toxic", "toxic"};
static const float PROBABILITIES[] = {0.91234567f, 0.08765433f};

static void *client_main(void *arg) {
    bench_args *b = arg;
    pgcl_decision_row *rows = calloc((size_t)b->batch, sizeof *rows);
    char (*ids)[PGCL_UUID_LEN + 1] = calloc((size_t)b->batch, sizeof *ids);
    char (*items)[32] = calloc((size_t)b->batch, sizeof *items);
    float *vec = calloc(D_OUT, sizeof *vec);
    uint16_t *input = calloc(D_IN, sizeof *input);
    for (int k = 0; k < D_OUT; k++) vec[k] = 0.125f * (float)(k % 8) - 0.5f;
    for (int k = 0; k < D_IN; k++) input[k] = (uint16_t)(0x3000 + (k * 37) % 4096);
    char request_id[PGCL_UUID_LEN + 1];
    char err[256];
    for (long done = 0; done < b->rows_each; done += b->batch) {
        pgcl_uuid7(request_id);
        for (int i = 0; i < b->batch; i++) {
            pgcl_uuid7(ids[i]);
            snprintf(items[i], sizeof items[i], "comment-%ld", done + i);
            rows[i] = (pgcl_decision_row){
                .decision_id = ids[i], .request_id = request_id, .item_id = items[i],
                .model_name = "toxicity", .model_version = "1",
                .model_sha256 = "9f2c4e1b7a3d5f6e8c0b1a2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
                .label = "non_toxic", .label_index = 0,
                .probabilities_json = "{\"non_toxic\":0.91234567,\"toxic\":0.08765433}",
                .has_toxicity = true, .toxicity = 0.08765433, .decision = "allow", .policy_json = POLICY,
                .has_thresholds = true, .t_review = 0.35, .t_block = 0.8, .vector = vec, .d = D_OUT,
                .input_sha256 = "0b1a2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f9f2c4e1b7a3d5f6e8c",
                .latency_us = 1234,
                .input = b->store_inputs ? input : NULL, .input_bytes = D_IN * 2,
                .input_dtype = b->store_inputs ? "f16" : NULL,
                /* the log record's fields, as score.c fills them from the model */
                .record_task = 1, .labels = LABELS, .probabilities = PROBABILITIES, .n_labels = 2,
            };
        }
        if (pgcl_audit_append(b->audit, rows, b->batch, err, sizeof err) != PGCL_OK) {
            fprintf(stderr, "append: %s\n", err);
            b->failures++;
            break;
        }
    }
    free(rows);
    free(ids);
    free(items);
    free(vec);
    free(input);
    return NULL;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Bytes this process passed to write(2)/pwrite(2) so far (/proc/self/io wchar): the WAL frames
 * of every commit plus the checkpointer's copies of those pages into the database file. */
static long long bytes_written(void) {
    FILE *f = fopen("/proc/self/io", "r");
    long long v = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "wchar: %lld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

/* The disk's own rate for the way the writer writes: chunks of `chunk` bytes appended to a file
 * beside the database, each followed by fdatasync (a commit under synchronous=FULL), for about
 * two seconds. MB/s (10^6 bytes), or -1. */
static double disk_mb_per_s(const char *db_path, size_t chunk) {
    char path[4096];
    snprintf(path, sizeof path, "%s-disk-check", db_path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *buf = malloc(chunk);
    if (fd < 0 || !buf) {
        free(buf);
        if (fd >= 0) close(fd);
        return -1;
    }
    for (size_t i = 0; i < chunk; i++) buf[i] = (char)(i * 131 + 7); /* not zeros: no file system shortcut */
    int64_t t0 = pgcl_monotonic_us(), t = t0;
    size_t total = 0;
    while (t - t0 < 2000000 && total < ((size_t)1 << 31)) {
        if (write(fd, buf, chunk) != (ssize_t)chunk || fdatasync(fd) != 0) break;
        total += chunk;
        t = pgcl_monotonic_us();
    }
    close(fd);
    unlink(path);
    free(buf);
    return t > t0 ? (double)total / (double)(t - t0) : -1;
}

int main(int argc, char **argv) {
    const char *path = "/tmp/pgcld-bench-audit-write.db";
    long rows = 200000;
    int batch = 64, threads = 4;
    bool store_inputs = true, full = true;
    int page_size = 0, chain_encoding = 2;
    const char *pre_sql = NULL, *writer_id = NULL;
    bool disk_check = true;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (strcmp(argv[i], "--db") == 0) path = v;
        else if (strcmp(argv[i], "--rows") == 0) rows = atol(v);
        else if (strcmp(argv[i], "--batch") == 0) batch = atoi(v);
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(v);
        else if (strcmp(argv[i], "--store-inputs") == 0) store_inputs = strcmp(v, "none") != 0;
        else if (strcmp(argv[i], "--page-size") == 0) page_size = atoi(v);
        else if (strcmp(argv[i], "--sql") == 0) pre_sql = v;
        else if (strcmp(argv[i], "--synchronous") == 0) full = strcmp(v, "normal") != 0;
        else if (strcmp(argv[i], "--chain-encoding") == 0) chain_encoding = atoi(v);
        else if (strcmp(argv[i], "--disk-check") == 0) disk_check = atoi(v) != 0;
        else if (strcmp(argv[i], "--writer-id") == 0) writer_id = v;
        else goto usage;
        i++;
    }
    if (rows <= 0 || batch <= 0 || threads <= 0 || (chain_encoding != 1 && chain_encoding != 2)) goto usage;
    bool uri = pgcl_pg_is_uri(path); /* as pgcl_audit_open tells them apart */
    if (uri && (page_size || pre_sql)) goto usage; /* SQLite experiments */
    if (uri) disk_check = false;
    if (!uri) {
        char side[4096];
        unlink(path);
        snprintf(side, sizeof side, "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", path);
        unlink(side);
    }

    if (page_size) { /* an experiment: the page size is fixed when the first table is created */
        sqlite3 *db;
        char q[128];
        snprintf(q, sizeof q, "PRAGMA page_size=%d; CREATE TABLE x(a); DROP TABLE x;", page_size);
        if (sqlite3_open(path, &db) != SQLITE_OK || sqlite3_exec(db, q, NULL, NULL, NULL) != SQLITE_OK) return 1;
        sqlite3_close(db);
    }
    pgcl_audit *audit;
    char err[512];
    pgcl_audit_options opts = {
        .path = path, .synchronous_full = full, .max_pending_rows = 1 << 20, .chain_encoding = chain_encoding,
        .writer_id = writer_id};
    if (pgcl_audit_open(&opts, &audit, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "audit_write: %s\n", err);
        return 1;
    }
    if (pre_sql) { /* an experiment on the fresh schema, e.g. DROP INDEX ... */
        sqlite3 *db;
        if (sqlite3_open(path, &db) != SQLITE_OK || sqlite3_exec(db, pre_sql, NULL, NULL, NULL) != SQLITE_OK) {
            fprintf(stderr, "audit_write: --sql: %s\n", sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_close(db);
    }
    bench_args *args = calloc((size_t)threads, sizeof *args);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    long long written0 = bytes_written();
    double cpu0 = cpu_seconds();
    int64_t t0 = pgcl_monotonic_us();
    for (int t = 0; t < threads; t++) {
        args[t] = (bench_args){.audit = audit, .batch = batch, .rows_each = rows / threads, .store_inputs = store_inputs};
        pthread_create(&tids[t], NULL, client_main, &args[t]);
    }
    int failures = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
        failures += args[t].failures;
    }
    int64_t t1 = pgcl_monotonic_us();
    double cpu = cpu_seconds() - cpu0;
    pgcl_audit_close(audit); /* the WAL is checkpointed into the database file: every byte is written */
    long long written = bytes_written() - written0;
    long committed = (rows / threads) / batch * batch * threads;
    if ((rows / threads) % batch) committed += (long)batch * threads;
    struct stat st = {.st_size = -1};
    if (!uri) stat(path, &st);
    double secs = (double)(t1 - t0) / 1e6;
    double written_per_row = uri ? -1 : (double)written / (double)committed;
    /* the disk's rate for commits of the size this run made (rows per commit ~ threads x batch) */
    double disk = disk_check ? disk_mb_per_s(path, (size_t)(written_per_row * threads * batch / 2)) : -1;
    printf("{\"rows\": %ld, \"batch\": %d, \"threads\": %d, \"store_inputs\": %s, \"synchronous\": \"%s\","
           " \"chain_encoding\": %d,"
           " \"seconds\": %.3f, \"rows_per_s\": %.0f, \"cpu_us_per_row\": %.2f, \"db_bytes_per_row\": %.0f,"
           " \"written_bytes_per_row\": %.0f, \"disk_mb_per_s\": %.1f, \"disk_bound_rows_per_s\": %.0f,"
           " \"failures\": %d}\n",
           committed, batch, threads, store_inputs ? "true" : "false", full ? "full" : "normal", chain_encoding, secs,
           (double)committed / secs, cpu * 1e6 / (double)committed, st.st_size >= 0 ? (double)st.st_size / (double)committed : -1,
           written_per_row, disk, disk > 0 ? disk * 1e6 / written_per_row : -1, failures);
    free(args);
    free(tids);
    return failures ? 1 : 0;
usage:
    fprintf(stderr, "usage: audit_write [--db PATH] [--rows N] [--batch B] [--threads T] "
                    "[--store-inputs f16|none] [--synchronous full|normal] [--chain-encoding 1|2] [--disk-check 0|1]"
                    " [--writer-id NAME]\n");
    return 2;
}
