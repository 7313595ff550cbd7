/* libpq helpers of the PostgreSQL store. See pg_db.h. */
#include "pg_db.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"

bool pgcl_pg_is_uri(const char *db) {
    return db && (strncmp(db, "postgresql://", 13) == 0 || strncmp(db, "postgres://", 11) == 0);
}

void pgcl_pg_redact(const char *db, char *out, int cap) {
    if (cap <= 0) return;
    out[0] = 0;
    if (!db) return;
    int w = 0;
    const char *scheme_end = strstr(db, "://");
    const char *p = db;
    if (scheme_end) {
        /* userinfo: between "://" and the first '@' before any '/', '?' or '#' */
        const char *host = scheme_end + 3;
        size_t authority = strcspn(host, "/?#");
        const char *at = memchr(host, '@', authority);
        const char *colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
        if (colon) {
            w += snprintf(out + w, (size_t)(cap - w), "%.*s:***", (int)(colon - db), db);
            if (w >= cap) return;
            p = at;
        }
    }
    /* the rest, with the value of any password= query parameter hidden */
    while (*p && w < cap - 1) {
        if ((p[0] == '?' || p[0] == '&') && strncmp(p + 1, "password=", 9) == 0) {
            w += snprintf(out + w, (size_t)(cap - w), "%c%s", p[0], "password=***");
            p += 10;
            p += strcspn(p, "&#");
            continue;
        }
        out[w++] = *p++;
    }
    out[w < cap ? w : cap - 1] = 0;
}

/* The first line of libpq's message (its messages end in a newline and may carry a DETAIL). */
static void first_line(const char *msg, char *out, int cap) {
    size_t n = msg ? strcspn(msg, "\n") : 0;
    snprintf(out, (size_t)cap, "%.*s", (int)n, msg ? msg : "");
}

/* The server's notices: a WARNING goes to the log; NOTICE and below ("relation ... already exists,
 * skipping" from an idempotent migration step) are dropped rather than written to stderr, as libpq
 * would by default. */
static void log_notice(void *arg, const PGresult *res) {
    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (!severity || strcmp(severity, "WARNING") != 0) return;
    char msg[512];
    first_line(PQresultErrorMessage(res), msg, sizeof msg);
    pgcl_log_warn("audit: PostgreSQL: %s", msg);
}

PGconn *pgcl_pg_connect(const char *uri, char *err, int cap) {
    return pgcl_pg_connect_within(uri, PGCL_PG_CONNECT_TIMEOUT_S, err, cap);
}

PGconn *pgcl_pg_connect_within(const char *uri, int timeout_s, char *err, int cap) {
    PGCL_ASSERT(timeout_s >= 2 && timeout_s <= 3600); /* libpq takes less than 2 s as 2 */
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", timeout_s);
    /* Keepalives and tcp_user_timeout: a connection whose peer vanished without a word (a network
     * silently dropped, a host powered off) fails within about half a minute rather than after the
     * kernel's quarter of an hour of retransmissions; the URI may set its own values, which win. */
    const char *keys[] = {"fallback_application_name", "connect_timeout", "keepalives", "keepalives_idle",
                          "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname", NULL};
    const char *values[] = {"pgcld", timeout, "1", "10", "5", "3", "30000", uri, NULL};
    PGconn *conn = PQconnectdbParams(keys, values, 1); /* expand_dbname: dbname holds the URI */
    if (conn && PQstatus(conn) == CONNECTION_OK) {
        PQsetNoticeReceiver(conn, log_notice, NULL);
        return conn;
    }
    char redacted[512], msg[512];
    pgcl_pg_redact(uri, redacted, sizeof redacted);
    first_line(conn ? PQerrorMessage(conn) : "out of memory", msg, sizeof msg);
    pgcl_errorf(err, cap, "%s: cannot connect: %s", redacted, msg);
    PQfinish(conn);
    return NULL;
}

bool pgcl_pg_broken(const PGconn *conn) { return !conn || PQstatus(conn) != CONNECTION_OK; }

