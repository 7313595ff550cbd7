/* C2SP tlog-tiles (core/audit/log/tiles.c, tiles_read.c) against the naive oracle: merkle.c's
 * builders over the plain array of leaf hashes (pgcl_merkle_root, _inclusion_path,
 * _consistency_proof), and tile widths computed by division from the spec's definition.
 *  - paths: the spec's examples, every valid kind round-trips, a list of malformed ones is refused,
 *    and 400,000 random and mutated strings: any the parser accepts is the canonical spelling;
 *  - widths: the spec's examples (sizes 256 and 70,000);
 *  - the appender over an in-memory store, commit after commit: the set of tiles each commit writes
 *    (exactly the tiles whose width changed), every tile's bytes, each write's `supersedes`, the new
 *    root, and that full tiles are never rewritten and a wider tile starts with the narrower one's
 *    bytes. Sizes 0, 1, 255, 256, 257, 511, 512, 65535, 65536, 65537, 65793, 70000 are commit
 *    boundaries; one batch of 70,000; random batches; stores that keep every tile or one per
 *    (level, index). At tile heights 1, 2, 3 (not C2SP; tiles_impl.h) the same code crosses the
 *    boundaries of up to 12 levels with a few thousand leaves;
 *  - the reader at each commit: root, inclusion proofs (every index for small trees), consistency
 *    proofs from every earlier commit, entries — all equal to the oracle and verified by merkle.c;
 *    and at sizes that were never a commit (tiles cut from wider ones);
 *  - refusals: oversize entries, a missing, malformed or tampered partial tile, a wrong expected
 *    root, a failing store read (fault injection) — with nothing left allocated. */
#include <stdint.h>
#include <stdlib.h>

#include "merkle.h"
#include "merkle_test_util.h"
#include "test_util.h"
#include "tiles.h"
#include "tiles_impl.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t next_random(void) { return xorshift64(&g_rng); }

/* ---- paths ---- */

static void check_path(int level, uint64_t index, int width, const char *want) {
    pgcl_tile_id id = {.level = level, .index = index, .width = width}, back;
    char path[PGCL_TILE_PATH_MAX];
    int n = pgcl_tile_path(&id, path);
    CHECK(n == (int)strlen(want) && strcmp(path, want) == 0, "path of (%d, %llu, %d): %s, want %s", level,
          (unsigned long long)index, width, path, want);
    CHECK(pgcl_tile_parse_path(want, strlen(want), &back) == PGCL_OK && back.level == level && back.index == index &&
              back.width == width,
          "parse %s", want);
}

static void check_refused(const char *path, size_t len) {
    pgcl_tile_id id;
    CHECK(pgcl_tile_parse_path(path, len, &id) == PGCL_ERR_FORMAT, "refuses \"%.*s\"", (int)len, path);
}

/* Accepted means canonical: the path the parsed id formats to is the input, byte for byte. */
static void check_accepted_is_canonical(const char *s, size_t len) {
    pgcl_tile_id id;
    if (pgcl_tile_parse_path(s, len, &id) != PGCL_OK) return;
    char path[PGCL_TILE_PATH_MAX];
    int n = pgcl_tile_path(&id, path);
    CHECK((size_t)n == len && memcmp(path, s, len) == 0, "accepted \"%.*s\" is not canonical (%s)", (int)len, s, path);
}

