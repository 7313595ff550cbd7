/* API keys: generation, storage as a SHA-256 digest, and the create/revoke/list transactions. The
 * daemon's keyring is keyring.c (keys_internal.h). See keys.h for the contract. */
#include "keys.h"
#include "keys_internal.h"

#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "clock.h"
#include "db.h"
#include "ids.h"
#include "log.h"
#include "log/record_rows.h"
#include "sqlite_log.h"

#define KEY_PREFIX "pgcld_"
#define KEY_PREFIX_LEN 6
#define KEY_HEX_LEN 8       /* 4 random bytes */
#define KEY_SECRET_BYTES 32 /* 256 random bits */
#define KEY_SECRET_LEN 43   /* base64url of 32 bytes, no padding */
#define KEY_B64_VARIANT sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define ACTOR_MAX 256

#define CREATE_ATTEMPTS PGCL_KEYS_CREATE_ATTEMPTS

_Static_assert(PGCL_KEY_ID_LEN == KEY_PREFIX_LEN + KEY_HEX_LEN, "key_id layout");
_Static_assert(PGCL_KEY_LEN == PGCL_KEY_ID_LEN + 1 + KEY_SECRET_LEN, "key layout");
_Static_assert(PGCL_KEY_LEN < 128 && PGCL_KEY_ID_LEN < 32, "output buffers of keys.h");
_Static_assert(sodium_base64_ENCODED_LEN(KEY_SECRET_BYTES, KEY_B64_VARIANT) == KEY_SECRET_LEN + 1, "secret length");

/* ---- roles ---- */

static const struct {
    pgcl_role role;
    const char *name;
} g_roles[] = {{PGCL_ROLE_SCORER, "scorer"}, {PGCL_ROLE_REVIEWER, "reviewer"}, {PGCL_ROLE_ADMIN, "admin"}};
#define N_ROLES ((int)(sizeof g_roles / sizeof g_roles[0]))

static const char *role_name(pgcl_role role) {
    for (int i = 0; i < N_ROLES; i++)
        if (g_roles[i].role == role) return g_roles[i].name;
    return NULL;
}

const char *pgcl_role_str(pgcl_role role) {
    const char *name = role_name(role);
    return name ? name : "unknown";
}

int pgcl_role_parse(const char *text, pgcl_role *out) {
    for (int i = 0; text && i < N_ROLES; i++) {
        if (strcmp(text, g_roles[i].name) == 0) {
            *out = g_roles[i].role;
            return 0;
        }
    }
    return -1;
}

/* ---- the shape of keys and names (no secrets involved: the layout is public) ---- */

static bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static bool is_b64url(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* "pgcld_" and 8 lowercase hex digits at the start of s. */
static bool has_key_id_shape(const char *s) {
    if (strncmp(s, KEY_PREFIX, KEY_PREFIX_LEN) != 0) return false;
    for (int i = KEY_PREFIX_LEN; i < PGCL_KEY_ID_LEN; i++)
        if (!is_lower_hex(s[i])) return false;
    return true;
}

bool keys_key_id_wellformed(const char *s) {
    return s && strnlen(s, PGCL_KEY_ID_LEN + 1) == PGCL_KEY_ID_LEN && has_key_id_shape(s);
}

bool keys_token_wellformed(const char *s) {
    if (!s || strnlen(s, PGCL_KEY_LEN + 1) != PGCL_KEY_LEN || !has_key_id_shape(s) || s[PGCL_KEY_ID_LEN] != '_')
        return false;
    for (int i = PGCL_KEY_ID_LEN + 1; i < PGCL_KEY_LEN; i++)
        if (!is_b64url(s[i])) return false;
    return true;
}

/* 1..max bytes of valid UTF-8 without C0 or C1 control characters (names end up in JSON and logs). */
static bool text_valid(const char *s, size_t max) {
    size_t n = s ? strnlen(s, max + 1) : 0;
    if (n < 1 || n > max) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return false;
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f) return false;
    }
    json_t *probe = json_stringn(s, n); /* NULL when not valid UTF-8 */
    if (!probe) return false;
    json_decref(probe);
    return true;
}

/* Writes a new key text and its key_id. The secret is wiped from the temporaries; the caller wipes
 * `key` when done with it. */
