/* The transparency figures; see stats_reads.h. */
#include "stats_reads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read_sql.h"

/* " AND <col> >= ? AND <col> < ?" for the bounds given. */
static void qb_range(qbuild *q, const char *col, const char *since, const char *until) {
    char text[96];
    if (since) {
        snprintf(text, sizeof text, " AND %s >= ", col);
        qb_sql(q, text);
        qb_text(q, since);
    }
    if (until) {
        snprintf(text, sizeof text, " AND %s < ", col);
        qb_sql(q, text);
        qb_text(q, until);
    }
}

/* Adds n to name's count, appending name (copied) when it is new. False when out of memory. */
static bool named_counts_add(pgcl_row_arena *a, pgcl_named_counts *c, const char *name, int64_t n) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0) {
            c->v[i].count += n;
            return true;
        }
    if (c->n == c->room) {
        int room = c->room ? 2 * c->room : 8;
        pgcl_named_count *more = pgcl_row_arena_grow(a, c->v, (size_t)c->n, (size_t)room, sizeof *more);
        if (!more) return false;
        c->v = more;
        c->room = room;
    }
    const char *copy = pgcl_row_arena_strdup(a, name);
    if (!copy) return false;
    c->v[c->n++] = (pgcl_named_count){.name = copy, .count = n};
    return true;
}

/* Makes room for one more element of an arena array. False when out of memory. */
static bool room_for_one(pgcl_row_arena *a, void **v, int n, int *room, size_t size) {
    if (n < *room) return true;
    int grown = *room ? 2 * *room : 8;
    void *more = pgcl_row_arena_grow(a, *v, (size_t)n, (size_t)grown, size);
    if (!more) return false;
    *v = more;
    *room = grown;
    return true;
}

bool pgcl_decision_counts_start(pgcl_row_arena *a, pgcl_decision_counts *dc) {
    *dc = (pgcl_decision_counts){0};
    return named_counts_add(a, &dc->by_decision, "allow", 0) && named_counts_add(a, &dc->by_decision, "review", 0) &&
           named_counts_add(a, &dc->by_decision, "block", 0);
}

bool pgcl_decision_counts_add(pgcl_row_arena *a, pgcl_decision_counts *dc, const char *model, const char *version,
                              const char *label, const char *decision, int64_t n) {
    if (model && version) {
        dc->total += n;
        /* rows come grouped by model, version: a new pair starts a new entry */
        pgcl_model_version_count *cur = dc->n_mv ? &dc->by_mv[dc->n_mv - 1] : NULL;
        if (!cur || strcmp(cur->model_name, model) != 0 || strcmp(cur->model_version, version) != 0) {
            if (!room_for_one(a, (void **)&dc->by_mv, dc->n_mv, &dc->room_mv, sizeof *dc->by_mv)) return false;
            cur = &dc->by_mv[dc->n_mv++];
            *cur = (pgcl_model_version_count){.model_name = pgcl_row_arena_strdup(a, model),
                                              .model_version = pgcl_row_arena_strdup(a, version)};
            if (a->failed) return false;
        }
        cur->count += n;
    }
    if (label && !named_counts_add(a, &dc->by_label, label, n)) return false;
    return !decision || named_counts_add(a, &dc->by_decision, decision, n);
}

void pgcl_decision_counts_put(const pgcl_decision_counts *dc, pgcl_audit_stats *out) {
    out->decisions_total = dc->total;
    out->by_model_version = dc->by_mv;
    out->n_by_model_version = dc->n_mv;
    out->by_label = dc->by_label.v;
    out->n_by_label = dc->by_label.n;
    out->by_decision = dc->by_decision.v;
    out->n_by_decision = dc->by_decision.n;
}

/* Decision counts. Without a window, three scans of narrow covering indexes (model+version,
 * label, decision) instead of one scan of the table, whose rows are wide; with a window, one
 * grouped pass over the window's rows (found through the created_at index). Every query has the
 * columns (model_name, model_version, label, decision, count), NULL where not grouped. */
