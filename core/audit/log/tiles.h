/* The audit log's Merkle tree stored as C2SP tlog-tiles (https://c2sp.org/tlog-tiles; issue 28):
 * the building blocks every store shares. A store knows tiles only as opaque (path → bytes) rows it
 * writes inside its commit transaction and reads back; everything that makes them a tree is here.
 *
 * The tree: RFC 6962/9162 §2.1 over the log's entries in commit order, leaf hash =
 * SHA-256(0x00 ‖ entry) (merkle.h). Its tiles, height 8 (256 hashes in a full tile):
 *
 *   level tile (L, N): the hashes MTH(D[(N·256 + i)·256^L : (N·256 + i + 1)·256^L]), i = 0..W−1
 *                      (level 0: the leaf hashes; level L: the roots of the full level L−1 tiles)
 *   entry bundle N:    entries N·256 .. N·256 + W − 1, each as a big-endian uint16 length and its
 *                      bytes (an entry is 0..65535 bytes); level 0's tile N holds their leaf hashes
 *
 * In a tree of size s the tile (L, N) has width min(256, floor(s / 256^L) − 256·N) where that is
 * >= 1 (pgcl_tile_width_in_tree): 256 is a full tile, path tile/<L>/<N>; 1..255 a partial one,
 * tile/<L>/<N>.p/<W>; entry bundles likewise under tile/entries/. <N> is written in 3-digit groups,
 * all but the last prefixed with x: 1234067 → x001/x234/067.
 *
 * Immutability. A full tile never changes. A partial tile never changes either, but is superseded:
 * the tile (L, N) of width W is the first W hashes (entries) of every wider one, so once a commit
 * writes a wider partial or the full tile, the narrower one is redundant. The spec requires a log
 * to serve the partial tiles of every size it published a checkpoint for, and lets it delete a
 * partial tile once the full one exists; a client MAY fetch the full tile instead as a fallback.
 * pgcld answers a partial path tile/<L>/<N>.p/<W> with exactly W hashes (W entries), cut from the
 * widest tile it stores for (L, N) (pgcl_tile_prefix) — never with a full tile's bytes, which Go's
 * TileReader would refuse (it requires len = W·32). A store may therefore keep every tile a commit
 * writes (rows keyed by path, insert-only) or one row per (L, N) that the commit replaces
 * (pgcl_tile_write.supersedes says which); both serve every published size.
 *
 * Reads go through one callback (pgcl_tile_read_fn), so the appender and the proofs are the same for
 * every store; tests/core/test_tiles.c checks every tile's bytes, root and proof against merkle.h's
 * builders over the plain leaf-hash array (the naive oracle). */
#ifndef PGCL_TILES_H
#define PGCL_TILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "status.h"

#define PGCL_TILE_HEIGHT 8
#define PGCL_TILE_WIDTH 256                                             /* hashes (entries) in a full tile */
#define PGCL_TILE_FULL_BYTES (PGCL_TILE_WIDTH * PGCL_MERKLE_HASH_BYTES) /* 8192 */
#define PGCL_TILE_MAX_LEVEL 63    /* the spec's bound on <L>; a tree of < 2^64 leaves uses 0..7 */
#define PGCL_TILE_ENTRIES (-1)    /* the level of an entry bundle (Go's tlog calls it L = -1, "data") */
#define PGCL_TILE_ENTRY_MAX 65535 /* an entry's largest length: its prefix is a uint16 */
#define PGCL_TILE_PATH_MAX 64     /* the longest path ("tile/entries/" + 7 groups + ".p/255") + NUL */

/* One tile: a level tile (level 0..63) or an entry bundle (level PGCL_TILE_ENTRIES). */
typedef struct pgcl_tile_id {
    int level;      /* 0..PGCL_TILE_MAX_LEVEL, or PGCL_TILE_ENTRIES */
    uint64_t index; /* N */
    int width;      /* 1..256 hashes (entries); 256 = full, no .p/<W> in its path */
} pgcl_tile_id;

/* One log entry: the bytes of a record. */
typedef struct pgcl_tile_entry {
    const void *data;
    size_t len; /* 0..PGCL_TILE_ENTRY_MAX */
} pgcl_tile_entry;

/* ---- paths ---- */

/* Writes the tile's path relative to the log's prefix ("tile/0/x001/234.p/7", "tile/entries/000")
 * and returns its length. The id must be valid (level, width in range; asserted). */
int pgcl_tile_path(const pgcl_tile_id *id, char out[PGCL_TILE_PATH_MAX]);

