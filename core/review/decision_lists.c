/* Decision lists with filters and keyset cursors, and the plan behind them; see decision_lists.h.
 *
 * The file reads top to bottom: how a page is planned (below), the filters as SQL, the versions of
 * a model, the time-order check, the time plans, the page query, then the two entry points (the
 * page, and its EXPLAIN). */
#include "decision_lists.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "log.h"
#include "read_sql.h"

/* The query has two parts: an inner one that finds the seqs of the page (at most limit + 1, the
 * extra row saying whether there is a next page), and an outer one that reads those rows:
 *   SELECT <summary> FROM decisions d WHERE d.seq IN (<inner>) ORDER BY d.seq DESC
 * The inner query is planned so that an index serves each filter:
 *   - contest open / resolved / contested: driven by the contests table (a few thousand rows)
 *     joined to decisions by decision_id, then sorted: its cost is the number of contests;
 *   - model without version: one branch per version (found with an index skip-scan), each on
 *     (model_name, model_version, seq), merged: UNION ALL of per-version pages;
 *   - label / decision / model+version / item_id / request_id: the (x, seq) indexes of migration
 *     0003 give the rows in seq order directly (SQLite picks one when several are given); trace_id
 *     likewise, through the partial (trace_id, seq) index of migration 0011;
 *   - a time window, when created_at follows seq order (the audit writer stamps each transaction
 *     no earlier than the previous one; time_order_holds() verifies it rather than trusting it):
 *     the window is exactly the seq range [first seq at or after since, last seq before until],
 *     two O(log n) probes of the created_at index; the page walks that range by seq (window alone)
 *     or the other filter's (x, seq) index within it. Every page then costs O(page).
 *   - a time window otherwise: the covering index on created_at (its entries carry the seq) is
 *     probed for the window's entries below the cursor, up to PROBE_ROWS. When there are fewer,
 *     their exact lowest and highest seq (read from those same entries) become seq bounds, so no
 *     plan walks past the window; a window alone is then read as a top-N by seq over those entries.
 *     When there are more and the window is alone, the table is walked backwards by seq if the
 *     newest row below the cursor is inside the window (every row met then matches), else the
 *     top-N over the index entries is used. With another filter, that filter's index is walked.
 * Whatever the plan, every filter is also applied as a WHERE condition, so results are exact. */

#define PROBE_ROWS 10000
#define MAX_UNION_VERSIONS 32

typedef struct time_plan {
    enum { TIME_PLAN_DEFAULT, TIME_PLAN_INDEX, TIME_PLAN_SEQ } how;
    bool bounded;   /* lo..hi are the exact seqs of the window's rows below the cursor */
    int64_t lo, hi; /* lo > hi: there are none */
} time_plan;

static const time_plan NO_TIME_PLAN = {.how = TIME_PLAN_DEFAULT};

static bool has_index_filter(const pgcl_decision_filter *f) {
    return f->model || f->label || f->decision || f->item_id || f->request_id || f->trace_id;
}

static bool contest_driven(const pgcl_decision_filter *f) {
    return f->contest == PGCL_CONTEST_OPEN || f->contest == PGCL_CONTEST_RESOLVED ||
           f->contest == PGCL_CONTEST_CONTESTED;
}

/* The decision filter as a literal, for one of the three decisions: decisions_flagged (migration
 * 0008) holds the 'review' and 'block' rows only, and SQLite uses a partial index only when the
 * query states the index's own condition (it does not infer decision <> 'allow' from
 * decision = 'block'), so that condition is written out too. False for any other text (then bound
 * as a value, and the plan walks seq). */
static bool qb_decision_literal(qbuild *q, const char *decision) {
    if (strcmp(decision, "allow") == 0) qb_sql(q, " AND d.decision = 'allow'");
    else if (strcmp(decision, "review") == 0) qb_sql(q, " AND d.decision = 'review' AND d.decision <> 'allow'");
    else if (strcmp(decision, "block") == 0) qb_sql(q, " AND d.decision = 'block' AND d.decision <> 'allow'");
    else return false;
    return true;
}

