/* API keys and roles: role names, the key text format, create/verify for each role, import of a key
 * made elsewhere (strict format, same digest, chained event, idempotent, conflicts), every kind of
 * refused token, revocation seen by the keyring after reload() and, without it, after the one-second
 * data_version check, admin_events rows for every change, a listing without digests, a database
 * file that holds no key text, distinct keys, the refusals of bad input and of a database without
 * the schema, and verify() racing reload() on several threads. */
#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <unistd.h>

#include "audit.h"
#include "chain.h"
#include "ids.h"
#include "keys.h"
#include "test_sqlite.h"
#include "test_util.h"

#define ACTOR "test:alice"
#define MAX_KEYS 128

static char g_dir[] = "/tmp/pgcl-keys-XXXXXX";
static char g_keys[MAX_KEYS][128]; /* every key text created, to look for in the database file */
static int g_n_keys;
static int g_extra_revoked; /* keys made and revoked by the rate-limit case (one per attempt) */

/* Runs the printf-formatted query and returns its first integer (-1 on error). */
__attribute__((format(printf, 2, 3))) static long long query_intf(const char *path, const char *fmt, ...) {
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return query_int(path, sql);
}

static void make_schema(const char *path) {
    pgcl_audit_options o = {.path = path, .synchronous_full = true, .busy_timeout_ms = 5000, .max_pending_rows = 10};
    pgcl_audit *a = NULL;
    char err[512] = "";
    CHECK(pgcl_audit_open(&o, &a, err, sizeof err) == PGCL_OK, "audit open: %s", err);
    pgcl_audit_close(a);
}

/* Creates a key, remembers its text, checks the format. Returns the status. */
static pgcl_status create(const char *path, pgcl_role role, const char *name, char key[128], char key_id[32]) {
    char err[512] = "";
    pgcl_status st = pgcl_keys_create(path, role, name, ACTOR, key, key_id, err, sizeof err);
    CHECK(st == PGCL_OK, "create %s: %s", name, err);
    if (st != PGCL_OK) return st;
    if (g_n_keys < MAX_KEYS) memcpy(g_keys[g_n_keys++], key, 128);
    bool ok = strlen(key) == PGCL_KEY_LEN && strncmp(key, "pgcld_", 6) == 0 && key[PGCL_KEY_ID_LEN] == '_' &&
              strlen(key_id) == PGCL_KEY_ID_LEN && strncmp(key, key_id, PGCL_KEY_ID_LEN) == 0;
    for (int i = 6; i < PGCL_KEY_ID_LEN; i++) ok = ok && strchr("0123456789abcdef", key[i]);
    for (int i = PGCL_KEY_ID_LEN + 1; i < PGCL_KEY_LEN; i++)
        ok = ok && strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", key[i]);
    CHECK(ok, "key format of %s", key_id);
    return st;
}

/* pgcl_keys_list's callback for the checks below: each key as the JSON object the daemon lists. */
static bool list_key_json(const pgcl_key_info *k, void *ctx) {
    json_t *row = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?}", "key_id", k->key_id, "name", k->name, "role",
                            k->role, "created_at", k->created_at, "created_by", k->created_by, "revoked_at",
                            k->revoked_at, "revoked_by", k->revoked_by);
    return row && json_array_append_new(ctx, row) == 0;
}

/* The listing of db_path as a JSON array, or NULL with *st set to the failure. */
static json_t *list_keys(const char *db_path, pgcl_status *st, char *err, int cap) {
    json_t *list = json_array();
    *st = pgcl_keys_list(db_path, list_key_json, list, err, cap);
    if (*st == PGCL_OK) return list;
    json_decref(list);
    return NULL;
}

static bool verifies(pgcl_keyring *kr, const char *token) {
    pgcl_identity id;
    memset(&id, 0x5a, sizeof id);
    pgcl_status st = pgcl_keyring_verify(kr, token, &id);
    if (st != PGCL_OK) {
        static const pgcl_identity zero;
        CHECK(memcmp(&id, &zero, sizeof id) == 0, "identity zeroed on refusal");
    }
    return st == PGCL_OK;
}

static bool file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    bool found = false;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) found = memmem(buf, (size_t)n, needle, strlen(needle));
    free(buf);
    fclose(f);
    return found;
}

