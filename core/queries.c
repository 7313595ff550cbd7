/* Reviewer reads of the audit database; see queries.h for the contract.
 *
 * The file reads top to bottom: the reader pool, the process-wide pools, timestamps, cursors, the
 * SQL builder (bound parameters only), one decision, decision lists, contests, figures, export. */
#include "queries.h"

#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "ids.h"
#include "log.h"

#define ERR_CAP 512

/* ---- the reader pool ---- */

struct pgcl_qpool {
    char *path;
    int size;       /* most connections ever open */
    int n_open;     /* opened so far (free or out) */
    sqlite3 **free; /* (size) the free list */
    int n_free;
    pthread_mutex_t lock;
    pthread_cond_t returned; /* signalled when a connection comes back or an open fails */
    struct pgcl_qpool *next; /* process-wide registry */
    /* Whether created_at order is seq order (see time_order_holds): 0 not checked yet, 1 holds
     * for rows 1..order_seq (whose created_at is order_ts), -1 does not hold. */
    pthread_mutex_t order_lock;
    int order_state;
    int64_t order_seq;
    char order_ts[PGCL_QTIME_LEN + 8];
};

pgcl_qpool *pgcl_qpool_create(const char *db_path, int size, char *err, int cap) {
    if (size <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        size = cpus > 4 ? (int)cpus : 4;
    }
    pgcl_qpool *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(db_path)) || !(p->free = calloc((size_t)size, sizeof *p->free))) {
        if (p) free(p->path);
        free(p);
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    p->size = size;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->order_lock, NULL);
    pgcl_cond_init_monotonic(&p->returned);
    return p;
}

void pgcl_qpool_destroy(pgcl_qpool *p) {
    if (!p) return;
    if (p->n_free != p->n_open)
        pgcl_log_warn("queries: pool for %s destroyed with %d connections still out", p->path, p->n_open - p->n_free);
    for (int i = 0; i < p->n_free; i++)
        sqlite3_close(p->free[i]);
    pthread_cond_destroy(&p->returned);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->order_lock);
    free(p->free);
    free(p->path);
    free(p);
}

pgcl_status pgcl_qpool_acquire(pgcl_qpool *p, sqlite3 **out, char *err, int cap) {
    *out = NULL;
    struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + PGCL_DB_BUSY_TIMEOUT_MS * 1000LL);
    pthread_mutex_lock(&p->lock);
    while (p->n_free == 0 && p->n_open == p->size) {
        if (pthread_cond_timedwait(&p->returned, &p->lock, &deadline) != 0 && p->n_free == 0 && p->n_open == p->size) {
            pthread_mutex_unlock(&p->lock);
            pgcl_errorf(err, cap, "all %d reader connections are busy", p->size);
            return PGCL_ERR_BUSY;
        }
    }
    if (p->n_free > 0) {
        *out = p->free[--p->n_free];
        pthread_mutex_unlock(&p->lock);
        return PGCL_OK;
    }
    p->n_open++; /* reserve the slot, open outside the lock */
    pthread_mutex_unlock(&p->lock);
    sqlite3 *db = pgcl_db_open_reader(p->path, err, cap);
    if (!db) {
        pthread_mutex_lock(&p->lock);
        p->n_open--;
        pthread_cond_signal(&p->returned);
        pthread_mutex_unlock(&p->lock);
        return PGCL_ERR_DB;
    }
    *out = db;
    return PGCL_OK;
}

void pgcl_qpool_release(pgcl_qpool *p, sqlite3 *db) {
    if (!db) return;
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_lock(&p->lock);
    p->free[p->n_free++] = db;
    pthread_cond_signal(&p->returned);
    pthread_mutex_unlock(&p->lock);
}

/* ---- the process-wide pools ---- */

static pthread_mutex_t g_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pgcl_qpool *g_pools;

pgcl_qpool *pgcl_queries_pool(const char *db_path, char *err, int cap) {
    pthread_mutex_lock(&g_pools_lock);
    pgcl_qpool *p = g_pools;
    while (p && strcmp(p->path, db_path) != 0)
        p = p->next;
    if (!p && (p = pgcl_qpool_create(db_path, 0, err, cap))) {
        p->next = g_pools;
        g_pools = p;
    }
    pthread_mutex_unlock(&g_pools_lock);
    return p;
}

void pgcl_queries_shutdown(void) {
    pthread_mutex_lock(&g_pools_lock);
    while (g_pools) {
        pgcl_qpool *p = g_pools;
        g_pools = p->next;
        pgcl_qpool_destroy(p);
    }
    pthread_mutex_unlock(&g_pools_lock);
}

/* ---- timestamps ---- */

/* Days since 1970-01-01 of a proleptic Gregorian date (valid for any year). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                   /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static bool read_digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static int days_in_month(int y, int m) {
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dim[m - 1];
}

#define US_PER_DAY INT64_C(86400000000)

bool pgcl_time_parse(const char *text, int64_t *us) {
    int y, mo, d, h, mi, s;
    const char *p = text;
    if (!text || strlen(text) > 64) return false;
    if (!read_digits(p, 4, &y) || p[4] != '-' || !read_digits(p + 5, 2, &mo) || p[7] != '-' ||
        !read_digits(p + 8, 2, &d) || (p[10] != 'T' && p[10] != 't') || !read_digits(p + 11, 2, &h) || p[13] != ':' ||
        !read_digits(p + 14, 2, &mi) || p[16] != ':' || !read_digits(p + 17, 2, &s))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60) return false;
    p += 19;
    int64_t frac = 0;
    bool round_up = false;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++) {
            if (n < 6)
                frac = frac * 10 + (*p - '0');
            else if (*p != '0')
                round_up = true;
        }
        if (n == 0) return false;
        for (; n < 6; n++)
            frac *= 10;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-' || *p == ' ') {
        int oh, om;
        int sign = *p == '-' ? -1 : 1;
        if (!read_digits(p + 1, 2, &oh) || p[3] != ':' || !read_digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        offset_s = sign * (oh * 3600 + om * 60);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    int64_t t =
        (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_s) * 1000000 + frac + (round_up ? 1 : 0);
    if (t < days_from_civil(0, 1, 1) * US_PER_DAY || t >= days_from_civil(10000, 1, 1) * US_PER_DAY) return false;
    *us = t;
    return true;
}

void pgcl_time_format(int64_t us, char out[PGCL_QTIME_LEN + 1]) {
    int64_t days = us / US_PER_DAY, rem = us % US_PER_DAY;
    if (rem < 0) {
        rem += US_PER_DAY;
        days--;
    }
    int y, m, d;
    civil_from_days(days, &y, &m, &d);
    int64_t sec = rem / 1000000;
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", y, m, d, (int)(sec / 3600), (int)(sec / 60 % 60),
             (int)(sec % 60), (int)(rem % 1000000));
    memcpy(out, buf, PGCL_QTIME_LEN);
    out[PGCL_QTIME_LEN] = 0;
}

int64_t pgcl_time_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- cursors ----
 * 24 bytes: version (1, = 2), kind, seq (8, big-endian), binding (8), then the first 6 bytes of a
 * BLAKE2b of those 18 bytes under a fixed key. The binding ties a cursor to the filters of the
 * listing that made it (pgcl_decision_filter_binding; zeros for the contest queues, whose kind
 * says which queue): a cursor sent with other filters would page through another listing from a
 * position that means nothing there, so it is refused. The check is not a secret (a cursor only
 * bounds a query its holder may run anyway): it rejects garbage, truncation and hand-edited
 * cursors, and it survives restarts. Version 1 cursors (16 bytes, no binding) are refused: they
 * were made before the binding existed, and a listing started again loses nothing. */

