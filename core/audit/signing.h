/* Signed checkpoints of the audit chain: Ed25519 (libsodium) signing keys, and checkpoint files that
 * state "the chain had this head at this time" under a signature. Kept away from the database, the
 * files are what makes a rewritten or truncated history detectable (see docs/audit.md).
 *
 * Signing key file: one line, the hex of libsodium's 64-byte Ed25519 secret key (seed ‖ public
 * key), mode 0600. Checkpoint statement (the signed bytes), version 2 (written since issue 16):
 *     "pgcld-audit-checkpoint-v2\n<head_seq>\n<head_hash>\n<log_root>\n<created_at>\n"
 * with log_root the root of the log-wide Merkle tree over entries 1..head_seq (chain_proof.h);
 * version 1 (still read and verified) has no log_root:
 *     "pgcld-audit-checkpoint-v1\n<head_seq>\n<head_hash>\n<created_at>\n"
 * Checkpoint file: the JSON object {"format": "pgcld-audit-checkpoint", "version": 2, "head_seq",
 * "head_hash", "log_root", "created_at", "public_key", "signature"} (hex strings; no log_root in
 * version 1).
 *
 * Every function is thread-safe (no shared state) and needs sodium_init() first. */
#ifndef PGCL_SIGNING_H
#define PGCL_SIGNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

struct json_t;

#define PGCL_CHECKPOINT_FORMAT "pgcld-audit-checkpoint"
#define PGCL_CHECKPOINT_VERSION 2 /* written; versions 1 and 2 are read */
#define PGCL_PUBLIC_KEY_HEX_LEN 64 /* 32 bytes */
#define PGCL_SIGNATURE_HEX_LEN 128 /* 64 bytes */
#define PGCL_CHECKPOINT_PATH_MAX 4096

typedef struct pgcl_checkpoint {
    int version; /* 1 or 2 */
    int64_t head_seq;
    char head_hash[65];
    char log_root[65]; /* version 2: the log tree's root over entries 1..head_seq; "" in version 1 */
    char created_at[65]; /* RFC 3339 UTC when made by pgcld; any text without a newline when read */
    char public_key[PGCL_PUBLIC_KEY_HEX_LEN + 1];
    char signature[PGCL_SIGNATURE_HEX_LEN + 1];
    char file[PGCL_CHECKPOINT_PATH_MAX]; /* the file it was written to or read from */
} pgcl_checkpoint;

/* Makes a new Ed25519 key pair and writes the secret key file at path (created with mode 0600;
 * an existing file is never overwritten: PGCL_ERR_IO). Writes the public key's hex into public_hex. */
pgcl_status pgcl_signing_keygen(const char *path, char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char *err, int cap);

/* Reads the secret key file at path and writes its public key's hex. Refuses a file readable or
 * writable by group or others (PGCL_ERR_INVALID), a malformed one (PGCL_ERR_FORMAT). */
pgcl_status pgcl_signing_public_key(const char *path, char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char *err,
                                    int cap);

/* Reads the secret key file at path (checked as pgcl_signing_public_key does) into sk: libsodium's
 * 64-byte Ed25519 secret key, seed ‖ public key. For other signature formats over the same key (the
 * signed notes of core/audit/log/note.h); the caller wipes sk (sodium_memzero) after use. */
pgcl_status pgcl_signing_secret_key(const char *path, unsigned char sk[64], char *err, int cap);

/* Signs msg[0:len) with the secret key file at key_path (checked as pgcl_signing_public_key does):
 * the public key's and the Ed25519 signature's hex. For statements of other formats (the fleet
 * checkpoints of fleet_checkpoint.h). */
pgcl_status pgcl_signing_sign(const char *key_path, const void *msg, size_t len,
                              char public_hex[PGCL_PUBLIC_KEY_HEX_LEN + 1], char signature_hex[PGCL_SIGNATURE_HEX_LEN + 1],
                              char *err, int cap);
