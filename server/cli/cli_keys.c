/* pgcld keys create|import|list|revoke: API key administration from the command line, on the same
 * database a running daemon uses: a SQLite file (SQLite's locking makes that safe; the daemon's
 * keyring picks the change up within about a second) or a PostgreSQL URI (the store is opened as a
 * writer of its own, "<host name>/cli" unless --writer-id says otherwise, and every daemon of the
 * fleet sees the change within a second). See cli_keys.h. */
#include "cli_keys.h"

#include <jansson.h>
#include <pwd.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "audit_reads.h"
#include "cli_options.h"
#include "files.h"
#include "keys.h"
#include "keys_json.h"
#include "pg_db.h"

static const char USAGE[] =
    "usage: pgcld keys create --db FILE --role ROLE --name NAME\n"
    "       pgcld keys import --db FILE --role ROLE --name NAME --key-file KEYFILE\n"
    "       pgcld keys list   --db FILE\n"
    "       pgcld keys revoke --db FILE --key-id KEY_ID\n"
    "\n"
    "Manages the API keys kept in the audit database FILE (the --db of pgcld serve, which creates\n"
    "the schema: run it once first). Options are --name VALUE or --name=VALUE.\n"
    "FILE may also be a PostgreSQL URI (postgresql://... or postgres://...), the database of a fleet:\n"
    "the command then writes as its own writer, --writer-id NAME (default: \"<host name>/cli\"; it\n"
    "must differ from every running daemon's), waiting up to 10 s for another command that holds it.\n"
    "\n"
    "  create  makes a key with one ROLE: scorer (scoring), reviewer (audit reading, contests,\n"
    "          resolutions) or admin (models, keys). NAME (1 to 128 bytes) says who holds it.\n"
    "          The key is printed once, as the last line of stdout; only its SHA-256 is stored.\n"
    "  import  registers a key made elsewhere (by create on another database) so that it is valid\n"
    "          here too: KEYFILE holds the whole key (pgcld_, 8 hex digits, _, 43 base64url\n"
    "          characters), optionally followed by one newline. Only its SHA-256 is stored; the\n"
    "          key is never printed. Importing a key that is already here with the same ROLE\n"
    "          changes nothing and exits 0; the same key_id with another key or another role,\n"
    "          or a revoked key, is an error.\n"
    "  list    prints one JSON object per line, oldest key first, with the fields key_id, name,\n"
    "          role, created_at, created_by, revoked_at, revoked_by (the last two null while the\n"
    "          key is active). Keys themselves are never stored, so never printed.\n"
    "  revoke  revokes KEY_ID (pgcld_ and 8 hex digits: the first 14 characters of the key). A\n"
    "          running pgcld refuses the key within about a second.\n"
    "\n"
    "create, import and revoke are recorded in the admin_events table with the actor\n"
    "\"cli:<user name>\".\n"
    "Exit status: 0 done, 1 the operation failed (reason on stderr), 2 bad usage.\n";

typedef struct cli_opts {
    const char *db, *role, *name, *key_id, *key_file, *writer_id;
} cli_opts;

enum { OPT_DB = 1, OPT_ROLE = 2, OPT_NAME = 4, OPT_KEY_ID = 8, OPT_KEY_FILE = 16, OPT_WRITER_ID = 32 };

static const pgcld_cli_option OPTIONS[] = {
    {.name = "db", .bit = OPT_DB, .offset = offsetof(cli_opts, db)},
    {.name = "role", .bit = OPT_ROLE, .offset = offsetof(cli_opts, role)},
    {.name = "name", .bit = OPT_NAME, .offset = offsetof(cli_opts, name)},
    {.name = "key-id", .bit = OPT_KEY_ID, .offset = offsetof(cli_opts, key_id)},
    {.name = "key-file", .bit = OPT_KEY_FILE, .offset = offsetof(cli_opts, key_file)},
    {.name = "writer-id", .bit = OPT_WRITER_ID, .offset = offsetof(cli_opts, writer_id)}};

/* "--name=" is an empty value (refused later where it matters), and a repeated option is refused
 * before its value is looked for. */