#define CURSOR_VERSION 2
#define CURSOR_BYTES 24
#define CURSOR_MAC 6
static const unsigned char CURSOR_KEY[32] = "pgcld audit cursor, version 1 .";

static void cursor_mac(const unsigned char *msg, unsigned char mac[CURSOR_MAC]) {
    unsigned char h[crypto_generichash_BYTES_MIN];
    crypto_generichash(h, sizeof h, msg, CURSOR_BYTES - CURSOR_MAC, CURSOR_KEY, sizeof CURSOR_KEY);
    memcpy(mac, h, CURSOR_MAC);
}

/* Appends one optional text member of the filters' canonical encoding: 0 when absent, else 1,
 * its length (4 bytes, big-endian) and its bytes. */
static void binding_text(crypto_generichash_state *h, const char *v) {
    unsigned char tag = v ? 1 : 0;
    crypto_generichash_update(h, &tag, 1);
    if (!v) return;
    size_t n = strlen(v);
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                            (unsigned char)n};
    crypto_generichash_update(h, len, sizeof len);
    crypto_generichash_update(h, (const unsigned char *)v, n);
}

void pgcl_decision_filter_binding(const pgcl_decision_filter *f, unsigned char out[PGCL_CURSOR_BINDING]) {
    static const char domain[] = "pgcld decision filters 1";
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, PGCL_CURSOR_BINDING);
    crypto_generichash_update(&h, (const unsigned char *)domain, sizeof domain - 1);
    const char *members[] = {f->model, f->version, f->label, f->decision, f->item_id, f->request_id, f->since,
                             f->until};
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) binding_text(&h, members[i]);
    unsigned char contest = (unsigned char)f->contest;
    crypto_generichash_update(&h, &contest, 1);
    crypto_generichash_final(&h, out, PGCL_CURSOR_BINDING);
}

