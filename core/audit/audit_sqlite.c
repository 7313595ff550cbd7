/* The SQLite audit store (the embedded default): migrations at open, and a single writer thread
 * with group commit. See audit.h for the contract and audit_store_impl.h for the interface it
 * implements. */
#include "audit_store_impl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chain.h"
#include "db.h"
#include "ids.h"
#include "log.h"
#include "log/record_rows.h"
#include "sha256.h"
#include "sqlite_log.h"
#include "sqlite_migrate.h"

#define ERR_CAP 512

/* A caller's unit of work, queued for the writer; lives on the caller's stack, or (an
 * asynchronous append, with on_done set) in an async_append the writer frees after on_done. */
typedef struct audit_job {
    pgcl_audit_fn fn;
    void *ctx;
    int n_rows;             /* counted against the backlog limit */
    bool bounded;           /* refused with PGCL_ERR_BUSY when the backlog is full */
    pgcl_status status;
    bool done;
    pthread_cond_t done_cond; /* signalled for this job alone: no herd of waiters per commit */
    pgcl_audit_done_fn on_done; /* asynchronous: called by the writer, outside the lock, instead */
    void *on_done_ctx;
    char err[ERR_CAP];
    struct audit_job *next;
} audit_job;

/* What a job's callback sees: the connection inside the open transaction, the transaction's
 * timestamp, and the chain. */
struct pgcl_audit_txn {
    struct sqlite_store *a;
    char now[PGCL_TIMESTAMP_LEN + 1];
};

typedef struct sqlite_store {
    pgcl_audit base; /* first: the interface's view of this store */
    char *path;      /* the database file (the read side opens its own connections to it) */
    sqlite3 *db;
    sqlite3_stmt *insert;
    sqlite3_stmt *insert_input;
    sqlite3_stmt *insert_event;
    sqlite3_stmt *insert_shadow;
    pgcl_chain *chain;
    pgcl_sqlite_log *log; /* the transparency log, written beside the chain (sqlite_log.h) */
    char writer_id[PGCL_LOG_WRITER_ID_MAX + 1]; /* the log's, read at open */
    char last_stamp[PGCL_TIMESTAMP_LEN + 1]; /* writer-only: created_at never goes backwards */
    pthread_t writer;
    bool writer_started;
    pthread_mutex_t lock;
    pthread_cond_t work;    /* signalled when a job is queued or on close */
    audit_job *head, *tail; /* FIFO of pending jobs */
    int pending_rows;
    int max_pending_rows;
    bool closing;
    /* Liveness (pgcl_audit_writer_stall_us), on pgcl_monotonic_us's clock, 0 = none: when the
     * writer took its current batch or began a probe write (cleared once it is back at the queue),
     * and when the queue last went from empty to not empty (cleared when the writer takes it). */
    int64_t busy_since_us, queued_since_us;
    _Atomic bool healthy;
    int schema_version;
    /* The WAL checkpointer: copies committed WAL frames into the database file on its own
     * connection, so that the serial writer does not (see on_wal_commit). Not to be confused with
     * server/head_signer.c, which signs the chain head. */
    sqlite3 *ckpt_db;
    pthread_t wal_checkpointer;
    bool wal_checkpointer_started;
    pthread_mutex_t ckpt_lock;
    pthread_cond_t ckpt_wake;
    bool ckpt_wanted, ckpt_closing;
} sqlite_store;

/* The SQLite store behind an interface handle; always-on: a handle of another store here would
 * write rows through the wrong layout. */
static sqlite_store *sqlite_store_of(pgcl_audit *store) {
    PGCL_ASSERT(store->ops == &pgcl_audit_sqlite_ops);
    return (sqlite_store *)store;
}

/* WAL size, in frames (pages), at which the checkpointer is woken: SQLite's own autocheckpoint
 * default. Past WAL_CATCH_UP_FRAMES the writer checkpoints itself after its commit: the log can
 * only start over when a checkpoint has copied every frame, which the checkpointer cannot finish
 * while the writer keeps appending; by then most frames are copied, so the catch-up is short. The
 * WAL so stays under about 2000 frames of 16 KiB (test_audit checks it). */
#define WAL_CHECKPOINT_FRAMES 1000
#define WAL_CATCH_UP_FRAMES 2000

static const char INSERT_SQL[] =
    "INSERT INTO decisions (decision_id, created_at, request_id, item_id, model_name, model_version,"
    " model_sha256, label, label_index, probabilities, toxicity, decision, policy, t_review, t_block,"
    " vector, input_sha256, latency_us, input_digest, input_dtype, trace_id, content_date, territorial_scope,"
    " content_language, leaf_index) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
/* The stored input, beside its row (migration 0008): retention drops it by deleting this row. */
static const char INSERT_INPUT_SQL[] = "INSERT INTO decision_inputs (decision_seq, input) VALUES (?1, ?2)";

/* ---- the WAL checkpointer ---- */

/* Sets *flag under lock and wakes one waiter on cond: how the writer and the WAL checkpointer are
 * asked for work or told to stop. */
static void raise_flag(pthread_mutex_t *lock, pthread_cond_t *cond, bool *flag) {
    pthread_mutex_lock(lock);
    *flag = true;
    pthread_cond_signal(cond);
    pthread_mutex_unlock(lock);
}

