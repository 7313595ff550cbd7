/* One decision in full; see decision_record.h. */
#include "decision_record.h"

#include <string.h>

#include "chain.h"
#include "db.h"
#include "read_sql.h"

/* The effective outcome of a decision. The decision row never changes; what is in force is
 * derived from it and its contests, oldest first (at most one is open at a time, and it is the
 * latest). Each contest challenges the outcome in force when it was filed — the automated one, or
 * the one the latest resolution left — and its resolution acts on that outcome:
 *   - "upheld" confirms it;
 *   - "overturned" reverses it: the label becomes corrected_label when the resolution gives one
 *     (else it stays), and the decision follows from the decision in force, since resolutions
 *     carry no decision: overturning a removal or hold ("block", "review") reinstates the content
 *     ("allow"); overturning an "allow" sends the item to human review ("review").
 * So the outcome in force is the latest resolution's until a later resolution replaces it; an
 * open contest changes nothing until it is resolved. The result:
 *   status      "original" (never contested), "contested" (the latest contest is open), or the
 *               latest resolution's outcome, "upheld" / "overturned";
 *   label, decision  in force now (while a contest is open: those it challenges);
 *   decided_by  "automated" while the automated outcome stands (never overturned), "reviewer"
 *               once a reviewer's overturn made the outcome in force;
 *   contest_id  the latest contest, or NULL. */
pgcl_effective_outcome pgcl_effective_outcome_of(const char *label, const char *decision,
                                                 const pgcl_contest_row *contests, int n_contests) {
    const char *status = "original", *decided_by = "automated";
    const char *contest_id = NULL;
    for (int i = 0; i < n_contests; i++) {
        const pgcl_contest_row *c = &contests[i];
        contest_id = c->contest_id;
        const pgcl_resolution_row *res = &c->resolution;
        if (!res->present) {
            status = "contested";
            break;
        }
        const char *outcome = res->outcome;
        if (!outcome || strcmp(outcome, "overturned") != 0) {
            status = "upheld";
            continue;
        }
        const char *corrected = res->corrected_label;
        status = "overturned";
        decided_by = "reviewer";
        decision = strcmp(decision, "allow") == 0 ? "review" : "allow";
        if (corrected) label = corrected;
    }
    return (pgcl_effective_outcome){
        .status = status, .label = label, .decision = decision, .decided_by = decided_by, .contest_id = contest_id};
}

static const char RECORD_SQL[] =
    "SELECT d.seq, d.decision_id, d.created_at, d.request_id, d.item_id, d.model_name, d.model_version,"
    " d.model_sha256, d.label, d.label_index, d.probabilities, d.toxicity, d.decision, d.policy, d.t_review,"
    " d.t_block, d.vector, d.input_sha256, d.latency_us, d.input_dtype,"
    " (d.input IS NOT NULL OR EXISTS (SELECT 1 FROM decision_inputs AS i WHERE i.decision_seq = d.seq)), "
    CONTEST_STATUS_SQL ", " FACTS_COLS
    " FROM decisions d WHERE d.decision_id = ?";
/* The row's chain entry: its own (encoding version 1) or its commit's (version 2: the run holding
 * the row, found through the runs' primary key). */
static const char CHAIN_SQL[] =
    "SELECT seq, hash FROM audit_chain WHERE kind = 'decisions' AND row_seq = ?1"
    " UNION ALL SELECT c.seq, c.hash FROM decisions AS d JOIN audit_chain_runs AS u ON " PGCL_CHAIN_RUN_OF_DECISION_SQL
    " JOIN audit_chain AS c ON c.seq = u.entry_seq WHERE d.seq = ?1";
static const char CONTESTS_SQL[] =
    "SELECT c.contest_id, c.filed_at, c.filed_by, c.filer_key_id, c.reason, r.seq, r.resolved_at, r.resolved_by,"
    " r.resolver_key_id, r.outcome, r.corrected_label, r.note"
    " FROM contests c LEFT JOIN resolutions r ON r.contest_id = c.contest_id"
    " WHERE c.decision_id = ? ORDER BY c.seq";

/* The state of one record read, shared by the row callbacks. */
typedef struct record_read {
    const char *decision_id;
    pgcl_row_arena *arena;
    pgcl_decision_record *rec;
    bool found;
    int cap_contests; /* room in contests */
    pgcl_contest_row *contests;
} record_read;

static int bind_decision_id(sqlite3_stmt *s, void *ctx) {
    const record_read *r = ctx;
    return sqlite3_bind_text(s, 1, r->decision_id, -1, SQLITE_STATIC);
}

static int bind_row_seq(sqlite3_stmt *s, void *ctx) {
    const record_read *r = ctx;
    return sqlite3_bind_int64(s, 1, r->rec->seq);
}

/* A float32 little-endian BLOB as floats in the arena. */
static void read_vector(pgcl_row_arena *a, sqlite3_stmt *s, int i, const float **out, int *n_out) {
    const unsigned char *b = sqlite3_column_blob(s, i);
    int n = sqlite3_column_bytes(s, i) / (int)sizeof(float);
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vector BLOBs are stored little-endian");
    float *v = b && n > 0 ? pgcl_row_arena_alloc(a, (size_t)n * sizeof *v) : NULL;
    if (v) memcpy(v, b, (size_t)n * sizeof *v);
    *out = v;
    *n_out = v ? n : 0;
}

