/* The per-client token buckets (server/http/ratelimit.c) against a clock the test moves by hand: burst,
 * refill rate, Retry-After rounding, independence of clients, reloads of rps and burst, the fixed
 * table (least recently used bucket reused, no growth) and concurrent takers. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ratelimit.h"
#include "test_util.h"

static int64_t g_now_us = 1000000;

static int64_t fake_clock(void *arg) {
    (void)arg;
    return g_now_us;
}

static void advance_ms(int64_t ms) {
    g_now_us += ms * 1000;
}

static void test_burst_and_refill(void) {
    pgcld_ratelimit *rl = pgcld_ratelimit_create(256, fake_clock, NULL);
    CHECK(rl != NULL, "create");
    /* rps 2, burst 3: three at once, then one every 500 ms. */
    for (int i = 0; i < 3; i++)
        CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 0, "burst take %d", i);
    CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 1, "empty: retry after 1 s");
    advance_ms(499);
    CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 1, "not yet a whole token");
    advance_ms(1);
    CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 0, "a token after 500 ms");
    CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 1, "empty again");
    /* A long idle time refills to the burst, not beyond (and does not overflow). */
    advance_ms(1000LL * 1000 * 1000);
    for (int i = 0; i < 3; i++)
        CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) == 0, "refilled take %d", i);
    CHECK(pgcld_ratelimit_take(rl, "key:a", 2, 3) > 0, "burst is the cap");
    pgcld_ratelimit_destroy(rl);
}

static void test_retry_after(void) {
    pgcld_ratelimit *rl = pgcld_ratelimit_create(64, fake_clock, NULL);
    /* 1 request every 10 s is not expressible (rps is an integer); slow rates come from rps 1:
     * after the burst, the wait is ceil(time to one token) and never 0. */
    CHECK(pgcld_ratelimit_take(rl, "key:slow", 1, 1) == 0, "first");
    CHECK(pgcld_ratelimit_take(rl, "key:slow", 1, 1) == 1, "1 s to the next token");
    advance_ms(100);
    CHECK(pgcld_ratelimit_take(rl, "key:slow", 1, 1) == 1, "0.9 s rounds up to 1");
    advance_ms(900);
    CHECK(pgcld_ratelimit_take(rl, "key:slow", 1, 1) == 0, "after 1 s");
    /* A fast rate: the wait is under a second but reported as 1 (Retry-After is whole seconds). */
    for (int i = 0; i < 100; i++)
        CHECK(pgcld_ratelimit_take(rl, "key:fast", 100, 100) == 0, "fast burst %d", i);
    CHECK(pgcld_ratelimit_take(rl, "key:fast", 100, 100) == 1, "at least 1");
    advance_ms(10);
    CHECK(pgcld_ratelimit_take(rl, "key:fast", 100, 100) == 0, "10 ms is one token at 100/s");
    /* rps 0 is off: always allowed, and no bucket is made. */
    int before = pgcld_ratelimit_size(rl);
    for (int i = 0; i < 1000; i++)
        CHECK(pgcld_ratelimit_take(rl, "key:off", 0, 0) == 0, "off %d", i);
    CHECK(pgcld_ratelimit_size(rl) == before, "no bucket for rps 0");
    /* burst 0 means burst = rps. */
    for (int i = 0; i < 5; i++)
        CHECK(pgcld_ratelimit_take(rl, "key:b0", 5, 0) == 0, "burst=rps take %d", i);
    CHECK(pgcld_ratelimit_take(rl, "key:b0", 5, 0) == 1, "burst=rps exhausted");
    pgcld_ratelimit_destroy(rl);
}

