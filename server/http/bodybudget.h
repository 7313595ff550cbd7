/* The memory budget for request bodies (--max-body-memory). Every connection buffers its
 * whole request body before parsing it, so without a bound the daemon's memory grows with
 * connections x body size (64 connections sending 256-embedding JSON batches held 160 MiB). A
 * scoring request reserves its body's size here before buffering it, and grows the reservation by
 * its arrays once it is parsed (pgcld_request_hold_memory); while the requests already admitted
 * hold the budget, the next one waits (a blocked thread in pgcld_body_budget_reserve, or a
 * suspended connection with pgcld_body_budget_reserve_async, as the server does), and since
 * nothing more is read from its socket, TCP flow control holds the client back. Admitted bodies make progress on their own (they only
 * need their client, the compute workers and the audit writer), so waiting cannot deadlock.
 *
 * Requests are admitted first come, first served. The first in line is admitted when nothing is
 * reserved, even past the budget: one body larger than the budget (but within --max-body-bytes)
 * is still served, alone.
 *
 * Threads: reserve, grow, release and stats from any thread; create and destroy from one. The
 * budget runs one thread of its own: the timer of the queued asynchronous waiters' deadlines. */
#ifndef PGCLD_BODYBUDGET_H
#define PGCLD_BODYBUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pgcld_body_budget pgcld_body_budget;

/* limit_bytes is read on every reservation (so a reload applies at once); <= 0 means no budget:
 * reservations are only counted. NULL when out of memory (or no timer thread could start). */
pgcld_body_budget *pgcld_body_budget_create(const _Atomic long *limit_bytes);
void pgcld_body_budget_destroy(pgcld_body_budget *b); /* accepts NULL; nothing may be waiting */

/* Reserves `bytes`, waiting while others wait before it, or while other reservations hold the
 * budget and `bytes` does not fit beside them. Returns true once reserved, or false (nothing
 * reserved, and out of the queue) when deadline_us (on pgcl_monotonic_us's clock) passes first. */
bool pgcld_body_budget_reserve(pgcld_body_budget *b, size_t bytes, int64_t deadline_us);

/* A request waiting for room without holding a thread (the event-driven server suspends its
 * connection meanwhile): the caller's storage, in the queue from pgcld_body_budget_reserve_async
 * until its wake has run. Fields are the budget's. */
typedef struct pgcld_body_wait {
    size_t bytes;
    int64_t deadline_us;
    void (*wake)(void *ctx); /* NULL for a thread blocked in pgcld_body_budget_reserve */
    void *ctx;
    bool admitted; /* set before wake: reserved (true), or the deadline passed first (false) */
    struct pgcld_body_wait *next;
} pgcld_body_wait;

/* The form of pgcld_body_budget_reserve that never waits on the caller's thread, in the same
 * first-come-first-served queue: returns true when `bytes` were reserved at once; otherwise queues
 * w and returns false, and later wake(ctx) is called exactly once, after w->admitted was set (true:
 * reserved; false: deadline_us passed first, nothing reserved, out of the queue): from the thread
 * of the release that made room, or from the budget's own timer thread at the deadline. wake must
 * be cheap and must not call back into the budget. */
bool pgcld_body_budget_reserve_async(pgcld_body_budget *b, pgcld_body_wait *w, size_t bytes, int64_t deadline_us,
                                     void (*wake)(void *ctx), void *ctx);

/* Adds `bytes` to a reservation already held, without waiting (a body without Content-Length
 * growing chunk by chunk: waiting halfway through could deadlock two such bodies). */
void pgcld_body_budget_grow(pgcld_body_budget *b, size_t bytes);

/* Gives back `bytes` of what reserve and grow took, and wakes the waiters. */
void pgcld_body_budget_release(pgcld_body_budget *b, size_t bytes);

/* Bytes reserved now and requests waiting now (for /metrics). */
void pgcld_body_budget_stats(pgcld_body_budget *b, long long *reserved, int *waiting);

#endif
