/* API keys: the daemon's keyring (see keys.h for the contract): a sorted in-memory copy of the
 * active keys, refreshed when the database changes, by a refresher thread over a keyring source; the
 * SQLite source (PRAGMA data_version on a read connection of its own). Keys themselves are keys.c. */
#include "keys.h"
#include "keys_internal.h"

#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "clock.h"
#include "db.h"
#include "ids.h"
#include "log.h"
#include "log/record_rows.h"
#include "sqlite_log.h"

#define RECHECK_US 1000000 /* the SQLite keyring looks at data_version at most this often */
#define WARN_US 1000000    /* a keyring warns of failed checks at most this often */

/* ---- the keyring ---- */

typedef struct key_entry {
    char key_id[PGCL_KEY_ID_LEN + 1];
    char name[PGCL_KEY_NAME_MAX + 1];
    pgcl_role role;
    unsigned char digest[crypto_hash_sha256_BYTES];
} key_entry;

struct pgcl_keyring {
    pthread_mutex_t lock; /* guards every field below, the source's calls included */
    bool lock_ready;
    pgcl_keyring_source src; /* where the keys come from (owns src.ctx) */
    key_entry *keys;         /* (n) sorted by key_id */
    int n;
    int64_t last_check_us;        /* monotonic time of the last change check */
    int64_t last_forced_check_us; /* ... of the last one forced by an unknown key_id */
    int64_t last_warning_us;      /* ... of the last failed check's warning */
    /* a background source (src.background) only: */
    pthread_mutex_t source_lock; /* one source call at a time (the refresher, reload); taken before lock */
    pthread_cond_t wake;         /* the refresher waits on it (with lock) */
    pthread_cond_t checked;      /* a check finished (with lock) */
    pthread_t refresher;
    bool refresher_running, stopping;
    bool forced_pending;        /* verify() met an unknown key_id since the last check started */
    uint64_t checks_started;    /* background checks, started and finished (one at a time) */
    uint64_t checks_done;
};

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const key_entry *)a)->key_id, ((const key_entry *)b)->key_id);
}

/* The growing array a load fills (the source's pgcl_keyring_row_fn sink). */
typedef struct key_load {
    const char *source_name;
    key_entry *keys;
    int n, n_alloc;
} key_load;

/* Takes one active key from the source: a malformed row is skipped with a warning (it can never
 * verify); false only when out of memory. */
static bool take_active_key(void *sink, const char *key_id, const char *name, const char *role, const char *hex) {
    key_load *l = sink;
    if (l->n == l->n_alloc) {
        int n_alloc = l->n_alloc ? 2 * l->n_alloc : 16;
        key_entry *grown = realloc(l->keys, (size_t)n_alloc * sizeof *l->keys);
        if (!grown) return false;
        l->keys = grown;
        l->n_alloc = n_alloc;
    }
    key_entry *e = &l->keys[l->n];
    size_t hex_len = hex ? strlen(hex) : 0;
    if (!keys_key_id_wellformed(key_id) || !name || strlen(name) > PGCL_KEY_NAME_MAX ||
        pgcl_role_parse(role, &e->role) != 0 || hex_len != 2 * sizeof e->digest ||
        sodium_hex2bin(e->digest, sizeof e->digest, hex, hex_len, NULL, NULL, NULL) != 0) {
        pgcl_log_warn("keyring: %s: ignoring the malformed api_keys row %s", l->source_name,
                      keys_key_id_wellformed(key_id) ? key_id : "(bad key_id)");
        return true;
    }
    memcpy(e->key_id, key_id, PGCL_KEY_ID_LEN + 1);
    memcpy(e->name, name, strlen(name) + 1);
    l->n++;
    return true;
}

/* Reads the active keys from the source into l (sorted by key_id); on failure l is empty. The
 * caller serialises source calls (lock, or source_lock for a background source). */