void pgcl_keys_generate(char key[PGCL_KEY_LEN + 1], char key_id[PGCL_KEY_ID_LEN + 1]) {
    unsigned char id[KEY_HEX_LEN / 2], secret[KEY_SECRET_BYTES];
    char hex[KEY_HEX_LEN + 1], b64[KEY_SECRET_LEN + 1];
    randombytes_buf(id, sizeof id);
    randombytes_buf(secret, sizeof secret);
    sodium_bin2hex(hex, sizeof hex, id, sizeof id);
    sodium_bin2base64(b64, sizeof b64, secret, sizeof secret, KEY_B64_VARIANT);
    memcpy(key, KEY_PREFIX, KEY_PREFIX_LEN);
    memcpy(key + KEY_PREFIX_LEN, hex, KEY_HEX_LEN);
    key[PGCL_KEY_ID_LEN] = '_';
    memcpy(key + PGCL_KEY_ID_LEN + 1, b64, KEY_SECRET_LEN);
    key[PGCL_KEY_LEN] = 0;
    memcpy(key_id, key, PGCL_KEY_ID_LEN);
    key_id[PGCL_KEY_ID_LEN] = 0;
    sodium_memzero(secret, sizeof secret);
    sodium_memzero(b64, sizeof b64);
}

/* ---- database helpers ---- */

/* Opens an existing pgcld database (never creates the file) with the busy timeout, and checks that
 * the key tables exist. On failure *out is NULL. */
pgcl_status keys_db_open(const char *path, sqlite3 **out, char *err, int cap) {
    *out = NULL;
    if (!path || !*path) {
        pgcl_errorf(err, cap, "no database path given");
        return PGCL_ERR_INVALID;
    }
    char shown[4096]; /* the file, for messages: path may be the read-only store's URI */
    pgcl_db_file_of(path, shown, sizeof shown);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    pgcl_status st = PGCL_ERR_DB;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL); /* the read-only store's URI */
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot open the database: %s", shown, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        st = PGCL_ERR_IO;
        goto done;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    rc = sqlite3_prepare_v2(db,
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                            " AND name IN ('api_keys', 'admin_events')",
                            -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "%s: %s", shown, sqlite3_errmsg(db));
        st = (rc & 0xff) == SQLITE_NOTADB ? PGCL_ERR_FORMAT : PGCL_ERR_DB;
        goto done;
    }
    if (sqlite3_column_int(s, 0) != 2) {
        pgcl_errorf(err, cap,
                    "%s has no api_keys/admin_events tables: it is not a pgcld audit database, or its schema "
                    "is older; run 'pgcld serve --db %s' once to create or upgrade it",
                    shown, shown);
        st = PGCL_ERR_FORMAT;
        goto done;
    }
    st = PGCL_OK;
done:
    sqlite3_finalize(s);
    if (st == PGCL_OK)
        *out = db;
    else
        sqlite3_close(db);
    return st;
}

