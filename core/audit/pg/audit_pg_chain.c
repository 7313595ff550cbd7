/* The PostgreSQL store's chain reads (audit_pg.h; docs/audit.md, "A fleet on PostgreSQL"):
 * verification of every writer's chain, a decision's inclusion proof, consistency proofs within one
 * writer's log, and fleet checkpoints (fleet_checkpoint.h) over every writer's head.
 *
 * The chains, as the writer (audit_pg_writer.c) makes them, one per writer_id:
 *   entry 1      kind 'genesis', row_seq 0, payload = hex SHA-256(TEXT value of writer_id),
 *                prev_hash = 64 zeros
 *   entry k >= 2 kind 'commit', row_seq = leaf_count, payload = hex RFC 9162 root of its leaves,
 *                leaves = the leaf hashes (32 bytes each), prev_hash = entry k - 1's hash
 *   hash         = pgcl_chain_entry_hash(seq, kind, row_seq, payload, prev_hash)
 * audit_chain_runs map event rows to (writer, entry, leaf); audit_log_nodes hold each writer's log
 * tree's complete subtrees (log_tree.h). Shadow decisions are not chained.
 *
 * Every read runs in one REPEATABLE READ, READ ONLY transaction: one snapshot of the fleet. The
 * verifier streams the chains, runs and log nodes through server-side cursors ordered by writer id
 * (bytewise: COLLATE "C", the order of strcmp and of a fleet statement), merging them as it walks:
 * its memory is one fetched batch of each plus O(log n) per writer. The rows come the same way: per
 * writer, one binary cursor per table over the rows its runs chain, in (entry, first leaf, seq)
 * order, which is the order the walk checks them in.
 *
 * This file: the verifier. The leaves of rows and the snapshot are audit_pg_chain_rows.c; fleet
 * checkpoints, inclusion and consistency proofs audit_pg_chain_proofs.c (audit_pg_chain_internal.h). */
#include "audit_pg_chain_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_pg.h"
#include "chain.h"
#include "chain_proof.h"
#include "clock.h"
#include "fleet_checkpoint.h"
#include "merkle.h"
#include "sha256.h"


/* The verifier's per-writer row cursors (binary): the rows of one table that writer $1's runs
 * chain, in the order its walk checks them — (entry, first leaf, seq) — each after its run's
 * entry_seq and first_leaf. A row missing from a run is a gap in the seqs of that run. */
static const char *const DECLARE_ROWS_SQL[PGCL_CHAIN_TABLES] = {
    "DECLARE pgcld_rows_0 BINARY NO SCROLL CURSOR FOR SELECT u.entry_seq, u.first_leaf, d.seq, d.decision_id,"
    " d.created_at, d.request_id, d.item_id, d.model_name, d.model_version, d.model_sha256, d.label, d.label_index,"
    " d.probabilities, d.toxicity, d.decision, d.policy, d.t_review, d.t_block, d.vector, d.input_sha256,"
    " d.latency_us, sha256(i.input), d.input_dtype, d.input_digest, d.trace_id, d.content_date,"
    " d.territorial_scope, d.content_language FROM audit_chain_runs AS u"
    " JOIN decisions AS d ON d.seq >= u.first_row_seq AND d.seq < u.first_row_seq + u.n"
    " LEFT JOIN decision_inputs AS i ON i.decision_seq = d.seq WHERE u.writer_id = $1 AND u.kind = 'decisions'"
    " ORDER BY u.entry_seq, u.first_leaf, d.seq",
    "DECLARE pgcld_rows_1 BINARY NO SCROLL CURSOR FOR SELECT u.entry_seq, u.first_leaf, r.seq, r.event_id,"
    " r.created_at, r.actor, r.action, r.target, r.details FROM audit_chain_runs AS u JOIN admin_events AS r"
    " ON r.seq >= u.first_row_seq AND r.seq < u.first_row_seq + u.n WHERE u.writer_id = $1"
    " AND u.kind = 'admin_events' ORDER BY u.entry_seq, u.first_leaf, r.seq",
    "DECLARE pgcld_rows_2 BINARY NO SCROLL CURSOR FOR SELECT u.entry_seq, u.first_leaf, r.seq, r.contest_id,"
    " r.decision_id, r.filed_at, r.filed_by, r.filer_key_id, r.reason FROM audit_chain_runs AS u JOIN contests AS r"
    " ON r.seq >= u.first_row_seq AND r.seq < u.first_row_seq + u.n WHERE u.writer_id = $1"
    " AND u.kind = 'contests' ORDER BY u.entry_seq, u.first_leaf, r.seq",
    "DECLARE pgcld_rows_3 BINARY NO SCROLL CURSOR FOR SELECT u.entry_seq, u.first_leaf, r.seq, r.contest_id,"
    " r.resolved_at, r.resolved_by, r.resolver_key_id, r.outcome, r.corrected_label, r.note"
    " FROM audit_chain_runs AS u JOIN resolutions AS r ON r.seq >= u.first_row_seq AND r.seq < u.first_row_seq + u.n"
    " WHERE u.writer_id = $1 AND u.kind = 'resolutions' ORDER BY u.entry_seq, u.first_leaf, r.seq"};
static const char *const CLOSE_ROWS_SQL[PGCL_CHAIN_TABLES] = {"CLOSE pgcld_rows_0", "CLOSE pgcld_rows_1",
                                                              "CLOSE pgcld_rows_2", "CLOSE pgcld_rows_3"};
enum { ROW_CURSOR_OFFSET = 2 }; /* entry_seq, first_leaf, then the row's columns */

/* ---- cursors: a server-side cursor read in batches ---- */