void pgcl_cursor_encode(char kind, int64_t seq, const unsigned char binding[PGCL_CURSOR_BINDING],
                        char out[PGCL_CURSOR_LEN + 1]) {
    unsigned char b[CURSOR_BYTES];
    b[0] = CURSOR_VERSION;
    b[1] = (unsigned char)kind;
    for (int i = 0; i < 8; i++)
        b[2 + i] = (unsigned char)((uint64_t)seq >> (56 - 8 * i));
    memcpy(b + 10, binding, PGCL_CURSOR_BINDING);
    cursor_mac(b, b + CURSOR_BYTES - CURSOR_MAC);
    sodium_bin2base64(out, PGCL_CURSOR_LEN + 1, b, sizeof b, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

pgcl_cursor_check pgcl_cursor_decode(const char *text, char kind, const unsigned char binding[PGCL_CURSOR_BINDING],
                                     int64_t *seq) {
    unsigned char b[CURSOR_BYTES], mac[CURSOR_MAC];
    size_t n = 0;
    const char *end = NULL;
    if (!text || strlen(text) != PGCL_CURSOR_LEN ||
        sodium_base642bin(b, sizeof b, text, PGCL_CURSOR_LEN, NULL, &n, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        n != sizeof b || end != text + PGCL_CURSOR_LEN || b[0] != CURSOR_VERSION || b[1] != (unsigned char)kind)
        return PGCL_CURSOR_INVALID;
    cursor_mac(b, mac);
    if (sodium_memcmp(mac, b + CURSOR_BYTES - CURSOR_MAC, CURSOR_MAC) != 0) return PGCL_CURSOR_INVALID;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[2 + i];
    if (v < 1 || v > (uint64_t)INT64_MAX) return PGCL_CURSOR_INVALID;
    if (sodium_memcmp(b + 10, binding, PGCL_CURSOR_BINDING) != 0) return PGCL_CURSOR_OTHER_FILTERS;
    *seq = (int64_t)v;
    return PGCL_CURSOR_OK;
}

/* ---- the SQL builder ----
 * SQL text is assembled only from literals in this file; every value goes through qb_text() or
 * qb_int(), which append a '?' and record the value to bind. */

#define QB_SQL_CAP 32768
#define QB_MAX_ARGS 512

typedef struct qarg {
    bool is_int;
    int64_t i;
    const char *s; /* borrowed */
} qarg;

typedef struct qbuild {
    char sql[QB_SQL_CAP];
    size_t len;
    qarg args[QB_MAX_ARGS];
    int n;
    bool overflow;
} qbuild;

static void qb_sql(qbuild *q, const char *text) {
    size_t n = strlen(text);
    if (q->len + n + 1 > sizeof q->sql) {
        q->overflow = true;
        return;
    }
    memcpy(q->sql + q->len, text, n + 1);
    q->len += n;
}

static void qb_arg(qbuild *q, qarg a) {
    if (q->n == QB_MAX_ARGS) {
        q->overflow = true;
        return;
    }
    q->args[q->n++] = a;
    qb_sql(q, "?");
}

static void qb_text(qbuild *q, const char *s) {
    qb_arg(q, (qarg){.s = s});
}
static void qb_int(qbuild *q, int64_t v) {
    qb_arg(q, (qarg){.is_int = true, .i = v});
}

/* Prepares prefix + the built SQL and binds its values. */
static pgcl_status qb_prepare(sqlite3 *db, const qbuild *q, const char *prefix, sqlite3_stmt **out, char *err,
                              int cap) {
    *out = NULL;
    if (q->overflow) {
        pgcl_errorf(err, cap, "query too large");
        return PGCL_ERR_INVALID;
    }
    char *text = NULL;
    if (prefix) {
        size_t np = strlen(prefix);
        if (!(text = malloc(np + q->len + 1))) {
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
        memcpy(text, prefix, np);
        memcpy(text + np, q->sql, q->len + 1);
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, text ? text : q->sql, -1, &s, NULL);
    free(text);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
        return PGCL_ERR_DB;
    }
    for (int i = 0; i < q->n; i++) {
        rc = q->args[i].is_int ? sqlite3_bind_int64(s, i + 1, q->args[i].i)
                               : sqlite3_bind_text(s, i + 1, q->args[i].s, -1, SQLITE_STATIC);
        if (rc != SQLITE_OK) {
            pgcl_errorf(err, cap, "binding a query value: %s", sqlite3_errmsg(db));
            sqlite3_finalize(s);
            return PGCL_ERR_DB;
        }
    }
    *out = s;
    return PGCL_OK;
}

static pgcl_status step_error(sqlite3 *db, int rc, char *err, int cap) {
    pgcl_errorf(err, cap, "reading the audit database: %s", sqlite3_errmsg(db));
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? PGCL_ERR_BUSY : PGCL_ERR_DB;
}

/* ---- columns to JSON ---- */

static json_t *col_text(sqlite3_stmt *s, int i) {
    const char *t = (const char *)sqlite3_column_text(s, i);
    return t ? json_string(t) : json_null();
}

static json_t *col_real(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(s, i));
}

static json_t *col_int(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? json_null() : json_integer(sqlite3_column_int64(s, i));
}

/* A stored JSON text column as a JSON value (null if absent or not JSON). */
static json_t *col_json(sqlite3_stmt *s, int i) {
    const char *t = (const char *)sqlite3_column_text(s, i);
    json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_null();
}

/* A float32 little-endian BLOB as an array of numbers. */
static json_t *col_vector(sqlite3_stmt *s, int i) {
    const unsigned char *b = sqlite3_column_blob(s, i);
    int n = sqlite3_column_bytes(s, i) / (int)sizeof(float);
    json_t *arr = json_array();
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vector BLOBs are stored little-endian");
    for (int k = 0; b && k < n; k++) {
        float f;
        memcpy(&f, b + (size_t)k * sizeof f, sizeof f);
        json_array_append_new(arr, json_real(f));
    }
    return arr;
}

/* Whether a decision has been contested, derived from its contests (alias d in the query). */
#define CONTEST_STATUS_SQL                                                                                             \
    "(CASE WHEN NOT EXISTS (SELECT 1 FROM contests c1 WHERE c1.decision_id = d.decision_id) THEN 'none'"               \
    " WHEN EXISTS (SELECT 1 FROM contests c1 WHERE c1.decision_id = d.decision_id AND NOT EXISTS"                      \
    " (SELECT 1 FROM resolutions r1 WHERE r1.contest_id = c1.contest_id)) THEN 'open' ELSE 'resolved' END)"

/* The summary of a decision: columns 0..10 of every list and export query. */
#define SUMMARY_COLS                                                                                                   \
    "d.seq, d.decision_id, d.created_at, d.item_id, d.request_id, d.model_name, d.model_version, d.label,"             \
    " d.decision, d.toxicity, " CONTEST_STATUS_SQL

static json_t *summary_json(sqlite3_stmt *s) {
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "decision_id", col_text(s, 1), "seq",
                     col_int(s, 0), "created_at", col_text(s, 2), "item_id", col_text(s, 3), "request_id",
                     col_text(s, 4), "model_name", col_text(s, 5), "model_version", col_text(s, 6), "label",
                     col_text(s, 7), "decision", col_text(s, 8), "toxicity", col_real(s, 9), "contest_status",
                     col_text(s, 10));
}

/* ---- one decision ---- */

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
 *   contest_id  the latest contest, or null.
 * contests: the decision's contests oldest first, each with "resolution" (object or null). */
static json_t *effective_outcome(const char *label, const char *decision, json_t *contests) {
    const char *status = "original", *decided_by = "automated";
    json_t *contest_id = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(contests, i, c) {
        contest_id = json_object_get(c, "contest_id");
        json_t *res = json_object_get(c, "resolution");
        if (!json_is_object(res)) {
            status = "contested";
            break;
        }
        const char *outcome = json_string_value(json_object_get(res, "outcome"));
        if (!outcome || strcmp(outcome, "overturned") != 0) {
            status = "upheld";
            continue;
        }
        const char *corrected = json_string_value(json_object_get(res, "corrected_label"));
        status = "overturned";
        decided_by = "reviewer";
        decision = strcmp(decision, "allow") == 0 ? "review" : "allow";
        if (corrected) label = corrected;
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:O}", "status", status, "label", label, "decision", decision,
                     "decided_by", decided_by, "contest_id", contest_id ? contest_id : json_null());
}

static const char RECORD_SQL[] =
    "SELECT d.seq, d.decision_id, d.created_at, d.request_id, d.item_id, d.model_name, d.model_version,"
    " d.model_sha256, d.label, d.label_index, d.probabilities, d.toxicity, d.decision, d.policy, d.t_review,"
    " d.t_block, d.vector, d.input_sha256, d.latency_us, d.input_dtype, d.input IS NOT NULL, " CONTEST_STATUS_SQL
    " FROM decisions d WHERE d.decision_id = ?";
static const char CHAIN_SQL[] = "SELECT seq, hash FROM audit_chain WHERE kind = 'decisions' AND row_seq = ?";
static const char CONTESTS_SQL[] =
    "SELECT c.contest_id, c.filed_at, c.filed_by, c.filer_key_id, c.reason, r.seq, r.resolved_at, r.resolved_by,"
    " r.resolver_key_id, r.outcome, r.corrected_label, r.note"
    " FROM contests c LEFT JOIN resolutions r ON r.contest_id = c.contest_id"
    " WHERE c.decision_id = ? ORDER BY c.seq";

/* Resolution columns first..first+6 (seq, resolved_at, resolved_by, resolver_key_id, outcome,
 * corrected_label, note) as an object, or null when the seq is NULL. */
static json_t *resolution_json(sqlite3_stmt *s, int first) {
    if (sqlite3_column_type(s, first) == SQLITE_NULL) return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "resolved_at", col_text(s, first + 1), "resolved_by",
                     col_text(s, first + 2), "resolver_key_id", col_text(s, first + 3), "outcome",
                     col_text(s, first + 4), "corrected_label", col_text(s, first + 5), "note", col_text(s, first + 6));
}