/* Parses path[0..len) (no NUL needed; one inside is refused) into *id. Strict, for HTTP: PGCL_OK
 * only for the one canonical spelling, i.e. exactly when pgcl_tile_path(id) gives the same bytes
 * back — "tile/" then "entries" or a level 0..63 without leading zeros, "/", <N> as 3-digit groups
 * (x-prefixed but the last; a leading x000 group is refused, <N> must fit in 64 bits), then
 * optionally ".p/" and a width 1..255 without leading zeros, and nothing after. PGCL_ERR_FORMAT
 * otherwise (*id unspecified). Whether the tile exists is the store's question
 * (pgcl_tile_in_tree): a level 9 path is well-formed and never found. Reads nothing past len. */
pgcl_status pgcl_tile_parse_path(const char *path, size_t len, pgcl_tile_id *id);

/* ---- which tiles a tree has ---- */

/* The width of tile (level, index) in the tree of size leaves: 256 when full, 1..255 when it is the
 * partial tile at that level, 0 when the tree has no such tile. PGCL_TILE_ENTRIES as level gives
 * the entry bundle's width (the same as level 0's). */
int pgcl_tile_width_in_tree(int level, uint64_t index, uint64_t size);

/* True when a tree of size leaves determines the tile id's bytes, i.e. a log at that size can
 * answer its path: a full tile when the tree has it full, a partial one of width W when the tree's
 * tile there is at least W wide (the first W hashes of it). */
bool pgcl_tile_in_tree(const pgcl_tile_id *id, uint64_t size);

/* data[0..len) is the stored tile `stored`; checks its shape (a level tile: exactly width·32 bytes;
 * an entry bundle: exactly width length-prefixed entries and nothing after) and sets *prefix_len to
 * the length of its first `width` hashes (entries): the bytes of the tile (stored->level,
 * stored->index, width). PGCL_ERR_FORMAT when data is not of that shape, PGCL_ERR_INVALID when
 * width is not in 1..stored->width. O(width) for a bundle. */
pgcl_status pgcl_tile_prefix(const pgcl_tile_id *stored, const unsigned char *data, size_t len, int width,
                             size_t *prefix_len);

/* Writes entries[0..n) as an entry bundle — each entry a big-endian uint16 length, then its bytes —
 * into out and returns the bundle's length (out NULL: only the length). Each entry is at most
 * PGCL_TILE_ENTRY_MAX bytes (asserted). The appender writes bundles with it; a store that keeps the
 * records in its own rows can build a bundle with it when one is read instead of storing bundles. */
size_t pgcl_tile_bundle_encode(const pgcl_tile_entry *entries, size_t n, unsigned char *out);

/* ---- the store's side: reading a tile ----
 *
 * Sets *data, *len to the bytes of tile *id — exactly id->width hashes (entries) — and returns
 * PGCL_OK; PGCL_ERR_NOT_FOUND when the store has no tile (level, index) at least that wide; any
 * other status (PGCL_ERR_DB, PGCL_ERR_IO) for a store that cannot read, with err set. A store that
 * keeps a wider tile for (level, index) answers with its prefix (pgcl_tile_prefix). The bytes are
 * the callback's: they stay valid until its next call with the same ctx, and are copied by the
 * callers below before that. Called inside the store's transaction; never concurrently on one ctx. */
typedef pgcl_status (*pgcl_tile_read_fn)(void *ctx, const pgcl_tile_id *id, const unsigned char **data, size_t *len,
                                         char *err, int cap);

/* ---- the writer's side: one commit ---- */

/* A tile the commit must write: its id, its path (pgcl_tile_path) and its bytes. */
typedef struct pgcl_tile_write {
    pgcl_tile_id id;
    char path[PGCL_TILE_PATH_MAX];
    const unsigned char *data; /* owned by the batch */
    size_t len;
    int supersedes; /* 1..255: this tile supersedes the partial (id.level, id.index) of that width, which
                     * the store wrote before and may now delete or overwrite; 0: it supersedes none */
} pgcl_tile_write;

/* What appending a batch of entries to a tree gives: the tiles to write, in the commit's
 * transaction, and the new root. Made by pgcl_tiles_append, freed by pgcl_tiles_batch_destroy. */
typedef struct pgcl_tiles_batch {
    uint64_t old_size, new_size;
    pgcl_merkle_hash old_root, new_root; /* MTH of the tree before and after (SHA-256("") at size 0) */
    size_t n_tiles;
    pgcl_tile_write *tiles; /* (n_tiles): entry bundles first, then level 0, 1, ...; index ascending */
} pgcl_tiles_batch;

