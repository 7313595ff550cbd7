/* API keys and roles. A key is the text pgcld_<8 lowercase hex>_<43 base64url characters>: its first
 * 14 characters, "pgcld_<8 hex>", are the visible key_id; the rest carries 256 random bits. The
 * database (table api_keys, from migration 0002) keeps only the hex SHA-256 of the whole text, and
 * every create, import or revoke also appends an admin_events row in the same transaction.
 *
 * The management calls (create, import, revoke, list) each open their own short-lived connection and are
 * meant for the CLI and admin routes. The keyring is the daemon's in-memory copy of the active keys,
 * used on every request: verify() costs one SHA-256, a clock read and a lookup, and notices changes
 * made by any process (the CLI included) within about a second.
 *
 * None of these functions create the schema: the database must already hold the api_keys and
 * admin_events tables (pgcld serve --db FILE creates them at start). All of them need sodium_init().
 * Never log a key text; key_id is safe to log. */
#ifndef PGCL_KEYS_H
#define PGCL_KEYS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Bit values, so that a route can allow a set of roles: (PGCL_ROLE_REVIEWER | PGCL_ROLE_ADMIN). */
typedef enum pgcl_role { PGCL_ROLE_SCORER = 1, PGCL_ROLE_REVIEWER = 2, PGCL_ROLE_ADMIN = 4 } pgcl_role;

#define PGCL_KEY_LEN 58    /* strlen of a key text: 6 + 8 + 1 + 43 */
#define PGCL_KEY_ID_LEN 14 /* strlen of a key_id: "pgcld_" + 8 hex */
#define PGCL_KEY_NAME_MAX 128

/* Who presented a valid key. */
typedef struct pgcl_identity {
    char key_id[32];
    char name[PGCL_KEY_NAME_MAX + 1];
    pgcl_role role;
} pgcl_identity;

/* "scorer", "reviewer" or "admin"; "unknown" for any other value (never NULL). */
const char *pgcl_role_str(pgcl_role role);

/* Parses exactly "scorer", "reviewer" or "admin" into *out. Returns 0, or -1 (and leaves *out). */
int pgcl_role_parse(const char *text, pgcl_role *out);

/* ---- management: one connection per call ---- */

/* Creates a key for `name` (1..128 bytes of valid UTF-8 without control characters) with one role,
 * recorded as created by `actor` (e.g. "cli:alice"). In one transaction it inserts the api_keys row
 * and an admin_events row (action key.create, target the key_id, details {"name","role"}).
 * On PGCL_OK key_out holds the key text (shown to the holder once; it cannot be recovered) and
 * key_id_out its key_id (both empty strings on error). Errors: PGCL_ERR_INVALID (bad role, name,
 * actor or empty path), PGCL_ERR_IO (the file cannot be opened; it is never created),
 * PGCL_ERR_FORMAT (no api_keys/admin_events table, or not a database), PGCL_ERR_DB (SQLite failed;
 * nothing was written). The reason is in err. Not for the request path: it fsyncs. */
pgcl_status pgcl_keys_create(const char *db_path, pgcl_role role, const char *name, const char *actor,
                             char key_out[128], char key_id_out[32], char *err, int cap);

/* Checks that the len bytes at text are exactly one key text: "pgcld_", 8 lowercase hex digits, "_",
 * then 43 base64url characters that decode to 32 bytes (the last character canonical), nothing
 * before or after, no NUL. PGCL_OK, or PGCL_ERR_FORMAT with err saying which rule failed and where;
 * err never quotes the text. Needs sodium_init(). */
pgcl_status pgcl_keys_check_text(const char *text, size_t len, char *err, int cap);

/* Registers a key made elsewhere (by `pgcld keys create` on another database, or a generator that
 * follows the key format), so that one key can be valid on several databases. `key` is the whole
 * NUL-terminated key text; it is checked as pgcl_keys_check_text() does and only its SHA-256 is
 * stored, exactly as create() stores it, with an admin_events row (action key.import, target the
 * key_id, details {"name","role"}) chained in the same transaction. Idempotent:
 *   - key_id absent: inserted; *created = true.
 *   - the same key (same digest) with the same role, not revoked: nothing is written (the stored
 *     name is kept); *created = false, PGCL_OK.
 *   - key_id present with another digest, or with another role: PGCL_ERR_MISMATCH, nothing written.
 *   - the same key, revoked: PGCL_ERR_INVALID (a revoked key never comes back), nothing written.
 * On PGCL_OK key_id_out holds the key_id, else "". Other errors as for create, PGCL_ERR_FORMAT also
 * for a malformed key. The key text is never copied into err, the database or a log. */
