/* Input retention; see retention.h. */
#include "retention.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "audit_store_impl.h"
#include "clock.h"
#include "db.h"
#include "log.h"

/* Retention walks decisions in seq order and stops at the first one created at or after the
 * horizon: the writer stamps each transaction no earlier than the one before, so that is where the
 * older ones end — and a row with an old created_at written behind the writer's back (verify
 * reports it) cannot make the walk drop the inputs of newer decisions before it. */
static const char LAST_SEQ_SQL[] = "SELECT max(seq) FROM decisions";
/* The first decision in (?1, ?2] created at or after ?3, read by rowid range (not through the
 * created_at index, which would visit every newer decision). */
static const char FIRST_RECENT_SQL[] =
    "SELECT min(seq) FROM decisions NOT INDEXED WHERE seq > ?1 AND seq <= ?2 AND created_at >= ?3";
/* Whether the oldest stored input belongs to a decision older than the horizon ?1. */
static const char OLDEST_INPUT_SQL[] = "SELECT d.created_at < ?1 FROM decision_inputs AS i JOIN decisions AS d ON"
                                       " d.seq = i.decision_seq ORDER BY i.decision_seq LIMIT 1";
static const char CURSOR_SQL[] = "SELECT through_seq FROM input_retention WHERE id = 1";
static const char ADVANCE_SQL[] = "UPDATE input_retention SET through_seq = ?1 WHERE id = 1";

/* Decisions whose input stays: chained by an encoding-1 entry (its payload hashes the bytes), or
 * under an open contest. ?1 < seq <= ?2. */
#define KEPT_DECISIONS_SQL                                                                                         \
    " AND decision_seq NOT IN (SELECT row_seq FROM audit_chain WHERE kind = 'decisions' AND row_seq > ?1"        \
    " AND row_seq <= ?2)"                                                                                          \
    " AND decision_seq NOT IN (SELECT d.seq FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id" \
    " WHERE NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id) AND d.seq > ?1"          \
    " AND d.seq <= ?2)"

/* One range of decisions past the horizon. */
static const char DROP_RANGE_SQL[] =
    "DELETE FROM decision_inputs WHERE decision_seq > ?1 AND decision_seq <= ?2" KEPT_DECISIONS_SQL;

/* Behind the cursor: inputs kept for a contest that has been resolved since. The contests are few
 * (thousands), so this reads them all. */
static const char DROP_RESOLVED_SQL[] =
    "DELETE FROM decision_inputs WHERE decision_seq IN (SELECT d.seq FROM contests AS c JOIN decisions AS d ON"
    " d.decision_id = c.decision_id WHERE d.seq <= ?2)" KEPT_DECISIONS_SQL;

/* A query's parameters: ?1 and ?2 the integers lo and hi and ?3 the text (when not NULL) — or ?1
 * the text when the query has one parameter. */
typedef struct query_args {
    int64_t lo, hi;
    const char *text;
} query_args;

static int bind_args(sqlite3_stmt *s, void *ctx) {
    const query_args *a = ctx;
    if (sqlite3_bind_parameter_count(s) == 0) return SQLITE_OK;
    if (sqlite3_bind_parameter_count(s) == 1 && a->text) return sqlite3_bind_text(s, 1, a->text, -1, SQLITE_STATIC);
    int rc = sqlite3_bind_int64(s, 1, a->lo);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(s) >= 2) rc = sqlite3_bind_int64(s, 2, a->hi);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(s) >= 3) rc = sqlite3_bind_text(s, 3, a->text, -1, SQLITE_STATIC);
    return rc;
}

/* The single integer a query answers (pgcl_db_query_int); *found false when no row or NULL. */
static pgcl_status query_int(sqlite3 *db, const char *sql, query_args args, int64_t *out, bool *found, char *err,
                             int cap) {
    return pgcl_db_query_int(db, sql, bind_args, &args, out, found, err, cap) == SQLITE_OK ? PGCL_OK : PGCL_ERR_DB;
}

/* Runs a statement for its effect with args; adds the rows it changed to *changed (may be NULL). */
static pgcl_status run_statement(sqlite3 *db, const char *sql, query_args args, int64_t *changed, char *err, int cap) {
    if (pgcl_db_each_row(db, sql, bind_args, NULL, &args, err, cap) != SQLITE_OK) return PGCL_ERR_DB;
    if (changed) *changed += sqlite3_changes(db);
    return PGCL_OK;
}