/* sqlite3_wal_hook on the writer's connection: runs after each commit, once the write lock is
 * released; n_frames is the WAL's length. Replaces SQLite's autocheckpoint, which would copy the
 * frames back on the writer's own thread, stalling every request queued behind it (bench/
 * audit_write: about 8 % of the writer's CPU per row, in 10-20 ms pauses). */
static int on_wal_commit(void *arg, sqlite3 *db, const char *schema, int n_frames) {
    sqlite_store *a = arg;
    if (n_frames >= WAL_CATCH_UP_FRAMES) {
        int log = 0, copied = 0; /* busy when the checkpointer is at it: the next commit retries */
        sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    } else if (n_frames >= WAL_CHECKPOINT_FRAMES) {
        raise_flag(&a->ckpt_lock, &a->ckpt_wake, &a->ckpt_wanted);
    }
    return SQLITE_OK;
}

/* Passive checkpoints (never blocking the writer) whenever on_wal_commit asks. A failure (an I/O
 * error, a full disk) costs nothing acknowledged: the frames stay in the WAL, the next request
 * retries, and the writer's own health check reports the storage. */
static void *wal_checkpointer_main(void *arg) {
    sqlite_store *a = arg;
    pthread_mutex_lock(&a->ckpt_lock);
    for (;;) {
        while (!a->ckpt_wanted && !a->ckpt_closing) pthread_cond_wait(&a->ckpt_wake, &a->ckpt_lock);
        if (a->ckpt_closing) break;
        a->ckpt_wanted = false;
        pthread_mutex_unlock(&a->ckpt_lock);
        int log = 0, copied = 0;
        int rc = sqlite3_wal_checkpoint_v2(a->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            pgcl_log_warn("audit: checkpoint of the WAL failed (%d of %d frames copied): %s", copied, log,
                          sqlite3_errmsg(a->ckpt_db));
        pthread_mutex_lock(&a->ckpt_lock);
    }
    pthread_mutex_unlock(&a->ckpt_lock);
    return NULL;
}

/* Opens the checkpointer's connection with the writer's synchronous setting (a checkpoint syncs
 * the database file before the WAL is reused, unless synchronous is OFF) and starts the thread. */
static pgcl_status wal_checkpointer_start(sqlite_store *a, const pgcl_audit_options *opts, char *err, int cap) {
    char sub[ERR_CAP];
    if (sqlite3_open_v2(opts->path, &a->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        pgcl_db_exec(a->ckpt_db, opts->synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                     sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: checkpointer connection: %s", opts->path,
                    a->ckpt_db ? sqlite3_errmsg(a->ckpt_db) : "out of memory");
        return PGCL_ERR_DB;
    }
    sqlite3_busy_timeout(a->ckpt_db, opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : PGCL_DB_BUSY_TIMEOUT_MS);
    if (pthread_create(&a->wal_checkpointer, NULL, wal_checkpointer_main, a) != 0) {
        pgcl_errorf(err, cap, "cannot start the audit WAL checkpointer thread");
        return PGCL_ERR_DB;
    }
    a->wal_checkpointer_started = true;
    sqlite3_wal_hook(a->db, on_wal_commit, a);
    return PGCL_OK;
}

/* ---- the writer ---- */

struct sqlite3 *pgcl_audit_txn_db(pgcl_audit_txn *t) { return t->a->db; }

const char *pgcl_audit_txn_now(pgcl_audit_txn *t) { return t->now; }

pgcl_status pgcl_audit_txn_chain(pgcl_audit_txn *t, const char *kind, int64_t row_seq, char *err, int cap) {
    return pgcl_chain_record(t->a->chain, kind, row_seq, err, cap);
}

pgcl_status pgcl_audit_txn_log(pgcl_audit_txn *t, const struct pgcl_record *r, int64_t *leaf_index, char *err,
                               int cap) {
    return pgcl_sqlite_log_add(t->a->log, r, leaf_index, err, cap);
}

/* The SHA-256 of decision row r's stored input into input_digest (the caller's, or computed);
 * false when r stores no input. */
static bool stored_input_digest(const pgcl_decision_row *r, unsigned char input_digest[PGCL_SHA256_BYTES]) {
    if (!r->input || !r->input_dtype) return false;
    if (r->input_digest) memcpy(input_digest, r->input_digest, PGCL_SHA256_BYTES);
    else pgcl_sha256(r->input, (size_t)r->input_bytes, input_digest);
    return true;
}

/* Inserts decision row r (its stored input, if any, into decision_inputs; input_digest from
 * stored_input_digest, NULL when none) at its log leaf leaf_index (-1: NULL) and describes what it
 * inserted in *v for the chain: the values as bound, so the chain needs no read-back. Returns
 * SQLITE_DONE or the failing step's code. */
static int insert_row(sqlite_store *a, const pgcl_decision_row *r, const char *created_at,
                      const unsigned char *input_digest, int64_t leaf_index, pgcl_chain_decision_values *v) {
    bool input_stored = input_digest != NULL;
    sqlite3_stmt *s = a->insert;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    sqlite3_bind_text(s, 1, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, r->request_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, r->item_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, r->model_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, r->model_version, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, r->model_sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, r->label, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 9, r->label_index);
    sqlite3_bind_text(s, 10, r->probabilities_json, -1, SQLITE_STATIC);
    if (r->has_toxicity) sqlite3_bind_double(s, 11, r->toxicity);
    sqlite3_bind_text(s, 12, r->decision, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 13, r->policy_json, -1, SQLITE_STATIC);
    if (r->has_thresholds) {
        sqlite3_bind_double(s, 14, r->t_review);
        sqlite3_bind_double(s, 15, r->t_block);
    }
    /* float32 little-endian: the in-memory layout on every platform pgcld builds for. */
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vector BLOBs are stored little-endian");
    sqlite3_bind_blob(s, 16, r->vector, r->d * (int)sizeof(float), SQLITE_STATIC);
    sqlite3_bind_text(s, 17, r->input_sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 18, r->latency_us);
    if (input_stored) {
        sqlite3_bind_blob(s, 19, input_digest, PGCL_SHA256_BYTES, SQLITE_STATIC);
        sqlite3_bind_text(s, 20, r->input_dtype, -1, SQLITE_STATIC);
    }
    const char *const extension[] = {r->trace_id, r->content_date, r->territorial_scope, r->content_language};
    _Static_assert(sizeof extension / sizeof extension[0] == PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS,
                   "the decision leaf's extension, bound as the chain encodes it");
    for (int i = 0; i < PGCL_CHAIN_DECISIONS_EXTENSION_COLUMNS; i++)
        if (extension[i]) sqlite3_bind_text(s, 21 + i, extension[i], -1, SQLITE_STATIC);
    if (leaf_index >= 0) sqlite3_bind_int64(s, 25, leaf_index);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) return rc;
    int64_t seq = sqlite3_last_insert_rowid(a->db);
    if (input_stored) {
        sqlite3_stmt *in = a->insert_input;
        sqlite3_bind_int64(in, 1, seq);
        sqlite3_bind_blob(in, 2, r->input, r->input_bytes, SQLITE_STATIC);
        rc = sqlite3_step(in);
        sqlite3_reset(in);
        sqlite3_clear_bindings(in);
        if (rc != SQLITE_DONE) return rc;
    }
    *v = (pgcl_chain_decision_values){
        .seq = seq, .decision_id = r->decision_id, .created_at = created_at, .request_id = r->request_id,
        .item_id = r->item_id, .model_name = r->model_name, .model_version = r->model_version,
        .model_sha256 = r->model_sha256, .label = r->label, .label_index = r->label_index,
        .probabilities = r->probabilities_json, .has_toxicity = r->has_toxicity, .toxicity = r->toxicity,
        .decision = r->decision, .policy = r->policy_json, .has_thresholds = r->has_thresholds,
        .t_review = r->t_review, .t_block = r->t_block, .vector = r->vector,
        .vector_bytes = (size_t)r->d * sizeof(float), .input_sha256 = r->input_sha256, .latency_us = r->latency_us,
        .input_digest = input_stored ? input_digest : NULL, .input_dtype = input_stored ? r->input_dtype : NULL,
        .trace_id = r->trace_id, .content_date = r->content_date, .territorial_scope = r->territorial_scope,
        .content_language = r->content_language};
    return SQLITE_DONE;
}

typedef struct rows_ctx {
    const pgcl_decision_row *rows;
    int n;
    const pgcl_idem_entry *idem; /* optional: stored after the rows, in the same savepoint */
} rows_ctx;

static pgcl_status decisions_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const rows_ctx *rc = ctx;
    for (int i = 0; i < rc->n; i++) {
        unsigned char digest[PGCL_SHA256_BYTES];
        const unsigned char *input_digest = stored_input_digest(&rc->rows[i], digest) ? digest : NULL;
        int64_t leaf_index = -1;
        pgcl_status logged =
            pgcl_sqlite_log_add_decision(t->a->log, &rc->rows[i], t->now, input_digest, &leaf_index, err, cap);
        if (logged != PGCL_OK) return logged;
        pgcl_chain_decision_values v;
        if (insert_row(t->a, &rc->rows[i], t->now, input_digest, leaf_index, &v) != SQLITE_DONE) {
            pgcl_errorf(err, cap, "insert decision: %s", sqlite3_errmsg(t->a->db));
            return PGCL_ERR_DB;
        }
        pgcl_status st = pgcl_chain_record_decision(t->a->chain, &v, err, cap);
        if (st != PGCL_OK) return st;
    }
    return rc->idem ? pgcl_idem_store(t, (void *)rc->idem, err, cap) : PGCL_OK;
}

