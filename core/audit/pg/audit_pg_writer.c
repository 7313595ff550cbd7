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
 * holding the fleet's counters lock, and this writer from waiting on one forever.
 *
 * This file: the thread, its queue and its connection. One group's transaction is
 * audit_pg_writer_group.c, the rows' statements audit_pg_writer_rows.c (audit_pg_writer_internal.h). */
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

#define RECONNECT_FIRST_MS 100 /* the reconnection backoff: doubles up to RECONNECT_MAX_MS */
#define RECONNECT_MAX_MS 2000
#define PROBE_INTERVAL_MS 1000 /* an unhealthy, idle writer's probe write */
#define LOCK_RETRY_MS 100      /* between tries of the writer id's lock at start */
#define IDLE_CHECK_MS 1000     /* an idle, healthy writer looks at its connection this often */

/* ---- SQL ---- */

static const char INSERT_GENESIS_SQL[] =
    "INSERT INTO audit_chain (writer_id, seq, kind, row_seq, payload_sha256, prev_hash, hash)"
    " VALUES ($1, 1, 'genesis', 0, $2, $3, $4)";
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
        pgw_edge_append(&e, w->s->writer_id, i + 1, &h, NULL);
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
    pgw_sender_start(&s, w, false);
    pgw_sender_send(&s, "begin", "BEGIN", 0, NULL, NULL, NULL);
    const char *v[] = {id, payload, pgcl_chain_zero_hash, hash};
    pgw_sender_send(&s, "genesis entry", INSERT_GENESIS_SQL, 4, v, NULL, NULL);
    pgw_sender_send(&s, "commit", "COMMIT", 0, NULL, NULL, NULL);
    pgcl_status st = pgw_sender_finish(&s);
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
        pgw_edge_append(&w->edge, w->s->writer_id, 1, &h, NULL); /* leaf 0 completes no node */
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
    if (st == PGCL_OK) st = pgw_prepare_statements(w, err, cap);
    if (st != PGCL_OK) {
        PQfinish(w->conn);
        w->conn = NULL;
        w->prepared = false;
    }
    return st;
}

/* The connection is gone (or unusable): drop it, and let the next group or the idle loop make a new
 * one at once, then with backoff. */
void pgw_lose_connection(pgcl_pg_writer *w, const char *why) {
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

/* The batch, committed: fast mode first, then (after a failed statement) each job alone. */
static void commit_group(pgcl_pg_writer *w, pg_job *batch) {
    /* a connection the server closed while the writer was idle (a restart) is replaced before the
     * group is sent, so that the first requests after a restart do not fail on it */
    if (w->conn && pgcl_pg_gone_while_idle(w->conn)) pgw_lose_connection(w, "the server closed the connection");
    if (!reconnect_if_due(w)) {
        char err[ERR_CAP];
        snprintf(err, sizeof err, "the audit database is unreachable: %.400s", w->down_reason);
        pgw_fail_jobs(batch, PGCL_ERR_DB, err); /* no job ran: each is still PGCL_ERR_DB as queued */
        return;
    }
    if (pgw_run_group(w, batch, false) == GROUP_RETRY_ISOLATED) {
        pgcl_log_warn("audit: writer %s: a statement of a group failed (%s); each request of the group runs alone",
                      w->s->writer_id, batch->err);
        pgw_run_group(w, batch, true);
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
    if (pgcl_pg_broken(w->conn)) pgw_lose_connection(w, err);
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
                    pgw_lose_connection(w, "the server closed the connection");
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
    if (!(w->arrays = malloc(pgw_row_arrays_size()))) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM; /* pgcl_pg_writer_stop (from close) frees w */
    }
    pgw_row_arrays_create(w->arrays);
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
    if (w->arrays) pgw_row_arrays_destroy(w->arrays);
    free(w->arrays);
    pgcl_pg_log_destroy(w->log);
    free(w->row_leaves);
    free(w);
    s->writer = NULL;
}
