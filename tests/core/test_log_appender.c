/* A writer's log over store rows (core/audit/log/log_append.c, log_source.c) against the naive
 * oracle: merkle.c's builders over the plain array of leaf hashes, and the subtree roots of every
 * level computed straight from the leaves. The store is in memory (arrays), insert-only and
 * strictly sequential, so a put out of order or twice is a failure here.
 *  - commits of random sizes through 70,000 leaves, with the sizes 1, 255, 256, 257, 511, 512,
 *    65535, 65536, 65537 and 65793 as commit boundaries (level 0 and level 1 tiles complete, level 2's
 *    first tile appears) and one commit that completes a level 1 tile from scratch: after each, the
 *    root, the tile roots the store holds (exactly the full tiles, each once), every tile whose width
 *    the commit changed and a sample of older and cut (narrower) tiles byte for byte, inclusion and
 *    consistency proofs and entries through tiles.h's reader over the source; at the end every tile
 *    of the tree equals the tile pgcl_tiles_append writes for the same entries;
 *  - mark/rewind, several seals in one transaction, the tile source's NOT_FOUND outside the tree;
 *  - policies: logged once per appender, again after a rollback or a rewind past them;
 *  - refusals: empty and oversize records, a wrong policy_ref, a state whose root the rows do not
 *    give (nothing written), missing rows (NOT_FOUND), a failing store write. */
#include <stdint.h>
#include <stdlib.h>

#include "log/log.h"
#include "merkle.h"
#include "merkle_test_util.h"
#include "record.h"
#include "record_rows.h"
#include "record_samples.h"
#include "test_util.h"
#include "tiles.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) { return xorshift64(&g_rng); }

/* ---- the in-memory store: one writer's rows ---- */

enum { LEVELS = 4, MAX_LEAVES = 80000 };

typedef struct mem_store {
    pgcl_merkle_hash *leaf_hash; /* (MAX_LEAVES) */
    unsigned char **record;      /* (MAX_LEAVES) owned copies */
    size_t *record_len;
    uint64_t n_leaves;
    pgcl_merkle_hash *root[LEVELS]; /* (MAX_LEAVES / 256) full tiles' roots per level */
    uint64_t n_roots[LEVELS];
    uint64_t missing_leaf;   /* a leaf whose row reads as missing (UINT64_MAX: none) */
    int fail_puts_after;     /* puts until a write fails (-1: never) */
    uint64_t puts;
} mem_store;

static void store_init(mem_store *s) {
    memset(s, 0, sizeof *s);
    s->leaf_hash = calloc(MAX_LEAVES, sizeof *s->leaf_hash);
    s->record = calloc(MAX_LEAVES, sizeof *s->record);
    s->record_len = calloc(MAX_LEAVES, sizeof *s->record_len);
    for (int l = 0; l < LEVELS; l++)
        s->root[l] = calloc(MAX_LEAVES / 256 + 1, sizeof *s->root[l]);
    s->missing_leaf = UINT64_MAX;
    s->fail_puts_after = -1;
}

/* A rollback: the rows beyond these counts go. */
static void store_truncate(mem_store *s, uint64_t n_leaves, const uint64_t n_roots[LEVELS]) {
    for (uint64_t i = n_leaves; i < s->n_leaves; i++) {
        free(s->record[i]);
        s->record[i] = NULL;
    }
    s->n_leaves = n_leaves;
    for (int l = 0; l < LEVELS; l++)
        s->n_roots[l] = n_roots[l];
}

static void store_free(mem_store *s) {
    uint64_t none[LEVELS] = {0};
    store_truncate(s, 0, none);
    free(s->leaf_hash);
    free(s->record);
    free(s->record_len);
    for (int l = 0; l < LEVELS; l++)
        free(s->root[l]);
}

static bool leaves_present(const mem_store *s, uint64_t first, int n) {
    return first + (uint64_t)n <= s->n_leaves && !(s->missing_leaf >= first && s->missing_leaf < first + (uint64_t)n);
}

static pgcl_status mem_leaf_hashes(void *ctx, uint64_t first, int n, pgcl_merkle_hash *out, char *err, int cap) {
    const mem_store *s = ctx;
    if (!leaves_present(s, first, n)) {
        pgcl_errorf(err, cap, "leaves %llu+%d missing", (unsigned long long)first, n);
        return PGCL_ERR_NOT_FOUND;
    }
    memcpy(out, s->leaf_hash + first, (size_t)n * sizeof *out);
    return PGCL_OK;
}

