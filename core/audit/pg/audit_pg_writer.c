/* The PostgreSQL store's writer (see audit_pg.h): one thread, its own connection, group commit.
 *
 * A group is every job queued when the writer looks: one transaction, sent in libpq pipeline mode
 * (bytea parameters in binary), in two round trips:
 *   1. BEGIN; UPDATE fleet_counters ... RETURNING (allocates the group's seqs of every event table
 *      and locks the counters' one row until COMMIT, so commit order is seq order fleet-wide and the
 *      reviewers' rules hold across replicas); the newest created_at (the transaction's timestamp
 *      is never earlier: created_at follows seq fleet-wide); one SELECT per Idempotency-Key of the
 *      group (a live key another replica committed takes its request out of the group: its rows are
 *      not written and it ends with PGCL_ERR_DUPLICATE, on which the server replays the stored
 *      answer; its seqs go back to the counters in the same transaction).
 *   2. the rows (decisions + decision_inputs, shadow_decisions: one INSERT ... SELECT FROM unnest
 *      per table for the whole group, its parameters binary arrays; idempotency_keys), the chain
 *      entry, its runs and log tree nodes, COMMIT.
 * Jobs of other files (pgcl_pg_run) run between the two, synchronously, each in a savepoint. Every
 * answer leaves after COMMIT returned; with synchronous_commit on (the server's default) the rows
 * are then durable on the server (and on a synchronous standby when one is configured).
 *
 * When a statement of round trip 2 fails the transaction is rolled back and the group runs again
 * with every job in its own savepoint, its seqs allocated inside it (so a failed job leaves no gap
 * in any table's seqs), its rows one statement each (the naive path beside the arrays): only the
 * job that failed fails. Jobs may therefore run twice (as in the SQLite
 * store): a job callback writes only through the transaction and into its own context.
 *
 * The chain (encoding version 2, one chain per writer; docs/audit.md, "PostgreSQL store"):
 *   entry 1      kind 'genesis', row_seq 0, payload_sha256 = hex SHA-256 of the TEXT value
 *                encoding of the writer id (pgcl_chain_text_value: tag 3, 4-byte big-endian
 *                length, bytes), prev_hash = 64 zeros, hash = pgcl_chain_entry_hash(1, "genesis",
 *                0, payload, prev_hash); leaf_count and leaves NULL.
 *   entry k >= 2 one per write transaction that chained at least one event: kind 'commit', row_seq
 *                = leaf_count = the number of leaves, payload_sha256 = hex RFC 9162 Merkle root over
 *                the leaves in order, prev_hash = entry k-1's hash, hash = pgcl_chain_entry_hash(k,
 *                "commit", leaf_count, root, prev_hash), leaves = the 32-byte leaf hashes
 *                concatenated.
 *   leaves       a decision: pgcl_chain_decision_leaf of the values as bound; admin events,
 *                contests, resolutions: pgcl_chain_leaf_of_values of the columns in
 *                pgcl_chain_tables[t].select_sql's order (pgcl_pg_txn_chain). Shadow decisions are
 *                not chained.
 *   runs         audit_chain_runs: one row per maximal run of consecutive seqs of one kind among an
 *                entry's leaves (kind, first_row_seq, n, writer_id, entry_seq, first_leaf).
 *   log tree     audit_log_nodes keyed by writer_id, as core/audit/log_tree.h: leaf i =
 *                SHA-256(0x00 ‖ entry i+1's hash), node (L, j) stored by the transaction that
 *                appends the entry completing it. The writer keeps the right edge (one node per set
 *                bit of the size) in memory, read back at (re)connection.
 *
 * Faults: a lost connection fails the group (PGCL_ERR_DB: 503 audit_unavailable), makes the store
 * unhealthy (/readyz 503) and is replaced by the writer itself, with backoff: a new connection,
 * the writer id's lock again, and the chain head and log edge read again from the database (a
 * COMMIT whose answer was lost may or may not have landed). While the database is down, a group
 * fails at once instead of waiting. A connection the server closed while the writer was idle (a
 * restart) is noticed within IDLE_CHECK_MS, or before the next group, without a round trip, and
 * replaced the same way. Nothing is acknowledged before its COMMIT returned. The
 * session's idle_in_transaction_session_timeout and lock_timeout (10 s) keep a stalled replica from
 * holding the fleet's counters lock, and this writer from waiting on one forever. */
#include "audit_pg.h"

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

#define ERR_CAP 512
#define PIPE_CHUNK 256         /* statements sent before the pipeline is synced and read */
#define RECONNECT_FIRST_MS 100 /* the reconnection backoff: doubles up to RECONNECT_MAX_MS */
#define RECONNECT_MAX_MS 2000
#define PROBE_INTERVAL_MS 1000 /* an unhealthy, idle writer's probe write */
#define LOCK_RETRY_MS 100      /* between tries of the writer id's lock at start */
#define IDLE_CHECK_MS 1000     /* an idle, healthy writer looks at its connection this often */

/* fleet_counters' columns, in the order of COUNTERS_SQL's parameters and RETURNING. The first four
 * are also pgcl_chain_tables' order. */
enum { T_DECISIONS, T_ADMIN_EVENTS, T_CONTESTS, T_RESOLUTIONS, T_SHADOWS, N_COUNTERS };
static const char *const COUNTER_NAMES[N_COUNTERS] = {"decisions", "admin_events", "contests", "resolutions",
                                                      "shadow_decisions"};

/* ---- SQL ---- */

static const char COUNTERS_SQL[] =
    "UPDATE fleet_counters SET decisions = decisions + $1, admin_events = admin_events + $2,"
    " contests = contests + $3, resolutions = resolutions + $4, shadow_decisions = shadow_decisions + $5"
    " WHERE id = 1 RETURNING decisions, admin_events, contests, resolutions, shadow_decisions";
/* One table's seqs, inside the group's transaction (the row is already locked). */
static const char *const TAKE_SEQS_SQL[N_COUNTERS] = {
    "UPDATE fleet_counters SET decisions = decisions + $1 WHERE id = 1 RETURNING decisions",
    "UPDATE fleet_counters SET admin_events = admin_events + $1 WHERE id = 1 RETURNING admin_events",
    "UPDATE fleet_counters SET contests = contests + $1 WHERE id = 1 RETURNING contests",
    "UPDATE fleet_counters SET resolutions = resolutions + $1 WHERE id = 1 RETURNING resolutions",
    "UPDATE fleet_counters SET shadow_decisions = shadow_decisions + $1 WHERE id = 1 RETURNING shadow_decisions",
};
static const char GIVE_BACK_DECISIONS_SQL[] = "UPDATE fleet_counters SET decisions = decisions - $1 WHERE id = 1";
static const char INSERT_DECISION_SQL[] =
    "INSERT INTO decisions (seq, decision_id, created_at, request_id, item_id, model_name, model_version,"
    " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block, vector,"
    " input_sha256, latency_us, input_digest, input_dtype, trace_id, content_date, territorial_scope,"
    " content_language, writer_id, leaf_index) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
    " $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)";
static const char INSERT_INPUT_SQL[] = "INSERT INTO decision_inputs (decision_seq, input) VALUES ($1, $2)";
static const char INSERT_SHADOW_SQL[] =
    "INSERT INTO shadow_decisions (seq, decision_id, created_at, model_name, primary_version, shadow_version,"
    " shadow_sha256, primary_label, shadow_label, primary_decision, shadow_decision, primary_score, shadow_score,"
    " probabilities) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
/* The same rows, one statement per table (fast mode; see "array parameters"): every parameter an
 * array with one element per row, text or bytea, cast to the column's type as a per-row text
 * parameter would be read. */
static const char INSERT_DECISIONS_SQL[] =
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
static const char INSERT_INPUTS_SQL[] =
    "INSERT INTO decision_inputs (decision_seq, input) SELECT c1::bigint, c2 FROM unnest($1::text[],"
    " $2::bytea[]) AS u (c1, c2)";
static const char INSERT_SHADOWS_SQL[] =
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
static const char IDEM_DROP_EXPIRED_SQL[] =
    "DELETE FROM idempotency_keys WHERE scope = $1 AND idem_key = $2 AND expires_at <= $3";
static const char IDEM_STORE_SQL[] =
    "INSERT INTO idempotency_keys (scope, idem_key, body_sha256, request_id, answer, created_at, expires_at,"
    " request_sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