static pgcl_status read_record(sqlite3 *db, const char *decision_id, json_t **out, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    json_t *rec = NULL, *contests = NULL;
    pgcl_status st = PGCL_ERR_DB;
    int rc;
    if (sqlite3_prepare_v2(db, RECORD_SQL, -1, &s, NULL) != SQLITE_OK) goto sql_error;
    sqlite3_bind_text(s, 1, decision_id, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "no decision with id '%.64s'", decision_id);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    int64_t seq = sqlite3_column_int64(s, 0);
    const char *dtype = (const char *)sqlite3_column_text(s, 19);
    bool has_input = sqlite3_column_int(s, 20) != 0;
    rec = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                    "decision_id", col_text(s, 1), "seq", col_int(s, 0), "created_at", col_text(s, 2), "request_id",
                    col_text(s, 3), "item_id", col_text(s, 4), "model_name", col_text(s, 5), "model_version",
                    col_text(s, 6), "model_sha256", col_text(s, 7), "label", col_text(s, 8), "label_index",
                    col_int(s, 9), "probabilities", col_json(s, 10), "toxicity", col_real(s, 11), "decision",
                    col_text(s, 12), "policy", col_json(s, 13), "t_review", col_real(s, 14), "t_block", col_real(s, 15),
                    "vector", col_vector(s, 16), "input_sha256", col_text(s, 17), "latency_us", col_int(s, 18));
    if (!rec) goto nomem;
    json_object_set_new(rec, "input_stored", has_input && dtype ? json_string(dtype) : json_null());
    json_object_set_new(rec, "contest_status", col_text(s, 21));
    json_object_set_new(
        rec, "provenance",
        json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "model_name", json_object_get(rec, "model_name"),
                  "model_version", json_object_get(rec, "model_version"), "model_sha256",
                  json_object_get(rec, "model_sha256"), "request_id", json_object_get(rec, "request_id"), "item_id",
                  json_object_get(rec, "item_id"), "input_sha256", json_object_get(rec, "input_sha256"), "created_at",
                  json_object_get(rec, "created_at"), "latency_us", json_object_get(rec, "latency_us")));
    sqlite3_finalize(s);
    s = NULL;

    if (sqlite3_prepare_v2(db, CHAIN_SQL, -1, &s, NULL) != SQLITE_OK) goto sql_error;
    sqlite3_bind_int64(s, 1, seq);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        json_object_set_new(rec, "chain", json_pack("{s:o, s:o}", "seq", col_int(s, 0), "hash", col_text(s, 1)));
    else if (rc == SQLITE_DONE)
        json_object_set_new(rec, "chain", json_null());
    else {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    sqlite3_finalize(s);
    s = NULL;

    if (sqlite3_prepare_v2(db, CONTESTS_SQL, -1, &s, NULL) != SQLITE_OK) goto sql_error;
    sqlite3_bind_text(s, 1, decision_id, -1, SQLITE_STATIC);
    contests = json_array();
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *c = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "contest_id", col_text(s, 0), "filed_at",
                              col_text(s, 1), "filed_by", col_text(s, 2), "filer_key_id", col_text(s, 3), "reason",
                              col_text(s, 4), "resolution", resolution_json(s, 5));
        if (!c || json_array_append_new(contests, c) != 0) goto nomem;
    }
    if (rc != SQLITE_DONE) {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    json_object_set_new(rec, "contests", json_incref(contests));
    json_object_set_new(rec, "effective_outcome",
                        effective_outcome(json_string_value(json_object_get(rec, "label")),
                                          json_string_value(json_object_get(rec, "decision")), contests));
    *out = rec;
    rec = NULL;
    st = PGCL_OK;
    goto done;
nomem:
    pgcl_errorf(err, cap, "out of memory");
    st = PGCL_ERR_NOMEM;
    goto done;
sql_error:
    pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
    st = PGCL_ERR_DB;
done:
    sqlite3_finalize(s);
    json_decref(contests);
    json_decref(rec);
    return st;
}

pgcl_status pgcl_queries_decision(pgcl_qpool *p, const char *decision_id, json_t **out, char *err, int cap) {
    *out = NULL;
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) return st;
    /* One read transaction: the row, its chain entry and its contests from the same snapshot. */
    char sub[ERR_CAP];
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "starting a read: %s", sub);
        st = PGCL_ERR_DB;
    } else {
        st = read_record(db, decision_id, out, err, cap);
    }
    pgcl_qpool_release(p, db);
    return st;
}

/* Starts a read transaction: the queries that follow see one snapshot. */
static pgcl_status begin_read(sqlite3 *db, char *err, int cap) {
    char sub[ERR_CAP];
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) == SQLITE_OK) return PGCL_OK;
    pgcl_errorf(err, cap, "starting a read: %s", sub);
    return PGCL_ERR_DB;
}

