/* The PostgreSQL store's reviewers' writes, API keys, the keyring and input retention. See
 * audit_pg.h.
 *
 * Every write here is a job on this process's writer (pgcl_pg_run): it runs inside the writer's
 * transaction after the fleet order lock (fleet_counters' one row) is held, so the rules it checks
 * (one open contest per decision, one resolution per contest, a key revoked once, the retention
 * cursor) see every other replica's committed writes and hold until COMMIT: two replicas' jobs
 * never interleave. Each job's event rows take their seq from pgcl_pg_txn_next_seq and are chained
 * with their version-2 leaf (pgcl_chain_leaf_of_values, columns in pgcl_chain_tables' order).
 *
 * The rules, error codes and messages are the SQLite store's (core/review/review.c,
 * core/audit/keys.c, core/audit/retention.c); the database is named by its redacted URI where the
 * SQLite store names its file.
 *
 * The keyring's source polls a change marker of api_keys (counts and latest times: rows are only
 * inserted and revoked, never changed otherwise) on a connection of its own, at most every
 * KEYRING_RECHECK_US, so a key created or revoked through any replica takes effect here within
 * about a quarter of a second. The keyring calls this source on a thread of its own
 * (pgcl_keyring_source.background): a request thread never waits on the network for the keyring,
 * except for an unknown key_id, which waits for one check at most KEYRING_FORCED_WAIT_US; while
 * the database is unreachable the last set stays in force. */
#include "audit_pg.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ids.h"
#include "keys.h"
#include "log.h"
#include "record_rows.h"
#include "retention.h"
#include "review.h"
#include "time_cursor.h"

#define KEYRING_RECHECK_US 250000 /* the keyring looks at api_keys' marker at most this often */
#define KEYRING_FORCED_US 20000   /* ... and at most this often for unknown key_ids (no query flood) */
#define KEYRING_WAIT_MS 2000      /* its own one-connection pool is free unless a check hangs */
#define KEYRING_FORCED_WAIT_US 1000000 /* an unknown key_id waits at most this for the keyring's check */
#define KEYRING_CONNECT_TIMEOUT_S 2    /* the keyring's connection attempts (libpq's least) */
#define MARKER_CAP 160
#define INT_TEXT 24 /* an int64 in decimal, with sign and NUL */

/* ---- shared pieces ---- */

static void int_text(int64_t v, char out[INT_TEXT]) {
    snprintf(out, INT_TEXT, "%lld", (long long)v);
}

static pgcl_chain_value chain_int(int64_t v) {
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_INTEGER, .integer = v};
}

/* TEXT, or NULL for a NULL pointer. */
static pgcl_chain_value chain_text(const char *s) {
    if (!s) return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_NULL};
    return (pgcl_chain_value){.type = PGCL_CHAIN_VALUE_TEXT, .bytes = s, .len = strlen(s)};
}

/* Chains row seq of table `name` (an event table of chain_encoding.h) whose encoded columns are
 * values[0..n), in its row SELECT's order, in this transaction's commit entry. */
static pgcl_status chain_row(pgcl_pg_txn *t, const char *name, int64_t seq, const pgcl_chain_value *values, int n,
                             char *err, int cap) {
    int table = pgcl_chain_table_index(name, strlen(name));
    PGCL_ASSERT(table >= 0 && values[0].type == PGCL_CHAIN_VALUE_INTEGER && values[0].integer == seq);
    pgcl_merkle_hash leaf = pgcl_chain_leaf_of_values(table, values, n);
    return pgcl_pg_txn_chain(t, table, seq, leaf, err, cap);
}

/* The rows a statement changed (INSERT, UPDATE, DELETE). */
static int64_t changed_rows(PGresult *res) {
    const char *n = PQcmdTuples(res);
    return n && *n ? strtoll(n, NULL, 10) : 0;
}

#define EVENT_COLUMNS_MAX 8 /* resolutions' (seq and 7), before writer_id and leaf_index */

/* Appends one row of the event table `table` through insert_sql ($1 the seq, from the fleet
 * counter; $2.. columns[0..n), text or NULL; then the writer id and the leaf), chains it and adds
 * its record `rec` to the writer's log. `what` names the row in errors. */
