/* Helpers shared by the Merkle-tree tests (test_log_tree.c, test_tiles.c): a small deterministic
 * random source and comparisons of hashes and proof paths. */
#ifndef PGCL_MERKLE_TEST_UTIL_H
#define PGCL_MERKLE_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "merkle.h"

/* xorshift64: the next value of *state (never zero when seeded non-zero). */
static inline uint64_t xorshift64(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static inline bool same_hash(const pgcl_merkle_hash *a, const pgcl_merkle_hash *b) {
    return memcmp(a->b, b->b, PGCL_MERKLE_HASH_BYTES) == 0;
}

/* Whether two proofs (or paths) of na and nb hashes are the same. */
static inline bool same_path(const pgcl_merkle_hash *a, int na, const pgcl_merkle_hash *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (!same_hash(&a[i], &b[i])) return false;
    return true;
}

#endif
