/* The PostgreSQL store's writer: one group's transaction (audit_pg_writer.c describes the whole).
 * The statements every group runs, prepared once per connection; the sender that runs statements
 * one at a time or pipelined; the log tree's right edge; the commit entry over the transaction's
 * leaves; the round trips of a group, in fast mode and in isolated mode. */
#include "audit_pg.h"
#include "audit_pg_writer_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "idempotency.h"
#include "ids.h"
#include "log.h"
#include "merkle.h"
#include "pg_array.h"
#include "pg_log.h"
#include "sha256.h"

/* ---- SQL ---- */

static const char COUNTERS_SQL[] =
    "UPDATE fleet_counters SET decisions = decisions + $1, admin_events = admin_events + $2,"
    " contests = contests + $3, resolutions = resolutions + $4, shadow_decisions = shadow_decisions + $5"
    " WHERE id = 1 RETURNING decisions, admin_events, contests, resolutions, shadow_decisions";
static const char GIVE_BACK_DECISIONS_SQL[] = "UPDATE fleet_counters SET decisions = decisions - $1 WHERE id = 1";
/* The same rows, one statement per table (fast mode; see "array parameters"): every parameter an
 * array with one element per row, text or bytea, cast to the column's type as a per-row text
 * parameter would be read. */
const char INSERT_DECISIONS_SQL[] =
    "INSERT INTO decisions (seq, decision_id, created_at, request_id, item_id, model_name,"
    " model_version, model_sha256, label, label_index, probabilities, toxicity, decision, policy,"
    " t_review, t_block, vector, input_sha256, latency_us, input_digest, input_dtype, trace_id, content_date,"
    " territorial_scope, content_language, writer_id, leaf_index) SELECT"
    " c1::bigint, c2, c3, c4, c5, c6, c7, c8, c9, c10::bigint, c11, c12::double precision, c13, c14,"
    " c15::double precision, c16::double precision, c17, c18, c19::bigint, c20, c21, c22, c23, c24, c25, c26,"
    " c27::bigint FROM"
    " unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],"
    " $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],"
    " $15::text[], $16::text[], $17::bytea[], $18::text[], $19::text[], $20::bytea[], $21::text[],"
    " $22::text[], $23::text[], $24::text[], $25::text[], $26::text[], $27::text[])"
    " AS u (c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19,"
    " c20, c21, c22, c23, c24, c25, c26, c27)";
const char INSERT_INPUTS_SQL[] =
    "INSERT INTO decision_inputs (decision_seq, input) SELECT c1::bigint, c2 FROM unnest($1::text[],"
    " $2::bytea[]) AS u (c1, c2)";
const char INSERT_SHADOWS_SQL[] =
    "INSERT INTO shadow_decisions (seq, decision_id, created_at, model_name, primary_version,"
    " shadow_version, shadow_sha256, primary_label, shadow_label, primary_decision, shadow_decision,"
    " primary_score, shadow_score, probabilities) SELECT c1::bigint, c2, c3, c4, c5, c6, c7, c8, c9,"
    " c10, c11, c12::double precision, c13::double precision, c14 FROM unnest($1::text[],"
    " $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],"
    " $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[]) AS u (c1, c2, c3,"
    " c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14)";
static const char IDEM_LIVE_SQL[] =
    "SELECT 1 FROM idempotency_keys WHERE scope = $1 AND idem_key = $2 AND expires_at > $3";
static const char IDEM_EXPIRE_SQL[] =
    "DELETE FROM idempotency_keys WHERE (scope, idem_key) IN"
    " (SELECT scope, idem_key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT 100)";
/* An expired key of the same (scope, key) is replaced. A live one was ruled out after the lock; were
 * one there all the same, the plain INSERT fails (unique violation) and the request with it, instead
 * of committing rows that its stored answer does not name. */
const char IDEM_DROP_EXPIRED_SQL[] =
    "DELETE FROM idempotency_keys WHERE scope = $1 AND idem_key = $2 AND expires_at <= $3";
const char IDEM_STORE_SQL[] =
    "INSERT INTO idempotency_keys (scope, idem_key, body_sha256, request_id, answer, created_at, expires_at,"
    " request_sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
static const char INSERT_COMMIT_SQL[] =
    "INSERT INTO audit_chain (writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count, leaves)"
    " VALUES ($1, $2, 'commit', $3, $4, $5, $6, $3, $7)";
