/* Roots, RFC 9162 proofs and entries from C2SP tiles (see tiles.h, "the readers' side").
 *
 * The proofs are merkle.h's walks over stored perfect subtrees (pgcl_merkle_*_from_subtrees); the
 * subtree source here is the tiles. The node of height k and index j — MTH of leaves j·2^k ..
 * (j+1)·2^k − 1 — is, with L = k / 8 and r = k mod 8, the root of the 2^r consecutive hashes
 * j·2^r .. (j+1)·2^r − 1 at level L, all inside one level L tile (2^r divides 256): at most 127
 * node hashes from one tile read. The reader keeps the last tiles it read, so a proof reads each of
 * its O(log n) tiles once. */
#include "tiles_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

enum { N_SLOTS = 24 }; /* a consistency proof touches at most ~3 tiles a level, 8 levels */
enum { N_NODES = 32 }; /* the subtree roots hashed since the last reset: a root walk asks ~8 a tile */

/* A complete subtree's root (height k >= 1, index j) hashed from a kept tile: a writer's seal asks
 * for the roots at its old and its new size, whose left subtrees inside the partial tile are the
 * same — kept, they are hashed once (up to 254 node hashes a commit fewer). */
typedef struct node_memo {
    bool used;
    int k;
    uint64_t j;
    pgcl_merkle_hash hash;
} node_memo;

typedef struct tile_slot {
    bool used;
    pgcl_tile_id id;
    pgcl_merkle_hash hash[PGCL_TILE_WIDTH]; /* (id.width) */
} tile_slot;

struct pgcl_tiles_reader {
    pgcl_tile_read_fn read;
    void *ctx;
    int height;
    int next_slot; /* the slot to reuse next: round robin */
    tile_slot slot[N_SLOTS];
    int next_node; /* the memo to reuse next: round robin */
    node_memo node[N_NODES];
    unsigned char entry[PGCL_TILE_ENTRY_MAX]; /* pgcl_tiles_entry's answer */
    /* the call in progress, for get_node (a pgcl_merkle_subtree_fn has only a bool to say) */
    uint64_t size;
    pgcl_status st;
    char *err;
    int cap;
};

pgcl_tiles_reader *pgcl_tiles_reader_create_h(int height, pgcl_tile_read_fn read, void *ctx) {
    PGCL_ASSERT(height >= 1 && height <= PGCL_TILE_HEIGHT && read);
    pgcl_tiles_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->read = read;
    r->ctx = ctx;
    r->height = height;
    return r;
}

pgcl_tiles_reader *pgcl_tiles_reader_create(pgcl_tile_read_fn read, void *ctx) {
    return pgcl_tiles_reader_create_h(PGCL_TILE_HEIGHT, read, ctx);
}

void pgcl_tiles_reader_destroy(pgcl_tiles_reader *r) {
    free(r);
}

void pgcl_tiles_reader_reset(pgcl_tiles_reader *r) {
    for (int i = 0; i < N_SLOTS; i++)
        r->slot[i].used = false;
    for (int i = 0; i < N_NODES; i++)
        r->node[i].used = false;
}

/* Calls the store's read for *id and says which tile failed in r->err; r->st keeps the status. */
static pgcl_status read_tile(pgcl_tiles_reader *r, const pgcl_tile_id *id, const unsigned char **data, size_t *len) {
    char path[PGCL_TILE_PATH_MAX], why[256] = "";
    pgcl_tile_path(id, path);
    pgcl_status st = r->read(r->ctx, id, data, len, why, sizeof why);
    size_t ignored;
    if (st == PGCL_OK && pgcl_tile_prefix(id, *data, *len, id->width, &ignored) != PGCL_OK) {
        snprintf(why, sizeof why, "malformed (%zu bytes)", *len);
        st = PGCL_ERR_FORMAT;
    }
    if (st != PGCL_OK) {
        pgcl_errorf(r->err, r->cap, "%s: %s", path,
                    why[0]                     ? why
                    : st == PGCL_ERR_NOT_FOUND ? "not stored"
                                               : pgcl_status_str(st));
        r->st = st;
    }
    return st;
}

/* The hashes of level tile (level, index) of width `width`: a kept copy, or read and kept. NULL
 * when the store could not give it (r->st, r->err say why). */
static const pgcl_merkle_hash *level_tile(pgcl_tiles_reader *r, int level, uint64_t index, int width) {
    for (int i = 0; i < N_SLOTS; i++) {
        const tile_slot *s = &r->slot[i];
        if (s->used && s->id.level == level && s->id.index == index && s->id.width >= width) return s->hash;
    }
    pgcl_tile_id id = {.level = level, .index = index, .width = width};
    const unsigned char *data;
    size_t len;
    if (read_tile(r, &id, &data, &len) != PGCL_OK) return NULL;
    tile_slot *s = &r->slot[r->next_slot];
    r->next_slot = (r->next_slot + 1) % N_SLOTS;
    s->used = true;
    s->id = id;
    memcpy(s->hash, data, len);
    return s->hash;
}