/* " AND …" for each filter of f but the contest one; version overrides f->version. */
static void qb_filters(qbuild *q, const pgcl_decision_filter *f, const char *version, int64_t before_seq) {
    if (before_seq > 0) {
        qb_sql(q, " AND d.seq < ");
        qb_int(q, before_seq);
    }
    const struct {
        const char *sql, *value;
    } eq[] = {{" AND d.model_name = ", f->model},  {" AND d.model_version = ", version},
              {" AND d.label = ", f->label},
              {" AND d.decision = ", f->decision && !qb_decision_literal(q, f->decision) ? f->decision : NULL},
              {" AND d.item_id = ", f->item_id},   {" AND d.request_id = ", f->request_id},
              {" AND d.trace_id = ", f->trace_id},
              {" AND d.created_at >= ", f->since}, {" AND d.created_at < ", f->until}};
    for (size_t i = 0; i < sizeof eq / sizeof eq[0]; i++) {
        if (!eq[i].value) continue;
        qb_sql(q, eq[i].sql);
        qb_text(q, eq[i].value);
    }
    if (f->contest == PGCL_CONTEST_NONE)
        qb_sql(q, " AND NOT EXISTS (SELECT 1 FROM contests c WHERE c.decision_id = d.decision_id)");
}

/* The inner query of a decisions-driven page (one version branch when version is given). */
static void qb_inner_decisions(qbuild *q, const pgcl_decision_filter *f, const char *version, int64_t before_seq, int n,
                               const time_plan *plan) {
    qb_sql(q, "SELECT d.seq FROM decisions d");
    if (plan->how == TIME_PLAN_INDEX) qb_sql(q, " INDEXED BY decisions_created_at");
    if (plan->how == TIME_PLAN_SEQ) qb_sql(q, " NOT INDEXED");
    qb_sql(q, " WHERE 1");
    qb_filters(q, f, version, before_seq);
    if (plan->bounded) {
        qb_sql(q, " AND d.seq >= ");
        qb_int(q, plan->lo);
        qb_sql(q, " AND d.seq <= ");
        qb_int(q, plan->hi);
    }
    qb_sql(q, " ORDER BY d.seq DESC LIMIT ");
    qb_int(q, n);
}

/* The versions of a model that have decisions, by an index skip-scan (one probe per version). */
static pgcl_status model_versions(sqlite3 *db, const char *model, char ***out, int *n_out, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    char **v = NULL;
    int n = 0;
    *out = NULL;
    *n_out = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT model_version FROM decisions WHERE model_name = ? AND model_version > ?"
                           " ORDER BY model_version LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    const char *after = "";
    for (;;) {
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, model, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, after, -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            pgcl_status st = pgcl_read_step_error(db, rc, err, cap);
            for (int i = 0; i < n; i++)
                free(v[i]);
            free(v);
            sqlite3_finalize(s);
            return st;
        }
        char **grown = realloc(v, (size_t)(n + 1) * sizeof *v);
        char *copy = strdup((const char *)sqlite3_column_text(s, 0));
        if (!grown || !copy) {
            free(copy);
            v = grown ? grown : v;
            for (int i = 0; i < n; i++)
                free(v[i]);
            free(v);
            sqlite3_finalize(s);
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        v = grown;
        v[n++] = copy;
        after = copy;
        if (n > MAX_UNION_VERSIONS) break; /* too many: the caller falls back to one query */
    }
    sqlite3_finalize(s);
    *out = v;
    *n_out = n;
    return PGCL_OK;
}

/* The state of time_order_holds' walks (o is the pool's verdict, its lock held). */
typedef struct order_walk {
    pgcl_time_order *o;
    const char *path;
    int64_t last; /* the full walk: the last seq met; the probe: the seq to read */
    bool ordered; /* the full walk: seqs increased so far */
    bool found;   /* the probe: the row exists */
} order_walk;

static int bind_last(sqlite3_stmt *s, void *ctx) {
    const order_walk *w = ctx;
    return sqlite3_bind_int64(s, 1, w->last);
}

static int bind_verdict_seq(sqlite3_stmt *s, void *ctx) {
    const order_walk *w = ctx;
    return sqlite3_bind_int64(s, 1, w->o->seq);
}