static pgcl_status mem_records(void *ctx, uint64_t first, int n, pgcl_log_record_fn fn, void *fctx, char *err,
                               int cap) {
    const mem_store *s = ctx;
    if (!leaves_present(s, first, n)) {
        pgcl_errorf(err, cap, "records %llu+%d missing", (unsigned long long)first, n);
        return PGCL_ERR_NOT_FOUND;
    }
    for (int i = 0; i < n; i++) {
        pgcl_status st = fn(fctx, first + (uint64_t)i, s->record[first + (uint64_t)i], s->record_len[first + (uint64_t)i],
                            err, cap);
        if (st != PGCL_OK) return st;
    }
    return PGCL_OK;
}

static pgcl_status mem_tile_roots(void *ctx, int level, uint64_t first, int n, pgcl_merkle_hash *out, char *err,
                                  int cap) {
    const mem_store *s = ctx;
    if (level < 0 || level >= LEVELS || first + (uint64_t)n > s->n_roots[level]) {
        pgcl_errorf(err, cap, "tile roots (%d, %llu+%d) missing", level, (unsigned long long)first, n);
        return PGCL_ERR_NOT_FOUND;
    }
    memcpy(out, s->root[level] + first, (size_t)n * sizeof *out);
    return PGCL_OK;
}

static bool put_allowed(mem_store *s, char *err, int cap) {
    if (s->fail_puts_after >= 0 && s->puts++ >= (uint64_t)s->fail_puts_after) {
        pgcl_errorf(err, cap, "disk full (injected)");
        return false;
    }
    return true;
}

static pgcl_status mem_put_leaf(void *ctx, uint64_t leaf_index, const pgcl_merkle_hash *leaf_hash,
                                const unsigned char *record, size_t len, char *err, int cap) {
    mem_store *s = ctx;
    if (!put_allowed(s, err, cap)) return PGCL_ERR_IO;
    CHECK(leaf_index == s->n_leaves && leaf_index < MAX_LEAVES, "leaf %llu put in order (store has %llu)",
          (unsigned long long)leaf_index, (unsigned long long)s->n_leaves);
    if (leaf_index != s->n_leaves || leaf_index >= MAX_LEAVES) return PGCL_ERR_DB;
    pgcl_merkle_hash want = pgcl_merkle_leaf_hash(record, len);
    CHECK(same_hash(&want, leaf_hash), "leaf %llu: its hash is SHA-256(0x00 || record)", (unsigned long long)leaf_index);
    s->leaf_hash[leaf_index] = *leaf_hash;
    s->record[leaf_index] = malloc(len);
    memcpy(s->record[leaf_index], record, len);
    s->record_len[leaf_index] = len;
    s->n_leaves++;
    return PGCL_OK;
}

static pgcl_status mem_put_tile_root(void *ctx, int level, uint64_t tile_index, const pgcl_merkle_hash *root,
                                     char *err, int cap) {
    mem_store *s = ctx;
    if (!put_allowed(s, err, cap)) return PGCL_ERR_IO;
    CHECK(level >= 0 && level < LEVELS && tile_index == s->n_roots[level], "tile root (%d, %llu) put once, in order",
          level, (unsigned long long)tile_index);
    if (level < 0 || level >= LEVELS || tile_index != s->n_roots[level]) return PGCL_ERR_DB;
    s->root[level][tile_index] = *root;
    s->n_roots[level]++;
    return PGCL_OK;
}

static const pgcl_log_ops MEM_OPS = {mem_leaf_hashes, mem_records, mem_tile_roots, mem_put_leaf, mem_put_tile_root};

/* ---- the oracle: every leaf, and the full subtrees of each level straight from the leaves ---- */

typedef struct oracle {
    pgcl_merkle_hash *leaf;  /* (MAX_LEAVES) */
    unsigned char **record;  /* (MAX_LEAVES) borrowed from the store */
    size_t *record_len;
    uint64_t n;
    pgcl_merkle_hash *node[LEVELS]; /* node[L][j] = MTH(leaves j·256^L .. (j+1)·256^L − 1), complete ones */
    uint64_t n_node[LEVELS];
} oracle;

static void oracle_init(oracle *o, const mem_store *s) {
    memset(o, 0, sizeof *o);
    o->leaf = s->leaf_hash; /* the store's rows are checked against records below, leaf by leaf */
    o->record = s->record;
    o->record_len = s->record_len;
    for (int l = 0; l < LEVELS; l++)
        o->node[l] = calloc(MAX_LEAVES + 1, sizeof *o->node[l]);
}

