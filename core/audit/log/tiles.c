/* C2SP tlog-tiles (see tiles.h): paths, which tiles a tree has, and the appender. The reader —
 * roots, proofs and entries from tiles — is tiles_read.c.
 *
 * The appender works on the tree's right edge. At each level L the tree of size s has
 * s_L = floor(s / 256^L) hashes; a batch that grows the tree to t adds hashes s_L .. t_L − 1 at
 * level L, and those at level L + 1 are the roots of exactly the level L tiles the batch completes,
 * which the batch holds. So the old tree's partial tiles (one per level, width s_L mod 256, and the
 * partial bundle) are all it reads; per level it lays out one contiguous run of hashes from the
 * start of the old partial tile to t_L, and every tile it writes at that level is a slice of it. */
#include "tiles_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

/* ---- paths ---- */

static bool id_valid(const pgcl_tile_id *id) {
    return (id->level == PGCL_TILE_ENTRIES || (id->level >= 0 && id->level <= PGCL_TILE_MAX_LEVEL)) && id->width >= 1 &&
           id->width <= PGCL_TILE_WIDTH;
}

int pgcl_tile_path(const pgcl_tile_id *id, char out[PGCL_TILE_PATH_MAX]) {
    PGCL_ASSERT(id_valid(id));
    int n = id->level == PGCL_TILE_ENTRIES ? snprintf(out, PGCL_TILE_PATH_MAX, "tile/entries/")
                                           : snprintf(out, PGCL_TILE_PATH_MAX, "tile/%d/", id->level);
    unsigned group[7]; /* <N> in base 1000, least significant first: 2^64 has 20 digits */
    int n_groups = 0;
    uint64_t v = id->index;
    do {
        group[n_groups++] = (unsigned)(v % 1000);
        v /= 1000;
    } while (v);
    for (int g = n_groups - 1; g >= 1; g--)
        n += snprintf(out + n, (size_t)(PGCL_TILE_PATH_MAX - n), "x%03u/", group[g]);
    n += snprintf(out + n, (size_t)(PGCL_TILE_PATH_MAX - n), "%03u", group[0]);
    if (id->width < PGCL_TILE_WIDTH) n += snprintf(out + n, (size_t)(PGCL_TILE_PATH_MAX - n), ".p/%d", id->width);
    PGCL_ASSERT(n > 0 && n < PGCL_TILE_PATH_MAX);
    return n;
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* A decimal of 1..max_digits digits at s[*i..len), without a leading zero unless it is "0". */
static bool parse_small_decimal(const char *s, size_t len, size_t *i, int max_digits, int *value) {
    size_t at = *i;
    int v = 0, digits = 0;
    while (at < len && is_digit(s[at]) && digits < max_digits + 1) {
        v = v * 10 + (s[at] - '0');
        at++;
        digits++;
    }
    if (digits == 0 || digits > max_digits || (digits > 1 && s[*i] == '0')) return false;
    *i = at;
    *value = v;
    return true;
}

pgcl_status pgcl_tile_parse_path(const char *s, size_t len, pgcl_tile_id *id) {
    static const char TILE[] = "tile/", ENTRIES[] = "entries/", PARTIAL[] = ".p/";
    size_t i = 0;
    if (!s || len < sizeof TILE - 1 || memcmp(s, TILE, sizeof TILE - 1) != 0) return PGCL_ERR_FORMAT;
    i = sizeof TILE - 1;
    if (len - i >= sizeof ENTRIES - 1 && memcmp(s + i, ENTRIES, sizeof ENTRIES - 1) == 0) {
        id->level = PGCL_TILE_ENTRIES;
        i += sizeof ENTRIES - 1;
    } else {
        if (!parse_small_decimal(s, len, &i, 2, &id->level) || id->level > PGCL_TILE_MAX_LEVEL) return PGCL_ERR_FORMAT;
        if (i >= len || s[i] != '/') return PGCL_ERR_FORMAT;
        i++;
    }
    /* <N>: "xDDD/" groups, then a last "DDD"; no leading x000 (then the spelling is not unique). */
    uint64_t n = 0;
    for (int n_groups = 0;; n_groups++) {
        bool x = i < len && s[i] == 'x';
        if (x) i++;
        if (len - i < 3 || !is_digit(s[i]) || !is_digit(s[i + 1]) || !is_digit(s[i + 2])) return PGCL_ERR_FORMAT;
        unsigned g = (unsigned)(s[i] - '0') * 100 + (unsigned)(s[i + 1] - '0') * 10 + (unsigned)(s[i + 2] - '0');
        i += 3;
        if (x && n_groups == 0 && g == 0) return PGCL_ERR_FORMAT;
        if (n > (UINT64_MAX - g) / 1000) return PGCL_ERR_FORMAT; /* more than 64 bits */
        n = n * 1000 + g;
        if (!x) break;
        if (i >= len || s[i] != '/') return PGCL_ERR_FORMAT;
        i++;
    }
    id->index = n;
    id->width = PGCL_TILE_WIDTH;
    if (i < len) {
        if (len - i < sizeof PARTIAL - 1 || memcmp(s + i, PARTIAL, sizeof PARTIAL - 1) != 0) return PGCL_ERR_FORMAT;
        i += sizeof PARTIAL - 1;
        if (!parse_small_decimal(s, len, &i, 3, &id->width) || id->width < 1 || id->width >= PGCL_TILE_WIDTH)
            return PGCL_ERR_FORMAT;
    }
    return i == len ? PGCL_OK : PGCL_ERR_FORMAT;
}

/* ---- which tiles a tree has ---- */

int pgcl_tile_width_in_tree_h(int height, int level, uint64_t index, uint64_t size) {
    PGCL_ASSERT(height >= 1 && height <= PGCL_TILE_HEIGHT);
    if (level == PGCL_TILE_ENTRIES) level = 0;
    if (level < 0 || level > PGCL_TILE_MAX_LEVEL || height * level >= 64) return 0;
    uint64_t n = size >> (height * level); /* hashes at this level */
    uint64_t full = n >> height;           /* full tiles at this level */
    if (index < full) return 1 << height;
    if (index == full) return (int)(n & ((1u << height) - 1));
    return 0;
}

int pgcl_tile_width_in_tree(int level, uint64_t index, uint64_t size) {
    return pgcl_tile_width_in_tree_h(PGCL_TILE_HEIGHT, level, index, size);
}

bool pgcl_tile_in_tree(const pgcl_tile_id *id, uint64_t size) {
    if (!id_valid(id)) return false;
    int w = pgcl_tile_width_in_tree(id->level, id->index, size);
    return id->width == PGCL_TILE_WIDTH ? w == PGCL_TILE_WIDTH : id->width <= w;
}

static unsigned be16(const unsigned char *p) {
    return (unsigned)p[0] << 8 | p[1];
}

bool pgcl_tile_bundle_walk(const unsigned char *data, size_t len, int count, int want, size_t *start, size_t *entry_len,
                           size_t *prefix_len) {
    size_t at = 0;
    for (int k = 0; k < count; k++) {
        if (len - at < 2) return false;
        size_t l = be16(data + at);
        if (len - at - 2 < l) return false;
        if (k == want) {
            if (start) *start = at + 2;
            if (entry_len) *entry_len = l;
            if (prefix_len) *prefix_len = at + 2 + l;
        }
        at += 2 + l;
    }
    return at == len;
}

pgcl_status pgcl_tile_prefix(const pgcl_tile_id *stored, const unsigned char *data, size_t len, int width,
                             size_t *prefix_len) {
    if (!id_valid(stored) || width < 1 || width > stored->width) return PGCL_ERR_INVALID;
    if (stored->level != PGCL_TILE_ENTRIES) {
        if (len != (size_t)stored->width * PGCL_MERKLE_HASH_BYTES) return PGCL_ERR_FORMAT;
        *prefix_len = (size_t)width * PGCL_MERKLE_HASH_BYTES;
        return PGCL_OK;
    }
    return pgcl_tile_bundle_walk(data, len, stored->width, width - 1, NULL, NULL, prefix_len) ? PGCL_OK
                                                                                              : PGCL_ERR_FORMAT;
}

size_t pgcl_tile_bundle_encode(const pgcl_tile_entry *entries, size_t n, unsigned char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        PGCL_ASSERT(entries[i].len <= PGCL_TILE_ENTRY_MAX);
        if (out) {
            out[len] = (unsigned char)(entries[i].len >> 8);
            out[len + 1] = (unsigned char)(entries[i].len & 0xff);
            if (entries[i].len) memcpy(out + len + 2, entries[i].data, entries[i].len);
        }
        len += 2 + entries[i].len;
    }
    return len;
}

