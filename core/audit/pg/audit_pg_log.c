/* The PostgreSQL store's logs for the routes, checkpoints and proofs (audit_log.h; see audit_pg.h):
 * every writer's log of migrations/pg/0003_log.sql, read on the store's read pool. A log's rows are
 * read in one REPEATABLE READ snapshot, so that its state (log_writers) and the rows it covers
 * agree while other writers — and this one — go on committing. */
#include "audit_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "pg_log.h"

#define INT_TEXT 24

static const char LOGS_SQL[] = "SELECT writer_id, size, root FROM log_writers ORDER BY writer_id COLLATE \"C\"";
static const char LOG_STATE_SQL[] = "SELECT size, root FROM log_writers WHERE writer_id = $1";
static const char SNAPSHOT_SQL[] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
static const char LATEST_CHECKPOINT_SQL[] =
    "SELECT note || cosignatures, size FROM log_checkpoints WHERE writer_id = $1 ORDER BY size DESC LIMIT 1";
/* Only a tree the log has reached is checkpointed; an identical one again changes nothing. */
static const char PUT_CHECKPOINT_SQL[] =
    "INSERT INTO log_checkpoints (writer_id, size, note, created_at) SELECT $1, $2::bigint, $3, $4"
    " FROM log_writers WHERE writer_id = $1 AND size >= $2::bigint ON CONFLICT (writer_id, size) DO NOTHING";
static const char CHECKPOINT_AT_SQL[] = "SELECT note FROM log_checkpoints WHERE writer_id = $1 AND size = $2::bigint";
static const char LOCK_CHECKPOINT_SQL[] =
    "SELECT note, cosignatures FROM log_checkpoints WHERE writer_id = $1 AND size = $2::bigint FOR UPDATE";
static const char SET_COSIGNATURES_SQL[] =
    "UPDATE log_checkpoints SET cosignatures = $3 WHERE writer_id = $1 AND size = $2::bigint";
static const char *const LEAF_OF_SQL[] = {
    "SELECT writer_id, leaf_index FROM decisions WHERE decision_id = $1",
    "SELECT writer_id, leaf_index FROM contests WHERE contest_id = $1",
    "SELECT writer_id, leaf_index FROM resolutions WHERE contest_id = $1",
    "SELECT writer_id, leaf_index FROM admin_events WHERE event_id = $1 AND action NOT LIKE 'key.%'",
    "SELECT writer_id, leaf_index FROM admin_events WHERE event_id = $1 AND action LIKE 'key.%'",
};
static const char *const LEAF_OF_KINDS[] = {"decision", "contest", "resolution", "admin_event", "key_event"};
_Static_assert(sizeof LEAF_OF_SQL / sizeof *LEAF_OF_SQL == sizeof LEAF_OF_KINDS / sizeof *LEAF_OF_KINDS,
               "one statement per kind");

/* A log state row's (size, root) columns at (row, col), (row, col + 1) of a text result. */
static bool state_of(const PGresult *res, int row, int col, pgcl_audit_log_info *out) {
    const char *size = pgcl_pg_text(res, row, col);
    unsigned char *root = NULL;
    size_t len = 0;
    bool ok = size && pgcl_pg_bytea(res, row, col + 1, &root, &len) == PGCL_OK && root &&
              len == PGCL_MERKLE_HASH_BYTES && pgcl_pg_int(res, row, col) >= 0;
    if (ok) {
        out->size = (uint64_t)pgcl_pg_int(res, row, col);
        memcpy(out->root.b, root, PGCL_MERKLE_HASH_BYTES);
    }
    free(root);
    return ok;
}

pgcl_status pgcl_pg_logs(pgcl_audit *store, pgcl_audit_log_info *out, int cap, int *n, char *err, int err_cap) {
    *n = 0;
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, err_cap);
    if (st != PGCL_OK) return st;
    PGresult *res = pgcl_pg_query(conn, "logs", LOGS_SQL, 0, NULL, &st, err, err_cap);
    pgcl_pg_reader_release(store, conn);
    if (!res) return st;
    int rows = PQntuples(res);
    for (int i = 0; i < rows && i < cap; i++) {
        const char *id = pgcl_pg_text(res, i, 0);
        if (!id || strlen(id) > PGCL_LOG_WRITER_ID_MAX || !state_of(res, i, 1, &out[i])) {
            pgcl_errorf(err, err_cap, "log_writers: row %d is malformed", i);
            PQclear(res);
            return PGCL_ERR_FORMAT;
        }
        snprintf(out[i].writer_id, sizeof out[i].writer_id, "%s", id);
    }
    *n = rows;
    PQclear(res);
    return PGCL_OK;
}

const char *pgcl_pg_writer_id(pgcl_audit *store) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    return s->opts.read_only ? "" : s->writer_id;
}