/* The FETCH of each cursor (a cursor's name is in the SQL text, not a parameter). */
enum { FETCH_ENTRIES, FETCH_RUNS, FETCH_NODES, FETCH_RUN_ORDER, FETCH_ROWS /* + table */ };
static const char *const FETCH_SQL[] = {
    "FETCH FORWARD 128 FROM pgcld_entries", "FETCH FORWARD 1024 FROM pgcld_runs",
    "FETCH FORWARD 1024 FROM pgcld_nodes",  "FETCH FORWARD 1024 FROM pgcld_run_order",
    "FETCH FORWARD 256 FROM pgcld_rows_0",  "FETCH FORWARD 256 FROM pgcld_rows_1",
    "FETCH FORWARD 256 FROM pgcld_rows_2",  "FETCH FORWARD 256 FROM pgcld_rows_3"};
_Static_assert(sizeof FETCH_SQL / sizeof FETCH_SQL[0] == FETCH_ROWS + PGCL_CHAIN_TABLES, "a FETCH per cursor");

typedef struct pg_cursor {
    PGconn *conn;
    int fetch; /* its FETCH_SQL */
    const char *what;
    PGresult *batch;
    int row, n;
    bool open, done;
} pg_cursor;

/* Declares the cursor (declare_sql, with one text parameter when param is not NULL) inside the open
 * transaction. */
static pgcl_status cursor_open(pg_cursor *c, PGconn *conn, const char *what, const char *declare_sql, const char *param,
                               int fetch, char *err, int cap) {
    memset(c, 0, sizeof *c);
    c->conn = conn;
    c->what = what;
    c->fetch = fetch;
    c->row = -1;
    const char *values[] = {param};
    pgcl_status st = pgcl_pg_exec(conn, what, declare_sql, param ? 1 : 0, param ? values : NULL, err, cap);
    c->open = st == PGCL_OK;
    c->done = !c->open;
    return st;
}

/* Moves to the next row: true when there is one (c->batch, c->row); false at the end or on error
 * (*st). */
static bool cursor_next(pg_cursor *c, pgcl_status *st, char *err, int cap) {
    *st = PGCL_OK;
    if (c->done) return false;
    if (c->batch && c->row + 1 < c->n) {
        c->row++;
        return true;
    }
    PQclear(c->batch);
    c->batch = pgcl_pg_query(c->conn, c->what, FETCH_SQL[c->fetch], 0, NULL, st, err, cap);
    c->n = c->batch ? PQntuples(c->batch) : 0;
    c->row = 0;
    if (c->n == 0) {
        c->done = true;
        PQclear(c->batch);
        c->batch = NULL;
        return false;
    }
    return true;
}

static bool cursor_at(const pg_cursor *c) {
    return !c->done && c->batch && c->row >= 0 && c->row < c->n;
}

static void cursor_close(pg_cursor *c) {
    PQclear(c->batch);
    c->batch = NULL;
    c->done = true;
}

/* ---- the verifier ---- */

static const char DECLARE_ENTRIES_SQL[] =
    "DECLARE pgcld_entries NO SCROLL CURSOR FOR SELECT writer_id, seq, kind, row_seq, payload_sha256, prev_hash,"
    " hash, leaf_count, leaves FROM audit_chain ORDER BY writer_id COLLATE \"C\", seq";
static const char DECLARE_RUNS_SQL[] =
    "DECLARE pgcld_runs NO SCROLL CURSOR FOR SELECT writer_id, entry_seq, first_leaf, kind, first_row_seq, n"
    " FROM audit_chain_runs ORDER BY writer_id COLLATE \"C\", entry_seq, first_leaf";
/* a node (L, j) is completed by entry (j + 1) * 2^L, lower levels first */
static const char DECLARE_NODES_SQL[] =
    "DECLARE pgcld_nodes NO SCROLL CURSOR FOR SELECT writer_id, (idx + 1) << level, level, idx, hash"
    " FROM audit_log_nodes ORDER BY writer_id COLLATE \"C\", 2, level";
static const char DECLARE_RUN_ORDER_SQL[] =
    "DECLARE pgcld_run_order NO SCROLL CURSOR FOR SELECT kind, first_row_seq, n, writer_id, entry_seq"
    " FROM audit_chain_runs ORDER BY kind, first_row_seq";
static const char *const COUNT_ROWS_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT count(*) FROM decisions", "SELECT count(*) FROM admin_events", "SELECT count(*) FROM contests",
    "SELECT count(*) FROM resolutions"};
/* the first row no run covers, then the writer of the run nearest before it ($2 = its seq) */
static const char *const FIRST_UNCHAINED_SQL[PGCL_CHAIN_TABLES] = {
    "SELECT min(r.seq) FROM decisions AS r WHERE NOT EXISTS (SELECT 1 FROM audit_chain_runs AS u WHERE u.kind = $1"
    " AND u.first_row_seq <= r.seq AND r.seq < u.first_row_seq + u.n)",
    "SELECT min(r.seq) FROM admin_events AS r WHERE NOT EXISTS (SELECT 1 FROM audit_chain_runs AS u WHERE u.kind ="
    " $1 AND u.first_row_seq <= r.seq AND r.seq < u.first_row_seq + u.n)",
    "SELECT min(r.seq) FROM contests AS r WHERE NOT EXISTS (SELECT 1 FROM audit_chain_runs AS u WHERE u.kind = $1"
    " AND u.first_row_seq <= r.seq AND r.seq < u.first_row_seq + u.n)",
    "SELECT min(r.seq) FROM resolutions AS r WHERE NOT EXISTS (SELECT 1 FROM audit_chain_runs AS u WHERE u.kind ="
    " $1 AND u.first_row_seq <= r.seq AND r.seq < u.first_row_seq + u.n)"};
static const char NEIGHBOUR_WRITER_SQL[] =
    "SELECT writer_id FROM audit_chain_runs WHERE kind = $1 ORDER BY first_row_seq <= $2 DESC,"
    " CASE WHEN first_row_seq <= $2 THEN -first_row_seq ELSE first_row_seq END LIMIT 1";

/* A head a fleet checkpoint file signs, to be found in the walk. */
typedef struct checkpoint_target {
    const pgcl_fleet_head *head;
    const char *file;
} checkpoint_target;