static pgcl_status add_event_row(pgcl_pg_txn *t, const char *table, const char *what, const char *insert_sql,
                                 const char *const *columns, int n, const pgcl_record *rec, char *err, int cap) {
    PGCL_ASSERT(n + 1 <= EVENT_COLUMNS_MAX);
    char sub[512];
    int64_t seq;
    pgcl_status st = pgcl_pg_txn_next_seq(t, table, &seq, sub, sizeof sub);
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", what, sub);
        return st;
    }
    uint64_t leaf = 0;
    if ((st = pgcl_pg_txn_log(t, rec, &leaf, err, cap)) != PGCL_OK) return st;
    char seq_text[INT_TEXT], leaf_text[INT_TEXT];
    int_text(seq, seq_text);
    int_text((int64_t)leaf, leaf_text);
    const char *values[EVENT_COLUMNS_MAX + 2] = {seq_text};
    pgcl_chain_value row[EVENT_COLUMNS_MAX] = {chain_int(seq)};
    for (int i = 0; i < n; i++) {
        values[i + 1] = columns[i];
        row[i + 1] = chain_text(columns[i]);
    }
    values[n + 1] = pgcl_pg_txn_writer_id(t);
    values[n + 2] = leaf_text;
    if ((st = pgcl_pg_exec(pgcl_pg_txn_conn(t), what, insert_sql, n + 3, values, err, cap)) != PGCL_OK) return st;
    return chain_row(t, table, seq, row, n + 1, err, cap);
}

/* A record field's text: "" for an absent (NULL) one. */
static const char *or_empty(const char *s) {
    return s ? s : "";
}

/* A record of record_rows.h, or its refusal as "<what>: <why>". */
static pgcl_status record_made(pgcl_status st, const char *what, const char *why, char *err, int cap) {
    if (st != PGCL_OK) pgcl_errorf(err, cap, "%s: its log record: %s", what, why);
    return st;
}

static const char INSERT_EVENT_SQL[] =
    "INSERT INTO admin_events (seq, event_id, created_at, actor, action, target, details, writer_id, leaf_index)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint)";

/* Also the writer's administrative events (pgcl_audit_record_event); see audit_pg.h. */
pgcl_status pgcl_pg_txn_add_admin_event(pgcl_pg_txn *t, const char *actor, const char *action, const char *target,
                                        const char *details, char *err, int cap) {
    char event_id[PGCL_UUID_LEN + 1];
    pgcl_uuid7(event_id);
    const char *columns[] = {event_id, pgcl_pg_txn_now(t), actor, action, target, details};
    pgcl_record rec;
    char why[256];
    pgcl_status st = record_made(pgcl_record_of_admin_event(event_id, pgcl_pg_txn_now(t), actor, action, target,
                                                            details, &rec, why, sizeof why),
                                 "admin_events", why, err, cap);
    if (st != PGCL_OK) return st;
    return add_event_row(t, "admin_events", "admin_events", INSERT_EVENT_SQL, columns, 6, &rec, err, cap);
}

/* ---- contests and resolutions (core/review/review.c's rules) ---- */

static const char CONTEST_DECISION_SQL[] = "SELECT created_at FROM decisions WHERE decision_id = $1";
static const char OPEN_CONTEST_SQL[] =
    "SELECT c.contest_id FROM contests AS c WHERE c.decision_id = $1"
    " AND NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id) LIMIT 1";
static const char INSERT_CONTEST_SQL[] =
    "INSERT INTO contests (seq, contest_id, decision_id, filed_at, filed_by, filer_key_id, reason, writer_id,"
    " leaf_index) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint)";

/* The age in days at `now` of the decision created at created_at, for the contest window (the days
 * as a fraction, as SQLite's julianday difference; a created_at that is not a timestamp counts as
 * new, 0, as julianday's NULL does). */
static double age_days(const char *created_at, const char *now) {
    int64_t created_us, now_us;
    if (!pgcl_time_parse(created_at, &created_us) || !pgcl_time_parse(now, &now_us)) return 0;
    return (double)(now_us - created_us) / 86400e6;
}