static const char INSERT_RUN_SQL[] =
    "INSERT INTO audit_chain_runs (kind, first_row_seq, n, writer_id, entry_seq, first_leaf)"
    " VALUES ($1, $2, $3, $4, $5, $6)";
static const char INSERT_NODE_SQL[] =
    "INSERT INTO audit_log_nodes (writer_id, level, idx, hash) VALUES ($1, $2, $3, $4)";
static const char LAST_STAMP_SQL[] = "SELECT max(created_at) FROM decisions";
/* The statements of every group, prepared once per connection (pgw_prepare_statements, again after a
 * reconnection) and then run by name: the server parses and plans them once, not once per group.
 * Their parameter types are inferred as for the same text run unprepared (the isolated mode's and
 * the connection's statements), so the stored values are the same. */
static const struct {
    const char *name, *sql;
} PREPARED[] = {
    {"pgcld_counters", COUNTERS_SQL},
    {"pgcld_latest", LAST_STAMP_SQL},
    {"pgcld_idem_live", IDEM_LIVE_SQL},
    {"pgcld_decisions", INSERT_DECISIONS_SQL},
    {"pgcld_inputs", INSERT_INPUTS_SQL},
    {"pgcld_shadows", INSERT_SHADOWS_SQL},
    {"pgcld_idem_drop", IDEM_DROP_EXPIRED_SQL},
    {"pgcld_idem_store", IDEM_STORE_SQL},
    {"pgcld_idem_expire", IDEM_EXPIRE_SQL},
    {"pgcld_commit", INSERT_COMMIT_SQL},
    {"pgcld_run", INSERT_RUN_SQL},
    {"pgcld_node", INSERT_NODE_SQL},
};
enum { N_PREPARED = (int)(sizeof PREPARED / sizeof PREPARED[0]) };

/* The name sql was prepared under (compared by address: the constants above), or NULL. */
static const char *prepared_name(const char *sql) {
    for (int i = 0; i < N_PREPARED; i++)
        if (PREPARED[i].sql == sql) return PREPARED[i].name;
    return NULL;
}

/* Every job of the batch not already failed by itself (its own rule, a taken key) fails with st. */
void pgw_fail_jobs(pg_job *batch, pgcl_status st, const char *err) {
    for (pg_job *j = batch; j; j = j->next) {
        if (j->status != PGCL_OK && j->status != PGCL_ERR_DB) continue;
        j->status = st;
        snprintf(j->err, ERR_CAP, "%s", err);
    }
}


static void sender_fail(sender *s, const char *what, const PGresult *res) {
    if (s->st != PGCL_OK) return;
    s->st = PGCL_ERR_DB;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !msg[0]) msg = PQerrorMessage(s->conn);
    snprintf(s->err, ERR_CAP, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
}

bool pgw_sender_start(sender *s, const pgcl_pg_writer *w, bool pipelined) {
    PGconn *conn = w->conn;
    *s = (sender){.conn = conn, .pipelined = pipelined, .prepared = w->prepared};
    if (pipelined && !PQenterPipelineMode(conn)) {
        s->pipelined = false;
        sender_fail(s, "pipeline mode", NULL);
        return false;
    }
    return true;
}

/* Reads the results of the statements sent since the last sync, through the sync's own result. */
static void sender_drain(sender *s) {
    if (!PQpipelineSync(s->conn)) {
        sender_fail(s, "pipeline sync", NULL);
        s->n_unread = 0;
        return;
    }
    int read = 0, nulls = 0;
    for (;;) {
        PGresult *res = PQgetResult(s->conn);
        if (!res) {
            /* the end of one statement's results; twice in a row: nothing more will come */
            if (PQstatus(s->conn) != CONNECTION_OK || ++nulls > 1) {
                sender_fail(s, "connection lost", NULL);
                break;
            }
            continue;
        }
        nulls = 0;
        ExecStatusType rs = PQresultStatus(res);
        if (rs == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            break;
        }
        bool ok = rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK;
        if (!ok && rs != PGRES_PIPELINE_ABORTED) sender_fail(s, read < s->n_unread ? s->whats[read] : "statement", res);
        if (!ok && rs == PGRES_PIPELINE_ABORTED && s->st == PGCL_OK) sender_fail(s, "pipeline aborted", res);
        if (ok && read < s->n_unread && s->keeps[read]) {
            *s->keeps[read] = res;
        } else {
            PQclear(res);
        }
        read++;
    }
    s->n_unread = 0;
}