static void test_clients_independent_and_reload(void) {
    pgcld_ratelimit *rl = pgcld_ratelimit_create(64, fake_clock, NULL);
    CHECK(pgcld_ratelimit_take(rl, "key:x", 1, 1) == 0, "x");
    CHECK(pgcld_ratelimit_take(rl, "key:x", 1, 1) == 1, "x empty");
    CHECK(pgcld_ratelimit_take(rl, "key:y", 1, 1) == 0, "y has its own bucket");
    CHECK(pgcld_ratelimit_take(rl, "ip:127.0.0.1", 1, 1) == 0, "an address has its own bucket");
    /* A reload that lowers the burst cuts a full bucket down to it. */
    advance_ms(60 * 1000);
    CHECK(pgcld_ratelimit_take(rl, "key:z", 10, 10) == 0, "z at burst 10");
    CHECK(pgcld_ratelimit_take(rl, "key:z", 10, 2) == 0, "z after reload to burst 2: cut to 2, one taken");
    CHECK(pgcld_ratelimit_take(rl, "key:z", 10, 2) == 0, "z: the second of the 2");
    CHECK(pgcld_ratelimit_take(rl, "key:z", 10, 2) == 1, "z empty at burst 2");
    /* Raising the rate applies at once to the refill. */
    advance_ms(10);
    CHECK(pgcld_ratelimit_take(rl, "key:z", 100, 2) == 0, "10 ms at 100/s");
    /* Names longer than the kept prefix still work (compared on the prefix). */
    char longname[200];
    memset(longname, 'k', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(pgcld_ratelimit_take(rl, longname, 1, 1) == 0, "long name");
    CHECK(pgcld_ratelimit_take(rl, longname, 1, 1) == 1, "long name limited");
    pgcld_ratelimit_destroy(rl);
}

static void test_fixed_size(void) {
    /* 64 slots (one per stripe): many clients never grow the table, and the least recently used
     * bucket of a stripe is the one reused. */
    pgcld_ratelimit *rl = pgcld_ratelimit_create(1, fake_clock, NULL);
    char name[32];
    for (int i = 0; i < 10000; i++) {
        snprintf(name, sizeof name, "ip:10.0.%d.%d", i / 256, i % 256);
        CHECK(pgcld_ratelimit_take(rl, name, 1, 1) == 0, "fresh client %d", i);
        advance_ms(1);
    }
    CHECK(pgcld_ratelimit_size(rl) == PGCLD_RATELIMIT_STRIPES, "size %d stays at the capacity",
          pgcld_ratelimit_size(rl));
    pgcld_ratelimit_destroy(rl);

    /* With room for every client, an active client keeps its bucket while others come and go. */
    rl = pgcld_ratelimit_create(4096, fake_clock, NULL);
    CHECK(pgcld_ratelimit_take(rl, "key:busy", 1, 1) == 0, "busy first");
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "key:other%d", i);
        pgcld_ratelimit_take(rl, name, 1, 1);
    }
    CHECK(pgcld_ratelimit_take(rl, "key:busy", 1, 1) == 1, "busy still limited");
    CHECK(pgcld_ratelimit_size(rl) == 1001, "1001 buckets, got %d", pgcld_ratelimit_size(rl));
    pgcld_ratelimit_destroy(rl);
}

/* Concurrent takers on the real clock: with a burst of B and a rate of 1/s, at most B + (a few
 * refilled during the run) are allowed in total. */
static pgcld_ratelimit *g_shared;
static atomic_int g_allowed;

static void *taker(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++)
        if (pgcld_ratelimit_take(g_shared, "key:shared", 1, 500) == 0) atomic_fetch_add(&g_allowed, 1);
    return NULL;
}

static void test_threads(void) {
    g_shared = pgcld_ratelimit_create(4096, NULL, NULL);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, taker, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    int allowed = atomic_load(&g_allowed);
    CHECK(allowed >= 500 && allowed <= 560, "8 threads × 2000 takes at burst 500, 1/s: %d allowed", allowed);
    pgcld_ratelimit_destroy(g_shared);
}

int main(void) {
    test_burst_and_refill();
    test_retry_after();
    test_clients_independent_and_reload();
    test_fixed_size();
    test_threads();
    return test_finish("test_ratelimit");
}