static pgcl_status contest_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    pgcl_contest_request *r = ctx;
    PGconn *conn = pgcl_pg_txn_conn(t);
    const char *now = pgcl_pg_txn_now(t);
    pgcl_status st;
    const char *id[] = {r->decision_id};
    PGresult *res = pgcl_pg_query(conn, "contest", CONTEST_DECISION_SQL, 1, id, &st, err, cap);
    if (!res) return st;
    bool found = PQntuples(res) > 0;
    st = pgcl_review_check_decision(r, found, found ? age_days(pgcl_pg_text(res, 0, 0), now) : 0, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;
    if (!(res = pgcl_pg_query(conn, "contest", OPEN_CONTEST_SQL, 1, id, &st, err, cap))) return st;
    st = pgcl_review_check_open(r, PQntuples(res) > 0 ? pgcl_pg_text(res, 0, 0) : NULL, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;
    pgcl_uuid7(r->contest_id);
    snprintf(r->filed_at, sizeof r->filed_at, "%s", now);
    const char *columns[] = {r->contest_id, r->decision_id, r->filed_at, r->filed_by, r->filer_key_id, r->reason};
    pgcl_record rec;
    char why[256];
    st = record_made(pgcl_record_of_contest(r->contest_id, r->decision_id, r->filed_at, or_empty(r->filer_key_id),
                                            r->filed_by, r->reason, &rec, why, sizeof why),
                     "contest", why, err, cap);
    if (st != PGCL_OK) return st;
    return add_event_row(t, "contests", "contest", INSERT_CONTEST_SQL, columns, 6, &rec, err, cap);
}

pgcl_status pgcl_pg_file_contest(pgcl_audit *store, pgcl_contest_request *r, char *err, int cap) {
    r->code = NULL;
    return pgcl_pg_run(pgcl_audit_pg_of(store), contest_job, r, err, cap);
}

static const char RESOLVE_CONTEST_SQL[] =
    "SELECT c.decision_id, c.filer_key_id, d.probabilities,"
    " (SELECT count(*) FROM resolutions AS r WHERE r.contest_id = c.contest_id)"
    " FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id WHERE c.contest_id = $1";
static const char INSERT_RESOLUTION_SQL[] =
    "INSERT INTO resolutions (seq, contest_id, resolved_at, resolved_by, resolver_key_id, outcome, corrected_label,"
    " note, writer_id, leaf_index) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::bigint)";

static pgcl_status resolve_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    pgcl_resolution_request *r = ctx;
    PGconn *conn = pgcl_pg_txn_conn(t);
    pgcl_status st;
    const char *id[] = {r->contest_id};
    PGresult *res = pgcl_pg_query(conn, "resolution", RESOLVE_CONTEST_SQL, 1, id, &st, err, cap);
    if (!res) return st;
    bool found = PQntuples(res) > 0;
    char decision_id[PGCL_UUID_LEN + 1] = "";
    if (found) snprintf(decision_id, sizeof decision_id, "%s", pgcl_pg_text(res, 0, 0) ? pgcl_pg_text(res, 0, 0) : "");
    st = pgcl_review_check_resolution(r, found, found ? pgcl_pg_text(res, 0, 0) : NULL,
                                      found ? pgcl_pg_text(res, 0, 1) : NULL, found ? pgcl_pg_text(res, 0, 2) : NULL,
                                      found ? pgcl_pg_int(res, 0, 3) : 0, err, cap);
    PQclear(res);
    if (st != PGCL_OK) return st;
    snprintf(r->resolved_at, sizeof r->resolved_at, "%s", pgcl_pg_txn_now(t));
    const char *columns[] = {r->contest_id, r->resolved_at,     r->resolved_by, r->resolver_key_id,
                             r->outcome,    r->corrected_label, r->note};
    pgcl_record rec;
    char why[256];
    st = record_made(pgcl_record_of_resolution(r->contest_id, decision_id, r->resolved_at, r->outcome,
                                               or_empty(r->resolver_key_id), r->resolved_by,
                                               or_empty(r->corrected_label), r->note, &rec, why, sizeof why),
                     "resolution", why, err, cap);
    if (st != PGCL_OK) return st;
    return add_event_row(t, "resolutions", "resolution", INSERT_RESOLUTION_SQL, columns, 7, &rec, err, cap);
}

pgcl_status pgcl_pg_resolve_contest(pgcl_audit *store, pgcl_resolution_request *r, char *err, int cap) {
    r->code = NULL;
    return pgcl_pg_run(pgcl_audit_pg_of(store), resolve_job, r, err, cap);
}