static void test_roles(void) {
    static const pgcl_role all[] = {PGCL_ROLE_SCORER, PGCL_ROLE_REVIEWER, PGCL_ROLE_ADMIN};
    for (int i = 0; i < 3; i++) {
        pgcl_role back = 0;
        CHECK(pgcl_role_parse(pgcl_role_str(all[i]), &back) == 0 && back == all[i], "round trip %d", all[i]);
    }
    CHECK(strcmp(pgcl_role_str(PGCL_ROLE_REVIEWER), "reviewer") == 0, "reviewer name");
    pgcl_role r = PGCL_ROLE_SCORER;
    CHECK(pgcl_role_parse("Admin", &r) == -1 && pgcl_role_parse("", &r) == -1 && pgcl_role_parse(NULL, &r) == -1 &&
              pgcl_role_parse("admin ", &r) == -1 && r == PGCL_ROLE_SCORER,
          "bad role names refused, *out untouched");
    CHECK(strcmp(pgcl_role_str(0), "unknown") == 0 && strcmp(pgcl_role_str(3), "unknown") == 0, "unknown role");
}

/* ---- import: a key made on one database registered on another ---- */

/* The secret part of a key text (what must never be echoed). */
static const char *secret_of(const char *key) { return key + PGCL_KEY_ID_LEN + 1; }

/* pgcl_keys_check_text() refuses text (len bytes) with PGCL_ERR_FORMAT, and err does not quote it. */
static void check_refused(const char *text, size_t len, const char *why, const char *err_has) {
    char err[512] = "";
    pgcl_status st = pgcl_keys_check_text(text, len, err, sizeof err);
    CHECK(st == PGCL_ERR_FORMAT, "%s: status %d", why, st);
    CHECK(*err && strstr(err, err_has), "%s: message '%s' lacks '%s'", why, err, err_has);
    if (text && len >= PGCL_KEY_LEN)
        CHECK(!memmem(err, strlen(err), text + 20, 20), "%s: message quotes the text", why);
}

/* Rows of admin_events and audit_chain together: an import that writes nothing leaves it unchanged. */
static long long n_event_rows(const char *path) {
    return query_int(path, "SELECT (SELECT count(*) FROM admin_events) * 1000000 + (SELECT count(*) FROM audit_chain)"
                           " + (SELECT count(*) FROM api_keys) * 1000");
}