static const char INSERT_COMMIT_SQL[] =
    "INSERT INTO audit_chain (writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash, leaf_count, leaves)"
    " VALUES ($1, $2, 'commit', $3, $4, $5, $6, $3, $7)";
static const char INSERT_GENESIS_SQL[] =
    "INSERT INTO audit_chain (writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash)"
    " VALUES ($1, 1, 'genesis', 0, $2, $3, $4)";
static const char INSERT_RUN_SQL[] =
    "INSERT INTO audit_chain_runs (kind, first_row_seq, n, writer_id, entry_seq, first_leaf)"
    " VALUES ($1, $2, $3, $4, $5, $6)";
static const char INSERT_NODE_SQL[] =
    "INSERT INTO audit_log_nodes (writer_id, level, idx, hash) VALUES ($1, $2, $3, $4)";
static const char LOCK_SQL[] = "SELECT pg_try_advisory_lock($1::int, hashtext($2))";
/* The writer's session: a transaction of this writer that stalls (its process stopped, its network
 * cut) holds the fleet's counters lock; the server ends it after 10 s instead of letting every
 * other replica wait, and this writer's own wait for that lock fails (503) after as long. */
static const char SESSION_SQL[] =
    "SELECT set_config('idle_in_transaction_session_timeout', '10s', false), set_config('lock_timeout', '10s', false)";
static const char UPSERT_WRITER_SQL[] = "INSERT INTO writers (writer_id, first_seen, last_seen) VALUES ($1, $2, $2)"
                                        " ON CONFLICT (writer_id) DO UPDATE SET last_seen = EXCLUDED.last_seen";
static const char TOUCH_WRITER_SQL[] = "UPDATE writers SET last_seen = $2 WHERE writer_id = $1";
static const char HEAD_SQL[] = "SELECT seq, hash FROM audit_chain WHERE writer_id = $1 ORDER BY seq DESC LIMIT 1";
static const char NODE_SQL[] = "SELECT hash FROM audit_log_nodes WHERE writer_id = $1 AND level = $2 AND idx = $3";
static const char ALL_ENTRIES_SQL[] = "SELECT seq, hash FROM audit_chain WHERE writer_id = $1 ORDER BY seq";
static const char LAST_STAMP_SQL[] = "SELECT max(created_at) FROM decisions";
/* The statements of every group, prepared once per connection (prepare_statements, again after a
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

/* ---- the writer's state ---- */

typedef enum { JOB_DECISIONS, JOB_SHADOWS, JOB_FN } job_kind;

/* A caller's unit of work, queued for the writer; on the caller's stack, or (an asynchronous
 * append, on_done set) in an async_append that the writer frees after on_done. */
typedef struct pg_job {
    job_kind kind;
    const pgcl_decision_row *rows;  /* JOB_DECISIONS */
    const pgcl_idem_entry *idem;    /* JOB_DECISIONS, optional */
    const pgcl_shadow_row *shadows; /* JOB_SHADOWS */
    int n;                          /* rows or shadows */
    pgcl_pg_job_fn fn;              /* JOB_FN */
    void *ctx;
    int n_rows;   /* counted against the backlog limit */
    bool bounded; /* refused with PGCL_ERR_BUSY when the backlog is full */
    pgcl_status status;
    bool done;
    pthread_cond_t done_cond;
    pgcl_audit_done_fn on_done;
    void *on_done_ctx;
    char err[ERR_CAP];
    /* the group's scratch */
    bool idem_taken;     /* its key is live already (another replica answered it): not written */
    PGresult *idem_live; /* round trip 1's answer about its key */
    struct pg_job *next;
} pg_job;

/* An event chained in the open transaction: its table, row and leaf hash. */
typedef struct pending_leaf {
    int table;
    int64_t row_seq;
    pgcl_merkle_hash leaf;
} pending_leaf;

/* The log tree's right edge: the roots of the perfect subtrees of size's binary decomposition,
 * largest first (height = level). */
typedef struct log_edge {
    int64_t size;
    pgcl_merkle_stack stack; /* (merkle.h) */
} log_edge;

struct pgcl_pg_writer {
    pgcl_audit_pg *s;
    /* the writer thread's own (and writer_start's before the thread runs) */
    PGconn *conn;  /* NULL while disconnected */
    bool prepared; /* conn has PREPARED */
    int64_t head_seq;
    char head_hash[PGCL_CHAIN_HEX_LEN + 1];
    log_edge edge;
    char last_stamp[PGCL_TIMESTAMP_LEN + 1];
    pending_leaf *leaves;
    size_t n_leaves, cap_leaves;
    pgcl_merkle_hash *packed; /* the leaves' hashes in order, for the root and the leaves column */
    size_t cap_packed;
    struct row_arrays *arrays; /* fast mode's array parameters, reused by every group */
    pgcl_pg_log *log;          /* this writer's transparency log (pg_log.h) */
    uint64_t *row_leaves;      /* fast mode: each decision row's leaf, in the group's row order */
    size_t cap_row_leaves;
    int64_t next_connect_us; /* while disconnected: when to try again */
    int backoff_ms;
    int64_t next_probe_us;
    char down_reason[ERR_CAP];
    /* shared, under lock */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t work;
    pg_job *head, *tail;
    int pending_rows, max_pending_rows;
    bool closing;
    /* Liveness (pgcl_audit_writer_stall_us), on pgcl_monotonic_us's clock, 0 = none: when the
     * writer took its current batch or began idle maintenance (a reconnection, a probe write, a
     * dropped connection; cleared once it is back at the queue), and when the queue last went from
     * empty to not empty (cleared when the writer takes it). */
    int64_t busy_since_us, queued_since_us;
    _Atomic bool healthy;
};

struct pgcl_pg_txn {
    pgcl_pg_writer *w;
    char now[PGCL_TIMESTAMP_LEN + 1];
    int64_t next[N_COUNTERS], end[N_COUNTERS]; /* seqs allocated and not yet handed out: [next, end) */
};

/* ---- small helpers ---- */

static void fmt_i64(char out[24], int64_t v) {
    snprintf(out, 24, "%" PRId64, v);
}

/* A double as text that reads back to the same bits (float8 in, the leaf hashes the double). */
static void fmt_double(char out[32], double v) {
    snprintf(out, 32, "%.17g", v);
}

/* Every job of the batch not already failed by itself (its own rule, a taken key) fails with st. */
static void fail_jobs(pg_job *batch, pgcl_status st, const char *err) {
    for (pg_job *j = batch; j; j = j->next) {
        if (j->status != PGCL_OK && j->status != PGCL_ERR_DB) continue;
        j->status = st;
        snprintf(j->err, ERR_CAP, "%s", err);
    }
}

/* ---- statements: one at a time, or pipelined ----
 * A sender runs statements either synchronously (each checked at once) or in pipeline mode (sent,
 * then read at each sync: every PIPE_CHUNK statements and at the end). Its first failure is kept in
 * st / err; in pipeline mode the statements after it are not run (the pipeline aborts). A result
 * the caller asked to keep (keep != NULL) is handed over in *keep. */
typedef struct sender {
    PGconn *conn;
    bool pipelined;
    bool prepared; /* the connection has PREPARED: those statements run by name */
    pgcl_status st;
    char err[ERR_CAP];
    /* pipelined, per unread statement (at most PIPE_CHUNK: sender_send reads them at that many):
     * where its result goes (NULL: checked, dropped), and what it is, for the message of its failure */
    PGresult **keeps[PIPE_CHUNK];
    const char *whats[PIPE_CHUNK];
    int n_unread;
} sender;

static void sender_fail(sender *s, const char *what, const PGresult *res) {
    if (s->st != PGCL_OK) return;
    s->st = PGCL_ERR_DB;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !msg[0]) msg = PQerrorMessage(s->conn);
    snprintf(s->err, ERR_CAP, "%s: %.*s", what, (int)strcspn(msg, "\n"), msg);
}