static void oracle_free(oracle *o) {
    for (int l = 0; l < LEVELS; l++)
        free(o->node[l]);
}

/* Grows the oracle to n leaves (the store's rows; each checked against its record). */
static void oracle_grow(oracle *o, uint64_t n) {
    for (uint64_t i = o->n; i < n; i++) {
        pgcl_merkle_hash h = pgcl_merkle_leaf_hash(o->record[i], o->record_len[i]);
        CHECK(same_hash(&h, &o->leaf[i]), "leaf %llu's hash", (unsigned long long)i);
    }
    o->n = n;
    uint64_t span = 1;
    for (int l = 0; l < LEVELS; l++, span *= 256) {
        for (uint64_t j = o->n_node[l]; (j + 1) * span <= n; j++)
            o->node[l][j] = pgcl_merkle_root(o->leaf + j * span, span);
        o->n_node[l] = n / span;
    }
}

/* The bytes tile id must have in the tree of the oracle's leaves (caller frees). */
static unsigned char *oracle_tile(const oracle *o, const pgcl_tile_id *id, size_t *len) {
    const uint64_t first = id->index * 256;
    if (id->level == PGCL_TILE_ENTRIES) {
        pgcl_tile_entry e[PGCL_TILE_WIDTH];
        for (int i = 0; i < id->width; i++)
            e[i] = (pgcl_tile_entry){o->record[first + (uint64_t)i], o->record_len[first + (uint64_t)i]};
        *len = pgcl_tile_bundle_encode(e, (size_t)id->width, NULL);
        unsigned char *out = malloc(*len);
        pgcl_tile_bundle_encode(e, (size_t)id->width, out);
        return out;
    }
    *len = (size_t)id->width * 32;
    unsigned char *out = malloc(*len);
    memcpy(out, o->node[id->level] + first, *len);
    return out;
}

/* ---- checks ---- */

static void check_tile(pgcl_log_source *src, const oracle *o, const pgcl_tile_id *id) {
    char path[PGCL_TILE_PATH_MAX], err[256] = "";
    pgcl_tile_path(id, path);
    const unsigned char *data;
    size_t len, want_len;
    pgcl_status st = pgcl_log_tile_read(src, id, &data, &len, err, sizeof err);
    CHECK(st == PGCL_OK, "%s at size %llu: %s %s", path, (unsigned long long)src->size, pgcl_status_str(st), err);
    if (st != PGCL_OK) return;
    unsigned char *want = oracle_tile(o, id, &want_len);
    CHECK(len == want_len && memcmp(data, want, len) == 0, "%s at size %llu: bytes", path,
          (unsigned long long)src->size);
    free(want);
}

/* Every tile whose width changed from old_size to new_size, a sample of the others and cut ones. */
static void check_tiles_after_commit(pgcl_log_source *src, const oracle *o, uint64_t old_size, uint64_t new_size) {
    for (int level = PGCL_TILE_ENTRIES; level < LEVELS; level++) {
        const int shift = level < 0 ? 0 : 8 * level;
        for (uint64_t n = (old_size >> shift) / 256; n <= (new_size >> shift) / 256; n++) {
            int w = pgcl_tile_width_in_tree(level, n, new_size);
            if (w == 0) continue;
            pgcl_tile_id id = {.level = level, .index = n, .width = w};
            check_tile(src, o, &id);
            id.width = 1 + (int)(next_random() % (uint64_t)w); /* a narrower tile cut from it */
            if (id.width < PGCL_TILE_WIDTH) check_tile(src, o, &id);
        }
        uint64_t tiles = ((new_size >> shift) + 255) / 256;
        if (tiles == 0) continue;
        uint64_t n = next_random() % tiles;
        pgcl_tile_id id = {.level = level, .index = n, .width = pgcl_tile_width_in_tree(level, n, new_size)};
        if (id.width > 0) check_tile(src, o, &id);
    }
}