static pgcl_status load_keys(pgcl_keyring *kr, key_load *l, char *err, int cap) {
    *l = (key_load){.source_name = kr->src.name};
    pgcl_status st = kr->src.load(kr->src.ctx, take_active_key, l, err, cap);
    if (st != PGCL_OK) {
        free(l->keys);
        *l = (key_load){0};
        return st;
    }
    if (l->n > 1) qsort(l->keys, (size_t)l->n, sizeof *l->keys, entry_cmp);
    return PGCL_OK;
}

/* Puts a loaded set in force (taking l's array). Caller holds the lock (or owns kr). */
static void swap_in_locked(pgcl_keyring *kr, key_load *l) {
    free(kr->keys);
    kr->keys = l->keys;
    kr->n = l->n;
}

/* Reads the active keys from the source into a new array and swaps it in; on failure the old set
 * stays. Caller holds the lock (or owns kr exclusively). */
static pgcl_status load_locked(pgcl_keyring *kr, char *err, int cap) {
    key_load l;
    pgcl_status st = load_keys(kr, &l, err, cap);
    if (st == PGCL_OK) swap_in_locked(kr, &l);
    return st;
}

/* A failed check's warning, at most one line a second while it lasts. Caller holds the lock. */
static void warn_failed_check_locked(pgcl_keyring *kr, const char *err, int64_t now) {
    if (now - kr->last_warning_us < WARN_US) return;
    kr->last_warning_us = now;
    pgcl_log_warn("keyring: %s; keeping the previous %d active keys, retrying in %g s", err, kr->n,
                  (double)kr->src.recheck_us / 1e6);
}

/* At most once per src.recheck_us (or at once when forced by an unknown key_id, at most once per
 * src.min_forced_us): re-reads the keys if the source says they changed since the last load.
 * Caller holds the lock. */
static void refresh_locked(pgcl_keyring *kr, bool now_please) {
    int64_t now = pgcl_monotonic_us();
    if (!now_please && now - kr->last_check_us < kr->src.recheck_us) return;
    if (now_please && now - kr->last_forced_check_us < kr->src.min_forced_us) return;
    kr->last_check_us = now;
    if (now_please) kr->last_forced_check_us = now;
    char err[ERR_CAP];
    bool changed = false;
    pgcl_status st = kr->src.changed(kr->src.ctx, &changed, err, sizeof err);
    if (st == PGCL_OK && !changed) return;
    if (st == PGCL_OK) st = load_locked(kr, err, sizeof err);
    if (st != PGCL_OK) warn_failed_check_locked(kr, err, now);
}

/* ---- a background source: the refresher thread ----
 * The refresher makes every call to the source, outside the keyring's lock (under source_lock),
 * and takes the lock only to swap a new set in: verify() never waits on the source's I/O, except
 * that for an unknown key_id it asks for a check and waits for it at most src.forced_wait_us. */

/* One check: asks changed(), loads when the keys may differ, swaps the new set in. */
static void background_check(pgcl_keyring *kr) {
    char err[ERR_CAP];
    bool changed = false;
    key_load l = {0};
    pthread_mutex_lock(&kr->source_lock);
    pgcl_status st = kr->src.changed(kr->src.ctx, &changed, err, sizeof err);
    if (st == PGCL_OK && changed) st = load_keys(kr, &l, err, sizeof err);
    pthread_mutex_lock(&kr->lock); /* swapped in under source_lock: loads go in in their order */
    pthread_mutex_unlock(&kr->source_lock);
    if (st == PGCL_OK && changed) swap_in_locked(kr, &l);
    if (st != PGCL_OK) warn_failed_check_locked(kr, err, pgcl_monotonic_us());
    pthread_mutex_unlock(&kr->lock);
}