static pgcl_status event_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const pgcl_admin_event *ev = ctx;
    sqlite3_stmt *s = t->a->insert_event;
    char id[PGCL_UUID_LEN + 1];
    pgcl_uuid7(id);
    const char *details = ev->details_json ? ev->details_json : "{}";
    pgcl_record record;
    int64_t leaf_index = -1;
    pgcl_status st = pgcl_record_of_admin_event(id, t->now, ev->actor, ev->action, ev->target, details, &record, err,
                                                cap);
    if (st == PGCL_OK) st = pgcl_audit_txn_log(t, &record, &leaf_index, err, cap);
    if (st != PGCL_OK) return st;
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, t->now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, ev->actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, ev->action, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, ev->target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, details, -1, SQLITE_STATIC);
    if (leaf_index >= 0) sqlite3_bind_int64(s, 7, leaf_index);
    else sqlite3_bind_null(s, 7);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "insert event: %s", sqlite3_errmsg(t->a->db));
        return PGCL_ERR_DB;
    }
    return pgcl_audit_txn_chain(t, "admin_events", sqlite3_last_insert_rowid(t->a->db), err, cap);
}

typedef struct shadow_ctx {
    const pgcl_shadow_row *rows;
    int n;
} shadow_ctx;

/* Shadow outputs are derived data, not audit events: not chained. */
static pgcl_status shadow_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    const shadow_ctx *sc = ctx;
    sqlite3_stmt *s = t->a->insert_shadow;
    for (int i = 0; i < sc->n; i++) {
        const pgcl_shadow_row *r = &sc->rows[i];
        sqlite3_reset(s);
        const char *text[] = {r->decision_id, t->now, r->model_name, r->primary_version, r->shadow_version,
                              r->shadow_sha256, r->primary_label, r->shadow_label, r->primary_decision, r->shadow_decision};
        for (int k = 0; k < 10; k++) sqlite3_bind_text(s, k + 1, text[k], -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 11, r->primary_score);
        sqlite3_bind_double(s, 12, r->shadow_score);
        sqlite3_bind_text(s, 13, r->probabilities_json, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
            pgcl_errorf(err, cap, "insert shadow row: %s", sqlite3_errmsg(t->a->db));
            return PGCL_ERR_DB;
        }
    }
    return PGCL_OK;
}