/* Tiles the tree does not have: NOT_FOUND whatever the rows hold. */
static void check_not_in_tree(pgcl_log_source *src, uint64_t size) {
    pgcl_tile_id beyond[] = {
        {0, size / 256 + 1, 1},
        {PGCL_TILE_ENTRIES, size / 256 + 1, 1},
        {3, 0, 1},
        {0, size / 256, 256}, /* full where the tree's tile is partial (or absent) */
    };
    for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++) {
        if (pgcl_tile_in_tree(&beyond[i], size)) continue;
        const unsigned char *data;
        size_t len;
        char err[256];
        CHECK(pgcl_log_tile_read(src, &beyond[i], &data, &len, err, sizeof err) == PGCL_ERR_NOT_FOUND,
              "tile (%d, %llu, %d) is not in the tree of %llu", beyond[i].level, (unsigned long long)beyond[i].index,
              beyond[i].width, (unsigned long long)size);
    }
}

static void check_proofs(pgcl_tiles_reader *r, const oracle *o, uint64_t size, const uint64_t *earlier, int n_earlier) {
    char err[256] = "";
    pgcl_merkle_hash got[PGCL_MERKLE_MAX_PATH], want[PGCL_MERKLE_MAX_PATH];
    int n_got = 0;
    for (int k = 0; k < 2; k++) {
        uint64_t index = k == 0 ? size - 1 : next_random() % size;
        pgcl_status st = pgcl_tiles_inclusion(r, size, index, got, &n_got, err, sizeof err);
        int n_want = pgcl_merkle_inclusion_path(o->leaf, size, index, want);
        CHECK(st == PGCL_OK && same_path(got, n_got, want, n_want), "inclusion of %llu in %llu: %s",
              (unsigned long long)index, (unsigned long long)size, err);
        const unsigned char *data;
        size_t len;
        st = pgcl_tiles_entry(r, size, index, &data, &len, err, sizeof err);
        CHECK(st == PGCL_OK && len == o->record_len[index] && memcmp(data, o->record[index], len) == 0,
              "entry %llu of %llu: %s", (unsigned long long)index, (unsigned long long)size, err);
    }
    if (n_earlier == 0) return;
    uint64_t first = earlier[next_random() % (uint64_t)n_earlier];
    if (first == 0) return;
    pgcl_status st = pgcl_tiles_consistency(r, first, size, got, &n_got, err, sizeof err);
    int n_want = pgcl_merkle_consistency_proof(o->leaf, first, size, want);
    CHECK(st == PGCL_OK && same_path(got, n_got, want, n_want), "consistency %llu -> %llu: %s",
          (unsigned long long)first, (unsigned long long)size, err);
    pgcl_merkle_hash r1 = pgcl_merkle_root(o->leaf, first), r2 = pgcl_merkle_root(o->leaf, size);
    CHECK(pgcl_merkle_verify_consistency(first, size, &r1, &r2, got, n_got), "consistency %llu -> %llu verifies",
          (unsigned long long)first, (unsigned long long)size);
}

/* A random record of 1..max bytes, its first bytes the leaf index (so leaves differ). */
static size_t random_record(unsigned char *buf, size_t max, uint64_t index) {
    size_t len = 8 + next_random() % (max - 8);
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(i < 8 ? index >> (8 * i) : next_random());
    return len;
}

/* One transaction: begin from the state, add count records, seal; the store's state after. */
static void commit(pgcl_log_appender *a, mem_store *s, uint64_t *size, pgcl_merkle_hash *root, uint64_t count) {
    unsigned char buf[200];
    pgcl_log_begin(a, *size, root);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t index = 0;
        pgcl_status st = pgcl_log_add(a, buf, random_record(buf, sizeof buf, *size + i), &index);
        CHECK(st == PGCL_OK && index == *size + i, "add leaf %llu", (unsigned long long)(*size + i));
    }
    CHECK(pgcl_log_pending(a) == count, "pending %llu", (unsigned long long)count);
    char err[256] = "";
    pgcl_status st = pgcl_log_seal(a, &MEM_OPS, s, size, root, err, sizeof err);
    CHECK(st == PGCL_OK, "seal of %llu leaves: %s %s", (unsigned long long)count, pgcl_status_str(st), err);
    pgcl_log_committed(a);
}

