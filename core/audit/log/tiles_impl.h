/* Private to core/audit/log/tiles*.c and their tests: the tile code at any tile height. C2SP fixes
 * the height at 8 (tiles.h); the same code at heights 1..7 is not a C2SP log, but it lets
 * tests/core/test_tiles.c cross the tile boundaries of every level — up to 64 levels at height 1 —
 * with trees of thousands of leaves instead of 256^7. The public functions are these at height 8. */
#ifndef PGCL_TILES_IMPL_H
#define PGCL_TILES_IMPL_H

#include "tiles.h"

/* pgcl_tile_width_in_tree for tiles of 2^height hashes (1 <= height <= 8). */
int pgcl_tile_width_in_tree_h(int height, int level, uint64_t index, uint64_t size);

/* pgcl_tiles_append for tiles of 2^height hashes. */
pgcl_status pgcl_tiles_append_h(int height, pgcl_tile_read_fn read, void *ctx, uint64_t size,
                                const pgcl_merkle_hash *expected_root, const pgcl_tile_entry *entries, size_t count,
                                pgcl_tiles_batch **out, char *err, int cap);

/* pgcl_tiles_reader_create for tiles of 2^height hashes. */
pgcl_tiles_reader *pgcl_tiles_reader_create_h(int height, pgcl_tile_read_fn read, void *ctx);

/* Walks the entry bundle data[0..len): true only when it is exactly count length-prefixed entries
 * and nothing after. When want < count, *start and *entry_len locate entry number want (its bytes,
 * after the prefix) and *prefix_len is the length of the first want + 1 entries. */
bool pgcl_tile_bundle_walk(const unsigned char *data, size_t len, int count, int want, size_t *start, size_t *entry_len,
                           size_t *prefix_len);

#endif