bool pgcl_pg_gone_while_idle(PGconn *conn) {
    if (pgcl_pg_broken(conn)) return true;
    if (PQtransactionStatus(conn) != PQTRANS_IDLE) return false; /* a statement is in flight: not ours to read */
    /* reads what the server sent since, never waiting: an idle connection has nothing to read
     * unless the server said goodbye (a FATAL message, then the end of the stream, which marks the
     * connection bad); a few rounds cover the message and the end arriving apart */
    for (int round = 0; round < 4; round++) {
        struct pollfd pending = {.fd = PQsocket(conn), .events = POLLIN};
        if (pending.fd < 0) return true;
        if (poll(&pending, 1, 0) <= 0) return false; /* nothing: alive as far as can be told */
        if (!PQconsumeInput(conn) || pgcl_pg_broken(conn)) return true;
    }
    return false; /* still talking (notices): let the statement find out */
}

PGresult *pgcl_pg_query(PGconn *conn, const char *what, const char *sql, int n, const char *const *values,
                        pgcl_status *st, char *err, int cap) {
    /* without parameters: the simple protocol, which also runs several statements (a migration) */
    PGresult *res = n == 0 ? PQexec(conn, sql) : PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);
    ExecStatusType rs = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK) {
        *st = PGCL_OK;
        return res;
    }
    char msg[512];
    first_line(res ? PQresultErrorMessage(res) : PQerrorMessage(conn), msg, sizeof msg);
    if (!msg[0]) first_line(PQerrorMessage(conn), msg, sizeof msg);
    pgcl_errorf(err, cap, "%s: %s", what, msg);
    *st = PGCL_ERR_DB;
    PQclear(res);
    return NULL;
}

pgcl_status pgcl_pg_exec(PGconn *conn, const char *what, const char *sql, int n, const char *const *values, char *err,
                         int cap) {
    pgcl_status st;
    PQclear(pgcl_pg_query(conn, what, sql, n, values, &st, err, cap));
    return st;
}

pgcl_status pgcl_pg_query_int(PGconn *conn, const char *what, const char *sql, int n, const char *const *values,
                              int64_t *out, bool *found, char *err, int cap) {
    pgcl_status st;
    PGresult *res = pgcl_pg_query(conn, what, sql, n, values, &st, err, cap);
    *out = 0;
    if (found) *found = false;
    if (!res) return st;
    if (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0)) {
        *out = pgcl_pg_int(res, 0, 0);
        if (found) *found = true;
    }
    PQclear(res);
    return PGCL_OK;
}

const char *pgcl_pg_sqlstate(const PGresult *res) {
    const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return s ? s : "";
}

const char *pgcl_pg_text(const PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

int64_t pgcl_pg_int(const PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

double pgcl_pg_double(const PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? 0.0 : strtod(PQgetvalue(res, row, col), NULL);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

pgcl_status pgcl_pg_bytea(const PGresult *res, int row, int col, unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (PQgetisnull(res, row, col)) return PGCL_OK;
    const char *s = PQgetvalue(res, row, col);
    size_t n = (size_t)PQgetlength(res, row, col);
    if (n < 2 || s[0] != '\\' || s[1] != 'x' || (n - 2) % 2 != 0) return PGCL_ERR_FORMAT;
    size_t bytes = (n - 2) / 2;
    unsigned char *buf = malloc(bytes ? bytes : 1);
    if (!buf) return PGCL_ERR_NOMEM;
    for (size_t i = 0; i < bytes; i++) {
        int hi = hex_digit(s[2 + 2 * i]), lo = hex_digit(s[3 + 2 * i]);
        if (hi < 0 || lo < 0) {
            free(buf);
            return PGCL_ERR_FORMAT;
        }
        buf[i] = (unsigned char)(hi << 4 | lo);
    }
    *out = buf;
    *len = bytes;
    return PGCL_OK;
}

/* ---- the read pool ---- */

struct pgcl_pg_pool {
    char *uri;
    int size;
    int connect_timeout_s;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int out;       /* connections handed out */
    int n_idle;
    PGconn **idle; /* (size) */
};

pgcl_pg_pool *pgcl_pg_pool_create(const char *uri, int size, char *err, int cap) {
    PGCL_ASSERT(size >= 1);
    pgcl_pg_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->uri = strdup(uri)) || !(p->idle = calloc((size_t)size, sizeof *p->idle))) {
        if (p) free(p->uri);
        free(p);
        pgcl_errorf(err, cap, "out of memory");
        return NULL;
    }
    p->size = size;
    p->connect_timeout_s = PGCL_PG_CONNECT_TIMEOUT_S;
    pthread_mutex_init(&p->lock, NULL);
    pgcl_cond_init_monotonic(&p->freed);
    return p;
}

void pgcl_pg_pool_destroy(pgcl_pg_pool *p) {
    if (!p) return;
    PGCL_ASSERT(p->out == 0);
    for (int i = 0; i < p->n_idle; i++) PQfinish(p->idle[i]);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->lock);
    free(p->idle);
    free(p->uri);
    free(p);
}