static void test_commits(void) {
    static const uint64_t boundaries[] = {1, 255, 256, 257, 511, 512, 65535, 65536, 65537, 65793, 70000};
    mem_store s;
    store_init(&s);
    oracle o;
    oracle_init(&o, &s);
    pgcl_log_appender *a = pgcl_log_appender_create();
    pgcl_log_source src;
    pgcl_log_source_init(&src, &MEM_OPS, &s, 0);
    pgcl_tiles_reader *reader = pgcl_tiles_reader_create(pgcl_log_tile_read, &src);
    uint64_t size = 0, sizes[256];
    int n_sizes = 0;
    pgcl_merkle_hash root = pgcl_merkle_root(NULL, 0);
    for (size_t b = 0; b < sizeof boundaries / sizeof boundaries[0]; b++) {
        while (size < boundaries[b]) {
            uint64_t left = boundaries[b] - size;
            uint64_t count = next_random() % 4 == 0 ? 1 + next_random() % 5 : 1 + next_random() % 3000;
            if (size == 512) count = 65535 - 512; /* 253 level 0 tiles completed by one commit */
            if (count > left) count = left;
            const uint64_t old_size = size;
            if (g_failures > 0) break; /* a broken appender stops the walk (it would not advance) */
            commit(a, &s, &size, &root, count);
            CHECK(size == old_size + count && s.n_leaves == size, "size %llu", (unsigned long long)size);
            oracle_grow(&o, size);
            pgcl_merkle_hash want = pgcl_merkle_root(o.leaf, size);
            CHECK(same_hash(&root, &want), "root at %llu", (unsigned long long)size);
            CHECK(s.n_roots[0] == size / 256 && s.n_roots[1] == size / 65536 && s.n_roots[2] == 0,
                  "the full tiles' roots at %llu: %llu, %llu", (unsigned long long)size,
                  (unsigned long long)s.n_roots[0], (unsigned long long)s.n_roots[1]);
            src.size = size;
            pgcl_tiles_reader_reset(reader);
            check_tiles_after_commit(&src, &o, old_size, size);
            check_not_in_tree(&src, size);
            check_proofs(reader, &o, size, sizes, n_sizes);
            pgcl_merkle_hash via_reader;
            char err[256] = "";
            CHECK(pgcl_tiles_root(reader, size, &via_reader, err, sizeof err) == PGCL_OK &&
                      same_hash(&via_reader, &want),
                  "the reader's root at %llu: %s", (unsigned long long)size, err);
            if (n_sizes < 256) sizes[n_sizes++] = size;
        }
    }
    if (g_failures > 0) size = s.n_leaves;
    /* an older tree from the same rows: a source of an earlier size answers that tree's tiles */
    src.size = 300;
    pgcl_tile_id cut = {.level = 0, .index = 1, .width = 44};
    check_tile(&src, &o, &cut);
    pgcl_tile_id wider = {.level = 0, .index = 1, .width = 45};
    const unsigned char *data;
    size_t len;
    CHECK(pgcl_log_tile_read(&src, &wider, &data, &len, NULL, 0) == PGCL_ERR_NOT_FOUND, "wider than size 300's tile");
    /* every tile of the final tree: the bytes pgcl_tiles_append writes for the same entries */
    pgcl_tile_entry *entries = malloc(size * sizeof *entries);
    for (uint64_t i = 0; i < size; i++)
        entries[i] = (pgcl_tile_entry){s.record[i], s.record_len[i]};
    pgcl_tiles_batch *batch = NULL;
    char err[256] = "";
    pgcl_status st = pgcl_tiles_append(pgcl_log_tile_read, &src, 0, NULL, entries, size, &batch, err, sizeof err);
    CHECK(st == PGCL_OK && same_hash(&batch->new_root, &root), "pgcl_tiles_append of all %llu: %s",
          (unsigned long long)size, err);
    src.size = size;
    size_t compared = 0;
    for (size_t i = 0; st == PGCL_OK && i < batch->n_tiles; i++) {
        const pgcl_tile_write *w = &batch->tiles[i];
        st = pgcl_log_tile_read(&src, &w->id, &data, &len, err, sizeof err);
        CHECK(st == PGCL_OK && len == w->len && memcmp(data, w->data, len) == 0, "%s as pgcl_tiles_append's: %s",
              w->path, err);
        compared++;
    }
    CHECK(compared == 274 + 274 + 2 + 1, "every tile of 70000 leaves compared (%zu)", compared);
    pgcl_tiles_batch_destroy(batch);
    free(entries);
    pgcl_tiles_reader_destroy(reader);
    pgcl_log_source_free(&src);
    pgcl_log_appender_destroy(a);
    oracle_free(&o);
    store_free(&s);
}

/* ---- mark, rewind, seals, refusals ---- */

