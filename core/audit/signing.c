/* Ed25519 signing keys and signed checkpoints of the audit chain; see signing.h for the formats. */
#include "signing.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "files.h"
#include "chain_proof.h"

#define STATEMENT_MAGIC_V1 "pgcld-audit-checkpoint-v1"
#define STATEMENT_MAGIC_V2 "pgcld-audit-checkpoint-v2"
#define SECRET_HEX_LEN (2 * crypto_sign_SECRETKEYBYTES) /* 128 */
#define KEY_FILE_MAX 1024
#define CHECKPOINT_FILE_MAX (64 * 1024)
#define STATEMENT_MAX 256
#define ERR_CAP 512

_Static_assert(PGCL_PUBLIC_KEY_HEX_LEN == 2 * crypto_sign_PUBLICKEYBYTES, "public key hex");
_Static_assert(PGCL_SIGNATURE_HEX_LEN == 2 * crypto_sign_BYTES, "signature hex");

/* ---- small helpers ---- */

static bool is_lower_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* Exactly n bytes from hex text (either case). Returns 0, or -1 when malformed. */
static int hex_to_bin(const char *hex, unsigned char *out, size_t n) {
    size_t got = 0;
    const char *end = NULL;
    if (!hex || strlen(hex) != 2 * n) return -1;
    if (sodium_hex2bin(out, n, hex, 2 * n, NULL, &got, &end) != 0 || got != n || *end) return -1;
    return 0;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Loads and checks a secret key file (64 bytes whose public half matches the seed's). */
static pgcl_status load_secret_key(const char *path, unsigned char sk[crypto_sign_SECRETKEYBYTES], char *err,
                                   int cap) {
    char buf[KEY_FILE_MAX + 1];
    pgcl_status st;
    long n = pgcl_read_small_file(path, "signing key", true, buf, KEY_FILE_MAX, &st, err, cap);
    if (n < 0) return st;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = 0;
    st = PGCL_ERR_FORMAT;
    if (n != SECRET_HEX_LEN || hex_to_bin(buf, sk, crypto_sign_SECRETKEYBYTES) != 0) {
        pgcl_errorf(err, cap, "%s: not a pgcld signing key (expected one line of %d hex digits; make one with "
                    "'pgcld audit keygen --out FILE')", path, SECRET_HEX_LEN);
        goto done;
    }
    unsigned char seed[crypto_sign_SEEDBYTES], pk[crypto_sign_PUBLICKEYBYTES], sk2[crypto_sign_SECRETKEYBYTES];
    crypto_sign_ed25519_sk_to_seed(seed, sk);
    crypto_sign_seed_keypair(pk, sk2, seed);
    bool same = sodium_memcmp(sk, sk2, sizeof sk2) == 0;
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk2, sizeof sk2);
    if (!same) {
        pgcl_errorf(err, cap, "%s: damaged signing key (its public half does not belong to its seed)", path);
        goto done;
    }
    st = PGCL_OK;
done:
    sodium_memzero(buf, sizeof buf);
    if (st != PGCL_OK) sodium_memzero(sk, crypto_sign_SECRETKEYBYTES);
    return st;
}

/* ---- keys ---- */

pgcl_status pgcl_signing_keygen(const char *path, char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char *err, int cap) {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    char hex[SECRET_HEX_LEN + 2];
    public_hex[0] = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s: %s%s", path, strerror(errno),
                    errno == EEXIST ? " (an existing signing key is never overwritten)" : "");
        return PGCL_ERR_IO;
    }
    crypto_sign_keypair(pk, sk);
    sodium_bin2hex(hex, sizeof hex, sk, sizeof sk);
    hex[SECRET_HEX_LEN] = '\n';
    pgcl_status st = PGCL_OK;
    if (fchmod(fd, 0600) != 0 || write_all(fd, hex, SECRET_HEX_LEN + 1) != 0 || fsync(fd) != 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        st = PGCL_ERR_IO;
    }
    if (close(fd) != 0 && st == PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        st = PGCL_ERR_IO;
    }
    if (st != PGCL_OK) unlink(path);
    else sodium_bin2hex(public_hex, PGCL_PUBLIC_KEY_HEX_LEN + 1, pk, sizeof pk);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(hex, sizeof hex);
    return st;
}

pgcl_status pgcl_signing_public_key(const char *path, char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char *err,
                                    int cap) {
    unsigned char sk[crypto_sign_SECRETKEYBYTES], pk[crypto_sign_PUBLICKEYBYTES];
    public_hex[0] = 0;
    pgcl_status st = load_secret_key(path, sk, err, cap);
    if (st != PGCL_OK) return st;
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    sodium_memzero(sk, sizeof sk);
    sodium_bin2hex(public_hex, PGCL_PUBLIC_KEY_HEX_LEN + 1, pk, sizeof pk);
    return PGCL_OK;
}