/* The full walk, in (created_at, seq) order: each seq must be above the one before. */
static int take_index_entry(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    order_walk *w = ctx;
    int64_t seq = sqlite3_column_int64(s, 0);
    w->ordered = seq > w->last;
    w->last = seq;
    return w->ordered ? SQLITE_OK : SQLITE_DONE; /* out of order: the verdict is known */
}

static int take_last_created_at(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    order_walk *w = ctx;
    const char *ts = (const char *)sqlite3_column_text(s, 0);
    snprintf(w->o->ts, sizeof w->o->ts, "%s", ts ? ts : "");
    w->found = true;
    return SQLITE_DONE;
}

/* The incremental check, in seq order: each created_at must not be below the one before. */
static int take_new_row(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    order_walk *w = ctx;
    const char *ts = (const char *)sqlite3_column_text(s, 1);
    if (!ts || strcmp(ts, w->o->ts) < 0) {
        w->o->state = -1;
        pgcl_log_info("queries: %s: decision %lld has an earlier created_at than the one before it; time "
                      "filters use the general plans from now on",
                      w->path, (long long)sqlite3_column_int64(s, 0));
        return SQLITE_DONE;
    }
    w->o->seq = sqlite3_column_int64(s, 0);
    snprintf(w->o->ts, sizeof w->o->ts, "%s", ts);
    return SQLITE_OK;
}

/* Whether, in db's current read transaction, created_at never decreases as seq increases (so a
 * time window is a seq range). Checked once per pool by walking the covering created_at index in
 * (created_at, seq) order, which must then give increasing seqs; afterwards only the rows added
 * since are checked, in seq order, against the last checked row's created_at. Rows are
 * append-only, so a verdict for rows 1..n stays true; once false it stays false (rows written out
 * of order, e.g. by an older pgcld or after the clock went back across a restart) and the other
 * plans are used. Serialised per pool; the first check reads the whole index (about 0.2 s per
 * million rows), later ones only the new rows. */
static pgcl_status time_order_holds(pgcl_qpool *p, sqlite3 *db, bool *holds, char *err, int cap) {
    order_walk w = {.o = pgcl_qpool_time_order(p), .path = pgcl_qpool_path(p), .ordered = true};
    pgcl_time_order *o = w.o;
    pgcl_status st = PGCL_OK;
    pthread_mutex_lock(&o->lock);
    if (o->state == 0) {
        st = pgcl_read_walk_status(
            pgcl_db_each_row(db, "SELECT seq FROM decisions INDEXED BY decisions_created_at ORDER BY created_at, seq",
                             NULL, take_index_entry, &w, err, cap),
            err, cap);
        if (st != PGCL_OK) goto done;
        o->ts[0] = 0;
        if (w.ordered && w.last > 0) { /* the created_at of the last row, for the incremental checks */
            st = pgcl_read_walk_status(pgcl_db_each_row(db, "SELECT created_at FROM decisions WHERE seq = ?", bind_last,
                                                        take_last_created_at, &w, err, cap),
                                       err, cap);
            if (st == PGCL_OK && !w.found) st = pgcl_read_step_error(db, SQLITE_DONE, err, cap);
            if (st != PGCL_OK) goto done;
        }
        o->state = w.ordered ? 1 : -1;
        o->seq = w.last;
        if (!w.ordered)
            pgcl_log_info("queries: %s: created_at does not follow seq; time filters use the general plans", w.path);
    } else if (o->state == 1) {
        st = pgcl_read_walk_status(pgcl_db_each_row(db,
                                                    "SELECT seq, created_at FROM decisions WHERE seq > ? ORDER BY seq",
                                                    bind_verdict_seq, take_new_row, &w, err, cap),
                                   err, cap);
    }
done:
    *holds = st == PGCL_OK && o->state == 1;
    pthread_mutex_unlock(&o->lock);
    return st;
}