static void test_mark_rewind(void) {
    mem_store s;
    store_init(&s);
    pgcl_log_appender *a = pgcl_log_appender_create();
    unsigned char buf[64];
    uint64_t size = 0, index = 0;
    pgcl_merkle_hash root, leaves[16];
    char err[256] = "";
    pgcl_log_begin(a, 0, NULL);
    for (int i = 0; i < 3; i++) {
        size_t len = random_record(buf, sizeof buf, (uint64_t)i);
        leaves[i] = pgcl_merkle_leaf_hash(buf, len);
        pgcl_log_add(a, buf, len, &index);
    }
    size_t mark = pgcl_log_mark(a);
    CHECK(mark == 3, "mark after three");
    for (int i = 0; i < 5; i++)
        pgcl_log_add(a, buf, random_record(buf, sizeof buf, 100 + (uint64_t)i), &index);
    CHECK(index == 7 && pgcl_log_pending(a) == 8, "eight pending");
    pgcl_log_rewind(a, mark);
    CHECK(pgcl_log_pending(a) == 3, "rewound to three");
    size_t len = random_record(buf, sizeof buf, 3);
    leaves[3] = pgcl_merkle_leaf_hash(buf, len);
    CHECK(pgcl_log_add(a, buf, len, &index) == PGCL_OK && index == 3, "the next leaf after a rewind is 3");
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root, err, sizeof err) == PGCL_OK && size == 4 && s.n_leaves == 4,
          "seal: %s", err);
    pgcl_merkle_hash want = pgcl_merkle_root(leaves, 4);
    CHECK(same_hash(&root, &want) && same_hash(&s.leaf_hash[3], &leaves[3]), "the rewound leaves are not in the tree");
    /* a second seal in the same transaction continues from the first */
    len = random_record(buf, sizeof buf, 4);
    leaves[4] = pgcl_merkle_leaf_hash(buf, len);
    CHECK(pgcl_log_add(a, buf, len, &index) == PGCL_OK && index == 4 && pgcl_log_pending(a) == 1, "after a seal");
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root, err, sizeof err) == PGCL_OK && size == 5, "second seal: %s", err);
    want = pgcl_merkle_root(leaves, 5);
    CHECK(same_hash(&root, &want), "root after the second seal");
    /* nothing pending: the state unchanged, nothing written */
    uint64_t size2 = 0;
    pgcl_merkle_hash root2;
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size2, &root2, err, sizeof err) == PGCL_OK && size2 == 5 &&
              same_hash(&root2, &root) && s.n_leaves == 5,
          "an empty seal");
    /* refusals of add */
    CHECK(pgcl_log_add(a, buf, 0, NULL) == PGCL_ERR_INVALID, "an empty record");
    unsigned char *big = calloc(PGCL_TILE_ENTRY_MAX + 1, 1);
    CHECK(pgcl_log_add(a, big, PGCL_TILE_ENTRY_MAX + 1, NULL) == PGCL_ERR_INVALID, "an oversize record");
    CHECK(pgcl_log_add(a, big, PGCL_TILE_ENTRY_MAX, &index) == PGCL_OK && index == 5, "the largest record");
    free(big);
    /* a state whose root the rows do not give: nothing written */
    pgcl_merkle_hash wrong = root;
    wrong.b[0] ^= 1;
    pgcl_log_begin(a, 5, &wrong);
    pgcl_log_add(a, buf, 10, NULL);
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root2, err, sizeof err) == PGCL_ERR_MISMATCH && s.n_leaves == 5,
          "a wrong root refused, nothing written: %s", err);
    /* a state beyond the rows: NOT_FOUND */
    pgcl_log_begin(a, 9, &root);
    pgcl_log_add(a, buf, 10, NULL);
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root2, err, sizeof err) == PGCL_ERR_NOT_FOUND && s.n_leaves == 5,
          "rows missing: %s", err);
    /* a failing write: its status */
    s.fail_puts_after = 1;
    s.puts = 0;
    pgcl_log_begin(a, 5, &root);
    pgcl_log_add(a, buf, 10, NULL);
    pgcl_log_add(a, buf, 11, NULL);
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size2, &root2, err, sizeof err) == PGCL_ERR_IO, "a failing write: %s", err);
    pgcl_log_appender_destroy(a);
    store_free(&s);
}