static void test_import(void) {
    char a[300], b[300], err[512] = "", kid[32];
    snprintf(a, sizeof a, "%s/import-a.db", g_dir);
    snprintf(b, sizeof b, "%s/import-b.db", g_dir);
    make_schema(a);
    make_schema(b);
    char k_scorer[128], id_scorer[32], k_admin[128], id_admin[32];
    create(a, PGCL_ROLE_SCORER, "pipeline", k_scorer, id_scorer);
    create(a, PGCL_ROLE_ADMIN, "ops", k_admin, id_admin);

    /* the format, strictly */
    CHECK(pgcl_keys_check_text(k_scorer, strlen(k_scorer), err, sizeof err) == PGCL_OK, "a made key passes: %s", err);
    char t[160];
    check_refused(k_scorer, PGCL_KEY_LEN - 1, "one character short", "58 characters");
    snprintf(t, sizeof t, "%sA", k_scorer);
    check_refused(t, strlen(t), "one character too many", "58 characters");
    check_refused("", 0, "empty", "58 characters");
    check_refused(NULL, 0, "NULL", "58 characters");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[0] = 'P';
    check_refused(t, PGCL_KEY_LEN, "prefix", "starts with pgcld_");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[9] = 'G';
    check_refused(t, PGCL_KEY_LEN, "non-hex key_id", "character 10 is not");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[PGCL_KEY_ID_LEN] = '-';
    check_refused(t, PGCL_KEY_LEN, "separator", "character 15 must be '_'");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[30] = '=';
    check_refused(t, PGCL_KEY_LEN, "padding inside", "character 31 is not");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[40] = 0;
    check_refused(t, PGCL_KEY_LEN, "NUL inside", "NUL byte");
    /* 43 base64url characters carry 258 bits: a last character with either low bit set is not 32 bytes */
    snprintf(t, sizeof t, "%s", k_scorer);
    t[PGCL_KEY_LEN - 1] = 'B';
    check_refused(t, PGCL_KEY_LEN, "non-canonical last character", "32 bytes");
    t[PGCL_KEY_LEN - 1] = 'E';
    CHECK(pgcl_keys_check_text(t, PGCL_KEY_LEN, err, sizeof err) == PGCL_OK, "canonical last character: %s", err);

    /* a new key: the same digest as where it was made, valid on the keyring, recorded and chained */
    bool created = false;
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "pipeline (imported)", ACTOR, k_scorer, kid, &created, err,
                           sizeof err) == PGCL_OK && created && strcmp(kid, id_scorer) == 0,
          "import: %s", err);
    CHECK(query_intf(b, "SELECT count(*) FROM api_keys WHERE key_id = '%s' AND role = 'scorer' AND revoked_at IS NULL"
                     " AND name = 'pipeline (imported)' AND created_by = '" ACTOR "'", id_scorer) == 1,
          "imported row");
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    char digest_a[65] = "a", digest_b[65] = "b";
    char *paths[2] = {a, b}, *digests[2] = {digest_a, digest_b};
    for (int i = 0; i < 2; i++) {
        if (sqlite3_open(paths[i], &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT key_sha256 FROM api_keys WHERE key_id = ?", -1, &q, NULL) == SQLITE_OK) {
            sqlite3_bind_text(q, 1, id_scorer, -1, SQLITE_STATIC);
            if (sqlite3_step(q) == SQLITE_ROW) snprintf(digests[i], 65, "%s", (const char *)sqlite3_column_text(q, 0));
        }
        sqlite3_finalize(q);
        sqlite3_close(db);
    }
    CHECK(strcmp(digest_a, digest_b) == 0 && strlen(digest_a) == 64, "stored as create stores it");
    CHECK(query_intf(b, "SELECT count(*) FROM admin_events e JOIN audit_chain c ON c.kind = 'admin_events'"
                     " AND c.row_seq = e.seq WHERE e.action = 'key.import' AND e.target = '%s'"
                     " AND e.actor = '" ACTOR "'"
                     " AND json_extract(e.details, '$.role') = 'scorer'"
                     " AND json_extract(e.details, '$.name') = 'pipeline (imported)'", id_scorer) == 1,
          "one chained key.import event");
    pgcl_keyring *kr = NULL;
    pgcl_identity id;
    CHECK(pgcl_keyring_open(b, &kr, err, sizeof err) == PGCL_OK, "keyring: %s", err);
    CHECK(kr && pgcl_keyring_verify(kr, k_scorer, &id) == PGCL_OK && id.role == PGCL_ROLE_SCORER &&
              strcmp(id.key_id, id_scorer) == 0,
          "the imported key verifies");
    CHECK(kr && !verifies(kr, k_admin), "a key not imported does not");

    /* idempotent: the same key and role again writes nothing, whatever the name */
    long long before = n_event_rows(b);
    created = true;
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "another name", ACTOR, k_scorer, kid, &created, err, sizeof err) ==
                  PGCL_OK &&
              !created && strcmp(kid, id_scorer) == 0,
          "re-import: %s", err);
    CHECK(n_event_rows(b) == before, "re-import wrote nothing");
    CHECK(query_intf(b, "SELECT count(*) FROM api_keys WHERE name = 'pipeline (imported)'") == 1, "name kept");

    /* conflicts: another role, another secret under the same key_id, a revoked key */
    CHECK(pgcl_keys_import(b, PGCL_ROLE_ADMIN, "x", ACTOR, k_scorer, kid, &created, err, sizeof err) ==
                  PGCL_ERR_MISMATCH &&
              strstr(err, "role scorer") && !*kid && !created,
          "another role: %s", err);
    char other[160];
    snprintf(other, sizeof other, "%.*s%s", PGCL_KEY_ID_LEN + 1, k_scorer, secret_of(k_admin));
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "x", ACTOR, other, kid, &created, err, sizeof err) ==
                  PGCL_ERR_MISMATCH &&
              strstr(err, "another key") && !strstr(err, secret_of(other)),
          "same key_id, other secret: %s", err);
    CHECK(kr && !verifies(kr, other), "the conflicting key does not verify");
    CHECK(n_event_rows(b) == before, "conflicts wrote nothing");
    CHECK(pgcl_keys_import(b, PGCL_ROLE_ADMIN, "ops", ACTOR, k_admin, kid, &created, err, sizeof err) == PGCL_OK &&
              created,
          "second import: %s", err);
    CHECK(pgcl_keys_revoke(b, id_admin, ACTOR, err, sizeof err) == PGCL_OK, "revoke: %s", err);
    before = n_event_rows(b);
    CHECK(pgcl_keys_import(b, PGCL_ROLE_ADMIN, "ops", ACTOR, k_admin, kid, &created, err, sizeof err) ==
                  PGCL_ERR_INVALID &&
              strstr(err, "revoked") && !created,
          "a revoked key does not come back: %s", err);
    CHECK(query_intf(b, "SELECT count(*) FROM api_keys WHERE key_id = '%s' AND revoked_at IS NOT NULL", id_admin) == 1,
          "still revoked");

    /* refusals before anything is written */
    snprintf(t, sizeof t, "%s", k_scorer);
    t[PGCL_KEY_LEN - 1] = 'B';
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "x", ACTOR, t, kid, &created, err, sizeof err) == PGCL_ERR_FORMAT,
          "malformed key");
    snprintf(t, sizeof t, "%s\n", k_scorer);
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "x", ACTOR, t, kid, &created, err, sizeof err) == PGCL_ERR_FORMAT,
          "a newline is the caller's to strip");
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "x", ACTOR, NULL, kid, &created, err, sizeof err) == PGCL_ERR_FORMAT,
          "NULL key");
    CHECK(pgcl_keys_import(b, 0, "x", ACTOR, k_scorer, kid, &created, err, sizeof err) == PGCL_ERR_INVALID, "role 0");
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "a\nb", ACTOR, k_scorer, kid, &created, err, sizeof err) ==
              PGCL_ERR_INVALID,
          "control character in name");
    CHECK(pgcl_keys_import(b, PGCL_ROLE_SCORER, "x", "", k_scorer, kid, &created, err, sizeof err) == PGCL_ERR_INVALID,
          "empty actor");
    CHECK(n_event_rows(b) == before, "refusals wrote nothing");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/import-missing.db", g_dir);
    CHECK(pgcl_keys_import(missing, PGCL_ROLE_SCORER, "x", ACTOR, k_scorer, kid, &created, err, sizeof err) ==
                  PGCL_ERR_IO &&
              access(missing, F_OK) != 0,
          "missing database not created: %s", err);

    /* the chain of b is intact, and b's files hold no key text */
    pgcl_chain_report rep;
    CHECK(pgcl_chain_verify(b, NULL, 0, &rep, err, sizeof err) == PGCL_OK && rep.intact, "chain of b: %s %s", err,
          rep.reason);
    pgcl_keyring_close(kr);
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", b);
    CHECK(!file_contains(b, secret_of(k_scorer)) && !file_contains(wal, secret_of(k_scorer)) &&
              !file_contains(b, secret_of(k_admin)) && !file_contains(wal, secret_of(k_admin)),
          "no key text in the database files");
}