/* Appends one admin_events row about a key; the caller holds the transaction. */
static pgcl_status add_key_event(sqlite3 *db, const char *actor, const char *action, const char *key_id,
                                 const char *name, const char *role, char *err, int cap) {
    char event_id[PGCL_UUID_LEN + 1], now[PGCL_TIMESTAMP_LEN + 1];
    sqlite3_stmt *s = NULL;
    pgcl_chain *chain = NULL;
    pgcl_sqlite_log *log = NULL;
    char *details = pgcl_keys_event_details(name, role);
    pgcl_status st = PGCL_ERR_NOMEM;
    if (!details) {
        pgcl_errorf(err, cap, "out of memory");
        goto done;
    }
    pgcl_uuid7(event_id);
    pgcl_timestamp_now(now);
    st = PGCL_ERR_DB;
    /* The event joins the audit chain in this same transaction (see chain.h); the head is read
     * before the row is inserted. The daemon's writer reads the head again at its next commit. */
    if (!(chain = pgcl_chain_create(db, err, cap)) || (st = pgcl_chain_begin(chain, err, cap)) != PGCL_OK) {
        if (!chain) st = PGCL_ERR_DB;
        goto done;
    }
    /* So does its leaf of the transparency log (sqlite_log.h), the log's state read the same way. */
    if (!(log = pgcl_sqlite_log_create(db, err, cap))) goto done;
    pgcl_record record;
    int64_t leaf_index = -1;
    if ((st = pgcl_sqlite_log_begin(log, now, err, cap)) != PGCL_OK ||
        (st = pgcl_record_of_admin_event(event_id, now, actor, action, key_id, details, &record, err, cap)) !=
            PGCL_OK ||
        (st = pgcl_sqlite_log_add(log, &record, &leaf_index, err, cap)) != PGCL_OK)
        goto done;
    st = PGCL_ERR_DB;
    /* A database not yet upgraded to the log (leaf_index -1) has no leaf_index column. */
    if (sqlite3_prepare_v2(db,
                           leaf_index >= 0 ? "INSERT INTO admin_events (event_id, created_at, actor, action, target,"
                                             " details, leaf_index) VALUES (?,?,?,?,?,?,?)"
                                           : "INSERT INTO admin_events (event_id, created_at, actor, action, target,"
                                             " details) VALUES (?,?,?,?,?,?)",
                           -1, &s, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "admin_events: %s", sqlite3_errmsg(db));
        goto done;
    }
    sqlite3_bind_text(s, 1, event_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, action, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, details, -1, SQLITE_STATIC);
    if (leaf_index >= 0) sqlite3_bind_int64(s, 7, leaf_index);
    if (sqlite3_step(s) != SQLITE_DONE) {
        pgcl_errorf(err, cap, "admin_events: %s", sqlite3_errmsg(db));
        goto done;
    }
    st = pgcl_chain_record(chain, "admin_events", sqlite3_last_insert_rowid(db), err, cap);
    if (st == PGCL_OK) st = pgcl_sqlite_log_seal(log, err, cap);
    if (st == PGCL_OK) st = pgcl_chain_seal(chain, err, cap);
done:
    pgcl_sqlite_log_destroy(log); /* before COMMIT: its policy memory (log.h) has nothing to keep */
    pgcl_chain_destroy(chain);
    sqlite3_finalize(s);
    free(details);
    return st;
}

/* Appends the key's admin_events row (add_key_event) and commits the caller's transaction: PGCL_OK,
 * or an error with err set (the transaction is then still open, for the caller to roll back). */
