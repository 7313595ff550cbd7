/* Clocks: the wall clock as RFC 3339 UTC timestamps with microseconds (the audit log's times), and
 * the monotonic clock in microseconds for latencies and deadlines, with the condition-variable
 * set-up that waits on it. All functions are thread-safe. */
#ifndef PGCL_CLOCK_H
#define PGCL_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define PGCL_TIMESTAMP_LEN 27 /* 2026-11-21T10:33:00.123456Z */

/* Current time as RFC 3339 UTC with microseconds. */
void pgcl_timestamp_now(char out[PGCL_TIMESTAMP_LEN + 1]);
/* The same format for now + offset_s seconds. */
void pgcl_timestamp_after(int64_t offset_s, char out[PGCL_TIMESTAMP_LEN + 1]);
/* The same format for now + offset_us microseconds (the format's resolution). */
void pgcl_timestamp_after_us(int64_t offset_us, char out[PGCL_TIMESTAMP_LEN + 1]);

/* Monotonic clock in microseconds (for latencies and deadlines). */
int64_t pgcl_monotonic_us(void);

/* Initialises cond so that pthread_cond_timedwait() on it reads deadlines on the monotonic clock
 * (pgcl_monotonic_us's), which wall-clock steps do not move. */
void pgcl_cond_init_monotonic(pthread_cond_t *cond);

/* The deadline t_us (on pgcl_monotonic_us's clock) as a timespec for pthread_cond_timedwait() on a
 * cond made by pgcl_cond_init_monotonic(). */
struct timespec pgcl_monotonic_timespec(int64_t t_us);

#endif
