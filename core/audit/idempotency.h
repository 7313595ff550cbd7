/* Idempotency keys of the scoring routes (table idempotency_keys, migrations 0005 and 0006).
 *
 * A request carrying an Idempotency-Key is answered once: its answer is stored in the writer's
 * transaction together with its decision rows (pgcl_idem_store), and a later request with the
 * same scope and key finds it (pgcl_idem_lookup) until it expires. Requests of the same key in
 * flight at the same time are the server's concern (server/routes/routes_score.c). */
#ifndef PGCL_IDEMPOTENCY_H
#define PGCL_IDEMPOTENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "audit.h"
#include "ids.h"
#include "status.h"

struct sqlite3;

#define PGCL_IDEM_KEY_MAX 255

/* True when key is 1..PGCL_IDEM_KEY_MAX visible ASCII characters (0x21..0x7e). */
bool pgcl_idem_key_valid(const char *key);

/* A stored answer. */
typedef struct pgcl_idem_record {
    char body_sha256[65];
    char request_sha256[65]; /* "" for a key stored before migration 0006: compare body_sha256 then */
    char request_id[PGCL_REQUEST_ID_MAX + 1];
    char *answer; /* malloc'd JSON text; the caller frees it */
} pgcl_idem_record;

/* Fills out from a stored key's columns (each NULL read as ""): the digests and the request id
 * copied, the answer duplicated (malloc). Both stores' lookups. False when out of memory. */
bool pgcl_idem_record_set(pgcl_idem_record *out, const char *body_sha256, const char *request_id, const char *answer,
                          const char *request_sha256);

/* True when a request with these digests (hex) asks what the stored one asked: its request digest
 * is the stored one, or, for a key stored before request digests were kept, its body digest is. */
bool pgcl_idem_same_request(const pgcl_idem_record *stored, const char *request_sha256, const char *body_sha256);

/* Looks (scope, key) up on a read connection. now: RFC 3339 UTC. Returns PGCL_OK with *found set
 * (an expired key is not found), or PGCL_ERR_DB with err. */
pgcl_status pgcl_idem_lookup(struct sqlite3 *db, const char *scope, const char *key, const char *now, bool *found,
                             pgcl_idem_record *out, char *err, int cap);

/* What pgcl_idem_store writes. ttl_s > 0. */
typedef struct pgcl_idem_entry {
    const char *scope, *key;
    const char *body_sha256;    /* of the body alone */
    const char *request_sha256; /* of everything that determines the answer */
    const char *request_id, *answer;
    int64_t ttl_s;
} pgcl_idem_entry;

/* An audit job (pgcl_audit_fn, ctx = const pgcl_idem_entry *): stores the entry (replacing an
 * expired one of the same key) and deletes up to 100 expired keys. Runs in the writer's
 * transaction: pass it to pgcl_audit_append_with() so that the key commits with its rows. */
pgcl_status pgcl_idem_store(pgcl_audit_txn *t, void *ctx, char *err, int cap);

#endif