/* The transaction's timestamp: now, but never before the previous transaction's, so that
 * created_at follows seq order (time-range filters rely on it). */
static void stamp(sqlite_store *a, char out[PGCL_TIMESTAMP_LEN + 1]) {
    pgcl_timestamp_now(out);
    if (strcmp(out, a->last_stamp) < 0) memcpy(out, a->last_stamp, sizeof a->last_stamp);
    memcpy(a->last_stamp, out, sizeof a->last_stamp);
}

static void rollback(sqlite_store *a) {
    char ignored[64];
    pgcl_db_exec(a->db, "ROLLBACK", ignored, sizeof ignored);
}

/* Opens the batch's write transaction at time now and reads the chain head and the log's state;
 * on failure every job of the batch fails with the reason and false is returned. */
static bool begin_batch(sqlite_store *a, const char *now, audit_job *batch) {
    char err[ERR_CAP];
    if (pgcl_db_exec(a->db, "BEGIN IMMEDIATE", err, sizeof err) == SQLITE_OK &&
        pgcl_chain_begin(a->chain, err, sizeof err) == PGCL_OK &&
        pgcl_sqlite_log_begin(a->log, now, err, sizeof err) == PGCL_OK)
        return true;
    rollback(a);
    for (audit_job *j = batch; j; j = j->next) {
        j->status = PGCL_ERR_DB;
        memcpy(j->err, err, ERR_CAP);
    }
    return false;
}

/* Runs the jobs in the open transaction, in order, with no savepoint; stops at the first job that
 * fails and returns it (NULL when all succeeded). */
static audit_job *run_plain(pgcl_audit_txn *txn, audit_job *batch) {
    for (audit_job *j = batch; j; j = j->next) {
        j->status = j->fn(txn, j->ctx, j->err, ERR_CAP);
        if (j->status != PGCL_OK) return j;
    }
    return NULL;
}

/* Runs the jobs in the open transaction, each inside its own savepoint: a job that fails is
 * undone alone and keeps its error; the others stay. */
static void run_isolated(sqlite_store *a, pgcl_audit_txn *txn, audit_job *batch) {
    for (audit_job *j = batch; j; j = j->next) {
        char sub[ERR_CAP];
        if (pgcl_db_exec(a->db, "SAVEPOINT job", sub, sizeof sub) != SQLITE_OK) {
            j->status = PGCL_ERR_DB;
            snprintf(j->err, ERR_CAP, "%s", sub);
            continue;
        }
        size_t mark = pgcl_chain_mark(a->chain), log_mark = pgcl_sqlite_log_mark(a->log);
        j->status = j->fn(txn, j->ctx, j->err, ERR_CAP);
        if (j->status == PGCL_OK) {
            pgcl_db_exec(a->db, "RELEASE job", sub, sizeof sub);
        } else {
            pgcl_db_exec(a->db, "ROLLBACK TO job", sub, sizeof sub);
            pgcl_db_exec(a->db, "RELEASE job", sub, sizeof sub);
            pgcl_chain_rewind(a->chain, mark, sub, sizeof sub); /* what the job chained went back with it */
            pgcl_sqlite_log_rewind(a->log, log_mark);
        }
    }
}

/* Commits the jobs of one batch in one transaction, all-or-nothing per job: a job that fails is
 * undone alone and reports its error; the others commit together. If the commit itself fails,
 * every job of the batch fails.
 *
 * Jobs almost never fail, so the batch first runs with no savepoints (a savepoint per job costs
 * more than a one-row job itself: bench/audit_write --batch 1 --threads 64 commits 1.75x the rows
 * per second without them). Only when a job fails is the transaction rolled back and the batch run
 * again with a savepoint per job; a job callback must therefore be safe to run twice (it only
 * writes through the transaction and into its own context). */
