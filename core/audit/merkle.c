/* RFC 9162 §2.1 Merkle trees (see merkle.h). The builders walk the RFC's recursive definitions
 * iteratively: MTH with a stack of perfect subtrees (the binary decomposition of n), PATH and
 * PROOF by descending from the root and collecting the sibling subtree hashes, then reversing them
 * (the RFC lists them leaf upwards). The verifiers are the RFC's algorithms, step for step. */
#include "merkle.h"

#include <string.h>

#include "sha256.h"
#include "status.h"

enum { LEAF_PREFIX = 0x00, NODE_PREFIX = 0x01 };

pgcl_merkle_hash pgcl_merkle_leaf_hash(const void *data, size_t len) {
    pgcl_merkle_hash h;
    pgcl_sha256_prefixed(LEAF_PREFIX, data, len, h.b);
    return h;
}

pgcl_merkle_hash pgcl_merkle_node_hash(const pgcl_merkle_hash *left, const pgcl_merkle_hash *right) {
    unsigned char msg[1 + 2 * PGCL_MERKLE_HASH_BYTES];
    msg[0] = NODE_PREFIX;
    memcpy(msg + 1, left->b, PGCL_MERKLE_HASH_BYTES);
    memcpy(msg + 1 + PGCL_MERKLE_HASH_BYTES, right->b, PGCL_MERKLE_HASH_BYTES);
    pgcl_merkle_hash h;
    pgcl_sha256(msg, sizeof msg, h.b);
    return h;
}

/* The largest power of two strictly below n (n >= 2): the RFC's split point k. */
static uint64_t split_point(uint64_t n) {
    PGCL_ASSERT(n >= 2);
    return (uint64_t)1 << (63 - __builtin_clzll(n - 1));
}

pgcl_merkle_hash pgcl_merkle_root(const pgcl_merkle_hash *leaves, uint64_t n) {
    if (n == 0) {
        pgcl_merkle_hash empty;
        pgcl_sha256("", 0, empty.b);
        return empty;
    }
    pgcl_merkle_stack s;
    s.top = 0;
    int level;
    for (uint64_t i = 0; i < n; i++) {
        pgcl_merkle_stack_push(&s, &leaves[i]);
        while (pgcl_merkle_stack_merge(&s, &level))
            continue; /* only the root is wanted */
    }
    return pgcl_merkle_stack_root(&s);
}

void pgcl_merkle_stack_push(pgcl_merkle_stack *s, const pgcl_merkle_hash *leaf) {
    PGCL_ASSERT(s->top >= 0 && s->top <= PGCL_MERKLE_MAX_PATH);
    s->node[s->top] = *leaf;
    s->height[s->top++] = 0;
}

bool pgcl_merkle_stack_merge(pgcl_merkle_stack *s, int *level) {
    if (s->top < 2 || s->height[s->top - 1] != s->height[s->top - 2]) return false;
    s->node[s->top - 2] = pgcl_merkle_node_hash(&s->node[s->top - 2], &s->node[s->top - 1]);
    *level = ++s->height[s->top - 2];
    s->top--;
    return true;
}

pgcl_merkle_hash pgcl_merkle_stack_root(const pgcl_merkle_stack *s) {
    PGCL_ASSERT(s->top >= 1);
    pgcl_merkle_hash h = s->node[s->top - 1];
    for (int i = s->top - 2; i >= 0; i--) h = pgcl_merkle_node_hash(&s->node[i], &h);
    return h;
}

static void reverse(pgcl_merkle_hash *h, int n) {
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        pgcl_merkle_hash t = h[i];
        h[i] = h[j];
        h[j] = t;
    }
}

int pgcl_merkle_inclusion_path(const pgcl_merkle_hash *leaves, uint64_t n, uint64_t index,
                               pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH]) {
    PGCL_ASSERT(index < n);
    int len = 0;
    uint64_t lo = 0, size = n, m = index; /* the subtree D[lo : lo+size) holding the leaf at lo+m */
    while (size > 1) {
        uint64_t k = split_point(size);
        PGCL_ASSERT(len < PGCL_MERKLE_MAX_PATH);
        if (m < k) { /* PATH(m, D[0:k]) : MTH(D[k:n]) */
            path[len++] = pgcl_merkle_root(leaves + lo + k, size - k);
            size = k;
        } else { /* PATH(m - k, D[k:n]) : MTH(D[0:k]) */
            path[len++] = pgcl_merkle_root(leaves + lo, k);
            lo += k;
            m -= k;
            size -= k;
        }
    }
    reverse(path, len); /* collected root downwards; the RFC lists them leaf upwards */
    return len;
}

