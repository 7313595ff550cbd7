/* The keyring over a source (keys.h, pgcl_keyring_open_source), with a source in memory: the keys
 * load at open; a new key is seen at once (an unknown key_id forces a check); a revocation only at
 * the next periodic check (recheck_us); a forced check at most every min_forced_us; a failed
 * change check or load keeps the previous set; the change marker is the one noted before the rows
 * of the last successful load, so a change during a load is seen at the next check; verify never
 * asks the source more often than allowed; destroy is called once, also when open fails.
 * A background source (src.background, the PostgreSQL store's): the keyring's own thread checks
 * it; a new key still verifies at once, a revocation takes effect at a periodic check, and while
 * the source hangs (a network silently dropped: its check held until the test lets it go) a known
 * key verifies and an unknown one is refused, both while the check is still held (so neither waited
 * for it: an unknown key's wait is bounded by forced_wait_us); once the source answers again the
 * keyring catches up. No check bounds seconds: the waits below poll for a state, with a deadline
 * (WAIT_US) that only a failing test reaches. */
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "ids.h"
#include "keys.h"
#include "test_util.h"

#define MAX_FAKE 8
#define WAIT_US (30 * 1000000LL) /* the deadline of a wait for a state: reached only when failing */

/* A source in memory: keys with a revoked flag, a version that every change bumps. */
typedef struct fake_source {
    char key[MAX_FAKE][PGCL_KEY_LEN + 1];
    char key_id[MAX_FAKE][PGCL_KEY_ID_LEN + 1];
    bool revoked[MAX_FAKE];
    int n;
    int version, loaded_version;
    bool fail_changed, fail_load;
    bool change_during_load; /* the next load sees one more key than its marker says */
    int changed_calls, load_calls, destroy_calls;
} fake_source;

static int add_key(fake_source *f) {
    pgcl_keys_generate(f->key[f->n], f->key_id[f->n]);
    f->version++;
    return f->n++;
}

static pgcl_status fake_changed(void *ctx, bool *changed, char *err, int cap) {
    fake_source *f = ctx;
    f->changed_calls++;
    if (f->fail_changed) {
        snprintf(err, (size_t)cap, "fake: changed fails");
        return PGCL_ERR_DB;
    }
    *changed = f->version != f->loaded_version;
    return PGCL_OK;
}

static pgcl_status fake_load(void *ctx, pgcl_keyring_row_fn add, void *sink, char *err, int cap) {
    fake_source *f = ctx;
    f->load_calls++;
    if (f->fail_load) {
        snprintf(err, (size_t)cap, "fake: load fails");
        return PGCL_ERR_DB;
    }
    int marker = f->version; /* noted before the rows */
    if (f->change_during_load) {
        f->change_during_load = false;
        add_key(f);
    }
    for (int i = 0; i < f->n; i++) {
        if (f->revoked[i]) continue;
        char digest[65];
        pgcl_sha256_hex(f->key[i], PGCL_KEY_LEN, digest);
        if (!add(sink, f->key_id[i], "fake key", "scorer", digest)) return PGCL_ERR_NOMEM;
    }
    /* a malformed row is skipped by the keyring */
    if (!add(sink, "not-a-key-id", "bad", "scorer", "00")) return PGCL_ERR_NOMEM;
    f->loaded_version = marker;
    return PGCL_OK;
}

static void fake_destroy(void *ctx) {
    ((fake_source *)ctx)->destroy_calls++;
}

static pgcl_keyring_source source_of(fake_source *f, int64_t recheck_us, int64_t min_forced_us) {
    return (pgcl_keyring_source){.name = "fake",
                                 .recheck_us = recheck_us,
                                 .min_forced_us = min_forced_us,
                                 .ctx = f,
                                 .changed = fake_changed,
                                 .load = fake_load,
                                 .destroy = fake_destroy};
}

static bool valid(pgcl_keyring *kr, const char *key) {
    pgcl_identity id;
    return pgcl_keyring_verify(kr, key, &id) == PGCL_OK;
}

/* Polls cond(kr, arg) every 10 ms until it holds or WAIT_US passes; returns its last value. */
static bool wait_until(bool (*cond)(pgcl_keyring *, const void *), pgcl_keyring *kr, const void *arg) {
    int64_t deadline = pgcl_monotonic_us() + WAIT_US;
    while (!cond(kr, arg)) {
        if (pgcl_monotonic_us() > deadline) return false;
        usleep(10000);
    }
    return true;
}

static bool verifies(pgcl_keyring *kr, const void *key) {
    return valid(kr, key);
}

static bool refused(pgcl_keyring *kr, const void *key) {
    return !valid(kr, key);
}

/* The fake source behind a lock (the keyring's thread calls it while main changes it), whose
 * change check can be held: while hold is set, changed() waits until the test clears it. */