static int take_decision(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    record_read *r = ctx;
    pgcl_row_arena *a = r->arena;
    pgcl_decision_record *rec = r->rec;
    const char *dtype = (const char *)sqlite3_column_text(s, 19);
    bool has_input = sqlite3_column_int(s, 20) != 0;
    *rec = (pgcl_decision_record){
        .seq = sqlite3_column_int64(s, 0),
        .decision_id = pgcl_read_text(a, s, 1),
        .created_at = pgcl_read_text(a, s, 2),
        .request_id = pgcl_read_text(a, s, 3),
        .item_id = pgcl_read_text(a, s, 4),
        .model_name = pgcl_read_text(a, s, 5),
        .model_version = pgcl_read_text(a, s, 6),
        .model_sha256 = pgcl_read_text(a, s, 7),
        .label = pgcl_read_text(a, s, 8),
        .label_index = pgcl_read_opt_int(s, 9),
        .probabilities = pgcl_read_text(a, s, 10),
        .toxicity = pgcl_read_opt_real(s, 11),
        .decision = pgcl_read_text(a, s, 12),
        .policy = pgcl_read_text(a, s, 13),
        .t_review = pgcl_read_opt_real(s, 14),
        .t_block = pgcl_read_opt_real(s, 15),
        .input_sha256 = pgcl_read_text(a, s, 17),
        .latency_us = pgcl_read_opt_int(s, 18),
        .input_stored = has_input && dtype ? pgcl_row_arena_strdup(a, dtype) : NULL,
        .input_dropped = !has_input && dtype, /* kept once, dropped by retention */
        .contest_status = pgcl_read_text(a, s, 21),
    };
    read_vector(a, s, 16, &rec->vector, &rec->n_vector);
    pgcl_read_facts(a, s, 22, &rec->facts);
    r->found = true;
    return a->failed ? SQLITE_NOMEM : SQLITE_DONE; /* one row: stop the walk */
}

static int take_chain(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    record_read *r = ctx;
    r->rec->has_chain = true;
    r->rec->chain_seq = pgcl_read_opt_int(s, 0);
    r->rec->chain_hash = pgcl_read_text(r->arena, s, 1);
    return r->arena->failed ? SQLITE_NOMEM : SQLITE_DONE;
}

static int take_contest(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    record_read *r = ctx;
    pgcl_decision_record *rec = r->rec;
    if (rec->n_contests == r->cap_contests) {
        int grown = r->cap_contests ? 2 * r->cap_contests : 4;
        pgcl_contest_row *more =
            pgcl_row_arena_grow(r->arena, r->contests, (size_t)rec->n_contests, (size_t)grown, sizeof *more);
        if (!more) return SQLITE_NOMEM;
        r->contests = more;
        r->cap_contests = grown;
        rec->contests = more;
    }
    pgcl_contest_row *c = &r->contests[rec->n_contests++];
    c->contest_id = pgcl_read_text(r->arena, s, 0);
    c->filed_at = pgcl_read_text(r->arena, s, 1);
    c->filed_by = pgcl_read_text(r->arena, s, 2);
    c->filer_key_id = pgcl_read_text(r->arena, s, 3);
    c->reason = pgcl_read_text(r->arena, s, 4);
    pgcl_read_resolution(r->arena, s, 5, &c->resolution);
    return r->arena->failed ? SQLITE_NOMEM : SQLITE_OK;
}

/* The three queries of a record, in db's current read transaction. */
static pgcl_status read_record(sqlite3 *db, record_read *r, char *err, int cap) {
    pgcl_status st =
        pgcl_read_walk_status(pgcl_db_each_row(db, RECORD_SQL, bind_decision_id, take_decision, r, err, cap), err, cap);
    if (st != PGCL_OK) return st;
    if (!r->found) {
        pgcl_errorf(err, cap, "no decision with id '%.64s'", r->decision_id);
        return PGCL_ERR_NOT_FOUND;
    }
    st = pgcl_read_walk_status(pgcl_db_each_row(db, CHAIN_SQL, bind_row_seq, take_chain, r, err, cap), err, cap);
    if (st == PGCL_OK)
        st = pgcl_read_walk_status(pgcl_db_each_row(db, CONTESTS_SQL, bind_decision_id, take_contest, r, err, cap), err,
                                   cap);
    if (st != PGCL_OK) return st;
    pgcl_decision_record *rec = r->rec;
    PGCL_ASSERT(rec->label && rec->decision); /* NOT NULL columns: the outcome in force starts from them */
    rec->outcome = pgcl_effective_outcome_of(rec->label, rec->decision, rec->contests, rec->n_contests);
    return PGCL_OK;
}

pgcl_status pgcl_decision_record_read(pgcl_qpool *p, const char *decision_id, pgcl_row_arena *a,
                                      pgcl_decision_record *out, char *err, int cap) {
    *out = (pgcl_decision_record){0};
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    /* One read transaction: the row, its chain entry and its contests from the same snapshot. */
    record_read r = {.decision_id = decision_id, .arena = a, .rec = out};
    st = pgcl_read_begin(db, err, cap);
    if (st == PGCL_OK) st = read_record(db, &r, err, cap);
    pgcl_qpool_release(p, db);
    return st;
}
