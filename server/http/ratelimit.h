/* Per-client rate limits: one token bucket per client (an API key id, or "ip:ADDR" with --auth off)
 * in a fixed-size table, so memory does not grow with the number of clients.
 *
 * A bucket holds at most `burst` tokens and gains `rps` tokens a second; a request takes one. The
 * table has PGCLD_RATELIMIT_STRIPES stripes, each with its own mutex and a fixed number of slots;
 * a client maps to one stripe by a hash of its name. When a stripe is full, the least recently
 * used bucket of that stripe is reused. A bucket idle for burst/rps seconds is full again anyway,
 * so evicting it loses nothing; only when more clients than slots are active at once can a
 * client be handed a fresh (full) bucket early.
 *
 * Threads: pgcld_ratelimit_take() may be called from any thread; create and destroy from one. */
#ifndef PGCLD_RATELIMIT_H
#define PGCLD_RATELIMIT_H

#include <stdint.h>

#define PGCLD_RATELIMIT_STRIPES 64
#define PGCLD_RATELIMIT_NAME_LEN 64 /* longer client names are hashed and compared on this prefix */

typedef struct pgcld_ratelimit pgcld_ratelimit;

/* A monotonic clock in microseconds; arg is the clock_arg given to create. */
typedef int64_t (*pgcld_ratelimit_clock)(void *arg);

/* A table of about `capacity` buckets (rounded up to a multiple of the stripe count; at least one
 * slot per stripe). clock NULL: the monotonic clock (pgcl_monotonic_us). NULL when out of memory. */
pgcld_ratelimit *pgcld_ratelimit_create(int capacity, pgcld_ratelimit_clock clock, void *clock_arg);
void pgcld_ratelimit_destroy(pgcld_ratelimit *rl); /* accepts NULL */

/* Takes a token from the bucket of `client` (a non-empty name) that refills at rps tokens a second
 * up to burst tokens (burst < 1 is taken as max(1, rps)). rps <= 0: no limit, returns 0 at once.
 * Returns 0 when the request may go ahead, or else the whole seconds (at least 1, rounded up)
 * until a token is there: the Retry-After value. rps and burst are passed on every call, so a
 * configuration reload applies to existing buckets (a bucket over a lowered burst is cut to it). */
int pgcld_ratelimit_take(pgcld_ratelimit *rl, const char *client, long rps, long burst);

/* Buckets in use (for tests and metrics). */
int pgcld_ratelimit_size(pgcld_ratelimit *rl);

#endif