static void test_paths(void) {
    check_path(0, 0, 256, "tile/0/000");
    check_path(0, 1234067, 256, "tile/0/x001/x234/067");
    check_path(1, 999, 256, "tile/1/999");
    check_path(1, 1000, 256, "tile/1/x001/000");
    check_path(2, 1000000, 7, "tile/2/x001/x000/000.p/7");
    check_path(63, 5, 255, "tile/63/005.p/255");
    check_path(PGCL_TILE_ENTRIES, 273, 112, "tile/entries/273.p/112");
    check_path(PGCL_TILE_ENTRIES, 0, 1, "tile/entries/000.p/1");
    check_path(PGCL_TILE_ENTRIES, UINT64_MAX, 256, "tile/entries/x018/x446/x744/x073/x709/x551/615");
    char longest[PGCL_TILE_PATH_MAX];
    pgcl_tile_id big = {.level = PGCL_TILE_ENTRIES, .index = UINT64_MAX, .width = 255};
    CHECK(pgcl_tile_path(&big, longest) == PGCL_TILE_PATH_MAX - 12, "the longest path: %s", longest);

    /* clang-format off */
    static const char *const bad[] = {
        "", "tile", "tile/", "tile/0", "tile/0/", "tile/0/00", "tile/0/0000", "tile/0/1234", "tile/00/000",
        "tile/01/000", "tile/64/000", "tile/100/000", "tile/-1/000", "tile/data/000", "tile//000", "Tile/0/000",
        "tile/entries", "tile/entries/", "tile/entry/000", "tile/0/x000/001", "tile/0/x000/x001/000",
        "tile/entries/x000/000", "tile/0/x1/000", "tile/0/x0001/000", "tile/0/x001", "tile/0/x001/", "tile/0/001/002",
        "tile/0/x001/002/", "tile/0/000/", "tile/0/000.p", "tile/0/000.p/", "tile/0/000.p/0", "tile/0/000.p/256",
        "tile/0/000.p/007", "tile/0/000.p/07", "tile/0/000.p/1/", "tile/0/000.p/1x", "tile/0/000.p/-1",
        "tile/0/000.P/1", "tile/0/000.q/1", "tile/0/000p/1", "tile/0/000?x=1", "tile/0/000 ", " tile/0/000",
        "tile/0/+00", "tile/0/0x0", "tile/8/x/000", "tile/0/X001/000", "tile/0/000.p/1000",
        "tile/0/x018/x446/x744/x073/x709/x551/616", "tile/0/x100/x000/x000/x000/x000/x000/000",
        "tile/0/x001/x000/x000/x000/x000/x000/x000/000", "tile/entries/000.p/255/000", "tile/0/000.p/2550",
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        check_refused(bad[i], strlen(bad[i]));
    check_refused("tile/0/000\0", 11);
    check_refused("tile/0\0/000", 11);
    check_refused("tile/0/000.p/1\0", 15);
    check_refused(NULL, 0);
    /* a prefix of a valid path that is itself valid is accepted only as itself */
    const char *p = "tile/0/000.p/12";
    pgcl_tile_id id;
    CHECK(pgcl_tile_parse_path(p, 14, &id) == PGCL_OK && id.width == 1, "length bounds the parse");
    CHECK(pgcl_tile_parse_path(p, 10, &id) == PGCL_OK && id.width == 256, "length bounds the parse (full)");

    /* every kind round-trips: random ids, both directions */
    for (int i = 0; i < 100000; i++) {
        pgcl_tile_id a = {.level = (int)(next_random() % 65) - 1, .width = (int)(next_random() % 256) + 1};
        int digits = (int)(next_random() % 21);
        a.index = digits == 20 ? next_random() : next_random() % (uint64_t)(digits ? 1ull << (3 * digits) : 1);
        char buf[PGCL_TILE_PATH_MAX];
        int n = pgcl_tile_path(&a, buf);
        pgcl_tile_id b;
        CHECK(pgcl_tile_parse_path(buf, (size_t)n, &b) == PGCL_OK && b.level == a.level && b.index == a.index &&
                  b.width == a.width,
              "round trip %s", buf);
        /* then a mutation of it: one byte replaced, inserted or deleted, or the string cut */
        char m[PGCL_TILE_PATH_MAX + 2];
        memcpy(m, buf, (size_t)n);
        size_t len = (size_t)n, at = next_random() % len;
        static const char alphabet[] = "tile/entries0123456789x.p/\0-+ ";
        char c = alphabet[next_random() % (sizeof alphabet - 1)];
        switch (next_random() % 4) {
        case 0:
            m[at] = c;
            break;
        case 1:
            memmove(m + at + 1, m + at, len - at), m[at] = c, len++;
            break;
        case 2:
            memmove(m + at, m + at + 1, len - at - 1), len--;
            break;
        default:
            len = at;
            break;
        }
        check_accepted_is_canonical(m, len);
    }
    /* and strings from the paths' own alphabet */
    for (int i = 0; i < 300000; i++) {
        static const char *const pieces[] = {"tile/", "entries/", "0",   "1",  "9",  "6", "3",   "/",     "x",   "x0",
                                             "00",    "999",      ".p/", ".p", "25", "5", "000", "x001/", "256", "\0"};
        char s[96];
        size_t len = 0;
        int n = (int)(next_random() % 9);
        if (next_random() % 4) memcpy(s, "tile/", 5), len = 5;
        for (int k = 0; k < n; k++) {
            const char *piece = pieces[next_random() % (sizeof pieces / sizeof *pieces)];
            size_t pl = piece[0] ? strlen(piece) : 1;
            memcpy(s + len, piece, pl);
            len += pl;
        }
        check_accepted_is_canonical(s, len);
    }
}

/* ---- widths ---- */

/* The spec's definition by division: level L has floor(size / W^L) hashes. */
static int naive_width(int height, int level, uint64_t index, uint64_t size) {
    if (level == PGCL_TILE_ENTRIES) level = 0;
    uint64_t w = (uint64_t)1 << height, span = 1;
    for (int l = 0; l < level; l++) {
        if (span > size / w) return 0;
        span *= w;
    }
    uint64_t hashes = size / span;
    if (index > hashes / w) return 0;
    uint64_t left = hashes - index * w;
    return (int)(left < w ? left : w);
}

static void test_widths(void) {
    /* size 70,000: 273 full level 0 tiles, a partial one of 112, one full level 1 tile, a partial one
     * of 17, a partial level 2 tile of 1 */
    CHECK(pgcl_tile_width_in_tree(0, 272, 70000) == 256 && pgcl_tile_width_in_tree(0, 273, 70000) == 112 &&
              pgcl_tile_width_in_tree(0, 274, 70000) == 0,
          "level 0 of 70000");
    CHECK(pgcl_tile_width_in_tree(1, 0, 70000) == 256 && pgcl_tile_width_in_tree(1, 1, 70000) == 17 &&
              pgcl_tile_width_in_tree(2, 0, 70000) == 1 && pgcl_tile_width_in_tree(3, 0, 70000) == 0,
          "levels 1, 2 of 70000");
    CHECK(pgcl_tile_width_in_tree(PGCL_TILE_ENTRIES, 273, 70000) == 112, "bundles of 70000");
    CHECK(pgcl_tile_width_in_tree(0, 0, 256) == 256 && pgcl_tile_width_in_tree(1, 0, 256) == 1 &&
              pgcl_tile_width_in_tree(0, 1, 256) == 0,
          "size 256: a full level 0 tile and a partial level 1 tile of width 1");
    CHECK(pgcl_tile_width_in_tree(0, 0, 0) == 0 && pgcl_tile_width_in_tree(7, 0, UINT64_MAX) == 255 &&
              pgcl_tile_width_in_tree(8, 0, UINT64_MAX) == 0 && pgcl_tile_width_in_tree(63, 0, UINT64_MAX) == 0,
          "the ends");
    pgcl_tile_id partial = {.level = 1, .index = 1, .width = 10}, full = {.level = 1, .index = 1, .width = 256};
    CHECK(pgcl_tile_in_tree(&partial, 70000) && !pgcl_tile_in_tree(&full, 70000), "in the tree of 70000");
    partial.width = 18;
    CHECK(!pgcl_tile_in_tree(&partial, 70000), "wider than the tree's tile");
    partial = (pgcl_tile_id){.level = 0, .index = 0, .width = 3};
    CHECK(pgcl_tile_in_tree(&partial, 256), "a partial tile cut from a full one");
    for (int i = 0; i < 200000; i++) {
        int h = 1 + (int)(next_random() % 8), level = (int)(next_random() % 66) - 1;
        uint64_t size = next_random() >> (next_random() % 64),
                 index = next_random() % 4 ? next_random() % 300 : next_random();
        CHECK(pgcl_tile_width_in_tree_h(h, level, index, size) == naive_width(h, level, index, size),
              "width (h %d, L %d, N %llu) of %llu", h, level, (unsigned long long)index, (unsigned long long)size);
    }
}

static void test_prefix(void) {
    unsigned char bundle[] = {0, 2, 'a', 'b', 0, 0, 0, 1, 'c'}, encoded[sizeof bundle];
    pgcl_tile_entry three[] = {{"ab", 2}, {NULL, 0}, {"c", 1}};
    CHECK(pgcl_tile_bundle_encode(three, 3, NULL) == sizeof bundle &&
              pgcl_tile_bundle_encode(three, 3, encoded) == sizeof bundle && !memcmp(encoded, bundle, sizeof bundle),
          "a bundle of three entries");
    static unsigned char src[PGCL_TILE_ENTRY_MAX], big[2 + PGCL_TILE_ENTRY_MAX];
    pgcl_tile_entry largest = {src, PGCL_TILE_ENTRY_MAX};
    CHECK(pgcl_tile_bundle_encode(&largest, 1, big) == sizeof big && big[0] == 0xff && big[1] == 0xff,
          "the largest entry: %02x%02x", big[0], big[1]);
    pgcl_tile_id id = {.level = PGCL_TILE_ENTRIES, .index = 0, .width = 3};
    size_t n = 0;
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 1, &n) == PGCL_OK && n == 4, "first entry");
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 2, &n) == PGCL_OK && n == 6, "an empty entry");
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 3, &n) == PGCL_OK && n == sizeof bundle, "all");
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 4, &n) == PGCL_ERR_INVALID, "wider than stored");
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 0, &n) == PGCL_ERR_INVALID, "width 0");
    for (size_t cut = 0; cut < sizeof bundle; cut++)
        CHECK(pgcl_tile_prefix(&id, bundle, cut, 1, &n) == PGCL_ERR_FORMAT, "cut at %zu", cut);
    unsigned char longer[sizeof bundle + 1];
    memcpy(longer, bundle, sizeof bundle);
    longer[sizeof bundle] = 0;
    CHECK(pgcl_tile_prefix(&id, longer, sizeof longer, 1, &n) == PGCL_ERR_FORMAT, "a trailing byte");
    id.width = 2;
    CHECK(pgcl_tile_prefix(&id, bundle, sizeof bundle, 1, &n) == PGCL_ERR_FORMAT, "one entry too many");
    unsigned char hashes[3 * 32] = {0};
    pgcl_tile_id lv = {.level = 2, .index = 9, .width = 3};
    CHECK(pgcl_tile_prefix(&lv, hashes, sizeof hashes, 2, &n) == PGCL_OK && n == 64, "a level tile");
    CHECK(pgcl_tile_prefix(&lv, hashes, sizeof hashes - 1, 2, &n) == PGCL_ERR_FORMAT, "a short level tile");
}

