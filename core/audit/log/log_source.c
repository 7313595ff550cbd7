/* The readers' side of log.h: every C2SP tile of a writer's tree, built on read from the store's
 * rows (pgcl_log_ops). Level 0's tile N is the leaf hashes N·256 .. N·256+W−1; level L's tile N
 * (L >= 1) the roots of the full level L−1 tiles N·256 .. N·256+W−1; entry bundle N the records of
 * leaves N·256 .. N·256+W−1 in tiles.h's bundle format (pgcl_tile_bundle_encode's). A tile the
 * tree of the source's size does not have is PGCL_ERR_NOT_FOUND, whatever rows exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"

void pgcl_log_source_init(pgcl_log_source *s, const pgcl_log_ops *ops, void *ctx, uint64_t size) {
    PGCL_ASSERT(s && ops);
    s->ops = ops;
    s->ctx = ctx;
    s->size = size;
    s->buf = NULL;
    s->buf_cap = 0;
}

void pgcl_log_source_free(pgcl_log_source *s) {
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->buf_cap = 0;
}

/* Makes s->buf at least need bytes long. */
static pgcl_status reserve(pgcl_log_source *s, size_t need, char *err, int cap) {
    if (need <= s->buf_cap) return PGCL_OK;
    size_t want = s->buf_cap ? s->buf_cap : PGCL_TILE_FULL_BYTES;
    while (want < need)
        want *= 2;
    unsigned char *p = realloc(s->buf, want);
    if (!p) {
        pgcl_errorf(err, cap, "out of memory for a tile of %zu bytes", need);
        return PGCL_ERR_NOMEM;
    }
    s->buf = p;
    s->buf_cap = want;
    return PGCL_OK;
}

/* A bundle being built: the records as the store gives them, each appended with its length prefix. */
typedef struct bundle_build {
    pgcl_log_source *s;
    size_t len;
    uint64_t next_index; /* the leaf the store must give next */
    int count;
} bundle_build;

static pgcl_status add_to_bundle(void *fctx, uint64_t leaf_index, const unsigned char *data, size_t len, char *err,
                                 int cap) {
    bundle_build *b = fctx;
    if (leaf_index != b->next_index) {
        pgcl_errorf(err, cap, "the store gave record %llu where %llu was due", (unsigned long long)leaf_index,
                    (unsigned long long)b->next_index);
        return PGCL_ERR_FORMAT;
    }
    if (len == 0 || len > PGCL_TILE_ENTRY_MAX) {
        pgcl_errorf(err, cap, "record %llu is %zu bytes (1..%d)", (unsigned long long)leaf_index, len,
                    PGCL_TILE_ENTRY_MAX);
        return PGCL_ERR_FORMAT;
    }
    pgcl_status st = reserve(b->s, b->len + 2 + len, err, cap);
    if (st != PGCL_OK) return st;
    pgcl_tile_entry entry = {.data = data, .len = len};
    b->len += pgcl_tile_bundle_encode(&entry, 1, b->s->buf + b->len);
    b->next_index++;
    b->count++;
    return PGCL_OK;
}

pgcl_status pgcl_log_tile_read(void *source, const pgcl_tile_id *id, const unsigned char **data, size_t *len,
                               char *err, int cap) {
    pgcl_log_source *s = source;
    PGCL_ASSERT(s && s->ops && id && data && len);
    if (!pgcl_tile_in_tree(id, s->size)) {
        pgcl_errorf(err, cap, "no such tile in the tree of %llu leaves", (unsigned long long)s->size);
        return PGCL_ERR_NOT_FOUND;
    }
    /* in the tree: index·256 + width fits in the tree's size at its level */
    const uint64_t first = id->index << PGCL_TILE_HEIGHT;
    pgcl_status st;
    if (id->level == PGCL_TILE_ENTRIES) {
        bundle_build b = {.s = s, .len = 0, .next_index = first, .count = 0};
        st = s->ops->records(s->ctx, first, id->width, add_to_bundle, &b, err, cap);
        if (st != PGCL_OK) return st;
        if (b.count != id->width) {
            pgcl_errorf(err, cap, "the store gave %d records of %d", b.count, id->width);
            return PGCL_ERR_FORMAT;
        }
        *data = s->buf;
        *len = b.len;
        return PGCL_OK;
    }
    const size_t bytes = (size_t)id->width * PGCL_MERKLE_HASH_BYTES;
    st = reserve(s, bytes, err, cap);
    if (st != PGCL_OK) return st;
    pgcl_merkle_hash *out = (pgcl_merkle_hash *)s->buf; /* a hash is bytes: no alignment */
    if (id->level == 0)
        st = s->ops->leaf_hashes(s->ctx, first, id->width, out, err, cap);
    else
        st = s->ops->tile_roots(s->ctx, id->level - 1, first, id->width, out, err, cap);
    if (st != PGCL_OK) return st;
    *data = s->buf;
    *len = bytes;
    return PGCL_OK;
}