/* ---- API keys (core/audit/keys.c's texts, checks and events) ---- */

static const char INSERT_KEY_SQL[] =
    "INSERT INTO api_keys (key_id, name, role, key_sha256, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (key_id) DO NOTHING";
static const char KEY_STATE_SQL[] =
    "SELECT name, role, revoked_at, revoked_by, key_sha256 FROM api_keys WHERE key_id = $1";
static const char REVOKE_KEY_SQL[] =
    "UPDATE api_keys SET revoked_at = $2, revoked_by = $3 WHERE key_id = $1 AND revoked_at IS NULL";
static const char LIST_KEYS_SQL[] =
    "SELECT key_id, name, role, created_at, created_by, revoked_at, revoked_by FROM api_keys"
    " ORDER BY created_at COLLATE \"C\", key_id COLLATE \"C\"";

/* One key change: what the job needs and what it hands back. */
typedef struct key_job {
    const pgcl_audit_pg *s;
    const char *zrole, *name, *actor;
    const char *key_id_in;            /* revoke, import: the key_id */
    const char *digest_in;            /* import: the hex SHA-256 of the key */
    char key[PGCL_KEY_LEN + 1];       /* create: the new key (wiped by the caller) */
    char key_id[PGCL_KEY_ID_LEN + 1]; /* create: its key_id */
    bool created;                     /* import: a row was inserted */
} key_job;

/* Inserts the api_keys row of key_id (ON CONFLICT DO NOTHING): *inserted whether it went in. */
static pgcl_status insert_key_row(pgcl_pg_txn *t, const char *key_id, const char *digest, const key_job *j,
                                  bool *inserted, char *err, int cap) {
    const char *values[] = {key_id, j->name, j->zrole, digest, pgcl_pg_txn_now(t), j->actor};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(pgcl_pg_txn_conn(t), "api_keys", INSERT_KEY_SQL, 6, values, &st, err, cap);
    if (!res) return st;
    *inserted = changed_rows(res) == 1;
    PQclear(res);
    return PGCL_OK;
}

/* The key's admin_events row, details {"name","role"}. */
static pgcl_status add_key_event(pgcl_pg_txn *t, const key_job *j, const char *action, const char *key_id,
                                 const char *name, const char *role, char *err, int cap) {
    char *details = pgcl_keys_event_details(name, role);
    if (!details) {
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_status st = pgcl_pg_txn_add_admin_event(t, j->actor, action, key_id, details, err, cap);
    free(details);
    return st;
}

static pgcl_status create_key_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    key_job *j = ctx;
    char digest[65];
    bool inserted = false;
    pgcl_status st = PGCL_OK;
    for (int attempt = 0; attempt < PGCL_KEYS_CREATE_ATTEMPTS && !inserted && st == PGCL_OK; attempt++) {
        pgcl_keys_generate(j->key, j->key_id);
        pgcl_sha256_hex(j->key, PGCL_KEY_LEN, digest);
        st = insert_key_row(t, j->key_id, digest, j, &inserted, err, cap);
    }
    sodium_memzero(digest, sizeof digest);
    if (st != PGCL_OK) return st;
    if (!inserted) {
        pgcl_errorf(err, cap, "%s: %d random key_ids in a row were taken", j->s->redacted, PGCL_KEYS_CREATE_ATTEMPTS);
        return PGCL_ERR_DB;
    }
    return add_key_event(t, j, "key.create", j->key_id, j->name, j->zrole, err, cap);
}

pgcl_status pgcl_pg_create_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor,
                               char key_out[128], char key_id_out[32], char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    key_out[0] = 0;
    key_id_out[0] = 0;
    key_job j = {.s = s, .name = name, .actor = actor};
    pgcl_status st = pgcl_keys_check_fields(role, name, actor, &j.zrole, err, cap);
    if (st == PGCL_OK) st = pgcl_pg_run(s, create_key_job, &j, err, cap);
    if (st == PGCL_OK) {
        memcpy(key_out, j.key, sizeof j.key);
        memcpy(key_id_out, j.key_id, sizeof j.key_id);
    }
    sodium_memzero(j.key, sizeof j.key);
    return st;
}