static const pgcld_cli_spec CLI = {.command = "pgcld keys",
                                   .usage = USAGE,
                                   .options = OPTIONS,
                                   .n_options = sizeof OPTIONS / sizeof OPTIONS[0],
                                   .empty_value_ok = true,
                                   .duplicate_before_value = true};

/* "cli:<name of the real user>", or "cli:uid<N>" when the user has no passwd entry. */
static void cli_actor(char *out, size_t cap) {
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    if (pw && pw->pw_name && *pw->pw_name)
        snprintf(out, cap, "cli:%s", pw->pw_name);
    else
        snprintf(out, cap, "cli:uid%lu", (unsigned long)uid);
}

/* Creates the database and its schema when missing (the same migrations pgcld serve applies), so
 * that keys can be made before the daemon ever ran. Returns 0, or 1 after printing why. */
static int ensure_schema(const char *db, const char *cmd) {
    char err[1024];
    pgcl_audit_options aopts = {.path = db, .synchronous_full = true};
    pgcl_audit *audit = NULL;
    if (pgcl_audit_open(&aopts, &audit, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld keys %s: %s\n", cmd, err);
        return 1;
    }
    pgcl_audit_close(audit);
    return 0;
}

#define CLI_WRITER_LOCK_WAIT_MS 10000 /* another `pgcld keys` on this host may hold "<host>/cli" */

/* Opens the PostgreSQL store of --db (migrating it when needed) as the writer --writer-id, or
 * "<host name>/cli": a daemon's writer id is its host name, so the command never takes a running
 * daemon's chain. `list` opens it read-only instead (the schema must be there). NULL after
 * printing why. */
static pgcl_audit *open_fleet_store(const cli_opts *o, const char *cmd) {
    char err[1024], writer_id[300];
    if (strcmp(cmd, "list") == 0) { /* a read: no writer, no writers row, no chain, no migration */
        pgcl_audit_options ro = {.path = o->db, .read_only = true};
        pgcl_audit *audit = NULL;
        if (pgcl_audit_open(&ro, &audit, err, sizeof err) != PGCL_OK) {
            fprintf(stderr, "pgcld keys %s: %s\n", cmd, err);
            return NULL;
        }
        return audit;
    }
    if (o->writer_id) {
        snprintf(writer_id, sizeof writer_id, "%s", o->writer_id);
    } else {
        char host[256];
        if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "pgcld");
        host[sizeof host - 1] = 0;
        snprintf(writer_id, sizeof writer_id, "%s/cli", host);
    }
    pgcl_audit_options aopts = {.path = o->db,
                                .writer_id = writer_id,
                                .writer_lock_wait_ms = CLI_WRITER_LOCK_WAIT_MS,
                                .synchronous_full = true};
    pgcl_audit *audit = NULL;
    if (pgcl_audit_open(&aopts, &audit, err, sizeof err) != PGCL_OK) {
        fprintf(stderr, "pgcld keys %s: %s\n", cmd, err);
        return NULL;
    }
    return audit;
}


static int cmd_create(const cli_opts *o, const char *actor) {
    pgcl_role role;
    if (pgcl_role_parse(o->role, &role) != 0)
        return pgcld_cli_usage_error(&CLI, "--role '%s': must be scorer, reviewer or admin", o->role);
    char key[128], key_id[32], err[1024], shown[512];
    pgcl_pg_redact(o->db, shown, sizeof shown); /* a URI's password hidden */
    pgcl_status st;
    if (pgcl_pg_is_uri(o->db)) {
        pgcl_audit *audit = open_fleet_store(o, "create");
        if (!audit) return 1;
        st = pgcl_audit_create_key(audit, role, o->name, actor, key, key_id, err, sizeof err);
        pgcl_audit_close(audit);
    } else {
        /* The first admin key is made before the daemon ever ran. */
        if (ensure_schema(o->db, "create") != 0) return 1;
        st = pgcl_keys_create(o->db, role, o->name, actor, key, key_id, err, sizeof err);
    }
    if (st != PGCL_OK) {
        sodium_memzero(key, sizeof key);
        fprintf(stderr, "pgcld keys create: %s\n", err);
        return 1;
    }
    printf("Created API key %s (role %s) for \"%s\".\n"
           "Copy it now: it is shown only this once and cannot be recovered (pgcld stores only its SHA-256).\n"
           "Clients send it as the header  Authorization: Bearer <key>\n"
           "%s\n",
           key_id, pgcl_role_str(role), o->name, key);
    sodium_memzero(key, sizeof key);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld keys create: the key was created but could not be written to stdout; "
                        "revoke it with: pgcld keys revoke --db %s --key-id %s\n", shown, key_id);
        return 1;
    }
    return 0;
}

