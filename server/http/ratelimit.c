/* Per-client token buckets; see ratelimit.h.
 *
 * Tokens are counted in millionths (int64), so a bucket refills by exactly rps millionths per
 * microsecond and no floating point rounding creeps in. */
#include "ratelimit.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"

#define MICRO 1000000ll

typedef struct bucket {
    bool used;
    uint64_t hash;
    char name[PGCLD_RATELIMIT_NAME_LEN];
    int64_t tokens_u; /* millionths of a token */
    int64_t last_us;  /* when tokens_u was last brought up to date */
} bucket;

typedef struct stripe {
    pthread_mutex_t lock;
    bucket *slots;
} stripe;

struct pgcld_ratelimit {
    pgcld_ratelimit_clock clock;
    void *clock_arg;
    int per_stripe;
    stripe stripes[PGCLD_RATELIMIT_STRIPES];
};

static int64_t default_clock(void *arg) {
    (void)arg;
    return pgcl_monotonic_us();
}

pgcld_ratelimit *pgcld_ratelimit_create(int capacity, pgcld_ratelimit_clock clock, void *clock_arg) {
    pgcld_ratelimit *rl = calloc(1, sizeof *rl);
    if (!rl) return NULL;
    rl->clock = clock ? clock : default_clock;
    rl->clock_arg = clock_arg;
    rl->per_stripe =
        capacity > PGCLD_RATELIMIT_STRIPES ? (capacity + PGCLD_RATELIMIT_STRIPES - 1) / PGCLD_RATELIMIT_STRIPES : 1;
    for (int s = 0; s < PGCLD_RATELIMIT_STRIPES; s++) {
        rl->stripes[s].slots = calloc((size_t)rl->per_stripe, sizeof(bucket));
        if (!rl->stripes[s].slots) {
            for (int k = 0; k < s; k++) {
                pthread_mutex_destroy(&rl->stripes[k].lock);
                free(rl->stripes[k].slots);
            }
            free(rl);
            return NULL;
        }
        pthread_mutex_init(&rl->stripes[s].lock, NULL);
    }
    return rl;
}

void pgcld_ratelimit_destroy(pgcld_ratelimit *rl) {
    if (!rl) return;
    for (int s = 0; s < PGCLD_RATELIMIT_STRIPES; s++) {
        pthread_mutex_destroy(&rl->stripes[s].lock);
        free(rl->stripes[s].slots);
    }
    free(rl);
}

/* FNV-1a, 64 bits, over the first PGCLD_RATELIMIT_NAME_LEN - 1 bytes (what a bucket keeps). */
static uint64_t hash_name(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; name[i] && i < PGCLD_RATELIMIT_NAME_LEN - 1; i++) {
        h ^= (unsigned char)name[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The bucket of name in st: its own, else an unused slot, else the least recently used one. The
 * bool says whether it is new (to be filled). Caller holds the stripe's lock. */
static bucket *find_bucket(stripe *st, int n, uint64_t h, const char *name, bool *fresh) {
    bucket *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < n; i++) {
        bucket *b = &st->slots[i];
        if (!b->used) {
            if (!free_slot) free_slot = b;
            continue;
        }
        if (b->hash == h && strncmp(b->name, name, sizeof b->name - 1) == 0) {
            *fresh = false;
            return b;
        }
        if (!oldest || b->last_us < oldest->last_us) oldest = b;
    }
    *fresh = true;
    return free_slot ? free_slot : oldest;
}

int pgcld_ratelimit_take(pgcld_ratelimit *rl, const char *client, long rps, long burst) {
    if (rps <= 0) return 0;
    if (burst < 1) burst = rps;
    const int64_t cap_u = (int64_t)burst * MICRO;
    uint64_t h = hash_name(client);
    stripe *st = &rl->stripes[h % PGCLD_RATELIMIT_STRIPES];
    pthread_mutex_lock(&st->lock);
    int64_t now = rl->clock(rl->clock_arg);
    bool fresh;
    bucket *b = find_bucket(st, rl->per_stripe, h, client, &fresh);
    if (fresh) {
        b->used = true;
        b->hash = h;
        size_t len = strnlen(client, sizeof b->name - 1);
        memcpy(b->name, client, len);
        b->name[len] = 0;
        b->tokens_u = cap_u;
    } else if (now > b->last_us) {
        /* Refill; compare before multiplying so that a long idle time cannot overflow. */
        int64_t elapsed = now - b->last_us, missing = cap_u - b->tokens_u;
        if (missing <= 0 || elapsed >= (missing + rps - 1) / rps)
            b->tokens_u = cap_u;
        else
            b->tokens_u += elapsed * rps;
    }
    if (b->tokens_u > cap_u) b->tokens_u = cap_u; /* burst lowered by a reload */
    b->last_us = now > b->last_us || fresh ? now : b->last_us;
    int wait_s = 0;
    if (b->tokens_u >= MICRO) {
        b->tokens_u -= MICRO;
    } else {
        int64_t wait_us = (MICRO - b->tokens_u + rps - 1) / rps;
        int64_t s = (wait_us + MICRO - 1) / MICRO;
        wait_s = s < 1 ? 1 : s > 86400 ? 86400 : (int)s;
    }
    pthread_mutex_unlock(&st->lock);
    return wait_s;
}

int pgcld_ratelimit_size(pgcld_ratelimit *rl) {
    int n = 0;
    for (int s = 0; s < PGCLD_RATELIMIT_STRIPES; s++) {
        pthread_mutex_lock(&rl->stripes[s].lock);
        for (int i = 0; i < rl->per_stripe; i++)
            n += rl->stripes[s].slots[i].used;
        pthread_mutex_unlock(&rl->stripes[s].lock);
    }
    return n;
}