/* With created_at in seq order: the window's seq range [lo, hi] (lo > hi when it is empty). */
static pgcl_status window_seq_range(sqlite3 *db, const pgcl_decision_filter *f, int64_t *lo, int64_t *hi, char *err,
                                    int cap) {
    qbuild *q = calloc(1, sizeof *q);
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    bool none = false;
    pgcl_status st = PGCL_OK;
    *lo = 1;
    *hi = INT64_MAX;
    if (f->since) {
        qb_sql(q, "SELECT d.seq FROM decisions d INDEXED BY decisions_created_at WHERE d.created_at >= ");
        qb_text(q, f->since);
        qb_sql(q, " ORDER BY d.created_at, d.seq LIMIT 1");
        st = pgcl_read_scalar_int(db, q, lo, &none, err, cap);
    }
    if (st == PGCL_OK && !none && f->until) {
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT d.seq FROM decisions d INDEXED BY decisions_created_at WHERE d.created_at < ");
        qb_text(q, f->until);
        qb_sql(q, " ORDER BY d.created_at DESC, d.seq DESC LIMIT 1");
        st = pgcl_read_scalar_int(db, q, hi, &none, err, cap);
    }
    if (none) {
        *lo = 1;
        *hi = 0;
    }
    free(q);
    return st;
}

/* Chooses how a decisions-driven page with a time window is read (see the comment above). */
static pgcl_status choose_time_plan(pgcl_qpool *p, sqlite3 *db, const pgcl_decision_filter *f, int64_t before_seq,
                                    time_plan *plan, char *err, int cap) {
    *plan = NO_TIME_PLAN;
    if (!(f->since || f->until) || contest_driven(f)) return PGCL_OK;
    bool alone = !has_index_filter(f), ordered = false;
    pgcl_status st = time_order_holds(p, db, &ordered, err, cap);
    if (st != PGCL_OK) return st;
    if (ordered) {
        plan->bounded = true;
        plan->how = alone ? TIME_PLAN_SEQ : TIME_PLAN_DEFAULT;
        return window_seq_range(db, f, &plan->lo, &plan->hi, err, cap);
    }
    qbuild *q = calloc(1, sizeof *q);
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_decision_filter window = {.since = f->since, .until = f->until};

    qb_sql(q, "SELECT count(*) FROM (SELECT 1 FROM decisions d INDEXED BY decisions_created_at WHERE 1");
    qb_filters(q, &window, NULL, before_seq);
    qb_sql(q, " LIMIT ");
    qb_int(q, PROBE_ROWS);
    qb_sql(q, ")");
    int64_t n = 0;
    st = pgcl_read_scalar_int(db, q, &n, NULL, err, cap);
    if (st == PGCL_OK && n < PROBE_ROWS) {
        /* Few enough: the exact seq bounds of those rows, from the same (covering) index entries. */
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT min(d.seq) FROM decisions d INDEXED BY decisions_created_at WHERE 1");
        qb_filters(q, &window, NULL, before_seq);
        bool none = false;
        if ((st = pgcl_read_scalar_int(db, q, &plan->lo, &none, err, cap)) == PGCL_OK) {
            memset(q, 0, sizeof *q);
            qb_sql(q, "SELECT max(d.seq) FROM decisions d INDEXED BY decisions_created_at WHERE 1");
            qb_filters(q, &window, NULL, before_seq);
            st = pgcl_read_scalar_int(db, q, &plan->hi, NULL, err, cap);
        }
        plan->bounded = true;
        if (none) { /* no row: an empty range */
            plan->lo = 1;
            plan->hi = 0;
        }
        if (alone) plan->how = TIME_PLAN_INDEX;
    } else if (st == PGCL_OK && alone) {
        /* Is the newest row below the cursor inside the window? Then the walk by seq starts there. */
        plan->how = TIME_PLAN_INDEX;
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT d.created_at >= ");
        qb_text(q, f->since ? f->since : "");
        if (f->until) {
            qb_sql(q, " AND d.created_at < ");
            qb_text(q, f->until);
        }
        qb_sql(q, " FROM decisions d WHERE 1");
        if (before_seq > 0) {
            qb_sql(q, " AND d.seq < ");
            qb_int(q, before_seq);
        }
        qb_sql(q, " ORDER BY d.seq DESC LIMIT 1");
        int64_t inside = 0;
        st = pgcl_read_scalar_int(db, q, &inside, NULL, err, cap);
        if (st == PGCL_OK && inside) plan->how = TIME_PLAN_SEQ;
    }
    free(q);
    return st;
}

