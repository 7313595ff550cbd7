/* The log record's encoder from the outside (core/audit/log/record.c), for
 * tests/integration/test_record_known_answers.py and docs/log-record.md:
 *
 *   record_tool known-answers    one line per sample of record_samples.h: "<name> <hex>"
 *   record_tool sizes MODEL_DIR  what a typical decision takes (a binary model, 2 classes, 64-d
 *                                vector: the model at MODEL_DIR, e.g. models/toxicity/1) as a log
 *                                record, as today's version-2 leaf, and as today's SQLite row, one
 *                                "<what> <bytes>" line each (below)
 *
 * The sizes: a record and a v2 leaf are exact (their encodings of the same decision); the row is
 * measured by writing N decisions like it through the real SQLite store (pgcl_audit_append, the
 * default chain encoding, a float16 input of D values stored) and reading SQLite's dbstat: bytes
 * per decision of the decisions table (row payload, then its pages), of its indexes, and of
 * everything the store holds besides the stored inputs. */
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "chain_encoding.h"
#include "f16.h"
#include "ids.h"
#include "model.h"
#include "record.h"
#include "record_samples.h"
#include "sha256.h"

#define ROWS 2048
#define BATCH 64

static int known_answers(void) {
    unsigned char buf[4096];
    char why[256];
    for (int i = 0; i < SAMPLES; i++) {
        pgcl_record r;
        size_t len;
        if (!sample_record(i, &r) || pgcl_record_encode(&r, buf, sizeof buf, &len, why, sizeof why) != PGCL_OK) {
            fprintf(stderr, "record_tool: sample %s: %s\n", SAMPLE_NAMES[i], why);
            return 1;
        }
        printf("%s ", SAMPLE_NAMES[i]);
        for (size_t k = 0; k < len; k++)
            printf("%02x", buf[k]);
        printf("\n");
    }
    return 0;
}

/* One typical decision of model m, item `item`, in both forms. */
typedef struct typical {
    char decision_id[PGCL_UUID_LEN + 1], request_id[PGCL_UUID_LEN + 1], item_id[32], trace_id[PGCL_TRACE_ID_LEN + 1];
    char input_sha_hex[65];
    float probs[2], *vector;
    uint16_t *input; /* (D) float16 */
    unsigned char input_sha[32], stored_digest[32];
    char *probs_json;
    pgcl_decision verdict;
    int label_index;
} typical;

static void make_typical(const pgcl_model *m, int item, const char *request_id, typical *t) {
    pgcl_uuid7(t->decision_id);
    snprintf(t->request_id, sizeof t->request_id, "%s", request_id);
    snprintf(t->item_id, sizeof t->item_id, "comment-%06d", item);
    pgcl_trace_id_new(t->trace_id);
    /* item 0, the one measured exactly, has fixed probabilities: its v2 leaf's texts have fixed lengths */
    float p1 = item == 0 ? 0.08765433f : (float)randombytes_uniform(1000001) / 1e6f;
    t->probs[0] = 1 - p1;
    t->probs[1] = p1;
    for (int k = 0; k < m->d; k++)
        t->vector[k] = ((float)randombytes_uniform(20001) - 10000.0f) / 4096.0f;
    float *z = malloc((size_t)m->D * sizeof *z);
    PGCL_ASSERT(z);
    for (int k = 0; k < m->D; k++)
        z[k] = ((float)randombytes_uniform(20001) - 10000.0f) / 8192.0f;
    pgcl_sha256(z, (size_t)m->D * sizeof *z, t->input_sha);
    pgcl_sha256_to_hex(t->input_sha, t->input_sha_hex);
    pgcl_f32_to_f16_array(z, t->input, (size_t)m->D);
    pgcl_sha256(t->input, (size_t)m->D * 2, t->stored_digest);
    free(z);
    free(t->probs_json);
    t->probs_json = pgcl_model_probabilities_json(m, t->probs);
    t->verdict = pgcl_model_decide(m, t->probs, &t->label_index);
}

static pgcl_decision_row typical_row(const pgcl_model *m, const typical *t) {
    return (pgcl_decision_row){
        .decision_id = t->decision_id, .request_id = t->request_id, .item_id = t->item_id, .model_name = m->name,
        .model_version = m->version, .model_sha256 = m->sha256, .label = m->labels[t->label_index],
        .label_index = t->label_index, .probabilities_json = t->probs_json, .has_toxicity = true,
        .toxicity = t->probs[1], .decision = pgcl_decision_str(t->verdict), .policy_json = m->policy_text,
        .has_thresholds = true, .t_review = m->policy.t_review, .t_block = m->policy.t_block, .vector = t->vector,
        .d = m->d, .input_sha256 = t->input_sha_hex, .latency_us = 1834, .input = t->input, .input_bytes = m->D * 2,
        .input_dtype = "f16", .input_digest = t->stored_digest, .trace_id = t->trace_id};
}