/* Runs (or sends) one statement with parameters: values[i] text unless binary_len[i] >= 0 (then
 * binary_len[i] bytes of bytea). */
void pgw_sender_send(sender *s, const char *what, const char *sql, int n, const char *const *values,
                        const int *binary_len, PGresult **keep) {
    if (s->st != PGCL_OK) return;
    int lengths[SENDER_MAX_PARAMS] = {0}, formats[SENDER_MAX_PARAMS] = {0};
    PGCL_ASSERT(n <= SENDER_MAX_PARAMS);
    for (int i = 0; i < n; i++) {
        if (binary_len && binary_len[i] >= 0) {
            lengths[i] = binary_len[i];
            formats[i] = 1;
        }
    }
    const char *name = s->prepared ? prepared_name(sql) : NULL;
    if (!s->pipelined) {
        PGresult *res = name ? PQexecPrepared(s->conn, name, n, values, lengths, formats, 0)
                             : PQexecParams(s->conn, sql, n, NULL, values, lengths, formats, 0);
        ExecStatusType rs = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
            sender_fail(s, what, res);
            PQclear(res);
        } else if (keep) {
            *keep = res;
        } else {
            PQclear(res);
        }
        return;
    }
    PGCL_ASSERT(s->n_unread < PIPE_CHUNK);
    if (name ? !PQsendQueryPrepared(s->conn, name, n, values, lengths, formats, 0)
             : !PQsendQueryParams(s->conn, sql, n, NULL, values, lengths, formats, 0)) {
        sender_fail(s, what, NULL);
        return;
    }
    s->whats[s->n_unread] = what;
    s->keeps[s->n_unread++] = keep;
    if (s->n_unread >= PIPE_CHUNK) sender_drain(s);
}

/* Reads what is left and leaves pipeline mode; returns the sender's status. */
pgcl_status pgw_sender_finish(sender *s) {
    if (s->pipelined) {
        if (s->n_unread > 0 || s->st == PGCL_OK) sender_drain(s);
        if (PQstatus(s->conn) == CONNECTION_OK) PQexitPipelineMode(s->conn);
    }
    return s->st;
}

/* ---- the log tree's right edge ---- */

/* Appends entry seq (= size + 1) with hash `entry`; the nodes it completes are sent with s. */
void pgw_edge_append(log_edge *e, const char *writer_id, int64_t seq, const pgcl_merkle_hash *entry, sender *s) {
    PGCL_ASSERT(seq == e->size + 1);
    uint64_t leaf = (uint64_t)e->size;
    pgcl_merkle_hash leaf_hash = pgcl_merkle_leaf_hash(entry->b, sizeof entry->b);
    pgcl_merkle_stack_push(&e->stack, &leaf_hash);
    int level;
    while (pgcl_merkle_stack_merge(&e->stack, &level)) {
        if (s) {
            char lv[24], idx[24];
            fmt_i64(lv, level);
            fmt_i64(idx, (int64_t)(leaf >> level));
            const char *v[] = {writer_id, lv, idx, (const char *)e->stack.node[e->stack.top - 1].b};
            const int bin[] = {-1, -1, -1, PGCL_MERKLE_HASH_BYTES};
            pgw_sender_send(s, "audit_log_nodes", INSERT_NODE_SQL, 4, v, bin, NULL);
        }
    }
    e->size = seq;
}

/* Prepares sql (one of PREPARED) on the writer's connection under its name. */
static pgcl_status prepare_one(pgcl_pg_writer *w, const char *sql, int *count, char *err, int cap) {
    const char *name = prepared_name(sql);
    PGCL_ASSERT(name);
    PGresult *res = PQprepare(w->conn, name, sql, 0, NULL);
    bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(w->conn);
        pgcl_errorf(err, cap, "prepare %s: %.*s", name, (int)strcspn(msg, "\n"), msg);
    }
    PQclear(res);
    (*count)++;
    return ok ? PGCL_OK : PGCL_ERR_DB;
}

/* Prepares every statement of PREPARED on the writer's connection (the schema is there: the chain
 * was read). Each SQL constant is named here, so that test_sql_params sees constants. */