/* Version names found by model_versions(); the query binds them, so they live as long as it. */
typedef struct version_list {
    char **v;
    int n;
} version_list;

static void version_list_free(version_list *vl) {
    for (int i = 0; i < vl->n; i++)
        free(vl->v[i]);
    free(vl->v);
    vl->v = NULL;
    vl->n = 0;
}

/* Builds the page query into q (n = rows to fetch); *vl holds strings q binds (free after use). */
static pgcl_status build_list_query(pgcl_qpool *p, sqlite3 *db, qbuild *q, version_list *vl,
                                    const pgcl_decision_filter *f, int64_t before_seq, int n, const char **plan_note,
                                    char *err, int cap) {
    qb_sql(q, "SELECT " SUMMARY_COLS ", " FACTS_COLS " FROM decisions d WHERE d.seq IN (");
    *plan_note = "single query";
    if (contest_driven(f)) {
        *plan_note = "driven by contests";
        qb_sql(q, "SELECT DISTINCT d.seq FROM contests c CROSS JOIN decisions d ON d.decision_id = c.decision_id"
                  " WHERE 1");
        qb_filters(q, f, f->version, before_seq);
        if (f->contest == PGCL_CONTEST_OPEN)
            qb_sql(q, " AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id = c.contest_id)");
        else if (f->contest == PGCL_CONTEST_RESOLVED)
            qb_sql(q, " AND NOT EXISTS (SELECT 1 FROM contests c2 WHERE c2.decision_id = d.decision_id AND NOT EXISTS"
                      " (SELECT 1 FROM resolutions r WHERE r.contest_id = c2.contest_id))");
        qb_sql(q, " ORDER BY d.seq DESC LIMIT ");
        qb_int(q, n);
    } else if (f->model && !f->version) {
        time_plan plan;
        pgcl_status st = choose_time_plan(p, db, f, before_seq, &plan, err, cap);
        if (st == PGCL_OK) st = model_versions(db, f->model, &vl->v, &vl->n, err, cap);
        if (st != PGCL_OK) return st;
        if (vl->n == 0) {
            *plan_note = "model has no decisions";
            qb_sql(q, "SELECT NULL WHERE 0");
        } else if (vl->n > MAX_UNION_VERSIONS) {
            *plan_note = "single query (too many versions to merge)";
            qb_inner_decisions(q, f, NULL, before_seq, n, &plan);
        } else {
            *plan_note = "merge of one index range per model version";
            for (int i = 0; i < vl->n; i++) {
                qb_sql(q, i ? " UNION ALL SELECT seq FROM (" : "SELECT seq FROM (");
                qb_inner_decisions(q, f, vl->v[i], before_seq, n, &plan);
                qb_sql(q, ")");
            }
            qb_sql(q, " ORDER BY 1 DESC LIMIT ");
            qb_int(q, n);
        }
    } else {
        time_plan plan;
        pgcl_status st = choose_time_plan(p, db, f, before_seq, &plan, err, cap);
        if (st != PGCL_OK) return st;
        if (plan.how == TIME_PLAN_INDEX) *plan_note = "time window: top-N by seq over the created_at index entries";
        if (plan.how == TIME_PLAN_SEQ && plan.bounded) *plan_note = "time window: walk by seq within its seq range";
        if (plan.how == TIME_PLAN_SEQ && !plan.bounded)
            *plan_note = "time window: walk by seq (the window is dense below the cursor)";
        if (plan.how == TIME_PLAN_DEFAULT && plan.bounded)
            *plan_note = "other filter's index, within the window's seq range";
        qb_inner_decisions(q, f, f->version, before_seq, n, &plan);
    }
    qb_sql(q, ") ORDER BY d.seq DESC");
    return PGCL_OK;
}