bool pgcl_merkle_verify_inclusion(const pgcl_merkle_hash *leaf, uint64_t index, uint64_t tree_size,
                                  const pgcl_merkle_hash *path, int path_len, const pgcl_merkle_hash *root) {
    if (index >= tree_size || path_len < 0 || path_len > PGCL_MERKLE_MAX_PATH) return false;
    uint64_t fn = index, sn = tree_size - 1;
    pgcl_merkle_hash r = *leaf;
    for (int i = 0; i < path_len; i++) {
        if (sn == 0) return false;
        if ((fn & 1) || fn == sn) {
            r = pgcl_merkle_node_hash(&path[i], &r);
            while (!(fn & 1) && fn != 0) {
                fn >>= 1;
                sn >>= 1;
            }
        } else {
            r = pgcl_merkle_node_hash(&r, &path[i]);
        }
        fn >>= 1;
        sn >>= 1;
    }
    return sn == 0 && memcmp(r.b, root->b, PGCL_MERKLE_HASH_BYTES) == 0;
}

int pgcl_merkle_consistency_proof(const pgcl_merkle_hash *leaves, uint64_t m, uint64_t n,
                                  pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH]) {
    PGCL_ASSERT(m > 0 && m <= n);
    /* SUBPROOF(m, D[lo : lo+size), whole): whole is the RFC's b, true while the old tree is the
     * left part of every subtree descended into. */
    pgcl_merkle_hash siblings[PGCL_MERKLE_MAX_PATH];
    int n_siblings = 0;
    uint64_t lo = 0, size = n;
    bool whole = true;
    while (m != size) {
        uint64_t k = split_point(size);
        PGCL_ASSERT(n_siblings < PGCL_MERKLE_MAX_PATH - 1);
        if (m <= k) { /* SUBPROOF(m, D[0:k], b) : MTH(D[k:n]) */
            siblings[n_siblings++] = pgcl_merkle_root(leaves + lo + k, size - k);
            size = k;
        } else { /* SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k]) */
            siblings[n_siblings++] = pgcl_merkle_root(leaves + lo, k);
            lo += k;
            m -= k;
            size -= k;
            whole = false;
        }
    }
    int len = 0;
    if (!whole) proof[len++] = pgcl_merkle_root(leaves + lo, size); /* SUBPROOF(m, D[m], false) */
    for (int i = n_siblings - 1; i >= 0; i--) proof[len++] = siblings[i];
    return len;
}

bool pgcl_merkle_verify_consistency(uint64_t first, uint64_t second, const pgcl_merkle_hash *first_root,
                                    const pgcl_merkle_hash *second_root, const pgcl_merkle_hash *proof,
                                    int proof_len) {
    if (first == 0 || first > second || proof_len < 0 || proof_len > PGCL_MERKLE_MAX_PATH) return false;
    if (first == second)
        return proof_len == 0 && memcmp(first_root->b, second_root->b, PGCL_MERKLE_HASH_BYTES) == 0;
    if (proof_len == 0) return false;
    /* 1. When first is a power of two the old root itself starts the path. */
    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH + 1];
    int len = 0;
    if ((first & (first - 1)) == 0) path[len++] = *first_root;
    memcpy(path + len, proof, (size_t)proof_len * sizeof *proof);
    len += proof_len;
    /* 2.–3. */
    uint64_t fn = first - 1, sn = second - 1;
    while (fn & 1) {
        fn >>= 1;
        sn >>= 1;
    }
    /* 4.–5. */
    pgcl_merkle_hash fr = path[0], sr = path[0];
    for (int i = 1; i < len; i++) {
        if (sn == 0) return false;
        if ((fn & 1) || fn == sn) {
            fr = pgcl_merkle_node_hash(&path[i], &fr);
            sr = pgcl_merkle_node_hash(&path[i], &sr);
            while (!(fn & 1) && fn != 0) {
                fn >>= 1;
                sn >>= 1;
            }
        } else {
            sr = pgcl_merkle_node_hash(&sr, &path[i]);
        }
        fn >>= 1;
        sn >>= 1;
    }
    /* 6. */
    return sn == 0 && memcmp(fr.b, first_root->b, PGCL_MERKLE_HASH_BYTES) == 0 &&
           memcmp(sr.b, second_root->b, PGCL_MERKLE_HASH_BYTES) == 0;
}

