/* Fleet checkpoints: one signed statement over the heads of every writer's chain of a PostgreSQL
 * audit store (issue 17; docs/audit.md, "Fleet checkpoints"), beside the single-chain checkpoints
 * of signing.h, in a format of their own so that a verifier that only knows the single-chain format
 * refuses a fleet checkpoint instead of misreading it.
 *
 * Statement (the signed bytes), format version 1:
 *     "pgcld-fleet-checkpoint-v1\n" <created_at> "\n" <n_writers> "\n"
 *     then, for each writer in strcmp order of writer_id (bytewise, as COLLATE "C"):
 *     <head_seq> " " <head_hash> " " <log_root> " " <writer_id> "\n"
 * with log_root the root of that writer's log tree over its entries 1..head_seq (chain_proof.h).
 * A writer id is 1 to 128 bytes with no control character (so the statement has one reading).
 * File: the JSON object {"format": "pgcld-fleet-checkpoint", "version": 1, "created_at",
 * "writers": [{"writer_id", "head_seq", "head_hash", "log_root"}...], "public_key", "signature"}.
 *
 * Thread-safe (no shared state); needs sodium_init() first, as signing.h. */
#ifndef PGCL_FLEET_CHECKPOINT_H
#define PGCL_FLEET_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "signing.h"
#include "status.h"

struct json_t;

#define PGCL_FLEET_CHECKPOINT_FORMAT "pgcld-fleet-checkpoint"
#define PGCL_FLEET_CHECKPOINT_VERSION 1
#define PGCL_FLEET_WRITER_ID_MAX 128
#define PGCL_FLEET_WRITERS_MAX 4096 /* writers in one checkpoint */

typedef struct pgcl_fleet_head {
    char writer_id[PGCL_FLEET_WRITER_ID_MAX + 1];
    int64_t head_seq;
    char head_hash[65];
    char log_root[65];
} pgcl_fleet_head;

typedef struct pgcl_fleet_checkpoint {
    int version;
    int n_heads;
    pgcl_fleet_head *heads; /* (n_heads), malloc'd, in strcmp order of writer_id */
    char created_at[65];
    char public_key[PGCL_PUBLIC_KEY_HEX_LEN + 1];
    char signature[PGCL_SIGNATURE_HEX_LEN + 1];
    char file[PGCL_CHECKPOINT_PATH_MAX];
} pgcl_fleet_checkpoint;

/* Frees heads; accepts NULL and a zeroed struct. */
void pgcl_fleet_checkpoint_release(pgcl_fleet_checkpoint *cp);

/* True when id is a writer id a fleet statement can hold (1..128 bytes, no control character). */
bool pgcl_fleet_writer_id_ok(const char *id);

/* The statement signed for cp, malloc'd (NUL-terminated; *len without the NUL); NULL when out of
 * memory or a head is malformed (a writer id that is not pgcl_fleet_writer_id_ok, heads not in
 * strictly increasing strcmp order). */
char *pgcl_fleet_checkpoint_statement(const pgcl_fleet_checkpoint *cp, size_t *len);

/* The inverse of pgcl_fleet_checkpoint_statement: the created_at and heads of a statement (as
 * recorded in audit_checkpoints and audit_cuts) back into cp, zeroed first (heads malloc'd: release
 * it); public_key, signature and file are the caller's to fill. False when text is not a fleet
 * statement of this form (out of memory too). Its signature is not checked here: a statement whose
 * heads were read back wrongly fails pgcl_fleet_checkpoint_verify. */
bool pgcl_fleet_checkpoint_parse_statement(const char *text, pgcl_fleet_checkpoint *cp);

/* Signs cp's statement (its heads and created_at set) with the key file at key_path: fills
 * public_key and signature. */
pgcl_status pgcl_fleet_checkpoint_sign(pgcl_fleet_checkpoint *cp, const char *key_path, char *err, int cap);

/* Checks cp's signature (and signer, unless expected_public_hex is NULL); PGCL_ERR_MISMATCH if bad,
 * PGCL_ERR_FORMAT when its heads cannot make a statement. */
pgcl_status pgcl_fleet_checkpoint_verify(const pgcl_fleet_checkpoint *cp, const char *expected_public_hex, char *err,
                                         int cap);

/* The sum of cp's heads' seqs: the fleet's entries, which grows whenever one chain grows (so one
 * sum is one state of the fleet: the default file name, the head signer's log line). */
int64_t pgcl_fleet_checkpoint_entries(const pgcl_fleet_checkpoint *cp);

/* The head of writer_id in cp, or NULL. */
const pgcl_fleet_head *pgcl_fleet_checkpoint_head(const pgcl_fleet_checkpoint *cp, const char *writer_id);

/* The file's JSON object (new reference; NULL when out of memory). */
struct json_t *pgcl_fleet_checkpoint_to_json(const pgcl_fleet_checkpoint *cp);

/* Fills out (heads malloc'd: release it, also on error) from a fleet checkpoint's JSON object,
 * each member checked for form; name names the source in err. PGCL_ERR_FORMAT (not a fleet
 * checkpoint), PGCL_ERR_UNSUPPORTED (another version). The signature is not checked here. */
pgcl_status pgcl_fleet_checkpoint_from_json(const struct json_t *root, const char *name, pgcl_fleet_checkpoint *out,
                                            char *err, int cap);

/* True when the JSON object is a fleet checkpoint's (its "format"). */
bool pgcl_fleet_checkpoint_json_is_fleet(const struct json_t *root);

/* Reads and checks the file at path: format, and the signature by its own key, which must equal
 * expected_public_hex unless that is NULL. Errors as pgcl_checkpoint_read. Release out. */
pgcl_status pgcl_fleet_checkpoint_read(const char *path, const char *expected_public_hex, pgcl_fleet_checkpoint *out,
                                       char *err, int cap);

/* Writes cp's file atomically at out_file, or, when that is NULL, at
 * <out_dir>/fleet-checkpoint-<pgcl_fleet_checkpoint_entries>.json (a newer checkpoint of the
 * same heads replaces the older). Sets cp->file. */
pgcl_status pgcl_fleet_checkpoint_write(pgcl_fleet_checkpoint *cp, const char *out_file, const char *out_dir, char *err,
                                        int cap);

#endif