static bool sender_start(sender *s, const pgcl_pg_writer *w, bool pipelined) {
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

/* The most parameters of one statement: a decision row's (DECISION_COLUMNS, the widest). */
#define SENDER_MAX_PARAMS 32

/* Runs (or sends) one statement with parameters: values[i] text unless binary_len[i] >= 0 (then
 * binary_len[i] bytes of bytea). */
static void sender_send(sender *s, const char *what, const char *sql, int n, const char *const *values,
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
static pgcl_status sender_finish(sender *s) {
    if (s->pipelined) {
        if (s->n_unread > 0 || s->st == PGCL_OK) sender_drain(s);
        if (PQstatus(s->conn) == CONNECTION_OK) PQexitPipelineMode(s->conn);
    }
    return s->st;
}

/* ---- array parameters: pg_array.h ---- */

/* ---- the log tree's right edge ---- */

/* Appends entry seq (= size + 1) with hash `entry`; the nodes it completes are sent with s. */
static void edge_append(log_edge *e, const char *writer_id, int64_t seq, const pgcl_merkle_hash *entry, sender *s) {
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
            sender_send(s, "audit_log_nodes", INSERT_NODE_SQL, 4, v, bin, NULL);
        }
    }
    e->size = seq;
}

/* ---- connection: lock, writers row, head, edge ---- */

/* One bytea/hex hash column into a Merkle hash: entry hashes are hex text, nodes bytea. */
static bool hash_of_text(const PGresult *res, int row, int col, pgcl_merkle_hash *out) {
    const char *t = pgcl_pg_text(res, row, col);
    return t && pgcl_merkle_from_hex(t, out);
}

static bool hash_of_bytea(const PGresult *res, int row, int col, pgcl_merkle_hash *out) {
    unsigned char *b = NULL;
    size_t len = 0;
    bool ok = pgcl_pg_bytea(res, row, col, &b, &len) == PGCL_OK && b && len == PGCL_MERKLE_HASH_BYTES;
    if (ok) memcpy(out->b, b, PGCL_MERKLE_HASH_BYTES);
    free(b);
    return ok;
}

/* The edge rebuilt from every entry of the chain (the naive way; used when a stored node the fast
 * load needs is missing). */
static pgcl_status edge_rebuild(pgcl_pg_writer *w, char *err, int cap) {
    const char *v[] = {w->s->writer_id};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(w->conn, "audit chain entries", ALL_ENTRIES_SQL, 1, v, &st, err, cap);
    if (!res) return st;
    log_edge e = {0};
    for (int i = 0; i < PQntuples(res); i++) {
        pgcl_merkle_hash h;
        if (pgcl_pg_int(res, i, 0) != (int64_t)i + 1 || !hash_of_text(res, i, 1, &h)) {
            pgcl_errorf(err, cap, "audit chain of writer %s: entry %d is missing or malformed (run verify)",
                        w->s->writer_id, i + 1);
            PQclear(res);
            return PGCL_ERR_FORMAT;
        }
        edge_append(&e, w->s->writer_id, i + 1, &h, NULL);
    }
    PQclear(res);
    w->edge = e;
    return PGCL_OK;
}

/* The edge of a log of head_seq entries from its stored nodes (O(log n) reads; its last leaf, when
 * it is alone, is the head entry, whose hash is read already). */
static pgcl_status edge_load(pgcl_pg_writer *w, char *err, int cap) {
    log_edge e = {.size = w->head_seq};
    uint64_t at = 0, n = (uint64_t)w->head_seq;
    for (int level = 63; level >= 0; level--) {
        uint64_t span = (uint64_t)1 << level;
        if (!(n & span)) continue;
        pgcl_merkle_hash h;
        bool ok;
        if (level == 0) {
            PGCL_ASSERT(at + 1 == n); /* leaf n - 1: entry n, the head */
            ok = pgcl_merkle_from_hex(w->head_hash, &h);
            if (ok) h = pgcl_merkle_leaf_hash(h.b, sizeof h.b);
        } else {
            char lv[24], idx[24];
            fmt_i64(lv, level);
            fmt_i64(idx, (int64_t)(at >> level));
            const char *v[] = {w->s->writer_id, lv, idx};
            pgcl_status st;
            PGresult *res = pgcl_pg_query(w->conn, "audit log node", NODE_SQL, 3, v, &st, err, cap);
            if (!res) return st;
            ok = PQntuples(res) == 1 && hash_of_bytea(res, 0, 0, &h);
            PQclear(res);
        }
        if (!ok) {
            pgcl_log_warn("audit: writer %s: log tree node (%d, %llu) missing; rebuilding the edge from the entries",
                          w->s->writer_id, level, (unsigned long long)(at >> level));
            return edge_rebuild(w, err, cap);
        }
        e.stack.node[e.stack.top] = h;
        e.stack.height[e.stack.top++] = level;
        at += span;
    }
    PGCL_ASSERT(at == n && e.stack.top == __builtin_popcountll(n)); /* one node per set bit of the size */
    w->edge = e;
    return PGCL_OK;
}

/* The genesis entry of a new chain, in its own transaction. */
static pgcl_status write_genesis(pgcl_pg_writer *w, char *err, int cap) {
    const char *id = w->s->writer_id;
    char payload[PGCL_CHAIN_HEX_LEN + 1], hash[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_chain_writer_genesis_payload(id, payload);
    pgcl_chain_entry_hash(1, "genesis", 7, 0, payload, PGCL_CHAIN_HEX_LEN, pgcl_chain_zero_hash, PGCL_CHAIN_HEX_LEN,
                          hash);
    sender s;
    sender_start(&s, w, false);
    sender_send(&s, "begin", "BEGIN", 0, NULL, NULL, NULL);
    const char *v[] = {id, payload, pgcl_chain_zero_hash, hash};
    sender_send(&s, "genesis entry", INSERT_GENESIS_SQL, 4, v, NULL, NULL);
    sender_send(&s, "commit", "COMMIT", 0, NULL, NULL, NULL);
    pgcl_status st = sender_finish(&s);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "%s", s.err);
        PQclear(PQexec(w->conn, "ROLLBACK"));
        return st;
    }
    w->head_seq = 1;
    memcpy(w->head_hash, hash, sizeof hash);
    pgcl_log_info("audit: writer %s: began its chain (genesis entry)", id);
    return PGCL_OK;
}

/* Reads the chain head (writing the genesis entry for a new chain) and the log edge. */
static pgcl_status load_chain(pgcl_pg_writer *w, char *err, int cap) {
    const char *v[] = {w->s->writer_id};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(w->conn, "audit chain head", HEAD_SQL, 1, v, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        w->head_seq = 0;
        w->edge = (log_edge){0};
        if ((st = write_genesis(w, err, cap)) != PGCL_OK) return st;
        pgcl_merkle_hash h;
        PGCL_ASSERT(pgcl_merkle_from_hex(w->head_hash, &h));
        edge_append(&w->edge, w->s->writer_id, 1, &h, NULL); /* leaf 0 completes no node */
        return PGCL_OK;
    }
    const char *hash = pgcl_pg_text(res, 0, 1);
    if (!hash || strlen(hash) != PGCL_CHAIN_HEX_LEN) {
        PQclear(res);
        pgcl_errorf(err, cap, "audit chain of writer %s: the head entry's hash is not 64 hex digits", w->s->writer_id);
        return PGCL_ERR_FORMAT;
    }
    w->head_seq = pgcl_pg_int(res, 0, 0);
    memcpy(w->head_hash, hash, PGCL_CHAIN_HEX_LEN + 1);
    PQclear(res);
    return edge_load(w, err, cap);
}

/* Reads the log's state, or begins the log: its first leaf binds the chain's head when the chain
 * holds events already (entries beyond its genesis), i.e. a database written before the log. */
static pgcl_status load_log(pgcl_pg_writer *w, char *err, int cap) {
    pgcl_pg_chain_head head = {.seq = w->head_seq};
    bool legacy = w->head_seq >= 2;
    if (legacy) {
        PGCL_ASSERT(pgcl_merkle_from_hex(w->head_hash, &head.hash) && w->edge.size == w->head_seq);
        head.log_root = pgcl_merkle_stack_root(&w->edge.stack);
    }
    return pgcl_pg_log_load(w->log, w->conn, legacy ? &head : NULL, err, cap);
}

/* Tries writer_id's lock until wait_ms passed: PGCL_OK, PGCL_ERR_BUSY (held by another session),
 * or PGCL_ERR_DB. */