#define KEY_FILE_MAX 4096 /* far above a key and its newline: anything longer is not a key file */

/* Reads the key text of --key-file into key (NUL-terminated): the file's whole content less one
 * final "\n" or "\r\n", checked with pgcl_keys_check_text(). Returns 0, or -1 with the reason in err
 * (which never quotes the content). The caller wipes key. */
static int read_key_file(const char *path, char key[KEY_FILE_MAX + 1], char *err, int cap) {
    char why[512];
    pgcl_status st;
    long n = pgcl_read_small_file(path, "key file", false, key, KEY_FILE_MAX, &st, why, sizeof why);
    if (n < 0) {
        snprintf(err, (size_t)cap, "--key-file %s", why);
        return -1;
    }
    size_t len = (size_t)n;
    if (len > 0 && key[len - 1] == '\n') {
        len--;
        if (len > 0 && key[len - 1] == '\r') len--;
    }
    key[len] = 0;
    if (len == 0) {
        snprintf(err, (size_t)cap, "--key-file %s: the file is empty", path);
        return -1;
    }
    if (pgcl_keys_check_text(key, len, why, sizeof why) != PGCL_OK) {
        snprintf(err, (size_t)cap, "--key-file %s: %s", path, why);
        return -1;
    }
    return 0;
}

static int cmd_import(const cli_opts *o, const char *actor) {
    pgcl_role role;
    if (pgcl_role_parse(o->role, &role) != 0)
        return pgcld_cli_usage_error(&CLI, "--role '%s': must be scorer, reviewer or admin", o->role);
    char key[KEY_FILE_MAX + 1], key_id[32], err[1024], shown[512];
    bool created = false;
    int rc = 1;
    /* The file is checked before the database is touched: a bad key file writes nothing. */
    if (read_key_file(o->key_file, key, err, sizeof err) != 0) {
        fprintf(stderr, "pgcld keys import: %s\n", err);
        goto done;
    }
    pgcl_status st;
    if (pgcl_pg_is_uri(o->db)) {
        pgcl_audit *audit = open_fleet_store(o, "import");
        if (!audit) goto done;
        st = pgcl_audit_import_key(audit, role, o->name, actor, key, key_id, &created, err, sizeof err);
        pgcl_audit_close(audit);
    } else {
        if (ensure_schema(o->db, "import") != 0) goto done;
        st = pgcl_keys_import(o->db, role, o->name, actor, key, key_id, &created, err, sizeof err);
    }
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld keys import: %s\n", err);
        goto done;
    }
    pgcl_pg_redact(o->db, shown, sizeof shown); /* a URI's password hidden */
    if (created)
        printf("Imported API key %s (role %s) for \"%s\".\n", key_id, pgcl_role_str(role), o->name);
    else
        printf("API key %s (role %s) is already in %s; nothing changed.\n", key_id, pgcl_role_str(role), shown);
    rc = 0;
done:
    sodium_memzero(key, sizeof key);
    return rc;
}