/* ---- the appender ---- */

enum { MAX_LEVELS = 64 };

static pgcl_merkle_hash empty_root(void) {
    pgcl_merkle_hash h;
    pgcl_sha256("", 0, h.b);
    return h;
}

/* MTH of the tree of size leaves from its right edge: edge[L] holds the partial tile of level L,
 * (size >> height·L) mod 2^height hashes (unused where that is 0). The binary decomposition of size
 * has one perfect subtree per set bit k; the one of bit k is 2^(k mod height) consecutive hashes of
 * level k / height's partial tile, at the offset the higher bits give. Folded from the right. */
static pgcl_merkle_hash edge_root(int height, uint64_t size, pgcl_merkle_hash *const edge[MAX_LEVELS]) {
    if (size == 0) return empty_root();
    const uint64_t mask = (1u << height) - 1;
    pgcl_merkle_hash piece[64];
    int n = 0;
    for (int k = 63; k >= 0; k--) {
        if (!(size >> k & 1)) continue;
        int level = k / height, r = k % height;
        uint64_t at = k == 63 ? 0 : size >> (k + 1) << (k + 1); /* the first leaf under this piece */
        uint64_t off = at >> (height * level) & mask, width = size >> (height * level) & mask;
        PGCL_ASSERT(edge[level] && off + ((uint64_t)1 << r) <= width);
        piece[n++] = pgcl_merkle_root(edge[level] + off, (uint64_t)1 << r);
    }
    pgcl_merkle_hash h = piece[n - 1];
    for (int i = n - 2; i >= 0; i--)
        h = pgcl_merkle_node_hash(&piece[i], &h);
    return h;
}