/* The log of writer_id in the snapshot open on conn: fn with its rows. */
static pgcl_status read_in_snapshot(PGconn *conn, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx,
                                    char *err, int cap) {
    const char *v[] = {writer_id};
    pgcl_status st = PGCL_OK;
    PGresult *res = pgcl_pg_query(conn, "log state", LOG_STATE_SQL, 1, v, &st, err, cap);
    if (!res) return st;
    pgcl_audit_log_info info = {0};
    bool found = PQntuples(res) == 1, ok = found && state_of(res, 0, 0, &info);
    PQclear(res);
    if (!found) {
        pgcl_errorf(err, cap, "no log of writer %.128s", writer_id);
        return PGCL_ERR_NOT_FOUND;
    }
    if (!ok) {
        pgcl_errorf(err, cap, "log_writers: the row of writer %.128s is malformed", writer_id);
        return PGCL_ERR_FORMAT;
    }
    snprintf(info.writer_id, sizeof info.writer_id, "%s", writer_id);
    pgcl_pg_log_rows rows = {.conn = conn, .writer_id = writer_id, .batch = NULL};
    return fn(ctx, &pgcl_pg_log_ops, &rows, &info, err, cap);
}

pgcl_status pgcl_pg_log_read(pgcl_audit *store, const char *writer_id, pgcl_audit_log_read_fn fn, void *ctx, char *err,
                             int cap) {
    if (!writer_id || !writer_id[0] || strlen(writer_id) > PGCL_LOG_WRITER_ID_MAX) {
        pgcl_errorf(err, cap, "no log of writer '%.128s'", writer_id ? writer_id : "");
        return PGCL_ERR_NOT_FOUND;
    }
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    st = pgcl_pg_exec(conn, "log snapshot", SNAPSHOT_SQL, 0, NULL, err, cap);
    if (st == PGCL_OK) {
        st = read_in_snapshot(conn, writer_id, fn, ctx, err, cap);
        PQclear(PQexec(conn, st == PGCL_OK ? "COMMIT" : "ROLLBACK"));
    }
    pgcl_pg_reader_release(store, conn);
    return st;
}

pgcl_status pgcl_pg_log_checkpoint(pgcl_audit *store, const char *writer_id, char **note, uint64_t *size, char *err,
                                   int cap) {
    *note = NULL;
    *size = 0;
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *v[] = {writer_id ? writer_id : ""};
    PGresult *res = pgcl_pg_query(conn, "log checkpoint", LATEST_CHECKPOINT_SQL, 1, v, &st, err, cap);
    pgcl_pg_reader_release(store, conn);
    if (!res) return st;
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgcl_errorf(err, cap, "no checkpoint of writer %.128s's log yet", v[0]);
        return PGCL_ERR_NOT_FOUND;
    }
    *note = strdup(PQgetvalue(res, 0, 0));
    *size = (uint64_t)pgcl_pg_int(res, 0, 1);
    PQclear(res);
    if (!*note) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    return PGCL_OK;
}