/* ---- decision lists ----
 *
 * The query has two parts: an inner one that finds the seqs of the page (at most limit + 1, the
 * extra row saying whether there is a next page), and an outer one that reads those rows:
 *   SELECT <summary> FROM decisions d WHERE d.seq IN (<inner>) ORDER BY d.seq DESC
 * The inner query is planned so that an index serves each filter:
 *   - contest open / resolved / contested: driven by the contests table (a few thousand rows)
 *     joined to decisions by decision_id, then sorted: its cost is the number of contests;
 *   - model without version: one branch per version (found with an index skip-scan), each on
 *     (model_name, model_version, seq), merged: UNION ALL of per-version pages;
 *   - label / decision / model+version / item_id / request_id: the (x, seq) indexes of migration
 *     0003 give the rows in seq order directly (SQLite picks one when several are given);
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
    return f->model || f->label || f->decision || f->item_id || f->request_id;
}

static bool contest_driven(const pgcl_decision_filter *f) {
    return f->contest == PGCL_CONTEST_OPEN || f->contest == PGCL_CONTEST_RESOLVED ||
           f->contest == PGCL_CONTEST_CONTESTED;
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
              {" AND d.label = ", f->label},       {" AND d.decision = ", f->decision},
              {" AND d.item_id = ", f->item_id},   {" AND d.request_id = ", f->request_id},
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
            pgcl_status st = step_error(db, rc, err, cap);
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

static pgcl_status scalar_int(sqlite3 *db, const qbuild *q, int64_t *out, bool *null, char *err, int cap) {
    sqlite3_stmt *s = NULL;
    pgcl_status st = qb_prepare(db, q, NULL, &s, err, cap);
    if (st != PGCL_OK) return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        if (null) *null = sqlite3_column_type(s, 0) == SQLITE_NULL;
        *out = sqlite3_column_int64(s, 0);
    } else if (rc == SQLITE_DONE) {
        if (null) *null = true;
        *out = 0;
    } else {
        st = step_error(db, rc, err, cap);
    }
    sqlite3_finalize(s);
    return st;
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
    pgcl_status st = PGCL_OK;
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_DONE;
    pthread_mutex_lock(&p->order_lock);
    if (p->order_state == 0) {
        if (sqlite3_prepare_v2(db, "SELECT seq FROM decisions INDEXED BY decisions_created_at ORDER BY created_at, seq",
                               -1, &s, NULL) != SQLITE_OK) {
            pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
            st = PGCL_ERR_DB;
            goto done;
        }
        int64_t last = 0;
        bool ordered = true;
        while (ordered && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            int64_t seq = sqlite3_column_int64(s, 0);
            ordered = seq > last;
            last = seq;
        }
        if (ordered && rc != SQLITE_DONE) {
            st = step_error(db, rc, err, cap);
            goto done;
        }
        sqlite3_finalize(s);
        s = NULL;
        p->order_ts[0] = 0;
        if (ordered && last > 0) { /* the created_at of the last row, for the incremental checks */
            if (sqlite3_prepare_v2(db, "SELECT created_at FROM decisions WHERE seq = ?", -1, &s, NULL) != SQLITE_OK) {
                pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
                st = PGCL_ERR_DB;
                goto done;
            }
            sqlite3_bind_int64(s, 1, last);
            if ((rc = sqlite3_step(s)) != SQLITE_ROW) {
                st = step_error(db, rc, err, cap);
                goto done;
            }
            const char *ts = (const char *)sqlite3_column_text(s, 0);
            snprintf(p->order_ts, sizeof p->order_ts, "%s", ts ? ts : "");
        }
        p->order_state = ordered ? 1 : -1;
        p->order_seq = last;
        if (!ordered)
            pgcl_log_info("queries: %s: created_at does not follow seq; time filters use the general plans", p->path);
    } else if (p->order_state == 1) {
        if (sqlite3_prepare_v2(db, "SELECT seq, created_at FROM decisions WHERE seq > ? ORDER BY seq", -1, &s, NULL) !=
            SQLITE_OK) {
            pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
            st = PGCL_ERR_DB;
            goto done;
        }
        sqlite3_bind_int64(s, 1, p->order_seq);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *ts = (const char *)sqlite3_column_text(s, 1);
            if (!ts || strcmp(ts, p->order_ts) < 0) {
                p->order_state = -1;
                pgcl_log_info("queries: %s: decision %lld has an earlier created_at than the one before it; time "
                              "filters use the general plans from now on",
                              p->path, (long long)sqlite3_column_int64(s, 0));
                break;
            }
            p->order_seq = sqlite3_column_int64(s, 0);
            snprintf(p->order_ts, sizeof p->order_ts, "%s", ts);
        }
        if (p->order_state == 1 && rc != SQLITE_DONE) {
            st = step_error(db, rc, err, cap);
            goto done;
        }
    }
done:
    sqlite3_finalize(s);
    *holds = st == PGCL_OK && p->order_state == 1;
    pthread_mutex_unlock(&p->order_lock);
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
        st = scalar_int(db, q, lo, &none, err, cap);
    }
    if (st == PGCL_OK && !none && f->until) {
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT d.seq FROM decisions d INDEXED BY decisions_created_at WHERE d.created_at < ");
        qb_text(q, f->until);
        qb_sql(q, " ORDER BY d.created_at DESC, d.seq DESC LIMIT 1");
        st = scalar_int(db, q, hi, &none, err, cap);
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
    st = scalar_int(db, q, &n, NULL, err, cap);
    if (st == PGCL_OK && n < PROBE_ROWS) {
        /* Few enough: the exact seq bounds of those rows, from the same (covering) index entries. */
        memset(q, 0, sizeof *q);
        qb_sql(q, "SELECT min(d.seq) FROM decisions d INDEXED BY decisions_created_at WHERE 1");
        qb_filters(q, &window, NULL, before_seq);
        bool none = false;
        if ((st = scalar_int(db, q, &plan->lo, &none, err, cap)) == PGCL_OK) {
            memset(q, 0, sizeof *q);
            qb_sql(q, "SELECT max(d.seq) FROM decisions d INDEXED BY decisions_created_at WHERE 1");
            qb_filters(q, &window, NULL, before_seq);
            st = scalar_int(db, q, &plan->hi, NULL, err, cap);
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
        st = scalar_int(db, q, &inside, NULL, err, cap);
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
    qb_sql(q, "SELECT " SUMMARY_COLS " FROM decisions d WHERE d.seq IN (");
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

pgcl_status pgcl_queries_decisions(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                   json_t **out, int64_t *next_before, char *err, int cap) {
    *out = NULL;
    *next_before = 0;
    qbuild *q = calloc(1, sizeof *q);
    json_t *rows = json_array();
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    version_list vl = {0};
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!q || !rows) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    const char *note;
    if ((st = begin_read(db, err, cap)) != PGCL_OK ||
        (st = build_list_query(p, db, q, &vl, f, before_seq, limit + 1, &note, err, cap)) != PGCL_OK)
        goto done;
    if ((st = qb_prepare(db, q, NULL, &s, err, cap)) != PGCL_OK) goto done;
    int rc, n = 0;
    int64_t last = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == limit) { /* the extra row: there is a next page, starting below the last one sent */
            *next_before = last;
            break;
        }
        json_t *row = summary_json(s);
        if (!row || json_array_append_new(rows, row) != 0) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
            goto done;
        }
        last = sqlite3_column_int64(s, 0);
        n++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    *out = rows;
    rows = NULL;
    st = PGCL_OK;
done:
    sqlite3_finalize(s);
    version_list_free(&vl);
    pgcl_qpool_release(p, db);
    free(q);
    json_decref(rows);
    return st;
}

pgcl_status pgcl_queries_decisions_explain(pgcl_qpool *p, const pgcl_decision_filter *f, int64_t before_seq, int limit,
                                           json_t **out, char *err, int cap) {
    *out = NULL;
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    json_t *plan = json_array();
    version_list vl = {0};
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!q || !plan) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    const char *note;
    if ((st = begin_read(db, err, cap)) != PGCL_OK ||
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
        json_array_append_new(plan, json_string(line));
    }
    if (rc != SQLITE_DONE) {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    *out = json_pack("{s:s, s:s, s:O}", "sql", q->sql, "strategy", note, "plan", plan);
    st = *out ? PGCL_OK : PGCL_ERR_NOMEM;
done:
    sqlite3_finalize(s);
    version_list_free(&vl);
    pgcl_qpool_release(p, db);
    free(q);
    json_decref(plan);
    return st;
}