static void test_missing_rows(void) {
    mem_store s;
    store_init(&s);
    pgcl_log_appender *a = pgcl_log_appender_create();
    uint64_t size = 0;
    pgcl_merkle_hash root = pgcl_merkle_root(NULL, 0);
    commit(a, &s, &size, &root, 600);
    pgcl_log_source src;
    pgcl_log_source_init(&src, &MEM_OPS, &s, size);
    const unsigned char *data;
    size_t len;
    char err[256] = "";
    s.missing_leaf = 300;
    pgcl_tile_id level0 = {0, 1, 256}, bundle = {PGCL_TILE_ENTRIES, 1, 256}, other = {0, 0, 256};
    CHECK(pgcl_log_tile_read(&src, &level0, &data, &len, err, sizeof err) == PGCL_ERR_NOT_FOUND, "leaf row missing");
    CHECK(pgcl_log_tile_read(&src, &bundle, &data, &len, err, sizeof err) == PGCL_ERR_NOT_FOUND, "record row missing");
    CHECK(pgcl_log_tile_read(&src, &other, &data, &len, err, sizeof err) == PGCL_OK && len == 8192, "others stay");
    pgcl_tiles_reader *r = pgcl_tiles_reader_create(pgcl_log_tile_read, &src);
    pgcl_merkle_hash got;
    CHECK(pgcl_tiles_root(r, size, &got, err, sizeof err) == PGCL_OK, "root at 600 reads no leaf of tile 1: %s", err);
    s.missing_leaf = 550;
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_root(r, size, &got, err, sizeof err) == PGCL_ERR_NOT_FOUND, "root over a missing row: %s", err);
    s.missing_leaf = UINT64_MAX;
    s.n_roots[0] = 1; /* the root of full tile 1 lost */
    pgcl_tile_id level1 = {1, 0, 2};
    CHECK(pgcl_log_tile_read(&src, &level1, &data, &len, err, sizeof err) == PGCL_ERR_NOT_FOUND, "tile root missing");
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_root(r, size, &got, err, sizeof err) == PGCL_ERR_NOT_FOUND, "root at 600 needs level 1's tile");
    pgcl_merkle_hash want = pgcl_merkle_root(s.leaf_hash, 511);
    CHECK(pgcl_tiles_root(r, 511, &got, err, sizeof err) == PGCL_OK && same_hash(&got, &want),
          "root at 511 from the same rows: %s", err);
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_inclusion(r, 70, 3, (pgcl_merkle_hash[64]){0}, &(int){0}, err, sizeof err) == PGCL_OK,
          "a smaller tree from the same rows");
    pgcl_tiles_reader_destroy(r);
    pgcl_log_source_free(&src);
    pgcl_log_appender_destroy(a);
    store_free(&s);
}

/* ---- policies ---- */

static pgcl_decision_record_buf *sample_decision(int variant) {
    pgcl_decision_record_buf *d = calloc(1, sizeof *d);
    bool ok = sample_record(SAMPLE_DECISION, &d->decision);
    d->policy = sample_policy();
    if (variant == 1) { /* another policy: other thresholds in its JSON */
        static const char json[] = "{\"kind\":\"threshold\",\"label\":\"toxic\",\"t_block\":0.9,\"t_review\":0.5}";
        d->policy.policy.policy_json = (pgcl_record_text){json, sizeof json - 1};
        d->decision.decision.t_review = 0.5;
        d->decision.decision.t_block = 0.9;
    }
    ok = ok && pgcl_record_policy_ref(&d->policy.policy, d->decision.decision.policy_ref, NULL, 0) == PGCL_OK;
    CHECK(ok, "sample decision %d", variant);
    return d;
}

/* One transaction of one decision: the leaves it added. */
static size_t add_one(pgcl_log_appender *a, const pgcl_decision_record_buf *d, uint64_t size,
                      const pgcl_merkle_hash *root) {
    pgcl_log_begin(a, size, root);
    char why[256] = "";
    uint64_t index = 0;
    pgcl_status st = pgcl_log_add_decision(a, d, &index, why, sizeof why);
    CHECK(st == PGCL_OK && index == size + pgcl_log_pending(a) - 1, "add_decision: %s", why);
    return pgcl_log_pending(a);
}