pgcl_status pgcl_pg_log_put_checkpoint(pgcl_audit *store, uint64_t size, const char *note, char *err, int cap) {
    if (!note || !*note || note[strlen(note) - 1] != '\n') {
        pgcl_errorf(err, cap, "a checkpoint's note must be a signed note's text, ending in a newline");
        return PGCL_ERR_INVALID;
    }
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    char size_t_[INT_TEXT], now[PGCL_TIMESTAMP_LEN + 1];
    snprintf(size_t_, sizeof size_t_, "%" PRIu64, size);
    pgcl_timestamp_now(now);
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *v[] = {s->writer_id, size_t_, note, now};
    PGresult *res = pgcl_pg_query(conn, "log checkpoint", PUT_CHECKPOINT_SQL, 4, v, &st, err, cap);
    bool put = res != NULL;
    PQclear(res);
    res = put ? pgcl_pg_query(conn, "log checkpoint", CHECKPOINT_AT_SQL, 2, v, &st, err, cap) : NULL;
    pgcl_pg_reader_release(store, conn);
    if (!res) return st;
    bool there = PQntuples(res) == 1, same = there && strcmp(PQgetvalue(res, 0, 0), note) == 0;
    PQclear(res);
    if (!there) {
        pgcl_errorf(err, cap, "log of writer %s: no tree of %" PRIu64 " leaves to checkpoint", s->writer_id, size);
        return PGCL_ERR_INVALID;
    }
    if (!same) {
        pgcl_errorf(err, cap, "log of writer %s: another checkpoint of size %" PRIu64 " is stored", s->writer_id, size);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

/* Whether text holds the line p[0..n) (n bytes, its '\n' included) as a whole line. */
static bool has_line(const char *text, const char *p, size_t n) {
    for (const char *at = text; *at;) { /* at: the start of a line */
        if (strncmp(at, p, n) == 0) return true;
        const char *next = strchr(at, '\n');
        if (!next) return false;
        at = next + 1;
    }
    return false;
}

/* cosignatures with each line of lines that neither it nor the note holds yet appended (malloc'd). */
static char *merge_lines(const char *note, const char *cosignatures, const char *lines) {
    size_t have = strlen(cosignatures);
    char *merged = malloc(have + strlen(lines) + 1);
    if (!merged) return NULL;
    memcpy(merged, cosignatures, have + 1);
    for (const char *p = lines; *p;) {
        size_t n = (size_t)(strchr(p, '\n') - p) + 1; /* every line ends in '\n' (checked before) */
        if (n > 1 && !has_line(merged, p, n) && !has_line(note, p, n)) {
            memcpy(merged + have, p, n);
            merged[have += n] = 0;
        }
        p += n;
    }
    return merged;
}

/* In the transaction open on conn: the checkpoint's row locked, the new lines appended. */
static pgcl_status cosign_in(PGconn *conn, const char *const v[3], char *err, int cap) {
    pgcl_status st = PGCL_OK;
    PGresult *res = pgcl_pg_query(conn, "log cosignatures", LOCK_CHECKPOINT_SQL, 2, v, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) != 1) {
        PQclear(res);
        pgcl_errorf(err, cap, "log of writer %s: no checkpoint of size %s", v[0], v[1]);
        return PGCL_ERR_NOT_FOUND;
    }
    const char *cosignatures = PQgetvalue(res, 0, 1);
    char *merged = merge_lines(PQgetvalue(res, 0, 0), cosignatures, v[2]);
    bool changed = merged && strcmp(merged, cosignatures) != 0;
    PQclear(res);
    if (!merged) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    const char *set[] = {v[0], v[1], merged};
    if (changed) st = pgcl_pg_exec(conn, "log cosignatures", SET_COSIGNATURES_SQL, 3, set, err, cap);
    free(merged);
    return st;
}

pgcl_status pgcl_pg_log_add_cosignatures(pgcl_audit *store, uint64_t size, const char *signature_lines, char *err,
                                         int cap) {
    if (!signature_lines || (*signature_lines && signature_lines[strlen(signature_lines) - 1] != '\n')) {
        pgcl_errorf(err, cap, "cosignature lines must each end in a newline");
        return PGCL_ERR_INVALID;
    }
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    char size_t_[INT_TEXT];
    snprintf(size_t_, sizeof size_t_, "%" PRIu64, size);
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *v[] = {s->writer_id, size_t_, signature_lines};
    st = pgcl_pg_exec(conn, "log cosignatures", "BEGIN", 0, NULL, err, cap);
    if (st == PGCL_OK) {
        st = cosign_in(conn, v, err, cap);
        if (st == PGCL_OK) st = pgcl_pg_exec(conn, "log cosignatures", "COMMIT", 0, NULL, err, cap);
        if (st != PGCL_OK) PQclear(PQexec(conn, "ROLLBACK"));
    }
    pgcl_pg_reader_release(store, conn);
    return st;
}

pgcl_status pgcl_pg_log_leaf_of(pgcl_audit *store, const char *kind, const char *id,
                                char writer_id[PGCL_LOG_WRITER_ID_MAX + 1], uint64_t *leaf_index, char *err, int cap) {
    writer_id[0] = 0;
    *leaf_index = 0;
    int k = -1;
    for (int i = 0; i < (int)(sizeof LEAF_OF_KINDS / sizeof *LEAF_OF_KINDS); i++)
        if (kind && strcmp(kind, LEAF_OF_KINDS[i]) == 0) k = i;
    if (k < 0) {
        pgcl_errorf(err, cap, "no event kind '%.32s' in the logs", kind ? kind : "");
        return PGCL_ERR_INVALID;
    }
    PGconn *conn = NULL;
    pgcl_status st = pgcl_pg_reader_acquire(store, &conn, err, cap);
    if (st != PGCL_OK) return st;
    const char *v[] = {id ? id : ""};
    PGresult *res = pgcl_pg_query(conn, "log leaf", LEAF_OF_SQL[k], 1, v, &st, err, cap);
    pgcl_pg_reader_release(store, conn);
    if (!res) return st;
    const char *w = PQntuples(res) == 1 ? pgcl_pg_text(res, 0, 0) : NULL;
    const char *leaf = PQntuples(res) == 1 ? pgcl_pg_text(res, 0, 1) : NULL;
    bool found = w && leaf && strlen(w) <= PGCL_LOG_WRITER_ID_MAX && pgcl_pg_int(res, 0, 1) >= 0;
    if (found) {
        snprintf(writer_id, PGCL_LOG_WRITER_ID_MAX + 1, "%s", w);
        *leaf_index = (uint64_t)pgcl_pg_int(res, 0, 1);
    }
    PQclear(res);
    if (!found) {
        pgcl_errorf(err, cap, "no %s %.64s in the logs (none, or written before the log)", kind, v[0]);
        return PGCL_ERR_NOT_FOUND;
    }
    return PGCL_OK;
}