static pgcl_status revoke_key_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    key_job *j = ctx;
    PGconn *conn = pgcl_pg_txn_conn(t);
    const char *id[] = {j->key_id_in};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(conn, "api_keys", KEY_STATE_SQL, 1, id, &st, err, cap);
    if (!res) return st;
    bool found = PQntuples(res) > 0;
    if ((st = pgcl_keys_check_revocable(j->s->redacted, j->key_id_in, found, found ? pgcl_pg_text(res, 0, 2) : NULL,
                                        found ? pgcl_pg_text(res, 0, 3) : NULL, err, cap)) != PGCL_OK) {
        PQclear(res);
        return st;
    }
    char name[PGCL_KEY_NAME_MAX + 1], role[16];
    snprintf(name, sizeof name, "%s", pgcl_pg_text(res, 0, 0) ? pgcl_pg_text(res, 0, 0) : "");
    snprintf(role, sizeof role, "%s", pgcl_pg_text(res, 0, 1) ? pgcl_pg_text(res, 0, 1) : "");
    PQclear(res);
    const char *values[] = {j->key_id_in, pgcl_pg_txn_now(t), j->actor};
    if (!(res = pgcl_pg_query(conn, "api_keys", REVOKE_KEY_SQL, 3, values, &st, err, cap))) return st;
    int64_t changed = changed_rows(res);
    PQclear(res);
    if (changed != 1) {
        pgcl_errorf(err, cap, "%s: revoking %s: %lld rows changed", j->s->redacted, j->key_id_in, (long long)changed);
        return PGCL_ERR_DB;
    }
    return add_key_event(t, j, "key.revoke", j->key_id_in, name, role, err, cap);
}

pgcl_status pgcl_pg_revoke_key(pgcl_audit *store, const char *key_id, const char *actor, char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    pgcl_status st = pgcl_keys_check_revoke(key_id, actor, err, cap);
    if (st != PGCL_OK) return st;
    key_job j = {.s = s, .actor = actor, .key_id_in = key_id};
    return pgcl_pg_run(s, revoke_key_job, &j, err, cap);
}

static pgcl_status import_key_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    key_job *j = ctx;
    const char *id[] = {j->key_id_in};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(pgcl_pg_txn_conn(t), "api_keys", KEY_STATE_SQL, 1, id, &st, err, cap);
    if (!res) return st;
    if (PQntuples(res) > 0) {
        st = pgcl_keys_check_existing(j->s->redacted, j->key_id_in, j->zrole, j->digest_in, pgcl_pg_text(res, 0, 1),
                                      pgcl_pg_text(res, 0, 4), pgcl_pg_text(res, 0, 2), pgcl_pg_text(res, 0, 3), err,
                                      cap);
        PQclear(res);
        return st;
    }
    PQclear(res);
    bool inserted = false;
    if ((st = insert_key_row(t, j->key_id_in, j->digest_in, j, &inserted, err, cap)) != PGCL_OK) return st;
    if (!inserted) { /* the fleet lock is held: nobody can have inserted it since the SELECT */
        pgcl_errorf(err, cap, "%s: api_keys: key_id %s appeared during the import", j->s->redacted, j->key_id_in);
        return PGCL_ERR_DB;
    }
    j->created = true;
    return add_key_event(t, j, "key.import", j->key_id_in, j->name, j->zrole, err, cap);
}

pgcl_status pgcl_pg_import_key(pgcl_audit *store, pgcl_role role, const char *name, const char *actor, const char *key,
                               char key_id_out[32], bool *created, char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    key_id_out[0] = 0;
    *created = false;
    key_job j = {.s = s, .name = name, .actor = actor};
    pgcl_status st = pgcl_keys_check_fields(role, name, actor, &j.zrole, err, cap);
    if (st == PGCL_OK) st = pgcl_keys_check_text(key, key ? strnlen(key, PGCL_KEY_LEN + 1) : 0, err, cap);
    if (st != PGCL_OK) return st;
    char key_id[PGCL_KEY_ID_LEN + 1], digest[65];
    memcpy(key_id, key, PGCL_KEY_ID_LEN);
    key_id[PGCL_KEY_ID_LEN] = 0;
    pgcl_sha256_hex(key, PGCL_KEY_LEN, digest);
    j.key_id_in = key_id;
    j.digest_in = digest;
    st = pgcl_pg_run(s, import_key_job, &j, err, cap);
    sodium_memzero(digest, sizeof digest);
    if (st != PGCL_OK) return st;
    memcpy(key_id_out, key_id, sizeof key_id);
    *created = j.created;
    return PGCL_OK;
}