/* pgcl_merkle_subtree_fn over the tiles of the tree of r->size leaves. */
static bool get_node(void *ctx, int k, uint64_t j, pgcl_merkle_hash *out) {
    pgcl_tiles_reader *r = ctx;
    const int h = r->height, level = k / h, rr = k % h;
    const uint64_t first = j << rr, tile = first >> h, off = first & (((uint64_t)1 << h) - 1);
    const int width = pgcl_tile_width_in_tree_h(h, level, tile, r->size);
    /* merkle.h's walks ask only for complete subtrees of the tree, which lie in one tile */
    PGCL_ASSERT(k >= 0 && k < 64 && off + ((uint64_t)1 << rr) <= (uint64_t)width);
    /* a subtree is complete, so its root is the same in every larger tree of these rows: kept
     * like the tiles it comes from, until a reset */
    for (int i = 0; rr > 0 && i < N_NODES; i++) {
        const node_memo *m = &r->node[i];
        if (m->used && m->k == k && m->j == j) {
            *out = m->hash;
            return true;
        }
    }
    const pgcl_merkle_hash *hash = level_tile(r, level, tile, width);
    if (!hash) return false;
    *out = pgcl_merkle_root(hash + off, (uint64_t)1 << rr);
    if (rr > 0) {
        node_memo *m = &r->node[r->next_node];
        r->next_node = (r->next_node + 1) % N_NODES;
        *m = (node_memo){.used = true, .k = k, .j = j, .hash = *out};
    }
    return true;
}

static void begin(pgcl_tiles_reader *r, uint64_t size, char *err, int cap) {
    r->size = size;
    r->st = PGCL_OK;
    r->err = err;
    r->cap = cap;
}

pgcl_status pgcl_tiles_root(pgcl_tiles_reader *r, uint64_t size, pgcl_merkle_hash *root, char *err, int cap) {
    if (size == 0) {
        pgcl_sha256("", 0, root->b);
        return PGCL_OK;
    }
    begin(r, size, err, cap);
    if (!pgcl_merkle_root_from_subtrees(get_node, r, size, root)) return r->st;
    return PGCL_OK;
}

pgcl_status pgcl_tiles_inclusion(pgcl_tiles_reader *r, uint64_t size, uint64_t index,
                                 pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap) {
    if (index >= size) {
        pgcl_errorf(err, cap, "leaf %llu is not in a tree of %llu leaves", (unsigned long long)index,
                    (unsigned long long)size);
        return PGCL_ERR_INVALID;
    }
    begin(r, size, err, cap);
    int n = pgcl_merkle_inclusion_path_from_subtrees(get_node, r, size, index, path);
    if (n < 0) return r->st;
    *path_len = n;
    return PGCL_OK;
}

pgcl_status pgcl_tiles_consistency(pgcl_tiles_reader *r, uint64_t first, uint64_t second,
                                   pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *proof_len, char *err, int cap) {
    if (first == 0 || first > second) {
        pgcl_errorf(err, cap, "no consistency proof from %llu to %llu leaves (0 < first <= second)",
                    (unsigned long long)first, (unsigned long long)second);
        return PGCL_ERR_INVALID;
    }
    begin(r, second, err, cap);
    int n = pgcl_merkle_consistency_proof_from_subtrees(get_node, r, first, second, proof);
    if (n < 0) return r->st;
    *proof_len = n;
    return PGCL_OK;
}

pgcl_status pgcl_tiles_entry(pgcl_tiles_reader *r, uint64_t size, uint64_t index, const unsigned char **data,
                             size_t *len, char *err, int cap) {
    if (index >= size) {
        pgcl_errorf(err, cap, "entry %llu is not in a tree of %llu leaves", (unsigned long long)index,
                    (unsigned long long)size);
        return PGCL_ERR_INVALID;
    }
    begin(r, size, err, cap);
    const int h = r->height;
    const uint64_t tile = index >> h;
    const int width = pgcl_tile_width_in_tree_h(h, 0, tile, size), off = (int)(index & (((uint64_t)1 << h) - 1));
    /* level 0 first: a kept copy, while the bundle's bytes are the store's until its next read */
    const pgcl_merkle_hash *leaves = level_tile(r, 0, tile, width);
    if (!leaves) return r->st;
    pgcl_merkle_hash leaf = leaves[off];
    pgcl_tile_id id = {.level = PGCL_TILE_ENTRIES, .index = tile, .width = width};
    const unsigned char *bundle;
    size_t bundle_len, start = 0, entry_len = 0;
    if (read_tile(r, &id, &bundle, &bundle_len) != PGCL_OK) return r->st;
    bool ok = pgcl_tile_bundle_walk(bundle, bundle_len, width, off, &start, &entry_len, NULL);
    PGCL_ASSERT(ok); /* read_tile checked the bundle's shape */
    pgcl_merkle_hash got = pgcl_merkle_leaf_hash(bundle + start, entry_len);
    if (memcmp(got.b, leaf.b, PGCL_MERKLE_HASH_BYTES) != 0) {
        char path[PGCL_TILE_PATH_MAX];
        pgcl_tile_path(&id, path);
        pgcl_errorf(err, cap, "%s: entry %llu does not hash to its leaf in level 0's tile", path,
                    (unsigned long long)index);
        return PGCL_ERR_MISMATCH;
    }
    memcpy(r->entry, bundle + start, entry_len);
    *data = r->entry;
    *len = entry_len;
    return PGCL_OK;
}