static void test_policies(void) {
    mem_store s;
    store_init(&s);
    pgcl_log_appender *a = pgcl_log_appender_create();
    pgcl_decision_record_buf *d = sample_decision(0), *d2 = sample_decision(1);
    uint64_t size = 0, none[LEVELS] = {0};
    pgcl_merkle_hash root = pgcl_merkle_root(NULL, 0);
    char err[256] = "";
    /* rolled back: logged again */
    CHECK(add_one(a, d, size, &root) == 2, "the first decision brings its policy");
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root, err, sizeof err) == PGCL_OK && size == 2, "seal: %s", err);
    store_truncate(&s, 0, none);
    size = 0;
    root = pgcl_merkle_root(NULL, 0);
    CHECK(add_one(a, d, size, &root) == 2, "after a rollback the policy is logged again");
    /* rewound past it: logged again */
    pgcl_log_rewind(a, 0);
    CHECK(pgcl_log_pending(a) == 0, "rewound");
    uint64_t index = 0;
    CHECK(pgcl_log_add_decision(a, d, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 2 && index == 1,
          "after a rewind past it the policy is logged again");
    CHECK(pgcl_log_add_decision(a, d, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 3 && index == 2,
          "the same transaction's second decision does not");
    CHECK(pgcl_log_seal(a, &MEM_OPS, &s, &size, &root, err, sizeof err) == PGCL_OK && size == 3, "seal: %s", err);
    pgcl_log_committed(a);
    /* the leaves: policy, decision, decision, as encoded */
    pgcl_record back;
    CHECK(pgcl_record_decode(s.record[0], s.record_len[0], &back, err, sizeof err) == PGCL_OK &&
              back.kind == PGCL_RECORD_POLICY && pgcl_record_equal(&back, &d->policy),
          "leaf 0 is the policy");
    CHECK(memcmp(s.leaf_hash[0].b, d->decision.decision.policy_ref, 32) == 0, "the decision names leaf 0");
    CHECK(pgcl_record_decode(s.record[1], s.record_len[1], &back, err, sizeof err) == PGCL_OK &&
              pgcl_record_equal(&back, &d->decision),
          "leaf 1 is the decision");
    /* committed: not again, in this transaction or the next */
    CHECK(add_one(a, d, size, &root) == 1, "a committed policy is not logged again");
    CHECK(pgcl_log_add_decision(a, d2, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 3,
          "another policy is");
    size_t mark = pgcl_log_mark(a);
    CHECK(pgcl_log_add_decision(a, d2, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 4, "once");
    pgcl_log_rewind(a, mark); /* not past the policy: still pending in this transaction */
    CHECK(pgcl_log_add_decision(a, d2, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 4,
          "a rewind short of the policy keeps it");
    /* a wrong policy_ref: refused, nothing added */
    pgcl_decision_record_buf *bad = sample_decision(0);
    bad->decision.decision.policy_ref[5] ^= 1;
    CHECK(pgcl_log_add_decision(a, bad, &index, err, sizeof err) == PGCL_ERR_INVALID && strstr(err, "policy_ref") &&
              pgcl_log_pending(a) == 4,
          "a wrong policy_ref: %s", err);
    /* a decision breaking a rule: refused with its field, its policy not left behind */
    pgcl_decision_record_buf *bad2 = sample_decision(0);
    bad2->decision.decision.policy_ref[0] ^= 1;
    static const char other_json[] = "{\"kind\":\"threshold\",\"x\":1}";
    bad2->policy.policy.policy_json = (pgcl_record_text){other_json, sizeof other_json - 1};
    CHECK(pgcl_record_policy_ref(&bad2->policy.policy, bad2->decision.decision.policy_ref, NULL, 0) == PGCL_OK,
          "another policy");
    bad2->decision.decision.latency_us = -1;
    CHECK(pgcl_log_add_decision(a, bad2, &index, err, sizeof err) == PGCL_ERR_INVALID && strstr(err, "latency") &&
              pgcl_log_pending(a) == 4,
          "a broken decision: %s", err);
    pgcl_log_begin(a, size, &root);
    bad2->decision.decision.latency_us = 1;
    CHECK(pgcl_log_add_decision(a, bad2, &index, err, sizeof err) == PGCL_OK && pgcl_log_pending(a) == 2,
          "its policy was not counted as logged: %s", err);
    /* add_record: any other event */
    pgcl_record contest;
    sample_record(SAMPLE_CONTEST, &contest);
    CHECK(pgcl_log_add_record(a, &contest, &index, err, sizeof err) == PGCL_OK && index == size + 2, "a contest");
    contest.contest.reason.len = 0;
    CHECK(pgcl_log_add_record(a, &contest, &index, err, sizeof err) == PGCL_ERR_INVALID && pgcl_log_pending(a) == 3,
          "a contest without reason: %s", err);
    free(bad);
    free(bad2);
    free(d);
    free(d2);
    pgcl_log_appender_destroy(a);
    store_free(&s);
}

int main(void) {
    test_mark_rewind();
    test_missing_rows();
    test_policies();
    test_commits();
    return test_finish("test_log_appender");
}
