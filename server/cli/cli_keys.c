/* pgcld keys create|import|list|revoke: API key administration from the command line, on the same
 * database a running daemon uses, through the store driver that claims --db (store_registry.h): a
 * SQLite file (SQLite's locking makes that safe; the daemon's keyring picks the change up within
 * about a second) or a PostgreSQL URI (the store is opened as a writer of its own, "<host
 * name>/cli" unless --writer-id says otherwise, and every daemon of the fleet sees the change within
 * a second). See cli_keys.h. */
#include "cli_keys.h"

#include <jansson.h>
#include <pwd.h>
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "files.h"
#include "keys.h"
#include "keys_json.h"
#include "store_registry.h"

typedef struct cli_opts {
    const char *db, *role, *name, *key_id, *key_file, *writer_id;
} cli_opts;

enum { OPT_DB = 1, OPT_ROLE = 2, OPT_NAME = 4, OPT_KEY_ID = 8, OPT_KEY_FILE = 16, OPT_WRITER_ID = 32 };

// clang-format off
static const pgcld_cli_option OPTIONS[] = {
    {.name = "db", .bit = OPT_DB, .offset = offsetof(cli_opts, db), .meta = "FILE",
     .help = "the audit database (the --db of pgcld serve): a SQLite file, or a PostgreSQL URI postgresql://..."},
    {.name = "role", .bit = OPT_ROLE, .offset = offsetof(cli_opts, role), .meta = "ROLE",
     .help = "scorer (scoring), reviewer (audit reading, contests, resolutions) or admin (models, keys)"},
    {.name = "name", .bit = OPT_NAME, .offset = offsetof(cli_opts, name), .meta = "NAME",
     .help = "who holds the key, 1 to 128 bytes"},
    {.name = "key-id", .bit = OPT_KEY_ID, .offset = offsetof(cli_opts, key_id), .meta = "KEY_ID",
     .help = "the key's id: pgcld_ and 8 hex digits, the first 14 characters of the key"},
    {.name = "key-file", .bit = OPT_KEY_FILE, .offset = offsetof(cli_opts, key_file), .meta = "KEYFILE",
     .help = "a file holding the whole key, optionally followed by one newline"},
    {.name = "writer-id", .bit = OPT_WRITER_ID, .offset = offsetof(cli_opts, writer_id), .meta = "NAME",
     .def = "\"<host name>/cli\"",
     .help = "PostgreSQL --db only: the writer this command writes as; it must differ from every running daemon's"}};

static const pgcld_cli_command COMMANDS[] = {
    {.name = "create", .allowed = OPT_DB | OPT_ROLE | OPT_NAME | OPT_WRITER_ID,
     .synopsis = "--db FILE --role ROLE --name NAME [--writer-id NAME]",
     .summary = "make a new API key with one role and print it once",
     .description =
        "Makes a key with one ROLE for its holder NAME. The key is printed once, as the last line of stdout;\n"
        "only its SHA-256 is stored. The database and its schema are created when missing, so the first\n"
        "admin key can be made before the daemon ever ran.\n"},
    {.name = "import", .allowed = OPT_DB | OPT_ROLE | OPT_NAME | OPT_KEY_FILE | OPT_WRITER_ID,
     .synopsis = "--db FILE --role ROLE --name NAME --key-file KEYFILE [--writer-id NAME]",
     .summary = "register a key made elsewhere so that it is valid here too",
     .description =
        "Registers a key made by create on another database: KEYFILE holds the whole key (pgcld_, 8 hex\n"
        "digits, _, 43 base64url characters), optionally followed by one newline. Only its SHA-256 is\n"
        "stored; the key is never printed. Importing a key that is already here with the same ROLE changes\n"
        "nothing and exits 0; the same key_id with another key or another role, or a revoked key, is an\n"
        "error.\n"},
    {.name = "list", .allowed = OPT_DB | OPT_WRITER_ID,
     .synopsis = "--db FILE",
     .summary = "print every key's record, one JSON object per line",
     .description =
        "Prints one JSON object per line, oldest key first, with the fields key_id, name, role,\n"
        "created_at, created_by, revoked_at, revoked_by (the last two null while the key is active).\n"
        "Keys themselves are never stored, so never printed.\n"},
    {.name = "revoke", .allowed = OPT_DB | OPT_KEY_ID | OPT_WRITER_ID,
     .synopsis = "--db FILE --key-id KEY_ID [--writer-id NAME]",
     .summary = "revoke a key: a running pgcld refuses it within about a second",
     .description =
        "Revokes KEY_ID (pgcld_ and 8 hex digits: the first 14 characters of the key). A running pgcld\n"
        "refuses the key within about a second.\n"},
};
// clang-format on

/* "--name=" is an empty value (refused later where it matters), and a repeated option is refused
 * before its value is looked for. */
const pgcld_cli_spec pgcld_cli_keys_spec = {
    .command = "pgcld keys",
    .summary = "manage the API keys kept in the audit database",
    .description = "FILE is the audit database of pgcld serve. It may also be a PostgreSQL URI (postgresql://... or\n"
                   "postgres://...), the database of a fleet: the command then writes as its own writer, --writer-id\n"
                   "NAME (default: \"<host name>/cli\"; it must differ from every running daemon's), waiting up to\n"
                   "10 s for another command that holds it. create, import and revoke are recorded in the\n"
                   "admin_events table with the actor \"cli:<user name>\".\n",
    .exit_status = "0 done, 1 the operation failed (reason on stderr), 2 bad usage",
    .commands = COMMANDS,
    .n_commands = sizeof COMMANDS / sizeof COMMANDS[0],
    .options = OPTIONS,
    .n_options = sizeof OPTIONS / sizeof OPTIONS[0],
    .empty_value_ok = true,
    .duplicate_before_value = true};
