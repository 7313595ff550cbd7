/* The contest queue; see contest_reads.h. */
#include "contest_reads.h"

#include "db.h"
#include "read_sql.h"
#include "time_cursor.h"

static const char CONTESTS_OPEN_SQL[] =
    "SELECT c.seq, c.contest_id, c.decision_id, c.filed_at, c.filed_by, c.reason, d.label, d.decision,"
    " d.model_name, d.model_version, d.item_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
    " FROM contests c LEFT JOIN decisions d ON d.decision_id = c.decision_id"
    " WHERE c.seq > ? AND NOT EXISTS (SELECT 1 FROM resolutions r WHERE r.contest_id = c.contest_id)"
    " ORDER BY c.seq LIMIT ?";
static const char CONTESTS_RESOLVED_SQL[] =
    "SELECT r.seq, c.contest_id, c.decision_id, c.filed_at, c.filed_by, c.reason, d.label, d.decision,"
    " d.model_name, d.model_version, d.item_id, r.seq, r.resolved_at, r.resolved_by, r.resolver_key_id,"
    " r.outcome, r.corrected_label, r.note"
    " FROM resolutions r CROSS JOIN contests c ON c.contest_id = r.contest_id"
    " LEFT JOIN decisions d ON d.decision_id = c.decision_id"
    " WHERE r.seq < ? ORDER BY r.seq DESC LIMIT ?";

/* The state of one page read, shared by the callbacks. */
typedef struct page_read {
    bool open;
    int64_t after_seq;
    int limit, window_days;
    int64_t now_us;
    pgcl_row_arena *arena;
    pgcl_contest_queue_row *rows;
    int n, room;
    int64_t last, next;
} page_read;

static int bind_page(sqlite3_stmt *s, void *ctx) {
    const page_read *r = ctx;
    int rc = sqlite3_bind_int64(s, 1, r->open ? r->after_seq : r->after_seq > 0 ? r->after_seq : INT64_MAX);
    return rc == SQLITE_OK ? sqlite3_bind_int(s, 2, r->limit + 1) : rc;
}

void pgcl_contest_queue_row_time(pgcl_contest_queue_row *c, bool open, int window_days, int64_t now_us) {
    int64_t filed_us = 0;
    if (!c->filed_at || !pgcl_time_parse(c->filed_at, &filed_us)) return;
    int64_t due = filed_us + (int64_t)window_days * PGCL_US_PER_DAY;
    int64_t age_us = now_us - filed_us;
    c->timed = true;
    pgcl_time_format(due, c->deadline);
    c->age_seconds = age_us >= 0 ? age_us / 1000000 : -((-age_us + 999999) / 1000000);
    c->overdue = open && now_us > due;
}

static int take_contest(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    (void)err;
    (void)cap;
    page_read *r = ctx;
    if (r->n == r->limit) { /* the extra row: there is a next page */
        r->next = r->last;
        return SQLITE_DONE;
    }
    if (r->n == r->room) {
        int room = r->room ? 2 * r->room : 32;
        pgcl_contest_queue_row *more = pgcl_row_arena_grow(r->arena, r->rows, (size_t)r->n, (size_t)room, sizeof *more);
        if (!more) return SQLITE_NOMEM;
        r->rows = more;
        r->room = room;
    }
    pgcl_row_arena *a = r->arena;
    pgcl_contest_queue_row *c = &r->rows[r->n];
    c->contest_id = pgcl_read_text(a, s, 1);
    c->decision_id = pgcl_read_text(a, s, 2);
    c->filed_at = pgcl_read_text(a, s, 3);
    c->filed_by = pgcl_read_text(a, s, 4);
    c->reason = pgcl_read_text(a, s, 5);
    c->label = pgcl_read_text(a, s, 6);
    c->decision = pgcl_read_text(a, s, 7);
    c->model_name = pgcl_read_text(a, s, 8);
    c->model_version = pgcl_read_text(a, s, 9);
    c->item_id = pgcl_read_text(a, s, 10);
    pgcl_read_resolution(a, s, 11, &c->resolution);
    if (a->failed) return SQLITE_NOMEM;
    pgcl_contest_queue_row_time(c, r->open, r->window_days, r->now_us);
    /* The cursor is the last row's seq: rows must come strictly past the previous cursor and in
     * the queue's order (open: oldest first; resolved: newest resolution first), or a page would
     * skip or repeat contests. */
    int64_t seq = sqlite3_column_int64(s, 0);
    if (r->open)
        PGCL_ASSERT(seq > r->after_seq && (r->n == 0 || seq > r->last));
    else
        PGCL_ASSERT((r->after_seq <= 0 || seq < r->after_seq) && (r->n == 0 || seq < r->last));
    r->last = seq;
    r->n++;
    return SQLITE_OK;
}

pgcl_status pgcl_contests_list(pgcl_qpool *p, bool open, int64_t after_seq, int limit, int window_days, int64_t now_us,
                               pgcl_row_arena *a, pgcl_contest_page *out, char *err, int cap) {
    *out = (pgcl_contest_page){0};
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    page_read r = {
        .open = open, .after_seq = after_seq, .limit = limit, .window_days = window_days, .now_us = now_us, .arena = a};
    int rc =
        pgcl_db_each_row(db, open ? CONTESTS_OPEN_SQL : CONTESTS_RESOLVED_SQL, bind_page, take_contest, &r, err, cap);
    st = pgcl_read_walk_status(rc, err, cap);
    if (st == PGCL_OK) *out = (pgcl_contest_page){.rows = r.rows, .n = r.n, .next = r.next};
    pgcl_qpool_release(p, db);
    return st;
}