/* The number of levels that have hashes in a tree of size leaves. */
static int levels_of(int height, uint64_t size) {
    int n = 0;
    while (n < MAX_LEVELS && height * n < 64 && size >> (height * n) > 0)
        n++;
    return n;
}

/* Reads a partial tile of the old tree through the store's callback and checks its shape. */
static pgcl_status read_partial(pgcl_tile_read_fn read, void *ctx, const pgcl_tile_id *id, const unsigned char **data,
                                size_t *len, char *err, int cap) {
    char path[PGCL_TILE_PATH_MAX], why[256] = "";
    pgcl_tile_path(id, path);
    pgcl_status st = read(ctx, id, data, len, why, sizeof why);
    if (st == PGCL_ERR_NOT_FOUND) {
        pgcl_errorf(err, cap, "%s: the old tree's partial tile is missing%s%s", path, why[0] ? ": " : "", why);
        return st;
    }
    if (st != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: %s", path, why[0] ? why : pgcl_status_str(st));
        return st;
    }
    size_t ignored;
    if (pgcl_tile_prefix(id, *data, *len, id->width, &ignored) != PGCL_OK) {
        pgcl_errorf(err, cap, "%s: malformed (%zu bytes)", path, *len);
        return PGCL_ERR_FORMAT;
    }
    return PGCL_OK;
}

static bool add_size(size_t *acc, size_t v) {
    if (*acc > SIZE_MAX - v) return false;
    *acc += v;
    return true;
}

/* Appends a write for the tile (level, index, width) whose bytes are data[0..len). */
static void add_write(pgcl_tiles_batch *b, int level, uint64_t index, uint64_t width, const void *data, size_t len,
                      uint64_t supersedes) {
    pgcl_tile_write *w = &b->tiles[b->n_tiles++];
    w->id = (pgcl_tile_id){.level = level, .index = index, .width = (int)width};
    pgcl_tile_path(&w->id, w->path);
    w->data = data;
    w->len = len;
    w->supersedes = (int)supersedes;
}