pgcl_status pgcl_pg_read_keys(pgcl_audit *store, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    PGconn *conn;
    pgcl_status st = pgcl_pg_pool_acquire(s->readers, PGCL_PG_READ_WAIT_MS, &conn, err, cap);
    if (st != PGCL_OK) return st;
    PGresult *res = pgcl_pg_query(conn, "api_keys", LIST_KEYS_SQL, 0, NULL, &st, err, cap);
    pgcl_pg_pool_release(s->readers, conn);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res) && st == PGCL_OK; i++) {
        pgcl_key_info key = {pgcl_pg_text(res, i, 0), pgcl_pg_text(res, i, 1), pgcl_pg_text(res, i, 2),
                             pgcl_pg_text(res, i, 3), pgcl_pg_text(res, i, 4), pgcl_pg_text(res, i, 5),
                             pgcl_pg_text(res, i, 6)};
        if (!on_key(&key, ctx)) {
            pgcl_errorf(err, cap, "%s: key %.32s: a column is not valid UTF-8 (or out of memory)", s->redacted,
                        key.key_id ? key.key_id : "?");
            st = PGCL_ERR_FORMAT;
        }
    }
    PQclear(res);
    return st;
}

/* ---- the keyring's source: api_keys' change marker, polled on a connection of its own ---- */

/* Rows of api_keys are inserted, and revoked once; nothing else changes them. Any insert raises
 * the count, any revocation the count of revoked_at; the latest times cover a row deleted by
 * hand. */
static const char KEYS_MARKER_SQL[] =
    "SELECT count(*)::text || '/' || count(revoked_at)::text || '/' || coalesce(max(created_at), '') || '/'"
    " || coalesce(max(revoked_at), '') FROM api_keys";
static const char ACTIVE_KEYS_SQL[] = "SELECT key_id, name, role, key_sha256 FROM api_keys WHERE revoked_at IS NULL";

typedef struct pg_key_source {
    pgcl_pg_pool *pool;      /* one connection, this keyring's only */
    char name[512];          /* the redacted URI */
    char marker[MARKER_CAP]; /* as read before the rows of the last successful load */
} pg_key_source;

static pgcl_status read_marker(PGconn *conn, char out[MARKER_CAP], char *err, int cap) {
    pgcl_status st;
    PGresult *res = pgcl_pg_query(conn, "api_keys marker", KEYS_MARKER_SQL, 0, NULL, &st, err, cap);
    if (!res) return st;
    snprintf(out, MARKER_CAP, "%s", PQntuples(res) == 1 && pgcl_pg_text(res, 0, 0) ? pgcl_pg_text(res, 0, 0) : "");
    PQclear(res);
    return PGCL_OK;
}

static pgcl_status pg_keys_changed(void *ctx, bool *changed, char *err, int cap) {
    pg_key_source *ks = ctx;
    *changed = false;
    PGconn *conn;
    char marker[MARKER_CAP];
    pgcl_status st = pgcl_pg_pool_acquire(ks->pool, KEYRING_WAIT_MS, &conn, err, cap);
    if (st != PGCL_OK) return st;
    st = read_marker(conn, marker, err, cap);
    pgcl_pg_pool_release(ks->pool, conn);
    *changed = st == PGCL_OK && strcmp(marker, ks->marker) != 0;
    return st;
}

/* The marker is read before the rows (READ COMMITTED: each statement sees what committed before
 * it): a change that commits between the two is seen again at the next check, never missed. */