pgcl_status pgcl_signing_secret_key(const char *path, unsigned char sk[64], char *err, int cap) {
    _Static_assert(crypto_sign_SECRETKEYBYTES == 64, "libsodium's Ed25519 secret key: seed and public key");
    return load_secret_key(path, sk, err, cap);
}

pgcl_status pgcl_signing_sign(const char *key_path, const void *msg, size_t len,
                              char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char signature_hex[PGCL_SIGNATURE_HEX_LEN + 1],
                              char *err, int cap) {
    unsigned char sk[crypto_sign_SECRETKEYBYTES], pk[crypto_sign_PUBLICKEYBYTES], sig[crypto_sign_BYTES];
    pgcl_status st = load_secret_key(key_path, sk, err, cap);
    if (st != PGCL_OK) return st;
    crypto_sign_detached(sig, NULL, msg, (unsigned long long)len, sk);
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    sodium_memzero(sk, sizeof sk);
    sodium_bin2hex(public_hex, PGCL_PUBLIC_KEY_HEX_LEN + 1, pk, sizeof pk);
    sodium_bin2hex(signature_hex, PGCL_SIGNATURE_HEX_LEN + 1, sig, sizeof sig);
    return PGCL_OK;
}

bool pgcl_signing_verify(const char *public_hex, const char *signature_hex, const void *msg, size_t len) {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sig[crypto_sign_BYTES];
    return hex_to_bin(public_hex, pk, sizeof pk) == 0 && hex_to_bin(signature_hex, sig, sizeof sig) == 0 &&
           crypto_sign_verify_detached(sig, msg, (unsigned long long)len, pk) == 0;
}

/* ---- statements and verification ---- */

int pgcl_checkpoint_statement(const pgcl_checkpoint *cp, char *buf, int cap) {
    int n = cp->version == 1 ? snprintf(buf, (size_t)cap, STATEMENT_MAGIC_V1 "\n%lld\n%s\n%s\n",
                                        (long long)cp->head_seq, cp->head_hash, cp->created_at)
                             : snprintf(buf, (size_t)cap, STATEMENT_MAGIC_V2 "\n%lld\n%s\n%s\n%s\n",
                                        (long long)cp->head_seq, cp->head_hash, cp->log_root, cp->created_at);
    return n < 0 || n >= cap ? -1 : n;
}

pgcl_status pgcl_checkpoint_verify(const pgcl_checkpoint *cp, const char *expected_public_hex, char *err, int cap) {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], want[crypto_sign_PUBLICKEYBYTES], sig[crypto_sign_BYTES];
    char statement[STATEMENT_MAX];
    const char *name = cp->file[0] ? cp->file : "checkpoint";
    if (hex_to_bin(cp->public_key, pk, sizeof pk) != 0 || hex_to_bin(cp->signature, sig, sizeof sig) != 0) {
        pgcl_errorf(err, cap, "%s: public_key or signature is not hex of the right length", name);
        return PGCL_ERR_FORMAT;
    }
    if (expected_public_hex) {
        if (hex_to_bin(expected_public_hex, want, sizeof want) != 0) {
            pgcl_errorf(err, cap, "the expected public key must be %d hex digits", PGCL_PUBLIC_KEY_HEX_LEN);
            return PGCL_ERR_INVALID;
        }
        if (memcmp(pk, want, sizeof pk) != 0) {
            pgcl_errorf(err, cap, "%s: signed by public key %s, not by the expected %.64s", name, cp->public_key,
                        expected_public_hex);
            return PGCL_ERR_MISMATCH;
        }
    }
    int n = pgcl_checkpoint_statement(cp, statement, sizeof statement);
    if (n < 0 || crypto_sign_verify_detached(sig, (const unsigned char *)statement, (unsigned long long)n, pk) != 0) {
        pgcl_errorf(err, cap, "%s: the signature does not verify: the checkpoint was altered, or not signed by the key "
                    "it names", name);
        return PGCL_ERR_MISMATCH;
    }
    return PGCL_OK;
}

/* Copies a JSON string field of at most max bytes into out (max + 1 bytes). */
static bool get_string(const json_t *obj, const char *key, char *out, size_t max) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) > max || json_string_length(v) == 0) return false;
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return strlen(out) == json_string_length(v); /* no NUL inside */
}

