/* The PostgreSQL store's writer: the rows' statements (audit_pg_writer.c describes the whole). The
 * transaction's API for jobs (pgcl_pg_txn_*: seqs, the chain's leaves, the log); decisions, their
 * stored inputs, shadow rows and idempotency keys, one statement per row (the isolated mode, the
 * naive path) or gathered into array parameters (fast mode). */
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

static const char *const COUNTER_NAMES[N_COUNTERS] = {"decisions", "admin_events", "contests", "resolutions",
                                                      "shadow_decisions"};

/* One table's seqs, inside the group's transaction (the row is already locked). */
static const char *const TAKE_SEQS_SQL[N_COUNTERS] = {
    "UPDATE fleet_counters SET decisions = decisions + $1 WHERE id = 1 RETURNING decisions",
    "UPDATE fleet_counters SET admin_events = admin_events + $1 WHERE id = 1 RETURNING admin_events",
    "UPDATE fleet_counters SET contests = contests + $1 WHERE id = 1 RETURNING contests",
    "UPDATE fleet_counters SET resolutions = resolutions + $1 WHERE id = 1 RETURNING resolutions",
    "UPDATE fleet_counters SET shadow_decisions = shadow_decisions + $1 WHERE id = 1 RETURNING shadow_decisions",
};
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
    pgw_sender_send(s, "insert decision", INSERT_DECISION_SQL, DECISION_COLUMNS, p.v, p.bin, NULL);
    if (p.input_stored) {
        const char *iv[] = {p.seq_t, (const char *)r->input};
        const int ib[] = {-1, r->input_bytes};
        pgw_sender_send(s, "insert decision input", INSERT_INPUT_SQL, 2, iv, ib, NULL);
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
    pgw_sender_send(s, "expired idempotency key", IDEM_DROP_EXPIRED_SQL, 3, drop, NULL, NULL);
    const char *v[] = {e->scope, e->key, e->body_sha256, e->request_id, e->answer, t->now, expires, e->request_sha256};
    pgw_sender_send(s, "idempotency key", IDEM_STORE_SQL, 8, v, NULL, NULL);
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
    pgw_sender_send(s, "insert shadow row", INSERT_SHADOW_SQL, SHADOW_COLUMNS, p.v, NULL, NULL);
}

/* A decisions or shadows job's statements, its seqs taken from t (reserved: see take_seqs). */
pgcl_status pgw_send_job_rows(sender *s, pgcl_pg_txn *t, pg_job *j, bool reserved, char *err, int cap) {
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

void pgw_row_arrays_create(row_arrays *a) {
    *a = (row_arrays){0};
    row_arrays_reset(a);
}

size_t pgw_row_arrays_size(void) {
    return sizeof(row_arrays);
}

void pgw_row_arrays_destroy(row_arrays *a) {
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
    pgw_sender_send(s, what, sql, n, v, len, NULL); /* libpq copies the parameters: the arrays can be reused */
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
 * batch's order, as pgw_send_rows_batched sends them; their leaves in w->row_leaves. */
pgcl_status pgw_log_decision_rows(pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
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
 * the order the per-row path (pgw_send_job_rows, the isolated mode) chains them; the rows go as array
 * statements (same values, same bytes stored), then the jobs' idempotency keys. */
pgcl_status pgw_send_rows_batched(sender *s, pgcl_pg_txn *t, pg_job *batch, char *err, int cap) {
    row_arrays *a = t->w->arrays;
    row_arrays_reset(a); /* a previous group that failed half-way may have left rows */
    pgcl_status st = PGCL_OK;
    size_t row = 0; /* the decision rows' leaves: pgw_log_decision_rows's, in the same order */
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