static pgcl_status record_and_commit(sqlite3 *db, const char *db_path, const char *actor, const char *action,
                                     const char *key_id, const char *name, const char *role, char *err, int cap) {
    pgcl_status st = add_key_event(db, actor, action, key_id, name, role, err, cap);
    if (st != PGCL_OK) return st;
    char sub[ERR_CAP];
    if (pgcl_db_exec(db, "COMMIT", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: commit: %s", db_path, sub);
        return PGCL_ERR_DB;
    }
    return PGCL_OK;
}

/* The role's name in *zrole after checking role, name and actor as create() and import() require. */
pgcl_status pgcl_keys_check_fields(pgcl_role role, const char *name, const char *actor, const char **zrole, char *err,
                                   int cap) {
    if (!(*zrole = role_name(role))) {
        pgcl_errorf(err, cap, "role must be scorer, reviewer or admin");
        return PGCL_ERR_INVALID;
    }
    if (!text_valid(name, PGCL_KEY_NAME_MAX)) {
        pgcl_errorf(err, cap, "name must be 1 to %d bytes of UTF-8 without control characters", PGCL_KEY_NAME_MAX);
        return PGCL_ERR_INVALID;
    }
    if (!text_valid(actor, ACTOR_MAX)) {
        pgcl_errorf(err, cap, "actor must be 1 to %d bytes of UTF-8 without control characters", ACTOR_MAX);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

#define INSERT_KEY_SQL \
    "INSERT INTO api_keys (key_id, name, role, key_sha256, created_at, created_by) VALUES (?,?,?,?,?,?)"

/* Steps `ins` (prepared from INSERT_KEY_SQL) for a key whose text has the hex SHA-256 `digest`;
 * returns SQLite's result code (SQLITE_DONE when the row is in). The caller holds the write
 * transaction. Only the digest is stored. A fast hash is enough here, no slow KDF such as Argon2:
 * the text carries 256 random bits, so nothing can be guessed from the digest, and verify() has to
 * stay cheap on every request. */
static int insert_key_row(sqlite3_stmt *ins, const char digest[65], const char *key_id, const char *name,
                          const char *zrole, const char *now, const char *actor) {
    sqlite3_reset(ins);
    sqlite3_bind_text(ins, 1, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, zrole, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 4, digest, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 5, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 6, actor, -1, SQLITE_STATIC);
    int rc = sqlite3_step(ins);
    sqlite3_reset(ins); /* the caller's digest may go out of scope */
    return rc;
}

/* Opens db_path for a key change (create, import, revoke) with synchronous=FULL: a change is on
 * disk before the command reports it. */
static pgcl_status open_for_write(const char *db_path, sqlite3 **db, char *err, int cap) {
    pgcl_status st = keys_db_open(db_path, db, err, cap);
    if (st == PGCL_OK) pgcl_db_exec(*db, "PRAGMA synchronous = FULL", NULL, 0);
    return st;
}

/* BEGIN IMMEDIATE on db (at db_path): true, or false with err set. */
static bool begin_write(sqlite3 *db, const char *db_path, char *err, int cap) {
    char sub[ERR_CAP];
    if (pgcl_db_exec(db, "BEGIN IMMEDIATE", sub, sizeof sub) == SQLITE_OK) return true;
    pgcl_errorf(err, cap, "%s: cannot start a write transaction: %s", db_path, sub);
    return false;
}

pgcl_status pgcl_keys_check_revoke(const char *key_id, const char *actor, char *err, int cap) {
    /* The argument is not echoed: a full key pasted here by mistake must not reach a terminal log. */
    if (!keys_key_id_wellformed(key_id)) {
        pgcl_errorf(err, cap, "not a key_id: expected pgcld_ and 8 lowercase hex digits (the first %d characters "
                    "of the key)", PGCL_KEY_ID_LEN);
        return PGCL_ERR_INVALID;
    }
    if (!text_valid(actor, ACTOR_MAX)) {
        pgcl_errorf(err, cap, "actor must be 1 to %d bytes of UTF-8 without control characters", ACTOR_MAX);
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_keys_check_existing(const char *db_name, const char *key_id, const char *zrole, const char *digest,
                                     const char *have_role, const char *have_digest, const char *revoked_at,
                                     const char *revoked_by, char *err, int cap) {
    bool same_key = have_digest && strlen(have_digest) == 64 && sodium_memcmp(have_digest, digest, 64) == 0;
    if (!same_key) {
        pgcl_errorf(err, cap, "%s already holds another key with key_id %s (a different secret): nothing was "
                    "changed; make a new key for one of the two holders", db_name, key_id);
        return PGCL_ERR_MISMATCH;
    }
    if (!have_role || strcmp(have_role, zrole) != 0) {
        pgcl_errorf(err, cap, "key %s is already in %s with role %s, not %s: nothing was changed; a key keeps "
                    "its role (revoke it and make a new key)", key_id, db_name, have_role ? have_role : "?", zrole);
        return PGCL_ERR_MISMATCH;
    }
    if (revoked_at) {
        pgcl_errorf(err, cap, "key %s was revoked at %s by %s and cannot be imported again: make a new key", key_id,
                    revoked_at, revoked_by ? revoked_by : "?");
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

pgcl_status pgcl_keys_check_revocable(const char *db_name, const char *key_id, bool found, const char *revoked_at,
                                      const char *revoked_by, char *err, int cap) {
    if (!found) {
        pgcl_errorf(err, cap, "no key with key_id %s in %s", key_id, db_name);
        return PGCL_ERR_INVALID;
    }
    if (revoked_at) {
        pgcl_errorf(err, cap, "key %s was already revoked at %s by %s", key_id, revoked_at,
                    revoked_by ? revoked_by : "?");
        return PGCL_ERR_INVALID;
    }
    return PGCL_OK;
}

char *pgcl_keys_event_details(const char *name, const char *role) {
    json_t *obj = json_pack("{s:s, s:s}", "name", name, "role", role);
    char *details = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return details;
}

/* ---- management ---- */

pgcl_status pgcl_keys_create(const char *db_path, pgcl_role role, const char *name, const char *actor,
                             char key_out[128], char key_id_out[32], char *err, int cap) {
    char key[PGCL_KEY_LEN + 1] = "", key_id[PGCL_KEY_ID_LEN + 1] = "", digest[65], now[PGCL_TIMESTAMP_LEN + 1];
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    bool in_tx = false;
    const char *zrole;
    pgcl_status st;
    key_out[0] = 0;
    key_id_out[0] = 0;
    if ((st = pgcl_keys_check_fields(role, name, actor, &zrole, err, cap)) != PGCL_OK) return st;
    if ((st = open_for_write(db_path, &db, err, cap)) != PGCL_OK) return st;
    st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(db, INSERT_KEY_SQL, -1, &ins, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    if (!begin_write(db, db_path, err, cap)) goto done;
    in_tx = true;
    pgcl_timestamp_now(now);
    bool inserted = false;
    for (int attempt = 0; attempt < CREATE_ATTEMPTS && !inserted; attempt++) {
        pgcl_keys_generate(key, key_id);
        pgcl_sha256_hex(key, PGCL_KEY_LEN, digest);
        if (insert_key_row(ins, digest, key_id, name, zrole, now, actor) == SQLITE_DONE)
            inserted = true;
        else if (sqlite3_extended_errcode(db) != SQLITE_CONSTRAINT_PRIMARYKEY) {
            pgcl_errorf(err, cap, "%s: api_keys: %s", db_path, sqlite3_errmsg(db));
            goto done;
        }
    }
    if (!inserted) {
        pgcl_errorf(err, cap, "%s: %d random key_ids in a row were taken", db_path, CREATE_ATTEMPTS);
        goto done;
    }
    if ((st = record_and_commit(db, db_path, actor, "key.create", key_id, name, zrole, err, cap)) != PGCL_OK) goto done;
    in_tx = false;
    memcpy(key_out, key, sizeof key);
    memcpy(key_id_out, key_id, sizeof key_id);
    st = PGCL_OK;
done:
    if (in_tx) pgcl_db_exec(db, "ROLLBACK", NULL, 0);
    sqlite3_finalize(ins);
    sqlite3_close(db);
    sodium_memzero(key, sizeof key);
    sodium_memzero(digest, sizeof digest);
    return st;
}

pgcl_status pgcl_keys_check_text(const char *text, size_t len, char *err, int cap) {
    /* Messages name positions and rules, never the characters: the text is a secret. */
    static const char layout[] = "pgcld_, 8 lowercase hex digits, '_' and 43 base64url characters";
    if (!text || len != PGCL_KEY_LEN) {
        pgcl_errorf(err, cap, "not a pgcld key: a key is %d characters (%s), this text has %zu", PGCL_KEY_LEN, layout,
                    text ? len : 0);
        return PGCL_ERR_FORMAT;
    }
    if (memchr(text, 0, len)) {
        pgcl_errorf(err, cap, "not a pgcld key: it holds a NUL byte (%s)", layout);
        return PGCL_ERR_FORMAT;
    }
    if (strncmp(text, KEY_PREFIX, KEY_PREFIX_LEN) != 0) {
        pgcl_errorf(err, cap, "not a pgcld key: a key starts with %s (%s)", KEY_PREFIX, layout);
        return PGCL_ERR_FORMAT;
    }
    for (int i = KEY_PREFIX_LEN; i < PGCL_KEY_ID_LEN; i++) {
        if (!is_lower_hex(text[i])) {
            pgcl_errorf(err, cap, "not a pgcld key: characters %d to %d must be lowercase hex digits, character %d "
                        "is not", KEY_PREFIX_LEN + 1, PGCL_KEY_ID_LEN, i + 1);
            return PGCL_ERR_FORMAT;
        }
    }
    if (text[PGCL_KEY_ID_LEN] != '_') {
        pgcl_errorf(err, cap, "not a pgcld key: character %d must be '_' (%s)", PGCL_KEY_ID_LEN + 1, layout);
        return PGCL_ERR_FORMAT;
    }
    for (int i = PGCL_KEY_ID_LEN + 1; i < PGCL_KEY_LEN; i++) {
        if (!is_b64url(text[i])) {
            pgcl_errorf(err, cap, "not a pgcld key: characters %d to %d must be base64url (A-Z a-z 0-9 - _), "
                        "character %d is not", PGCL_KEY_ID_LEN + 2, PGCL_KEY_LEN, i + 1);
            return PGCL_ERR_FORMAT;
        }
    }
    /* 43 characters carry 258 bits: the secret is 32 bytes only if the last 2 bits are zero, which
     * libsodium checks (a key pgcld made always passes; a hand-edited one may not). */
    unsigned char secret[KEY_SECRET_BYTES];
    size_t n = 0;
    int rc = sodium_base642bin(secret, sizeof secret, text + PGCL_KEY_ID_LEN + 1, KEY_SECRET_LEN, NULL, &n, NULL,
                               KEY_B64_VARIANT);
    sodium_memzero(secret, sizeof secret);
    if (rc != 0 || n != KEY_SECRET_BYTES) {
        pgcl_errorf(err, cap, "not a pgcld key: its last %d characters are not the base64url of %d bytes (the last "
                    "character is not one a key can end with)", KEY_SECRET_LEN, KEY_SECRET_BYTES);
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

pgcl_status pgcl_keys_import(const char *db_path, pgcl_role role, const char *name, const char *actor, const char *key,
                             char key_id_out[32], bool *created, char *err, int cap) {
    char key_id[PGCL_KEY_ID_LEN + 1], digest[65], now[PGCL_TIMESTAMP_LEN + 1];
    sqlite3 *db = NULL;
    sqlite3_stmt *get = NULL, *ins = NULL;
    bool in_tx = false;
    const char *zrole;
    pgcl_status st;
    key_id_out[0] = 0;
    *created = false;
    if ((st = pgcl_keys_check_fields(role, name, actor, &zrole, err, cap)) != PGCL_OK) return st;
    if ((st = pgcl_keys_check_text(key, key ? strnlen(key, PGCL_KEY_LEN + 1) : 0, err, cap)) != PGCL_OK) return st;
    memcpy(key_id, key, PGCL_KEY_ID_LEN);
    key_id[PGCL_KEY_ID_LEN] = 0;
    pgcl_sha256_hex(key, PGCL_KEY_LEN, digest);
    if ((st = open_for_write(db_path, &db, err, cap)) != PGCL_OK) return st;
    st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(db, "SELECT role, key_sha256, revoked_at, revoked_by FROM api_keys WHERE key_id = ?", -1,
                           &get, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, INSERT_KEY_SQL, -1, &ins, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    if (!begin_write(db, db_path, err, cap)) goto done;
    in_tx = true;
    sqlite3_bind_text(get, 1, key_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(get);
    if (rc == SQLITE_ROW) {
        st = pgcl_keys_check_existing(db_path, key_id, zrole, digest, (const char *)sqlite3_column_text(get, 0),
                                      (const char *)sqlite3_column_text(get, 1),
                                      (const char *)sqlite3_column_text(get, 2),
                                      (const char *)sqlite3_column_text(get, 3), err, cap);
        if (st == PGCL_OK) memcpy(key_id_out, key_id, sizeof key_id); /* already there, as asked: nothing to write */
        goto done;
    }
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: api_keys: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    pgcl_timestamp_now(now);
    if (insert_key_row(ins, digest, key_id, name, zrole, now, actor) != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: api_keys: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    if ((st = record_and_commit(db, db_path, actor, "key.import", key_id, name, zrole, err, cap)) != PGCL_OK) goto done;
    in_tx = false;
    memcpy(key_id_out, key_id, sizeof key_id);
    *created = true;
    st = PGCL_OK;
done:
    if (in_tx) pgcl_db_exec(db, "ROLLBACK", NULL, 0);
    sqlite3_finalize(get);
    sqlite3_finalize(ins);
    sqlite3_close(db);
    sodium_memzero(digest, sizeof digest);
    return st;
}

pgcl_status pgcl_keys_revoke(const char *db_path, const char *key_id, const char *actor, char *err, int cap) {
    char now[PGCL_TIMESTAMP_LEN + 1], name[PGCL_KEY_NAME_MAX + 1], role[16];
    sqlite3 *db = NULL;
    sqlite3_stmt *get = NULL, *upd = NULL;
    bool in_tx = false;
    pgcl_status st;
    if ((st = pgcl_keys_check_revoke(key_id, actor, err, cap)) != PGCL_OK) return st;
    if ((st = open_for_write(db_path, &db, err, cap)) != PGCL_OK) return st;
    st = PGCL_ERR_DB;
    if (sqlite3_prepare_v2(db, "SELECT name, role, revoked_at, revoked_by FROM api_keys WHERE key_id = ?", -1, &get,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "UPDATE api_keys SET revoked_at = ?, revoked_by = ? WHERE key_id = ? AND revoked_at IS NULL",
                           -1, &upd, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    if (!begin_write(db, db_path, err, cap)) goto done;
    in_tx = true;
    sqlite3_bind_text(get, 1, key_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(get);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: api_keys: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    bool found = rc == SQLITE_ROW;
    if ((st = pgcl_keys_check_revocable(db_path, key_id, found,
                                        found ? (const char *)sqlite3_column_text(get, 2) : NULL,
                                        found ? (const char *)sqlite3_column_text(get, 3) : NULL, err, cap)) !=
        PGCL_OK)
        goto done;
    st = PGCL_ERR_DB;
    snprintf(name, sizeof name, "%s", (const char *)sqlite3_column_text(get, 0));
    snprintf(role, sizeof role, "%s", (const char *)sqlite3_column_text(get, 1));
    pgcl_timestamp_now(now);
    sqlite3_bind_text(upd, 1, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(upd, 2, actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(upd, 3, key_id, -1, SQLITE_STATIC);
    if (sqlite3_step(upd) != SQLITE_DONE || sqlite3_changes(db) != 1) {
        pgcl_errorf(err, cap, "%s: revoking %s: %s", db_path, key_id, sqlite3_errmsg(db));
        goto done;
    }
    if ((st = record_and_commit(db, db_path, actor, "key.revoke", key_id, name, role, err, cap)) != PGCL_OK) goto done;
    in_tx = false;
    st = PGCL_OK;
done:
    if (in_tx) pgcl_db_exec(db, "ROLLBACK", NULL, 0);
    sqlite3_finalize(get);
    sqlite3_finalize(upd);
    sqlite3_close(db);
    return st;
}

typedef struct key_walk {
    const char *db_path;
    pgcl_key_fn on_key;
    void *ctx;
} key_walk;

static int take_key(sqlite3_stmt *s, void *ctx, char *err, int cap) {
    const key_walk *w = ctx;
    const char *col[7];
    for (int i = 0; i < 7; i++) col[i] = (const char *)sqlite3_column_text(s, i);
    pgcl_key_info key = {col[0], col[1], col[2], col[3], col[4], col[5], col[6]};
    if (w->on_key(&key, w->ctx)) return SQLITE_OK;
    pgcl_errorf(err, cap, "%s: key %s: a column is not valid UTF-8 (or out of memory)", w->db_path,
                col[0] && keys_key_id_wellformed(col[0]) ? col[0] : "?");
    return SQLITE_ABORT;
}

pgcl_status pgcl_keys_list(const char *db_path, pgcl_key_fn on_key, void *ctx, char *err, int cap) {
    sqlite3 *db = NULL;
    pgcl_status st;
    if ((st = keys_db_open(db_path, &db, err, cap)) != PGCL_OK) return st;
    key_walk walk = {db_path, on_key, ctx};
    char sub[512];
    int rc = pgcl_db_each_row(db,
                              "SELECT key_id, name, role, created_at, created_by, revoked_at, revoked_by"
                              " FROM api_keys ORDER BY created_at, key_id",
                              NULL, take_key, &walk, sub, sizeof sub);
    if (rc == SQLITE_ABORT) {
        pgcl_errorf(err, cap, "%s", sub);
        st = PGCL_ERR_FORMAT;
    } else if (rc != SQLITE_OK) {
        /* sub is "prepare: <message>" or "step: <message>" (pgcl_db_each_row) */
        bool stepping = strncmp(sub, "step: ", 6) == 0;
        const char *message = strchr(sub, ':') ? strchr(sub, ':') + 2 : sub;
        pgcl_errorf(err, cap, "%s: %s%s", db_path, stepping ? "api_keys: " : "", message);
        st = PGCL_ERR_DB;
    }
    sqlite3_close(db);
    return st;
}