static void commit_batch(sqlite_store *a, audit_job *batch) {
    pgcl_audit_txn txn = {.a = a};
    stamp(a, txn.now);
    if (!begin_batch(a, txn.now, batch)) return;
    audit_job *failed = run_plain(&txn, batch);
    if (failed) {
        rollback(a);
        if (!batch->next) return; /* a job alone: its failure is the batch's */
        if (!begin_batch(a, txn.now, batch)) return; /* both set every job's status anew */
        run_isolated(a, &txn, batch);
    }
    char err[ERR_CAP];
    if (pgcl_sqlite_log_seal(a->log, err, sizeof err) != PGCL_OK ||
        pgcl_chain_seal(a->chain, err, sizeof err) != PGCL_OK ||
        pgcl_db_exec(a->db, "COMMIT", err, sizeof err) != SQLITE_OK) {
        rollback(a);
        for (audit_job *j = batch; j; j = j->next) {
            if (j->status != PGCL_OK) continue;
            j->status = PGCL_ERR_DB;
            memcpy(j->err, err, ERR_CAP);
        }
        return;
    }
    pgcl_sqlite_log_committed(a->log);
    pgcl_audit_note_commit(&a->base);
}

/* After a failed write /readyz answers 503, so load balancers stop sending the requests whose
 * commits would show that the disk works again: the writer checks by itself, once a second while
 * unhealthy and idle, with a transaction that rewrites the database header unchanged (PRAGMA
 * user_version set to its own value; pgcld does not use it). It takes the same WAL write and fsync
 * as a decision, and its success makes the store healthy again (docs/operations.md, "Storage
 * faults"). SQLite needs nothing else: a failed COMMIT leaves no transaction open. */
#define PROBE_INTERVAL_S 1