/* ---- an in-memory store ---- */

typedef struct version { /* one stored tile of (level, index) */
    int width;
    unsigned char *data;
    size_t len;
    struct version *next; /* narrower */
} version;

typedef struct node {
    int level;
    uint64_t index;
    version *widest;
    struct node *next;
} node;

enum { N_BUCKETS = 4096 };

typedef struct mem_store {
    node *bucket[N_BUCKETS];
    int height;
    bool keep_all;   /* keep every tile written (rows keyed by path) instead of one per (level, index) */
    bool exact_only; /* reads must find the exact width, not cut one from a wider tile */
    long reads, cut_reads, fail_read; /* fail_read > 0: that read (1-based) fails with PGCL_ERR_IO */
} mem_store;

static node **slot_of(mem_store *s, int level, uint64_t index) {
    node **p = &s->bucket[(index * 31 + (uint64_t)(level + 1) * 1000003) % N_BUCKETS];
    while (*p && ((*p)->level != level || (*p)->index != index))
        p = &(*p)->next;
    return p;
}

static pgcl_status mem_read(void *ctx, const pgcl_tile_id *id, const unsigned char **data, size_t *len, char *err,
                            int cap) {
    mem_store *s = ctx;
    if (++s->reads == s->fail_read) {
        pgcl_errorf(err, cap, "injected read failure");
        return PGCL_ERR_IO;
    }
    node *n = *slot_of(s, id->level, id->index);
    for (version *v = n ? n->widest : NULL; v; v = v->next) {
        if (v->width == id->width) {
            *data = v->data;
            *len = v->len;
            return PGCL_OK;
        }
    }
    if (!s->exact_only && n && n->widest->width > id->width) {
        pgcl_tile_id stored = {.level = id->level, .index = id->index, .width = n->widest->width};
        pgcl_status st = pgcl_tile_prefix(&stored, n->widest->data, n->widest->len, id->width, len);
        if (st != PGCL_OK) return st;
        *data = n->widest->data;
        s->cut_reads++;
        return PGCL_OK;
    }
    return PGCL_ERR_NOT_FOUND;
}