pgcl_status pgcl_keys_import(const char *db_path, pgcl_role role, const char *name, const char *actor, const char *key,
                             char key_id_out[32], bool *created, char *err, int cap);

/* Marks key_id revoked (revoked_at = now, revoked_by = actor) and appends an admin_events row
 * (action key.revoke, details {"name","role"}) in one transaction. A revoked key stays listed and
 * its key_id is never reused. PGCL_ERR_INVALID: malformed, unknown or already revoked key_id; other
 * errors as for create. */
pgcl_status pgcl_keys_revoke(const char *db_path, const char *key_id, const char *actor, char *err, int cap);

/* One listed key; every pointer is valid for the callback only. revoked_at and revoked_by are NULL
 * for a key that is not revoked. The digest is never listed. */
typedef struct pgcl_key_info {
    const char *key_id, *name, *role, *created_at, *created_by, *revoked_at, *revoked_by;
} pgcl_key_info;

/* Takes one key. Returns false when it cannot (a column that is not valid UTF-8 for its output,
 * out of memory): the listing stops with PGCL_ERR_FORMAT. */
typedef bool (*pgcl_key_fn)(const pgcl_key_info *key, void *ctx);

/* Calls on_key for every key, oldest first. Errors as for create, and PGCL_ERR_FORMAT when on_key
 * refused a key (err names it). */
pgcl_status pgcl_keys_list(const char *db_path, pgcl_key_fn on_key, void *ctx, char *err, int cap);

/* ---- the daemon's keyring ---- */

typedef struct pgcl_keyring pgcl_keyring;

/* Opens a read connection to db_path and loads the active (unrevoked) keys. On failure *out is NULL
 * and err says why (PGCL_ERR_IO, PGCL_ERR_FORMAT, PGCL_ERR_DB or PGCL_ERR_NOMEM). */
pgcl_status pgcl_keyring_open(const char *db_path, pgcl_keyring **out, char *err, int cap);

/* Closes the connection and frees the keyring. Accepts NULL. No other call may be running. */
void pgcl_keyring_close(pgcl_keyring *kr);

/* Re-reads the active keys now, whether or not the table changed. On failure the previous set stays
 * in force and err says why. Thread-safe. */
pgcl_status pgcl_keyring_reload(pgcl_keyring *kr, char *err, int cap);

/* Number of active keys after the same rate-limited change check that verify() makes. Thread-safe. */
int pgcl_keyring_count_active(pgcl_keyring *kr);

/* Checks a presented key text. PGCL_OK and *out filled for a known, unrevoked key; PGCL_ERR_INVALID
 * (and *out zeroed) for anything else: NULL, malformed (rejected before any lookup), unknown key_id,
 * wrong secret, revoked. The digest is compared in constant time. Thread-safe; allocates nothing
 * unless it reloads.
 *
 * Freshness: at most once a second (per keyring) verify() reads PRAGMA data_version on the keyring's
 * connection and re-reads the table when any connection, in this process or another, has committed
 * to the database since; so a key created or revoked elsewhere takes effect here within about a
 * second of the next request, without a restart. If that re-read fails the previous set stays in
 * force, a warning is logged and the next check (a second later) tries again. (A keyring over
 * another source, pgcl_keyring_open_source, checks at its source's pace: the PostgreSQL store's
 * every 250 ms, on the keyring's own thread (pgcl_keyring_source.background), so that verify()
 * then only reads memory and waits at most forced_wait_us, for an unknown key_id; its warnings are
 * at most one a second.) */
pgcl_status pgcl_keyring_verify(pgcl_keyring *kr, const char *token, pgcl_identity *out);