/* ---- contests ---- */

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

pgcl_status pgcl_queries_contests(pgcl_qpool *p, bool open, int64_t after_seq, int limit, int window_days,
                                  int64_t now_us, json_t **out, int64_t *next, char *err, int cap) {
    *out = NULL;
    *next = 0;
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    json_t *rows = json_array();
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st != PGCL_OK) goto done;
    if (sqlite3_prepare_v2(db, open ? CONTESTS_OPEN_SQL : CONTESTS_RESOLVED_SQL, -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "preparing a query: %s", sqlite3_errmsg(db));
        st = PGCL_ERR_DB;
        goto done;
    }
    sqlite3_bind_int64(s, 1, open ? after_seq : after_seq > 0 ? after_seq : INT64_MAX);
    sqlite3_bind_int(s, 2, limit + 1);
    int rc, n = 0;
    int64_t last = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == limit) {
            *next = last;
            break;
        }
        const char *filed = (const char *)sqlite3_column_text(s, 3);
        int64_t filed_us = 0;
        json_t *age = json_null(), *deadline = json_null(), *overdue = json_null();
        if (filed && pgcl_time_parse(filed, &filed_us)) {
            int64_t due = filed_us + (int64_t)window_days * US_PER_DAY;
            char text[PGCL_QTIME_LEN + 1];
            pgcl_time_format(due, text);
            int64_t age_us = now_us - filed_us;
            age = json_integer(age_us >= 0 ? age_us / 1000000 : -((-age_us + 999999) / 1000000));
            deadline = json_string(text);
            overdue = json_boolean(open && now_us > due);
        }
        json_t *row = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "contest_id",
                                col_text(s, 1), "decision_id", col_text(s, 2), "filed_at", col_text(s, 3), "filed_by",
                                col_text(s, 4), "reason", col_text(s, 5), "age_seconds", age, "deadline", deadline,
                                "overdue", overdue, "resolution", resolution_json(s, 11), "label", col_text(s, 6),
                                "decision", col_text(s, 7), "model_name", col_text(s, 8), "model_version",
                                col_text(s, 9), "item_id", col_text(s, 10));
        if (!row || json_array_append_new(rows, row) != 0) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
            goto done;
        }
        last = sqlite3_column_int64(s, 0);
        n++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = step_error(db, rc, err, cap);
        goto done;
    }
    *out = rows;
    rows = NULL;
done:
    sqlite3_finalize(s);
    pgcl_qpool_release(p, db);
    json_decref(rows);
    return st;
}

/* ---- figures ---- */

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

/* Decision counts. Without a window, three scans of narrow covering indexes (model+version,
 * label, decision) instead of one scan of the table, whose rows are wide; with a window, one
 * grouped pass over the window's rows (found through the created_at index). Every query has the
 * columns (model_name, model_version, label, decision, count), NULL where not grouped. */
static pgcl_status stats_decisions(sqlite3 *db, qbuild *q, const char *since, const char *until, json_t *out, char *err,
                                   int cap) {
    static const char *const whole[] = {
        "SELECT model_name, model_version, NULL, NULL, count(*) FROM decisions GROUP BY model_name, model_version",
        "SELECT NULL, NULL, label, NULL, count(*) FROM decisions GROUP BY label",
        "SELECT NULL, NULL, NULL, decision, count(*) FROM decisions GROUP BY decision",
    };
    json_t *by_mv = json_array(), *by_label = json_object();
    json_t *by_decision = json_pack("{s:i, s:i, s:i}", "allow", 0, "review", 0, "block", 0);
    json_int_t total = 0;
    json_t *cur = NULL; /* the by_model_version entry being counted (rows come grouped by model, version) */
    pgcl_status st = PGCL_OK;
    bool window = since || until;
    for (int k = 0; st == PGCL_OK && k < (window ? 1 : 3); k++) {
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
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            const char *model = (const char *)sqlite3_column_text(s, 0);
            const char *version = (const char *)sqlite3_column_text(s, 1);
            const char *label = (const char *)sqlite3_column_text(s, 2);
            const char *decision = (const char *)sqlite3_column_text(s, 3);
            json_int_t n = sqlite3_column_int64(s, 4);
            if (model && version) {
                total += n;
                if (!cur || strcmp(json_string_value(json_object_get(cur, "model_name")), model) != 0 ||
                    strcmp(json_string_value(json_object_get(cur, "model_version")), version) != 0) {
                    cur = json_pack("{s:s, s:s, s:I}", "model_name", model, "model_version", version, "count",
                                    (json_int_t)0);
                    json_array_append_new(by_mv, cur);
                }
                json_object_set_new(cur, "count", json_integer(json_integer_value(json_object_get(cur, "count")) + n));
            }
            if (label)
                json_object_set_new(by_label, label,
                                    json_integer(json_integer_value(json_object_get(by_label, label)) + n));
            if (decision)
                json_object_set_new(by_decision, decision,
                                    json_integer(json_integer_value(json_object_get(by_decision, decision)) + n));
        }
        if (rc != SQLITE_DONE) st = step_error(db, rc, err, cap);
        sqlite3_finalize(s);
    }
    json_object_set_new(out, "decisions",
                        json_pack("{s:I, s:o, s:o, s:o}", "total", total, "by_model_version", by_mv, "by_label",
                                  by_label, "by_decision", by_decision));
    return st;
}

/* SQL: a resolved contest's time from filing to resolution, in seconds (c: contests, r: resolutions). */
#define RESOLUTION_SECONDS_SQL "((julianday(r.resolved_at) - julianday(c.filed_at)) * 86400.0)"

/* A duration in seconds as a JSON number rounded to milliseconds (they suffice for these figures). */
static json_t *seconds_json(double seconds) { return json_real((double)llround(seconds * 1000.0) / 1000.0); }