/* Writes a commit's tiles, checking what the store relies on: a tile supersedes exactly the
 * narrower tile stored for (level, index), or none; it starts with that one's bytes; a full tile
 * is never written twice. */
static void mem_write(mem_store *s, const pgcl_tiles_batch *b) {
    const int W = 1 << s->height;
    for (size_t i = 0; i < b->n_tiles; i++) {
        const pgcl_tile_write *w = &b->tiles[i];
        node **p = slot_of(s, w->id.level, w->id.index);
        if (!*p) {
            *p = calloc(1, sizeof **p);
            if (!*p) abort();
            (*p)->level = w->id.level;
            (*p)->index = w->id.index;
        }
        version *old = (*p)->widest;
        CHECK(old ? w->supersedes == old->width : w->supersedes == 0, "%s supersedes %d, stored %d", w->path,
              w->supersedes, old ? old->width : 0);
        CHECK(!old || (old->width < W && old->width < w->id.width), "%s rewrites a full or wider tile", w->path);
        CHECK(!old || (old->len < w->len && memcmp(old->data, w->data, old->len) == 0),
              "%s does not start with the tile it supersedes", w->path);
        version *v = calloc(1, sizeof *v);
        if (!v || !(v->data = malloc(w->len ? w->len : 1))) abort();
        memcpy(v->data, w->data, w->len);
        v->len = w->len;
        v->width = w->id.width;
        if (s->keep_all) {
            v->next = old;
        } else if (old) {
            free(old->data);
            free(old);
        }
        (*p)->widest = v;
    }
}

static void mem_free(mem_store *s) {
    for (int i = 0; i < N_BUCKETS; i++) {
        for (node *n = s->bucket[i], *nn; n; n = nn) {
            nn = n->next;
            for (version *v = n->widest, *vn; v; v = vn) {
                vn = v->next;
                free(v->data);
                free(v);
            }
            free(n);
        }
        s->bucket[i] = NULL;
    }
}

/* ---- the log under test and its oracle ---- */

enum { MAX_LEAVES = 140000 };

typedef struct oracle {
    int height;
    uint64_t size;
    pgcl_merkle_hash *leaves;    /* (MAX_LEAVES) */
    pgcl_merkle_hash *level[64]; /* level[L][i] = MTH of leaves i·W^L .. (i+1)·W^L − 1, level[0] = leaves */
    uint64_t level_n[64];
    unsigned char *bytes; /* every entry's bytes, back to back */
    size_t *off, *len;    /* (MAX_LEAVES) */
    size_t bytes_used, bytes_cap;
} oracle;