static pgcl_status pg_keys_load(void *ctx, pgcl_keyring_row_fn add, void *sink, char *err, int cap) {
    pg_key_source *ks = ctx;
    PGconn *conn;
    char marker[MARKER_CAP];
    pgcl_status st = pgcl_pg_pool_acquire(ks->pool, KEYRING_WAIT_MS, &conn, err, cap);
    if (st != PGCL_OK) return st;
    PGresult *res = NULL;
    if ((st = read_marker(conn, marker, err, cap)) == PGCL_OK)
        res = pgcl_pg_query(conn, "api_keys", ACTIVE_KEYS_SQL, 0, NULL, &st, err, cap);
    pgcl_pg_pool_release(ks->pool, conn);
    if (!res) return st;
    for (int i = 0; i < PQntuples(res); i++) {
        if (!add(sink, pgcl_pg_text(res, i, 0), pgcl_pg_text(res, i, 1), pgcl_pg_text(res, i, 2),
                 pgcl_pg_text(res, i, 3))) {
            PQclear(res);
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
    }
    PQclear(res);
    memcpy(ks->marker, marker, sizeof marker);
    return PGCL_OK;
}

static void pg_keys_destroy(void *ctx) {
    pg_key_source *ks = ctx;
    if (!ks) return;
    pgcl_pg_pool_destroy(ks->pool);
    free(ks);
}

pgcl_status pgcl_pg_open_keyring(pgcl_audit *store, pgcl_keyring **out, char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    *out = NULL;
    pg_key_source *ks = calloc(1, sizeof *ks);
    if (!ks || !(ks->pool = pgcl_pg_pool_create(s->uri, 1, err, cap))) {
        free(ks);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_pg_pool_set_connect_timeout(ks->pool, KEYRING_CONNECT_TIMEOUT_S);
    snprintf(ks->name, sizeof ks->name, "%s", s->redacted);
    pgcl_keyring_source src = {.name = ks->name,
                               .recheck_us = KEYRING_RECHECK_US,
                               .min_forced_us = KEYRING_FORCED_US,
                               .ctx = ks,
                               .changed = pg_keys_changed,
                               .load = pg_keys_load,
                               .destroy = pg_keys_destroy,
                               .background = true, /* requests never wait on the network */
                               .forced_wait_us = KEYRING_FORCED_WAIT_US};
    return pgcl_keyring_open_source(&src, out, err, cap);
}

/* ---- input retention (core/audit/retention.c's walk) ----
 * The walk goes through decisions in seq order from the cursor and stops at the first decision
 * created at or after the horizon: seqs are handed out in commit order and each writer stamps its
 * transactions no earlier than its previous one, so an old created_at forged behind the writers'
 * backs cannot make the walk drop the inputs of newer decisions. Inputs of decisions under an open
 * contest stay; once the contest is resolved they go at the next step behind the cursor. Every
 * chain entry here is encoding 2 (no input bytes in any payload), so no input is kept for that.
 * Times compare as text in the C collation: RFC 3339 UTC of one width orders as time. */

static const char RET_OLDEST_INPUT_SQL[] =
    "SELECT (d.created_at COLLATE \"C\" < $1)::int FROM decision_inputs AS i JOIN decisions AS d"
    " ON d.seq = i.decision_seq ORDER BY i.decision_seq LIMIT 1";
static const char RET_CURSOR_SQL[] = "SELECT through_seq FROM input_retention WHERE id = 1";
static const char RET_LAST_SEQ_SQL[] = "SELECT max(seq) FROM decisions";
static const char RET_FIRST_RECENT_SQL[] =
    "SELECT min(seq) FROM decisions WHERE seq > $1::bigint AND seq <= $2::bigint AND created_at COLLATE \"C\" >= $3";
/* Decisions whose input stays: under an open contest. $1 < seq <= $2. */
#define RET_KEPT_SQL                                                                                                   \
    " AND decision_seq NOT IN (SELECT d.seq FROM contests AS c JOIN decisions AS d ON d.decision_id = c.decision_id"   \
    " WHERE NOT EXISTS (SELECT 1 FROM resolutions AS r WHERE r.contest_id = c.contest_id) AND d.seq > $1::bigint"      \
    " AND d.seq <= $2::bigint)"
static const char RET_DROP_RANGE_SQL[] =
    "DELETE FROM decision_inputs WHERE decision_seq > $1::bigint AND decision_seq <= $2::bigint" RET_KEPT_SQL;
static const char RET_DROP_RESOLVED_SQL[] =
    "DELETE FROM decision_inputs WHERE decision_seq IN (SELECT d.seq FROM contests AS c JOIN decisions AS d ON"
    " d.decision_id = c.decision_id WHERE d.seq <= $2::bigint)" RET_KEPT_SQL;
static const char RET_ADVANCE_SQL[] = "UPDATE input_retention SET through_seq = $1 WHERE id = 1";

/* This store's statements of the walk (retention.h: their parameters are lo, hi and text). */
static pgcl_status walk_read_int(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, const char *text,
                                 int64_t *out, bool *found, char *err, int cap) {
    PGCL_ASSERT(which == PGCL_RETENTION_CURSOR || which == PGCL_RETENTION_LAST_SEQ ||
                which == PGCL_RETENTION_FIRST_RECENT);
    const char *sql = which == PGCL_RETENTION_CURSOR     ? RET_CURSOR_SQL
                      : which == PGCL_RETENTION_LAST_SEQ ? RET_LAST_SEQ_SQL
                                                         : RET_FIRST_RECENT_SQL;
    char lo_text[INT_TEXT], hi_text[INT_TEXT];
    int_text(lo, lo_text);
    int_text(hi, hi_text);
    const char *values[] = {lo_text, hi_text, text};
    return pgcl_pg_query_int(ctx, "input retention", sql, which == PGCL_RETENTION_FIRST_RECENT ? 3 : 0, values, out,
                             found, err, cap);
}

static pgcl_status walk_run(void *ctx, pgcl_retention_sql which, int64_t lo, int64_t hi, int64_t *changed, char *err,
                            int cap) {
    PGCL_ASSERT(which == PGCL_RETENTION_DROP_RANGE || which == PGCL_RETENTION_DROP_RESOLVED ||
                which == PGCL_RETENTION_ADVANCE);
    const char *sql = which == PGCL_RETENTION_DROP_RANGE      ? RET_DROP_RANGE_SQL
                      : which == PGCL_RETENTION_DROP_RESOLVED ? RET_DROP_RESOLVED_SQL
                                                              : RET_ADVANCE_SQL;
    char lo_text[INT_TEXT], hi_text[INT_TEXT];
    int_text(lo, lo_text);
    int_text(hi, hi_text);
    const char *values[] = {lo_text, hi_text};
    pgcl_status st;
    PGresult *res = pgcl_pg_query(ctx, "input retention", sql, which == PGCL_RETENTION_ADVANCE ? 1 : 2, values, &st,
                                  err, cap);
    if (!res) return st;
    if (changed) *changed += changed_rows(res);
    PQclear(res);
    return PGCL_OK;
}

static pgcl_status drop_inputs_job(pgcl_pg_txn *t, void *ctx, char *err, int cap) {
    pgcl_retention_db db = {.ctx = pgcl_pg_txn_conn(t), .read_int = walk_read_int, .run = walk_run};
    return pgcl_retention_step(&db, ctx, err, cap);
}

/* Whether any stored input belongs to a decision older than the horizon, read on a pooled
 * connection: a step with nothing to do takes no write transaction. True when it cannot tell. */
static bool anything_to_drop(pgcl_audit_pg *s, const char *horizon) {
    char err[256];
    PGconn *conn;
    if (pgcl_pg_pool_acquire(s->readers, PGCL_PG_READ_WAIT_MS, &conn, err, sizeof err) != PGCL_OK) return true;
    int64_t oldest_is_older = 0;
    bool have_input = false;
    const char *values[] = {horizon};
    bool answered = pgcl_pg_query_int(conn, "input retention", RET_OLDEST_INPUT_SQL, 1, values, &oldest_is_older,
                                      &have_input, err, sizeof err) == PGCL_OK;
    pgcl_pg_pool_release(s->readers, conn);
    return !answered || (have_input && oldest_is_older);
}

pgcl_status pgcl_pg_drop_inputs(pgcl_audit *store, const char *older_than, int max_rows, int64_t *dropped, bool *more,
                                char *err, int cap) {
    pgcl_audit_pg *s = pgcl_audit_pg_of(store);
    *dropped = 0;
    *more = false;
    if (!anything_to_drop(s, older_than)) return PGCL_OK;
    pgcl_drop_inputs job = {.older_than = older_than, .max_rows = max_rows};
    pgcl_status st = pgcl_pg_run(s, drop_inputs_job, &job, err, cap);
    if (st != PGCL_OK) return st;
    *dropped = job.dropped;
    *more = job.more;
    return PGCL_OK;
}