pgcl_status pgcl_retention_step(const pgcl_retention_db *db, pgcl_drop_inputs *job, char *err, int cap) {
    job->dropped = 0;
    job->more = false;
    int64_t last_seq = 0, cursor = 0, first_recent = 0;
    bool any = false, have_cursor = false, recent = false;
    pgcl_status st = db->read_int(db->ctx, PGCL_RETENTION_CURSOR, 0, 0, NULL, &cursor, &have_cursor, err, cap);
    if (st == PGCL_OK) st = db->read_int(db->ctx, PGCL_RETENTION_LAST_SEQ, 0, 0, NULL, &last_seq, &any, err, cap);
    if (st != PGCL_OK) return st;
    PGCL_ASSERT(have_cursor); /* the stores' migrations insert the one row, and nothing deletes it */
    int64_t hi = any && last_seq - cursor > job->max_rows ? cursor + job->max_rows : last_seq;
    if (any && hi > cursor &&
        (st = db->read_int(db->ctx, PGCL_RETENTION_FIRST_RECENT, cursor, hi, job->older_than, &first_recent, &recent,
                            err, cap)) != PGCL_OK)
        return st;
    if (recent) hi = first_recent - 1; /* the walk ends there */
    job->more = !recent && hi < last_seq;
    if (!any || hi <= cursor) /* nothing new past the horizon: catch up behind the cursor */
        return db->run(db->ctx, PGCL_RETENTION_DROP_RESOLVED, 0, cursor, &job->dropped, err, cap);
    if ((st = db->run(db->ctx, PGCL_RETENTION_DROP_RANGE, cursor, hi, &job->dropped, err, cap)) != PGCL_OK) return st;
    return db->run(db->ctx, PGCL_RETENTION_ADVANCE, hi, 0, NULL, err, cap);
}

/* The SQLite store's statements of the walk. */
static pgcl_status walk_read_int(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, const char *text,
                                 int64_t *out, bool *found, char *err, int cap) {
    PGCL_ASSERT(which == PGCL_RETENTION_CURSOR || which == PGCL_RETENTION_LAST_SEQ ||
                which == PGCL_RETENTION_FIRST_RECENT);
    const char *sql = which == PGCL_RETENTION_CURSOR     ? CURSOR_SQL
                      : which == PGCL_RETENTION_LAST_SEQ ? LAST_SEQ_SQL
                                                         : FIRST_RECENT_SQL;
    return query_int(ctx, sql, (query_args){lo, hi, text}, out, found, err, cap);
}

static pgcl_status walk_run(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, int64_t *changed, char *err,
                            int cap) {
    PGCL_ASSERT(which == PGCL_RETENTION_DROP_RANGE || which == PGCL_RETENTION_DROP_RESOLVED ||
                which == PGCL_RETENTION_ADVANCE);
    const char *sql = which == PGCL_RETENTION_DROP_RANGE      ? DROP_RANGE_SQL
                      : which == PGCL_RETENTION_DROP_RESOLVED ? DROP_RESOLVED_SQL
                                                              : ADVANCE_SQL;
    return run_statement(ctx, sql, (query_args){lo, hi, NULL}, changed, err, cap);
}

pgcl_status pgcl_sqlite_drop_inputs_fn(pgcl_audit_txn *t, void *ctx, char *err, int cap) {
    pgcl_retention_db db = {.ctx = pgcl_audit_txn_db(t), .read_int = walk_read_int, .run = walk_run};
    return pgcl_retention_step(&db, ctx, err, cap);
}

/* ---- the daemon's thread ---- */

#define STEP_ROWS 4096 /* decisions looked at per write transaction: a few ms of the writer's time */

struct pgcl_retention {
    pgcl_audit *store;
    double days;
    int64_t interval_us;
    void (*on_dropped)(int64_t n, void *ctx);
    void *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
};

/* Whether any stored input belongs to a decision older than the horizon, read on a connection of
 * its own: a step that has nothing to do takes no write transaction (on an empty database it would
 * otherwise start the chain with its genesis entry). True when it cannot tell. */
static bool anything_to_drop(pgcl_audit *store, const char *horizon) {
    char err[256];
    sqlite3 *db = pgcl_db_open_reader(pgcl_audit_sqlite_path(store), err, sizeof err);
    if (!db) return true;
    int64_t oldest_is_older = 0;
    bool have_input = false;
    bool answered = query_int(db, OLDEST_INPUT_SQL, (query_args){.text = horizon}, &oldest_is_older, &have_input, err,
                              sizeof err) ==
                    PGCL_OK;
    sqlite3_close(db);
    return !answered || (have_input && oldest_is_older);
}