static void oracle_init(oracle *o, int height) {
    memset(o, 0, sizeof *o);
    o->height = height;
    o->leaves = malloc(MAX_LEAVES * sizeof *o->leaves);
    o->off = malloc(MAX_LEAVES * sizeof *o->off);
    o->len = malloc(MAX_LEAVES * sizeof *o->len);
    o->bytes_cap = 1 << 22;
    o->bytes = malloc(o->bytes_cap);
    if (!o->leaves || !o->off || !o->len || !o->bytes) abort();
    o->level[0] = o->leaves;
    for (int l = 1; l < 64; l++)
        if (!(o->level[l] =
                  malloc((MAX_LEAVES >> (height * l > 17 ? 17 : height * l)) * sizeof(pgcl_merkle_hash) + 32)))
            abort();
}

static void oracle_free(oracle *o) {
    free(o->leaves), free(o->off), free(o->len), free(o->bytes);
    for (int l = 1; l < 64; l++)
        free(o->level[l]);
}

/* Makes entry i: mostly short, now and then long, and the largest allowed at a few places. */
static void make_entry(oracle *o, uint64_t i) {
    size_t len = next_random() % 40;
    if (i % 997 == 5) len = 300 + next_random() % 2000;
    if (i == 300 || i == 65536 || i == 3) len = PGCL_TILE_ENTRY_MAX;
    if (o->bytes_used + len > o->bytes_cap) {
        o->bytes_cap *= 2;
        if (!(o->bytes = realloc(o->bytes, o->bytes_cap))) abort();
    }
    for (size_t k = 0; k < len; k++)
        o->bytes[o->bytes_used + k] = (unsigned char)next_random();
    o->off[i] = o->bytes_used;
    o->len[i] = len;
    o->bytes_used += len;
    o->leaves[i] = pgcl_merkle_leaf_hash(o->bytes + o->off[i], len);
}

/* Grows the oracle to size leaves: every complete subtree at a tile level, straight from the leaves. */
static void oracle_grow(oracle *o, uint64_t size) {
    for (uint64_t i = o->size; i < size; i++)
        make_entry(o, i);
    o->size = size;
    for (int l = 1; l < 64 && o->height * l < 64; l++) {
        uint64_t span = (uint64_t)1 << (o->height * l);
        if (span > size) break;
        for (; (o->level_n[l] + 1) * span <= size; o->level_n[l]++)
            o->level[l][o->level_n[l]] = pgcl_merkle_root(o->leaves + o->level_n[l] * span, span);
    }
    o->level_n[0] = size;
}

/* The expected bytes of a tile of the oracle's tree. */
static bool tile_matches(const oracle *o, const pgcl_tile_id *id, const unsigned char *data, size_t len) {
    const uint64_t first = id->index << o->height;
    if (id->level != PGCL_TILE_ENTRIES)
        return len == (size_t)id->width * 32 && memcmp(data, o->level[id->level] + first, len) == 0;
    size_t at = 0;
    for (uint64_t i = first; i < first + (uint64_t)id->width; i++) {
        if (len - at < 2 + o->len[i] || data[at] != o->len[i] >> 8 || data[at + 1] != (o->len[i] & 0xff) ||
            memcmp(data + at + 2, o->bytes + o->off[i], o->len[i]) != 0)
            return false;
        at += 2 + o->len[i];
    }
    return at == len;
}

/* The number of hashes at a level of a tree, by division: floor(size / W^level). */
static uint64_t naive_hashes(int height, int level, uint64_t size) {
    uint64_t span = 1;
    for (int l = 0; l < level; l++) {
        if (span > size >> height) return 0;
        span <<= height;
    }
    return size / span;
}

/* The tiles a commit from old to new must write: those whose width changed, in the appender's order
 * (entry bundles, then level 0, 1, ...; index ascending), each with its bytes and what it supersedes. */
static void check_writes(const oracle *o, const pgcl_tiles_batch *b, uint64_t old, uint64_t size) {
    const int h = o->height;
    size_t k = 0;
    for (int level = -1; level < 64 && h * level < 64; level++) {
        int l = level < 0 ? 0 : level;
        uint64_t from = naive_hashes(h, l, old) >> h, to = naive_hashes(h, l, size) >> h;
        for (uint64_t n = from; n <= to; n++) {
            int want = naive_width(h, level, n, size), before = naive_width(h, level, n, old);
            if (want == before) continue;
            const pgcl_tile_write *w = k < b->n_tiles ? &b->tiles[k] : NULL;
            k++;
            bool ok = w && w->id.level == level && w->id.index == n && w->id.width == want && w->supersedes == before &&
                      tile_matches(o, &w->id, w->data, w->len);
            CHECK(ok, "commit %llu -> %llu (height %d): tile %zu should be (%d, %llu, %d)", (unsigned long long)old,
                  (unsigned long long)size, h, k - 1, level, (unsigned long long)n, want);
            if (!ok) return;
            char path[PGCL_TILE_PATH_MAX];
            pgcl_tile_path(&w->id, path);
            CHECK(strcmp(path, w->path) == 0, "%s: path %s", path, w->path);
        }
    }
    CHECK(k == b->n_tiles, "commit %llu -> %llu: %zu tiles, want %zu", (unsigned long long)old,
          (unsigned long long)size, b->n_tiles, k);
}