/* ---- verify() racing reload() ---- */

typedef struct race_arg {
    pgcl_keyring *kr;
    const char *good, *bad;
    int wrong;
} race_arg;

static void *verifier(void *p) {
    race_arg *t = p;
    for (int i = 0; i < 3000; i++) {
        pgcl_identity id;
        if (pgcl_keyring_verify(t->kr, t->good, &id) != PGCL_OK || strcmp(id.key_id, "") == 0) t->wrong++;
        if (pgcl_keyring_verify(t->kr, t->bad, &id) != PGCL_ERR_INVALID) t->wrong++;
    }
    return NULL;
}

int main(void) {
    if (sodium_init() < 0 || !mkdtemp(g_dir)) return 1;
    test_roles();
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/audit.db", g_dir);
    make_schema(path);

    /* one key of each role, each verified with its identity */
    char k_scorer[128], k_reviewer[128], k_admin[128], id_scorer[32], id_reviewer[32], id_admin[32];
    create(path, PGCL_ROLE_SCORER, "ingest pipeline", k_scorer, id_scorer);
    create(path, PGCL_ROLE_REVIEWER, "Zoë (trust & safety)", k_reviewer, id_reviewer);
    create(path, PGCL_ROLE_ADMIN, "ops", k_admin, id_admin);
    pgcl_keyring *kr = NULL;
    CHECK(pgcl_keyring_open(path, &kr, err, sizeof err) == PGCL_OK, "keyring open: %s", err);
    if (!kr) return test_finish("test_keys");
    CHECK(pgcl_keyring_count_active(kr) == 3, "3 active keys");
    pgcl_identity id;
    CHECK(pgcl_keyring_verify(kr, k_scorer, &id) == PGCL_OK && strcmp(id.key_id, id_scorer) == 0 &&
              strcmp(id.name, "ingest pipeline") == 0 && id.role == PGCL_ROLE_SCORER,
          "scorer verifies");
    CHECK(pgcl_keyring_verify(kr, k_reviewer, &id) == PGCL_OK && strcmp(id.name, "Zoë (trust & safety)") == 0 &&
              id.role == PGCL_ROLE_REVIEWER,
          "reviewer verifies");
    CHECK(pgcl_keyring_verify(kr, k_admin, &id) == PGCL_OK && id.role == PGCL_ROLE_ADMIN, "admin verifies");
    CHECK(pgcl_keyring_verify(kr, k_admin, NULL) == PGCL_OK, "identity is optional");

    /* refusals */
    char t[160];
    snprintf(t, sizeof t, "%s", k_scorer);
    memcpy(t + 6, strcmp(id_scorer + 6, "00000000") ? "00000000" : "00000001", 8);
    CHECK(!verifies(kr, t), "unknown key_id");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[30] = t[30] == 'A' ? 'B' : 'A';
    CHECK(!verifies(kr, t), "right key_id, wrong secret");
    snprintf(t, sizeof t, "%s%s", id_scorer, k_admin + PGCL_KEY_ID_LEN);
    CHECK(!verifies(kr, t), "one key's id with another key's secret");
    snprintf(t, sizeof t, "%.*s", PGCL_KEY_LEN - 1, k_scorer);
    CHECK(!verifies(kr, t), "truncated by one character");
    CHECK(!verifies(kr, id_scorer), "key_id alone");
    snprintf(t, sizeof t, "%sA", k_scorer);
    CHECK(!verifies(kr, t), "one character too many");
    snprintf(t, sizeof t, "%s\n", k_scorer);
    CHECK(!verifies(kr, t), "trailing newline");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[40] = '=';
    CHECK(!verifies(kr, t), "character outside base64url");
    snprintf(t, sizeof t, "%s", k_scorer);
    t[7] = (char)toupper((unsigned char)t[7]) == t[7] ? 'G' : (char)toupper((unsigned char)t[7]);
    CHECK(!verifies(kr, t), "upper-case or non-hex key_id");
    CHECK(!verifies(kr, "Bearer garbage"), "garbage");
    CHECK(!verifies(kr, ""), "empty");
    CHECK(!verifies(kr, NULL), "NULL");
    CHECK(pgcl_keyring_verify(NULL, k_scorer, &id) == PGCL_ERR_INVALID, "NULL keyring");

    /* a key created by another connection appears on reload() */
    char k_late[128], id_late[32];
    create(path, PGCL_ROLE_SCORER, "late", k_late, id_late);
    CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK, "reload: %s", err);
    CHECK(verifies(kr, k_late), "new key after reload");
    CHECK(pgcl_keyring_count_active(kr) == 4, "4 active keys");

    /* revocation through reload() */
    CHECK(pgcl_keys_revoke(path, id_scorer, ACTOR, err, sizeof err) == PGCL_OK, "revoke scorer: %s", err);
    CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK, "reload: %s", err);
    CHECK(!verifies(kr, k_scorer), "revoked key refused after reload");
    CHECK(verifies(kr, k_admin), "other keys unaffected");

    /* revocation without reload(): within a second of the last check the old set still answers
     * (checks are rate-limited to one a second). That needs the check below to come within the
     * second: on a machine too loaded for that, the case runs again with a new key, instead of
     * being skipped. */
    bool exercised = false;
    for (int attempt = 0; attempt < 5 && !exercised; attempt++) {
        char k_tmp[128], id_tmp[32], name[32];
        snprintf(name, sizeof name, "rate-limited %d", attempt);
        create(path, PGCL_ROLE_SCORER, name, k_tmp, id_tmp);
        int64_t t_before = pgcl_monotonic_us(); /* the reload's check comes after this */
        CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK, "reload: %s", err);
        CHECK(pgcl_keys_revoke(path, id_tmp, ACTOR, err, sizeof err) == PGCL_OK, "revoke: %s", err);
        g_extra_revoked++;
        bool stale = verifies(kr, k_tmp);
        if (pgcl_monotonic_us() - t_before < 900000) {
            CHECK(stale, "checks are rate-limited to one per second");
            exercised = true;
        }
    }
    CHECK(exercised, "the revocation was never checked within a second of the reload");
    /* after a second the data_version check sees the commit */
    CHECK(pgcl_keys_revoke(path, id_reviewer, ACTOR, err, sizeof err) == PGCL_OK, "revoke reviewer: %s", err);
    /* verify makes the check once its second is over: poll (the deadline only ends a failing wait) */
    for (int64_t deadline = pgcl_monotonic_us() + 60 * 1000000LL;
         verifies(kr, k_reviewer) && pgcl_monotonic_us() < deadline;)
        usleep(20000);
    CHECK(!verifies(kr, k_reviewer), "revoked key refused after the data_version check, without reload");
    CHECK(verifies(kr, k_admin) && verifies(kr, k_late), "active keys still verify");
    CHECK(pgcl_keyring_count_active(kr) == 2, "2 active keys");

    /* revoke refusals */
    CHECK(pgcl_keys_revoke(path, id_scorer, ACTOR, err, sizeof err) == PGCL_ERR_INVALID && strstr(err, "already"),
          "second revoke: %s", err);
    CHECK(pgcl_keys_revoke(path, strcmp(id_admin, "pgcld_00000000") ? "pgcld_00000000" : "pgcld_00000001", ACTOR,
                           err, sizeof err) == PGCL_ERR_INVALID &&
              strstr(err, "no key"),
          "unknown key_id: %s", err);
    CHECK(pgcl_keys_revoke(path, k_admin, ACTOR, err, sizeof err) == PGCL_ERR_INVALID &&
              !strstr(err, k_admin + PGCL_KEY_ID_LEN + 1),
          "a full key is refused and not echoed: %s", err);
    CHECK(pgcl_keys_revoke(path, "PGCLD_0000000G", ACTOR, err, sizeof err) == PGCL_ERR_INVALID, "malformed key_id");
    CHECK(pgcl_keys_revoke(path, id_admin, "", err, sizeof err) == PGCL_ERR_INVALID, "empty actor");
    CHECK(verifies(kr, k_admin), "admin key survived the refused revokes");

    /* create refusals */
    char k[128], kid[32], name[200];
    CHECK(pgcl_keys_create(path, 0, "x", ACTOR, k, kid, err, sizeof err) == PGCL_ERR_INVALID && !*k, "role 0");
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER | PGCL_ROLE_ADMIN, "x", ACTOR, k, kid, err, sizeof err) ==
              PGCL_ERR_INVALID,
          "two roles in one key");
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "", ACTOR, k, kid, err, sizeof err) == PGCL_ERR_INVALID,
          "empty name");
    memset(name, 'n', 129);
    name[129] = 0;
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, name, ACTOR, k, kid, err, sizeof err) == PGCL_ERR_INVALID,
          "129-byte name");
    name[128] = 0;
    create(path, PGCL_ROLE_SCORER, name, k, kid);
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "a\nb", ACTOR, k, kid, err, sizeof err) == PGCL_ERR_INVALID,
          "control character in name");
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "bad \xff utf8", ACTOR, k, kid, err, sizeof err) ==
              PGCL_ERR_INVALID,
          "invalid UTF-8 in name");
    CHECK(pgcl_keys_create(path, PGCL_ROLE_SCORER, "x", NULL, k, kid, err, sizeof err) == PGCL_ERR_INVALID,
          "no actor");
    int n_created = g_n_keys;

    /* databases without the schema */
    char missing[300], empty_db[300], junk[300];
    snprintf(missing, sizeof missing, "%s/missing.db", g_dir);
    CHECK(pgcl_keys_create(missing, PGCL_ROLE_SCORER, "x", ACTOR, k, kid, err, sizeof err) == PGCL_ERR_IO &&
              strstr(err, missing) && access(missing, F_OK) != 0,
          "missing file not created: %s", err);
    snprintf(empty_db, sizeof empty_db, "%s/empty.db", g_dir);
    query_int(empty_db, "CREATE TABLE t (x)");
    CHECK(pgcl_keys_create(empty_db, PGCL_ROLE_SCORER, "x", ACTOR, k, kid, err, sizeof err) == PGCL_ERR_FORMAT &&
              strstr(err, "api_keys") && strstr(err, "pgcld serve"),
          "no schema: %s", err);
    pgcl_keyring *kr2 = (pgcl_keyring *)1;
    CHECK(pgcl_keyring_open(empty_db, &kr2, err, sizeof err) == PGCL_ERR_FORMAT && kr2 == NULL, "keyring, no schema");
    kr2 = (pgcl_keyring *)1;
    CHECK(pgcl_keyring_open(missing, &kr2, err, sizeof err) == PGCL_ERR_IO && kr2 == NULL, "keyring, missing file");
    pgcl_status list_st;
    json_t *list = list_keys(empty_db, &list_st, err, sizeof err);
    CHECK(list_st == PGCL_ERR_FORMAT && list == NULL, "list, no schema");
    snprintf(junk, sizeof junk, "%s/junk.db", g_dir);
    FILE *f = fopen(junk, "w");
    if (f) {
        for (int i = 0; i < 100; i++) fputs("this is not an SQLite database\n", f);
        fclose(f);
    }
    CHECK(pgcl_keys_revoke(junk, id_admin, ACTOR, err, sizeof err) == PGCL_ERR_FORMAT, "not a database: %s", err);

    /* admin_events: one row per create and revoke, with the actor; api_keys records who revoked */
    CHECK(query_int(path, "SELECT count(*) FROM admin_events WHERE action = 'key.create'") == n_created,
          "one key.create per key");
    CHECK(query_int(path, "SELECT count(*) FROM admin_events WHERE action = 'key.revoke'") == 2 + g_extra_revoked,
          "two key.revoke (and the rate-limit case's)");
    CHECK(query_int(path, "SELECT count(*) FROM admin_events WHERE actor <> '" ACTOR "'") == 0, "actor recorded");
    CHECK(query_intf(path,
                     "SELECT count(*) FROM admin_events WHERE action = 'key.create' AND target = '%s'"
                     " AND json_extract(details, '$.role') = 'reviewer'"
                     " AND json_extract(details, '$.name') = 'Zoë (trust & safety)'",
                     id_reviewer) == 1,
          "key.create details");
    CHECK(query_intf(path,
                     "SELECT count(*) FROM admin_events WHERE action = 'key.revoke' AND target = '%s'"
                     " AND json_extract(details, '$.role') = 'scorer' AND length(event_id) = 36",
                     id_scorer) == 1,
          "key.revoke row");
    CHECK(query_intf(path, "SELECT count(*) FROM api_keys WHERE key_id = '%s' AND revoked_by = '" ACTOR "'"
                     " AND revoked_at IS NOT NULL", id_reviewer) == 1,
          "revoked_at/revoked_by");
    CHECK(query_intf(path, "SELECT count(*) FROM api_keys WHERE key_id = '%s' AND created_by = '" ACTOR "'"
                     " AND revoked_at IS NULL AND length(key_sha256) = 64", id_admin) == 1,
          "active row");

    /* the listing: every key, the seven fields, no digest */
    list = list_keys(path, &list_st, err, sizeof err);
    CHECK(list_st == PGCL_OK, "list: %s", err);
    if (list) {
        CHECK(json_is_array(list) && (int)json_array_size(list) == n_created, "every key listed");
        size_t i;
        json_t *row;
        int n_revoked = 0;
        json_array_foreach(list, i, row) {
            CHECK(json_object_size(row) == 7 && json_is_string(json_object_get(row, "key_id")) &&
                      json_is_string(json_object_get(row, "name")) && json_is_string(json_object_get(row, "role")) &&
                      json_is_string(json_object_get(row, "created_at")) &&
                      json_is_string(json_object_get(row, "created_by")) && json_object_get(row, "revoked_at") &&
                      json_object_get(row, "revoked_by"),
                  "listed fields of row %zu", i);
            if (json_is_string(json_object_get(row, "revoked_at"))) n_revoked++;
        }
        CHECK(n_revoked == 2 + g_extra_revoked, "2 listed as revoked (and the rate-limit case's)");
        char *text = json_dumps(list, JSON_COMPACT);
        sqlite3 *db;
        sqlite3_stmt *s;
        int n_digests = 0;
        if (text && sqlite3_open(path, &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT key_sha256 FROM api_keys", -1, &s, NULL) == SQLITE_OK) {
            while (sqlite3_step(s) == SQLITE_ROW) {
                CHECK(!strstr(text, (const char *)sqlite3_column_text(s, 0)), "digest in the listing");
                n_digests++;
            }
            sqlite3_finalize(s);
            sqlite3_close(db);
        }
        CHECK(n_digests == n_created && text && !strstr(text, "sha256"), "no digest field");
        for (int j = 0; j < g_n_keys && text; j++) CHECK(!strstr(text, g_keys[j]), "key text in the listing");
        free(text);
        json_decref(list);
    }

    /* verify() from 8 threads while the table changes and reload() runs */
    pthread_t th[8];
    race_arg args[8];
    char bad[128];
    snprintf(bad, sizeof bad, "%s", k_admin);
    bad[50] = bad[50] == 'x' ? 'y' : 'x';
    for (int i = 0; i < 8; i++) {
        args[i] = (race_arg){.kr = kr, .good = k_admin, .bad = bad};
        pthread_create(&th[i], NULL, verifier, &args[i]);
    }
    for (int i = 0; i < 20; i++) {
        create(path, PGCL_ROLE_SCORER, "during the race", k, kid);
        CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK, "reload in race: %s", err);
    }
    int wrong = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        wrong += args[i].wrong;
    }
    CHECK(wrong == 0, "%d wrong answers under concurrency", wrong);

    /* 100 keys, all distinct in text and key_id, all verified */
    static char bulk[100][128], bulk_id[100][32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "bulk-%d", i);
        create(path, PGCL_ROLE_SCORER, name, bulk[i], bulk_id[i]);
    }
    int dup = 0;
    for (int i = 0; i < 100; i++)
        for (int j = i + 1; j < 100; j++) dup += !strcmp(bulk[i], bulk[j]) || !strcmp(bulk_id[i], bulk_id[j]);
    CHECK(dup == 0, "%d duplicate keys among 100", dup);
    CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK, "reload: %s", err);
    int n_ok = 0;
    for (int i = 0; i < 100; i++) n_ok += verifies(kr, bulk[i]);
    CHECK(n_ok == 100, "%d of 100 bulk keys verify", n_ok);
    CHECK(pgcl_keyring_count_active(kr) == g_n_keys - 2 - g_extra_revoked, "active count %d",
          pgcl_keyring_count_active(kr));
    pgcl_keyring_close(kr);
    pgcl_keyring_close(NULL);

    /* the database file holds digests and key_ids, never a key text or its secret part */
    char wal[300];
    snprintf(wal, sizeof wal, "%s-wal", path);
    CHECK(file_contains(path, id_admin), "the file reader works (key_id found)");
    char digest[65];
    pgcl_sha256_hex(k_admin, strlen(k_admin), digest);
    CHECK(file_contains(path, digest), "the digest of the key text is stored");
    int leaks = 0;
    for (int i = 0; i < g_n_keys; i++)
        leaks += file_contains(path, g_keys[i]) || file_contains(path, g_keys[i] + PGCL_KEY_ID_LEN + 1) ||
                 file_contains(wal, g_keys[i] + PGCL_KEY_ID_LEN + 1);
    CHECK(leaks == 0, "%d key texts found in the database file", leaks);
    CHECK(g_n_keys > 100, "all created keys were checked (%d)", g_n_keys);

    test_import(); /* last: it adds to g_n_keys, which the checks above count */

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    return test_finish("test_keys");
}