/* Appends entries[0..count) (in order: leaves size .. size + count − 1) to the tree of size leaves
 * whose tiles read gives, and returns in *out every tile the commit must write: at each level, every
 * tile the batch completes and the new partial tile, and the same for entry bundles — O(count + log
 * size) tiles and hashes. Reads only the old tree's partial tiles (at most one per level and one
 * bundle), and checks them: the partial bundle's entries must hash to the partial level 0 tile, and
 * when expected_root is not NULL the old tree's root computed from them must equal it. Nothing is
 * written: the store writes *out's tiles and records new_size and new_root in one transaction, so
 * a crash leaves the commit with its tiles or neither.
 * PGCL_ERR_INVALID: an entry longer than PGCL_TILE_ENTRY_MAX, or size + count overflows;
 * PGCL_ERR_NOT_FOUND: a partial tile of the old tree is missing; PGCL_ERR_FORMAT: one has the wrong
 * shape; PGCL_ERR_MISMATCH: the partial tiles disagree with each other or with expected_root;
 * PGCL_ERR_NOMEM; or the read callback's status. On failure *out is NULL. count = 0 is a batch of
 * no tiles whose new root is the old one. Thread-safe for distinct ctx. */
pgcl_status pgcl_tiles_append(pgcl_tile_read_fn read, void *ctx, uint64_t size, const pgcl_merkle_hash *expected_root,
                              const pgcl_tile_entry *entries, size_t count, pgcl_tiles_batch **out, char *err, int cap);
void pgcl_tiles_batch_destroy(pgcl_tiles_batch *b); /* accepts NULL */

/* ---- the readers' side: roots, proofs and entries from tiles ----
 *
 * A reader keeps the last few level tiles it read (copies), so one proof reads each tile once,
 * and the last few subtree roots it hashed from them, so roots at two sizes of one log (a writer's
 * seal) hash their common left subtrees once.
 * Every call names the tree size it answers for (at most the store's size): tiles are read at their
 * width in that tree. O(log size) tiles and at most 255 hashes per tile per call. Not thread-safe:
 * one reader per request (or per worker). Statuses: PGCL_ERR_INVALID for arguments outside the
 * tree (index >= size, first > second, first = 0); PGCL_ERR_NOT_FOUND, PGCL_ERR_FORMAT: a tile is
 * missing or malformed; PGCL_ERR_NOMEM; or the read callback's status; err says which tile. */
typedef struct pgcl_tiles_reader pgcl_tiles_reader;

/* NULL when out of memory. read and ctx stay the caller's; ctx outlives the reader. */
pgcl_tiles_reader *pgcl_tiles_reader_create(pgcl_tile_read_fn read, void *ctx);
void pgcl_tiles_reader_destroy(pgcl_tiles_reader *r); /* accepts NULL */

/* Forgets the tiles and subtree roots kept: call when the store's tiles may have changed under the reader (a new
 * transaction); tiles never change within one tree, so readers of one size need not. */
void pgcl_tiles_reader_reset(pgcl_tiles_reader *r);

/* MTH of the first size leaves (size 0: SHA-256 of the empty string, no read). */
pgcl_status pgcl_tiles_root(pgcl_tiles_reader *r, uint64_t size, pgcl_merkle_hash *root, char *err, int cap);

/* RFC 9162 §2.1.3.1 PATH(index, D[0:size]), leaf upwards, as pgcl_merkle_inclusion_path. */
pgcl_status pgcl_tiles_inclusion(pgcl_tiles_reader *r, uint64_t size, uint64_t index,
                                 pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], int *path_len, char *err, int cap);

/* RFC 9162 §2.1.4.1 PROOF(first, D[0:second]) for 0 < first <= second, as
 * pgcl_merkle_consistency_proof (first = second: an empty proof). */
pgcl_status pgcl_tiles_consistency(pgcl_tiles_reader *r, uint64_t first, uint64_t second,
                                   pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], int *proof_len, char *err, int cap);

/* Entry index of the tree of size leaves, from its bundle: *data, *len point into the reader's copy,
 * valid until the reader's next call. Checked against level 0's tile: PGCL_ERR_MISMATCH when the
 * entry does not hash to its leaf hash. */
pgcl_status pgcl_tiles_entry(pgcl_tiles_reader *r, uint64_t size, uint64_t index, const unsigned char **data,
                             size_t *len, char *err, int cap);

#endif