/* Root, proofs and entries of the tree of size leaves from the store's tiles, against the oracle. */
static void check_reads(const oracle *o, pgcl_tiles_reader *r, uint64_t size, const uint64_t *earlier, int n_earlier,
                        int n_samples) {
    char err[512] = "";
    pgcl_merkle_hash root, want = pgcl_merkle_root(o->leaves, size);
    pgcl_status st = pgcl_tiles_root(r, size, &root, err, sizeof err);
    CHECK(st == PGCL_OK && same_hash(&root, &want), "root of %llu (height %d): %s %s", (unsigned long long)size,
          o->height, pgcl_status_str(st), err);
    if (size == 0) return;
    bool all = size <= 300 && n_samples > 0;
    int tries = all ? (int)size : n_samples;
    for (int t = 0; t < tries; t++) {
        uint64_t i = all ? (uint64_t)t : t == 0 ? size - 1 : t == 1 ? 0 : next_random() % size;
        pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH], want_path[PGCL_MERKLE_MAX_PATH];
        int len = -1, want_len = pgcl_merkle_inclusion_path(o->leaves, size, i, want_path);
        st = pgcl_tiles_inclusion(r, size, i, path, &len, err, sizeof err);
        CHECK(st == PGCL_OK && same_path(path, len, want_path, want_len) &&
                  pgcl_merkle_verify_inclusion(&o->leaves[i], i, size, path, len, &want),
              "inclusion of %llu in %llu (height %d): %s %s", (unsigned long long)i, (unsigned long long)size,
              o->height, pgcl_status_str(st), err);
        const unsigned char *e;
        size_t elen;
        st = pgcl_tiles_entry(r, size, i, &e, &elen, err, sizeof err);
        CHECK(st == PGCL_OK && elen == o->len[i] && memcmp(e, o->bytes + o->off[i], elen) == 0,
              "entry %llu of %llu: %s %s", (unsigned long long)i, (unsigned long long)size, pgcl_status_str(st), err);
    }
    for (int k = 0; k < n_earlier + (n_samples > 0); k++) {
        uint64_t m = k < n_earlier ? earlier[k] : 1 + next_random() % size;
        if (m == 0) continue;
        pgcl_merkle_hash proof[PGCL_MERKLE_MAX_PATH], want_proof[PGCL_MERKLE_MAX_PATH];
        pgcl_merkle_hash old_root = pgcl_merkle_root(o->leaves, m);
        int len = -1, want_len = pgcl_merkle_consistency_proof(o->leaves, m, size, want_proof);
        st = pgcl_tiles_consistency(r, m, size, proof, &len, err, sizeof err);
        CHECK(st == PGCL_OK && same_path(proof, len, want_proof, want_len) &&
                  pgcl_merkle_verify_consistency(m, size, &old_root, &want, proof, len),
              "consistency %llu -> %llu (height %d): %s %s", (unsigned long long)m, (unsigned long long)size, o->height,
              pgcl_status_str(st), err);
    }
}

/* Grows a log commit by commit to each of targets[] (batches of at most max_batch, random below it
 * when random_batches), checking every commit's writes and the reads at each target. */
static void run_log(int height, bool keep_all, const uint64_t *targets, int n_targets, uint64_t max_batch,
                    bool random_batches, int n_samples) {
    oracle o;
    oracle_init(&o, height);
    mem_store s = {.height = height, .keep_all = keep_all, .exact_only = keep_all};
    pgcl_tiles_reader *r = pgcl_tiles_reader_create_h(height, mem_read, &s);
    PGCL_ASSERT(r);
    uint64_t size = 0, commits[4096];
    int n_commits = 0;
    pgcl_merkle_hash root = pgcl_merkle_root(o.leaves, 0);
    char err[512] = "";
    for (int t = 0; t < n_targets; t++) {
        while (size < targets[t]) {
            uint64_t batch = targets[t] - size;
            if (batch > max_batch) batch = random_batches ? 1 + next_random() % max_batch : max_batch;
            uint64_t old = size;
            oracle_grow(&o, size + batch);
            pgcl_tile_entry *e = malloc(batch * sizeof *e);
            if (!e) abort();
            for (uint64_t i = 0; i < batch; i++)
                e[i] = (pgcl_tile_entry){.data = o.bytes + o.off[old + i], .len = o.len[old + i]};
            pgcl_tiles_batch *b = NULL;
            pgcl_status st = pgcl_tiles_append_h(height, mem_read, &s, old, &root, e, batch, &b, err, sizeof err);
            free(e);
            CHECK(st == PGCL_OK && b, "append %llu to %llu (height %d): %s %s", (unsigned long long)batch,
                  (unsigned long long)old, height, pgcl_status_str(st), err);
            if (st != PGCL_OK) break;
            pgcl_merkle_hash want = pgcl_merkle_root(o.leaves, old + batch);
            CHECK(b->old_size == old && b->new_size == old + batch && same_hash(&b->old_root, &root) &&
                      same_hash(&b->new_root, &want),
                  "root after %llu -> %llu (height %d)", (unsigned long long)old, (unsigned long long)(old + batch),
                  height);
            check_writes(&o, b, old, old + batch);
            mem_write(&s, b);
            root = b->new_root;
            size = b->new_size;
            pgcl_tiles_batch_destroy(b);
            if (n_commits < 4096) commits[n_commits++] = size;
        }
        /* the reads at this target; consistency from the last few commits and the first ones */
        uint64_t earlier[8];
        int n_earlier = 0;
        for (int k = n_commits - 1; k >= 0 && k >= n_commits - 4; k--)
            earlier[n_earlier++] = commits[k];
        for (int k = 0; k < n_commits && k < 4; k++)
            earlier[n_earlier++] = commits[k];
        check_reads(&o, r, size, earlier, n_earlier, n_samples);
    }
    /* sizes that were never a commit: each tile cut from a wider one (one row per (level, index)) */
    if (!keep_all) {
        for (int k = 0; k < 6 && size > 0; k++) {
            uint64_t m = k == 0 ? 1 : 1 + next_random() % size;
            check_reads(&o, r, m, NULL, 0, k < 2 ? 2 : 0);
        }
    }
    pgcl_tiles_reader_destroy(r);
    mem_free(&s);
    oracle_free(&o);
}