/* The record of a typical decision (policy_ref from the model's policy and labels). */
static size_t typical_record(const pgcl_model *m, const typical *t, unsigned char *out, size_t cap) {
    pgcl_record_text labels[2] = {{m->labels[0], strlen(m->labels[0])}, {m->labels[1], strlen(m->labels[1])}};
    pgcl_record_policy policy = {.n_labels = 2, .labels = labels,
                                 .policy_json = {m->policy_text, strlen(m->policy_text)}};
    pgcl_record r = {.kind = PGCL_RECORD_DECISION};
    pgcl_record_decision *d = &r.decision;
    char why[256];
    bool ok = pgcl_record_uuid_parse(t->decision_id, d->decision_id) &&
              pgcl_record_time_parse("2026-01-02T03:04:05.123456Z", &d->created_at_us) &&
              pgcl_record_hex_parse(t->trace_id, d->trace_id, 16) && pgcl_record_hex_parse(m->sha256, d->model_sha256, 32) &&
              pgcl_record_policy_ref(&policy, d->policy_ref, why, sizeof why) == PGCL_OK;
    PGCL_ASSERT(ok);
    d->has_trace_id = true;
    memcpy(d->input_sha256, t->input_sha, 32);
    d->task = PGCL_RECORD_TASK_BINARY;
    d->decision = (pgcl_record_verdict)t->verdict;
    d->policy_kind = PGCL_RECORD_POLICY_THRESHOLD;
    d->stored_dtype = PGCL_RECORD_INPUT_F16;
    d->label_index = (uint16_t)t->label_index;
    d->policy_label = (uint16_t)m->policy.label_index;
    d->t_review = m->policy.t_review;
    d->t_block = m->policy.t_block;
    d->probabilities = (pgcl_record_f32s){.n = 2, .native = t->probs};
    d->vector = (pgcl_record_f32s){.n = (uint32_t)m->d, .native = t->vector};
    d->latency_us = 1834;
    snprintf(d->request_id, sizeof d->request_id, "%s", t->request_id);
    snprintf(d->item_id, sizeof d->item_id, "%s", t->item_id);
    snprintf(d->model_name, sizeof d->model_name, "%s", m->name);
    snprintf(d->model_version, sizeof d->model_version, "%s", m->version);
    memcpy(d->stored_digest, t->stored_digest, 32);
    size_t len;
    pgcl_status st = pgcl_record_encode(&r, out, cap, &len, why, sizeof why);
    if (st != PGCL_OK) fprintf(stderr, "record_tool: typical record: %s\n", why);
    PGCL_ASSERT(st == PGCL_OK);
    return len;
}

/* The version-2 leaf data of the same decision as today's SQLite writer hashes it (seq 1). */
static size_t typical_v2_leaf(const pgcl_model *m, const typical *t) {
    pgcl_decision_row row = typical_row(m, t);
    pgcl_chain_value v[PGCL_CHAIN_DECISIONS_EXTENSION_COLUMN + PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS];
    int i = 0;
#define TEXT(s) (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_TEXT, .bytes = (s), .len = strlen(s)}
#define BLOB(p, n) (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_BLOB, .bytes = (p), .len = (n)}
#define INT(x) (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_INTEGER, .integer = (x)}
#define REAL(x) (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_REAL, .real = (x)}
#define NUL (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_NULL}
    v[i++] = INT(1);
    v[i++] = TEXT(row.decision_id);
    v[i++] = TEXT("2026-01-02T03:04:05.123456Z");
    v[i++] = TEXT(row.request_id);
    v[i++] = TEXT(row.item_id);
    v[i++] = TEXT(row.model_name);
    v[i++] = TEXT(row.model_version);
    v[i++] = TEXT(row.model_sha256);
    v[i++] = TEXT(row.label);
    v[i++] = INT(row.label_index);
    v[i++] = TEXT(row.probabilities_json);
    v[i++] = REAL(row.toxicity);
    v[i++] = TEXT(row.decision);
    v[i++] = TEXT(row.policy_json);
    v[i++] = REAL(row.t_review);
    v[i++] = REAL(row.t_block);
    v[i++] = BLOB(row.vector, (size_t)row.d * sizeof(float));
    v[i++] = TEXT(row.input_sha256);
    v[i++] = INT(row.latency_us);
    v[i++] = BLOB(row.input_digest, 32); /* the input's place: its SHA-256 */
    v[i++] = TEXT(row.input_dtype);
    v[i++] = BLOB(row.input_digest, 32); /* the recorded input_digest */
    v[i++] = TEXT(row.trace_id);
    v[i++] = NUL;
    v[i++] = NUL;
    v[i++] = NUL;
    unsigned char *data;
    size_t len;
    pgcl_chain_leaf_data_of_values(0, v, i, &data, &len);
    PGCL_ASSERT(data);
    free(data);
    return len;
}