static pgcl_status stats_contests(sqlite3 *db, qbuild *q, const char *since, const char *until, json_t *out, char *err,
                                  int cap) {
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
    json_t *rates = json_array(), *by_version = json_array();
    json_int_t filed = 0, resolved = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_int_t n_filed = sqlite3_column_int64(s, 2), n_res = sqlite3_column_int64(s, 3),
                   n_over = sqlite3_column_int64(s, 4);
        filed += n_filed;
        resolved += n_res;
        json_array_append_new(rates,
                              json_pack("{s:o, s:o, s:I, s:I, s:o}", "model_name", col_text(s, 0), "model_version",
                                        col_text(s, 1), "resolved", n_res, "overturned", n_over, "rate",
                                        n_res ? json_real((double)n_over / (double)n_res) : json_null()));
        json_t *med =
            sqlite3_column_type(s, 5) == SQLITE_NULL ? json_null() : seconds_json(sqlite3_column_double(s, 5));
        json_array_append_new(by_version,
                              json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:o}", "model_name", col_text(s, 0),
                                        "model_version", col_text(s, 1), "filed", n_filed, "resolved", n_res, "open",
                                        n_filed - n_res, "overturned", n_over, "median_resolution_seconds", med));
    }
    if (rc != SQLITE_DONE) st = step_error(db, rc, err, cap);
    sqlite3_finalize(s);
    s = NULL;

    /* Median time from filing to resolution, over the resolved contests filed in range. */
    json_t *median = json_null();
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
                st = step_error(db, rc, err, cap);
            else if (n > 0) {
                json_decref(median);
                median = seconds_json(sum / n);
            }
            sqlite3_finalize(s);
        }
    }
    json_object_set_new(out, "contests",
                        json_pack("{s:I, s:I, s:I, s:o, s:o, s:o}", "filed", filed, "resolved", resolved, "open",
                                  filed - resolved, "median_resolution_seconds", median,
                                  "overturn_rate_by_model_version", rates, "by_model_version", by_version));
    return st;
}

pgcl_status pgcl_queries_stats(pgcl_qpool *p, const char *since, const char *until, json_t **out, char *err, int cap) {
    *out = NULL;
    qbuild *q = calloc(1, sizeof *q);
    json_t *res = json_pack("{s:o, s:o}", "since", since ? json_string(since) : json_null(), "until",
                            until ? json_string(until) : json_null());
    sqlite3 *db = NULL;
    pgcl_status st = PGCL_ERR_NOMEM;
    char sub[ERR_CAP];
    if (!q || !res) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    if ((st = pgcl_qpool_acquire(p, &db, err, cap)) != PGCL_OK) goto done;
    /* One snapshot for every figure. */
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "starting a read: %s", sub);
        st = PGCL_ERR_DB;
        goto done;
    }
    if ((st = stats_decisions(db, q, since, until, res, err, cap)) != PGCL_OK) goto done;
    if ((st = stats_contests(db, q, since, until, res, err, cap)) != PGCL_OK) goto done;
    *out = res;
    res = NULL;
done:
    pgcl_qpool_release(p, db);
    free(q);
    json_decref(res);
    return st;
}

/* ---- export ---- */

#define EXPORT_CHUNK_ROWS 256

struct pgcl_export {
    pgcl_qpool *pool;
    pgcl_export_format fmt;
    char since[PGCL_QTIME_LEN + 1], until[PGCL_QTIME_LEN + 1];
    bool has_since, has_until;
    int64_t max_seq;                  /* rows committed after create() are not exported */
    char last_ts[PGCL_QTIME_LEN + 8]; /* (created_at, seq) of the last row sent */
    int64_t last_seq;
    bool header_sent, done;
    char *buf; /* the current chunk, formatted */
    size_t len, off, cap;
};

static const char CSV_HEADER[] = "decision_id,seq,created_at,item_id,request_id,model_name,model_version,label,"
                                 "decision,toxicity,contest_status,probabilities,vector\r\n";

static bool buf_put(pgcl_export *e, const char *data, size_t n) {
    if (e->len + n > e->cap) {
        size_t cap = e->cap ? e->cap : 65536;
        while (cap < e->len + n)
            cap *= 2;
        char *grown = realloc(e->buf, cap);
        if (!grown) return false;
        e->buf = grown;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, data, n);
    e->len += n;
    return true;
}

/* True when a spreadsheet opening the export would read a cell starting with text as a formula
 * (CSV injection, OWASP): its first character, after any spaces, is =, +, -, @, a tab, CR or LF,
 * or the full-width forms of =, +, - and @ (U+FF1D, U+FF0B, U+FF0D, U+FF20), which some
 * spreadsheets fold into the ASCII ones. */
bool pgcl_csv_formula_trigger(const char *text) {
    const unsigned char *p = (const unsigned char *)text;
    while (*p == ' ') p++;
    if (*p && strchr("=+-@\t\r\n", *p)) return true;
    /* U+FF0B, U+FF0D, U+FF1D, U+FF20 in UTF-8: EF BC 8B / 8D / 9D / A0 */
    return p[0] == 0xef && p[1] == 0xbc && (p[2] == 0x8b || p[2] == 0x8d || p[2] == 0x9d || p[2] == 0xa0);
}

/* One CSV text field, quoted (RFC 4180) when it holds a comma, a quote, CR or LF, so that no cell
 * can start inside it; one that a spreadsheet would take for a formula is neutralised as OWASP
 * recommends: a single quote is put before it (the cell then reads as text, showing the quote),
 * and it is quoted. */
static bool csv_field(pgcl_export *e, const char *text, bool last) {
    bool ok = true;
    bool formula = text && pgcl_csv_formula_trigger(text);
    if (text && (formula || text[strcspn(text, ",\"\r\n")])) {
        ok = buf_put(e, formula ? "\"'" : "\"", formula ? 2 : 1);
        for (const char *p = text; ok && *p; p++)
            ok = *p == '"' ? buf_put(e, "\"\"", 2) : buf_put(e, p, 1);
        ok = ok && buf_put(e, "\"", 1);
    } else if (text) {
        ok = buf_put(e, text, strlen(text));
    }
    return ok && buf_put(e, last ? "\r\n" : ",", last ? 2 : 1);
}

/* The vector BLOB as a JSON array, "%.9g" per value (float32 round-trips; the same digits as the
 * JSON answers, which jansson writes with JSON_REAL_PRECISION(9)). Formatting floats is most of an
 * export's CPU time, hence no JSON tree here. */
static bool put_vector(pgcl_export *e, sqlite3_stmt *s, int col) {
    const unsigned char *b = sqlite3_column_blob(s, col);
    int n = sqlite3_column_bytes(s, col) / (int)sizeof(float);
    bool ok = buf_put(e, "[", 1);
    for (int k = 0; ok && b && k < n; k++) {
        float f;
        memcpy(&f, b + (size_t)k * sizeof f, sizeof f);
        char num[40];
        int len = snprintf(num + 1, sizeof num - 1, "%.9g", (double)f);
        num[0] = ',';
        ok = buf_put(e, k ? num : num + 1, (size_t)len + (k ? 1 : 0));
    }
    return ok && buf_put(e, "]", 1);
}

