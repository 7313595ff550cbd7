/* Identifiers and timestamps for the audit log: UUIDv7 (RFC 9562; 48-bit Unix milliseconds, a
 * 12-bit sub-millisecond counter that keeps ids strictly increasing within this process, 62 random
 * bits from libsodium), RFC 3339 timestamps, and hex SHA-256. All functions are thread-safe. */
#ifndef PGCL_IDS_H
#define PGCL_IDS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define PGCL_UUID_LEN 36      /* without the terminating NUL */
#define PGCL_TIMESTAMP_LEN 27 /* 2026-11-21T10:33:00.123456Z */

/* Writes a new UUIDv7 as 36 lowercase characters plus NUL into out. Requires sodium_init(). */
void pgcl_uuid7(char out[PGCL_UUID_LEN + 1]);

/* Current time as RFC 3339 UTC with microseconds. */
void pgcl_timestamp_now(char out[PGCL_TIMESTAMP_LEN + 1]);
/* The same format for now + offset_s seconds. */
void pgcl_timestamp_after(int64_t offset_s, char out[PGCL_TIMESTAMP_LEN + 1]);

/* Monotonic clock in microseconds (for latencies and deadlines). */
int64_t pgcl_monotonic_us(void);

/* Initialises cond so that pthread_cond_timedwait() on it reads deadlines on the monotonic clock
 * (pgcl_monotonic_us's), which wall-clock steps do not move. */
void pgcl_cond_init_monotonic(pthread_cond_t *cond);

/* The deadline t_us (on pgcl_monotonic_us's clock) as a timespec for pthread_cond_timedwait() on a
 * cond made by pgcl_cond_init_monotonic(). */
struct timespec pgcl_monotonic_timespec(int64_t t_us);

/* Lowercase hex SHA-256 of len bytes. */
void pgcl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