/* The walk's state for the writer whose entries it is reading. */
typedef struct writer_walk {
    char id[PGCL_FLEET_WRITER_ID_MAX + 1];
    int64_t expected; /* the next seq */
    char prev[PGCL_CHAIN_HEX_LEN + 1];
    int64_t last_seq; /* the last entry seen (also past a stop) */
    char last_hash[PGCL_CHAIN_HEX_LEN + 1];
    bool stopped; /* a finding: the rest of this chain is skipped */
    pgcl_merkle_stack tree; /* its log tree over the entries that checked */
} writer_walk;

typedef struct verifier {
    PGconn *conn;
    pgcl_chain_report *rep;
    pg_cursor entries, runs, nodes;
    pg_cursor rows[PGCL_CHAIN_TABLES]; /* the current writer's, positioned on their first row */
    writer_walk w;
    bool have_writer;
    bool all_clean; /* no finding in any walk */
    int64_t per_kind[PGCL_CHAIN_TABLES];
    int64_t archived_through[PGCL_CHAIN_TABLES]; /* the latest archive cut's maxima (audit_cuts; 0: none) */
    checkpoint_target *targets; /* sorted by (writer id, head_seq) */
    int n_targets, next_target;
    char *err;
    int cap;
} verifier;

__attribute__((format(printf, 4, 5))) static void note_bad(verifier *v, const char *writer, int64_t seq,
                                                           const char *fmt, ...);

/* Records a finding at (writer, seq) unless one earlier in (writer id, seq) order is recorded. */
static void note_bad(verifier *v, const char *writer, int64_t seq, const char *fmt, ...) {
    pgcl_chain_report *r = v->rep;
    v->all_clean = false;
    if (!r->intact) {
        int c = strcmp(writer, r->bad_writer_id);
        if (c > 0 || (c == 0 && r->first_bad_seq <= seq)) return;
    }
    r->intact = false;
    r->first_bad_seq = seq;
    snprintf(r->bad_writer_id, sizeof r->bad_writer_id, "%s", writer);
    char what[sizeof r->reason];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->reason, sizeof r->reason, "writer '%.128s': %.370s", writer, what);
}

static const char *col(const pg_cursor *c, int i) {
    return pgcl_pg_text(c->batch, c->row, i);
}
static int64_t col_int(const pg_cursor *c, int i) {
    return pgcl_pg_int(c->batch, c->row, i);
}

/* Compares the writer of cursor c's row with id (strcmp). */
static int writer_cmp(const pg_cursor *c, const char *id) {
    const char *w = col(c, 0);
    return strcmp(w ? w : "", id);
}