static bool export_row(pgcl_export *e, sqlite3_stmt *s) {
    json_t *row = summary_json(s);
    json_t *probs = col_json(s, 11);
    char *text = NULL, *ptext = NULL;
    bool ok = false;
    if (!row || !probs) goto done;
    ptext = json_dumps(probs, JSON_COMPACT | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY);
    if (!ptext) goto done;
    if (e->fmt == PGCL_EXPORT_NDJSON) {
        /* {summary…,"probabilities":{…},"vector":[…]} */
        text = json_dumps(row, JSON_COMPACT | JSON_REAL_PRECISION(9));
        size_t n = text ? strlen(text) : 0;
        ok = n > 2 && buf_put(e, text, n - 1) && buf_put(e, ",\"probabilities\":", 17) &&
             buf_put(e, ptext, strlen(ptext)) && buf_put(e, ",\"vector\":", 10) && put_vector(e, s, 12) &&
             buf_put(e, "}\n", 2);
        goto done;
    }
    static const char *const keys[] = {"decision_id", "seq",        "created_at",    "item_id",
                                       "request_id",  "model_name", "model_version", "label",
                                       "decision",    "toxicity",   "contest_status"};
    ok = true;
    for (size_t i = 0; ok && i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(row, keys[i]);
        char num[64];
        const char *field = NULL;
        if (json_is_string(v))
            field = json_string_value(v);
        else if (json_is_integer(v)) {
            snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            field = num;
        } else if (json_is_real(v)) {
            snprintf(num, sizeof num, "%.9g", json_real_value(v));
            field = num;
        }
        ok = field != num ? csv_field(e, field ? field : "", false)
                          : buf_put(e, num, strlen(num)) && buf_put(e, ",", 1); /* a number: never a formula */
    }
    /* The vector's text has commas: quoted, and it holds no quote to double. */
    ok = ok && csv_field(e, ptext, false) && buf_put(e, "\"", 1) && put_vector(e, s, 12) && buf_put(e, "\"\r\n", 3);
done:
    free(text);
    free(ptext);
    json_decref(row);
    json_decref(probs);
    return ok;
}

/* Reads and formats the next chunk of rows into e->buf. Returns 0, or -1 (logged). */
static int export_fill(pgcl_export *e) {
    char err[ERR_CAP];
    e->len = e->off = 0;
    if (!e->header_sent) {
        e->header_sent = true;
        if (e->fmt == PGCL_EXPORT_CSV && !buf_put(e, CSV_HEADER, sizeof CSV_HEADER - 1)) return -1;
    }
    qbuild *q = calloc(1, sizeof *q);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int result = -1;
    if (!q) goto done;
    /* Keyset on (created_at, seq), the order of the created_at index: the lower bound is the later
     * of `since` and the last row sent, and rows at that same instant up to the last seq are skipped. */
    const char *lower = e->has_since && strcmp(e->since, e->last_ts) > 0 ? e->since : e->last_ts;
    qb_sql(q, "SELECT " SUMMARY_COLS ", d.probabilities, d.vector FROM decisions d WHERE d.created_at >= ");
    qb_text(q, lower);
    if (e->has_until) {
        qb_sql(q, " AND d.created_at < ");
        qb_text(q, e->until);
    }
    qb_sql(q, " AND d.seq <= ");
    qb_int(q, e->max_seq);
    qb_sql(q, " AND NOT (d.created_at = ");
    qb_text(q, e->last_ts);
    qb_sql(q, " AND d.seq <= ");
    qb_int(q, e->last_seq);
    qb_sql(q, ") ORDER BY d.created_at, d.seq LIMIT ");
    qb_int(q, EXPORT_CHUNK_ROWS);
    if (pgcl_qpool_acquire(e->pool, &db, err, sizeof err) != PGCL_OK ||
        qb_prepare(db, q, NULL, &s, err, sizeof err) != PGCL_OK)
        goto done;
    int rc, n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (!export_row(e, s)) {
            pgcl_errorf(err, sizeof err, "out of memory");
            goto done;
        }
        const char *ts = (const char *)sqlite3_column_text(s, 2);
        snprintf(e->last_ts, sizeof e->last_ts, "%s", ts ? ts : "");
        e->last_seq = sqlite3_column_int64(s, 0);
        n++;
    }
    if (rc != SQLITE_DONE) {
        step_error(db, rc, err, sizeof err);
        goto done;
    }
    if (n < EXPORT_CHUNK_ROWS) e->done = true;
    result = 0;
done:
    sqlite3_finalize(s);
    if (db) pgcl_qpool_release(e->pool, db);
    free(q);
    if (result != 0) pgcl_log_error("export: %s", err);
    return result;
}

pgcl_status pgcl_export_create(pgcl_qpool *p, const char *since, const char *until, pgcl_export_format fmt,
                               pgcl_export **out, char *err, int cap) {
    *out = NULL;
    pgcl_export *e = calloc(1, sizeof *e);
    if (!e) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    e->pool = p;
    e->fmt = fmt;
    if ((e->has_since = since != NULL)) snprintf(e->since, sizeof e->since, "%s", since);
    if ((e->has_until = until != NULL)) snprintf(e->until, sizeof e->until, "%s", until);
    sqlite3 *db = NULL;
    pgcl_status st = pgcl_qpool_acquire(p, &db, err, cap);
    if (st == PGCL_OK) {
        qbuild *q = calloc(1, sizeof *q);
        if (!q) {
            pgcl_errorf(err, cap, "out of memory");
            st = PGCL_ERR_NOMEM;
        } else {
            qb_sql(q, "SELECT coalesce(max(seq), 0) FROM decisions");
            st = scalar_int(db, q, &e->max_seq, NULL, err, cap);
            free(q);
        }
        pgcl_qpool_release(p, db);
    }
    if (st != PGCL_OK) {
        free(e);
        return st;
    }
    *out = e;
    return PGCL_OK;
}

long pgcl_export_read(pgcl_export *e, char *buf, size_t max) {
    while (e->off == e->len) {
        if (e->done) return 0;
        if (export_fill(e) != 0) return -1;
    }
    size_t n = e->len - e->off;
    if (n > max) n = max;
    memcpy(buf, e->buf + e->off, n);
    e->off += n;
    return (long)n;
}

void pgcl_export_destroy(pgcl_export *e) {
    if (!e) return;
    free(e->buf);
    free(e);
}