static void test_logs(void) {
    /* height 8: the boundaries of levels 0, 1 and 2, one commit at a time */
    static const uint64_t edges[] = {0, 1, 255, 256, 257, 511, 512, 513, 1000, 65535, 65536, 65537, 65793, 70000};
    run_log(8, false, edges, sizeof edges / sizeof *edges, 70000, false, 4);
    /* the same sizes with every tile kept (reads find the exact width) and batches of at most 300 */
    static const uint64_t few[] = {0, 1, 255, 256, 257, 600, 4000};
    run_log(8, true, few, sizeof few / sizeof *few, 300, true, 3);
    /* every size from 0 to 600, a commit each: every inclusion proof up to 300 */
    uint64_t each[601];
    for (int i = 0; i <= 600; i++)
        each[i] = (uint64_t)i;
    run_log(8, false, each, 601, 1, false, 0);
    static const uint64_t at[] = {255, 256, 257, 300, 511, 512, 513};
    run_log(8, false, at, sizeof at / sizeof *at, 1000, false, 1);
    /* one batch of 70,000, then 65,536 more (level 2's first tile of 256 becomes two of 1) */
    static const uint64_t jump[] = {70000, 70001, 135537};
    run_log(8, false, jump, sizeof jump / sizeof *jump, 70000, false, 6);
    /* random batches across 20,000 leaves */
    static const uint64_t far[] = {20000};
    run_log(8, false, far, 1, 700, true, 2);
    /* small heights: every level's boundaries with thousands of leaves (height 1: 12 levels) */
    for (int h = 1; h <= 3; h++) {
        uint64_t w = (uint64_t)1 << h, targets[40];
        int n = 0;
        for (uint64_t span = 1; span * w <= 3000 && n < 36; span *= w) {
            targets[n++] = span * w - 1;
            targets[n++] = span * w;
            targets[n++] = span * w + 1;
        }
        for (int i = 0; i + 1 < n; i++) /* sorted, distinct */
            if (targets[i + 1] <= targets[i]) targets[i + 1] = targets[i] + 1;
        targets[n++] = 3000;
        run_log(h, h == 2, targets, n, 1, false, 3);
        run_log(h, h != 2, targets, n, 2 * w + 1, true, 3);
        uint64_t one[] = {1, 2999, 3000};
        run_log(h, false, one, 3, 3000, false, 3);
    }
}

/* ---- refusals ---- */

