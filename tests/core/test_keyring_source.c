/* The keyring over a source (keys.h, pgcl_keyring_open_source), with a source in memory: the keys
 * load at open; a new key is seen at once (an unknown key_id forces a check); a revocation only at
 * the next periodic check (recheck_us); a forced check at most every min_forced_us; a failed
 * change check or load keeps the previous set; the change marker is the one noted before the rows
 * of the last successful load, so a change during a load is seen at the next check; verify never
 * asks the source more often than allowed; destroy is called once, also when open fails.
 * A background source (src.background, the PostgreSQL store's): the keyring's own thread checks
 * it; a new key still verifies at once, a revocation takes effect within the recheck interval, and
 * while the source hangs (a network silently dropped) a known key verifies without waiting and an
 * unknown one waits at most forced_wait_us; once the source answers again the keyring catches up. */
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

/* The fake source behind a lock (the keyring's thread calls it while main changes it), whose
 * change check can be made to hang. */
typedef struct slow_source {
    pthread_mutex_t lock;
    fake_source f;
    int64_t hang_us; /* changed() sleeps this long first (outside the lock) */
} slow_source;

static pgcl_status slow_changed(void *ctx, bool *changed, char *err, int cap) {
    slow_source *s = ctx;
    pthread_mutex_lock(&s->lock);
    int64_t hang_us = s->hang_us;
    pthread_mutex_unlock(&s->lock);
    if (hang_us > 0) usleep((useconds_t)hang_us);
    pthread_mutex_lock(&s->lock);
    pgcl_status st = fake_changed(&s->f, changed, err, cap);
    pthread_mutex_unlock(&s->lock);
    return st;
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

/* Microseconds one verify takes, and its answer. */
static int64_t timed_verify(pgcl_keyring *kr, const char *key, bool *ok) {
    int64_t t0 = pgcl_monotonic_us();
    *ok = valid(kr, key);
    return pgcl_monotonic_us() - t0;
}

static void test_background_source(void) {
    char err[256];
    static slow_source s = {.lock = PTHREAD_MUTEX_INITIALIZER};
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
    usleep(200000);
    CHECK(!valid(kr, s.f.key[a]), "background: a revocation is seen within the recheck interval");

    /* the source hangs for 2 s: requests do not wait for it */
    pthread_mutex_lock(&s.lock);
    s.hang_us = 2000000;
    pthread_mutex_unlock(&s.lock);
    usleep(150000); /* the keyring's thread is now inside the hanging check */
    int64_t worst = 0;
    for (int i = 0; i < 20; i++) {
        bool ok;
        int64_t took = timed_verify(kr, s.f.key[b], &ok);
        CHECK(ok, "background: a known key verifies while the source hangs");
        if (took > worst) worst = took;
        usleep(10000);
    }
    CHECK(worst < 50000, "background: a known key's verify took %lld us while the source hung, want < 50 ms",
          (long long)worst);
    int c = slow_add_key(&s);
    bool ok;
    int64_t took = timed_verify(kr, s.f.key[c], &ok);
    CHECK(!ok && took < 600000, "background: an unknown key waits at most forced_wait_us (%lld us, %s)",
          (long long)took, ok ? "accepted" : "refused");
    CHECK(pgcl_keyring_count_active(kr) == 1, "background: count_active answers from memory");
    pthread_mutex_lock(&s.lock);
    s.hang_us = 0;
    pthread_mutex_unlock(&s.lock);
    int64_t deadline = pgcl_monotonic_us() + 5000000;
    while (!valid(kr, s.f.key[c]) && pgcl_monotonic_us() < deadline) usleep(20000);
    CHECK(valid(kr, s.f.key[c]), "background: the keyring catches up once the source answers");
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
    usleep(250000);
    CHECK(!valid(kr, f.key[a]), "... and is refused after it");
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
    usleep(250000);
    CHECK(!valid(kr, f.key[c]), "nor while the load fails");
    CHECK(valid(kr, f.key[b]), "the previous set stays in force (load)");
    f.fail_load = false;
    CHECK(valid(kr, f.key[c]), "seen once the source works again");

    /* a change during a load: its marker is the one before, so the next check loads again */
    f.change_during_load = true;
    int d_before = f.n;
    f.version++; /* something changed: the next check loads (and meets the concurrent change) */
    usleep(250000);
    CHECK(pgcl_keyring_count_active(kr) == 3, "b, c and the key added during the load: %d",
          pgcl_keyring_count_active(kr));
    CHECK(f.loaded_version != f.version, "the loaded marker predates the concurrent change");
    usleep(250000);
    int loads = f.load_calls;
    CHECK(valid(kr, f.key[d_before]), "the concurrent key verifies");
    CHECK(f.load_calls == loads + 1 || f.loaded_version == f.version, "the change was loaded again");

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
    usleep(320000);
    CHECK(valid(kr, g.key[late]), "after it, the new key forces a check and verifies");
    pgcl_keyring_close(kr);
    sodium_memzero(&f, sizeof f);
    sodium_memzero(&g, sizeof g);
    test_background_source();
    return test_finish("test_keyring_source");
}
