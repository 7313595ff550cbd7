/* Identifiers for the audit log: UUIDv7 (RFC 9562; 48-bit Unix milliseconds, a 12-bit
 * sub-millisecond counter that keeps ids strictly increasing within this process, 62 random bits
 * from libsodium) and hex SHA-256. All functions are thread-safe. Timestamps and the monotonic
 * clock are clock.h's (included here for the files that still reach them through ids.h). */
#ifndef PGCL_IDS_H
#define PGCL_IDS_H

#include <stddef.h>

#include "clock.h"

#define PGCL_UUID_LEN 36 /* without the terminating NUL */
/* A request id: a UUIDv7 pgcld made, or the client's X-Request-Id (1..128 visible ASCII bytes,
 * server/http/trace_context.c), without the terminating NUL. */
#define PGCL_REQUEST_ID_MAX 128
/* A W3C trace id: 16 bytes as 32 lowercase hex digits, without the terminating NUL. */
#define PGCL_TRACE_ID_LEN 32

/* Writes a new UUIDv7 as 36 lowercase characters plus NUL into out. Requires sodium_init(). */
void pgcl_uuid7(char out[PGCL_UUID_LEN + 1]);

/* Writes a new random W3C trace id (16 random bytes, never all zero) as 32 lowercase hex
 * characters plus NUL into out. Requires sodium_init(). */
void pgcl_trace_id_new(char out[PGCL_TRACE_ID_LEN + 1]);

/* Lowercase hex SHA-256 of len bytes. */
void pgcl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