pgcl_status pgcl_pg_pool_acquire(pgcl_pg_pool *p, int wait_ms, PGconn **out, char *err, int cap) {
    *out = NULL;
    struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + (int64_t)wait_ms * 1000);
    pthread_mutex_lock(&p->lock);
    while (p->n_idle == 0 && p->out >= p->size) {
        if (pthread_cond_timedwait(&p->freed, &p->lock, &deadline) == ETIMEDOUT) {
            pthread_mutex_unlock(&p->lock);
            pgcl_errorf(err, cap, "every read connection to the audit database is busy");
            return PGCL_ERR_BUSY;
        }
    }
    p->out++;
    PGconn *conn = p->n_idle ? p->idle[--p->n_idle] : NULL;
    pthread_mutex_unlock(&p->lock);
    /* An idle connection whose server restarted or went away looks fine until it is used: the
     * server's goodbye (or the socket's end) is waiting unread; pgcl_pg_gone_while_idle reads it
     * without blocking, in as many reads as it takes (the goodbye and the end may come apart). */
    if (conn && pgcl_pg_gone_while_idle(conn)) {
        PQfinish(conn);
        conn = NULL;
    }
    if (!conn && (conn = pgcl_pg_connect_within(p->uri, p->connect_timeout_s, err, cap)) &&
        pgcl_pg_exec(conn, "setting up a read connection", PGCL_PG_POOL_SESSION_SQL, 0, NULL, err, cap) != PGCL_OK) {
        PQfinish(conn);
        conn = NULL;
    }
    if (!conn) {
        pthread_mutex_lock(&p->lock);
        p->out--;
        pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->lock);
        return PGCL_ERR_DB;
    }
    *out = conn;
    return PGCL_OK;
}

void pgcl_pg_pool_set_connect_timeout(pgcl_pg_pool *p, int timeout_s) {
    PGCL_ASSERT(timeout_s >= 2);
    p->connect_timeout_s = timeout_s;
}

void pgcl_pg_pool_release(pgcl_pg_pool *p, PGconn *conn) {
    if (!conn) return;
    if (pgcl_pg_broken(conn) || PQtransactionStatus(conn) != PQTRANS_IDLE) {
        PQfinish(conn);
        conn = NULL;
    }
    pthread_mutex_lock(&p->lock);
    p->out--;
    if (conn) p->idle[p->n_idle++] = conn;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

void pgcl_pg_pool_adopt(pgcl_pg_pool *p, PGconn *conn) {
    char ignored[256];
    /* set up as every pooled connection is (a read relies on it: exact doubles); one that cannot be
     * is dropped, and the first read makes a new one */
    if (pgcl_pg_exec(conn, "setting up a read connection", PGCL_PG_POOL_SESSION_SQL, 0, NULL, ignored,
                     sizeof ignored) != PGCL_OK) {
        PQfinish(conn);
        return;
    }
    pthread_mutex_lock(&p->lock);
    PGCL_ASSERT(p->out + p->n_idle < p->size); /* room for one more connection */
    p->out++;
    pthread_mutex_unlock(&p->lock);
    pgcl_pg_pool_release(p, conn);
}