static pgcl_status take_writer_lock(pgcl_pg_writer *w, int wait_ms, char *err, int cap) {
    char lock_class[24];
    fmt_i64(lock_class, PGCL_PG_LOCK_CLASS);
    const char *v[] = {lock_class, w->s->writer_id};
    int64_t deadline = pgcl_monotonic_us() + (int64_t)(wait_ms > 0 ? wait_ms : 0) * 1000;
    for (;;) {
        pgcl_status st;
        PGresult *res = pgcl_pg_query(w->conn, "writer id lock", LOCK_SQL, 2, v, &st, err, cap);
        if (!res) return st;
        bool taken = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        PQclear(res);
        if (taken) return PGCL_OK;
        if (pgcl_monotonic_us() >= deadline) break;
        struct timespec pause = {0, LOCK_RETRY_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    pgcl_errorf(err, cap,
                "writer id %s is in use by another process (its advisory lock is held); give each replica "
                "its own --writer-id",
                w->s->writer_id);
    return PGCL_ERR_BUSY;
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
static pgcl_status prepare_statements(pgcl_pg_writer *w, char *err, int cap) {
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

/* A new connection made ready to write: the lock, the writers row, the head, the edge, the prepared
 * statements. On failure no connection is kept. (The newest timestamp is not read here: every group
 * reads the fleet's, under the counters' lock, before it stamps.) */
static pgcl_status connect_writer(pgcl_pg_writer *w, int lock_wait_ms, char *err, int cap) {
    if (w->conn) PQfinish(w->conn);
    w->prepared = false;
    w->conn = pgcl_pg_connect(w->s->uri, err, cap);
    if (!w->conn) return PGCL_ERR_DB;
    char now[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_now(now);
    const char *v[] = {w->s->writer_id, now};
    pgcl_status st = take_writer_lock(w, lock_wait_ms, err, cap);
    if (st == PGCL_OK) st = pgcl_pg_exec(w->conn, "session settings", SESSION_SQL, 0, NULL, err, cap);
    if (st == PGCL_OK) st = pgcl_pg_exec(w->conn, "writers row", UPSERT_WRITER_SQL, 2, v, err, cap);
    if (st == PGCL_OK) st = load_chain(w, err, cap);
    if (st == PGCL_OK) st = load_log(w, err, cap);
    if (st == PGCL_OK) st = prepare_statements(w, err, cap);
    if (st != PGCL_OK) {
        PQfinish(w->conn);
        w->conn = NULL;
        w->prepared = false;
    }
    return st;
}

/* The connection is gone (or unusable): drop it, and let the next group or the idle loop make a new
 * one at once, then with backoff. */
static void lose_connection(pgcl_pg_writer *w, const char *why) {
    if (w->conn) PQfinish(w->conn);
    w->conn = NULL;
    w->prepared = false;
    w->healthy = false;
    w->backoff_ms = 0;
    w->next_connect_us = pgcl_monotonic_us();
    snprintf(w->down_reason, sizeof w->down_reason, "%s", why);
    pgcl_log_error("audit: writer %s: the database connection is lost (%s); reconnecting", w->s->writer_id, why);
}

/* While disconnected: one try when it is due. True when connected afterwards. */
static bool reconnect_if_due(pgcl_pg_writer *w) {
    if (w->conn) return true;
    int64_t now = pgcl_monotonic_us();
    if (now < w->next_connect_us) return false;
    char err[ERR_CAP];
    if (connect_writer(w, 0, err, sizeof err) == PGCL_OK) {
        pgcl_log_info("audit: writer %s: reconnected (chain head %" PRId64 ")", w->s->writer_id, w->head_seq);
        w->healthy = true;
        w->backoff_ms = 0;
        return true;
    }
    w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : RECONNECT_FIRST_MS;
    if (w->backoff_ms > RECONNECT_MAX_MS) w->backoff_ms = RECONNECT_MAX_MS;
    w->next_connect_us = pgcl_monotonic_us() + (int64_t)w->backoff_ms * 1000;
    if (strcmp(err, w->down_reason) != 0) pgcl_log_warn("audit: writer %s: cannot reconnect: %s", w->s->writer_id, err);
    snprintf(w->down_reason, sizeof w->down_reason, "%s", err);
    return false;
}

/* ---- the transaction's API for jobs ---- */

PGconn *pgcl_pg_txn_conn(pgcl_pg_txn *t) {
    return t->w->conn;
}

const char *pgcl_pg_txn_now(pgcl_pg_txn *t) {
    return t->now;
}

static int counter_index(const char *table) {
    for (int i = 0; i < N_COUNTERS; i++)
        if (table && strcmp(table, COUNTER_NAMES[i]) == 0) return i;
    return -1;
}

/* n seqs of counter c: from the range allocated at the group's start (reserved: the fast path's
 * rows, which never fail alone), else allocated now by a statement, which a savepoint's rollback
 * takes back with the job (the connection must not be in pipeline mode). *first: the first. */
static pgcl_status take_seqs(pgcl_pg_txn *t, int c, int64_t n, bool reserved, int64_t *first, char *err, int cap) {
    if (reserved) {
        PGCL_ASSERT(t->end[c] - t->next[c] >= n);
        *first = t->next[c];
        t->next[c] += n;
        return PGCL_OK;
    }
    PGCL_ASSERT(PQpipelineStatus(t->w->conn) == PQ_PIPELINE_OFF);
    char count[24];
    fmt_i64(count, n);
    const char *v[] = {count};
    int64_t last = 0;
    bool found = false;
    pgcl_status st = pgcl_pg_query_int(t->w->conn, "fleet_counters", TAKE_SEQS_SQL[c], 1, v, &last, &found, err, cap);
    if (st != PGCL_OK) return st;
    if (!found) {
        pgcl_errorf(err, cap, "fleet_counters: its row is missing");
        return PGCL_ERR_DB;
    }
    *first = last - n + 1;
    return PGCL_OK;
}

pgcl_status pgcl_pg_txn_next_seq(pgcl_pg_txn *t, const char *table, int64_t *seq, char *err, int cap) {
    int c = counter_index(table);
    if (c < 0) {
        pgcl_errorf(err, cap, "fleet_counters: no counter for table '%.32s'", table ? table : "(null)");
        return PGCL_ERR_INVALID;
    }
    return take_seqs(t, c, 1, false, seq, err, cap);
}

static pgcl_status chain_leaf(pgcl_pg_writer *w, int table, int64_t row_seq, pgcl_merkle_hash leaf) {
    if (w->n_leaves == w->cap_leaves) {
        size_t cap = w->cap_leaves ? 2 * w->cap_leaves : 256;
        pending_leaf *grown = realloc(w->leaves, cap * sizeof *grown);
        if (!grown) return PGCL_ERR_NOMEM;
        w->leaves = grown;
        w->cap_leaves = cap;
    }
    w->leaves[w->n_leaves++] = (pending_leaf){.table = table, .row_seq = row_seq, .leaf = leaf};
    return PGCL_OK;
}

const char *pgcl_pg_txn_writer_id(pgcl_pg_txn *t) {
    return t->w->s->writer_id;
}

pgcl_status pgcl_pg_txn_log(pgcl_pg_txn *t, const pgcl_record *r, uint64_t *leaf_index, char *err, int cap) {
    return pgcl_pg_log_add_record(t->w->log, r, leaf_index, err, cap);
}

pgcl_status pgcl_pg_txn_chain(pgcl_pg_txn *t, int table, int64_t row_seq, pgcl_merkle_hash leaf, char *err, int cap) {
    if (table < 0 || table >= PGCL_CHAIN_TABLES) {
        pgcl_errorf(err, cap, "audit chain: no chained table %d", table);
        return PGCL_ERR_INVALID;
    }
    if (chain_leaf(t->w, table, row_seq, leaf) != PGCL_OK) {
        pgcl_errorf(err, cap, "audit chain: out of memory");
        return PGCL_ERR_NOMEM;
    }
    return PGCL_OK;
}

/* ---- the group's statements ---- */

/* A decision row's parameters as the per-row statement binds them (text, or binary bytea at
 * bin[i] >= 0 bytes), and the stored input's digest. The values point into p: fill in place. */
enum { DECISION_COLUMNS = 27, DECISION_VECTOR = 16, DECISION_DIGEST = 19, SHADOW_COLUMNS = 14 };
_Static_assert(DECISION_COLUMNS <= SENDER_MAX_PARAMS, "a decision row's parameters fit one statement's");
typedef struct decision_params {
    char seq_t[24], label_index[24], latency[24], toxicity[32], t_review[32], t_block[32], leaf_t[24];
    unsigned char digest[PGCL_SHA256_BYTES];
    bool input_stored;
    const char *v[DECISION_COLUMNS];
    int bin[DECISION_COLUMNS];
} decision_params;

/* Whether r stores its input, and then the SHA-256 of the stored bytes in digest. */
static bool stored_input_digest(const pgcl_decision_row *r, unsigned char digest[PGCL_SHA256_BYTES]) {
    if (!r->input || !r->input_dtype) return false;
    if (r->input_digest)
        memcpy(digest, r->input_digest, PGCL_SHA256_BYTES);
    else
        pgcl_sha256(r->input, (size_t)r->input_bytes, digest);
    return true;
}

static void decision_params_fill(decision_params *p, const pgcl_pg_txn *t, const pgcl_decision_row *r, int64_t seq,
                                 uint64_t leaf_index) {
    p->input_stored = stored_input_digest(r, p->digest);
    fmt_i64(p->seq_t, seq);
    fmt_i64(p->leaf_t, (int64_t)leaf_index);
    fmt_i64(p->label_index, r->label_index);
    fmt_i64(p->latency, r->latency_us);
    fmt_double(p->toxicity, r->toxicity);
    fmt_double(p->t_review, r->t_review);
    fmt_double(p->t_block, r->t_block);
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vector bytea are stored little-endian");
    const char *v[DECISION_COLUMNS] = {p->seq_t,
                                       r->decision_id,
                                       t->now,
                                       r->request_id,
                                       r->item_id,
                                       r->model_name,
                                       r->model_version,
                                       r->model_sha256,
                                       r->label,
                                       p->label_index,
                                       r->probabilities_json,
                                       r->has_toxicity ? p->toxicity : NULL,
                                       r->decision,
                                       r->policy_json,
                                       r->has_thresholds ? p->t_review : NULL,
                                       r->has_thresholds ? p->t_block : NULL,
                                       (const char *)r->vector,
                                       r->input_sha256,
                                       p->latency,
                                       p->input_stored ? (const char *)p->digest : NULL,
                                       p->input_stored ? r->input_dtype : NULL,
                                       r->trace_id,
                                       r->content_date,
                                       r->territorial_scope,
                                       r->content_language,
                                       t->w->s->writer_id,
                                       p->leaf_t};
    memcpy(p->v, v, sizeof v);
    for (int i = 0; i < DECISION_COLUMNS; i++)
        p->bin[i] = -1;
    p->bin[DECISION_VECTOR] = r->d * (int)sizeof(float);
    if (p->input_stored) p->bin[DECISION_DIGEST] = PGCL_SHA256_BYTES;
}

/* Chains decision row r (bound as p) as row seq. */
static pgcl_status chain_decision(pgcl_pg_txn *t, const pgcl_decision_row *r, const decision_params *p, int64_t seq) {
    pgcl_chain_decision_values dv = {.seq = seq,
                                     .decision_id = r->decision_id,
                                     .created_at = t->now,
                                     .request_id = r->request_id,
                                     .item_id = r->item_id,
                                     .model_name = r->model_name,
                                     .model_version = r->model_version,
                                     .model_sha256 = r->model_sha256,
                                     .label = r->label,
                                     .label_index = r->label_index,
                                     .probabilities = r->probabilities_json,
                                     .has_toxicity = r->has_toxicity,
                                     .toxicity = r->toxicity,
                                     .decision = r->decision,
                                     .policy = r->policy_json,
                                     .has_thresholds = r->has_thresholds,
                                     .t_review = r->t_review,
                                     .t_block = r->t_block,
                                     .vector = r->vector,
                                     .vector_bytes = (size_t)r->d * sizeof(float),
                                     .input_sha256 = r->input_sha256,
                                     .latency_us = r->latency_us,
                                     .input_digest = p->input_stored ? p->digest : NULL,
                                     .input_dtype = p->input_stored ? r->input_dtype : NULL,
                                     .trace_id = r->trace_id,
                                     .content_date = r->content_date,
                                     .territorial_scope = r->territorial_scope,
                                     .content_language = r->content_language};
    return chain_leaf(t->w, T_DECISIONS, seq, pgcl_chain_decision_leaf(&dv));
}

/* Sends decision row r as row seq (and its stored input) and chains its leaf. */
static pgcl_status send_decision(sender *s, pgcl_pg_txn *t, const pgcl_decision_row *r, int64_t seq, char *err,
                                 int cap) {
    unsigned char digest[PGCL_SHA256_BYTES];
    bool stored = stored_input_digest(r, digest);
    uint64_t leaf = 0;
    pgcl_status st = pgcl_pg_log_add_decision(t->w->log, r, t->now, stored ? digest : NULL, &leaf, err, cap);
    if (st != PGCL_OK) return st;
    decision_params p;
    decision_params_fill(&p, t, r, seq, leaf);
    sender_send(s, "insert decision", INSERT_DECISION_SQL, DECISION_COLUMNS, p.v, p.bin, NULL);
    if (p.input_stored) {
        const char *iv[] = {p.seq_t, (const char *)r->input};
        const int ib[] = {-1, r->input_bytes};
        sender_send(s, "insert decision input", INSERT_INPUT_SQL, 2, iv, ib, NULL);
    }
    if (chain_decision(t, r, &p, seq) != PGCL_OK) {
        pgcl_errorf(err, cap, "audit chain: out of memory");
        return PGCL_ERR_NOMEM;
    }
    return PGCL_OK;
}

static void send_idem(sender *s, pgcl_pg_txn *t, const pgcl_idem_entry *e) {
    char expires[PGCL_TIMESTAMP_LEN + 1];
    pgcl_timestamp_after(e->ttl_s, expires);
    const char *drop[] = {e->scope, e->key, t->now};
    sender_send(s, "expired idempotency key", IDEM_DROP_EXPIRED_SQL, 3, drop, NULL, NULL);
    const char *v[] = {e->scope, e->key, e->body_sha256, e->request_id, e->answer, t->now, expires, e->request_sha256};
    sender_send(s, "idempotency key", IDEM_STORE_SQL, 8, v, NULL, NULL);
}

/* A shadow row's parameters (all text) as the per-row statement binds them; they point into p. */
typedef struct shadow_params {
    char seq_t[24], primary[32], shadow[32];
    const char *v[SHADOW_COLUMNS];
} shadow_params;

static void shadow_params_fill(shadow_params *p, const pgcl_pg_txn *t, const pgcl_shadow_row *r, int64_t seq) {
    fmt_i64(p->seq_t, seq);
    fmt_double(p->primary, r->primary_score);
    fmt_double(p->shadow, r->shadow_score);
    const char *v[SHADOW_COLUMNS] = {p->seq_t,
                                     r->decision_id,
                                     t->now,
                                     r->model_name,
                                     r->primary_version,
                                     r->shadow_version,
                                     r->shadow_sha256,
                                     r->primary_label,
                                     r->shadow_label,
                                     r->primary_decision,
                                     r->shadow_decision,
                                     p->primary,
                                     p->shadow,
                                     r->probabilities_json};
    memcpy(p->v, v, sizeof v);
}

static void send_shadow(sender *s, pgcl_pg_txn *t, const pgcl_shadow_row *r, int64_t seq) {
    shadow_params p;
    shadow_params_fill(&p, t, r, seq);
    sender_send(s, "insert shadow row", INSERT_SHADOW_SQL, SHADOW_COLUMNS, p.v, NULL, NULL);
}

/* A decisions or shadows job's statements, its seqs taken from t (reserved: see take_seqs). */
static pgcl_status send_job_rows(sender *s, pgcl_pg_txn *t, pg_job *j, bool reserved, char *err, int cap) {
    int64_t first = 0;
    pgcl_status st = take_seqs(t, j->kind == JOB_DECISIONS ? T_DECISIONS : T_SHADOWS, j->n, reserved, &first, err, cap);
    if (st != PGCL_OK) return st;
    for (int i = 0; i < j->n; i++) {
        if (j->kind == JOB_SHADOWS) {
            send_shadow(s, t, &j->shadows[i], first + i);
        } else if ((st = send_decision(s, t, &j->rows[i], first + i, err, cap)) != PGCL_OK) {
            return st;
        }
    }
    if (j->kind == JOB_DECISIONS && j->idem) send_idem(s, t, j->idem);
    return PGCL_OK;
}

/* Fast mode's rows gathered into array parameters: one INSERT per table for up to
 * ROWS_PER_STATEMENT rows (or about ARRAY_FLUSH_BYTES of parameters). The writer keeps one set for
 * all its groups (their buffers grow to the largest statement's parameters and stay). */
#define ROWS_PER_STATEMENT 2048
#define ARRAY_FLUSH_BYTES (32u << 20)
typedef struct row_arrays {
    pgcl_pg_array decision[DECISION_COLUMNS], input[2], shadow[SHADOW_COLUMNS];
    size_t bytes;
} row_arrays;

static void row_arrays_reset(row_arrays *a) {
    for (int c = 0; c < DECISION_COLUMNS; c++)
        pgcl_pg_array_reset(&a->decision[c], c == DECISION_VECTOR || c == DECISION_DIGEST ? PGCL_PG_BYTEA_OID : PGCL_PG_TEXT_OID);
    pgcl_pg_array_reset(&a->input[0], PGCL_PG_TEXT_OID);
    pgcl_pg_array_reset(&a->input[1], PGCL_PG_BYTEA_OID);
    for (int c = 0; c < SHADOW_COLUMNS; c++)
        pgcl_pg_array_reset(&a->shadow[c], PGCL_PG_TEXT_OID);
    a->bytes = 0;
}

static void row_arrays_create(row_arrays *a) {
    *a = (row_arrays){0};
    row_arrays_reset(a);
}

static void row_arrays_destroy(row_arrays *a) {
    for (int c = 0; c < DECISION_COLUMNS; c++)
        pgcl_pg_array_destroy(&a->decision[c]);
    for (int c = 0; c < 2; c++)
        pgcl_pg_array_destroy(&a->input[c]);
    for (int c = 0; c < SHADOW_COLUMNS; c++)
        pgcl_pg_array_destroy(&a->shadow[c]);
}

/* Sends one statement whose n parameters are the arrays cols (binary), when they hold a row. */
static void send_arrays(sender *s, const char *what, const char *sql, pgcl_pg_array *cols, int n) {
    if (cols[0].n == 0) return;
    const char *v[DECISION_COLUMNS];
    int len[DECISION_COLUMNS];
    PGCL_ASSERT(n <= DECISION_COLUMNS);
    for (int c = 0; c < n; c++) {
        if (cols[c].oom) {
            if (s->st == PGCL_OK) {
                s->st = PGCL_ERR_NOMEM;
                snprintf(s->err, ERR_CAP, "%s: out of memory", what);
            }
            return;
        }
        /* every column holds one element per row: a shorter one would shift the table's rows */
        PGCL_ASSERT(cols[c].n == cols[0].n && cols[c].len <= INT32_MAX);
        pgcl_pg_array_finish(&cols[c]);
        v[c] = (const char *)cols[c].buf;
        len[c] = (int)cols[c].len;
    }
    sender_send(s, what, sql, n, v, len, NULL); /* libpq copies the parameters: the arrays can be reused */
}

static void flush_row_arrays(sender *s, row_arrays *a) {
    send_arrays(s, "insert decision", INSERT_DECISIONS_SQL, a->decision, DECISION_COLUMNS);
    send_arrays(s, "insert decision input", INSERT_INPUTS_SQL, a->input, 2);
    send_arrays(s, "insert shadow row", INSERT_SHADOWS_SQL, a->shadow, SHADOW_COLUMNS);
    row_arrays_reset(a);
}

static void add_decision(row_arrays *a, const pgcl_decision_row *r, const decision_params *p) {
    for (int c = 0; c < DECISION_COLUMNS; c++) {
        size_t len = p->bin[c] >= 0 ? (size_t)p->bin[c] : (p->v[c] ? strlen(p->v[c]) : 0);
        pgcl_pg_array_add(&a->decision[c], p->v[c], len);
        a->bytes += len;
    }
    if (p->input_stored) {
        pgcl_pg_array_add_text(&a->input[0], p->seq_t);
        pgcl_pg_array_add(&a->input[1], r->input, (size_t)r->input_bytes);
        a->bytes += (size_t)r->input_bytes;
    }
}

static void add_shadow(row_arrays *a, const shadow_params *p) {
    for (int c = 0; c < SHADOW_COLUMNS; c++) {
        pgcl_pg_array_add_text(&a->shadow[c], p->v[c]);
        a->bytes += p->v[c] ? strlen(p->v[c]) : 0;
    }
}

/* Fast mode's decisions into the log, before anything is sent (the leaves' indexes are columns of
 * the rows; the seal that follows may read): every decisions job of the batch not taken, in the
 * batch's order, as send_rows_batched sends them; their leaves in w->row_leaves. */
static pgcl_status log_decision_rows(pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
    pgcl_pg_writer *w = t->w;
    size_t rows = 0;
    for (pg_job *j = batch; j; j = j->next)
        if (j->kind == JOB_DECISIONS && !j->idem_taken) rows += (size_t)j->n;
    if (rows > w->cap_row_leaves) {
        uint64_t *grown = realloc(w->row_leaves, rows * sizeof *grown);
        if (!grown) {
            pgcl_errorf(err, cap, "log: out of memory");
            return PGCL_ERR_NOMEM;
        }
        w->row_leaves = grown;
        w->cap_row_leaves = rows;
    }
    size_t row = 0;
    for (pg_job *j = batch; j; j = j->next) {
        if (j->kind != JOB_DECISIONS || j->idem_taken) continue;
        for (int i = 0; i < j->n; i++) {
            unsigned char digest[PGCL_SHA256_BYTES];
            bool stored = stored_input_digest(&j->rows[i], digest);
            pgcl_status st = pgcl_pg_log_add_decision(w->log, &j->rows[i], t->now, stored ? digest : NULL,
                                                      &w->row_leaves[row++], j->err, ERR_CAP);
            if (st != PGCL_OK) {
                j->status = st; /* this request's record breaks a rule: it alone fails, alone */
                pgcl_errorf(err, cap, "%s", j->err);
                return st;
            }
        }
    }
    return PGCL_OK;
}

/* Fast mode's rows: every decisions / shadows job of the batch (not FN, not taken), its seqs from
 * the range reserved at the group's start, in the batch's order, so that the leaves are chained in
 * the order the per-row path (send_job_rows, the isolated mode) chains them; the rows go as array
 * statements (same values, same bytes stored), then the jobs' idempotency keys. */
static pgcl_status send_rows_batched(sender *s, pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
    row_arrays *a = t->w->arrays;
    row_arrays_reset(a); /* a previous group that failed half-way may have left rows */
    pgcl_status st = PGCL_OK;
    size_t row = 0; /* the decision rows' leaves: log_decision_rows's, in the same order */
    for (pg_job *j = batch; j && st == PGCL_OK; j = j->next) {
        if (j->kind == JOB_FN || j->idem_taken) continue;
        int64_t first = 0;
        st = take_seqs(t, j->kind == JOB_DECISIONS ? T_DECISIONS : T_SHADOWS, j->n, true, &first, err, cap);
        for (int i = 0; i < j->n && st == PGCL_OK; i++) {
            if (j->kind == JOB_SHADOWS) {
                shadow_params p;
                shadow_params_fill(&p, t, &j->shadows[i], first + i);
                add_shadow(a, &p);
            } else {
                decision_params p;
                decision_params_fill(&p, t, &j->rows[i], first + i, t->w->row_leaves[row++]);
                add_decision(a, &j->rows[i], &p);
                if (chain_decision(t, &j->rows[i], &p, first + i) != PGCL_OK) {
                    pgcl_errorf(err, cap, "audit chain: out of memory");
                    st = PGCL_ERR_NOMEM;
                }
            }
            if (a->decision[0].n >= ROWS_PER_STATEMENT || a->shadow[0].n >= ROWS_PER_STATEMENT ||
                a->bytes >= ARRAY_FLUSH_BYTES)
                flush_row_arrays(s, a);
        }
    }
    if (st == PGCL_OK) flush_row_arrays(s, a);
    for (pg_job *j = batch; j && st == PGCL_OK; j = j->next)
        if (j->kind == JOB_DECISIONS && j->idem && !j->idem_taken) send_idem(s, t, j->idem);
    return st;
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
    sender_send(s, "audit_chain commit entry", INSERT_COMMIT_SQL, 7, v, bin, NULL);
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
        sender_send(s, "audit_chain_runs", INSERT_RUN_SQL, 6, rv, NULL, NULL);
        start = i;
    }
    pgcl_merkle_hash entry;
    PGCL_ASSERT(pgcl_merkle_from_hex(hash, &entry));
    edge_append(edge, id, seq, &entry, s);
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

typedef enum { GROUP_DONE, GROUP_RETRY_ISOLATED } group_outcome;

/* After a failure: a connection that is gone is dropped; otherwise the transaction is rolled back.
 * Every job not already failed by itself fails with err. */
static void abandon_group(pgcl_pg_writer *w, pg_job *batch, const char *err) {
    if (!pgcl_pg_broken(w->conn) && PQpipelineStatus(w->conn) != PQ_PIPELINE_OFF) PQexitPipelineMode(w->conn);
    if (pgcl_pg_broken(w->conn) || PQpipelineStatus(w->conn) != PQ_PIPELINE_OFF) {
        lose_connection(w, err); /* gone, or left with results nobody will read: a new one */
    } else {
        PQclear(PQexec(w->conn, "ROLLBACK"));
        if (pgcl_pg_broken(w->conn)) lose_connection(w, err);
    }
    fail_jobs(batch, PGCL_ERR_DB, err);
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
    if (sender_start(&s, w, true)) {
        sender_send(&s, "begin", "BEGIN", 0, NULL, NULL, NULL);
        char addv[N_COUNTERS][24];
        const char *v[N_COUNTERS];
        for (int c = 0; c < N_COUNTERS; c++) {
            fmt_i64(addv[c], add[c]);
            v[c] = addv[c];
        }
        sender_send(&s, "fleet_counters", COUNTERS_SQL, N_COUNTERS, v, NULL, &counters);
        sender_send(&s, "newest timestamp", LAST_STAMP_SQL, 0, NULL, NULL, &latest);
        for (pg_job *j = batch; j; j = j->next) {
            if (j->kind != JOB_DECISIONS || !j->idem) continue;
            const char *kv[] = {j->idem->scope, j->idem->key, now};
            sender_send(&s, "idempotency key lookup", IDEM_LIVE_SQL, 3, kv, NULL, &j->idem_live);
        }
    }
    pgcl_status st = sender_finish(&s);
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
        sender_start(&s, w, false);
        pgcl_status st = send_job_rows(&s, t, j, false, j->err, ERR_CAP);
        pgcl_status sent = sender_finish(&s);
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
        sender_send(s, stmt.what, stmt.sql, stmt.n, stmt.values, stmt.binary_len, NULL);
    return !oom;
}

/* One transaction for the batch. Fast mode sends every row in one pipeline; a failure there is
 * answered by GROUP_RETRY_ISOLATED (the transaction rolled back, nothing acknowledged). */
static group_outcome run_group(pgcl_pg_writer *w, pg_job *batch, bool isolated) {
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
    pgcl_status logged = isolated ? PGCL_OK : log_decision_rows(&t, batch, err, sizeof err);
    if (logged == PGCL_OK) logged = pgcl_pg_log_seal(w->log, w->conn, err, sizeof err);
    if (logged != PGCL_OK) {
        bool retry = !isolated && batch->next && !pgcl_pg_broken(w->conn);
        abandon_group(w, batch, err);
        return retry ? GROUP_RETRY_ISOLATED : GROUP_DONE;
    }
    sender s;
    if (!sender_start(&s, w, true)) {
        abandon_group(w, batch, s.err);
        return GROUP_DONE;
    }
    bool any_key = false;
    for (pg_job *j = batch; j; j = j->next)
        if (j->kind == JOB_DECISIONS && j->idem && !j->idem_taken) any_key = true;
    if (!isolated && send_rows_batched(&s, &t, batch, err, sizeof err) != PGCL_OK) {
        sender_finish(&s);
        abandon_group(w, batch, err);
        return GROUP_DONE;
    }
    /* every seq the counters handed this group is used: a seq left over would be a gap forever */
    PGCL_ASSERT(t.next[T_DECISIONS] == t.end[T_DECISIONS] && t.next[T_SHADOWS] == t.end[T_SHADOWS]);
    if (any_key && !isolated) {
        const char *v[] = {t.now};
        sender_send(&s, "expired idempotency keys", IDEM_EXPIRE_SQL, 1, v, NULL, NULL);
    }
    log_edge edge = w->edge;
    char hash[PGCL_CHAIN_HEX_LEN + 1] = "";
    if (send_chain_entry(&s, w, &edge, hash) != PGCL_OK) {
        sender_finish(&s);
        abandon_group(w, batch, "audit chain: out of memory");
        return GROUP_DONE;
    }
    if (!send_log(&s, w)) {
        sender_finish(&s);
        abandon_group(w, batch, "log: out of memory");
        return GROUP_DONE;
    }
    PGresult *commit = NULL;
    sender_send(&s, "commit", "COMMIT", 0, NULL, NULL, &commit);
    pgcl_status st = sender_finish(&s);
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

/* The batch, committed: fast mode first, then (after a failed statement) each job alone. */
static void commit_group(pgcl_pg_writer *w, pg_job *batch) {
    /* a connection the server closed while the writer was idle (a restart) is replaced before the
     * group is sent, so that the first requests after a restart do not fail on it */
    if (w->conn && pgcl_pg_gone_while_idle(w->conn)) lose_connection(w, "the server closed the connection");
    if (!reconnect_if_due(w)) {
        char err[ERR_CAP];
        snprintf(err, sizeof err, "the audit database is unreachable: %.400s", w->down_reason);
        fail_jobs(batch, PGCL_ERR_DB, err); /* no job ran: each is still PGCL_ERR_DB as queued */
        return;
    }
    if (run_group(w, batch, false) == GROUP_RETRY_ISOLATED) {
        pgcl_log_warn("audit: writer %s: a statement of a group failed (%s); each request of the group runs alone",
                      w->s->writer_id, batch->err);
        run_group(w, batch, true);
    }
}

/* An unhealthy writer's check that writes work again: the writers row's last_seen, committed. */
static void probe_write(pgcl_pg_writer *w) {
    char now[PGCL_TIMESTAMP_LEN + 1], err[ERR_CAP];
    pgcl_timestamp_now(now);
    const char *v[] = {w->s->writer_id, now};
    if (pgcl_pg_exec(w->conn, "probe write", TOUCH_WRITER_SQL, 2, v, err, sizeof err) == PGCL_OK) {
        pgcl_log_info("audit: writer %s: a probe write succeeded; the audit log is writable again", w->s->writer_id);
        w->healthy = true;
        return;
    }
    if (pgcl_pg_broken(w->conn)) lose_connection(w, err);
}

/* ---- the thread ---- */

static void finish_async_jobs(pg_job *list);

/* What an idle writer does: reconnects when disconnected, probes when unhealthy. */
static void idle_maintenance(pgcl_pg_writer *w) {
    if (!w->conn) {
        reconnect_if_due(w);
        return;
    }
    if (!w->healthy && pgcl_monotonic_us() >= w->next_probe_us) {
        w->next_probe_us = pgcl_monotonic_us() + PROBE_INTERVAL_MS * 1000LL;
        probe_write(w);
    }
}

static void *writer_main(void *arg) {
    pgcl_pg_writer *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->head && !w->closing) {
            if (w->healthy && w->conn) {
                /* idle and healthy: every IDLE_CHECK_MS, a look (no round trip) at whether the
                 * server closed the connection, so that /readyz turns 503 and the reconnection
                 * starts without waiting for a request to fail */
                struct timespec until = pgcl_monotonic_timespec(pgcl_monotonic_us() + IDLE_CHECK_MS * 1000LL);
                if (pthread_cond_timedwait(&w->work, &w->lock, &until) == ETIMEDOUT && !w->head && !w->closing &&
                    pgcl_pg_gone_while_idle(w->conn)) {
                    w->busy_since_us = pgcl_monotonic_us();
                    pthread_mutex_unlock(&w->lock);
                    lose_connection(w, "the server closed the connection");
                    pthread_mutex_lock(&w->lock);
                    w->busy_since_us = 0;
                }
                continue;
            }
            int64_t wake = w->conn ? w->next_probe_us : w->next_connect_us;
            int64_t now = pgcl_monotonic_us();
            if (wake < now + 10000) wake = now + 10000;
            struct timespec until = pgcl_monotonic_timespec(wake);
            if (pthread_cond_timedwait(&w->work, &w->lock, &until) == ETIMEDOUT && !w->head && !w->closing) {
                w->busy_since_us = pgcl_monotonic_us();
                pthread_mutex_unlock(&w->lock);
                idle_maintenance(w);
                pthread_mutex_lock(&w->lock);
                w->busy_since_us = 0;
            }
        }
        if (!w->head && w->closing) break;
        pg_job *batch = w->head;
        w->head = w->tail = NULL;
        w->busy_since_us = pgcl_monotonic_us();
        w->queued_since_us = 0;
        pthread_mutex_unlock(&w->lock);

        commit_group(w, batch);
        bool db_ok = true;
        for (pg_job *j = batch; j; j = j->next) {
            if (j->status == PGCL_ERR_DB) {
                db_ok = false;
                pgcl_log_error("audit: write failed: %s", j->err);
                break;
            }
        }
        if (db_ok && !w->healthy) pgcl_log_info("audit: writer %s: writes succeed again", w->s->writer_id);
        w->healthy = db_ok && w->conn != NULL;
        if (!db_ok) w->next_probe_us = pgcl_monotonic_us() + PROBE_INTERVAL_MS * 1000LL;

        pg_job *async_jobs = NULL;
        pthread_mutex_lock(&w->lock);
        for (pg_job *j = batch, *next; j; j = next) {
            next = j->next;
            w->pending_rows -= j->n_rows;
            if (j->on_done) {
                j->next = async_jobs;
                async_jobs = j;
                continue;
            }
            j->done = true;
            pthread_cond_signal(&j->done_cond);
        }
        if (async_jobs) {
            pthread_mutex_unlock(&w->lock);
            finish_async_jobs(async_jobs);
            pthread_mutex_lock(&w->lock);
        }
        w->busy_since_us = 0;
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ---- queueing ---- */

static pgcl_pg_writer *writer_of(pgcl_audit *store) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    PGCL_ASSERT(s->writer != NULL);
    return s->writer;
}

/* Queues a job; the caller holds w->lock. PGCL_OK, or the refusal (closing, backlog full). */
static pgcl_status enqueue_locked(pgcl_pg_writer *w, pg_job *job, char *err, int cap) {
    if (w->closing) {
        pgcl_errorf(err, cap, "audit store is closing");
        return PGCL_ERR_CLOSED;
    }
    if (job->bounded && w->pending_rows > 0 && w->pending_rows + job->n_rows > w->max_pending_rows) {
        pgcl_errorf(err, cap, "audit backlog is full (%d rows pending)", w->pending_rows);
        return PGCL_ERR_BUSY;
    }
    w->pending_rows += job->n_rows;
    if (!w->head) w->queued_since_us = pgcl_monotonic_us();
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->work);
    return PGCL_OK;
}

static pgcl_status submit(pgcl_pg_writer *w, pg_job *job, char *err, int cap) {
    pthread_mutex_lock(&w->lock);
    pthread_cond_init(&job->done_cond, NULL);
    pgcl_status st = enqueue_locked(w, job, err, cap);
    while (st == PGCL_OK && !job->done)
        pthread_cond_wait(&job->done_cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    pthread_cond_destroy(&job->done_cond);
    if (st != PGCL_OK) return st;
    if (job->status != PGCL_OK) pgcl_errorf(err, cap, "%s", job->err);
    return job->status;
}

static void finish_async_jobs(pg_job *list) {
    for (pg_job *j = list, *next; j; j = next) {
        next = j->next;
        j->on_done(j->on_done_ctx, j->status, j->status == PGCL_OK ? "" : j->err);
        free(j); /* the job is the first member of its allocation */
    }
}

pgcl_status pgcl_pg_append(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                           char *err, int cap) {
    pg_job job = {
        .kind = JOB_DECISIONS, .rows = rows, .n = n, .idem = idem, .n_rows = n, .bounded = true, .status = PGCL_ERR_DB};
    return submit(writer_of(store), &job, err, cap);
}

void pgcl_pg_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n, const pgcl_idem_entry *idem,
                          pgcl_audit_done_fn done, void *done_ctx) {
    pgcl_pg_writer *w = writer_of(store);
    pg_job *job = calloc(1, sizeof *job);
    if (!job) {
        done(done_ctx, PGCL_ERR_NOMEM, "out of memory");
        return;
    }
    *job = (pg_job){.kind = JOB_DECISIONS,
                    .rows = rows,
                    .n = n,
                    .idem = idem,
                    .n_rows = n,
                    .bounded = true,
                    .status = PGCL_ERR_DB,
                    .on_done = done,
                    .on_done_ctx = done_ctx};
    char err[ERR_CAP];
    pthread_mutex_lock(&w->lock);
    pgcl_status st = enqueue_locked(w, job, err, sizeof err);
    pthread_mutex_unlock(&w->lock);
    if (st == PGCL_OK) return;
    free(job);
    done(done_ctx, st, err);
}

pgcl_status pgcl_pg_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    pg_job job = {.kind = JOB_SHADOWS, .shadows = rows, .n = n, .n_rows = n, .bounded = true, .status = PGCL_ERR_DB};
    return submit(writer_of(store), &job, err, cap);
}

pgcl_status pgcl_pg_run(pgcl_audit_pg *s, pgcl_pg_job_fn fn, void *ctx, char *err, int cap) {
    PGCL_ASSERT(s->writer != NULL && fn != NULL);
    pg_job job = {.kind = JOB_FN, .fn = fn, .ctx = ctx, .n_rows = 1, .status = PGCL_ERR_DB};
    return submit(s->writer, &job, err, cap);
}

/* An administrative event: an admin_events row, chained as the SQLite store's event job. */
static pgcl_status event_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    const pgcl_admin_event *ev = ctx;
    return pgcl_pg_txn_add_admin_event(t, ev->actor, ev->action, ev->target,
                                       ev->details_json ? ev->details_json : "{}", err, cap);
}

pgcl_status pgcl_pg_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap) {
    return pgcl_pg_run(pgcl_audit_pg_of(store), event_job, (void *)ev, err, cap);
}

void pgcl_pg_set_max_pending_rows(pgcl_audit *store, int max_pending_rows) {
    pgcl_pg_writer *w = writer_of(store);
    pthread_mutex_lock(&w->lock);
    if (max_pending_rows > 0) w->max_pending_rows = max_pending_rows;
    pthread_mutex_unlock(&w->lock);
}

int pgcl_pg_pending_rows(pgcl_audit *store) {
    pgcl_pg_writer *w = writer_of(store);
    pthread_mutex_lock(&w->lock);
    int n = w->pending_rows;
    pthread_mutex_unlock(&w->lock);
    return n;
}

bool pgcl_pg_healthy(pgcl_audit *store) {
    return writer_of(store)->healthy;
}

void pgcl_pg_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us) {
    pgcl_pg_writer *w = writer_of(store);
    pthread_mutex_lock(&w->lock);
    *busy_since_us = w->busy_since_us;
    *queued_since_us = w->queued_since_us;
    pthread_mutex_unlock(&w->lock);
}