typedef struct slow_source {
    pthread_mutex_t lock;
    pthread_cond_t released;
    fake_source f;
    bool hold;
    int held; /* checks waiting in changed() now */
} slow_source;

static pgcl_status slow_changed(void *ctx, bool *changed, char *err, int cap) {
    slow_source *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->held++;
    while (s->hold) pthread_cond_wait(&s->released, &s->lock);
    s->held--;
    pgcl_status st = fake_changed(&s->f, changed, err, cap);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static int held_checks(slow_source *s) {
    pthread_mutex_lock(&s->lock);
    int n = s->held;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static bool check_held(pgcl_keyring *kr, const void *s) {
    (void)kr;
    return held_checks((slow_source *)s) > 0;
}

static pgcl_status slow_load(void *ctx, pgcl_keyring_row_fn add, void *sink, char *err, int cap) {
    slow_source *s = ctx;
    pthread_mutex_lock(&s->lock);
    pgcl_status st = fake_load(&s->f, add, sink, err, cap);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static void slow_destroy(void *ctx) {
    fake_destroy(&((slow_source *)ctx)->f);
}

static int slow_add_key(slow_source *s) {
    pthread_mutex_lock(&s->lock);
    int i = add_key(&s->f);
    pthread_mutex_unlock(&s->lock);
    return i;
}

static void test_background_source(void) {
    char err[256];
    static slow_source s = {.lock = PTHREAD_MUTEX_INITIALIZER, .released = PTHREAD_COND_INITIALIZER};
    int a = slow_add_key(&s);
    pgcl_keyring_source src = {.name = "slow",
                               .recheck_us = 50000,
                               .min_forced_us = 0,
                               .ctx = &s,
                               .changed = slow_changed,
                               .load = slow_load,
                               .destroy = slow_destroy,
                               .background = true,
                               .forced_wait_us = 300000};
    pgcl_keyring *kr = NULL;
    CHECK(pgcl_keyring_open_source(&src, &kr, err, sizeof err) == PGCL_OK, "open background: %s", err);
    CHECK(valid(kr, s.f.key[a]), "background: the loaded key verifies");
    int b = slow_add_key(&s);
    CHECK(valid(kr, s.f.key[b]), "background: a new key verifies at once (forced check)");
    pthread_mutex_lock(&s.lock);
    s.f.revoked[a] = true;
    s.f.version++;
    pthread_mutex_unlock(&s.lock);
    CHECK(wait_until(refused, kr, s.f.key[a]), "background: a revocation is seen at a periodic check");

    /* the source hangs (its check held until released below): requests do not wait for it */
    pthread_mutex_lock(&s.lock);
    s.hold = true;
    pthread_mutex_unlock(&s.lock);
    CHECK(wait_until(check_held, kr, &s), "background: the keyring's thread is inside the held check");
    for (int i = 0; i < 20; i++) {
        CHECK(valid(kr, s.f.key[b]), "background: a known key verifies while the source hangs");
        usleep(10000); /* over several 50 ms recheck intervals: rechecks fall due, none is waited on */
    }
    int c = slow_add_key(&s);
    CHECK(!valid(kr, s.f.key[c]), "background: an unknown key is refused while the source hangs");
    CHECK(pgcl_keyring_count_active(kr) == 1, "background: count_active answers from memory");
    /* every answer above came while the check was still held: none of them waited for it */
    CHECK(held_checks(&s) > 0, "background: the check was held throughout");
    pthread_mutex_lock(&s.lock);
    s.hold = false;
    pthread_cond_broadcast(&s.released);
    pthread_mutex_unlock(&s.lock);
    CHECK(wait_until(verifies, kr, s.f.key[c]), "background: the keyring catches up once the source answers");
    CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK && pgcl_keyring_count_active(kr) == 2,
          "background: reload: %s", err);
    pgcl_keyring_close(kr);
    CHECK(s.f.destroy_calls == 1, "background: destroyed once at close");
    sodium_memzero(&s.f, sizeof s.f);
}

int main(void) {
    CHECK(sodium_init() >= 0, "sodium_init");
    char err[256];

    /* open fails: the source is destroyed once, nothing is returned */
    fake_source broken = {.fail_load = true};
    pgcl_keyring_source src = source_of(&broken, 100000, 0);
    pgcl_keyring *kr = (pgcl_keyring *)&broken;
    CHECK(pgcl_keyring_open_source(&src, &kr, err, sizeof err) == PGCL_ERR_DB && kr == NULL,
          "open with a failing load");
    CHECK(broken.destroy_calls == 1, "destroyed once on failure: %d", broken.destroy_calls);

    fake_source f = {0};
    int a = add_key(&f);
    src = source_of(&f, 200000, 0);
    CHECK(pgcl_keyring_open_source(&src, &kr, err, sizeof err) == PGCL_OK, "open: %s", err);
    CHECK(valid(kr, f.key[a]), "the loaded key verifies");
    CHECK(pgcl_keyring_count_active(kr) == 1, "one active key (the malformed row skipped)");

    /* a new key: its unknown key_id forces a check at once */
    int b = add_key(&f);
    CHECK(valid(kr, f.key[b]), "a key added after open verifies at once");

    /* a revocation: seen at the next periodic check only, not before */
    f.revoked[a] = true;
    f.version++;
    CHECK(valid(kr, f.key[a]), "a revoked key still verifies before the recheck interval");
    CHECK(wait_until(refused, kr, f.key[a]), "... and is refused after it");
    CHECK(valid(kr, f.key[b]), "the other key still verifies");

    /* a wrong secret for a known key_id never verifies, and asks nothing */
    char wrong[PGCL_KEY_LEN + 1];
    memcpy(wrong, f.key[b], sizeof wrong);
    wrong[PGCL_KEY_LEN - 2] = wrong[PGCL_KEY_LEN - 2] == 'A' ? 'B' : 'A';
    int calls = f.changed_calls;
    CHECK(!valid(kr, wrong), "a wrong secret is refused");
    CHECK(f.changed_calls == calls, "a known key_id forces no check");

    /* a failing source keeps the previous set */
    f.fail_changed = true;
    int c = add_key(&f);
    CHECK(!valid(kr, f.key[c]), "a new key is not seen while the source fails");
    CHECK(valid(kr, f.key[b]), "the previous set stays in force");
    f.fail_changed = false;
    f.fail_load = true;
    int loads = f.load_calls; /* verify makes the periodic check once it is due: it tries to load */
    for (int64_t deadline = pgcl_monotonic_us() + WAIT_US; f.load_calls == loads && pgcl_monotonic_us() < deadline;) {
        CHECK(valid(kr, f.key[b]), "the previous set stays in force while the load fails");
        usleep(10000);
    }
    CHECK(f.load_calls > loads, "a periodic check tried to load");
    CHECK(!valid(kr, f.key[c]), "nor while the load fails");
    CHECK(valid(kr, f.key[b]), "the previous set stays in force (load)");
    f.fail_load = false;
    CHECK(valid(kr, f.key[c]), "seen once the source works again");

    /* a change during a load: its marker is the one before, so the next check loads again */
    f.change_during_load = true;
    int d_before = f.n;
    f.version++; /* something changed: the next check loads (and meets the concurrent change) */
    loads = f.load_calls;
    for (int64_t deadline = pgcl_monotonic_us() + WAIT_US; f.load_calls == loads && pgcl_monotonic_us() < deadline;) {
        pgcl_keyring_count_active(kr); /* it makes verify's periodic check once it is due */
        usleep(10000);
    }
    CHECK(pgcl_keyring_count_active(kr) == 3, "b, c and the key added during the load: %d",
          pgcl_keyring_count_active(kr));
    CHECK(f.loaded_version != f.version, "the loaded marker predates the concurrent change");
    /* the next periodic check loads again: the marker it kept is older than the source's */
    for (int64_t deadline = pgcl_monotonic_us() + WAIT_US; f.loaded_version != f.version && pgcl_monotonic_us() < deadline;) {
        valid(kr, f.key[d_before]);
        usleep(10000);
    }
    CHECK(valid(kr, f.key[d_before]), "the concurrent key verifies");
    CHECK(f.loaded_version == f.version, "the change was loaded again");

    /* reload() loads whether or not anything changed */
    loads = f.load_calls;
    CHECK(pgcl_keyring_reload(kr, err, sizeof err) == PGCL_OK && f.load_calls == loads + 1, "reload: %s", err);
    pgcl_keyring_close(kr);
    CHECK(f.destroy_calls == 1, "destroyed once at close");

    /* min_forced_us: unknown key_ids force at most one check per interval */
    fake_source g = {0};
    add_key(&g);
    src = source_of(&g, 10 * 1000000LL, 300000);
    CHECK(pgcl_keyring_open_source(&src, &kr, err, sizeof err) == PGCL_OK, "open g: %s", err);
    char unknown[PGCL_KEY_LEN + 1], unknown_id[PGCL_KEY_ID_LEN + 1];
    pgcl_keys_generate(unknown, unknown_id);
    calls = g.changed_calls;
    for (int i = 0; i < 50; i++)
        CHECK(!valid(kr, unknown), "an unknown key is refused");
    CHECK(g.changed_calls - calls == 1, "50 unknown key_ids in a burst: %d checks, want 1", g.changed_calls - calls);
    int late = add_key(&g);
    CHECK(!valid(kr, g.key[late]), "within the forced interval a new key waits");
    CHECK(wait_until(verifies, kr, g.key[late]), "after it, the new key forces a check and verifies");
    pgcl_keyring_close(kr);
    sodium_memzero(&f, sizeof f);
    sodium_memzero(&g, sizeof g);
    test_background_source();
    return test_finish("test_keyring_source");
}