/* Runs and nodes of writers with no chain (ids before `before`, or all when before is NULL). */
static pgcl_status drain_chainless(verifier *v, const char *before) {
    pgcl_status st = PGCL_OK;
    while (cursor_at(&v->runs) && (!before || writer_cmp(&v->runs, before) < 0)) {
        note_bad(v, col(&v->runs, 0), col_int(&v->runs, 1),
                 "audit_chain_runs: a run names entry %lld, but this writer has no chain",
                 (long long)col_int(&v->runs, 1));
        if (!cursor_next(&v->runs, &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    while (cursor_at(&v->nodes) && (!before || writer_cmp(&v->nodes, before) < 0)) {
        note_bad(v, col(&v->nodes, 0), 1,
                 "audit_log_nodes: a log tree node at level %lld, index %lld, but this writer "
                 "has no chain",
                 (long long)col_int(&v->nodes, 2), (long long)col_int(&v->nodes, 3));
        if (!cursor_next(&v->nodes, &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    while (v->next_target < v->n_targets &&
           (!before || strcmp(v->targets[v->next_target].head->writer_id, before) < 0)) {
        const checkpoint_target *t = &v->targets[v->next_target++];
        note_bad(v, t->head->writer_id, 1,
                 "the fleet checkpoint %.200s signs this writer's entry %lld, but it has no "
                 "chain",
                 t->file, (long long)t->head->head_seq);
    }
    return PGCL_OK;
}

static pgcl_status close_row_cursors(verifier *v);

/* The end of writer v->w's entries: what is left of its runs, nodes and checkpoint heads lies
 * beyond its chain (reported unless the walk stopped earlier), and its head goes in the report. */
static pgcl_status finish_writer(verifier *v) {
    writer_walk *w = &v->w;
    pgcl_status st = close_row_cursors(v);
    if (st != PGCL_OK) return st;
    int64_t n = w->expected - 1; /* the entries that checked */
    while (cursor_at(&v->runs) && writer_cmp(&v->runs, w->id) == 0) {
        if (!w->stopped)
            note_bad(v, w->id, col_int(&v->runs, 1) > n ? n + 1 : col_int(&v->runs, 1),
                     "audit_chain_runs: a run names entry %lld, which is not a commit entry of this chain (it ends at "
                     "%lld)",
                     (long long)col_int(&v->runs, 1), (long long)n);
        if (!cursor_next(&v->runs, &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    bool reported = false;
    while (cursor_at(&v->nodes) && writer_cmp(&v->nodes, w->id) == 0) {
        if (!w->stopped && !reported)
            note_bad(v, w->id, n + 1,
                     "audit_log_nodes: the log tree node at level %lld, index %lld covers entries "
                     "beyond the chain's end (%lld): entries were removed",
                     (long long)col_int(&v->nodes, 2), (long long)col_int(&v->nodes, 3), (long long)n);
        reported = true;
        if (!cursor_next(&v->nodes, &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    while (v->next_target < v->n_targets && strcmp(v->targets[v->next_target].head->writer_id, w->id) == 0) {
        const checkpoint_target *t = &v->targets[v->next_target++];
        if (!w->stopped)
            note_bad(v, w->id, n + 1, "fleet checkpoint at entry %lld but the chain ends at %lld (%.200s)",
                     (long long)t->head->head_seq, (long long)n, t->file);
    }
    pgcl_chain_report *r = v->rep;
    pgcl_chain_writer_head *grown = realloc(r->writers, (size_t)(r->n_writers + 1) * sizeof *grown);
    if (!grown) {
        pgcl_errorf(v->err, v->cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    r->writers = grown;
    pgcl_chain_writer_head *h = &r->writers[r->n_writers++];
    memset(h, 0, sizeof *h);
    snprintf(h->writer_id, sizeof h->writer_id, "%s", w->id);
    h->head_seq = w->last_seq;
    snprintf(h->head_hash, sizeof h->head_hash, "%s", w->last_hash);
    h->intact = !w->stopped && strcmp(r->bad_writer_id, w->id) != 0;
    if (!w->stopped && w->tree.top > 0) {
        pgcl_merkle_hash root = pgcl_merkle_stack_root(&w->tree);
        pgcl_merkle_to_hex(&root, h->log_root);
    }
    return PGCL_OK;
}

static pgcl_status start_writer(verifier *v, const char *id) {
    pgcl_status st = drain_chainless(v, id);
    if (st != PGCL_OK) return st;
    writer_walk *w = &v->w;
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", id);
    w->expected = 1;
    memcpy(w->prev, pgcl_chain_zero_hash, sizeof w->prev);
    v->have_writer = true;
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        if ((st = cursor_open(&v->rows[t], v->conn, pgcl_chain_tables[t].name, DECLARE_ROWS_SQL[t], w->id,
                              FETCH_ROWS + t, v->err, v->cap)) != PGCL_OK)
            return st;
        if (!cursor_next(&v->rows[t], &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    return PGCL_OK;
}

/* Closes the writer's row cursors (their names are reused by the next writer). */
static pgcl_status close_row_cursors(verifier *v) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        bool was_open = v->rows[t].open;
        cursor_close(&v->rows[t]);
        v->rows[t].open = false;
        pgcl_status st =
            was_open ? pgcl_pg_exec(v->conn, pgcl_chain_tables[t].name, CLOSE_ROWS_SQL[t], 0, NULL, v->err, v->cap)
                     : PGCL_OK;
        if (st != PGCL_OK) return st;
    }
    return PGCL_OK;
}

/* A commit entry's runs (the runs cursor's rows of (writer, seq), in leaf order): they cover its
 * leaves 0..leaf_count-1 once each, and each leaf is its row's leaf as stored now. */
static pgcl_status check_runs(verifier *v, int64_t seq, int64_t leaf_count, const pgcl_merkle_hash *leaves, bool *ok) {
    writer_walk *w = &v->w;
    pgcl_status st = PGCL_OK;
    *ok = false;
    while (cursor_at(&v->runs) && writer_cmp(&v->runs, w->id) == 0 && col_int(&v->runs, 1) < seq) {
        note_bad(v, w->id, col_int(&v->runs, 1),
                 "audit_chain_runs: a run names entry %lld, which is not a commit entry",
                 (long long)col_int(&v->runs, 1));
        return PGCL_OK;
    }
    int64_t next_leaf = 0, chained[PGCL_CHAIN_TABLES] = {0};
    while (cursor_at(&v->runs) && writer_cmp(&v->runs, w->id) == 0 && col_int(&v->runs, 1) == seq) {
        const char *kind = col(&v->runs, 3);
        int t = kind ? pgcl_chain_table_index(kind, strlen(kind)) : -1;
        int64_t first_leaf = col_int(&v->runs, 2), first_row = col_int(&v->runs, 4), n = col_int(&v->runs, 5);
        if (t < 0 || n < 1 || first_leaf != next_leaf || n > leaf_count - first_leaf) {
            note_bad(v, w->id, seq,
                     "entry %lld: its runs in audit_chain_runs do not cover leaves 0..%lld once each, in "
                     "order",
                     (long long)seq, (long long)(leaf_count - 1));
            return PGCL_OK;
        }
        /* this run's rows, from the writer's row cursor of table t (rows of runs before it: none
         * in a walk that got here, skipped all the same) */
        pg_cursor *rows = &v->rows[t];
        while (cursor_at(rows) && (pgchain_binary_int(rows->batch, rows->row, 0) < seq ||
                                   (pgchain_binary_int(rows->batch, rows->row, 0) == seq &&
                                    pgchain_binary_int(rows->batch, rows->row, 1) < first_leaf)))
            if (!cursor_next(rows, &st, v->err, v->cap) && st != PGCL_OK) return st;
        int64_t present = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t row_seq = first_row + i;
            bool at_row = cursor_at(rows) && pgchain_binary_int(rows->batch, rows->row, 0) == seq &&
                          pgchain_binary_int(rows->batch, rows->row, 1) == first_leaf &&
                          pgchain_binary_int(rows->batch, rows->row, ROW_CURSOR_OFFSET) == row_seq;
            if (row_seq <= v->archived_through[t]) { /* archived (pgcl_pg_archive_run): must be gone */
                if (at_row) {
                    note_bad(v, w->id, seq, "entry %lld, leaf %lld: %s row %lld was archived (at or below the latest "
                             "cut, %lld) but is in the live database again", (long long)seq,
                             (long long)(first_leaf + i), pgcl_chain_tables[t].name, (long long)row_seq,
                             (long long)v->archived_through[t]);
                    return PGCL_OK;
                }
                v->rep->archived_rows++;
                continue;
            }
            if (!at_row) {
                note_bad(v, w->id, seq, "entry %lld, leaf %lld: %s row %lld is missing", (long long)seq,
                         (long long)(first_leaf + i), pgcl_chain_tables[t].name, (long long)row_seq);
                return PGCL_OK;
            }
            row_values rv;
            bool same = pgchain_row_values_of(t, rows->batch, rows->row, ROW_CURSOR_OFFSET, &rv) == PGCL_OK;
            if (same) {
                pgcl_merkle_hash leaf = pgcl_chain_leaf_of_values(t, rv.v, rv.n);
                same = memcmp(leaf.b, leaves[first_leaf + i].b, PGCL_MERKLE_HASH_BYTES) == 0;
            }
            if (!same) {
                note_bad(
                    v, w->id, seq,
                    "entry %lld, leaf %lld of %lld: %s row %lld: payload differs (the row was changed after it was "
                    "chained)",
                    (long long)seq, (long long)(first_leaf + i), (long long)leaf_count, pgcl_chain_tables[t].name,
                    (long long)row_seq);
                return PGCL_OK;
            }
            present++;
            if (!cursor_next(rows, &st, v->err, v->cap) && st != PGCL_OK) return st;
        }
        chained[t] += present;
        next_leaf += n;
        if (!cursor_next(&v->runs, &st, v->err, v->cap) && st != PGCL_OK) return st;
    }
    if (next_leaf != leaf_count) {
        note_bad(v, w->id, seq, "entry %lld: its runs cover %lld of its %lld leaves", (long long)seq,
                 (long long)next_leaf, (long long)leaf_count);
        return PGCL_OK;
    }
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        v->per_kind[t] += chained[t];
    *ok = true;
    return PGCL_OK;
}

/* Entry seq (hash) is leaf seq - 1 of the writer's log tree: pushes it, checks each stored node it
 * completes (the nodes cursor, in completion order), then the checkpoint heads at seq. */
static pgcl_status log_tree_step(verifier *v, int64_t seq, const char *hash_hex, bool *ok) {
    writer_walk *w = &v->w;
    pgcl_status st = PGCL_OK;
    *ok = false;
    pgcl_merkle_hash entry;
    PGCL_ASSERT(pgcl_merkle_from_hex(hash_hex, &entry)); /* the entry's hash recomputed: 64 hex digits */
    pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(entry.b, sizeof entry.b);
    pgcl_merkle_stack_push(&w->tree, &leaf);
    int level;
    while (pgcl_merkle_stack_merge(&w->tree, &level)) {
        int64_t idx = (seq - 1) >> level;
        /* a stored node ordered before this one is one no entry completes (every earlier one was
         * consumed): e.g. a level past 62, whose end wraps */
        if (cursor_at(&v->nodes) && writer_cmp(&v->nodes, w->id) == 0 &&
            (col_int(&v->nodes, 1) < seq || (col_int(&v->nodes, 1) == seq && col_int(&v->nodes, 2) < level))) {
            note_bad(v, w->id, seq,
                     "audit_log_nodes: a stored node at level %lld, index %lld is not a node of the log "
                     "tree",
                     (long long)col_int(&v->nodes, 2), (long long)col_int(&v->nodes, 3));
            return PGCL_OK;
        }
        bool here = cursor_at(&v->nodes) && writer_cmp(&v->nodes, w->id) == 0 && col_int(&v->nodes, 1) == seq &&
                    col_int(&v->nodes, 2) == level;
        bool same = false;
        if (here) {
            unsigned char *h = NULL;
            size_t len = 0;
            same = pgcl_pg_bytea(v->nodes.batch, v->nodes.row, 4, &h, &len) == PGCL_OK && h &&
                   len == PGCL_MERKLE_HASH_BYTES &&
                   memcmp(h, w->tree.node[w->tree.top - 1].b, PGCL_MERKLE_HASH_BYTES) == 0;
            free(h);
            if (!cursor_next(&v->nodes, &st, v->err, v->cap) && st != PGCL_OK) return st;
        }
        if (!same) {
            note_bad(v, w->id, seq,
                     "audit_log_nodes: the log tree node at level %d, index %lld (entries %lld..%lld) %s", level,
                     (long long)idx, (long long)((idx << level) + 1), (long long)seq,
                     here ? "does not match the entries' hashes" : "is missing");
            return PGCL_OK;
        }
    }
    while (v->next_target < v->n_targets && strcmp(v->targets[v->next_target].head->writer_id, w->id) == 0 &&
           v->targets[v->next_target].head->head_seq == seq) {
        const checkpoint_target *t = &v->targets[v->next_target++];
        char root_hex[PGCL_CHAIN_HEX_LEN + 1];
        pgcl_merkle_hash root = pgcl_merkle_stack_root(&w->tree);
        pgcl_merkle_to_hex(&root, root_hex);
        if (strcmp(t->head->head_hash, hash_hex) != 0) {
            note_bad(v, w->id, seq,
                     "entry %lld: hash differs from the signed fleet checkpoint (%.200s): the history up "
                     "to entry %lld was rewritten",
                     (long long)seq, t->file, (long long)seq);
            return PGCL_OK;
        }
        if (strcmp(t->head->log_root, root_hex) != 0) {
            note_bad(v, w->id, seq,
                     "fleet checkpoint %.200s: its log_root is not the root of the log tree over entries "
                     "1..%lld",
                     t->file, (long long)seq);
            return PGCL_OK;
        }
    }
    *ok = true;
    return PGCL_OK;
}

static bool hex_is(const char *s, const char *want) {
    return s && strcmp(s, want) == 0;
}

/* One entry of the entries cursor, of writer v->w: its place, link, hash, kind, leaves and rows,
 * and its log tree step. A finding stops this writer's walk. */
static pgcl_status check_entry(verifier *v) {
    writer_walk *w = &v->w;
    const pg_cursor *e = &v->entries;
    int64_t seq = col_int(e, 1);
    const char *kind = col(e, 2), *payload = col(e, 4), *prev = col(e, 5), *hash = col(e, 6);
    w->last_seq = seq;
    snprintf(w->last_hash, sizeof w->last_hash, "%s", hash ? hash : "");
    if (w->stopped) return PGCL_OK;
    if (seq != w->expected) {
        if (w->expected == 1)
            note_bad(v, w->id, 1, "entry 1 missing (the chain starts at entry %lld)", (long long)seq);
        else
            note_bad(v, w->id, w->expected, "entry %lld missing (sequence jumps from %lld to %lld)",
                     (long long)w->expected, (long long)(w->expected - 1), (long long)seq);
        w->stopped = true;
        return PGCL_OK;
    }
    v->rep->events++;
    if (!hex_is(prev, w->prev)) {
        if (seq == 1)
            note_bad(v, w->id, 1, "entry 1: the genesis entry's prev_hash is not 64 zeros");
        else
            note_bad(v, w->id, seq, "entry %lld: prev_hash does not match entry %lld", (long long)seq,
                     (long long)(seq - 1));
        w->stopped = true;
        return PGCL_OK;
    }
    if (!kind || !payload || !hash || PQgetisnull(e->batch, e->row, 3)) {
        note_bad(v, w->id, seq, "entry %lld: a field is NULL", (long long)seq);
        w->stopped = true;
        return PGCL_OK;
    }
    int64_t row_seq = col_int(e, 3);
    char computed[PGCL_CHAIN_HEX_LEN + 1];
    pgcl_chain_entry_hash(seq, kind, strlen(kind), row_seq, payload, strlen(payload), prev, strlen(prev), computed);
    if (!hex_is(hash, computed)) {
        note_bad(v, w->id, seq, "entry %lld: hash does not match the entry's contents", (long long)seq);
        w->stopped = true;
        return PGCL_OK;
    }
    pgcl_status st = PGCL_OK;
    bool ok = false;
    if (seq == 1) {
        char want[PGCL_CHAIN_HEX_LEN + 1];
        pgcl_chain_writer_genesis_payload(w->id, want);
        if (strcmp(kind, "genesis") != 0 || row_seq != 0 || !hex_is(payload, want)) {
            note_bad(v, w->id, 1,
                     "entry 1 is not this writer's genesis entry (kind '%.32s', row_seq %lld, payload not "
                     "SHA-256 of the writer id)",
                     kind, (long long)row_seq);
            w->stopped = true;
            return PGCL_OK;
        }
    } else {
        pgcl_merkle_hash root;
        unsigned char *leaves = NULL;
        size_t leaves_len = 0;
        int64_t leaf_count = PQgetisnull(e->batch, e->row, 7) ? -1 : col_int(e, 7);
        if (strcmp(kind, PGCL_CHAIN_COMMIT_KIND) != 0 || leaf_count < 1 || row_seq != leaf_count ||
            !pgcl_merkle_from_hex(payload, &root) ||
            pgcl_pg_bytea(e->batch, e->row, 8, &leaves, &leaves_len) != PGCL_OK || !leaves ||
            leaves_len != (size_t)leaf_count * PGCL_MERKLE_HASH_BYTES) {
            free(leaves);
            note_bad(v, w->id, seq,
                     "entry %lld: not a well-formed commit entry (kind '%.32s'; leaf_count, row_seq, "
                     "leaves and root must agree)",
                     (long long)seq, kind);
            w->stopped = true;
            return PGCL_OK;
        }
        pgcl_merkle_hash computed_root = pgcl_merkle_root((const pgcl_merkle_hash *)leaves, (uint64_t)leaf_count);
        if (memcmp(computed_root.b, root.b, PGCL_MERKLE_HASH_BYTES) != 0) {
            free(leaves);
            note_bad(v, w->id, seq, "entry %lld: its %lld stored leaf hashes do not give its Merkle root",
                     (long long)seq, (long long)leaf_count);
            w->stopped = true;
            return PGCL_OK;
        }
        st = check_runs(v, seq, leaf_count, (const pgcl_merkle_hash *)leaves, &ok);
        free(leaves);
        if (st != PGCL_OK) return st;
        if (!ok) {
            w->stopped = true;
            return PGCL_OK;
        }
    }
    if ((st = log_tree_step(v, seq, hash, &ok)) != PGCL_OK) return st;
    if (!ok) {
        w->stopped = true;
        return PGCL_OK;
    }
    memcpy(w->prev, hash, sizeof w->prev);
    w->expected++;
    return PGCL_OK;
}

/* The walk over every writer's chain, merging the runs and nodes cursors. */
static pgcl_status walk(verifier *v) {
    pgcl_status st;
    while (cursor_next(&v->entries, &st, v->err, v->cap)) {
        const char *id = col(&v->entries, 0);
        if (!id) id = "";
        if (!v->have_writer || strcmp(id, v->w.id) != 0) {
            if (v->have_writer && (st = finish_writer(v)) != PGCL_OK) return st;
            if ((st = start_writer(v, id)) != PGCL_OK) return st;
        }
        if ((st = check_entry(v)) != PGCL_OK) return st;
    }
    if (st != PGCL_OK) return st;
    if (v->have_writer && (st = finish_writer(v)) != PGCL_OK) return st;
    return drain_chainless(v, NULL);
}

/* Runs of one kind never overlap (a row chained twice), checked in (kind, first_row_seq) order. */
static pgcl_status check_overlaps(verifier *v) {
    pg_cursor c;
    pgcl_status st =
        cursor_open(&c, v->conn, "audit_chain_runs", DECLARE_RUN_ORDER_SQL, NULL, FETCH_RUN_ORDER, v->err, v->cap);
    if (st != PGCL_OK) return st;
    char kind[64] = "";
    int64_t end = 0;
    while (cursor_next(&c, &st, v->err, v->cap)) {
        const char *k = col(&c, 0);
        int64_t first = col_int(&c, 1), n = col_int(&c, 2);
        if (k && strcmp(k, kind) == 0 && first < end) {
            note_bad(v, col(&c, 3) ? col(&c, 3) : "", col_int(&c, 4),
                     "entry %lld refers to %.32s rows an earlier run already refers to (rows %lld..%lld)",
                     (long long)col_int(&c, 4), k, (long long)first, (long long)(end - 1));
            break;
        }
        if (!k || strcmp(kind, k) != 0) {
            snprintf(kind, sizeof kind, "%s", k ? k : "");
            end = first + n;
        } else if (first + n > end) {
            end = first + n;
        }
    }
    cursor_close(&c);
    return st;
}

/* Every row of the four tables is covered by a run: with every run's rows present and distinct
 * (the walk, check_overlaps), a table with more rows than its runs cover holds an unchained row;
 * the first is reported at the writer of the nearest run before it (else after it), at that
 * chain's end + 1, where its entry would have been. */
static pgcl_status check_unchained(verifier *v) {
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++) {
        int64_t rows = 0, first = 0;
        bool found = false;
        pgcl_status st = pgcl_pg_query_int(v->conn, pgcl_chain_tables[t].name, COUNT_ROWS_SQL[t], 0, NULL, &rows, NULL,
                                           v->err, v->cap);
        if (st != PGCL_OK) return st;
        if (rows == v->per_kind[t]) continue;
        const char *kind_value[] = {pgcl_chain_tables[t].name};
        if ((st = pgcl_pg_query_int(v->conn, pgcl_chain_tables[t].name, FIRST_UNCHAINED_SQL[t], 1, kind_value, &first,
                                    &found, v->err, v->cap)) != PGCL_OK)
            return st;
        if (!found) continue; /* more references than rows: check_overlaps reported it */
        char seq_text[24];
        snprintf(seq_text, sizeof seq_text, "%lld", (long long)first);
        const char *values[] = {pgcl_chain_tables[t].name, seq_text};
        PGresult *res =
            pgcl_pg_query(v->conn, "audit_chain_runs", NEIGHBOUR_WRITER_SQL, 2, values, &st, v->err, v->cap);
        if (!res) return st;
        char writer[PGCL_FLEET_WRITER_ID_MAX + 1] = "";
        if (PQntuples(res) == 1 && pgcl_pg_text(res, 0, 0))
            snprintf(writer, sizeof writer, "%s", pgcl_pg_text(res, 0, 0));
        else if (v->rep->n_writers > 0)
            snprintf(writer, sizeof writer, "%s", v->rep->writers[0].writer_id);
        PQclear(res);
        int64_t end = 0;
        for (int i = 0; i < v->rep->n_writers; i++)
            if (strcmp(v->rep->writers[i].writer_id, writer) == 0) end = v->rep->writers[i].head_seq;
        note_bad(v, writer, end + 1, "%s row %lld is not in the chain of any writer (no run covers it)",
                 pgcl_chain_tables[t].name, (long long)first);
        return PGCL_OK;
    }
    return PGCL_OK;
}

static int target_cmp(const void *a, const void *b) {
    const checkpoint_target *x = a, *y = b;
    int c = strcmp(x->head->writer_id, y->head->writer_id);
    if (c) return c;
    return x->head->head_seq < y->head->head_seq ? -1 : x->head->head_seq > y->head->head_seq;
}


/* Archive cuts (audit_cuts, pgcl_pg_archive_run): the latest cut's maxima, and each cut's signed
 * fleet statement, which must verify (a finding, reported first, when it does not) and whose heads
 * become targets of the walk (load_checkpoints) like a checkpoint file's. *cuts: malloc'd. */
static const char CUTS_SQL[] =
    "SELECT seq, statement, public_key, signature, decisions_through, admin_events_through, contests_through,"
    " resolutions_through FROM audit_cuts ORDER BY seq";

static pgcl_status load_cuts(verifier *v, pgcl_fleet_checkpoint **cuts, int *n_cuts) {
    pgcl_status st = PGCL_OK;
    *cuts = NULL;
    *n_cuts = 0;
    PGresult *res = pgcl_pg_query(v->conn, "audit_cuts", CUTS_SQL, 0, NULL, &st, v->err, v->cap);
    if (!res) return st;
    int n = PQntuples(res);
    if (n > 0 && !(*cuts = calloc((size_t)n, sizeof **cuts))) {
        PQclear(res);
        pgcl_errorf(v->err, v->cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        pgcl_fleet_checkpoint *cp = &(*cuts)[*n_cuts];
        char why[256] = "";
        bool ok =
            pgchain_parse_statement(pgcl_pg_text(res, i, 1), pgcl_pg_text(res, i, 2), pgcl_pg_text(res, i, 3), cp) &&
            pgcl_fleet_checkpoint_verify(cp, NULL, why, sizeof why) == PGCL_OK;
        if (!ok) {
            pgcl_fleet_checkpoint_release(cp);
            note_bad(v, "", 0, "audit_cuts: the signed statement of archive cut %lld does not verify%s%.200s",
                     (long long)pgcl_pg_int(res, i, 0), why[0] ? ": " : "", why);
            continue;
        }
        snprintf(cp->file, sizeof cp->file, "archive cut %lld", (long long)pgcl_pg_int(res, i, 0));
        (*n_cuts)++;
        for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
            if (pgcl_pg_int(res, i, 4 + t) > v->archived_through[t])
                v->archived_through[t] = pgcl_pg_int(res, i, 4 + t);
        v->rep->archive_cut_seq = pgcl_pg_int(res, i, 0);
    }
    PQclear(res);
    return PGCL_OK;
}

/* The fleet checkpoint files, read and checked (signature, signer), and their heads as sorted
 * targets, with the archive cuts' heads. A file that is not a valid fleet checkpoint is an error,
 * naming it. */
static pgcl_status load_checkpoints(verifier *v, pgcl_fleet_checkpoint *cps, const char *const *files, int n,
                                    const char *public_key_hex, const pgcl_fleet_checkpoint *cuts, int n_cuts) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        pgcl_status st = pgcl_fleet_checkpoint_read(files[i], public_key_hex, &cps[i], v->err, v->cap);
        if (st != PGCL_OK) return st;
        total += cps[i].n_heads;
    }
    for (int i = 0; i < n_cuts; i++)
        total += cuts[i].n_heads;
    if (total == 0) return PGCL_OK;
    if (!(v->targets = calloc((size_t)total, sizeof *v->targets))) {
        pgcl_errorf(v->err, v->cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cps[i].n_heads; j++)
            v->targets[v->n_targets++] = (checkpoint_target){.head = &cps[i].heads[j], .file = cps[i].file};
    for (int i = 0; i < n_cuts; i++)
        for (int j = 0; j < cuts[i].n_heads; j++)
            v->targets[v->n_targets++] = (checkpoint_target){.head = &cuts[i].heads[j], .file = cuts[i].file};
    qsort(v->targets, (size_t)v->n_targets, sizeof *v->targets, target_cmp);
    return PGCL_OK;
}

pgcl_status pgcl_pg_chain_verify(PGconn *conn, const char *const *checkpoint_files, int n_checkpoints,
                                 const char *public_key_hex, pgcl_chain_report *report, char *err, int cap) {
    memset(report, 0, sizeof *report);
    report->intact = true;
    report->has_writers = true;
    verifier v = {.conn = conn, .rep = report, .all_clean = true, .err = err, .cap = cap};
    pgcl_fleet_checkpoint *cps = n_checkpoints > 0 ? calloc((size_t)n_checkpoints, sizeof *cps) : NULL;
    pgcl_fleet_checkpoint *cuts = NULL;
    int n_cuts = 0;
    pgcl_status st = PGCL_ERR_NOMEM;
    bool in_tx = false;
    if (n_checkpoints > 0 && !cps) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgchain_begin_snapshot(conn, err, cap)) != PGCL_OK) goto done;
    in_tx = true;
    if ((st = load_cuts(&v, &cuts, &n_cuts)) != PGCL_OK ||
        (st = load_checkpoints(&v, cps, checkpoint_files, n_checkpoints, public_key_hex, cuts, n_cuts)) != PGCL_OK)
        goto done;
    if ((st = cursor_open(&v.entries, conn, "audit_chain", DECLARE_ENTRIES_SQL, NULL, FETCH_ENTRIES, err, cap)) !=
            PGCL_OK ||
        (st = cursor_open(&v.runs, conn, "audit_chain_runs", DECLARE_RUNS_SQL, NULL, FETCH_RUNS, err, cap)) !=
            PGCL_OK ||
        (st = cursor_open(&v.nodes, conn, "audit_log_nodes", DECLARE_NODES_SQL, NULL, FETCH_NODES, err, cap)) !=
            PGCL_OK)
        goto done;
    /* position the merged cursors on their first rows */
    if ((!cursor_next(&v.runs, &st, err, cap) && st != PGCL_OK) ||
        (!cursor_next(&v.nodes, &st, err, cap) && st != PGCL_OK))
        goto done;
    if ((st = walk(&v)) != PGCL_OK) goto done;
    cursor_close(&v.entries);
    cursor_close(&v.runs);
    cursor_close(&v.nodes);
    if (v.all_clean && (st = check_overlaps(&v)) != PGCL_OK) goto done;
    if (v.all_clean && (st = check_unchained(&v)) != PGCL_OK) goto done;
    if (report->n_writers == 1) {
        report->head_seq = report->writers[0].head_seq;
        snprintf(report->head_hash, sizeof report->head_hash, "%s", report->writers[0].head_hash);
    } else {
        for (int i = 0; i < report->n_writers; i++)
            report->head_seq += report->writers[i].head_seq;
    }
    st = PGCL_OK;
done:
    cursor_close(&v.entries);
    cursor_close(&v.runs);
    cursor_close(&v.nodes);
    for (int t = 0; t < PGCL_CHAIN_TABLES; t++)
        cursor_close(&v.rows[t]);
    if (in_tx) pgchain_end_transaction(conn, false);
    for (int i = 0; cps && i < n_checkpoints; i++)
        pgcl_fleet_checkpoint_release(&cps[i]);
    free(cps);
    for (int i = 0; i < n_cuts; i++)
        pgcl_fleet_checkpoint_release(&cuts[i]);
    free(cuts);
    free(v.targets);
    if (st != PGCL_OK) {
        pgcl_chain_report_release(report);
        report->intact = false;
        report->first_bad_seq = 0;
        report->reason[0] = 0;
        report->bad_writer_id[0] = 0;
    }
    return st;
}

/* ---- the store's operations: on a connection of its read pool ---- */

static const char PING_SQL[] = "SELECT 1";

/* A live connection of the read pool. A pooled connection may be gone (the server restarted or
 * was stopped since it was last used; libpq notices only at the next statement): each one found
 * gone by a ping is dropped and the next tried (at most PGCL_PG_READERS of them, then a new one). */
pgcl_status pgcl_pg_reader_acquire(pgcl_audit *store, PGconn **conn, char *err, int cap) {
    pgcl_pg_pool *pool = pgcl_audit_pg_of(store)->readers;
    pgcl_status st = PGCL_ERR_DB;
    for (int attempt = 0; attempt <= PGCL_PG_READERS; attempt++) {
        if ((st = pgcl_pg_pool_acquire(pool, PGCL_PG_READ_WAIT_MS, conn, err, cap)) != PGCL_OK) return st;
        if ((st = pgcl_pg_exec(*conn, "the audit database", PING_SQL, 0, NULL, err, cap)) == PGCL_OK) return st;
        bool gone = pgcl_pg_broken(*conn);
        pgcl_pg_pool_release(pool, *conn); /* a broken connection is closed, not pooled */
        *conn = NULL;
        if (!gone) break;
    }
    return st;
}

void pgcl_pg_reader_release(pgcl_audit *store, PGconn *conn) {
    pgcl_pg_pool_release(pgcl_audit_pg_of(store)->readers, conn);
}

pgcl_status pgcl_pg_verify_chain(pgcl_audit *store, pgcl_chain_report *report, char *err, int cap) {
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) {
        memset(report, 0, sizeof *report);
        return st;
    }
    st = pgcl_pg_chain_verify(conn, NULL, 0, NULL, report, err, cap);
    pgcl_pg_reader_release(store, conn);
    return st;
}