/* ---- start / stop ---- */

pgcl_status pgcl_pg_writer_start(pgcl_audit_pg *s, char *err, int cap) {
    pgcl_pg_writer *w = calloc(1, sizeof *w);
    if (!w) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    w->s = s;
    pthread_mutex_init(&w->lock, NULL);
    pgcl_cond_init_monotonic(&w->work);
    w->max_pending_rows = s->opts.max_pending_rows > 0 ? s->opts.max_pending_rows : 65536;
    s->writer = w;
    if (!(w->arrays = malloc(sizeof *w->arrays))) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM; /* pgcl_pg_writer_stop (from close) frees w */
    }
    row_arrays_create(w->arrays);
    if (!(w->log = pgcl_pg_log_create(s->writer_id))) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    char sub[ERR_CAP];
    pgcl_status st = connect_writer(w, s->opts.writer_lock_wait_ms, sub, sizeof sub);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "%s", sub);
        return st; /* pgcl_pg_writer_stop (from close) frees w */
    }
    w->healthy = true;
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pgcl_errorf(err, cap, "cannot start the audit writer thread");
        return PGCL_ERR_NOMEM;
    }
    w->started = true;
    pgcl_log_info("audit: writer %s on %s (chain head %" PRId64 ")", s->writer_id, s->redacted, w->head_seq);
    return PGCL_OK;
}

void pgcl_pg_writer_stop(pgcl_audit_pg *s) {
    pgcl_pg_writer *w = s->writer;
    if (!w) return;
    if (w->started) {
        pthread_mutex_lock(&w->lock);
        w->closing = true;
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
    }
    if (w->conn) PQfinish(w->conn);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->work);
    free(w->leaves);
    free(w->packed);
    if (w->arrays) row_arrays_destroy(w->arrays);
    free(w->arrays);
    pgcl_pg_log_destroy(w->log);
    free(w->row_leaves);
    free(w);
    s->writer = NULL;
}