pgcl_status pgw_prepare_statements(pgcl_pg_writer *w, char *err, int cap) {
    int n = 0;
    pgcl_status st = prepare_one(w, COUNTERS_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, LAST_STAMP_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, IDEM_LIVE_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_DECISIONS_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_INPUTS_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_SHADOWS_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, IDEM_DROP_EXPIRED_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, IDEM_STORE_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, IDEM_EXPIRE_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_COMMIT_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_RUN_SQL, &n, err, cap);
    if (st == PGCL_OK) st = prepare_one(w, INSERT_NODE_SQL, &n, err, cap);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(n == N_PREPARED); /* a statement of PREPARED not prepared would fail every group */
    w->prepared = true;
    return PGCL_OK;
}

/* The commit entry over the transaction's leaves, its runs and log nodes; *edge advances (a copy of
 * the writer's, kept only if COMMIT succeeds). Nothing when no event was chained. */
static pgcl_status send_chain_entry(sender *s, pgcl_pg_writer *w, log_edge *edge, char hash[PGCL_CHAIN_HEX_LEN + 1]) {
    if (w->n_leaves == 0) return PGCL_OK;
    if (w->n_leaves > w->cap_packed) {
        pgcl_merkle_hash *grown = realloc(w->packed, w->n_leaves * sizeof *grown);
        if (!grown) return PGCL_ERR_NOMEM;
        w->packed = grown;
        w->cap_packed = w->n_leaves;
    }
    for (size_t i = 0; i < w->n_leaves; i++)
        w->packed[i] = w->leaves[i].leaf;
    pgcl_merkle_hash root = pgcl_merkle_root(w->packed, w->n_leaves);
    char root_hex[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_merkle_to_hex(&root, root_hex);
    int64_t seq = w->head_seq + 1, leaf_count = (int64_t)w->n_leaves;
    pgcl_chain_entry_hash(seq, PGCL_CHAIN_COMMIT_KIND, strlen(PGCL_CHAIN_COMMIT_KIND), leaf_count, root_hex,
                          PGCL_CHAIN_HEX_LEN, w->head_hash, PGCL_CHAIN_HEX_LEN, hash);
    const char *id = w->s->writer_id;
    char seq_t[24], count_t[24];
    fmt_i64(seq_t, seq);
    fmt_i64(count_t, leaf_count);
    const char *v[] = {id, seq_t, count_t, root_hex, w->head_hash, hash, (const char *)w->packed};
    const int bin[] = {-1, -1, -1, -1, -1, -1, (int)(w->n_leaves * sizeof *w->packed)};
    pgw_sender_send(s, "audit_chain commit entry", INSERT_COMMIT_SQL, 7, v, bin, NULL);
    /* runs: maximal stretches of consecutive seqs of one table */
    size_t start = 0;
    for (size_t i = 1; i <= w->n_leaves; i++) {
        const pending_leaf *first = &w->leaves[start];
        if (i < w->n_leaves && w->leaves[i].table == first->table &&
            w->leaves[i].row_seq == first->row_seq + (int64_t)(i - start))
            continue;
        char row_t[24], n_t[24], leaf_t[24];
        fmt_i64(row_t, first->row_seq);
        fmt_i64(n_t, (int64_t)(i - start));
        fmt_i64(leaf_t, (int64_t)start);
        const char *rv[] = {pgcl_chain_tables[first->table].name, row_t, n_t, id, seq_t, leaf_t};
        pgw_sender_send(s, "audit_chain_runs", INSERT_RUN_SQL, 6, rv, NULL, NULL);
        start = i;
    }
    pgcl_merkle_hash entry;
    PGCL_ASSERT(pgcl_merkle_from_hex(hash, &entry));
    pgw_edge_append(edge, id, seq, &entry, s);
    return PGCL_OK;
}

/* ---- one group ---- */

/* The transaction's timestamp, taken once the counters' lock is held: now, but never before this
 * writer's previous one nor before fleet_latest (the newest created_at any writer committed, NULL
 * for none), so that created_at follows seq across the whole fleet even between hosts whose clocks
 * differ a little (time-range reads rely on it). */
static void stamp(pgcl_pg_writer *w, const char *fleet_latest, char out[PGCL_TIMESTAMP_LEN + 1]) {
    pgcl_timestamp_now(out);
    if (strcmp(out, w->last_stamp) < 0) memcpy(out, w->last_stamp, sizeof w->last_stamp);
    if (fleet_latest && strlen(fleet_latest) == PGCL_TIMESTAMP_LEN && strcmp(out, fleet_latest) < 0)
        memcpy(out, fleet_latest, PGCL_TIMESTAMP_LEN + 1);
    memcpy(w->last_stamp, out, sizeof w->last_stamp);
}


/* After a failure: a connection that is gone is dropped; otherwise the transaction is rolled back.
 * Every job not already failed by itself fails with err. */
static void abandon_group(pgcl_pg_writer *w, pg_job *batch, const char *err) {
    if (!pgcl_pg_broken(w->conn) && PQpipelineStatus(w->conn) != PQ_PIPELINE_OFF) PQexitPipelineMode(w->conn);
    if (pgcl_pg_broken(w->conn) || PQpipelineStatus(w->conn) != PQ_PIPELINE_OFF) {
        pgw_lose_connection(w, err); /* gone, or left with results nobody will read: a new one */
    } else {
        PQclear(PQexec(w->conn, "ROLLBACK"));
        if (pgcl_pg_broken(w->conn)) pgw_lose_connection(w, err);
    }
    pgw_fail_jobs(batch, PGCL_ERR_DB, err);
}

/* Runs a savepoint statement; false (the group is abandoned by the caller) when it fails. */
static bool savepoint(pgcl_pg_writer *w, const char *sql, char *err, int cap) {
    return pgcl_pg_exec(w->conn, "savepoint", sql, 0, NULL, err, cap) == PGCL_OK;
}

/* Round trip 1: BEGIN, the counters' lock (allocating `add` seqs of each table), the newest
 * created_at, the group's keys (live at `now`); then the transaction's timestamp in t->now. */
static bool open_group(pgcl_pg_writer *w, pgcl_pg_txn *t, pg_job *batch, const int64_t add[N_COUNTERS], const char *now,
                       char *err, int cap) {
    sender s;
    PGresult *counters = NULL, *latest = NULL;
    if (pgw_sender_start(&s, w, true)) {
        pgw_sender_send(&s, "begin", "BEGIN", 0, NULL, NULL, NULL);
        char addv[N_COUNTERS][24];
        const char *v[N_COUNTERS];
        for (int c = 0; c < N_COUNTERS; c++) {
            fmt_i64(addv[c], add[c]);
            v[c] = addv[c];
        }
        pgw_sender_send(&s, "fleet_counters", COUNTERS_SQL, N_COUNTERS, v, NULL, &counters);
        pgw_sender_send(&s, "newest timestamp", LAST_STAMP_SQL, 0, NULL, NULL, &latest);
        for (pg_job *j = batch; j; j = j->next) {
            if (j->kind != JOB_DECISIONS || !j->idem) continue;
            const char *kv[] = {j->idem->scope, j->idem->key, now};
            pgw_sender_send(&s, "idempotency key lookup", IDEM_LIVE_SQL, 3, kv, NULL, &j->idem_live);
        }
    }
    pgcl_status st = pgw_sender_finish(&s);
    bool ok = st == PGCL_OK && counters && PQntuples(counters) == 1 && latest && PQntuples(latest) == 1;
    if (ok) {
        stamp(w, pgcl_pg_text(latest, 0, 0), t->now);
        for (int c = 0; c < N_COUNTERS; c++) {
            int64_t last = pgcl_pg_int(counters, 0, c);
            t->next[c] = last - add[c] + 1;
            t->end[c] = last + 1;
        }
    } else {
        snprintf(err, (size_t)cap, "%s", st != PGCL_OK ? s.err : "fleet_counters: its row is missing");
    }
    PQclear(counters);
    PQclear(latest);
    return ok;
}

/* Marks the requests whose Idempotency-Key is live already (or repeated in the group) as taken. */
static int64_t mark_taken_keys(pg_job *batch) {
    int64_t rows = 0;
    for (pg_job *j = batch; j; j = j->next) {
        if (!j->idem_live) continue;
        bool taken = PQntuples(j->idem_live) > 0;
        PQclear(j->idem_live);
        j->idem_live = NULL;
        for (pg_job *k = batch; k != j && !taken; k = k->next)
            taken = k->kind == JOB_DECISIONS && k->idem && !k->idem_taken &&
                    strcmp(k->idem->scope, j->idem->scope) == 0 && strcmp(k->idem->key, j->idem->key) == 0;
        if (!taken) continue;
        j->idem_taken = true;
        j->status = PGCL_ERR_DUPLICATE;
        snprintf(j->err, ERR_CAP, "idempotency key %.200s was answered meanwhile by another request", j->idem->key);
        rows += j->n;
    }
    return rows;
}

/* The jobs of other files, each in its own savepoint; false when the group must be abandoned. */
static bool run_fn_jobs(pgcl_pg_writer *w, pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
    for (pg_job *j = batch; j; j = j->next) {
        if (j->kind != JOB_FN) continue;
        if (!savepoint(w, "SAVEPOINT job", err, cap)) return false;
        size_t mark = w->n_leaves, log_mark = pgcl_pg_log_mark(w->log);
        j->status = j->fn(t, j->ctx, j->err, ERR_CAP);
        if (pgcl_pg_broken(w->conn)) {
            snprintf(err, (size_t)cap, "%s", j->err);
            return false;
        }
        if (j->status == PGCL_OK) {
            if (!savepoint(w, "RELEASE SAVEPOINT job", err, cap)) return false;
        } else {
            if (!savepoint(w, "ROLLBACK TO SAVEPOINT job", err, cap) ||
                !savepoint(w, "RELEASE SAVEPOINT job", err, cap))
                return false;
            w->n_leaves = mark;
            pgcl_pg_log_rewind(w->log, log_mark);
        }
    }
    return true;
}

/* Isolated mode: each decisions / shadows job alone in a savepoint, its seqs allocated inside it. */
static bool run_row_jobs_isolated(pgcl_pg_writer *w, pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
    for (pg_job *j = batch; j; j = j->next) {
        if (j->kind == JOB_FN || j->idem_taken) continue;
        if (!savepoint(w, "SAVEPOINT job", err, cap)) return false;
        size_t mark = w->n_leaves, log_mark = pgcl_pg_log_mark(w->log);
        sender s;
        pgw_sender_start(&s, w, false);
        pgcl_status st = pgw_send_job_rows(&s, t, j, false, j->err, ERR_CAP);
        pgcl_status sent = pgw_sender_finish(&s);
        if (st == PGCL_OK && sent != PGCL_OK) {
            st = sent;
            snprintf(j->err, ERR_CAP, "%s", s.err);
        }
        if (pgcl_pg_broken(w->conn)) {
            snprintf(err, (size_t)cap, "%s", j->err);
            return false;
        }
        j->status = st;
        if (st == PGCL_OK) {
            if (!savepoint(w, "RELEASE SAVEPOINT job", err, cap)) return false;
        } else {
            if (!savepoint(w, "ROLLBACK TO SAVEPOINT job", err, cap) ||
                !savepoint(w, "RELEASE SAVEPOINT job", err, cap))
                return false;
            w->n_leaves = mark;
            pgcl_pg_log_rewind(w->log, log_mark);
        }
    }
    return true;
}

/* The log's statements of the sealed commit (pg_log.h), sent with s; false: out of memory. */
static bool send_log(sender *s, pgcl_pg_writer *w) {
    pgcl_pg_log_stmt stmt;
    bool oom = false;
    for (int i = 0; pgcl_pg_log_statement(w->log, i, &stmt, &oom); i++)
        pgw_sender_send(s, stmt.what, stmt.sql, stmt.n, stmt.values, stmt.binary_len, NULL);
    return !oom;
}

/* One transaction for the batch. Fast mode sends every row in one pipeline; a failure there is
 * answered by GROUP_RETRY_ISOLATED (the transaction rolled back, nothing acknowledged). */
group_outcome pgw_run_group(pgcl_pg_writer *w, pg_job *batch, bool isolated) {
    char err[ERR_CAP] = "";
    pgcl_pg_txn t = {.w = w};
    char now[PGCL_TIMESTAMP_LEN + 1]; /* before the lock: when the group's keys must be live */
    pgcl_timestamp_now(now);
    w->n_leaves = 0;
    pgcl_pg_log_begin(w->log);
    int64_t add[N_COUNTERS] = {0};
    for (pg_job *j = batch; j; j = j->next) {
        j->status = PGCL_OK;
        j->err[0] = 0;
        j->idem_taken = false;
        j->idem_live = NULL;
        if (isolated) continue;
        if (j->kind == JOB_DECISIONS) add[T_DECISIONS] += j->n;
        if (j->kind == JOB_SHADOWS) add[T_SHADOWS] += j->n;
    }
    if (!open_group(w, &t, batch, add, now, err, sizeof err)) {
        for (pg_job *j = batch; j; j = j->next) {
            PQclear(j->idem_live);
            j->idem_live = NULL;
        }
        abandon_group(w, batch, err);
        return GROUP_DONE;
    }
    int64_t taken_rows = mark_taken_keys(batch);
    if (taken_rows > 0 && !isolated) {
        /* the taken requests' seqs go back: the others' stay contiguous */
        char n_t[24];
        fmt_i64(n_t, taken_rows);
        const char *v[] = {n_t};
        if (pgcl_pg_exec(w->conn, "fleet_counters", GIVE_BACK_DECISIONS_SQL, 1, v, err, sizeof err) != PGCL_OK) {
            abandon_group(w, batch, err);
            return GROUP_DONE;
        }
        t.end[T_DECISIONS] -= taken_rows;
    }
    if (!run_fn_jobs(w, &t, batch, err, sizeof err) ||
        (isolated && !run_row_jobs_isolated(w, &t, batch, err, sizeof err))) {
        abandon_group(w, batch, err);
        return GROUP_DONE;
    }
    /* the log: the fast mode's decisions, then the commit's leaves and tiles sealed (this may read
     * the log's rows: no pipeline is open) */
    pgcl_status logged = isolated ? PGCL_OK : pgw_log_decision_rows(&t, batch, err, sizeof err);
    if (logged == PGCL_OK) logged = pgcl_pg_log_seal(w->log, w->conn, err, sizeof err);
    if (logged != PGCL_OK) {
        bool retry = !isolated && batch->next && !pgcl_pg_broken(w->conn);
        abandon_group(w, batch, err);
        return retry ? GROUP_RETRY_ISOLATED : GROUP_DONE;
    }
    sender s;
    if (!pgw_sender_start(&s, w, true)) {
        abandon_group(w, batch, s.err);
        return GROUP_DONE;
    }
    bool any_key = false;
    for (pg_job *j = batch; j; j = j->next)
        if (j->kind == JOB_DECISIONS && j->idem && !j->idem_taken) any_key = true;
    if (!isolated && pgw_send_rows_batched(&s, &t, batch, err, sizeof err) != PGCL_OK) {
        pgw_sender_finish(&s);
        abandon_group(w, batch, err);
        return GROUP_DONE;
    }
    /* every seq the counters handed this group is used: a seq left over would be a gap forever */
    PGCL_ASSERT(t.next[T_DECISIONS] == t.end[T_DECISIONS] && t.next[T_SHADOWS] == t.end[T_SHADOWS]);
    if (any_key && !isolated) {
        const char *v[] = {t.now};
        pgw_sender_send(&s, "expired idempotency keys", IDEM_EXPIRE_SQL, 1, v, NULL, NULL);
    }
    log_edge edge = w->edge;
    char hash[PGCL_CHAIN_HEX_LEN + 1] = "";
    if (send_chain_entry(&s, w, &edge, hash) != PGCL_OK) {
        pgw_sender_finish(&s);
        abandon_group(w, batch, "audit chain: out of memory");
        return GROUP_DONE;
    }
    if (!send_log(&s, w)) {
        pgw_sender_finish(&s);
        abandon_group(w, batch, "log: out of memory");
        return GROUP_DONE;
    }
    PGresult *commit = NULL;
    pgw_sender_send(&s, "commit", "COMMIT", 0, NULL, NULL, &commit);
    pgcl_status st = pgw_sender_finish(&s);
    bool committed = st == PGCL_OK && commit && strcmp(PQcmdStatus(commit), "COMMIT") == 0;
    PQclear(commit);
    if (!committed) {
        if (st == PGCL_OK) snprintf(s.err, ERR_CAP, "commit: the transaction was rolled back");
        bool retry = !isolated && batch->next && !pgcl_pg_broken(w->conn);
        abandon_group(w, batch, s.err);
        return retry ? GROUP_RETRY_ISOLATED : GROUP_DONE;
    }
    pgcl_audit_note_commit(&w->s->base);
    pgcl_pg_log_committed(w->log);
    if (hash[0]) {
        w->head_seq = edge.size;
        memcpy(w->head_hash, hash, sizeof hash);
        w->edge = edge;
    }
    return GROUP_DONE;
}