static void *refresher_main(void *arg) {
    pgcl_keyring *kr = arg;
    pthread_mutex_lock(&kr->lock);
    while (!kr->stopping) {
        int64_t now = pgcl_monotonic_us();
        int64_t periodic_at = kr->last_check_us + kr->src.recheck_us;
        int64_t forced_at = kr->last_forced_check_us + kr->src.min_forced_us;
        bool forced = kr->forced_pending && now >= forced_at;
        if (!forced && now < periodic_at) {
            int64_t until = kr->forced_pending && forced_at < periodic_at ? forced_at : periodic_at;
            struct timespec deadline = pgcl_monotonic_timespec(until);
            pthread_cond_timedwait(&kr->wake, &kr->lock, &deadline);
            continue;
        }
        kr->last_check_us = now;
        if (forced) kr->last_forced_check_us = now;
        kr->forced_pending = false;
        kr->checks_started++;
        pthread_mutex_unlock(&kr->lock);
        background_check(kr);
        pthread_mutex_lock(&kr->lock);
        kr->checks_done++;
        PGCL_ASSERT(kr->checks_done == kr->checks_started);
        pthread_cond_broadcast(&kr->checked);
    }
    pthread_mutex_unlock(&kr->lock);
    return NULL;
}

/* verify()'s unknown key_id on a background source: asks the refresher for a check that starts
 * after now and waits for it, at most src.forced_wait_us. Caller holds the lock. */
static void await_forced_check_locked(pgcl_keyring *kr) {
    uint64_t target = kr->checks_started + 1; /* a check in flight may predate the key */
    kr->forced_pending = true;
    pthread_cond_signal(&kr->wake);
    struct timespec deadline = pgcl_monotonic_timespec(pgcl_monotonic_us() + kr->src.forced_wait_us);
    while (kr->checks_done < target && !kr->stopping)
        if (pthread_cond_timedwait(&kr->checked, &kr->lock, &deadline) != 0) break;
}

