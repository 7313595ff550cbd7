/* The PostgreSQL store's writer, inside (audit_pg_writer.c describes it): the state its three files
 * share. audit_pg_writer.c holds the thread, its queue and its connection; audit_pg_writer_group.c
 * one group's transaction (the statement sender, the commit entry, the round trips);
 * audit_pg_writer_rows.c the rows' statements (the transaction's API for jobs, per-row and array
 * inserts). Nothing here is for other files of the store. */
#ifndef PGCL_AUDIT_PG_WRITER_INTERNAL_H
#define PGCL_AUDIT_PG_WRITER_INTERNAL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#include "audit_pg.h"
#include "merkle.h"
#include "pg_log.h"

#define ERR_CAP 512
#define PIPE_CHUNK 256 /* statements sent before the pipeline is synced and read */

/* fleet_counters' columns, in the order of COUNTERS_SQL's parameters and RETURNING. The first four
 * are also pgcl_chain_tables' order. */
enum { T_DECISIONS, T_ADMIN_EVENTS, T_CONTESTS, T_RESOLUTIONS, T_SHADOWS, N_COUNTERS };

/* The prepared statements (audit_pg_writer_group.c) that the rows' statements send. */
extern const char INSERT_DECISIONS_SQL[];
extern const char INSERT_INPUTS_SQL[];
extern const char INSERT_SHADOWS_SQL[];
extern const char IDEM_DROP_EXPIRED_SQL[];
extern const char IDEM_STORE_SQL[];

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

static inline void fmt_i64(char out[24], int64_t v) {
    snprintf(out, 24, "%" PRId64, v);
}

/* A double as text that reads back to the same bits (float8 in, the leaf hashes the double). */
static inline void fmt_double(char out[32], double v) {
    snprintf(out, 32, "%.17g", v);
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

/* The most parameters of one statement: a decision row's (DECISION_COLUMNS, the widest). */
#define SENDER_MAX_PARAMS 32

typedef enum { GROUP_DONE, GROUP_RETRY_ISOLATED } group_outcome;

/* ---- audit_pg_writer.c ---- */

/* The connection is gone (or unusable): drop it, and let the next group or the idle loop make a new
 * one at once, then with backoff. Writer thread only. */
void pgw_lose_connection(pgcl_pg_writer *w, const char *why);

/* ---- audit_pg_writer_group.c ---- */

/* Every job of the batch not already failed by itself (its own rule, a taken key) fails with st. */
void pgw_fail_jobs(pg_job *batch, pgcl_status st, const char *err);
/* A sender on w's connection, pipelined or not; false (the failure in s) when pipeline mode fails. */
bool pgw_sender_start(sender *s, const pgcl_pg_writer *w, bool pipelined);
/* Runs (or sends) one statement with parameters: values[i] text unless binary_len[i] >= 0 (then
 * binary_len[i] bytes of bytea); a result kept in *keep when keep is not NULL. */
void pgw_sender_send(sender *s, const char *what, const char *sql, int n, const char *const *values,
                     const int *binary_len, PGresult **keep);
/* Reads what is left and leaves pipeline mode; returns the sender's status. */
pgcl_status pgw_sender_finish(sender *s);
/* Appends entry seq (= size + 1) with hash `entry` to the log edge; the nodes it completes are sent
 * with s (none when s is NULL). */
void pgw_edge_append(log_edge *e, const char *writer_id, int64_t seq, const pgcl_merkle_hash *entry, sender *s);
/* Prepares every statement of the group on w's connection (the schema is there). */
pgcl_status pgw_prepare_statements(pgcl_pg_writer *w, char *err, int cap);
/* One transaction for the batch (isolated: each job in its own savepoint). GROUP_RETRY_ISOLATED:
 * the fast mode failed, the transaction was rolled back and nothing was acknowledged. */
group_outcome pgw_run_group(pgcl_pg_writer *w, pg_job *batch, bool isolated);

/* ---- audit_pg_writer_rows.c ---- */

/* Fast mode's array parameters: one set per writer, reused by every group. */
void pgw_row_arrays_create(struct row_arrays *a);
void pgw_row_arrays_destroy(struct row_arrays *a);
/* The size of a struct row_arrays, for its allocation. */
size_t pgw_row_arrays_size(void);
/* A decisions or shadows job's statements, its seqs taken from t (reserved: from the range allocated
 * at the group's start; else allocated now, outside pipeline mode). */
pgcl_status pgw_send_job_rows(sender *s, pgcl_pg_txn *t, pg_job *j, bool reserved, char *err, int cap);
/* Fast mode's decisions into the log, before anything is sent; their leaves in w->row_leaves. */
pgcl_status pgw_log_decision_rows(pgcl_pg_txn *t, pg_job *batch, char *err, int cap);
/* Fast mode's rows as array statements, then the jobs' idempotency keys. */
pgcl_status pgw_send_rows_batched(sender *s, pgcl_pg_txn *t, pg_job *batch, char *err, int cap);

#endif