pgcl_status pgcl_tiles_append_h(int height, pgcl_tile_read_fn read, void *ctx, uint64_t size,
                                const pgcl_merkle_hash *expected_root, const pgcl_tile_entry *entries, size_t count,
                                pgcl_tiles_batch **out, char *err, int cap) {
    PGCL_ASSERT(height >= 1 && height <= PGCL_TILE_HEIGHT && out);
    *out = NULL;
    const uint64_t W = (uint64_t)1 << height, mask = W - 1;
    pgcl_status st = PGCL_OK;
    pgcl_merkle_hash *edge_buf = NULL; /* the old partial level tiles, copied */
    unsigned char *old_bundle = NULL;  /* the old partial bundle, copied */
    size_t old_bundle_len = 0;
    pgcl_tiles_batch *b = NULL;

    if (count > UINT64_MAX - size) {
        pgcl_errorf(err, cap, "a tree of %llu leaves cannot take %zu more", (unsigned long long)size, count);
        return PGCL_ERR_INVALID;
    }
    size_t bundle_bytes = 0;
    for (size_t i = 0; i < count; i++) {
        if (entries[i].len > PGCL_TILE_ENTRY_MAX || (entries[i].len && !entries[i].data)) {
            pgcl_errorf(err, cap, "entry %zu of the batch: %zu bytes (at most %d)", i, entries[i].len,
                        PGCL_TILE_ENTRY_MAX);
            return PGCL_ERR_INVALID;
        }
        if (!add_size(&bundle_bytes, 2 + entries[i].len)) {
            pgcl_errorf(err, cap, "the batch's entries are too large");
            return PGCL_ERR_INVALID;
        }
    }
    const uint64_t t = size + count;
    const int old_levels = levels_of(height, size), new_levels = levels_of(height, t);

    /* 1. The old tree's right edge: its partial bundle and its partial tile at each level. */
    pgcl_merkle_hash *old_edge[MAX_LEVELS] = {0};
    edge_buf = malloc((size_t)(old_levels ? old_levels : 1) * (size_t)mask * sizeof *edge_buf + 1);
    if (!edge_buf) goto nomem;
    const unsigned char *data;
    size_t len;
    if (size & mask) {
        pgcl_tile_id id = {.level = PGCL_TILE_ENTRIES, .index = size >> height, .width = (int)(size & mask)};
        if ((st = read_partial(read, ctx, &id, &data, &len, err, cap)) != PGCL_OK) goto done;
        if (!(old_bundle = malloc(len + 1))) goto nomem;
        memcpy(old_bundle, data, len);
        old_bundle_len = len;
    }
    for (int level = 0; level < old_levels; level++) {
        uint64_t s_l = size >> (height * level);
        if (!(s_l & mask)) continue;
        old_edge[level] = edge_buf + (size_t)level * mask;
        pgcl_tile_id id = {.level = level, .index = s_l >> height, .width = (int)(s_l & mask)};
        if ((st = read_partial(read, ctx, &id, &data, &len, err, cap)) != PGCL_OK) goto done;
        memcpy(old_edge[level], data, len);
    }
    if (size & mask) { /* the partial bundle's entries are the partial level 0 tile's leaves */
        size_t at = 0;
        for (uint64_t k = 0; k < (size & mask); k++) {
            size_t l = be16(old_bundle + at);
            pgcl_merkle_hash leaf = pgcl_merkle_leaf_hash(old_bundle + at + 2, l);
            if (memcmp(leaf.b, old_edge[0][k].b, PGCL_MERKLE_HASH_BYTES) != 0) {
                pgcl_errorf(err, cap, "entry %llu of the old tree does not hash to its leaf in level 0's tile",
                            (unsigned long long)((size & ~mask) + k));
                st = PGCL_ERR_MISMATCH;
                goto done;
            }
            at += 2 + l;
        }
    }
    pgcl_merkle_hash old_root = edge_root(height, size, old_edge);
    if (expected_root && memcmp(old_root.b, expected_root->b, PGCL_MERKLE_HASH_BYTES) != 0) {
        pgcl_errorf(err, cap, "the tiles of the tree of %llu leaves do not give its recorded root",
                    (unsigned long long)size);
        st = PGCL_ERR_MISMATCH;
        goto done;
    }

    /* 2. One allocation: the batch, its writes, each level's run of hashes from the start of its old
     * partial tile to t_L, and the bundles' bytes from the start of the old partial bundle. */
    size_t n_tiles = 0, total = sizeof *b, run_at[MAX_LEVELS] = {0};
    if (count) n_tiles += (size_t)(((t - 1) >> height) - (size >> height) + 1);
    for (int level = 0; level < new_levels; level++) {
        uint64_t s_l = size >> (height * level), t_l = t >> (height * level);
        if (t_l > s_l) n_tiles += (size_t)(((t_l - 1) >> height) - (s_l >> height) + 1);
    }
    if (n_tiles > SIZE_MAX / sizeof *b->tiles || !add_size(&total, n_tiles * sizeof *b->tiles)) goto too_large;
    for (int level = 0; level < new_levels; level++) {
        uint64_t s_l = size >> (height * level), t_l = t >> (height * level);
        run_at[level] = total;
        size_t run = (size_t)((s_l & mask) + (t_l - s_l));
        if (t_l > s_l &&
            (run > SIZE_MAX / sizeof(pgcl_merkle_hash) || !add_size(&total, run * sizeof(pgcl_merkle_hash))))
            goto too_large;
    }
    size_t bundles_at = total;
    if (!add_size(&total, old_bundle_len) || !add_size(&total, bundle_bytes)) goto too_large;
    unsigned char *arena = malloc(total);
    if (!arena) goto nomem;
    b = (pgcl_tiles_batch *)arena;
    *b = (pgcl_tiles_batch){
        .old_size = size, .new_size = t, .old_root = old_root, .tiles = (pgcl_tile_write *)(arena + sizeof *b)};

    /* 3. Entry bundles and level 0: the old partial, then each entry and its leaf hash. A bundle
     * tile closes at each multiple of W and at the end. */
    pgcl_merkle_hash *run0 = (pgcl_merkle_hash *)(arena + run_at[0]);
    unsigned char *bundles = arena + bundles_at, *bp = bundles + old_bundle_len, *tile_start = bundles;
    if (count) {
        if (old_bundle_len) memcpy(bundles, old_bundle, old_bundle_len);
        if (size & mask) memcpy(run0, old_edge[0], (size_t)(size & mask) * sizeof *run0);
        for (size_t i = 0; i < count; i++) {
            uint64_t leaf = size + i;
            if (leaf > size && !(leaf & mask)) { /* the tile before leaf is now full */
                uint64_t k = (leaf - 1) >> height;
                add_write(b, PGCL_TILE_ENTRIES, k, W, tile_start, (size_t)(bp - tile_start),
                          k == size >> height ? size & mask : 0);
                tile_start = bp;
            }
            bp += pgcl_tile_bundle_encode(&entries[i], 1, bp);
            run0[(size & mask) + i] = pgcl_merkle_leaf_hash(entries[i].data, entries[i].len);
        }
        uint64_t k = (t - 1) >> height;
        add_write(b, PGCL_TILE_ENTRIES, k, t - (k << height), tile_start, (size_t)(bp - tile_start),
                  k == size >> height ? size & mask : 0);
    }
    PGCL_ASSERT(bp == arena + total);

    /* 4. Each level: the roots of the level's newly full tiles are the next level's new hashes;
     * then the level's tiles, each a slice of its run. */
    pgcl_merkle_hash *new_edge[MAX_LEVELS] = {0};
    for (int level = 0; level < new_levels; level++) {
        uint64_t s_l = size >> (height * level), t_l = t >> (height * level), base = s_l & ~mask;
        pgcl_merkle_hash *run = (pgcl_merkle_hash *)(arena + run_at[level]);
        if (t_l == s_l) { /* nothing new here, nor above */
            new_edge[level] = old_edge[level];
            continue;
        }
        if (level + 1 < new_levels) {
            uint64_t s_up = s_l >> height, t_up = t_l >> height;
            pgcl_merkle_hash *up = (pgcl_merkle_hash *)(arena + run_at[level + 1]);
            if (t_up > s_up && (s_up & mask)) memcpy(up, old_edge[level + 1], (size_t)(s_up & mask) * sizeof *up);
            for (uint64_t j = s_up; j < t_up; j++)
                up[(s_up & mask) + (j - s_up)] = pgcl_merkle_root(run + ((j << height) - base), W);
        }
        for (uint64_t k = s_l >> height; k <= (t_l - 1) >> height; k++) {
            uint64_t width = t_l - (k << height) < W ? t_l - (k << height) : W;
            add_write(b, level, k, width, run + ((k << height) - base), (size_t)width * sizeof *run,
                      k == s_l >> height ? s_l & mask : 0);
        }
        if (t_l & mask) new_edge[level] = run + ((t_l & ~mask) - base);
    }
    PGCL_ASSERT(b->n_tiles == n_tiles);
    b->new_root = edge_root(height, t, new_edge);
    *out = b;
    b = NULL;
    goto done;

too_large:
    pgcl_errorf(err, cap, "the batch's tiles are too large");
    st = PGCL_ERR_INVALID;
    goto done;
nomem:
    pgcl_errorf(err, cap, "out of memory appending %zu entries", count);
    st = PGCL_ERR_NOMEM;
done:
    free(b);
    free(edge_buf);
    free(old_bundle);
    return st;
}

pgcl_status pgcl_tiles_append(pgcl_tile_read_fn read, void *ctx, uint64_t size, const pgcl_merkle_hash *expected_root,
                              const pgcl_tile_entry *entries, size_t count, pgcl_tiles_batch **out, char *err,
                              int cap) {
    return pgcl_tiles_append_h(PGCL_TILE_HEIGHT, read, ctx, size, expected_root, entries, count, out, err, cap);
}

void pgcl_tiles_batch_destroy(pgcl_tiles_batch *b) {
    free(b);
}