static int cmd_list(const cli_opts *o) {
    json_t *keys = json_array();
    char err[1024];
    if (!keys) {
        fprintf(stderr, "pgcld keys list: out of memory\n");
        return 1;
    }
    pgcl_status st;
    if (pgcl_pg_is_uri(o->db)) {
        pgcl_audit *audit = open_fleet_store(o, "list");
        if (!audit) {
            json_decref(keys);
            return 1;
        }
        st = pgcl_audit_read_keys(audit, pgcld_key_append_json, keys, err, sizeof err);
        pgcl_audit_close(audit);
    } else {
        st = pgcl_keys_list(o->db, pgcld_key_append_json, keys, err, sizeof err);
    }
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld keys list: %s\n", err);
        json_decref(keys);
        return 1;
    }
    size_t i;
    json_t *k;
    int rc = 0;
    json_array_foreach(keys, i, k) {
        char *line = json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!line) {
            fprintf(stderr, "pgcld keys list: out of memory\n");
            rc = 1;
            break;
        }
        printf("%s\n", line);
        free(line);
    }
    json_decref(keys);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pgcld keys list: cannot write to stdout\n");
        rc = 1;
    }
    return rc;
}

static int cmd_revoke(const cli_opts *o, const char *actor) {
    char err[1024];
    pgcl_status st;
    if (pgcl_pg_is_uri(o->db)) {
        pgcl_audit *audit = open_fleet_store(o, "revoke");
        if (!audit) return 1;
        st = pgcl_audit_revoke_key(audit, o->key_id, actor, err, sizeof err);
        pgcl_audit_close(audit);
    } else {
        st = pgcl_keys_revoke(o->db, o->key_id, actor, err, sizeof err);
    }
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld keys revoke: %s\n", err);
        return 1;
    }
    printf("Revoked %s.\n", o->key_id);
    return 0;
}

int pgcld_cli_keys(int argc, char **argv) {
    if (argc < 1) return pgcld_cli_usage_error(&CLI, "%s", "missing subcommand: create, import, list or revoke");
    const char *cmd = argv[0];
    if (pgcld_cli_is_help(cmd)) {
        fputs(USAGE, stdout);
        return 0;
    }
    int allowed;
    if (strcmp(cmd, "create") == 0)
        allowed = OPT_DB | OPT_ROLE | OPT_NAME | OPT_WRITER_ID;
    else if (strcmp(cmd, "import") == 0)
        allowed = OPT_DB | OPT_ROLE | OPT_NAME | OPT_KEY_FILE | OPT_WRITER_ID;
    else if (strcmp(cmd, "list") == 0)
        allowed = OPT_DB | OPT_WRITER_ID;
    else if (strcmp(cmd, "revoke") == 0)
        allowed = OPT_DB | OPT_KEY_ID | OPT_WRITER_ID;
    else
        return pgcld_cli_usage_error(&CLI, "unknown subcommand '%s' (create, import, list or revoke)", cmd);
    cli_opts o = {0};
    if (pgcld_cli_parse(&CLI, argc - 1, argv + 1, allowed, &o) != 0) return 2;
    if (!o.db) return pgcld_cli_usage_error(&CLI, "%s needs --db FILE", cmd);
    if (o.writer_id && !pgcl_pg_is_uri(o.db))
        return pgcld_cli_usage_error(&CLI, "--writer-id names a writer of a PostgreSQL --db (postgresql://...)");
    if ((strcmp(cmd, "create") == 0 || strcmp(cmd, "import") == 0) && (!o.role || !o.name))
        return pgcld_cli_usage_error(&CLI, "%s needs --role ROLE and --name NAME", cmd);
    if (strcmp(cmd, "import") == 0 && !o.key_file)
        return pgcld_cli_usage_error(&CLI, "%s needs --key-file KEYFILE", cmd);
    if (strcmp(cmd, "revoke") == 0 && !o.key_id) return pgcld_cli_usage_error(&CLI, "%s needs --key-id KEY_ID", cmd);
    if (sodium_init() < 0) {
        fprintf(stderr, "pgcld keys: libsodium failed to initialise\n");
        return 1;
    }
    char actor[300];
    cli_actor(actor, sizeof actor);
    if (strcmp(cmd, "create") == 0) return cmd_create(&o, actor);
    if (strcmp(cmd, "import") == 0) return cmd_import(&o, actor);
    if (strcmp(cmd, "list") == 0) return cmd_list(&o);
    return cmd_revoke(&o, actor);
}