static void test_refusals(void) {
    oracle o;
    oracle_init(&o, 8);
    oracle_grow(&o, 600);
    mem_store s = {.height = 8};
    pgcl_tile_entry e[600];
    for (int i = 0; i < 600; i++)
        e[i] = (pgcl_tile_entry){.data = o.bytes + o.off[i], .len = o.len[i]};
    char err[512] = "";
    pgcl_tiles_batch *b = NULL;
    pgcl_tile_entry too_long = {.data = o.bytes, .len = PGCL_TILE_ENTRY_MAX + 1};
    CHECK(pgcl_tiles_append(mem_read, &s, 0, NULL, &too_long, 1, &b, err, sizeof err) == PGCL_ERR_INVALID && !b,
          "an entry of 65536 bytes");
    CHECK(pgcl_tiles_append(mem_read, &s, UINT64_MAX, NULL, e, 1, &b, err, sizeof err) == PGCL_ERR_INVALID && !b,
          "past 2^64 leaves");
    CHECK(pgcl_tiles_append(mem_read, &s, 5, NULL, e, 1, &b, err, sizeof err) == PGCL_ERR_NOT_FOUND && !b &&
              strstr(err, "tile/entries/000.p/5"),
          "a missing partial tile: %s", err);
    CHECK(pgcl_tiles_append(mem_read, &s, 0, NULL, e, 0, &b, err, sizeof err) == PGCL_OK && b && b->n_tiles == 0,
          "an empty batch");
    pgcl_tiles_batch_destroy(b);
    b = NULL;
    CHECK(pgcl_tiles_append(mem_read, &s, 0, NULL, e, 300, &b, err, sizeof err) == PGCL_OK, "300 entries");
    mem_write(&s, b);
    pgcl_merkle_hash root = b->new_root, wrong = root;
    pgcl_tiles_batch_destroy(b);
    b = NULL;
    wrong.b[7] ^= 1;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, &wrong, e + 300, 1, &b, err, sizeof err) == PGCL_ERR_MISMATCH && !b,
          "a wrong recorded root");
    /* fault injection: each read of an append and of a proof, failing in turn */
    for (long n = 1; n <= 4; n++) { /* three reads: the partial bundle, level 0's and level 1's tiles */
        s.fail_read = s.reads + n;
        pgcl_status st = pgcl_tiles_append(mem_read, &s, 300, &root, e + 300, 20, &b, err, sizeof err);
        CHECK(n > 3 ? st == PGCL_OK : (st == PGCL_ERR_IO && !b && strstr(err, "injected")), "read %ld fails: %s", n,
              pgcl_status_str(st));
        pgcl_tiles_batch_destroy(b);
        b = NULL;
    }
    pgcl_tiles_reader *r = pgcl_tiles_reader_create(mem_read, &s);
    pgcl_merkle_hash path[PGCL_MERKLE_MAX_PATH];
    int len;
    s.fail_read = s.reads + 1;
    CHECK(pgcl_tiles_inclusion(r, 300, 3, path, &len, err, sizeof err) == PGCL_ERR_IO, "a failing read in a proof");
    CHECK(pgcl_tiles_inclusion(r, 300, 300, path, &len, err, sizeof err) == PGCL_ERR_INVALID, "index = size");
    CHECK(pgcl_tiles_consistency(r, 0, 300, path, &len, err, sizeof err) == PGCL_ERR_INVALID, "from 0");
    CHECK(pgcl_tiles_consistency(r, 301, 300, path, &len, err, sizeof err) == PGCL_ERR_INVALID, "first > second");
    pgcl_merkle_hash ignored;
    CHECK(pgcl_tiles_root(r, 600, &ignored, err, sizeof err) == PGCL_ERR_NOT_FOUND && strstr(err, "tile/"),
          "a tree larger than the store's: %s", err);
    CHECK(pgcl_tiles_consistency(r, 300, 300, path, &len, err, sizeof err) == PGCL_OK && len == 0, "first = second");

    /* tampering with the stored partial tiles */
    node *lv0 = *slot_of(&s, 0, 1), *bundle = *slot_of(&s, PGCL_TILE_ENTRIES, 1);
    PGCL_ASSERT(lv0 && bundle && lv0->widest->width == 44);
    lv0->widest->data[40] ^= 1;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, NULL, e + 300, 1, &b, err, sizeof err) == PGCL_ERR_MISMATCH && !b,
          "a level 0 tile that disagrees with its bundle: %s", err);
    const unsigned char *ent;
    size_t elen;
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_entry(r, 300, 257, &ent, &elen, err, sizeof err) == PGCL_ERR_MISMATCH, "the entry's leaf: %s",
          err);
    lv0->widest->data[40] ^= 1;
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_entry(r, 300, 257, &ent, &elen, err, sizeof err) == PGCL_OK, "restored");
    lv0->widest->len--;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, NULL, e + 300, 1, &b, err, sizeof err) == PGCL_ERR_FORMAT && !b,
          "a short level 0 tile: %s", err);
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_root(r, 300, &ignored, err, sizeof err) == PGCL_ERR_FORMAT, "a short tile in a read");
    lv0->widest->len++;
    bundle->widest->len++;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, NULL, e + 300, 1, &b, err, sizeof err) == PGCL_ERR_FORMAT && !b,
          "a bundle with a trailing byte: %s", err);
    bundle->widest->len--;
    node *lv1 = *slot_of(&s, 1, 0);
    pgcl_merkle_hash recorded;
    pgcl_tiles_reader_reset(r);
    CHECK(pgcl_tiles_root(r, 300, &recorded, err, sizeof err) == PGCL_OK && same_hash(&recorded, &root), "root");
    lv1->widest->data[0] ^= 1;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, &recorded, e + 300, 1, &b, err, sizeof err) == PGCL_ERR_MISMATCH && !b,
          "a level 1 tile that does not give the recorded root: %s", err);
    lv1->widest->data[0] ^= 1;
    CHECK(pgcl_tiles_append(mem_read, &s, 300, &recorded, e + 300, 1, &b, err, sizeof err) == PGCL_OK && b,
          "restored: %s", err);
    pgcl_tiles_batch_destroy(b);
    pgcl_tiles_reader_destroy(r);
    mem_free(&s);
    oracle_free(&o);
}

int main(void) {
    test_paths();
    test_widths();
    test_prefix();
    test_refusals();
    test_logs();
    return test_finish("test_tiles");
}