pgcl_status pgcl_keyring_open_source(const pgcl_keyring_source *src, pgcl_keyring **out, char *err, int cap) {
    *out = NULL;
    PGCL_ASSERT(src && src->name && src->changed && src->load && src->destroy && src->recheck_us > 0);
    PGCL_ASSERT(!src->background || src->forced_wait_us > 0);
    pgcl_keyring *kr = calloc(1, sizeof *kr);
    if (!kr) {
        src->destroy(src->ctx);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    kr->src = *src;
    pgcl_status st = PGCL_ERR_NOMEM;
    if (pthread_mutex_init(&kr->lock, NULL) != 0) {
        pgcl_errorf(err, cap, "cannot create the keyring lock");
        goto fail;
    }
    kr->lock_ready = true;
    if ((st = load_locked(kr, err, cap)) != PGCL_OK) goto fail;
    kr->last_check_us = pgcl_monotonic_us();
    kr->last_forced_check_us = kr->last_check_us - kr->src.min_forced_us;
    kr->last_warning_us = kr->last_check_us - WARN_US;
    if (kr->src.background) {
        pthread_mutex_init(&kr->source_lock, NULL);
        pgcl_cond_init_monotonic(&kr->wake);
        pgcl_cond_init_monotonic(&kr->checked);
        if (pthread_create(&kr->refresher, NULL, refresher_main, kr) != 0) {
            pthread_cond_destroy(&kr->checked);
            pthread_cond_destroy(&kr->wake);
            pthread_mutex_destroy(&kr->source_lock);
            pgcl_errorf(err, cap, "cannot start the keyring's thread");
            st = PGCL_ERR_NOMEM;
            goto fail;
        }
        kr->refresher_running = true;
    }
    *out = kr;
    return PGCL_OK;
fail:
    pgcl_keyring_close(kr);
    return st;
}

/* ---- the SQLite source: PRAGMA data_version on a read connection of its own ---- */

typedef struct sqlite_key_source {
    char *path;
    sqlite3 *db;           /* read-only use (query_only) */
    sqlite3_stmt *version; /* PRAGMA data_version */
    sqlite3_stmt *select;  /* the active keys */
    int64_t data_version;  /* as read just before the rows of the last successful load */
} sqlite_key_source;

static pgcl_status read_data_version(sqlite_key_source *ks, int64_t *out, char *err, int cap) {
    sqlite3_reset(ks->version);
    int rc = sqlite3_step(ks->version);
    if (rc != SQLITE_ROW) {
        pgcl_errorf(err, cap, "%s: data_version: %s", ks->path, sqlite3_errmsg(ks->db));
        sqlite3_reset(ks->version);
        return PGCL_ERR_DB;
    }
    *out = sqlite3_column_int64(ks->version, 0);
    sqlite3_reset(ks->version);
    return PGCL_OK;
}

/* Whether any connection, in this process or another, committed to the database since the last
 * load (data_version moved). */
static pgcl_status sqlite_keys_changed(void *ctx, bool *changed, char *err, int cap) {
    sqlite_key_source *ks = ctx;
    int64_t version;
    pgcl_status st = read_data_version(ks, &version, err, cap);
    *changed = st == PGCL_OK && version != ks->data_version;
    return st;
}

/* data_version is read first, so a commit that lands during the read is seen again at the next
 * check, never missed. */
static pgcl_status sqlite_keys_load(void *ctx, pgcl_keyring_row_fn add, void *sink, char *err, int cap) {
    sqlite_key_source *ks = ctx;
    int64_t version;
    pgcl_status st = read_data_version(ks, &version, err, cap);
    if (st != PGCL_OK) return st;
    int rc;
    sqlite3_reset(ks->select);
    while ((rc = sqlite3_step(ks->select)) == SQLITE_ROW) {
        if (!add(sink, (const char *)sqlite3_column_text(ks->select, 0),
                 (const char *)sqlite3_column_text(ks->select, 1), (const char *)sqlite3_column_text(ks->select, 2),
                 (const char *)sqlite3_column_text(ks->select, 3))) {
            sqlite3_reset(ks->select);
            pgcl_errorf(err, cap, "out of memory");
            return PGCL_ERR_NOMEM;
        }
    }
    if (rc != SQLITE_DONE) {
        pgcl_errorf(err, cap, "%s: api_keys: %s", ks->path, sqlite3_errmsg(ks->db));
        sqlite3_reset(ks->select);
        return PGCL_ERR_DB;
    }
    sqlite3_reset(ks->select); /* ends the read transaction */
    ks->data_version = version;
    return PGCL_OK;
}

static void sqlite_keys_destroy(void *ctx) {
    sqlite_key_source *ks = ctx;
    if (!ks) return;
    sqlite3_finalize(ks->version);
    sqlite3_finalize(ks->select);
    sqlite3_close(ks->db);
    free(ks->path);
    free(ks);
}

pgcl_status pgcl_keyring_open(const char *db_path, pgcl_keyring **out, char *err, int cap) {
    *out = NULL;
    sqlite_key_source *ks = calloc(1, sizeof *ks);
    if (!ks || !(ks->path = strdup(db_path ? db_path : ""))) {
        free(ks);
        pgcl_errorf(err, cap, "out of memory");
        return PGCL_ERR_NOMEM;
    }
    pgcl_status st = keys_db_open(db_path, &ks->db, err, cap);
    if (st != PGCL_OK) goto fail;
    st = PGCL_ERR_DB;
    pgcl_db_exec(ks->db, "PRAGMA query_only = ON", NULL, 0);
    if (sqlite3_prepare_v2(ks->db, "PRAGMA data_version", -1, &ks->version, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(ks->db, "SELECT key_id, name, role, key_sha256 FROM api_keys WHERE revoked_at IS NULL", -1,
                           &ks->select, NULL) != SQLITE_OK) {
        pgcl_errorf(err, cap, "%s: %s", ks->path, sqlite3_errmsg(ks->db));
        goto fail;
    }
    pgcl_keyring_source src = {.name = ks->path,
                               .recheck_us = RECHECK_US,
                               .min_forced_us = 0,
                               .ctx = ks,
                               .changed = sqlite_keys_changed,
                               .load = sqlite_keys_load,
                               .destroy = sqlite_keys_destroy};
    return pgcl_keyring_open_source(&src, out, err, cap);
fail:
    sqlite_keys_destroy(ks);
    return st;
}

void pgcl_keyring_close(pgcl_keyring *kr) {
    if (!kr) return;
    if (kr->refresher_running) {
        pthread_mutex_lock(&kr->lock);
        kr->stopping = true;
        pthread_cond_signal(&kr->wake);
        pthread_mutex_unlock(&kr->lock);
        pthread_join(kr->refresher, NULL);
        pthread_cond_destroy(&kr->checked);
        pthread_cond_destroy(&kr->wake);
        pthread_mutex_destroy(&kr->source_lock);
    }
    kr->src.destroy(kr->src.ctx);
    if (kr->lock_ready) pthread_mutex_destroy(&kr->lock);
    free(kr->keys);
    free(kr);
}

pgcl_status pgcl_keyring_reload(pgcl_keyring *kr, char *err, int cap) {
    if (kr->src.background) { /* the source's call outside the lock, as the refresher's */
        key_load l;
        pthread_mutex_lock(&kr->source_lock);
        pgcl_status st = load_keys(kr, &l, err, cap);
        pthread_mutex_lock(&kr->lock);
        pthread_mutex_unlock(&kr->source_lock);
        if (st == PGCL_OK) swap_in_locked(kr, &l);
        pthread_mutex_unlock(&kr->lock);
        return st;
    }
    pthread_mutex_lock(&kr->lock);
    pgcl_status st = load_locked(kr, err, cap);
    kr->last_check_us = pgcl_monotonic_us();
    pthread_mutex_unlock(&kr->lock);
    return st;
}

int pgcl_keyring_count_active(pgcl_keyring *kr) {
    pthread_mutex_lock(&kr->lock);
    if (!kr->src.background) refresh_locked(kr, false);
    int n = kr->n;
    pthread_mutex_unlock(&kr->lock);
    return n;
}

pgcl_status pgcl_keyring_verify(pgcl_keyring *kr, const char *token, pgcl_identity *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!kr || !keys_token_wellformed(token)) return PGCL_ERR_INVALID; /* before any lock or lookup */
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, (const unsigned char *)token, PGCL_KEY_LEN);
    key_entry probe;
    memcpy(probe.key_id, token, PGCL_KEY_ID_LEN);
    probe.key_id[PGCL_KEY_ID_LEN] = 0;
    pgcl_status st = PGCL_ERR_INVALID;
    pthread_mutex_lock(&kr->lock);
    if (!kr->src.background) refresh_locked(kr, false);
    const key_entry *e = kr->n ? bsearch(&probe, kr->keys, (size_t)kr->n, sizeof *kr->keys, entry_cmp) : NULL;
    if (!e) {
        /* An unknown key_id may have been created a moment ago by another process: ask the source
         * now (SQLite: one cheap PRAGMA) rather than refuse it until the next periodic check. */
        if (kr->src.background)
            await_forced_check_locked(kr);
        else
            refresh_locked(kr, true);
        e = kr->n ? bsearch(&probe, kr->keys, (size_t)kr->n, sizeof *kr->keys, entry_cmp) : NULL;
    }
    /* key_id is public, so finding it may take variable time; the digest comparison may not. */
    if (e && sodium_memcmp(e->digest, digest, sizeof digest) == 0) {
        if (out) {
            memcpy(out->key_id, e->key_id, sizeof e->key_id);
            memcpy(out->name, e->name, sizeof e->name);
            out->role = e->role;
        }
        st = PGCL_OK;
    }
    pthread_mutex_unlock(&kr->lock);
    return st;
}
