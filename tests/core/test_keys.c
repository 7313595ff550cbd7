/* API keys and roles: role names, the key text format, create/verify for each role, every kind of
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
#include "ids.h"
#include "keys.h"
#include "test_sqlite.h"
#include "test_util.h"

#define ACTOR "test:alice"
#define MAX_KEYS 128

static char g_dir[] = "/tmp/pgcl-keys-XXXXXX";
static char g_keys[MAX_KEYS][128]; /* every key text created, to look for in the database file */
static int g_n_keys;

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
    int64_t t_reload = pgcl_monotonic_us();
    CHECK(!verifies(kr, k_scorer), "revoked key refused after reload");
    CHECK(verifies(kr, k_admin), "other keys unaffected");

    /* revocation without reload(): within a second of the last check the old set may still answer;
     * after a second the data_version check sees the commit */
    CHECK(pgcl_keys_revoke(path, id_reviewer, ACTOR, err, sizeof err) == PGCL_OK, "revoke reviewer: %s", err);
    bool stale = verifies(kr, k_reviewer);
    if (pgcl_monotonic_us() - t_reload < 900000) CHECK(stale, "checks are rate-limited to one per second");
    usleep(1100000);
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
    json_t *list = (json_t *)1;
    CHECK(pgcl_keys_list(empty_db, &list, err, sizeof err) == PGCL_ERR_FORMAT && list == NULL, "list, no schema");
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
    CHECK(query_int(path, "SELECT count(*) FROM admin_events WHERE action = 'key.revoke'") == 2, "two key.revoke");
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
    list = NULL;
    CHECK(pgcl_keys_list(path, &list, err, sizeof err) == PGCL_OK, "list: %s", err);
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
        CHECK(n_revoked == 2, "2 listed as revoked");
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
    CHECK(pgcl_keyring_count_active(kr) == g_n_keys - 2, "active count %d", pgcl_keyring_count_active(kr));
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

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    return test_finish("test_keys");
}