static const pgcld_cli_spec *const CLI = &pgcld_cli_keys_spec;

/* "cli:<name of the real user>", or "cli:uid<N>" when the user has no passwd entry. */
static void cli_actor(char *out, size_t cap) {
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    if (pw && pw->pw_name && *pw->pw_name)
        snprintf(out, cap, "cli:%s", pw->pw_name);
    else
        snprintf(out, cap, "cli:uid%lu", (unsigned long)uid);
}

#define CLI_WRITER_LOCK_WAIT_MS 10000 /* another `pgcld keys` on this host may hold "<host>/cli" */

/* Where the command writes: --db, as the writer --writer-id or "<host name>/cli" (a store with
 * writers: a daemon's writer id is its host name, so the command never takes a running daemon's
 * chain). writer_id: the caller's buffer. */
static pgcl_store_target cli_target(const cli_opts *o, char writer_id[300]) {
    if (o->writer_id) {
        snprintf(writer_id, 300, "%s", o->writer_id);
    } else {
        char host[256];
        if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "pgcld");
        host[sizeof host - 1] = 0;
        snprintf(writer_id, 300, "%s/cli", host);
    }
    return (pgcl_store_target){.db = o->db, .writer_id = writer_id, .writer_lock_wait_ms = CLI_WRITER_LOCK_WAIT_MS};
}

static int cmd_create(const cli_opts *o, const char *actor) {
    pgcl_role role;
    if (pgcl_role_parse(o->role, &role) != 0)
        return pgcld_cli_usage_error(CLI, "--role '%s': must be scorer, reviewer or admin", o->role);
    char key[128], key_id[32], err[1024], shown[512], writer_id[300];
    pgcl_store_redact(o->db, shown, sizeof shown); /* a URI's password hidden */
    pgcl_store_target t = cli_target(o, writer_id);
    /* The first admin key is made before the daemon ever ran: the schema is created when missing. */
    pgcl_status st = pgcl_store_keys_create(&t, role, o->name, actor, key, key_id, err, sizeof err);
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
        return pgcld_cli_usage_error(CLI, "--role '%s': must be scorer, reviewer or admin", o->role);
    char key[KEY_FILE_MAX + 1], key_id[32], err[1024], shown[512], writer_id[300];
    bool created = false;
    int rc = 1;
    /* The file is checked before the database is touched: a bad key file writes nothing. */
    if (read_key_file(o->key_file, key, err, sizeof err) != 0) {
        fprintf(stderr, "pgcld keys import: %s\n", err);
        goto done;
    }
    pgcl_store_target t = cli_target(o, writer_id);
    pgcl_status st = pgcl_store_keys_import(&t, role, o->name, actor, key, key_id, &created, err, sizeof err);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld keys import: %s\n", err);
        goto done;
    }
    pgcl_store_redact(o->db, shown, sizeof shown); /* a URI's password hidden */
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
    char err[1024], writer_id[300];
    if (!keys) {
        fprintf(stderr, "pgcld keys list: out of memory\n");
        return 1;
    }
    pgcl_store_target t = cli_target(o, writer_id);
    pgcl_status st = pgcl_store_keys_list(&t, pgcld_key_append_json, keys, err, sizeof err);
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
    char err[1024], writer_id[300];
    pgcl_store_target t = cli_target(o, writer_id);
    pgcl_status st = pgcl_store_keys_revoke(&t, o->key_id, actor, err, sizeof err);
    if (st != PGCL_OK) {
        fprintf(stderr, "pgcld keys revoke: %s\n", err);
        return 1;
    }
    printf("Revoked %s.\n", o->key_id);
    return 0;
}

int pgcld_cli_keys(int argc, char **argv) {
    const pgcld_cli_command *command = NULL;
    int rc = pgcld_cli_select(CLI, argc, argv, &command);
    if (rc != PGCLD_CLI_PROCEED) return rc;
    const char *cmd = command->name;
    cli_opts o = {0};
    if ((rc = pgcld_cli_parse(CLI, command, argc - 1, argv + 1, &o)) != PGCLD_CLI_PROCEED) return rc;
    if (!o.db) return pgcld_cli_usage_error(CLI, "%s needs --db FILE", cmd);
    if (o.writer_id && !pgcl_store_has_writers(o.db))
        return pgcld_cli_usage_error(CLI, "--writer-id names a writer of a PostgreSQL --db (postgresql://...)");
    if ((strcmp(cmd, "create") == 0 || strcmp(cmd, "import") == 0) && (!o.role || !o.name))
        return pgcld_cli_usage_error(CLI, "%s needs --role ROLE and --name NAME", cmd);
    if (strcmp(cmd, "import") == 0 && !o.key_file)
        return pgcld_cli_usage_error(CLI, "%s needs --key-file KEYFILE", cmd);
    if (strcmp(cmd, "revoke") == 0 && !o.key_id) return pgcld_cli_usage_error(CLI, "%s needs --key-id KEY_ID", cmd);
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