static void probe_write(sqlite_store *a) {
    char sql[64], err[ERR_CAP];
    sqlite3_stmt *s = NULL;
    int version = 0;
    if (sqlite3_prepare_v2(a->db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d", version);
    if (pgcl_db_exec(a->db, "BEGIN IMMEDIATE", err, sizeof err) == SQLITE_OK &&
        pgcl_db_exec(a->db, sql, err, sizeof err) == SQLITE_OK &&
        pgcl_db_exec(a->db, "COMMIT", err, sizeof err) == SQLITE_OK) {
        pgcl_log_info("audit: a probe write succeeded; the audit log is writable again");
        a->healthy = true;
        return;
    }
    char ignored[64];
    pgcl_db_exec(a->db, "ROLLBACK", ignored, sizeof ignored);
    pgcl_log_warn("audit: probe write failed (retrying every %d s): %s", PROBE_INTERVAL_S, err);
}

static void finish_async_jobs(audit_job *list);

static void *writer_main(void *arg) {
    sqlite_store *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->head && !a->closing) {
            if (a->healthy) {
                pthread_cond_wait(&a->work, &a->lock);
                continue;
            }
            struct timespec until = pgcl_monotonic_timespec(pgcl_monotonic_us() + PROBE_INTERVAL_S * 1000000LL);
            if (pthread_cond_timedwait(&a->work, &a->lock, &until) == ETIMEDOUT && !a->head && !a->closing) {
                a->busy_since_us = pgcl_monotonic_us();
                pthread_mutex_unlock(&a->lock);
                probe_write(a);
                pthread_mutex_lock(&a->lock);
                a->busy_since_us = 0;
            }
        }
        if (!a->head && a->closing) break;
        audit_job *batch = a->head;
        a->head = a->tail = NULL;
        a->busy_since_us = pgcl_monotonic_us();
        a->queued_since_us = 0;
        pthread_mutex_unlock(&a->lock);

        commit_batch(a, batch);
        bool db_ok = true;
        for (audit_job *j = batch; j; j = j->next) {
            if (j->status == PGCL_ERR_DB) {
                db_ok = false;
                pgcl_log_error("audit: write failed: %s", j->err);
            }
        }
        if (db_ok && !a->healthy) pgcl_log_info("audit: writes succeed again");
        a->healthy = db_ok;

        audit_job *async_jobs = NULL;
        pthread_mutex_lock(&a->lock);
        for (audit_job *j = batch, *next; j; j = next) {
            next = j->next; /* a blocking job belongs to its caller once done is set */
            a->pending_rows -= j->n_rows;
            if (j->on_done) {
                j->next = async_jobs;
                async_jobs = j;
                continue;
            }
            j->done = true;
            pthread_cond_signal(&j->done_cond); /* under the lock: the caller cannot return before */
        }
        if (async_jobs) {
            pthread_mutex_unlock(&a->lock); /* a callback may append again */
            finish_async_jobs(async_jobs);
            pthread_mutex_lock(&a->lock);
        }
        a->busy_since_us = 0;
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* Queues a job for the writer; the caller holds a->lock. PGCL_OK, or the refusal (closing,
 * backlog full) with its reason in err and the job not queued. */
static pgcl_status enqueue_locked(sqlite_store *a, audit_job *job, char *err, int cap) {
    if (a->closing) {
        pgcl_errorf(err, cap, "audit store is closing");
        return PGCL_ERR_CLOSED;
    }
    if (job->bounded && a->pending_rows > 0 && a->pending_rows + job->n_rows > a->max_pending_rows) {
        pgcl_errorf(err, cap, "audit backlog is full (%d rows pending)", a->pending_rows);
        return PGCL_ERR_BUSY;
    }
    a->pending_rows += job->n_rows;
    if (!a->head) a->queued_since_us = pgcl_monotonic_us();
    if (a->tail) a->tail->next = job;
    else a->head = job;
    a->tail = job;
    pthread_cond_signal(&a->work);
    return PGCL_OK;
}

/* Queues a job and waits until the writer has committed (or failed) it. */
static pgcl_status submit(sqlite_store *a, audit_job *job, char *err, int cap) {
    pthread_mutex_lock(&a->lock);
    pthread_cond_init(&job->done_cond, NULL);
    pgcl_status st = enqueue_locked(a, job, err, cap);
    while (st == PGCL_OK && !job->done) pthread_cond_wait(&job->done_cond, &a->lock);
    pthread_mutex_unlock(&a->lock);
    pthread_cond_destroy(&job->done_cond);
    if (st != PGCL_OK) return st;
    if (job->status != PGCL_OK) pgcl_errorf(err, cap, "%s", job->err);
    return job->status;
}

/* An asynchronous append: the job and what its callback reads, in one allocation. */
typedef struct async_append {
    audit_job job; /* first: the writer's list links the jobs */
    rows_ctx rows;
} async_append;

/* The writer's end of asynchronous appends: each callback, then the job's memory. */
static void finish_async_jobs(audit_job *list) {
    for (audit_job *j = list, *next; j; j = next) {
        next = j->next;
        j->on_done(j->on_done_ctx, j->status, j->status == PGCL_OK ? "" : j->err);
        free(j); /* the async_append that begins with it */
    }
}

static void sqlite_append_async(pgcl_audit *store, const pgcl_decision_row *rows, int n,
                                const pgcl_idem_entry *idem, pgcl_audit_done_fn done, void *done_ctx) {
    sqlite_store *a = sqlite_store_of(store);
    async_append *job = calloc(1, sizeof *job);
    if (!job) {
        done(done_ctx, PGCL_ERR_NOMEM, "out of memory");
        return;
    }
    job->rows = (rows_ctx){rows, n, idem};
    job->job = (audit_job){.fn = decisions_fn, .ctx = &job->rows, .n_rows = n, .bounded = true,
                           .status = PGCL_ERR_DB, .on_done = done, .on_done_ctx = done_ctx};
    char err[ERR_CAP];
    pthread_mutex_lock(&a->lock);
    pgcl_status st = enqueue_locked(a, &job->job, err, sizeof err);
    pthread_mutex_unlock(&a->lock);
    if (st == PGCL_OK) return;
    free(job);
    done(done_ctx, st, err);
}

static pgcl_status sqlite_run(pgcl_audit *store, pgcl_audit_fn fn, void *ctx, char *err, int cap) {
    audit_job job = {.fn = fn, .ctx = ctx, .n_rows = 1, .status = PGCL_ERR_DB};
    return submit(sqlite_store_of(store), &job, err, cap);
}

static pgcl_status sqlite_append(pgcl_audit *store, const pgcl_decision_row *rows, int n,
                                 const pgcl_idem_entry *idem, char *err, int cap) {
    rows_ctx ctx = {rows, n, idem};
    audit_job job = {.fn = decisions_fn, .ctx = &ctx, .n_rows = n, .bounded = true, .status = PGCL_ERR_DB};
    return submit(sqlite_store_of(store), &job, err, cap);
}

static pgcl_status sqlite_record_event(pgcl_audit *store, const pgcl_admin_event *ev, char *err, int cap) {
    return sqlite_run(store, event_fn, (void *)ev, err, cap);
}

static pgcl_status sqlite_append_shadow(pgcl_audit *store, const pgcl_shadow_row *rows, int n, char *err, int cap) {
    shadow_ctx ctx = {rows, n};
    audit_job job = {.fn = shadow_fn, .ctx = &ctx, .n_rows = n, .bounded = true, .status = PGCL_ERR_DB};
    return submit(sqlite_store_of(store), &job, err, cap);
}

static void sqlite_set_max_pending_rows(pgcl_audit *store, int max_pending_rows) {
    sqlite_store *a = sqlite_store_of(store);
    pthread_mutex_lock(&a->lock);
    if (max_pending_rows > 0) a->max_pending_rows = max_pending_rows;
    pthread_mutex_unlock(&a->lock);
}

static int sqlite_pending_rows(pgcl_audit *store) {
    sqlite_store *a = sqlite_store_of(store);
    pthread_mutex_lock(&a->lock);
    int n = a->pending_rows;
    pthread_mutex_unlock(&a->lock);
    return n;
}

const char *pgcl_audit_sqlite_path(pgcl_audit *store) {
    if (store->ops == &pgcl_audit_sqlite_read_only_ops) return pgcl_audit_sqlite_read_only_uri(store);
    return sqlite_store_of(store)->path;
}

static bool sqlite_healthy(pgcl_audit *store) { return sqlite_store_of(store)->healthy; }

/* The database file and its write-ahead log, as stat() sees them now (the -shm index is not data);
 * a -wal that does not exist (checkpointed and removed) counts 0. */
static bool sqlite_size_bytes(pgcl_audit *store, int64_t *bytes) {
    const char *path = sqlite_store_of(store)->path;
    struct stat st;
    if (stat(path, &st) != 0) return false;
    int64_t total = (int64_t)st.st_size;
    char wal[PATH_MAX];
    int n = snprintf(wal, sizeof wal, "%s-wal", path);
    if (n > 0 && (size_t)n < sizeof wal && stat(wal, &st) == 0) total += (int64_t)st.st_size;
    *bytes = total;
    return true;
}

static void sqlite_writer_activity(pgcl_audit *store, int64_t *busy_since_us, int64_t *queued_since_us) {
    sqlite_store *a = sqlite_store_of(store);
    pthread_mutex_lock(&a->lock);
    *busy_since_us = a->busy_since_us;
    *queued_since_us = a->queued_since_us;
    pthread_mutex_unlock(&a->lock);
}

static int sqlite_schema_version(pgcl_audit *store) { return sqlite_store_of(store)->schema_version; }

static const char *sqlite_writer_id(pgcl_audit *store) { return sqlite_store_of(store)->writer_id; }

/* ---- open / close ---- */

static void sqlite_close(pgcl_audit *store);

pgcl_status pgcl_audit_sqlite_open(const pgcl_audit_options *opts, pgcl_audit **out, char *err, int cap) {
    *out = NULL;
    if (opts->read_only) return pgcl_audit_sqlite_read_only_open(opts, out, err, cap);
    sqlite_store *a = calloc(1, sizeof *a);
    if (!a) return PGCL_ERR_NOMEM;
    a->base.ops = &pgcl_audit_sqlite_ops;
    if (!(a->path = strdup(opts->path))) {
        free(a);
        return PGCL_ERR_NOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    pgcl_cond_init_monotonic(&a->work); /* the unhealthy writer's probe interval */
    pthread_mutex_init(&a->ckpt_lock, NULL);
    pthread_cond_init(&a->ckpt_wake, NULL);
    a->max_pending_rows = opts->max_pending_rows > 0 ? opts->max_pending_rows : 65536;
    a->healthy = true;
    pgcl_status st = PGCL_ERR_DB;
    char sub[ERR_CAP];
    int rc = sqlite3_open_v2(opts->path, &a->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot open: %s", opts->path, a->db ? sqlite3_errmsg(a->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(a->db, opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : PGCL_DB_BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(a->db, 1);
    /* 16 KiB pages for a new database (an existing one keeps its size): a decision row with its
     * stored input is 3-4 KiB, so larger pages mean fewer WAL frames, write calls and B-tree
     * splits per commit (bench/audit_write: about a fifth fewer CPU seconds per row). Must come
     * before the switch to WAL, which fixes the page size. */
    if (pgcl_db_exec(a->db, "PRAGMA page_size=16384", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", opts->path, sub);
        goto fail;
    }
    /* WAL: readers (audit queries) never block the writer. */
    sqlite3_stmt *jm = NULL;
    if (sqlite3_prepare_v2(a->db, "PRAGMA journal_mode=WAL", -1, &jm, NULL) != SQLITE_OK ||
        sqlite3_step(jm) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(jm, 0), "wal") != 0) {
        pgcl_errorf(err, cap, "%s: cannot switch to WAL mode: %s", opts->path, sqlite3_errmsg(a->db));
        sqlite3_finalize(jm);
        goto fail;
    }
    sqlite3_finalize(jm);
    const char *sync = opts->synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL";
    if (pgcl_db_exec(a->db, sync, sub, sizeof sub) != SQLITE_OK ||
        pgcl_db_exec(a->db, "PRAGMA foreign_keys=ON", sub, sizeof sub) != SQLITE_OK ||
        /* 8 MiB of page cache instead of SQLite's 2 MiB: more of the indexes stays in memory as
         * the log grows (bench/audit_write at a million rows: 32 MiB saved ~12 % of the writer's
         * CPU per row, but it is resident memory, and the RSS budget is 64 MB). */
        pgcl_db_exec(a->db, "PRAGMA cache_size=-8192", sub, sizeof sub) != SQLITE_OK ||
        /* The savepoints' statement journal in memory (commit_batch's fallback, when a job of a
         * shared transaction failed): by default SQLite spills it to a new file in the temp
         * directory once it passes 64 KiB, as every busy group commit does (about 5 KiB written
         * and unlinked per decision row when each job had its savepoint). */
        pgcl_db_exec(a->db, "PRAGMA temp_store=MEMORY", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", opts->path, sub);
        goto fail;
    }
    if ((st = pgcl_sqlite_apply_migrations(a->db, opts->path, opts->writer_id, &a->schema_version, err, cap)) !=
        PGCL_OK)
        goto fail;
    st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(a->db, INSERT_SQL, -1, &a->insert, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db, INSERT_INPUT_SQL, -1, &a->insert_input, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db,
                           "INSERT INTO admin_events (event_id, created_at, actor, action, target, details,"
                           " leaf_index) VALUES (?,?,?,?,?,?,?)",
                           -1, &a->insert_event, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db,
                           "INSERT INTO shadow_decisions (decision_id, created_at, model_name, primary_version,"
                           " shadow_version, shadow_sha256, primary_label, shadow_label, primary_decision,"
                           " shadow_decision, primary_score, shadow_score, probabilities)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &a->insert_shadow, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", opts->path, sqlite3_errmsg(a->db));
        goto fail;
    }
    if (!(a->chain = pgcl_chain_create_encoding(
              a->db, opts->chain_encoding ? opts->chain_encoding : PGCL_CHAIN_ENCODING_DEFAULT, err, cap)))
        goto fail;
    if (!(a->log = pgcl_sqlite_log_create(a->db, err, cap))) goto fail;
    pgcl_audit_log_info state;
    bool has_log = false;
    if ((st = pgcl_sqlite_log_state(a->db, &state, &has_log, err, cap)) != PGCL_OK) goto fail;
    st = PGCL_ERR_DB;
    PGCL_ASSERT(has_log); /* the migrations' transaction created the writer row */
    memcpy(a->writer_id, state.writer_id, sizeof a->writer_id);
    /* created_at must keep following seq across restarts, even if the clock stepped back. */
    sqlite3_stmt *last = NULL;
    if (sqlite3_prepare_v2(a->db, "SELECT max(created_at) FROM decisions", -1, &last, NULL) == SQLITE_OK &&
        sqlite3_step(last) == SQLITE_ROW && sqlite3_column_type(last, 0) == SQLITE_TEXT)
        snprintf(a->last_stamp, sizeof a->last_stamp, "%s", (const char *)sqlite3_column_text(last, 0));
    sqlite3_finalize(last);
    if ((st = wal_checkpointer_start(a, opts, err, cap)) != PGCL_OK) goto fail;
    st = PGCL_ERR_DB;
    if (pthread_create(&a->writer, NULL, writer_main, a) != 0) {
        pgcl_errorf(err, cap, "cannot start the audit writer thread");
        goto fail;
    }
    a->writer_started = true;
    *out = &a->base;
    return PGCL_OK;
fail:
    sqlite_close(&a->base);
    return st;
}

static void sqlite_close(pgcl_audit *store) {
    sqlite_store *a = sqlite_store_of(store);
    if (a->writer_started) {
        raise_flag(&a->lock, &a->work, &a->closing);
        pthread_join(a->writer, NULL);
    }
    if (a->wal_checkpointer_started) {
        raise_flag(&a->ckpt_lock, &a->ckpt_wake, &a->ckpt_closing);
        pthread_join(a->wal_checkpointer, NULL);
    }
    if (a->db) sqlite3_wal_hook(a->db, NULL, NULL);
    if (a->ckpt_db) sqlite3_close(a->ckpt_db); /* first: the last connection to close checkpoints */
    pgcl_chain_destroy(a->chain);
    pgcl_sqlite_log_destroy(a->log);
    sqlite3_finalize(a->insert);
    sqlite3_finalize(a->insert_input);
    sqlite3_finalize(a->insert_event);
    sqlite3_finalize(a->insert_shadow);
    if (a->db) sqlite3_close(a->db);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->ckpt_lock);
    pthread_cond_destroy(&a->ckpt_wake);
    free(a->path);
    free(a);
}

const pgcl_audit_store_ops pgcl_audit_sqlite_ops = {
    .name = "sqlite",
    .size_bytes = sqlite_size_bytes,
    .close = sqlite_close,
    .append = sqlite_append,
    .append_async = sqlite_append_async,
    .append_shadow = sqlite_append_shadow,
    .record_event = sqlite_record_event,
    .run = sqlite_run,
    .set_max_pending_rows = sqlite_set_max_pending_rows,
    .pending_rows = sqlite_pending_rows,
    .healthy = sqlite_healthy,
    .writer_activity = sqlite_writer_activity,
    .schema_version = sqlite_schema_version,
    .read_decision = pgcl_sqlite_read_decision,
    .read_decisions = pgcl_sqlite_read_decisions,
    .read_contests = pgcl_sqlite_read_contests,
    .read_stats = pgcl_sqlite_read_stats,
    .open_export = pgcl_sqlite_open_export,
    .read_stored_decision = pgcl_sqlite_read_stored_decision,
    .read_idempotency_key = pgcl_sqlite_read_idempotency_key,
    .read_proof = pgcl_sqlite_read_proof,
    .read_consistency = pgcl_sqlite_read_consistency,
    .read_archive_where = pgcl_sqlite_read_archive_where,
    .verify_chain = pgcl_sqlite_verify_chain,
    .create_checkpoint = pgcl_sqlite_create_checkpoint,
    .create_key = pgcl_sqlite_create_key,
    .revoke_key = pgcl_sqlite_revoke_key,
    .import_key = pgcl_sqlite_import_key,
    .open_keyring = pgcl_sqlite_open_keyring,
    .read_keys = pgcl_sqlite_read_keys,
    .read_activations = pgcl_sqlite_read_activations,
    .read_shadow_report = pgcl_sqlite_read_shadow_report,
    .file_contest = pgcl_sqlite_file_contest,
    .resolve_contest = pgcl_sqlite_resolve_contest,
    .drop_inputs = pgcl_sqlite_drop_inputs,
    .logs = pgcl_sqlite_logs,
    .writer_id = sqlite_writer_id,
    .log_read = pgcl_sqlite_log_read,
    .log_checkpoint = pgcl_sqlite_log_checkpoint,
    .log_put_checkpoint = pgcl_sqlite_log_put_checkpoint,
    .log_add_cosignatures = pgcl_sqlite_log_add_cosignatures,
    .log_leaf_of = pgcl_sqlite_log_leaf_of,
};