pgcl_status pgcl_checkpoint_from_json(const json_t *root, const char *name, pgcl_checkpoint *out, char *err, int cap) {
    json_t *format = json_object_get(root, "format"), *version = json_object_get(root, "version");
    if (!json_is_string(format) || strcmp(json_string_value(format), PGCL_CHECKPOINT_FORMAT) != 0) {
        pgcl_errorf(err, cap, "%s: not a pgcld audit checkpoint (\"format\" is not \"%s\")", name,
                    PGCL_CHECKPOINT_FORMAT);
        return PGCL_ERR_FORMAT;
    }
    if (!json_is_integer(version) || json_integer_value(version) < 1 ||
        json_integer_value(version) > PGCL_CHECKPOINT_VERSION) {
        pgcl_errorf(err, cap, "%s: checkpoint format version %lld; this pgcld reads versions 1 to %d (use a newer pgcld)",
                    name, json_is_integer(version) ? (long long)json_integer_value(version) : -1LL,
                    PGCL_CHECKPOINT_VERSION);
        return PGCL_ERR_UNSUPPORTED;
    }
    out->version = (int)json_integer_value(version);
    json_t *seq = json_object_get(root, "head_seq");
    if (!json_is_integer(seq) || json_integer_value(seq) < 1) {
        pgcl_errorf(err, cap, "%s: head_seq must be a positive integer", name);
        return PGCL_ERR_FORMAT;
    }
    out->head_seq = (int64_t)json_integer_value(seq);
    if (!get_string(root, "head_hash", out->head_hash, 64) || !is_lower_hex(out->head_hash, 64)) {
        pgcl_errorf(err, cap, "%s: head_hash must be 64 lowercase hex digits", name);
        return PGCL_ERR_FORMAT;
    }
    if (out->version >= 2 && (!get_string(root, "log_root", out->log_root, 64) || !is_lower_hex(out->log_root, 64))) {
        pgcl_errorf(err, cap, "%s: log_root must be 64 lowercase hex digits", name);
        return PGCL_ERR_FORMAT;
    }
    if (!get_string(root, "created_at", out->created_at, sizeof out->created_at - 1) ||
        strchr(out->created_at, '\n')) {
        pgcl_errorf(err, cap, "%s: created_at must be a timestamp (1 to 64 bytes, one line)", name);
        return PGCL_ERR_FORMAT;
    }
    if (!get_string(root, "public_key", out->public_key, PGCL_PUBLIC_KEY_HEX_LEN) ||
        !is_lower_hex(out->public_key, PGCL_PUBLIC_KEY_HEX_LEN) ||
        !get_string(root, "signature", out->signature, PGCL_SIGNATURE_HEX_LEN) ||
        !is_lower_hex(out->signature, PGCL_SIGNATURE_HEX_LEN)) {
        pgcl_errorf(err, cap, "%s: public_key must be %d and signature %d lowercase hex digits", name,
                    PGCL_PUBLIC_KEY_HEX_LEN, PGCL_SIGNATURE_HEX_LEN);
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

pgcl_status pgcl_checkpoint_read(const char *path, const char *expected_public_hex, pgcl_checkpoint *out, char *err,
                                 int cap) {
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s", path);
    pgcl_status st;
    json_t *root = pgcl_checkpoint_file_json(path, CHECKPOINT_FILE_MAX, &st, err, cap);
    if (!root) return st;
    if ((st = pgcl_checkpoint_from_json(root, path, out, err, cap)) == PGCL_OK)
        st = pgcl_checkpoint_verify(out, expected_public_hex, err, cap);
    json_decref(root);
    return st;
}

json_t *pgcl_checkpoint_file_json(const char *path, long max_bytes, pgcl_status *st, char *err, int cap) {
    char *buf = malloc((size_t)max_bytes + 1);
    if (!buf) {
        pgcl_errorf(err, cap, "out of memory");
        *st = PGCL_ERR_NOMEM;
        return NULL;
    }
    json_t *root = NULL;
    long n = pgcl_read_small_file(path, "checkpoint", false, buf, max_bytes, st, err, cap);
    if (n >= 0) {
        json_error_t jerr;
        root = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
        if (!root || !json_is_object(root)) {
            pgcl_errorf(err, cap, "%s: not a JSON object%s%s", path, root ? "" : ": ", root ? "" : jerr.text);
            json_decref(root);
            root = NULL;
            *st = PGCL_ERR_FORMAT;
        }
    }
    free(buf);
    return root;
}

/* ---- making checkpoints ---- */

/* Writes text to path atomically: a temporary file beside it, fsync, rename, fsync of the directory. */
static pgcl_status write_file_atomic(const char *path, const char *text, char *err, int cap) {
    char tmp[PGCL_CHECKPOINT_PATH_MAX + 64], dir[PGCL_CHECKPOINT_PATH_MAX];
    unsigned char rnd[6];
    char rhex[13];
    randombytes_buf(rnd, sizeof rnd);
    sodium_bin2hex(rhex, sizeof rhex, rnd, sizeof rnd);
    snprintf(tmp, sizeof tmp, "%s.tmp-%s", path, rhex);
    pgcl_path_directory(path, dir, sizeof dir);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        pgcl_errorf(err, cap, "%s: %s", tmp, strerror(errno));
        return PGCL_ERR_IO;
    }
    if (write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0) {
        pgcl_errorf(err, cap, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return PGCL_ERR_IO;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        pgcl_errorf(err, cap, "%s: %s", path, strerror(errno));
        unlink(tmp);
        return PGCL_ERR_IO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        pgcl_errorf(err, cap, "%s: fsync of the directory: %s", dir, strerror(errno));
        if (dfd >= 0) close(dfd);
        return PGCL_ERR_IO;
    }
    close(dfd);
    return PGCL_OK;
}

pgcl_status pgcl_checkpoint_write_json(const char *path, const json_t *doc, char *err, int cap) {
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    char *with_nl = text ? realloc(text, strlen(text) + 2) : NULL;
    if (!with_nl) {
        free(text);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    strcat(with_nl, "\n");
    pgcl_status st = write_file_atomic(path, with_nl, err, cap);
    free(with_nl);
    return st;
}

/* Reads the chain head (or, when at_seq > 0, entry at_seq) and the log tree's root over entries
 * 1..that entry in one read transaction. PGCL_ERR_NOT_FOUND when the chain is empty or has no entry
 * at_seq. */
static pgcl_status read_head(sqlite3 *db, const char *db_path, int64_t at_seq, int64_t *seq, char hash[65],
                             char log_root[65], char *err, int cap) {
    sqlite3_stmt *s = NULL;
    char sub[ERR_CAP];
    pgcl_status st = PGCL_ERR_DB;
    if (pgcl_db_exec(db, "BEGIN", sub, sizeof sub) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sub);
        return PGCL_ERR_DB;
    }
    if (sqlite3_prepare_v2(db, "SELECT seq, hash FROM audit_chain WHERE seq <= ?1 ORDER BY seq DESC LIMIT 1", -1, &s,
                           NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sqlite3_errmsg(db));
        if (strstr(sqlite3_errmsg(db), "no such table")) st = PGCL_ERR_FORMAT;
        goto done;
    }
    sqlite3_bind_int64(s, 1, at_seq > 0 ? at_seq : INT64_MAX);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && at_seq > 0 && sqlite3_column_int64(s, 0) != at_seq) rc = SQLITE_DONE;
    if (rc == SQLITE_DONE && at_seq > 0) {
        pgcl_errorf(err, cap, "%s: the audit chain has no entry %lld", db_path, (long long)at_seq);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    if (rc == SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: the audit chain is empty (no event has been recorded since it began)", db_path);
        st = PGCL_ERR_NOT_FOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    const char *h = (const char *)sqlite3_column_text(s, 1);
    if (!h || !is_lower_hex(h, 64)) {
        pgcl_errorf(err, cap, "%s: the chain head's hash is not 64 lowercase hex digits", db_path);
        st = PGCL_ERR_FORMAT;
        goto done;
    }
    *seq = sqlite3_column_int64(s, 0);
    memcpy(hash, h, 65);
    pgcl_merkle_hash root;
    char sub_err[ERR_CAP];
    if ((st = pgcl_chain_log_tree(db, *seq, -1, &root, NULL, NULL, sub_err, sizeof sub_err)) != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", db_path, sub_err);
        goto done;
    }
    pgcl_merkle_to_hex(&root, log_root);
done:
    sqlite3_finalize(s);
    pgcl_db_exec(db, "COMMIT", NULL, 0);
    return st;
}

/* The work of record_checkpoint's write transaction: one audit_checkpoints row. */
typedef struct checkpoint_row {
    sqlite3_stmt *insert; /* prepared, parameters not yet bound */
    const pgcl_checkpoint *cp;
} checkpoint_row;

static int insert_checkpoint_row(sqlite3 *db, void *ctx, char *err, int cap) {
    const checkpoint_row *row = ctx;
    sqlite3_stmt *s = row->insert;
    sqlite3_bind_int64(s, 1, row->cp->head_seq);
    sqlite3_bind_text(s, 2, row->cp->head_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, row->cp->created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, row->cp->public_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, row->cp->signature, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, row->cp->log_root, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return SQLITE_OK;
    pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
    return rc == SQLITE_ROW ? SQLITE_ERROR : rc;
}

/* Adds cp to audit_checkpoints in its own write transaction. The statement is prepared before the
 * transaction begins (a database without the table fails without taking the write lock). Returns
 * PGCL_OK, or PGCL_ERR_DB with SQLite's message in err. */
static pgcl_status record_checkpoint(sqlite3 *db, const pgcl_checkpoint *cp, char *err, int cap) {
    checkpoint_row row = {.insert = NULL, .cp = cp};
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO audit_checkpoints (head_seq, head_hash, created_at, public_key, signature,"
                           " log_root) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &row.insert, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s", sqlite3_errmsg(db));
        sqlite3_finalize(row.insert);
        return PGCL_ERR_DB;
    }
    int rc = pgcl_db_write_transaction(db, insert_checkpoint_row, &row, err, cap);
    sqlite3_finalize(row.insert);
    return rc == SQLITE_OK ? PGCL_OK : PGCL_ERR_DB;
}

pgcl_status pgcl_checkpoint_create(const char *db_path, const char *key_path, const char *out_file,
                                   const char *out_dir, pgcl_checkpoint *out, char *err, int cap) {
    return pgcl_checkpoint_create_at(db_path, key_path, 0, out_file, out_dir, out, err, cap);
}

pgcl_status pgcl_checkpoint_create_at(const char *db_path, const char *key_path, int64_t at_seq, const char *out_file,
                                      const char *out_dir, pgcl_checkpoint *out, char *err, int cap) {
    unsigned char sk[crypto_sign_SECRETKEYBYTES], pk[crypto_sign_PUBLICKEYBYTES], sig[crypto_sign_BYTES];
    char statement[STATEMENT_MAX], sub[ERR_CAP];
    sqlite3 *db = NULL;
    json_t *doc = NULL;
    memset(out, 0, sizeof *out);
    pgcl_status st = load_secret_key(key_path, sk, err, cap);
    if (st != PGCL_OK) return st;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: cannot open the database: %s", db_path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        st = PGCL_ERR_IO;
        goto done;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, PGCL_DB_BUSY_TIMEOUT_MS);
    out->version = PGCL_CHECKPOINT_VERSION;
    if ((st = read_head(db, db_path, at_seq, &out->head_seq, out->head_hash, out->log_root, err, cap)) != PGCL_OK) goto done;

    pgcl_timestamp_now(out->created_at);
    int n = pgcl_checkpoint_statement(out, statement, sizeof statement);
    st = PGCL_ERR_INVALID;
    if (n < 0) {
        pgcl_errorf(err, cap, "checkpoint statement too long");
        goto done;
    }
    crypto_sign_detached(sig, NULL, (const unsigned char *)statement, (unsigned long long)n, sk);
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    sodium_bin2hex(out->public_key, sizeof out->public_key, pk, sizeof pk);
    sodium_bin2hex(out->signature, sizeof out->signature, sig, sizeof sig);

    if (out_file)
        n = snprintf(out->file, sizeof out->file, "%s", out_file);
    else
        n = snprintf(out->file, sizeof out->file, "%s/checkpoint-%lld.json", out_dir && *out_dir ? out_dir : ".",
                     (long long)out->head_seq);
    if (n < 0 || (size_t)n >= sizeof out->file) {
        pgcl_errorf(err, cap, "checkpoint path too long");
        goto done;
    }
    doc = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s, s:s, s:s}", "format", PGCL_CHECKPOINT_FORMAT, "version",
                    PGCL_CHECKPOINT_VERSION, "head_seq", (json_int_t)out->head_seq, "head_hash", out->head_hash,
                    "log_root", out->log_root, "created_at", out->created_at, "public_key", out->public_key,
                    "signature", out->signature);
    if ((st = pgcl_checkpoint_write_json(out->file, doc, err, cap)) != PGCL_OK) goto done;
    if ((st = record_checkpoint(db, out, sub, sizeof sub)) != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: the checkpoint file %s was written and is valid, but recording it in "
                    "audit_checkpoints failed: %s", db_path, out->file, sub);
        goto done;
    }
    st = PGCL_OK;
done:
    sodium_memzero(sk, sizeof sk);
    json_decref(doc);
    if (db) sqlite3_close(db);
    return st;
}