/* ---- from stored perfect subtrees ---- */

/* MTH(D[lo : lo + size)) for size >= 1 from the perfect subtrees of size's binary decomposition,
 * largest first: node(first, MTH(rest)), folded from the right. Each piece is aligned because lo
 * is a multiple of the largest power of two <= size, which every caller's range is (the RFC's
 * subtrees start at multiples of their left part's size); asserted. */
static bool range_root(pgcl_merkle_subtree_fn get, void *ctx, uint64_t lo, uint64_t size, pgcl_merkle_hash *out) {
    PGCL_ASSERT(size >= 1);
    pgcl_merkle_hash piece[PGCL_MERKLE_MAX_PATH];
    int n_pieces = 0;
    uint64_t at = lo;
    for (int level = 63; level >= 0; level--) {
        uint64_t span = (uint64_t)1 << level;
        if (!(size & span)) continue;
        PGCL_ASSERT(at % span == 0);
        if (!get(ctx, level, at >> level, &piece[n_pieces++])) return false;
        at += span;
    }
    pgcl_merkle_hash h = piece[n_pieces - 1];
    for (int i = n_pieces - 2; i >= 0; i--)
        h = pgcl_merkle_node_hash(&piece[i], &h);
    *out = h;
    return true;
}

bool pgcl_merkle_root_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t n, pgcl_merkle_hash *root) {
    PGCL_ASSERT(n >= 1);
    return range_root(get, ctx, 0, n, root);
}

/* The same walks as pgcl_merkle_inclusion_path and pgcl_merkle_consistency_proof, each sibling a
 * range_root: the left siblings are single nodes, and once the walk turns left its subtree is
 * perfect, so at most one sibling is more than one node — O(log n) calls in all. */
int pgcl_merkle_inclusion_path_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t n, uint64_t index,
                                             pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH]) {
    PGCL_ASSERT(index < n);
    int len = 0;
    uint64_t lo = 0, size = n, m = index;
    while (size > 1) {
        uint64_t k = split_point(size);
        PGCL_ASSERT(len < PGCL_MERKLE_MAX_PATH);
        bool ok;
        if (m < k) {
            ok = range_root(get, ctx, lo + k, size - k, &path[len++]);
            size = k;
        } else {
            ok = range_root(get, ctx, lo, k, &path[len++]);
            lo += k;
            m -= k;
            size -= k;
        }
        if (!ok) return -1;
    }
    reverse(path, len);
    return len;
}

int pgcl_merkle_consistency_proof_from_subtrees(pgcl_merkle_subtree_fn get, void *ctx, uint64_t m, uint64_t n,
                                                pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH]) {
    PGCL_ASSERT(m > 0 && m <= n);
    pgcl_merkle_hash siblings[PGCL_MERKLE_MAX_PATH];
    int n_siblings = 0;
    uint64_t lo = 0, size = n;
    bool whole = true;
    while (m != size) {
        uint64_t k = split_point(size);
        PGCL_ASSERT(n_siblings < PGCL_MERKLE_MAX_PATH - 1);
        bool ok;
        if (m <= k) {
            ok = range_root(get, ctx, lo + k, size - k, &siblings[n_siblings++]);
            size = k;
        } else {
            ok = range_root(get, ctx, lo, k, &siblings[n_siblings++]);
            lo += k;
            m -= k;
            size -= k;
            whole = false;
        }
        if (!ok) return -1;
    }
    int len = 0;
    if (!whole && !range_root(get, ctx, lo, size, &proof[len++])) return -1;
    for (int i = n_siblings - 1; i >= 0; i--)
        proof[len++] = siblings[i];
    return len;
}

void pgcl_merkle_to_hex(const pgcl_merkle_hash *h, char out[2 * PGCL_MERKLE_HASH_BYTES + 1]) {
    pgcl_sha256_to_hex(h->b, out);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool pgcl_merkle_from_hex(const char *hex, pgcl_merkle_hash *out) {
    if (!hex || strlen(hex) != 2 * PGCL_MERKLE_HASH_BYTES) return false;
    for (int i = 0; i < PGCL_MERKLE_HASH_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out->b[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}