/* One number of dbstat: SELECT <expr> FROM dbstat WHERE <where>. */
static double dbstat(sqlite3 *db, const char *expr, const char *where) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT coalesce(%s, 0) FROM dbstat WHERE %s", expr, where);
    sqlite3_stmt *s = NULL;
    double v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_double(s, 0);
    else fprintf(stderr, "record_tool: %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
    return v;
}

static int sizes(const char *model_dir) {
    char err[512];
    pgcl_model *m = NULL;
    if (pgcl_model_load(model_dir, "toxicity", "1", &m, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "record_tool: %s\n", err);
        return 1;
    }
    if (m->task != PGCL_TASK_BINARY || m->K != 2 || m->policy.kind != PGCL_POLICY_THRESHOLD) {
        fprintf(stderr, "record_tool: %s is not a binary model with a threshold policy\n", model_dir);
        pgcl_model_release(m);
        return 1;
    }
    char dir[] = "/tmp/pgcld-record-sizes-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/audit.db", dir);
    pgcl_audit_options o = {.path = path, .synchronous_full = false, .max_pending_rows = 100000};
    pgcl_audit *a = NULL;
    if (pgcl_audit_open(&o, &a, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "record_tool: %s\n", err);
        return 1;
    }
    typical *t = calloc(BATCH, sizeof *t);
    pgcl_decision_row *rows = calloc(BATCH, sizeof *rows);
    PGCL_ASSERT(t && rows);
    for (int i = 0; i < BATCH; i++) {
        t[i].vector = calloc((size_t)m->d, sizeof(float));
        t[i].input = calloc((size_t)m->D, sizeof(uint16_t));
        PGCL_ASSERT(t[i].vector && t[i].input);
    }
    unsigned char record[4096];
    size_t record_len = 0, leaf_len = 0;
    int status = 0;
    for (int done = 0; done < ROWS && !status; done += BATCH) {
        char request_id[PGCL_UUID_LEN + 1];
        pgcl_uuid7(request_id);
        for (int i = 0; i < BATCH; i++) {
            make_typical(m, done + i, request_id, &t[i]);
            rows[i] = typical_row(m, &t[i]);
        }
        if (done == 0) {
            record_len = typical_record(m, &t[0], record, sizeof record);
            leaf_len = typical_v2_leaf(m, &t[0]);
        }
        if (pgcl_audit_append(a, rows, BATCH, err, sizeof err) != PGCL_OK) {
            fprintf(stderr, "record_tool: append: %s\n", err);
            status = 1;
        }
    }
    pgcl_audit_close(a);
    sqlite3 *db = NULL;
    if (!status && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        const char *decision_indexes = "name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'decisions')";
        double n = ROWS;
        printf("record %zu\n", record_len);
        printf("v2_leaf %zu\n", leaf_len);
        printf("policy_json %zu\n", strlen(m->policy_text));
        printf("row_payload %.0f\n", dbstat(db, "sum(payload)", "name = 'decisions'") / n);
        printf("row_pages %.0f\n", dbstat(db, "sum(pgsize)", "name = 'decisions'") / n);
        printf("row_indexes %.0f\n", dbstat(db, "sum(pgsize)", decision_indexes) / n);
        printf("input_pages %.0f\n", dbstat(db, "sum(pgsize)", "name = 'decision_inputs'") / n);
        /* today's layout without the log's rows (migration 0012), which are measured apart */
        printf("all_but_inputs %.0f\n",
               dbstat(db, "sum(pgsize)", "name NOT IN ('decision_inputs', 'log_leaves', 'log_tile_roots')") / n);
        printf("log_pages %.0f\n", dbstat(db, "sum(pgsize)", "name IN ('log_leaves', 'log_tile_roots')") / n);
        printf("stored_input %d\n", m->D * 2);
    } else if (!status) {
        status = 1;
    }
    sqlite3_close(db);
    for (int i = 0; i < BATCH; i++) {
        free(t[i].vector);
        free(t[i].input);
        free(t[i].probs_json);
    }
    free(t);
    free(rows);
    static const char *const files[] = {"audit.db", "audit.db-wal", "audit.db-shm"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    if (rmdir(dir) != 0) status = 1;
    pgcl_model_release(m);
    return status;
}

int main(int argc, char **argv) {
    if (sodium_init() < 0) return 1;
    if (argc == 2 && strcmp(argv[1], "known-answers") == 0) return known_answers();
    if (argc == 3 && strcmp(argv[1], "sizes") == 0) return sizes(argv[2]);
    fprintf(stderr, "usage: record_tool known-answers | record_tool sizes MODEL_DIR\n");
    return 2;
}
