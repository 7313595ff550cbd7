/* libFuzzer harness: the transparency log's tiles (core/audit/log/tiles.c, tiles_read.c), on what
 * comes from outside — a request's tile path, and a store's tile bytes, which may be corrupted.
 * The first input byte picks the case:
 *  - 0: the rest is a tile path. A path the parser accepts must be canonical: formatting the id
 *    gives the same bytes back (aborts otherwise);
 *  - 1: the rest is a stored tile (the next byte its width, then its bytes); every prefix width;
 *  - 2: a store whose every tile read answers with a slice of the input: an append of a few entries
 *    to a tree of a size from the input, then a root, a proof and an entry from a reader. Nothing
 *    may crash; a store that gives bytes of the wrong shape gets an error, not an answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiles.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_store {
    const uint8_t *data;
    size_t len, at;
} fuzz_store;

/* Each read takes the next slice: a 2-byte length, then that many bytes (fewer at the end). */
static pgcl_status fuzz_read(void *ctx, const pgcl_tile_id *id, const unsigned char **out, size_t *len, char *err,
                             int cap) {
    fuzz_store *s = ctx;
    if (s->len - s->at < 2) return PGCL_ERR_NOT_FOUND;
    size_t n = (size_t)s->data[s->at] << 8 | s->data[s->at + 1];
    s->at += 2;
    if (n > s->len - s->at) n = s->len - s->at;
    if (id->level != PGCL_TILE_ENTRIES && n > (size_t)id->width * 32 && n % 3 == 0) n = (size_t)id->width * 32;
    *out = s->data + s->at;
    *len = n;
    s->at += n;
    return PGCL_OK;
}

static void fuzz_path(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly the input's size: ASan sees any read past it */
    if (!copy) abort();
    memcpy(copy, data, size);
    pgcl_tile_id id;
    if (pgcl_tile_parse_path(copy, size, &id) == PGCL_OK) {
        char path[PGCL_TILE_PATH_MAX];
        int n = pgcl_tile_path(&id, path);
        if ((size_t)n != size || memcmp(path, copy, size) != 0) abort();
        (void)pgcl_tile_in_tree(&id, (uint64_t)size << 20);
    }
    free(copy);
}

static void fuzz_prefix(const uint8_t *data, size_t size) {
    if (size < 2) return;
    pgcl_tile_id id = {.level = data[0] & 1 ? PGCL_TILE_ENTRIES : 3, .index = 7, .width = data[1] + 1};
    unsigned char *copy = malloc(size - 2 ? size - 2 : 1);
    if (!copy) abort();
    memcpy(copy, data + 2, size - 2);
    for (int w = 0; w <= id.width + 1; w++) {
        size_t n = 0;
        if (pgcl_tile_prefix(&id, copy, size - 2, w, &n) == PGCL_OK && n > size - 2) abort();
    }
    free(copy);
}

static void fuzz_store_reads(const uint8_t *data, size_t size) {
    if (size < 8) return;
    uint64_t tree = 0;
    for (int i = 0; i < 4; i++)
        tree = tree << 8 | data[i];
    tree >>= data[4] % 32; /* mostly small trees, a few of up to 2^32 leaves */
    fuzz_store s = {.data = data + 8, .len = size - 8};
    pgcl_tile_entry entries[3] = {{data, 1}, {data + 1, data[5] % 8}, {data + 2, 0}};
    char err[256];
    pgcl_tiles_batch *b = NULL;
    if (pgcl_tiles_append(fuzz_read, &s, tree, NULL, entries, data[6] % 4, &b, err, sizeof err) == PGCL_OK) {
        if (!b || b->new_size != tree + data[6] % 4) abort();
        for (size_t i = 0; i < b->n_tiles; i++)
            if (!b->tiles[i].len && b->tiles[i].id.level != PGCL_TILE_ENTRIES) abort();
    } else if (b) {
        abort();
    }
    pgcl_tiles_batch_destroy(b);
    pgcl_tiles_reader *r = pgcl_tiles_reader_create(fuzz_read, &s);
    if (!r) abort();
    pgcl_merkle_hash root, proof[PGCL_MERKLE_MAX_PATH];
    int len;
    const unsigned char *e;
    size_t elen;
    if (tree) {
        (void)pgcl_tiles_root(r, tree, &root, err, sizeof err);
        (void)pgcl_tiles_inclusion(r, tree, data[7] % tree, proof, &len, err, sizeof err);
        (void)pgcl_tiles_consistency(r, 1 + data[7] % tree, tree, proof, &len, err, sizeof err);
        if (pgcl_tiles_entry(r, tree, data[5] % tree, &e, &elen, err, sizeof err) == PGCL_OK && elen > 65535) abort();
    }
    pgcl_tiles_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_path(data + 1, size - 1);
        break;
    case 1:
        fuzz_prefix(data + 1, size - 1);
        break;
    default:
        fuzz_store_reads(data + 1, size - 1);
        break;
    }
    return 0;
}