pgcl_status pgcl_decisions_list(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                pgcl_row_arena *a, pgcl_decision_page *out, char *err, int cap) {
    *out = (pgcl_decision_page){0};
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    version_list vl = {0};
    pgcl_decision_summary *rows = NULL;
    int n_rows = 0, room = 0;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    const char *note;
    if ((st = pgcl_read_begin(db, err, cap)) != PGCL_OK ||
        (st = build_list_query(p, db, q, &vl, f, before_seq, limit + 1, &note, err, cap)) != PGCL_OK)
        goto done;
    if ((st = qb_prepare(db, q, NULL, &s, err, cap)) != PGCL_OK) goto done;
    int rc;
    int64_t last = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n_rows == limit) { /* the extra row: there is a next page, starting below the last one sent */
            out->next_before = last;
            break;
        }
        if (n_rows == room) {
            room = room ? 2 * room : 32;
            if (!(rows = pgcl_row_arena_grow(a, rows, (size_t)n_rows, (size_t)room, sizeof *rows))) break;
        }
        pgcl_read_summary(a, s, &rows[n_rows]);
        pgcl_read_facts(a, s, 11, &rows[n_rows].facts);
        if (a->failed) break;
        /* Keyset paging holds only if the page is strictly newest first and below the cursor:
         * otherwise the next cursor would skip or repeat rows. */
        PGCL_ASSERT(before_seq <= 0 || rows[n_rows].seq < before_seq);
        PGCL_ASSERT(n_rows == 0 || rows[n_rows].seq < last);
        last = rows[n_rows].seq;
        n_rows++;
    }
    if (a->failed) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
        goto done;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = pgcl_read_step_error(db, rc, err, cap);
        goto done;
    }
    out->rows = rows;
    out->n = n_rows;
    st = PGCL_OK;
done:
    if (st != PGCL_OK) *out = (pgcl_decision_page){0};
    sqlite3_finalize(s);
    version_list_free(&vl);
    pgcl_qpool_release(p, db);
    free(q);
    return st;
}

pgcl_status pgcl_decisions_explain(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   pgcl_row_arena *a, pgcl_decisions_plan *out, char *err, int cap) {
    *out = (pgcl_decisions_plan){0};
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    version_list vl = {0};
    const char **lines = NULL;
    int n_lines = 0, room = 0;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    const char *note;
    if ((st = pgcl_read_begin(db, err, cap)) != PGCL_OK ||
        (st = build_list_query(p, db, q, &vl, f, before_seq, limit + 1, &note, err, cap)) != PGCL_OK)
        goto done;
    if ((st = qb_prepare(db, q, "EXPLAIN QUERY PLAN ", &s, err, cap)) != PGCL_OK) goto done;
    /* Rows: id, parent, notused, detail. Indent each line by its depth in the tree. */
    int64_t ids[64];
    int depth_of[64], n_ids = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0), parent = sqlite3_column_int64(s, 1);
        int depth = 0;
        for (int i = 0; i < n_ids; i++)
            if (ids[i] == parent) depth = depth_of[i] + 1;
        if (n_ids < 64) {
            ids[n_ids] = id;
            depth_of[n_ids++] = depth;
        }
        char line[600];
        snprintf(line, sizeof line, "%*s%s", 2 * depth, "", (const char *)sqlite3_column_text(s, 3));
        if (n_lines == room) {
            room = room ? 2 * room : 16;
            if (!(lines = pgcl_row_arena_grow(a, lines, (size_t)n_lines, (size_t)room, sizeof *lines))) break;
        }
        if (!(lines[n_lines++] = pgcl_row_arena_strdup(a, line))) break;
    }
    out->sql = pgcl_row_arena_strdup(a, q->sql);
    out->strategy = note;
    if (a->failed) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
        goto done;
    }
    if (rc != SQLITE_DONE) {
        st = pgcl_read_step_error(db, rc, err, cap);
        goto done;
    }
    out->lines = lines;
    out->n_lines = n_lines;
    st = PGCL_OK;
done:
    if (st != PGCL_OK) *out = (pgcl_decisions_plan){0};
    sqlite3_finalize(s);
    version_list_free(&vl);
    pgcl_qpool_release(p, db);
    free(q);
    return st;
}