static bool stopping(pgcl_retention *r) {
    pthread_mutex_lock(&r->lock);
    bool s = r->stopping;
    pthread_mutex_unlock(&r->lock);
    return s;
}

/* One pass with the horizon given: the read-only check, then steps on the writer until nothing
 * older than the horizon is left, or until r (the daemon's thread; NULL for a single pass) is asked
 * to stop. The number of inputs dropped, or -1 (err set). */
static int64_t drop_pass(pgcl_audit *store, const char *horizon, pgcl_retention *r, char *err, int cap) {
    int64_t total = 0;
    bool more = true;
    do {
        int64_t dropped = 0;
        if (store->ops->drop_inputs(store, horizon, STEP_ROWS, &dropped, &more, err, cap) != PGCL_OK) return -1;
        total += dropped;
        if (dropped && r && r->on_dropped) r->on_dropped(dropped, r->ctx);
    } while (more && !(r && stopping(r)));
    return total;
}

pgcl_status pgcl_sqlite_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped,
                                    bool *more, char *err, int cap) {
    *dropped = 0;
    *more = false;
    if (!anything_to_drop(store, older_than)) return PGCL_OK;
    pgcl_drop_inputs job = {.older_than = older_than, .max_rows = max_rows};
    pgcl_status st = pgcl_audit_run(store, pgcl_sqlite_drop_inputs_fn, &job, err, cap);
    *dropped = job.dropped;
    *more = job.more;
    return st;
}

int64_t pgcl_retention_period_us(double days) { return llround(days * 86400e6); }

/* The horizon `days` before now, to the microsecond (created_at's resolution: a fraction of a day
 * is not cut to whole seconds). */
static void horizon_of(double days, char out[PGCL_TIMESTAMP_LEN + 1]) {
    pgcl_timestamp_after_us(-pgcl_retention_period_us(days), out);
}

int64_t pgcl_retention_run_once(pgcl_audit *store, double days, char *err, int cap) {
    char horizon[PGCL_TIMESTAMP_LEN + 1];
    horizon_of(days, horizon);
    return drop_pass(store, horizon, NULL, err, cap);
}

int64_t pgcl_retention_run_before(pgcl_audit *store, const char *older_than, char *err, int cap) {
    return drop_pass(store, older_than, NULL, err, cap);
}

static void *retention_main(void *arg) {
    pgcl_retention *r = arg;
    for (;;) {
        char err[512], horizon[PGCL_TIMESTAMP_LEN + 1];
        horizon_of(r->days, horizon);
        int64_t pass = drop_pass(r->store, horizon, r, err, sizeof err);
        if (pass < 0)
            pgcl_log_warn("input retention: %s (retrying in %lld s)", err, (long long)(r->interval_us / 1000000));
        else if (pass)
            pgcl_log_info("input retention: dropped the stored inputs of %lld decisions", (long long)pass);
        pthread_mutex_lock(&r->lock);
        struct timespec until = pgcl_monotonic_timespec(pgcl_monotonic_us() + r->interval_us);
        while (!r->stopping && pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT) {
        }
        bool stop = r->stopping;
        pthread_mutex_unlock(&r->lock);
        if (stop) return NULL;
    }
}

pgcl_retention *pgcl_retention_create(pgcl_audit *store, double days, void (*on_dropped)(int64_t n, void *ctx),
                                      void *ctx, char *err, int cap) {
    pgcl_retention *r = calloc(1, sizeof *r);
    if (!r) {
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    double interval_s = days * 86400.0 / 10;
    interval_s = interval_s < 1 ? 1 : interval_s > 300 ? 300 : interval_s;
    *r = (pgcl_retention){.store = store, .days = days, .interval_us = (int64_t)(interval_s * 1e6),
                          .on_dropped = on_dropped, .ctx = ctx};
    pthread_mutex_init(&r->lock, NULL);
    pgcl_cond_init_monotonic(&r->wake);
    if (pthread_create(&r->thread, NULL, retention_main, r) != 0) {
        pgcl_errorf(err, cap, "input retention: cannot start its thread");
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->wake);
        free(r);
        return NULL;
    }
    return r;
}

void pgcl_retention_destroy(pgcl_retention *r) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->wake);
    free(r);
}