/* ---- keyring sources: where a keyring's keys come from ----
 * pgcl_keyring_open reads a SQLite file (PRAGMA data_version as its change marker, checked at most
 * once a second); another store (core/audit/pg/) gives its own source. The keyring calls the
 * source under its lock only, one call at a time. */

/* Takes one active (unrevoked) key row; false only when out of memory (the load then fails). A
 * malformed row is skipped by the keyring, with a warning. */
typedef bool (*pgcl_keyring_row_fn)(void *sink, const char *key_id, const char *name, const char *role,
                                    const char *sha256_hex);

typedef struct pgcl_keyring_source {
    const char *name;      /* the database, for log lines (no password); valid until destroy */
    int64_t recheck_us;    /* verify() asks changed() at most this often (> 0) */
    int64_t min_forced_us; /* and at most this often when an unknown key_id forces a check (0: always) */
    void *ctx;
    /* *changed: whether the keys may differ from the last successful load. An error keeps the
     * current set (logged; retried at the next check). */
    pgcl_status (*changed)(void *ctx, bool *changed, char *err, int cap);
    /* Calls add(sink, ...) for every active key. The source must note its change marker before
     * reading the rows, and keep it only when it returns PGCL_OK, so that no change is missed. */
    pgcl_status (*load)(void *ctx, pgcl_keyring_row_fn add, void *sink, char *err, int cap);
    void (*destroy)(void *ctx); /* frees ctx */
    /* false: verify() calls changed() and load() itself, under the keyring's lock (a local file:
     * cheap). true (a source over the network): a thread of the keyring's own calls them, every
     * recheck_us and at once when verify() meets an unknown key_id, and verify() only reads memory:
     * for an unknown key_id it waits for that check at most forced_wait_us (> 0), so a source that
     * hangs (a network silently dropped) never holds a request longer than that. */
    bool background;
    int64_t forced_wait_us;
} pgcl_keyring_source;

/* Makes a keyring over src and loads the keys. Takes src->ctx in every case: on failure it has
 * been destroyed, and *out is NULL. */
pgcl_status pgcl_keyring_open_source(const pgcl_keyring_source *src, pgcl_keyring **out, char *err, int cap);

/* ---- for the audit stores: what every store's key change shares with this file's ---- */

/* The checks of create and import on role, name and actor; *zrole the role's name. PGCL_OK or
 * PGCL_ERR_INVALID with err. */
pgcl_status pgcl_keys_check_fields(pgcl_role role, const char *name, const char *actor, const char **zrole, char *err,
                                   int cap);
/* The checks of revoke on key_id (never echoed) and actor. PGCL_OK or PGCL_ERR_INVALID with err. */
pgcl_status pgcl_keys_check_revoke(const char *key_id, const char *actor, char *err, int cap);
/* Import's rules on the row that already holds key_id in the database `db_name` (its role,
 * key_sha256, revoked_at and revoked_by; digest the imported key's hex SHA-256, zrole its role):
 * PGCL_OK when it is that key, with that role, unrevoked (nothing to write); PGCL_ERR_MISMATCH or
 * PGCL_ERR_INVALID with err otherwise. */
pgcl_status pgcl_keys_check_existing(const char *db_name, const char *key_id, const char *zrole, const char *digest,
                                     const char *have_role, const char *have_digest, const char *revoked_at,
                                     const char *revoked_by, char *err, int cap);
/* Revoke's rules on key_id's row in `db_name`: found whether there is one, then its revoked_at and
 * revoked_by. PGCL_OK, or PGCL_ERR_INVALID with err. */
pgcl_status pgcl_keys_check_revocable(const char *db_name, const char *key_id, bool found, const char *revoked_at,
                                      const char *revoked_by, char *err, int cap);
/* A new key text and its key_id (the caller wipes key with sodium_memzero). */
void pgcl_keys_generate(char key[PGCL_KEY_LEN + 1], char key_id[PGCL_KEY_ID_LEN + 1]);
/* The details of a key's admin_events row, {"name":..,"role":..} compact, malloc'd; NULL when out
 * of memory. */
char *pgcl_keys_event_details(const char *name, const char *role);
/* Attempts at a fresh key_id when one is taken (the chance of a clash is n / 2^32 each). */
#define PGCL_KEYS_CREATE_ATTEMPTS 8

#endif