/* True when signature_hex (128 hex digits) is public_hex's (64) Ed25519 signature of msg[0:len). */
bool pgcl_signing_verify(const char *public_hex, const char *signature_hex, const void *msg, size_t len);

/* Writes a checkpoint file (either format): doc as indented JSON in member order and a newline,
 * atomically (a temporary file beside path, fsync, rename, fsync of the directory). PGCL_ERR_IO
 * with err naming the file; PGCL_ERR_NOMEM when doc is NULL (its making ran out of memory) or
 * cannot be dumped. */
pgcl_status pgcl_checkpoint_write_json(const char *path, const struct json_t *doc, char *err, int cap);

/* Writes the statement signed for cp (by its version) into buf. Returns its length,
 * or -1 when it does not fit in cap bytes (NUL included). */
int pgcl_checkpoint_statement(const pgcl_checkpoint *cp, char *buf, int cap);

/* Makes a checkpoint of the chain in the database at db_path: reads the head in a read transaction,
 * signs it with the key file at key_path, writes the file atomically (temporary file, fsync,
 * rename, fsync of the directory) at out_file, or, when out_file is NULL, at
 * <out_dir>/checkpoint-<head_seq>.json (replacing an earlier checkpoint of the same head), and then
 * records it in audit_checkpoints in a short write transaction. Fills *out (out->file: the path).
 * PGCL_ERR_NOT_FOUND: the chain is empty. If only the last step fails the file exists and is valid;
 * err says so. */
pgcl_status pgcl_checkpoint_create(const char *db_path, const char *key_path, const char *out_file,
                                   const char *out_dir, pgcl_checkpoint *out, char *err, int cap);

/* As pgcl_checkpoint_create(), signing entry at_seq (its hash and the log tree's root over entries
 * 1..at_seq) instead of the head; at_seq 0 is the head. PGCL_ERR_NOT_FOUND: no such entry. The
 * file name from out_dir is then checkpoint-<at_seq>.json. Used by the archive at its cut. */
pgcl_status pgcl_checkpoint_create_at(const char *db_path, const char *key_path, int64_t at_seq, const char *out_file,
                                      const char *out_dir, pgcl_checkpoint *out, char *err, int cap);
/* Reads and checks the checkpoint file at path: its format, and its signature by its own public key,
 * which must equal expected_public_hex unless that is NULL. PGCL_ERR_IO (unreadable),
 * PGCL_ERR_FORMAT (not a checkpoint file), PGCL_ERR_UNSUPPORTED (another version), PGCL_ERR_MISMATCH
 * (the signature does not verify, or another key signed it). */
pgcl_status pgcl_checkpoint_read(const char *path, const char *expected_public_hex, pgcl_checkpoint *out, char *err,
                                 int cap);

/* Fills out from a checkpoint's JSON object (a file's, or one a proof carries): format, version,
 * head, log root (version 2), time, key and signature, each checked for form; name names the
 * source in err. The signature is not checked here (pgcl_checkpoint_verify). Errors as
 * pgcl_checkpoint_read's, but PGCL_ERR_IO. */
pgcl_status pgcl_checkpoint_from_json(const struct json_t *root, const char *name, pgcl_checkpoint *out, char *err,
                                      int cap);

/* Checks cp's signature (and signer, unless expected_public_hex is NULL); PGCL_ERR_MISMATCH if bad. */
pgcl_status pgcl_checkpoint_verify(const pgcl_checkpoint *cp, const char *expected_public_hex, char *err, int cap);

/* The JSON object in the checkpoint file at path (at most max_bytes; a checkpoint of either
 * format), for the caller to json_decref; NULL with *st and err set (PGCL_ERR_IO, PGCL_ERR_FORMAT:
 * not a JSON object, PGCL_ERR_NOMEM). */
struct json_t *pgcl_checkpoint_file_json(const char *path, long max_bytes, pgcl_status *st, char *err, int cap);

#endif