static pgcl_status stats_decisions(sqlite3 *db, qbuild *q, const char *since, const char *until, pgcl_row_arena *a,
                                   pgcl_audit_stats *out, char *err, int cap) {
    static const char *const whole[] = {
        "SELECT model_name, model_version, NULL, NULL, count(*) FROM decisions GROUP BY model_name, model_version",
        "SELECT NULL, NULL, label, NULL, count(*) FROM decisions GROUP BY label",
        "SELECT NULL, NULL, NULL, decision, count(*) FROM decisions GROUP BY decision",
    };
    pgcl_decision_counts dc;
    bool ok = pgcl_decision_counts_start(a, &dc);
    pgcl_status st = PGCL_OK;
    bool window = since || until;
    for (int k = 0; ok && st == PGCL_OK && k < (window ? 1 : 3); k++) {
        memset(q, 0, sizeof *q);
        if (window) {
            qb_sql(q, "SELECT model_name, model_version, label, decision, count(*) FROM decisions WHERE 1");
            qb_range(q, "created_at", since, until);
            qb_sql(q, " GROUP BY model_name, model_version, label, decision");
        } else {
            qb_sql(q, whole[k]);
        }
        sqlite3_stmt *s = NULL;
        if ((st = qb_prepare(db, q, NULL, &s, err, cap)) != PGCL_OK) break;
        int rc;
        while (ok && (rc = sqlite3_step(s)) == SQLITE_ROW)
            ok = pgcl_decision_counts_add(
                a, &dc, (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
                (const char *)sqlite3_column_text(s, 2), (const char *)sqlite3_column_text(s, 3), sqlite3_column_int64(s, 4));
        if (ok && rc != SQLITE_DONE) st = pgcl_read_step_error(db, rc, err, cap);
        sqlite3_finalize(s);
    }
    if (!ok) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_decision_counts_put(&dc, out);
    return st;
}

/* SQL: a resolved contest's time from filing to resolution, in seconds (c: contests, r: resolutions). */
#define RESOLUTION_SECONDS_SQL "((julianday(r.resolved_at) - julianday(c.filed_at)) * 86400.0)"

static pgcl_status stats_contests(sqlite3 *db, qbuild *q, const char *since, const char *until, pgcl_row_arena *a,
                                  pgcl_audit_stats *out, char *err, int cap) {
    /* One row per model version of the contested decisions: contests filed, resolved and
     * overturned, and the median time to resolution of its resolved ones (by a window: the middle
     * row, or the mean of the two middle rows). */
    memset(q, 0, sizeof *q);
    qb_sql(q, "SELECT v.mn, v.mv, v.filed, v.resolved, v.overturned, m.median FROM"
              " (SELECT d.model_name AS mn, d.model_version AS mv, count(*) AS filed, count(r.seq) AS resolved,"
              " coalesce(sum(r.outcome = 'overturned'), 0) AS overturned"
              " FROM contests c LEFT JOIN decisions d ON d.decision_id = c.decision_id"
              " LEFT JOIN resolutions r ON r.contest_id = c.contest_id WHERE 1");
    qb_range(q, "c.filed_at", since, until);
    qb_sql(q, " GROUP BY mn, mv) v LEFT JOIN"
              " (SELECT mn, mv, avg(s) AS median FROM"
              " (SELECT d.model_name AS mn, d.model_version AS mv,"
              " " RESOLUTION_SECONDS_SQL " AS s,"
              " row_number() OVER (PARTITION BY d.model_name, d.model_version ORDER BY"
              " " RESOLUTION_SECONDS_SQL ") AS rn,"
              " count(*) OVER (PARTITION BY d.model_name, d.model_version) AS cnt"
              " FROM contests c JOIN resolutions r ON r.contest_id = c.contest_id"
              " LEFT JOIN decisions d ON d.decision_id = c.decision_id WHERE 1");
    qb_range(q, "c.filed_at", since, until);
    qb_sql(q, ") WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY mn, mv) m"
              " ON m.mn IS v.mn AND m.mv IS v.mv ORDER BY v.mn, v.mv");
    sqlite3_stmt *s = NULL;
    pgcl_status st = qb_prepare(db, q, NULL, &s, err, cap);
    if (st != PGCL_OK) return st;
    pgcl_contest_figures *rows = NULL;
    int n_rows = 0, room = 0;
    int64_t filed = 0, resolved = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!room_for_one(a, (void **)&rows, n_rows, &room, sizeof *rows)) break;
        pgcl_contest_figures *r = &rows[n_rows++];
        *r = (pgcl_contest_figures){.model_name = pgcl_read_text(a, s, 0),
                                    .model_version = pgcl_read_text(a, s, 1),
                                    .filed = sqlite3_column_int64(s, 2),
                                    .resolved = sqlite3_column_int64(s, 3),
                                    .overturned = sqlite3_column_int64(s, 4),
                                    .median_resolution_seconds = pgcl_read_opt_real(s, 5)};
        if (a->failed) break;
        filed += r->filed;
        resolved += r->resolved;
    }
    if (a->failed) {
        pgcl_errorf(err, cap, "out of memory");
        st = PGCL_ERR_NOMEM;
    } else if (rc != SQLITE_DONE) {
        st = pgcl_read_step_error(db, rc, err, cap);
    }
    sqlite3_finalize(s);
    s = NULL;

    /* Median time from filing to resolution, over the resolved contests filed in range. */
    pgcl_opt_real median = {0};
    if (st == PGCL_OK && resolved > 0) {
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT " RESOLUTION_SECONDS_SQL " AS s"
                  " FROM contests c JOIN resolutions r ON r.contest_id = c.contest_id WHERE 1");
        qb_range(q, "c.filed_at", since, until);
        qb_sql(q, " ORDER BY s LIMIT ");
        qb_int(q, resolved % 2 ? 1 : 2);
        qb_sql(q, " OFFSET ");
        qb_int(q, (resolved - 1) / 2);
        if ((st = qb_prepare(db, q, NULL, &s, err, cap)) == PGCL_OK) {
            double sum = 0;
            int n = 0;
            while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                sum += sqlite3_column_double(s, 0);
                n++;
            }
            if (rc != SQLITE_DONE)
                st = pgcl_read_step_error(db, rc, err, cap);
            else if (n > 0)
                median = (pgcl_opt_real){.present = true, .value = sum / n};
            sqlite3_finalize(s);
        }
    }
    out->contests_filed = filed;
    out->contests_resolved = resolved;
    out->median_resolution_seconds = median;
    out->contests_by_model_version = rows;
    out->n_contests_by_model_version = n_rows;
    return st;
}

pgcl_status pgcl_audit_stats_read(pgcl_qpool *p, const char *since, const char *until, pgcl_row_arena *a,
                                  pgcl_audit_stats *out, char *err, int cap) {
    *out = (pgcl_audit_stats){0};
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!q) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    /* One snapshot for every figure. */
    if ((st = pgcl_read_begin(db, err, cap)) != PGCL_OK) goto done;
    if ((st = stats_decisions(db, q, since, until, a, out, err, cap)) != PGCL_OK) goto done;
    st = stats_contests(db, q, since, until, a, out, err, cap);
done:
    if (st != PGCL_OK) *out = (pgcl_audit_stats){0};
    pgcl_qpool_release(p, db);
    free(q);
    return st;
}
